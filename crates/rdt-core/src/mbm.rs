//! What resctrl shows about memory bandwidth monitoring beyond `num_rmids` and
//! `mon_features`: AMD's assignable counters (ABMC, Linux 6.18+), AMD's bandwidth event
//! configuration (BMEC, Linux 6.3+) and Intel's Sub-NUMA Clustering (SNC, Linux 6.11+).
//! [`crate::Backend::mbm_details`] reports them; the MSR interface has none of them.
//!
//! # References
//! Linux `Documentation/filesystems/resctrl.rst` ("mbm_assign_mode", "num_mbm_cntrs",
//! "available_mbm_cntrs", "event_filter", "mbm_total_bytes_config", SNC);
//! `fs/resctrl/monitor.c` `resctrl_mbm_assign_mode_show`, `event_filter_show`,
//! `mbm_L3_assignments_write`; AMD64 PQoS Extensions pub. 56375 (BMEC, ABMC).

use crate::RmidEvent;

/// The memory transactions a BMEC configuration or an ABMC `event_filter` selects, by bit
/// (`fs/resctrl/monitor.c` `mbm_transactions[]`; the `*_bytes_config` value is the same
/// bitmask).
pub const MBM_TRANSACTIONS: [&str; 7] = [
    "local_reads",
    "remote_reads",
    "local_non_temporal_writes",
    "remote_non_temporal_writes",
    "local_reads_slow_memory",
    "remote_reads_slow_memory",
    "dirty_victim_writes_all",
];

/// Every transaction bit the kernel knows (`MAX_EVT_CONFIG_BITS`): the default total
/// configuration.
pub const MBM_CONFIG_ALL: u32 = 0x7f;
/// The default local configuration: local reads, local non-temporal writes, local
/// slow-memory reads (`fs/resctrl/monitor.c` `resctrl_mon_resource_init`).
pub const MBM_CONFIG_LOCAL_DEFAULT: u32 = 0x15;

/// The transaction names of `bits`, in bit order (`event_filter`'s text without the
/// commas).
#[must_use]
pub fn mbm_transaction_names(bits: u32) -> Vec<&'static str> {
    MBM_TRANSACTIONS
        .iter()
        .enumerate()
        .filter(|(b, _)| bits & (1 << b) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// The default configuration of an MBM event (total: every transaction; local: the local
/// ones); `None` for LLC occupancy, which has none.
#[must_use]
pub const fn mbm_default_config(event: RmidEvent) -> Option<u32> {
    match event {
        RmidEvent::MbmTotal => Some(MBM_CONFIG_ALL),
        RmidEvent::MbmLocal => Some(MBM_CONFIG_LOCAL_DEFAULT),
        RmidEvent::LlcOccupancy => None,
    }
}

/// `info/L3_MON/mbm_assign_mode`'s selected mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignMode {
    /// `[default]`: every RMID counts all the time (hardware may reuse counters).
    Default,
    /// `[mbm_event]`: a group's MBM events count only in the domains where a hardware
    /// counter is assigned to them (`mbm_L3_assignments`); elsewhere they read `Unassigned`.
    MbmEvent,
}

impl AssignMode {
    /// The kernel's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::MbmEvent => "mbm_event",
        }
    }
}

/// Assignable MBM counters (AMD ABMC, Linux 6.18+).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterAssignment {
    /// The selected mode.
    pub mode: AssignMode,
    /// `num_mbm_cntrs`: counters per L3 domain, `(domain id, count)`.
    pub counters: Vec<(u32, u32)>,
    /// `available_mbm_cntrs`: free counters per L3 domain; `None` outside `mbm_event` mode
    /// (the file then reads an error).
    pub available: Option<Vec<(u32, u32)>>,
    /// `mbm_assign_on_mkdir`: new groups get counters when made; `None` outside
    /// `mbm_event` mode.
    pub on_mkdir: Option<bool>,
}

/// How one MBM event's transactions are configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventConfig {
    /// BMEC: `info/L3_MON/mbm_{total,local}_bytes_config`, one bitmask per L3 domain,
    /// `(domain id, bits)`.
    PerDomain(Vec<(u32, u32)>),
    /// ABMC's `info/L3_MON/event_configs/<event>/event_filter`: one bitmask for every
    /// assigned counter of the event.
    Filter(u32),
}

/// The resctrl monitoring details of [`crate::Backend::mbm_details`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MbmDetails {
    /// ABMC; `None` without `num_mbm_cntrs`.
    pub assign: Option<CounterAssignment>,
    /// Each MBM event's configuration (total first), where the kernel shows one.
    pub event_configs: Vec<(RmidEvent, EventConfig)>,
    /// SNC: NUMA nodes per L3 cache, the number of `mon_sub_L3_YY` directories in
    /// `mon_data/mon_L3_XX` (the kernel makes them only when SNC is on,
    /// `mkdir_mondata_subdir_snc`); `None` without them. Each `mon_L3_XX` file is the sum
    /// of its nodes' files.
    pub snc_nodes_per_l3: Option<u32>,
}

impl MbmDetails {
    /// Whether there is nothing to report.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.assign.is_none() && self.event_configs.is_empty() && self.snc_nodes_per_l3.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_names_follow_the_bits() {
        assert_eq!(
            mbm_transaction_names(MBM_CONFIG_LOCAL_DEFAULT),
            [
                "local_reads",
                "local_non_temporal_writes",
                "local_reads_slow_memory"
            ]
        );
        assert_eq!(mbm_transaction_names(MBM_CONFIG_ALL).len(), 7);
        assert!(mbm_transaction_names(0).is_empty());
    }
}

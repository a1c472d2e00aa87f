//! What resctrl shows about memory bandwidth monitoring beyond `num_rmids` and
//! `mon_features`: AMD's assignable counters (ABMC, Linux 6.18+), AMD's bandwidth event
//! configuration (BMEC, Linux 6.3+) and Intel's Sub-NUMA Clustering (SNC, Linux 6.11+).
//! [`crate::BackendExt::mbm_details`] reports them; the MSR interface uses ABMC and BMEC
//! through their registers ([`AmdMbmCaps`], rdt-msr) but reports no details.
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

/// AMD's MBM extensions as CPUID enumerates them (Linux `rdt_get_mon_l3_config`,
/// `rdt_init_res_defs_amd`; AMD pub. 56375): BMEC, CPUID.(8000_0020H,0):EBX\[3\], makes the
/// transactions each MBM event counts configurable (QOS_EVT_CFG_n); ABMC, EBX\[5\], counts
/// MBM only in counters assigned to an RMID and event (L3_QOS_ABMC_CFG). Both interfaces use
/// them: resctrl through `mbm_*_bytes_config` and `mbm_L3_assignments`, the MSR interface
/// through the registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AmdMbmCaps {
    /// BMEC (EBX\[3\]).
    pub bmec: bool,
    /// The transaction bits a configuration may hold, CPUID.(8000_0020H,3):ECX\[6:0\]
    /// (the kernel's `mbm_cfg_mask`); 0 without BMEC or ABMC.
    pub event_config_mask: u32,
    /// ABMC: the assignable counters per L3 domain, CPUID.(8000_0020H,5):EBX\[15:0\] + 1
    /// (the kernel's `num_mbm_cntrs`); `None` without ABMC.
    pub abmc_counters: Option<u32>,
}

/// The kernel's MBM correction for an erratum of Broadwell-X (family 6 model 4FH) and
/// Skylake-X/Cascade Lake (model 55H): MBM counts of RMIDs above a threshold are off by a
/// factor the kernel multiplies them by (`arch/x86/kernel/cpu/resctrl/monitor.c`
/// `intel_rdt_mbm_apply_quirk`, `mbm_cf_table`, `get_corrected_mbm_count`; the table is
/// indexed by `num_rmids / 8 − 1`, CPUID.(0FH,1):ECX + 1). The MSR backend applies it as
/// the kernel does, so both interfaces report the same bytes; pqos's MSR interface does not.
///
/// # Examples
/// ```
/// use rdt_core::mbm::MbmCorrection;
/// // Skylake-SP with 144 RMIDs: RMIDs above 127 count × 1.185255
/// let c = MbmCorrection::from_table(144).unwrap();
/// assert_eq!(c.threshold, 127);
/// assert_eq!(c.corrected(127, 1_000_000), 1_000_000);
/// assert_eq!(c.corrected(128, 1_000_000), 1_185_255);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MbmCorrection {
    /// RMIDs above this one are corrected.
    pub threshold: u32,
    /// The factor × 2^20 (the kernel's `CF()`: `1048576 × cf + 0.5`, truncated).
    pub factor: u64,
}

impl MbmCorrection {
    /// `mbm_cf_table` (`monitor.c`): (RMID threshold, factor × 2^20), by `num_rmids / 8 − 1`.
    const TABLE: [(u32, u64); 28] = [
        (7, 1_048_576),   // 1.000000
        (15, 1_048_576),  // 1.000000
        (15, 1_016_752),  // 0.969650
        (31, 1_048_576),  // 1.000000
        (31, 1_118_481),  // 1.066667
        (31, 1_016_752),  // 0.969650
        (47, 1_198_372),  // 1.142857
        (63, 1_048_576),  // 1.000000
        (63, 1_242_683),  // 1.185115
        (63, 1_118_362),  // 1.066553
        (79, 1_525_201),  // 1.454545
        (95, 1_048_576),  // 1.000000
        (95, 1_290_555),  // 1.230769
        (95, 1_198_372),  // 1.142857
        (95, 1_118_481),  // 1.066667
        (127, 1_048_576), // 1.000000
        (127, 1_315_819), // 1.254863
        (127, 1_242_830), // 1.185255
        (151, 1_048_576), // 1.000000
        (127, 1_118_481), // 1.066667
        (167, 1_048_576), // 1.000000
        (159, 1_524_980), // 1.454334
        (183, 1_048_576), // 1.000000
        (127, 1_016_850), // 0.969744
        (191, 1_342_435), // 1.280246
        (191, 1_290_714), // 1.230921
        (215, 1_048_576), // 1.000000
        (191, 1_198_646), // 1.143118
    ];

    /// The table's entry for a part with `num_rmids` RMIDs; `None` beyond the table (the
    /// kernel applies no correction then).
    #[must_use]
    pub fn from_table(num_rmids: u32) -> Option<Self> {
        let index = (num_rmids / 8).checked_sub(1)?;
        let &(threshold, factor) = Self::TABLE.get(usize::try_from(index).ok()?)?;
        Some(Self { threshold, factor })
    }

    /// The correction of a platform, where the kernel applies one: an Intel family 6 model
    /// 4FH or 55H part with MBM (`__check_quirks_intel`).
    #[must_use]
    pub fn of(caps: &crate::Capabilities) -> Option<Self> {
        let (family, model, _) = crate::cpuid::fms(caps.signature?);
        if caps.vendor != crate::Vendor::Intel || family != 6 || !matches!(model, 0x4f | 0x55) {
            return None;
        }
        let m = caps.monitoring.get()?;
        if !(m.events.mbm_total || m.events.mbm_local) {
            return None;
        }
        Self::from_table(m.num_rmids)
    }

    /// The factor × 2^20 that applies to `rmid`'s counts: `None` at or below the threshold.
    #[must_use]
    pub const fn factor_for(&self, rmid: u32) -> Option<u64> {
        if rmid > self.threshold && self.factor != 1 << 20 {
            Some(self.factor)
        } else {
            None
        }
    }

    /// `get_corrected_mbm_count`: `chunks` (counts, not bytes) of `rmid` as the kernel
    /// reports them: `chunks × factor >> 20` above the threshold, unchanged otherwise.
    #[must_use]
    pub fn corrected(&self, rmid: u32, chunks: u64) -> u64 {
        self.factor_for(rmid)
            .map_or(chunks, |f| scale_by_factor(chunks, f))
    }
}

/// `chunks × factor >> 20` without overflow (saturating at `u64::MAX`).
#[must_use]
pub fn scale_by_factor(chunks: u64, factor: u64) -> u64 {
    u64::try_from((u128::from(chunks) * u128::from(factor)) >> 20).unwrap_or(u64::MAX)
}

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

/// The resctrl monitoring details of [`crate::BackendExt::mbm_details`].
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

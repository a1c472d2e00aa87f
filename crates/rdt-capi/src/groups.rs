//! The monitoring groups started through the API (their `pqos_mon_data` by address), what
//! `pqos_mon_poll` adds up for each between its polls ([`crate::mon`]).

use std::collections::HashMap;

use libc::pid_t;
use rdt_pqos::{Backend, MemRegion, MonEvents, MonGroupId, Rdt};

use crate::types::{PQOS_MAX_MEM_REGIONS, pqos_mon_data};

/// Counts added up between polls, and since the start.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) local: u64,
    pub(crate) total: u64,
    pub(crate) remote: u64,
    pub(crate) instructions: u64,
    pub(crate) cycles: u64,
    pub(crate) misses: u64,
    pub(crate) references: u64,
    /// The uncore PCIe events, in pqos.h's order: LLC misses of reads, of writes, LLC
    /// references of reads, of writes.
    pub(crate) pcie: [u64; 4],
}

/// The uncore events in the order of [`Counts::pcie`].
pub(crate) const PCIE_EVENTS: [MonEvents; 4] = [
    MonEvents::LLC_MISS_PCIE_READ,
    MonEvents::LLC_MISS_PCIE_WRITE,
    MonEvents::LLC_REF_PCIE_READ,
    MonEvents::LLC_REF_PCIE_WRITE,
];

impl Counts {
    pub(crate) fn add(&mut self, v: &rdt_pqos::MonValues) {
        let add = |a: &mut u64, d: Option<u64>| *a = a.wrapping_add(d.unwrap_or(0));
        add(&mut self.local, v.mbm_local_delta_bytes);
        add(&mut self.total, v.mbm_total_delta_bytes);
        add(&mut self.remote, v.mbm_remote_delta_bytes);
        add(&mut self.instructions, v.instructions_delta);
        add(&mut self.cycles, v.cycles_delta);
        add(&mut self.misses, v.llc_misses_delta);
        add(&mut self.references, v.llc_references_delta);
        if let Some(u) = v.uncore {
            for (a, e) in self.pcie.iter_mut().zip(PCIE_EVENTS) {
                add(a, u.get(e));
            }
        }
    }
}

/// What a group is made of.
pub(crate) enum Members {
    Cores(Box<[u32]>),
    Tasks(Box<[pid_t]>),
    /// An uncore group of sockets (`pqos_mon_start_uncore`; the library keeps the sockets).
    Sockets,
}

/// A group started through this API.
pub(crate) struct Group {
    /// The library's group; `None` after `pqos_mon_reset` stopped it.
    pub(crate) id: Option<MonGroupId>,
    /// The `pqos_mon_data` was allocated here (`pqos_mon_start_cores`, `_pids2`) and is
    /// freed by `pqos_mon_stop`.
    pub(crate) owned: bool,
    pub(crate) members: Members,
    pub(crate) valid_mbm_read: bool,
    pub(crate) since_poll: Counts,
    pub(crate) since_start: Counts,
    /// The uncore events' values and deltas at the group's last `pqos_mon_poll` (libpqos
    /// keeps them in the group's internal data, read by `pqos_mon_get_value`), in the order
    /// of [`Counts::pcie`].
    pub(crate) pcie: [(u64, u64); 4],
    /// The memory regions the group reports (MMIO interface; `pqos_mon_data.regions`), in
    /// the order the program gave them: slot `j` of `region_values` is `regions[j]`.
    pub(crate) regions: Vec<MemRegion>,
    /// Per region slot: bytes since the group's previous `pqos_mon_poll`, and since its start.
    pub(crate) region_since_poll: [u64; PQOS_MAX_MEM_REGIONS],
    pub(crate) region_since_start: [u64; PQOS_MAX_MEM_REGIONS],
    /// What `intl` points at: this group's own address, never read by C.
    pub(crate) _intl: Box<u8>,
}

impl Group {
    /// Adds the library's region traffic of the last poll (every L3 domain of the group
    /// summed per region; an unknown delta adds nothing) to the pending and total counts of
    /// the group's region slots.
    fn add_regions(&mut self, values: &[rdt_pqos::RegionValues]) {
        for (slot, region) in self.regions.iter().enumerate() {
            let bytes: u64 = values
                .iter()
                .filter(|v| v.region == *region)
                .filter_map(|v| v.delta_bytes)
                .fold(0, u64::wrapping_add);
            self.region_since_poll[slot] = self.region_since_poll[slot].wrapping_add(bytes);
            self.region_since_start[slot] = self.region_since_start[slot].wrapping_add(bytes);
        }
    }
}

/// The groups started through this API, by the address of their `pqos_mon_data`.
#[derive(Default)]
pub(crate) struct Groups {
    pub(crate) map: HashMap<usize, Group>,
}

impl Groups {
    /// The library's group behind `group`.
    pub(crate) fn library_id(&self, group: *const pqos_mon_data) -> Option<MonGroupId> {
        self.map.get(&(group as usize))?.id
    }

    /// Polls the library once and adds every group's counts since the previous library poll
    /// to what it has pending (`since_poll`) and to its totals (`since_start`); the same for
    /// the traffic to each memory region a group reports (MMIO interface).
    ///
    /// # Errors
    /// As [`Backend::poll`].
    pub(crate) fn poll_library(&mut self, rdt: &mut Rdt) -> Result<(), rdt_pqos::Error> {
        rdt.poll()?;
        for g in self.map.values_mut() {
            if let Some(v) = g.id.and_then(|id| rdt.values(id)) {
                g.since_poll.add(v);
                g.since_start.add(v);
            }
            if let (Some(id), false) = (g.id, g.regions.is_empty())
                && let Some(values) = rdt.regions().and_then(|r| r.region_values(id))
            {
                let values = values.to_vec();
                g.add_regions(&values);
            }
        }
        Ok(())
    }

    /// Stops every group in the library (`pqos_fini`); their structures stay as they are.
    pub(crate) fn stop_all(&mut self, rdt: &mut Rdt) {
        for g in self.map.values_mut() {
            if let Some(id) = g.id.take()
                && let Err(e) = rdt.stop_monitoring(id)
            {
                log::warn!("stopping a monitoring group: {e}");
            }
        }
    }
}

//! The capabilities as pqos's library reports them on an interface: the rules `pqos -d`/`-D`
//! prints by and libpqos's `pqos_cap_get` fills its structures by (`lib/hw_cap.c` on the
//! MSR interface, `lib/os_cap.c` on the OS interface), in one place for the pqos-compatible
//! CLI and the libpqos C ABI.
//!
//! - Monitoring events ([`mon_events`]) come in libpqos's order: LLC occupancy; on MSR total
//!   then local bandwidth (`hw_cap_mon_discover`), on OS local then total (`os_cap_mon_discover`'s
//!   `events[]`); remote bandwidth (a virtual event: total and local both present); then the
//!   PMU events, on MSR IPC, LLC misses, LLC references, on OS LLC misses, LLC references, IPC;
//!   on MSR last the uncore PCIe events where the CPU has them
//!   ([`Capabilities::uncore_pcie`]). Their numbers (scale factor, max RMID, counter length):
//!   on MSR each RDT event's CPUID values and 0s for the PMU events; on OS scale factor 1
//!   (resctrl counts bytes), resctrl's `num_rmids`, no counter length, for every event.
//! - Classes ([`cat_classes`], [`mba_classes`]): on MSR each resource's own count (a CAT
//!   resource's halved with CDP on); on OS one count for all, the fewest
//!   ([`Capabilities::os_classes`]).
//! - MBA numbers ([`mba_numbers`]): `throttle_step` and `throttle_max` (`-D` shows
//!   `100 - throttle_max` as `Min B/W`).

use crate::{
    Capabilities, CatCaps, Interface, MbaCaps, MbaCtrl, MbaKind, MonEvents, MonitoringCaps,
    SncState,
};

/// Which section an event is listed in: the RDT events (CMT, MBM) or the PMU events (core
/// PMU and uncore).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventSource {
    /// An RDT event (RMID-based): LLC occupancy, memory bandwidth.
    Rdt,
    /// A performance-counter event: IPC, LLC misses and references, the uncore PCIe events.
    Pmu,
}

/// One monitoring event as libpqos reports it (`struct pqos_monitor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PqosEvent {
    /// The event (one bit).
    pub event: MonEvents,
    /// RDT or PMU event.
    pub source: EventSource,
    /// Factor from the counter to bytes (`scale_factor`); 0 where libpqos leaves it 0.
    pub scale_factor: u32,
    /// RMIDs (`max_rmid`); 0 where libpqos leaves it 0.
    pub max_rmid: u32,
    /// Counter width in bits (`counter_length`); 0 on OS and for PMU events.
    pub counter_length: u32,
}

/// The monitoring events libpqos lists on `iface`, in its order (module docs); `None` when
/// it reports no monitoring capability: no RDT monitoring on MSR, nor on OS unless the PMU
/// counts something (`os_cap_mon_discover` then makes a capability of the perf events).
///
/// # Examples
/// ```
/// use rdt_core::fake::FakeBackend;
/// use rdt_core::pqos_caps::mon_events;
/// use rdt_core::{Backend, Interface, MonEvents};
///
/// let b = FakeBackend::broadwell_2s();
/// let msr = mon_events(b.capabilities(), Interface::Msr).expect("monitoring");
/// let os = mon_events(b.capabilities(), Interface::Os).expect("monitoring");
/// assert_eq!((msr[1].event, os[1].event), (MonEvents::MBM_TOTAL, MonEvents::MBM_LOCAL));
/// assert_eq!(os[0].scale_factor, 1);
/// ```
#[must_use]
pub fn mon_events(caps: &Capabilities, iface: Interface) -> Option<Vec<PqosEvent>> {
    let m = caps.monitoring.get();
    let e = m.map(|m| m.events).unwrap_or_default();
    let rmids = m.map_or(0, |m| m.num_rmids);
    let rdt_numbers = match (m, iface) {
        (Some(m), Interface::Msr | Interface::Mmio) => {
            (m.upscaling_factor, m.num_rmids, m.counter_width)
        }
        (Some(m), Interface::Os) => (1, m.num_rmids, 0),
        (None, _) => (0, 0, 0),
    };
    let pmu_numbers = match iface {
        Interface::Msr | Interface::Mmio => (0, 0, 0),
        Interface::Os => (1, rmids, 0),
    };
    let (memory, pmu) = match iface {
        Interface::Msr | Interface::Mmio => (
            [MonEvents::MBM_TOTAL, MonEvents::MBM_LOCAL],
            [
                MonEvents::IPC,
                MonEvents::LLC_MISSES,
                MonEvents::LLC_REFERENCES,
            ],
        ),
        Interface::Os => (
            [MonEvents::MBM_LOCAL, MonEvents::MBM_TOTAL],
            [
                MonEvents::LLC_MISSES,
                MonEvents::LLC_REFERENCES,
                MonEvents::IPC,
            ],
        ),
    };
    let rdt_on = |event: MonEvents| match event {
        MonEvents::LLC_OCCUPANCY => e.llc_occupancy,
        MonEvents::MBM_TOTAL => e.mbm_total,
        MonEvents::MBM_LOCAL => e.mbm_local,
        MonEvents::MBM_REMOTE => e.mbm_total && e.mbm_local,
        _ => false,
    };
    let pmu_on = |event: MonEvents| match event {
        MonEvents::IPC => caps.pmu.ipc,
        MonEvents::LLC_MISSES => caps.pmu.llc_misses,
        MonEvents::LLC_REFERENCES => caps.pmu.llc_references,
        _ => caps.uncore_pcie && iface.uses_msrs() && MonEvents::UNCORE.contains(event),
    };
    let make = |event, source, (scale_factor, max_rmid, counter_length)| PqosEvent {
        event,
        source,
        scale_factor,
        max_rmid,
        counter_length,
    };
    let rdt = [MonEvents::LLC_OCCUPANCY]
        .into_iter()
        .chain(memory)
        .chain([MonEvents::MBM_REMOTE])
        .filter(|&ev| rdt_on(ev))
        .map(|ev| make(ev, EventSource::Rdt, rdt_numbers));
    let pmu = pmu
        .into_iter()
        .chain(MonEvents::UNCORE.iter())
        .filter(|&ev| pmu_on(ev))
        .map(|ev| make(ev, EventSource::Pmu, pmu_numbers));
    let events: Vec<PqosEvent> = rdt.chain(pmu).collect();
    if m.is_none() && (iface.uses_msrs() || events.is_empty()) {
        return None;
    }
    Some(events)
}

/// The monitoring capability's own numbers libpqos reports (`struct pqos_cap_mon`):
/// `max_rmid` (on MSR the highest RMID + 1, `hw_cap_mon_discover`; on OS resctrl's
/// `num_rmids`), 0 without RDT monitoring.
#[must_use]
pub fn mon_max_rmid(m: Option<&MonitoringCaps>, iface: Interface) -> u32 {
    m.map_or(0, |m| match iface {
        Interface::Msr | Interface::Mmio => m.max_rmid.saturating_add(1),
        Interface::Os => m.num_rmids,
    })
}

/// The Sub-NUMA Clustering state libpqos reports (`pqos_cap_mon.snc_num`, `snc_mode`;
/// `pqos -d`'s `Sub-NUMA Clustering:` line): on MSR, where an L3 holds more than one node;
/// `None` otherwise (one cluster).
#[must_use]
pub fn snc(caps: &Capabilities, iface: Interface) -> Option<SncState> {
    caps.snc.filter(|s| iface.uses_msrs() && s.nodes_per_l3 > 1)
}

/// The classes of service of a CAT resource libpqos reports on `iface` (module docs).
#[must_use]
pub fn cat_classes(caps: &Capabilities, c: &CatCaps, iface: Interface) -> u32 {
    match iface {
        Interface::Msr | Interface::Mmio => c.usable_classes(),
        Interface::Os => caps.os_classes(),
    }
}

/// The classes of service of a bandwidth resource (MBA, SMBA) libpqos reports on `iface`
/// (module docs).
#[must_use]
pub fn mba_classes(caps: &Capabilities, m: &MbaCaps, iface: Interface) -> u32 {
    match iface {
        Interface::Msr | Interface::Mmio => m.num_classes,
        Interface::Os => caps.os_classes(),
    }
}

/// The smallest mask libpqos reports for a CAT resource (`pqos_l3ca_get_min_cbm_bits`,
/// `-D`'s `Min CBM bits`): on MSR what `hw_l3ca_get_min_cbm_bits` (`lib/allocation.c`)
/// probes by writing masks of 1, 2, ... bits, so at least 1 where the hardware takes any
/// mask (AMD, whose resctrl `min_cbm_bits` is 0); on OS resctrl's `min_cbm_bits`.
#[must_use]
pub fn min_cbm_bits(c: &CatCaps, iface: Interface) -> u32 {
    match iface {
        Interface::Msr | Interface::Mmio => c.min_cbm_bits.max(1),
        Interface::Os => c.min_cbm_bits,
    }
}

/// A bandwidth resource's numbers as libpqos reports them (`struct pqos_cap_mba`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MbaNumbers {
    /// Granularity (`throttle_step`), percent.
    pub throttle_step: u32,
    /// `throttle_max`: `-D` shows `100 - throttle_max` as `Min B/W`.
    pub throttle_max: u32,
    /// Linear throttling (`is_linear`).
    pub linear: bool,
}

/// The numbers of a bandwidth resource on `iface`. Intel: the granularity and the maximum
/// delay, on both interfaces (the kernel's `bw_gran` and `min_bw` say the same). AMD on MSR:
/// `lib/hw_cap.c` leaves step and maximum 0; on OS `lib/os_cap.c` reads
/// `info/MB/bandwidth_gran` (1) and `throttle_max = 100 - min_bandwidth`, the kernel's
/// minimum being 0 on AMD (`rdt_get_mem_config_amd`), so 100.
///
/// # Examples
/// ```
/// use rdt_core::fake::FakeBackend;
/// use rdt_core::pqos_caps::mba_numbers;
/// use rdt_core::{Backend, Interface};
///
/// let b = FakeBackend::intel_1s(); // MBA with a maximum delay of 90 %, linear
/// let mba = b.capabilities().mba.get().expect("MBA");
/// let n = mba_numbers(mba, Interface::Msr);
/// assert_eq!((n.throttle_step, n.throttle_max, n.linear), (10, 90, true));
/// ```
#[must_use]
pub const fn mba_numbers(m: &MbaCaps, iface: Interface) -> MbaNumbers {
    let (throttle_step, throttle_max, linear) = match (m.kind, iface) {
        (
            MbaKind::IntelDelay {
                max_delay, linear, ..
            },
            _,
        ) => (m.granularity(), max_delay, linear),
        (MbaKind::AmdBandwidth { .. }, Interface::Msr | Interface::Mmio) => (0, 0, false),
        (MbaKind::AmdBandwidth { .. }, Interface::Os) => (1, 100, false),
    };
    MbaNumbers {
        throttle_step,
        throttle_max,
        linear,
    }
}

/// The controller state libpqos reports for SMBA: the kernel's MBA controller
/// (`mba_MBps`) drives MBA only, so `Unsupported` on OS; `None` (no controller) on MSR.
#[must_use]
pub const fn smba_ctrl(iface: Interface) -> Option<MbaCtrl> {
    match iface {
        Interface::Msr | Interface::Mmio => None,
        Interface::Os => Some(MbaCtrl::Unsupported),
    }
}

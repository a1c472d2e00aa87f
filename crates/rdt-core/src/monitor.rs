//! Monitoring: which events a group counts ([`MonEvents`], pqos's selection rules in
//! [`MonEvents::select`]), what a poll gives ([`MonValues`]), and the one accumulator both
//! interfaces feed their raw readings into ([`MonAccumulator`]): counter width and wrap,
//! upscaling, the reading at start, remote = total − local, PMU deltas and the policy for a
//! domain that cannot be read.
//!
//! # Start and first poll
//! Starting a group reads its counters once (every backend, every start path: one read per
//! MBM counter and PMU member; occupancy is a level, not a count, and is not read), and
//! [`MonAccumulator::finish_baseline`] keeps those readings as the start of the first
//! interval. So the first [`MonValues`] after start already has the traffic since the start
//! over the time since the start ([`MonValues::interval`]), and a rate
//! ([`MonValues::mbm_local_bytes_per_s`]) is known from the first poll on. The uncore
//! counts ([`MonValues::uncore`]) mean the same: their start resets the counters, so the
//! first poll's counts are since the start without a reading. pqos v25.04 prints its first
//! sample with zero bandwidth, IPC and misses (`valid_mbm_read`, `lib/hw_monitoring.c`):
//! the `pqos` CLI keeps that as a rule of its output, the library does not.
//!
//! pqos's "KB" and "MB/s" are binary units (`pqos/monitor_utils.c`: `bytes / 1024.0`,
//! `bytes / (1024.0 * 1024.0)`); they are named KiB and MiB here.
//!
//! # The Unavailable policy
//! A reading of one domain can fail without the poll failing: IA32_QM_CTR with its
//! Unavailable (bit 62) or Error (bit 63) flag on the MSR interface, `Unavailable`, `Error`
//! or `Unassigned` in a resctrl `mon_data` file on the OS interface. Both interfaces treat
//! it the same way, here:
//! - the domain's own value for that event is `None` in [`MonValues::domains`];
//! - the group's value for that event is `None` for this poll: a sum without one of its
//!   domains would silently understate the group;
//! - an interval's traffic (a `*_delta_bytes`) is known only when both of its ends were read,
//!   so the poll after an unreadable one is `None` for that domain as well;
//! - the cumulative counters ([`MonValues::mbm_local_bytes`], …) lose nothing: the next good
//!   reading is compared with the last good one, so the bytes of the gap are counted then
//!   (exact as long as the gap is shorter than one counter wrap: 2^width × upscaling factor
//!   bytes, over a minute at 30 GB/s for a 24-bit counter with 64 KiB per count);
//! - other events and other groups are unaffected.
//!
//! # References
//! Intel SDM Vol. 3B, 18.18.5 "Reading Monitoring Data" (IA32_QM_CTR Error/Unavailable);
//! Linux `Documentation/arch/x86/resctrl.rst`, "Reading monitored data"; pqos
//! `lib/monitoring.c` (`pqos_mon_poll`), `lib/hw_monitoring.c`, `pqos/monitor.c`
//! (`monitor_setup_events`).

use std::time::{Duration, Instant};

use crate::pmu::{PmuCounts, sum_deltas};
use crate::{CacheDomain, Capabilities, RequestError};

bitflags::bitflags! {
    /// A set of monitoring events, with pqos's bit values (`enum pqos_mon_event`).
    ///
    /// The RMID-counted events are [`MonEvents::LLC_OCCUPANCY`], [`MonEvents::MBM_LOCAL`]
    /// and [`MonEvents::MBM_TOTAL`]; [`MonEvents::MBM_REMOTE`] is computed as total − local
    /// and needs both; [`MonEvents::IPC`] and [`MonEvents::LLC_MISSES`] come from the PMU
    /// (perf events), not from RMIDs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct MonEvents: u32 {
        /// LLC occupancy (CMT), in bytes (pqos `PQOS_MON_EVENT_L3_OCCUP`).
        const LLC_OCCUPANCY = 0x1;
        /// Local memory bandwidth (MBM local; `PQOS_MON_EVENT_LMEM_BW`).
        const MBM_LOCAL = 0x2;
        /// Total memory bandwidth (MBM total; `PQOS_MON_EVENT_TMEM_BW`).
        const MBM_TOTAL = 0x4;
        /// Remote memory bandwidth, total − local (`PQOS_MON_EVENT_RMEM_BW`).
        const MBM_REMOTE = 0x8;
        /// LLC misses, from the PMU (`PQOS_PERF_EVENT_LLC_MISS`).
        const LLC_MISSES = 0x4000;
        /// Instructions per cycle, from the PMU (`PQOS_PERF_EVENT_IPC`).
        const IPC = 0x8000;
        /// LLC references, from the PMU (`PQOS_PERF_EVENT_LLC_REF`); only when asked for
        /// (`-m llc_ref:…`), never part of `all`.
        const LLC_REFERENCES = 0x10000;
        /// LLC misses of PCIe reads, counted per socket by the uncore
        /// (`PQOS_PERF_EVENT_LLC_MISS_PCIE_READ`; `pqos --mon-uncore`).
        const LLC_MISS_PCIE_READ = 0x10_0000;
        /// LLC misses of PCIe writes (`PQOS_PERF_EVENT_LLC_MISS_PCIE_WRITE`).
        const LLC_MISS_PCIE_WRITE = 0x20_0000;
        /// LLC references of PCIe reads (`PQOS_PERF_EVENT_LLC_REF_PCIE_READ`).
        const LLC_REF_PCIE_READ = 0x40_0000;
        /// LLC references of PCIe writes (`PQOS_PERF_EVENT_LLC_REF_PCIE_WRITE`).
        const LLC_REF_PCIE_WRITE = 0x80_0000;
    }
}

impl MonEvents {
    /// pqos's `all` (`-m all:…`): occupancy, local and remote bandwidth, IPC and LLC misses;
    /// not total bandwidth, which pqos shows only when asked for (`mbt:`).
    pub const PQOS_ALL: Self = Self::LLC_OCCUPANCY
        .union(Self::MBM_LOCAL)
        .union(Self::MBM_REMOTE)
        .union(Self::LLC_MISSES)
        .union(Self::IPC);

    /// The memory-bandwidth events: local, total and remote (what an AMD ABMC counter
    /// counts; occupancy and the PMU need none).
    pub const MBM: Self = Self::MBM_LOCAL
        .union(Self::MBM_TOTAL)
        .union(Self::MBM_REMOTE);

    /// The PMU events: IPC, LLC misses and LLC references.
    pub const PMU: Self = Self::IPC
        .union(Self::LLC_MISSES)
        .union(Self::LLC_REFERENCES);

    /// The uncore PCIe events, monitored per socket (`pqos/monitor.c`
    /// `PQOS_MON_EVENT_UNCORE`), in pqos's column order.
    pub const UNCORE: Self = Self::LLC_MISS_PCIE_READ
        .union(Self::LLC_MISS_PCIE_WRITE)
        .union(Self::LLC_REF_PCIE_READ)
        .union(Self::LLC_REF_PCIE_WRITE);

    /// The PMU events pqos adds to every selection where the platform counts them
    /// (`monitor_setup_events`): IPC and LLC misses, not references.
    pub const PMU_ADDED: Self = Self::IPC.union(Self::LLC_MISSES);

    /// The hardware (RMID-counted) events this selection needs: remote implies local and
    /// total.
    #[must_use]
    pub const fn rmid_events(self) -> Self {
        let mut e = self.intersection(
            Self::LLC_OCCUPANCY
                .union(Self::MBM_LOCAL)
                .union(Self::MBM_TOTAL),
        );
        if self.contains(Self::MBM_REMOTE) {
            e = e.union(Self::MBM_LOCAL).union(Self::MBM_TOTAL);
        }
        e
    }

    /// The events of a monitoring group as pqos chooses them (`pqos/monitor.c`,
    /// `monitor_setup_events`): a request that contains [`MonEvents::PQOS_ALL`] becomes every
    /// requested event the platform counts (`supported`), others are refused if the
    /// platform does not count them (LLC references too: pqos never adds them, `all`
    /// included), and get IPC and LLC misses added where supported;
    /// `excluded` (pqos `--disable-mon-ipc`, `--disable-mon-llc_miss`) is never added.
    ///
    /// # Errors
    /// [`RequestError::UnsupportedEvent`] for the first explicitly requested RMID event
    /// (occupancy, local, remote, total, in that order) that `supported` lacks.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::MonEvents;
    /// let supported = MonEvents::LLC_OCCUPANCY | MonEvents::IPC;
    /// assert_eq!(
    ///     MonEvents::PQOS_ALL.select(supported, MonEvents::empty()),
    ///     Ok(MonEvents::LLC_OCCUPANCY | MonEvents::IPC)
    /// );
    /// assert_eq!(
    ///     MonEvents::LLC_OCCUPANCY.select(supported, MonEvents::IPC),
    ///     Ok(MonEvents::LLC_OCCUPANCY)
    /// );
    /// assert!(MonEvents::MBM_TOTAL.select(supported, MonEvents::empty()).is_err());
    /// ```
    pub fn select(self, supported: Self, excluded: Self) -> Result<Self, RequestError> {
        // core and task groups never count the uncore events (`monitor_setup_events`)
        let offered = supported.difference(excluded).difference(Self::UNCORE);
        if self.contains(Self::PQOS_ALL) {
            return Ok(self.intersection(offered));
        }
        for event in [
            Self::LLC_OCCUPANCY,
            Self::MBM_LOCAL,
            Self::MBM_REMOTE,
            Self::MBM_TOTAL,
        ] {
            if self.contains(event) && !supported.contains(event) {
                return Err(RequestError::UnsupportedEvent {
                    event,
                    needed_for: None,
                });
            }
        }
        if self.contains(Self::LLC_REFERENCES) && !supported.contains(Self::LLC_REFERENCES) {
            return Err(RequestError::UnsupportedEvent {
                event: Self::LLC_REFERENCES,
                needed_for: None,
            });
        }
        Ok(self | offered.intersection(Self::PMU_ADDED))
    }

    /// The events of a socket (uncore) group as pqos chooses them (`pqos/monitor.c`
    /// `monitor_setup_events` for `MON_GROUP_TYPE_UNCORE`): `all` (a request containing
    /// [`MonEvents::PQOS_ALL`]) becomes every uncore event the platform counts; nothing else
    /// selects an uncore event.
    ///
    /// # Errors
    /// [`RequestError::UnsupportedEvent`] with [`MonEvents::UNCORE`] when the selection holds
    /// no uncore event the platform counts: the request is not `all` (pqos then starts the
    /// group with no uncore event and fails with status 1), or the platform has none
    /// ([`crate::Capabilities::uncore_pcie`]).
    ///
    /// # Examples
    /// ```
    /// use rdt_core::MonEvents;
    /// let supported = MonEvents::LLC_OCCUPANCY | MonEvents::UNCORE;
    /// assert_eq!(MonEvents::PQOS_ALL.select_uncore(supported), Ok(MonEvents::UNCORE));
    /// assert!(MonEvents::LLC_OCCUPANCY.select_uncore(supported).is_err());
    /// assert!(MonEvents::PQOS_ALL.select_uncore(MonEvents::LLC_OCCUPANCY).is_err());
    /// ```
    pub fn select_uncore(self, supported: Self) -> Result<Self, RequestError> {
        let selected = if self.contains(Self::PQOS_ALL) {
            supported.intersection(Self::UNCORE)
        } else {
            self.intersection(supported).intersection(Self::UNCORE)
        };
        if selected.is_empty() {
            return Err(RequestError::UnsupportedEvent {
                event: Self::UNCORE,
                needed_for: None,
            });
        }
        Ok(selected)
    }

    /// What the event is, for messages: `LLC occupancy`, `local memory bandwidth`, …; the
    /// names of a set's events joined with `, ` for a set.
    #[must_use]
    pub fn describe(self) -> String {
        let names: Vec<&str> = self
            .iter()
            .map(|e| match e {
                Self::LLC_OCCUPANCY => "LLC occupancy",
                Self::MBM_LOCAL => "local memory bandwidth",
                Self::MBM_TOTAL => "total memory bandwidth",
                Self::MBM_REMOTE => "remote memory bandwidth",
                Self::LLC_MISSES => "LLC misses",
                Self::IPC => "instructions per cycle",
                Self::LLC_REFERENCES => "LLC references",
                Self::LLC_MISS_PCIE_READ => "LLC misses of PCIe reads",
                Self::LLC_MISS_PCIE_WRITE => "LLC misses of PCIe writes",
                Self::LLC_REF_PCIE_READ => "LLC references of PCIe reads",
                Self::LLC_REF_PCIE_WRITE => "LLC references of PCIe writes",
                _ => "an unknown event",
            })
            .collect();
        names.join(", ")
    }
}

/// An RMID-counted event: what IA32_QM_EVTSEL selects and what a resctrl `mon_data`
/// directory holds one file of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RmidEvent {
    /// LLC occupancy: bytes in the cache now (event id 1; `llc_occupancy`).
    LlcOccupancy,
    /// Local memory traffic: a running count (event id 3; `mbm_local_bytes`).
    MbmLocal,
    /// Total memory traffic: a running count (event id 2; `mbm_total_bytes`).
    MbmTotal,
}

impl RmidEvent {
    /// Every RMID event, in the order a poll reads them.
    pub const ALL: [Self; 3] = [Self::LlcOccupancy, Self::MbmLocal, Self::MbmTotal];

    /// The event as a [`MonEvents`] flag.
    #[must_use]
    pub const fn flag(self) -> MonEvents {
        match self {
            Self::LlcOccupancy => MonEvents::LLC_OCCUPANCY,
            Self::MbmLocal => MonEvents::MBM_LOCAL,
            Self::MbmTotal => MonEvents::MBM_TOTAL,
        }
    }

    /// The kernel's name: the `mon_data/mon_L3_XX/` file and the `info/L3_MON/mon_features`
    /// entry.
    #[must_use]
    pub const fn resctrl_name(self) -> &'static str {
        match self {
            Self::LlcOccupancy => "llc_occupancy",
            Self::MbmLocal => "mbm_local_bytes",
            Self::MbmTotal => "mbm_total_bytes",
        }
    }

    /// The RMID events of `events` ([`MonEvents::rmid_events`]), in [`RmidEvent::ALL`]'s
    /// order.
    pub fn of(events: MonEvents) -> impl Iterator<Item = Self> {
        let rmid = events.rmid_events();
        Self::ALL
            .into_iter()
            .filter(move |e| rmid.contains(e.flag()))
    }
}

impl Capabilities {
    /// The events this platform can count (pqos's `all_evts`): the RMID events CPUID (or
    /// resctrl's `info/L3_MON/mon_features`) lists, remote where local and total both exist,
    /// and the PMU events [`crate::PmuCaps`] reports usable.
    #[must_use]
    pub fn supported_events(&self) -> MonEvents {
        let mut e = MonEvents::empty();
        if let Some(m) = self.monitoring.get() {
            e.set(MonEvents::LLC_OCCUPANCY, m.events.llc_occupancy);
            e.set(MonEvents::MBM_LOCAL, m.events.mbm_local);
            e.set(MonEvents::MBM_TOTAL, m.events.mbm_total);
            e.set(
                MonEvents::MBM_REMOTE,
                m.events.mbm_local && m.events.mbm_total,
            );
        }
        e.set(MonEvents::IPC, self.pmu.ipc);
        e.set(MonEvents::LLC_MISSES, self.pmu.llc_misses);
        e.set(MonEvents::LLC_REFERENCES, self.pmu.llc_references);
        e.set(MonEvents::UNCORE, self.uncore_pcie);
        e
    }

    /// How many monitoring groups that count an RMID event resctrl holds at once: each is a
    /// monitor group with an RMID of its own valid in every domain, and the root keeps RMID 0,
    /// so `num_rmids - 1` (pqos/monitor.c, "Too many monitoring groups selected"); `None`
    /// without CMT/MBM. Groups of other tools take from the same count.
    #[must_use]
    pub fn resctrl_mon_groups(&self) -> Option<u32> {
        self.monitoring.get().map(|m| m.num_rmids.saturating_sub(1))
    }

    /// The RMID events a group monitoring `events` reads, checked against the monitoring
    /// capabilities (IPC and LLC misses need no RMID and are not checked here).
    ///
    /// # Errors
    /// [`RequestError::Unsupported`] when the platform has no CMT/MBM at all;
    /// [`RequestError::UnsupportedEvent`] naming the first RMID event it does not count (and
    /// remote bandwidth when that is what needs it).
    pub fn check_rmid_events(&self, events: MonEvents) -> Result<MonEvents, RequestError> {
        let rmid = events.rmid_events();
        if rmid.is_empty() {
            return Ok(rmid);
        }
        if self.monitoring.get().is_none() {
            return Err(RequestError::Unsupported(
                "CMT/MBM monitoring is not supported on this platform (CPUID.(EAX=0FH))".into(),
            ));
        }
        let supported = self.supported_events();
        match RmidEvent::of(events).find(|e| !supported.contains(e.flag())) {
            Some(missing) => Err(RequestError::UnsupportedEvent {
                event: missing.flag(),
                needed_for: (!events.contains(missing.flag())).then_some(MonEvents::MBM_REMOTE),
            }),
            None => Ok(rmid),
        }
    }
}

/// The increase of a counter `width` bits wide from `old` to `new`, assuming it wrapped at
/// most once (`2^width` is the wrap point; IA32_QM_CTR data is 24 + CPUID.(0FH,1):EAX\[7:0\]
/// bits wide).
///
/// Both values are masked to `width` bits first. `width` of 64 or more means a 64-bit counter.
///
/// # Examples
/// ```
/// use rdt_core::monitor::counter_delta;
/// assert_eq!(counter_delta(10, 25, 24), 15);
/// assert_eq!(counter_delta(0xff_fff0, 0x10, 24), 0x20); // wrapped at 2^24
/// ```
#[must_use]
pub const fn counter_delta(old: u64, new: u64, width: u32) -> u64 {
    let mask = width_mask(width);
    (new & mask).wrapping_sub(old & mask) & mask
}

/// The value mask of a counter `width` bits wide.
const fn width_mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Bytes to KiB (pqos's `LLC[KB]`).
#[must_use]
#[allow(clippy::cast_precision_loss)] // occupancy fits in f64 exactly below 2^53 bytes
pub fn bytes_to_kib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}

/// The rate of `bytes` moved over `interval`, in bytes per second; `None` for a zero
/// interval (never NaN or infinite). The one place where monitoring divides by time:
/// [`MonValues::bytes_per_s`] and [`MibPerSec::from_bytes`] use it.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use rdt_core::monitor::bytes_per_s;
/// assert_eq!(bytes_per_s(3000, Duration::from_millis(500)), Some(6000.0));
/// assert_eq!(bytes_per_s(3000, Duration::ZERO), None);
/// ```
#[must_use]
#[allow(clippy::cast_precision_loss)] // exact below 2^53 bytes (8 PiB) per interval
pub fn bytes_per_s(bytes: u64, interval: Duration) -> Option<f64> {
    let secs = interval.as_secs_f64();
    (secs > 0.0).then(|| bytes as f64 / secs)
}

/// Bytes in a MiB: pqos's "MB" (`pqos/monitor_utils.c`: `bytes / (1024.0 * 1024.0)`).
const BYTES_PER_MIB: f64 = 1024.0 * 1024.0;

/// A memory bandwidth in MiB/s (pqos's `MB/s` columns, which are binary: 1 MiB = 2^20
/// bytes). Displays as the number alone, honouring a precision (`{:.1}` gives `107.9`).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct MibPerSec(pub f64);

impl MibPerSec {
    /// The rate of `bytes` moved over `interval`; 0 for a zero interval (pqos prints 0.0
    /// where it has no interval; [`bytes_per_s`] says `None` instead).
    ///
    /// pqos computes this over the nominal `-i` interval; callers here pass the measured one,
    /// so a late timer tick does not inflate the rate.
    #[must_use]
    pub fn from_bytes(bytes: u64, interval: Duration) -> Self {
        bytes_per_s(bytes, interval).map_or(Self(0.0), Self::from_bytes_per_s)
    }

    /// A rate in bytes per second (as [`MonValues::mbm_local_bytes_per_s`] gives it) in
    /// MiB/s.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::monitor::MibPerSec;
    /// assert_eq!(MibPerSec::from_bytes_per_s(3.0 * 1024.0 * 1024.0), MibPerSec(3.0));
    /// assert_eq!(format!("{:.1}", MibPerSec(107.94)), "107.9");
    /// ```
    #[must_use]
    pub fn from_bytes_per_s(bytes_per_s: f64) -> Self {
        Self(bytes_per_s / BYTES_PER_MIB)
    }
}

impl std::fmt::Display for MibPerSec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

/// Work left behind by a process that ended before it finished (killed, crashed), given
/// back or rolled back when a platform was opened: monitoring it did not stop
/// ([`Reclaimed::ResctrlGroup`] on the OS interface, [`Reclaimed::Rmids`] on the MSR
/// interface), allocation changes it did not complete ([`Reclaimed::Transaction`]) and
/// classes of service it leased and did not give back ([`Reclaimed::Lease`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reclaimed {
    /// A `pqos-<pid>-<n>` monitor group whose process no longer exists was removed (its RMID
    /// goes back to the kernel, its CPUs and tasks to their control group).
    ResctrlGroup {
        /// The group's path relative to the resctrl root.
        path: String,
        /// The process that created it.
        pid: u32,
    },
    /// CPUs still tagged with the RMIDs a process that no longer exists gave them were put
    /// back on RMID 0 (their class of service kept).
    Rmids {
        /// The CPUs.
        cpus: crate::CpuSet,
        /// The process that started the monitoring.
        pid: u32,
    },
    /// The writes of a transaction ([`crate::transaction`]) whose process ended before it
    /// completed were undone from its journal: the allocation is as before it.
    Transaction {
        /// The process that ran it.
        pid: u32,
        /// What was written back, newest first (`L3 COS1 of domain 0 back to 0xfffff`).
        undone: Vec<String>,
        /// What could not be written back, with the error (the journal stays for the next
        /// open to try again).
        failed: Vec<String>,
    },
    /// A class of service a process leased (`rdt_host::lease::Lease`) and did not give back
    /// before it ended was given back (`rdt_host::lease::reclaim`): `cpus` and `tasks` back
    /// in COS 0, the masks and limits the lease set back to their reset values.
    Lease {
        /// The class.
        class: crate::ClassId,
        /// The process that leased it.
        pid: u32,
        /// The CPUs moved back to COS 0 (those of the lease still in the class).
        cpus: crate::CpuSet,
        /// The tasks moved back to COS 0 (OS interface), ascending.
        tasks: Vec<crate::TaskId>,
    },
}

impl std::fmt::Display for Reclaimed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ResctrlGroup { path, pid } => write!(
                f,
                "removed resctrl monitor group {path}: process {pid}, which created it, ended \
                 without stopping its monitoring"
            ),
            Self::Rmids { cpus, pid } => write!(
                f,
                "reset the RMIDs of CPUs {cpus} to 0: process {pid}, which assigned them, ended \
                 without stopping its monitoring"
            ),
            Self::Transaction {
                pid,
                undone,
                failed,
            } => {
                write!(
                    f,
                    "rolled back the allocation change of process {pid}, which ended before \
                     it completed: {}",
                    if undone.is_empty() {
                        "nothing to write back".to_owned()
                    } else {
                        undone.join(", ")
                    }
                )?;
                if !failed.is_empty() {
                    write!(f, "; could not write back {}", failed.join("; "))?;
                }
                Ok(())
            }
            Self::Lease {
                class,
                pid,
                cpus,
                tasks,
            } => {
                write!(
                    f,
                    "gave back COS{class}: process {pid}, which leased it, ended without \
                     releasing it ("
                )?;
                if !cpus.is_empty() {
                    write!(f, "CPUs {cpus} ")?;
                }
                if !tasks.is_empty() {
                    let list: Vec<String> = tasks.iter().map(ToString::to_string).collect();
                    let and = if cpus.is_empty() { "" } else { "and " };
                    write!(f, "{and}tasks {} ", list.join(","))?;
                }
                if !cpus.is_empty() || !tasks.is_empty() {
                    write!(f, "back in COS0, ")?;
                }
                write!(f, "masks and limits reset)")
            }
        }
    }
}

/// A handle to a monitoring group started on a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MonGroupId(pub u32);

/// One L3 monitoring domain's values of a group after a poll (see the module's Unavailable
/// policy). Byte values are already upscaled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainValues {
    /// The L3 domain (cache id; `mon_L3_XX` on resctrl).
    pub domain: CacheDomain,
    /// LLC occupancy now, in bytes; `None` when not monitored or not readable this poll.
    pub llc_occupancy_bytes: Option<u64>,
    /// Local memory traffic since the group started, in bytes (monotonic, wraps handled);
    /// `None` when not monitored or never read yet. Counted from the reading taken at start
    /// (the module's "Start and first poll").
    pub mbm_local_bytes: Option<u64>,
    /// Total memory traffic since the group started, in bytes, as `mbm_local_bytes`.
    pub mbm_total_bytes: Option<u64>,
    /// Local memory traffic since the previous poll (on the first poll: since the group
    /// started), in bytes; `None` unless both ends of the interval were read. Per second:
    /// [`MonValues::bytes_per_s`] of it.
    pub mbm_local_delta_bytes: Option<u64>,
    /// Total memory traffic since the previous poll, in bytes, as `mbm_local_delta_bytes`.
    pub mbm_total_delta_bytes: Option<u64>,
}

impl DomainValues {
    const fn new(domain: CacheDomain) -> Self {
        Self {
            domain,
            llc_occupancy_bytes: None,
            mbm_local_bytes: None,
            mbm_total_bytes: None,
            mbm_local_delta_bytes: None,
            mbm_total_delta_bytes: None,
        }
    }
}

/// The values of one monitoring group after a poll.
///
/// Deltas (`*_delta*`) are over [`MonValues::interval`]: since the previous poll, and on the
/// first poll since the group started, because starting a group reads its counters (the
/// module's "Start and first poll"). Rates divide them by the interval
/// ([`MonValues::mbm_local_bytes_per_s`], …). `None` means the event is not monitored or
/// could not be read this time (see the module's Unavailable policy; no PMU for IPC and
/// misses). Group values are sums over the group's L3 domains ([`MonValues::domains`]).
///
/// pqos prints its first sample with zero bandwidth, IPC and misses; that is a rule of its
/// output (`pqos -m`), which the CLI applies, not of these values.
///
/// # Examples
/// ```
/// use rdt_core::fake::FakeBackend;
/// use rdt_core::monitor::MibPerSec;
/// use rdt_core::{Backend, BackendExt, MonEvents};
/// use std::time::Duration;
///
/// let mut b = FakeBackend::broadwell_2s().with_manual_clock();
/// let g = b.start_monitoring(&"0".parse()?, MonEvents::MBM_LOCAL)?;
/// b.advance(Duration::from_millis(500));
/// b.poll()?; // the first poll: the traffic since start, over the time since start
/// let v = b.values(g).unwrap();
/// assert_eq!(v.interval, Duration::from_millis(500));
/// assert_eq!(v.mbm_local_delta_bytes, Some(100 << 20)); // the fake's 100 MiB per poll
/// let rate = v.mbm_local_bytes_per_s().unwrap();
/// assert_eq!(MibPerSec::from_bytes_per_s(rate), MibPerSec(200.0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MonValues {
    /// LLC occupancy in bytes, summed over the group's L3 domains.
    pub llc_occupancy_bytes: Option<u64>,
    /// Local memory traffic over [`MonValues::interval`], in bytes (per second:
    /// [`MonValues::mbm_local_bytes_per_s`]).
    pub mbm_local_delta_bytes: Option<u64>,
    /// Total memory traffic over [`MonValues::interval`], in bytes (per second:
    /// [`MonValues::mbm_total_bytes_per_s`]).
    pub mbm_total_delta_bytes: Option<u64>,
    /// Remote traffic over [`MonValues::interval`] (total − local, 0 if negative; pqos
    /// `lib/monitoring.c`), in bytes (per second: [`MonValues::mbm_remote_bytes_per_s`]).
    pub mbm_remote_delta_bytes: Option<u64>,
    /// Local memory traffic since the group started, in bytes: a counter that never goes
    /// back (hardware wraps handled), for exporters.
    pub mbm_local_bytes: Option<u64>,
    /// Total memory traffic since the group started, in bytes, as `mbm_local_bytes`.
    pub mbm_total_bytes: Option<u64>,
    /// Instructions retired over [`MonValues::interval`].
    pub instructions_delta: Option<u64>,
    /// Unhalted core cycles over [`MonValues::interval`].
    pub cycles_delta: Option<u64>,
    /// LLC misses over [`MonValues::interval`].
    pub llc_misses_delta: Option<u64>,
    /// LLC references over [`MonValues::interval`] (only when the group monitors
    /// [`MonEvents::LLC_REFERENCES`] and the PMU source counts them).
    pub llc_references_delta: Option<u64>,
    /// Uncore (socket group) counts over [`MonValues::interval`], summed over the group's
    /// sockets; `None` for a core or task group. Like every delta, the first poll's are
    /// the counts since the group started (here the start resets the counters, so no
    /// reading is needed: pqos `lib/uncore_monitoring.c` `uncore_mon_poll`, whose previous
    /// value begins at 0).
    pub uncore: Option<UncoreCounts>,
    /// Per L3 domain, ascending by domain: the RMID events' values of each domain the group
    /// spans (empty when it monitors no RMID event).
    pub domains: Vec<DomainValues>,
    /// When the poll that produced these values finished (monotonic clock); `None` before
    /// the first poll.
    pub polled_at: Option<Instant>,
    /// The time the deltas are counted over, measured by the backend on the monotonic
    /// clock: since the previous poll, or since the group started for the first poll. (Zero
    /// only on the first poll of an accumulator whose backend took no reading at start,
    /// [`MonAccumulator::finish_baseline`]; its deltas are 0 and its rates `None`.)
    pub interval: Duration,
}

/// The uncore PCIe LLC counts of a socket group over one interval
/// ([`MonEvents::UNCORE`]); an event the group does not monitor is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct UncoreCounts {
    /// LLC misses of PCIe reads ([`MonEvents::LLC_MISS_PCIE_READ`]).
    pub llc_miss_pcie_read: Option<u64>,
    /// LLC misses of PCIe writes ([`MonEvents::LLC_MISS_PCIE_WRITE`]).
    pub llc_miss_pcie_write: Option<u64>,
    /// LLC references of PCIe reads ([`MonEvents::LLC_REF_PCIE_READ`]).
    pub llc_ref_pcie_read: Option<u64>,
    /// LLC references of PCIe writes ([`MonEvents::LLC_REF_PCIE_WRITE`]).
    pub llc_ref_pcie_write: Option<u64>,
}

impl UncoreCounts {
    /// The count of one uncore event; `None` for another event or one not monitored.
    #[must_use]
    pub const fn get(&self, event: MonEvents) -> Option<u64> {
        match event {
            MonEvents::LLC_MISS_PCIE_READ => self.llc_miss_pcie_read,
            MonEvents::LLC_MISS_PCIE_WRITE => self.llc_miss_pcie_write,
            MonEvents::LLC_REF_PCIE_READ => self.llc_ref_pcie_read,
            MonEvents::LLC_REF_PCIE_WRITE => self.llc_ref_pcie_write,
            _ => None,
        }
    }

    /// Sets the count of one uncore event (another event is ignored).
    pub const fn set(&mut self, event: MonEvents, count: Option<u64>) {
        match event {
            MonEvents::LLC_MISS_PCIE_READ => self.llc_miss_pcie_read = count,
            MonEvents::LLC_MISS_PCIE_WRITE => self.llc_miss_pcie_write = count,
            MonEvents::LLC_REF_PCIE_READ => self.llc_ref_pcie_read = count,
            MonEvents::LLC_REF_PCIE_WRITE => self.llc_ref_pcie_write = count,
            _ => {}
        }
    }
}

impl MonValues {
    /// Instructions per cycle over the last interval; `None` without PMU data, 0 when no
    /// cycle elapsed.
    #[must_use]
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52 in one interval
    pub fn ipc(&self) -> Option<f64> {
        let (i, c) = (self.instructions_delta?, self.cycles_delta?);
        Some(if c == 0 { 0.0 } else { i as f64 / c as f64 })
    }

    /// `bytes` moved over this poll's [`MonValues::interval`] as a rate, in bytes per
    /// second ([`bytes_per_s`]); `None` when `bytes` is `None` or the interval is zero
    /// (never NaN or infinite). For a domain's traffic:
    /// `v.bytes_per_s(v.domains[0].mbm_local_delta_bytes)`.
    #[must_use]
    pub fn bytes_per_s(&self, bytes: Option<u64>) -> Option<f64> {
        bytes_per_s(bytes?, self.interval)
    }

    /// Local memory bandwidth over the last interval, in bytes per second (MiB/s:
    /// [`MibPerSec::from_bytes_per_s`]); `None` when not known
    /// ([`MonValues::bytes_per_s`]).
    #[must_use]
    pub fn mbm_local_bytes_per_s(&self) -> Option<f64> {
        self.bytes_per_s(self.mbm_local_delta_bytes)
    }

    /// Total memory bandwidth over the last interval, in bytes per second, as
    /// [`MonValues::mbm_local_bytes_per_s`].
    #[must_use]
    pub fn mbm_total_bytes_per_s(&self) -> Option<f64> {
        self.bytes_per_s(self.mbm_total_delta_bytes)
    }

    /// Remote memory bandwidth (total − local) over the last interval, in bytes per
    /// second, as [`MonValues::mbm_local_bytes_per_s`].
    #[must_use]
    pub fn mbm_remote_bytes_per_s(&self) -> Option<f64> {
        self.bytes_per_s(self.mbm_remote_delta_bytes)
    }

    /// The values without their timestamps ([`MonValues::polled_at`],
    /// [`MonValues::interval`]): what two runs over the same traffic have in common.
    #[must_use]
    pub fn without_time(&self) -> Self {
        Self {
            polled_at: None,
            interval: Duration::ZERO,
            ..self.clone()
        }
    }
}

/// How an interface's raw RMID counter readings translate into bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CounterFormat {
    /// Counter width in bits: MBM readings wrap at `2^width` (IA32_QM_CTR: 24 +
    /// CPUID.(0FH,1):EAX\[7:0\]; resctrl: 64, the kernel extends the hardware counter).
    pub width: u32,
    /// Bytes per count (IA32_QM_CTR: the upscaling factor, CPUID.(0FH,1):EBX; resctrl: 1,
    /// the kernel reports bytes).
    pub bytes_per_count: u64,
}

impl CounterFormat {
    /// resctrl's `mon_data` files: 64-bit byte counts.
    pub const BYTES: Self = Self {
        width: 64,
        bytes_per_count: 1,
    };

    /// IA32_QM_CTR as the monitoring capabilities describe it; 64-bit single bytes when the
    /// platform has no monitoring.
    #[must_use]
    pub fn of_qm_ctr(caps: &Capabilities) -> Self {
        caps.monitoring.get().map_or(Self::BYTES, |m| Self {
            width: m.counter_width,
            bytes_per_count: u64::from(m.upscaling_factor),
        })
    }
}

/// One counter context of a group: an RMID in an L3 domain (one per domain on the MSR
/// interface; one per monitor-group directory and domain on resctrl, where a group whose
/// CPUs sit in several control groups has a directory under each).
#[derive(Clone, Debug)]
struct Context {
    domain: usize,
    /// This poll's readings, by [`RmidEvent`] index; `None`: unread or unreadable.
    now: [Option<u64>; 3],
    /// The last good MBM reading (local, total), masked to the width.
    last_good: [Option<u64>; 2],
    /// Whether the previous poll read MBM (local, total) successfully.
    prev_ok: [bool; 2],
    /// Bytes counted since start (local, total), `None` until the first good reading.
    cumulative: [Option<u64>; 2],
    /// The erratum correction of this context's RMID, × 2^20 ([`crate::mbm::MbmCorrection`]).
    factor: Option<u64>,
    /// Counts since start (local, total) before correction, when corrected.
    chunks: [u64; 2],
}

impl Context {
    /// Advances MBM event `event` (index `i`: 0 local, 1 total) by this poll's reading: the
    /// cumulative count grows by the traffic since the last good reading; returns the
    /// interval's traffic in bytes, known when both ends were read (0 on the first poll).
    fn mbm_step(
        &mut self,
        i: usize,
        event: RmidEvent,
        first: bool,
        width: u32,
        scale: u64,
    ) -> Option<u64> {
        let now = self.now[event_index(event)];
        let delta = match (now, self.last_good[i]) {
            (Some(n), Some(last)) => {
                let mut d = counter_delta(last, n, width);
                if let Some(f) = self.factor {
                    // the kernel corrects the running count (`get_corrected_mbm_count`)
                    let before = crate::mbm::scale_by_factor(self.chunks[i], f);
                    self.chunks[i] = self.chunks[i].saturating_add(d);
                    d = crate::mbm::scale_by_factor(self.chunks[i], f).saturating_sub(before);
                }
                let d = d.saturating_mul(scale);
                self.cumulative[i] = Some(self.cumulative[i].unwrap_or(0).saturating_add(d));
                self.prev_ok[i].then_some(d)
            }
            (Some(_), None) => {
                self.cumulative[i] = Some(self.cumulative[i].unwrap_or(0));
                first.then_some(0)
            }
            (None, _) => None,
        };
        if now.is_some() {
            self.last_good[i] = now;
        }
        self.prev_ok[i] = now.is_some();
        delta
    }
}

/// Turns a group's raw readings into [`MonValues`], the same way on both interfaces.
///
/// A backend creates one per monitoring group with its counter contexts (one per RMID per
/// L3 domain). When it starts the group it records every context's MBM readings
/// ([`MonAccumulator::record`]) and the PMU counts of the group's members
/// ([`MonAccumulator::record_pmu`]) once and calls [`MonAccumulator::finish_baseline`];
/// each poll it records them again (occupancy too) and calls [`MonAccumulator::finish`].
/// It handles the counter width and wrap, the upscaling factor, the start of the first
/// interval (the module's "Start and first poll"), remote = total − local, PMU deltas and
/// unreadable domains (the module's Unavailable policy).
///
/// # Examples
/// ```
/// use std::time::{Duration, Instant};
/// use rdt_core::monitor::{CounterFormat, MonAccumulator, RmidEvent};
/// use rdt_core::{CacheDomain, MonEvents};
///
/// let format = CounterFormat { width: 24, bytes_per_count: 64 };
/// let events = MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL;
/// let mut acc = MonAccumulator::new(events, &[CacheDomain::new(0)], format, 0);
/// let start = Instant::now();
/// acc.record(0, RmidEvent::MbmLocal, Some(0xff_fff0)); // the reading at start
/// acc.finish_baseline(start);
/// acc.record(0, RmidEvent::LlcOccupancy, Some(10));
/// acc.record(0, RmidEvent::MbmLocal, Some(0x10)); // wrapped at 2^24
/// let v = acc.finish(start + Duration::from_secs(2)); // the first poll
/// assert_eq!(v.mbm_local_delta_bytes, Some(0x20 * 64));
/// assert_eq!(v.mbm_local_bytes_per_s(), Some(0x10 as f64 * 64.0));
/// assert_eq!(v.llc_occupancy_bytes, Some(640));
/// ```
#[derive(Clone, Debug)]
pub struct MonAccumulator {
    events: MonEvents,
    rmid: MonEvents,
    format: CounterFormat,
    contexts: Vec<Context>,
    pmu_prev: Vec<Option<PmuCounts>>,
    /// This poll's PMU deltas; `None` when not recorded or not countable.
    pmu_now: Option<PmuCounts>,
    /// Whether the counters have a previous reading (the baseline or a poll).
    polled: bool,
    /// When the next interval began: the baseline's or the last poll's time.
    since: Option<Instant>,
    values: MonValues,
}

const fn event_index(event: RmidEvent) -> usize {
    match event {
        RmidEvent::LlcOccupancy => 0,
        RmidEvent::MbmLocal => 1,
        RmidEvent::MbmTotal => 2,
    }
}

fn sum(mut values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.try_fold(0u64, |acc, v| Some(acc.saturating_add(v?)))
}

impl MonAccumulator {
    /// An accumulator for a group monitoring `events` whose counter contexts are in
    /// `contexts` (an L3 domain each, in the order the backend records them; a domain may
    /// appear more than once), reading counters in `format`, with `pmu_members` members
    /// (CPUs or tasks) counted on the PMU.
    #[must_use]
    pub fn new(
        events: MonEvents,
        contexts: &[CacheDomain],
        format: CounterFormat,
        pmu_members: usize,
    ) -> Self {
        let mut domains = contexts.to_vec();
        domains.sort_unstable();
        domains.dedup();
        let values = MonValues {
            domains: domains.iter().map(|&d| DomainValues::new(d)).collect(),
            ..MonValues::default()
        };
        let contexts = contexts
            .iter()
            .map(|d| Context {
                domain: domains.binary_search(d).unwrap_or_default(),
                now: [None; 3],
                last_good: [None; 2],
                prev_ok: [false; 2],
                cumulative: [None; 2],
                factor: None,
                chunks: [0; 2],
            })
            .collect();
        Self {
            events,
            rmid: events.rmid_events(),
            format,
            contexts,
            pmu_prev: vec![None; pmu_members],
            pmu_now: None,
            polled: false,
            since: None,
            values,
        }
    }

    /// The events the group monitors.
    #[must_use]
    pub const fn events(&self) -> MonEvents {
        self.events
    }

    /// The values of the last [`MonAccumulator::finish`].
    #[must_use]
    pub const fn values(&self) -> &MonValues {
        &self.values
    }

    /// Multiplies the MBM counts of counter context `context` by `factor` / 2^20 from now on,
    /// as the kernel corrects an RMID above the erratum threshold
    /// ([`crate::mbm::MbmCorrection::factor_for`]); set it before the first poll. An
    /// out-of-range index is ignored.
    pub fn correct_mbm(&mut self, context: usize, factor: u64) {
        if let Some(c) = self.contexts.get_mut(context) {
            c.factor = Some(factor);
        }
    }

    /// Records this poll's raw reading of `event` in counter context `context` (an index
    /// into the `contexts` given to [`MonAccumulator::new`]): counts as the hardware or
    /// kernel gives them, or `None` when unreadable (Unavailable, Error, Unassigned). A
    /// context not recorded in a poll counts as unreadable; an out-of-range index is ignored.
    pub fn record(&mut self, context: usize, event: RmidEvent, reading: Option<u64>) {
        if let Some(c) = self.contexts.get_mut(context) {
            c.now[event_index(event)] = reading.map(|r| r & width_mask(self.format.width));
        }
    }

    /// Records this poll's cumulative PMU counts of the group's members, one per member in a
    /// fixed order (`None` for a member that cannot be counted).
    pub fn record_pmu(&mut self, readings: impl IntoIterator<Item = Option<PmuCounts>>) {
        let first = !self.polled;
        self.pmu_now = sum_deltas(&mut self.pmu_prev, readings, first);
    }

    /// Changes the members counted on the PMU without a break in the counts (a task group
    /// whose members change, [`crate::OsOps::change_monitoring_tasks`]): the members whose
    /// `keep` is true stay, in order, and the new ones follow with `added`, their counts now
    /// (the start of their first interval). A member of `keep` past the old ones is ignored.
    pub fn change_pmu_members(
        &mut self,
        keep: &[bool],
        added: impl IntoIterator<Item = Option<PmuCounts>>,
    ) {
        let mut prev: Vec<Option<PmuCounts>> = self
            .pmu_prev
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(p, _)| *p)
            .collect();
        prev.extend(added);
        self.pmu_prev = prev;
    }

    /// Ends the reading a backend takes when it starts the group, at `at`: what was
    /// recorded ([`MonAccumulator::record`] of the MBM events, [`MonAccumulator::record_pmu`])
    /// becomes the start of the first interval, so the first [`MonAccumulator::finish`]
    /// gives the traffic since `at` over the time since `at`. The values stay empty (no
    /// poll yet: [`MonValues::polled_at`] is `None`). A context whose MBM reading is `None`
    /// here has no first interval for that event (its first delta is `None`; its
    /// cumulative count starts at the first good reading, as after an unreadable poll).
    /// Only the first call before any poll counts; later ones only clear the readings.
    ///
    /// A backend that does not call it gets a first poll that is its own start: 0 deltas
    /// and a zero [`MonValues::interval`].
    pub fn finish_baseline(&mut self, at: Instant) {
        let baseline = !self.polled;
        let (width, scale) = (self.format.width, self.format.bytes_per_count);
        for c in &mut self.contexts {
            if baseline {
                for (i, event) in [RmidEvent::MbmLocal, RmidEvent::MbmTotal]
                    .into_iter()
                    .enumerate()
                {
                    // the same step as a poll's, whose first delta (0) is not reported
                    let _ = c.mbm_step(i, event, true, width, scale);
                }
            }
            c.now = [None; 3];
        }
        self.pmu_now = None;
        if baseline {
            self.polled = true;
            self.since = Some(at);
        }
    }

    /// Ends a poll that finished at `at`: computes the values from what was recorded and
    /// clears the readings for the next poll.
    pub fn finish(&mut self, at: Instant) -> &MonValues {
        fn add(acc: &mut Option<u64>, v: Option<u64>) {
            *acc = acc.zip(v).map(|(a, v)| a.saturating_add(v));
        }
        let first = !self.polled;
        let scale = self.format.bytes_per_count;
        let width = self.format.width;
        // Per domain, per event: the sum over its contexts, `None` if any is unknown; summed
        // in place in the domain values kept from poll to poll (nothing allocated per poll).
        let domains = &mut self.values.domains;
        for dv in domains.iter_mut() {
            dv.llc_occupancy_bytes = Some(0);
            dv.mbm_local_delta_bytes = Some(0);
            dv.mbm_total_delta_bytes = Some(0);
            dv.mbm_local_bytes = Some(0);
            dv.mbm_total_bytes = Some(0);
        }
        for c in &mut self.contexts {
            let Some(dv) = domains.get_mut(c.domain) else {
                continue;
            };
            add(
                &mut dv.llc_occupancy_bytes,
                c.now[0].map(|v| v.saturating_mul(scale)),
            );
            for (i, event) in [RmidEvent::MbmLocal, RmidEvent::MbmTotal]
                .into_iter()
                .enumerate()
            {
                let delta = c.mbm_step(i, event, first, width, scale);
                let (d, cum) = if i == 0 {
                    (&mut dv.mbm_local_delta_bytes, &mut dv.mbm_local_bytes)
                } else {
                    (&mut dv.mbm_total_delta_bytes, &mut dv.mbm_total_bytes)
                };
                add(d, delta);
                add(cum, c.cumulative[i]);
            }
            c.now = [None; 3];
        }
        let has = |e: MonEvents| self.rmid.contains(e);
        let (occ, local, total) = (
            has(MonEvents::LLC_OCCUPANCY),
            has(MonEvents::MBM_LOCAL),
            has(MonEvents::MBM_TOTAL),
        );
        for dv in domains.iter_mut() {
            dv.llc_occupancy_bytes = dv.llc_occupancy_bytes.filter(|_| occ);
            dv.mbm_local_delta_bytes = dv.mbm_local_delta_bytes.filter(|_| local);
            dv.mbm_total_delta_bytes = dv.mbm_total_delta_bytes.filter(|_| total);
            dv.mbm_local_bytes = dv.mbm_local_bytes.filter(|_| local);
            dv.mbm_total_bytes = dv.mbm_total_bytes.filter(|_| total);
        }
        let group = |f: fn(&DomainValues) -> Option<u64>| {
            if domains.is_empty() {
                None
            } else {
                sum(domains.iter().map(f))
            }
        };
        let llc = group(|d| d.llc_occupancy_bytes);
        let local_delta = group(|d| d.mbm_local_delta_bytes);
        let total_delta = group(|d| d.mbm_total_delta_bytes);
        let local_bytes = group(|d| d.mbm_local_bytes);
        let total_bytes = group(|d| d.mbm_total_bytes);
        let v = &mut self.values;
        v.llc_occupancy_bytes = llc;
        v.mbm_local_delta_bytes = local_delta;
        v.mbm_total_delta_bytes = total_delta;
        v.mbm_local_bytes = local_bytes;
        v.mbm_total_bytes = total_bytes;
        v.mbm_remote_delta_bytes = if self.events.contains(MonEvents::MBM_REMOTE) {
            // RMEM = total - local, 0 if negative (pqos lib/monitoring.c)
            total_delta
                .zip(local_delta)
                .map(|(t, l)| t.saturating_sub(l))
        } else {
            None
        };
        let pmu = self.pmu_now.take();
        let want_ipc = self.events.contains(MonEvents::IPC);
        let want_misses = self.events.contains(MonEvents::LLC_MISSES);
        v.instructions_delta = pmu.filter(|_| want_ipc).map(|a| a.instructions);
        v.cycles_delta = pmu.filter(|_| want_ipc).map(|a| a.cycles);
        v.llc_misses_delta = pmu.filter(|_| want_misses).map(|a| a.llc_misses);
        v.llc_references_delta = pmu
            .filter(|_| self.events.contains(MonEvents::LLC_REFERENCES))
            .and_then(|a| a.llc_references);
        v.interval = self
            .since
            .map_or(Duration::ZERO, |p| at.saturating_duration_since(p));
        v.polled_at = Some(at);
        self.since = Some(at);
        self.polled = true;
        &self.values
    }
}

/// A byte counter that only goes up, fed with readings of a counter that may start again
/// from zero: a resctrl `mon_data/mon_L3_XX/mbm_*_bytes` file whose group was removed and
/// made again under the same name (or whose RMID was reassigned, or whose MBM configuration
/// changed, which clears the hardware counters), for exporters whose counters must be
/// monotonic (OpenMetrics `counter`, Prometheus `_total`).
///
/// The rule, in bytes: the first reading is the total; after that a reading at or above the
/// previous one adds the difference, and a reading **below** the previous one means the
/// counter started again from zero, so the whole new reading is added (the bytes counted
/// between the last reading before the restart and the restart itself are lost: at most
/// one scrape interval's worth). [`MonotonicTotal::restart`] says so explicitly when the
/// caller knows of a restart by other means (the group directory was made again), because
/// a new counter that has already passed the old reading cannot be told apart by value.
/// The total saturates at `u64::MAX` (16 EiB) instead of wrapping.
///
/// Hardware wraps: resctrl extends the hardware's 24 + CPUID.(0FH,1):EAX\[7:0\]-bit
/// IA32_QM_CTR to 64 bits (the kernel's MBM overflow worker), so a resctrl reading never
/// wraps and a decrease can only be a restart. Readings of a narrower counter (the MSR
/// interface) go through [`MonAccumulator`] instead, whose [`MonValues::mbm_local_bytes`]
/// are already monotonic.
///
/// # Examples
/// ```
/// use rdt_core::monitor::MonotonicTotal;
/// let mut t = MonotonicTotal::new();
/// assert_eq!(t.update(1000), 1000); // first reading: the counter's own total
/// assert_eq!(t.update(1500), 1500);
/// assert_eq!(t.update(200), 1700); // group made again: started from 0, 200 bytes since
/// t.restart(); // known re-creation
/// assert_eq!(t.update(900), 2600);
/// ```
///
/// # References
/// Linux `Documentation/arch/x86/resctrl.rst`, "Reading monitored data" and
/// `mbm_total_bytes_config`; OpenMetrics 1.0, "Counter" (a counter reset is a decrease).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MonotonicTotal {
    /// Bytes counted in all, over every restart.
    total: u64,
    /// The previous reading; `None` before the first one and after [`MonotonicTotal::restart`].
    last: Option<u64>,
}

impl MonotonicTotal {
    /// A total of 0 that has seen no reading.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            total: 0,
            last: None,
        }
    }

    /// Adds a reading (bytes, as the counter shows them now) and returns the new total in
    /// bytes.
    pub const fn update(&mut self, reading: u64) -> u64 {
        let added = match self.last {
            Some(prev) if reading >= prev => reading - prev,
            // First reading, or the counter started again: everything it shows is new.
            _ => reading,
        };
        self.total = self.total.saturating_add(added);
        self.last = Some(reading);
        self.total
    }

    /// The counter is known to have started again from zero (its group was made again):
    /// the next reading is added whole, whatever its value.
    pub const fn restart(&mut self) {
        self.last = None;
    }

    /// Bytes counted in all, in bytes.
    #[must_use]
    pub const fn total(&self) -> u64 {
        self.total
    }

    /// The last reading, in bytes; `None` before the first and right after a restart.
    #[must_use]
    pub const fn last_reading(&self) -> Option<u64> {
        self.last
    }
}

/// The warning of a monitoring start that had to leave memory bandwidth out of some
/// groups: on an AMD part in ABMC mode every MBM event of a group needs one of its L3
/// domain's assignable counters (32 per domain on an EPYC 9005), and a request for more
/// groups than that (`pqos -r` on a 192-CPU `turin`: 16 CPUs, so 16 groups of two events,
/// per domain where resctrl's default group holds two) leaves the last groups without. As
/// pqos monitors such groups anyway (its MBM columns then read 0, intel-cmt-cat issue 311),
/// the backends start them counting what needs no counter (occupancy, IPC, LLC misses),
/// their bandwidth columns blank, and log this naming them (`groups`: their CPUs or tasks
/// as a list each, in start order).
///
/// # Examples
/// ```
/// let w = rdt_core::monitor::no_mbm_counter_warning(&["103", "111"]);
/// assert!(w.starts_with("no free MBM counter for 2 monitoring groups (103; 111)"));
/// ```
#[must_use]
pub fn no_mbm_counter_warning<T: std::fmt::Display>(groups: &[T]) -> String {
    let list = groups
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let n = groups.len();
    let noun = if n == 1 { "group" } else { "groups" };
    format!(
        "no free MBM counter for {n} monitoring {noun} ({list}): their memory bandwidth is \
         not monitored, their LLC occupancy and PMU events are (the L3 domain's assignable \
         counters are all assigned; free some or monitor fewer groups there)"
    )
}

#[cfg(test)]
mod total_tests {
    use proptest::prelude::*;

    use super::MonotonicTotal;

    #[test]
    fn a_rising_counter_is_its_own_total_and_a_drop_adds_the_new_reading() {
        // arrange
        let mut t = MonotonicTotal::new();
        // act / assert
        assert_eq!(t.total(), 0);
        assert_eq!(t.update(10), 10);
        assert_eq!(t.update(10), 10, "no traffic");
        assert_eq!(t.update(25), 25);
        assert_eq!(t.update(5), 30, "restarted: 5 new bytes");
        assert_eq!(t.update(7), 32);
        assert_eq!(t.last_reading(), Some(7));
    }

    #[test]
    fn an_explicit_restart_adds_a_reading_that_is_higher_than_the_old_one() {
        let mut t = MonotonicTotal::new();
        t.update(100);
        t.restart();
        assert_eq!(t.last_reading(), None);
        assert_eq!(t.update(150), 250, "150 bytes of a new counter, not 50");
    }

    #[test]
    fn the_total_saturates_instead_of_wrapping() {
        let mut t = MonotonicTotal::new();
        t.update(u64::MAX - 1);
        assert_eq!(t.update(10), u64::MAX);
        assert_eq!(t.update(20), u64::MAX);
    }

    proptest! {
        #[test]
        fn the_total_never_decreases_and_counts_every_rise(
            readings in proptest::collection::vec(0u64..1 << 40, 0..64)
        ) {
            let mut t = MonotonicTotal::new();
            let mut expected = 0u64;
            let mut prev: Option<u64> = None;
            for r in readings {
                let before = t.total();
                let now = t.update(r);
                prop_assert!(now >= before);
                expected += match prev { Some(p) if r >= p => r - p, _ => r };
                prev = Some(r);
                prop_assert_eq!(now, expected);
            }
        }

        #[test]
        fn a_never_restarting_counter_totals_its_last_reading(
            mut readings in proptest::collection::vec(any::<u64>(), 1..64)
        ) {
            readings.sort_unstable();
            let mut t = MonotonicTotal::new();
            for &r in &readings {
                t.update(r);
            }
            prop_assert_eq!(t.total(), *readings.last().unwrap());
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn delta_handles_one_wrap_at_width() {
        assert_eq!(counter_delta(5, 5, 24), 0);
        assert_eq!(counter_delta((1 << 24) - 1, 0, 24), 1);
        assert_eq!(counter_delta(u64::MAX, 1, 64), 2);
        assert_eq!(counter_delta((1 << 44) - 2, 3, 44), 5);
    }

    #[test]
    fn mib_per_sec_uses_binary_megabytes() {
        let r = MibPerSec::from_bytes(3 * 1024 * 1024, Duration::from_millis(500));
        assert!((r.0 - 6.0).abs() < 1e-9);
        assert!((MibPerSec::from_bytes(1, Duration::ZERO).0).abs() < f64::EPSILON);
    }

    proptest! {
        #[test]
        fn delta_inverts_addition_modulo_width(old in any::<u64>(), inc in any::<u64>(), width in 24u32..=64) {
            let mask = if width == 64 { u64::MAX } else { (1 << width) - 1 };
            let inc = inc & mask;
            let new = (old & mask).wrapping_add(inc) & mask;
            prop_assert_eq!(counter_delta(old, new, width), inc);
        }
    }

    #[test]
    fn remote_implies_local_and_total_and_pqos_all_excludes_total() {
        assert_eq!(
            MonEvents::MBM_REMOTE.rmid_events(),
            MonEvents::MBM_LOCAL | MonEvents::MBM_TOTAL
        );
        assert!(!MonEvents::PQOS_ALL.contains(MonEvents::MBM_TOTAL));
        assert_eq!(MonEvents::PQOS_ALL.bits(), 0xc00b, "pqos's values");
        assert_eq!(
            RmidEvent::of(MonEvents::PQOS_ALL).collect::<Vec<_>>(),
            RmidEvent::ALL
        );
    }

    #[test]
    fn resctrl_holds_one_group_fewer_than_its_rmids() {
        let (caps, _) = crate::fake::fixtures::intel_2s(); // 112 RMIDs
        assert_eq!(caps.resctrl_mon_groups(), Some(111));
        let none = Capabilities::none(crate::Vendor::Intel);
        assert_eq!(none.resctrl_mon_groups(), None);
    }

    #[test]
    fn selection_follows_pqos_monitor_setup_events() {
        let hw = MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL | MonEvents::MBM_TOTAL;
        let supported = hw | MonEvents::MBM_REMOTE | MonEvents::PMU;
        // all: every supported event of the request, minus the excluded ones
        assert_eq!(
            (MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL).select(supported, MonEvents::IPC),
            Ok(supported
                .difference(MonEvents::IPC)
                .difference(MonEvents::LLC_REFERENCES)),
            "references are never part of all"
        );
        // references only when asked for, with IPC and misses added as for any selection
        assert_eq!(
            MonEvents::LLC_REFERENCES.select(supported, MonEvents::empty()),
            Ok(MonEvents::PMU)
        );
        assert_eq!(
            MonEvents::LLC_REFERENCES.select(hw | MonEvents::PMU_ADDED, MonEvents::empty()),
            Err(RequestError::UnsupportedEvent {
                event: MonEvents::LLC_REFERENCES,
                needed_for: None
            })
        );
        // explicit: PMU events added unless excluded
        assert_eq!(
            MonEvents::MBM_LOCAL.select(supported, MonEvents::LLC_MISSES),
            Ok(MonEvents::MBM_LOCAL | MonEvents::IPC)
        );
        // explicit and unsupported: refused, naming the event
        assert_eq!(
            MonEvents::MBM_REMOTE.select(MonEvents::LLC_OCCUPANCY, MonEvents::empty()),
            Err(RequestError::UnsupportedEvent {
                event: MonEvents::MBM_REMOTE,
                needed_for: None
            })
        );
    }

    const D0: CacheDomain = CacheDomain::new(0);
    const D1: CacheDomain = CacheDomain::new(1);

    fn two_domains(events: MonEvents) -> MonAccumulator {
        let f = CounterFormat {
            width: 24,
            bytes_per_count: 100,
        };
        MonAccumulator::new(events, &[D0, D1], f, 0)
    }

    fn poll(
        acc: &mut MonAccumulator,
        local: [Option<u64>; 2],
        total: [Option<u64>; 2],
    ) -> MonValues {
        for i in 0..2 {
            acc.record(i, RmidEvent::MbmLocal, local[i]);
            acc.record(i, RmidEvent::MbmTotal, total[i]);
        }
        acc.finish(Instant::now()).clone()
    }

    #[test]
    fn a_corrected_context_counts_as_the_kernel_corrects_its_running_count() {
        // Skylake-SP, 144 RMIDs: above RMID 127 × 1.185255 (1242830 / 2^20)
        let c = crate::mbm::MbmCorrection::from_table(144).unwrap();
        let mut acc = two_domains(MonEvents::MBM_TOTAL | MonEvents::MBM_LOCAL);
        acc.correct_mbm(1, c.factor_for(130).unwrap());
        let mut raw = 0;
        poll(&mut acc, [Some(0), Some(0)], [Some(0), Some(0)]);
        let mut sum = 0;
        for step in [3, 5, 1_000, 7] {
            raw += step;
            let v = poll(&mut acc, [Some(raw), Some(raw)], [Some(raw), Some(raw)]);
            assert_eq!(v.domains[0].mbm_total_delta_bytes, Some(step * 100));
            sum += v.domains[1].mbm_total_delta_bytes.unwrap();
            // the deltas add up to the corrected running count, never drifting
            assert_eq!(sum, c.corrected(130, raw) * 100, "after {raw}");
        }
        assert_eq!(c.corrected(130, raw), (raw * 1_242_830) >> 20);
        assert_eq!(c.corrected(127, raw), raw, "at the threshold: as counted");
    }

    /// A backend that takes no reading at start ([`MonAccumulator::finish_baseline`]): the
    /// first poll is its own start.
    #[test]
    fn without_a_start_reading_the_first_poll_is_zero_then_deltas_are_upscaled() {
        let mut acc = two_domains(MonEvents::MBM_REMOTE);
        let v = poll(&mut acc, [Some(10), Some(20)], [Some(50), Some(60)]);
        assert_eq!(v.mbm_local_delta_bytes, Some(0));
        assert_eq!(v.mbm_remote_delta_bytes, Some(0));
        assert_eq!(v.mbm_local_bytes, Some(0));
        let v = poll(&mut acc, [Some(11), Some(23)], [Some(60), Some(62)]);
        assert_eq!(v.mbm_local_delta_bytes, Some(400));
        assert_eq!(v.mbm_total_delta_bytes, Some(1200));
        assert_eq!(v.mbm_remote_delta_bytes, Some(800));
        assert_eq!(v.domains[1].mbm_local_delta_bytes, Some(300));
        assert_eq!(v.domains[1].domain, D1);
        assert_eq!(v.mbm_total_bytes, Some(1200));
    }

    #[test]
    fn the_reading_at_start_makes_the_first_poll_count_since_start_over_the_time_since_start() {
        // arrange: readings at start, then 2 s later
        let f = CounterFormat {
            width: 24,
            bytes_per_count: 100,
        };
        let mut acc = MonAccumulator::new(MonEvents::MBM_REMOTE | MonEvents::IPC, &[D0, D1], f, 1);
        let pmu = |i, cy| PmuCounts {
            instructions: i,
            cycles: cy,
            llc_misses: 0,
            llc_references: None,
        };
        let t0 = Instant::now();
        for (i, (l, t)) in [(10, 50), (20, 60)].into_iter().enumerate() {
            acc.record(i, RmidEvent::MbmLocal, Some(l));
            acc.record(i, RmidEvent::MbmTotal, Some(t));
        }
        acc.record_pmu([Some(pmu(1000, 1000))]);
        acc.finish_baseline(t0);
        assert_eq!(acc.values().polled_at, None, "a start is no poll");
        // act
        for (i, (l, t)) in [(11, 60), (23, 62)].into_iter().enumerate() {
            acc.record(i, RmidEvent::MbmLocal, Some(l));
            acc.record(i, RmidEvent::MbmTotal, Some(t));
        }
        acc.record_pmu([Some(pmu(4000, 2500))]);
        let v = acc.finish(t0 + Duration::from_secs(2)).clone();
        // assert: real deltas, not a zero-length baseline
        assert_eq!(v.interval, Duration::from_secs(2));
        assert_eq!(v.mbm_local_delta_bytes, Some(400));
        assert_eq!(v.mbm_total_delta_bytes, Some(1200));
        assert_eq!(v.mbm_remote_delta_bytes, Some(800));
        assert_eq!(v.mbm_local_bytes, Some(400), "cumulative from the start");
        assert_eq!(v.mbm_local_bytes_per_s(), Some(200.0));
        assert_eq!(v.mbm_total_bytes_per_s(), Some(600.0));
        assert_eq!(v.mbm_remote_bytes_per_s(), Some(400.0));
        assert_eq!(
            v.bytes_per_s(v.domains[1].mbm_local_delta_bytes),
            Some(150.0)
        );
        assert_eq!(v.ipc(), Some(2.0));
        // the next poll's interval is since this one
        acc.record(0, RmidEvent::MbmLocal, Some(11));
        acc.record(1, RmidEvent::MbmLocal, Some(23));
        let v = acc.finish(t0 + Duration::from_secs(3));
        assert_eq!(v.interval, Duration::from_secs(1));
        assert_eq!(v.mbm_local_delta_bytes, Some(0));
    }

    #[test]
    fn a_counter_unreadable_at_start_has_no_first_delta_and_a_second_baseline_is_ignored() {
        let mut acc = two_domains(MonEvents::MBM_LOCAL);
        let t0 = Instant::now();
        acc.record(0, RmidEvent::MbmLocal, Some(10));
        acc.record(1, RmidEvent::MbmLocal, None); // Unavailable at start
        acc.finish_baseline(t0);
        acc.record(0, RmidEvent::MbmLocal, Some(99));
        acc.finish_baseline(t0 + Duration::from_secs(5)); // ignored: the start was taken
        acc.record(0, RmidEvent::MbmLocal, Some(12));
        acc.record(1, RmidEvent::MbmLocal, Some(30));
        let v = acc.finish(t0 + Duration::from_secs(1)).clone();
        assert_eq!(v.interval, Duration::from_secs(1));
        assert_eq!(v.domains[0].mbm_local_delta_bytes, Some(200));
        assert_eq!(v.domains[1].mbm_local_delta_bytes, None, "no start for it");
        assert_eq!(
            v.mbm_local_delta_bytes, None,
            "a partial sum would understate"
        );
        assert_eq!(v.mbm_local_bytes_per_s(), None);
        assert_eq!(
            v.domains[1].mbm_local_bytes,
            Some(0),
            "counted from its first reading"
        );
    }

    #[test]
    fn rates_are_bytes_over_seconds_and_none_never_nan_without_time() {
        assert_eq!(bytes_per_s(0, Duration::from_secs(1)), Some(0.0));
        assert_eq!(
            bytes_per_s(1 << 20, Duration::from_millis(250)),
            Some(4.0 * 1_048_576.0)
        );
        assert_eq!(bytes_per_s(1, Duration::ZERO), None);
        assert_eq!(bytes_per_s(0, Duration::ZERO), None, "not 0/0 = NaN");
        let mut v = MonValues {
            mbm_local_delta_bytes: Some(3 << 20),
            mbm_total_delta_bytes: None,
            ..MonValues::default()
        };
        assert_eq!(v.mbm_local_bytes_per_s(), None, "zero interval");
        v.interval = Duration::from_millis(500);
        assert_eq!(v.mbm_local_bytes_per_s(), Some(6.0 * 1_048_576.0));
        assert_eq!(v.mbm_total_bytes_per_s(), None, "no delta, no rate");
        let mib = v.mbm_local_bytes_per_s().map(MibPerSec::from_bytes_per_s);
        assert_eq!(mib, Some(MibPerSec(6.0)));
        assert_eq!(
            MibPerSec::from_bytes(3 << 20, v.interval),
            MibPerSec(6.0),
            "the same arithmetic"
        );
    }

    #[test]
    fn an_unreadable_domain_blanks_the_group_event_but_the_cumulative_count_loses_nothing() {
        let mut acc = two_domains(MonEvents::MBM_LOCAL | MonEvents::MBM_TOTAL);
        poll(&mut acc, [Some(10), Some(20)], [Some(0), Some(0)]);
        poll(&mut acc, [Some(12), Some(21)], [Some(0), Some(0)]);
        // domain 1 unavailable this poll
        let v = poll(&mut acc, [Some(13), None], [Some(0), Some(0)]);
        assert_eq!(
            v.mbm_local_delta_bytes, None,
            "a partial sum would understate"
        );
        assert_eq!(v.domains[0].mbm_local_delta_bytes, Some(100));
        assert_eq!(v.domains[1].mbm_local_delta_bytes, None);
        assert_eq!(v.mbm_total_delta_bytes, Some(0), "other events unaffected");
        assert_eq!(
            v.mbm_local_bytes,
            Some(300 + 100),
            "the last good count of domain 1 stays"
        );
        // readable again: the interval is not placed (one end missing), the bytes are counted
        let v = poll(&mut acc, [Some(14), Some(25)], [Some(0), Some(0)]);
        assert_eq!(v.domains[1].mbm_local_delta_bytes, None);
        assert_eq!(v.mbm_local_delta_bytes, None);
        assert_eq!(v.mbm_local_bytes, Some(400 + 500));
        let v = poll(&mut acc, [Some(15), Some(26)], [Some(0), Some(0)]);
        assert_eq!(v.mbm_local_delta_bytes, Some(200));
        assert_eq!(v.mbm_local_bytes, Some(500 + 600));
    }

    #[test]
    fn cumulative_counts_cross_the_counter_wrap() {
        let mut acc = two_domains(MonEvents::MBM_TOTAL);
        let top = (1u64 << 24) - 5;
        poll(&mut acc, [None, None], [Some(top), Some(0)]);
        let v = poll(&mut acc, [None, None], [Some(5), Some(1)]);
        assert_eq!(v.domains[0].mbm_total_delta_bytes, Some(1000));
        assert_eq!(v.mbm_total_bytes, Some(1100));
        assert_eq!(v.mbm_local_bytes, None, "not monitored");
    }

    #[test]
    fn occupancy_is_summed_per_domain_over_its_contexts_and_blank_when_one_is_unknown() {
        let f = CounterFormat::BYTES;
        let mut acc = MonAccumulator::new(MonEvents::LLC_OCCUPANCY, &[D1, D0, D1], f, 0);
        acc.record(0, RmidEvent::LlcOccupancy, Some(5));
        acc.record(1, RmidEvent::LlcOccupancy, Some(7));
        acc.record(2, RmidEvent::LlcOccupancy, Some(11));
        let v = acc.finish(Instant::now()).clone();
        assert_eq!(v.domains.len(), 2);
        assert_eq!(v.domains[0].llc_occupancy_bytes, Some(7));
        assert_eq!(v.domains[1].llc_occupancy_bytes, Some(16));
        assert_eq!(v.llc_occupancy_bytes, Some(23));
        acc.record(0, RmidEvent::LlcOccupancy, Some(5));
        acc.record(1, RmidEvent::LlcOccupancy, Some(7));
        let v = acc.finish(Instant::now()).clone();
        assert_eq!(
            v.domains[1].llc_occupancy_bytes, None,
            "context 2 unrecorded"
        );
        assert_eq!(v.llc_occupancy_bytes, None);
    }

    #[test]
    fn pmu_deltas_and_time_are_reported() {
        let mut acc = MonAccumulator::new(MonEvents::IPC, &[], CounterFormat::BYTES, 1);
        let c = |i, cy| PmuCounts {
            instructions: i,
            cycles: cy,
            llc_misses: 0,
            llc_references: Some(cy / 2),
        };
        let t0 = Instant::now();
        acc.record_pmu([Some(c(100, 100))]);
        let v = acc.finish(t0).clone();
        assert_eq!(v.instructions_delta, Some(0));
        assert_eq!(v.interval, Duration::ZERO);
        acc.record_pmu([Some(c(400, 250))]);
        let v = acc.finish(t0 + Duration::from_secs(1)).clone();
        assert_eq!(v.ipc(), Some(2.0));
        assert_eq!(v.llc_misses_delta, None, "not monitored");
        assert_eq!(v.llc_references_delta, None, "not monitored");
        assert_eq!(v.llc_occupancy_bytes, None, "no RMID event, no domain");
        assert_eq!(v.interval, Duration::from_secs(1));
        assert_eq!(v.polled_at, Some(t0 + Duration::from_secs(1)));
        let mut acc = MonAccumulator::new(MonEvents::LLC_REFERENCES, &[], CounterFormat::BYTES, 1);
        acc.record_pmu([Some(c(100, 100))]);
        acc.finish(t0);
        acc.record_pmu([Some(c(400, 300))]);
        let v = acc.finish(t0 + Duration::from_secs(1));
        assert_eq!(v.llc_references_delta, Some(150 - 50));
    }
}

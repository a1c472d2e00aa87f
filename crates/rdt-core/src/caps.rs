//! What the platform can do: RDT / PQoS capabilities decoded from CPUID.
//!
//! Every field names the CPUID bits it comes from. A field a CPUID source did not record (a
//! partial dump) is reported as unknown ([`Feature::DetailsUnknown`] or `None`), never as zero.

use crate::cpuid::CpuidSource;
use crate::{CacheBitmask, ClassId, MbaLimit};

/// CPU vendor, from CPUID.0:EBX,EDX,ECX.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`.
    Amd,
    /// `HygonGenuine` (AMD-derived; follows the AMD register layout).
    Hygon,
    /// Any other 12-byte vendor string.
    Other(String),
}

impl Vendor {
    /// Whether the CPU follows AMD's PQoS register and leaf layout: AMD, and Hygon (an
    /// AMD-derived design; cache leaf 8000_001DH, PQoS leaf 8000_0020H, MBA in 1/8 GB/s
    /// units, one L3 per core complex). The one vendor test of the workspace.
    #[must_use]
    pub const fn is_amd_like(&self) -> bool {
        matches!(self, Self::Amd | Self::Hygon)
    }
}

/// Whether a feature is present, and its parameters when the CPUID source recorded them.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Feature<T> {
    /// The enumeration bit is clear (or the leaf is beyond the maximum leaf).
    #[default]
    Unsupported,
    /// The enumeration bit is set but the leaf holding the parameters was not recorded
    /// (common in partial CPUID dumps). Never produced by the CPUID instruction itself.
    DetailsUnknown,
    /// Present, with its parameters.
    Supported(T),
}

impl<T> Feature<T> {
    /// The parameters, when known.
    pub const fn get(&self) -> Option<&T> {
        match self {
            Self::Supported(t) => Some(t),
            _ => None,
        }
    }

    /// The parameters, mutable, when known.
    pub const fn get_mut(&mut self) -> Option<&mut T> {
        match self {
            Self::Supported(t) => Some(t),
            _ => None,
        }
    }

    /// Whether the feature is enumerated at all (details known or not).
    pub const fn is_present(&self) -> bool {
        !matches!(self, Self::Unsupported)
    }
}

/// Monitoring events the hardware counts (CPUID.(EAX=0FH,ECX=1):EDX), plus the derived
/// remote bandwidth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]

pub struct MonEventSupport {
    /// L3 occupancy, EDX\[0\]. Event id 1 in IA32_QM_EVTSEL.
    pub llc_occupancy: bool,
    /// Total memory bandwidth, EDX\[1\]. Event id 2.
    pub mbm_total: bool,
    /// Local memory bandwidth, EDX\[2\]. Event id 3.
    pub mbm_local: bool,
}

/// Cache monitoring (CMT) and memory bandwidth monitoring (MBM), CPUID.(EAX=0FH).
///
/// # References
/// Intel SDM Vol. 3B, 18.18.3 "Enumeration and Detecting Support of Cache Monitoring".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitoringCaps {
    /// Highest RMID of any resource in this package, CPUID.(0FH,0):EBX.
    pub max_rmid: u32,
    /// Number of RMIDs for L3 events, CPUID.(0FH,1):ECX + 1. Valid RMIDs are `0..num_rmids`.
    pub num_rmids: u32,
    /// Upscaling factor: bytes per IA32_QM_CTR count, CPUID.(0FH,1):EBX.
    pub upscaling_factor: u32,
    /// Width of the MBM counters in bits, 24 + CPUID.(0FH,1):EAX\[7:0\]. Counters wrap at
    /// `2^counter_width`.
    pub counter_width: u32,
    /// CPUID.(0FH,1):EAX\[8\]: the overflow bit of IA32_QM_CTR is present.
    pub overflow_bit: bool,
    /// CPUID.(0FH,1):EAX\[9\]/\[10\]: non-CPU agent (I/O RDT) occupancy / bandwidth monitoring.
    pub io_rdt: bool,
    /// Supported events.
    pub events: MonEventSupport,
}

/// Cache allocation (CAT) of one cache level, CPUID.(EAX=10H, ECX=1 for L3, 2 for L2).
///
/// # References
/// Intel SDM Vol. 3B, 18.19.4.2 "Cache Allocation Technology: Enumeration".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatCaps {
    /// Capacity bitmask length in bits (cache ways that can be allocated), EAX\[4:0\] + 1.
    pub cbm_len: u32,
    /// Bits of the CBM that other agents (GPU, I/O) may also use, EBX.
    pub shareable_bits: u64,
    /// Number of classes of service with CDP off, EDX\[15:0\] + 1. On the OS interface
    /// the classes resctrl gives out: the kernel's `closids_supported()`, the fewest
    /// `num_closids` of all resources (a control group's one CLOSID must be valid for
    /// each), doubled while CDP is on, so [`CatCaps::usable_classes`] is the kernel's count.
    pub num_classes: u32,
    /// Code and data prioritization supported, ECX\[2\].
    pub cdp_supported: bool,
    /// CDP currently on (IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0, or resctrl's `cdp` mount
    /// option). CPUID cannot tell; detection reports `false` and a backend updates it.
    pub cdp_enabled: bool,
    /// Non-contiguous CBMs accepted, ECX\[3\] on Intel; always true on AMD (the AMD PQoS spec
    /// allows any non-zero mask; the kernel sets `arch_has_sparse_bitmasks` for AMD).
    pub non_contiguous_cbm: bool,
    /// Non-CPU agent (I/O RDT) allocation, ECX\[1\].
    pub io_rdt: bool,
    /// Minimum number of set bits in a CBM (kernel `info/L3/min_cbm_bits`): 1 on Intel, 0 on
    /// AMD, whose PQoS extensions accept an empty mask (a class that may not fill the cache).
    /// Haswell needs 2, but has no CPUID CAT enumeration, see [`Capabilities::detect`].
    pub min_cbm_bits: u32,
}

impl CatCaps {
    /// Classes usable now: [`Self::num_classes`], halved while CDP is on (each class then
    /// uses two mask registers, data at 2n and code at 2n+1).
    #[must_use]
    pub const fn usable_classes(&self) -> u32 {
        if self.cdp_enabled {
            self.num_classes / 2
        } else {
            self.num_classes
        }
    }

    /// The mask with every way set (the reset value of a class).
    #[must_use]
    pub const fn full_mask(&self) -> CacheBitmask {
        CacheBitmask::low_bits(self.cbm_len)
    }
}

/// How MBA limits are expressed by the hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbaKind {
    /// Intel MBA: a delay value per class, CPUID.(EAX=10H,ECX=3).
    IntelDelay {
        /// Maximum throttling (delay) value, EAX\[11:0\] + 1 (e.g. 90: the lowest limit is 10%).
        max_delay: u32,
        /// Delay values are linear, ECX\[2\]. Non-linear MBA is not supported by this crate.
        linear: bool,
        /// MBA 3.0 per-thread throttling, ECX\[0\].
        per_thread: bool,
    },
    /// AMD L3 memory bandwidth enforcement, CPUID 8000_0020H subleaf 1 (MBA) or 2 (SMBA).
    AmdBandwidth {
        /// Width of the bandwidth-limit field, EAX. Limits are `0..=2^width`; `2^width` is
        /// unlimited (Linux `max_bw = 1 << width`).
        width: u32,
    },
}

/// Memory bandwidth allocation (Intel MBA, AMD MBA or SMBA).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbaCaps {
    /// Number of classes of service: CPUID.(10H,3):EDX\[15:0\] + 1 (Intel) or
    /// CPUID.(8000_0020H,1 or 2):EDX\[15:0\] + 1 (AMD). On the OS interface the
    /// kernel's `closids_supported()`, as for [`CatCaps::num_classes`].
    pub num_classes: u32,
    /// Limit encoding.
    pub kind: MbaKind,
    /// The kernel's MBA software controller is on (resctrl mounted with `mba_MBps`): limits
    /// are set and shown in MiB/s ([`MbaLimit::MibPerSec`], pqos's `mba_max`, "MBA CTRL")
    /// instead of the hardware's encoding. CPUID cannot tell and the MSR interface has no
    /// such controller, so detection reports `false`; the resctrl backend sets it from the
    /// mount options in force.
    pub ctrl_enabled: bool,
}

impl MbaCaps {
    /// How the limits of a core's threads combine as CPUID tells it (Intel): per thread on
    /// MBA 3.0 (CPUID.(10H,3):ECX\[0\]), else the larger delay (the kernel's
    /// `thread_throttle_mode` `max`; MBA 2.0's IA32_MBA_CFG may select the smaller, which
    /// only a register read can tell). `None` for AMD, whose limits are per class.
    #[must_use]
    pub const fn thread_throttle(&self) -> Option<crate::ThreadThrottle> {
        match self.kind {
            MbaKind::IntelDelay {
                per_thread: true, ..
            } => Some(crate::ThreadThrottle::PerThread),
            MbaKind::IntelDelay { .. } => Some(crate::ThreadThrottle::Max),
            MbaKind::AmdBandwidth { .. } => None,
        }
    }

    /// Granularity in percent for Intel (`100 - max_delay`, as pqos's `throttle_step` and the
    /// kernel's `bandwidth_gran`); 1 unit for AMD.
    #[must_use]
    pub const fn granularity(&self) -> u32 {
        match self.kind {
            MbaKind::IntelDelay { max_delay, .. } => 100u32.saturating_sub(max_delay),
            MbaKind::AmdBandwidth { .. } => 1,
        }
    }

    /// The limit the platform stores when `limit` is written on `interface`: what reading
    /// it back gives, so that a value is normalised once, before it is compared or written.
    /// Intel percentages are rounded to the [granularity](MbaCaps::granularity): on the MSR
    /// interface half up and at least `100 - max_delay` (pqos `hw_mba_set`, the delay
    /// register holds at most `max_delay`: 75 -> 80, 5 -> 10 in 10 % steps); on the OS
    /// interface up (the kernel's `bw_validate()`, `roundup(bw, bw_gran)`: 71 -> 80), never
    /// above 100. MiB/s (`mba_MBps`) and AMD units are stored as given. The value is not
    /// range-checked here ([`Capabilities::check_bandwidth_limit`] does that).
    ///
    /// # Examples
    /// ```
    /// use rdt_core::{Interface, MbaCaps, MbaKind, MbaLimit};
    /// let mba = MbaCaps {
    ///     num_classes: 8,
    ///     kind: MbaKind::IntelDelay { max_delay: 90, linear: true, per_thread: false },
    ///     ctrl_enabled: false,
    /// };
    /// assert_eq!(mba.stored_limit(Interface::Msr, MbaLimit::Percent(74)), MbaLimit::Percent(70));
    /// assert_eq!(mba.stored_limit(Interface::Os, MbaLimit::Percent(74)), MbaLimit::Percent(80));
    /// assert_eq!(mba.stored_limit(Interface::Os, MbaLimit::Percent(95)), MbaLimit::Percent(100));
    /// ```
    #[must_use]
    pub fn stored_limit(&self, interface: crate::Interface, limit: MbaLimit) -> MbaLimit {
        let (MbaKind::IntelDelay { max_delay, .. }, MbaLimit::Percent(p)) = (self.kind, limit)
        else {
            return limit;
        };
        let step = self.granularity().max(1);
        let p = u32::from(p);
        let stored = match interface {
            crate::Interface::Msr | crate::Interface::Mmio => {
                crate::round_to_step(p, step).max(100u32.saturating_sub(max_delay))
            }
            crate::Interface::Os => p.div_ceil(step) * step,
        };
        MbaLimit::Percent(u8::try_from(stored.min(100)).unwrap_or(100))
    }

    /// The "no limit" value of a class, its reset value: with the kernel's `mba_MBps`
    /// controller on, `MBA_MAX_MBPS` (`u32::MAX` MiB/s, Linux `fs/resctrl/rdtgroup.c`);
    /// otherwise 100% on Intel, `2^width` units on AMD.
    #[must_use]
    pub const fn unlimited(&self) -> MbaLimit {
        if self.ctrl_enabled {
            return MbaLimit::MibPerSec(u32::MAX);
        }
        match self.kind {
            MbaKind::IntelDelay { .. } => MbaLimit::Percent(100),
            MbaKind::AmdBandwidth { width } => MbaLimit::AmdUnits(1 << width),
        }
    }
}

/// Which memory-bandwidth allocation resource a limit is for: the L3 external bandwidth
/// (Intel MBA, AMD MBA) or AMD's slow-memory bandwidth (SMBA, CXL and other slow memory).
/// Both take the same limits per class and L3 domain; they differ in where they live
/// (AMD MBA: MSR 0xC000_0200 + class, SMBA: 0xC000_0280 + class, the kernel's
/// `MSR_IA32_MBA_BW_BASE`/`MSR_IA32_SMBA_BW_BASE`; resctrl schemata `MB:` and `SMBA:`) and
/// in their CPUID subleaf (8000_0020H subleaf 1 and 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MbaResource {
    /// Memory bandwidth allocation (Intel MBA, AMD L3 MBA): [`Capabilities::mba`].
    #[default]
    Mba,
    /// AMD slow-memory bandwidth allocation: [`Capabilities::smba`].
    Smba,
}

impl MbaResource {
    /// Both resources, MBA first.
    pub const ALL: [Self; 2] = [Self::Mba, Self::Smba];

    /// The resource's name in pqos's lines and in messages: `MBA`, `SMBA`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Mba => "MBA",
            Self::Smba => "SMBA",
        }
    }

    /// Its resctrl schema (the `schemata` line and the `info/` directory): `MB`, `SMBA`.
    #[must_use]
    pub const fn schema(self) -> &'static str {
        match self {
            Self::Mba => "MB",
            Self::Smba => "SMBA",
        }
    }
}

impl std::fmt::Display for MbaResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Geometry of one cache level, from CPUID leaf 4 (Intel) or 8000_001DH (AMD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheGeometry {
    /// Cache level (2 or 3), EAX\[7:5\].
    pub level: u32,
    /// Ways of associativity, EBX\[31:22\] + 1.
    pub ways: u32,
    /// Physical line partitions, EBX\[21:12\] + 1.
    pub partitions: u32,
    /// Line size in bytes, EBX\[11:0\] + 1.
    pub line_size: u32,
    /// Number of sets, ECX + 1.
    pub sets: u32,
    /// Maximum number of logical processor ids sharing this cache, EAX\[25:14\] + 1.
    pub max_sharing_ids: u32,
}

impl CacheGeometry {
    /// Bytes per way: partitions × sets × line size.
    #[must_use]
    pub const fn way_size(&self) -> u64 {
        self.partitions as u64 * self.sets as u64 * self.line_size as u64
    }

    /// Total size in bytes: way size × ways.
    #[must_use]
    pub const fn total_size(&self) -> u64 {
        self.way_size() * self.ways as u64
    }
}

/// Performance-monitoring capabilities that monitoring uses for IPC, LLC misses and LLC
/// references, CPUID.(EAX=0AH) on Intel.
///
/// pqos (`lib/hw_cap.c` `hw_cap_mon_discover`) lists IPC when CPUID.0AH:EBX\[1:0\] is 0 and
/// EDX\[4:0\] (fixed counters) is above 1, and LLC misses and LLC references together when
/// EAX\[15:8\] (general-purpose counters) is above 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmuCaps {
    /// Instructions retired and unhalted cycles can be counted (IPC).
    pub ipc: bool,
    /// LLC misses can be counted.
    pub llc_misses: bool,
    /// LLC references can be counted (the architectural "LLC Reference" event, SDM Vol. 3B
    /// 20.2.1.2 / 21.2.1.2).
    pub llc_references: bool,
}

/// Everything detection found.
///
/// # References
/// Intel SDM Vol. 3B, ch. 18.18-18.19 "Intel Resource Director Technology"; AMD64 Technology
/// Platform Quality of Service Extensions (pub. 56375); pqos(8), `pqos -d`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// CPU vendor.
    pub vendor: Vendor,
    /// Brand string, CPUID 8000_0002H..8000_0004H, trimmed; `None` if not recorded.
    pub brand: Option<String>,
    /// Processor signature CPUID.1:EAX (family/model/stepping); `None` if not recorded.
    pub signature: Option<u32>,
    /// CMT/MBM. Requires CPUID.(7,0):EBX\[12\] (PQM) and CPUID.(0FH,0):EDX\[1\].
    pub monitoring: Feature<MonitoringCaps>,
    /// L3 CAT. Requires CPUID.(7,0):EBX\[15\] (PQE) and CPUID.(10H,0):EBX\[1\].
    pub l3_cat: Feature<CatCaps>,
    /// L2 CAT. Requires PQE and CPUID.(10H,0):EBX\[2\].
    pub l2_cat: Feature<CatCaps>,
    /// Memory bandwidth allocation: Intel PQE and CPUID.(10H,0):EBX\[3\]; AMD
    /// CPUID.8000_0020H.0:EBX\[1\].
    pub mba: Feature<MbaCaps>,
    /// AMD slow memory bandwidth allocation, CPUID.8000_0020H.0:EBX\[2\].
    pub smba: Feature<MbaCaps>,
    /// L3 cache geometry.
    pub l3_cache: Option<CacheGeometry>,
    /// L2 cache geometry.
    pub l2_cache: Option<CacheGeometry>,
    /// PMU events for IPC and LLC misses.
    pub pmu: PmuCaps,
    /// The uncore PCIe LLC events ([`crate::MonEvents::UNCORE`]: LLC misses and references
    /// of PCIe reads and writes, counted per socket by the CHA performance monitors through
    /// MSRs). pqos enables them on CPU model 0x55 only (Skylake-SP and Cascade Lake-SP;
    /// `lib/uncore_monitoring.c` `uncore_mon_discover`) and on the MSR interface only
    /// (`lib/api.c` sets `mon_start_uncore` for the MSR interface alone), so the OS
    /// interface's capabilities never list them.
    pub uncore_pcie: bool,
    /// Sub-NUMA Clustering as the MSR interface finds it ([`SncState`]); `None` without SNC,
    /// and on the OS interface (pqos v25.04 reports SNC only on MSR). CPUID cannot tell:
    /// detection reports `None` and the MSR backend sets it from the topology and
    /// MSR_RMID_SNC_CONFIG.
    pub snc: Option<SncState>,
    /// AMD's BMEC and ABMC ([`crate::mbm::AmdMbmCaps`]); all clear elsewhere.
    pub amd_mbm: crate::mbm::AmdMbmCaps,
    /// Intel's MBA 4.0 extensions as the MSR interface finds them (pqos v23.11+
    /// `lib/hw_cap.c` `hw_cap_mba_discover`): `None` when the part has none (CPUID.(7,0):
    /// EDX\[30\] clear, so no IA32_CORE_CAPABILITIES, or no CPU's IA32_CORE_CAPABILITIES
    /// (0xCF) bit 10 set) and on the OS interface, which pqos never reports them on;
    /// `Some(enabled)` from IA32_MBA_CFG (0xC84) bit 2 (pqos keeps the last MBA domain's).
    /// CPUID alone cannot tell: detection reports `None` and the MSR backend sets it.
    pub mba40: Option<bool>,
    /// L3 I/O RDT allocation as the MSR interface finds it (pqos v23.11+ `lib/hw_cap.c`
    /// `hw_cap_l3ca_iordt`, `pqos_cap_l3ca.iordt`/`iordt_on`): `None` when the L3 CAT does
    /// not enumerate non-CPU agent allocation (CPUID.(10H,1):ECX\[1\] clear) and on the OS
    /// interface; `Some(enabled)` from IA32_L3_IO_QOS_CFG (0xC83) bit 0, on only if it is
    /// set in every L3 domain (pqos requires all of them). Detection reports `None` and the
    /// MSR backend sets it.
    pub l3_iordt: Option<bool>,
    /// L3 I/O RDT monitoring as the MSR interface finds it (pqos v23.11+ `lib/hw_cap.c`,
    /// `pqos_cap_mon.iordt`/`iordt_on`): `None` when L3 monitoring does not enumerate
    /// non-CPU agents ([`MonitoringCaps::io_rdt`] clear) and on the OS interface;
    /// `Some(enabled)` from IA32_L3_IO_QOS_CFG (0xC83) bit 1, on only if it is set on every
    /// socket. Set by `pqos -r l3iordt-on|off` ([`crate::MonReset::l3_iordt`]). Detection
    /// reports `None` and the MSR backend sets it.
    pub mon_iordt: Option<bool>,
}

/// Sub-NUMA Clustering (SNC) on an Intel part, as pqos `lib/hw_cap.c`
/// `hw_cap_mon_snc_state` finds it and `pqos -d` prints it (`Sub-NUMA Clustering: total`
/// under `Monitoring`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SncState {
    /// NUMA nodes per L3 cache, more than 1 (2 with SNC2). pqos divides the NUMA nodes by
    /// the sockets; here the most nodes among the CPUs of one L3 domain (the kernel's
    /// `snc_nodes_per_l3_cache`), the same number where each socket has one L3.
    pub nodes_per_l3: u32,
    /// How an RMID counts ([`SncMode`]).
    pub mode: SncMode,
}

/// How MBM and CMT count with SNC on: MSR_RMID_SNC_CONFIG (0xCA0) bit 0 on each socket.
///
/// # References
/// Linux `arch/x86/kernel/cpu/resctrl/monitor.c` (`snc_remap_rmids`: bit 0 clear is RMID
/// sharing mode); pqos `lib/hw_cap.c` (`(val & 1) ? PQOS_SNC_LOCAL : PQOS_SNC_TOTAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SncMode {
    /// Bit 0 clear (what Linux sets): the RMIDs are divided between the nodes, and a
    /// group's counts on every node of its L3 make its total. pqos prints `total`.
    Total,
    /// Bit 0 set (the power-on value, legacy mode): each RMID counts on its own node only.
    /// pqos prints `local`.
    Local,
}

impl SncMode {
    /// pqos's word for the mode (`pqos/cap.c`): `total` or `local`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Total => "total",
            Self::Local => "local",
        }
    }
}

/// Which CAT resource a mask or class is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CatResource {
    /// Last-level (L3) cache.
    L3,
    /// L2 cache.
    L2,
}

impl std::fmt::Display for CatResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::L3 => "L3",
            Self::L2 => "L2",
        })
    }
}

/// A value is outside what this platform allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// The resource is not supported (or its parameters are unknown).
    #[error("{0} is not supported on this platform")]
    Unsupported(&'static str),
    /// A mask has bits beyond the CBM length.
    #[error(
        "mask {mask:#x} is wider than the {cbm_len}-bit {resource} capacity bitmask (highest allowed {max:#x})"
    )]
    MaskTooWide {
        /// Resource.
        resource: CatResource,
        /// Offending mask.
        mask: CacheBitmask,
        /// CBM length in bits.
        cbm_len: u32,
        /// The all-ways mask.
        max: u64,
    },
    /// A mask is not one run of set bits and the CPU requires that.
    #[error(
        "mask {mask:#x} is not contiguous and this CPU's {resource} CAT requires contiguous masks"
    )]
    NonContiguous {
        /// Resource.
        resource: CatResource,
        /// Offending mask.
        mask: CacheBitmask,
    },
    /// A mask has fewer set bits than the minimum.
    #[error("mask {mask:#x} has fewer than the {min} bits {resource} CAT requires")]
    TooFewBits {
        /// Resource.
        resource: CatResource,
        /// Offending mask.
        mask: CacheBitmask,
        /// Minimum bits.
        min: u32,
    },
    /// A class of service is beyond the number of classes.
    #[error("COS{class} is out of range: {resource} has {num_classes} classes (COS0-COS{})", num_classes.saturating_sub(1))]
    ClassOutOfRange {
        /// What the class was for (`"L3 CAT"`, `"MBA"`, ...).
        resource: &'static str,
        /// Offending class.
        class: ClassId,
        /// Usable classes.
        num_classes: u32,
    },
    /// An MBA value is outside the accepted range.
    #[error("MBA value {value} is out of range (from {min} to {max})")]
    MbaOutOfRange {
        /// Offending value.
        value: u32,
        /// Lowest accepted.
        min: u32,
        /// Highest accepted.
        max: u32,
    },
}

/// A capability value no real platform has: CPUID (a dump, a device, a hypervisor) or a
/// resctrl `info/` file claims more than [`Capabilities::check_plausible`] accepts. Taken at
/// face value, such a value would make per-class or per-RMID tables of gigabytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("implausible {what}: {value} (at most {max} accepted; no known platform has more)")]
pub struct ImplausibleError {
    /// What the value is (`L3 CAT classes of service`, `RMIDs`, ...), with its CPUID source.
    pub what: &'static str,
    /// The value claimed.
    pub value: u64,
    /// The largest accepted.
    pub max: u64,
}

impl Capabilities {
    /// The most classes of service a resource may claim: 512. Intel parts have 4 to 16
    /// (CPUID.(10H,n):EDX\[15:0\] + 1), AMD parts 16; the field allows 65,536.
    pub const MAX_PLAUSIBLE_CLASSES: u32 = 512;
    /// The most RMIDs monitoring may claim: 65,536. Parts have 56 to a few thousand
    /// (CPUID.(0FH,1):ECX + 1); the field allows 2^32.
    pub const MAX_PLAUSIBLE_RMIDS: u32 = 1 << 16;

    /// Checks that every supported feature's table sizes are plausible: classes of service
    /// at most [`Self::MAX_PLAUSIBLE_CLASSES`], RMIDs at most
    /// [`Self::MAX_PLAUSIBLE_RMIDS`], a CBM of 1 to 64 bits, an AMD bandwidth field of at
    /// most 30 bits (detection refuses wider). Whoever sizes tables from the capabilities (the simulated platform, a
    /// backend) calls this first, so that a hostile or corrupt source gives an error instead
    /// of an allocation of gigabytes.
    ///
    /// # Errors
    /// [`ImplausibleError`] naming the first value out of range.
    pub fn check_plausible(&self) -> Result<(), ImplausibleError> {
        let check = |what, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(ImplausibleError { what, value, max })
            }
        };
        let classes = u64::from(Self::MAX_PLAUSIBLE_CLASSES);
        if let Some(m) = self.monitoring.get() {
            let rmids = u64::from(Self::MAX_PLAUSIBLE_RMIDS);
            check(
                "RMID count, CPUID.(0FH,1):ECX + 1",
                u64::from(m.num_rmids),
                0,
                rmids,
            )?;
            check(
                "highest RMID, CPUID.(0FH,0):EBX",
                u64::from(m.max_rmid),
                0,
                rmids,
            )?;
            check(
                "MBM counter width, 24 + CPUID.(0FH,1):EAX[7:0]",
                u64::from(m.counter_width),
                1,
                64,
            )?;
        }
        for (what_len, what_cos, cat) in [
            (
                "L3 CBM length, CPUID.(10H,1):EAX[4:0] + 1",
                "L3 CAT classes of service, CPUID.(10H,1):EDX[15:0] + 1",
                self.l3_cat.get(),
            ),
            (
                "L2 CBM length, CPUID.(10H,2):EAX[4:0] + 1",
                "L2 CAT classes of service, CPUID.(10H,2):EDX[15:0] + 1",
                self.l2_cat.get(),
            ),
        ] {
            if let Some(c) = cat {
                check(what_len, u64::from(c.cbm_len), 1, 64)?;
                check(what_cos, u64::from(c.num_classes), 1, classes)?;
            }
        }
        for (what, what_width, mba) in [
            (
                "MBA classes of service",
                "MBA bandwidth field width, CPUID.(8000_0020H,1):EAX",
                self.mba.get(),
            ),
            (
                "SMBA classes of service",
                "SMBA bandwidth field width, CPUID.(8000_0020H,2):EAX",
                self.smba.get(),
            ),
        ] {
            if let Some(m) = mba {
                check(what, u64::from(m.num_classes), 1, classes)?;
                if let MbaKind::AmdBandwidth { width } = m.kind {
                    check(what_width, u64::from(width), 0, 30)?;
                }
            }
        }
        Ok(())
    }
}

impl Capabilities {
    /// The `resource` of the [`LimitError::ClassOutOfRange`] that
    /// [`Capabilities::check_class`] gives on the OS interface: resctrl's CLOSIDs, the
    /// smallest `num_closids` of all resources.
    pub const OS_CLASS_LIMIT: &'static str =
        "resctrl (CLOSIDs: the smallest num_closids of all resources)";

    /// Capabilities of a `vendor` CPU with no RDT/PQoS feature, no cache geometry and no
    /// PMU: what detection reports when CPUID has nothing, and the base a test adds to.
    #[must_use]
    pub const fn none(vendor: Vendor) -> Self {
        Self {
            vendor,
            brand: None,
            signature: None,
            monitoring: Feature::Unsupported,
            l3_cat: Feature::Unsupported,
            l2_cat: Feature::Unsupported,
            mba: Feature::Unsupported,
            smba: Feature::Unsupported,
            l3_cache: None,
            l2_cache: None,
            pmu: PmuCaps {
                ipc: false,
                llc_misses: false,
                llc_references: false,
            },
            uncore_pcie: false,
            snc: None,
            mba40: None,
            l3_iordt: None,
            mon_iordt: None,
            amd_mbm: crate::mbm::AmdMbmCaps {
                bmec: false,
                event_config_mask: 0,
                abmc_counters: None,
            },
        }
    }

    /// Decodes the capabilities from a CPUID source.
    ///
    /// Leaves the source did not record give [`Feature::DetailsUnknown`] or `None`. CDP is
    /// reported as off ([`CatCaps::cdp_enabled`]); CPUID cannot see the MSR that enables it.
    ///
    /// Haswell-EP parts that have CAT without CPUID enumeration (E5-2658 v3 and friends,
    /// found by the kernel and pqos through brand-string lists and MSR probing) are reported
    /// without L3 CAT: probing MSRs is a backend's business, not detection's.
    ///
    /// A leaf above the maximum leaf (CPUID.0:EAX, CPUID.80000000H:EAX) does not exist, so
    /// its features are [`Feature::Unsupported`]; the rules are listed in `detect.rs`. Use
    /// [`crate::explain_no_rdt`] for a sentence naming the clear bits when
    /// [`Self::has_rdt`] is false.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::{Capabilities, CpuidRegs, Feature};
    /// // Xeon Gold 6140 leaves 0, 7, 10H (the L3 CAT subleaf only; MBA's subleaf 3 missing).
    /// let src = |leaf: u32, sub: u32| {
    ///     let r = |eax, ebx, ecx, edx| Some(CpuidRegs { eax, ebx, ecx, edx });
    ///     match (leaf, sub) {
    ///         (0, 0) => r(0x16, 0x756e_6547, 0x6c65_746e, 0x4965_6e69),
    ///         (7, 0) => r(0, 0xd39f_fffb, 0x18, 0),
    ///         (0x10, 0) => r(0, 0xa, 0, 0),
    ///         (0x10, 1) => r(0xa, 0x600, 0x4, 0xf),
    ///         _ => None,
    ///     }
    /// };
    /// let caps = Capabilities::detect(&src);
    /// let l3 = caps.l3_cat.get().unwrap();
    /// assert_eq!((l3.cbm_len, l3.num_classes, l3.cdp_supported), (11, 16, true));
    /// assert_eq!(caps.mba, Feature::DetailsUnknown); // enumerated, parameters not recorded
    /// assert_eq!(caps.monitoring, Feature::DetailsUnknown); // PQM set, leaf 0FH not recorded
    /// ```
    #[must_use]
    pub fn detect(src: &dyn CpuidSource) -> Self {
        crate::detect::detect(src)
    }

    /// The CAT capabilities of a resource, if known.
    #[must_use]
    pub fn cat(&self, resource: CatResource) -> Option<&CatCaps> {
        match resource {
            CatResource::L3 => self.l3_cat.get(),
            CatResource::L2 => self.l2_cat.get(),
        }
    }

    /// Whether any RDT/PQoS feature (monitoring or allocation) is enumerated.
    #[must_use]
    pub fn has_rdt(&self) -> bool {
        self.monitoring.is_present()
            || self.l3_cat.is_present()
            || self.l2_cat.is_present()
            || self.mba.is_present()
            || self.smba.is_present()
    }

    /// Checks a capacity bitmask against this platform's limits for `resource`: width,
    /// contiguity (unless non-contiguous CBMs are supported) and minimum bits.
    ///
    /// # Errors
    /// [`LimitError::Unsupported`], [`LimitError::MaskTooWide`], [`LimitError::NonContiguous`]
    /// or [`LimitError::TooFewBits`].
    pub fn check_mask(&self, resource: CatResource, mask: CacheBitmask) -> Result<(), LimitError> {
        let cat = self
            .cat(resource)
            .ok_or(LimitError::Unsupported(match resource {
                CatResource::L3 => "L3 CAT",
                CatResource::L2 => "L2 CAT",
            }))?;
        let max = cat.full_mask().bits();
        if mask.bits() & !max != 0 {
            return Err(LimitError::MaskTooWide {
                resource,
                mask,
                cbm_len: cat.cbm_len,
                max,
            });
        }
        if !cat.non_contiguous_cbm && !mask.is_contiguous() {
            return Err(LimitError::NonContiguous { resource, mask });
        }
        if mask.ways() < cat.min_cbm_bits {
            return Err(LimitError::TooFewBits {
                resource,
                mask,
                min: cat.min_cbm_bits,
            });
        }
        Ok(())
    }

    /// Checks one class's masks of `resource` before any is written: the class is usable
    /// ([`Capabilities::check_cat_class`]), the mask kind matches the CDP state (one mask
    /// with CDP off, a data and a code mask with it on) and each mask is one the platform
    /// takes ([`Capabilities::check_mask`]). The one check of a CAT write, on every
    /// interface (the planner, the MSR and resctrl backends and the fake call it).
    ///
    /// # Errors
    /// [`LimitError`]s of the class and masks; [`RequestError::CdpMismatch`](crate::RequestError::CdpMismatch).
    pub fn check_cat(
        &self,
        resource: CatResource,
        class: &crate::CatClass,
    ) -> Result<(), crate::RequestError> {
        use crate::{CatMask, RequestError};
        self.check_cat_class(resource, class.class)?;
        let cdp = self.cat(resource).is_some_and(|c| c.cdp_enabled);
        match (class.mask, cdp) {
            (CatMask::Unified(m), false) => self.check_mask(resource, m)?,
            (CatMask::Cdp { data, code }, true) => {
                self.check_mask(resource, data)?;
                self.check_mask(resource, code)?;
            }
            (CatMask::Unified(_), true) => {
                return Err(RequestError::CdpMismatch {
                    resource,
                    class: class.class,
                    reason: "CDP is on, so the class needs a data and a code mask",
                });
            }
            (CatMask::Cdp { .. }, false) => {
                return Err(RequestError::CdpMismatch {
                    resource,
                    class: class.class,
                    reason: "CDP is off, so the class takes one mask, not a data/code pair",
                });
            }
        }
        Ok(())
    }

    /// Checks that `class` is a usable class of service for `resource` (CDP halves the count).
    ///
    /// # Errors
    /// [`LimitError::Unsupported`] or [`LimitError::ClassOutOfRange`].
    pub fn check_cat_class(&self, resource: CatResource, class: ClassId) -> Result<(), LimitError> {
        let name = match resource {
            CatResource::L3 => "L3 CAT",
            CatResource::L2 => "L2 CAT",
        };
        let cat = self.cat(resource).ok_or(LimitError::Unsupported(name))?;
        let n = cat.usable_classes();
        if class.get() >= n {
            return Err(LimitError::ClassOutOfRange {
                resource: name,
                class,
                num_classes: n,
            });
        }
        Ok(())
    }

    /// The capabilities of an MBA resource: [`Capabilities::mba`] or [`Capabilities::smba`].
    #[must_use]
    pub const fn bandwidth(&self, resource: MbaResource) -> &Feature<MbaCaps> {
        match resource {
            MbaResource::Mba => &self.mba,
            MbaResource::Smba => &self.smba,
        }
    }

    /// Checks that `class` is a usable MBA class of service.
    ///
    /// # Errors
    /// [`LimitError::Unsupported`] or [`LimitError::ClassOutOfRange`].
    pub fn check_mba_class(&self, class: ClassId) -> Result<(), LimitError> {
        self.check_bandwidth_class(MbaResource::Mba, class)
    }

    /// Checks that `class` is a usable class of service of `resource` (MBA or SMBA).
    ///
    /// # Errors
    /// [`LimitError::Unsupported`] (naming the resource) or [`LimitError::ClassOutOfRange`].
    pub fn check_bandwidth_class(
        &self,
        resource: MbaResource,
        class: ClassId,
    ) -> Result<(), LimitError> {
        let name = resource.name();
        let mba = self
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        if class.get() >= mba.num_classes {
            return Err(LimitError::ClassOutOfRange {
                resource: name,
                class,
                num_classes: mba.num_classes,
            });
        }
        Ok(())
    }

    /// Checks that a CPU (or, on the OS interface, a task) can be put in `class` on
    /// `interface`: below [`Capabilities::classes`] (the largest class count of the
    /// allocation resources on MSR, resctrl's CLOSIDs on OS).
    ///
    /// # Errors
    /// [`LimitError::Unsupported`] without any allocation resource;
    /// [`LimitError::ClassOutOfRange`].
    pub fn check_class(
        &self,
        interface: crate::Interface,
        class: ClassId,
    ) -> Result<(), LimitError> {
        let n = self.classes(interface);
        if n == 0 {
            return Err(LimitError::Unsupported("allocation (CAT/MBA)"));
        }
        if class.get() >= n {
            return Err(LimitError::ClassOutOfRange {
                resource: match interface {
                    crate::Interface::Msr | crate::Interface::Mmio => "COS association",
                    crate::Interface::Os => Self::OS_CLASS_LIMIT,
                },
                class,
                num_classes: n,
            });
        }
        Ok(())
    }

    /// Checks that a reset of allocation (pqos `-R`) can do what `cfg` asks on `interface`,
    /// with `mba_ctrl` the backend's [`crate::BackendExt::mba_ctrl`]: allocation exists, CDP
    /// asked on is supported, and MBA CTRL asked on is the OS interface's and supported.
    ///
    /// # Errors
    /// [`RequestError::FeatureUnsupported`](crate::RequestError::FeatureUnsupported) naming
    /// the feature (`"Allocation"`, `"L3 CDP"`, `"L2 CDP"`, `"MBA CTRL"`).
    pub fn check_alloc_reset(
        &self,
        interface: crate::Interface,
        cfg: &crate::AllocReset,
        mba_ctrl: Option<crate::MbaCtrl>,
    ) -> Result<(), crate::RequestError> {
        use crate::{FeatureSetting, RequestError};
        let unsupported = |feature, reason: Option<&str>| RequestError::FeatureUnsupported {
            feature,
            reason: reason.map(str::to_owned),
        };
        if self.max_classes() == 0 {
            return Err(unsupported("Allocation", Some("no L3 CAT, L2 CAT or MBA")));
        }
        for (setting, resource, feature) in [
            (cfg.l3_cdp, CatResource::L3, "L3 CDP"),
            (cfg.l2_cdp, CatResource::L2, "L2 CDP"),
        ] {
            if setting == FeatureSetting::On && !self.cat(resource).is_some_and(|c| c.cdp_supported)
            {
                return Err(unsupported(feature, None));
            }
        }
        if cfg.mba_ctrl == FeatureSetting::On {
            let why = match (interface, mba_ctrl) {
                (crate::Interface::Msr | crate::Interface::Mmio, _) => Some(
                    "the MBps controller (mba_MBps) is the kernel's: it needs the OS interface",
                ),
                (_, None | Some(crate::MbaCtrl::Unsupported)) => Some(
                    "the kernel's mba_MBps needs MBM, linear (Intel) MBA and no Sub-NUMA \
                     Clustering",
                ),
                _ => None,
            };
            if let Some(why) = why {
                return Err(unsupported("MBA CTRL", Some(why)));
            }
        }
        // lib/allocation.c hw_alloc_reset: "MBA 4.0 setting requested but no MBA present!",
        // "MBA 4.0 extensions requested but not supported by the platform!"
        if cfg.mba40 != FeatureSetting::Any && !self.mba.is_present() {
            return Err(unsupported("MBA 4.0 extensions", Some("no MBA present")));
        }
        if cfg.mba40 == FeatureSetting::On && self.mba40.is_none() {
            let why = if interface == crate::Interface::Os {
                "resctrl has no MBA 4.0 control (pqos reports it on MSR only)"
            } else {
                "IA32_CORE_CAPABILITIES bit 10 is clear on every CPU"
            };
            return Err(unsupported("MBA 4.0 extensions", Some(why)));
        }
        // lib/allocation.c hw_alloc_reset: "L3 I/O RDT setting requested but no L3 CAT
        // present!", "L3 I/O RDT requested but not supported by the platform!"
        if cfg.l3_iordt != FeatureSetting::Any && !self.l3_cat.is_present() {
            return Err(unsupported("L3 I/O RDT", Some("no L3 CAT present")));
        }
        if cfg.l3_iordt == FeatureSetting::On && self.l3_iordt.is_none() {
            let why = if interface == crate::Interface::Os {
                "resctrl has no I/O RDT control"
            } else {
                "the L3 CAT does not enumerate non-CPU agent allocation (CPUID.(10H,1):ECX[1])"
            };
            return Err(unsupported("L3 I/O RDT", Some(why)));
        }
        Ok(())
    }

    /// Checks that a reset of monitoring (pqos `-r CFG`) can do what `cfg` asks on
    /// `interface`, before any write: monitoring exists; I/O RDT monitoring asked on needs
    /// L3 monitoring of non-CPU agents ([`MonitoringCaps::io_rdt`]); an SNC mode needs
    /// Sub-NUMA Clustering ([`Capabilities::snc`]); both are registers of the MSR and MMIO
    /// interfaces (resctrl has neither control). pqos lib/hw_monitoring.c `hw_mon_reset`:
    /// "I/O RDT monitoring requested but not supported by the platform!", "SNC requested
    /// but not supported by the platform!".
    ///
    /// # Errors
    /// [`RequestError::FeatureUnsupported`](crate::RequestError::FeatureUnsupported) naming
    /// the feature (`"Monitoring"`, `"I/O RDT monitoring"`, `"SNC"`) and why.
    pub fn check_mon_reset(
        &self,
        interface: crate::Interface,
        cfg: &crate::MonReset,
    ) -> Result<(), crate::RequestError> {
        use crate::{FeatureSetting, RequestError};
        let unsupported = |feature, reason: &str| RequestError::FeatureUnsupported {
            feature,
            reason: Some(reason.to_owned()),
        };
        let os = interface == crate::Interface::Os;
        let Some(mon) = self.monitoring.get() else {
            return Err(unsupported("Monitoring", "no L3 monitoring present"));
        };
        if cfg.l3_iordt != FeatureSetting::Any && os {
            return Err(unsupported(
                "I/O RDT monitoring",
                "resctrl has no I/O RDT control",
            ));
        }
        if cfg.l3_iordt == FeatureSetting::On && !mon.io_rdt {
            return Err(unsupported(
                "I/O RDT monitoring",
                "L3 monitoring does not enumerate non-CPU agents (CPUID.(0FH,1):EAX[9]/[10])",
            ));
        }
        if cfg.snc.is_some() {
            if os {
                return Err(unsupported("SNC", "resctrl has no SNC mode control"));
            }
            if self.snc.is_none() {
                return Err(unsupported(
                    "SNC",
                    "no L3 cache spans several NUMA nodes (Sub-NUMA Clustering off)",
                ));
            }
        }
        Ok(())
    }

    /// Checks an MBA limit for `class` on `interface`: the class exists, the unit is the one
    /// in force (MiB/s exactly when the kernel's `mba_MBps` controller is on, which only the
    /// OS interface has; percent on Intel; 1/8 GB/s units on AMD) and the value is in range
    /// (percent 1-100, units 1-2^width; MiB/s any). Interface-specific limits (resctrl's
    /// `min_bandwidth`) are the backends'.
    ///
    /// # Errors
    /// [`RequestError::Limit`](crate::RequestError::Limit) (no MBA, class or value out of range),
    /// [`RequestError::MbaUnit`](crate::RequestError::MbaUnit).
    pub fn check_mba_limit(
        &self,
        interface: crate::Interface,
        class: ClassId,
        limit: crate::MbaLimit,
    ) -> Result<(), crate::RequestError> {
        self.check_bandwidth_limit(interface, MbaResource::Mba, class, limit)
    }

    /// [`Capabilities::check_mba_limit`] for `resource`: SMBA's limits are AMD's 1/8 GB/s
    /// units, `1..=2^width` with the width of CPUID.(8000_0020H,2):EAX; the kernel's
    /// `mba_MBps` controller is MBA's only (`is_mba_sc()`), so SMBA never takes MiB/s.
    ///
    /// # Errors
    /// As [`Capabilities::check_mba_limit`], naming `resource`.
    pub fn check_bandwidth_limit(
        &self,
        interface: crate::Interface,
        resource: MbaResource,
        class: ClassId,
        limit: crate::MbaLimit,
    ) -> Result<(), crate::RequestError> {
        use crate::{Interface, MbaLimit, MbaUnitMismatch as M, RequestError};
        let mba = self
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(resource.name()))?;
        self.check_bandwidth_class(resource, class)?;
        let unit = |mismatch| RequestError::MbaUnit {
            class,
            limit,
            mismatch,
        };
        let range = |value: u32, max: u32| {
            if value == 0 || value > max {
                Err(LimitError::MbaOutOfRange { value, min: 1, max }.into())
            } else {
                Ok(())
            }
        };
        match (limit, interface, mba.ctrl_enabled, mba.kind) {
            (MbaLimit::MibPerSec(_), Interface::Msr | Interface::Mmio, _, _) => {
                Err(unit(M::MibPerSecOnMsr))
            }
            (MbaLimit::MibPerSec(_), Interface::Os, false, _) => Err(unit(M::ControllerOff)),
            (MbaLimit::MibPerSec(_), Interface::Os, true, _) => Ok(()),
            (_, _, true, _) => Err(unit(M::ControllerOn)),
            (MbaLimit::Percent(p), _, false, MbaKind::IntelDelay { .. }) => {
                range(u32::from(p), 100)
            }
            (MbaLimit::AmdUnits(u), _, false, MbaKind::AmdBandwidth { width }) => {
                range(u, 1u32.checked_shl(width).unwrap_or(u32::MAX))
            }
            (MbaLimit::Percent(_), _, false, MbaKind::AmdBandwidth { .. }) => {
                Err(unit(M::PercentOnAmd))
            }
            (MbaLimit::AmdUnits(_), _, false, MbaKind::IntelDelay { .. }) => {
                Err(unit(M::UnitsOnIntel))
            }
        }
    }

    /// The number of classes a CPU can be associated with: the largest class count of the
    /// allocation resources present (pqos: `class_id < max(#L3, #L2, #MBA COS)`).
    #[must_use]
    pub fn max_classes(&self) -> u32 {
        self.class_counts().max().unwrap_or(0)
    }

    /// The number of classes of service on the OS interface: resctrl gives a control group
    /// one CLOSID valid for every resource, so there are as many as the resource with the
    /// fewest (the kernel's `closids_supported()`, the minimum `num_closids`; pqos
    /// `resctrl_alloc_get_grps_num`); 0 without allocation.
    #[must_use]
    pub fn os_classes(&self) -> u32 {
        self.class_counts().min().unwrap_or(0)
    }

    /// The classes a CPU (or, on the OS interface, a task) can be associated with on
    /// `interface`: [`Capabilities::max_classes`] on MSR, [`Capabilities::os_classes`] on
    /// OS.
    #[must_use]
    pub fn classes(&self, interface: crate::Interface) -> u32 {
        match interface {
            crate::Interface::Msr | crate::Interface::Mmio => self.max_classes(),
            crate::Interface::Os => self.os_classes(),
        }
    }

    /// The usable class count of each allocation resource present.
    fn class_counts(&self) -> impl Iterator<Item = u32> {
        [
            self.l3_cat.get().map(CatCaps::usable_classes),
            self.l2_cat.get().map(CatCaps::usable_classes),
            self.mba.get().map(|m| m.num_classes),
            self.smba.get().map(|m| m.num_classes),
        ]
        .into_iter()
        .flatten()
    }
}

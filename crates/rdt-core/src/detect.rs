//! CPUID decoding into [`Capabilities`], and the one-sentence reason a CPU has no RDT.
//!
//! Rules, in the order they apply to every leaf:
//! 1. Without leaf 0 (maximum basic leaf and vendor) nothing is decoded: every feature is
//!    [`Feature::Unsupported`], because nothing is evidence that it exists.
//! 2. A leaf above the maximum leaf (CPUID.0:EAX for basic leaves, CPUID.80000000H:EAX for
//!    extended ones) does not exist: the feature is [`Feature::Unsupported`].
//! 3. A leaf at or below the maximum that the source did not record is unknown: a feature
//!    whose enumeration bit is set gets [`Feature::DetailsUnknown`], an optional value `None`.
//!    A feature whose enumeration bit itself was not recorded is reported
//!    [`Feature::Unsupported`] (there is no evidence for it), with one exception below.
//! 4. Otherwise the registers are decoded: with raw-cpuid's decoders where it has one for the
//!    field, from the raw registers where it has none (MBM counter width, overflow and I/O
//!    bits of CPUID.(0FH,1):EAX, CAT CDP / non-contiguous / I/O bits of CPUID.(10H,1..2):ECX,
//!    MBA per-thread bit CPUID.(10H,3):ECX\[0\]).
//!
//! The exceptions to rule 3: PQE set with leaf 10H not recorded gives L3 CAT `DetailsUnknown`
//! (L2 CAT and MBA `Unsupported`); on AMD, CPUID.80000008H:EBX\[6\] set with leaf 8000_0020H
//! not recorded gives MBA `DetailsUnknown`.
//!
//! # References
//! - Intel SDM Vol. 3B, 18.18.3 "Enumeration and Detecting Support of Cache Monitoring",
//!   18.19.4.2 "Cache Allocation Technology: Enumeration", 18.19.7 "Memory Bandwidth
//!   Allocation Enumeration"; Vol. 2A "CPUID", leaves 04H, 07H, 0AH, 0FH, 10H.
//! - AMD64 Technology Platform Quality of Service Extensions (pub. 56375); AMD APM Vol. 3,
//!   CPUID Fn8000_0008, Fn8000_001D, Fn8000_0020.
//! - pqos(8) / libpqos `lib/hw_cap.c`, `lib/cpuinfo.c` (`shared/spec/pqos.md` §4.2).

use raw_cpuid::{CacheParameter, CacheType, CpuId};

use crate::cpuid::{CpuidRegs, CpuidSource, RawCpuidReader, raw_cpuid};
use crate::{
    CacheGeometry, Capabilities, CatCaps, Feature, MbaCaps, MbaKind, MonEventSupport,
    MonitoringCaps, PmuCaps, Vendor,
};

type Raw<'a> = CpuId<RawCpuidReader<'a>>;

/// Bits `[hi:lo]` of `v`, as the SDM writes them.
pub(crate) const fn bits(v: u32, hi: u32, lo: u32) -> u32 {
    (v >> lo) & (u32::MAX >> (31 - (hi - lo)))
}

/// Bit `n` of `v`.
pub(crate) const fn bit(v: u32, n: u32) -> bool {
    v >> n & 1 == 1
}

/// `ceil(log2(n))`, 0 for `n <= 1`: the bits of an x2APIC id below a topology level or
/// cache shared by `n` ids (SDM Vol. 3A 10.12.8; the kernel's `get_count_order`, pqos's
/// `nearest_pow2`), e.g. 2 threads -> 1 bit, 3 -> 2, 64 -> 6.
///
/// # Examples
/// ```
/// use rdt_core::topology::ceil_log2;
/// assert_eq!([1, 2, 3, 8, 9, 16, 64].map(ceil_log2), [0, 1, 2, 3, 4, 4, 6]);
/// ```
#[must_use]
pub const fn ceil_log2(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// What a source says about one (leaf, subleaf).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leaf {
    /// Above the maximum (basic or extended) leaf: the leaf does not exist.
    BeyondMax,
    /// Within range but not recorded by the source.
    Unrecorded,
    /// The registers.
    Regs(CpuidRegs),
}

/// A source together with its maximum leaves.
pub(crate) struct Probe<'a> {
    pub(crate) src: &'a dyn CpuidSource,
    /// CPUID.0:EAX, the highest basic leaf; `None` when leaf 0 was not recorded.
    pub(crate) max_basic: Option<u32>,
    /// CPUID.80000000H:EAX, the highest extended leaf; `None` when not recorded.
    pub(crate) max_ext: Option<u32>,
}

impl<'a> Probe<'a> {
    pub(crate) fn new(src: &'a dyn CpuidSource) -> Self {
        Self {
            src,
            max_basic: src.cpuid(0, 0).map(|r| r.eax), // CPUID.0:EAX: highest basic leaf
            max_ext: src.cpuid(0x8000_0000, 0).map(|r| r.eax), // CPUID.80000000H:EAX: highest extended leaf
        }
    }

    pub(crate) fn leaf(&self, leaf: u32, subleaf: u32) -> Leaf {
        let max = if leaf >= 0x8000_0000 {
            self.max_ext
        } else {
            self.max_basic
        };
        if max.is_some_and(|m| leaf > m) {
            return Leaf::BeyondMax;
        }
        self.src
            .cpuid(leaf, subleaf)
            .map_or(Leaf::Unrecorded, Leaf::Regs)
    }

    pub(crate) fn regs(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        match self.leaf(leaf, subleaf) {
            Leaf::Regs(r) => Some(r),
            _ => None,
        }
    }
}

/// The vendor of CPUID.0:EBX,EDX,ECX.
pub(crate) fn vendor_of(raw: &Raw<'_>) -> Vendor {
    match raw.get_vendor_info() {
        Some(v) => match v.as_str() {
            "GenuineIntel" => Vendor::Intel,
            "AuthenticAMD" => Vendor::Amd,
            "HygonGenuine" => Vendor::Hygon,
            other => Vendor::Other(other.to_owned()),
        },
        None => Vendor::Other(String::new()),
    }
}

pub(crate) fn detect(src: &dyn CpuidSource) -> Capabilities {
    let p = Probe::new(src);
    let raw = raw_cpuid(src);
    if p.max_basic.is_none() {
        return Capabilities::none(Vendor::Other(String::new()));
    }
    let vendor = vendor_of(&raw);
    let amd = vendor.is_amd_like();
    let alloc = allocation(&p, &raw, amd);
    let (mba, smba) = if amd {
        amd_bandwidth(&p, &raw)
    } else {
        (alloc.mba, Feature::Unsupported)
    };
    let (l2_cache, l3_cache) = cache_geometry(&p, &raw, amd);
    // CPUID.1:EAX: processor signature (stepping [3:0], model [7:4], family [11:8],
    // extended model [19:16], extended family [27:20]); read once
    let signature = p.regs(1, 0).map(|r| r.eax);
    Capabilities {
        brand: brand(&p, &raw),
        signature,
        monitoring: monitoring(&p, &raw, &vendor),
        l3_cat: alloc.l3,
        l2_cat: alloc.l2,
        mba,
        smba,
        l3_cache,
        l2_cache,
        pmu: pmu(&p, &raw, &vendor),
        uncore_pcie: uncore_pcie(signature, &vendor),
        snc: None,
        mba40: None,
        l3_iordt: None,
        mon_iordt: None,
        amd_mbm: if amd {
            amd_mbm(&p)
        } else {
            crate::mbm::AmdMbmCaps::default()
        },
        vendor,
    }
}

/// CPUID 8000_0002H..8000_0004H: 48-byte brand string, trimmed of NULs and spaces.
fn brand(p: &Probe<'_>, raw: &Raw<'_>) -> Option<String> {
    if (0x8000_0002..=0x8000_0004).any(|l| p.regs(l, 0).is_none()) {
        return None;
    }
    let b = raw.get_processor_brand_string()?;
    let s = b
        .as_str()
        .trim_matches(|c: char| c == '\0' || c.is_whitespace());
    (!s.is_empty()).then(|| s.to_owned())
}

/// PQM, CPUID.(EAX=07H,ECX=0):EBX\[12\]; `None` when leaf 7 is absent or not recorded.
fn pqm(p: &Probe<'_>, raw: &Raw<'_>) -> Option<bool> {
    p.regs(7, 0)?;
    // CPUID.(EAX=07H,ECX=0):EBX[12]: PQM, RDT monitoring (raw-cpuid `has_rdtm`)
    Some(
        raw.get_extended_feature_info()
            .is_some_and(|f| f.has_rdtm()),
    )
}

/// PQE, CPUID.(EAX=07H,ECX=0):EBX\[15\]; `None` when leaf 7 is absent or not recorded.
fn pqe(p: &Probe<'_>, raw: &Raw<'_>) -> Option<bool> {
    p.regs(7, 0)?;
    // CPUID.(EAX=07H,ECX=0):EBX[15]: PQE, RDT allocation (raw-cpuid `has_rdta`)
    Some(
        raw.get_extended_feature_info()
            .is_some_and(|f| f.has_rdta()),
    )
}

fn monitoring(p: &Probe<'_>, raw: &Raw<'_>, vendor: &Vendor) -> Feature<MonitoringCaps> {
    if pqm(p, raw) != Some(true) {
        return Feature::Unsupported;
    }
    match p.leaf(0xF, 0) {
        Leaf::BeyondMax => return Feature::Unsupported,
        Leaf::Unrecorded => return Feature::DetailsUnknown,
        Leaf::Regs(_) => {}
    }
    let Some(info) = raw.get_rdt_monitoring_info() else {
        return Feature::Unsupported;
    };
    // CPUID.(EAX=0FH,ECX=0):EDX[1]: L3 cache monitoring
    if !info.has_l3_monitoring() {
        return Feature::Unsupported;
    }
    // CPUID.(EAX=0FH,ECX=0):EBX: highest RMID of any resource type
    let max_rmid = info.rmid_range();
    let Some(f1) = p.regs(0xF, 1) else {
        return Feature::DetailsUnknown;
    };
    let Some(l3) = info.l3_monitoring() else {
        return Feature::DetailsUnknown;
    };
    // CPUID.(EAX=0FH,ECX=1):EAX[7:0]: MBM counter width - 24 (raw-cpuid does not decode EAX).
    // Hygon reports 0 for 32-bit counters; pqos treats its 0 as 8.
    let mut width_offset = bits(f1.eax, 7, 0);
    if *vendor == Vendor::Hygon && width_offset == 0 {
        width_offset = 8;
    }
    Feature::Supported(MonitoringCaps {
        max_rmid,
        // CPUID.(EAX=0FH,ECX=1):ECX: highest RMID for L3 events
        num_rmids: l3.maximum_rmid_range().saturating_add(1),
        // CPUID.(EAX=0FH,ECX=1):EBX: upscaling factor, bytes per IA32_QM_CTR count
        upscaling_factor: l3.conversion_factor(),
        counter_width: 24 + width_offset,
        // CPUID.(EAX=0FH,ECX=1):EAX[8]: IA32_QM_CTR overflow bit
        overflow_bit: bit(f1.eax, 8),
        // CPUID.(EAX=0FH,ECX=1):EAX[9]/[10]: non-CPU agent occupancy / bandwidth monitoring
        io_rdt: bit(f1.eax, 9) || bit(f1.eax, 10),
        events: MonEventSupport {
            // CPUID.(EAX=0FH,ECX=1):EDX[0]: L3 occupancy
            llc_occupancy: l3.has_occupancy_monitoring(),
            // CPUID.(EAX=0FH,ECX=1):EDX[1]: L3 total bandwidth
            mbm_total: l3.has_total_bandwidth_monitoring(),
            // CPUID.(EAX=0FH,ECX=1):EDX[2]: L3 local bandwidth
            mbm_local: l3.has_local_bandwidth_monitoring(),
        },
    })
}

struct Allocation {
    l3: Feature<CatCaps>,
    l2: Feature<CatCaps>,
    mba: Feature<MbaCaps>,
}

fn allocation(p: &Probe<'_>, raw: &Raw<'_>, amd: bool) -> Allocation {
    let none = Allocation {
        l3: Feature::Unsupported,
        l2: Feature::Unsupported,
        mba: Feature::Unsupported,
    };
    if pqe(p, raw) != Some(true) {
        return none;
    }
    match p.leaf(0x10, 0) {
        Leaf::BeyondMax => return none,
        Leaf::Unrecorded => {
            return Allocation {
                l3: Feature::DetailsUnknown,
                ..none
            };
        }
        Leaf::Regs(_) => {}
    }
    let Some(info) = raw.get_rdt_allocation_info() else {
        return none;
    };

    // CPUID.(EAX=10H,ECX=0):EBX[1]: L3 CAT
    let l3 = if !info.has_l3_cat() {
        Feature::Unsupported
    } else if let (Some(r), Some(cat)) = (p.regs(0x10, 1), info.l3_cat()) {
        Feature::Supported(CatCaps {
            // CPUID.(EAX=10H,ECX=1):EAX[4:0]: CBM length - 1
            cbm_len: u32::from(cat.capacity_mask_length()),
            // CPUID.(EAX=10H,ECX=1):EBX: bits shareable with other agents
            shareable_bits: u64::from(cat.isolation_bitmap()),
            // CPUID.(EAX=10H,ECX=1):EDX[15:0]: highest COS
            num_classes: u32::from(cat.highest_cos()) + 1,
            // CPUID.(EAX=10H,ECX=1):ECX[2]: CDP
            cdp_supported: cat.has_code_data_prioritization(),
            cdp_enabled: false,
            // CPUID.(EAX=10H,ECX=1):ECX[3]: non-contiguous CBM (Intel); AMD always allows it
            non_contiguous_cbm: amd || bit(r.ecx, 3),
            // CPUID.(EAX=10H,ECX=1):ECX[1]: non-CPU agent (I/O RDT) allocation
            io_rdt: bit(r.ecx, 1),
            // The kernel's min_cbm_bits: AMD allows an empty mask (0), Intel needs 1 bit.
            min_cbm_bits: u32::from(!amd),
        })
    } else {
        Feature::DetailsUnknown
    };

    // CPUID.(EAX=10H,ECX=0):EBX[2]: L2 CAT
    let l2 = if !info.has_l2_cat() {
        Feature::Unsupported
    } else if let (Some(r), Some(cat)) = (p.regs(0x10, 2), info.l2_cat()) {
        Feature::Supported(CatCaps {
            // CPUID.(EAX=10H,ECX=2):EAX[4:0]: CBM length - 1
            cbm_len: u32::from(cat.capacity_mask_length()),
            // CPUID.(EAX=10H,ECX=2):EBX: bits shareable with other agents
            shareable_bits: u64::from(cat.isolation_bitmap()),
            // CPUID.(EAX=10H,ECX=2):EDX[15:0]: highest COS
            num_classes: u32::from(cat.highest_cos()) + 1,
            // CPUID.(EAX=10H,ECX=2):ECX[2]: L2 CDP (raw-cpuid does not decode ECX here)
            cdp_supported: bit(r.ecx, 2),
            cdp_enabled: false,
            // CPUID.(EAX=10H,ECX=2):ECX[3]: non-contiguous CBM
            non_contiguous_cbm: amd || bit(r.ecx, 3),
            // Leaf 10H subleaf 2 has no I/O RDT bit.
            io_rdt: false,
            min_cbm_bits: u32::from(!amd),
        })
    } else {
        Feature::DetailsUnknown
    };

    // CPUID.(EAX=10H,ECX=0):EBX[3]: Intel MBA (AMD enumerates MBA in leaf 8000_0020H)
    let mba = if amd || !info.has_memory_bandwidth_allocation() {
        Feature::Unsupported
    } else if let (Some(r), Some(m)) = (p.regs(0x10, 3), info.memory_bandwidth_allocation()) {
        Feature::Supported(MbaCaps {
            // CPUID.(EAX=10H,ECX=3):EDX[15:0]: highest COS
            num_classes: u32::from(m.highest_cos()) + 1,
            kind: MbaKind::IntelDelay {
                // CPUID.(EAX=10H,ECX=3):EAX[11:0]: maximum throttling value - 1
                max_delay: u32::from(m.max_hba_throttling()),
                // CPUID.(EAX=10H,ECX=3):ECX[2]: delay values are linear
                linear: m.has_linear_response_delay(),
                // CPUID.(EAX=10H,ECX=3):ECX[0]: per-thread MBA controls (MBA 3.0)
                per_thread: bit(r.ecx, 0),
            },
            ctrl_enabled: false,
        })
    } else {
        Feature::DetailsUnknown
    };
    Allocation { l3, l2, mba }
}

/// AMD BMEC and ABMC from CPUID 8000_0020H (Linux `rdt_get_mon_l3_config`): EBX\[3\] BMEC,
/// EBX\[5\] ABMC; the transaction bits in subleaf 3 ECX\[6:0\] (all 7 when unrecorded), the
/// counters in subleaf 5 EBX\[15:0\] + 1 (ABMC ignored when unrecorded).
fn amd_mbm(p: &Probe<'_>) -> crate::mbm::AmdMbmCaps {
    let ebx = p.regs(0x8000_0020, 0).map_or(0, |r| r.ebx);
    let (bmec, abmc) = (ebx >> 3 & 1 == 1, ebx >> 5 & 1 == 1);
    let mask = p
        .regs(0x8000_0020, 3)
        .map_or(crate::mbm::MBM_CONFIG_ALL, |r| {
            r.ecx & crate::mbm::MBM_CONFIG_ALL
        });
    crate::mbm::AmdMbmCaps {
        bmec,
        event_config_mask: if bmec || abmc { mask } else { 0 },
        abmc_counters: abmc
            .then(|| p.regs(0x8000_0020, 5).map(|r| (r.ebx & 0xffff) + 1))
            .flatten(),
    }
}

/// AMD MBA and SMBA from CPUID 8000_0020H.
fn amd_bandwidth(p: &Probe<'_>, raw: &Raw<'_>) -> (Feature<MbaCaps>, Feature<MbaCaps>) {
    match p.leaf(0x8000_0020, 0) {
        Leaf::BeyondMax => return (Feature::Unsupported, Feature::Unsupported),
        Leaf::Unrecorded => {
            // CPUID.80000008H:EBX[6]: L3 memory bandwidth enforcement (the kernel's
            // X86_FEATURE_MBA on AMD); its parameters live in the unrecorded leaf 8000_0020H.
            let mbe = p.regs(0x8000_0008, 0).is_some_and(|r| bit(r.ebx, 6));
            let mba = if mbe {
                Feature::DetailsUnknown
            } else {
                Feature::Unsupported
            };
            return (mba, Feature::Unsupported);
        }
        Leaf::Regs(_) => {}
    }
    let Some(pq) = raw.get_pqos_extended_feature_info() else {
        return (Feature::Unsupported, Feature::Unsupported);
    };
    let decode = |subleaf: u32, present: bool| {
        if !present {
            return Feature::Unsupported;
        }
        if p.regs(0x8000_0020, subleaf).is_none() {
            return Feature::DetailsUnknown;
        }
        let info = if subleaf == 1 {
            pq.get_l3_memory_bandwidth_enforcement_info()
        } else {
            pq.get_l3_slow_memory_bandwidth_enforcement_info()
        };
        let Some(info) = info else {
            return Feature::DetailsUnknown;
        };
        // CPUID.(EAX=80000020H,ECX=1 or 2):EAX: bandwidth-limit field width (max = 1 << EAX)
        let width = info.bandwidth_length();
        if width >= 31 {
            // Not a width any part reports; the limit would not fit the MSR field.
            return Feature::DetailsUnknown;
        }
        Feature::Supported(MbaCaps {
            // CPUID.(EAX=80000020H,ECX=1 or 2):EDX[15:0]: highest COS
            num_classes: bits(info.cos_max(), 15, 0) + 1,
            kind: MbaKind::AmdBandwidth { width },
            ctrl_enabled: false,
        })
    };
    // CPUID.(EAX=80000020H,ECX=0):EBX[1]: L3MBE (MBA); EBX[2]: L3SMBE (SMBA)
    (decode(1, pq.has_l3mbe()), decode(2, pq.has_l3smbe()))
}

/// Decodes one cache-parameter subleaf (leaf 4 or 8000_001DH, same layout).
fn geometry(cp: &CacheParameter) -> CacheGeometry {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    CacheGeometry {
        // EAX[7:5]: cache level
        level: u32::from(cp.level()),
        // EBX[31:22]: ways of associativity - 1
        ways: n(cp.associativity()),
        // EBX[21:12]: physical line partitions - 1
        partitions: n(cp.physical_line_partitions()),
        // EBX[11:0]: system coherency line size - 1
        line_size: n(cp.coherency_line_size()),
        // ECX: number of sets - 1
        sets: n(cp.sets()),
        // EAX[25:14]: maximum number of logical processor ids sharing this cache - 1
        max_sharing_ids: n(cp.max_cores_for_cache()),
    }
}

/// The cache leaf of a vendor: 4 (Intel), 8000_001DH (AMD, Hygon).
pub(crate) const fn cache_leaf(amd: bool) -> u32 {
    if amd { 0x8000_001D } else { 4 }
}

/// L2 (data or unified) and L3 (unified) geometry from the cache leaf. raw-cpuid's iterator
/// stops at the first subleaf of type 0; an unrecorded subleaf reads as zeros and stops it
/// too, so only recorded subleaves are ever decoded.
fn cache_geometry(
    p: &Probe<'_>,
    raw: &Raw<'_>,
    amd: bool,
) -> (Option<CacheGeometry>, Option<CacheGeometry>) {
    if p.regs(cache_leaf(amd), 0).is_none() {
        return (None, None);
    }
    let (mut l2, mut l3) = (None, None);
    for cp in raw.get_cache_parameters().into_iter().flatten() {
        // EAX[4:0]: cache type (1 data, 2 instruction, 3 unified)
        match (cp.level(), cp.cache_type()) {
            (2, CacheType::Data | CacheType::Unified) if l2.is_none() => l2 = Some(geometry(&cp)),
            (3, CacheType::Unified) if l3.is_none() => l3 = Some(geometry(&cp)),
            _ => {}
        }
    }
    (l2, l3)
}

fn pmu(p: &Probe<'_>, raw: &Raw<'_>, vendor: &Vendor) -> PmuCaps {
    match vendor {
        // Every Zen core has the core PMU (PerfCtr0..5) that counts instructions, cycles and
        // L3 misses; AMD leaves leaf 0AH reserved.
        Vendor::Amd | Vendor::Hygon => PmuCaps {
            ipc: true,
            llc_misses: true,
            llc_references: true,
        },
        Vendor::Intel => {
            if p.regs(0xA, 0).is_none() {
                return PmuCaps::default();
            }
            let Some(pm) = raw.get_performance_monitoring_info() else {
                return PmuCaps::default();
            };
            PmuCaps {
                // CPUID.0AH:EBX[0]/[1]: core-cycle / instructions-retired events unavailable
                // when set; EDX[4:0]: number of fixed-function counters (pqos: IPC iff
                // EBX[1:0] == 0 and EDX[4:0] > 1)
                ipc: !pm.is_core_cyc_ev_unavailable()
                    && !pm.is_inst_ret_ev_unavailable()
                    && pm.fixed_function_counters() > 1,
                // CPUID.0AH:EAX[15:8]: general-purpose counters per logical processor (pqos:
                // LLC misses and references iff more than 1)
                llc_misses: pm.number_of_counters() > 1,
                llc_references: pm.number_of_counters() > 1,
            }
        }
        Vendor::Other(_) => PmuCaps::default(),
    }
}

/// The CPU model pqos enables the uncore PCIe events for (`lib/uncore_monitoring.c`
/// `CPU_MODEL_SKX`): Skylake-SP, and Cascade Lake-SP, which shares the model number.
pub const UNCORE_PCIE_MODEL: u32 = 0x55;

/// Whether pqos lists the uncore PCIe events: an Intel family 6 CPU of model 0x55
/// ([`UNCORE_PCIE_MODEL`]). pqos looks at the model alone (`cpuinfo_get_cpu_model`); the
/// vendor and family are checked here too, since the CHA registers are Intel's.
fn uncore_pcie(signature: Option<u32>, vendor: &Vendor) -> bool {
    signature.is_some_and(|sig| {
        let (family, model, _) = crate::cpuid::fms(sig);
        *vendor == Vendor::Intel && (family, model) == (6, UNCORE_PCIE_MODEL)
    })
}

/// Why a CPU has no RDT / PQoS, as one sentence naming the CPUID bits; `None` when
/// [`Capabilities::detect`] finds any RDT feature ([`Capabilities::has_rdt`]).
///
/// Re-exported as `rdt_core::explain_no_rdt`.
///
/// # Examples
/// ```
/// use rdt_core::{explain_no_rdt, CpuidRegs};
/// // An AMD EPYC 7451 (Naples): leaf 7 without PQM/PQE, maximum extended leaf 8000_001FH.
/// let src = |leaf: u32, sub: u32| match (leaf, sub) {
///     (0, 0) => Some(CpuidRegs { eax: 0xd, ebx: 0x6874_7541, ecx: 0x444d_4163, edx: 0x6974_6e65 }),
///     (7, 0) => Some(CpuidRegs { eax: 0, ebx: 0x209c_01a9, ecx: 0, edx: 0 }),
///     (0x8000_0000, 0) => Some(CpuidRegs { eax: 0x8000_001f, ..Default::default() }),
///     _ => None,
/// };
/// assert_eq!(
///     explain_no_rdt(&src).unwrap(),
///     "CPUID.(EAX=07H,ECX=0):EBX[12] (PQM, monitoring) and EBX[15] (PQE, allocation) are clear \
///      and CPUID.80000020H is absent (the maximum extended leaf is 8000001FH)"
/// );
/// ```
#[must_use]
pub fn rdt_absence(src: &dyn CpuidSource) -> Option<String> {
    let caps = detect(src);
    if caps.has_rdt() {
        return None;
    }
    let p = Probe::new(src);
    let Some(max_basic) = p.max_basic else {
        return Some("CPUID leaf 0 was not recorded, so no RDT feature can be detected".into());
    };
    let mut reasons: Vec<String> = Vec::new();
    match p.leaf(7, 0) {
        Leaf::BeyondMax => reasons.push(format!(
            "CPUID.(EAX=07H) is beyond the maximum basic leaf {max_basic:02X}H"
        )),
        Leaf::Unrecorded => reasons.push("CPUID.(EAX=07H,ECX=0) was not recorded".into()),
        Leaf::Regs(r) => {
            // CPUID.(EAX=07H,ECX=0):EBX[12]: PQM; EBX[15]: PQE
            let (pqm, pqe) = (bit(r.ebx, 12), bit(r.ebx, 15));
            let clear = match (pqm, pqe) {
                (false, false) => Some(
                    "CPUID.(EAX=07H,ECX=0):EBX[12] (PQM, monitoring) and EBX[15] (PQE, \
                     allocation) are clear",
                ),
                (false, true) => Some("CPUID.(EAX=07H,ECX=0):EBX[12] (PQM, monitoring) is clear"),
                (true, false) => Some("CPUID.(EAX=07H,ECX=0):EBX[15] (PQE, allocation) is clear"),
                (true, true) => None,
            };
            reasons.extend(clear.map(String::from));
            if pqm {
                reasons.push(match p.leaf(0xF, 0) {
                    Leaf::BeyondMax => format!(
                        "PQM is set but CPUID.(EAX=0FH) is beyond the maximum basic leaf \
                         {max_basic:02X}H"
                    ),
                    Leaf::Unrecorded => {
                        "PQM is set but CPUID.(EAX=0FH,ECX=0) was not recorded".into()
                    }
                    Leaf::Regs(_) => "CPUID.(EAX=0FH,ECX=0):EDX[1] (L3 monitoring) is clear".into(),
                });
            }
            if pqe {
                reasons.push(match p.leaf(0x10, 0) {
                    Leaf::BeyondMax => format!(
                        "PQE is set but CPUID.(EAX=10H) is beyond the maximum basic leaf \
                         {max_basic:02X}H"
                    ),
                    Leaf::Unrecorded => {
                        "PQE is set but CPUID.(EAX=10H,ECX=0) was not recorded".into()
                    }
                    Leaf::Regs(_) => "CPUID.(EAX=10H,ECX=0):EBX[1] (L3 CAT), EBX[2] (L2 CAT) \
                                      and EBX[3] (MBA) are clear"
                        .into(),
                });
            }
        }
    }
    if caps.vendor.is_amd_like() {
        reasons.push(match p.leaf(0x8000_0020, 0) {
            Leaf::BeyondMax => format!(
                "CPUID.80000020H is absent (the maximum extended leaf is {:08X}H)",
                p.max_ext.unwrap_or(0)
            ),
            Leaf::Unrecorded => "CPUID.(EAX=80000020H,ECX=0) was not recorded".into(),
            Leaf::Regs(_) => "CPUID.(EAX=80000020H,ECX=0):EBX[1] (L3MBE) and EBX[2] (L3SMBE) \
                              are clear"
                .into(),
        });
    }
    Some(join_and(&reasons))
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::{CacheBitmask, CatResource};

    /// A closure source over a table of (leaf, subleaf) -> [eax, ebx, ecx, edx].
    fn table(rows: &[(u32, u32, [u32; 4])]) -> impl Fn(u32, u32) -> Option<CpuidRegs> + use<> {
        let map: HashMap<(u32, u32), CpuidRegs> = rows
            .iter()
            .map(|&(l, s, [eax, ebx, ecx, edx])| ((l, s), CpuidRegs { eax, ebx, ecx, edx }))
            .collect();
        move |l, s| map.get(&(l, s)).copied()
    }

    const INTEL: [u32; 3] = [0x756e_6547, 0x6c65_746e, 0x4965_6e69]; // Genu ntel ineI
    const AMD: [u32; 3] = [0x6874_7541, 0x444d_4163, 0x6974_6e65]; // Auth cAMD enti

    fn leaf0(max: u32, v: [u32; 3]) -> (u32, u32, [u32; 4]) {
        (0, 0, [max, v[0], v[1], v[2]])
    }

    /// Rows of a Xeon Gold 6252 (raw-cpuid's `cpuid -r` capture), trimmed to what RDT uses.
    fn gold_6252() -> Vec<(u32, u32, [u32; 4])> {
        vec![
            leaf0(0x16, INTEL),
            (1, 0, [0x0005_0657, 0, 0, 0]),
            (7, 0, [0, 0xd39f_f7eb, 0x818, 0xbc00_0400]),
            (0xa, 0, [0x0730_0404, 0, 0, 0x603]),
            (0xf, 0, [0, 0xcf, 0, 0x2]),
            (0xf, 1, [0, 0x1a000, 0xcf, 0x7]),
            (0x10, 0, [0, 0xa, 0, 0]),
            (0x10, 1, [0xa, 0x600, 0x4, 0xf]),
            (0x10, 3, [0x59, 0, 0x4, 0x7]),
            (4, 0, [0x7c00_4121, 0x01c0_003f, 0x3f, 0]),
            (4, 1, [0x7c00_4122, 0x01c0_003f, 0x3f, 0]),
            (4, 2, [0x7c00_4143, 0x03c0_003f, 0x3ff, 0]),
            (4, 3, [0x7c0f_c163, 0x0280_003f, 0xcfff, 5]),
            (4, 4, [0, 0, 0, 0]),
        ]
    }

    #[test]
    fn bits_extracts_sdm_ranges() {
        assert_eq!(bits(0x7c0f_c163, 25, 14), 0x3f);
        assert_eq!(bits(0x7c0f_c163, 7, 5), 3);
        assert_eq!(bits(u32::MAX, 31, 0), u32::MAX);
        assert!(bit(0x8, 3));
        assert_eq!(
            [
                ceil_log2(0),
                ceil_log2(1),
                ceil_log2(2),
                ceil_log2(3),
                ceil_log2(64)
            ],
            [0, 0, 1, 2, 6]
        );
    }

    #[test]
    fn uncore_pcie_events_exist_on_intel_family_6_model_0x55_only() {
        // arrange: Cascade Lake (0x50657) shares Skylake-SP's model 0x55
        let with_signature = |sig: u32| {
            let mut rows = gold_6252();
            rows.retain(|r| r.0 != 1);
            rows.push((1, 0, [sig, 0, 0, 0]));
            rows
        };
        // act
        let skx = Capabilities::detect(&table(&gold_6252()));
        let icx = Capabilities::detect(&table(&with_signature(0x0006_06a6))); // model 0x6a
        let family_f = Capabilities::detect(&table(&with_signature(0x0005_0f57))); // family 0xf
        // assert
        assert!(skx.uncore_pcie);
        assert!(skx.supported_events().contains(crate::MonEvents::UNCORE));
        assert!(!icx.uncore_pcie);
        assert!(!icx.supported_events().intersects(crate::MonEvents::UNCORE));
        assert!(!family_f.uncore_pcie, "model 0x55 of another family");
        assert_eq!(crate::cpuid::fms(0x0005_0657), (6, UNCORE_PCIE_MODEL, 7));
    }

    #[test]
    fn cascade_lake_decodes_monitoring_l3_cat_mba_and_geometry() {
        // arrange
        let src = table(&gold_6252());
        // act
        let caps = Capabilities::detect(&src);
        // assert
        assert_eq!(caps.vendor, Vendor::Intel);
        assert_eq!(caps.signature, Some(0x0005_0657));
        assert_eq!(caps.brand, None, "brand leaves not recorded");
        let mon = caps.monitoring.get().unwrap();
        assert_eq!(
            (
                mon.max_rmid,
                mon.num_rmids,
                mon.upscaling_factor,
                mon.counter_width
            ),
            (0xcf, 0xd0, 0x1a000, 24)
        );
        assert_eq!(
            mon.events,
            MonEventSupport {
                llc_occupancy: true,
                mbm_total: true,
                mbm_local: true
            }
        );
        let l3 = caps.l3_cat.get().unwrap();
        assert_eq!(
            (l3.cbm_len, l3.shareable_bits, l3.num_classes),
            (11, 0x600, 16)
        );
        assert!(l3.cdp_supported && !l3.cdp_enabled && !l3.non_contiguous_cbm && !l3.io_rdt);
        assert_eq!(l3.min_cbm_bits, 1);
        assert_eq!(caps.l2_cat, Feature::Unsupported);
        assert_eq!(
            caps.mba,
            Feature::Supported(MbaCaps {
                num_classes: 8,
                kind: MbaKind::IntelDelay {
                    max_delay: 90,
                    linear: true,
                    per_thread: false
                },
                ctrl_enabled: false,
            })
        );
        assert_eq!(caps.smba, Feature::Unsupported);
        let g = caps.l3_cache.unwrap();
        assert_eq!(
            (g.level, g.ways, g.sets, g.line_size, g.partitions),
            (3, 11, 0xd000, 64, 1)
        );
        assert_eq!(g.max_sharing_ids, 64);
        assert_eq!(g.total_size(), (35 << 20) + (768 << 10), "35.75 MiB L3");
        assert_eq!(caps.l2_cache.unwrap().ways, 16);
        assert_eq!(
            caps.pmu,
            PmuCaps {
                ipc: true,
                llc_misses: true,
                llc_references: true,
            }
        );
        assert!(
            caps.check_mask(CatResource::L3, CacheBitmask::new(0x7ff).unwrap())
                .is_ok()
        );
    }

    #[test]
    fn unrecorded_parameter_leaves_are_details_unknown_not_zero() {
        // arrange: drop 0xF.1, 0x10.1 and 0x10.3
        let rows: Vec<_> = gold_6252()
            .into_iter()
            .filter(|&(l, s, _)| !matches!((l, s), (0xf, 1) | (0x10, 1 | 3)))
            .collect();
        // act
        let caps = Capabilities::detect(&table(&rows));
        // assert
        assert_eq!(caps.monitoring, Feature::DetailsUnknown);
        assert_eq!(caps.l3_cat, Feature::DetailsUnknown);
        assert_eq!(caps.mba, Feature::DetailsUnknown);
        assert!(caps.has_rdt());
        assert_eq!(rdt_absence(&table(&rows)), None);
    }

    #[test]
    fn leaves_beyond_the_maximum_leaf_are_unsupported_even_if_answered() {
        // arrange: max leaf 0xD, yet the source answers 0xF/0x10 (as the instruction does,
        // with the data of the highest leaf)
        let mut rows = gold_6252();
        rows[0] = leaf0(0xd, INTEL);
        // act
        let caps = Capabilities::detect(&table(&rows));
        // assert
        assert_eq!(caps.monitoring, Feature::Unsupported);
        assert_eq!(caps.l3_cat, Feature::Unsupported);
        assert_eq!(caps.mba, Feature::Unsupported);
        assert!(!caps.has_rdt());
        let why = rdt_absence(&table(&rows)).unwrap();
        assert!(
            why.contains("CPUID.(EAX=0FH) is beyond the maximum basic leaf 0DH"),
            "{why}"
        );
        assert!(why.contains("CPUID.(EAX=10H) is beyond"), "{why}");
    }

    #[test]
    fn pqe_with_unrecorded_leaf_10h_reports_l3_cat_details_unknown() {
        let rows = vec![leaf0(0x14, INTEL), (7, 0, [0, 1 << 15, 0, 0])];
        let caps = Capabilities::detect(&table(&rows));
        assert_eq!(caps.l3_cat, Feature::DetailsUnknown);
        assert_eq!(caps.l2_cat, Feature::Unsupported);
        assert_eq!(caps.monitoring, Feature::Unsupported);
    }

    #[test]
    fn without_leaf_0_nothing_is_detected() {
        let rows: Vec<_> = gold_6252().into_iter().filter(|r| r.0 != 0).collect();
        let caps = Capabilities::detect(&table(&rows));
        assert!(!caps.has_rdt());
        assert_eq!(caps.vendor, Vendor::Other(String::new()));
        assert!(
            rdt_absence(&table(&rows))
                .unwrap()
                .contains("leaf 0 was not recorded")
        );
    }

    #[test]
    fn l2_cat_reads_cdp_and_non_contiguous_from_raw_ecx() {
        // arrange: Sapphire Rapids-like 0x10.0 EBX=0xe, L2 16 bits, 8 COS, ECX = CDP | noncontig
        let rows = vec![
            leaf0(0x20, INTEL),
            (7, 0, [0, 1 << 15, 0, 0]),
            (0x10, 0, [0, 0xe, 0, 0]),
            (0x10, 1, [0xe, 0x6000, 0x4, 0xe]),
            (0x10, 2, [0xf, 0, 0xc, 0x7]),
            (0x10, 3, [0x59, 0, 0x5, 0xe]),
        ];
        // act
        let caps = Capabilities::detect(&table(&rows));
        // assert
        let l2 = caps.l2_cat.get().unwrap();
        assert_eq!(
            (
                l2.cbm_len,
                l2.num_classes,
                l2.cdp_supported,
                l2.non_contiguous_cbm
            ),
            (16, 8, true, true)
        );
        assert!(!caps.l3_cat.get().unwrap().non_contiguous_cbm);
        let MbaKind::IntelDelay { per_thread, .. } = caps.mba.get().unwrap().kind else {
            panic!()
        };
        assert!(per_thread, "0x10.3 ECX[0]");
        assert_eq!(caps.pmu, PmuCaps::default(), "leaf 0xA not recorded");
    }

    /// AMD EPYC 7763 (Milan), leaves used by detection.
    fn milan() -> Vec<(u32, u32, [u32; 4])> {
        vec![
            leaf0(0x10, AMD),
            (1, 0, [0x00a0_0f11, 0x0040_0800, 0, 0]),
            (7, 0, [0, 0x219c_95a9, 0, 0]),
            (0xf, 0, [0, 0xff, 0, 2]),
            (0xf, 1, [0, 0x40, 0xff, 7]),
            (0x10, 0, [0, 2, 0, 0]),
            (0x10, 1, [0xf, 0, 4, 0xf]),
            (0x8000_0000, 0, [0x8000_0023, AMD[0], AMD[1], AMD[2]]),
            (0x8000_0008, 0, [0x3030, 0x91be_f75f, 0x603f, 0x0001_0007]),
            (0x8000_001d, 0, [0x121, 0x01c0_003f, 0x3f, 0]),
            (0x8000_001d, 1, [0x122, 0x01c0_003f, 0x3f, 0]),
            (0x8000_001d, 2, [0x143, 0x01c0_003f, 0x3ff, 2]),
            (0x8000_001d, 3, [0x0001_c163, 0x03c0_003f, 0x7fff, 1]),
            (0x8000_001d, 4, [0, 0, 0, 0]),
            (0x8000_0020, 0, [0, 2, 0, 0]),
            (0x8000_0020, 1, [0xb, 0, 0, 0xf]),
        ]
    }

    #[test]
    fn amd_mba_comes_from_leaf_8000_0020_and_cbms_may_be_sparse() {
        // act
        let caps = Capabilities::detect(&table(&milan()));
        // assert
        assert_eq!(caps.vendor, Vendor::Amd);
        assert_eq!(
            caps.mba,
            Feature::Supported(MbaCaps {
                num_classes: 16,
                kind: MbaKind::AmdBandwidth { width: 11 },
                ctrl_enabled: false,
            })
        );
        assert_eq!(caps.smba, Feature::Unsupported);
        let l3 = caps.l3_cat.get().unwrap();
        assert!(l3.non_contiguous_cbm);
        assert_eq!((l3.cbm_len, l3.num_classes), (16, 16));
        let g = caps.l3_cache.unwrap();
        assert_eq!((g.max_sharing_ids, g.ways, g.sets), (8, 16, 0x8000));
        assert_eq!(g.total_size(), 32 << 20);
        assert_eq!(
            caps.pmu,
            PmuCaps {
                ipc: true,
                llc_misses: true,
                llc_references: true,
            }
        );
    }

    #[test]
    fn amd_mba_without_subleaf_1_is_details_unknown() {
        let rows: Vec<_> = milan()
            .into_iter()
            .filter(|r| (r.0, r.1) != (0x8000_0020, 1))
            .collect();
        assert_eq!(
            Capabilities::detect(&table(&rows)).mba,
            Feature::DetailsUnknown
        );
        // leaf 8000_0020H not recorded at all: 8000_0008H:EBX[6] still says MBA exists
        let rows: Vec<_> = milan().into_iter().filter(|r| r.0 != 0x8000_0020).collect();
        assert_eq!(
            Capabilities::detect(&table(&rows)).mba,
            Feature::DetailsUnknown
        );
    }

    #[test]
    fn naples_explanation_names_the_clear_bits_and_the_missing_leaf() {
        // arrange: EPYC 7451 (Naples): PQM/PQE clear, max extended leaf 8000_001FH
        let rows = vec![
            leaf0(0xd, AMD),
            (7, 0, [0, 0x209c_01a9, 0, 0]),
            (0x8000_0000, 0, [0x8000_001f, AMD[0], AMD[1], AMD[2]]),
        ];
        // act
        let why = rdt_absence(&table(&rows)).unwrap();
        // assert
        assert_eq!(
            why,
            "CPUID.(EAX=07H,ECX=0):EBX[12] (PQM, monitoring) and EBX[15] (PQE, allocation) are \
             clear and CPUID.80000020H is absent (the maximum extended leaf is 8000001FH)"
        );
    }

    #[test]
    fn intel_explanation_with_enumerated_but_empty_leaf_10h() {
        let rows = vec![
            leaf0(0x20, INTEL),
            (7, 0, [0, 1 << 15, 0, 0]),
            (0x10, 0, [0, 0, 0, 0]),
        ];
        let why = rdt_absence(&table(&rows)).unwrap();
        assert_eq!(
            why,
            "CPUID.(EAX=07H,ECX=0):EBX[12] (PQM, monitoring) is clear and \
             CPUID.(EAX=10H,ECX=0):EBX[1] (L3 CAT), EBX[2] (L2 CAT) and EBX[3] (MBA) are clear"
        );
    }

    #[test]
    fn hygon_counter_width_offset_zero_means_32_bits() {
        let hygon = [0x6f67_7948, 0x656e_6975, 0x6e65_476e]; // Hygo nGen uine
        let rows = vec![
            leaf0(0xd, hygon),
            (7, 0, [0, 1 << 12, 0, 0]),
            (0xd, 0, [0; 4]),
        ];
        // max leaf 0xD: leaf 0xF does not exist
        assert_eq!(
            Capabilities::detect(&table(&rows)).monitoring,
            Feature::Unsupported
        );
        let rows = vec![
            leaf0(0x10, hygon),
            (7, 0, [0, 1 << 12, 0, 0]),
            (0xf, 0, [0, 0xff, 0, 2]),
            (0xf, 1, [0, 0x40, 0xff, 7]),
        ];
        let caps = Capabilities::detect(&table(&rows));
        assert_eq!(caps.vendor, Vendor::Hygon);
        assert_eq!(caps.monitoring.get().unwrap().counter_width, 32);
    }

    /// Detection on any register values of the RDT leaves (a hostile dump, a device, a
    /// hypervisor) never panics, and capabilities that pass `check_plausible` can be used:
    /// the all-ways masks, the MBA limits and the explanation of an absence.
    #[test]
    fn fuzz_detection_on_any_rdt_leaves_never_panics() {
        use proptest::prelude::*;

        use crate::fake::fuzz::fuzz;
        let leaves = [
            (7, 0),
            (0xF, 0),
            (0xF, 1),
            (0x10, 0),
            (0x10, 1),
            (0x10, 2),
            (0x10, 3),
            (0x8000_0008, 0),
            (0x8000_0020, 0),
            (0x8000_0020, 1),
            (0x8000_0020, 2),
            (4, 3),
            (0xA, 0),
        ];
        let regs = proptest::collection::vec(any::<[u32; 4]>(), leaves.len());
        fuzz(
            "Capabilities::detect",
            (regs, any::<bool>()),
            |(regs, amd)| {
                let vendor = if amd {
                    [0x6874_7541, 0x444d_4163, 0x6974_6e65]
                } else {
                    [0x756e_6547, 0x6c65_746e, 0x4965_6e69]
                };
                let mut rows = vec![
                    (0, 0, [0x20, vendor[0], vendor[1], vendor[2]]),
                    (0x8000_0000, 0, [0x8000_0020, 0, 0, 0]),
                ];
                rows.extend(leaves.iter().zip(&regs).map(|(&(l, s), r)| (l, s, *r)));
                let src = table(&rows);
                let caps = Capabilities::detect(&src);
                let _ = rdt_absence(&src);
                if caps.check_plausible().is_ok() {
                    for cat in [caps.l3_cat.get(), caps.l2_cat.get()].into_iter().flatten() {
                        prop_assert!(cat.full_mask().ways() == cat.cbm_len);
                    }
                    for m in [caps.mba.get(), caps.smba.get()].into_iter().flatten() {
                        let _ = (m.granularity(), m.unlimited());
                    }
                }
                Ok(())
            },
        );
    }
}

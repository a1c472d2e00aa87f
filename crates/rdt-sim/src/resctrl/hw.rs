//! The hardware profile resctrl derives at boot (`arch/x86/kernel/cpu/resctrl/core.c`), from
//! the model's capabilities and topology: resources, their parameters and domains, and the
//! register each control value lives in.

use rdt_core::{CacheDomain, CpuSet, LogicalCpu, MbaKind};
use rdt_msr::MsrAddr;
use rdt_msr::regs::{
    AMD_MBA_BW_0, AMD_SMBA_BW_0, IA32_L2_QOS_MASK_0, IA32_L3_QOS_MASK_0, IA32_MBA_THRTL_0,
};

use crate::SimPlatform;
use crate::quirks::RdtFlag;

/// A resctrl resource, in the kernel's enum order (`RDT_RESOURCE_L3`, `_L2`, `_MBA`, `_SMBA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Res {
    L3,
    L2,
    Mb,
    Smba,
}

impl Res {
    pub(crate) const ALL: [Self; 4] = [Self::L3, Self::L2, Self::Mb, Self::Smba];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::L3 => "L3",
            Self::L2 => "L2",
            Self::Mb => "MB",
            Self::Smba => "SMBA",
        }
    }

    pub(crate) const fn is_cache(self) -> bool {
        matches!(self, Self::L3 | Self::L2)
    }
}

/// A control or monitor domain: the cache instance's id and one of its CPUs.
#[derive(Clone, Debug)]
pub(crate) struct Domain {
    pub id: u32,
    /// The CPU the kernel runs the domain's register accesses on (any CPU of the domain).
    pub cpu: LogicalCpu,
}

/// A cache allocation resource (`struct resctrl_cache` + `num_closid`).
#[derive(Clone, Debug)]
pub(crate) struct CacheRes {
    pub cbm_len: u32,
    pub shareable_bits: u64,
    pub num_closid: u32,
    pub cdp_capable: bool,
    pub sparse: bool,
    pub min_cbm_bits: u32,
    /// Cache size of one instance in bytes (cacheinfo `size`).
    pub cache_size: u64,
}

impl CacheRes {
    /// `default_ctrl`: every bit of the CBM.
    pub(crate) const fn default_ctrl(&self) -> u64 {
        if self.cbm_len >= 64 {
            u64::MAX
        } else {
            (1u64 << self.cbm_len) - 1
        }
    }
}

/// A bandwidth resource, MB or SMBA (`struct resctrl_membw` + `num_closid`).
#[derive(Clone, Debug)]
pub(crate) struct BwRes {
    pub num_closid: u32,
    pub min_bw: u32,
    pub max_bw: u32,
    pub bw_gran: u32,
    pub delay_linear: bool,
    /// `thread_throttle_mode` text; `None` on AMD (no file).
    pub throttle_mode: Option<&'static str>,
    /// AMD: values are register units; Intel: percent, the register holds the delay.
    pub amd: bool,
}

/// L3 monitoring (`struct rdt_hw_resource` mon fields).
#[derive(Clone, Debug)]
pub(crate) struct MonRes {
    pub num_rmids: u32,
    /// Bytes per IA32_QM_CTR count (`mon_scale`).
    pub scale: u64,
    /// MBM counter width in bits.
    pub width: u32,
    pub llc_occupancy: bool,
    pub mbm_total: bool,
    pub mbm_local: bool,
    /// `resctrl_rmid_realloc_limit` = `boot_cpu_data.x86_cache_size * 1024`: the L3 size
    /// in bytes on Intel, the **L2** size on AMD ([`Hw::probe`]).
    pub realloc_limit: u32,
}

/// A monitoring event of L3 (`enum resctrl_event_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Event {
    LlcOccupancy,
    MbmTotal,
    MbmLocal,
}

impl Event {
    pub(crate) const ALL: [Self; 3] = [Self::LlcOccupancy, Self::MbmTotal, Self::MbmLocal];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::LlcOccupancy => "llc_occupancy",
            Self::MbmTotal => "mbm_total_bytes",
            Self::MbmLocal => "mbm_local_bytes",
        }
    }

    /// The IA32_QM_EVTSEL event id.
    pub(crate) const fn evtsel(self) -> u64 {
        match self {
            Self::LlcOccupancy => rdt_msr::regs::EVT_LLC_OCCUPANCY,
            Self::MbmTotal => rdt_msr::regs::EVT_MBM_TOTAL,
            Self::MbmLocal => rdt_msr::regs::EVT_MBM_LOCAL,
        }
    }
}

/// Everything resctrl learns about the platform at boot.
#[derive(Clone, Debug)]
pub(crate) struct Hw {
    /// `nr_cpu_ids`: the highest CPU number + 1 (the width of `cpus` masks).
    pub nr_cpu_ids: u32,
    pub online: CpuSet,
    pub l3: Option<CacheRes>,
    pub l2: Option<CacheRes>,
    pub mb: Option<BwRes>,
    pub smba: Option<BwRes>,
    pub mon: Option<MonRes>,
    pub l3_domains: Vec<Domain>,
    pub l2_domains: Vec<Domain>,
    /// Sub-NUMA Clustering nodes per L3 (`snc_nodes_per_l3_cache`, 1 without SNC).
    pub snc: u32,
    /// Per L3 domain (index), its NUMA node ids, ascending: with SNC the monitor
    /// sub-domains `mon_sub_L3_YY`, node `k` counting RMID `r` as `r + k × num_rmids`.
    pub l3_nodes: Vec<Vec<u32>>,
}

/// Intel's `MAX_MBA_BW`: 100 percent.
pub(crate) const MAX_MBA_BW: u32 = 100;

fn domains(list: Vec<CacheDomain>, cpus_of: impl Fn(CacheDomain) -> CpuSet) -> Vec<Domain> {
    list.into_iter()
        .filter_map(|d| {
            let cpu = cpus_of(d).first()?;
            Some(Domain { id: d.get(), cpu })
        })
        .collect()
}

/// `resctrl_rmid_realloc_limit` (`arch/x86/kernel/cpu/resctrl/monitor.c`
/// `rdt_get_mon_l3_config`): `boot_cpu_data.x86_cache_size * 1024`. Intel's
/// `init_intel_cacheinfo` sets `x86_cache_size` to the L3 size; on AMD it stays what
/// `cpu_detect_cache_sizes` read, CPUID 8000_0006H:ECX\[31:16\], the L2 size in KB (512 KB
/// on Milan: with 256 RMIDs the default threshold is 2048 bytes). Without that leaf, the L2
/// geometry.
fn realloc_limit(p: &SimPlatform, amd: bool, l3_total: u64, l2_total: u64) -> u32 {
    use rdt_core::CpuidSource as _;
    let bytes = if amd {
        p.cpuid()
            .cpuid(0x8000_0006, 0)
            .filter(|r| r.ecx >> 16 != 0)
            .map_or(l2_total, |r| u64::from(r.ecx >> 16) * 1024)
    } else {
        l3_total
    };
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

impl Hw {
    /// The profile of `p`, as the kernel would probe it.
    ///
    /// - cache: `min_cbm_bits` is 1 on Intel and 0 on AMD (the kernel's values; CPUID has
    ///   none), sparse masks from CPUID (always on AMD);
    /// - MB: Intel `min_bw = bw_gran = 100 - max_delay`, `max_bw = 100`, only when linear
    ///   (the kernel has no non-linear table for any x86 part: MB is absent otherwise);
    ///   AMD `min_bw = 0`, `bw_gran = 1`, `max_bw = 2^width`, not linear;
    /// - monitoring: `num_rmids`, `mon_scale` (upscaling factor), counter width and events
    ///   from CPUID leaf 0FH;
    /// - each feature only where `rdt_cpu_has` keeps it: the `rdt=` boot parameter and the
    ///   quirks of `__check_quirks_intel` ([`crate::quirks`]: Skylake-SP stepping ≤ 4 hides
    ///   L3 CAT, CMT and MBM).
    pub(crate) fn probe(p: &SimPlatform) -> Self {
        let caps = p.capabilities();
        let topo = p.topology();
        let amd = caps.vendor.is_amd_like();
        let l3_total = caps.l3_cache.map_or_else(
            // Without a geometry the model assumed a size; use the same one.
            || crate::num::f64_floor_u64(p.portion_bytes * f64::from(p.portions)),
            |g| g.total_size(),
        );
        let l2_total = caps.l2_cache.map_or(0, |g| g.total_size());
        let cache = |c: &rdt_core::CatCaps, size: u64| CacheRes {
            cbm_len: c.cbm_len,
            shareable_bits: c.shareable_bits,
            num_closid: c.num_classes,
            cdp_capable: c.cdp_supported,
            sparse: c.non_contiguous_cbm || amd,
            min_cbm_bits: if amd { 0 } else { c.min_cbm_bits },
            cache_size: size,
        };
        // `rdt_cpu_has`: the `rdt=` boot parameter and the model's quirks.
        let k = p.kernel_rdt_options();
        let realloc_limit = realloc_limit(p, amd, l3_total, l2_total);
        let mon = caps.monitoring.get().and_then(|m| {
            let llc_occupancy = k.cpu_has(RdtFlag::Cmt, m.events.llc_occupancy);
            let mbm_total = k.cpu_has(RdtFlag::MbmTotal, m.events.mbm_total);
            let mbm_local = k.cpu_has(RdtFlag::MbmLocal, m.events.mbm_local);
            let any = llc_occupancy || mbm_total || mbm_local;
            any.then(|| MonRes {
                // SNC: the RMIDs are shared out among the nodes of an L3.
                num_rmids: m.num_rmids / p.snc_nodes().max(1),
                scale: u64::from(m.upscaling_factor),
                width: m.counter_width,
                llc_occupancy,
                mbm_total,
                mbm_local,
                realloc_limit,
            })
        });
        let cat = |c: Option<&rdt_core::CatCaps>, cat: RdtFlag, cdp: RdtFlag, size: u64| {
            c.filter(|_| k.cpu_has(cat, true)).map(|c| {
                let mut r = cache(c, size);
                r.cdp_capable = k.cpu_has(cdp, r.cdp_capable);
                r
            })
        };
        let nr_cpu_ids = topo.cpus().last().map_or(0, |c| c.cpu.get() + 1);
        let l3_domains = domains(topo.l3_domains(), |d| topo.cpus_in_l3(d));
        let l3_nodes = l3_domains
            .iter()
            .map(|d| {
                let mut n: Vec<u32> = topo
                    .cpus()
                    .iter()
                    .filter(|c| c.l3.map(rdt_core::CacheDomain::get) == Some(d.id))
                    .map(|c| c.node)
                    .collect();
                n.sort_unstable();
                n.dedup();
                n
            })
            .collect();
        Self {
            nr_cpu_ids,
            online: topo.all_cpus(),
            l3: cat(caps.l3_cat.get(), RdtFlag::L3Cat, RdtFlag::L3Cdp, l3_total),
            l2: cat(caps.l2_cat.get(), RdtFlag::L2Cat, RdtFlag::L2Cdp, l2_total),
            mb: caps
                .mba
                .get()
                .filter(|_| k.cpu_has(RdtFlag::Mba, true))
                .and_then(bw_res),
            smba: caps
                .smba
                .get()
                .filter(|_| k.cpu_has(RdtFlag::Smba, true))
                .and_then(bw_res),
            mon,
            l3_domains,
            l2_domains: domains(topo.l2_domains(), |d| topo.cpus_in_l2(d)),
            snc: p.snc_nodes().max(1),
            l3_nodes,
        }
    }

    pub(crate) const fn cache(&self, r: Res) -> Option<&CacheRes> {
        match r {
            Res::L3 => self.l3.as_ref(),
            Res::L2 => self.l2.as_ref(),
            _ => None,
        }
    }

    pub(crate) const fn bw(&self, r: Res) -> Option<&BwRes> {
        match r {
            Res::Mb => self.mb.as_ref(),
            Res::Smba => self.smba.as_ref(),
            _ => None,
        }
    }

    /// Whether `r` is alloc-capable here.
    pub(crate) const fn has(&self, r: Res) -> bool {
        self.cache(r).is_some() || self.bw(r).is_some()
    }

    /// Hardware classes of `r` (`hw_res->num_closid`, before any CDP halving).
    pub(crate) fn num_closid(&self, r: Res) -> u32 {
        self.cache(r)
            .map(|c| c.num_closid)
            .or_else(|| self.bw(r).map(|b| b.num_closid))
            .unwrap_or(0)
    }

    /// The control domains of `r`: cache instances of its level (MB and SMBA: of L3).
    pub(crate) fn domains(&self, r: Res) -> &[Domain] {
        match r {
            Res::L2 => &self.l2_domains,
            _ => &self.l3_domains,
        }
    }

    /// Whether allocation of any kind is present (`resctrl_arch_alloc_capable`).
    pub(crate) fn alloc_capable(&self) -> bool {
        Res::ALL.iter().any(|&r| self.has(r))
    }

    /// The default control value of `r`: full CBM, 100 %, or AMD's `max_bw`.
    pub(crate) fn default_ctrl(&self, r: Res) -> u64 {
        self.cache(r).map_or_else(
            || self.bw(r).map_or(0, |b| u64::from(b.max_bw)),
            CacheRes::default_ctrl,
        )
    }

    /// The MSR holding hardware index `idx` of `r`, and the register value for control
    /// value `val` (Intel MBA: the delay `100 - val`, `delay_bw_map`).
    pub(crate) fn ctrl_msr(&self, r: Res, idx: u32, val: u64) -> (MsrAddr, u64) {
        let at = |base: MsrAddr| MsrAddr::new(base.get() + idx);
        match r {
            Res::L3 => (at(IA32_L3_QOS_MASK_0), val),
            Res::L2 => (at(IA32_L2_QOS_MASK_0), val),
            Res::Mb if self.mb.as_ref().is_some_and(|b| !b.amd) => (
                at(IA32_MBA_THRTL_0),
                u64::from(rdt_core::intel_mba_delay(
                    u32::try_from(val).unwrap_or(MAX_MBA_BW),
                )),
            ),
            Res::Mb => (at(AMD_MBA_BW_0), val),
            Res::Smba => (at(AMD_SMBA_BW_0), val),
        }
    }
}

/// A bandwidth resource (`MB`, `SMBA`) as the kernel probes it: Intel only when linear
/// (`min_bw = bw_gran = 100 - max_delay`, `max_bw = 100`), AMD `0..=2^width` in steps of 1.
fn bw_res(m: &rdt_core::MbaCaps) -> Option<BwRes> {
    match m.kind {
        MbaKind::IntelDelay {
            max_delay,
            linear,
            per_thread,
        } => linear.then(|| BwRes {
            num_closid: m.num_classes,
            min_bw: MAX_MBA_BW.saturating_sub(max_delay),
            max_bw: MAX_MBA_BW,
            bw_gran: MAX_MBA_BW.saturating_sub(max_delay),
            delay_linear: true,
            throttle_mode: Some(if per_thread { "per-thread" } else { "max" }),
            amd: false,
        }),
        MbaKind::AmdBandwidth { width } => Some(BwRes {
            num_closid: m.num_classes,
            min_bw: 0,
            max_bw: 1u32 << width.min(31),
            bw_gran: 1,
            delay_linear: false,
            throttle_mode: None,
            amd: true,
        }),
    }
}

//! [`SimPlatform`]: registers that answer like silicon, counters, PMU, and the virtual clock.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use rdt_core::{
    CacheBitmask, CacheDomain, Capabilities, CatCaps, LogicalCpu, MbaKind, PmuCounts, PmuSource,
    Rmid, Topology,
};
use rdt_msr::regs::{
    AMD_MBA_BW_0, AMD_SMBA_BW_0, IA32_L2_QOS_CFG, IA32_L2_QOS_MASK_0, IA32_L3_QOS_CFG,
    IA32_L3_QOS_MASK_0, IA32_MBA_THRTL_0, IA32_PQR_ASSOC, IA32_QM_CTR, IA32_QM_EVTSEL,
    QM_CTR_ERROR, QM_CTR_UNAVAILABLE,
};
use rdt_msr::{MsrAddr, MsrError, MsrIo};

use crate::cpuid::{CpuidPatch, SimCpuid};
use crate::model::{self, AMD_UNIT_BYTES_PER_S, Claim, CpuActivity, Throttle};
use crate::num::{Accum, f64_floor_u64, u64_to_f64};
use crate::{Scenario, ScenarioError, SimError};

/// `EIO` from `<errno.h>` on Linux: what the `msr` driver returns when RDMSR/WRMSR raises #GP.
const EIO: i32 = 5;

/// Bytes in a MiB (for the geometry fallback).
const MIB: f64 = 1024.0 * 1024.0;

/// Per-CPU registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuRegs {
    /// IA32_PQR_ASSOC.
    pub pqr_assoc: u64,
    /// IA32_QM_EVTSEL.
    pub evtsel: u64,
}

/// The CAT registers of one cache domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CatRegs {
    /// IA32_Lx_QOS_MASK_n, n < #COS.
    pub masks: Vec<u64>,
    /// IA32_Lx_QOS_CFG.
    pub cfg: u64,
}

impl CatRegs {
    fn reset(cat: &CatCaps) -> Self {
        Self {
            masks: vec![cat.full_mask().bits(); cat.num_classes as usize],
            cfg: 0,
        }
    }

    const fn cdp_on(&self) -> bool {
        self.cfg & 1 != 0
    }
}

/// Every register of the platform.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Registers {
    /// Per CPU, in topology order.
    pub cpus: Vec<CpuRegs>,
    /// Per L3 domain.
    pub l3: BTreeMap<CacheDomain, CatRegs>,
    /// Per L2 domain.
    pub l2: BTreeMap<CacheDomain, CatRegs>,
    /// MBA values per L3 domain (Intel delay or AMD units), index = COS.
    pub mba: BTreeMap<CacheDomain, Vec<u64>>,
    /// AMD SMBA units per L3 domain.
    pub smba: BTreeMap<CacheDomain, Vec<u64>>,
    /// AMD BMEC/ABMC/SDCIAE registers per L3 domain ([`crate::amdqos`]); empty on other parts.
    pub amd: BTreeMap<CacheDomain, crate::amdqos::AmdQosRegs>,
}

/// MBM counters of one RMID in one L3 domain, in upscaling-factor units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RmidCounters {
    pub total: Accum,
    pub local: Accum,
}

/// Cumulative PMU counts of one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PmuAccum {
    pub instructions: Accum,
    pub cycles: Accum,
    pub llc_misses: Accum,
    pub llc_references: Accum,
}

impl PmuAccum {
    /// Adds `dt` seconds of `a`.
    fn add(&mut self, a: &CpuActivity, dt: f64) {
        self.cycles.add(a.cycles_per_s * dt);
        self.instructions.add(a.instructions_per_s * dt);
        self.llc_misses.add(a.llc_misses_per_s * dt);
        self.llc_references.add(a.llc_references_per_s * dt);
    }

    const fn counts(&self) -> PmuCounts {
        PmuCounts {
            instructions: self.instructions.whole,
            cycles: self.cycles.whole,
            llc_misses: self.llc_misses.whole,
            llc_references: Some(self.llc_references.whole),
        }
    }
}

/// A host task's share of the model ([`crate::resctrl`], "Host tasks"): where its data
/// sits, counted in the occupancy of its RMID.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HostLoad {
    pub domain: CacheDomain,
    pub rmid: u32,
    pub occupancy_bytes: f64,
}

/// A register the model implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reg {
    PqrAssoc,
    EvtSel,
    QmCtr,
    L3Cfg,
    L2Cfg,
    L3Mask(usize),
    L2Mask(usize),
    Mba(usize),
    Smba(usize),
    /// AMD's BMEC/ABMC/SDCIAE registers ([`crate::amdqos`]).
    Amd(crate::amdqos::AmdReg),
    /// Not an RDT register ([`crate::sysregs`]).
    Sys(crate::sysregs::SysReg),
    /// An uncore CHA performance-monitoring register of the CPU's package
    /// ([`crate::uncore`]): (CHA, register).
    Cha(usize, crate::uncore::ChaReg),
}

/// A simulated RDT/PQoS platform: a real CPUID dump and its topology, with registers that
/// answer like silicon and counters driven by a workload model ([`crate::model`]).
///
/// # Registers (and [`crate::amdqos`], [`crate::sysregs`], [`crate::uncore`]; all others: EIO on read and write)
/// | MSR | scope | write faults (EIO) | reset |
/// |---|---|---|---|
/// | IA32_PQR_ASSOC 0xC8F | CPU | RMID ≥ #RMIDs; bits 31:10 set (31:w when more than 1024 RMIDs need w bits); COS ≥ the CPU's class count (the largest of L3, L2, MBA, SMBA #COS, L3/L2 halved while its CDP is on in the CPU's domain) | 0 |
/// | IA32_QM_EVTSEL 0xC8D | CPU | bits 31:8 set | 0 |
/// | IA32_QM_CTR 0xC8E | CPU, read-only | every write | — |
/// | IA32_L3_QOS_CFG 0xC81 | L3 domain, only with L3 CDP | any bit but 0 | 0 |
/// | IA32_L2_QOS_CFG 0xC82 | L2 domain, only with L2 CDP | any bit but 0 | 0 |
/// | IA32_L3_QOS_MASK_n 0xC90+n, n < #COS | L3 domain | zero; bits at or above the CBM length; not contiguous unless CPUID.(10H,1):ECX\[3\] (always accepted on AMD); fewer bits than the minimum | all ways |
/// | IA32_L2_QOS_MASK_n 0xD10+n | L2 domain | as for L3 | all ways |
/// | MBA delay 0xD50+n (Intel) | L3 domain | value > max delay (real parts may clamp; the model faults so a backend that forgets pqos's clipping is caught) | 0 |
/// | AMD MBA 0xC000_0200+n | L3 domain | value > 2^width | 2^width (unlimited) |
/// | AMD SMBA 0xC000_0280+n | L3 domain | value > 2^width | 2^width |
///
/// IA32_QM_CTR answers for (the CPU's L3 domain, the RMID and event of the CPU's
/// IA32_QM_EVTSEL): bit 63 (Error) when the RMID is ≥ #RMIDs or the event is not one the
/// CPU enumerates; bit 62 (Unavailable) only through [`SimPlatform::inject_unavailable`]
/// (and AMD ABMC: [`crate::amdqos`], which also has the counter reads and BMEC's effect);
/// otherwise occupancy (event 1) or the MBM total/local counter (events 2/3) wrapped at
/// `2^counter_width`, in upscaling-factor units. On the parts the kernel corrects
/// (Broadwell-X and Skylake-X: `broadwell-ep`, `skylake-sp`), the MBM counters of RMIDs above
/// the erratum threshold count the model's traffic divided by the kernel's correction factor
/// ([`rdt_core::mbm::MbmCorrection`]): the erratum as the kernel's correction describes it,
/// so resctrl (which corrects) reports the traffic and a raw MSR reader that does not
/// correct (pqos) does not.
///
/// A write to a register shared by a domain on any CPU of the domain is what every CPU of
/// that domain reads.
///
/// # References
/// Intel SDM Vol. 3B, 18.18 (IA32_PQR_ASSOC, IA32_QM_EVTSEL, IA32_QM_CTR) and 18.19
/// (IA32_L3_QOS_MASK_n, IA32_L3_QOS_CFG, MBA); AMD pub. 56375; pqos(8) / `lib/cpu_registers.h`.
#[derive(Debug)]
pub struct SimPlatform {
    pub(crate) model: String,
    pub(crate) identity: String,
    pub(crate) cpuid: SimCpuid,
    pub(crate) caps: Capabilities,
    pub(crate) topology: Topology,
    pub(crate) notes: Vec<String>,
    pub(crate) freq_hz: f64,
    /// Capacity-bitmask portions of an L3 domain, and bytes per portion.
    pub(crate) portions: u32,
    pub(crate) portion_bytes: f64,
    /// Width of the RMID field of IA32_PQR_ASSOC, bits.
    pub(crate) rmid_bits: u32,
    pub(crate) regs: Registers,
    pub(crate) counters: BTreeMap<CacheDomain, Vec<RmidCounters>>,
    pub(crate) pmu: Vec<PmuAccum>,
    pub(crate) activity: Vec<CpuActivity>,
    pub(crate) scenario: Scenario,
    pub(crate) now: Duration,
    /// When the scenario was installed: its times (`start_s`, phases) count from here.
    pub(crate) epoch: Duration,
    pub(crate) unavailable: BTreeMap<(CacheDomain, u32), u32>,
    /// Host tasks placed in resctrl groups, by thread id: their occupancy.
    pub(crate) host_loads: BTreeMap<u32, HostLoad>,
    /// I/O traffic of I/O RDT channels ([`SimPlatform::set_io_traffic`]; not saved).
    pub(crate) io_traffic: BTreeMap<rdt_mmio::ChannelId, crate::mmio::IoTraffic>,
    /// Host tasks' PMU counts, by thread id (not saved: they start at 0 in each process).
    pub(crate) task_pmu: BTreeMap<u32, PmuAccum>,
    pub(crate) msr_reads: u64,
    pub(crate) msr_writes: u64,
    /// The kernel release whose resctrl files a mount shows (not saved: chosen per run).
    pub(crate) kernel: crate::kernel::KernelVersion,
    /// Sub-NUMA Clustering: NUMA nodes per L3 cache (1 = off); see [`SimPlatform::snc_nodes`].
    pub(crate) snc: u32,
    /// The `rdt=` boot parameter ([`crate::quirks`]).
    pub(crate) rdt_boot: crate::quirks::RdtOptions,
    /// MBA_CFG per package ([`crate::sysregs`]; not saved).
    pub(crate) mba_cfg: BTreeMap<u32, u64>,
    /// The part has Intel's MBA 4.0 extensions: IA32_CORE_CAPABILITIES bit 10 and
    /// MBA_CFG bit 2 ([`crate::sysregs`], [`SimPlatform::set_mba40`]; not saved).
    pub(crate) mba40: bool,
    /// IA32_L3_IO_QOS_CFG per package, where written ([`crate::sysregs`],
    /// [`SimPlatform::set_io_rdt`]; not saved).
    pub(crate) l3_io_qos_cfg: BTreeMap<u32, u64>,
    /// MSR_RMID_SNC_CONFIG per package, where written ([`crate::sysregs`]; saved).
    pub(crate) rmid_snc_config: BTreeMap<u32, u64>,
    /// The uncore CHA monitors per package, one per CHA; empty where the CPU has none
    /// ([`crate::uncore`]; not saved).
    pub(crate) uncore: BTreeMap<u32, Vec<crate::uncore::ChaBox>>,
    /// The memory domains' steady state ([`crate::metrics`]).
    pub(crate) memory: Vec<crate::metrics::MemoryDomainLoad>,
    /// Per CPU: (index of the scenario assignment it runs now, its instructions per
    /// operation) where that workload has an application metric.
    pub(crate) cpu_metric: Vec<Option<(usize, f64)>>,
    /// Per scenario assignment: operations since the scenario was installed (not saved).
    pub(crate) ops: Vec<f64>,
    /// The RDT 1.3 MMIO generation: ACPI tables and MMIO registers ([`crate::mmio`]; not
    /// saved), `None` on models without it.
    pub(crate) mmio: Option<Box<crate::mmio::MmioModel>>,
}

impl SimPlatform {
    /// Builds a platform from its parts: a display name, a model identity (saved states
    /// only restore into a platform of the same identity), the CPUID it answers, the
    /// capabilities and topology. The registers start at their reset values, the clock at 0
    /// and the workload is [`Scenario::default`] (the seed paper's).
    ///
    /// [`SimPlatform::builtin`] and [`SimPlatform::from_dump`] derive the parts from a dump;
    /// use this for tests that need particular capabilities.
    ///
    /// # Errors
    /// [`SimError::NoCpus`] for an empty topology, [`SimError::NoRdt`] when the capabilities
    /// hold neither monitoring nor allocation with known parameters,
    /// [`SimError::Implausible`] when they claim table sizes no platform has
    /// ([`Capabilities::check_plausible`]).
    pub fn from_parts(
        model: &str,
        identity: &str,
        cpuid: SimCpuid,
        caps: Capabilities,
        topology: Topology,
    ) -> Result<Self, SimError> {
        if topology.cpus().is_empty() {
            return Err(SimError::NoCpus {
                model: model.into(),
            });
        }
        let simulable = caps.monitoring.get().is_some()
            || caps.l3_cat.get().is_some()
            || caps.l2_cat.get().is_some()
            || caps.mba.get().is_some();
        if !simulable {
            return Err(SimError::NoRdt {
                model: model.into(),
            });
        }
        // Every table below is sized from the capabilities: refuse absurd claims first.
        caps.check_plausible()
            .map_err(|source| SimError::Implausible {
                model: model.into(),
                source,
            })?;
        let mut notes = Vec::new();
        let portions = caps.l3_cat.get().map_or(1, |c| c.cbm_len.clamp(1, 64));
        let total = if let Some(g) = caps.l3_cache {
            u64_to_f64(g.total_size())
        } else {
            notes.push(format!(
                "no L3 cache geometry (CPUID leaf 4 / 8000_001DH): assumed {portions} MiB per L3 domain"
            ));
            f64::from(portions) * MIB
        };
        let (freq_hz, freq_note) = base_frequency(&cpuid, caps.brand.as_deref());
        if let Some(n) = freq_note {
            notes.push(n);
        }
        let num_rmids = caps.monitoring.get().map_or(1, |m| m.num_rmids.max(1));
        // IA32_PQR_ASSOC RMID field: bits 9:0 as pqos uses them, wider only if the RMIDs need it.
        let rmid_bits = (u32::BITS - (num_rmids - 1).leading_zeros()).max(10);
        let mut p = Self {
            model: model.into(),
            identity: identity.into(),
            cpuid,
            caps,
            topology,
            notes,
            freq_hz,
            portions,
            portion_bytes: total / f64::from(portions),
            rmid_bits,
            regs: Registers {
                cpus: Vec::new(),
                l3: BTreeMap::new(),
                l2: BTreeMap::new(),
                mba: BTreeMap::new(),
                smba: BTreeMap::new(),
                amd: BTreeMap::new(),
            },
            counters: BTreeMap::new(),
            pmu: Vec::new(),
            activity: Vec::new(),
            scenario: Scenario::default(),
            now: Duration::ZERO,
            epoch: Duration::ZERO,
            unavailable: BTreeMap::new(),
            host_loads: BTreeMap::new(),
            io_traffic: BTreeMap::new(),
            task_pmu: BTreeMap::new(),
            msr_reads: 0,
            msr_writes: 0,
            kernel: crate::kernel::KernelVersion::default(),
            snc: 1,
            rdt_boot: crate::quirks::RdtOptions::default(),
            mba_cfg: BTreeMap::new(),
            mba40: false,
            l3_io_qos_cfg: BTreeMap::new(),
            rmid_snc_config: BTreeMap::new(),
            uncore: BTreeMap::new(),
            memory: Vec::new(),
            cpu_metric: Vec::new(),
            ops: Vec::new(),
            mmio: None,
        };
        p.regs = p.reset_registers();
        p.uncore = p.reset_uncore();
        p.counters = p.zero_counters();
        p.pmu = vec![PmuAccum::default(); p.topology.cpus().len()];
        // The default scenario names CPUs 2-10; on a smaller platform keep only those present.
        let sc = p.scenario_for_platform(Scenario::default());
        p.ops = vec![0.0; sc.workloads.len()];
        p.scenario = sc;
        p.recompute();
        Ok(p)
    }

    fn scenario_for_platform(&self, mut s: Scenario) -> Scenario {
        let all = self.topology.all_cpus();
        for a in &mut s.workloads {
            a.cpus = a.cpus.iter().filter(|c| all.contains(*c)).collect();
        }
        s.workloads.retain(|a| !a.cpus.is_empty());
        s
    }

    /// Register values after power-on / reset (table in the type docs).
    pub(crate) fn reset_registers(&self) -> Registers {
        let t = &self.topology;
        let mut r = Registers {
            cpus: vec![CpuRegs::default(); t.cpus().len()],
            l3: BTreeMap::new(),
            l2: BTreeMap::new(),
            mba: BTreeMap::new(),
            smba: BTreeMap::new(),
            amd: BTreeMap::new(),
        };
        let amd = self.amd_qos_reset();
        for d in t.l3_domains() {
            if let Some(a) = &amd {
                r.amd.insert(d, a.clone());
            }
            if let Some(cat) = self.caps.l3_cat.get() {
                r.l3.insert(d, CatRegs::reset(cat));
            }
            if let Some(m) = self.caps.mba.get() {
                r.mba
                    .insert(d, vec![mba_reset(m.kind); m.num_classes as usize]);
            }
            if let Some(m) = self.caps.smba.get() {
                r.smba
                    .insert(d, vec![mba_reset(m.kind); m.num_classes as usize]);
            }
        }
        if let Some(cat) = self.caps.l2_cat.get() {
            for d in t.l2_domains() {
                r.l2.insert(d, CatRegs::reset(cat));
            }
        }
        r
    }

    pub(crate) fn zero_counters(&self) -> BTreeMap<CacheDomain, Vec<RmidCounters>> {
        let n = self
            .caps
            .monitoring
            .get()
            .map_or(0, |m| m.num_rmids as usize);
        self.topology
            .l3_domains()
            .into_iter()
            .map(|d| (d, vec![RmidCounters::default(); n]))
            .collect()
    }

    /// The model's name: a built-in name (`broadwell-ep`), or the dump's brand string.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The model's identity, as saved states record it: `builtin:NAME`, or
    /// `dump:fnv1a64:HASH` of the dump's text.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Capabilities as CPUID enumerates them (after [`Self::cpuid_patches`]); CDP reported off.
    #[must_use]
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The topology of the dump's logical CPUs.
    #[must_use]
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The model's CPUID as CPU 0 answers it, patches included (for `pqos -d` in sim mode).
    #[must_use]
    pub fn cpuid(&self) -> SimCpuid {
        self.cpuid.clone()
    }

    /// The leaves the model answers in place of the dump ([`crate::cpuid`] lists why).
    #[must_use]
    pub fn cpuid_patches(&self) -> &[CpuidPatch] {
        self.cpuid.patches()
    }

    /// Every assumption the model makes beyond the dump, one sentence each: CPUID patches,
    /// a missing cache geometry, the base frequency's source.
    #[must_use]
    pub fn notes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .cpuid_patches()
            .iter()
            .map(ToString::to_string)
            .collect();
        v.extend(self.notes.iter().cloned());
        v
    }

    /// The kernel release the machine runs, which decides the resctrl files a mount shows
    /// ([`crate::resctrl::KernelVersion`]; default the newest modelled).
    #[must_use]
    pub const fn kernel(&self) -> crate::kernel::KernelVersion {
        self.kernel
    }

    /// Models a part with Intel's MBA 4.0 extensions (pqos v23.11+ `-R mba40-on|off`):
    /// IA32_CORE_CAPABILITIES (0xCF) reads bit 10 on every CPU and MBA_CFG (0xC84) takes
    /// bit 2 ([`crate::sysregs`]). No built-in model's part has them (the Sapphire Rapids
    /// dump's 0xCF is `0x24`: `models/PROVENANCE.md`), so every model starts without; this
    /// turns them on for a model whose CPUID enumerates IA32_CORE_CAPABILITIES
    /// (CPUID.(7,0):EDX\[30\]) and Intel MBA, and does nothing elsewhere, as the register
    /// would not exist there. Returns whether the part now has them. Not saved in the
    /// state file (as MBA_CFG is not).
    pub fn set_mba40(&mut self, on: bool) -> bool {
        self.mba40 = on && self.has_core_capabilities() && self.has_intel_mba();
        if !self.mba40 {
            for v in self.mba_cfg.values_mut() {
                *v &= !crate::sysregs::MBA_CFG_MBA40;
            }
        }
        self.mba40
    }

    /// Models a part whose L3 CAT enumerates I/O RDT allocation (pqos v23.11+ `-R
    /// l3iordt-on|off`): CPUID.(10H,1):ECX\[1\] set (a CPUID patch) and IA32_L3_IO_QOS_CFG
    /// (0xC83) per package ([`crate::sysregs`]), and L3 monitoring of those agents
    /// (CPUID.(0FH,1):EAX\[9\]/\[10\], the register's bit 1: `-r l3iordt-on|off`). No
    /// captured part enumerates it, though
    /// `sapphire-rapids` carries an ACPI IRDT (the synthesized `xeon-rdt13` is built with it
    /// on); this turns it on for an Intel model with L3 CAT and does nothing elsewhere. Off
    /// clears the CPUID bit and the register. Returns whether the part now has it. The
    /// CPUID patch is not saved in the state file (as MBA_CFG is not); the register is.
    pub fn set_io_rdt(&mut self, on: bool) -> bool {
        let intel = matches!(self.caps.vendor, rdt_core::Vendor::Intel);
        let on = on && intel && self.caps.l3_cat.is_present();
        if !self.cpuid.set_l3_io_alloc(on) {
            return false;
        }
        if let Some(l3) = self.caps.l3_cat.get_mut() {
            l3.io_rdt = on;
        }
        if let Some(m) = self.caps.monitoring.get_mut() {
            m.io_rdt = on;
        }
        if !on {
            self.l3_io_qos_cfg.clear();
        }
        on
    }

    /// Boots another kernel release: the next resctrl mount shows its files (a mounted
    /// resctrl keeps the files of the release it was mounted with).
    pub fn set_kernel(&mut self, kernel: crate::kernel::KernelVersion) {
        self.kernel = kernel;
    }

    /// Base (unhalted-cycle) frequency of every CPU, in Hz.
    #[must_use]
    pub fn base_frequency_hz(&self) -> f64 {
        self.freq_hz
    }

    /// The simulated time since the platform was built.
    #[must_use]
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The current scenario.
    #[must_use]
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Replaces the workloads. Counters keep their values; from now on they grow at the new
    /// rates.
    ///
    /// # Errors
    /// [`ScenarioError::NoSuchCpu`] when a workload names a CPU the platform lacks (nothing is
    /// changed).
    pub fn set_scenario(&mut self, scenario: &Scenario) -> Result<(), ScenarioError> {
        for (i, a) in scenario.workloads.iter().enumerate() {
            if let Some(cpu) = a.cpus.iter().find(|c| self.topology.get(*c).is_none()) {
                return Err(ScenarioError::NoSuchCpu {
                    field: format!("workloads[{i}].cpus"),
                    cpu: cpu.get(),
                });
            }
        }
        self.scenario = scenario.clone();
        self.epoch = self.now;
        self.ops = vec![0.0; scenario.workloads.len()];
        self.recompute();
        Ok(())
    }

    /// What `cpu` is doing in the current steady state, or `None` if it does not exist.
    #[must_use]
    pub fn activity(&self, cpu: LogicalCpu) -> Option<&CpuActivity> {
        self.index(cpu).map(|i| &self.activity[i])
    }

    /// Cumulative PMU counts of `cpu` (what [`PmuSource::read`] returns; this name avoids the
    /// clash with [`MsrIo::read`] when both traits are in scope).
    #[must_use]
    pub fn pmu_counts(&self, cpu: LogicalCpu) -> Option<PmuCounts> {
        Some(self.pmu[self.index(cpu)?].counts())
    }

    /// Cumulative PMU counts of a host task (thread id) that resctrl placed in a group
    /// ([`crate::resctrl`], "Host tasks"); `None` for a task the model does not follow.
    /// They start at 0 when the task is first placed, in each process.
    #[must_use]
    pub fn task_pmu_counts(&self, task: u32) -> Option<PmuCounts> {
        self.task_pmu.get(&task).map(PmuAccum::counts)
    }

    /// Starts following a host task's PMU counts (at 0), if not yet.
    pub(crate) fn follow_host_task(&mut self, task: u32) {
        self.task_pmu.entry(task).or_default();
    }

    /// Forgets a host task that exited.
    pub(crate) fn forget_host_task(&mut self, task: u32) {
        self.task_pmu.remove(&task);
        self.host_loads.remove(&task);
    }

    /// Charges `dt` seconds of a host task that ran `cpu_share` (0..=1) of them, in class
    /// `cos` and RMID `rmid` of L3 domain `domain` (the host-task model of [`crate::resctrl`]):
    /// its occupancy is `cpu_share × min(HOST_TASK.working_set, capacity of cos's mask)`, its
    /// memory traffic, IPC and misses follow from the workload model
    /// ([`model::host_task_activity`]); MBM counts of (domain, rmid) and the task's PMU
    /// counts grow by `dt` of them.
    pub(crate) fn charge_host_task(
        &mut self,
        task: u32,
        domain: CacheDomain,
        cos: u32,
        rmid: u32,
        cpu_share: f64,
        dt: f64,
    ) {
        let capacity = f64::from(self.cos_fill_mask(domain, cos).count_ones()) * self.portion_bytes;
        let th = self.cos_throttle(cos, domain);
        let a = model::host_task_activity(cpu_share, capacity, th, self.freq_hz);
        self.host_loads.insert(
            task,
            HostLoad {
                domain,
                rmid,
                occupancy_bytes: a.occupancy_bytes,
            },
        );
        self.task_pmu.entry(task).or_default().add(&a, dt);
        let Some(up) = self
            .caps
            .monitoring
            .get()
            .map(|m| f64::from(m.upscaling_factor))
        else {
            return;
        };
        if let Some(c) = self
            .counters
            .get_mut(&domain)
            .and_then(|v| v.get_mut(rmid as usize))
        {
            c.total.add(a.traffic_bytes_per_s * dt / up);
            c.local.add(a.local_bytes_per_s * dt / up);
        }
    }

    /// The LLC occupancy of `rmid` in L3 domain `domain` as IA32_QM_CTR reports it, converted
    /// to bytes (counts × upscaling factor); 0 without monitoring or for an unknown domain.
    #[must_use]
    pub fn llc_occupancy_bytes(&self, domain: CacheDomain, rmid: Rmid) -> u64 {
        let Some(m) = self.caps.monitoring.get() else {
            return 0;
        };
        self.occupancy_counts(domain, rmid.get()) * u64::from(m.upscaling_factor)
    }

    /// Test hook: the next `reads` reads of IA32_QM_CTR for (`domain`, `rmid`), any event,
    /// return the Unavailable bit (62) and no data, as hardware does for an RMID it has no
    /// data for yet. The model never sets Unavailable on its own.
    pub fn inject_unavailable(&mut self, domain: CacheDomain, rmid: Rmid, reads: u32) {
        if reads == 0 {
            self.unavailable.remove(&(domain, rmid.get()));
        } else {
            self.unavailable.insert((domain, rmid.get()), reads);
        }
    }

    /// Power-on reset of every register (table in the type docs). The clock, the MBM and
    /// PMU counters and the scenario are kept.
    pub fn reset(&mut self) {
        self.regs = self.reset_registers();
        if let Some(m) = self.mmio.as_deref_mut() {
            m.reset_registers();
        }
        self.uncore = self.reset_uncore();
        self.recompute();
    }

    /// MSR accesses so far through [`MsrIo`] (failed ones included): (reads, writes).
    #[must_use]
    pub const fn msr_accesses(&self) -> (u64, u64) {
        (self.msr_reads, self.msr_writes)
    }

    /// Advances the virtual clock by `dt`: every CPU's MBM traffic, instructions, cycles and
    /// LLC misses grow at their steady-state rates ([`crate::model`]) for `dt`. Where the
    /// scenario changes a workload inside `dt` (a start, a phase, a stop: [`Scenario`]), the
    /// interval is cut there and the steady state recomputed, so each piece grows at the
    /// rates of its own workloads (a change at the end of `dt` is in force when `advance`
    /// returns). The clock saturates at [`Duration::MAX`].
    pub fn advance(&mut self, dt: Duration) {
        let end = self.now.saturating_add(dt);
        // the scenario's times count from its installation
        while let Some(next) = self
            .scenario
            .next_change_after(self.now.saturating_sub(self.epoch))
            .map(|t| t.saturating_add(self.epoch))
            .filter(|next| *next <= end)
        {
            self.integrate(next.saturating_sub(self.now));
            self.now = next;
            self.recompute();
        }
        self.integrate(end.saturating_sub(self.now));
        self.now = end;
    }

    /// Grows every counter by `dt` of the current steady state (the clock is not moved).
    fn integrate(&mut self, dt: Duration) {
        let s = dt.as_secs_f64();
        crate::metrics::add_ops(self, s);
        let upscale = self
            .caps
            .monitoring
            .get()
            .map(|m| f64::from(m.upscaling_factor));
        for (i, place) in self.topology.cpus().iter().enumerate() {
            let a = self.activity[i];
            self.pmu[i].add(&a, s);
            let (Some(up), Some(d)) = (upscale, place.l3) else {
                continue;
            };
            let rmid = self.phys_rmid(i) as usize;
            if let Some(c) = self.counters.get_mut(&d).and_then(|v| v.get_mut(rmid)) {
                c.total.add(a.traffic_bytes_per_s * s / up);
                c.local.add(a.local_bytes_per_s * s / up);
            }
        }
        if let Some(up) = upscale {
            for (domain, rmid, t) in self.io_loads() {
                if let Some(c) = self
                    .counters
                    .get_mut(&domain)
                    .and_then(|v| v.get_mut(rmid as usize))
                {
                    c.total.add(t.bytes_per_s * s / up);
                    c.local.add(t.bytes_per_s * s / up);
                }
            }
        }
        if self.mmio.is_some() {
            // region-aware MBM: the RMID and class as tagged (IA32_PQR_ASSOC)
            for (i, place) in self.topology.cpus().iter().enumerate() {
                let Some(l3) = place.l3 else { continue };
                let Some((split, _)) = self.region_traffic_of(i) else {
                    continue;
                };
                let rmid = rdt_msr::regs::pqr_rmid(self.regs.cpus[i].pqr_assoc);
                let traffic = self.activity[i].traffic_bytes_per_s;
                if let Some(m) = self.mmio.as_deref_mut() {
                    m.accumulate(l3, rmid, split, traffic, s);
                }
            }
        }
        for (&package, chas) in &mut self.uncore {
            let rates = crate::uncore::PcieRates::of(
                self.topology
                    .cpus()
                    .iter()
                    .zip(&self.activity)
                    .filter(|(p, _)| p.package == package)
                    .map(|(_, a)| (a.traffic_bytes_per_s, a.miss_fraction)),
            );
            #[allow(clippy::cast_precision_loss)] // a few dozen CHAs
            let share = 1.0 / chas.len() as f64;
            for c in chas {
                c.advance(&rates, share, s);
            }
        }
    }

    /// Power-on uncore CHA monitors ([`crate::uncore`]): one per core of each package where
    /// the capabilities have the uncore PCIe events (CPU model 0x55), none elsewhere.
    fn reset_uncore(&self) -> BTreeMap<u32, Vec<crate::uncore::ChaBox>> {
        if !self.caps.uncore_pcie {
            return BTreeMap::new();
        }
        self.topology
            .packages()
            .into_iter()
            .map(|pkg| {
                let mut cores: Vec<Option<u32>> = self
                    .topology
                    .cpus()
                    .iter()
                    .filter(|c| c.package == pkg)
                    .map(|c| c.core)
                    .collect();
                cores.sort_unstable();
                cores.dedup();
                (pkg, vec![crate::uncore::ChaBox::default(); cores.len()])
            })
            .collect()
    }

    /// WRMSR of CHA `n`'s register `r` in `package`; `false` = #GP.
    fn write_cha(&mut self, package: u32, n: usize, r: crate::uncore::ChaReg, v: u64) -> bool {
        self.uncore
            .get_mut(&package)
            .and_then(|c| c.get_mut(n))
            .is_some_and(|c| c.write(r, v))
    }

    /// Number of uncore CHAs of `package` (0 where the model has no CHA monitors).
    #[must_use]
    pub fn uncore_chas(&self, package: u32) -> usize {
        self.uncore.get(&package).map_or(0, Vec::len)
    }

    fn index(&self, cpu: LogicalCpu) -> Option<usize> {
        self.topology
            .cpus()
            .binary_search_by_key(&cpu, |c| c.cpu)
            .ok()
    }

    /// The RMID the L3 counts CPU `i`'s traffic and occupancy under: IA32_PQR_ASSOC's RMID,
    /// plus, with Sub-NUMA Clustering, `(node mod SNC nodes) × (RMIDs / SNC nodes)`: the
    /// hardware's RMID sharing mode splits the RMIDs between the nodes of an L3, the kernel's
    /// `logical_rmid_to_physical_rmid` (arch/x86/kernel/cpu/resctrl/monitor.c).
    fn phys_rmid(&self, i: usize) -> u32 {
        let r = rdt_msr::regs::pqr_rmid(self.regs.cpus[i].pqr_assoc);
        // legacy mode (MSR_RMID_SNC_CONFIG bit 0, [`crate::sysregs`]): the RMID as tagged
        if self.snc <= 1 || self.rmid_snc_config_of(i) & 1 == 1 {
            return r;
        }
        let per_node = self.caps.monitoring.get().map_or(0, |m| m.num_rmids) / self.snc;
        r + (self.topology.cpus()[i].node % self.snc) * per_node
    }

    /// Sub-NUMA Clustering nodes per L3 cache (1 without SNC): the kernel's
    /// `snc_nodes_per_l3_cache`. With SNC, the NUMA node of a CPU is
    /// `package × SNC + (its core in the package's lower or upper half...)`, and resctrl
    /// monitors per node (`mon_sub_L3_YY`).
    #[must_use]
    pub const fn snc_nodes(&self) -> u32 {
        self.snc
    }

    /// Turns Sub-NUMA Clustering on with `n` nodes per package: the cores of each package,
    /// by core id, are split into `n` equal runs, node `package × n + run` (a thread goes
    /// with its core).
    pub(crate) fn enable_snc(&mut self, n: u32) {
        let n = n.max(1);
        let mut cpus = self.topology.cpus().to_vec();
        for pkg in self.topology.packages() {
            let mut cores: Vec<u32> = cpus
                .iter()
                .filter(|c| c.package == pkg)
                .filter_map(|c| c.core)
                .collect();
            cores.sort_unstable();
            cores.dedup();
            let per = u32::try_from(cores.len())
                .unwrap_or(u32::MAX)
                .div_ceil(n)
                .max(1);
            for c in cpus.iter_mut().filter(|c| c.package == pkg) {
                let rank = c
                    .core
                    .and_then(|k| cores.iter().position(|&x| x == k))
                    .map_or(0, |r| u32::try_from(r).unwrap_or(0));
                c.node = pkg * n + rank / per;
            }
        }
        self.topology = Topology::from_placements(cpus);
        self.snc = n;
    }

    /// Occupancy of (domain, rmid) in upscaling-factor counts, rounded down.
    fn occupancy_counts(&self, domain: CacheDomain, rmid: u32) -> u64 {
        let Some(m) = self.caps.monitoring.get() else {
            return 0;
        };
        let bytes: f64 = self
            .topology
            .cpus()
            .iter()
            .enumerate()
            .zip(&self.activity)
            .filter(|((i, p), _)| p.l3 == Some(domain) && self.phys_rmid(*i) == rmid)
            .map(|(_, a)| a.occupancy_bytes)
            .sum::<f64>()
            + self
                .host_loads
                .values()
                .filter(|l| l.domain == domain && l.rmid == rmid)
                .map(|l| l.occupancy_bytes)
                .sum::<f64>()
            + self
                .io_loads()
                .into_iter()
                .filter(|(d, r, _)| *d == domain && *r == rmid)
                .map(|(_, _, t)| t.llc_bytes)
                .sum::<f64>();
        f64_floor_u64(bytes / f64::from(m.upscaling_factor))
    }

    /// The L3 portion mask the workload model uses for CPU `i` (module docs of `model`).
    fn l3_fill_mask(&self, i: usize, domain: CacheDomain) -> u64 {
        let cos = rdt_msr::regs::pqr_cos(self.regs.cpus[i].pqr_assoc);
        self.cos_fill_mask(domain, cos)
    }

    /// The L3 portion mask of class `cos` in `domain` (as [`SimPlatform::l3_fill_mask`]).
    fn cos_fill_mask(&self, domain: CacheDomain, cos: u32) -> u64 {
        let full = if self.portions >= 64 {
            u64::MAX
        } else {
            (1u64 << self.portions) - 1
        };
        let Some(regs) = self.regs.l3.get(&domain) else {
            return full;
        };
        let cos = cos as usize;
        let idx = if regs.cdp_on() { cos * 2 } else { cos };
        regs.masks.get(idx).copied().unwrap_or(full) & full
    }

    /// CPU `i`'s MBA throttle. Intel MBA applied per core (CPUID.(10H,3):ECX\[0\] clear)
    /// throttles both threads of a core by the larger of their delays, or the smaller where
    /// MBA_CFG bit 0 is set ([`crate::sysregs`]).
    fn throttle(&self, i: usize, domain: CacheDomain) -> Throttle {
        let cos = rdt_msr::regs::pqr_cos(self.regs.cpus[i].pqr_assoc);
        let own = self.cos_throttle(cos, domain);
        let per_core = self.caps.mba.get().is_some_and(|m| {
            matches!(
                m.kind,
                MbaKind::IntelDelay {
                    per_thread: false,
                    ..
                }
            )
        });
        let cpus = self.topology.cpus();
        let me = cpus[i];
        if !per_core || me.core.is_none() {
            return own;
        }
        let min = self.mba_cfg_of(i) & crate::sysregs::MBA_CFG_MIN != 0;
        let scale = |t: Throttle| match t {
            Throttle::Scale(f) => f,
            _ => 1.0,
        };
        let mut f = scale(own);
        for (j, p) in cpus.iter().enumerate() {
            if j != i && p.package == me.package && p.core == me.core {
                let c = rdt_msr::regs::pqr_cos(self.regs.cpus[j].pqr_assoc);
                let g = scale(self.cos_throttle(c, domain));
                // a larger delay is a smaller scale
                f = if min { f.max(g) } else { f.min(g) };
            }
        }
        if (f - scale(own)).abs() < f64::EPSILON {
            own
        } else {
            Throttle::Scale(f)
        }
    }

    /// The MBA throttle of class `cos` in `domain`.
    fn cos_throttle(&self, cos: u32, domain: CacheDomain) -> Throttle {
        let cos = cos as usize;
        let (Some(m), Some(vals)) = (self.caps.mba.get(), self.regs.mba.get(&domain)) else {
            return Throttle::None;
        };
        let Some(&v) = vals.get(cos) else {
            return Throttle::None;
        };
        match m.kind {
            MbaKind::IntelDelay { .. } => {
                Throttle::Scale(f64::from(rdt_core::intel_mba_percent(v)) / 100.0)
            }
            MbaKind::AmdBandwidth { width } => {
                if v >= 1u64 << width {
                    Throttle::None
                } else {
                    Throttle::Cap(u64_to_f64(v) * AMD_UNIT_BYTES_PER_S)
                }
            }
        }
    }

    /// AMD MBA limits the *total* L3 external bandwidth of all threads running with a COS
    /// within the L3 QOS domain (AMD APM Vol. 2, pub. 24593, §19.4.5.2 "Using L3BE"), not
    /// each thread's: every CPU's [`Throttle::Cap`] (its class's limit in its domain) becomes
    /// its share of that limit, `cap · T_w,c / Σ T_w` over the CPUs of the same (L3 domain,
    /// COS) with a cap, `T_w` the wanted traffic at the current occupancy
    /// ([`model::wanted_traffic`]). So a class under its limit in total is not throttled, and
    /// one over it moves exactly the limit (before memory latency), its CPUs slowed alike
    /// (`θ = cap / Σ T_w`; the APM does not say how a class's threads share the limit: the
    /// proportional split is this model's choice). Other throttles pass unchanged.
    fn share_amd_limits(
        &self,
        workloads: &[&crate::Workload],
        occupancy: &[f64],
        mut throttles: Vec<Throttle>,
    ) -> Vec<Throttle> {
        let cpus = self.topology.cpus();
        let key = |i: usize| {
            cpus[i]
                .l3
                .map(|d| (d, rdt_msr::regs::pqr_cos(self.regs.cpus[i].pqr_assoc)))
        };
        let wanted: Vec<f64> = (0..cpus.len())
            .map(|i| model::wanted_traffic(workloads[i], occupancy[i]))
            .collect();
        let mut total: BTreeMap<(CacheDomain, u32), f64> = BTreeMap::new();
        for (i, t) in throttles.iter().enumerate() {
            if let (Throttle::Cap(_), Some(k)) = (t, key(i)) {
                *total.entry(k).or_default() += wanted[i];
            }
        }
        for (i, t) in throttles.iter_mut().enumerate() {
            if let (Throttle::Cap(c), Some(sum)) = (*t, key(i).and_then(|k| total.get(&k)))
                && *sum > 0.0
            {
                *t = Throttle::Cap(c * wanted[i] / sum);
            }
        }
        throttles
    }

    /// Recomputes the steady state after a register or scenario change, or at a scenario
    /// change of workload: occupancy by water-filling, each CPU's unloaded activity, then
    /// the memory domains' contention ([`model::solve_memory`]).
    pub(crate) fn recompute(&mut self) {
        let now = self.now.saturating_sub(self.epoch);
        let cpus = self.topology.cpus();
        let workloads: Vec<&crate::Workload> = cpus
            .iter()
            .map(|p| self.scenario.workload_at(p.cpu, now))
            .collect();
        let mut occupancy = vec![0.0; cpus.len()];
        for d in self.topology.l3_domains() {
            let members: Vec<usize> = (0..cpus.len()).filter(|&i| cpus[i].l3 == Some(d)).collect();
            let claims: Vec<Claim> = members
                .iter()
                .map(|&i| {
                    let w = workloads[i];
                    Claim {
                        working_set: w.working_set_bytes,
                        pressure: w.traffic_bytes_per_s * w.utilization,
                        mask: self.l3_fill_mask(i, d),
                    }
                })
                .collect();
            let occ = model::water_fill(self.portion_bytes, self.portions, &claims);
            for (&i, o) in members.iter().zip(occ) {
                occupancy[i] = o;
            }
        }
        let throttles: Vec<Throttle> = cpus
            .iter()
            .enumerate()
            .map(|(i, p)| p.l3.map_or(Throttle::None, |d| self.throttle(i, d)))
            .collect();
        let throttles = self.share_amd_limits(&workloads, &occupancy, throttles);
        let unloaded: Vec<model::Unloaded> = (0..cpus.len())
            .map(|i| {
                // region-aware MBA (RDT 1.3) scales what the class's MBA lets through
                let th = self
                    .region_traffic_of(i)
                    .map_or(throttles[i], |(_, scale)| throttles[i].scaled(scale));
                model::unloaded(workloads[i], occupancy[i], th, self.freq_hz)
            })
            .collect();
        let (activity, memory) = crate::metrics::contend(self, &workloads, unloaded);
        let cpu_metric = crate::metrics::cpu_metrics(self, now);
        self.activity = activity;
        self.memory = memory;
        self.cpu_metric = cpu_metric;
    }

    fn decode(&self, addr: MsrAddr) -> Option<Reg> {
        let a = addr.get();
        let c = &self.caps;
        let in_range = |base: MsrAddr, n: u32| {
            a.checked_sub(base.get())
                .filter(|off| *off < n)
                .map(|off| off as usize)
        };
        if addr == IA32_PQR_ASSOC && (c.monitoring.get().is_some() || self.any_alloc()) {
            return Some(Reg::PqrAssoc);
        }
        if c.monitoring.get().is_some() {
            if addr == IA32_QM_EVTSEL {
                return Some(Reg::EvtSel);
            }
            if addr == IA32_QM_CTR {
                return Some(Reg::QmCtr);
            }
        }
        if let Some(cat) = c.l3_cat.get() {
            if addr == IA32_L3_QOS_CFG && cat.cdp_supported {
                return Some(Reg::L3Cfg);
            }
            if let Some(n) = in_range(IA32_L3_QOS_MASK_0, cat.num_classes) {
                return Some(Reg::L3Mask(n));
            }
        }
        if let Some(cat) = c.l2_cat.get() {
            if addr == IA32_L2_QOS_CFG && cat.cdp_supported {
                return Some(Reg::L2Cfg);
            }
            if let Some(n) = in_range(IA32_L2_QOS_MASK_0, cat.num_classes) {
                return Some(Reg::L2Mask(n));
            }
        }
        if let Some(m) = c.mba.get() {
            let base = match m.kind {
                MbaKind::IntelDelay { .. } => IA32_MBA_THRTL_0,
                MbaKind::AmdBandwidth { .. } => AMD_MBA_BW_0,
            };
            if let Some(n) = in_range(base, m.num_classes) {
                return Some(Reg::Mba(n));
            }
        }
        c.smba
            .get()
            .and_then(|m| in_range(AMD_SMBA_BW_0, m.num_classes))
            .map(Reg::Smba)
            .or_else(|| self.decode_amd_qos(a).map(Reg::Amd))
            .or_else(|| self.decode_sys(a).map(Reg::Sys))
            .or_else(|| {
                // every package has as many CHAs: the first one's count decodes
                let chas = self.uncore.values().next().map_or(0, Vec::len);
                crate::uncore::decode(a, chas).map(|(n, r)| Reg::Cha(n, r))
            })
    }

    fn any_alloc(&self) -> bool {
        let c = &self.caps;
        c.l3_cat.get().is_some() || c.l2_cat.get().is_some() || c.mba.get().is_some()
    }

    /// Classes CPU `i` may be associated with (type docs).
    fn class_limit(&self, i: usize) -> u32 {
        let p = &self.topology.cpus()[i];
        let usable = |cat: Option<&CatCaps>, regs: Option<&CatRegs>| {
            cat.map_or(0, |c| {
                if regs.is_some_and(CatRegs::cdp_on) {
                    c.num_classes / 2
                } else {
                    c.num_classes
                }
            })
        };
        let l3 = usable(
            self.caps.l3_cat.get(),
            p.l3.and_then(|d| self.regs.l3.get(&d)),
        );
        let l2 = usable(self.caps.l2_cat.get(), self.regs.l2.get(&p.l2));
        let mba = self.caps.mba.get().map_or(0, |m| m.num_classes);
        let smba = self.caps.smba.get().map_or(0, |m| m.num_classes);
        l3.max(l2).max(mba).max(smba).max(1)
    }

    fn read_reg(&mut self, i: usize, reg: Reg) -> Option<u64> {
        let p = self.topology.cpus()[i];
        Some(match reg {
            Reg::PqrAssoc => self.regs.cpus[i].pqr_assoc,
            Reg::EvtSel => self.regs.cpus[i].evtsel,
            Reg::QmCtr => self.read_qm_ctr(i),
            Reg::L3Cfg => self.regs.l3.get(&p.l3?)?.cfg,
            Reg::L2Cfg => self.regs.l2.get(&p.l2)?.cfg,
            Reg::L3Mask(n) => *self.regs.l3.get(&p.l3?)?.masks.get(n)?,
            Reg::L2Mask(n) => *self.regs.l2.get(&p.l2)?.masks.get(n)?,
            Reg::Mba(n) => *self.regs.mba.get(&p.l3?)?.get(n)?,
            Reg::Smba(n) => *self.regs.smba.get(&p.l3?)?.get(n)?,
            Reg::Amd(r) => self.read_amd_qos(i, r)?,
            Reg::Sys(r) => self.read_sys(i, r)?,
            Reg::Cha(n, r) => self.uncore.get(&p.package)?.get(n)?.read(r),
        })
    }

    fn read_qm_ctr(&mut self, i: usize) -> u64 {
        let Some(m) = self.caps.monitoring.get() else {
            return QM_CTR_ERROR;
        };
        let sel = self.regs.cpus[i].evtsel;
        let wrap = if m.counter_width >= 62 {
            rdt_msr::regs::QM_CTR_DATA
        } else {
            (1u64 << m.counter_width) - 1
        };
        if sel & rdt_msr::regs::QM_EVTSEL_EXTENDED != 0 {
            let Some(domain) = self.topology.cpus()[i].l3 else {
                return QM_CTR_ERROR;
            };
            let v = self.read_abmc_ctr(domain, sel);
            return if v & (QM_CTR_ERROR | QM_CTR_UNAVAILABLE) == 0 {
                v & wrap
            } else {
                v
            };
        }
        let event = sel & 0xff;
        let rmid = sel >> 32;
        let supported = match event {
            1 => m.events.llc_occupancy,
            2 => m.events.mbm_total,
            3 => m.events.mbm_local,
            _ => false,
        };
        let Some(domain) = self.topology.cpus()[i].l3 else {
            return QM_CTR_ERROR;
        };
        if !supported || rmid >= u64::from(m.num_rmids) {
            return QM_CTR_ERROR;
        }
        let rmid = u32::try_from(rmid).unwrap_or(u32::MAX);
        if let Some(left) = self.unavailable.get_mut(&(domain, rmid)) {
            *left -= 1;
            if *left == 0 {
                self.unavailable.remove(&(domain, rmid));
            }
            return QM_CTR_UNAVAILABLE;
        }
        if event == 1 {
            return self
                .occupancy_counts(domain, rmid)
                .min(rdt_msr::regs::QM_CTR_DATA);
        }
        match self.legacy_mbm_count(domain, rmid, event) {
            Ok(counts) => self.mbm_hw_count(rmid, counts) & wrap,
            Err(flags) => flags,
        }
    }

    /// What the hardware's MBM counter of `rmid` shows for `counts` of traffic, before the
    /// wrap: the counts, or on a part with the MBM erratum and an RMID above its threshold
    /// the counts × 2^20 / the kernel's correction factor (`mbm_cf_table`), which the
    /// kernel's `get_corrected_mbm_count` brings back.
    #[must_use]
    pub(crate) fn mbm_hw_count(&self, rmid: u32, counts: u64) -> u64 {
        rdt_core::mbm::MbmCorrection::of(&self.caps)
            .and_then(|c| c.factor_for(rmid))
            .map_or(counts, |f| {
                u64::try_from((u128::from(counts) << 20) / u128::from(f)).unwrap_or(u64::MAX)
            })
    }

    /// IA32_QM_EVTSEL of the CPU at topology index `i`: bits 31:8 reserved, but bit 31 (AMD
    /// ExtendedEvtID) where ABMC counters can be read ([`crate::amdqos`]); `false` = #GP.
    fn write_evtsel(&mut self, i: usize, v: u64) -> bool {
        let ext = if self.caps.amd_mbm.abmc_counters.is_some() {
            rdt_msr::regs::QM_EVTSEL_EXTENDED
        } else {
            0
        };
        if v & 0xffff_ff00 & !ext != 0 {
            return false;
        }
        self.regs.cpus[i].evtsel = v;
        true
    }

    /// Validates and performs a write; `false` = #GP.
    #[allow(clippy::many_single_char_names)] // i = CPU index, v = value, p/m/n as in read_reg
    fn write_reg(&mut self, i: usize, reg: Reg, v: u64) -> bool {
        let p = self.topology.cpus()[i];
        match reg {
            Reg::PqrAssoc => {
                let rmid_mask = (1u64 << self.rmid_bits) - 1;
                let num_rmids = self.caps.monitoring.get().map_or(1, |m| m.num_rmids);
                let reserved = v & 0xffff_ffff & !rmid_mask != 0;
                if reserved
                    || v & rmid_mask >= u64::from(num_rmids)
                    || rdt_msr::regs::pqr_cos(v) >= self.class_limit(i)
                {
                    return false;
                }
                let cos_changed = rdt_msr::regs::pqr_cos(v)
                    != rdt_msr::regs::pqr_cos(self.regs.cpus[i].pqr_assoc);
                self.regs.cpus[i].pqr_assoc = v;
                if cos_changed {
                    self.recompute();
                }
                true
            }
            Reg::EvtSel => self.write_evtsel(i, v),
            Reg::QmCtr => false,
            Reg::Amd(r) => self.write_amd_qos(i, r, v),
            Reg::Sys(r) => self.write_sys(i, r, v),
            Reg::Cha(n, r) => self.write_cha(p.package, n, r, v),
            Reg::L3Cfg | Reg::L2Cfg => {
                if v & !1 != 0 {
                    return false;
                }
                let regs = if reg == Reg::L3Cfg {
                    p.l3.and_then(|d| self.regs.l3.get_mut(&d))
                } else {
                    self.regs.l2.get_mut(&p.l2)
                };
                let Some(r) = regs else { return false };
                // The steady state depends only on the registers: an unchanged value (as
                // resctrl's unmount writes every default) needs no recomputation.
                let changed = r.cfg != v;
                r.cfg = v;
                if changed {
                    self.recompute();
                }
                true
            }
            Reg::L3Mask(n) | Reg::L2Mask(n) => {
                let (cat, regs) = if let Reg::L3Mask(_) = reg {
                    (
                        self.caps.l3_cat.get(),
                        p.l3.and_then(|d| self.regs.l3.get_mut(&d)),
                    )
                } else {
                    (self.caps.l2_cat.get(), self.regs.l2.get_mut(&p.l2))
                };
                let (Some(cat), Some(regs)) = (cat, regs) else {
                    return false;
                };
                if !mask_accepted(cat, v) {
                    return false;
                }
                let changed = regs.masks[n] != v;
                regs.masks[n] = v;
                if changed {
                    self.recompute();
                }
                true
            }
            Reg::Mba(n) | Reg::Smba(n) => {
                let caps = if let Reg::Mba(_) = reg {
                    self.caps.mba.get()
                } else {
                    self.caps.smba.get()
                };
                let Some(m) = caps else { return false };
                let max = match m.kind {
                    MbaKind::IntelDelay { max_delay, .. } => u64::from(max_delay),
                    MbaKind::AmdBandwidth { width } => 1u64 << width,
                };
                let table = if let Reg::Mba(_) = reg {
                    &mut self.regs.mba
                } else {
                    &mut self.regs.smba
                };
                let Some(vals) = p.l3.and_then(|d| table.get_mut(&d)) else {
                    return false;
                };
                if v > max {
                    return false;
                }
                let changed = vals[n] != v;
                vals[n] = v;
                if changed {
                    self.recompute();
                }
                true
            }
        }
    }
}

/// Whether a CBM write is accepted (type docs).
pub(crate) fn mask_accepted(cat: &CatCaps, v: u64) -> bool {
    let full = cat.full_mask().bits();
    if v == 0 {
        // An empty mask #GPs on Intel; AMD accepts it (min_cbm_bits 0).
        return cat.min_cbm_bits == 0;
    }
    if v & !full != 0 {
        return false;
    }
    let Ok(mask) = CacheBitmask::new(v) else {
        return false;
    };
    (mask.is_contiguous() || cat.non_contiguous_cbm) && mask.ways() >= cat.min_cbm_bits
}

const fn mba_reset(kind: MbaKind) -> u64 {
    match kind {
        MbaKind::IntelDelay { .. } => 0,
        MbaKind::AmdBandwidth { width } => 1u64 << width,
    }
}

/// The base frequency in Hz: CPUID.16H:EAX (MHz) if recorded and non-zero, else the brand
/// string's `@ x.yzGHz`, else 2 GHz (with a note).
fn base_frequency(cpuid: &SimCpuid, brand: Option<&str>) -> (f64, Option<String>) {
    use rdt_core::CpuidSource;
    let max_leaf = cpuid.cpuid(0, 0).map_or(0, |r| r.eax);
    if let Some(r) = cpuid
        .cpuid(0x16, 0)
        .filter(|r| max_leaf >= 0x16 && r.eax & 0xffff != 0)
    {
        return (f64::from(r.eax & 0xffff) * 1e6, None); // CPUID.16H:EAX[15:0]: base MHz
    }
    if let Some(ghz) = brand.and_then(|b| b.rsplit_once('@')).and_then(|(_, f)| {
        f.trim()
            .strip_suffix("GHz")
            .and_then(|x| x.trim().parse::<f64>().ok())
    }) {
        return (ghz * 1e9, None);
    }
    (
        2.0e9,
        Some("no base frequency in CPUID leaf 16H or the brand string: assumed 2 GHz".into()),
    )
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(EIO)
}

impl MsrIo for SimPlatform {
    /// RDMSR as the `msr` driver reports it: EIO ([`MsrError::Read`]) for a register the
    /// model does not implement; [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu) for a CPU it does not have.
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
        self.msr_reads += 1;
        let i = self
            .index(cpu)
            .ok_or(rdt_core::RequestError::NoSuchCpu(cpu))?;
        self.decode(addr)
            .and_then(|reg| self.read_reg(i, reg))
            .ok_or_else(|| MsrError::Read {
                cpu,
                addr,
                source: eio(),
            })
    }

    /// WRMSR as the `msr` driver reports it: EIO ([`MsrError::Write`]) where the CPU would
    /// raise #GP (type docs); [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu) for a CPU it does not have.
    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError> {
        self.msr_writes += 1;
        let i = self
            .index(cpu)
            .ok_or(rdt_core::RequestError::NoSuchCpu(cpu))?;
        match self.decode(addr) {
            Some(reg) if self.write_reg(i, reg, value) => Ok(()),
            _ => Err(MsrError::Write {
                cpu,
                addr,
                value,
                source: eio(),
            }),
        }
    }
}

impl PmuSource for SimPlatform {
    /// Cumulative instructions, unhalted cycles, LLC misses and references of `cpu` from the workload
    /// model; `None` for a CPU the platform does not have.
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        self.pmu_counts(cpu)
    }

    /// A host task's counts from the model ([`SimPlatform::task_pmu_counts`]); `None` for a
    /// task that resctrl has not placed in a group.
    fn read_task(&mut self, task: rdt_core::TaskId) -> Option<PmuCounts> {
        self.task_pmu_counts(task.get())
    }
}

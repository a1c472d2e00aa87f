//! [`MsrBackend`]: the [`Backend`] trait implemented with RDMSR/WRMSR.

use std::collections::BTreeMap;
use std::fmt;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdt_core::mbm::MbmCorrection;
use rdt_core::monitor::CounterFormat;
use rdt_core::{
    AllocReset, Backend, BackendExt, CacheBitmask, CacheDomain, Capabilities, CatCaps, CatClass,
    CatMask, CatResource, ClassId, CpuSet, FeatureSetting, GroupStartError, Interface, LimitError,
    LogicalCpu, MbaClass, MbaKind, MbaLimit, MbaResource, MonAccumulator, MonEvents, MonGroupId,
    MonValues, MsrOps, NamedClasses, NoPmu, PmuSource, Reclaimed, RequestError, Reset, Rmid,
    RmidEvent, ThreadThrottle, Topology, Writers, intel_mba_delay, intel_mba_percent,
    start_one_by_one,
};

use crate::claims::{self, Claims};
use crate::regs::{
    self, AMD_MBA_BW_0, AMD_SMBA_BW_0, IA32_L2_QOS_CFG, IA32_L2_QOS_MASK_0, IA32_L3_QOS_CFG,
    IA32_L3_QOS_MASK_0, IA32_MBA_THRTL_0, IA32_PQR_ASSOC, IA32_QM_CTR, IA32_QM_EVTSEL,
};
use crate::uncore::{self, UncoreGroup};
use crate::{MsrAddr, MsrError, MsrIo};
use rdt_host::runfile::{DEFAULT_LOCK_TIMEOUT, LockWaitError, NameRecord, RunDirPath, WriterLock};

/// Reads of IA32_QM_CTR per event per poll before the value is reported as unavailable
/// (pqos `hw_mon_read`: at most 4 attempts).
pub const QM_CTR_ATTEMPTS: u32 = 4;

/// One cache instance and its online CPUs.
#[derive(Clone, Debug)]
struct Domain {
    id: CacheDomain,
    /// The lowest CPU of the domain: domain-scoped registers (masks, MBA, QOS_CFG) are
    /// written here, once per domain.
    cpu: LogicalCpu,
    /// Every CPU of the domain, ascending (scanned for RMIDs in use).
    cpus: Vec<LogicalCpu>,
}

fn domains(ids: Vec<CacheDomain>, cpus_of: impl Fn(CacheDomain) -> CpuSet) -> Vec<Domain> {
    ids.into_iter()
        .filter_map(|id| {
            let cpus: Vec<LogicalCpu> = cpus_of(id).iter().collect();
            Some(Domain {
                id,
                cpu: *cpus.first()?,
                cpus,
            })
        })
        .collect()
}

/// The IA32_QM_EVTSEL event id of an RMID event (SDM Vol. 3B, 18.18.5: 1 occupancy,
/// 2 total, 3 local).
const fn evtsel_id(event: RmidEvent) -> u64 {
    match event {
        RmidEvent::LlcOccupancy => regs::EVT_LLC_OCCUPANCY,
        RmidEvent::MbmLocal => regs::EVT_MBM_LOCAL,
        RmidEvent::MbmTotal => regs::EVT_MBM_TOTAL,
    }
}

/// One RMID of a group in one L3 domain (pqos's poll context).
#[derive(Clone, Debug)]
struct Context {
    domain: CacheDomain,
    rmid: u32,
    /// The CPU IA32_QM_EVTSEL/IA32_QM_CTR are accessed on: the group's lowest CPU in the domain.
    cpu: LogicalCpu,
}

/// A started monitoring group with everything a poll needs precomputed.
#[derive(Clone, Debug)]
struct Group {
    id: MonGroupId,
    cpus: Vec<LogicalCpu>,
    /// RMID events read per context, in [`RmidEvent::ALL`]'s order.
    rmid_events: Vec<RmidEvent>,
    /// One per L3 domain spanned, ascending; the accumulator's contexts in the same order,
    /// `nodes` each (context `i`'s node `k` is accumulator context `i × nodes + k`).
    contexts: Vec<Context>,
    /// Sub-NUMA Clustering: the nodes per L3 whose counters a context sums (1 without SNC),
    /// node `k` counting the context's RMID `r` as `r + k × stride`.
    nodes: u32,
    stride: u32,
    acc: MonAccumulator,
}

/// Intel RDT / AMD PQoS programmed through model-specific registers: the pqos "MSR
/// interface".
///
/// Allocation domains are cache instances: L3 CAT and MBA registers are written on the
/// lowest CPU of each L3 domain ([`Topology::l3_domains`]), L2 CAT registers on the lowest
/// CPU of each L2 domain. Association and RMIDs are per CPU in IA32_PQR_ASSOC (0xC8F),
/// always changed by read-modify-write so that COS and RMID never clobber each other.
///
/// Every operation checks its arguments against the capabilities before the first write,
/// so a rejected call leaves the registers as they were.
///
/// Monitoring follows pqos: a CPU whose IA32_PQR_ASSOC RMID is not 0 is taken to be
/// monitored by someone else; a group gets one RMID per L3 domain it spans, the lowest one
/// not found in any IA32_PQR_ASSOC of that domain. A poll costs exactly one WRMSR
/// IA32_QM_EVTSEL and one RDMSR IA32_QM_CTR per hardware event per domain of a group
/// (retries only when the hardware sets the Error or Unavailable flag); starting a group
/// costs the same once per MBM event (the reading the first poll's deltas start from:
/// [`rdt_core::monitor`], "Start and first poll"). IPC and LLC misses come from the
/// [`PmuSource`] `P`.
///
/// # Examples
/// ```
/// use rdt_core::{Backend, BackendExt, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource, ClassId};
/// use rdt_core::{LogicalCpu, NoPmu};
/// use rdt_msr::MsrBackend;
/// # use std::collections::HashMap;
/// # use rdt_core::{Capabilities, CatCaps, CpuPlacement, Feature, PmuCaps, Topology, Vendor};
/// # use rdt_msr::{MsrAddr, MsrError, MsrIo};
/// # #[derive(Default)]
/// # struct Registers(HashMap<(LogicalCpu, MsrAddr), u64>);
/// # impl MsrIo for Registers {
/// #     fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
/// #         Ok(self.0.get(&(cpu, addr)).copied().unwrap_or(0))
/// #     }
/// #     fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, v: u64) -> Result<(), MsrError> {
/// #         self.0.insert((cpu, addr), v);
/// #         Ok(())
/// #     }
/// # }
/// # let cat = CatCaps { cbm_len: 11, shareable_bits: 0, num_classes: 16, cdp_supported: true,
/// #     cdp_enabled: false, non_contiguous_cbm: false, io_rdt: false, min_cbm_bits: 1 };
/// # let caps = Capabilities { vendor: Vendor::Intel, brand: None, signature: None,
/// #     monitoring: Feature::Unsupported, l3_cat: Feature::Supported(cat),
/// #     l2_cat: Feature::Unsupported, mba: Feature::Unsupported, smba: Feature::Unsupported,
/// #     l3_cache: None, l2_cache: None, pmu: PmuCaps::default(), uncore_pcie: false };
/// # let topology = Topology::from_placements((0..4).map(|c| CpuPlacement {
/// #     cpu: LogicalCpu::new(c), package: 0, core: Some(c), l2: CacheDomain::new(c),
/// #     l3: Some(CacheDomain::new(0)), node: 0 }).collect());
/// # let io = Registers::default();
/// // `io` is `DevCpuMsr::new()` in production (here an in-memory register map);
/// // `caps` and `topology` come from rdt-core's detection.
/// let mut rdt = MsrBackend::new(io, caps, topology, NoPmu)?;
/// rdt.reset_allocation(&Default::default())?; // pqos -R
///
/// // pqos -e "llc:1=0x7f0" -a "llc:1=2-3"
/// let mask = CatMask::Unified(CacheBitmask::new(0x7f0)?);
/// rdt.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[CatClass { class: ClassId::new(1), mask }])?;
/// rdt.associate(LogicalCpu::new(2), ClassId::new(1))?;
/// rdt.associate(LogicalCpu::new(3), ClassId::new(1))?;
///
/// let classes = rdt.cat_classes(CatResource::L3, CacheDomain::new(0))?;
/// assert_eq!(classes[1].mask, mask);
/// assert_eq!(classes[0].mask, CatMask::Unified(CacheBitmask::new(0x7ff)?));
/// assert_eq!(rdt.class_of(LogicalCpu::new(3))?, ClassId::new(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # References
/// Intel SDM Vol. 3B, 18.18 (monitoring), 18.19 (allocation); AMD64 PQoS Extensions
/// (pub. 56375); pqos(8) and intel-cmt-cat `lib/hw_monitoring.c`, `lib/allocation.c`.
pub struct MsrBackend<M: MsrIo, P: PmuSource = NoPmu> {
    io: M,
    caps: Capabilities,
    topology: Topology,
    pmu: P,
    l3: Vec<Domain>,
    l2: Vec<Domain>,
    /// Started groups, sorted by id (ids are handed out increasing).
    groups: Vec<Group>,
    /// Started uncore (socket) groups, sorted by id; ids come from the same counter.
    uncore: Vec<UncoreGroup>,
    next_group: u32,
    /// Where this process records the RMIDs it gives CPUs ([`MsrBackend::with_run_dir`]).
    claims: Option<Claims>,
    /// The run directory and the writers' lock in it ([`MsrBackend::with_run_dir`]).
    /// Dropped last of the two: the directory is removed when unused once the lock is closed
    /// ([`RunDirPath`]).
    run: Option<(WriterLock, RunDirPath)>,
    /// How long this process waits for the writers' lock ([`MsrBackend::set_lock_timeout`]):
    /// in all, across the holds that fail one after another (opening reclaims, then the
    /// command), so that the wait is the one timeout its error names.
    lock_timeout: Duration,
    /// How much of `lock_timeout` failed holds have used since the lock was last taken.
    lock_waited: Duration,
    /// Named classes ([`BackendExt::class_named`]): those recorded in the run directory
    /// (read by [`MsrBackend::with_run_dir`]) and those bound in this process.
    names: BTreeMap<ClassId, String>,
    /// The names claimed ([`BackendExt::claim_class`]): recorded in `<run dir>/msr-classes`.
    own: std::collections::BTreeSet<String>,
    /// Per CAT resource (L3, L2): the domains with CDP on, when CDP is on in some domains and
    /// off in others (a reset killed half-way); `None` when consistent.
    cdp_split: [Option<Vec<CacheDomain>>; 2],
    /// Sub-NUMA Clustering nodes per L3 domain whose RMIDs are split (1 without SNC, or in
    /// legacy mode): the most NUMA nodes among the CPUs of one L3 domain (the kernel's
    /// `snc_nodes_per_l3_cache`), unless MSR_RMID_SNC_CONFIG bit 0 says legacy mode.
    snc: u32,
}

impl<M: MsrIo, P: PmuSource> fmt::Debug for MsrBackend<M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MsrBackend")
            .field("caps", &self.caps)
            .field("topology", &self.topology)
            .field("l3", &self.l3)
            .field("l2", &self.l2)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

fn cat_name(resource: CatResource) -> &'static str {
    match resource {
        CatResource::L3 => "L3 CAT",
        CatResource::L2 => "L2 CAT",
    }
}

fn cat_mut(caps: &mut Capabilities, resource: CatResource) -> Option<&mut CatCaps> {
    match resource {
        CatResource::L3 => caps.l3_cat.get_mut(),
        CatResource::L2 => caps.l2_cat.get_mut(),
    }
}

/// The index of a CAT resource in per-resource arrays.
const fn cdp_index(resource: CatResource) -> usize {
    match resource {
        CatResource::L3 => 0,
        CatResource::L2 => 1,
    }
}

/// (first mask register, QOS_CFG register) of a CAT resource.
const fn cat_regs(resource: CatResource) -> (MsrAddr, MsrAddr) {
    match resource {
        CatResource::L3 => (IA32_L3_QOS_MASK_0, IA32_L3_QOS_CFG),
        CatResource::L2 => (IA32_L2_QOS_MASK_0, IA32_L2_QOS_CFG),
    }
}

/// Mask registers in use: every class's one register, or two per usable class with CDP on.
const fn mask_registers(cat: &CatCaps) -> u32 {
    if cat.cdp_enabled {
        cat.usable_classes() * 2
    } else {
        cat.num_classes
    }
}

/// The record of named classes in the run directory ([`BackendExt::class_named`]).
const NAMES_FILE: &str = "msr-classes";

/// `2^width` AMD bandwidth units: unlimited.
fn amd_unlimited(width: u32) -> u32 {
    1u32.checked_shl(width).unwrap_or(u32::MAX)
}

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// A backend over `io` for a platform with capabilities `caps` and online CPUs
    /// `topology`, with IPC and LLC misses from `pmu` ([`NoPmu`] if there is none).
    ///
    /// Reads the CDP enable bit (IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0) on the lowest CPU
    /// of every L3 / L2 domain where CPUID reports CDP, and records it in
    /// [`CatCaps::cdp_enabled`] (CPUID cannot see it).
    ///
    /// # Errors
    /// [`MsrError::Implausible`] when `caps` fail [`Capabilities::check_plausible`];
    /// [`MsrError::Inconsistent`] if CDP is on in some domains and off in others (reset
    /// with `-R l3cdp-on` or `-R l3cdp-off`); the read's error if a QOS_CFG read fails.
    pub fn new(io: M, caps: Capabilities, topology: Topology, pmu: P) -> Result<Self, MsrError> {
        caps.check_plausible().map_err(MsrError::Implausible)?;
        let l3 = domains(topology.l3_domains(), |d| topology.cpus_in_l3(d));
        let l2 = domains(topology.l2_domains(), |d| topology.cpus_in_l2(d));
        let snc = l3
            .iter()
            .map(|d| {
                let mut nodes: Vec<u32> = d
                    .cpus
                    .iter()
                    .filter_map(|c| topology.get(*c).map(|p| p.node))
                    .collect();
                nodes.sort_unstable();
                nodes.dedup();
                u32::try_from(nodes.len()).unwrap_or(1)
            })
            .max()
            .unwrap_or(1)
            .max(1);
        let mut this = Self {
            io,
            caps,
            topology,
            pmu,
            l3,
            l2,
            groups: Vec::new(),
            uncore: Vec::new(),
            next_group: 0,
            claims: None,
            run: None,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            lock_waited: Duration::ZERO,
            names: BTreeMap::new(),
            own: std::collections::BTreeSet::new(),
            cdp_split: [None, None],
            snc,
        };
        for resource in [CatResource::L3, CatResource::L2] {
            this.read_cdp(resource)?;
        }
        if this.snc > 1 {
            // RMID sharing mode unless the register says legacy (bit 0); a CPU without the
            // register (EIO) is taken to be in the mode Linux sets
            let cpu = this.l3.first().map(|d| d.cpu).unwrap_or_default();
            if this
                .io
                .read(cpu, regs::MSR_RMID_SNC_CONFIG)
                .is_ok_and(|v| v & 1 == 1)
            {
                this.snc = 1;
            }
        }
        Ok(this)
    }

    /// Reads the CDP enable bit of `resource` in every domain into the capabilities and
    /// the split state. CDP on in some domains and off in others (a reset killed half-way)
    /// still opens: reads follow each domain's layout, mask writes are refused, and a reset
    /// that sets CDP on or off everywhere repairs it.
    fn read_cdp(&mut self, resource: CatResource) -> Result<(), MsrError> {
        if !self.caps.cat(resource).is_some_and(|c| c.cdp_supported) {
            return Ok(());
        }
        let (_, cfg) = cat_regs(resource);
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let list = match resource {
            CatResource::L3 => &self.l3,
            CatResource::L2 => &self.l2,
        };
        for d in list {
            let v = self.io.read(d.cpu, cfg)?; // QOS_CFG bit 0: CDP enabled
            if v & regs::QOS_CFG_CDP_ENABLE != 0 {
                on.push(d.id);
            } else {
                off.push(d.id);
            }
        }
        let split = !on.is_empty() && !off.is_empty();
        if let Some(cat) = cat_mut(&mut self.caps, resource) {
            cat.cdp_enabled = !on.is_empty() && !split;
        }
        self.cdp_split[cdp_index(resource)] = split.then_some(on);
        Ok(())
    }

    /// The CDP inconsistency this backend was opened with, if any: a message naming the
    /// domains with CDP on and off and the reset that repairs it. Until then the resource's
    /// masks are read per domain and cannot be written.
    #[must_use]
    pub fn cdp_inconsistency(&self) -> Option<String> {
        [CatResource::L3, CatResource::L2]
            .into_iter()
            .find_map(|r| self.cdp_split_error(r).map(|e| e.to_string()))
    }

    /// [`MsrError::Inconsistent`] for `resource` while its CDP state is split.
    fn cdp_split_error(&self, resource: CatResource) -> Option<MsrError> {
        let on = self.cdp_split[cdp_index(resource)].as_ref()?;
        let list = |v: &[CacheDomain]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let off: Vec<CacheDomain> = self
            .domains(resource)
            .iter()
            .map(|d| d.id)
            .filter(|d| !on.contains(d))
            .collect();
        let r = resource.to_string().to_lowercase();
        Some(MsrError::Inconsistent(format!(
            "{resource} CDP is enabled in {resource} domains {} but disabled in {} (a reset \
             stopped half-way); reset allocation with -R {r}cdp-on or -R {r}cdp-off",
            list(on),
            list(&off),
        )))
    }

    /// Keeps this process's run state in `dir` (a root-only directory that outlives the
    /// process, `/run/rdt` on a host; [`BackendExt::run_dir`]): the RMIDs its monitoring
    /// groups give CPUs, so that a run killed before it stopped its groups can be cleaned
    /// up by the next one ([`MsrBackend::reclaim_dead_runs`]); the journal of a transaction
    /// in progress; and the writers' lock `msr.lock`, which transactions and
    /// [`BackendExt::start_monitoring`] hold so that two processes' changes serialize (waiting
    /// at most [`MsrBackend::set_lock_timeout`], 5 s by default); and the named classes
    /// (`msr-classes`, [`NameRecord`]), read here: a record that cannot be read is logged
    /// and taken as empty (the next claim replaces it); classes beyond the class count and
    /// a second name of one class are left out. Without it, a killed run's CPUs keep their RMIDs until `pqos -r`,
    /// nothing serializes writers, and named classes last as long as the process.
    #[must_use]
    pub fn with_run_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.claims = Some(Claims::new(&dir));
        let lock = WriterLock::new(dir.join("msr.lock"), self.lock_timeout);
        let record = NameRecord::new(&dir, NAMES_FILE);
        self.run = Some((lock, RunDirPath::new(dir)));
        self.names.clear();
        self.own.clear();
        for (class, name) in record.read_or_empty() {
            // a second name of one class (a damaged record) is not taken
            if self.caps.check_class(Interface::Msr, class).is_ok()
                && !self.names.contains_key(&class)
            {
                self.own.insert(name.clone());
                self.names.insert(class, name);
            }
        }
        self
    }

    /// The record of named classes, with a run directory.
    fn name_record(&self) -> Option<NameRecord> {
        self.run
            .as_ref()
            .map(|(_, dir)| NameRecord::new(dir.path(), NAMES_FILE))
    }

    /// Changes the record of named classes under the writers' lock (nothing without a run
    /// directory).
    ///
    /// # Errors
    /// [`MsrError::Names`] when it cannot be written; the lock's errors.
    fn update_names(
        &mut self,
        f: impl FnOnce(&mut Vec<(ClassId, String)>),
    ) -> Result<(), MsrError> {
        let Some(record) = self.name_record() else {
            return Ok(());
        };
        self.hold_writers()?;
        let r = record.update(f).map_err(|source| MsrError::Names {
            path: record.path(),
            source,
        });
        self.release_writers();
        r
    }

    /// Changes how long taking the writers' lock waits for another process (5 s by
    /// default): at most this in all while the lock stays held elsewhere, however many
    /// holds fail in a row (the reclaims at open, then the command); taking it starts a
    /// new wait.
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock_timeout = timeout;
        self.lock_waited = Duration::ZERO;
    }

    /// Gives back the RMIDs of runs that ended without stopping their monitoring: for
    /// every claim file in the claims directory whose process is gone (its `flock` is
    /// free), each listed CPU whose IA32_PQR_ASSOC still holds the listed RMID is put back
    /// on RMID 0 (COS kept); a CPU tagged by someone else since is left alone. Returns what
    /// was given back; nothing without [`MsrBackend::with_run_dir`].
    ///
    /// # Errors
    /// [`MsrError::Claims`] when the directory cannot be listed; a register access error
    /// (the claim is kept for the next attempt).
    pub fn reclaim_dead_runs(&mut self) -> Result<Vec<Reclaimed>, MsrError> {
        let Some(dir) = self.claims.as_ref().map(|c| c.dir().to_owned()) else {
            return Ok(Vec::new());
        };
        claims::reclaim(&dir, &mut self.io)
    }

    /// [`BackendExt::start_monitoring`] without the lock.
    fn start_group(&mut self, cpus: &CpuSet, events: MonEvents) -> Result<MonGroupId, MsrError> {
        if cpus.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        let mut members: Vec<(LogicalCpu, Option<CacheDomain>)> = Vec::with_capacity(cpus.len());
        for cpu in cpus.iter() {
            let p = self.topology.get(cpu).ok_or(RequestError::NoSuchCpu(cpu))?;
            members.push((cpu, p.l3));
        }
        let rmid_events = self.caps.check_rmid_events(events)?;
        if !rmid_events.is_empty()
            && let Some(&(cpu, _)) = members.iter().find(|(_, l3)| l3.is_none())
        {
            return Err(RequestError::Unsupported(format!(
                "CPU {cpu} has no L3 cache, so its LLC occupancy and memory bandwidth cannot be monitored"
            )).into());
        }
        for &(cpu, _) in &members {
            if let Some(g) = self.groups.iter().find(|g| g.cpus.contains(&cpu)) {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("CPU {cpu}"),
                    by: Some(format!("monitoring group {} of this process", g.id.0)),
                }
                .into());
            }
        }
        let mut assoc = Vec::with_capacity(members.len());
        for &(cpu, _) in &members {
            let v = self.io.read(cpu, IA32_PQR_ASSOC)?;
            let rmid = regs::pqr_rmid(v); // IA32_PQR_ASSOC bits 9:0
            if rmid != 0 {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("CPU {cpu}"),
                    by: Some(format!(
                        "RMID {rmid} (another tool or a run that did not stop)"
                    )),
                }
                .into());
            }
            assoc.push(v);
        }

        let mut contexts: Vec<Context> = Vec::new();
        if !rmid_events.is_empty() {
            contexts = self.allocate_rmids(cpus, &members)?;
            let rmids: Vec<(LogicalCpu, u32)> = members
                .iter()
                .map(|&(cpu, l3)| {
                    let rmid = contexts
                        .iter()
                        .find(|c| Some(c.domain) == l3)
                        .map_or(0, |c| c.rmid);
                    (cpu, rmid)
                })
                .collect();
            // The claim is on disk before the first CPU is tagged: a kill at any write leaves
            // a record of every CPU this group may have tagged.
            if let Some(c) = &mut self.claims {
                c.add(rmids.iter().copied())?;
            }
            for (i, &(cpu, rmid)) in rmids.iter().enumerate() {
                if let Err(e) =
                    self.io
                        .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_rmid(assoc[i], rmid))
                {
                    for (j, &(done, _)) in members.iter().enumerate().take(i) {
                        let _ = self.io.write(done, IA32_PQR_ASSOC, assoc[j]); // best-effort rollback
                    }
                    if let Some(c) = &mut self.claims {
                        let _ = c.remove(members.iter().map(|m| m.0));
                    }
                    return Err(e);
                }
            }
        }

        let id = MonGroupId(self.next_group);
        let cpus: Vec<LogicalCpu> = members.iter().map(|m| m.0).collect();
        let (acc, nodes, stride) = self.accumulator(events, &contexts, cpus.len());
        let mut group = Group {
            id,
            cpus,
            rmid_events: RmidEvent::of(events).collect(),
            contexts,
            nodes,
            stride,
            acc,
        };
        // The reading at start (rdt_core::monitor, "Start and first poll"): a failed
        // register access gives the RMIDs back, as a failed tagging does.
        if let Err(e) = group.baseline(&mut self.io, &mut self.pmu, Instant::now()) {
            if !group.contexts.is_empty() {
                let _ = self.release_rmids(group.cpus.iter().copied()); // best effort
                if let Some(c) = &mut self.claims {
                    let _ = c.remove(group.cpus.iter().copied());
                }
            }
            return Err(e);
        }
        self.next_group += 1;
        self.groups.push(group);
        Ok(id)
    }

    /// The accumulator of a new group: its counter contexts (with SNC, one per node of
    /// each context: the RMIDs are split between the nodes of an L3 in the kernel's RMID
    /// sharing mode, MSR_RMID_SNC_CONFIG, so the group's RMID counts on node k as RMID + k ×
    /// (RMIDs / nodes)), corrected for the Broadwell-X / Skylake-X MBM erratum as the kernel
    /// corrects it, so both interfaces report the same bytes. Also the nodes and stride.
    fn accumulator(
        &self,
        events: MonEvents,
        contexts: &[Context],
        members: usize,
    ) -> (MonAccumulator, u32, u32) {
        let (nodes, stride) = self.snc_split();
        let domains: Vec<CacheDomain> = contexts
            .iter()
            .flat_map(|c| std::iter::repeat_n(c.domain, nodes as usize))
            .collect();
        let mut acc = MonAccumulator::new(
            events,
            &domains,
            CounterFormat::of_qm_ctr(&self.caps),
            members,
        );
        if let Some(c) = MbmCorrection::of(&self.caps) {
            for (i, ctx) in contexts.iter().enumerate() {
                if let Some(f) = c.factor_for(ctx.rmid) {
                    for k in 0..nodes as usize {
                        acc.correct_mbm(i * nodes as usize + k, f);
                    }
                }
            }
        }
        (acc, nodes, stride)
    }

    /// The SNC nodes per L3 and the RMIDs of each (`(1, 0)` without SNC): the kernel
    /// divides `num_rmids` between the nodes (`logical_rmid_to_physical_rmid`).
    fn snc_split(&self) -> (u32, u32) {
        if self.snc <= 1 {
            return (1, 0);
        }
        let per_node = self.caps.monitoring.get().map_or(0, |m| m.num_rmids) / self.snc;
        (self.snc, per_node)
    }

    /// The register access this backend uses.
    #[must_use]
    pub const fn io(&self) -> &M {
        &self.io
    }

    /// The register access, mutable (tests arrange registers through it).
    pub const fn io_mut(&mut self) -> &mut M {
        &mut self.io
    }

    /// Gives the register access back.
    #[must_use]
    pub fn into_io(self) -> M {
        self.io
    }

    /// Puts every CPU of `cpus` back on RMID 0, keeping its COS, writing IA32_PQR_ASSOC only
    /// where the RMID is not already 0. Every CPU is attempted; the first error is returned.
    fn release_rmids(
        &mut self,
        cpus: impl IntoIterator<Item = LogicalCpu>,
    ) -> Result<(), MsrError> {
        let mut first_err = None;
        for cpu in cpus {
            let res = self.io.read(cpu, IA32_PQR_ASSOC).and_then(|old| {
                if regs::pqr_rmid(old) == 0 {
                    Ok(())
                } else {
                    self.io
                        .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_rmid(old, 0))
                }
            });
            if let Err(e) = res {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The PMU source.
    #[must_use]
    pub const fn pmu(&self) -> &P {
        &self.pmu
    }

    /// The PMU source, mutable.
    pub const fn pmu_mut(&mut self) -> &mut P {
        &mut self.pmu
    }

    fn domains(&self, resource: CatResource) -> &[Domain] {
        match resource {
            CatResource::L3 => &self.l3,
            CatResource::L2 => &self.l2,
        }
    }

    fn domain(
        which: &'static str,
        list: &[Domain],
        id: CacheDomain,
    ) -> Result<LogicalCpu, MsrError> {
        list.binary_search_by_key(&id, |d| d.id)
            .map(|i| list[i].cpu)
            .map_err(|_| {
                RequestError::NoSuchDomain {
                    resource: which,
                    domain: id,
                    known: None,
                }
                .into()
            })
    }

    fn cat_domain(&self, resource: CatResource, id: CacheDomain) -> Result<LogicalCpu, MsrError> {
        let which = match resource {
            CatResource::L3 => "L3",
            CatResource::L2 => "L2",
        };
        Self::domain(which, self.domains(resource), id)
    }

    fn check_cpu(&self, cpu: LogicalCpu) -> Result<(), MsrError> {
        self.topology
            .get(cpu)
            .map(|_| ())
            .ok_or_else(|| RequestError::NoSuchCpu(cpu).into())
    }

    fn read_mask(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<CacheBitmask, MsrError> {
        let value = self.io.read(cpu, addr)?;
        CacheBitmask::new(value).map_err(|_| MsrError::BadRegister {
            cpu,
            addr,
            value,
            what: "cache bitmask",
        })
    }

    /// Writes the full mask to every mask register of `resource` in use, in every domain.
    fn reset_masks(&mut self, resource: CatResource) -> Result<(), MsrError> {
        let Some(cat) = self.caps.cat(resource) else {
            return Ok(());
        };
        let (n, full) = (mask_registers(cat), cat.full_mask().bits());
        let (base, _) = cat_regs(resource);
        let cpus: Vec<LogicalCpu> = self.domains(resource).iter().map(|d| d.cpu).collect();
        for cpu in cpus {
            for i in 0..n {
                self.io.write(cpu, base.offset(i), full)?;
            }
        }
        Ok(())
    }

    /// Which CDP state `setting` asks for: `None` to leave the bit alone.
    fn cdp_target(
        &self,
        resource: CatResource,
        setting: FeatureSetting,
    ) -> Result<Option<bool>, MsrError> {
        if setting == FeatureSetting::Any {
            // a split CDP state has no "as is" to keep: the reset must choose
            return self.cdp_split_error(resource).map_or(Ok(None), Err);
        }
        let Some(cat) = self.caps.cat(resource) else {
            return Err(RequestError::Unsupported(format!(
                "{resource} CDP setting requested but {resource} CAT is not supported on this platform"
            )).into());
        };
        match (setting, cat.cdp_supported) {
            (FeatureSetting::On, false) => Err(RequestError::Unsupported(format!(
                "{resource} CDP requested but not supported by the platform"
            ))
            .into()),
            (_, false) => Ok(None), // off, and it cannot be on
            (s, true) => Ok(Some(s == FeatureSetting::On)),
        }
    }

    /// Sets or clears QOS_CFG bit 0 of `resource` in every domain; whether any bit changed.
    fn set_cdp(&mut self, resource: CatResource, on: bool) -> Result<bool, MsrError> {
        let (_, cfg) = cat_regs(resource);
        let cpus: Vec<LogicalCpu> = self.domains(resource).iter().map(|d| d.cpu).collect();
        let mut changed = false;
        for cpu in cpus {
            let old = self.io.read(cpu, cfg)?;
            // IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0: CDP enable; other bits kept.
            let new = if on {
                old | regs::QOS_CFG_CDP_ENABLE
            } else {
                old & !regs::QOS_CFG_CDP_ENABLE
            };
            if new != old {
                if let Err(e) = self.io.write(cpu, cfg, new) {
                    // Some domains may have switched: know which (best effort), so that
                    // reads follow them and a reset can repair the split.
                    let _ = self.read_cdp(resource);
                    return Err(e);
                }
                changed = true;
            }
        }
        if let Some(cat) = cat_mut(&mut self.caps, resource) {
            cat.cdp_enabled = on;
        }
        self.cdp_split[cdp_index(resource)] = None;
        Ok(changed)
    }

    /// One context per L3 domain spanned by `members`, each with the lowest RMID >= 1 that
    /// no IA32_PQR_ASSOC of the domain (outside `cpus`, known to hold RMID 0) and no group of
    /// this backend uses (pqos `hw_mon_assoc_unused`). Reads only; writes nothing.
    fn allocate_rmids(
        &mut self,
        cpus: &CpuSet,
        members: &[(LogicalCpu, Option<CacheDomain>)],
    ) -> Result<Vec<Context>, MsrError> {
        // RMIDs 0..num_rmids (divided between the SNC nodes of an L3); IA32_PQR_ASSOC as
        // pqos uses it holds 10 bits.
        let (nodes, _) = self.snc_split();
        let limit = self.caps.monitoring.get().map_or(0, |m| {
            (m.num_rmids / nodes).min(u32::try_from(regs::RMID_MASK + 1).unwrap_or(u32::MAX))
        });
        let mut spanned: Vec<CacheDomain> = members.iter().filter_map(|m| m.1).collect();
        spanned.sort_unstable();
        spanned.dedup();
        let mut contexts = Vec::with_capacity(spanned.len());
        for id in spanned {
            let no_domain = || RequestError::NoSuchDomain {
                resource: "L3",
                domain: id,
                known: None,
            };
            let dom = self
                .l3
                .binary_search_by_key(&id, |d| d.id)
                .map_err(|_| no_domain())?;
            let mut used = vec![false; limit as usize];
            if let Some(u) = used.get_mut(0) {
                *u = true; // RMID 0 is everyone's default, never allocated
            }
            for i in 0..self.l3[dom].cpus.len() {
                let cpu = self.l3[dom].cpus[i];
                if cpus.contains(cpu) {
                    continue; // checked by the caller: RMID 0
                }
                let r = regs::pqr_rmid(self.io.read(cpu, IA32_PQR_ASSOC)?); // bits 9:0
                if let Some(u) = used.get_mut(r as usize) {
                    *u = true;
                }
            }
            for ctx in self
                .groups
                .iter()
                .flat_map(|g| &g.contexts)
                .filter(|c| c.domain == id)
            {
                if let Some(u) = used.get_mut(ctx.rmid as usize) {
                    *u = true;
                }
            }
            let out_of_rmids = || RequestError::OutOfRmids {
                scope: format!("L3 domain {id}"),
                limbo: false,
                in_use: Vec::new(),
            };
            let rmid = used.iter().position(|u| !u).ok_or_else(out_of_rmids)?;
            let cpu = members
                .iter()
                .find(|m| m.1 == Some(id))
                .map(|m| m.0)
                .ok_or_else(no_domain)?;
            contexts.push(Context {
                domain: id,
                rmid: u32::try_from(rmid).map_err(|_| out_of_rmids())?,
                cpu,
            });
        }
        Ok(contexts)
    }
}

/// Reads one event of one RMID: WRMSR IA32_QM_EVTSEL, RDMSR IA32_QM_CTR (pqos
/// `hw_mon_read`). On the Error flag (bit 63) EVTSEL is written again before the next read;
/// on the Unavailable flag (bit 62) IA32_QM_CTR is read again; after [`QM_CTR_ATTEMPTS`]
/// reads the value is `None`. The data is bits 61:0 (the accumulator masks it to the
/// counter width).
fn read_event<M: MsrIo>(
    io: &mut M,
    cpu: LogicalCpu,
    rmid: u32,
    event: RmidEvent,
) -> Result<Option<u64>, MsrError> {
    let sel = regs::qm_evtsel(rmid, evtsel_id(event)); // EVTSEL: RMID in 41:32, event id in 7:0
    io.write(cpu, IA32_QM_EVTSEL, sel)?;
    for attempt in 1..=QM_CTR_ATTEMPTS {
        let v = io.read(cpu, IA32_QM_CTR)?;
        if v & regs::QM_CTR_ERROR != 0 {
            // QM_CTR bit 63: the selection was not valid; select again and retry.
            if attempt < QM_CTR_ATTEMPTS {
                io.write(cpu, IA32_QM_EVTSEL, sel)?;
            }
            continue;
        }
        if v & regs::QM_CTR_UNAVAILABLE != 0 {
            continue; // QM_CTR bit 62: no data yet; read again
        }
        return Ok(Some(v & regs::QM_CTR_DATA)); // bits 61:0
    }
    Ok(None)
}

impl Group {
    /// Reads this group's RMID counters and PMU counts into its accumulator; without
    /// occupancy when `!occupancy` (the reading at start: occupancy is a level, not a
    /// count with a start).
    fn read<M: MsrIo, P: PmuSource>(
        &mut self,
        io: &mut M,
        pmu: &mut P,
        occupancy: bool,
    ) -> Result<(), MsrError> {
        for (i, ctx) in self.contexts.iter().enumerate() {
            for k in 0..self.nodes {
                let rmid = ctx.rmid + k * self.stride;
                for &event in &self.rmid_events {
                    if !occupancy && event == RmidEvent::LlcOccupancy {
                        continue;
                    }
                    let now = read_event(io, ctx.cpu, rmid, event)?;
                    self.acc
                        .record(i * self.nodes as usize + k as usize, event, now);
                }
            }
        }
        if self.acc.events().intersects(MonEvents::PMU) {
            self.acc
                .record_pmu(self.cpus.iter().map(|&cpu| pmu.read(cpu)));
        }
        Ok(())
    }

    /// The reading at start, at `at`: every MBM counter and the PMU once
    /// ([`MonAccumulator::finish_baseline`]).
    fn baseline<M: MsrIo, P: PmuSource>(
        &mut self,
        io: &mut M,
        pmu: &mut P,
        at: Instant,
    ) -> Result<(), MsrError> {
        self.read(io, pmu, false)?;
        self.acc.finish_baseline(at);
        Ok(())
    }

    /// A poll finishing at `at`: every counter and the PMU.
    fn poll<M: MsrIo, P: PmuSource>(
        &mut self,
        io: &mut M,
        pmu: &mut P,
        at: Instant,
    ) -> Result<(), MsrError> {
        self.read(io, pmu, true)?;
        self.acc.finish(at);
        Ok(())
    }
}

/// The first AMD bandwidth-limit register of `resource` (one per class, 1/8 GB/s units):
/// `MSR_IA32_MBA_BW_BASE` 0xC000_0200 for MBA, `MSR_IA32_SMBA_BW_BASE` 0xC000_0280 for
/// SMBA (Linux `arch/x86/include/asm/msr-index.h`; AMD pub. 56375). SMBA is AMD's only, so
/// Intel's delay registers never need a resource.
const fn amd_bw_base(resource: MbaResource) -> MsrAddr {
    match resource {
        MbaResource::Mba => AMD_MBA_BW_0,
        MbaResource::Smba => AMD_SMBA_BW_0,
    }
}

/// The operations of [`Backend`] and its abilities ([`MsrOps`], [`NamedClasses`],
/// [`Writers`]) with this backend's own error; the trait impls below forward to them.
impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// Reads IA32_L3_QOS_MASK_n (0xC90 + n) or IA32_L2_QOS_MASK_n (0xD10 + n) on the lowest
    /// CPU of `domain`: one register per class with CDP off, data (2n) and code (2n + 1)
    /// with CDP on.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) ([`LimitError::Unsupported`]) without that CAT,
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain), a read error, or [`MsrError::BadRegister`] for a zero mask.
    fn read_cat_domain(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, MsrError> {
        let cat = self
            .caps
            .cat(resource)
            .ok_or(LimitError::Unsupported(cat_name(resource)))?;
        let cpu = self.cat_domain(resource, domain)?;
        let (n, cdp) = match &self.cdp_split[cdp_index(resource)] {
            // a split CDP state: this domain's own layout
            Some(on) if on.contains(&domain) => (cat.num_classes / 2, true),
            Some(_) => (cat.num_classes, false),
            None => (cat.usable_classes(), cat.cdp_enabled),
        };
        let (base, _) = cat_regs(resource);
        let mut out = Vec::with_capacity(n as usize);
        for class in 0..n {
            let mask = if cdp {
                let data = self.read_mask(cpu, base.offset(2 * class))?;
                let code = self.read_mask(cpu, base.offset(2 * class + 1))?;
                CatMask::Cdp { data, code }
            } else {
                CatMask::Unified(self.read_mask(cpu, base.offset(class))?)
            };
            out.push(CatClass {
                class: ClassId::new(class),
                mask,
            });
        }
        Ok(out)
    }

    /// Validates every class first ([`Capabilities::check_cat`]: class range, mask limits,
    /// mask kind against the CDP state) and domain, then writes the mask registers on the
    /// lowest CPU of each domain, in the order given.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) for an unsupported resource, a class out of range or a mask the
    /// platform does not accept; [`RequestError::CdpMismatch`](rdt_core::RequestError::CdpMismatch); [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain);
    /// nothing is written in these cases. A write error ([`MsrError::Write`]) may leave
    /// earlier classes written.
    fn write_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), MsrError> {
        if self.caps.cat(resource).is_none() {
            return Err(LimitError::Unsupported(cat_name(resource)).into());
        }
        if let Some(e) = self.cdp_split_error(resource) {
            return Err(e);
        }
        let mut writes = Vec::with_capacity(masks.len());
        for (domain, c) in masks {
            let cpu = self.cat_domain(resource, *domain)?;
            self.caps.check_cat(resource, c)?;
            writes.push((cpu, c));
        }
        let (base, _) = cat_regs(resource);
        for (cpu, c) in writes {
            let n = c.class.get();
            match c.mask {
                CatMask::Unified(m) => self.io.write(cpu, base.offset(n), m.bits())?,
                CatMask::Cdp { data, code } => {
                    self.io.write(cpu, base.offset(2 * n), data.bits())?; // data: 2n
                    self.io.write(cpu, base.offset(2 * n + 1), code.bits())?; // code: 2n + 1
                }
            }
        }
        Ok(())
    }

    /// How the MBA limits of a core's threads combine in L3 `domain`, as the registers say:
    /// per thread on MBA 3.0; on per-core MBA 2.0 (more than 8 classes: the parts with
    /// IA32_MBA_CFG, as pqos `hw_cap_mba_discover` reads it) bit 0 of IA32_MBA_CFG on the
    /// lowest CPU of `domain`: set, the smaller delay; else (and on MBA 1.0) the larger.
    ///
    /// # Errors
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain); a read error.
    pub fn mba_thread_throttle(
        &mut self,
        domain: CacheDomain,
    ) -> Result<Option<ThreadThrottle>, MsrError> {
        let Some(m) = self.caps.mba.get() else {
            return Ok(None);
        };
        let from_cpuid = m.thread_throttle();
        if from_cpuid != Some(ThreadThrottle::Max) || m.num_classes <= 8 {
            return Ok(from_cpuid);
        }
        // per-core MBA 2.0: IA32_MBA_CFG bit 0 may select the smaller delay
        let cpu = Self::domain("MBA", &self.l3, domain)?;
        let cfg = self.io.read(cpu, regs::IA32_MBA_CFG)?;
        Ok(Some(if cfg & regs::MBA_CFG_MIN_DELAY == 0 {
            ThreadThrottle::Max
        } else {
            ThreadThrottle::Min
        }))
    }

    /// Intel MBA: reads the delay at 0xD50 + n and reports `100 - delay` percent. AMD:
    /// reads the bandwidth limit at 0xC000_0200 + n (MBA) or 0xC000_0280 + n (SMBA) in
    /// 1/8 GB/s units.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) without the resource, [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain), or a read error.
    fn read_bandwidth_domain(
        &mut self,
        resource: MbaResource,
        domain: CacheDomain,
    ) -> Result<Vec<MbaClass>, MsrError> {
        let name = resource.name();
        let mba = self
            .caps
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        let (n, kind) = (mba.num_classes, mba.kind);
        let amd_base = amd_bw_base(resource);
        let cpu = Self::domain(name, &self.l3, domain)?;
        let mut out = Vec::with_capacity(n as usize);
        for class in 0..n {
            let limit = match kind {
                MbaKind::IntelDelay { .. } => {
                    let delay = self.io.read(cpu, IA32_MBA_THRTL_0.offset(class))?;
                    MbaLimit::Percent(u8::try_from(intel_mba_percent(delay)).unwrap_or(0))
                }
                MbaKind::AmdBandwidth { .. } => {
                    let raw = self.io.read(cpu, amd_base.offset(class))?;
                    MbaLimit::AmdUnits(u32::try_from(raw).unwrap_or(u32::MAX))
                }
            };
            out.push(MbaClass {
                class: ClassId::new(class),
                limit,
            });
        }
        Ok(out)
    }

    /// Intel: writes delay `100 - round(pct)` (rounded half up to the granularity, clipped
    /// to the maximum delay; pqos `hw_mba_set`) and returns `100 - readback`, e.g. with
    /// granularity 10: 75% -> delay 20 -> 80% applied, 5% -> delay 90 -> 10% applied.
    /// AMD: writes the units as given (1..=2^width) to 0xC000_0200 + n (MBA) or
    /// 0xC000_0280 + n (SMBA) and returns the readback.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) for missing MBA, a class out of range or a value out of range
    /// (percent 0 or above 100; AMD units 0 or above 2^width); [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for
    /// MiB/s limits (the kernel's `mba_MBps` controller, OS interface only), non-linear
    /// Intel MBA, or a limit of the other vendor's kind; [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain). Nothing
    /// is written in these cases. A write or read error may leave earlier classes written.
    fn write_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, MsrError> {
        let name = resource.name();
        let mba = self
            .caps
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        let kind = mba.kind;
        let amd_base = amd_bw_base(resource);
        let mut writes = Vec::with_capacity(limits.len());
        for (domain, c) in limits {
            let cpu = Self::domain(name, &self.l3, *domain)?;
            self.caps
                .check_bandwidth_limit(Interface::Msr, resource, c.class, c.limit)?;
            // The unit and range are checked (check_mba_limit); what is left is the encoding.
            let (addr, value) = match (kind, c.limit) {
                (MbaKind::IntelDelay { linear: false, .. }, _) => {
                    return Err(RequestError::Unsupported(
                        "non-linear Intel MBA is not supported".into(),
                    )
                    .into());
                }
                (MbaKind::IntelDelay { max_delay, .. }, limit @ MbaLimit::Percent(_)) => {
                    // half up to the granularity, at most max_delay (MbaCaps::stored_limit)
                    let stored = mba.stored_limit(Interface::Msr, limit).value();
                    let delay = intel_mba_delay(stored).min(max_delay);
                    (IA32_MBA_THRTL_0.offset(c.class.get()), u64::from(delay))
                }
                (MbaKind::AmdBandwidth { .. }, MbaLimit::AmdUnits(u)) => {
                    (amd_base.offset(c.class.get()), u64::from(u))
                }
                (_, limit) => {
                    return Err(RequestError::Unsupported(format!(
                        "{name} limit {limit:#} has no encoding on this platform"
                    ))
                    .into());
                }
            };
            writes.push((*domain, cpu, c.class, addr, value));
        }
        let mut applied = Vec::with_capacity(writes.len());
        for (domain, cpu, class, addr, value) in writes {
            self.io.write(cpu, addr, value)?;
            let back = self.io.read(cpu, addr)?;
            let limit = match kind {
                MbaKind::IntelDelay { .. } => {
                    MbaLimit::Percent(u8::try_from(intel_mba_percent(back)).unwrap_or(0))
                }
                MbaKind::AmdBandwidth { .. } => {
                    MbaLimit::AmdUnits(u32::try_from(back).unwrap_or(u32::MAX))
                }
            };
            applied.push((domain, MbaClass { class, limit }));
        }
        Ok(applied)
    }

    /// Read-modify-write of IA32_PQR_ASSOC: COS into bits 63:32, RMID (bits 31:0) kept.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu); [`RequestError::Limit`](rdt_core::RequestError::Limit) ([`LimitError::ClassOutOfRange`]) when
    /// `class` is not below the largest class count of the allocation resources (nothing is
    /// written then); a read or write error.
    fn associate_one(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), MsrError> {
        self.check_cpu(cpu)?;
        self.caps.check_class(Interface::Msr, class)?;
        let old = self.io.read(cpu, IA32_PQR_ASSOC)?;
        self.io
            .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_cos(old, class.get()))
    }

    /// One read of IA32_PQR_ASSOC: COS from bits 63:32, RMID from bits 9:0.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu) or a read error.
    fn read_association(&mut self, cpu: LogicalCpu) -> Result<(ClassId, Option<Rmid>), MsrError> {
        self.check_cpu(cpu)?;
        let v = self.io.read(cpu, IA32_PQR_ASSOC)?;
        Ok((
            ClassId::new(regs::pqr_cos(v)),
            Some(Rmid::new(regs::pqr_rmid(v))),
        ))
    }

    /// pqos `alloc_reset`: every L3 and L2 mask register in use (two per class with CDP on)
    /// := all ways in every domain; every MBA class := no limit (Intel delay 0, AMD
    /// 2^width; AMD SMBA likewise); every CPU -> COS 0, RMIDs kept; then IA32_L3_QOS_CFG /
    /// IA32_L2_QOS_CFG bit 0 set or cleared on one CPU per domain as `cfg` asks, and if that
    /// changed CDP, the masks are set to all ways again for the new layout. Last, the record
    /// of named classes (`msr-classes`) is cut down to the names this process read from it
    /// ([`BackendExt::own_class_names`], which a reset's plan gives up): so after `pqos -R` no
    /// name holds a class of service.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) before any write when CDP is requested on where it is not
    /// supported, a CDP setting is given without that CAT, or `mba_ctrl` is on (the kernel's
    /// software controller; OS interface only). A read or write error stops the reset
    /// part-way; [`MsrError::Names`] when the record cannot be written.
    fn reset_alloc(&mut self, cfg: AllocReset) -> Result<(), MsrError> {
        if cfg.mba_ctrl == FeatureSetting::On {
            return Err(RequestError::Unsupported(
                "MBA CTRL requested but not supported by the MSR interface: the MBps controller \
                 (mba_MBps) needs the OS interface"
                    .into(),
            )
            .into());
        }
        let l3_cdp = self.cdp_target(CatResource::L3, cfg.l3_cdp)?;
        let l2_cdp = self.cdp_target(CatResource::L2, cfg.l2_cdp)?;

        self.reset_masks(CatResource::L3)?;
        self.reset_masks(CatResource::L2)?;
        let mba_cpus: Vec<LogicalCpu> = self.l3.iter().map(|d| d.cpu).collect();
        for resource in MbaResource::ALL {
            let Some(mba) = self.caps.bandwidth(resource).get() else {
                continue;
            };
            let (base, value) = match (mba.kind, resource) {
                (MbaKind::IntelDelay { .. }, MbaResource::Mba) => (IA32_MBA_THRTL_0, 0), // delay 0: no throttling
                (MbaKind::IntelDelay { .. }, MbaResource::Smba) => continue, // SMBA is AMD only
                (MbaKind::AmdBandwidth { width }, r) => {
                    (amd_bw_base(r), u64::from(amd_unlimited(width)))
                }
            };
            for &cpu in &mba_cpus {
                for i in 0..mba.num_classes {
                    self.io.write(cpu, base.offset(i), value)?;
                }
            }
        }
        let all: Vec<LogicalCpu> = self.topology.cpus().iter().map(|c| c.cpu).collect();
        for cpu in all {
            let old = self.io.read(cpu, IA32_PQR_ASSOC)?;
            if regs::pqr_cos(old) != 0 {
                self.io
                    .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_cos(old, 0))?;
            }
        }
        for (resource, target) in [(CatResource::L3, l3_cdp), (CatResource::L2, l2_cdp)] {
            if let Some(on) = target
                && self.set_cdp(resource, on)?
            {
                self.reset_masks(resource)?;
            }
        }
        // The record keeps only the names this process took from it, which the reset's
        // plan gives up next (Step::Release): a line it left out (a second name of one
        // class, a class beyond the class count) would otherwise hold its class of service
        // for the next process.
        let own = self.own_class_names();
        self.update_names(|v| v.retain(|entry| own.contains(entry)))
    }

    /// Every CPU's IA32_PQR_ASSOC RMID := 0 (COS kept; written only where it is not 0
    /// already), and every group of this backend is forgotten (pqos `-r`).
    ///
    /// # Errors
    /// The first read or write error; every CPU is still attempted.
    fn reset_rmids(&mut self) -> Result<(), MsrError> {
        self.groups.clear();
        let all: Vec<LogicalCpu> = self.topology.cpus().iter().map(|c| c.cpu).collect();
        let released = self.release_rmids(all);
        let unclaimed = self.claims.as_mut().map_or(Ok(()), Claims::clear);
        released.and(unclaimed)
    }

    /// Starts a group: checks every CPU is online, not in a group of this backend and has
    /// RMID 0 in IA32_PQR_ASSOC; picks per L3 domain the lowest RMID >= 1 that no
    /// IA32_PQR_ASSOC of the domain and no other group holds; writes it into each CPU's
    /// IA32_PQR_ASSOC (COS kept). IPC and LLC misses need no RMID and are accepted even
    /// without a PMU (their values are then `None`).
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup), [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu), [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) (an
    /// event the platform does not count, or a CPU without L3), [`RequestError::AlreadyMonitored`](rdt_core::RequestError::AlreadyMonitored),
    /// [`RequestError::OutOfRmids`](rdt_core::RequestError::OutOfRmids): nothing is written in these cases. A failed write is rolled
    /// back on the CPUs already written (best effort) and returned.
    /// Holds the writers' lock ([`MsrBackend::with_run_dir`]) while it picks and writes
    /// the RMIDs, so two processes cannot pick the same one.
    fn start_locked(&mut self, cpus: &CpuSet, events: MonEvents) -> Result<MonGroupId, MsrError> {
        rdt_core::transaction::with_writers(self, |b| b.start_group(cpus, events))?
    }

    /// Programs the CHA performance monitors of one CPU per socket (the lowest) as pqos does
    /// (`lib/uncore_monitoring.c`, see [`crate::uncore`]): each event has a CHA of its own,
    /// so two groups of one socket would share counters and are refused.
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup) for no socket or no
    /// event; [`RequestError::UnsupportedEvent`](rdt_core::RequestError::UnsupportedEvent)
    /// when `events` holds a non-uncore event or the CPU has no uncore events
    /// ([`Capabilities::uncore_pcie`]); [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain)
    /// for a socket without an online CPU;
    /// [`RequestError::AlreadyMonitored`](rdt_core::RequestError::AlreadyMonitored) for a
    /// socket of another uncore group: nothing is written in these cases. A failed write
    /// stops the CHAs already programmed (best effort) and is returned.
    pub fn start_uncore_monitoring(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, MsrError> {
        if sockets.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        if !self.caps.uncore_pcie || !MonEvents::UNCORE.contains(events) {
            let event = if self.caps.uncore_pcie {
                events.difference(MonEvents::UNCORE)
            } else {
                events
            };
            return Err(RequestError::UnsupportedEvent {
                event,
                needed_for: None,
            }
            .into());
        }
        let mut members = Vec::with_capacity(sockets.len());
        for &s in sockets {
            let cpu = self.topology.cpus_in_package(s).first().ok_or_else(|| {
                RequestError::NoSuchDomain {
                    resource: "socket",
                    domain: CacheDomain::new(s),
                    known: Some(
                        self.topology
                            .packages()
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(","),
                    ),
                }
            })?;
            if let Some(g) = self
                .uncore
                .iter()
                .find(|g| g.sockets.iter().any(|(x, _)| *x == s))
            {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("socket {s}"),
                    by: Some(format!(
                        "uncore monitoring group {} of this process",
                        g.id.0
                    )),
                }
                .into());
            }
            if !members.iter().any(|(x, _)| *x == s) {
                members.push((s, cpu));
            }
        }
        let id = MonGroupId(self.next_group);
        let mut group = UncoreGroup::new(id, members, events, Instant::now());
        let mut done: Vec<(LogicalCpu, usize)> = Vec::new();
        for &(_, cpu) in &group.sockets {
            for (k, e) in group.events.iter().enumerate() {
                if let Err(err) = uncore::program(&mut self.io, cpu, e) {
                    for &(cpu, k) in &done {
                        let _ = uncore::stop(&mut self.io, cpu, &group.events[k]);
                    }
                    return Err(err);
                }
                done.push((cpu, k));
            }
        }
        // programming reset the counters: the first poll counts from here, no reading
        // needed (rdt_core::monitor, "Start and first poll")
        group.since = Instant::now();
        self.next_group += 1;
        self.uncore.push(group);
        Ok(id)
    }

    /// The run directory: where RMID claims, named classes, journals and `msr.lock` live.
    pub fn run_dir(&self) -> Option<&Path> {
        self.run.as_ref().map(|(_, dir)| dir.path())
    }

    /// Takes `<run dir>/msr.lock` (nothing without a run directory).
    ///
    /// # Errors
    /// [`MsrError::Locked`] after the lock timeout; [`MsrError::Lock`].
    pub fn hold_writers(&mut self) -> Result<(), MsrError> {
        let Some((lock, _)) = &mut self.run else {
            return Ok(());
        };
        // What is left of the one timeout (nothing after a failed hold: one try).
        lock.set_timeout(self.lock_timeout.saturating_sub(self.lock_waited));
        match lock.hold() {
            Ok(()) => {
                self.lock_waited = Duration::ZERO;
                Ok(())
            }
            Err(LockWaitError::Timeout { .. }) => {
                self.lock_waited = self.lock_timeout;
                Err(MsrError::Locked {
                    path: lock.path().to_owned(),
                    timeout: self.lock_timeout,
                })
            }
            Err(LockWaitError::Io(source)) => Err(MsrError::Lock {
                path: lock.path().to_owned(),
                source,
            }),
        }
    }

    /// Gives back one [`MsrBackend::hold_writers`]; `msr.lock` is unlocked with the last.
    pub fn release_writers(&mut self) {
        if let Some((lock, _)) = &mut self.run {
            lock.release();
        }
    }

    /// Why allocation can only be reset ([`MsrBackend::cdp_inconsistency`]), if it can.
    pub fn needs_reset(&self) -> Option<String> {
        self.cdp_inconsistency()
    }

    /// The COS `name` stands for (recorded in `<run dir>/msr-classes`, or bound in this
    /// process), else the lowest free one ([`rdt_core::transaction::free_classes`], not
    /// another name's), bound in this process: a plan that claims the name
    /// ([`BackendExt::claim_class`]) records it when applied. The record lives as long as the
    /// run directory (`/run` is emptied at boot, as the registers are).
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) when no class is free;
    /// register reads.
    pub fn class_named(&mut self, name: &str) -> Result<ClassId, MsrError> {
        if let Some((c, _)) = self.names.iter().find(|(_, n)| *n == name) {
            return Ok(*c);
        }
        let taken: Vec<ClassId> = self.names.keys().copied().collect();
        let n = self.caps.classes(Interface::Msr);
        let class = rdt_core::transaction::free_classes(self, &taken)?
            .first()
            .copied()
            .ok_or(LimitError::ClassOutOfRange {
                resource: "free class of service",
                class: ClassId::new(n),
                num_classes: n,
            })?;
        self.bind_class(class, name)?;
        Ok(class)
    }

    /// Makes `class` stand for `name` in this process (another name of that class, and
    /// another class of that name, go).
    ///
    /// # Errors
    /// A class beyond the class count.
    pub fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), MsrError> {
        self.caps.check_class(Interface::Msr, class)?;
        self.names.retain(|_, n| n != name);
        self.names.insert(class, name.to_owned());
        Ok(())
    }

    /// The named classes known to this process and recorded in `msr-classes`, by class.
    pub fn class_names(&self) -> Vec<(ClassId, String)> {
        self.names.iter().map(|(c, n)| (*c, n.clone())).collect()
    }

    /// The names recorded in `<run dir>/msr-classes` (as read at open and changed by this
    /// process since).
    pub fn own_class_names(&self) -> Vec<(ClassId, String)> {
        self.names
            .iter()
            .filter(|(_, n)| self.own.contains(*n))
            .map(|(c, n)| (*c, n.clone()))
            .collect()
    }

    /// Binds `name` to `class` and records it in `<run dir>/msr-classes` (MSR has no
    /// groups: `make_group` changes nothing).
    ///
    /// # Errors
    /// A class beyond the class count; [`MsrError::Names`] when the record cannot be
    /// written; the writers' lock.
    pub fn claim_class(
        &mut self,
        class: ClassId,
        name: &str,
        make_group: bool,
    ) -> Result<(), MsrError> {
        let _ = make_group;
        self.bind_class(class, name)?;
        self.update_names(|v| {
            v.retain(|(c, n)| *c != class && n != name);
            v.push((class, name.to_owned()));
        })?;
        self.own.insert(name.to_owned());
        Ok(())
    }

    /// Drops `name` from `<run dir>/msr-classes`, with any other line of its class (a
    /// second name of one class is a damaged record: it would hold the class once this one
    /// is gone), and unbinds it; the class's registers are left as they are (a plan sets
    /// them back first).
    ///
    /// # Errors
    /// [`MsrError::Names`] when the record cannot be written; the writers' lock.
    pub fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), MsrError> {
        self.update_names(|v| v.retain(|(c, n)| n != name && *c != class))?;
        self.own.remove(name);
        self.names.retain(|_, n| n != name);
        Ok(())
    }

    /// For every group, every L3 domain it spans and every hardware event: WRMSR
    /// IA32_QM_EVTSEL (`rmid << 32 | event`), RDMSR IA32_QM_CTR on the group's lowest CPU
    /// in that domain; plus one PMU read per CPU when IPC or LLC misses are monitored.
    ///
    /// # Errors
    /// A read or write error of the `MsrIo` (not the Error/Unavailable flags of
    /// IA32_QM_CTR: those make the value `None`).
    pub fn poll(&mut self) -> Result<(), MsrError> {
        let Self {
            io,
            pmu,
            groups,
            uncore,
            ..
        } = self;
        let at = Instant::now(); // one timestamp for every group of the poll
        for g in groups {
            g.poll(io, pmu, at)?;
        }
        for g in uncore {
            g.poll(io, at)?;
        }
        Ok(())
    }

    /// Forgets the group and writes RMID 0 back into its CPUs' IA32_PQR_ASSOC (COS kept).
    ///
    /// # Errors
    /// [`RequestError::NoSuchGroup`](rdt_core::RequestError::NoSuchGroup); otherwise the first read or write error (every CPU is
    /// still attempted and the group is forgotten).
    pub fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), MsrError> {
        if let Ok(i) = self.uncore.binary_search_by_key(&group, |g| g.id) {
            // pqos `uncore_mon_stop`: box control "reset control" of each event's CHA on
            // each socket; every one is attempted, the first error returned
            let g = self.uncore.remove(i);
            let mut first = Ok(());
            for &(_, cpu) in &g.sockets {
                for e in &g.events {
                    let r = uncore::stop(&mut self.io, cpu, e);
                    if first.is_ok() {
                        first = r;
                    }
                }
            }
            return first;
        }
        let i = self
            .groups
            .binary_search_by_key(&group, |g| g.id)
            .map_err(|_| RequestError::NoSuchGroup(group))?;
        let g = self.groups.remove(i);
        if g.contexts.is_empty() {
            return Ok(());
        }
        let released = self.release_rmids(g.cpus.iter().copied());
        let unclaimed = self.claims.as_mut().map_or(Ok(()), |c| c.remove(g.cpus));
        released.and(unclaimed)
    }
}

impl<M: MsrIo, P: PmuSource> Backend for MsrBackend<M, P> {
    type Error = MsrError;

    fn interface(&self) -> Interface {
        Interface::Msr
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, MsrError> {
        domains
            .iter()
            .map(|&d| self.read_cat_domain(resource, d))
            .collect()
    }

    fn set_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), MsrError> {
        self.write_cat_masks(resource, masks)
    }

    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, MsrError> {
        domains
            .iter()
            .map(|&d| self.read_bandwidth_domain(resource, d))
            .collect()
    }

    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, MsrError> {
        self.write_bandwidth_limits(resource, limits)
    }

    /// One read of IA32_PQR_ASSOC per CPU: COS from bits 63:32, RMID from bits 9:0.
    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), MsrError>)>, MsrError> {
        let mut out = Vec::new();
        for cpu in cpus.iter() {
            self.check_cpu(cpu)?;
            out.push((cpu, self.read_association(cpu)));
        }
        Ok(out)
    }

    /// One read-modify-write of IA32_PQR_ASSOC per CPU, ascending; every CPU
    /// and the class are checked first.
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), MsrError> {
        for cpu in cpus.iter() {
            self.check_cpu(cpu)?;
        }
        self.caps.check_class(Interface::Msr, class)?;
        for cpu in cpus.iter() {
            self.associate_one(cpu, class)?;
        }
        Ok(())
    }

    fn reset(&mut self, what: &Reset) -> Result<(), MsrError> {
        match what {
            Reset::Allocation(cfg) => self.reset_alloc(*cfg),
            Reset::Monitoring => self.reset_rmids(),
        }
    }

    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<MsrError>> {
        start_one_by_one(
            self,
            groups.len(),
            |b, i| b.start_locked(&groups[i].0, groups[i].1),
            |b, id| {
                let _ = b.stop_monitoring(id);
            },
        )
    }

    fn poll(&mut self) -> Result<(), MsrError> {
        MsrBackend::poll(self)
    }

    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        if let Ok(i) = self.groups.binary_search_by_key(&group, |g| g.id) {
            return Some(self.groups[i].acc.values());
        }
        let i = self.uncore.binary_search_by_key(&group, |g| g.id).ok()?;
        Some(self.uncore[i].values())
    }

    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), MsrError> {
        MsrBackend::stop_monitoring(self, group)
    }

    fn writers(&mut self) -> Option<&mut dyn Writers<MsrError>> {
        Some(self)
    }

    fn names(&mut self) -> Option<&mut dyn NamedClasses<MsrError>> {
        Some(self)
    }

    fn msr(&mut self) -> Option<&mut dyn MsrOps<MsrError>> {
        Some(self)
    }
}

impl<M: MsrIo, P: PmuSource, E: From<MsrError>> MsrOps<E> for MsrBackend<M, P> {
    fn start_uncore_monitoring(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, E> {
        Ok(MsrBackend::start_uncore_monitoring(self, sockets, events)?)
    }

    fn mba_thread_throttle(&mut self, domain: CacheDomain) -> Result<Option<ThreadThrottle>, E> {
        Ok(MsrBackend::mba_thread_throttle(self, domain)?)
    }

    fn needs_reset(&self) -> Option<String> {
        MsrBackend::needs_reset(self)
    }
}

impl<M: MsrIo, P: PmuSource, E: From<MsrError>> NamedClasses<E> for MsrBackend<M, P> {
    fn class_named(&mut self, name: &str) -> Result<ClassId, E> {
        Ok(MsrBackend::class_named(self, name)?)
    }

    fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        Ok(MsrBackend::bind_class(self, class, name)?)
    }

    fn class_names(&self) -> Vec<(ClassId, String)> {
        MsrBackend::class_names(self)
    }

    fn own_class_names(&self) -> Vec<(ClassId, String)> {
        MsrBackend::own_class_names(self)
    }

    fn claim_class(&mut self, class: ClassId, name: &str, make_group: bool) -> Result<(), E> {
        Ok(MsrBackend::claim_class(self, class, name, make_group)?)
    }

    fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        Ok(MsrBackend::release_class(self, class, name)?)
    }
}

impl<M: MsrIo, P: PmuSource, E: From<MsrError>> Writers<E> for MsrBackend<M, P> {
    fn run_dir(&self) -> Option<&Path> {
        MsrBackend::run_dir(self)
    }

    fn hold_writers(&mut self) -> Result<(), E> {
        Ok(MsrBackend::hold_writers(self)?)
    }

    fn release_writers(&mut self) {
        MsrBackend::release_writers(self);
    }
}

#[cfg(test)]
mod tests;

//! [`MsrBackend`]: the [`Backend`] trait implemented with RDMSR/WRMSR.
//!
//! By concern, as in rdt-resctrl's backend: [`alloc`] (CAT masks, CDP, MBA and SMBA limits,
//! the allocation reset), [`assoc`] (CPUs into classes through IA32_PQR_ASSOC),
//! [`monitoring`] (groups, polls, uncore groups), [`rmid`] (picking, splitting and giving
//! back RMIDs, claims of dead runs), [`named`] (named classes and their record). Here: the
//! struct, its construction, the run directory and the writers' lock, and the trait impls.
//! The operations of [`Backend`] and its abilities ([`MsrOps`], [`NamedClasses`],
//! [`Writers`]) are inherent methods of those modules with this backend's own error; the
//! trait impls here forward to them.

mod abmc;
mod alloc;
mod assoc;
mod monitoring;
mod named;
mod rmid;

pub use monitoring::QM_CTR_ATTEMPTS;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdt_core::{
    Backend, CacheDomain, Capabilities, CatClass, CatResource, ClassId, CpuSet, GroupStartError,
    Interface, LogicalCpu, MbaClass, MbaResource, MonEvents, MonGroupId, MonValues, MsrOps,
    NamedClasses, NoPmu, PmuSource, RequestError, Reset, Rmid, RmidEvent, SncMode, SncState,
    ThreadThrottle, Topology, Writers, start_one_by_one,
};
use rdt_host::runfile::{DEFAULT_LOCK_TIMEOUT, LockWaitError, NameRecord, RunDirPath, WriterLock};

use crate::claims::Claims;
use crate::regs;
use crate::uncore::UncoreGroup;
use crate::{MsrError, MsrIo};

use self::monitoring::Group;
use self::named::NAMES_FILE;

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
/// #     l3_cache: None, l2_cache: None, pmu: PmuCaps::default(), uncore_pcie: false,
/// #     snc: None, mba40: None, l3_iordt: None, mon_iordt: None,
/// #     amd_mbm: Default::default() };
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
    /// RMIDs held outside IA32_PQR_ASSOC that no new group may take: the I/O RDT channels'
    /// tags ([`MsrBackend::reserve_rmids`]).
    reserved: Vec<u32>,
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
    /// Named classes ([`BackendExt::class_named`](rdt_core::BackendExt::class_named)): those recorded in the run directory
    /// (read by [`MsrBackend::with_run_dir`]) and those bound in this process.
    names: BTreeMap<ClassId, String>,
    /// The names claimed ([`BackendExt::claim_class`](rdt_core::BackendExt::claim_class)): recorded in `<run dir>/msr-classes`.
    own: std::collections::BTreeSet<String>,
    /// Per CAT resource (L3, L2): the domains with CDP on, when CDP is on in some domains and
    /// off in others (a reset killed half-way); `None` when consistent.
    cdp_split: [Option<Vec<CacheDomain>>; 2],
    /// Sub-NUMA Clustering nodes per L3 domain whose RMIDs are split (1 without SNC, or in
    /// legacy mode): the most NUMA nodes among the CPUs of one L3 domain (the kernel's
    /// `snc_nodes_per_l3_cache`), unless MSR_RMID_SNC_CONFIG bit 0 says legacy mode.
    snc: u32,
    /// The L3 domains where this process enabled ABMC (L3_QOS_EXT_CFG bit 0) to assign its
    /// groups' counters: disabled again when their last counter goes ([`self::abmc`]).
    abmc_enabled: std::collections::BTreeSet<CacheDomain>,
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

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// A backend over `io` for a platform with capabilities `caps` and online CPUs
    /// `topology`, with IPC and LLC misses from `pmu` ([`NoPmu`] if there is none).
    ///
    /// Reads the CDP enable bit (IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0) on the lowest CPU
    /// of every L3 / L2 domain where CPUID reports CDP, and records it in
    /// [`CatCaps::cdp_enabled`](rdt_core::CatCaps::cdp_enabled) (CPUID cannot see it).
    /// Where the CPUs of one L3 domain are in several NUMA nodes (Sub-NUMA Clustering),
    /// reads MSR_RMID_SNC_CONFIG on the first L3 domain's CPU and records the SNC state in
    /// [`Capabilities::snc`](rdt_core::Capabilities::snc).
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
            reserved: Vec::new(),
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
            abmc_enabled: std::collections::BTreeSet::new(),
        };
        for resource in [CatResource::L3, CatResource::L2] {
            this.read_cdp(resource)?;
        }
        this.caps.mba40 = this.read_mba40();
        this.caps.l3_iordt = this.read_l3_iordt();
        this.caps.mon_iordt = this.read_mon_iordt();
        if this.snc > 1 {
            // RMID sharing mode unless the register says legacy (bit 0); a CPU without the
            // register (EIO) is taken to be in the mode Linux sets
            let cpu = this.l3.first().map(|d| d.cpu).unwrap_or_default();
            let mode = if this
                .io
                .read(cpu, regs::MSR_RMID_SNC_CONFIG)
                .is_ok_and(|v| v & 1 == 1)
            {
                SncMode::Local
            } else {
                SncMode::Total
            };
            this.caps.snc = Some(SncState {
                nodes_per_l3: this.snc,
                mode,
            });
            if mode == SncMode::Local {
                this.snc = 1;
            }
        }
        Ok(this)
    }

    /// Keeps this process's run state in `dir` (a root-only directory that outlives the
    /// process, `/run/rdt` on a host; [`BackendExt::run_dir`](rdt_core::BackendExt::run_dir)): the RMIDs its monitoring
    /// groups give CPUs, so that a run killed before it stopped its groups can be cleaned
    /// up by the next one ([`MsrBackend::reclaim_dead_runs`]); the journal of a transaction
    /// in progress; and the writers' lock `msr.lock`, which transactions and
    /// [`BackendExt::start_monitoring`](rdt_core::BackendExt::start_monitoring) hold so that two processes' changes serialize (waiting
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

    /// Changes how long taking the writers' lock waits for another process (5 s by
    /// default): at most this in all while the lock stays held elsewhere, however many
    /// holds fail in a row (the reclaims at open, then the command); taking it starts a
    /// new wait.
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock_timeout = timeout;
        self.lock_waited = Duration::ZERO;
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
        self.read_associations(cpus)
    }

    /// One read-modify-write of IA32_PQR_ASSOC per CPU, ascending; every CPU
    /// and the class are checked first.
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), MsrError> {
        self.write_associations(cpus, class)
    }

    fn reset(&mut self, what: &Reset) -> Result<(), MsrError> {
        match what {
            Reset::Allocation(cfg) => self.reset_alloc(*cfg),
            Reset::Monitoring(cfg) => {
                self.caps.check_mon_reset(Interface::Msr, cfg)?;
                self.reset_rmids()?;
                self.reset_mon_config(*cfg)
            }
        }
    }

    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<MsrError>> {
        let mut degraded: Vec<CpuSet> = Vec::new();
        let started = start_one_by_one(
            self,
            groups.len(),
            |b, i| {
                let (cpus, events) = (&groups[i].0, groups[i].1);
                match b.start_locked(cpus, events) {
                    // pqos monitors every group it is asked for: one whose L3 domain has no
                    // free ABMC counter left counts what needs none (occupancy, the PMU)
                    Err(MsrError::NotEnoughMbmCounters { .. })
                        if !events.difference(MonEvents::MBM).is_empty() =>
                    {
                        let id = b.start_locked(cpus, events.difference(MonEvents::MBM))?;
                        degraded.push(cpus.clone());
                        Ok(id)
                    }
                    r => r,
                }
            },
            |b, id| {
                let _ = b.stop_monitoring(id);
            },
        )?;
        if !degraded.is_empty() {
            log::warn!("{}", rdt_core::monitor::no_mbm_counter_warning(&degraded));
        }
        Ok(started)
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

    fn set_mbm_event_config(&mut self, event: RmidEvent, bits: u32) -> Result<(), E> {
        Ok(MsrBackend::set_mbm_event_config(self, event, bits)?)
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
mod test_support;
#[cfg(test)]
mod tests;

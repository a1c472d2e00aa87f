//! The controller on a platform: sets up the best-effort classes, monitors every workload,
//! and turns the [`Engine`]'s decisions into journaled transactions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rdt_config::policy::PodSelector;
use rdt_config::policy::{Policy, Target};
use rdt_config::{ClassSpec, Config, ConfigError, ConfigPlanError};
use rdt_core::transaction::{AllocState, Change, MaskScope, Plan, PlanError, Restored};
use rdt_core::{
    Backend, BackendExt, CacheBitmask, CacheDomain, CatResource, ClassId, CpuSet, MbaKind,
    MbaLimit, MonEvents, MonGroupId, MonValues, TaskId,
};
use rdt_host::pods::{CGROUP_ROOT, PODS_FILE, PodsRecord};
use rdt_host::proc::ProcFs;
use rdt_host::runfile::{remove_run_file, write_run_file};
use rdt_host::transaction::ApplyPlan;

pub use crate::engine::AMD_UNIT_BYTES_PER_S;
use crate::engine::{Decision, Engine, Facts, MbaScale, Reading, Setting};
use crate::event::{Event, Metrics, Observed};
use crate::regions::RegionThrottle;
use crate::stop::Stopper;

/// Why the controller cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum AgentError<E: std::error::Error + 'static> {
    /// The policy does not fit this platform (naming file, line and key where it can).
    #[error(transparent)]
    Policy(#[from] ConfigError),
    /// The platform lacks what the policy needs.
    #[error("{0}")]
    Platform(String),
    /// Reading or writing the platform failed.
    #[error("{context}: {source}")]
    Backend {
        /// What was being done.
        context: &'static str,
        /// The backend's error.
        source: E,
    },
    /// A stop was asked ([`Stopper::stop`]) while the controller started: it made what it
    /// had made by then (best-effort classes stay as they are) and started no monitoring.
    #[error("stopped while starting")]
    Stopped,
    /// The events could not be handed on ([`Agent::run`]'s `on_tick` failed).
    #[error("writing the events: {0}")]
    Events(#[source] std::io::Error),
}

impl<E: std::error::Error + 'static> AgentError<E> {
    const fn backend(context: &'static str) -> impl FnOnce(E) -> Self {
        move |source| Self::Backend { context, source }
    }
}

/// The file of the platform's run directory where the agent keeps its metrics (OpenMetrics
/// text, replaced atomically each interval, removed when it stops), for the exporter to
/// serve with the platform's (`rdt-exporter` reads it at each scrape).
pub const METRICS_FILE: &str = "control.prom";

/// A class is MBA-throttled, and loses ways, in the domains where its memory traffic is at
/// least this share of its busiest domain's: a class spanning sockets or CCXs whose
/// aggressor is in one of them keeps its bandwidth and cache in the others (a batch
/// next to it moves a few % of its traffic), while an aggressor spread unevenly over two
/// domains (2 CPUs and 1) is squeezed in both.
pub const BUSY_DOMAIN_SHARE: f64 = 0.25;

/// The core of a CPU: (package, core id), or, where the topology has no core ids (sysfs),
/// its L2 instance (private to a core on every part whose MBA applies per core).
fn core_of(p: &rdt_core::CpuPlacement) -> (u32, u32, bool) {
    p.core
        .map_or((p.package, p.l2.get(), false), |c| (p.package, c, true))
}

/// For each best-effort workload (with its CPUs as resolved), the protected CPUs its CPUs
/// share a core with, as `(its CPU, the protected CPU, the protected workload)`: where MBA
/// applies per core, throttling it throttles them.
fn shared_cores(
    topology: &rdt_core::Topology,
    protected: &[ClassSpec],
    best: &[ClassSpec],
) -> Vec<Vec<(u32, u32, String)>> {
    type Core = (u32, u32, bool);
    let mut cores: BTreeMap<Core, Vec<(u32, &str)>> = BTreeMap::new();
    for w in protected {
        for c in w.cpus.iter() {
            if let Some(p) = topology.get(c) {
                cores
                    .entry(core_of(p))
                    .or_default()
                    .push((c.get(), w.name.as_str()));
            }
        }
    }
    best.iter()
        .map(|b| {
            let mut out = Vec::new();
            for c in b.cpus.iter() {
                let Some(p) = topology.get(c) else { continue };
                for (pc, name) in cores.get(&core_of(p)).into_iter().flatten() {
                    if *pc != c.get() {
                        out.push((c.get(), *pc, (*name).to_owned()));
                    }
                }
            }
            out
        })
        .collect()
}

/// The L3 domains `cpus` span (all of them for a workload without CPUs: its tasks may run
/// anywhere).
fn span(topology: &rdt_core::Topology, cpus: &CpuSet) -> u32 {
    let domains: std::collections::BTreeSet<CacheDomain> = cpus
        .iter()
        .filter_map(|c| topology.get(c).and_then(|p| p.l3))
        .collect();
    if domains.is_empty() {
        u32::try_from(topology.l3_domains().len()).unwrap_or(u32::MAX)
    } else {
        u32::try_from(domains.len()).unwrap_or(u32::MAX)
    }
}

/// `workload` with the processes of its cgroup (v2) directory `cgroup` as tasks too.
fn with_cgroup<E: std::error::Error + 'static>(
    workload: &ClassSpec,
    cgroup: Option<&Path>,
) -> Result<ClassSpec, AgentError<E>> {
    let mut spec = workload.clone();
    if let Some(dir) = cgroup {
        let pids = rdt_host::proc::cgroup_processes(dir).map_err(|e| {
            AgentError::Platform(format!(
                "workload {:?}: cgroup {}: {e}",
                workload.name,
                dir.display()
            ))
        })?;
        spec.tasks
            .extend(pids.into_iter().filter(|t| !workload.tasks.contains(t)));
    }
    Ok(spec)
}

/// The tasks of the Kubernetes containers `selector` picks for workload `name`, from the NRI
/// plugin's pod record in `run_dir` ([`rdt_host::pods::PodsRecord::selected_tasks`], their
/// cgroups under `cgroup_root`).
///
/// No record yet (the plugin has not written one) or no running container picked is not an
/// error: the workload has no pod task yet, and the controller picks them up when the
/// record changes ([`Agent::tick`]); a log line says so.
///
/// # Errors
/// No run directory (no plugin can record this node's pods), or a record that does not
/// read: a message naming the workload.
fn pod_tasks(
    name: &str,
    selector: &PodSelector,
    run_dir: Option<&Path>,
    proc: &ProcFs,
    cgroup_root: &Path,
) -> Result<Vec<rdt_core::TaskId>, String> {
    let dir = run_dir.ok_or_else(|| {
        format!(
            "workload {name:?}: pods: this platform has no run directory, where the NRI \
             plugin (rdt-agent nri) records the node's pods"
        )
    })?;
    let record = match PodsRecord::read(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            log::info!(
                "workload {name:?}: pods: no pod record in {} yet (is rdt-agent nri running \
                 on this node?): waiting for its pods",
                dir.display()
            );
            return Ok(Vec::new());
        }
        Err(e) => return Err(format!("workload {name:?}: pods: {e}")),
    };
    let tasks = record
        .selected_tasks(selector, proc, cgroup_root)
        .map_err(|e| format!("workload {name:?}: pods: {e}"))?;
    if tasks.is_empty() {
        log::info!(
            "workload {name:?}: pods: no running container of this node's pods matches \
             {selector:?} yet: waiting for its pods"
        );
    }
    Ok(tasks)
}

/// A workload with its members, and the tasks it has without its pods.
type WithFixed = (ClassSpec, Vec<TaskId>);

/// `workload` with its cgroup's processes ([`with_cgroup`]) and its pods' tasks
/// ([`pod_tasks`]) as tasks too, and the tasks it had without its pods.
fn with_members<E: std::error::Error + 'static>(
    workload: &ClassSpec,
    cgroup: Option<&Path>,
    pods: Option<&PodSelector>,
    run_dir: Option<&Path>,
    proc: &ProcFs,
) -> Result<WithFixed, AgentError<E>> {
    let mut spec = with_cgroup(workload, cgroup)?;
    let fixed = spec.tasks.clone();
    if let Some(selector) = pods {
        let tasks = pod_tasks(
            &workload.name,
            selector,
            run_dir,
            proc,
            Path::new(CGROUP_ROOT),
        )
        .map_err(AgentError::Platform)?;
        let have: std::collections::BTreeSet<_> = spec.tasks.iter().copied().collect();
        spec.tasks
            .extend(tasks.into_iter().filter(|t| !have.contains(t)));
    }
    Ok((spec, fixed))
}

/// Starts one monitoring group per workload, in order: by its CPUs, or (a workload without
/// CPUs, on the OS interface) by the threads of its tasks and of the processes it names.
/// A workload without CPUs or tasks that `waits` for its pods gets no group (`None`) until
/// they come ([`Agent::tick`]).
fn start_groups<B: Backend>(
    backend: &mut B,
    workloads: &[&ClassSpec],
    waits: &[bool],
    proc: &ProcFs,
) -> Result<Vec<Option<MonGroupId>>, AgentError<B::Error>> {
    let events = backend.capabilities().supported_events() & EVENTS;
    let mut by_cpus = Vec::new();
    let mut by_tasks = Vec::new();
    let mut waiting = vec![false; workloads.len()];
    for (i, w) in workloads.iter().enumerate() {
        if !w.cpus.is_empty() {
            by_cpus.push((w.cpus.clone(), events));
            continue;
        }
        let mut tasks = w.tasks.clone();
        for name in &w.processes {
            tasks.extend(proc.processes_named(name).map_err(|e| {
                AgentError::Platform(format!("workload {:?}: reading /proc: {e}", w.name))
            })?);
        }
        tasks.sort_unstable();
        tasks.dedup();
        if tasks.is_empty() && waits.get(i).copied().unwrap_or(false) {
            waiting[i] = true;
            continue;
        }
        if tasks.is_empty() {
            return Err(AgentError::Platform(format!(
                "workload {:?}: no task to monitor (no process named {:?} runs)",
                w.name, w.processes
            )));
        }
        by_tasks.push((tasks, events));
    }
    let cpu_groups = backend
        .start_monitoring_many(&by_cpus)
        .map_err(|e| AgentError::Platform(format!("starting monitoring: {e}")))?;
    let task_groups = if by_tasks.is_empty() {
        Ok(Vec::new())
    } else if let Some(os) = backend.os() {
        os.start_monitoring_tasks_many(&by_tasks)
            .map_err(|e| format!("starting monitoring: {e}"))
    } else {
        Err(
            "a workload without `cpus` is monitored by its tasks, which needs the OS \
             interface (resctrl)"
                .to_owned(),
        )
    };
    let task_groups = match task_groups {
        Ok(g) => g,
        Err(e) => {
            // all or none: the CPU groups started go again
            for g in cpu_groups {
                let _ = backend.stop_monitoring(g);
            }
            return Err(AgentError::Platform(e));
        }
    };
    let (mut cpu_groups, mut task_groups) = (cpu_groups.into_iter(), task_groups.into_iter());
    Ok(workloads
        .iter()
        .zip(waiting)
        .map(|(w, waiting)| {
            if waiting {
                None
            } else if w.cpus.is_empty() {
                task_groups.next()
            } else {
                cpu_groups.next()
            }
        })
        .collect())
}

/// One workload named by a pod selector, as last resolved.
#[derive(Debug)]
struct PodMembers {
    /// Its index among the monitoring groups (protected first, then best-effort).
    index: usize,
    name: String,
    selector: PodSelector,
    /// The best-effort class its pods' tasks are put in; `None` for a protected workload
    /// and in advisory mode.
    class: Option<ClassId>,
    /// Monitored by its tasks (it has no CPUs): its group follows its pods.
    by_tasks: bool,
    /// Its tasks that are not its pods' (listed, of its cgroup).
    fixed: Vec<TaskId>,
    /// Its pods' tasks at the last resolution.
    tasks: BTreeSet<TaskId>,
}

/// The workloads named by pod selectors, followed as the node's pods come and go: each
/// interval the pod record's (modification time, length) is looked at, and only when it
/// changed are the selectors resolved again ([`Agent::tick`]).
#[derive(Debug)]
struct PodWatch {
    run_dir: PathBuf,
    proc: ProcFs,
    cgroup_root: PathBuf,
    /// The record's stamp at the last resolution (`None`: there was none).
    seen: Option<(Option<SystemTime>, u64)>,
    members: Vec<PodMembers>,
}

impl PodWatch {
    /// The watch of the selector workloads among `workloads` (resolved at start: their
    /// tasks are `fixed` and their pods'); `None` when no workload names pods.
    fn new(
        run_dir: &Path,
        proc: &ProcFs,
        workloads: &[&ClassSpec],
        selectors: &[Option<&PodSelector>],
        fixed: &[Vec<TaskId>],
        classes: &[ClassId],
        advisory: bool,
    ) -> Option<Self> {
        let np = workloads.len() - classes.len();
        let members: Vec<PodMembers> = workloads
            .iter()
            .zip(selectors)
            .zip(fixed)
            .enumerate()
            .filter_map(|(index, ((w, sel), fixed))| {
                let selector = (*sel)?.clone();
                let tasks = w
                    .tasks
                    .iter()
                    .copied()
                    .filter(|t| !fixed.contains(t))
                    .collect();
                Some(PodMembers {
                    index,
                    name: w.name.clone(),
                    selector,
                    class: index
                        .checked_sub(np)
                        .and_then(|i| classes.get(i).copied())
                        .filter(|_| !advisory),
                    by_tasks: w.cpus.is_empty(),
                    fixed: fixed.clone(),
                    tasks,
                })
            })
            .collect();
        if members.is_empty() {
            return None;
        }
        let mut watch = Self {
            run_dir: run_dir.to_path_buf(),
            proc: proc.clone(),
            cgroup_root: PathBuf::from(CGROUP_ROOT),
            seen: None,
            members,
        };
        watch.seen = watch.stamp();
        Some(watch)
    }

    /// The pod record's (modification time, length) now; `None` without one.
    fn stamp(&self) -> Option<(Option<SystemTime>, u64)> {
        std::fs::metadata(self.run_dir.join(PODS_FILE))
            .ok()
            .map(|m| (m.modified().ok(), m.len()))
    }
}

/// The events the controller monitors: occupancy, memory traffic and IPC, those the
/// platform has.
const EVENTS: MonEvents = MonEvents::LLC_OCCUPANCY
    .union(MonEvents::MBM_TOTAL)
    .union(MonEvents::MBM_LOCAL)
    .union(MonEvents::IPC);

/// The controller running on a platform ([module docs](self)). It holds no backend: each
/// call takes the one it was started on.
#[derive(Debug)]
pub struct Agent {
    engine: Engine,
    /// Monitoring groups: the protected workloads', then the best-effort ones'; `None` for
    /// a workload of pods none of which runs yet.
    groups: Vec<Option<MonGroupId>>,
    /// The workloads named by pod selectors, followed as the node's pods come and go.
    pods: Option<PodWatch>,
    /// The best-effort workloads' named classes.
    classes: Vec<ClassId>,
    /// The L3 domains whose ways are acted on: those of the protected workloads' CPUs.
    domains: Vec<CacheDomain>,
    /// Per best-effort class, the L3 (MBA) domains where it may be throttled: those of its
    /// own CPUs in a package a protected workload runs in (its memory traffic contends
    /// there).
    mba_domains: Vec<Vec<CacheDomain>>,
    /// Per best-effort class, its MBA limit in each of its MBA domains at the last read, in
    /// the part's unit ([`Facts::mba`]).
    mba_now: Vec<BTreeMap<CacheDomain, u32>>,
    /// Per best-effort class, its memory traffic in each of its MBA domains over the last
    /// interval, bytes per second.
    traffic_now: Vec<BTreeMap<CacheDomain, f64>>,
    /// Per best-effort class, its L3 ways in each domain of `domains` at the last read.
    ways_now: Vec<BTreeMap<CacheDomain, u32>>,
    /// Per best-effort class, its LLC occupancy in each domain of `domains` at the last
    /// poll, bytes.
    llc_now: Vec<BTreeMap<CacheDomain, u64>>,
    /// The full L3 mask.
    full: CacheBitmask,
    mba: Option<MbaKind>,
    /// The best-effort classes throttled by memory region instead of MBA (`mba_regions`).
    regions: RegionThrottle,
    advisory: bool,
    /// In advisory mode, each class's allocation as the decisions so far would have left it
    /// (nothing is written, so the platform's cannot tell).
    proposed: Vec<Setting>,
    metrics: Metrics,
    last: Option<Duration>,
    /// The allocation found when the controller started, for [`Agent::restore`].
    found: AllocState,
    stopper: Stopper,
    /// What the policy asks that the controller will not do, found at start.
    warnings: Vec<String>,
}

/// How [`Agent::run`] keeps time.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions<B> {
    /// Stop once this much time has passed since the start (of the platform's clock with
    /// `advance`); `None`: until stopped.
    pub duration: Option<Duration>,
    /// Instead of sleeping an interval, advance the platform's own clock by it (a
    /// simulated platform with a virtual clock).
    pub advance: Option<fn(&mut B, Duration)>,
}

impl<B> Default for RunOptions<B> {
    fn default() -> Self {
        Self {
            duration: None,
            advance: None,
        }
    }
}

/// What one interval did: the events (one per decision) and every workload's readings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tick {
    /// One per decision, in order.
    pub events: Vec<Event>,
    /// Every workload's readings, by name.
    pub readings: BTreeMap<String, Observed>,
}

impl Agent {
    /// Starts the controller of `policy` on `backend`: checks the policy against the
    /// platform, makes each best-effort workload a named class holding its CPUs, tasks and
    /// processes (one transaction, as `pqos --apply` of those classes would: a class that
    /// exists already, after a restart, keeps its ways and MBA: the controller adopts
    /// them), and starts one monitoring group per workload. `advisory` (or the policy's)
    /// makes no class and writes nothing, ever.
    ///
    /// # Errors
    /// [`AgentError::Policy`] for a policy the platform cannot serve (no L3 CAT, a floor
    /// above the ways, MBA floors without percent MBA, members that do not exist);
    /// [`AgentError::Backend`] when the classes cannot be made or monitoring started.
    pub fn start<B: Backend>(
        backend: &mut B,
        policy: Policy,
        proc: &ProcFs,
        advisory: bool,
    ) -> Result<Self, AgentError<B::Error>> {
        Self::start_stoppable(backend, policy, proc, advisory, &Stopper::new())
    }

    /// The best-effort classes of `policy` with their members (cgroups, pods), `rest`
    /// resolved to the CPUs no workload lists.
    fn best_effort_specs<B: Backend>(
        backend: &B,
        policy: &Policy,
        run_dir: Option<&Path>,
        proc: &ProcFs,
    ) -> Result<Vec<WithFixed>, AgentError<B::Error>> {
        // The best-effort classes, with `rest` resolved to the CPUs no workload lists.
        let mut listed = CpuSet::new();
        for w in policy
            .protected
            .iter()
            .map(|p| &p.workload)
            .chain(policy.best_effort.iter().map(|b| &b.workload))
        {
            listed.union_with(&w.cpus);
        }
        let mut specs = Vec::with_capacity(policy.best_effort.len());
        for b in &policy.best_effort {
            let (mut spec, fixed) = with_members(
                &b.workload,
                b.cgroup.as_deref(),
                b.pods.as_ref(),
                run_dir,
                proc,
            )?;
            if b.rest {
                spec.cpus = backend
                    .topology()
                    .cpus()
                    .iter()
                    .map(|c| c.cpu)
                    .filter(|c| !listed.contains(*c))
                    .collect();
            }
            specs.push((spec, fixed));
        }
        Ok(specs)
    }

    /// The protected workloads of `policy` with their members (cgroups, pods).
    fn protected_specs<E: std::error::Error + 'static>(
        policy: &Policy,
        run_dir: Option<&Path>,
        proc: &ProcFs,
    ) -> Result<Vec<WithFixed>, AgentError<E>> {
        policy
            .protected
            .iter()
            .map(|p| {
                with_members(
                    &p.workload,
                    p.cgroup.as_deref(),
                    p.pods.as_ref(),
                    run_dir,
                    proc,
                )
            })
            .collect()
    }

    /// [`Agent::start`], giving up with [`AgentError::Stopped`] as soon as `stopper` is
    /// stopped: it is looked at between the steps of the start (before reading the
    /// platform's classes, before making the best-effort classes, before starting
    /// monitoring, after it: the groups started go again). The agent keeps `stopper`:
    /// [`Agent::run`] ends when it is stopped, and [`Agent::tick`] stops waiting for an
    /// application's metric.
    ///
    /// # Errors
    /// As [`Agent::start`], and [`AgentError::Stopped`].
    pub fn start_stoppable<B: Backend>(
        backend: &mut B,
        policy: Policy,
        proc: &ProcFs,
        advisory: bool,
        stopper: &Stopper,
    ) -> Result<Self, AgentError<B::Error>> {
        let check_stop = || {
            if stopper.is_stopped() {
                Err(AgentError::Stopped)
            } else {
                Ok(())
            }
        };
        check_stop()?;
        let found = AllocState::read(backend)
            .map_err(AgentError::backend("reading the allocation found at start"))?;
        let run_dir = backend.run_dir().map(Path::to_path_buf);
        let (mut facts, mba) = Self::facts(backend, &policy)?;
        let regions = RegionThrottle::check(backend, &policy).map_err(AgentError::Platform)?;
        let domains = Self::domains(backend.topology(), &policy);
        facts.domains = u32::try_from(domains.len()).unwrap_or(u32::MAX);
        let full = CacheBitmask::low_bits(facts.ways);
        let advisory = advisory || policy.advisory;
        let (specs, be_fixed): (Vec<ClassSpec>, Vec<Vec<TaskId>>) =
            Self::best_effort_specs(backend, &policy, run_dir.as_deref(), proc)?
                .into_iter()
                .unzip();
        let (shares, warnings) = Self::sibling_safety(backend, &policy, &specs);
        facts.mba_shares_protected_core = shares;
        let config = Config {
            file: policy.file.clone(),
            classes: specs.clone(),
        };
        check_stop()?;
        let classes = if advisory {
            vec![ClassId::new(0); specs.len()]
        } else {
            Self::make_classes(backend, &config, &specs, proc, stopper)?
        };
        if !advisory {
            regions
                .check_classes(backend, &policy, &classes)
                .map_err(AgentError::Platform)?;
        }
        let (protected, p_fixed): (Vec<ClassSpec>, Vec<Vec<TaskId>>) =
            Self::protected_specs(&policy, run_dir.as_deref(), proc)?
                .into_iter()
                .unzip();
        let workloads: Vec<&ClassSpec> = protected.iter().chain(&specs).collect();
        let selectors: Vec<Option<&PodSelector>> = policy
            .protected
            .iter()
            .map(|p| p.pods.as_ref())
            .chain(policy.best_effort.iter().map(|b| b.pods.as_ref()))
            .collect();
        let waits: Vec<bool> = selectors.iter().map(Option::is_some).collect();
        check_stop()?;
        let mba_domains = Self::mba_domains(backend.topology(), &policy, &specs);
        let groups = start_groups(backend, &workloads, &waits, proc)?;
        let pods = run_dir.as_ref().and_then(|dir| {
            PodWatch::new(
                dir,
                proc,
                &workloads,
                &selectors,
                &p_fixed.iter().chain(&be_fixed).cloned().collect::<Vec<_>>(),
                &classes,
                advisory,
            )
        });
        if stopper.is_stopped() {
            for g in groups.into_iter().flatten() {
                let _ = backend.stop_monitoring(g);
            }
            return Err(AgentError::Stopped);
        }
        let facts_mba = facts.mba;
        let engine = Engine::new(policy, facts);
        Ok(Self {
            engine,
            groups,
            pods,
            classes,
            domains,
            mba_now: vec![BTreeMap::new(); mba_domains.len()],
            ways_now: vec![BTreeMap::new(); mba_domains.len()],
            llc_now: vec![BTreeMap::new(); mba_domains.len()],
            traffic_now: vec![BTreeMap::new(); mba_domains.len()],
            mba_domains,
            full,
            mba,
            regions,
            advisory,
            proposed: vec![facts_mba.setting(full.ways(), facts_mba.no_limit()); specs.len()],
            metrics: Metrics::new(),
            last: None,
            found,
            stopper: stopper.clone(),
            warnings,
        })
    }

    /// Makes the best-effort classes of `config` (one transaction) unless `stopper` was
    /// stopped while the platform was read; their ids in `specs` order.
    fn make_classes<B: Backend>(
        backend: &mut B,
        config: &Config,
        specs: &[ClassSpec],
        proc: &ProcFs,
        stopper: &Stopper,
    ) -> Result<Vec<ClassId>, AgentError<B::Error>> {
        let planned = config.plan(backend, proc).map_err(|e| match e {
            ConfigPlanError::Config(e) => AgentError::Policy(e),
            ConfigPlanError::Backend(e) => AgentError::backend("reading the platform")(e),
        })?;
        let ids = specs
            .iter()
            .map(|s| {
                planned
                    .classes
                    .iter()
                    .find(|(n, _)| *n == s.name)
                    .map_or(ClassId::new(0), |(_, c)| *c)
            })
            .collect();
        if stopper.is_stopped() {
            return Err(AgentError::Stopped);
        }
        planned.plan.apply(backend).into_result().map_err(|e| {
            AgentError::Platform(format!("setting up the best-effort classes: {e}"))
        })?;
        Ok(ids)
    }

    /// The L3 domains the controller acts in: those of the protected workloads' CPUs (the
    /// contention it defends against is there), or every one when a protected workload has
    /// no CPUs (its tasks may run anywhere).
    fn domains(topology: &rdt_core::Topology, policy: &Policy) -> Vec<CacheDomain> {
        let mut domains = std::collections::BTreeSet::new();
        for p in &policy.protected {
            if p.workload.cpus.is_empty() {
                return topology.l3_domains();
            }
            domains.extend(
                p.workload
                    .cpus
                    .iter()
                    .filter_map(|c| topology.get(c).and_then(|p| p.l3)),
            );
        }
        if domains.is_empty() {
            topology.l3_domains()
        } else {
            domains.into_iter().collect()
        }
    }

    /// Per best-effort workload (CPUs resolved in `specs`), the L3 domains where its MBA is
    /// set: those of its CPUs (all, for one without CPUs) in a package where a protected
    /// workload runs (every package, when a protected workload has no CPUs). MBA limits
    /// the traffic of the domain's cores to memory: a class is throttled where it runs, in
    /// the memory domain it shares with the protected, not in the protected's L3 domains
    /// (on AMD, one per CCX, they are other CCXs).
    fn mba_domains(
        topology: &rdt_core::Topology,
        policy: &Policy,
        specs: &[ClassSpec],
    ) -> Vec<Vec<CacheDomain>> {
        let any_package = policy.protected.iter().any(|p| p.workload.cpus.is_empty());
        let packages: std::collections::BTreeSet<u32> = policy
            .protected
            .iter()
            .flat_map(|p| p.workload.cpus.iter())
            .filter_map(|c| topology.get(c).map(|p| p.package))
            .collect();
        specs
            .iter()
            .map(|spec| {
                let domains: std::collections::BTreeSet<CacheDomain> = topology
                    .cpus()
                    .iter()
                    .filter(|p| spec.cpus.is_empty() || spec.cpus.contains(p.cpu))
                    .filter(|p| any_package || packages.contains(&p.package))
                    .filter_map(|p| p.l3)
                    .collect();
                domains.into_iter().collect()
            })
            .collect()
    }

    /// Per best-effort workload (CPUs resolved in `specs`): whether its MBA would throttle
    /// a core a protected workload runs on. Only on a part whose MBA applies per core
    /// ([`rdt_core::MbaCaps::thread_throttle`]: Intel before MBA 3.0, Skylake-SP, Cascade
    /// Lake: a core runs at its threads' strongest delay). Such a workload that the policy
    /// lets the controller throttle (`min_mba_percent`) is accepted with a warning naming
    /// the CPUs: the engine never MBA-throttles it ([`crate::Facts::mba_shares_protected_core`])
    /// but still shrinks its L3 ways, which do not slow the sibling thread (issue 32, rule 4).
    /// Also returns the warnings, one per such workload.
    fn sibling_safety(
        backend: &impl Backend,
        policy: &Policy,
        specs: &[ClassSpec],
    ) -> (Vec<bool>, Vec<String>) {
        let per_core = backend
            .capabilities()
            .mba
            .get()
            .and_then(rdt_core::MbaCaps::thread_throttle)
            .is_some_and(|t| t != rdt_core::ThreadThrottle::PerThread);
        if !per_core {
            return (vec![false; specs.len()], Vec::new());
        }
        let protected: Vec<ClassSpec> = policy
            .protected
            .iter()
            .map(|p| p.workload.clone())
            .collect();
        let shared = shared_cores(backend.topology(), &protected, specs);
        let mut out = Vec::with_capacity(specs.len());
        let mut warnings = Vec::new();
        for ((b, spec), pairs) in policy.best_effort.iter().zip(specs).zip(shared) {
            if pairs.is_empty() || !b.throttles_mba() {
                out.push(false);
                continue;
            }
            let named = pairs
                .iter()
                .take(8)
                .map(|(c, p, w)| format!("CPU {c} (sibling of {w:?}'s CPU {p})"))
                .collect::<Vec<_>>()
                .join(", ");
            let more = if pairs.len() > 8 { ", ..." } else { "" };
            let warning = format!(
                "{}: best-effort workload {:?} shares cores with protected workloads: \
                 {named}{more}; this part's MBA throttles a core by its threads' strongest \
                 delay, so the controller never MBA-throttles it (min_mba_percent is \
                 ignored) and only shrinks its L3 ways: move those CPUs to let it throttle",
                policy.file.display(),
                spec.name
            );
            log::warn!("{warning}");
            warnings.push(warning);
            out.push(true);
        }
        (out, warnings)
    }

    /// What the engine needs of the platform, and its MBA kind where the controller may
    /// throttle; checks that the platform can serve `policy`.
    fn facts<B: Backend>(
        backend: &B,
        policy: &Policy,
    ) -> Result<(Facts, Option<MbaKind>), AgentError<B::Error>> {
        let caps = backend.capabilities().clone();
        let Some(cat) = caps.l3_cat.get() else {
            return Err(AgentError::Platform(
                "the controller needs L3 CAT, which this platform does not have".into(),
            ));
        };
        let way_bytes = caps.l3_cache.map_or(0, |g| g.way_size());
        let mba = caps.mba.get().filter(|m| !m.ctrl_enabled).map(|m| m.kind);
        for b in &policy.best_effort {
            if b.min_ways > cat.cbm_len {
                return Err(AgentError::Platform(format!(
                    "{}: best-effort workload {:?}: min_ways {} is more than the {} ways of \
                     the L3",
                    policy.file.display(),
                    b.workload.name,
                    b.min_ways,
                    cat.cbm_len
                )));
            }
        }
        // each MBA floor in the unit the part counts (issue 32: AMD limits in GB/s)
        policy.check_mba(mba)?;
        let domains = backend.topology().l3_domains().len();
        let facts = Facts {
            ways: cat.cbm_len,
            min_ways: cat.min_cbm_bits.max(1),
            way_bytes,
            domains: u32::try_from(domains).unwrap_or(u32::MAX),
            protected_spans: policy
                .protected
                .iter()
                .map(|p| span(backend.topology(), &p.workload.cpus))
                .collect(),
            best_effort_spans: policy
                .best_effort
                .iter()
                .map(|b| {
                    if b.rest {
                        u32::try_from(domains).unwrap_or(u32::MAX)
                    } else {
                        span(backend.topology(), &b.workload.cpus)
                    }
                })
                .collect(),
            mba: match mba {
                // AMD: 2^width units of 1/8 GB/s are no limit (kernel `max_bw = 1 << width`;
                // AMD PQoS Versions 1.0 and 2.0, "L3 external bandwidth enforcement")
                Some(MbaKind::AmdBandwidth { width }) => MbaScale::EighthGbps {
                    no_limit: u32::try_from(1u64 << width.min(32)).unwrap_or(u32::MAX),
                },
                Some(MbaKind::IntelDelay { .. }) => MbaScale::Percent {
                    granularity: caps.mba.get().map_or(10, |m| {
                        u8::try_from(m.granularity().clamp(1, 100)).unwrap_or(10)
                    }),
                },
                None => MbaScale::default(),
            },
            memory_capacity_bytes_per_s: policy.memory_peak_bytes_per_s,
            mba_shares_protected_core: Vec::new(),
        };
        Ok((facts, mba))
    }

    /// The metrics so far.
    #[must_use]
    pub const fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The engine (its policy and platform facts).
    #[must_use]
    pub const fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The named class of each best-effort workload, in policy order (COS 0 in advisory
    /// mode, where none is made).
    #[must_use]
    pub fn classes(&self) -> &[ClassId] {
        &self.classes
    }

    /// What the policy asks that the controller will not do on this platform, one sentence
    /// each naming the workload and the rule, found at start (also logged at `warn`): a
    /// best-effort workload on an SMT sibling of a protected CPU where MBA throttles per
    /// core is never MBA-throttled. The binary prints them; empty when there is none.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A reading from a group's values; rates over `dt`.
    fn reading(v: Option<&MonValues>, dt: Duration) -> Reading {
        let Some(v) = v else {
            return Reading::default();
        };
        let secs = dt.as_secs_f64();
        #[allow(clippy::cast_precision_loss)] // bytes as a rate
        let mem = v
            .mbm_total_delta_bytes
            .or(v.mbm_local_delta_bytes)
            .filter(|_| secs > 0.0)
            .map(|b| b as f64 / secs);
        Reading {
            llc_bytes: v.llc_occupancy_bytes,
            mem_bytes_per_s: mem,
            ipc: v.ipc(),
            app: None,
            peak_domain_bytes_per_s: None,
            squeezed_llc: None,
        }
    }

    /// The allocation of best-effort class `i` now: the fewest ways over the domains, the
    /// lowest MBA.
    /// Reads each class's MBA limit per domain (in the part's unit) into `mba_now` on the
    /// way.
    fn settings<B: Backend>(&mut self, backend: &mut B) -> Result<Vec<Setting>, B::Error> {
        let cat = backend.cat_classes_in(CatResource::L3, &self.domains)?;
        let mba_domains: Vec<CacheDomain> = self
            .mba_domains
            .iter()
            .flatten()
            .copied()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mba = match self.mba {
            Some(_) if !mba_domains.is_empty() => {
                backend.bandwidth_classes_in(rdt_core::MbaResource::Mba, &mba_domains)?
            }
            _ => Vec::new(),
        };
        let mut out = Vec::with_capacity(self.classes.len());
        for (i, &class) in self.classes.iter().enumerate() {
            let ways_now: BTreeMap<CacheDomain, u32> = self
                .domains
                .iter()
                .zip(&cat)
                .filter_map(|(dom, d)| {
                    d.iter()
                        .find(|c| c.class == class)
                        .map(|c| (*dom, c.mask.ways().count_ones()))
                })
                .collect();
            let ways = ways_now.values().copied().min().unwrap_or(self.full.ways());
            self.ways_now[i] = ways_now;
            let now: BTreeMap<CacheDomain, u32> = if self.regions.by_region(i) {
                self.regions
                    .percent_now(backend, i, class, &self.mba_domains[i])?
                    .into_iter()
                    .map(|(d, p)| (d, u32::from(p)))
                    .collect()
            } else {
                mba_domains
                    .iter()
                    .zip(&mba)
                    .filter(|(d, _)| self.mba_domains[i].contains(d))
                    .filter_map(|(d, classes)| {
                        classes
                            .iter()
                            .find(|c| c.class == class)
                            .map(|c| (*d, self.level_of(c.limit)))
                    })
                    .collect()
            };
            let scale = self.engine.facts().mba;
            out.push(scale.setting(
                ways,
                now.values().copied().min().unwrap_or(scale.no_limit()),
            ));
            self.mba_now[i] = now;
        }
        Ok(out)
    }

    /// A limit as read, in the engine's unit ([`Facts::mba`]): percent, or AMD's units
    /// (at most no limit); a limit in another unit (another program's MBps) is none.
    fn level_of(&self, limit: MbaLimit) -> u32 {
        let scale = self.engine.facts().mba;
        match (limit, scale) {
            (MbaLimit::Percent(p), MbaScale::Percent { .. }) => u32::from(p).min(100),
            (MbaLimit::AmdUnits(u), MbaScale::EighthGbps { no_limit }) => u.min(no_limit),
            _ => scale.no_limit(),
        }
    }

    /// A limit in the engine's unit as the platform's.
    fn limit_of(&self, level: u32) -> MbaLimit {
        match self.engine.facts().mba {
            MbaScale::EighthGbps { .. } => MbaLimit::AmdUnits(level),
            MbaScale::Percent { .. } => MbaLimit::Percent(u8::try_from(level).unwrap_or(100)),
        }
    }

    /// The changes that make decision `d`.
    fn changes(&self, d: &Decision) -> Vec<Change> {
        let class = self.classes[d.class];
        let mut out = Vec::new();
        if d.to.ways != d.from.ways {
            let mask = CacheBitmask::low_bits(d.to.ways);
            out.extend(
                self.ways_domains_of(d)
                    .into_iter()
                    .map(|domain| Change::Cat {
                        resource: CatResource::L3,
                        domain,
                        class,
                        scope: MaskScope::Both,
                        mask,
                    }),
            );
        }
        if d.to.mba != d.from.mba && self.regions.by_region(d.class) {
            out.extend(self.regions.changes(
                d.class,
                class,
                &self.mba_domains_of(d),
                u8::try_from(d.to.mba).unwrap_or(100),
            ));
        } else if d.to.mba != d.from.mba && self.mba.is_some() {
            let limit = self.limit_of(d.to.mba);
            out.extend(
                self.mba_domains_of(d)
                    .into_iter()
                    .map(|domain| Change::mba(domain, class, limit)),
            );
        }
        out
    }

    /// The domains where decision `d` changes its class's ways (per domain, as
    /// [`Agent::mba_domains_of`]): fewer ways in the domains acted on where the class misses
    /// to memory (at least [`BUSY_DOMAIN_SHARE`] of its busiest domain's traffic: a cache
    /// thrasher refills what it evicts; without MBM, where it holds at least that share of
    /// its fullest domain's occupancy; all where neither is measured) and has more now;
    /// more ways where it has fewer now.
    fn ways_domains_of(&self, d: &Decision) -> Vec<CacheDomain> {
        let now = |dom: &CacheDomain| {
            self.ways_now[d.class]
                .get(dom)
                .copied()
                .unwrap_or(d.from.ways)
        };
        if d.to.ways > d.from.ways {
            return self
                .domains
                .iter()
                .copied()
                .filter(|dom| now(dom) < d.to.ways)
                .collect();
        }
        // where it misses to memory most (a cache thrasher's fills), else where it holds
        // the most
        let traffic = &self.traffic_now[d.class];
        let busiest = traffic.values().copied().fold(0.0, f64::max);
        let held = &self.llc_now[d.class];
        let fullest = held.values().copied().max().unwrap_or(0);
        #[allow(clippy::cast_precision_loss)] // bytes as a share
        self.domains
            .iter()
            .copied()
            .filter(|dom| {
                if busiest > 0.0 {
                    traffic
                        .get(dom)
                        .is_none_or(|t| *t >= BUSY_DOMAIN_SHARE * busiest)
                } else {
                    fullest == 0
                        || held
                            .get(dom)
                            .is_none_or(|b| *b as f64 >= BUSY_DOMAIN_SHARE * fullest as f64)
                }
            })
            .filter(|dom| now(dom) > d.to.ways)
            .collect()
    }

    /// The domains where decision `d` changes its class's MBA (per domain, rule "per
    /// domain" of issue 32): a tighter limit goes to the domains that carry the class's
    /// traffic (at least [`BUSY_DOMAIN_SHARE`] of its busiest domain's; all of its MBA
    /// domains where that is not measured) and are looser now; a looser limit to those
    /// tighter now (a domain never throttled stays so).
    fn mba_domains_of(&self, d: &Decision) -> Vec<CacheDomain> {
        let all = &self.mba_domains[d.class];
        let now = |dom: &CacheDomain| {
            self.mba_now[d.class]
                .get(dom)
                .copied()
                .unwrap_or(d.from.mba)
        };
        if d.to.mba > d.from.mba {
            return all
                .iter()
                .copied()
                .filter(|dom| now(dom) < d.to.mba)
                .collect();
        }
        let traffic = &self.traffic_now[d.class];
        let busiest = traffic.values().copied().fold(0.0, f64::max);
        all.iter()
            .copied()
            .filter(|dom| {
                busiest <= 0.0
                    || traffic
                        .get(dom)
                        .is_none_or(|t| *t >= BUSY_DOMAIN_SHARE * busiest)
            })
            .filter(|dom| now(dom) > d.to.mba)
            .collect()
    }

    /// The best-effort classes' traffic per MBA domain and occupancy per domain acted on
    /// (kept for the decisions' domains), into their readings (`all[np..]`): the traffic
    /// of their busiest domain, and what they fill where they are squeezed.
    fn per_domain<B: Backend>(
        &mut self,
        backend: &B,
        np: usize,
        dt: Duration,
        all: &mut [Reading],
    ) {
        for (i, g) in self.groups.iter().skip(np).enumerate() {
            let Some(v) = g.and_then(|g| backend.values(g)) else {
                continue;
            };
            let secs = dt.as_secs_f64();
            #[allow(clippy::cast_precision_loss)] // bytes as a rate
            let per: BTreeMap<CacheDomain, f64> = v
                .domains
                .iter()
                .filter(|d| {
                    self.mba_domains
                        .get(i)
                        .is_some_and(|m| m.contains(&d.domain))
                })
                .filter_map(|d| {
                    d.mbm_total_delta_bytes
                        .or(d.mbm_local_delta_bytes)
                        .filter(|_| secs > 0.0)
                        .map(|b| (d.domain, b as f64 / secs))
                })
                .collect();
            if let Some(r) = all.get_mut(np + i) {
                // the busiest domain where its limit applies (throttled there now), else
                // where it may be throttled: a limit is judged by the traffic it holds
                // back, not by another domain's (genoa-ccx: a class throttled in the
                // thrasher's CCX kept 2.5 GB/s there for good, its batch moving 1.26 GB/s
                // unthrottled in the next CCX read as pressing against it)
                let no_limit = self.engine.facts().mba.no_limit();
                let limited = self.mba_now.get(i);
                let throttled = per
                    .iter()
                    .filter(|(d, _)| {
                        limited
                            .and_then(|m| m.get(d))
                            .is_some_and(|l| *l < no_limit)
                    })
                    .map(|(_, t)| *t)
                    .reduce(f64::max);
                r.peak_domain_bytes_per_s =
                    throttled.or_else(|| per.values().copied().reduce(f64::max));
            }
            if let Some(t) = self.traffic_now.get_mut(i) {
                *t = per;
            }
            let held: BTreeMap<CacheDomain, u64> = v
                .domains
                .iter()
                .filter(|d| self.domains.contains(&d.domain))
                .filter_map(|d| d.llc_occupancy_bytes.map(|b| (d.domain, b)))
                .collect();
            // squeezed in some of its domains only: what it fills there (in its others,
            // acted on or not, it has every way: what it holds there says nothing of the
            // squeezed ones); squeezed in all of them, its occupancy says it all
            let full = self.full.ways();
            let span = self.engine.facts().best_effort_spans.get(i).copied();
            let ways = self.ways_now.get(i);
            let squeezed: Vec<&CacheDomain> = self
                .domains
                .iter()
                .filter(|d| ways.and_then(|w| w.get(d)).is_some_and(|w| *w < full))
                .collect();
            if !squeezed.is_empty()
                && span.is_none_or(|n| squeezed.len() < n as usize)
                && squeezed.iter().all(|d| held.contains_key(*d))
                && let Some(r) = all.get_mut(np + i)
            {
                let bytes = squeezed.iter().filter_map(|d| held.get(*d)).sum::<u64>();
                r.squeezed_llc = Some((bytes, u32::try_from(squeezed.len()).unwrap_or(u32::MAX)));
            }
            if let Some(h) = self.llc_now.get_mut(i) {
                *h = held;
            }
        }
    }

    /// One interval, `at` after the start: polls the counters, decides, and (unless
    /// advisory) makes each decision as one journaled transaction on its class. A failed
    /// write is undone by the transaction and reported in its event; the controller goes
    /// on.
    ///
    /// # Errors
    /// The counters or the classes' allocation cannot be read.
    pub fn tick<B: Backend>(
        &mut self,
        backend: &mut B,
        at: Duration,
    ) -> Result<Tick, AgentError<B::Error>> {
        let dt = self.last.map_or(at, |l| at.saturating_sub(l));
        self.last = Some(at);
        self.follow_pods(backend);
        backend
            .poll()
            .map_err(AgentError::backend("reading the counters"))?;
        let mut all: Vec<Reading> = self
            .groups
            .iter()
            .map(|g| Self::reading(g.and_then(|g| backend.values(g)), dt))
            .collect();
        // what the applications report, each read within half an interval
        let timeout = self.engine.policy().interval / 2;
        for (p, r) in self.engine.policy().protected.iter().zip(&mut all) {
            if let Target::App(a) = &p.target {
                match crate::app::read_metric_until(a, timeout, &self.stopper) {
                    Ok(v) => r.app = Some(v),
                    Err(e) => log::warn!("protected workload {:?}: {e}", p.workload.name),
                }
            }
        }
        let np = self.engine.policy().protected.len();
        self.per_domain(backend, np, dt, &mut all);
        let (protected, best) = all.split_at(np.min(all.len()));
        let settings = if self.advisory {
            self.proposed.clone()
        } else {
            self.settings(backend)
                .map_err(AgentError::backend("reading the classes' allocation"))?
        };
        let decisions = self.engine.observe(at, protected, best, &settings);
        let readings = self.observed(&all);
        for (name, o) in &readings {
            if let Some(h) = o.health {
                self.metrics.set_health(name, h);
            }
        }
        let names: Vec<String> = self
            .engine
            .policy()
            .best_effort
            .iter()
            .map(|b| b.workload.name.clone())
            .collect();
        for (i, s) in settings.iter().enumerate() {
            self.metrics.set_class(&names[i], *s);
        }
        let mut events = Vec::new();
        for d in decisions {
            if self.stopper.is_stopped() {
                // stopping: the decisions not made yet are not made (none is half made)
                self.engine.not_made(&d);
                continue;
            }
            self.metrics.count(&d);
            let (applied, error) = if self.advisory {
                // what it would do next is decided from what it proposed; an unmade step
                // cannot be judged
                self.proposed[d.class] = d.to;
                self.engine.not_made(&d);
                (false, None)
            } else {
                match self.make(backend, &d) {
                    Ok(()) => {
                        self.metrics.set_class(&names[d.class], d.to);
                        (true, None)
                    }
                    Err(e) => {
                        self.engine.not_made(&d);
                        (false, Some(e))
                    }
                }
            };
            events.push(Event {
                t_s: at.as_secs_f64(),
                class: names[d.class].clone(),
                decision: d,
                readings: readings.clone(),
                applied,
                error,
            });
        }
        self.publish(backend);
        Ok(Tick { events, readings })
    }

    /// Runs the controller until its [`Stopper`] (given to [`Agent::start_stoppable`]) is
    /// stopped or `opts.duration` has passed: each interval of the policy it waits (sleeping,
    /// woken within [`crate::stop::STOP_POLL`] by a stop, or advancing the platform's clock
    /// with `opts.advance`), then makes one [`Agent::tick`] and hands it to `on_tick`. A stop
    /// asked during a tick ends the run after it, the decisions not made yet left unmade.
    /// Returns the time reached. Call [`Agent::stop`] afterwards, whatever it returned.
    ///
    /// # Errors
    /// A tick's error, or `on_tick`'s ([`AgentError::Events`]).
    pub fn run<B: Backend>(
        &mut self,
        backend: &mut B,
        opts: &RunOptions<B>,
        mut on_tick: impl FnMut(&Tick) -> std::io::Result<()>,
    ) -> Result<Duration, AgentError<B::Error>> {
        let interval = self.engine.policy().interval;
        let mut t = self.last.unwrap_or(Duration::ZERO);
        loop {
            if self.stopper.is_stopped() || opts.duration.is_some_and(|e| t >= e) {
                return Ok(t);
            }
            match opts.advance {
                Some(advance) => advance(backend, interval),
                None => {
                    if !self.stopper.sleep(interval) {
                        return Ok(t);
                    }
                }
            }
            if self.stopper.is_stopped() {
                return Ok(t);
            }
            t += interval;
            let tick = self.tick(backend, t)?;
            on_tick(&tick).map_err(AgentError::Events)?;
        }
    }

    /// The agent's stop handle (a clone: stopping it stops the agent).
    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Writes the metrics to [`METRICS_FILE`] in the platform's run directory (none: not
    /// written). A failure is logged: the controller goes on without.
    fn publish<B: Backend>(&self, backend: &mut B) {
        let Some(dir) = backend.run_dir().map(Path::to_path_buf) else {
            return;
        };
        let written = self
            .metrics
            .encode()
            .map_err(std::io::Error::other)
            .and_then(|text| write_run_file(&dir, METRICS_FILE, text.as_bytes()));
        if let Err(e) = written {
            log::warn!("the controller's metrics in {}: {e}", dir.display());
        }
    }

    /// Follows the node's pods (the pod record changed since the last look): each workload
    /// named by a pod selector is resolved again; a best-effort workload's new tasks go
    /// into its class (one journaled transaction, [`Change::Task`] each), and a workload
    /// monitored by its tasks has its group follow ([`Agent::follow_tasks`]). Pods that went
    /// leave with their tasks. A failure is logged and tried again at the next interval.
    fn follow_pods<B: Backend>(&mut self, backend: &mut B) {
        let Some(mut watch) = self.pods.take() else {
            return;
        };
        let stamp = watch.stamp();
        if stamp != watch.seen {
            watch.seen = stamp;
            if !self.resolve_pods(backend, &mut watch) {
                watch.seen = None; // again at the next interval
            }
        }
        self.pods = Some(watch);
    }

    /// [`Agent::follow_pods`] once the record changed; `false` when something failed.
    fn resolve_pods<B: Backend>(&mut self, backend: &mut B, watch: &mut PodWatch) -> bool {
        let record = match PodsRecord::read(&watch.run_dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PodsRecord {
                version: rdt_host::pods::VERSION,
                pods: Vec::new(),
            },
            Err(e) => {
                log::warn!("pods: {e}");
                return false;
            }
        };
        let events = backend.capabilities().supported_events() & EVENTS;
        let mut ok = true;
        for m in &mut watch.members {
            let now: BTreeSet<TaskId> =
                match record.selected_tasks(&m.selector, &watch.proc, &watch.cgroup_root) {
                    Ok(t) => t.into_iter().collect(),
                    Err(e) => {
                        log::warn!("workload {:?}: pods: {e}", m.name);
                        ok = false;
                        continue;
                    }
                };
            if now == m.tasks {
                continue;
            }
            let joined: Vec<TaskId> = now.difference(&m.tasks).copied().collect();
            let left = m.tasks.difference(&now).count();
            if let Some(class) = m.class
                && !joined.is_empty()
            {
                let changes: Vec<Change> = joined
                    .iter()
                    .map(|&task| Change::Task { task, class })
                    .collect();
                let made = Plan::new(backend, &changes)
                    .map_err(|e| match e {
                        PlanError::Invalid { error, .. } => error.to_string(),
                        PlanError::Read { error, .. } => error.to_string(),
                    })
                    .and_then(|plan| {
                        plan.apply(backend)
                            .into_result()
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    });
                if let Err(e) = made {
                    log::warn!(
                        "workload {:?}: pods: putting {} new task(s) in its class: {e}",
                        m.name,
                        joined.len()
                    );
                    ok = false;
                    continue;
                }
            }
            if m.by_tasks
                && let Some(slot) = self.groups.get_mut(m.index)
                && let Err(e) = Self::follow_tasks(backend, slot, m, &now, events)
            {
                log::warn!("workload {:?}: monitoring its tasks: {e}", m.name);
                ok = false;
            }
            log::info!(
                "workload {:?}: pods: {} task(s) joined{}, {left} left",
                m.name,
                joined.len(),
                if m.class.is_some() && !joined.is_empty() {
                    " (put in its class)"
                } else {
                    ""
                }
            );
            m.tasks = now;
        }
        ok
    }

    /// The monitoring group of `m` (in `slot`) made to hold its tasks with its pods' tasks
    /// `now`: changed in place ([`rdt_core::OsOps::change_monitoring_tasks`]: its counts go
    /// on); started when it had none; stopped when no task is left; stopped and started
    /// again where the library cannot change it in place (a new pod's tasks in a control
    /// group the group has no monitor group under).
    fn follow_tasks<B: Backend>(
        backend: &mut B,
        slot: &mut Option<MonGroupId>,
        m: &PodMembers,
        now: &BTreeSet<TaskId>,
        events: MonEvents,
    ) -> Result<(), String> {
        let mut tasks: Vec<TaskId> = m.fixed.iter().chain(now).copied().collect();
        tasks.sort_unstable();
        tasks.dedup();
        let add: Vec<TaskId> = now.difference(&m.tasks).copied().collect();
        let remove: Vec<TaskId> = m
            .tasks
            .difference(now)
            .filter(|t| !m.fixed.contains(t))
            .copied()
            .collect();
        if let Some(g) = *slot
            && !tasks.is_empty()
        {
            let Some(os) = backend.os() else {
                return Err("tasks are monitored on the OS interface only".into());
            };
            match os.change_monitoring_tasks(g, &add, &remove) {
                Ok(()) => return Ok(()),
                Err(e) => log::info!(
                    "workload {:?}: its monitoring group cannot change in place ({e}): \
                     starting it again",
                    m.name
                ),
            }
        }
        if let Some(g) = slot.take() {
            backend.stop_monitoring(g).map_err(|e| e.to_string())?;
        }
        if tasks.is_empty() {
            return Ok(());
        }
        let os = backend
            .os()
            .ok_or_else(|| "tasks are monitored on the OS interface only".to_owned())?;
        let mut ids = os
            .start_monitoring_tasks_many(&[(tasks, events)])
            .map_err(|e| e.to_string())?;
        *slot = ids.pop();
        Ok(())
    }

    /// Makes `d` as one journaled transaction.
    fn make<B: Backend>(&self, backend: &mut B, d: &Decision) -> Result<(), String> {
        let changes = self.changes(d);
        let plan = Plan::new(backend, &changes).map_err(|e| match e {
            PlanError::Invalid { error, .. } => error.to_string(),
            PlanError::Read { error, .. } => error.to_string(),
        })?;
        plan.apply(backend)
            .into_result()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Every workload's readings with the protected ones' health, by name.
    fn observed(&self, all: &[Reading]) -> BTreeMap<String, Observed> {
        let policy = self.engine.policy();
        let health = self.engine.last_health();
        policy
            .names()
            .zip(all)
            .enumerate()
            .map(|(i, (name, r))| {
                (
                    name.to_owned(),
                    Observed {
                        reading: *r,
                        health: health.get(i).copied().flatten(),
                    },
                )
            })
            .collect()
    }

    /// Stops monitoring and writes back the allocation found when [`Agent::start`] ran
    /// (every class's masks and MBA, CPUs' and tasks' classes: [`AllocState::restore`]), so
    /// the best-effort classes get back what the controller took; `rdt-agent --on-exit
    /// restore`. What differs is written, nothing else; in advisory mode nothing differs.
    ///
    /// # Errors
    /// A group cannot be stopped, or a read or write of the restore failed (what was
    /// restored before it stays restored).
    pub fn restore<B: Backend>(self, backend: &mut B) -> Result<Restored, AgentError<B::Error>> {
        let found = self.found.clone();
        self.stop(backend)?;
        found.restore(backend).map_err(AgentError::backend(
            "restoring the allocation found at start",
        ))
    }

    /// Stops monitoring (the classes and their allocation stay: the last good state;
    /// [`Agent::restore`] gives back the allocation found at start instead).
    ///
    /// # Errors
    /// A group cannot be stopped.
    pub fn stop<B: Backend>(self, backend: &mut B) -> Result<(), AgentError<B::Error>> {
        if let Some(dir) = backend.run_dir().map(Path::to_path_buf)
            && let Err(e) = remove_run_file(&dir, METRICS_FILE)
        {
            log::warn!("the controller's metrics in {}: {e}", dir.display());
        }
        for g in self.groups.into_iter().flatten() {
            backend
                .stop_monitoring(g)
                .map_err(AgentError::backend("stopping monitoring"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod pod_tests {
    use std::collections::BTreeMap;

    use rdt_core::TaskId;
    use rdt_host::pods::{ContainerRecord, PodRecord, VERSION};

    use super::*;

    /// A node of a Guaranteed pod (containers with processes 11 and 12, 12 forking 21)
    /// and a BestEffort pod (13), recorded as the NRI plugin does, with their cgroups.
    #[test]
    fn a_pod_selector_resolves_guaranteed_and_besteffort_pods_to_their_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let proc = ProcFs::at(dir.path().join("proc"));
        let cg = dir.path().join("cgroup");
        for (pid, procs) in [(11, "11\n"), (12, "12\n21\n"), (13, "13\n")] {
            let p = dir.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("cgroup"), format!("0::/c{pid}\n")).unwrap();
            std::fs::create_dir_all(cg.join(format!("c{pid}"))).unwrap();
            std::fs::write(cg.join(format!("c{pid}/cgroup.procs")), procs).unwrap();
        }
        let pod = |uid: &str, qos: &str, pids: &[u32]| {
            let mut p = PodRecord::capped(uid, "default", uid, Some(qos), &BTreeMap::new());
            p.containers = pids
                .iter()
                .map(|&pid| ContainerRecord::capped(&pid.to_string(), "c", "x", Some("x"), pid, ""))
                .collect();
            p
        };
        PodsRecord {
            version: VERSION,
            pods: vec![
                pod("g", "Guaranteed", &[11, 12]),
                pod("b", "BestEffort", &[13]),
            ],
        }
        .write(&run)
        .unwrap();
        let by_qos = |q: &str| PodSelector {
            qos: vec![q.to_owned()],
            ..PodSelector::default()
        };
        let tasks = |q: &str| pod_tasks("w", &by_qos(q), Some(&run), &proc, &cg);
        assert_eq!(tasks("Guaranteed").unwrap(), [11, 12, 21].map(TaskId::new));
        assert_eq!(tasks("BestEffort").unwrap(), [13].map(TaskId::new));
        // nothing matches yet, no record yet: no task, the workload waits for its pods
        assert_eq!(tasks("Burstable").unwrap(), []);
        assert_eq!(
            pod_tasks("w", &by_qos("Guaranteed"), Some(&cg), &proc, &cg).unwrap(),
            []
        );
        // no run directory (no record can ever come): refused, naming the workload
        let e = pod_tasks("w", &by_qos("Guaranteed"), None, &proc, &cg).unwrap_err();
        assert!(
            e.contains("\"w\": pods: this platform has no run directory"),
            "{e}"
        );
        // a record that does not read: refused
        std::fs::write(run.join(PODS_FILE), "{").unwrap();
        let e = tasks("Guaranteed").unwrap_err();
        assert!(e.contains("\"w\": pods:"), "{e}");
    }

    /// The watch sees the record change (a BestEffort pod comes, then goes) by its stamp,
    /// and only then: the selectors picked 13 at start, 14 joins, then 13 leaves.
    #[test]
    fn the_pod_watch_sees_a_changed_record_and_resolves_the_selectors_again() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let proc = ProcFs::at(dir.path().join("proc"));
        for pid in [13, 14] {
            let p = dir.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("cgroup"), "0::/\n").unwrap();
            std::fs::write(p.join("stat"), format!("{pid} (x) S\n")).unwrap();
        }
        let pod = |uid: &str, pid: u32| {
            let mut p =
                PodRecord::capped(uid, "default", uid, Some("BestEffort"), &BTreeMap::new());
            p.containers = vec![ContainerRecord::capped(
                &pid.to_string(),
                "c",
                "x",
                Some("x"),
                pid,
                "",
            )];
            p
        };
        let write = |pods: Vec<PodRecord>| {
            PodsRecord {
                version: VERSION,
                pods,
            }
            .write(&run)
            .unwrap();
        };
        write(vec![pod("a", 13)]);
        let selector = PodSelector {
            qos: vec!["BestEffort".to_owned()],
            ..PodSelector::default()
        };
        let spec = ClassSpec {
            name: "batch".to_owned(),
            tasks: vec![TaskId::new(13), TaskId::new(99)],
            ..ClassSpec::default()
        };
        let mut watch = PodWatch::new(
            &run,
            &proc,
            &[&spec],
            &[Some(&selector)],
            &[vec![TaskId::new(99)]],
            &[ClassId::new(3)],
            false,
        )
        .unwrap();
        watch.cgroup_root = dir.path().join("cgroup");
        let m = &watch.members[0];
        assert_eq!(m.class, Some(ClassId::new(3)));
        assert!(m.by_tasks);
        assert_eq!(m.tasks, BTreeSet::from([TaskId::new(13)]));
        assert_eq!(watch.stamp(), watch.seen, "unchanged");
        write(vec![pod("a", 13), pod("bb", 14)]);
        assert_ne!(watch.stamp(), watch.seen, "a pod came");
        let record = PodsRecord::read(&run).unwrap();
        let now = record
            .selected_tasks(&selector, &watch.proc, &watch.cgroup_root)
            .unwrap();
        assert_eq!(now, [13, 14].map(TaskId::new));
        // advisory: no class to put them in; none named by pods: no watch
        let none = PodWatch::new(
            &run,
            &proc,
            &[&spec],
            &[None],
            &[vec![]],
            &[ClassId::new(3)],
            false,
        );
        assert!(none.is_none());
        let adv = PodWatch::new(
            &run,
            &proc,
            &[&spec],
            &[Some(&selector)],
            &[vec![]],
            &[ClassId::new(3)],
            true,
        )
        .unwrap();
        assert_eq!(adv.members[0].class, None);
    }
}

//! Repair, not report: the plugin puts the containers it finds outside their class in it
//! itself, by writing their tasks into the class's resctrl group as one journaled
//! transaction (what `pqos -a pid:` does), and checks them again while they run
//! ([`NodeSession`]). NRI's container updates cannot do it: they reach the runtime as CRI
//! resources, which carry no RDT class.
//!
//! A container's tasks are the processes of its cgroup ([`container_tasks`]): the cgroup
//! of its process (NRI `Container.pid`, `/proc/<pid>/cgroup`'s unified line on cgroup v2,
//! the `cpu,cpuacct` or `pids` hierarchy's on v1 and hybrid hosts), else its cgroups path
//! as the runtime gives it (`/kubepods/...` with the cgroupfs driver, `slice:prefix:name`
//! with systemd's), else its process alone.
//!
//! With monitoring on ([`crate::Options::monitoring`]) the session also keeps each pod's
//! monitor group, `<group>/mon_groups/<pod-uid>` ([`MonGroups`]): made when the pod's
//! first container starts (or is found running by a synchronization), the container's
//! tasks put in it under the writers' lock, removed with the pod's last container or the
//! pod. The groups it made are the plugin's own and recorded, before each is made, in the
//! run directory's pod record ([`rdt_pqos::pods::PodsRecord`], also what the exporter
//! labels series with): a group of that name the plugin did not make is never touched,
//! and one left by a plugin that was killed is removed at the next synchronization when
//! its pod is gone. A process's threads go
//! with it (`rdt_pqos::transaction::Change::Task`); a process or thread it starts later
//! inherits the group from its parent (the kernel's resctrl: a task's `closid` is copied at
//! fork), and the periodic re-check catches one started between the listing and the write.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdt_pqos::config::ConfigFile;
use rdt_pqos::config::goresctrl::GroupOptions;
pub use rdt_pqos::pods::{CGROUP_ROOT, cgroup_dir_of, container_tasks};
use rdt_pqos::pods::{PodRecord, PodsRecord, is_mon_group_path, mon_group_path};
use rdt_pqos::proc::ProcFs;
use rdt_pqos::transaction::{ApplyPlan, Change, Plan, with_writers};
use rdt_pqos::{Backend, BackendExt, ClassId, TaskId};

use crate::plugin::{MonPlace, MonWork, Repair};
use crate::ready::StateFile;
use crate::{Plugin, Session, State, apply_classes, shown, ttrpc};

/// Why a repair was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlaceError {
    /// The container has no task any more (it ended).
    #[error("the container has no task left")]
    Gone,
    /// The container has no task yet: created, not started (the runtime gave no pid). Its
    /// repair waits for its start (or the next re-check).
    #[error("the container has not started")]
    NotStarted,
    /// Reading the tasks or writing the group failed; nothing was changed.
    #[error("{0}")]
    Failed(String),
}

/// Makes repairs: puts a container's tasks in its class's group.
pub trait Placer {
    /// Puts the tasks of `repair`'s container in `repair.group` (the root group for
    /// `None`): the number of processes moved (0 when all were there).
    ///
    /// # Errors
    /// [`PlaceError`].
    fn place(&mut self, repair: &Repair) -> Result<usize, PlaceError>;
}

/// The [`Placer`] of a platform: a container's tasks ([`container_tasks`]) into the group
/// as one journaled transaction under the writers' lock (`rdt_pqos::transaction`), tasks
/// already there left out.
#[derive(Debug)]
pub struct ResctrlPlacer<B> {
    /// The platform (the OS interface: resctrl).
    pub backend: B,
    /// Where the tasks are read.
    pub proc: ProcFs,
    /// Where the cgroup (v2) hierarchy is mounted ([`CGROUP_ROOT`] on a host).
    pub cgroup_root: PathBuf,
}

impl<B: Backend> ResctrlPlacer<B> {
    /// A placer on `backend` with the host's `/proc` and cgroup mount.
    pub fn new(backend: B) -> Self {
        Self {
            backend,
            proc: ProcFs::host(),
            cgroup_root: PathBuf::from(CGROUP_ROOT),
        }
    }
}

impl<B: Backend> Placer for ResctrlPlacer<B> {
    fn place(&mut self, repair: &Repair) -> Result<usize, PlaceError> {
        let failed =
            |what: &str, e: &dyn std::fmt::Display| PlaceError::Failed(format!("{what}: {e}"));
        let class = match &repair.group {
            None => ClassId::new(0),
            Some(g) => self
                .backend
                .class_named(g)
                .map_err(|e| failed("finding its group", &e))?,
        };
        // a process may end between the listing and the plan: list again, twice at most
        let mut last = String::new();
        for _ in 0..3 {
            let tasks = match container_tasks(
                &self.proc,
                &self.cgroup_root,
                repair.pid,
                &repair.cgroups_path,
            ) {
                Ok(t) => t,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(if repair.pid == 0 {
                        PlaceError::NotStarted
                    } else {
                        PlaceError::Gone
                    });
                }
                Err(e) => return Err(failed("reading its tasks", &e)),
            };
            let changes: Vec<Change> = tasks.iter().map(|&t| Change::task(t, class)).collect();
            let r = with_writers(&mut self.backend, |b| {
                let plan = Plan::new(b, &changes)
                    .map_err(|e| e.to_string())?
                    .without_unchanged();
                let n = plan.steps().len();
                plan.apply(b).into_result().map_err(|e| e.to_string())?;
                Ok::<_, String>(n)
            })
            .map_err(|e| failed("taking the writers' lock", &e))?;
            match r {
                Ok(n) => return Ok(n),
                Err(e) => {
                    if tasks.iter().all(|&t| self.proc.exists(t)) {
                        return Err(PlaceError::Failed(e));
                    }
                    last = e;
                }
            }
        }
        Err(PlaceError::Failed(last))
    }
}

/// The pods' monitor groups on a platform: resctrl's `mon_groups` (the OS interface).
pub trait MonGroups {
    /// Whether the group at `path` (relative to the resctrl root) exists.
    fn has_group(&mut self, path: &str) -> bool;

    /// Puts every thread of `task` in monitor group `mon_groups/<name>` of control group
    /// `ctrl` (`""`: the root group), made when missing.
    ///
    /// # Errors
    /// The platform's, as text (no monitoring, no RMID left, a failed write).
    fn place_in_mon_group(&mut self, ctrl: &str, name: &str, task: TaskId) -> Result<(), String>;

    /// Removes the monitor group at `path` when it is empty; `false` when it is absent or
    /// holds tasks or CPUs.
    ///
    /// # Errors
    /// The platform's, as text.
    fn remove_mon_group(&mut self, path: &str) -> Result<bool, String>;
}

impl MonGroups for rdt_pqos::Rdt {
    fn has_group(&mut self, path: &str) -> bool {
        self.resctrl_mut().is_some_and(|r| r.has_group(path))
    }

    fn place_in_mon_group(&mut self, ctrl: &str, name: &str, task: TaskId) -> Result<(), String> {
        let r = self
            .resctrl_mut()
            .ok_or("monitor groups need the OS interface (resctrl)")?;
        r.place_in_mon_group(ctrl, name, task)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn remove_mon_group(&mut self, path: &str) -> Result<bool, String> {
        let r = self
            .resctrl_mut()
            .ok_or("monitor groups need the OS interface (resctrl)")?;
        r.remove_mon_group(path).map_err(|e| e.to_string())
    }
}

/// The least time between two writes of the pod record for changes of pods and
/// containers: a burst of creations writes it once (a monitor group is recorded at once,
/// before it is made).
pub const RECORD_INTERVAL: Duration = Duration::from_secs(1);

/// Reloading the classes on a signal ([`NodeSession::with_reload`]).
#[derive(Debug)]
pub struct Reload {
    /// Set (by a SIGHUP handler) to reload at the next tick.
    pub flag: Arc<AtomicBool>,
    /// The configuration, read again.
    pub config: PathBuf,
    /// Its groups' options.
    pub groups: GroupOptions,
}

/// The most repaired containers checked again in one tick: the re-checks of a node with
/// many go round in turns.
pub const MAX_RECHECKS_PER_TICK: usize = 64;

/// A node's plugin session: the [`Plugin`] answering, its repairs made by a
/// [`ResctrlPlacer`] after each answer, repaired containers checked again every
/// `recheck` (at most [`MAX_RECHECKS_PER_TICK`] at a time), the classes reloaded when
/// [`Reload::flag`] is set, and the state kept in a [`StateFile`] for the probes.
#[derive(Debug)]
pub struct NodeSession<B> {
    /// The plugin.
    pub plugin: Plugin,
    /// Its placer (the platform).
    pub placer: ResctrlPlacer<B>,
    reload: Option<Reload>,
    state: Option<StateFile>,
    recheck: Duration,
    last_check: Instant,
    cursor: usize,
    state_failed: bool,
    /// Pod UID to the monitor groups this plugin made for it (its own).
    own_mon: BTreeMap<String, BTreeSet<String>>,
    /// The run directory of the pod record; `None`: not recorded.
    record_dir: Option<PathBuf>,
    record_failed: bool,
    /// The pods or containers changed since the record was last written.
    record_dirty: bool,
    /// When the record was last written.
    record_written: Option<Instant>,
}

impl<B: Backend + MonGroups> NodeSession<B> {
    /// A session of `plugin` placing through `placer`, re-checking every 10 s.
    pub fn new(plugin: Plugin, placer: ResctrlPlacer<B>) -> Self {
        Self {
            plugin,
            placer,
            reload: None,
            state: None,
            recheck: Duration::from_secs(10),
            last_check: Instant::now(),
            cursor: 0,
            state_failed: false,
            own_mon: BTreeMap::new(),
            record_dir: None,
            record_failed: false,
            record_dirty: false,
            record_written: None,
        }
    }

    /// Keeps the pod record ([`rdt_pqos::pods::PodsRecord`]) in run directory `dir`, and
    /// takes the monitor groups a previous plugin recorded there as its own (each checked:
    /// [`rdt_pqos::pods::is_mon_group_path`]).
    #[must_use]
    pub fn with_pod_record(mut self, dir: PathBuf) -> Self {
        match PodsRecord::read(&dir) {
            Ok(old) => {
                for p in old.pods {
                    let paths: BTreeSet<String> = p
                        .mon_groups
                        .into_iter()
                        .filter(|m| is_mon_group_path(m))
                        .collect();
                    if !paths.is_empty() {
                        self.own_mon.entry(p.uid).or_default().extend(paths);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("the pod record: {e}; started anew"),
        }
        self.record_dir = Some(dir);
        self
    }

    /// The monitor groups this plugin made, by pod UID.
    #[must_use]
    pub fn own_mon_groups(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.own_mon
    }

    /// Writes the pod record: the plugin's pods with the monitor groups made for them, and
    /// the groups of pods it no longer knows (until removed).
    fn write_record(&mut self) {
        self.record_dirty = false;
        self.record_written = Some(Instant::now());
        let Some(dir) = &self.record_dir else {
            return;
        };
        let mut pods = self.plugin.pods_record();
        let mut seen = HashSet::with_capacity(pods.len());
        for p in &mut pods {
            if let Some(m) = self.own_mon.get(&p.uid) {
                p.mon_groups = m.iter().cloned().collect();
            }
            seen.insert(p.uid.clone());
        }
        for (uid, m) in &self.own_mon {
            if !seen.contains(uid) {
                let mut p = PodRecord::capped(uid, "", "", None, &BTreeMap::new());
                p.mon_groups = m.iter().cloned().collect();
                pods.push(p);
            }
        }
        let record = PodsRecord {
            version: rdt_pqos::pods::VERSION,
            pods,
        };
        match record.write(dir) {
            Ok(()) => self.record_failed = false,
            Err(e) => {
                if !self.record_failed {
                    log::error!("the pod record in {}: {e}", dir.display());
                }
                self.record_failed = true;
            }
        }
    }

    /// Puts a container's tasks in its pod's monitor group, made (and recorded first) when
    /// missing; a group of that name this plugin did not make is left alone.
    fn mon_place(&mut self, m: &MonPlace) {
        let path = mon_group_path(m.group.as_deref(), &m.uid);
        let ours = self.own_mon.get(&m.uid).is_some_and(|s| s.contains(&path));
        if !ours {
            if self.placer.backend.has_group(&path) {
                log::warn!(
                    "pod {}: monitor group {path} exists and is not this plugin's: left alone",
                    shown(&m.pod)
                );
                return;
            }
            // recorded before it is made: a plugin killed in between leaves it recorded
            self.own_mon
                .entry(m.uid.clone())
                .or_default()
                .insert(path.clone());
            self.write_record();
        }
        let tasks = match container_tasks(
            &self.placer.proc,
            &self.placer.cgroup_root,
            m.pid,
            &m.cgroups_path,
        ) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                log::warn!(
                    "container {} of pod {}: its tasks: {e}",
                    shown(&m.container),
                    shown(&m.pod)
                );
                return;
            }
        };
        let ctrl = m.group.as_deref().unwrap_or("");
        let placed = with_writers(&mut self.placer.backend, |b| {
            let mut n = 0usize;
            for &t in &tasks {
                match b.place_in_mon_group(ctrl, &m.uid, t) {
                    Ok(()) => n += 1,
                    // ended since the listing
                    Err(_) if !self.placer.proc.exists(t) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(n)
        });
        match placed {
            Ok(Ok(n)) => log::info!(
                "container {} of pod {}: {n} process(es) in monitor group {path}",
                shown(&m.container),
                shown(&m.pod)
            ),
            Ok(Err(e)) => log::warn!(
                "container {} of pod {}: could not be put in monitor group {path}: {e}",
                shown(&m.container),
                shown(&m.pod)
            ),
            Err(e) => log::warn!("the writers' lock: {e}"),
        }
    }

    /// Removes pod `uid`'s monitor groups that are empty (or gone); those that still hold
    /// tasks stay the plugin's, for a later try.
    fn mon_remove(&mut self, uid: &str) {
        let Some(paths) = self.own_mon.remove(uid) else {
            return;
        };
        let mut left = BTreeSet::new();
        for path in paths {
            match self.placer.backend.remove_mon_group(&path) {
                Ok(true) => log::info!("monitor group {path} removed"),
                Ok(false) if !self.placer.backend.has_group(&path) => {}
                Ok(false) => {
                    left.insert(path);
                }
                Err(e) => {
                    log::warn!("monitor group {path}: {e}");
                    left.insert(path);
                }
            }
        }
        if !left.is_empty() {
            self.own_mon.insert(uid.to_owned(), left);
        }
        self.write_record();
    }

    /// The pods' monitor-group work of the last answers, then the groups of pods a
    /// synchronization no longer has, then the record when something changed.
    fn monitor_groups(&mut self) {
        for w in self.plugin.take_mon_work() {
            match w {
                MonWork::Place(m) => self.mon_place(&m),
                MonWork::Remove { uid } => self.mon_remove(&uid),
            }
        }
        if self.plugin.take_synced() {
            let live: HashSet<String> = self.plugin.pod_uids().map(str::to_owned).collect();
            let gone: Vec<String> = self
                .own_mon
                .keys()
                .filter(|u| !live.contains(*u))
                .cloned()
                .collect();
            for uid in gone {
                self.mon_remove(&uid);
            }
        }
        if self.plugin.take_changed() {
            self.record_dirty = true;
        }
        if self.record_dirty
            && self
                .record_written
                .is_none_or(|t| t.elapsed() >= RECORD_INTERVAL)
        {
            self.write_record();
        }
    }

    /// Reloads the classes when `reload.flag` is set.
    #[must_use]
    pub fn with_reload(mut self, reload: Reload) -> Self {
        self.reload = Some(reload);
        self
    }

    /// Keeps the state in `file`.
    #[must_use]
    pub fn with_state_file(mut self, file: StateFile) -> Self {
        self.state = Some(file);
        self
    }

    /// Re-checks repaired containers every `every`.
    #[must_use]
    pub fn with_recheck(mut self, every: Duration) -> Self {
        self.recheck = every;
        self
    }

    /// Writes the pod record when it has changes, and removes the state file (the plugin
    /// stops).
    pub fn finish(&mut self) {
        if self.record_dirty || self.plugin.take_changed() {
            self.write_record();
        }
        if let Some(f) = self.state.take() {
            let _ = f.remove();
        }
    }

    /// Makes one repair; logs what was done (or why nothing could be); `false` when the
    /// container is gone.
    fn repair(&mut self, r: &Repair, first: bool) -> bool {
        let group = r.group.as_deref().unwrap_or("(the root group)");
        match self.placer.place(r) {
            // nothing to move; or not started: its start (or a re-check) places it
            Ok(0) | Err(PlaceError::NotStarted) => true,
            Ok(n) => {
                log::info!(
                    "container {} ({}) of pod {}: {n} process(es) moved to group {} (class {}){}",
                    shown(&r.container),
                    shown(&r.name),
                    shown(&r.pod),
                    group,
                    r.class,
                    if first { "" } else { " on a re-check" }
                );
                true
            }
            Err(PlaceError::Gone) => false,
            Err(PlaceError::Failed(e)) => {
                log::warn!(
                    "container {} ({}) of pod {}: could not be put in group {} (class {}): {e}",
                    shown(&r.container),
                    shown(&r.name),
                    shown(&r.pod),
                    group,
                    r.class
                );
                true
            }
        }
    }

    fn reload_classes(&mut self, reload: &Reload) -> Result<(), String> {
        let file = ConfigFile::load(&reload.config).map_err(|e| e.to_string())?;
        let proc = self.placer.proc.clone();
        let applied = apply_classes(&mut self.placer.backend, &file, &reload.groups, &proc)
            .map_err(|e| format!("making the classes of {}: {e}", reload.config.display()))?;
        log::info!(
            "reloaded: classes {} ({} write(s))",
            crate::class_list(&applied.classes),
            applied.writes
        );
        self.plugin
            .set_classes(applied.classes)
            .map_err(|e| e.to_string())
    }
}

impl<B: Backend + MonGroups> Session for NodeSession<B> {
    fn handle(&mut self, method: &str, payload: &[u8]) -> Result<Vec<u8>, ttrpc::Status> {
        self.plugin.handle(method, payload)
    }

    fn connected(&mut self) {
        self.plugin.reset_connection();
    }

    fn tick(&mut self) {
        if let Some(f) = &mut self.state
            && let Err(e) = f.heartbeat()
            && !self.state_failed
        {
            log::error!("the state file {}: {e}", f.path().display());
            self.state_failed = true;
        }
        if let Some(reload) = self.reload.take() {
            if reload.flag.swap(false, Ordering::Relaxed)
                && let Err(e) = self.reload_classes(&reload)
            {
                log::error!("reload failed, the classes stay: {e}");
            }
            self.reload = Some(reload);
        }
        for r in self.plugin.take_repairs() {
            if !self.repair(&r, true) {
                self.plugin.forget_repair(&r.container);
            }
        }
        self.monitor_groups();
        if self.last_check.elapsed() >= self.recheck {
            self.last_check = Instant::now();
            let due: Vec<Repair> = self
                .plugin
                .repaired()
                .skip(self.cursor)
                .take(MAX_RECHECKS_PER_TICK)
                .cloned()
                .collect();
            self.cursor = if due.len() < MAX_RECHECKS_PER_TICK {
                0
            } else {
                self.cursor + due.len()
            };
            for r in &due {
                if !self.repair(r, false) {
                    self.plugin.forget_repair(&r.container);
                }
            }
        }
    }

    fn state_changed(&mut self, state: State) {
        if let Some(f) = &mut self.state
            && let Err(e) = f.set(state)
        {
            log::error!("the state file {}: {e}", f.path().display());
        }
    }
}

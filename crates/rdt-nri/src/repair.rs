//! Repair, not report: the plugin puts the containers it finds outside their class in it
//! itself, by writing their tasks into the class's resctrl group as one journaled
//! transaction (what `pqos -a pid:` does), and checks them again while they run
//! ([`NodeSession`]). NRI's container updates cannot do it: they reach the runtime as CRI
//! resources, which carry no RDT class.
//!
//! A container's tasks are the processes of its cgroup ([`container_tasks`]): the cgroup
//! of its process (NRI `Container.pid`, `/proc/<pid>/cgroup`'s unified line), else its
//! cgroups path as the runtime gives it (`/kubepods/...` with the cgroupfs driver,
//! `slice:prefix:name` with systemd's), else its process alone. A process's threads go
//! with it (`rdt_pqos::transaction::Change::Task`); a process or thread it starts later
//! inherits the group from its parent (the kernel's resctrl: a task's `closid` is copied at
//! fork), and the periodic re-check catches one started between the listing and the write.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdt_pqos::config::ConfigFile;
use rdt_pqos::config::goresctrl::GroupOptions;
use rdt_pqos::proc::{ProcFs, cgroup_processes};
use rdt_pqos::transaction::{ApplyPlan, Change, Plan, with_writers};
use rdt_pqos::{Backend, BackendExt, ClassId, TaskId};

use crate::plugin::Repair;
use crate::ready::StateFile;
use crate::{Plugin, Session, State, apply_classes, shown, ttrpc};

/// Where the cgroup (v2) hierarchy is mounted on a host.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The directory, relative to the cgroup mount, of a runtime's cgroups path: cgroupfs's
/// `/kubepods/burstable/pod<uid>/<id>` as it is; systemd's `slice:prefix:name` as
/// systemd lays it out (`kubepods-burstable-pod<uid>.slice` under `kubepods.slice/
/// kubepods-burstable.slice/`, the unit `prefix-name.scope` in it). `None` for an empty
/// path or one with `.` or `..` components.
///
/// # References
/// runc `libcontainer/cgroups/systemd/common.go` (`ExpandSlice`, the `slice:prefix:name`
/// form); systemd.slice(5) (a slice's name is its path in the tree, `-` separated).
#[must_use]
pub fn cgroup_dir_of(cgroups_path: &str) -> Option<PathBuf> {
    let rel = if let Some((slice, rest)) = cgroups_path.split_once(':') {
        let (prefix, name) = rest.split_once(':')?;
        let mut dir = PathBuf::new();
        let slice = slice.strip_suffix(".slice")?;
        if !slice.is_empty() && slice != "-" {
            let mut so_far = String::new();
            for part in slice.split('-') {
                if part.is_empty() {
                    return None;
                }
                if !so_far.is_empty() {
                    so_far.push('-');
                }
                so_far.push_str(part);
                dir.push(format!("{so_far}.slice"));
            }
        }
        if prefix.is_empty() {
            dir.push(format!("{name}.scope"));
        } else {
            dir.push(format!("{prefix}-{name}.scope"));
        }
        dir
    } else {
        PathBuf::from(cgroups_path.trim_start_matches('/'))
    };
    let text = rel.to_str()?;
    let clean = !text.is_empty()
        && text
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    clean.then_some(rel)
}

/// The processes of a container (module docs): of the cgroup of `pid`, else of the
/// cgroup `cgroups_path` names, under `cgroup_root`; else `pid` alone while it exists.
///
/// # Errors
/// `NotFound`: none of them exists (the container is gone); a cgroup's `cgroup.procs`
/// does not parse (`InvalidData`).
pub fn container_tasks(
    proc: &ProcFs,
    cgroup_root: &Path,
    pid: u32,
    cgroups_path: &str,
) -> io::Result<Vec<TaskId>> {
    let task = TaskId::new(pid);
    if pid != 0
        && let Ok(Some(path)) = proc.cgroup_path(task)
        && path != "/"
        && let Ok(tasks) = cgroup_processes(&cgroup_root.join(path.trim_start_matches('/')))
        && !tasks.is_empty()
    {
        return Ok(tasks);
    }
    if let Some(rel) = cgroup_dir_of(cgroups_path) {
        match cgroup_processes(&cgroup_root.join(rel)) {
            Ok(tasks) if !tasks.is_empty() => return Ok(tasks),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    if pid != 0 && proc.exists(task) {
        return Ok(vec![task]);
    }
    Err(io::ErrorKind::NotFound.into())
}

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
}

impl<B: Backend> NodeSession<B> {
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

    /// Removes the state file (the plugin stops).
    pub fn finish(&mut self) {
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

impl<B: Backend> Session for NodeSession<B> {
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

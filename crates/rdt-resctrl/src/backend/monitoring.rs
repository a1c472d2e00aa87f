//! Monitoring groups: `pqos-<pid>-<n>` monitor groups for CPUs and tasks, and watched
//! groups of any owner. Each group's `mon_data` files are opened once at start and read
//! with one positioned read each per poll; the readings go into the group's
//! [`MonAccumulator`], which turns them into [`MonValues`] as on the MSR interface.

use std::collections::BTreeSet;
use std::time::Instant;

use rdt_core::monitor::CounterFormat;
use rdt_core::{
    CacheDomain, LogicalCpu, MonAccumulator, MonEvents, MonGroupId, MonValues, PmuSource,
    Reclaimed, RequestError, RmidEvent, TaskId,
};

use super::ResctrlBackend;
use crate::ResctrlError;
use crate::counter::Counter;
use crate::fs::{EBUSY, ENOSPC, is_pqos_mon_name, join, pqos_mon_pid};
use crate::io::FsLock;

/// What a group counts on the PMU side.
#[derive(Debug)]
pub(super) enum Members {
    Cpus(Vec<LogicalCpu>),
    Tasks(Vec<TaskId>),
    /// A group another tool made, watched without PMU counts.
    None,
}

impl Members {
    fn len(&self) -> usize {
        match self {
            Self::Cpus(c) => c.len(),
            Self::Tasks(t) => t.len(),
            Self::None => 0,
        }
    }
}

/// A group's index, its threads, the threads joining it and those leaving it.
type RetaskSets = (usize, Vec<TaskId>, BTreeSet<TaskId>, BTreeSet<TaskId>);

/// A started monitoring group.
#[derive(Debug)]
pub(super) struct MonGroup {
    id: MonGroupId,
    /// Directories this backend created (relative to the root), removed at stop; empty for
    /// a watched group.
    dirs: Vec<String>,
    counters: Vec<Counter>,
    pub(super) members: Members,
    acc: MonAccumulator,
    /// The directories in `dirs`, open with a shared `flock` held while this process lives:
    /// a process that finds the lock free knows the group's creator has ended, whatever pid
    /// namespace it ran in ([`ResctrlBackend::reclaim_dead_groups`]).
    _alive: Vec<Box<dyn FsLock>>,
}

impl MonGroup {
    /// Reads every counter once and the PMU into the accumulator. A counter whose read
    /// fails is blank for this sample; a counter failing
    /// [`MAX_FAILED_READS`](crate::counter::MAX_FAILED_READS) polls in a row
    /// fails the poll.
    fn poll<P: PmuSource>(&mut self, pmu: &mut P, at: Instant) -> Result<(), ResctrlError> {
        for c in &mut self.counters {
            self.acc.record(c.context, c.event, c.read_or_skip()?);
        }
        self.read_pmu(pmu);
        self.acc.finish(at);
        Ok(())
    }

    /// The reading at start, at `at` ([`MonAccumulator::finish_baseline`]): every MBM
    /// counter file once (occupancy is a level, not a count with a start) and the PMU. A
    /// read that fails leaves that counter without a start (its first delta is `None`);
    /// an error that persists is reported by the first poll, which reads the file again,
    /// so the start does not fail for it.
    fn baseline<P: PmuSource>(&mut self, pmu: &mut P, at: Instant) {
        for c in &mut self.counters {
            if c.event != RmidEvent::LlcOccupancy {
                self.acc
                    .record(c.context, c.event, c.read_or_skip().unwrap_or(None));
            }
        }
        self.read_pmu(pmu);
        self.acc.finish_baseline(at);
    }

    /// Records the members' PMU counts, when the group counts a PMU event.
    fn read_pmu<P: PmuSource>(&mut self, pmu: &mut P) {
        if self.acc.events().intersects(MonEvents::PMU) {
            match &self.members {
                Members::Cpus(cpus) => self.acc.record_pmu(cpus.iter().map(|&c| pmu.read(c))),
                Members::Tasks(tasks) => {
                    self.acc.record_pmu(tasks.iter().map(|&t| pmu.read_task(t)));
                }
                Members::None => {}
            }
        }
    }
}

/// The counter files of a group being set up, and its accumulator contexts.
#[derive(Debug, Default)]
pub(super) struct Files {
    counters: Vec<Counter>,
    contexts: Vec<CacheDomain>,
}

impl<P: PmuSource> ResctrlBackend<P> {
    /// The RMID events `events` needs, checked against `info/L3_MON/mon_features` (through
    /// the capabilities); refuses an empty selection.
    pub(super) fn check_events(&self, events: MonEvents) -> Result<Vec<RmidEvent>, ResctrlError> {
        if events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        self.caps.check_rmid_events(events)?;
        Ok(RmidEvent::of(events).collect())
    }

    /// Opens `dir`'s counter files of `events` for `domains`, one accumulator context per
    /// domain; `own`: a group this backend made, whose `Unassigned` reads are errors.
    pub(super) fn open_counters(
        &self,
        dir: &str,
        domains: &[u32],
        events: &[RmidEvent],
        own: bool,
        out: &mut Files,
    ) -> Result<(), ResctrlError> {
        for &d in domains {
            let context = out.contexts.len();
            out.contexts.push(CacheDomain::new(d));
            for &event in events {
                let rel = join(
                    dir,
                    &format!("mon_data/mon_L3_{d:02}/{}", event.resctrl_name()),
                );
                let c = Counter::open(&self.fs, &rel, context, event)?;
                out.counters.push(if own { c.strict() } else { c });
            }
        }
        Ok(())
    }

    /// Registers a started group, takes its reading at start ([`MonGroup::baseline`]:
    /// call it under the lock when the group has counter files) and hands out its id.
    pub(super) fn add_group(
        &mut self,
        events: MonEvents,
        dirs: Vec<String>,
        files: Files,
        members: Members,
    ) -> MonGroupId {
        // Best effort: where flock is not supported nothing holds the directory, and a
        // reclaiming process then leaves it alone (it cannot take the lock either).
        let alive = dirs
            .iter()
            .filter_map(|d| {
                let f = self.fs.open_lock(d).ok()?;
                f.try_lock(false).ok()?.then_some(f)
            })
            .collect();
        let id = MonGroupId(self.next_id);
        self.next_id += 1;
        let acc = MonAccumulator::new(events, &files.contexts, CounterFormat::BYTES, members.len());
        let mut group = MonGroup {
            id,
            dirs,
            counters: files.counters,
            members,
            acc,
            _alive: alive,
        };
        group.baseline(&mut self.pmu, Instant::now());
        self.groups.push(group);
        id
    }

    /// Removes the `pqos-<pid>-<n>` monitor groups whose process has ended without
    /// stopping them (killed, crashed), under the exclusive lock, and says which.
    ///
    /// A group is taken to be dead when all of these hold: its name is pqos's; its pid is
    /// not this process's, and `<proc>/<pid>` does not exist; and nobody holds the `flock`
    /// that this library's processes keep on the directories of their live groups (so a
    /// live run in another pid namespace, whose pid means nothing here, is left alone). A
    /// group of Intel's pqos, which takes no such lock, is removed once its pid is gone,
    /// as Intel's pqos itself reuses such groups. Other tools' groups are never touched.
    ///
    /// # Errors
    /// [`ResctrlError::Locked`]; listing errors. A group that cannot be removed (EBUSY) is
    /// left and not reported.
    pub fn reclaim_dead_groups(&mut self) -> Result<Vec<Reclaimed>, ResctrlError> {
        let _g = self.lock.exclusive()?;
        let me = std::process::id();
        let mut out = Vec::new();
        for (_, path) in self.fs.mon_groups()? {
            let Some(pid) = pqos_mon_pid(path.rsplit('/').next().unwrap_or_default()) else {
                continue;
            };
            if pid == me || self.proc.exists(TaskId::new(pid)) {
                continue;
            }
            let Ok(dir) = self.fs.open_lock(&path) else {
                continue;
            };
            if !dir.try_lock(true).unwrap_or(false) {
                continue; // a live holder, or no flock here: leave it
            }
            drop(dir);
            if self.fs.rmdir(&path).is_ok() {
                out.push(Reclaimed::ResctrlGroup { path, pid });
            }
        }
        Ok(out)
    }

    /// Creates `name` under each parent and fills it with `fill`; removes everything it
    /// created on failure.
    pub(super) fn create_mon_dirs(
        &self,
        name: &str,
        parents: &[&str],
        mut fill: impl FnMut(&str, &str) -> Result<(), ResctrlError>,
    ) -> Result<Vec<String>, ResctrlError> {
        let mut made: Vec<String> = Vec::new();
        let undo = |made: &[String]| {
            for d in made.iter().rev() {
                let _ = self.fs.rmdir(d);
            }
        };
        for parent in parents {
            let dir = join(parent, &format!("mon_groups/{name}"));
            if let Err(e) = self.fs.mkdir(&dir) {
                undo(&made);
                let errno = e.raw_os_error();
                return Err(if errno == Some(ENOSPC) || errno == Some(EBUSY) {
                    RequestError::OutOfRmids {
                        scope: format!("resctrl group {}", self.fs.path(&dir).display()),
                        limbo: errno == Some(EBUSY),
                        in_use: self.rmid_holders(),
                    }
                    .into()
                } else {
                    ResctrlError::io("create", self.fs.path(&dir), e)
                });
            }
            made.push(dir.clone());
            if let Err(e) = fill(parent, &dir) {
                undo(&made);
                return Err(e);
            }
        }
        Ok(made)
    }

    /// Starts watching an existing group (another tool's, or any group) without changing
    /// it: its `mon_data` files of every L3 domain are opened, read once (the start of the
    /// first poll's interval: the first poll gives the traffic since the watch began) and
    /// read by [`rdt_core::Backend::poll`]. [`rdt_core::Backend::stop_monitoring`] forgets it and
    /// leaves the group in place. `group` is relative to the root (`""` for the root,
    /// `kubepods`, `COS1/mon_groups/x`).
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`] without an L3 event; [`RequestError::Unsupported`] or
    /// [`RequestError::UnsupportedEvent`] for events resctrl does not offer;
    /// [`ResctrlError::Io`] when a file cannot be opened.
    pub fn watch_group(
        &mut self,
        group: &str,
        events: MonEvents,
    ) -> Result<MonGroupId, ResctrlError> {
        let evs = self.check_events(events)?;
        if evs.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        let guard = self.lock.shared()?;
        let mut files = Files::default();
        self.open_counters(group, &self.mon_domains, &evs, false, &mut files)?;
        let id = self.add_group(events, Vec::new(), files, Members::None);
        drop(guard);
        Ok(id)
    }

    /// [`rdt_core::OsOps::change_monitoring_tasks`] on resctrl: each joining thread is
    /// written to the group's monitor group under its control group (the group's RMID
    /// there: its counters go on), each leaving one to its control group's `tasks` (its
    /// default RMID); the group's PMU counting follows. Everything is checked, under the
    /// exclusive lock, before the first write.
    pub(super) fn retask_group(
        &mut self,
        group: MonGroupId,
        add: &[TaskId],
        remove: &[TaskId],
    ) -> Result<(), ResctrlError> {
        let (i, old, joining, leaving) = self.retask_sets(group, add, remove)?;
        if joining.is_empty() && leaving.is_empty() {
            return Ok(());
        }
        let dirs = self.groups[i].dirs.clone();
        let parent_of = |dir: &str| -> String {
            dir.rsplit_once("/mon_groups/")
                .map_or_else(String::new, |(p, _)| p.to_owned())
        };
        let _g = self.lock.exclusive()?;
        let (ctrl, mon) = self.task_homes()?;
        let ctrl_of = |t: &TaskId| {
            ctrl.iter()
                .find(|(_, ts)| ts.contains(t))
                .map_or(String::new(), |(g, _)| g.clone())
        };
        let mut moves = Vec::new();
        for t in &joining {
            if let Some((path, _)) = mon
                .iter()
                .find(|(p, ts)| ts.contains(t) && !dirs.contains(p))
            {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("task {t}"),
                    by: Some(format!("resctrl group {path}")),
                }
                .into());
            }
            let parent = ctrl_of(t);
            let Some(dir) = dirs.iter().find(|d| parent_of(d) == parent) else {
                return Err(RequestError::Unsupported(format!(
                    "task {t} is in control group {:?}, where this monitoring group has no \
                     monitor group (resctrl makes one per control group at start): stop the \
                     group and start it again",
                    if parent.is_empty() { "/" } else { &parent }
                ))
                .into());
            };
            moves.push((dir.clone(), *t));
        }
        let mut joined = Vec::new();
        for (dir, t) in moves {
            if self.move_task(&dir, t)? {
                joined.push(t);
            }
        }
        for t in &leaving {
            let _ = self.move_task(&ctrl_of(t), *t)?;
        }
        let keep: Vec<bool> = old.iter().map(|t| !leaving.contains(t)).collect();
        let Self { groups, pmu, .. } = self;
        let g = &mut groups[i];
        let added: Vec<_> = joined.iter().map(|&t| pmu.read_task(t)).collect();
        if g.acc.events().intersects(MonEvents::PMU) {
            g.acc.change_pmu_members(&keep, added);
        }
        for t in &leaving {
            pmu.release_task(*t);
        }
        let mut members: Vec<TaskId> = old.into_iter().filter(|t| !leaving.contains(t)).collect();
        members.extend(joined);
        g.members = Members::Tasks(members);
        Ok(())
    }

    /// The checks of [`Self::retask_group`] before the lock: the group's index, its
    /// threads, the threads joining and those leaving.
    fn retask_sets(
        &self,
        group: MonGroupId,
        add: &[TaskId],
        remove: &[TaskId],
    ) -> Result<RetaskSets, ResctrlError> {
        let i = self
            .groups
            .iter()
            .position(|g| g.id == group)
            .ok_or(RequestError::NoSuchGroup(group))?;
        let Members::Tasks(old) = &self.groups[i].members else {
            return Err(RequestError::Unsupported(
                "only a group of tasks changes its tasks (this one monitors CPUs or another \
                 tool's group)"
                    .into(),
            )
            .into());
        };
        let old: Vec<TaskId> = old.clone();
        let mut joining = BTreeSet::new();
        for &t in add {
            joining.extend(
                self.proc
                    .threads(t)?
                    .into_iter()
                    .filter(|t| !old.contains(t)),
            );
        }
        let mut leaving = BTreeSet::new();
        for &t in remove {
            // a task gone has left already; its own id may still be listed
            if let Ok(threads) = self.proc.threads(t) {
                leaving.extend(threads.into_iter().filter(|t| old.contains(t)));
            }
            if old.contains(&t) {
                leaving.insert(t);
            }
        }
        for g in self.groups.iter().filter(|g| g.id != group) {
            if let Members::Tasks(held) = &g.members
                && let Some(t) = joining.iter().find(|t| held.contains(t))
            {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("task {t}"),
                    by: Some(Self::holder(g)),
                }
                .into());
            }
        }
        if old.len() - leaving.len() + joining.len() == 0 {
            return Err(RequestError::EmptyGroup.into());
        }
        Ok((i, old, joining, leaving))
    }

    /// The monitor group path of this backend's group holding `what`, for messages.
    pub(super) fn holder(g: &MonGroup) -> String {
        g.dirs.first().map_or_else(
            || "a group of this process".to_owned(),
            |d| format!("resctrl group {d}"),
        )
    }

    /// [`rdt_core::BackendExt::reset_monitoring`] on resctrl: removes every `pqos-*` monitor
    /// group (any pid, under any control group) and forgets this backend's groups; other
    /// tools' monitor groups stay.
    pub(super) fn reset_mon(&mut self) -> Result<(), ResctrlError> {
        let _g = self.lock.exclusive()?;
        self.groups.clear();
        let mut first = None;
        for (_, path) in self.fs.mon_groups()? {
            if is_pqos_mon_name(path.rsplit('/').next().unwrap_or_default())
                && let Err(e) = self.fs.rmdir(&path)
            {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// [`rdt_core::Backend::poll`] on resctrl: every counter file once (positioned read)
    /// under a shared lock, and the PMU.
    pub(super) fn poll_groups(&mut self) -> Result<(), ResctrlError> {
        let _g = self.lock.shared()?;
        let Self { groups, pmu, .. } = self;
        let at = Instant::now(); // one timestamp for every group of the poll
        for g in groups {
            g.poll(pmu, at)?;
        }
        Ok(())
    }

    /// [`rdt_core::Backend::values`] on resctrl.
    pub(super) fn group_values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.groups
            .iter()
            .find(|g| g.id == group)
            .map(|g| g.acc.values())
    }

    /// [`rdt_core::Backend::stop_monitoring`] on resctrl: closes the group's files and
    /// removes the directories it created; a watched group is only forgotten.
    pub(super) fn stop_group(&mut self, group: MonGroupId) -> Result<(), ResctrlError> {
        let i = self
            .groups
            .iter()
            .position(|g| g.id == group)
            .ok_or(RequestError::NoSuchGroup(group))?;
        let g = self.groups.remove(i);
        if let Members::Tasks(tasks) = &g.members {
            for &t in tasks {
                self.pmu.release_task(t);
            }
        }
        let dirs = g.dirs.clone();
        drop(g);
        if dirs.is_empty() {
            return Ok(());
        }
        let _l = self.lock.exclusive()?;
        let mut first = None;
        for d in dirs {
            if let Err(e) = self.fs.rmdir(&d) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

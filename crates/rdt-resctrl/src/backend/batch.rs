//! Starting monitor groups in batches ([`rdt_core::Backend::start_monitoring_many`],
//! [`rdt_core::BackendExt::start_monitoring_tasks_many`]); a single start is a batch of one.
//!
//! Started one by one, each new group listed every control and monitor group, read each
//! one's `cpus_list` (or `tasks`), and listed them again to pick a name: quadratic in the
//! groups (`pqos -I -m all:0-254` on the 384-CPU `genoa` model made ~317,000 filesystem
//! requests; pqos's `lib/os_monitoring.c` does the same). A batch
//! 1. checks each group on its own (events, CPUs or threads, members this backend already
//!    monitors) and against the groups before it (a member in two groups);
//! 2. under the exclusive lock, lists every group and reads its members once
//!    ([`ResctrlBackend::cpu_homes`], [`ResctrlBackend::task_homes`]): a member already in a
//!    monitor group is refused, and each group's members are split by the control group
//!    they are in (one monitor group directory per control group, the same name in each);
//! 3. counts the RMIDs the batch needs (one per directory) against those free
//!    ([`rdt_core::Capabilities::resctrl_mon_groups`] less every group listed), and in
//!    ABMC's `mbm_event` mode the counters it needs per L3 domain against
//!    `available_mbm_cntrs` ([`ResctrlBackend::check_counter_budget`]), groups beyond them
//!    starting without their MBM events (`fit_counters`);
//! 4. picks every name in one pass and makes the directories; when one fails, every
//!    directory the batch made is removed again: all or none;
//! 5. still under the lock, reads each new group's MBM counter files once, through the
//!    files step 4 opened (one `pread` each; no listing or open more): the start of the
//!    first poll's interval ([`rdt_core::monitor`], "Start and first poll").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rdt_core::{
    CacheDomain, CpuSet, GroupStartError, LogicalCpu, MonEvents, MonGroupId, PmuSource,
    RequestError, RmidEvent, TaskId,
};

use super::ResctrlBackend;
use super::monitoring::{Files, Members};
use crate::ResctrlError;
use crate::fs::join;

/// What a monitor group holds: CPUs (`cpus_list`) or threads (`tasks`).
trait Member: Copy + Ord + fmt::Display {
    /// The word for one in messages (`CPU 3`, `task 1234`).
    const NOUN: &'static str;
    /// A started group's members of this kind, if it holds this kind.
    fn of(members: &Members) -> &[Self];
    /// The members of a new group.
    fn wrap(members: Vec<Self>) -> Members;
}

impl Member for LogicalCpu {
    const NOUN: &'static str = "CPU";
    fn of(members: &Members) -> &[Self] {
        match members {
            Members::Cpus(c) => c,
            _ => &[],
        }
    }
    fn wrap(members: Vec<Self>) -> Members {
        Members::Cpus(members)
    }
}

impl Member for TaskId {
    const NOUN: &'static str = "task";
    fn of(members: &Members) -> &[Self] {
        match members {
            Members::Tasks(t) => t,
            _ => &[],
        }
    }
    fn wrap(members: Vec<Self>) -> Members {
        Members::Tasks(members)
    }
}

/// What one planned group needs from resctrl: its RMID events, and the L3 domains of
/// each of its directories (one RMID each).
pub(super) type Need<'a> = (&'a [RmidEvent], Vec<&'a [u32]>);

/// One group of a batch, checked; its directories are planned once resctrl is listed.
#[derive(Debug)]
struct Plan<M> {
    events: MonEvents,
    /// The RMID events (empty for a group counting PMU events only: no directory).
    evs: Vec<RmidEvent>,
    /// The CPUs or threads, ascending.
    members: Vec<M>,
    /// One monitor group directory per control group holding some of the members.
    dirs: Vec<Dir<M>>,
}

/// A planned monitor group directory.
#[derive(Debug)]
struct Dir<M> {
    /// The control group (`""`: the root).
    parent: String,
    /// The members in that control group.
    members: Vec<M>,
    /// The L3 domain ids it counts in, ascending.
    domains: Vec<u32>,
}

/// A group's monitor group directories and their open counter files.
type Made = (Vec<String>, Files);

/// Which group (by path) holds each member.
type HomeOf<'a, M> = BTreeMap<M, &'a str>;

/// `homes` (`(group, members)` pairs) as a map from member to group, the first group
/// listing it kept.
fn home_of<M: Member, S>(homes: &[(String, S)], members: impl Fn(&S) -> Vec<M>) -> HomeOf<'_, M> {
    let mut out = BTreeMap::new();
    for (g, set) in homes {
        for m in members(set) {
            out.entry(m).or_insert(g.as_str());
        }
    }
    out
}

/// The names (last path component) of the monitor groups `homes` lists.
fn names<S>(homes: &[(String, S)]) -> BTreeSet<String> {
    homes
        .iter()
        .filter_map(|(p, _)| p.rsplit('/').next().map(str::to_owned))
        .collect()
}

impl<P: PmuSource> ResctrlBackend<P> {
    /// [`rdt_core::Backend::start_monitoring_many`] on resctrl (module docs).
    ///
    /// # Errors
    /// [`GroupStartError`] naming the first group that failed: the errors of
    /// [`rdt_core::BackendExt::start_monitoring`] (a CPU in two groups of the request is
    /// [`RequestError::AlreadyMonitored`]); [`RequestError::OutOfRmids`] and
    /// [`ResctrlError::NotEnoughMbmCounters`] for the first group beyond the RMIDs or
    /// counters free, with nothing made.
    pub(super) fn start_cpu_groups(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<ResctrlError>> {
        let of = groups.len();
        let fail = |index: usize, error: ResctrlError| GroupStartError { index, of, error };
        let mut plans = Vec::with_capacity(of);
        for (i, (cpus, events)) in groups.iter().enumerate() {
            let members: Vec<LogicalCpu> = cpus.iter().collect();
            plans.push(self.plan_cpus(members, *events).map_err(|e| fail(i, e))?);
        }
        Self::check_disjoint(&plans).map_err(|(i, e)| fail(i, e))?;
        if plans.iter().all(|p| p.evs.is_empty()) {
            return Ok(self.register(plans, Vec::new()));
        }
        let guard = self.lock.exclusive().map_err(|e| fail(0, e))?;
        let (ctrl, mon) = self.cpu_homes().map_err(|e| fail(0, e))?;
        let ctrl_of = home_of(&ctrl, |s: &CpuSet| s.iter().collect());
        let mon_of = home_of(&mon, |s: &CpuSet| s.iter().collect());
        let domain = |c: &LogicalCpu| {
            self.topology
                .get(*c)
                .and_then(|p| p.l3)
                .map(CacheDomain::get)
        };
        for (i, plan) in plans.iter_mut().enumerate() {
            Self::place(plan, &ctrl_of, &mon_of, |m| {
                m.iter().filter_map(domain).collect()
            })
            .map_err(|e| fail(i, e))?;
        }
        let used = ctrl.len() + mon.len();
        let degraded = self.fit_counters(&mut plans).map_err(|(i, e)| fail(i, e))?;
        let made = self
            .make_dirs(&plans, used, &names(&mon), |b, _, name, plan, counters| {
                b.make_cpu_dirs(name, plan, counters)
            })
            .map_err(|(i, e)| fail(i, e))?;
        let ids = self.register(plans, made); // reads each new counter once, under the lock
        drop(guard);
        if !degraded.is_empty() {
            log::warn!("{}", rdt_core::monitor::no_mbm_counter_warning(&degraded));
        }
        Ok(ids)
    }

    /// [`rdt_core::BackendExt::start_monitoring_tasks_many`] on resctrl (module docs): each
    /// named task stands for all its threads; every directory counts in every L3 domain
    /// (tasks run anywhere).
    ///
    /// # Errors
    /// As [`Self::start_cpu_groups`], with the errors of
    /// [`rdt_core::BackendExt::start_monitoring_tasks`] ([`RequestError::NoSuchTask`] when
    /// every thread of a group has exited).
    pub(super) fn start_task_groups(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<ResctrlError>> {
        let of = groups.len();
        let fail = |index: usize, error: ResctrlError| GroupStartError { index, of, error };
        let mut plans = Vec::with_capacity(of);
        for (i, (tasks, events)) in groups.iter().enumerate() {
            if tasks.is_empty() {
                return Err(fail(i, RequestError::EmptyGroup.into()));
            }
            let plan = self
                .expand(tasks)
                .and_then(|tids| self.plan_members(tids, *events));
            plans.push(plan.map_err(|e| fail(i, e))?);
        }
        Self::check_disjoint(&plans).map_err(|(i, e)| fail(i, e))?;
        if plans.iter().all(|p| p.evs.is_empty()) {
            return Ok(self.register(plans, Vec::new()));
        }
        let guard = self.lock.exclusive().map_err(|e| fail(0, e))?;
        let (ctrl, mon) = self.task_homes().map_err(|e| fail(0, e))?;
        let ctrl_of = home_of(&ctrl, |s: &BTreeSet<TaskId>| s.iter().copied().collect());
        let mon_of = home_of(&mon, |s: &BTreeSet<TaskId>| s.iter().copied().collect());
        let all = self.mon_domains.clone();
        for (i, plan) in plans.iter_mut().enumerate() {
            Self::place(plan, &ctrl_of, &mon_of, |_| all.clone()).map_err(|e| fail(i, e))?;
        }
        let used = ctrl.len() + mon.len();
        let degraded = self.fit_counters(&mut plans).map_err(|(i, e)| fail(i, e))?;
        let made = self
            .make_dirs(&plans, used, &names(&mon), |b, i, name, plan, counters| {
                b.make_task_dirs(name, plan, counters, groups[i].0[0])
            })
            .map_err(|(i, e)| fail(i, e))?;
        let ids = self.register(plans, made); // reads each new counter once, under the lock
        drop(guard);
        if !degraded.is_empty() {
            log::warn!("{}", rdt_core::monitor::no_mbm_counter_warning(&degraded));
        }
        Ok(ids)
    }

    /// Step 1 for CPUs: every CPU exists and, with RMID events, has an L3 cache.
    fn plan_cpus(
        &self,
        cpus: Vec<LogicalCpu>,
        events: MonEvents,
    ) -> Result<Plan<LogicalCpu>, ResctrlError> {
        if cpus.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        let plan = self.plan_members(cpus, events)?;
        for &cpu in &plan.members {
            let p = self.topology.get(cpu).ok_or(RequestError::NoSuchCpu(cpu))?;
            if !plan.evs.is_empty() && p.l3.is_none() {
                return Err(RequestError::Unsupported(format!(
                    "CPU {cpu} has no L3 cache, so its LLC occupancy and memory bandwidth \
                     cannot be monitored"
                ))
                .into());
            }
        }
        Ok(plan)
    }

    /// Step 1: the events are offered and no member is in a group this backend runs.
    fn plan_members<M: Member>(
        &self,
        members: Vec<M>,
        events: MonEvents,
    ) -> Result<Plan<M>, ResctrlError> {
        let evs = self.check_events(events)?;
        for g in &self.groups {
            let held = M::of(&g.members);
            if let Some(m) = members.iter().find(|m| held.contains(m)) {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("{} {m}", M::NOUN),
                    by: Some(Self::holder(g)),
                }
                .into());
            }
        }
        Ok(Plan {
            events,
            evs,
            members,
            dirs: Vec::new(),
        })
    }

    /// Step 1: no member is in two groups of the batch.
    fn check_disjoint<M: Member>(plans: &[Plan<M>]) -> Result<(), (usize, ResctrlError)> {
        let mut claimed: BTreeMap<M, usize> = BTreeMap::new();
        for (i, plan) in plans.iter().enumerate() {
            for &m in &plan.members {
                if let Some(j) = claimed.insert(m, i)
                    && j != i
                {
                    return Err((
                        i,
                        RequestError::AlreadyMonitored {
                            what: format!("{} {m}", M::NOUN),
                            by: Some(format!("group {} of the same request", j + 1)),
                        }
                        .into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Step 2 for one group with RMID events: none of its members is in a monitor group
    /// (`mon_of`), and its directories, one per control group (`ctrl_of`; the root for
    /// members in none), counting in the domains `domains` gives for their members.
    fn place<M: Member>(
        plan: &mut Plan<M>,
        ctrl_of: &HomeOf<'_, M>,
        mon_of: &HomeOf<'_, M>,
        domains: impl Fn(&[M]) -> Vec<u32>,
    ) -> Result<(), ResctrlError> {
        if plan.evs.is_empty() {
            return Ok(());
        }
        if let Some((m, path)) = plan
            .members
            .iter()
            .find_map(|m| mon_of.get(m).map(|p| (m, *p)))
        {
            return Err(RequestError::AlreadyMonitored {
                what: format!("{} {m}", M::NOUN),
                by: Some(format!("resctrl group {path}")),
            }
            .into());
        }
        let mut by_parent: BTreeMap<&str, Vec<M>> = BTreeMap::new();
        for &m in &plan.members {
            let parent = ctrl_of.get(&m).copied().unwrap_or("");
            by_parent.entry(parent).or_default().push(m);
        }
        plan.dirs = by_parent
            .into_iter()
            .map(|(parent, members)| {
                let mut d = domains(&members);
                d.sort_unstable();
                d.dedup();
                Dir {
                    parent: parent.to_owned(),
                    members,
                    domains: d,
                }
            })
            .collect();
        Ok(())
    }

    /// Step 3 in ABMC's `mbm_event` mode, before anything is made: the groups, in request
    /// order, take the free counters of their L3 domains as the kernel would hand them out;
    /// a group whose MBM events no longer fit loses them and counts what needs no counter
    /// (occupancy, the PMU), as pqos monitors every group it is asked for (its MBM columns
    /// then read 0: intel-cmt-cat issue 311). Returns those groups' members (`3`,
    /// `0,1,2,3`), for [`rdt_core::monitor::no_mbm_counter_warning`].
    ///
    /// # Errors
    /// [`ResctrlError::NotEnoughMbmCounters`] for a group asking for nothing but memory
    /// bandwidth (`-m mbl:3`), which cannot do without; a read error.
    fn fit_counters<M: Member>(
        &self,
        plans: &mut [Plan<M>],
    ) -> Result<Vec<String>, (usize, ResctrlError)> {
        let mut degraded = Vec::new();
        if !self.needs_counters().map_err(|e| (0, e))? {
            return Ok(degraded);
        }
        loop {
            let needs: Vec<Need<'_>> = plans
                .iter()
                .map(|p| {
                    let doms = p.dirs.iter().map(|d| d.domains.as_slice()).collect();
                    (p.evs.as_slice(), doms)
                })
                .collect();
            let Err((i, e)) = self.check_counter_budget(&needs) else {
                return Ok(degraded);
            };
            let plan = &mut plans[i];
            let rest = plan.events.difference(MonEvents::MBM);
            if rest.is_empty() || !plan.evs.iter().any(|e| *e != RmidEvent::LlcOccupancy) {
                return Err((i, e));
            }
            plan.events = rest;
            plan.evs.retain(|e| *e == RmidEvent::LlcOccupancy);
            degraded.push(
                plan.members
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
    }

    /// Steps 3 and 4, under the exclusive lock: the RMID and ABMC counter budgets, then
    /// the names (none in `taken`) and each group's directories through `make(backend,
    /// index, name, plan, counters)`. When one group fails, the directories of the groups
    /// before it are removed.
    ///
    /// # Errors
    /// The index of the failed group and its error.
    fn make_dirs<M: Member>(
        &mut self,
        plans: &[Plan<M>],
        used: usize,
        taken: &BTreeSet<String>,
        make: impl Fn(&Self, usize, &str, &Plan<M>, bool) -> Result<Made, ResctrlError>,
    ) -> Result<Vec<Made>, (usize, ResctrlError)> {
        let needs: Vec<Need<'_>> = plans
            .iter()
            .map(|p| {
                let doms = p.dirs.iter().map(|d| d.domains.as_slice()).collect();
                (p.evs.as_slice(), doms)
            })
            .collect();
        self.check_rmid_budget(&needs, used)?;
        let counters = self.needs_counters().map_err(|e| (0, e))?;
        if counters {
            self.check_counter_budget(&needs)?;
        }
        let wanted = plans.iter().filter(|p| !p.evs.is_empty()).count();
        let mut names = self.fresh_names(taken, wanted).into_iter();
        let mut done: Vec<Made> = Vec::with_capacity(plans.len());
        for (i, plan) in plans.iter().enumerate() {
            if plan.evs.is_empty() {
                done.push(Made::default());
                continue;
            }
            let name = names.next().unwrap_or_default();
            match make(self, i, &name, plan, counters) {
                Ok(m) => done.push(m),
                Err(e) => {
                    for (dirs, files) in done.drain(..).rev() {
                        drop(files); // close the counters before the directories go
                        for d in dirs.iter().rev() {
                            let _ = self.fs.rmdir(d);
                        }
                    }
                    return Err((i, e));
                }
            }
        }
        Ok(done)
    }

    /// Step 3: the RMIDs the planned groups need (one per directory) against those free:
    /// [`rdt_core::Capabilities::resctrl_mon_groups`] less the `used` control and monitor
    /// groups, each holding one. Nothing to check without the count. The kernel may still
    /// refuse a `mkdir` for RMIDs in limbo (EBUSY).
    ///
    /// # Errors
    /// The index of the first group beyond the free RMIDs, and
    /// [`RequestError::OutOfRmids`] naming the holders.
    fn check_rmid_budget(
        &self,
        needs: &[Need<'_>],
        used: usize,
    ) -> Result<(), (usize, ResctrlError)> {
        let Some(cap) = self.caps.resctrl_mon_groups() else {
            return Ok(());
        };
        let free = (cap as usize).saturating_sub(used);
        let needed: usize = needs.iter().map(|(_, dirs)| dirs.len()).sum();
        if needed <= free {
            return Ok(());
        }
        let mut sum = 0;
        let first = needs
            .iter()
            .position(|(_, dirs)| {
                sum += dirs.len();
                sum > free
            })
            .unwrap_or(0);
        let what = if needed == 1 {
            "the new monitor group".to_owned()
        } else {
            format!("the {needed} new monitor groups asked for")
        };
        Err((
            first,
            RequestError::OutOfRmids {
                scope: format!(
                    "{what}: {free} of resctrl's {cap} (num_rmids less the root's) are free"
                ),
                limbo: false,
                in_use: self.rmid_holders(),
            }
            .into(),
        ))
    }

    /// `n` monitor group names `pqos-<pid>-<k>` none of which is in `taken`, in one pass.
    fn fresh_names(&mut self, taken: &BTreeSet<String>, n: usize) -> Vec<String> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let name = format!("pqos-{}-{}", std::process::id(), self.next_name);
            self.next_name += 1;
            if !taken.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    /// Step 4 for a CPU group: `name` under each control group, its `cpus_list`, ABMC
    /// counters where `counters`, its open `mon_data` files.
    fn make_cpu_dirs(
        &self,
        name: &str,
        plan: &Plan<LogicalCpu>,
        counters: bool,
    ) -> Result<Made, ResctrlError> {
        let mut files = Files::default();
        let parents: Vec<&str> = plan.dirs.iter().map(|d| d.parent.as_str()).collect();
        let dirs = self.create_mon_dirs(name, &parents, |parent, dir| {
            let Some(d) = plan.dirs.iter().find(|d| d.parent == parent) else {
                return Ok(());
            };
            let set: CpuSet = d.members.iter().copied().collect();
            self.fs
                .write(&join(dir, "cpus_list"), &format!("{set}\n"))?;
            if counters {
                self.assign_counters(dir, &plan.evs, &d.domains)?;
            }
            self.open_counters(dir, &d.domains, &plan.evs, true, &mut files)
        })?;
        Ok((dirs, files))
    }

    /// Step 4 for a task group: `name` under each control group, each thread written to
    /// its `tasks` (threads that exited meanwhile skipped), ABMC counters where
    /// `counters`, its open `mon_data` files.
    ///
    /// # Errors
    /// [`RequestError::NoSuchTask`] (`first`, the first task asked for) when every thread
    /// has exited: the directories are removed.
    fn make_task_dirs(
        &self,
        name: &str,
        plan: &Plan<TaskId>,
        counters: bool,
        first: TaskId,
    ) -> Result<Made, ResctrlError> {
        let mut files = Files::default();
        let mut moved = 0usize;
        let parents: Vec<&str> = plan.dirs.iter().map(|d| d.parent.as_str()).collect();
        let dirs = self.create_mon_dirs(name, &parents, |parent, dir| {
            let Some(d) = plan.dirs.iter().find(|d| d.parent == parent) else {
                return Ok(());
            };
            for &t in &d.members {
                if self.move_task(dir, t)? {
                    moved += 1;
                }
            }
            if counters {
                self.assign_counters(dir, &plan.evs, &d.domains)?;
            }
            self.open_counters(dir, &d.domains, &plan.evs, true, &mut files)
        })?;
        if moved == 0 {
            drop(files);
            for d in dirs.iter().rev() {
                let _ = self.fs.rmdir(d);
            }
            return Err(RequestError::NoSuchTask(first).into());
        }
        Ok((dirs, files))
    }

    /// Registers the groups of a batch, in order, with what [`Self::make_dirs`] made
    /// (nothing: groups without directories).
    fn register<M: Member>(&mut self, plans: Vec<Plan<M>>, made: Vec<Made>) -> Vec<MonGroupId> {
        let mut made = made.into_iter();
        plans
            .into_iter()
            .map(|plan| {
                let (dirs, files) = made.next().unwrap_or_default();
                self.add_group(plan.events, dirs, files, M::wrap(plan.members))
            })
            .collect()
    }
}

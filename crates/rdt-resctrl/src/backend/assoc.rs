//! Association: CPUs (`cpus_list`) and tasks (`tasks`, one id per write) into the
//! control group of a class, leaving other tools' groups alone.

use std::collections::BTreeSet;

use rdt_core::{ClassId, CpuSet, LogicalCpu, PmuSource, RequestError, TaskId};

use super::ResctrlBackend;
use super::alloc::Undo;
use crate::ResctrlError;
use crate::fs::{ESRCH, is_pqos_mon_name, join};

impl<P: PmuSource> ResctrlBackend<P> {
    /// Writes `cpus` to control group `group`'s `cpus_list`, and gives its monitor groups
    /// back the CPUs the kernel took from them (any write to a control group's CPUs empties
    /// its monitor groups, spec §6.2).
    pub(super) fn write_ctrl_cpus(&self, group: &str, cpus: &CpuSet) -> Result<(), ResctrlError> {
        let mut children = Vec::new();
        for name in self.fs.subdirs(&join(group, "mon_groups"))? {
            let path = join(group, &format!("mon_groups/{name}"));
            let had = self.fs.cpus(&path)?;
            if !had.is_empty() {
                children.push((path, had));
            }
        }
        self.fs
            .write(&join(group, "cpus_list"), &format!("{cpus}\n"))?;
        for (path, had) in children {
            let keep: CpuSet = had.iter().filter(|c| cpus.contains(*c)).collect();
            if !keep.is_empty() {
                self.fs
                    .write(&join(&path, "cpus_list"), &format!("{keep}\n"))?;
            }
        }
        Ok(())
    }

    /// Writes one thread id to `group`'s `tasks`; `Ok(false)` when it no longer exists.
    pub(super) fn move_task(&self, group: &str, tid: TaskId) -> Result<bool, ResctrlError> {
        match self.fs.write(&join(group, "tasks"), &format!("{tid}\n")) {
            Ok(()) => Ok(true),
            Err(ResctrlError::Rejected { source, .. }) if source.raw_os_error() == Some(ESRCH) => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The threads the named tasks stand for, each once, ascending.
    pub(super) fn expand(&self, tasks: &[TaskId]) -> Result<Vec<TaskId>, ResctrlError> {
        let mut all = BTreeSet::new();
        for &t in tasks {
            all.extend(self.proc.threads(t)?);
        }
        Ok(all.into_iter().collect())
    }

    /// [`BackendExt::class_of`] on resctrl.
    pub(super) fn cpu_class(&mut self, cpu: LogicalCpu) -> Result<ClassId, ResctrlError> {
        self.topology.get(cpu).ok_or(RequestError::NoSuchCpu(cpu))?;
        let _g = self.lock.shared()?;
        for g in self.fs.ctrl_groups()? {
            if self.fs.cpus(&g)?.contains(cpu) {
                return self
                    .class_of_group(&g)
                    .map(ClassId::new)
                    .ok_or_else(|| ResctrlError::foreign(format!("CPU {cpu}"), &g));
            }
        }
        Ok(ClassId::new(0))
    }

    /// [`BackendExt::associate`] and [`Backend::associate_cpus`] on resctrl: the groups and
    /// their CPUs are read once, every CPU is checked (none may be in another tool's
    /// control or monitor group), then the class's group gets them all in one `cpus_list`
    /// write (the kernel moves each CPU out of its old group, `cpumask_andnot` in
    /// `cpus_ctrl_write`). Groups this backend made that the move leaves unused are removed.
    pub(super) fn move_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), ResctrlError> {
        for cpu in cpus.iter() {
            self.topology.get(cpu).ok_or(RequestError::NoSuchCpu(cpu))?;
        }
        self.check_closid(class)?;
        let _g = self.lock.exclusive()?;
        let (ctrl, mon) = self.cpu_homes()?;
        let target = self.group_of(class);
        let mut homes = BTreeSet::new();
        for cpu in cpus.iter() {
            let home = ctrl
                .iter()
                .find(|(_, s)| s.contains(cpu))
                .map_or("", |(g, _)| g.as_str());
            let foreign = |g: &str| ResctrlError::foreign(format!("CPU {cpu}"), g);
            if !home.is_empty() && self.class_of_group(home).is_none() {
                return Err(foreign(home));
            }
            if let Some((g, _)) = mon.iter().find(|(g, s)| {
                s.contains(cpu) && !is_pqos_mon_name(g.rsplit('/').next().unwrap_or_default())
            }) {
                return Err(foreign(g));
            }
            if home != target {
                homes.insert(home.to_owned());
            }
        }
        if homes.is_empty() {
            return Ok(());
        }
        let mut undo = Undo::default();
        let target = self.ensure_group(class, &mut undo)?;
        let had = ctrl
            .iter()
            .find(|(g, _)| *g == target)
            .map(|(_, s)| s.clone());
        let step = had
            .map_or_else(|| self.fs.cpus(&target), Ok)
            .and_then(|mut had| {
                had.extend(cpus.iter());
                self.write_ctrl_cpus(&target, &had)
            });
        if let Err(e) = step {
            self.rollback(undo);
            return Err(e);
        }
        self.created.extend(undo.created);
        for home in homes {
            self.release_if_unused(&home);
        }
        Ok(())
    }

    /// [`BackendExt::class_of_task`] on resctrl.
    pub(super) fn task_class(&mut self, task: TaskId) -> Result<ClassId, ResctrlError> {
        if !self.proc.exists(task) {
            return Err(RequestError::NoSuchTask(task).into());
        }
        let _g = self.lock.shared()?;
        for g in self.fs.ctrl_groups()? {
            if self.fs.tasks(&g)?.contains(&task) {
                return self
                    .class_of_group(&g)
                    .map(ClassId::new)
                    .ok_or_else(|| ResctrlError::foreign(format!("task {task}"), &g));
            }
        }
        Ok(ClassId::new(0))
    }

    /// [`BackendExt::associate_task`] on resctrl.
    pub(super) fn move_task_to_class(
        &mut self,
        task: TaskId,
        class: ClassId,
    ) -> Result<(), ResctrlError> {
        self.check_closid(class)?;
        let tids = self.expand(&[task])?;
        let _g = self.lock.exclusive()?;
        let (ctrl, mon) = self.task_homes()?;
        for &t in &tids {
            let foreign = ctrl
                .iter()
                .find(|(g, s)| s.contains(&t) && self.class_of_group(g).is_none())
                .or_else(|| {
                    mon.iter().find(|(g, s)| {
                        s.contains(&t)
                            && !is_pqos_mon_name(g.rsplit('/').next().unwrap_or_default())
                    })
                });
            if let Some((g, _)) = foreign {
                return Err(ResctrlError::foreign(format!("task {t}"), g));
            }
        }
        let home_of = |t: &TaskId| {
            ctrl.iter()
                .find(|(_, s)| s.contains(t))
                .map_or(String::new(), |(g, _)| g.clone())
        };
        let homes: Vec<String> = tids.iter().map(home_of).collect();
        let mut undo = Undo::default();
        let target = self.ensure_group(class, &mut undo)?;
        let mut moved = Vec::new();
        for (&t, home) in tids.iter().zip(&homes) {
            match self.move_task(&target, t) {
                Ok(true) => moved.push((t, home)),
                Ok(false) => {}
                Err(e) => {
                    // Put back the threads already moved, so that no process is left split.
                    for (t, home) in moved.into_iter().rev() {
                        let _ = self.move_task(home, t);
                    }
                    self.rollback(undo);
                    return Err(e);
                }
            }
        }
        if moved.is_empty() {
            self.rollback(undo);
            return Err(RequestError::NoSuchTask(task).into());
        }
        self.created.extend(undo.created);
        let homes: BTreeSet<String> = homes.into_iter().collect();
        for home in homes {
            self.release_if_unused(&home);
        }
        Ok(())
    }

    /// [`BackendExt::tasks_of_class`] on resctrl.
    pub(super) fn class_tasks(&mut self, class: ClassId) -> Result<Vec<TaskId>, ResctrlError> {
        let g = self.group_of(class);
        let _l = self.lock.shared()?;
        if !g.is_empty() && !self.fs.exists(&g) {
            return Ok(Vec::new());
        }
        let mut t = self.fs.tasks(&g)?;
        t.sort();
        t.dedup();
        Ok(t)
    }
}

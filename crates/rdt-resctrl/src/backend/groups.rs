//! The groups there are: control and monitor groups with their owner, which groups hold
//! each CPU and task, and who holds CLOSIDs and RMIDs (for error messages).

use std::collections::BTreeSet;

use rdt_core::{ClassId, CpuSet, GroupInfo, GroupKind, PmuSource, TaskId};

use super::ResctrlBackend;
use crate::ResctrlError;
use crate::fs::is_pqos_mon_name;
use crate::owner::group_owner;

/// Control groups and monitor groups with a member set each, by path.
pub(super) type Homes<T> = (Vec<(String, T)>, Vec<(String, T)>);

impl<P: PmuSource> ResctrlBackend<P> {
    pub(super) fn groups_unlocked(&self) -> Result<Vec<GroupInfo>, ResctrlError> {
        let mut out = Vec::new();
        let mon = self.fs.mon_groups()?;
        let push_mon = |out: &mut Vec<GroupInfo>, parent: &str| {
            for (p, path) in mon.iter().filter(|(p, _)| p == parent) {
                let name = path.rsplit('/').next().unwrap_or_default();
                out.push(GroupInfo {
                    path: path.clone(),
                    kind: GroupKind::Monitor,
                    owner: group_owner(GroupKind::Monitor, name, |_| false),
                    class: if p.is_empty() {
                        Some(ClassId::new(0))
                    } else {
                        self.class_of_group(p).map(ClassId::new)
                    },
                });
            }
        };
        push_mon(&mut out, "");
        for g in self.fs.ctrl_groups()? {
            let class = self.class_of_group(&g).map(ClassId::new);
            out.push(GroupInfo {
                path: g.clone(),
                kind: GroupKind::Control,
                owner: group_owner(GroupKind::Control, &g, |_| class.is_some()),
                class,
            });
            push_mon(&mut out, &g);
        }
        Ok(out)
    }

    pub(super) fn rmid_holders(&self) -> Vec<String> {
        let mut v = self.closid_holders();
        for (_, path) in self.fs.mon_groups().unwrap_or_default() {
            let name = path.rsplit('/').next().unwrap_or_default();
            v.push(if is_pqos_mon_name(name) {
                path
            } else {
                format!("{path} (foreign)")
            });
        }
        v
    }

    /// Which control group holds each CPU (absent: the root), and which monitor group.
    pub(super) fn cpu_homes(&self) -> Result<Homes<CpuSet>, ResctrlError> {
        let mut ctrl = Vec::new();
        for g in self.fs.ctrl_groups()? {
            let cpus = self.fs.cpus(&g)?;
            ctrl.push((g, cpus));
        }
        let mut mon = Vec::new();
        for (_, path) in self.fs.mon_groups()? {
            let cpus = self.fs.cpus(&path)?;
            mon.push((path, cpus));
        }
        Ok((ctrl, mon))
    }

    /// Which control and monitor groups list each task (the root lists the rest).
    pub(super) fn task_homes(&self) -> Result<Homes<BTreeSet<TaskId>>, ResctrlError> {
        let mut ctrl = Vec::new();
        for g in self.fs.ctrl_groups()? {
            let t = self.fs.tasks(&g)?.into_iter().collect();
            ctrl.push((g, t));
        }
        let mut mon = Vec::new();
        for (_, path) in self.fs.mon_groups()? {
            let t = self.fs.tasks(&path)?.into_iter().collect();
            mon.push((path, t));
        }
        Ok((ctrl, mon))
    }

    /// [`BackendExt::groups`] on resctrl.
    pub(super) fn list_groups(&mut self) -> Result<Vec<GroupInfo>, ResctrlError> {
        let _g = self.lock.shared()?;
        self.groups_unlocked()
    }
}

//! Groups: `mkdir`, `rmdir`, `rename`, and the `tasks`, `cpus` and `cpus_list` files
//! (`fs/resctrl/rdtgroup.c`).

use std::io;

use rdt_core::CpuSet;

use crate::SimPlatform;
use crate::vfs::err;

use super::errno::{EEXIST, EINVAL, ENAMETOOLONG, ENODEV, ENOENT, ENOSPC, ENOTDIR, EPERM, ESRCH};
use super::kstr::{bitmap_parse, bitmap_parselist, kstrtoint, strim, strsep};
use super::{
    Gid, Group, GroupKind, Mode, Node, ROOT, Resctrl, TaskIds, and, default_mba_event, minus,
    split_last,
};

/// `NAME_MAX`.
const NAME_MAX: usize = 255;

impl Resctrl {
    /// `mkdir(2)`: the VFS checks, then `rdtgroup_mkdir`.
    pub(super) fn do_mkdir(&mut self, p: &mut SimPlatform, path: &str) -> io::Result<()> {
        let (parent_path, name) = split_last(path);
        if name.is_empty() {
            return Err(err(EEXIST)); // the root
        }
        if name.len() > NAME_MAX {
            return Err(err(ENAMETOOLONG));
        }
        let parent = self.resolve(parent_path)?;
        if !parent.is_dir() {
            return Err(err(ENOTDIR));
        }
        if self.entry(parent, name).is_some() {
            return Err(err(EEXIST));
        }
        if name.contains('\n') {
            return Err(err(EINVAL));
        }
        if self.hw.alloc_capable() && parent == Node::GroupDir(ROOT) {
            return self.with_pqr_sync(p, |fs, p| fs.mkdir_ctrl(p, name));
        }
        if !self.mon_capable() {
            return Err(err(EPERM));
        }
        // rdtgroup_mkdir_mon: the parent must be a group's directory (not info/) ...
        let Some(prgrp) = parent.group() else {
            return Err(err(ENODEV));
        };
        self.status_clear();
        // ... and precisely a `mon_groups` directory, for a name other than `mon_groups`.
        if parent != Node::MonGroups(prgrp) || name == "mon_groups" {
            return Err(err(EPERM));
        }
        self.mkdir_mon(p, prgrp, name)
    }

    /// The lowest free CLOSID (`closid_alloc`).
    fn closid_alloc(&mut self) -> Option<u32> {
        let i = self.closid_used.iter().position(|u| !u)?;
        self.closid_used[i] = true;
        u32::try_from(i).ok()
    }

    /// `rdtgroup_mkdir_ctrl_mon`.
    fn mkdir_ctrl(&mut self, p: &mut SimPlatform, name: &str) -> io::Result<()> {
        self.status_clear();
        let Some(closid) = self.closid_alloc() else {
            return self.fail(ENOSPC, "Out of CLOSIDs\n");
        };
        let rmid = if self.mon_capable() {
            match self.alloc_rmid() {
                Ok(r) => r,
                Err(code) => {
                    self.closid_used[closid as usize] = false;
                    return self.fail(code, "Out of RMIDs\n");
                }
            }
        } else {
            0
        };
        let g = self.add_group(Group {
            name: name.into(),
            kind: GroupKind::Ctrl {
                children: Vec::new(),
            },
            closid,
            rmid,
            cpus: CpuSet::new(),
            mode: Mode::Shareable,
            mba_event: default_mba_event(&self.hw),
        });
        self.ctrl_names.insert(name.into(), g);
        self.reset_mon_counters(p, g)?;
        if let Err(e) = self.init_alloc(p, closid) {
            self.ctrl_names.remove(name);
            self.groups[g] = None;
            self.free_rmid(p, rmid);
            self.closid_used[closid as usize] = false;
            return Err(e);
        }
        self.amd_assign_on_mkdir(p, g)
    }

    /// `rdtgroup_mkdir_mon`: the parent's CLOSID, an RMID of its own.
    fn mkdir_mon(&mut self, p: &mut SimPlatform, parent: Gid, name: &str) -> io::Result<()> {
        let rmid = match self.alloc_rmid() {
            Ok(r) => r,
            Err(code) => return self.fail(code, "Out of RMIDs\n"),
        };
        let closid = self.grp(parent).closid;
        let g = self.add_group(Group {
            name: name.into(),
            kind: GroupKind::Mon { parent },
            closid,
            rmid,
            cpus: CpuSet::new(),
            mode: Mode::Shareable,
            mba_event: default_mba_event(&self.hw),
        });
        if let GroupKind::Ctrl { children } = &mut self.grp_mut(parent).kind {
            children.insert(0, g);
        }
        self.reset_mon_counters(p, g)?;
        self.amd_assign_on_mkdir(p, g)
    }

    fn add_group(&mut self, g: Group) -> Gid {
        self.groups.push(Some(g));
        self.groups.len() - 1
    }

    /// `rdtgroup_rmdir`: CTRL_MON groups under the root and MON groups under `mon_groups`;
    /// anything else is EPERM.
    pub(super) fn do_rmdir(&mut self, p: &mut SimPlatform, n: Node) -> io::Result<()> {
        let Node::GroupDir(g) = n else {
            return Err(err(EPERM));
        };
        if g == ROOT {
            return Err(err(EPERM));
        }
        match self.grp(g).kind.clone() {
            GroupKind::Ctrl { children } => self.with_pqr_sync(p, |fs, p| {
                fs.rmdir_ctrl(p, g, &children);
                Ok(())
            }),
            GroupKind::Mon { parent } => self.with_pqr_sync(p, |fs, p| {
                fs.rmdir_mon(p, g, parent);
                Ok(())
            }),
        }
    }

    /// `rdtgroup_rmdir_ctrl`: tasks (its MON groups' too) and CPUs to the root, RMIDs freed
    /// (own first, then the MON groups', newest first), CLOSID freed.
    fn rmdir_ctrl(&mut self, p: &mut SimPlatform, g: Gid, children: &[Gid]) {
        let grp = self.grp(g).clone();
        for t in self.tasks.values_mut() {
            if t.closid == grp.closid {
                *t = TaskIds::default();
            }
        }
        let root = self.grp_mut(ROOT);
        root.cpus.union_with(&grp.cpus);
        self.free_rmid(p, grp.rmid);
        self.closid_used[grp.closid as usize] = false;
        self.ctrl_names.remove(&grp.name);
        self.groups[g] = None;
        self.amd_group_removed(p, g);
        for &c in children {
            let rmid = self.grp(c).rmid;
            self.free_rmid(p, rmid);
            self.groups[c] = None;
            self.amd_group_removed(p, c);
        }
    }

    /// `rdtgroup_rmdir_mon`: tasks and CPUs back to the parent, RMID freed.
    fn rmdir_mon(&mut self, p: &mut SimPlatform, g: Gid, parent: Gid) {
        let rmid = self.grp(g).rmid;
        let (pclosid, prmid) = (self.grp(parent).closid, self.grp(parent).rmid);
        for t in self.tasks.values_mut() {
            if t.rmid == rmid {
                *t = TaskIds {
                    closid: pclosid,
                    rmid: prmid,
                };
            }
        }
        self.free_rmid(p, rmid);
        if let GroupKind::Ctrl { children } = &mut self.grp_mut(parent).kind {
            children.retain(|&c| c != g);
        }
        self.groups[g] = None;
        self.amd_group_removed(p, g);
    }

    /// `rdtgroup_rename`: only a MON group, to another (or the same) `mon_groups` directory.
    pub(super) fn do_rename(
        &mut self,
        p: &mut SimPlatform,
        from: &str,
        to: &str,
    ) -> io::Result<()> {
        let src = self.resolve(from)?;
        let (to_parent, to_name) = split_last(to);
        let dst_parent = self.resolve(to_parent)?;
        if !dst_parent.is_dir() {
            return Err(err(ENOTDIR));
        }
        let (Some(_), Some(new_parent)) = (src.group(), dst_parent.group()) else {
            return Err(err(ENOENT));
        };
        self.status_clear();
        if !src.is_dir() {
            // The kernel's message has no newline here.
            return self.fail(EPERM, "Source and destination must be directories");
        }
        let mon = match src {
            Node::GroupDir(g) => match self.grp(g).kind {
                GroupKind::Mon { parent } => Some((g, parent)),
                GroupKind::Ctrl { .. } => None,
            },
            _ => None,
        };
        let Some((g, old_parent)) = mon else {
            return self.fail(EPERM, "Source must be a MON group\n");
        };
        if dst_parent != Node::MonGroups(new_parent) || to_name == "mon_groups" {
            return self.fail(EPERM, "Destination must be a mon_groups subdirectory\n");
        }
        if !self.grp(g).cpus.is_empty() && old_parent != new_parent {
            return self.fail(EPERM, "Cannot move a MON group that monitors CPUs\n");
        }
        if let Some((_, existing)) = self
            .entries(dst_parent)
            .into_iter()
            .find(|(n, _)| n == to_name)
        {
            return if existing == src {
                Ok(())
            } else {
                Err(err(EEXIST))
            };
        }
        self.with_pqr_sync(p, |fs, _| {
            fs.grp_mut(g).name = to_name.into();
            if old_parent != new_parent {
                // mongrp_reparent: to the tail of the new parent's list, with its CLOSID, and
                // the group's tasks follow.
                if let GroupKind::Ctrl { children } = &mut fs.grp_mut(old_parent).kind {
                    children.retain(|&c| c != g);
                }
                if let GroupKind::Ctrl { children } = &mut fs.grp_mut(new_parent).kind {
                    children.push(g);
                }
                let closid = fs.grp(new_parent).closid;
                let rmid = fs.grp(g).rmid;
                let grp = fs.grp_mut(g);
                grp.kind = GroupKind::Mon { parent: new_parent };
                grp.closid = closid;
                for t in fs.tasks.values_mut() {
                    if t.rmid == rmid {
                        t.closid = closid;
                    }
                }
            }
            Ok(())
        })
    }

    // ----- tasks -----

    /// Whether task `id` exists: a simulated task, or a host thread (`/proc/<id>`).
    fn task_exists(&self, id: u32) -> bool {
        self.sim_tasks.contains(&id) || self.proc.exists(rdt_core::TaskId::new(id))
    }

    /// `show_rdt_tasks`: CTRL_MON groups list every task with their CLOSID (MON children's
    /// included), MON groups every task with their RMID. The root also lists every host
    /// thread no write has moved (`/proc/*/task/*`: CLOSID and RMID 0 since boot), as the
    /// kernel walks every thread of the system.
    pub(super) fn show_tasks(&self, g: Gid) -> String {
        let grp = self.grp(g);
        let ctrl = Self::is_ctrl(grp);
        let mut ids = std::collections::BTreeSet::new();
        for (&id, t) in &self.tasks {
            let member = if ctrl {
                self.hw.alloc_capable() && t.closid == grp.closid
            } else {
                self.mon_capable() && t.rmid == grp.rmid
            };
            if member && self.task_exists(id) {
                ids.insert(id);
            }
        }
        if g == super::ROOT {
            let host = self.proc.all_threads().unwrap_or_default();
            ids.extend(
                host.into_iter()
                    .map(rdt_core::TaskId::get)
                    .filter(|id| !self.tasks.contains_key(id)),
            );
        }
        let mut out = String::new();
        for id in ids {
            out.push_str(&id.to_string());
            out.push('\n');
        }
        out
    }

    /// `rdtgroup_tasks_write`: `ID[,ID]...`, each moved in turn; the first failure stops the
    /// write, earlier moves stay done.
    pub(super) fn write_tasks(&mut self, g: Gid, data: &[u8]) -> io::Result<()> {
        self.status_clear();
        // The handler sees a C string.
        let data = strsep(data, 0).0;
        let mut buf = Some(data);
        while let Some(b) = buf.filter(|b| !b.is_empty() && b[0] != b'\n') {
            let (tok, rest) = strsep(b, b',');
            buf = rest;
            let tok = strim(tok);
            let Ok(pid) = kstrtoint(tok, 0) else {
                let mut m = b"Task list parsing error pid ".to_vec();
                m.extend_from_slice(tok);
                m.push(b'\n');
                return self.fail(EINVAL, m);
            };
            let Ok(id) = u32::try_from(pid) else {
                return self.fail(EINVAL, format!("Invalid pid {pid}\n"));
            };
            if let Err(e) = self.move_task(id, g) {
                self.status(format!("Error while processing task {pid}\n"));
                return Err(e);
            }
        }
        Ok(())
    }

    /// `rdtgroup_move_task`: `0` is the writing thread (`current`), when the write says
    /// who writes ([`Tree::write_by`](crate::vfs::Tree::write_by)); else "No task 0".
    fn move_task(&mut self, id: u32, g: Gid) -> io::Result<()> {
        let id = match (id, self.writer) {
            (0, Some(writer)) => writer,
            _ => id,
        };
        if !self.task_exists(id) {
            return self.fail(ESRCH, format!("No task {id}\n"));
        }
        let cur = self.tasks.get(&id).copied().unwrap_or_default();
        let grp = self.grp(g);
        let target = TaskIds {
            closid: grp.closid,
            rmid: grp.rmid,
        };
        if cur == target {
            return Ok(());
        }
        if let GroupKind::Mon { parent } = grp.kind
            && cur.closid != self.grp(parent).closid
        {
            return self.fail(EINVAL, "Can't move task to different control group\n");
        }
        self.tasks.insert(id, target);
        Ok(())
    }

    // ----- cpus -----

    /// `rdtgroup_cpus_write` for `cpus` (hex mask) or `cpus_list` (`list`).
    pub(super) fn write_cpus(
        &mut self,
        p: &mut SimPlatform,
        g: Gid,
        data: &[u8],
        list: bool,
    ) -> io::Result<()> {
        self.status_clear();
        let data = strsep(data, 0).0;
        let parsed = if list {
            bitmap_parselist(data, self.hw.nr_cpu_ids)
        } else {
            bitmap_parse(data, self.hw.nr_cpu_ids)
        };
        let new = match parsed {
            Ok(set) => set,
            Err(code) => return self.fail(code, "Bad CPU list/mask\n"),
        };
        if !minus(&new, &self.hw.online).is_empty() {
            return self.fail(EINVAL, "Can only assign online CPUs\n");
        }
        self.with_pqr_sync(p, |fs, _| match fs.grp(g).kind {
            GroupKind::Ctrl { .. } => fs.cpus_ctrl_write(g, &new),
            GroupKind::Mon { parent } => fs.cpus_mon_write(g, parent, &new),
        })
    }

    /// `cpus_ctrl_write`: dropped CPUs go to the root (never from the root), added ones leave
    /// their group and its MON groups; afterwards this group's MON groups have no CPUs.
    fn cpus_ctrl_write(&mut self, g: Gid, new: &CpuSet) -> io::Result<()> {
        let old = self.grp(g).cpus.clone();
        let dropped = minus(&old, new);
        if !dropped.is_empty() {
            if g == ROOT {
                return self.fail(EINVAL, "Can't drop CPUs from default group\n");
            }
            self.grp_mut(ROOT).cpus.union_with(&dropped);
        }
        let added = minus(new, &old);
        if !added.is_empty() {
            for r in self.ctrl_groups() {
                if r == g || !self.grp(r).cpus.intersects(&added) {
                    continue;
                }
                // cpumask_rdtgrp_clear
                let left = minus(&self.grp(r).cpus, &added);
                for &c in &self.children(r).to_vec() {
                    let kept = and(&self.grp(c).cpus, &left);
                    self.grp_mut(c).cpus = kept;
                }
                self.grp_mut(r).cpus = left;
            }
        }
        self.grp_mut(g).cpus = new.clone();
        for c in self.children(g).to_vec() {
            self.grp_mut(c).cpus = CpuSet::new();
        }
        Ok(())
    }

    /// `cpus_mon_write`: only the parent's CPUs; dropped ones return to the parent, added ones
    /// leave sibling MON groups.
    fn cpus_mon_write(&mut self, g: Gid, parent: Gid, new: &CpuSet) -> io::Result<()> {
        if !minus(new, &self.grp(parent).cpus).is_empty() {
            return self.fail(
                EINVAL,
                "Can only add CPUs to mongroup that belong to parent\n",
            );
        }
        let added = minus(new, &self.grp(g).cpus);
        if !added.is_empty() {
            for c in self.children(parent).to_vec() {
                if c != g {
                    let left = minus(&self.grp(c).cpus, &added);
                    self.grp_mut(c).cpus = left;
                }
            }
        }
        self.grp_mut(g).cpus = new.clone();
        Ok(())
    }
}

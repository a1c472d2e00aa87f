//! Named classes ([`BackendExt::class_named`](rdt_core::BackendExt::class_named)): the control
//! groups this backend made for them, recorded in the run directory (`os-classes`, the
//! same [`NameRecord`] the MSR interface keeps its names in), so that the next process
//! knows them as this library's: `pqos -s` shows them, a reset removes them, and another
//! tool's group of the same name is never taken for one.
//!
//! A group is recorded just before its `mkdir` and dropped from the record right after
//! its `rmdir`; the record is changed under the root's exclusive lock, as the groups are.
//! At open, each recorded group that exists is bound to a class: the number recorded when
//! no `COS<n>` group has it, else the lowest free one. A recorded group that is gone (a
//! remount, another tool's `rmdir`) is not bound, and leaves the record at its next change.

use std::collections::BTreeSet;

use rdt_core::{ClassId, Interface, PmuSource, RequestError};
use rdt_host::runfile::NameRecord;

use super::ResctrlBackend;
use crate::ResctrlError;
use crate::fs::{cos_of_name, join};

/// The record of named classes' groups in the run directory.
pub const NAMES_FILE: &str = "os-classes";

/// The named groups recorded in `run_dir` as this library's (the file [`NAMES_FILE`]): the
/// names only (a damaged record reads as empty, logged). For readers that do not open the
/// backend (the telemetry).
#[must_use]
pub fn recorded_groups(run_dir: &std::path::Path) -> Vec<String> {
    NameRecord::new(run_dir, NAMES_FILE)
        .read_or_empty()
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

impl<P: PmuSource> ResctrlBackend<P> {
    /// The record, with a run directory.
    fn name_record(&self) -> Option<NameRecord> {
        self.run_dir
            .as_ref()
            .map(|dir| NameRecord::new(dir.path(), NAMES_FILE))
    }

    /// Changes the record (nothing without a run directory). Holds: the exclusive lock.
    fn update_record(
        &self,
        f: impl FnOnce(&mut Vec<(ClassId, String)>),
    ) -> Result<(), ResctrlError> {
        let Some(record) = self.name_record() else {
            return Ok(());
        };
        record
            .update(f)
            .map_err(|e| ResctrlError::io("write the record of named classes", record.path(), e))
    }

    /// Records control group `group` (a named class's, standing for `class`) as made by
    /// this library, before it is made. `COS<n>` groups are not recorded. Holds: the
    /// exclusive lock.
    pub(super) fn record_group(&self, group: &str, class: ClassId) -> Result<(), ResctrlError> {
        if group.is_empty() || cos_of_name(group).is_some() {
            return Ok(());
        }
        self.update_record(|v| {
            v.retain(|(_, n)| n != group);
            v.push((class, group.to_owned()));
        })
    }

    /// Drops control group `group` from the record after its `rmdir`, with the recorded
    /// groups that do not exist any more; best effort (logged). Holds: the exclusive lock.
    pub(super) fn unrecord_group(&self, group: &str) {
        if group.is_empty() || cos_of_name(group).is_some() {
            return;
        }
        let r = self.update_record(|v| v.retain(|(_, n)| n != group && self.fs.exists(n)));
        if let Err(e) = r {
            log::warn!("group {group} is removed, but stays in the record: {e}");
        }
    }

    /// Empties the record: a remount removed every group. Best effort (logged).
    pub(super) fn clear_record(&self) {
        if let Err(e) = self.update_record(Vec::clear) {
            log::warn!("resctrl was remounted, but the record of named classes stays: {e}");
        }
    }

    /// Whether `name` is recorded as a group this library made (without a run directory:
    /// made by this process).
    fn is_recorded(&self, name: &str) -> bool {
        match self.name_record() {
            Some(r) => r.read_or_empty().iter().any(|(_, n)| n == name),
            None => self.created.contains(name),
        }
    }

    /// At open: binds each recorded group that exists to a class. Holds: a lock.
    pub(super) fn bind_recorded(&mut self) -> Result<(), ResctrlError> {
        let Some(record) = self.name_record() else {
            return Ok(());
        };
        let recorded = record.read_or_empty();
        if recorded.is_empty() {
            return Ok(());
        }
        let groups: BTreeSet<String> = self.fs.ctrl_groups()?.into_iter().collect();
        let n = self.caps.classes(Interface::Os);
        for (class, name) in recorded {
            if Self::check_group_name(&name).is_err() || !groups.contains(&name) {
                continue;
            }
            let free = |c: ClassId| {
                c.get() != 0
                    && c.get() < n
                    && !self.names.contains_key(&c)
                    && !groups.contains(&format!("COS{c}"))
            };
            let class = if free(class) {
                class
            } else if let Some(c) = (1..n).map(ClassId::new).find(|c| free(*c)) {
                c
            } else {
                log::warn!("named class {name}: no class number is left for it");
                continue;
            };
            self.names.insert(class, name);
        }
        Ok(())
    }

    /// [`BackendExt::own_class_names`](rdt_core::BackendExt::own_class_names) on resctrl: the
    /// bound names whose groups exist and are recorded.
    pub(super) fn own_names(&self) -> Vec<(ClassId, String)> {
        if self.names.is_empty() {
            return Vec::new();
        }
        let recorded: Vec<String> = match self.name_record() {
            Some(r) => r.read_or_empty().into_iter().map(|(_, n)| n).collect(),
            None => self.created.iter().cloned().collect(),
        };
        self.names
            .iter()
            .filter(|(_, n)| recorded.contains(n) && self.fs.exists(n))
            .map(|(c, n)| (*c, n.clone()))
            .collect()
    }

    /// [`BackendExt::claim_class`](rdt_core::BackendExt::claim_class) on resctrl.
    pub(super) fn claim(
        &mut self,
        class: ClassId,
        name: &str,
        make_group: bool,
    ) -> Result<(), ResctrlError> {
        Self::check_group_name(name)?;
        self.check_closid(class)?;
        self.names.retain(|c, n| n != name && *c != class);
        self.names.insert(class, name.to_owned());
        if !make_group {
            return Ok(());
        }
        let _g = self.lock.exclusive()?;
        if self.fs.exists(name) {
            return Ok(());
        }
        let mut undo = super::alloc::Undo::default();
        self.ensure_group(class, &mut undo)?;
        self.created.extend(undo.created);
        Ok(())
    }

    /// [`BackendExt::adopt_class`](rdt_core::BackendExt::adopt_class) on resctrl: the
    /// existing control group `name` (another tool's) bound to `class` and recorded as
    /// this library's, nothing written to it.
    pub(super) fn adopt(&mut self, class: ClassId, name: &str) -> Result<(), ResctrlError> {
        Self::check_group_name(name)?;
        self.check_closid(class)?;
        let _g = self.lock.exclusive()?;
        if !self.fs.exists(name) {
            return Err(RequestError::Unsupported(format!(
                "adopting `{name}`: there is no such control group"
            ))
            .into());
        }
        self.record_group(name, class)?;
        self.created.insert(name.to_owned());
        self.adopted.insert(name.to_owned());
        self.names.retain(|c, n| n != name && *c != class);
        self.names.insert(class, name.to_owned());
        Ok(())
    }

    /// [`BackendExt::disown_class`](rdt_core::BackendExt::disown_class) on resctrl: the
    /// undo of [`Self::adopt`]; the group stays.
    pub(super) fn disown(&mut self, class: ClassId, name: &str) -> Result<(), ResctrlError> {
        let _ = class;
        Self::check_group_name(name)?;
        {
            let _g = self.lock.exclusive()?;
            self.update_record(|v| v.retain(|(_, n)| n != name))?;
        }
        self.created.remove(name);
        self.adopted.remove(name);
        self.names.retain(|_, n| n != name);
        Ok(())
    }

    /// [`BackendExt::release_class`](rdt_core::BackendExt::release_class) on resctrl: a
    /// recorded group is removed when it holds nothing but (default) values; another
    /// tool's is left alone. The name is unbound either way. A group adopted in this
    /// process ([`Self::adopt`]: another tool's, on the operator's word) goes with the
    /// monitor groups that tool left in it when they are empty (no task, no CPU: goresctrl's
    /// pods' groups, of pods that are gone); one that is not empty refuses the release,
    /// naming it. They are not made again if the release is undone (they were empty).
    pub(super) fn release(&mut self, class: ClassId, name: &str) -> Result<(), ResctrlError> {
        let _ = class;
        Self::check_group_name(name)?;
        {
            let _g = self.lock.exclusive()?;
            if self.fs.exists(name) && self.is_recorded(name) {
                let mut monitors = self.fs.subdirs(&join(name, "mon_groups"))?;
                if self.adopted.contains(name) {
                    let mut busy = Vec::new();
                    for m in &monitors {
                        let path = join(&join(name, "mon_groups"), m);
                        if self.fs.tasks(&path)?.is_empty() && self.fs.cpus(&path)?.is_empty() {
                            continue;
                        }
                        busy.push(m.clone());
                    }
                    if busy.is_empty() {
                        for m in &monitors {
                            self.fs.rmdir(&join(&join(name, "mon_groups"), m))?;
                        }
                    }
                    monitors = busy;
                }
                if !monitors.is_empty() {
                    return Err(RequestError::ClassInUse {
                        name: name.to_owned(),
                        groups: monitors
                            .iter()
                            .map(|m| format!("{name}/mon_groups/{m}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                    }
                    .into());
                }
                let cpus = self.fs.cpus(name)?;
                let tasks = self.fs.tasks(name)?;
                if !cpus.is_empty() || !tasks.is_empty() {
                    return Err(RequestError::Unsupported(format!(
                        "the resctrl group of named class `{name}` still holds CPUs `{cpus}` \
                         and {} task(s): move them out first",
                        tasks.len()
                    ))
                    .into());
                }
                self.fs.rmdir(name)?;
                self.unrecord_group(name);
            }
        }
        self.created.remove(name);
        self.names.retain(|_, n| n != name);
        Ok(())
    }
}

//! Named classes: the record `<run dir>/msr-classes` ([`NameRecord`]) and the names bound
//! in this process.

use rdt_core::{ClassId, Interface, LimitError, PmuSource};
use rdt_host::runfile::NameRecord;

use crate::{MsrError, MsrIo};

use super::MsrBackend;

/// The record of named classes in the run directory ([`BackendExt::class_named`](rdt_core::BackendExt::class_named)).
pub(super) const NAMES_FILE: &str = "msr-classes";

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// The record of named classes, with a run directory.
    fn name_record(&self) -> Option<NameRecord> {
        self.run
            .as_ref()
            .map(|(_, dir)| NameRecord::new(dir.path(), NAMES_FILE))
    }

    /// Changes the record of named classes under the writers' lock (nothing without a run
    /// directory).
    ///
    /// # Errors
    /// [`MsrError::Names`] when it cannot be written; the lock's errors.
    pub(super) fn update_names(
        &mut self,
        f: impl FnOnce(&mut Vec<(ClassId, String)>),
    ) -> Result<(), MsrError> {
        let Some(record) = self.name_record() else {
            return Ok(());
        };
        self.hold_writers()?;
        let r = record.update(f).map_err(|source| MsrError::Names {
            path: record.path(),
            source,
        });
        self.release_writers();
        r
    }

    /// The COS `name` stands for (recorded in `<run dir>/msr-classes`, or bound in this
    /// process), else the lowest free one ([`rdt_core::transaction::free_classes`], not
    /// another name's), bound in this process: a plan that claims the name
    /// ([`BackendExt::claim_class`](rdt_core::BackendExt::claim_class)) records it when applied. The record lives as long as the
    /// run directory (`/run` is emptied at boot, as the registers are).
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) when no class is free;
    /// register reads.
    pub fn class_named(&mut self, name: &str) -> Result<ClassId, MsrError> {
        if let Some((c, _)) = self.names.iter().find(|(_, n)| *n == name) {
            return Ok(*c);
        }
        let taken: Vec<ClassId> = self.names.keys().copied().collect();
        let n = self.caps.classes(Interface::Msr);
        let class = rdt_core::transaction::free_classes(self, &taken)?
            .first()
            .copied()
            .ok_or(LimitError::ClassOutOfRange {
                resource: "free class of service",
                class: ClassId::new(n),
                num_classes: n,
            })?;
        self.bind_class(class, name)?;
        Ok(class)
    }

    /// Makes `class` stand for `name` in this process (another name of that class, and
    /// another class of that name, go).
    ///
    /// # Errors
    /// A class beyond the class count.
    pub fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), MsrError> {
        self.caps.check_class(Interface::Msr, class)?;
        self.names.retain(|_, n| n != name);
        self.names.insert(class, name.to_owned());
        Ok(())
    }

    /// The named classes known to this process and recorded in `msr-classes`, by class.
    pub fn class_names(&self) -> Vec<(ClassId, String)> {
        self.names.iter().map(|(c, n)| (*c, n.clone())).collect()
    }

    /// The names recorded in `<run dir>/msr-classes` (as read at open and changed by this
    /// process since).
    pub fn own_class_names(&self) -> Vec<(ClassId, String)> {
        self.names
            .iter()
            .filter(|(_, n)| self.own.contains(*n))
            .map(|(c, n)| (*c, n.clone()))
            .collect()
    }

    /// Binds `name` to `class` and records it in `<run dir>/msr-classes` (MSR has no
    /// groups: `make_group` changes nothing).
    ///
    /// # Errors
    /// A class beyond the class count; [`MsrError::Names`] when the record cannot be
    /// written; the writers' lock.
    pub fn claim_class(
        &mut self,
        class: ClassId,
        name: &str,
        make_group: bool,
    ) -> Result<(), MsrError> {
        let _ = make_group;
        self.bind_class(class, name)?;
        self.update_names(|v| {
            v.retain(|(c, n)| *c != class && n != name);
            v.push((class, name.to_owned()));
        })?;
        self.own.insert(name.to_owned());
        Ok(())
    }

    /// Drops `name` from `<run dir>/msr-classes`, with any other line of its class (a
    /// second name of one class is a damaged record: it would hold the class once this one
    /// is gone), and unbinds it; the class's registers are left as they are (a plan sets
    /// them back first).
    ///
    /// # Errors
    /// [`MsrError::Names`] when the record cannot be written; the writers' lock.
    pub fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), MsrError> {
        self.update_names(|v| v.retain(|(c, n)| n != name && *c != class))?;
        self.own.remove(name);
        self.names.retain(|_, n| n != name);
        Ok(())
    }
}

#[cfg(test)]
mod tests;

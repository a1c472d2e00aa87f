//! The intent journal: what a transaction is about to write and the values it replaces,
//! recorded before its first write so that the next process can undo it if this one is
//! killed half-way.
//!
//! A journal is a [`RunFile`] `<run dir>/txn-<iface>-<pid>` (`txn-msr-`, `txn-os-`): JSON,
//! written whole and synced before the first write ([`Journal::begin`]), kept locked while
//! the transaction runs, and removed when every write was made or every write undone
//! ([`Journal::end`]). A journal whose lock is free belongs to a process that ended before
//! it finished; [`recover`] (every open of the library runs it) undoes its steps, newest
//! first, each by writing back the value it replaced, which is the same whether or not the
//! step had been written. The file goes once every undo succeeded; otherwise it stays for
//! the next open to try again.
//!
//! Cost: one file created, written and `fdatasync`ed, and one unlinked, per transaction that
//! writes anything.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::runfile::{RunFile, dead_run_files};
use rdt_core::BackendExt;
use rdt_core::transaction::Step;
use rdt_core::{Backend, BackendError, ClassId, Interface, Reclaimed, RequestError};

/// The format version written; a journal with another is left alone (and logged).
const VERSION: u32 = 1;
/// The most of a journal read. A reset of a large host (every class of every domain, every
/// CPU, tasks) stays well below.
const MAX_JOURNAL_BYTES: u64 = 64 << 20;

/// The journal file name prefix of an interface.
const fn prefix(interface: Interface) -> &'static str {
    match interface {
        Interface::Msr => "txn-msr-",
        Interface::Os => "txn-os-",
        Interface::Mmio => "txn-mmio-",
    }
}

/// What a journal holds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u32,
    interface: Interface,
    /// OS interface: classes whose groups did not exist before the transaction.
    new_groups: Vec<ClassId>,
    /// Named classes of the steps ([`BackendExt::class_named`]).
    #[serde(default)]
    names: Vec<(ClassId, String)>,
    /// The steps, in write order.
    steps: Vec<Step>,
}

/// A transaction's journal while it runs.
#[derive(Debug)]
pub(super) struct Journal(RunFile);

impl Journal {
    /// Records `steps` in `<dir>/txn-<iface>-<pid>`, synced.
    pub(super) fn begin(
        dir: &Path,
        interface: Interface,
        new_groups: &[ClassId],
        names: &[(ClassId, String)],
        steps: &[Step],
    ) -> io::Result<Self> {
        let record = Record {
            version: VERSION,
            interface,
            new_groups: new_groups.to_vec(),
            names: names.to_vec(),
            steps: steps.to_vec(),
        };
        let text = serde_json::to_vec(&record).map_err(io::Error::other)?;
        RunFile::create(dir, prefix(interface), &text).map(Self)
    }

    /// The transaction is over (applied, or undone completely): the journal goes.
    pub(super) fn end(self) -> io::Result<()> {
        self.0.remove()
    }
}

/// The error of a journal that cannot be written, as a [`RequestError`].
pub(super) fn journal_error(dir: &Path, e: &io::Error) -> RequestError {
    RequestError::RunState {
        path: dir.to_owned(),
        message: format!("cannot record the transaction's journal: {e}"),
    }
}

/// Rolls back every transaction of `backend`'s interface whose process ended before it
/// finished (a journal in [`BackendExt::run_dir`] whose lock is free), under the writers'
/// lock: the groups it created are treated as made here ([`BackendExt::own_classes`]), and
/// its steps are undone newest first (a task that exited since is skipped). A journal is
/// removed once all of it is undone; one that cannot be read, or whose undo fails, stays
/// (logged) for the next open. Nothing to do without a run directory.
///
/// Returns one [`Reclaimed::Transaction`] per journal rolled back, for the caller to log
/// (opening the platform logs each as a `WARN` record).
///
/// # Errors
/// The writers' lock cannot be taken, or the run directory cannot be listed.
pub fn recover<B: Backend>(backend: &mut B) -> Result<Vec<Reclaimed>, B::Error> {
    let Some(dir) = backend.run_dir().map(Path::to_owned) else {
        return Ok(Vec::new());
    };
    let interface = backend.interface();
    rdt_core::transaction::with_writers(backend, |backend| {
        // The MMIO interface programs what the MSR interface does (cores, CAT) and more: it
        // rolls back both interfaces' journals.
        let prefixes: &[&str] = if interface == Interface::Mmio {
            &["txn-mmio-", "txn-msr-"]
        } else {
            &[prefix(interface)]
        };
        let mut dead = Vec::new();
        for p in prefixes {
            dead.extend(dead_run_files(&dir, p, MAX_JOURNAL_BYTES).map_err(|e| {
                B::Error::from(RequestError::RunState {
                    path: dir.clone(),
                    message: format!("cannot list the journals of ended transactions: {e}"),
                })
            })?);
        }
        let mut out = Vec::new();
        for file in dead {
            let record: Record = match serde_json::from_str(&file.text) {
                Ok(r) => r,
                Err(e) => {
                    log::warn!(
                        "left {} alone: not a transaction journal of this version ({e})",
                        file.path.display()
                    );
                    continue;
                }
            };
            let ours = record.interface == interface
                || (interface == Interface::Mmio && record.interface == Interface::Msr);
            if record.version != VERSION || !ours {
                log::warn!(
                    "left {} alone: journal version {} of the {:?} interface",
                    file.path.display(),
                    record.version,
                    record.interface
                );
                continue;
            }
            for (class, name) in &record.names {
                if let Err(e) = backend.bind_class(*class, name) {
                    log::warn!("class {class} of {}: {e}", file.path.display());
                }
            }
            backend.own_classes(&record.new_groups);
            let newest_first: Vec<&Step> = record.steps.iter().rev().collect();
            let errors = rdt_core::transaction::undo_steps(backend, &newest_first);
            let mut undone = Vec::new();
            let mut failed = Vec::new();
            let mut errors = errors.into_iter().peekable();
            for (i, step) in newest_first.iter().enumerate() {
                match errors.next_if(|(j, _)| *j == i) {
                    None => undone.push(step.undo_description()),
                    Some((_, e)) if matches!(e.request(), Some(RequestError::NoSuchTask(_))) => {}
                    Some((_, e)) => failed.push(format!(
                        "{}: {}",
                        step.undo_description(),
                        rdt_core::error_chain(&e)
                    )),
                }
            }
            let pid = file.pid;
            if failed.is_empty() {
                if let Err(e) = file.remove() {
                    log::warn!("rolled back, but could not remove its journal: {e}");
                }
            } else {
                log::warn!(
                    "could not roll back all of the transaction of process {pid} (its \
                     journal stays, the next open tries again): {}",
                    failed.join("; ")
                );
            }
            let r = Reclaimed::Transaction {
                pid,
                undone,
                failed,
            };
            out.push(r);
        }
        Ok(out)
    })?
}

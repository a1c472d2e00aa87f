//! The kernel's resctrl locking convention (resctrl.rst "Locking between applications"):
//! `flock(2)` on the root directory, `LOCK_EX` for changes, `LOCK_SH` for reads. The kernel
//! does not enforce it; every cooperating tool (pqos, goresctrl, this crate) takes it.
//!
//! The wait is bounded: [`RootLock`] tries the lock, sleeping between attempts, until a
//! deadline, then reports [`ResctrlError::Locked`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rdt_host::runfile::{LockWaitError, wait_for_lock};

use crate::ResctrlError;
use crate::fs::Fs;
use crate::io::FsLock;

pub use rdt_host::runfile::DEFAULT_LOCK_TIMEOUT;

/// The open root directory whose `flock` serializes resctrl users.
#[derive(Debug)]
pub(crate) struct RootLock {
    /// `None` between [`RootLock::close`] and [`RootLock::reopen`] (a remount).
    dir: Option<Arc<dyn FsLock>>,
    root: PathBuf,
    timeout: Duration,
    /// [`RootLock::hold`]s not yet released: while above 0 this process has `LOCK_EX` and
    /// the guards of single calls take nothing.
    held: u32,
}

/// A held lock; released on drop (nothing to release inside a [`RootLock::hold`]).
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub(crate) struct LockGuard(Option<Arc<dyn FsLock>>);

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            let _ = f.unlock();
        }
    }
}

impl RootLock {
    /// Opens the root (read-only, as a directory) for locking.
    pub(crate) fn open(fs: &Fs, timeout: Duration) -> Result<Self, ResctrlError> {
        let root = fs.root();
        let dir = fs
            .open_lock("")
            .map_err(|e| ResctrlError::io("open", root, e))?;
        Ok(Self {
            dir: Some(Arc::from(dir)),
            root: root.to_owned(),
            timeout,
            held: 0,
        })
    }

    /// Closes the directory (a remount needs nothing open under the mount).
    pub(crate) fn close(&mut self) {
        self.dir = None;
    }

    /// Opens the (remounted) root again, and takes `LOCK_EX` again inside a
    /// [`RootLock::hold`].
    pub(crate) fn reopen(&mut self, fs: &Fs) -> Result<(), ResctrlError> {
        let dir = fs
            .open_lock("")
            .map_err(|e| ResctrlError::io("open", fs.root(), e))?;
        self.dir = Some(Arc::from(dir));
        if self.held > 0 {
            self.take(true)?;
        }
        Ok(())
    }

    /// Takes `LOCK_EX` and keeps it until as many [`RootLock::release`]s.
    pub(crate) fn hold(&mut self) -> Result<(), ResctrlError> {
        if self.held == 0 {
            self.take(true)?;
        }
        self.held += 1;
        Ok(())
    }

    /// Gives back one [`RootLock::hold`]; `LOCK_EX` goes with the last.
    pub(crate) fn release(&mut self) {
        if self.held == 1
            && let Some(dir) = &self.dir
        {
            let _ = dir.unlock();
        }
        self.held = self.held.saturating_sub(1);
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// `LOCK_EX`, for every change and the `last_cmd_status` read after it.
    pub(crate) fn exclusive(&self) -> Result<LockGuard, ResctrlError> {
        self.acquire(true)
    }

    /// `LOCK_SH`, for reads and polls.
    pub(crate) fn shared(&self) -> Result<LockGuard, ResctrlError> {
        self.acquire(false)
    }

    fn acquire(&self, exclusive: bool) -> Result<LockGuard, ResctrlError> {
        if self.held > 0 && self.dir.is_some() {
            return Ok(LockGuard(None));
        }
        self.take(exclusive).map(|dir| LockGuard(Some(dir)))
    }

    /// Takes the lock (no guard: the caller releases it).
    fn take(&self, exclusive: bool) -> Result<Arc<dyn FsLock>, ResctrlError> {
        let Some(dir) = &self.dir else {
            return Err(ResctrlError::NotMounted {
                root: self.root.clone(),
            });
        };
        wait_for_lock(|| dir.try_lock(exclusive), self.timeout)
            .map(|()| Arc::clone(dir))
            .map_err(|e| match e {
                LockWaitError::Timeout { waited } => ResctrlError::Locked {
                    root: self.root.clone(),
                    waited,
                },
                LockWaitError::Io(e) => ResctrlError::io("flock", &self.root, e),
            })
    }
}

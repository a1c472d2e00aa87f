//! The kernel's resctrl locking convention (resctrl.rst "Locking between applications"):
//! `flock(2)` on the root directory, `LOCK_EX` for changes, `LOCK_SH` for reads. The kernel
//! does not enforce it; every cooperating tool (pqos, goresctrl, this crate) takes it.
//!
//! The wait is bounded: [`RootLock`] tries the lock, sleeping between attempts, until a
//! deadline, then reports [`ResctrlError::Locked`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rdt_core::runfile::{LockWaitError, lock_with_timeout};

use crate::ResctrlError;

/// How long a call waits for another tool's lock by default.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// The open root directory whose `flock` serializes resctrl users.
#[derive(Debug)]
pub(crate) struct RootLock {
    /// `None` between [`RootLock::close`] and [`RootLock::reopen`] (a remount).
    dir: Option<Arc<File>>,
    root: PathBuf,
    timeout: Duration,
}

/// A held lock; released on drop.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub(crate) struct LockGuard(Arc<File>);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl RootLock {
    /// Opens `root` (read-only, as a directory) for locking.
    pub(crate) fn open(root: &Path, timeout: Duration) -> Result<Self, ResctrlError> {
        let dir = File::open(root).map_err(|e| ResctrlError::io("open", root, e))?;
        Ok(Self {
            dir: Some(Arc::new(dir)),
            root: root.to_owned(),
            timeout,
        })
    }

    /// Closes the directory (a remount needs nothing open under the mount).
    pub(crate) fn close(&mut self) {
        self.dir = None;
    }

    /// Opens the (remounted) root again.
    pub(crate) fn reopen(&mut self, root: &Path) -> Result<(), ResctrlError> {
        let dir = File::open(root).map_err(|e| ResctrlError::io("open", root, e))?;
        self.dir = Some(Arc::new(dir));
        Ok(())
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
        let Some(dir) = &self.dir else {
            return Err(ResctrlError::NotMounted {
                root: self.root.clone(),
            });
        };
        lock_with_timeout(dir, exclusive, self.timeout)
            .map(|()| LockGuard(Arc::clone(dir)))
            .map_err(|e| match e {
                LockWaitError::Timeout { waited } => ResctrlError::Locked {
                    root: self.root.clone(),
                    waited,
                },
                LockWaitError::Io(e) => ResctrlError::io("flock", &self.root, e),
            })
    }
}

//! The OS interface of an in-process simulated platform: the model's kernel-faithful resctrl
//! ([`crate::resctrl::Resctrl`], the same one the FUSE mount serves at `sys/fs/resctrl`)
//! behind the resctrl backend's filesystem seam ([`rdt_resctrl::ResctrlFs`]) and mount seam
//! ([`rdt_resctrl::MountControl`]), so `rdt_resctrl::ResctrlBackend` runs unchanged on it
//! with no FUSE, no mount and no root.
//!
//! [`InProcessResctrl`] is resctrl's place on one platform: unmounted, or mounted with some
//! options. [`InProcessResctrl::files`] gives the [`ResctrlFs`] (each call is the `Tree`
//! operation the FUSE layer would make for that system call: one `write(2)` is one
//! [`crate::vfs::Tree::write`]), [`InProcessResctrl::mount_control`] the [`MountControl`]
//! (`remount` unmounts and mounts, with the kernel's effects).
//!
//! # Persistence
//! With a [`crate::session::Session`] the mount outlives the process, as the kernel's does:
//! the session saves resctrl's state (groups, CLOSIDs, RMIDs, tasks' ids, MBM counter state,
//! `last_cmd_status`; [`crate::resctrl::ResctrlState`]) in the simulator's state file next to
//! the registers ([`crate::session::Saved`]), and the next session mounts it again from there
//! ([`InProcessResctrl::with_state`]) without touching a register
//! ([`crate::resctrl::Resctrl::restore`]). Delete the state file to start from an
//! unmounted, freshly booted platform.
//!
//! # Locks
//! `flock(2)` is modelled in memory ([`ResctrlFs::open_lock`]): each handle is one open file
//! description, handles of this process conflict as the kernel's would. Other processes
//! cannot reach an in-process platform while this one has it (the session's lock on the
//! state file keeps them out), so there is nobody else to exclude; a group whose creator
//! ended is found free, as the kernel's `flock` is once its holder exits.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rdt_core::MountOptions;
use rdt_resctrl::{FsLock, MountControl, PositionedRead, ResctrlFs};

use crate::SimHandle;
use crate::fs::remount::ResctrlSlot;
use crate::vfs::errno::ENOTDIR;
use crate::vfs::{NodeKind, err};

/// Bytes asked for per [`crate::vfs::Tree::read`] call while reading a whole file.
const READ_CHUNK: u32 = 64 * 1024;
/// The most a whole-file read returns (a `tasks` file of a million ids fits).
const MAX_FILE: usize = 16 << 20;

/// resctrl's place on an in-process platform (module docs).
#[derive(Debug)]
pub struct InProcessResctrl {
    slot: ResctrlSlot,
    locks: Arc<LockTable>,
}

impl InProcessResctrl {
    /// resctrl on `platform`, unmounted: [`InProcessResctrl::with_state`] without a state.
    ///
    /// # Errors
    /// As [`InProcessResctrl::with_state`].
    pub fn new(platform: SimHandle) -> io::Result<Self> {
        Self::with_state(platform, None)
    }

    /// resctrl on `platform`, mounted again from `state` (a state file's, taken by
    /// [`InProcessResctrl::state`] in an earlier process), else unmounted.
    ///
    /// # Errors
    /// `InvalidData` when the state does not fit the platform; `EBUSY` when resctrl is
    /// already mounted on it (by a FUSE mount of the same platform).
    pub fn with_state(
        platform: SimHandle,
        state: Option<&crate::resctrl::ResctrlState>,
    ) -> io::Result<Self> {
        let slot = ResctrlSlot::new(platform, None)?;
        if let Some(state) = state {
            slot.restore(state)?;
        }
        Ok(Self {
            slot,
            locks: Arc::default(),
        })
    }

    /// The options resctrl is mounted with, `None` when it is not mounted.
    #[must_use]
    pub fn options(&self) -> Option<MountOptions> {
        self.slot.options()
    }

    /// Mounts resctrl with `options` (unmounting first if mounted), with the kernel's
    /// effects ([`crate::resctrl::Resctrl::mount`]).
    ///
    /// # Errors
    /// `InvalidInput` for an option the platform cannot honour (nothing changed then).
    pub fn remount(&self, options: &MountOptions) -> io::Result<()> {
        self.slot.remount(*options)
    }

    /// The files, for `rdt_resctrl::ResctrlOptions::files`.
    #[must_use]
    pub fn files(&self) -> Arc<dyn ResctrlFs> {
        Arc::new(InProcessFs {
            slot: self.slot.clone(),
            locks: Arc::clone(&self.locks),
        })
    }

    /// The mount seam, for `rdt_resctrl::ResctrlOptions::mount_control`.
    #[must_use]
    pub fn mount_control(&self) -> InProcessMount {
        InProcessMount {
            slot: self.slot.clone(),
        }
    }

    /// The mounted resctrl's state, to be saved with the platform's; `None` when unmounted.
    #[must_use]
    pub fn state(&self) -> Option<crate::resctrl::ResctrlState> {
        self.slot.state()
    }
}

impl Drop for InProcessResctrl {
    /// Parks the mount: it goes away with this process without the unmount's register
    /// resets (its state is what a session saved).
    fn drop(&mut self) {
        let _ = self.slot.park();
    }
}

/// The [`MountControl`] of an [`InProcessResctrl`].
#[derive(Debug)]
pub struct InProcessMount {
    slot: ResctrlSlot,
}

impl MountControl for InProcessMount {
    fn options(&self) -> io::Result<Option<MountOptions>> {
        Ok(self.slot.options())
    }

    fn remount(&self, new: &MountOptions) -> io::Result<()> {
        self.slot.remount(*new)
    }
}

/// The [`ResctrlFs`] of an [`InProcessResctrl`].
struct InProcessFs {
    slot: ResctrlSlot,
    locks: Arc<LockTable>,
}

impl fmt::Debug for InProcessFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessFs")
            .field("resctrl", &self.slot)
            .finish_non_exhaustive()
    }
}

/// `rel` as the tree names it: no leading or trailing `/`.
fn tree_path(rel: &str) -> &str {
    rel.trim_matches('/')
}

impl InProcessFs {
    fn kind(&self, rel: &str) -> io::Result<NodeKind> {
        self.slot.with_tree(|t| t.kind(tree_path(rel)))
    }
}

impl ResctrlFs for InProcessFs {
    fn read(&self, rel: &str) -> io::Result<String> {
        let path = tree_path(rel);
        let mut out = Vec::new();
        loop {
            let offset = out.len() as u64;
            let chunk = self.slot.with_tree(|t| t.read(path, offset, READ_CHUNK))?;
            if chunk.is_empty() {
                break;
            }
            out.extend_from_slice(&chunk);
            if out.len() > MAX_FILE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{rel}: longer than {MAX_FILE} bytes"),
                ));
            }
        }
        String::from_utf8(out).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// One write by the calling thread (its id from `/proc/thread-self`, so that `0`
    /// written to `tasks` moves it, as the kernel moves `current`).
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<usize> {
        let writer = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|l| l.file_name()?.to_str()?.parse().ok());
        self.slot
            .with_tree(|t| t.write_by(tree_path(rel), 0, data, writer))
    }

    fn mkdir(&self, rel: &str) -> io::Result<()> {
        self.slot.with_tree(|t| t.mkdir(tree_path(rel)))
    }

    fn rmdir(&self, rel: &str) -> io::Result<()> {
        self.slot.with_tree(|t| t.rmdir(tree_path(rel)))
    }

    fn subdirs(&self, rel: &str) -> io::Result<Vec<String>> {
        let entries = self.slot.with_tree(|t| t.list(tree_path(rel)))?;
        Ok(entries
            .into_iter()
            .filter(|(_, k)| *k == NodeKind::Dir)
            .map(|(n, _)| n)
            .collect())
    }

    fn exists(&self, rel: &str) -> bool {
        self.kind(rel).is_ok()
    }

    fn is_dir(&self, rel: &str) -> bool {
        matches!(self.kind(rel), Ok(NodeKind::Dir))
    }

    fn open_reader(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>> {
        match self.kind(rel)? {
            NodeKind::File { .. } => Ok(Box::new(Reader {
                slot: self.slot.clone(),
                path: tree_path(rel).to_owned(),
            })),
            _ => Err(err(crate::vfs::errno::EISDIR)),
        }
    }

    fn open_lock(&self, rel: &str) -> io::Result<Box<dyn FsLock>> {
        if !matches!(self.kind(rel)?, NodeKind::Dir) {
            return Err(err(ENOTDIR));
        }
        Ok(Box::new(MemLock {
            table: Arc::clone(&self.locks),
            path: tree_path(rel).to_owned(),
            held: Mutex::new(Held::None),
        }))
    }
}

/// An open file of the in-process tree: each positioned read is one tree read.
#[derive(Debug)]
struct Reader {
    slot: ResctrlSlot,
    path: String,
}

impl PositionedRead for Reader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let size = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let data = self.slot.with_tree(|t| t.read(&self.path, offset, size))?;
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        Ok(n)
    }
}

/// What one lock handle holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    None,
    Shared,
    Exclusive,
}

/// The `flock`s held on each path: (shared holders, exclusively held).
#[derive(Debug, Default)]
struct LockTable(Mutex<BTreeMap<String, (u32, bool)>>);

/// One open directory's `flock`, in memory (module docs, "Locks").
#[derive(Debug)]
struct MemLock {
    table: Arc<LockTable>,
    path: String,
    held: Mutex<Held>,
}

impl MemLock {
    fn release(entry: &mut (u32, bool), held: Held) {
        match held {
            Held::None => {}
            Held::Shared => entry.0 = entry.0.saturating_sub(1),
            Held::Exclusive => entry.1 = false,
        }
    }
}

impl FsLock for MemLock {
    fn try_lock(&self, exclusive: bool) -> io::Result<bool> {
        let want = if exclusive {
            Held::Exclusive
        } else {
            Held::Shared
        };
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if *held == want {
            return Ok(true);
        }
        let mut table = self.table.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = table.entry(self.path.clone()).or_default();
        let mut others = *entry;
        Self::release(&mut others, *held);
        let free = if exclusive {
            others.0 == 0 && !others.1
        } else {
            !others.1
        };
        if !free {
            return Ok(false);
        }
        *entry = others;
        match want {
            Held::Shared => entry.0 += 1,
            Held::Exclusive => entry.1 = true,
            Held::None => {}
        }
        *held = want;
        Ok(true)
    }

    fn unlock(&self) -> io::Result<()> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if *held == Held::None {
            return Ok(());
        }
        let mut table = self.table.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = table.get_mut(&self.path) {
            Self::release(entry, *held);
            if *entry == (0, false) {
                table.remove(&self.path);
            }
        }
        *held = Held::None;
        Ok(())
    }
}

impl Drop for MemLock {
    fn drop(&mut self) {
        let _ = self.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimPlatform;
    use crate::vfs::errno::EINVAL;

    fn resctrl() -> (SimHandle, InProcessResctrl) {
        let sim = SimHandle::new(
            SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap(),
        );
        let r = InProcessResctrl::new(sim.clone()).unwrap();
        r.remount(&MountOptions::default()).unwrap();
        (sim, r)
    }

    #[test]
    fn files_are_the_models_resctrl_one_write_per_command() {
        // arrange
        let (_sim, r) = resctrl();
        let fs = r.files();
        // act
        fs.mkdir("p0").unwrap();
        let n = fs.write("p0/schemata", b"L3:0=3\n").unwrap();
        let bad = fs.write("p0/schemata", b"L3:0=5\n").unwrap_err();
        // assert
        assert_eq!(n, 7);
        assert_eq!(bad.raw_os_error(), Some(EINVAL));
        assert_eq!(
            fs.read("info/last_cmd_status").unwrap(),
            "The mask 5 has non-consecutive 1-bits\n"
        );
        assert_eq!(
            fs.read("p0/schemata").unwrap(),
            "    MB:0=100;1=100\n    L3:0=3;1=7ff\n"
        );
        assert!(fs.is_dir("info") && fs.exists("p0/tasks") && !fs.is_dir("p0/tasks"));
        assert!(fs.subdirs("").unwrap().contains(&"p0".to_owned()));
        let c = fs.open_reader("mon_data/mon_L3_00/llc_occupancy").unwrap();
        let mut buf = [0u8; 32];
        let n = c.read_at(&mut buf, 0).unwrap();
        assert!(
            std::str::from_utf8(&buf[..n])
                .unwrap()
                .trim()
                .parse::<u64>()
                .is_ok()
        );
        assert_eq!(fs.mkdir("info/x").unwrap_err().raw_os_error(), Some(19));
        fs.rmdir("p0").unwrap();
        assert!(!fs.exists("p0"));
    }

    #[test]
    fn flocks_conflict_between_handles_and_go_with_them() {
        let (_sim, r) = resctrl();
        let fs = r.files();
        let a = fs.open_lock("").unwrap();
        let b = fs.open_lock("").unwrap();
        assert!(
            a.try_lock(false).unwrap() && b.try_lock(false).unwrap(),
            "shared twice"
        );
        assert!(!a.try_lock(true).unwrap(), "not exclusive while b shares");
        b.unlock().unwrap();
        assert!(a.try_lock(true).unwrap(), "upgraded");
        assert!(!b.try_lock(false).unwrap());
        drop(a);
        assert!(b.try_lock(true).unwrap(), "a's lock went with it");
        assert!(fs.open_lock("tasks").is_err(), "a file is not a directory");
    }

    #[test]
    fn the_mount_is_parked_with_the_platform_and_restored() {
        let (sim, r) = resctrl();
        r.files().mkdir("kept").unwrap();
        let state = r.state();
        drop(r);
        let r = InProcessResctrl::with_state(sim, state.as_ref()).unwrap();
        assert!(r.options().is_some());
        assert!(r.files().is_dir("kept"));
    }
}

//! The run directory itself, verified once and then used only through its descriptor.
//!
//! A run directory (`/run/rdt`, `/run/rdt/sysroot-<key>`, a simulated platform's
//! `<state>.run`) holds what decides which registers and groups a root process writes next:
//! journals, RMID claims, named-class records, the writers' lock. Whoever can put a file
//! there, or a symlink in its place, steers root. So [`RunDir::create`] and [`RunDir::open`]
//! accept a directory only when
//! - it is opened without following a symlink (`O_NOFOLLOW | O_DIRECTORY`) and is a
//!   directory;
//! - its owner is the effective uid and neither its group nor others may write to it (its
//!   own read and search bits for others are taken away: the mode becomes 0700);
//! - every directory above it belongs to root or the effective uid, and one that others may
//!   write to is sticky (`/tmp`), so that no one else can rename it away;
//!
//! and every file in it is then opened relative to the verified descriptor (`openat(2)`
//! with `O_NOFOLLOW`; new files `O_CREAT | O_EXCL`, written under a temporary name and
//! `renameat(2)`-ed into place), so a directory swapped after the check is never used.
//! Directories are made one level at a time (`mkdir(2)` never follows a symlink in its
//! last component), never with a recursive builder that would create whatever a planted
//! link points to.

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// Why a run directory (or a directory above it) was refused. Displays the path, what was
/// found (kind, owner, mode) and the rule it broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("run directory {}: {found}; refused: {rule}", path.display())]
pub struct UnsafeRunDir {
    /// The directory refused (the run directory or one above it).
    pub path: PathBuf,
    /// What is there: `a symbolic link`, `owned by uid 65534, mode 0777`...
    pub found: String,
    /// The rule: `it must be a directory of uid 0 that no one else can write to`...
    pub rule: String,
}

impl From<UnsafeRunDir> for io::Error {
    /// A `PermissionDenied` error whose message is the refusal's.
    fn from(e: UnsafeRunDir) -> Self {
        Self::new(io::ErrorKind::PermissionDenied, e)
    }
}

/// A verified run directory: its path (for messages) and a descriptor to it, through
/// which every file in it is reached.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    fd: OwnedFd,
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// `owned by uid U, mode 0MMM` of a `stat`.
fn owner_and_mode(uid: u32, mode: u32) -> String {
    format!("owned by uid {uid}, mode {:04o}", mode & 0o7777)
}

impl RunDir {
    /// Opens the run directory at `path`, making it (mode 0700) and any missing directory
    /// above it (0700) one level at a time, then verifies it as the module says.
    ///
    /// # Errors
    /// [`UnsafeRunDir`] (as a `PermissionDenied` [`io::Error`]) when it or a directory
    /// above it is not safe; `mkdir(2)`/`open(2)` errors otherwise.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::at(path.as_ref(), true)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// Opens the existing run directory at `path` and verifies it; `None` when it (or a
    /// directory above it) does not exist. Nothing is made.
    ///
    /// # Errors
    /// As [`RunDir::create`].
    pub fn open(path: impl AsRef<Path>) -> io::Result<Option<Self>> {
        Self::at(path.as_ref(), false)
    }

    fn at(path: &Path, create: bool) -> io::Result<Option<Self>> {
        let euid = nix::unistd::geteuid().as_raw();
        let abs = std::path::absolute(path)?;
        let mut parent = Self::open_root()?;
        let mut walked = PathBuf::from("/");
        let names: Vec<&OsStr> = abs
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        if abs.components().any(|c| c == Component::ParentDir) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("run directory {}: `..` in the path", path.display()),
            ));
        }
        let Some((last, above)) = names.split_last() else {
            return Err(UnsafeRunDir {
                path: abs,
                found: "the root directory".into(),
                rule: "a run directory is a directory of its own".into(),
            }
            .into());
        };
        for name in above {
            walked.push(name);
            // Directories above may be symlinks (`/var/run`): followed, then judged.
            let fd = match Self::open_child(&parent, name, create, false) {
                Ok(Some(fd)) => fd,
                Ok(None) => return Ok(None),
                Err(e) => return Err(Self::name_path(&e, &walked)),
            };
            let st = fstat(&fd).map_err(io_err)?;
            let writable_by_others = st.st_mode & 0o022 != 0;
            let sticky = st.st_mode & 0o1000 != 0;
            if (st.st_uid != 0 && st.st_uid != euid) || (writable_by_others && !sticky) {
                return Err(UnsafeRunDir {
                    path: walked,
                    found: owner_and_mode(st.st_uid, st.st_mode),
                    rule: format!(
                        "a directory above a run directory must belong to root or uid {euid} \
                         and be writable by no one else unless sticky"
                    ),
                }
                .into());
            }
            parent = fd;
        }
        walked.push(last);
        let fd = match Self::open_child(&parent, last, create, true) {
            Ok(Some(fd)) => fd,
            Ok(None) => return Ok(None),
            // (`O_DIRECTORY | O_NOFOLLOW` on a symlink fails with ENOTDIR or ELOOP)
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                let link = fstatat(&parent, *last, AtFlags::AT_SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFLNK.bits());
                return Err(UnsafeRunDir {
                    path: walked,
                    found: if link {
                        "a symbolic link"
                    } else {
                        "not a directory"
                    }
                    .into(),
                    rule: "a run directory must be a directory, never reached through a symlink"
                        .into(),
                }
                .into());
            }
            Err(e) => return Err(Self::name_path(&e, &walked)),
        };
        let st = fstat(&fd).map_err(io_err)?;
        if st.st_uid != euid || st.st_mode & 0o022 != 0 {
            return Err(UnsafeRunDir {
                path: walked,
                found: owner_and_mode(st.st_uid, st.st_mode),
                rule: format!(
                    "a run directory must belong to uid {euid} (the effective user) and have \
                     mode 0700"
                ),
            }
            .into());
        }
        if st.st_mode & 0o7777 != 0o700 {
            // Ours, and no one else can write to it: take away what others may read.
            fchmod(&fd, Mode::from_bits_truncate(0o700)).map_err(io_err)?;
        }
        Ok(Some(Self { path: walked, fd }))
    }

    /// Adds the path to an error that has none (`mkdir`, `open`).
    fn name_path(e: &io::Error, path: &Path) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }

    fn open_root() -> io::Result<OwnedFd> {
        nix::fcntl::open(
            "/",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io_err)
    }

    /// Opens the directory `name` in `parent`, made first (0700) when `create` and it is
    /// missing; `None` when missing and not `create`.
    fn open_child(
        parent: &OwnedFd,
        name: &OsStr,
        create: bool,
        nofollow: bool,
    ) -> io::Result<Option<OwnedFd>> {
        let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        if nofollow {
            flags |= OFlag::O_NOFOLLOW;
        }
        for _ in 0..3 {
            match openat(parent, name, flags, Mode::empty()) {
                Ok(fd) => return Ok(Some(fd)),
                Err(Errno::ENOENT) if create => {
                    match mkdirat(parent, name, Mode::from_bits_truncate(0o700)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(io_err(e)),
                    }
                }
                Err(Errno::ENOENT) => return Ok(None),
                Err(e) => return Err(io_err(e)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            "made and removed again while it was being opened",
        ))
    }

    /// Another descriptor of the same verified directory.
    ///
    /// # Errors
    /// `dup(2)` errors.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            path: self.path.clone(),
            fd: self.fd.try_clone()?,
        })
    }

    /// Whether this directory was removed since it was opened (`rmdir(2)` leaves it no
    /// link).
    #[must_use]
    pub fn is_removed(&self) -> bool {
        fstat(&self.fd).is_ok_and(|st| st.st_nlink == 0)
    }

    /// The directory's path (as given, made absolute).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `name` in this directory, never through a symlink (`ELOOP`), never blocking on
    /// a FIFO: `flags` (`libc::O_*`) with `O_NOFOLLOW | O_NOCTTY | O_CLOEXEC` added;
    /// `mode` for a file it creates.
    ///
    /// # Errors
    /// `openat(2)` errors (`ENOENT` on create: this directory was removed meanwhile).
    pub fn open_file(&self, name: &str, flags: i32, mode: u32) -> io::Result<File> {
        let flags = OFlag::from_bits_truncate(flags)
            | OFlag::O_NOFOLLOW
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::from_bits_truncate(mode)).map_err(io_err)?;
        Ok(File::from(fd))
    }

    /// Creates `name` new (`O_CREAT | O_EXCL`, mode 0600) for reading and writing; a
    /// leftover of that name (a file, or a symlink someone planted) is unlinked first,
    /// never followed.
    ///
    /// # Errors
    /// As [`RunDir::open_file`].
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        let _ = self.unlink(name);
        self.open_file(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600)
    }

    /// Renames `from` to `to`, both in this directory (`renameat(2)`: a symlink at `to`
    /// is replaced, never followed).
    ///
    /// # Errors
    /// `renameat(2)` errors.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        renameat(&self.fd, from, &self.fd, to).map_err(io_err)
    }

    /// Removes the file `name` (`unlinkat(2)`; a symlink is removed, not followed).
    ///
    /// # Errors
    /// `unlinkat(2)` errors (`NotFound` when there is none).
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir).map_err(io_err)
    }

    /// `lstat` of `name` in this directory (`None` when there is none).
    ///
    /// # Errors
    /// `fstatat(2)` errors other than `ENOENT`.
    pub fn stat(&self, name: &str) -> io::Result<Option<FileStat>> {
        match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(io_err(e)),
        }
    }

    /// Whether `name` still names the open `file` (same device and inode): false once it
    /// was removed or replaced.
    #[must_use]
    pub fn names(&self, name: &str, file: &File) -> bool {
        let Ok(meta) = file.metadata() else {
            return false;
        };
        self.stat(name).ok().flatten().is_some_and(|st| {
            st.st_dev == meta.dev()
                && st.st_ino == meta.ino()
                && SFlag::S_IFREG.bits() == (st.st_mode & SFlag::S_IFMT.bits())
        })
    }

    /// The names of this directory's entries (not `.` and `..`), those that are not UTF-8
    /// left out.
    ///
    /// # Errors
    /// Listing errors.
    pub fn names_in(&self) -> io::Result<Vec<String>> {
        let dup = self.fd.as_fd().try_clone_to_owned()?;
        let mut dir = nix::dir::Dir::from_fd(dup).map_err(io_err)?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(io_err)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if let Ok(name) = std::str::from_utf8(name) {
                out.push(name.to_owned());
            }
        }
        Ok(out)
    }

    /// Removes the temporary files (`.<...><pid>.tmp`) writers that were killed left here
    /// ([`super::reclaim_temp_files`]); done before each write in the directory.
    pub fn reclaim_temp_files(&self) {
        super::reclaim_temp_files(&self.fd, ".");
    }

    /// The path of `name` in this directory, for messages.
    #[must_use]
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl fmt::Display for RunDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.path.display().fmt(f)
    }
}

/// The host's run directory of this library (`/run/rdt`).
pub const HOST_RUN_DIR: &str = "/run/rdt";

/// The run directory of the platform whose files live under `root` (a `--sysroot`, a
/// mounted simulated platform): one of the host's per platform,
/// `/run/rdt/sysroot-<FNV-1a of the canonical path of root, 16 hex digits>` (a mounted
/// platform has no writable `/run` of its own). Keyed by the canonical path, so that every
/// spelling of one directory (relative, with `.` or `..`, through a symlink) shares one
/// journal, writers' lock and record of named classes; not by the device and inode of a
/// mount: a platform unmounted and mounted again at its place is the same platform, whose
/// journal must still be found.
#[must_use]
pub fn sysroot_run_dir(root: impl AsRef<Path>) -> PathBuf {
    Path::new(HOST_RUN_DIR).join(format!("sysroot-{:016x}", fnv1a(&identity(root.as_ref()))))
}

/// FNV-1a (64 bit) of a path's bytes: a stable name for a sysroot's run directory.
fn fnv1a(path: &Path) -> u64 {
    path.as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The one spelling of the platform at `root`: its canonical path (`realpath(3)`: absolute,
/// no `.`, `..` or symlink), so that `x`, `/abs/x`, `/abs/x/./` and a symlink to it name one
/// platform, with one run directory, journal and writers' lock. A root that does not exist
/// (yet) is made absolute and cleaned of `.` and `..` lexically.
fn identity(root: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(root) {
        return canonical;
    }
    let abs = std::path::absolute(root).unwrap_or_else(|_| root.to_owned());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Removes the run directory at `path` if nothing in it is in use: it holds nothing but
/// lock files (names ending in `.lock`) that no process holds. Each such lock is taken, the
/// lock files unlinked while held, then the directory removed (`rmdir(2)`, which fails,
/// leaving everything, if a file appeared meanwhile). A process that waited for such a lock
/// notices that the file it locked is no longer named (see [`RunDir::names`]) and opens the
/// lock again, making the directory anew. Called when a backend with a run directory goes
/// away, so that `/run/rdt` does not keep a directory for every platform ever opened.
/// Returns whether the directory was removed.
pub fn remove_if_unused(path: impl AsRef<Path>) -> bool {
    let path = path.as_ref();
    let Ok(Some(dir)) = RunDir::open(path) else {
        return false;
    };
    let Ok(names) = dir.names_in() else {
        return false;
    };
    // (`msr.lock` exactly: a name in another case is not a lock file of ours)
    if names
        .iter()
        .any(|n| Path::new(n).extension().is_none_or(|e| e != "lock"))
    {
        return false;
    }
    let mut held = Vec::new();
    for name in &names {
        let Ok(f) = dir.open_file(name, libc::O_RDONLY | libc::O_NONBLOCK, 0) else {
            return false;
        };
        if !matches!(super::try_lock_file(&f, true), Ok(true)) || !dir.names(name, &f) {
            return false;
        }
        held.push(f);
    }
    for name in &names {
        if dir.unlink(name).is_err() {
            return false;
        }
    }
    let Some(parent) = path.parent() else {
        return false;
    };
    let Some(last) = path.file_name() else {
        return false;
    };
    let removed = RunDir::open_parent_fd(parent)
        .and_then(|p| unlinkat(&p, last.as_bytes(), UnlinkatFlags::RemoveDir).map_err(io_err))
        .is_ok();
    drop(held);
    removed
}

/// The path of a run directory in use, removed if unused ([`remove_if_unused`]) when this
/// is dropped: what a backend keeps, so that `/run/rdt` does not keep a directory for every
/// platform ever opened. Nothing is made or checked here (the run files do that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDirPath(PathBuf);

impl RunDirPath {
    /// The run directory at `path`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// Its path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RunDirPath {
    fn drop(&mut self) {
        remove_if_unused(&self.0);
    }
}

impl RunDir {
    fn open_parent_fd(parent: &Path) -> io::Result<OwnedFd> {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        nix::fcntl::open(
            parent,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runfile::{NameRecord, RunFile, WriterLock, dead_run_files, read_run_file};
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    /// A root-only file another user wants root to overwrite.
    fn victim(d: &Path) -> PathBuf {
        let v = d.join("victim");
        fs::write(&v, "keep\n").unwrap();
        fs::set_permissions(&v, fs::Permissions::from_mode(0o600)).unwrap();
        v
    }

    /// Every writer of the module, on `run`: each must fail.
    fn every_writer_refuses(run: &Path) -> Vec<String> {
        let mut errors = vec![
            RunFile::create(run, "txn-msr-", b"x")
                .unwrap_err()
                .to_string(),
            NameRecord::new(run, "msr-classes")
                .write(&[(rdt_core::ClassId::new(1), "web".into())])
                .unwrap_err()
                .to_string(),
            WriterLock::new(run.join("msr.lock"), Duration::ZERO)
                .hold()
                .unwrap_err()
                .to_string(),
            dead_run_files(run, "txn-msr-", 1024)
                .unwrap_err()
                .to_string(),
            read_run_file(run.join("msr-classes"), 1024)
                .unwrap_err()
                .to_string(),
        ];
        errors.dedup();
        errors
    }

    #[test]
    fn a_symlinked_run_dir_is_refused_and_nothing_is_written_through_it() {
        let d = tempfile::tempdir().unwrap();
        let v = victim(d.path());
        let elsewhere = d.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o700)).unwrap();
        let run = d.path().join("run");
        std::os::unix::fs::symlink(&elsewhere, &run).unwrap();
        for e in every_writer_refuses(&run) {
            assert!(e.contains("a symbolic link"), "{e}");
            assert!(e.contains(&run.display().to_string()), "{e}");
        }
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert_eq!(fs::read_to_string(&v).unwrap(), "keep\n");
    }

    #[test]
    fn a_run_dir_of_another_user_or_writable_by_others_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        fs::create_dir(&run).unwrap();
        // another user's, 0700: planted files are never read or written
        let v = victim(d.path());
        std::os::unix::fs::symlink(&v, run.join("msr-classes")).unwrap();
        std::os::unix::fs::symlink(&v, run.join("msr.lock")).unwrap();
        fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
        for e in every_writer_refuses(&run) {
            assert!(e.contains("owned by uid 65534, mode 0700"), "{e}");
            assert!(e.contains("must belong to uid 0"), "{e}");
        }
        assert_eq!(fs::read_to_string(&v).unwrap(), "keep\n");
        // ours, but anyone may write to it
        std::os::unix::fs::chown(&run, Some(0), Some(0)).unwrap();
        fs::set_permissions(&run, fs::Permissions::from_mode(0o777)).unwrap();
        for e in every_writer_refuses(&run) {
            assert!(e.contains("owned by uid 0, mode 0777"), "{e}");
        }
        assert_eq!(fs::read_to_string(&v).unwrap(), "keep\n");
    }

    #[test]
    fn a_run_dir_below_a_directory_others_can_write_is_refused_unless_sticky() {
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let e = RunDir::create(open.join("run")).unwrap_err().to_string();
        assert!(
            e.contains("mode 0777") && e.contains("unless sticky"),
            "{e}"
        );
        assert!(!open.join("run").exists(), "nothing made below it");
        // /tmp's mode: another user cannot rename what is ours there
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        RunDir::create(open.join("run")).unwrap();
        // a parent of another user
        let theirs = d.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = RunDir::create(theirs.join("run")).unwrap_err().to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
    }

    #[test]
    fn a_run_dir_is_made_level_by_level_with_mode_0700_and_ours_is_tightened() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("a/b/run");
        RunDir::create(&run).unwrap();
        for p in [d.path().join("a"), d.path().join("a/b"), run.clone()] {
            assert_eq!(
                fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
                0o700
            );
        }
        fs::set_permissions(&run, fs::Permissions::from_mode(0o755)).unwrap();
        RunDir::create(&run).unwrap();
        assert_eq!(
            fs::metadata(&run).unwrap().permissions().mode() & 0o7777,
            0o700
        );
        assert!(
            RunDir::open(d.path().join("missing/run"))
                .unwrap()
                .is_none()
        );
        assert!(!d.path().join("missing").exists(), "open makes nothing");
        // a planted symlink above is followed only to a directory that passes
        std::os::unix::fs::symlink("/", d.path().join("up")).unwrap();
        assert!(
            RunDir::open(d.path().join("up/nonexistent-rdt-run"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn an_unused_run_dir_goes_and_a_waiting_writer_takes_the_lock_anew() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        let mut a = WriterLock::new(run.join("w.lock"), Duration::from_secs(5));
        a.hold().unwrap();
        assert!(!remove_if_unused(&run), "held: kept");
        a.release();
        let names = NameRecord::new(&run, "x-classes");
        names
            .write(&[(rdt_core::ClassId::new(1), "db".into())])
            .unwrap();
        assert!(!remove_if_unused(&run), "a record: kept");
        names.write(&[]).unwrap();
        assert!(remove_if_unused(&run), "only a free lock: removed");
        assert!(!run.exists());
        // `a` still has the old lock file open: it must not take a lock on nothing
        a.hold().unwrap();
        let mut b = WriterLock::new(run.join("w.lock"), Duration::from_millis(20));
        assert!(
            b.hold().is_err(),
            "one holder, on the lock file the directory names"
        );
        a.release();
        b.hold().unwrap();
        // files made in a directory removed meanwhile are made in a new one
        b.release();
        drop((a, b));
        let f = RunFile::create(&run, "x-", b"1").unwrap();
        assert!(f.path().exists());
    }
}

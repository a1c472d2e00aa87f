//! The filesystem seam: everything [`crate::ResctrlBackend`] does with the files under a
//! resctrl root, as one trait, [`ResctrlFs`].
//!
//! Production uses [`HostFs`], the real files under a root directory (the kernel's
//! `/sys/fs/resctrl`, or a FUSE-mounted simulated platform's). Another implementation can
//! serve the same tree without a mount: the simulated platform's in-process resctrl
//! (`rdt_sim::resctrl::InProcessFs`), so that the OS interface runs without root or FUSE.
//! The seam is at the level of system calls, not of resctrl semantics: every resctrl rule
//! (one `write(2)` per command, `last_cmd_status` after a refusal, the locking convention)
//! stays in the backend and runs unchanged over either implementation.
//!
//! | operation | system call on [`HostFs`] | used for |
//! |---|---|---|
//! | [`ResctrlFs::read`] | `open(O_NONBLOCK)` + `fstat` + `read` to EOF, at most [`MAX_FILE_BYTES`] | `schemata`, `cpus_list`, `tasks`, `info/*`, `mode` |
//! | [`ResctrlFs::write`] | `open(O_WRONLY\|O_NONBLOCK)` + one `write(2)` | one command to a group file |
//! | [`ResctrlFs::mkdir`], [`ResctrlFs::rmdir`] | `mkdir(2)`, `rmdir(2)` | control and monitor groups |
//! | [`ResctrlFs::subdirs`] | `getdents(2)` + `stat` | listing groups and `mon_data` domains |
//! | [`ResctrlFs::exists`], [`ResctrlFs::is_dir`] | `stat(2)` | probes (`info/`, a group) |
//! | [`ResctrlFs::open_reader`] | `open(O_RDONLY\|O_NONBLOCK)` + `fstat`, then `pread(2)` per call | `mon_data` counters, kept open |
//! | [`ResctrlFs::open_lock`] | `open(O_NONBLOCK)` of a directory, then `flock(2)` | the root's lock, live groups' markers |
//!
//! [`HostFs`] reads and opens regular files only, through `rdt_host::file` (the one
//! bounded reader): a FIFO planted under a `--sysroot` tree would block `open(2)` forever,
//! and a link to `/dev/zero` (or a file that never ends) would grow memory without bound.
//! Both are errors instead (`InvalidInput`, `FileTooLarge`).
//!
//! Paths are relative to the root, `/`-separated, without a leading slash; `""` is the root.
//! Errors are `io::Error`s carrying the errno the kernel gives (`raw_os_error`), which the
//! backend interprets (ENOSPC on `mkdir`: out of CLOSIDs or RMIDs; EINVAL on `write`: a
//! refused command).

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// The file operations of the resctrl backend under one root (module docs).
///
/// Implementations are shared between the backend and its open counters (`Arc`), so every
/// method takes `&self`; an in-process implementation locks its model inside.
pub trait ResctrlFs: fmt::Debug + Send + Sync {
    /// The whole text of file `rel`.
    ///
    /// # Errors
    /// `NotFound` (ENOENT) when it does not exist; `InvalidData` for text that is not
    /// UTF-8; the file's own errno.
    fn read(&self, rel: &str) -> io::Result<String>;

    /// One `write(2)` of `data` to file `rel`: one command. Returns the bytes taken.
    ///
    /// # Errors
    /// The errno of the open (ENOENT, EACCES) or of the write (EINVAL: the kernel refused
    /// the command, `info/last_cmd_status` says why; ESRCH, ENOSPC, E2BIG, ...).
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<usize>;

    /// `mkdir(2)` of `rel`.
    ///
    /// # Errors
    /// EEXIST, ENOSPC (out of CLOSIDs or RMIDs), EBUSY (RMIDs in limbo), EPERM, ...
    fn mkdir(&self, rel: &str) -> io::Result<()>;

    /// `rmdir(2)` of `rel`.
    ///
    /// # Errors
    /// ENOENT, EBUSY, EPERM, ...
    fn rmdir(&self, rel: &str) -> io::Result<()>;

    /// The names of the subdirectories of directory `rel`, in any order (files left out).
    ///
    /// # Errors
    /// `NotFound` when `rel` does not exist; ENOTDIR; listing errors.
    fn subdirs(&self, rel: &str) -> io::Result<Vec<String>>;

    /// Whether `rel` exists (file or directory).
    fn exists(&self, rel: &str) -> bool;

    /// Whether `rel` is a directory.
    fn is_dir(&self, rel: &str) -> bool;

    /// Opens file `rel` for reading it again and again with positioned reads (a `mon_data`
    /// counter: one `pread(2)` at offset 0 per poll, no open per poll).
    ///
    /// # Errors
    /// The errno of the open.
    fn open_reader(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>>;

    /// Opens directory `rel` for `flock(2)`: the root, whose lock serialises resctrl users
    /// (Documentation/arch/x86/resctrl.rst, "Locking between applications"), and the
    /// directories of live monitor groups, whose shared lock tells other processes that
    /// their creator still runs. Each call is a new open file description: two handles of
    /// one process conflict as two processes' would.
    ///
    /// # Errors
    /// The errno of the open.
    fn open_lock(&self, rel: &str) -> io::Result<Box<dyn FsLock>>;

    /// Opens directory `rel` to open files relative to it (`openat(2)`): a group's
    /// directory, through which a reader opens each of its files with one path lookup
    /// instead of one per component of the path from the root. `Unsupported` by default:
    /// callers then open by path ([`ResctrlFs::open_reader`]).
    ///
    /// # Errors
    /// The errno of the open; `Unsupported`.
    fn open_dir(&self, rel: &str) -> io::Result<Box<dyn DirReader>> {
        let _ = rel;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// A directory opened for opening the files under it ([`ResctrlFs::open_dir`]).
pub trait DirReader: fmt::Debug + Send + Sync {
    /// Opens file `rel` (relative to the directory) as [`ResctrlFs::open_reader`] does.
    ///
    /// # Errors
    /// The errno of the open; `InvalidInput` for a file that is not a regular one.
    fn open_reader(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>>;
}

/// An open file read with positioned reads ([`ResctrlFs::open_reader`]).
pub trait PositionedRead: fmt::Debug + Send + Sync {
    /// Up to `buf.len()` bytes from `offset` (`pread(2)`); 0 at the end.
    ///
    /// # Errors
    /// The errno of the read (ENOENT once the group is gone, EIO).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

/// An open directory's `flock(2)` ([`ResctrlFs::open_lock`]). Dropping the handle releases
/// what it holds.
pub trait FsLock: fmt::Debug + Send + Sync {
    /// Takes the lock without waiting: `LOCK_EX` when `exclusive`, else `LOCK_SH`, with
    /// `LOCK_NB`. `Ok(false)` when another handle holds it in a conflicting mode.
    ///
    /// # Errors
    /// `flock(2)` errors other than EWOULDBLOCK.
    fn try_lock(&self, exclusive: bool) -> io::Result<bool>;

    /// Releases the lock (`LOCK_UN`).
    ///
    /// # Errors
    /// `flock(2)` errors.
    fn unlock(&self) -> io::Result<()>;
}

/// The largest resctrl file [`HostFs`] reads, in bytes (64 MiB): a `tasks` file lists at most
/// `pid_max` (2^22) task ids of up to 7 digits and a newline each, 32 MiB; every other file
/// is a few lines.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The real files under a root directory: the production [`ResctrlFs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFs {
    root: PathBuf,
}

impl HostFs {
    /// The files under `root` (`/sys/fs/resctrl` on a host).
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }
}

impl ResctrlFs for HostFs {
    fn read(&self, rel: &str) -> io::Result<String> {
        rdt_host::file::read_text(self.path(rel), MAX_FILE_BYTES)
    }

    fn write(&self, rel: &str, data: &[u8]) -> io::Result<usize> {
        // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking the open.
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(self.path(rel))?
            .write(data)
    }

    fn mkdir(&self, rel: &str) -> io::Result<()> {
        fs::create_dir(self.path(rel))
    }

    fn rmdir(&self, rel: &str) -> io::Result<()> {
        fs::remove_dir(self.path(rel))
    }

    fn subdirs(&self, rel: &str) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.path(rel))? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }

    fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    fn is_dir(&self, rel: &str) -> bool {
        self.path(rel).is_dir()
    }

    fn open_reader(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>> {
        let file = rdt_host::file::open_nonblocking(self.path(rel), false)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(rdt_host::file::ReadError::NotRegular(meta.file_type()).into());
        }
        Ok(Box::new(file))
    }

    fn open_lock(&self, rel: &str) -> io::Result<Box<dyn FsLock>> {
        Ok(Box::new(rdt_host::file::open_nonblocking(
            self.path(rel),
            false,
        )?))
    }

    fn open_dir(&self, rel: &str) -> io::Result<Box<dyn DirReader>> {
        let fd = nix::fcntl::open(
            &self.path(rel),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        )?;
        Ok(Box::new(HostDir(fd)))
    }
}

/// A directory of [`HostFs`], open for `openat(2)`.
#[derive(Debug)]
struct HostDir(OwnedFd);

impl DirReader for HostDir {
    fn open_reader(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>> {
        // As `rdt_host::file::open_nonblocking`: a FIFO does not block the open.
        let fd = nix::fcntl::openat(
            &self.0,
            rel,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
            Mode::empty(),
        )?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(rdt_host::file::ReadError::NotRegular(meta.file_type()).into());
        }
        Ok(Box::new(file))
    }
}

impl PositionedRead for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

impl FsLock for File {
    fn try_lock(&self, exclusive: bool) -> io::Result<bool> {
        rdt_host::runfile::try_lock_file(self, exclusive)
    }

    fn unlock(&self) -> io::Result<()> {
        File::unlock(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_files_are_read_written_listed_and_locked_under_the_root() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        // act
        fs.mkdir("g").unwrap();
        fs.mkdir("g/sub").unwrap();
        std::fs::write(dir.path().join("g/f"), "").unwrap();
        let n = fs.write("g/f", b"L3:0=f\n").unwrap();
        // assert
        assert_eq!(n, 7);
        assert_eq!(fs.read("g/f").unwrap(), "L3:0=f\n");
        assert_eq!(fs.subdirs("g").unwrap(), ["sub"]);
        assert!(fs.is_dir("g") && fs.exists("g/f") && !fs.is_dir("g/f"));
        let mut buf = [0; 3];
        assert_eq!(
            fs.open_reader("g/f").unwrap().read_at(&mut buf, 1).unwrap(),
            3
        );
        assert_eq!(&buf, b"3:0");
        let dir = fs.open_dir("g").unwrap();
        let mut buf = [0; 7];
        assert_eq!(
            dir.open_reader("f").unwrap().read_at(&mut buf, 0).unwrap(),
            7
        );
        assert_eq!(&buf, b"L3:0=f\n");
        assert_eq!(
            dir.open_reader("nope").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(dir.open_reader("sub").is_err(), "a directory is no counter");
        assert!(fs.open_dir("g/f").is_err(), "a file is no directory");
        let a = fs.open_lock("").unwrap();
        let b = fs.open_lock("").unwrap();
        assert!(a.try_lock(true).unwrap());
        assert!(!b.try_lock(false).unwrap(), "two opens conflict");
        a.unlock().unwrap();
        assert!(b.try_lock(false).unwrap());
        assert_eq!(
            fs.subdirs("nope").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        fs.rmdir("g/sub").unwrap();
        assert!(!fs.exists("g/sub"));
    }

    #[test]
    fn fifos_devices_and_huge_files_are_refused_without_blocking_or_reading() {
        // arrange: a tree with a FIFO (open(2) blocked forever), a link to /dev/zero (read
        // to EOF never ended), and a sparse file over the limit
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        nix::unistd::mkfifo(&dir.path().join("schemata"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("tasks")).unwrap();
        let big = File::create(dir.path().join("cpus_list")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        let start = std::time::Instant::now();
        // act
        let fifo = fs.read("schemata").unwrap_err();
        let fifo_write = fs.write("schemata", b"L3:0=f\n").unwrap_err();
        let fifo_reader = fs.open_reader("schemata").unwrap_err();
        let zero = fs.read("tasks").unwrap_err();
        let zero_reader = fs.open_reader("tasks").unwrap_err();
        let huge = fs.read("cpus_list").unwrap_err();
        // assert
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(fifo.kind(), io::ErrorKind::InvalidInput);
        assert!(fifo.to_string().contains("a FIFO"), "{fifo}");
        assert_eq!(fifo_write.raw_os_error(), Some(libc::ENXIO), "{fifo_write}");
        assert!(fifo_reader.to_string().contains("a FIFO"), "{fifo_reader}");
        assert!(zero.to_string().contains("a character device"), "{zero}");
        assert!(zero_reader.to_string().contains("a character device"));
        assert_eq!(huge.kind(), io::ErrorKind::FileTooLarge, "{huge}");
    }
}

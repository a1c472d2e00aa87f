//! Reading a file that may be hostile (a FIFO, a device, an endless or huge file): the one
//! bounded reader of the workspace; and [`replace_shared`], the one writer of a file in a
//! directory other programs share. Configuration files (`rdt_config`), run files
//! (`rdt_host::runfile`), sysfs and procfs text, CPUID dumps, resctrl files (`rdt-resctrl`'s
//! `HostFs`), pqos's `-f` files and the simulator's state and scenario files all go through
//! [`read_regular`] (or [`read_text`] on top of it). The `/dev/cpu/N/{cpuid,msr}` devices are
//! the only files read otherwise: they are character devices by nature.
//!
//! A FIFO without a writer would block `open(2)` forever, and one with a writer would block
//! `read(2)`; a symbolic link to `/dev/zero` (or a FUSE file that never ends) would grow
//! memory without bound. Both are refused before anything is read.

use std::fmt;
use std::fs::{File, FileType, OpenOptions, TryLockError};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

/// The largest kernel text file read through [`read_text`] by default, in bytes (1 MiB):
/// sysfs attributes are at most a page (4 KiB), `/proc/mounts` of a busy container host a
/// few hundred KiB.
pub const MAX_KERNEL_TEXT_BYTES: u64 = 1 << 20;

/// Why [`read_regular`] read nothing. Displays without the path (callers name the file);
/// the underlying error is the [`std::error::Error::source`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// Opening failed.
    Open(io::Error),
    /// `fstat` or reading failed.
    Io(io::Error),
    /// Not a regular file (a FIFO, a device, a directory, a socket).
    NotRegular(FileType),
    /// Larger than allowed.
    TooLarge {
        /// The size `fstat` gave, or (for a file that grew or lies about its size) at least
        /// this many bytes read.
        size: u64,
        /// The limit, in bytes.
        max: u64,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(_) => f.write_str("cannot open"),
            Self::Io(_) => f.write_str("cannot read"),
            Self::NotRegular(ft) => {
                write!(f, "{} is not read: expected a regular file", kind_of(*ft))
            }
            Self::TooLarge { size, max } => {
                write!(f, "{size} bytes or more, more than the {max} bytes allowed")
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open(e) | Self::Io(e) => Some(e),
            Self::NotRegular(_) | Self::TooLarge { .. } => None,
        }
    }
}

impl From<ReadError> for io::Error {
    /// Open and read errors as they were; a non-regular file as `InvalidInput`, a file over
    /// the limit as `FileTooLarge`, each with the message of [`ReadError`]'s `Display`.
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Open(e) | ReadError::Io(e) => e,
            ReadError::NotRegular(_) => Self::new(io::ErrorKind::InvalidInput, e.to_string()),
            ReadError::TooLarge { .. } => Self::new(io::ErrorKind::FileTooLarge, e.to_string()),
        }
    }
}

/// What a non-regular file is, for a message (`a FIFO`, `a character device`, ...).
#[must_use]
pub fn kind_of(ft: FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Opens `path` without blocking (a FIFO without a writer would block `open` forever) and
/// without making a terminal the controlling one; not through a final symlink when
/// `nofollow` (`ELOOP` then).
///
/// # Errors
/// `open(2)` errors.
pub fn open_nonblocking(path: impl AsRef<Path>, nofollow: bool) -> io::Result<File> {
    let path = path.as_ref();
    let nofollow = if nofollow { libc::O_NOFOLLOW } else { 0 };
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow)
        .open(path)
}

/// The bytes of the regular file at `path`, at most `max_bytes` of them: anything else is
/// refused before it is read, and a file that grows past the limit after `fstat` (or
/// reports a smaller size than it has, as procfs and sysfs do) is noticed: one byte past it
/// is read, never more. A symbolic link is followed unless `nofollow`.
///
/// # Errors
/// [`ReadError::Open`] (`ELOOP` for a final symlink when `nofollow`), [`ReadError::Io`],
/// [`ReadError::NotRegular`], [`ReadError::TooLarge`].
///
/// # Examples
/// ```
/// use rdt_host::file::{read_regular, ReadError};
/// let e = read_regular("/dev/zero", 4096, false).unwrap_err();
/// assert!(matches!(e, ReadError::NotRegular(_)));
/// ```
pub fn read_regular(
    path: impl AsRef<Path>,
    max_bytes: u64,
    nofollow: bool,
) -> Result<Vec<u8>, ReadError> {
    let file = open_nonblocking(path, nofollow).map_err(ReadError::Open)?;
    read_opened(&file, max_bytes)
}

/// The bytes of an opened `file`, refused as [`read_regular`] refuses them when it is not
/// a regular file or holds more than `max_bytes`: for a file opened some other way (relative
/// to a directory descriptor, `rdt_host::runfile::RunDir`).
///
/// # Errors
/// [`ReadError::Io`], [`ReadError::NotRegular`], [`ReadError::TooLarge`].
pub fn read_opened(file: &File, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(meta.file_type()));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            max: max_bytes,
        });
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > max_bytes {
        return Err(ReadError::TooLarge {
            size: read,
            max: max_bytes,
        });
    }
    Ok(bytes)
}

/// The bytes of the kernel attribute file at `path` (a sysfs or resctrl file), at most
/// `max_bytes` of them, refusing what is not a regular file as [`read_regular`] does.
///
/// It stops at the first short read instead of reading again for end of file: the kernel
/// shows an attribute in one piece (sysfs `kernfs_seq_show` and bin attributes copy what
/// remains up to the count asked for), so a read that returns less than asked has reached
/// the end, as it has on a regular file. That halves the reads of a small file: one
/// `read(2)` where `read_to_end` makes two, which counts on a FUSE-served tree (the
/// simulated platform) and on a host reading hundreds of attributes.
pub(crate) fn read_attribute(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    /// What one read asks for: a page, the size of a sysfs attribute's buffer.
    const CHUNK: usize = 4096;
    let mut file = open_nonblocking(path, false).map_err(ReadError::Open)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(meta.file_type()));
    }
    let limit = usize::try_from(max_bytes.saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    loop {
        let want = CHUNK.min(limit - bytes.len());
        let start = bytes.len();
        bytes.resize(start + want, 0);
        let n = loop {
            match file.read(&mut bytes[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        };
        bytes.truncate(start + n);
        if bytes.len() >= limit {
            return Err(ReadError::TooLarge {
                size: max_bytes.saturating_add(1),
                max: max_bytes,
            });
        }
        if n < want {
            return Ok(bytes);
        }
    }
}

/// [`read_regular`] as UTF-8 text, following symlinks, with the errors as `io::Error`s
/// (`From<ReadError>`): for kernel files (sysfs, procfs, resctrl) and other files whose
/// callers report `io::Error`s with the path.
///
/// # Errors
/// Open and read errors; `InvalidInput` for a file that is not regular, `FileTooLarge` for
/// one over `max_bytes`, `InvalidData` for text that is not UTF-8.
pub fn read_text(path: impl AsRef<Path>, max_bytes: u64) -> io::Result<String> {
    let path = path.as_ref();
    let bytes = read_regular(path, max_bytes, false)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// `{path}: {found}; refused: {rule}` as a `PermissionDenied` error.
fn refused(what: &Path, found: &str, rule: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {found}; refused: {rule}", what.display()),
    )
}

fn errno_err(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// The directory and file name of `path`, for [`open_shared_dir`]'s callers: a path
/// without a file name, with `..` in it, or a file name that is not UTF-8 is
/// `InvalidInput`.
fn dir_and_name(path: &Path) -> io::Result<(&Path, &str)> {
    let invalid = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {why}", path.display()),
        )
    };
    if path
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(invalid("`..` in the path (name the directory itself)"));
    }
    let name = path
        .file_name()
        .ok_or_else(|| invalid("not a file's path"))?
        .to_str()
        .ok_or_else(|| invalid("a file name that is not UTF-8"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// Opens the directory `dir` (made absolute) by a walk from `/`, one `openat(2)` per
/// component with `O_DIRECTORY | O_NOFOLLOW`: no component may be a symbolic link (the
/// walk never follows one, so a directory swapped for a link after the check is never
/// used), and each must belong to root or the effective user and be writable by no one
/// else unless sticky (`/tmp`), so that no one else can swap what lies below it. The
/// descriptor returned is the one every file in `dir` is then reached through (the rule of
/// [`replace_shared`] and [`open_append_shared`]; a run directory of this library's has
/// stricter rules, [`crate::runfile::RunDir`]).
///
/// # Errors
/// `PermissionDenied` naming the component, what it is (a symbolic link; its owner and
/// mode) and the rule it broke; `InvalidInput` for `..` in the path; `open(2)` errors
/// (`NotFound` for a missing directory) naming the component.
pub fn open_shared_dir(dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{AtFlags, OFlag, openat};
    use nix::sys::stat::{Mode, SFlag, fstat, fstatat};
    use std::path::Component;

    if dir.components().any(|c| c == Component::ParentDir) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: `..` in the path (name the directory itself)",
                dir.display()
            ),
        ));
    }
    let abs = std::path::absolute(dir)?;
    let euid = nix::unistd::geteuid().as_raw();
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut walked = std::path::PathBuf::from("/");
    let mut fd = nix::fcntl::open("/", flags, Mode::empty()).map_err(errno_err)?;
    let rule = format!(
        "every directory of the path must be a directory (not a symlink) of root or uid \
         {euid}, writable by no one else unless sticky"
    );
    let check = |fd: &std::os::fd::OwnedFd, walked: &Path| -> io::Result<()> {
        let st = fstat(fd).map_err(errno_err)?;
        let others_write = st.st_mode & 0o022 != 0;
        let sticky = st.st_mode & 0o1000 != 0;
        if (st.st_uid != 0 && st.st_uid != euid) || (others_write && !sticky) {
            return Err(refused(
                walked,
                &format!(
                    "owned by uid {}, mode {:04o}",
                    st.st_uid,
                    st.st_mode & 0o7777
                ),
                &rule,
            ));
        }
        Ok(())
    };
    check(&fd, &walked)?;
    for c in abs.components() {
        let Component::Normal(name) = c else { continue };
        walked.push(name);
        let next = match openat(&fd, name, flags, Mode::empty()) {
            Ok(next) => next,
            Err(e @ (nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR)) => {
                let found = match fstatat(&fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st) if st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFLNK.bits() => {
                        "a symbolic link"
                    }
                    Ok(_) => "not a directory",
                    Err(_) => e.desc(),
                };
                return Err(refused(&walked, found, &rule));
            }
            Err(e) => {
                let e = errno_err(e);
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", walked.display()),
                ));
            }
        };
        check(&next, &walked)?;
        fd = next;
    }
    Ok(fd)
}

/// Opens the file at `path` for appending (made with mode `mode` when missing), for an
/// output file the user names in a directory others may share (`rdt-agent --events`):
/// - its directory is reached by [`open_shared_dir`]'s walk (no symlinked component; each
///   of root or the effective user, writable by no one else unless sticky);
/// - the file is opened relative to that descriptor with `O_NOFOLLOW | O_NONBLOCK |
///   O_NOCTTY` (a symlink is refused, a FIFO planted there never blocks the open: without
///   a reader `open(2)` fails with `ENXIO`, with one it is refused after `fstat`);
/// - it must be a regular file of the effective user: another user's file, a FIFO, a
///   device, a socket or a directory of that name is refused, never written to.
///
/// # Errors
/// `PermissionDenied` naming the path, what is there (`a FIFO`, `owned by uid 1000`) and
/// the rule; [`open_shared_dir`]'s; `InvalidInput` for a path without a file name or
/// with `..`; `open(2)` errors naming the path.
///
/// # Examples
/// ```
/// use std::io::Write as _;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("events.jsonl");
/// rdt_host::file::open_append_shared(&path, 0o640)?.write_all(b"{}\n")?;
/// nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
/// let e = rdt_host::file::open_append_shared(dir.path().join("fifo"), 0o640).unwrap_err();
/// assert!(e.to_string().contains("a FIFO"), "{e}");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn open_append_shared(path: impl AsRef<Path>, mode: u32) -> io::Result<File> {
    use nix::fcntl::{AtFlags, OFlag, openat};
    use nix::sys::stat::{Mode, SFlag, fchmod, fstatat};

    let path = path.as_ref();
    let (dir, name) = dir_and_name(path)?;
    let dfd = open_shared_dir(dir)?;
    let euid = nix::unistd::geteuid().as_raw();
    let rule = format!("only a regular file of uid {euid} is written to");
    let kind = |mode: u32| -> &'static str {
        match mode & SFlag::S_IFMT.bits() {
            m if m == SFlag::S_IFIFO.bits() => "a FIFO",
            m if m == SFlag::S_IFCHR.bits() => "a character device",
            m if m == SFlag::S_IFBLK.bits() => "a block device",
            m if m == SFlag::S_IFSOCK.bits() => "a socket",
            m if m == SFlag::S_IFDIR.bits() => "a directory",
            m if m == SFlag::S_IFLNK.bits() => "a symbolic link",
            _ => "not a regular file",
        }
    };
    let check = |mode: u32, uid: u32| -> io::Result<()> {
        if mode & SFlag::S_IFMT.bits() != SFlag::S_IFREG.bits() {
            return Err(refused(path, kind(mode), &rule));
        }
        if uid != euid {
            return Err(refused(path, &format!("a file owned by uid {uid}"), &rule));
        }
        Ok(())
    };
    // Told apart before opening, for the message; checked again on the descriptor.
    let existed = match fstatat(&dfd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => {
            check(st.st_mode, st.st_uid)?;
            true
        }
        Err(nix::errno::Errno::ENOENT) => false,
        Err(e) => {
            let e = errno_err(e);
            return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
        }
    };
    let create_mode = Mode::from_bits_truncate(mode & 0o777);
    let fd = openat(
        &dfd,
        name,
        OFlag::O_WRONLY
            | OFlag::O_APPEND
            | OFlag::O_CREAT
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        create_mode,
    )
    .map_err(|e| match e {
        nix::errno::Errno::ELOOP => refused(path, "a symbolic link", &rule),
        nix::errno::Errno::ENXIO => refused(path, "a FIFO (or a device) without a reader", &rule),
        e => {
            let e = errno_err(e);
            io::Error::new(e.kind(), format!("{}: {e}", path.display()))
        }
    })?;
    let st = nix::sys::stat::fstat(&fd).map_err(errno_err)?;
    check(st.st_mode, st.st_uid)?;
    if !existed && st.st_mode & 0o777 != mode & 0o777 {
        // a file this call made: the mode as asked, whatever the umask
        fchmod(&fd, create_mode).map_err(errno_err)?;
    }
    Ok(File::from(fd))
}

/// Replaces the file at `path` with `contents` (mode `mode`) in a directory other programs
/// share (Node Feature Discovery's `features.d`, where device plugins drop files too),
/// atomically: a reader sees the old file or the new one, never a part. For a directory of
/// this library's own, use [`crate::runfile::write_run_file`], whose directory must be
/// private (0700); a shared directory keeps its mode.
///
/// The directory is opened once by [`open_shared_dir`]'s walk (no symlinked component;
/// each of root or the effective user, writable by no one else unless sticky, then no one
/// else can rename or remove this file) and used only through that descriptor. A file
/// already at `path` must be a regular file of the effective user: another program's file
/// (or a symlink, a directory) of that name is never replaced. The contents go to
/// `.<name>.<pid>.tmp` created anew (`O_CREAT | O_EXCL | O_NOFOLLOW`; a leftover of that
/// name is unlinked first, never followed: a dot file, which NFD's `local` source skips
/// while it is written), are synced, then `renameat(2)`-ed over `name`. Leftovers of that
/// pattern (`.<name>.<pid>.tmp`) of killed writers are removed first
/// ([`reclaim_temp_files`]).
///
/// # Errors
/// `PermissionDenied` naming the owner and mode for a directory or file refused as above;
/// `InvalidInput` for a path without a file name or one starting with `.`; the system
/// calls' errors (the temporary file is removed).
pub fn replace_shared(path: impl AsRef<Path>, contents: &[u8], mode: u32) -> io::Result<()> {
    use nix::fcntl::{AtFlags, OFlag, openat, renameat};
    use nix::sys::stat::{Mode, SFlag, fchmod, fstatat};
    use nix::unistd::{UnlinkatFlags, unlinkat};
    use std::io::Write as _;

    let path = path.as_ref();
    let (dir, name) = dir_and_name(path)?;
    if name.starts_with('.') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: not a file name (a dot file is hidden from readers)",
                path.display()
            ),
        ));
    }
    let dfd = open_shared_dir(dir)?;
    let euid = nix::unistd::geteuid().as_raw();
    match fstatat(&dfd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(old)
            if old.st_uid != euid
                || old.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFREG.bits() =>
        {
            return Err(refused(
                path,
                &format!(
                    "a file of mode {:06o} owned by uid {}",
                    old.st_mode, old.st_uid
                ),
                &format!("only a regular file of uid {euid} is replaced"),
            ));
        }
        Ok(_) | Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(errno_err(e)),
    }
    reclaim_temp_files(&dfd, &format!(".{name}."));
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    let _ = unlinkat(&dfd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    let written = (|| {
        let fd = openat(
            &dfd,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode & 0o777),
        )
        .map_err(errno_err)?;
        // the mode as asked, whatever the umask
        fchmod(&fd, Mode::from_bits_truncate(mode & 0o777)).map_err(errno_err)?;
        let mut file = File::from(fd);
        // held until the rename: a live writer's file is never reclaimed
        file.try_lock().map_err(io::Error::from)?;
        file.write_all(contents)?;
        file.sync_data()?;
        renameat(&dfd, tmp.as_str(), &dfd, name).map_err(errno_err)
    })();
    if written.is_err() {
        let _ = unlinkat(&dfd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    written
}

/// One non-blocking `flock(2)` of `file`: `true` when taken, `false` when another open
/// file description holds a conflicting lock.
///
/// # Errors
/// The system call's other errors.
pub fn try_lock_file(file: &File, exclusive: bool) -> io::Result<bool> {
    let r = if exclusive {
        file.try_lock()
    } else {
        file.try_lock_shared()
    };
    match r {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// How old an unlocked temporary file of a live pid must be to be taken for a killed
/// writer's ([`reclaim_temp_files`]): a writer renames its file milliseconds after making
/// it, and holds its lock meanwhile.
pub const TEMP_FILE_MAX_AGE: Duration = Duration::from_mins(1);

/// The pid a writer's temporary file names: the digits between the last `.` or `-` and the
/// final `.tmp` of a dot file (`.txn-os-1234.tmp`, `.os-classes.1234.tmp`), the names
/// [`crate::runfile::RunFile::create`], [`crate::runfile::write_run_file`] and [`replace_shared`] give them.
pub(crate) fn temp_file_pid(name: &str) -> Option<i32> {
    let stem = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let start = stem.rfind(['.', '-'])? + 1;
    let digits = &stem[start..];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|p| *p > 0)
}

/// Removes the temporary files killed writers left in the directory `dir` (a descriptor
/// of a verified directory: a [`crate::runfile::RunDir`]'s, or [`open_shared_dir`]'s): the dot
/// files named `<prefix>...<pid>.tmp` (`prefix` starts with `.`; `"."` for all of a run
/// directory's) whose writer is gone. A writer holds an exclusive `flock` on its temporary
/// file until it renames it, so a file whose lock is held is always left; one whose lock
/// is free goes when its pid has ended (`kill(pid, 0)`: `ESRCH`, or `EPERM`: a process of
/// another user, which cannot be the writer of a file of the effective user here) or, the
/// pid living (reused by another process), when the file is older than
/// [`TEMP_FILE_MAX_AGE`]. This process's own, another user's file, a symlink (never
/// followed) and anything but a regular file are left. A writer that is SIGKILLed between making its temporary file and renaming it
/// leaves one; the next writer in the directory takes it away. Best effort: what cannot be
/// listed or removed is logged at debug level and left.
///
/// # Examples
/// ```
/// use std::os::fd::AsFd;
/// let dir = tempfile::tempdir().unwrap();
/// // pid 2^22 + 1 is above the kernel's pid_max: no such process
/// let left = dir.path().join(".txn-os-4194305.tmp");
/// std::fs::write(&left, "half").unwrap();
/// let fd = rdt_host::file::open_shared_dir(dir.path()).unwrap();
/// rdt_host::file::reclaim_temp_files(&fd, ".");
/// assert!(!left.exists());
/// ```
pub fn reclaim_temp_files(dir: &impl std::os::fd::AsFd, prefix: &str) {
    let Ok(dup) = dir.as_fd().try_clone_to_owned() else {
        return;
    };
    let mut listing = match nix::dir::Dir::from_fd(dup) {
        Ok(d) => d,
        Err(e) => {
            log::debug!("reclaiming temporary files: listing: {e}");
            return;
        }
    };
    let me = std::process::id();
    let euid = nix::unistd::geteuid().as_raw();
    let names: Vec<String> = listing
        .iter()
        .filter_map(Result::ok)
        .filter_map(|e| {
            std::str::from_utf8(e.file_name().to_bytes())
                .ok()
                .map(str::to_owned)
        })
        .filter(|n| n.starts_with(prefix))
        .collect();
    for name in names {
        let Some(pid) = temp_file_pid(&name) else {
            continue;
        };
        if u32::try_from(pid).is_ok_and(|p| p == me) {
            continue;
        }
        let Ok(fd) = nix::fcntl::openat(
            dir,
            name.as_str(),
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_NONBLOCK
                | nix::fcntl::OFlag::O_NOCTTY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        ) else {
            continue; // a symlink (ELOOP), gone meanwhile
        };
        let file = File::from(fd);
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() || std::os::unix::fs::MetadataExt::uid(&meta) != euid {
            continue;
        }
        // The writer holds its temporary file's lock from making it to renaming it.
        if !try_lock_file(&file, true).unwrap_or(false) {
            continue;
        }
        let pid_gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH | nix::errno::Errno::EPERM)
        );
        // A live pid that is not the writer (reused): the lock is free and the file old.
        let stale = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= TEMP_FILE_MAX_AGE);
        if !pid_gone && !stale {
            continue;
        }
        match nix::unistd::unlinkat(dir, name.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) => log::debug!("removed {name}, left by process {pid}, which has ended"),
            Err(e) => log::debug!("reclaiming {name}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::cpuid::CpuidDumpFromPath;
    use crate::topology::TopologyFromSysfs;

    #[test]
    fn a_symlink_to_dev_zero_is_refused_before_reading() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("cpulist");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        // act
        let e = read_text(&link, MAX_KERNEL_TEXT_BYTES).unwrap_err();
        // assert
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "a character device is not read: expected a regular file"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let start = Instant::now();
        let e = read_text(&fifo, 16).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(2));
        assert!(e.to_string().contains("a FIFO"), "{e}");
    }

    #[test]
    fn a_file_over_the_limit_is_too_large_and_non_utf8_is_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_text(&f, 10).unwrap(), "0123456789");
        let e = read_text(&f, 9).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            e.to_string(),
            "10 bytes or more, more than the 9 bytes allowed"
        );
        std::fs::write(&f, b"\xff\n").unwrap();
        assert_eq!(
            read_text(&f, 9).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    /// The readers of this crate that go through this module (sysfs topology, CPUID dumps)
    /// refuse what it refuses, without blocking.
    #[test]
    fn sysfs_and_dump_readers_refuse_fifos_and_devices_without_blocking() {
        // arrange: `cpu/online` a FIFO (open(2) blocked forever), a dump linked to /dev/zero
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/cpu")).unwrap();
        let online = dir.path().join("sys/cpu/online");
        nix::unistd::mkfifo(&online, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let dump = dir.path().join("dump.txt");
        std::os::unix::fs::symlink("/dev/zero", &dump).unwrap();
        let start = Instant::now();
        // act
        let topo = rdt_core::Topology::from_sysfs(dir.path().join("sys")).unwrap_err();
        let dump = rdt_core::CpuidDump::from_path(&dump).unwrap_err();
        // assert
        assert!(start.elapsed() < Duration::from_secs(2));
        let chain = rdt_core::error_chain(&topo);
        assert!(
            chain.contains("online") && chain.contains("a FIFO"),
            "{chain}"
        );
        let chain = rdt_core::error_chain(&dump);
        assert!(
            chain.contains("dump.txt") && chain.contains("a character device"),
            "{chain}"
        );
    }

    #[test]
    fn a_procfs_file_of_size_zero_is_read_up_to_the_limit_only() {
        // /proc/self/maps reports size 0 and has more than 16 bytes.
        let e = read_regular(Path::new("/proc/self/maps"), 16, false).unwrap_err();
        assert!(
            matches!(e, ReadError::TooLarge { size: 17, max: 16 }),
            "{e:?}"
        );
    }

    #[test]
    fn replace_shared_writes_whole_files_never_through_a_symlink() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // arrange: a features.d of root's (mode 0755), a planted symlink at the temporary name
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let tmp = format!(".rdt.{}.tmp", std::process::id());
        std::os::unix::fs::symlink(&victim, d.join(&tmp)).unwrap();
        // act
        replace_shared(d.join("rdt"), b"a=1\n", 0o644).unwrap();
        replace_shared(d.join("rdt"), b"a=2\n", 0o644).unwrap();
        // assert: replaced whole, mode as asked, the symlink's target untouched, no leftover
        assert_eq!(std::fs::read_to_string(d.join("rdt")).unwrap(), "a=2\n");
        assert_eq!(
            std::fs::metadata(d.join("rdt")).unwrap().mode() & 0o777,
            0o644
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!d.join(&tmp).exists());
        assert_eq!(
            std::fs::metadata(d).unwrap().mode() & 0o777,
            0o755,
            "a shared directory keeps its mode"
        );
    }

    #[test]
    fn replace_shared_refuses_unsafe_directories_and_other_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // a directory anyone may write to, not sticky
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = replace_shared(open.join("rdt"), b"x", 0o644).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("mode 0777"), "{e}");
        // ... sticky is fine
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        replace_shared(open.join("rdt"), b"x", 0o644).unwrap();
        // the directory through a symlink
        std::os::unix::fs::symlink(&open, d.join("link")).unwrap();
        assert!(replace_shared(d.join("link/rdt"), b"x", 0o644).is_err());
        // a symlink or a directory at the name is not replaced
        std::os::unix::fs::symlink("/etc/passwd", d.join("planted")).unwrap();
        let e = replace_shared(d.join("planted"), b"x", 0o644).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        std::fs::create_dir(d.join("sub")).unwrap();
        assert!(replace_shared(d.join("sub"), b"x", 0o644).is_err());
        // a dot name
        let e = replace_shared(d.join(".hidden"), b"x", 0o644).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    /// `rdt-agent --events`'s opener: a FIFO (with a reader or without), a device, a
    /// symlink, a symlinked parent directory, another user's file are refused at once,
    /// naming the path; a file of ours is appended to.
    #[test]
    fn open_append_shared_refuses_fifos_devices_links_and_others_files_without_blocking() {
        use std::io::Write as _;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("events.fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let start = Instant::now();
        // act + assert: a FIFO without a reader (open(2) would block without O_NONBLOCK
        // for a reader; for a writer it fails with ENXIO), then with one
        let e = open_append_shared(&fifo, 0o640).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(
            e.to_string().contains(&*fifo.to_string_lossy()) && e.to_string().contains("a FIFO"),
            "{e}"
        );
        let reader = open_nonblocking(&fifo, true).unwrap();
        let e = open_append_shared(&fifo, 0o640).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        drop(reader);
        assert!(start.elapsed() < Duration::from_secs(2));
        // a device, through its own path
        let e = open_append_shared("/dev/null", 0o640).unwrap_err();
        assert!(
            e.to_string().contains("/dev/null: a character device"),
            "{e}"
        );
        // a symlink at the name, to a file of ours
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("link")).unwrap();
        let e = open_append_shared(d.join("link"), 0o640).unwrap_err();
        assert!(e.to_string().contains("a symbolic link"), "{e}");
        // a symlinked parent directory
        let real = d.join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, d.join("linked")).unwrap();
        let e = open_append_shared(d.join("linked/events"), 0o640).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("{}: a symbolic link", d.join("linked").display())),
            "{e}"
        );
        assert!(
            !real.join("events").exists(),
            "nothing made through the link"
        );
        // a directory others may write to (not sticky)
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = open_append_shared(open.join("events"), 0o640).unwrap_err();
        assert!(e.to_string().contains("mode 0777"), "{e}");
        // another user's file (nobody's)
        let theirs = d.join("theirs");
        std::fs::write(&theirs, "theirs").unwrap();
        nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let e = open_append_shared(&theirs, 0o640).unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        // ours: made 0640 whatever the umask, appended to
        let ours = d.join("events");
        open_append_shared(&ours, 0o640)
            .unwrap()
            .write_all(b"a\n")
            .unwrap();
        open_append_shared(&ours, 0o640)
            .unwrap()
            .write_all(b"b\n")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&ours).unwrap(), "a\nb\n");
        assert_eq!(std::fs::metadata(&ours).unwrap().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    /// `replace_shared` reclaims the temporary file a killed writer left (its pid gone),
    /// and leaves a live process's and another file's.
    #[test]
    fn replace_shared_reclaims_a_killed_writers_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let live = d.join(format!(".rdt.{}.tmp", child.id()));
        std::fs::write(&live, "being written").unwrap();
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        dead.wait().unwrap();
        let left = d.join(format!(".rdt.{}.tmp", dead.id()));
        std::fs::write(&left, "half").unwrap();
        let other = d.join(format!(".other.{}.tmp", dead.id()));
        std::fs::write(&other, "another file's").unwrap();
        replace_shared(d.join("rdt"), b"a=1\n", 0o644).unwrap();
        assert!(!left.exists(), "the killed writer's file is reclaimed");
        assert!(live.exists(), "a live writer's file stays");
        assert!(
            other.exists(),
            "another name's temporary file stays (a shared directory)"
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}

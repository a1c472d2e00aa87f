//! Files a process keeps in a run directory for as long as it lives, and the bounded wait
//! for a `flock(2)`.
//!
//! A [`RunFile`] is `<dir>/<prefix><pid>`, written whole (under a temporary name, locked
//! with an exclusive `flock`, synced, then renamed) and kept locked until the process drops
//! it or ends. The kernel drops a `flock` with the last file descriptor, on SIGKILL too, so
//! a process that can take the lock of such a file knows its writer has ended:
//! [`dead_run_files`] finds those, locked for the caller, so that the next process to open
//! the platform can finish or undo what a killed one left (RMIDs it gave CPUs, a
//! transaction it did not complete). Nothing here trusts the pid in the name: liveness is
//! the lock alone, so a reused pid changes nothing.
//!
//! Hostile directories are expected (a run directory another user made or planted a
//! symlink in, a mistaken `chmod`): the directory itself is verified and then used only
//! through its descriptor ([`RunDir`]: a real directory of the effective user, mode 0700),
//! files in it are opened relative to that descriptor with `O_NOFOLLOW` (new ones with
//! `O_EXCL`, under a temporary name, renamed into place), anything that is not a regular
//! file is skipped, reads are bounded, and a file replaced between the listing and the
//! lock is skipped. Nothing in the workspace writes a run file any other way.

mod dir;

use std::fs::{File, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use dir::{HOST_RUN_DIR, RunDir, RunDirPath, UnsafeRunDir, remove_if_unused, sysroot_run_dir};

/// How long a writer waits for another process's lock by default (the resctrl root's
/// `flock`, the MSR interface's `msr.lock`).
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Waiting for a `flock` took longer than allowed.
#[derive(Debug, thiserror::Error)]
pub enum LockWaitError {
    /// Another holder kept the lock for the whole wait.
    #[error("another process held the lock for {waited:?}")]
    Timeout {
        /// How long this process waited.
        waited: Duration,
    },
    /// `flock(2)` failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

pub use crate::file::{TEMP_FILE_MAX_AGE, reclaim_temp_files, try_lock_file};

/// Takes `file`'s `flock` (exclusive or shared), trying again with a growing pause (1 ms
/// doubling to 50 ms) until `timeout` has passed.
///
/// # Errors
/// [`LockWaitError::Timeout`] when another holder kept it that long;
/// [`LockWaitError::Io`] when `flock(2)` fails otherwise.
pub fn lock_with_timeout(
    file: &File,
    exclusive: bool,
    timeout: Duration,
) -> Result<(), LockWaitError> {
    wait_for_lock(|| try_lock_file(file, exclusive), timeout)
}

/// The bounded wait of [`lock_with_timeout`] for any lock: calls `try_once` (`Ok(true)`:
/// taken, `Ok(false)`: held by another) with a growing pause (1 ms doubling to 50 ms) until
/// it succeeds or `timeout` has passed. For locks that are not a `File`'s `flock` (a
/// filesystem seam's, an in-process model's).
///
/// # Errors
/// [`LockWaitError::Timeout`] when another holder kept it that long;
/// [`LockWaitError::Io`] when `try_once` fails.
pub fn wait_for_lock(
    mut try_once: impl FnMut() -> io::Result<bool>,
    timeout: Duration,
) -> Result<(), LockWaitError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        if try_once()? {
            return Ok(());
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(LockWaitError::Timeout { waited });
        }
        std::thread::sleep(pause.min(timeout.saturating_sub(waited)));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Runs `f` in the run directory at `dir`, made and verified ([`RunDir::create`]); again
/// (up to three times) when `f` fails because the directory was removed meanwhile (an
/// unused run directory is removed when its last user goes, [`remove_if_unused`]).
///
/// # Errors
/// [`RunDir::create`]'s; `f`'s.
fn in_run_dir<T>(dir: &Path, mut f: impl FnMut(&RunDir) -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        let d = RunDir::create(dir)?;
        d.reclaim_temp_files();
        match f(&d) {
            Err(e) if tries < 2 && d.is_removed() => {
                tries += 1;
                log::debug!(
                    "run directory {} removed meanwhile ({e}); again",
                    d.path().display()
                );
            }
            r => return r,
        }
    }
}

/// Splits a run file's path into its directory and its name.
fn dir_and_name(path: &Path) -> io::Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a run file's path", path.display()),
        )
    })?;
    Ok((path.parent().unwrap_or(Path::new(".")), name))
}

/// Reads a file of the run directory: the directory verified ([`RunDir::open`]), the file
/// not through a symlink, not a FIFO or device (an `InvalidData` error), at most
/// `max_bytes` (more is an `InvalidData` error), UTF-8.
///
/// # Errors
/// Open and read errors (`NotFound` for a missing file or directory); `InvalidData` as
/// above; `PermissionDenied` ([`UnsafeRunDir`]) for a directory that is not safe.
pub fn read_run_file(path: impl AsRef<Path>, max_bytes: u64) -> io::Result<String> {
    let (dir, name) = dir_and_name(path.as_ref())?;
    let dir = RunDir::open(dir)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
    read_in(&dir, name, max_bytes)
}

/// [`read_run_file`] of `name` in the verified `dir`.
fn read_in(dir: &RunDir, name: &str, max_bytes: u64) -> io::Result<String> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let file = dir.open_file(name, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
    let bytes = crate::file::read_opened(&file, max_bytes).map_err(|e| match e {
        crate::file::ReadError::Open(e) | crate::file::ReadError::Io(e) => e,
        crate::file::ReadError::NotRegular(_) => invalid("not a regular file".into()),
        crate::file::ReadError::TooLarge { size, .. } => {
            invalid(format!("{size} bytes or more, more than {max_bytes}"))
        }
    })?;
    String::from_utf8(bytes).map_err(|e| invalid(e.to_string()))
}

/// Replaces the file `name` of the run directory `dir` with `contents`, atomically: a
/// reader sees the old file or the new one, never a part. The directory is made (0700) and
/// verified as [`RunDir::create`] does; the contents go to a temporary file created anew
/// (never through a leftover or a planted symlink), synced, then renamed over `name`.
///
/// # Errors
/// [`RunDir::create`]'s; the write's (the temporary file is removed).
pub fn write_run_file(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    in_run_dir(dir, |d| {
        let made = (|| {
            let mut f = d.create_new(&tmp)?;
            // held until the rename: a live writer's file is never reclaimed
            f.try_lock().map_err(io::Error::from)?;
            f.write_all(contents)?;
            f.sync_data()?;
            d.rename(&tmp, name)
        })();
        if made.is_err() {
            let _ = d.unlink(&tmp);
        }
        made
    })
}

/// Removes the file `name` of the run directory `dir`; a file or directory that is not
/// there is not an error.
///
/// # Errors
/// [`RunDir::open`]'s; `unlink(2)`'s but `ENOENT`.
pub fn remove_run_file(dir: &Path, name: &str) -> io::Result<()> {
    let Some(d) = RunDir::open(dir)? else {
        return Ok(());
    };
    match d.unlink(name) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// An exclusive `flock` on a lock file, held re-entrantly: [`WriterLock::hold`] takes it
/// on the first call and counts nested calls, [`WriterLock::release`] gives it back with
/// the last. The file (mode 0600, its directory 0700) is opened at the first hold.
#[derive(Debug)]
pub struct WriterLock {
    path: PathBuf,
    timeout: Duration,
    file: Option<File>,
    depth: u32,
}

impl WriterLock {
    /// A lock on `path` (not opened yet), waiting at most `timeout` for another holder.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, timeout: Duration) -> Self {
        Self {
            path: path.into(),
            timeout,
            file: None,
            depth: 0,
        }
    }

    /// The lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Changes how long [`WriterLock::hold`] waits.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Takes the lock, or counts one more hold if this process has it.
    ///
    /// # Errors
    /// [`LockWaitError::Timeout`] when another process kept it for the whole timeout;
    /// [`LockWaitError::Io`] when the file cannot be created or locked.
    pub fn hold(&mut self) -> Result<(), LockWaitError> {
        if self.depth == 0 {
            let start = Instant::now();
            loop {
                let (dir, name) = dir_and_name(&self.path)?;
                let taken = in_run_dir(dir, |d| {
                    let file = match self.file.take() {
                        Some(f) => f,
                        None => d.open_file(
                            name,
                            libc::O_RDWR | libc::O_CREAT | libc::O_NONBLOCK,
                            0o600,
                        )?,
                    };
                    let meta = file.metadata()?;
                    if !meta.is_file() {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "{}: {}, not a lock file",
                                self.path.display(),
                                crate::file::kind_of(meta.file_type())
                            ),
                        ));
                    }
                    let left = self.timeout.saturating_sub(start.elapsed());
                    Ok(match lock_with_timeout(&file, true, left) {
                        Ok(()) => Ok((d.names(name, &file), file)),
                        Err(e) => Err(e),
                    })
                })??;
                let (named, file) = taken;
                if named {
                    self.file = Some(file);
                    break;
                }
                // The lock file was removed (an unused run directory went away) while this
                // process waited: the lock taken is on nothing; take the new one.
                drop(file);
            }
        }
        self.depth += 1;
        Ok(())
    }

    /// Gives back one hold; the lock goes with the last.
    pub fn release(&mut self) {
        match self.depth {
            0 => {}
            1 => {
                self.depth = 0;
                if let Some(f) = &self.file {
                    let _ = f.unlock();
                }
            }
            _ => self.depth -= 1,
        }
    }

    /// Whether this process holds it.
    #[must_use]
    pub const fn is_held(&self) -> bool {
        self.depth > 0
    }
}

/// This process's `<dir>/<prefix><pid>`, locked while it exists.
#[derive(Debug)]
pub struct RunFile {
    path: PathBuf,
    dir: RunDir,
    name: String,
    file: File,
}

impl RunFile {
    /// Writes `contents` to `<dir>/<prefix><pid of this process>` whole: a temporary file
    /// is created (mode 0600), locked, written and synced, then renamed into place, so a
    /// reader sees either no file or all of it. `dir` is made (0700) and verified first
    /// ([`RunDir::create`]); the temporary file is new (`O_EXCL`, a leftover or planted
    /// symlink of its name unlinked, never followed) and renamed relative to the verified
    /// directory.
    ///
    /// # Errors
    /// Any file system error (the temporary file is removed); `PermissionDenied`
    /// ([`UnsafeRunDir`]) for a directory that is not safe.
    pub fn create(dir: impl AsRef<Path>, prefix: &str, contents: &[u8]) -> io::Result<Self> {
        let pid = std::process::id();
        let name = format!("{prefix}{pid}");
        let tmp = format!(".{prefix}{pid}.tmp");
        let (dir, file) = in_run_dir(dir.as_ref(), |d| {
            let made = (|| -> io::Result<File> {
                let mut f = d.create_new(&tmp)?;
                f.try_lock().map_err(io::Error::from)?;
                f.write_all(contents)?;
                f.sync_data()?;
                d.rename(&tmp, &name)?;
                Ok(f)
            })();
            if made.is_err() {
                let _ = d.unlink(&tmp);
            }
            Ok((d.try_clone()?, made?))
        })?;
        Ok(Self {
            path: dir.join(&name),
            dir,
            name,
            file,
        })
    }

    /// Replaces the contents in place, synced. (A reader that takes the lock only after
    /// this process ended never sees a partial rewrite.)
    ///
    /// # Errors
    /// Write or sync errors.
    pub fn rewrite(&mut self, contents: &[u8]) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.write_all_at(contents, 0)?;
        self.file.sync_data()
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file (then drops its lock).
    ///
    /// # Errors
    /// `unlink(2)` errors.
    pub fn remove(self) -> io::Result<()> {
        self.dir.unlink(&self.name)
    }
}

/// The most of a record of named classes read: a line per class is far below this.
const MAX_NAME_RECORD_BYTES: u64 = 1 << 20;

/// A record of named classes in a run directory, `<dir>/<file>`: one `<class> <name>` line
/// per named class ([`rdt_core::BackendExt::class_named`]), so that a name outlives the process
/// that applied it. The MSR interface keeps in `msr-classes` the class of service of every
/// name it was given; the OS interface keeps in `os-classes` the resctrl groups of named
/// classes it created (the number there is the class the name stood for, which it keeps
/// while no `COS<n>` group takes it). One format, one reader and one writer for both.
///
/// Hostile or damaged records are expected: the file is read through [`read_run_file`] (no
/// symlink, FIFO or device; at most 1 MiB; UTF-8), and lines that do not parse are skipped,
/// as are names that are empty, longer than 255 bytes or hold whitespace, a control
/// character or `/`, and a second line for a name (the first one counts; two names of one
/// class are kept, for the caller to judge). A
/// record is written whole: a temporary file is created next to it (`O_CREAT | O_EXCL |
/// O_NOFOLLOW`, mode 0600, a leftover of that name unlinked first, never followed), written,
/// synced and renamed over the record, so a reader sees the old record or the new one, and
/// a symlink planted in the record's place is replaced, never written through. An empty
/// record is removed.
///
/// The record has no lock of its own: callers hold their interface's writers' lock
/// ([`rdt_core::BackendExt::hold_writers`]) around [`NameRecord::update`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameRecord {
    dir: PathBuf,
    file: String,
}

impl NameRecord {
    /// The record `<dir>/<file>` (nothing is read or made yet).
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>, file: &str) -> Self {
        Self {
            dir: dir.into(),
            file: file.to_owned(),
        }
    }

    /// The record's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.file)
    }

    /// Whether `name` can be recorded (and so is kept when read): 1 to 255 bytes, no
    /// whitespace, control character or `/` ([`rdt_core::transaction::is_recordable_name`],
    /// which the planner checks too).
    #[must_use]
    pub fn is_recordable(name: &str) -> bool {
        rdt_core::transaction::is_recordable_name(name)
    }

    /// The named classes recorded, in file order; a record that does not exist holds none.
    ///
    /// # Errors
    /// The record cannot be opened or read, is a symlink, not a regular file, larger than
    /// 1 MiB or not UTF-8 ([`read_run_file`]).
    pub fn read(&self) -> io::Result<Vec<(rdt_core::ClassId, String)>> {
        match read_run_file(self.path(), MAX_NAME_RECORD_BYTES) {
            Ok(text) => Ok(Self::parse(&text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// [`NameRecord::read`], with a record that cannot be read logged (`WARN`) and taken as
    /// empty: a damaged record must not stop the platform from being used or reset.
    #[must_use]
    pub fn read_or_empty(&self) -> Vec<(rdt_core::ClassId, String)> {
        self.read().unwrap_or_else(|e| {
            log::warn!(
                "the record of named classes {} is not read ({e}); taken as empty",
                self.path().display()
            );
            Vec::new()
        })
    }

    /// The `<class> <name>` lines of `text` that parse, each name once.
    fn parse(text: &str) -> Vec<(rdt_core::ClassId, String)> {
        let mut out: Vec<(rdt_core::ClassId, String)> = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            let Some((class, name)) = line.split_once(' ') else {
                continue;
            };
            let Ok(class) = class.parse::<u32>() else {
                continue;
            };
            let (class, name) = (rdt_core::ClassId::new(class), name.trim());
            if Self::is_recordable(name) && !out.iter().any(|(_, n)| n == name) {
                out.push((class, name.to_owned()));
            }
        }
        out
    }

    /// Replaces the record with `names` (removes it when `names` is empty); the run
    /// directory is made (0700) if needed. Names that cannot be recorded are left out.
    ///
    /// # Errors
    /// Any file system error (the temporary file is removed).
    pub fn write(&self, names: &[(rdt_core::ClassId, String)]) -> io::Result<()> {
        let path = self.path();
        let kept: Vec<&(rdt_core::ClassId, String)> = names
            .iter()
            .filter(|(_, n)| Self::is_recordable(n))
            .collect();
        if kept.is_empty() {
            return remove_run_file(&self.dir, &self.file);
        }
        let mut text =
            String::from("# named classes (<class> <name>); rdt, crates/rdt-core/src/runfile.rs\n");
        for (class, name) in kept {
            text.push_str(&format!("{class} {name}\n"));
        }
        write_run_file(&self.dir, &self.file, text.as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// Reads the record ([`NameRecord::read_or_empty`]), lets `f` change the list, and
    /// writes it back when `f` changed it; returns what `f` returned. Hold the writers' lock.
    ///
    /// # Errors
    /// As [`NameRecord::write`].
    pub fn update<T>(
        &self,
        f: impl FnOnce(&mut Vec<(rdt_core::ClassId, String)>) -> T,
    ) -> io::Result<T> {
        let before = self.read_or_empty();
        let mut names = before.clone();
        let out = f(&mut names);
        if names != before || (names.is_empty() && self.read().is_err()) {
            self.write(&names)?;
        }
        Ok(out)
    }
}

/// A run file whose writer has ended, locked by this process until dropped.
#[derive(Debug)]
pub struct DeadRunFile {
    /// The pid in its name (the process that wrote it; it no longer holds the lock).
    pub pid: u32,
    /// Its path.
    pub path: PathBuf,
    /// Its contents, at most the `max_bytes` asked for.
    pub text: String,
    dir: Arc<RunDir>,
    name: String,
    _file: File,
}

impl DeadRunFile {
    /// Removes the file (its work is done), then drops the lock.
    ///
    /// # Errors
    /// `unlink(2)` errors.
    pub fn remove(self) -> io::Result<()> {
        self.dir.unlink(&self.name)
    }
}

/// The files `<dir>/<prefix><pid>` whose writer has ended (their `flock` is free), each
/// locked for the caller. Skipped: names without a decimal pid, symlinks, anything not a
/// regular file, files longer than `max_bytes` or not UTF-8 (left in place: not ours), and
/// a file replaced or removed between the listing and the lock (someone else handled it).
/// A directory that does not exist holds none.
///
/// # Errors
/// The directory cannot be listed.
pub fn dead_run_files(
    dir: impl AsRef<Path>,
    prefix: &str,
    max_bytes: u64,
) -> io::Result<Vec<DeadRunFile>> {
    let pid_of = |name: &str| {
        name.strip_prefix(prefix)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
    };
    Ok(scan_run_files(dir, pid_of, max_bytes)?.dead)
}

/// What [`scan_run_files`] found in a run directory.
#[derive(Debug, Default)]
pub struct RunFileScan {
    /// The files whose writer has ended, sorted by pid, each locked for the caller until
    /// dropped (as [`dead_run_files`] gives them).
    pub dead: Vec<DeadRunFile>,
    /// The files whose lock another open file holds (their writer lives), with the pid of
    /// their name.
    pub live: Vec<(u32, PathBuf)>,
    /// The entries with a run file's name that are not run files, left in place, each with
    /// the reason: a symlink (not followed), a FIFO or other non-regular file (not opened
    /// for reading), more than `max_bytes`, not UTF-8.
    pub skipped: Vec<(PathBuf, String)>,
}

/// The entries of `dir` whose name `pid_of` accepts (it returns the writer's pid from the
/// name, `None` for a name that is not a run file), sorted into dead, live and skipped
/// ([`RunFileScan`]); for run files named other than `<prefix><pid>` (several files of one
/// process, told apart by a key in the name). A file replaced or removed between the
/// listing and the lock is in none of the lists (someone else handled it). A directory
/// that does not exist holds none.
///
/// # Errors
/// The directory cannot be listed; `PermissionDenied` ([`UnsafeRunDir`]) when it is not
/// safe ([`RunDir::open`]).
pub fn scan_run_files(
    dir: impl AsRef<Path>,
    pid_of: impl Fn(&str) -> Option<u32>,
    max_bytes: u64,
) -> io::Result<RunFileScan> {
    let Some(dir) = RunDir::open(dir)? else {
        return Ok(RunFileScan::default());
    };
    let dir = Arc::new(dir);
    let mut out = RunFileScan::default();
    for name in dir.names_in()? {
        let Some(pid) = pid_of(&name) else {
            continue;
        };
        let path = dir.join(&name);
        // O_NOFOLLOW: a planted symlink is not followed; O_NONBLOCK: a FIFO does not block
        // the open (it is then skipped as not a regular file).
        let file = match dir.open_file(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                out.skipped
                    .push((path, "a symbolic link (not followed)".into()));
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // handled meanwhile
            Err(e) => {
                out.skipped.push((path, format!("cannot be opened: {e}")));
                continue;
            }
        };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() {
            out.skipped
                .push((path, crate::file::kind_of(meta.file_type()).to_owned()));
            continue;
        }
        if meta.len() > max_bytes {
            let why = format!("{} bytes, more than {max_bytes}", meta.len());
            out.skipped.push((path, why));
            continue;
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                out.live.push((pid, path));
                continue;
            }
            Err(TryLockError::Error(e)) => {
                out.skipped.push((path, format!("cannot be locked: {e}")));
                continue;
            }
        }
        // Still the file the directory names? (Another process may have handled and
        // removed it, and a new one taken the name, between the open and the lock.)
        if !dir.names(&name, &file) {
            continue;
        }
        let mut text = String::new();
        if let Err(e) = (&file).take(max_bytes).read_to_string(&mut text) {
            out.skipped.push((path, format!("not text: {e}")));
            continue;
        }
        out.dead.push(DeadRunFile {
            pid,
            path,
            text,
            dir: Arc::clone(&dir),
            name,
            _file: file,
        });
    }
    out.dead.sort_by_key(|d| d.pid);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    /// A writer SIGKILLed between making its temporary file and renaming it: while it
    /// lives (holding the file's lock) the file stays; once it is killed, the next write in
    /// the run directory takes it away. Another user's file of that pattern stays.
    #[test]
    fn a_killed_writers_temporary_file_is_reclaimed_by_the_next_write() {
        // arrange: a child that makes `.txn-os-<its pid>.tmp`, locks it as RunFile::create
        // does, and waits to be killed
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        write_run_file(&run, "os-classes", b"").unwrap();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3>\"$1/.txn-os-$$.tmp\" && flock -x 3 && echo ready && exec sleep 60")
            .arg("sh")
            .arg(&run)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready, "ready\n");
        let tmp = run.join(format!(".txn-os-{}.tmp", child.id()));
        assert!(tmp.exists());
        let theirs = run.join(".os-classes.4194305.tmp");
        fs::write(&theirs, "nobody's").unwrap();
        nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        // act + assert: alive, it stays
        write_run_file(&run, "os-classes", b"a\n").unwrap();
        assert!(tmp.exists(), "a live writer's temporary file stays");
        // killed, the next write reclaims it
        child.kill().unwrap();
        child.wait().unwrap();
        write_run_file(&run, "os-classes", b"b\n").unwrap();
        assert!(
            !tmp.exists(),
            "the killed writer's temporary file is reclaimed"
        );
        assert!(theirs.exists(), "another user's file stays");
        assert_eq!(fs::read_to_string(run.join("os-classes")).unwrap(), "b\n");
        // a pid that lives but is not the writer (reused): the lock is free, the file old
        let mut sleeper = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let old = run.join(format!(".txn-os-{}.tmp", sleeper.id()));
        fs::write(&old, "half").unwrap();
        let f = fs::File::options().write(true).open(&old).unwrap();
        f.set_modified(std::time::SystemTime::now() - TEMP_FILE_MAX_AGE * 2)
            .unwrap();
        drop(f);
        let mine = run.join(format!(".x.{}.tmp", std::process::id()));
        fs::write(&mine, "this process's").unwrap();
        write_run_file(&run, "os-classes", b"c\n").unwrap();
        assert!(
            !old.exists(),
            "an old unlocked file of a reused pid is reclaimed"
        );
        assert!(mine.exists(), "this process's own temporary file stays");
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }

    #[test]
    fn temporary_file_names_give_their_writers_pid() {
        assert_eq!(crate::file::temp_file_pid(".txn-os-1234.tmp"), Some(1234));
        assert_eq!(crate::file::temp_file_pid(".os-classes.77.tmp"), Some(77));
        assert_eq!(crate::file::temp_file_pid(".rdt.5.tmp"), Some(5));
        assert_eq!(
            crate::file::temp_file_pid("txn-os-1234.tmp"),
            None,
            "not a dot file"
        );
        assert_eq!(crate::file::temp_file_pid(".txn-os-.tmp"), None);
        assert_eq!(crate::file::temp_file_pid(".txn-os-12a.tmp"), None);
        assert_eq!(crate::file::temp_file_pid(".x-0.tmp"), None);
        assert_eq!(crate::file::temp_file_pid(".x-99999999999.tmp"), None);
    }

    #[test]
    fn a_live_file_is_not_dead_and_a_released_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let f = RunFile::create(dir.path().join("run"), "x-", b"hello\n").unwrap();
        let run = dir.path().join("run");
        assert_eq!(
            fs::metadata(&run).unwrap().mode() & 0o777,
            0o700,
            "root-only"
        );
        assert!(
            dead_run_files(&run, "x-", 1024).unwrap().is_empty(),
            "alive"
        );
        // the process "dies": its lock goes, its file stays (renamed to another pid)
        let dead_path = run.join("x-4242");
        fs::rename(f.path(), &dead_path).unwrap();
        drop(f);
        // (a child another test forks holds our descriptors, and so the lock, until it execs)
        let mut dead = Vec::new();
        for _ in 0..100 {
            dead = dead_run_files(&run, "x-", 1024).unwrap();
            if !dead.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].pid, dead[0].text.as_str()), (4242, "hello\n"));
        // while this process holds it, a second scan does not hand it out again
        let again = std::thread::scope(|s| {
            s.spawn(|| dead_run_files(&run, "x-", 1024).unwrap().len())
                .join()
                .unwrap()
        });
        assert_eq!(again, 0, "locked by the first scanner");
        dead.into_iter().next().unwrap().remove().unwrap();
        assert!(!dead_path.exists());
    }

    #[test]
    fn hostile_entries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("x-1"), vec![b'a'; 100]).unwrap(); // too long
        fs::write(d.join("x-2"), [0xff, 0xfe]).unwrap(); // not UTF-8
        std::os::unix::fs::symlink("/etc/passwd", d.join("x-3")).unwrap();
        fs::create_dir(d.join("x-4")).unwrap();
        fs::write(d.join("x-"), b"").unwrap();
        fs::write(d.join("x-5a"), b"").unwrap();
        fs::write(d.join("y-6"), b"").unwrap();
        // (mkfifo(3), not the program: a fork would hold other tests' locks for a moment)
        nix::unistd::mkfifo(&d.join("x-7"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let found = dead_run_files(d, "x-", 10).unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert!(
            dead_run_files(d.join("missing"), "x-", 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_scan_sorts_files_with_keyed_names_into_dead_live_and_skipped() {
        // arrange: `k-<key>-<pid>` names; one live, one dead, one symlink, one FIFO
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let live = RunFile::create(d, "k-1-", b"live").unwrap();
        fs::write(d.join("k-2-4242"), b"dead").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.join("k-3-1")).unwrap();
        nix::unistd::mkfifo(&d.join("k-4-1"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::write(d.join("other-5"), b"").unwrap();
        let pid_of = |n: &str| {
            let (_, pid) = n.strip_prefix("k-")?.split_once('-')?;
            pid.parse().ok()
        };
        // act (again while a child another test forks holds the dead file's lock)
        let mut scan = scan_run_files(d, pid_of, 1024).unwrap();
        for _ in 0..100 {
            if !scan.dead.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            scan = scan_run_files(d, pid_of, 1024).unwrap();
        }
        // assert
        assert_eq!(scan.live, [(std::process::id(), live.path().to_owned())]);
        assert_eq!(scan.dead.len(), 1);
        assert_eq!(
            (scan.dead[0].pid, scan.dead[0].text.as_str()),
            (4242, "dead")
        );
        let mut skipped: Vec<(String, String)> = scan
            .skipped
            .iter()
            .map(|(p, why)| (p.file_name().unwrap().to_string_lossy().into(), why.clone()))
            .collect();
        skipped.sort();
        assert_eq!(
            skipped,
            [
                ("k-3-1".into(), "a symbolic link (not followed)".into()),
                ("k-4-1".into(), "a FIFO".into())
            ]
        );
    }

    #[test]
    fn a_name_record_round_trips_and_goes_when_empty() {
        let dir = tempfile::tempdir().unwrap();
        let r = NameRecord::new(dir.path().join("run"), "x-classes");
        assert_eq!(r.read().unwrap(), [], "no record: no names");
        let names = vec![
            (rdt_core::ClassId::new(3), "db".to_owned()),
            (rdt_core::ClassId::new(1), "web".to_owned()),
        ];
        r.write(&names).unwrap();
        assert_eq!(r.read().unwrap(), names);
        assert_eq!(fs::metadata(r.path()).unwrap().mode() & 0o777, 0o600);
        let added = r
            .update(|n| {
                n.push((rdt_core::ClassId::new(2), "batch".into()));
                n.len()
            })
            .unwrap();
        assert_eq!(added, 3);
        assert_eq!(r.read().unwrap().len(), 3);
        r.update(Vec::clear).unwrap();
        assert!(!r.path().exists(), "an empty record is removed");
    }

    #[test]
    fn a_damaged_or_hostile_name_record_reads_what_parses_and_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let r = NameRecord::new(d, "x-classes");
        // lines that do not parse, bad names, repeated classes and names
        let long = "n".repeat(300);
        fs::write(
            r.path(),
            format!(
                "# comment\n1 db\ngarbage\nx web\n2\n3 a/b\n4 {long}\n5 tab\there\n1 other\n6 db\n\
                 \u{0}\u{7f}\n7 ok\n99999999999 big\n"
            ),
        )
        .unwrap();
        assert_eq!(
            r.read().unwrap(),
            [
                (rdt_core::ClassId::new(1), "db".to_owned()),
                (rdt_core::ClassId::new(1), "other".to_owned()),
                (rdt_core::ClassId::new(7), "ok".to_owned())
            ]
        );
        // not UTF-8, too large: an error, read as empty
        fs::write(r.path(), [0xff, 0xfe, b'\n']).unwrap();
        assert!(r.read().is_err());
        assert_eq!(r.read_or_empty(), []);
        // a planted symlink is not read and is replaced, not written through
        let target = d.join("target");
        fs::write(&target, "1 secret\n").unwrap();
        fs::remove_file(r.path()).unwrap();
        std::os::unix::fs::symlink(&target, r.path()).unwrap();
        assert!(r.read().is_err(), "O_NOFOLLOW");
        r.update(|n| n.push((rdt_core::ClassId::new(2), "web".into())))
            .unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "1 secret\n");
        assert!(!fs::symlink_metadata(r.path()).unwrap().is_symlink());
        assert_eq!(
            r.read().unwrap(),
            [(rdt_core::ClassId::new(2), "web".to_owned())]
        );
        // a symlink planted at the temporary name is unlinked, never followed
        let tmp = d.join(format!(".x-classes.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &tmp).unwrap();
        r.write(&[(rdt_core::ClassId::new(4), "db".into())])
            .unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "1 secret\n");
        // a FIFO in its place does not block
        fs::remove_file(r.path()).unwrap();
        nix::unistd::mkfifo(&r.path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(r.read().is_err());
        r.update(Vec::clear).unwrap();
        assert!(
            !r.path().exists(),
            "a damaged record with nothing to keep goes"
        );
    }

    #[test]
    fn a_writer_lock_is_reentrant_and_excludes_other_holders() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/w.lock");
        let mut a = WriterLock::new(&path, Duration::ZERO);
        let mut b = WriterLock::new(&path, Duration::from_millis(10));
        a.hold().unwrap();
        a.hold().unwrap();
        assert!(matches!(b.hold(), Err(LockWaitError::Timeout { .. })));
        a.release();
        assert!(a.is_held() && b.hold().is_err(), "still held once");
        a.release();
        b.hold().unwrap();
        assert!(!a.is_held() && b.is_held());
    }

    #[test]
    fn the_wait_for_a_held_lock_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        lock_with_timeout(&a, true, Duration::ZERO).unwrap();
        let e = lock_with_timeout(&b, false, Duration::from_millis(20)).unwrap_err();
        assert!(
            matches!(e, LockWaitError::Timeout { waited } if waited >= Duration::from_millis(20))
        );
        a.unlock().unwrap();
        lock_with_timeout(&b, false, Duration::ZERO).unwrap();
    }
}

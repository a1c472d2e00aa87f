//! Tasks from procfs (proc(5)): whether a task exists, which threads a task id stands for
//! (pqos `tid_find`), and the CPU a thread last ran on. One injectable root (`/proc` on a
//! host); parsing is separate from I/O ([`status_tgid`], [`stat_processor`]: pure functions
//! of the file's bytes), and every read is bounded.
//!
//! Why not the `procfs`/`procfs-core` crates: this needs two fields (`Tgid:` of `status`,
//! field 39 of `stat`), and procfs-core 0.18's parsers panic on a truncated or malformed
//! `stat` line (`(x) S 1 2`, `1 (x)`: unchecked slicing around the parentheses), report such
//! input as a bug of their own, and require some fifteen `status` fields to be present. The
//! root here is injectable, so its files are not always the kernel's: the two parsers below
//! take any bytes and return `None` for anything that is not what proc(5) describes.
//!
//! # References
//! proc(5): `/proc/pid/status` (`Tgid`), `/proc/pid/stat` (field 39 `processor`),
//! `/proc/pid/task`; intel-cmt-cat `pqos/main.c` (`tid_find`).

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::TaskId;

/// The most of a `status` file read: the kernel's is under 2 KiB; a longer file is cut
/// there (a FIFO or an endless file cannot make a read take memory or time without end).
const MAX_STATUS_BYTES: u64 = 64 * 1024;
/// The size of the buffer a `stat` line is read into (the kernel's is under 400 bytes).
const STAT_BUFFER: usize = 1024;

/// A procfs mount: `/proc` on a host, any directory laid out like it in tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcFs {
    root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        Self::host()
    }
}

impl ProcFs {
    /// The host's procfs.
    pub const DEFAULT_ROOT: &'static str = "/proc";

    /// The host's `/proc`.
    #[must_use]
    pub fn host() -> Self {
        Self::at(Self::DEFAULT_ROOT)
    }

    /// procfs mounted at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, task: TaskId) -> PathBuf {
        self.root.join(task.to_string())
    }

    /// Whether `task` (a process or a thread id; threads are reachable as `/proc/<tid>`
    /// though not listed) exists. Task 0 never does.
    #[must_use]
    pub fn exists(&self, task: TaskId) -> bool {
        task.get() != 0 && self.dir(task).join("stat").exists()
    }

    /// The first of `tasks` that does not exist, if any (pqos: `Requested PID set contains
    /// nonexistent processes (first invalid PID: %lu)`).
    #[must_use]
    pub fn first_missing(&self, tasks: &[TaskId]) -> Option<TaskId> {
        tasks.iter().copied().find(|t| !self.exists(*t))
    }

    /// The thread-group id (`Tgid:` of `<root>/<task>/status`): the process `task` belongs
    /// to.
    ///
    /// # Errors
    /// `NotFound` when the task does not exist; `InvalidData` when `status` has no
    /// well-formed `Tgid:` line; other read errors.
    pub fn thread_group(&self, task: TaskId) -> io::Result<TaskId> {
        if task.get() == 0 {
            return Err(io::ErrorKind::NotFound.into());
        }
        let mut text = Vec::new();
        File::open(self.dir(task).join("status"))?
            .take(MAX_STATUS_BYTES)
            .read_to_end(&mut text)?;
        status_tgid(&text)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "status has no Tgid: line"))
    }

    /// The threads `task` stands for, ascending: every thread of the process when `task` is
    /// a process id (its `Tgid` is itself), else the thread alone (pqos `tid_find`).
    ///
    /// # Errors
    /// `NotFound` when the task does not exist (or exits while it is read); other read
    /// errors.
    pub fn threads(&self, task: TaskId) -> io::Result<Vec<TaskId>> {
        if self.thread_group(task)? != task {
            return Ok(vec![task]);
        }
        let mut tids: Vec<TaskId> = fs::read_dir(self.dir(task).join("task"))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        if tids.is_empty() {
            tids.push(task);
        }
        Ok(tids)
    }

    /// The processes whose command name (`<root>/<pid>/comm`, at most 15 bytes, the name
    /// `ps -o comm` shows) is `name`, ascending. Processes that exit while the list is read
    /// are left out.
    ///
    /// # Errors
    /// `<root>` cannot be listed.
    pub fn processes_named(&self, name: &str) -> io::Result<Vec<TaskId>> {
        let mut pids = Vec::new();
        for entry in fs::read_dir(&self.root)? {
            let Some(pid) = entry
                .ok()
                .and_then(|e| e.file_name().to_str()?.parse::<u32>().ok())
            else {
                continue;
            };
            let mut comm = Vec::with_capacity(16);
            let read = File::open(self.dir(TaskId::new(pid)).join("comm"))
                .and_then(|f| f.take(64).read_to_end(&mut comm));
            if read.is_ok() && comm.strip_suffix(b"\n").unwrap_or(&comm) == name.as_bytes() {
                pids.push(TaskId::new(pid));
            }
        }
        pids.sort_unstable();
        Ok(pids)
    }

    /// The CPU time of task `task` (a process or thread id) so far: `utime + stime` of
    /// `<root>/<task>/stat` ([`stat_cpu_ticks`]), in clock ticks ([`USER_HZ`] per second).
    ///
    /// # Errors
    /// `NotFound` once the task has exited; `InvalidData` for a line that does not parse.
    pub fn cpu_ticks(&self, task: TaskId) -> io::Result<u64> {
        let mut buf = [0u8; STAT_BUFFER];
        let n = File::open(self.dir(task).join("stat"))?.read_at(&mut buf, 0)?;
        stat_cpu_ticks(&buf[..n]).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stat line without utime and stime",
            )
        })
    }

    /// Opens `<root>/<pid>/task/<tid>/stat`, to read the thread's CPU again and again
    /// without opening it each time.
    ///
    /// # Errors
    /// The thread has exited or procfs cannot be read.
    pub fn open_stat(&self, pid: TaskId, tid: TaskId) -> io::Result<ThreadStat> {
        let path = self
            .dir(pid)
            .join("task")
            .join(tid.to_string())
            .join("stat");
        Ok(ThreadStat {
            file: File::open(path)?,
            buf: vec![0; STAT_BUFFER],
        })
    }
}

/// An open `/proc/<pid>/task/<tid>/stat`: one positioned read per [`ThreadStat::last_cpu`]
/// (procfs regenerates the text for every read at offset 0).
#[derive(Debug)]
pub struct ThreadStat {
    file: File,
    buf: Vec<u8>,
}

impl ThreadStat {
    /// The CPU the thread last ran on, read now; `None` once the thread has exited or the
    /// line does not parse.
    pub fn last_cpu(&mut self) -> Option<u32> {
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        stat_processor(&self.buf[..n])
    }
}

/// The `Tgid:` value of a `/proc/<pid>/status` text, if it has a well-formed one.
///
/// # Examples
/// ```
/// use rdt_core::TaskId;
/// use rdt_core::proc::status_tgid;
/// assert_eq!(status_tgid(b"Name:\tsleep\nTgid:\t4242\nPid:\t4243\n"), Some(TaskId::new(4242)));
/// assert_eq!(status_tgid(b"Tgid:\tx\n"), None);
/// ```
#[must_use]
pub fn status_tgid(text: &[u8]) -> Option<TaskId> {
    text.split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Tgid:"))
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Clock ticks per second of the times in `/proc/<pid>/stat` (`USER_HZ`, what
/// `sysconf(_SC_CLK_TCK)` answers: 100 on every Linux architecture's user ABI).
pub const USER_HZ: u64 = 100;

/// Fields 14 and 15 (`utime`, `stime`: CPU time in user and kernel mode, in clock ticks,
/// [`USER_HZ`] per second) of a `/proc/<pid>/stat` line, added; counted after the last `)`
/// as [`stat_processor`] does.
///
/// # Examples
/// ```
/// use rdt_core::proc::stat_cpu_ticks;
/// let line = b"42 (a) b) R 1 42 42 0 -1 4194560 170 0 0 0 250 31 0 0 20 0 1 0\n";
/// assert_eq!(stat_cpu_ticks(line), Some(281));
/// assert_eq!(stat_cpu_ticks(b"42 (x) R 1 2"), None);
/// ```
#[must_use]
pub fn stat_cpu_ticks(line: &[u8]) -> Option<u64> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let after_comm = std::str::from_utf8(&line[close + 1..]).ok()?;
    let mut f = after_comm.split_ascii_whitespace().skip(14 - 3);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// Field 39 (`processor`: the CPU the thread last ran on) of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may hold spaces and parentheses itself, so
/// fields are counted after the last `)`, where field 3 begins.
///
/// # Examples
/// ```
/// use rdt_core::proc::stat_processor;
/// let line = b"42 (a (b) c) S 1 42 42 0 -1 4194560 170 0 0 0 0 0 0 0 20 0 1 0 \
///     123 4476928 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0\n";
/// assert_eq!(stat_processor(line), Some(5));
/// assert_eq!(stat_processor(b"1 (x)"), None);
/// ```
#[must_use]
pub fn stat_processor(line: &[u8]) -> Option<u32> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let after_comm = std::str::from_utf8(&line[close + 1..]).ok()?;
    after_comm
        .split_ascii_whitespace()
        .nth(39 - 3)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_live_process_and_its_threads() {
        // A child with one thread (this test binary's own threads come and go).
        let proc = ProcFs::host();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = TaskId::new(child.id());
        assert!(proc.exists(pid));
        assert_eq!(
            proc.first_missing(&[pid, TaskId::new(0)]),
            Some(TaskId::new(0))
        );
        assert_eq!(proc.thread_group(pid).unwrap(), pid);
        assert_eq!(proc.threads(pid).unwrap(), [pid]);
        let mut stat = proc.open_stat(pid, pid).unwrap();
        assert!(stat.last_cpu().is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(stat.last_cpu(), None, "gone");
        assert!(!proc.exists(pid));
        assert_eq!(
            proc.threads(pid).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn a_thread_named_alone_stands_for_itself() {
        let proc = ProcFs::host();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let me = fs::read_link("/proc/thread-self").unwrap();
            let tid: u32 = me.file_name().unwrap().to_str().unwrap().parse().unwrap();
            tx.send(tid).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = TaskId::new(rx.recv().unwrap());
        let threads = proc.threads(tid);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(threads.unwrap(), [tid]);
    }

    #[test]
    fn an_injected_root_is_read_and_a_bad_status_is_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("7");
        fs::create_dir_all(p.join("task/7")).unwrap();
        fs::create_dir_all(p.join("task/9")).unwrap();
        fs::write(p.join("stat"), "7 (x) S").unwrap();
        fs::write(p.join("status"), "Name:\tx\nTgid:\t7\n").unwrap();
        let proc = ProcFs::at(dir.path());
        assert_eq!(
            proc.threads(TaskId::new(7)).unwrap(),
            [TaskId::new(7), TaskId::new(9)]
        );
        fs::write(p.join("status"), "Tgid:\n").unwrap();
        assert_eq!(
            proc.threads(TaskId::new(7)).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = stat_processor(&bytes);
            let _ = status_tgid(&bytes);
        }
    }
}

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

use crate::file::ReadError;
use rdt_core::TaskId;

/// The most of a `status` file read: the kernel's is under 2 KiB; a longer file is an error
/// (`FileTooLarge`), as is a FIFO (a read cannot take memory or time without end).
const MAX_STATUS_BYTES: u64 = 64 * 1024;
/// The most of a `cgroup` file read: the kernel's has one line per hierarchy (a dozen on
/// cgroup v1, one on v2), well under 4 KiB.
const MAX_CGROUP_BYTES: u64 = 64 * 1024;
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
        let text =
            crate::file::read_regular(self.dir(task).join("status"), MAX_STATUS_BYTES, false)?;
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

    /// The process ids `<root>` lists (its numeric entries), in directory order.
    fn pids(&self) -> io::Result<impl Iterator<Item = u32>> {
        Ok(fs::read_dir(&self.root)?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()))
    }

    /// Every thread of the system, ascending: the entries of `<root>/<pid>/task` of every
    /// process listed in `<root>` (what the kernel's `for_each_process_thread` visits).
    /// Processes that exit while the list is read are left out.
    ///
    /// # Errors
    /// `<root>` cannot be listed.
    pub fn all_threads(&self) -> io::Result<Vec<TaskId>> {
        let mut tids = Vec::new();
        for pid in self.pids()? {
            let Ok(dir) = fs::read_dir(self.dir(TaskId::new(pid)).join("task")) else {
                continue;
            };
            tids.extend(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<TaskId>().ok()));
        }
        tids.sort_unstable();
        tids.dedup();
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
        for pid in self.pids()? {
            let mut comm = Vec::with_capacity(16);
            let read =
                crate::file::open_nonblocking(self.dir(TaskId::new(pid)).join("comm"), false)
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
        // O_NONBLOCK: a FIFO under an injected root must not block the open.
        let n = crate::file::open_nonblocking(self.dir(task).join("stat"), false)?
            .read_at(&mut buf, 0)?;
        stat_cpu_ticks(&buf[..n]).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stat line without utime and stime",
            )
        })
    }

    /// The CPU time of thread `task` alone so far: `utime + stime` of
    /// `<root>/<task>/task/<task>/stat`, in clock ticks ([`USER_HZ`] per second). Unlike
    /// [`ProcFs::cpu_ticks`], whose `<root>/<pid>/stat` is the whole process's for a process
    /// id (the kernel's `do_task_stat` with `whole` set), this is the one thread's, whichever
    /// thread of its process it is.
    ///
    /// # Errors
    /// `NotFound` once the thread has exited; `InvalidData` for a line that does not parse.
    pub fn thread_cpu_ticks(&self, task: TaskId) -> io::Result<u64> {
        let mut buf = [0u8; STAT_BUFFER];
        let path = self
            .dir(task)
            .join("task")
            .join(task.to_string())
            .join("stat");
        let n = crate::file::open_nonblocking(path, false)?.read_at(&mut buf, 0)?;
        stat_cpu_ticks(&buf[..n]).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stat line without utime and stime",
            )
        })
    }

    /// One sample of pqos's top-pids mode (`-p` without a value; `pqos/monitor.c`
    /// `get_proc_pids_stats`): for every process `<root>` lists whose state (`stat` field 3)
    /// is one of `R`, `S`, `D` (`proc_stat_whitelist`: not zombies or stopped ones), its CPU
    /// time so far (`utime + stime`, clock ticks) and, when `with_start`, when it started:
    /// the modification time of `<root>/<pid>` in whole seconds since the epoch, as pqos
    /// takes it (`get_proc_start_time`). A process that exits meanwhile, or whose `stat`
    /// does not parse, is left out.
    ///
    /// # Errors
    /// `<root>` cannot be listed.
    pub fn cpu_sample(&self, with_start: bool) -> io::Result<Vec<CpuSample>> {
        let mut out = Vec::new();
        for pid in self.pids()? {
            let task = TaskId::new(pid);
            let mut buf = [0u8; STAT_BUFFER];
            let Ok(n) = crate::file::open_nonblocking(self.dir(task).join("stat"), false)
                .and_then(|f| f.read_at(&mut buf, 0))
            else {
                continue;
            };
            let line = &buf[..n];
            if !stat_state(line).is_some_and(|c| matches!(c, 'R' | 'S' | 'D')) {
                continue;
            }
            let Some(ticks) = stat_cpu_ticks(line) else {
                continue;
            };
            let started = if with_start {
                let Ok(m) = fs::metadata(self.dir(task)).and_then(|m| m.modified()) else {
                    continue;
                };
                m.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            } else {
                0
            };
            out.push(CpuSample {
                pid: task,
                ticks,
                started,
            });
        }
        Ok(out)
    }

    /// pqos's top-pids selection (`pqos/monitor.c` `selfn_monitor_top_pids`): a
    /// [`Self::cpu_sample`], `delay` (pqos: 1.2 s, `PID_CPU_TIME_DELAY_USEC`), a second
    /// sample, then [`top_pids`] of the two with `now` the wall clock in seconds: at most
    /// `n` (pqos: 10, `TOP_PROC_MAX`) processes, busiest last, those that have exited
    /// since left out.
    ///
    /// # Errors
    /// `<root>` cannot be listed.
    pub fn top_pids(&self, delay: std::time::Duration, n: usize) -> io::Result<Vec<TaskId>> {
        let first = self.cpu_sample(true)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        std::thread::sleep(delay);
        let second = self.cpu_sample(false)?;
        // a process that ended since the second sample is not worth a group
        let mut top = top_pids(&first, &second, now, n);
        top.retain(|&pid| self.exists(pid));
        Ok(top)
    }

    /// The Kubernetes pod and the container `task` runs in, from its cgroup path
    /// (`<root>/<task>/cgroup`, [`cgroup_container_ids`]); both `None` for a task outside
    /// any (a host daemon, a shell). Reads at most 64 KiB through the crate's bounded reader,
    /// so a FIFO or an endless file under an injected root cannot block or fill memory.
    ///
    /// # Errors
    /// `NotFound` when the task does not exist (or exits while it is read); `InvalidData`
    /// when the file is not a regular file or is larger than 64 KiB; other read errors.
    pub fn container_ids(&self, task: TaskId) -> io::Result<ContainerIds> {
        if task.get() == 0 {
            return Err(io::ErrorKind::NotFound.into());
        }
        let path = self.dir(task).join("cgroup");
        match crate::file::read_regular(&path, MAX_CGROUP_BYTES, false) {
            Ok(bytes) => Ok(cgroup_container_ids(&bytes)),
            Err(ReadError::Open(e) | ReadError::Io(e)) => Err(e),
            Err(ReadError::NotRegular(_)) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a regular file", path.display()),
            )),
            Err(ReadError::TooLarge { size: n, .. }) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is larger than {MAX_CGROUP_BYTES} bytes ({n})",
                    path.display()
                ),
            )),
        }
    }

    /// The cgroup (v2) of `task`: the path of the unified line (`0::/kubepods.slice/...`)
    /// of `<root>/<task>/cgroup` ([`cgroup_unified_path`]), relative to the cgroup2
    /// mount; `None` on a host without the unified hierarchy. Read as
    /// [`ProcFs::container_ids`] reads it (at most 64 KiB, regular files only).
    ///
    /// # Errors
    /// `NotFound` when the task does not exist; `InvalidData` as for
    /// [`ProcFs::container_ids`]; other read errors.
    pub fn cgroup_path(&self, task: TaskId) -> io::Result<Option<String>> {
        let bytes = self.cgroup_file(task)?;
        Ok(cgroup_unified_path(&bytes).map(str::to_owned))
    }

    /// The bytes of `<root>/<task>/cgroup` (one line per hierarchy: [`cgroup_unified_path`],
    /// [`cgroup_v1_path`]), at most 64 KiB.
    ///
    /// # Errors
    /// `NotFound` for task 0 or a task that does not exist; the file is not a regular file
    /// or is larger (`InvalidData`).
    pub fn cgroup_file(&self, task: TaskId) -> io::Result<Vec<u8>> {
        if task.get() == 0 {
            return Err(io::ErrorKind::NotFound.into());
        }
        let path = self.dir(task).join("cgroup");
        crate::file::read_regular(&path, MAX_CGROUP_BYTES, false).map_err(|e| match e {
            ReadError::Open(e) | ReadError::Io(e) => e,
            e => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            ),
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
            file: crate::file::open_nonblocking(&path, false)?,
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

/// The largest `cgroup.procs` read, in bytes (4 MiB: a million process ids).
pub const MAX_CGROUP_PROCS_BYTES: u64 = 4 << 20;

/// The processes of the cgroup (v2) directory `dir`, from its `cgroup.procs` (one process id
/// per line; Linux `Documentation/admin-guide/cgroup-v2.rst`), ascending, each once.
///
/// # Errors
/// The file cannot be opened or read (`NotFound` for a directory that is not a cgroup), is
/// larger than [`MAX_CGROUP_PROCS_BYTES`], or has a line that is not a process id
/// (`InvalidData`, naming the line).
pub fn cgroup_processes(dir: &Path) -> io::Result<Vec<TaskId>> {
    let path = dir.join("cgroup.procs");
    let bytes =
        crate::file::read_regular(&path, MAX_CGROUP_PROCS_BYTES, false).map_err(|e| match e {
            crate::file::ReadError::Open(e) | crate::file::ReadError::Io(e) => e,
            e => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            ),
        })?;
    let mut out = Vec::new();
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let pid = std::str::from_utf8(line)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}:{}: not a process id", path.display(), n + 1),
                )
            })?;
        out.push(TaskId::new(pid));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The `Tgid:` value of a `/proc/<pid>/status` text, if it has a well-formed one.
///
/// # Examples
/// ```
/// use rdt_core::TaskId;
/// use rdt_host::proc::status_tgid;
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
/// use rdt_host::proc::stat_cpu_ticks;
/// let line = b"42 (a) b) R 1 42 42 0 -1 4194560 170 0 0 0 250 31 0 0 20 0 1 0\n";
/// assert_eq!(stat_cpu_ticks(line), Some(281));
/// assert_eq!(stat_cpu_ticks(b"42 (x) R 1 2"), None);
/// ```
#[must_use]
pub fn stat_cpu_ticks(line: &[u8]) -> Option<u64> {
    let mut f = stat_fields_from(line, 14)?;
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// The fields of a `/proc/<pid>/stat` line from field `first` (1-based, ≥ 3) on. The
/// command name (field 2) is in parentheses and may hold spaces and parentheses itself, so
/// fields are counted after the last `)`, where field 3 begins.
fn stat_fields_from(line: &[u8], first: usize) -> Option<impl Iterator<Item = &str>> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let after_comm = std::str::from_utf8(&line[close + 1..]).ok()?;
    Some(
        after_comm
            .split_ascii_whitespace()
            .skip(first.checked_sub(3)?),
    )
}

/// Field 3 (`state`: `R` running, `S` sleeping, `D` disk sleep, `Z` zombie, `T` stopped,
/// ...) of a `/proc/<pid>/stat` line, after the parenthesised command name.
///
/// # Examples
/// ```
/// use rdt_host::proc::stat_state;
/// assert_eq!(stat_state(b"42 (a) b) R 1 42"), Some('R'));
/// assert_eq!(stat_state(b"42 (x)"), None);
/// ```
#[must_use]
pub fn stat_state(line: &[u8]) -> Option<char> {
    let f = stat_fields_from(line, 3)?.next()?;
    let mut chars = f.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

/// A process's CPU time at one instant ([`ProcFs::cpu_sample`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSample {
    /// The process.
    pub pid: TaskId,
    /// `utime + stime`, in clock ticks.
    pub ticks: u64,
    /// When it started, seconds since the epoch (0 where not read).
    pub started: u64,
}

/// pqos's choice of the busiest processes from two samples (`pqos/monitor.c`
/// `update_proc_cpu_stat`, `fill_cpu_avg_ratio`, `proc_stats_cmp`, `fill_top_procs`): a
/// process of `first` counts only if `second` has it with no fewer ticks (a process that
/// exited, stopped or whose pid was reused is left out; one new in `second` too); it is
/// ranked by the ticks it used between the samples, ties by its lifetime average (its
/// ticks at `first` over the seconds from its start to `now`, 0 when it started this
/// second), then by pid; the top `n` are returned in pqos's order, ascending by that rank
/// (busiest last), which `pqos -p` then re-sorts by LLC occupancy.
///
/// # Examples
/// ```
/// use rdt_core::TaskId;
/// use rdt_host::proc::{CpuSample, top_pids};
/// let s = |pid, ticks, started| CpuSample { pid: TaskId::new(pid), ticks, started };
/// let first = [s(1, 100, 0), s(2, 10, 90), s(3, 50, 75), s(4, 7, 0)];
/// // 1 used 5 ticks, 2 used 40, 3 used 5 (but runs hotter on average), 4 exited
/// let second = [s(1, 105, 0), s(2, 50, 0), s(3, 55, 0)];
/// let top: Vec<u32> = top_pids(&first, &second, 100, 2).iter().map(|t| t.get()).collect();
/// assert_eq!(top, [3, 2]);
/// ```
#[must_use]
pub fn top_pids(first: &[CpuSample], second: &[CpuSample], now: u64, n: usize) -> Vec<TaskId> {
    let later: std::collections::BTreeMap<TaskId, u64> =
        second.iter().map(|s| (s.pid, s.ticks)).collect();
    let mut ranked: Vec<(u64, f64, TaskId)> = first
        .iter()
        .filter_map(|s| {
            let t2 = *later.get(&s.pid)?;
            let delta = t2.checked_sub(s.ticks)?;
            let run = now.saturating_sub(s.started);
            #[allow(clippy::cast_precision_loss)] // ticks and seconds are far below 2^52
            let avg = if run == 0 {
                0.0
            } else {
                s.ticks as f64 / run as f64
            };
            Some((delta, avg, s.pid))
        })
        .collect();
    // descending by (delta, average), then ascending pid, to cut at n
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
    ranked.truncate(n);
    ranked.reverse();
    ranked.into_iter().map(|(_, _, pid)| pid).collect()
}

/// Field 39 (`processor`: the CPU the thread last ran on) of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may hold spaces and parentheses itself, so
/// fields are counted after the last `)`, where field 3 begins.
///
/// # Examples
/// ```
/// use rdt_host::proc::stat_processor;
/// let line = b"42 (a (b) c) S 1 42 42 0 -1 4194560 170 0 0 0 0 0 0 0 20 0 1 0 \
///     123 4476928 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0\n";
/// assert_eq!(stat_processor(line), Some(5));
/// assert_eq!(stat_processor(b"1 (x)"), None);
/// ```
#[must_use]
pub fn stat_processor(line: &[u8]) -> Option<u32> {
    stat_fields_from(line, 39)?.next()?.parse().ok()
}

/// The path of the unified (cgroup v2) line `0::<path>` of a `/proc/<pid>/cgroup` text
/// (cgroups(7)), if it has one that is absolute and has no `.` or `..` component.
///
/// ```
/// use rdt_host::proc::cgroup_unified_path;
/// assert_eq!(cgroup_unified_path(b"0::/kubepods/pod1/abc\n"), Some("/kubepods/pod1/abc"));
/// assert_eq!(cgroup_unified_path(b"4:cpu:/x\n"), None);
/// assert_eq!(cgroup_unified_path(b"0::/a/../b\n"), None);
/// ```
#[must_use]
pub fn cgroup_unified_path(text: &[u8]) -> Option<&str> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let path = std::str::from_utf8(line.strip_prefix(b"0::")?).ok()?;
        let clean = path.starts_with('/') && path.split('/').all(|c| c != "." && c != "..");
        clean.then_some(path)
    })
}

/// The path of the cgroup v1 hierarchy of `controller` in a `/proc/<pid>/cgroup` text: the
/// third field of the line `ID:CONTROLLERS:PATH` whose comma-separated controllers include
/// `controller` (`4:cpu,cpuacct:/kubepods/pod1/abc` for `cpu` or `cpuacct`); `None` without
/// such a line (cgroup v2 only), or for a path that is not absolute or has `.` or `..`
/// components.
///
/// ```
/// use rdt_host::proc::cgroup_v1_path;
/// let text = b"12:pids:/kubepods/p/c\n4:cpu,cpuacct:/kubepods/p/c\n0::/\n";
/// assert_eq!(cgroup_v1_path(text, "cpu"), Some("/kubepods/p/c"));
/// assert_eq!(cgroup_v1_path(text, "pids"), Some("/kubepods/p/c"));
/// assert_eq!(cgroup_v1_path(text, "memory"), None);
/// assert_eq!(cgroup_v1_path(b"3:cpu:/a/../b\n", "cpu"), None);
/// ```
#[must_use]
pub fn cgroup_v1_path<'a>(text: &'a [u8], controller: &str) -> Option<&'a str> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let line = std::str::from_utf8(line).ok()?;
        let mut fields = line.splitn(3, ':');
        let (_id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if !controllers.split(',').any(|c| c == controller) {
            return None;
        }
        let clean = path.starts_with('/') && path.split('/').all(|c| c != "." && c != "..");
        clean.then_some(path)
    })
}

/// The Kubernetes pod and the container a task runs in, as its cgroup path names them
/// ([`cgroup_container_ids`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContainerIds {
    /// The pod's UID (`metadata.uid`, `8-4-4-4-12` hex as Kubernetes prints it; the 32 hex
    /// digits of a static pod's config hash), `None` outside a pod.
    pub pod_uid: Option<String>,
    /// The container's id: 64 lowercase hex digits, as `crictl ps` and `docker ps
    /// --no-trunc` print it; `None` outside a container.
    pub container_id: Option<String>,
}

impl ContainerIds {
    /// Whether neither is known.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.pod_uid.is_none() && self.container_id.is_none()
    }
}

/// The pod UID and container id in a `/proc/<pid>/cgroup` text (cgroups(7): one
/// `hierarchy-ID:controllers:path` line per hierarchy; cgroup v2 has the single line
/// `0::path`). The unified (`0::`) line is preferred, then the first v1 line that names a
/// pod or a container. Understood, as the kubelet's and the runtimes' cgroup drivers name
/// them:
///
/// | driver | path (last components) |
/// |---|---|
/// | kubelet, systemd | `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/…` |
/// | kubelet, cgroupfs | `/kubepods/besteffort/pod<uid>/<container id>`, `/kubepods/pod<uid>/…` (guaranteed) |
/// | containerd (systemd) | `…/cri-containerd-<id>.scope` |
/// | CRI-O (systemd) | `…/crio-<id>.scope` (not `crio-conmon-<id>.scope`, the monitor process) |
/// | Docker, Podman (systemd) | `…/docker-<id>.scope`, `…/libpod-<id>.scope` |
/// | Docker (cgroupfs) | `/docker/<id>` |
///
/// Underscores in a systemd slice's pod UID become dashes (systemd slice names cannot hold
/// `-` inside a component, so the kubelet writes them as `_`). A pod UID must be hex digits
/// and dashes; a container id must be exactly 64 hex digits; anything else is ignored, so
/// any bytes give an answer and never a panic.
///
/// # Examples
/// ```
/// use rdt_host::proc::cgroup_container_ids;
/// let v2 = b"0::/kubepods.slice/kubepods-besteffort.slice/\
///     kubepods-besteffort-pod1b4f9c1e_5a7d_4c1e_9f0e_2b6d8c3a4e5f.slice/\
///     cri-containerd-8e2c3c1f0d9b4a7e6f5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2918070.scope\n";
/// let ids = cgroup_container_ids(v2);
/// assert_eq!(ids.pod_uid.as_deref(), Some("1b4f9c1e-5a7d-4c1e-9f0e-2b6d8c3a4e5f"));
/// assert_eq!(
///     ids.container_id.as_deref(),
///     Some("8e2c3c1f0d9b4a7e6f5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2918070")
/// );
/// assert!(cgroup_container_ids(b"0::/user.slice/user-1000.slice/session-2.scope\n").is_empty());
/// ```
///
/// # References
/// cgroups(7) "/proc/\[pid\]/cgroup"; kubelet `pkg/kubelet/cm/cgroup_manager_linux.go`
/// (`ConvertCgroupNameToSystemd`, `escapeSystemdCgroupName`: `-` → `_`); containerd, CRI-O
/// and Docker systemd cgroup drivers (`<prefix>-<id>.scope`).
#[must_use]
pub fn cgroup_container_ids(text: &[u8]) -> ContainerIds {
    let paths = text.split(|&b| b == b'\n').filter_map(|line| {
        let line = std::str::from_utf8(line).ok()?;
        let mut parts = line.splitn(3, ':');
        let (id, _controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        Some((id == "0", path))
    });
    let mut best = ContainerIds::default();
    for (unified, path) in paths {
        let ids = path_container_ids(path);
        if unified && !ids.is_empty() {
            return ids;
        }
        if best.is_empty() {
            best = ids;
        }
    }
    best
}

/// [`cgroup_container_ids`] of one cgroup path.
fn path_container_ids(path: &str) -> ContainerIds {
    let mut ids = ContainerIds::default();
    for component in path.split('/') {
        if let Some(uid) = pod_uid_of(component) {
            ids.pod_uid = Some(uid);
        }
        if let Some(id) = container_id_of(component) {
            ids.container_id = Some(id);
        }
    }
    ids
}

/// The pod UID a path component names: `pod<uid>` (cgroupfs) or
/// `kubepods[-<qos>]-pod<uid>.slice` (systemd, `_` for `-`).
fn pod_uid_of(component: &str) -> Option<String> {
    let raw = if let Some(slice) = component.strip_suffix(".slice") {
        if !slice.starts_with("kubepods") {
            return None;
        }
        slice.rsplit_once("-pod")?.1
    } else {
        component.strip_prefix("pod")?
    };
    let uid = raw.replace('_', "-");
    let hex_digits = uid.bytes().filter(u8::is_ascii_hexdigit).count();
    let well_formed = (32..=36).contains(&uid.len())
        && hex_digits == 32
        && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    well_formed.then(|| uid.to_ascii_lowercase())
}

/// The container id a path component names: `<runtime>-<id>.scope` or a bare `<id>`.
fn container_id_of(component: &str) -> Option<String> {
    let id = match component.strip_suffix(".scope") {
        Some(scope) => {
            let (prefix, id) = scope.rsplit_once('-')?;
            if !matches!(prefix, "cri-containerd" | "crio" | "docker" | "libpod") {
                return None;
            }
            id
        }
        None => component,
    };
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_cgroups_processes_are_read_once_each_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            cgroup_processes(dir.path()).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::fs::write(dir.path().join("cgroup.procs"), "12\n5\n12\n").unwrap();
        assert_eq!(
            cgroup_processes(dir.path()).unwrap(),
            [TaskId::new(5), TaskId::new(12)]
        );
        std::fs::write(dir.path().join("cgroup.procs"), "12\nx\n").unwrap();
        let e = cgroup_processes(dir.path()).unwrap_err();
        assert!(e.to_string().contains("cgroup.procs:2"), "{e}");
    }

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn all_threads_lists_every_process_thread_of_the_system() {
        let proc = ProcFs::host();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let all = proc.all_threads().unwrap();
        let pid = TaskId::new(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(all.contains(&pid) && all.contains(&TaskId::new(1)));
        assert!(all.contains(&TaskId::new(std::process::id())));
        assert!(all.windows(2).all(|w| w[0] < w[1]), "ascending, no repeats");
        let none = ProcFs::at("/nonexistent-proc-root");
        assert!(none.all_threads().is_err());
    }

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

    #[test]
    fn fifos_in_an_injected_root_are_errors_not_hangs() {
        // arrange: status, stat and comm as FIFOs without a writer (open(2) blocked on each)
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("7");
        fs::create_dir_all(p.join("task/7")).unwrap();
        for f in ["status", "stat", "comm", "task/7/stat"] {
            nix::unistd::mkfifo(&p.join(f), nix::sys::stat::Mode::S_IRWXU).unwrap();
        }
        let proc = ProcFs::at(dir.path());
        let start = std::time::Instant::now();
        // act
        let status = proc.thread_group(TaskId::new(7)).unwrap_err();
        let ticks = proc.cpu_ticks(TaskId::new(7));
        let thread_stat = proc.open_stat(TaskId::new(7), TaskId::new(7));
        let named = proc.processes_named("x").unwrap();
        // assert
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert!(status.to_string().contains("a FIFO"), "{status}");
        assert!(ticks.is_err(), "{ticks:?}");
        assert!(thread_stat.is_ok_and(|mut s| s.last_cpu().is_none()));
        assert!(named.is_empty());
    }

    const CID: &str = "3f9d2c8b7a6e5d4c3b2a19087f6e5d4c3b2a19087f6e5d4c3b2a19087f6e5d4c";
    const UID: &str = "7c0f6a1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b";

    fn ids(pod: Option<&str>, container: Option<&str>) -> ContainerIds {
        ContainerIds {
            pod_uid: pod.map(str::to_owned),
            container_id: container.map(str::to_owned),
        }
    }

    #[test]
    fn cgroup_v2_systemd_paths_of_the_three_qos_classes_and_runtimes() {
        let u = UID.replace('-', "_");
        for (line, container) in [
            (
                format!(
                    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{CID}.scope\n"
                ),
                Some(CID),
            ),
            (
                format!(
                    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-{CID}.scope\n"
                ),
                Some(CID),
            ),
            (
                format!("0::/kubepods.slice/kubepods-pod{u}.slice/docker-{CID}.scope\n"),
                Some(CID),
            ),
            // The pause/sandbox cgroup of the pod itself, and CRI-O's monitor process.
            (
                format!(
                    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice\n"
                ),
                None,
            ),
            (
                format!(
                    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-conmon-{CID}.scope\n"
                ),
                None,
            ),
        ] {
            assert_eq!(
                cgroup_container_ids(line.as_bytes()),
                ids(Some(UID), container),
                "{line}"
            );
        }
    }

    #[test]
    fn cgroup_v1_cgroupfs_paths_name_the_pod_and_the_bare_container_id() {
        // A real-looking v1 file: every hierarchy shows the same path, systemd's differs.
        let text = format!(
            "12:pids:/kubepods/besteffort/pod{UID}/{CID}\n\
             11:cpuset:/kubepods/besteffort/pod{UID}/{CID}\n\
             10:memory:/kubepods/besteffort/pod{UID}/{CID}\n\
             3:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CID}\n\
             1:name=systemd:/kubepods/besteffort/pod{UID}/{CID}\n\
             0::/\n"
        );
        assert_eq!(
            cgroup_container_ids(text.as_bytes()),
            ids(Some(UID), Some(CID))
        );
        let guaranteed = format!("4:memory:/kubepods/pod{UID}/{CID}\n");
        assert_eq!(
            cgroup_container_ids(guaranteed.as_bytes()),
            ids(Some(UID), Some(CID))
        );
        let docker = format!("9:memory:/docker/{CID}\n0::/\n");
        assert_eq!(
            cgroup_container_ids(docker.as_bytes()),
            ids(None, Some(CID))
        );
    }

    #[test]
    fn host_processes_and_lookalikes_have_no_ids() {
        for text in [
            "0::/init.scope\n",
            "0::/system.slice/containerd.service\n",
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/podman-1234.scope\n",
            "0::/kubepods.slice/kubepods-besteffort.slice\n",
            "0::/kubepods/besteffort/podnot-a-uid/abc\n",
            "0::/system.slice/docker-1234.scope\n",
            "garbage without colons",
            "",
        ] {
            assert!(cgroup_container_ids(text.as_bytes()).is_empty(), "{text}");
        }
        // An uppercase id is reported lowercase, as the runtimes print it.
        let upper = format!("0::/docker/{}\n", CID.to_ascii_uppercase());
        assert_eq!(cgroup_container_ids(upper.as_bytes()), ids(None, Some(CID)));
    }

    #[test]
    fn container_ids_reads_an_injected_root_and_refuses_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let u = UID.replace('-', "_");
        fs::create_dir_all(dir.path().join("42")).unwrap();
        fs::write(
            dir.path().join("42/cgroup"),
            format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/cri-containerd-{CID}.scope\n"),
        )
        .unwrap();
        fs::create_dir_all(dir.path().join("43")).unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("43/cgroup"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        fs::create_dir_all(dir.path().join("44")).unwrap();
        fs::write(dir.path().join("44/cgroup"), vec![b'x'; 70 * 1024]).unwrap();
        let proc = ProcFs::at(dir.path());
        assert_eq!(
            proc.container_ids(TaskId::new(42)).unwrap(),
            ids(Some(UID), Some(CID))
        );
        assert_eq!(
            proc.container_ids(TaskId::new(43)).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(
            proc.container_ids(TaskId::new(44)).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(
            proc.container_ids(TaskId::new(45)).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // This very process: a real file of the host, whatever it holds.
        assert!(
            ProcFs::host()
                .container_ids(TaskId::new(std::process::id()))
                .is_ok()
        );
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = stat_processor(&bytes);
            let _ = status_tgid(&bytes);
            let _ = cgroup_container_ids(&bytes);
        }
    }
}

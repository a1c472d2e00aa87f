//! What PID monitoring reads from procfs (proc(5)): whether the requested processes exist,
//! their threads, and the CPU each thread last ran on (`/proc/<pid>/task/<tid>/stat`,
//! field 39 `processor`), for pqos's PID-mode `CORE` column.
//!
//! The `stat` files are opened once when monitoring starts and re-read from offset 0 at each
//! sample (procfs regenerates the text on every read), so the loop opens nothing per sample.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use rdt::TaskId;

/// A procfs mount: `/proc` on a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcFs {
    root: PathBuf,
}

impl ProcFs {
    /// The host's `/proc`.
    #[must_use]
    pub fn host() -> Self {
        Self::at("/proc")
    }

    /// procfs mounted at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The first of `pids` that names no live task (`/proc/<pid>/stat` absent), if any
    /// (pqos: `Requested PID set contains nonexistent processes (first invalid PID: %lu)`).
    #[must_use]
    pub fn first_missing(&self, pids: &[TaskId]) -> Option<TaskId> {
        pids.iter()
            .copied()
            .find(|p| p.get() == 0 || !self.root.join(p.to_string()).join("stat").exists())
    }

    /// The threads of `pid` (`/proc/<pid>/task/*`), ascending; a thread id that is not a
    /// process's main thread stands for itself (pqos `tid_find`).
    ///
    /// # Errors
    /// The task directory cannot be read (the task exited).
    pub fn threads(&self, pid: TaskId) -> std::io::Result<Vec<TaskId>> {
        let dir = self.root.join(pid.to_string()).join("task");
        let mut tids: Vec<TaskId> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        // /proc/<tid>/task lists the whole thread group; a thread named alone is only itself.
        if !tids.is_empty() && self.thread_group_leader(pid).is_some_and(|l| l != pid) {
            return Ok(vec![pid]);
        }
        Ok(tids)
    }

    /// The thread-group id (`Tgid:` of `/proc/<pid>/status`).
    fn thread_group_leader(&self, pid: TaskId) -> Option<TaskId> {
        let status =
            std::fs::read_to_string(self.root.join(pid.to_string()).join("status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Opens the `stat` file of thread `tid` of process `pid`.
    ///
    /// # Errors
    /// The thread has exited or procfs cannot be read.
    pub fn open_stat(&self, pid: TaskId, tid: TaskId) -> std::io::Result<ThreadStat> {
        let path = self
            .root
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("stat");
        Ok(ThreadStat {
            file: File::open(path)?,
            buf: vec![0; 1024],
        })
    }
}

/// An open `/proc/<pid>/task/<tid>/stat`.
#[derive(Debug)]
pub struct ThreadStat {
    file: File,
    buf: Vec<u8>,
}

impl ThreadStat {
    /// The CPU the thread last ran on, re-read now; `None` once the thread has exited.
    pub fn last_cpu(&mut self) -> Option<u32> {
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        last_cpu_from_stat(std::str::from_utf8(&self.buf[..n]).ok()?)
    }
}

/// Field 39 (`processor`: the CPU last executed on) of a `stat` line (proc(5)). The command
/// name (field 2) is in parentheses and may hold spaces and parentheses itself, so fields
/// are counted after the last `)`, where field 3 begins.
#[must_use]
pub fn last_cpu_from_stat(line: &str) -> Option<u32> {
    let after_comm = &line[line.rfind(')')? + 1..];
    after_comm
        .split_ascii_whitespace()
        .nth(39 - 3)?
        .parse()
        .ok()
}

/// The threads of one PID group, for the `CORE` cell of each sample.
#[derive(Debug, Default)]
pub struct GroupThreads {
    stats: Vec<ThreadStat>,
    cpus: Vec<u32>,
}

impl GroupThreads {
    /// Opens the `stat` file of every thread of every process in `pids`.
    ///
    /// # Errors
    /// A process exited before its threads could be listed or opened.
    pub fn open(proc: &ProcFs, pids: &[TaskId]) -> std::io::Result<Self> {
        let mut stats = Vec::new();
        for &pid in pids {
            for tid in proc.threads(pid)? {
                stats.push(proc.open_stat(pid, tid)?);
            }
        }
        Ok(Self {
            cpus: Vec::with_capacity(stats.len()),
            stats,
        })
    }

    /// The sorted, unique CPUs the threads last ran on (`0,3`), or `err` when a thread can
    /// no longer be read (pqos `monitor_utils_get_pid_cores`).
    pub fn cores(&mut self) -> String {
        self.cpus.clear();
        for s in &mut self.stats {
            match s.last_cpu() {
                Some(c) => self.cpus.push(c),
                None => return "err".to_owned(),
            }
        }
        if self.cpus.is_empty() {
            return "err".to_owned();
        }
        self.cpus.sort_unstable();
        self.cpus.dedup();
        crate::commands::join(&self.cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `stat` line (kernel 6.x) of a thread whose name holds a space and a `)`.
    const STAT: &str = "4242 (my prog) x) S 1 4242 4242 0 -1 4194560 170 0 0 0 0 0 0 0 20 0 1 0 \
        123456 4476928 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0 0 0 0 0 \
        0 0 0 0\n";

    #[test]
    fn processor_is_field_39_counted_after_the_command_name() {
        assert_eq!(last_cpu_from_stat(STAT), Some(5));
        assert_eq!(last_cpu_from_stat("1 (init) S 0"), None);
        assert_eq!(last_cpu_from_stat("garbage"), None);
    }

    #[test]
    fn a_live_process_exists_and_its_thread_reports_a_cpu() {
        // A child with one thread (this test binary's own threads come and go).
        let proc = ProcFs::host();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = TaskId::new(child.id());
        assert_eq!(proc.first_missing(&[pid]), None);
        assert_eq!(
            proc.first_missing(&[pid, TaskId::new(0)]),
            Some(TaskId::new(0))
        );
        assert_eq!(proc.threads(pid).unwrap(), [pid]);
        let mut g = GroupThreads::open(&proc, &[pid]).unwrap();
        let cores = g.cores();
        child.kill().unwrap();
        child.wait().unwrap();
        let cpu: usize = cores.parse().unwrap_or_else(|_| panic!("{cores}"));
        let online = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        assert!(cpu < online.max(1024), "{cores}");
    }

    #[test]
    fn a_thread_named_alone_stands_for_itself() {
        let proc = ProcFs::host();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let tid = std::fs::read_link("/proc/thread-self").unwrap();
            tx.send(
                tid.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .parse::<u32>()
                    .unwrap(),
            )
            .unwrap();
            done_rx.recv().unwrap();
        });
        let tid = TaskId::new(rx.recv().unwrap());
        let threads = proc.threads(tid);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(threads.unwrap(), [tid]);
    }

    #[test]
    fn an_exited_process_reads_as_err() {
        let proc = ProcFs::host();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = TaskId::new(child.id());
        let mut g = GroupThreads::open(&proc, &[pid]).unwrap();
        assert_ne!(g.cores(), "err");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(g.cores(), "err");
        assert_eq!(proc.first_missing(&[pid]), Some(pid));
    }
}

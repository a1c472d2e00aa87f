//! PID mode's `CORE` column: the CPUs a group's threads last ran on, from their
//! `/proc/<pid>/task/<tid>/stat` files ([`rdt_pqos::proc`]), opened once when monitoring starts
//! and re-read at each sample, so the loop opens nothing per sample.

use rdt_pqos::TaskId;
use rdt_pqos::proc::{ProcFs, ThreadStat};

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

    #[test]
    fn a_live_process_reports_a_cpu_and_an_exited_one_err() {
        let proc = ProcFs::host();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = TaskId::new(child.id());
        let mut g = GroupThreads::open(&proc, &[pid]).unwrap();
        let cores = g.cores();
        let cpu: usize = cores.parse().unwrap_or_else(|_| panic!("{cores}"));
        let online = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        assert!(cpu < online.max(1024), "{cores}");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(g.cores(), "err");
    }
}

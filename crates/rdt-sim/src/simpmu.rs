//! IPC and LLC misses of a mounted simulated platform: [`SimPmuFiles`], a [`PmuSource`]
//! reading the per-CPU and per-task counters the simulator serves under `<sysroot>/.sim/pmu/`.
//!
//! The file format (`rdt_sim::fs::control::PMU_FORMAT`): `.sim/pmu/cpu<N>` for each logical
//! CPU and `.sim/pmu/task<TID>` for each host thread the simulator follows (one it placed in
//! a resctrl group), each one line of decimal counters separated by spaces, cumulative and
//! free-running: `instructions cycles llc_misses llc_references`. The first three are
//! required, the fourth read where present; later fields are ignored.
//!
//! # When it is used
//! The `rdt` library's opener counts with the host's PMU (perf events) whenever they can be
//! opened, on a sysroot too. Only when they cannot (a VM without a virtual PMU, this
//! project's CI) does it take the PMU source injected through its `OpenOptions`
//! (`fallback_pmu`), which for a sysroot that is a mounted simulated platform is this one
//! ([`crate::attach`], [`crate::adapter::Attachment::pmu`]: `<sysroot>/.sim/pmu` exists),
//! so that IPC and LLC misses follow the workload model there, as they do in-process. On a
//! host there is no such directory and nothing changes: this is a seam chosen by the
//! opener, not a branch in the monitoring code.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rdt_core::{LogicalCpu, PmuCounts, PmuSource, TaskId};

/// The most of a counter file read (four 20-digit numbers and spaces fit many times).
const LINE_BYTES: usize = 256;

/// Parses one line of `.sim/pmu/*`: its space-separated decimal counters `instructions
/// cycles llc_misses [llc_references]`, later fields ignored. `None` for anything else
/// (fewer than three fields, a non-number, not UTF-8).
///
/// # Examples
/// ```
/// use rdt_sim::simpmu::parse_counts;
/// let c = parse_counts(b"2000 1000 7 900\n").unwrap();
/// assert_eq!((c.instructions, c.cycles, c.llc_misses), (2000, 1000, 7));
/// assert_eq!(c.llc_references, Some(900));
/// assert_eq!(parse_counts(b"2000 1000 7\n").unwrap().llc_references, None);
/// assert_eq!(parse_counts(b"2000 1000 7 x\n"), None);
/// assert_eq!(parse_counts(b"2000 1000\n"), None);
/// ```
#[must_use]
pub fn parse_counts(text: &[u8]) -> Option<PmuCounts> {
    let line = std::str::from_utf8(text).ok()?.lines().next()?;
    let mut f = line.split_ascii_whitespace().map(str::parse::<u64>);
    Some(PmuCounts {
        instructions: f.next()?.ok()?,
        cycles: f.next()?.ok()?,
        llc_misses: f.next()?.ok()?,
        llc_references: match f.next() {
            Some(refs) => Some(refs.ok()?),
            None => None,
        },
    })
}

/// The simulator's PMU counters under a directory (module docs). Each file is opened on its
/// first read and kept open: a poll is one `pread(2)` per CPU or task.
#[derive(Debug)]
pub struct SimPmuFiles {
    dir: PathBuf,
    cpus: BTreeMap<LogicalCpu, Option<File>>,
    tasks: BTreeMap<TaskId, File>,
}

impl SimPmuFiles {
    /// The counters under `dir` (`<sysroot>/.sim/pmu`).
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            cpus: BTreeMap::new(),
            tasks: BTreeMap::new(),
        }
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn read_file(f: &File) -> Option<PmuCounts> {
        let mut buf = [0u8; LINE_BYTES];
        let n = f.read_at(&mut buf, 0).ok()?;
        parse_counts(&buf[..n])
    }
}

impl PmuSource for SimPmuFiles {
    /// `cpu<N>`; `None` when the file is missing or does not parse (never retried once
    /// missing, as the library's perf-event source does not re-open).
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        let dir = &self.dir;
        let f = self.cpus.entry(cpu).or_insert_with(|| {
            rdt_host::file::open_nonblocking(dir.join(format!("cpu{cpu}")), false).ok()
        });
        Self::read_file(f.as_ref()?)
    }

    /// `task<TID>`, opened on the first read (the simulator serves it once the task is in a
    /// resctrl group); `None` until it exists.
    fn read_task(&mut self, task: TaskId) -> Option<PmuCounts> {
        if !self.tasks.contains_key(&task) {
            let f = rdt_host::file::open_nonblocking(self.dir.join(format!("task{task}")), false)
                .ok()?;
            self.tasks.insert(task, f);
        }
        Self::read_file(&self.tasks[&task])
    }

    fn release_task(&mut self, task: TaskId) {
        self.tasks.remove(&task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_kept_open_files_and_bad_text_is_none() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpu0"), "10 20 3 40\n").unwrap();
        std::fs::write(dir.path().join("cpu1"), "10 x 3 40\n").unwrap();
        std::fs::write(dir.path().join("task77"), "5 6 7 8 9 10\n").unwrap();
        let mut pmu = SimPmuFiles::new(dir.path());
        // act
        let c0 = pmu.read(LogicalCpu::new(0)).unwrap();
        std::fs::write(dir.path().join("cpu0"), "11 22 4 44\n").unwrap();
        let c0_again = pmu.read(LogicalCpu::new(0)).unwrap();
        // assert
        assert_eq!((c0.instructions, c0.cycles, c0.llc_misses), (10, 20, 3));
        assert_eq!(c0_again.cycles, 22);
        assert_eq!(pmu.read(LogicalCpu::new(1)), None);
        assert_eq!(pmu.read(LogicalCpu::new(2)), None);
        assert_eq!(pmu.read_task(TaskId::new(77)).unwrap().llc_misses, 7);
        assert_eq!(pmu.read_task(TaskId::new(78)), None);
        pmu.release_task(TaskId::new(77));
        assert!(pmu.tasks.is_empty());
        for bad in [
            &b""[..],
            b"\n",
            b"1 2",
            b"-1 2 3",
            b"\xff\xfe",
            b"99999999999999999999999 1 2",
        ] {
            assert_eq!(parse_counts(bad), None, "{bad:?}");
        }
    }
}

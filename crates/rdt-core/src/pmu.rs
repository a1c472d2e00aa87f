//! The PMU seam: where IPC and LLC-miss counts come from.
//!
//! On real hardware these come from `perf_event_open` (per CPU for core groups); the
//! simulated platform provides them from its workload model. Monitoring works without a
//! PMU: the IPC and miss columns are then reported as unavailable.

use crate::{LogicalCpu, TaskId};

/// Cumulative PMU counts of one logical CPU (free-running, 64-bit, wrapping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmuCounts {
    /// Instructions retired.
    pub instructions: u64,
    /// Unhalted core cycles.
    pub cycles: u64,
    /// Last-level cache misses.
    pub llc_misses: u64,
}

/// Reads per-CPU PMU counters.
pub trait PmuSource {
    /// Cumulative counts of `cpu`, or `None` when this source cannot count on it.
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts>;

    /// Cumulative counts of one task (a thread id; counting follows the thread on every CPU),
    /// or `None` when this source cannot count tasks. The first read of a task may start its
    /// counters (and return zeros); [`PmuSource::release_task`] stops them.
    fn read_task(&mut self, task: TaskId) -> Option<PmuCounts> {
        let _ = task;
        None
    }

    /// Stops counting `task` and frees what counting it held (perf file descriptors).
    fn release_task(&mut self, task: TaskId) {
        let _ = task;
    }
}

/// A platform without a usable PMU: every read is `None`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPmu;

impl PmuSource for NoPmu {
    fn read(&mut self, _cpu: LogicalCpu) -> Option<PmuCounts> {
        None
    }
}

impl<T: PmuSource + ?Sized> PmuSource for Box<T> {
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        (**self).read(cpu)
    }
    fn read_task(&mut self, task: TaskId) -> Option<PmuCounts> {
        (**self).read_task(task)
    }
    fn release_task(&mut self, task: TaskId) {
        (**self).release_task(task);
    }
}

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

impl PmuCounts {
    /// The counts since `earlier`, each counter wrapping at 2^64 (free-running counters).
    #[must_use]
    pub const fn since(self, earlier: Self) -> Self {
        Self {
            instructions: self.instructions.wrapping_sub(earlier.instructions),
            cycles: self.cycles.wrapping_sub(earlier.cycles),
            llc_misses: self.llc_misses.wrapping_sub(earlier.llc_misses),
        }
    }

    /// The sum of two sets of counts, wrapping.
    #[must_use]
    pub const fn plus(self, other: Self) -> Self {
        Self {
            instructions: self.instructions.wrapping_add(other.instructions),
            cycles: self.cycles.wrapping_add(other.cycles),
            llc_misses: self.llc_misses.wrapping_add(other.llc_misses),
        }
    }
}

/// One group's PMU deltas over a poll: the sum over its members (CPUs or tasks) of each
/// member's counts since its reading in `prev`, which takes the new readings `now` (one per
/// member, in the same order).
///
/// `None` when the group has no member or a member cannot be counted this poll (no reading
/// now, or none before except on the `first` poll, whose deltas are 0 as pqos reports them).
#[must_use]
pub fn sum_deltas(
    prev: &mut [Option<PmuCounts>],
    now: impl IntoIterator<Item = Option<PmuCounts>>,
    first: bool,
) -> Option<PmuCounts> {
    let mut acc = (!prev.is_empty()).then(PmuCounts::default);
    for (prev, now) in prev.iter_mut().zip(now) {
        let d = match (*prev, now) {
            (Some(p), Some(n)) => Some(n.since(p)),
            (None, Some(_)) if first => Some(PmuCounts::default()),
            _ => None,
        };
        *prev = now;
        acc = acc.zip(d).map(|(a, d)| a.plus(d));
    }
    acc
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

#[cfg(test)]
mod tests {
    use super::*;

    fn c(i: u64, cy: u64, m: u64) -> PmuCounts {
        PmuCounts {
            instructions: i,
            cycles: cy,
            llc_misses: m,
        }
    }

    #[test]
    fn deltas_wrap_and_sum_over_members() {
        let mut prev = [Some(c(u64::MAX, 10, 5)), Some(c(100, 200, 0))];
        let d = sum_deltas(&mut prev, [Some(c(4, 30, 7)), Some(c(150, 260, 1))], false);
        assert_eq!(d, Some(c(5 + 50, 20 + 60, 2 + 1)));
        assert_eq!(prev, [Some(c(4, 30, 7)), Some(c(150, 260, 1))]);
    }

    #[test]
    fn a_member_without_reading_makes_the_group_unknown_except_on_the_first_poll() {
        let mut prev = [None, Some(c(1, 1, 1))];
        assert_eq!(
            sum_deltas(&mut prev, [Some(c(9, 9, 9)), Some(c(2, 2, 2))], true),
            Some(c(1, 1, 1))
        );
        let mut prev = [None, Some(c(1, 1, 1))];
        assert_eq!(
            sum_deltas(&mut prev, [Some(c(9, 9, 9)), Some(c(2, 2, 2))], false),
            None
        );
        assert_eq!(
            prev[0],
            Some(c(9, 9, 9)),
            "the reading is kept for the next poll"
        );
        assert_eq!(sum_deltas(&mut [Some(c(1, 1, 1))], [None], false), None);
        assert_eq!(sum_deltas(&mut [], [], true), None, "no member");
    }
}

//! The PMU seam: where IPC, LLC-miss and LLC-reference counts come from.
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
    /// Last-level cache references (lookups), or `None` where the source does not count
    /// them (pqos counts them only with a second general-purpose counter: `lib/hw_cap.c`).
    pub llc_references: Option<u64>,
}

impl PmuCounts {
    /// The counts since `earlier`, each counter wrapping at 2^64 (free-running counters);
    /// references only where both readings have them.
    #[must_use]
    pub const fn since(self, earlier: Self) -> Self {
        Self {
            instructions: self.instructions.wrapping_sub(earlier.instructions),
            cycles: self.cycles.wrapping_sub(earlier.cycles),
            llc_misses: self.llc_misses.wrapping_sub(earlier.llc_misses),
            llc_references: match (self.llc_references, earlier.llc_references) {
                (Some(now), Some(then)) => Some(now.wrapping_sub(then)),
                _ => None,
            },
        }
    }

    /// The sum of two sets of counts, wrapping; references only where both count them.
    #[must_use]
    pub const fn plus(self, other: Self) -> Self {
        Self {
            instructions: self.instructions.wrapping_add(other.instructions),
            cycles: self.cycles.wrapping_add(other.cycles),
            llc_misses: self.llc_misses.wrapping_add(other.llc_misses),
            llc_references: match (self.llc_references, other.llc_references) {
                (Some(a), Some(b)) => Some(a.wrapping_add(b)),
                _ => None,
            },
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
    // Outer `None`: no member yet; inner `None`: some member cannot be counted.
    let mut acc: Option<Option<PmuCounts>> = None;
    for (prev, now) in prev.iter_mut().zip(now) {
        let d = match (*prev, now) {
            (Some(p), Some(n)) => Some(n.since(p)),
            // zero counts, with references where the source counts them
            (None, Some(n)) if first => Some(n.since(n)),
            _ => None,
        };
        *prev = now;
        acc = Some(match acc {
            None => d,
            Some(a) => a.zip(d).map(|(a, d)| a.plus(d)),
        });
    }
    acc.flatten()
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
            llc_references: Some(m * 10),
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
        let first = sum_deltas(&mut [None], [Some(c(5, 5, 5))], true).unwrap();
        assert_eq!(
            first.llc_references,
            Some(0),
            "zero references on the first poll"
        );
        assert_eq!(sum_deltas(&mut [], [], true), None, "no member");
    }

    #[test]
    fn references_are_summed_only_when_every_member_counts_them() {
        let no_refs = |i| PmuCounts {
            llc_references: None,
            ..c(i, i, i)
        };
        let mut prev = [Some(c(1, 1, 1)), Some(no_refs(1))];
        let d = sum_deltas(&mut prev, [Some(c(3, 3, 3)), Some(no_refs(4))], false).unwrap();
        assert_eq!((d.instructions, d.llc_misses), (2 + 3, 2 + 3));
        assert_eq!(d.llc_references, None, "one member does not count them");
        let mut prev = [Some(c(1, 1, 1)), Some(c(2, 2, 2))];
        let d = sum_deltas(&mut prev, [Some(c(3, 3, 3)), Some(c(4, 4, 4))], false).unwrap();
        assert_eq!(d.llc_references, Some(20 + 20));
    }
}

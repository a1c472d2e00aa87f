//! Monitoring groups: the `mon_data` files a group reads, opened once at start and read with
//! one positioned read each per poll.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use rdt_core::monitor::counter_delta;
use rdt_core::{
    LogicalCpu, MonEvents, MonGroupId, MonValues, PmuCounts, PmuSource, TaskId, sum_deltas,
};

use crate::ResctrlError;

/// An L3 monitoring event: a file in every `mon_data/mon_L3_XX/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// `llc_occupancy`: bytes now.
    Occupancy,
    /// `mbm_local_bytes`: cumulative bytes.
    Local,
    /// `mbm_total_bytes`: cumulative bytes.
    Total,
}

impl Event {
    pub(crate) const fn file(self) -> &'static str {
        match self {
            Self::Occupancy => "llc_occupancy",
            Self::Local => "mbm_local_bytes",
            Self::Total => "mbm_total_bytes",
        }
    }
}

/// One open `mon_data/mon_L3_XX/<event>` file of one group directory.
#[derive(Debug)]
pub(crate) struct Counter {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    pub(crate) event: Event,
    /// Last MBM reading; `None` before the first and after an unavailable one.
    pub(crate) prev: Option<u64>,
}

impl Counter {
    /// One `pread(2)` at offset 0: the kernel regenerates the text for every read at 0.
    /// `Unavailable`, `Error` and `Unassigned` (spec §8.1) are `None`.
    fn read(&self) -> Result<Option<u64>, ResctrlError> {
        let mut buf = [0u8; 64];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| ResctrlError::io("read", &self.path, e))?;
        let text = std::str::from_utf8(&buf[..n]).unwrap_or("").trim();
        if let Ok(v) = text.parse::<u64>() {
            return Ok(Some(v));
        }
        match text {
            "Unavailable" | "Error" | "Unassigned" => Ok(None),
            _ => Err(ResctrlError::Parse {
                path: self.path.clone(),
                text: text.to_owned(),
                expected: "a byte count, Unavailable, Error or Unassigned".into(),
            }),
        }
    }
}

/// What a group counts on the PMU side.
#[derive(Debug)]
pub(crate) enum Members {
    Cpus(Vec<LogicalCpu>),
    Tasks(Vec<TaskId>),
    /// A group another tool made, watched without PMU counts.
    None,
}

/// A started monitoring group.
#[derive(Debug)]
pub(crate) struct MonGroup {
    pub(crate) id: MonGroupId,
    /// Directories this backend created (relative to the root), removed at stop; empty for
    /// a watched group.
    pub(crate) dirs: Vec<String>,
    pub(crate) events: MonEvents,
    pub(crate) counters: Vec<Counter>,
    pub(crate) members: Members,
    pub(crate) pmu_prev: Vec<Option<PmuCounts>>,
    pub(crate) has: [bool; 3],
    pub(crate) polled: bool,
    pub(crate) values: MonValues,
}

fn add(acc: &mut Option<u64>, v: u64) {
    *acc = Some(acc.unwrap_or(0).saturating_add(v));
}

impl MonGroup {
    /// Reads every counter once and the PMU, and updates `values`.
    pub(crate) fn poll<P: PmuSource>(&mut self, pmu: &mut P) -> Result<(), ResctrlError> {
        let first = !self.polled;
        let (mut occ, mut local, mut total) = (None, None, None);
        for c in &mut self.counters {
            let now = c.read()?;
            match c.event {
                Event::Occupancy => {
                    if let Some(v) = now {
                        add(&mut occ, v);
                    }
                }
                Event::Local | Event::Total => {
                    // 64-bit running byte counts; a decrease is taken as a wrap (pqos).
                    let d = match (c.prev, now) {
                        (Some(p), Some(n)) => Some(counter_delta(p, n, 64)),
                        (None, Some(_)) if first => Some(0),
                        _ => None,
                    };
                    c.prev = now;
                    if let Some(d) = d {
                        add(
                            if c.event == Event::Local {
                                &mut local
                            } else {
                                &mut total
                            },
                            d,
                        );
                    }
                }
            }
        }
        let [has_occ, has_local, has_total] = self.has;
        let v = &mut self.values;
        v.llc_occupancy_bytes = occ.filter(|_| has_occ);
        v.mbm_local_delta_bytes = local.filter(|_| has_local);
        v.mbm_total_delta_bytes = total.filter(|_| has_total);
        v.mbm_remote_delta_bytes = if self.events.contains(MonEvents::MBM_REMOTE) {
            // RMEM = total - local, 0 if negative (pqos lib/monitoring.c).
            v.mbm_total_delta_bytes
                .zip(v.mbm_local_delta_bytes)
                .map(|(t, l)| t.saturating_sub(l))
        } else {
            None
        };
        self.poll_pmu(pmu, first);
        self.polled = true;
        Ok(())
    }

    fn poll_pmu<P: PmuSource>(&mut self, pmu: &mut P, first: bool) {
        let want_ipc = self.events.contains(MonEvents::IPC);
        let want_misses = self.events.contains(MonEvents::LLC_MISSES);
        if !(want_ipc || want_misses) {
            return;
        }
        let prev = &mut self.pmu_prev;
        let acc = match &self.members {
            Members::Cpus(cpus) => sum_deltas(prev, cpus.iter().map(|&c| pmu.read(c)), first),
            Members::Tasks(tasks) => {
                sum_deltas(prev, tasks.iter().map(|&t| pmu.read_task(t)), first)
            }
            Members::None => None,
        };
        let v = &mut self.values;
        v.instructions_delta = acc.filter(|_| want_ipc).map(|a| a.instructions);
        v.cycles_delta = acc.filter(|_| want_ipc).map(|a| a.cycles);
        v.llc_misses_delta = acc.filter(|_| want_misses).map(|a| a.llc_misses);
    }
}

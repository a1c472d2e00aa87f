//! IPC and LLC misses from the CPU's performance monitoring unit through Linux
//! `perf_event_open(2)`: [`PerfPmu`], the production [`PmuSource`].
//!
//! What is counted, as pqos does (pqos `lib/perf_monitoring.c`, spec §5.2-5.3): the generic
//! hardware events `PERF_COUNT_HW_INSTRUCTIONS`, `PERF_COUNT_HW_CPU_CYCLES` and
//! `PERF_COUNT_HW_CACHE_MISSES` (the kernel maps the last to the LLC-miss event of the CPU),
//! user and kernel mode, one file descriptor per (event, target):
//! - per logical CPU (`pid = -1, cpu = N`: every task on that CPU), for core groups; needs
//!   root, `CAP_PERFMON` or `perf_event_paranoid` <= 0;
//! - per task (`pid = TID, cpu = -1`: that thread on every CPU), for task groups.
//!
//! Counters are opened once per CPU (on first use) or per task and kept open; a poll is one
//! `read(2)` per counter, nothing is re-opened. A host without a PMU (most VMs: the kernel
//! says "PMU not available due to virtualization") cannot open hardware events:
//! [`PerfPmu::open`] fails, and callers use [`rdt_core::NoPmu`], so monitoring shows no IPC or
//! miss values rather than zeros.
//!
//! # References
//! `perf_event_open(2)`; Linux `include/uapi/linux/perf_event.h`; pqos(8).

use std::collections::{BTreeMap, HashMap};
use std::io;

use perf_event::events::Hardware;
use perf_event::{Builder, Counter};
use rdt_core::{CpuSet, LogicalCpu, PmuCounts, PmuSource, TaskId};

/// A PMU counter could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// `perf_event_open` failed for one event on one CPU. `ENOENT`/`EOPNOTSUPP`: the host
    /// has no such hardware event (no PMU, e.g. a VM); `EACCES`/`EPERM`: not root and
    /// `/proc/sys/kernel/perf_event_paranoid` too high; `ENODEV`: no such CPU.
    #[error("cannot count {event} on CPU {cpu} with perf_event_open")]
    Cpu {
        /// The event (`instructions`, `cycles`, `LLC misses`).
        event: &'static str,
        /// The CPU.
        cpu: LogicalCpu,
        /// The system call's error.
        #[source]
        source: io::Error,
    },
    /// The set of CPUs to count on is empty.
    #[error("no CPU to count on")]
    NoCpu,
}

/// The three counters of one target.
struct Counters {
    instructions: Counter,
    cycles: Counter,
    llc_misses: Counter,
}

const EVENTS: [(Hardware, &str); 3] = [
    (Hardware::INSTRUCTIONS, "instructions"),
    (Hardware::CPU_CYCLES, "cycles"),
    (Hardware::CACHE_MISSES, "LLC misses"),
];

impl Counters {
    /// Opens and enables the three counters, each configured by `target`.
    fn open(target: impl Fn(&mut Builder)) -> Result<Self, (&'static str, io::Error)> {
        let mut opened = Vec::with_capacity(3);
        for (event, name) in EVENTS {
            let mut builder = Builder::new(event);
            builder.exclude_kernel(false);
            target(&mut builder);
            let mut counter = builder.build().map_err(|e| (name, e))?;
            counter.enable().map_err(|e| (name, e))?;
            opened.push(counter);
        }
        let mut it = opened.into_iter();
        match (it.next(), it.next(), it.next()) {
            (Some(instructions), Some(cycles), Some(llc_misses)) => Ok(Self {
                instructions,
                cycles,
                llc_misses,
            }),
            _ => Err(("events", io::Error::other("counter set incomplete"))),
        }
    }

    /// One read per counter; `None` if any read fails.
    fn read(&mut self) -> Option<PmuCounts> {
        Some(PmuCounts {
            instructions: self.instructions.read().ok()?,
            cycles: self.cycles.read().ok()?,
            llc_misses: self.llc_misses.read().ok()?,
        })
    }
}

/// Per-CPU and per-task PMU counts through `perf_event_open`.
///
/// # Examples
/// ```no_run
/// use rdt_pqos::perf::PerfPmu;
/// use rdt_pqos::{CpuSet, LogicalCpu, PmuSource};
/// let cpus: CpuSet = "0-3".parse()?;
/// match PerfPmu::open(&cpus) {
///     Ok(mut pmu) => println!("{:?}", pmu.read(LogicalCpu::new(0))),
///     Err(e) => eprintln!("no PMU: {e}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PerfPmu {
    /// Counters of each CPU that may be counted; `None` once opening it failed (not
    /// retried, so a poll never re-opens).
    cpus: BTreeMap<LogicalCpu, Option<Counters>>,
    /// Counters of each task read so far; `None` once opening failed.
    tasks: HashMap<TaskId, Option<Counters>>,
}

impl std::fmt::Debug for PerfPmu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfPmu")
            .field("cpus", &self.cpus.len())
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

fn cpu_target(cpu: LogicalCpu) -> impl Fn(&mut Builder) {
    move |b: &mut Builder| {
        b.one_cpu(cpu.get() as usize).any_pid();
    }
}

impl PerfPmu {
    /// Prepares counting on `cpus`: the counters of the lowest CPU are opened now, to find
    /// out whether this host can count at all; the others are opened on their first
    /// [`PmuSource::read`] and kept.
    ///
    /// # Errors
    /// [`PerfError::Cpu`] when the lowest CPU's counters cannot be opened (no PMU, no
    /// permission), [`PerfError::NoCpu`] for an empty set.
    pub fn open(cpus: &CpuSet) -> Result<Self, PerfError> {
        let first = cpus.first().ok_or(PerfError::NoCpu)?;
        let counters =
            Counters::open(cpu_target(first)).map_err(|(event, source)| PerfError::Cpu {
                event,
                cpu: first,
                source,
            })?;
        let mut map: BTreeMap<LogicalCpu, Option<Counters>> = BTreeMap::new();
        for cpu in cpus.iter() {
            map.insert(cpu, None);
        }
        map.insert(first, Some(counters));
        Ok(Self {
            cpus: map,
            tasks: HashMap::new(),
        })
    }

    /// Number of CPUs and tasks whose counters are open.
    #[must_use]
    pub fn open_targets(&self) -> (usize, usize) {
        (
            self.cpus.values().filter(|c| c.is_some()).count(),
            self.tasks.values().filter(|c| c.is_some()).count(),
        )
    }
}

impl PmuSource for PerfPmu {
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        let slot = self.cpus.get_mut(&cpu)?;
        if slot.is_none() {
            // First use of this CPU: open once; a failure is remembered (the entry is
            // removed) so later polls do not retry.
            if let Ok(c) = Counters::open(cpu_target(cpu)) {
                *slot = Some(c);
            } else {
                self.cpus.remove(&cpu);
                return None;
            }
        }
        self.cpus.get_mut(&cpu)?.as_mut()?.read()
    }

    fn read_task(&mut self, task: TaskId) -> Option<PmuCounts> {
        let counters = self.tasks.entry(task).or_insert_with(|| {
            let pid = i32::try_from(task.get()).ok()?;
            Counters::open(move |b: &mut Builder| {
                b.observe_pid(pid).any_cpu();
            })
            .ok()
        });
        counters.as_mut()?.read()
    }

    fn release_task(&mut self, task: TaskId) {
        // Dropping the counters closes their file descriptors.
        self.tasks.remove(&task);
    }
}

#[cfg(test)]
mod tests {
    use std::hint::black_box;
    use std::path::Path;

    use super::*;

    /// Whether the kernel registered a core PMU (`cpu`; `cpu_core`/`cpu_atom` on hybrid
    /// Intel parts). A VM without PMU passthrough has none.
    fn host_has_pmu() -> bool {
        ["cpu", "cpu_core", "cpu_atom"]
            .iter()
            .any(|d| Path::new("/sys/bus/event_source/devices").join(d).is_dir())
    }

    fn busy() -> u64 {
        (0..2_000_000u64).fold(0, |a, x| black_box(a ^ x.wrapping_mul(31)))
    }

    fn this_cpu_set() -> CpuSet {
        std::iter::once(LogicalCpu::new(0)).collect()
    }

    #[test]
    fn cpu_counters_count_where_the_host_has_a_pmu_and_fail_cleanly_where_not() {
        // arrange / act
        let opened = PerfPmu::open(&this_cpu_set());
        // assert: the outcome follows the kernel's own PMU registration
        if host_has_pmu() {
            let mut pmu = opened.expect("a host with a PMU counts (run as root)");
            let a = pmu.read(LogicalCpu::new(0)).expect("CPU 0 counts");
            busy();
            let b = pmu.read(LogicalCpu::new(0)).expect("CPU 0 counts");
            assert!(b.cycles >= a.cycles && b.instructions >= a.instructions);
            assert_eq!(pmu.open_targets(), (1, 0));
        } else {
            let e = opened.expect_err("no PMU: hardware events cannot be opened");
            assert!(
                matches!(e, PerfError::Cpu { cpu, event: "instructions", .. } if cpu.get() == 0),
                "{e:?}"
            );
            assert_eq!(
                e.to_string(),
                "cannot count instructions on CPU 0 with perf_event_open"
            );
            let source = std::error::Error::source(&e).expect("the errno is kept");
            assert!(!source.to_string().is_empty());
        }
    }

    #[test]
    fn task_counters_follow_the_thread_or_are_none_without_a_pmu() {
        // arrange: a source with no CPU, counting tasks only
        let me = TaskId::new(std::process::id());
        let mut pmu = PerfPmu {
            cpus: BTreeMap::new(),
            tasks: HashMap::new(),
        };
        // act
        let a = pmu.read_task(me);
        busy();
        let b = pmu.read_task(me);
        // assert
        if host_has_pmu() {
            let (a, b) = (
                a.expect("this thread counts"),
                b.expect("this thread counts"),
            );
            assert!(b.instructions > a.instructions, "{a:?} -> {b:?}");
            assert_eq!(pmu.open_targets(), (0, 1));
        } else {
            assert_eq!((a, b), (None, None));
            // the failed open is remembered, not retried at every poll
            assert_eq!((pmu.open_targets(), pmu.tasks.len()), ((0, 0), 1));
        }
        pmu.release_task(me);
        assert!(pmu.tasks.is_empty());
    }

    #[test]
    fn empty_cpu_set_and_unknown_cpus_are_errors_not_panics() {
        assert!(matches!(
            PerfPmu::open(&CpuSet::new()),
            Err(PerfError::NoCpu)
        ));
        if let Ok(mut pmu) = PerfPmu::open(&this_cpu_set()) {
            // CPUs outside the set given to open are not counted
            assert_eq!(pmu.read(LogicalCpu::new(4095)), None);
        }
    }
}

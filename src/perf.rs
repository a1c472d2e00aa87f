//! IPC, LLC misses and LLC references from the CPU's performance monitoring unit through
//! Linux `perf_event_open(2)`: [`PerfPmu`], the production [`PmuSource`].
//!
//! What is counted, as pqos does (pqos `lib/perf_monitoring.c`, spec §5.2-5.3): the generic
//! hardware events `PERF_COUNT_HW_INSTRUCTIONS`, `PERF_COUNT_HW_CPU_CYCLES` and
//! `PERF_COUNT_HW_CACHE_MISSES` (the kernel maps the last to the LLC-miss event of the CPU),
//! and where asked for (pqos: when the platform has a second general-purpose counter)
//! `PERF_COUNT_HW_CACHE_REFERENCES`, user and kernel mode, one perf event group per target:
//! - per logical CPU (`pid = -1, cpu = N`: every task on that CPU), for core groups; needs
//!   root, `CAP_PERFMON` or `perf_event_paranoid` <= 0;
//! - per task (`pid = TID, cpu = -1`: that thread on every CPU), for task groups.
//!
//! Unlike pqos, which opens each event on its own, the three events of a target form one
//! group (a software leader and three members): the kernel puts them on the PMU together,
//! so instructions and cycles cover the same window and IPC stays exact when other users
//! of the PMU force multiplexing; one `read(2)` of the leader gives all three counts with
//! the group's `time_enabled`/`time_running`, and each count is scaled by
//! `time_enabled / time_running` ([`scale_multiplexed`]) as `perf stat` does.
//!
//! Groups are opened once per CPU (on first use) or per task and kept open; a poll is one
//! `read(2)` per target, nothing is re-opened. A host without a PMU (most VMs: the kernel
//! says "PMU not available due to virtualization") cannot open hardware events:
//! [`PerfPmu::open`] fails, and callers use [`rdt_core::NoPmu`], so monitoring shows no IPC or
//! miss values rather than zeros. What is tested where: the grouping, the one read and the
//! scaling run with software events on any Linux (this crate's tests); hardware counting
//! and real multiplexing need a host with a PMU (the tests check them only there).
//!
//! # References
//! `perf_event_open(2)`; Linux `include/uapi/linux/perf_event.h`; pqos(8).

use std::collections::{BTreeMap, HashMap};
use std::io;

use perf_event::events::Hardware;
use perf_event::{Builder, Counter, Group};
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

/// The counters of one target, opened as one perf event group: a software leader (perf-event2's
/// [`Group`]) and the members, which the kernel schedules onto the PMU together, so their
/// counts cover the same time window even when more events are asked for than the PMU has
/// counters (multiplexing). One `read(2)` of the leader returns every member's count with
/// the group's `time_enabled` and `time_running` ([`Group::read`], `PERF_FORMAT_GROUP`).
struct Counters {
    group: Group,
    /// The members, in the order they were given.
    members: Vec<Counter>,
}

/// The events pqos counts, in [`PmuCounts`] order; LLC references last, when `references`.
fn pmu_events(references: bool) -> Vec<(Builder<'static>, &'static str)> {
    let mut events = vec![
        (Builder::new(Hardware::INSTRUCTIONS), "instructions"),
        (Builder::new(Hardware::CPU_CYCLES), "cycles"),
        (Builder::new(Hardware::CACHE_MISSES), "LLC misses"),
    ];
    if references {
        events.push((Builder::new(Hardware::CACHE_REFERENCES), "LLC references"));
    }
    events
}

/// A count scaled for multiplexing, as `perf stat` does: `value × time_enabled /
/// time_running`, the estimate of what the event would have counted had it been on the PMU
/// the whole time it was enabled. `None` while the group has not run yet (`time_running` 0:
/// nothing to estimate from). Exact (no scaling) when it ran the whole time.
///
/// # References
/// `perf_event_open(2)`, "read_format": `PERF_FORMAT_TOTAL_TIME_ENABLED`/`_RUNNING`.
#[must_use]
pub fn scale_multiplexed(value: u64, time_enabled: u64, time_running: u64) -> Option<u64> {
    if time_running == 0 {
        return None;
    }
    if time_running >= time_enabled {
        return Some(value);
    }
    let scaled = u128::from(value) * u128::from(time_enabled) / u128::from(time_running);
    Some(u64::try_from(scaled).unwrap_or(u64::MAX))
}

impl Counters {
    /// Opens `events` as one group on the target `target` configures, and enables it.
    fn open(
        events: impl IntoIterator<Item = (Builder<'static>, &'static str)>,
        target: impl Fn(&mut Builder),
    ) -> Result<Self, (&'static str, io::Error)> {
        let mut leader = Group::builder();
        target(&mut leader);
        let mut group = leader.build_group().map_err(|e| ("the group leader", e))?;
        let mut members = Vec::new();
        for (mut builder, name) in events {
            builder.exclude_kernel(false);
            target(&mut builder);
            members.push(group.add(&builder).map_err(|e| (name, e))?);
        }
        group.enable().map_err(|e| ("the group", e))?;
        Ok(Self { group, members })
    }

    /// The members' counts, scaled for multiplexing, from one read of the group; `None` if
    /// the read fails or the group has not been scheduled yet.
    fn read_scaled(&mut self) -> Option<Vec<u64>> {
        let data = self.group.read().ok()?;
        let nanos = |d: Option<std::time::Duration>| {
            d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        };
        let (enabled, running) = (nanos(data.time_enabled()), nanos(data.time_running()));
        self.members
            .iter()
            .map(|m| scale_multiplexed(data.get(m)?.value(), enabled, running))
            .collect()
    }

    /// pqos's three counts, and the references when they are a member.
    fn read(&mut self) -> Option<PmuCounts> {
        match *self.read_scaled()?.as_slice() {
            [instructions, cycles, llc_misses] => Some(PmuCounts {
                instructions,
                cycles,
                llc_misses,
                llc_references: None,
            }),
            [instructions, cycles, llc_misses, references] => Some(PmuCounts {
                instructions,
                cycles,
                llc_misses,
                llc_references: Some(references),
            }),
            _ => None,
        }
    }
}

/// Per-CPU and per-task PMU counts through `perf_event_open`.
///
/// # Examples
/// ```no_run
/// use rdt_pqos::perf::PerfPmu;
/// use rdt_pqos::{CpuSet, LogicalCpu, PmuSource};
/// let cpus: CpuSet = "0-3".parse()?;
/// match PerfPmu::open(&cpus, true) {
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
    /// Whether LLC references are a member of every group.
    references: bool,
}

impl std::fmt::Debug for PerfPmu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfPmu")
            .field("cpus", &self.cpus.len())
            .field("tasks", &self.tasks.len())
            .field("references", &self.references)
            .finish()
    }
}

fn cpu_target(cpu: LogicalCpu) -> impl Fn(&mut Builder) {
    move |b: &mut Builder| {
        b.one_cpu(cpu.get() as usize).any_pid();
    }
}

impl PerfPmu {
    /// Prepares counting on `cpus`, LLC references too when `references` (pqos counts them
    /// only where the platform has a second general-purpose counter,
    /// [`rdt_core::PmuCaps::llc_references`]): the counters of the lowest CPU are opened
    /// now, to find out whether this host can count at all; the others are opened on their
    /// first [`PmuSource::read`] and kept. When the references cannot be opened but the
    /// other events can, counting goes on without them ([`PerfPmu::counts_references`]).
    ///
    /// # Errors
    /// [`PerfError::Cpu`] when the lowest CPU's counters cannot be opened (no PMU, no
    /// permission), [`PerfError::NoCpu`] for an empty set.
    pub fn open(cpus: &CpuSet, references: bool) -> Result<Self, PerfError> {
        let first = cpus.first().ok_or(PerfError::NoCpu)?;
        let open = |references| Counters::open(pmu_events(references), cpu_target(first));
        let (counters, references) = match open(references) {
            Ok(c) => (Ok(c), references),
            Err(_) if references => (open(false), false),
            Err(e) => (Err(e), false),
        };
        let counters = counters.map_err(|(event, source)| PerfError::Cpu {
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
            references,
        })
    }

    /// Whether LLC references are counted ([`PmuCounts::llc_references`] is `Some`).
    #[must_use]
    pub const fn counts_references(&self) -> bool {
        self.references
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
            if let Ok(c) = Counters::open(pmu_events(self.references), cpu_target(cpu)) {
                *slot = Some(c);
            } else {
                self.cpus.remove(&cpu);
                return None;
            }
        }
        self.cpus.get_mut(&cpu)?.as_mut()?.read()
    }

    fn read_task(&mut self, task: TaskId) -> Option<PmuCounts> {
        let references = self.references;
        let counters = self.tasks.entry(task).or_insert_with(|| {
            let pid = i32::try_from(task.get()).ok()?;
            Counters::open(pmu_events(references), move |b: &mut Builder| {
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
        let opened = PerfPmu::open(&this_cpu_set(), true);
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
            references: false,
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
            PerfPmu::open(&CpuSet::new(), false),
            Err(PerfError::NoCpu)
        ));
        if let Ok(mut pmu) = PerfPmu::open(&this_cpu_set(), false) {
            // CPUs outside the set given to open are not counted
            assert_eq!(pmu.read(LogicalCpu::new(4095)), None);
        }
    }

    #[test]
    fn multiplexed_counts_are_scaled_to_the_enabled_time() {
        // ran the whole time: exact
        assert_eq!(scale_multiplexed(1000, 50, 50), Some(1000));
        // on the PMU half the time it was enabled: doubled
        assert_eq!(scale_multiplexed(1000, 100, 50), Some(2000));
        // a third of the time, rounded down
        assert_eq!(scale_multiplexed(10, 3, 1), Some(30));
        assert_eq!(scale_multiplexed(10, 100, 33), Some(30));
        // not scheduled yet: no estimate
        assert_eq!(scale_multiplexed(0, 100, 0), None);
        // huge values do not overflow
        assert_eq!(scale_multiplexed(u64::MAX, u64::MAX, 1), Some(u64::MAX));
    }

    #[test]
    fn a_group_of_software_events_is_read_in_one_go_and_follows_the_thread() {
        use perf_event::events::Software;
        // arrange: this thread's task clock, CPU clock and page faults as one group (every
        // Linux has software events, with or without a PMU)
        let events = [
            (Builder::new(Software::TASK_CLOCK), "task clock"),
            (Builder::new(Software::CPU_CLOCK), "cpu clock"),
            (Builder::new(Software::PAGE_FAULTS), "page faults"),
        ];
        let Ok(mut counters) = Counters::open(events, |b: &mut Builder| {
            b.observe_self().any_cpu();
        }) else {
            // perf_event_paranoid 3 (some distributions) forbids even this; nothing to test
            assert!(
                std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").is_ok_and(|p| p
                    .trim()
                    .parse::<i32>()
                    .unwrap_or(0)
                    > 2),
                "software events must open unless perf_event_paranoid forbids them"
            );
            return;
        };
        // act
        let a = counters.read_scaled().expect("one read of the group");
        busy();
        let pages: Vec<u8> = vec![1; 1 << 22];
        black_box(&pages);
        let b = counters.read_scaled().expect("one read of the group");
        // assert: three counts, each grown; the clocks advanced by the busy loop
        assert_eq!((a.len(), b.len()), (3, 3));
        assert!(b[0] > a[0] && b[1] > a[1], "{a:?} -> {b:?}");
        assert!(b[2] > a[2], "page faults counted: {a:?} -> {b:?}");
        assert_eq!(counters.members.len(), 3);
    }
}

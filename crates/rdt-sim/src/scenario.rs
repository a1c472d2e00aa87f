//! Workload scenarios: what each simulated CPU runs.
//!
//! A scenario gives some CPUs a [`Workload`]; every other CPU runs the scenario's `idle`
//! workload. The file format is a small JSON object (units in the field names; MiB = 2^20
//! bytes):
//!
//! ```json
//! {
//!   "idle": { "working_set_mib": 0.0625, "traffic_mibps": 1, "ipc": 0.5, "utilization": 0.02 },
//!   "workloads": [
//!     { "name": "pipeline", "cpus": "2-7", "working_set_mib": 4, "traffic_mibps": 400,
//!       "local_fraction": 0.9, "ipc": 1.8 },
//!     { "name": "thrasher", "cpus": "8-10", "working_set_mib": 512, "traffic_mibps": 12000,
//!       "local_fraction": 0.8, "ipc": 0.6 }
//!   ]
//! }
//! ```
//!
//! | field | unit / range | default |
//! |---|---|---|
//! | `workloads` | array, may be empty | `[]` |
//! | `workloads[i].name` | free text, for reports | none |
//! | `workloads[i].cpus` | CPU list in the kernel's list form (`2-7,9`) | required |
//! | `working_set_mib` | MiB, ≥ 0: the data the workload reuses | required (idle: 1/16) |
//! | `traffic_mibps` | MiB/s, ≥ 0: its L3 access stream, i.e. what it would read from memory if the L3 held none of its working set | required (idle: 1) |
//! | `local_fraction` | 0..=1: share of its memory traffic served by the local NUMA node | 1 |
//! | `ipc` | instructions per cycle, (0, 16], when every access hits | 1 (idle: 0.5) |
//! | `utilization` | 0..=1: fraction of time the CPU is busy (unhalted) | 1 (idle: 0.02) |
//! | `miss_floor` | 0..=1: misses no L3 capacity removes ([`crate::model`]) | 0.05 |
//! | `miss_curve_exponent` | 0.1..=16: `γ` of the miss curve `max(miss_floor, (1 - O/W)^γ)`; 1 uniform reuse, more: a hot part takes most of it | 1 |
//! | `instructions_per_op` | (0, 1e12]: instructions per application operation; the workload's ops/s = instructions/s ÷ this ([`crate::metrics`]); not for `idle` | none (no metric) |
//! | `start_s` | seconds of simulated time, 0..=1e9: when the workload starts (its CPUs run `idle` before) | 0 |
//! | `stop_s` | seconds, after `start_s`, ≤ 1e9: when it stops (its CPUs run `idle` from then on) | never |
//! | `phases` | array of at most [`MAX_PHASES`] `{ "at_s": T, FIELD: VALUE, ... }`: from `T` on, the workload with those fields changed (any field above but `name` and `cpus`); `at_s` strictly increasing, `start_s <= at_s < stop_s` | `[]` |
//! | `name` (top level) | free text, for reports | none |
//! | `provenance` (top level) | free text: where the numbers come from | none |
//! | `memory_peak_gbps` (top level) | 0.001..=1e6 decimal GB/s: the peak bandwidth of every memory domain, in place of the model's ([`crate::model`], "Memory bandwidth") | the model's |
//!
//! Time is the model clock ([`crate::SimPlatform::now`]), counted in nanoseconds: a time in
//! the file is rounded to the nanosecond; a workload runs from its `start_s` included to its
//! `stop_s` excluded, a phase applies from its `at_s` included.
//! [`crate::SimPlatform::advance`] cuts its interval at every such time, so counters grow
//! at each piece's own rates, exactly as if the clock had been advanced to each change in
//! turn.
//!
//! Unknown fields are errors (a typo must not silently change the model); every error names
//! the field's path, e.g. ``scenario field `workloads[1].local_fraction`: 1.5 is outside 0..=1``
//! or ``scenario field `workloads[0].phases[1].at_s`: 5 is not after the previous phase's
//! at_s (5)``.
//!
//! # Built-in scenarios
//! [`BUILTIN_SCENARIOS`] are files embedded from `crates/rdt-sim/scenarios/`, loaded with
//! [`Scenario::builtin`] or, wherever a scenario file is named (`pqos --sim-scenario`, a
//! [`crate::session::SessionOptions::scenario`]), as `builtin:NAME`
//! ([`Scenario::from_arg`]).

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use rdt_core::CpuSet;
use serde_json::{Map, Value};

use crate::ScenarioError;

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// A scenario time (seconds; finite, in `0..=`[`MAX_TIME_S`] once decoded) as a clock
/// instant, rounded to the nanosecond; out of range saturates.
fn instant(t_s: f64) -> Duration {
    Duration::try_from_secs_f64(t_s.max(0.0)).unwrap_or(Duration::MAX)
}

/// What one CPU runs. Rates and sizes are in bytes; see the module docs for their meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// A label for reports (`pipeline`, `thrasher`); not used by the model.
    pub name: Option<String>,
    /// Bytes of data the workload reuses (its working-set size).
    pub working_set_bytes: f64,
    /// Bytes/s of L3 accesses: what the workload would read from memory if the L3 held none of
    /// its working set.
    pub traffic_bytes_per_s: f64,
    /// Share (0..=1) of the memory traffic that goes to the local NUMA node.
    pub local_fraction: f64,
    /// Instructions per unhalted cycle when every L3 access hits.
    pub ipc: f64,
    /// Share (0..=1) of wall time the CPU is unhalted.
    pub utilization: f64,
    /// Lowest miss fraction (0..=1): the accesses that miss however much of the working set
    /// the L3 holds (streamed data, compulsory misses). [`crate::model::MISS_FLOOR`] unless
    /// the scenario says otherwise.
    pub miss_floor: f64,
    /// Exponent `γ` of the miss curve `m = max(miss_floor, (1 - O/W)^γ)` ([`crate::model`]):
    /// 1 when every byte of the working set is reused alike, above 1 when a hot part takes
    /// most of the reuse (the first bytes the L3 holds save the most misses).
    pub miss_curve_exponent: f64,
    /// Instructions retired per application operation (a packet, a request): the
    /// workload's application metric is `instructions/s ÷ instructions_per_op` operations/s
    /// ([`crate::SimPlatform::workload_metrics`]). `None`: no metric.
    pub instructions_per_op: Option<f64>,
}

impl Workload {
    /// The fields a scenario rarely sets at their defaults (for `..` in constructors): a
    /// [`crate::model::MISS_FLOOR`] floor, a linear miss curve, no application metric.
    const DEFAULT_SHAPE: Self = Self {
        name: None,
        working_set_bytes: 0.0,
        traffic_bytes_per_s: 0.0,
        local_fraction: 1.0,
        ipc: 1.0,
        utilization: 1.0,
        miss_floor: crate::model::MISS_FLOOR,
        miss_curve_exponent: 1.0,
        instructions_per_op: None,
    };

    /// The idle workload: a 64 KiB working set, 1 MiB/s of traffic, IPC 0.5 when running, busy
    /// 2% of the time (timer ticks and daemons).
    #[must_use]
    pub fn idle() -> Self {
        Self {
            name: None,
            working_set_bytes: MIB / 16.0,
            traffic_bytes_per_s: MIB,
            local_fraction: 1.0,
            ipc: 0.5,
            utilization: 0.02,
            ..Self::DEFAULT_SHAPE
        }
    }

    /// The seed paper's packet-processing pipeline: a 4 MiB working set per CPU (six CPUs,
    /// 24 MiB in all, the paper's 23 MB), 400 MiB/s of L3 accesses, 90% local, IPC 1.8.
    #[must_use]
    pub fn pipeline() -> Self {
        Self {
            name: Some("pipeline".into()),
            working_set_bytes: 4.0 * MIB,
            traffic_bytes_per_s: 400.0 * MIB,
            local_fraction: 0.9,
            ipc: 1.8,
            utilization: 1.0,
            ..Self::DEFAULT_SHAPE
        }
    }

    /// The seed paper's cache thrasher (stress-ng in a VM): a 512 MiB working set streamed at
    /// 12000 MiB/s per CPU, 80% local, IPC 0.6.
    #[must_use]
    pub fn thrasher() -> Self {
        Self {
            name: Some("thrasher".into()),
            working_set_bytes: 512.0 * MIB,
            traffic_bytes_per_s: 12000.0 * MIB,
            local_fraction: 0.8,
            ipc: 0.6,
            utilization: 1.0,
            ..Self::DEFAULT_SHAPE
        }
    }
}

/// A workload assigned to a set of CPUs, over a span of simulated time.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The CPUs.
    pub cpus: CpuSet,
    /// What each of them runs (each CPU runs its own copy) from [`Self::start_s`] until the
    /// first phase.
    pub workload: Workload,
    /// When the workload starts, seconds of simulated time ([`crate::SimPlatform::now`]);
    /// before it, its CPUs run the scenario's idle workload.
    pub start_s: f64,
    /// When it stops (its CPUs go idle), seconds; `None`: never.
    pub stop_s: Option<f64>,
    /// Changes at given times, in increasing [`Phase::at_s`] order: from each one's time on,
    /// the CPUs run its workload.
    pub phases: Vec<Phase>,
}

/// A change of an [`Assignment`]'s workload at a simulated time.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// When it takes effect, seconds of simulated time.
    pub at_s: f64,
    /// The workload from then on: the previous one with the fields the phase names changed.
    pub workload: Workload,
}

impl Assignment {
    /// `workload` on `cpus` from time 0, for ever.
    #[must_use]
    pub const fn new(cpus: CpuSet, workload: Workload) -> Self {
        Self {
            cpus,
            workload,
            start_s: 0.0,
            stop_s: None,
            phases: Vec::new(),
        }
    }

    /// What the CPUs run at simulated time `t`: `None` before [`Self::start_s`] or from
    /// [`Self::stop_s`] on (the CPUs are idle), else the last phase begun, or the workload.
    /// Times compare as [`Duration`]s (to the nanosecond), as the clock counts.
    #[must_use]
    pub fn at(&self, t: Duration) -> Option<&Workload> {
        if t < instant(self.start_s) || self.stop_s.is_some_and(|stop| t >= instant(stop)) {
            return None;
        }
        Some(
            self.phases
                .iter()
                .rev()
                .find(|p| instant(p.at_s) <= t)
                .map_or(&self.workload, |p| &p.workload),
        )
    }

    /// Every time at which what the CPUs run may change: the start, each phase, the stop.
    fn boundaries(&self) -> impl Iterator<Item = Duration> + '_ {
        std::iter::once(self.start_s)
            .chain(self.phases.iter().map(|p| p.at_s))
            .chain(self.stop_s)
            .map(instant)
    }

    /// The workload's name for reports: its `name`, else `workload<i>` with `i` its index.
    #[must_use]
    pub fn label(&self, i: usize) -> String {
        self.workload
            .name
            .clone()
            .unwrap_or_else(|| format!("workload{i}"))
    }
}

/// The largest scenario file read, in bytes (1 MiB): a scenario is a few lines per CPU.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;

/// What every CPU of the platform runs.
///
/// [`Default`] is the seed paper's scenario: [`Workload::pipeline`] on CPUs 2-7,
/// [`Workload::thrasher`] on CPUs 8-10, [`Workload::idle`] elsewhere.
///
/// # Examples
/// ```
/// use rdt_sim::Scenario;
/// let s: Scenario = r#"{"workloads":[{"cpus":"0-3","working_set_mib":8,"traffic_mibps":100}]}"#
///     .parse()
///     .unwrap();
/// assert_eq!(s.workloads.len(), 1);
/// assert!(r#"{"workloads":[{"cpus":"0","working_set_mib":8}]}"#.parse::<Scenario>()
///     .unwrap_err()
///     .to_string()
///     .contains("workloads[0].traffic_mibps"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// A name for reports (`dpdk-pipeline`); not used by the model.
    pub name: Option<String>,
    /// Where the scenario's numbers come from, for readers; not used by the model.
    pub provenance: Option<String>,
    /// The peak bandwidth of every memory domain, bytes/s, in place of the model's
    /// ([`crate::model`], "Memory bandwidth"); `None`: the model's.
    pub memory_peak_bytes_per_s: Option<f64>,
    /// The workload of every CPU not named in [`Self::workloads`], and of a named CPU while
    /// its workload has not started or has stopped.
    pub idle: Workload,
    /// Workloads by CPU set. A CPU may appear in at most one.
    pub workloads: Vec<Assignment>,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            name: None,
            provenance: None,
            memory_peak_bytes_per_s: None,
            idle: Workload::idle(),
            workloads: vec![
                Assignment::new(cpus(2..=7), Workload::pipeline()),
                Assignment::new(cpus(8..=10), Workload::thrasher()),
            ],
        }
    }
}

fn cpus(r: std::ops::RangeInclusive<u32>) -> CpuSet {
    r.map(rdt_core::LogicalCpu::new).collect()
}

impl Scenario {
    /// A scenario where every CPU is idle.
    #[must_use]
    pub fn all_idle() -> Self {
        Self {
            workloads: Vec::new(),
            ..Self::default()
        }
    }

    /// The built-in scenario `name` (one of [`BUILTIN_SCENARIOS`]), as its embedded file
    /// parses.
    ///
    /// # Errors
    /// [`ScenarioError::UnknownBuiltin`] for another name; a built-in file that does not
    /// parse is a bug (the crate's tests parse every one), reported as the parser's error.
    pub fn builtin(name: &str) -> Result<Self, ScenarioError> {
        let (_, text) = BUILTIN_SCENARIO_FILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ScenarioError::UnknownBuiltin { name: name.into() })?;
        text.parse()
    }

    /// A scenario named on a command line: `builtin:NAME` is [`Scenario::builtin`], anything
    /// else a file path ([`Scenario::from_path`]).
    ///
    /// # Errors
    /// As [`Scenario::builtin`] or [`Scenario::from_path`].
    pub fn from_arg(arg: impl AsRef<Path>) -> Result<Self, ScenarioError> {
        let arg = arg.as_ref();
        match arg.to_str().and_then(|s| s.strip_prefix(BUILTIN_PREFIX)) {
            Some(name) => Self::builtin(name),
            None => Self::from_path(arg),
        }
    }

    /// What `cpu` runs at simulated time `t`: its assignment's workload then
    /// ([`Assignment::at`]), else (not named, not started, stopped) the idle workload.
    #[must_use]
    pub fn workload_at(&self, cpu: rdt_core::LogicalCpu, t: Duration) -> &Workload {
        self.workloads
            .iter()
            .find(|a| a.cpus.contains(cpu))
            .and_then(|a| a.at(t))
            .unwrap_or(&self.idle)
    }

    /// The first time after `t` at which some CPU's workload changes (a start, a phase, a
    /// stop), or `None` when none does.
    #[must_use]
    pub fn next_change_after(&self, t: Duration) -> Option<Duration> {
        self.workloads
            .iter()
            .flat_map(Assignment::boundaries)
            .filter(|&b| b > t)
            .min()
    }

    /// Reads a scenario file (format in the module docs): a regular file of at most
    /// [`MAX_SCENARIO_BYTES`] ([`rdt_host::file::read_text`]).
    ///
    /// # Errors
    /// [`ScenarioError::Io`] when the file cannot be read, is not a regular file, is too large
    /// or is not UTF-8; otherwise as [`Scenario::from_str`].
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, ScenarioError> {
        let path = path.as_ref();
        let text = rdt_host::file::read_text(path, MAX_SCENARIO_BYTES).map_err(|source| {
            ScenarioError::Io {
                path: path.to_owned(),
                source,
            }
        })?;
        text.parse()
    }

    /// The workload of `cpu`: the first assignment naming it, else the idle workload.
    #[must_use]
    pub fn workload_of(&self, cpu: rdt_core::LogicalCpu) -> &Workload {
        self.workloads
            .iter()
            .find(|a| a.cpus.contains(cpu))
            .map_or(&self.idle, |a| &a.workload)
    }

    /// The scenario as a JSON value in the file format (what [`Scenario::from_value`] reads).
    /// Fields at their defaults that older files did not have (times, phases, miss-curve
    /// shape, metric, memory peak) are left out, so a scenario that does not use them reads
    /// as it always did.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut workloads = Vec::new();
        for a in &self.workloads {
            let mut m = workload_fields(&a.workload, false);
            m.insert("cpus".into(), Value::String(a.cpus.to_string()));
            if a.start_s > 0.0 {
                m.insert("start_s".into(), num(a.start_s));
            }
            if let Some(stop) = a.stop_s {
                m.insert("stop_s".into(), num(stop));
            }
            if !a.phases.is_empty() {
                let phases = a
                    .phases
                    .iter()
                    .map(|p| {
                        let mut pm = workload_fields(&p.workload, true);
                        pm.remove("name");
                        pm.insert("at_s".into(), num(p.at_s));
                        Value::Object(pm)
                    })
                    .collect();
                m.insert("phases".into(), Value::Array(phases));
            }
            workloads.push(Value::Object(m));
        }
        let mut root = Map::new();
        if let Some(n) = &self.name {
            root.insert("name".into(), Value::String(n.clone()));
        }
        if let Some(p) = &self.provenance {
            root.insert("provenance".into(), Value::String(p.clone()));
        }
        if let Some(peak) = self.memory_peak_bytes_per_s {
            root.insert("memory_peak_gbps".into(), num(peak / 1e9));
        }
        root.insert(
            "idle".into(),
            Value::Object(workload_fields(&self.idle, false)),
        );
        root.insert("workloads".into(), Value::Array(workloads));
        Value::Object(root)
    }

    /// Decodes a scenario from a JSON value in the file format.
    ///
    /// # Errors
    /// [`ScenarioError::Field`] naming the first field that is missing, unknown, of the wrong
    /// type, out of range or out of order; [`ScenarioError::CpuTwice`] when two workloads
    /// name one CPU.
    pub fn from_value(v: &Value) -> Result<Self, ScenarioError> {
        let root = v
            .as_object()
            .ok_or_else(|| field("(top level)", "expected a JSON object"))?;
        check_keys(root, "", ROOT_KEYS)?;
        let name = text_field(root, "", "name")?;
        let provenance = text_field(root, "", "provenance")?;
        let memory_peak_bytes_per_s =
            number(root, "", "memory_peak_gbps", PEAK_GBPS)?.map(|gbps| gbps * 1e9);
        let idle = match root.get("idle") {
            None => Workload::idle(),
            Some(v) => {
                let m = v
                    .as_object()
                    .ok_or_else(|| field("idle", "expected a JSON object"))?;
                check_keys(m, "idle.", WORKLOAD_KEYS_IDLE)?;
                decode_workload(m, "idle.", &Workload::idle(), false)?
            }
        };
        let mut workloads = Vec::new();
        let mut seen = CpuSet::new();
        if let Some(list) = root.get("workloads") {
            let list = list
                .as_array()
                .ok_or_else(|| field("workloads", "expected a JSON array"))?;
            for (i, w) in list.iter().enumerate() {
                let prefix = format!("workloads[{i}].");
                let m = w
                    .as_object()
                    .ok_or_else(|| field(&format!("workloads[{i}]"), "expected a JSON object"))?;
                check_keys(m, &prefix, WORKLOAD_KEYS)?;
                let cpus_field = format!("{prefix}cpus");
                let text = match m.get("cpus") {
                    None => return Err(field(&cpus_field, "missing (a CPU list such as \"2-7\")")),
                    Some(Value::String(s)) => s,
                    Some(other) => {
                        return Err(field(
                            &cpus_field,
                            &format!("expected a CPU list string such as \"2-7\", got {other}"),
                        ));
                    }
                };
                let set: CpuSet = text
                    .parse()
                    .map_err(|e: rdt_core::ParseCpuSetError| field(&cpus_field, &e.to_string()))?;
                if set.is_empty() {
                    return Err(field(&cpus_field, "the CPU list is empty"));
                }
                if let Some(cpu) = set.iter().find(|c| seen.contains(*c)) {
                    return Err(ScenarioError::CpuTwice {
                        field: cpus_field,
                        cpu: cpu.get(),
                    });
                }
                seen.extend(set.iter());
                let workload = decode_workload(m, &prefix, &Workload::idle(), true)?;
                let mut a = Assignment::new(set, workload);
                decode_times(m, &prefix, &mut a)?;
                workloads.push(a);
            }
        }
        Ok(Self {
            name,
            provenance,
            memory_peak_bytes_per_s,
            idle,
            workloads,
        })
    }
}

impl FromStr for Scenario {
    type Err = ScenarioError;

    /// Parses the JSON scenario format (module docs).
    fn from_str(s: &str) -> Result<Self, ScenarioError> {
        let v: Value = serde_json::from_str(s).map_err(|source| ScenarioError::Syntax {
            line: source.line(),
            column: source.column(),
            source,
        })?;
        Self::from_value(&v)
    }
}

impl fmt::Display for Scenario {
    /// The scenario in the file format (pretty JSON); it parses back to an equal scenario.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string_pretty(&self.to_value()).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

const ROOT_KEYS: &[&str] = &[
    "name",
    "provenance",
    "memory_peak_gbps",
    "idle",
    "workloads",
];
const WORKLOAD_KEYS: &[&str] = &[
    "name",
    "cpus",
    "working_set_mib",
    "traffic_mibps",
    "local_fraction",
    "ipc",
    "utilization",
    "miss_floor",
    "miss_curve_exponent",
    "instructions_per_op",
    "start_s",
    "stop_s",
    "phases",
];
const WORKLOAD_KEYS_IDLE: &[&str] = &[
    "name",
    "working_set_mib",
    "traffic_mibps",
    "local_fraction",
    "ipc",
    "utilization",
    "miss_floor",
    "miss_curve_exponent",
];
const PHASE_KEYS: &[&str] = &[
    "at_s",
    "working_set_mib",
    "traffic_mibps",
    "local_fraction",
    "ipc",
    "utilization",
    "miss_floor",
    "miss_curve_exponent",
    "instructions_per_op",
];

/// The most phases one workload may have.
pub const MAX_PHASES: usize = 1000;

/// The latest time a scenario may name, seconds (about 31.7 years of simulated time).
pub const MAX_TIME_S: f64 = 1.0e9;

/// `memory_peak_gbps`: decimal GB/s per memory domain.
const PEAK_GBPS: (f64, f64, &str) = (1e-3, 1.0e6, "0.001..=1e6");
const TIME: (f64, f64, &str) = (0.0, MAX_TIME_S, "0..=1e9");

/// The built-in scenarios, by name ([`Scenario::builtin`], `builtin:NAME` in
/// [`Scenario::from_arg`]).
///
/// | name | model | what |
/// |---|---|---|
/// | `dpdk-pipeline` | `skylake-sp` | the seed paper's DPDK IP pipeline (CPUs 2-7) and stress-ng aggressor (CPUs 8-10), both running from time 0 (the paper's three cases, statically) |
/// | `dpdk-pipeline-aggressor-at-10s` | `skylake-sp` | the same, the aggressor starting at 10 s of simulated time (a controller's experiment) |
/// | `dpdk-pipeline-alone` | `skylake-sp` | the pipeline alone (the paper's Table 3) |
///
/// Each file's `provenance` says where its numbers come from and how the model stands in
/// for the paper's Xeon E5-2628L v3; `crates/rdt-sim/scenarios/README.md` has the
/// calibration.
pub const BUILTIN_SCENARIOS: &[&str] = &[
    "dpdk-pipeline",
    "dpdk-pipeline-aggressor-at-10s",
    "dpdk-pipeline-alone",
];

const BUILTIN_SCENARIO_FILES: &[(&str, &str)] = &[
    (
        "dpdk-pipeline",
        include_str!("../scenarios/dpdk-pipeline.json"),
    ),
    (
        "dpdk-pipeline-aggressor-at-10s",
        include_str!("../scenarios/dpdk-pipeline-aggressor-at-10s.json"),
    ),
    (
        "dpdk-pipeline-alone",
        include_str!("../scenarios/dpdk-pipeline-alone.json"),
    ),
];

/// What [`Scenario::from_arg`] reads as a built-in scenario's name.
pub const BUILTIN_PREFIX: &str = "builtin:";

fn field(name: &str, problem: &str) -> ScenarioError {
    ScenarioError::Field {
        field: name.into(),
        problem: problem.into(),
    }
}

fn check_keys(m: &Map<String, Value>, prefix: &str, allowed: &[&str]) -> Result<(), ScenarioError> {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(field(
                &format!("{prefix}{k}"),
                &format!("unknown field (expected one of: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

/// Reads an optional number field and checks its range.
fn number(
    m: &Map<String, Value>,
    prefix: &str,
    key: &str,
    range: (f64, f64, &str),
) -> Result<Option<f64>, ScenarioError> {
    let name = format!("{prefix}{key}");
    let Some(v) = m.get(key) else { return Ok(None) };
    let x = v
        .as_f64()
        .ok_or_else(|| field(&name, &format!("expected a number, got {v}")))?;
    let (lo, hi, text) = range;
    let positive = matches!(key, "ipc" | "instructions_per_op");
    if !x.is_finite() || x < lo || x > hi || (positive && x <= 0.0) {
        return Err(field(&name, &format!("{x} is outside {text}")));
    }
    Ok(Some(x))
}

/// Reads an optional string field.
fn text_field(
    m: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Option<String>, ScenarioError> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(field(
            &format!("{prefix}{key}"),
            &format!("expected a string, got {other}"),
        )),
    }
}

fn decode_workload(
    m: &Map<String, Value>,
    prefix: &str,
    defaults: &Workload,
    required: bool,
) -> Result<Workload, ScenarioError> {
    const SIZE: (f64, f64, &str) = (0.0, 1.0e9, "0..=1e9");
    const UNIT: (f64, f64, &str) = (0.0, 1.0, "0..=1");
    const IPC: (f64, f64, &str) = (0.0, 16.0, "(0, 16]");
    const EXPONENT: (f64, f64, &str) = (0.1, 16.0, "0.1..=16");
    const PER_OP: (f64, f64, &str) = (0.0, 1.0e12, "(0, 1e12]");
    let name = text_field(m, prefix, "name")?;
    let need = |key: &str, v: Option<f64>| -> Result<Option<f64>, ScenarioError> {
        if required && v.is_none() {
            Err(field(&format!("{prefix}{key}"), "missing"))
        } else {
            Ok(v)
        }
    };
    let ws = need(
        "working_set_mib",
        number(m, prefix, "working_set_mib", SIZE)?,
    )?;
    let traffic = need("traffic_mibps", number(m, prefix, "traffic_mibps", SIZE)?)?;
    let local = number(m, prefix, "local_fraction", UNIT)?;
    let ipc = number(m, prefix, "ipc", IPC)?;
    let util = number(m, prefix, "utilization", UNIT)?;
    let floor = number(m, prefix, "miss_floor", UNIT)?;
    let exponent = number(m, prefix, "miss_curve_exponent", EXPONENT)?;
    let per_op = number(m, prefix, "instructions_per_op", PER_OP)?;
    Ok(Workload {
        name: name.or_else(|| defaults.name.clone()),
        working_set_bytes: ws.map_or(defaults.working_set_bytes, |x| x * MIB),
        traffic_bytes_per_s: traffic.map_or(defaults.traffic_bytes_per_s, |x| x * MIB),
        local_fraction: local.unwrap_or(if required {
            1.0
        } else {
            defaults.local_fraction
        }),
        ipc: ipc.unwrap_or(if required { 1.0 } else { defaults.ipc }),
        utilization: util.unwrap_or(if required { 1.0 } else { defaults.utilization }),
        miss_floor: floor.unwrap_or(defaults.miss_floor),
        miss_curve_exponent: exponent.unwrap_or(defaults.miss_curve_exponent),
        instructions_per_op: per_op.or(defaults.instructions_per_op),
    })
}

/// Reads a workload's `start_s`, `stop_s` and `phases` into `a` (whose workload is
/// decoded): times in `0..=`[`MAX_TIME_S`], `start_s < stop_s`, phases at
/// `start_s <= at_s < stop_s` in strictly increasing order, at most [`MAX_PHASES`].
fn decode_times(
    m: &Map<String, Value>,
    prefix: &str,
    a: &mut Assignment,
) -> Result<(), ScenarioError> {
    a.start_s = number(m, prefix, "start_s", TIME)?.unwrap_or(0.0);
    a.stop_s = number(m, prefix, "stop_s", TIME)?;
    if let Some(stop) = a.stop_s.filter(|stop| *stop <= a.start_s) {
        return Err(field(
            &format!("{prefix}stop_s"),
            &format!("{stop} is not after start_s ({})", a.start_s),
        ));
    }
    let Some(list) = m.get("phases") else {
        return Ok(());
    };
    let list = list
        .as_array()
        .ok_or_else(|| field(&format!("{prefix}phases"), "expected a JSON array"))?;
    if list.len() > MAX_PHASES {
        return Err(field(
            &format!("{prefix}phases"),
            &format!("{} phases, more than {MAX_PHASES}", list.len()),
        ));
    }
    let mut previous = a.workload.clone();
    let mut last_at: Option<f64> = None;
    for (j, v) in list.iter().enumerate() {
        let pp = format!("{prefix}phases[{j}].");
        let pm = v
            .as_object()
            .ok_or_else(|| field(&format!("{prefix}phases[{j}]"), "expected a JSON object"))?;
        check_keys(pm, &pp, PHASE_KEYS)?;
        let at_field = format!("{pp}at_s");
        let at = number(pm, &pp, "at_s", TIME)?.ok_or_else(|| field(&at_field, "missing"))?;
        if at < a.start_s {
            return Err(field(
                &at_field,
                &format!("{at} is before the workload's start_s ({})", a.start_s),
            ));
        }
        if let Some(stop) = a.stop_s.filter(|stop| at >= *stop) {
            return Err(field(
                &at_field,
                &format!("{at} is not before the workload's stop_s ({stop})"),
            ));
        }
        if let Some(before) = last_at.filter(|before| at <= *before) {
            return Err(field(
                &at_field,
                &format!("{at} is not after the previous phase's at_s ({before})"),
            ));
        }
        last_at = Some(at);
        let workload = decode_workload(pm, &pp, &previous, false)?;
        previous = workload.clone();
        a.phases.push(Phase { at_s: at, workload });
    }
    Ok(())
}

fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// `w`'s fields; with `all` false, leaves out the shape and metric fields at their defaults
/// (a phase needs `all`: a field it leaves out would be inherited from the previous phase).
#[allow(clippy::float_cmp)] // exact defaults, as decoded when absent
fn workload_fields(w: &Workload, all: bool) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(n) = &w.name {
        m.insert("name".into(), Value::String(n.clone()));
    }
    m.insert("working_set_mib".into(), num(w.working_set_bytes / MIB));
    m.insert("traffic_mibps".into(), num(w.traffic_bytes_per_s / MIB));
    m.insert("local_fraction".into(), num(w.local_fraction));
    m.insert("ipc".into(), num(w.ipc));
    m.insert("utilization".into(), num(w.utilization));
    if all || w.miss_floor != crate::model::MISS_FLOOR {
        m.insert("miss_floor".into(), num(w.miss_floor));
    }
    if all || w.miss_curve_exponent != 1.0 {
        m.insert("miss_curve_exponent".into(), num(w.miss_curve_exponent));
    }
    if let Some(per_op) = w.instructions_per_op {
        m.insert("instructions_per_op".into(), num(per_op));
    }
    m
}

#[cfg(test)]
mod tests {
    use rdt_core::LogicalCpu;

    use super::*;

    fn err(text: &str) -> String {
        text.parse::<Scenario>().unwrap_err().to_string()
    }

    #[test]
    fn parses_the_documented_example_with_defaults() {
        // arrange
        let text = r#"{"workloads":[{"cpus":"2-7","working_set_mib":4,"traffic_mibps":2000,
                       "local_fraction":0.9,"ipc":1.8},
                       {"cpus":"9","working_set_mib":0.5,"traffic_mibps":10}]}"#;
        // act
        let s: Scenario = text.parse().unwrap();
        // assert
        assert_eq!(s.workloads.len(), 2);
        let w = s.workload_of(LogicalCpu::new(5));
        assert!((w.working_set_bytes - 4.0 * MIB).abs() < 1e-6);
        assert!((w.traffic_bytes_per_s - 2000.0 * MIB).abs() < 1e-3);
        assert!((w.ipc - 1.8).abs() < 1e-12);
        let d = s.workload_of(LogicalCpu::new(9));
        assert!((d.local_fraction - 1.0).abs() < 1e-12 && (d.utilization - 1.0).abs() < 1e-12);
        assert_eq!(s.workload_of(LogicalCpu::new(0)), &Workload::idle());
    }

    #[test]
    fn errors_name_the_offending_field() {
        let cases = [
            (
                r#"{"workloads":[{"cpus":"1","working_set_mib":4}]}"#,
                "workloads[0].traffic_mibps",
            ),
            (
                r#"{"workloads":[{"working_set_mib":4,"traffic_mibps":1}]}"#,
                "workloads[0].cpus",
            ),
            (
                r#"{"workloads":[{"cpus":"1","working_set_mib":4,"traffic_mibps":1},
                   {"cpus":"2","working_set_mib":4,"traffic_mibps":1,"local_fraction":1.5}]}"#,
                "workloads[1].local_fraction",
            ),
            (
                r#"{"workloads":[{"cpus":"1","working_set_mib":"big","traffic_mibps":1}]}"#,
                "workloads[0].working_set_mib",
            ),
            (
                r#"{"workloads":[{"cpus":"1","working_set_mib":4,"traffic_mibps":1,"ipc":0}]}"#,
                "workloads[0].ipc",
            ),
            (
                r#"{"workloads":[{"cpus":"1","working_set_mib":4,"traffic_mib":1}]}"#,
                "workloads[0].traffic_mib",
            ),
            (
                r#"{"workloads":[{"cpus":"7-2x","working_set_mib":4,"traffic_mibps":1}]}"#,
                "workloads[0].cpus",
            ),
            (r#"{"idle":{"utilization":-1}}"#, "idle.utilization"),
            (r#"{"idle":{"cpus":"1"}}"#, "idle.cpus"),
            (r#"{"workload":[]}"#, "`workload`"),
            (r#"{"workloads":{}}"#, "`workloads`"),
        ];
        for (text, name) in cases {
            let e = err(text);
            assert!(e.contains(name), "{text}: {e}");
        }
    }

    #[test]
    fn cpu_in_two_workloads_is_rejected() {
        let e = "{\"workloads\":[{\"cpus\":\"1-3\",\"working_set_mib\":1,\"traffic_mibps\":1},\
                 {\"cpus\":\"3\",\"working_set_mib\":1,\"traffic_mibps\":1}]}"
            .parse::<Scenario>()
            .unwrap_err();
        assert!(
            matches!(e, ScenarioError::CpuTwice { cpu: 3, ref field } if field == "workloads[1].cpus")
        );
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let e = "{\n  \"workloads\": [,]\n}"
            .parse::<Scenario>()
            .unwrap_err();
        assert!(matches!(e, ScenarioError::Syntax { line: 2, .. }), "{e:?}");
    }

    #[test]
    fn display_parses_back_to_the_same_scenario() {
        let s = Scenario::default();
        let back: Scenario = s.to_string().parse().unwrap();
        assert_eq!(back.workloads.len(), 2);
        assert_eq!(back.workloads[0].cpus, s.workloads[0].cpus);
        let (a, b) = (&back.workloads[1].workload, &s.workloads[1].workload);
        assert!((a.traffic_bytes_per_s - b.traffic_bytes_per_s).abs() < 1e-3);
        assert_eq!(a.name, b.name);
    }
}

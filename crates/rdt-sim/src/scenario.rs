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
//!
//! Unknown fields are errors (a typo must not silently change the model); every error names
//! the field's path, e.g. ``scenario field `workloads[1].local_fraction`: 1.5 is outside 0..=1``.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use rdt_core::CpuSet;
use serde_json::{Map, Value};

use crate::ScenarioError;

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

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
}

impl Workload {
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
        }
    }
}

/// A workload assigned to a set of CPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The CPUs.
    pub cpus: CpuSet,
    /// What each of them runs (each CPU runs its own copy).
    pub workload: Workload,
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
    /// The workload of every CPU not named in [`Self::workloads`].
    pub idle: Workload,
    /// Workloads by CPU set. A CPU may appear in at most one.
    pub workloads: Vec<Assignment>,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            idle: Workload::idle(),
            workloads: vec![
                Assignment {
                    cpus: cpus(2..=7),
                    workload: Workload::pipeline(),
                },
                Assignment {
                    cpus: cpus(8..=10),
                    workload: Workload::thrasher(),
                },
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
            idle: Workload::idle(),
            workloads: Vec::new(),
        }
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
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut workloads = Vec::new();
        for a in &self.workloads {
            let mut m = workload_to_map(&a.workload);
            m.insert("cpus".into(), Value::String(a.cpus.to_string()));
            workloads.push(Value::Object(m));
        }
        let mut root = Map::new();
        root.insert("idle".into(), Value::Object(workload_to_map(&self.idle)));
        root.insert("workloads".into(), Value::Array(workloads));
        Value::Object(root)
    }

    /// Decodes a scenario from a JSON value in the file format.
    ///
    /// # Errors
    /// [`ScenarioError::Field`] naming the first field that is missing, unknown, of the wrong
    /// type or out of range; [`ScenarioError::CpuTwice`] when two workloads name one CPU.
    pub fn from_value(v: &Value) -> Result<Self, ScenarioError> {
        let root = v
            .as_object()
            .ok_or_else(|| field("(top level)", "expected a JSON object"))?;
        check_keys(root, "", &["idle", "workloads"])?;
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
                workloads.push(Assignment {
                    cpus: set,
                    workload,
                });
            }
        }
        Ok(Self { idle, workloads })
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

const WORKLOAD_KEYS: &[&str] = &[
    "name",
    "cpus",
    "working_set_mib",
    "traffic_mibps",
    "local_fraction",
    "ipc",
    "utilization",
];
const WORKLOAD_KEYS_IDLE: &[&str] = &[
    "name",
    "working_set_mib",
    "traffic_mibps",
    "local_fraction",
    "ipc",
    "utilization",
];

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
    if !x.is_finite() || x < lo || x > hi || (key == "ipc" && x <= 0.0) {
        return Err(field(&name, &format!("{x} is outside {text}")));
    }
    Ok(Some(x))
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
    let name = match m.get("name") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(field(
                &format!("{prefix}name"),
                &format!("expected a string, got {other}"),
            ));
        }
    };
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
    Ok(Workload {
        name,
        working_set_bytes: ws.map_or(defaults.working_set_bytes, |x| x * MIB),
        traffic_bytes_per_s: traffic.map_or(defaults.traffic_bytes_per_s, |x| x * MIB),
        local_fraction: local.unwrap_or(if required {
            1.0
        } else {
            defaults.local_fraction
        }),
        ipc: ipc.unwrap_or(if required { 1.0 } else { defaults.ipc }),
        utilization: util.unwrap_or(if required { 1.0 } else { defaults.utilization }),
    })
}

fn workload_to_map(w: &Workload) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(n) = &w.name {
        m.insert("name".into(), Value::String(n.clone()));
    }
    let num = |x: f64| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number);
    m.insert("working_set_mib".into(), num(w.working_set_bytes / MIB));
    m.insert("traffic_mibps".into(), num(w.traffic_bytes_per_s / MIB));
    m.insert("local_fraction".into(), num(w.local_fraction));
    m.insert("ipc".into(), num(w.ipc));
    m.insert("utilization".into(), num(w.utilization));
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

//! The policy of the noisy-neighbour controller (`rdt-agent --policy FILE`): which workloads
//! are protected, which are best-effort, and how far the best-effort ones may be squeezed.
//!
//! ```toml
//! interval_ms = 1000          # how often the controller reads the counters and decides
//! advisory = false            # true: decide and report, never write
//! contended_below = 0.95      # a protected workload below this share of its target is contended
//! dwell_intervals = 2         # intervals between two actions on one class
//! verify_intervals = 2        # intervals after an action before judging it
//! memory_peak_gbps = 128      # the memory domain's capacity; without it, the highest seen
//!
//! [[protected]]
//! name = "pipeline"
//! cpus = "2-7"                # or tasks = [1234], processes = ["ip_pipeline"]
//! target = "alone"            # or { llc_mib = 12 }, or { ipc = 1.5 }
//!
//! [[best_effort]]
//! name = "batch"              # a named class the controller makes (a resctrl group on resctrl)
//! cpus = "8-10"
//! min_ways = 2                # the floor of its L3 ways
//! min_mba_percent = 10        # the floor of its MBA (Intel); without it MBA is left alone
//! # min_mba_gbps = 2.5        # the same on AMD, whose MBA limits are absolute bandwidth
//! ```
//!
//! Same two formats as the classes of `--apply` ([`super::Config`]): TOML, or JSON for a
//! `.json` file (the same keys in objects), read with the same limits (a regular file of at
//! most [`super::MAX_CONFIG_BYTES`], UTF-8). Unknown keys are errors naming the key, file
//! and line, as everywhere.
//!
//! | key | type | meaning | default |
//! |---|---|---|---|
//! | `interval_ms` | integer, 100 to 60000 | the control interval, milliseconds | 1000 |
//! | `advisory` | boolean | decide and report only | false |
//! | `contended_below` | number, 0.5 to 1 | a protected workload's health (its reading ÷ its target) below which it is contended | 0.95 |
//! | `dwell_intervals` | integer, 1 to 1000 | intervals between two actions on one class | 2 |
//! | `verify_intervals` | integer, 1 to 1000 | intervals after an action before it is judged (kept, or reverted when it did not help) | 2 |
//! | `memory_peak_gbps` | number, more than 0, at most 100000 | the capacity of the memory domain the controller acts in, GB/s (10^9 bytes/s), the yardstick of memory-bandwidth pressure | learned: the highest total traffic of the workloads seen |
//! | `protected` | array of tables, at least one | workloads whose performance is defended | |
//! | `best_effort` | array of tables, at least one | workloads that may be squeezed | |
//!
//! A workload has `name` (as a class name: 1 to 64 bytes, no `/`, whitespace, `COS<n>`),
//! and its members: `cpus` (kernel list form), `tasks` (ids) and/or `processes` (`comm`
//! names), as the classes of `--apply` have them, each CPU, task and process in one
//! workload only. A best-effort workload may say `rest = true` instead: every CPU no other
//! workload lists (at most one may). The controller monitors a workload by its CPUs, or,
//! without CPUs, by the threads of its tasks and of the processes it names when it starts
//! (the OS interface only: resctrl monitor groups hold tasks). `cgroup = "/sys/fs/cgroup/..."`
//! (an absolute path) adds the processes of a cgroup (v2) directory, as they are when the
//! controller starts. `pods = { qos = "Guaranteed", class = "gold", namespace = "prod",
//! labels = { app = "db" } }` adds the processes of the Kubernetes containers the NRI plugin
//! (`rdt-agent nri`) recorded on this node ([`rdt_host::pods`], its run directory's
//! `nri-pods.json`) whose pod is of that QoS class (`Guaranteed`, `Burstable`,
//! `BestEffort`, any case), whose container is in that RDT class, whose pod is in that
//! namespace and carries those labels: each key optional (a string or a list of strings
//! for `qos`, `class` and `namespace`: any of them), every key given must match, at least
//! one key; resolved when the controller starts, as `cgroup`. So "the Guaranteed pods are
//! protected from the BestEffort ones" is `pods = { qos = "Guaranteed" }` and `pods = { qos
//! = "BestEffort" }`, with no CPU list. Then:
//! - `target` (protected): `"alone"` (learned: the best IPC it has shown, or its LLC
//!   occupancy without a PMU, decaying slowly), `{ llc_mib = N }` (LLC occupancy, MiB, >0),
//!   `{ ipc = X }` (instructions per cycle, >0), or what the application reports:
//!   `{ throughput = X }` (at least X) or `{ latency = X }` (at most X), in the
//!   application's own unit, with its source: `file = "/abs/path"` (a regular file of at
//!   most 1 MiB holding one number, or Prometheus text holding `metric`) or `prometheus =
//!   "http://HOST:PORT/PATH"` (a Prometheus-format endpoint, plain HTTP, read with a
//!   timeout of half the interval, at most 1 MiB) or `command = ["/abs/prog", "arg", ...]`
//!   (run each interval without a shell, stdin empty, killed after half the interval, its
//!   standard output of at most 1 MiB holding one number or Prometheus text; a status other
//!   than 0 is a failed read; `shell = true` with `command = "script"` runs it by
//!   `/bin/sh -c` instead), and `metric = "name"` or
//!   `"name{label=\"v\"}"` (required for an endpoint). A read that fails (timeout, parse
//!   error, metric missing) leaves that interval without a reading, logged with its cause:
//!   the controller decides nothing for it. Default `"alone"`.
//! - `min_ways` (best effort): 1 to 64, the fewest L3 ways it is ever left (also at least
//!   the platform's `min_cbm_bits`). Default 1.
//! - `min_mba_percent` (best effort): 1 to 100; present, the controller may throttle its
//!   memory bandwidth down to this percent of the peak (Intel's MBA, a delay); absent, it
//!   never touches the class's MBA.
//! - `min_mba_gbps` (best effort): more than 0, at most 100000; the same floor in GB/s
//!   (10^9 bytes/s) per L3 domain, for parts whose MBA limits are absolute bandwidth (AMD:
//!   units of 1/8 GB/s, so the floor is rounded up to a multiple of 0.125). A workload
//!   gives one of the two: the one that fits the part, checked when the controller starts
//!   ([`Policy::check_mba`]).
//! - `mba_regions` (best effort, with `min_mba_percent`): memory region ids (the ACPI
//!   MRRM's, `pqos --iface=mmio --print-mem-regions`), such as `[1]` for a CXL region: the
//!   controller throttles the class's bandwidth to those regions only, with RDT 1.3's
//!   region-aware MBA (its maximum-bandwidth control, `min_mba_percent` and each step as a
//!   share of the control window), and leaves its MBA and its other regions alone. Needs
//!   the MMIO interface (`--iface=mmio`); checked when the controller starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rdt_core::MemRegion;
pub use rdt_host::pods::PodSelector;

use super::error::Location;
use super::node::{self, Entry, Format, Node, Shortened, Value};
use super::parse::{WORKLOAD_KEYS, Workloads};
use super::{ClassSpec, ConfigError, ConfigErrorKind};

const TOP_KEYS: &[&str] = &[
    "interval_ms",
    "advisory",
    "contended_below",
    "dwell_intervals",
    "verify_intervals",
    "memory_peak_gbps",
    "protected",
    "best_effort",
];
const PROTECTED_KEYS: &[&str] = &["target", "cgroup", "pods"];
const BEST_EFFORT_KEYS: &[&str] = &[
    "rest",
    "min_ways",
    "min_mba_percent",
    "mba_regions",
    "min_mba_gbps",
    "cgroup",
    "pods",
];
const POD_KEYS: &[&str] = &["qos", "class", "namespace", "labels"];

/// What an application reports, and which way is better.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AppGoal {
    /// Operations per second (any unit the application counts in): at least this.
    Throughput(f64),
    /// A latency (any unit): at most this.
    Latency(f64),
}

/// Where an application's metric is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppSource {
    /// A regular file holding one number, or Prometheus text format holding the metric.
    File(PathBuf),
    /// A Prometheus-format endpoint, `http://HOST:PORT/PATH` (plain HTTP).
    Prometheus {
        /// `HOST:PORT` (port 80 when not given).
        authority: String,
        /// The path, from `/`.
        path: String,
    },
    /// A command whose standard output holds one number, or Prometheus text holding the
    /// metric: run each interval without a shell (`argv[0]` an absolute path), or with
    /// `/bin/sh -c` when the policy asks (`shell = true`: `argv` is the one script).
    Command {
        /// The program and its arguments (with `shell`: the script alone).
        argv: Vec<String>,
        /// Run `argv[0]` as a script of `/bin/sh -c`.
        shell: bool,
    },
}

/// A target the application itself reports ([module docs](self)).
#[derive(Clone, Debug, PartialEq)]
pub struct AppTarget {
    /// The goal.
    pub goal: AppGoal,
    /// The source.
    pub source: AppSource,
    /// The metric's name (with its labels as `name{label="v"}` to pick one series);
    /// required for a Prometheus endpoint, optional for a file (without: the file holds one
    /// number).
    pub metric: Option<String>,
}

/// What a protected workload is defended to.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// As when it runs alone: learned from its own readings (the best IPC it has shown, or
    /// its LLC occupancy where there is no PMU).
    Alone,
    /// At least this LLC occupancy, in bytes.
    LlcBytes(u64),
    /// At least this many instructions per cycle.
    Ipc(f64),
    /// What the application reports ([`AppTarget`]).
    App(AppTarget),
}

/// A workload the controller defends.
#[derive(Clone, Debug, PartialEq)]
pub struct Protected {
    /// Its name and members (`cpus`, `tasks`, `processes`) with their lines.
    pub workload: ClassSpec,
    /// What it is defended to.
    pub target: Target,
    /// `cgroup`: a cgroup (v2) directory whose processes are members too.
    pub cgroup: Option<PathBuf>,
    /// `pods`: the Kubernetes containers whose processes are members too.
    pub pods: Option<PodSelector>,
}

/// A workload the controller may squeeze: a named class it makes and whose L3 ways (and,
/// with a floor, MBA) it changes.
#[derive(Clone, Debug, PartialEq)]
pub struct BestEffort {
    /// Its name (the named class's) and members, with their lines.
    pub workload: ClassSpec,
    /// `rest = true`: also every CPU no other workload lists.
    pub rest: bool,
    /// The fewest L3 ways it is ever left, at least 1.
    pub min_ways: u32,
    /// The lowest MBA it is ever throttled to, percent of the peak (Intel); `None`: not
    /// given in percent.
    pub min_mba_percent: Option<u8>,
    /// `mba_regions`: the memory regions (MRRM ids) whose region-aware MBA maximum the
    /// controller throttles instead of MBA (RDT 1.3, the MMIO interface): a percent `p` is
    /// `p` % of the control window in each. Empty: MBA.
    pub mba_regions: Vec<MemRegion>,
    /// The lowest MBA it is ever throttled to, GB/s (10^9 bytes/s) per L3 domain (AMD);
    /// `None`: not given in GB/s. With neither floor its MBA is never touched
    /// ([`BestEffort::throttles_mba`]); never both.
    pub min_mba_gbps: Option<f64>,
    /// `cgroup`: a cgroup (v2) directory whose processes are members too.
    pub cgroup: Option<PathBuf>,
    /// `pods`: the Kubernetes containers whose processes are members too.
    pub pods: Option<PodSelector>,
}

impl BestEffort {
    /// Whether the controller may throttle its MBA: it has a floor, in either unit.
    #[must_use]
    pub const fn throttles_mba(&self) -> bool {
        self.min_mba_percent.is_some() || self.min_mba_gbps.is_some()
    }
}

/// A controller policy ([module docs](self)), as read: nothing about the platform is
/// checked yet (the controller does that when it starts).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// The file it came from.
    pub file: PathBuf,
    /// The control interval.
    pub interval: Duration,
    /// Decide and report, never write.
    pub advisory: bool,
    /// Health (reading ÷ target) below which a protected workload is contended, 0.5 to 1.
    pub contended_below: f64,
    /// Intervals between two actions on one class.
    pub dwell_intervals: u32,
    /// Intervals after an action before it is judged.
    pub verify_intervals: u32,
    /// `memory_peak_gbps`: the memory domain's capacity, bytes/s; `None`: learned.
    pub memory_peak_bytes_per_s: Option<f64>,
    /// The protected workloads, in file order.
    pub protected: Vec<Protected>,
    /// The best-effort workloads, in file order.
    pub best_effort: Vec<BestEffort>,
}

impl Policy {
    /// Reads a policy file: JSON for a `.json` name, TOML otherwise.
    ///
    /// # Errors
    /// The file cannot be read (not a regular file, over 1 MiB, not UTF-8), or breaks a
    /// rule of the module docs: the error names the file, line and key.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = super::load::read(path)?;
        let json = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if json {
            Self::parse_json(&text, path)
        } else {
            Self::parse_toml(&text, path)
        }
    }

    /// Parses a policy in TOML.
    ///
    /// # Errors
    /// As [`Policy::load`].
    pub fn parse_toml(text: &str, file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let root = node::from_toml(text)
            .map_err(|e| syntax(file, e.line, format!("TOML syntax: {}", e.message)))?;
        Parser {
            file,
            format: Format::Toml,
        }
        .policy(&root)
    }

    /// Parses a policy in JSON (the TOML form's keys in objects).
    ///
    /// # Errors
    /// As [`Policy::load`].
    pub fn parse_json(text: &str, file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let root = node::from_json(text)
            .map_err(|e| syntax(file, Some(e.line), format!("JSON syntax: {}", e.message)))?;
        Parser {
            file,
            format: Format::Json,
        }
        .policy(&root)
    }

    /// Checks that each best-effort workload's MBA floor is given in the unit the part
    /// counts its limits in (`kind`: the MBA the controller may program, `None` without
    /// one): `min_mba_percent` where MBA is a percent of the peak (Intel's delay),
    /// `min_mba_gbps` where limits are absolute bandwidth (AMD: `2^width` units of 1/8 GB/s,
    /// at most `2^width / 8` GB/s; kernel `max_bw = 1 << width`, AMD PQoS "L3 external
    /// bandwidth enforcement").
    ///
    /// # Errors
    /// [`ConfigErrorKind::Platform`], naming the file, line and key
    /// (`best_effort[i].min_mba_gbps`) and the rule: a floor in the other unit, a GB/s floor
    /// above what is no limit on the part, or a floor on a part without such MBA.
    pub fn check_mba(&self, kind: Option<rdt_core::MbaKind>) -> Result<(), ConfigError> {
        for (i, b) in self.best_effort.iter().enumerate() {
            if !b.mba_regions.is_empty() {
                // region-aware MBA (percent of its control window), checked by the controller
                // against the platform's region controls
                continue;
            }
            let (floor_key, given) = match (b.min_mba_percent, b.min_mba_gbps) {
                (Some(p), _) => ("min_mba_percent", format!("{p} %")),
                (None, Some(g)) => ("min_mba_gbps", format!("{g} GB/s")),
                (None, None) => continue,
            };
            let fail = |message: String| {
                let mut e = Parser {
                    file: &self.file,
                    format: Format::Toml,
                }
                .error(
                    b.workload.lines.line(floor_key),
                    &format!("best_effort[{i}].{floor_key}"),
                    message,
                );
                e.set_kind(ConfigErrorKind::Platform);
                Err(e)
            };
            match (kind, b.min_mba_gbps) {
                (None, _) => {
                    return fail(format!(
                        "best-effort workload {:?}: an MBA floor ({given}) needs MBA in percent \
                         (Intel) or GB/s (AMD), which this platform does not have (or \
                         resctrl runs the mba_MBps controller)",
                        b.workload.name
                    ));
                }
                (Some(rdt_core::MbaKind::IntelDelay { .. }), Some(_)) => {
                    return fail(format!(
                        "best-effort workload {:?}: {given} is a floor in GB/s, for parts \
                         whose MBA limits are absolute bandwidth (AMD); this part's MBA is a \
                         percent of the peak bandwidth (Intel): give `min_mba_percent`",
                        b.workload.name
                    ));
                }
                (Some(rdt_core::MbaKind::AmdBandwidth { .. }), None) => {
                    return fail(format!(
                        "best-effort workload {:?}: {given} is a floor in percent, for parts \
                         whose MBA is a percent of the peak (Intel); this part's MBA limits \
                         are absolute bandwidth in units of 1/8 GB/s (AMD): give \
                         `min_mba_gbps`",
                        b.workload.name
                    ));
                }
                (Some(rdt_core::MbaKind::AmdBandwidth { width }), Some(g)) => {
                    #[allow(clippy::cast_precision_loss)] // 2^32 at most
                    let max = (1u64 << width.min(32)) as f64 / 8.0;
                    if g > max {
                        return fail(format!(
                            "best-effort workload {:?}: {given} is more than the {max} GB/s \
                             (2^{width} units of 1/8 GB/s) that is no limit on this part",
                            b.workload.name
                        ));
                    }
                }
                (Some(rdt_core::MbaKind::IntelDelay { .. }), None) => {}
            }
        }
        Ok(())
    }

    /// Every workload's name: the protected ones, then the best-effort ones.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.protected
            .iter()
            .map(|p| p.workload.name.as_str())
            .chain(self.best_effort.iter().map(|b| b.workload.name.as_str()))
    }
}

fn syntax(file: &Path, line: Option<usize>, message: String) -> ConfigError {
    ConfigError::new(
        ConfigErrorKind::Syntax,
        file,
        Location {
            line,
            ..Location::default()
        },
        message,
    )
}

struct Parser<'a> {
    file: &'a Path,
    format: Format,
}

impl Parser<'_> {
    fn error(&self, line: usize, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(
            ConfigErrorKind::Invalid,
            self.file,
            Location {
                line: Some(line),
                key: (!key.is_empty()).then(|| key.to_owned()),
                ..Location::default()
            },
            message,
        )
    }

    fn wrong_type(&self, node: &Node, key: &str, expected: &str) -> ConfigError {
        self.error(
            node.line,
            key,
            format!(
                "expected {expected}, found {}",
                node.value.describe(self.format)
            ),
        )
    }

    /// The entries of table `node`, each key at most once and in `allowed`.
    fn table<'n>(
        &self,
        node: &'n Node,
        key: &str,
        allowed: &[&str],
        what: &str,
    ) -> Result<&'n [Entry], ConfigError> {
        let Value::Table(entries) = &node.value else {
            return Err(self.wrong_type(node, key, "a table"));
        };
        for (i, e) in entries.iter().enumerate() {
            let path = if key.is_empty() {
                e.key.clone()
            } else {
                format!("{key}.{}", e.key)
            };
            if !allowed.contains(&e.key.as_str()) {
                return Err(self.error(
                    e.line,
                    &path,
                    format!(
                        "unknown key {:?}: {what} takes {}",
                        Shortened(&e.key),
                        allowed
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            if let Some(first) = entries[..i].iter().find(|f| f.key == e.key) {
                return Err(self.error(
                    e.line,
                    &path,
                    format!("key given twice (first on line {})", first.line),
                ));
            }
        }
        Ok(entries)
    }

    /// An integer in `range`.
    fn integer(
        &self,
        e: &Entry,
        key: &str,
        range: std::ops::RangeInclusive<u32>,
    ) -> Result<u32, ConfigError> {
        let Value::Integer(n) = e.node.value else {
            return Err(self.wrong_type(&e.node, key, "an integer"));
        };
        u32::try_from(n)
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                self.error(
                    e.line,
                    key,
                    format!("{n} is out of range: {} to {}", range.start(), range.end()),
                )
            })
    }

    /// A finite number in `range` (integer or float).
    fn number(
        &self,
        node: &Node,
        key: &str,
        range: std::ops::RangeInclusive<f64>,
    ) -> Result<f64, ConfigError> {
        #[allow(clippy::cast_precision_loss)] // shown and compared, not computed with
        let x = match &node.value {
            Value::Integer(i) => *i as f64,
            Value::Float(f) => f.parse::<f64>().unwrap_or(f64::NAN),
            _ => return Err(self.wrong_type(node, key, "a number")),
        };
        if x.is_finite() && range.contains(&x) {
            Ok(x)
        } else {
            Err(self.error(
                node.line,
                key,
                format!(
                    "{} is out of range: {} to {}",
                    node.value.describe(self.format),
                    range.start(),
                    range.end()
                ),
            ))
        }
    }

    /// `cgroup`: an absolute path without NUL.
    fn cgroup(&self, e: &Entry, key: &str) -> Result<PathBuf, ConfigError> {
        let Value::String(p) = &e.node.value else {
            return Err(self.wrong_type(&e.node, key, "a cgroup directory path (string)"));
        };
        if !p.starts_with('/') || p.contains('\0') {
            return Err(self.error(
                e.line,
                key,
                format!(
                    "{:?} is not an absolute path such as \"/sys/fs/cgroup/batch.slice\"",
                    Shortened(p)
                ),
            ));
        }
        Ok(PathBuf::from(p))
    }

    /// A string, or an array of strings (at least one), each non-empty and at most 317
    /// bytes (a Kubernetes label key's most).
    fn strings(&self, node: &Node, key: &str) -> Result<Vec<String>, ConfigError> {
        let one = |n: &Node| match &n.value {
            Value::String(s) if !s.is_empty() && s.len() <= 317 => Ok(s.clone()),
            Value::String(_) => Err(self.error(n.line, key, "1 to 317 bytes")),
            _ => Err(self.wrong_type(n, key, "a string or a list of strings")),
        };
        match &node.value {
            Value::Array(items) if items.is_empty() => {
                Err(self.error(node.line, key, "an empty list selects nothing"))
            }
            Value::Array(items) => items.iter().map(one).collect(),
            _ => Ok(vec![one(node)?]),
        }
    }

    /// `pods = { qos, class, namespace, labels }` ([module docs](self)).
    fn pods(&self, e: &Entry, key: &str) -> Result<PodSelector, ConfigError> {
        let entries = self.table(&e.node, key, POD_KEYS, "`pods`")?;
        if entries.is_empty() {
            return Err(self.error(
                e.line,
                key,
                "select by at least one of `qos`, `class`, `namespace`, `labels` (an empty \
                 selector would take every pod)",
            ));
        }
        let mut sel = PodSelector::default();
        for p in entries {
            let path = format!("{key}.{}", p.key);
            match p.key.as_str() {
                "qos" => {
                    for q in self.strings(&p.node, &path)? {
                        let canonical = match q.to_ascii_lowercase().as_str() {
                            "guaranteed" => "Guaranteed",
                            "burstable" => "Burstable",
                            "besteffort" => "BestEffort",
                            _ => {
                                return Err(self.error(
                                    p.line,
                                    &path,
                                    format!(
                                        "{:?} is not a QoS class: Guaranteed, Burstable or \
                                         BestEffort",
                                        Shortened(&q)
                                    ),
                                ));
                            }
                        };
                        sel.qos.push(canonical.to_owned());
                    }
                }
                "class" => sel.classes = self.strings(&p.node, &path)?,
                "namespace" => sel.namespaces = self.strings(&p.node, &path)?,
                _ => {
                    let Value::Table(labels) = &p.node.value else {
                        return Err(self.wrong_type(&p.node, &path, "a table of labels"));
                    };
                    if labels.is_empty() {
                        return Err(self.error(p.line, &path, "no label given"));
                    }
                    for l in labels {
                        let lpath = format!("{path}.{}", l.key);
                        match &l.node.value {
                            Value::String(v) if v.len() <= 317 => {
                                sel.labels.insert(l.key.clone(), v.clone());
                            }
                            Value::String(_) => {
                                return Err(self.error(l.line, &lpath, "at most 317 bytes"));
                            }
                            _ => return Err(self.wrong_type(&l.node, &lpath, "a string")),
                        }
                    }
                }
            }
        }
        Ok(sel)
    }

    fn boolean(&self, e: &Entry, key: &str) -> Result<bool, ConfigError> {
        match e.node.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.wrong_type(&e.node, key, "a boolean")),
        }
    }

    fn policy(&self, root: &Node) -> Result<Policy, ConfigError> {
        let entries = self.table(root, "", TOP_KEYS, "a policy")?;
        let mut policy = Policy {
            file: self.file.to_owned(),
            interval: Duration::from_secs(1),
            advisory: false,
            contended_below: 0.95,
            dwell_intervals: 2,
            verify_intervals: 2,
            memory_peak_bytes_per_s: None,
            protected: Vec::new(),
            best_effort: Vec::new(),
        };
        let mut workloads = Workloads::new(self.file, self.format);
        for e in entries {
            let key = e.key.as_str();
            match key {
                "interval_ms" => {
                    policy.interval =
                        Duration::from_millis(self.integer(e, key, 100..=60_000)?.into());
                }
                "advisory" => policy.advisory = self.boolean(e, key)?,
                "contended_below" => {
                    policy.contended_below = self.number(&e.node, key, 0.5..=1.0)?;
                }
                "dwell_intervals" => policy.dwell_intervals = self.integer(e, key, 1..=1000)?,
                "verify_intervals" => policy.verify_intervals = self.integer(e, key, 1..=1000)?,
                "memory_peak_gbps" => {
                    let gbps = self.number(&e.node, key, 0.0..=100_000.0)?;
                    if gbps <= 0.0 {
                        return Err(self.error(
                            e.line,
                            key,
                            "a memory capacity is more than 0 GB/s",
                        ));
                    }
                    policy.memory_peak_bytes_per_s = Some(gbps * 1e9);
                }
                "protected" => {
                    for (i, node) in self.items(e)?.iter().enumerate() {
                        let key = format!("protected[{i}]");
                        policy
                            .protected
                            .push(self.protected(node, &key, &mut workloads)?);
                    }
                }
                _ => {
                    for (i, node) in self.items(e)?.iter().enumerate() {
                        let key = format!("best_effort[{i}]");
                        let b = self.best_effort(node, &key, &mut workloads)?;
                        if let Some(other) = policy.best_effort.iter().find(|o| o.rest && b.rest) {
                            return Err(self.error(
                                node.line,
                                &format!("{key}.rest"),
                                format!(
                                    "`rest = true` is also the choice of {:?}: every other \
                                     CPU can be in one workload only",
                                    other.workload.name
                                ),
                            ));
                        }
                        policy.best_effort.push(b);
                    }
                }
            }
        }
        for (list, key, what) in [
            (
                policy.protected.is_empty(),
                "protected",
                "a workload to protect",
            ),
            (
                policy.best_effort.is_empty(),
                "best_effort",
                "a best-effort workload to squeeze",
            ),
        ] {
            if list {
                return Err(self.error(
                    root.line,
                    key,
                    format!("missing: a policy needs at least {what} (`[[{key}]]`)"),
                ));
            }
        }
        Ok(policy)
    }

    fn items<'n>(&self, e: &'n Entry) -> Result<&'n [Node], ConfigError> {
        match &e.node.value {
            Value::Array(items) => Ok(items),
            _ => Err(self.wrong_type(&e.node, &e.key, "an array of tables")),
        }
    }

    /// `node` without the keys in `own` (which the policy reads), for [`Workloads::parse`];
    /// any key that is neither refused, naming both lists.
    fn split<'n>(
        &self,
        node: &'n Node,
        key: &str,
        own: &[&str],
        what: &str,
    ) -> Result<(Node, Vec<&'n Entry>), ConfigError> {
        let allowed: Vec<&str> = WORKLOAD_KEYS.iter().chain(own).copied().collect();
        let entries = self.table(node, key, &allowed, what)?;
        let (mine, theirs): (Vec<&Entry>, Vec<&Entry>) =
            entries.iter().partition(|e| own.contains(&e.key.as_str()));
        let rest = Node {
            line: node.line,
            value: Value::Table(theirs.into_iter().cloned().collect()),
        };
        Ok((rest, mine))
    }

    fn protected(
        &self,
        node: &Node,
        key: &str,
        workloads: &mut Workloads<'_>,
    ) -> Result<Protected, ConfigError> {
        let (rest, own) = self.split(node, key, PROTECTED_KEYS, "a protected workload")?;
        let workload = workloads.parse(&rest)?;
        let mut target = Target::Alone;
        let mut cgroup = None;
        let mut pods = None;
        for e in own {
            if e.key == "cgroup" {
                cgroup = Some(self.cgroup(e, &format!("{key}.cgroup"))?);
                continue;
            }
            if e.key == "pods" {
                pods = Some(self.pods(e, &format!("{key}.pods"))?);
                continue;
            }
            let key = format!("{key}.target");
            target = match &e.node.value {
                Value::String(s) if s == "alone" => Target::Alone,
                Value::Table(entries)
                    if entries
                        .iter()
                        .any(|t| t.key == "throughput" || t.key == "latency") =>
                {
                    Target::App(self.app_target(&e.node, &key)?)
                }
                Value::Table(_) => {
                    let entries = self.table(&e.node, &key, &["llc_mib", "ipc"], "`target`")?;
                    match entries {
                        [one] if one.key == "llc_mib" => {
                            let mib =
                                self.number(&one.node, &format!("{key}.llc_mib"), 0.0..=1e6)?;
                            if mib <= 0.0 {
                                return Err(self.error(
                                    one.line,
                                    &format!("{key}.llc_mib"),
                                    "an LLC target is more than 0 MiB",
                                ));
                            }
                            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                            // at most 1e6 MiB
                            let bytes = (mib * 1024.0 * 1024.0).round() as u64;
                            Target::LlcBytes(bytes)
                        }
                        [one] => {
                            let ipc = self.number(&one.node, &format!("{key}.ipc"), 0.0..=64.0)?;
                            if ipc <= 0.0 {
                                return Err(self.error(
                                    one.line,
                                    &format!("{key}.ipc"),
                                    "an IPC target is more than 0",
                                ));
                            }
                            Target::Ipc(ipc)
                        }
                        _ => {
                            return Err(self.error(
                                e.line,
                                &key,
                                "exactly one of `llc_mib` or `ipc`",
                            ));
                        }
                    }
                }
                _ => {
                    return Err(self.wrong_type(
                        &e.node,
                        &key,
                        "\"alone\", { llc_mib = N }, { ipc = X } or { throughput|latency = X, \
                         file|prometheus = ..., metric = ... }",
                    ));
                }
            };
        }
        if workload.cpus.is_empty()
            && workload.tasks.is_empty()
            && workload.processes.is_empty()
            && cgroup.is_none()
            && pods.is_none()
        {
            return Err(self.error(
                node.line,
                key,
                format!(
                    "protected workload {:?} has no members: give `cpus`, `tasks`, `processes`, \
                     `cgroup` or `pods`",
                    workload.name
                ),
            ));
        }
        Ok(Protected {
            workload,
            target,
            cgroup,
            pods,
        })
    }

    /// `target = { throughput|latency = X, file = "/abs" | prometheus = "http://h:p/path",
    /// metric = "name" }`.
    fn app_target(&self, node: &Node, key: &str) -> Result<AppTarget, ConfigError> {
        let entries = self.table(
            node,
            key,
            &[
                "throughput",
                "latency",
                "file",
                "prometheus",
                "command",
                "shell",
                "metric",
            ],
            "an application `target`",
        )?;
        let mut goal = None;
        let mut source = None;
        let mut metric = None;
        let shell = match entries.iter().find(|e| e.key == "shell") {
            Some(e) => self.boolean(e, &format!("{key}.shell"))?,
            None => false,
        };
        for e in entries {
            let path = format!("{key}.{}", e.key);
            match e.key.as_str() {
                k @ ("throughput" | "latency") => {
                    if goal.is_some() {
                        return Err(self.error(
                            e.line,
                            &path,
                            "one of `throughput` or `latency`, not both",
                        ));
                    }
                    let x = self.number(&e.node, &path, 0.0..=1e18)?;
                    if x <= 0.0 {
                        return Err(self.error(e.line, &path, "a target is more than 0"));
                    }
                    goal = Some(if k == "throughput" {
                        AppGoal::Throughput(x)
                    } else {
                        AppGoal::Latency(x)
                    });
                }
                "shell" => {}
                k @ ("file" | "prometheus" | "command") => {
                    if source.is_some() {
                        return Err(self.error(
                            e.line,
                            &path,
                            "one of `file`, `prometheus` or `command`, not two",
                        ));
                    }
                    source = Some(self.app_source(k, &e.node, &path, shell)?);
                }
                _ => {
                    let Value::String(v) = &e.node.value else {
                        return Err(self.wrong_type(&e.node, &path, "a metric name (string)"));
                    };
                    if v.is_empty() || v.len() > 512 || v.chars().any(char::is_whitespace) {
                        return Err(self.error(
                            e.line,
                            &path,
                            format!(
                                "{:?} is not a metric name such as app_requests_per_second or \
                                 app_latency_seconds{{quantile=\"0.99\"}}",
                                Shortened(v)
                            ),
                        ));
                    }
                    metric = Some(v.clone());
                }
            }
        }
        let Some(goal) = goal else {
            return Err(self.error(node.line, key, "missing: `throughput` or `latency`"));
        };
        let Some(source) = source else {
            return Err(self.error(node.line, key, "missing: `file`, `prometheus` or `command`"));
        };
        if shell && !matches!(source, AppSource::Command { .. }) {
            return Err(self.error(
                node.line,
                &format!("{key}.shell"),
                "`shell` is for a `command`",
            ));
        }
        if matches!(source, AppSource::Prometheus { .. }) && metric.is_none() {
            return Err(self.error(
                node.line,
                key,
                "missing: `metric`, the name of the series to read from the endpoint",
            ));
        }
        Ok(AppTarget {
            goal,
            source,
            metric,
        })
    }

    /// The source `file`, `prometheus` or `command` (`kind`) of an application target.
    fn app_source(
        &self,
        kind: &str,
        node: &Node,
        key: &str,
        shell: bool,
    ) -> Result<AppSource, ConfigError> {
        if kind == "command" {
            return self.command(node, key, shell);
        }
        let Value::String(v) = &node.value else {
            return Err(self.wrong_type(node, key, "a string"));
        };
        if kind == "file" {
            if !v.starts_with('/') || v.contains('\0') {
                return Err(self.error(
                    node.line,
                    key,
                    format!("{:?} is not an absolute path", Shortened(v)),
                ));
            }
            return Ok(AppSource::File(PathBuf::from(v)));
        }
        prometheus_url(v).map_err(|m| self.error(node.line, key, m))
    }

    /// `command = ["/abs/prog", "arg", ...]`, or with `shell`, `command = "script"`.
    fn command(&self, node: &Node, key: &str, shell: bool) -> Result<AppSource, ConfigError> {
        const MAX_ARGS: usize = 256;
        const MAX_ARG_BYTES: usize = 4096;
        let check = |line: usize, v: &str| {
            if v.contains('\0') || v.len() > MAX_ARG_BYTES {
                Err(self.error(
                    line,
                    key,
                    format!(
                        "{:?}: an argument holds no NUL and at most {MAX_ARG_BYTES} bytes",
                        Shortened(v)
                    ),
                ))
            } else {
                Ok(v.to_owned())
            }
        };
        if shell {
            let Value::String(script) = &node.value else {
                return Err(self.wrong_type(node, key, "a shell script (string, with `shell`)"));
            };
            if script.trim().is_empty() {
                return Err(self.error(node.line, key, "an empty script"));
            }
            return Ok(AppSource::Command {
                argv: vec![check(node.line, script)?],
                shell: true,
            });
        }
        let Value::Array(items) = &node.value else {
            return Err(self.wrong_type(
                node,
                key,
                "the program and its arguments, [\"/abs/prog\", \"arg\", ...] (a string is \
                 run by a shell only with `shell = true`)",
            ));
        };
        if items.is_empty() || items.len() > MAX_ARGS {
            return Err(self.error(
                node.line,
                key,
                format!("1 to {MAX_ARGS} strings: the program, then its arguments"),
            ));
        }
        let mut argv = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::String(v) = &item.value else {
                return Err(self.wrong_type(item, &format!("{key}[{i}]"), "a string"));
            };
            argv.push(check(item.line, v)?);
        }
        if !argv[0].starts_with('/') {
            return Err(self.error(
                node.line,
                key,
                format!(
                    "{:?} is not an absolute path: the program is run without a shell or \
                     PATH search",
                    Shortened(&argv[0])
                ),
            ));
        }
        Ok(AppSource::Command { argv, shell: false })
    }

    fn best_effort(
        &self,
        node: &Node,
        key: &str,
        workloads: &mut Workloads<'_>,
    ) -> Result<BestEffort, ConfigError> {
        let (rest_node, own) = self.split(node, key, BEST_EFFORT_KEYS, "a best-effort workload")?;
        let workload = workloads.parse(&rest_node)?;
        let mut b = BestEffort {
            workload,
            rest: false,
            min_ways: 1,
            min_mba_percent: None,
            mba_regions: Vec::new(),
            min_mba_gbps: None,
            cgroup: None,
            pods: None,
        };
        for e in own {
            let path = format!("{key}.{}", e.key);
            match e.key.as_str() {
                "rest" => b.rest = self.boolean(e, &path)?,
                "min_ways" => b.min_ways = self.integer(e, &path, 1..=64)?,
                "cgroup" => b.cgroup = Some(self.cgroup(e, &path)?),
                "pods" => b.pods = Some(self.pods(e, &path)?),
                "mba_regions" => b.mba_regions = self.mba_regions(e, &path)?,
                "min_mba_gbps" => {
                    let gbps = self.number(&e.node, &path, 0.0..=100_000.0)?;
                    if gbps <= 0.0 {
                        return Err(self.error(
                            e.line,
                            &path,
                            "an MBA floor is more than 0 GB/s (leave the key out to never \
                             touch the class's MBA)",
                        ));
                    }
                    b.min_mba_gbps = Some(gbps);
                    b.workload.lines.insert(e.key.as_str(), e.line);
                }
                _ => {
                    let p = self.integer(e, &path, 1..=100)?;
                    b.min_mba_percent = u8::try_from(p).ok();
                    b.workload.lines.insert(e.key.as_str(), e.line);
                }
            }
        }
        if !b.mba_regions.is_empty() && b.min_mba_percent.is_none() {
            return Err(self.error(
                node.line,
                &format!("{key}.mba_regions"),
                "`mba_regions` names where the controller throttles the class's bandwidth: \
                 give its floor too (`min_mba_percent`)",
            ));
        }
        if b.min_mba_percent.is_some() && b.min_mba_gbps.is_some() {
            let line = b.workload.lines.line("min_mba_gbps");
            return Err(self.error(
                line,
                &format!("{key}.min_mba_gbps"),
                "one MBA floor: `min_mba_percent` (parts whose MBA is a percent, Intel) or \
                 `min_mba_gbps` (parts whose MBA limits are GB/s, AMD), not both",
            ));
        }
        let w = &b.workload;
        let members = !(w.cpus.is_empty()
            && w.tasks.is_empty()
            && w.processes.is_empty()
            && b.cgroup.is_none()
            && b.pods.is_none());
        if b.rest && !w.cpus.is_empty() {
            return Err(self.error(
                node.line,
                &format!("{key}.rest"),
                "`rest = true` takes every CPU no other workload lists: leave `cpus` out",
            ));
        }
        if !b.rest && !members {
            return Err(self.error(
                node.line,
                key,
                format!(
                    "best-effort workload {:?} has no members: give `cpus`, `tasks`, \
                     `processes`, `cgroup`, `pods` or `rest = true`",
                    w.name
                ),
            ));
        }
        Ok(b)
    }
}

impl Parser<'_> {
    /// `mba_regions`: a non-empty array of memory region ids (0 to 255), each once.
    fn mba_regions(&self, e: &Entry, key: &str) -> Result<Vec<MemRegion>, ConfigError> {
        let Value::Array(items) = &e.node.value else {
            return Err(self.wrong_type(&e.node, key, "an array of memory region ids"));
        };
        if items.is_empty() {
            return Err(self.error(
                e.line,
                key,
                "no memory region given: leave `mba_regions` out to throttle with MBA",
            ));
        }
        let mut out: Vec<MemRegion> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let k = format!("{key}[{i}]");
            let Value::Integer(n) = item.value else {
                return Err(self.wrong_type(item, &k, "a memory region id (integer)"));
            };
            let region = u8::try_from(n).map(MemRegion).map_err(|_| {
                self.error(
                    item.line,
                    &k,
                    format!("region {n} is out of range: a memory region id is 0 to 255"),
                )
            })?;
            if out.contains(&region) {
                return Err(self.error(item.line, &k, format!("region {region} is listed twice")));
            }
            out.push(region);
        }
        Ok(out)
    }
}

/// `http://HOST[:PORT][/PATH]` as a Prometheus source (plain HTTP only).
fn prometheus_url(url: &str) -> Result<AppSource, String> {
    let bad = || {
        format!(
            "{:?} is not a plain-HTTP endpoint such as \"http://127.0.0.1:9100/metrics\"",
            Shortened(url)
        )
    };
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    let ok = |c: char| c.is_ascii_alphanumeric() || "-.:[]".contains(c);
    if authority.is_empty() || !authority.chars().all(ok) || path.chars().any(char::is_control) {
        return Err(bad());
    }
    let authority = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        authority.to_owned()
    };
    Ok(AppSource::Prometheus {
        authority,
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toml(text: &str) -> Result<Policy, ConfigError> {
        Policy::parse_toml(text, "p.toml")
    }

    const GOOD: &str = "interval_ms = 500\ncontended_below = 0.9\nmemory_peak_gbps = 59.7\n\n\
        [[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\ntarget = { llc_mib = 12 }\n\n\
        [[best_effort]]\nname = \"batch\"\ncpus = \"8-10\"\nmin_ways = 2\nmin_mba_percent = 10\n";

    #[test]
    fn mba_regions_name_region_ids_once_and_need_a_floor() {
        let p = toml(&format!("{GOOD}mba_regions = [1, 0]\n")).unwrap();
        assert_eq!(p.best_effort[0].mba_regions, [MemRegion(1), MemRegion(0)]);
        assert!(toml(GOOD).unwrap().best_effort[0].mba_regions.is_empty());
        let refused = |tail: &str| toml(&format!("{GOOD}{tail}")).unwrap_err().to_string();
        assert_eq!(
            refused("mba_regions = [1, 1]\n"),
            "p.toml:15: best_effort[0].mba_regions[1]: region 1 is listed twice"
        );
        assert_eq!(
            refused("mba_regions = [256]\n"),
            "p.toml:15: best_effort[0].mba_regions[0]: region 256 is out of range: a memory \
             region id is 0 to 255"
        );
        assert!(refused("mba_regions = []\n").contains("no memory region given"));
        assert!(refused("mba_regions = \"cxl\"\n").contains("expected an array"));
        let no_floor = toml(
            "[[protected]]\nname = \"p\"\ncpus = \"2\"\n\
             [[best_effort]]\nname = \"b\"\ncpus = \"3\"\nmba_regions = [1]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            no_floor.contains("best_effort[0].mba_regions: `mba_regions` names where")
                && no_floor.contains("`min_mba_percent`"),
            "{no_floor}"
        );
    }

    #[test]
    fn a_policy_reads_its_workloads_targets_and_floors() {
        let p = toml(GOOD).unwrap();
        assert_eq!(p.interval, Duration::from_millis(500));
        assert!((p.contended_below - 0.9).abs() < 1e-12);
        assert!((p.memory_peak_bytes_per_s.unwrap() - 59.7e9).abs() < 1.0);
        assert_eq!(p.protected[0].workload.name, "pipeline");
        assert_eq!(p.protected[0].workload.cpus.to_string(), "2-7");
        assert_eq!(p.protected[0].target, Target::LlcBytes(12 << 20));
        assert_eq!(p.best_effort[0].min_ways, 2);
        assert_eq!(p.best_effort[0].min_mba_percent, Some(10));
        assert_eq!(p.names().collect::<Vec<_>>(), ["pipeline", "batch"]);
        let json = Policy::parse_json(
            r#"{"protected":[{"name":"p","tasks":[42],"target":{"ipc":1.5}}],
               "best_effort":[{"name":"b","rest":true}]}"#,
            "p.json",
        )
        .unwrap();
        assert_eq!(json.protected[0].target, Target::Ipc(1.5));
        let by_cgroup = toml(
            "[[protected]]\nname=\"p\"\ncgroup=\"/sys/fs/cgroup/p.slice\"\n\
             [[best_effort]]\nname=\"b\"\ncgroup=\"/sys/fs/cgroup/b.slice\"\n",
        )
        .unwrap();
        assert_eq!(
            by_cgroup.best_effort[0].cgroup.as_deref(),
            Some(Path::new("/sys/fs/cgroup/b.slice"))
        );
        assert!(json.best_effort[0].rest && json.best_effort[0].min_mba_percent.is_none());
        let app = toml(
            "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { latency = 2.5, prometheus = \
             \"http://127.0.0.1:9100/metrics\", metric = \"app_p99_ms\" }\n\
             [[protected]]\nname=\"q\"\ncpus=\"3\"\ntarget = { throughput = 1e6, file = \"/run/q\" }\n\
             [[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
        )
        .unwrap();
        assert_eq!(
            app.protected[0].target,
            Target::App(AppTarget {
                goal: AppGoal::Latency(2.5),
                source: AppSource::Prometheus {
                    authority: "127.0.0.1:9100".into(),
                    path: "/metrics".into()
                },
                metric: Some("app_p99_ms".into()),
            })
        );
        assert_eq!(
            app.protected[1].target,
            Target::App(AppTarget {
                goal: AppGoal::Throughput(1e6),
                source: AppSource::File("/run/q".into()),
                metric: None,
            })
        );
        let cmd = toml(
            "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, command = \
             [\"/usr/bin/app-stats\", \"--ops\", \"a b\"] }\n\
             [[protected]]\nname=\"q\"\ncpus=\"3\"\ntarget = { latency = 2, shell = true, \
             command = \"app-stats | tail -1\", metric = \"p99\" }\n\
             [[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
        )
        .unwrap();
        assert_eq!(
            cmd.protected[0].target,
            Target::App(AppTarget {
                goal: AppGoal::Throughput(5.0),
                source: AppSource::Command {
                    argv: vec!["/usr/bin/app-stats".into(), "--ops".into(), "a b".into()],
                    shell: false
                },
                metric: None,
            })
        );
        assert_eq!(
            cmd.protected[1].target,
            Target::App(AppTarget {
                goal: AppGoal::Latency(2.0),
                source: AppSource::Command {
                    argv: vec!["app-stats | tail -1".into()],
                    shell: true
                },
                metric: Some("p99".into()),
            })
        );
    }

    #[test]
    fn workloads_can_be_pods_selected_by_qos_class_class_namespace_and_label() {
        let p = toml(
            "[[protected]]\nname=\"guaranteed\"\npods = { qos = \"guaranteed\" }\n\
             [[best_effort]]\nname=\"besteffort\"\npods = { qos = [\"BestEffort\", \"burstable\"], \
             class = \"bronze\", namespace = [\"batch\", \"ci\"], labels = { tier = \"low\" } }\n",
        )
        .unwrap();
        assert_eq!(
            p.protected[0].pods,
            Some(PodSelector {
                qos: vec!["Guaranteed".into()],
                ..PodSelector::default()
            })
        );
        let b = p.best_effort[0].pods.clone().unwrap();
        assert_eq!(b.qos, ["BestEffort", "Burstable"]);
        assert_eq!(b.classes, ["bronze"]);
        assert_eq!(b.namespaces, ["batch", "ci"]);
        assert_eq!(b.labels.get("tier").map(String::as_str), Some("low"));
        // no CPU list needed; and JSON reads the same
        assert!(p.protected[0].workload.cpus.is_empty());
        let j = Policy::parse_json(
            r#"{"protected":[{"name":"g","pods":{"qos":"Guaranteed"}}],"best_effort":[{"name":"b","pods":{"qos":"BestEffort"}}]}"#,
            "p.json",
        )
        .unwrap();
        assert_eq!(j.best_effort[0].pods.as_ref().unwrap().qos, ["BestEffort"]);
    }

    #[test]
    fn bad_policies_are_refused_naming_the_line_and_key() {
        let cases: &[(&str, usize, &str, &str)] = &[
            (
                "interval_ms = 5\n[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                1,
                "interval_ms",
                "out of range",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\nl3 = { ways = 2 }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].l3",
                "unknown key",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1-3\"\n[[best_effort]]\nname=\"b\"\ncpus=\"3\"\n",
                6,
                "cpus",
                "also in class \"p\"",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { ipc = -1 }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.ipc",
                "out of range",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\nmin_ways = 0\n",
                7,
                "best_effort[0].min_ways",
                "out of range",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\n",
                1,
                "best_effort",
                "missing",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, prometheus = \"https://x/m\", metric = \"m\" }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.prometheus",
                "not a plain-HTTP endpoint",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, prometheus = \"http://h:1/m\" }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target",
                "missing: `metric`",
            ),
            (
                "memory_peak_gbps = 0\n[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                1,
                "memory_peak_gbps",
                "more than 0 GB/s",
            ),
            (
                "[[protected]]\nname=\"p\"\ncgroup=\"batch\"\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                3,
                "protected[0].cgroup",
                "not an absolute path",
            ),
            (
                "[[protected]]\nname=\"p\"\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                1,
                "protected[0]",
                "no members",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\nrest=true\n[[best_effort]]\nname=\"c\"\nrest=true\n",
                7,
                "best_effort[1].rest",
                "also the choice of \"b\"",
            ),
        ];
        for (text, line, key, words) in cases {
            let e = toml(text).unwrap_err();
            assert_eq!(e.line(), Some(*line), "{text:?}: {e}");
            assert_eq!(e.key(), Some(*key), "{text:?}: {e}");
            assert!(e.to_string().contains(words), "{text:?}: {e}");
        }
    }

    /// Issue 32: AMD floors in GB/s. A floor is read in either unit (never both) and
    /// checked against the part: the wrong unit is refused naming the key, its line and
    /// the rule; a GB/s floor above the part's "no limit" too.
    #[test]
    fn an_mba_floor_is_given_in_the_unit_the_part_counts() {
        let text = |floor: &str| {
            format!(
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\n\
                 cpus=\"2\"\n{floor}\n"
            )
        };
        let amd = rdt_core::MbaKind::AmdBandwidth { width: 11 };
        let intel = rdt_core::MbaKind::IntelDelay {
            max_delay: 90,
            linear: true,
            per_thread: false,
        };
        let gbps = toml(&text("min_mba_gbps = 2.5")).unwrap();
        assert_eq!(gbps.best_effort[0].min_mba_gbps, Some(2.5));
        assert_eq!(gbps.best_effort[0].min_mba_percent, None);
        assert!(gbps.best_effort[0].throttles_mba());
        gbps.check_mba(Some(amd)).unwrap();
        let e = gbps.check_mba(Some(intel)).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Platform, "{e}");
        assert_eq!(e.line(), Some(7), "{e}");
        assert_eq!(e.key(), Some("best_effort[0].min_mba_gbps"), "{e}");
        assert!(e.to_string().contains("give `min_mba_percent`"), "{e}");
        let percent = toml(&text("min_mba_percent = 10")).unwrap();
        percent.check_mba(Some(intel)).unwrap();
        let e = percent.check_mba(Some(amd)).unwrap_err();
        assert_eq!(e.key(), Some("best_effort[0].min_mba_percent"), "{e}");
        assert_eq!(e.line(), Some(7), "{e}");
        assert!(e.to_string().contains("give `min_mba_gbps`"), "{e}");
        let e = percent.check_mba(None).unwrap_err();
        assert!(e.to_string().contains("mba_MBps"), "{e}");
        // 2^11 eighths of a GB/s = 256 GB/s is no limit on an 11-bit part
        toml(&text("min_mba_gbps = 256"))
            .unwrap()
            .check_mba(Some(amd))
            .unwrap();
        let e = toml(&text("min_mba_gbps = 256.125"))
            .unwrap()
            .check_mba(Some(amd))
            .unwrap_err();
        assert!(e.to_string().contains("more than the 256 GB/s"), "{e}");
        // no floor: nothing to check, on any part
        let none = toml(&text("")).unwrap();
        assert!(!none.best_effort[0].throttles_mba());
        none.check_mba(None).unwrap();
        let e = toml(&text("min_mba_percent = 10\nmin_mba_gbps = 2")).unwrap_err();
        assert_eq!(e.key(), Some("best_effort[0].min_mba_gbps"), "{e}");
        assert_eq!(e.line(), Some(8), "{e}");
        assert!(e.to_string().contains("not both"), "{e}");
        for bad in [
            "min_mba_gbps = 0",
            "min_mba_gbps = -1",
            "min_mba_gbps = \"2\"",
        ] {
            let e = toml(&text(bad)).unwrap_err();
            assert_eq!(e.key(), Some("best_effort[0].min_mba_gbps"), "{bad}: {e}");
            assert_eq!(e.line(), Some(7), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_pod_selectors_are_refused_naming_the_line_and_key() {
        let cases: &[(&str, usize, &str, &str)] = &[
            (
                "[[protected]]\nname=\"p\"\npods = { qos = \"Platinum\" }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                3,
                "protected[0].pods.qos",
                "not a QoS class",
            ),
            (
                "[[protected]]\nname=\"p\"\npods = {}\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                3,
                "protected[0].pods",
                "at least one of",
            ),
            (
                "[[protected]]\nname=\"p\"\npods = { node = \"x\" }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                3,
                "protected[0].pods.node",
                "unknown key",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\npods = { namespace = [] }\n",
                6,
                "best_effort[0].pods.namespace",
                "selects nothing",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\n[[best_effort]]\nname=\"b\"\npods = { labels = { app = 1 } }\n",
                6,
                "best_effort[0].pods.labels.app",
                "expected a string",
            ),
        ];
        for (text, line, key, words) in cases {
            let e = toml(text).unwrap_err();
            assert_eq!(e.line(), Some(*line), "{text:?}: {e}");
            assert_eq!(e.key(), Some(*key), "{text:?}: {e}");
            assert!(e.to_string().contains(words), "{text:?}: {e}");
        }
    }

    #[test]
    fn bad_commands_are_refused_naming_the_line_and_key() {
        let cases: &[(&str, usize, &str, &str)] = &[
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, command = \"app-stats\" }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.command",
                "run by a shell only with `shell = true`",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, command = [\"app-stats\"] }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.command",
                "not an absolute path",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, command = [] }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.command",
                "1 to 256 strings",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, shell = true, file = \"/run/x\" }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.shell",
                "for a `command`",
            ),
            (
                "[[protected]]\nname=\"p\"\ncpus=\"1\"\ntarget = { throughput = 5, file = \"/run/x\", command = [\"/bin/x\"] }\n[[best_effort]]\nname=\"b\"\ncpus=\"2\"\n",
                4,
                "protected[0].target.command",
                "not two",
            ),
        ];
        for (text, line, key, words) in cases {
            let e = toml(text).unwrap_err();
            assert_eq!(e.line(), Some(*line), "{text:?}: {e}");
            assert_eq!(e.key(), Some(*key), "{text:?}: {e}");
            assert!(e.to_string().contains(words), "{text:?}: {e}");
        }
    }
}

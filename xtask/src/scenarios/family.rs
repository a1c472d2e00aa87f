//! A scenario family: `xtask/scenarios/NN-NAME/family.toml` (NN orders the table; NAME is
//! the family's name), next to the scenario and policy it names.
//!
//! ```toml
//! description = "a cache aggressor next to a DPDK pipeline (the seed paper)"
//! model = "skylake-sp"               # a built-in rdt-sim model
//! scenario = "scenario.json"         # rdt-sim's scenario format, relative to this file
//! policy = "policy.toml"             # rdt-agent's policy format, relative to this file
//! duration_s = 90                    # simulated seconds
//! contention = [[10, 60]]            # [start, end) of each contention phase, seconds
//! best_effort = ["aggressor"]        # scenario workloads whose throughput is best-effort
//!
//! [oracle]                           # the sweep's levels (all optional)
//! ways = [1, 2, 3, 4, 6, 8, 11]      # L3 ways of each best-effort class [default: all]
//! mba = [10, 20, 30, 50, 100]        # MBA: percent (Intel) or GB/s (AMD) [default: model's]
//! per_domain = true                  # also search each class's allocation per L3 domain
//! ```
//!
//! The policy's protected workloads are scenario workloads of the same names, each with
//! `instructions_per_op` (their operations are the throughput judged); so are the
//! `best_effort` ones. Contention phases are the family author's statement of when a
//! best-effort workload contends (they are what "within 5 s of contention starting", "per
//! phase" and "false action" count from); a family without any is a quiet one.

use std::path::{Path, PathBuf};

use rdt_pqos::config::policy::Policy;
use rdt_sim::Scenario;
use serde::Deserialize;

/// The largest simulated run, seconds (an hour).
const MAX_DURATION_S: u32 = 3600;

/// `family.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    description: String,
    model: String,
    scenario: String,
    policy: String,
    duration_s: u32,
    #[serde(default)]
    contention: Vec<[u32; 2]>,
    #[serde(default)]
    best_effort: Vec<String>,
    #[serde(default)]
    oracle: OracleSpec,
}

/// The oracle's sweep levels.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OracleSpec {
    /// L3 ways tried per class (default: every count from its floor to all).
    pub ways: Option<Vec<u32>>,
    /// MBA levels tried per class, percent (Intel) or GB/s (AMD); default
    /// [`super::oracle::DEFAULT_INTEL_MBA`] / [`super::oracle::DEFAULT_AMD_MBA_GBPS`], and
    /// always no limit.
    pub mba: Option<Vec<u32>>,
    /// Also search each class's allocation per L3 domain it has CPUs in.
    #[serde(default)]
    pub per_domain: bool,
}

/// A family, loaded and checked.
#[derive(Clone, Debug)]
pub struct Family {
    /// Its name (the directory's, without the order prefix).
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The rdt-sim model.
    pub model: String,
    /// The scenario.
    pub scenario: Scenario,
    /// The controller's policy.
    pub policy: Policy,
    /// Simulated seconds.
    pub duration_s: u32,
    /// Contention phases `[start, end)`, seconds, in order.
    pub phases: Vec<(u32, u32)>,
    /// The protected workloads' names (the policy's, in its order).
    pub protected: Vec<String>,
    /// The best-effort workloads' names.
    pub best_effort: Vec<String>,
    /// The sweep.
    pub oracle: OracleSpec,
}

/// Loads every family under `dir` (each subdirectory with a `family.toml`), in name order.
///
/// # Errors
/// A directory cannot be read; a family is invalid (naming its file and the rule).
pub fn load_all(dir: &Path) -> Result<Vec<Family>, String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("family.toml").is_file())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| load(d)).collect()
}

/// Loads the family in `dir`.
///
/// # Errors
/// As [`load_all`].
pub fn load(dir: &Path) -> Result<Family, String> {
    let path = dir.join("family.toml");
    let text = rdt_pqos::file::read_text(&path, 1 << 20)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let file: File = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let base = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a UTF-8 directory name", dir.display()))?;
    let name = base
        .split_once('-')
        .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(base, |(_, rest)| rest)
        .to_owned();
    let err = |what: String| format!("{}: {what}", path.display());
    let scenario = if file.scenario.starts_with(rdt_sim::BUILTIN_PREFIX) {
        Scenario::from_arg(&file.scenario)
    } else {
        Scenario::from_path(dir.join(&file.scenario))
    }
    .map_err(|e| err(format!("scenario {}: {e}", file.scenario)))?;
    let policy = Policy::load(dir.join(&file.policy)).map_err(|e| err(format!("policy: {e}")))?;
    if policy.interval != std::time::Duration::from_secs(1) {
        return Err(err(format!(
            "policy {}: interval_ms must be 1000 (the suite samples each second)",
            file.policy
        )));
    }
    if file.duration_s == 0 || file.duration_s > MAX_DURATION_S {
        return Err(err(format!(
            "duration_s {} is outside 1..={MAX_DURATION_S}",
            file.duration_s
        )));
    }
    let mut phases = Vec::new();
    for [a, b] in &file.contention {
        if a >= b || *b > file.duration_s || phases.last().is_some_and(|&(_, e)| e > *a) {
            return Err(err(format!(
                "contention [{a}, {b}]: phases must be [start, end) with start < end <= \
                 duration_s, in order, not overlapping"
            )));
        }
        phases.push((*a, *b));
    }
    let names: Vec<String> = scenario
        .workloads
        .iter()
        .enumerate()
        .map(|(i, a)| a.label(i))
        .collect();
    let protected: Vec<String> = policy
        .protected
        .iter()
        .map(|p| p.workload.name.clone())
        .collect();
    for w in protected.iter().chain(&file.best_effort) {
        let Some(i) = names.iter().position(|n| n == w) else {
            return Err(err(format!(
                "workload {w:?} is not in the scenario (it has: {})",
                names.join(", ")
            )));
        };
        let a = &scenario.workloads[i];
        let counted = a.workload.instructions_per_op.is_some()
            || a.phases
                .iter()
                .any(|p| p.workload.instructions_per_op.is_some());
        if !counted {
            return Err(err(format!(
                "scenario workload {w:?} has no instructions_per_op: its throughput cannot be \
                 judged"
            )));
        }
    }
    Ok(Family {
        name,
        description: file.description,
        model: file.model,
        scenario,
        policy,
        duration_s: file.duration_s,
        phases,
        protected,
        best_effort: file.best_effort,
        oracle: file.oracle,
    })
}

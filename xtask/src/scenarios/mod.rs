//! `cargo xtask scenarios [--family NAME]`: the noisy-neighbour controller's scenario
//! suite (issue 32). Each family in `xtask/scenarios/` is a simulated model, a workload
//! scenario (rdt-sim's JSON format), a controller policy (rdt-agent's format) and its
//! contention phases ([`family`]). Each family runs four times on the in-process simulated
//! platform with a virtual clock, one second per control interval, as `rdt-agent --sim MODEL
//! --sim-virtual-clock` runs it ([`run`]):
//!
//! 1. the protected workloads alone (the denominators of "% of alone");
//! 2. everything with no controller;
//! 3. everything with the oracle's allocation: the best static allocation a sweep finds
//!    ([`oracle`]);
//! 4. everything with the controller ([`rdt_pqos::control::Agent`], started and ticked as
//!    rdt-agent does).
//!
//! The model's ground truth (each workload's operations, which the controller never reads)
//! gives the report's numbers and the goals ([`metrics`]). The command prints the
//! table and each family's run time; with every family it also writes the table to
//! [`TABLE`], the figure (one panel per family) to [`FIGURE`] and each family's trace to
//! `target/scenarios/FAMILY.csv` and the controller's events (rdt-agent's JSON lines) to
//! `target/scenarios/FAMILY.events.jsonl`. It is a benchmark, not a test: slow (minutes in debug),
//! and its goals are what the controller aims at, not what CI enforces.

pub mod family;
pub mod metrics;
pub mod oracle;
pub mod report;
pub mod run;

use std::path::Path;
use std::time::Instant;

use family::Family;

/// The table the command writes (with every family).
pub const TABLE: &str = "docs/figures/scenarios.md";
/// The figure the command writes (with every family).
pub const FIGURE: &str = "docs/figures/scenarios.svg";
/// Where the families are.
pub const DIR: &str = "xtask/scenarios";

/// One family's results.
#[derive(Debug)]
pub struct Outcome {
    /// The family.
    pub family: Family,
    /// The oracle's allocation, in words.
    pub oracle: String,
    /// Allocations the oracle's sweep judged.
    pub judged: usize,
    /// The four runs.
    pub runs: metrics::Runs,
    /// Seconds of wall time the family took (sweep and runs).
    pub wall_s: f64,
}

/// The task.
///
/// # Errors
/// A family cannot be read or run; a file cannot be written.
pub fn task(root: &Path, only: Option<&str>) -> Result<(), String> {
    let started = Instant::now();
    let families = family::load_all(&root.join(DIR))?;
    let chosen: Vec<Family> = match only {
        None => families,
        Some(name) => {
            let names: Vec<String> = families.iter().map(|f| f.name.clone()).collect();
            let f: Vec<Family> = families.into_iter().filter(|f| f.name == name).collect();
            if f.is_empty() {
                return Err(format!(
                    "no family {name:?} in {DIR} (there are: {})",
                    names.join(", ")
                ));
            }
            f
        }
    };
    let all = only.is_none();
    let mut outcomes = Vec::new();
    for family in chosen {
        let t0 = Instant::now();
        let (oracle, judged, runs) =
            run::family(&family).map_err(|e| format!("{}: {e}", family.name))?;
        let wall_s = t0.elapsed().as_secs_f64();
        crate::write(
            &root.join("target/scenarios"),
            &format!("{}.csv", family.name),
            report::csv(&family, &runs).as_bytes(),
        )?;
        crate::write(
            &root.join("target/scenarios"),
            &format!("{}.events.jsonl", family.name),
            format!("{}\n", runs.events.join("\n"))
                .trim_start()
                .as_bytes(),
        )?;
        outcomes.push(Outcome {
            family,
            oracle,
            judged,
            runs,
            wall_s,
        });
    }
    let table = report::markdown(&outcomes);
    print!("{table}");
    if all {
        for (file, text) in [(TABLE, table), (FIGURE, report::figure(&outcomes)?)] {
            let path = root.join(file);
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(file);
            crate::write(path.parent().unwrap_or(root), name, text.as_bytes())?;
        }
    }
    for o in &outcomes {
        println!(
            "{}: {:.1} s of wall time ({} allocations judged by the oracle's sweep)",
            o.family.name, o.wall_s, o.judged
        );
    }
    println!(
        "ran {} famil{} in {:.1} s of wall time ({} build)",
        outcomes.len(),
        if outcomes.len() == 1 { "y" } else { "ies" },
        started.elapsed().as_secs_f64(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    Ok(())
}

/// Runs the task from a release build of xtask (`cargo run --release -p xtask -- scenarios`).
///
/// # Errors
/// cargo cannot be run, or the task fails.
pub fn in_release(only: Option<&str>) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["run", "--release", "--package", "xtask", "--", "scenarios"]);
    if let Some(name) = only {
        cmd.args(["--family", name]);
    }
    let status = cmd
        .status()
        .map_err(|e| format!("running cargo for the release build: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the release build's run failed ({status})"))
    }
}

//! `cargo xtask paper-figure [--check]`: the seed white paper's experiment with the
//! noisy-neighbour controller, on the in-process simulated platform, as a time series (CSV)
//! and the figure the README shows.
//!
//! The scenario is rdt-sim's built-in `dpdk-pipeline-aggressor-at-10s` (skylake-sp standing
//! in for the paper's E5-2628L v3: see its provenance) with the aggressor stopping at
//! [`STOP_S`]. It runs [`END_S`] simulated seconds three times: without a controller, with
//! the controller allowed CAT only, and with CAT and MBA. Each second the ground truth of
//! the model (the workloads' operations per second, occupancy, memory traffic: never read by
//! the controller) and the aggressor's class's ways and MBA are recorded.
//!
//! Writes `target/paper/controller.csv` and `docs/figures/paper-controller.svg`, and prints
//! the goal numbers. `--check` renders the figure and fails when it differs from
//! the committed one, so that CI keeps it current (the model is deterministic).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;
use rdt_pqos::config::policy::Policy;
use rdt_pqos::control::{ActionKind, Agent};
use rdt_pqos::proc::ProcFs;
use rdt_pqos::sim::SessionOptions;
use rdt_pqos::{Backend, CacheDomain, CatResource, Iface, MbaResource, OpenOptions};
use rdt_sim::Scenario;

/// The aggressor stops here (seconds of simulated time).
pub const STOP_S: u32 = 60;
/// The experiment's length (seconds of simulated time).
pub const END_S: u32 = 90;
/// The committed figure.
pub const FIGURE: &str = "docs/figures/paper-controller.svg";

/// The controller's policy (`crates/rdt-agent/policies/paper.toml`: the pipeline protected
/// as when alone, the aggressor squeezed down to one way and 10 % of the memory bandwidth);
/// without `mba`, its MBA is left alone.
fn policy(mba: bool) -> Result<Policy, String> {
    let file = crate::workspace_root().join("crates/rdt-agent/policies/paper.toml");
    let mut policy = Policy::load(&file).map_err(|e| e.to_string())?;
    if !mba {
        for b in &mut policy.best_effort {
            b.min_mba_percent = None;
            b.min_mba_gbps = None;
        }
    }
    Ok(policy)
}

/// One second of one run.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Seconds since the start.
    pub t: u32,
    /// The pipeline's operations per second.
    pub pipeline_ops: f64,
    /// The pipeline's LLC occupancy, bytes.
    pub pipeline_llc: f64,
    /// The aggressor's operations per second.
    pub aggressor_ops: f64,
    /// The aggressor's memory traffic, bytes/s.
    pub aggressor_mem: f64,
    /// The aggressor's class's L3 ways and MBA percent (11 and 100 without a controller).
    pub ways: u32,
    /// MBA percent.
    pub mba: u8,
    /// The controller's actions this second.
    pub actions: Vec<ActionKind>,
}

/// A run's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No controller.
    None,
    /// The controller with CAT only.
    Cat,
    /// The controller with CAT and MBA.
    CatMba,
}

impl Mode {
    const ALL: [Self; 3] = [Self::None, Self::Cat, Self::CatMba];

    /// Its label in the figure and the report.
    const fn name(self) -> &'static str {
        match self {
            Self::None => "no controller",
            Self::Cat => "controller with CAT",
            Self::CatMba => "controller with CAT and MBA",
        }
    }

    /// Its name in the CSV.
    const fn key(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Cat => "cat",
            Self::CatMba => "cat+mba",
        }
    }
}

/// Runs one mode.
fn run(mode: Mode) -> Result<Vec<Sample>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new("skylake-sp")
    };
    let mut rdt = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .map_err(|e| format!("opening the simulated skylake-sp: {e}"))?;
    let mut scenario =
        Scenario::builtin("dpdk-pipeline-aggressor-at-10s").map_err(|e| e.to_string())?;
    for a in &mut scenario.workloads {
        if a.workload.name.as_deref() == Some("aggressor") {
            a.stop_s = Some(f64::from(STOP_S));
        }
    }
    let sim = rdt
        .simulated()
        .ok_or("no simulated platform")?
        .handle()
        .clone();
    sim.lock()
        .set_scenario(&scenario)
        .map_err(|e| e.to_string())?;
    let mut agent = match mode {
        Mode::None => None,
        Mode::Cat | Mode::CatMba => Some(
            Agent::start(
                &mut rdt,
                policy(mode == Mode::CatMba)?,
                &ProcFs::host(),
                false,
            )
            .map_err(|e| format!("starting the controller: {e}"))?,
        ),
    };
    let class = agent.as_ref().map(|a| a.classes()[0]);
    let mut out = Vec::new();
    for t in 1..=END_S {
        sim.advance(Duration::from_secs(1));
        let mut s = Sample {
            t,
            ways: 11,
            mba: 100,
            ..Sample::default()
        };
        for w in sim.workload_metrics() {
            match w.name.as_str() {
                "pipeline" => {
                    s.pipeline_ops = w.ops_per_s.unwrap_or(0.0);
                    s.pipeline_llc = w.occupancy_bytes;
                }
                "aggressor" => {
                    s.aggressor_ops = w.ops_per_s.unwrap_or(0.0);
                    s.aggressor_mem = w.memory_bytes_per_s;
                }
                _ => {}
            }
        }
        if let (Some(agent), Some(class)) = (agent.as_mut(), class) {
            let tick = agent
                .tick(&mut rdt, Duration::from_secs(t.into()))
                .map_err(|e| format!("t = {t} s: {e}"))?;
            s.actions = tick.events.iter().map(|e| e.decision.action).collect();
            let d = [CacheDomain::new(0)];
            let cat = rdt
                .cat_classes_in(CatResource::L3, &d)
                .map_err(|e| e.to_string())?;
            s.ways = cat[0]
                .iter()
                .find(|c| c.class == class)
                .map_or(11, |c| c.mask.ways().count_ones());
            let mba = rdt
                .bandwidth_classes_in(MbaResource::Mba, &d)
                .map_err(|e| e.to_string())?;
            s.mba = mba[0]
                .iter()
                .find(|c| c.class == class)
                .and_then(|c| u8::try_from(c.limit.value()).ok())
                .unwrap_or(100);
        }
        out.push(s);
    }
    if let Some(agent) = agent {
        agent.stop(&mut rdt).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The pipeline's and aggressor's throughput alone (before the aggressor, and the
/// aggressor's while it runs free): the denominators of the shares.
fn alone(runs: &[(Mode, Vec<Sample>)]) -> (f64, f64) {
    let free = &runs[0].1;
    let pipeline = free[8].pipeline_ops; // t = 9 s, the aggressor not started
    let aggressor = free[30].aggressor_ops; // t = 31 s, free
    (pipeline, aggressor)
}

/// The CSV: one row per mode and second.
fn csv(runs: &[(Mode, Vec<Sample>)]) -> String {
    let (p0, a0) = alone(runs);
    let mut out = String::from(
        "mode,t_s,pipeline_share,pipeline_llc_mib,aggressor_share,aggressor_mem_gbps,\
         aggressor_ways,aggressor_mba_percent,actions\n",
    );
    for (mode, samples) in runs {
        for s in samples {
            let actions: Vec<&str> = s.actions.iter().map(|a| a.name()).collect();
            let _ = writeln!(
                out,
                "{},{},{:.4},{:.2},{:.4},{:.2},{},{},{}",
                mode.key(),
                s.t,
                s.pipeline_ops / p0,
                s.pipeline_llc / f64::from(1 << 20),
                if a0 > 0.0 { s.aggressor_ops / a0 } else { 0.0 },
                s.aggressor_mem / 1e9,
                s.ways,
                s.mba,
                actions.join(" ")
            );
        }
    }
    out
}

/// The goal numbers of issue 25, as lines.
fn report(runs: &[(Mode, Vec<Sample>)]) -> String {
    let (p0, a0) = alone(runs);
    let mut out = String::new();
    for (mode, samples) in runs {
        let share = |t: usize| samples[t - 1].pipeline_ops / p0;
        let back_to = |goal: f64| {
            samples
                .iter()
                .filter(|s| s.t > 10 && s.t < STOP_S)
                .find(|s| s.pipeline_ops / p0 >= goal)
                .map_or_else(
                    || "never".to_owned(),
                    |s| format!("{} s after the start", s.t - 10),
                )
        };
        // the seconds that end after the aggressor started and before it stopped
        let during: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.t > 10 && s.t < STOP_S)
            .collect();
        let actions = during.iter().map(|s| s.actions.len()).sum::<usize>();
        let n = f64::from(u32::try_from(during.len()).unwrap_or(u32::MAX).max(1));
        let aggressor =
            during.iter().map(|s| s.aggressor_ops).sum::<f64>() / n / a0.max(f64::MIN_POSITIVE);
        let given_back = samples
            .iter()
            .filter(|s| s.t > STOP_S && s.ways == 11 && s.mba == 100)
            .map(|s| s.t - STOP_S)
            .next();
        let _ = writeln!(
            out,
            "{}: pipeline at {:.1} % of alone at 15 s, {:.1} % at 59 s; >= 94 %: {}; >= 97 %: {}; \
             {actions} reconfiguration(s) while the aggressor runs; aggressor at {:.1} % of its \
             free throughput; everything back {} after it stops",
            mode.name(),
            100.0 * share(15),
            100.0 * share(59),
            back_to(0.94),
            back_to(0.97),
            100.0 * aggressor,
            given_back.map_or_else(|| "never".to_owned(), |s| format!("{s} s")),
        );
    }
    out
}

/// The figure: the pipeline's throughput share in the three runs, and the aggressor's
/// ways and MBA under the controller with CAT and MBA.
fn figure(runs: &[(Mode, Vec<Sample>)]) -> Result<String, String> {
    let (p0, _) = alone(runs);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, bottom) = root.split_vertically(380);
        let end = f64::from(END_S);
        let mut c = ChartBuilder::on(&top)
            .caption(
                "DPDK pipeline next to a cache aggressor (10-60 s), simulated skylake-sp",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..end, 0.5f64..1.05f64)
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .y_desc("pipeline throughput / alone")
            .draw()
            .map_err(|e| e.to_string())?;
        for ((mode, samples), color) in runs.iter().zip([RED, BLUE, GREEN]) {
            c.draw_series(LineSeries::new(
                samples
                    .iter()
                    .map(|s| (f64::from(s.t), s.pipeline_ops / p0)),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(mode.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| e.to_string())?;
        let mba_run = &runs[2].1;
        let mut b = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..end, 0f64..105f64)
            .map_err(|e| e.to_string())?;
        b.configure_mesh()
            .x_desc("simulated time (s)")
            .y_desc("aggressor: % of ways / MBA %")
            .draw()
            .map_err(|e| e.to_string())?;
        b.draw_series(LineSeries::new(
            mba_run
                .iter()
                .map(|s| (f64::from(s.t), 100.0 * f64::from(s.ways) / 11.0)),
            BLACK.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?
        .label("L3 ways (% of 11)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        b.draw_series(LineSeries::new(
            mba_run.iter().map(|s| (f64::from(s.t), f64::from(s.mba))),
            MAGENTA.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?
        .label("MBA %")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], MAGENTA));
        b.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The task: runs the experiment, writes the CSV and the figure (or checks the figure).
///
/// # Errors
/// A run fails; a file cannot be written; with `check`, the figure differs.
pub fn task(root: &Path, check: bool) -> Result<(), String> {
    let runs: Vec<(Mode, Vec<Sample>)> = Mode::ALL
        .iter()
        .map(|&m| run(m).map(|s| (m, s)))
        .collect::<Result<_, _>>()?;
    print!("{}", report(&runs));
    let svg = figure(&runs)?;
    let target = root.join(FIGURE);
    let csv_path = root.join("target/paper/controller.csv");
    crate::write(
        csv_path.parent().unwrap_or(root),
        "controller.csv",
        csv(&runs).as_bytes(),
    )?;
    if check {
        let committed =
            std::fs::read_to_string(&target).map_err(|e| format!("{}: {e}", target.display()))?;
        if committed != svg {
            return Err(format!(
                "{} is not what the experiment gives now: run `cargo xtask paper-figure` and \
                 commit it",
                target.display()
            ));
        }
        return Ok(());
    }
    crate::write(
        target.parent().unwrap_or(root),
        "paper-controller.svg",
        svg.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    /// CI runs the experiment: the README's figure is what the model and the controller
    /// give now (a change of either makes this fail until the figure is made again).
    #[test]
    fn the_committed_figure_is_what_the_experiment_gives() {
        super::task(crate::workspace_root(), true).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The README runs the experiment's policy from a copy in its text: the same keys.
    #[test]
    fn the_readmes_copy_of_the_policy_is_the_experiments() {
        let root = crate::workspace_root();
        let file = std::fs::read_to_string(root.join("crates/rdt-agent/policies/paper.toml"))
            .expect("policy");
        let readme = std::fs::read_to_string(root.join("docs/guide/src/controller.md"))
            .expect("the guide's controller chapter");
        let body: String = file
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            readme.contains(body.trim()),
            "docs/guide/src/controller.md's paper.toml block differs from crates/rdt-agent/policies/paper.toml"
        );
    }
}

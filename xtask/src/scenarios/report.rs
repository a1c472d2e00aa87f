//! The suite's outputs: the markdown table, each family's CSV trace and the figure (one
//! panel per family, drawn as `xtask paper-figure` draws the paper's).

use std::fmt::Write as _;

use plotters::prelude::*;

use super::Outcome;
use super::family::Family;
use super::metrics::{self, Runs, Second, Share};

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_owned(), |v| format!("{:.1}", 100.0 * v))
}

fn share(s: Share) -> String {
    if s.worst.is_none() && s.mean.is_none() {
        return "–".to_owned();
    }
    format!("{} / {}", pct(s.worst), pct(s.mean))
}

fn seconds(v: &[Option<u32>]) -> String {
    if v.is_empty() {
        return "–".to_owned();
    }
    match v.iter().try_fold(0u32, |m, x| x.map(|x| m.max(x))) {
        Some(m) => format!("{m} s"),
        None => "never".to_owned(),
    }
}

/// The markdown report of `outcomes`.
#[must_use]
pub fn markdown(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "# The controller's scenario suite\n\n\
         Written by `cargo xtask scenarios` (xtask/src/scenarios/, families in \
         xtask/scenarios/): each family runs on the in-process simulated platform with a \
         virtual clock, one second per control interval, with the protected workloads \
         alone, with no controller, with the oracle's allocation (the best static allocation \
         a sweep finds, judged by the protected throughput, ties by best-effort throughput) \
         and with the controller (`rdt_control::Agent`, as `rdt-agent --sim-virtual-clock` \
         runs it). Throughput is the model's ground truth (operations per second), which \
         the controller never reads.\n\n\
         Shares are *worst / mean* over the contention phases' seconds, worst after the \
         first 5 s of each phase; \"t95\" is the time from a phase's start to the end of the \
         first second at 95 % of the oracle (the longest over phases); reconfigurations are \
         the most in one phase; false actions are actions outside every phase and the \
         10 s after it; best effort is its throughput over the phases ÷ the oracle's; \
         give-back is the longest time from a phase's end until every best-effort class has \
         all ways and no MBA limit again.\n\n",
    );
    out.push_str(
        "## Families\n\n| family | model | what | the oracle's allocation (allocations its \
         sweep judged) |\n|---|---|---|---|\n",
    );
    for o in outcomes {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} ({}) |",
            o.family.name, o.family.model, o.family.description, o.oracle, o.judged
        );
    }
    out.push_str(
        "\n## Results\n\n| family | protected % of alone: none | oracle | controller | \
         controller % of oracle | t95 | reconf./phase | false actions | best effort % of \
         oracle: none | controller | give-back |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let phases = &o.family.phases;
        let none = metrics::run_numbers(&o.runs, &o.runs.none, phases);
        let oracle = metrics::run_numbers(&o.runs, &o.runs.oracle, phases);
        let c = metrics::controller_numbers(&o.runs, phases);
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            o.family.name,
            if o.runs.refused.is_some() {
                " (refused)"
            } else {
                ""
            },
            share(none.of_alone),
            share(oracle.of_alone),
            share(c.run.of_alone),
            share(c.run.of_oracle),
            seconds(&c.reach_s),
            c.reconfigurations
                .iter()
                .max()
                .map_or_else(|| "–".to_owned(), ToString::to_string),
            c.false_actions,
            pct(none.best_effort_of_oracle),
            pct(c.run.best_effort_of_oracle),
            seconds(&c.give_back_s),
        );
    }
    out.push_str(&goals_table(outcomes));
    let refused: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.runs.refused.is_some())
        .collect();
    if !refused.is_empty() {
        out.push_str(
            "\nThe controller refused to start (the run went on without it, as on a host \
             where rdt-agent exits):\n\n",
        );
        for o in refused {
            let _ = writeln!(
                out,
                "- {}: {}",
                o.family.name,
                o.runs.refused.as_deref().unwrap_or_default()
            );
        }
    }
    out
}

/// The goals' table: PASS or FAIL and the number judged, per family and goal.
fn goals_table(outcomes: &[Outcome]) -> String {
    let mut out = String::from("\n## Goals (issue 32), the controller\n\n| family |");
    let names: Vec<&str> = outcomes.first().map_or_else(Vec::new, |o| {
        metrics::goals(
            &metrics::controller_numbers(&o.runs, &o.family.phases),
            &o.family.phases,
        )
        .iter()
        .map(|g| g.name)
        .collect()
    });
    for n in &names {
        let _ = write!(out, " {n} |");
    }
    out.push_str("\n|---|");
    for _ in &names {
        out.push_str("---|");
    }
    out.push('\n');
    let mut passed = 0;
    let mut total = 0;
    for o in outcomes {
        let g = metrics::goals(
            &metrics::controller_numbers(&o.runs, &o.family.phases),
            &o.family.phases,
        );
        let refused = if o.runs.refused.is_some() {
            " (refused)"
        } else {
            ""
        };
        let _ = write!(out, "| {}{refused} |", o.family.name);
        for goal in &g {
            total += 1;
            if goal.pass {
                passed += 1;
            }
            let _ = write!(
                out,
                " {} {} |",
                if goal.pass { "PASS" } else { "**FAIL**" },
                goal.detail
            );
        }
        out.push('\n');
    }
    let _ = writeln!(out, "\n{passed} of {total} goals met.");
    out
}

/// The lowest protected share `run ÷ den` in a second (`None` where `den` has none).
fn protected_share(run: &Second, den: &Second) -> Option<f64> {
    run.protected
        .iter()
        .zip(&den.protected)
        .map(|(a, b)| (*b > 0.0).then(|| a / b))
        .try_fold(f64::INFINITY, |m, r| r.map(|r| m.min(r)))
        .filter(|m| m.is_finite())
}

/// A family's trace: per second, the protected share of alone in each run, the controller's
/// best-effort share of the oracle's, its actions, whether every class was whole and
/// whether a protected CPU ran throttled.
#[must_use]
pub fn csv(family: &Family, runs: &Runs) -> String {
    let mut out = String::from(
        "t_s,contended,none_of_alone,oracle_of_alone,controller_of_alone,\
         controller_best_effort_of_oracle,actions,all_given_back,protected_throttled\n",
    );
    for (i, c) in runs.controller.iter().enumerate() {
        let t = i + 1;
        let contended = family
            .phases
            .iter()
            .any(|&(a, b)| t as u64 > u64::from(a) && t as u64 <= u64::from(b));
        let f = |x: Option<f64>| x.map_or_else(String::new, |v| format!("{v:.4}"));
        let be: f64 = c.best_effort.iter().sum();
        let be_o: f64 = runs.oracle[i].best_effort.iter().sum();
        let _ = writeln!(
            out,
            "{t},{},{},{},{},{},{},{},{}",
            u8::from(contended),
            f(protected_share(&runs.none[i], &runs.alone[i])),
            f(protected_share(&runs.oracle[i], &runs.alone[i])),
            f(protected_share(c, &runs.alone[i])),
            f((be_o > 0.0).then(|| be / be_o)),
            c.actions,
            u8::from(c.all_given_back),
            u8::from(c.protected_throttled),
        );
    }
    out
}

/// The figure: per family, the protected throughput as a share of alone with no
/// controller, the oracle's allocation and the controller, contention phases shaded.
///
/// # Errors
/// Drawing fails.
pub fn figure(outcomes: &[Outcome]) -> Result<String, String> {
    const COLS: usize = 3;
    let rows = outcomes.len().div_ceil(COLS).max(1);
    let mut svg = String::new();
    {
        let height = u32::try_from(40 + 260 * rows).unwrap_or(u32::MAX);
        let root = SVGBackend::with_string(&mut svg, (1200, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (title, body) = root.split_vertically(40);
        title
            .titled(
                "Protected throughput / alone: no controller (red), oracle (blue), controller \
                 (green); contention shaded",
                ("sans-serif", 18),
            )
            .map_err(|e| e.to_string())?;
        let panels = body.split_evenly((rows, COLS));
        for (o, panel) in outcomes.iter().zip(&panels) {
            let end = f64::from(o.family.duration_s);
            let series = |run: &[Second]| -> Vec<(f64, f64)> {
                run.iter()
                    .zip(&o.runs.alone)
                    .enumerate()
                    .filter_map(|(i, (s, a))| {
                        #[allow(clippy::cast_precision_loss)]
                        protected_share(s, a).map(|v| ((i + 1) as f64, v))
                    })
                    .collect()
            };
            let lines = [
                (series(&o.runs.none), RED),
                (series(&o.runs.oracle), BLUE),
                (series(&o.runs.controller), GREEN),
            ];
            let low = lines
                .iter()
                .flat_map(|(l, _)| l.iter().map(|p| p.1))
                .fold(1.0f64, f64::min);
            let low = ((low - 0.05) * 10.0).floor() / 10.0;
            let mut c = ChartBuilder::on(panel)
                .caption(
                    format!("{} ({})", o.family.name, o.family.model),
                    ("sans-serif", 14),
                )
                .margin(6)
                .x_label_area_size(22)
                .y_label_area_size(36)
                .build_cartesian_2d(0f64..end, low.min(0.9)..1.05f64)
                .map_err(|e| e.to_string())?;
            c.configure_mesh()
                .light_line_style(WHITE)
                .label_style(("sans-serif", 10))
                .draw()
                .map_err(|e| e.to_string())?;
            for &(a, b) in &o.family.phases {
                c.draw_series(std::iter::once(Rectangle::new(
                    [(f64::from(a), low.min(0.9)), (f64::from(b), 1.05)],
                    BLACK.mix(0.07).filled(),
                )))
                .map_err(|e| e.to_string())?;
            }
            for (points, color) in lines {
                c.draw_series(LineSeries::new(points, color.stroke_width(2)))
                    .map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

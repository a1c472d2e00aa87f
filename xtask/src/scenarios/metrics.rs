//! The suite's arithmetic: from per-second traces of the four runs of a family (alone, no
//! controller, the oracle's static allocation, the controller) to the report's numbers and
//! the goals. Pure: no simulator here, so that a made-up trace tests it.
//!
//! A trace's second `t` (1, 2, ...) covers the simulated interval `(t-1, t]`: its
//! throughput is the operations done in it (the difference of the model's operation
//! counters), its actions those the controller took at its end, at time `t`. A contention
//! phase `[a, b)` covers the seconds `t` with `a < t <= b`; its reconfigurations are the
//! actions at times `a < t < b` (at `b` it has ended: what is done then is give-back), and
//! actions at times `b <= t <= b + GIVE_BACK_S` are give-back; every other action is false.

/// Grace after a contention phase starts before the protected workload must be at
/// [`ORACLE_GOAL`] of the oracle, seconds.
pub const GRACE_S: u32 = 5;
/// The share of the oracle's protected throughput to reach within [`GRACE_S`].
pub const ORACLE_GOAL: f64 = 0.98;
/// The share of the oracle whose first reaching is reported as "time to 95 %".
pub const ORACLE_REACH: f64 = 0.95;
/// Reconfigurations allowed per contention phase.
pub const MAX_RECONFIGURATIONS: u32 = 3;
/// Seconds after a contention phase ends within which every class must be back to its
/// whole allocation; actions in that span are give-back, not false.
pub const GIVE_BACK_S: u32 = 10;
/// The share of the oracle's best-effort throughput the controller must leave.
pub const BEST_EFFORT_GOAL: f64 = 0.95;
/// Slack of "never below no controller": the protected workload may fall this share below
/// the run without a controller in a second (numerical noise of the model's solver, not a
/// tolerance for harm: an action that hurts costs far more).
pub const NO_HARM_SLACK: f64 = 0.002;

/// One second of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Second {
    /// Operations in the second, per protected workload (the family's order).
    pub protected: Vec<f64>,
    /// Operations in the second, per best-effort workload.
    pub best_effort: Vec<f64>,
    /// The controller's reconfigurations at the end of the second.
    pub actions: u32,
    /// Every best-effort class holds its whole allocation (all ways, no MBA limit) in every
    /// domain at the end of the second.
    pub all_given_back: bool,
    /// Some CPU of a protected workload ran throttled by MBA during the second.
    pub protected_throttled: bool,
}

/// The four runs of a family, each a trace of the same length.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// The protected workloads alone (no best-effort workload runs).
    pub alone: Vec<Second>,
    /// Everything, no controller.
    pub none: Vec<Second>,
    /// Everything, the oracle's static allocation.
    pub oracle: Vec<Second>,
    /// Everything, the controller (without it, when it refused to start).
    pub controller: Vec<Second>,
    /// Why the controller refused to start (its policy), if it did.
    pub refused: Option<String>,
    /// The controller's decision events, one JSON line each (as rdt-agent writes them).
    pub events: Vec<String>,
}

/// Worst and mean of a share over contention seconds (`None` without any).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Share {
    /// The lowest second after [`GRACE_S`] of each phase.
    pub worst: Option<f64>,
    /// The mean over every contention second.
    pub mean: Option<f64>,
}

/// A run's numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunNumbers {
    /// The protected workloads' throughput ÷ alone (the lowest of them each second).
    pub of_alone: Share,
    /// The protected workloads' throughput ÷ the oracle's.
    pub of_oracle: Share,
    /// The best-effort workloads' throughput over contention seconds ÷ the oracle's (mean
    /// of the workloads' ratios of total operations).
    pub best_effort_of_oracle: Option<f64>,
}

/// The controller's numbers beyond [`RunNumbers`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControllerNumbers {
    /// Its run's shares.
    pub run: RunNumbers,
    /// Per phase, seconds from its start to the end of the first second at ≥
    /// [`ORACLE_REACH`] of the oracle (`None`: never in the phase).
    pub reach_s: Vec<Option<u32>>,
    /// Per phase, the reconfigurations while it lasts.
    pub reconfigurations: Vec<u32>,
    /// Actions outside every phase and its give-back span.
    pub false_actions: u32,
    /// Per phase, seconds from its end until every class is back to its whole allocation
    /// (`None`: not by the end of the run, nor before the next phase).
    pub give_back_s: Vec<Option<u32>>,
    /// Seconds in which the protected workload ran throttled.
    pub throttled_seconds: u32,
    /// Seconds (anywhere in the run) in which the protected workload did worse than with
    /// no controller by more than [`NO_HARM_SLACK`].
    pub below_none_seconds: u32,
    /// The lowest ratio controller ÷ no controller of any second.
    pub worst_of_none: Option<f64>,
}

/// One goal's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    /// Short name (a column of the table).
    pub name: &'static str,
    /// Met.
    pub pass: bool,
    /// The number judged.
    pub detail: String,
}

/// The lowest over workloads of `a[i] / b[i]` (`None` when some `b[i]` is 0: no
/// throughput to compare with, e.g. a workload not running).
fn min_ratio(a: &[f64], b: &[f64]) -> Option<f64> {
    let mut worst: Option<f64> = None;
    for (x, y) in a.iter().zip(b) {
        if *y <= 0.0 {
            return None;
        }
        let r = x / y;
        worst = Some(worst.map_or(r, |w| w.min(r)));
    }
    worst
}

/// The seconds of phase `[a, b)` in a trace of `len` seconds: indices of `t` with
/// `a < t <= b`.
fn phase_seconds(phase: (u32, u32), len: usize) -> std::ops::Range<usize> {
    let (a, b) = phase;
    let start = usize::try_from(a).unwrap_or(usize::MAX).min(len);
    let end = usize::try_from(b).unwrap_or(usize::MAX).min(len);
    start..end.max(start)
}

/// Worst (after the grace) and mean over the phases of the lowest share `num ÷ den`.
fn share(num: &[Second], den: &[Second], phases: &[(u32, u32)]) -> Share {
    let mut worst: Option<f64> = None;
    let (mut sum, mut n) = (0.0, 0u32);
    for &(a, b) in phases {
        for i in phase_seconds((a, b), num.len().min(den.len())) {
            let Some(r) = min_ratio(&num[i].protected, &den[i].protected) else {
                continue;
            };
            sum += r;
            n += 1;
            if (i + 1) as u64 > u64::from(a) + u64::from(GRACE_S) {
                worst = Some(worst.map_or(r, |w| w.min(r)));
            }
        }
    }
    Share {
        worst,
        mean: (n > 0).then(|| sum / f64::from(n)),
    }
}

/// The best-effort workloads' operations over the phases in `run` ÷ in `oracle`, averaged
/// over the workloads that did any in the oracle's run.
fn best_effort_ratio(run: &[Second], oracle: &[Second], phases: &[(u32, u32)]) -> Option<f64> {
    let n = run.first().map_or(0, |s| s.best_effort.len());
    let mut ratios = Vec::new();
    for w in 0..n {
        let (mut mine, mut theirs) = (0.0, 0.0);
        for &p in phases {
            for i in phase_seconds(p, run.len().min(oracle.len())) {
                mine += run[i].best_effort.get(w).copied().unwrap_or(0.0);
                theirs += oracle[i].best_effort.get(w).copied().unwrap_or(0.0);
            }
        }
        if theirs > 0.0 {
            ratios.push(mine / theirs);
        }
    }
    #[allow(clippy::cast_precision_loss)] // a handful of workloads
    (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64)
}

/// A run's shares.
#[must_use]
pub fn run_numbers(runs: &Runs, run: &[Second], phases: &[(u32, u32)]) -> RunNumbers {
    RunNumbers {
        of_alone: share(run, &runs.alone, phases),
        of_oracle: share(run, &runs.oracle, phases),
        best_effort_of_oracle: best_effort_ratio(run, &runs.oracle, phases),
    }
}

/// The controller's numbers.
#[must_use]
pub fn controller_numbers(runs: &Runs, phases: &[(u32, u32)]) -> ControllerNumbers {
    let c = &runs.controller;
    let len = c.len().min(runs.oracle.len()).min(runs.none.len());
    let mut out = ControllerNumbers {
        run: run_numbers(runs, c, phases),
        ..ControllerNumbers::default()
    };
    for (k, &(a, b)) in phases.iter().enumerate() {
        let secs = phase_seconds((a, b), len);
        out.reach_s.push(
            secs.clone()
                .find(|&i| {
                    min_ratio(&c[i].protected, &runs.oracle[i].protected)
                        .is_some_and(|r| r >= ORACLE_REACH)
                })
                .map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX) - a),
        );
        out.reconfigurations.push(
            secs.filter(|&i| ((i + 1) as u64) < u64::from(b))
                .map(|i| c[i].actions)
                .sum::<u32>(),
        );
        // give-back: the first second from the phase's end on (before the next phase)
        // that ends with every class whole
        let next = phases.get(k + 1).map_or(u32::MAX, |p| p.0);
        let b_idx = usize::try_from(b).unwrap_or(usize::MAX);
        out.give_back_s.push(if b_idx == 0 {
            Some(0)
        } else {
            (b_idx - 1..len)
                .take_while(|&i| (i as u64) < u64::from(next))
                .find(|&i| c[i].all_given_back)
                .map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX) - b)
        });
    }
    for (i, (s, none)) in c.iter().zip(&runs.none).enumerate().take(len) {
        let t = (i + 1) as u64;
        let allowed = phases
            .iter()
            .any(|&(a, b)| t > u64::from(a) && t <= u64::from(b) + u64::from(GIVE_BACK_S));
        if !allowed {
            out.false_actions += s.actions;
        }
        if s.protected_throttled {
            out.throttled_seconds += 1;
        }
        if let Some(r) = min_ratio(&s.protected, &none.protected) {
            out.worst_of_none = Some(out.worst_of_none.map_or(r, |w: f64| w.min(r)));
            if r < 1.0 - NO_HARM_SLACK {
                out.below_none_seconds += 1;
            }
        }
    }
    out
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_owned(), |v| format!("{:.1} %", 100.0 * v))
}

/// The goals for the controller, in the table's order.
#[must_use]
pub fn goals(n: &ControllerNumbers, phases: &[(u32, u32)]) -> Vec<Goal> {
    let contended = !phases.is_empty();
    let worst = n.run.of_oracle.worst;
    let max_reconf = n.reconfigurations.iter().copied().max().unwrap_or(0);
    let give_back = n
        .give_back_s
        .iter()
        .try_fold(0u32, |m, g| g.map(|g| m.max(g)));
    vec![
        Goal {
            name: "≥98 % of oracle in 5 s",
            pass: !contended || worst.is_some_and(|w| w >= ORACLE_GOAL),
            detail: pct(worst),
        },
        Goal {
            name: "never below none",
            pass: n.below_none_seconds == 0,
            detail: format!(
                "{} s below, worst {}",
                n.below_none_seconds,
                pct(n.worst_of_none)
            ),
        },
        Goal {
            name: "protected never throttled",
            pass: n.throttled_seconds == 0,
            detail: format!("{} s", n.throttled_seconds),
        },
        Goal {
            name: "≤3 reconfigurations/phase",
            pass: max_reconf <= MAX_RECONFIGURATIONS,
            detail: format!("{max_reconf}"),
        },
        Goal {
            name: "0 false actions",
            pass: n.false_actions == 0,
            detail: format!("{}", n.false_actions),
        },
        Goal {
            name: "given back ≤10 s",
            pass: give_back.is_some_and(|g| g <= GIVE_BACK_S),
            detail: give_back.map_or_else(|| "never".to_owned(), |g| format!("{g} s")),
        },
        Goal {
            name: "best effort ≥95 % of oracle",
            pass: !contended
                || n.run
                    .best_effort_of_oracle
                    .is_none_or(|r| r >= BEST_EFFORT_GOAL),
            detail: pct(n.run.best_effort_of_oracle),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(p: f64, b: f64) -> Second {
        Second {
            protected: vec![p],
            best_effort: vec![b],
            all_given_back: true,
            ..Second::default()
        }
    }

    /// A made-up trace of 30 s, contention in [10, 20): alone 100, no controller 60,
    /// oracle 95 (its best effort 50), the controller 60 for 2 s, then 90 for 2 s, then 95,
    /// and 2 actions at 11 s and 13 s, one false at 5 s (nothing contends); ways back at 24 s.
    fn made_up() -> Runs {
        let n = 30;
        let contended = |t: usize| t > 10 && t <= 20;
        let alone = (1..=n).map(|_| sec(100.0, 0.0)).collect();
        let none = (1..=n)
            .map(|t| {
                if contended(t) {
                    sec(60.0, 100.0)
                } else {
                    sec(100.0, 0.0)
                }
            })
            .collect();
        let oracle = (1..=n)
            .map(|t| {
                if contended(t) {
                    sec(95.0, 50.0)
                } else {
                    sec(100.0, 0.0)
                }
            })
            .collect();
        let controller = (1..=n)
            .map(|t| {
                let mut s = match t {
                    11 | 12 => sec(60.0, 100.0),
                    13 | 14 => sec(90.0, 60.0),
                    t if contended(t) => sec(95.0, 40.0),
                    _ => sec(100.0, 0.0),
                };
                s.actions = u32::from(t == 5 || t == 11 || t == 13);
                s.all_given_back = !(11..24).contains(&t);
                s
            })
            .collect();
        Runs {
            alone,
            none,
            oracle,
            controller,
            refused: None,
            events: Vec::new(),
        }
    }

    #[test]
    fn shares_reach_and_counts_of_a_made_up_trace() {
        let runs = made_up();
        let phases = [(10, 20)];
        let n = controller_numbers(&runs, &phases);
        // worst after the 5 s grace: seconds 16-20 at 95 of 95 (of the oracle), 95 of 100
        assert_eq!(n.run.of_oracle.worst, Some(1.0));
        assert!((n.run.of_alone.worst.unwrap() - 0.95).abs() < 1e-12);
        // mean of alone: (60+60+90+90+6*95)/10/100
        assert!((n.run.of_alone.mean.unwrap() - 0.87).abs() < 1e-12);
        // 95 % of the oracle (90.25) first at t = 15: 5 s after the start
        assert_eq!(n.reach_s, vec![Some(5)]);
        assert_eq!(n.reconfigurations, vec![2]);
        // t = 5 is before the phase: false
        assert_eq!(n.false_actions, 1);
        // whole again at t = 24: 4 s after the end
        assert_eq!(n.give_back_s, vec![Some(4)]);
        // best effort: (2*100 + 2*60 + 6*40) / (10*50)
        assert!((n.run.best_effort_of_oracle.unwrap() - 560.0 / 500.0).abs() < 1e-12);
        assert_eq!(n.below_none_seconds, 0);
        let g = goals(&n, &phases);
        let failed: Vec<&str> = g.iter().filter(|g| !g.pass).map(|g| g.name).collect();
        assert_eq!(failed, vec!["0 false actions"]);
    }

    #[test]
    fn harm_throttling_and_a_late_give_back_fail_their_goals() {
        let mut runs = made_up();
        runs.controller[15].protected = vec![50.0]; // below none's 60
        runs.controller[16].protected_throttled = true;
        for s in &mut runs.controller {
            s.actions = 0;
        }
        for s in &mut runs.controller[10..] {
            s.all_given_back = false;
        }
        let n = controller_numbers(&runs, &[(10, 20)]);
        assert_eq!(n.below_none_seconds, 1);
        assert_eq!(n.throttled_seconds, 1);
        assert_eq!(n.give_back_s, vec![None]);
        let failed: Vec<&str> = goals(&n, &[(10, 20)])
            .iter()
            .filter(|g| !g.pass)
            .map(|g| g.name)
            .collect();
        assert_eq!(
            failed,
            vec![
                "≥98 % of oracle in 5 s",
                "never below none",
                "protected never throttled",
                "given back ≤10 s"
            ]
        );
    }

    #[test]
    fn a_quiet_family_is_judged_on_actions_only() {
        let mut runs = made_up();
        runs.none.clone_from(&runs.alone);
        runs.oracle.clone_from(&runs.alone);
        for s in &mut runs.controller {
            *s = sec(100.0, 0.0);
        }
        runs.controller[100 % 30].actions = 1;
        let n = controller_numbers(&runs, &[]);
        assert_eq!(n.false_actions, 1);
        assert_eq!(n.run.of_oracle, Share::default());
        let failed: Vec<&str> = goals(&n, &[])
            .iter()
            .filter(|g| !g.pass)
            .map(|g| g.name)
            .collect();
        assert_eq!(failed, vec!["0 false actions"]);
    }
}

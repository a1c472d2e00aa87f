//! The oracle: the best static allocation of a family's best-effort classes, found by a
//! sweep on the same simulated model.
//!
//! Each best-effort class `i` is COS `i + 1` holding its CPUs; an allocation gives it the
//! low `ways` of the L3 mask (as the controller does: the protected workloads keep the
//! whole cache in COS 0) and an MBA limit, in each L3 domain it has CPUs in (elsewhere its
//! allocation changes nothing). The levels are the family's (`[oracle]`), above the
//! policy's floors (`min_ways`, `min_mba_percent` on Intel, `min_mba_gbps` on AMD; a class
//! without the floor of its part keeps its MBA, as the controller must).
//!
//! An allocation is judged on the model's steady state (which depends only on the
//! registers and what runs) at the middle of each piece of the contention phases between
//! two changes of the scenario (a start, a phase, a stop), weighted by the piece's length:
//! first by the protected workloads' throughput as a share of alone (the lowest of them),
//! then, among those within [`TIE`] of the best, by the best-effort workloads' throughput
//! as a share of theirs with no allocation (their mean). An allocation under which a CPU
//! of a protected workload runs throttled (per-core MBA: a best-effort class on its
//! hyperthread sibling) is never chosen: the controller must not do it either. The sweep tries every combination
//! of the classes' levels when there are at most [`GRID_MAX`] of them, else improves one
//! class at a time (coordinate descent, at most [`ROUNDS`] rounds); with `per_domain`, it
//! then improves each class in each of its domains alone in the same way.

use std::time::Duration;

use rdt_pqos::{Backend, CacheDomain, ClassId, MbaKind, MbaLimit, Rdt};
use rdt_sim::{Assignment, Scenario, SimHandle};

use super::family::Family;
use super::run::{self, allocation_changes, class_cpus, domains_of};

/// MBA levels tried on Intel by default, percent (100, no limit, is always tried).
pub const DEFAULT_INTEL_MBA: &[u32] = &[10, 20, 30, 40, 50, 60, 70, 80, 90];
/// MBA levels tried on AMD by default, decimal GB/s per domain (no limit is always tried).
pub const DEFAULT_AMD_MBA_GBPS: &[u32] = &[1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128];
/// Protected shares within this of the best are ties, broken by best-effort throughput.
pub const TIE: f64 = 0.001;
/// The most combinations tried exhaustively.
pub const GRID_MAX: usize = 20_000;
/// Rounds of coordinate descent at most.
pub const ROUNDS: usize = 4;

/// One class's allocation in one domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassAlloc {
    /// L3 ways (the low ones).
    pub ways: u32,
    /// MBA limit; `None`: left alone.
    pub mba: Option<MbaLimit>,
}

/// Every best-effort class's allocation, per L3 domain it has CPUs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Per class (policy order): per domain.
    pub classes: Vec<Vec<(CacheDomain, ClassAlloc)>>,
}

/// The sweep's result.
#[derive(Clone, Debug)]
pub struct Best {
    /// The allocation.
    pub allocation: Allocation,
    /// Allocations judged.
    pub evaluated: usize,
    /// The L3's ways.
    pub cbm: u32,
    /// AMD: the units of no limit.
    pub amd_max: Option<u32>,
}

fn describe_one(a: ClassAlloc, cbm: u32, amd_max: Option<u32>) -> String {
    let ways = if a.ways >= cbm {
        "all ways".to_owned()
    } else {
        format!("{} way{}", a.ways, if a.ways == 1 { "" } else { "s" })
    };
    let mba = match a.mba {
        Some(MbaLimit::Percent(p)) if p < 100 => Some(format!("MBA {p} %")),
        Some(MbaLimit::AmdUnits(u)) if amd_max.is_some_and(|m| u < m) => {
            Some(format!("MBA {} GB/s", f64::from(u) / 8.0))
        }
        _ => None,
    };
    mba.map_or_else(|| ways.clone(), |m| format!("{ways}, {m}"))
}

impl Best {
    /// The allocation in words: `class: 1 way, MBA 20 %; ...`, per domain where they differ.
    #[must_use]
    pub fn describe(&self, family: &Family) -> String {
        let mut parts = Vec::new();
        for (b, per) in family
            .policy
            .best_effort
            .iter()
            .zip(&self.allocation.classes)
        {
            let first = per.first().map(|(_, a)| *a);
            let text = if per.iter().all(|(_, a)| Some(*a) == first) {
                first.map_or_else(
                    || "all ways".to_owned(),
                    |a| describe_one(a, self.cbm, self.amd_max),
                )
            } else {
                per.iter()
                    .map(|(d, a)| {
                        format!(
                            "L3 {}: {}",
                            d.get(),
                            describe_one(*a, self.cbm, self.amd_max)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            parts.push(format!("{}: {text}", b.workload.name));
        }
        parts.join("; ")
    }
}

/// The pieces of the contention phases: (weight in seconds, middle).
#[must_use]
pub fn samples(family: &Family) -> Vec<(f64, Duration)> {
    let mut cuts: Vec<f64> = family
        .scenario
        .workloads
        .iter()
        .flat_map(|a| {
            std::iter::once(a.start_s)
                .chain(a.stop_s)
                .chain(a.phases.iter().map(|p| p.at_s))
        })
        .collect();
    cuts.sort_by(f64::total_cmp);
    let mut out = Vec::new();
    for &(a, b) in &family.phases {
        let (a, b) = (f64::from(a), f64::from(b));
        let mut points = vec![a];
        points.extend(cuts.iter().copied().filter(|&c| c > a && c < b));
        points.push(b);
        for w in points.windows(2) {
            if w[1] > w[0] {
                out.push((w[1] - w[0], Duration::from_secs_f64(0.5 * (w[0] + w[1]))));
            }
        }
    }
    out
}

/// `scenario` as it runs at `t`, for ever (each running workload in its phase then).
fn frozen(scenario: &Scenario, t: Duration) -> Scenario {
    Scenario {
        workloads: scenario
            .workloads
            .iter()
            .filter_map(|a| {
                a.at(t).map(|w| {
                    let mut w = w.clone();
                    // keep the workload's name: its phases may not repeat it
                    if w.name.is_none() {
                        w.name.clone_from(&a.workload.name);
                    }
                    Assignment::new(a.cpus.clone(), w)
                })
            })
            .collect(),
        ..scenario.clone()
    }
}

/// Operations per second of each named workload now (0 for one not running).
fn ops(sim: &SimHandle, names: &[String]) -> Vec<f64> {
    let m = sim.workload_metrics();
    names
        .iter()
        .map(|n| {
            m.iter()
                .find(|w| &w.name == n)
                .and_then(|w| w.ops_per_s)
                .unwrap_or(0.0)
        })
        .collect()
}

/// What one sample judges against.
struct Sample {
    weight: f64,
    scenario: Scenario,
    alone: Vec<f64>,
    free: Vec<f64>,
}

/// The sweep's platform.
struct Judge {
    rdt: Rdt,
    sim: SimHandle,
    classes: Vec<ClassId>,
    samples: Vec<Sample>,
    protected: Vec<String>,
    protected_cpus: Vec<rdt_pqos::LogicalCpu>,
    best_effort: Vec<String>,
    evaluated: usize,
}

/// The protected share of an allocation that throttles a protected CPU: below any other.
const REFUSED: f64 = -1.0;

impl Judge {
    /// (protected share of alone, best-effort share of free) of `alloc`.
    fn judge(&mut self, alloc: &Allocation) -> Result<(f64, f64), String> {
        run::apply(&mut self.rdt, &allocation_changes(&self.classes, alloc))?;
        self.evaluated += 1;
        let np = self.protected.len();
        let mut p = vec![0.0; np];
        let (mut be, mut be_w) = (0.0, 0.0);
        let mut total = 0.0;
        for s in &self.samples {
            self.sim
                .lock()
                .set_scenario(&s.scenario)
                .map_err(|e| e.to_string())?;
            let throttled = {
                let p = self.sim.lock();
                self.protected_cpus
                    .iter()
                    .any(|&c| p.activity(c).is_some_and(|a| a.throttle < 1.0 - 1e-9))
            };
            if throttled {
                return Ok((REFUSED, 0.0));
            }
            let got = ops(&self.sim, &self.protected);
            for (i, (g, a)) in got.iter().zip(&s.alone).enumerate() {
                p[i] += s.weight * if *a > 0.0 { g / a } else { 1.0 };
            }
            total += s.weight;
            let got = ops(&self.sim, &self.best_effort);
            let shares: Vec<f64> = got
                .iter()
                .zip(&s.free)
                .filter(|(_, f)| **f > 0.0)
                .map(|(g, f)| g / f)
                .collect();
            if !shares.is_empty() {
                #[allow(clippy::cast_precision_loss)]
                let mean = shares.iter().sum::<f64>() / shares.len() as f64;
                be += s.weight * mean;
                be_w += s.weight;
            }
        }
        let protected = p
            .iter()
            .map(|x| x / total.max(f64::MIN_POSITIVE))
            .fold(f64::INFINITY, f64::min);
        let best_effort = if be_w > 0.0 { be / be_w } else { 1.0 };
        Ok((
            if protected.is_finite() {
                protected
            } else {
                1.0
            },
            best_effort,
        ))
    }
}

/// The best of `scored` (in order, most generous first): highest protected share, then,
/// within [`TIE`] of it, highest best-effort share, then the first.
fn choose(scored: &[Scored]) -> Option<&Scored> {
    let top = scored.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
    let mut best: Option<&Scored> = None;
    for s in scored.iter().filter(|s| s.1 >= top - TIE) {
        if best.is_none_or(|b| s.2 > b.2 + 1e-12) {
            best = Some(s);
        }
    }
    best
}

/// Each class's levels, most generous first.
fn levels(family: &Family, rdt: &Rdt) -> Vec<Vec<ClassAlloc>> {
    let caps = rdt.capabilities();
    let (cbm, min_bits) = caps
        .l3_cat
        .get()
        .map_or((1, 1), |c| (c.cbm_len, c.min_cbm_bits.max(1)));
    let kind = caps.mba.get().filter(|m| !m.ctrl_enabled).map(|m| m.kind);
    family
        .policy
        .best_effort
        .iter()
        .map(|b| {
            let floor = b.min_ways.max(min_bits);
            let mut ways: Vec<u32> = family
                .oracle
                .ways
                .clone()
                .unwrap_or_else(|| (1..=cbm).collect())
                .into_iter()
                .filter(|w| *w >= floor && *w <= cbm)
                .collect();
            ways.push(cbm);
            ways.sort_unstable_by(|a, b| b.cmp(a));
            ways.dedup();
            let mba: Vec<Option<MbaLimit>> = match (b.min_mba_percent, b.min_mba_gbps, kind) {
                (Some(min), _, Some(MbaKind::IntelDelay { .. })) => {
                    let mut l: Vec<u32> = family
                        .oracle
                        .mba
                        .clone()
                        .unwrap_or_else(|| DEFAULT_INTEL_MBA.to_vec())
                        .into_iter()
                        .filter(|p| *p >= u32::from(min) && *p < 100)
                        .collect();
                    l.push(100);
                    l.sort_unstable_by(|a, b| b.cmp(a));
                    l.dedup();
                    l.into_iter()
                        .map(|p| Some(MbaLimit::Percent(u8::try_from(p).unwrap_or(100))))
                        .collect()
                }
                (_, Some(min), Some(MbaKind::AmdBandwidth { width })) => {
                    let max = 1u32 << width.min(31);
                    // the controller's floor: rounded up to an eighth of a GB/s
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    let floor = (min * 8.0).ceil().max(1.0) as u64;
                    let mut l: Vec<u32> = family
                        .oracle
                        .mba
                        .clone()
                        .unwrap_or_else(|| DEFAULT_AMD_MBA_GBPS.to_vec())
                        .into_iter()
                        .map(|g| g.saturating_mul(8))
                        .filter(|u| u64::from(*u) >= floor && *u < max)
                        .collect();
                    l.push(max);
                    l.sort_unstable_by(|a, b| b.cmp(a));
                    l.dedup();
                    l.into_iter().map(|u| Some(MbaLimit::AmdUnits(u))).collect()
                }
                _ => vec![None],
            };
            ways.iter()
                .flat_map(|&w| mba.iter().map(move |&m| ClassAlloc { ways: w, mba: m }))
                .collect()
        })
        .collect()
}

/// A judged allocation: (it, protected share, best-effort share).
type Scored = (Allocation, f64, f64);

/// The best allocation giving each class the same levels in each of its domains: every
/// combination, or coordinate descent from `whole` (module docs).
fn sweep_uniform(
    judge: &mut Judge,
    levels: &[Vec<ClassAlloc>],
    uniform: &dyn Fn(&[ClassAlloc]) -> Allocation,
) -> Result<Scored, String> {
    let whole: Vec<ClassAlloc> = levels.iter().map(|l| l[0]).collect();
    let combos: usize = levels.iter().map(Vec::len).product();
    if combos <= GRID_MAX {
        let mut scored = Vec::with_capacity(combos);
        for n in 0..combos {
            // mixed radix, the last class fastest
            let mut rest = n;
            let mut choice = whole.clone();
            for (k, l) in levels.iter().enumerate().rev() {
                choice[k] = l[rest % l.len()];
                rest /= l.len();
            }
            let alloc = uniform(&choice);
            let (p, b) = judge.judge(&alloc)?;
            scored.push((alloc, p, b));
        }
        return choose(&scored)
            .cloned()
            .ok_or_else(|| "no allocation judged".into());
    }
    let start = uniform(&whole);
    let (p, b) = judge.judge(&start)?;
    let mut current = (start, p, b);
    for _ in 0..ROUNDS {
        let before = current.0.clone();
        for (c, l) in levels.iter().enumerate() {
            let mut scored = vec![current.clone()];
            for a in l {
                let mut alloc = current.0.clone();
                for slot in &mut alloc.classes[c] {
                    slot.1 = *a;
                }
                let (p, b) = judge.judge(&alloc)?;
                scored.push((alloc, p, b));
            }
            current = choose(&scored).cloned().ok_or("no allocation judged")?;
        }
        if current.0 == before {
            break;
        }
    }
    Ok(current)
}

/// `best` improved one class in one domain at a time, for classes in several domains.
fn refine_per_domain(
    judge: &mut Judge,
    levels: &[Vec<ClassAlloc>],
    mut best: Scored,
) -> Result<Scored, String> {
    for _ in 0..ROUNDS {
        let before = best.0.clone();
        for (c, l) in levels.iter().enumerate() {
            let n = best.0.classes[c].len();
            if n < 2 {
                continue;
            }
            for k in 0..n {
                let mut scored = vec![best.clone()];
                for a in l {
                    let mut alloc = best.0.clone();
                    alloc.classes[c][k].1 = *a;
                    let (p, b) = judge.judge(&alloc)?;
                    scored.push((alloc, p, b));
                }
                best = choose(&scored).cloned().ok_or("no allocation judged")?;
            }
        }
        if best.0 == before {
            break;
        }
    }
    Ok(best)
}

/// The samples of `family`: its contention pieces as frozen scenarios, with the protected
/// workloads' throughput alone and the best-effort ones' with no allocation.
fn judged_samples(family: &Family, sim: &SimHandle) -> Result<Vec<Sample>, String> {
    let alone_scenario = run::alone(family);
    let mut samples = Vec::new();
    for (weight, t) in self::samples(family) {
        sim.lock()
            .set_scenario(&frozen(&alone_scenario, t))
            .map_err(|e| e.to_string())?;
        let alone = ops(sim, &family.protected);
        let scenario = frozen(&family.scenario, t);
        sim.lock()
            .set_scenario(&scenario)
            .map_err(|e| e.to_string())?;
        let free = ops(sim, &family.best_effort);
        samples.push(Sample {
            weight,
            scenario,
            alone,
            free,
        });
    }
    Ok(samples)
}

/// Runs the sweep for `family` (module docs).
///
/// # Errors
/// The platform cannot be opened or written.
pub fn search(family: &Family) -> Result<Best, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (mut rdt, sim) = run::open(&family.model, dir.path())?;
    let classes = run::oracle_classes(family, &mut rdt)?;
    let domains: Vec<Vec<CacheDomain>> = class_cpus(family, &rdt)
        .iter()
        .map(|c| domains_of(&rdt, c))
        .collect();
    let levels = levels(family, &rdt);
    let cbm = rdt.capabilities().l3_cat.get().map_or(0, |c| c.cbm_len);
    let amd_max = match rdt.capabilities().mba.get().map(|m| m.kind) {
        Some(MbaKind::AmdBandwidth { width }) => Some(1u32 << width.min(31)),
        _ => None,
    };
    let uniform = |choice: &[ClassAlloc]| Allocation {
        classes: domains
            .iter()
            .zip(choice)
            .map(|(ds, a)| ds.iter().map(|d| (*d, *a)).collect())
            .collect(),
    };
    let samples = judged_samples(family, &sim)?;
    if samples.is_empty() {
        let whole: Vec<ClassAlloc> = levels.iter().map(|l| l[0]).collect();
        return Ok(Best {
            allocation: uniform(&whole),
            evaluated: 0,
            cbm,
            amd_max,
        });
    }
    let mut judge = Judge {
        rdt,
        sim,
        classes,
        samples,
        protected: family.protected.clone(),
        protected_cpus: family
            .scenario
            .workloads
            .iter()
            .enumerate()
            .filter(|(i, a)| family.protected.contains(&a.label(*i)))
            .flat_map(|(_, a)| a.cpus.iter())
            .collect(),
        best_effort: family.best_effort.clone(),
        evaluated: 0,
    };
    let mut best = sweep_uniform(&mut judge, &levels, &uniform)?;
    if family.oracle.per_domain {
        best = refine_per_domain(&mut judge, &levels, best)?;
    }
    Ok(Best {
        allocation: best.0,
        evaluated: judge.evaluated,
        cbm,
        amd_max,
    })
}

//! A family's runs on the in-process simulated platform, one second of virtual clock per
//! control interval: advance the clock, read the model's ground truth, tick the controller
//! (as `rdt-agent --sim MODEL --sim-virtual-clock` does: [`rdt_pqos::control::Agent`]'s
//! `start`, then `tick` after each interval).

use std::time::Duration;

use rdt_pqos::control::Agent;
use rdt_pqos::proc::ProcFs;
use rdt_pqos::sim::SessionOptions;
use rdt_pqos::transaction::{ApplyPlan, Change, MaskScope, Plan, PlanError};
use rdt_pqos::{
    Backend, CacheBitmask, CacheDomain, CatResource, ClassId, CpuSet, Iface, MbaKind, MbaLimit,
    MbaResource, OpenOptions, Rdt,
};
use rdt_sim::{Scenario, SimHandle};

use super::family::Family;
use super::metrics::{Runs, Second};
use super::oracle::{self, Allocation};

/// A simulated platform of `model` with its state in `dir`, on the MSR interface (as the
/// paper's experiment: `xtask paper-figure`).
pub fn open(model: &str, dir: &std::path::Path) -> Result<(Rdt, SimHandle), String> {
    let session = SessionOptions {
        state: Some(dir.join("state.json")),
        ..SessionOptions::new(model)
    };
    let rdt = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .map_err(|e| format!("opening the simulated {model}: {e}"))?;
    let sim = rdt
        .simulated()
        .ok_or("no simulated platform")?
        .handle()
        .clone();
    Ok((rdt, sim))
}

/// The scenario with only the protected workloads (every other CPU idle).
#[must_use]
pub fn alone(family: &Family) -> Scenario {
    let mut s = family.scenario.clone();
    let keep: Vec<bool> = s
        .workloads
        .iter()
        .enumerate()
        .map(|(i, a)| family.protected.contains(&a.label(i)))
        .collect();
    let mut k = keep.iter();
    s.workloads.retain(|_| *k.next().unwrap_or(&false));
    s
}

/// Each best-effort class's CPUs (policy order), `rest` resolved to the CPUs no workload
/// of the policy lists, as the agent does.
#[must_use]
pub fn class_cpus(family: &Family, rdt: &Rdt) -> Vec<CpuSet> {
    let policy = &family.policy;
    let mut listed = CpuSet::new();
    for w in policy
        .protected
        .iter()
        .map(|p| &p.workload)
        .chain(policy.best_effort.iter().map(|b| &b.workload))
    {
        listed.union_with(&w.cpus);
    }
    policy
        .best_effort
        .iter()
        .map(|b| {
            if b.rest {
                rdt.topology()
                    .cpus()
                    .iter()
                    .map(|c| c.cpu)
                    .filter(|c| !listed.contains(*c))
                    .collect()
            } else {
                b.workload.cpus.clone()
            }
        })
        .collect()
}

/// Applies `changes` as one transaction.
pub fn apply(rdt: &mut Rdt, changes: &[Change]) -> Result<(), String> {
    if changes.is_empty() {
        return Ok(());
    }
    let plan = Plan::new(rdt, changes).map_err(|e| match e {
        PlanError::Invalid { error, .. } => error.to_string(),
        PlanError::Read { error, .. } => error.to_string(),
    })?;
    plan.apply(rdt)
        .into_result()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The oracle's classes: best-effort class `i` is COS `i + 1`, holding its CPUs.
pub fn oracle_classes(family: &Family, rdt: &mut Rdt) -> Result<Vec<ClassId>, String> {
    let cpus = class_cpus(family, rdt);
    let ids: Vec<ClassId> = (1..=cpus.len())
        .map(|i| ClassId::new(u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    let changes: Vec<Change> = cpus
        .iter()
        .zip(&ids)
        .flat_map(|(set, &class)| set.iter().map(move |cpu| Change::Cpu { cpu, class }))
        .collect();
    apply(rdt, &changes)?;
    Ok(ids)
}

/// The changes that give `classes` the allocation `alloc` in the domains it names.
#[must_use]
pub fn allocation_changes(classes: &[ClassId], alloc: &Allocation) -> Vec<Change> {
    let mut out = Vec::new();
    for (class, per) in classes.iter().zip(&alloc.classes) {
        for (domain, a) in per {
            out.push(Change::Cat {
                resource: CatResource::L3,
                domain: *domain,
                class: *class,
                scope: MaskScope::Both,
                mask: CacheBitmask::low_bits(a.ways),
            });
            if let Some(limit) = a.mba {
                out.push(Change::Mba {
                    resource: MbaResource::Mba,
                    domain: *domain,
                    class: *class,
                    limit,
                });
            }
        }
    }
    out
}

/// Whether `limit` is no limit.
fn unlimited(limit: MbaLimit, kind: Option<MbaKind>) -> bool {
    match (limit, kind) {
        (MbaLimit::Percent(p), _) => p >= 100,
        (MbaLimit::AmdUnits(u), Some(MbaKind::AmdBandwidth { width })) => {
            u64::from(u) >= 1u64 << width.min(32)
        }
        _ => true,
    }
}

/// Whether every class of `classes` holds all the ways and no MBA limit in every domain.
fn all_whole(rdt: &mut Rdt, classes: &[ClassId]) -> Result<bool, String> {
    let domains = rdt.topology().l3_domains();
    let caps = rdt.capabilities().clone();
    let cbm = caps.l3_cat.get().map_or(0, |c| c.cbm_len);
    let cat = rdt
        .cat_classes_in(CatResource::L3, &domains)
        .map_err(|e| e.to_string())?;
    let ways_whole = cat
        .iter()
        .flatten()
        .all(|c| !classes.contains(&c.class) || c.mask.ways().count_ones() >= cbm);
    let kind = caps.mba.get().map(|m| m.kind);
    let mba_whole = if kind.is_some() {
        rdt.bandwidth_classes_in(MbaResource::Mba, &domains)
            .map_err(|e| e.to_string())?
            .iter()
            .flatten()
            .all(|c| !classes.contains(&c.class) || unlimited(c.limit, kind))
    } else {
        true
    };
    Ok(ways_whole && mba_whole)
}

/// The second that just passed on `sim`: the operations of the `protected` and `best`
/// workloads (scenario indices) since `last` (each workload's operation count, updated),
/// and whether a CPU of `protected_cpus` runs throttled.
fn observe(
    sim: &SimHandle,
    last: &mut [f64],
    protected: &[Option<usize>],
    best: &[Option<usize>],
    protected_cpus: &[rdt_pqos::LogicalCpu],
) -> Second {
    let metrics = sim.workload_metrics();
    let mut done = vec![0.0; metrics.len()];
    for (i, m) in metrics.iter().enumerate() {
        let total = m.ops_total.unwrap_or(0.0);
        done[i] = (total - last.get(i).copied().unwrap_or(0.0)).max(0.0);
        if let Some(l) = last.get_mut(i) {
            *l = total;
        }
    }
    let pick = |idx: &[Option<usize>]| -> Vec<f64> {
        idx.iter()
            .map(|i| i.and_then(|i| done.get(i).copied()).unwrap_or(0.0))
            .collect()
    };
    let throttled = {
        let p = sim.lock();
        protected_cpus
            .iter()
            .any(|&c| p.activity(c).is_some_and(|a| a.throttle < 1.0 - 1e-9))
    };
    Second {
        protected: pick(protected),
        best_effort: pick(best),
        actions: 0,
        all_given_back: true,
        protected_throttled: throttled,
    }
}

/// How a run allocates.
#[derive(Clone, Copy, Debug)]
pub enum Mode<'a> {
    /// Only the protected workloads run.
    Alone,
    /// No controller.
    None,
    /// The oracle's static allocation.
    Oracle(&'a Allocation),
    /// The controller.
    Controller,
}

/// One run: a [`Second`] per simulated second, why the controller refused to start (if it
/// did), its events as JSON lines.
pub type Trace = (Vec<Second>, Option<String>, Vec<String>);

/// One run of `family`, a [`Second`] per simulated second, and, when the controller
/// refused to start (its policy does not fit the platform), why: the run then goes on
/// without it, as the platform would on a host where rdt-agent exits.
///
/// # Errors
/// The platform cannot be opened, the scenario installed, the allocation made, or the
/// controller ticked.
pub fn trace(family: &Family, mode: Mode<'_>) -> Result<Trace, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (mut rdt, sim) = open(&family.model, dir.path())?;
    let scenario = match mode {
        Mode::Alone => alone(family),
        _ => family.scenario.clone(),
    };
    sim.lock()
        .set_scenario(&scenario)
        .map_err(|e| e.to_string())?;
    let mut agent = None;
    let mut classes = Vec::new();
    let mut refused = None;
    let mut events = Vec::new();
    match mode {
        Mode::Alone | Mode::None => {}
        Mode::Oracle(alloc) => {
            let ids = oracle_classes(family, &mut rdt)?;
            apply(&mut rdt, &allocation_changes(&ids, alloc))?;
        }
        Mode::Controller => {
            match Agent::start(&mut rdt, family.policy.clone(), &ProcFs::host(), false) {
                Ok(a) => {
                    classes = a.classes().to_vec();
                    agent = Some(a);
                }
                // as on a host: rdt-agent exits, the platform runs on untouched
                Err(e) => {
                    let text = e.to_string();
                    refused = Some(text.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
        }
    }
    let names = |list: &[String]| -> Vec<Option<usize>> {
        list.iter()
            .map(|n| {
                scenario
                    .workloads
                    .iter()
                    .enumerate()
                    .position(|(i, a)| &a.label(i) == n)
            })
            .collect()
    };
    let protected = names(&family.protected);
    let best = names(&family.best_effort);
    let protected_cpus: Vec<_> = protected
        .iter()
        .flatten()
        .flat_map(|&i| scenario.workloads[i].cpus.iter())
        .collect();
    let mut last: Vec<f64> = vec![0.0; scenario.workloads.len()];
    let mut out = Vec::with_capacity(family.duration_s as usize);
    let interval = family.policy.interval;
    for t in 1..=family.duration_s {
        sim.advance(interval);
        let mut s = observe(&sim, &mut last, &protected, &best, &protected_cpus);
        if let Some(agent) = agent.as_mut() {
            let tick = agent
                .tick(&mut rdt, Duration::from_secs(t.into()))
                .map_err(|e| format!("t = {t} s: {e}"))?;
            s.actions =
                u32::try_from(tick.events.iter().filter(|e| e.applied).count()).unwrap_or(u32::MAX);
            events.extend(
                tick.events
                    .iter()
                    .map(rdt_pqos::control::Event::to_json_line),
            );
            s.all_given_back = all_whole(&mut rdt, &classes)?;
        }
        out.push(s);
    }
    if let Some(agent) = agent {
        agent.stop(&mut rdt).map_err(|e| e.to_string())?;
    }
    Ok((out, refused, events))
}

/// Runs `family`: the oracle's sweep, then the four runs. Returns the oracle's allocation
/// in words, how many allocations its sweep judged, and the runs.
///
/// # Errors
/// As [`trace`] and [`oracle::search`].
pub fn family(family: &Family) -> Result<(String, usize, Runs), String> {
    let best = oracle::search(family)?;
    let (controller, refused, events) = trace(family, Mode::Controller)?;
    let runs = Runs {
        alone: trace(family, Mode::Alone)?.0,
        none: trace(family, Mode::None)?.0,
        oracle: trace(family, Mode::Oracle(&best.allocation))?.0,
        controller,
        refused,
        events,
    };
    Ok((best.describe(family), best.evaluated, runs))
}

/// The L3 domains of `cpus` on `rdt`.
#[must_use]
pub fn domains_of(rdt: &Rdt, cpus: &CpuSet) -> Vec<CacheDomain> {
    let mut d: Vec<CacheDomain> = cpus
        .iter()
        .filter_map(|c| rdt.topology().get(c).and_then(|p| p.l3))
        .collect();
    d.sort_unstable();
    d.dedup();
    d
}

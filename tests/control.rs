//! The noisy-neighbour controller (`rdt_pqos::control`) on the in-process simulated
//! broadwell-ep (feature `sim`), its clock driven by the test: the seed paper's pipeline on
//! CPUs 2-7 runs alone for 10 s, the cache thrasher starts on CPUs 8-10 and stops at 60 s.
//! The controller squeezes the thrasher's class (its own named class; nothing else is
//! written), and gives everything back after the thrasher stops.

use std::time::Duration;

use rdt_pqos::config::policy::Policy;
use rdt_pqos::control::{ActionKind, Agent};
use rdt_pqos::proc::ProcFs;
use rdt_pqos::sim::SessionOptions;
use rdt_pqos::{
    Backend, BackendExt, CacheDomain, CatResource, ClassId, Iface, LogicalCpu, MbaResource,
    OpenOptions, Rdt,
};
use rdt_sim::Scenario;

const POLICY: &str = "[[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\n\n\
    [[best_effort]]\nname = \"thrasher\"\ncpus = \"8-10\"\nmin_ways = 2\n";

fn open(dir: &std::path::Path, model: &str) -> Rdt {
    let session = SessionOptions {
        state: Some(dir.join("state.json")),
        ..SessionOptions::new(model)
    };
    OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open the simulated platform")
}

/// The seed paper's workloads: the pipeline, and the thrasher when `thrasher`.
fn scenario(thrasher: bool) -> Scenario {
    let mut s = Scenario::default();
    if !thrasher {
        s.workloads
            .retain(|a| a.workload.name.as_deref() == Some("pipeline"));
    }
    s
}

fn set(rdt: &Rdt, s: &Scenario) {
    let sim = rdt.simulated().expect("simulated").handle();
    sim.lock().set_scenario(s).expect("scenario");
}

/// A scenario family of the suite (`xtask/scenarios/NN-name`: its `scenario.json` and
/// `policy.toml` texts) on a fresh simulated `model` in `dir`: the platform running the
/// scenario, and the policy.
fn family(dir: &std::path::Path, model: &str, scenario: &str, policy: &str) -> (Rdt, Policy) {
    let scenario: Scenario = scenario.parse().expect("scenario");
    let rdt = open(dir, model);
    set(&rdt, &scenario);
    (
        rdt,
        Policy::parse_toml(policy, "policy.toml").expect("policy"),
    )
}

/// The pipeline's IPC now, from the model: the mean over its CPUs.
fn pipeline_ipc(rdt: &Rdt) -> f64 {
    let sim = rdt.simulated().expect("simulated").handle();
    let p = sim.lock();
    let ipc: Vec<f64> = (2..=7)
        .map(|c| p.activity(LogicalCpu::new(c)).expect("CPU").ipc)
        .collect();
    ipc.iter().sum::<f64>() / 6.0
}

#[test]
fn the_thrasher_is_squeezed_within_seconds_and_given_everything_back_after_it_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path(), "broadwell-ep");
    set(&rdt, &scenario(false));
    let policy = Policy::parse_toml(POLICY, "policy.toml").expect("policy");
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let class = agent.classes()[0];
    assert_ne!(class, ClassId::new(0));
    let sim = rdt.simulated().expect("simulated").handle().clone();
    let mut alone = 0.0;
    let mut events = Vec::new();
    let mut ipc = Vec::new();
    for t in 1..=80u64 {
        if t == 10 {
            set(&rdt, &scenario(true));
        }
        if t == 60 {
            set(&rdt, &scenario(false));
        }
        sim.advance(Duration::from_secs(1));
        // as the interval ending now saw it, before the controller acts
        ipc.push(pipeline_ipc(&rdt));
        let tick = agent.tick(&mut rdt, Duration::from_secs(t)).expect("tick");
        events.extend(tick.events);
        if t == 9 {
            alone = ipc[8];
        }
    }
    let kinds: Vec<(f64, ActionKind)> = events.iter().map(|e| (e.t_s, e.decision.action)).collect();
    // squeezed: ways first, at the first interval that sees the thrasher
    let during: Vec<_> = kinds.iter().filter(|(t, _)| *t < 60.0).collect();
    assert_eq!(
        during.first().map(|k| k.1),
        Some(ActionKind::ShrinkWays),
        "{kinds:?}"
    );
    assert!(during.first().is_some_and(|k| k.0 <= 11.0), "{kinds:?}");
    assert!(during.len() <= 3, "{kinds:?}");
    assert!(
        events.iter().all(|e| e.applied && e.error.is_none()),
        "{events:?}"
    );
    // every event is a JSON line naming the action, the reason and the readings
    let line: serde_json::Value =
        serde_json::from_str(&events[0].to_json_line()).expect("JSON line");
    assert_eq!(line["action"], "shrink_ways");
    assert_eq!(line["reason"], "contended");
    assert!(line["readings"]["pipeline"]["ipc"].is_number(), "{line}");
    // the pipeline gets back to near its alone IPC within 5 s
    let squeezed = ipc[9] / alone;
    let after = ipc[14] / alone;
    assert!(squeezed < 0.8, "the thrasher hurts: alone {alone}, {ipc:?}");
    assert!(after >= 0.94, "alone {alone}, {ipc:?}");
    // everything back by 70 s
    let back: Vec<_> = kinds.iter().filter(|(t, _)| *t >= 60.0).collect();
    assert!(
        back.iter().all(|k| k.1 == ActionKind::GiveBack),
        "{kinds:?}"
    );
    assert!(back.last().is_some_and(|k| k.0 <= 70.0), "{kinds:?}");
    for d in [0, 1].map(CacheDomain::new) {
        let masks = rdt.cat_classes_in(CatResource::L3, &[d]).expect("masks");
        let mask = masks[0].iter().find(|c| c.class == class).expect("class");
        assert_eq!(mask.mask.ways(), 0xfffff, "domain {d}");
    }
    // the thrasher's CPUs are in its class; the pipeline's were never moved
    assert_eq!(rdt.class_of(LogicalCpu::new(9)).expect("class"), class);
    assert_eq!(
        rdt.class_of(LogicalCpu::new(3)).expect("class"),
        ClassId::new(0)
    );
    // the metrics, for the exporter, in the platform's run directory until the agent stops
    let file = dir
        .path()
        .join("state.json.run")
        .join(rdt_pqos::control::METRICS_FILE);
    let published = std::fs::read_to_string(&file).expect("the metrics file");
    assert!(
        published.contains("rdt_control_class_ways{class=\"thrasher\"} 20"),
        "{published}"
    );
    let metrics = agent.metrics().encode().expect("metrics");
    assert!(
        metrics
            .contains("rdt_control_actions_total{action=\"shrink_ways\",reason=\"contended\"} 1"),
        "{metrics}"
    );
    agent.stop(&mut rdt).expect("stop");
    assert!(!file.exists(), "the metrics go with the agent");
}

#[test]
fn mba_is_throttled_once_ways_cannot_help_and_undone_when_it_does_not_help_either() {
    // skylake-sp has MBA; the target asks more LLC than the pipeline's 24 MiB working set,
    // so ways help (occupancy rises) but MBA cannot (it does not add occupancy)
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path(), "skylake-sp");
    set(&rdt, &scenario(true));
    let policy = Policy::parse_toml(
        "[[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\ntarget = { llc_mib = 40 }\n\n\
         [[best_effort]]\nname = \"thrasher\"\ncpus = \"8-10\"\nmin_ways = 2\n\
         min_mba_percent = 20\n",
        "policy.toml",
    )
    .expect("policy");
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let class = agent.classes()[0];
    let sim = rdt.simulated().expect("simulated").handle().clone();
    let mut events = Vec::new();
    let mut limits = Vec::new();
    for t in 1..=12u64 {
        sim.advance(Duration::from_secs(1));
        events.extend(
            agent
                .tick(&mut rdt, Duration::from_secs(t))
                .expect("tick")
                .events,
        );
        let mba = rdt
            .bandwidth_classes_in(MbaResource::Mba, &[CacheDomain::new(0)])
            .expect("mba");
        let limit = mba[0].iter().find(|c| c.class == class).expect("class");
        limits.push(limit.limit.value());
    }
    let kinds: Vec<ActionKind> = events.iter().map(|e| e.decision.action).collect();
    assert_eq!(
        kinds[..3],
        [
            ActionKind::ShrinkWays,
            ActionKind::ThrottleMba,
            ActionKind::Revert
        ],
        "{events:?}"
    );
    assert!(events.iter().all(|e| e.applied), "{events:?}");
    // the throttling was written in the register (the least-limit search's first step:
    // half way from 100 % to the 20 % floor, 60 %), then undone
    assert!(limits.contains(&60), "{limits:?}");
    assert_eq!(limits.last(), Some(&100), "{limits:?}");
    agent.stop(&mut rdt).expect("stop");
}

/// Runs the controller `secs` simulated seconds on skylake-sp with `scenario` and
/// `policy`; returns its events.
fn events_over(scenario: &Scenario, policy: &str, secs: u64) -> Vec<rdt_pqos::control::Event> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path(), "skylake-sp");
    set(&rdt, scenario);
    let policy = Policy::parse_toml(policy, "policy.toml").expect("policy");
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let sim = rdt.simulated().expect("simulated").handle().clone();
    let mut events = Vec::new();
    for t in 1..=secs {
        sim.advance(Duration::from_secs(1));
        events.extend(
            agent
                .tick(&mut rdt, Duration::from_secs(t))
                .expect("tick")
                .events,
        );
    }
    agent.stop(&mut rdt).expect("stop");
    events
}

#[test]
fn without_contention_ten_simulated_minutes_pass_without_an_action() {
    // the seed paper's pipeline alone (rdt-sim's built-in scenario), its CPUs' neighbours idle
    let alone = Scenario::builtin("dpdk-pipeline-alone").expect("built-in");
    let policy = "[[protected]]\nname = \"pipeline\"\ncpus = \"4,6,8,10,12,14\"\n\n\
        [[best_effort]]\nname = \"batch\"\ncpus = \"16,18,20\"\nmin_ways = 1\n\
        min_mba_percent = 10\n";
    let events = events_over(&alone, policy, 600);
    assert!(events.is_empty(), "{events:?}");
    // two friendly workloads: halves of the pipeline, 9 MiB each, both fit in the L3
    let mut friendly = alone.clone();
    let mut a = friendly.workloads[0].clone();
    a.workload.working_set_bytes /= 1.3;
    a.cpus = "4,6,8".parse().expect("cpus");
    let mut b = a.clone();
    b.workload.name = Some("batch".into());
    b.cpus = "10,12,14".parse().expect("cpus");
    friendly.workloads = vec![a, b];
    let policy = "[[protected]]\nname = \"pipeline\"\ncpus = \"4,6,8\"\n\n\
        [[best_effort]]\nname = \"batch\"\ncpus = \"10,12,14\"\nmin_ways = 1\n\
        min_mba_percent = 10\n";
    let events = events_over(&friendly, policy, 600);
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn a_workload_of_tasks_is_monitored_by_its_threads_on_the_os_interface_only() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let policy = format!(
        "[[protected]]\nname = \"svc\"\ntasks = [{}]\n\n\
         [[best_effort]]\nname = \"batch\"\ncpus = \"16,18,20\"\nmin_ways = 1\n",
        child.id()
    );
    let policy = Policy::parse_toml(&policy, "policy.toml").expect("policy");
    // MSR: no task monitoring, said before anything runs
    let dir = tempfile::tempdir().expect("tempdir");
    let mut msr = open(dir.path(), "skylake-sp");
    let e =
        Agent::start(&mut msr, policy.clone(), &ProcFs::host(), false).expect_err("tasks on MSR");
    assert!(e.to_string().contains("needs the OS interface"), "{e}");
    drop(msr);
    // OS: the task's monitor group, read each interval
    let dir = tempfile::tempdir().expect("tempdir");
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal")
    };
    let mut os = OpenOptions::simulate(OpenOptions::new(Iface::Os).rdt_iface(None), session)
        .open()
        .expect("open");
    let mut agent = Agent::start(&mut os, policy, &ProcFs::host(), false).expect("start");
    let sim = os.simulated().expect("simulated").handle().clone();
    sim.advance(Duration::from_secs(1));
    let tick = agent.tick(&mut os, Duration::from_secs(1)).expect("tick");
    assert!(tick.readings["svc"].reading.llc_bytes.is_some(), "{tick:?}");
    agent.stop(&mut os).expect("stop");
    // the same process as a cgroup's member (a cgroup v2 directory's cgroup.procs), and a
    // cgroup that does not exist, named
    let cg = tempfile::tempdir().expect("cgroup dir");
    std::fs::write(cg.path().join("cgroup.procs"), format!("{}\n", child.id())).expect("write");
    let by_cgroup = |dir: &std::path::Path| {
        Policy::parse_toml(
            &format!(
                "[[protected]]\nname = \"svc\"\ncgroup = \"{}\"\n\n\
                 [[best_effort]]\nname = \"batch\"\ncpus = \"16,18,20\"\n",
                dir.display()
            ),
            "policy.toml",
        )
        .expect("policy")
    };
    let mut agent =
        Agent::start(&mut os, by_cgroup(cg.path()), &ProcFs::host(), false).expect("start");
    let tick = agent.tick(&mut os, Duration::from_secs(2)).expect("tick");
    assert!(tick.readings["svc"].reading.llc_bytes.is_some(), "{tick:?}");
    agent.stop(&mut os).expect("stop");
    let gone = cg.path().join("gone");
    let e = Agent::start(&mut os, by_cgroup(&gone), &ProcFs::host(), false)
        .expect_err("no such cgroup");
    assert!(e.to_string().contains("\"svc\": cgroup"), "{e}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `Agent::restore` gives back, in one call, the allocation found before `Agent::start`:
/// the squeezed class's ways and the CPUs it made its own (what `rdt-agent --on-exit
/// restore` does).
#[test]
fn restore_writes_back_the_allocation_found_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path(), "broadwell-ep");
    set(&rdt, &scenario(false));
    let before = rdt_pqos::transaction::AllocState::read(&mut rdt).expect("read");
    let policy = Policy::parse_toml(POLICY, "policy.toml").expect("policy");
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let class = agent.classes()[0];
    let sim = rdt.simulated().expect("simulated").handle().clone();
    for t in 1..=20u64 {
        if t == 10 {
            set(&rdt, &scenario(true));
        }
        sim.advance(Duration::from_secs(1));
        agent.tick(&mut rdt, Duration::from_secs(t)).expect("tick");
    }
    let squeezed = rdt
        .cat_classes(CatResource::L3, CacheDomain::new(0))
        .expect("classes");
    let ways = squeezed
        .iter()
        .find(|c| c.class == class)
        .expect("its class");
    assert_ne!(
        ways.mask.ways(),
        0xfffff,
        "the thrasher was squeezed: {ways:?}"
    );
    // act
    let restored = agent.restore(&mut rdt).expect("restore");
    // assert
    assert!(
        restored.classes >= 1 && restored.associations >= 3,
        "{restored:?}"
    );
    let after = rdt_pqos::transaction::AllocState::read(&mut rdt).expect("read");
    assert_eq!(after, before, "everything as found");
}

/// Per domain (issue 32): a protected workload on both sockets of skylake-sp, and one
/// best-effort class that thrashes the L3 of socket 0 (CPUs 16, 18, 20) and runs a
/// cache-friendly batch on socket 1 (17, 19, 21): the scenario family `two-sockets` of the
/// suite (xtask/scenarios/08-two-sockets). The class loses ways and bandwidth in L3 0
/// only, where its aggressor is; in L3 1 it keeps every way and no MBA limit. The
/// controller of the last session wrote the same mask and limit in both domains.
#[test]
fn a_class_spanning_sockets_is_squeezed_only_in_the_domain_of_its_aggressor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut rdt, policy) = family(
        dir.path(),
        "skylake-sp",
        include_str!("../xtask/scenarios/08-two-sockets/scenario.json"),
        include_str!("../xtask/scenarios/08-two-sockets/policy.toml"),
    );
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let class = agent.classes()[0];
    let sim = rdt.simulated().expect("simulated").handle().clone();
    let mut events = Vec::new();
    for t in 1..=20u64 {
        sim.advance(Duration::from_secs(1));
        events.extend(
            agent
                .tick(&mut rdt, Duration::from_secs(t))
                .expect("tick")
                .events,
        );
    }
    let kinds: Vec<ActionKind> = events.iter().map(|e| e.decision.action).collect();
    assert!(kinds.contains(&ActionKind::ShrinkWays), "{kinds:?}");
    assert!(kinds.contains(&ActionKind::ThrottleMba), "{kinds:?}");
    let domains = [CacheDomain::new(0), CacheDomain::new(1)];
    let cat = rdt
        .cat_classes_in(CatResource::L3, &domains)
        .expect("masks");
    let ways: Vec<u32> = cat
        .iter()
        .map(|d| {
            let c = d.iter().find(|c| c.class == class).expect("class");
            c.mask.ways().count_ones()
        })
        .collect();
    let mba = rdt
        .bandwidth_classes_in(MbaResource::Mba, &domains)
        .expect("mba");
    let limits: Vec<u32> = mba
        .iter()
        .map(|d| {
            let c = d.iter().find(|c| c.class == class).expect("class");
            c.limit.value()
        })
        .collect();
    assert!(ways[0] < 11 && ways[1] == 11, "ways per domain {ways:?}");
    assert!(
        limits[0] < 100 && limits[1] == 100,
        "MBA per domain {limits:?}"
    );
    agent.stop(&mut rdt).expect("stop");
}

/// Never harm the protected (issue 32, rule 4): the scenario family `smt-siblings`
/// (xtask/scenarios/05-smt-siblings): a cache and bandwidth aggressor whose class holds the
/// hyperthread siblings of the protected CPUs on skylake-sp, where MBA throttles a core by
/// its threads' strongest delay, with a policy that allows MBA. The agent starts (with a
/// warning), shrinks the class's ways, and never MBA-throttles it: its limit stays 100 %
/// in every domain through the contention.
#[test]
fn a_class_on_protected_siblings_loses_ways_but_is_never_mba_throttled() {
    let text = include_str!("../xtask/scenarios/05-smt-siblings/policy.toml");
    assert!(text.contains("min_mba_percent"), "the policy allows MBA");
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut rdt, policy) = family(
        dir.path(),
        "skylake-sp",
        include_str!("../xtask/scenarios/05-smt-siblings/scenario.json"),
        text,
    );
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let class = agent.classes()[0];
    let sim = rdt.simulated().expect("simulated").handle().clone();
    let mut events = Vec::new();
    for t in 1..=40u64 {
        sim.advance(Duration::from_secs(1));
        events.extend(
            agent
                .tick(&mut rdt, Duration::from_secs(t))
                .expect("tick")
                .events,
        );
        let mba = rdt
            .bandwidth_classes_in(
                MbaResource::Mba,
                &[CacheDomain::new(0), CacheDomain::new(1)],
            )
            .expect("mba");
        for d in &mba {
            let c = d.iter().find(|c| c.class == class).expect("class");
            assert_eq!(c.limit.value(), 100, "second {t}: {events:?}");
        }
    }
    let kinds: Vec<ActionKind> = events.iter().map(|e| e.decision.action).collect();
    assert!(kinds.contains(&ActionKind::ShrinkWays), "{kinds:?}");
    assert!(!kinds.contains(&ActionKind::ThrottleMba), "{kinds:?}");
    agent.stop(&mut rdt).expect("stop");
}

/// Give-back by demand, per domain (issue 32): the scenario family `genoa-ccx`
/// (xtask/scenarios/07-genoa-ccx): the class `near` thrashes the protected workload's CCX
/// (L3 0) and runs a cache-friendly batch in the next one (L3 1, where no protected
/// workload runs and its ways are never changed). It loses ways in L3 0 only; after the
/// thrasher stops (60 s) it gets them back within 10 s: its fill is judged in L3 0, where
/// it is squeezed, not over both CCXs (the batch's fill of L3 1 kept it squeezed for good).
#[test]
fn a_class_squeezed_in_one_ccx_gets_its_ways_back_after_the_contention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut rdt, policy) = family(
        dir.path(),
        "genoa",
        include_str!("../xtask/scenarios/07-genoa-ccx/scenario.json"),
        include_str!("../xtask/scenarios/07-genoa-ccx/policy.toml"),
    );
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let near = agent.classes()[0];
    let sim = rdt.simulated().expect("simulated").handle().clone();
    let ways = |rdt: &mut Rdt| {
        let cat = rdt
            .cat_classes_in(CatResource::L3, &[CacheDomain::new(0)])
            .expect("masks");
        let c = cat[0].iter().find(|c| c.class == near).expect("class");
        c.mask.ways().count_ones()
    };
    let full = ways(&mut rdt);
    let mut squeezed = false;
    for t in 1..=70u64 {
        sim.advance(Duration::from_secs(1));
        agent.tick(&mut rdt, Duration::from_secs(t)).expect("tick");
        squeezed |= ways(&mut rdt) < full;
    }
    assert!(squeezed, "near lost ways in L3 0 during the contention");
    assert_eq!(ways(&mut rdt), full, "near has every way of L3 0 again");
    agent.stop(&mut rdt).expect("stop");
}

/// A BestEffort pod (UID ending in `n`) whose one container is process `pid`, as the NRI
/// plugin records it.
fn besteffort_pod(n: u32, pid: u32) -> rdt_pqos::pods::PodRecord {
    use rdt_pqos::pods::{ContainerRecord, PodRecord};
    let mut pod = PodRecord::capped(
        &format!("0b0c0d0e-0000-4000-8000-{n:012}"),
        "default",
        &format!("batch-{n}"),
        Some("BestEffort"),
        &std::collections::BTreeMap::new(),
    );
    let id = format!("c{n}");
    pod.containers = vec![ContainerRecord::capped(
        &id,
        "main",
        "x",
        Some("x"),
        pid,
        "",
    )];
    pod
}

/// This library's monitor groups on `os`.
fn pqos_groups(os: &mut Rdt) -> Vec<String> {
    let groups = os.groups().expect("groups").into_iter();
    groups
        .map(|g| g.path)
        .filter(|p| p.contains("/mon_groups/pqos-"))
        .collect()
}

/// Process `pid` in the fake /proc at `dir`: its cgroup is the root, so its container is
/// that process alone (`rdt_pqos::pods::container_tasks`).
fn fake_proc(dir: &std::path::Path, pid: u32) {
    std::fs::create_dir_all(dir.join(pid.to_string())).expect("mkdir");
    std::fs::write(dir.join(format!("{pid}/cgroup")), "0::/\n").expect("write");
    std::fs::write(
        dir.join(format!("{pid}/stat")),
        format!("{pid} (sleep) S\n"),
    )
    .expect("write");
}

/// A best-effort workload named by a pod selector (`pods = { qos = ["BestEffort"] }`) on
/// the simulated skylake-sp's OS interface: nothing matches when the controller starts (not
/// an error: it waits); the NRI plugin's record then gains a BestEffort pod whose container
/// is a child process, and at the next interval its task is in the workload's class and
/// monitored; the pod goes, and its group with it.
#[test]
fn a_besteffort_pod_started_after_the_controller_is_put_in_its_class() {
    use rdt_pqos::pods::{PodsRecord, VERSION};
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let pid = child.id();
    let dir = tempfile::tempdir().expect("tempdir");
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal")
    };
    let mut os = OpenOptions::simulate(OpenOptions::new(Iface::Os).rdt_iface(None), session)
        .open()
        .expect("open");
    let run = os.run_dir().expect("a run directory").to_path_buf();
    // the container's process as the plugin's record names it; its cgroup (in this fake
    // /proc) is the root, so the container is that process alone
    let procdir = tempfile::tempdir().expect("proc");
    fake_proc(procdir.path(), pid);
    let proc = ProcFs::at(procdir.path());
    let policy = Policy::parse_toml(
        "[[protected]]\nname = \"svc\"\ncpus = \"2-7\"\n\n\
         [[best_effort]]\nname = \"batch\"\npods = { qos = [\"BestEffort\"] }\nmin_ways = 1\n",
        "policy.toml",
    )
    .expect("policy");
    let mut agent = Agent::start(&mut os, policy, &proc, false).expect("no pod yet: it waits");
    let class = os
        .class_names()
        .into_iter()
        .find(|(_, n)| n == "batch")
        .map(|(c, _)| c)
        .expect("the class of batch");
    let sim = os.simulated().expect("simulated").handle().clone();
    sim.advance(Duration::from_secs(1));
    let tick = agent.tick(&mut os, Duration::from_secs(1)).expect("tick");
    assert!(
        tick.readings["batch"].reading.llc_bytes.is_none(),
        "{tick:?}"
    );
    let task = rdt_pqos::TaskId::new(pid);
    assert_eq!(os.class_of_task(task).expect("class"), ClassId::new(0));
    // a BestEffort pod starts
    let pod = besteffort_pod(1, pid);
    PodsRecord {
        version: VERSION,
        pods: vec![pod],
    }
    .write(&run)
    .expect("record");
    sim.advance(Duration::from_secs(1));
    agent.tick(&mut os, Duration::from_secs(2)).expect("tick");
    assert_eq!(
        os.class_of_task(task).expect("class"),
        class,
        "in its class"
    );
    sim.advance(Duration::from_secs(1));
    let tick = agent.tick(&mut os, Duration::from_secs(3)).expect("tick");
    assert!(
        tick.readings["batch"].reading.llc_bytes.is_some(),
        "monitored: {tick:?}"
    );
    let before = pqos_groups(&mut os);
    assert_eq!(before.len(), 1, "{before:?}");
    // a second BestEffort pod: its task joins the same monitor group (changed in place)
    let mut second = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let other = second.id();
    fake_proc(procdir.path(), other);
    let pod2 = besteffort_pod(2, other);
    let first = PodsRecord::read(&run).expect("record").pods;
    PodsRecord {
        version: VERSION,
        pods: first.into_iter().chain([pod2]).collect(),
    }
    .write(&run)
    .expect("record");
    sim.advance(Duration::from_secs(1));
    agent.tick(&mut os, Duration::from_secs(4)).expect("tick");
    let other_task = rdt_pqos::TaskId::new(other);
    assert_eq!(os.class_of_task(other_task).expect("class"), class);
    assert_eq!(pqos_groups(&mut os), before, "the same monitor group");
    let _ = second.kill();
    let _ = second.wait();
    // the pod goes: its group goes with it
    PodsRecord {
        version: VERSION,
        pods: Vec::new(),
    }
    .write(&run)
    .expect("record");
    sim.advance(Duration::from_secs(1));
    let tick = agent.tick(&mut os, Duration::from_secs(4)).expect("tick");
    assert!(
        tick.readings["batch"].reading.llc_bytes.is_none(),
        "{tick:?}"
    );
    agent.stop(&mut os).expect("stop");
    let _ = child.kill();
    let _ = child.wait();
}

//! Tests of simulated time (phases), memory bandwidth, the application metric and the
//! built-in scenarios (the seed paper's, calibrated against its Tables 3-5).

use std::time::{Duration, Instant};

use rdt_core::{LogicalCpu, Rmid};
use rdt_msr::MsrAddr;
use rdt_msr::MsrIo;

use crate::{BUILTIN_SCENARIOS, Scenario, ScenarioError, SimPlatform, WorkloadMetric};

const MIB: f64 = 1024.0 * 1024.0;
const PQR_ASSOC: u32 = 0xC8F;
const QM_EVTSEL: u32 = 0xC8D;
const QM_CTR: u32 = 0xC8E;

fn cpu(n: u32) -> LogicalCpu {
    LogicalCpu::new(n)
}

fn wr(p: &mut SimPlatform, c: u32, addr: u32, v: u64) {
    MsrIo::write(p, cpu(c), MsrAddr::new(addr), v).unwrap();
}

fn metric<'a>(ms: &'a [WorkloadMetric], name: &str) -> &'a WorkloadMetric {
    ms.iter().find(|m| m.name == name).unwrap()
}

/// A platform running built-in scenario `name` on the model it is written for.
fn paper(name: &str) -> SimPlatform {
    let mut p = SimPlatform::builtin("skylake-sp").unwrap();
    p.set_scenario(&Scenario::builtin(name).unwrap()).unwrap();
    p
}

/// `pqos -a` as registers: `cpus` get class `cos` and RMID `rmid`.
fn assoc(p: &mut SimPlatform, cpus: &[u32], cos: u64, rmid: u64) {
    for &c in cpus {
        wr(p, c, PQR_ASSOC, (cos << 32) | rmid);
    }
}

const PIPELINE: [u32; 6] = [4, 6, 8, 10, 12, 14];
const AGGRESSOR: [u32; 3] = [16, 18, 20];

/// The paper's monitoring: pipeline RMID 1, aggressor RMID 2, in `cos` 0 unless allocated.
/// Returns (pipeline ops/s, pipeline occupancy share of the L3 by its RMID).
fn measure(p: &SimPlatform) -> (f64, f64) {
    let l3 = p.topology().cpus()[0].l3.unwrap();
    let total = p.portion_bytes * f64::from(p.portions);
    let ms = p.workload_metrics();
    let ops = metric(&ms, "pipeline").ops_per_s.unwrap();
    #[allow(clippy::cast_precision_loss)]
    let occ = p.llc_occupancy_bytes(l3, Rmid::new(1)) as f64 / total;
    (ops, occ)
}

fn paper_case(name: &str, cat: bool, mba_delay: Option<u64>) -> (f64, f64) {
    let mut p = paper(name);
    assoc(&mut p, &PIPELINE, 0, 1);
    assoc(&mut p, &AGGRESSOR, 0, 2);
    if cat {
        // pqos -e "llc:1=0x7e0;llc:2=0x1" (the paper's 0xffe00 and 0x3 on 11 ways), socket 0
        wr(&mut p, 0, 0xC91, 0x7e0);
        wr(&mut p, 0, 0xC92, 0x1);
        assoc(&mut p, &PIPELINE, 1, 1);
        assoc(&mut p, &AGGRESSOR, 2, 2);
    }
    if let Some(delay) = mba_delay {
        if !cat {
            assoc(&mut p, &AGGRESSOR, 2, 2);
        }
        wr(&mut p, 0, 0xD52, delay); // pqos -e "mba:2=<100-delay>"
    }
    let m = &p.memory_domains()[0];
    eprintln!(
        "{name} cat={cat} mba={mba_delay:?}: memory rho {:.3} L {:.3}",
        m.utilization(),
        m.latency_factor
    );
    measure(&p)
}

#[test]
fn the_paper_scenario_reproduces_its_three_cases_within_5_points() {
    // arrange + act
    let (alone_ops, alone_occ) = paper_case("dpdk-pipeline-alone", false, None);
    let (shared_ops, shared_occ) = paper_case("dpdk-pipeline", false, None);
    let (cat_ops, cat_occ) = paper_case("dpdk-pipeline", true, None);
    // assert
    let shared = shared_ops / alone_ops;
    let cat = cat_ops / alone_ops;
    eprintln!(
        "alone: {:.2} Mpps, occupancy {:.1}%; no CAT: {:.1}% throughput, {:.1}% occupancy; \
         CAT: {:.1}%, {:.1}%",
        alone_ops / 1e6,
        alone_occ * 100.0,
        shared * 100.0,
        shared_occ * 100.0,
        cat * 100.0,
        cat_occ * 100.0
    );
    let near = |got: f64, want: f64| (got - want).abs() <= 0.05;
    assert!(near(alone_occ, 0.92), "alone occupancy {alone_occ}");
    assert!(
        (alone_ops / 16e6 - 1.0).abs() < 0.01,
        "alone {alone_ops} ops/s"
    );
    assert!(
        near(shared, 0.61) && near(shared_occ, 0.18),
        "{shared} {shared_occ}"
    );
    assert!(near(cat, 0.94) && near(cat_occ, 0.55), "{cat} {cat_occ}");
}

#[test]
fn mba_on_the_aggressor_removes_the_memory_contention_cat_leaves() {
    let (alone, _) = paper_case("dpdk-pipeline-alone", false, None);
    let (cat, _) = paper_case("dpdk-pipeline", true, None);
    for delay in [80, 90] {
        let (both, _) = paper_case("dpdk-pipeline", true, Some(delay));
        eprintln!(
            "CAT + MBA {}% on the aggressor: {:.1}% of alone",
            100 - delay,
            both / alone * 100.0
        );
        assert!(both / alone >= 0.97, "delay {delay}: {}", both / alone);
        assert!(both > cat);
    }
    // MBA alone (no CAT) lowers the memory latency but cannot give back the cache.
    let (mba_only, _) = paper_case("dpdk-pipeline", false, Some(90));
    let (shared, _) = paper_case("dpdk-pipeline", false, None);
    assert!(
        mba_only > shared && mba_only / alone < 0.9,
        "{mba_only} {shared}"
    );
}

#[test]
fn the_aggressor_loads_memory_and_throttling_it_unloads_it() {
    let mut p = paper("dpdk-pipeline");
    let node0 = p.memory_domains()[0].clone();
    assert!(
        node0.utilization() > 0.5 && node0.latency_factor > 1.2,
        "{node0:?}"
    );
    assert!((node0.peak_bytes_per_s - 59.7e9).abs() < 1.0);
    let agg = metric(&p.workload_metrics(), "aggressor").memory_bytes_per_s;
    assoc(&mut p, &AGGRESSOR, 2, 0);
    wr(&mut p, 0, 0xD52, 90);
    let throttled = p.memory_domains()[0].clone();
    let agg_throttled = metric(&p.workload_metrics(), "aggressor").memory_bytes_per_s;
    assert!(agg_throttled < 0.2 * agg, "{agg_throttled} vs {agg}");
    assert!(
        throttled.latency_factor.to_bits() == 1.0f64.to_bits(),
        "{throttled:?}"
    );
}

#[test]
fn demand_never_exceeds_the_peak_and_latency_rises_with_it() {
    // Every CPU of package 0 streams far more than the memory can serve.
    let text = r#"{"memory_peak_gbps": 10,
        "workloads":[{"name":"s","cpus":"0-55","working_set_mib":4096,"traffic_mibps":100000}]}"#;
    let mut p = SimPlatform::builtin("broadwell-ep").unwrap();
    p.set_scenario(&text.parse().unwrap()).unwrap();
    for d in p.memory_domains() {
        assert!(
            d.demand_bytes_per_s <= d.peak_bytes_per_s * (1.0 + 1e-9),
            "{d:?}"
        );
        assert!(d.latency_factor > 5.0, "{d:?}");
    }
    let a = *p.activity(cpu(0)).unwrap();
    assert!(a.memory_latency_factor > 5.0);
    let unloaded = crate::model::activity(
        p.scenario().workload_at(cpu(0), p.now()),
        a.occupancy_bytes,
        crate::model::Throttle::None,
        p.base_frequency_hz(),
    );
    assert!(a.ipc < unloaded.ipc && a.traffic_bytes_per_s < unloaded.traffic_bytes_per_s);
}

#[test]
fn remote_traffic_loads_the_other_package() {
    // CPU 0 is on package 0 (node 0); half its misses go to node 1.
    let text = r#"{"idle":{"traffic_mibps":0},"workloads":[{"cpus":"0","working_set_mib":1024,
        "traffic_mibps":1000,"local_fraction":0.5}]}"#;
    let mut p = SimPlatform::builtin("broadwell-ep").unwrap();
    p.set_scenario(&text.parse().unwrap()).unwrap();
    let t = p.activity(cpu(0)).unwrap().traffic_bytes_per_s;
    let m = p.memory_domains();
    assert_eq!((m[0].node, m[1].node), (0, 1));
    assert!((m[0].demand_bytes_per_s - t / 2.0).abs() < 1.0, "{m:?}");
    assert!((m[1].demand_bytes_per_s - t / 2.0).abs() < 1.0, "{m:?}");
    // broadwell-ep's own peak: 76.8 GB/s per package
    assert!((m[0].peak_bytes_per_s - 76.8e9).abs() < 1.0);
}

#[test]
fn scenarios_without_the_new_fields_keep_the_unloaded_model() {
    // The default scenario on every model stays below the latency knee: nothing changes.
    for model in crate::BUILTIN_MODELS {
        let p = SimPlatform::builtin(model).unwrap();
        for c in p.topology().cpus() {
            let a = p.activity(c.cpu).unwrap();
            assert!(
                a.memory_latency_factor.to_bits() == 1.0f64.to_bits(),
                "{model} {c:?}"
            );
        }
    }
}

/// The MBM total counter of `rmid` on CPU `c`'s L3, in bytes.
fn mbm_total_bytes(p: &mut SimPlatform, c: u32, rmid: u64) -> f64 {
    wr(p, c, QM_EVTSEL, (rmid << 32) | 2);
    let counts = MsrIo::read(p, cpu(c), MsrAddr::new(QM_CTR)).unwrap();
    let up = p.capabilities().monitoring.get().unwrap().upscaling_factor;
    #[allow(clippy::cast_precision_loss)]
    let bytes = (counts * u64::from(up)) as f64;
    bytes
}

#[test]
fn a_workload_starting_at_10s_counts_exactly_its_10s_of_traffic() {
    let late = r#"{"idle":{"traffic_mibps":0},"workloads":[{"cpus":"2","working_set_mib":64,
        "traffic_mibps":500,"start_s":10}]}"#;
    let early = late.replace(r#","start_s":10"#, "");
    // Single 20 s step, 20 steps of 1 s, and the same workload from 0 for 10 s.
    let mut one = SimPlatform::builtin("broadwell-ep").unwrap();
    one.set_scenario(&late.parse().unwrap()).unwrap();
    wr(&mut one, 2, PQR_ASSOC, 1);
    let rate = 500.0 * MIB; // its L3 access rate: the most it can miss
    one.advance(Duration::from_secs(20));
    let mut steps = SimPlatform::builtin("broadwell-ep").unwrap();
    steps.set_scenario(&late.parse().unwrap()).unwrap();
    wr(&mut steps, 2, PQR_ASSOC, 1);
    for _ in 0..20 {
        steps.advance(Duration::from_secs(1));
    }
    let mut from0 = SimPlatform::builtin("broadwell-ep").unwrap();
    from0.set_scenario(&early.parse().unwrap()).unwrap();
    wr(&mut from0, 2, PQR_ASSOC, 1);
    let t = from0.activity(cpu(2)).unwrap().traffic_bytes_per_s;
    from0.advance(Duration::from_secs(10));
    let (a, b, c) = (
        mbm_total_bytes(&mut one, 2, 1),
        mbm_total_bytes(&mut steps, 2, 1),
        mbm_total_bytes(&mut from0, 2, 1),
    );
    let up = f64::from(
        one.capabilities()
            .monitoring
            .get()
            .unwrap()
            .upscaling_factor,
    );
    assert!(t > 0.0 && t <= rate);
    assert!((a - 10.0 * t).abs() <= up, "{a} vs {}", 10.0 * t);
    assert!((a - b).abs() <= up && (a - c).abs() <= up, "{a} {b} {c}");
    assert_eq!(one.now(), Duration::from_secs(20));
}

#[test]
fn phases_change_and_stop_a_workload_at_their_times() {
    let text = r#"{"workloads":[{"name":"w","cpus":"2","working_set_mib":1,"traffic_mibps":10,
        "ipc":2,"instructions_per_op":1000,"stop_s":30,
        "phases":[{"at_s":10,"ipc":1},{"at_s":20,"instructions_per_op":500}]}]}"#;
    let mut p = SimPlatform::builtin("broadwell-ep").unwrap();
    p.set_scenario(&text.parse().unwrap()).unwrap();
    let rate = |p: &SimPlatform| metric(&p.workload_metrics(), "w").ops_per_s.unwrap();
    let r0 = rate(&p);
    p.advance(Duration::from_secs(10));
    let r1 = rate(&p);
    p.advance(Duration::from_secs(10));
    let r2 = rate(&p);
    p.advance(Duration::from_secs(10));
    let m = metric(&p.workload_metrics(), "w").clone();
    assert!((r1 / r0 - 0.5).abs() < 1e-9, "{r0} {r1}");
    assert!((r2 / r1 - 2.0).abs() < 1e-9, "{r1} {r2}");
    assert!(!m.running && m.ops_per_s == Some(0.0), "{m:?}");
    let total = m.ops_total.unwrap();
    assert!(
        (total - 10.0 * (r0 + r1 + r2)).abs() < 1e-6 * total,
        "{total}"
    );
    // the CPU is idle again: the idle workload's IPC
    assert!((p.activity(cpu(2)).unwrap().ipc - crate::Workload::idle().ipc / 1.05).abs() < 0.01);
}

#[test]
fn time_fields_are_checked_and_errors_name_them() {
    let w = |extra: &str| {
        format!(r#"{{"workloads":[{{"cpus":"1","working_set_mib":1,"traffic_mibps":1{extra}}}]}}"#)
    };
    let cases = [
        (w(r#","start_s":-1"#), "workloads[0].start_s"),
        (w(r#","start_s":5,"stop_s":5"#), "workloads[0].stop_s"),
        (w(r#","stop_s":1e10"#), "workloads[0].stop_s"),
        (
            w(r#","phases":[{"at_s":2},{"at_s":1}]"#),
            "workloads[0].phases[1].at_s",
        ),
        (
            w(r#","phases":[{"at_s":2},{"at_s":2}]"#),
            "workloads[0].phases[1].at_s",
        ),
        (
            w(r#","start_s":3,"phases":[{"at_s":2}]"#),
            "workloads[0].phases[0].at_s",
        ),
        (
            w(r#","stop_s":3,"phases":[{"at_s":3}]"#),
            "workloads[0].phases[0].at_s",
        ),
        (w(r#","phases":[{"ipc":2}]"#), "workloads[0].phases[0].at_s"),
        (
            w(r#","phases":[{"at_s":1,"cpus":"2"}]"#),
            "workloads[0].phases[0].cpus",
        ),
        (
            w(r#","phases":[{"at_s":1,"ipc":0}]"#),
            "workloads[0].phases[0].ipc",
        ),
        (w(r#","phases":{}"#), "workloads[0].phases"),
        (
            w(r#","instructions_per_op":0"#),
            "workloads[0].instructions_per_op",
        ),
        (
            w(r#","miss_curve_exponent":0"#),
            "workloads[0].miss_curve_exponent",
        ),
        (w(r#","miss_floor":2"#), "workloads[0].miss_floor"),
        (r#"{"memory_peak_gbps":0}"#.into(), "memory_peak_gbps"),
        (r#"{"provenance":1}"#.into(), "provenance"),
    ];
    for (text, name) in &cases {
        let e = text.parse::<Scenario>().unwrap_err().to_string();
        assert!(e.contains(name), "{text}: {e}");
    }
    let many: Vec<String> = (0..=crate::MAX_PHASES)
        .map(|i| format!(r#"{{"at_s":{i}}}"#))
        .collect();
    let e = w(&format!(r#","phases":[{}]"#, many.join(",")))
        .parse::<Scenario>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("workloads[0].phases") && e.contains("more than"),
        "{e}"
    );
}

#[test]
fn every_builtin_scenario_round_trips_and_fits_its_model() {
    for name in BUILTIN_SCENARIOS {
        let s = Scenario::from_arg(format!("builtin:{name}")).unwrap();
        assert!(s.provenance.as_deref().unwrap_or("").contains("skylake-sp"));
        let back: Scenario = s.to_string().parse().unwrap();
        assert_eq!(back, s, "{name}");
        paper(name);
    }
    let late = Scenario::builtin("dpdk-pipeline-aggressor-at-10s").unwrap();
    assert!((late.workloads[1].start_s - 10.0).abs() < f64::EPSILON);
    assert!(matches!(
        Scenario::from_arg("builtin:nope"),
        Err(ScenarioError::UnknownBuiltin { .. })
    ));
    // phases round-trip with every field, even one set back to its default
    let text = r#"{"workloads":[{"cpus":"1","working_set_mib":1,"traffic_mibps":1,
        "miss_floor":0.3,"phases":[{"at_s":5,"miss_floor":0.05}]}]}"#;
    let s: Scenario = text.parse().unwrap();
    assert_eq!(s.to_string().parse::<Scenario>().unwrap(), s);
}

#[test]
fn a_ten_minute_experiment_runs_in_well_under_a_second() {
    // The aggressor starts at 10 s; a controller writes the aggressor's MBA every second.
    let mut p = paper("dpdk-pipeline-aggressor-at-10s");
    assoc(&mut p, &AGGRESSOR, 2, 2);
    let before = metric(&p.workload_metrics(), "pipeline").ops_per_s.unwrap();
    let start = Instant::now();
    let mut after = 0.0;
    for s in 0..600u64 {
        p.advance(Duration::from_secs(1));
        wr(&mut p, 0, 0xD52, if s % 2 == 0 { 0 } else { 90 });
        if s == 10 {
            after = metric(&p.workload_metrics(), "pipeline").ops_per_s.unwrap();
        }
    }
    let took = start.elapsed();
    eprintln!("600 simulated seconds in 1 s steps with 600 MBA writes: {took:?}");
    // Each write recomputes the steady state (water-filling, memory contention): well under
    // a millisecond in a release build, ~1 ms unoptimized; the bound catches a blow-up.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        after < 0.8 * before,
        "the aggressor arrives: {before} -> {after}"
    );
    let total = metric(&p.workload_metrics(), "pipeline").ops_total.unwrap();
    assert!(total > 500.0 * after && total < 600.0 * before, "{total}");
    // Without writes, the clock alone: 600 steps, one recomputation (at 10 s).
    let mut q = paper("dpdk-pipeline-aggressor-at-10s");
    let start = Instant::now();
    for _ in 0..600 {
        q.advance(Duration::from_secs(1));
    }
    let took = start.elapsed();
    eprintln!("600 simulated seconds in 1 s steps: {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn the_workloads_file_shows_the_metric_and_memory() {
    use crate::fs::control::{ControlTree, SharedFaults};
    use crate::fs::remount::ResctrlSlot;
    use crate::fs::stats::SharedCounts;
    use crate::vfs::Tree;
    let sim = crate::SimHandle::new(paper("dpdk-pipeline"));
    sim.advance(Duration::from_secs(2));
    let slot = ResctrlSlot::new(sim.clone(), None).unwrap();
    let mut t = ControlTree::new(sim, SharedFaults::default(), slot, SharedCounts::default());
    let text = String::from_utf8(t.read("workloads", 0, 1 << 20).unwrap()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}"); // 2 workloads, 2 memory nodes
    assert_eq!(lines[0]["name"], "pipeline");
    assert_eq!(lines[0]["cpus"], "4,6,8,10,12,14");
    let ops = lines[0]["ops"].as_f64().unwrap();
    let rate = lines[0]["ops_per_s"].as_f64().unwrap();
    assert!((ops - 2.0 * rate).abs() < 1e-6 * ops, "{text}");
    assert!(lines[1]["memory_bytes_per_s"].as_f64().unwrap() > 1e9);
    assert_eq!(lines[2]["memory_node"], 0);
}

#[test]
fn a_session_installs_a_builtin_scenario_and_shows_its_metric() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = crate::session::SessionOptions::new("skylake-sp");
    opts.state = Some(dir.path().join("state.json"));
    opts.scenario = Some("builtin:dpdk-pipeline-aggressor-at-10s".into());
    let session = crate::session::Session::open(&opts).unwrap();
    let h = session.handle();
    let alone = metric(&h.workload_metrics(), "pipeline").ops_per_s.unwrap();
    assert!(!metric(&h.workload_metrics(), "aggressor").running);
    h.advance(Duration::from_secs(11));
    let ms = h.workload_metrics();
    assert!(metric(&ms, "aggressor").running);
    let shared = metric(&ms, "pipeline").ops_per_s.unwrap();
    assert!(shared < 0.7 * alone, "{alone} -> {shared}");
    session.save().unwrap();
    // The scenario (with the aggressor's start) is in the state; a later run continues it.
    drop(session);
    opts.scenario = None;
    let again = crate::session::Session::open(&opts).unwrap();
    let s = again.handle().lock().scenario().clone();
    assert_eq!(
        s,
        Scenario::builtin("dpdk-pipeline-aggressor-at-10s").unwrap()
    );
}

/// A scenario's times count from its installation, not from the platform's power-on: one
/// installed after 100 s of running starts its aggressor 10 s later, and survives a saved
/// state that way.
#[test]
fn scenario_times_count_from_the_installation() {
    let mut p = SimPlatform::builtin("skylake-sp").unwrap();
    p.advance(Duration::from_secs(100));
    p.set_scenario(&Scenario::builtin("dpdk-pipeline-aggressor-at-10s").unwrap())
        .unwrap();
    p.advance(Duration::from_secs(5));
    assert!(
        !metric(&p.workload_metrics(), "aggressor").running,
        "at 5 s"
    );
    let saved = p.save_state();
    let mut q = SimPlatform::builtin("skylake-sp").unwrap();
    q.restore_state(&saved).unwrap();
    q.advance(Duration::from_secs(4));
    assert!(
        !metric(&q.workload_metrics(), "aggressor").running,
        "at 9 s"
    );
    q.advance(Duration::from_secs(2));
    assert!(
        metric(&q.workload_metrics(), "aggressor").running,
        "at 11 s"
    );
}

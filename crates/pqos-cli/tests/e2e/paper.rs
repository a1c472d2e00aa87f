//! The seed white paper's session on a Broadwell-EP: a DPDK-like pipeline on CPUs 2-7 is
//! squeezed out of the LLC by a thrasher on CPUs 8-10 until the operator gives each its own
//! ways.
//!
//! Each scenario is written once for any [`Machine`] (the `..._on` functions) and run here on
//! the simulated platform (`pqos --sim`); `sysroot.rs` runs them again on the same model
//! FUSE-mounted (`pqos --iface=msr --sysroot DIR`).

use crate::eqnice;
use crate::util::monitor::{number_after, parse_text};
use crate::util::{Machine, Run, Sim};

/// The pipeline and the thrasher as two monitoring groups, one second after the first sample.
const MONITOR: &[&str] = &["-m", "all:[2-7];all:[8-10]", "-t", "1", "-i", "10"];

#[test]
fn allocation_commands_print_pqos_lines() {
    allocation_commands_print_pqos_lines_on(&Sim::new("broadwell-ep"), |e| {
        assert!(
            e.stderr.contains("simulated"),
            "sim mode says so on stderr: {}",
            e.stderr
        );
    });
}

/// The paper's `-e`, `-a` and `-s` on a Broadwell-EP; `check_e` sees the `-e` run right after
/// it, for what only one machine prints or records.
pub fn allocation_commands_print_pqos_lines_on(m: &dyn Machine, check_e: impl FnOnce(&Run)) {
    let e = m.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 1 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 0 L3CA COS2 => MASK 0x3\n\
         SOCKET 1 L3CA COS2 => MASK 0x3\n\
         Allocation configuration altered.\n",
        e.stdout
    );
    check_e(&e);

    let a = m.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    eqnice!("Allocation configuration altered.\n", a.stdout);

    let s = m.pqos(&["-s"]).ok().stdout;
    for socket in ["0", "1"] {
        let block = s
            .split("L3CA COS definitions for Socket ")
            .find(|b| b.starts_with(socket))
            .unwrap_or_else(|| panic!("socket {socket} block in\n{s}"));
        assert!(
            block.contains("\n    L3CA COS0 => MASK 0xfffff\n"),
            "{block}"
        );
        assert!(
            block.contains("\n    L3CA COS1 => MASK 0xffe00\n"),
            "{block}"
        );
        assert!(block.contains("\n    L3CA COS2 => MASK 0x3\n"), "{block}");
    }
    // Every CPU's line shows the class it was given, with its RMID (MSR interface).
    for cpu in 0..56 {
        let cos = match cpu {
            2..=7 => 1,
            8..=10 => 2,
            _ => 0,
        };
        let needle = format!("    Core {cpu}, ");
        let line = s
            .lines()
            .find(|l| l.starts_with(&needle))
            .unwrap_or_else(|| panic!("core {cpu} in\n{s}"));
        assert!(line.ends_with(&format!("=> COS{cos}, RMID0")), "{line}");
    }
}

#[test]
fn isolating_the_thrasher_gives_the_pipeline_its_ways_back() {
    isolating_the_thrasher_gives_the_pipeline_its_ways_back_on(&Sim::new("broadwell-ep"));
}

/// The paper's point, measured before and after the allocation on a Broadwell-EP.
pub fn isolating_the_thrasher_gives_the_pipeline_its_ways_back_on(m: &dyn Machine) {
    let verbose = m.pqos(&["-D"]).ok().stdout;
    let way_kib = number_after(&verbose, "Way size:") / 1024.0;
    let l3_kib = number_after(&verbose, "Total size:") / 1024.0;

    // Everyone in COS0: the thrasher's traffic evicts the pipeline.
    let before = parse_text(&m.monitor(MONITOR).ok().stdout);
    m.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    m.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    let after = parse_text(&m.monitor(MONITOR).ok().stdout);

    assert_eq!(
        before.len(),
        2,
        "-t 1 -i 10 prints the first sample and one more"
    );
    let last_b = before.last().expect("sample");
    let last_a = after.last().expect("sample");
    let (pipe0, thrash0) = (last_b["2-7"]["LLC[KB]"], last_b["8-10"]["LLC[KB]"]);
    let (pipe1, thrash1) = (last_a["2-7"]["LLC[KB]"], last_a["8-10"]["LLC[KB]"]);

    // The thrasher held most of the cache; confined to 2 ways per socket it holds at most that.
    assert!(
        thrash0 > pipe0 * 4.0,
        "thrasher dominates before: {thrash0} vs {pipe0}"
    );
    assert!(
        thrash1 <= 2.0 * 2.0 * way_kib,
        "thrasher within 2 ways x 2 sockets: {thrash1}"
    );
    // The pipeline grows by several times but stays within its 11 ways on each socket.
    assert!(pipe1 > pipe0 * 3.0, "pipeline recovers: {pipe0} -> {pipe1}");
    assert!(
        pipe1 <= 2.0 * 11.0 * way_kib,
        "pipeline within 11 ways x 2 sockets: {pipe1}"
    );
    assert!(pipe1 + thrash1 <= 2.0 * l3_kib);

    // Bandwidth is measured over the machine's clock (the mounted model's follows the wall
    // clock). Less of the pipeline's working set misses, so it sends less traffic ...
    assert!(last_b["8-10"]["MBL[MB/s]"] > 0.0, "{last_b:?}");
    assert!(
        last_a["2-7"]["MBL[MB/s]"] < last_b["2-7"]["MBL[MB/s]"] / 2.0,
        "less of the pipeline misses: {last_b:?} -> {last_a:?}"
    );
    // ... and runs faster.
    if m.has_pmu() {
        assert!(last_a["2-7"]["IPC"] > last_b["2-7"]["IPC"]);
        assert!(last_a["2-7"]["MISSES"] < last_b["2-7"]["MISSES"]);
    }
}

#[test]
fn first_sample_reports_zero_bandwidth_like_pqos_v25_04() {
    first_sample_reports_zero_bandwidth_and_nonzero_occupancy_on(&Sim::new("broadwell-ep"));
}

/// pqos v25.04 prints the first sample's bandwidth as 0; occupancy is not a delta.
pub fn first_sample_reports_zero_bandwidth_and_nonzero_occupancy_on(m: &dyn Machine) {
    let samples = parse_text(&m.monitor(MONITOR).ok().stdout);
    for (group, row) in &samples[0] {
        assert!(row["MBL[MB/s]"].abs() < f64::EPSILON, "{group}: {row:?}");
        assert!(
            row["LLC[KB]"] > 0.0,
            "occupancy is not a delta: {group}: {row:?}"
        );
    }
    assert!(samples[1]["8-10"]["MBL[MB/s]"] > 0.0);
}

/// On the OS interface pqos v25.04's first sample has the traffic since its monitor group
/// was made (`resctrl_mon_poll` counts from 0), so ours shows the bandwidth since the
/// groups started: a rate like the next sample's, not 0 and not a count since boot.
pub fn first_sample_reports_bandwidth_since_the_start_on(m: &dyn Machine) {
    let samples = parse_text(&m.monitor(MONITOR).ok().stdout);
    for (group, row) in &samples[0] {
        assert!(
            row["LLC[KB]"] > 0.0,
            "occupancy is not a delta: {group}: {row:?}"
        );
    }
    let (first, next) = (
        samples[0]["8-10"]["MBL[MB/s]"],
        samples[1]["8-10"]["MBL[MB/s]"],
    );
    assert!(next > 0.0, "{samples:?}");
    assert!(
        (0.0..=2.0 * next + 1.0).contains(&first),
        "a rate over the time since the start: {first} then {next}"
    );
}

#[test]
fn ungrouped_cores_are_one_row_each_and_rmids_are_released() {
    ungrouped_cores_are_one_row_each_and_rmids_are_released_on(&Sim::new("broadwell-ep"));
}

/// `-m all:0-3` on a Broadwell-EP, then `-s`, then the same run again.
pub fn ungrouped_cores_are_one_row_each_and_rmids_are_released_on(m: &dyn Machine) {
    let run = m.monitor(&["-m", "all:0-3", "-t", "1"]).ok();
    let samples = parse_text(&run.stdout);
    let groups: Vec<&String> = samples[0].keys().collect();
    assert_eq!(groups, ["0", "1", "2", "3"]);
    // After the run every core is back on RMID0, so a second run can start.
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.lines()
            .filter(|l| l.starts_with("    Core "))
            .all(|l| l.ends_with("RMID0")),
        "{s}"
    );
    m.monitor(&["-m", "all:0-3", "-t", "1"]).ok();
}

#[test]
fn concurrent_runs_on_one_simulated_machine_take_turns() {
    // The allocation waits for the monitoring run, which holds the platform, instead of being
    // undone by its save.
    an_allocation_made_while_monitoring_runs_outlives_the_run_on(&Sim::new("broadwell-ep"));
}

/// A two-second monitoring run in real time, and an allocation half a second into it.
pub fn an_allocation_made_while_monitoring_runs_outlives_the_run_on(m: &dyn Machine) {
    m.pqos(&["-s"]).ok(); // create the state (the sim's)
    // A monitoring run in real time lasts about two seconds ...
    let monitor = m.spawn(&["-m", "all:0", "-t", "2"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // ... and an allocation is made meanwhile.
    m.pqos(&["-e", "llc:5=0x3"]).ok();
    let monitor = monitor.wait_with_output().expect("monitor run");
    assert!(
        monitor.status.success(),
        "{}",
        String::from_utf8_lossy(&monitor.stderr)
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    L3CA COS5 => MASK 0x3\n"), "{s}");
}

#[test]
fn a_scenario_file_assigns_other_workloads() {
    let sim = Sim::new("broadwell-ep");
    let scenario = sim.state().with_file_name("scenario.json");
    std::fs::write(&scenario, DB_ON_CPU_0).unwrap();
    let scenario = scenario.to_str().unwrap();
    let db = cpu_0_caches_the_db_and_cpu_1_idles_on(&sim, &["--sim-scenario", scenario]);
    // The scenario stays in the state: the next run without the flag sees the same.
    let again = parse_text(&sim.monitor(&["-m", "llc:0", "-t", "1"]).ok().stdout);
    assert!((again.last().expect("sample")["0"]["LLC[KB]"] - db).abs() < 1e-9);

    let bad = sim.state().with_file_name("bad.json");
    std::fs::write(&bad, r#"{"workloads":[{"cpus":"0","working_set_mib":8,"traffic_mibps":1,"local_fraction":1.5}]}"#).unwrap();
    let run = sim
        .pqos(&["--sim-scenario", bad.to_str().unwrap(), "-s"])
        .failed();
    assert!(run.stderr.contains("local_fraction"), "{}", run.stderr);
}

/// One cache-hungry workload on CPU 0 alone; everything else idle.
pub const DB_ON_CPU_0: &str =
    r#"{"workloads":[{"name":"db","cpus":"0","working_set_mib":8,"traffic_mibps":3000}]}"#;

/// With [`DB_ON_CPU_0`] in place (or installed by `args`, put before `-m`), monitors CPUs 0
/// and 1 on a Broadwell-EP for a second; returns CPU 0's occupancy.
pub fn cpu_0_caches_the_db_and_cpu_1_idles_on(m: &dyn Machine, args: &[&str]) -> f64 {
    let args: Vec<&str> = args
        .iter()
        .chain(&["-m", "llc:0-1", "-t", "1"])
        .copied()
        .collect();
    let run = m.monitor(&args).ok();
    let last = parse_text(&run.stdout).pop().expect("a sample");
    let (db, idle) = (last["0"]["LLC[KB]"], last["1"]["LLC[KB]"]);
    assert!(
        db > 4.0 * 1024.0 && db <= 8.0 * 1024.0,
        "CPU 0 caches most of its 8 MiB: {db}"
    );
    assert!(idle < 1024.0, "CPU 1 is idle: {idle}");
    db
}

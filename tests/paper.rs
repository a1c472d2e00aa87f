//! The seed white paper's session on the simulated Broadwell-EP: a DPDK-like pipeline on CPUs
//! 2-7 is squeezed out of the LLC by a thrasher on CPUs 8-10 until the operator gives each its
//! own ways.

use crate::eqnice;
use crate::util::Sim;
use crate::util::monitor::{number_after, parse_text};

const MONITOR: &[&str] = &[
    "-m",
    "all:[2-7];all:[8-10]",
    "-t",
    "1",
    "-i",
    "10",
    "--sim-virtual-clock",
];

#[test]
fn allocation_commands_print_pqos_lines() {
    let sim = Sim::new("broadwell-ep");

    let e = sim.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 1 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 0 L3CA COS2 => MASK 0x3\n\
         SOCKET 1 L3CA COS2 => MASK 0x3\n\
         Allocation configuration altered.\n",
        e.stdout
    );
    assert!(
        e.stderr.contains("simulated"),
        "sim mode says so on stderr: {}",
        e.stderr
    );

    let a = sim.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    eqnice!("Allocation configuration altered.\n", a.stdout);

    let s = sim.pqos(&["-s"]).ok().stdout;
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
    let sim = Sim::new("broadwell-ep");
    let verbose = sim.pqos(&["-D"]).ok().stdout;
    let way_kib = number_after(&verbose, "Way size:") / 1024.0;
    let l3_kib = number_after(&verbose, "Total size:") / 1024.0;

    // Everyone in COS0: the thrasher's traffic evicts the pipeline.
    let before = parse_text(&sim.pqos(MONITOR).ok().stdout);
    sim.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    sim.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    let after = parse_text(&sim.pqos(MONITOR).ok().stdout);

    assert_eq!(
        before.len(),
        2,
        "-t 1 -i 10 prints the first sample and one more"
    );
    let llc = |samples: &Vec<_>, group: &str| -> f64 {
        let last: &std::collections::BTreeMap<String, crate::util::monitor::Row> =
            samples.last().expect("a sample");
        last[group]["LLC[KB]"]
    };
    let (pipe0, thrash0) = (llc(&before, "2-7"), llc(&before, "8-10"));
    let (pipe1, thrash1) = (llc(&after, "2-7"), llc(&after, "8-10"));

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

    // Less of the pipeline's working set misses, so it sends less traffic and runs faster.
    let last_b = before.last().expect("sample");
    let last_a = after.last().expect("sample");
    assert!(last_a["2-7"]["MBL[MB/s]"] < last_b["2-7"]["MBL[MB/s]"] / 2.0);
    assert!(last_a["2-7"]["IPC"] > last_b["2-7"]["IPC"]);
    assert!(last_a["2-7"]["MISSES"] < last_b["2-7"]["MISSES"]);
}

#[test]
fn first_sample_reports_zero_bandwidth_like_pqos_v25_04() {
    let sim = Sim::new("broadwell-ep");
    let samples = parse_text(&sim.pqos(MONITOR).ok().stdout);
    for (group, row) in &samples[0] {
        assert!(row["MBL[MB/s]"].abs() < f64::EPSILON, "{group}: {row:?}");
        assert!(
            row["LLC[KB]"] > 0.0,
            "occupancy is not a delta: {group}: {row:?}"
        );
    }
    assert!(samples[1]["8-10"]["MBL[MB/s]"] > 0.0);
}

#[test]
fn ungrouped_cores_are_one_row_each_and_rmids_are_released() {
    let sim = Sim::new("broadwell-ep");
    let run = sim
        .pqos(&["-m", "all:0-3", "-t", "1", "--sim-virtual-clock"])
        .ok();
    let samples = parse_text(&run.stdout);
    let groups: Vec<&String> = samples[0].keys().collect();
    assert_eq!(groups, ["0", "1", "2", "3"]);
    // After the run every core is back on RMID0, so a second run can start.
    let s = sim.pqos(&["-s"]).ok().stdout;
    assert!(
        s.lines()
            .filter(|l| l.starts_with("    Core "))
            .all(|l| l.ends_with("RMID0")),
        "{s}"
    );
    sim.pqos(&["-m", "all:0-3", "-t", "1", "--sim-virtual-clock"])
        .ok();
}

#[test]
fn concurrent_runs_on_one_simulated_machine_take_turns() {
    let sim = Sim::new("broadwell-ep");
    sim.pqos(&["-s"]).ok(); // create the state
    // A monitoring run in real time holds the platform for about two seconds ...
    let monitor = sim.spawn(&["-m", "all:0", "-t", "2"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // ... and an allocation meanwhile waits for it instead of being undone by its save.
    sim.pqos(&["-e", "llc:5=0x3"]).ok();
    let monitor = monitor.wait_with_output().expect("monitor run");
    assert!(
        monitor.status.success(),
        "{}",
        String::from_utf8_lossy(&monitor.stderr)
    );
    let s = sim.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    L3CA COS5 => MASK 0x3\n"), "{s}");
}

#[test]
fn a_scenario_file_assigns_other_workloads() {
    let sim = Sim::new("broadwell-ep");
    let scenario = sim.state().with_file_name("scenario.json");
    // One cache-hungry workload on CPU 0 alone; everything else idle.
    std::fs::write(
        &scenario,
        r#"{"workloads":[{"name":"db","cpus":"0","working_set_mib":8,"traffic_mibps":3000}]}"#,
    )
    .unwrap();
    let scenario = scenario.to_str().unwrap();
    let run = sim
        .pqos(&[
            "--sim-scenario",
            scenario,
            "-m",
            "llc:0-1",
            "-t",
            "1",
            "--sim-virtual-clock",
        ])
        .ok();
    let last = parse_text(&run.stdout).pop().expect("a sample");
    let (db, idle) = (last["0"]["LLC[KB]"], last["1"]["LLC[KB]"]);
    assert!(
        db > 4.0 * 1024.0 && db <= 8.0 * 1024.0,
        "CPU 0 caches most of its 8 MiB: {db}"
    );
    assert!(idle < 1024.0, "CPU 1 is idle: {idle}");
    // The scenario stays in the state: the next run without the flag sees the same.
    let again = parse_text(
        &sim.pqos(&["-m", "llc:0", "-t", "1", "--sim-virtual-clock"])
            .ok()
            .stdout,
    );
    assert!((again.last().expect("sample")["0"]["LLC[KB]"] - db).abs() < 1e-9);

    let bad = sim.state().with_file_name("bad.json");
    std::fs::write(&bad, r#"{"workloads":[{"cpus":"0","working_set_mib":8,"traffic_mibps":1,"local_fraction":1.5}]}"#).unwrap();
    let run = sim
        .pqos(&["--sim-scenario", bad.to_str().unwrap(), "-s"])
        .failed();
    assert!(run.stderr.contains("local_fraction"), "{}", run.stderr);
}

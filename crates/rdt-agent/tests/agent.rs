//! `rdt-agent` as an operator runs it, on the in-process simulated broadwell-ep (the seed
//! paper's pipeline on CPUs 2-7 next to a cache thrasher on 8-10, from the start): one JSON
//! line per decision, `--dry-run` writes nothing, SIGTERM ends the run leaving what
//! `--on-exit` says, and hostile input (a bad policy, an events file behind a symlink) is
//! refused naming what is wrong.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rdt_pqos::sim::SessionOptions;
use rdt_pqos::{Backend, CacheDomain, CatResource, Iface, OpenOptions};

const AGENT: &str = env!("CARGO_BIN_EXE_rdt-agent");

/// The pipeline defended to IPC 1.6 (it runs at ~1.0 next to the thrasher, 1.71 alone).
const POLICY: &str = "[[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\n\
    target = { ipc = 1.6 }\n\n[[best_effort]]\nname = \"thrasher\"\ncpus = \"8-10\"\n\
    min_ways = 2\n";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_str().expect("UTF-8").to_owned()
}

fn agent(dir: &Path, policy: &str, extra: &[&str]) -> Output {
    agent_on(dir, "broadwell-ep", policy, extra)
}

/// `rdt-agent --policy POLICY --sim MODEL --sim-state DIR/state.json EXTRA...`.
fn agent_on(dir: &Path, model: &str, policy: &str, extra: &[&str]) -> Output {
    Command::new(AGENT)
        .args(["--policy", policy, "--sim", model, "--sim-state"])
        .arg(dir.join("state.json"))
        .args(extra)
        .output()
        .expect("run rdt-agent")
}

/// The L3 masks of every class in domain 0 of the simulated platform saved at `dir`.
fn masks(dir: &Path) -> Vec<u64> {
    let session = SessionOptions {
        state: Some(dir.join("state.json")),
        ..SessionOptions::new("broadwell-ep")
    };
    let mut rdt = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open");
    let classes = rdt
        .cat_classes_in(CatResource::L3, &[CacheDomain::new(0)])
        .expect("masks");
    classes[0].iter().map(|c| c.mask.ways()).collect()
}

fn lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn each_decision_is_a_json_line_and_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write(dir.path(), "p.toml", POLICY);
    let dry = agent(
        dir.path(),
        &policy,
        &["--sim-virtual-clock", "--duration", "10", "--dry-run"],
    );
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    let events = lines(&dry);
    assert_eq!(events[0]["action"], "shrink_ways", "{events:?}");
    assert_eq!(events[0]["applied"], false);
    // each proposal starts where the one before it would have left the class
    for w in events.windows(2) {
        assert_eq!(w[1]["from"], w[0]["to"], "{events:?}");
    }
    assert!(
        masks(dir.path()).iter().all(|m| *m == 0xfffff),
        "nothing written"
    );
    let run = agent(
        dir.path(),
        &policy,
        &["--sim-virtual-clock", "--duration", "10"],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let events = lines(&run);
    assert_eq!(events[0]["action"], "shrink_ways");
    assert_eq!(events[0]["reason"], "contended");
    assert_eq!(events[0]["applied"], true);
    assert_eq!(events[0]["to"]["ways"], 2);
    assert!(events[0]["readings"]["thrasher"]["llc_bytes"].is_u64());
    assert!(masks(dir.path()).contains(&0x3), "{:x?}", masks(dir.path()));
    // restarted, it adopts the squeezed class: nothing more to do
    let again = agent(
        dir.path(),
        &policy,
        &["--sim-virtual-clock", "--duration", "10"],
    );
    assert!(again.status.success());
    assert!(lines(&again).is_empty(), "{:?}", lines(&again));
}

#[test]
fn sigterm_ends_the_run_and_restore_puts_back_the_allocation_it_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write(
        dir.path(),
        "p.toml",
        &format!("interval_ms = 100\n{POLICY}"),
    );
    let child = Command::new(AGENT)
        .args([
            "--policy",
            &policy,
            "--sim",
            "broadwell-ep",
            "--on-exit",
            "restore",
        ])
        .arg("--sim-state")
        .arg(dir.path().join("state.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines(&out)[0]["action"],
        "shrink_ways",
        "it acted before the signal"
    );
    assert!(masks(dir.path()).iter().all(|m| *m == 0xfffff), "restored");
}

#[test]
fn hostile_input_is_refused_naming_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = write(
        dir.path(),
        "bad.toml",
        "[[protected]]\nname = \"p\"\ncpus = \"2-7\"\ntarget = \"fast\"\n",
    );
    let out = agent(
        dir.path(),
        &bad,
        &["--sim-virtual-clock", "--duration", "1"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.toml:4") && err.contains("protected[0].target"),
        "{err}"
    );
    // a policy for more ways than the L3 has
    let big = write(
        dir.path(),
        "big.toml",
        &POLICY.replace("min_ways = 2", "min_ways = 40"),
    );
    let out = agent(
        dir.path(),
        &big,
        &["--sim-virtual-clock", "--duration", "1"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("min_ways 40"));
    // the events file behind a symlink another user could have planted
    let policy = write(dir.path(), "p.toml", POLICY);
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "").expect("write");
    let link = dir.path().join("events.jsonl");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let out = agent(
        dir.path(),
        &policy,
        &[
            "--sim-virtual-clock",
            "--duration",
            "5",
            "--events",
            link.to_str().expect("UTF-8"),
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--events"));
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "");
}

/// `rdt-agent ARGS` killed after `secs` (then `None`): the output of a run that ended.
fn agent_within(dir: &Path, policy: &str, extra: &[&str], secs: u64) -> Option<Output> {
    let mut child = Command::new(AGENT)
        .args(["--policy", policy, "--sim", "broadwell-ep", "--sim-state"])
        .arg(dir.join("state.json"))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `--events` at a FIFO someone planted (with no reader: `open(2)` for writing would block
/// forever, beyond SIGTERM) and below a symlinked directory: each refused at once, naming
/// the path and what is there; nothing written through the link.
#[test]
fn an_events_fifo_or_symlinked_directory_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = write(dir.path(), "p.toml", POLICY);
    let fifo = dir.path().join("events.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let run = |events: &Path| {
        // 30 s: the simulated platform's start on a loaded 2-core machine; a hang is forever
        agent_within(
            dir.path(),
            &policy,
            &[
                "--sim-virtual-clock",
                "--duration",
                "1",
                "--events",
                events.to_str().expect("UTF-8"),
            ],
            30,
        )
        .unwrap_or_else(|| panic!("rdt-agent --events {} hung", events.display()))
    };
    let out = run(&fifo);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("--events {}", fifo.display())) && err.contains("a FIFO"),
        "{err}"
    );
    let real = dir.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let linked = dir.path().join("linked");
    std::os::unix::fs::symlink(&real, &linked).expect("symlink");
    let out = run(&linked.join("events.jsonl"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("{}: a symbolic link", linked.display())),
        "{err}"
    );
    assert!(
        !real.join("events.jsonl").exists(),
        "nothing made through the link"
    );
}

#[test]
fn the_deployed_policy_and_unit_name_the_same_file_and_it_parses() {
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let policy = rdt_pqos::config::policy::Policy::load(format!("{deploy}/rdt-agent-policy.toml"))
        .expect("deploy/rdt-agent-policy.toml parses");
    assert_eq!(policy.names().collect::<Vec<_>>(), ["pipeline", "batch"]);
    let unit = std::fs::read_to_string(format!("{deploy}/rdt-agent.service")).expect("unit");
    assert!(
        unit.contains("--policy /etc/rdt/agent-policy.toml"),
        "{unit}"
    );
    // the unit's flags are the binary's
    let help = Command::new(AGENT).arg("--help").output().expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--policy", "--iface", "--on-exit"] {
        assert!(help.contains(flag), "{flag} in\n{help}");
    }
}

#[test]
fn a_dry_run_proposes_each_step_from_the_last_proposal_down_to_the_floors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/paper.toml");
    let out = agent_on(
        dir.path(),
        "skylake-sp",
        policy,
        &[
            "--iface",
            "msr",
            "--sim-scenario",
            "builtin:dpdk-pipeline-aggressor-at-10s",
            "--sim-virtual-clock",
            "--duration",
            "40",
            "--dry-run",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = lines(&out);
    assert!(events.len() >= 3, "{events:?}");
    for w in events.windows(2) {
        assert_eq!(w[1]["from"], w[0]["to"], "{events:?}");
    }
    let last = &events[events.len() - 1]["to"];
    assert_eq!(
        (last["ways"].as_u64(), last["mba_percent"].as_u64()),
        (Some(1), Some(10))
    );
    assert!(events.iter().all(|e| e["applied"] == false));
}

#[test]
fn nfd_writes_the_feature_file_of_the_platform_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rdt");
    let out = Command::new(AGENT)
        .args(["--sim", "genoa", "--sim-state"])
        .arg(dir.path().join("state.json"))
        .arg("--nfd")
        .arg(&file)
        .output()
        .expect("run rdt-agent");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).expect("the feature file");
    // genoa: AMD MBA and SMBA, 16 classes (15 besides the default one), 16 ways
    for line in [
        "feature.node.kubernetes.io/cpu-rdt.RDTL3CA=true",
        "feature.node.kubernetes.io/cpu-rdt.RDTL3CA_NUM_CLOSID=15",
        "feature.node.kubernetes.io/cpu-rdt.RDTMBA=true",
        "feature.node.kubernetes.io/cpu-rdt.RDTSMBA=true",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // without a policy and without --nfd: refused
    let out = Command::new(AGENT)
        .args(["--sim", "genoa"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--policy"));
}

/// Issue 32, rule 4: on skylake-sp MBA throttles a core by its threads' strongest delay, so
/// a best-effort workload on the SMT sibling of a protected CPU that the policy lets the
/// agent throttle is accepted with a warning naming the CPUs (the agent never MBA-throttles
/// it, and still uses its L3 ways); without `min_mba_percent` there is nothing to warn of.
#[test]
fn a_best_effort_workload_on_a_protected_cpus_sibling_is_warned_about_and_never_mba_throttled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = SessionOptions {
        state: Some(dir.path().join("probe.json")),
        ..SessionOptions::new("skylake-sp")
    };
    let rdt = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open");
    let topo = rdt.topology();
    let four = topo.get(rdt_pqos::LogicalCpu::new(4)).expect("CPU 4");
    let sibling = topo
        .cpus()
        .iter()
        .find(|p| p.cpu.get() != 4 && p.package == four.package && p.core == four.core)
        .expect("CPU 4 has an SMT sibling")
        .cpu
        .get();
    drop(rdt);
    let text = format!(
        "[[protected]]\nname = \"pipeline\"\ncpus = \"4\"\n\n[[best_effort]]\nname = \"batch\"\n\
         cpus = \"{sibling}\"\nmin_mba_percent = 10\n"
    );
    let policy = write(dir.path(), "p.toml", &text);
    let run = ["--iface", "msr", "--sim-virtual-clock", "--duration", "2"];
    let out = agent_on(dir.path(), "skylake-sp", &policy, &run);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("CPU {sibling} (sibling of \"pipeline\"'s CPU 4)"))
            && err.contains("never MBA-throttles it"),
        "{err}"
    );
    let policy = write(
        dir.path(),
        "ways.toml",
        &text.replace("min_mba_percent = 10\n", ""),
    );
    let out = agent_on(dir.path(), "skylake-sp", &policy, &run);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("sibling of"), "{err}");
}

/// Issue 32, AMD limits in GB/s as the part counts them: on the simulated genoa (MBA in
/// units of 1/8 GB/s per CCX, 2^11 of them no limit), with the scenario suite's genoa-ccx
/// workloads (streamers in CCXs 2 and 3 from 10 s), a policy whose floor is in GB/s runs
/// and its events give every limit as `mba_gbps`, a multiple of 0.125 between the floor and
/// 256, and at least one throttle below no limit; the same policy with a percent floor is
/// refused, naming the key, its line and the unit to use.
#[test]
fn on_genoa_mba_limits_are_decided_and_reported_in_gbps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../xtask/scenarios/07-genoa-ccx/scenario.json"
    );
    let text = "[[protected]]\nname = \"cache-app\"\ncpus = \"0-3\"\n\n[[best_effort]]\n\
                name = \"stream\"\ncpus = \"16-31\"\nmin_ways = 1\nmin_mba_gbps = 2.5\n";
    let policy = write(dir.path(), "amd.toml", text);
    let run = [
        "--sim-scenario",
        scenario,
        "--sim-virtual-clock",
        "--duration",
        "40",
    ];
    let out = agent_on(dir.path(), "genoa", &policy, &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = lines(&out);
    let limits: Vec<f64> = events
        .iter()
        .flat_map(|e| [&e["from"], &e["to"]])
        .map(|s| {
            assert!(s.get("mba_percent").is_none(), "{s}");
            s["mba_gbps"].as_f64().unwrap_or_else(|| panic!("{s}"))
        })
        .collect();
    assert!(
        limits
            .iter()
            .all(|g| (2.5..=256.0).contains(g) && (g * 8.0).fract() == 0.0),
        "{limits:?}"
    );
    let throttled: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["action"] == "throttle_mba")
        .collect();
    assert!(
        throttled
            .iter()
            .any(|e| e["to"]["mba_gbps"].as_f64().is_some_and(|g| g < 256.0)),
        "{events:#?}"
    );
    let percent = write(
        dir.path(),
        "percent.toml",
        &text.replace("min_mba_gbps = 2.5", "min_mba_percent = 1"),
    );
    let out = agent_on(dir.path(), "genoa", &percent, &run);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("percent.toml:9: best_effort[0].min_mba_percent:")
            && err.contains("give `min_mba_gbps`"),
        "{err}"
    );
}

/// Issue 32 on genoa-ccx (the scenario suite's family: a class holding a cache thrasher in
/// the protected workload's CCX and a batch in the next): the class is throttled in the
/// thrasher's CCX only; once the thrasher stops, its limit there holds nothing back and is
/// given back within 10 s. The give-back judged the limit by the busiest of the class's
/// domains, the batch's unthrottled one (1.26 GB/s, over half the 2.5 GB/s limit), and
/// kept the limit for good.
#[test]
fn on_genoa_a_limit_is_given_back_by_the_traffic_of_the_ccx_it_holds_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let family = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../xtask/scenarios/07-genoa-ccx"
    );
    let policy = format!("{family}/policy.toml");
    let scenario = format!("{family}/scenario.json");
    let run = [
        "--sim-scenario",
        scenario.as_str(),
        "--sim-virtual-clock",
        "--duration",
        "90",
    ];
    let out = agent_on(dir.path(), "genoa", &policy, &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = lines(&out);
    let near: Vec<&serde_json::Value> = events.iter().filter(|e| e["class"] == "near").collect();
    let throttled = near
        .iter()
        .filter(|e| e["t_s"].as_f64() < Some(60.0))
        .filter_map(|e| e["to"]["mba_gbps"].as_f64())
        .fold(256.0, f64::min);
    assert!(
        throttled < 256.0,
        "throttled while the thrasher runs: {near:#?}"
    );
    let back = near
        .iter()
        .find(|e| e["action"] == "give_back" && e["to"]["mba_gbps"] == 256.0)
        .unwrap_or_else(|| panic!("given back: {near:#?}"));
    assert!(back["t_s"].as_f64() <= Some(70.0), "{back}");
}

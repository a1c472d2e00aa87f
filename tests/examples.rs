//! The examples in `examples/` run against the mounted simulated platform (RDT_SYSROOT) or,
//! without root, the in-process one (`RDT_SIM`, `OpenOptions::simulated`), and do what
//! their comments say.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use rdt_pqos::{CatResource, MbaKind};
use rdt_sim::fs::testing::TestMount;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

/// An example's binary: `cargo test` builds the package's examples next to its tests
/// (`target/<profile>/examples/`).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: `cargo test` builds the examples (`cargo build --examples` does too)",
        bin.display()
    );
    bin
}

fn run(m: &TestMount, name: &str, args: &[&str]) -> (String, Output) {
    let out = Command::new(example(name))
        .args(args)
        .env("RDT_SYSROOT", m.root())
        .env_remove("RDT_IFACE")
        .output()
        .expect("run the example");
    let text = String::from_utf8(out.stdout.clone()).expect("UTF-8");
    assert!(
        out.status.success(),
        "{name} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (text, out)
}

/// Runs an example on the in-process simulated platform as an unprivileged user (`nobody`
/// when the test runs as root), its state in a fresh directory of that user's: what a
/// newcomer without root gets from `RDT_SIM=MODEL cargo run --features sim --example NAME`.
#[cfg(feature = "sim")]
fn run_unprivileged(name: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(example(name));
    cmd.args(args)
        .envs(env.iter().copied())
        .env("XDG_RUNTIME_DIR", dir.path())
        .env_remove("RDT_SYSROOT")
        .env_remove("RDT_IFACE");
    if nix::unistd::geteuid().is_root() {
        let nobody = 65534;
        std::os::unix::fs::chown(dir.path(), Some(nobody), Some(nobody)).expect("chown");
        cmd.uid(nobody).gid(nobody);
    }
    let out = cmd.output().expect("run the example");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} failed:\n{text}\n{stderr}");
    assert!(
        dir.path().join("rdt-sim").is_dir(),
        "its state went to the user's directory"
    );
    text
}

#[cfg(feature = "sim")]
#[test]
fn noisy_neighbour_isolates_the_pipeline_without_root() {
    // act
    let out = run_unprivileged("noisy_neighbour", &[], &[]);
    // assert: four lines, `WHEN: NAME LLC N KiB, local X MB/s`
    let value = |when: &str, name: &str| -> (u64, f64) {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{when}: {name} LLC ")))
            .unwrap_or_else(|| panic!("{when} {name}:\n{out}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        (
            words[3].parse().expect("KiB"),
            words[6].parse().expect("MB/s"),
        )
    };
    let (shared, isolated) = (value("shared", "pipeline"), value("isolated", "pipeline"));
    assert!(
        isolated.0 > 2 * shared.0,
        "11 ways of its own give the pipeline more LLC:\n{out}"
    );
    assert!(isolated.1 < shared.1, "and fewer misses to memory:\n{out}");
    let thrasher = value("isolated", "thrasher");
    assert!(thrasher.1 > 1000.0, "the thrasher still streams:\n{out}");
}

#[cfg(feature = "sim")]
#[test]
fn controller_squeezes_the_aggressor_after_it_starts_and_restores_on_exit() {
    // act: 30 simulated seconds of the paper's experiment, the aggressor starting at 10 s
    let out = run_unprivileged("controller", &[], &[]);
    // assert: decisions as JSON lines, none before the aggressor starts; the first squeezes
    // its ways; the last line says the allocation found was written back
    let events: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert!(!events.is_empty(), "no decision:\n{out}");
    let t = |l: &str| -> f64 {
        let rest = l.split("\"t_s\":").nth(1).expect("t_s");
        rest.split(',')
            .next()
            .expect("a number")
            .parse()
            .expect("seconds")
    };
    assert!(
        events.iter().all(|l| t(l) > 10.0),
        "acted before contention:\n{out}"
    );
    assert!(events[0].contains("\"action\":\"shrink_ways\""), "{out}");
    let last = out.lines().last().expect("a last line");
    let restored: usize = last
        .strip_prefix("restored ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no restore line:\n{out}"));
    assert!(restored >= 1, "the squeezed class was given back:\n{out}");
}

#[cfg(feature = "sim")]
#[test]
fn apply_classes_applies_converges_and_removes() {
    let out = run_unprivileged("apply_classes", &[], &[("RDT_SIM", "broadwell-ep")]);
    assert!(out.contains("pipeline: class of service "), "{out}");
    assert!(out.contains("noisy: class of service "), "{out}");
    assert!(
        out.contains("writes left to make: 0\n"),
        "applying converges:\n{out}"
    );
    assert!(out.ends_with("removed\n"), "{out}");
}

#[cfg(feature = "sim")]
#[test]
fn capabilities_runs_on_rdt_sim_without_root_and_an_unknown_model_is_an_error() {
    let out = run_unprivileged("capabilities", &[], &[("RDT_SIM", "turin-dump")]);
    assert!(out.starts_with("Amd via the Msr interface\n"), "{out}");
    assert!(out.contains("CPUs 0-63,"), "{out}");
    // an unknown model: the error's Display (not Debug), naming the models
    let refused = Command::new(example("capabilities"))
        .env("RDT_SIM", "pentium-4")
        .env_remove("RDT_IFACE")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("cannot open the simulated platform") && stderr.contains("broadwell-ep"),
        "{stderr}"
    );
    assert!(!stderr.contains("Sim("), "Display, not Debug: {stderr}");
}

fn sleeper() -> Child {
    Command::new("sleep").arg("30").spawn().expect("sleep")
}

#[test]
fn capabilities_prints_what_the_platform_has() {
    let m = TestMount::builtin(SKX_RDT);
    let (out, _) = run(&m, "capabilities", &[]);
    let caps = m.platform().lock().capabilities().clone();
    let l3 = caps.cat(CatResource::L3).expect("L3 CAT");
    let mba = caps.mba.get().expect("MBA");
    assert!(out.starts_with("Intel via the Os interface\n"), "{out}");
    assert!(
        out.contains(&format!("L3 CAT: {}-bit CBM, ", l3.cbm_len)),
        "{out}"
    );
    assert!(out.contains("L2 CAT: no\n"), "{out}");
    assert!(matches!(mba.kind, MbaKind::IntelDelay { .. }));
    assert!(out.contains("MBA: 8 classes, step 10\n"), "{out}");
    assert!(
        out.contains("monitoring: LLC occupancy, local memory bandwidth, total memory bandwidth"),
        "{out}"
    );
}

#[test]
fn limit_process_gives_the_process_four_ways_and_half_the_bandwidth() {
    let m = TestMount::builtin(SKX_RDT);
    let mut child = sleeper();
    let pid = child.id().to_string();
    let (out, _) = run(&m, "limit_process", &[&pid]);
    let schemata = std::fs::read_to_string(m.path("sys/fs/resctrl/COS1/schemata")).unwrap();
    let tasks = std::fs::read_to_string(m.path("sys/fs/resctrl/COS1/tasks")).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.ends_with(&format!("process {pid} is in COS1\n")),
        "{out}"
    );
    let line = |name: &str| {
        schemata
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} in {schemata}"))
            .trim()
            .to_owned()
    };
    assert_eq!(line("L3"), "L3:0=f;1=f", "{schemata}");
    // a process that does not exist: refused before anything is written
    let m2 = TestMount::builtin(SKX_RDT);
    let refused = Command::new(example("limit_process"))
        .arg("4194000")
        .env("RDT_SYSROOT", m2.root())
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(!m2.path("sys/fs/resctrl/COS1").exists());
    assert_eq!(line("MB"), "MB:0=50;1=50", "{schemata}");
    assert!(tasks.lines().any(|t| t == pid), "{tasks}");
}

#[test]
fn monitor_prometheus_prints_valid_exposition_text_and_leaves_no_group() {
    let m = TestMount::builtin(SKX_RDT);
    let mut child = sleeper();
    let pid = child.id().to_string();
    let (out, _) = run(&m, "monitor_prometheus", &["2", "0-3", &pid]);
    let _ = child.kill();
    let _ = child.wait();
    // Every line is a TYPE line or a sample `name{label="value"} integer`.
    let mut samples = Vec::new();
    for line in out.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').expect("TYPE name kind");
            assert!(kind == "gauge" || kind == "counter", "{line}");
            assert!(name.starts_with("rdt_"), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let (name, labels) = series.split_once('{').expect("labels");
        let labels = labels.strip_suffix('}').expect("closing brace");
        let (key, quoted) = labels.split_once('=').expect("label");
        assert!(key == "cpus" || key == "pids", "{line}");
        assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{line}");
        samples.push((
            name.to_owned(),
            key.to_owned(),
            value.parse::<u64>().expect("value"),
        ));
    }
    let series = |name: &str, key: &str| -> Vec<u64> {
        samples
            .iter()
            .filter(|(n, k, _)| n == name && k == key)
            .map(|s| s.2)
            .collect()
    };
    let occupancy = series("rdt_llc_occupancy_bytes", "cpus");
    assert_eq!(occupancy.len(), 2, "one per poll:\n{out}");
    assert!(occupancy.iter().all(|&b| b > 0), "{out}");
    let total = series("rdt_mbm_total_bytes_total", "cpus");
    assert_eq!(total.len(), 2, "{out}");
    assert!(total[1] >= total[0], "a counter does not go back: {out}");
    assert_eq!(
        series("rdt_mbm_local_bytes_total", "pids").len(),
        2,
        "{out}"
    );
    let left: Vec<_> = std::fs::read_dir(m.path("sys/fs/resctrl/mon_groups"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("pqos-"))
        .collect();
    assert!(left.is_empty(), "the guard removed its groups: {left:?}");
}

#[cfg(feature = "oci")]
#[test]
fn oci_runtime_places_the_container_and_deletes_its_group_when_it_exits() {
    let m = TestMount::builtin(SKX_RDT);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"ociVersion": "1.2.0", "root": {"path": "rootfs"},
            "linux": {"intelRdt": {"l3CacheSchema": "L3:0=3f;1=3f", "memBwSchema": "MB:0=40;1=40",
                                   "enableMonitoring": true}}}"#,
    )
    .expect("config.json");
    let mut child = Command::new("sleep").arg("1").spawn().expect("sleep");
    let pid = child.id().to_string();
    let runtime = Command::new(example("oci_runtime"))
        .args([config.to_str().expect("utf-8"), "ctr-42", &pid])
        .env("RDT_SYSROOT", m.root())
        .env_remove("RDT_IFACE")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run the example");
    // while the container runs, it is in its own group
    let group = m.path("sys/fs/resctrl/ctr-42");
    let start = std::time::Instant::now();
    // the process joins last, after the group's schemata
    while !std::fs::read_to_string(group.join("tasks")).is_ok_and(|t| t.lines().any(|l| l == pid)) {
        assert!(
            start.elapsed().as_secs() < 10,
            "the container never joined its group"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let schemata = std::fs::read_to_string(group.join("schemata")).expect("schemata");
    assert!(
        schemata.contains("L3:0=3f;1=3f") && schemata.contains("MB:0=40;1=40"),
        "{schemata}"
    );
    let _ = child.wait();
    let out = runtime.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.ends_with("container ctr-42: group Group on delete\n"),
        "{text}"
    );
    // runc's statistics, its JSON names, the container's group's own counters
    let stats = text
        .lines()
        .find_map(|l| l.strip_prefix("container ctr-42: intel_rdt "))
        .expect("a statistics line");
    let stats: serde_json::Value = serde_json::from_str(stats).expect("JSON");
    assert_eq!(stats["mem_bw_schema"], "MB:0=40;1=40", "{stats}");
    assert_eq!(
        stats["mbm_stats"].as_array().map(Vec::len),
        Some(2),
        "{stats}"
    );
    assert!(stats["cmt_stats"][0]["llc_occupancy"].is_u64(), "{stats}");
    assert!(!group.exists(), "the container's own group went with it");
}

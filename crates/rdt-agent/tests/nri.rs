//! `rdt-agent nri` against the runtime side of NRI itself: the Go package
//! `github.com/containerd/nri/pkg/adaptation` (v0.12.5), which containerd and CRI-O embed,
//! driven by `tests/nri-driver` (Go, built here into the target directory with its own
//! build cache). The agent makes goresctrl's classes on a FUSE-mounted simulated
//! skylake-sp (needs root and /dev/fuse) and registers on the driver's socket. The driver
//! checks every answer (nri-driver/main.go): the processes of 20 containers that ran before
//! the plugin are moved into their classes' groups by the plugin itself after the first
//! synchronization, which answers no update (containerd would drop it); containers of each QoS class with
//! each annotation form are created in their class (`linux.intelRdt.closID` the class's
//! group, no schemata); the root class gets no `linux.intelRdt`; an unknown class is
//! refused naming the annotation and the classes; after a SIGKILL the next agent's
//! synchronization moves nothing; a SIGHUP with one more class in the file makes it (the
//! others untouched) and the plugin places containers in it; SIGKILLs during creations leave no container outside its
//! class after the next synchronization; the agent stops on SIGTERM. After each step the
//! driver finds the resctrl tree as the first start made it (no group added, removed or
//! rewritten); this test checks the tree at the end (the classes' groups and another
//! tool's, nothing else) and that each start after the first wrote nothing.
//!
//! Go 1.24 or newer must be on PATH, in `$GO`, or at /usr/local/go/bin/go (scripts/test
//! says how to get it); the driver's modules come from the Go module proxy on the first
//! build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

mod support;

const AGENT: &str = env!("CARGO_BIN_EXE_rdt-agent");

/// goresctrl's configuration of the node: three classes in one partition.
const CLASSES: &str = "partitions:\n  default:\n    l3Allocation: 100%\n    mbAllocation: [100%]\n    classes:\n      gold:\n        l3Allocation: 100%\n      silver:\n        l3Allocation: 60%\n        mbAllocation: [60%]\n      bronze:\n        l3Allocation: 20%\n        mbAllocation: [20%]\n";

/// The configuration the agent reloads on SIGHUP: one more class.
const RELOADED: &str = "      platinum:\n        l3Allocation: 40%\n        mbAllocation: [80%]\n";

/// SIGKILLs of the agent during creations (the acceptance: 20).
const KILL_TRIALS: u32 = 20;

fn go() -> PathBuf {
    let candidates = std::env::var_os("GO")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("go"))
                .collect::<Vec<_>>()
        }))
        .chain([PathBuf::from("/usr/local/go/bin/go")]);
    for go in candidates {
        if go.is_file() {
            return go;
        }
    }
    panic!(
        "Go is missing: the NRI test builds its driver with Go 1.24 or newer \
         (GO=/path/to/go, or on PATH; scripts/test installs golang-go)"
    );
}

/// Builds the driver into the target directory (Go's build cache there too).
fn build_driver() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = tmp.join("nri-driver");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nri-driver");
    let t0 = Instant::now();
    let mut build = Command::new(go());
    build
        .args(["build", "-buildvcs=false", "-tags", "nri_no_wasm", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("GOCACHE", tmp.join("go-build-cache"))
        .env("GOFLAGS", "-mod=readonly");
    // Go keeps its modules under $GOPATH (default ~/go): one that exists without HOME
    if std::env::var_os("GOPATH").is_none() && std::env::var_os("HOME").is_none() {
        build.env("GOPATH", tmp.join("gopath"));
    }
    let status = build.status().expect("running go build");
    assert!(status.success(), "go build of tests/nri-driver failed");
    eprintln!("nri-driver built in {:.1} s", t0.elapsed().as_secs_f64());
    out
}

/// The groups at the root of the resctrl tree (not `info`, `mon_groups`, `mon_data`).
fn groups(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("sys/fs/resctrl"))
        .expect("resctrl")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("schemata").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every start of the agent made the classes and only the first one wrote; the one reload
/// made class platinum.
fn agent_starts(stderr: &str) {
    // every start made the classes; only the first one wrote
    let starts: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rdt-agent nri: classes "))
        .collect();
    assert_eq!(starts.len(), 2 + KILL_TRIALS as usize, "{stderr}");
    assert!(
        starts[0].contains("bronze=cri-bronze gold=cri-gold silver=cri-silver")
            && !starts[0].contains("(0 write(s))"),
        "{}",
        starts[0]
    );
    for s in &starts[1..] {
        assert!(s.ends_with("(0 write(s))"), "a restart wrote: {s}");
    }
    let reload: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rdt-agent nri: INFO: reloaded: "))
        .collect();
    assert!(
        reload.len() == 1 && reload[0].contains("platinum=cri-platinum"),
        "{reload:?}"
    );
}

#[test]
fn the_nri_runtime_side_drives_the_agent_through_creation_sync_restart_and_kills() {
    let driver = build_driver();
    let m = support::mount_with_foreign_group();
    let root = m.root();
    // another tool's group, which the agent must leave alone
    let kube = support::foreign_group(&m);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("classes.yaml");
    std::fs::write(&config, CLASSES).expect("config");
    let reloaded = dir.path().join("reloaded.yaml");
    std::fs::write(&reloaded, format!("{CLASSES}{RELOADED}")).expect("config");

    let t0 = Instant::now();
    let out = Command::new(&driver)
        .args([
            "-kill-trials",
            &KILL_TRIALS.to_string(),
            "-measure",
            "500",
            "-resctrl",
        ])
        .arg(root.join("sys/fs/resctrl"))
        .arg("-reload-from")
        .arg(&reloaded)
        .arg("-reload-to")
        .arg(&config)
        .arg("--")
        .arg(AGENT)
        .arg("nri")
        .arg("--config")
        .arg(&config)
        .arg("--sysroot")
        .arg(root)
        // the driver's containers are processes of this test's cgroup: moved one by one
        .arg("--cgroup-root")
        .arg(dir.path().join("no-cgroup"))
        .args([
            "--group-prefix",
            "cri-",
            "--qos-class",
            "guaranteed=gold",
            "--qos-class",
            "burstable=silver",
            "--qos-class",
            "besteffort=bronze",
        ])
        .output()
        .expect("running nri-driver");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "nri-driver failed:\n{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the driver's summary");
    eprintln!("driver run {:.1} s: {summary}", t0.elapsed().as_secs_f64());
    // no update (containerd drops them): the plugin moved the tasks of the 20 itself
    assert_eq!(summary["first_sync_updates"], 0);
    assert_eq!(summary["first_sync_placed"], 20);
    assert_eq!(summary["created"], 12);
    assert_eq!(summary["restart_updates"], 0);
    assert_eq!(summary["kill_trials"], KILL_TRIALS);
    assert_eq!(summary["measured"], 500);
    // the tree as the classes made it after every step: creations, restart, each kill,
    // the measured creations, the removals
    assert_eq!(summary["tree_checks"], 4 + KILL_TRIALS);
    assert_eq!(summary["reloaded"], true);

    agent_starts(&stderr);
    // the plugin logs what it did: the 20 containers that ran before it, moved once each
    let moved = stderr
        .lines()
        .filter(|l| l.contains("process(es) moved to group cri-") && !l.contains("re-check"))
        .count();
    assert!(moved >= 20, "{moved} repairs logged:\n{stderr}");
    // and never an update it did not make
    assert!(!stderr.contains("moved to class"), "{stderr}");
    // the classes' groups and the other tool's, nothing leaked
    assert_eq!(
        groups(root),
        [
            "cri-bronze",
            "cri-gold",
            "cri-platinum",
            "cri-silver",
            "kube"
        ]
    );
    assert_eq!(support::foreign_group(&m), kube, "another tool's group");
    let bronze =
        std::fs::read_to_string(root.join("sys/fs/resctrl/cri-bronze/schemata")).expect("read");
    assert!(bronze.contains("MB:0=20;1=20"), "{bronze}");
}

/// Pods in the per-pod monitor groups scenario (nri-driver/monitor.go);
/// `RDT_TEST_MONITORED_PODS` sets another number (a measurement: the driver's summary
/// gives the time from a pod's last container start to its group holding its tasks).
fn monitored_pods() -> usize {
    std::env::var("RDT_TEST_MONITORED_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n >= 4)
        .unwrap_or(12)
}

/// `--monitoring`: each pod's started containers in `<class group>/mon_groups/<pod uid>`,
/// recorded with the pod's namespace, name, labels and containers in the run directory's
/// `nri-pods.json`; another tool's group of a pod's name left alone; a pod's group removed
/// with its last container, with StopPodSandbox/RemovePodSandbox, and (a pod gone while
/// the agent was killed) at the next agent's synchronization (nri-driver/monitor.go
/// checks each step).
#[test]
fn with_monitoring_each_pod_has_a_monitor_group_with_its_tasks_gone_with_the_pod() {
    let driver = build_driver();
    let m = support::mount_with_foreign_group();
    let root = m.root();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("classes.yaml");
    std::fs::write(&config, CLASSES).expect("config");
    let run = rdt_pqos::runfile::sysroot_run_dir(root);
    let pods = monitored_pods();
    let out = Command::new(&driver)
        .args(["-monitor-pods", &pods.to_string(), "-resctrl"])
        .arg(root.join("sys/fs/resctrl"))
        .arg("-run")
        .arg(&run)
        .arg("--")
        .arg(AGENT)
        .arg("nri")
        .arg("--config")
        .arg(&config)
        .arg("--sysroot")
        .arg(root)
        .arg("--cgroup-root")
        .arg(dir.path().join("no-cgroup"))
        .args([
            "--group-prefix",
            "cri-",
            "--qos-class",
            "guaranteed=gold",
            "--qos-class",
            "burstable=silver",
            "--qos-class",
            "besteffort=bronze",
            "--monitoring",
        ])
        .output()
        .expect("running nri-driver");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "nri-driver failed:\n{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the driver's summary");
    eprintln!("{summary}");
    assert_eq!(summary["grouped"], pods);
    assert_eq!(summary["recorded"], pods);
    assert_eq!(summary["foreign_kept"], true);
    assert_eq!(summary["removed"], 3);
    assert!(
        stderr.contains("exists and is not this plugin's: left alone"),
        "{stderr}"
    );
    // the monitor groups left are the running pods' (the driver ends without removing
    // them) and the other tool's
    let mut left = Vec::new();
    for g in ["cri-gold", "cri-silver", "cri-bronze"] {
        let dir = root.join("sys/fs/resctrl").join(g).join("mon_groups");
        left.extend(
            std::fs::read_dir(dir)
                .expect("mon_groups")
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned()),
        );
    }
    assert_eq!(left.len(), pods - 3 + 1, "{left:?}");
    let _ = std::fs::remove_dir_all(&run);
}

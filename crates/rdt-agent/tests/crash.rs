//! SIGKILL at random moments of `rdt-agent`'s run, 100 times, on a FUSE-mounted simulated
//! skylake-sp (resctrl with L3 CAT and MBA; needs root and /dev/fuse): after every kill the
//! platform is in a state the policy allows, before any recovery (the best-effort group's
//! masks contiguous with at least its floor of ways, its MBA at least its floor, the
//! protected CPUs in the root group, another tool's group as it was), and the next agent
//! starts on it, rolls back what the killed one left half-written and carries on. Before
//! each run the test sets the class back to every way and no throttling, so that every run
//! has steps to take (shrink, throttle, undo the throttle) while it may be killed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rdt_sim::fs::testing::TestMount;

mod support;

const AGENT: &str = env!("CARGO_BIN_EXE_rdt-agent");
const TRIALS: u32 = 100;

/// Contended for good (IPC 1.75 is more than the pipeline's 1.71 alone): the agent shrinks
/// the thrasher's ways, throttles its MBA, undoes that (MBA does not help the pipeline in
/// this model), every 100 ms from the start.
const POLICY: &str = "interval_ms = 100\ncontended_below = 1.0\n\
    [[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\ntarget = { ipc = 1.75 }\n\
    [[best_effort]]\nname = \"thrasher\"\ncpus = \"8-10\"\nmin_ways = 2\nmin_mba_percent = 20\n";

/// A small deterministic generator (64-bit LCG, Knuth's constants): the same delays every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join("sys/fs/resctrl").join(rel)).unwrap_or_default()
}

/// Checks the policy's invariants on the files as the kill left them.
fn check(m: &TestMount, kube: &str, trial: u32) {
    let root = m.root();
    let ctx = format!("trial {trial}");
    if root.join("sys/fs/resctrl/thrasher").is_dir() {
        let schemata = read(root, "thrasher/schemata");
        for line in schemata.lines().map(str::trim) {
            if let Some(l3) = line.strip_prefix("L3:") {
                for dom in l3.split(';') {
                    let (_, mask) = dom.split_once('=').expect("domain=mask");
                    let m = u64::from_str_radix(mask, 16).expect("hex mask");
                    assert!(m.count_ones() >= 2, "{ctx}: {schemata}");
                    let low = m >> m.trailing_zeros();
                    assert_eq!(low & (low + 1), 0, "{ctx}: contiguous: {schemata}");
                }
            }
            if let Some(mb) = line.strip_prefix("MB:") {
                for dom in mb.split(';') {
                    let (_, v) = dom.split_once('=').expect("domain=value");
                    let v: u32 = v.trim().parse().expect("MB value");
                    assert!(v >= 20, "{ctx}: {schemata}");
                }
            }
        }
        let cpus: rdt_pqos::CpuSet = read(root, "thrasher/cpus_list")
            .trim()
            .parse()
            .expect("cpus_list");
        let protected: rdt_pqos::CpuSet = "2-7".parse().expect("cpus");
        assert!(
            !cpus.intersects(&protected),
            "{ctx}: a protected CPU in the thrasher's group: {cpus}"
        );
    }
    assert_eq!(
        support::foreign_group(m),
        kube,
        "{ctx}: another tool's group"
    );
}

#[test]
fn sigkill_at_random_moments_never_leaves_a_state_the_policy_forbids() {
    let m = support::mount_with_foreign_group();
    let root = m.root();
    let kube = support::foreign_group(&m);
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("p.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    // how long the agent takes to start here (opening the platform, making its class):
    // the kills come after that, within its first steps
    let t0 = std::time::Instant::now();
    let warm = Command::new(AGENT)
        .arg("--policy")
        .arg(&policy)
        .arg("--sysroot")
        .arg(root)
        .args(["--iface", "os", "--duration", "0"])
        .output()
        .expect("run");
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let start = u64::try_from(t0.elapsed().as_millis()).unwrap_or(1000);
    let mut rng = Lcg(0x5eed);
    let mut acted = 0;
    for trial in 0..TRIALS {
        // a new episode: the thrasher's class as a reset leaves it, so that every run acts
        // (a run that finds the class at its floors has nothing left to do)
        let group = root.join("sys/fs/resctrl/thrasher");
        if group.is_dir() {
            std::fs::write(group.join("schemata"), "L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
                .expect("reset the thrasher's class");
        }
        let mut child = Command::new(AGENT)
            .arg("--policy")
            .arg(&policy)
            .arg("--sysroot")
            .arg(root)
            .args(["--iface", "os"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(start + rng.below(500)));
        child.kill().expect("SIGKILL");
        let out = child.wait_with_output().expect("wait");
        acted += String::from_utf8_lossy(&out.stdout).lines().count();
        check(&m, &kube, trial);
    }
    eprintln!("{acted} actions in {TRIALS} killed runs (start {start} ms)");
    assert!(
        acted >= TRIALS as usize / 2,
        "the kills came while it acted: {acted} actions"
    );
    // the last one runs to its end: it recovers what the last kill left, and carries on
    let out = Command::new(AGENT)
        .arg("--policy")
        .arg(&policy)
        .arg("--sysroot")
        .arg(root)
        .args(["--iface", "os", "--duration", "1"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(&m, &kube, TRIALS);
}

//! `rdt-agent nri` with a real containerd (2.x, built from the Go module proxy by
//! scripts/containerd-tools), crictl, CRI pods and runc, on a FUSE-mounted simulated
//! skylake-sp, configured as shipped: deploy/containerd-nri.toml (its paths moved into a
//! temp dir) and the DaemonSet's flags (harness.rs says how the node is built). Each test
//! ends with every container's pid in its class's `tasks` of the simulated resctrl tree.
//!
//! Prerequisites (root, /dev/fuse, Go 1.24+, runc; containerd and crictl are built once
//! per version into the target directory): a missing one fails the test with a message
//! naming it; scripts/test installs or reports them before building anything.
//! The tests of this file run one at a time (each runs a containerd).
//!
//! `creation_latency` (ignored: `cargo test -p rdt-agent --test containerd -- --ignored
//! --nocapture`) measures what the plugin adds to a container's creation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

#[path = "../../../../tests/support/deploy.rs"]
mod deploy;
mod harness;
#[path = "../support/mod.rs"]
#[allow(dead_code)]
mod support;

use harness::{Ctr, Node, PodSpec};

/// How long the plugin may take to be back after the runtime or itself restarts (the
/// issue's acceptance).
const BACK_WITHIN: Duration = Duration::from_secs(5);
/// How long the plugin may take to put a container created while it was away in its class:
/// it finds such containers at its synchronization and checks them again every 10 s (a
/// container still being created then is placed at the next check).
const REPAIR_WITHIN: Duration = Duration::from_secs(25);

/// One containerd at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A node with containerd and the agent running, the agent registered.
fn running_node() -> Node {
    let mut node = Node::new();
    node.start_containerd();
    node.start_agent();
    assert!(
        node.wait_registrations(1, Duration::from_secs(20))
            .is_some(),
        "the plugin did not register within 20 s:\n{}",
        node.logs()
    );
    // the DaemonSet's readiness probe says so
    assert!(
        node.wait_probe(false, true, Duration::from_secs(3)),
        "registered, but `rdt-agent nri --check` fails:\n{}",
        node.logs()
    );
    node
}

#[test]
fn annotated_pods_on_the_shipped_configuration_get_their_class() {
    let _one = serial();
    let node = running_node();
    let mut ctrs = vec![];
    for (spec, group) in PodSpec::forms() {
        match node.cri.run_pod(&spec, group) {
            Ok(c) => ctrs.push(c),
            Err(e) => panic!("{spec:?}: {e}\n{}", node.logs()),
        }
    }
    for c in &ctrs {
        // the class reached runc in the OCI spec, and the container is in its group
        assert_eq!(
            node.spec_closid(&c.id).as_deref(),
            Some(c.group.as_str()),
            "the spec runc received for {c:?}"
        );
    }
    let wrong = node.misplaced(&ctrs);
    assert!(wrong.is_empty(), "{wrong:#?}\n{}", node.logs());
    // an annotation naming a class the node lacks: the creation fails naming it
    let unknown = PodSpec::qos("besteffort")
        .pod_annotation("rdt.resources.beta.kubernetes.io/pod", "platinum");
    let err = node
        .cri
        .run_pod(&unknown, "platinum")
        .expect_err("a class the node lacks");
    assert!(err.contains("platinum"), "{err}");
}

/// What a [`Creator`] made: the containers it started, the creations that failed, the
/// containers of each of [`PodSpec::forms`].
struct Created {
    ctrs: Vec<Ctr>,
    failed: Vec<String>,
    per_form: Vec<usize>,
}

/// Creates pods of every form, one after another, until finished (or dropped: a failed
/// test); what it started.
struct Creator {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Created>>,
}

impl Creator {
    fn start(node: &Node) -> Self {
        let cri = node.cri.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let forms = PodSpec::forms();
            let mut made = Created {
                ctrs: vec![],
                failed: vec![],
                per_form: vec![0; forms.len()],
            };
            let mut i = 0;
            while !flag.load(Ordering::Relaxed) {
                let (spec, group) = &forms[i % forms.len()];
                match cri.run_pod(spec, group) {
                    Ok(c) => {
                        made.ctrs.push(c);
                        made.per_form[i % forms.len()] += 1;
                    }
                    // the runtime is away (a form that always fails: none of it)
                    Err(e) => made.failed.push(e),
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            made
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Created {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("running");
        thread.join().expect("the creator thread")
    }
}

impl Drop for Creator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What the restart tests check after the restarts: every container in its class (those
/// created while the plugin was away included), and say what they measured.
fn check_after_restarts(node: &Node, what: &str, made: &Created, back: &[Duration]) {
    let (ctrs, failed) = (&made.ctrs, &made.failed);
    let away = ctrs
        .iter()
        .filter(|c| node.spec_closid(&c.id).is_none())
        .count();
    let wrong = node.settle(ctrs, REPAIR_WITHIN);
    let rss = node.agent_rss();
    eprintln!(
        "{what}: {} containers started ({away} while the plugin was away, {} creations \
         failed while the runtime was away); the plugin back after {:?}; agent RSS (now, peak) KiB: {rss:?}",
        ctrs.len(),
        failed.len(),
        back
    );
    assert!(wrong.is_empty(), "{what}: {wrong:#?}\n{}", node.logs());
    // every form had containers (one whose creations all failed shows here)
    for ((spec, _), n) in PodSpec::forms().iter().zip(&made.per_form) {
        assert!(
            *n >= 1,
            "{what}: no container of {spec:?} started; failures: {failed:#?}\n{}",
            node.logs()
        );
    }
}

#[test]
fn containerd_restarted_five_times_while_pods_are_created() {
    let _one = serial();
    let mut node = running_node();
    let creator = Creator::start(&node);
    let mut back = vec![];
    for i in 0..5 {
        std::thread::sleep(Duration::from_secs(3));
        node.stop_containerd();
        std::thread::sleep(Duration::from_millis(300));
        node.start_containerd();
        // from containerd answering CRI to the plugin registered with it again
        match node.wait_registrations(1, BACK_WITHIN) {
            Some(t) => back.push(t),
            None => {
                panic!(
                    "restart {}: the plugin is not back {BACK_WITHIN:?} after containerd:\n{}",
                    i + 1,
                    node.logs()
                );
            }
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    let made = creator.finish();
    check_after_restarts(&node, "containerd restarts", &made, &back);
}

#[test]
fn the_plugin_killed_five_times_while_pods_are_created() {
    let _one = serial();
    let mut node = running_node();
    let creator = Creator::start(&node);
    let mut back = vec![];
    for i in 0..5 {
        std::thread::sleep(Duration::from_secs(3));
        let before = node.registrations();
        node.agent
            .take()
            .expect("agent")
            .stop(Signal::SIGKILL, Duration::from_secs(5));
        // pods created while it is away (a DaemonSet's container restarts after a while)
        std::thread::sleep(Duration::from_secs(1));
        let t0 = Instant::now();
        node.start_agent();
        match node.wait_registrations(before + 1, BACK_WITHIN) {
            Some(_) => back.push(t0.elapsed()),
            None => {
                panic!(
                    "kill {}: the restarted plugin did not register within {BACK_WITHIN:?}:\n{}",
                    i + 1,
                    node.logs()
                );
            }
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    let made = creator.finish();
    check_after_restarts(&node, "plugin SIGKILLs", &made, &back);
    let ctrs = &made.ctrs;
    let away = ctrs
        .iter()
        .filter(|c| node.spec_closid(&c.id).is_none())
        .count();
    assert!(
        away > 0,
        "no container was created while the plugin was away: the test proves nothing"
    );
}

#[test]
fn a_container_created_while_the_plugin_was_away_and_started_after_gets_its_class() {
    let _one = serial();
    let mut node = running_node();
    let before = node.registrations();
    node.agent
        .take()
        .expect("agent")
        .stop(Signal::SIGKILL, Duration::from_secs(5));
    // created while the plugin is away (no class in its spec), started once it is back:
    // the plugin's synchronization sees it created, without a process yet
    let (spec, group) = PodSpec::forms().swap_remove(4);
    let (pod, id) = node
        .cri
        .create_pod(&spec)
        .unwrap_or_else(|e| panic!("{e}\n{}", node.logs()));
    node.start_agent();
    assert!(
        node.wait_registrations(before + 1, BACK_WITHIN).is_some(),
        "{}",
        node.logs()
    );
    let c = node
        .cri
        .start(&pod, &id, group)
        .unwrap_or_else(|e| panic!("{e}\n{}", node.logs()));
    assert_eq!(
        node.spec_closid(&c.id),
        None,
        "created while the plugin was away"
    );
    let wrong = node.settle(&[c], REPAIR_WITHIN);
    assert!(wrong.is_empty(), "{wrong:#?}\n{}", node.logs());
}

#[test]
fn the_plugin_started_before_containerd_registers_when_it_appears() {
    let _one = serial();
    let mut node = Node::new();
    node.start_agent();
    std::thread::sleep(Duration::from_secs(10));
    // waiting for the runtime: alive, not ready
    assert!(
        node.probe(true),
        "the waiting plugin is not live:\n{}",
        node.logs()
    );
    assert!(!node.probe(false), "the plugin is ready without a runtime");
    node.start_containerd();
    assert!(
        node.wait_registrations(1, BACK_WITHIN).is_some(),
        "the plugin started 10 s before containerd did not register within {BACK_WITHIN:?} of it:\n{}",
        node.logs()
    );
    assert!(
        node.wait_probe(false, true, Duration::from_secs(3)),
        "registered, but `rdt-agent nri --check` fails:\n{}",
        node.logs()
    );
    // a QoS class's (the shipped runtime configuration's annotations are the first test's)
    let (spec, group) = PodSpec::forms().swap_remove(3);
    let c = node
        .cri
        .run_pod(&spec, group)
        .unwrap_or_else(|e| panic!("{e}\n{}", node.logs()));
    let wrong = node.misplaced(&[c]);
    assert!(wrong.is_empty(), "{wrong:#?}\n{}", node.logs());
}

/// p50 and p99 of `v` (sorted here), milliseconds (nearest rank).
fn percentiles(v: &mut [Duration]) -> (f64, f64) {
    v.sort();
    let at = |percent: usize| {
        let i = ((v.len() - 1) * percent + 50) / 100;
        v[i].as_secs_f64() * 1e3
    };
    (at(50), at(99))
}

/// `crictl create` and `crictl start` of `n` containers in one pod (each removed before
/// the next), timed.
fn creations(node: &Node, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let cri = &node.cri;
    let (spec, _) = PodSpec::forms().swap_remove(5);
    let first = cri.run_pod(&spec, "bronze").expect("the pod");
    let dir = node.dir.path().join("cri");
    let ctr_file = dir.join("latency-ctr.json");
    std::fs::write(
        &ctr_file,
        serde_json::json!({"metadata": {"name": "m"}, "image": {"image": harness::IMAGE}, "log_path": "m.log", "linux": {}})
            .to_string(),
    )
    .expect("write");
    let pod_file = std::fs::read_dir(&dir)
        .expect("cri dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pod-"))
        })
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .expect("the pod's config");
    let (cf, pf) = (
        ctr_file.to_str().expect("a UTF-8 path"),
        pod_file.to_str().expect("a UTF-8 path"),
    );
    let (mut create, mut start) = (vec![], vec![]);
    for _ in 0..n {
        let t0 = Instant::now();
        let id = cri.crictl(&["create", &first.pod, cf, pf]).expect("create");
        create.push(t0.elapsed());
        let t0 = Instant::now();
        cri.crictl(&["start", &id]).expect("start");
        start.push(t0.elapsed());
        cri.crictl(&["rm", "-f", &id]).expect("rm");
    }
    (create, start)
}

#[test]
#[ignore = "a measurement (500 creations with and without the plugin, a few minutes): run with --ignored --nocapture"]
fn creation_latency() {
    let _one = serial();
    let n: usize = std::env::var("RDT_LATENCY_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut node = Node::new();
    node.start_containerd();
    let (mut c0, mut s0) = creations(&node, n);
    node.start_agent();
    assert!(
        node.wait_registrations(1, Duration::from_secs(20))
            .is_some(),
        "{}",
        node.logs()
    );
    let (mut c1, mut s1) = creations(&node, n);
    let rss = node.agent_rss();
    // reconnect: containerd restarted, from CRI answering to the plugin registered
    let mut back = vec![];
    for _ in 0..5 {
        node.stop_containerd();
        node.start_containerd();
        back.push(node.wait_registrations(1, Duration::from_secs(10)));
    }
    let (a, b) = (percentiles(&mut c0), percentiles(&mut c1));
    let (sa, sb) = (percentiles(&mut s0), percentiles(&mut s1));
    eprintln!(
        "crictl create, {n} containers: without the plugin p50 {:.1} ms p99 {:.1} ms; with it p50 {:.1} ms p99 {:.1} ms",
        a.0, a.1, b.0, b.1
    );
    eprintln!(
        "crictl start, {n} containers: without the plugin p50 {:.1} ms p99 {:.1} ms; with it p50 {:.1} ms p99 {:.1} ms",
        sa.0, sa.1, sb.0, sb.1
    );
    eprintln!("plugin back after containerd restarts: {back:?}");
    eprintln!("agent RSS (now, peak) KiB after {n} creations: {rss:?}");
}

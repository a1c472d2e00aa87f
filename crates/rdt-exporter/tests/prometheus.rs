//! End to end with a real Prometheus server: the simulated platform (skylake-sp) is
//! FUSE-mounted, a foreign group (`kubepods-besteffort`, holding the thrasher's CPUs and a
//! process of a pod) and one of ours (`COS1`, the pipeline's CPUs, 6 cache ways) are made
//! behind the exporter's back, `rdt-exporter` serves the mount, and `prometheus` (Debian's
//! package; `.ci/run` installs it) scrapes it every second. The test reads the series back
//! through Prometheus's HTTP API, checks `promtool check metrics` on a scrape, and stops the
//! exporter with SIGTERM (its own group released). Before that, rdt-agent's controller runs
//! on the same mount (the library's `Agent`, which `rdt-agent --policy` runs: its metrics
//! go to the platform's run directory, which the exporter serves), and every panel of
//! `deploy/grafana-rdt-dashboard.json` is queried through Prometheus: each must return
//! series.
//!
//! Never skipped: without `prometheus` or `promtool` the test fails saying what to install.
#![allow(clippy::tests_outside_test_module)]
#![allow(clippy::unwrap_used)]
// Prometheus gives the small integer gauges compared here (ways, CPUs, up) exactly.
#![allow(clippy::float_cmp)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdt_sim::fs::testing::TestMount;
use serde_json::Value;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

const EXPORTER: &str = env!("CARGO_BIN_EXE_rdt-exporter");

/// The controller's policy: the pipeline (CPUs 2-7) wants more cache than it can have, so
/// the best-effort class (CPUs 11-13: 8-10 are the foreign group's, which the controller
/// leaves alone) is squeezed from the first interval.
const AGENT_POLICY: &str = "interval_ms = 100\ncontended_below = 0.95\n\
    [[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\ntarget = { llc_mib = 100 }\n\
    [[best_effort]]\nname = \"batch\"\ncpus = \"11-13\"\nmin_ways = 2\nmin_mba_percent = 20\n";
const UID: &str = "7c0f6a1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b";

/// A child process killed (and reaped) when the test ends, passing or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `prometheus` or `promtool`: on PATH or in /usr/bin, or a failure saying what to install.
fn tool(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "`{name}` is not installed: this end-to-end test needs a real Prometheus server \
             (Debian: `apt-get install prometheus`, which .ci/run does)"
        )
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            .build(),
    )
}

/// Body of `GET url` with `accept`, or `None` when nothing answers yet.
fn get(url: &str, accept: &str) -> Option<String> {
    let mut r = agent().get(url).header("Accept", accept).call().ok()?;
    if r.status() != 200 {
        return None;
    }
    r.body_mut().read_to_string().ok()
}

/// The result vector of a Prometheus instant query.
fn query(port: u16, q: &str) -> Vec<Value> {
    let Ok(mut r) = agent()
        .get(format!("http://127.0.0.1:{port}/api/v1/query"))
        .query("query", q)
        .call()
    else {
        return Vec::new();
    };
    let body: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default())
        .unwrap_or(Value::Null);
    body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn value(v: &Value) -> f64 {
    v["value"][1].as_str().unwrap().parse().unwrap()
}

/// Polls `f` every 500 ms until it gives `Some`, for at most `secs` seconds.
fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// rdt-agent's controller on the platform mounted at `root`, as `rdt-agent --policy
/// --sysroot` runs it (the library's `Agent`: start, a tick per interval, stop), in a
/// thread until `stop`. (An `rdt-agent` binary is not built for this package's tests.)
fn controller(root: PathBuf, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    use rdt_pqos::config::policy::Policy;
    std::thread::spawn(move || {
        let policy = Policy::parse_toml(AGENT_POLICY, "agent-policy.toml").unwrap();
        let interval = policy.interval;
        let mut rdt = rdt_pqos::OpenOptions::new(rdt_pqos::Iface::Os)
            .sysroot(&root)
            .open()
            .unwrap();
        let proc = rdt_pqos::proc::ProcFs::host();
        let mut agent = rdt_pqos::control::Agent::start(&mut rdt, policy, &proc, false).unwrap();
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(interval);
            agent.tick(&mut rdt, start.elapsed()).unwrap();
        }
        agent.stop(&mut rdt).unwrap();
    })
}

/// Every `expr` of every panel of the Grafana dashboard (rows' panels too), with Grafana's
/// variables as a dashboard showing every node gives them.
fn dashboard_queries() -> Vec<(String, String)> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana-rdt-dashboard.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut panels: Vec<Value> = dash["panels"].as_array().unwrap().clone();
    while let Some(p) = panels.pop() {
        panels.extend(p["panels"].as_array().cloned().unwrap_or_default());
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "30s")
                .replace("$instance", ".*");
            assert!(!expr.contains('$'), "a variable left in {expr}");
            out.push((p["title"].as_str().unwrap().to_owned(), expr));
        }
    }
    out
}

fn write(root: &Path, rel: &str, text: &str) {
    std::fs::write(root.join(rel), text).unwrap_or_else(|e| panic!("writing {rel}: {e}"));
}

/// Runs the controller on the platform mounted at `root` and queries every panel of the
/// dashboard through the Prometheus at `prom_port` until it returns series (the
/// controller's families come through the exporter's scrape); per pod panels name the
/// test's pod.
fn every_panel_returns_series(prom_port: u16, root: &Path) {
    let stop = Arc::new(AtomicBool::new(false));
    let agent = controller(root.to_path_buf(), Arc::clone(&stop));
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    for family in [
        "rdt_llc_occupancy_bytes",
        "rdt_mbm_total_bytes_total",
        "rdt_cache_ways",
        "rdt_mba_limit",
        "rdt_control_actions_total",
        "rdt_control_class_ways",
        "rdt_control_class_mba_percent",
        "rdt_control_health_ratio",
    ] {
        assert!(
            queries.iter().any(|(_, q)| q.contains(family)),
            "{family} on the dashboard"
        );
    }
    for (title, q) in &queries {
        let series = wait_for(30, &format!("panel {title:?}: {q}"), || {
            assert!(
                !agent.is_finished(),
                "the controller ended (its panic is above)"
            );
            Some(query(prom_port, q)).filter(|r| !r.is_empty())
        });
        if q.contains("pod_uid") {
            assert!(
                series.iter().all(|s| s["metric"]["pod_uid"] == UID),
                "{title}: {series:?}"
            );
        }
    }
    let actions = query(prom_port, "sum(rdt_control_actions_total)");
    assert!(
        value(&actions[0]) >= 1.0,
        "the controller acted: {actions:?}"
    );
    stop.store(true, Ordering::Relaxed);
    agent.join().expect("the controller's thread");
}

#[test]
fn prometheus_scrapes_our_group_and_a_foreign_one_with_sane_values() {
    // arrange: tools first, so a missing one fails before anything starts
    let prometheus = tool("prometheus");
    let promtool = tool("promtool");
    let m = TestMount::builtin(SKX_RDT);
    let resctrl = m.path("sys/fs/resctrl");
    std::fs::create_dir(resctrl.join("kubepods-besteffort")).unwrap();
    write(&resctrl, "kubepods-besteffort/cpus_list", "8-10\n");
    std::fs::create_dir(resctrl.join("COS1")).unwrap();
    write(&resctrl, "COS1/schemata", "L3:0=3f;1=3f\n");
    write(&resctrl, "COS1/cpus_list", "2-7\n");
    // A process of a pod in the foreign group; its cgroup file in a procfs of the test's.
    let pod_task = Killed(Command::new("sleep").arg("300").spawn().unwrap());
    let pid = pod_task.0.id();
    write(&resctrl, "kubepods-besteffort/tasks", &format!("{pid}\n"));
    let tmp = tempfile::tempdir().unwrap();
    let proc = tmp.path().join("proc");
    std::fs::create_dir_all(proc.join(pid.to_string())).unwrap();
    let u = UID.replace('-', "_");
    write(
        &proc,
        &format!("{pid}/cgroup"),
        &format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice\n"),
    );
    let port = free_port();
    let exporter = Command::new(EXPORTER)
        .args(["--sysroot", m.root().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--proc-root", proc.to_str().unwrap()])
        .args(["--monitor-cores", "0-1"])
        .env_remove("RDT_SYSROOT")
        .env_remove("RDT_IFACE")
        .env_remove("RUST_BACKTRACE")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut exporter = Killed(exporter);
    let metrics_url = format!("http://127.0.0.1:{port}/metrics");
    wait_for(30, "the exporter to answer", || get(&metrics_url, "*/*"));
    // A named class `pqos --apply` makes after the exporter started: the library records its
    // group in the run directory before the mkdir, so it is ours from the rescan that finds it.
    let record = rdt_pqos::runfile::NameRecord::new(
        rdt_pqos::Paths::under(m.root()).run,
        rdt_pqos::resctrl::NAMES_FILE,
    );
    record
        .write(&[(rdt_pqos::ClassId::new(2), "pipeline".to_owned())])
        .unwrap();
    std::fs::create_dir(resctrl.join("pipeline")).unwrap();
    write(&resctrl, "pipeline/schemata", "L3:0=c0;1=c0\n");
    let own_group = std::fs::read_dir(resctrl.join("mon_groups"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&format!("pqos-{}-", exporter.0.id())))
        .expect("--monitor-cores made a pqos monitor group");
    let prom_port = free_port();
    let config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: rdt\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let server = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            tmp.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Killed(server);

    // act + assert: both groups' series reach Prometheus with sane values
    let occupancy = |group: &str| {
        let r = query(
            prom_port,
            &format!("sum(rdt_llc_occupancy_bytes{{group=\"{group}\"}})"),
        );
        r.first().map(value).filter(|v| *v > 0.0)
    };
    let ours = wait_for(90, "COS1's occupancy in Prometheus", || occupancy("COS1"));
    let foreign = wait_for(30, "the foreign group's occupancy", || {
        occupancy("kubepods-besteffort")
    });
    // The thrasher (512 MiB working set) fills far more than the pipeline's 6 ways allow it.
    assert!(foreign > ours, "thrasher {foreign} B vs pipeline {ours} B");
    let l3 =
        std::fs::read_to_string(m.path("sys/devices/system/cpu/cpu0/cache/index3/size")).unwrap();
    let l3_kib: f64 = l3.trim().trim_end_matches('K').parse().unwrap();
    assert!(
        foreign + ours <= 2.0 * l3_kib * 1024.0,
        "occupancy within the two L3 caches ({l3_kib} KiB each)"
    );
    let labels = |q: &str| {
        query(prom_port, q)
            .first()
            .map_or(Value::Null, |s| s["metric"].clone())
    };
    let cos1 = labels("rdt_cache_ways{group=\"COS1\",domain=\"0\"}");
    assert_eq!(cos1["owner"], "ours", "{cos1}");
    assert_eq!(cos1["kind"], "ctrl");
    let ways = query(prom_port, "rdt_cache_ways{group=\"COS1\",domain=\"0\"}");
    assert_eq!(value(&ways[0]), 6.0);
    let named = wait_for(30, "the named class's series", || {
        Some(labels("rdt_cache_ways{group=\"pipeline\",domain=\"0\"}")).filter(|l| !l.is_null())
    });
    assert_eq!(named["owner"], "ours", "{named}");
    record.write(&[]).unwrap();
    let kube = labels("rdt_group_tasks{group=\"kubepods-besteffort\"}");
    assert_eq!(kube["owner"], "foreign", "{kube}");
    assert_eq!(kube["pod_uid"], UID, "{kube}");
    let kube_cpus = query(prom_port, "rdt_group_cpus{group=\"kubepods-besteffort\"}");
    assert_eq!(value(&kube_cpus[0]), 3.0);
    assert!(
        !query(prom_port, "rdt_llc_occupancy_bytes{group=\"cores:0-1\"}").is_empty(),
        "the exporter's own group"
    );
    assert!(
        query(
            prom_port,
            &format!("rdt_group_cpus{{group=~\".*{own_group}\"}}")
        )
        .is_empty(),
        "its resctrl directory is not reported a second time"
    );
    // Counters: rising for the thrasher, and never reset in Prometheus's eyes.
    let traffic = |group: &str| {
        query(
            prom_port,
            &format!("sum(rdt_mbm_total_bytes_total{{group=\"{group}\"}})"),
        )
        .first()
        .map(value)
    };
    let before = wait_for(10, "the foreign group's traffic", || {
        traffic("kubepods-besteffort")
    });
    std::thread::sleep(Duration::from_secs(3));
    let after = traffic("kubepods-besteffort").unwrap();
    assert!(
        after > before,
        "the thrasher moves memory: {before} -> {after}"
    );
    let resets = query(prom_port, "max(resets(rdt_mbm_total_bytes_total[1m]))");
    assert_eq!(
        resets.first().map(value),
        Some(0.0),
        "counters never went down"
    );
    let up = query(prom_port, "up{job=\"rdt\"}");
    assert_eq!(value(&up[0]), 1.0);

    // promtool on a scrape (the text format a plain client gets) ...
    let text = get(&metrics_url, "*/*").unwrap();
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // ... and the OpenMetrics Prometheus negotiates ends with the mandatory EOF.
    let om = get(&metrics_url, "application/openmetrics-text;version=1.0.0").unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");

    // The dashboard: the controller runs on the same platform, and every panel's query
    // returns series.
    every_panel_returns_series(prom_port, m.root());

    // SIGTERM: a clean exit, its own group released.
    let sent = Command::new("kill")
        .args(["-TERM", &exporter.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = wait_for(10, "the exporter to exit", || {
        exporter.0.try_wait().unwrap()
    });
    let mut stderr = String::new();
    exporter
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("released 1 group"), "{stderr}");
    assert!(
        !resctrl.join("mon_groups").join(&own_group).exists(),
        "its monitor group is gone"
    );
}

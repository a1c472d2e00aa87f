//! The exporter as a network service, end to end on a FUSE-mounted simulated platform
//! (skylake-sp): hostile and hurried clients (thousands of idle connections, slowloris
//! heads, a burst of scrapes), signals, a resctrl mount that goes away under it, and more
//! groups than its descriptors. Each exporter runs under `ulimit -n` (a shell wrapper sets
//! both limits, as a default host does with 1024), so running out of descriptors is real.
#![allow(clippy::tests_outside_test_module)]
#![allow(clippy::unwrap_used)]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rdt_sim::fs::testing::TestMount;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal` (prometheus.rs says why).
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

const EXPORTER: &str = env!("CARGO_BIN_EXE_rdt-exporter");

/// A running exporter, killed (and reaped) when the test ends, passing or not.
struct Exporter {
    child: Child,
    port: u16,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Exporter {
    /// `rdt-exporter --sysroot MOUNT --listen 127.0.0.1:PORT ARGS` under `ulimit -n
    /// nofile` (soft and hard), answering `/metrics` before it returns.
    fn start(m: &TestMount, nofile: u32, args: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(EXPORTER)
            .args(["--sysroot", m.root().to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env_remove("RDT_SYSROOT")
            .env_remove("RDT_IFACE")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut e = Self { child, port };
        let end = Instant::now() + Duration::from_secs(30);
        while e.get("/metrics").is_err() {
            if let Some(status) = e.child.try_wait().unwrap() {
                panic!("the exporter exited at start: {status}: {}", e.stderr());
            }
            assert!(Instant::now() < end, "the exporter did not answer in 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        e
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The body of a 200 answer to `GET path`, else the status or error.
    fn get(&self, path: &str) -> Result<String, String> {
        get(&self.url(path), Duration::from_secs(10))
    }

    /// Waits (10 s at most) for the exit; the status and everything on stderr.
    fn wait_exit(&mut self) -> (std::process::ExitStatus, String) {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, self.stderr());
            }
            assert!(Instant::now() < end, "the exporter did not exit in 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything on stderr (kills the exporter first when it still runs).
    fn stderr(&mut self) -> String {
        if self.child.try_wait().unwrap().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut s).unwrap();
        }
        s
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// The body of a 200 answer, else the status or the error.
fn get(url: &str, timeout: Duration) -> Result<String, String> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build(),
    );
    let mut r = agent.get(url).call().map_err(|e| e.to_string())?;
    if r.status() != 200 {
        return Err(format!("status {}", r.status()));
    }
    r.body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .map_err(|e| e.to_string())
}

/// The value of the unlabelled sample `name` in a scrape's text.
fn sample(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(str::to_owned)
}

/// This test process may hold thousands of sockets: its soft descriptor limit raised to
/// the hard one.
fn many_descriptors(needed: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= needed,
        "the test needs {needed} descriptors; the hard limit is {hard}"
    );
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
}

fn mkdir(root: &Path, rel: &str) {
    std::fs::create_dir(root.join(rel)).unwrap_or_else(|e| panic!("mkdir {rel}: {e}"));
}

#[test]
fn two_thousand_idle_connections_then_a_scrape_is_served() {
    // arrange: the default 1024 descriptors
    many_descriptors(4096);
    let m = TestMount::builtin(SKX_RDT);
    let mut e = Exporter::start(&m, 1024, &[]);
    // act: 2,000 connections that never send a byte, all held open
    let mut idle = Vec::new();
    for _ in 0..2000 {
        match TcpStream::connect_timeout(
            &format!("127.0.0.1:{}", e.port).parse().unwrap(),
            Duration::from_secs(5),
        ) {
            Ok(s) => idle.push(s),
            Err(err) => panic!("connection {} refused: {err}", idle.len()),
        }
    }
    let scrape = e.get("/metrics");
    // assert
    assert!(e.alive(), "the exporter died: {}", e.stderr());
    let text = scrape.unwrap_or_else(|err| panic!("{err}: {}", e.stderr()));
    assert_eq!(sample(&text, "rdt_up").as_deref(), Some("1"), "{text}");
    drop(idle);
    assert!(e.get("/metrics").is_ok());
    let stderr = e.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn slowloris_connections_are_closed_within_the_header_timeout() {
    // arrange
    many_descriptors(1024);
    let m = TestMount::builtin(SKX_RDT);
    let mut e = Exporter::start(&m, 1024, &["--header-timeout", "2"]);
    let mut slow: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = TcpStream::connect(format!("127.0.0.1:{}", e.port)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    // act: one more header byte on each every 250 ms, for at most 8 s (4x the timeout)
    let start = Instant::now();
    let mut open = slow.len();
    while open > 0 && start.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(250));
        open = 0;
        for s in &mut slow {
            if s.write_all(b"X").is_ok() && !closed(s) {
                open += 1;
            }
        }
    }
    let took = start.elapsed();
    // assert
    assert_eq!(
        open, 0,
        "{open} of 200 slow connections still open after {took:?}"
    );
    eprintln!("200 slowloris connections closed after {took:?} (header timeout 2 s)");
    assert!(e.get("/metrics").is_ok(), "served meanwhile");
    assert!(e.alive(), "{}", e.stderr());
}

/// Whether the peer closed `s` (a read gives EOF or an error, without waiting).
fn closed(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 256];
    let r = match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    s.set_nonblocking(false).unwrap();
    r
}

#[test]
fn a_thousand_concurrent_scrapes_all_succeed() {
    // arrange: a few groups to read
    many_descriptors(4096);
    let m = TestMount::builtin(SKX_RDT);
    let r = m.path("sys/fs/resctrl");
    for n in 0..16 {
        mkdir(&r, &format!("mon_groups/m{n}"));
    }
    let e = Exporter::start(&m, 1024, &[]);
    let url = e.url("/metrics");
    let clients_n = 1000;
    let go = Arc::new(Barrier::new(clients_n));
    // act: 1,000 clients at once, each with Prometheus's default 10 s scrape timeout
    let clients: Vec<_> = (0..clients_n)
        .map(|_| {
            let (url, go) = (url.clone(), Arc::clone(&go));
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    go.wait();
                    let t = Instant::now();
                    let r = get(&url, Duration::from_secs(10));
                    (r.map(|text| text.contains("mon_groups/m15")), t.elapsed())
                })
                .unwrap()
        })
        .collect();
    let results: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    // assert
    let failed: Vec<&String> = results
        .iter()
        .filter_map(|(r, _)| r.as_ref().err())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {clients_n} failed, e.g. {:?}",
        failed.len(),
        failed[0]
    );
    assert!(
        results.iter().all(|(r, _)| r == &Ok(true)),
        "every scrape has every group"
    );
    let mut took: Vec<Duration> = results.iter().map(|(_, t)| *t).collect();
    took.sort();
    eprintln!(
        "1000 concurrent scrapes: p50 {:?}, p99 {:?}, max {:?}",
        took[clients_n / 2],
        took[clients_n * 99 / 100],
        took[clients_n - 1]
    );
}

#[test]
fn sighup_stops_the_exporter_and_releases_its_group() {
    // arrange
    let m = TestMount::builtin(SKX_RDT);
    let mut e = Exporter::start(&m, 1024, &["--monitor-cores", "0-1"]);
    let mon = m.path("sys/fs/resctrl/mon_groups");
    let prefix = format!("pqos-{}-", e.child.id());
    let own = std::fs::read_dir(&mon)
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&prefix))
        .expect("--monitor-cores made a pqos monitor group");
    // act
    let sent = Command::new("kill")
        .args(["-HUP", &e.child.id().to_string()])
        .status()
        .unwrap();
    let (status, stderr) = e.wait_exit();
    // assert
    assert!(sent.success());
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("stopped (SIGHUP); released 1 group"),
        "{stderr}"
    );
    assert!(!mon.join(&own).exists(), "{own} is still there");
}

#[test]
fn after_resctrl_is_unmounted_a_scrape_says_rdt_up_0_and_a_new_mount_is_read() {
    // arrange: a group that only the first mount has
    let m = TestMount::builtin(SKX_RDT);
    let r = m.path("sys/fs/resctrl");
    mkdir(&r, "before");
    let mut e = Exporter::start(&m, 1024, &[]);
    let first = e.get("/metrics").unwrap();
    assert_eq!(sample(&first, "rdt_up").as_deref(), Some("1"), "{first}");
    assert!(first.contains("group=\"before\""));
    let control = m.path(".sim/resctrl_mount");
    // act: umount
    std::fs::write(&control, "umount\n").unwrap();
    let down = e.get("/metrics");
    // assert: answered, up 0, no group reported
    let down = down.unwrap_or_else(|err| panic!("{err}: {}", e.stderr()));
    assert_eq!(sample(&down, "rdt_up").as_deref(), Some("0"), "{down}");
    assert!(
        !down.contains("group=\""),
        "no group of a gone mount: {down}"
    );
    // act: mounted again, another group made
    std::fs::write(&control, "mount \n").unwrap();
    mkdir(&r, "after");
    let up = e.get("/metrics").unwrap();
    // assert: the new mount's groups, at once
    assert_eq!(sample(&up, "rdt_up").as_deref(), Some("1"), "{up}");
    assert!(up.contains("group=\"after\""), "{up}");
    assert!(!up.contains("group=\"before\""), "{up}");
    // act: a remount while scraped: the next scrape is the new mount's
    std::fs::write(&control, "remount \n").unwrap();
    let again = e.get("/metrics").unwrap();
    assert!(!again.contains("group=\"after\""), "{again}");
    assert_eq!(
        sample(&again, "rdt_scrape_complete").as_deref(),
        Some("1"),
        "the old files' reads failed, and the scrape read the new mount at once: {again}"
    );
    assert!(e.alive());
}

#[test]
fn more_groups_than_descriptors_are_all_read_in_every_scrape() {
    // arrange: 120 groups of 9 files each (2 domains x 3 events, cpus_list, tasks,
    // schemata), 1,080 files, under a limit of 256 descriptors
    let m = TestMount::builtin(SKX_RDT);
    let r = m.path("sys/fs/resctrl");
    for n in 0..119 {
        mkdir(&r, &format!("mon_groups/m{n}"));
    }
    let mut e = Exporter::start(&m, 256, &["--rescan-interval", "1"]);
    for round in 0..3 {
        // act: scrapes across rescans
        let text = e.get("/metrics").unwrap();
        // assert
        for n in 0..119 {
            let series = text
                .lines()
                .filter(|l| {
                    l.starts_with("rdt_llc_occupancy_bytes{")
                        && l.contains(&format!("group=\"mon_groups/m{n}\""))
                })
                .count();
            assert_eq!(series, 2, "round {round}: m{n} in {text}");
        }
        assert_eq!(
            sample(&text, "rdt_scrape_complete").as_deref(),
            Some("1"),
            "{text}"
        );
        std::thread::sleep(Duration::from_millis(1100));
    }
    assert!(e.alive(), "{}", e.stderr());
}

/// `prlimit --pid PID --nofile=SOFT:1024`: the soft limit, under the hard one of
/// [`Exporter::start`] (raising a hard limit needs CAP_SYS_RESOURCE).
fn set_nofile(pid: u32, soft: u32) {
    let ok = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:1024")])
        .status()
        .unwrap_or_else(|e| panic!("prlimit (util-linux) is needed: {e}"));
    assert!(ok.success(), "prlimit --nofile={soft}:1024");
}

#[test]
fn out_of_descriptors_accepting_backs_off_and_the_exporter_lives_on() {
    // arrange
    many_descriptors(1024);
    let m = TestMount::builtin(SKX_RDT);
    let mut e = Exporter::start(&m, 1024, &[]);
    let pid = e.child.id();
    // act: no descriptor left (the limit under its lowest free number): every accept
    // fails with EMFILE while clients connect
    set_nofile(pid, 3);
    let waiting: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(format!("127.0.0.1:{}", e.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let alive = e.alive();
    set_nofile(pid, 1024);
    let scrape = e.get("/metrics");
    drop(waiting);
    // assert: still there, serving once descriptors are back, and it said what happened
    assert!(alive, "the exporter exited: {}", e.stderr());
    assert!(scrape.is_ok(), "{scrape:?}");
    let stderr = e.stderr();
    assert!(
        stderr.contains("accepting connections: Too many open files"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// SIGTERM while a scrape reads 1,000 groups on the FUSE-served tree (turin: 4,096 RMIDs,
/// 12 L3 domains, so 39 files per group, each read served by the simulator: many seconds for
/// all of them on a loaded machine): the exporter stops within 2 s, not when the scan ends.
/// Before the scan was cancellable it went on for 14-26 s (issue 33).
#[test]
fn sigterm_during_a_long_scan_stops_the_exporter_within_2_s() {
    use std::io::BufRead as _;
    // arrange: 1,000 monitor groups, an exporter serving them
    let m = TestMount::builtin("turin");
    let r = m.path("sys/fs/resctrl");
    for n in 0..1000 {
        mkdir(&r, &format!("mon_groups/m{n}"));
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 4096 && exec \"$0\" \"$@\"")
        .arg(EXPORTER)
        .args(["--sysroot", m.root().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_remove("RDT_SYSROOT")
        .env_remove("RDT_IFACE")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // killed and reaped if the test fails
    let mut e = Exporter { child, port };
    let child = &mut e.child;
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let start = Instant::now();
    let mut line = String::new();
    while !line.contains("serving") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the exporter exited at start"
        );
    }
    eprintln!("serving after the first scan: {:?}", start.elapsed());
    // a scrape that reads every group
    let url = format!("http://127.0.0.1:{port}/metrics");
    let scrape = std::thread::spawn(move || {
        let t = Instant::now();
        let r = get(&url, Duration::from_mins(2));
        (t.elapsed(), r.map(|b| b.len()))
    });
    std::thread::sleep(Duration::from_millis(1500));
    // act: SIGTERM mid-scrape
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let signalled = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // assert: gone within 2 s, plus 3 s of slack: this 2-core machine runs other test
    // binaries and the FUSE server of the mount in this process at the same time, and a
    // scheduler stall of a few seconds is not the exporter's; a scan that is not cancelled
    // takes 14 s or more, far beyond the slack
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if signalled.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the exporter did not stop within 30 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = signalled.elapsed();
    let (scrape_took, scraped) = scrape.join().unwrap();
    eprintln!(
        "stopped {took:?} after SIGTERM ({status}); the scrape in flight answered after \
         {scrape_took:?}: {scraped:?}"
    );
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(2 + 3), "stopped after {took:?}");
}

#[test]
fn on_the_mmio_interface_own_groups_local_traffic_is_labelled_by_memory_region() {
    // xeon-rdt13 (RDT 1.3: DDR region 0, CXL region 1); the default scenario's workloads on
    // CPUs 2-10 send 70 % of their traffic to DDR
    let m = TestMount::builtin("xeon-rdt13");
    let mut e = Exporter::start(&m, 1024, &["--iface", "mmio", "--monitor-cores", "2-10"]);
    let local = |text: &str| -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| l.starts_with("rdt_mbm_local_bytes_total{group=\"cores:2-10\""))
            .map(|l| {
                let region = l
                    .split("region=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or_else(|| panic!("no region label: {l}"))
                    .to_owned();
                let v: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
                (region, v)
            })
            .collect()
    };
    let first = local(&e.get("/metrics").unwrap());
    std::thread::sleep(Duration::from_millis(1500));
    let text = e.get("/metrics").unwrap();
    let second = local(&text);
    assert!(!second.is_empty(), "{text}");
    let grown = |region: &str| -> f64 {
        let sum = |s: &[(String, f64)]| -> f64 {
            s.iter().filter(|(r, _)| r == region).map(|(_, v)| v).sum()
        };
        sum(&second) - sum(&first)
    };
    let (ddr, cxl) = (grown("0"), grown("1"));
    assert!(ddr > 0.0, "{text}");
    let share = ddr / (ddr + cxl);
    assert!(
        (share - 0.70).abs() < 0.02,
        "DDR share {share}: {first:?} -> {second:?}"
    );
    assert!(e.alive(), "{}", e.stderr());
}

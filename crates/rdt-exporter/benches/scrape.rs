//! What a scrape costs on the FUSE-mounted simulated platform (skylake-sp, 2 L3 domains) with
//! 64 groups (the root, 7 control groups: all the CLOSIDs MBA leaves, 56 monitor groups):
//! - `ResctrlTelemetry::scrape/64_groups_2_domains`: time of one scrape (criterion);
//! - file operations per scrape, from the mount's request counts (`.sim/stats`), printed;
//! - the exporter's resident memory (VmRSS) over 1440 HTTP scrapes while the model's clock
//!   advances 60 s before each, 24 simulated hours in all, printed at the start and the end.
//!
//! Needs root and /dev/fuse, as the FUSE tests do: `cargo bench -p rdt-exporter`.
#![allow(missing_docs)]
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rdt_pqos::resctrl::{ResctrlTelemetry, TelemetryOptions};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{SimHandle, SimPlatform};

/// Scrapes counted for the operations per scrape.
const N: u64 = 100;

const EXPORTER: &str = env!("CARGO_BIN_EXE_rdt-exporter");

/// skylake-sp with the clock in the bench's hands and 64 groups.
fn mount() -> TestMount {
    let m = TestMount::new(
        SimHandle::new(SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap()),
        MountConfig {
            clock: SimClock::Manual,
            ..MountConfig::default()
        },
    );
    let r = m.path("sys/fs/resctrl");
    let mut groups = 1;
    for c in 1..=7 {
        std::fs::create_dir(r.join(format!("g{c}"))).unwrap();
        groups += 1;
        for n in 0..8 {
            std::fs::create_dir(r.join(format!("g{c}/mon_groups/m{n}"))).unwrap();
            groups += 1;
        }
    }
    std::fs::write(r.join("g1/cpus_list"), "2-7\n").unwrap();
    std::fs::write(r.join("g2/cpus_list"), "8-10\n").unwrap();
    assert_eq!(groups, 64);
    m
}

/// The mount's request counts (`.sim/stats`), by kind.
fn stats(m: &TestMount) -> Vec<(String, u64)> {
    std::fs::read_to_string(m.path(".sim/stats"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Operations per scrape and memory over 24 simulated hours, printed.
fn measure(m: &TestMount) {
    let mut t = ResctrlTelemetry::open(TelemetryOptions::new(m.path("sys/fs/resctrl"))).unwrap();
    t.scrape().unwrap();
    std::fs::write(m.path(".sim/stats"), "reset\n").unwrap();
    let start = Instant::now();
    for _ in 0..N {
        black_box(t.scrape().unwrap());
    }
    let per = start.elapsed() / u32::try_from(N).unwrap();
    let ops: Vec<String> = stats(m)
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {}.{:02}", v / N, v % N * 100 / N))
        .collect();
    println!(
        "scrape of 64 groups x 2 domains: {per:?}; per scrape: {}",
        ops.join(", ")
    );
    assert_eq!(t.stats().scans, 1, "no rescan without a change");

    // The exporter process, scraped over HTTP while the model's clock runs 24 hours.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(EXPORTER)
        .args(["--sysroot", m.root().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_remove("RDT_SYSROOT")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let get = || {
        ureq::get(&url)
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while get().is_none() {
        assert!(Instant::now() < deadline, "the exporter did not answer");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut first = 0;
    let mut bytes = 0;
    for i in 0..1440 {
        m.platform().advance(Duration::from_mins(1));
        bytes = get().unwrap().len();
        if i == 99 {
            first = rss_kib(child.id());
        }
    }
    let last = rss_kib(child.id());
    println!(
        "exporter VmRSS after 100 scrapes: {first} KiB; after 1440 scrapes (24 simulated hours): \
         {last} KiB; /metrics is {bytes} bytes"
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn bench(c: &mut Criterion) {
    let m = mount();
    measure(&m);
    let mut t = ResctrlTelemetry::open(TelemetryOptions::new(m.path("sys/fs/resctrl"))).unwrap();
    let mut group = c.benchmark_group("ResctrlTelemetry::scrape");
    group.noise_threshold(0.05);
    group.bench_function("64_groups_2_domains", |b| {
        b.iter(|| black_box(t.scrape().unwrap().len()));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

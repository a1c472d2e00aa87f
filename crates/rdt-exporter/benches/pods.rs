//! What the NRI plugin's pod labels cost a scrape: the exporter on the FUSE-mounted
//! simulated skylake-sp with one class group and 100 pods' monitor groups
//! (`gold/mon_groups/<uid>`), scraped over HTTP without the plugin's pod record, then with
//! it (100 pods of 2 containers, 3 labels each, in the run directory), the mean of 50
//! scrapes each printed, and the labels checked to be there.
//!
//! Needs root and /dev/fuse, as the FUSE tests do: `cargo bench -p rdt-exporter --bench pods`.
#![allow(missing_docs)]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdt_pqos::pods::{ContainerRecord, PodRecord, PodsRecord, VERSION, mon_group_path};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{SimHandle, SimPlatform};

const EXPORTER: &str = env!("CARGO_BIN_EXE_rdt-exporter");
const PODS: usize = 100;
const SCRAPES: u32 = 50;

fn main() {
    let m = TestMount::new(
        SimHandle::new(SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap()),
        MountConfig {
            clock: SimClock::Manual,
            ..MountConfig::default()
        },
    );
    let r = m.path("sys/fs/resctrl");
    std::fs::create_dir(r.join("gold")).unwrap();
    let uids: Vec<String> = (0..PODS)
        .map(|i| format!("{i:08x}-0000-4000-8000-000000000000"))
        .collect();
    for uid in &uids {
        std::fs::create_dir(r.join(mon_group_path(Some("gold"), uid))).unwrap();
    }
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
    let timed = |what: &str| -> String {
        let mut text = String::new();
        let start = Instant::now();
        for _ in 0..SCRAPES {
            m.platform().advance(Duration::from_secs(1));
            text = get().unwrap();
        }
        let per = start.elapsed() / SCRAPES;
        println!(
            "{what}: {per:?} per scrape ({} groups, {} bytes)",
            PODS + 2,
            text.len()
        );
        text
    };
    let plain = timed("100 pod monitor groups, no pod record");
    assert!(!plain.contains("namespace=\""));
    let pods = record(&uids);
    let run = rdt_pqos::runfile::sysroot_run_dir(m.root());
    pods.write(&run).unwrap();
    let size = std::fs::metadata(run.join(rdt_pqos::pods::PODS_FILE))
        .unwrap()
        .len();
    println!("pod record: {PODS} pods, {size} bytes");
    let labelled = timed("100 pod monitor groups, 100 pods recorded");
    assert!(
        labelled.contains("namespace=\"default\",pod=\"web-0\",container=\"app,sidecar\""),
        "{labelled}"
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(run.join(rdt_pqos::pods::PODS_FILE));
}

/// The plugin's record of `uids`' pods: 2 containers, 3 labels and a monitor group each.
fn record(uids: &[String]) -> PodsRecord {
    let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "front"), ("team", "a")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let pods = uids
        .iter()
        .enumerate()
        .map(|(i, uid)| {
            let mut p = PodRecord::capped(
                uid,
                "default",
                &format!("web-{i}"),
                Some("Guaranteed"),
                &labels,
            );
            p.containers = ["app", "sidecar"]
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    ContainerRecord::capped(&format!("{i}-{n}"), c, "gold", Some("gold"), 0, "")
                })
                .collect();
            p.mon_groups = vec![mon_group_path(Some("gold"), uid)];
            p
        })
        .collect();
    PodsRecord {
        version: VERSION,
        pods,
    }
}

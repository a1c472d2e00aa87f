//! `rdt_pqos::oci`: runtime-spec `linux.intelRdt` fragments applied on the mounted
//! skylake-sp (2 L3 domains, 11-bit CBM, MBA), checked in the resctrl files.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use oci_spec::runtime::LinuxIntelRdt;
use rdt_pqos::oci::{self, OciError, Removed};
use rdt_pqos::{Iface, Rdt, TaskId};
use rdt_sim::fs::testing::TestMount;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

fn spec(json: &str) -> LinuxIntelRdt {
    serde_json::from_str(json).expect("a runtime-spec fragment")
}

struct Sleeper(Child);

impl Sleeper {
    fn new() -> Self {
        Self(Command::new("sleep").arg("30").spawn().expect("sleep"))
    }
    fn task(&self) -> TaskId {
        TaskId::new(self.0.id())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn open(m: &TestMount) -> Rdt {
    crate::mounted(Iface::Os, m.root()).open().expect("open")
}

fn resctrl(m: &TestMount) -> PathBuf {
    m.path("sys/fs/resctrl")
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn the_spec_example_makes_its_group_with_both_schemas_and_the_process() {
    // arrange: the runtime-spec's own example
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = open(&m);
    let ctr = Sleeper::new();
    let s = spec(
        r#"{"closID": "guaranteed_group", "l3CacheSchema": "L3:0=7f0;1=1f", "memBwSchema": "MB:0=20;1=70"}"#,
    );
    // act
    let placed = oci::apply(&mut rdt, &s, "ctr-1", ctr.task()).expect("apply");
    // assert
    assert!(placed.created);
    let root = resctrl(&m);
    let schemata = read(&root, "guaranteed_group/schemata");
    assert!(schemata.contains("L3:0=7f0;1=1f"), "{schemata}");
    assert!(schemata.contains("MB:0=20;1=70"), "{schemata}");
    assert_eq!(
        read(&root, "guaranteed_group/tasks"),
        format!("{}\n", ctr.task())
    );
}

#[test]
fn without_closid_the_group_is_the_container_id_and_goes_with_it() {
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = open(&m);
    let root = resctrl(&m);
    let s = spec(r#"{"schemata": ["L3:0=3;1=3"]}"#);
    let placed = {
        let ctr = Sleeper::new();
        let placed = oci::apply(&mut rdt, &s, "abc123", ctr.task()).expect("apply");
        assert_eq!(placed.group, "abc123");
        assert!(read(&root, "abc123/schemata").contains("L3:0=3;1=3"));
        placed
        // the container exits here
    };
    assert_eq!(
        oci::remove(&mut rdt, &placed).expect("remove"),
        Removed::Group
    );
    assert!(!root.join("abc123").exists());
}

#[test]
fn a_shared_closid_is_reused_with_the_same_schemata_and_kept_while_in_use() {
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = open(&m);
    let root = resctrl(&m);
    let s = spec(r#"{"closID": "shared", "l3CacheSchema": "L3:0=ff;1=ff"}"#);
    let (a, b) = (Sleeper::new(), Sleeper::new());
    let first = oci::apply(&mut rdt, &s, "a", a.task()).expect("first");
    // a second container, a second process (another runtime invocation)
    let mut other = open(&m);
    let second = oci::apply(&mut other, &s, "b", b.task()).expect("second");
    assert!(first.created && !second.created);
    let tasks = read(&root, "shared/tasks");
    assert_eq!(tasks.lines().count(), 2, "{tasks}");
    // the first container goes; the group stays for the second
    drop(a);
    assert_eq!(
        oci::remove(&mut rdt, &first).expect("remove"),
        Removed::Kept
    );
    assert!(root.join("shared").exists());
    drop(b);
    assert_eq!(
        oci::remove(&mut rdt, &first).expect("remove"),
        Removed::Group
    );
}

#[test]
fn an_existing_group_with_other_schemata_is_refused_and_nothing_changes() {
    let m = TestMount::builtin(SKX_RDT);
    let root = resctrl(&m);
    std::fs::create_dir(root.join("guaranteed_group")).expect("pre-configured group");
    std::fs::write(root.join("guaranteed_group/schemata"), "L3:0=7f0;1=7f0\n").expect("schemata");
    let before = read(&root, "guaranteed_group/schemata");
    let mut rdt = open(&m);
    let ctr = Sleeper::new();
    let s = spec(r#"{"closID": "guaranteed_group", "l3CacheSchema": "L3:0=7f0;1=1f"}"#);
    let e = oci::apply(&mut rdt, &s, "ctr", ctr.task()).expect_err("mismatch");
    assert!(
        matches!(&e, OciError::Mismatch { schema, domain: 1, want, have, .. }
            if schema == "L3" && want == "1f" && have == "7f0"),
        "{e:?}"
    );
    assert!(e.to_string().contains("guaranteed_group"), "{e}");
    assert_eq!(read(&root, "guaranteed_group/schemata"), before);
    assert_eq!(read(&root, "guaranteed_group/tasks"), "");
    // the same values: joined, and the pre-configured group is never removed
    let same = spec(r#"{"closID": "guaranteed_group", "l3CacheSchema": "L3:0=7f0;1=7f0"}"#);
    let placed = oci::apply(&mut rdt, &same, "ctr", ctr.task()).expect("same schemata");
    assert!(!placed.created);
    assert_eq!(
        oci::remove(&mut rdt, &placed).expect("remove"),
        Removed::Kept
    );
}

#[test]
fn smba_lines_set_the_groups_smba_limits_on_turin_and_are_refused_without_smba() {
    // arrange: turin-dump's L3 domains are 0, 2, ..., 14; SMBA in 1/8 GB/s units up to 4096
    let m = TestMount::builtin("turin-dump");
    let mut rdt = open(&m);
    let ctr = Sleeper::new();
    let s = spec(r#"{"closID": "slow", "schemata": ["L3:0=ff", "SMBA:0=16;2=8"]}"#);
    // act
    let placed = oci::apply(&mut rdt, &s, "ctr-s", ctr.task()).expect("apply");
    // assert: the SMBA line as asked, MB untouched
    assert!(placed.created);
    let schemata = read(&resctrl(&m), "slow/schemata");
    assert!(schemata.contains("SMBA:0=16;2=8;4=4096;"), "{schemata}");
    assert!(schemata.contains("MB:0=4096;2=4096;"), "{schemata}");
    // another container asking for other SMBA values of the same group is refused
    let other = spec(r#"{"closID": "slow", "schemata": ["L3:0=ff", "SMBA:0=32"]}"#);
    let e = oci::apply(&mut rdt, &other, "ctr-t", ctr.task()).expect_err("mismatch");
    assert!(
        matches!(&e, OciError::Mismatch { schema, domain: 0, want, .. } if schema == "SMBA" && want == "32"),
        "{e:?}"
    );
    // skylake-sp has no SMBA
    let sky = TestMount::builtin("skylake-sp");
    let mut rdt = open(&sky);
    let s = spec(r#"{"schemata": ["SMBA:0=16"]}"#);
    let e = oci::apply(&mut rdt, &s, "ctr-u", ctr.task()).expect_err("no SMBA");
    assert!(e.to_string().contains("this platform has no SMBA"), "{e}");
}

#[test]
fn closid_alone_joins_a_preconfigured_group_or_is_an_error() {
    let m = TestMount::builtin(SKX_RDT);
    let root = resctrl(&m);
    let mut rdt = open(&m);
    let ctr = Sleeper::new();
    let e = oci::apply(&mut rdt, &spec(r#"{"closID": "gold"}"#), "c", ctr.task())
        .expect_err("no such group");
    assert!(
        matches!(&e, OciError::NoSuchGroup(g) if g == "gold"),
        "{e:?}"
    );
    assert!(!root.join("gold").exists(), "nothing made");
    std::fs::create_dir(root.join("gold")).expect("pre-configured");
    oci::apply(&mut rdt, &spec(r#"{"closID": "gold"}"#), "c", ctr.task()).expect("join");
    assert_eq!(read(&root, "gold/tasks"), format!("{}\n", ctr.task()));
}

#[test]
fn mb_lines_of_l3cacheschema_give_way_to_membwschema_and_bad_fields_are_named() {
    let m = TestMount::builtin(SKX_RDT);
    let root = resctrl(&m);
    let mut rdt = open(&m);
    let ctr = Sleeper::new();
    let s = spec(
        r#"{"closID": "g", "l3CacheSchema": "L3:0=f;1=f\nMB:0=10;1=10", "memBwSchema": "MB:0=50;1=60"}"#,
    );
    oci::apply(&mut rdt, &s, "c", ctr.task()).expect("apply");
    let schemata = read(&root, "g/schemata");
    assert!(schemata.contains("MB:0=50;1=60"), "{schemata}");
    for (json, says) in [
        (
            r#"{"closID": "h", "memBwSchema": "L3:0=f"}"#,
            "must be one line starting with `MB:`",
        ),
        (r#"{"closID": "h", "l3CacheSchema": "L3:0=xyz"}"#, "xyz"),
        (
            r#"{"closID": "h", "l3CacheSchema": "L9:0=f"}"#,
            "unknown resource `L9`",
        ),
        (r#"{"closID": "h", "l3CacheSchema": "L3:0=0"}"#, "L3:0=0"),
        (
            r#"{"closID": "h", "l3CacheSchema": "L3:0=fffff"}"#,
            "wider than the 11-bit",
        ),
    ] {
        let e = oci::apply(&mut rdt, &spec(json), "c", ctr.task()).expect_err(json);
        assert!(e.to_string().contains(says), "{json}: {e}");
        assert!(!root.join("h").exists(), "{json}: nothing made");
    }
}

/// The `mon_data` counter `event` of `group` in L3 domain `d`, as the file reads.
fn counter(root: &Path, group: &str, d: u32, event: &str) -> u64 {
    let rel = if group.is_empty() {
        format!("mon_data/mon_L3_{d:02}/{event}")
    } else {
        format!("{group}/mon_data/mon_L3_{d:02}/{event}")
    };
    read(root, &rel).trim().parse().expect("a count")
}

#[test]
fn monitoring_without_closid_makes_a_monitor_group_in_the_containers_group_as_runc() {
    // arrange
    let m = TestMount::builtin(SKX_RDT);
    let root = resctrl(&m);
    let mut rdt = open(&m);
    let ctr = Sleeper::new();
    let s = spec(
        r#"{"l3CacheSchema": "L3:0=3;1=3", "memBwSchema": "MB:0=50;1=50", "enableMonitoring": true}"#,
    );
    // act
    let placed = oci::apply(&mut rdt, &s, "ctr-mon", ctr.task()).expect("apply");
    let stats = oci::stats(&mut rdt, &placed).expect("stats");
    // assert: runc's layout, the process in `<group>/mon_groups/<container id>`
    assert_eq!(
        placed.monitor.as_deref(),
        Some("ctr-mon/mon_groups/ctr-mon")
    );
    assert_eq!(
        read(&root, "ctr-mon/mon_groups/ctr-mon/tasks").trim(),
        ctr.task().to_string()
    );
    let info = stats.l3_cache_info.as_ref().expect("L3 info");
    assert_eq!(info.cbm_mask, "7ff");
    assert_eq!(
        info.num_closids,
        read(&root, "info/L3/num_closids")
            .trim()
            .parse::<u64>()
            .unwrap()
    );
    assert!(stats.l3_cache_schema.starts_with("L3:0="), "{stats:?}");
    assert_eq!(stats.mem_bw_schema, "MB:0=50;1=50");
    assert_eq!(stats.mem_bw_schema_root, "MB:0=100;1=100");
    // every line of the group's schemata, as runc's `schemata` gives them
    let file: Vec<String> = read(&root, "ctr-mon/schemata")
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(stats.schemata, file);
    assert!(
        stats.schemata.contains(&"MB:0=50;1=50".to_owned()),
        "{stats:?}"
    );
    let mb = stats.mem_bw_info.as_ref().expect("MB info");
    assert_eq!(mb.bandwidth_gran, 10);
    let mbm = stats.mbm_stats.as_ref().expect("mbm_stats");
    let cmt = stats.cmt_stats.as_ref().expect("cmt_stats");
    assert_eq!((mbm.len(), cmt.len()), (2, 2));
    for (d, node) in (0u32..).zip(mbm) {
        // MBM counts only go up: the files read after stats() hold at least what it gave.
        let total = counter(&root, "ctr-mon/mon_groups/ctr-mon", d, "mbm_total_bytes");
        let local = counter(&root, "ctr-mon/mon_groups/ctr-mon", d, "mbm_local_bytes");
        assert!(node.mbm_total_bytes <= total && node.mbm_local_bytes <= local);
    }
    // runc's JSON names; empty fields left out as Go's omitempty does
    let json = serde_json::to_value(&stats).expect("json");
    for key in [
        "l3_cache_info",
        "l3_cache_schema_root",
        "l3_cache_schema",
        "mem_bw_info",
        "mem_bw_schema_root",
        "mem_bw_schema",
        "mbm_stats",
        "cmt_stats",
        "schemata",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    assert!(
        json["mbm_stats"][0].get("mbm_total_bytes").is_some(),
        "{json}"
    );
    assert!(
        json["mbm_stats"][0].get("mbm_local_bytes").is_some(),
        "{json}"
    );
    assert!(
        json["cmt_stats"][1].get("llc_occupancy").is_some(),
        "{json}"
    );
    assert!(
        json["l3_cache_info"].get("min_cbm_bits").is_some(),
        "{json}"
    );
    drop(ctr);
    assert_eq!(
        oci::remove(&mut rdt, &placed).expect("remove"),
        Removed::Group
    );
    assert!(
        !root.join("ctr-mon").exists(),
        "the monitor group, then the group"
    );
}

#[test]
fn monitoring_with_a_shared_closid_gives_each_container_a_monitor_group_removed_with_it() {
    // arrange: two containers in one closID, both monitored
    let m = TestMount::builtin(SKX_RDT);
    let root = resctrl(&m);
    let mut rdt = open(&m);
    let (a, b) = (Sleeper::new(), Sleeper::new());
    let s =
        spec(r#"{"closID": "shared", "l3CacheSchema": "L3:0=f0;1=f0", "enableMonitoring": true}"#);
    // act
    let pa = oci::apply(&mut rdt, &s, "ctr-a", a.task()).expect("apply a");
    let pb = oci::apply(&mut rdt, &s, "ctr-b", b.task()).expect("apply b");
    // assert: one monitor group each, holding its own process, in the shared CLOSID
    assert_eq!(pa.monitor.as_deref(), Some("shared/mon_groups/ctr-a"));
    assert_eq!(pb.monitor.as_deref(), Some("shared/mon_groups/ctr-b"));
    assert_eq!(
        read(&root, "shared/mon_groups/ctr-a/tasks"),
        format!("{}\n", a.task())
    );
    assert_eq!(
        read(&root, "shared/mon_groups/ctr-b/tasks"),
        format!("{}\n", b.task())
    );
    let tasks = read(&root, "shared/tasks");
    assert!(
        tasks.contains(&a.task().to_string()) && tasks.contains(&b.task().to_string()),
        "{tasks}"
    );
    let sb = oci::stats(&mut rdt, &pb).expect("stats");
    assert_eq!(sb.cmt_stats.as_ref().map(Vec::len), Some(2));
    assert!(sb.l3_cache_schema.contains("f0"), "{sb:?}");
    // the second container goes: its monitor group goes, the group stays for the first
    drop(b);
    assert_eq!(oci::remove(&mut rdt, &pb).expect("remove b"), Removed::Kept);
    assert!(!root.join("shared/mon_groups/ctr-b").exists());
    assert!(root.join("shared/mon_groups/ctr-a").exists());
    // the first (which made the group) goes: both go
    drop(a);
    assert_eq!(
        oci::remove(&mut rdt, &pa).expect("remove a"),
        Removed::Group
    );
    assert!(!root.join("shared").exists());
}

#[test]
fn placed_round_trips_through_a_runtimes_state_file() {
    let placed = oci::Placed {
        group: "g".into(),
        created: true,
        monitor: Some("g/mon_groups/c".into()),
    };
    let json = serde_json::to_string(&placed).expect("json");
    assert_eq!(
        json,
        r#"{"group":"g","created":true,"monitor":"g/mon_groups/c"}"#
    );
    assert_eq!(
        serde_json::from_str::<oci::Placed>(&json).expect("back"),
        placed
    );
    // an empty statistics record is `{}`, as runc's omitempty fields give
    assert_eq!(
        serde_json::to_string(&oci::IntelRdtStats::default()).expect("json"),
        "{}"
    );
}

#[test]
fn a_monitor_path_from_a_state_file_never_leaves_the_resctrl_root() {
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = open(&m);
    // A directory outside resctrl, and the relative path that would reach it from the root.
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(outside.path().join("mon_groups/x")).expect("mkdir");
    let up = "../".repeat(resctrl(&m).components().count());
    let escape = format!("{up}{}/mon_groups/x", outside.path().display());
    for bad in [
        escape.as_str(),
        "g/../mon_groups/x",
        "shared",
        "a/b/mon_groups/x",
    ] {
        let placed = oci::Placed {
            group: "g".into(),
            created: false,
            monitor: Some(bad.into()),
        };
        let e = oci::remove(&mut rdt, &placed);
        assert!(
            e.as_ref()
                .is_err_and(|e| e.to_string().contains("not a monitor group"))
                || (!bad.contains("mon_groups/") && e.is_ok()),
            "{bad}: {e:?}"
        );
    }
    assert!(outside.path().join("mon_groups/x").exists());
}

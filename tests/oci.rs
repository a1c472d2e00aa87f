//! `rdt_pqos::oci`: runtime-spec `linux.intelRdt` fragments applied on the mounted
//! skylake-sp (2 L3 domains, 11-bit CBM, MBA), checked in the resctrl files.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use oci_spec::runtime::LinuxIntelRdt;
use rdt_pqos::oci::{self, OciError, Removed};
use rdt_pqos::{Iface, Paths, Rdt, TaskId};
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
    Rdt::open_at(Iface::Os, &Paths::under(m.root())).expect("open")
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
        (
            r#"{"closID": "h", "l3CacheSchema": "L3:0=f", "enableMonitoring": true}"#,
            "enableMonitoring is not supported yet",
        ),
    ] {
        let e = oci::apply(&mut rdt, &spec(json), "c", ctr.task()).expect_err(json);
        assert!(e.to_string().contains(says), "{json}: {e}");
        assert!(!root.join("h").exists(), "{json}: nothing made");
    }
}

//! `pqos --apply FILE` converges: after it, the classes the file names hold exactly the
//! CPUs (and, where a class lists tasks, the tasks) the file says, whatever was applied
//! before; what they no longer list goes back to COS0 (the resctrl root group), and the dry
//! run lists those moves. Classes the file does not name and other tools' groups are left
//! alone. Every value form (ways, masks, percentages, MBA steps the hardware rounds) is
//! applied as the hardware stores it, so a second apply of TOML, JSON or goresctrl YAML
//! writes nothing on either interface.

use crate::declarative::{changes, file};
#[cfg(feature = "test-helpers")]
use crate::os_mode::threaded_child;
#[cfg(feature = "test-helpers")]
use crate::util::Reaped;
use crate::util::mounted::{Mounted, MountedOs};
use crate::util::{Machine, SKX_RDT};
#[cfg(feature = "test-helpers")]
use std::collections::BTreeSet;

/// A class `web` with 2 L3 ways and `cpus` (no `cpus` key when empty).
fn web(cpus: &str) -> String {
    let cpus = if cpus.is_empty() {
        String::new()
    } else {
        format!("cpus = \"{cpus}\"\n")
    };
    format!("[[class]]\nname = \"web\"\nl3 = {{ ways = 2 }}\n{cpus}")
}

/// The class of service `pqos -s` shows for core `cpu` (`Core 6, L2ID .. => COS1`).
fn core_class(shown: &str, cpu: u32) -> u32 {
    let line = shown
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&format!("Core {cpu},")))
        .unwrap_or_else(|| panic!("no line for core {cpu} in\n{shown}"));
    let cos = line.split("=> COS").nth(1).expect("=> COS");
    cos.chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect("a class number")
}

/// The numbers of a resctrl `tasks` file.
#[cfg(feature = "test-helpers")]
fn tasks(text: &str) -> BTreeSet<u32> {
    text.lines()
        .map(|l| l.trim().parse().expect("a tid"))
        .collect()
}

#[test]
fn a_shrunk_class_gives_its_cpus_back_to_cos0_on_the_msr_interface() {
    let m = Mounted::new("broadwell-ep");
    let dir = tempfile::tempdir().expect("tempdir");
    let wide = file(&dir, "wide.toml", &web("4-7"));
    let narrow = file(&dir, "narrow.toml", &web("4-5"));
    let none = file(&dir, "none.toml", &web(""));
    let other = file(
        &dir,
        "other.toml",
        "[[class]]\nname = \"other\"\nl3 = { ways = 1 }\ncpus = \"10\"\n",
    );
    let path = |p: &std::path::PathBuf| p.to_str().expect("UTF-8").to_owned();
    m.pqos(&["--apply", &path(&wide)]).ok();
    m.pqos(&["--apply", &path(&other)]).ok();
    let before = m.pqos(&["-s"]).ok().stdout;
    let (web_cos, other_cos) = (core_class(&before, 6), core_class(&before, 10));
    assert!(
        web_cos != 0 && other_cos != 0 && web_cos != other_cos,
        "{before}"
    );
    // the dry run lists the moves back to COS0 and writes nothing
    changes(m.root());
    let dry = m
        .pqos(&["--apply", &path(&narrow), "--dry-run"])
        .ok()
        .stdout;
    assert_eq!(
        dry,
        format!(
            "web (COS{web_cos}): CPU 6 to COS0\nweb (COS{web_cos}): CPU 7 to COS0\n\
             2 write(s) planned; dry run: nothing written.\n"
        )
    );
    assert_eq!(changes(m.root()), 0, "a dry run writes nothing");
    m.pqos(&["--apply", &path(&narrow)]).ok();
    let shown = m.pqos(&["-s"]).ok().stdout;
    for (cpu, cos) in [(4, web_cos), (5, web_cos), (6, 0), (7, 0), (10, other_cos)] {
        assert_eq!(core_class(&shown, cpu), cos, "core {cpu}:\n{shown}");
    }
    // the same file again: nothing moves
    assert_eq!(
        m.pqos(&["--apply", &path(&narrow)]).ok().stdout,
        "Nothing to change.\n"
    );
    // a class without `cpus` has none
    m.pqos(&["--apply", &path(&none)]).ok();
    let shown = m.pqos(&["-s"]).ok().stdout;
    for (cpu, cos) in [(4, 0), (5, 0), (10, other_cos)] {
        assert_eq!(core_class(&shown, cpu), cos, "core {cpu}:\n{shown}");
    }
}

#[test]
fn a_shrunk_class_gives_its_cpus_back_to_the_root_group_on_the_os_interface() {
    let m = MountedOs::new(SKX_RDT);
    // another tool's group with CPU 20
    m.mkdir("kube");
    m.write("kube/cpus_list", "20");
    let dir = tempfile::tempdir().expect("tempdir");
    let wide = file(&dir, "wide.toml", &web("4-7"));
    let narrow = file(&dir, "narrow.toml", &web("4-5"));
    let path = |p: &std::path::PathBuf| p.to_str().expect("UTF-8").to_owned();
    m.pqos(&["--apply", &path(&wide)]).ok();
    assert_eq!(m.read("web/cpus_list"), "4-7\n");
    let dry = m
        .pqos(&["--apply", &path(&narrow), "--dry-run"])
        .ok()
        .stdout;
    assert!(
        dry.contains(": CPU 6 to COS0\n") && dry.contains(": CPU 7 to COS0\n"),
        "{dry}"
    );
    m.pqos(&["--apply", &path(&narrow)]).ok();
    assert_eq!(m.read("web/cpus_list"), "4-5\n");
    let root: rdt_pqos::CpuSet = m.read("cpus_list").trim().parse().expect("a CPU list");
    assert!(
        root.contains(rdt_pqos::LogicalCpu::new(6)) && root.contains(rdt_pqos::LogicalCpu::new(7)),
        "{root}"
    );
    assert_eq!(m.read("kube/cpus_list"), "20\n", "another tool's group");
    assert_eq!(
        m.pqos(&["--apply", &path(&narrow)]).ok().stdout,
        "Nothing to change.\n"
    );
}

/// On resctrl a group's `tasks` holds every thread of a process moved in, and whatever was
/// put there since (a child forked in the group, `pqos -I -a pid:`). A class that lists
/// tasks keeps the threads of its listed processes and gives the rest back to the root; a
/// class that lists none keeps what it holds.
#[test]
#[cfg(feature = "test-helpers")]
fn a_class_that_lists_tasks_keeps_exactly_their_processes_threads() {
    let m = MountedOs::new(SKX_RDT);
    let child = threaded_child();
    let (gone, stray, placed) = (Reaped::sleeper(), Reaped::sleeper(), Reaped::sleeper());
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = "[[class]]\nname = \"batch\"\ncpus = \"3\"\n";
    let both = file(
        &dir,
        "both.toml",
        &format!(
            "[[class]]\nname = \"web\"\ntasks = [{}, {}]\n\n{batch}",
            child.pid(),
            gone.pid()
        ),
    );
    let one = file(
        &dir,
        "one.toml",
        &format!(
            "[[class]]\nname = \"web\"\ntasks = [{}]\n\n{batch}",
            child.pid()
        ),
    );
    let path = |p: &std::path::PathBuf| p.to_str().expect("UTF-8").to_owned();
    m.pqos(&["--apply", &path(&both)]).ok();
    let threads: BTreeSet<u32> = child.threads().into_iter().collect();
    assert!(threads.len() > 1, "the child has threads: {threads:?}");
    let mut want = threads.clone();
    want.insert(gone.pid());
    assert_eq!(tasks(&m.read("web/tasks")), want);
    // put there by other means: a stray in web, a task in batch (which lists none)
    m.write("web/tasks", &stray.pid().to_string());
    m.write("batch/tasks", &placed.pid().to_string());
    let dry = m.pqos(&["--apply", &path(&one), "--dry-run"]).ok().stdout;
    for pid in [gone.pid(), stray.pid()] {
        assert!(dry.contains(&format!(": task {pid} to COS0\n")), "{dry}");
    }
    assert_eq!(dry.lines().count(), 3, "{dry}");
    m.pqos(&["--apply", &path(&one)]).ok();
    assert_eq!(
        tasks(&m.read("web/tasks")),
        threads,
        "the child's threads only"
    );
    let root = tasks(&m.read("tasks"));
    assert!(
        root.contains(&gone.pid()) && root.contains(&stray.pid()),
        "{root:?}"
    );
    assert_eq!(
        tasks(&m.read("batch/tasks")),
        BTreeSet::from([placed.pid()])
    );
    assert_eq!(
        m.pqos(&["--apply", &path(&one)]).ok().stdout,
        "Nothing to change.\n"
    );
}

/// Every value form of the native file, each as the hardware rounds it: ways, percent and
/// masks (string and integer), per-domain sizes, shared classes, L2, and MBA percentages
/// off the 10 % steps (95 and 74 round differently on the two interfaces, 15 alike).
const FORMS_TOML: &str = r#"[[class]]
name = "a"
l3 = { ways = 3 }
l2 = { percent = 25 }
mba = { percent = 95 }
cpus = "1"

[[class]]
name = "b"
l3 = { mask = "0x30", domains = { "1" = { ways = 2 } } }
mba = { percent = 74, domains = { "1" = { percent = 15 } } }
cpus = "2"

[[class]]
name = "c"
l3 = { percent = 20, shared = true }
l2 = { mask = 3 }
mba = { percent = 100 }
cpus = "3"
"#;

/// [`FORMS_TOML`] as JSON.
const FORMS_JSON: &str = r#"{"class": [
  {"name": "a", "l3": {"ways": 3}, "l2": {"percent": 25}, "mba": {"percent": 95}, "cpus": "1"},
  {"name": "b", "l3": {"mask": "0x30", "domains": {"1": {"ways": 2}}},
   "mba": {"percent": 74, "domains": {"1": {"percent": 15}}}, "cpus": "2"},
  {"name": "c", "l3": {"percent": 20, "shared": true}, "l2": {"mask": 3},
   "mba": {"percent": 100}, "cpus": "3"}
]}
"#;

/// goresctrl's forms: relative and absolute sizes, per cache id, ranges, MBA off the steps.
const FORMS_YAML: &str = r#"partitions:
  p:
    l3Allocation: "60%"
    l2Allocation: "75%"
    mbAllocation: ["95%"]
    classes:
      g:
        l3Allocation:
          all: "100%"
          1: "0x7"
        mbAllocation: ["74%"]
      b:
        l3Allocation:
          all: "50%"
          1: "1-2"
        l2Allocation: "50%"
        mbAllocation: ["15%"]
  q:
    l3Allocation: "40%"
    l2Allocation: "25%"
    mbAllocation: ["100%"]
    classes:
      DEFAULT:
        l3Allocation: "100%"
"#;

/// Applies every form twice on `m` (`root` its mount point): the first apply writes, the
/// second writes nothing at all (`.sim/stats`) and says so.
fn every_form_applies_once(m: &dyn Machine, root: &std::path::Path, forms: &[(&str, &str)]) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in forms {
        let cfg = file(&dir, name, text);
        let cfg = cfg.to_str().expect("UTF-8");
        changes(root);
        let first = m.pqos(&["--apply", cfg]).ok();
        assert!(changes(root) > 0, "{name}: the first apply writes");
        let again = m.pqos(&["--apply", cfg]).ok();
        assert_eq!(
            again.stdout, "Nothing to change.\n",
            "{name}: {}",
            again.stderr
        );
        assert_eq!(changes(root), 0, "{name}: the second apply writes nothing");
        // the rounding is told once, at check time, naming the key
        if *name == "forms.toml" {
            assert!(
                first
                    .warnings
                    .contains("mba.percent: percent 95 is applied as percent 100"),
                "{name}: {}",
                first.warnings
            );
        }
        m.pqos(&["-R"]).ok();
    }
}

/// The three files of one configuration, every value form.
const FORMS: [(&str, &str); 3] = [
    ("forms.toml", FORMS_TOML),
    ("forms.json", FORMS_JSON),
    ("forms.yaml", FORMS_YAML),
];

#[test]
fn every_value_form_applied_again_writes_nothing_on_the_msr_interface() {
    let m = Mounted::new("sapphire-rapids");
    every_form_applies_once(&m, m.root(), &FORMS);
}

#[test]
fn every_value_form_applied_again_writes_nothing_on_the_os_interface() {
    let m = MountedOs::new("sapphire-rapids");
    every_form_applies_once(&m, m.root(), &FORMS);
}

/// The other units: MiB/s under resctrl's `mba_MBps`, and AMD's 1/8 GB/s units for MBA and
/// slow memory (per domain too): stored as given, so applied again they write nothing.
#[test]
fn mbps_and_amd_units_applied_again_write_nothing() {
    let mbps = MountedOs::with_options("sapphire-rapids", "mba_MBps");
    every_form_applies_once(
        &mbps,
        mbps.root(),
        &[(
            "mbps.toml",
            "[[class]]\nname = \"a\"\nmba = { mbps = 5000 }\ncpus = \"1\"\n",
        )],
    );
    let amd = "[[class]]\nname = \"a\"\nl3 = { ways = 4 }\nmba = { units = 256, domains = { 2 = { units = 64 } } }\n\
               smba = { units = 128 }\ncpus = \"1\"\n";
    let os = MountedOs::new("turin");
    every_form_applies_once(&os, os.root(), &[("amd.toml", amd)]);
    let msr = Mounted::new("turin");
    every_form_applies_once(&msr, msr.root(), &[("amd.toml", amd)]);
}

/// One class in every L3 domain of a two-socket platform costs one `schemata` write on
/// resctrl (`.sim/stats`), its masks and its limits alike: the transaction writes a class's
/// steps of one resource as one call, and the backend writes that call's domains in one
/// file write.
#[test]
fn a_class_in_every_domain_is_one_schemata_write_on_resctrl() {
    let m = MountedOs::new(SKX_RDT);
    let root = m.root();
    m.pqos(&["-e", "llc:1=0xff;mba:1=50"]).ok();
    let schemata =
        std::fs::read_to_string(m.resctrl("COS1/schemata")).expect("COS1 made by the first -e");
    let l3 = schemata
        .lines()
        .find(|l| l.trim_start().starts_with("L3:"))
        .expect("an L3 line");
    assert!(
        l3.matches('=').count() >= 2,
        "the model has two L3 domains: {l3}"
    );
    changes(root);
    m.pqos(&["-e", "llc:1=0xf"]).ok();
    assert_eq!(changes(root), 1, "L3 of COS1 in both domains: one write");
    m.pqos(&["-e", "mba:1=30"]).ok();
    assert_eq!(changes(root), 1, "MB of COS1 in both domains: one write");
    m.pqos(&["-e", "llc:1=0x3;llc:2=0xc"]).ok();
    assert_eq!(
        changes(root),
        3,
        "two classes: one write each, and COS2's group made"
    );
    let after = std::fs::read_to_string(m.resctrl("COS1/schemata")).expect("COS1");
    let masks: Vec<u64> = after
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("L3:"))
        .expect("an L3 line")
        .split(';')
        .map(|d| {
            let (_, v) = d.split_once('=').expect("DOMAIN=MASK");
            u64::from_str_radix(v.trim(), 16).expect("a hex mask")
        })
        .collect();
    assert!(
        masks.len() >= 2 && masks.iter().all(|&v| v == 0x3),
        "COS1 holds 0x3 in every domain: {after}"
    );
}

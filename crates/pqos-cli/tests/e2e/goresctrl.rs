//! `pqos -I --apply FILE.yaml`: goresctrl's own configurations (`tests/data/goresctrl`, see
//! its PROVENANCE.md) on in-process simulated platforms (`--sim`, OS interface) that have the
//! resources they name. Each gives the masks goresctrl's arithmetic gives, applying it again
//! writes nothing, and invalid files are refused naming the key path, with nothing written.
//! On a mounted resctrl: goresctrl's group prefix names every group, and `--prune` removes
//! only the stale groups this pqos made with that prefix.

use crate::util::mounted::MountedOs;
use crate::util::{Machine, Reaped, Run, SKX_RDT, Sim};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/goresctrl");

fn data(name: &str) -> String {
    format!("{DATA}/{name}")
}

fn apply(sim: &Sim, file: &str) -> Run {
    sim.pqos(&["-I", "--apply", file])
}

/// Asserts each expected write line is in the output.
#[track_caller]
fn has_lines(run: &Run, lines: &[&str]) {
    for l in lines {
        assert!(
            run.stdout.lines().any(|x| x == *l),
            "missing {l:?} in\n{}",
            run.stdout
        );
    }
}

#[test]
fn the_documented_example_partitions_l2_l3_and_mb_and_applies_once() {
    // sapphire-rapids: 15-bit L3 CBM (2 domains), 16-bit L2 CBM, MBA in steps of 10%.
    let sim = Sim::new("sapphire-rapids");
    let run = apply(&sim, &data("doc-rdt-example.yaml")).ok();
    // L3: 60% of 15 ways to "exclusive" (bits 0-8), 40% to "shared" (bits 9-14); besteffort
    // gets half the shared ways, the root (DEFAULT) 30% of them.
    // L2: 80% of 16 ways to "exclusive" (13), 20% to "shared" (3).
    has_lines(
        &run,
        &[
            "guaranteed (COS1): L3 domain 0: 0x7fff -> 0x1ff",
            "guaranteed (COS1): L2 domain 0: 0xffff -> 0x1fff",
            "burstable (COS3): L3 domain 1: 0x7fff -> 0x7e00",
            "burstable (COS3): L2 domain 0: 0xffff -> 0xe000",
            "besteffort (COS2): L3 domain 0: 0x7fff -> 0xe00",
            "besteffort (COS2): L2 domain 0: 0xffff -> 0xe000",
            // the root is COS0 whatever the file calls it, as -s and -a name it
            "COS0: L3 domain 0: 0x7fff -> 0x600",
            "COS0: L2 domain 0: 0xffff -> 0x6000",
            "burstable (COS3): MBA domain 0: 100 -> 50",
            "COS0: MBA domain 1: 100 -> 50",
        ],
    );
    assert!(run.stdout.ends_with("write(s).\n"), "{}", run.stdout);
    // guaranteed keeps the full bandwidth: no MBA write for it.
    assert!(
        !run.stdout.contains("guaranteed (COS1): MBA"),
        "{}",
        run.stdout
    );
    let again = apply(&sim, &data("doc-rdt-example.yaml")).ok();
    assert_eq!(again.stdout, "Nothing to change.\n");
}

#[test]
fn goresctrls_sample_configuration_applies_and_again_writes_nothing() {
    let sim = Sim::new("sapphire-rapids");
    let run = apply(&sim, &data("sample-conf.yaml")).ok();
    // 30% and 60% of one partition holding every way, from bit 0.
    has_lines(
        &run,
        &[
            "Besteffort (COS1): L3 domain 0: 0x7fff -> 0x1f",
            "Besteffort (COS1): L2 domain 103: 0xffff -> 0x1f",
            "Burstable (COS2): L3 domain 1: 0x7fff -> 0x1ff",
            "Burstable (COS2): L2 domain 0: 0xffff -> 0x3ff",
            "Besteffort (COS1): MBA domain 0: 100 -> 30",
            "Burstable (COS2): MBA domain 1: 100 -> 60",
        ],
    );
    let again = apply(&sim, &data("sample-conf.yaml")).ok();
    assert_eq!(again.stdout, "Nothing to change.\n");
    // Every class is a group after apply, the one whose values are all the defaults too
    // (Guaranteed: 100% everywhere): containerd and CRI-O put a Guaranteed pod's containers
    // in the group named after its class, as goresctrl makes every class's group.
    has_lines(&run, &["Guaranteed (COS3): new named class"]);
    let shown = sim.pqos(&["-I", "-s"]).ok();
    for class in ["Besteffort", "Burstable", "Guaranteed"] {
        assert!(
            shown
                .stdout
                .lines()
                .any(|l| l.trim_end().ends_with(&format!("=> {class}"))),
            "{class} in\n{}",
            shown.stdout
        );
    }
}

#[test]
fn goresctrls_test_case_gives_its_expected_masks_on_a_20_way_l3() {
    // broadwell-ep: 20-bit L3 CBM, cache ids 0-1, as goresctrl's resctrl.nomb tree has.
    let sim = Sim::new("broadwell-ep");
    let run = apply(&sim, &data("test-mix-rel-abs.yaml")).ok();
    has_lines(
        &run,
        &[
            "class-1 (COS1): L3 domain 1: 0xfffff -> 0x3ff",
            "class-2 (COS2): L3 domain 0: 0xfffff -> 0x3ff",
            "class-2 (COS2): L3 domain 1: 0xfffff -> 0x7",
        ],
    );
    // class-1 keeps every way in domain 0: nothing written there.
    assert!(
        !run.stdout.contains("class-1 (COS1): L3 domain 0"),
        "{}",
        run.stdout
    );
    assert_eq!(
        apply(&sim, &data("test-mix-rel-abs.yaml")).ok().stdout,
        "Nothing to change.\n"
    );
}

#[test]
fn a_resource_the_platform_lacks_is_refused_naming_the_key_unless_optional() {
    // broadwell-ep has no MBA, and the documented snippet does not make MB optional.
    let sim = Sim::new("broadwell-ep");
    let run = apply(&sim, &data("doc-rdt-absolute.yaml")).failed();
    assert!(
        run.stderr.contains(
            "doc-rdt-absolute.yaml:22: partitions.shared.classes.besteffort.mbAllocation: \
             memory bandwidth allocation for class \"besteffort\""
        ),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("Applied"), "{}", run.stdout);
}

#[test]
fn invalid_configurations_are_refused_naming_the_key_and_write_nothing() {
    let sim = Sim::new(SKX_RDT);
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "partitions:\n  exclusive:\n    l3Allocation:\n      all: 120%\n  shared:\n    l3Allocation: 10%\n",
            "rdt.yaml:4: partitions.exclusive.l3Allocation.all: 120% over 100%",
        ),
        (
            "partitions:\n  a:\n    l3Allocation: \"0xf\"\n    classes:\n      one:\n  b:\n    l3Allocation: \"0x3c\"\n    classes:\n      two:\n",
            "rdt.yaml:7: partitions.b.l3Allocation: L3 mask 0x3c overlaps partition \"a\"'s mask in cache id 0: partitions are exclusive",
        ),
        (
            "partitions:\n  a:\n    l3Allocation: 70%\n    classes:\n      one:\n  b:\n    l3Allocation: 40%\n    classes:\n      two:\n",
            "rdt.yaml:7: partitions.b.l3Allocation: L3 \"unified\" partition allocations for cache id 0 add up to 110%, over 100% (a 70%, b 40%)",
        ),
    ];
    for (text, message) in cases {
        let file = dir.path().join("rdt.yaml");
        std::fs::write(&file, text).expect("write");
        let run = apply(&sim, file.to_str().expect("UTF-8")).failed();
        assert!(
            run.stderr
                .contains(&format!("{}/{message}", dir.path().display())),
            "{message}\n{}",
            run.stderr
        );
        assert!(!run.stdout.contains("->"), "{}", run.stdout);
    }
    // Nothing was written: a valid file still finds every class at its defaults (only its
    // group is new).
    std::fs::write(
        dir.path().join("ok.yaml"),
        "partitions:\n  a:\n    l3Allocation: 100%\n    classes:\n      one:\n",
    )
    .expect("write");
    let ok = apply(&sim, dir.path().join("ok.yaml").to_str().expect("UTF-8")).ok();
    assert_eq!(
        ok.stdout,
        "one (COS1): new named class\nApplied 1 write(s).\n"
    );
}

/// The control groups under the resctrl root of `m`, sorted.
fn groups(m: &MountedOs) -> Vec<String> {
    m.list("")
        .into_iter()
        .filter(|n| m.resctrl(n).is_dir())
        .filter(|n| !["info", "mon_data", "mon_groups"].contains(&n.as_str()))
        .collect()
}

#[test]
fn a_group_prefix_names_every_group_and_prune_removes_only_our_stale_ones() {
    let m = MountedOs::new(SKX_RDT);
    // another tool's group with the prefix, and a named class of ours without it
    m.mkdir("cri-kube");
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = dir.path().join("batch.toml");
    std::fs::write(&toml, "[[class]]\nname = \"batch\"\nl3 = { ways = 2 }\n").expect("write");
    m.pqos(&["--apply", toml.to_str().expect("UTF-8")]).ok();
    let sample = data("sample-conf.yaml");
    let run = m.pqos(&["--apply", &sample, "--group-prefix", "cri-"]).ok();
    assert!(
        run.stdout.contains("cri-Guaranteed (COS")
            && run.stdout.contains("cri-Besteffort (COS")
            && !run.stdout.contains("\nBesteffort"),
        "{}",
        run.stdout
    );
    assert_eq!(
        groups(&m),
        [
            "batch",
            "cri-Besteffort",
            "cri-Burstable",
            "cri-Guaranteed",
            "cri-kube"
        ]
    );
    // -a with the number --apply printed reaches that very group, no COS<n> beside it
    let cos = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("cri-Guaranteed (COS"))
        .and_then(|l| l.split(')').next())
        .expect("cri-Guaranteed's class")
        .to_owned();
    let guaranteed = Reaped::sleeper();
    let pid = guaranteed.pid().to_string();
    m.pqos(&["-a", &format!("pid:{cos}={pid}")]).ok();
    assert!(m.read("cri-Guaranteed/tasks").lines().any(|t| t == pid));
    assert!(!m.exists(&format!("COS{cos}")), "{:?}", groups(&m));

    // the file without Burstable, which holds a task: pruning is refused, nothing written
    let text = std::fs::read_to_string(&sample).expect("sample");
    let start = text.find("      Burstable:").expect("Burstable");
    let end = text.find("      Besteffort:").expect("Besteffort");
    let smaller = dir.path().join("smaller.yaml");
    std::fs::write(&smaller, format!("{}{}", &text[..start], &text[end..])).expect("write");
    let smaller = smaller.to_str().expect("UTF-8").to_owned();
    let busy = Reaped::sleeper();
    m.write("cri-Burstable/tasks", &busy.pid().to_string());
    let before = m.read("cri-Burstable/schemata");
    let refused = m
        .pqos(&["--apply", &smaller, "--group-prefix", "cri-", "--prune"])
        .failed();
    assert!(
        refused.stderr.contains("cri-Burstable") && refused.stderr.contains("1 task(s)"),
        "{}",
        refused.stderr
    );
    assert_eq!(m.read("cri-Burstable/schemata"), before);
    // emptied, it goes; the other tool's group and our unprefixed class stay
    m.write("tasks", &busy.pid().to_string());
    let pruned = m
        .pqos(&["--apply", &smaller, "--group-prefix", "cri-", "--prune"])
        .ok();
    assert!(
        pruned.stdout.contains("cri-Burstable (COS")
            && pruned.stdout.contains("): named class removed\n")
            && !pruned.stderr.contains("shareable"),
        "{}\n{}",
        pruned.stdout,
        pruned.stderr
    );
    assert_eq!(
        groups(&m),
        ["batch", "cri-Besteffort", "cri-Guaranteed", "cri-kube"]
    );
    let again = m
        .pqos(&["--apply", &smaller, "--group-prefix", "cri-", "--prune"])
        .ok();
    assert_eq!(again.stdout, "Nothing to change.\n");
    // --remove with the prefix takes the file's groups; a TOML file has no prefix to take
    m.write("tasks", &pid);
    m.pqos(&["--apply", &smaller, "--group-prefix", "cri-", "--remove"])
        .ok();
    assert_eq!(groups(&m), ["batch", "cri-kube"]);
    let toml_prefix = m
        .pqos(&[
            "--apply",
            toml.to_str().expect("UTF-8"),
            "--group-prefix",
            "x-",
        ])
        .failed();
    assert!(
        toml_prefix.stderr.contains("goresctrl's options"),
        "{}",
        toml_prefix.stderr
    );
}

/// A class named like a group another tool made (`kube`, `cri-Guaranteed`) is refused by
/// name at planning time, for the TOML form and goresctrl's YAML alike: the error names the
/// class, the group and that another tool owns it, and nothing is written (before, the
/// class took the group over: 12 writes, its ways rewritten).
#[test]
fn a_class_named_like_another_tools_group_is_refused_and_nothing_written() {
    let m = MountedOs::new(SKX_RDT);
    m.mkdir("kube");
    m.write("kube/schemata", "L3:0=f;1=f\n");
    m.mkdir("cri-Guaranteed");
    m.write("cri-Guaranteed/schemata", "L3:0=3;1=3\n");
    let before = (m.read("kube/schemata"), m.read("cri-Guaranteed/schemata"));
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = dir.path().join("kube.toml");
    std::fs::write(&toml, "[[class]]\nname = \"kube\"\nl3 = { ways = 2 }\n").expect("write");
    let refused = m.pqos(&["--apply", toml.to_str().expect("UTF-8")]).failed();
    assert!(
        refused.stderr.contains("class \"kube\"")
            && refused
                .stderr
                .contains("resctrl group `kube` belongs to another tool"),
        "{}",
        refused.stderr
    );
    let sample = data("sample-conf.yaml");
    let refused = m
        .pqos(&["--apply", &sample, "--group-prefix", "cri-"])
        .failed();
    assert!(
        refused.stderr.contains("class \"Guaranteed\"")
            && refused
                .stderr
                .contains("resctrl group `cri-Guaranteed` belongs to another tool"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        (m.read("kube/schemata"), m.read("cri-Guaranteed/schemata")),
        before
    );
    assert_eq!(groups(&m), ["cri-Guaranteed", "kube"], "nothing made");
}

/// Migrating from goresctrl (`--group-prefix goresctrl. --prune --adopt goresctrl`): the
/// prefixed groups goresctrl made are adopted; those the file names become its classes,
/// those it no longer names are removed; a stale one holding a task is refused, naming
/// it, with nothing written; another tool's unprefixed group stays. Without `--adopt`,
/// `--prune` leaves goresctrl's groups alone, as before.
#[test]
fn prune_with_adopt_goresctrl_migrates_the_prefixed_groups_goresctrl_made() {
    let m = MountedOs::new(SKX_RDT);
    for g in [
        "goresctrl.Guaranteed",
        "goresctrl.Old",
        "goresctrl.Busy",
        "kube",
    ] {
        m.mkdir(g);
    }
    m.write("goresctrl.Old/schemata", "L3:0=3;1=3\n");
    let busy = Reaped::sleeper();
    m.write("goresctrl.Busy/tasks", &busy.pid().to_string());
    let sample = data("sample-conf.yaml");
    let prefix = ["--group-prefix", "goresctrl."];
    // without --adopt: goresctrl's group of a class of the file is refused, none removed
    let refused = m
        .pqos(&[&["--apply", sample.as_str()][..], &prefix, &["--prune"]].concat())
        .failed();
    assert!(
        refused
            .stderr
            .contains("resctrl group `goresctrl.Guaranteed` belongs to another tool"),
        "{}",
        refused.stderr
    );
    // --adopt without a prefix is refused
    let no_prefix = m
        .pqos(&["--apply", &sample, "--adopt", "goresctrl"])
        .failed();
    assert!(
        no_prefix.stderr.contains("--group-prefix"),
        "{}",
        no_prefix.stderr
    );
    let adopt = [
        &["--apply", sample.as_str()][..],
        &prefix,
        &["--prune", "--adopt", "goresctrl"],
    ]
    .concat();
    // a stale group that still holds a task: refused, naming it, nothing written
    let old = m.read("goresctrl.Old/schemata");
    let refused = m.pqos(&adopt).failed();
    assert!(
        refused.stderr.contains("goresctrl.Busy") && refused.stderr.contains("1 task(s)"),
        "{}",
        refused.stderr
    );
    assert_eq!(m.read("goresctrl.Old/schemata"), old);
    assert!(!m.exists("goresctrl.Besteffort"));
    // goresctrl's pods' monitor groups in a stale group: one still holding the task is
    // refused, naming the group, nothing written
    m.write("tasks", &busy.pid().to_string());
    m.mkdir("goresctrl.Old/mon_groups/pod1");
    m.mkdir("goresctrl.Old/mon_groups/pod2");
    // (as the kernel, a task joins a monitor group of its own control group only)
    m.write("goresctrl.Old/tasks", &busy.pid().to_string());
    m.write(
        "goresctrl.Old/mon_groups/pod2/tasks",
        &busy.pid().to_string(),
    );
    let refused = m.pqos(&adopt).failed();
    assert!(
        refused.stderr.contains("goresctrl.Old"),
        "{}",
        refused.stderr
    );
    assert_eq!(m.read("goresctrl.Old/schemata"), old);
    assert!(m.exists("goresctrl.Old/mon_groups/pod1"));
    // the task gone, goresctrl's empty leftovers are removed with their group (they were
    // refused before: remove them first)
    m.write("tasks", &busy.pid().to_string());
    let migrated = m.pqos(&adopt).ok();
    assert!(!m.exists("goresctrl.Old"), "{}", migrated.stdout);
    assert!(
        migrated.stdout.contains("goresctrl.Old (COS")
            && migrated.stdout.contains("goresctrl.Busy (COS"),
        "{}",
        migrated.stdout
    );
    assert_eq!(
        groups(&m),
        [
            "goresctrl.Besteffort",
            "goresctrl.Burstable",
            "goresctrl.Guaranteed",
            "kube"
        ]
    );
    // adopted, goresctrl.Guaranteed is ours: the next run without --adopt applies cleanly
    let again = m
        .pqos(&[&["--apply", sample.as_str()][..], &prefix, &["--prune"]].concat())
        .ok();
    assert_eq!(again.stdout, "Nothing to change.\n");
    let shown = m.pqos(&["-s"]).ok().stdout;
    assert!(
        shown.contains("Other resctrl groups (not managed by pqos):\n    kube (control group)\n"),
        "{shown}"
    );
}

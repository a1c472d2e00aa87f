//! `pqos --apply FILE`: named classes from a TOML file as one transaction, on both
//! interfaces of a FUSE-mounted simulated platform. The issue's example applies verbatim;
//! applying it again writes nothing (counted in `.sim/stats`); bad files are refused naming
//! the file, line and key, with nothing written; a kill at any write is rolled back, named
//! resctrl groups included.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::crash::every_write_position;
use crate::util::mounted::{Mounted, MountedOs};
use crate::util::{Machine, Reaped, SKX_RDT};

/// The example of issue 10, verbatim.
const EXAMPLE: &str = r#"[[class]]
name = "pipeline"
l3 = { ways = 11 }            # or mask = "0xffe00", or percent = 55; optional per-domain table
mba = { percent = 100 }
cpus = "2-7"

[[class]]
name = "noisy"
l3 = { mask = "0x3" }
mba = { percent = 20 }
cpus = "8-10"
tasks = [1234]                # or processes = ["stress-ng"], all threads
"#;

/// Writes `text` to `name` in a fresh temporary directory.
pub(crate) fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write the configuration");
    p
}

/// The changes (`write`, `mkdir`, `rmdir`) the mount served since the last call.
pub(crate) fn changes(root: &Path) -> u64 {
    let stats = std::fs::read_to_string(root.join(".sim/stats")).expect(".sim/stats");
    std::fs::write(root.join(".sim/stats"), "reset\n").expect("reset .sim/stats");
    stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| ["write", "mkdir", "rmdir"].contains(k))
        .map(|(_, n)| n.trim().parse::<u64>().expect("a count"))
        .sum()
}

/// A process whose id is `pid`, made by setting the kernel's last pid just below it (root);
/// `None` when the id is in use or another process took it first.
fn process_with_pid(pid: u32) -> Option<Reaped> {
    if Path::new(&format!("/proc/{pid}")).exists() {
        return None;
    }
    for _ in 0..20 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", pid - 1)).ok()?;
        let child = Reaped(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("spawn sleep"),
        );
        if child.pid() == pid {
            return Some(child);
        }
    }
    None
}

#[test]
fn the_issue_example_applies_verbatim_through_resctrl_and_again_writes_nothing() {
    let m = MountedOs::new("sapphire-rapids");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(&dir, "classes.toml", EXAMPLE);
    let cfg = cfg.to_str().expect("UTF-8 path");
    let _task = process_with_pid(1234).expect("process 1234 (ns_last_pid, as root)");
    changes(m.root());
    // a dry run prints the plan and writes nothing
    let dry = m.pqos(&["--apply", cfg, "--dry-run"]).ok();
    assert!(
        dry.stdout.ends_with("dry run: nothing written.\n"),
        "{}",
        dry.stdout
    );
    assert_eq!(changes(m.root()), 0, "dry run");
    // applied: named groups, masks placed, MBA, CPUs and the task
    let run = m.pqos(&["--apply", cfg]).ok();
    assert!(
        run.stdout.ends_with("Applied 18 write(s).\n"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.lines().count(), 19, "{}", run.stdout);
    assert!(
        run.stdout
            .starts_with("pipeline (COS1): new named class\nnoisy (COS2): new named class\n"),
        "{}",
        run.stdout
    );
    // 18 steps (the two names first: their groups); the 6 CPUs of `pipeline` and the 3 of
    // `noisy` are one cpus_list write each, and each class's L3 and MB are one schemata
    // write each for both domains
    let written = changes(m.root());
    assert!(written >= 18 - 5 - 2 - 4, "{written}");
    assert_eq!(m.read("noisy/tasks"), "1234\n");
    assert_eq!(m.read("noisy/cpus_list"), "8-10\n");
    assert_eq!(m.read("pipeline/cpus_list"), "2-7\n");
    let noisy = m.read("noisy/schemata");
    assert!(
        noisy.contains("L3:0=3;1=3") && noisy.contains("MB:0=20;1=20"),
        "{noisy}"
    );
    let pipeline = m.read("pipeline/schemata");
    let l3 = pipeline
        .lines()
        .find_map(|l| l.trim().strip_prefix("L3:0="))
        .expect("L3 line");
    let mask = u64::from_str_radix(l3.split(';').next().expect("domain 0"), 16).expect("hex");
    assert_eq!(mask.count_ones(), 11, "{pipeline}");
    assert_eq!(mask & 0x3, 0, "exclusive of noisy: {pipeline}");
    // the second time: nothing to change, not one write
    let again = m.pqos(&["--apply", cfg]).ok();
    assert_eq!(again.stdout, "Nothing to change.\n");
    assert_eq!(changes(m.root()), 0, "the second apply writes nothing");
}

#[test]
fn msr_named_classes_keep_their_class_of_service_and_apply_once() {
    let m = Mounted::new("broadwell-ep");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(
        &dir,
        "c.toml",
        "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\ncpus = \"0-1\"\n\n\
         [[class]]\nname = \"batch\"\ncos = 5\nl3 = { percent = 10 }\ncpus = \"2\"\n",
    );
    let cfg = cfg.to_str().expect("UTF-8 path");
    let run = m.pqos(&["--apply", cfg]).ok();
    assert!(
        run.stdout.contains("db (COS1): CPU 0 from COS0"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("batch (COS5): CPU 2 from COS0"),
        "{}",
        run.stdout
    );
    changes(m.root());
    assert_eq!(
        m.pqos(&["--apply", cfg]).ok().stdout,
        "Nothing to change.\n"
    );
    assert_eq!(changes(m.root()), 0, "the second apply writes no register");
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("L3CA COS1 => MASK 0x"), "{s}");
    let core2 = s
        .lines()
        .find(|l| l.trim_start().starts_with("Core 2,"))
        .expect("core 2");
    assert!(core2.contains("=> COS5"), "{core2}");
}

#[test]
fn bad_configurations_name_file_line_and_key_and_write_nothing() {
    let m = MountedOs::new(SKX_RDT);
    m.mkdir("kube");
    m.write("kube/cpus_list", "20");
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "[[class]]\nname = \"x\"\ncolour = 1\n",
            3,
            "colour",
            "unknown key",
        ),
        (
            "[[class]]\nname = \"a/b\"\ncpus = \"1\"\n",
            2,
            "name",
            "contains `/`",
        ),
        (
            "[[class]]\nname = \"x\"\nl3 = { ways = 30 }\n",
            3,
            "l3.ways",
            "the L3 CBM has 11",
        ),
        (
            "[[class]]\nname = \"x\"\nl3 = { mask = \"0xf0\" }\n\n[[class]]\nname = \"y\"\n\
             l3 = { mask = \"0x30\" }\n",
            7,
            "l3.mask",
            "overlapping exclusive classes",
        ),
        (
            "[[class]]\nname = \"x\"\n\ntasks = [4000000]\n",
            4,
            "tasks",
            "does not exist",
        ),
        (
            "[[class]]\nname = \"x\"\ncpus = \"20\"\n",
            3,
            "cpus",
            "kube",
        ),
    ];
    changes(m.root());
    for (i, (text, line, key, why)) in cases.into_iter().enumerate() {
        let cfg = file(&dir, &format!("bad{i}.toml"), text);
        let run = m.pqos(&["--apply", cfg.to_str().expect("UTF-8")]).failed();
        let want = format!("{}:{line}: ", cfg.display());
        assert!(
            run.stderr.contains(&want)
                && run.stderr.contains(&format!("{key}: "))
                && run.stderr.contains(why),
            "case {i}: want {want}..{key}: ..{why} in:\n{}",
            run.stderr
        );
        assert_eq!(changes(m.root()), 0, "case {i}: nothing written");
    }
}

#[test]
fn a_kill_at_any_write_of_an_apply_is_rolled_back_named_groups_included() {
    let m = MountedOs::new(SKX_RDT);
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Reaped::sleeper();
    let cfg = file(
        &dir,
        "c.toml",
        &format!(
            "[[class]]\nname = \"web\"\nl3 = {{ ways = 4 }}\nmba = {{ percent = 50 }}\n\
             cpus = \"2-3\"\ntasks = [{}]\n",
            a.pid()
        ),
    );
    let cfg = cfg.to_str().expect("UTF-8 path");
    let back = || {
        // removing the group puts its CPUs and tasks back in the root, as the kernel does
        let _ = std::fs::remove_dir(m.resctrl("web"));
    };
    let n = every_write_position(
        &m,
        m.root(),
        "sys/fs/resctrl/**",
        &["--apply", cfg],
        || crate::crash::tree(&m),
        back,
    );
    assert_eq!(
        n, 5,
        "mkdir, 2 schemata (L3, then MB, each one write for both domains), one cpus_list for \
         CPUs 2-3, tasks"
    );
}

#[test]
fn another_tools_exclusive_ways_are_refused_to_e_and_placed_around_by_apply() {
    let m = MountedOs::new(SKX_RDT);
    // the root gives up ways 6-7, which group `iso` then holds exclusively
    m.write("schemata", "L3:0=03f;1=03f\n");
    m.mkdir("iso");
    m.write("iso/schemata", "L3:0=0c0;1=0c0\n");
    m.write("iso/mode", "exclusive\n");
    changes(m.root());
    let e = m.pqos(&["-e", "llc:1=0x80"]).failed();
    assert!(
        e.stderr
            .contains("overlaps ways 0x80 of resctrl group iso, which holds them exclusively"),
        "{}",
        e.stderr
    );
    assert_eq!(changes(m.root()), 0, "refused before any write");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(
        &dir,
        "c.toml",
        "[[class]]\nname = \"y\"\nl3 = { ways = 3 }\ncpus = \"1\"\n",
    );
    m.pqos(&["--apply", cfg.to_str().expect("UTF-8")]).ok();
    // 3 ways from the top, around the shareable ways 9-10 and iso's 6-7
    assert!(
        m.read("y/schemata").contains("L3:0=38;1=38"),
        "{}",
        m.read("y/schemata")
    );
}

/// A class whose mask overlaps the ways of a group outside the file is refused naming the
/// class and who holds the ways, from either file form and on either interface.
#[test]
fn a_mask_over_another_groups_ways_is_refused_naming_the_class_and_the_group() {
    let m = MountedOs::new("broadwell-ep");
    // another tool's group holds ways 4-7 exclusively (the root gave them up)
    m.write("schemata", "L3:0=fff00;1=fff00\n");
    m.mkdir("kubepods");
    m.write("kubepods/schemata", "L3:0=f0;1=f0\n");
    m.write("kubepods/mode", "exclusive\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = file(
        &dir,
        "c.toml",
        "[[class]]\nname = \"web\"\nl3 = { mask = \"0xff\" }\ncpus = \"4\"\n",
    );
    let yaml = file(
        &dir,
        "g.yaml",
        "partitions:\n  p:\n    l3Allocation: \"100%\"\n    classes:\n      batch:\n        \
         l3Allocation: \"0xff\"\n",
    );
    changes(m.root());
    for (cfg, class) in [(&toml, "class \"web\""), (&yaml, "class \"batch\"")] {
        let run = m.pqos(&["--apply", cfg.to_str().expect("UTF-8")]).failed();
        assert!(
            run.stderr.contains(class)
                && run.stderr.contains("resctrl group kubepods")
                && run.stderr.contains("0xf0"),
            "{class} and kubepods in:\n{}",
            run.stderr
        );
        assert_eq!(changes(m.root()), 0, "nothing written");
    }
}

#[test]
fn a_mask_over_another_class_of_service_names_it_on_the_msr_interface() {
    let m = Mounted::new("broadwell-ep");
    m.pqos(&["-e", "llc:3=0xf0"]).ok();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(
        &dir,
        "c.toml",
        "[[class]]\nname = \"web\"\nl3 = { mask = \"0xff\" }\ncpus = \"4\"\n",
    );
    let run = m.pqos(&["--apply", cfg.to_str().expect("UTF-8")]).failed();
    assert!(
        run.stderr.contains("class \"web\": l3: ")
            && run.stderr.contains(
                "overlaps ways 0xf0 held by classes outside the configuration (COS3: 0xf0)"
            ),
        "{}",
        run.stderr
    );
}

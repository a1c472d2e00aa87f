//! Named classes are pqos's own on both interfaces: `pqos -R` gives them up (defaults, CPUs
//! and tasks back to COS0, the groups `--apply` made removed), `pqos --apply FILE --remove`
//! takes exactly the file's classes away again (the whole resctrl tree, or every allocation
//! register, as before the apply), and neither touches another tool's group of the same
//! name. A damaged record of the names is read as empty, never followed through a symlink.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util::mounted::MountedOs;
use crate::util::{Machine, Reaped, SKX_RDT, Sim};

/// Two classes with L3 ways, MBA and CPUs (no tasks: the MSR interface has none).
const CLASSES: &str = r#"[[class]]
name = "pipeline"
l3 = { ways = 11 }
mba = { percent = 100 }
cpus = "2-7"

[[class]]
name = "noisy"
l3 = { mask = "0x3" }
mba = { percent = 20 }
cpus = "8-10"
"#;

/// The class `web` of the OS tests: 4 ways, 50 % MBA, CPUs 2-3 and the task `pid`.
fn web_class(pid: impl std::fmt::Display) -> String {
    format!(
        "[[class]]\nname = \"web\"\nl3 = {{ ways = 4 }}\nmba = {{ percent = 50 }}\n\
         cpus = \"2-3\"\ntasks = [{pid}]\n"
    )
}

/// Writes `text` to `name` in `dir`, returning the path as text.
fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write the configuration");
    p.to_str().expect("UTF-8 path").to_owned()
}

/// The run directory of a `--sim` machine (next to its state file).
fn sim_run_dir(sim: &Sim) -> PathBuf {
    let mut dir = sim.state().into_os_string();
    dir.push(".run");
    dir.into()
}

/// The files of a run directory, the MSR writers' lock left out.
fn run_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "msr.lock")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every directory and file under the resctrl root of `m`, with each file's text (a file
/// that cannot be read, by its error): the whole tree. Counters (`mon_data`) change on their
/// own, so their files are listed without their values, and so does the root's `tasks`,
/// which lists every task of the host outside the other groups (processes come and go).
fn whole_tree(m: &MountedOs) -> BTreeMap<String, String> {
    fn walk(dir: &Path, rel: &str, counters: bool, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
            .map(|e| e.expect("entry"))
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type().expect("file type").is_dir() {
                out.insert(format!("{path}/"), String::new());
                walk(&e.path(), &path, counters || name == "mon_data", out);
            } else if counters || path == "tasks" {
                out.insert(path, String::new());
            } else {
                let text = std::fs::read_to_string(e.path()).unwrap_or_else(|e| format!("{e}"));
                out.insert(path, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&m.resctrl(""), "", false, &mut out);
    out
}

/// What a `--sim` machine's allocation is: every CPU's IA32_PQR_ASSOC and event select,
/// every CAT and MBA register and CDP bit (the model's saved state, its clock, counters
/// and PMU left out), `-s`, and the files of its run directory.
fn registers(sim: &Sim) -> (serde_json::Value, String, Vec<String>) {
    let text = std::fs::read_to_string(sim.state()).expect("the state file");
    let state: serde_json::Value = serde_json::from_str(&text).expect("state JSON");
    let regs = serde_json::json!({
        "cpus": state["cpus"],
        "l3": state["l3"],
        "l2": state["l2"],
        "mba": state["mba"],
        "smba": state["smba"],
    });
    let shown = sim.pqos(&["-s"]).ok().stdout;
    (regs, shown, run_files(&sim_run_dir(sim)))
}

/// Asserts `-s` shows no named class and every core in COS0 (`, RMIDn` after it on MSR).
fn assert_all_in_cos0(shown: &str) {
    assert!(!shown.contains("Named classes"), "{shown}");
    for line in shown
        .lines()
        .filter(|l| l.trim_start().starts_with("Core ") && l.contains("=>"))
    {
        assert!(line.contains("=> COS0"), "{line}\n{shown}");
    }
}

#[test]
fn reset_gives_up_applied_named_classes_on_the_msr_interface() {
    let sim = Sim::new("sapphire-rapids");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(&dir, "c.toml", CLASSES);
    sim.pqos(&["--apply", &cfg]).ok();
    let shown = sim.pqos(&["-s"]).ok().stdout;
    assert!(
        shown.contains("Named classes (pqos --apply):\n    COS1 => pipeline\n    COS2 => noisy\n"),
        "{shown}"
    );
    assert_eq!(run_files(&sim_run_dir(&sim)), ["msr-classes"]);
    // -R: pqos's one line on stdout, the names on stderr
    let reset = sim.pqos(&["-R"]).ok();
    assert_eq!(reset.stdout, "Allocation reset successful\n");
    assert!(
        reset
            .stderr
            .contains("NOTE: named classes removed: pipeline (COS1), noisy (COS2)\n"),
        "{}",
        reset.stderr
    );
    let shown = sim.pqos(&["-s"]).ok().stdout;
    assert_all_in_cos0(&shown);
    assert!(
        !shown.contains("L3CA COS1 => MASK 0x1") && !shown.contains("20% available"),
        "{shown}"
    );
    assert_eq!(run_files(&sim_run_dir(&sim)), Vec::<String>::new());
    // the names are free again: a new apply takes them anew
    let again = sim.pqos(&["--apply", &cfg]).ok().stdout;
    assert!(
        again.starts_with("pipeline (COS1): new named class\n"),
        "{again}"
    );
}

#[test]
fn reset_gives_up_applied_named_classes_on_the_in_process_os_interface() {
    let sim = Sim::new("sapphire-rapids");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(&dir, "c.toml", CLASSES);
    sim.pqos(&["-I", "--apply", &cfg]).ok();
    let shown = sim.pqos(&["-I", "-s"]).ok().stdout;
    // pqos's classes: the groups are ours, not "other resctrl groups"
    assert!(!shown.contains("Other resctrl groups"), "{shown}");
    assert!(
        shown.contains("    Core 2, L2ID 2, L3ID 0 => COS1\n"),
        "{shown}"
    );
    assert!(shown.contains("    COS2 => noisy\n"), "{shown}");
    let reset = sim.pqos(&["-I", "-R"]).ok();
    assert_eq!(reset.stdout, "Allocation reset successful\n");
    assert!(
        reset
            .stderr
            .contains("NOTE: named classes removed: pipeline (COS1), noisy (COS2)\n"),
        "{}",
        reset.stderr
    );
    let shown = sim.pqos(&["-I", "-s"]).ok().stdout;
    assert_all_in_cos0(&shown);
    assert!(!shown.contains("Other resctrl groups"), "{shown}");
    // the model's resctrl: the root group alone
    let text = std::fs::read_to_string(sim.state()).expect("the state file");
    let state: serde_json::Value = serde_json::from_str(&text).expect("state JSON");
    let groups: Vec<&serde_json::Value> = state["resctrl"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter(|g| !g.is_null())
        .collect();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(run_files(&sim_run_dir(&sim)), Vec::<String>::new());
}

#[test]
fn reset_removes_the_named_groups_of_a_mounted_resctrl_and_leaves_another_tools_alone() {
    let m = MountedOs::new(SKX_RDT);
    // another tool's group, with CPU 20 and a limit of its own
    m.mkdir("kube");
    m.write("kube/schemata", "L3:0=f;1=f\n");
    m.write("kube/cpus_list", "20");
    let kube = (m.read("kube/schemata"), m.read("kube/cpus_list"));
    let dir = tempfile::tempdir().expect("tempdir");
    let task = Reaped::sleeper();
    let cfg = file(
        &dir,
        "c.toml",
        &format!(
            "{}\n[[class]]\nname = \"batch\"\ncpus = \"4\"\n",
            web_class(task.pid())
        ),
    );
    m.pqos(&["--apply", &cfg]).ok();
    assert!(m.exists("web") && m.exists("batch"));
    let shown = m.pqos(&["-s"]).ok().stdout;
    assert!(
        shown.contains("Other resctrl groups (not managed by pqos):\n    kube (control group)\n")
            && !shown.contains("    web (control group)"),
        "{shown}"
    );
    let reset = m.pqos(&["-R"]).ok();
    assert_eq!(reset.stdout, "Allocation reset successful\n");
    assert!(
        reset.stderr.contains("NOTE: named classes removed: ")
            && reset.stderr.contains("web (COS")
            && reset.stderr.contains("batch (COS"),
        "{}",
        reset.stderr
    );
    let groups: Vec<String> = m
        .list("")
        .into_iter()
        .filter(|n| m.resctrl(n).is_dir())
        .filter(|n| !["info", "mon_data", "mon_groups"].contains(&n.as_str()))
        .collect();
    assert_eq!(groups, ["kube"], "no named group left");
    assert!(m.read("tasks").contains(&task.pid().to_string()));
    assert!(!m.read("cpus_list").trim().is_empty());
    assert_eq!((m.read("kube/schemata"), m.read("kube/cpus_list")), kube);
    let run = rdt_pqos::Paths::under(m.root()).run;
    assert!(
        !run.join("os-classes").exists(),
        "the record goes with them"
    );
}

#[test]
fn remove_after_apply_leaves_the_whole_resctrl_tree_as_it_was() {
    let m = MountedOs::new(SKX_RDT);
    m.mkdir("kube");
    m.write("kube/cpus_list", "20");
    let task = Reaped::sleeper();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(
        &dir,
        "c.toml",
        &format!(
            "{}\n[[class]]\nname = \"batch\"\nl3 = {{ ways = 2 }}\n",
            web_class(task.pid())
        ),
    );
    let before = whole_tree(&m);
    m.pqos(&["--apply", &cfg]).ok();
    let applied = whole_tree(&m);
    assert_ne!(applied, before);
    // a dry run writes nothing
    let dry = m.pqos(&["--apply", &cfg, "--remove", "--dry-run"]).ok();
    assert!(
        dry.stdout.contains("web (COS1): CPU 2 to COS0\n")
            && dry
                .stdout
                .contains(&format!("web (COS1): task {} to COS0\n", task.pid()))
            && dry.stdout.ends_with("dry run: nothing written.\n"),
        "{}",
        dry.stdout
    );
    assert_eq!(whole_tree(&m), applied, "dry run");
    let removed = m.pqos(&["--apply", &cfg, "--remove"]).ok();
    assert!(
        removed.stdout.contains("web (COS1): named class removed\n")
            && removed
                .stdout
                .contains("batch (COS2): named class removed\n"),
        "{}",
        removed.stdout
    );
    let after = whole_tree(&m);
    if after != before {
        let diff: Vec<String> = before
            .iter()
            .filter(|(k, v)| after.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: {v:?} -> {:?}", after.get(k)))
            .chain(
                after
                    .keys()
                    .filter(|k| !before.contains_key(*k))
                    .map(|k| format!("{k}: new")),
            )
            .collect();
        panic!("the tree differs:\n{}", diff.join("\n"));
    }
    assert!(m.read("tasks").lines().any(|t| t == task.pid().to_string()));
    let run = rdt_pqos::Paths::under(m.root()).run;
    assert!(!run.join("os-classes").exists());
    // again: nothing of ours is left, and each name is said to be none of ours
    let again = m.pqos(&["--apply", &cfg, "--remove"]).ok();
    assert_eq!(again.stdout, "Nothing to change.\n");
    assert!(
        again
            .warnings
            .contains("class \"web\": name: `web` is not a named class"),
        "{}",
        again.raw_stdout
    );
}

#[test]
fn remove_after_apply_leaves_every_register_as_it_was_on_the_msr_interface() {
    let sim = Sim::new("sapphire-rapids");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(&dir, "c.toml", CLASSES);
    // COS1 is another user's (pqos -e): the named classes go around it and it stays
    sim.pqos(&["-e", "llc:1=0x4000", "-a", "llc:1=12"]).ok();
    let before = registers(&sim);
    sim.pqos(&["--apply", &cfg]).ok();
    let applied = registers(&sim);
    assert_ne!(applied, before);
    assert!(
        applied.1.contains("    COS2 => pipeline\n"),
        "{}",
        applied.1
    );
    let dry = sim.pqos(&["--apply", &cfg, "--remove", "--dry-run"]).ok();
    assert!(
        dry.stdout.ends_with("dry run: nothing written.\n"),
        "{}",
        dry.stdout
    );
    assert_eq!(registers(&sim), applied, "dry run");
    sim.pqos(&["--apply", &cfg, "--remove"]).ok();
    let after = registers(&sim);
    assert_eq!(after.0, before.0, "registers");
    crate::eqnice!(before.1, after.1);
    assert_eq!(after.2, before.2, "run directory");
}

#[test]
fn remove_leaves_another_tools_group_of_the_same_name_alone() {
    let m = MountedOs::new(SKX_RDT);
    // goresctrl's group `db`, with a CPU and a mask: not ours, whatever its name
    m.mkdir("db");
    m.write("db/schemata", "L3:0=3;1=3\n");
    m.write("db/cpus_list", "5");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(
        &dir,
        "c.toml",
        "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\ncpus = \"6\"\n",
    );
    let before = whole_tree(&m);
    let run = m.pqos(&["--apply", &cfg, "--remove"]).ok();
    assert_eq!(run.stdout, "Nothing to change.\n");
    assert!(
        run.warnings
            .contains(":2: class \"db\": name: `db` is not a named class this library made"),
        "{}",
        run.raw_stdout
    );
    assert_eq!(whole_tree(&m), before);
    let reset = m.pqos(&["-R"]).ok();
    assert!(
        !reset.stderr.contains("named classes removed"),
        "{}",
        reset.stderr
    );
    assert_eq!(m.read("db/schemata"), before["db/schemata"]);
    assert_eq!(m.read("db/cpus_list"), "5\n");
    let shown = m.pqos(&["-s"]).ok().stdout;
    assert!(shown.contains("    db (control group)\n"), "{shown}");
    assert!(!shown.contains("Named classes"), "{shown}");
}

#[test]
fn a_damaged_or_planted_record_of_names_is_read_as_empty_and_replaced() {
    for (iface, record) in [(None, "msr-classes"), (Some("-I"), "os-classes")] {
        let sim = Sim::new("sapphire-rapids");
        let pqos = |args: &[&str]| {
            let mut all: Vec<&str> = iface.into_iter().collect();
            all.extend_from_slice(args);
            sim.pqos(&all)
        };
        pqos(&["-s"]).ok();
        let run = sim_run_dir(&sim);
        std::fs::create_dir_all(&run).expect("run dir");
        let path = run.join(record);
        // garbage: binary bytes, absurd classes, names that cannot be groups
        let mut junk = b"\xff\xfe\x00 binary\n".to_vec();
        junk.extend_from_slice(b"99999999 x\n1 ../../etc\n2 \n");
        std::fs::write(&path, &junk).expect("write junk");
        let shown = pqos(&["-s"]).ok();
        assert!(!shown.stdout.contains("Named classes"), "{}", shown.stdout);
        let reset = pqos(&["-R"]).ok();
        assert_eq!(reset.stdout, "Allocation reset successful\n", "{record}");
        // text that parses in part: only the valid lines count (the reset left nothing in
        // use, so the run directory went with it)
        std::fs::create_dir_all(&run).expect("run dir");
        std::fs::write(&path, "7 pipeline\nnot a line\n3 ../x\n").expect("write");
        let shown = pqos(&["-s"]).ok().stdout;
        if iface.is_none() {
            assert!(shown.contains("    COS7 => pipeline\n"), "{shown}");
        } else {
            // on resctrl a recorded name counts only with its group
            assert!(!shown.contains("Named classes"), "{shown}");
        }
        // a symlink planted as the record is not followed, and replaced by the next apply
        let target = run.join("elsewhere");
        std::fs::write(&target, "secret\n").expect("target");
        std::fs::remove_file(&path).expect("remove");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = file(&dir, "c.toml", "[[class]]\nname = \"db\"\ncpus = \"2\"\n");
        pqos(&["--apply", &cfg]).ok();
        assert_eq!(
            std::fs::read_to_string(&target).expect("target"),
            "secret\n"
        );
        assert!(
            !std::fs::symlink_metadata(&path)
                .expect("record")
                .is_symlink()
        );
        let shown = pqos(&["-s"]).ok().stdout;
        assert!(shown.contains(" => db\n"), "{record}: {shown}");
    }
}

#[test]
fn a_kill_at_any_write_of_a_remove_is_rolled_back_to_the_applied_classes() {
    let m = MountedOs::new(SKX_RDT);
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Reaped::sleeper();
    let cfg = file(&dir, "c.toml", &web_class(a.pid()));
    m.pqos(&["--apply", &cfg]).ok();
    let n = crate::crash::every_write_position(
        &m,
        m.root(),
        "sys/fs/resctrl/**",
        &["--apply", &cfg, "--remove"],
        || crate::crash::tree(&m),
        || {
            m.pqos(&["--apply", &cfg]).ok();
        },
    );
    assert_eq!(
        n, 5,
        "2 schemata (L3, then MB, each one write for both domains), one cpus_list, tasks, rmdir"
    );
}

#[test]
fn a_named_group_holding_another_tools_monitor_group_is_kept_by_reset_and_refused_by_remove() {
    let m = MountedOs::new(SKX_RDT);
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = file(
        &dir,
        "c.toml",
        "[[class]]\nname = \"web\"\nl3 = { ways = 4 }\ncpus = \"2-3\"\n",
    );
    m.pqos(&["--apply", &cfg]).ok();
    // an agent watches part of the class with a monitor group of its own
    m.mkdir("web/mon_groups/agent");
    let refused = m.pqos(&["--apply", &cfg, "--remove"]).failed();
    assert!(
        refused
            .stderr
            .contains("holds monitor groups web/mon_groups/agent: stop them first"),
        "{}",
        refused.stderr
    );
    assert!(m.exists("web/mon_groups/agent") && m.read("web/cpus_list") == "2-3\n");
    // -R resets the class and empties it, but removes neither group
    let reset = m.pqos(&["-R"]).ok();
    assert_eq!(reset.stdout, "Allocation reset successful\n");
    assert!(
        reset
            .warnings
            .contains("named class web is kept (reset, empty): its resctrl group holds monitor groups web/mon_groups/agent"),
        "{}",
        reset.raw_stdout
    );
    assert!(m.exists("web/mon_groups/agent"));
    assert_eq!(m.read("web/cpus_list"), "\n");
    assert!(
        m.read("web/schemata").contains("L3:0=7ff;1=7ff"),
        "{}",
        m.read("web/schemata")
    );
    // once the agent is gone, the class can go
    std::fs::remove_dir(m.resctrl("web/mon_groups/agent")).expect("rmdir");
    let removed = m.pqos(&["--apply", &cfg, "--remove"]).ok();
    assert!(
        removed
            .stdout
            .ends_with("web (COS1): named class removed\nApplied 1 write(s).\n"),
        "{}",
        removed.stdout
    );
    assert!(!m.exists("web"));
}

/// Fifteen classes with one way and one CPU each: every class of service but COS0 of a
/// 16-class platform.
fn fifteen_classes() -> String {
    use std::fmt::Write as _;
    (0..15).fold(String::new(), |mut text, i| {
        let _ = write!(
            text,
            "[[class]]\nname = \"c{i}\"\nl3 = {{ ways = 1 }}\ncpus = \"{}\"\n\n",
            i + 1
        );
        text
    })
}

/// `-R` gives up every name of the record, also those this process did not take as names
/// (a second name of one class, a class beyond the class count: a damaged or older
/// record), so that they cannot hold a class of service afterwards.
#[test]
fn msr_reset_releases_every_recorded_name_and_frees_every_class() {
    let sim = Sim::new("broadwell-ep");
    let dir = tempfile::tempdir().expect("tempdir");
    let one = file(
        &dir,
        "one.toml",
        "[[class]]\nname = \"old\"\nl3 = { ways = 1 }\ncpus = \"1\"\n",
    );
    sim.pqos(&["--apply", &one]).ok();
    let record = sim_run_dir(&sim).join("msr-classes");
    let text = std::fs::read_to_string(&record).expect("the record");
    assert!(text.ends_with("\n1 old\n"), "{text}");
    // --remove gives the class up, with another name of it
    std::fs::write(&record, format!("{text}1 older\n")).expect("write the record");
    sim.pqos(&["--apply", &one, "--remove"]).ok();
    assert_eq!(
        run_files(&sim_run_dir(&sim)),
        Vec::<String>::new(),
        "no name is left"
    );
    sim.pqos(&["--apply", &one]).ok();
    // another name of COS1 and a class this platform does not have
    std::fs::write(&record, format!("{text}1 older\n99 far\n")).expect("write the record");
    let reset = sim.pqos(&["-R"]).ok();
    assert!(
        reset
            .stderr
            .contains("NOTE: named classes removed: old (COS1)\n"),
        "{}",
        reset.stderr
    );
    assert_eq!(
        run_files(&sim_run_dir(&sim)),
        Vec::<String>::new(),
        "no name is left"
    );
    // every class but COS0 is free for fifteen new names
    let all = file(&dir, "fifteen.toml", &fifteen_classes());
    let run = sim.pqos(&["--apply", &all]).ok();
    assert!(
        run.stdout.contains("c14 (COS15): new named class\n"),
        "{}",
        run.stdout
    );
}

//! The run directory as an attacker and a hurried user meet it. Another local user plants a
//! run directory (or a symlink in its place, or symlinks at every run file's name) where
//! root's `pqos --sim` keeps one, next to a state file in a shared directory: root refuses
//! it, naming it, and never writes through what was planted. And one platform reached under
//! several spellings of `--sysroot` has one journal: a run killed under one spelling is
//! rolled back by the next run under another, and a later committed change is never undone.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::mounted::{Mounted, MountedOs};
use crate::util::{Machine, PQOS, Run};

/// Runs `script` with `sh -c` as `nobody` (uid and gid 65534, no supplementary groups).
fn as_nobody(script: &str) {
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(script)
        .output()
        .expect("setpriv");
    assert!(
        out.status.success(),
        "as nobody: {script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A directory everyone may write to, sticky as `/tmp` is, in a directory everyone may
/// enter; and a root-only 0600 file the attacker wants overwritten.
struct Shared {
    _top: tempfile::TempDir,
    dir: PathBuf,
    victim: PathBuf,
}

impl Shared {
    fn new() -> Self {
        let top = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755))
            .expect("file system");
        let shared = top.path().join("shared");
        std::fs::create_dir(&shared).expect("file system");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777))
            .expect("file system");
        let victim = top.path().join("victim");
        std::fs::write(&victim, "root's secret\n").expect("file system");
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600))
            .expect("file system");
        Self {
            _top: top,
            dir: shared,
            victim,
        }
    }

    fn victim_unchanged(&self) {
        assert_eq!(
            std::fs::read_to_string(&self.victim).expect("file system"),
            "root's secret\n"
        );
        let meta = std::fs::metadata(&self.victim).expect("file system");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
}

/// `pqos --sim=broadwell-ep --sim-state STATE ARGS`.
fn sim_pqos(state: &Path, args: &[&str]) -> Run {
    Command::new(PQOS)
        .arg("--sim=broadwell-ep")
        .arg("--sim-state")
        .arg(state)
        .args(args)
        .env_remove("RDT_IFACE")
        .output()
        .expect("run pqos")
        .into()
}

/// Every file name a run directory of the MSR interface holds, for pids around this one.
fn run_file_names() -> Vec<String> {
    let mut names: Vec<String> = ["msr.lock", "msr-classes", "os-classes", ".msr-classes.tmp"]
        .map(String::from)
        .into();
    let me = std::process::id();
    for pid in me..me + 200 {
        names.push(format!("txn-msr-{pid}"));
        names.push(format!(".txn-msr-{pid}.tmp"));
        names.push(format!(".msr-classes.{pid}.tmp"));
        names.push(format!("claims-{pid}"));
    }
    names
}

#[test]
fn a_run_dir_another_user_planted_next_to_the_state_is_refused_and_nothing_written_through_it() {
    let s = Shared::new();
    let state = s.dir.join("state.json");
    let run = s.dir.join("state.json.run");
    let config = s.dir.join("classes.toml");
    std::fs::write(
        &config,
        "[[class]]\nname = \"web\"\nl3 = { ways = 4 }\ncpus = \"2-3\"\n",
    )
    .expect("file system");
    // the attacker's directory, full of links to the victim
    let links: Vec<String> = run_file_names()
        .iter()
        .map(|n| format!("ln -s {} {}/{n}", s.victim.display(), run.display()))
        .collect();
    let links = links.join("; ");
    as_nobody(&format!("mkdir -m 0777 {} && {links}", run.display()));
    for args in [
        &["-e", "llc:1=0xf"][..],
        &["-a", "llc:1=2"],
        &["--apply", config.to_str().expect("file system")],
        &["-R"],
    ] {
        let r = sim_pqos(&state, args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        assert!(
            r.stderr
                .contains(&format!("run directory {}", run.display()))
                && r.stderr.contains("owned by uid 65534"),
            "{args:?}: {}",
            r.stderr
        );
        s.victim_unchanged();
    }
    // the attacker's directory holds only what they put there
    let mut owners: Vec<u32> = std::fs::read_dir(&run)
        .expect("file system")
        .map(|e| {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(e.expect("file system").path())
                .expect("file system")
                .uid()
        })
        .collect();
    owners.dedup();
    assert_eq!(owners, [65534]);
}

#[test]
fn a_symlink_in_place_of_the_run_dir_is_refused_and_its_target_stays_empty() {
    let s = Shared::new();
    let state = s.dir.join("state.json");
    let run = s.dir.join("state.json.run");
    let theirs = s.dir.join("theirs");
    as_nobody(&format!(
        "mkdir -m 0777 {t} && ln -s {t} {r}",
        t = theirs.display(),
        r = run.display()
    ));
    let r = sim_pqos(&state, &["-e", "llc:1=0xf"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("a symbolic link"), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(&theirs).expect("file system").count(), 0);
    // without the attacker, the same command works, and its run directory is root's, 0700
    std::fs::remove_file(&run).expect("file system");
    sim_pqos(&state, &["-e", "llc:1=0xf"]).ok();
    if let Ok(meta) = std::fs::symlink_metadata(&run) {
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    }
}

/// A mounted platform whose run directory someone else owns (a loosened `/run/rdt`): every
/// program that writes through it refuses, naming it.
#[test]
fn pqos_and_rdtset_refuse_a_sysroot_run_dir_of_another_user() {
    let m = Mounted::new("broadwell-ep");
    let s = Shared::new();
    let run = rdt_pqos::Paths::under(m.root()).run;
    std::fs::create_dir_all(&run).expect("file system");
    for n in ["msr.lock", "msr-classes", "os-classes"] {
        let _ = std::fs::remove_file(run.join(n));
        std::os::unix::fs::symlink(&s.victim, run.join(n)).expect("file system");
    }
    std::os::unix::fs::chown(&run, Some(65534), Some(65534)).expect("file system");
    let r = m.pqos(&["-e", "llc:1=0xf"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("owned by uid 65534"), "{}", r.stderr);
    let rdtset = Command::new(env!("CARGO_BIN_EXE_rdtset"))
        .args(["-t", "l3=0x3;cpu=1", "-c", "1", "true"])
        .env("RDT_SYSROOT", m.root())
        .env("RDT_IFACE", "MSR")
        .output()
        .expect("file system");
    assert!(!rdtset.status.success());
    assert!(
        String::from_utf8_lossy(&rdtset.stderr).contains("owned by uid 65534"),
        "{}",
        String::from_utf8_lossy(&rdtset.stderr)
    );
    s.victim_unchanged();
    std::fs::remove_dir_all(&run).expect("file system");
}

/// The journals (`txn-*`) in the run directory of `root`.
fn journals(root: &Path) -> usize {
    std::fs::read_dir(rdt_pqos::Paths::under(root).run).map_or(0, |rd| {
        rd.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("txn-"))
            .count()
    })
}

/// `pqos --iface=IFACE --sysroot SPELLING ARGS` run from `cwd`.
fn spelled(iface: &str, spelling: &Path, cwd: &Path, args: &[&str]) -> Run {
    Command::new(PQOS)
        .arg(format!("--iface={iface}"))
        .arg("--sysroot")
        .arg(spelling)
        .args(args)
        .current_dir(cwd)
        .env_remove("RDT_IFACE")
        .env_remove("RDT_SYSROOT")
        .output()
        .expect("run pqos")
        .into()
}

/// Kills `-e` under the first spelling at its second write; the next run under another
/// spelling rolls it back; a change committed then stays under the first spelling.
fn one_journal_for_every_spelling(
    iface: &str,
    root: &Path,
    target: &str,
    show: impl Fn() -> String,
) {
    let parent = root.parent().expect("a mount point has a parent");
    let name = root.file_name().expect("a name");
    let link_dir = tempfile::tempdir().expect("file system");
    let link = link_dir.path().join("platform");
    std::os::unix::fs::symlink(root, &link).expect("file system");
    let spellings: [(PathBuf, &Path); 3] = [
        (PathBuf::from(name), parent),           // relative
        (root.join("./dev/.."), Path::new("/")), // absolute, with . and ..
        (link.clone(), Path::new("/")),          // through a symlink
    ];
    let masks = ["llc:3=0xf0", "llc:3=0x30", "llc:3=0x1c0"];
    for (i, (first, cwd)) in spellings.iter().enumerate() {
        let before = show();
        let (second, cwd2) = &spellings[(i + 1) % spellings.len()];
        std::fs::write(
            root.join(".sim/fail"),
            format!("clear\nmodify {target} nth=2 signal=KILL\n"),
        )
        .expect("file system");
        let killed = spelled(iface, first, cwd, &["-e", "llc:1=0x3;llc:2=0xc"]);
        assert_eq!(killed.code, -1, "killed at its second write: {killed:?}");
        std::fs::write(root.join(".sim/fail"), "clear\n").expect("file system");
        assert_eq!(journals(root), 1, "its journal stays");
        let s = spelled(iface, second, cwd2, &["-s"]).ok();
        assert!(
            s.warnings.contains("rolled back"),
            "{} after a kill under {}: {}",
            second.display(),
            first.display(),
            s.raw_stdout
        );
        assert_eq!(show(), before, "rolled back under another spelling");
        // a change committed under the second spelling is not undone under the first
        spelled(iface, second, cwd2, &["-e", masks[i]]).ok();
        let committed = show();
        assert_ne!(committed, before);
        spelled(iface, first, cwd, &["-s"]).ok();
        assert_eq!(show(), committed, "a committed change stays");
        assert_eq!(journals(root), 0);
    }
}

#[test]
fn msr_one_platform_under_three_spellings_keeps_one_journal() {
    let m = Mounted::new("skylake-sp");
    let show = || m.pqos(&["-s"]).ok().stdout;
    one_journal_for_every_spelling("msr", m.root(), "dev/**", show);
}

#[test]
fn os_one_platform_under_three_spellings_keeps_one_journal() {
    let m = MountedOs::new(crate::util::SKX_RDT);
    let show = || {
        crate::crash::tree(&m)
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    one_journal_for_every_spelling("os", m.root(), "sys/fs/resctrl/**", show);
}

#[test]
fn a_sysroot_run_dir_goes_when_unused_and_named_classes_keep_it_0600() {
    let m = Mounted::new("broadwell-ep");
    let run = rdt_pqos::Paths::under(m.root()).run;
    m.pqos(&["-e", "llc:1=0xf", "-a", "llc:1=2"]).ok();
    assert!(!run.exists(), "nothing in use: {} removed", run.display());
    let dir = tempfile::tempdir().expect("file system");
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[[class]]\nname = \"web\"\nl3 = { ways = 4 }\n").expect("file system");
    m.pqos(&["--apply", config.to_str().expect("file system")])
        .ok();
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .expect("file system")
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode(&run), 0o700);
    assert_eq!(mode(&run.join("msr-classes")), 0o600);
    // the platform goes: the test mount takes its run directory (the record) with it
    drop(m);
    assert!(!run.exists(), "{}", run.display());
}

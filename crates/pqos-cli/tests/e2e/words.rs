//! What pqos says is what happened (issue 22, items 7 and 10).

use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::util::{Machine, Run, Sim};

/// The unprivileged user the tests drop to (they run as root).
const NOBODY: u32 = 65534;

/// `pqos ARGS...` on `sim` as `nobody` (supplementary groups cleared by `Command::uid`).
fn as_nobody(sim: &Sim, args: &[&str]) -> Run {
    let mut cmd = sim.command(args);
    cmd.uid(NOBODY).gid(NOBODY);
    cmd.output().expect("run pqos").into()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_change_the_sim_state_cannot_keep_is_not_reported_as_made() {
    // arrange: nobody's state, lock and run dir, in a directory nobody cannot write, so that
    // the state loads and the writes work but the save (a new file, then a rename) fails
    let sim = Sim::new("broadwell-ep");
    let dir = sim.state().parent().expect("a dir").to_owned();
    chown(&dir, Some(NOBODY), Some(NOBODY)).expect("chown");
    as_nobody(&sim, &["-e", "llc:1=0xff", "-a", "llc:1=3"]).ok();
    chown(&dir, Some(0), Some(0)).expect("chown");
    chmod(&dir, 0o755);
    let before = std::fs::read(sim.state()).expect("the state");
    // act
    let runs = [
        as_nobody(&sim, &["-e", "llc:1=0xf"]),
        as_nobody(&sim, &["-a", "llc:1=2"]),
        as_nobody(&sim, &["-R"]),
    ];
    // assert: each fails naming why, and its stdout claims no change
    for run in runs {
        let run = run.failed();
        assert!(
            run.stderr.contains("Permission denied") && run.stderr.contains("sim-state.json"),
            "{}",
            run.stderr
        );
        for claim in ["altered", "=> MASK", "successful"] {
            assert!(!run.stdout.contains(claim), "{claim}:\n{}", run.stdout);
        }
    }
    assert_eq!(std::fs::read(sim.state()).expect("the state"), before);
    // and where the state can be saved (nobody's directory again: one anyone may write to
    // is refused above a run directory), the same command says it altered the allocation
    chown(&dir, Some(NOBODY), Some(NOBODY)).expect("chown");
    let run = as_nobody(&sim, &["-e", "llc:1=0xf"]).ok();
    assert!(
        run.stdout.ends_with("Allocation configuration altered.\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_user_who_may_only_read_a_shared_sim_state_can_show_it() {
    // arrange: root's state (files 0644) in a directory others may enter but not write
    let sim = Sim::new("broadwell-ep");
    sim.pqos(&["-e", "llc:1=0xf0"]).ok();
    chmod(sim.state().parent().expect("a dir"), 0o755);
    let before = std::fs::read(sim.state()).expect("the state");
    // act
    let show = as_nobody(&sim, &["-s"]);
    let change = as_nobody(&sim, &["-e", "llc:1=0xf"]);
    // assert: the state is shown as root left it, and left as it was; a change is refused
    let show = show.ok();
    assert!(
        show.stdout.contains("    L3CA COS1 => MASK 0xf0\n"),
        "{}",
        show.stdout
    );
    let change = change.failed();
    assert!(
        change.stderr.contains("sim-state.json.lock")
            && change.stderr.contains("Permission denied"),
        "{}",
        change.stderr
    );
    assert_eq!(std::fs::read(sim.state()).expect("the state"), before);
}

#[test]
fn bidi_zero_width_and_control_characters_of_names_reach_the_terminal_escaped() {
    // arrange: a class name that reverses what follows it and hides a character, as a
    // hostile or careless file can give
    let sim = Sim::new("broadwell-ep");
    let file = sim.state().with_file_name("classes.toml");
    let name = "db\u{202e}txt.exe\u{200b}";
    std::fs::write(
        &file,
        format!("[[class]]\nname = \"{name}\"\nl3 = {{ ways = 2 }}\ncpus = \"3\"\n"),
    )
    .expect("write");
    let file = file.to_str().expect("UTF-8");
    // act
    let apply = sim.pqos(&["--apply", file]).ok();
    let show = sim.pqos(&["-s"]).ok();
    let reset = sim.pqos(&["-R"]).ok();
    // assert: the name as escapes wherever it is shown; no hiding character at all
    let escaped = "db\\u{202e}txt.exe\\u{200b}";
    assert!(
        apply.stdout.contains(&format!("{escaped} (COS1): ")),
        "{}",
        apply.stdout
    );
    assert!(
        show.stdout.contains(&format!("COS1 => {escaped}\n")),
        "{}",
        show.stdout
    );
    assert!(
        reset.stderr.contains(&format!("{escaped} (COS1)")),
        "{}",
        reset.stderr
    );
    for out in [
        &apply.raw_stdout,
        &show.raw_stdout,
        &reset.raw_stdout,
        &reset.stderr,
    ] {
        assert!(
            !out.contains('\u{202e}') && !out.contains('\u{200b}'),
            "{out:?}"
        );
    }
}

#[test]
fn a_platform_a_user_may_not_enter_is_permission_denied_not_missing() {
    // arrange: root's FUSE-mounted platform, which other users may not enter (EACCES)
    let mounted = crate::util::mounted::Mounted::new("broadwell-ep");
    let root = mounted.root().to_str().expect("UTF-8").to_owned();
    // act
    let runs: Vec<Run> = ["--iface=msr", "--iface=os"]
        .into_iter()
        .map(|iface| {
            let mut cmd = std::process::Command::new(crate::util::PQOS);
            cmd.args(["--sysroot", &root, iface, "-s"])
                .env_remove("RDT_IFACE")
                .uid(NOBODY)
                .gid(NOBODY);
            cmd.output().expect("run pqos").into()
        })
        .collect();
    // assert: the system's word and the path, on both interfaces
    for run in runs {
        let run = run.failed();
        assert!(
            run.stderr
                .contains(&format!("{root}/dev/cpu: permission denied")),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("no such file"), "{}", run.stderr);
    }
}

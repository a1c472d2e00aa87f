//! End-to-end runs of the built `pqos` binary for what the unit tests cannot reach: the
//! process's own argument list (`-f` expanded in place), `-H` answered before any platform
//! is opened, `-l` log files, `RDT_IFACE`, and real exit codes and streams.
//!
//! Platforms come from the in-process simulator (`--sim`, a state file per test in a
//! temporary directory); nothing here needs RDT hardware.

use std::path::Path;
use std::process::Command;

use crate::util::{NOTE_BANNER, PQOS, Run, sample};

fn pqos(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(PQOS);
    cmd.args(args)
        .env_remove("RDT_IFACE")
        .env_remove("RDT_SYSROOT")
        .env_remove("RUST_BACKTRACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run pqos").into()
}

/// `pqos --sim --sim-state DIR/state.json ARGS...`
fn sim(dir: &Path, args: &[&str]) -> Run {
    let state = dir.join("state.json");
    let state = state.to_string_lossy();
    let mut full = vec!["--sim", "--sim-state", &state];
    full.extend_from_slice(args);
    pqos(&full, &[])
}

fn l3ca_cos1_line(show: &str, socket_header: &str) -> String {
    let section = &show[show.find(socket_header).unwrap_or(0)..];
    section
        .lines()
        .find(|l| l.starts_with("    L3CA COS1 "))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn profile_list_needs_no_platform_and_exits_zero() {
    // arrange: this machine has no RDT (a VM), so anything opening a platform would fail
    // act
    let run = pqos(&["-H"], &[]);
    // assert
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with(
            "1)\n      Config ID: CFG0\n    Description: non-overlapping, ways equally divided\n \
             Configurations:\n\tnumber of classes = 4, number of cache ways = 11\n"
        ),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("4)\n      Config ID: CFG3\n"));
    assert_eq!(run.stdout.lines().count(), 36);
    assert!(run.stdout.ends_with("number of cache ways = 20\n"));
}

#[test]
fn profile_set_applies_the_table_for_the_platforms_ways() {
    let dir = tempfile::tempdir().unwrap();
    let run = sim(dir.path(), &["-c", "CFG3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // broadwell-ep: 20-bit CBM
    assert!(
        run.stdout.starts_with(
            "SOCKET 0 L3CA COS0 => MASK 0xfffff\nSOCKET 1 L3CA COS0 => MASK 0xfffff\n\
             SOCKET 0 L3CA COS1 => MASK 0xff000\n"
        ),
        "{}",
        run.stdout
    );
    let show = sim(dir.path(), &["-s"]).stdout;
    assert!(show.contains("    L3CA COS3 => MASK 0xc0000\n"), "{show}");
    let run = sim(dir.path(), &["-c", "nope"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("Allocation profile 'nope' not found or cache allocation not supported!"),
        "{}",
        run.stderr
    );
}

#[test]
fn config_file_runs_in_place_of_f() {
    // arrange: our own example file, in the form of pqos/configs/*.cfg
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("alloc.cfg");
    std::fs::write(
        &cfg,
        "# the seed paper's classes\n\nalloc-class-set: llc@0:1=0xff\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    // act: the file after a command-line -e for the same class wins, and before it loses
    let after = sim(dir.path(), &["-e", "llc@0:1=0xf", "-f", cfg]);
    let show_after = sim(dir.path(), &["-s"]).stdout;
    let before = sim(dir.path(), &["-f", cfg, "-e", "llc@0:1=0xf"]);
    let show_before = sim(dir.path(), &["-s"]).stdout;
    // assert
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert_eq!(
        after.stdout,
        "SOCKET 0 L3CA COS1 => MASK 0xf\nSOCKET 0 L3CA COS1 => MASK 0xff\n\
         Allocation configuration altered.\n"
    );
    assert_eq!(
        l3ca_cos1_line(&show_after, "Socket 0:"),
        "    L3CA COS1 => MASK 0xff"
    );
    assert_eq!(before.code, 0, "{}", before.stderr);
    assert_eq!(
        l3ca_cos1_line(&show_before, "Socket 0:"),
        "    L3CA COS1 => MASK 0xf"
    );
}

#[test]
fn config_file_show_key_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("show.cfg");
    std::fs::write(&good, "SHOW-ALLOC:\n").unwrap();
    let run = sim(dir.path(), &["-f", good.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("L3CA COS definitions for Socket 0:\n")
    );

    let bad = dir.path().join("bad.cfg");
    std::fs::write(&bad, "show-alloc:\nshow-everything: yes\n").unwrap();
    let run = sim(dir.path(), &["-f", bad.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "Error parsing \"show-everything: yes\" command line argument. Unrecognized configuration file command"
        ),
        "{}",
        run.stderr
    );

    let link = dir.path().join("link.cfg");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let run = sim(dir.path(), &["-f", link.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains(&format!("File {} is a symlink", link.display())),
        "{}",
        run.stderr
    );
    let run = sim(
        dir.path(),
        &["-f", good.to_str().unwrap(), "-f", good.to_str().unwrap()],
    );
    assert!(
        run.code == 1
            && run
                .stderr
                .contains("Only one config file argument is accepted!"),
        "{}",
        run.stderr
    );
}

#[test]
fn log_file_takes_the_log_records_and_refuses_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("pqos.log");
    std::fs::write(&log, "earlier run\n").unwrap();
    let run = sim(dir.path(), &["-v", "-l", log.to_str().unwrap(), "-s"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with("earlier run\nINFO: Requested interface: AUTO\n"),
        "{text}"
    );
    assert!(
        !run.stderr.contains("Requested interface"),
        "{}",
        run.stderr
    );
    // without -v, INFO records are not written
    let quiet = dir.path().join("quiet.log");
    sim(dir.path(), &["-l", quiet.to_str().unwrap(), "-s"]);
    assert_eq!(std::fs::read_to_string(&quiet).unwrap(), "");

    let link = dir.path().join("link.log");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    let run = sim(dir.path(), &["-l", link.to_str().unwrap(), "-s"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(&format!(
            "Error opening {} log file! (File {} is a symlink",
            link.display(),
            link.display()
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn interface_choices_and_rdt_iface() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id().to_string();
    let pid_item = format!("pid:1={me}");
    // pid: on the in-process simulator: its OS interface, served in-process
    let run = sim(dir.path(), &["-a", &pid_item]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "Allocation configuration altered.\n");
    // explicit msr with pid:
    let run = pqos(&["--iface=msr", "-a", &pid_item], &[]);
    assert!(
        run.stderr.contains(
            "Error: explicit interface 'msr' is not compatible with option '-a/--alloc-assoc (pid)' which requires 'os'."
        ),
        "{}",
        run.stderr
    );
    // RDT_IFACE restricts
    let run = pqos(&["--iface=msr", "-d"], &[("RDT_IFACE", "os")]);
    assert!(
        run.code == 1
            && run
                .stderr
                .contains("Your system has been restricted to use the OS interface only!"),
        "{}",
        run.stderr
    );
    let run = pqos(&["-d"], &[("RDT_IFACE", "bogus")]);
    assert!(
        run.stderr
            .contains("Invalid interface enforcement selection"),
        "{}",
        run.stderr
    );
}

#[test]
fn mba_max_on_the_msr_interface_gets_pqos_error() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.json");
    let run = pqos(
        &[
            "--sim=skylake-sp",
            "--sim-state",
            state.to_str().unwrap(),
            "-e",
            "mba_max:1=6000",
        ],
        &[],
    );
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        "MBA controller not supported!\nAllocation configuration error!\n"
    );
    assert!(
        run.stderr.contains("MBA controller not supported!"),
        "{}",
        run.stderr
    );
}

/// pqos v25.04 prints its `NOTE:` banner first on stdout whatever the command (pqos/main.c
/// `print_warning`), `-u json` aside (stderr then, stdout stays JSON).
#[test]
fn every_command_starts_stdout_with_pqos_banner() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["-d"][..],
        &["-D"],
        &["-s"],
        &["-e", "llc:1=0xf"],
        &["-a", "llc:1=1"],
        &["-R"],
        &["-H"],
        &["--version"],
        &["-e", "llc1=0xf"],
        &["--no-such-option"],
    ] {
        let run = sim(dir.path(), args);
        assert!(run.has_banner(), "{args:?}: {}", run.raw_stdout);
        assert_eq!(
            run.raw_stdout.matches("NOTE:  Mixed use").count(),
            1,
            "{args:?}"
        );
    }
    let json = sim(dir.path(), &["-d", "-u", "json"]).ok();
    assert!(json.raw_stdout.starts_with('{'), "{}", json.raw_stdout);
    assert!(json.stderr.contains("NOTE:  Mixed use"), "{}", json.stderr);
}

/// A refused `-e`/`-a` gets pqos's stdout lines (which scripts grep for) and its exit code,
/// with this tool's explanation on stderr.
#[test]
fn refused_allocations_print_pqos_lines_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    for (args, stdout) in [
        (
            ["-e", "llc1=0xf"],
            "Unrecognized allocation format: llc1=0xf\nAllocation configuration error!\n",
        ),
        (
            ["-e", "mba:1=0"],
            "Failed to set MBA configuration!\nAllocation configuration error!\n",
        ),
        (
            ["-e", "llc:99=0xf"],
            "Invalid class ID: 99!\nAllocation configuration error!\n",
        ),
        (
            ["-a", "llc:99=1"],
            "Core number or class id is out of bounds!\nAllocation association error!\n",
        ),
    ] {
        let run = sim(dir.path(), &args);
        assert_eq!(run.code, 1, "{args:?}");
        assert_eq!(run.stdout, stdout, "{args:?}");
        assert!(run.stderr.contains("error: "), "{args:?}: {}", run.stderr);
    }
}

/// `-v` (pqos `lib/cap.c` `discover_capabilities`, `lib/hw_cap.c`): the detection details on
/// stdout after the banner and before the report, as pqos's library logs them. Issue 150's
/// machine is a Skylake-SP Xeon Gold with the `skylake-sp` model's 24.75 MiB, 11-way L3 and
/// MBA, on the MSR interface, so its lines are ours byte for byte and in order, the probe
/// line `CPUID 0x10.0: L2 CAT not supported!` included.
#[test]
fn verbose_detection_lines_are_pqos_lines_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let run = sim_model(dir.path(), "skylake-sp", &["-s", "-v"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = run
        .raw_stdout
        .strip_prefix(NOTE_BANNER)
        .expect("the banner first");
    let info: Vec<&str> = body
        .lines()
        .take_while(|l| l.starts_with("INFO: "))
        .collect();
    let report = &body[info.iter().map(|l| l.len() + 1).sum::<usize>()..];
    assert!(
        report.starts_with("L3CA/MBA COS definitions for Socket 0:\n"),
        "the report after the log lines: {report}"
    );
    let real = sample("intel_pqos-sv_info_issue150.txt");
    let mut ours = info.iter();
    for line in real.lines().filter(|l| l.starts_with("INFO: ")) {
        assert!(
            ours.any(|o| o == &line),
            "{line:?} missing (or out of order) in {info:#?}"
        );
    }
    assert!(!run.stderr.contains("INFO: Selected"), "{}", run.stderr);
    // -u json: stdout stays JSON, the log lines go to stderr
    let json = sim_model(dir.path(), "skylake-sp", &["-s", "-v", "-u", "json"]);
    serde_json::from_str::<serde_json::Value>(&json.raw_stdout).expect("pure JSON");
    assert!(
        json.stderr
            .contains("INFO: MBA details: #COS=8, linear, max=90, step=10")
    );
}

/// `-v` on the OS interface of the `sapphire-rapids` model logs what a real pqos logs on a
/// Sapphire Rapids with resctrl mounted without `mba_MBps`
/// (tests/data/pqos/intel_pqos-v_os_spr_2024.txt): from `Selected interface: OS` to `OS
/// support for MBA CTRL unknown`, the `CACHE:` lines, the second `resctrl detected` and
/// `#COS=8` for every resource included, one contiguous block.
#[test]
fn verbose_os_initialisation_is_a_real_pqos_log_on_sapphire_rapids() {
    let dir = tempfile::tempdir().unwrap();
    let run = sim_model(dir.path(), "sapphire-rapids", &["-I", "-d", "-v"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let real = sample("intel_pqos-v_os_spr_2024.txt");
    let want: Vec<&str> = real
        .lines()
        .skip_while(|l| *l != "INFO: Selected interface: OS")
        .take_while(|l| l.starts_with("INFO: "))
        .collect();
    assert_eq!(want.len(), 18, "{want:#?}");
    let ours: Vec<&str> = run.raw_stdout.lines().collect();
    assert!(
        ours.windows(want.len()).any(|w| w == want.as_slice()),
        "{want:#?} not in {ours:#?}"
    );
}

fn sim_model(dir: &Path, model: &str, args: &[&str]) -> Run {
    let state = dir.join(format!("{model}.json"));
    let state = state.to_string_lossy();
    let mut full = vec!["--sim", model, "--sim-state", &state];
    full.extend_from_slice(args);
    pqos(&full, &[])
}

/// A full stdout is an error that names it, for a report and for monitoring (they failed
/// with the errno alone: "No space left on device").
#[test]
fn a_full_stdout_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    for args in [&["-s"][..], &["-m", "llc:0", "-t", "1"][..]] {
        let out = Command::new(PQOS)
            .args(["--sim", "--sim-state", state.to_str().unwrap()])
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
            .output()
            .expect("run pqos");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: writing to stdout: "),
            "{args:?}: {stderr}"
        );
    }
}

/// pqos/monitor.c on the OS interface: more RMID groups than resctrl's `num_rmids` - 1 are
/// refused before any group is made (genoa: 384 cores, 256 RMIDs); one bracketed group of
/// every core fits.
#[test]
fn more_monitoring_groups_than_rmids_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let run = sim_model(dir.path(), "genoa", &["-I", "-m", "all:0-383", "-t", "1"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains(
            "Too many monitoring groups selected. Requested 384 groups, but only 255 are available"
        ),
        "{}",
        run.stderr
    );
    let one = sim_model(dir.path(), "genoa", &["-I", "-m", "all:[0-383]", "-t", "1"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert!(one.stdout.contains("   0-383 "), "{}", one.stdout);
}

//! A monitoring agent's flow (Telegraf's `intel_rdt` input) on the simulated platform: the
//! agent's exact command, run in the background, stopped with SIGINT, its CSV parsed as the
//! agent parses it. In-process (`--sim`, the OS interface served without a mount) and
//! mounted (`RDT_SYSROOT=DIR`, IPC and misses from `.sim/pmu` since this host has no PMU),
//! for cores and for a busy process. Each run lasts about 3 s.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rdt_sim::fs::testing::TestMount;

use crate::util::{Machine, PQOS, Reaped, SKX_RDT, Sim};

/// The agent's command (Telegraf `intel_rdt`): reset, OS interface, CSV, 1 s interval.
fn agent_args(group: &str) -> Vec<String> {
    vec![
        "-r".into(),
        "--iface-os".into(),
        "--mon-file-type=csv".into(),
        "--mon-interval=10".into(),
        group.into(),
    ]
}

/// The two groups the agent monitors: cores 0-3, or the busy process.
fn groups(busy: u32) -> [String; 2] {
    [
        "--mon-core=all:[0,1,2,3];mbt:[0,1,2,3];".to_owned(),
        format!("--mon-pid=all:[{busy}];mbt:[{busy}];"),
    ]
}

/// A process that keeps a CPU busy.
fn busy() -> Reaped {
    Reaped(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn a busy shell"),
    )
}

/// Lets `child` run for `secs`, stops it with SIGINT and returns its stdout.
fn stop_after(child: Child, secs: f64) -> String {
    std::thread::sleep(Duration::from_secs_f64(secs));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Checks the CSV as the agent reads it: the lines after the header (pqos's preamble and
/// the `Time,...` line skipped) have at least 8 fields, the last six numbers; returns the
/// IPC (the first of the last six) of the last line.
#[track_caller]
fn check_csv(stdout: &str) -> f64 {
    let header = stdout
        .lines()
        .position(|l| l.starts_with("Time,"))
        .unwrap_or_else(|| panic!("no CSV header in\n{stdout}"));
    let data: Vec<&str> = stdout.lines().skip(header + 1).collect();
    assert!(data.len() >= 2, "at least two samples:\n{stdout}");
    let mut ipc = 0.0;
    for line in &data {
        let fields: Vec<&str> = line.split(',').collect();
        assert!(fields.len() >= 8, "{line:?} in\n{stdout}");
        let last6: Vec<f64> = fields[fields.len() - 6..]
            .iter()
            .map(|f| {
                f.parse()
                    .unwrap_or_else(|_| panic!("{f:?} of {line:?} in\n{stdout}"))
            })
            .collect();
        ipc = last6[0];
    }
    ipc
}

#[test]
fn the_agent_command_parses_on_the_in_process_simulated_platform() {
    // arrange
    let sim = Sim::new(SKX_RDT);
    let proc = busy();
    for group in groups(proc.pid()) {
        // act
        let child = sim
            .command(
                &agent_args(&group)
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pqos");
        let stdout = stop_after(child, 2.6);
        // assert
        let ipc = check_csv(&stdout);
        assert!(ipc > 0.0, "{group}: IPC {ipc} in\n{stdout}");
    }
    // the groups went with the run; the in-process resctrl stayed mounted
    let s = sim.pqos(&["-I", "-s"]).ok().stdout;
    assert!(s.contains("L3CA COS0 => MASK"), "{s}");
}

#[test]
fn the_agent_command_parses_on_the_mounted_simulated_platform() {
    // arrange
    let mount = TestMount::builtin(SKX_RDT);
    let proc = busy();
    for group in groups(proc.pid()) {
        // act
        let child = Command::new(PQOS)
            .args(agent_args(&group))
            .env("RDT_SYSROOT", mount.root())
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pqos");
        let stdout = stop_after(child, 2.6);
        // assert
        let ipc = check_csv(&stdout);
        assert!(ipc > 0.0, "{group}: IPC {ipc} in\n{stdout}");
    }
    let left = std::fs::read_dir(mount.path("sys/fs/resctrl/mon_groups"))
        .expect("mon_groups")
        .count();
    assert_eq!(left, 0, "no monitor group left");
}

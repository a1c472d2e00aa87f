//! `rdtset` on a mounted simulated platform: the command starts inside its class with its
//! CPU affinity, its exit status is rdtset's, SIGINT reaches it, and the class is given back
//! (its resctrl group gone, its CPUs on COS0) when it ends, or at the next open when rdtset
//! is killed.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use rdt_sim::fs::testing::TestMount;

use crate::util::{PQOS, SKX_RDT};

const RDTSET: &str = env!("CARGO_BIN_EXE_rdtset");

fn rdtset(mount: &TestMount, args: &[&str]) -> Command {
    let mut cmd = Command::new(RDTSET);
    cmd.args(args)
        .env("RDT_SYSROOT", mount.root())
        .env_remove("RUST_BACKTRACE")
        .env_remove("RDT_IFACE");
    cmd
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The control groups under the mount's resctrl root.
fn groups(mount: &TestMount) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(mount.path("sys/fs/resctrl"))
        .expect("resctrl")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("schemata").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn the_command_starts_in_its_class_with_its_affinity_and_its_exit_status_is_returned() {
    // arrange: skylake-sp; the script reports where it runs, then exits 7
    let mount = TestMount::builtin(SKX_RDT);
    let resctrl = mount.path("sys/fs/resctrl");
    let script = format!(
        "for f in {}/*/tasks; do grep -qx $$ $f && echo group=$f; done; \
         grep Cpus_allowed_list /proc/self/status; exit 7",
        resctrl.display()
    );
    // act
    let out = rdtset(
        &mount,
        &["-I", "-t", "l3=0xf;mba=50", "-c", "1", "sh", "-c", &script],
    )
    .output()
    .expect("rdtset");
    // assert: the shell itself (the exec'd child) was in the class before it ran
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    let group = stdout
        .lines()
        .find_map(|l| l.strip_prefix("group="))
        .unwrap_or_else(|| panic!("not in a group: {}", text(&out)));
    assert!(
        group.ends_with("/COS7/tasks"),
        "the highest free class of 8: {group}"
    );
    assert!(stdout.contains("Cpus_allowed_list:\t1\n"), "{}", text(&out));
    // the class was given back: its group is gone
    assert!(groups(&mount).is_empty(), "{:?}", groups(&mount));
}

#[test]
fn sigint_reaches_the_command_and_the_class_is_given_back() {
    let mount = TestMount::builtin(SKX_RDT);
    let child = rdtset(&mount, &["-I", "-t", "l3=0x3", "sleep", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rdtset");
    let start = std::time::Instant::now();
    while groups(&mount).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "no class taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(groups(&mount), ["COS7"]);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let out = child.wait_with_output().expect("wait");
    // sleep died of SIGINT: 128 + 2
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(groups(&mount).is_empty(), "{:?}", groups(&mount));
}

/// `rdtset --iface msr -t FEATURES -c 1` running `pqos -s`'s line of core 1 (CPU 1: the
/// affinity is the host's, which has at least 2 CPUs).
fn core_1_in_a_class(mount: &TestMount, features: &str) -> Output {
    let script = format!("{PQOS} --iface=msr -s | grep '    Core 1,'");
    rdtset(
        mount,
        &[
            "--iface", "msr", "-t", features, "-c", "1", "sh", "-c", &script,
        ],
    )
    .output()
    .expect("rdtset")
}

/// sapphire-rapids has 15 L3 classes but 8 of L2 and MBA: a class of all three is COS7, the
/// highest every one of them has, as pqos's rdtset picks (it was COS14, out of L2's range).
#[test]
fn a_class_of_l2_l3_and_mba_is_the_highest_all_three_have() {
    let mount = TestMount::builtin("sapphire-rapids");
    let out = core_1_in_a_class(&mount, "l2=0xf;l3=0xf;mba=50;cpu=1");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("=> COS7"),
        "{}",
        text(&out)
    );
}

#[test]
fn on_the_msr_interface_the_class_holds_the_cpus_while_the_command_runs() {
    let mount = TestMount::builtin("broadwell-ep");
    let out = core_1_in_a_class(&mount, "l3=0xf;cpu=1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("=> COS15"), "{}", text(&out));
    let after = Command::new(PQOS)
        .args(["--iface=msr", "--sysroot"])
        .arg(mount.root())
        .arg("-s")
        .env_remove("RDT_IFACE")
        .output()
        .expect("pqos -s");
    let s = String::from_utf8_lossy(&after.stdout);
    assert!(
        s.contains("    L3CA COS15 => MASK 0xfffff"),
        "mask reset: {s}"
    );
    let core2 = s
        .lines()
        .find(|l| l.starts_with("    Core 2,"))
        .expect("core 2");
    assert!(core2.contains("=> COS0"), "{core2}");
    // without cpu= the MSR interface cannot hold a process
    let out = rdtset(&mount, &["--iface", "msr", "-t", "l3=0xf", "true"])
        .output()
        .expect("rdtset");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs the OS interface (-I)"),
        "{}",
        text(&out)
    );
}

#[test]
fn running_processes_join_a_class_that_stays() {
    let mount = TestMount::builtin(SKX_RDT);
    let sleeper = crate::util::Reaped::sleeper();
    let pid = sleeper.pid().to_string();
    let out = rdtset(&mount, &["-I", "-t", "l3=0xf0", "-p", &pid])
        .output()
        .expect("rdtset");
    assert!(out.status.success(), "{}", text(&out));
    let tasks = std::fs::read_to_string(mount.path("sys/fs/resctrl/COS7/tasks")).expect("tasks");
    assert!(tasks.lines().any(|l| l == pid), "{tasks}");
}

#[test]
fn reset_puts_the_cpus_back_in_cos0_before_a_new_class() {
    // arrange: CPUs 2-3 in COS1 (pqos -a, MSR interface)
    let mount = TestMount::builtin("broadwell-ep");
    let pqos = |args: &[&str]| {
        let out = Command::new(PQOS)
            .args(["--iface=msr", "--sysroot"])
            .arg(mount.root())
            .args(args)
            .env_remove("RDT_IFACE")
            .output()
            .expect("pqos");
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    pqos(&["-a", "llc:1=2-3"]);
    let core = |s: &str, n: u32| {
        s.lines()
            .find(|l| l.starts_with(&format!("    Core {n},")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(core(&pqos(&["-s"]), 3).contains("=> COS1"));
    let sleeper = crate::util::Reaped::sleeper();
    let pid = sleeper.pid().to_string();
    // act: -r alone resets; -t is optional with it
    let out = rdtset(&mount, &["--iface", "msr", "-r", "2-3", "-p", &pid])
        .output()
        .expect("rdtset");
    // assert
    assert!(out.status.success(), "{}", text(&out));
    let s = pqos(&["-s"]);
    assert!(
        core(&s, 2).contains("=> COS0") && core(&s, 3).contains("=> COS0"),
        "{s}"
    );
    // -r then a command, as rdtset's usage allows: the CPUs back in COS0 first, then the
    // command on its CPUs, in no class of its own; its exit status is rdtset's
    pqos(&["-a", "llc:1=2-3"]);
    let script = format!("{PQOS} --iface=msr -s | grep '    Core 2,'; exit 7");
    let out = rdtset(
        &mount,
        &[
            "--iface", "msr", "-r", "2-3", "-c", "1", "sh", "-c", &script,
        ],
    )
    .output()
    .expect("rdtset");
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("=> COS0"),
        "{}",
        text(&out)
    );
    // -I and --iface=os say the same; -I with msr contradicts
    let out = rdtset(&mount, &["-I", "--iface", "msr", "-r", "2", "-p", &pid])
        .output()
        .expect("rdtset");
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("contradict"),
        "{}",
        text(&out)
    );
}

/// rdtset.c `sudo_drop`: under sudo (SUDO_UID, SUDO_GID) the command runs as the user who ran
/// sudo, inside its class; `-k` keeps root.
#[test]
fn a_command_started_under_sudo_runs_as_its_user_unless_k() {
    let mount = TestMount::builtin("broadwell-ep");
    for (keep, want) in [(false, "65534 65534"), (true, "0 0")] {
        let mut args = vec!["-t", "l3=0xf;cpu=1", "-c", "1"];
        if keep {
            args.push("-k");
        }
        args.extend(["sh", "-c", "echo $(id -u) $(id -g)"]);
        let out = rdtset(&mount, &args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .output()
            .expect("rdtset");
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "-k {keep}"
        );
    }
}

/// Process groups killed when dropped: the commands of killed rdtset runs, left running.
struct Orphans(Vec<Pid>);

impl Drop for Orphans {
    fn drop(&mut self) {
        for &group in &self.0 {
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

/// SIGKILL cannot be caught: only the record of the class in the run directory tells the
/// next open to give it back. Without that, each run takes the next class down and the
/// eighth finds none free.
///
/// A run usually takes COS7 again, given back by its own open (or by the open of the killed
/// run's `rdtset --exec-in-class`, which then does not run the command). It may take one
/// below: the killed rdtset may have been forking its command, and until that child execs
/// it holds a copy of the record's locked descriptor, so the record counts as live a moment
/// longer; a later open gives that class back.
#[test]
fn rdtset_killed_with_sigkill_twenty_times_leaves_every_class_free() {
    // arrange: skylake-sp, 8 classes on the OS interface
    let mount = TestMount::builtin(SKX_RDT);
    let mut orphans = Orphans(Vec::new());
    let start = Instant::now();
    let mut taken = Vec::new();
    for run in 1..=20 {
        // act: rdtset holds its class, its command runs (or is about to); SIGKILL
        let mut child = rdtset(&mount, &["-I", "-v", "-t", "l3=0x3", "sleep", "30"])
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rdtset");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        orphans.0.push(pid);
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut lines = Vec::new();
        for line in stderr.lines().map_while(Result::ok) {
            let took = line.starts_with("rdtset: took");
            lines.push(line);
            if took {
                break;
            }
        }
        kill(pid, Signal::SIGKILL).expect("SIGKILL");
        let _ = child.wait();
        // assert: every run finds a free class
        let class = lines
            .last()
            .and_then(|l| l.strip_prefix("rdtset: took COS"))
            .and_then(|l| l.strip_suffix(" for CPUs ``"))
            .unwrap_or_else(|| panic!("run {run} took no class: {lines:?} (took {taken:?})"));
        taken.push(class.parse::<u32>().expect("class"));
    }
    // act: the next open (pqos) gives the last one back (again if the last rdtset was
    // still forking its command: see above)
    let mut out;
    loop {
        out = Command::new(PQOS)
            .args(["-I", "--sysroot"])
            .arg(mount.root())
            .arg("-s")
            .env_remove("RDT_IFACE")
            .output()
            .expect("pqos -s");
        if groups(&mount).is_empty() || start.elapsed() > Duration::from_secs(8) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // assert: every class free: no control group left, every mask all ways
    assert!(out.status.success(), "{}", text(&out));
    assert!(groups(&mount).is_empty(), "{:?}", groups(&mount));
    let s = String::from_utf8_lossy(&out.stdout);
    let masks: Vec<&str> = s.lines().filter(|l| l.contains("L3CA COS")).collect();
    assert_eq!(masks.len(), 8 * 2, "8 classes on 2 sockets: {s}");
    assert!(masks.iter().all(|l| l.ends_with("MASK 0x7ff")), "{s}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

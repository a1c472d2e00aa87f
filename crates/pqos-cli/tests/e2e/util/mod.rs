//! Running the built `pqos` binary ([`PQOS`]).

pub mod monitor;
pub mod mounted;

use std::path::PathBuf;

/// `skylake-sp` booted with the kernel parameter `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the
/// kernel's Skylake-SP quirk (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl
/// on the stock model; tests of those features on resctrl boot with it.
pub const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";
use std::process::{Child, Command, Output, Stdio};

/// The `pqos` binary of this package, built by Cargo for its integration tests.
pub const PQOS: &str = env!("CARGO_BIN_EXE_pqos");

/// Where the real pqos samples are kept (this crate's test data, provenance in its
/// SOURCES.md).
const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pqos");

/// A real pqos sample's text.
pub fn sample(name: &str) -> String {
    let path = std::path::Path::new(SAMPLES).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A simulated machine: a built-in model and a private state file in a temp dir.
pub struct Sim {
    model: String,
    dir: tempfile::TempDir,
}

/// pqos v25.04's two-line banner, first on stdout for every command (pqos/main.c
/// `print_warning`).
pub const NOTE_BANNER: &str = "NOTE:  Mixed use of MSR and kernel interfaces to manage\n       CAT or CMT & MBM may lead to unexpected behavior.\n";

/// What one `pqos` run printed.
#[derive(Debug)]
pub struct Run {
    /// The report: stdout after [`NOTE_BANNER`] and the `WARN:` lines that follow it.
    pub stdout: String,
    /// The `WARN:` lines between the banner and the report (pqos's library logs to stdout).
    pub warnings: String,
    /// stdout as printed.
    pub raw_stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Run {
    /// Panics with the whole output unless the exit code was 0.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "pqos failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Panics with the whole output unless the run failed.
    #[track_caller]
    pub fn failed(self) -> Self {
        assert_ne!(
            self.code, 0,
            "pqos succeeded\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Run {
    /// Whether stdout starts with pqos's banner.
    pub fn has_banner(&self) -> bool {
        self.raw_stdout.starts_with(NOTE_BANNER)
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        let raw_stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut rest = raw_stdout.strip_prefix(NOTE_BANNER).unwrap_or(&raw_stdout);
        let mut warnings = String::new();
        while rest.starts_with("WARN: ") {
            let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
            warnings.push_str(&rest[..end]);
            rest = &rest[end..];
        }
        Self {
            stdout: rest.to_owned(),
            warnings,
            raw_stdout,
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            code: o.status.code().unwrap_or(-1),
        }
    }
}

impl Sim {
    /// A fresh simulated platform of a built-in model.
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// The state file this machine persists in.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("sim-state.json")
    }
}

/// A platform `pqos` can be pointed at: a built-in model through `--sim` ([`Sim`]), or the same
/// model FUSE-mounted and reached through `--iface=msr --sysroot` ([`mounted::Mounted`]).
/// The scenarios of `paper.rs` and `alloc.rs` are written once against this and run on both.
pub trait Machine {
    /// `pqos` with the flags that select this machine, then `args`.
    fn command(&self, args: &[&str]) -> Command;

    /// What a monitoring run adds so that its samples follow the machine's clock: the sim
    /// steps a virtual one (`--sim-virtual-clock`); the mounted model follows the wall clock,
    /// so `-t 1` takes a second there and the scenarios assert relations, not exact numbers.
    fn monitor_args(&self) -> &'static [&'static str];

    /// Whether the IPC and MISSES columns are measured (the native path has no PMU source yet).
    fn has_pmu(&self) -> bool;

    /// Runs `pqos ARGS...` on this machine.
    fn pqos(&self, args: &[&str]) -> Run {
        self.command(args).output().expect("run pqos").into()
    }

    /// Runs the monitoring command `args` with [`Machine::monitor_args`] appended.
    fn monitor(&self, args: &[&str]) -> Run {
        let args: Vec<&str> = args.iter().chain(self.monitor_args()).copied().collect();
        self.pqos(&args)
    }

    /// Starts `pqos ARGS...` in the background, output captured.
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pqos")
    }
}

impl Machine for Sim {
    /// `pqos --sim=MODEL --sim-state STATE ARGS...`.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(PQOS);
        cmd.arg(format!("--sim={}", self.model))
            .arg("--sim-state")
            .arg(self.state())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE");
        cmd
    }

    fn monitor_args(&self) -> &'static [&'static str] {
        &["--sim-virtual-clock"]
    }

    fn has_pmu(&self) -> bool {
        true
    }
}

/// Asserts two texts are equal, printing both blocks whole when not.
#[macro_export]
macro_rules! eqnice {
    ($expected:expr, $got:expr) => {{
        let (expected, got): (&str, &str) = (&$expected, &$got);
        if expected != got {
            panic!("\n--- expected ---\n{expected}\n--- got ---\n{got}\n--- (end) ---\n");
        }
    }};
}

/// A child process killed and reaped when dropped, even when an assert fails.
pub struct Reaped(pub Child);

impl Reaped {
    /// `sleep 30`: a single-threaded process to associate and monitor.
    pub fn sleeper() -> Self {
        Self(
            Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("spawn sleep"),
        )
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Its thread ids, from `/proc/<pid>/task`, ascending.
    #[cfg(feature = "test-helpers")]
    pub fn threads(&self) -> Vec<u32> {
        let mut t: Vec<u32> = std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .expect("/proc/<pid>/task")
            .map(|e| {
                e.expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .parse()
                    .expect("tid")
            })
            .collect();
        t.sort_unstable();
        t
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! Running the built `pqos` binary.

pub mod monitor;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Path of the `pqos` binary of this workspace, building it once if needed.
///
/// Integration tests of the root package cannot use `CARGO_BIN_EXE_pqos` (the binary lives in
/// `crates/pqos-cli`), so the binary is found next to the test executable, as ripgrep's tests
/// do, and built with the same profile if it is missing.
pub fn pqos_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // target/<profile>/deps/integration-<hash> -> target/<profile>/pqos
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let bin = profile_dir.join("pqos");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "pqos-cli", "--bin", "pqos"])
            .args(if profile_dir.ends_with("release") {
                &["--release"][..]
            } else {
                &[]
            })
            .status()
            .expect("cargo build -p pqos-cli");
        assert!(status.success(), "building pqos failed");
        assert!(bin.exists(), "{} missing after build", bin.display());
        bin
    })
}

/// A simulated machine: a built-in model and a private state file in a temp dir.
pub struct Sim {
    model: String,
    dir: tempfile::TempDir,
}

/// What one `pqos` run printed.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
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

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Self {
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
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

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(pqos_bin());
        cmd.arg(format!("--sim={}", self.model))
            .arg("--sim-state")
            .arg(self.state())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE");
        cmd
    }

    /// Runs `pqos --sim=MODEL --sim-state STATE ARGS...`.
    pub fn pqos(&self, args: &[&str]) -> Run {
        self.command(args).output().expect("run pqos").into()
    }

    /// Starts the same in the background, output captured.
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn pqos")
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

//! The C side of the tests: the system C compiler, the built library, an install prefix.

#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::process::Command;

/// This crate's directory.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The target directory of this test build (`target/debug`): the test binary is in `deps/`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The cdylib cargo built with this test: `target/<profile>/deps/libpqos.so` (a cdylib's
/// name has no hash), which cargo copies up to `target/<profile>/` only when the library
/// itself is asked for (`cargo build`), not when it is built for the tests.
pub fn cdylib() -> PathBuf {
    let dir = target_dir();
    let built = [dir.join("deps/libpqos.so"), dir.join("libpqos.so")];
    built
        .iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{} is missing: cargo builds it with the tests of rdt-capi",
                built[0].display()
            )
        })
        .clone()
}

/// The system C compiler (`CC`, else `cc`).
pub fn cc() -> Command {
    Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
}

/// Runs `cmd`, panicking with its output when it fails; returns its stdout.
pub fn run(mut cmd: Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `tests/c/NAME`.
pub fn c_source(name: &str) -> PathBuf {
    crate_dir().join("tests/c").join(name)
}

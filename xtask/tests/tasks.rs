//! The built `xtask` binary as the README runs it (`cargo xtask man`, `cargo xtask
//! completions`): the files land where `--out` or `$CARGO_TARGET_DIR` says, and a bad
//! directory is an error naming it. (Having this test also makes `cargo test --workspace`
//! build the binary, which the README's commands run.)

use std::process::Command;

fn xtask() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
}

#[test]
fn man_and_completions_land_under_the_target_dir_or_out() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    let ok = xtask()
        .arg("man")
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap();
    assert!(ok.success());
    let page = std::fs::read_to_string(target.join("man/pqos.1")).unwrap();
    assert!(page.contains("\n.TH PQOS 1 "), "{page:.200}");
    assert!(target.join("man/rdtset.1").is_file());
    let out = dir.path().join("completions");
    let ok = xtask()
        .args(["completions", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(ok.success());
    for name in ["pqos.bash", "_pqos", "pqos.fish", "pqos.elv", "_pqos.ps1"] {
        assert!(out.join(name).is_file(), "{name}");
    }
}

#[test]
fn an_output_directory_that_cannot_be_made_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = xtask()
        .args(["man", "--out"])
        .arg(file.join("man"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: cannot create ") && stderr.contains("a-file/man"),
        "{stderr}"
    );
}

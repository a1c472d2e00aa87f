//! pqos's shell completions, one script per shell clap_complete knows.

use std::io;

use clap::ValueEnum;
use clap_complete::{Generator, Shell};

/// The name completions are registered for.
const BIN_NAME: &str = "pqos";

/// Each shell's script for `cmd`, with its conventional file name (`pqos.bash`, `_pqos` for
/// zsh, `pqos.fish`, `pqos.elv`, `_pqos.ps1`).
///
/// # Errors
/// When a generator fails to write (in practice never: the scripts are written to memory).
pub fn render_all(cmd: &clap::Command) -> io::Result<Vec<(String, Vec<u8>)>> {
    Shell::value_variants()
        .iter()
        .map(|&shell| Ok((shell.file_name(BIN_NAME), render(cmd, shell)?)))
        .collect()
}

/// The completion script of `shell` for `cmd`.
///
/// # Errors
/// As [`render_all`].
pub fn render(cmd: &clap::Command, shell: Shell) -> io::Result<Vec<u8>> {
    let mut cmd = cmd.clone().bin_name(BIN_NAME);
    cmd.build();
    let mut script = Vec::new();
    shell.try_generate(&cmd, &mut script)?;
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pqos_command;

    #[test]
    fn bash_script_offers_pqos_long_and_short_flags() {
        // act
        let script = String::from_utf8(render(&pqos_command(), Shell::Bash).unwrap()).unwrap();
        // assert
        for flag in [
            "--mon-core",
            "--alloc-class",
            "--iface",
            "--sysroot",
            "-m",
            "-e",
        ] {
            assert!(
                script.split_whitespace().any(|w| w == flag),
                "{flag} missing"
            );
        }
        assert!(script.contains("complete -F _pqos"), "{script}");
    }

    #[test]
    fn every_shell_gets_its_own_file() {
        let files = render_all(&pqos_command()).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        for name in ["pqos.bash", "_pqos", "pqos.fish", "pqos.elv", "_pqos.ps1"] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        for (name, text) in &files {
            let text = String::from_utf8_lossy(text);
            assert!(text.contains("mon-core"), "{name} lacks --mon-core");
        }
    }

    #[test]
    fn bash_script_is_valid_bash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pqos.bash");
        std::fs::write(&path, render(&pqos_command(), Shell::Bash).unwrap()).unwrap();
        match std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .output()
        {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                println!("skipped: bash is not installed ({e})");
            }
            Err(e) => panic!("cannot run bash: {e}"),
            Ok(out) => assert!(
                out.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

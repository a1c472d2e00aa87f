//! The workspace's own tasks, run as `cargo xtask TASK` (the alias is in `.cargo/config.toml`,
//! after the cargo-xtask convention):
//!
//! - `cargo xtask man [--out DIR]`: the man pages of pqos and rdtset, `DIR/pqos.1` and
//!   `DIR/rdtset.1` (default `target/man`).
//! - `cargo xtask completions [--out DIR]`: pqos's shell completions for bash, zsh, fish,
//!   elvish and PowerShell (default `target/completions`).
//! - `cargo xtask paper-figure [--check]`: the seed paper's experiment with the
//!   noisy-neighbour controller on the simulated platform: `target/paper/controller.csv` and
//!   the README's figure `docs/figures/paper-controller.svg` ([`paper`]).
//! - `cargo xtask scenarios [--family NAME]`: the controller's scenario suite (issue 32) on
//!   the simulated platform: each family with no controller, the oracle's best static
//!   allocation and the controller, its goals, `docs/figures/scenarios.md` and
//!   `docs/figures/scenarios.svg` ([`scenarios`]).
//! - `cargo xtask capi [--prefix DIR] [--debug]`: builds libpqos (crates/rdt-capi, release
//!   profile unless `--debug`) and installs `lib/libpqos.so.7` with its link `libpqos.so`,
//!   `lib/libpqos.a`, `include/pqos.h` and `lib/pkgconfig/libpqos.pc` under DIR (default
//!   `/usr/local`), so that `cc $(pkg-config --cflags --libs libpqos)` builds a libpqos
//!   program against it.
//!
//! Both are generated from the one clap definition of each command's flags,
//! [`pqos_cli::args::Args`] and [`pqos_cli::rdtset::RdtsetArgs`], which pqos-cli's library
//! target exposes to this crate; nothing here repeats a flag.
//!
//! Why a task and not a `build.rs` in pqos-cli: the page and the scripts are files to install,
//! not inputs of the build. A build script would compile clap_mangen and clap_complete into
//! every build of pqos and rerun whenever the flags change; it could not reach the flags
//! without compiling `args.rs` and its grammar (and so the `rdt` library) a second time as
//! build dependencies; and its output would land in `OUT_DIR`, a hash-named directory that
//! install instructions cannot name. The task runs only when asked and writes where it is told.

mod completions;
mod man;
mod paper;
mod scenarios;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

/// The workspace's tasks.
#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "The rdt workspace's tasks"
)]
enum Task {
    /// Write the man pages pqos.1 and rdtset.1 (roff), generated from their clap definitions.
    Man {
        /// The directory to write them in (created if missing) [default: target/man].
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Write pqos's shell completions: pqos.bash, _pqos (zsh), pqos.fish, pqos.elv,
    /// _pqos.ps1.
    Completions {
        /// The directory to write them in (created if missing) [default: target/completions].
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Run the seed paper's experiment with the noisy-neighbour controller on the simulated
    /// platform: write target/paper/controller.csv and docs/figures/paper-controller.svg,
    /// and print the goal numbers.
    PaperFigure {
        /// Fail when the committed figure differs from the experiment's (CI).
        #[arg(long)]
        check: bool,
    },
    /// Run the controller's scenario suite (xtask/scenarios/) on the simulated platform:
    /// each family with no controller, with the best static allocation a sweep finds and
    /// with the controller; print the table and the goals, and (with every family) write
    /// docs/figures/scenarios.md and docs/figures/scenarios.svg.
    Scenarios {
        /// Run only this family (its directory's name without the number).
        #[arg(long, value_name = "NAME")]
        family: Option<String>,
        /// Run the suite from a release build (cargo builds it: a few minutes once; the
        /// suite then runs many times faster than in a debug build).
        #[arg(long)]
        release: bool,
    },
    /// Build libpqos (crates/rdt-capi) and install libpqos.so.7, its links, libpqos.a,
    /// pqos.h and libpqos.pc under a prefix.
    Capi {
        /// The prefix: lib/, include/ and lib/pkgconfig/ under it (created if missing).
        #[arg(long, value_name = "DIR", default_value = "/usr/local")]
        prefix: PathBuf,
        /// Build and install the debug profile's library instead of the release one.
        #[arg(long)]
        debug: bool,
    },
}

fn main() -> ExitCode {
    let task = Task::parse();
    let result = match task {
        Task::Man { out } => {
            let dir = out.unwrap_or_else(|| default_out("man"));
            [
                (pqos_command(), &man::PQOS),
                (rdtset_command(), &man::RDTSET),
            ]
            .iter()
            .try_for_each(|(cmd, page)| {
                man::render(cmd, page)
                    .map_err(|e| format!("cannot render {}: {e}", page.file_name))
                    .and_then(|roff| write(&dir, page.file_name, &roff))
            })
        }
        Task::Completions { out } => completions::render_all(&pqos_command())
            .map_err(|e| format!("cannot render the completions: {e}"))
            .and_then(|files| {
                let dir = out.unwrap_or_else(|| default_out("completions"));
                files
                    .iter()
                    .try_for_each(|(name, text)| write(&dir, name, text))
            }),
        Task::PaperFigure { check } => paper::task(workspace_root(), check),
        Task::Scenarios { family, release } => {
            if release && cfg!(debug_assertions) {
                scenarios::in_release(family.as_deref())
            } else {
                scenarios::task(workspace_root(), family.as_deref())
            }
        }
        Task::Capi { prefix, debug } => capi(&prefix, debug),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask capi`: `cargo build -p rdt-capi` in the profile asked for, then
/// [`pqos::install::install`] (the one install step, which the C tests use too).
fn capi(prefix: &Path, debug: bool) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    build
        .current_dir(workspace_root())
        .args(["build", "-p", "rdt-capi", "--lib"]);
    if !debug {
        build.arg("--release");
    }
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build -p rdt-capi failed ({status})"));
    }
    let profile = if debug { "debug" } else { "release" };
    let cdylib = default_out(profile).join("libpqos.so");
    let prefix = std::path::absolute(prefix)
        .map_err(|e| format!("cannot resolve {}: {e}", prefix.display()))?;
    let installed = pqos::install::install(&cdylib, &prefix)
        .map_err(|e| format!("cannot install libpqos under {}: {e}", prefix.display()))?;
    for path in [&installed.library, &installed.header, &installed.pkg_config] {
        println!("installed {}", path.display());
    }
    Ok(())
}

/// pqos's command line, exactly as the `pqos` binary builds it.
fn pqos_command() -> clap::Command {
    pqos_cli::args::Args::command()
}

/// rdtset's command line, exactly as the `rdtset` binary builds it.
fn rdtset_command() -> clap::Command {
    pqos_cli::rdtset::RdtsetArgs::command()
}

/// The workspace's root: xtask/ sits at it.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| Path::new("."))
}

/// `$CARGO_TARGET_DIR/NAME`, else `target/NAME` at the workspace root.
fn default_out(name: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || {
                // xtask/ sits at the workspace root.
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .parent()
                    .unwrap_or_else(|| Path::new("."))
                    .join("target")
            },
            PathBuf::from,
        )
        .join(name)
}

/// Writes `dir/name`, creating `dir`, and says so on stdout.
fn write(dir: &Path, name: &str, contents: &[u8]) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(name);
    fs::write(&path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_definition_is_consistent() {
        Task::command().debug_assert();
    }
}

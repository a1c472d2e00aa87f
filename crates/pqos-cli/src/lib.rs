//! The command line of `pqos`, as a library: the one clap definition ([`args::Args`]), the
//! grammar of its values ([`grammar`]) and the allocation profiles `-H` lists
//! ([`profiles`]).
//!
//! The `pqos` binary (`src/main.rs`) parses with it; `cargo xtask man` and
//! `cargo xtask completions` generate the man page and the shell completions from the same
//! [`args::Args`], so neither can drift from `pqos --help`.
//!
//! What this crate is not: a stable API. It exists so that one definition serves the binary
//! and its generated documentation; programs that want RDT use the `rdt` library.
//!
//! # References
//! pqos(8) of intel-cmt-cat v25.04.

pub mod args;
pub mod grammar;
pub mod profiles;
pub mod rdtset;

/// Parses the process's arguments into `T`, or prints clap's message and gives the exit code:
/// 1 for a bad command line (pqos/main.c `parse_error`), 0 for `--help` and `--version`.
///
/// # Errors
/// The exit code to end with, the message already printed.
pub fn parse_args<T: clap::Parser>() -> Result<T, std::process::ExitCode> {
    T::try_parse().map_err(|e| {
        let _ = e.print();
        exit_code_of(&e)
    })
}

/// The exit code of a command line clap refused: 1 for a bad one (pqos/main.c
/// `parse_error`), 0 for `--help` and `--version`.
#[must_use]
pub fn exit_code_of(e: &clap::Error) -> std::process::ExitCode {
    if e.use_stderr() {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

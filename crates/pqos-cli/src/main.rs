//! `pqos`: an intel-cmt-cat compatible command line for Intel RDT and AMD PQoS.
//!
//! Flags and output follow pqos(8) v25.04, down to the two-line `NOTE:  Mixed use of MSR
//! and kernel interfaces` banner it prints first on stdout for every command (on stderr with
//! `-u json`, which keeps stdout pure JSON). One deliberate difference: bad options exit 1
//! with an error instead of printing the usage and exiting 0.
//!
//! Layout: [`args`] (the flags) and [`grammar`] (the values' syntax) come from this package's
//! library target (`src/lib.rs`), which `cargo xtask` also uses for the man page and the
//! shell completions; [`command`] (flags to a validated plan), [`commands`] (the actions,
//! generic over `rdt_pqos::Backend`), [`platform`] (which backend: simulated or `/dev/cpu/N/msr`).

mod command;
mod commands;
mod platform;
mod stdout;
#[cfg(test)]
mod testdata;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context as _, Result};
// Imported at the crate root so that `crate::args` and `crate::grammar` name them everywhere.
use pqos_cli::{args, grammar};

use crate::args::Args;
use crate::args::logger::SharedStdout;
use crate::command::{Command, Plan};

fn main() -> ExitCode {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let args = match <Args as clap::Parser>::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // pqos v25.04 prints the banner before it parses its options, so before its
            // help and its option errors too.
            let json = asks_for_json(&raw);
            print_banner(json);
            // pqos reports a bad `-e` value on stdout (its alloc.c lines, then `Allocation
            // configuration error!`); scripts look for them there. Our message: stderr.
            if let Some(lines) = classdef_failure(&e).filter(|_| !json) {
                print!("{lines}");
            }
            let _ = e.print();
            return pqos_cli::exit_code_of(&e);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`pqos -m all:0 | head -3`) ends the run quietly and successfully:
        // the reader has what it wanted, and monitoring groups were stopped on the way out.
        // So does a stop signal while nobody was reading stdout.
        Err(err) if is_broken_pipe(&err) || is_abandoned(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = SharedStdout.flush();
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// What pqos v25.04 prints first on stdout, for every command (pqos/main.c
/// `print_warning`, called first in `main`). Tools that read its monitoring output count on
/// it: Telegraf's `intel_rdt` input skips the first four lines of `pqos -r ...
/// --mon-file-type=csv` (this banner, `CMT/MBM reset successful`, the header).
const NOTE_BANNER: &str = "NOTE:  Mixed use of MSR and kernel interfaces to manage\n       CAT or CMT & MBM may lead to unexpected behavior.\n";

/// pqos's stdout lines for a refused `-e`/`--alloc-class` value, if `e` is that.
fn classdef_failure(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let is_alloc_class = matches!(
        e.get(ContextKind::InvalidArg),
        Some(ContextValue::String(a)) if a.starts_with("--alloc-class")
    );
    match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) if is_alloc_class => grammar::classdefs_pqos_failure(v),
        _ => None,
    }
}

/// Prints [`NOTE_BANNER`] on stdout, or on stderr when stdout is to carry JSON only.
fn print_banner(json: bool) {
    if json {
        eprint!("{NOTE_BANNER}");
    } else {
        print!("{NOTE_BANNER}");
    }
}

/// Whether a command line that did not parse asks for `-u json` (`-u json`, `-ujson`,
/// `--mon-file-type json`, `--mon-file-type=json`), so that even then stdout gets no banner.
fn asks_for_json(raw: &[std::ffi::OsString]) -> bool {
    raw.windows(2)
        .any(|w| (w[0] == "-u" || w[0] == "--mon-file-type") && w[1].eq_ignore_ascii_case("json"))
        || raw.iter().any(|a| {
            a.to_str().is_some_and(|a| {
                a.eq_ignore_ascii_case("-ujson") || a.eq_ignore_ascii_case("--mon-file-type=json")
            })
        })
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether the run ended because a stop signal arrived while stdout was not being read.
fn is_abandoned(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(stdout::Abandoned::is)
    })
}

fn run(args: Args) -> Result<()> {
    let plan = Plan::from_args(args)?;
    let tty = std::io::stdout().is_terminal();
    if plan.command == Command::Version {
        print_banner(plan.json);
        println!("{}", commands::version_line());
        return Ok(());
    }
    let stop = Arc::new(AtomicBool::new(false));
    if !matches!(plan.command, Command::Monitor(_)) {
        // One report, one write(2) where it fits the buffer (`-s` on 160 CPUs is ~900
        // lines), shared with the library's log lines (`WARN:`, `-v`'s `INFO:`), which pqos
        // prints on stdout too: they come out in order, after the banner. Flushed before
        // main prints an error, so stdout's lines come first.
        let mut out = SharedStdout;
        // `-u json` keeps stdout pure JSON: the banner goes to stderr then.
        if plan.json {
            eprint!("{NOTE_BANNER}");
        } else {
            out.write_all(NOTE_BANNER.as_bytes())?;
        }
        let result = platform::run(&plan, &stop, tty, &mut out);
        let flushed = out.flush().map_err(anyhow::Error::from);
        return result.and(flushed);
    }
    // Monitoring prints as it goes: what the library logs goes out at once.
    SharedStdout::unbuffer()?;
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing the signal handler")?;
    }
    // Monitoring runs until stopped: its stdout goes through a writer thread, so that a
    // signal ends the run even when the reader has stopped reading (stdout.rs).
    // The banner is written before the writer thread starts (the pipe has room for it), so
    // that it comes before whatever the platform's opening says on stderr, in this order on
    // every run (the guide's transcripts show both streams as one). `-u json` keeps stdout
    // pure JSON Lines: the banner goes to stderr then.
    if plan.json {
        eprint!("{NOTE_BANNER}");
    } else {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(NOTE_BANNER.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(pqos_cli::args::logger::stdout_error)?;
    }
    let mut out = stdout::Detached::spawn(Box::new(std::io::stdout()), Arc::clone(&stop))
        .context("starting the stdout writer")?;
    let result = platform::run(&plan, &stop, tty, &mut out);
    let finished = out.finish().map_err(anyhow::Error::from);
    result.and(finished)
}

//! `pqos`: an intel-cmt-cat compatible command line for Intel RDT and AMD PQoS.
//!
//! Flags and output follow pqos(8) v25.04. Two deliberate differences: the two-line
//! `NOTE:  Mixed use of MSR and kernel interfaces` banner v25.04 prints first on stdout is
//! printed before monitoring output only (tools that read monitoring output skip a fixed
//! number of lines; master dropped the banner everywhere), and bad options exit 1 with an
//! error instead of printing the usage and exiting 0.
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
use crate::command::{Command, Plan};

fn main() -> ExitCode {
    let args: Args = match pqos_cli::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`pqos -m all:0 | head -3`) ends the run quietly and successfully:
        // the reader has what it wanted, and monitoring groups were stopped on the way out.
        // So does a stop signal while nobody was reading stdout.
        Err(err) if is_broken_pipe(&err) || is_abandoned(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = std::io::stdout().flush();
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// What pqos v25.04 prints first on stdout (pqos/main.c `print_warning`). Tools that read
/// its monitoring output count on it: Telegraf's `intel_rdt` input skips the first four lines
/// of `pqos -r ... --mon-file-type=csv` (this banner, `CMT/MBM reset successful`, the header).
const NOTE_BANNER: &str = "NOTE:  Mixed use of MSR and kernel interfaces to manage\n       CAT or CMT & MBM may lead to unexpected behavior.\n";

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
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    let mut out = stdout.lock();
    if plan.command == Command::Version {
        writeln!(out, "{}", commands::version_line())?;
        return Ok(());
    }
    let stop = Arc::new(AtomicBool::new(false));
    if !matches!(plan.command, Command::Monitor(_)) {
        // One report, one write(2) where it fits the buffer (`-s` on 160 CPUs is ~900
        // lines); flushed before main prints an error, so stdout's lines come first.
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        let result = platform::run(&plan, &stop, tty, &mut out);
        let flushed = out.flush().map_err(anyhow::Error::from);
        return result.and(flushed);
    }
    drop(out);
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
    let mut out = stdout::Detached::spawn(Box::new(std::io::stdout()), Arc::clone(&stop))
        .context("starting the stdout writer")?;
    // `-u json` keeps stdout pure JSON Lines: the banner goes to stderr then.
    if plan.json {
        eprint!("{NOTE_BANNER}");
    } else {
        out.write_all(NOTE_BANNER.as_bytes())?;
        out.flush()?;
    }
    let result = platform::run(&plan, &stop, tty, &mut out);
    let finished = out.finish().map_err(anyhow::Error::from);
    result.and(finished)
}

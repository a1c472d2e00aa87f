//! `rdt-agent --policy FILE`: the noisy-neighbour controller (`rdt_pqos::control`) as a
//! daemon. Each interval of the policy it reads the workloads' counters and, when a
//! protected workload suffers, squeezes the best-effort classes' L3 ways and MBA, one
//! journaled transaction per step; it gives them back when the pressure is gone. Every
//! decision is a JSON line on stdout (or `--events FILE`).
//!
//! On the host (`/`), on a mounted simulated platform (`--sysroot DIR`), or on the
//! in-process simulated platform (`--sim MODEL`, with `--sim-virtual-clock` to run
//! simulated time as fast as the model computes). SIGTERM, SIGINT or SIGHUP end the run at
//! the next interval, leaving the last allocation (`--on-exit keep`) or the one the agent
//! found (`--on-exit restore`).
//!
//! `rdt-agent nri --config FILE`: the NRI plugin that puts every container in its class
//! (src/nri.rs, `rdt_nri`).
//!
//! `rdt-agent --nfd FILE` writes the node's RDT features as a Node Feature Discovery
//! feature file (`rdt_pqos::nfd`) and exits.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use rdt_pqos::config::policy::Policy;
use rdt_pqos::control::{Agent, AgentError, RunOptions, Stopper};
use rdt_pqos::proc::ProcFs;
use rdt_pqos::transaction::AllocState;
use rdt_pqos::{Iface, OpenOptions, Rdt};

mod nfd;
mod nri;

/// What the agent leaves when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OnExit {
    /// The last allocation it made (the classes stay as they are).
    Keep,
    /// The allocation it found when it started.
    Restore,
}

/// Protect latency-critical workloads from noisy neighbours with RDT / PQoS: squeeze
/// best-effort classes' L3 ways and memory bandwidth while a protected workload suffers,
/// give them back when it does not.
#[derive(Parser, Debug)]
#[command(name = "rdt-agent", version)]
struct Args {
    /// The policy (TOML, or JSON for *.json): protected and best-effort workloads.
    #[arg(long, value_name = "FILE", required_unless_present = "nfd")]
    policy: Option<PathBuf>,

    /// Write the node's RDT features as a Node Feature Discovery feature file (in NFD's
    /// features.d) and exit.
    #[arg(long, value_name = "FILE", conflicts_with = "policy")]
    nfd: Option<PathBuf>,

    /// Decide and report, never write (the policy's `advisory = true`).
    #[arg(long)]
    dry_run: bool,

    /// The interface: auto (pqos's rule), msr or os.
    #[arg(long, value_name = "IFACE", default_value = "auto")]
    iface: Iface,

    /// The directory holding the platform's dev/cpu and sys (a mounted simulated platform).
    #[arg(long, value_name = "DIR", env = "RDT_SYSROOT")]
    sysroot: Option<PathBuf>,

    /// Run on the in-process simulated platform MODEL (`pqos --sim`'s models).
    #[arg(long, value_name = "MODEL", conflicts_with = "sysroot")]
    sim: Option<String>,

    /// The simulated platform's state file.
    #[arg(long, value_name = "FILE", requires = "sim")]
    sim_state: Option<PathBuf>,

    /// A workload scenario (JSON) installed in the simulated platform first.
    #[arg(long, value_name = "FILE", requires = "sim")]
    sim_scenario: Option<PathBuf>,

    /// Do not sleep: advance the simulated platform's clock by each interval.
    #[arg(long, requires = "sim")]
    sim_virtual_clock: bool,

    /// Start the simulated platform from the model's reset state, discarding what earlier
    /// runs saved (without it, a platform earlier runs changed says so once on stderr).
    #[arg(long, requires = "sim")]
    sim_fresh: bool,

    /// Stop after this many seconds (of the simulated clock with --sim-virtual-clock).
    #[arg(long, value_name = "SECS")]
    duration: Option<u64>,

    /// Append the events (JSON lines) to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,

    /// What to leave when stopped.
    #[arg(long, value_enum, default_value = "keep")]
    on_exit: OnExit,
}

fn main() -> ExitCode {
    // `rdt-agent nri ...`: the NRI plugin (src/nri.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "nri") {
        return nri::main(std::env::args_os().skip(1));
    }
    let args = Args::parse();
    let stopper = Stopper::new();
    let stop = stopper.flag();
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            eprintln!("error: cannot handle signal {sig}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if args.nfd.is_none() {
        stop_within_grace(Arc::clone(&stop));
    }
    let ran = match &args.nfd {
        Some(path) => open_options(&args).and_then(|opts| nfd::write(&opts, path)),
        None => run(&args, &stopper),
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// How long the controller may take to stop after SIGTERM (SIGINT, SIGHUP) on its own: the
/// library's agent ([`Stopper`]) sees the flag between the steps of its start-up, within
/// 20 ms while it waits, and after the tick in progress (a tick or a transaction takes
/// milliseconds, an application's metric is abandoned); opening a platform with thousands
/// of groups (the scan of resctrl, before the agent starts) can take seconds, and only this
/// last resort cuts it short. Kubernetes waits 30 s, systemd 90 s; an operator
/// expects 2 s.
const STOP_GRACE: Duration = Duration::from_millis(1500);

/// Watches `stop`: when a signal sets it and the run has not ended `STOP_GRACE` later,
/// the process exits at once (status 143, as if SIGTERM had killed it), saying so. What it
/// was doing is then what a SIGKILL leaves, which the library repairs at the next open: a
/// transaction in progress is rolled back from its journal
/// (`rdt_pqos::transaction::recover`), monitoring groups and RMIDs of a dead process are
/// reclaimed. `--on-exit restore` is not done then: the message says so.
fn stop_within_grace(stop: Arc<AtomicBool>) {
    let watch = move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(STOP_GRACE);
        eprintln!(
            "rdt-agent: still busy {STOP_GRACE:?} after the signal: exiting now (a transaction \
             in progress is rolled back from its journal at the next open; --on-exit restore \
             was not done)"
        );
        std::process::exit(143);
    };
    if let Err(e) = std::thread::Builder::new()
        .name("stop-watch".into())
        .spawn(watch)
    {
        eprintln!("rdt-agent: cannot watch for a slow stop: {e}");
    }
}

/// The platform the flags name; a simulated platform earlier runs changed says so.
fn open(args: &Args) -> Result<Rdt> {
    let rdt = open_options(args)?.open().context("opening the platform")?;
    note_not_fresh(&rdt);
    Ok(rdt)
}

#[cfg(feature = "sim")]
fn note_not_fresh(rdt: &Rdt) {
    if let Some(note) = rdt.simulated().and_then(rdt_pqos::sim::not_fresh_note) {
        eprintln!("NOTE: {note}");
    }
}

#[cfg(not(feature = "sim"))]
fn note_not_fresh(_: &Rdt) {}

/// The options that open the platform the flags name.
fn open_options(args: &Args) -> Result<OpenOptions> {
    let mut opts = OpenOptions::new(args.iface);
    if let Some(root) = &args.sysroot {
        opts = opts.sysroot(root);
    }
    if let Some(model) = &args.sim {
        opts = simulate(opts, args, model)?;
    }
    Ok(opts)
}

#[cfg(feature = "sim")]
#[allow(clippy::unnecessary_wraps)] // the build without `sim` fails here
fn simulate(opts: OpenOptions, args: &Args, model: &str) -> Result<OpenOptions> {
    let session = rdt_pqos::sim::SessionOptions {
        state: args.sim_state.clone(),
        scenario: args.sim_scenario.clone(),
        wall_clock: !args.sim_virtual_clock,
        fresh: args.sim_fresh,
        ..rdt_pqos::sim::SessionOptions::new(model)
    };
    Ok(opts.rdt_iface(None).simulate(session))
}

#[cfg(not(feature = "sim"))]
fn simulate(_: OpenOptions, _: &Args, _: &str) -> Result<OpenOptions> {
    bail!("--sim: this rdt-agent was built without the simulated platform (feature `sim`)")
}

/// Where the events go.
fn events_out(args: &Args) -> Result<Box<dyn Write>> {
    let Some(path) = &args.events else {
        return Ok(Box::new(std::io::stdout()));
    };
    // Appended to, never through a symlink (of the file or a directory above it), never a
    // FIFO or device, only a file of this user's: it may be in a directory others share.
    let file = rdt_pqos::file::open_append_shared(path, 0o640)
        .with_context(|| format!("opening --events {}", path.display()))?;
    Ok(Box::new(std::io::LineWriter::new(file)))
}

/// Advances the simulated platform's clock by `dt` (`--sim-virtual-clock`).
#[cfg(feature = "sim")]
fn advance(rdt: &mut Rdt, dt: Duration) {
    if let Some(s) = rdt.simulated() {
        s.handle().advance(dt);
    }
}

#[cfg(not(feature = "sim"))]
fn advance(_: &mut Rdt, _: Duration) {}

fn run(args: &Args, stop: &Stopper) -> Result<()> {
    let Some(policy) = &args.policy else {
        bail!("--policy FILE is required");
    };
    let policy = Policy::load(policy)?;
    let mut rdt = open(args)?;
    if stop.is_stopped() {
        // stopped while the platform was opened: nothing was changed yet
        return Ok(());
    }
    let restore = args.on_exit == OnExit::Restore && !args.dry_run;
    // What a stop during the start restores (the agent keeps its own copy once started).
    let found = if restore {
        Some(AllocState::read(&mut rdt).context("reading the allocation")?)
    } else {
        None
    };
    let mut out = events_out(args)?;
    let result = match Agent::start_stoppable(&mut rdt, policy, &ProcFs::host(), args.dry_run, stop)
    {
        Ok(mut agent) => {
            for w in agent.warnings() {
                eprintln!("warning: {w}");
            }
            let opts = RunOptions {
                duration: args.duration.map(Duration::from_secs),
                advance: args
                    .sim_virtual_clock
                    .then_some(advance as fn(&mut Rdt, Duration)),
            };
            let result = agent
                .run(&mut rdt, &opts, |tick| {
                    tick.events
                        .iter()
                        .try_for_each(|e| writeln!(out, "{}", e.to_json_line()))
                })
                .map(|_| ())
                .context("controlling");
            if restore {
                agent
                    .restore(&mut rdt)
                    .context("restoring the allocation found at start")?;
            } else {
                agent.stop(&mut rdt).context("stopping monitoring")?;
            }
            result
        }
        // stopped while starting: what it made stays (the classes) unless asked to restore
        Err(AgentError::Stopped) => {
            if let Some(found) = found {
                found
                    .restore(&mut rdt)
                    .context("restoring the allocation found at start")?;
            }
            Ok(())
        }
        Err(e) => return Err(e.into()),
    };
    if args.sim.is_some() {
        rdt.save_simulated()
            .context("saving the simulated platform")?;
    }
    result
}

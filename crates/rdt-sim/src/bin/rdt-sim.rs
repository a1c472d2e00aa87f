//! `rdt-sim`: mount a simulated RDT platform as files (`dev/cpu`, sysfs, resctrl) over FUSE.
//!
//! ```text
//! rdt-sim mount [--model M | --dump FILE] [--resctrl-opts cdp,cdpl2,mba_MBps | --no-resctrl]
//!               [--kernel 6.17|6.18|6.19] [--state FILE] [--scenario FILE|builtin:NAME]
//!               [--manual-clock] DIR
//! rdt-sim models
//! ```
//!
//! `mount` serves until SIGINT or SIGTERM (or until someone runs `umount DIR`), then
//! unmounts and, with `--state`, saves the model's state to FILE (it is loaded from FILE at
//! start when FILE exists, so a later mount continues the same machine). Unmounting resctrl
//! (mounted by default) resets the registers it controls, as the kernel's unmount does: then
//! the state carries the clock, counters and workloads; with `--no-resctrl` it carries the
//! registers too.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Parser, Subcommand};
use rdt_sim::fs::{Mount, MountConfig, SimClock};
use rdt_sim::resctrl::{KernelVersion, MountOptions};
use rdt_sim::session::Saved;
use rdt_sim::{BUILTIN_MODELS, DEFAULT_MODEL, Scenario, SimHandle, SimPlatform};

/// Mount a simulated Intel RDT / AMD PQoS platform as files, to try rdt, pqos or any tool
/// against it with no RDT hardware.
#[derive(Parser, Debug)]
#[command(name = "rdt-sim", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve DIR/dev/cpu/N/{msr,cpuid}, DIR/sys/devices/system, DIR/sys/fs/resctrl and
    /// DIR/.sim until interrupted (needs root and /dev/fuse).
    Mount(MountArgs),
    /// List the built-in models.
    Models,
}

#[derive(clap::Args, Debug)]
struct MountArgs {
    /// A built-in model (see `rdt-sim models`), optionally with the `rdt=` boot parameter:
    /// `skylake-sp:rdt=l3cat,cmt`.
    #[arg(long, value_name = "MODEL", conflicts_with = "dump")]
    model: Option<String>,

    /// A canonical CPUID dump file describing the machine (every CPU's block for a
    /// multi-CPU topology).
    #[arg(long, value_name = "FILE")]
    dump: Option<PathBuf>,

    /// The kernel's `rdt=` boot parameter, comma-separated: l3cat, cmt, mbmtotal, mbmlocal,
    /// mba, ... (`!` forces one off). `skylake-sp` needs `--rdt l3cat,cmt,mbmtotal,mbmlocal`
    /// for resctrl to show L3 CAT, CMT and MBM (the kernel's Skylake-SP quirk hides them).
    #[arg(long, value_name = "LIST")]
    rdt: Option<rdt_sim::quirks::RdtOptions>,

    /// resctrl mount options, comma-separated: cdp, cdpl2, mba_MBps.
    #[arg(long = "resctrl-opts", value_name = "OPTS", default_value = "")]
    resctrl_opts: MountOptions,

    /// The Linux release whose resctrl files to show: 6.17, 6.18 (ABMC counter assignment)
    /// or 6.19 (io_alloc).
    #[arg(long, value_name = "RELEASE", default_value_t = KernelVersion::default())]
    kernel: KernelVersion,

    /// Leave DIR/sys/fs/resctrl empty, as on a host where resctrl is not mounted.
    #[arg(long, conflicts_with = "resctrl_opts")]
    no_resctrl: bool,

    /// Load the model's state from FILE if it exists, and save it there on exit.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,

    /// Install a workload scenario after loading the state (it is saved with the state): a
    /// JSON file, or `builtin:NAME` with NAME one of dpdk-pipeline,
    /// dpdk-pipeline-aggressor-at-10s, dpdk-pipeline-alone (for `--model skylake-sp`).
    #[arg(long, value_name = "FILE|builtin:NAME")]
    scenario: Option<PathBuf>,

    /// Keep the model's clock still (it normally follows wall-clock time).
    #[arg(long)]
    manual_clock: bool,

    /// The mount point: an existing directory.
    dir: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Models => {
            models();
            Ok(())
        }
        Cmd::Mount(args) => mount(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = format!("error: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
    }
}

fn models() {
    for name in BUILTIN_MODELS {
        let Ok(p) = SimPlatform::builtin(name) else {
            continue;
        };
        let topo = p.topology();
        let default = if *name == DEFAULT_MODEL {
            " (default)"
        } else {
            ""
        };
        println!(
            "{name}{default}: {}, {} CPUs, {} L3 domains",
            p.capabilities().brand.as_deref().unwrap_or("?"),
            topo.cpus().len(),
            topo.l3_domains().len()
        );
    }
}

/// A message and its cause.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
struct Failed {
    what: String,
    #[source]
    source: Box<dyn Error + Send + Sync>,
}

fn failed(what: impl Into<String>) -> impl FnOnce(Box<dyn Error + Send + Sync>) -> Failed {
    let what = what.into();
    move |source| Failed { what, source }
}

fn mount(args: &MountArgs) -> Result<(), Failed> {
    let mut platform = if let Some(path) = &args.dump {
        let text = rdt_host::file::read_text(path, rdt_core::cpuid::MAX_DUMP_BYTES)
            .map_err(|e| failed(format!("reading {}", path.display()))(e.into()))?;
        SimPlatform::from_dump(&text)
            .map_err(|e| failed(format!("{}", path.display()))(e.into()))?
    } else {
        let model = args.model.as_deref().unwrap_or(DEFAULT_MODEL);
        SimPlatform::builtin(model).map_err(|e| failed("--model")(e.into()))?
    };
    if let Some(rdt) = &args.rdt {
        let opts = platform.rdt_boot_options().merged(rdt);
        platform.set_rdt_boot_options(opts);
    }
    // A session's resctrl mount in the state file is kept as it is and saved back.
    let mut kernel = None;
    if let Some(state) = args.state.as_ref().filter(|s| s.exists()) {
        let loading = || failed(format!("loading the state from {}", state.display()));
        let saved = Saved::read(state).map_err(|e| loading()(e.into()))?;
        platform
            .restore_machine(saved.machine)
            .map_err(|e| loading()(e.into()))?;
        kernel = saved.kernel;
    }
    if let Some(arg) = &args.scenario {
        let scenario = Scenario::from_arg(arg)
            .and_then(|s| platform.set_scenario(&s).map(|()| s))
            .map_err(|e| failed(format!("--scenario {}", arg.display()))(e.into()))?;
        eprintln!(
            "rdt-sim: scenario {}",
            scenario.name.as_deref().unwrap_or("from the file")
        );
    }
    platform.set_kernel(args.kernel);
    let model = platform.model().to_owned();
    let sim = SimHandle::new(platform);
    let config = MountConfig {
        resctrl: (!args.no_resctrl).then_some(args.resctrl_opts),
        clock: if args.manual_clock {
            SimClock::Manual
        } else {
            SimClock::WallClock
        },
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| failed("installing the signal handlers")(e.into()))?;
    }
    let mount = Mount::new(sim.clone(), &args.dir, config)
        .map_err(|e| failed(format!("mounting at {}", args.dir.display()))(e.into()))?;
    eprintln!(
        "rdt-sim: serving {model} at {} (Ctrl-C or SIGTERM unmounts)",
        mount.dir().display()
    );
    while !stop.load(Ordering::Relaxed) && mount.is_served() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = mount.dir().to_owned();
    let unmounted = mount.unmount();
    eprintln!("rdt-sim: unmounted {}", dir.display());
    if let Some(state) = &args.state {
        let machine = sim.lock().machine_state();
        Saved { machine, kernel }
            .write(state)
            .map_err(|e| failed(format!("saving the state to {}", state.display()))(e.into()))?;
        eprintln!("rdt-sim: state saved to {}", state.display());
    }
    unmounted.map_err(|e| failed(format!("unmounting {}", dir.display()))(e.into()))
}

//! `rdt-exporter`: Intel RDT / AMD PQoS telemetry as OpenMetrics text at `/metrics`.
//!
//! On the OS interface it reports every resctrl group (this library's, pqos's, kubelet's,
//! containerd's, a user's) without creating or changing any: LLC occupancy, memory
//! bandwidth counters, cache masks and MBA limits, CPU and task counts, with the pod UID and
//! container id of the tasks where they have one. On either interface it also monitors the
//! CPU and process groups given with `--monitor-cores` / `--monitor-pids` itself, and
//! releases them when it exits (SIGTERM, SIGINT).
//!
//! The library does the work ([`rdt_pqos::resctrl::ResctrlTelemetry`], the facade's
//! [`rdt_pqos::Monitoring`] guard); this binary parses flags ([`args`]), maps a scrape to
//! metrics ([`metrics`]) and serves HTTP ([`server`]).

mod args;
mod collect;
mod metrics;
mod server;

use std::process::ExitCode;
use std::sync::mpsc;

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use rdt_pqos::resctrl::{ResctrlTelemetry, TelemetryOptions};
use rdt_pqos::{Backend, Interface, OpenOptions, Paths};

use crate::args::Args;
use crate::collect::Collector;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<()> {
    let paths = args
        .sysroot
        .as_deref()
        .map_or_else(Paths::host, Paths::under);
    let mut opts = OpenOptions::new(args.iface).paths(paths.clone());
    if !args.monitor_pids.is_empty() {
        opts = opts.needs_os("--monitor-pids");
    }
    let interface = opts.resolve().context("choosing the interface")?;
    let own_wanted = !args.monitor_cores.is_empty() || !args.monitor_pids.is_empty();
    if interface == Interface::Msr && !own_wanted {
        bail!(
            "nothing to export on the MSR interface: it has no groups of other tools to read; \
             give --monitor-cores, or mount resctrl for the OS interface"
        );
    }
    // The platform is opened (and may reclaim what killed runs left) only to monitor groups
    // of our own; reading resctrl's groups needs no more than the files.
    let mut rdt = if own_wanted {
        let rdt = opts.open().context("opening the platform")?;
        for n in rdt.notices() {
            eprintln!("rdt-exporter: {n}");
        }
        Some(rdt)
    } else {
        None
    };
    let telemetry = if interface == Interface::Os {
        let names = rdt
            .as_ref()
            .map(|r| {
                r.class_names()
                    .into_iter()
                    .map(|(_, n)| n)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let t = ResctrlTelemetry::open(
            TelemetryOptions::new(&paths.resctrl)
                .proc_root(&args.proc_root)
                .rescan_interval(args.rescan_interval)
                .named_classes(names)
                .run_dir(&paths.run),
        )
        .with_context(|| format!("reading resctrl at {}", paths.resctrl.display()))?;
        Some(t)
    } else {
        None
    };
    let mut monitoring = rdt.as_mut().map(Backend::monitoring);
    let own = match &mut monitoring {
        Some(mon) => collect::start_own(mon, &args.monitor_cores, &args.monitor_pids)?,
        None => Vec::new(),
    };
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("listening on {}", args.listen))?;
    eprintln!(
        "rdt-exporter: serving http://{}/metrics ({} interface{})",
        listener.local_addr().unwrap_or(args.listen),
        if interface == Interface::Os {
            "OS"
        } else {
            "MSR"
        },
        if own.is_empty() {
            String::new()
        } else {
            format!(", {} group(s) of its own", own.len())
        }
    );
    let mut collector = Collector {
        telemetry,
        monitoring,
        own,
    };
    let served = serve_until_stopped(listener, &mut collector);
    let released = collector.own.len();
    if let Some(mon) = collector.monitoring.take() {
        mon.finish()
            .context("releasing the exporter's own groups")?;
    }
    served?;
    eprintln!("rdt-exporter: stopped; released {released} group(s) of its own");
    Ok(())
}

/// Serves on a thread of its own and runs the scrapes here, on the thread that owns the
/// platform, until the server stops (SIGTERM, SIGINT).
fn serve_until_stopped(
    listener: std::net::TcpListener,
    collector: &mut Collector<'_>,
) -> Result<()> {
    let (tx, rx) = mpsc::channel::<server::ScrapeRequest>();
    let http = std::thread::Builder::new()
        .name("http".into())
        .spawn(move || server::serve(listener, tx))
        .context("starting the HTTP thread")?;
    for reply in rx {
        let text = collector
            .scrape()
            .and_then(|s| metrics::encode(&s).context("encoding the metrics"))
            .map_err(|e| format!("{e:#}"));
        let _ = reply.send(text);
    }
    http.join()
        .map_err(|_| anyhow::anyhow!("the HTTP thread panicked"))?
        .context("serving HTTP")
}

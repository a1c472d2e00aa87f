//! `rdt-exporter`: Intel RDT / AMD PQoS telemetry as OpenMetrics text at `/metrics`.
//!
//! On the OS interface it reports every resctrl group (this library's, pqos's, kubelet's,
//! containerd's, a user's) without creating or changing any: LLC occupancy, memory
//! bandwidth counters, cache masks and MBA limits, CPU and task counts, with the pod UID and
//! container id of the tasks where they have one. On either interface it also monitors the
//! CPU and process groups given with `--monitor-cores` / `--monitor-pids` itself, and
//! releases them when it exits (SIGTERM, SIGINT, SIGHUP: each stops it; SIGHUP does not
//! reload, [`server`]).
//!
//! # Descriptors
//! At start the soft `RLIMIT_NOFILE` is raised to the hard limit. Of that limit, what is
//! open once the platform is (stdio, the listener, the own groups' counters) and a margin
//! of 32 are set aside, up to `--max-connections` (at most a quarter of the limit) go to
//! connections, and the rest is the budget of resctrl files kept open
//! ([`rdt_pqos::resctrl::TelemetryOptions::max_open_files`]); the others are opened for
//! each read. The numbers are printed at start.
//!
//! The library does the work ([`rdt_pqos::resctrl::ResctrlTelemetry`], the facade's
//! [`rdt_pqos::Monitoring`] guard); this binary parses flags ([`args`]), maps a scrape to
//! metrics ([`metrics`]) and serves HTTP ([`server`]).

mod args;
mod collect;
mod metrics;
mod server;

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use rdt_pqos::resctrl::{ResctrlTelemetry, TelemetryOptions};
use rdt_pqos::{BackendExt, Interface, OpenOptions};

use crate::args::Args;
use crate::collect::Collector;
use crate::server::{Collected, Collections, Limits};

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
    let limit = raise_nofile_limit();
    // `--sysroot` as pqos takes it (`OpenOptions::sysroot`; a simulated platform's PMU and
    // mount control are injected only with rdt-pqos's feature `sim`, and the exporter uses
    // neither: it exports no IPC and never remounts).
    let mut opts = OpenOptions::new(args.iface);
    if let Some(root) = &args.sysroot {
        opts = opts.sysroot(root);
    }
    let paths = opts.get_paths().clone();
    if !args.monitor_pids.is_empty() {
        opts = opts.needs_os("--monitor-pids");
    }
    let interface = opts.resolve().context("choosing the interface")?;
    let own_wanted = !args.monitor_cores.is_empty() || !args.monitor_pids.is_empty();
    if interface.uses_msrs() && !own_wanted {
        bail!(
            "nothing to export on the MSR interface: it has no groups of other tools to read; \
             give --monitor-cores, or mount resctrl for the OS interface"
        );
    }
    // Bound first: the port never fails for want of a descriptor.
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("listening on {}", args.listen))?;
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
    let names = rdt
        .as_mut()
        .map(|r| {
            r.class_names()
                .into_iter()
                .map(|(_, n)| n)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut monitoring = rdt.as_mut().map(BackendExt::monitoring);
    let own = match &mut monitoring {
        Some(mon) => collect::start_own(mon, &args.monitor_cores, &args.monitor_pids)?,
        None => Vec::new(),
    };
    let budget = Budget::of(limit, open_descriptors(), args.max_connections);
    // Set by the server as SIGTERM (SIGINT, SIGHUP) arrives: a scan in progress ends at
    // its next group, so the exporter stops within 2 s whatever it is reading.
    let stopping = Arc::new(AtomicBool::new(false));
    let telemetry = open_telemetry(args, interface, &paths, names, &budget, &stopping)?;
    eprintln!(
        "rdt-exporter: serving http://{}/metrics ({} interface{}); descriptors: limit {}, \
         up to {} connections, {} of {} budgeted resctrl files kept open",
        listener.local_addr().unwrap_or(args.listen),
        match interface {
            Interface::Os => "OS",
            Interface::Msr => "MSR",
            Interface::Mmio => "MMIO",
        },
        if own.is_empty() {
            String::new()
        } else {
            format!(", {} group(s) of its own", own.len())
        },
        limit,
        budget.connections,
        telemetry
            .as_ref()
            .map_or(0, ResctrlTelemetry::files_kept_open),
        budget.files,
    );
    let mut collector = Collector {
        telemetry,
        monitoring,
        own,
        down_since: None,
        controller: paths.run.join(rdt_pqos::control::METRICS_FILE),
        run: paths.run.clone(),
        pods_failed: false,
    };
    let limits = Limits {
        max_connections: budget.connections,
        header_timeout: args.header_timeout,
    };
    let served = serve_until_stopped(listener, &mut collector, limits, stopping);
    let released = collector.own.len();
    if let Some(mon) = collector.monitoring.take() {
        mon.finish()
            .context("releasing the exporter's own groups")?;
    }
    let stop = served?;
    eprintln!(
        "rdt-exporter: stopped ({}); released {released} group(s) of its own",
        stop.name()
    );
    Ok(())
}

/// The reader of every resctrl group, on the OS interface.
fn open_telemetry(
    args: &Args,
    interface: Interface,
    paths: &rdt_pqos::Paths,
    names: Vec<String>,
    budget: &Budget,
    stopping: &Arc<AtomicBool>,
) -> Result<Option<ResctrlTelemetry>> {
    if interface != Interface::Os {
        return Ok(None);
    }
    let t = ResctrlTelemetry::open(
        TelemetryOptions::new(&paths.resctrl)
            .proc_root(&args.proc_root)
            .rescan_interval(args.rescan_interval)
            .named_classes(names)
            .run_dir(&paths.run)
            .max_open_files(budget.files)
            .cancel(Arc::clone(stopping)),
    )
    .with_context(|| format!("reading resctrl at {}", paths.resctrl.display()))?;
    Ok(Some(t))
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (setrlimit(2)); returns the soft
/// limit in force after (the old one when raising failed, said on stderr).
fn raise_nofile_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft >= hard {
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => hard,
        Err(e) => {
            eprintln!("rdt-exporter: raising the descriptor limit from {soft} to {hard}: {e}");
            soft
        }
    }
}

/// Descriptors this process has open now (`/proc/self/fd`); 64 when it cannot be listed.
fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64)
}

/// How the descriptor limit is shared (crate docs, "Descriptors").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Budget {
    /// Connections open at once, at most.
    connections: usize,
    /// resctrl files kept open, at most.
    files: usize,
}

impl Budget {
    /// Descriptors set aside beyond those open: per-read opens, inotify, `/proc` reads,
    /// the runtime's own.
    const MARGIN: u64 = 32;

    fn of(limit: u64, open: u64, max_connections: u32) -> Self {
        let connections = u64::from(max_connections).min(limit / 4).max(1);
        let files = limit.saturating_sub(open + Self::MARGIN + connections);
        Self {
            connections: usize::try_from(connections).unwrap_or(usize::MAX),
            files: usize::try_from(files).unwrap_or(usize::MAX),
        }
    }
}

/// Serves on a thread of its own and runs the collections here, on the thread that owns
/// the platform, until the server stops (SIGTERM, SIGINT, SIGHUP); returns the signal.
fn serve_until_stopped(
    listener: std::net::TcpListener,
    collector: &mut Collector<'_>,
    limits: Limits,
    stopping: Arc<AtomicBool>,
) -> Result<server::Stop> {
    let (collections, asked) = Collections::new();
    let shared = Arc::clone(&collections);
    let http = std::thread::Builder::new()
        .name("http".into())
        .spawn(move || server::serve(listener, &shared, limits, &stopping))
        .context("starting the HTTP thread")?;
    let mut log = IncompleteLog::default();
    for () in asked {
        let text = collector
            .scrape()
            .inspect(|s| {
                if let Some(line) = log.note(&s.incomplete) {
                    eprintln!("{line}");
                }
            })
            .and_then(|s| metrics::encode(&s).context("encoding the metrics"))
            .map_err(|e| format!("{e:#}"));
        collections.finish(&Collected::new(text));
    }
    http.join()
        .map_err(|_| anyhow::anyhow!("the HTTP thread panicked"))?
        .context("serving HTTP")
}

/// Names in the log the groups scrapes could not read in full: when the set changes, and
/// at most once a minute while it stays the same.
#[derive(Debug, Default)]
struct IncompleteLog {
    last: BTreeSet<String>,
    when: Option<Instant>,
}

impl IncompleteLog {
    /// The most group names one line lists.
    const NAMES: usize = 20;

    /// The line to log for a scrape that could not read `incomplete` in full (or `None`).
    /// Names are escaped (`escape_debug`): a group name with a newline or a control or
    /// bidi character cannot forge or garble a log line.
    fn note(&mut self, incomplete: &[String]) -> Option<String> {
        let now: BTreeSet<String> = incomplete.iter().cloned().collect();
        let due = self
            .when
            .is_none_or(|t| t.elapsed() >= Duration::from_mins(1));
        let repeat = due && !now.is_empty();
        if now == self.last && !repeat {
            return None;
        }
        let line = if now.is_empty() {
            "rdt-exporter: scrapes read every group in full again".to_owned()
        } else {
            let names: Vec<String> = now
                .iter()
                .take(Self::NAMES)
                .map(|n| {
                    if n.is_empty() {
                        "/".to_owned()
                    } else {
                        n.escape_debug().to_string()
                    }
                })
                .collect();
            let more = now.len().saturating_sub(Self::NAMES);
            format!(
                "rdt-exporter: incomplete scrape (rdt_scrape_complete 0): {} group(s) not read \
                 in full: {}{}",
                now.len(),
                names.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        };
        self.when = Some(Instant::now());
        self.last = now;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_limit_is_shared_without_overcommitting() {
        let b = Budget::of(1024, 10, 256);
        assert_eq!(b.connections, 256);
        assert_eq!(b.files, 1024 - 10 - 32 - 256);
        let small = Budget::of(100, 90, 256);
        assert_eq!(small.connections, 25, "a quarter of the limit");
        assert_eq!(small.files, 0, "none kept open: every file read per scrape");
        assert_eq!(Budget::of(1 << 20, 10, 256).connections, 256);
    }

    #[test]
    fn incomplete_groups_are_named_escaped_once_per_change() {
        let mut log = IncompleteLog::default();
        assert_eq!(
            log.note(&[]),
            None,
            "complete from the start: nothing to say"
        );
        let many: Vec<String> = std::iter::once(String::new())
            .chain(std::iter::once(
                "evil\nrdt-exporter: forged\u{202e}".to_owned(),
            ))
            .chain((0..30).map(|n| format!("mon_groups/g{n}")))
            .collect();
        let line = log.note(&many).unwrap();
        assert!(line.contains("32 group(s) not read in full: /, "), "{line}");
        assert!(
            line.contains("evil\\nrdt-exporter: forged\\u{202e}"),
            "{line}"
        );
        assert!(!line.contains('\n') && !line.contains('\u{202e}'), "{line}");
        assert!(line.ends_with(" and 12 more"), "{line}");
        assert_eq!(log.note(&many), None, "the same groups: said once a minute");
        assert!(
            log.note(&many[..1])
                .unwrap()
                .contains("1 group(s) not read in full: /")
        );
        assert_eq!(
            log.note(&[]).as_deref(),
            Some("rdt-exporter: scrapes read every group in full again")
        );
    }
}

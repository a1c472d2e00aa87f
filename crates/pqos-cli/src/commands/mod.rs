//! The actions. Everything here is generic over [`rdt_pqos::Backend`] and writes to a
//! `&mut dyn Write`, so the same code runs on the hardware, on the simulated platform and
//! against the test fake.

pub mod alloc;
pub mod caps;
pub mod monitor;
pub mod show;
pub mod tables;

pub use pqos_cli::profiles;

use std::fmt;
use std::io::Write;

use anyhow::Result;
use rdt_pqos::{Backend, BackendExt, CacheDomain, Capabilities, Topology};

use crate::command::{Command, Plan};
#[cfg(feature = "sim")]
pub use monitor::{AdvancingClock, VirtualClock};
pub use monitor::{Clock, RealClock};

/// Everything an action needs besides the backend.
#[allow(missing_debug_implementations)] // holds trait objects
pub struct Context<'a> {
    /// Where monitoring waits between samples.
    pub clock: &'a mut dyn Clock,
    /// Set by SIGINT/SIGTERM/SIGHUP: monitoring stops at the next tick.
    pub stop: &'a std::sync::atomic::AtomicBool,
    /// Whether stdout is a terminal (pqos clears the screen between samples then).
    pub stdout_is_tty: bool,
    /// The platform's procfs: whether tasks exist, their threads, the CPU each last ran on.
    pub proc: &'a rdt_pqos::proc::ProcFs,
}

/// Runs a plan's resets and action on `backend` (pqos's `main()` after init).
///
/// # Errors
/// The first failing step's error; pqos's own failure line has been written to `out` then.
pub fn execute<B: Backend>(
    backend: &mut B,
    plan: &Plan,
    ctx: &mut Context<'_>,
    out: &mut dyn Write,
) -> Result<()> {
    // `-u json`: stdout is JSON only; pqos's report lines go to stderr.
    let mut stderr = std::io::stderr();
    if let Some(cfg) = plan.mon_reset {
        alloc::run_reset_monitoring(backend, cfg, text(plan, out, &mut stderr))?;
    }
    if let Some(cfg) = plan.alloc_reset {
        alloc::run_reset_allocation(
            backend,
            cfg,
            text(plan, out, &mut stderr),
            &mut std::io::stderr(),
        )?;
    }
    match &plan.command {
        Command::Version => writeln!(out, "{}", version_line())?,
        Command::Display { verbose } => caps::run_display(backend, *verbose, plan.json, out)?,
        Command::Show => show::run_show(backend, plan.verbosity > 0, plan.json, out)?,
        Command::Allocate(req) => {
            alloc::run_alloc(backend, req, ctx.proc, text(plan, out, &mut stderr))?;
        }
        Command::Apply {
            file,
            dry_run,
            remove,
            groups,
            adopt,
        } => {
            alloc::run_apply(
                backend,
                file,
                &alloc::ApplyMode {
                    dry_run: *dry_run,
                    remove: *remove,
                    groups: groups.clone(),
                    adopt: *adopt,
                },
                ctx.proc,
                text(plan, out, &mut stderr),
            )?;
        }
        Command::MbmConfig(cfg) => {
            for &(event, bits) in cfg {
                backend.set_mbm_event_config(event, bits).map_err(|e| {
                    anyhow::Error::new(e).context(format!(
                        "setting the configuration of {}",
                        event.resctrl_name()
                    ))
                })?;
            }
            commit(backend, out, None)?;
            writeln!(
                text(plan, out, &mut stderr),
                "MBM event configuration altered."
            )?;
        }
        Command::AssignMode(mode) => {
            backend.set_mbm_assign_mode(*mode).map_err(|e| {
                anyhow::Error::new(e).context(format!(
                    "switching the MBM counter assignment mode to {}",
                    mode.name()
                ))
            })?;
            commit(backend, out, None)?;
            writeln!(
                text(plan, out, &mut stderr),
                "MBM counter assignment mode: {}.",
                mode.name()
            )?;
        }
        Command::IoAlloc(on) => {
            let (verb, state) = if *on {
                ("enabling", "enabled")
            } else {
                ("disabling", "disabled")
            };
            backend
                .set_io_alloc(*on)
                .map_err(|e| anyhow::Error::new(e).context(format!("{verb} L3 I/O allocation")))?;
            commit(backend, out, None)?;
            writeln!(text(plan, out, &mut stderr), "L3 I/O allocation {state}.")?;
        }
        Command::Nothing => {}
        Command::Monitor(req) => monitor::run_monitor(backend, req, ctx, out)?,
        // Run by `platform`, which has the platform's tables and registers.
        Command::Tables(_) => {
            anyhow::bail!("the RDT 1.3 table reports need the platform's ACPI tables")
        }
    }
    Ok(())
}

/// Makes the backend keep the writes made so far ([`Backend::commit`]: `--sim` saves its
/// state file), so that a success line is printed only for a change that lasts. On failure,
/// writes pqos's failure line (`failed`, if the command has one) and returns the error.
///
/// # Errors
/// The backend could not keep the writes (`--sim`: the state file cannot be written).
pub fn commit<B: Backend>(
    backend: &mut B,
    out: &mut dyn Write,
    failed: Option<&str>,
) -> Result<()> {
    if let Err(e) = backend.commit() {
        if let Some(line) = failed {
            writeln!(out, "{line}")?;
        }
        return Err(anyhow::Error::new(e).context("the change was made but cannot be kept"));
    }
    Ok(())
}

/// Where pqos's report lines go: stdout, or stderr under `-u json` (stdout is JSON only).
fn text<'a>(
    plan: &Plan,
    out: &'a mut dyn Write,
    stderr: &'a mut std::io::Stderr,
) -> &'a mut dyn Write {
    if plan.json { stderr } else { out }
}

/// `PQoS Tool version: X.Y.Z`, as pqos prints it, marked as this implementation.
#[must_use]
pub fn version_line() -> String {
    format!("PQoS Tool version: {} (rdt)", env!("CARGO_PKG_VERSION"))
}

/// How pqos names an L3 (and MBA) domain: by socket on Intel when each socket has one L3,
/// by core complex on AMD/Hygon, by domain id otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelKind {
    /// Intel, one L3 per socket: ids are socket ids.
    Socket,
    /// AMD or Hygon: ids are L3 ids (one per CCX).
    CoreComplex,
    /// Several L3 per socket on Intel: ids are L3 ids.
    DomainId,
}

/// The L3 (= MBA) domains as pqos numbers and labels them.
#[derive(Clone, Debug)]
pub struct L3Domains {
    /// How they are labelled.
    pub kind: LabelKind,
    /// (user-visible id, cache domain), by id.
    pub list: Vec<(u32, CacheDomain)>,
    /// The same pairs in the order pqos enumerates them: each id the first time a CPU of
    /// it is met, CPU 0 upwards ([`Topology::l3_domains_in_cpu_order`]); `-e` without
    /// `@ids` writes and prints in this order.
    pub cpu_order: Vec<(u32, CacheDomain)>,
}

impl L3Domains {
    /// Builds the list from the topology.
    #[must_use]
    pub fn new(caps: &Capabilities, topo: &Topology) -> Self {
        let (kind, cpu_order): (LabelKind, Vec<(u32, CacheDomain)>) = if caps.vendor.is_amd_like() {
            let l3 = topo.l3_domains_in_cpu_order();
            (
                LabelKind::CoreComplex,
                l3.into_iter().map(|d| (d.get(), d)).collect(),
            )
        } else if topo.l3_is_per_package() {
            let list = topo
                .packages_in_cpu_order()
                .into_iter()
                .filter_map(|p| {
                    let cpu = topo.cpus_in_package(p).first()?;
                    Some((p, topo.get(cpu)?.l3?))
                })
                .collect();
            (LabelKind::Socket, list)
        } else {
            let l3 = topo.l3_domains_in_cpu_order();
            (
                LabelKind::DomainId,
                l3.into_iter().map(|d| (d.get(), d)).collect(),
            )
        };
        let mut list = cpu_order.clone();
        list.sort_unstable_by_key(|(id, _)| *id);
        Self {
            kind,
            list,
            cpu_order,
        }
    }

    /// The cache domain of a user-visible id.
    #[must_use]
    pub fn find(&self, id: u32) -> Option<CacheDomain> {
        self.list.iter().find(|(i, _)| *i == id).map(|(_, d)| *d)
    }

    /// The ids, for messages (`0,1`).
    #[must_use]
    pub fn ids(&self) -> String {
        join(self.list.iter().map(|(i, _)| i))
    }

    /// The label of `-e` lines: `SOCKET 0`, `Core Complex 0`, `Domain ID 0`.
    #[must_use]
    pub fn alloc_label(&self, id: u32) -> String {
        match self.kind {
            LabelKind::Socket => format!("SOCKET {id}"),
            LabelKind::CoreComplex => format!("Core Complex {id}"),
            LabelKind::DomainId => format!("Domain ID {id}"),
        }
    }

    /// The label of `-s` headers: `Socket 0`, `L3 Cluster (or Core Complex) 0`, `Domain ID 0`.
    #[must_use]
    pub fn show_label(&self, id: u32) -> String {
        match self.kind {
            LabelKind::Socket => format!("Socket {id}"),
            LabelKind::CoreComplex => format!("L3 Cluster (or Core Complex) {id}"),
            LabelKind::DomainId => format!("Domain ID {id}"),
        }
    }
}

/// Joins displayable items with commas.
pub fn join<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

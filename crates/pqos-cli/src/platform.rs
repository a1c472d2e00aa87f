//! The final wiring: which backend a plan runs on.
//!
//! - `--sim[=MODEL]`: [`MsrBackend`] over the simulated platform of `rdt-sim`
//!   (`SimHandle` is both its MSRs and its PMU), loaded from and saved to a state file so that
//!   separate runs see one machine.
//! - native, `--iface=msr` or `auto`: [`MsrBackend`] over `/dev/cpu/N/msr`, capabilities
//!   from the CPUID instruction, topology from sysfs. IPC and LLC misses need perf events,
//!   which are not wired yet ([`NoPmu`]: the columns are left out).
//! - `--iface=os` / `-I`: not implemented yet.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use rdt_core::{Capabilities, NativeCpuid, NoPmu, Topology, explain_no_rdt};
use rdt_msr::{DevCpuMsr, MsrBackend};
use rdt_sim::{BUILTIN_MODELS, SimHandle, SimPlatform};

use crate::command::{Iface, OS_IFACE_NOT_IMPLEMENTED, Plan, Source};
use crate::commands::{AdvancingClock, Clock, Context, RealClock, VirtualClock, execute};

/// Runs `plan` on the platform it names.
///
/// # Errors
/// The platform cannot be opened (no RDT, no MSR access, unknown model, bad state file), or
/// the action failed.
pub fn run(
    plan: &Plan,
    stop: &std::sync::atomic::AtomicBool,
    stdout_is_tty: bool,
    out: &mut dyn Write,
) -> Result<()> {
    match &plan.source {
        Source::Sim {
            model,
            state,
            virtual_clock,
        } => run_sim(
            plan,
            model,
            state.as_deref(),
            *virtual_clock,
            stop,
            stdout_is_tty,
            out,
        ),
        Source::Native(iface) => run_native(plan, *iface, stop, stdout_is_tty, out),
    }
}

/// `$XDG_RUNTIME_DIR/rdt-sim-<model>.json`, or the same name in the temp dir.
fn default_state_path(identity: &str) -> PathBuf {
    let name: String = identity
        .strip_prefix("builtin:")
        .unwrap_or(identity)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    dir.join(format!("rdt-sim-{name}.json"))
}

fn open_sim(model: &str) -> Result<SimPlatform> {
    if BUILTIN_MODELS.contains(&model) {
        return Ok(SimPlatform::builtin(model)?);
    }
    let path = Path::new(model);
    if !path.exists() {
        bail!(
            "--sim={model}: not a built-in model ({}) and no such CPUID dump file",
            BUILTIN_MODELS.join(", ")
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--sim={model}: reading the CPUID dump"))?;
    SimPlatform::from_dump(&text).with_context(|| format!("--sim={model}"))
}

fn run_sim(
    plan: &Plan,
    model: &str,
    state: Option<&Path>,
    virtual_clock: bool,
    stop: &std::sync::atomic::AtomicBool,
    stdout_is_tty: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut platform = open_sim(model)?;
    let state_path = state.map_or_else(
        || default_state_path(platform.identity()),
        Path::to_path_buf,
    );
    if state_path.exists() {
        platform.load_from(&state_path).with_context(|| {
            format!(
                "loading the simulated platform's state from {} (delete the file to start afresh, \
                 or choose another with --sim-state)",
                state_path.display()
            )
        })?;
    }
    eprintln!(
        "NOTE: simulated platform ({}); nothing here touches real hardware",
        platform.model()
    );
    if plan.verbosity > 0 {
        eprintln!("INFO: simulator state file: {}", state_path.display());
        for note in platform.notes() {
            eprintln!("INFO: simulator: {note}");
        }
    }
    let caps = platform.capabilities().clone();
    let topo = platform.topology().clone();
    let sim = SimHandle::new(platform);
    let result = MsrBackend::new(sim.clone(), caps, topo, sim.clone())
        .context("opening the MSR backend on the simulated platform")
        .and_then(|mut backend| {
            let advance = |dt| sim.advance(dt);
            let mut clock: Box<dyn Clock> = if virtual_clock {
                Box::new(VirtualClock::new(advance))
            } else {
                Box::new(AdvancingClock::new(advance))
            };
            let mut ctx = Context {
                clock: clock.as_mut(),
                stop,
                stdout_is_tty,
            };
            execute(&mut backend, plan, &mut ctx, out)
        });
    // The state is saved even after a failure: a failed write leaves the platform as the
    // writes before it made it, as on hardware.
    let saved = sim.lock().save_to(&state_path).with_context(|| {
        format!(
            "saving the simulated platform's state to {}",
            state_path.display()
        )
    });
    result.and(saved)
}

fn run_native(
    plan: &Plan,
    iface: Iface,
    stop: &std::sync::atomic::AtomicBool,
    stdout_is_tty: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if iface == Iface::Os {
        bail!("{OS_IFACE_NOT_IMPLEMENTED}");
    }
    let cpuid = NativeCpuid;
    if let Some(why) = explain_no_rdt(&cpuid) {
        bail!("this CPU has no Intel RDT or AMD PQoS: {why}");
    }
    let caps = Capabilities::detect(&cpuid);
    let topo = Topology::from_sysfs(Path::new(Topology::DEFAULT_SYSFS))
        .with_context(|| format!("reading the CPU topology from {}", Topology::DEFAULT_SYSFS))?;
    if plan.verbosity > 0 {
        eprintln!("INFO: Selected interface: MSR");
    }
    if Path::new("/sys/fs/resctrl/cpus").exists() {
        eprintln!(
            "WARN: resctl filesystem mounted! Using MSR interface may corrupt resctrl filesystem \
             and cause unexpected behaviour"
        );
    }
    let mut backend = MsrBackend::new(DevCpuMsr::new(), caps, topo, NoPmu)
        .context("opening the MSR interface")?;
    let mut clock = RealClock::new();
    let mut ctx = Context {
        clock: &mut clock,
        stop,
        stdout_is_tty,
    };
    execute(&mut backend, plan, &mut ctx, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_state_file_is_named_after_the_model() {
        let p = default_state_path("builtin:broadwell-ep");
        assert_eq!(p.file_name().unwrap(), "rdt-sim-broadwell-ep.json");
        let p = default_state_path("dump:fnv1a64:00ab");
        assert_eq!(p.file_name().unwrap(), "rdt-sim-dump-fnv1a64-00ab.json");
    }
}

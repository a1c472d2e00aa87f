//! The final wiring: which backend a plan runs on.
//!
//! - `--sim[=MODEL]`: [`MsrBackend`] over the simulated platform of `rdt-sim`
//!   (`SimHandle` is both its MSRs and its PMU), loaded from and saved to a state file so that
//!   separate runs see one machine.
//! - native, `--iface=msr` or `auto`: [`MsrBackend`] over `/dev/cpu/N/msr`, capabilities
//!   from the CPUID instruction, topology from sysfs. IPC and LLC misses from perf events
//!   ([`rdt::PerfPmu`]); where the host has no PMU ([`NoPmu`]) their cells stay blank.
//! - native with `--sysroot DIR`: the same code path with `/dev/cpu` and `/sys` under DIR
//!   (as `rdt::Rdt::open_at` with `rdt::Paths::under`): `DIR/dev/cpu/N/msr`, CPUID from
//!   `DIR/dev/cpu/0/cpuid` (the instruction if that device is missing), topology from
//!   `DIR/sys/devices/system`. A mounted `rdt-sim` is such a DIR.
//! - `--iface=os` / `-I` (native, or with `--sysroot DIR`): [`rdt::Rdt`] on the OS interface,
//!   the resctrl filesystem at `/sys/fs/resctrl` (`DIR/sys/fs/resctrl`), as
//!   `rdt::Rdt::open_at(rdt::Iface::Os, ..)` opens it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use rdt::Paths;
use rdt_core::{
    Capabilities, CpuidSource, DevCpuid, LogicalCpu, NativeCpuid, NoPmu, PmuCaps, Topology,
    explain_no_rdt,
};
use rdt_msr::{DevCpuMsr, MsrBackend};
use rdt_sim::{BUILTIN_MODELS, Scenario, SimHandle, SimPlatform};

use crate::command::{Command, Iface, Plan, SimOptions, Source};
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
        Source::Sim(sim) => run_sim(plan, sim, stop, stdout_is_tty, out),
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
    opts: &SimOptions,
    stop: &std::sync::atomic::AtomicBool,
    stdout_is_tty: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut platform = open_sim(&opts.model)?;
    let state_path = opts.state.as_deref().map_or_else(
        || default_state_path(platform.identity()),
        Path::to_path_buf,
    );
    let _lock = lock_state(&state_path)?;
    if state_path.exists() {
        platform.load_from(&state_path).with_context(|| {
            format!(
                "loading the simulated platform's state from {} (delete the file to start afresh, \
                 or choose another with --sim-state)",
                state_path.display()
            )
        })?;
    }
    if let Some(path) = &opts.scenario {
        let scenario = Scenario::from_path(path)
            .with_context(|| format!("--sim-scenario {}", path.display()))?;
        platform
            .set_scenario(&scenario)
            .with_context(|| format!("--sim-scenario {}", path.display()))?;
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
            let mut clock: Box<dyn Clock> = if opts.virtual_clock {
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

/// How long a `--sim` run waits for another run on the same state file to finish.
const STATE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Takes an exclusive lock on `<state>.lock` for the whole run, so two `pqos --sim` runs on
/// one state file behave as two tools on one machine taking turns, instead of the last one
/// to save silently undoing the other's changes. Waits up to [`STATE_LOCK_WAIT`].
fn lock_state(state_path: &Path) -> Result<std::fs::File> {
    let mut lock_path = state_path.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = std::path::PathBuf::from(lock_path);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening the simulator lock file {}", lock_path.display()))?;
    let deadline = std::time::Instant::now() + STATE_LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => bail!(
                "another pqos is using the simulated platform in {} (still busy after {} s); \
                 wait for it or choose another state file with --sim-state",
                state_path.display(),
                STATE_LOCK_WAIT.as_secs()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", lock_path.display()));
            }
        }
    }
}

fn run_native(
    plan: &Plan,
    iface: Iface,
    stop: &std::sync::atomic::AtomicBool,
    stdout_is_tty: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(dir) = plan.sysroot.as_deref().filter(|d| !d.is_dir()) {
        bail!("--sysroot {}: no such directory", dir.display());
    }
    let paths = plan
        .sysroot
        .as_deref()
        .map_or_else(Paths::host, Paths::under);
    if iface == Iface::Os {
        let mut rdt =
            rdt::Rdt::open_at(rdt::Iface::Os, &paths).context("opening the OS interface")?;
        if plan.verbosity > 0 {
            eprintln!("INFO: Selected interface: OS");
        }
        let mut clock = RealClock::new();
        let mut ctx = Context {
            clock: &mut clock,
            stop,
            stdout_is_tty,
        };
        return execute(&mut rdt, plan, &mut ctx, out);
    }
    // With --sysroot, CPUID comes from DIR/dev/cpu/0/cpuid as in rdt::Rdt::open_at.
    let dev_cpuid = plan
        .sysroot
        .as_deref()
        .and_then(|dir| DevCpuid::open(&dir.join("dev"), LogicalCpu::new(0)).ok());
    let cpuid: &dyn CpuidSource = match &dev_cpuid {
        Some(dev) => dev,
        None => &NativeCpuid,
    };
    if let Some(why) = explain_no_rdt(cpuid) {
        bail!("this CPU has no Intel RDT or AMD PQoS: {why}");
    }
    let mut caps = Capabilities::detect(cpuid);
    let topo = Topology::from_sysfs(&paths.sys_devices_system).with_context(|| {
        format!(
            "reading the CPU topology from {}",
            paths.sys_devices_system.display()
        )
    })?;
    if plan.verbosity > 0 {
        eprintln!("INFO: Selected interface: MSR");
        if let Some(dev) = &dev_cpuid {
            eprintln!("INFO: CPUID from {}", dev.path().display());
        }
    }
    let resctrl_cpus = plan
        .sysroot
        .as_deref()
        .unwrap_or(Path::new("/"))
        .join("sys/fs/resctrl/cpus");
    if resctrl_cpus.exists() {
        eprintln!(
            "WARN: resctl filesystem mounted! Using MSR interface may corrupt resctrl filesystem \
             and cause unexpected behaviour"
        );
    }
    // IPC and LLC misses through perf_event_open. A host without a PMU (most VMs) has no
    // source: monitoring then says so once and leaves those cells blank, while `-d` still
    // shows what CPUID enumerates.
    let pmu: Box<dyn rdt_core::PmuSource> = match rdt::PerfPmu::open(&topo.all_cpus()) {
        Ok(pmu) => Box::new(pmu),
        Err(e) => {
            log::debug!("{:#}", anyhow::Error::new(e));
            if !matches!(plan.command, Command::Display { .. }) {
                caps.pmu = PmuCaps::default();
            }
            Box::new(NoPmu)
        }
    };
    let mut backend = MsrBackend::new(DevCpuMsr::with_root(&paths.dev_cpu), caps, topo, pmu)
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
    use std::sync::atomic::AtomicBool;

    use clap::Parser;

    use super::*;
    use crate::args::Args;

    /// Runs `pqos --sim=MODEL --sim-state STATE --sim-virtual-clock ARGV...` in-process.
    fn pqos(model: &str, state: &Path, argv: &[&str]) -> (Result<()>, String) {
        let mut full = vec![
            "pqos".to_owned(),
            format!("--sim={model}"),
            "--sim-virtual-clock".into(),
        ];
        full.push("--sim-state".into());
        full.push(state.to_str().unwrap().into());
        full.extend(argv.iter().map(|a| (*a).to_owned()));
        let plan = Plan::from_args(Args::try_parse_from(full).unwrap()).unwrap();
        let mut out = Vec::new();
        let r = run(&plan, &AtomicBool::new(false), false, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn seed_paper_commands_on_the_simulated_broadwell() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        // act: separate invocations share the state file
        let (r, e_out) = pqos(
            "broadwell-ep",
            &state,
            &["-e", "llc:1=0xffe00;llc:2=0x00003"],
        );
        r.unwrap();
        let (r, a_out) = pqos("broadwell-ep", &state, &["-a", "llc:1=2-7;llc:2=8-10"]);
        r.unwrap();
        let (r, s_out) = pqos("broadwell-ep", &state, &["-s"]);
        r.unwrap();
        let (r, m_out) = pqos(
            "broadwell-ep",
            &state,
            &["-m", "all:[2-7];all:[8-10]", "-t", "1"],
        );
        r.unwrap();
        // assert
        assert_eq!(
            e_out,
            "SOCKET 0 L3CA COS1 => MASK 0xffe00\nSOCKET 1 L3CA COS1 => MASK 0xffe00\n\
             SOCKET 0 L3CA COS2 => MASK 0x3\nSOCKET 1 L3CA COS2 => MASK 0x3\n\
             Allocation configuration altered.\n"
        );
        assert_eq!(a_out, "Allocation configuration altered.\n");
        assert!(
            s_out.contains("    L3CA COS1 => MASK 0xffe00\n    L3CA COS2 => MASK 0x3\n"),
            "{s_out}"
        );
        assert!(
            s_out.contains("    Core 2, L2ID ") && s_out.contains(" => COS1, RMID0\n"),
            "{s_out}"
        );
        assert_eq!(m_out.matches("TIME ").count(), 2, "{m_out}");
        assert!(
            m_out.contains("\n     2-7 ") && m_out.contains("\n    8-10 "),
            "{m_out}"
        );
    }

    #[test]
    fn every_builtin_model_displays_and_shows() {
        let dir = tempfile::tempdir().unwrap();
        for model in BUILTIN_MODELS {
            let state = dir.path().join(format!("{model}.json"));
            let (r, out) = pqos(model, &state, &["-d"]);
            r.unwrap();
            assert!(out.starts_with("Hardware capabilities\n"), "{model}: {out}");
            let (r, out) = pqos(model, &state, &["-s"]);
            r.unwrap();
            assert!(
                out.contains("Core information for socket 0:\n"),
                "{model}: {out}"
            );
        }
    }

    #[test]
    fn rejected_definition_leaves_the_simulated_platform_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let (r, _) = pqos("skylake-sp", &state, &["-s"]);
        r.unwrap();
        let before = std::fs::read_to_string(&state).unwrap();
        let (r, out) = pqos("skylake-sp", &state, &["-e", "llc:1=0xf;llc:2=0xfff"]);
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            e.contains("\"2=0xfff\" in \"llc:2=0xfff\"") && e.contains("11-bit"),
            "{e}"
        );
        assert_eq!(out, "Allocation configuration error!\n");
        assert_eq!(std::fs::read_to_string(&state).unwrap(), before);
    }

    #[test]
    fn unknown_model_names_the_built_in_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _) = pqos("no-such-model", &dir.path().join("s.json"), &["-d"]);
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("--sim=no-such-model") && e.contains("broadwell-ep"),
            "{e}"
        );
    }

    #[test]
    fn default_state_file_is_named_after_the_model() {
        let p = default_state_path("builtin:broadwell-ep");
        assert_eq!(p.file_name().unwrap(), "rdt-sim-broadwell-ep.json");
        let p = default_state_path("dump:fnv1a64:00ab");
        assert_eq!(p.file_name().unwrap(), "rdt-sim-dump-fnv1a64-00ab.json");
    }
}

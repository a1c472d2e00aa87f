//! The final wiring: the library opens the platform a plan names, the action runs on it.
//!
//! Every platform is opened by the library ([`rdt_pqos::OpenOptions`]): the host or a `--sysroot`
//! directory with [`rdt_pqos::OpenOptions::open`], the in-process simulated platform (`--sim`,
//! feature `sim`) with [`rdt_pqos::OpenOptions::open_source`]. The interface is resolved there,
//! as pqos v25.04 resolves it. What stays here is pqos's wording: the `WARN:` line of a
//! notice, the hint of an error, the simulator's `NOTE:` line.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, anyhow};

use crate::command::{Command, Plan, Source};
use crate::commands::{Context, RealClock, execute};

/// Runs `plan` on the platform it names.
///
/// # Errors
/// The platform cannot be opened (no RDT, no MSR access, unknown model, bad state file), or
/// the action failed.
pub fn run(plan: &Plan, stop: &AtomicBool, stdout_is_tty: bool, out: &mut dyn Write) -> Result<()> {
    match &plan.source {
        Source::Sim(sim) => sim::run(plan, sim, stop, stdout_is_tty, out),
        Source::Native(_) => {
            if let (Command::Display { verbose }, None, None) =
                (&plan.command, plan.mon_reset, plan.alloc_reset)
            {
                // A report needs the capabilities only, not the per-CPU topology a backend
                // is opened with.
                let report = plan.open_options().capabilities().map_err(open_error)?;
                warn(&report.notices, plan.json, out)?;
                return crate::commands::caps::run_display_report(
                    &report, *verbose, plan.json, out,
                );
            }
            let mut rdt = plan.open_options().open().map_err(open_error)?;
            warn(rdt.notices(), plan.json, out)?;
            if let (Command::Tables(req), Source::Native(iface)) = (&plan.command, &plan.source) {
                return native_tables(req, *iface, &rdt, plan, out);
            }
            let mut clock = RealClock::new();
            let proc = rdt_pqos::proc::ProcFs::at(&plan.open_options().get_paths().proc);
            let mut ctx = Context {
                clock: &mut clock,
                stop,
                stdout_is_tty,
                proc: &proc,
            };
            execute(&mut rdt, plan, &mut ctx, out)
        }
    }
}

/// pqos v26.03's table reports and dumps on this machine (or `--sysroot`): the ACPI tables
/// under `sys/firmware/acpi/tables`, the registers through `dev/mem`.
fn native_tables(
    req: &crate::args::tables::TablesRequest,
    iface: rdt_pqos::Iface,
    rdt: &impl rdt_pqos::Backend,
    plan: &Plan,
    out: &mut dyn Write,
) -> Result<()> {
    let root = plan
        .sysroot
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("/"));
    let tables = rdt_mmio::AcpiTables::read(&root)?;
    let facts = crate::commands::tables::Facts {
        mmio: crate::commands::tables::mmio_in_use(iface, &tables),
        msr: rdt.interface() == rdt_pqos::Interface::Msr,
        packages: rdt.topology().packages().len(),
        l3_cat: rdt
            .capabilities()
            .l3_cat
            .get()
            .map(|c| (c.num_classes, c.cbm_len)),
        sysroot: root.clone(),
    };
    let mut io =
        || -> Result<Box<dyn rdt_mmio::MmioIo>> { Ok(Box::new(rdt_mmio::DevMem::open(&root)?)) };
    crate::commands::tables::run(req, &tables, &facts, &mut io, out)
}

/// pqos's `WARN:` lines for the notices of an open.
fn warn(notices: &[rdt_pqos::Notice], json: bool, out: &mut dyn Write) -> Result<()> {
    for notice in notices {
        match notice {
            // Reclaimed monitoring is already a WARN record of the library (the logger
            // writes it to stderr or the -l file).
            rdt_pqos::Notice::Reclaimed(_) => {}
            // pqos's own warning: on stdout after the banner, where its library logs
            // (pqos/main.c: `cfg.fd_log = STDOUT_FILENO` without -l); stderr under `-u json`,
            // whose stdout carries JSON only.
            rdt_pqos::Notice::ResctrlMountedOnMsr { .. } if !json => {
                writeln!(out, "WARN: {}", pqos_words(notice))?;
            }
            // This tool's own notices (a rolled-back change, a split CDP state) are not pqos
            // lines: stderr, where scripts reading pqos's stdout miss nothing.
            _ => eprintln!("WARN: {}", pqos_words(notice)),
        }
    }
    Ok(())
}

/// pqos's line for a notice of the library.
fn pqos_words(notice: &rdt_pqos::Notice) -> String {
    match notice {
        rdt_pqos::Notice::ResctrlMountedOnMsr { .. } => "resctl filesystem mounted! Using MSR \
             interface may corrupt resctrl filesystem and cause unexpected behaviour"
            .to_owned(),
        other => other.to_string(),
    }
}

/// The library's open error, with what an operator can do about it.
fn open_error(e: rdt_pqos::OpenError) -> anyhow::Error {
    match e {
        rdt_pqos::OpenError::NoRdt(_) if cfg!(feature = "sim") => {
            anyhow!("{e}; to try pqos without RDT hardware, use the simulated platform: pqos --sim")
        }
        rdt_pqos::OpenError::Iface(rdt_pqos::IfaceError::SourceHasNoOs { because, .. }) => {
            let why = match because {
                rdt_pqos::OsWanted::Explicit => String::new(),
                rdt_pqos::OsWanted::Option(option) => format!(" ('{option}' needs it)"),
                rdt_pqos::OsWanted::RdtIface => " (RDT_IFACE asks for it)".to_owned(),
            };
            anyhow!("{SIM_HAS_NO_OS_IFACE}{why}")
        }
        e => e.into(),
    }
}

/// Why the in-process simulated platform cannot serve the OS interface, and what to do.
pub const SIM_HAS_NO_OS_IFACE: &str = "the in-process simulated platform (--sim) has the MSR \
     interface only; to use the OS (resctrl) interface, mount the simulated platform \
     (rdt-sim mount DIR) and run pqos --sysroot DIR --iface=os";

#[cfg(feature = "sim")]
mod sim {
    use std::io::Write;
    use std::sync::atomic::AtomicBool;

    use anyhow::{Context as _, Result, anyhow};
    use rdt_pqos::sim::{KernelVersion, SessionError, SessionOptions};

    use super::open_error;
    use crate::command::{Command, Plan, SimOptions};
    use crate::commands::{AdvancingClock, Clock, Context, VirtualClock, execute};

    /// Runs `plan` on the persistent in-process simulated platform the library opens
    /// ([`rdt_pqos::OpenOptions::simulate`]); its state is saved afterwards, even after a
    /// failure (a failed write leaves the platform as the writes before it made it, as on
    /// hardware). pqos's clock drives the model: it advances as pqos sleeps, or only
    /// virtually with `--sim-virtual-clock`.
    pub fn run(
        plan: &Plan,
        opts: &SimOptions,
        stop: &AtomicBool,
        stdout_is_tty: bool,
        out: &mut dyn Write,
    ) -> Result<()> {
        let kernel = opts
            .kernel
            .as_deref()
            .map(str::parse::<KernelVersion>)
            .transpose()
            .map_err(|e| anyhow!("--sim-kernel: {e}"))?
            .unwrap_or_default();
        let session = SessionOptions {
            state: opts.state.clone(),
            scenario: opts.scenario.clone(),
            kernel,
            read_only: plan.only_reads(),
            fresh: opts.fresh,
            ..SessionOptions::new(&opts.model)
        };
        let mut rdt = plan
            .open_options()
            .simulate(session)
            .open()
            .map_err(|e| match e {
                rdt_pqos::OpenError::Sim(e) => sim_error(e, &opts.model),
                e => open_error(e),
            })?;
        let Some(session) = rdt.simulated() else {
            return Err(anyhow!("--sim: the library opened no simulated platform"));
        };
        let sim = session.handle().clone();
        let state = session.state_path().to_owned();
        eprintln!(
            "NOTE: simulated platform ({}); nothing here touches real hardware",
            sim.lock().model()
        );
        if let Some(note) = rdt_pqos::sim::not_fresh_note(session) {
            eprintln!("NOTE: {note}");
        }
        if plan.verbosity > 0 {
            eprintln!("INFO: simulator state file: {}", state.display());
            for note in sim.lock().notes() {
                eprintln!("INFO: simulator: {note}");
            }
        }
        let advance = |dt| sim.advance(dt);
        let mut clock: Box<dyn Clock> = if opts.virtual_clock {
            Box::new(VirtualClock::new(advance))
        } else {
            Box::new(AdvancingClock::new(advance))
        };
        let proc = rdt_pqos::proc::ProcFs::host();
        let mut ctx = Context {
            clock: clock.as_mut(),
            stop,
            stdout_is_tty,
            proc: &proc,
        };
        let result = if let Command::Tables(req) = &plan.command {
            let l3_cat = rdt_pqos::Backend::capabilities(&rdt)
                .l3_cat
                .get()
                .map(|c| (c.num_classes, c.cbm_len));
            tables(req, opts.iface, l3_cat, &sim, out)
        } else {
            execute(&mut rdt, plan, &mut ctx, out)
        };
        let saved = rdt.save_simulated().with_context(|| {
            format!(
                "saving the simulated platform's state to {}",
                state.display()
            )
        });
        result.and(saved)
    }

    /// pqos v26.03's table reports and dumps on the simulated platform: the tables its model
    /// serves, its registers in-process.
    fn tables(
        req: &crate::args::tables::TablesRequest,
        iface: rdt_pqos::Iface,
        l3_cat: Option<(u32, u32)>,
        sim: &rdt_pqos::sim::SimHandle,
        out: &mut dyn Write,
    ) -> Result<()> {
        let (tables, packages) = {
            let p = sim.lock();
            let tables = match p.mmio() {
                Some(m) => {
                    rdt_mmio::AcpiTables::from_bytes(m.tables(), Some(m.cxl_windows().to_vec()))?
                }
                None => rdt_mmio::AcpiTables::default(),
            };
            (tables, p.topology().packages().len())
        };
        let facts = crate::commands::tables::Facts {
            mmio: crate::commands::tables::mmio_in_use(iface, &tables),
            // the in-process simulated platform has the MSR interface only
            msr: true,
            packages,
            l3_cat,
            // it serves no PCI devices
            sysroot: std::path::PathBuf::from("/nonexistent"),
        };
        let handle = sim.clone();
        let mut io = move || -> Result<Box<dyn rdt_mmio::MmioIo>> { Ok(Box::new(handle.clone())) };
        crate::commands::tables::run(req, &tables, &facts, &mut io, out)
    }

    /// The library's session error, with pqos's flags for what to do.
    fn sim_error(e: SessionError, model: &str) -> anyhow::Error {
        match e {
            SessionError::Busy { .. } => {
                anyhow!("{e}; wait for it or choose another state file with --sim-state")
            }
            SessionError::NoSuchModel { .. } => anyhow!("--sim={model}: {e}"),
            SessionError::StateDir { .. } => anyhow!("{e}, e.g. --sim-state FILE"),
            SessionError::Scenario { .. } | SessionError::Load { .. } => e.into(),
            e => anyhow::Error::new(e).context(format!("--sim={model}")),
        }
    }
}

#[cfg(not(feature = "sim"))]
mod sim {
    use std::io::Write;
    use std::sync::atomic::AtomicBool;

    use anyhow::{Result, bail};

    use crate::command::{Plan, SimOptions};

    /// This `pqos` was built without the simulated platform.
    pub fn run(
        _plan: &Plan,
        _opts: &SimOptions,
        _stop: &AtomicBool,
        _stdout_is_tty: bool,
        _out: &mut dyn Write,
    ) -> Result<()> {
        bail!(
            "--sim: this pqos was built without the simulated platform (cargo feature `sim` \
             of pqos-cli); rebuild with default features, or mount one with rdt-sim and use \
             --sysroot DIR"
        )
    }
}

#[cfg(test)]
#[cfg(feature = "sim")]
mod tests {
    use std::path::Path;

    use clap::Parser as _;
    use rdt_sim::BUILTIN_MODELS;

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
    fn the_os_interface_is_served_in_process_and_kept_between_runs() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        // act: the first -I mounts the in-process resctrl, the second finds its group
        // (skylake-sp's kernel hides L3 CAT from resctrl unless booted with rdt=l3cat)
        let skx = "skylake-sp:rdt=l3cat";
        let (r, e_out) = pqos(skx, &state, &["-I", "-e", "llc:1=0xf"]);
        r.unwrap();
        let (r, s_out) = pqos(skx, &state, &["--iface=os", "-s"]);
        r.unwrap();
        let (r, msr_out) = pqos(skx, &state, &["--iface=msr", "-s"]);
        r.unwrap();
        // assert
        assert!(
            e_out.contains("SOCKET 1 L3CA COS1 => MASK 0xf\n"),
            "{e_out}"
        );
        assert!(s_out.contains("    L3CA COS1 => MASK 0xf\n"), "{s_out}");
        assert!(
            msr_out.contains("    L3CA COS1 => MASK 0xf\n"),
            "the registers hold it too: {msr_out}"
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
        let (r, _) = pqos("skylake-sp", &state, &["-R"]);
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
    fn read_only_commands_leave_the_state_file_alone_and_changes_replace_it() {
        use std::os::unix::fs::MetadataExt;
        // arrange: a state file the first run that changes something creates (a read-only
        // command creates none)
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        pqos("skylake-sp", &state, &["-s"]).0.unwrap();
        assert!(!state.exists(), "-s saved a state");
        pqos("skylake-sp", &state, &["-R"]).0.unwrap();
        let inode = || std::fs::metadata(&state).unwrap().ino();
        let first = inode();
        // act + assert: each save renames a new file over the state, so a new inode means a
        // rewrite
        for argv in [&["-s"][..], &["-d"], &["-D"], &["-s", "-v"]] {
            pqos("skylake-sp", &state, argv).0.unwrap();
            assert_eq!(inode(), first, "{argv:?} rewrote the state file");
        }
        pqos("skylake-sp", &state, &["-e", "llc:1=0xf"]).0.unwrap();
        assert_ne!(inode(), first, "a change is saved");
    }

    #[test]
    fn a_state_file_that_is_a_symlink_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = dir.path().join("state.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let (r, out) = pqos("skylake-sp", &link, &["-e", "llc:1=0xf"]);
        assert_eq!(
            format!("{:#}", r.unwrap_err()),
            format!(
                "--sim=skylake-sp: File {} is a symlink (refused: name the state file itself)",
                link.display()
            )
        );
        assert_eq!(out, "");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
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

    /// The error of opening the in-process simulated platform for `argv` with `RDT_IFACE`
    /// set to `rdt_iface`, in pqos's words.
    fn sim_open_error(argv: &[&str], rdt_iface: Option<&str>) -> String {
        let mut full = vec!["pqos", "--sim"];
        full.extend_from_slice(argv);
        let plan = Plan::from_args(Args::try_parse_from(full).unwrap()).unwrap();
        let sim = rdt_sim::SimPlatform::builtin("broadwell-ep").unwrap();
        let source = rdt_pqos::MsrSource {
            capabilities: sim.capabilities().clone(),
            topology: sim.topology().clone(),
            name: "the simulated broadwell-ep".into(),
            run_dir: None,
            cpuid: None,
            os: None,
            mmio: None,
            io: Box::new(rdt_sim::SimHandle::new(sim)),
            pmu: Box::new(rdt_pqos::NoPmu),
        };
        let e = plan
            .open_options()
            .rdt_iface(rdt_iface.map(str::to_owned))
            .open_source(source)
            .map(|_| ())
            .unwrap_err();
        format!("{:#}", open_error(e))
    }

    #[test]
    fn the_simulated_platform_refuses_the_os_interface_saying_how_to_get_it() {
        let e = sim_open_error(&["-I", "-d"], None);
        assert!(
            e.contains("OS (resctrl) interface") && e.contains("rdt-sim mount DIR"),
            "{e}"
        );
        assert!(e.contains("--sysroot DIR --iface=os"), "{e}");
        let e = sim_open_error(&["-a", "pid:1=1234"], None);
        assert!(
            e.contains("rdt-sim mount DIR") && e.contains("(pid)"),
            "{e}"
        );
        let e = sim_open_error(&["-s"], Some("OS"));
        assert!(
            e.contains("rdt-sim mount DIR") && e.contains("RDT_IFACE"),
            "{e}"
        );
        let e = sim_open_error(&["--iface=msr", "-s"], Some("OS"));
        assert!(
            e.contains("restricted to use the OS interface only!"),
            "{e}"
        );
    }

    /// The `-s` lines of one `COS definitions for` section (`Core Complex N`).
    fn section(s: &str, ccx: u32) -> String {
        let header = format!("COS definitions for L3 Cluster (or Core Complex) {ccx}:\n");
        let start = s.find(&header).unwrap() + header.len();
        let rest = &s[start..];
        rest[..rest.find("COS definitions for").unwrap_or(rest.len())].to_owned()
    }

    #[test]
    fn smba_round_trips_on_genoa_through_the_msr_and_the_os_interface() {
        for iface in [&[][..], &["-I"]] {
            // arrange
            let dir = tempfile::tempdir().unwrap();
            let state = dir.path().join("s.json");
            let run = |argv: &[&str]| {
                let full: Vec<&str> = iface.iter().chain(argv).copied().collect();
                let (r, out) = pqos("genoa", &state, &full);
                r.map(|()| out)
            };
            // act: pqos/alloc.c set_smba_clos's lines
            let e = run(&["-e", "smba@3:2=16;smba@0,23:1=256"]).unwrap();
            // assert
            assert_eq!(
                e,
                "Core Complex 3 SMBA COS2 => 16 requested, 16 applied\n\
                 Core Complex 0 SMBA COS1 => 256 requested, 256 applied\n\
                 Core Complex 23 SMBA COS1 => 256 requested, 256 applied\n\
                 Allocation configuration altered.\n",
                "{iface:?}"
            );
            let s = run(&["-s"]).unwrap();
            let ccx3 = section(&s, 3);
            // print_per_l3_cluster_config: SMBA after MBA, AMD units, " available"
            assert!(
                ccx3.contains("    MBA COS2 => 2048 available\n")
                    && ccx3.contains(
                        "    SMBA COS1 => 2048 available\n    SMBA COS2 => 16 available\n"
                    ),
                "{iface:?}: {ccx3}"
            );
            assert!(ccx3.find("    MBA COS15").unwrap() < ccx3.find("    SMBA COS0").unwrap());
            assert!(section(&s, 23).contains("    SMBA COS1 => 256 available\n"));
            assert!(section(&s, 1).contains("    SMBA COS1 => 2048 available\n"));
            let json: serde_json::Value =
                serde_json::from_str(&run(&["-s", "-u", "json"]).unwrap()).unwrap();
            assert_eq!(json["smba"][3]["classes"][2]["amd_units"], 16, "{iface:?}");
            assert_eq!(json["mba"][3]["classes"][2]["amd_units"], 2048, "{iface:?}");
            // out of SMBA's range: nothing written
            let e = run(&["-e", "smba@5:1=2049"]).unwrap_err().to_string();
            assert!(e.contains("out of range (from 1-2048)"), "{e}");
            assert!(
                section(&run(&["-s"]).unwrap(), 5).contains("    SMBA COS1 => 2048 available\n")
            );
            // -R: every SMBA class back to 2^width
            assert_eq!(run(&["-R"]).unwrap(), "Allocation reset successful\n");
            let s = run(&["-s"]).unwrap();
            assert!(
                !s.contains("SMBA COS2 => 16") && !s.contains("=> 256 available"),
                "{s}"
            );
            assert_eq!(
                s.matches("    SMBA COS2 => 2048 available\n").count(),
                24,
                "{iface:?}"
            );
        }
    }

    #[test]
    fn smba_is_refused_by_name_where_the_platform_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let (r, out) = pqos("milan", &dir.path().join("s.json"), &["-e", "smba:1=8"]);
        assert_eq!(
            r.unwrap_err().to_string(),
            "\"smba:1=8\": SMBA is not supported on this platform"
        );
        assert_eq!(out, "Allocation configuration error!\n");
    }

    /// Enables io_alloc in the in-process turin saved at `state`, as an administrator
    /// would (`echo 1 > /sys/fs/resctrl/info/L3/io_alloc`), and opens it on the OS
    /// interface through the library (the session holds the in-process resctrl: keep it
    /// while the platform is used).
    fn turin_with_io_alloc(state: &Path) -> (rdt_sim::session::Session, rdt_pqos::Rdt) {
        use rdt_sim::session::{Session, SessionOptions};
        let session = Session::open(&SessionOptions {
            state: Some(state.to_owned()),
            ..SessionOptions::new("turin")
        })
        .unwrap();
        session
            .resctrl()
            .files()
            .write("info/L3/io_alloc", b"1\n")
            .unwrap();
        session.save().unwrap();
        let sim = session.handle().clone();
        let (capabilities, topology) = {
            let platform = sim.lock(); // released before the library opens the platform
            (platform.capabilities().clone(), platform.topology().clone())
        };
        let source = rdt_pqos::MsrSource {
            io: Box::new(sim.clone()),
            pmu: Box::new(rdt_pqos::NoPmu),
            capabilities,
            topology,
            name: "the simulated turin".into(),
            run_dir: None,
            cpuid: None,
            os: Some(rdt_pqos::OsFace {
                files: session.resctrl().files(),
                mount: Box::new(session.resctrl().mount_control()),
                root: "sim:turin:/sys/fs/resctrl".into(),
            }),
            mmio: None,
        };
        let rdt = rdt_pqos::OpenOptions::new(rdt_pqos::Iface::Os)
            .open_source(source)
            .unwrap();
        (session, rdt)
    }

    #[test]
    fn io_alloc_on_turin_is_shown_and_its_closid_is_never_handed_out() {
        // arrange: 6.19 turin, io_alloc disabled as the kernel boots
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("t.json");
        let (r, d) = pqos("turin", &state, &["-I", "-d"]);
        r.unwrap();
        assert!(
            d.contains(
                "                Num COS: 16\n                I/O allocation (io_alloc): disabled\n"
            ),
            "{d}"
        );
        let (r, s) = pqos("turin", &state, &["-I", "-s"]);
        r.unwrap();
        assert!(
            s.contains("\nL3 I/O allocation (io_alloc): disabled\n"),
            "{s}"
        );
        // act: an administrator enables it
        let (session, mut rdt) = turin_with_io_alloc(&state);
        // assert: the kernel keeps CLOSID 15 (resctrl_io_alloc_closid); no lease gets it
        let io = rdt_pqos::BackendExt::io_alloc(&mut rdt).unwrap().unwrap();
        // one mask per L3 domain: the stock EPYC 9655 has 12
        assert_eq!((io.enabled, io.class.get(), io.masks.len()), (true, 15, 12));
        let free = rdt_pqos::transaction::free_classes(&mut rdt, &[]).unwrap();
        assert_eq!(free.last().map(|c| c.get()), Some(14), "{free:?}");
        let request = rdt_pqos::lease::ClassRequest {
            l3: Some(rdt_pqos::CatMask::Unified("ff".parse().unwrap())),
            ..Default::default()
        };
        let lease = rdt_pqos::lease::Lease::take(&mut rdt, &request).unwrap();
        assert_eq!(lease.class().get(), 14);
        lease.release().unwrap();
        drop((rdt, session));
        let (r, d) = pqos("turin", &state, &["-I", "-d"]);
        r.unwrap();
        assert!(
            d.contains("I/O allocation (io_alloc): enabled, COS15 reserved\n"),
            "{d}"
        );
        let (r, s) = pqos("turin", &state, &["-I", "-s"]);
        r.unwrap();
        assert!(
            s.contains(
                "\nL3 I/O allocation (io_alloc): enabled, COS15 reserved\n    L3ID 0 => MASK 0xffff\n"
            ),
            "{s}"
        );
        let (r, j) = pqos("turin", &state, &["-I", "-s", "-u", "json"]);
        r.unwrap();
        let j: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(j["io_alloc"]["class"], 15);
        assert_eq!(j["io_alloc"]["masks"][7]["mask"], "0xffff");
        let (r, j) = pqos("turin", &state, &["-I", "-d", "-u", "json"]);
        r.unwrap();
        let j: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(
            j["io_alloc"],
            serde_json::json!({"enabled": true, "class": 15})
        );
        // the MSR interface does not manage io_alloc: no line
        let (r, d) = pqos("turin", &state, &["--iface=msr", "-d"]);
        r.unwrap();
        assert!(!d.contains("io_alloc"), "{d}");
    }
}

//! The in-process simulated platform (feature `sim`): what `pqos --sim` runs on, opened by
//! [`OpenOptions::simulated`] without root, FUSE or RDT hardware.
//!
//! A simulated platform is a model of a real machine (a built-in one, [`BUILTIN_MODELS`], or
//! a CPUID dump file) whose registers answer like silicon and whose resctrl is the
//! kernel's, served in-process ([`rdt_sim::inprocess`]). It persists between programs in a
//! state file ([`rdt_sim::session`]: in this user's state directory by default,
//! [`rdt_sim::session::default_state_dir`]), so one program's changes are the next one's
//! platform, as on a host; [`Rdt`] saves it when dropped (or on
//! [`Rdt::save_simulated`]). Programs on one state file take turns: the file is locked while
//! a platform is open on it.
//!
//! Its clock follows the wall clock ([`rdt_sim::SimHandle::with_wall_clock`]): a program
//! that sleeps a second between two polls sees a second of the model's workloads
//! ([`rdt_sim::model`]). The MSR interface is chosen unless resctrl is asked for or was
//! mounted by an earlier program ([`crate::OsFace`]); journals, named classes and leases
//! live in `<state file>.run`.
//!
//! # Examples
//! ```
//! use rdt_pqos::{Backend, BackendExt, OpenOptions};
//!
//! let rdt = OpenOptions::simulated("broadwell-ep").open()?; // 2 × Xeon E5-2650L v4
//! assert_eq!(rdt.topology().all_cpus().len(), 56);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use rdt_sim::resctrl::KernelVersion;
pub use rdt_sim::session::{Session, SessionError, SessionOptions};
pub use rdt_sim::{BUILTIN_MODELS, DEFAULT_MODEL, SimError, SimHandle};

use std::path::Path;

use crate::{MsrSource, OpenError, OpenOptions, OsFace, Rdt};

/// The [`MsrSource`] of an open session: what the simulator's adapter gives for it
/// ([`rdt_sim::adapter::in_process`]: its registers and PMU (the model), capabilities and
/// topology, its run directory `<state>.run`, and its resctrl served in-process).
pub(crate) fn source_of(session: &Session) -> MsrSource {
    let parts = rdt_sim::adapter::in_process(session);
    // before the literal below, whose `cpuid` holds the platform's lock to its end
    let mmio = mmio_of(session);
    MsrSource {
        io: parts.io,
        pmu: parts.pmu,
        capabilities: parts.capabilities,
        topology: parts.topology,
        name: parts.name,
        run_dir: Some(parts.run_dir),
        cpuid: Some(Box::new(session.handle().lock().cpuid())),
        os: Some(OsFace {
            files: parts.files,
            mount: parts.mount,
            root: parts.resctrl_root,
        }),
        mmio,
    }
}

/// The model's MMIO interface (RDT 1.3: `xeon-rdt13`) and I/O RDT (`sapphire-rapids` too):
/// its tables as served, its registers through the session's handle; `None` on a model
/// without ERDT, MRRM or IRDT.
fn mmio_of(session: &Session) -> Option<crate::MmioFace> {
    let handle = session.handle().clone();
    let tables = {
        let p = handle.lock();
        let m = p.mmio()?;
        rdt_mmio::AcpiTables {
            erdt: m.erdt().cloned(),
            mrrm: m.mrrm().cloned(),
            irdt: m.irdt().cloned(),
            cxl_windows: Some(m.cxl_windows().to_vec()),
        }
    };
    (tables.has_mmio() || tables.irdt.is_some()).then(|| crate::MmioFace {
        tables,
        iordt_mem: Some(Box::new(handle.clone())),
        mem: Box::new(handle),
    })
}

impl OpenOptions {
    /// Options to open the in-process simulated platform `model` (a built-in model,
    /// [`BUILTIN_MODELS`], optionally with the kernel's `rdt=` boot option as
    /// `skylake-sp:rdt=l3cat`, or the path of a CPUID dump), with its state in this user's
    /// state directory and its clock following the wall clock; the interface is chosen as
    /// [`crate::Iface::Auto`] chooses it. For other choices (a state file, a scenario, the
    /// kernel release, a clock the program advances, the OS interface) use
    /// [`OpenOptions::simulate`].
    ///
    /// Needs no root, no FUSE and no RDT hardware: the platform is a model in this process
    /// ([module docs](crate::sim)).
    #[must_use]
    pub fn simulated(model: impl Into<String>) -> Self {
        let session = SessionOptions {
            wall_clock: true,
            ..SessionOptions::new(model)
        };
        Self::simulate(Self::new(crate::Iface::Auto), session)
    }

    /// Opens the in-process simulated platform `session` describes instead of the paths'
    /// (see [`OpenOptions::simulated`]); the requested interface, `RDT_IFACE`, the options
    /// that need the OS interface, the lock timeout and reclaiming apply as on a host.
    #[must_use]
    pub fn simulate(mut self, session: SessionOptions) -> Self {
        self.in_process = Some(session);
        self
    }

    /// Injects the mount control and the PMU counters of a simulated platform mounted with
    /// FUSE at `root`, as the simulator's adapter gives them ([`rdt_sim::attach`]): the
    /// OS interface remounts resctrl through the platform's control file, and where this
    /// host's perf events cannot count, IPC and LLC misses come from the model's counters.
    /// Each is used only while the platform serves it, so a directory that is not a
    /// simulated platform is opened as without them. [`OpenOptions::sysroot`] calls this.
    #[must_use]
    pub fn attach_simulator(self, root: &Path) -> Self {
        let mount = rdt_sim::attach(root);
        let pmu = mount.clone();
        self.resctrl_mount_control(move || mount.mount_control())
            .fallback_pmu(move || pmu.pmu())
    }

    /// The simulated platform these options open, if any.
    #[must_use]
    pub const fn get_simulated(&self) -> Option<&SessionOptions> {
        self.in_process.as_ref()
    }

    /// Opens the simulated platform: its session (the state file locked and loaded), then
    /// the source as [`OpenOptions::open_source`] opens one.
    pub(crate) fn open_simulated(&self, opts: &SessionOptions) -> Result<Rdt, OpenError> {
        let session = Session::open(opts).map_err(OpenError::Sim)?;
        let mut rdt = self.open_source(source_of(&session))?;
        rdt.session = Some(session);
        Ok(rdt)
    }
}

/// The sentence a program prints once when the simulated platform it opened is not as
/// reset ([`Session::changes_from_reset`]): `the simulated platform is as earlier runs left
/// it, not as reset: COS1 (L3 CAT), CPUs 2-7 in COS1 (--sim-fresh starts from reset)`;
/// `None` for a fresh platform. `pqos --sim` and `rdt-agent --sim` print it after `NOTE: `.
#[must_use]
pub fn not_fresh_note(session: &Session) -> Option<String> {
    let changes = session.changes_from_reset();
    (!changes.is_empty()).then(|| {
        format!(
            "the simulated platform is as earlier runs left it, not as reset: {} (--sim-fresh \
             starts from reset)",
            changes.join(", ")
        )
    })
}

impl Rdt {
    /// The simulated platform's session, when this platform is one
    /// ([`OpenOptions::simulated`]): its [`SimHandle`] (to advance a clock the program
    /// drives, to read the model), its state file.
    #[must_use]
    pub const fn simulated(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// Saves a simulated platform's state now ([`Session::save`]; dropping the platform
    /// saves it too, logging a failure). Nothing to do for other platforms.
    ///
    /// # Errors
    /// The state file cannot be written ([`SimError::Io`] names it).
    pub fn save_simulated(&self) -> Result<(), SimError> {
        self.session.as_ref().map_or(Ok(()), Session::save)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Backend, BackendExt, ClassId, Iface, Interface, LogicalCpu, MonEvents};

    fn options(dir: &std::path::Path, model: &str) -> OpenOptions {
        let session = SessionOptions {
            state: Some(dir.join("state.json")),
            wall_clock: true,
            ..SessionOptions::new(model)
        };
        OpenOptions::simulate(OpenOptions::new(Iface::Auto).rdt_iface(None), session)
    }

    #[test]
    fn a_change_persists_to_the_next_open_and_the_first_open_is_msr() {
        let dir = tempfile::tempdir().unwrap();
        let mut rdt = options(dir.path(), "broadwell-ep").open().unwrap();
        assert_eq!(rdt.interface(), Interface::Msr);
        rdt.associate(LogicalCpu::new(3), ClassId::new(2)).unwrap();
        drop(rdt); // saves
        let mut again = options(dir.path(), "broadwell-ep").open().unwrap();
        assert_eq!(again.class_of(LogicalCpu::new(3)).unwrap(), ClassId::new(2));
        assert!(dir.path().join("state.json.run").is_dir(), "its run dir");
    }

    #[test]
    fn the_os_interface_is_served_in_process() {
        let dir = tempfile::tempdir().unwrap();
        let rdt = options(dir.path(), "skylake-sp:rdt=l3cat")
            .needs_os("test")
            .open()
            .unwrap();
        assert_eq!(rdt.interface(), Interface::Os);
    }

    #[test]
    fn monitoring_sees_traffic_as_wall_time_passes() {
        let dir = tempfile::tempdir().unwrap();
        let mut rdt = options(dir.path(), "broadwell-ep").open().unwrap();
        let mut mon = rdt.monitoring();
        // CPUs 8-10 run the default scenario's cache thrasher
        let g = mon
            .start(&"8-10".parse().unwrap(), MonEvents::MBM_LOCAL)
            .unwrap();
        mon.poll().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        mon.poll().unwrap();
        let local = mon.values(g).unwrap().mbm_local_delta_bytes.unwrap();
        assert!(local > 0, "50 ms of the thrasher's traffic: {local}");
    }

    #[test]
    fn an_unknown_model_is_an_open_error_naming_the_models() {
        let dir = tempfile::tempdir().unwrap();
        let Err(e) = options(dir.path(), "pentium-4").open() else {
            panic!("opened an unknown model");
        };
        assert!(matches!(e, OpenError::Sim(_)), "{e:?}");
        assert!(e.to_string().contains("broadwell-ep"), "{e}");
    }

    #[test]
    fn a_second_open_on_one_state_file_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = options(dir.path(), "broadwell-ep").open().unwrap();
        let mut opts = options(dir.path(), "broadwell-ep");
        if let Some(s) = opts.in_process.as_mut() {
            s.lock_wait = Duration::from_millis(50);
        }
        let Err(e) = opts.open() else {
            panic!("two programs on one state file");
        };
        assert!(e.to_string().contains("another program"), "{e}");
        drop(first);
        opts.open().unwrap();
    }
}

//! `rdt_pqos`: Intel Resource Director Technology and AMD Platform QoS from Rust.
//!
//! Everything `pqos` does, as a library: detect what the processor can do from CPUID, program
//! cache allocation (CAT, CDP), memory bandwidth allocation (MBA, SMBA) and the association of
//! CPUs and tasks with classes of service, and monitor LLC occupancy (CMT) and memory
//! bandwidth (MBM), through the MSR interface (`/dev/cpu/N/msr`, crate [`msr`]) or the OS
//! interface (the kernel's resctrl filesystem, crate [`resctrl`]). The domain model of
//! [`rdt_core`] is re-exported here.
//!
//! # By task
//!
//! | task | where | to try |
//! |---|---|---|
//! | **Open** a platform: the host ([`Iface::Auto`] picks the interface as pqos v25.04 does), a directory that looks like one, or, without root or RDT hardware, the simulated platform of `pqos --sim` (feature `sim`: `OpenOptions::simulated`) | [`OpenOptions`], [`Rdt`] | `examples/noisy_neighbour.rs` |
//! | **Inspect** capabilities, topology, classes and associations | [`Backend::capabilities`], [`Backend::topology`], [`BackendExt::cat_classes`], [`BackendExt::associations`] | `examples/capabilities.rs` |
//! | **Allocate** masks, MBA limits, CPUs and tasks, all or nothing, rolled back after a crash | [`transaction`] | `examples/limit_process.rs` |
//! | **Declare** named classes in a file (TOML, or goresctrl's YAML), apply and remove them | [`config`] | `examples/apply_classes.rs`, `pqos --apply` |
//! | **Lease** a class of service for one job and give it back | [`lease`] | `rdtset` |
//! | **Monitor** LLC occupancy, memory bandwidth, IPC and misses | [`Monitoring`] ([`BackendExt::monitoring`]), [`MonValues`] | `examples/monitor_prometheus.rs` |
//! | **Export** every resctrl group's telemetry, other tools' too | [`resctrl::ResctrlTelemetry`] | `rdt-exporter` |
//! | **Control** noisy neighbours: protect workloads by squeezing best-effort classes' ways and MBA, and give back what it found on exit in one call ([`control::Agent::restore`]) | [`control`] | `examples/controller.rs`, `rdt-agent` |
//! | **Run containers**: OCI runtime-spec `linux.intelRdt` (feature `oci`) | `oci` | `examples/oci_runtime.rs` |
//! | **Label** Kubernetes nodes: the RDT features as a Node Feature Discovery feature file | [`nfd`] | `rdt-agent --nfd` |
//! | **Test** programs that use the library: an in-memory platform with fault injection (feature `fake`) | `fake` | |
//!
//! Only the OS interface allocates and monitors per task; the MSR interface answers those
//! with [`RequestError::NeedsOsInterface`]. Both report values through one accumulator
//! ([`MonAccumulator`]) with one policy for domains that cannot be read ([`monitor`]).
//!
//! What this crate does not do: it never falls back silently (a platform without RDT is an
//! error that names the CPUID bits; an unmounted resctrl is an error that says how to mount
//! it), and it does not mount resctrl itself. IPC and LLC misses come from perf events
//! ([`PerfPmu`]) where the host has a PMU; without one the capabilities say so and those
//! values are `None`. Errors say what went wrong and what to do in their `Display` (print
//! them with `{}` or return them through `anyhow`, not with `{:?}`).
//!
//! # Examples
//! Monitor CPUs 0-3 once a second (the first poll already gives the bandwidth since the
//! start); the groups are stopped when `mon` goes out of scope, also on an error or a panic:
//! ```no_run
//! use std::time::Duration;
//! use rdt_pqos::monitor::MibPerSec;
//! use rdt_pqos::{Backend, BackendExt, Iface, MonEvents, OpenOptions};
//!
//! let mut rdt = OpenOptions::new(Iface::Auto).open()?;
//! let events = rdt.capabilities().supported_events() & MonEvents::PQOS_ALL;
//! let mut mon = rdt.monitoring();
//! let group = mon.start(&"0-3".parse()?, events)?;
//! for _ in 0..10 {
//!     std::thread::sleep(Duration::from_secs(1));
//!     mon.poll()?;
//!     let v = mon.values(group).expect("started");
//!     let local = v.mbm_local_bytes_per_s().map(MibPerSec::from_bytes_per_s);
//!     println!(
//!         "LLC {:?} bytes, local {:.1} MiB/s over {:?}, {:?} bytes since start",
//!         v.llc_occupancy_bytes, local.unwrap_or_default(), v.interval, v.mbm_local_bytes
//!     );
//! }
//! # Ok::<(), anyhow::Error>(())
//! ```
//! Opening the real platform needs root and either the `msr` module or a mounted resctrl,
//! and an RDT CPU; without them the error says which is missing.
//!
//! # References
//! Intel SDM Vol. 3B, 18.18-18.19; Linux `Documentation/arch/x86/resctrl.rst`; pqos(8).

mod iomon;
pub mod nfd;
#[cfg(feature = "oci")]
pub mod oci;
mod open;
pub mod perf;
#[cfg(feature = "sim")]
pub mod sim;

pub use open::{
    CpuidFrom, Iface, IfaceError, MmioFace, MsrSource, Notice, OpenError, OpenOptions, OsFace,
    OsWanted, ParseIfaceError, Paths, PlatformCapabilities, PmuCapsPolicy, resolve_iface,
};
pub use perf::PerfPmu;
/// Declarative allocation: named classes (TOML or JSON) and goresctrl's YAML (crate
/// [`rdt_config`]).
pub use rdt_config as config;
/// The noisy-neighbour controller: a policy of protected and best-effort workloads, its
/// decisions, and the agent that makes them as journaled transactions (crate
/// [`rdt_control`]).
pub use rdt_control as control;
pub use rdt_core::*;
pub use rdt_host::cpuid::{CpuidDumpFromPath, DevCpuid};
pub use rdt_host::topology::TopologyFromSysfs;
pub use rdt_host::{file, lease, pods, proc, runfile};

/// CPUID: rdt-core's sources and decoding ([`rdt_core::cpuid`]) with rdt-host's readers of
/// files ([`rdt_host::cpuid`]: `/dev/cpu/N/cpuid`, dump files).
pub mod cpuid {
    pub use rdt_core::cpuid::*;
    pub use rdt_host::cpuid::*;
}

/// Topology: rdt-core's model ([`rdt_core::topology`]) with rdt-host's reading of sysfs
/// ([`rdt_host::topology`]).
pub mod topology {
    pub use rdt_core::topology::*;
    pub use rdt_host::topology::*;
}

/// Allocation as a transaction: rdt-core's plan ([`transaction::Plan`], what is checked,
/// written and undone) with rdt-host's journal ([`transaction::ApplyPlan::apply`], which
/// a program calls, [`transaction::run`], [`transaction::recover`]). The module docs of
/// [`rdt_core::transaction`] hold the contract, those of [`rdt_host::transaction`] an
/// example.
pub mod transaction {
    pub use rdt_core::transaction::*;
    pub use rdt_host::transaction::*;
}
pub use rdt_mmio as mmio;
pub use rdt_msr as msr;
use rdt_msr::{MsrBackend, MsrError, MsrIo};
pub use rdt_resctrl as resctrl;
use rdt_resctrl::{ResctrlBackend, ResctrlError};

/// An operation of an opened [`Rdt`] failed, on either interface.
///
/// A request the platform or interface cannot carry out is always [`Error::Request`]
/// (the same [`RequestError`] variants on both interfaces: limits, unknown CPUs, domains,
/// tasks or groups, unsupported events, already monitored, out of RMIDs, per-task work on
/// the MSR interface), whichever backend found it. The message carries the whole cause
/// (printing it with `{}` tells what went wrong), so it is not repeated as a
/// [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request the platform, the interface or the current state cannot satisfy.
    #[error(transparent)]
    Request(RequestError),
    /// A register access of the MSR interface failed.
    #[error("{}", error_chain(.0))]
    Msr(MsrError),
    /// A resctrl file of the OS interface could not be read or written, or the kernel
    /// refused a write.
    #[error("{}", error_chain(.0))]
    Resctrl(ResctrlError),
    /// A register access of the MMIO interface (RDT 1.3) failed, or its tables do not fit
    /// the platform.
    #[error("{}", error_chain(.0))]
    Mmio(rdt_mmio::MmioError),
    /// The simulated platform's state could not be saved ([`Backend::commit`],
    /// [`Rdt::save_simulated`]): the writes made in this process are lost when it ends.
    #[cfg(feature = "sim")]
    #[error("{}", error_chain(.0))]
    Sim(sim::SimError),
}

impl Error {
    /// The MSR backend's error, when it failed there.
    #[must_use]
    pub const fn msr(&self) -> Option<&MsrError> {
        match self {
            Self::Msr(e) => Some(e),
            _ => None,
        }
    }

    /// The OS backend's error, when it failed there.
    #[must_use]
    pub const fn resctrl(&self) -> Option<&ResctrlError> {
        match self {
            Self::Resctrl(e) => Some(e),
            _ => None,
        }
    }
}

impl BackendError for Error {
    fn request(&self) -> Option<&RequestError> {
        match self {
            Self::Request(r) => Some(r),
            _ => None,
        }
    }
}

impl From<MsrError> for Error {
    fn from(e: MsrError) -> Self {
        match e {
            MsrError::Request(r) => Self::Request(r),
            e => Self::Msr(e),
        }
    }
}

impl From<rdt_mmio::MmioError> for Error {
    fn from(e: rdt_mmio::MmioError) -> Self {
        match e {
            rdt_mmio::MmioError::Request(r) => Self::Request(r),
            rdt_mmio::MmioError::Msr(m) => m.into(),
            e => Self::Mmio(e),
        }
    }
}

impl From<ResctrlError> for Error {
    fn from(e: ResctrlError) -> Self {
        match e {
            ResctrlError::Request(r) => Self::Request(r),
            e => Self::Resctrl(e),
        }
    }
}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Self {
        Self::Request(e)
    }
}

/// The MSR interface as [`Rdt`] holds it.
pub type DynMsrBackend = MsrBackend<Box<dyn MsrIo + Send>, Box<dyn PmuSource + Send>>;
/// The MMIO interface as [`Rdt`] holds it.
pub type DynMmioBackend = rdt_mmio::MmioBackend<
    Box<dyn MsrIo + Send>,
    Box<dyn PmuSource + Send>,
    Box<dyn rdt_mmio::MmioIo + Send>,
>;
/// I/O RDT (the IRDT links' tagging registers) as [`Rdt`] holds it beside the MSR or MMIO
/// interface ([`Backend::io_rdt`]).
pub type DynIoRdt = rdt_mmio::IoRdt<Box<dyn rdt_mmio::MmioIo + Send>>;
/// The OS interface as [`Rdt`] holds it.
pub type DynResctrlBackend = ResctrlBackend<Box<dyn PmuSource + Send>>;

// A program holds one of these; boxing the larger backend would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Inner {
    Msr(DynMsrBackend),
    Os(DynResctrlBackend),
    Mmio(Box<DynMmioBackend>),
}

/// An opened RDT platform, on the MSR or the OS interface. Use it through [`Backend`].
#[derive(Debug)]
pub struct Rdt {
    backend: Inner,
    /// I/O RDT beside the MSR or MMIO interface, where the platform has it.
    iordt: Option<DynIoRdt>,
    /// The I/O RDT channel monitoring groups started ([`Backend::start_channel_monitoring`]).
    channel_groups: Vec<(MonGroupId, Vec<rdt_core::ChannelId>)>,
    notices: Vec<Notice>,
    /// The simulated platform's session (feature `sim`), after the backend: saved when the
    /// platform is dropped, its lock released last.
    #[cfg(feature = "sim")]
    session: Option<sim::Session>,
}

#[cfg(feature = "sim")]
impl Drop for Rdt {
    /// Saves a simulated platform's state ([`Rdt::save_simulated`]); a failure is a `WARN`
    /// record.
    fn drop(&mut self) {
        if let Err(e) = self.save_simulated() {
            log::warn!("could not save the simulated platform: {}", error_chain(&e));
        }
    }
}

impl Rdt {
    /// Opens the host's platform through `iface` (`RDT_IFACE` from the environment):
    /// `OpenOptions::new(iface).open()`.
    ///
    /// # Errors
    /// See [`OpenOptions::open`].
    pub fn open(iface: Iface) -> Result<Self, OpenError> {
        OpenOptions::new(iface).open()
    }

    /// Opens the platform whose devices, sysfs and resctrl live at `paths`:
    /// `OpenOptions::new(iface).paths(paths.clone()).open()`.
    ///
    /// # Errors
    /// See [`OpenOptions::open`].
    pub fn open_at(iface: Iface, paths: &Paths) -> Result<Self, OpenError> {
        OpenOptions::new(iface).paths(paths.clone()).open()
    }

    /// Opens a platform the caller brings (the in-process simulated platform, a test
    /// double): `OpenOptions::new(Iface::Auto).open_source(source)`.
    ///
    /// # Errors
    /// See [`OpenOptions::open_source`].
    pub fn from_source(source: MsrSource) -> Result<Self, OpenError> {
        OpenOptions::new(Iface::Auto).open_source(source)
    }

    /// A platform over any MSR implementation, with the given capabilities, topology and
    /// PMU source (no interface resolution: see [`Rdt::from_source`]).
    ///
    /// # Errors
    /// [`OpenError::Msr`] when the initial CDP state cannot be read or is inconsistent.
    pub fn from_msr(
        io: Box<dyn MsrIo + Send>,
        caps: Capabilities,
        topology: Topology,
        pmu: Box<dyn PmuSource + Send>,
    ) -> Result<Self, OpenError> {
        Ok(Self::from_msr_backend(MsrBackend::new(
            io, caps, topology, pmu,
        )?))
    }

    /// A platform over an opened MSR-interface backend.
    #[must_use]
    pub fn from_msr_backend(backend: DynMsrBackend) -> Self {
        log_discovery(backend.capabilities(), Interface::Msr, None);
        let notices = backend
            .cdp_inconsistency()
            .map(Notice::CdpInconsistent)
            .into_iter()
            .collect();
        Self {
            backend: Inner::Msr(backend),
            notices,
            iordt: None,
            channel_groups: Vec::new(),
            #[cfg(feature = "sim")]
            session: None,
        }
    }

    /// A platform over an opened MMIO-interface backend (RDT 1.3: `--iface=mmio`).
    #[must_use]
    pub fn from_mmio_backend(mut backend: DynMmioBackend) -> Self {
        log_discovery(backend.capabilities(), Interface::Mmio, None);
        let notices = backend
            .msr_backend()
            .cdp_inconsistency()
            .map(Notice::CdpInconsistent)
            .into_iter()
            .collect();
        Self {
            backend: Inner::Mmio(Box::new(backend)),
            notices,
            iordt: None,
            channel_groups: Vec::new(),
            #[cfg(feature = "sim")]
            session: None,
        }
    }

    /// A platform over an opened OS-interface backend (any root, mount control, PMU).
    #[must_use]
    pub fn from_resctrl(backend: DynResctrlBackend) -> Self {
        let mba_ctrl = rdt_core::OsOps::<ResctrlError>::mba_ctrl(&backend);
        log_discovery(backend.capabilities(), Interface::Os, mba_ctrl);
        Self {
            backend: Inner::Os(backend),
            notices: Vec::new(),
            iordt: None,
            channel_groups: Vec::new(),
            #[cfg(feature = "sim")]
            session: None,
        }
    }

    /// This platform with I/O RDT `io` beside its MSR or MMIO interface
    /// ([`Backend::io_rdt`]); ignored on the OS interface, which cannot reach the links.
    #[must_use]
    pub fn with_io_rdt(mut self, io: Option<DynIoRdt>) -> Self {
        if !matches!(self.backend, Inner::Os(_)) {
            self.iordt = io;
        }
        self
    }

    /// The CDP inconsistency notice read again (after a recovery that may have mended it).
    pub(crate) fn reread_cdp_notice(&mut self) {
        self.notices
            .retain(|n| !matches!(n, Notice::CdpInconsistent(_)));
        let now = match &mut self.backend {
            Inner::Msr(b) => b.cdp_inconsistency(),
            Inner::Mmio(b) => b.msr_backend().cdp_inconsistency(),
            Inner::Os(_) => None,
        };
        self.notices.extend(now.map(Notice::CdpInconsistent));
    }

    /// What opening found worth telling the user (pqos's `WARN:` lines).
    #[must_use]
    pub fn notices(&self) -> &[Notice] {
        &self.notices
    }

    /// The OS-interface backend, when this platform uses it (mount options, watching
    /// other tools' groups, `info/`).
    #[must_use]
    pub const fn resctrl(&self) -> Option<&DynResctrlBackend> {
        match &self.backend {
            Inner::Os(b) => Some(b),
            Inner::Msr(_) | Inner::Mmio(_) => None,
        }
    }

    /// The OS-interface backend, mutable.
    pub const fn resctrl_mut(&mut self) -> Option<&mut DynResctrlBackend> {
        match &mut self.backend {
            Inner::Os(b) => Some(b),
            Inner::Msr(_) | Inner::Mmio(_) => None,
        }
    }
}

/// Logs what discovery found on `interface`, at the levels pqos's library logs it on
/// opening ([`Capabilities::init_lines`]; `mba_ctrl`: the OS interface's MBA controller).
pub(crate) fn log_discovery(caps: &Capabilities, interface: Interface, mba_ctrl: Option<MbaCtrl>) {
    if log::log_enabled!(log::Level::Warn) {
        for (level, line) in caps.init_lines(interface, mba_ctrl) {
            log::log!(level, "{line}");
        }
    }
}

/// Forwards a call to whichever backend is open, converting its error.
macro_rules! forward {
    ($self:ident, $b:ident => $call:expr) => {
        match &mut $self.backend {
            Inner::Msr($b) => $call.map_err(Error::from),
            Inner::Os($b) => $call.map_err(Error::from),
            Inner::Mmio($b) => $call.map_err(Error::from),
        }
    };
}

impl Backend for Rdt {
    type Error = Error;

    fn interface(&self) -> Interface {
        match &self.backend {
            Inner::Msr(b) => b.interface(),
            Inner::Os(b) => b.interface(),
            Inner::Mmio(b) => b.interface(),
        }
    }
    fn capabilities(&self) -> &Capabilities {
        match &self.backend {
            Inner::Msr(b) => b.capabilities(),
            Inner::Os(b) => b.capabilities(),
            Inner::Mmio(b) => b.capabilities(),
        }
    }
    fn topology(&self) -> &Topology {
        match &self.backend {
            Inner::Msr(b) => b.topology(),
            Inner::Os(b) => b.topology(),
            Inner::Mmio(b) => b.topology(),
        }
    }
    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, Error> {
        forward!(self, b => b.cat_classes_in(resource, domains))
    }
    fn set_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), Error> {
        forward!(self, b => b.set_cat_masks(resource, masks))
    }
    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, Error> {
        forward!(self, b => b.bandwidth_classes_in(resource, domains))
    }
    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, Error> {
        forward!(self, b => b.set_bandwidth_limits(resource, limits))
    }
    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), Error>)>, Error> {
        #[allow(clippy::type_complexity)] // a list of per-CPU results
        fn lift<E>(
            list: Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), E>)>,
        ) -> Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), Error>)>
        where
            Error: From<E>,
        {
            list.into_iter()
                .map(|(cpu, r)| (cpu, r.map_err(Error::from)))
                .collect()
        }
        forward!(self, b => b.associations_in(cpus).map(lift))
    }
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), Error> {
        forward!(self, b => b.associate_cpus(cpus, class))
    }
    /// Also puts every I/O RDT channel that tags CLOS back to class 0 with its enable bit
    /// clear on an allocation reset, as pqos's `hw_alloc_reset` does (`iordt_assoc_reset`).
    fn reset(&mut self, what: &Reset) -> Result<(), Error> {
        self.untag_every_channel(*what)?;
        if let (Reset::Allocation(_), Some(io)) = (what, self.iordt.as_mut()) {
            let ops: &mut dyn IoRdtOps<Error> = io;
            for c in ops.io_channels().into_iter().filter(|c| c.clos_tagging) {
                ops.set_channel_class(c.id, None)?;
            }
        }
        forward!(self, b => b.reset(what))
    }
    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<Error>> {
        // a channel monitored by another run holds its RMID in no IA32_PQR_ASSOC
        let tags = self.channel_rmid_tags().map_err(|error| GroupStartError {
            index: 0,
            of: groups.len(),
            error,
        })?;
        match &mut self.backend {
            Inner::Msr(b) => b.reserve_rmids(tags),
            Inner::Mmio(b) => b.msr_backend().reserve_rmids(tags),
            Inner::Os(_) => {}
        }
        match &mut self.backend {
            Inner::Msr(b) => b
                .start_monitoring_many(groups)
                .map_err(|e| e.map(Error::from)),
            Inner::Os(b) => b
                .start_monitoring_many(groups)
                .map_err(|e| e.map(Error::from)),
            Inner::Mmio(b) => b
                .start_monitoring_many(groups)
                .map_err(|e| e.map(Error::from)),
        }
    }
    fn poll(&mut self) -> Result<(), Error> {
        forward!(self, b => b.poll())
    }
    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        match &self.backend {
            Inner::Msr(b) => b.values(group),
            Inner::Os(b) => b.values(group),
            Inner::Mmio(b) => b.values(group),
        }
    }
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), Error> {
        let untagged = self.untag_group_channels(group);
        forward!(self, b => b.stop_monitoring(group))?;
        untagged
    }
    /// Saves the simulated platform's state (`Rdt::save_simulated`, feature `sim`); nothing on
    /// others.
    fn commit(&mut self) -> Result<(), Error> {
        #[cfg(feature = "sim")]
        self.save_simulated().map_err(Error::Sim)?;
        Ok(())
    }
    fn writers(&mut self) -> Option<&mut dyn Writers<Error>> {
        match &mut self.backend {
            Inner::Msr(b) => Some(b),
            Inner::Os(b) => Some(b),
            Inner::Mmio(b) => Some(b.msr_backend()),
        }
    }
    fn names(&mut self) -> Option<&mut dyn NamedClasses<Error>> {
        match &mut self.backend {
            Inner::Msr(b) => Some(b),
            Inner::Os(b) => Some(b),
            Inner::Mmio(b) => Some(b.msr_backend()),
        }
    }
    fn os(&mut self) -> Option<&mut dyn OsOps<Error>> {
        match &mut self.backend {
            Inner::Msr(_) | Inner::Mmio(_) => None,
            Inner::Os(b) => Some(b),
        }
    }
    fn msr(&mut self) -> Option<&mut dyn MsrOps<Error>> {
        match &mut self.backend {
            Inner::Msr(b) => Some(b),
            Inner::Mmio(b) => Some(b.msr_backend()),
            Inner::Os(_) => None,
        }
    }
    fn io_rdt(&mut self) -> Option<&mut dyn IoRdtOps<Error>> {
        self.iordt.as_mut().map(|io| io as &mut dyn IoRdtOps<Error>)
    }
    fn start_channel_monitoring(
        &mut self,
        channels: &[rdt_core::ChannelId],
        events: MonEvents,
    ) -> Result<MonGroupId, Error> {
        self.start_channels(channels, events)
    }
    fn regions(&mut self) -> Option<&mut dyn rdt_core::RegionOps<Error>> {
        match &mut self.backend {
            Inner::Mmio(b) => Some(&mut **b),
            Inner::Msr(_) | Inner::Os(_) => None,
        }
    }
}

/// Compiles the README's Rust examples as doctests (with `sim`: they open the simulated
/// platform, as a newcomer without RDT hardware does).
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "sim"))]
pub struct ReadmeDoctests;

/// The Rust blocks of README.md and of the guide's library chapter compile (and those not
/// marked `no_run` run) as doc tests: `cargo test --doc --all-features`.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/guide/src/library.md")]
    struct GuideLibrary;
}

//! `rdt`: Intel Resource Director Technology and AMD Platform QoS from Rust.
//!
//! This facade detects the platform, picks a backend and re-exports the domain model of
//! [`rdt_core`]: open a platform with [`Rdt::open`], then use it through the [`Backend`]
//! trait to read and set cache masks ([`Backend::set_cat_classes`]), memory bandwidth limits
//! ([`Backend::set_mba_classes`]), associate CPUs with classes of service
//! ([`Backend::associate`]) and monitor LLC occupancy and memory bandwidth
//! ([`Backend::start_monitoring`], [`Backend::poll`]).
//!
//! Interfaces ([`Iface`]): the MSR interface (`/dev/cpu/N/msr`, crate [`msr`]) and the OS
//! interface (the kernel's resctrl filesystem, crate [`resctrl`]). [`Iface::Auto`] picks the
//! OS interface when resctrl is mounted (`<resctrl>/info` exists), else MSR, as pqos v25.04
//! does. Only the OS interface allocates and monitors per task
//! ([`Backend::associate_task`], [`Backend::start_monitoring_tasks`]); the MSR interface
//! answers those with [`Unsupported`].
//!
//! What this crate does not do: it never falls back silently (a platform without RDT is an
//! error that names the CPUID bits; an unmounted resctrl is an error that says how to mount
//! it), and it does not mount resctrl itself. IPC and LLC misses come from perf events
//! ([`PerfPmu`]) where the host has a PMU; without one the capabilities say so and those
//! values are `None`.
//!
//! # Examples
//! Opening the real platform needs root and either the `msr` module or a mounted resctrl,
//! and an RDT CPU; without them the error says which is missing:
//! ```no_run
//! use rdt::{Backend, CatResource, Iface, Rdt};
//! let mut rdt = Rdt::open(Iface::Auto)?;
//! for domain in rdt.topology().l3_domains() {
//!     for class in rdt.cat_classes(CatResource::L3, domain)? {
//!         println!("L3 {domain} COS{} {:?}", class.class, class.mask);
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # References
//! Intel SDM Vol. 3B, 18.18-18.19; Linux `Documentation/arch/x86/resctrl.rst`; pqos(8).

pub mod perf;

use std::path::{Path, PathBuf};

pub use perf::PerfPmu;
pub use rdt_core::*;
pub use rdt_msr as msr;
use rdt_msr::{DevCpuMsr, MsrBackend, MsrError, MsrIo};
pub use rdt_resctrl as resctrl;
use rdt_resctrl::{ControlFileMount, KernelMount, ResctrlBackend, ResctrlError, ResctrlOptions};

/// Which interface to program RDT through (pqos `--iface`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Iface {
    /// Choose: the OS interface when resctrl is mounted (`<resctrl>/info` exists), else MSR
    /// (pqos v25.04's `auto`).
    #[default]
    Auto,
    /// Model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// The kernel's resctrl filesystem.
    Os,
}

/// Where the platform's device, sysfs and resctrl files live: the host's by default, or
/// under a directory (a mounted simulated platform, a container's view). `/proc` is always
/// the host's: tasks are this kernel's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// Directory of the per-CPU `N/msr` and `N/cpuid` devices (`/dev/cpu`).
    pub dev_cpu: PathBuf,
    /// The sysfs system directory holding `cpu/` and `node/` (`/sys/devices/system`).
    pub sys_devices_system: PathBuf,
    /// The resctrl root (`/sys/fs/resctrl`).
    pub resctrl: PathBuf,
    /// A control file that serves the resctrl mount (reading gives the options, writing
    /// `remount OPTS` remounts): the simulated platform's `.sim/resctrl_mount`. Used when it
    /// exists; otherwise the mount is read from [`Paths::proc`]`/mounts` and changed with
    /// `umount2(2)` + `mount(2)`.
    pub resctrl_mount_control: PathBuf,
    /// The host's `/proc` (threads of a process, `/proc/mounts`).
    pub proc: PathBuf,
}

impl Paths {
    /// The host's paths: `/dev/cpu` and `/sys/devices/system`.
    #[must_use]
    pub fn host() -> Self {
        Self::under(Path::new("/"))
    }

    /// The same paths under `root` (`<root>/dev/cpu`, `<root>/sys/devices/system`,
    /// `<root>/sys/fs/resctrl`, `<root>/.sim/resctrl_mount`); `/proc` stays the host's.
    #[must_use]
    pub fn under(root: &Path) -> Self {
        Self {
            dev_cpu: root.join("dev/cpu"),
            sys_devices_system: root.join("sys/devices/system"),
            resctrl: root.join("sys/fs/resctrl"),
            resctrl_mount_control: root.join(".sim/resctrl_mount"),
            proc: PathBuf::from("/proc"),
        }
    }
}

impl Default for Paths {
    fn default() -> Self {
        Self::host()
    }
}

/// Opening a platform failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The CPU enumerates no RDT/PQoS feature; the text names the CPUID bits.
    #[error("no RDT/PQoS on this platform: {0}")]
    NoRdt(String),
    /// The topology could not be read from sysfs.
    #[error("cannot read the CPU topology")]
    Topology(#[from] TopologyError),
    /// The MSR backend could not start (e.g. inconsistent CDP state across domains).
    #[error("cannot start the MSR backend")]
    Msr(#[from] MsrError),
    /// The OS interface could not start: resctrl is not mounted (the message says how to
    /// mount it), its `info/` does not parse, another tool holds its lock.
    #[error("cannot open the OS (resctrl) interface")]
    Resctrl(#[from] ResctrlError),
}

/// An operation of an opened [`Rdt`] failed, on either interface.
///
/// An operation the interface cannot do is always [`Error::Unsupported`], whichever backend
/// reported it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// From the MSR interface.
    #[error(transparent)]
    Msr(MsrError),
    /// From the OS (resctrl) interface.
    #[error(transparent)]
    Resctrl(ResctrlError),
    /// An operation the interface in use cannot do (per-task work on MSR).
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

impl From<MsrError> for Error {
    fn from(e: MsrError) -> Self {
        match e {
            MsrError::Interface(u) => Self::Unsupported(u),
            e => Self::Msr(e),
        }
    }
}

impl From<ResctrlError> for Error {
    fn from(e: ResctrlError) -> Self {
        match e {
            ResctrlError::Interface(u) => Self::Unsupported(u),
            e => Self::Resctrl(e),
        }
    }
}

type DynMsrBackend = MsrBackend<Box<dyn MsrIo + Send>, Box<dyn PmuSource + Send>>;
/// The OS interface as [`Rdt`] holds it.
pub type DynResctrlBackend = ResctrlBackend<Box<dyn PmuSource + Send>>;

// A program holds one of these; boxing the larger backend would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Inner {
    Msr(DynMsrBackend),
    Os(DynResctrlBackend),
}

/// An opened RDT platform, on the MSR or the OS interface. Use it through [`Backend`].
#[derive(Debug)]
pub struct Rdt {
    backend: Inner,
}

impl Rdt {
    /// Opens the host's platform: capabilities from CPUID, topology from sysfs, the chosen
    /// interface.
    ///
    /// # Errors
    /// See [`Rdt::open_at`].
    pub fn open(iface: Iface) -> Result<Self, OpenError> {
        Self::open_at(iface, &Paths::host())
    }

    /// Opens the platform whose devices, sysfs and resctrl live at `paths`.
    ///
    /// CPUID comes from `<dev_cpu>/0/cpuid` when that device exists (the `cpuid` module, or a
    /// mounted simulated platform), else from the CPUID instruction; the topology from
    /// sysfs. [`Iface::Auto`] takes the OS interface when `<resctrl>/info` exists.
    ///
    /// The OS interface reads `info/` over CPUID's capabilities
    /// ([`resctrl::ResctrlInfo::capabilities`]), takes tasks' threads from `/proc`, and
    /// remounts (for CDP or `mba_MBps` changes) through [`Paths::resctrl_mount_control`] when
    /// it exists, else with `umount2(2)` + `mount(2)`. IPC and LLC misses come from perf
    /// events ([`PerfPmu`], per CPU and per task); where the host has no PMU the capabilities
    /// report no IPC or LLC-miss counting.
    ///
    /// # Errors
    /// [`OpenError::NoRdt`] when the CPU has no RDT/PQoS (naming the CPUID bits; MSR
    /// interface); [`OpenError::Topology`] when sysfs cannot be read; [`OpenError::Msr`] when
    /// the MSR backend cannot read its initial state (no `msr` module, not root);
    /// [`OpenError::Resctrl`] when resctrl is not mounted (saying how to mount it) or cannot
    /// be read.
    pub fn open_at(iface: Iface, paths: &Paths) -> Result<Self, OpenError> {
        let os = match iface {
            Iface::Os => true,
            Iface::Msr => false,
            Iface::Auto => paths.resctrl.join("info").is_dir(),
        };
        let dev_root = paths.dev_cpu.parent().unwrap_or(Path::new("/"));
        let cpuid: Box<dyn CpuidSource> = match DevCpuid::open(dev_root, LogicalCpu::new(0)) {
            Ok(dev) => Box::new(dev),
            Err(_) => Box::new(NativeCpuid),
        };
        if os {
            let mut caps = Capabilities::detect(cpuid.as_ref());
            let topology = Topology::from_sysfs(&paths.sys_devices_system)?;
            let pmu = host_pmu(&topology, &mut caps);
            let opts = ResctrlOptions::new(&paths.resctrl).proc_root(&paths.proc);
            let opts = if paths.resctrl_mount_control.is_file() {
                opts.mount_control(ControlFileMount::new(&paths.resctrl_mount_control))
            } else {
                opts.mount_control(KernelMount::new(&paths.resctrl, paths.proc.join("mounts")))
            };
            let backend = ResctrlBackend::open(opts, topology, Some(caps), pmu)?;
            return Ok(Self::from_resctrl(backend));
        }
        let mut caps = detect_or_explain(cpuid.as_ref())?;
        let topology = Topology::from_sysfs(&paths.sys_devices_system)?;
        let pmu = host_pmu(&topology, &mut caps);
        let io: Box<dyn MsrIo + Send> = Box::new(DevCpuMsr::with_root(&paths.dev_cpu));
        Self::from_msr(io, caps, topology, pmu)
    }

    /// A platform over any MSR implementation (the simulated platform, a test fake), with
    /// the given capabilities, topology and PMU source.
    ///
    /// # Errors
    /// [`OpenError::Msr`] when the initial CDP state cannot be read or is inconsistent.
    pub fn from_msr(
        io: Box<dyn MsrIo + Send>,
        caps: Capabilities,
        topology: Topology,
        pmu: Box<dyn PmuSource + Send>,
    ) -> Result<Self, OpenError> {
        Ok(Self {
            backend: Inner::Msr(MsrBackend::new(io, caps, topology, pmu)?),
        })
    }

    /// A platform over an opened OS-interface backend (any root, mount control, PMU).
    #[must_use]
    pub const fn from_resctrl(backend: DynResctrlBackend) -> Self {
        Self {
            backend: Inner::Os(backend),
        }
    }

    /// The OS-interface backend, when this platform uses it (mount options, watching
    /// other tools' groups, `info/`).
    #[must_use]
    pub const fn resctrl(&self) -> Option<&DynResctrlBackend> {
        match &self.backend {
            Inner::Os(b) => Some(b),
            Inner::Msr(_) => None,
        }
    }

    /// The OS-interface backend, mutable.
    pub const fn resctrl_mut(&mut self) -> Option<&mut DynResctrlBackend> {
        match &mut self.backend {
            Inner::Os(b) => Some(b),
            Inner::Msr(_) => None,
        }
    }
}

/// The host's PMU through perf events ([`PerfPmu`]); where the kernel offers none (a VM
/// without a virtual PMU), no source, and `caps` then report no IPC or LLC-miss counting.
fn host_pmu(topology: &Topology, caps: &mut Capabilities) -> Box<dyn PmuSource + Send> {
    if let Ok(pmu) = PerfPmu::open(&topology.all_cpus()) {
        Box::new(pmu)
    } else {
        caps.pmu = PmuCaps::default();
        Box::new(NoPmu)
    }
}

fn detect_or_explain(src: &dyn CpuidSource) -> Result<Capabilities, OpenError> {
    let caps = Capabilities::detect(src);
    if caps.has_rdt() {
        Ok(caps)
    } else {
        Err(OpenError::NoRdt(
            explain_no_rdt(src).unwrap_or_else(|| "no RDT feature is enumerated".into()),
        ))
    }
}

/// Forwards a call to whichever backend is open, converting its error.
macro_rules! forward {
    ($self:ident, $b:ident => $call:expr) => {
        match &mut $self.backend {
            Inner::Msr($b) => $call.map_err(Error::from),
            Inner::Os($b) => $call.map_err(Error::from),
        }
    };
}

impl Backend for Rdt {
    type Error = Error;

    fn interface(&self) -> Interface {
        match &self.backend {
            Inner::Msr(b) => b.interface(),
            Inner::Os(b) => b.interface(),
        }
    }
    fn capabilities(&self) -> &Capabilities {
        match &self.backend {
            Inner::Msr(b) => b.capabilities(),
            Inner::Os(b) => b.capabilities(),
        }
    }
    fn topology(&self) -> &Topology {
        match &self.backend {
            Inner::Msr(b) => b.topology(),
            Inner::Os(b) => b.topology(),
        }
    }
    fn cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, Error> {
        forward!(self, b => b.cat_classes(resource, domain))
    }
    fn set_cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
        classes: &[CatClass],
    ) -> Result<(), Error> {
        forward!(self, b => b.set_cat_classes(resource, domain, classes))
    }
    fn mba_classes(&mut self, domain: CacheDomain) -> Result<Vec<MbaClass>, Error> {
        forward!(self, b => b.mba_classes(domain))
    }
    fn set_mba_classes(
        &mut self,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, Error> {
        forward!(self, b => b.set_mba_classes(domain, classes))
    }
    fn class_of(&mut self, cpu: LogicalCpu) -> Result<ClassId, Error> {
        forward!(self, b => b.class_of(cpu))
    }
    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), Error> {
        forward!(self, b => b.associate(cpu, class))
    }
    fn rmid_of(&mut self, cpu: LogicalCpu) -> Result<Option<Rmid>, Error> {
        forward!(self, b => b.rmid_of(cpu))
    }
    fn reset_allocation(&mut self, cfg: &AllocReset) -> Result<(), Error> {
        forward!(self, b => b.reset_allocation(cfg))
    }
    fn reset_monitoring(&mut self) -> Result<(), Error> {
        forward!(self, b => b.reset_monitoring())
    }
    fn start_monitoring(&mut self, cpus: &CpuSet, events: MonEvents) -> Result<MonGroupId, Error> {
        forward!(self, b => b.start_monitoring(cpus, events))
    }
    fn poll(&mut self) -> Result<(), Error> {
        forward!(self, b => b.poll())
    }
    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        match &self.backend {
            Inner::Msr(b) => b.values(group),
            Inner::Os(b) => b.values(group),
        }
    }
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), Error> {
        forward!(self, b => b.stop_monitoring(group))
    }
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, Error> {
        forward!(self, b => b.class_of_task(task))
    }
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), Error> {
        forward!(self, b => b.associate_task(task, class))
    }
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, Error> {
        forward!(self, b => b.tasks_of_class(class))
    }
    fn start_monitoring_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, Error> {
        forward!(self, b => b.start_monitoring_tasks(tasks, events))
    }
    fn groups(&mut self) -> Result<Vec<GroupInfo>, Error> {
        forward!(self, b => b.groups())
    }
    fn mba_ctrl(&self) -> Option<MbaCtrl> {
        match &self.backend {
            Inner::Msr(b) => b.mba_ctrl(),
            Inner::Os(b) => b.mba_ctrl(),
        }
    }
}

/// Compiles the README's Rust examples as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

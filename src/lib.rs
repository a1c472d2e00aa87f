//! `rdt`: Intel Resource Director Technology and AMD Platform QoS from Rust.
//!
//! This facade detects the platform, picks a backend and re-exports the domain model of
//! [`rdt_core`]: open a platform with [`Rdt::open`], then use it through the [`Backend`]
//! trait to read and set cache masks ([`Backend::set_cat_classes`]), memory bandwidth limits
//! ([`Backend::set_mba_classes`]), associate CPUs with classes of service
//! ([`Backend::associate`]) and monitor LLC occupancy and memory bandwidth
//! ([`Backend::start_monitoring`], [`Backend::poll`]).
//!
//! Interfaces: the MSR interface (`/dev/cpu/N/msr`, crate [`msr`]) is built; the OS interface
//! (the kernel's resctrl filesystem) is not built yet and [`Rdt::open`] says so.
//!
//! What this crate does not do: per-task allocation or monitoring (needs resctrl), and it
//! never falls back silently: a platform without RDT is an error that names the CPUID bits.
//!
//! # Examples
//! Opening the real platform needs root, the `msr` module and an RDT CPU; without them the
//! error says which is missing:
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

/// Which interface to program RDT through (pqos `--iface`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Iface {
    /// Choose: the OS interface where resctrl is available (once built), else MSR.
    #[default]
    Auto,
    /// Model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// The kernel's resctrl filesystem (not built yet).
    Os,
}

/// Where the platform's device and sysfs files live: the host's by default, or under a
/// directory (a mounted simulated platform, a container's view).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// Directory of the per-CPU `N/msr` and `N/cpuid` devices (`/dev/cpu`).
    pub dev_cpu: PathBuf,
    /// The sysfs system directory holding `cpu/` and `node/` (`/sys/devices/system`).
    pub sys_devices_system: PathBuf,
}

impl Paths {
    /// The host's paths: `/dev/cpu` and `/sys/devices/system`.
    #[must_use]
    pub fn host() -> Self {
        Self::under(Path::new("/"))
    }

    /// The same paths under `root` (`<root>/dev/cpu`, `<root>/sys/devices/system`).
    #[must_use]
    pub fn under(root: &Path) -> Self {
        Self {
            dev_cpu: root.join("dev/cpu"),
            sys_devices_system: root.join("sys/devices/system"),
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
    /// The OS (resctrl) interface was requested; it is not built yet.
    #[error("the OS (resctrl) interface is not implemented yet; use --iface=msr")]
    OsInterfaceNotBuilt,
    /// The topology could not be read from sysfs.
    #[error("cannot read the CPU topology")]
    Topology(#[from] TopologyError),
    /// The MSR backend could not start (e.g. inconsistent CDP state across domains).
    #[error("cannot start the MSR backend")]
    Msr(#[from] MsrError),
}

type DynMsrBackend = MsrBackend<Box<dyn MsrIo + Send>, Box<dyn PmuSource + Send>>;

/// An opened RDT platform. Use it through [`Backend`].
#[derive(Debug)]
pub struct Rdt {
    backend: DynMsrBackend,
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

    /// Opens the platform whose devices and sysfs live at `paths`.
    ///
    /// CPUID comes from `<dev_cpu>/0/cpuid` when that device exists (the `cpuid` module, or a
    /// mounted simulated platform), else from the CPUID instruction.
    /// (DevCpuid's root is the directory holding `cpu/`, the parent of `dev_cpu`.)
    ///
    /// # Errors
    /// [`OpenError::OsInterfaceNotBuilt`] for [`Iface::Os`]; [`OpenError::NoRdt`] when the
    /// CPU has no RDT/PQoS (naming the CPUID bits); [`OpenError::Topology`] when sysfs cannot
    /// be read; [`OpenError::Msr`] when the MSR backend cannot read its initial state (no
    /// `msr` module, not root).
    pub fn open_at(iface: Iface, paths: &Paths) -> Result<Self, OpenError> {
        if iface == Iface::Os {
            return Err(OpenError::OsInterfaceNotBuilt);
        }
        let dev_root = paths.dev_cpu.parent().unwrap_or(Path::new("/"));
        let caps = match DevCpuid::open(dev_root, LogicalCpu::new(0)) {
            Ok(dev) => detect_or_explain(&dev)?,
            Err(_) => detect_or_explain(&NativeCpuid)?,
        };
        let topology = Topology::from_sysfs(&paths.sys_devices_system)?;
        let io: Box<dyn MsrIo + Send> = Box::new(DevCpuMsr::with_root(&paths.dev_cpu));
        Self::from_msr(io, caps, topology, Box::new(NoPmu))
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
            backend: MsrBackend::new(io, caps, topology, pmu)?,
        })
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

impl Backend for Rdt {
    type Error = MsrError;

    fn interface(&self) -> Interface {
        self.backend.interface()
    }
    fn capabilities(&self) -> &Capabilities {
        self.backend.capabilities()
    }
    fn topology(&self) -> &Topology {
        self.backend.topology()
    }
    fn cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, MsrError> {
        self.backend.cat_classes(resource, domain)
    }
    fn set_cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
        classes: &[CatClass],
    ) -> Result<(), MsrError> {
        self.backend.set_cat_classes(resource, domain, classes)
    }
    fn mba_classes(&mut self, domain: CacheDomain) -> Result<Vec<MbaClass>, MsrError> {
        self.backend.mba_classes(domain)
    }
    fn set_mba_classes(
        &mut self,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, MsrError> {
        self.backend.set_mba_classes(domain, classes)
    }
    fn class_of(&mut self, cpu: LogicalCpu) -> Result<ClassId, MsrError> {
        self.backend.class_of(cpu)
    }
    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), MsrError> {
        self.backend.associate(cpu, class)
    }
    fn rmid_of(&mut self, cpu: LogicalCpu) -> Result<Option<Rmid>, MsrError> {
        self.backend.rmid_of(cpu)
    }
    fn reset_allocation(&mut self, cfg: &AllocReset) -> Result<(), MsrError> {
        self.backend.reset_allocation(cfg)
    }
    fn reset_monitoring(&mut self) -> Result<(), MsrError> {
        self.backend.reset_monitoring()
    }
    fn start_monitoring(
        &mut self,
        cpus: &CpuSet,
        events: MonEvents,
    ) -> Result<MonGroupId, MsrError> {
        self.backend.start_monitoring(cpus, events)
    }
    fn poll(&mut self) -> Result<(), MsrError> {
        self.backend.poll()
    }
    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.backend.values(group)
    }
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), MsrError> {
        self.backend.stop_monitoring(group)
    }
}

/// Compiles the README's Rust examples as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

//! Opening a platform: where its files are ([`Paths`]), which interface to use ([`Iface`],
//! resolved as pqos v25.04 resolves it), and everything else an opener decides
//! ([`OpenOptions`]). [`OpenOptions::open`] is the one way a platform is opened, for the
//! host, for a directory that looks like one (`--sysroot`, a mounted simulated platform),
//! and for an in-process platform the caller brings ([`MsrSource`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rdt_core::{
    ApicIdLayout, Backend, BackendExt, Capabilities, CpuSet, CpuidSource, Interface, IoAlloc,
    LogicalCpu, MbaCtrl, NativeCpuid, NoPmu, PmuCaps, PmuSource, Reclaimed, Topology,
    TopologyError, error_chain, explain_no_rdt,
};
use rdt_msr::regs::IA32_X2APIC_APICID;
use rdt_msr::{DevCpuMsr, MsrBackend, MsrError, MsrIo};
use rdt_resctrl::{
    KernelMount, MountControl, MountOptions, ResctrlBackend, ResctrlError, ResctrlFs,
    ResctrlOptions,
};

use crate::transaction;
use crate::{DevCpuid, TopologyFromSysfs};
use crate::{DynMsrBackend, PerfPmu, Rdt};

/// The interface a caller asks for (pqos `--iface`); [`Interface`] is the one it resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum Iface {
    /// Choose as pqos v25.04 does (`lib/cap.c` `discover_interface`): what `RDT_IFACE`
    /// forces, else the OS interface when resctrl is mounted, else MSR.
    #[default]
    Auto,
    /// Model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// The kernel's resctrl filesystem.
    Os,
    /// RDT 1.3's MMIO registers (pqos v26.03 `--iface=mmio`): the MSR interface for cores
    /// and L3 CAT, region-aware MBM and MBA through the registers the ACPI ERDT table
    /// locates (`/dev/mem`). Never chosen by `auto` (as pqos v26.03: only on request).
    Mmio,
}

impl Iface {
    /// pqos's name: `auto`, `msr`, `os`, `mmio`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Msr => "msr",
            Self::Os => "os",
            Self::Mmio => "mmio",
        }
    }
}

impl fmt::Display for Iface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An interface name that is not `auto`, `msr` or `os`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown interface `{0}` (expected auto, msr, os or mmio)")]
pub struct ParseIfaceError(pub String);

impl FromStr for Iface {
    type Err = ParseIfaceError;

    /// `auto`, `msr`, `os` or `mmio`, any case (pqos `--iface`).
    fn from_str(s: &str) -> Result<Self, ParseIfaceError> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "msr" => Ok(Self::Msr),
            "os" => Ok(Self::Os),
            "mmio" => Ok(Self::Mmio),
            _ => Err(ParseIfaceError(s.to_owned())),
        }
    }
}

/// Where CPUID comes from when a platform is opened from files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuidFrom {
    /// `<dev_cpu>/0/cpuid` when that device exists (the `cpuid` module), else the CPUID
    /// instruction: the host.
    DeviceOrInstruction,
    /// `<dev_cpu>/0/cpuid`, which must exist: a directory standing for another machine (a
    /// mounted simulated platform, `--sysroot`), whose CPUID is never the host's.
    Device,
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
    /// The resctrl root (`/sys/fs/resctrl`). Its mount is read from [`Paths::proc`]`/mounts`
    /// and changed with `umount2(2)` + `mount(2)`, unless
    /// [`OpenOptions::resctrl_mount_control`] gives another way.
    pub resctrl: PathBuf,
    /// The host's `/proc` (threads of a process, `/proc/mounts`).
    pub proc: PathBuf,
    /// Where CPUID comes from.
    pub cpuid: CpuidFrom,
    /// A root-only directory for state that must outlive a process, so that the next open
    /// can clean up after a process that was killed (`/run/rdt` on a host): the journal of
    /// a transaction in progress (both interfaces), the RMIDs a monitoring run gave CPUs
    /// and the writers' lock `msr.lock` (MSR interface).
    pub run: PathBuf,
    /// The root holding the ACPI tables (`sys/firmware/acpi/tables/`) and `dev/mem` of the
    /// MMIO interface (RDT 1.3): `/` on a host, the platform's directory under a sysroot.
    pub firmware: PathBuf,
}

impl Paths {
    /// The host's paths: `/dev/cpu`, `/sys/devices/system`, `/sys/fs/resctrl`, `/proc`;
    /// CPUID from `/dev/cpu/0/cpuid` or the instruction.
    #[must_use]
    pub fn host() -> Self {
        Self {
            cpuid: CpuidFrom::DeviceOrInstruction,
            run: PathBuf::from(rdt_host::runfile::HOST_RUN_DIR),
            ..Self::under(Path::new("/"))
        }
    }

    /// The same paths under `root` (`<root>/dev/cpu`, `<root>/sys/devices/system`,
    /// `<root>/sys/fs/resctrl`); `/proc` stays the host's, and
    /// CPUID must come from `<root>/dev/cpu/0/cpuid` ([`CpuidFrom::Device`]). The run
    /// directory is one of the host's per platform, `/run/rdt/sysroot-<hash>` (a mounted
    /// platform has no writable `/run` of its own), keyed by the canonical path of `root`:
    /// every spelling of one directory (relative, with `.` or `..`, through a symlink)
    /// shares one journal, writers' lock and record of named classes, so a run killed
    /// under one spelling is rolled back by the next under any other. (Not by the device
    /// and inode of a mount: a platform unmounted and mounted again at its place is the
    /// same platform, whose journal must still be found.) A mounted simulated platform's
    /// mount control and PMU counters are not paths: [`OpenOptions::sysroot`] injects them.
    #[must_use]
    pub fn under(root: impl AsRef<Path>) -> Self {
        let root = root.as_ref();
        Self {
            dev_cpu: root.join("dev/cpu"),
            sys_devices_system: root.join("sys/devices/system"),
            resctrl: root.join("sys/fs/resctrl"),
            proc: PathBuf::from("/proc"),
            cpuid: CpuidFrom::Device,
            run: rdt_host::runfile::sysroot_run_dir(root),
            firmware: root.to_path_buf(),
        }
    }

    /// Whether resctrl is mounted at [`Paths::resctrl`]: its root group's `schemata` exists
    /// only while it is (the probe of pqos's `auto`).
    #[must_use]
    pub fn resctrl_mounted(&self) -> bool {
        self.resctrl.join("schemata").exists()
    }
}

impl Default for Paths {
    fn default() -> Self {
        Self::host()
    }
}

/// Resolving the requested interface failed: pqos v25.04's refusals, with its words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IfaceError {
    /// `--iface=msr` together with an option that needs the OS interface.
    #[error(
        "Error: explicit interface 'msr' is not compatible with option '{option}' which requires 'os'."
    )]
    MsrConflicts {
        /// The option (`-p/--mon-pid`).
        option: String,
    },
    /// `--iface=mmio` together with an option that needs the OS interface.
    #[error(
        "Error: explicit interface 'mmio' is not compatible with option '{option}' which requires 'os'."
    )]
    MmioConflicts {
        /// The option (`-p/--mon-pid`).
        option: String,
    },
    /// `RDT_IFACE` is neither `OS…` nor `MSR…`.
    #[error(
        "Interface initialization error! Invalid interface enforcement selection: RDT_IFACE={value:?} (expected OS or MSR)"
    )]
    BadRdtIface {
        /// The variable's value.
        value: String,
    },
    /// `RDT_IFACE` forces the other interface.
    #[error(
        "Interface initialization error! Your system has been restricted to use the {} interface only! (RDT_IFACE is set{})",
        iface_upper(*.forced),
        .option.as_ref().map_or_else(String::new, |o| format!("; option '{o}' requires 'os'"))
    )]
    Restricted {
        /// The interface `RDT_IFACE` forces.
        forced: Interface,
        /// The option that needs the OS interface, if any.
        option: Option<String>,
    },
    /// `auto` with an option that needs the OS interface, and resctrl is not mounted.
    #[error(
        "Error: option '{option}' requires interface 'os' but only 'msr' is available on this platform. (resctrl is not mounted: mount -t resctrl resctrl /sys/fs/resctrl)"
    )]
    OsUnavailable {
        /// The option.
        option: String,
    },
    /// The platform has no OS interface at all (an in-process [`MsrSource`]), and the
    /// request resolves to it.
    #[error("{platform} has the MSR interface only ({})", .because)]
    SourceHasNoOs {
        /// The platform ([`MsrSource::name`]).
        platform: String,
        /// Why the OS interface was wanted.
        because: OsWanted,
    },
}

/// Why a request resolved to the OS interface ([`IfaceError::SourceHasNoOs`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OsWanted {
    /// `--iface=os`.
    Explicit,
    /// An option needs it (`pid:` associations, `-p`).
    Option(String),
    /// `RDT_IFACE=OS`.
    RdtIface,
}

impl fmt::Display for OsWanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Explicit => f.write_str("the OS interface was asked for"),
            Self::Option(o) => write!(f, "'{o}' needs the OS interface"),
            Self::RdtIface => f.write_str("RDT_IFACE asks for the OS interface"),
        }
    }
}

const fn iface_upper(i: Interface) -> &'static str {
    match i {
        Interface::Msr => "MSR",
        Interface::Os => "OS",
        Interface::Mmio => "MMIO",
    }
}

/// Resolves the interface as pqos v25.04 does (`lib/cap.c` `discover_interface`,
/// pqos(8)): an option that needs the OS interface (`needs_os`: `pid:` associations, `-p`)
/// narrows the choice and an explicit `msr` must not contradict it; `RDT_IFACE` (`OS…` or
/// `MSR…`, any case) restricts the interface and chooses it for `auto`; otherwise `auto` is
/// the OS interface where resctrl is mounted, else MSR.
///
/// # Errors
/// [`IfaceError::MsrConflicts`], [`IfaceError::BadRdtIface`], [`IfaceError::Restricted`],
/// [`IfaceError::OsUnavailable`], each worded as pqos words it.
///
/// # Examples
/// ```
/// use rdt_pqos::{Iface, Interface, resolve_iface};
/// assert_eq!(resolve_iface(Iface::Auto, None, None, true), Ok(Interface::Os));
/// assert_eq!(resolve_iface(Iface::Auto, None, Some("msr"), true), Ok(Interface::Msr));
/// assert!(resolve_iface(Iface::Msr, Some("-p/--mon-pid"), None, true).is_err());
/// ```
pub fn resolve_iface(
    request: Iface,
    needs_os: Option<&str>,
    rdt_iface: Option<&str>,
    resctrl_mounted: bool,
) -> Result<Interface, IfaceError> {
    if let (Iface::Msr, Some(option)) = (request, needs_os) {
        return Err(IfaceError::MsrConflicts {
            option: option.to_owned(),
        });
    }
    if let (Iface::Mmio, Some(option)) = (request, needs_os) {
        return Err(IfaceError::MmioConflicts {
            option: option.to_owned(),
        });
    }
    let forced = match rdt_iface {
        None => None,
        Some(v) if v.len() >= 2 && v.as_bytes()[..2].eq_ignore_ascii_case(b"OS") => {
            Some(Interface::Os)
        }
        Some(v) if v.len() >= 3 && v.as_bytes()[..3].eq_ignore_ascii_case(b"MSR") => {
            Some(Interface::Msr)
        }
        Some(v) => {
            return Err(IfaceError::BadRdtIface {
                value: v.to_owned(),
            });
        }
    };
    let restricted = |forced| IfaceError::Restricted {
        forced,
        option: needs_os.map(str::to_owned),
    };
    match (request, forced) {
        (Iface::Msr | Iface::Mmio, Some(Interface::Os)) => Err(restricted(Interface::Os)),
        (Iface::Mmio, _) => Ok(Interface::Mmio),
        (Iface::Os, Some(Interface::Msr)) => Err(restricted(Interface::Msr)),
        (Iface::Auto, Some(Interface::Msr)) if needs_os.is_some() => {
            Err(restricted(Interface::Msr))
        }
        (Iface::Msr, _) => Ok(Interface::Msr),
        (Iface::Os, _) => Ok(Interface::Os),
        (Iface::Auto, Some(forced)) => Ok(forced),
        (Iface::Auto, None) => match needs_os {
            Some(option) if !resctrl_mounted => Err(IfaceError::OsUnavailable {
                option: option.to_owned(),
            }),
            _ if resctrl_mounted => Ok(Interface::Os),
            _ => Ok(Interface::Msr),
        },
    }
}

/// Opening a platform failed. The message names the cause itself (a library user printing
/// it with `{}` learns what went wrong), so the cause is not repeated as a
/// [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The interface cannot be resolved.
    #[error(transparent)]
    Iface(#[from] IfaceError),
    /// The CPU enumerates no RDT/PQoS feature; the text names the CPUID bits.
    #[error("this CPU has no Intel RDT or AMD PQoS: {0}")]
    NoRdt(String),
    /// A directory standing for a platform lacks a file the opener needs (never replaced
    /// by the host's: `--sysroot DIR` without `DIR/dev/cpu`).
    #[error("{}: no such file or directory ({what})", .path.display())]
    Missing {
        /// The missing path.
        path: PathBuf,
        /// What it was needed for.
        what: &'static str,
    },
    /// A file the opener needs is there but cannot be reached: the error keeps the
    /// system's kind (`permission denied` for a user who may not enter another user's
    /// FUSE mount, EACCES), never "no such file or directory".
    #[error("{}: {} ({what})", .path.display(), .error.kind())]
    Inaccessible {
        /// The path.
        path: PathBuf,
        /// What it was needed for.
        what: &'static str,
        /// The system's error (its kind is in the message; not a `source`).
        error: std::io::Error,
    },
    /// The topology could not be read from sysfs.
    #[error("cannot read the CPU topology from {}: {}", .path.display(), error_chain(.source))]
    Topology {
        /// The sysfs directory.
        path: PathBuf,
        /// Why.
        source: TopologyError,
    },
    /// The MSR interface could not start (no `msr` module, not root, inconsistent CDP state
    /// across domains).
    #[error("cannot open the MSR interface: {}", error_chain(.0))]
    Msr(MsrError),
    /// The OS interface could not start: resctrl is not mounted (the message says how to
    /// mount it), its `info/` does not parse, another tool holds its lock.
    #[error("cannot open the OS interface: {}", error_chain(.0))]
    Resctrl(ResctrlError),
    /// The MMIO interface (RDT 1.3) cannot be opened: no ERDT/MRRM, tables that do not fit
    /// the topology, `/dev/mem` not usable.
    #[error("cannot open the MMIO interface: {}", error_chain(.0))]
    Mmio(rdt_mmio::MmioError),
    /// The simulated platform ([`OpenOptions::simulated`], feature `sim`) could not be
    /// opened: an unknown model, a state file another program holds or that does not
    /// load, a state directory that is not safe.
    #[cfg(feature = "sim")]
    #[error("cannot open the simulated platform: {}", error_chain(.0))]
    Sim(crate::sim::SessionError),
    /// `RDT_SIM` asks for a simulated platform ([`OpenOptions::platform_from_env`]) and the
    /// library was built without it.
    #[error(
        "RDT_SIM={model} asks for the simulated platform, but this program was built without \
         it (cargo feature `sim` of rdt-pqos, e.g. cargo run --features sim); unset RDT_SIM \
         to use the host"
    )]
    SimUnavailable {
        /// The model `RDT_SIM` names.
        model: String,
    },
}

impl OpenError {
    /// The MSR backend's error, when opening failed there.
    #[must_use]
    pub const fn msr(&self) -> Option<&MsrError> {
        match self {
            Self::Msr(e) => Some(e),
            _ => None,
        }
    }

    /// The OS backend's error, when opening failed there.
    #[must_use]
    pub const fn resctrl(&self) -> Option<&ResctrlError> {
        match self {
            Self::Resctrl(e) => Some(e),
            _ => None,
        }
    }
}

/// What a platform can do ([`OpenOptions::capabilities`]): what pqos `-d` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlatformCapabilities {
    /// The interface the capabilities were read through.
    pub interface: Interface,
    /// The capabilities, with the CDP and MBA controller state of the platform.
    pub capabilities: Capabilities,
    /// The MBA software controller's state ([`BackendExt::mba_ctrl`]).
    pub mba_ctrl: Option<MbaCtrl>,
    /// resctrl's monitoring details ([`BackendExt::mbm_details`]); `None` on MSR.
    pub mbm: Option<rdt_core::MbmDetails>,
    /// L3 I/O allocation ([`BackendExt::io_alloc`]: resctrl on Linux 6.19+); `None` elsewhere.
    pub io_alloc: Option<IoAlloc>,
    /// What is worth telling the user (pqos's `WARN:` lines).
    pub notices: Vec<Notice>,
}

/// Something worth telling the user about a platform that did open (pqos prints these as
/// `WARN:` lines).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Notice {
    /// The MSR interface was opened while resctrl is mounted: writing registers under the
    /// kernel's feet may corrupt resctrl's view (pqos `lib/cap.c`).
    ResctrlMountedOnMsr {
        /// The resctrl root.
        resctrl: PathBuf,
    },
    /// CDP is on in some cache domains and off in others (a reset that was killed half-way):
    /// the platform opened for reads and resets; mask writes are refused until a reset sets
    /// CDP on or off everywhere (the message says which).
    CdpInconsistent(String),
    /// What a run left behind when it ended before finishing was given back or rolled back
    /// ([`OpenOptions::reclaim`]: its monitoring, a leased class of service, a transaction's
    /// writes); also logged as a `WARN` record.
    Reclaimed(Reclaimed),
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ResctrlMountedOnMsr { resctrl } => write!(
                f,
                "resctrl is mounted at {}: programming the MSR interface may corrupt its \
                 configuration",
                resctrl.display()
            ),
            Self::Reclaimed(r) => r.fmt(f),
            Self::CdpInconsistent(why) => f.write_str(why),
        }
    }
}

/// What happens to the capabilities' PMU events when perf events cannot be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum PmuCapsPolicy {
    /// Report only what can be counted: without perf events the capabilities list no IPC
    /// or LLC-miss counting (for monitoring).
    #[default]
    Usable,
    /// On the MSR interface, report what CPUID enumerates even when perf events cannot
    /// count it (a capability display: pqos `-d`, `lib/hw_cap.c`). The OS interface always
    /// reports what perf events can count (`lib/os_cap.c`).
    Enumerated,
}

/// A platform the caller brings, programmed through MSRs: the in-process simulated
/// platform (`rdt_sim::SimHandle` is both its [`MsrIo`] and its [`PmuSource`]), a test
/// double, a recorded machine.
#[allow(missing_debug_implementations)] // trait objects
pub struct MsrSource {
    /// Its registers.
    pub io: Box<dyn MsrIo + Send>,
    /// Its PMU (IPC, LLC misses); [`NoPmu`] for none.
    pub pmu: Box<dyn PmuSource + Send>,
    /// Its capabilities.
    pub capabilities: Capabilities,
    /// Its topology.
    pub topology: Topology,
    /// A name for messages (`the simulated broadwell-ep`).
    pub name: String,
    /// Where the platform keeps the state that outlives a process ([`Paths::run`]: journals,
    /// named classes, the writers' lock, RMID claims); `None` for none (a transaction killed
    /// half-way is then not rolled back, and named classes last one process).
    pub run_dir: Option<PathBuf>,
    /// Its CPUID as CPU 0 answers it, when known: opening logs pqos's `CACHE:` lines from
    /// it after choosing the interface ([`rdt_core::discovery::cache_sharing_lines`], as
    /// opening a host does); `None` logs none.
    pub cpuid: Option<Box<dyn CpuidSource + Send>>,
    /// Its OS interface, when it has one: a resctrl served without a mount
    /// (`rdt_sim::inprocess::InProcessResctrl` for the in-process simulated platform).
    /// `None`: the MSR interface only.
    pub os: Option<OsFace>,
    /// Its MMIO interface (RDT 1.3), when it has one: its ACPI tables and registers.
    /// `None`: `--iface=mmio` is refused.
    pub mmio: Option<MmioFace>,
}

/// The MMIO interface of a platform the caller brings ([`MsrSource::mmio`]).
pub struct MmioFace {
    /// Its ACPI ERDT, MRRM and IRDT tables and CXL windows.
    pub tables: rdt_mmio::AcpiTables,
    /// Its MMIO registers.
    pub mem: Box<dyn rdt_mmio::MmioIo + Send>,
    /// A second access to them for I/O RDT (the IRDT links' tagging registers) beside the
    /// MMIO interface, which holds [`MmioFace::mem`]; `None`: no I/O RDT on `--iface=mmio`.
    /// On the MSR interface I/O RDT uses [`MmioFace::mem`].
    pub iordt_mem: Option<Box<dyn rdt_mmio::MmioIo + Send>>,
}

impl fmt::Debug for MmioFace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmioFace")
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

/// The OS interface of a platform the caller brings ([`MsrSource::os`]): its resctrl
/// filesystem behind the backend's file seam, and the seam that mounts it.
///
/// [`OpenOptions::open_source`] treats it as a host's resctrl: `auto` chooses it when it is
/// mounted ([`MountControl::options`]); a request that needs the OS interface while it is
/// not mounted mounts it with the default options first (as an operator runs `mount -t
/// resctrl` before using it), which [`OpenOptions::open`] never does on a host.
#[allow(missing_debug_implementations)] // trait objects
pub struct OsFace {
    /// The files under its root ([`rdt_resctrl::ResctrlOptions::files`]).
    pub files: Arc<dyn ResctrlFs>,
    /// Reading and changing how it is mounted (CDP and `mba_MBps` remounts).
    pub mount: Box<dyn MountControl>,
    /// The name of its root in messages and errors (`sim:skylake-sp:/sys/fs/resctrl`).
    pub root: PathBuf,
}

/// What [`OpenOptions::resctrl_mount_control`] calls at each open.
type MakeMountControl = dyn Fn() -> Option<Box<dyn MountControl>> + Send + Sync;

/// What [`OpenOptions::fallback_pmu`] calls at each open.
type MakePmu = dyn Fn() -> Option<Box<dyn PmuSource + Send>> + Send + Sync;

/// A seam injected into [`OpenOptions`]: options are equal when they hold the same one.
struct Injected<F: ?Sized>(Arc<F>);

impl<F: ?Sized> Clone for Injected<F> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<F: ?Sized> PartialEq for Injected<F> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<F: ?Sized> Eq for Injected<F> {}

impl<F: ?Sized> fmt::Debug for Injected<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Injected")
    }
}

/// Where `RDT_IFACE` comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RdtIfaceFrom {
    /// This process's environment, read when the platform is opened.
    Environment,
    /// A value the caller gives (`None`: unset).
    Given(Option<String>),
}

/// How to open a platform: the requested [`Iface`], the [`Paths`], `RDT_IFACE`, the
/// options that narrow the interface, the resctrl lock timeout, the PMU policy. The one
/// opener of the library: [`Rdt::open`] and [`Rdt::open_at`] are shorthands for it.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use rdt_pqos::{Backend, BackendExt, Iface, OpenOptions};
/// let rdt = OpenOptions::new(Iface::Auto)
///     .sysroot("/tmp/rdt")              // a mounted simulated platform
///     .lock_timeout(Duration::from_secs(1))
///     .open()?;
/// println!("{:?} interface, {} CPUs", rdt.interface(), rdt.topology().all_cpus().len());
/// # Ok::<(), rdt_pqos::OpenError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    iface: Iface,
    paths: Paths,
    rdt_iface: RdtIfaceFrom,
    needs_os: Option<String>,
    lock_timeout: Option<Duration>,
    pmu_caps: PmuCapsPolicy,
    reclaim: bool,
    /// [`OpenOptions::resctrl_mount_control`].
    mount_control: Option<Injected<MakeMountControl>>,
    /// [`OpenOptions::fallback_pmu`].
    fallback_pmu: Option<Injected<MakePmu>>,
    /// The in-process simulated platform to open instead of the paths'.
    #[cfg(feature = "sim")]
    pub(crate) in_process: Option<crate::sim::SessionOptions>,
    /// `RDT_SIM` named this model, but the library was built without `sim`.
    #[cfg(not(feature = "sim"))]
    unavailable_model: Option<String>,
}

impl OpenOptions {
    /// Options to open the host's platform through `iface`; `RDT_IFACE` is read from the
    /// environment when the platform is opened.
    #[must_use]
    pub fn new(iface: Iface) -> Self {
        Self {
            iface,
            paths: Paths::host(),
            rdt_iface: RdtIfaceFrom::Environment,
            needs_os: None,
            lock_timeout: None,
            pmu_caps: PmuCapsPolicy::Usable,
            reclaim: true,
            mount_control: None,
            fallback_pmu: None,
            #[cfg(feature = "sim")]
            in_process: None,
            #[cfg(not(feature = "sim"))]
            unavailable_model: None,
        }
    }

    /// The platform whose files are under `root` ([`Paths::under`]): `root/dev/cpu` must
    /// exist and CPUID comes from its device, never from the host.
    ///
    /// With feature `sim`, `root` may be a simulated platform mounted with FUSE: its
    /// resctrl mount control and PMU counters are injected
    /// (`OpenOptions::attach_simulator`), each used when the platform serves it. Without
    /// it, the platform's files are used as a host's: IPC and LLC misses only where this
    /// host's perf events count, and resctrl remounted with `mount(2)`.
    #[must_use]
    pub fn sysroot(self, root: impl AsRef<Path>) -> Self {
        let opts = self.paths(Paths::under(root.as_ref()));
        #[cfg(feature = "sim")]
        let opts = opts.attach_simulator(root.as_ref());
        opts
    }

    /// The seam a simulator or a test double fills for the resctrl mount: at each open,
    /// `make` gives the [`MountControl`] the OS interface reads the mount options from and
    /// remounts through (CDP and `mba_MBps` changes), or `None` for the default, the
    /// kernel's mount ([`Paths::proc`]`/mounts`, `umount2(2)` + `mount(2)`). A mounted
    /// simulated platform's adapter (`rdt_sim::attach`) gives its control file this way.
    #[must_use]
    pub fn resctrl_mount_control(
        mut self,
        make: impl Fn() -> Option<Box<dyn MountControl>> + Send + Sync + 'static,
    ) -> Self {
        self.mount_control = Some(Injected(Arc::new(make)));
        self
    }

    /// The seam a simulator or a test double fills for the PMU where this host's perf
    /// events cannot be opened (a VM without a virtual PMU): at each open, `make` gives the
    /// source IPC and LLC misses are counted with instead, or `None` for none (the default:
    /// no IPC or LLC-miss counting, as [`PmuCapsPolicy`] says). Perf events are used
    /// whenever they open. A mounted simulated platform's adapter (`rdt_sim::attach`)
    /// gives the model's counters this way, so that they follow the workload model.
    #[must_use]
    pub fn fallback_pmu(
        mut self,
        make: impl Fn() -> Option<Box<dyn PmuSource + Send>> + Send + Sync + 'static,
    ) -> Self {
        self.fallback_pmu = Some(Injected(Arc::new(make)));
        self
    }

    /// The platform under the directory `RDT_SYSROOT` names, when that variable is set (as
    /// `pqos --sysroot` and its `RDT_SYSROOT` do); the host's otherwise.
    #[must_use]
    pub fn sysroot_from_env(self) -> Self {
        match std::env::var_os("RDT_SYSROOT") {
            Some(root) if !root.is_empty() => self.sysroot(PathBuf::from(root)),
            _ => self,
        }
    }

    /// The platform the environment names, as `pqos` reads it: `RDT_SIM=MODEL` the
    /// in-process simulated platform (`OpenOptions::simulated`'s, feature `sim`), else
    /// `RDT_SYSROOT=DIR` ([`OpenOptions::sysroot_from_env`]), else the host's. Without the
    /// `sim` feature, a set `RDT_SIM` makes [`OpenOptions::open`] fail with
    /// [`OpenError::SimUnavailable`], never open the host instead.
    ///
    /// # Examples
    /// ```no_run
    /// use rdt_pqos::{Backend, BackendExt, Iface, OpenOptions};
    /// // RDT_SIM=broadwell-ep ./program: a simulated Xeon, no root needed
    /// let rdt = OpenOptions::new(Iface::Auto).platform_from_env().open()?;
    /// println!("{} CPUs", rdt.topology().all_cpus().len());
    /// # Ok::<(), rdt_pqos::OpenError>(())
    /// ```
    #[must_use]
    pub fn platform_from_env(self) -> Self {
        match std::env::var_os("RDT_SIM") {
            Some(model) if !model.is_empty() => {
                let model = model.to_string_lossy().into_owned();
                #[cfg(feature = "sim")]
                return Self::simulated(model).inherit(self);
                #[cfg(not(feature = "sim"))]
                return Self {
                    unavailable_model: Some(model),
                    ..self
                };
            }
            _ => self.sysroot_from_env(),
        }
    }

    /// `self` (a simulated platform's options) with `from`'s interface choices.
    #[cfg(feature = "sim")]
    fn inherit(self, from: Self) -> Self {
        Self {
            in_process: self.in_process,
            ..from
        }
    }

    /// The platform whose files are at `paths`.
    #[must_use]
    pub fn paths(mut self, paths: Paths) -> Self {
        self.paths = paths;
        self
    }

    /// The value of `RDT_IFACE` to use instead of the environment's (`None`: unset).
    #[must_use]
    pub fn rdt_iface(mut self, value: Option<String>) -> Self {
        self.rdt_iface = RdtIfaceFrom::Given(value);
        self
    }

    /// An option of the caller needs the OS interface (`pid:` associations, per-task
    /// monitoring; pqos's `narrow_iface`); `option` names it in errors.
    #[must_use]
    pub fn needs_os(mut self, option: impl Into<String>) -> Self {
        self.needs_os = Some(option.into());
        self
    }

    /// How long the OS interface waits for another tool's resctrl lock (default 5 s).
    #[must_use]
    pub const fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = Some(timeout);
        self
    }

    /// What the capabilities say about PMU events when perf events are unusable.
    #[must_use]
    pub const fn pmu_caps(mut self, policy: PmuCapsPolicy) -> Self {
        self.pmu_caps = policy;
        self
    }

    /// Whether opening first rolls back the allocation changes and gives back the
    /// monitoring of runs that ended before they finished (default: yes): transactions
    /// whose process was killed half-way, from their journals in [`Paths::run`]
    /// ([`crate::transaction::recover`]); `pqos-<pid>-<n>` resctrl groups whose process
    /// is gone ([`rdt_resctrl::ResctrlBackend::reclaim_dead_groups`]); RMIDs a killed run
    /// left on CPUs ([`rdt_msr::MsrBackend::reclaim_dead_runs`]); classes of service leased
    /// by processes that ended without giving them back ([`rdt_host::lease::reclaim`]).
    /// Each is a `WARN` log record and a [`Notice::Reclaimed`].
    #[must_use]
    pub const fn reclaim(mut self, on: bool) -> Self {
        self.reclaim = on;
        self
    }

    /// The requested interface.
    #[must_use]
    pub const fn iface(&self) -> Iface {
        self.iface
    }

    /// The paths.
    #[must_use]
    pub const fn get_paths(&self) -> &Paths {
        &self.paths
    }

    fn rdt_iface_value(&self) -> Option<String> {
        match &self.rdt_iface {
            RdtIfaceFrom::Given(v) => v.clone(),
            RdtIfaceFrom::Environment => std::env::var("RDT_IFACE").ok(),
        }
    }

    /// The interface [`OpenOptions::open`] would use, without opening anything
    /// ([`resolve_iface`] with this host's `RDT_IFACE` and resctrl mount).
    ///
    /// # Errors
    /// As [`resolve_iface`].
    pub fn resolve(&self) -> Result<Interface, IfaceError> {
        self.resolve_with(self.paths.resctrl_mounted())
    }

    /// [`resolve_iface`] for a platform where resctrl is `mounted` or not, logging what
    /// goes into the choice as pqos does (`INFO:` records).
    fn resolve_with(&self, mounted: bool) -> Result<Interface, IfaceError> {
        let rdt_iface = self.rdt_iface_value();
        log::info!(
            "Requested interface: {}",
            self.iface.name().to_ascii_uppercase()
        );
        if let Some(v) = &rdt_iface {
            log::info!("RDT_IFACE={v}");
        }
        // pqos's `discover_interface` (lib/cap.c) probes for resctrl, and logs `resctrl
        // detected`, only when asked to choose (AUTO); an interface named on the command
        // line goes straight to its backend, whose `os_cap_init` (lib/os_cap.c) logs it once
        // (`Capabilities::init_lines`).
        if mounted && self.iface == Iface::Auto {
            log::info!("resctrl detected");
        }
        resolve_iface(
            self.iface,
            self.needs_os.as_deref(),
            rdt_iface.as_deref(),
            mounted,
        )
    }

    /// Opens the platform at the paths: CPUID from [`Paths::cpuid`], the topology from
    /// sysfs, the resolved interface ([`OpenOptions::resolve`]), IPC and LLC misses from
    /// perf events ([`PerfPmu`], per CPU and per task) where the host has a PMU.
    ///
    /// The OS interface reads `info/` over CPUID's capabilities
    /// ([`rdt_resctrl::ResctrlInfo::capabilities`]), takes tasks' threads from `/proc`, and
    /// remounts (for CDP or `mba_MBps` changes) through the
    /// [`OpenOptions::resctrl_mount_control`] given, else with `umount2(2)` + `mount(2)`.
    /// The MSR interface opened while resctrl is mounted adds
    /// [`Notice::ResctrlMountedOnMsr`] to [`Rdt::notices`].
    ///
    /// # Errors
    /// [`OpenError::Iface`] (the interface cannot be resolved); [`OpenError::Missing`] (no
    /// `dev/cpu` under a sysroot); [`OpenError::NoRdt`] when the CPU has no RDT/PQoS
    /// (naming the CPUID bits; MSR interface); [`OpenError::Topology`] when sysfs cannot be
    /// read; [`OpenError::Msr`] when the MSR backend cannot read its initial state (no `msr`
    /// module, not root); [`OpenError::Resctrl`] when resctrl is not mounted (saying how to
    /// mount it), cannot be read, or another tool holds its lock.
    pub fn open(&self) -> Result<Rdt, OpenError> {
        #[cfg(feature = "sim")]
        if let Some(session) = &self.in_process {
            return self.open_simulated(session);
        }
        #[cfg(not(feature = "sim"))]
        if let Some(model) = &self.unavailable_model {
            return Err(OpenError::SimUnavailable {
                model: model.clone(),
            });
        }
        let interface = self.resolve()?;
        log::info!("Selected interface: {}", iface_upper(interface));
        let paths = &self.paths;
        let (mut caps, layout) = self.detect(interface, true)?;
        if interface == Interface::Os {
            let topology = Topology::from_sysfs(&paths.sys_devices_system)
                .map_err(|e| self.topology_error(e))?;
            // pqos `lib/os_cap.c`: on the OS interface PMU events are what perf can count.
            let pmu = self.host_pmu(&topology.all_cpus(), &mut caps, PmuCapsPolicy::Usable);
            let backend = ResctrlBackend::open(self.resctrl_options(), topology, Some(caps), pmu)
                .map_err(OpenError::Resctrl)?;
            return Ok(self.resctrl_reclaimed(backend));
        }
        let mut io: Box<dyn MsrIo + Send> = Box::new(DevCpuMsr::with_root(&paths.dev_cpu));
        let (topology, x2apic) = self.msr_topology(io.as_mut(), layout)?;
        let pmu = self.host_pmu(&topology.all_cpus(), &mut caps, self.pmu_caps);
        let backend = MsrBackend::new(io, caps, topology, pmu)?;
        if interface == Interface::Mmio {
            let face = self.host_mmio()?;
            return self.mmio_with_run_dir(backend, Some(&paths.run), face, &x2apic);
        }
        let io_rdt = self.host_iordt(backend.capabilities());
        let mut rdt = self.msr_with_run_dir(backend, &paths.run, io_rdt);
        if let Some(n) = self.resctrl_mounted_on_msr() {
            rdt.notices.push(n);
        }
        Ok(rdt)
    }

    /// What the platform at the paths can do, through the interface [`OpenOptions::open`]
    /// would use, reading only what that takes (pqos `-d`): CPU 0's CPUID, the online CPUs
    /// (for perf events), and on the MSR interface the CDP enable bits of every L3 instance
    /// and of one L2 instance per L3 instance ([`Topology::l3_representatives_from_sysfs`];
    /// an allocation command reads every L2 instance's and reports instances that differ),
    /// on the OS interface resctrl's `info/` and root group. Nothing is reclaimed
    /// ([`OpenOptions::reclaim`]): a report changes nothing.
    ///
    /// On the 160-CPU sapphire-rapids model this reads ~150 files where
    /// [`OpenOptions::open`] reads ~330 (the per-CPU topology).
    ///
    /// # Errors
    /// As [`OpenOptions::open`].
    pub fn capabilities(&self) -> Result<PlatformCapabilities, OpenError> {
        #[cfg(not(feature = "sim"))]
        if let Some(model) = &self.unavailable_model {
            return Err(OpenError::SimUnavailable {
                model: model.clone(),
            });
        }
        #[cfg(feature = "sim")]
        if self.in_process.is_some() {
            // A model in this process: opening it whole costs no file reads.
            let mut rdt = self.open()?;
            return Ok(PlatformCapabilities {
                interface: rdt.interface(),
                capabilities: rdt.capabilities().clone(),
                mba_ctrl: rdt.mba_ctrl(),
                mbm: rdt.mbm_details().map_err(open_error_of)?,
                io_alloc: rdt.io_alloc().map_err(open_error_of)?,
                notices: rdt.notices().to_vec(),
            });
        }
        let interface = self.resolve()?;
        log::info!("Selected interface: {}", iface_upper(interface));
        let paths = &self.paths;
        let (mut caps, _) = self.detect(interface, false)?;
        if interface == Interface::Os {
            let online = Topology::online_from_sysfs(&paths.sys_devices_system)
                .map_err(|e| self.topology_error(e))?;
            let pmu = self.host_pmu(&online, &mut caps, PmuCapsPolicy::Usable);
            // The backend's topology is only used for per-CPU requests, which a report
            // makes none of.
            let mut backend =
                ResctrlBackend::open(self.resctrl_options(), Topology::default(), Some(caps), pmu)
                    .map_err(OpenError::Resctrl)?;
            let mba_ctrl = backend.mba_ctrl();
            crate::log_discovery(backend.capabilities(), Interface::Os, mba_ctrl);
            let mbm = backend.mbm_details().map_err(OpenError::Resctrl)?;
            return Ok(PlatformCapabilities {
                interface,
                capabilities: backend.capabilities().clone(),
                mba_ctrl: backend.mba_ctrl(),
                mbm,
                io_alloc: backend.io_alloc().map_err(OpenError::Resctrl)?,
                notices: Vec::new(),
            });
        }
        let sample = Topology::l3_representatives_from_sysfs(&paths.sys_devices_system)
            .map_err(|e| self.topology_error(e))?;
        let online = Topology::online_from_sysfs(&paths.sys_devices_system)
            .map_err(|e| self.topology_error(e))?;
        let pmu = self.host_pmu(&online, &mut caps, self.pmu_caps);
        let io: Box<dyn MsrIo + Send> = Box::new(DevCpuMsr::with_root(&paths.dev_cpu));
        let mut backend = MsrBackend::new(io, caps, sample, pmu)?;
        let mut notices: Vec<Notice> = backend
            .cdp_inconsistency()
            .map(Notice::CdpInconsistent)
            .into_iter()
            .collect();
        notices.extend(self.resctrl_mounted_on_msr());
        crate::log_discovery(backend.capabilities(), Interface::Msr, None);
        Ok(PlatformCapabilities {
            interface,
            capabilities: backend.capabilities().clone(),
            mba_ctrl: backend.mba_ctrl(),
            mbm: None,
            io_alloc: None,
            notices,
        })
    }

    /// The host's PMU through perf events ([`PerfPmu`]); where the kernel offers none (a VM
    /// without a virtual PMU), the [`OpenOptions::fallback_pmu`] given (a mounted simulated
    /// platform's counters), else no source, and under [`PmuCapsPolicy::Usable`] `caps`
    /// then report no IPC or LLC-miss counting.
    fn host_pmu(
        &self,
        cpus: &CpuSet,
        caps: &mut Capabilities,
        policy: PmuCapsPolicy,
    ) -> Box<dyn PmuSource + Send> {
        match PerfPmu::open(cpus, caps.pmu.llc_references) {
            Ok(pmu) => {
                if policy == PmuCapsPolicy::Usable {
                    caps.pmu.llc_references = pmu.counts_references();
                }
                Box::new(pmu)
            }
            Err(e) => {
                log::debug!("perf events: {}", error_chain(&e));
                if let Some(pmu) = self.fallback_pmu.as_ref().and_then(|make| (make.0)()) {
                    // pqos logs nothing here (its perf probe lines follow); a DEBUG record
                    // (`-V`) says where IPC and LLC misses come from
                    log::debug!("no perf events: PMU counters read from the platform itself");
                    return pmu;
                }
                if policy == PmuCapsPolicy::Usable {
                    caps.pmu = PmuCaps::default();
                }
                Box::new(NoPmu)
            }
        }
    }

    fn topology_error(&self, source: TopologyError) -> OpenError {
        OpenError::Topology {
            path: self.paths.sys_devices_system.clone(),
            source,
        }
    }

    /// The OS interface's options at the paths.
    fn resctrl_options(&self) -> ResctrlOptions {
        let paths = &self.paths;
        let mut opts = ResctrlOptions::new(&paths.resctrl)
            .proc_root(&paths.proc)
            .run_dir(&paths.run);
        opts = match self.mount_control.as_ref().and_then(|make| (make.0)()) {
            Some(control) => opts.mount_control(control),
            None => opts.mount_control(KernelMount::new(&paths.resctrl, paths.proc.join("mounts"))),
        };
        if let Some(t) = self.lock_timeout {
            opts = opts.lock_timeout(t);
        }
        opts
    }

    /// [`Notice::ResctrlMountedOnMsr`] when resctrl is mounted at the paths.
    fn resctrl_mounted_on_msr(&self) -> Option<Notice> {
        self.paths
            .resctrl
            .join("cpus")
            .exists()
            .then(|| Notice::ResctrlMountedOnMsr {
                resctrl: self.paths.resctrl.clone(),
            })
    }

    /// CPU 0's CPUID device as [`Paths::cpuid`] says: `None` for the CPUID instruction.
    /// The capabilities CPU 0's CPUID enumerates ([`OpenOptions::cpuid_device`], else the
    /// instruction); on the MSR interface a CPU without RDT is [`OpenError::NoRdt`], naming
    /// the CPUID bits (the OS interface takes what resctrl offers).
    /// The capabilities CPUID gives, and when `placing` the x2APIC id layout the MSR
    /// interface places CPUs with (`None` on the OS interface).
    fn detect(
        &self,
        interface: Interface,
        placing: bool,
    ) -> Result<(Capabilities, Option<ApicIdLayout>), OpenError> {
        let device = self.cpuid_device()?;
        let cpuid: &dyn CpuidSource = match &device {
            Some(dev) => dev,
            None => &NativeCpuid,
        };
        if interface.uses_msrs()
            && let Some(why) = explain_no_rdt(cpuid)
        {
            return Err(OpenError::NoRdt(why));
        }
        let layout = (placing && interface.uses_msrs())
            .then(|| ApicIdLayout::from_cpuid(cpuid))
            .flatten();
        log_cache_lines(Some(cpuid));
        Ok((Capabilities::detect(cpuid), layout))
    }

    /// The MSR interface's topology: from every online CPU's x2APIC id (IA32_X2APIC_APICID
    /// through the msr device the backend keeps open, one read per CPU) where the CPU's
    /// cores are of one type and in x2APIC mode, else from sysfs. Also the x2APIC ids read
    /// (by CPU; empty from sysfs), which the MMIO interface maps to ERDT domains without
    /// reading them again.
    fn msr_topology(
        &self,
        io: &mut dyn MsrIo,
        layout: Option<ApicIdLayout>,
    ) -> Result<(Topology, BTreeMap<LogicalCpu, u32>), OpenError> {
        let system = &self.paths.sys_devices_system;
        let mut x2apic = BTreeMap::new();
        if let Some(layout) = layout {
            let ids = Topology::from_x2apic_ids(system, layout, |cpu| {
                let id = io.read(cpu, IA32_X2APIC_APICID).ok()?;
                let id = u32::try_from(id).ok()?;
                x2apic.insert(cpu, id);
                Some(id)
            })
            .map_err(|e| self.topology_error(e))?;
            if let Some(topology) = ids {
                log::info!("topology from the x2APIC ids (IA32_X2APIC_APICID)");
                return Ok((topology, x2apic));
            }
            log::info!("no x2APIC id from the msr devices: topology from sysfs");
        }
        let topology = Topology::from_sysfs(system).map_err(|e| self.topology_error(e))?;
        Ok((topology, BTreeMap::new()))
    }

    fn cpuid_device(&self) -> Result<Option<DevCpuid>, OpenError> {
        let paths = &self.paths;
        let device = match paths.cpuid {
            CpuidFrom::Device => {
                let what = "the per-CPU msr and cpuid devices";
                match std::fs::metadata(&paths.dev_cpu) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => return Err(needed(&paths.dev_cpu, what, ErrorKind::NotFound.into())),
                    Err(e) => return Err(needed(&paths.dev_cpu, what, e)),
                }
                let dev = DevCpuid::open(dev_root(paths), LogicalCpu::new(0))
                    .map_err(|e| needed(&paths.dev_cpu.join("0/cpuid"), "CPUID of CPU 0", e))?;
                Some(dev)
            }
            CpuidFrom::DeviceOrInstruction => {
                DevCpuid::open(dev_root(paths), LogicalCpu::new(0)).ok()
            }
        };
        if let Some(dev) = &device {
            log::info!("CPUID from {}", dev.path().display());
        }
        Ok(device)
    }

    /// Runs a backend's reclaim when [`OpenOptions::reclaim`] asks for it: one `WARN` record
    /// and one notice per reclaimed item; a failure is a `WARN` record too (housekeeping
    /// does not stop the open).
    fn reclaimed<E: std::error::Error + 'static>(
        &self,
        reclaim: impl FnOnce() -> Result<Vec<Reclaimed>, E>,
    ) -> Vec<Notice> {
        if !self.reclaim {
            return Vec::new();
        }
        match reclaim() {
            Ok(list) => list
                .into_iter()
                .map(|r| {
                    log::warn!("{r}");
                    Notice::Reclaimed(r)
                })
                .collect(),
            Err(e) => {
                log::warn!(
                    "could not give back what ended runs left (monitoring, a class of service): {}",
                    error_chain(&e)
                );
                Vec::new()
            }
        }
    }

    /// Opens a platform the caller brings.
    ///
    /// Without an OS face ([`MsrSource::os`]) it has the MSR interface only, so a request
    /// that resolves to the OS interface (explicitly, through `RDT_IFACE`, or for an option
    /// that needs it) is refused; resctrl counts as not mounted. With one, the interface is
    /// resolved as on a host whose resctrl is mounted when the face is, and a request that
    /// needs the OS interface mounts it first ([`OsFace`]); the OS interface is then the
    /// resctrl backend over the face's files, with the source's capabilities, topology and
    /// PMU, tasks from the host's `/proc`.
    ///
    /// # Errors
    /// [`OpenError::Iface`] ([`IfaceError::SourceHasNoOs`] among others);
    /// [`OpenError::Msr`] when the initial CDP state cannot be read or is inconsistent;
    /// [`OpenError::Resctrl`] when the face cannot be mounted or read.
    pub fn open_source(&self, mut source: MsrSource) -> Result<Rdt, OpenError> {
        if let Some(os) = source.os.take() {
            return self.open_source_with_os(source, os);
        }
        let no_os = |because| IfaceError::SourceHasNoOs {
            platform: source.name.clone(),
            because,
        };
        // The source has no resctrl: it is "a host where resctrl is not mounted", except that
        // asking for the OS interface is refused naming the platform, not the mount.
        match (self.iface, &self.needs_os) {
            (Iface::Os, _) => return Err(no_os(OsWanted::Explicit).into()),
            (Iface::Auto, Some(option)) => {
                return Err(no_os(OsWanted::Option(option.clone())).into());
            }
            _ => {}
        }
        if self.resolve_with(false)? == Interface::Os {
            return Err(no_os(OsWanted::RdtIface).into());
        }
        self.open_source_msr(source)
    }

    /// The MSR interface of a source.
    fn open_source_msr(&self, source: MsrSource) -> Result<Rdt, OpenError> {
        let MsrSource {
            io,
            pmu,
            capabilities,
            topology,
            name: _,
            run_dir,
            cpuid,
            os: _,
            mmio,
        } = source;
        log_cache_lines(cpuid.as_deref().map(|c| c as &dyn CpuidSource));
        // only an explicit request resolves to the MMIO interface
        if self.iface == Iface::Mmio {
            let face = mmio.filter(|f| f.tables.has_mmio()).ok_or_else(|| {
                OpenError::Mmio(rdt_mmio::MmioError::NotAvailable(
                    "this platform has no ACPI ERDT and MRRM tables".into(),
                ))
            })?;
            let backend = MsrBackend::new(io, capabilities, topology, pmu)?;
            return self.mmio_with_run_dir(backend, run_dir.as_deref(), face, &BTreeMap::new());
        }
        let backend = MsrBackend::new(io, capabilities, topology, pmu)?;
        let io_rdt = mmio.and_then(|f| io_rdt_of(backend.capabilities(), f.tables.irdt, f.mem));
        let Some(dir) = run_dir else {
            return Ok(Rdt::from_msr_backend(backend).with_io_rdt(io_rdt));
        };
        Ok(self.msr_with_run_dir(backend, &dir, io_rdt))
    }

    /// [`OpenOptions::open_source`] of a source with an OS face.
    fn open_source_with_os(&self, source: MsrSource, os: OsFace) -> Result<Rdt, OpenError> {
        let mounted = os.mount.options().ok().flatten().is_some();
        let wants_os = self.iface == Iface::Os || self.needs_os.is_some();
        let interface = self.resolve_with(mounted || wants_os)?;
        log::info!("Selected interface: {}", iface_upper(interface));
        if interface.uses_msrs() {
            let mut rdt = self.open_source_msr(source)?;
            if mounted {
                rdt.notices
                    .push(Notice::ResctrlMountedOnMsr { resctrl: os.root });
            }
            return Ok(rdt);
        }
        if !mounted {
            let defaults = MountOptions::default();
            os.mount.remount(&defaults).map_err(|source| {
                OpenError::Resctrl(ResctrlError::Remount {
                    root: os.root.clone(),
                    wanted: defaults,
                    source,
                })
            })?;
        }
        let MsrSource {
            pmu,
            capabilities,
            topology,
            run_dir,
            cpuid,
            ..
        } = source;
        log_cache_lines(cpuid.as_deref().map(|c| c as &dyn CpuidSource));
        let mut opts = ResctrlOptions::new(&os.root)
            .files(os.files)
            .mount_control(os.mount)
            .proc_root(&self.paths.proc);
        if let Some(dir) = run_dir {
            opts = opts.run_dir(dir);
        }
        if let Some(t) = self.lock_timeout {
            opts = opts.lock_timeout(t);
        }
        let backend = ResctrlBackend::open(opts, topology, Some(capabilities), pmu)
            .map_err(OpenError::Resctrl)?;
        Ok(self.resctrl_reclaimed(backend))
    }

    /// The OS interface after rolling back the transactions and removing the monitor groups
    /// of runs that ended before they finished ([`OpenOptions::reclaim`]).
    fn resctrl_reclaimed(&self, mut backend: crate::DynResctrlBackend) -> Rdt {
        let mut reclaimed = self.reclaimed(|| transaction::recover(&mut backend));
        reclaimed.extend(self.reclaimed(|| rdt_host::lease::reclaim(&mut backend)));
        reclaimed.extend(self.reclaimed(|| backend.reclaim_dead_groups()));
        let mut rdt = Rdt::from_resctrl(backend);
        rdt.notices.extend(reclaimed);
        rdt
    }

    /// The host's MMIO interface: the tables under [`Paths::firmware`] and its `dev/mem`.
    fn host_mmio(&self) -> Result<MmioFace, OpenError> {
        let root = &self.paths.firmware;
        let tables = rdt_mmio::AcpiTables::read(root)
            .map_err(|e| OpenError::Mmio(rdt_mmio::MmioError::NotAvailable(error_chain(&e))))?;
        if !tables.has_mmio() {
            return Err(OpenError::Mmio(rdt_mmio::MmioError::NotAvailable(format!(
                "{} has no ACPI ERDT and MRRM tables",
                root.join(rdt_mmio::tables::TABLES_DIR).display()
            ))));
        }
        let mem = rdt_mmio::DevMem::open(root).map_err(|e| OpenError::Inaccessible {
            path: root.join("dev/mem"),
            what: "MMIO registers (RDT 1.3)",
            error: e,
        })?;
        let iordt_mem = tables
            .irdt
            .as_ref()
            .and_then(|_| rdt_mmio::DevMem::open(root).ok())
            .map(|m| Box::new(m) as Box<dyn rdt_mmio::MmioIo + Send>);
        Ok(MmioFace {
            tables,
            mem: Box::new(mem),
            iordt_mem,
        })
    }

    /// I/O RDT on the host's MSR interface: the IRDT under [`Paths::firmware`] and its
    /// `dev/mem`, where the capabilities say the part has I/O RDT; `None` (logged) when
    /// the table or `/dev/mem` cannot be had, as pqos carries on without it
    /// (`lib/iordt.c` `iordt_init`: "Could not obtain IRDT table").
    fn host_iordt(&self, caps: &Capabilities) -> Option<crate::DynIoRdt> {
        if !has_iordt(caps) {
            return None;
        }
        let root = &self.paths.firmware;
        let tables = rdt_mmio::AcpiTables::read(root)
            .map_err(|e| log::warn!("I/O RDT: {}", error_chain(&e)))
            .ok()?;
        let mem = rdt_mmio::DevMem::open(root)
            .map_err(|e| log::warn!("I/O RDT: {e}"))
            .ok()?;
        io_rdt_of(caps, tables.irdt, Box::new(mem))
    }

    /// The MMIO interface over the MSR backend `backend` and `face`, keeping its run state
    /// in `dir` as the MSR interface does, after rolling back the transactions (of both
    /// interfaces) and giving back the RMIDs of runs that ended before they finished.
    /// `x2apic`: the CPUs' x2APIC ids already read ([`rdt_mmio::MmioBackend::with_x2apic_ids`]).
    fn mmio_with_run_dir(
        &self,
        backend: DynMsrBackend,
        dir: Option<&Path>,
        face: MmioFace,
        x2apic: &BTreeMap<LogicalCpu, u32>,
    ) -> Result<Rdt, OpenError> {
        let mut backend = match dir {
            Some(dir) => backend.with_run_dir(dir),
            None => backend,
        };
        if let Some(t) = self.lock_timeout {
            backend.set_lock_timeout(t);
        }
        let io_rdt = face
            .iordt_mem
            .and_then(|mem| io_rdt_of(backend.capabilities(), face.tables.irdt.clone(), mem));
        let mut mmio =
            crate::DynMmioBackend::with_x2apic_ids(backend, &face.tables, face.mem, x2apic)
                .map_err(OpenError::Mmio)?;
        let dead = self.reclaimed(|| mmio.msr_backend().reclaim_dead_runs());
        // recovery through the platform with I/O RDT, which a killed channel change needs
        let mut rdt = Rdt::from_mmio_backend(mmio).with_io_rdt(io_rdt);
        let mut reclaimed = self.reclaimed(|| transaction::recover(&mut rdt));
        reclaimed.extend(self.reclaimed(|| rdt_host::lease::reclaim(&mut rdt)));
        reclaimed.extend(dead);
        // as the platform is now, after the rollback (a killed CDP reset mended)
        rdt.reread_cdp_notice();
        rdt.notices.extend(reclaimed);
        Ok(rdt)
    }

    /// The MSR interface keeping its run state in `dir` ([`MsrBackend::with_run_dir`]),
    /// with the lock timeout asked for, after rolling back the transactions and giving back
    /// the RMIDs of runs that ended before they finished ([`OpenOptions::reclaim`]).
    fn msr_with_run_dir(
        &self,
        backend: DynMsrBackend,
        dir: &Path,
        io_rdt: Option<crate::DynIoRdt>,
    ) -> Rdt {
        let mut backend = backend.with_run_dir(dir);
        if let Some(t) = self.lock_timeout {
            backend.set_lock_timeout(t);
        }
        let dead = self.reclaimed(|| backend.reclaim_dead_runs());
        // recovery through the platform with I/O RDT, which a killed channel change needs
        let mut rdt = Rdt::from_msr_backend(backend).with_io_rdt(io_rdt);
        let mut reclaimed = self.reclaimed(|| transaction::recover(&mut rdt));
        reclaimed.extend(self.reclaimed(|| rdt_host::lease::reclaim(&mut rdt)));
        reclaimed.extend(dead);
        // as the platform is now, after the rollback (a killed CDP reset mended)
        rdt.reread_cdp_notice();
        rdt.notices.extend(reclaimed);
        rdt
    }
}

/// Whether the capabilities say the part has I/O RDT: L3 non-CPU agent allocation or
/// monitoring (pqos `lib/iordt.c` `iordt_check_support`).
fn has_iordt(caps: &Capabilities) -> bool {
    caps.l3_iordt.is_some() || caps.monitoring.get().is_some_and(|m| m.io_rdt)
}

/// I/O RDT over `irdt` and `mem`, where the part has it and the table is there.
fn io_rdt_of(
    caps: &Capabilities,
    irdt: Option<rdt_mmio::Irdt>,
    mem: Box<dyn rdt_mmio::MmioIo + Send>,
) -> Option<crate::DynIoRdt> {
    irdt.filter(|_| has_iordt(caps))
        .map(|t| rdt_mmio::IoRdt::new(t, mem))
}

/// Logs pqos's `CACHE:` lines (`lib/cpuinfo.c`, `INFO:`) of `cpuid`, if any.
fn log_cache_lines(cpuid: Option<&dyn CpuidSource>) {
    if let Some(cpuid) = cpuid.filter(|_| log::log_enabled!(log::Level::Info)) {
        for line in rdt_core::discovery::cache_sharing_lines(cpuid) {
            log::info!("{line}");
        }
    }
}

/// The error for `path`, needed for `what`, that could not be used: [`OpenError::Missing`]
/// when it is not there, else [`OpenError::Inaccessible`] with the system's error.
fn needed(path: &Path, what: &'static str, e: std::io::Error) -> OpenError {
    if e.kind() == ErrorKind::NotFound {
        OpenError::Missing {
            path: path.to_owned(),
            what,
        }
    } else {
        OpenError::Inaccessible {
            path: path.to_owned(),
            what,
            error: e,
        }
    }
}

/// A read of an opened platform's failure as an [`OpenError`] (a report opens the whole
/// simulated platform, then reads it).
#[cfg(feature = "sim")]
fn open_error_of(e: crate::Error) -> OpenError {
    match e {
        crate::Error::Msr(e) => OpenError::Msr(e),
        crate::Error::Resctrl(e) => OpenError::Resctrl(e),
        crate::Error::Mmio(e) => OpenError::Mmio(e),
        crate::Error::Request(r) => OpenError::Resctrl(ResctrlError::Request(r)),
        // A read saves nothing; were it to, the simulator's own error.
        crate::Error::Sim(e) => OpenError::Sim(crate::sim::SessionError::Model(e)),
    }
}

/// The directory holding `cpu/N/cpuid` as [`DevCpuid::open`] wants it: the parent of
/// `dev_cpu`.
fn dev_root(paths: &Paths) -> &Path {
    paths.dev_cpu.parent().unwrap_or(Path::new("/"))
}

impl From<MsrError> for OpenError {
    fn from(e: MsrError) -> Self {
        Self::Msr(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_sysroot_has_one_run_dir_and_other_sysroots_another() {
        let d = tempfile::tempdir().unwrap();
        let x = d.path().join("x");
        std::fs::create_dir_all(x.join("sub")).unwrap();
        std::os::unix::fs::symlink(&x, d.path().join("link")).unwrap();
        let run = |p: PathBuf| Paths::under(p).run;
        let one = run(x.clone());
        for spelling in [
            x.join("."),
            x.join("sub/.."),
            d.path().join("./x/"),
            d.path().join("link"),
            PathBuf::from(format!("{}//x/./", d.path().display())),
        ] {
            assert_eq!(run(spelling.clone()), one, "{}", spelling.display());
        }
        // relative to the working directory
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(&x, &cwd);
        assert_eq!(run(rel), one);
        // not made yet: cleaned lexically
        let y = d.path().join("y");
        assert_eq!(run(y.join("../y/.")), run(y.clone()));
        assert_ne!(run(y), one, "another platform, another directory");
    }

    /// `to` relative to `from` (both absolute): `../../x`.
    fn pathdiff(to: &Path, from: &Path) -> PathBuf {
        let (to, from): (Vec<_>, Vec<_>) = (to.components().collect(), from.components().collect());
        let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
        let mut out = PathBuf::new();
        for _ in common..from.len() {
            out.push("..");
        }
        to[common..].iter().for_each(|c| out.push(c));
        out
    }

    #[test]
    fn auto_follows_rdt_iface_then_the_resctrl_mount() {
        assert_eq!(
            resolve_iface(Iface::Auto, None, None, false),
            Ok(Interface::Msr)
        );
        assert_eq!(
            resolve_iface(Iface::Auto, None, None, true),
            Ok(Interface::Os)
        );
        assert_eq!(
            resolve_iface(Iface::Auto, None, Some("os"), false),
            Ok(Interface::Os)
        );
        assert_eq!(
            resolve_iface(Iface::Auto, None, Some("MSR_ONLY"), true),
            Ok(Interface::Msr)
        );
    }

    #[test]
    fn options_that_need_the_os_interface_narrow_auto_and_refuse_msr() {
        let p = Some("-p/--mon-pid");
        assert_eq!(resolve_iface(Iface::Auto, p, None, true), Ok(Interface::Os));
        let e = resolve_iface(Iface::Auto, p, None, false).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "Error: option '-p/--mon-pid' requires interface 'os' but only 'msr' is available"
            ),
            "{e}"
        );
        let e = resolve_iface(Iface::Msr, p, None, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Error: explicit interface 'msr' is not compatible with option '-p/--mon-pid' which requires 'os'."
        );
        let e = resolve_iface(Iface::Auto, p, Some("msr"), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Interface initialization error! Your system has been restricted to use the MSR \
             interface only! (RDT_IFACE is set; option '-p/--mon-pid' requires 'os')"
        );
    }

    #[test]
    fn rdt_iface_restricts_explicit_choices_and_must_be_valid() {
        assert!(matches!(
            resolve_iface(Iface::Msr, None, Some("os"), false),
            Err(IfaceError::Restricted {
                forced: Interface::Os,
                ..
            })
        ));
        assert!(matches!(
            resolve_iface(Iface::Os, None, Some("Msr"), true),
            Err(IfaceError::Restricted {
                forced: Interface::Msr,
                ..
            })
        ));
        let e = resolve_iface(Iface::Auto, None, Some("bogus"), true).unwrap_err();
        assert!(
            e.to_string()
                .contains("Invalid interface enforcement selection: RDT_IFACE=\"bogus\""),
            "{e}"
        );
    }

    #[test]
    fn iface_names_round_trip() {
        for i in [Iface::Auto, Iface::Msr, Iface::Os] {
            assert_eq!(i.to_string().parse::<Iface>(), Ok(i));
        }
        assert_eq!("OS".parse::<Iface>(), Ok(Iface::Os));
        assert!("resctrl".parse::<Iface>().is_err());
    }

    #[test]
    fn a_sysroot_without_dev_cpu_is_an_error_naming_the_path() {
        // arrange: a directory with sysfs and resctrl-looking files but no dev/cpu
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        // act
        let e = OpenOptions::new(Iface::Msr)
            .sysroot(dir.path())
            .rdt_iface(None)
            .open()
            .unwrap_err();
        // assert
        let want = dir.path().join("dev/cpu");
        assert!(
            matches!(&e, OpenError::Missing { path, .. } if *path == want),
            "{e:?}"
        );
        assert!(e.to_string().contains(&want.display().to_string()), "{e}");
    }

    #[test]
    fn a_sysroot_without_cpuid_device_is_an_error_not_the_hosts_cpuid() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("dev/cpu/0")).unwrap();
        let e = OpenOptions::new(Iface::Msr)
            .sysroot(dir.path())
            .rdt_iface(None)
            .open()
            .unwrap_err();
        let want = dir.path().join("dev/cpu/0/cpuid");
        assert!(
            matches!(&e, OpenError::Missing { path, .. } if *path == want),
            "{e:?}"
        );
    }

    #[test]
    fn open_errors_carry_their_cause_in_the_message() {
        let e = OpenError::Resctrl(ResctrlError::NotMounted {
            root: PathBuf::from("/x/sys/fs/resctrl"),
        });
        let text = e.to_string();
        assert!(text.starts_with("cannot open the OS interface: "), "{text}");
        assert!(text.contains("/x/sys/fs/resctrl"), "{text}");
        assert!(
            std::error::Error::source(&e).is_none(),
            "said once, not twice"
        );
    }
}

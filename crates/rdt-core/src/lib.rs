//! The domain model of Intel Resource Director Technology (RDT) and AMD Platform Quality of
//! Service (PQoS): ids, masks, CPU sets, capabilities decoded from CPUID, topology, the
//! [`Backend`] trait both interfaces implement, and monitoring arithmetic.
//!
//! What this crate is **not**: it does no file I/O. It never opens `/dev/cpu/N/msr`,
//! `/sys/fs/resctrl`, sysfs, procfs or a run directory; reading CPUID goes through a seam
//! ([`CpuidSource`]) so everything here runs against fixtures. Files are `rdt-host`'s (the
//! sysfs topology, `/dev/cpu/N/cpuid`, CPUID dump files, procfs, run files, the transaction
//! journal, leases), the declarative formats `rdt-config`'s, the MSR backend is `rdt-msr`, the
//! OS (resctrl) backend `rdt-resctrl`, the simulated platform `rdt-sim`.
//!
//! | vendor | CMT/MBM | L3 CAT | CDP | L2 CAT | MBA | SMBA |
//! |---|---|---|---|---|---|---|
//! | Intel | ✅ | ✅ | ✅ | ✅ | ✅ (linear) | — |
//! | AMD | ✅ | ✅ | ✅ | — | ✅ (1/8 GB/s units) | ✅ (detected) |
//! | Hygon | detected as AMD | | | | | |
//!
//! # References
//! - Intel SDM Vol. 3B, ch. 18 "Debug, Branch Profile, TSC, and Intel Resource Director
//!   Technology (Intel RDT) Features", 18.18-18.19.
//! - AMD64 Technology Platform Quality of Service Extensions, pub. 56375.
//! - Linux `Documentation/arch/x86/resctrl.rst`.
//! - pqos(8) from intel-cmt-cat.

mod backend;
mod caps;
pub mod cpuid;
mod cpuset;
mod detect;
pub mod discovery;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod ids;
pub mod iordt;
mod mask;
mod mba;
pub mod mbm;
pub mod monitor;
mod mount;
pub mod pmu;
pub mod pqos_caps;
pub mod region;
mod request;
mod shown;
pub mod topology;
pub mod transaction;

pub use backend::{
    AllocReset, Backend, BackendError, BackendExt, CatClass, CatMask, ExclusiveWays,
    FeatureSetting, GroupInfo, GroupKind, GroupOwner, GroupStartError, Interface, IoAlloc,
    MbaClass, MbaCtrl, MonReset, Monitoring, MsrOps, NamedClasses, OsOps, Reset, Writers,
    start_one_by_one,
};
pub use caps::{
    CacheGeometry, Capabilities, CatCaps, CatResource, Feature, ImplausibleError, LimitError,
    MbaCaps, MbaKind, MbaResource, MonEventSupport, MonitoringCaps, PmuCaps, SncMode, SncState,
    Vendor,
};
pub use cpuid::{CpuidDump, CpuidRegs, CpuidSource, DumpCpu, DumpError, NativeCpuid};
pub use cpuset::{
    CpuSet, ListLimits, MAX_CPU, MAX_TASK_ID, ParseCpuSetError, ParseNumberError,
    ParsePqosListError, parse_number, parse_pqos_list,
};
pub use detect::UNCORE_PCIE_MODEL;
pub use detect::rdt_absence as explain_no_rdt;
pub use ids::{CacheDomain, ClassId, LogicalCpu, ParseIdError, Rmid, TaskId};
pub use iordt::{ChannelId, IoChannelInfo, IoDeviceInfo, IoRdtOps};
pub use mask::{CacheBitmask, MaskError};
pub use mba::{
    MbaLimit, ParseMbaLimitError, ThreadThrottle, intel_mba_delay, intel_mba_percent, round_to_step,
};
pub use mbm::{AssignMode, CounterAssignment, EventConfig, MbmDetails};
pub use monitor::{
    DomainValues, MonAccumulator, MonEvents, MonGroupId, MonValues, Reclaimed, RmidEvent,
    UncoreCounts,
};
pub use mount::{MountOptions, MountOptionsError};
pub use pmu::{NoPmu, PmuCounts, PmuSource, sum_deltas};
pub use region::{
    BwControl, MemRegion, RegionBw, RegionInfo, RegionMemory, RegionOps, RegionValues,
};
pub use request::{MbaUnitMismatch, RequestError, error_chain, holders};
pub use shown::{Shown, is_escaped};
pub use topology::{ApicIdLayout, CpuPlacement, Topology, TopologyError};

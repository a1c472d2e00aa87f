//! A simulated Intel RDT / AMD PQoS platform, built from a real CPUID dump: the registers
//! answer like silicon and a small workload model makes occupancy, memory bandwidth and IPC
//! respond to allocation. It is the test and demo engine of `rdt`: no machine of the project
//! has RDT hardware.
//!
//! - [`SimPlatform`]: the model. [`SimPlatform::builtin`] (one of [`BUILTIN_MODELS`]) or
//!   [`SimPlatform::from_dump`]; capabilities and topology come from the dump, with the
//!   leaves a dump did not record filled in and documented ([`cpuid`]). It implements
//!   [`rdt_msr::MsrIo`] (IA32_PQR_ASSOC, QM_EVTSEL/QM_CTR, L3/L2 masks and CFG, MBA, and the
//!   non-RDT registers tools read: TSC, APIC base, x2APIC id, [`sysregs`]; EIO
//!   where the CPU raises #GP) and [`rdt_core::PmuSource`].
//! - [`model`]: the workload model and its formulas (L3 occupancy, misses, MBA, memory
//!   bandwidth and latency per NUMA node); [`Scenario`]: who runs what, and from when to when
//!   on the model clock (default: the seed paper's pipeline on CPUs 2-7 and thrasher on
//!   8-10; [`BUILTIN_SCENARIOS`]: the paper's scenario calibrated on `skylake-sp`).
//! - [`metrics`]: ground truth for evaluating a controller: each workload's application
//!   operations/s ([`SimPlatform::workload_metrics`], `.sim/workloads`), never shown through a
//!   register or kernel file.
//! - A virtual clock ([`SimPlatform::advance`]) and a saved state
//!   ([`SimPlatform::save_to`] / [`SimPlatform::load_from`]) so separate `pqos` runs see one
//!   machine.
//! - [`SimHandle`]: a cloneable `Arc<Mutex<SimPlatform>>` to hand to a backend.
//! - [`fs`]: the FUSE face: the same model as `dev/cpu/N/{msr,cpuid}`, the sysfs topology,
//!   `sys/fs/resctrl` and a `.sim/` control directory (fault injection), mounted with
//!   [`fs::Mount`] or the `rdt-sim mount` binary.
//! - [`inprocess`]: the same resctrl in-process, behind the resctrl backend's filesystem seam
//!   (`rdt_resctrl::ResctrlFs`), for the OS interface without FUSE or root; a
//!   [`session::Session`] keeps it mounted from one run to the next.
//! - [`mmio`]: the RDT 1.3 generation (`xeon-rdt13`): ACPI ERDT/MRRM/IRDT tables, CXL
//!   regions and the MMIO registers they locate, region-aware bandwidth counters and MBA;
//!   `sapphire-rapids` carries an IRDT.
//! - [`adapter`]: what the `rdt` library opens a simulated platform with, in-process
//!   ([`adapter::in_process`]) or mounted ([`attach`]: the `.sim/` mount control and PMU
//!   counters, [`simpmu`]), injected through its `OpenOptions`.
//!
//! What it is **not**: a cycle-accurate cache simulator (occupancy is a steady state, not
//! LRU replay), a model of L2 capacity (L2 masks are held and checked but do not change the
//! workload), or of the I/O RDT, MBA 4.0 and SNC registers (they answer EIO).
//!
//! | vendor | registers | models |
//! |---|---|---|
//! | Intel | ✅ CAT L3/L2, CDP, MBA (delay), CMT/MBM; SNC2 monitoring; RDT 1.3 MMIO (region-aware MBM/MBA, tables) | `broadwell-ep`, `skylake-sp`, `sapphire-rapids`, `sapphire-rapids-snc2`, `xeon-rdt13` |
//! | AMD | ✅ CAT L3, CDP, MBA/SMBA (1/8 GB/s units), CMT/MBM; in resctrl BMEC, ABMC, io_alloc | `milan`, `genoa` (384 CPUs), `turin` (stock EPYC 9655, 192 CPUs), `turin-dump` (64) |
//!
//! # References
//! - Intel SDM Vol. 3B, ch. 18.18-18.19 "Intel Resource Director Technology".
//! - AMD64 Technology Platform Quality of Service Extensions, pub. 56375.
//! - Linux `Documentation/arch/x86/resctrl.rst`; pqos(8) and `lib/cpu_registers.h` of intel-cmt-cat.

pub mod adapter;
pub mod amdqos;
pub mod cpuid;
mod error;
pub mod fs;
mod handle;
pub mod inprocess;
mod kernel;
pub mod metrics;
pub mod mmio;
pub mod model;
mod models;
mod num;
mod platform;
pub mod quirks;
pub mod resctrl;
mod scenario;
pub mod session;
pub mod simpmu;
pub mod state;
pub(crate) mod synth;
pub mod sysregs;
pub mod uncore;
pub mod vfs;

pub use adapter::attach;
pub use cpuid::{CpuidPatch, SimCpuid};
pub use error::{ScenarioError, SimError};
pub use handle::SimHandle;
pub use metrics::{MemoryDomainLoad, WorkloadMetric};
pub use model::CpuActivity;
pub use models::{BUILTIN_MODELS, DEFAULT_MODEL};
pub use platform::SimPlatform;
pub use scenario::{
    Assignment, BUILTIN_PREFIX, BUILTIN_SCENARIOS, MAX_PHASES, MAX_SCENARIO_BYTES, MAX_TIME_S,
    Phase, Scenario, Workload,
};

#[cfg(test)]
mod scenario_tests;
#[cfg(test)]
mod tests;

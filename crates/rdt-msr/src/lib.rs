//! The MSR backend of `rdt`: programs Intel RDT / AMD PQoS through model-specific registers,
//! read and written with positioned I/O on `/dev/cpu/N/msr` (the Linux `msr` driver, which
//! takes the file offset as the register address). This is pqos's "MSR interface"
//! (`--iface=msr`).
//!
//! - [`MsrIo`]: the seam, RDMSR/WRMSR of one logical CPU. [`DevCpuMsr`] is the production
//!   implementation (root path configurable, one open file per CPU); `FakeMsrs` (cargo
//!   feature `fake`) is an in-memory register map that counts accesses; `rdt-sim` provides
//!   a simulated platform.
//! - [`MsrBackend`]: `rdt_core::Backend` over any `MsrIo`: CAT masks, CDP, MBA, COS
//!   association, RMID allocation and CMT/MBM polling with counter-wrap handling.
//! - [`regs`]: every register and bit layout used, with its SDM reference.
//! - [`uncore`]: the Skylake-SP CHA performance monitors as pqos programs them for its
//!   uncore PCIe LLC events (`MsrBackend`'s `start_uncore_monitoring`).
//!
//! What it is **not**:
//! - Not per-task: MSRs follow CPUs, not tasks (`pqos -p`, `-a pid:` need the resctrl backend).
//! - Not safe to use next to a mounted resctrl filesystem: the kernel then owns the
//!   registers and will overwrite (and be confused by) what this crate writes.
//! - Not the kernel's `mba_MBps` software controller (MBA in MiB/s is OS interface only).
//! - Not a CPU model: it trusts [`rdt_core::Capabilities`] and [`rdt_core::Topology`] and
//!   does no CPUID detection of its own, besides reading the CDP enable bits.
//! - No SNC sub-NUMA RMID splitting, no I/O RDT, no MBA 4.0 / min-max delay control, no
//!   `perf_event_open` (IPC and LLC misses come from an `rdt_core::PmuSource`).
//!
//! | vendor | CMT/MBM | L3 CAT | CDP | L2 CAT | MBA | SMBA |
//! |---|---|---|---|---|---|---|
//! | Intel | ✅ | ✅ | ✅ (L3, L2) | ✅ | ✅ percent, linear only | — |
//! | AMD | ✅ | ✅ | ✅ | — | ✅ 1/8 GB/s units | reset only |
//! | Hygon | as AMD | as AMD | | | | |
//!
//! # References
//! - Intel SDM Vol. 3B, ch. 18 "Intel Resource Director Technology (Intel RDT) Features",
//!   18.18 (monitoring), 18.19 (allocation); Vol. 4, table 2-2 (architectural MSRs).
//! - AMD64 Technology Platform Quality of Service Extensions, pub. 56375.
//! - Linux `Documentation/arch/x86/resctrl.rst`; `arch/x86/kernel/msr.c` (msr(4)).
//! - pqos(8); intel-cmt-cat `lib/hw_monitoring.c`, `lib/allocation.c`.

mod backend;
mod claims;
mod dev;
mod error;
#[cfg(any(test, feature = "fake"))]
mod fake;
mod io;
pub mod regs;
pub mod uncore;

pub use backend::{MsrBackend, QM_CTR_ATTEMPTS};
pub use dev::DevCpuMsr;
pub use error::MsrError;
#[cfg(any(test, feature = "fake"))]
pub use fake::FakeMsrs;
pub use io::{MsrAddr, MsrIo};

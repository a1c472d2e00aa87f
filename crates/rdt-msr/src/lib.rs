//! The MSR backend of `rdt`: programs Intel RDT / AMD PQoS through model-specific registers,
//! read and written with positioned I/O on `/dev/cpu/N/msr` (the Linux `msr` driver, which
//! takes the file offset as the register address).
//!
//! Not here: per-task allocation or monitoring (MSRs follow CPUs, not tasks; use the resctrl
//! backend), and coexistence with a mounted resctrl filesystem (the kernel owns the registers
//! then).
//!
//! # References
//! Intel SDM Vol. 3B, 18.18-18.19; AMD pub. 56375; pqos(8); the kernel's
//! `arch/x86/kernel/cpu/resctrl`.

mod error;
mod io;
pub mod regs;

pub use error::MsrError;
pub use io::{MsrAddr, MsrIo};

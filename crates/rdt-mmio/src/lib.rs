//! The MMIO interface of Intel RDT 1.3 (pqos v26.03's `--iface=mmio`): the ACPI tables that
//! describe it, and the layout of the registers they locate.
//!
//! RDT 1.3 parts count memory bandwidth per **memory region** (DDR, CXL, ...) and throttle it
//! per region with optimal / minimum / maximum controls, through MMIO registers instead of
//! MSRs; I/O devices get CLOS and RMID tags per channel. Firmware describes all of it:
//! - [`erdt`]: the ERDT table: resource management domains, their CPU agents (x2APIC ids)
//!   and device agents (PCI paths), and the register blocks of each (CMRC occupancy, MMRC
//!   region bandwidth, MARC region MBA, CMRD/IBRD/CARD for I/O agents), with their
//!   upscaling and correction factors;
//! - [`mrrm`]: the MRRM table: the physical address ranges of each memory region, and
//!   [`mrrm::classify`] for DDR vs CXL;
//! - [`irdt`]: the IRDT table: I/O RDT devices, their virtual channels and the links that
//!   tag them;
//! - [`regs`]: register bit layouts and the indexing functions (RMID, region, CLOS -> address);
//! - [`tables`]: reading all of it from a host (or a simulated one) under a sysroot;
//! - [`build`]: table bytes from typed descriptions, for the simulator and tests;
//! - [`io`]: the register seam, [`MmioIo`], and its production implementation on `/dev/mem`;
//! - [`iordt`]: I/O RDT devices with their channels, links and ERDT domain;
//! - [`iotag`]: the links' CLOS and RMID tagging registers per channel ([`IoRdt`], the
//!   `rdt_core::IoRdtOps` of the MSR and MMIO interfaces);
//! - [`dump`]: read-only views of the register blocks (pqos's `--dump`, `--dump-rmid-regs`),
//!   every window checked against the block the ERDT gives.
//!
//! Every table is untrusted input: one bounds-checked reader ([`acpi::Bytes`]) serves every
//! parser, every length, count and offset is checked against the bytes there are, and a bad
//! table is a [`TableError`] naming the table, the sub-structure and the byte offset, never a
//! panic (fuzzed: `tests/fuzz.rs` in CI, `fuzz/fuzz_targets/acpi_tables.rs` by hand).
//!
//! - [`backend`]: the interface as an `rdt_core::Backend` ([`MmioBackend`]): the MSR
//!   backend for cores and L3 CAT, region-aware MBA and MBM and CMRC occupancy through
//!   [`MmioIo`] (`rdt_core::RegionOps`).
//!
//! # References
//! - Intel Resource Director Technology Architecture Specification rev 1.3 (ERDT, MRRM, IRDT,
//!   region-aware MBM/MBA registers).
//! - ACPICA `actbl1.h`/`actbl2.h` (`acpi_table_erdt`, `acpi_table_mrrm`); Linux
//!   `arch/x86/kernel/cpu/resctrl/erdt.c`, `drivers/acpi/acpi_mrrm.c`.
//! - intel-cmt-cat v26.03 `lib/erdt.[ch]`, `lib/mrrm.c`, `lib/acpi_table.h`, `lib/iordt.c`,
//!   `lib/mmio.[ch]` (read for facts).

pub mod acpi;
pub mod backend;
pub mod build;
pub mod dump;
pub mod erdt;
pub mod io;
pub mod iordt;
pub mod iotag;
pub mod irdt;
pub mod mrrm;
pub mod regs;
pub mod tables;

pub use acpi::{AcpiHeader, Problem, TableError};
pub use backend::{MmioBackend, MmioError};
pub use erdt::{Domain, Erdt, MbaControl, RegisterBlock};
pub use io::{DevMem, MmioIo};
pub use iotag::IoRdt;
pub use irdt::{ChannelId, Irdt};
pub use mrrm::{MemoryRegion, Mrrm, RegionId, RegionMemory};
pub use tables::{AcpiTables, ReadTablesError};

#[cfg(test)]
mod tests;

//! `libpqos`: the C API of intel-cmt-cat v26.03 (`lib/pqos.h`, `PQOS_VERSION` 70000,
//! `libpqos.so.7`) over the Rust library [`rdt_pqos`], so that C programs written for Intel's
//! libpqos (collectd's `intel_rdt`, DPDK's `l2fwd-cat`, intel-cmt-cat's samples, ctypes or cgo
//! bindings) link against it unchanged.
//!
//! Every call is a translation: C arguments are checked (NULL pointers, lengths, enum values:
//! `PQOS_RETVAL_PARAM`) and turned into the library's types, the library does the work
//! (validation, the transaction, the monitoring arithmetic, the interface choice), and its
//! result or error becomes libpqos's structures and `PQOS_RETVAL_*` codes ([`error`]). The
//! header `include/pqos.h` is generated from [`types`] and the exported functions with
//! cbindgen (`tests/header.rs` keeps it current).
//!
//! # The platform
//! `pqos_init` opens the platform as [`rdt_pqos::OpenOptions::platform_from_env`] does:
//! `RDT_SIM=MODEL` the in-process simulated platform (no root, no RDT hardware),
//! `RDT_SYSROOT=DIR` a platform under a directory (a FUSE-mounted simulated one), else the
//! host. `pqos_config.interface` is `PQOS_INTER_MSR`, `PQOS_INTER_OS`,
//! `PQOS_INTER_OS_RESCTRL_MON` (the OS interface), `PQOS_INTER_MMIO` (RDT 1.3's MMIO
//! interface, where the firmware has the ACPI ERDT and MRRM tables) or `PQOS_INTER_AUTO`;
//! `RDT_IFACE=OS|MSR` forces one as in libpqos.
//!
//! # Memory regions (MMIO)
//! Region-aware MBM (`pqos_mon_start_cores`'s `mem_region`, `region_values`,
//! `pqos_mon_get_region_value`) and region MBA (`pqos_mba_set`/`pqos_mba_get` by `domain_id`
//! and `mem_regions`, `region_mba`) as libpqos v26.03 models them, over the library's
//! `RegionOps` and transaction.
//!
//! # Safety at the boundary
//! Every export is an `unsafe extern "C" fn`: its contract is libpqos's documentation of it
//! in pqos.h (pointers valid for what they point to, arrays as long as their counts). Within
//! that contract, every pointer is checked for NULL, every count bounded, every enum value
//! checked, and no Rust panic crosses into C: it is caught, logged and answered with
//! `PQOS_RETVAL_ERROR`. Calls are serialised by one lock (libpqos's API lock). Memory the
//! caller frees with `free()` (the `pqos_cpu_get_*` arrays, `pqos_pid_get_pid_assoc`) comes
//! from `malloc`.
//!
//! # Not built
//! The MMIO dumps, `pqos_sysconfig`'s ERDT/MRRM descriptions (NULL) and I/O RDT (channels,
//! devices): their functions exist and answer as libpqos does on a platform without them
//! (`PQOS_RETVAL_RESOURCE`, or `PQOS_RETVAL_PARAM` for bad arguments). Uncore monitoring
//! (`pqos_mon_start_uncore`) is the library's: on the MSR interface of model 0x55 (the
//! simulated `skylake-sp`), `PQOS_RETVAL_RESOURCE` on platforms without it.

mod alloc;
mod cap;
mod capdata;
pub mod error;
mod flex;
mod groups;
mod guard;
pub mod install;
mod logging;
mod mon;
mod refused;
mod region_mba;
mod state;
pub mod types;
mod util;

pub use alloc::*;
pub use cap::*;
pub use mon::*;
pub use refused::*;
pub use state::{pqos_fini, pqos_init, pqos_inter_get, pqos_retval_to_string};
pub use types::*;
pub use util::*;

#[doc(hidden)]
pub use state::testing;

//! Host I/O of RDT / PQoS programs that is not a backend's: the tasks of `/proc` ([`proc`])
//! and classes of service leased for one job ([`lease`], records in the run directory).
//!
//! [`rdt_core`] is the model and reads no files of its own here; this crate is where such
//! reading and writing lives, as the `procfs` crate does the I/O for `procfs-core`'s
//! parsers. The facade (`rdt-pqos`) re-exports both modules at their old paths
//! (`rdt_pqos::proc`, `rdt_pqos::lease`).
//!
//! # References
//! proc(5); intel-cmt-cat `rdtset/rdtset.c` (`pqos_alloc_assign`, `pqos_alloc_release`).

pub mod lease;
pub mod proc;

//! Host I/O of RDT / PQoS programs that is not a backend's: the tasks of `/proc` ([`proc`]),
//! classes of service leased for one job ([`lease`], records in the run directory), and a
//! transaction's intent journal ([`transaction`]: plans applied journaled, killed
//! transactions rolled back).
//!
//! [`rdt_core`] is the model and reads no files of its own here; this crate is where such
//! reading and writing lives, as the `procfs` crate does the I/O for `procfs-core`'s
//! parsers. The facade (`rdt-pqos`) re-exports both modules at their old paths
//! (`rdt_pqos::proc`, `rdt_pqos::lease`) and shows [`transaction`] and rdt-core's as one
//! `rdt_pqos::transaction`.
//!
//! # References
//! proc(5); intel-cmt-cat `rdtset/rdtset.c` (`pqos_alloc_assign`, `pqos_alloc_release`).

pub mod lease;
pub mod proc;
pub mod runfile;
pub mod transaction;

//! Host I/O of RDT / PQoS programs that is not a backend's register or resctrl access:
//! - [`file`](mod@file): the one bounded reader of the workspace (no FIFO blocks it, no huge file
//!   fills memory);
//! - [`cpuid`]: `/dev/cpu/N/cpuid` ([`cpuid::DevCpuid`]) and CPUID dump files;
//! - [`topology`]: the topology from sysfs ([`topology::TopologyFromSysfs`]);
//! - [`proc`]: the tasks of `/proc`;
//! - [`pods`]: the node's pods as the NRI plugin records them, and a container's tasks;
//! - [`runfile`]: run files in a verified run directory, with `flock` liveness;
//! - [`transaction`]: a plan applied under the writers' lock with its intent journal, and
//!   the roll-back of transactions whose process was killed;
//! - [`lease`]: classes of service leased for one job.
//!
//! [`rdt_core`] is the model and does no file I/O; this crate is where reading and writing
//! files lives, as the `procfs` crate does the I/O for `procfs-core`'s parsers (its trait
//! `Current` reads a procfs-core type as [`topology::TopologyFromSysfs`] reads a
//! [`rdt_core::Topology`]). The facade (`rdt-pqos`) re-exports these modules at their old
//! paths (`rdt_pqos::proc`, `rdt_pqos::runfile`, ...) and shows [`transaction`], [`cpuid`]
//! and [`topology`] with rdt-core's modules of the same names as one.
//!
//! # References
//! proc(5); Linux `arch/x86/kernel/cpuid.c`, `Documentation/ABI/testing/sysfs-devices-system-cpu`;
//! intel-cmt-cat `rdtset/rdtset.c` (`pqos_alloc_assign`, `pqos_alloc_release`).

pub mod cpuid;
pub mod file;
pub mod lease;
pub mod pods;
pub mod proc;
pub mod runfile;
pub mod topology;
pub mod transaction;

//! The OS interface of Intel RDT / AMD PQoS: the Linux resctrl filesystem
//! (`/sys/fs/resctrl`) as an [`rdt_core::Backend`].
//!
//! [`ResctrlBackend`] maps pqos's model onto resctrl as Intel's pqos does, so both tools
//! see and clean up one configuration: class of service *n* is the control group `COS<n>`
//! (COS 0 is the root), monitoring groups are `pqos-<pid>-<n>` monitor groups. It allocates
//! and monitors per CPU and per task, follows the kernel's locking convention (`flock` on
//! the root), and leaves other tools' groups (goresctrl, kubelet, a user's) alone.
//!
//! Parsing is separate from I/O: [`ResctrlInfo::parse`] reads the text of `info/`,
//! [`Schemata`] the text of a `schemata` file, [`parse_proc_mounts`] `/proc/mounts`; all run
//! on captured trees without CPUID or root.
//!
//! File access goes through one seam, [`ResctrlFs`] ([`io`]): [`HostFs`], the real files
//! under the root, in production; the simulated platform serves the same tree in-process
//! (no mount, no root) through [`ResctrlOptions::files`]. Every resctrl rule stays here.
//! [`ResctrlTelemetry`] is the read-only side for exporters: every group of every tool, its
//! counters (monotonic across re-creation), allocation and membership, read with files kept
//! open ([`telemetry`]).
//!
//! What this crate is **not**: it does not detect CPUID (pass the capabilities rdt-core
//! detected), does not mount resctrl when it is not mounted (it says how to), and does not
//! do pseudo-locking or `mode` changes (exclusive groups). Association changes made while a group is monitored are not
//! followed by the monitor group (pqos's OS interface re-adds moved CPUs; this crate
//! monitors what the group held at start).
//!
//! | vendor | L3 CAT | CDP (L3, L2) | L2 CAT | MBA | `mba_MBps` | SMBA | CMT/MBM | tasks |
//! |---|---|---|---|---|---|---|---|---|
//! | Intel | ✅ | ✅ (remount) | ✅ | ✅ percent | ✅ | — | ✅ | ✅ |
//! | AMD | ✅ | ✅ (remount) | — | ✅ 1/8 GB/s units | ❌ (kernel) | reset only | ✅ | ✅ |
//!
//! # References
//! - Linux `Documentation/arch/x86/resctrl.rst` (`Documentation/filesystems/resctrl.rst`
//!   since 6.16).
//! - intel-cmt-cat `lib/resctrl*.c`, `lib/os_allocation.c`, `lib/os_monitoring.c`; pqos(8).
//! - Intel SDM Vol. 3B, ch. 18 "Intel Resource Director Technology"; AMD pub. 56375.

mod backend;
mod counter;
mod error;
mod fs;
mod info;
pub mod io;
mod lock;
mod mount;
mod owner;
mod schemata;
pub mod telemetry;

pub use backend::{
    DEFAULT_PROC, DEFAULT_ROOT, NAMES_FILE, ResctrlBackend, ResctrlOptions, recorded_groups,
};
pub use error::ResctrlError;
pub use fs::{cos_of_name, is_pqos_mon_name, pqos_mon_pid};
pub use info::{BwInfo, CacheInfo, InfoError, InfoFiles, MonInfo, ResctrlInfo};
pub use io::{DirReader, FsLock, HostFs, PositionedRead, ResctrlFs};
pub use lock::DEFAULT_LOCK_TIMEOUT;
pub use mount::{ControlFileMount, KernelMount, MountControl, MountOptions, parse_proc_mounts};
pub use schemata::{Schemata, SchemataError, SchemataLine};
pub use telemetry::{
    BandwidthAllocation, CacheAllocation, CounterSample, GroupSample, ResctrlTelemetry,
    TelemetryOptions, TelemetryStats,
};

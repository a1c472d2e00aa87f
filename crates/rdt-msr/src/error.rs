//! Errors of the MSR backend.

use std::io;
use std::path::PathBuf;

use rdt_core::{
    CacheDomain, CatResource, ClassId, LimitError, LogicalCpu, MonGroupId, Unsupported,
};

use crate::MsrAddr;

/// An MSR access or an MSR-backend operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MsrError {
    /// `/dev/cpu/N/msr` does not exist.
    #[error("{path} does not exist: is the msr module loaded (modprobe msr) and CPU {cpu} online?")]
    NoDevice {
        /// The device path.
        path: PathBuf,
        /// The CPU.
        cpu: LogicalCpu,
    },
    /// Opening or accessing the device was refused (EACCES/EPERM): MSR access needs root
    /// with CAP_SYS_RAWIO, and under kernel lockdown writes need `msr.allow_writes=on`.
    #[error("permission denied on {path}: MSR access needs root (CAP_SYS_RAWIO)")]
    PermissionDenied {
        /// The device path.
        path: PathBuf,
    },
    /// Opening the device failed for another reason (ENXIO: the CPU is offline; EIO: the
    /// CPU has no MSRs).
    #[error("cannot open {path} for CPU {cpu}")]
    Open {
        /// The device path.
        path: PathBuf,
        /// The CPU.
        cpu: LogicalCpu,
        /// The driver's error.
        #[source]
        source: io::Error,
    },
    /// RDMSR failed (EIO: the CPU raised #GP, the register does not exist).
    #[error("RDMSR {addr} failed on CPU {cpu}")]
    Read {
        /// The CPU.
        cpu: LogicalCpu,
        /// The register.
        addr: MsrAddr,
        /// The driver's error.
        #[source]
        source: io::Error,
    },
    /// WRMSR failed (EIO: the CPU raised #GP: reserved bit, bad COS/RMID, bad CBM).
    #[error("WRMSR {addr} <- {value:#x} failed on CPU {cpu}")]
    Write {
        /// The CPU.
        cpu: LogicalCpu,
        /// The register.
        addr: MsrAddr,
        /// The value written.
        value: u64,
        /// The driver's error.
        #[source]
        source: io::Error,
    },
    /// A value is outside the platform's limits; nothing was written.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// A CPU is not online (not in the topology).
    #[error("CPU {0} is not present or not online")]
    NoSuchCpu(LogicalCpu),
    /// A cache domain does not exist.
    #[error("{resource} domain {domain} does not exist")]
    NoSuchDomain {
        /// `"L3"`, `"L2"`, `"MBA"`.
        resource: &'static str,
        /// The domain.
        domain: CacheDomain,
    },
    /// The platform lacks a feature the operation needs.
    #[error("{0}")]
    Unsupported(String),
    /// A CPU of a new monitoring group already has a non-zero RMID (another tool, or a
    /// crashed run, is monitoring it; `pqos -r` resets).
    #[error("monitoring on CPU {0} is already started (non-zero RMID); use -r to reset monitoring")]
    AlreadyMonitored(LogicalCpu),
    /// No RMID is free in an L3 domain.
    #[error("no free RMID in L3 domain {0}")]
    OutOfRmids(CacheDomain),
    /// Configuration is inconsistent across domains (e.g. CDP on in one domain only).
    #[error("{0}")]
    Inconsistent(String),
    /// A CAT class was given one mask while CDP is on, or a data/code pair while CDP is off;
    /// nothing was written.
    #[error("{resource} COS{class}: {reason}")]
    CdpMismatch {
        /// The resource.
        resource: CatResource,
        /// The class.
        class: ClassId,
        /// What was expected (`"CDP is on: give a data and a code mask"`).
        reason: &'static str,
    },
    /// A register holds a value that is not valid for what it encodes (a zero CBM).
    #[error("register {addr} on CPU {cpu} holds {value:#x}, which is not a valid {what}")]
    BadRegister {
        /// The CPU read.
        cpu: LogicalCpu,
        /// The register.
        addr: MsrAddr,
        /// The value read.
        value: u64,
        /// What the register encodes (`"cache bitmask"`).
        what: &'static str,
    },
    /// A monitoring group id this backend did not hand out, or one already stopped.
    #[error("no monitoring group {}", .0.0)]
    NoSuchGroup(MonGroupId),
    /// Per-task work asked of the MSR interface.
    #[error(transparent)]
    Interface(#[from] Unsupported),
    /// A monitoring group was requested without CPUs or without events.
    #[error("a monitoring group needs at least one CPU and one event")]
    EmptyGroup,
}

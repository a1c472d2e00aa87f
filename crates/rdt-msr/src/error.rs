//! Errors of the MSR backend.

use std::io;
use std::path::PathBuf;

use rdt_core::{BackendError, LimitError, LogicalCpu, RequestError};

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
    /// with CAP_SYS_RAWIO, and the kernel refuses WRMSR under lockdown (Secure Boot) or with
    /// the `msr` module's `allow_writes=off`, even to root.
    #[error(
        "permission denied on {path}: run as root (MSR access needs CAP_SYS_RAWIO); where \
         root is refused too (kernel lockdown, msr.allow_writes=off), use the OS interface \
         (resctrl)"
    )]
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
    /// CPUID (`/dev/cpu/N/cpuid`, a hypervisor) claims table sizes no platform has (2^31
    /// RMIDs, thousands of classes): refused before any table is sized or scanned from them.
    #[error("CPUID claims a capability no platform has")]
    Implausible(#[source] rdt_core::ImplausibleError),
    /// Configuration is inconsistent across domains (e.g. CDP on in one domain only).
    #[error("{0}")]
    Inconsistent(String),
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
    /// Another process held the MSR interface's writers' lock (`<run dir>/msr.lock`) for
    /// the whole wait: the lock timeout ([`crate::MsrBackend::set_lock_timeout`]), which is
    /// all this process waits for it in all.
    #[error(
        "another process is changing the platform through the MSR interface: it held {} for \
         the whole lock timeout of {:.1} s",
        path.display(),
        timeout.as_secs_f64()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The lock timeout: how long this process waited, in all.
        timeout: std::time::Duration,
    },
    /// The writers' lock file cannot be created or locked.
    #[error("the MSR writers' lock {}{}", path.display(), run_dir_hint(source))]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The RMID claims of this process (which CPUs its monitoring groups tagged, kept so
    /// that a killed run's RMIDs can be given back) could not be written or read.
    #[error("RMID claims in {}{}", path.display(), run_dir_hint(source))]
    Claims {
        /// The claim file or its directory.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The record of named classes (`<run dir>/msr-classes`,
    /// [`rdt_host::runfile::NameRecord`]) could not be written.
    #[error("the record of named classes {}", path.display())]
    Names {
        /// The record.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// AMD ABMC: an L3 domain the new monitoring group spans has fewer free MBM counters
    /// (L3_QOS_ABMC_DSC not counting) than the group's MBM events need there, one each.
    /// Found before anything was written: no counter assigned, no CPU tagged.
    #[error(
        "out of MBM counters in L3 domain {domain}: the group needs {needed} (one per MBM \
         event), but only {free} of the domain's {per_domain} assignable counters are free \
         ({own} held by this run's monitoring groups, {} by resctrl's groups or other \
         runs'); monitor fewer groups or events there, or free counters (resctrl's \
         mbm_L3_assignments); nothing was started",
        per_domain.saturating_sub(*free).saturating_sub(*own)
    )]
    NotEnoughMbmCounters {
        /// The L3 domain id.
        domain: u32,
        /// The counters the group needs there.
        needed: u32,
        /// The free counters there.
        free: u32,
        /// The domain's counters (CPUID.(8000_0020H,5):EBX\[15:0\] + 1).
        per_domain: u32,
        /// Of those not free, the ones this process's monitoring groups hold.
        own: u32,
    },
    /// A request the platform or the MSR interface cannot carry out (limits, a CPU or
    /// domain that does not exist, an event not counted, CPUs already monitored, no free
    /// RMID, per-task work); the same variants as on the OS interface.
    #[error(transparent)]
    Request(#[from] RequestError),
}

/// What to do when the run directory (lock, claims) refuses this user: run as root, as the
/// MSR interface needs anyway.
fn run_dir_hint(source: &io::Error) -> &'static str {
    if source.kind() == io::ErrorKind::PermissionDenied {
        " (permission denied: the run directory is root's; run as root)"
    } else {
        ""
    }
}

impl From<LimitError> for MsrError {
    fn from(e: LimitError) -> Self {
        Self::Request(e.into())
    }
}

impl BackendError for MsrError {
    fn request(&self) -> Option<&RequestError> {
        match self {
            Self::Request(r) => Some(r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_to_do() {
        let cpu = LogicalCpu::new(3);
        let path = PathBuf::from("/dev/cpu/3/msr");
        let no_module = MsrError::NoDevice {
            path: path.clone(),
            cpu,
        };
        assert!(
            no_module.to_string().contains("modprobe msr"),
            "{no_module}"
        );
        let denied = MsrError::PermissionDenied { path };
        assert!(denied.to_string().contains("run as root"), "{denied}");
        let lock = MsrError::Lock {
            path: "/run/rdt/msr.lock".into(),
            source: io::Error::from_raw_os_error(13),
        };
        assert_eq!(
            lock.to_string(),
            "the MSR writers' lock /run/rdt/msr.lock (permission denied: the run directory is \
             root's; run as root)"
        );
        let full = MsrError::Claims {
            path: "/run/rdt".into(),
            source: io::Error::from_raw_os_error(28), // ENOSPC: the source says it
        };
        assert_eq!(full.to_string(), "RMID claims in /run/rdt");
    }
}

//! Errors of the resctrl backend.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use rdt_core::{BackendError, LimitError, RequestError, holders};

use crate::info::InfoError;
use crate::mount::MountOptions;

/// A resctrl operation failed.
///
/// Every variant that comes from a file carries its path; a write the kernel refused
/// carries what was written and the kernel's `info/last_cmd_status`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResctrlError {
    /// resctrl is not mounted at the root (no `info/` directory there).
    #[error(
        "resctrl is not mounted at {}: mount it with `mount -t resctrl resctrl {}` \
         (options: -o cdp,cdpl2,mba_MBps), as root",
        root.display(), root.display()
    )]
    NotMounted {
        /// The resctrl root that was tried.
        root: PathBuf,
    },
    /// Reading, opening, listing or creating something under resctrl (or `/proc`) failed.
    /// Permission denied (EACCES, EPERM) says what to do: resctrl's files and directories
    /// are root's.
    #[error("failed to {op} {}{}", path.display(), needs_root(source))]
    Io {
        /// What was being done (`"read"`, `"open"`, `"list"`, `"remove"`).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused a write; `status` is `info/last_cmd_status`, read under the same
    /// exclusive lock right after the write.
    #[error(
        "kernel rejected `{}` in {}{}",
        written.trim_end(), file.display(), status_suffix(status)
    )]
    Rejected {
        /// The file written.
        file: PathBuf,
        /// The text written.
        written: String,
        /// `info/last_cmd_status` after the write ("ok" when the kernel left no message:
        /// an unknown domain id, an injected fault).
        status: String,
        /// The errno of the write.
        #[source]
        source: io::Error,
    },
    /// A kernel file does not hold what resctrl writes there.
    #[error("{}: cannot parse `{text}`: {expected}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The offending text.
        text: String,
        /// What the file should hold.
        expected: String,
    },
    /// `info/` does not describe a usable resctrl.
    #[error("resctrl info/ under {}", root.display())]
    Info {
        /// The resctrl root.
        root: PathBuf,
        /// What is wrong.
        #[source]
        source: InfoError,
    },
    /// Another tool holds the resctrl lock (`flock` on the root directory) for longer than
    /// the bounded wait.
    #[error(
        "another tool holds the resctrl lock (flock on {}) and did not release it within {:.1} s; \
         retry when it is done",
        root.display(), waited.as_secs_f64()
    )]
    Locked {
        /// The resctrl root.
        root: PathBuf,
        /// How long this call waited.
        waited: Duration,
    },
    /// `mkdir` of a control group failed with ENOSPC: every CLOSID is taken.
    #[error(
        "out of CLOSIDs: cannot create {}; the groups holding CLOSIDs are: {}",
        group.display(), holders(in_use)
    )]
    OutOfClosids {
        /// The group that could not be made.
        group: PathBuf,
        /// Every control group (the root first), with "(foreign)" after another tool's.
        in_use: Vec<String>,
        /// `info/last_cmd_status`.
        status: String,
    },
    /// AMD ABMC in `mbm_event` mode: an L3 domain has no free hardware counter for an MBM
    /// event of a monitor group this backend made (`mbm_L3_assignments` refused with
    /// ENOSPC). The group has been removed.
    #[error(
        "out of MBM counters: {} needs a counter for {event} in L3 domain {domain}, whose \
         {per_domain} counters (info/L3_MON/num_mbm_cntrs, mbm_event mode) are all assigned; \
         the groups holding them (counters in that domain) are: {}; monitor fewer groups \
         there or free counters with `EVENT:{domain}=_` in a group's mbm_L3_assignments",
        group.display(), holders(in_use)
    )]
    OutOfMbmCounters {
        /// The monitor group that could not get a counter.
        group: PathBuf,
        /// The event (`mbm_total_bytes`, `mbm_local_bytes`).
        event: &'static str,
        /// The L3 domain id.
        domain: u32,
        /// `num_mbm_cntrs` of that domain.
        per_domain: u32,
        /// Every group holding counters in that domain (`/` for the root), with how many.
        in_use: Vec<String>,
        /// `info/last_cmd_status`.
        status: String,
    },
    /// AMD ABMC in `mbm_event` mode: the monitor groups of one request need more hardware
    /// counters in an L3 domain than `info/L3_MON/available_mbm_cntrs` says are free there
    /// (one per MBM event per group counting in that domain). Found before any group is
    /// made: nothing was created.
    #[error(
        "out of MBM counters: the monitoring groups asked for that count MBM in L3 domain \
         {domain} ({groups}) need {needed} of its counters (one per MBM event each), but \
         only {available} of its {per_domain} are free (info/L3_MON/available_mbm_cntrs, \
         mbm_event mode); the groups holding them (counters in that domain) are: {}; \
         monitor fewer groups or events there or free counters with `EVENT:{domain}=_` in a \
         group's mbm_L3_assignments; no group was created",
        holders(in_use)
    )]
    NotEnoughMbmCounters {
        /// How many groups of the request count MBM in that domain.
        groups: usize,
        /// The L3 domain id.
        domain: u32,
        /// The counters those groups need there.
        needed: u32,
        /// `available_mbm_cntrs` of that domain.
        available: u32,
        /// `num_mbm_cntrs` of that domain (0 when unknown).
        per_domain: u32,
        /// Every group holding counters in that domain (`/` for the root), with how many.
        in_use: Vec<String>,
    },
    /// A counter of a monitor group this backend made reads `Unassigned`: in ABMC's
    /// `mbm_event` mode its hardware counter was taken away after the group started
    /// (another tool wrote its `mbm_L3_assignments`, or `mbm_assign_mode` was switched).
    /// Reported instead of a blank or 0.
    #[error(
        "{} reads `Unassigned`: no hardware counter is assigned to this group's event in \
         this domain any more (mbm_event mode; its mbm_L3_assignments was changed or \
         info/L3_MON/mbm_assign_mode switched after monitoring started)",
        path.display()
    )]
    Unassigned {
        /// The counter file.
        path: PathBuf,
    },
    /// A request the platform, this mount or the current groups cannot satisfy (limits, a
    /// CPU, domain, task or group that does not exist, an event not offered, already
    /// monitored, out of RMIDs, a wrong MBA unit); the same variants as on the MSR
    /// interface.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Changing CDP or `mba_MBps` means remounting resctrl, which destroys every group;
    /// other tools' groups exist, so it is refused.
    #[error(
        "changing the resctrl mount options to `{}` needs a remount, which would delete groups \
         other tools created: {}; remove them first",
        wanted, groups.join(", ")
    )]
    RemountBlocked {
        /// The options the reset asked for.
        wanted: MountOptions,
        /// The foreign groups.
        groups: Vec<String>,
    },
    /// The remount itself failed (permission denied: mounting needs root, CAP_SYS_ADMIN).
    #[error(
        "remounting resctrl at {} with `{wanted}` failed{}",
        root.display(), needs_root(source)
    )]
    Remount {
        /// The resctrl root.
        root: PathBuf,
        /// The options asked for.
        wanted: MountOptions,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

/// What to do about a permission error (EACCES, EPERM): run as root; nothing for another
/// error (whose cause the `source` gives).
fn needs_root(source: &io::Error) -> &'static str {
    if source.kind() == io::ErrorKind::PermissionDenied {
        " (permission denied: resctrl needs root; run as root)"
    } else {
        ""
    }
}

/// `: <status>`, or nothing when the kernel left no message ("ok": the errno, the error's
/// source, is all there is).
fn status_suffix(status: &str) -> String {
    if status == "ok" {
        String::new()
    } else {
        format!(": {status}")
    }
}

impl ResctrlError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// [`RequestError::ForeignGroup`] for `what` (`"CPU 3"`) in another tool's `group`.
    pub(crate) fn foreign(what: String, group: &str) -> Self {
        RequestError::ForeignGroup {
            what,
            group: group.to_owned(),
        }
        .into()
    }
}

impl From<LimitError> for ResctrlError {
    fn from(e: LimitError) -> Self {
        Self::Request(e.into())
    }
}

impl BackendError for ResctrlError {
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
        let e = ResctrlError::NotMounted {
            root: "/sys/fs/resctrl".into(),
        };
        assert!(
            e.to_string()
                .contains("mount it with `mount -t resctrl resctrl /sys/fs/resctrl`"),
            "{e}"
        );
        let denied = ResctrlError::io(
            "open for writing",
            "/sys/fs/resctrl/schemata",
            io::Error::from_raw_os_error(13), // EACCES
        );
        assert_eq!(
            denied.to_string(),
            "failed to open for writing /sys/fs/resctrl/schemata (permission denied: resctrl \
             needs root; run as root)"
        );
        let gone = ResctrlError::io(
            "read",
            "/sys/fs/resctrl/x/tasks",
            io::Error::from_raw_os_error(2),
        );
        assert_eq!(gone.to_string(), "failed to read /sys/fs/resctrl/x/tasks");
    }
}

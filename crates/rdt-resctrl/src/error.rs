//! Errors of the resctrl backend.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use rdt_core::{
    CacheDomain, CatResource, ClassId, ForeignGroup, LimitError, LogicalCpu, MbaLimit, MonGroupId,
    TaskId, Unsupported,
};

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
    #[error("failed to {op} {}", path.display())]
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
    /// `mkdir` of a monitor group failed with ENOSPC or EBUSY: every RMID is taken (EBUSY:
    /// freed RMIDs still wait in limbo until their occupancy drops).
    #[error(
        "out of RMIDs: cannot create {}{}; the groups holding RMIDs are: {}",
        group.display(),
        if *limbo { " (freed RMIDs are still in limbo, retry in a second)" } else { "" },
        holders(in_use)
    )]
    OutOfRmids {
        /// The group that could not be made.
        group: PathBuf,
        /// Whether the kernel said EBUSY (RMIDs in limbo).
        limbo: bool,
        /// Every group (control and monitor), with "(foreign)" after another tool's.
        in_use: Vec<String>,
    },
    /// A value is outside the platform's limits; nothing was written.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// The platform (or this resctrl mount) lacks what the operation needs.
    #[error("{0}")]
    Unsupported(String),
    /// Per-task work asked of an interface that cannot do it (never from this backend, which
    /// does tasks; present so that `Backend`'s defaults compile).
    #[error(transparent)]
    Interface(#[from] Unsupported),
    /// A CPU is not online (not in the topology).
    #[error("CPU {0} is not present or not online")]
    NoSuchCpu(LogicalCpu),
    /// A domain id is not one of the resource's domains.
    #[error("{resource} domain {domain} does not exist (resctrl lists {known})")]
    NoSuchDomain {
        /// `"L3"`, `"L2"`, `"MB"`.
        resource: &'static str,
        /// The domain asked for.
        domain: CacheDomain,
        /// The domains resctrl has, as a list.
        known: String,
    },
    /// No such task (`/proc/<id>` does not exist, or it exited before it could be moved).
    #[error("task {0} does not exist")]
    NoSuchTask(TaskId),
    /// A monitoring group id this backend did not hand out, or one already stopped.
    #[error("no monitoring group {}", .0.0)]
    NoSuchGroup(MonGroupId),
    /// A CAT class was given one mask while CDP is on, or a data/code pair while CDP is off.
    #[error("{resource} COS{class}: {reason}")]
    CdpMismatch {
        /// The resource.
        resource: CatResource,
        /// The class.
        class: ClassId,
        /// What was expected.
        reason: &'static str,
    },
    /// An MBA limit in the wrong unit for this mount (percent on an `mba_MBps` mount, MBps
    /// without it, percent on AMD).
    #[error("MBA limit {limit:#} for COS{class}: {reason}")]
    MbaUnit {
        /// The class.
        class: ClassId,
        /// The limit given.
        limit: MbaLimit,
        /// Which unit applies and how to get the other.
        reason: &'static str,
    },
    /// A CPU or task is already in a monitor group (one of ours, another pqos's or another
    /// tool's).
    #[error("{what} is already monitored by resctrl group {group}; use -r to reset monitoring")]
    AlreadyMonitored {
        /// `"CPU 3"`, `"task 1234"`.
        what: String,
        /// The monitor group's path relative to the root.
        group: String,
    },
    /// A CPU or task belongs to a group another tool created; it has no pqos class and is
    /// not moved. The source is the [`ForeignGroup`] marker, which callers generic over
    /// [`rdt_core::Backend`] find with [`ForeignGroup::find`].
    #[error("{what} belongs to resctrl group {}", owner.group)]
    Foreign {
        /// `"CPU 3"`, `"task 1234"`.
        what: String,
        /// The group (its path relative to the root).
        #[source]
        owner: ForeignGroup,
    },
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
    /// The remount itself failed.
    #[error("remounting resctrl at {} with `{wanted}` failed", root.display())]
    Remount {
        /// The resctrl root.
        root: PathBuf,
        /// The options asked for.
        wanted: MountOptions,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// A monitoring group was requested without CPUs or tasks, or without events.
    #[error("a monitoring group needs at least one CPU or task and one event")]
    EmptyGroup,
}

/// The first groups of `list` and how many more (of which how many are other tools'), so
/// that a resctrl full of groups gives a readable message; the error keeps the whole list.
fn holders(list: &[String]) -> String {
    const SHOWN: usize = 8;
    if list.len() <= SHOWN + 1 {
        return list.join(", ");
    }
    let (shown, rest) = list.split_at(SHOWN);
    let foreign = rest.iter().filter(|g| g.ends_with(" (foreign)")).count();
    format!(
        "{} and {} more ({foreign} of them foreign)",
        shown.join(", "),
        rest.len()
    )
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

    /// [`ResctrlError::Foreign`] for `what` (`"CPU 3"`) in another tool's `group`.
    pub(crate) fn foreign(what: String, group: &str) -> Self {
        Self::Foreign {
            what,
            owner: ForeignGroup {
                group: group.to_owned(),
            },
        }
    }
}

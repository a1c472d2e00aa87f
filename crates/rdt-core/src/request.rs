//! [`RequestError`]: a request that the platform or the interface cannot carry out, the
//! same on both interfaces.

use std::fmt;

use crate::{
    CacheDomain, CatResource, ClassId, Interface, LimitError, LogicalCpu, MbaLimit, MonEvents,
    MonGroupId, TaskId,
};

/// A request the platform, the interface or the current state cannot satisfy. Both
/// backends report these with the same variants and words (`MsrError::Request`,
/// `ResctrlError::Request`); except for [`RequestError::OutOfRmids`], which the kernel may
/// report only when asked to create a group, they are found before anything is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A mask overlaps the ways of a resctrl group in `exclusive` mode (the kernel would
    /// refuse the write: resctrl.rst "Resource Sharing").
    #[error(
        "{resource} mask {mask:#x} of COS{class} overlaps ways {overlap:#x} of resctrl group {group}, which holds them exclusively (mode exclusive)"
    )]
    ExclusiveOverlap {
        /// The cache level.
        resource: crate::CatResource,
        /// The class written.
        class: ClassId,
        /// Its mask.
        mask: u64,
        /// The exclusive group.
        group: String,
        /// The ways both hold.
        overlap: u64,
    },
    /// A reset asked for a feature the platform or interface does not have (pqos `-R
    /// l3cdp-on` without CDP).
    #[error("{}", feature_unsupported(.feature, .reason.as_deref()))]
    FeatureUnsupported {
        /// `"Allocation"`, `"L3 CDP"`, `"L2 CDP"`, `"MBA CTRL"`.
        feature: &'static str,
        /// Why, where there is more to say.
        reason: Option<String>,
    },
    /// The run directory (the transaction journal, the MSR writers' lock) cannot be
    /// used: nothing was written.
    #[error("{}: {message}", .path.display())]
    RunState {
        /// The directory or file.
        path: std::path::PathBuf,
        /// What failed, with the system's error.
        message: String,
    },
    /// A value is outside the platform's limits (mask width, contiguity, class count, MBA
    /// range).
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// A CPU is not online (not in the topology).
    #[error("CPU {0} is not present or not online")]
    NoSuchCpu(LogicalCpu),
    /// A cache domain is not one of the resource's domains.
    #[error("{resource} domain {domain} does not exist{}", known_suffix(.known.as_deref()))]
    NoSuchDomain {
        /// `"L3"`, `"L2"`, `"MBA"`.
        resource: &'static str,
        /// The domain asked for.
        domain: CacheDomain,
        /// The domains there are, as a list, where the interface lists them.
        known: Option<String>,
    },
    /// No such task (`/proc/<id>` does not exist, or it exited before it could be moved).
    #[error("task {0} does not exist")]
    NoSuchTask(TaskId),
    /// A monitoring group id this backend did not hand out, or one already stopped.
    #[error("no monitoring group {}", .0.0)]
    NoSuchGroup(MonGroupId),
    /// A CPU or task of a new monitoring group is already monitored.
    #[error("{what} is already monitored{}; use -r to reset monitoring", by_suffix(.by.as_deref()))]
    AlreadyMonitored {
        /// `"CPU 3"`, `"task 1234"`.
        what: String,
        /// By whom, where known: a resctrl monitor group (`COS1/mon_groups/pqos-42-0`), or
        /// `RMID 5` on the MSR interface.
        by: Option<String>,
    },
    /// No RMID is free for a new monitoring group.
    #[error("{}", out_of_rmids(.scope, *.limbo, .in_use))]
    OutOfRmids {
        /// Where: `L3 domain 1` (MSR), the monitor group that could not be created (resctrl).
        scope: String,
        /// resctrl answered EBUSY: freed RMIDs still wait in limbo until their occupancy
        /// drops.
        limbo: bool,
        /// The groups holding RMIDs, where the interface can list them, with "(foreign)"
        /// after another tool's.
        in_use: Vec<String>,
    },
    /// The platform (or this resctrl mount) lacks what the operation needs.
    #[error("{0}")]
    Unsupported(String),
    /// An I/O RDT channel or device the platform's ACPI IRDT table does not have, or a
    /// channel whose link does not tag what was asked ([`crate::IoRdtOps`]).
    #[error("{0}")]
    IoRdt(String),
    /// A monitoring event the platform does not count.
    #[error(
        "monitoring of {}{} is not supported on this platform",
        .event.describe(),
        .needed_for.map_or_else(String::new, |n| format!(" (needed for {})", n.describe()))
    )]
    UnsupportedEvent {
        /// The event.
        event: MonEvents,
        /// The requested event that needs it, when it was not requested itself (remote
        /// bandwidth needs local and total).
        needed_for: Option<MonEvents>,
    },
    /// An operation only the OS interface can do (per-task allocation and monitoring: MSR
    /// RMIDs and COS follow CPUs only; pqos(8) narrows `-p` and `pid:` to `--iface=os`).
    #[error(
        "{operation} needs the OS (resctrl) interface; this platform was opened with the {interface:?} interface"
    )]
    NeedsOsInterface {
        /// What was asked (`"task association"`, `"PID monitoring"`).
        operation: &'static str,
        /// The interface in use.
        interface: Interface,
    },
    /// An operation only the MSR interface can do: uncore (socket) monitoring programs the
    /// CHA performance monitors through MSRs, and pqos offers it on the MSR interface only
    /// (`lib/api.c`).
    #[error(
        "{operation} needs the MSR interface (--iface=msr); this platform was opened with the {interface:?} interface"
    )]
    NeedsMsrInterface {
        /// What was asked (`"uncore monitoring"`).
        operation: &'static str,
        /// The interface in use.
        interface: Interface,
    },
    /// A CAT class was given one mask while CDP is on, or a data/code pair while CDP is off.
    #[error("{resource} COS{class}: {reason}")]
    CdpMismatch {
        /// The resource.
        resource: CatResource,
        /// The class.
        class: ClassId,
        /// What was expected (`"CDP is on: give a data and a code mask"`).
        reason: &'static str,
    },
    /// An MBA limit in a unit this platform or mount does not take (percent on an
    /// `mba_MBps` mount, MiB/s without it, percent on AMD).
    #[error("MBA limit {limit:#} for COS{class}: {mismatch}")]
    MbaUnit {
        /// The class.
        class: ClassId,
        /// The limit given.
        limit: MbaLimit,
        /// Which unit applies and how to get the other.
        mismatch: MbaUnitMismatch,
    },
    /// A CPU or task sits in a resctrl group another tool created
    /// ([`crate::GroupOwner::Foreign`]): it has no pqos class of service and is not moved.
    /// `pqos -s` prints such a CPU as `Core 3, L2ID 3, L3ID 0 => kubepods (not managed by
    /// pqos)`.
    ///
    /// # References
    /// Linux `Documentation/arch/x86/resctrl.rst`, "Locking between applications" (several
    /// tools share one resctrl).
    #[error(
        "{what} belongs to resctrl group {group}: another tool created `{group}`, so pqos leaves \
         the group, its CPUs and its tasks alone (change them with that tool)"
    )]
    ForeignGroup {
        /// `"CPU 3"`, `"task 1234"`.
        what: String,
        /// The group's path relative to the resctrl root: `kubepods`,
        /// `COS1/mon_groups/agent`.
        group: String,
    },
    /// A named class is named like a resctrl control group another tool made (not in this
    /// library's record of named classes): writing to it would take that group over (its
    /// ways, limits, CPUs and tasks), so the plan is refused before anything is written.
    /// Rename the class, or adopt the group on purpose ([`crate::transaction::Change::Adopt`];
    /// `pqos --apply FILE --group-prefix P --prune --adopt goresctrl` when migrating).
    #[error(
        "resctrl group `{name}` belongs to another tool (it is not a group this library made): \
         a class named `{name}` would take it over, so nothing is written (rename the class, or \
         adopt the group when migrating from that tool)"
    )]
    ForeignClass {
        /// The group's name (the named class's).
        name: String,
    },
    /// A monitoring group was requested without CPUs or tasks, or without events.
    #[error("a monitoring group needs at least one CPU or task and one event")]
    EmptyGroup,
    /// A named class to give up is not one this library made
    /// ([`crate::BackendExt::own_class_names`]): never applied here, given up already, or
    /// another tool's resctrl group of that name, which is left alone.
    #[error(
        "`{name}` is not a named class this library made (never applied here, removed already, or another tool's resctrl group): left alone"
    )]
    NotOwnClass {
        /// The name.
        name: String,
    },
    /// A named class's resctrl group cannot be removed: it holds monitor groups (another
    /// tool's, or a running `pqos -m`'s).
    #[error(
        "the resctrl group of named class `{name}` holds monitor groups {groups}: stop them first"
    )]
    ClassInUse {
        /// The name (the group's).
        name: String,
        /// The monitor groups, comma-separated paths.
        groups: String,
    },
}

/// Why an MBA limit's unit does not fit ([`RequestError::MbaUnit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum MbaUnitMismatch {
    /// MiB/s on the MSR interface: only the kernel's `mba_MBps` controller takes MiB/s.
    #[error(
        "MBps limits need the kernel's MBA software controller, on the OS interface (resctrl \
         mounted with mba_MBps)"
    )]
    MibPerSecOnMsr,
    /// MiB/s while resctrl is mounted without `mba_MBps`.
    #[error(
        "MBps limits need the kernel's MBA controller: reset with -R mbaCtrl-on (remounts \
         resctrl with mba_MBps)"
    )]
    ControllerOff,
    /// A percentage or units while resctrl is mounted with `mba_MBps`.
    #[error(
        "resctrl is mounted with mba_MBps, so limits are MBps (mba_max); reset with -R \
         mbaCtrl-off for percentages"
    )]
    ControllerOn,
    /// A percentage on AMD, which takes units of 1/8 GB/s.
    #[error("AMD MBA limits are bandwidth units of 1/8 GB/s, not percentages")]
    PercentOnAmd,
    /// AMD units on Intel, which takes percentages.
    #[error("Intel MBA limits are percentages, not AMD bandwidth units")]
    UnitsOnIntel,
}

fn known_suffix(known: Option<&str>) -> String {
    known.map_or_else(String::new, |k| format!(" (there are {k})"))
}

fn by_suffix(by: Option<&str>) -> String {
    by.map_or_else(String::new, |b| format!(" by {b}"))
}

/// The message of [`RequestError::OutOfRmids`]: the first groups of `in_use` and how many
/// more (of which how many are other tools'), so that a resctrl full of groups gives a
/// readable message; the error keeps the whole list.
fn out_of_rmids(scope: &str, limbo: bool, in_use: &[String]) -> String {
    let mut text = format!("out of RMIDs: no free RMID for {scope}");
    if limbo {
        text.push_str(" (freed RMIDs are still in limbo, retry in a second)");
    }
    if !in_use.is_empty() {
        text.push_str("; the groups holding RMIDs are: ");
        text.push_str(&holders(in_use));
    }
    text
}

/// The first eight of `list` and how many more there are, how many of those other tools'.
#[must_use]
pub fn holders(list: &[String]) -> String {
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

/// `err` and each of its [`source`](std::error::Error::source)s, joined with `: `: the
/// whole cause on one line, for errors whose message must carry it.
#[must_use]
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    struct Chain<'a>(&'a (dyn std::error::Error + 'static));
    impl fmt::Display for Chain<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}", self.0)?;
            let mut next = self.0.source();
            while let Some(e) = next {
                write!(f, ": {e}")?;
                next = e.source();
            }
            Ok(())
        }
    }
    Chain(err).to_string()
}

/// [`RequestError::FeatureUnsupported`]'s message, in pqos's words.
fn feature_unsupported(feature: &str, reason: Option<&str>) -> String {
    let head = if feature == "Allocation" {
        "Allocation capability not detected".to_owned()
    } else {
        format!("{feature} requested but not supported by the platform")
    };
    match reason {
        Some(r) => format!("{head}: {r}"),
        None => head,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_and_where() {
        let e = RequestError::AlreadyMonitored {
            what: "CPU 3".into(),
            by: Some("COS1/mon_groups/x".into()),
        };
        assert_eq!(
            e.to_string(),
            "CPU 3 is already monitored by COS1/mon_groups/x; use -r to reset monitoring"
        );
        let e = RequestError::NoSuchDomain {
            resource: "L3",
            domain: CacheDomain::new(7),
            known: Some("0,1".into()),
        };
        assert_eq!(e.to_string(), "L3 domain 7 does not exist (there are 0,1)");
        let e = RequestError::UnsupportedEvent {
            event: MonEvents::MBM_TOTAL,
            needed_for: Some(MonEvents::MBM_REMOTE),
        };
        assert_eq!(
            e.to_string(),
            "monitoring of total memory bandwidth (needed for remote memory bandwidth) is not \
             supported on this platform"
        );
    }

    #[test]
    fn a_long_holder_list_is_cut_and_counted() {
        let list: Vec<String> = (0..12)
            .map(|i| {
                if i % 2 == 0 {
                    format!("g{i}")
                } else {
                    format!("g{i} (foreign)")
                }
            })
            .collect();
        let e = RequestError::OutOfRmids {
            scope: "x".into(),
            limbo: true,
            in_use: list,
        };
        let text = e.to_string();
        assert!(text.contains("limbo"), "{text}");
        assert!(
            text.ends_with("g7 (foreign) and 4 more (2 of them foreign)"),
            "{text}"
        );
    }

    #[test]
    fn the_chain_joins_every_source() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&e), "outer: inner");
    }
}

//! The `Backend` trait both interfaces (MSR and resctrl) implement, and the values it speaks.

use std::ops::BitOr;

use crate::{
    CacheBitmask, CacheDomain, Capabilities, CatResource, ClassId, CpuSet, LogicalCpu, MbaLimit,
    Rmid, TaskId, Topology,
};

/// The interface a backend programs the hardware through (pqos `--iface`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interface {
    /// Model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// The Linux resctrl filesystem.
    Os,
}

/// The masks of one CAT class: one mask, or a data and a code mask while CDP is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CatMask {
    /// CDP off: one mask for code and data.
    Unified(CacheBitmask),
    /// CDP on: data mask (register 2n) and code mask (register 2n+1).
    Cdp {
        /// Mask for data fetches.
        data: CacheBitmask,
        /// Mask for code fetches.
        code: CacheBitmask,
    },
}

/// One class of service's CAT masks in one cache domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CatClass {
    /// The class.
    pub class: ClassId,
    /// Its masks.
    pub mask: CatMask,
}

/// One class of service's bandwidth limit in one MBA domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MbaClass {
    /// The class.
    pub class: ClassId,
    /// Its limit.
    pub limit: MbaLimit,
}

/// A requested state of an on/off feature at reset (pqos `-R l3cdp-on`, `pqos_cdp_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum FeatureSetting {
    /// Keep as is.
    #[default]
    Any,
    /// Turn on.
    On,
    /// Turn off.
    Off,
}

/// What `-R` resets besides the masks and associations (pqos `pqos_alloc_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct AllocReset {
    /// L3 code/data prioritization.
    pub l3_cdp: FeatureSetting,
    /// L2 code/data prioritization.
    pub l2_cdp: FeatureSetting,
    /// The kernel's MBA software controller (`mba_MBps`); OS interface only.
    pub mba_ctrl: FeatureSetting,
}

/// A set of monitoring events (pqos `enum pqos_mon_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct MonEvents(u32);

impl MonEvents {
    /// No events.
    pub const NONE: Self = Self(0);
    /// LLC occupancy (CMT), in bytes.
    pub const LLC_OCCUPANCY: Self = Self(1);
    /// Local memory bandwidth (MBM local).
    pub const MBM_LOCAL: Self = Self(2);
    /// Total memory bandwidth (MBM total).
    pub const MBM_TOTAL: Self = Self(4);
    /// Remote memory bandwidth, computed as total - local.
    pub const MBM_REMOTE: Self = Self(8);
    /// LLC misses (PMU).
    pub const LLC_MISSES: Self = Self(0x4000);
    /// Instructions per cycle (PMU).
    pub const IPC: Self = Self(0x8000);
    /// pqos's `all`: occupancy, local, remote, IPC and misses (not total).
    pub const ALL: Self = Self(1 | 2 | 8 | 0x4000 | 0x8000);

    /// Whether every event of `other` is in `self`.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no event is selected.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `self` without the events of `other`.
    #[must_use]
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The raw bits (pqos's values).
    #[must_use]
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The hardware (RMID-counted) events this selection needs: remote implies local and total.
    #[must_use]
    pub const fn rmid_events(self) -> Self {
        let mut bits = self.0 & (1 | 2 | 4);
        if self.0 & 8 != 0 {
            bits |= 2 | 4;
        }
        Self(bits)
    }
}

impl BitOr for MonEvents {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A handle to a monitoring group started on a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MonGroupId(pub u32);

/// The values of one monitoring group after a poll.
///
/// Deltas are since the previous poll; the first poll after start reports 0 deltas
/// (pqos does the same). `None` means the event is not monitored or could not be read
/// this time (IA32_QM_CTR Unavailable, no PMU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MonValues {
    /// LLC occupancy in bytes, summed over the group's L3 domains.
    pub llc_occupancy_bytes: Option<u64>,
    /// Local memory traffic since the previous poll, in bytes.
    pub mbm_local_delta_bytes: Option<u64>,
    /// Total memory traffic since the previous poll, in bytes.
    pub mbm_total_delta_bytes: Option<u64>,
    /// Remote traffic since the previous poll (total - local, 0 if negative), in bytes.
    pub mbm_remote_delta_bytes: Option<u64>,
    /// Instructions retired since the previous poll.
    pub instructions_delta: Option<u64>,
    /// Unhalted core cycles since the previous poll.
    pub cycles_delta: Option<u64>,
    /// LLC misses since the previous poll.
    pub llc_misses_delta: Option<u64>,
}

impl MonValues {
    /// Instructions per cycle over the last interval; `None` without PMU data, 0 when no
    /// cycle elapsed.
    #[must_use]
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52 in one interval
    pub fn ipc(&self) -> Option<f64> {
        let (i, c) = (self.instructions_delta?, self.cycles_delta?);
        Some(if c == 0 { 0.0 } else { i as f64 / c as f64 })
    }
}

/// An operation the backend's interface cannot do: per-task allocation and monitoring need
/// the OS interface (MSR RMIDs and COS follow CPUs only; pqos(8) narrows `-p` and `pid:` to
/// `--iface=os`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{operation} needs the OS (resctrl) interface; this platform was opened with the {interface:?} interface"
)]
pub struct Unsupported {
    /// What was asked (`"task association"`, `"PID monitoring"`).
    pub operation: &'static str,
    /// The interface in use.
    pub interface: Interface,
}

/// Marks an error about a CPU or task that sits in a resctrl group another tool created
/// ([`GroupOwner::Foreign`]): such a CPU or task has no pqos class of service, and it is not
/// moved. A backend puts this in the [`source`](std::error::Error::source) chain of the
/// error it returns for such a CPU or task ([`Backend::class_of`], [`Backend::associate`],
/// [`Backend::class_of_task`], [`Backend::associate_task`]), so that code generic over
/// [`Backend`] can tell this case from a failure and report the group
/// ([`ForeignGroup::find`]). `pqos -s` prints such a CPU as
/// `Core 3, L2ID 3, L3ID 0 => kubepods (not managed by pqos)`.
///
/// # References
/// Linux `Documentation/arch/x86/resctrl.rst`, "Locking between applications" (several
/// tools share one resctrl).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error(
    "another tool created `{group}`, so pqos leaves the group, its CPUs and its tasks alone \
     (change them with that tool)"
)]
pub struct ForeignGroup {
    /// The group's path relative to the resctrl root: `kubepods`, `COS1/mon_groups/agent`.
    pub group: String,
}

impl ForeignGroup {
    /// The [`ForeignGroup`] in `err`'s chain (`err` itself, then each
    /// [`source`](std::error::Error::source)), if any.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::ForeignGroup;
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("CPU 3 belongs to resctrl group kubepods")]
    /// struct InForeignGroup(#[source] ForeignGroup);
    /// let e = InForeignGroup(ForeignGroup { group: "kubepods".into() });
    /// assert_eq!(ForeignGroup::find(&e).map(|f| f.group.as_str()), Some("kubepods"));
    /// ```
    #[must_use]
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Self> {
        let mut next = Some(err);
        while let Some(e) = next {
            if let Some(found) = e.downcast_ref::<Self>() {
                return Some(found);
            }
            next = e.source();
        }
        None
    }
}

/// Whether a resctrl group is a control group (own `schemata`, a CLOSID) or a monitor group
/// (under a control group's `mon_groups/`, an RMID only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// A CTRL_MON group: `/sys/fs/resctrl/<name>` (or the root).
    Control,
    /// A MON group: `<control>/mon_groups/<name>`.
    Monitor,
}

/// Who made a resctrl group, judged by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupOwner {
    /// A name pqos (Intel's or this one) uses: `COS<n>` control groups, `pqos-<pid>-<n>`
    /// monitor groups. Both tools read, rewrite and remove these.
    Pqos,
    /// Any other name (goresctrl, kubelet, a user's `mkdir`): never rewritten or removed,
    /// except by a full reset the user asked for.
    Foreign,
}

/// One resctrl group as [`Backend::groups`] lists it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupInfo {
    /// Path relative to the resctrl root: `COS1`, `kubepods`, `COS1/mon_groups/pqos-42-0`.
    pub path: String,
    /// Control or monitor group.
    pub kind: GroupKind,
    /// Who made it.
    pub owner: GroupOwner,
    /// The class of service it maps to, for `COS<n>` control groups and groups under them.
    pub class: Option<ClassId>,
}

/// The state of the kernel's MBA software controller (resctrl's `mba_MBps` mount option,
/// pqos's "MBA CTRL"): with it on, MBA limits are MiB/s targets the kernel holds each class
/// to (a 1 s feedback loop over MBM local bytes), not percentages.
///
/// # References
/// Linux `Documentation/arch/x86/resctrl.rst`, "Memory bandwidth Allocation specified in
/// MiBps"; pqos `pqos_cap_mba.ctrl`/`ctrl_on`, `pqos -R mbaCtrl-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MbaCtrl {
    /// The platform cannot run it: no MBA, no MBM, or non-linear MBA (AMD), or SNC.
    Unsupported,
    /// Supported, resctrl is mounted without `mba_MBps`: limits are percentages.
    Disabled,
    /// resctrl is mounted with `mba_MBps`: limits are MiB/s ([`crate::MbaLimit::MibPerSec`]).
    Enabled,
}

/// One way of programming RDT: raw MSRs or resctrl.
///
/// Domains are cache instances: `CacheDomain` is an L3 id for L3 CAT and MBA (the kernel's
/// MBA domains are L3 domains), an L2 id for L2 CAT.
///
/// Implementations validate their arguments against [`Backend::capabilities`] before
/// writing anything, so a rejected call leaves the platform as it was.
pub trait Backend {
    /// The backend's error; the task methods' defaults return [`Unsupported`] through it.
    type Error: std::error::Error + Send + Sync + 'static + From<Unsupported>;

    /// The interface this backend uses.
    fn interface(&self) -> Interface;

    /// Capabilities, including the current CDP state.
    fn capabilities(&self) -> &Capabilities;

    /// Topology of the online CPUs.
    fn topology(&self) -> &Topology;

    /// All usable classes' masks of `resource` in `domain`, by class.
    ///
    /// # Errors
    /// When the resource is not supported or the registers/files cannot be read.
    fn cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, Self::Error>;

    /// Sets the masks of the given classes of `resource` in `domain`. The mask kind must match
    /// the CDP state.
    ///
    /// # Errors
    /// When a class or mask is invalid (nothing is written then) or a write fails.
    fn set_cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
        classes: &[CatClass],
    ) -> Result<(), Self::Error>;

    /// All MBA classes' limits in `domain` (an L3 id).
    ///
    /// # Errors
    /// When MBA is not supported or the registers/files cannot be read.
    fn mba_classes(&mut self, domain: CacheDomain) -> Result<Vec<MbaClass>, Self::Error>;

    /// Sets MBA limits; returns the limits the hardware applied (Intel rounds to the
    /// granularity).
    ///
    /// # Errors
    /// When a class or limit is invalid (nothing is written then) or a write fails.
    fn set_mba_classes(
        &mut self,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, Self::Error>;

    /// The class `cpu` is associated with.
    ///
    /// # Errors
    /// When the CPU is not online or its association cannot be read.
    fn class_of(&mut self, cpu: LogicalCpu) -> Result<ClassId, Self::Error>;

    /// Puts `cpu` in `class`.
    ///
    /// # Errors
    /// When the CPU or class is invalid (nothing is written then) or the write fails.
    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), Self::Error>;

    /// The RMID `cpu` is tagged with, where the interface exposes RMIDs (MSR); `None` on OS.
    ///
    /// # Errors
    /// When the CPU is not online or its association cannot be read.
    fn rmid_of(&mut self, cpu: LogicalCpu) -> Result<Option<Rmid>, Self::Error>;

    /// Resets allocation: every class to the full mask / no limit, every CPU to COS 0, then
    /// CDP on or off as requested (pqos `-R`).
    ///
    /// # Errors
    /// When a requested setting is unsupported or a write fails.
    fn reset_allocation(&mut self, cfg: &AllocReset) -> Result<(), Self::Error>;

    /// Resets monitoring: every CPU back to RMID 0 (pqos `-r`).
    ///
    /// # Errors
    /// When a write fails.
    fn reset_monitoring(&mut self) -> Result<(), Self::Error>;

    /// Starts monitoring `events` on `cpus` as one group (one RMID per L3 domain spanned).
    ///
    /// # Errors
    /// When a CPU is offline or already monitored, events are unsupported, or no RMID is free.
    fn start_monitoring(
        &mut self,
        cpus: &CpuSet,
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error>;

    /// Reads the counters of every started group; afterwards [`Backend::values`] has the new
    /// values.
    ///
    /// # Errors
    /// When a counter read fails for a reason other than the hardware's Unavailable flag.
    fn poll(&mut self) -> Result<(), Self::Error>;

    /// The values of `group` from the last poll.
    fn values(&self, group: MonGroupId) -> Option<&MonValues>;

    /// Stops a group and gives its RMIDs back (its CPUs return to RMID 0).
    ///
    /// # Errors
    /// When the group is unknown or a write fails.
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), Self::Error>;

    /// The class the task `task` (one thread) is associated with.
    ///
    /// # Errors
    /// [`Unsupported`] on the MSR interface; no such task; the files cannot be read.
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, Self::Error> {
        let _ = task;
        Err(self.unsupported("task association").into())
    }

    /// Puts a task in `class`. A process id (a thread-group leader) moves every thread of
    /// the process, one `tasks` write each (pqos `pqos_alloc_assoc_set_pid`, resctrl takes
    /// one id per write); a thread id moves that thread only.
    ///
    /// # Errors
    /// [`Unsupported`] on the MSR interface; no such task or class (nothing is written then);
    /// the kernel refused a write.
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), Self::Error> {
        let _ = (task, class);
        Err(self.unsupported("task association").into())
    }

    /// The tasks explicitly placed in `class` (its `tasks` file), ascending. For COS 0 (the
    /// root group) that is every task not in another group.
    ///
    /// # Errors
    /// [`Unsupported`] on the MSR interface; the files cannot be read.
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, Self::Error> {
        let _ = class;
        Err(self.unsupported("task association").into())
    }

    /// Starts monitoring `events` on `tasks` as one group (a resctrl monitor group holding
    /// every thread of each named process). IPC and misses come from per-task PMU counts.
    ///
    /// # Errors
    /// [`Unsupported`] on the MSR interface; no such task, a task already monitored, events
    /// unsupported, no RMID free.
    fn start_monitoring_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let _ = (tasks, events);
        Err(self.unsupported("PID monitoring").into())
    }

    /// The MBA software controller's state; `None` where it does not apply (the MSR
    /// interface: the controller is the kernel's).
    fn mba_ctrl(&self) -> Option<MbaCtrl> {
        None
    }

    /// Every resctrl group present, ours and other tools', root excluded; empty on the MSR
    /// interface (which has no groups).
    ///
    /// # Errors
    /// When the resctrl tree cannot be read.
    fn groups(&mut self) -> Result<Vec<GroupInfo>, Self::Error> {
        Ok(Vec::new())
    }

    /// The [`Unsupported`] error for `operation` on this backend's interface.
    fn unsupported(&self, operation: &'static str) -> Unsupported {
        Unsupported {
            operation,
            interface: self.interface(),
        }
    }
}

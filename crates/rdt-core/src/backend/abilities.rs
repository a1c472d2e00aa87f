//! What one interface can do and the other cannot, each reached through one accessor of
//! [`Backend`](super::Backend): [`OsOps`] (resctrl), [`MsrOps`] (registers), and what not
//! every backend has, [`NamedClasses`] and [`Writers`].
//!
//! The traits take the error type as a parameter, not an associated type, so that one
//! backend serves a program's own error too: `ResctrlBackend` is an `OsOps<E>` for every
//! `E: From<ResctrlError>`, which lets a facade over several backends hand out the backend
//! it holds, with its errors converted, without forwarding each method.

use std::path::Path;

use crate::{
    AssignMode, CacheDomain, CatResource, ClassId, MbmDetails, MonEvents, MonGroupId, RmidEvent,
    TaskId, ThreadThrottle,
};

use super::{ExclusiveWays, GroupInfo, GroupStartError, IoAlloc, MbaCtrl};

/// What only the OS interface (the kernel's resctrl filesystem) does: tasks, resctrl groups,
/// the MBA software controller, MBM counter assignment (ABMC), MBM event configuration
/// (BMEC) and L3 I/O allocation ([`Backend::os`](super::Backend::os)).
pub trait OsOps<E> {
    /// The class the task `task` (one thread) is associated with.
    ///
    /// # Errors
    /// No such task; the files cannot be read.
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, E>;

    /// Puts a task in `class`. A process id (a thread-group leader) moves every thread of
    /// the process, one `tasks` write each (pqos `pqos_alloc_assoc_set_pid`, resctrl takes
    /// one id per write); a thread id moves that thread only.
    ///
    /// # Errors
    /// No such task or class (nothing is written then); the kernel refused a write.
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), E>;

    /// The tasks explicitly placed in `class` (its `tasks` file), ascending. For COS 0 (the
    /// root group) that is every task not in another group.
    ///
    /// # Errors
    /// The files cannot be read.
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, E>;

    /// Starts several groups of tasks at once, all or none, as
    /// [`Backend::start_monitoring_many`](super::Backend::start_monitoring_many) does for
    /// CPUs: each a resctrl monitor group holding every thread of each named process; IPC
    /// and misses come from per-task PMU counts. resctrl reads every group's `tasks` once
    /// for the batch.
    ///
    /// # Errors
    /// [`GroupStartError`]: the failed group's index and why (no such task, a task already
    /// monitored, events unsupported, no RMID free); no group of the batch is left running.
    fn start_monitoring_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<E>>;

    /// Changes the tasks of task group `group` (started by
    /// [`OsOps::start_monitoring_tasks_many`]) without stopping it: every thread of each task
    /// of `add` goes into the group's monitor group (the same RMID: its counts go on, no
    /// new interval begins), every thread of each task of `remove` back to its control
    /// group's own monitoring. libpqos's `pqos_mon_add_pids` / `pqos_mon_remove_pids`
    /// (lib/os_monitoring.c writes the new tasks into the group's `tasks`). A task of `add`
    /// already in the group, or of `remove` not in it or gone, changes nothing.
    ///
    /// # Errors
    /// [`RequestError::NoSuchGroup`](crate::RequestError::NoSuchGroup),
    /// [`RequestError::Unsupported`](crate::RequestError::Unsupported) for a group of CPUs,
    /// a task whose control group the group has no monitor group under (resctrl makes a
    /// monitor group per control group; stop the group and start it again), or (default)
    /// a backend that does not build it; [`RequestError::NoSuchTask`](crate::RequestError::NoSuchTask)
    /// for a task of `add` that does not exist; [`RequestError::AlreadyMonitored`](crate::RequestError::AlreadyMonitored);
    /// [`RequestError::EmptyGroup`](crate::RequestError::EmptyGroup) when no task would be
    /// left. Nothing is written in those cases; a failed write is the kernel's.
    fn change_monitoring_tasks(
        &mut self,
        group: MonGroupId,
        add: &[TaskId],
        remove: &[TaskId],
    ) -> Result<(), E>
    where
        E: From<crate::RequestError>,
    {
        let _ = (group, add, remove);
        Err(crate::RequestError::Unsupported(
            "changing a monitoring group's tasks: not built for this backend".into(),
        )
        .into())
    }

    /// Every resctrl group present, ours and other tools', root excluded.
    ///
    /// # Errors
    /// When the resctrl tree cannot be read.
    fn groups(&mut self) -> Result<Vec<GroupInfo>, E>;

    /// The MBA software controller's state (resctrl's `mba_MBps` mount option); `None`
    /// where the backend does not model it (a test double).
    fn mba_ctrl(&self) -> Option<MbaCtrl>;

    /// What resctrl shows about memory bandwidth monitoring beyond the capabilities:
    /// assignable counters (ABMC), each MBM event's configuration (BMEC or `event_filter`),
    /// the SNC nodes per L3 ([`crate::mbm`]); read now, so available counters are current.
    /// `None` where the backend does not model them (a test double).
    ///
    /// # Errors
    /// When the resctrl files cannot be read.
    fn mbm_details(&mut self) -> Result<Option<MbmDetails>, E>;

    /// Switches resctrl's MBM counter assignment mode (AMD ABMC, Linux 6.18+:
    /// `info/L3_MON/mbm_assign_mode`): in [`AssignMode::MbmEvent`] a group's MBM events
    /// count only where a hardware counter is assigned to them, in [`AssignMode::Default`]
    /// every RMID counts. The kernel frees every assignment and resets every MBM count on a
    /// switch (`resctrl_mbm_assign_mode_write`); setting the current mode changes nothing.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](crate::RequestError::Unsupported) where resctrl does
    /// not offer the mode; the kernel's refusal.
    fn set_mbm_assign_mode(&mut self, mode: AssignMode) -> Result<(), E>;

    /// L3 I/O allocation ([`IoAlloc`]) on Linux 6.19+ with an io_alloc-capable L3; `None`
    /// where the kernel says `not supported` or has no such file.
    ///
    /// # Errors
    /// A read fails or a file does not parse.
    fn io_alloc(&mut self) -> Result<Option<IoAlloc>, E>;

    /// Enables or disables L3 I/O allocation (AMD SDCIAE, Linux 6.19+: `info/L3/io_alloc`):
    /// enabled, I/O devices allocate into the L3 with the masks of the highest CLOSID
    /// (`io_alloc_cbm`), which then belongs to no class ([`OsOps::io_alloc`]); the kernel
    /// refuses while a group holds that CLOSID (`resctrl_io_alloc_write`).
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](crate::RequestError::Unsupported) where resctrl has no
    /// `io_alloc`; the kernel's refusal (its `last_cmd_status`).
    fn set_io_alloc(&mut self, enabled: bool) -> Result<(), E>;

    /// Sets the memory transactions `event` counts (a [`crate::mbm::MBM_TRANSACTIONS`]
    /// bitmask) in every L3 domain: AMD BMEC's `mbm_*_bytes_config`, or the `event_filter`
    /// while ABMC's `mbm_event` mode hides those files. Changing it resets the event's
    /// counters.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](crate::RequestError::Unsupported) where resctrl has
    /// neither file; the kernel's refusal.
    fn set_mbm_event_config(&mut self, event: RmidEvent, bits: u32) -> Result<(), E>;

    /// The cache ways of `resource` in `domain` that resctrl groups in `exclusive` mode hold
    /// (resctrl.rst "Resource Sharing"; the kernel refuses any other group's mask that
    /// overlaps them).
    ///
    /// # Errors
    /// A read fails.
    fn exclusive_ways(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<ExclusiveWays>, E>;

    /// Treats the resctrl groups of `classes` as made by this process: a group of them
    /// brought back to the defaults with no CPU, task or monitor group in it is removed, as
    /// one this process created is. Rolling back a killed transaction uses it for the
    /// groups that transaction created.
    fn own_classes(&mut self, classes: &[ClassId]);
}

/// What only the MSR interface does: uncore PMON and the registers resctrl hides
/// ([`Backend::msr`](super::Backend::msr)).
pub trait MsrOps<E> {
    /// Starts monitoring the uncore `events` ([`MonEvents::UNCORE`]) of `sockets` as one
    /// group whose values are summed over the sockets
    /// ([`MonValues::uncore`](crate::MonValues::uncore)); polled and stopped like any
    /// group (pqos `pqos_mon_start_uncore`, `lib/api.c`), on the CPUs
    /// [`Capabilities::uncore_pcie`](crate::Capabilities::uncore_pcie) names.
    ///
    /// # Errors
    /// [`RequestError::UnsupportedEvent`](crate::RequestError::UnsupportedEvent),
    /// [`RequestError::EmptyGroup`](crate::RequestError::EmptyGroup), a socket that does not
    /// exist, or a register write.
    fn start_uncore_monitoring(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, E>;

    /// How the MBA limits of a core's threads combine in L3 `domain` ([`ThreadThrottle`]),
    /// as the registers say: per thread on MBA 3.0; on per-core MBA 2.0 bit 0 of
    /// IA32_MBA_CFG; else the larger delay. `None` without Intel MBA.
    ///
    /// # Errors
    /// [`RequestError::NoSuchDomain`](crate::RequestError::NoSuchDomain); a register read.
    fn mba_thread_throttle(&mut self, domain: CacheDomain) -> Result<Option<ThreadThrottle>, E>;

    /// Why allocation can only be reset, if it can (CDP on in some cache domains and off in
    /// others, after a reset was killed half-way): then reads work, writes of masks are
    /// refused, and a reset with CDP set on or off repairs it.
    fn needs_reset(&self) -> Option<String>;

    /// Sets the memory transactions `event` counts (a [`crate::mbm::MBM_TRANSACTIONS`]
    /// bitmask) in every L3 domain through AMD BMEC's QOS_EVT_CFG_n (0xC000_0400 total,
    /// 0xC000_0401 local; Linux `resctrl_arch_mon_event_config_write`): the MSR side of
    /// [`OsOps::set_mbm_event_config`]. The hardware clears the event's counters on a change.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](crate::RequestError::Unsupported) without BMEC, for bits
    /// the CPU does not support, or while monitoring groups of this backend run; a register
    /// access.
    fn set_mbm_event_config(&mut self, event: RmidEvent, bits: u32) -> Result<(), E>;
}

/// Named classes: the classes of service that stand for a declarative configuration's
/// classes (`rdt_config`), kept under their names for as long as the platform runs
/// ([`Backend::names`](super::Backend::names)).
pub trait NamedClasses<E> {
    /// The class of service that stands for the named class `name`: on the OS interface
    /// the resctrl control group of that name, on the MSR interface the COS recorded for the
    /// name in the run directory, else the lowest free one
    /// ([`crate::transaction::free_classes`]). A new name is bound in this process only: a
    /// plan that writes to the class claims it ([`crate::transaction::Step::Claim`]), and
    /// applied, records it, so that the same name gives the same class for as long as the
    /// platform runs (until a reset or a release gives it up).
    ///
    /// # Errors
    /// A name that cannot be a group; no class left.
    fn class_named(&mut self, name: &str) -> Result<ClassId, E>;

    /// Makes `class` stand for the named class `name` in this process (a configuration's
    /// fixed `cos`, or a journal's record replayed by `rdt_host::transaction::recover`);
    /// nothing is recorded ([`NamedClasses::claim_class`] does that).
    ///
    /// # Errors
    /// As [`NamedClasses::class_named`].
    fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), E>;

    /// The named classes this backend knows, by class: those of
    /// [`NamedClasses::own_class_names`] and the names given to
    /// [`NamedClasses::class_named`] or [`NamedClasses::bind_class`] in this process (on the
    /// OS interface also another tool's group a configuration named).
    fn class_names(&self) -> Vec<(ClassId, String)>;

    /// The named classes this library made and has not given up, by class: on the MSR
    /// interface every name recorded in the run directory (`msr-classes`), on the OS
    /// interface the resctrl groups of named classes it created (recorded in `os-classes`)
    /// that still exist. Never another tool's group of the same name. `pqos -s` lists them,
    /// and a reset or a configuration's removal gives them up.
    fn own_class_names(&self) -> Vec<(ClassId, String)>;

    /// Makes `class` stand for the named class `name` as this library's own (the write of
    /// [`crate::transaction::Step::Claim`]): on the MSR interface the name is recorded in
    /// the run directory; on the OS interface the name is bound, and with `make_group` its
    /// resctrl group is made (and recorded) when it does not exist, as undoing a release
    /// needs; otherwise the group is made, and recorded, by the first write to the class.
    /// Without a run directory the record is this process's only.
    ///
    /// # Errors
    /// As [`NamedClasses::bind_class`]; the record cannot be written; the group cannot be
    /// made.
    fn claim_class(&mut self, class: ClassId, name: &str, make_group: bool) -> Result<(), E>;

    /// Gives up the named class `name`, which stands for `class` (the write of
    /// [`crate::transaction::Step::Release`]): on the MSR interface its record goes; on the
    /// OS interface its resctrl group is removed when this library created it (it must hold
    /// no CPU, task or monitor group by then; a group adopted in this process goes with
    /// the empty monitor groups its tool left) and its record goes, while another tool's
    /// group of that name is left as it is. Either way the name no longer stands for
    /// `class`.
    ///
    /// # Errors
    /// The group still holds CPUs, tasks or monitor groups
    /// ([`RequestError::Unsupported`](crate::RequestError::Unsupported)); the record cannot
    /// be written; the `rmdir` fails.
    fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), E>;

    /// Makes another tool's existing resctrl control group `name` this library's named
    /// class standing for `class` (the write of [`crate::transaction::Step::Claim`] with
    /// `adopted`, [`crate::transaction::Change::Adopt`]): recorded as if this library had
    /// made it, nothing written to the group. Default: [`NamedClasses::claim_class`]
    /// without making a group (an interface without other tools' groups, MSR).
    ///
    /// # Errors
    /// As [`NamedClasses::claim_class`]; the group does not exist.
    fn adopt_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        self.claim_class(class, name, false)
    }

    /// Undoes [`NamedClasses::adopt_class`]: the record of `name` goes, the group stays as
    /// it is, and the name no longer stands for `class`. Default:
    /// [`NamedClasses::release_class`].
    ///
    /// # Errors
    /// The record cannot be written.
    fn disown_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        self.release_class(class, name)
    }
}

/// Who may write, and where what must outlive the process is kept
/// ([`Backend::writers`](super::Backend::writers)).
pub trait Writers<E> {
    /// The directory where the backend keeps what must outlive the process: RMID claims,
    /// the journal of a transaction in progress ([`crate::transaction`]), the MSR writers'
    /// lock. A root-only directory under `/run` on a host (`/run/rdt`); `None` without one
    /// (then a transaction killed half-way cannot be rolled back by the next process).
    fn run_dir(&self) -> Option<&Path>;

    /// Takes the interface's writers' lock (the `flock` on the resctrl root, `LOCK_EX`;
    /// `<run dir>/msr.lock` on the MSR interface) and holds it until as many
    /// [`Writers::release_writers`] calls; calls in between do not take it again. A
    /// transaction holds it from reading the state to its last write, so that two
    /// processes' changes serialize.
    ///
    /// # Errors
    /// Another process kept the lock for longer than the backend's lock timeout, or the
    /// lock file cannot be opened.
    fn hold_writers(&mut self) -> Result<(), E>;

    /// Gives back one [`Writers::hold_writers`]; the lock goes with the last.
    fn release_writers(&mut self);
}

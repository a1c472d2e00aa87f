//! The `Backend` trait both interfaces (MSR and resctrl) implement, and the values it speaks.

use crate::{
    CacheBitmask, CacheDomain, Capabilities, CatResource, ClassId, CpuSet, LogicalCpu, MbaLimit,
    MbaResource, MonEvents, MonGroupId, MonValues, RequestError, Rmid, TaskId, ThreadThrottle,
    Topology,
};

/// The interface a backend programs the hardware through (pqos `--iface`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Interface {
    /// Model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// The Linux resctrl filesystem.
    Os,
}

/// The masks of one CAT class: one mask, or a data and a code mask while CDP is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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

impl CatMask {
    /// Every way the class may fill, as mask bits: the mask, or data and code together.
    #[must_use]
    pub const fn ways(self) -> u64 {
        match self {
            Self::Unified(m) => m.bits(),
            Self::Cdp { data, code } => data.bits() | code.bits(),
        }
    }

    /// Whether every mask is `full` (a class as a reset leaves it).
    #[must_use]
    pub fn is_all(self, full: CacheBitmask) -> bool {
        match self {
            Self::Unified(m) => m == full,
            Self::Cdp { data, code } => data == full && code == full,
        }
    }
}

impl std::fmt::Display for CatMask {
    /// `0xffe00`, or `data 0xf code 0xf0` with CDP on.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unified(m) => write!(f, "{m:#x}"),
            Self::Cdp { data, code } => write!(f, "data {data:#x} code {code:#x}"),
        }
    }
}

/// One class of service's CAT masks in one cache domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CatClass {
    /// The class.
    pub class: ClassId,
    /// Its masks.
    pub mask: CatMask,
}

/// One class of service's bandwidth limit in one MBA domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MbaClass {
    /// The class.
    pub class: ClassId,
    /// Its limit.
    pub limit: MbaLimit,
}

/// A requested state of an on/off feature at reset (pqos `-R l3cdp-on`, `pqos_cdp_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AllocReset {
    /// L3 code/data prioritization.
    pub l3_cdp: FeatureSetting,
    /// L2 code/data prioritization.
    pub l2_cdp: FeatureSetting,
    /// The kernel's MBA software controller (`mba_MBps`); OS interface only.
    pub mba_ctrl: FeatureSetting,
}

/// What the error of every [`Backend`] offers code that is generic over the trait: the
/// shared [`RequestError`] inside it, when that is what it is (a CPU in another tool's
/// resctrl group, an unsupported event, out of RMIDs, ...), so the caller can tell these
/// cases from a failed write without knowing the backend.
pub trait BackendError: std::error::Error + Send + Sync + 'static + From<RequestError> {
    /// The [`RequestError`] this error is, if any.
    fn request(&self) -> Option<&RequestError>;
}

impl BackendError for RequestError {
    fn request(&self) -> Option<&RequestError> {
        Some(self)
    }
}

/// A batch start ([`Backend::start_monitoring_many`]) failed at one group; the groups the
/// batch had started are stopped again.
#[derive(Debug, thiserror::Error)]
#[error("monitoring group {} of {}: {error}", .index + 1, .of)]
pub struct GroupStartError<E> {
    /// The failed group's index in the request (0-based).
    pub index: usize,
    /// How many groups the request asked for.
    pub of: usize,
    /// Why it failed: the error starting that group alone would give, or a check of the
    /// whole batch (RMIDs, ABMC counters) that this group is the first to exceed. Errors
    /// of no one group (taking resctrl's lock, listing its groups) are given to group 0.
    pub error: E,
}

impl<E> GroupStartError<E> {
    /// The same failure with the error converted (a backend's error into a facade's).
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> GroupStartError<F> {
        GroupStartError {
            index: self.index,
            of: self.of,
            error: f(self.error),
        }
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

/// L3 I/O allocation as resctrl shows it ([`Backend::io_alloc`]): Linux 6.19's
/// `info/L3/io_alloc` and `info/L3/io_alloc_cbm`, on AMD parts with SDCIAE
/// (CPUID.(8000_0020H,0):EBX\[6\]). While it is enabled, the kernel keeps one CLOSID for the
/// L3 allocations of I/O devices, so one resctrl group fewer can exist.
///
/// # References
/// Linux `fs/resctrl/ctrlmondata.c` (`resctrl_io_alloc_show`, `resctrl_io_alloc_write`,
/// `resctrl_io_alloc_cbm_show`), `resctrl_io_alloc_closid()`;
/// `Documentation/filesystems/resctrl.rst` "io_alloc".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IoAlloc {
    /// `io_alloc` reads `enabled`.
    pub enabled: bool,
    /// The CLOSID io_alloc takes while enabled: the highest of L3, of its CDP half while CDP
    /// is on (`resctrl_io_alloc_closid()`: `num_closid - 1`, halved first under CDP). Never
    /// a class to hand out while `enabled` ([`crate::transaction::free_classes`]).
    pub class: ClassId,
    /// While enabled: the L3 mask of the I/O CLOSID per L3 domain (`io_alloc_cbm`,
    /// `0=ffff;1=ffff`); empty otherwise.
    pub masks: Vec<(CacheDomain, CacheBitmask)>,
}

/// The ways a resctrl group in `exclusive` mode holds in one cache domain
/// ([`Backend::exclusive_ways`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExclusiveWays {
    /// The group's path relative to the resctrl root.
    pub group: String,
    /// Its class of service, for `COS<n>` and named classes.
    pub class: Option<ClassId>,
    /// Its mask (data and code masks together with CDP on).
    pub bits: u64,
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
    /// The backend's error. Requests the platform or interface cannot carry out are
    /// [`RequestError`]s in it (the task methods' defaults return
    /// [`RequestError::NeedsOsInterface`] through it).
    type Error: BackendError;

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

    /// All classes' limits of the bandwidth resource `resource` (MBA or SMBA) in `domain`
    /// (an L3 id; the kernel's MBA and SMBA domains are L3 domains).
    ///
    /// # Errors
    /// When the resource is not supported or the registers/files cannot be read.
    fn bandwidth_classes(
        &mut self,
        resource: MbaResource,
        domain: CacheDomain,
    ) -> Result<Vec<MbaClass>, Self::Error>;

    /// [`Backend::bandwidth_classes`] of MBA.
    ///
    /// # Errors
    /// When MBA is not supported or the registers/files cannot be read.
    fn mba_classes(&mut self, domain: CacheDomain) -> Result<Vec<MbaClass>, Self::Error> {
        self.bandwidth_classes(MbaResource::Mba, domain)
    }

    /// [`Backend::cat_classes`] of several domains, in the order given: what a report of
    /// every domain (pqos `-s`) reads. The default asks domain by domain; resctrl reads
    /// each class's `schemata` once for all of them (one file per class where a domain at
    /// a time reads one per class and domain: 80 L2 domains on sapphire-rapids).
    ///
    /// # Errors
    /// As [`Backend::cat_classes`], for the first domain that fails.
    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, Self::Error> {
        domains
            .iter()
            .map(|&d| self.cat_classes(resource, d))
            .collect()
    }

    /// [`Backend::mba_classes`] of several domains, in the order given, as
    /// [`Backend::cat_classes_in`].
    ///
    /// # Errors
    /// As [`Backend::mba_classes`], for the first domain that fails.
    fn mba_classes_in(
        &mut self,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, Self::Error> {
        self.bandwidth_classes_in(MbaResource::Mba, domains)
    }

    /// [`Backend::bandwidth_classes`] of several domains, in the order given, as
    /// [`Backend::cat_classes_in`].
    ///
    /// # Errors
    /// As [`Backend::bandwidth_classes`], for the first domain that fails.
    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, Self::Error> {
        domains
            .iter()
            .map(|&d| self.bandwidth_classes(resource, d))
            .collect()
    }

    /// Sets limits of the bandwidth resource `resource` (MBA or SMBA) in `domain`; returns
    /// the limits the hardware applied (Intel rounds to the granularity).
    ///
    /// # Errors
    /// When the resource is not supported, a class or limit is invalid (nothing is written
    /// then) or a write fails.
    fn set_bandwidth_classes(
        &mut self,
        resource: MbaResource,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, Self::Error>;

    /// [`Backend::set_bandwidth_classes`] of MBA.
    ///
    /// # Errors
    /// As [`Backend::set_bandwidth_classes`].
    fn set_mba_classes(
        &mut self,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, Self::Error> {
        self.set_bandwidth_classes(MbaResource::Mba, domain, classes)
    }

    /// The class `cpu` is associated with.
    ///
    /// # Errors
    /// When the CPU is not online or its association cannot be read.
    fn class_of(&mut self, cpu: LogicalCpu) -> Result<ClassId, Self::Error>;

    /// L3 I/O allocation ([`IoAlloc`]), where the interface shows it: resctrl on Linux 6.19+
    /// with an io_alloc-capable L3. `None` elsewhere (the default; the MSR interface does
    /// not manage it, and a kernel that says `not supported` has none).
    ///
    /// # Errors
    /// A read fails or a file does not parse.
    fn io_alloc(&mut self) -> Result<Option<IoAlloc>, Self::Error> {
        Ok(None)
    }

    /// The cache ways of `resource` in `domain` that resctrl groups in `exclusive` mode hold
    /// (resctrl.rst "Resource Sharing"; the kernel refuses any other group's mask that
    /// overlaps them). Empty on the MSR interface, which has no modes.
    ///
    /// # Errors
    /// A read fails.
    fn exclusive_ways(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<ExclusiveWays>, Self::Error> {
        let _ = (resource, domain);
        Ok(Vec::new())
    }

    /// Every online CPU's class, ascending by CPU; `None` for a CPU in another tool's
    /// resctrl group ([`Backend::class_of`] says which). The default asks
    /// [`Backend::class_of`] CPU by CPU; resctrl reads each group's `cpus_list` once.
    ///
    /// # Errors
    /// A read fails.
    fn cpu_classes(&mut self) -> Result<Vec<(LogicalCpu, Option<ClassId>)>, Self::Error> {
        let cpus: Vec<LogicalCpu> = self.topology().cpus().iter().map(|c| c.cpu).collect();
        let mut out = Vec::with_capacity(cpus.len());
        for cpu in cpus {
            match self.class_of(cpu) {
                Ok(c) => out.push((cpu, Some(c))),
                Err(e) if matches!(e.request(), Some(RequestError::ForeignGroup { .. })) => {
                    out.push((cpu, None));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Puts `cpu` in `class`.
    ///
    /// # Errors
    /// When the CPU or class is invalid (nothing is written then) or the write fails.
    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), Self::Error>;

    /// Puts every CPU of `cpus` in `class`: what [`Backend::associate`] does for each, in as
    /// few writes as the interface allows. On resctrl that is one `cpus_list` write of the
    /// class's group for the whole set, all or nothing (the kernel's
    /// `rdtgroup_cpus_write` takes a list); on the MSR interface one IA32_PQR_ASSOC write
    /// per CPU, ascending, stopping at the first failure (the CPUs before it stay moved: a
    /// [`crate::transaction`] undoes them).
    ///
    /// # Errors
    /// As [`Backend::associate`] for any CPU of the set.
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), Self::Error> {
        for cpu in cpus.iter() {
            self.associate(cpu, class)?;
        }
        Ok(())
    }

    /// The RMID `cpu` is tagged with, where the interface exposes RMIDs (MSR); `None` on OS.
    ///
    /// # Errors
    /// When the CPU is not online or its association cannot be read.
    fn rmid_of(&mut self, cpu: LogicalCpu) -> Result<Option<Rmid>, Self::Error>;

    /// The class and RMID of `cpu` together ([`Backend::class_of`] and
    /// [`Backend::rmid_of`]): on the MSR interface one read of IA32_PQR_ASSOC (COS in bits
    /// 63:32, RMID in bits 9:0) where the two calls read it twice.
    ///
    /// # Errors
    /// As [`Backend::class_of`] (a CPU in another tool's resctrl group included) and
    /// [`Backend::rmid_of`].
    fn association(&mut self, cpu: LogicalCpu) -> Result<(ClassId, Option<Rmid>), Self::Error> {
        let class = self.class_of(cpu)?;
        Ok((class, self.rmid_of(cpu)?))
    }

    /// Every online CPU's [`Backend::association`], ascending by CPU, each with its own
    /// result (a CPU in another tool's resctrl group:
    /// [`RequestError::ForeignGroup`]). The default asks CPU by CPU; resctrl lists its
    /// groups and reads each `cpus_list` once for all CPUs.
    ///
    /// # Errors
    /// When what every CPU needs cannot be read (resctrl: the group list).
    #[allow(clippy::type_complexity)] // a list of per-CPU results
    fn associations(
        &mut self,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), Self::Error>)>, Self::Error> {
        let cpus: Vec<LogicalCpu> = self.topology().cpus().iter().map(|c| c.cpu).collect();
        Ok(cpus
            .into_iter()
            .map(|cpu| (cpu, self.association(cpu)))
            .collect())
    }

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

    /// Starts monitoring `events` on `cpus` as one group (one RMID per L3 domain spanned),
    /// and reads its MBM counters and PMU counts once, so that the first [`Backend::poll`]
    /// reports the traffic since the start over the time since the start
    /// ([`crate::monitor`], "Start and first poll"). Every start path does so.
    ///
    /// # Errors
    /// When a CPU is offline or already monitored, events are unsupported, no RMID is free,
    /// or the reading at start fails (the group is not started then).
    fn start_monitoring(
        &mut self,
        cpus: &CpuSet,
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error>;

    /// Starts several groups of CPUs at once, all or none: group `k` of the result is
    /// `groups[k]`. The default starts them one by one with [`Backend::start_monitoring`]
    /// and, when one fails, stops the groups this call started (newest first) before
    /// returning. The resctrl backend overrides it to list its groups once for the whole
    /// batch (starting N groups one by one lists every monitor group N times) and to check
    /// RMIDs and ABMC counters for all groups before it creates any.
    ///
    /// # Errors
    /// [`GroupStartError`]: which group failed (its index in `groups`) and the error
    /// [`Backend::start_monitoring`] gives for it; no group of the batch is left running.
    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<Self::Error>> {
        let mut started = Vec::with_capacity(groups.len());
        for (index, (cpus, events)) in groups.iter().enumerate() {
            match self.start_monitoring(cpus, *events) {
                Ok(id) => started.push(id),
                Err(error) => {
                    while let Some(id) = started.pop() {
                        let _ = self.stop_monitoring(id);
                    }
                    return Err(GroupStartError {
                        index,
                        of: groups.len(),
                        error,
                    });
                }
            }
        }
        Ok(started)
    }

    /// Starts monitoring the uncore `events` ([`MonEvents::UNCORE`]) of `sockets` as one
    /// group whose values are summed over the sockets ([`MonValues::uncore`]); polled and
    /// stopped like any group. Only the MSR interface has it (pqos `pqos_mon_start_uncore`,
    /// `lib/api.c`), on the CPUs [`Capabilities::uncore_pcie`] names.
    ///
    /// # Errors
    /// By default [`RequestError::NeedsMsrInterface`]; a backend that has it:
    /// [`RequestError::UnsupportedEvent`], [`RequestError::EmptyGroup`], a socket that does
    /// not exist, or a register write.
    fn start_uncore_monitoring(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let _ = (sockets, events);
        Err(RequestError::NeedsMsrInterface {
            operation: "uncore monitoring",
            interface: self.interface(),
        }
        .into())
    }

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
    /// [`RequestError::NeedsOsInterface`] on the MSR interface; no such task; the files cannot be read.
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, Self::Error> {
        let _ = task;
        Err(self.unsupported("task association").into())
    }

    /// Puts a task in `class`. A process id (a thread-group leader) moves every thread of
    /// the process, one `tasks` write each (pqos `pqos_alloc_assoc_set_pid`, resctrl takes
    /// one id per write); a thread id moves that thread only.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] on the MSR interface; no such task or class (nothing is written then);
    /// the kernel refused a write.
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), Self::Error> {
        let _ = (task, class);
        Err(self.unsupported("task association").into())
    }

    /// The tasks explicitly placed in `class` (its `tasks` file), ascending. For COS 0 (the
    /// root group) that is every task not in another group.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] on the MSR interface; the files cannot be read.
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, Self::Error> {
        let _ = class;
        Err(self.unsupported("task association").into())
    }

    /// Starts monitoring `events` on `tasks` as one group (a resctrl monitor group holding
    /// every thread of each named process). IPC and misses come from per-task PMU counts.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] on the MSR interface; no such task, a task already monitored, events
    /// unsupported, no RMID free.
    fn start_monitoring_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let _ = (tasks, events);
        Err(self.unsupported("PID monitoring").into())
    }

    /// Starts several groups of tasks at once, all or none, as
    /// [`Backend::start_monitoring_many`] does for CPUs: the default starts them one by
    /// one with [`Backend::start_monitoring_tasks`] and stops what it started when one
    /// fails; the resctrl backend reads every group's `tasks` once for the batch.
    ///
    /// # Errors
    /// [`GroupStartError`]: the failed group's index and the error
    /// [`Backend::start_monitoring_tasks`] gives for it; no group of the batch is left
    /// running.
    fn start_monitoring_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<Self::Error>> {
        let mut started = Vec::with_capacity(groups.len());
        for (index, (tasks, events)) in groups.iter().enumerate() {
            match self.start_monitoring_tasks(tasks, *events) {
                Ok(id) => started.push(id),
                Err(error) => {
                    while let Some(id) = started.pop() {
                        let _ = self.stop_monitoring(id);
                    }
                    return Err(GroupStartError {
                        index,
                        of: groups.len(),
                        error,
                    });
                }
            }
        }
        Ok(started)
    }

    /// The MBA software controller's state; `None` where it does not apply (the MSR
    /// interface: the controller is the kernel's).
    fn mba_ctrl(&self) -> Option<MbaCtrl> {
        None
    }

    /// How the MBA limits of a core's threads combine in L3 `domain` ([`ThreadThrottle`]);
    /// `None` without Intel MBA. The default follows CPUID: per thread on MBA 3.0, else
    /// the larger delay (the kernel's `thread_throttle_mode`); the MSR backend reads
    /// IA32_MBA_CFG bit 0 where MBA 2.0 has it.
    ///
    /// # Errors
    /// A register read fails.
    fn mba_thread_throttle(
        &mut self,
        domain: CacheDomain,
    ) -> Result<Option<ThreadThrottle>, Self::Error> {
        let _ = domain;
        Ok(self
            .capabilities()
            .mba
            .get()
            .and_then(crate::MbaCaps::thread_throttle))
    }

    /// What resctrl shows about memory bandwidth monitoring beyond the capabilities:
    /// assignable counters (ABMC), each MBM event's configuration (BMEC or `event_filter`),
    /// the SNC nodes per L3 ([`crate::mbm`]); read now, so available counters are current.
    /// `None` on the MSR interface.
    ///
    /// # Errors
    /// When the resctrl files cannot be read.
    fn mbm_details(&mut self) -> Result<Option<crate::MbmDetails>, Self::Error> {
        Ok(None)
    }

    /// Switches resctrl's MBM counter assignment mode (AMD ABMC, Linux 6.18+:
    /// `info/L3_MON/mbm_assign_mode`): in [`crate::AssignMode::MbmEvent`] a group's MBM
    /// events count only where a hardware counter is assigned to them, in
    /// [`crate::AssignMode::Default`] every RMID counts. The kernel frees every assignment
    /// and resets every MBM count on a switch (`resctrl_mbm_assign_mode_write`); setting the
    /// current mode changes nothing.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] on the MSR interface; [`RequestError::Unsupported`]
    /// where resctrl does not offer the mode; the kernel's refusal.
    fn set_mbm_assign_mode(&mut self, mode: crate::AssignMode) -> Result<(), Self::Error> {
        let _ = mode;
        Err(self.unsupported("MBM counter assignment").into())
    }

    /// Enables or disables L3 I/O allocation (AMD SDCIAE, Linux 6.19+: `info/L3/io_alloc`):
    /// enabled, I/O devices allocate into the L3 with the masks of the highest CLOSID
    /// (`io_alloc_cbm`), which then belongs to no class ([`Backend::io_alloc`]); the kernel
    /// refuses while a group holds that CLOSID (`resctrl_io_alloc_write`).
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] on the MSR interface; [`RequestError::Unsupported`]
    /// where resctrl has no `io_alloc`; the kernel's refusal (its `last_cmd_status`).
    fn set_io_alloc(&mut self, enabled: bool) -> Result<(), Self::Error> {
        let _ = enabled;
        Err(self.unsupported("L3 I/O allocation").into())
    }

    /// Sets the memory transactions `event` counts (a [`crate::mbm::MBM_TRANSACTIONS`]
    /// bitmask) in every L3 domain: AMD BMEC's `mbm_*_bytes_config`, or the `event_filter`
    /// while ABMC's `mbm_event` mode hides those files. Changing it resets the event's
    /// counters.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] on the MSR interface;
    /// [`RequestError::Unsupported`] where resctrl has neither file; the kernel's refusal.
    fn set_mbm_event_config(
        &mut self,
        event: crate::RmidEvent,
        bits: u32,
    ) -> Result<(), Self::Error> {
        let _ = (event, bits);
        Err(self.unsupported("MBM event configuration").into())
    }

    /// Every resctrl group present, ours and other tools', root excluded; empty on the MSR
    /// interface (which has no groups).
    ///
    /// # Errors
    /// When the resctrl tree cannot be read.
    fn groups(&mut self) -> Result<Vec<GroupInfo>, Self::Error> {
        Ok(Vec::new())
    }

    /// The directory where this backend keeps what must outlive the process: RMID claims,
    /// the journal of a transaction in progress ([`crate::transaction`]), the MSR writers'
    /// lock. A root-only directory under `/run` on a host (`/run/rdt`); `None` for a
    /// backend without one (then a transaction killed half-way cannot be rolled back by the
    /// next process).
    fn run_dir(&self) -> Option<&std::path::Path> {
        None
    }

    /// Takes the interface's writers' lock (the `flock` on the resctrl root, `LOCK_EX`;
    /// `<run dir>/msr.lock` on the MSR interface) and holds it until as many
    /// [`Backend::release_writers`] calls; calls in between do not take it again. A
    /// transaction holds it from reading the state to its last write, so that two
    /// processes' changes serialize.
    ///
    /// # Errors
    /// Another process kept the lock for longer than the backend's lock timeout, or the
    /// lock file cannot be opened.
    fn hold_writers(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Gives back one [`Backend::hold_writers`]; the lock goes with the last.
    fn release_writers(&mut self) {}

    /// Makes the writes made so far outlast this process where the platform keeps them
    /// apart from the writes themselves: the simulated platform of `pqos --sim` saves its
    /// state file. Registers and resctrl files hold a write once it returned, so on the
    /// hardware (and by default) this does nothing. A program reports a change as done
    /// only after this returned `Ok`.
    ///
    /// # Errors
    /// The writes could not be kept (the simulated platform's state file cannot be
    /// written); they are lost when the process ends.
    fn commit(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Why allocation can only be reset, if it can (CDP on in some cache domains and off in
    /// others on the MSR interface, after a reset was killed half-way): then reads work,
    /// writes of masks are refused, and [`Backend::reset_allocation`] with CDP set on or off
    /// repairs it.
    fn needs_reset(&self) -> Option<String> {
        None
    }

    /// Treats the resctrl groups of `classes` as made by this process (OS interface; a
    /// no-op on MSR): a group of them brought back to the defaults with no CPU, task or
    /// monitor group in it is removed, as one this process created is. Rolling back a
    /// killed transaction uses it for the groups that transaction created.
    fn own_classes(&mut self, classes: &[ClassId]) {
        let _ = classes;
    }

    /// The class of service that stands for the named class `name` (a declarative
    /// configuration's class, `rdt_config`): on the OS interface the resctrl control
    /// group of that name, on the MSR interface the COS recorded for the name in the run
    /// directory, else the lowest free one ([`crate::transaction::free_classes`]). A new name
    /// is bound in this process only: a plan that writes to the class claims it
    /// ([`crate::transaction::Step::Claim`]), and applied, records it, so that the same
    /// name gives the same class for as long as the platform runs (until a reset or a
    /// release gives it up).
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] for a backend without named classes; a name that
    /// cannot be a group; no class left.
    fn class_named(&mut self, name: &str) -> Result<ClassId, Self::Error> {
        let _ = name;
        Err(self.unsupported("named classes").into())
    }

    /// Makes `class` stand for the named class `name` in this process (a configuration's
    /// fixed `cos`, or a journal's record replayed by `rdt_host::transaction::recover`);
    /// nothing is recorded ([`Backend::claim_class`] does that).
    ///
    /// # Errors
    /// As [`Backend::class_named`].
    fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), Self::Error> {
        let _ = (class, name);
        Err(self.unsupported("named classes").into())
    }

    /// The named classes this backend knows, by class: those of [`Backend::own_class_names`]
    /// and the names given to [`Backend::class_named`] or [`Backend::bind_class`] in this
    /// process (on the OS interface also another tool's group a configuration named).
    fn class_names(&self) -> Vec<(ClassId, String)> {
        Vec::new()
    }

    /// The named classes this library made and has not given up, by class: on the MSR
    /// interface every name recorded in the run directory (`msr-classes`), on the OS
    /// interface the resctrl groups of named classes it created (recorded in `os-classes`,
    /// `rdt_host::runfile::NameRecord`) that still exist. Never another tool's group of the
    /// same name. `pqos -s` lists them, and a reset ([`crate::transaction::Change::Reset`])
    /// or `rdt_config::Config::remove` gives them up.
    fn own_class_names(&self) -> Vec<(ClassId, String)> {
        Vec::new()
    }

    /// Makes `class` stand for the named class `name` as this library's own (the write of
    /// [`crate::transaction::Step::Claim`]): on the MSR interface the name is recorded in
    /// the run directory; on the OS interface the name is bound, and with `make_group` its
    /// resctrl group is made (and recorded) when it does not exist, as undoing a release
    /// needs; otherwise the group is made, and recorded, by the first write to the class.
    /// Without a run directory the record is this process's only.
    ///
    /// # Errors
    /// As [`Backend::bind_class`]; the record cannot be written; the group cannot be made.
    fn claim_class(
        &mut self,
        class: ClassId,
        name: &str,
        make_group: bool,
    ) -> Result<(), Self::Error> {
        let _ = make_group;
        self.bind_class(class, name)
    }

    /// Gives up the named class `name`, which stands for `class` (the write of
    /// [`crate::transaction::Step::Release`]): on the MSR interface its record goes; on the
    /// OS interface its resctrl group is removed when this library created it (it must hold
    /// no CPU, task or monitor group by then) and its record goes, while another tool's group
    /// of that name is left as it is. Either way the name no longer stands for `class`.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] for a backend without named classes; the group
    /// still holds CPUs, tasks or monitor groups ([`RequestError::Unsupported`]); the record
    /// cannot be written; the `rmdir` fails.
    fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), Self::Error> {
        let _ = (class, name);
        Err(self.unsupported("named classes").into())
    }

    /// A [`Monitoring`] guard on this backend: groups started through it are stopped when
    /// it is dropped.
    fn monitoring(&mut self) -> Monitoring<'_, Self>
    where
        Self: Sized,
    {
        Monitoring::new(self)
    }

    /// The [`RequestError::NeedsOsInterface`] error for `operation` on this backend's
    /// interface.
    fn unsupported(&self, operation: &'static str) -> RequestError {
        RequestError::NeedsOsInterface {
            operation,
            interface: self.interface(),
        }
    }
}

/// Monitoring groups that cannot outlive their owner: every group started through the
/// guard is stopped when the guard is dropped (its RMIDs given back on the MSR interface, its
/// `pqos-<pid>-<n>` monitor groups removed on resctrl), on an early return, a `?` or a
/// panic alike. [`Monitoring::finish`] stops them and reports the first error; dropping
/// ignores errors (there is no one left to tell).
///
/// The guard borrows the backend mutably; [`Monitoring::backend`] gives it back for reads
/// (capabilities, topology) while the guard lives.
///
/// # Examples
/// ```
/// use rdt_core::fake::FakeBackend;
/// use rdt_core::{Backend, MonEvents};
///
/// let mut b = FakeBackend::broadwell_2s();
/// {
///     let mut mon = b.monitoring();
///     let g = mon.start(&"0-3".parse()?, MonEvents::LLC_OCCUPANCY)?;
///     mon.poll()?;
///     println!("{:?} bytes", mon.values(g).and_then(|v| v.llc_occupancy_bytes));
/// } // stopped here
/// assert_eq!(b.running_groups(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Monitoring<'a, B: Backend> {
    backend: &'a mut B,
    groups: Vec<MonGroupId>,
}

impl<'a, B: Backend> Monitoring<'a, B> {
    /// A guard with no group yet.
    pub fn new(backend: &'a mut B) -> Self {
        Self {
            backend,
            groups: Vec::new(),
        }
    }

    /// Starts a group of CPUs ([`Backend::start_monitoring`]) owned by the guard.
    ///
    /// # Errors
    /// As [`Backend::start_monitoring`].
    pub fn start(&mut self, cpus: &CpuSet, events: MonEvents) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_monitoring(cpus, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Starts several groups of CPUs at once ([`Backend::start_monitoring_many`]), owned
    /// by the guard; the ids are in the order of `groups`.
    ///
    /// # Errors
    /// As [`Backend::start_monitoring_many`]: no group of the batch is left running.
    pub fn start_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<B::Error>> {
        let ids = self.backend.start_monitoring_many(groups)?;
        self.groups.extend_from_slice(&ids);
        Ok(ids)
    }

    /// Starts a group of tasks ([`Backend::start_monitoring_tasks`]) owned by the guard.
    ///
    /// # Errors
    /// As [`Backend::start_monitoring_tasks`].
    pub fn start_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_monitoring_tasks(tasks, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Starts several groups of tasks at once ([`Backend::start_monitoring_tasks_many`]),
    /// owned by the guard; the ids are in the order of `groups`.
    ///
    /// # Errors
    /// As [`Backend::start_monitoring_tasks_many`]: no group of the batch is left running.
    pub fn start_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<B::Error>> {
        let ids = self.backend.start_monitoring_tasks_many(groups)?;
        self.groups.extend_from_slice(&ids);
        Ok(ids)
    }

    /// Starts an uncore group of sockets ([`Backend::start_uncore_monitoring`]) owned by the
    /// guard.
    ///
    /// # Errors
    /// As [`Backend::start_uncore_monitoring`].
    ///
    /// # Examples
    /// ```
    /// use rdt_core::fake::FakeBackend;
    /// use rdt_core::{Backend, MonEvents};
    ///
    /// let mut b = FakeBackend::broadwell_2s();
    /// b.reconfigure(|c| c.uncore_pcie = true); // as on a Skylake-SP
    /// let mut mon = b.monitoring();
    /// let g = mon.start_uncore(&[0, 1], MonEvents::UNCORE)?;
    /// mon.poll()?;
    /// let pcie = mon.values(g).and_then(|v| v.uncore).unwrap();
    /// assert_eq!(pcie.llc_miss_pcie_read, Some(1000 * (1 + 2)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_uncore(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_uncore_monitoring(sockets, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Polls every group ([`Backend::poll`]).
    ///
    /// # Errors
    /// As [`Backend::poll`].
    pub fn poll(&mut self) -> Result<(), B::Error> {
        self.backend.poll()
    }

    /// The values of `group` from the last poll.
    #[must_use]
    pub fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.backend.values(group)
    }

    /// The groups the guard holds, in start order.
    #[must_use]
    pub fn groups(&self) -> &[MonGroupId] {
        &self.groups
    }

    /// The backend, for reads while the guard lives.
    #[must_use]
    pub fn backend(&self) -> &B {
        self.backend
    }

    /// Stops one group of the guard now.
    ///
    /// # Errors
    /// [`RequestError::NoSuchGroup`] for a group the guard does not hold; as
    /// [`Backend::stop_monitoring`] (the group is released by the guard either way).
    pub fn stop(&mut self, group: MonGroupId) -> Result<(), B::Error> {
        let Some(i) = self.groups.iter().position(|g| *g == group) else {
            return Err(RequestError::NoSuchGroup(group).into());
        };
        self.groups.remove(i);
        self.backend.stop_monitoring(group)
    }

    /// Stops every group still held, newest first, and reports the first error (every
    /// group is attempted).
    ///
    /// # Errors
    /// The first [`Backend::stop_monitoring`] error.
    pub fn finish(mut self) -> Result<(), B::Error> {
        self.stop_all()
    }

    fn stop_all(&mut self) -> Result<(), B::Error> {
        let mut first = Ok(());
        while let Some(g) = self.groups.pop() {
            if let Err(e) = self.backend.stop_monitoring(g)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

impl<B: Backend> Drop for Monitoring<'_, B> {
    fn drop(&mut self) {
        let _ = self.stop_all();
    }
}

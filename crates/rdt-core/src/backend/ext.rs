//! [`BackendExt`]: what every program asks of a [`Backend`] in the shape it asks it (one
//! domain, one CPU, one group; the interface-specific calls with the error that says which
//! interface has them), implemented once for every backend.

use std::path::Path;

use crate::{
    AssignMode, CacheDomain, CatResource, ClassId, CpuSet, LogicalCpu, MbaResource, MbmDetails,
    MonEvents, MonGroupId, RequestError, Rmid, RmidEvent, TaskId, ThreadThrottle,
};

use super::{
    AllocReset, Backend, BackendError, CatClass, ExclusiveWays, GroupInfo, GroupStartError,
    IoAlloc, MbaClass, MbaCtrl, Monitoring, NamedClasses, OsOps, Reset, Writers,
};

/// The conveniences of every [`Backend`]: implemented for all of them here, never
/// overridden or forwarded. The calls of one interface go through its accessor
/// ([`Backend::os`], [`Backend::msr`], [`Backend::names`], [`Backend::writers`]) and return
/// [`RequestError::NeedsOsInterface`] (or [`RequestError::NeedsMsrInterface`]) where it is
/// `None`, or the neutral answer where there is one (no groups, no io_alloc, no lock).
pub trait BackendExt: Backend {
    /// The masks of every usable class of `resource` in `domain`, by class
    /// ([`Backend::cat_classes_in`] of one domain).
    ///
    /// # Errors
    /// As [`Backend::cat_classes_in`].
    fn cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, Self::Error> {
        Ok(self
            .cat_classes_in(resource, &[domain])?
            .pop()
            .unwrap_or_default())
    }

    /// Sets the masks of `classes` of `resource` in `domain` ([`Backend::set_cat_masks`]).
    ///
    /// # Errors
    /// As [`Backend::set_cat_masks`].
    fn set_cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
        classes: &[CatClass],
    ) -> Result<(), Self::Error> {
        let masks: Vec<_> = classes.iter().map(|&c| (domain, c)).collect();
        self.set_cat_masks(resource, &masks)
    }

    /// Every class's limit of `resource` in `domain` ([`Backend::bandwidth_classes_in`] of
    /// one domain).
    ///
    /// # Errors
    /// As [`Backend::bandwidth_classes_in`].
    fn bandwidth_classes(
        &mut self,
        resource: MbaResource,
        domain: CacheDomain,
    ) -> Result<Vec<MbaClass>, Self::Error> {
        Ok(self
            .bandwidth_classes_in(resource, &[domain])?
            .pop()
            .unwrap_or_default())
    }

    /// Sets the limits of `classes` of `resource` in `domain`; returns what the hardware
    /// applied ([`Backend::set_bandwidth_limits`]).
    ///
    /// # Errors
    /// As [`Backend::set_bandwidth_limits`].
    fn set_bandwidth_classes(
        &mut self,
        resource: MbaResource,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, Self::Error> {
        let limits: Vec<_> = classes.iter().map(|&c| (domain, c)).collect();
        Ok(self
            .set_bandwidth_limits(resource, &limits)?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// [`BackendExt::bandwidth_classes`] of MBA.
    ///
    /// # Errors
    /// As [`Backend::bandwidth_classes_in`].
    fn mba_classes(&mut self, domain: CacheDomain) -> Result<Vec<MbaClass>, Self::Error> {
        self.bandwidth_classes(MbaResource::Mba, domain)
    }

    /// [`Backend::bandwidth_classes_in`] of MBA.
    ///
    /// # Errors
    /// As [`Backend::bandwidth_classes_in`].
    fn mba_classes_in(
        &mut self,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, Self::Error> {
        self.bandwidth_classes_in(MbaResource::Mba, domains)
    }

    /// [`BackendExt::set_bandwidth_classes`] of MBA.
    ///
    /// # Errors
    /// As [`Backend::set_bandwidth_limits`].
    fn set_mba_classes(
        &mut self,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, Self::Error> {
        self.set_bandwidth_classes(MbaResource::Mba, domain, classes)
    }

    /// The class and RMID of `cpu` ([`Backend::associations_in`] of one CPU).
    ///
    /// # Errors
    /// As [`Backend::associations_in`], and the CPU's own error (a CPU in another tool's
    /// resctrl group: [`RequestError::ForeignGroup`]).
    fn association(&mut self, cpu: LogicalCpu) -> Result<(ClassId, Option<Rmid>), Self::Error> {
        let mut one = self.associations_in(&CpuSet::from_iter([cpu]))?;
        match one.pop() {
            Some((_, r)) => r,
            None => Err(RequestError::NoSuchCpu(cpu).into()),
        }
    }

    /// The class `cpu` is associated with.
    ///
    /// # Errors
    /// As [`BackendExt::association`].
    fn class_of(&mut self, cpu: LogicalCpu) -> Result<ClassId, Self::Error> {
        Ok(self.association(cpu)?.0)
    }

    /// The RMID `cpu` is tagged with, where the interface exposes RMIDs (MSR); `None` on OS.
    ///
    /// # Errors
    /// As [`BackendExt::association`].
    fn rmid_of(&mut self, cpu: LogicalCpu) -> Result<Option<Rmid>, Self::Error> {
        Ok(self.association(cpu)?.1)
    }

    /// Every online CPU's class and RMID ([`Backend::associations_in`] of the topology's
    /// CPUs), ascending by CPU, each with its own result.
    ///
    /// # Errors
    /// As [`Backend::associations_in`].
    #[allow(clippy::type_complexity)] // a list of per-CPU results
    fn associations(
        &mut self,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), Self::Error>)>, Self::Error> {
        let cpus: CpuSet = self.topology().cpus().iter().map(|c| c.cpu).collect();
        self.associations_in(&cpus)
    }

    /// Every online CPU's class, ascending by CPU; `None` for a CPU in another tool's
    /// resctrl group.
    ///
    /// # Errors
    /// As [`Backend::associations_in`]; a CPU's error other than
    /// [`RequestError::ForeignGroup`].
    fn cpu_classes(&mut self) -> Result<Vec<(LogicalCpu, Option<ClassId>)>, Self::Error> {
        let mut out = Vec::new();
        for (cpu, r) in self.associations()? {
            match r {
                Ok((class, _)) => out.push((cpu, Some(class))),
                Err(e) if matches!(e.request(), Some(RequestError::ForeignGroup { .. })) => {
                    out.push((cpu, None));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Puts `cpu` in `class` ([`Backend::associate_cpus`] of one CPU).
    ///
    /// # Errors
    /// As [`Backend::associate_cpus`].
    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), Self::Error> {
        self.associate_cpus(&CpuSet::from_iter([cpu]), class)
    }

    /// [`Backend::reset`] of allocation (pqos `-R`).
    ///
    /// # Errors
    /// As [`Backend::reset`].
    fn reset_allocation(&mut self, cfg: &AllocReset) -> Result<(), Self::Error> {
        self.reset(&Reset::Allocation(*cfg))
    }

    /// [`Backend::reset`] of monitoring (pqos `-r`).
    ///
    /// # Errors
    /// As [`Backend::reset`].
    fn reset_monitoring(&mut self) -> Result<(), Self::Error> {
        self.reset(&Reset::Monitoring(crate::MonReset::default()))
    }

    /// [`Backend::reset`] of monitoring (pqos `-r CFG`) with what else `cfg` sets (I/O RDT
    /// monitoring, the SNC mode).
    ///
    /// # Errors
    /// As [`Backend::reset`]; a `cfg` the platform cannot do is refused before any write
    /// ([`Capabilities::check_mon_reset`](crate::Capabilities::check_mon_reset)).
    fn reset_monitoring_with(&mut self, cfg: &crate::MonReset) -> Result<(), Self::Error> {
        self.reset(&Reset::Monitoring(*cfg))
    }

    /// Starts monitoring `events` on `cpus` as one group ([`Backend::start_monitoring_many`]
    /// of one group).
    ///
    /// # Errors
    /// As [`Backend::start_monitoring_many`], the failed group's error.
    fn start_monitoring(
        &mut self,
        cpus: &CpuSet,
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let mut ids = self
            .start_monitoring_many(&[(cpus.clone(), events)])
            .map_err(|e| e.error)?;
        Ok(ids.remove(0))
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

    /// [`Backend::os`], or [`RequestError::NeedsOsInterface`] for `operation`.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] where the backend has no [`OsOps`].
    fn os_or(
        &mut self,
        operation: &'static str,
    ) -> Result<&mut dyn OsOps<Self::Error>, Self::Error> {
        let interface = self.interface();
        self.os().ok_or_else(|| {
            RequestError::NeedsOsInterface {
                operation,
                interface,
            }
            .into()
        })
    }

    /// [`Backend::names`], or [`RequestError::NeedsOsInterface`] ("named classes").
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] where the backend has no [`NamedClasses`].
    fn names_or(&mut self) -> Result<&mut dyn NamedClasses<Self::Error>, Self::Error> {
        let interface = self.interface();
        self.names().ok_or_else(|| {
            RequestError::NeedsOsInterface {
                operation: "named classes",
                interface,
            }
            .into()
        })
    }

    /// [`OsOps::class_of_task`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`OsOps`]; as [`OsOps::class_of_task`].
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, Self::Error> {
        self.os_or("task association")?.class_of_task(task)
    }

    /// [`OsOps::associate_task`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`OsOps`]; as [`OsOps::associate_task`].
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), Self::Error> {
        self.os_or("task association")?.associate_task(task, class)
    }

    /// [`OsOps::tasks_of_class`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`OsOps`]; as [`OsOps::tasks_of_class`].
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, Self::Error> {
        self.os_or("task association")?.tasks_of_class(class)
    }

    /// Starts monitoring `events` on `tasks` as one group
    /// ([`OsOps::start_monitoring_tasks_many`] of one group).
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`OsOps`]; the failed group's error.
    fn start_monitoring_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let mut ids = self
            .start_monitoring_tasks_many(&[(tasks.to_vec(), events)])
            .map_err(|e| e.error)?;
        Ok(ids.remove(0))
    }

    /// [`OsOps::start_monitoring_tasks_many`]; an empty batch starts nothing on any
    /// backend.
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] (for group 0) without [`OsOps`]; as
    /// [`OsOps::start_monitoring_tasks_many`].
    fn start_monitoring_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<Self::Error>> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        match self.os_or("PID monitoring") {
            Ok(os) => os.start_monitoring_tasks_many(groups),
            Err(error) => Err(GroupStartError {
                index: 0,
                of: groups.len(),
                error,
            }),
        }
    }

    /// [`OsOps::groups`]; empty without [`OsOps`] (the MSR interface has no groups).
    ///
    /// # Errors
    /// As [`OsOps::groups`].
    fn groups(&mut self) -> Result<Vec<GroupInfo>, Self::Error> {
        self.os().map_or_else(|| Ok(Vec::new()), OsOps::groups)
    }

    /// [`OsOps::mba_ctrl`]; `None` without [`OsOps`] (on the MSR interface the controller
    /// is the kernel's).
    fn mba_ctrl(&mut self) -> Option<MbaCtrl> {
        self.os().and_then(|os| os.mba_ctrl())
    }

    /// [`OsOps::mbm_details`]; `None` without [`OsOps`].
    ///
    /// # Errors
    /// As [`OsOps::mbm_details`].
    fn mbm_details(&mut self) -> Result<Option<MbmDetails>, Self::Error> {
        self.os().map_or(Ok(None), OsOps::mbm_details)
    }

    /// [`OsOps::set_mbm_assign_mode`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`OsOps`]; as
    /// [`OsOps::set_mbm_assign_mode`].
    fn set_mbm_assign_mode(&mut self, mode: AssignMode) -> Result<(), Self::Error> {
        self.os_or("MBM counter assignment")?
            .set_mbm_assign_mode(mode)
    }

    /// [`OsOps::io_alloc`]; `None` without [`OsOps`] (the MSR interface does not manage it).
    ///
    /// # Errors
    /// As [`OsOps::io_alloc`].
    fn io_alloc(&mut self) -> Result<Option<IoAlloc>, Self::Error> {
        self.os().map_or(Ok(None), OsOps::io_alloc)
    }

    /// [`OsOps::set_io_alloc`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`OsOps`]; as [`OsOps::set_io_alloc`].
    fn set_io_alloc(&mut self, enabled: bool) -> Result<(), Self::Error> {
        self.os_or("L3 I/O allocation")?.set_io_alloc(enabled)
    }

    /// [`OsOps::set_mbm_event_config`], or on the MSR interface
    /// [`MsrOps::set_mbm_event_config`](super::MsrOps::set_mbm_event_config).
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] with neither; as the interface's method.
    fn set_mbm_event_config(&mut self, event: RmidEvent, bits: u32) -> Result<(), Self::Error> {
        if let Some(msr) = self.msr() {
            return msr.set_mbm_event_config(event, bits);
        }
        self.os_or("MBM event configuration")?
            .set_mbm_event_config(event, bits)
    }

    /// [`OsOps::exclusive_ways`]; empty without [`OsOps`] (the MSR interface has no modes).
    ///
    /// # Errors
    /// As [`OsOps::exclusive_ways`].
    fn exclusive_ways(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<ExclusiveWays>, Self::Error> {
        self.os()
            .map_or_else(|| Ok(Vec::new()), |os| os.exclusive_ways(resource, domain))
    }

    /// [`OsOps::own_classes`]; nothing without [`OsOps`].
    fn own_classes(&mut self, classes: &[ClassId]) {
        if let Some(os) = self.os() {
            os.own_classes(classes);
        }
    }

    /// [`MsrOps::start_uncore_monitoring`](crate::MsrOps::start_uncore_monitoring).
    ///
    /// # Errors
    /// [`RequestError::NeedsMsrInterface`] without [`MsrOps`](crate::MsrOps); as
    /// [`MsrOps::start_uncore_monitoring`](crate::MsrOps::start_uncore_monitoring).
    fn start_uncore_monitoring(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let interface = self.interface();
        match self.msr() {
            Some(msr) => msr.start_uncore_monitoring(sockets, events),
            None => Err(RequestError::NeedsMsrInterface {
                operation: "uncore monitoring",
                interface,
            }
            .into()),
        }
    }

    /// How the MBA limits of a core's threads combine in L3 `domain`: [`MsrOps`](crate::MsrOps)'s
    /// registers where the backend reads them, else CPUID (per thread on MBA 3.0, else the
    /// larger delay: the kernel's `thread_throttle_mode`); `None` without Intel MBA.
    ///
    /// # Errors
    /// As [`MsrOps::mba_thread_throttle`](crate::MsrOps::mba_thread_throttle).
    fn mba_thread_throttle(
        &mut self,
        domain: CacheDomain,
    ) -> Result<Option<ThreadThrottle>, Self::Error> {
        if let Some(msr) = self.msr() {
            return msr.mba_thread_throttle(domain);
        }
        Ok(self
            .capabilities()
            .mba
            .get()
            .and_then(crate::MbaCaps::thread_throttle))
    }

    /// [`MsrOps::needs_reset`](crate::MsrOps::needs_reset); `None` without [`MsrOps`](crate::MsrOps).
    fn needs_reset(&mut self) -> Option<String> {
        self.msr().and_then(|msr| msr.needs_reset())
    }

    /// [`NamedClasses::class_named`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`NamedClasses`]; as
    /// [`NamedClasses::class_named`].
    fn class_named(&mut self, name: &str) -> Result<ClassId, Self::Error> {
        self.names_or()?.class_named(name)
    }

    /// [`NamedClasses::bind_class`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`NamedClasses`]; as
    /// [`NamedClasses::bind_class`].
    fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), Self::Error> {
        self.names_or()?.bind_class(class, name)
    }

    /// [`NamedClasses::class_names`]; empty without [`NamedClasses`].
    fn class_names(&mut self) -> Vec<(ClassId, String)> {
        self.names().map(|n| n.class_names()).unwrap_or_default()
    }

    /// [`NamedClasses::own_class_names`]; empty without [`NamedClasses`].
    fn own_class_names(&mut self) -> Vec<(ClassId, String)> {
        self.names()
            .map(|n| n.own_class_names())
            .unwrap_or_default()
    }

    /// [`NamedClasses::claim_class`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`NamedClasses`]; as
    /// [`NamedClasses::claim_class`].
    fn claim_class(
        &mut self,
        class: ClassId,
        name: &str,
        make_group: bool,
    ) -> Result<(), Self::Error> {
        self.names_or()?.claim_class(class, name, make_group)
    }

    /// [`NamedClasses::release_class`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`NamedClasses`]; as
    /// [`NamedClasses::release_class`].
    fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), Self::Error> {
        self.names_or()?.release_class(class, name)
    }

    /// [`NamedClasses::adopt_class`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`NamedClasses`]; as
    /// [`NamedClasses::adopt_class`].
    fn adopt_class(&mut self, class: ClassId, name: &str) -> Result<(), Self::Error> {
        self.names_or()?.adopt_class(class, name)
    }

    /// [`NamedClasses::disown_class`].
    ///
    /// # Errors
    /// [`RequestError::NeedsOsInterface`] without [`NamedClasses`]; as
    /// [`NamedClasses::disown_class`].
    fn disown_class(&mut self, class: ClassId, name: &str) -> Result<(), Self::Error> {
        self.names_or()?.disown_class(class, name)
    }

    /// [`Writers::run_dir`]; `None` without [`Writers`].
    fn run_dir(&mut self) -> Option<&Path> {
        self.writers().and_then(|w| w.run_dir())
    }

    /// [`Writers::hold_writers`]; nothing to hold without [`Writers`].
    ///
    /// # Errors
    /// As [`Writers::hold_writers`].
    fn hold_writers(&mut self) -> Result<(), Self::Error> {
        self.writers().map_or(Ok(()), Writers::hold_writers)
    }

    /// [`Writers::release_writers`]; nothing without [`Writers`].
    fn release_writers(&mut self) {
        if let Some(w) = self.writers() {
            w.release_writers();
        }
    }
}

impl<B: Backend + ?Sized> BackendExt for B {}

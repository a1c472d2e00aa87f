//! A configuration against a platform: classes of service for the names, masks placed
//! around the ways other classes hold, and the transaction that makes it so
//! ([`Config::plan`]).

use std::collections::BTreeSet;

use super::error::Location;
use super::{ClassSpec, Config, ConfigError, ConfigErrorKind, ConfigWarning, RegionSpec};
use rdt_core::BackendExt;
use rdt_core::transaction::{Change, MaskScope, Plan, PlanError, PlanWarning, Step};
use rdt_core::{
    Backend, BwControl, CacheDomain, CatResource, ClassId, Interface, LogicalCpu, MbaResource,
    MemRegion, RegionBw, RequestError, TaskId,
};
use rdt_host::proc::ProcFs;

/// The key of a bandwidth resource in the file: `mba` or `smba`.
const fn resource_key(resource: MbaResource) -> &'static str {
    match resource {
        MbaResource::Mba => "mba",
        MbaResource::Smba => "smba",
    }
}

/// The changes that take away the named class `name`, which stands for `class`: every
/// mask back to all ways (data and code masks with CDP on), every MBA and SMBA limit back
/// to "no limit", every region MBA control back to the control window (a backend with
/// [`Backend::regions`]), its CPUs (of `cpus`, each CPU's class now) and, on the OS interface, its
/// tasks back to COS 0, then the name given up ([`Change::Release`]). Each change comes
/// with the key of the file it undoes (`l3`, `mba`, `regions`, `cpus`, `tasks`, `name`).
///
/// # Errors
/// The class's tasks cannot be read.
pub(crate) fn removal_changes<B: Backend>(
    backend: &mut B,
    class: ClassId,
    name: &str,
    cpus: &[(LogicalCpu, Option<ClassId>)],
) -> Result<Vec<(Change, &'static str)>, B::Error> {
    let mut out = Vec::new();
    let caps = backend.capabilities();
    for resource in [CatResource::L3, CatResource::L2] {
        let domains = match resource {
            CatResource::L3 => backend.topology().l3_domains(),
            CatResource::L2 => backend.topology().l2_domains(),
        };
        for domain in domains {
            if let Some(c) = Change::cat_default(caps, resource, domain, class) {
                out.push((c, ClassSpec::cache_key(resource)));
            }
        }
    }
    for resource in MbaResource::ALL {
        for domain in backend.topology().l3_domains() {
            if let Some(c) = Change::bandwidth_default(caps, resource, domain, class) {
                out.push((c, resource_key(resource)));
            }
        }
    }
    // region MBA (the MMIO interface): every control of every region back to the window
    if let Some(r) = backend.regions()
        && class.get() < r.region_classes()
    {
        let window = r.bw_window();
        let regions: Vec<_> = r.memory_regions().iter().map(|i| i.region).collect();
        for domain in backend.topology().l3_domains() {
            for &region in &regions {
                for control in BwControl::ALL {
                    let bw = RegionBw {
                        region,
                        control,
                        value: window,
                    };
                    out.push((Change::RegionMba { domain, class, bw }, "regions"));
                }
            }
        }
    }
    for &(cpu, c) in cpus {
        if c == Some(class) {
            out.push((Change::cpu(cpu, ClassId::new(0)), "cpus"));
        }
    }
    if backend.interface() == Interface::Os {
        for task in backend.tasks_of_class(class)? {
            out.push((Change::task(task, ClassId::new(0)), "tasks"));
        }
    }
    out.push((
        Change::Release {
            class,
            name: name.to_owned(),
        },
        "name",
    ));
    Ok(out)
}

/// A configuration resolved against a platform ([`Config::plan`]): the class of service of
/// every named class and the plan of the writes that make the platform match the file, the
/// writes of what already matches left out (applying the same file twice writes nothing
/// the second time).
#[derive(Debug)]
pub struct ConfigPlan {
    /// Each class's name and class of service, in file order.
    pub classes: Vec<(String, ClassId)>,
    /// The writes ([`ApplyPlan::apply`](rdt_host::transaction::ApplyPlan::apply) makes them as one transaction).
    pub plan: Plan,
    /// What is worth telling: the file's ([`Config::check`]) and the plan's.
    pub warnings: Vec<String>,
}

impl ConfigPlan {
    /// The name of the class `class` stands for, if it is one of the file's.
    #[must_use]
    pub fn name_of(&self, class: ClassId) -> Option<&str> {
        self.classes
            .iter()
            .find(|(_, c)| *c == class)
            .map(|(n, _)| n.as_str())
    }

    /// Whether a move from `before` to `after` leaves a class of the file for one outside it
    /// (a removal's).
    fn is_leaving(&self, before: ClassId, after: ClassId) -> bool {
        self.name_of(before).is_some() && self.name_of(after).is_none()
    }

    /// One line per write, `pipeline (COS1): L3 domain 0: 0xfffff -> 0xffe00`, in order; a
    /// removal's moves are `pipeline (COS1): CPU 2 to COS0`.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        self.plan
            .steps()
            .iter()
            .map(|(_, step)| {
                // COS 0 is the root whatever the file calls it (goresctrl's `""`,
                // `system/default`): `COS0`, as `pqos -s` and `-a` name it
                let who = |c: ClassId| match self.name_of(c) {
                    Some(n) if c.get() != 0 => format!("{} (COS{c})", rdt_core::Shown(n)),
                    _ => format!("COS{c}"),
                };
                match step {
                    Step::Cat {
                        resource,
                        domain,
                        before,
                        after,
                    } => format!(
                        "{}: {resource} domain {domain}: {} -> {}",
                        who(after.class),
                        before.mask,
                        after.mask
                    ),
                    Step::Mba {
                        resource,
                        domain,
                        before,
                        after,
                    } => format!(
                        "{}: {resource} domain {domain}: {} -> {}",
                        who(after.class),
                        before.limit,
                        after.limit
                    ),
                    Step::RegionMba {
                        domain,
                        class,
                        before,
                        after,
                    } => format!(
                        "{}: MBA region {} {} domain {domain}: {} -> {}",
                        who(*class),
                        after.region,
                        after.control,
                        before.value,
                        after.value
                    ),
                    // into a class of the file, or (a removal) out of one
                    Step::Cpu { cpu, before, after } if self.is_leaving(*before, *after) => {
                        format!("{}: CPU {cpu} to COS{after}", who(*before))
                    }
                    Step::Cpu { cpu, before, after } => {
                        format!("{}: CPU {cpu} from COS{before}", who(*after))
                    }
                    Step::Task {
                        task,
                        before,
                        after,
                    } if self.is_leaving(*before, *after) => {
                        format!("{}: task {task} to COS{after}", who(*before))
                    }
                    Step::Task {
                        task,
                        before,
                        after,
                    } => {
                        format!("{}: task {task} from COS{before}", who(*after))
                    }
                    Step::Channel {
                        channel,
                        before,
                        after,
                    } => format!(
                        "I/O RDT channel {channel}: {} -> {}",
                        before.map_or_else(|| "no class".to_owned(), |c| format!("COS{c}")),
                        after.map_or_else(|| "no class".to_owned(), |c| format!("COS{c}"))
                    ),
                    Step::Claim { class, .. } => format!("{}: new named class", who(*class)),
                    Step::Release { class, name, .. } => {
                        format!(
                            "{} (COS{class}): named class removed",
                            rdt_core::Shown(name)
                        )
                    }
                    Step::Reset { .. } | Step::Restore { .. } => step.to_string(),
                }
            })
            .collect()
    }
}

/// [`Config::plan`] failed: the file does not fit the platform (with file, line and key),
/// or the platform could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigPlanError<E: std::error::Error + 'static> {
    /// The configuration, as this platform and its state see it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Reading the platform failed.
    #[error("reading the platform: {0}")]
    Backend(#[source] E),
}

/// Where a change came from: the class (by index) and its key.
struct Origin {
    class: usize,
    key: String,
}

impl Config {
    fn error_at(&self, class: usize, key: &str, message: impl Into<String>) -> ConfigError {
        let c = &self.classes[class];
        ConfigError::new(
            ConfigErrorKind::Platform,
            &self.file,
            Location {
                line: Some(c.lines.line(key)),
                class_name: Some(c.name.clone()),
                class_index: Some(class),
                key: Some(key.to_owned()),
            },
            message,
        )
    }

    /// Resolves the file against `backend` and plans the writes that make the platform
    /// match it; writes nothing (the names are bound in this process only until the plan is
    /// applied).
    ///
    /// 1. [`Config::check`] against the backend's capabilities and topology.
    /// 2. Classes of service: `cos = N` binds N on the MSR interface
    ///    ([`BackendExt::bind_class`]; ignored with a warning on the OS interface, where the
    ///    kernel chooses CLOSIDs); every other class is [`BackendExt::class_named`] (on the OS
    ///    interface, the resctrl group of that name). [`Plan::new`] claims a name that is
    ///    not yet this library's ([`BackendExt::own_class_names`]) before its first write
    ///    ([`Change::Claim`]): applied, the plan records it (MSR: its class of service; OS:
    ///    the group it makes), so that `pqos -s` shows it, a reset and [`Config::remove`]
    ///    give it up, and undoing the plan ([`Plan::undoing`]) gives it up again. Another
    ///    tool's existing resctrl group of that name is written to but never claimed: it
    ///    stays that tool's.
    /// 3. Per cache level and domain, the classes' masks are [placed](super::place) around
    ///    the ways other classes hold: the masks of every class outside the file other than
    ///    COS 0 that are not all ways.
    /// 4. MBA limits per domain, region-aware MBA controls (`regions`: per L3 domain, region
    ///    and control, checked first against the backend's [`rdt_core::RegionOps`]: an
    ///    interface without them, a region the MRRM lacks, a value above the control window
    ///    are errors at their key), CPUs, tasks, and the processes named (every process with
    ///    that `comm` in `proc`); then the members the file's classes hold but no longer
    ///    list go back to COS 0 (the resctrl root group): every CPU no class of the file
    ///    lists, and, for a class that lists `tasks` or `processes`, every thread of its
    ///    group whose process the file neither lists nor names. A class that lists no tasks
    ///    keeps the tasks it holds. So the classes of the file end with exactly the members
    ///    it says, whatever was applied before; classes it does not name and other tools'
    ///    groups are not touched.
    /// 5. [`Plan::new`] validates it all against the current state (tasks exist, no CPU or
    ///    task in another tool's group, ...), and the writes that change nothing are
    ///    dropped ([`Plan::without_unchanged`]).
    ///
    /// # Errors
    /// [`ConfigPlanError::Config`] naming the file, line and key of what does not fit;
    /// [`ConfigPlanError::Backend`] when the platform cannot be read.
    pub fn plan<B: Backend>(
        &self,
        backend: &mut B,
        proc: &ProcFs,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        let mut warnings: Vec<String> = self
            .check(backend.capabilities(), backend.topology())?
            .iter()
            .map(ConfigWarning::to_string)
            .collect();
        let (normal, rounded) = self.normalized(backend.capabilities(), backend.interface());
        warnings.extend(rounded.iter().map(ConfigWarning::to_string));
        normal.plan_checked(backend, proc, warnings)
    }

    /// [`Config::plan`] of a checked and normalised configuration.
    fn plan_checked<B: Backend>(
        &self,
        backend: &mut B,
        proc: &ProcFs,
        mut warnings: Vec<String>,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        let ids = self.class_ids(backend, &mut warnings)?;
        let mut changes = Vec::new();
        let mut origins = Vec::new();
        self.cat_changes(backend, &ids, &mut changes, &mut origins)?;
        for (i, class) in self.classes.iter().enumerate() {
            for (resource, key0, spec) in [
                (MbaResource::Mba, "mba", &class.mba),
                (MbaResource::Smba, "smba", &class.smba),
            ] {
                let Some(spec) = spec else { continue };
                for domain in backend.topology().l3_domains() {
                    let key = if spec.domains.contains_key(&domain) {
                        format!("{key0}.domains.{domain}")
                    } else {
                        key0.to_owned()
                    };
                    let limit = spec.limit_in(domain);
                    changes.push(Change::bandwidth(resource, domain, ids[i], limit));
                    origins.push(Origin { class: i, key });
                }
            }
        }
        self.region_changes(backend, &ids, &mut changes, &mut origins)?;
        self.member_changes(backend, proc, &ids, &mut changes, &mut origins)?;
        let classes = self
            .classes
            .iter()
            .zip(&ids)
            .map(|(c, id)| (c.name.clone(), *id))
            .collect();
        self.finish(backend, &changes, &origins, classes, warnings, false)
    }

    /// Plans taking away the file's named classes that this library made
    /// ([`BackendExt::own_class_names`]; `pqos --apply FILE --remove`), as one transaction: per
    /// class, every mask back to all ways (data and code masks with CDP on), every MBA and
    /// SMBA limit back to "no limit", every region MBA control back to the control window
    /// (the MMIO interface), its CPUs and (OS interface) tasks back to COS 0, then
    /// the name given up ([`Change::Release`]): on the OS interface its resctrl group is
    /// removed, on the MSR interface its record goes. Writes nothing; apply the plan with
    /// [`ApplyPlan::apply`](rdt_host::transaction::ApplyPlan::apply) (all or nothing, journaled).
    ///
    /// A name of the file that is not one of this library's (never applied here, removed
    /// already, or another tool's resctrl group of that name, as goresctrl makes) is left
    /// alone, with a warning naming the file and line: it is not an error, so that removing
    /// a configuration twice, or one applied in part, works. Only the names of the file
    /// count: its sizes, CPUs and tasks are not looked at (the classes' state now is what
    /// is undone).
    ///
    /// # Errors
    /// [`ConfigPlanError::Config`] naming the class when its removal cannot be planned (on
    /// the OS interface its group holds monitor groups, [`rdt_core::RequestError::ClassInUse`];
    /// a task that exited while planning); [`ConfigPlanError::Backend`] when the platform
    /// cannot be read.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use rdt_config::Config;
    /// use rdt_core::fake::FakeBackend;
    /// use rdt_host::proc::ProcFs;
    /// use rdt_core::transaction::AllocState;
    /// use rdt_host::transaction::ApplyPlan;
    ///
    /// let mut b = FakeBackend::broadwell_2s();
    /// let before = AllocState::read(&mut b).unwrap();
    /// let cfg = Config::parse_toml(
    ///     "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\ncpus = \"0-3\"\n",
    ///     Path::new("cfg.toml"),
    /// )?;
    /// let procfs = ProcFs::host();
    /// cfg.plan(&mut b, &procfs).unwrap().plan.apply(&mut b).into_result().unwrap();
    /// let removal = cfg.remove(&mut b).unwrap();
    /// assert!(removal.warnings.is_empty());
    /// removal.plan.apply(&mut b).into_result().unwrap();
    /// assert_eq!(AllocState::read(&mut b).unwrap(), before);
    /// assert!(cfg.remove(&mut b).unwrap().plan.is_empty(), "nothing of ours is left");
    /// # Ok::<(), rdt_config::ConfigError>(())
    /// ```
    pub fn remove<B: Backend>(
        &self,
        backend: &mut B,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        let own = backend.own_class_names();
        let mut warnings = Vec::new();
        let mut classes = Vec::new();
        let mut changes = Vec::new();
        let mut origins = Vec::new();
        let origin = |i: usize, key: &str| Origin {
            class: i,
            key: key.to_owned(),
        };
        let cpus = backend.cpu_classes().map_err(ConfigPlanError::Backend)?;
        for (i, spec) in self.classes.iter().enumerate() {
            let Some(&(class, _)) = own.iter().find(|(_, n)| *n == spec.name) else {
                warnings.push(
                    self.error_at(
                        i,
                        "name",
                        RequestError::NotOwnClass {
                            name: spec.name.clone(),
                        }
                        .to_string(),
                    )
                    .to_string(),
                );
                continue;
            };
            classes.push((spec.name.clone(), class));
            for (change, key) in removal_changes(backend, class, &spec.name, &cpus)
                .map_err(ConfigPlanError::Backend)?
            {
                changes.push(change);
                origins.push(origin(i, key));
            }
        }
        self.finish(backend, &changes, &origins, classes, warnings, true)
    }

    /// The end of [`Config::plan`] and [`Config::remove`]: [`Plan::new`] with its errors and
    /// warnings placed in the file, the writes of what already matches left out. A
    /// `removal` sets masks back to all ways: that they include shareable ways is no news.
    fn finish<B: Backend>(
        &self,
        backend: &mut B,
        changes: &[Change],
        origins: &[Origin],
        classes: Vec<(String, ClassId)>,
        mut warnings: Vec<String>,
        removal: bool,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        let plan = Plan::new(backend, changes).map_err(|e| match e {
            PlanError::Invalid { index, error } => {
                let o = &origins[index];
                let name = &self.classes[o.class].name;
                ConfigPlanError::Config(self.error_at(o.class, &o.key, naming(&error, name)))
            }
            PlanError::Read { error, .. } => ConfigPlanError::Backend(error),
        })?;
        warnings.extend(
            plan.warnings()
                .iter()
                .filter(|w| !(removal && matches!(w, PlanWarning::Shareable { .. })))
                .map(|w| {
                    let o = &origins[w.index()];
                    self.error_at(o.class, &o.key, w.to_string()).to_string()
                }),
        );
        Ok(ConfigPlan {
            classes,
            plan: plan.without_unchanged(),
            warnings,
        })
    }

    /// Step 4 of [`Config::plan`]: the members. Each class's CPUs, tasks and the processes
    /// named move in; then what the file's classes hold but the file no longer lists goes
    /// back to the default class (COS 0, the resctrl root group), so that after the apply
    /// every class of the file has exactly the members it says, whatever was applied
    /// before:
    /// - CPUs: a CPU in a class of the file that no class of the file lists (a class
    ///   without `cpus` lists none);
    /// - tasks (OS interface), only for a class that lists `tasks` or `processes`: a thread
    ///   of its group (its `tasks` file, which also holds threads started and children
    ///   forked in the group) whose process is neither listed in the file (every thread of
    ///   a listed task's process stays) nor one of the processes named. A class that lists
    ///   no tasks leaves its tasks alone: they were put there by other means (a container
    ///   runtime, `pqos -I -a pid:`, inheritance) that the file does not describe.
    ///
    /// COS 0 (a class with `cos = 0`) has nothing to give back to.
    fn member_changes<B: Backend>(
        &self,
        backend: &mut B,
        proc: &ProcFs,
        ids: &[ClassId],
        changes: &mut Vec<Change>,
        origins: &mut Vec<Origin>,
    ) -> Result<(), ConfigPlanError<B::Error>> {
        let origin = |class: usize, key: &str| Origin {
            class,
            key: key.to_owned(),
        };
        // every thread of every process the file lists or names
        let mut kept: BTreeSet<TaskId> = BTreeSet::new();
        for (i, class) in self.classes.iter().enumerate() {
            for cpu in class.cpus.iter() {
                changes.push(Change::cpu(cpu, ids[i]));
                origins.push(origin(i, "cpus"));
            }
            for &task in &class.tasks {
                changes.push(Change::task(task, ids[i]));
                origins.push(origin(i, "tasks"));
                kept.extend(process_threads(proc, task));
            }
            for name in &class.processes {
                let pids = proc.processes_named(name).map_err(|e| {
                    self.error_at(
                        i,
                        "processes",
                        format!("listing {}: {e}", proc.root().display()),
                    )
                })?;
                if pids.is_empty() {
                    return Err(self
                        .error_at(i, "processes", format!("no process is named {name:?}"))
                        .into());
                }
                for task in pids {
                    changes.push(Change::task(task, ids[i]));
                    origins.push(origin(i, "processes"));
                    kept.extend(process_threads(proc, task));
                }
            }
        }
        let default = ClassId::new(0);
        let index_of = |class: ClassId| {
            (class != default)
                .then(|| ids.iter().position(|c| *c == class))
                .flatten()
        };
        let listed: rdt_core::CpuSet = self.classes.iter().flat_map(|c| c.cpus.iter()).collect();
        for (cpu, class) in backend.cpu_classes().map_err(ConfigPlanError::Backend)? {
            if let Some(i) = class.and_then(index_of)
                && !listed.contains(cpu)
            {
                changes.push(Change::cpu(cpu, default));
                origins.push(origin(i, "cpus"));
            }
        }
        if backend.interface() == Interface::Os {
            for (i, class) in self.classes.iter().enumerate() {
                if (class.tasks.is_empty() && class.processes.is_empty())
                    || index_of(ids[i]) != Some(i)
                {
                    continue;
                }
                for task in backend
                    .tasks_of_class(ids[i])
                    .map_err(ConfigPlanError::Backend)?
                {
                    // (a task that has exited since the group was read is gone already)
                    if !kept.contains(&task) && proc.exists(task) {
                        changes.push(Change::task(task, default));
                        origins.push(origin(i, "tasks"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Region-aware MBA of [`Config::plan`] (after MBA, before the members): per class
    /// with `regions`, per L3 domain, one [`Change::RegionMba`] per control the file names
    /// there. Checked first, against the backend's [`rdt_core::RegionOps`], each error at
    /// its key: a backend without region controls (not the MMIO interface of an RDT 1.3
    /// platform), a class of service beyond the ERDT's classes, a region the MRRM does not
    /// have, a value above the control window.
    fn region_changes<B: Backend>(
        &self,
        backend: &mut B,
        ids: &[ClassId],
        changes: &mut Vec<Change>,
        origins: &mut Vec<Origin>,
    ) -> Result<(), ConfigPlanError<B::Error>> {
        let Some(first) = self.classes.iter().position(|c| !c.regions.is_empty()) else {
            return Ok(());
        };
        let interface = backend.interface();
        let Some(r) = backend.regions() else {
            let why = match interface {
                Interface::Mmio => "this platform's ERDT has no region MBA controls (MARC)",
                Interface::Msr => {
                    "region-aware MBA needs the MMIO interface of an RDT 1.3 platform \
                     (pqos --iface=mmio; ACPI ERDT and MRRM): the MSR interface has none"
                }
                Interface::Os => {
                    "region-aware MBA needs the MMIO interface of an RDT 1.3 platform \
                     (pqos --iface=mmio; ACPI ERDT and MRRM): resctrl (the OS interface) has \
                     none"
                }
            };
            return Err(self.error_at(first, "regions", why).into());
        };
        let regions = r.memory_regions().to_vec();
        let window = r.bw_window();
        let region_classes = r.region_classes();
        let known = regions
            .iter()
            .map(|r| format!("region {} ({})", r.region, r.memory))
            .collect::<Vec<_>>()
            .join(", ");
        let domains = backend.topology().l3_domains();
        for (i, class) in self.classes.iter().enumerate() {
            if class.regions.is_empty() {
                continue;
            }
            if ids[i].get() >= region_classes {
                return Err(self
                    .error_at(
                        i,
                        "regions",
                        format!(
                            "COS{} has no region MBA controls: the platform's ERDT has \
                             {region_classes} classes of service for them",
                            ids[i]
                        ),
                    )
                    .into());
            }
            for (&region, spec) in &class.regions {
                let rkey = format!("regions.{region}");
                if !regions.iter().any(|r| r.region == region) {
                    return Err(self
                        .error_at(
                            i,
                            &rkey,
                            format!(
                                "memory region {region} does not exist: the platform's MRRM \
                                 has {known}"
                            ),
                        )
                        .into());
                }
                self.check_region_values(i, region, spec, window)?;
                for &domain in &domains {
                    for (control, value) in spec.controls_in(domain) {
                        let own = spec
                            .domains
                            .get(&domain)
                            .is_some_and(|d| d.contains_key(&control));
                        changes.push(Change::RegionMba {
                            domain,
                            class: ids[i],
                            bw: RegionBw {
                                region,
                                control,
                                value,
                            },
                        });
                        origins.push(Origin {
                            class: i,
                            key: region_key(region, own.then_some(domain), control),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Every value of class `i`'s `region` entry is within the control window (0 to
    /// `window`), else an error at its key.
    fn check_region_values(
        &self,
        i: usize,
        region: MemRegion,
        spec: &RegionSpec,
        window: u16,
    ) -> Result<(), ConfigError> {
        let named = spec.controls.iter().map(|(c, v)| (None, *c, *v)).chain(
            spec.domains
                .iter()
                .flat_map(|(d, cs)| cs.iter().map(move |(c, v)| (Some(*d), *c, *v))),
        );
        for (domain, control, value) in named {
            if value > window {
                return Err(self.error_at(
                    i,
                    &region_key(region, domain, control),
                    format!(
                        "{control} {value} is outside the control window: 0 to {window} \
                         ({window} is full bandwidth)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Step 2 of [`Config::plan`]: fixed `cos` first, then the named classes.
    fn class_ids<B: Backend>(
        &self,
        backend: &mut B,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<ClassId>, ConfigPlanError<B::Error>> {
        let os = backend.interface() == Interface::Os;
        let mut ids = vec![None; self.classes.len()];
        for (i, class) in self.classes.iter().enumerate() {
            match class.cos {
                Some(_) if os => warnings.push(
                    self.error_at(
                        i,
                        "cos",
                        "ignored on the OS interface: the kernel gives the group its CLOSID",
                    )
                    .to_string(),
                ),
                Some(cos) => {
                    backend
                        .bind_class(cos, &class.name)
                        .map_err(|e| self.backend_error(i, "cos", e))?;
                    ids[i] = Some(cos);
                }
                None => {}
            }
        }
        for (i, class) in self.classes.iter().enumerate() {
            if ids[i].is_none() {
                let id = backend
                    .class_named(&class.name)
                    .map_err(|e| self.backend_error(i, "name", e))?;
                ids[i] = Some(id);
            }
        }
        Ok(ids.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// A backend error at a class's key: a [`rdt_core::RequestError`] is the file's problem.
    fn backend_error<E: rdt_core::BackendError>(
        &self,
        class: usize,
        key: &str,
        e: E,
    ) -> ConfigPlanError<E> {
        match e.request() {
            Some(r) => ConfigPlanError::Config(self.error_at(class, key, r.to_string())),
            None => ConfigPlanError::Backend(e),
        }
    }

    /// Step 3 of [`Config::plan`]: the masks of every cache level and domain.
    fn cat_changes<B: Backend>(
        &self,
        backend: &mut B,
        ids: &[ClassId],
        changes: &mut Vec<Change>,
        origins: &mut Vec<Origin>,
    ) -> Result<(), ConfigPlanError<B::Error>> {
        for resource in [CatResource::L3, CatResource::L2] {
            let users: Vec<usize> = (0..self.classes.len())
                .filter(|i| self.classes[*i].cache(resource).is_some())
                .collect();
            let Some(cat) = backend.capabilities().cat(resource).cloned() else {
                continue;
            };
            if users.is_empty() {
                continue;
            }
            let domains = match resource {
                CatResource::L3 => backend.topology().l3_domains(),
                CatResource::L2 => backend.topology().l2_domains(),
            };
            let full = cat.full_mask();
            let names = backend.class_names();
            for domain in domains {
                let table = backend
                    .cat_classes(resource, domain)
                    .map_err(ConfigPlanError::Backend)?;
                // who holds the ways out of bounds, for errors: classes outside the file...
                let mut holders: Vec<(String, u64)> = table
                    .iter()
                    .filter(|c| c.class.get() != 0 && !ids.contains(&c.class))
                    .filter(|c| !c.mask.is_all(full))
                    .map(|c| (class_label(&names, c.class), c.mask.ways()))
                    .collect();
                // ...and other groups' exclusive ways
                holders.extend(
                    backend
                        .exclusive_ways(resource, domain)
                        .map_err(ConfigPlanError::Backend)?
                        .into_iter()
                        .filter(|x| x.class.is_none_or(|c| !ids.contains(&c)))
                        .map(|x| (format!("resctrl group {}", x.group), x.bits)),
                );
                let taken = holders.iter().fold(0, |acc, (_, bits)| acc | bits);
                let placed = self
                    .place(resource, &cat, domain, taken)
                    .map_err(|e| self.place_error(resource, domain, &e, &holders))?;
                for (spec, mask) in placed {
                    let i = self.index_of(spec);
                    let base = ClassSpec::cache_key(resource);
                    let key = if spec
                        .cache(resource)
                        .is_some_and(|s| s.domains.contains_key(&domain))
                    {
                        format!("{base}.domains.{domain}")
                    } else {
                        base.to_owned()
                    };
                    changes.push(Change::Cat {
                        resource,
                        domain,
                        class: ids[i],
                        scope: MaskScope::Both,
                        mask,
                    });
                    origins.push(Origin { class: i, key });
                }
            }
        }
        Ok(())
    }

    fn index_of(&self, spec: &ClassSpec) -> usize {
        self.classes
            .iter()
            .position(|c| std::ptr::eq(c, spec))
            .unwrap_or_default()
    }

    /// A placement error at the class's cache key; a mask over ways held outside the file
    /// names who holds them (`holders`: each holder's label and ways).
    fn place_error(
        &self,
        resource: CatResource,
        domain: rdt_core::CacheDomain,
        e: &super::PlaceError,
        holders: &[(String, u64)],
    ) -> ConfigError {
        let i = self
            .classes
            .iter()
            .position(|c| c.name == e.class())
            .unwrap_or_default();
        let mut reason = e.reason();
        if let super::PlaceError::OverlapsTaken { mask, .. } = e {
            let who: Vec<String> = holders
                .iter()
                .filter(|(_, bits)| bits & mask.bits() != 0)
                .map(|(label, bits)| format!("{label}: {bits:#x}"))
                .collect();
            if !who.is_empty() {
                reason.push_str(&format!(" ({})", who.join(", ")));
            }
        }
        let mut error = self.error_at(
            i,
            ClassSpec::cache_key(resource),
            format!("in {resource} domain {domain}, around the ways other classes hold: {reason}"),
        );
        error.set_kind(ConfigErrorKind::Placement);
        error
    }
}

/// The key of a region control in the file: `regions.1.max`, or in a domain
/// `regions.1.domains.0.max`.
fn region_key(region: MemRegion, domain: Option<CacheDomain>, control: BwControl) -> String {
    match domain {
        Some(d) => format!("regions.{region}.domains.{d}.{control}"),
        None => format!("regions.{region}.{control}"),
    }
}

/// Every thread of the process `task` belongs to (`task` alone when `/proc` cannot say; none
/// when it has exited).
fn process_threads(proc: &ProcFs, task: TaskId) -> Vec<TaskId> {
    match proc.thread_group(task) {
        Ok(pid) => proc.threads(pid).unwrap_or_else(|_| vec![task]),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(_) => vec![task],
    }
}

/// `class`'s label in errors: `class "db" (COS3)` when it has a name, else `COS3`.
fn class_label(names: &[(ClassId, String)], class: ClassId) -> String {
    names.iter().find(|(c, _)| *c == class).map_or_else(
        || format!("COS{class}"),
        |(_, n)| format!("class {n:?} (COS{class})"),
    )
}

/// The message of a planner's refusal of a write to the class `name`: a mask over another
/// group's exclusive ways says which class it is (the planner knows its number only).
pub(super) fn naming(error: &RequestError, name: &str) -> String {
    match error {
        RequestError::ExclusiveOverlap {
            resource,
            class,
            mask,
            group,
            overlap,
        } => format!(
            "{resource} mask {mask:#x} of class {name:?} (COS{class}) overlaps ways {overlap:#x} \
             of resctrl group {group}, which holds them exclusively (mode exclusive)"
        ),
        RequestError::ForeignClass { name: group } => format!(
            "class {name:?}: resctrl group `{group}` belongs to another tool (it is not a group \
             this library made): the class would take it over, so nothing is written (rename \
             the class, or adopt the group when migrating from that tool)"
        ),
        other => other.to_string(),
    }
}

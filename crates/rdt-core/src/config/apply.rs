//! A configuration against a platform: classes of service for the names, masks placed
//! around the ways other classes hold, and the transaction that makes it so
//! ([`Config::plan`]).

use super::error::Location;
use super::{ClassSpec, Config, ConfigError, ConfigErrorKind, ConfigWarning};
use crate::proc::ProcFs;
use crate::transaction::{Change, MaskScope, Plan, PlanError, Step};
use crate::{Backend, CatResource, ClassId, Interface, MbaResource};

/// A configuration resolved against a platform ([`Config::plan`]): the class of service of
/// every named class and the plan of the writes that make the platform match the file, the
/// writes of what already matches left out (applying the same file twice writes nothing
/// the second time).
#[derive(Debug)]
pub struct ConfigPlan {
    /// Each class's name and class of service, in file order.
    pub classes: Vec<(String, ClassId)>,
    /// The writes ([`Plan::apply`] makes them as one transaction).
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

    /// One line per write, `pipeline (COS1): L3 domain 0: 0xfffff -> 0xffe00`, in order.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        self.plan
            .steps()
            .iter()
            .map(|(_, step)| {
                let who = |c: ClassId| match self.name_of(c) {
                    Some(n) => format!("{n} (COS{c})"),
                    None => format!("COS{c}"),
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
                    Step::Cpu { cpu, before, after } => {
                        format!("{}: CPU {cpu} from COS{before}", who(*after))
                    }
                    Step::Task {
                        task,
                        before,
                        after,
                    } => {
                        format!("{}: task {task} from COS{before}", who(*after))
                    }
                    Step::Reset { .. } => step.to_string(),
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
    /// match it; writes nothing but the name records of [`Backend::class_named`] (MSR).
    ///
    /// 1. [`Config::check`] against the backend's capabilities and topology.
    /// 2. Classes of service: `cos = N` binds N on the MSR interface
    ///    ([`Backend::bind_class`]; ignored with a warning on the OS interface, where the
    ///    kernel chooses CLOSIDs); every other class is [`Backend::class_named`] (on the OS
    ///    interface, the resctrl group of that name).
    /// 3. Per cache level and domain, the classes' masks are [placed](super::place) around
    ///    the ways other classes hold: the masks of every class outside the file other than
    ///    COS 0 that are not all ways.
    /// 4. MBA limits per domain, CPUs, tasks, and the processes named (every process with
    ///    that `comm` in `proc`).
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
        for (i, class) in self.classes.iter().enumerate() {
            for cpu in class.cpus.iter() {
                changes.push(Change::Cpu { cpu, class: ids[i] });
                origins.push(Origin {
                    class: i,
                    key: "cpus".into(),
                });
            }
            for &task in &class.tasks {
                changes.push(Change::Task {
                    task,
                    class: ids[i],
                });
                origins.push(Origin {
                    class: i,
                    key: "tasks".into(),
                });
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
                    changes.push(Change::Task {
                        task,
                        class: ids[i],
                    });
                    origins.push(Origin {
                        class: i,
                        key: "processes".into(),
                    });
                }
            }
        }
        let plan = Plan::new(backend, &changes).map_err(|e| match e {
            PlanError::Invalid { index, error } => {
                let o = &origins[index];
                ConfigPlanError::Config(self.error_at(o.class, &o.key, error.to_string()))
            }
            PlanError::Read { error, .. } => ConfigPlanError::Backend(error),
        })?;
        warnings.extend(plan.warnings().iter().map(|w| {
            let o = &origins[w.index()];
            self.error_at(o.class, &o.key, w.to_string()).to_string()
        }));
        Ok(ConfigPlan {
            classes: self
                .classes
                .iter()
                .zip(&ids)
                .map(|(c, id)| (c.name.clone(), *id))
                .collect(),
            plan: plan.without_unchanged(),
            warnings,
        })
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

    /// A backend error at a class's key: a [`crate::RequestError`] is the file's problem.
    fn backend_error<E: crate::BackendError>(
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
            for domain in domains {
                let table = backend
                    .cat_classes(resource, domain)
                    .map_err(ConfigPlanError::Backend)?;
                let taken = table
                    .iter()
                    .filter(|c| c.class.get() != 0 && !ids.contains(&c.class))
                    .filter(|c| !c.mask.is_all(full))
                    .fold(0, |acc, c| acc | c.mask.ways());
                // Other groups' exclusive ways are out of bounds too.
                let exclusive = backend
                    .exclusive_ways(resource, domain)
                    .map_err(ConfigPlanError::Backend)?
                    .into_iter()
                    .filter(|x| x.class.is_none_or(|c| !ids.contains(&c)))
                    .fold(0, |acc, x| acc | x.bits);
                let placed = self
                    .place(resource, &cat, domain, taken | exclusive)
                    .map_err(|e| self.place_error(resource, domain, &e))?;
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

    fn place_error(
        &self,
        resource: CatResource,
        domain: crate::CacheDomain,
        e: &super::PlaceError,
    ) -> ConfigError {
        let i = self
            .classes
            .iter()
            .position(|c| c.name == e.class())
            .unwrap_or_default();
        let mut error = self.error_at(
            i,
            ClassSpec::cache_key(resource),
            format!(
                "in {resource} domain {domain}, around the ways other classes hold: {}",
                e.reason()
            ),
        );
        error.set_kind(ConfigErrorKind::Placement);
        error
    }
}

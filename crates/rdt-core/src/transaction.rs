//! Allocation as a transaction: a list of [`Change`]s is validated whole against the
//! capabilities and the current state ([`Plan::new`], which reads that state once and
//! writes nothing), then applied in order ([`Plan::apply`]); when a write fails, every write
//! the plan made before it is undone, newest first, and the [`Outcome`] says which of
//! "applied", "rolled back" or "partly changed" happened.
//!
//! The contract is the same on both interfaces, for any [`Backend`]:
//! - nothing is written unless every change is valid: the class limits of the interface
//!   ([`Capabilities::check_class`](crate::Capabilities::check_class): on the OS interface
//!   the smallest `num_closids`), masks
//!   ([`Capabilities::check_mask`](crate::Capabilities::check_mask)), MBA units and ranges
//!   ([`Capabilities::check_mba_limit`](crate::Capabilities::check_mba_limit)),
//!   domains, CPUs, tasks (they exist; the OS interface only), and the current class of every
//!   CPU and task (a CPU or task in another tool's resctrl group is refused:
//!   [`RequestError::ForeignGroup`]);
//! - the writes are the backend's single-class calls, one per step, in the order of the
//!   changes (masks, then bandwidth, then CPUs and tasks, as the caller lists them);
//! - a failed write is undone with the same calls and the values read by [`Plan::new`];
//!   [`Outcome::PartlyChanged`] lists exactly the steps whose undo failed too.
//!
//! # Examples
//! ```
//! use rdt_core::fake::FakeBackend;
//! use rdt_core::transaction::{Change, MaskScope, Outcome, Plan};
//! use rdt_core::{CacheBitmask, CacheDomain, CatResource, ClassId, LogicalCpu};
//!
//! let mut b = FakeBackend::broadwell_2s();
//! let class = ClassId::new(1);
//! let mut changes: Vec<Change> = [0, 1]
//!     .map(|d| Change::Cat {
//!         resource: CatResource::L3,
//!         domain: CacheDomain::new(d),
//!         class,
//!         scope: MaskScope::Both,
//!         mask: CacheBitmask::new(0xf).unwrap(),
//!     })
//!     .into();
//! changes.push(Change::Cpu { cpu: LogicalCpu::new(2), class });
//! b.fail_nth_write(3); // the association is refused...
//! let plan = Plan::new(&mut b, &changes).unwrap();
//! assert!(matches!(plan.apply(&mut b), Outcome::RolledBack { .. }));
//! assert_eq!(b.l3_mask(0, 1), b.l3_mask(0, 0)); // ...and the masks are back
//! ```

use std::collections::BTreeMap;
use std::fmt;

use crate::{
    Backend, BackendError, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource, ClassId,
    Interface, LogicalCpu, MbaClass, MbaLimit, RequestError, TaskId,
};

/// Which masks of a CAT class a change sets (pqos `-e llc:1=..`, `1d=..`, `1c=..`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MaskScope {
    /// The one mask with CDP off; both the data and the code mask with CDP on.
    #[default]
    Both,
    /// The data mask (CDP on only).
    Data,
    /// The code mask (CDP on only).
    Code,
}

/// One change of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// A class's cache mask in one cache domain (an L3 id for L3, an L2 id for L2).
    Cat {
        /// The cache level.
        resource: CatResource,
        /// The cache domain.
        domain: CacheDomain,
        /// The class of service.
        class: ClassId,
        /// Which masks (data/code with CDP on).
        scope: MaskScope,
        /// The mask.
        mask: CacheBitmask,
    },
    /// A class's memory bandwidth limit in one L3 domain.
    Mba {
        /// The L3 domain.
        domain: CacheDomain,
        /// The class of service.
        class: ClassId,
        /// The limit, in the unit in force ([`Capabilities::check_mba_limit`]).
        ///
        /// [`Capabilities::check_mba_limit`]: crate::Capabilities::check_mba_limit
        limit: MbaLimit,
    },
    /// A CPU into a class.
    Cpu {
        /// The CPU.
        cpu: LogicalCpu,
        /// The class.
        class: ClassId,
    },
    /// A task into a class (a process id moves every thread of the process; OS interface).
    Task {
        /// The task.
        task: TaskId,
        /// The class.
        class: ClassId,
    },
}

/// One write of a plan, with the value it replaces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// `set_cat_classes` of one class.
    Cat {
        /// The cache level.
        resource: CatResource,
        /// The cache domain.
        domain: CacheDomain,
        /// The class as it was.
        before: CatClass,
        /// The class as it will be.
        after: CatClass,
    },
    /// `set_mba_classes` of one class.
    Mba {
        /// The L3 domain.
        domain: CacheDomain,
        /// The class as it was.
        before: MbaClass,
        /// The class as it will be (before the hardware's rounding).
        after: MbaClass,
    },
    /// `associate` of one CPU.
    Cpu {
        /// The CPU.
        cpu: LogicalCpu,
        /// Its class before.
        before: ClassId,
        /// Its class after.
        after: ClassId,
    },
    /// `associate_task` of one task.
    Task {
        /// The task.
        task: TaskId,
        /// Its class before.
        before: ClassId,
        /// Its class after.
        after: ClassId,
    },
}

impl Step {
    /// Whether the step writes what is already there.
    #[must_use]
    pub fn is_unchanged(&self) -> bool {
        match self {
            Self::Cat { before, after, .. } => before == after,
            Self::Mba { before, after, .. } => before == after,
            Self::Cpu { before, after, .. } | Self::Task { before, after, .. } => before == after,
        }
    }

    /// Writes the step; for MBA, the limit the hardware applied.
    fn write<B: Backend>(&self, backend: &mut B) -> Result<Option<MbaLimit>, B::Error> {
        match self {
            Self::Cat {
                resource,
                domain,
                after,
                ..
            } => backend
                .set_cat_classes(*resource, *domain, &[*after])
                .map(|()| None),
            Self::Mba { domain, after, .. } => {
                let applied = backend.set_mba_classes(*domain, &[*after])?;
                Ok(Some(
                    applied
                        .iter()
                        .find(|a| a.class == after.class)
                        .map_or(after.limit, |a| a.limit),
                ))
            }
            Self::Cpu { cpu, after, .. } => backend.associate(*cpu, *after).map(|()| None),
            Self::Task { task, after, .. } => backend.associate_task(*task, *after).map(|()| None),
        }
    }

    /// Writes back what the step replaced.
    fn undo<B: Backend>(&self, backend: &mut B) -> Result<(), B::Error> {
        match self {
            Self::Cat {
                resource,
                domain,
                before,
                ..
            } => backend.set_cat_classes(*resource, *domain, &[*before]),
            Self::Mba { domain, before, .. } => {
                backend.set_mba_classes(*domain, &[*before]).map(|_| ())
            }
            Self::Cpu { cpu, before, .. } => backend.associate(*cpu, *before),
            Self::Task { task, before, .. } => backend.associate_task(*task, *before),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cat {
                resource,
                domain,
                after,
                ..
            } => write!(f, "{resource} COS{} of domain {domain}", after.class),
            Self::Mba { domain, after, .. } => {
                write!(f, "MBA COS{} of domain {domain}", after.class)
            }
            Self::Cpu { cpu, after, .. } => write!(f, "CPU {cpu} into COS{after}"),
            Self::Task { task, after, .. } => write!(f, "task {task} into COS{after}"),
        }
    }
}

/// A change that cannot be planned: which one, and why.
#[derive(Debug, thiserror::Error)]
pub enum PlanError<E: std::error::Error + 'static> {
    /// Change `index` is not valid for this platform or state; nothing was written.
    #[error("change {index}: {error}")]
    Invalid {
        /// Its index in the list given to [`Plan::new`].
        index: usize,
        /// Why.
        error: RequestError,
    },
    /// Reading the current state for change `index` failed; nothing was written.
    #[error("change {index}: reading the current state")]
    Read {
        /// Its index in the list given to [`Plan::new`].
        index: usize,
        /// The backend's error.
        #[source]
        error: E,
    },
}

impl<E: std::error::Error + 'static> PlanError<E> {
    /// The index of the change at fault.
    #[must_use]
    pub const fn index(&self) -> usize {
        match self {
            Self::Invalid { index, .. } | Self::Read { index, .. } => *index,
        }
    }
}

/// A validated list of writes, each with the value it replaces ([`Plan::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// (index of the change, step), in order.
    steps: Vec<(usize, Step)>,
    warnings: Vec<PlanWarning>,
}

/// Something worth telling about a valid plan.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PlanWarning {
    /// A mask uses ways that other agents (GPU, I/O) may fill too (CPUID `shareable_bits`,
    /// resctrl `info/L3/shareable_bits`): the class does not have them to itself.
    Shareable {
        /// The change.
        index: usize,
        /// The cache level.
        resource: CatResource,
        /// The ways shared, as a mask.
        shared: u64,
    },
}

impl fmt::Display for PlanWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shareable {
                resource, shared, ..
            } => write!(
                f,
                "{resource} ways {shared:#x} are shareable with other agents (GPU, I/O)"
            ),
        }
    }
}

/// The outcome of one write that succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    /// The index of the change it came from.
    pub change: usize,
    /// The write.
    pub step: Step,
    /// For MBA: the limit the hardware applied (Intel rounds to its granularity).
    pub applied: Option<MbaLimit>,
}

/// The write that failed.
#[derive(Debug)]
pub struct Failed<E> {
    /// The index of the change it came from.
    pub change: usize,
    /// The write.
    pub step: Step,
    /// The backend's error.
    pub error: E,
}

/// What [`Plan::apply`] did.
#[derive(Debug)]
#[must_use = "a failed transaction is reported only in its outcome"]
pub enum Outcome<E> {
    /// Every write was made.
    Applied(Vec<Done>),
    /// A write failed and every write before it was undone: the platform is as before.
    RolledBack {
        /// The writes made, then undone, in order.
        done: Vec<Done>,
        /// The write that failed.
        failed: Failed<E>,
    },
    /// A write failed and some undo failed too: `not_undone` lists those writes (and the
    /// undo's error); everything else is as before.
    PartlyChanged {
        /// The writes made, in order.
        done: Vec<Done>,
        /// The write that failed.
        failed: Failed<E>,
        /// The writes whose undo failed, newest first.
        not_undone: Vec<(Step, E)>,
    },
}

impl<E: std::error::Error + Send + Sync + 'static> Outcome<E> {
    /// The writes on success; an [`ApplyError`] otherwise.
    ///
    /// # Errors
    /// [`ApplyError`] when the outcome is not [`Outcome::Applied`].
    pub fn into_result(self) -> Result<Vec<Done>, ApplyError<E>> {
        match self {
            Self::Applied(done) => Ok(done),
            Self::RolledBack { done, failed } => Err(ApplyError {
                undone: done.len(),
                failed,
                not_undone: Vec::new(),
            }),
            Self::PartlyChanged {
                done,
                failed,
                not_undone,
            } => Err(ApplyError {
                undone: done.len() - not_undone.len(),
                failed,
                not_undone,
            }),
        }
    }
}

/// A transaction that did not apply: the failed write, and whether the writes before it
/// were undone.
#[derive(Debug)]
pub struct ApplyError<E> {
    /// The write that failed.
    pub failed: Failed<E>,
    /// How many writes before it were undone.
    pub undone: usize,
    /// The writes that could not be undone, with the undo's error.
    pub not_undone: Vec<(Step, E)>,
}

impl<E: std::error::Error> fmt::Display for ApplyError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.failed.step, self.failed.error)?;
        if self.not_undone.is_empty() {
            write!(
                f,
                "; nothing was changed (the {} write(s) before it were undone)",
                self.undone
            )
        } else {
            let list: Vec<String> = self
                .not_undone
                .iter()
                .map(|(s, e)| format!("{s}: {e}"))
                .collect();
            write!(
                f,
                "; the configuration is partly changed: undoing failed for {}",
                list.join("; ")
            )
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ApplyError<E> {}

/// The current state the plan read, updated as its steps are planned.
#[derive(Default)]
struct Current {
    cat: BTreeMap<(CatResource, CacheDomain), Vec<CatClass>>,
    mba: BTreeMap<CacheDomain, Vec<MbaClass>>,
    cpus: BTreeMap<LogicalCpu, ClassId>,
    tasks: BTreeMap<TaskId, ClassId>,
}

/// A backend error as a plan error: its [`RequestError`] when it is one, a read error else.
fn read_error<E: BackendError>(index: usize, e: E) -> PlanError<E> {
    match e.request() {
        Some(r) => PlanError::Invalid {
            index,
            error: r.clone(),
        },
        None => PlanError::Read { index, error: e },
    }
}

/// [`Plan::new`]'s working state.
struct Planner<'b, B: Backend> {
    backend: &'b mut B,
    interface: Interface,
    current: Current,
    warnings: Vec<PlanWarning>,
}

impl<B: Backend> Planner<'_, B> {
    fn cat(
        &mut self,
        index: usize,
        resource: CatResource,
        domain: CacheDomain,
        class: ClassId,
        scope: MaskScope,
        mask: CacheBitmask,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        let caps = self.backend.capabilities();
        caps.check_cat_class(resource, class)
            .map_err(|e| invalid(e.into()))?;
        if self.interface == Interface::Os {
            caps.check_class(self.interface, class)
                .map_err(|e| invalid(e.into()))?;
        }
        caps.check_mask(resource, mask)
            .map_err(|e| invalid(e.into()))?;
        let shared = caps
            .cat(resource)
            .map_or(0, |c| c.shareable_bits & mask.bits());
        if shared != 0 {
            self.warnings.push(PlanWarning::Shareable {
                index,
                resource,
                shared,
            });
        }
        let domains = match resource {
            CatResource::L3 => self.backend.topology().l3_domains(),
            CatResource::L2 => self.backend.topology().l2_domains(),
        };
        if !domains.contains(&domain) {
            return Err(invalid(no_domain(
                resource_name(resource),
                domain,
                &domains,
            )));
        }
        let table = match self.current.cat.entry((resource, domain)) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => v.insert(
                self.backend
                    .cat_classes(resource, domain)
                    .map_err(|e| read_error(index, e))?,
            ),
        };
        let Some(entry) = table.iter_mut().find(|c| c.class == class) else {
            return Err(invalid(no_class(
                resource_name(resource),
                class,
                table.len(),
            )));
        };
        let before = *entry;
        entry.mask = new_mask(before.mask, scope, mask).ok_or_else(|| {
            invalid(RequestError::CdpMismatch {
                resource,
                class,
                reason: "CDP is off: a data (d) or code (c) mask needs CDP on",
            })
        })?;
        Ok(Step::Cat {
            resource,
            domain,
            before,
            after: *entry,
        })
    }

    fn mba(
        &mut self,
        index: usize,
        domain: CacheDomain,
        class: ClassId,
        limit: MbaLimit,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        let caps = self.backend.capabilities();
        caps.check_mba_limit(self.interface, class, limit)
            .map_err(invalid)?;
        if self.interface == Interface::Os {
            caps.check_class(self.interface, class)
                .map_err(|e| invalid(e.into()))?;
        }
        let domains = self.backend.topology().l3_domains();
        if !domains.contains(&domain) {
            return Err(invalid(no_domain("MBA", domain, &domains)));
        }
        let table = match self.current.mba.entry(domain) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => v.insert(
                self.backend
                    .mba_classes(domain)
                    .map_err(|e| read_error(index, e))?,
            ),
        };
        let Some(entry) = table.iter_mut().find(|c| c.class == class) else {
            return Err(invalid(no_class("MBA", class, table.len())));
        };
        let before = *entry;
        entry.limit = limit;
        Ok(Step::Mba {
            domain,
            before,
            after: *entry,
        })
    }

    fn cpu(
        &mut self,
        index: usize,
        cpu: LogicalCpu,
        class: ClassId,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        if self.backend.topology().get(cpu).is_none() {
            return Err(invalid(RequestError::NoSuchCpu(cpu)));
        }
        self.backend
            .capabilities()
            .check_class(self.interface, class)
            .map_err(|e| invalid(e.into()))?;
        let before = match self.current.cpus.get(&cpu) {
            Some(c) => *c,
            None => self
                .backend
                .class_of(cpu)
                .map_err(|e| read_error(index, e))?,
        };
        self.current.cpus.insert(cpu, class);
        Ok(Step::Cpu {
            cpu,
            before,
            after: class,
        })
    }

    fn task(
        &mut self,
        index: usize,
        task: TaskId,
        class: ClassId,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        if self.interface != Interface::Os {
            return Err(invalid(self.backend.unsupported("task association")));
        }
        self.backend
            .capabilities()
            .check_class(self.interface, class)
            .map_err(|e| invalid(e.into()))?;
        let before = match self.current.tasks.get(&task) {
            Some(c) => *c,
            None => self
                .backend
                .class_of_task(task)
                .map_err(|e| read_error(index, e))?,
        };
        self.current.tasks.insert(task, class);
        Ok(Step::Task {
            task,
            before,
            after: class,
        })
    }
}

impl Plan {
    /// Validates `changes` and reads the state they replace; writes nothing. Changes to the
    /// same class, CPU or task apply in order (`1d=` then `1c=` builds one CDP pair).
    ///
    /// # Errors
    /// [`PlanError::Invalid`] for the first change the platform or its state does not allow
    /// (see the module docs); [`PlanError::Read`] when reading the current state fails.
    pub fn new<B: Backend>(
        backend: &mut B,
        changes: &[Change],
    ) -> Result<Self, PlanError<B::Error>> {
        let mut p = Planner {
            interface: backend.interface(),
            backend,
            current: Current::default(),
            warnings: Vec::new(),
        };
        let mut steps = Vec::with_capacity(changes.len());
        for (index, change) in changes.iter().enumerate() {
            let step = match *change {
                Change::Cat {
                    resource,
                    domain,
                    class,
                    scope,
                    mask,
                } => p.cat(index, resource, domain, class, scope, mask)?,
                Change::Mba {
                    domain,
                    class,
                    limit,
                } => p.mba(index, domain, class, limit)?,
                Change::Cpu { cpu, class } => p.cpu(index, cpu, class)?,
                Change::Task { task, class } => p.task(index, task, class)?,
            };
            steps.push((index, step));
        }
        Ok(Self {
            steps,
            warnings: p.warnings,
        })
    }

    /// The writes, in order, each with the index of the change it came from.
    #[must_use]
    pub fn steps(&self) -> &[(usize, Step)] {
        &self.steps
    }

    /// What is worth telling about the plan (masks that overlap shareable ways).
    #[must_use]
    pub fn warnings(&self) -> &[PlanWarning] {
        &self.warnings
    }

    /// Whether the plan writes nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The plan without the steps that would write what is already there (applying the same
    /// configuration twice writes nothing the second time).
    #[must_use]
    pub fn without_unchanged(mut self) -> Self {
        self.steps.retain(|(_, s)| !s.is_unchanged());
        self
    }

    /// Writes the steps in order; on the first failure undoes the ones before it, newest
    /// first, and reports which of [`Outcome`]'s cases happened.
    pub fn apply<B: Backend>(self, backend: &mut B) -> Outcome<B::Error> {
        let mut done: Vec<Done> = Vec::with_capacity(self.steps.len());
        for (change, step) in self.steps {
            match step.write(backend) {
                Ok(applied) => done.push(Done {
                    change,
                    step,
                    applied,
                }),
                Err(error) => {
                    let failed = Failed {
                        change,
                        step,
                        error,
                    };
                    let mut not_undone = Vec::new();
                    for d in done.iter().rev() {
                        if let Err(e) = d.step.undo(backend) {
                            not_undone.push((d.step.clone(), e));
                        }
                    }
                    return if not_undone.is_empty() {
                        Outcome::RolledBack { done, failed }
                    } else {
                        Outcome::PartlyChanged {
                            done,
                            failed,
                            not_undone,
                        }
                    };
                }
            }
        }
        Outcome::Applied(done)
    }
}

const fn resource_name(resource: CatResource) -> &'static str {
    match resource {
        CatResource::L3 => "L3",
        CatResource::L2 => "L2",
    }
}

fn no_domain(resource: &'static str, domain: CacheDomain, known: &[CacheDomain]) -> RequestError {
    RequestError::NoSuchDomain {
        resource,
        domain,
        known: Some(
            known
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    }
}

fn no_class(resource: &'static str, class: ClassId, n: usize) -> RequestError {
    crate::LimitError::ClassOutOfRange {
        resource,
        class,
        num_classes: u32::try_from(n).unwrap_or(u32::MAX),
    }
    .into()
}

/// The class's masks after setting `mask` in `scope`; `None` for a data/code scope with CDP
/// off.
fn new_mask(current: CatMask, scope: MaskScope, mask: CacheBitmask) -> Option<CatMask> {
    Some(match (current, scope) {
        (CatMask::Unified(_), MaskScope::Both) => CatMask::Unified(mask),
        (CatMask::Unified(_), _) => return None,
        (CatMask::Cdp { .. }, MaskScope::Both) => CatMask::Cdp {
            data: mask,
            code: mask,
        },
        (CatMask::Cdp { code, .. }, MaskScope::Data) => CatMask::Cdp { data: mask, code },
        (CatMask::Cdp { data, .. }, MaskScope::Code) => CatMask::Cdp { data, code: mask },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeBackend, FakeError};

    fn cat(domain: u32, class: u32, bits: u64) -> Change {
        Change::Cat {
            resource: CatResource::L3,
            domain: CacheDomain::new(domain),
            class: ClassId::new(class),
            scope: MaskScope::Both,
            mask: CacheBitmask::new(bits).unwrap(),
        }
    }

    fn mba(domain: u32, class: u32, percent: u8) -> Change {
        Change::Mba {
            domain: CacheDomain::new(domain),
            class: ClassId::new(class),
            limit: MbaLimit::Percent(percent),
        }
    }

    fn cpu(n: u32, class: u32) -> Change {
        Change::Cpu {
            cpu: LogicalCpu::new(n),
            class: ClassId::new(class),
        }
    }

    /// Classes of every table and every CPU, to compare before and after.
    fn snapshot(b: &mut FakeBackend) -> (Vec<CatClass>, Vec<MbaClass>, Vec<u32>) {
        let cat = b.cat_classes(CatResource::L3, CacheDomain::new(0)).unwrap();
        let mba = b.mba_classes(CacheDomain::new(0)).unwrap();
        let cpus = (0..8).map(|c| b.class_of_cpu(c)).collect();
        (cat, mba, cpus)
    }

    fn changes() -> Vec<Change> {
        vec![
            cat(0, 1, 0xf),
            cat(0, 2, 0xf0),
            mba(0, 1, 50),
            mba(0, 2, 20),
            cpu(1, 1),
            cpu(2, 2),
        ]
    }

    #[test]
    fn a_failure_at_every_write_position_leaves_the_platform_as_before() {
        let n = changes().len();
        for position in 1..=n {
            // arrange
            let mut b = FakeBackend::intel_1s();
            b.associate(LogicalCpu::new(2), ClassId::new(3)).unwrap();
            let before = snapshot(&mut b);
            b.fail_nth_write(position);
            // act
            let plan = Plan::new(&mut b, &changes()).unwrap();
            let outcome = plan.apply(&mut b);
            // assert
            match outcome {
                Outcome::RolledBack { done, failed } => {
                    assert_eq!(done.len(), position - 1);
                    assert_eq!(failed.change, position - 1);
                    assert!(matches!(failed.error, FakeError::Injected(_)));
                }
                other => panic!("position {position}: {other:?}"),
            }
            assert_eq!(snapshot(&mut b), before, "position {position}");
        }
    }

    #[test]
    fn an_undo_that_fails_is_reported_exactly() {
        // arrange: the 2nd write fails, and so does every write after it (the undo)
        let mut b = FakeBackend::intel_1s();
        let plan = Plan::new(&mut b, &changes()).unwrap();
        b.fail_writes_from(2);
        // act
        let outcome = plan.apply(&mut b);
        // assert
        match outcome {
            Outcome::PartlyChanged {
                done,
                failed,
                not_undone,
            } => {
                assert_eq!(done.len(), 1);
                assert_eq!(failed.change, 1);
                assert_eq!(not_undone.len(), 1);
                assert_eq!(not_undone[0].0, done[0].step);
                let e = Outcome::PartlyChanged {
                    done,
                    failed,
                    not_undone,
                }
                .into_result()
                .unwrap_err();
                assert!(e.to_string().contains("partly changed"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_invalid_change_is_refused_by_index_before_any_write() {
        let mut b = FakeBackend::broadwell_2s();
        let mut list = vec![cat(0, 1, 0xf), cat(0, 1, 0x1_fffff), cpu(99, 1)];
        let e = Plan::new(&mut b, &list).unwrap_err();
        assert_eq!(e.index(), 1, "{e}");
        list.remove(1);
        let e = Plan::new(&mut b, &list).unwrap_err();
        assert!(
            matches!(
                e,
                PlanError::Invalid {
                    index: 1,
                    error: RequestError::NoSuchCpu(_)
                }
            ),
            "{e}"
        );
        let e = Plan::new(&mut b, &[mba(0, 1, 50)]).unwrap_err();
        assert!(
            matches!(e, PlanError::Invalid { index: 0, .. }),
            "no MBA: {e}"
        );
        let e = Plan::new(&mut b, &[cat(7, 1, 0xf)]).unwrap_err();
        assert!(e.to_string().contains("L3 domain 7 does not exist"), "{e}");
        let task = Change::Task {
            task: TaskId::new(1),
            class: ClassId::new(1),
        };
        let e = Plan::new(&mut b, &[task]).unwrap_err();
        assert!(matches!(
            e,
            PlanError::Invalid {
                error: RequestError::NeedsOsInterface { .. },
                ..
            }
        ));
        assert!(b.writes.is_empty());
    }

    #[test]
    fn changes_to_one_class_build_on_each_other_and_unchanged_steps_can_be_dropped() {
        let mut b = FakeBackend::broadwell_2s();
        b.enable_l3_cdp();
        let scoped = |scope, bits| Change::Cat {
            resource: CatResource::L3,
            domain: CacheDomain::new(0),
            class: ClassId::new(1),
            scope,
            mask: CacheBitmask::new(bits).unwrap(),
        };
        let (data, code) = (scoped(MaskScope::Data, 0xf), scoped(MaskScope::Code, 0xf0));
        let plan = Plan::new(&mut b, &[data.clone(), code.clone()]).unwrap();
        let Step::Cat { after, .. } = &plan.steps()[1].1 else {
            panic!()
        };
        assert_eq!(
            after.mask,
            CatMask::Cdp {
                data: CacheBitmask::new(0xf).unwrap(),
                code: CacheBitmask::new(0xf0).unwrap()
            }
        );
        let Outcome::Applied(done) = plan.apply(&mut b) else {
            panic!()
        };
        assert_eq!(done.len(), 2);
        let again = Plan::new(&mut b, &[data, code])
            .unwrap()
            .without_unchanged();
        assert!(again.is_empty(), "applied already: {:?}", again.steps());
        let writes = b.writes.len();
        let same = Plan::new(&mut b, &[cat(0, 2, 0xfffff)])
            .unwrap()
            .without_unchanged();
        assert!(same.is_empty());
        assert!(matches!(same.apply(&mut b), Outcome::Applied(d) if d.is_empty()));
        assert_eq!(b.writes.len(), writes, "nothing written");
    }

    #[test]
    fn a_mask_over_shareable_ways_is_a_warning() {
        let mut b = FakeBackend::intel_1s(); // shareable 0x600
        let plan = Plan::new(&mut b, &[cat(0, 1, 0x700)]).unwrap();
        assert_eq!(
            plan.warnings(),
            [PlanWarning::Shareable {
                index: 0,
                resource: CatResource::L3,
                shared: 0x600
            }]
        );
    }

    #[test]
    fn mba_records_the_applied_rounding() {
        let mut b = FakeBackend::intel_1s();
        let plan = Plan::new(&mut b, &[mba(0, 1, 15)]).unwrap();
        let Outcome::Applied(done) = plan.apply(&mut b) else {
            panic!()
        };
        assert_eq!(done[0].applied, Some(MbaLimit::Percent(20)));
    }
}

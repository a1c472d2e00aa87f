//! Allocation as a transaction: a list of [`Change`]s is validated whole against the
//! capabilities and the current state ([`Plan::new`], which reads that state once and
//! writes nothing), then applied in order ([`Plan::write`]); when a write fails, every write
//! the plan made before it is undone, newest first, and the [`Outcome`] says which of
//! "applied", "rolled back" or "partly changed" happened.
//!
//! The contract is the same on both interfaces, for any [`Backend`]:
//! - nothing is written unless every change is valid: the class limits of the interface
//!   ([`Capabilities::check_class`](crate::Capabilities::check_class): on the OS interface the smallest `num_closids`), masks
//!   ([`Capabilities::check_mask`](crate::Capabilities::check_mask)), MBA units and ranges ([`Capabilities::check_mba_limit`](crate::Capabilities::check_mba_limit)),
//!   domains, CPUs, tasks (they exist; the OS interface only), and the current class of every
//!   CPU and task (a CPU or task in another tool's resctrl group is refused:
//!   [`RequestError::ForeignGroup`]);
//! - the writes are the backend's calls, one per step, in the order of the changes (masks,
//!   then bandwidth, then CPUs and tasks, as the caller lists them); a run of consecutive
//!   steps one call can write is one call: CPUs into one class ([`Backend::associate_cpus`];
//!   on resctrl one `cpus_list` write for all of them; [`Failed::cpus`] names them when it
//!   fails), one class's masks or limits in several domains ([`Backend::set_cat_masks`],
//!   [`Backend::set_bandwidth_limits`]; on resctrl one `schemata` write);
//! - a backend keeps one call whole where the interface allows it; the transaction owns
//!   every undo across calls (and of a call that failed part-way);
//! - a failed write is undone with the same calls and the values read by [`Plan::new`];
//!   [`Outcome::PartlyChanged`] lists exactly the steps whose undo failed too;
//! - a named class ([`BackendExt::class_named`]) the plan writes to that is not yet this
//!   library's is claimed first ([`Step::Claim`]): applied, the name is recorded, and the
//!   undo of the plan ([`Plan::undoing`]) gives it up again.
//!
//! A program applies a plan with `rdt_host::transaction::ApplyPlan::apply` (the facade's
//! `rdt_pqos::transaction`), which holds the writers' lock and keeps an intent journal in
//! the run directory, so that the next open rolls back a transaction whose process was
//! killed half-way; the example is there. This module does no I/O: [`Plan::write`] makes
//! the writes and undoes them.

use std::collections::VecDeque;
use std::fmt;

use crate::BackendExt;
use crate::{
    AllocReset, Backend, CacheBitmask, CacheDomain, CatClass, CatResource, ChannelId, ClassId,
    CpuSet, LogicalCpu, MbaClass, MbaLimit, MbaResource, RegionBw, RequestError, Shown, TaskId,
};

/// Which masks of a CAT class a change sets (pqos `-e llc:1=..`, `1d=..`, `1c=..`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
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
    /// A class's memory bandwidth limit (MBA or SMBA) in one L3 domain.
    Mba {
        /// MBA or SMBA.
        resource: MbaResource,
        /// The L3 domain.
        domain: CacheDomain,
        /// The class of service.
        class: ClassId,
        /// The limit, in the unit in force ([`Capabilities::check_mba_limit`]).
        ///
        /// [`Capabilities::check_mba_limit`]: crate::Capabilities::check_mba_limit
        limit: MbaLimit,
    },
    /// One MBA control of a class for one memory region in one L3 domain (RDT 1.3's
    /// region-aware MBA, [`Backend::regions`]; pqos `--alloc-mem-regions`,
    /// `--alloc-domain-id`, `--alloc-{opt,min,max}-bw`).
    RegionMba {
        /// The L3 domain.
        domain: CacheDomain,
        /// The class of service.
        class: ClassId,
        /// The region, the control and its value (control-window units).
        bw: RegionBw,
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
    /// An I/O RDT channel into a class: its link's CLOS tagging register
    /// ([`Backend::io_rdt`], pqos `-a channel:ID=CHANNEL`; a device's channels, `-a dev:`,
    /// are one change each). MSR and MMIO interfaces, where the platform has I/O RDT.
    Channel {
        /// The channel.
        channel: ChannelId,
        /// The class.
        class: ClassId,
    },
    /// Allocation back to the defaults, CDP and MBA CTRL as asked (pqos `-R`,
    /// [`BackendExt::reset_allocation`]). It is the only change of its plan; undoing it writes
    /// back the whole [`AllocState`] it replaced. The plan then gives up every named class
    /// of this library's ([`BackendExt::own_class_names`]) too, one [`Step::Release`] each,
    /// except (OS interface) a group that holds monitor groups, which stays
    /// ([`PlanWarning::NamedClassKept`]).
    Reset(AllocReset),
    /// The named class `name`, standing for `class` ([`BackendExt::class_named`]), made this
    /// library's own ([`BackendExt::claim_class`]): a configuration's class new to the
    /// platform. Planned as [`Step::Claim`], which on the OS interface makes the class's
    /// resctrl group (empty, the defaults); undoing it gives the name up again.
    Claim {
        /// The class the name stands for.
        class: ClassId,
        /// The name.
        name: String,
    },
    /// The existing resctrl control group `name`, which another tool made, adopted as
    /// this library's named class standing for `class` ([`BackendExt::adopt_class`]): it is
    /// recorded as if this library had made it, so that later changes may write to it
    /// (which the planner refuses for another tool's group, [`RequestError::ForeignClass`])
    /// and a [`Change::Release`] may remove it. Only on the operator's word: a migration
    /// from the tool that made it (`pqos --apply FILE --prune --adopt goresctrl`). Planned
    /// as [`Step::Claim`] with `adopted`; undoing it gives the record up and leaves the
    /// group as it was. OS interface only; the group must exist and not be this library's.
    Adopt {
        /// The class the name stands for ([`BackendExt::class_named`]).
        class: ClassId,
        /// The group's name.
        name: String,
    },
    /// The named class `name`, standing for `class`, given up ([`BackendExt::release_class`]):
    /// on the OS interface its resctrl group goes. Only a class of
    /// [`BackendExt::own_class_names`] can be given up ([`RequestError::NotOwnClass`]), and
    /// (OS) not while its group holds monitor groups ([`RequestError::ClassInUse`]), except
    /// a group adopted by an earlier [`Change::Adopt`] of the plan, which goes with the
    /// empty monitor groups its tool left (the backend refuses one that is not empty); move
    /// its CPUs and tasks out in earlier changes. Undoing it claims the name back, and
    /// makes its group again.
    Release {
        /// The class the name stands for.
        class: ClassId,
        /// The name.
        name: String,
    },
}

impl Change {
    /// An L3 mask of `class` in `domain` (both masks with CDP on).
    #[must_use]
    pub const fn l3(domain: CacheDomain, class: ClassId, mask: CacheBitmask) -> Self {
        Self::Cat {
            resource: CatResource::L3,
            domain,
            class,
            scope: MaskScope::Both,
            mask,
        }
    }

    /// An L2 mask of `class` in L2 `domain` (both masks with CDP on).
    #[must_use]
    pub const fn l2(domain: CacheDomain, class: ClassId, mask: CacheBitmask) -> Self {
        Self::Cat {
            resource: CatResource::L2,
            domain,
            class,
            scope: MaskScope::Both,
            mask,
        }
    }

    /// An MBA limit of `class` in L3 `domain`.
    #[must_use]
    pub const fn mba(domain: CacheDomain, class: ClassId, limit: MbaLimit) -> Self {
        Self::bandwidth(MbaResource::Mba, domain, class, limit)
    }

    /// An SMBA limit of `class` in L3 `domain` (AMD units of 1/8 GB/s).
    #[must_use]
    pub const fn smba(domain: CacheDomain, class: ClassId, limit: MbaLimit) -> Self {
        Self::bandwidth(MbaResource::Smba, domain, class, limit)
    }

    /// A limit of `resource` (MBA or SMBA) of `class` in L3 `domain`.
    #[must_use]
    pub const fn bandwidth(
        resource: MbaResource,
        domain: CacheDomain,
        class: ClassId,
        limit: MbaLimit,
    ) -> Self {
        Self::Mba {
            resource,
            domain,
            class,
            limit,
        }
    }

    /// `class`'s mask of `resource` in `domain` back to its reset value, every way (both
    /// CDP halves); `None` where the platform has no such cache allocation. What giving a
    /// class back writes (`rdt_host::lease`, `rdt_config::Config::remove`).
    #[must_use]
    pub fn cat_default(
        caps: &crate::Capabilities,
        resource: CatResource,
        domain: CacheDomain,
        class: ClassId,
    ) -> Option<Self> {
        let mask = caps.cat(resource).map(crate::CatCaps::full_mask)?;
        Some(Self::Cat {
            resource,
            domain,
            class,
            scope: MaskScope::Both,
            mask,
        })
    }

    /// `class`'s limit of `resource` (MBA or SMBA) in L3 `domain` back to its reset value,
    /// unlimited ([`crate::MbaCaps::unlimited`]: 100 %, or the unit's maximum); `None` where
    /// the platform has no such resource.
    #[must_use]
    pub fn bandwidth_default(
        caps: &crate::Capabilities,
        resource: MbaResource,
        domain: CacheDomain,
        class: ClassId,
    ) -> Option<Self> {
        let limit = caps
            .bandwidth(resource)
            .get()
            .map(crate::MbaCaps::unlimited)?;
        Some(Self::bandwidth(resource, domain, class, limit))
    }

    /// `cpu` into `class`.
    #[must_use]
    pub const fn cpu(cpu: LogicalCpu, class: ClassId) -> Self {
        Self::Cpu { cpu, class }
    }

    /// `task` (every thread of a process) into `class` (OS interface).
    #[must_use]
    pub const fn task(task: TaskId, class: ClassId) -> Self {
        Self::Task { task, class }
    }
}

/// One write of a plan, with the value it replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Step {
    /// The masks of one class in one domain ([`Backend::set_cat_masks`]).
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
    /// The limit of one class of MBA or SMBA in one domain ([`Backend::set_bandwidth_limits`]).
    Mba {
        /// MBA or SMBA (journals written before SMBA have no field: MBA).
        #[cfg_attr(feature = "serde", serde(default))]
        resource: MbaResource,
        /// The L3 domain.
        domain: CacheDomain,
        /// The class as it was.
        before: MbaClass,
        /// The class as it will be (before the hardware's rounding).
        after: MbaClass,
    },
    /// One region MBA control of one class in one L3 domain
    /// ([`RegionOps::set_region_bandwidth`](crate::RegionOps::set_region_bandwidth)).
    RegionMba {
        /// The L3 domain.
        domain: CacheDomain,
        /// The class.
        class: ClassId,
        /// The control as it was.
        before: RegionBw,
        /// The control as it will be.
        after: RegionBw,
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
    /// [`IoRdtOps::set_channel_class`](crate::IoRdtOps::set_channel_class) of one channel
    /// (`None`: class 0 with the enable bit clear, as a reset leaves it).
    Channel {
        /// The channel.
        channel: ChannelId,
        /// Its class before.
        before: Option<ClassId>,
        /// Its class after.
        after: Option<ClassId>,
    },
    /// `reset_allocation`.
    Reset {
        /// What the reset sets.
        cfg: AllocReset,
        /// The whole allocation state before it.
        before: Box<AllocState>,
    },
    /// [`AllocState::restore`]: the undo of a [`Step::Reset`] ([`Step::inverse`]).
    Restore {
        /// What the reset that this undoes set (undoing the restore resets again).
        cfg: AllocReset,
        /// The state written back.
        state: Box<AllocState>,
    },
    /// `claim_class`: a named class made this library's ([`Change::Claim`]).
    Claim {
        /// The class the name stands for.
        class: ClassId,
        /// The name.
        name: String,
        /// OS interface: make its resctrl group now (undoing a release of a group that
        /// existed); otherwise the first write to the class makes it.
        #[cfg_attr(feature = "serde", serde(default))]
        group: bool,
        /// Another tool's existing group adopted ([`Change::Adopt`],
        /// [`BackendExt::adopt_class`]): recorded, never made.
        #[cfg_attr(feature = "serde", serde(default))]
        adopted: bool,
    },
    /// `release_class`: a named class given up ([`Change::Release`]).
    Release {
        /// The class the name stood for.
        class: ClassId,
        /// The name.
        name: String,
        /// OS interface: its resctrl group existed when the plan was made (the release
        /// removes it; undoing the release makes it again).
        #[cfg_attr(feature = "serde", serde(default))]
        group: bool,
        /// The undo of an adoption ([`BackendExt::disown_class`]): the record goes, the
        /// group stays as the other tool made it.
        #[cfg_attr(feature = "serde", serde(default))]
        adopted: bool,
    },
}

impl Step {
    /// Whether the step writes what is already there.
    #[must_use]
    pub fn is_unchanged(&self) -> bool {
        match self {
            Self::Cat { before, after, .. } => before == after,
            Self::Mba { before, after, .. } => before == after,
            Self::RegionMba { before, after, .. } => before == after,
            Self::Cpu { before, after, .. } | Self::Task { before, after, .. } => before == after,
            Self::Channel { before, after, .. } => before == after,
            Self::Reset { .. }
            | Self::Restore { .. }
            | Self::Claim { .. }
            | Self::Release { .. } => false,
        }
    }

    /// The class the step writes to, moves into, or names (`None` for a reset and a
    /// restore).
    #[must_use]
    pub const fn class(&self) -> Option<ClassId> {
        match self {
            Self::Cat { after, .. } => Some(after.class),
            Self::Mba { after, .. } => Some(after.class),
            Self::Cpu { after, .. } | Self::Task { after, .. } => Some(*after),
            Self::Channel { after, .. } => *after,
            Self::RegionMba { class, .. }
            | Self::Claim { class, .. }
            | Self::Release { class, .. } => Some(*class),
            Self::Reset { .. } | Self::Restore { .. } => None,
        }
    }

    /// The step that undoes this one, given what this one's write applied (for MBA the
    /// limit the hardware rounded to, [`Done::applied`]; `None` takes the limit asked
    /// for): each write's `before` and `after` swapped (a CDP class's data and code masks
    /// as they were, each), a reset's inverse restores the [`AllocState`] it replaced (and
    /// a restore's resets again), a claim's inverse releases the name and a release's
    /// claims it back (making the group again when there was one). Rolling a transaction
    /// back writes these inverses, and [`Plan::undoing`] plans them.
    #[must_use]
    pub fn inverse(&self, applied: Option<MbaLimit>) -> Self {
        match self {
            Self::Cat {
                resource,
                domain,
                before,
                after,
            } => Self::Cat {
                resource: *resource,
                domain: *domain,
                before: *after,
                after: *before,
            },
            Self::Mba {
                resource,
                domain,
                before,
                after,
            } => Self::Mba {
                resource: *resource,
                domain: *domain,
                before: MbaClass {
                    class: after.class,
                    limit: applied.unwrap_or(after.limit),
                },
                after: *before,
            },
            Self::RegionMba {
                domain,
                class,
                before,
                after,
            } => Self::RegionMba {
                domain: *domain,
                class: *class,
                before: *after,
                after: *before,
            },
            Self::Cpu { cpu, before, after } => Self::Cpu {
                cpu: *cpu,
                before: *after,
                after: *before,
            },
            Self::Task {
                task,
                before,
                after,
            } => Self::Task {
                task: *task,
                before: *after,
                after: *before,
            },
            Self::Channel {
                channel,
                before,
                after,
            } => Self::Channel {
                channel: *channel,
                before: *after,
                after: *before,
            },
            Self::Reset { cfg, before } => Self::Restore {
                cfg: *cfg,
                state: before.clone(),
            },
            Self::Restore { cfg, state } => Self::Reset {
                cfg: *cfg,
                before: state.clone(),
            },
            Self::Claim {
                class,
                name,
                group,
                adopted,
            } => Self::Release {
                class: *class,
                name: name.clone(),
                group: *group,
                adopted: *adopted,
            },
            Self::Release {
                class,
                name,
                group,
                adopted,
            } => Self::Claim {
                class: *class,
                name: name.clone(),
                group: *group,
                adopted: *adopted,
            },
        }
    }

    /// What undoing the step writes back, for logs: `L3 COS1 of domain 0 back to 0xfffff`.
    #[must_use]
    pub fn undo_description(&self) -> String {
        match self {
            Self::Cat {
                resource,
                domain,
                before,
                ..
            } => format!(
                "{resource} COS{} of domain {domain} back to {}",
                before.class, before.mask
            ),
            Self::Mba {
                resource,
                domain,
                before,
                ..
            } => format!(
                "{resource} COS{} of domain {domain} back to {}",
                before.class, before.limit
            ),
            Self::RegionMba {
                domain,
                class,
                before,
                ..
            } => format!(
                "MBA region {} {} of COS{class} in domain {domain} back to {}",
                before.region, before.control, before.value
            ),
            Self::Cpu { cpu, before, .. } => format!("CPU {cpu} back into COS{before}"),
            Self::Task { task, before, .. } => format!("task {task} back into COS{before}"),
            Self::Channel {
                channel,
                before: Some(before),
                ..
            } => format!("I/O RDT channel {channel} back into COS{before}"),
            Self::Channel { channel, .. } => {
                format!("I/O RDT channel {channel} back to no class (enable bit clear)")
            }
            Self::Reset { .. } => "the allocation as it was before the reset".to_owned(),
            Self::Restore { .. } => "the allocation reset again".to_owned(),
            Self::Claim { class, name, .. } => {
                format!("named class {} (COS{class}) given up again", Shown(name))
            }
            Self::Release { class, name, .. } => {
                format!("named class {} (COS{class}) claimed back", Shown(name))
            }
        }
    }

    /// The CPU a [`Step::Cpu`] moves; `None` for the other steps.
    #[must_use]
    pub const fn moved_cpu(&self) -> Option<LogicalCpu> {
        match self {
            Self::Cpu { cpu, .. } => Some(*cpu),
            _ => None,
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
            Self::Mba {
                resource,
                domain,
                after,
                ..
            } => {
                let applied = backend.set_bandwidth_classes(*resource, *domain, &[*after])?;
                Ok(Some(
                    applied
                        .iter()
                        .find(|a| a.class == after.class)
                        .map_or(after.limit, |a| a.limit),
                ))
            }
            Self::RegionMba {
                domain,
                class,
                after,
                ..
            } => match backend.regions() {
                Some(r) => r
                    .set_region_bandwidth(*domain, *class, &[*after])
                    .map(|()| None),
                None => Err(no_region_controls().into()),
            },
            Self::Cpu { cpu, after, .. } => backend.associate(*cpu, *after).map(|()| None),
            Self::Task { task, after, .. } => backend.associate_task(*task, *after).map(|()| None),
            Self::Channel { channel, after, .. } => match backend.io_rdt() {
                Some(io) => io.set_channel_class(*channel, *after).map(|()| None),
                None => Err(RequestError::Unsupported(
                    "I/O RDT channel association needs I/O RDT (an ACPI IRDT table) and the \
                     MSR or MMIO interface"
                        .into(),
                )
                .into()),
            },
            Self::Reset { cfg, .. } => backend.reset_allocation(cfg).map(|()| None),
            Self::Restore { state, .. } => state.restore(backend).map(|_| None),
            Self::Claim {
                class,
                name,
                adopted: true,
                ..
            } => backend.adopt_class(*class, name).map(|()| None),
            Self::Claim {
                class, name, group, ..
            } => backend.claim_class(*class, name, *group).map(|()| None),
            Self::Release {
                class,
                name,
                adopted: true,
                ..
            } => backend.disown_class(*class, name).map(|()| None),
            Self::Release { class, name, .. } => backend.release_class(*class, name).map(|()| None),
        }
    }

    /// Writes back what the step replaced: its [`Step::inverse`]'s write, the one inversion
    /// a rollback, a journal's recovery and an undo plan ([`Plan::undoing`]) all use.
    fn undo<B: Backend>(&self, backend: &mut B) -> Result<(), B::Error> {
        self.inverse(None).write(backend).map(drop)
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
            Self::Mba {
                resource,
                domain,
                after,
                ..
            } => write!(f, "{resource} COS{} of domain {domain}", after.class),
            Self::RegionMba {
                domain,
                class,
                after,
                ..
            } => write!(
                f,
                "MBA region {} {} of COS{class} in domain {domain}",
                after.region, after.control
            ),
            Self::Cpu { cpu, after, .. } => write!(f, "CPU {cpu} into COS{after}"),
            Self::Task { task, after, .. } => write!(f, "task {task} into COS{after}"),
            Self::Channel {
                channel,
                after: Some(after),
                ..
            } => write!(f, "I/O RDT channel {channel} into COS{after}"),
            Self::Channel { channel, .. } => write!(f, "I/O RDT channel {channel} untagged"),
            Self::Reset { .. } => f.write_str("allocation reset"),
            Self::Restore { .. } => f.write_str("allocation restore"),
            Self::Claim { class, name, .. } => {
                write!(f, "named class {} as COS{class}", Shown(name))
            }
            Self::Release { class, name, .. } => {
                write!(f, "named class {} (COS{class}) given up", Shown(name))
            }
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
    /// OS interface: classes of the steps whose `COS<n>` groups do not exist yet.
    new_groups: Vec<ClassId>,
    /// The named classes among the steps' ([`BackendExt::class_names`]).
    names: Vec<(ClassId, String)>,
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
    /// The threads of a core end in classes with different MBA limits on a part that
    /// throttles a core as one ([`crate::ThreadThrottle::Max`] or `Min`: Intel MBA before
    /// 3.0): every thread runs at `applied`, not at its class's limit. One warning per
    /// combination of limits, for every core the plan touches that has it.
    MbaSharedCore {
        /// The first change that touches one of the cores.
        index: usize,
        /// The threads of those cores.
        cpus: CpuSet,
        /// The classes on one core and their limits, by class.
        limits: Vec<(ClassId, MbaLimit)>,
        /// How the core combines them.
        throttle: crate::ThreadThrottle,
        /// The limit the whole core runs at.
        applied: MbaLimit,
    },
    /// A reset leaves a named class of this library's in place (OS interface): its resctrl
    /// group holds monitor groups, which a reset does not remove. Its values are the
    /// defaults and its CPUs and tasks are in the root group all the same.
    NamedClassKept {
        /// The reset's change.
        index: usize,
        /// The name (its group's).
        name: String,
        /// The monitor groups in it, comma-separated paths.
        monitors: String,
    },
}

impl PlanWarning {
    /// The index of the change the warning is about.
    #[must_use]
    pub const fn index(&self) -> usize {
        match self {
            Self::Shareable { index, .. }
            | Self::MbaSharedCore { index, .. }
            | Self::NamedClassKept { index, .. } => *index,
        }
    }
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
            Self::MbaSharedCore {
                cpus,
                limits,
                throttle,
                applied,
                ..
            } => {
                let limits: Vec<String> = limits
                    .iter()
                    .map(|(c, l)| format!("COS{c} {l:#}"))
                    .collect();
                write!(
                    f,
                    "CPUs {cpus} are threads of cores that MBA throttles as one ({throttle} \
                     delay): {} on one core give {applied:#} to each of its threads",
                    limits.join(" and ")
                )
            }
            Self::NamedClassKept { name, monitors, .. } => write!(
                f,
                "named class {} is kept (reset, empty): its resctrl group holds monitor \
                 groups {}",
                Shown(name),
                Shown(monitors)
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
    /// For MBA and SMBA: the limit the hardware applied (Intel rounds to its granularity).
    pub applied: Option<MbaLimit>,
}

/// The write that failed.
#[derive(Debug)]
pub struct Failed<E> {
    /// The index of the change it came from.
    pub change: usize,
    /// The write (the first of a run written as one).
    pub step: Step,
    /// For a run of CPU steps into one class written as one call
    /// ([`Backend::associate_cpus`]): its CPUs; `None` for a single step.
    pub cpus: Option<CpuSet>,
    /// The backend's error.
    pub error: E,
}

/// What [`Plan::write`] (and `rdt_host::transaction::ApplyPlan::apply`) did.
#[derive(Debug)]
#[must_use = "a failed transaction is reported only in its outcome"]
pub enum Outcome<E> {
    /// Every write was made.
    Applied(Vec<Done>),
    /// Nothing was written: the writers' lock could not be taken, or the journal could not
    /// be recorded ([`RequestError::RunState`]).
    NotApplied(E),
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
            Self::NotApplied(error) => Err(ApplyError::NotStarted(error)),
            Self::RolledBack { done, failed } => Err(ApplyError::Write {
                undone: done.len(),
                failed: Box::new(failed),
                not_undone: Vec::new(),
            }),
            Self::PartlyChanged {
                done,
                failed,
                not_undone,
            } => Err(ApplyError::Write {
                undone: done
                    .iter()
                    .filter(|d| !not_undone.iter().any(|(s, _)| *s == d.step))
                    .count(),
                failed: Box::new(failed),
                not_undone,
            }),
        }
    }
}

/// A transaction that did not apply: nothing written, or the failed write and whether the
/// writes before it were undone.
#[derive(Debug)]
pub enum ApplyError<E> {
    /// Nothing was written ([`Outcome::NotApplied`]).
    NotStarted(E),
    /// A write failed ([`Outcome::RolledBack`], [`Outcome::PartlyChanged`]).
    Write {
        /// The write that failed (boxed: the error stays small).
        failed: Box<Failed<E>>,
        /// How many writes before it were undone.
        undone: usize,
        /// The writes that could not be undone, with the undo's error.
        not_undone: Vec<(Step, E)>,
    },
}

impl<E: std::error::Error> fmt::Display for ApplyError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (failed, undone, not_undone) = match self {
            Self::NotStarted(e) => return write!(f, "nothing was changed: {e}"),
            Self::Write {
                failed,
                undone,
                not_undone,
            } => (failed, undone, not_undone),
        };
        match (failed.cpus.as_ref(), failed.step.class()) {
            (Some(cpus), Some(class)) => {
                write!(f, "CPUs {cpus} into COS{class} failed: {}", failed.error)?;
            }
            _ => write!(f, "{} failed: {}", failed.step, failed.error)?,
        }
        if not_undone.is_empty() {
            write!(
                f,
                "; nothing was changed (the {undone} write(s) before it were undone)"
            )
        } else {
            let list: Vec<String> = not_undone
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
        planner::plan(backend, changes)
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

    /// The plan that undoes `done`, the writes an applied plan made
    /// ([`Outcome::Applied`], [`Outcome::into_result`]): each write's [`Step::inverse`],
    /// newest first, exact under CDP (data and code masks each back as they were) and for
    /// MBA from the limit the hardware applied ([`Done::applied`]); a reset's undo restores
    /// the [`AllocState`] it replaced; a named class the plan claimed is given up again (on
    /// the OS interface the resctrl group made for it goes), one it released is claimed back.
    /// It is a plan like any other: `ApplyPlan::apply` writes it as one transaction, journaled,
    /// rolled back on failure. `backend` names the named classes of the writes (for the
    /// journal); nothing is read or written here. An empty `done` gives an empty plan.
    ///
    /// The state is the one before the plan was applied when nothing else changed it in
    /// between; a write that changed nothing was not in `done` and is not undone. On the OS
    /// interface the class numbers of named classes are the process's: another process
    /// binds a recorded group to the number it had unless a `COS<n>` group took it since,
    /// so undo in the process that applied, or check [`BackendExt::class_names`] first.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::fake::FakeBackend;
    /// use rdt_core::transaction::{AllocState, Change, Plan};
    /// use rdt_core::{CacheBitmask, CacheDomain, ClassId, LogicalCpu};
    ///
    /// let mut b = FakeBackend::broadwell_2s();
    /// b.enable_l3_cdp();
    /// let before = AllocState::read(&mut b).unwrap();
    /// let class = ClassId::new(1);
    /// let changes = [
    ///     Change::l3(CacheDomain::new(0), class, CacheBitmask::new(0xf).unwrap()),
    ///     Change::cpu(LogicalCpu::new(2), class),
    /// ];
    /// let done = Plan::new(&mut b, &changes).unwrap().write(&mut b).into_result().unwrap();
    /// let undo = Plan::undoing(&mut b, &done);
    /// undo.write(&mut b).into_result().unwrap();
    /// assert_eq!(AllocState::read(&mut b).unwrap(), before);
    /// ```
    #[must_use]
    pub fn undoing<B: Backend>(backend: &mut B, done: &[Done]) -> Self {
        let steps: Vec<(usize, Step)> = done
            .iter()
            .rev()
            .map(|d| (d.change, d.step.inverse(d.applied)))
            .collect();
        let names = planner::names_of(backend, &steps);
        Self {
            steps,
            warnings: Vec::new(),
            new_groups: Vec::new(),
            names,
        }
    }

    /// Classes of the plan whose `COS<n>` resctrl groups do not exist yet (OS interface;
    /// empty on MSR): a rollback removes them again.
    #[must_use]
    pub fn new_groups(&self) -> &[ClassId] {
        &self.new_groups
    }

    /// The classes the plan writes to that have names ([`BackendExt::class_named`]), for its
    /// journal.
    #[must_use]
    pub fn names(&self) -> &[(ClassId, String)] {
        &self.names
    }

    /// Writes the steps in order; on the first failure undoes that write and the ones
    /// before it, newest first, and reports which of [`Outcome`]'s cases happened. Without
    /// the writers' lock and without a journal: `rdt_host::transaction::ApplyPlan::apply`
    /// (`rdt_pqos::transaction`) takes the lock and records the journal around this, and is
    /// what a program calls.
    pub fn write<B: Backend>(self, backend: &mut B) -> Outcome<B::Error> {
        let mut done: Vec<Done> = Vec::with_capacity(self.steps.len());
        let mut queue: VecDeque<(usize, Step)> = self.steps.into();
        let whole = WholeCalls::of(backend);
        while let Some((change, step)) = queue.pop_front() {
            // A run of steps one call can write: CPUs into one class (resctrl: one
            // cpus_list write), one class's masks or limits in several domains (resctrl:
            // one schemata write).
            let rest = whole.run(&step, false).map_or(0, |run| {
                queue
                    .iter()
                    .take_while(|(_, s)| whole.run(s, false) == Some(run))
                    .count()
            });
            let written = if rest == 0 {
                step.write(backend).map(|applied| vec![applied])
            } else {
                let run: Vec<&Step> = std::iter::once(&step)
                    .chain(queue.iter().take(rest).map(|(_, s)| s))
                    .collect();
                write_run(backend, &run, false)
            };
            match written {
                Ok(applied) => {
                    let mut applied = applied.into_iter();
                    done.push(Done {
                        change,
                        step,
                        applied: applied.next().flatten(),
                    });
                    done.extend(queue.drain(..rest).map(|(change, step)| Done {
                        change,
                        step,
                        applied: applied.next().flatten(),
                    }));
                }
                Err(error) => {
                    // The failed write may have changed part of what it covers (a process
                    // of several threads, some CPUs of a run, a reset): it is undone too.
                    let run: Vec<Step> = std::iter::once(step.clone())
                        .chain(queue.drain(..rest).map(|(_, s)| s))
                        .collect();
                    let cpus = (run.len() > 1 && matches!(step, Step::Cpu { .. }))
                        .then(|| run.iter().filter_map(Step::moved_cpu).collect());
                    let newest_first: Vec<&Step> = run.iter().rev().collect();
                    let not_undone = undo_steps(backend, &newest_first)
                        .into_iter()
                        .map(|(i, e)| (newest_first[i].clone(), e))
                        .collect();
                    let failed = Failed {
                        change,
                        step,
                        cpus,
                        error,
                    };
                    return roll_back(backend, done, failed, not_undone);
                }
            }
        }
        Outcome::Applied(done)
    }
}

/// What makes consecutive steps one backend call: CPUs into one class
/// ([`Backend::associate_cpus`]), one class's masks ([`Backend::set_cat_masks`]) or limits
/// ([`Backend::set_bandwidth_limits`]) in several domains, one class's region MBA controls
/// (one [`RegionOps::set_region_bandwidth`](crate::RegionOps::set_region_bandwidth) call
/// per domain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    Cpus(ClassId),
    Cat(CatResource, ClassId),
    Bandwidth(MbaResource, ClassId),
    Regions(ClassId),
}

/// Which runs a backend writes as one call. CPUs always (one `cpus_list` write on resctrl;
/// on the MSR interface the same IA32_PQR_ASSOC writes as one at a time). A class's region
/// MBA controls always: the MMIO interface keeps four regions' fields of a control in one
/// MARC register, and one call per domain writes each register once (2 regions x 2 domains
/// of one control: 2 register writes, not 4); the journal holds every control's old value,
/// so undoing the run (one call again) puts each register back exactly. A class's domains
/// only where that call is one write, all or nothing: resctrl's `schemata`. On the MSR
/// interface each domain is a register write of its own either way, and a step at a time
/// tells exactly which domain failed (pqos's `SOCKET 1 L3CA COS1 - FAILED!`).
#[derive(Clone, Copy, Debug)]
struct WholeCalls {
    domains: bool,
}

impl WholeCalls {
    fn of<B: Backend + ?Sized>(backend: &B) -> Self {
        Self {
            domains: backend.interface() == crate::Interface::Os,
        }
    }

    /// The run `step` can join, writing it (`undo` false) or undoing it.
    fn run(self, step: &Step, undo: bool) -> Option<Run> {
        match step {
            Step::Cpu { before, after, .. } => Some(Run::Cpus(if undo { *before } else { *after })),
            Step::Cat {
                resource, after, ..
            } if self.domains => Some(Run::Cat(*resource, after.class)),
            Step::Mba {
                resource, after, ..
            } if self.domains => Some(Run::Bandwidth(*resource, after.class)),
            Step::RegionMba { class, .. } => Some(Run::Regions(*class)),
            _ => None,
        }
    }
}

/// Writes (or, with `undo`, writes back) the steps of one [`Run`] as one call; for MBA, the
/// limit the hardware applied per step.
fn write_run<B: Backend>(
    backend: &mut B,
    run: &[&Step],
    undo: bool,
) -> Result<Vec<Option<MbaLimit>>, B::Error> {
    let steps: Vec<Step> = run
        .iter()
        .map(|s| if undo { s.inverse(None) } else { (*s).clone() })
        .collect();
    match steps.first() {
        Some(Step::Cpu { after, .. }) => {
            let cpus: CpuSet = steps.iter().filter_map(Step::moved_cpu).collect();
            backend.associate_cpus(&cpus, *after)?;
            Ok(vec![None; steps.len()])
        }
        Some(Step::Cat { resource, .. }) => {
            let masks: Vec<(CacheDomain, CatClass)> = steps
                .iter()
                .filter_map(|s| match s {
                    Step::Cat { domain, after, .. } => Some((*domain, *after)),
                    _ => None,
                })
                .collect();
            backend.set_cat_masks(*resource, &masks)?;
            Ok(vec![None; steps.len()])
        }
        Some(Step::Mba { resource, .. }) => {
            let limits: Vec<(CacheDomain, MbaClass)> = steps
                .iter()
                .filter_map(|s| match s {
                    Step::Mba { domain, after, .. } => Some((*domain, *after)),
                    _ => None,
                })
                .collect();
            let applied = backend.set_bandwidth_limits(*resource, &limits)?;
            Ok(limits
                .iter()
                .enumerate()
                .map(|(i, (_, asked))| Some(applied.get(i).map_or(asked.limit, |(_, a)| a.limit)))
                .collect())
        }
        Some(Step::RegionMba { class, .. }) => {
            // per domain, in the order the domains first appear, the controls in step order
            let mut by_domain: Vec<(CacheDomain, Vec<RegionBw>)> = Vec::new();
            for s in &steps {
                if let Step::RegionMba { domain, after, .. } = s {
                    match by_domain.iter_mut().find(|(d, _)| d == domain) {
                        Some((_, values)) => values.push(*after),
                        None => by_domain.push((*domain, vec![*after])),
                    }
                }
            }
            let class = *class;
            let Some(r) = backend.regions() else {
                return Err(no_region_controls().into());
            };
            for (domain, values) in &by_domain {
                r.set_region_bandwidth(*domain, class, values)?;
            }
            Ok(vec![None; steps.len()])
        }
        _ => steps.iter().map(|s| s.write(backend)).collect(),
    }
}

/// A region MBA step on a backend without region controls.
fn no_region_controls() -> RequestError {
    RequestError::Unsupported("region-aware MBA needs the MMIO interface (RDT 1.3)".into())
}

/// After `failed`: undoes `done`, newest first, and says whether everything is as before
/// (`not_undone` holds what undoing the failed write itself could not put back).
fn roll_back<B: Backend>(
    backend: &mut B,
    done: Vec<Done>,
    failed: Failed<B::Error>,
    mut not_undone: Vec<(Step, B::Error)>,
) -> Outcome<B::Error> {
    let newest_first: Vec<&Step> = done.iter().rev().map(|d| &d.step).collect();
    for (i, e) in undo_steps(backend, &newest_first) {
        not_undone.push((newest_first[i].clone(), e));
    }
    if not_undone.is_empty() {
        Outcome::RolledBack { done, failed }
    } else {
        Outcome::PartlyChanged {
            done,
            failed,
            not_undone,
        }
    }
}

/// Undoes `steps` in the order given (newest first) and returns the failures by index. A
/// run of steps (CPUs going back to one class, one class's masks or limits in several
/// domains) is one call; if it fails, each of its steps is undone alone, so each failure
/// is its own.
/// A journal's recovery (`rdt_host::transaction::recover`) undoes a killed transaction's
/// steps with it.
pub fn undo_steps<B: Backend>(backend: &mut B, steps: &[&Step]) -> Vec<(usize, B::Error)> {
    let mut failed = Vec::new();
    let whole = WholeCalls::of(backend);
    let mut i = 0;
    while i < steps.len() {
        let n = whole.run(steps[i], true).map_or(1, |run| {
            steps[i..]
                .iter()
                .take_while(|s| whole.run(s, true) == Some(run))
                .count()
        });
        if n > 1 && write_run(backend, &steps[i..i + n], true).is_ok() {
            i += n;
            continue;
        }
        for (j, step) in steps.iter().enumerate().skip(i).take(n) {
            if let Err(e) = step.undo(backend) {
                failed.push((j, e));
            }
        }
        i += n;
    }
    failed
}

/// Runs `f` holding `backend`'s writers' lock ([`BackendExt::hold_writers`]), released when
/// `f` returns or panics: a caller that reads the state, decides and writes (a transaction,
/// a configuration's plan and apply) keeps other writers out for the whole of it.
///
/// # Errors
/// The lock cannot be taken (the backend's lock timeout passed); `f` does not run.
pub fn with_writers<B: Backend, T>(
    backend: &mut B,
    f: impl FnOnce(&mut B) -> T,
) -> Result<T, B::Error> {
    /// Releases the hold when dropped, on a panic too.
    struct Held<'a, B: Backend>(&'a mut B);
    impl<B: Backend> Drop for Held<'_, B> {
        fn drop(&mut self) {
            self.0.release_writers();
        }
    }
    backend.hold_writers()?;
    let held = Held(backend);
    Ok(f(&mut *held.0))
}

mod planner;
mod state;

pub use state::{AllocState, Restored};

/// The longest class name a run directory's record of named classes keeps, in bytes (a
/// resctrl group name is a kernfs name, at most 255 bytes; a configuration's names are at
/// most 64).
pub const MAX_RECORDED_NAME: usize = 255;

/// Whether `name` can be recorded as a named class (`rdt_host::runfile::NameRecord`, and
/// so kept when read): 1 to [`MAX_RECORDED_NAME`] bytes, no whitespace, control character
/// or `/`. The planner refuses to claim a class under any other name.
#[must_use]
pub fn is_recordable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_RECORDED_NAME
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
}

/// The free classes of service of `backend`, ascending: every class from 1 below the
/// interface's class count ([`crate::Capabilities::classes`]) that no CPU is associated
/// with, no task is in (OS interface), whose masks are all ways in every L3 and L2 domain
/// and whose MBA and SMBA limits are "no limit" in every L3 domain (a class a user limited
/// with `pqos -e smba:15=16` is not handed out with that limit), and that is not in `taken` (classes spoken for, such as other named classes). COS 0,
/// every CPU's default, is never free, nor is the CLOSID that enabled L3 I/O allocation
/// keeps ([`BackendExt::io_alloc`]: the kernel leaves one group fewer then).
///
/// # Errors
/// A read fails.
pub fn free_classes<B: Backend>(
    backend: &mut B,
    taken: &[ClassId],
) -> Result<Vec<ClassId>, B::Error> {
    let n = backend.capabilities().classes(backend.interface());
    let io = backend
        .io_alloc()?
        .filter(|io| io.enabled)
        .map(|io| io.class);
    let mut free: Vec<ClassId> = (1..n)
        .map(ClassId::new)
        .filter(|c| !taken.contains(c) && Some(*c) != io)
        .collect();
    for (_, class) in backend.cpu_classes()? {
        if let Some(c) = class {
            free.retain(|f| *f != c);
        }
    }
    for resource in [CatResource::L3, CatResource::L2] {
        let Some(full) = backend
            .capabilities()
            .cat(resource)
            .map(crate::CatCaps::full_mask)
        else {
            continue;
        };
        let domains = match resource {
            CatResource::L3 => backend.topology().l3_domains(),
            CatResource::L2 => backend.topology().l2_domains(),
        };
        for d in domains {
            for c in backend.cat_classes(resource, d)? {
                if !c.mask.is_all(full) {
                    free.retain(|f| *f != c.class);
                }
            }
        }
    }
    for resource in MbaResource::ALL {
        let Some(unlimited) = backend
            .capabilities()
            .bandwidth(resource)
            .get()
            .map(crate::MbaCaps::unlimited)
        else {
            continue;
        };
        // one read of each class's limits for every domain (resctrl: one schemata per class)
        let domains = backend.topology().l3_domains();
        for c in backend
            .bandwidth_classes_in(resource, &domains)?
            .into_iter()
            .flatten()
        {
            if c.limit != unlimited {
                free.retain(|f| *f != c.class);
            }
        }
    }
    if backend.interface() == crate::Interface::Os {
        for c in backend.groups()?.into_iter().filter_map(|g| g.class) {
            if free.contains(&c) && !backend.tasks_of_class(c)?.is_empty() {
                free.retain(|f| *f != c);
            }
        }
    }
    Ok(free)
}

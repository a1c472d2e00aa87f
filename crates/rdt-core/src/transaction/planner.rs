//! [`Plan::new`]: reads the state each change replaces, once, and validates the change.

use std::collections::BTreeMap;

use super::{AllocState, Change, MaskScope, Plan, PlanError, PlanWarning, Step};
use crate::BackendExt;
use crate::{
    AllocReset, Backend, BackendError, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource,
    ChannelId, ClassId, GroupKind, GroupOwner, Interface, LogicalCpu, MbaClass, MbaLimit,
    MbaResource, RegionBw, RequestError, TaskId,
};

/// The current state the plan read, updated as its steps are planned.
#[derive(Default)]
struct Current {
    cat: BTreeMap<(CatResource, CacheDomain), Vec<CatClass>>,
    mba: BTreeMap<(MbaResource, CacheDomain), Vec<MbaClass>>,
    cpus: BTreeMap<LogicalCpu, ClassId>,
    tasks: BTreeMap<TaskId, ClassId>,
    regions: BTreeMap<(CacheDomain, ClassId), Vec<RegionBw>>,
    channels: BTreeMap<ChannelId, Option<ClassId>>,
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
    /// Whether `current.cpus` holds every CPU's class yet.
    cpus_read: bool,
    /// [`BackendExt::exclusive_ways`] per cache level and domain, read once.
    exclusive: BTreeMap<(CatResource, CacheDomain), Vec<crate::ExclusiveWays>>,
    /// [`BackendExt::groups`], read once (OS interface, named classes given up).
    groups: Option<Vec<crate::GroupInfo>>,
    /// The names adopted by earlier changes of the plan ([`Change::Adopt`]): a later
    /// release of one is planned as of this library's.
    adopted: Vec<String>,
}

impl<B: Backend> Planner<'_, B> {
    /// [`BackendExt::groups`], read on first use.
    fn groups(&mut self, index: usize) -> Result<&[crate::GroupInfo], PlanError<B::Error>> {
        if self.groups.is_none() {
            self.groups = Some(self.backend.groups().map_err(|e| read_error(index, e))?);
        }
        Ok(self.groups.as_deref().unwrap_or_default())
    }

    /// OS interface: the monitor groups under the control group `name`, comma-separated
    /// (empty when none, and always on MSR).
    fn monitors_in(&mut self, index: usize, name: &str) -> Result<String, PlanError<B::Error>> {
        if self.interface != Interface::Os {
            return Ok(String::new());
        }
        let prefix = format!("{name}/");
        Ok(self
            .groups(index)?
            .iter()
            .filter(|g| g.kind == GroupKind::Monitor && g.path.starts_with(&prefix))
            .map(|g| g.path.clone())
            .collect::<Vec<_>>()
            .join(", "))
    }

    fn claim(
        &mut self,
        index: usize,
        class: ClassId,
        name: &str,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        if !super::is_recordable_name(name) {
            return Err(invalid(RequestError::Unsupported(format!(
                "`{name}` cannot name a class: 1 to 255 bytes, no whitespace, control \
                 character or `/`"
            ))));
        }
        self.backend
            .capabilities()
            .check_class(self.interface, class)
            .map_err(|e| invalid(e.into()))?;
        // On the OS interface the class is its group: made now, even if nothing is written
        // to it, so that the name is recorded (and its claim not planned again).
        Ok(Step::Claim {
            class,
            name: name.to_owned(),
            group: self.interface == Interface::Os,
            adopted: false,
        })
    }

    /// [`Change::Adopt`]: another tool's existing control group `name` made this library's.
    fn adopt(
        &mut self,
        index: usize,
        class: ClassId,
        name: &str,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        if self.interface != Interface::Os {
            return Err(invalid(RequestError::Unsupported(format!(
                "adopting `{name}`: only a resctrl group another tool made can be adopted (OS \
                 interface)"
            ))));
        }
        let own = self.backend.own_class_names();
        let exists = self
            .groups(index)?
            .iter()
            .any(|g| g.kind == GroupKind::Control && g.path == name);
        if !exists || own.iter().any(|(_, n)| n == name) {
            return Err(invalid(RequestError::Unsupported(format!(
                "adopting `{name}`: {}",
                if exists {
                    "it is this library's already"
                } else {
                    "there is no such control group"
                }
            ))));
        }
        self.adopted.push(name.to_owned());
        Ok(Step::Claim {
            class,
            name: name.to_owned(),
            group: false,
            adopted: true,
        })
    }

    fn release(
        &mut self,
        index: usize,
        class: ClassId,
        name: &str,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        let own = self.backend.own_class_names();
        if !own.iter().any(|(c, n)| *c == class && n == name)
            && !self.adopted.iter().any(|n| n == name)
        {
            return Err(invalid(RequestError::NotOwnClass {
                name: name.to_owned(),
            }));
        }
        // an adopted group (another tool's, on the operator's word) goes with the empty
        // monitor groups that tool left in it: the backend removes them, and refuses one
        // that is not empty (`NamedClasses::release_class`)
        let adopted = self.adopted.iter().any(|n| n == name);
        let monitors = if adopted {
            String::new()
        } else {
            self.monitors_in(index, name)?
        };
        if !monitors.is_empty() {
            return Err(invalid(RequestError::ClassInUse {
                name: name.to_owned(),
                groups: monitors,
            }));
        }
        let group = self.interface == Interface::Os
            && self
                .groups(index)?
                .iter()
                .any(|g| g.kind == GroupKind::Control && g.path == name);
        Ok(Step::Release {
            class,
            name: name.to_owned(),
            group,
            adopted: false,
        })
    }

    /// The claims the writes of `steps` need: a named class ([`BackendExt::class_named`]) that
    /// is written to or moved into but is not yet this library's, and not claimed by the
    /// plan already, is claimed before its first write, so that applying the plan records
    /// the name (and undoing it gives the name up). On the OS interface, not a group
    /// another tool made: writing to it does not make it ours.
    fn claims(
        &mut self,
        steps: &[(usize, Step)],
    ) -> Result<Vec<(usize, Step)>, PlanError<B::Error>> {
        let names = self.backend.class_names();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let own: Vec<String> = self
            .backend
            .own_class_names()
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let claimed = |class: ClassId, out: &[(usize, Step)]| {
            steps.iter().chain(out).any(|(_, s)| {
                matches!(s, Step::Claim { class: c, .. } | Step::Release { class: c, .. } if *c == class)
            })
        };
        let mut out: Vec<(usize, Step)> = Vec::new();
        for (index, step) in steps {
            let Some(class) = step.class() else { continue };
            let Some((_, name)) = names.iter().find(|(c, _)| *c == class) else {
                continue;
            };
            // (a name that cannot be recorded stays this process's)
            if own.contains(name) || claimed(class, &out) || !super::is_recordable_name(name) {
                continue;
            }
            // Another tool's group of that name: writing its allocation would take it over
            // (its ways), so that is refused unless adopted ([`Change::Adopt`]); moving a task
            // into it joins it as runc joins a `closID` group, and leaves it the other tool's
            // (not claimed).
            if self.interface == Interface::Os
                && self
                    .groups(*index)?
                    .iter()
                    .any(|g| g.kind == GroupKind::Control && g.path == *name)
            {
                if matches!(step, Step::Task { .. }) {
                    continue;
                }
                return Err(PlanError::Invalid {
                    index: *index,
                    error: RequestError::ForeignClass { name: name.clone() },
                });
            }
            out.push((*index, self.claim(*index, class, name)?));
        }
        Ok(out)
    }

    /// After a reset: every named class of this library's given up, but (OS) one whose
    /// group holds monitor groups, which is kept with a warning.
    fn release_all(
        &mut self,
        index: usize,
        steps: &mut Vec<(usize, Step)>,
    ) -> Result<(), PlanError<B::Error>> {
        for (class, name) in self.backend.own_class_names() {
            let monitors = self.monitors_in(index, &name)?;
            if monitors.is_empty() {
                steps.push((index, self.release(index, class, &name)?));
            } else {
                self.warnings.push(PlanWarning::NamedClassKept {
                    index,
                    name,
                    monitors,
                });
            }
        }
        Ok(())
    }

    fn reset(&mut self, index: usize, cfg: AllocReset) -> Result<Step, PlanError<B::Error>> {
        let ctrl = self.backend.mba_ctrl();
        self.backend
            .capabilities()
            .check_alloc_reset(self.interface, &cfg, ctrl)
            .map_err(|error| PlanError::Invalid { index, error })?;
        let before = AllocState::read(self.backend).map_err(|e| read_error(index, e))?;
        Ok(Step::Reset {
            cfg,
            before: Box::new(before),
        })
    }

    /// The classes (other than COS 0) the steps write whose `COS<n>` groups do not exist
    /// (OS interface; none on MSR, which has no groups).
    fn new_groups(&mut self, steps: &[(usize, Step)]) -> Result<Vec<ClassId>, PlanError<B::Error>> {
        let mut classes: Vec<ClassId> = steps
            .iter()
            .filter_map(|(_, s)| s.class())
            .filter(|c| c.get() != 0)
            .collect();
        if self.interface != crate::Interface::Os || classes.is_empty() {
            return Ok(Vec::new());
        }
        classes.sort_unstable();
        classes.dedup();
        let index = steps.first().map_or(0, |(i, _)| *i);
        let groups = self.backend.groups().map_err(|e| read_error(index, e))?;
        classes.retain(|c| {
            !groups.iter().any(|g| {
                g.kind == GroupKind::Control && g.owner == GroupOwner::Pqos && g.class == Some(*c)
            })
        });
        Ok(classes)
    }

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
        if self.interface == Interface::Os {
            let exclusive = match self.exclusive.entry((resource, domain)) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(
                    self.backend
                        .exclusive_ways(resource, domain)
                        .map_err(|e| read_error(index, e))?,
                ),
            };
            if let Some(x) = exclusive
                .iter()
                .find(|x| x.class != Some(class) && x.bits & mask.bits() != 0)
            {
                return Err(invalid(RequestError::ExclusiveOverlap {
                    resource,
                    class,
                    mask: mask.bits(),
                    group: x.group.clone(),
                    overlap: x.bits & mask.bits(),
                }));
            }
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
        // the class as it will be written, checked as every backend checks it
        self.backend
            .capabilities()
            .check_cat(resource, entry)
            .map_err(invalid)?;
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
        resource: MbaResource,
        domain: CacheDomain,
        class: ClassId,
        limit: MbaLimit,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        let caps = self.backend.capabilities();
        caps.check_bandwidth_limit(self.interface, resource, class, limit)
            .map_err(invalid)?;
        if self.interface == Interface::Os {
            caps.check_class(self.interface, class)
                .map_err(|e| invalid(e.into()))?;
        }
        let domains = self.backend.topology().l3_domains();
        if !domains.contains(&domain) {
            return Err(invalid(no_domain(resource.name(), domain, &domains)));
        }
        let table = self.bandwidth_table(index, resource, domain)?;
        let Some(entry) = table.iter_mut().find(|c| c.class == class) else {
            return Err(invalid(no_class(resource.name(), class, table.len())));
        };
        let before = *entry;
        entry.limit = limit;
        Ok(Step::Mba {
            resource,
            domain,
            before,
            after: *entry,
        })
    }

    /// A region MBA control: checked against the platform's regions and control window
    /// (value 0 ..= window), the class and the domain; the current value read once per
    /// class and domain.
    fn region_mba(
        &mut self,
        index: usize,
        domain: CacheDomain,
        class: ClassId,
        bw: RegionBw,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        self.backend
            .capabilities()
            .check_class(self.interface, class)
            .map_err(|e| invalid(e.into()))?;
        let domains = self.backend.topology().l3_domains();
        if !domains.contains(&domain) {
            return Err(invalid(no_domain("MBA region", domain, &domains)));
        }
        let Some(r) = self.backend.regions() else {
            return Err(invalid(RequestError::Unsupported(
                "region-aware MBA needs the MMIO interface (RDT 1.3: --iface=mmio)".into(),
            )));
        };
        // every change's value, not only the first of its class and domain
        let window = r.bw_window();
        if bw.value > window {
            return Err(invalid(RequestError::Unsupported(format!(
                "MBA region {} {} value {} is above the control window {window}",
                bw.region, bw.control, bw.value
            ))));
        }
        let entry = self.current.regions.entry((domain, class));
        let table = match entry {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => v.insert(
                r.region_bandwidth(domain, class)
                    .map_err(|e| read_error(index, e))?,
            ),
        };
        let Some(slot) = table
            .iter_mut()
            .find(|c| c.region == bw.region && c.control == bw.control)
        else {
            return Err(invalid(RequestError::Unsupported(format!(
                "memory region {} does not exist on this platform",
                bw.region
            ))));
        };
        let before = *slot;
        *slot = bw;
        Ok(Step::RegionMba {
            domain,
            class,
            before,
            after: bw,
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
        self.read_cpus(index)?;
        let before = match self.current.cpus.get(&cpu) {
            Some(c) => *c,
            // in another tool's group: class_of says which
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

    /// The classes of `resource` in `domain` as the plan has them so far (read on first use).
    fn bandwidth_table(
        &mut self,
        index: usize,
        resource: MbaResource,
        domain: CacheDomain,
    ) -> Result<&mut Vec<MbaClass>, PlanError<B::Error>> {
        Ok(match self.current.mba.entry((resource, domain)) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => v.insert(
                self.backend
                    .bandwidth_classes(resource, domain)
                    .map_err(|e| read_error(index, e))?,
            ),
        })
    }

    /// One read of every CPU's class (resctrl: each group's `cpus_list` once), on first use.
    fn read_cpus(&mut self, index: usize) -> Result<(), PlanError<B::Error>> {
        if !self.cpus_read {
            for (c, class) in self
                .backend
                .cpu_classes()
                .map_err(|e| read_error(index, e))?
            {
                if let Some(class) = class {
                    self.current.cpus.entry(c).or_insert(class);
                }
            }
            self.cpus_read = true;
        }
        Ok(())
    }

    /// [`PlanWarning::MbaSharedCore`] for every core the plan touches (a thread moved, or
    /// the MBA limit of a thread's class changed) whose threads end in classes with
    /// different MBA limits where the part throttles a core as one
    /// ([`BackendExt::mba_thread_throttle`]). Needs the cores of the topology (the MSR
    /// interface's x2APIC topology, a CPUID dump); nothing is read otherwise.
    fn shared_cores(&mut self, steps: &[(usize, Step)]) -> Result<(), PlanError<B::Error>> {
        let per_core = matches!(
            self.backend
                .capabilities()
                .mba
                .get()
                .and_then(crate::MbaCaps::thread_throttle),
            Some(crate::ThreadThrottle::Max)
        );
        let mut cores: BTreeMap<(u32, u32), Vec<(LogicalCpu, CacheDomain)>> = BTreeMap::new();
        for p in self.backend.topology().cpus() {
            if let (Some(core), Some(l3)) = (p.core, p.l3) {
                cores
                    .entry((p.package, core))
                    .or_default()
                    .push((p.cpu, l3));
            }
        }
        cores.retain(|_, threads| threads.len() > 1);
        if !per_core || cores.is_empty() {
            return Ok(());
        }
        let (moved, limited) = touched(steps);
        if moved.is_empty() && limited.is_empty() {
            return Ok(());
        }
        let first = steps.first().map_or(0, |(i, _)| *i);
        self.read_cpus(first)?;
        let mut throttles: BTreeMap<CacheDomain, Option<crate::ThreadThrottle>> = BTreeMap::new();
        for threads in cores.values() {
            let Some(classes) = threads
                .iter()
                .map(|(cpu, _)| self.current.cpus.get(cpu).copied())
                .collect::<Option<Vec<ClassId>>>()
            else {
                continue; // a thread in another tool's group
            };
            let domain = threads[0].1;
            let touched = threads
                .iter()
                .zip(&classes)
                .filter_map(|((cpu, _), class)| {
                    moved
                        .get(cpu)
                        .or_else(|| limited.get(&(domain, *class)))
                        .copied()
                })
                .min();
            let Some(index) = touched else { continue };
            let table = self.bandwidth_table(index, MbaResource::Mba, domain)?;
            let limits: Vec<(ClassId, MbaLimit)> = classes
                .iter()
                .filter_map(|c| table.iter().find(|m| m.class == *c).map(|m| (*c, m.limit)))
                .collect();
            if limits.len() != classes.len() || limits.iter().all(|(_, l)| *l == limits[0].1) {
                continue;
            }
            let throttle = match throttles.entry(domain) {
                std::collections::btree_map::Entry::Occupied(o) => *o.get(),
                std::collections::btree_map::Entry::Vacant(v) => *v.insert(
                    self.backend
                        .mba_thread_throttle(domain)
                        .map_err(|e| read_error(index, e))?,
                ),
            };
            let Some(throttle) = throttle else { continue };
            let all: Vec<MbaLimit> = limits.iter().map(|(_, l)| *l).collect();
            let Some(applied) = throttle.core_limit(&all) else {
                continue;
            };
            // one warning per combination of limits, naming every core's threads
            let mut limits = limits;
            limits.sort_unstable_by_key(|(c, _)| *c);
            limits.dedup();
            let same = self.warnings.iter_mut().find_map(|w| match w {
                PlanWarning::MbaSharedCore {
                    index: i,
                    cpus,
                    limits: l,
                    throttle: t,
                    applied: a,
                } if *l == limits && *t == throttle && *a == applied => Some((i, cpus)),
                _ => None,
            });
            if let Some((i, cpus)) = same {
                *i = (*i).min(index);
                cpus.extend(threads.iter().map(|(c, _)| *c));
            } else {
                self.warnings.push(PlanWarning::MbaSharedCore {
                    index,
                    cpus: threads.iter().map(|(c, _)| *c).collect(),
                    limits,
                    throttle,
                    applied,
                });
            }
        }
        Ok(())
    }

    /// A channel into a class: the interface reaches I/O RDT, the channel exists and its link
    /// tags CLOS, the class is within the platform's (pqos `hw_alloc_assoc_set_channel`:
    /// `class_id` below the L3 CAT class count).
    fn channel(
        &mut self,
        index: usize,
        channel: ChannelId,
        class: ClassId,
    ) -> Result<Step, PlanError<B::Error>> {
        let invalid = |error: RequestError| PlanError::Invalid { index, error };
        self.backend
            .capabilities()
            .check_class(self.interface, class)
            .map_err(|e| invalid(e.into()))?;
        let Some(io) = self.backend.io_rdt() else {
            return Err(invalid(RequestError::Unsupported(
                "I/O RDT channel association needs I/O RDT (an ACPI IRDT table) and the MSR \
                 or MMIO interface"
                    .into(),
            )));
        };
        let info = io
            .io_channels()
            .into_iter()
            .find(|c| c.id == channel)
            .ok_or_else(|| {
                invalid(RequestError::IoRdt(format!(
                    "I/O RDT channel {channel} is not in the ACPI IRDT table \
                     (`--print-io-devs` lists the channels)"
                )))
            })?;
        if !info.clos_tagging {
            return Err(invalid(RequestError::IoRdt(format!(
                "I/O RDT channel {channel}: its link does not tag CLOS (IRDT RCS flags bit 2)"
            ))));
        }
        let before = match self.current.channels.get(&channel) {
            Some(c) => *c,
            None => io
                .channel_class(channel)
                .map_err(|e| read_error(index, e))?,
        };
        self.current.channels.insert(channel, Some(class));
        Ok(Step::Channel {
            channel,
            before,
            after: Some(class),
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

/// What `steps` touch, each with the first step's index: the CPUs they move, and the (L3
/// domain, class) pairs whose MBA limit they set.
type Touched = (
    BTreeMap<LogicalCpu, usize>,
    BTreeMap<(CacheDomain, ClassId), usize>,
);

fn touched(steps: &[(usize, Step)]) -> Touched {
    let (mut moved, mut limited) = (BTreeMap::new(), BTreeMap::new());
    for (index, step) in steps {
        match step {
            Step::Cpu { cpu, .. } => {
                moved.entry(*cpu).or_insert(*index);
            }
            Step::Mba {
                resource: MbaResource::Mba,
                domain,
                after,
                ..
            } => {
                limited.entry((*domain, after.class)).or_insert(*index);
            }
            _ => {}
        }
    }
    (moved, limited)
}

/// [`Plan::new`].
pub(super) fn plan<B: Backend>(
    backend: &mut B,
    changes: &[Change],
) -> Result<Plan, PlanError<B::Error>> {
    if let Some(i) = changes.iter().position(|c| matches!(c, Change::Reset(_)))
        && changes.len() > 1
    {
        return Err(PlanError::Invalid {
            index: if i == 0 { 1 } else { i },
            error: RequestError::Unsupported(
                "an allocation reset is a plan of its own: it cannot be combined with other \
                 changes"
                    .into(),
            ),
        });
    }
    let mut p = Planner {
        interface: backend.interface(),
        backend,
        current: Current::default(),
        warnings: Vec::new(),
        cpus_read: false,
        exclusive: BTreeMap::new(),
        groups: None,
        adopted: Vec::new(),
    };
    let mut steps = Vec::with_capacity(changes.len());
    for (index, change) in changes.iter().enumerate() {
        let step = match change {
            &Change::Cat {
                resource,
                domain,
                class,
                scope,
                mask,
            } => p.cat(index, resource, domain, class, scope, mask)?,
            &Change::Mba {
                resource,
                domain,
                class,
                limit,
            } => p.mba(index, resource, domain, class, limit)?,
            &Change::RegionMba { domain, class, bw } => p.region_mba(index, domain, class, bw)?,
            &Change::Cpu { cpu, class } => p.cpu(index, cpu, class)?,
            &Change::Task { task, class } => p.task(index, task, class)?,
            &Change::Channel { channel, class } => p.channel(index, channel, class)?,
            &Change::Reset(cfg) => {
                let step = p.reset(index, cfg)?;
                steps.push((index, step));
                p.release_all(index, &mut steps)?;
                continue;
            }
            Change::Claim { class, name } => p.claim(index, *class, name)?,
            Change::Adopt { class, name } => p.adopt(index, *class, name)?,
            Change::Release { class, name } => p.release(index, *class, name)?,
        };
        steps.push((index, step));
    }
    let claims = p.claims(&steps)?;
    steps.splice(0..0, claims);
    p.shared_cores(&steps)?;
    let new_groups = p.new_groups(&steps)?;
    let names = names_of(&mut *p.backend, &steps);
    Ok(Plan {
        steps,
        warnings: p.warnings,
        new_groups,
        names,
    })
}

/// The named classes of `steps`, for the journal: the names `backend` gives their classes,
/// and those claimed or released.
pub(super) fn names_of<B: Backend>(
    backend: &mut B,
    steps: &[(usize, Step)],
) -> Vec<(ClassId, String)> {
    let mut names: Vec<(ClassId, String)> = backend
        .class_names()
        .into_iter()
        .filter(|(c, _)| steps.iter().any(|(_, s)| s.class() == Some(*c)))
        .collect();
    for (_, step) in steps {
        if let Step::Claim { class, name, .. } | Step::Release { class, name, .. } = step
            && !names.iter().any(|(c, n)| c == class && n == name)
        {
            names.retain(|(c, n)| c != class && n != name);
            names.push((*class, name.clone()));
        }
    }
    names
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

//! A class of service taken for one job and given back when it ends: what intel-cmt-cat's
//! `rdtset` does with `pqos_alloc_assign` / `pqos_alloc_release` (spec §8), as two library
//! transactions.
//!
//! [`Lease::take`] picks the highest free class ([`crate::transaction::free_classes`]:
//! no CPU, no task, every mask all ways), gives it the requested masks and limits in the
//! cache domains of the requested CPUs (every domain when no CPU is named) and moves those
//! CPUs into it, all in one transaction under the writers' lock, so two launchers started
//! together never take the same class. [`Lease::add_task`] puts a task in it (OS interface).
//! [`Lease::release`] moves the CPUs and the tasks still there back to COS 0 and the masks
//! and limits back to their reset values, again as one transaction; on the OS interface a
//! group the backend made for the class then holds nothing and is removed, giving its
//! CLOSID back.
//!
//! # Example
//! ```
//! use rdt_core::fake::FakeBackend;
//! use rdt_core::lease::{ClassRequest, Lease};
//! use rdt_core::{Backend, CacheBitmask, CatMask, ClassId};
//!
//! let mut b = FakeBackend::broadwell_2s();
//! let request = ClassRequest {
//!     l3: Some(CatMask::Unified(CacheBitmask::new(0xf)?)),
//!     cpus: "2-3".parse()?,
//!     ..ClassRequest::default()
//! };
//! let lease = Lease::take(&mut b, &request)?;
//! assert_eq!(lease.class(), ClassId::new(15)); // the highest free class
//! assert_eq!(b.class_of("2".parse()?)?, ClassId::new(15));
//! lease.release(&mut b)?;
//! assert_eq!(b.class_of("2".parse()?)?, ClassId::new(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # References
//! intel-cmt-cat `rdtset/rdtset.c`, `rdtset/cpu.c`, `lib/allocation.c`
//! (`pqos_alloc_assign`, `pqos_alloc_release`); `../shared/spec/pqos.md` §8.

use std::collections::BTreeSet;

use crate::transaction::{
    ApplyError, Change, MaskScope, Plan, PlanError, free_classes, with_writers,
};
use crate::{
    Backend, CacheDomain, CatMask, CatResource, ClassId, CpuSet, MbaLimit, MbaResource, TaskId,
};

/// What a launched job's class holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassRequest {
    /// The L3 masks: one mask, or data and code masks while CDP is on.
    pub l3: Option<CatMask>,
    /// The L2 masks.
    pub l2: Option<CatMask>,
    /// The memory bandwidth limit, in the unit in force (percent, or MiB/s with the kernel's
    /// `mba_MBps` controller).
    pub mba: Option<MbaLimit>,
    /// The AMD slow-memory bandwidth (SMBA) limit, in 1/8 GB/s units (rdtset `smba=`).
    pub smba: Option<MbaLimit>,
    /// The CPUs moved into the class (`cpu=` of rdtset). Empty: the class is for tasks only
    /// (OS interface), and its masks are set in every domain.
    pub cpus: CpuSet,
}

/// Taking or giving back a class failed; what was written was undone (see the inner
/// [`ApplyError`] for a write whose undo failed too).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError<E: std::error::Error + 'static> {
    /// No class of service is free.
    #[error("no free class of service: every class from COS1 up holds CPUs, tasks or masks")]
    NoFreeClass,
    /// A requested value does not fit the platform (a mask too wide, a CPU that does not
    /// exist, a task on the MSR interface, ...); nothing was written.
    #[error(transparent)]
    Plan(PlanError<E>),
    /// A write failed.
    #[error(transparent)]
    Apply(ApplyError<E>),
    /// Reading the state failed, or the writers' lock could not be taken.
    #[error("reading the classes in use")]
    Backend(#[source] E),
}

/// A class of service taken by [`Lease::take`], given back by [`Lease::release`].
#[derive(Debug)]
#[must_use = "a lease holds a class until it is released"]
pub struct Lease {
    class: ClassId,
    cpus: CpuSet,
    /// The cache domains whose masks were set, per level.
    domains: Vec<(CatResource, CacheDomain)>,
    /// The L3 domains whose MBA or SMBA limit was set.
    mba_domains: Vec<(MbaResource, CacheDomain)>,
    tasks: Vec<TaskId>,
}

/// The cache domains of `resource` holding `cpus`, or every one for no CPU.
fn domains_of<B: Backend>(b: &B, resource: CatResource, cpus: &CpuSet) -> Vec<CacheDomain> {
    let topo = b.topology();
    let all = match resource {
        CatResource::L3 => topo.l3_domains(),
        CatResource::L2 => topo.l2_domains(),
    };
    if cpus.is_empty() {
        return all;
    }
    let mine: BTreeSet<CacheDomain> = cpus
        .iter()
        .filter_map(|c| topo.get(c))
        .filter_map(|p| match resource {
            CatResource::L3 => p.l3,
            CatResource::L2 => Some(p.l2),
        })
        .collect();
    all.into_iter().filter(|d| mine.contains(d)).collect()
}

/// The changes giving `masks` of `resource` to `class` in `domains`.
fn cat_changes(
    resource: CatResource,
    masks: CatMask,
    class: ClassId,
    domains: &[CacheDomain],
) -> Vec<Change> {
    let scoped = match masks {
        CatMask::Unified(m) => vec![(MaskScope::Both, m)],
        CatMask::Cdp { data, code } => vec![(MaskScope::Data, data), (MaskScope::Code, code)],
    };
    domains
        .iter()
        .flat_map(|&domain| {
            scoped.iter().map(move |&(scope, mask)| Change::Cat {
                resource,
                domain,
                class,
                scope,
                mask,
            })
        })
        .collect()
}

/// Plans and applies `changes`; the caller holds the writers' lock.
fn apply<B: Backend>(b: &mut B, changes: &[Change]) -> Result<(), LeaseError<B::Error>> {
    let plan = Plan::new(b, changes).map_err(LeaseError::Plan)?;
    plan.apply(b).into_result().map_err(LeaseError::Apply)?;
    Ok(())
}

impl Lease {
    /// Takes the highest free class of service and gives it `request` (module docs), as
    /// one transaction.
    ///
    /// # Errors
    /// [`LeaseError::NoFreeClass`]; [`LeaseError::Plan`] for a request the platform cannot
    /// hold (nothing written); [`LeaseError::Apply`] for a failed write (undone);
    /// [`LeaseError::Backend`] when the state cannot be read or the lock taken.
    pub fn take<B: Backend>(
        backend: &mut B,
        request: &ClassRequest,
    ) -> Result<Self, LeaseError<B::Error>> {
        let taken = with_writers(backend, |b| {
            let class = *free_classes(b, &[])
                .map_err(LeaseError::Backend)?
                .last()
                .ok_or(LeaseError::NoFreeClass)?;
            let mut lease = Self {
                class,
                cpus: request.cpus.clone(),
                domains: Vec::new(),
                mba_domains: Vec::new(),
                tasks: Vec::new(),
            };
            let mut changes = Vec::new();
            for (resource, masks) in [(CatResource::L3, request.l3), (CatResource::L2, request.l2)]
            {
                let Some(masks) = masks else { continue };
                let domains = domains_of(b, resource, &request.cpus);
                changes.extend(cat_changes(resource, masks, class, &domains));
                lease.domains.extend(domains.iter().map(|&d| (resource, d)));
            }
            for (resource, limit) in [
                (MbaResource::Mba, request.mba),
                (MbaResource::Smba, request.smba),
            ] {
                let Some(limit) = limit else { continue };
                let domains = domains_of(b, CatResource::L3, &request.cpus);
                changes.extend(
                    domains
                        .iter()
                        .map(|&d| Change::bandwidth(resource, d, class, limit)),
                );
                lease
                    .mba_domains
                    .extend(domains.into_iter().map(|d| (resource, d)));
            }
            changes.extend(request.cpus.iter().map(|cpu| Change::cpu(cpu, class)));
            apply(b, &changes)?;
            Ok(lease)
        });
        taken.map_err(LeaseError::Backend)?
    }

    /// The class taken.
    #[must_use]
    pub const fn class(&self) -> ClassId {
        self.class
    }

    /// The CPUs in the class.
    #[must_use]
    pub const fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// Puts `task` (every thread of a process) in the class (OS interface).
    ///
    /// # Errors
    /// As [`Lease::take`]: a task that does not exist, the MSR interface.
    pub fn add_task<B: Backend>(
        &mut self,
        backend: &mut B,
        task: TaskId,
    ) -> Result<(), LeaseError<B::Error>> {
        let done = with_writers(backend, |b| apply(b, &[Change::task(task, self.class)]));
        done.map_err(LeaseError::Backend)??;
        self.tasks.push(task);
        Ok(())
    }

    /// Gives the class back (module docs): CPUs and the tasks still in it to COS 0, masks
    /// and limits to their reset values, as one transaction.
    ///
    /// # Errors
    /// As [`Lease::take`]; the lease is consumed either way (what failed was undone, and
    /// the class keeps what it had).
    pub fn release<B: Backend>(self, backend: &mut B) -> Result<(), LeaseError<B::Error>> {
        let done = with_writers(backend, |b| {
            let cos0 = ClassId::new(0);
            let mut changes: Vec<Change> = self.cpus.iter().map(|c| Change::cpu(c, cos0)).collect();
            if !self.tasks.is_empty() {
                // Tasks that exited are gone from the class already; the others go back.
                let still = b.tasks_of_class(self.class).map_err(LeaseError::Backend)?;
                changes.extend(still.into_iter().map(|t| Change::task(t, cos0)));
            }
            for &(resource, domain) in &self.domains {
                if let Some(full) = b
                    .capabilities()
                    .cat(resource)
                    .map(crate::CatCaps::full_mask)
                {
                    changes.push(Change::Cat {
                        resource,
                        domain,
                        class: self.class,
                        scope: MaskScope::Both,
                        mask: full,
                    });
                }
            }
            for &(resource, domain) in &self.mba_domains {
                if let Some(unlimited) = b
                    .capabilities()
                    .bandwidth(resource)
                    .get()
                    .map(crate::MbaCaps::unlimited)
                {
                    changes.push(Change::bandwidth(resource, domain, self.class, unlimited));
                }
            }
            apply(b, &changes)
        });
        done.map_err(LeaseError::Backend)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeBackend;
    use crate::{CacheBitmask, LogicalCpu};

    fn mask(bits: u64) -> CacheBitmask {
        CacheBitmask::new(bits).expect("a non-zero mask")
    }

    fn request(l3: u64, cpus: &str) -> ClassRequest {
        ClassRequest {
            l3: Some(CatMask::Unified(mask(l3))),
            cpus: cpus.parse().expect("cpus"),
            ..ClassRequest::default()
        }
    }

    fn l3_mask(b: &mut FakeBackend, domain: u32, class: ClassId) -> CatMask {
        b.cat_classes(CatResource::L3, CacheDomain::new(domain))
            .expect("classes")
            .into_iter()
            .find(|c| c.class == class)
            .expect("class")
            .mask
    }

    #[test]
    fn two_leases_take_the_two_highest_classes_and_give_them_back() {
        // arrange: 2 sockets, 16 classes; CPUs 2-3 on socket 0
        let mut b = FakeBackend::broadwell_2s();
        // act
        let a = Lease::take(&mut b, &request(0xf, "2-3")).expect("first");
        let second = Lease::take(&mut b, &request(0xf0, "4")).expect("second");
        // assert: the highest free classes, masks only in the CPUs' domain
        assert_eq!(
            (a.class(), second.class()),
            (ClassId::new(15), ClassId::new(14))
        );
        assert_eq!(
            b.class_of(LogicalCpu::new(3)).expect("class"),
            ClassId::new(15)
        );
        assert_eq!(
            l3_mask(&mut b, 0, ClassId::new(15)),
            CatMask::Unified(mask(0xf))
        );
        let full = CatMask::Unified(mask(0xfffff));
        assert_eq!(
            l3_mask(&mut b, 1, ClassId::new(15)),
            full,
            "socket 1 untouched"
        );
        // act: give the first back
        a.release(&mut b).expect("release");
        // assert: CPUs on COS0, masks reset, the class is free again
        assert_eq!(
            b.class_of(LogicalCpu::new(2)).expect("class"),
            ClassId::new(0)
        );
        assert_eq!(l3_mask(&mut b, 0, ClassId::new(15)), full);
        assert_eq!(
            free_classes(&mut b, &[]).expect("free").last(),
            Some(&ClassId::new(15))
        );
        second.release(&mut b).expect("release");
    }

    #[test]
    fn a_request_the_platform_cannot_hold_writes_nothing() {
        let mut b = FakeBackend::broadwell_2s();
        let before = crate::transaction::AllocState::read(&mut b).expect("state");
        // a 24-bit mask on a 20-bit CBM
        let e = Lease::take(&mut b, &request(0xff_ffff, "2")).expect_err("too wide");
        assert!(matches!(e, LeaseError::Plan(_)), "{e:?}");
        assert_eq!(
            crate::transaction::AllocState::read(&mut b).expect("state"),
            before
        );
    }

    #[test]
    fn when_every_class_is_taken_the_error_says_so() {
        let mut b = FakeBackend::broadwell_2s();
        let mut leases = Vec::new();
        for cpu in 1..16 {
            leases.push(Lease::take(&mut b, &request(0x3, &cpu.to_string())).expect("take"));
        }
        let e = Lease::take(&mut b, &request(0x3, "20")).expect_err("none left");
        assert!(matches!(e, LeaseError::NoFreeClass), "{e:?}");
        for l in leases {
            l.release(&mut b).expect("release");
        }
    }

    #[test]
    fn tasks_join_and_leave_with_the_class_on_the_os_interface() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.add_process(4242, &[4243]);
        let me = TaskId::new(4242);
        let mut lease = Lease::take(&mut b, &request(0xff, "")).expect("take");
        lease.add_task(&mut b, me).expect("add");
        assert_eq!(b.class_of_task(me).expect("class"), lease.class());
        assert_eq!(b.class_of_thread(4243), lease.class().get(), "every thread");
        // no CPU named: every domain got the masks
        assert_eq!(
            l3_mask(&mut b, 1, lease.class()),
            CatMask::Unified(mask(0xff))
        );
        lease.release(&mut b).expect("release");
        assert_eq!(b.class_of_task(me).expect("class"), ClassId::new(0));
    }

    #[test]
    fn the_closid_of_enabled_io_alloc_is_never_taken() {
        // arrange: resctrl on an AMD with io_alloc enabled: the kernel keeps COS15
        let mut b = FakeBackend::amd_2ccx();
        b.os_interface = true;
        let io = |enabled| crate::IoAlloc {
            enabled,
            class: ClassId::new(15),
            masks: Vec::new(),
        };
        b.io_alloc = Some(io(true));
        // act
        let free = free_classes(&mut b, &[]).expect("free");
        let lease = Lease::take(&mut b, &request(0xf, "")).expect("taken");
        // assert: the highest class the kernel leaves is COS14
        assert_eq!(free.last(), Some(&ClassId::new(14)));
        assert_eq!(free.len(), 14);
        assert_eq!(lease.class(), ClassId::new(14));
        // disabled, COS15 is a class like any other
        b.io_alloc = Some(io(false));
        assert_eq!(
            free_classes(&mut b, &[]).expect("free").last(),
            Some(&ClassId::new(15))
        );
        lease.release(&mut b).expect("released");
    }

    #[test]
    fn an_smba_limit_is_set_in_the_cpus_domains_and_given_back() {
        // arrange: AMD with SMBA, two CCX of 4 CPUs
        let mut b = FakeBackend::amd_2ccx();
        b.reconfigure(|c| c.smba = crate::Feature::Supported(crate::fake::fixtures::amd_mba(16)));
        let smba = |b: &mut FakeBackend, d: u32| {
            b.bandwidth_classes(MbaResource::Smba, CacheDomain::new(d))
                .expect("smba")[15]
                .limit
        };
        let request = ClassRequest {
            smba: Some(MbaLimit::AmdUnits(16)),
            cpus: "4-5".parse().expect("cpus"),
            ..ClassRequest::default()
        };
        // act
        let lease = Lease::take(&mut b, &request).expect("taken");
        // assert: CCX 1 only, MBA untouched
        assert_eq!(lease.class(), ClassId::new(15));
        assert_eq!(smba(&mut b, 1), MbaLimit::AmdUnits(16));
        assert_eq!(smba(&mut b, 0), MbaLimit::AmdUnits(2048));
        let mba = b.mba_classes(CacheDomain::new(1)).expect("mba")[15].limit;
        assert_eq!(mba, MbaLimit::AmdUnits(2048));
        lease.release(&mut b).expect("released");
        assert_eq!(smba(&mut b, 1), MbaLimit::AmdUnits(2048));
        // a class left with an SMBA limit (pqos -e smba:15=16) is not free
        let limited = crate::transaction::Change::smba(
            CacheDomain::new(0),
            ClassId::new(15),
            MbaLimit::AmdUnits(16),
        );
        crate::transaction::run(&mut b, &[limited])
            .expect("planned")
            .into_result()
            .expect("applied");
        let free = free_classes(&mut b, &[]).expect("free");
        assert_eq!(free.last(), Some(&ClassId::new(14)), "{free:?}");
    }
}

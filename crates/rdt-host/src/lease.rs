//! A class of service taken for one job and given back when it ends: what intel-cmt-cat's
//! `rdtset` does with `pqos_alloc_assign` / `pqos_alloc_release` (spec §8), as two library
//! transactions, held by a guard that cannot forget to give the class back.
//!
//! [`Lease::take`] picks the highest free class ([`rdt_core::transaction::free_classes`]:
//! no CPU, no task, every mask all ways), gives it the requested masks and limits in the
//! cache domains of the requested CPUs (every domain when no CPU is named) and moves those
//! CPUs into it, all in one transaction under the writers' lock, so two launchers started
//! together never take the same class. [`Lease::add_task`] puts a task in it (OS interface).
//! [`Lease::release`] moves the CPUs and the tasks still there back to COS 0 and the masks
//! and limits back to their reset values, again as one transaction; on the OS interface a
//! group the backend made for the class then holds nothing and is removed, giving its
//! CLOSID back.
//!
//! # The guard
//! A [`Lease`] borrows its backend mutably, as [`rdt_core::Monitoring`] does, and gives the
//! class back when it is dropped: on an early return, a `?` or a panic alike (an error
//! then is a `WARN` log record; [`Lease::release`] reports it). [`Lease::keep`] keeps the
//! class on purpose (rdtset's `--keep` and `-p`): the guard goes without giving it back.
//! While it lives, [`Lease::backend`] and [`Lease::backend_mut`] give the backend back
//! (monitoring the job; a second lease is taken from the first's backend:
//! `Lease::take(first.backend_mut(), ..)`, and goes first).
//!
//! # The record: a killed holder's class comes back
//! A process killed with SIGKILL runs no destructor. So where the backend has a run
//! directory ([`BackendExt::run_dir`]), [`Lease::take`] first writes a record of what the
//! lease sets: `<run dir>/lease-<iface>-<class>-<pid>` (`lease-os-7-1234`; one file per
//! class, so a process may hold several leases), JSON with the class, the CPUs, the cache
//! domains of each level whose masks it sets, the L3 domains of its MBA and SMBA limits
//! and the tasks it added. The record is a [`crate::runfile::RunFile`]: written whole
//! before the lease's first write, kept `flock`ed while the process lives, updated by
//! [`Lease::add_task`], removed by [`Lease::release`] and [`Lease::keep`] (a kept class
//! has no record: it is nobody's to give back, and `pqos -R` or `pqos -e`/`-a` changes it
//! as any class). A record whose lock is free belongs to a process that ended without
//! giving its class back; [`reclaim`] (every open of the library runs it, after the
//! transaction journals' [`crate::transaction::recover`]) gives the class back as
//! [`Lease::release`] would have, as one transaction: the recorded CPUs still in the class
//! and every task in it (OS interface) to COS 0, the recorded masks and limits to their
//! reset values; then the record goes. A give-back that fails (in [`Lease::release`], on
//! drop or in [`reclaim`]) leaves the record, unlocked, for the next open to try again.
//!
//! Liveness is the lock, never the pid in the name ([`crate::runfile`]). A child the holder
//! forks shares the lock until it execs (the record is opened close-on-exec) or exits; one
//! that never execs keeps the lease alive after the holder is killed. A dead record of a
//! class that a live record holds again (its holder was killed after the class had been
//! given back, by a rolled-back transaction, and another process took it since) is stale:
//! it is removed without touching the class. Records are per interface, as journals are.
//!
//! # Example
//! ```
//! use rdt_core::fake::FakeBackend;
//! use rdt_host::lease::{ClassRequest, Lease};
//! use rdt_core::{Backend, BackendExt, CacheBitmask, CatMask, ClassId};
//!
//! let mut b = FakeBackend::broadwell_2s();
//! let request = ClassRequest {
//!     l3: Some(CatMask::Unified(CacheBitmask::new(0xf)?)),
//!     cpus: "2-3".parse()?,
//!     ..ClassRequest::default()
//! };
//! {
//!     let mut lease = Lease::take(&mut b, &request)?;
//!     assert_eq!(lease.class(), ClassId::new(15)); // the highest free class
//!     assert_eq!(lease.backend_mut().class_of("2".parse()?)?, ClassId::new(15));
//! } // given back here (or with `lease.release()?`, which reports errors)
//! assert_eq!(b.class_of("2".parse()?)?, ClassId::new(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # References
//! intel-cmt-cat `rdtset/rdtset.c`, `rdtset/cpu.c`, `lib/allocation.c`
//! (`pqos_alloc_assign`, `pqos_alloc_release`); `../shared/spec/pqos.md` §8.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::runfile::{DeadRunFile, RunFile, scan_run_files, try_lock_file};
use crate::transaction::ApplyPlan;
use rdt_core::BackendExt;
use rdt_core::transaction::{
    ApplyError, Change, MaskScope, Plan, PlanError, free_classes, with_writers,
};
use rdt_core::{
    Backend, CacheDomain, CatMask, CatResource, ClassId, CpuSet, Interface, MbaLimit, MbaResource,
    Reclaimed, RequestError, TaskId,
};

/// The record format version written; a record with another is left alone (and logged).
const VERSION: u32 = 1;
/// The most of a record read, in bytes: a lease of every CPU, domain and a thousand tasks
/// stays far below.
const MAX_RECORD_BYTES: u64 = 1 << 20;

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
    /// The lease's record in the run directory ([`BackendExt::run_dir`]) could not be
    /// written, updated or removed: taking wrote nothing then; keeping kept the class, but
    /// the record stays and the next open after this process ends gives the class back.
    #[error("cannot {op} the lease record {path}")]
    Record {
        /// What was done: `write`, `update`, `remove`.
        op: &'static str,
        /// The record (`<run dir>/lease-<iface>-<class>-<pid>`).
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

/// What a lease record holds (module docs).
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u32,
    interface: Interface,
    class: ClassId,
    /// The CPUs moved into the class, in list form (`2-3`).
    cpus: String,
    /// The cache domains whose masks the lease set, per level.
    cat: Vec<(CatResource, CacheDomain)>,
    /// The L3 domains whose MBA or SMBA limit the lease set.
    bandwidth: Vec<(MbaResource, CacheDomain)>,
    /// The tasks the lease put in the class.
    tasks: Vec<TaskId>,
}

/// The interface's part of a record's name.
const fn iface_name(interface: Interface) -> &'static str {
    match interface {
        // the MMIO interface's classes are the MSR interface's (IA32_PQR_ASSOC)
        Interface::Msr | Interface::Mmio => "msr",
        Interface::Os => "os",
    }
}

/// `lease-<iface>-<class>-`: the name of a record of `class` without its pid.
fn record_prefix(interface: Interface, class: ClassId) -> String {
    format!("lease-{}-{}-", iface_name(interface), class.get())
}

/// The class and pid of a record's name, `None` for any other name.
fn parse_record_name(interface: Interface, name: &str) -> Option<(ClassId, u32)> {
    let rest = name
        .strip_prefix("lease-")?
        .strip_prefix(iface_name(interface))?
        .strip_prefix('-')?;
    let (class, pid) = rest.split_once('-')?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    Some((ClassId::new(number(class)?), number(pid)?))
}

/// The class in a record's path.
fn class_of_record(interface: Interface, path: &Path) -> Option<ClassId> {
    let name = path.file_name()?.to_str()?;
    parse_record_name(interface, name).map(|(class, _)| class)
}

/// A class of service taken by [`Lease::take`], held until [`Lease::release`],
/// [`Lease::keep`] or the guard's drop (module docs).
#[derive(Debug)]
#[must_use = "a lease gives its class back when it is dropped"]
pub struct Lease<'a, B: Backend> {
    backend: &'a mut B,
    held: Held,
    /// Given back or kept: nothing left for the drop to do.
    done: bool,
}

/// What a lease set, and its record.
#[derive(Debug)]
struct Held {
    interface: Interface,
    class: ClassId,
    cpus: CpuSet,
    /// The cache domains whose masks were set, per level.
    domains: Vec<(CatResource, CacheDomain)>,
    /// The L3 domains whose MBA or SMBA limit was set.
    mba_domains: Vec<(MbaResource, CacheDomain)>,
    tasks: Vec<TaskId>,
    /// `None` without a run directory.
    record: Option<RunFile>,
}

impl Held {
    fn text(&self) -> Vec<u8> {
        let record = Record {
            version: VERSION,
            interface: self.interface,
            class: self.class,
            cpus: self.cpus.to_string(),
            cat: self.domains.clone(),
            bandwidth: self.mba_domains.clone(),
            tasks: self.tasks.clone(),
        };
        // Plain data (numbers, strings and unit enums) always serializes.
        serde_json::to_vec(&record).unwrap_or_default()
    }

    /// Writes the record in `dir`.
    fn create_record<E: std::error::Error>(&mut self, dir: &Path) -> Result<(), LeaseError<E>> {
        let prefix = record_prefix(self.interface, self.class);
        let file =
            RunFile::create(dir, &prefix, &self.text()).map_err(|source| LeaseError::Record {
                op: "write",
                path: dir.join(format!("{prefix}{}", std::process::id())),
                source,
            })?;
        self.record = Some(file);
        Ok(())
    }

    /// Rewrites the record (after a change of the tasks).
    fn update_record<E: std::error::Error>(&mut self) -> Result<(), LeaseError<E>> {
        let text = self.text();
        if let Some(r) = &mut self.record {
            r.rewrite(&text).map_err(|source| LeaseError::Record {
                op: "update",
                path: r.path().to_owned(),
                source,
            })?;
        }
        Ok(())
    }

    /// Removes the record.
    fn remove_record<E: std::error::Error>(&mut self) -> Result<(), LeaseError<E>> {
        if let Some(r) = self.record.take() {
            let path = r.path().to_owned();
            r.remove().map_err(|source| LeaseError::Record {
                op: "remove",
                path,
                source,
            })?;
        }
        Ok(())
    }
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

/// The changes giving `class` back: `cpus` and `tasks` to COS 0, the masks of `domains`
/// and the limits of `mba_domains` to their reset values.
fn give_back_changes<B: Backend>(
    b: &B,
    class: ClassId,
    cpus: &CpuSet,
    tasks: &[TaskId],
    domains: &[(CatResource, CacheDomain)],
    mba_domains: &[(MbaResource, CacheDomain)],
) -> Vec<Change> {
    let cos0 = ClassId::new(0);
    let mut changes: Vec<Change> = cpus.iter().map(|c| Change::cpu(c, cos0)).collect();
    changes.extend(tasks.iter().map(|&t| Change::task(t, cos0)));
    let caps = b.capabilities();
    changes.extend(
        domains
            .iter()
            .filter_map(|&(r, d)| Change::cat_default(caps, r, d, class)),
    );
    changes.extend(
        mba_domains
            .iter()
            .filter_map(|&(r, d)| Change::bandwidth_default(caps, r, d, class)),
    );
    changes
}

/// Plans and applies `changes`; the caller holds the writers' lock.
fn apply<B: Backend>(b: &mut B, changes: &[Change]) -> Result<(), LeaseError<B::Error>> {
    let plan = Plan::new(b, changes).map_err(LeaseError::Plan)?;
    plan.apply(b).into_result().map_err(LeaseError::Apply)?;
    Ok(())
}

impl<'a, B: Backend> Lease<'a, B> {
    /// Takes the highest free class of service and gives it `request` (module docs), as
    /// one transaction, its record written first where the backend has a run directory.
    ///
    /// # Errors
    /// [`LeaseError::NoFreeClass`]; [`LeaseError::Plan`] for a request the platform cannot
    /// hold (nothing written); [`LeaseError::Apply`] for a failed write (undone);
    /// [`LeaseError::Backend`] when the state cannot be read or the lock taken;
    /// [`LeaseError::Record`] when the record cannot be written (nothing written).
    pub fn take(backend: &'a mut B, request: &ClassRequest) -> Result<Self, LeaseError<B::Error>> {
        let held = with_writers(backend, |b| take_locked(b, request));
        let held = held.map_err(LeaseError::Backend)??;
        Ok(Self {
            backend,
            held,
            done: false,
        })
    }

    /// The class taken.
    #[must_use]
    pub const fn class(&self) -> ClassId {
        self.held.class
    }

    /// The CPUs in the class.
    #[must_use]
    pub const fn cpus(&self) -> &CpuSet {
        &self.held.cpus
    }

    /// The tasks [`Lease::add_task`] put in the class, in the order added.
    #[must_use]
    pub fn tasks(&self) -> &[TaskId] {
        &self.held.tasks
    }

    /// The lease's record (`<run dir>/lease-<iface>-<class>-<pid>`); `None` when the
    /// backend has no run directory.
    #[must_use]
    pub fn record_path(&self) -> Option<&Path> {
        self.held.record.as_ref().map(RunFile::path)
    }

    /// The backend, for reads while the lease lives.
    #[must_use]
    pub fn backend(&self) -> &B {
        self.backend
    }

    /// The backend, for other work while the lease lives: monitoring the job, another
    /// lease (`Lease::take(lease.backend_mut(), ..)`). What it changes in the leased class
    /// is the caller's business: the lease gives back what it set.
    pub fn backend_mut(&mut self) -> &mut B {
        self.backend
    }

    /// Puts `task` (every thread of a process) in the class (OS interface), the record
    /// updated first.
    ///
    /// # Errors
    /// As [`Lease::take`]: a task that does not exist, the MSR interface.
    pub fn add_task(&mut self, task: TaskId) -> Result<(), LeaseError<B::Error>> {
        let class = self.held.class;
        self.held.tasks.push(task);
        let done = self.held.update_record().and_then(|()| {
            let r = with_writers(self.backend, |b| apply(b, &[Change::task(task, class)]));
            r.map_err(LeaseError::Backend)?
        });
        if done.is_err() {
            self.held.tasks.pop();
            let _ = self.held.update_record::<B::Error>(); // best effort: the task is not in
        }
        done
    }

    /// Gives the class back (module docs): CPUs and the tasks still in it to COS 0, masks
    /// and limits to their reset values, as one transaction; then the record goes.
    ///
    /// # Errors
    /// As [`Lease::take`]; the lease is consumed either way (what failed was undone, the
    /// class keeps what it had, and its record stays for the next open to give it back).
    /// [`LeaseError::Record`] when the class was given back but the record could not be
    /// removed (a later open finds nothing left to give back and removes it).
    pub fn release(mut self) -> Result<(), LeaseError<B::Error>> {
        self.give_back()
    }

    /// Keeps the class on purpose (rdtset's `--keep` and `-p`): the guard goes without
    /// giving it back, and its record is removed so that no later open gives it back
    /// either. Returns the class.
    ///
    /// # Errors
    /// [`LeaseError::Record`] when the record cannot be removed: the class is kept now, but
    /// the next open after this process ends gives it back.
    pub fn keep(mut self) -> Result<ClassId, LeaseError<B::Error>> {
        self.done = true;
        self.held.remove_record()?;
        Ok(self.held.class)
    }

    /// [`Lease::release`]'s work, once.
    fn give_back(&mut self) -> Result<(), LeaseError<B::Error>> {
        self.done = true;
        let held = &self.held;
        let done = with_writers(self.backend, |b| {
            // Tasks that exited are gone from the class already; the others go back.
            let tasks = if held.tasks.is_empty() {
                Vec::new()
            } else {
                b.tasks_of_class(held.class).map_err(LeaseError::Backend)?
            };
            let changes = give_back_changes(
                b,
                held.class,
                &held.cpus,
                &tasks,
                &held.domains,
                &held.mba_domains,
            );
            apply(b, &changes)
        });
        match done.map_err(LeaseError::Backend).and_then(|r| r) {
            Ok(()) => self.held.remove_record(),
            Err(e) => {
                // Unlocked and kept: the next open gives the class back.
                drop(self.held.record.take());
                Err(e)
            }
        }
    }

    /// Ends the lease as a process killed with SIGKILL would: no give-back, the record
    /// kept and unlocked.
    #[cfg(test)]
    fn die(mut self) {
        self.done = true;
        drop(self.held.record.take());
    }
}

impl<B: Backend> Drop for Lease<'_, B> {
    /// Gives the class back unless [`Lease::release`] or [`Lease::keep`] ended the lease;
    /// a failure is a `WARN` log record (and the record stays for the next open).
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let class = self.held.class;
        if let Err(e) = self.give_back() {
            log::warn!(
                "could not give COS{class} back (the next open tries again): {}",
                rdt_core::error_chain(&e)
            );
        }
    }
}

/// [`Lease::take`] under the writers' lock.
fn take_locked<B: Backend>(
    b: &mut B,
    request: &ClassRequest,
) -> Result<Held, LeaseError<B::Error>> {
    // The highest free class every requested resource has: L2 CAT or MBA may have fewer
    // classes than L3 (sapphire-rapids: 8 L2 classes, 15 L3), as pqos's rdtset picks COS7
    // there for `l2=..;l3=..`.
    let caps = b.capabilities().clone();
    let usable = |c: ClassId| {
        [(CatResource::L3, request.l3), (CatResource::L2, request.l2)]
            .iter()
            .all(|(r, m)| m.is_none() || caps.check_cat_class(*r, c).is_ok())
            && [
                (MbaResource::Mba, request.mba),
                (MbaResource::Smba, request.smba),
            ]
            .iter()
            .all(|(r, l)| l.is_none() || caps.check_bandwidth_class(*r, c).is_ok())
    };
    let class = free_classes(b, &[])
        .map_err(LeaseError::Backend)?
        .into_iter()
        .rev()
        .find(|&c| usable(c))
        .ok_or(LeaseError::NoFreeClass)?;
    let mut held = Held {
        interface: b.interface(),
        class,
        cpus: request.cpus.clone(),
        domains: Vec::new(),
        mba_domains: Vec::new(),
        tasks: Vec::new(),
        record: None,
    };
    let mut changes = Vec::new();
    for (resource, masks) in [(CatResource::L3, request.l3), (CatResource::L2, request.l2)] {
        let Some(masks) = masks else { continue };
        let domains = domains_of(b, resource, &request.cpus);
        changes.extend(cat_changes(resource, masks, class, &domains));
        held.domains.extend(domains.iter().map(|&d| (resource, d)));
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
        held.mba_domains
            .extend(domains.into_iter().map(|d| (resource, d)));
    }
    changes.extend(request.cpus.iter().map(|cpu| Change::cpu(cpu, class)));
    let plan = Plan::new(b, &changes).map_err(LeaseError::Plan)?;
    if let Some(dir) = b.run_dir().map(Path::to_owned) {
        held.create_record(&dir)?;
    }
    if let Err(e) = plan.apply(b).into_result() {
        // Rolled back (or, partly changed, left to the transaction's journal).
        if let Err(r) = held.remove_record::<B::Error>() {
            log::warn!("{}", rdt_core::error_chain(&r));
        }
        return Err(LeaseError::Apply(e));
    }
    Ok(held)
}

/// Whether the process `pid` still holds its lease of `class` on `backend`'s interface:
/// its record `lease-<iface>-<class>-<pid>` exists and is locked. `None` without a run
/// directory (nothing is recorded). A process that puts itself in a class another one
/// leased for it (rdtset's command) checks this under the writers' lock first, so that it
/// does not enter a class that [`reclaim`] gave back after its holder was killed.
#[must_use]
pub fn held_by<B: Backend>(backend: &mut B, class: ClassId, pid: u32) -> Option<bool> {
    let prefix = record_prefix(backend.interface(), class);
    let dir = backend.run_dir()?;
    let path = dir.join(format!("{prefix}{pid}"));
    let Ok(file) = crate::file::open_nonblocking(&path, true) else {
        return Some(false);
    };
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    Some(regular && matches!(try_lock_file(&file, false), Ok(false)))
}

/// What became of one dead record.
enum Fate {
    /// Given back (or nothing was left to give back: `None`); the record goes.
    GivenBack(Option<Reclaimed>),
    /// Its class is another live lease's: the record goes, the class is not touched.
    Stale,
    /// Left alone for the next open, with the reason.
    Left(String),
}

/// Gives back the class of every lease whose holder ended without giving it back: a
/// record of `backend`'s interface in its run directory whose lock is free (module docs),
/// under the writers' lock. Each class goes back as one transaction: the recorded CPUs
/// still in it and (OS interface) every task in it to COS 0, the recorded masks and
/// limits to their reset values (on the OS interface its `COS<n>` group, then unused, is
/// removed). A record that is not one (a symlink, a FIFO, not UTF-8, larger than 1 MiB,
/// not JSON of this version, naming COS 0 or another class than its name) is left alone
/// with a `WARN` log record, as is one whose give-back fails (for the next open). Nothing
/// to do without a run directory.
///
/// Returns one [`Reclaimed::Lease`] per class given back, for the caller to log (opening
/// the platform logs each as a `WARN` record and a notice).
///
/// # Errors
/// The writers' lock cannot be taken, or the run directory cannot be listed.
pub fn reclaim<B: Backend>(backend: &mut B) -> Result<Vec<Reclaimed>, B::Error> {
    let Some(dir) = backend.run_dir().map(Path::to_owned) else {
        return Ok(Vec::new());
    };
    let interface = backend.interface();
    with_writers(backend, |b| {
        let pid_of = |name: &str| parse_record_name(interface, name).map(|(_, pid)| pid);
        let scan = scan_run_files(&dir, pid_of, MAX_RECORD_BYTES).map_err(|e| {
            B::Error::from(RequestError::RunState {
                path: dir.clone(),
                message: format!("cannot list the records of leased classes: {e}"),
            })
        })?;
        for (path, why) in &scan.skipped {
            log::warn!("left {} alone: not a lease record ({why})", path.display());
        }
        let live: BTreeSet<ClassId> = scan
            .live
            .iter()
            .filter_map(|(_, p)| class_of_record(interface, p))
            .collect();
        let mut out = Vec::new();
        for file in scan.dead {
            match reclaim_one(b, interface, &file, &live) {
                Fate::Left(why) => {
                    log::warn!("left {} alone: {why}", file.path.display());
                }
                Fate::Stale => {
                    log::info!(
                        "removed {}: its class is leased again by a live process",
                        file.path.display()
                    );
                    remove(file);
                }
                Fate::GivenBack(r) => {
                    out.extend(r);
                    remove(file);
                }
            }
        }
        Ok(out)
    })?
}

fn remove(file: DeadRunFile) {
    let path = file.path.clone();
    if let Err(e) = file.remove() {
        log::warn!("could not remove the lease record {}: {e}", path.display());
    }
}

/// [`reclaim`] of one dead record; the caller holds the writers' lock.
fn reclaim_one<B: Backend>(
    b: &mut B,
    interface: Interface,
    file: &DeadRunFile,
    live: &BTreeSet<ClassId>,
) -> Fate {
    let record: Record = match serde_json::from_str(&file.text) {
        Ok(r) => r,
        Err(e) => return Fate::Left(format!("not a lease record of this version ({e})")),
    };
    let named = class_of_record(interface, &file.path);
    if record.version != VERSION || record.interface != interface {
        return Fate::Left(format!(
            "lease record version {} of the {:?} interface",
            record.version, record.interface
        ));
    }
    if record.class.get() == 0 || named != Some(record.class) {
        return Fate::Left(format!("a record of COS{} under this name", record.class));
    }
    let class = record.class;
    if live.contains(&class) {
        return Fate::Stale;
    }
    let recorded: CpuSet = match record.cpus.parse() {
        Ok(c) => c,
        Err(e) => return Fate::Left(format!("its CPUs: {e}")),
    };
    let read = (|| {
        // A CPU moved to another class since stays there.
        let cpus: CpuSet = b
            .cpu_classes()?
            .into_iter()
            .filter(|(cpu, c)| *c == Some(class) && recorded.contains(*cpu))
            .map(|(cpu, _)| cpu)
            .collect();
        // Every task: the job's processes entered the class themselves (rdtset's command).
        let tasks = if interface == Interface::Os {
            b.tasks_of_class(class)?
        } else {
            Vec::new()
        };
        Ok::<_, B::Error>((cpus, tasks))
    })();
    let (cpus, tasks) = match read {
        Ok(r) => r,
        Err(e) => return Fate::Left(format!("reading COS{class}: {}", rdt_core::error_chain(&e))),
    };
    let changes = give_back_changes(b, class, &cpus, &tasks, &record.cat, &record.bandwidth);
    b.own_classes(&[class]);
    let plan = match Plan::new(b, &changes) {
        Ok(p) => p,
        Err(e) => {
            return Fate::Left(format!(
                "giving COS{class} back: {}",
                rdt_core::error_chain(&e)
            ));
        }
    };
    let writes_something = plan.steps().iter().any(|(_, s)| !s.is_unchanged());
    if let Err(e) = plan.apply(b).into_result() {
        return Fate::Left(format!(
            "giving COS{class} back: {}",
            rdt_core::error_chain(&e)
        ));
    }
    Fate::GivenBack(writes_something.then_some(Reclaimed::Lease {
        class,
        pid: file.pid,
        cpus,
        tasks,
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use rdt_core::fake::FakeBackend;
    use rdt_core::{CacheBitmask, LogicalCpu};

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

    fn highest_free(b: &mut FakeBackend) -> Option<ClassId> {
        free_classes(b, &[]).expect("free").last().copied()
    }

    /// Broadwell, 2 sockets, 16 classes, its records in a temporary run directory.
    fn recorded() -> (FakeBackend, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = FakeBackend::broadwell_2s().with_run_dir(dir.path().join("run"));
        (b, dir)
    }

    fn records(dir: &tempfile::TempDir) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.path().join("run"))
            .map(|rd| {
                rd.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("lease-"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// [`reclaim`] until it gives something back (at most 1 s): a child another test forks
    /// holds the record's lock, copied with its descriptors, until it execs.
    fn reclaim_soon(b: &mut FakeBackend) -> Vec<Reclaimed> {
        for _ in 0..100 {
            let r = reclaim(b).expect("reclaim");
            if !r.is_empty() {
                return r;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Vec::new()
    }

    /// A lease of L2 and L3 takes the highest class both have: COS7 of L2's 8 on a part
    /// with 16 L3 classes, as pqos's rdtset picks; L3 alone still takes COS15, MBA (8
    /// classes) COS7.
    #[test]
    fn a_lease_takes_the_highest_class_every_requested_resource_has() {
        let mut b = FakeBackend::intel_1s();
        let both = ClassRequest {
            l2: Some(CatMask::Unified(mask(0xf))),
            ..request(0xf, "2")
        };
        let mba = ClassRequest {
            mba: Some(MbaLimit::Percent(50)),
            ..request(0xf0, "3")
        };
        let l2 = Lease::take(&mut b, &both).expect("l2 and l3");
        assert_eq!(l2.class(), ClassId::new(7));
        l2.release().expect("release");
        let l3 = Lease::take(&mut b, &request(0xf, "2")).expect("l3");
        assert_eq!(l3.class(), ClassId::new(15));
        l3.release().expect("release");
        let m = Lease::take(&mut b, &mba).expect("mba and l3");
        assert_eq!(m.class(), ClassId::new(7));
        m.release().expect("release");
    }

    #[test]
    fn two_leases_take_the_two_highest_classes_and_give_them_back() {
        // arrange: 2 sockets, 16 classes; CPUs 2-3 on socket 0
        let mut b = FakeBackend::broadwell_2s();
        let full = CatMask::Unified(mask(0xfffff));
        {
            // act: the second lease is taken from the first's backend
            let mut a = Lease::take(&mut b, &request(0xf, "2-3")).expect("first");
            let class = a.class();
            let mut second = Lease::take(a.backend_mut(), &request(0xf0, "4")).expect("second");
            // assert: the highest free classes, masks only in the CPUs' domain
            assert_eq!(
                (class, second.class()),
                (ClassId::new(15), ClassId::new(14))
            );
            let inner = second.backend_mut();
            assert_eq!(
                inner.class_of(LogicalCpu::new(3)).expect("class"),
                ClassId::new(15)
            );
            assert_eq!(
                l3_mask(inner, 0, ClassId::new(15)),
                CatMask::Unified(mask(0xf))
            );
            assert_eq!(
                l3_mask(inner, 1, ClassId::new(15)),
                full,
                "socket 1 untouched"
            );
            // act: give the second back
            second.release().expect("release");
            // assert: its CPU on COS0, its masks reset, its class free again
            let b = a.backend_mut();
            assert_eq!(
                b.class_of(LogicalCpu::new(4)).expect("class"),
                ClassId::new(0)
            );
            assert_eq!(l3_mask(b, 0, ClassId::new(14)), full);
            assert!(
                free_classes(b, &[])
                    .expect("free")
                    .contains(&ClassId::new(14))
            );
            a.release().expect("release");
        }
        assert_eq!(
            b.class_of(LogicalCpu::new(2)).expect("class"),
            ClassId::new(0)
        );
        assert_eq!(l3_mask(&mut b, 0, ClassId::new(15)), full);
        assert_eq!(highest_free(&mut b), Some(ClassId::new(15)));
    }

    #[test]
    fn a_request_the_platform_cannot_hold_writes_nothing() {
        let (mut b, dir) = recorded();
        let before = rdt_core::transaction::AllocState::read(&mut b).expect("state");
        // a 24-bit mask on a 20-bit CBM
        let e = Lease::take(&mut b, &request(0xff_ffff, "2")).expect_err("too wide");
        assert!(matches!(e, LeaseError::Plan(_)), "{e:?}");
        assert_eq!(
            rdt_core::transaction::AllocState::read(&mut b).expect("state"),
            before
        );
        assert_eq!(records(&dir), Vec::<String>::new(), "no record either");
    }

    #[test]
    fn when_every_class_is_taken_the_error_says_so() {
        let mut b = FakeBackend::broadwell_2s();
        for cpu in 1..16 {
            let lease = Lease::take(&mut b, &request(0x3, &cpu.to_string())).expect("take");
            lease.keep().expect("kept");
        }
        let e = Lease::take(&mut b, &request(0x3, "20")).expect_err("none left");
        assert!(matches!(e, LeaseError::NoFreeClass), "{e:?}");
    }

    #[test]
    fn tasks_join_and_leave_with_the_class_on_the_os_interface() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.add_process(4242, &[4243]);
        let me = TaskId::new(4242);
        let mut lease = Lease::take(&mut b, &request(0xff, "")).expect("take");
        lease.add_task(me).expect("add");
        let class = lease.class();
        assert_eq!(lease.tasks(), [me]);
        let inner = lease.backend_mut();
        assert_eq!(inner.class_of_task(me).expect("class"), class);
        assert_eq!(inner.class_of_thread(4243), class.get(), "every thread");
        // no CPU named: every domain got the masks
        assert_eq!(l3_mask(inner, 1, class), CatMask::Unified(mask(0xff)));
        lease.release().expect("release");
        assert_eq!(b.class_of_task(me).expect("class"), ClassId::new(0));
    }

    #[test]
    fn the_closid_of_enabled_io_alloc_is_never_taken() {
        // arrange: resctrl on an AMD with io_alloc enabled: the kernel keeps COS15
        let mut b = FakeBackend::amd_2ccx();
        b.os_interface = true;
        let io = |enabled| rdt_core::IoAlloc {
            enabled,
            class: ClassId::new(15),
            masks: Vec::new(),
        };
        b.io_alloc = Some(io(true));
        // act
        let free = free_classes(&mut b, &[]).expect("free");
        let mut lease = Lease::take(&mut b, &request(0xf, "")).expect("taken");
        // assert: the highest class the kernel leaves is COS14
        assert_eq!(free.last(), Some(&ClassId::new(14)));
        assert_eq!(free.len(), 14);
        assert_eq!(lease.class(), ClassId::new(14));
        // disabled, COS15 is a class like any other
        lease.backend_mut().io_alloc = Some(io(false));
        assert_eq!(highest_free(lease.backend_mut()), Some(ClassId::new(15)));
        lease.release().expect("released");
    }

    #[test]
    fn an_smba_limit_is_set_in_the_cpus_domains_and_given_back() {
        // arrange: AMD with SMBA, two CCX of 4 CPUs
        let mut b = FakeBackend::amd_2ccx();
        b.reconfigure(|c| {
            c.smba = rdt_core::Feature::Supported(rdt_core::fake::fixtures::amd_mba(16));
        });
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
        let mut lease = Lease::take(&mut b, &request).expect("taken");
        // assert: CCX 1 only, MBA untouched
        assert_eq!(lease.class(), ClassId::new(15));
        let inner = lease.backend_mut();
        assert_eq!(smba(inner, 1), MbaLimit::AmdUnits(16));
        assert_eq!(smba(inner, 0), MbaLimit::AmdUnits(2048));
        let mba = inner.mba_classes(CacheDomain::new(1)).expect("mba")[15].limit;
        assert_eq!(mba, MbaLimit::AmdUnits(2048));
        lease.release().expect("released");
        assert_eq!(smba(&mut b, 1), MbaLimit::AmdUnits(2048));
        // a class left with an SMBA limit (pqos -e smba:15=16) is not free
        let limited = rdt_core::transaction::Change::smba(
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

    /// A library user's function that fails after taking a class.
    fn job_that_fails(b: &mut FakeBackend) -> Result<(), Box<dyn std::error::Error>> {
        let lease = Lease::take(b, &request(0xf, "2-3"))?;
        assert_eq!(lease.backend().writers_held(), 0);
        "not a number".parse::<u32>()?; // the early `?`
        lease.release()?;
        Ok(())
    }

    #[test]
    fn a_guard_dropped_on_an_early_return_or_a_panic_gives_the_class_back() {
        // arrange
        let (mut b, dir) = recorded();
        let before = rdt_core::transaction::AllocState::read(&mut b).expect("state");
        // act: an early `?`
        assert!(job_that_fails(&mut b).is_err());
        // assert: as before, no record left
        assert_eq!(
            rdt_core::transaction::AllocState::read(&mut b).expect("state"),
            before
        );
        assert_eq!(records(&dir), Vec::<String>::new());
        // act: a panic while the lease is held
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _lease = Lease::take(&mut b, &request(0xf0, "4")).expect("take");
            panic!("a library user's bug");
        }));
        // assert
        assert!(r.is_err());
        assert_eq!(
            rdt_core::transaction::AllocState::read(&mut b).expect("state"),
            before
        );
        assert_eq!(highest_free(&mut b), Some(ClassId::new(15)));
        assert_eq!(records(&dir), Vec::<String>::new());
    }

    #[test]
    fn the_record_lives_as_long_as_the_lease_and_says_what_it_set() {
        // arrange: the OS interface of a part with MBA (8 classes), with a task
        let dir = tempfile::tempdir().expect("tempdir");
        let mut b = FakeBackend::intel_2s().with_run_dir(dir.path().join("run"));
        b.os_interface = true;
        b.add_process(4242, &[4243]);
        let req = ClassRequest {
            mba: Some(MbaLimit::Percent(50)),
            ..request(0xf, "2-3")
        };
        let pid = std::process::id();
        // act
        let mut lease = Lease::take(&mut b, &req).expect("take");
        lease.add_task(TaskId::new(4242)).expect("task");
        // assert: one record named for the interface, class and process, naming it all
        assert_eq!(lease.class(), ClassId::new(7));
        let name = format!("lease-os-7-{pid}");
        assert_eq!(records(&dir), std::slice::from_ref(&name));
        assert_eq!(
            lease.record_path(),
            Some(dir.path().join("run").join(&name).as_path())
        );
        let text = std::fs::read_to_string(dir.path().join("run").join(&name)).expect("read");
        let record: Record = serde_json::from_str(&text).expect("json");
        assert_eq!(
            (record.class, record.cpus.as_str(), record.tasks.as_slice()),
            (ClassId::new(7), "2-3", [TaskId::new(4242)].as_slice())
        );
        assert_eq!(record.cat, [(CatResource::L3, CacheDomain::new(0))]);
        assert_eq!(record.bandwidth, [(MbaResource::Mba, CacheDomain::new(0))]);
        // a second lease of the process has a record of its own
        let second = Lease::take(lease.backend_mut(), &request(0x3, "4")).expect("second");
        assert_eq!(records(&dir).len(), 2);
        second.release().expect("release");
        lease.release().expect("release");
        assert_eq!(records(&dir), Vec::<String>::new(), "gone with the lease");
    }

    #[test]
    fn a_killed_holders_class_is_given_back_by_the_next_reclaim_on_both_interfaces() {
        for os in [false, true] {
            // arrange: a holder "killed" with its class set (record unlocked, not removed)
            let (mut b, dir) = recorded();
            b.os_interface = os;
            b.add_process(4242, &[4243]);
            let before = rdt_core::transaction::AllocState::read(&mut b).expect("state");
            let mut lease = Lease::take(&mut b, &request(0xf, "2-3")).expect("take");
            if os {
                lease.add_task(TaskId::new(4242)).expect("task");
            }
            lease.die();
            assert_eq!(highest_free(&mut b), Some(ClassId::new(14)), "os {os}");
            // act
            let reclaimed = reclaim_soon(&mut b);
            // assert: the class is free again, its CPUs and task in COS0, masks full
            // every thread in the class, listed one by one as resctrl's `tasks` lists them
            let tasks = if os {
                vec![TaskId::new(4242), TaskId::new(4243)]
            } else {
                Vec::new()
            };
            assert_eq!(
                reclaimed,
                [Reclaimed::Lease {
                    class: ClassId::new(15),
                    pid: std::process::id(),
                    cpus: "2-3".parse().expect("cpus"),
                    tasks,
                }],
                "os {os}"
            );
            assert_eq!(
                rdt_core::transaction::AllocState::read(&mut b).expect("state"),
                before
            );
            assert_eq!(highest_free(&mut b), Some(ClassId::new(15)));
            if os {
                assert_eq!(b.class_of_thread(4243), 0);
            }
            assert_eq!(records(&dir), Vec::<String>::new(), "record removed");
            assert_eq!(reclaim(&mut b).expect("reclaim"), [], "nothing twice");
        }
    }

    #[test]
    fn a_live_lease_is_not_reclaimed_and_a_kept_class_has_no_record() {
        let (mut b, dir) = recorded();
        // a live lease: its record is locked
        let mut lease = Lease::take(&mut b, &request(0xf, "2")).expect("take");
        assert_eq!(reclaim(lease.backend_mut()).expect("reclaim"), []);
        assert_eq!(
            lease
                .backend_mut()
                .class_of(LogicalCpu::new(2))
                .expect("class"),
            ClassId::new(15)
        );
        // kept: no record, and nothing gives the class back
        assert_eq!(lease.keep().expect("keep"), ClassId::new(15));
        assert_eq!(records(&dir), Vec::<String>::new());
        assert_eq!(reclaim(&mut b).expect("reclaim"), []);
        assert_eq!(
            b.class_of(LogicalCpu::new(2)).expect("class"),
            ClassId::new(15)
        );
        assert_eq!(highest_free(&mut b), Some(ClassId::new(14)));
    }

    #[test]
    fn a_give_back_that_fails_on_drop_leaves_the_record_for_the_next_open() {
        // arrange
        let (mut b, dir) = recorded();
        {
            let mut lease = Lease::take(&mut b, &request(0xf, "2-3")).expect("take");
            lease.backend_mut().fail_nth_write(1);
        } // act: the drop's give-back fails (rolled back), logged
        // assert: still taken, the record kept (unlocked)
        assert_eq!(
            b.class_of(LogicalCpu::new(2)).expect("class"),
            ClassId::new(15)
        );
        assert_eq!(records(&dir).len(), 1);
        // the next open gives it back
        let r = reclaim_soon(&mut b);
        assert!(
            matches!(&r[..], [Reclaimed::Lease { class, .. }] if class.get() == 15),
            "{r:?}"
        );
        assert_eq!(
            b.class_of(LogicalCpu::new(2)).expect("class"),
            ClassId::new(0)
        );
        assert_eq!(records(&dir), Vec::<String>::new());
    }

    #[test]
    fn a_stale_record_of_a_class_leased_again_is_removed_without_touching_the_class() {
        // arrange: a dead record of COS15 (its class given back meanwhile), and a live
        // lease of COS15 by this process
        let (mut b, dir) = recorded();
        let run = dir.path().join("run");
        let stale = Lease::take(&mut b, &request(0x3, "5")).expect("take");
        let stale_path = stale.record_path().expect("record").to_owned();
        let text = std::fs::read(&stale_path).expect("record");
        stale.release().expect("release");
        std::fs::write(run.join("lease-msr-15-4194001"), text).expect("plant");
        let mut live = Lease::take(&mut b, &request(0xf, "2")).expect("take");
        assert_eq!(live.class(), ClassId::new(15));
        // act
        let reclaimed = reclaim(live.backend_mut()).expect("reclaim");
        // assert: the live lease's class untouched, the stale record gone
        assert_eq!(reclaimed, []);
        let inner = live.backend_mut();
        assert_eq!(
            inner.class_of(LogicalCpu::new(2)).expect("class"),
            ClassId::new(15)
        );
        assert_eq!(
            l3_mask(inner, 0, ClassId::new(15)),
            CatMask::Unified(mask(0xf))
        );
        assert_eq!(
            records(&dir),
            [format!("lease-msr-15-{}", std::process::id())]
        );
        live.release().expect("release");
    }

    #[test]
    fn hostile_records_are_skipped_not_followed_and_nothing_panics() {
        // arrange: a run directory full of things named like records
        let (mut b, dir) = recorded();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).expect("mkdir");
        let target = dir.path().join("target");
        std::fs::write(&target, b"{}").expect("target");
        std::os::unix::fs::symlink(&target, run.join("lease-msr-15-1")).expect("symlink");
        nix::unistd::mkfifo(&run.join("lease-msr-14-2"), nix::sys::stat::Mode::S_IRWXU)
            .expect("mkfifo");
        std::fs::write(run.join("lease-msr-13-3"), [0xff, 0xfe, 0x00]).expect("not utf-8");
        std::fs::write(run.join("lease-msr-12-4"), vec![b' '; 2 << 20]).expect("huge");
        std::fs::write(run.join("lease-msr-11-5"), b"{\"version\": 1, garbage").expect("bad json");
        std::fs::create_dir(run.join("lease-msr-10-6")).expect("a directory");
        // valid JSON naming COS0, a class other than its name's, a domain that does not exist
        let record = |class: u32, cpus: &str, domain: u32| {
            format!(
                "{{\"version\":1,\"interface\":\"Msr\",\"class\":{class},\"cpus\":\"{cpus}\",\
                 \"cat\":[[\"L3\",{domain}]],\"bandwidth\":[],\"tasks\":[]}}"
            )
        };
        std::fs::write(run.join("lease-msr-0-7"), record(0, "2", 0)).expect("cos0");
        std::fs::write(run.join("lease-msr-9-8"), record(8, "2", 0)).expect("other class");
        std::fs::write(run.join("lease-msr-7-9"), record(7, "2", 9)).expect("no domain");
        std::fs::write(run.join("lease-msr-6-10"), record(6, "0-99999", 0)).expect("cpus");
        b.associate(LogicalCpu::new(2), ClassId::new(0))
            .expect("assoc");
        let before = rdt_core::transaction::AllocState::read(&mut b).expect("state");
        // act
        let reclaimed = reclaim(&mut b).expect("reclaim does not fail");
        // assert: nothing given back, nothing written, nothing followed or removed
        assert_eq!(reclaimed, []);
        assert_eq!(
            rdt_core::transaction::AllocState::read(&mut b).expect("state"),
            before
        );
        assert_eq!(std::fs::read(&target).expect("target"), b"{}");
        assert_eq!(records(&dir).len(), 10, "left in place");
        // and a lease can still be taken and given back beside them
        let lease = Lease::take(&mut b, &request(0xf, "3")).expect("take");
        assert_eq!(lease.class(), ClassId::new(15));
        lease.release().expect("release");
    }

    #[test]
    fn a_reclaimed_lease_says_what_was_given_back() {
        let r = Reclaimed::Lease {
            class: ClassId::new(7),
            pid: 1234,
            cpus: "2-3".parse().expect("cpus"),
            tasks: vec![TaskId::new(5678)],
        };
        assert_eq!(
            r.to_string(),
            "gave back COS7: process 1234, which leased it, ended without releasing it \
             (CPUs 2-3 and tasks 5678 back in COS0, masks and limits reset)"
        );
        let r = Reclaimed::Lease {
            class: ClassId::new(7),
            pid: 1234,
            cpus: CpuSet::new(),
            tasks: Vec::new(),
        };
        assert_eq!(
            r.to_string(),
            "gave back COS7: process 1234, which leased it, ended without releasing it \
             (masks and limits reset)"
        );
    }
}

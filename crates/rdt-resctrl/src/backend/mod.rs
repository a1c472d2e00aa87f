//! [`ResctrlBackend`]: the [`Backend`] trait over the resctrl filesystem.
//!
//! By concern: [`alloc`] (schemata of `COS<n>` groups, resets, remounts), [`assoc`] (CPUs
//! and tasks into classes), [`groups`] (listing groups and who holds what), [`monitoring`]
//! (monitor groups and polls), [`batch`] (starting monitor groups, in batches). The
//! [`Backend`] implementation here delegates to them.

mod alloc;
mod assoc;
mod batch;
mod containers;
mod groups;
mod mbm;
mod monitoring;
mod named;

pub use named::{NAMES_FILE, recorded_groups};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rdt_core::{
    Backend, CacheDomain, Capabilities, CatClass, CatResource, ClassId, CpuSet, ExclusiveWays,
    GroupInfo, GroupStartError, Interface, LogicalCpu, MbaClass, MbaCtrl, MbaResource, MonEvents,
    MonGroupId, MonValues, NamedClasses, NoPmu, OsOps, PmuSource, Reset, Rmid, TaskId, Topology,
    Writers,
};
use rdt_host::runfile::RunDirPath;

use self::monitoring::MonGroup;
use crate::ResctrlError;
use crate::fs::{Fs, Proc, join};
use crate::info::{
    BW_FILES, CACHE_FILES, CACHE_SCHEMAS, InfoFiles, MON_FILES, ResctrlInfo, mba_mbps_in_tree,
};
use crate::io::{HostFs, ResctrlFs};
use crate::lock::{DEFAULT_LOCK_TIMEOUT, RootLock};
use crate::mount::{KernelMount, MountControl, MountOptions};
use crate::schemata::Schemata;

/// The default resctrl root.
pub const DEFAULT_ROOT: &str = "/sys/fs/resctrl";
/// The default `/proc`.
pub const DEFAULT_PROC: &str = "/proc";
/// The most a single `write(2)` to a resctrl file may carry (`PAGE_SIZE`, kernfs
/// `atomic_write_len`); a longer `schemata` is written one line per write.
const MAX_WRITE: usize = 4096;

/// Where and how to open resctrl: the paths, the filesystem and mount seams, the lock wait.
#[derive(Debug)]
pub struct ResctrlOptions {
    root: PathBuf,
    /// `None`: [`HostFs`] at `root`.
    files: Option<Arc<dyn ResctrlFs>>,
    proc_root: PathBuf,
    mount: Option<Box<dyn MountControl>>,
    lock_timeout: Duration,
    run_dir: Option<PathBuf>,
}

impl Default for ResctrlOptions {
    /// The host: `/sys/fs/resctrl`, `/proc`, [`KernelMount`] over `/proc/mounts`, a 5 s wait.
    fn default() -> Self {
        Self::new(DEFAULT_ROOT).mount_control(KernelMount::new(DEFAULT_ROOT, "/proc/mounts"))
    }
}

impl ResctrlOptions {
    /// resctrl at `root`, `/proc` for tasks, no mount control (CDP and `mba_MBps` cannot be
    /// changed; `mba_MBps` is detected from the tree), a 5 s lock wait.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            files: None,
            proc_root: PathBuf::from(DEFAULT_PROC),
            mount: None,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            run_dir: None,
        }
    }

    /// Keeps the journal of a transaction in progress in `dir` ([`BackendExt::run_dir`](rdt_core::BackendExt::run_dir); a
    /// root-only directory that outlives the process, `/run/rdt` on a host), so that the
    /// next process can roll back one that was killed half-way
    /// ([`rdt_host::transaction::recover`]).
    #[must_use]
    pub fn run_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.run_dir = Some(dir.into());
        self
    }

    /// Does the file operations through `files` instead of the real files under the root
    /// ([`HostFs`]): an in-process resctrl (the simulated platform's, with no mount). The
    /// root then only names the files in messages and errors.
    #[must_use]
    pub fn files(mut self, files: Arc<dyn ResctrlFs>) -> Self {
        self.files = Some(files);
        self
    }

    /// Reads tasks' threads from `proc_root/<pid>/task/` instead of `/proc`.
    #[must_use]
    pub fn proc_root(mut self, proc_root: impl Into<PathBuf>) -> Self {
        self.proc_root = proc_root.into();
        self
    }

    /// Reads and changes the mount options through `mount`.
    #[must_use]
    pub fn mount_control(mut self, mount: impl MountControl + 'static) -> Self {
        self.mount = Some(Box::new(mount));
        self
    }

    /// Waits at most `timeout` for another tool's lock.
    #[must_use]
    pub const fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }
}

/// Intel RDT / AMD PQoS through the Linux resctrl filesystem: pqos's "OS interface".
///
/// # Groups
/// Class of service *n* is the control group `COS<n>` (COS 0 is the root group), the name
/// Intel's pqos uses, so both tools see one configuration; it is created the first time it
/// is needed. Monitor groups are `pqos-<pid>-<n>` under the control group of the CPUs or
/// tasks they watch. Both kinds of names are "ours" ([`GroupOwner::Pqos`](rdt_core::GroupOwner::Pqos)); any other group
/// belongs to another tool (goresctrl, kubelet, a user) and is never rewritten, emptied or
/// removed: a CPU or task in such a group is not moved, and a reset that needs a remount is
/// refused while one exists.
///
/// # Writes
/// Every value is checked against the capabilities before the first write. A group's
/// `schemata` is read, changed and written back whole in one `write(2)`; `cpus_list` is
/// read, changed and written (the written list replaces the group's CPUs); `tasks` gets one
/// id per write, every thread of a process when a process id is named. When a multi-class
/// change fails part-way, what it already wrote is written back and the groups it created
/// are removed. A refused write is [`ResctrlError::Rejected`] with the kernel's
/// `info/last_cmd_status`.
///
/// # Locking
/// `flock` on the root: `LOCK_EX` around every change (and the `last_cmd_status` read after
/// it), `LOCK_SH` around reads and polls, waiting at most the configured time for another
/// tool ([`ResctrlError::Locked`]).
///
/// # Monitoring
/// A poll reads each `mon_data/mon_L3_XX/<event>` file of every group with one positioned
/// read on a file opened when the group started: no open, stat or directory scan per poll.
/// IPC and LLC misses come from the [`PmuSource`] `P` (per CPU for CPU groups, per thread
/// for task groups).
///
/// # Examples
/// ```no_run
/// use rdt_core::{Backend, BackendExt, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource, ClassId};
/// use rdt_core::{LogicalCpu, NoPmu, Topology};
/// use rdt_host::topology::TopologyFromSysfs;
/// use rdt_resctrl::{ResctrlBackend, ResctrlOptions};
/// let topology = Topology::from_sysfs(std::path::Path::new(Topology::DEFAULT_SYSFS))?;
/// let mut rdt = ResctrlBackend::open(ResctrlOptions::default(), topology, None, NoPmu)?;
/// // pqos -e "llc:1=0x7f0" -a "llc:1=2-3"
/// let mask = CatMask::Unified(CacheBitmask::new(0x7f0)?);
/// rdt.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[CatClass { class: ClassId::new(1), mask }])?;
/// rdt.associate(LogicalCpu::new(2), ClassId::new(1))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # References
/// Linux `Documentation/arch/x86/resctrl.rst`; intel-cmt-cat `lib/os_allocation.c`,
/// `lib/resctrl_monitoring.c`; pqos(8).
pub struct ResctrlBackend<P: PmuSource = NoPmu> {
    fs: Fs,
    proc: Proc,
    lock: RootLock,
    mount: Option<Box<dyn MountControl>>,
    cpu_caps: Option<Capabilities>,
    info: ResctrlInfo,
    caps: Capabilities,
    mba_mbps: bool,
    debug_mount: bool,
    snc: bool,
    /// Domain ids of every schema, from the root's `schemata`.
    domains: BTreeMap<String, Vec<u32>>,
    /// L3 monitoring domain ids, from the root's `mon_data/`.
    mon_domains: Vec<u32>,
    topology: Topology,
    pmu: P,
    groups: Vec<MonGroup>,
    next_id: u32,
    next_name: u32,
    /// Control groups this backend made (and has not removed since).
    created: BTreeSet<String>,
    /// Control groups another tool made that this backend adopted
    /// ([`rdt_core::BackendExt::adopt_class`], on the operator's word) in this process:
    /// their release removes the empty monitor groups that tool left in them.
    adopted: BTreeSet<String>,
    /// [`ResctrlOptions::run_dir`], removed when unused as the backend goes
    /// ([`RunDirPath`]).
    run_dir: Option<RunDirPath>,
    /// Named classes ([`BackendExt::class_named`]): the control group of each class that is
    /// not `COS<n>`.
    names: BTreeMap<ClassId, String>,
}

impl<P: PmuSource> fmt::Debug for ResctrlBackend<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResctrlBackend")
            .field("root", &self.fs.root())
            .field("info", &self.info)
            .field("mba_mbps", &self.mba_mbps)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl<P: PmuSource> ResctrlBackend<P> {
    /// Opens resctrl as `opts` says, over the online CPUs of `topology` (from sysfs), with
    /// the CPUID-detected capabilities `cpu_caps` when available (see
    /// [`ResctrlInfo::capabilities`] for what each source supplies) and IPC/LLC misses from
    /// `pmu`.
    ///
    /// Reads `info/`, the root `schemata` and `mon_data/` under a shared lock. `mba_MBps` is
    /// taken from the mount control when there is one, else from an `mba_MBps_event` file in
    /// the root (Linux 6.x), else from the root's `MB` values (above 100 on linear, percent
    /// MBA only with `mba_MBps`).
    ///
    /// # Errors
    /// [`ResctrlError::NotMounted`] without `<root>/info`; [`ResctrlError::Locked`];
    /// [`ResctrlError::Info`] or [`ResctrlError::Parse`] for files that do not parse; I/O
    /// errors naming the path.
    pub fn open(
        opts: ResctrlOptions,
        topology: Topology,
        cpu_caps: Option<Capabilities>,
        pmu: P,
    ) -> Result<Self, ResctrlError> {
        let ResctrlOptions {
            root,
            files,
            proc_root,
            mount,
            lock_timeout,
            run_dir,
        } = opts;
        let files = files.unwrap_or_else(|| Arc::new(HostFs::new(&root)));
        let fs = Fs::new(root, files);
        if !fs.is_dir("info") {
            return Err(ResctrlError::NotMounted {
                root: fs.root().to_owned(),
            });
        }
        let lock = RootLock::open(&fs, lock_timeout)?;
        let mut this = Self {
            fs,
            proc: Proc::new(proc_root),
            lock,
            mount,
            caps: cpu_caps
                .clone()
                .unwrap_or_else(|| ResctrlInfo::default().capabilities(None, &Schemata::default())),
            cpu_caps,
            info: ResctrlInfo::default(),
            mba_mbps: false,
            debug_mount: false,
            snc: false,
            domains: BTreeMap::new(),
            mon_domains: Vec::new(),
            topology,
            pmu,
            groups: Vec::new(),
            next_id: 0,
            next_name: 0,
            created: BTreeSet::new(),
            adopted: BTreeSet::new(),
            run_dir: run_dir.map(RunDirPath::new),
            names: BTreeMap::new(),
        };
        let guard = this.lock.shared()?;
        this.load()?;
        this.bind_recorded()?;
        drop(guard);
        Ok(this)
    }

    /// (Re)reads everything `open` reads. The caller holds a lock.
    fn load(&mut self) -> Result<(), ResctrlError> {
        let mut files = InfoFiles::new();
        for dir in self.fs.subdirs("info")? {
            let names: &[&str] = if CACHE_SCHEMAS.contains(&dir.as_str()) {
                CACHE_FILES
            } else if dir == "MB" || dir == "SMBA" {
                BW_FILES
            } else if dir == "L3_MON" {
                MON_FILES
            } else {
                continue;
            };
            for name in names {
                let rel = format!("{dir}/{name}");
                if let Some(text) = self.fs.read_opt(&format!("info/{rel}"))? {
                    files.insert(rel, text);
                }
            }
        }
        let info = ResctrlInfo::parse(&files).map_err(|source| ResctrlError::Info {
            root: self.fs.root().to_owned(),
            source,
        })?;
        let root_schemata = self.read_schemata("")?;
        let mut mon_domains = Vec::new();
        let mut snc = false;
        for d in self.fs.subdirs("mon_data")? {
            if let Some(id) = d.strip_prefix("mon_L3_").and_then(|n| n.parse().ok()) {
                if !snc {
                    snc = self
                        .fs
                        .subdirs(&format!("mon_data/{d}"))?
                        .iter()
                        .any(|s| s.starts_with("mon_sub_L3_"));
                }
                mon_domains.push(id);
            }
        }
        mon_domains.sort_unstable();
        let mount = match &self.mount {
            Some(m) => m.options().ok().flatten(),
            None => None,
        };
        self.debug_mount = mount.is_some_and(|m| m.debug);
        self.mba_mbps = match mount {
            Some(m) => m.mba_mbps,
            None => mba_mbps_in_tree(
                self.fs.exists("mba_MBps_event"),
                info.mb.as_ref(),
                &root_schemata,
            ),
        };
        self.domains = root_schemata
            .lines()
            .iter()
            .map(|l| (l.name.clone(), l.values.iter().map(|(d, _)| *d).collect()))
            .collect();
        self.caps = info.capabilities(self.cpu_caps.as_ref(), &root_schemata);
        if let Some(mba) = self.caps.mba.get_mut() {
            mba.ctrl_enabled = self.mba_mbps;
        }
        self.info = info;
        self.mon_domains = mon_domains;
        self.snc = snc;
        Ok(())
    }

    /// The resctrl root.
    #[must_use]
    pub fn root(&self) -> &Path {
        self.fs.root()
    }

    /// What `info/` says.
    #[must_use]
    pub const fn info(&self) -> &ResctrlInfo {
        &self.info
    }

    /// The options resctrl is mounted with, as far as they are known: CDP from `info/`,
    /// `mba_MBps` as [`ResctrlBackend::open`] found it, `debug` from the mount control.
    #[must_use]
    pub fn mount_options(&self) -> MountOptions {
        MountOptions {
            cdp: self.info.l3_cdp(),
            cdpl2: self.info.l2_cdp(),
            mba_mbps: self.mba_mbps,
            debug: self.debug_mount,
        }
    }

    /// The L3 monitoring domains (`mon_data/mon_L3_XX`).
    #[must_use]
    pub fn mon_domains(&self) -> &[u32] {
        &self.mon_domains
    }

    /// Changes how long calls wait for another tool's lock.
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock.set_timeout(timeout);
    }

    /// The PMU source.
    pub const fn pmu_mut(&mut self) -> &mut P {
        &mut self.pmu
    }

    fn read_schemata(&self, group: &str) -> Result<Schemata, ResctrlError> {
        let rel = join(group, "schemata");
        let text = self.fs.read(&rel)?;
        text.parse()
            .map_err(|e: crate::SchemataError| ResctrlError::Parse {
                path: self.fs.path(&rel),
                text: text.trim().to_owned(),
                expected: e.to_string(),
            })
    }

    fn write_schemata(&self, group: &str, s: &Schemata) -> Result<(), ResctrlError> {
        let rel = join(group, "schemata");
        let text = s.to_string();
        if text.len() <= MAX_WRITE {
            return self.fs.write(&rel, &text);
        }
        for line in text.lines() {
            self.fs.write(&rel, &format!("{line}\n"))?;
        }
        Ok(())
    }

    fn bad_value(&self, group: &str, e: &crate::SchemataError) -> ResctrlError {
        ResctrlError::Parse {
            path: self.fs.path(&join(group, "schemata")),
            text: String::new(),
            expected: e.to_string(),
        }
    }
}

/// What the [`Backend`] and its abilities' impls below call that takes more than a line.
impl<P: PmuSource> ResctrlBackend<P> {
    /// Reads `mode` of every control group, and the masks the `exclusive` ones hold in
    /// `domain` (data and code masks together with CDP on); empty without that CAT.
    ///
    /// # Errors
    /// The lock, a read, or a `schemata` that does not parse.
    fn read_exclusive_ways(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<ExclusiveWays>, ResctrlError> {
        let schemas = match self.cat_schemas(resource) {
            Ok(alloc::CatSchemas::Unified(s)) => vec![s],
            Ok(alloc::CatSchemas::Cdp { data, code }) => vec![data, code],
            Err(_) => return Ok(Vec::new()),
        };
        let _g = self.lock.shared()?;
        let mut out = Vec::new();
        for g in self.fs.ctrl_groups()? {
            let mode = self.fs.read_opt(&join(&g, "mode"))?.unwrap_or_default();
            if !mode.trim().starts_with("exclusive") {
                continue;
            }
            let schemata = self.read_schemata(&g)?;
            let mut bits = 0;
            for s in &schemas {
                bits |= schemata
                    .cache_mask(s, domain.get())
                    .map_err(|e| self.bad_value(&g, &e))?
                    .unwrap_or(0);
            }
            let class = self.class_of_group(&g).map(ClassId::new);
            out.push(ExclusiveWays {
                group: g,
                class,
                bits,
            });
        }
        Ok(out)
    }

    /// The control group `name` as a class: its handle is the lowest class number that
    /// neither has a `COS<n>` group nor names another group, below the CLOSID limit. The
    /// group is made on the first write, like `COS<n>` (the kernel gives it its CLOSID).
    /// A group of that name made by another tool becomes this class: naming it claims it.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for a name that
    /// cannot be a group (empty, `/`, `.`, `..`, `info`, `mon_groups`, `mon_data`, a
    /// `COS<n>` name); [`RequestError::Limit`](rdt_core::RequestError::Limit) when every
    /// class number is taken; listing errors.
    fn name_class(&mut self, name: &str) -> Result<ClassId, ResctrlError> {
        if let Some((c, _)) = self.names.iter().find(|(_, n)| *n == name) {
            return Ok(*c);
        }
        Self::check_group_name(name)?;
        let existing: BTreeSet<String> = {
            let _g = self.lock.shared()?;
            self.fs.ctrl_groups()?.into_iter().collect()
        };
        let n = self.caps.classes(Interface::Os);
        let class = (1..n)
            .map(ClassId::new)
            .find(|c| !self.names.contains_key(c) && !existing.contains(&format!("COS{c}")))
            .ok_or(rdt_core::LimitError::ClassOutOfRange {
                resource: "named class",
                class: ClassId::new(n),
                num_classes: n,
            })?;
        self.names.insert(class, name.to_owned());
        Ok(class)
    }

    /// Makes `class` stand for the control group `name` (a journal's record of a named
    /// class, replayed by [`rdt_host::transaction::recover`]).
    ///
    /// # Errors
    /// As [`NamedClasses::class_named`] for the name.
    fn bind_name(&mut self, class: ClassId, name: &str) -> Result<(), ResctrlError> {
        Self::check_group_name(name)?;
        self.names.insert(class, name.to_owned());
        Ok(())
    }

    /// Adds the classes' groups (`COS<n>` or named) to the groups this backend made.
    fn own_groups_of(&mut self, classes: &[ClassId]) {
        let groups: Vec<String> = classes
            .iter()
            .filter(|c| c.get() != 0)
            .map(|c| self.group_of(*c))
            .collect();
        self.created.extend(groups);
    }

    /// Lists the control groups and reads each `cpus_list` once (one CPU: until it is
    /// found): a CPU in `COS<n>` is in class n, one in no group in COS 0, one in another
    /// tool's group [`RequestError::ForeignGroup`](rdt_core::RequestError::ForeignGroup).
    /// No RMIDs.
    #[allow(clippy::type_complexity)] // a list of per-CPU results
    fn read_associations(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), ResctrlError>)>, ResctrlError>
    {
        for cpu in cpus.iter() {
            self.topology
                .get(cpu)
                .ok_or(rdt_core::RequestError::NoSuchCpu(cpu))?;
        }
        if cpus.len() == 1 {
            return Ok(cpus
                .iter()
                .map(|cpu| (cpu, self.cpu_class(cpu).map(|c| (c, None))))
                .collect());
        }
        let ctrl = {
            let _g = self.lock.shared()?;
            self.cpu_homes()?.0
        };
        Ok(cpus
            .iter()
            .map(|cpu| {
                let class = match ctrl.iter().find(|(_, s)| s.contains(cpu)) {
                    None => Ok(ClassId::new(0)),
                    Some((g, _)) => self
                        .class_of_group(g)
                        .map(ClassId::new)
                        .ok_or_else(|| ResctrlError::foreign(format!("CPU {cpu}"), g)),
                };
                (cpu, class.map(|c| (c, None)))
            })
            .collect())
    }
}

impl<P: PmuSource> Backend for ResctrlBackend<P> {
    type Error = ResctrlError;

    fn interface(&self) -> Interface {
        Interface::Os
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Reads each class's `schemata` (the root for COS 0, `COS<n>` or the named group)
    /// once for every domain; a class whose group does not exist yet reports what a reset
    /// group holds (every way).
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) without that CAT,
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain), read or parse
    /// errors; [`ResctrlError::Parse`] for an empty mask (legal on AMD, not representable
    /// as a [`CacheBitmask`](rdt_core::CacheBitmask)).
    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, ResctrlError> {
        self.read_cat_classes_in(resource, domains)
    }

    /// Checks every class, domain and mask first ([`Capabilities::check_cat`]); then per
    /// class: creates its group if needed, reads its `schemata`, changes the values of every
    /// domain given for it and writes it back in one write. A failure undoes the classes
    /// already written and removes groups it created.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) (class beyond the CLOSIDs,
    /// mask outside the platform's limits),
    /// [`RequestError::CdpMismatch`](rdt_core::RequestError::CdpMismatch),
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain): nothing
    /// written; [`ResctrlError::OutOfClosids`]; [`ResctrlError::Rejected`].
    fn set_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), ResctrlError> {
        self.write_cat_classes(resource, masks)
    }

    /// Reads the `MB` (MBA) or `SMBA` line of the root and each class's group once for
    /// every domain: percent, MiB/s on an `mba_MBps` mount (MB only), AMD units on AMD. A
    /// class without a group reports the default.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) without the resource,
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain), read errors.
    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, ResctrlError> {
        self.read_mba_classes_in(resource, domains)
    }

    /// Checks every limit (unit for this mount, range from `info/MB` or `info/SMBA`), writes
    /// the `MB` or `SMBA` line of one `schemata` per class for all its domains as
    /// [`Backend::set_cat_masks`] does, and reads back what the kernel applied (Intel rounds
    /// up to `bandwidth_gran`: 15 -> 20).
    ///
    /// # Errors
    /// [`RequestError::MbaUnit`](rdt_core::RequestError::MbaUnit),
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit),
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain): nothing
    /// written; [`ResctrlError::OutOfClosids`]; [`ResctrlError::Rejected`].
    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, ResctrlError> {
        self.write_mba_classes(resource, limits)
    }

    /// Lists the control groups and reads each `cpus_list` once (one CPU: until it is
    /// found): a CPU in `COS<n>` is in class n, one in no group in COS 0, one in another
    /// tool's group [`RequestError::ForeignGroup`](rdt_core::RequestError::ForeignGroup).
    /// No RMIDs.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu); the lock; listing
    /// the groups or reading a `cpus_list` fails.
    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), ResctrlError>)>, ResctrlError>
    {
        self.read_associations(cpus)
    }

    /// One `cpus_list` write of the class's group (made when missing; the root's for COS 0)
    /// for the whole set, all or nothing; monitor groups of that control group keep their
    /// CPUs.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu),
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) (no CLOSID for the class),
    /// [`RequestError::ForeignGroup`](rdt_core::RequestError::ForeignGroup) (a CPU is in
    /// another tool's group): nothing written; [`ResctrlError::OutOfClosids`],
    /// [`ResctrlError::Rejected`].
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), ResctrlError> {
        self.move_cpus(cpus, class)
    }

    /// Allocation (pqos `-R`): when CDP or `mba_MBps` must change, remounts through the
    /// mount control (every group goes, every control value is reset), refused while
    /// another tool's group exists. Otherwise: the root's and every `COS<n>`'s `schemata`
    /// back to the defaults (every way; 100 %, the AMD maximum, or 4294967295 MBps), their
    /// CPUs and tasks back to the root; other tools' groups are not touched; the MBM event
    /// configurations back to the defaults. Monitoring: removes every `pqos-*` monitor
    /// group (any pid, under any control group) and forgets this backend's groups; other
    /// tools' monitor groups stay.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for CDP/MBA CTRL
    /// the platform lacks or without a mount control; [`ResctrlError::RemountBlocked`];
    /// [`ResctrlError::Remount`]; [`ResctrlError::Rejected`] (a foreign exclusive group can
    /// refuse the full mask); the first failed removal of a monitor group (every group is
    /// still attempted).
    fn reset(&mut self, what: &Reset) -> Result<(), ResctrlError> {
        match what {
            Reset::Allocation(cfg) => {
                self.reset_alloc(*cfg)?;
                self.restore_mbm_configs()
            }
            Reset::Monitoring(cfg) => {
                // resctrl has no I/O RDT monitoring or SNC mode control: refused before
                // any write, as pqos's OS interface refuses them
                self.capabilities()
                    .check_mon_reset(Interface::Os, cfg)
                    .map_err(ResctrlError::from)?;
                self.reset_mon()
            }
        }
    }

    /// Creates `pqos-<pid>-<n>` under the control group of each group's CPUs (the same name
    /// under each when they span several), writes their `cpus_list`, and opens the
    /// `mon_data` files of their L3 domains: all groups at once, all or none, with resctrl
    /// listed once for the batch and the RMIDs and ABMC counters of every group checked
    /// before any directory is made; the names are picked in one pass.
    ///
    /// # Errors
    /// [`GroupStartError`] naming the first failed group:
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup),
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu),
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported),
    /// [`RequestError::AlreadyMonitored`](rdt_core::RequestError::AlreadyMonitored): nothing
    /// written; [`RequestError::OutOfRmids`](rdt_core::RequestError::OutOfRmids),
    /// [`ResctrlError::NotEnoughMbmCounters`] (ABMC's `mbm_event` mode),
    /// [`ResctrlError::Rejected`] after removing what was made.
    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<ResctrlError>> {
        self.start_cpu_groups(groups)
    }

    /// Reads every counter file once (positioned read) under a shared lock, and the PMU.
    ///
    /// # Errors
    /// [`ResctrlError::Locked`]; a read that fails (the group was removed behind our back:
    /// `ENOENT`) or text that is not a count or a status word.
    fn poll(&mut self) -> Result<(), ResctrlError> {
        self.poll_groups()
    }

    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.group_values(group)
    }

    /// Closes the group's files and removes the directories it created (its CPUs and tasks
    /// go back to their control group); a watched group is only forgotten.
    ///
    /// # Errors
    /// [`RequestError::NoSuchGroup`](rdt_core::RequestError::NoSuchGroup); the first failed
    /// removal.
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), ResctrlError> {
        self.stop_group(group)
    }

    fn writers(&mut self) -> Option<&mut dyn Writers<ResctrlError>> {
        Some(self)
    }

    fn names(&mut self) -> Option<&mut dyn NamedClasses<ResctrlError>> {
        Some(self)
    }

    fn os(&mut self) -> Option<&mut dyn OsOps<ResctrlError>> {
        Some(self)
    }
}

impl<P: PmuSource, E: From<ResctrlError>> OsOps<E> for ResctrlBackend<P> {
    /// Finds the task in the `tasks` of the control groups other than the root.
    ///
    /// # Errors
    /// [`RequestError::NoSuchTask`](rdt_core::RequestError::NoSuchTask),
    /// [`RequestError::ForeignGroup`](rdt_core::RequestError::ForeignGroup), read errors.
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, E> {
        Ok(self.task_class(task)?)
    }

    /// Writes each thread of the task (every thread of a process) to `COS<n>/tasks` (the
    /// root's for COS 0), one id per write, creating the group; threads that exit meanwhile
    /// are skipped.
    ///
    /// # Errors
    /// [`RequestError::NoSuchTask`](rdt_core::RequestError::NoSuchTask),
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit),
    /// [`RequestError::ForeignGroup`](rdt_core::RequestError::ForeignGroup) (a thread is in
    /// another tool's group): nothing written; [`ResctrlError::OutOfClosids`],
    /// [`ResctrlError::Rejected`].
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), E> {
        Ok(self.move_task_to_class(task, class)?)
    }

    /// `COS<n>/tasks` (the root's for COS 0), ascending; empty when the group does not
    /// exist.
    ///
    /// # Errors
    /// Read errors.
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, E> {
        Ok(self.class_tasks(class)?)
    }

    /// Creates `pqos-<pid>-<n>` under the control group of each thread (all threads of each
    /// named process), writes each thread id to it, and opens the `mon_data` files of every
    /// L3 domain (tasks run anywhere): every control and monitor group's `tasks` read once
    /// for the batch, RMIDs and ABMC counters (every L3 domain per group) checked before any
    /// directory is made.
    ///
    /// # Errors
    /// [`GroupStartError`] naming the first failed group, with
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup),
    /// [`RequestError::NoSuchTask`](rdt_core::RequestError::NoSuchTask),
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported),
    /// [`RequestError::AlreadyMonitored`](rdt_core::RequestError::AlreadyMonitored): nothing
    /// written; [`RequestError::OutOfRmids`](rdt_core::RequestError::OutOfRmids),
    /// [`ResctrlError::NotEnoughMbmCounters`], [`ResctrlError::Rejected`] after removing
    /// what was made.
    fn start_monitoring_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<E>> {
        self.start_task_groups(groups).map_err(|e| e.map(E::from))
    }

    /// Writes the joining threads to the group's monitor group under their control group
    /// and the leaving ones to their control group's `tasks`: the group's RMIDs and counts
    /// go on.
    ///
    /// # Errors
    /// As [`OsOps::change_monitoring_tasks`]; the root lock; [`ResctrlError::Rejected`].
    fn change_monitoring_tasks(
        &mut self,
        group: MonGroupId,
        add: &[TaskId],
        remove: &[TaskId],
    ) -> Result<(), E>
    where
        E: From<rdt_core::RequestError>,
    {
        Ok(self.retask_group(group, add, remove)?)
    }

    /// Every control and monitor group, root excluded: `COS<n>` and `pqos-<pid>-<n>` are
    /// [`GroupOwner::Pqos`](rdt_core::GroupOwner::Pqos), the rest
    /// [`GroupOwner::Foreign`](rdt_core::GroupOwner::Foreign).
    ///
    /// # Errors
    /// Listing errors.
    fn groups(&mut self) -> Result<Vec<GroupInfo>, E> {
        Ok(self.list_groups()?)
    }

    fn mba_ctrl(&self) -> Option<MbaCtrl> {
        Some(self.mba_ctrl_state())
    }

    /// Reads `info/L3_MON`'s ABMC files (`mbm_assign_mode`, `num_mbm_cntrs`, and in
    /// `mbm_event` mode `available_mbm_cntrs`, `mbm_assign_on_mkdir`), each MBM event's
    /// `event_filter` (in `mbm_event` mode) or BMEC `mbm_*_bytes_config`, and counts the
    /// `mon_sub_L3_YY` directories of the first L3 domain (SNC).
    ///
    /// # Errors
    /// [`ResctrlError::Locked`]; read or parse errors naming the file.
    fn mbm_details(&mut self) -> Result<Option<rdt_core::MbmDetails>, E> {
        Ok(Some(self.read_mbm_details()?))
    }

    /// Writes `info/L3_MON/mbm_assign_mode` when it offers `mode` (and it is not current).
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) without the file
    /// or the mode; [`ResctrlError::Rejected`] with the kernel's message.
    fn set_mbm_assign_mode(&mut self, mode: rdt_core::AssignMode) -> Result<(), E> {
        Ok(self.write_assign_mode(mode)?)
    }

    /// `info/L3/io_alloc` and `io_alloc_cbm` (Linux 6.19+).
    ///
    /// # Errors
    /// The lock, a read, or a file that does not parse.
    fn io_alloc(&mut self) -> Result<Option<rdt_core::IoAlloc>, E> {
        Ok(self.read_io_alloc()?)
    }

    /// Writes `1` or `0` to `info/L3/io_alloc` (when it is not so already).
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) without the file;
    /// [`ResctrlError::Rejected`] with the kernel's message (the CLOSID is a group's).
    fn set_io_alloc(&mut self, enabled: bool) -> Result<(), E> {
        Ok(self.write_io_alloc(enabled)?)
    }

    /// Writes `info/L3_MON/event_configs/<event>/event_filter` in ABMC's `mbm_event`
    /// mode, else `info/L3_MON/<event>_config` with the value for every L3 domain in one
    /// write (`mon_config_write`). Restored to the defaults (total 0x7f, local 0x15) by a
    /// reset of allocation.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for LLC
    /// occupancy, bits above 6, or without either file; [`ResctrlError::Rejected`] with
    /// the kernel's message (a bit the hardware does not support).
    fn set_mbm_event_config(&mut self, event: rdt_core::RmidEvent, bits: u32) -> Result<(), E> {
        Ok(self.write_mbm_event_config(event, bits)?)
    }

    /// Reads `mode` of every control group, and the masks the `exclusive` ones hold in
    /// `domain` (data and code masks together with CDP on); empty without that CAT.
    ///
    /// # Errors
    /// The lock, a read, or a `schemata` that does not parse.
    fn exclusive_ways(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<ExclusiveWays>, E> {
        Ok(self.read_exclusive_ways(resource, domain)?)
    }

    /// Adds the classes' groups (`COS<n>` or named) to the groups this backend made.
    fn own_classes(&mut self, classes: &[ClassId]) {
        self.own_groups_of(classes);
    }
}

impl<P: PmuSource, E: From<ResctrlError>> NamedClasses<E> for ResctrlBackend<P> {
    /// The control group `name` as a class: its handle is the lowest class number that
    /// neither has a `COS<n>` group nor names another group, below the CLOSID limit. The
    /// group is made on the first write, like `COS<n>` (the kernel gives it its CLOSID).
    /// A group of that name made by another tool becomes this class: naming it claims it.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for a name that
    /// cannot be a group (empty, `/`, `.`, `..`, `info`, `mon_groups`, `mon_data`, a
    /// `COS<n>` name); [`RequestError::Limit`](rdt_core::RequestError::Limit) when every
    /// class number is taken; listing errors.
    fn class_named(&mut self, name: &str) -> Result<ClassId, E> {
        Ok(self.name_class(name)?)
    }

    /// Makes `class` stand for the control group `name` (a journal's record of a named
    /// class, replayed by `rdt_host::transaction::recover`).
    ///
    /// # Errors
    /// As [`NamedClasses::class_named`] for the name.
    fn bind_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        Ok(self.bind_name(class, name)?)
    }

    fn class_names(&self) -> Vec<(ClassId, String)> {
        self.names.iter().map(|(c, n)| (*c, n.clone())).collect()
    }

    /// The named classes' control groups this library made (recorded in
    /// `<run dir>/os-classes`; without a run directory, made by this process) that exist.
    fn own_class_names(&self) -> Vec<(ClassId, String)> {
        self.own_names()
    }

    /// Binds `name` to `class`; with `make_group`, makes its control group (and records
    /// it) when it does not exist. The group of a name bound without it is made and
    /// recorded by the first write to the class.
    ///
    /// # Errors
    /// As [`NamedClasses::bind_class`]; [`ResctrlError::OutOfClosids`]; the record cannot
    /// be written; the root lock.
    fn claim_class(&mut self, class: ClassId, name: &str, make_group: bool) -> Result<(), E> {
        Ok(self.claim(class, name, make_group)?)
    }

    /// Removes the control group `name` when this library made it (it is recorded) and it
    /// holds no CPU, task or monitor group, and drops it from the record; another tool's
    /// group of that name is left as it is. The name is unbound either way.
    ///
    /// # Errors
    /// [`RequestError::ClassInUse`](rdt_core::RequestError::ClassInUse) (monitor groups),
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) (CPUs or tasks
    /// left); the root lock; a read or the `rmdir` fails.
    fn release_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        Ok(self.release(class, name)?)
    }

    /// Binds `name` to `class` and records the existing control group `name` (another
    /// tool's) as this library's: a migration's adoption. Nothing is written to the group.
    ///
    /// # Errors
    /// As [`NamedClasses::bind_class`]; no such group; the record cannot be written; the
    /// root lock.
    fn adopt_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        Ok(self.adopt(class, name)?)
    }

    /// Drops `name` from the record and unbinds it; the group stays as it is.
    ///
    /// # Errors
    /// The record cannot be written; the root lock.
    fn disown_class(&mut self, class: ClassId, name: &str) -> Result<(), E> {
        Ok(self.disown(class, name)?)
    }
}

impl<P: PmuSource, E: From<ResctrlError>> Writers<E> for ResctrlBackend<P> {
    fn run_dir(&self) -> Option<&Path> {
        self.run_dir.as_ref().map(RunDirPath::path)
    }

    /// Takes `LOCK_EX` on the resctrl root and keeps it (across a remount too) until the
    /// last [`Writers::release_writers`]; the calls in between take no lock of their own.
    ///
    /// # Errors
    /// [`ResctrlError::Locked`] after the lock timeout; [`ResctrlError::NotMounted`].
    fn hold_writers(&mut self) -> Result<(), E> {
        Ok(self.lock.hold()?)
    }

    fn release_writers(&mut self) {
        self.lock.release();
    }
}

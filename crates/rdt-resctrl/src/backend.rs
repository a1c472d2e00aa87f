//! [`ResctrlBackend`]: the [`Backend`] trait over the resctrl filesystem.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdt_core::{
    AllocReset, Backend, CacheBitmask, CacheDomain, Capabilities, CatClass, CatMask, CatResource,
    ClassId, CpuSet, FeatureSetting, GroupInfo, GroupKind, GroupOwner, Interface, LimitError,
    LogicalCpu, MbaClass, MbaCtrl, MbaKind, MbaLimit, MonEvents, MonGroupId, MonValues, NoPmu,
    PmuSource, Rmid, TaskId, Topology, Vendor,
};

use crate::ResctrlError;
use crate::fs::{EBUSY, ENOSPC, ESRCH, Fs, Proc, cos_of_name, is_pqos_mon_name, join};
use crate::info::{BW_FILES, CACHE_FILES, CACHE_SCHEMAS, InfoFiles, MON_FILES, ResctrlInfo};
use crate::lock::{DEFAULT_LOCK_TIMEOUT, RootLock};
use crate::monitor::{Counter, Event, Members, MonGroup};
use crate::mount::{KernelMount, MountControl, MountOptions};
use crate::schemata::Schemata;

/// The default resctrl root.
pub const DEFAULT_ROOT: &str = "/sys/fs/resctrl";
/// The default `/proc`.
pub const DEFAULT_PROC: &str = "/proc";
/// The most a single `write(2)` to a resctrl file may carry (`PAGE_SIZE`, kernfs
/// `atomic_write_len`); a longer `schemata` is written one line per write.
const MAX_WRITE: usize = 4096;

/// Where and how to open resctrl: the paths, the mount seam, the lock wait.
#[derive(Debug)]
pub struct ResctrlOptions {
    root: PathBuf,
    proc_root: PathBuf,
    mount: Option<Box<dyn MountControl>>,
    lock_timeout: Duration,
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
            proc_root: PathBuf::from(DEFAULT_PROC),
            mount: None,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
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

/// Which schemas hold a CAT resource's masks.
#[derive(Clone, Copy, Debug)]
enum CatSchemas {
    Unified(&'static str),
    Cdp {
        data: &'static str,
        code: &'static str,
    },
}

/// Control groups and monitor groups with a member set each, by path.
type Homes<T> = (Vec<(String, T)>, Vec<(String, T)>);

/// What a multi-group change did, to put back if a later step fails.
#[derive(Debug, Default)]
struct Undo {
    /// Groups whose `schemata` was written, with the text before.
    written: Vec<(String, Schemata)>,
    /// Groups created by this change.
    created: Vec<String>,
    /// Groups this backend made earlier that the change removed, with their `schemata`.
    removed: Vec<(String, Schemata)>,
}

/// Intel RDT / AMD PQoS through the Linux resctrl filesystem: pqos's "OS interface".
///
/// # Groups
/// Class of service *n* is the control group `COS<n>` (COS 0 is the root group), the name
/// Intel's pqos uses, so both tools see one configuration; it is created the first time it
/// is needed. Monitor groups are `pqos-<pid>-<n>` under the control group of the CPUs or
/// tasks they watch. Both kinds of names are "ours" ([`GroupOwner::Pqos`]); any other group
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
/// use rdt_core::{Backend, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource, ClassId};
/// use rdt_core::{LogicalCpu, NoPmu, Topology};
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

fn list(v: &[u32]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn group_of(class: ClassId) -> String {
    if class.get() == 0 {
        String::new()
    } else {
        format!("COS{class}")
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
            proc_root,
            mount,
            lock_timeout,
        } = opts;
        if !root.join("info").is_dir() {
            return Err(ResctrlError::NotMounted { root });
        }
        let lock = RootLock::open(&root, lock_timeout)?;
        let mut this = Self {
            fs: Fs::new(root),
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
        };
        let guard = this.lock.shared()?;
        this.load()?;
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
            None => {
                self.fs.exists("mba_MBps_event")
                    || info.mb.as_ref().is_some_and(|mb| {
                        mb.delay_linear
                            && root_schemata.line("MB").is_some_and(|l| {
                                l.values
                                    .iter()
                                    .any(|(_, v)| v.parse::<u64>().is_ok_and(|n| n > 100))
                            })
                    })
            }
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

    fn cat_schemas(&self, resource: CatResource) -> Result<CatSchemas, ResctrlError> {
        let (uni, data, code, name) = match resource {
            CatResource::L3 => ("L3", "L3DATA", "L3CODE", "L3 CAT"),
            CatResource::L2 => ("L2", "L2DATA", "L2CODE", "L2 CAT"),
        };
        if self.info.caches.contains_key(code) {
            Ok(CatSchemas::Cdp { data, code })
        } else if self.info.caches.contains_key(uni) {
            Ok(CatSchemas::Unified(uni))
        } else {
            Err(LimitError::Unsupported(name).into())
        }
    }

    fn check_domain(
        &self,
        schema: &str,
        resource: &'static str,
        domain: CacheDomain,
    ) -> Result<(), ResctrlError> {
        let known = self.domains.get(schema).map_or(&[][..], Vec::as_slice);
        if known.contains(&domain.get()) {
            Ok(())
        } else {
            Err(ResctrlError::NoSuchDomain {
                resource,
                domain,
                known: list(known),
            })
        }
    }

    /// The class must have a CLOSID: below the smallest `num_closids`.
    fn check_closid(&self, class: ClassId) -> Result<(), ResctrlError> {
        let n = self.info.closids_supported();
        if n == 0 {
            return Err(LimitError::Unsupported("allocation (CAT/MBA)").into());
        }
        if class.get() >= n {
            return Err(LimitError::ClassOutOfRange {
                resource: "resctrl (CLOSIDs: the smallest num_closids of all resources)",
                class,
                num_classes: n,
            }
            .into());
        }
        Ok(())
    }

    /// The value a freshly reset group has in `schema`, as text.
    fn default_value(&self, schema: &str) -> Option<String> {
        if let Some(c) = self.info.caches.get(schema) {
            return Some(format!("{:x}", c.cbm_mask));
        }
        match schema {
            "MB" => Some(self.default_bw(self.caps.mba.get()).to_string()),
            "SMBA" => Some(self.default_bw(self.caps.smba.get()).to_string()),
            _ => None,
        }
    }

    fn default_bw(&self, caps: Option<&rdt_core::MbaCaps>) -> u64 {
        if self.mba_mbps {
            return u64::from(u32::MAX); // MBA_MAX_MBPS
        }
        match caps.map(|m| m.kind) {
            Some(MbaKind::AmdBandwidth { width }) => 1u64 << width.min(32),
            _ => 100,
        }
    }

    fn mba_limit(&self, v: u32) -> MbaLimit {
        if self.mba_mbps {
            MbaLimit::MibPerSec(v)
        } else if matches!(
            self.caps.mba.get().map(|m| m.kind),
            Some(MbaKind::AmdBandwidth { .. })
        ) {
            MbaLimit::AmdUnits(v)
        } else {
            MbaLimit::Percent(u8::try_from(v).unwrap_or(u8::MAX))
        }
    }

    /// The control group of `class`, created when missing; `undo` records a creation.
    fn ensure_group(&self, class: ClassId, undo: &mut Undo) -> Result<String, ResctrlError> {
        let g = group_of(class);
        if g.is_empty() || self.fs.exists(&g) {
            return Ok(g);
        }
        match self.fs.mkdir(&g) {
            Ok(()) => {
                undo.created.push(g.clone());
                Ok(g)
            }
            Err(e) if e.raw_os_error() == Some(ENOSPC) => Err(ResctrlError::OutOfClosids {
                group: self.fs.path(&g),
                in_use: self.closid_holders(),
                status: self.fs.last_cmd_status(),
            }),
            Err(e) => Err(ResctrlError::io("create", self.fs.path(&g), e)),
        }
    }

    fn closid_holders(&self) -> Vec<String> {
        let mut v = vec!["(root)".to_owned()];
        for g in self.fs.ctrl_groups().unwrap_or_default() {
            let foreign = cos_of_name(&g).is_none();
            v.push(if foreign { format!("{g} (foreign)") } else { g });
        }
        v
    }

    fn rmid_holders(&self) -> Vec<String> {
        let mut v = self.closid_holders();
        for (_, path) in self.fs.mon_groups().unwrap_or_default() {
            let name = path.rsplit('/').next().unwrap_or_default();
            v.push(if is_pqos_mon_name(name) {
                path
            } else {
                format!("{path} (foreign)")
            });
        }
        v
    }

    /// Puts back what `undo` recorded, newest first; best effort (the original error is
    /// what the caller reports).
    fn rollback(&self, undo: Undo) {
        for (group, old) in undo.written.into_iter().rev() {
            let _ = self.write_schemata(&group, &old);
        }
        for g in undo.created.into_iter().rev() {
            let _ = self.fs.rmdir(&g);
        }
        for (group, old) in undo.removed.into_iter().rev() {
            if self.fs.mkdir(&group).is_ok() {
                let _ = self.write_schemata(&group, &old);
            }
        }
    }

    /// Writes per class the `(schema, domain, value)` triples, one `schemata` write per
    /// group, undoing everything on the first failure. Holds: the exclusive lock.
    ///
    /// A class whose group does not exist and whose values are all the reset defaults needs
    /// no group (an absent group reads as the defaults), so none is made; a group this
    /// backend made that such a write brings back to the defaults, with no CPU, task or
    /// monitor group in it, is removed instead of written, giving its CLOSID back (an undone
    /// `pqos -e` leaves no group behind).
    fn apply(
        &mut self,
        plan: &BTreeMap<ClassId, Vec<(&'static str, u32, String)>>,
    ) -> Result<(), ResctrlError> {
        let mut undo = Undo::default();
        for (&class, sets) in plan {
            if let Err(e) = self.apply_class(class, sets, &mut undo) {
                self.rollback(undo);
                return Err(e);
            }
        }
        for g in &undo.removed {
            self.created.remove(&g.0);
        }
        self.created.extend(undo.created);
        Ok(())
    }

    /// One class of [`ResctrlBackend::apply`].
    fn apply_class(
        &self,
        class: ClassId,
        sets: &[(&'static str, u32, String)],
        undo: &mut Undo,
    ) -> Result<(), ResctrlError> {
        let g = group_of(class);
        if !g.is_empty()
            && !self.fs.exists(&g)
            && sets.iter().all(|(schema, _, v)| self.is_default(schema, v))
        {
            return Ok(());
        }
        let g = self.ensure_group(class, undo)?;
        let old = self.read_schemata(&g)?;
        let mut new = old.clone();
        for (schema, domain, value) in sets {
            new.set(schema, *domain, value.clone());
        }
        let made_here = undo.created.contains(&g);
        if (made_here || self.created.contains(&g)) && self.is_unused(&g, &new)? {
            self.fs.rmdir(&g)?;
            if made_here {
                undo.created.retain(|c| *c != g);
            } else {
                undo.removed.push((g, old));
            }
            return Ok(());
        }
        self.write_schemata(&g, &new)?;
        undo.written.push((g, old));
        Ok(())
    }

    /// Whether `value` of `schema` is what a reset group holds.
    fn is_default(&self, schema: &str, value: &str) -> bool {
        let Some(default) = self.default_value(schema) else {
            return false;
        };
        let radix = if self.info.caches.contains_key(schema) {
            16
        } else {
            10
        };
        match (
            u64::from_str_radix(value.trim(), radix),
            u64::from_str_radix(&default, radix),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Whether control group `group` with `schemata` holds nothing: every value the
    /// default, no CPU, no task, no monitor group. Holds: a lock.
    fn is_unused(&self, group: &str, schemata: &Schemata) -> Result<bool, ResctrlError> {
        let defaults = schemata
            .lines()
            .iter()
            .all(|l| l.values.iter().all(|(_, v)| self.is_default(&l.name, v)));
        Ok(defaults
            && self.fs.cpus(group)?.is_empty()
            && self.fs.tasks(group)?.is_empty()
            && self.fs.subdirs(&join(group, "mon_groups"))?.is_empty())
    }

    /// Removes `group` when this backend made it and it now holds nothing (its last CPU or
    /// task moved out, its values the defaults), giving its CLOSID back; best effort.
    /// Holds: the exclusive lock.
    fn release_if_unused(&mut self, group: &str) {
        if group.is_empty() || !self.created.contains(group) {
            return;
        }
        let unused = self
            .read_schemata(group)
            .and_then(|s| self.is_unused(group, &s));
        if matches!(unused, Ok(true)) && self.fs.rmdir(group).is_ok() {
            self.created.remove(group);
        }
    }

    /// Which control group holds each CPU (absent: the root), and which monitor group.
    fn cpu_homes(&self) -> Result<Homes<CpuSet>, ResctrlError> {
        let mut ctrl = Vec::new();
        for g in self.fs.ctrl_groups()? {
            let cpus = self.fs.cpus(&g)?;
            ctrl.push((g, cpus));
        }
        let mut mon = Vec::new();
        for (_, path) in self.fs.mon_groups()? {
            let cpus = self.fs.cpus(&path)?;
            mon.push((path, cpus));
        }
        Ok((ctrl, mon))
    }

    /// Which control and monitor groups list each task (the root lists the rest).
    fn task_homes(&self) -> Result<Homes<BTreeSet<TaskId>>, ResctrlError> {
        let mut ctrl = Vec::new();
        for g in self.fs.ctrl_groups()? {
            let t = self.fs.tasks(&g)?.into_iter().collect();
            ctrl.push((g, t));
        }
        let mut mon = Vec::new();
        for (_, path) in self.fs.mon_groups()? {
            let t = self.fs.tasks(&path)?.into_iter().collect();
            mon.push((path, t));
        }
        Ok((ctrl, mon))
    }

    /// Writes `cpus` to control group `group`'s `cpus_list`, and gives its monitor groups
    /// back the CPUs the kernel took from them (any write to a control group's CPUs empties
    /// its monitor groups, spec §6.2).
    fn write_ctrl_cpus(&self, group: &str, cpus: &CpuSet) -> Result<(), ResctrlError> {
        let mut children = Vec::new();
        for name in self.fs.subdirs(&join(group, "mon_groups"))? {
            let path = join(group, &format!("mon_groups/{name}"));
            let had = self.fs.cpus(&path)?;
            if !had.is_empty() {
                children.push((path, had));
            }
        }
        self.fs
            .write(&join(group, "cpus_list"), &format!("{cpus}\n"))?;
        for (path, had) in children {
            let keep: CpuSet = had.iter().filter(|c| cpus.contains(*c)).collect();
            if !keep.is_empty() {
                self.fs
                    .write(&join(&path, "cpus_list"), &format!("{keep}\n"))?;
            }
        }
        Ok(())
    }

    /// The L3 events `events` needs, checked against `mon_features`.
    fn hw_events(&self, events: MonEvents) -> Result<Vec<Event>, ResctrlError> {
        let rmid = events.rmid_events();
        let mut out = Vec::new();
        if rmid.is_empty() {
            return Ok(out);
        }
        let Some(mon) = &self.info.l3_mon else {
            return Err(ResctrlError::Unsupported(
                "resctrl has no L3 monitoring (no info/L3_MON): LLC occupancy and memory \
                 bandwidth cannot be monitored"
                    .into(),
            ));
        };
        for (flag, ev) in [
            (MonEvents::LLC_OCCUPANCY, Event::Occupancy),
            (MonEvents::MBM_LOCAL, Event::Local),
            (MonEvents::MBM_TOTAL, Event::Total),
        ] {
            if !rmid.contains(flag) {
                continue;
            }
            if !mon.has(ev.file()) {
                return Err(ResctrlError::Unsupported(format!(
                    "resctrl does not offer {} (info/L3_MON/mon_features)",
                    ev.file()
                )));
            }
            out.push(ev);
        }
        Ok(out)
    }

    fn new_group(&mut self, events: MonEvents, evs: &[Event], members: Members) -> MonGroup {
        let id = MonGroupId(self.next_id);
        self.next_id += 1;
        let n = match &members {
            Members::Cpus(c) => c.len(),
            Members::Tasks(t) => t.len(),
            Members::None => 0,
        };
        MonGroup {
            id,
            dirs: Vec::new(),
            events,
            counters: Vec::new(),
            members,
            pmu_prev: vec![None; n],
            has: [
                evs.contains(&Event::Occupancy),
                evs.contains(&Event::Local),
                evs.contains(&Event::Total),
            ],
            polled: false,
            values: MonValues::default(),
        }
    }

    /// Opens `dir`'s counter files for `domains` and `evs`.
    fn open_counters(
        &self,
        dir: &str,
        domains: &[u32],
        evs: &[Event],
        out: &mut Vec<Counter>,
    ) -> Result<(), ResctrlError> {
        for &d in domains {
            for &event in evs {
                let path = self.fs.path(&join(
                    dir,
                    &format!("mon_data/mon_L3_{d:02}/{}", event.file()),
                ));
                let file = File::open(&path).map_err(|e| ResctrlError::io("open", &path, e))?;
                out.push(Counter {
                    path,
                    file,
                    event,
                    prev: None,
                });
            }
        }
        Ok(())
    }

    /// A monitor group name no parent has yet: `pqos-<pid>-<n>`.
    fn fresh_name(&mut self) -> Result<String, ResctrlError> {
        let taken: BTreeSet<String> = self
            .fs
            .mon_groups()?
            .into_iter()
            .filter_map(|(_, p)| p.rsplit('/').next().map(str::to_owned))
            .collect();
        loop {
            let name = format!("pqos-{}-{}", std::process::id(), self.next_name);
            self.next_name += 1;
            if !taken.contains(&name) {
                return Ok(name);
            }
        }
    }

    /// Creates `name` under each parent and fills it with `fill`; removes everything it
    /// created on failure.
    fn create_mon_dirs(
        &self,
        name: &str,
        parents: &[&str],
        mut fill: impl FnMut(&str, &str) -> Result<(), ResctrlError>,
    ) -> Result<Vec<String>, ResctrlError> {
        let mut made: Vec<String> = Vec::new();
        let undo = |made: &[String]| {
            for d in made.iter().rev() {
                let _ = self.fs.rmdir(d);
            }
        };
        for parent in parents {
            let dir = join(parent, &format!("mon_groups/{name}"));
            if let Err(e) = self.fs.mkdir(&dir) {
                undo(&made);
                let errno = e.raw_os_error();
                return Err(if errno == Some(ENOSPC) || errno == Some(EBUSY) {
                    ResctrlError::OutOfRmids {
                        group: self.fs.path(&dir),
                        limbo: errno == Some(EBUSY),
                        in_use: self.rmid_holders(),
                    }
                } else {
                    ResctrlError::io("create", self.fs.path(&dir), e)
                });
            }
            made.push(dir.clone());
            if let Err(e) = fill(parent, &dir) {
                undo(&made);
                return Err(e);
            }
        }
        Ok(made)
    }

    /// Starts watching an existing group (another tool's, or any group) without changing
    /// it: its `mon_data` files of every L3 domain are opened and read by [`Backend::poll`].
    /// [`Backend::stop_monitoring`] forgets it and leaves the group in place. `group` is
    /// relative to the root (`""` for the root, `kubepods`, `COS1/mon_groups/x`).
    ///
    /// # Errors
    /// [`ResctrlError::EmptyGroup`] without an L3 event; [`ResctrlError::Unsupported`] for
    /// events resctrl does not offer; [`ResctrlError::Io`] when a file cannot be opened.
    pub fn watch_group(
        &mut self,
        group: &str,
        events: MonEvents,
    ) -> Result<MonGroupId, ResctrlError> {
        let evs = self.hw_events(events)?;
        if evs.is_empty() {
            return Err(ResctrlError::EmptyGroup);
        }
        let guard = self.lock.shared()?;
        let mut counters = Vec::new();
        self.open_counters(group, &self.mon_domains, &evs, &mut counters)?;
        drop(guard);
        let mut g = self.new_group(events, &evs, Members::None);
        g.counters = counters;
        let id = g.id;
        self.groups.push(g);
        Ok(id)
    }

    fn check_events(&self, events: MonEvents) -> Result<Vec<Event>, ResctrlError> {
        if events.is_empty() {
            return Err(ResctrlError::EmptyGroup);
        }
        self.hw_events(events)
    }

    /// Whether `cdp`/`mba_ctrl` of a reset need a different mount, and the options then.
    fn wanted_options(&self, cfg: AllocReset) -> Result<MountOptions, ResctrlError> {
        let mut want = self.mount_options();
        for (setting, resource, on) in [
            (cfg.l3_cdp, CatResource::L3, &mut want.cdp),
            (cfg.l2_cdp, CatResource::L2, &mut want.cdpl2),
        ] {
            match setting {
                FeatureSetting::Any => {}
                FeatureSetting::Off => *on = false,
                FeatureSetting::On => {
                    if !self.caps.cat(resource).is_some_and(|c| c.cdp_supported) {
                        return Err(ResctrlError::Unsupported(format!(
                            "{resource} CDP requested but not supported by the platform"
                        )));
                    }
                    *on = true;
                }
            }
        }
        match cfg.mba_ctrl {
            FeatureSetting::Any => {}
            FeatureSetting::Off => want.mba_mbps = false,
            FeatureSetting::On => {
                if self.mba_ctrl() == Some(MbaCtrl::Unsupported) {
                    return Err(ResctrlError::Unsupported(
                        "MBA CTRL requested but not supported by the platform: the kernel's \
                         mba_MBps needs MBM, linear (Intel) MBA and no Sub-NUMA Clustering"
                            .into(),
                    ));
                }
                want.mba_mbps = true;
            }
        }
        Ok(want)
    }

    /// The full reset: remount with `want` when no other tool's group exists.
    fn remount(&mut self, want: MountOptions) -> Result<(), ResctrlError> {
        let Some(mount) = &self.mount else {
            return Err(ResctrlError::Unsupported(format!(
                "changing the resctrl mount options to `{want}` needs a remount, and this \
                 platform was opened without a way to remount resctrl"
            )));
        };
        {
            let _g = self.lock.exclusive()?;
            let foreign: Vec<String> = self
                .groups_unlocked()?
                .into_iter()
                .filter(|g| g.owner == GroupOwner::Foreign)
                .map(|g| g.path)
                .collect();
            if !foreign.is_empty() {
                return Err(ResctrlError::RemountBlocked {
                    wanted: want,
                    groups: foreign,
                });
            }
        }
        // Nothing may stay open under the mount, or umount2 fails with EBUSY: our counters
        // and the lock's directory handle go first (the lock is released for the remount).
        self.groups.clear();
        self.created.clear();
        self.lock.close();
        let result = mount
            .remount(&want)
            .map_err(|source| ResctrlError::Remount {
                root: self.fs.root().to_owned(),
                wanted: want,
                source,
            });
        self.lock.reopen(self.fs.root())?;
        result?;
        let _g = self.lock.shared()?;
        self.load()
    }

    fn groups_unlocked(&self) -> Result<Vec<GroupInfo>, ResctrlError> {
        let mut out = Vec::new();
        let mon = self.fs.mon_groups()?;
        let push_mon = |out: &mut Vec<GroupInfo>, parent: &str| {
            for (p, path) in mon.iter().filter(|(p, _)| p == parent) {
                let name = path.rsplit('/').next().unwrap_or_default();
                out.push(GroupInfo {
                    path: path.clone(),
                    kind: GroupKind::Monitor,
                    owner: if is_pqos_mon_name(name) {
                        GroupOwner::Pqos
                    } else {
                        GroupOwner::Foreign
                    },
                    class: if p.is_empty() {
                        Some(ClassId::new(0))
                    } else {
                        cos_of_name(p).map(ClassId::new)
                    },
                });
            }
        };
        push_mon(&mut out, "");
        for g in self.fs.ctrl_groups()? {
            let class = cos_of_name(&g).map(ClassId::new);
            out.push(GroupInfo {
                path: g.clone(),
                kind: GroupKind::Control,
                owner: if class.is_some() {
                    GroupOwner::Pqos
                } else {
                    GroupOwner::Foreign
                },
                class,
            });
            push_mon(&mut out, &g);
        }
        Ok(out)
    }

    /// The partial reset: our groups' schemata to defaults, their CPUs and tasks to the
    /// root. Holds: the exclusive lock.
    fn reset_groups(&self) -> Result<(), ResctrlError> {
        let ours: Vec<String> = self
            .fs
            .ctrl_groups()?
            .into_iter()
            .filter(|g| cos_of_name(g).is_some())
            .collect();
        for g in std::iter::once(String::new()).chain(ours.iter().cloned()) {
            let mut s = self.read_schemata(&g)?;
            let names: Vec<String> = s.lines().iter().map(|l| l.name.clone()).collect();
            for name in names {
                let Some(v) = self.default_value(&name) else {
                    continue;
                };
                for d in s.domains(&name) {
                    s.set(&name, d, v.clone());
                }
            }
            self.write_schemata(&g, &s)?;
        }
        for g in &ours {
            if !self.fs.cpus(g)?.is_empty() {
                self.fs.write(&join(g, "cpus_list"), "\n")?;
            }
            for t in self.fs.tasks(g)? {
                self.move_task("", t)?;
            }
        }
        Ok(())
    }

    /// Writes one thread id to `group`'s `tasks`; `Ok(false)` when it no longer exists.
    fn move_task(&self, group: &str, tid: TaskId) -> Result<bool, ResctrlError> {
        match self.fs.write(&join(group, "tasks"), &format!("{tid}\n")) {
            Ok(()) => Ok(true),
            Err(ResctrlError::Rejected { source, .. }) if source.raw_os_error() == Some(ESRCH) => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The threads the named tasks stand for, each once, ascending.
    fn expand(&self, tasks: &[TaskId]) -> Result<Vec<TaskId>, ResctrlError> {
        let mut all = BTreeSet::new();
        for &t in tasks {
            all.extend(self.proc.threads(t)?);
        }
        Ok(all.into_iter().collect())
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

    /// Reads `schemata` of the root (COS 0) and each `COS<n>`; a class whose group does not
    /// exist yet reports what a reset group holds (every way).
    ///
    /// # Errors
    /// [`ResctrlError::Limit`] without that CAT, [`ResctrlError::NoSuchDomain`], read or
    /// parse errors; [`ResctrlError::Parse`] for an empty mask (legal on AMD, not
    /// representable as a [`CacheBitmask`]).
    fn cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, ResctrlError> {
        let schemas = self.cat_schemas(resource)?;
        let first = match schemas {
            CatSchemas::Unified(s) | CatSchemas::Cdp { data: s, .. } => s,
        };
        let which = if resource == CatResource::L3 {
            "L3"
        } else {
            "L2"
        };
        self.check_domain(first, which, domain)?;
        let n = self
            .caps
            .cat(resource)
            .map_or(0, rdt_core::CatCaps::usable_classes);
        let _g = self.lock.shared()?;
        let mut out = Vec::with_capacity(n as usize);
        for class in (0..n).map(ClassId::new) {
            let g = group_of(class);
            let s = if g.is_empty() || self.fs.exists(&g) {
                Some(self.read_schemata(&g)?)
            } else {
                None
            };
            let mask = |name: &str| -> Result<CacheBitmask, ResctrlError> {
                let v = match &s {
                    Some(s) => s
                        .cache_mask(name, domain.get())
                        .map_err(|e| self.bad_value(&g, &e))?,
                    None => None,
                };
                let v = v.unwrap_or_else(|| self.info.caches.get(name).map_or(0, |c| c.cbm_mask));
                CacheBitmask::new(v).map_err(|_| ResctrlError::Parse {
                    path: self.fs.path(&join(&g, "schemata")),
                    text: format!("{name}:{domain}=0"),
                    expected: "a non-empty mask (an empty CBM, legal on AMD, has no \
                               CacheBitmask)"
                        .into(),
                })
            };
            let m = match schemas {
                CatSchemas::Unified(u) => CatMask::Unified(mask(u)?),
                CatSchemas::Cdp { data, code } => CatMask::Cdp {
                    data: mask(data)?,
                    code: mask(code)?,
                },
            };
            out.push(CatClass { class, mask: m });
        }
        Ok(out)
    }

    /// Checks every class and mask first; then per class: creates `COS<n>` if needed,
    /// reads its `schemata`, changes the domain's value(s) and writes it back in one write.
    /// A failure undoes the classes already written and removes groups it created.
    ///
    /// # Errors
    /// [`ResctrlError::Limit`] (class beyond the CLOSIDs, mask outside the platform's
    /// limits), [`ResctrlError::CdpMismatch`], [`ResctrlError::NoSuchDomain`]: nothing
    /// written; [`ResctrlError::OutOfClosids`]; [`ResctrlError::Rejected`].
    fn set_cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
        classes: &[CatClass],
    ) -> Result<(), ResctrlError> {
        let schemas = self.cat_schemas(resource)?;
        let which = if resource == CatResource::L3 {
            "L3"
        } else {
            "L2"
        };
        let first = match schemas {
            CatSchemas::Unified(s) | CatSchemas::Cdp { data: s, .. } => s,
        };
        self.check_domain(first, which, domain)?;
        let mut plan: BTreeMap<ClassId, Vec<(&'static str, u32, String)>> = BTreeMap::new();
        for c in classes {
            self.caps.check_cat_class(resource, c.class)?;
            self.check_closid(c.class)?;
            let sets = plan.entry(c.class).or_default();
            match (c.mask, schemas) {
                (CatMask::Unified(m), CatSchemas::Unified(s)) => {
                    self.caps.check_mask(resource, m)?;
                    sets.push((s, domain.get(), m.to_string()));
                }
                (CatMask::Cdp { data, code }, CatSchemas::Cdp { data: ds, code: cs }) => {
                    self.caps.check_mask(resource, data)?;
                    self.caps.check_mask(resource, code)?;
                    sets.push((ds, domain.get(), data.to_string()));
                    sets.push((cs, domain.get(), code.to_string()));
                }
                (CatMask::Unified(_), CatSchemas::Cdp { .. }) => {
                    return Err(ResctrlError::CdpMismatch {
                        resource,
                        class: c.class,
                        reason: "CDP is on, so the class needs a data and a code mask",
                    });
                }
                (CatMask::Cdp { .. }, CatSchemas::Unified(_)) => {
                    return Err(ResctrlError::CdpMismatch {
                        resource,
                        class: c.class,
                        reason: "CDP is off, so the class takes one mask, not a data/code pair",
                    });
                }
            }
        }
        let _g = self.lock.exclusive()?;
        self.apply(&plan)
    }

    /// Reads the `MB` line of the root and each `COS<n>`: percent, MiB/s on an `mba_MBps`
    /// mount, AMD units on AMD. A class without a group reports the default.
    ///
    /// # Errors
    /// [`ResctrlError::Limit`] without MBA, [`ResctrlError::NoSuchDomain`], read errors.
    fn mba_classes(&mut self, domain: CacheDomain) -> Result<Vec<MbaClass>, ResctrlError> {
        let mba = self.caps.mba.get().ok_or(LimitError::Unsupported("MBA"))?;
        let n = mba.num_classes;
        self.check_domain("MB", "MB", domain)?;
        let _g = self.lock.shared()?;
        let mut out = Vec::with_capacity(n as usize);
        for class in (0..n).map(ClassId::new) {
            let g = group_of(class);
            let v = if g.is_empty() || self.fs.exists(&g) {
                self.read_schemata(&g)?
                    .bandwidth("MB", domain.get())
                    .map_err(|e| self.bad_value(&g, &e))?
            } else {
                None
            };
            let v =
                v.unwrap_or_else(|| u32::try_from(self.default_bw(Some(mba))).unwrap_or(u32::MAX));
            out.push(MbaClass {
                class,
                limit: self.mba_limit(v),
            });
        }
        Ok(out)
    }

    /// Checks every limit (unit for this mount, range from `info/MB`), writes one `schemata`
    /// per class as [`Backend::set_cat_classes`] does, and reads back what the kernel
    /// applied (Intel rounds up to `bandwidth_gran`: 15 -> 20).
    ///
    /// # Errors
    /// [`ResctrlError::MbaUnit`], [`ResctrlError::Limit`], [`ResctrlError::NoSuchDomain`]:
    /// nothing written; [`ResctrlError::OutOfClosids`]; [`ResctrlError::Rejected`].
    fn set_mba_classes(
        &mut self,
        domain: CacheDomain,
        classes: &[MbaClass],
    ) -> Result<Vec<MbaClass>, ResctrlError> {
        let mba = self.caps.mba.get().ok_or(LimitError::Unsupported("MBA"))?;
        let amd = matches!(mba.kind, MbaKind::AmdBandwidth { .. });
        let max_amd = u32::try_from(self.default_bw(Some(mba))).unwrap_or(u32::MAX);
        let min = self.info.mb.as_ref().map_or(0, |m| m.min_bandwidth);
        self.check_domain("MB", "MB", domain)?;
        let mut plan: BTreeMap<ClassId, Vec<(&'static str, u32, String)>> = BTreeMap::new();
        for c in classes {
            self.caps.check_mba_class(c.class)?;
            self.check_closid(c.class)?;
            let unit = |reason| ResctrlError::MbaUnit {
                class: c.class,
                limit: c.limit,
                reason,
            };
            let v = match (c.limit, self.mba_mbps, amd) {
                (MbaLimit::MibPerSec(v), true, _) => v,
                (_, true, _) => {
                    return Err(unit(
                        "resctrl is mounted with mba_MBps, so limits are MBps (mba_max); \
                         reset with -R mbaCtrl-off for percentages",
                    ));
                }
                (MbaLimit::MibPerSec(_), false, _) => {
                    return Err(unit(
                        "MBps limits need the kernel's MBA controller: reset with -R mbaCtrl-on \
                         (remounts resctrl with mba_MBps)",
                    ));
                }
                (MbaLimit::AmdUnits(v), false, true) => {
                    if v > max_amd {
                        return Err(LimitError::MbaOutOfRange {
                            value: v,
                            min,
                            max: max_amd,
                        }
                        .into());
                    }
                    v
                }
                (MbaLimit::Percent(_), false, true) => {
                    return Err(unit(
                        "AMD MBA limits are bandwidth units of 1/8 GB/s, not percentages",
                    ));
                }
                (MbaLimit::Percent(p), false, false) => {
                    let p = u32::from(p);
                    if p < min.max(1) || p > 100 {
                        return Err(LimitError::MbaOutOfRange {
                            value: p,
                            min: min.max(1),
                            max: 100,
                        }
                        .into());
                    }
                    p
                }
                (MbaLimit::AmdUnits(_), false, false) => {
                    return Err(unit("Intel MBA limits are percentages, not AMD units"));
                }
            };
            plan.entry(c.class)
                .or_default()
                .push(("MB", domain.get(), v.to_string()));
        }
        let _g = self.lock.exclusive()?;
        self.apply(&plan)?;
        let mut applied = Vec::with_capacity(plan.len());
        for &class in plan.keys() {
            let g = group_of(class);
            let v = self
                .read_schemata(&g)?
                .bandwidth("MB", domain.get())
                .map_err(|e| self.bad_value(&g, &e))?
                .unwrap_or(0);
            applied.push(MbaClass {
                class,
                limit: self.mba_limit(v),
            });
        }
        Ok(applied)
    }

    /// Finds the control group whose `cpus_list` has the CPU: `COS<n>` gives n, none gives
    /// COS 0 (the root).
    ///
    /// # Errors
    /// [`ResctrlError::NoSuchCpu`]; [`ResctrlError::Foreign`] when the CPU is in another
    /// tool's group (it has no pqos class); read errors.
    fn class_of(&mut self, cpu: LogicalCpu) -> Result<ClassId, ResctrlError> {
        self.topology.get(cpu).ok_or(ResctrlError::NoSuchCpu(cpu))?;
        let _g = self.lock.shared()?;
        for g in self.fs.ctrl_groups()? {
            if self.fs.cpus(&g)?.contains(cpu) {
                return cos_of_name(&g)
                    .map(ClassId::new)
                    .ok_or_else(|| ResctrlError::foreign(format!("CPU {cpu}"), &g));
            }
        }
        Ok(ClassId::new(0))
    }

    /// Adds the CPU to `COS<n>`'s `cpus_list` (creating the group), or to the root's for
    /// COS 0; monitor groups of that control group keep their CPUs.
    ///
    /// # Errors
    /// [`ResctrlError::NoSuchCpu`], [`ResctrlError::Limit`] (no CLOSID for the class),
    /// [`ResctrlError::Foreign`] (the CPU is in another tool's group): nothing written;
    /// [`ResctrlError::OutOfClosids`], [`ResctrlError::Rejected`].
    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> Result<(), ResctrlError> {
        self.topology.get(cpu).ok_or(ResctrlError::NoSuchCpu(cpu))?;
        self.check_closid(class)?;
        let _g = self.lock.exclusive()?;
        let (ctrl, mon) = self.cpu_homes()?;
        let home = ctrl
            .iter()
            .find(|(_, s)| s.contains(cpu))
            .map_or("", |(g, _)| g.as_str());
        let foreign = |g: &str| ResctrlError::foreign(format!("CPU {cpu}"), g);
        if !home.is_empty() && cos_of_name(home).is_none() {
            return Err(foreign(home));
        }
        if let Some((g, _)) = mon.iter().find(|(g, s)| {
            s.contains(cpu) && !is_pqos_mon_name(g.rsplit('/').next().unwrap_or_default())
        }) {
            return Err(foreign(g));
        }
        let target = group_of(class);
        if home == target {
            return Ok(());
        }
        let mut undo = Undo::default();
        let target = self.ensure_group(class, &mut undo)?;
        let step = self.fs.cpus(&target).and_then(|mut cpus| {
            cpus.insert(cpu);
            self.write_ctrl_cpus(&target, &cpus)
        });
        if let Err(e) = step {
            self.rollback(undo);
            return Err(e);
        }
        self.created.extend(undo.created);
        let home = home.to_owned();
        self.release_if_unused(&home);
        Ok(())
    }

    /// Always `None`: resctrl does not expose RMIDs.
    fn rmid_of(&mut self, cpu: LogicalCpu) -> Result<Option<Rmid>, ResctrlError> {
        self.topology.get(cpu).ok_or(ResctrlError::NoSuchCpu(cpu))?;
        Ok(None)
    }

    /// pqos `-R`. When CDP or `mba_MBps` must change: remounts through the mount control
    /// (every group goes, every control value is reset), refused while another tool's
    /// group exists. Otherwise: the root's and every `COS<n>`'s `schemata` back to the
    /// defaults (every way; 100 %, the AMD maximum, or 4294967295 MBps), their CPUs and
    /// tasks back to the root. Other tools' groups are not touched.
    ///
    /// # Errors
    /// [`ResctrlError::Unsupported`] for CDP/MBA CTRL the platform lacks or without a mount
    /// control; [`ResctrlError::RemountBlocked`]; [`ResctrlError::Remount`];
    /// [`ResctrlError::Rejected`] (a foreign exclusive group can refuse the full mask).
    fn reset_allocation(&mut self, cfg: &AllocReset) -> Result<(), ResctrlError> {
        let want = self.wanted_options(*cfg)?;
        let have = self.mount_options();
        if (want.cdp, want.cdpl2, want.mba_mbps) != (have.cdp, have.cdpl2, have.mba_mbps) {
            return self.remount(want);
        }
        let _g = self.lock.exclusive()?;
        self.reset_groups()
    }

    /// Removes every `pqos-*` monitor group (any pid, under any control group) and forgets
    /// this backend's groups; other tools' monitor groups stay.
    ///
    /// # Errors
    /// The first failed removal (every group is still attempted).
    fn reset_monitoring(&mut self) -> Result<(), ResctrlError> {
        let _g = self.lock.exclusive()?;
        self.groups.clear();
        let mut first = None;
        for (_, path) in self.fs.mon_groups()? {
            if is_pqos_mon_name(path.rsplit('/').next().unwrap_or_default())
                && let Err(e) = self.fs.rmdir(&path)
            {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Creates `pqos-<pid>-<n>` under the control group of the CPUs (the same name under
    /// each when they span several), writes their `cpus_list`, and opens the `mon_data`
    /// files of their L3 domains.
    ///
    /// # Errors
    /// [`ResctrlError::EmptyGroup`], [`ResctrlError::NoSuchCpu`],
    /// [`ResctrlError::Unsupported`], [`ResctrlError::AlreadyMonitored`]: nothing written;
    /// [`ResctrlError::OutOfRmids`], [`ResctrlError::Rejected`] after removing what was made.
    fn start_monitoring(
        &mut self,
        cpus: &CpuSet,
        events: MonEvents,
    ) -> Result<MonGroupId, ResctrlError> {
        if cpus.is_empty() {
            return Err(ResctrlError::EmptyGroup);
        }
        let evs = self.check_events(events)?;
        let mut domain_of = BTreeMap::new();
        for cpu in cpus.iter() {
            let p = self.topology.get(cpu).ok_or(ResctrlError::NoSuchCpu(cpu))?;
            if !evs.is_empty() {
                let l3 = p.l3.ok_or_else(|| {
                    ResctrlError::Unsupported(format!(
                        "CPU {cpu} has no L3 cache, so its LLC occupancy and memory bandwidth \
                         cannot be monitored"
                    ))
                })?;
                domain_of.insert(cpu, l3.get());
            }
        }
        for g in &self.groups {
            if let Members::Cpus(c) = &g.members
                && let Some(cpu) = cpus.iter().find(|x| c.contains(x))
            {
                return Err(ResctrlError::AlreadyMonitored {
                    what: format!("CPU {cpu}"),
                    group: g
                        .dirs
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "(this process)".into()),
                });
            }
        }
        let members: Vec<LogicalCpu> = cpus.iter().collect();
        let mut group = self.new_group(events, &evs, Members::Cpus(members));
        if !evs.is_empty() {
            let guard = self.lock.exclusive()?;
            let (ctrl, mon) = self.cpu_homes()?;
            for (path, set) in &mon {
                if let Some(cpu) = cpus.iter().find(|c| set.contains(*c)) {
                    return Err(ResctrlError::AlreadyMonitored {
                        what: format!("CPU {cpu}"),
                        group: path.clone(),
                    });
                }
            }
            let mut by_parent: BTreeMap<&str, CpuSet> = BTreeMap::new();
            for cpu in cpus.iter() {
                let parent = ctrl
                    .iter()
                    .find(|(_, s)| s.contains(cpu))
                    .map_or("", |(g, _)| g.as_str());
                by_parent.entry(parent).or_default().insert(cpu);
            }
            let name = self.fresh_name()?;
            let parents: Vec<&str> = by_parent.keys().copied().collect();
            let mut counters = Vec::new();
            let dirs = self.create_mon_dirs(&name, &parents, |parent, dir| {
                let set = &by_parent[parent];
                self.fs
                    .write(&join(dir, "cpus_list"), &format!("{set}\n"))?;
                let mut doms: Vec<u32> = set.iter().map(|c| domain_of[&c]).collect();
                doms.sort_unstable();
                doms.dedup();
                self.open_counters(dir, &doms, &evs, &mut counters)
            })?;
            drop(guard);
            group.dirs = dirs;
            group.counters = counters;
        }
        let id = group.id;
        self.groups.push(group);
        Ok(id)
    }

    /// Reads every counter file once (positioned read) under a shared lock, and the PMU.
    ///
    /// # Errors
    /// [`ResctrlError::Locked`]; a read that fails (the group was removed behind our back:
    /// `ENOENT`) or text that is not a count or a status word.
    fn poll(&mut self) -> Result<(), ResctrlError> {
        let _g = self.lock.shared()?;
        let Self { groups, pmu, .. } = self;
        for g in groups {
            g.poll(pmu)?;
        }
        Ok(())
    }

    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.groups
            .iter()
            .find(|g| g.id == group)
            .map(|g| &g.values)
    }

    /// Closes the group's files and removes the directories it created (its CPUs and tasks
    /// go back to their control group); a watched group is only forgotten.
    ///
    /// # Errors
    /// [`ResctrlError::NoSuchGroup`]; the first failed removal.
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), ResctrlError> {
        let i = self
            .groups
            .iter()
            .position(|g| g.id == group)
            .ok_or(ResctrlError::NoSuchGroup(group))?;
        let g = self.groups.remove(i);
        if let Members::Tasks(tasks) = &g.members {
            for &t in tasks {
                self.pmu.release_task(t);
            }
        }
        let dirs = g.dirs.clone();
        drop(g);
        if dirs.is_empty() {
            return Ok(());
        }
        let _l = self.lock.exclusive()?;
        let mut first = None;
        for d in dirs {
            if let Err(e) = self.fs.rmdir(&d) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Finds the task in the `tasks` of the control groups other than the root.
    ///
    /// # Errors
    /// [`ResctrlError::NoSuchTask`], [`ResctrlError::Foreign`], read errors.
    fn class_of_task(&mut self, task: TaskId) -> Result<ClassId, ResctrlError> {
        if !self.proc.exists(task) {
            return Err(ResctrlError::NoSuchTask(task));
        }
        let _g = self.lock.shared()?;
        for g in self.fs.ctrl_groups()? {
            if self.fs.tasks(&g)?.contains(&task) {
                return cos_of_name(&g)
                    .map(ClassId::new)
                    .ok_or_else(|| ResctrlError::foreign(format!("task {task}"), &g));
            }
        }
        Ok(ClassId::new(0))
    }

    /// Writes each thread of the task (every thread of a process) to `COS<n>/tasks` (the
    /// root's for COS 0), one id per write, creating the group; threads that exit meanwhile
    /// are skipped.
    ///
    /// # Errors
    /// [`ResctrlError::NoSuchTask`], [`ResctrlError::Limit`], [`ResctrlError::Foreign`]
    /// (a thread is in another tool's group): nothing written; [`ResctrlError::OutOfClosids`],
    /// [`ResctrlError::Rejected`].
    fn associate_task(&mut self, task: TaskId, class: ClassId) -> Result<(), ResctrlError> {
        self.check_closid(class)?;
        let tids = self.expand(&[task])?;
        let _g = self.lock.exclusive()?;
        let (ctrl, mon) = self.task_homes()?;
        for &t in &tids {
            let foreign = ctrl
                .iter()
                .find(|(g, s)| s.contains(&t) && cos_of_name(g).is_none())
                .or_else(|| {
                    mon.iter().find(|(g, s)| {
                        s.contains(&t)
                            && !is_pqos_mon_name(g.rsplit('/').next().unwrap_or_default())
                    })
                });
            if let Some((g, _)) = foreign {
                return Err(ResctrlError::foreign(format!("task {t}"), g));
            }
        }
        let home_of = |t: &TaskId| {
            ctrl.iter()
                .find(|(_, s)| s.contains(t))
                .map_or(String::new(), |(g, _)| g.clone())
        };
        let homes: Vec<String> = tids.iter().map(home_of).collect();
        let mut undo = Undo::default();
        let target = self.ensure_group(class, &mut undo)?;
        let mut moved = Vec::new();
        for (&t, home) in tids.iter().zip(&homes) {
            match self.move_task(&target, t) {
                Ok(true) => moved.push((t, home)),
                Ok(false) => {}
                Err(e) => {
                    // Put back the threads already moved, so that no process is left split.
                    for (t, home) in moved.into_iter().rev() {
                        let _ = self.move_task(home, t);
                    }
                    self.rollback(undo);
                    return Err(e);
                }
            }
        }
        if moved.is_empty() {
            self.rollback(undo);
            return Err(ResctrlError::NoSuchTask(task));
        }
        self.created.extend(undo.created);
        let homes: BTreeSet<String> = homes.into_iter().collect();
        for home in homes {
            self.release_if_unused(&home);
        }
        Ok(())
    }

    /// `COS<n>/tasks` (the root's for COS 0), ascending; empty when the group does not
    /// exist.
    ///
    /// # Errors
    /// Read errors.
    fn tasks_of_class(&mut self, class: ClassId) -> Result<Vec<TaskId>, ResctrlError> {
        let g = group_of(class);
        let _l = self.lock.shared()?;
        if !g.is_empty() && !self.fs.exists(&g) {
            return Ok(Vec::new());
        }
        let mut t = self.fs.tasks(&g)?;
        t.sort();
        t.dedup();
        Ok(t)
    }

    /// Creates `pqos-<pid>-<n>` under the control group of each thread (all threads of each
    /// named process), writes each thread id to it, and opens the `mon_data` files of every
    /// L3 domain (tasks run anywhere).
    ///
    /// # Errors
    /// [`ResctrlError::EmptyGroup`], [`ResctrlError::NoSuchTask`],
    /// [`ResctrlError::Unsupported`], [`ResctrlError::AlreadyMonitored`]: nothing written;
    /// [`ResctrlError::OutOfRmids`], [`ResctrlError::Rejected`] after removing what was made.
    fn start_monitoring_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, ResctrlError> {
        if tasks.is_empty() {
            return Err(ResctrlError::EmptyGroup);
        }
        let evs = self.check_events(events)?;
        let tids = self.expand(tasks)?;
        for g in &self.groups {
            if let Members::Tasks(t) = &g.members
                && let Some(x) = tids.iter().find(|x| t.contains(x))
            {
                return Err(ResctrlError::AlreadyMonitored {
                    what: format!("task {x}"),
                    group: g
                        .dirs
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "(this process)".into()),
                });
            }
        }
        let mut group = self.new_group(events, &evs, Members::Tasks(tids.clone()));
        if !evs.is_empty() {
            let guard = self.lock.exclusive()?;
            let (ctrl, mon) = self.task_homes()?;
            for (path, set) in &mon {
                if let Some(t) = tids.iter().find(|t| set.contains(t)) {
                    return Err(ResctrlError::AlreadyMonitored {
                        what: format!("task {t}"),
                        group: path.clone(),
                    });
                }
            }
            let mut by_parent: BTreeMap<&str, Vec<TaskId>> = BTreeMap::new();
            for &t in &tids {
                let parent = ctrl
                    .iter()
                    .find(|(_, s)| s.contains(&t))
                    .map_or("", |(g, _)| g.as_str());
                by_parent.entry(parent).or_default().push(t);
            }
            let name = self.fresh_name()?;
            let parents: Vec<&str> = by_parent.keys().copied().collect();
            let domains = self.mon_domains.clone();
            let mut counters = Vec::new();
            let mut moved = 0usize;
            let dirs = self.create_mon_dirs(&name, &parents, |parent, dir| {
                for &t in &by_parent[parent] {
                    if self.move_task(dir, t)? {
                        moved += 1;
                    }
                }
                self.open_counters(dir, &domains, &evs, &mut counters)
            })?;
            if moved == 0 {
                for d in &dirs {
                    let _ = self.fs.rmdir(d);
                }
                return Err(ResctrlError::NoSuchTask(tasks[0]));
            }
            drop(guard);
            group.dirs = dirs;
            group.counters = counters;
        }
        let id = group.id;
        self.groups.push(group);
        Ok(id)
    }

    /// Every control and monitor group, root excluded: `COS<n>` and `pqos-<pid>-<n>` are
    /// [`GroupOwner::Pqos`], the rest [`GroupOwner::Foreign`].
    ///
    /// # Errors
    /// Listing errors.
    fn groups(&mut self) -> Result<Vec<GroupInfo>, ResctrlError> {
        let _g = self.lock.shared()?;
        self.groups_unlocked()
    }

    fn mba_ctrl(&self) -> Option<MbaCtrl> {
        if self.mba_mbps {
            return Some(MbaCtrl::Enabled);
        }
        let mbm = self
            .caps
            .monitoring
            .get()
            .is_some_and(|m| m.events.mbm_local || m.events.mbm_total);
        let linear = matches!(
            self.caps.mba.get().map(|m| m.kind),
            Some(MbaKind::IntelDelay { linear: true, .. })
        ) && self.caps.vendor == Vendor::Intel;
        Some(if mbm && linear && !self.snc {
            MbaCtrl::Disabled
        } else {
            MbaCtrl::Unsupported
        })
    }
}

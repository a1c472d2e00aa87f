//! Read-only telemetry of every resctrl group, for exporters: [`ResctrlTelemetry`] finds
//! every control and monitor group under a resctrl root, this library's and other tools'
//! (kubelet, containerd, goresctrl, a user's `mkdir`), without creating or changing
//! anything, and reads per scrape each group's counters, allocation and membership.
//!
//! # Cost of a scrape
//! Files are opened when the group list is (re)scanned and kept open within the descriptor
//! budget (below): a scrape is one `pread(2)` per (group, L3 monitoring domain, event)
//! `mon_data` file, and one positioned read each (two for a text longer than the buffer) of
//! the group's `schemata` (control groups), `cpus_list` and `tasks`; a file past the budget
//! costs an `openat(2)` (relative to the group's directory, opened once per group and
//! scrape: one path lookup per file) and a `close(2)` around that same one read. Besides, a scrape does two
//! `stat(2)`s (the root and its `info/`, to notice a new mount) and no directory listing
//! unless the groups changed.
//!
//! # Descriptors
//! A group has `3 + domains × events` files (27 on an 8-domain part with three events): a
//! fleet node's thousands of groups would need tens of thousands of descriptors. At most
//! [`TelemetryOptions::max_open_files`] of them are kept open (by default half the soft
//! `RLIMIT_NOFILE` at [`ResctrlTelemetry::open`]); the others are opened for each read and
//! closed at once, so a scrape needs two descriptors more than the budget (the file and its
//! group's directory). A rescan closes
//! the old files before it opens the new ones: it never needs twice the budget. A file that
//! cannot be opened at a rescan (even `EMFILE`) is opened again at each scrape, never
//! dropped; a scrape that could not read every file of a group names the group in
//! [`ResctrlTelemetry::incomplete`].
//!
//! # A new mount
//! The identity of the mount (device and inode of the root and of its `info/` directory) is
//! taken at each scan and checked at each scrape: resctrl unmounted (no `info/`) fails the
//! scrape with [`ResctrlError::NotMounted`] and closes every file; resctrl mounted again
//! (another superblock, or the same directory with a new `info/`) is scanned again before
//! it is read, so the old mount's groups are never reported as the new one's.
//!
//! # When the group list is scanned again
//! - when resctrl changed: an inotify watch on the root and on every `mon_groups` directory
//!   reports a group made, removed or renamed (checked without blocking at each scrape;
//!   [`TelemetryOptions::watch`]);
//! - when a read fails with `ENOENT`, `ENODEV` or `ESTALE` (the group went: the kernel
//!   answers reads of a removed group's open files so): scanned and read again within the
//!   same scrape, once, so that a scrape never reports a group removed before it began;
//! - every [`TelemetryOptions::rescan_interval`] in any case (a change made through another
//!   mount namespace raises no inotify event here).
//!
//! # Counters
//! `llc_occupancy` is a reading now (bytes). `mbm_total_bytes` and `mbm_local_bytes` are
//! reported as [`MonotonicTotal`]s kept per (group path, domain, event) across rescans: a
//! group removed and made again under the same name (its files restart at 0) continues its
//! series instead of going back. A group whose directory was made again is detected by its
//! inode number changing; a counter that goes down is taken as a restart too. The totals of
//! a group that is gone are kept [`TelemetryOptions::forget_after`], then dropped, so memory
//! does not grow with group churn.
//!
//! # Locking
//! Scrapes take no `flock`: each file read is atomic in the kernel, a scrape writes nothing,
//! and an exporter must neither stall another tool's changes nor be stalled by them. A group
//! removed during a scrape is scanned away and the groups read again (above); one removed
//! during that second reading is missing from the scrape (or shows only what was read
//! before) and leaves at the next rescan.
//!
//! # References
//! Linux `Documentation/arch/x86/resctrl.rst` ("Resource groups", "Reading monitored data");
//! `shared/spec/resctrl.md` §3, §6, §8; inotify(7).

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use rdt_core::monitor::MonotonicTotal;
use rdt_core::{CpuSet, GroupKind, GroupOwner, MbaLimit, RmidEvent, TaskId};
use rdt_host::proc::{ContainerIds, ProcFs};

use crate::ResctrlError;
use crate::counter::parse_reading;
use crate::fs::{Fs, join};
use crate::info::{BW_FILES, InfoFiles, ResctrlInfo, mba_mbps_in_tree};
use crate::io::{DirReader, HostFs, PositionedRead};
use crate::owner::group_owner;
use crate::schemata::Schemata;

/// The default of [`TelemetryOptions::rescan_interval`].
pub const DEFAULT_RESCAN_INTERVAL: Duration = Duration::from_mins(1);
/// The default of [`TelemetryOptions::forget_after`].
pub const DEFAULT_FORGET_AFTER: Duration = Duration::from_mins(15);

/// The most of a `schemata` or `cpus_list` file read (a kernel's is under 4 KiB even on a
/// many-domain AMD part); a longer file has no value this scrape.
const MAX_SMALL_FILE: usize = 256 * 1024;
/// The most of a `tasks` file read: the root group lists every thread of the host, some
/// 7 bytes each; 16 MiB is two million threads.
const MAX_TASKS_FILE: usize = 16 * 1024 * 1024;
/// The tasks of a group whose cgroups are read to find its pod and container.
const CONTAINER_SAMPLE: usize = 8;

/// `ENOENT`, `ENODEV`, `ESTALE`: a read of a removed group's file.
const GONE: [i32; 3] = [2, 19, 116];

/// Where the telemetry reads and how often it looks for new groups.
#[derive(Clone, Debug)]
pub struct TelemetryOptions {
    root: PathBuf,
    proc_root: PathBuf,
    rescan_interval: Duration,
    forget_after: Duration,
    watch: bool,
    named_classes: Vec<String>,
    run_dir: Option<PathBuf>,
    max_open_files: Option<usize>,
    cancel: Option<Arc<AtomicBool>>,
}

impl TelemetryOptions {
    /// resctrl at `root` (`/sys/fs/resctrl` on a host), tasks' cgroups from `/proc`, a
    /// rescan every 60 s and on inotify events, totals of a removed group kept 15 minutes.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            proc_root: PathBuf::from(crate::DEFAULT_PROC),
            rescan_interval: DEFAULT_RESCAN_INTERVAL,
            forget_after: DEFAULT_FORGET_AFTER,
            watch: true,
            named_classes: Vec::new(),
            run_dir: None,
            max_open_files: None,
            cancel: None,
        }
    }

    /// A flag that, once set (by a signal handler: SIGTERM), ends a scan or a scrape in
    /// progress at the next group: [`ResctrlTelemetry::scrape`] and
    /// [`ResctrlTelemetry::rescan`] then return what they read so far (the groups not read
    /// are in [`ResctrlTelemetry::incomplete`]), and the next scrape scans again. So a
    /// daemon stops within one group's reads of a signal, not after the whole scan (a
    /// thousand groups on a FUSE-served tree take seconds).
    #[must_use]
    pub fn cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// The most group files (counters, `cpus_list`, `tasks`, `schemata`) kept open between
    /// scrapes, in descriptors; the others are opened for each read (module docs,
    /// "Descriptors"). Default: half the soft `RLIMIT_NOFILE` (getrlimit(2)) when the
    /// telemetry is opened. 0 keeps none open.
    #[must_use]
    pub const fn max_open_files(mut self, files: usize) -> Self {
        self.max_open_files = Some(files);
        self
    }

    /// Reads tasks' cgroups (`<proc_root>/<pid>/cgroup`) under `proc_root` instead of `/proc`.
    #[must_use]
    pub fn proc_root(mut self, proc_root: impl Into<PathBuf>) -> Self {
        self.proc_root = proc_root.into();
        self
    }

    /// Scans the group list again at least this often, even without an inotify event.
    #[must_use]
    pub const fn rescan_interval(mut self, interval: Duration) -> Self {
        self.rescan_interval = interval;
        self
    }

    /// How long the counter totals of a group that is gone are kept, so that a group made
    /// again under the same name within that time continues its series.
    #[must_use]
    pub const fn forget_after(mut self, after: Duration) -> Self {
        self.forget_after = after;
        self
    }

    /// Whether inotify watches tell when groups are made or removed (default: yes). Without
    /// them, only the rescan interval and failed reads do.
    #[must_use]
    pub const fn watch(mut self, on: bool) -> Self {
        self.watch = on;
        self
    }

    /// Control groups that are this library's named classes
    /// ([`rdt_core::BackendExt::class_names`] of a backend of this process): owned by us.
    #[must_use]
    pub fn named_classes(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.named_classes = names.into_iter().collect();
        self
    }

    /// The run directory of this library's OS interface (`/run/rdt` on a host,
    /// [`crate::ResctrlOptions::run_dir`]): the named classes' groups recorded there
    /// ([`crate::recorded_groups`], read again at every rescan) are ours, whichever process
    /// applied them.
    #[must_use]
    pub fn run_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.run_dir = Some(dir.into());
        self
    }
}

/// One cache schema's mask of a control group in one domain, from its `schemata`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheAllocation {
    /// The schema: `L3`, `L3CODE`, `L3DATA`, `L2`, `L2CODE`, `L2DATA`.
    pub schema: String,
    /// The cache id (`L3` domain id, or `L2` id).
    pub domain: u32,
    /// The capacity bitmask: bit *n* is way *n*.
    pub mask: u64,
}

impl CacheAllocation {
    /// The number of ways the mask holds (its set bits).
    #[must_use]
    pub const fn ways(&self) -> u32 {
        self.mask.count_ones()
    }
}

/// One bandwidth schema's limit of a control group in one domain, from its `schemata`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BandwidthAllocation {
    /// The schema: `MB` or `SMBA`.
    pub schema: String,
    /// The L3 domain id the limit applies to.
    pub domain: u32,
    /// The limit, in the unit of this mount and vendor: percent (Intel), MiB/s (Intel with
    /// `mba_MBps`), or units of 1/8 GB/s (AMD).
    pub limit: MbaLimit,
}

/// One counter of a group in one L3 monitoring domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CounterSample {
    /// The L3 monitoring domain (`mon_L3_XX`).
    pub domain: u32,
    /// Which counter.
    pub event: RmidEvent,
    /// In bytes: for [`RmidEvent::LlcOccupancy`] the occupancy now; for the MBM events the
    /// traffic counted in all ([`MonotonicTotal`]: never decreasing, across hardware
    /// wraps, which the kernel extends, and across re-creations of the group).
    pub bytes: u64,
}

/// What one scrape read of one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSample {
    /// Path relative to the resctrl root: `""` for the root group, `COS1`, `kubepods`,
    /// `COS1/mon_groups/pqos-42-0`, `mon_groups/m1`.
    pub path: String,
    /// Control (CTRL_MON) or monitor (MON) group.
    pub kind: GroupKind,
    /// Ours (pqos's names, this library's named classes; the root group, pqos's COS 0) or
    /// another tool's.
    pub owner: GroupOwner,
    /// CPUs in the group's `cpus_list`; `None` when unreadable this scrape.
    pub cpus: Option<usize>,
    /// Threads in the group's `tasks` (a control group's include those of its monitor
    /// groups; the root's, every thread in no other control group); `None` when unreadable.
    pub tasks: Option<usize>,
    /// The Kubernetes pod and container the group's tasks belong to, when a sample of its
    /// tasks agrees on them (from `/proc/<pid>/cgroup`).
    pub container: ContainerIds,
    /// The cache masks (control groups; empty for monitor groups, which use their parent's).
    pub cache: Vec<CacheAllocation>,
    /// The bandwidth limits (control groups; empty for monitor groups).
    pub bandwidth: Vec<BandwidthAllocation>,
    /// The counters read, by domain then event; one that read `Unavailable`, `Error` or
    /// `Unassigned`, or failed, is absent.
    pub counters: Vec<CounterSample>,
}

/// Counts since the telemetry was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TelemetryStats {
    /// Scrapes done.
    pub scrapes: u64,
    /// Group list scans done, the first included.
    pub scans: u64,
    /// Reads that failed or did not parse (each is one missing value in a scrape).
    pub read_errors: u64,
    /// Scrapes that found resctrl mounted anew (another mount than the last scan's).
    pub mount_changes: u64,
}

/// A group file read at every scrape, from offset 0 (kernfs regenerates its text for each
/// read at offset 0): kept open while the budget allows, else opened for each read.
#[derive(Debug)]
struct GroupFile {
    /// Under the root.
    rel: String,
    /// Where in `rel` the path under the group's directory starts.
    in_group: usize,
    kept: Option<Box<dyn PositionedRead>>,
}

/// A group's directory while a scrape reads the group: opened at the first file past the
/// budget, so that each is opened with one lookup (`openat(2)`); by path where it cannot be.
#[derive(Debug)]
enum GroupDir<'g> {
    Unopened(&'g str),
    Open(Box<dyn DirReader>),
    ByPath,
}

impl GroupDir<'_> {
    fn open_reader(&mut self, fs: &Fs, file: &GroupFile) -> io::Result<Box<dyn PositionedRead>> {
        if let Self::Unopened(group) = *self {
            *self = fs.open_dir_io(group).map_or(Self::ByPath, Self::Open);
        }
        match self {
            Self::Open(dir) => dir.open_reader(&file.rel[file.in_group..]),
            Self::Unopened(_) | Self::ByPath => fs.open_reader_io(&file.rel),
        }
    }
}

impl GroupFile {
    /// Opens `rel` when `budget` has room, spending one descriptor of it. A file that
    /// cannot be opened now is opened at each read; `EMFILE`/`ENFILE` end the opening
    /// (`budget` becomes 0) for the rest of the scan.
    fn new(fs: &Fs, group: &str, file: &str, budget: &mut usize) -> Self {
        let rel = join(group, file);
        let in_group = rel.len() - file.len();
        let mut kept = None;
        if *budget > 0 {
            match fs.open_reader_io(&rel) {
                Ok(f) => {
                    *budget -= 1;
                    kept = Some(f);
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    *budget = 0;
                }
                Err(_) => {}
            }
        }
        Self {
            rel,
            in_group,
            kept,
        }
    }

    /// Runs `read` on the kept file, or on one opened for it (through `dir`) and closed
    /// after.
    fn with<T>(
        &self,
        fs: &Fs,
        dir: &mut GroupDir<'_>,
        read: impl FnOnce(&dyn PositionedRead) -> io::Result<T>,
    ) -> io::Result<T> {
        match &self.kept {
            Some(f) => read(f.as_ref()),
            None => read(dir.open_reader(fs, self)?.as_ref()),
        }
    }

    /// The whole text into `buf`: positioned reads until one comes back short (kernfs and
    /// FUSE direct I/O return everything there is up to the size asked); `InvalidData` past
    /// `max` bytes or for text that is not UTF-8.
    fn read_text<'b>(
        &self,
        fs: &Fs,
        dir: &mut GroupDir<'_>,
        max: usize,
        buf: &'b mut Vec<u8>,
    ) -> io::Result<&'b str> {
        self.with(fs, dir, |file| {
            buf.clear();
            let mut chunk = 4096usize;
            loop {
                let start = buf.len();
                buf.resize(start + chunk, 0);
                let n = file.read_at(&mut buf[start..], start as u64)?;
                buf.truncate(start + n);
                if n < chunk {
                    return Ok(());
                }
                if buf.len() >= max {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "file too large"));
                }
                chunk = (chunk * 2).min(max - buf.len() + 1);
            }
        })?;
        std::str::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// One counter reading ([`parse_reading`]); an I/O error or text that is no reading is
    /// an error (`InvalidData` for the text).
    fn read_counter(&self, fs: &Fs, dir: &mut GroupDir<'_>) -> io::Result<Option<u64>> {
        let mut buf = [0u8; 64];
        let n = self.with(fs, dir, |f| f.read_at(&mut buf, 0))?;
        parse_reading(&buf[..n], false)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not a counter reading"))
    }
}

/// One `mon_data/mon_L3_XX/<event>` file of a group.
#[derive(Debug)]
struct CounterFile {
    file: GroupFile,
    /// Its slot in [`ResctrlTelemetry::totals`].
    slot: usize,
    domain: u32,
    event: RmidEvent,
}

/// A group found by the last scan, with its files open.
#[derive(Debug)]
struct Group {
    path: String,
    kind: GroupKind,
    owner: GroupOwner,
    cpus_list: GroupFile,
    tasks: GroupFile,
    /// Control groups only.
    schemata: Option<GroupFile>,
    counters: Vec<CounterFile>,
    /// Hash of the last `tasks` text, and the ids found for it.
    tasks_hash: Option<u64>,
    container: ContainerIds,
}

/// (group path, domain, event): what a counter total is kept under.
type SeriesKey = (String, u32, RmidEvent);

/// The running total of one series.
#[derive(Debug)]
struct Slot {
    key: SeriesKey,
    total: MonotonicTotal,
    /// The inode of the group directory when last scanned (a new one: made again).
    dir_ino: u64,
    /// When the last scan found the group.
    seen: Instant,
}

/// Read-only telemetry of every resctrl group (module docs): scrape it as often as needed.
///
/// # Examples
/// A tree laid out like resctrl, with one foreign control group:
/// ```
/// use rdt_resctrl::{ResctrlTelemetry, TelemetryOptions};
/// use rdt_core::{GroupOwner, RmidEvent};
/// let dir = tempfile::tempdir()?;
/// let root = dir.path();
/// for d in ["info/L3_MON", "mon_data/mon_L3_00", "kubepods/mon_data/mon_L3_00", "mon_groups"] {
///     std::fs::create_dir_all(root.join(d))?;
/// }
/// std::fs::write(root.join("info/L3_MON/mon_features"), "llc_occupancy\nmbm_total_bytes\n")?;
/// for (g, occ) in [("", "4096"), ("kubepods/", "1024")] {
///     std::fs::write(root.join(format!("{g}schemata")), "L3:0=ff\n")?;
///     std::fs::write(root.join(format!("{g}cpus_list")), "0-3\n")?;
///     std::fs::write(root.join(format!("{g}tasks")), "")?;
///     std::fs::write(root.join(format!("{g}mon_data/mon_L3_00/llc_occupancy")), occ)?;
///     std::fs::write(root.join(format!("{g}mon_data/mon_L3_00/mbm_total_bytes")), "Unavailable\n")?;
/// }
/// let mut t = ResctrlTelemetry::open(TelemetryOptions::new(root))?;
/// let groups = t.scrape()?;
/// let kube = groups.iter().find(|g| g.path == "kubepods").unwrap();
/// assert_eq!(kube.owner, GroupOwner::Foreign);
/// assert_eq!(kube.cache[0].ways(), 8);
/// assert_eq!(kube.counters.len(), 1, "Unavailable gives no sample");
/// assert_eq!(kube.counters[0].event, RmidEvent::LlcOccupancy);
/// assert_eq!(kube.counters[0].bytes, 1024);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ResctrlTelemetry {
    fs: Fs,
    proc: ProcFs,
    opts: TelemetryOptions,
    groups: Vec<Group>,
    totals: Vec<Slot>,
    watcher: Option<Inotify>,
    rescan_due: bool,
    last_scan: Instant,
    /// The unit of `MB` values on this mount.
    mb_unit: fn(u32) -> MbaLimit,
    stats: TelemetryStats,
    samples: Vec<GroupSample>,
    buf: Vec<u8>,
    /// The mount the groups were scanned on.
    mount: Option<MountId>,
    /// Group files kept open at most.
    budget: usize,
    /// Group files kept open now.
    kept: usize,
    /// The groups the last scrape could not read in full.
    incomplete: Vec<String>,
}

/// Which mount a resctrl root is: device and inode of the root and of its `info/`.
type MountId = [(u64, u64); 2];

/// The [`MountId`] of `root` now; `None` when it or its `info/` is not a directory
/// (resctrl unmounted, the path removed).
fn mount_id(root: &Path) -> Option<MountId> {
    let id = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .map(|m| (m.dev(), m.ino()))
    };
    Some([id(root)?, id(&root.join("info"))?])
}

/// Half the soft `RLIMIT_NOFILE` (1024 when it cannot be read): the default of
/// [`TelemetryOptions::max_open_files`].
fn default_budget() -> usize {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(512, |(soft, _)| {
            usize::try_from(soft / 2).unwrap_or(usize::MAX)
        })
}

impl ResctrlTelemetry {
    /// Scans the groups under the root and opens their files.
    ///
    /// # Errors
    /// [`ResctrlError::NotMounted`] without `<root>/info`; [`ResctrlError::Io`] when the
    /// root or a `mon_groups` directory cannot be listed.
    pub fn open(opts: TelemetryOptions) -> Result<Self, ResctrlError> {
        if !opts.root.join("info").is_dir() {
            return Err(ResctrlError::NotMounted {
                root: opts.root.clone(),
            });
        }
        let budget = opts.max_open_files.unwrap_or_else(default_budget);
        let mut this = Self {
            fs: Fs::new(opts.root.clone(), Arc::new(HostFs::new(opts.root.clone()))),
            proc: ProcFs::at(&opts.proc_root),
            opts,
            groups: Vec::new(),
            totals: Vec::new(),
            watcher: None,
            rescan_due: true,
            last_scan: Instant::now(),
            mb_unit: percent,
            stats: TelemetryStats::default(),
            samples: Vec::new(),
            buf: Vec::new(),
            mount: None,
            budget,
            kept: 0,
            incomplete: Vec::new(),
        };
        this.rescan()?;
        Ok(this)
    }

    /// The resctrl root.
    #[must_use]
    pub fn root(&self) -> &Path {
        self.fs.root()
    }

    /// Counts since open.
    #[must_use]
    pub const fn stats(&self) -> TelemetryStats {
        self.stats
    }

    /// The group files kept open now (at most [`TelemetryOptions::max_open_files`]; module
    /// docs, "Descriptors"), in descriptors.
    #[must_use]
    pub const fn files_kept_open(&self) -> usize {
        self.kept
    }

    /// The groups (paths as in [`GroupSample::path`]) of which the last scrape could not
    /// read every file: a file that could not be opened or read, or whose text did not
    /// parse. Empty when the last scrape read everything. A counter that reads
    /// `Unavailable`, `Error` or `Unassigned` was read: it is not counted here.
    #[must_use]
    pub fn incomplete(&self) -> &[String] {
        &self.incomplete
    }

    /// Reads every group once (module docs for what it costs), scanning the group list
    /// first when it may have changed or resctrl was mounted anew. The samples are valid
    /// until the next call; [`ResctrlTelemetry::incomplete`] names the groups it could not
    /// read in full.
    ///
    /// # Errors
    /// [`ResctrlError::NotMounted`] when the root or its `info/` is gone (resctrl
    /// unmounted; every file is closed and the next scrape scans again); a failed rescan
    /// ([`ResctrlError::Io`] listing the root). A file that cannot be read only leaves its
    /// value out (counted in [`TelemetryStats::read_errors`] and
    /// [`ResctrlTelemetry::incomplete`]).
    pub fn scrape(&mut self) -> Result<&[GroupSample], ResctrlError> {
        self.samples.clear();
        self.incomplete.clear();
        match mount_id(self.fs.root()) {
            None => {
                self.close_all();
                return Err(ResctrlError::NotMounted {
                    root: self.fs.root().to_owned(),
                });
            }
            Some(id) if Some(id) != self.mount => {
                if self.mount.is_some() {
                    self.stats.mount_changes += 1;
                }
                self.rescan_due = true;
            }
            Some(_) => {}
        }
        let rescan = self.rescan_due
            || self.last_scan.elapsed() >= self.opts.rescan_interval
            || self.changed();
        if rescan {
            self.rescan()?;
        }
        self.stats.scrapes += 1;
        // A group gone since the scan (or the whole mount replaced in place): scanned
        // again and read again, once, so that this scrape already tells the new state.
        let errors = self.stats.read_errors;
        if self.read_all() && !rescan {
            self.stats.read_errors = errors; // the second reading is the scrape's
            self.rescan()?;
            self.read_all();
        }
        Ok(&self.samples)
    }

    /// Reads every group into `samples` and `incomplete`; whether a read said a group is
    /// gone (the next scrape scans again).
    fn read_all(&mut self) -> bool {
        self.samples.clear();
        self.incomplete.clear();
        let mut gone = false;
        let fs = &self.fs;
        let cancel = self.opts.cancel.clone();
        for g in &mut self.groups {
            if cancel.as_deref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                self.incomplete.push(g.path.clone());
                self.rescan_due = true;
                continue;
            }
            let mut s = GroupSample {
                path: g.path.clone(),
                kind: g.kind,
                owner: g.owner,
                cpus: None,
                tasks: None,
                container: ContainerIds::default(),
                cache: Vec::new(),
                bandwidth: Vec::new(),
                counters: Vec::with_capacity(g.counters.len()),
            };
            let mut dir = GroupDir::Unopened(&g.path);
            let mut failed = 0u64;
            let mut fail = |e: &io::Error| {
                failed += 1;
                gone |= GONE.contains(&e.raw_os_error().unwrap_or(0));
            };
            for c in &g.counters {
                match c.file.read_counter(fs, &mut dir) {
                    Ok(Some(v)) => {
                        let bytes = if c.event == RmidEvent::LlcOccupancy {
                            v
                        } else {
                            self.totals[c.slot].total.update(v)
                        };
                        s.counters.push(CounterSample {
                            domain: c.domain,
                            event: c.event,
                            bytes,
                        });
                    }
                    Ok(None) => {}
                    Err(e) => fail(&e),
                }
            }
            match g
                .cpus_list
                .read_text(fs, &mut dir, MAX_SMALL_FILE, &mut self.buf)
            {
                Ok(text) => match text.trim().parse::<CpuSet>() {
                    Ok(c) => s.cpus = Some(c.len()),
                    Err(_) => fail(&io::ErrorKind::InvalidData.into()),
                },
                Err(e) => fail(&e),
            }
            match g
                .tasks
                .read_text(fs, &mut dir, MAX_TASKS_FILE, &mut self.buf)
            {
                Ok(text) => {
                    s.tasks = Some(text.lines().filter(|l| !l.trim().is_empty()).count());
                    let mut h = DefaultHasher::new();
                    text.hash(&mut h);
                    let hash = h.finish();
                    if g.tasks_hash != Some(hash) {
                        g.tasks_hash = Some(hash);
                        g.container = sample_container(&self.proc, text);
                    }
                    s.container = g.container.clone();
                }
                Err(e) => fail(&e),
            }
            if let Some(f) = &g.schemata {
                match f.read_text(fs, &mut dir, MAX_SMALL_FILE, &mut self.buf) {
                    Ok(text) => match text.parse::<Schemata>() {
                        Ok(schemata) => allocations(&schemata, self.mb_unit, &mut s),
                        Err(_) => fail(&io::ErrorKind::InvalidData.into()),
                    },
                    Err(e) => fail(&e),
                }
            }
            if failed > 0 {
                self.stats.read_errors += failed;
                self.incomplete.push(g.path.clone());
            }
            self.samples.push(s);
        }
        self.rescan_due |= gone;
        gone
    }

    /// Closes every group file and forgets the mount: the next scrape scans again.
    fn close_all(&mut self) {
        self.groups = Vec::new();
        self.kept = 0;
        self.mount = None;
        self.watcher = None;
        self.rescan_due = true;
    }

    /// Whether an inotify watch reported a change (never blocks).
    fn changed(&self) -> bool {
        self.watcher
            .as_ref()
            .is_some_and(|w| w.read_events().is_ok_and(|events| !events.is_empty()))
    }

    /// Scans the group list now and reopens every file: watches first, then lists, so
    /// that a change during the listing is seen by the next scrape.
    ///
    /// # Errors
    /// [`ResctrlError::Io`] when the root or a `mon_groups` directory cannot be listed.
    pub fn rescan(&mut self) -> Result<(), ResctrlError> {
        let now = Instant::now();
        self.stats.scans += 1;
        self.last_scan = now;
        // The old files go first: a rescan never holds two sets of descriptors.
        self.close_all();
        let Some(mount) = mount_id(self.fs.root()) else {
            return Err(ResctrlError::NotMounted {
                root: self.fs.root().to_owned(),
            });
        };
        self.rescan_due = false;
        let watcher = if self.opts.watch {
            Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()
        } else {
            None
        };
        let found = self.list(watcher.as_ref())?;
        let domains = self.mon_domains()?;
        let events = self.mon_events();
        self.mb_unit = self.mb_unit();
        // The totals of the groups found keep their slots; the rest wait `forget_after`.
        let mut old: HashMap<SeriesKey, Slot> =
            self.totals.drain(..).map(|s| (s.key.clone(), s)).collect();
        let recorded = self
            .opts
            .run_dir
            .as_deref()
            .map(crate::recorded_groups)
            .unwrap_or_default();
        let mut groups = Vec::with_capacity(found.len());
        let mut budget = self.budget;
        for (path, kind) in found {
            if self.cancelled() {
                self.rescan_due = true;
                break;
            }
            let Ok(meta) = std::fs::metadata(self.fs.path(&path)) else {
                continue; // gone since the listing
            };
            // The root is pqos's COS 0 (`COS0` names it).
            let name = if path.is_empty() {
                "COS0"
            } else {
                path.rsplit('/').next().unwrap_or_default()
            };
            let owner = group_owner(kind, name, |n| {
                self.opts.named_classes.iter().any(|c| c == n) || recorded.iter().any(|c| c == n)
            });
            let mut open = |file: &str| GroupFile::new(&self.fs, &path, file, &mut budget);
            let mut g = Group {
                cpus_list: open("cpus_list"),
                tasks: open("tasks"),
                schemata: (kind == GroupKind::Control).then(|| open("schemata")),
                path,
                kind,
                owner,
                counters: Vec::new(),
                tasks_hash: None,
                container: ContainerIds::default(),
            };
            for &d in &domains {
                for &event in &events {
                    let key = (g.path.clone(), d, event);
                    let mut slot = old.remove(&key).unwrap_or_else(|| Slot {
                        key: key.clone(),
                        total: MonotonicTotal::new(),
                        dir_ino: meta.ino(),
                        seen: now,
                    });
                    if slot.dir_ino != meta.ino() {
                        slot.total.restart(); // the directory was made again
                        slot.dir_ino = meta.ino();
                    }
                    slot.seen = now;
                    let file = format!("mon_data/mon_L3_{d:02}/{}", event.resctrl_name());
                    g.counters.push(CounterFile {
                        file: GroupFile::new(&self.fs, &g.path, &file, &mut budget),
                        slot: self.totals.len(),
                        domain: d,
                        event,
                    });
                    self.totals.push(slot);
                }
            }
            groups.push(g);
        }
        let forget = self.opts.forget_after;
        self.totals.extend(
            old.into_values()
                .filter(|s| now.saturating_duration_since(s.seen) < forget),
        );
        self.groups = groups;
        self.kept = self.budget - budget;
        self.watcher = watcher;
        self.mount = Some(mount);
        Ok(())
    }

    /// Whether [`TelemetryOptions::cancel`]'s flag is set.
    fn cancelled(&self) -> bool {
        self.opts
            .cancel
            .as_deref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// Every group, the root first, each control group followed by its monitor groups;
    /// each directory watched (when `watcher` is given) before it is listed.
    fn list(&self, watcher: Option<&Inotify>) -> Result<Vec<(String, GroupKind)>, ResctrlError> {
        let flags = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_ONLYDIR;
        let watch = |rel: &str| {
            if let Some(w) = watcher {
                // A directory that cannot be watched is still found by the rescan interval.
                let _ = w.add_watch(&self.fs.path(rel), flags);
            }
        };
        watch("");
        let mut found: Vec<(String, GroupKind)> = vec![(String::new(), GroupKind::Control)];
        let ctrl = self.fs.ctrl_groups()?;
        for parent in std::iter::once(String::new()).chain(ctrl) {
            if self.cancelled() {
                break;
            }
            if !parent.is_empty() {
                found.push((parent.clone(), GroupKind::Control));
            }
            let mon_dir = join(&parent, "mon_groups");
            watch(&mon_dir);
            for name in self.fs.subdirs(&mon_dir)? {
                found.push((join(&mon_dir, &name), GroupKind::Monitor));
            }
        }
        Ok(found)
    }

    /// The L3 monitoring domains: `mon_L3_XX` under the root's `mon_data/` (SNC's
    /// `mon_sub_L3_YY` are summed by the kernel in `mon_L3_XX`).
    fn mon_domains(&self) -> Result<Vec<u32>, ResctrlError> {
        let mut out: Vec<u32> = self
            .fs
            .subdirs("mon_data")?
            .iter()
            .filter_map(|d| d.strip_prefix("mon_L3_")?.parse().ok())
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    /// The RMID events of `info/L3_MON/mon_features`.
    fn mon_events(&self) -> Vec<RmidEvent> {
        let features = self
            .fs
            .read_opt("info/L3_MON/mon_features")
            .ok()
            .flatten()
            .unwrap_or_default();
        RmidEvent::ALL
            .into_iter()
            .filter(|e| features.lines().any(|l| l.trim() == e.resctrl_name()))
            .collect()
    }

    /// How `MB` values read: AMD units without linear MBA, MiB/s on an `mba_MBps` mount,
    /// percent otherwise.
    fn mb_unit(&self) -> fn(u32) -> MbaLimit {
        let mut files = InfoFiles::new();
        for name in BW_FILES {
            if let Ok(Some(text)) = self.fs.read_opt(&format!("info/MB/{name}")) {
                files.insert(format!("MB/{name}"), text);
            }
        }
        let Some(mb) = ResctrlInfo::parse(&files).ok().and_then(|i| i.mb) else {
            return percent;
        };
        if !mb.delay_linear {
            return MbaLimit::AmdUnits;
        }
        let root = self
            .fs
            .read("schemata")
            .ok()
            .and_then(|t| t.parse::<Schemata>().ok())
            .unwrap_or_default();
        if mba_mbps_in_tree(self.fs.exists("mba_MBps_event"), Some(&mb), &root) {
            MbaLimit::MibPerSec
        } else {
            percent
        }
    }
}

/// An Intel MBA value as a percentage (at most 100 in a kernel's file; clamped).
fn percent(v: u32) -> MbaLimit {
    MbaLimit::Percent(u8::try_from(v).unwrap_or(u8::MAX))
}

/// The cache masks and bandwidth limits of a control group's `schemata`. A value that does
/// not parse is left out.
fn allocations(schemata: &Schemata, mb_unit: fn(u32) -> MbaLimit, s: &mut GroupSample) {
    for line in schemata.lines() {
        let bandwidth = match line.name.as_str() {
            "MB" => Some(mb_unit),
            "SMBA" => Some(MbaLimit::AmdUnits as fn(u32) -> MbaLimit),
            _ => None,
        };
        for &(domain, _) in &line.values {
            match bandwidth {
                Some(unit) => {
                    if let Ok(Some(v)) = schemata.bandwidth(&line.name, domain) {
                        s.bandwidth.push(BandwidthAllocation {
                            schema: line.name.clone(),
                            domain,
                            limit: unit(v),
                        });
                    }
                }
                None => {
                    if let Ok(Some(mask)) = schemata.cache_mask(&line.name, domain) {
                        s.cache.push(CacheAllocation {
                            schema: line.name.clone(),
                            domain,
                            mask,
                        });
                    }
                }
            }
        }
    }
}

/// The pod and container of a group whose `tasks` text is `tasks`: those that a sample of
/// up to [`CONTAINER_SAMPLE`] of its tasks (spread over the list) all agree on. Tasks that
/// exited meanwhile are skipped.
fn sample_container(proc: &ProcFs, tasks: &str) -> ContainerIds {
    let ids: Vec<TaskId> = tasks
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if ids.is_empty() {
        return ContainerIds::default();
    }
    let step = ids.len().div_ceil(CONTAINER_SAMPLE);
    let mut pod = Agreement::Unset;
    let mut container = Agreement::Unset;
    for &t in ids.iter().step_by(step.max(1)) {
        let Ok(found) = proc.container_ids(t) else {
            continue;
        };
        pod.add(found.pod_uid);
        container.add(found.container_id);
    }
    ContainerIds {
        pod_uid: pod.value(),
        container_id: container.value(),
    }
}

/// What a sample of tasks says about one id.
enum Agreement {
    Unset,
    Agreed(Option<String>),
    Conflict,
}

impl Agreement {
    fn add(&mut self, v: Option<String>) {
        *self = match std::mem::replace(self, Self::Conflict) {
            Self::Unset => Self::Agreed(v),
            Self::Agreed(a) if a == v => Self::Agreed(a),
            _ => Self::Conflict,
        };
    }

    fn value(self) -> Option<String> {
        match self {
            Self::Agreed(v) => v,
            Self::Unset | Self::Conflict => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use GroupKind::{Control, Monitor};
    use GroupOwner::{Foreign, Pqos};

    const UID: &str = "7c0f6a1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b";
    const CID: &str = "3f9d2c8b7a6e5d4c3b2a19087f6e5d4c3b2a19087f6e5d4c3b2a19087f6e5d4c";

    /// A resctrl-shaped tree: Intel, 2 L3 domains, L3 CAT + MB (percent) + CMT/MBM.
    struct Tree {
        dir: tempfile::TempDir,
        root: PathBuf,
    }

    impl Tree {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("resctrl");
            let t = Self { dir, root };
            t.write(
                "info/L3_MON/mon_features",
                "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n",
            );
            for (f, v) in [
                ("num_closids", "8"),
                ("min_bandwidth", "10"),
                ("bandwidth_gran", "10"),
                ("delay_linear", "1"),
            ] {
                t.write(&format!("info/MB/{f}"), &format!("{v}\n"));
            }
            t.write("info/last_cmd_status", "ok\n");
            t.ctrl(
                "",
                "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n",
                "0-7\n",
                "1\n2\n",
            );
            t
        }

        fn write(&self, rel: &str, text: &str) {
            let p = self.root.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }

        fn group_files(&self, g: &str, cpus: &str, tasks: &str) {
            let pre = if g.is_empty() {
                String::new()
            } else {
                format!("{g}/")
            };
            self.write(&format!("{pre}cpus_list"), cpus);
            self.write(&format!("{pre}tasks"), tasks);
            for d in ["00", "01"] {
                for (e, v) in [
                    ("llc_occupancy", "65536"),
                    ("mbm_total_bytes", "1000"),
                    ("mbm_local_bytes", "800"),
                ] {
                    self.write(&format!("{pre}mon_data/mon_L3_{d}/{e}"), &format!("{v}\n"));
                }
            }
        }

        fn ctrl(&self, g: &str, schemata: &str, cpus: &str, tasks: &str) {
            self.group_files(g, cpus, tasks);
            let pre = if g.is_empty() {
                String::new()
            } else {
                format!("{g}/")
            };
            self.write(&format!("{pre}schemata"), schemata);
            fs::create_dir_all(self.root.join(format!("{pre}mon_groups"))).unwrap();
        }

        /// Every path under the root with its contents, to see that nothing changed.
        fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
            fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, Vec<u8>)>) {
                for e in fs::read_dir(dir).unwrap() {
                    let p = e.unwrap().path();
                    let rel = p.strip_prefix(base).unwrap().display().to_string();
                    if p.is_dir() {
                        out.push((rel, Vec::new()));
                        walk(&p, base, out);
                    } else {
                        out.push((rel, fs::read(&p).unwrap()));
                    }
                }
            }
            let mut out = Vec::new();
            walk(&self.root, &self.root, &mut out);
            out.sort();
            out
        }

        fn open(&self) -> ResctrlTelemetry {
            ResctrlTelemetry::open(TelemetryOptions::new(&self.root)).unwrap()
        }
    }

    fn find<'a>(groups: &'a [GroupSample], path: &str) -> &'a GroupSample {
        groups
            .iter()
            .find(|g| g.path == path)
            .unwrap_or_else(|| panic!("no group {path:?} in {groups:#?}"))
    }

    fn counter(g: &GroupSample, domain: u32, event: RmidEvent) -> Option<u64> {
        g.counters
            .iter()
            .find(|c| c.domain == domain && c.event == event)
            .map(|c| c.bytes)
    }

    #[test]
    fn the_named_groups_recorded_in_the_run_directory_are_ours_from_the_next_rescan() {
        // arrange: `web` made by pqos --apply (recorded), `kube` by another tool
        let t = Tree::new();
        let l3 = "L3:0=f;1=f\nMB:0=50;1=100\n";
        t.ctrl("web", l3, "\n", "");
        t.ctrl("kube", l3, "\n", "");
        let run = t.dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let mut tel = ResctrlTelemetry::open(TelemetryOptions::new(&t.root).run_dir(&run)).unwrap();
        let owner =
            |tel: &mut ResctrlTelemetry, path: &str| find(tel.scrape().unwrap(), path).owner;
        assert_eq!(owner(&mut tel, "web"), Foreign, "not recorded yet");
        // act: applied (recorded) since; a damaged line is skipped
        std::fs::write(run.join(crate::NAMES_FILE), "garbage\n1 web\n").unwrap();
        tel.rescan().unwrap();
        // assert
        assert_eq!(owner(&mut tel, "web"), Pqos);
        assert_eq!(owner(&mut tel, "kube"), Foreign);
    }

    /// The cancel flag (SIGTERM in a daemon) ends a scrape at the next group: nothing read
    /// after it is set, every group unread named incomplete, and the next scrape scans
    /// again once the flag is down.
    #[test]
    fn a_set_cancel_flag_ends_the_scrape_at_the_next_group() {
        let t = Tree::new();
        for g in ["a", "b", "c"] {
            t.ctrl(g, "L3:0=f;1=f\n", "\n", "");
        }
        let flag = Arc::new(AtomicBool::new(false));
        let mut tel =
            ResctrlTelemetry::open(TelemetryOptions::new(&t.root).cancel(Arc::clone(&flag)))
                .unwrap();
        assert_eq!(tel.scrape().unwrap().len(), 4, "the root and three groups");
        flag.store(true, Ordering::Relaxed);
        assert!(
            tel.scrape().unwrap().is_empty(),
            "nothing read once cancelled"
        );
        assert_eq!(tel.incomplete().len(), 4, "{:?}", tel.incomplete());
        flag.store(false, Ordering::Relaxed);
        assert_eq!(tel.scrape().unwrap().len(), 4);
        assert!(tel.incomplete().is_empty());
    }

    #[test]
    fn finds_every_group_of_every_tool_and_changes_nothing() {
        // arrange
        let t = Tree::new();
        let l3 = "L3:0=f;1=f\nMB:0=50;1=100\n";
        t.ctrl("COS1", l3, "2-3\n", "");
        t.ctrl("kubepods-besteffort", l3, "\n", "");
        t.ctrl("limited", l3, "\n", "");
        t.group_files("COS1/mon_groups/pqos-42-0", "2\n", "");
        t.group_files("kubepods-besteffort/mon_groups/pod-x", "\n", "");
        t.group_files("mon_groups/user", "\n", "");
        let before = t.snapshot();
        // act
        let mut tel = ResctrlTelemetry::open(
            TelemetryOptions::new(&t.root).named_classes(["limited".to_owned()]),
        )
        .unwrap();
        let groups = tel.scrape().unwrap().to_vec();
        // assert
        let got: Vec<(&str, GroupKind, GroupOwner)> = groups
            .iter()
            .map(|g| (g.path.as_str(), g.kind, g.owner))
            .collect();
        assert_eq!(
            got,
            [
                ("", Control, Pqos),
                ("mon_groups/user", Monitor, Foreign),
                ("COS1", Control, Pqos),
                ("COS1/mon_groups/pqos-42-0", Monitor, Pqos),
                ("kubepods-besteffort", Control, Foreign),
                ("kubepods-besteffort/mon_groups/pod-x", Monitor, Foreign),
                ("limited", Control, Pqos),
            ]
        );
        assert_eq!(t.snapshot(), before, "the telemetry wrote nothing");
        let cos1 = find(&groups, "COS1");
        assert_eq!(cos1.cpus, Some(2));
        assert_eq!(cos1.tasks, Some(0));
        assert_eq!(
            cos1.cache,
            [
                CacheAllocation {
                    schema: "L3".into(),
                    domain: 0,
                    mask: 0xf
                },
                CacheAllocation {
                    schema: "L3".into(),
                    domain: 1,
                    mask: 0xf
                },
            ]
        );
        assert_eq!(cos1.cache[0].ways(), 4);
        assert_eq!(cos1.bandwidth[0].limit, MbaLimit::Percent(50));
        assert_eq!(cos1.counters.len(), 6, "3 events × 2 domains");
        assert_eq!(counter(cos1, 1, RmidEvent::LlcOccupancy), Some(65536));
        assert_eq!(counter(cos1, 1, RmidEvent::MbmLocal), Some(800));
        let root = find(&groups, "");
        assert_eq!((root.cpus, root.tasks), (Some(8), Some(2)));
        assert_eq!(root.cache[1].mask, 0x7ff);
        let mon = find(&groups, "COS1/mon_groups/pqos-42-0");
        assert!(mon.cache.is_empty() && mon.bandwidth.is_empty());
        assert_eq!(mon.cpus, Some(1));
    }

    #[test]
    fn status_words_and_hostile_files_give_no_value_and_never_panic() {
        // arrange
        let t = Tree::new();
        t.ctrl("g", "L3:0=f;1=zz\n", "0\n", "");
        t.write("g/mon_data/mon_L3_00/llc_occupancy", "Unavailable\n");
        t.write("g/mon_data/mon_L3_00/mbm_total_bytes", "Error\n");
        t.write("g/mon_data/mon_L3_00/mbm_local_bytes", "Unassigned\n");
        fs::write(
            t.root.join("g/mon_data/mon_L3_01/llc_occupancy"),
            b"\xff\xfe12\n",
        )
        .unwrap();
        fs::write(t.root.join("g/cpus_list"), b"0-\xff\n").unwrap();
        fs::write(t.root.join("g/tasks"), vec![b'7'; MAX_TASKS_FILE + 10]).unwrap();
        let mut tel = t.open();
        // act
        let groups = tel.scrape().unwrap().to_vec();
        // assert
        let g = find(&groups, "g");
        assert_eq!(counter(g, 0, RmidEvent::LlcOccupancy), None);
        assert_eq!(counter(g, 0, RmidEvent::MbmTotal), None);
        assert_eq!(counter(g, 0, RmidEvent::MbmLocal), None);
        assert_eq!(counter(g, 1, RmidEvent::LlcOccupancy), None, "not UTF-8");
        assert_eq!(counter(g, 1, RmidEvent::MbmTotal), Some(1000));
        assert_eq!(g.cpus, None);
        assert_eq!(g.tasks, None, "larger than the limit");
        assert_eq!(g.cache.len(), 1, "domain 1's mask is not hex: left out");
        assert!(tel.stats().read_errors >= 2);
    }

    #[test]
    fn a_group_made_again_continues_its_totals_and_the_list_is_scanned_only_on_change() {
        // arrange
        let t = Tree::new();
        t.ctrl("kubepods", "L3:0=f;1=f\n", "\n", "");
        let mut tel = t.open();
        assert_eq!(
            counter(
                find(tel.scrape().unwrap(), "kubepods"),
                0,
                RmidEvent::MbmTotal
            ),
            Some(1000)
        );
        t.write("kubepods/mon_data/mon_L3_00/mbm_total_bytes", "1500\n");
        assert_eq!(
            counter(
                find(tel.scrape().unwrap(), "kubepods"),
                0,
                RmidEvent::MbmTotal
            ),
            Some(1500)
        );
        assert_eq!(tel.stats().scans, 1, "no change, no rescan");
        // act: removed and made again, counting from 0 (lower than before)
        fs::remove_dir_all(t.root.join("kubepods")).unwrap();
        t.ctrl("kubepods", "L3:0=f;1=f\n", "\n", "");
        t.write("kubepods/mon_data/mon_L3_00/mbm_total_bytes", "300\n");
        let total = counter(
            find(tel.scrape().unwrap(), "kubepods"),
            0,
            RmidEvent::MbmTotal,
        );
        // assert
        assert_eq!(tel.stats().scans, 2, "inotify saw the change");
        assert_eq!(total, Some(1800));
        // act: made again once more, and the new counter is already past the old reading:
        // only the new directory's inode tells it is a new counter (the old one is moved
        // away rather than removed, so its inode cannot be reused).
        fs::rename(t.root.join("kubepods"), t.dir.path().join("old")).unwrap();
        t.ctrl("kubepods", "L3:0=f;1=f\n", "\n", "");
        t.write("kubepods/mon_data/mon_L3_00/mbm_total_bytes", "500\n");
        let total = counter(
            find(tel.scrape().unwrap(), "kubepods"),
            0,
            RmidEvent::MbmTotal,
        );
        assert_eq!(total, Some(2300));
        // occupancy is a reading now, not a total
        assert_eq!(
            counter(
                find(tel.scrape().unwrap(), "kubepods"),
                0,
                RmidEvent::LlcOccupancy
            ),
            Some(65536)
        );
    }

    #[test]
    fn without_watches_new_groups_appear_at_the_rescan_interval() {
        let t = Tree::new();
        let mut tel = ResctrlTelemetry::open(TelemetryOptions::new(&t.root).watch(false)).unwrap();
        tel.scrape().unwrap();
        t.ctrl("late", "L3:0=f;1=f\n", "\n", "");
        assert!(tel.scrape().unwrap().iter().all(|g| g.path != "late"));
        tel.opts.rescan_interval = Duration::ZERO;
        assert!(tel.scrape().unwrap().iter().any(|g| g.path == "late"));
    }

    #[test]
    fn totals_of_a_group_gone_longer_than_forget_after_are_dropped() {
        let t = Tree::new();
        t.ctrl("g", "L3:0=f;1=f\n", "\n", "");
        let mut tel = ResctrlTelemetry::open(
            TelemetryOptions::new(&t.root).forget_after(Duration::from_hours(1)),
        )
        .unwrap();
        tel.scrape().unwrap();
        let with_g = tel.totals.len();
        fs::remove_dir_all(t.root.join("g")).unwrap();
        tel.scrape().unwrap();
        assert_eq!(tel.totals.len(), with_g, "kept for a while");
        tel.opts.forget_after = Duration::ZERO;
        tel.rescan().unwrap();
        assert_eq!(tel.totals.len(), with_g - 6);
    }

    #[test]
    fn pod_and_container_come_from_the_tasks_cgroups_when_they_agree() {
        // arrange: tasks 100, 101 in one container of a pod; 200 on the host
        let t = Tree::new();
        let proc = t.dir.path().join("proc");
        let u = UID.replace('-', "_");
        let pod_line = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/cri-containerd-{CID}.scope\n"
        );
        for (pid, text) in [
            ("100", pod_line.as_str()),
            ("101", pod_line.as_str()),
            ("200", "0::/system.slice/sshd.service\n"),
        ] {
            fs::create_dir_all(proc.join(pid)).unwrap();
            fs::write(proc.join(pid).join("cgroup"), text).unwrap();
        }
        t.ctrl("pod", "L3:0=f;1=f\n", "\n", "100\n101\n");
        t.ctrl("mixed", "L3:0=f;1=f\n", "\n", "100\n200\n");
        let mut tel =
            ResctrlTelemetry::open(TelemetryOptions::new(&t.root).proc_root(&proc)).unwrap();
        // act
        let groups = tel.scrape().unwrap().to_vec();
        // assert
        let pod = &find(&groups, "pod").container;
        assert_eq!(pod.pod_uid.as_deref(), Some(UID));
        assert_eq!(pod.container_id.as_deref(), Some(CID));
        assert!(find(&groups, "mixed").container.is_empty());
        // the tasks change: looked up again
        t.write("pod/tasks", "200\n");
        let groups = tel.scrape().unwrap().to_vec();
        assert!(find(&groups, "pod").container.is_empty());
    }

    #[test]
    fn mb_values_are_amd_units_or_mibps_as_the_mount_says() {
        let t = Tree::new();
        t.write("info/MB/delay_linear", "0\n");
        t.ctrl("g", "MB:0=2048;1=16\nSMBA:0=8;1=8\n", "\n", "");
        let mut tel = t.open();
        let g = find(tel.scrape().unwrap(), "g").clone();
        assert_eq!(g.bandwidth[1].limit, MbaLimit::AmdUnits(16));
        assert_eq!(g.bandwidth[2].limit, MbaLimit::AmdUnits(8));
        let t = Tree::new();
        t.write("schemata", "MB:0=4294967295;1=4294967295\nL3:0=7ff;1=7ff\n");
        t.ctrl("g", "MB:0=6000;1=4294967295\n", "\n", "");
        let mut tel = t.open();
        let g = find(tel.scrape().unwrap(), "g").clone();
        assert_eq!(g.bandwidth[0].limit, MbaLimit::MibPerSec(6000));
    }

    #[test]
    fn past_the_descriptor_budget_every_group_is_still_read_in_full() {
        // arrange: 6 groups of 3 + 6 files each, 3 files kept open at most
        let t = Tree::new();
        for n in 0..5 {
            t.ctrl(&format!("g{n}"), "L3:0=f;1=f\n", "1\n", "");
        }
        let mut tel =
            ResctrlTelemetry::open(TelemetryOptions::new(&t.root).max_open_files(3)).unwrap();
        // act
        let groups = tel.scrape().unwrap().to_vec();
        // assert
        assert_eq!(tel.files_kept_open(), 3);
        assert_eq!(groups.len(), 6);
        for g in &groups {
            assert_eq!(g.counters.len(), 6, "{}", g.path);
            assert_eq!(g.cache.len(), 2, "{}", g.path);
            assert!(g.cpus.is_some() && g.tasks.is_some(), "{}", g.path);
        }
        assert!(tel.incomplete().is_empty(), "{:?}", tel.incomplete());
        // a rescan keeps within the budget, and the reads see the files' new text
        t.write("g4/mon_data/mon_L3_01/llc_occupancy", "7\n");
        tel.rescan().unwrap();
        assert_eq!(tel.files_kept_open(), 3);
        let g4 = find(tel.scrape().unwrap(), "g4").clone();
        assert_eq!(counter(&g4, 1, RmidEvent::LlcOccupancy), Some(7));
    }

    #[test]
    fn a_file_missing_at_the_scan_is_read_later_and_its_group_named_meanwhile() {
        // arrange: one counter file absent when the group list is scanned
        let t = Tree::new();
        t.ctrl("g", "L3:0=f;1=f\n", "1\n", "");
        fs::remove_file(t.root.join("g/mon_data/mon_L3_01/mbm_local_bytes")).unwrap();
        let mut tel = t.open();
        // act + assert: the scrape says what it could not read ...
        let g = find(tel.scrape().unwrap(), "g").clone();
        assert_eq!(counter(&g, 1, RmidEvent::MbmLocal), None);
        assert_eq!(tel.incomplete(), ["g"]);
        assert_eq!(tel.stats().read_errors, 1);
        // ... and the file, there again, is read (without waiting for the rescan interval)
        t.write("g/mon_data/mon_L3_01/mbm_local_bytes", "900\n");
        let g = find(tel.scrape().unwrap(), "g").clone();
        assert_eq!(counter(&g, 1, RmidEvent::MbmLocal), Some(900));
        assert!(tel.incomplete().is_empty());
    }

    #[test]
    fn resctrl_unmounted_fails_the_scrape_and_mounted_anew_is_scanned_again() {
        // arrange
        let t = Tree::new();
        t.ctrl("old", "L3:0=f;1=f\n", "1\n", "");
        let mut tel = ResctrlTelemetry::open(TelemetryOptions::new(&t.root).watch(false)).unwrap();
        assert!(tel.scrape().unwrap().iter().any(|g| g.path == "old"));
        // act: "unmounted": the root without its info/ (a kernel's empty mount point)
        let info = t.dir.path().join("info.saved");
        fs::rename(t.root.join("info"), &info).unwrap();
        let gone = tel.scrape().map(<[GroupSample]>::len);
        // assert
        assert!(
            matches!(gone, Err(ResctrlError::NotMounted { .. })),
            "{gone:?}"
        );
        assert_eq!(tel.files_kept_open(), 0, "every file closed");
        // act: "mounted anew": another info/ and other groups, no inotify, no interval
        fs::create_dir(t.root.join("info")).unwrap();
        for e in fs::read_dir(&info).unwrap() {
            let e = e.unwrap();
            fs::rename(e.path(), t.root.join("info").join(e.file_name())).unwrap();
        }
        fs::remove_dir_all(t.root.join("old")).unwrap();
        t.ctrl("new", "L3:0=f;1=f\n", "1\n", "");
        let paths: Vec<String> = tel
            .scrape()
            .unwrap()
            .iter()
            .map(|g| g.path.clone())
            .collect();
        // assert
        assert!(paths.contains(&"new".to_owned()), "{paths:?}");
        assert!(!paths.contains(&"old".to_owned()), "{paths:?}");
        // act: the same root, another info/ inode: a remount of the same directory
        let scans = tel.stats().scans;
        fs::rename(t.root.join("info"), &info).unwrap();
        fs::create_dir(t.root.join("info")).unwrap();
        for e in fs::read_dir(&info).unwrap() {
            let e = e.unwrap();
            fs::rename(e.path(), t.root.join("info").join(e.file_name())).unwrap();
        }
        tel.scrape().unwrap();
        assert_eq!(tel.stats().scans, scans + 1);
        assert_eq!(tel.stats().mount_changes, 1);
    }

    #[test]
    fn a_tree_that_is_not_resctrl_is_not_mounted() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            ResctrlTelemetry::open(TelemetryOptions::new(dir.path())),
            Err(ResctrlError::NotMounted { .. })
        ));
    }
}

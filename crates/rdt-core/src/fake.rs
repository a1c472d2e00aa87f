//! A [`Backend`] in memory, for the tests of programs that link the library: platform
//! fixtures ([`fixtures`]), register-like class tables, a record of every change
//! ([`FakeBackend::writes`]), fault injection ([`FakeBackend::fail_nth_write`]) and a
//! deterministic monitoring model fed through the same [`MonAccumulator`] the real
//! interfaces use.
//!
//! Enable it in the tests of a crate that uses the library:
//! ```toml
//! [dev-dependencies]
//! rdt-core = { version = "0.1", features = ["fake"] }
//! ```
//!
//! # Examples
//! ```
//! use rdt_core::fake::FakeBackend;
//! use rdt_core::{Backend, BackendExt, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource, ClassId};
//!
//! let mut b = FakeBackend::broadwell_2s();
//! b.fail_nth_write(2);
//! let class = |n, bits| CatClass {
//!     class: ClassId::new(n),
//!     mask: CatMask::Unified(CacheBitmask::new(bits).unwrap()),
//! };
//! let domain = CacheDomain::new(0);
//! b.set_cat_classes(CatResource::L3, domain, &[class(1, 0xf)]).unwrap();
//! let e = b.set_cat_classes(CatResource::L3, domain, &[class(2, 0xf0)]).unwrap_err();
//! assert!(e.to_string().contains("injected failure"));
//! assert_eq!(b.writes.len(), 1);
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub mod fuzz;

use crate::monitor::CounterFormat;
use crate::{
    AllocReset, Backend, CacheDomain, Capabilities, CatClass, CatMask, CatResource, ClassId,
    CpuSet, FeatureSetting, GroupInfo, GroupKind, GroupOwner, GroupStartError, Interface,
    LogicalCpu, MbaClass, MbaLimit, MbaResource, MonAccumulator, MonEvents, MonGroupId, MonValues,
    MsrOps, NamedClasses, OsOps, PmuCounts, RequestError, Reset, Rmid, RmidEvent, TaskId, Topology,
    Writers, start_one_by_one,
};

/// Platforms for tests: capabilities and topologies of typical parts, and builders for the
/// capability structs, so that tests name a platform instead of spelling out every CPUID
/// field.
pub mod fixtures {
    use crate::{
        CacheDomain, CacheGeometry, Capabilities, CatCaps, CpuPlacement, Feature, LogicalCpu,
        MbaCaps, MbaKind, MonEventSupport, MonitoringCaps, PmuCaps, Topology, Vendor,
    };

    /// CAT with a `cbm_len`-bit CBM and `num_classes` classes: no shareable bits, CDP
    /// supported and off, contiguous masks, at least one bit (Intel).
    #[must_use]
    pub const fn cat(cbm_len: u32, num_classes: u32) -> CatCaps {
        CatCaps {
            cbm_len,
            shareable_bits: 0,
            num_classes,
            cdp_supported: true,
            cdp_enabled: false,
            non_contiguous_cbm: false,
            io_rdt: false,
            min_cbm_bits: 1,
        }
    }

    /// Intel MBA with `num_classes` classes, linear, in 10 % steps (maximum delay 90).
    #[must_use]
    pub const fn intel_mba(num_classes: u32) -> MbaCaps {
        MbaCaps {
            num_classes,
            kind: MbaKind::IntelDelay {
                max_delay: 90,
                linear: true,
                per_thread: false,
            },
            ctrl_enabled: false,
        }
    }

    /// AMD MBA with `num_classes` classes in 1/8 GB/s units, an 11-bit field (2048 =
    /// unlimited).
    #[must_use]
    pub const fn amd_mba(num_classes: u32) -> MbaCaps {
        MbaCaps {
            num_classes,
            kind: MbaKind::AmdBandwidth { width: 11 },
            ctrl_enabled: false,
        }
    }

    /// CMT and MBM (occupancy, local, total) with `num_rmids` RMIDs, `upscaling_factor`
    /// bytes per count and 24-bit counters.
    #[must_use]
    pub const fn monitoring(num_rmids: u32, upscaling_factor: u32) -> MonitoringCaps {
        MonitoringCaps {
            max_rmid: num_rmids.saturating_sub(1),
            num_rmids,
            upscaling_factor,
            counter_width: 24,
            overflow_bit: false,
            io_rdt: false,
            events: MonEventSupport {
                llc_occupancy: true,
                mbm_total: true,
                mbm_local: true,
            },
        }
    }

    /// A topology from `(cpu, package, l2 id, l3 id)` tuples (core id = CPU, NUMA node =
    /// package).
    #[must_use]
    pub fn topology(cpus: impl IntoIterator<Item = (u32, u32, u32, u32)>) -> Topology {
        Topology::from_placements(
            cpus.into_iter()
                .map(|(cpu, package, l2, l3)| CpuPlacement {
                    cpu: LogicalCpu::new(cpu),
                    package,
                    core: Some(cpu),
                    l2: CacheDomain::new(l2),
                    l3: Some(CacheDomain::new(l3)),
                    node: package,
                })
                .collect(),
        )
    }

    const fn with_pmu(mut caps: Capabilities) -> Capabilities {
        caps.pmu = PmuCaps {
            ipc: true,
            llc_misses: true,
            llc_references: true,
        };
        caps
    }

    /// Two-socket Xeon E5 v4 (Broadwell-EP) like the seed paper's: 24 CPUs, 12 per socket,
    /// one L3 per socket with a 20-bit CBM and 16 classes, CDP supported, CMT/MBM (176
    /// RMIDs, 64 KiB per count), a PMU, no MBA; the E5-2650L v4's brand and cache geometry.
    #[must_use]
    pub fn broadwell_2s() -> (Capabilities, Topology) {
        let mut caps = with_pmu(Capabilities::none(Vendor::Intel));
        caps.brand = Some("Intel(R) Xeon(R) CPU E5-2650L v4 @ 1.70GHz".into());
        caps.signature = Some(0x406f1);
        caps.monitoring = Feature::Supported(monitoring(176, 65536));
        caps.l3_cat = Feature::Supported(cat(20, 16));
        caps.l3_cache = Some(CacheGeometry {
            level: 3,
            ways: 20,
            partitions: 1,
            line_size: 64,
            sets: 28672,
            max_sharing_ids: 32,
        });
        caps.l2_cache = Some(CacheGeometry {
            level: 2,
            ways: 8,
            partitions: 1,
            line_size: 64,
            sets: 512,
            max_sharing_ids: 2,
        });
        (caps, topology((0..24).map(|c| (c, c / 12, c, c / 12))))
    }

    /// One-socket Intel part with 8 CPUs: L3 CAT (11-bit CBM, shareable 0x600, 16 classes,
    /// CDP), L2 CAT (one L2 per pair of CPUs, 8-bit CBM, 8 classes, no CDP), MBA (8 classes,
    /// 10 % steps), CMT/MBM (192 RMIDs), a PMU.
    #[must_use]
    pub fn intel_1s() -> (Capabilities, Topology) {
        let mut caps = with_pmu(Capabilities::none(Vendor::Intel));
        caps.monitoring = Feature::Supported(monitoring(192, 49152));
        caps.l3_cat = Feature::Supported(CatCaps {
            shareable_bits: 0x600,
            ..cat(11, 16)
        });
        caps.l2_cat = Feature::Supported(CatCaps {
            cdp_supported: false,
            ..cat(8, 8)
        });
        caps.mba = Feature::Supported(intel_mba(8));
        (caps, topology((0..8).map(|c| (c, 0, c / 2, 0))))
    }

    /// Two-socket Intel part with 8 CPUs, 4 per socket and L3, 2 per L2: L3 CAT (20-bit
    /// CBM, 16 classes), L2 CAT (8-bit CBM, 8 classes), both with CDP; MBA (8 classes);
    /// CMT/MBM (112 RMIDs, 56 KiB per count, 24-bit counters); a PMU.
    #[must_use]
    pub fn intel_2s() -> (Capabilities, Topology) {
        let mut caps = with_pmu(Capabilities::none(Vendor::Intel));
        caps.monitoring = Feature::Supported(monitoring(112, 57344));
        caps.l3_cat = Feature::Supported(cat(20, 16));
        caps.l2_cat = Feature::Supported(cat(8, 8));
        caps.mba = Feature::Supported(intel_mba(8));
        let topo = Topology::from_placements(
            (0..8)
                .map(|c| CpuPlacement {
                    cpu: LogicalCpu::new(c),
                    package: c / 4,
                    core: Some(c % 4),
                    l2: CacheDomain::new(c / 2),
                    l3: Some(CacheDomain::new(c / 4)),
                    node: c / 4,
                })
                .collect(),
        );
        (caps, topo)
    }

    /// One-socket AMD part with two core complexes of 4 CPUs: L3 CAT per CCX (16-bit CBM,
    /// 16 classes, any mask), MBA in 1/8 GB/s units (11-bit field), CMT/MBM (256 RMIDs), no
    /// PMU.
    #[must_use]
    pub fn amd_2ccx() -> (Capabilities, Topology) {
        let mut caps = Capabilities::none(Vendor::Amd);
        caps.monitoring = Feature::Supported(monitoring(256, 64));
        caps.l3_cat = Feature::Supported(CatCaps {
            non_contiguous_cbm: true,
            ..cat(16, 16)
        });
        caps.mba = Feature::Supported(amd_mba(16));
        (caps, topology((0..8).map(|c| (c, 0, c, c / 4))))
    }
}

/// An error of the [`FakeBackend`]: a request it refuses (the library's vocabulary), or an
/// injected fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FakeError {
    /// The request is invalid for this platform or state; nothing was changed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A fault armed with [`FakeBackend::fail_nth_write`], [`FakeBackend::fail_writes`],
    /// [`FakeBackend::fail_reads`] or [`FakeBackend::fail_commit`]; nothing was changed by
    /// this call.
    #[error("injected failure {0}")]
    Injected(String),
}

impl From<crate::LimitError> for FakeError {
    fn from(e: crate::LimitError) -> Self {
        Self::Request(e.into())
    }
}

impl crate::BackendError for FakeError {
    fn request(&self) -> Option<&RequestError> {
        match self {
            Self::Request(r) => Some(r),
            Self::Injected(_) => None,
        }
    }
}

type R<T> = Result<T, FakeError>;

/// A running uncore group of the fake ([`BackendExt::start_uncore_monitoring`]).
#[derive(Debug, Clone)]
struct UncoreGroup {
    sockets: Vec<u32>,
    events: MonEvents,
    values: MonValues,
    /// When the next interval began: the start, then the last poll.
    since: Instant,
}

/// The fake's uncore counts of one socket per poll: LLC misses of PCIe reads, misses of
/// writes, references of reads, references of writes, each × (socket + 1).
pub const UNCORE_COUNTS_PER_POLL: [u64; 4] = [1000, 500, 2000, 1000];

/// A running monitoring group of the fake.
#[derive(Debug, Clone)]
struct Group {
    cpus: CpuSet,
    /// PID groups: the tasks (`cpus` is empty then).
    tasks: Vec<TaskId>,
    /// The accumulator context of each member (its L3 domain's index), in member order.
    member_context: Vec<usize>,
    polls: u64,
    acc: MonAccumulator,
}

impl Group {
    /// Records the model's counts after `self.polls` polls into the accumulator: the MBM
    /// counters and the PMU, and the occupancy when `occupancy` (a poll, not the reading
    /// at start).
    fn read(&mut self, occupancy: bool) {
        let k = self.polls;
        let contexts = self
            .member_context
            .iter()
            .copied()
            .max()
            .map_or(0, |m| m + 1);
        let mut occ = vec![0u64; contexts];
        let mut members = vec![0u64; contexts];
        let occ_of = |i: usize| {
            self.cpus
                .iter()
                .nth(i)
                .map_or(MIB, |c| (u64::from(c.get()) + 1) * MIB)
        };
        for (i, &ctx) in self.member_context.iter().enumerate() {
            occ[ctx] += occ_of(i);
            members[ctx] += 1;
        }
        for ctx in 0..contexts {
            if occupancy {
                self.acc
                    .record(ctx, RmidEvent::LlcOccupancy, Some(occ[ctx]));
            }
            self.acc
                .record(ctx, RmidEvent::MbmLocal, Some(k * members[ctx] * 100 * MIB));
            self.acc
                .record(ctx, RmidEvent::MbmTotal, Some(k * members[ctx] * 150 * MIB));
        }
        self.acc.record_pmu(self.member_context.iter().map(|_| {
            Some(PmuCounts {
                instructions: k * 2_000_000_000,
                cycles: k * 1_000_000_000,
                llc_misses: k * 1_000_000,
                llc_references: Some(k * 4_000_000),
            })
        }));
    }
}

/// An in-memory platform implementing [`Backend`].
///
/// Allocation keeps one table of masks per (resource, domain) and one of MBA limits per
/// domain, checked against the capabilities like the real interfaces. Every change is
/// appended to [`FakeBackend::writes`] as a line (`"L3 0 COS1 = ..."`, `"assoc 2 COS1"`).
///
/// Monitoring model, per member (CPU n, or task): occupancy (n + 1) MiB (1 MiB per task);
/// every poll 100 MiB local and 150 MiB total traffic, 2·10⁹ instructions in 10⁹ cycles and
/// 10⁶ LLC misses, counted on a counter per L3 domain (0 at start) that the shared
/// [`MonAccumulator`] turns into values. Starting a group reads the counters as the real
/// backends do, so the first poll gives the first poll's traffic. Time is the monotonic
/// clock, or with [`FakeBackend::with_manual_clock`] a clock that only
/// [`FakeBackend::advance`] moves, for exact intervals and rates.
#[derive(Debug, Clone)]
pub struct FakeBackend {
    caps: Capabilities,
    topo: Topology,
    /// Usable classes' masks per (resource, domain).
    cat: BTreeMap<(CatResource, CacheDomain), Vec<CatMask>>,
    /// Every class's limit per (MBA or SMBA, L3 domain).
    mba: BTreeMap<(MbaResource, CacheDomain), Vec<MbaLimit>>,
    cos: BTreeMap<LogicalCpu, ClassId>,
    rmid: BTreeMap<LogicalCpu, Rmid>,
    groups: BTreeMap<MonGroupId, Group>,
    /// Uncore groups: their sockets, events, polls and values.
    uncore: BTreeMap<MonGroupId, UncoreGroup>,
    next_group: u32,
    /// Every state change, in order (`"L3 0 COS1 = ..."`, `"assoc 2 COS1"`, ...).
    pub writes: Vec<String>,
    /// Report the OS interface (no RMIDs in `rmid_of`; task association works).
    pub os_interface: bool,
    /// What [`BackendExt::io_alloc`](crate::BackendExt::io_alloc) reports (`None`: no L3 I/O allocation).
    pub io_alloc: Option<crate::IoAlloc>,
    /// The write that fails: 1 is the next one; 0 none.
    fail_nth: usize,
    /// The first write that fails, with every one after it: 1 is the next one; 0 none.
    fail_from: usize,
    fail_all_writes: bool,
    fail_all_reads: bool,
    fail_commit: bool,
    /// Processes: process id (its main thread) -> every thread id, main thread included.
    processes: BTreeMap<TaskId, Vec<TaskId>>,
    /// The class of every known thread (resctrl: which group's `tasks` lists it).
    task_class: BTreeMap<TaskId, ClassId>,
    /// resctrl groups present besides the root (ours and other tools').
    groups_present: Vec<GroupInfo>,
    /// [`BackendExt::run_dir`].
    run_dir: Option<std::path::PathBuf>,
    /// The write at which the "process dies" (panics): 1 is the next one; 0 none.
    panic_nth: usize,
    /// [`BackendExt::hold_writers`] depth.
    writers_held: u32,
    /// Named classes ([`BackendExt::class_named`]).
    names: BTreeMap<ClassId, String>,
    /// The manual clock's time ([`FakeBackend::with_manual_clock`]); `None`: the
    /// monotonic clock.
    clock: Option<Instant>,
    /// The names claimed as this library's ([`BackendExt::claim_class`]).
    own: std::collections::BTreeSet<String>,
    /// I/O RDT channels and their classes ([`FakeBackend::with_io_rdt`]); `None`: no I/O
    /// RDT.
    io_channels: Option<BTreeMap<crate::ChannelId, Option<ClassId>>>,
}

const MIB: u64 = 1024 * 1024;

impl FakeBackend {
    /// A fake platform with `caps` and `topo`: every class at the full mask or no limit,
    /// every CPU in COS 0 and RMID 0, the MSR interface.
    #[must_use]
    pub fn new(caps: Capabilities, topo: Topology) -> Self {
        let mut b = Self {
            caps,
            topo,
            cat: BTreeMap::new(),
            mba: BTreeMap::new(),
            cos: BTreeMap::new(),
            rmid: BTreeMap::new(),
            groups: BTreeMap::new(),
            uncore: BTreeMap::new(),
            next_group: 1,
            writes: Vec::new(),
            os_interface: false,
            io_alloc: None,
            fail_nth: 0,
            fail_from: 0,
            fail_all_writes: false,
            fail_all_reads: false,
            fail_commit: false,
            processes: BTreeMap::new(),
            task_class: BTreeMap::new(),
            groups_present: Vec::new(),
            run_dir: None,
            panic_nth: 0,
            writers_held: 0,
            names: BTreeMap::new(),
            clock: None,
            own: std::collections::BTreeSet::new(),
            io_channels: None,
        };
        b.reset_tables();
        for c in b.topo.cpus() {
            b.cos.insert(c.cpu, ClassId::new(0));
            b.rmid.insert(c.cpu, Rmid::new(0));
        }
        b
    }

    /// The fake with a manual clock: monitoring starts and polls are stamped with a time
    /// that stands still but for [`FakeBackend::advance`], so [`MonValues::interval`] and
    /// the rates ([`MonValues::mbm_local_bytes_per_s`]) are exact. Without it the fake uses
    /// the monotonic clock.
    #[must_use]
    pub fn with_manual_clock(mut self) -> Self {
        self.clock = Some(self.clock.unwrap_or_else(Instant::now));
        self
    }

    /// Moves the manual clock on by `dt` (and turns it on, from now, if it was off:
    /// [`FakeBackend::with_manual_clock`]). The traffic model counts per poll, not per
    /// second, so the rate of a poll is its traffic over the time advanced since the
    /// previous poll (or the start).
    pub fn advance(&mut self, dt: Duration) {
        self.clock = Some(self.clock.unwrap_or_else(Instant::now) + dt);
    }

    /// The time of a start or poll: the manual clock's, or now.
    fn now(&self) -> Instant {
        self.clock.unwrap_or_else(Instant::now)
    }

    /// [`fixtures::broadwell_2s`].
    #[must_use]
    pub fn broadwell_2s() -> Self {
        let (c, t) = fixtures::broadwell_2s();
        Self::new(c, t)
    }

    /// [`fixtures::intel_1s`].
    #[must_use]
    pub fn intel_1s() -> Self {
        let (c, t) = fixtures::intel_1s();
        Self::new(c, t)
    }

    /// [`fixtures::intel_2s`].
    #[must_use]
    pub fn intel_2s() -> Self {
        let (c, t) = fixtures::intel_2s();
        Self::new(c, t)
    }

    /// [`fixtures::amd_2ccx`].
    #[must_use]
    pub fn amd_2ccx() -> Self {
        let (c, t) = fixtures::amd_2ccx();
        Self::new(c, t)
    }

    fn reset_tables(&mut self) {
        self.cat.clear();
        self.mba.clear();
        for res in [CatResource::L3, CatResource::L2] {
            let Some(c) = self.caps.cat(res) else {
                continue;
            };
            let full = c.full_mask();
            let mask = if c.cdp_enabled {
                CatMask::Cdp {
                    data: full,
                    code: full,
                }
            } else {
                CatMask::Unified(full)
            };
            let domains = match res {
                CatResource::L3 => self.topo.l3_domains(),
                CatResource::L2 => self.topo.l2_domains(),
            };
            for d in domains {
                self.cat
                    .insert((res, d), vec![mask; c.usable_classes() as usize]);
            }
        }
        for r in MbaResource::ALL {
            if let Some(m) = self.caps.bandwidth(r).get() {
                for d in self.topo.l3_domains() {
                    self.mba
                        .insert((r, d), vec![m.unlimited(); m.num_classes as usize]);
                }
            }
        }
    }

    /// Changes the capabilities and rebuilds the class tables (every class back to the
    /// full mask or no limit).
    pub fn reconfigure(&mut self, f: impl FnOnce(&mut Capabilities)) {
        f(&mut self.caps);
        self.reset_tables();
    }

    /// Turns L3 CDP on (as `-R l3cdp-on` would), without recording a write.
    pub fn enable_l3_cdp(&mut self) {
        if let Some(c) = self.caps.l3_cat.get_mut() {
            c.cdp_enabled = true;
        }
        self.reset_tables();
    }

    /// Makes the `n`th change from now fail (1: the next one), once; 0 disarms. Changes are
    /// mask and MBA writes (one per class), associations, resets and monitoring starts.
    pub fn fail_nth_write(&mut self, n: usize) {
        self.fail_nth = n;
    }

    /// Makes the `n`th change from now (1: the next one) and every change after it fail, as
    /// a device that stops answering does; 0 disarms.
    pub fn fail_writes_from(&mut self, n: usize) {
        self.fail_from = n;
    }

    /// Makes every change fail while `on`.
    pub fn fail_writes(&mut self, on: bool) {
        self.fail_all_writes = on;
    }

    /// Makes reads of tasks and groups fail while `on`.
    pub fn fail_reads(&mut self, on: bool) {
        self.fail_all_reads = on;
    }

    /// Makes [`Backend::commit`] fail while `on`, as the simulated platform's does when its
    /// state file cannot be written (the writes stay made in this process).
    pub fn fail_commit(&mut self, on: bool) {
        self.fail_commit = on;
    }

    /// The L3 masks of `class` in L3 domain `domain`.
    ///
    /// # Panics
    /// For a domain or class the platform does not have.
    #[must_use]
    pub fn l3_mask(&self, domain: u32, class: u32) -> CatMask {
        self.cat[&(CatResource::L3, CacheDomain::new(domain))][class as usize]
    }

    /// The class of `cpu`.
    ///
    /// # Panics
    /// For a CPU the platform does not have.
    #[must_use]
    pub fn class_of_cpu(&self, cpu: u32) -> u32 {
        self.cos[&LogicalCpu::new(cpu)].get()
    }

    /// The RMID of `cpu`.
    ///
    /// # Panics
    /// For a CPU the platform does not have.
    #[must_use]
    pub fn rmid_of_cpu(&self, cpu: u32) -> u32 {
        self.rmid[&LogicalCpu::new(cpu)].get()
    }

    /// Adds a process with its threads (the process id is its main thread), all in COS 0.
    pub fn add_process(&mut self, pid: u32, threads: &[u32]) {
        let mut all = vec![TaskId::new(pid)];
        all.extend(threads.iter().map(|&t| TaskId::new(t)));
        all.sort_unstable();
        all.dedup();
        for t in &all {
            self.task_class.insert(*t, ClassId::new(0));
        }
        self.processes.insert(TaskId::new(pid), all);
    }

    /// The class of thread `tid`.
    ///
    /// # Panics
    /// For a thread never added.
    #[must_use]
    pub fn class_of_thread(&self, tid: u32) -> u32 {
        self.task_class[&TaskId::new(tid)].get()
    }

    /// Adds a resctrl group as `ls /sys/fs/resctrl` would show it (`COS<n>` paths map to
    /// class n).
    pub fn add_group(&mut self, path: &str, kind: GroupKind, owner: GroupOwner) {
        let class = path
            .split('/')
            .next()
            .and_then(|top| top.strip_prefix("COS"))
            .and_then(|n| n.parse().ok())
            .map(ClassId::new);
        self.groups_present.push(GroupInfo {
            path: path.to_owned(),
            kind,
            owner,
            class,
        });
    }

    /// How many monitoring groups are running.
    #[must_use]
    pub fn running_groups(&self) -> usize {
        self.groups.len() + self.uncore.len()
    }

    /// Keeps transaction journals in `dir` ([`BackendExt::run_dir`](crate::BackendExt::run_dir)), so that
    /// `rdt_host::transaction::recover` can roll back a transaction that "died" half-way
    /// ([`FakeBackend::panic_at_nth_write`]).
    #[must_use]
    pub fn with_run_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.run_dir = Some(dir.into());
        self
    }

    /// With I/O RDT ([`Backend::io_rdt`]): `channels` channels `0x10100`, `0x10101`, ...
    /// of one link that tags CLOS and RMIDs, each in COS 0, and one device `0000:16:00.0`
    /// on all of them. A channel's class is a write ([`FakeBackend::writes`]:
    /// `"channel 0x10100 COS1"`), failing and dying as armed; a reset puts every channel
    /// back to no class.
    #[must_use]
    pub fn with_io_rdt(mut self, channels: u8) -> Self {
        self.io_channels = Some(
            (0..channels)
                .map(|c| (crate::ChannelId::new(0, 1, c), Some(ClassId::new(0))))
                .collect(),
        );
        self
    }

    /// Makes the `n`th write from now (1: the next) panic before it changes anything: the
    /// in-process stand-in for a process killed at that write (catch it with
    /// `std::panic::catch_unwind`).
    pub fn panic_at_nth_write(&mut self, n: usize) {
        self.panic_nth = n;
    }

    /// How many [`BackendExt::hold_writers`](crate::BackendExt::hold_writers) are not yet released.
    #[must_use]
    pub const fn writers_held(&self) -> u32 {
        self.writers_held
    }

    /// Records a change, or fails it as armed.
    fn write(&mut self, what: String) -> R<()> {
        let die = self.panic_nth == 1;
        self.panic_nth = self.panic_nth.saturating_sub(1);
        assert!(!die, "killed before writing {what}");
        let nth = self.fail_nth == 1;
        self.fail_nth = self.fail_nth.saturating_sub(1);
        let from = self.fail_from == 1;
        if self.fail_from > 1 {
            self.fail_from -= 1;
        }
        if nth || from || self.fail_all_writes {
            return Err(FakeError::Injected(format!("writing {what}")));
        }
        self.writes.push(what);
        Ok(())
    }

    fn cpu(&self, cpu: LogicalCpu) -> R<()> {
        if self.topo.get(cpu).is_none() {
            return Err(RequestError::NoSuchCpu(cpu).into());
        }
        Ok(())
    }

    fn no_domain(resource: &'static str, domain: CacheDomain) -> FakeError {
        RequestError::NoSuchDomain {
            resource,
            domain,
            known: None,
        }
        .into()
    }

    fn add_monitoring_group(
        &mut self,
        cpus: CpuSet,
        tasks: Vec<TaskId>,
        events: MonEvents,
    ) -> MonGroupId {
        let id = MonGroupId(self.next_group);
        self.next_group += 1;
        let first_l3 = self.topo.l3_domains().first().copied().unwrap_or_default();
        let member_domains: Vec<CacheDomain> = if tasks.is_empty() {
            cpus.iter()
                .map(|c| self.topo.get(c).and_then(|p| p.l3).unwrap_or(first_l3))
                .collect()
        } else {
            vec![first_l3; tasks.len()]
        };
        let mut contexts = member_domains.clone();
        contexts.sort_unstable();
        contexts.dedup();
        let member_context = member_domains
            .iter()
            .map(|d| contexts.binary_search(d).unwrap_or_default())
            .collect();
        let acc = MonAccumulator::new(
            events,
            if events.rmid_events().is_empty() {
                &[]
            } else {
                &contexts
            },
            CounterFormat::BYTES,
            member_domains.len(),
        );
        let mut g = Group {
            cpus,
            tasks,
            member_context,
            polls: 0,
            acc,
        };
        // the reading at start, as the real backends take it (the counters are at 0)
        g.read(false);
        g.acc.finish_baseline(self.now());
        self.groups.insert(id, g);
        id
    }
}

impl FakeBackend {
    fn reset_allocation_tables(&mut self, cfg: AllocReset) -> R<()> {
        self.write(format!("reset allocation {cfg:?}"))?;
        if let Some(channels) = self.io_channels.as_mut() {
            for c in channels.values_mut() {
                *c = None;
            }
        }
        for (feature, setting) in [
            (&mut self.caps.l3_cat, cfg.l3_cdp),
            (&mut self.caps.l2_cat, cfg.l2_cdp),
        ] {
            if let Some(c) = feature.get_mut() {
                match setting {
                    FeatureSetting::On => c.cdp_enabled = true,
                    FeatureSetting::Off => c.cdp_enabled = false,
                    FeatureSetting::Any => {}
                }
            }
        }
        // L3 I/O RDT where the fixture has it (`reconfigure` setting `l3_iordt`)
        if self.caps.l3_iordt.is_some() {
            match cfg.l3_iordt {
                FeatureSetting::On => self.caps.l3_iordt = Some(true),
                FeatureSetting::Off => self.caps.l3_iordt = Some(false),
                FeatureSetting::Any => {}
            }
        }
        self.reset_tables();
        for c in self.cos.values_mut() {
            *c = ClassId::new(0);
        }
        for c in self.task_class.values_mut() {
            *c = ClassId::new(0);
        }
        Ok(())
    }

    fn reset_rmids(&mut self) -> R<()> {
        self.write("reset monitoring".into())?;
        for r in self.rmid.values_mut() {
            *r = Rmid::new(0);
        }
        Ok(())
    }

    fn start_group(&mut self, cpus: &CpuSet, events: MonEvents) -> R<MonGroupId> {
        if cpus.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        self.caps.check_rmid_events(events)?;
        for cpu in cpus.iter() {
            self.cpu(cpu)?;
            let rmid = self.rmid[&cpu];
            if rmid.get() != 0 {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("CPU {cpu}"),
                    by: Some(format!("RMID {rmid}")),
                }
                .into());
            }
        }
        self.write(format!("start {cpus} {events:?}"))?;
        let id = self.add_monitoring_group(cpus.clone(), Vec::new(), events);
        for cpu in cpus.iter() {
            self.rmid.insert(cpu, Rmid::new(id.0));
        }
        Ok(id)
    }
}

impl FakeBackend {
    fn start_task_group(&mut self, tasks: &[TaskId], events: MonEvents) -> R<MonGroupId> {
        if tasks.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        self.caps.check_rmid_events(events)?;
        if let Some(t) = tasks
            .iter()
            .find(|t| self.groups.values().any(|g| g.tasks.contains(t)))
        {
            return Err(RequestError::AlreadyMonitored {
                what: format!("task {t}"),
                by: None,
            }
            .into());
        }
        self.write(format!("start tasks {tasks:?} {events:?}"))?;
        Ok(self.add_monitoring_group(CpuSet::default(), tasks.to_vec(), events))
    }
}

impl Backend for FakeBackend {
    type Error = FakeError;

    fn interface(&self) -> Interface {
        if self.os_interface {
            Interface::Os
        } else {
            Interface::Msr
        }
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn topology(&self) -> &Topology {
        &self.topo
    }

    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> R<Vec<Vec<CatClass>>> {
        let mut out = Vec::with_capacity(domains.len());
        for &domain in domains {
            let Some(t) = self.cat.get(&(resource, domain)) else {
                return Err(Self::no_domain("L3/L2", domain));
            };
            out.push(
                (0u32..)
                    .zip(t)
                    .map(|(i, m)| CatClass {
                        class: ClassId::new(i),
                        mask: *m,
                    })
                    .collect(),
            );
        }
        Ok(out)
    }

    fn set_cat_masks(&mut self, resource: CatResource, masks: &[(CacheDomain, CatClass)]) -> R<()> {
        if self.caps.cat(resource).is_none() {
            return Err(crate::LimitError::Unsupported("CAT").into());
        }
        for (domain, cl) in masks {
            if !self.cat.contains_key(&(resource, *domain)) {
                return Err(Self::no_domain("L3/L2", *domain));
            }
            self.caps.check_cat(resource, cl)?;
        }
        for (domain, cl) in masks {
            self.write(format!(
                "{resource} {domain} COS{} = {:?}",
                cl.class, cl.mask
            ))?;
            if let Some(t) = self.cat.get_mut(&(resource, *domain)) {
                t[cl.class.get() as usize] = cl.mask;
            }
        }
        Ok(())
    }

    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> R<Vec<Vec<MbaClass>>> {
        if !self.caps.bandwidth(resource).is_present() {
            return Err(crate::LimitError::Unsupported(resource.name()).into());
        }
        let mut out = Vec::with_capacity(domains.len());
        for &domain in domains {
            let Some(t) = self.mba.get(&(resource, domain)) else {
                return Err(Self::no_domain(resource.name(), domain));
            };
            out.push(
                (0u32..)
                    .zip(t)
                    .map(|(i, l)| MbaClass {
                        class: ClassId::new(i),
                        limit: *l,
                    })
                    .collect(),
            );
        }
        Ok(out)
    }

    /// Intel limits are rounded to the 100 − `max_delay` step as the hardware does.
    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> R<Vec<(CacheDomain, MbaClass)>> {
        let Some(m) = self.caps.bandwidth(resource).get().cloned() else {
            return Err(crate::LimitError::Unsupported(resource.name()).into());
        };
        let mut applied = Vec::with_capacity(limits.len());
        for (domain, cl) in limits {
            if !self.mba.contains_key(&(resource, *domain)) {
                return Err(Self::no_domain(resource.name(), *domain));
            }
            self.caps
                .check_bandwidth_limit(self.interface(), resource, cl.class, cl.limit)?;
            // the rounding of the interface faked (MSR: pqos's, OS: the kernel's)
            let limit = m.stored_limit(self.interface(), cl.limit);
            applied.push((
                *domain,
                MbaClass {
                    class: cl.class,
                    limit,
                },
            ));
        }
        for (domain, cl) in &applied {
            self.write(format!(
                "{resource} {domain} COS{} = {}",
                cl.class, cl.limit
            ))?;
            if let Some(t) = self.mba.get_mut(&(resource, *domain)) {
                t[cl.class.get() as usize] = cl.limit;
            }
        }
        Ok(applied)
    }

    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> R<Vec<(LogicalCpu, R<(ClassId, Option<Rmid>)>)>> {
        let mut out = Vec::new();
        for cpu in cpus.iter() {
            self.cpu(cpu)?;
            let rmid = (!self.os_interface).then(|| self.rmid[&cpu]);
            out.push((cpu, Ok((self.cos[&cpu], rmid))));
        }
        Ok(out)
    }

    /// One write for the whole set (`"assoc 0-3 COS1"`), all or nothing, as resctrl.
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> R<()> {
        for cpu in cpus.iter() {
            self.cpu(cpu)?;
        }
        self.caps.check_class(self.interface(), class)?;
        self.write(format!("assoc {cpus} COS{class}"))?;
        for cpu in cpus.iter() {
            self.cos.insert(cpu, class);
        }
        Ok(())
    }

    fn reset(&mut self, what: &Reset) -> R<()> {
        match what {
            Reset::Allocation(cfg) => self.reset_allocation_tables(*cfg),
            Reset::Monitoring(cfg) => {
                self.caps.check_mon_reset(self.interface(), cfg)?;
                self.reset_rmids()
            }
        }
    }

    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<FakeError>> {
        start_one_by_one(
            self,
            groups.len(),
            |b, i| b.start_group(&groups[i].0, groups[i].1),
            |b, id| {
                let _ = b.stop_monitoring(id);
            },
        )
    }

    fn poll(&mut self) -> R<()> {
        let now = self.now();
        for g in self.groups.values_mut() {
            g.polls += 1;
            g.read(true);
            g.acc.finish(now);
        }
        for g in self.uncore.values_mut() {
            let weight: u64 = g.sockets.iter().map(|&s| u64::from(s) + 1).sum();
            let mut counts = crate::UncoreCounts::default();
            for (e, per) in MonEvents::UNCORE.iter().zip(UNCORE_COUNTS_PER_POLL) {
                if g.events.contains(e) {
                    counts.set(e, Some(per * weight));
                }
            }
            g.values.uncore = Some(counts);
            g.values.interval = now.saturating_duration_since(g.since);
            g.values.polled_at = Some(now);
            g.since = now;
        }
        Ok(())
    }

    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        if let Some(g) = self.uncore.get(&group) {
            return g.values.polled_at.is_some().then_some(&g.values);
        }
        self.groups
            .get(&group)
            .filter(|g| g.polls > 0)
            .map(|g| g.acc.values())
    }

    fn stop_monitoring(&mut self, group: MonGroupId) -> R<()> {
        if let Some(g) = self.uncore.remove(&group) {
            self.writes.push(format!("stop uncore {:?}", g.sockets));
            return Ok(());
        }
        let Some(g) = self.groups.remove(&group) else {
            return Err(RequestError::NoSuchGroup(group).into());
        };
        for cpu in g.cpus.iter() {
            self.rmid.insert(cpu, Rmid::new(0));
        }
        if g.tasks.is_empty() {
            self.writes.push(format!("stop {}", g.cpus));
        } else {
            self.writes.push(format!("stop tasks {:?}", g.tasks));
        }
        Ok(())
    }

    fn writers(&mut self) -> Option<&mut dyn Writers<FakeError>> {
        Some(self)
    }

    fn names(&mut self) -> Option<&mut dyn NamedClasses<FakeError>> {
        Some(self)
    }

    /// I/O RDT where [`FakeBackend::with_io_rdt`] gave it.
    fn io_rdt(&mut self) -> Option<&mut dyn crate::IoRdtOps<FakeError>> {
        if self.io_channels.is_some() {
            Some(self)
        } else {
            None
        }
    }

    /// Tasks and groups where [`FakeBackend::os_interface`] is set, as on resctrl.
    fn os(&mut self) -> Option<&mut dyn OsOps<FakeError>> {
        if self.os_interface { Some(self) } else { None }
    }

    /// Uncore monitoring where [`FakeBackend::os_interface`] is not set, as on the MSR
    /// interface.
    fn msr(&mut self) -> Option<&mut dyn MsrOps<FakeError>> {
        if self.os_interface { None } else { Some(self) }
    }

    fn commit(&mut self) -> R<()> {
        if self.fail_commit {
            return Err(FakeError::Injected(
                "commit: the writes were not kept".to_owned(),
            ));
        }
        Ok(())
    }
}

impl OsOps<FakeError> for FakeBackend {
    fn class_of_task(&mut self, task: TaskId) -> R<ClassId> {
        self.task_class
            .get(&task)
            .copied()
            .ok_or_else(|| RequestError::NoSuchTask(task).into())
    }

    fn associate_task(&mut self, task: TaskId, class: ClassId) -> R<()> {
        self.caps.check_class(Interface::Os, class)?;
        let threads = match self.processes.get(&task) {
            Some(all) => all.clone(),
            None if self.task_class.contains_key(&task) => vec![task],
            None => return Err(RequestError::NoSuchTask(task).into()),
        };
        for t in threads {
            self.write(format!("task {t} COS{class}"))?;
            self.task_class.insert(t, class);
        }
        Ok(())
    }

    fn tasks_of_class(&mut self, class: ClassId) -> R<Vec<TaskId>> {
        if self.fail_all_reads {
            return Err(FakeError::Injected(format!(
                "reading the tasks of COS{class}"
            )));
        }
        Ok(self
            .task_class
            .iter()
            .filter(|(_, c)| **c == class)
            .map(|(t, _)| *t)
            .collect())
    }

    /// A task may be in one group only.
    fn start_monitoring_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<FakeError>> {
        start_one_by_one(
            self,
            groups.len(),
            |b, i| b.start_task_group(&groups[i].0, groups[i].1),
            |b, id| {
                let _ = b.stop_monitoring(id);
            },
        )
    }

    fn groups(&mut self) -> R<Vec<GroupInfo>> {
        if self.fail_all_reads {
            return Err(FakeError::Injected("reading the groups".into()));
        }
        // `COS<n>` groups exist for the classes that hold a CPU or a task (resctrl makes
        // them on the first association), besides the groups added.
        let mut list = self.groups_present.clone();
        let used: std::collections::BTreeSet<ClassId> = self
            .cos
            .values()
            .chain(self.task_class.values())
            .copied()
            .filter(|c| c.get() != 0)
            .collect();
        for class in used {
            let path = format!("COS{class}");
            if !list.iter().any(|g| g.path == path) {
                list.push(GroupInfo {
                    path,
                    kind: GroupKind::Control,
                    owner: GroupOwner::Pqos,
                    class: Some(class),
                });
            }
        }
        Ok(list)
    }

    fn io_alloc(&mut self) -> R<Option<crate::IoAlloc>> {
        Ok(self.io_alloc.clone())
    }

    fn mba_ctrl(&self) -> Option<crate::MbaCtrl> {
        None
    }

    fn mbm_details(&mut self) -> R<Option<crate::MbmDetails>> {
        Ok(None)
    }

    fn set_mbm_assign_mode(&mut self, mode: crate::AssignMode) -> R<()> {
        Err(RequestError::Unsupported(format!("the fake has no MBM assign mode ({mode:?})")).into())
    }

    fn set_io_alloc(&mut self, enabled: bool) -> R<()> {
        Err(RequestError::Unsupported(format!("the fake cannot set io_alloc to {enabled}")).into())
    }

    fn set_mbm_event_config(&mut self, event: crate::RmidEvent, bits: u32) -> R<()> {
        Err(
            RequestError::Unsupported(format!("the fake cannot configure {event:?} to {bits:#x}"))
                .into(),
        )
    }

    fn exclusive_ways(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> R<Vec<crate::ExclusiveWays>> {
        let _ = (resource, domain);
        Ok(Vec::new())
    }

    fn own_classes(&mut self, classes: &[ClassId]) {
        let _ = classes;
    }
}

impl MsrOps<FakeError> for FakeBackend {
    /// Uncore groups on the MSR interface where [`Capabilities::uncore_pcie`] is set (else
    /// [`RequestError::NeedsMsrInterface`] / [`RequestError::UnsupportedEvent`]); a socket
    /// in one group only. Each poll counts [`UNCORE_COUNTS_PER_POLL`] × (socket + 1) per
    /// socket.
    fn start_uncore_monitoring(&mut self, sockets: &[u32], events: MonEvents) -> R<MonGroupId> {
        if sockets.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        if !self.caps.uncore_pcie || !MonEvents::UNCORE.contains(events) {
            return Err(RequestError::UnsupportedEvent {
                event: events,
                needed_for: None,
            }
            .into());
        }
        for &s in sockets {
            if !self.topology().packages().contains(&s) {
                return Err(RequestError::NoSuchDomain {
                    resource: "socket",
                    domain: CacheDomain::new(s),
                    known: None,
                }
                .into());
            }
            if self.uncore.values().any(|g| g.sockets.contains(&s)) {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("socket {s}"),
                    by: None,
                }
                .into());
            }
        }
        self.write(format!("start uncore {sockets:?} {events:?}"))?;
        let id = MonGroupId(self.next_group);
        self.next_group += 1;
        let since = self.now();
        self.uncore.insert(
            id,
            UncoreGroup {
                sockets: sockets.to_vec(),
                events,
                values: MonValues::default(),
                since,
            },
        );
        Ok(id)
    }

    /// As CPUID says (the fake has no IA32_MBA_CFG).
    fn mba_thread_throttle(&mut self, domain: CacheDomain) -> R<Option<crate::ThreadThrottle>> {
        let _ = domain;
        Ok(self
            .caps
            .mba
            .get()
            .and_then(crate::MbaCaps::thread_throttle))
    }

    fn needs_reset(&self) -> Option<String> {
        None
    }

    fn set_mbm_event_config(&mut self, event: crate::RmidEvent, bits: u32) -> R<()> {
        Err(
            RequestError::Unsupported(format!("the fake cannot configure {event:?} to {bits:#x}"))
                .into(),
        )
    }
}

impl NamedClasses<FakeError> for FakeBackend {
    /// The class `name` stands for, else the lowest free one (bound, not yet claimed).
    fn class_named(&mut self, name: &str) -> R<ClassId> {
        if let Some((c, _)) = self.names.iter().find(|(_, n)| *n == name) {
            return Ok(*c);
        }
        let taken: Vec<ClassId> = self.names.keys().copied().collect();
        let class = crate::transaction::free_classes(self, &taken)?
            .first()
            .copied()
            .ok_or_else(|| RequestError::Unsupported(format!("no free class for {name}")))?;
        self.names.insert(class, name.to_owned());
        Ok(class)
    }

    fn bind_class(&mut self, class: ClassId, name: &str) -> R<()> {
        self.names.retain(|_, n| n != name);
        self.names.insert(class, name.to_owned());
        Ok(())
    }

    fn class_names(&self) -> Vec<(ClassId, String)> {
        self.names.iter().map(|(c, n)| (*c, n.clone())).collect()
    }

    /// The claimed names (a write, `claim NAME COS<n>`).
    fn own_class_names(&self) -> Vec<(ClassId, String)> {
        self.names
            .iter()
            .filter(|(_, n)| self.own.contains(*n))
            .map(|(c, n)| (*c, n.clone()))
            .collect()
    }

    /// Binds and claims the name: a write, `claim NAME COS<n>`.
    fn claim_class(&mut self, class: ClassId, name: &str, make_group: bool) -> R<()> {
        let _ = make_group;
        self.write(format!("claim {name} COS{class}"))?;
        NamedClasses::bind_class(self, class, name)?;
        self.own.insert(name.to_owned());
        Ok(())
    }

    /// Unbinds and gives up the name: a write, `release NAME COS<n>`.
    fn release_class(&mut self, class: ClassId, name: &str) -> R<()> {
        self.write(format!("release {name} COS{class}"))?;
        self.names.retain(|_, n| n != name);
        self.own.remove(name);
        Ok(())
    }
}

impl Writers<FakeError> for FakeBackend {
    fn run_dir(&self) -> Option<&std::path::Path> {
        self.run_dir.as_deref()
    }

    fn hold_writers(&mut self) -> R<()> {
        self.writers_held += 1;
        Ok(())
    }

    fn release_writers(&mut self) {
        self.writers_held = self.writers_held.saturating_sub(1);
    }
}

impl crate::IoRdtOps<FakeError> for FakeBackend {
    fn io_channels(&self) -> Vec<crate::IoChannelInfo> {
        self.io_channels
            .iter()
            .flat_map(BTreeMap::keys)
            .map(|&id| crate::IoChannelInfo {
                id,
                rmid_tagging: true,
                clos_tagging: true,
            })
            .collect()
    }

    fn io_devices(&self) -> Vec<crate::IoDeviceInfo> {
        vec![crate::IoDeviceInfo {
            segment: 0,
            bdf: 0x1600,
            channels: self
                .io_channels
                .iter()
                .flat_map(BTreeMap::keys)
                .map(|&id| (id, false))
                .collect(),
        }]
    }

    fn channel_class(&mut self, channel: crate::ChannelId) -> R<Option<ClassId>> {
        if self.fail_all_reads {
            return Err(FakeError::Injected(format!("reading channel {channel}")));
        }
        self.io_channels
            .as_ref()
            .and_then(|c| c.get(&channel).copied())
            .ok_or_else(|| RequestError::IoRdt(format!("no channel {channel}")).into())
    }

    fn set_channel_class(&mut self, channel: crate::ChannelId, class: Option<ClassId>) -> R<()> {
        self.channel_class(channel)?;
        let shown = class.map_or_else(|| "none".to_owned(), |c| format!("COS{c}"));
        self.write(format!("channel {channel} {shown}"))?;
        if let Some(c) = self.io_channels.as_mut().and_then(|c| c.get_mut(&channel)) {
            *c = class;
        }
        Ok(())
    }

    fn channel_rmid(&mut self, channel: crate::ChannelId) -> R<Option<Rmid>> {
        self.channel_class(channel).map(|_| None)
    }

    fn set_channel_rmid(&mut self, channel: crate::ChannelId, _rmid: Rmid) -> R<()> {
        Err(RequestError::Unsupported(format!("the fake has no RMID tags ({channel})")).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BackendExt, CacheBitmask};

    /// A MiB, in bytes, as a float (rates).
    const MIB_F: f64 = 1_048_576.0;

    #[test]
    fn masks_are_full_after_creation() {
        let b = FakeBackend::broadwell_2s();
        assert_eq!(
            b.l3_mask(1, 15),
            CatMask::Unified(CacheBitmask::new(0xfffff).unwrap())
        );
    }

    #[test]
    fn the_nth_write_fails_once_and_changes_nothing() {
        // arrange
        let mut b = FakeBackend::intel_1s();
        b.fail_nth_write(2);
        // act
        let first = b.associate(LogicalCpu::new(1), ClassId::new(1));
        let second = b.associate(LogicalCpu::new(2), ClassId::new(1));
        let third = b.associate(LogicalCpu::new(3), ClassId::new(1));
        // assert
        assert!(first.is_ok() && third.is_ok());
        assert!(matches!(second, Err(FakeError::Injected(_))));
        assert_eq!([1, 2, 3].map(|c| b.class_of_cpu(c)), [1, 0, 1]);
        assert_eq!(b.writes, ["assoc 1 COS1", "assoc 3 COS1"]);
    }

    #[test]
    fn invalid_requests_use_the_librarys_words() {
        let mut b = FakeBackend::broadwell_2s();
        let e = b
            .associate(LogicalCpu::new(99), ClassId::new(1))
            .unwrap_err();
        assert_eq!(
            e,
            FakeError::Request(RequestError::NoSuchCpu(LogicalCpu::new(99)))
        );
        let e = b
            .start_monitoring_tasks(&[TaskId::new(1)], MonEvents::LLC_OCCUPANCY)
            .unwrap_err();
        assert!(matches!(
            e,
            FakeError::Request(RequestError::NeedsOsInterface { .. })
        ));
    }

    #[test]
    fn monitoring_goes_through_the_accumulator_from_the_reading_at_start() {
        // arrange
        let mut b = FakeBackend::broadwell_2s().with_manual_clock();
        let cpus: CpuSet = "11-12".parse().unwrap(); // one CPU in each L3 domain
        let g = b.start_monitoring(&cpus, MonEvents::PQOS_ALL).unwrap();
        assert!(b.values(g).is_none(), "no poll yet");
        // act: the first poll, half a second after the start
        b.advance(Duration::from_millis(500));
        b.poll().unwrap();
        // assert: the first poll's traffic over the time since start, not a zero baseline
        let v = b.values(g).unwrap().clone();
        assert_eq!(v.interval, Duration::from_millis(500));
        assert_eq!(v.mbm_local_delta_bytes, Some(2 * 100 * MIB), "first poll");
        assert_eq!(v.mbm_remote_delta_bytes, Some(2 * 50 * MIB));
        assert_eq!(v.mbm_local_bytes, Some(2 * 100 * MIB), "counted from start");
        assert_eq!(v.mbm_local_bytes_per_s(), Some(400.0 * MIB_F));
        assert_eq!(v.mbm_remote_bytes_per_s(), Some(200.0 * MIB_F));
        assert_eq!(v.ipc(), Some(2.0));
        assert_eq!(v.llc_misses_delta, Some(2_000_000));
        assert_eq!(v.llc_occupancy_bytes, Some((12 + 13) * MIB));
        // the second poll: since the first
        b.advance(Duration::from_secs(2));
        b.poll().unwrap();
        let v = b.values(g).unwrap().clone();
        assert_eq!(v.interval, Duration::from_secs(2));
        assert_eq!(v.mbm_local_delta_bytes, Some(2 * 100 * MIB));
        assert_eq!(v.mbm_local_bytes, Some(4 * 100 * MIB));
        assert_eq!(v.mbm_local_bytes_per_s(), Some(100.0 * MIB_F));
        assert_eq!(v.domains.len(), 2);
        assert_eq!(
            v.bytes_per_s(v.domains[0].mbm_total_delta_bytes),
            Some(75.0 * MIB_F)
        );
        b.stop_monitoring(g).unwrap();
        assert_eq!(b.rmid_of_cpu(11), 0);
    }

    #[test]
    fn a_poll_without_time_passing_has_no_rate_rather_than_nan() {
        let mut b = FakeBackend::broadwell_2s().with_manual_clock();
        let g = b
            .start_monitoring(&"0".parse().unwrap(), MonEvents::MBM_LOCAL)
            .unwrap();
        b.poll().unwrap(); // the manual clock did not move
        let v = b.values(g).unwrap();
        assert_eq!(v.interval, Duration::ZERO);
        assert_eq!(
            v.mbm_local_delta_bytes,
            Some(100 * MIB),
            "the traffic is known"
        );
        assert_eq!(v.mbm_local_bytes_per_s(), None, "its rate is not");
        assert_eq!(v.mbm_total_bytes_per_s(), None, "not monitored");
    }

    #[test]
    fn an_uncore_group_first_poll_counts_since_its_start_over_the_time_since_start() {
        let mut b = FakeBackend::broadwell_2s().with_manual_clock();
        b.reconfigure(|c| c.uncore_pcie = true);
        let g = BackendExt::start_uncore_monitoring(&mut b, &[0], MonEvents::UNCORE).unwrap();
        b.advance(Duration::from_secs(3));
        b.poll().unwrap();
        let v = b.values(g).unwrap();
        assert_eq!(v.interval, Duration::from_secs(3));
        assert_eq!(v.uncore.and_then(|u| u.llc_miss_pcie_read), Some(1000));
        b.advance(Duration::from_secs(1));
        b.poll().unwrap();
        assert_eq!(b.values(g).unwrap().interval, Duration::from_secs(1));
    }

    /// The default batch start is all or none: a failing third group stops the two the
    /// batch started, and the error names the third.
    #[test]
    fn a_batch_start_that_fails_stops_what_it_started() {
        let mut b = FakeBackend::broadwell_2s();
        let set = |s: &str| -> CpuSet { s.parse().unwrap() };
        let ev = MonEvents::LLC_OCCUPANCY;
        let e = b
            .start_monitoring_many(&[(set("1"), ev), (set("2"), ev), (set("2-3"), ev)])
            .unwrap_err();
        assert_eq!(e.index, 2);
        assert_eq!(e.of, 3);
        assert!(
            matches!(
                e.error,
                FakeError::Request(RequestError::AlreadyMonitored { .. })
            ),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("monitoring group 3 of 3: CPU 2"),
            "{e}"
        );
        assert_eq!(b.running_groups(), 0);
        assert_eq!([1, 2].map(|c| b.rmid_of_cpu(c)), [0, 0]);
        let mut mon = b.monitoring();
        let ids = mon.start_many(&[(set("1"), ev), (set("4-5"), ev)]).unwrap();
        assert_eq!(mon.groups(), ids);
        drop(mon);
        assert_eq!(b.running_groups(), 0);
    }
}

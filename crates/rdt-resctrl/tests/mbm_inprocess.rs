//! AMD ABMC and BMEC, Intel SNC, through the resctrl backend on the simulated platform's
//! kernel-faithful resctrl served in-process (`rdt_sim::inprocess`: no FUSE, no root):
//! `turin` (ABMC, 32 counters per L3 domain, `mbm_event` mode at mount), `genoa` (BMEC
//! files, no ABMC), `sapphire-rapids-snc2` (two SNC nodes per L3).
//! Also the batch start of monitor groups (`start_monitoring_many`): its file operations,
//! its checks before any group is made, all or none.
#![allow(clippy::tests_outside_test_module)]
#![allow(clippy::unwrap_used)]

mod common;
use common::Sleeper;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rdt_core::{
    AssignMode, Backend, BackendExt, CpuSet, EventConfig, MonEvents, MountOptions, NoPmu,
    RequestError, RmidEvent, TaskId,
};
use rdt_resctrl::{
    FsLock, PositionedRead, ResctrlBackend, ResctrlError, ResctrlFs, ResctrlOptions,
};
use rdt_sim::inprocess::InProcessResctrl;
use rdt_sim::{SimHandle, SimPlatform};

struct Sim {
    handle: SimHandle,
    resctrl: InProcessResctrl,
    files: Arc<dyn ResctrlFs>,
}

impl Sim {
    fn new(model: &str) -> Self {
        let handle = SimHandle::new(SimPlatform::builtin(model).unwrap());
        let resctrl = InProcessResctrl::new(handle.clone()).unwrap();
        resctrl.remount(&MountOptions::default()).unwrap();
        let files = resctrl.files();
        Self {
            handle,
            resctrl,
            files,
        }
    }

    fn open(&self) -> ResctrlBackend {
        self.open_with(self.resctrl.files())
    }

    /// The backend over `files` (a [`Counting`] wrapper of this platform's).
    fn open_with(&self, files: Arc<dyn ResctrlFs>) -> ResctrlBackend {
        let (topo, caps) = {
            let p = self.handle.lock();
            (p.topology().clone(), p.capabilities().clone())
        };
        let opts = ResctrlOptions::new("/sys/fs/resctrl")
            .files(files)
            .mount_control(self.resctrl.mount_control());
        ResctrlBackend::open(opts, topo, Some(caps), NoPmu).unwrap()
    }

    fn read(&self, rel: &str) -> String {
        self.files
            .read(rel)
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        self.files
            .write(rel, text.as_bytes())
            .unwrap_or_else(|e| panic!("{rel} <- {text}: {e}"));
    }

    fn mon_groups(&self) -> Vec<String> {
        self.files.subdirs("mon_groups").unwrap()
    }
}

/// The platform's files, counting the operations whose number a batch start bounds:
/// listings of a `mon_groups` directory, reads of a `cpus_list` or `tasks` file, `mkdir`s,
/// and the positioned reads of each `mon_data` counter file opened, by file name. The `mkdir`
/// numbered `fail_mkdir` (0-based, counting from the last reset) fails with EIO.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ResctrlFs>,
    mon_group_listings: AtomicUsize,
    member_reads: AtomicUsize,
    mkdirs: AtomicUsize,
    fail_mkdir: AtomicUsize,
    counter_reads: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
}

/// A counter file whose reads [`Counting`] counts.
#[derive(Debug)]
struct CountedReader {
    inner: Box<dyn PositionedRead>,
    event: String,
    reads: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
}

impl PositionedRead for CountedReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        *self
            .reads
            .lock()
            .unwrap()
            .entry(self.event.clone())
            .or_default() += 1;
        self.inner.read_at(buf, offset)
    }
}

impl Counting {
    fn new(inner: Arc<dyn ResctrlFs>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            mon_group_listings: AtomicUsize::new(0),
            member_reads: AtomicUsize::new(0),
            mkdirs: AtomicUsize::new(0),
            fail_mkdir: AtomicUsize::new(usize::MAX),
            counter_reads: Arc::default(),
        })
    }

    fn reset(&self) {
        for c in [&self.mon_group_listings, &self.member_reads, &self.mkdirs] {
            c.store(0, Ordering::SeqCst);
        }
        self.counter_reads.lock().unwrap().clear();
    }

    /// Reads of counter files since the last reset, by file name (`mbm_local_bytes`, ...).
    fn counter_reads(&self) -> std::collections::BTreeMap<String, usize> {
        self.counter_reads.lock().unwrap().clone()
    }

    /// (mon_groups listings, cpus_list and tasks reads, mkdirs) since the last reset.
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.mon_group_listings.load(Ordering::SeqCst),
            self.member_reads.load(Ordering::SeqCst),
            self.mkdirs.load(Ordering::SeqCst),
        )
    }
}

impl ResctrlFs for Counting {
    fn read(&self, rel: &str) -> io::Result<String> {
        if rel.ends_with("cpus_list") || rel.ends_with("tasks") {
            self.member_reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.read(rel)
    }
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<usize> {
        self.inner.write(rel, data)
    }
    fn mkdir(&self, rel: &str) -> io::Result<()> {
        let n = self.mkdirs.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_mkdir.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(5)); // EIO
        }
        self.inner.mkdir(rel)
    }
    fn rmdir(&self, rel: &str) -> io::Result<()> {
        self.inner.rmdir(rel)
    }
    fn subdirs(&self, rel: &str) -> io::Result<Vec<String>> {
        if rel.trim_end_matches('/').ends_with("mon_groups") {
            self.mon_group_listings.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.subdirs(rel)
    }
    fn exists(&self, rel: &str) -> bool {
        self.inner.exists(rel)
    }
    fn is_dir(&self, rel: &str) -> bool {
        self.inner.is_dir(rel)
    }
    fn open_reader(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>> {
        Ok(Box::new(CountedReader {
            inner: self.inner.open_reader(rel)?,
            event: rel.rsplit('/').next().unwrap_or_default().to_owned(),
            reads: self.counter_reads.clone(),
        }))
    }
    fn open_lock(&self, rel: &str) -> io::Result<Box<dyn FsLock>> {
        self.inner.open_lock(rel)
    }
}

/// The first `n` CPUs of L3 domain `domain`, each a group of its own counting `events`.
fn one_group_per_cpu(
    b: &ResctrlBackend,
    domain: u32,
    n: usize,
    events: MonEvents,
) -> Vec<(CpuSet, MonEvents)> {
    let v: Vec<_> = b
        .topology()
        .cpus()
        .iter()
        .filter(|p| p.l3.is_some_and(|d| d.get() == domain))
        .take(n)
        .map(|p| (std::iter::once(p.cpu).collect(), events))
        .collect();
    assert_eq!(v.len(), n, "domain {domain} has {n} CPUs");
    v
}

fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

fn mbm() -> MonEvents {
    MonEvents::MBM_LOCAL | MonEvents::MBM_TOTAL
}

/// The first CPU of each of the first `n` L3 domains.
fn one_cpu_per_domain(b: &ResctrlBackend, n: usize) -> Vec<u32> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for p in b.topology().cpus() {
        let l3 = p.l3.unwrap().get();
        if !seen.contains(&l3) {
            seen.push(l3);
            out.push(p.cpu.get());
        }
    }
    out.truncate(n);
    out
}

/// ABMC (`fs/resctrl/monitor.c` `mbm_L3_assignments_write`): a CPU group gets counters in
/// its own L3 domain only, for the events it counts, and reads bytes, never `Unassigned`.
/// On today's code the kernel's mkdir default (every domain) held 2 counters per domain per
/// group, so the 16th group of the run had none anywhere and read blank.
#[test]
fn turin_cpu_groups_get_counters_in_their_domain_only_and_read_bytes() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    let firsts = one_cpu_per_domain(&b, 8);
    let mut groups = Vec::new();
    // Two groups per domain, 16 in all: more than the 15 the kernel's default would allow.
    for &c in &firsts {
        for cpu in [c, c + 1] {
            groups.push((
                cpu,
                b.start_monitoring(&cpus(&cpu.to_string()), mbm()).unwrap(),
            ));
        }
    }
    let dirs = sim.mon_groups();
    assert_eq!(dirs.len(), 16);
    let a = sim.read(&format!("mon_groups/{}/mbm_L3_assignments", dirs[0]));
    assert_eq!(
        a.lines()
            .map(|l| l.matches("=e").count())
            .collect::<Vec<_>>(),
        [1, 1],
        "one counter per event, in the group's own domain: {a}"
    );
    let avail = sim.read("info/L3_MON/available_mbm_cntrs");
    // 32 per domain, the root's 2, and 2 groups x 2 events.
    assert!(avail.starts_with("0=26;"), "{avail}");
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    let busy: Vec<_> = groups
        .iter()
        .filter(|(_, g)| {
            let v = b.values(*g).unwrap();
            v.mbm_local_delta_bytes.is_some_and(|x| x > 0)
                && v.mbm_total_delta_bytes.is_some_and(|x| x > 0)
        })
        .collect();
    assert!(
        busy.len() >= 2,
        "at least two groups with traffic show bytes: {:?}",
        groups
            .iter()
            .map(|(c, g)| (c, b.values(*g).unwrap().mbm_local_delta_bytes))
            .collect::<Vec<_>>()
    );
    for (_, g) in &groups {
        let v = b.values(*g).unwrap();
        assert!(
            v.mbm_local_delta_bytes.is_some() && v.mbm_total_delta_bytes.is_some(),
            "{v:?}"
        );
    }
    for (_, g) in groups {
        b.stop_monitoring(g).unwrap();
    }
    assert!(sim.mon_groups().is_empty());
    assert!(
        sim.read("info/L3_MON/available_mbm_cntrs")
            .starts_with("0=30;"),
        "stopping gives the counters back"
    );
}

/// Another tool's 15 groups took the counters the kernel gives on mkdir (2 per domain
/// each; 32 per domain with the root's 2): a start needing one is refused before its
/// group is made (`available_mbm_cntrs` reads 0 there), naming the counters per domain
/// and the holders.
#[test]
fn out_of_counters_names_the_holders_and_leaves_no_group() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    for i in 0..15 {
        sim.files.mkdir(&format!("mon_groups/other{i}")).unwrap();
    }
    assert!(
        sim.read("info/L3_MON/available_mbm_cntrs")
            .starts_with("0=0;")
    );
    let before = sim.mon_groups();
    let e = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            ResctrlError::NotEnoughMbmCounters {
                needed: 1,
                available: 0,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("only 0 of its 32 are free"), "{msg}");
    assert!(
        msg.contains("/ (2), mon_groups/other0 (2) (foreign)"),
        "{msg}"
    );
    assert_eq!(sim.mon_groups(), before, "no group is made");
    // Freed by the other tool: the same start works.
    sim.write(
        "mon_groups/other0/mbm_L3_assignments",
        "mbm_local_bytes:0=_\n",
    );
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap();
    b.stop_monitoring(g).unwrap();
}

/// A counter taken away after the start (another tool's `mbm_L3_assignments` write) makes
/// the poll fail naming the file, instead of a blank or 0.
#[test]
fn an_unassigned_counter_of_our_group_is_an_error_not_a_blank() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    // A group counting occupancy only gives back what the kernel assigned on mkdir.
    let llc = b
        .start_monitoring(&cpus("1"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let held = sim.read(&format!(
        "mon_groups/{}/mbm_L3_assignments",
        sim.mon_groups()[0]
    ));
    assert!(!held.contains("=e"), "{held}");
    b.stop_monitoring(llc).unwrap();
    let g = b.start_monitoring(&cpus("0"), mbm()).unwrap();
    b.poll().unwrap();
    let dir = &sim.mon_groups()[0];
    sim.write(
        &format!("mon_groups/{dir}/mbm_L3_assignments"),
        "mbm_local_bytes:*=_\n",
    );
    let e = b.poll().unwrap_err();
    assert!(matches!(e, ResctrlError::Unassigned { .. }), "{e}");
    assert!(
        e.to_string().contains("mbm_local_bytes reads `Unassigned`"),
        "{e}"
    );
    b.stop_monitoring(g).unwrap();
}

/// `mbm_details`: ABMC's mode and counters on turin, its event filters; BMEC per domain on
/// genoa; SNC nodes on sapphire-rapids-snc2; nothing on an older Intel part.
#[test]
fn details_show_abmc_bmec_and_snc() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    let d = b.mbm_details().unwrap().unwrap();
    let a = d.assign.unwrap();
    assert_eq!(a.mode, AssignMode::MbmEvent);
    assert!(a.counters.iter().all(|(_, n)| *n == 32), "{:?}", a.counters);
    assert!(a.available.unwrap().iter().all(|(_, n)| *n == 30));
    assert_eq!(a.on_mkdir, Some(true));
    assert_eq!(
        d.event_configs,
        [
            (RmidEvent::MbmTotal, EventConfig::Filter(0x7f)),
            (RmidEvent::MbmLocal, EventConfig::Filter(0x15)),
        ]
    );
    assert_eq!(d.snc_nodes_per_l3, None);

    let genoa = Sim::new("genoa");
    let d = genoa.open().mbm_details().unwrap().unwrap();
    assert!(d.assign.is_none());
    let EventConfig::PerDomain(v) = &d.event_configs[0].1 else {
        panic!("{d:?}")
    };
    assert!(v.iter().all(|(_, b)| *b == 0x7f), "{v:?}");

    let snc = Sim::new("sapphire-rapids-snc2");
    let d = snc.open().mbm_details().unwrap().unwrap();
    assert_eq!(d.snc_nodes_per_l3, Some(2));
    assert!(d.event_configs.is_empty() && d.assign.is_none());

    let old = Sim::new("broadwell-ep");
    assert!(old.open().mbm_details().unwrap().unwrap().is_empty());
}

/// BMEC (`mon_config_write`) on genoa and ABMC's `event_filter` on turin: set, read back,
/// and `reset_allocation` (`pqos -R`) puts the defaults back.
#[test]
fn bmec_and_event_filter_round_trip_and_reset_restores_defaults() {
    let genoa = Sim::new("genoa");
    let mut b = genoa.open();
    b.set_mbm_event_config(RmidEvent::MbmTotal, 0x33).unwrap();
    b.set_mbm_event_config(RmidEvent::MbmLocal, 0x01).unwrap();
    let t = genoa.read("info/L3_MON/mbm_total_bytes_config");
    assert!(t.split(';').all(|x| x.trim().ends_with("=0x33")), "{t}");
    assert!(
        genoa
            .read("info/L3_MON/mbm_local_bytes_config")
            .starts_with("0=0x01;")
    );
    let e = b
        .set_mbm_event_config(RmidEvent::MbmTotal, 0x80)
        .unwrap_err();
    assert!(e.to_string().contains("only bits 0-6"), "{e}");
    b.reset_allocation(&rdt_core::AllocReset::default())
        .unwrap();
    let t = genoa.read("info/L3_MON/mbm_total_bytes_config");
    assert!(t.split(';').all(|x| x.trim().ends_with("=0x7f")), "{t}");
    assert!(
        genoa
            .read("info/L3_MON/mbm_local_bytes_config")
            .starts_with("0=0x15;")
    );

    let turin = Sim::new("turin");
    let mut b = turin.open();
    b.set_mbm_event_config(RmidEvent::MbmLocal, 0x03).unwrap();
    assert_eq!(
        turin.read("info/L3_MON/event_configs/mbm_local_bytes/event_filter"),
        "local_reads,remote_reads\n"
    );
    b.reset_allocation(&rdt_core::AllocReset::default())
        .unwrap();
    assert_eq!(
        turin.read("info/L3_MON/event_configs/mbm_local_bytes/event_filter"),
        "local_reads,local_non_temporal_writes,local_reads_slow_memory\n"
    );

    let intel = Sim::new("broadwell-ep");
    let e = intel
        .open()
        .set_mbm_event_config(RmidEvent::MbmTotal, 0x7f)
        .unwrap_err();
    assert!(e.to_string().contains("needs AMD BMEC"), "{e}");
}

/// Starting a group reads its counters, so the first poll after it has the traffic since
/// the start: exactly what the kernel's counter files counted over the simulated second
/// between them, and its rate over the time since the start.
#[test]
fn the_first_poll_after_start_has_the_traffic_since_the_start() {
    // arrange: CPUs 2-3 (one per socket) of the pipeline workload
    let sim = Sim::new("broadwell-ep");
    let mut b = sim.open();
    let g = b.start_monitoring(&cpus("2-3"), mbm()).unwrap();
    let dir = format!("mon_groups/{}/mon_data", sim.mon_groups()[0]);
    let counted = |event: &str| -> u64 {
        (0..2)
            .map(|d| {
                let t = sim.read(&format!("{dir}/mon_L3_{d:02}/{event}"));
                t.trim().parse::<u64>().unwrap()
            })
            .sum()
    };
    let (local0, total0) = (counted("mbm_local_bytes"), counted("mbm_total_bytes"));
    // act
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    // assert
    let (local, total) = (
        counted("mbm_local_bytes") - local0,
        counted("mbm_total_bytes") - total0,
    );
    assert!(
        local > 0 && total > local,
        "the workload moves memory: {local} {total}"
    );
    let v = b.values(g).unwrap();
    assert_eq!(
        v.mbm_local_delta_bytes,
        Some(local),
        "not a zero first sample"
    );
    assert_eq!(v.mbm_total_delta_bytes, Some(total));
    assert_eq!(v.mbm_total_bytes, Some(total), "cumulative from the start");
    assert!(v.interval > Duration::ZERO, "the time since the start");
    assert_eq!(
        v.mbm_local_bytes_per_s(),
        rdt_core::monitor::bytes_per_s(local, v.interval)
    );
    assert!(v.mbm_local_bytes_per_s().is_some_and(f64::is_finite));
    b.stop_monitoring(g).unwrap();
}

/// SNC (`mon_event_count`): a group's `mon_L3_XX` value is the sum of its SNC nodes'
/// `mon_sub_L3_YY` files, and the backend's value is that sum.
#[test]
fn snc_group_values_are_the_sum_of_the_sub_domains() {
    let sim = Sim::new("sapphire-rapids-snc2");
    let mut b = sim.open();
    let all: CpuSet = b
        .topology()
        .cpus()
        .iter()
        .filter(|p| p.l3.is_some_and(|d| d.get() == 0))
        .map(|p| p.cpu)
        .collect();
    let g = b
        .start_monitoring(&all, MonEvents::MBM_TOTAL | MonEvents::LLC_OCCUPANCY)
        .unwrap();
    b.poll().unwrap();
    let dir = format!("mon_groups/{}/mon_data/mon_L3_00", sim.mon_groups()[0]);
    let subs: Vec<String> = sim
        .files
        .subdirs(&dir)
        .unwrap()
        .into_iter()
        .filter(|s| s.starts_with("mon_sub_L3_"))
        .collect();
    assert_eq!(subs.len(), 2, "{subs:?}");
    let num = |t: String| t.trim().parse::<u64>().unwrap();
    let sum = || -> u64 {
        subs.iter()
            .map(|s| num(sim.read(&format!("{dir}/{s}/mbm_total_bytes"))))
            .sum()
    };
    let before = sum();
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    let after = sum();
    assert!(after > before, "traffic on the L3's CPUs");
    assert_eq!(
        num(sim.read(&format!("{dir}/mbm_total_bytes"))),
        after,
        "mon_L3_00 = sum of its nodes"
    );
    let v = b.values(g).unwrap();
    let d0 = v.domains.iter().find(|d| d.domain.get() == 0).unwrap();
    assert_eq!(d0.mbm_total_delta_bytes, Some(after - before), "{d0:?}");
    b.stop_monitoring(g).unwrap();
}

/// Starting 64 groups at once lists the monitor groups and reads each existing group's
/// `cpus_list` once for the batch. One start per group (the code before the batch start)
/// listed `mon_groups` twice per group (128 times here) and read the `cpus_list` of every
/// group made so far for each new one (over 2000 reads).
#[test]
fn a_batch_of_64_groups_lists_resctrl_once_not_once_per_group() {
    let sim = Sim::new("genoa");
    sim.files.mkdir("mon_groups/other").unwrap();
    let files = Counting::new(sim.resctrl.files());
    let mut b = sim.open_with(files.clone());
    let mut groups = Vec::new();
    for d in 0..8 {
        groups.extend(one_group_per_cpu(
            &b,
            d,
            8,
            MonEvents::LLC_OCCUPANCY | mbm(),
        ));
    }
    files.reset();
    let ids = b.start_monitoring_many(&groups).unwrap();
    let (listings, cpus_reads, mkdirs) = files.counts();
    assert_eq!(ids.len(), 64);
    assert!(listings <= 2, "mon_groups listed {listings} times");
    assert!(cpus_reads <= 2, "cpus_list read {cpus_reads} times");
    assert_eq!(mkdirs, 64);
    // the reading at start: each group's MBM files once (one L3 domain each), no occupancy
    assert_eq!(
        files.counter_reads(),
        [
            ("mbm_local_bytes".to_owned(), 64),
            ("mbm_total_bytes".to_owned(), 64)
        ]
        .into(),
    );
    let dirs = sim.mon_groups();
    assert_eq!(dirs.len(), 65);
    let first = groups[0].0.to_string();
    assert!(
        dirs.iter()
            .any(|d| sim.read(&format!("mon_groups/{d}/cpus_list")).trim() == first)
    );
    b.poll().unwrap();
    assert!(b.values(ids[63]).unwrap().llc_occupancy_bytes.is_some());
    for id in ids {
        b.stop_monitoring(id).unwrap();
    }
    assert_eq!(sim.mon_groups(), ["other"]);
}

/// All or none: when the 6th directory cannot be made, the 5 made before are removed and
/// the error names the 6th group; a CPU in two groups of one request is refused before
/// anything is made.
#[test]
fn a_batch_that_fails_midway_removes_what_it_made_and_names_the_group() {
    let sim = Sim::new("genoa");
    let files = Counting::new(sim.resctrl.files());
    let mut b = sim.open_with(files.clone());
    let groups = one_group_per_cpu(&b, 0, 8, MonEvents::LLC_OCCUPANCY);
    files.fail_mkdir.store(5, Ordering::SeqCst);
    let e = b.start_monitoring_many(&groups).unwrap_err();
    assert_eq!((e.index, e.of), (5, 8), "{e}");
    assert!(matches!(e.error, ResctrlError::Io { .. }), "{e}");
    assert!(sim.mon_groups().is_empty(), "{:?}", sim.mon_groups());
    files.fail_mkdir.store(usize::MAX, Ordering::SeqCst);

    files.reset();
    let overlap = [
        (cpus("0-1"), MonEvents::LLC_OCCUPANCY),
        (cpus("2"), MonEvents::LLC_OCCUPANCY),
        (cpus("1"), MonEvents::LLC_OCCUPANCY),
    ];
    let e = b.start_monitoring_many(&overlap).unwrap_err();
    assert_eq!(e.index, 2);
    assert!(
        matches!(
            e.error,
            ResctrlError::Request(RequestError::AlreadyMonitored { .. })
        ),
        "{e}"
    );
    assert!(
        e.error
            .to_string()
            .contains("CPU 1 is already monitored by group 1 of the same request"),
        "{e}"
    );
    assert_eq!(files.counts().2, 0, "nothing made");

    // The same groups start once nothing is in the way.
    let ids = b.start_monitoring_many(&groups).unwrap();
    assert_eq!(sim.mon_groups().len(), 8);
    for id in ids {
        b.stop_monitoring(id).unwrap();
    }
}

/// RMIDs are counted for the whole batch before any group is made: with 250 of genoa's 255
/// free RMIDs held by another tool's groups, a batch of 6 fails at its 6th group and no
/// `mkdir` is tried (one start per group made 5 and hit ENOSPC on the 6th).
#[test]
fn a_batch_beyond_the_free_rmids_is_refused_before_any_mkdir() {
    let sim = Sim::new("genoa");
    for i in 0..250 {
        sim.files.mkdir(&format!("mon_groups/other{i}")).unwrap();
    }
    let files = Counting::new(sim.resctrl.files());
    let mut b = sim.open_with(files.clone());
    let groups = one_group_per_cpu(&b, 0, 6, MonEvents::LLC_OCCUPANCY);
    files.reset();
    let e = b.start_monitoring_many(&groups).unwrap_err();
    assert_eq!(e.index, 5, "{e}");
    assert!(
        matches!(
            e.error,
            ResctrlError::Request(RequestError::OutOfRmids { .. })
        ),
        "{e}"
    );
    let msg = e.error.to_string();
    assert!(
        msg.contains("the 6 new monitor groups asked for: 5 of resctrl's 255"),
        "{msg}"
    );
    assert_eq!(files.counts().2, 0, "no mkdir tried");
    assert_eq!(sim.mon_groups().len(), 250);
    let ids = b.start_monitoring_many(&groups[..5]).unwrap();
    assert_eq!(sim.mon_groups().len(), 255);
    for id in ids {
        b.stop_monitoring(id).unwrap();
    }
}

/// ABMC: the counters a batch needs per L3 domain are counted against
/// `available_mbm_cntrs` before any group is made. On turin (32 per domain) the root holds
/// 2 and another tool's 10 groups 20, so 10 are free in domain 0: 8 groups counting both
/// MBM events there need 16, and the 6th is the first that does not fit. Nothing is made
/// and the error gives both numbers and the holders; one start per group made 5 groups
/// and failed at the 6th.
#[test]
fn a_batch_needing_more_mbm_counters_than_free_is_refused_up_front() {
    let sim = Sim::new("turin");
    for i in 0..10 {
        sim.files.mkdir(&format!("mon_groups/other{i}")).unwrap();
    }
    let files = Counting::new(sim.resctrl.files());
    let mut b = sim.open_with(files.clone());
    let avail = sim.read("info/L3_MON/available_mbm_cntrs");
    assert!(avail.starts_with("0=10;"), "{avail}");
    let groups = one_group_per_cpu(&b, 0, 8, mbm());
    files.reset();
    let e = b.start_monitoring_many(&groups).unwrap_err();
    assert_eq!(e.index, 5, "{e}");
    let msg = e.error.to_string();
    assert!(
        matches!(
            e.error,
            ResctrlError::NotEnoughMbmCounters {
                groups: 8,
                domain: 0,
                needed: 16,
                available: 10,
                per_domain: 32,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("L3 domain 0 (8) need 16 of its counters"),
        "{msg}"
    );
    assert!(msg.contains("only 10 of its 32 are free"), "{msg}");
    assert!(
        msg.contains("/ (2), mon_groups/other0 (2) (foreign)"),
        "{msg}"
    );
    assert_eq!(files.counts().2, 0, "no mkdir tried");
    assert_eq!(sim.mon_groups().len(), 10);
    assert_eq!(sim.read("info/L3_MON/available_mbm_cntrs"), avail);
    // 5 fit; groups counting occupancy only need none.
    let fit: Vec<_> = groups
        .iter()
        .enumerate()
        .map(|(i, (c, ev))| {
            (
                c.clone(),
                if i < 5 { *ev } else { MonEvents::LLC_OCCUPANCY },
            )
        })
        .collect();
    let ids = b.start_monitoring_many(&fit).unwrap();
    assert!(
        sim.read("info/L3_MON/available_mbm_cntrs")
            .starts_with("0=0;")
    );
    for id in ids {
        b.stop_monitoring(id).unwrap();
    }
}

/// Task groups count in every L3 domain: on turin 16 of them need 32 counters per domain
/// where 30 are free, so the batch is refused at its 16th group before any `mkdir` (one
/// start per group made 15 and failed at the 16th). 15 start, reading the monitor groups'
/// `tasks` once for the batch, not once per group.
#[test]
fn a_task_batch_checks_counters_up_front_and_reads_tasks_once() {
    let sim = Sim::new("turin");
    sim.files.mkdir("mon_groups/other").unwrap();
    sim.write(
        "mon_groups/other/mbm_L3_assignments",
        "mbm_total_bytes:*=_\nmbm_local_bytes:*=_\n",
    );
    let files = Counting::new(sim.resctrl.files());
    let mut b = sim.open_with(files.clone());
    let sleepers: Vec<Sleeper> = (0..16).map(|_| Sleeper::sleep()).collect();
    let groups: Vec<(Vec<TaskId>, MonEvents)> =
        sleepers.iter().map(|s| (vec![s.id()], mbm())).collect();
    files.reset();
    let e = b.start_monitoring_tasks_many(&groups).unwrap_err();
    assert_eq!(e.index, 15, "{e}");
    assert!(
        matches!(
            e.error,
            ResctrlError::NotEnoughMbmCounters {
                groups: 16,
                needed: 32,
                available: 30,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(files.counts().2, 0, "no mkdir tried");
    files.reset();
    let ids = b.start_monitoring_tasks_many(&groups[..15]).unwrap();
    let (listings, tasks_reads, mkdirs) = files.counts();
    assert!(listings <= 2, "mon_groups listed {listings} times");
    assert!(tasks_reads <= 2, "tasks read {tasks_reads} times");
    assert_eq!(mkdirs, 15);
    assert_eq!(sim.mon_groups().len(), 16);
    let e = b.start_monitoring_tasks_many(&groups[14..]).unwrap_err();
    assert_eq!(e.index, 0);
    assert!(e.error.to_string().contains("already monitored"), "{e}");
    for id in ids {
        b.stop_monitoring(id).unwrap();
    }
    assert_eq!(sim.mon_groups(), ["other"]);
}

/// `set_io_alloc` writes `info/L3/io_alloc`; the kernel refuses while a group holds the
/// highest CLOSID (`resctrl_io_alloc_write`), and the refusal carries its words.
#[test]
fn io_alloc_switches_and_the_kernels_refusal_names_the_group_holding_its_closid() {
    let sim = Sim::new("turin");
    let mut rdt = sim.open();
    rdt.set_io_alloc(true).unwrap();
    assert_eq!(sim.read("info/L3/io_alloc"), "enabled\n");
    assert!(rdt.io_alloc().unwrap().is_some_and(|io| io.enabled));
    rdt.set_io_alloc(true).unwrap(); // already: nothing written
    rdt.set_io_alloc(false).unwrap();
    assert_eq!(sim.read("info/L3/io_alloc"), "disabled\n");
    // every CLOSID taken by another tool's groups: the last holds 15
    for n in 1..=15 {
        sim.files.mkdir(&format!("g{n}")).unwrap();
    }
    let e = rdt.set_io_alloc(true).unwrap_err();
    assert!(e.to_string().contains("used by g15 group"), "{e}");
    assert_eq!(sim.read("info/L3/io_alloc"), "disabled\n");
    // the assignment mode: a no-op when current, refused when not offered
    rdt.set_mbm_assign_mode(AssignMode::MbmEvent).unwrap();
    rdt.set_mbm_assign_mode(AssignMode::Default).unwrap();
    let mode = sim.read("info/L3_MON/mbm_assign_mode");
    assert!(mode.contains("[default]"), "{mode}");
    let genoa = Sim::new("genoa");
    let e = genoa
        .open()
        .set_mbm_assign_mode(AssignMode::MbmEvent)
        .unwrap_err();
    assert!(e.to_string().contains("resctrl offers default"), "{e}");
}

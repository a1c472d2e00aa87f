//! Monitoring and leased classes cannot leak: a library user's guard stops its groups on
//! drop (and on a panic), and a run killed with SIGKILL leaves nothing behind once the
//! platform is opened again, on both interfaces: its groups, its RMIDs, the class of
//! service it leased.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rdt_pqos::lease::{ClassRequest, Lease};
use rdt_pqos::msr::regs::{IA32_PQR_ASSOC, pqr_rmid};
use rdt_pqos::{
    BackendExt, CacheDomain, CatMask, CatResource, ClassId, Iface, LogicalCpu, MonEvents, Notice,
    Rdt, Reclaimed, TaskId,
};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{SimHandle, SimPlatform};

/// The environment variable that makes [`child`] a monitoring run: `<iface> <cpus>
/// <sysroot>`.
const CHILD: &str = "RDT_TEST_RECLAIM_CHILD";

/// Not a test of its own: the process the tests below start and kill. It opens the
/// platform named in `RDT_TEST_RECLAIM_CHILD`, starts monitoring the CPUs named there, says
/// `started` on stdout and waits to be killed.
#[test]
#[ignore = "the child process of the reclaim tests"]
fn child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let mut words = spec.splitn(3, ' ');
    let (Some(iface), Some(cpus), Some(root)) = (words.next(), words.next(), words.next()) else {
        panic!("{CHILD}={spec}: want <iface> <cpus> <root>");
    };
    let mut rdt = crate::mounted(iface.parse().expect("iface"), root)
        .rdt_iface(None)
        .open()
        .expect("open");
    rdt.start_monitoring(&cpus.parse().expect("cpus"), MonEvents::LLC_OCCUPANCY)
        .expect("start");
    println!("started");
    std::thread::sleep(Duration::from_mins(2));
}

/// Starts [`child`] monitoring `cpus` on the platform under `root` and waits until its
/// group is started.
fn start_child(iface: Iface, cpus: &str, root: &std::path::Path) -> Child {
    let mut c = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "reclaim::child",
            "--ignored",
            "--nocapture",
            "--quiet",
        ])
        .env(CHILD, format!("{iface} {cpus} {}", root.display()))
        .env_remove("RDT_IFACE")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let out = c.stdout.take().expect("stdout");
    let started = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .any(|l| l == "started");
    assert!(started, "the child did not start monitoring");
    c
}

fn sigkill(mut c: Child) -> u32 {
    let pid = c.id();
    kill(
        Pid::from_raw(i32::try_from(pid).expect("pid")),
        Signal::SIGKILL,
    )
    .expect("kill");
    c.wait().expect("wait");
    pid
}

fn reclaimed(rdt: &Rdt) -> Vec<Reclaimed> {
    rdt.notices()
        .iter()
        .filter_map(|n| match n {
            Notice::Reclaimed(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn open(iface: Iface, m: &TestMount) -> Rdt {
    crate::mounted(iface, m.root())
        .rdt_iface(None)
        .open()
        .expect("open")
}

#[test]
fn resctrl_groups_of_a_killed_run_are_removed_at_the_next_open_and_live_ones_kept() {
    // arrange: a run that lives, and one that is killed (after the live one opened: every
    // open reclaims, the live run's too)
    let m = TestMount::builtin("broadwell-ep");
    let live = start_child(Iface::Os, "4-5", m.root());
    let live_group = m.path(&format!("sys/fs/resctrl/mon_groups/pqos-{}-0", live.id()));
    let dead = sigkill(start_child(Iface::Os, "2-3", m.root()));
    let group = format!("mon_groups/pqos-{dead}-0");
    assert!(
        m.path(&format!("sys/fs/resctrl/{group}")).is_dir(),
        "left behind"
    );
    // act
    let rdt = open(Iface::Os, &m);
    // assert
    assert_eq!(
        reclaimed(&rdt),
        [Reclaimed::ResctrlGroup {
            path: group.clone(),
            pid: dead
        }]
    );
    assert!(!m.path(&format!("sys/fs/resctrl/{group}")).exists());
    assert!(live_group.is_dir(), "a live run's group stays");
    drop(rdt);
    let live_pid = sigkill(live);
    let rdt = open(Iface::Os, &m);
    assert!(
        matches!(&reclaimed(&rdt)[..], [Reclaimed::ResctrlGroup { pid, .. }] if *pid == live_pid)
    );
    assert!(!live_group.exists());
}

#[test]
fn a_group_whose_creator_holds_its_lock_is_kept_even_when_its_pid_is_unknown_here() {
    // arrange: a pqos group named for a pid that does not exist in this pid namespace, held
    // by a live process (this one), as a run in another container would hold it
    let m = TestMount::builtin("broadwell-ep");
    let dir = m.path("sys/fs/resctrl/mon_groups/pqos-4194000-0");
    std::fs::create_dir(&dir).expect("mkdir");
    let held = std::fs::File::open(&dir).expect("open dir");
    held.lock_shared().expect("flock");
    // act + assert: kept while the lock is held
    assert_eq!(reclaimed(&open(Iface::Os, &m)), []);
    assert!(dir.is_dir());
    drop(held);
    assert_eq!(
        reclaimed(&open(Iface::Os, &m)),
        [Reclaimed::ResctrlGroup {
            path: "mon_groups/pqos-4194000-0".into(),
            pid: 4_194_000
        }]
    );
    assert!(!dir.exists());
}

#[test]
fn rmids_of_a_killed_msr_run_are_given_back_at_the_next_open() {
    // arrange: no resctrl, so nothing but the claim file tells who tagged the CPUs
    let sim = SimHandle::new(SimPlatform::builtin("broadwell-ep").expect("model"));
    let m = TestMount::new(
        sim.clone(),
        MountConfig {
            resctrl: None,
            clock: SimClock::WallClock,
        },
    );
    let rmid = |cpu| {
        let dev = std::fs::File::open(m.path(&format!("dev/cpu/{cpu}/msr"))).expect("msr");
        let mut b = [0u8; 8];
        dev.read_exact_at(&mut b, u64::from(IA32_PQR_ASSOC.get()))
            .expect("rdmsr");
        pqr_rmid(u64::from_le_bytes(b))
    };
    let dead = sigkill(start_child(Iface::Msr, "2-3", m.root()));
    assert_ne!(
        (rmid(2), rmid(3)),
        (0, 0),
        "the killed run's RMIDs stay on its CPUs"
    );
    // act
    let mut rdt = open(Iface::Msr, &m);
    // assert
    assert_eq!(
        reclaimed(&rdt),
        [Reclaimed::Rmids {
            cpus: "2-3".parse().expect("cpus"),
            pid: dead
        }]
    );
    assert_eq!((rmid(2), rmid(3)), (0, 0));
    assert_eq!(
        rdt.rmid_of(LogicalCpu::new(2))
            .expect("rmid")
            .map(rdt_pqos::Rmid::get),
        Some(0)
    );
    // a second open finds nothing left
    drop(rdt);
    assert_eq!(reclaimed(&open(Iface::Msr, &m)), []);
}

#[test]
fn a_dropped_guard_leaves_no_group_even_on_a_panic() {
    let m = TestMount::builtin("broadwell-ep");
    let mut rdt = open(Iface::Os, &m);
    let pqos_groups = || {
        std::fs::read_dir(m.path("sys/fs/resctrl/mon_groups"))
            .expect("mon_groups")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("pqos-"))
            })
            .count()
    };
    {
        let mut mon = rdt.monitoring();
        let g = mon
            .start(&"0-3".parse().expect("cpus"), MonEvents::LLC_OCCUPANCY)
            .expect("start");
        mon.poll().expect("poll");
        assert!(mon.values(g).is_some());
        assert_eq!(pqos_groups(), 1);
    }
    assert_eq!(pqos_groups(), 0, "stopped when the guard went");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut mon = rdt.monitoring();
        mon.start(&"4-5".parse().expect("cpus"), MonEvents::LLC_OCCUPANCY)
            .expect("start");
        panic!("a library user's bug");
    }));
    assert!(r.is_err());
    assert_eq!(pqos_groups(), 0, "stopped while unwinding");
}

/// The environment variable that makes [`lease_child`] a lease holder: `<iface> <cpus>
/// <sysroot> [<pid>]`.
const LEASE_CHILD: &str = "RDT_TEST_LEASE_CHILD";

/// Not a test of its own: the process the lease tests below start and kill. It opens the
/// platform named in `RDT_TEST_LEASE_CHILD`, takes a class with four L3 ways for the CPUs
/// named there (and puts process `<pid>` in it), says `leased <class>` on stdout and waits
/// to be killed.
#[test]
#[ignore = "the child process of the lease reclaim tests"]
fn lease_child() {
    let Ok(spec) = std::env::var(LEASE_CHILD) else {
        return;
    };
    let words: Vec<&str> = spec.split(' ').collect();
    let [iface, cpus, root, rest @ ..] = &words[..] else {
        panic!("{LEASE_CHILD}={spec}: want <iface> <cpus> <root> [<pid>]");
    };
    let mut rdt = crate::mounted(iface.parse().expect("iface"), root)
        .rdt_iface(None)
        .open()
        .expect("open");
    let request = ClassRequest {
        l3: Some(CatMask::Unified("f".parse().expect("mask"))),
        cpus: cpus.parse().expect("cpus"),
        ..ClassRequest::default()
    };
    let mut lease = Lease::take(&mut rdt, &request).expect("take");
    for pid in rest {
        lease
            .add_task(TaskId::new(pid.parse().expect("pid")))
            .expect("task");
    }
    println!("leased {}", lease.class().get());
    std::thread::sleep(Duration::from_mins(2));
    lease.release().expect("not reached");
}

/// Starts [`lease_child`] and waits until it holds its class; returns it with the class.
fn start_lease_child(
    iface: Iface,
    cpus: &str,
    root: &std::path::Path,
    task: Option<u32>,
) -> (Child, u32) {
    let mut spec = format!("{iface} {cpus} {}", root.display());
    if let Some(pid) = task {
        spec.push_str(&format!(" {pid}"));
    }
    let mut c = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "reclaim::lease_child",
            "--ignored",
            "--nocapture",
            "--quiet",
        ])
        .env(LEASE_CHILD, spec)
        .env_remove("RDT_IFACE")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let out = c.stdout.take().expect("stdout");
    let class = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("leased ").and_then(|n| n.parse().ok()));
    let Some(class) = class else {
        panic!("the child did not lease a class");
    };
    (c, class)
}

/// A process to put in a class, killed when dropped.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The mask of L3 COS `class` in domain 0.
fn l3_mask(rdt: &mut Rdt, class: u32) -> CatMask {
    rdt.cat_classes(CatResource::L3, CacheDomain::new(0))
        .expect("classes")
        .into_iter()
        .find(|c| c.class == ClassId::new(class))
        .expect("class")
        .mask
}

#[test]
fn the_class_of_a_killed_lease_holder_is_given_back_at_the_next_open_on_both_interfaces() {
    for iface in [Iface::Msr, Iface::Os] {
        // arrange: broadwell-ep (16 classes, 20 ways); MSR without resctrl, as on a host
        // that did not mount it
        let m = match iface {
            Iface::Os => TestMount::builtin("broadwell-ep"),
            _ => TestMount::new(
                SimHandle::new(SimPlatform::builtin("broadwell-ep").expect("model")),
                MountConfig {
                    resctrl: None,
                    clock: SimClock::WallClock,
                },
            ),
        };
        let sleeper = Sleeper(Command::new("sleep").arg("60").spawn().expect("sleep"));
        let task = (iface == Iface::Os).then(|| sleeper.0.id());
        let (child, class) = start_lease_child(iface, "2-3", m.root(), task);
        assert_eq!(class, 15, "{iface}: the highest free class");
        let dead = sigkill(child);
        let raw = || {
            crate::mounted(iface, m.root())
                .rdt_iface(None)
                .reclaim(false)
                .open()
                .expect("open")
        };
        let mut before = raw();
        assert_eq!(
            before.class_of(LogicalCpu::new(2)).expect("class").get(),
            15,
            "{iface}: left behind"
        );
        assert_eq!(
            rdt_pqos::transaction::free_classes(&mut before, &[])
                .expect("free")
                .last()
                .map(|c| c.get()),
            Some(14),
            "{iface}"
        );
        drop(before);
        // act
        let mut rdt = open(iface, &m);
        // assert: the class is free again, its CPUs (and task) in COS0, its masks full
        let tasks = task.map(TaskId::new).into_iter().collect();
        assert_eq!(
            reclaimed(&rdt),
            [Reclaimed::Lease {
                class: ClassId::new(15),
                pid: dead,
                cpus: "2-3".parse().expect("cpus"),
                tasks,
            }],
            "{iface}"
        );
        let free = rdt_pqos::transaction::free_classes(&mut rdt, &[]).expect("free");
        assert_eq!(free.last().map(|c| c.get()), Some(15), "{iface}: {free:?}");
        for cpu in [2, 3] {
            assert_eq!(
                rdt.class_of(LogicalCpu::new(cpu)).expect("class").get(),
                0,
                "{iface}: CPU {cpu}"
            );
        }
        assert_eq!(
            l3_mask(&mut rdt, 15),
            CatMask::Unified("fffff".parse().expect("mask")),
            "{iface}"
        );
        if let Some(pid) = task {
            assert_eq!(
                rdt.class_of_task(TaskId::new(pid)).expect("class").get(),
                0,
                "the task is back in COS0"
            );
            assert!(
                !m.path("sys/fs/resctrl/COS15").exists(),
                "its group is removed"
            );
        }
        // a second open finds nothing left
        drop(rdt);
        assert_eq!(reclaimed(&open(iface, &m)), [], "{iface}");
    }
}

#[test]
fn a_dropped_lease_gives_its_class_back_even_on_a_panic() {
    let m = TestMount::builtin("broadwell-ep");
    let mut rdt = open(Iface::Os, &m);
    let request = ClassRequest {
        l3: Some(CatMask::Unified("f".parse().expect("mask"))),
        cpus: "4-5".parse().expect("cpus"),
        ..ClassRequest::default()
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let lease = Lease::take(&mut rdt, &request).expect("take");
        assert!(m.path("sys/fs/resctrl/COS15").is_dir());
        assert!(lease.record_path().is_some_and(std::path::Path::is_file));
        panic!("a library user's bug");
    }));
    assert!(r.is_err());
    assert_eq!(
        rdt.class_of(LogicalCpu::new(4)).expect("class").get(),
        0,
        "given back while unwinding"
    );
    assert!(!m.path("sys/fs/resctrl/COS15").exists());
}

#[test]
fn hostile_lease_records_in_the_run_directory_are_skipped_by_the_open() {
    // arrange: the run directory of the mounted platform holds things named like records
    let m = TestMount::builtin("broadwell-ep");
    let run = rdt_pqos::Paths::under(m.root()).run;
    std::fs::create_dir_all(&run).expect("run dir");
    let target = m.path("sys/fs/resctrl/schemata");
    let before = std::fs::read_to_string(&target).expect("schemata");
    std::os::unix::fs::symlink(&target, run.join("lease-os-15-1")).expect("symlink");
    nix::unistd::mkfifo(&run.join("lease-os-14-2"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    std::fs::write(run.join("lease-os-13-3"), [0xff, 0xfe]).expect("not UTF-8");
    std::fs::write(run.join("lease-os-12-4"), "{\"version\":1,").expect("garbage");
    // act: both interfaces open (and the OS one looks at the records)
    for iface in [Iface::Os, Iface::Msr] {
        let mut rdt = open(iface, &m);
        // assert: nothing given back, nothing followed, and a class can be leased
        assert_eq!(reclaimed(&rdt), [], "{iface}");
        let request = ClassRequest {
            l3: Some(CatMask::Unified("f".parse().expect("mask"))),
            cpus: "2".parse().expect("cpus"),
            ..ClassRequest::default()
        };
        let lease = Lease::take(&mut rdt, &request).expect("take");
        assert_eq!(lease.class(), ClassId::new(15), "{iface}");
        lease.release().expect("release");
    }
    assert_eq!(std::fs::read_to_string(&target).expect("schemata"), before);
    for name in [
        "lease-os-15-1",
        "lease-os-14-2",
        "lease-os-13-3",
        "lease-os-12-4",
    ] {
        assert!(
            run.join(name).symlink_metadata().is_ok(),
            "{name} left in place"
        );
        // the host's /run/rdt is not the test's to fill
        let _ = std::fs::remove_file(run.join(name));
    }
}

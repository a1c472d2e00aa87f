//! Behaviour against the simulated platform's kernel-faithful resctrl, FUSE-mounted in a
//! temporary directory (`rdt_sim::fs::testing::TestMount`). The backend is opened the
//! production way: topology from the mount's sysfs, CPUID from its `dev/cpu/0/cpuid`, the
//! resctrl root at `sys/fs/resctrl`, remounts through `.sim/resctrl_mount`.
#![allow(clippy::tests_outside_test_module)]
// Helpers outside #[test] fns unwrap too: a broken fixture should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod common;
use common::Sleeper;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use rdt_core::{
    AllocReset, Backend, BackendExt, CacheBitmask, CacheDomain, Capabilities, CatClass, CatMask,
    CatResource, ClassId, CpuSet, FeatureSetting, GroupOwner, LogicalCpu, MbaClass, MbaCtrl,
    MbaLimit, MonEvents, NoPmu, RequestError, TaskId, Topology,
};
use rdt_host::cpuid::DevCpuid;
use rdt_host::topology::TopologyFromSysfs;
use rdt_resctrl::{ControlFileMount, ResctrlBackend, ResctrlError, ResctrlOptions};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{SimHandle, SimPlatform};

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

struct Sim {
    m: TestMount,
}

impl Sim {
    fn new(model: &str) -> Self {
        Self {
            m: TestMount::builtin(model),
        }
    }

    /// A mount whose model clock moves only when the test advances it.
    fn manual(model: &str) -> Self {
        let p = SimPlatform::builtin(model).unwrap();
        Self {
            m: TestMount::new(
                SimHandle::new(p),
                MountConfig {
                    clock: SimClock::Manual,
                    ..MountConfig::default()
                },
            ),
        }
    }

    fn root(&self) -> PathBuf {
        self.m.path("sys/fs/resctrl")
    }

    fn options(&self) -> ResctrlOptions {
        ResctrlOptions::new(self.root())
            .mount_control(ControlFileMount::new(self.m.path(".sim/resctrl_mount")))
    }

    fn open_with(&self, opts: ResctrlOptions) -> ResctrlBackend {
        let topo = Topology::from_sysfs(self.m.path("sys/devices/system")).unwrap();
        let caps =
            Capabilities::detect(&DevCpuid::open(self.m.path("dev"), LogicalCpu::new(0)).unwrap());
        ResctrlBackend::open(opts, topo, Some(caps), NoPmu).unwrap()
    }

    fn open(&self) -> ResctrlBackend {
        self.open_with(self.options())
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        fs::write(self.root().join(rel), text).unwrap_or_else(|e| panic!("{rel} <- {text}: {e}"));
    }

    fn mkdir(&self, rel: &str) {
        fs::create_dir(self.root().join(rel)).unwrap_or_else(|e| panic!("mkdir {rel}: {e}"));
    }

    /// RDMSR through the mount's `dev/cpu/N/msr` (offset = register address).
    fn rdmsr(&self, cpu: u32, addr: u64) -> u64 {
        use std::os::unix::fs::FileExt;
        let f = fs::File::open(self.m.path(&format!("dev/cpu/{cpu}/msr"))).unwrap();
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, addr).unwrap();
        u64::from_le_bytes(b)
    }

    /// Every group's `schemata`, `cpus_list` and `tasks`, for before/after comparisons.
    fn snapshot(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut dirs = vec![String::new()];
        for e in fs::read_dir(self.root()).unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            if self.root().join(&n).is_dir()
                && !["info", "mon_data", "mon_groups"].contains(&n.as_str())
            {
                dirs.push(n);
            }
        }
        dirs.sort();
        for d in dirs {
            // The root's `tasks` lists every thread of the host (as the kernel's does),
            // which come and go: the groups' lists say where tasks were moved.
            let files: &[&str] = if d.is_empty() {
                &["schemata", "cpus_list"]
            } else {
                &["schemata", "cpus_list", "tasks"]
            };
            for f in files {
                let rel = if d.is_empty() {
                    (*f).to_owned()
                } else {
                    format!("{d}/{f}")
                };
                out.push((rel.clone(), self.read(&rel)));
            }
        }
        out
    }
}

fn mask(b: u64) -> CacheBitmask {
    CacheBitmask::new(b).unwrap()
}

fn l3(class: u32, m: u64) -> CatClass {
    CatClass {
        class: ClassId::new(class),
        mask: CatMask::Unified(mask(m)),
    }
}

fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

#[test]
fn allocation_round_trips_through_schemata_and_cpus_list() {
    // arrange
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let d0 = CacheDomain::new(0);
    let d1 = rdt.topology().l3_domains()[1];
    // act
    rdt.set_cat_classes(CatResource::L3, d0, &[l3(1, 0x7f0), l3(2, 0xf)])
        .unwrap();
    rdt.set_cat_classes(CatResource::L3, d1, &[l3(1, 0x3)])
        .unwrap();
    let applied = rdt
        .set_mba_classes(
            d0,
            &[MbaClass {
                class: ClassId::new(1),
                limit: MbaLimit::Percent(15),
            }],
        )
        .unwrap();
    rdt.associate(LogicalCpu::new(3), ClassId::new(1)).unwrap();
    rdt.associate(LogicalCpu::new(4), ClassId::new(2)).unwrap();
    // assert: what the backend reads back, and the kernel's files
    let c = rdt.cat_classes(CatResource::L3, d0).unwrap();
    assert_eq!(c[1].mask, CatMask::Unified(mask(0x7f0)));
    assert_eq!(c[2].mask, CatMask::Unified(mask(0xf)));
    assert_eq!(
        c[3].mask,
        CatMask::Unified(mask(0x7ff)),
        "no COS3 group: reset value"
    );
    assert_eq!(
        rdt.cat_classes(CatResource::L3, d1).unwrap()[1].mask,
        CatMask::Unified(mask(0x3))
    );
    assert_eq!(
        applied[0].limit,
        MbaLimit::Percent(20),
        "the kernel rounds 15 up to 20"
    );
    let s = sim.read("COS1/schemata");
    assert!(s.contains(&format!("L3:0=7f0;{d1}=3")), "{s}");
    assert!(s.contains("MB:0=20;"), "{s}");
    assert_eq!(sim.read("COS1/cpus_list"), "3\n");
    assert_eq!(rdt.class_of(LogicalCpu::new(3)).unwrap(), ClassId::new(1));
    assert_eq!(rdt.class_of(LogicalCpu::new(4)).unwrap(), ClassId::new(2));
    assert_eq!(rdt.class_of(LogicalCpu::new(5)).unwrap(), ClassId::new(0));
    // back to COS 0
    rdt.associate(LogicalCpu::new(3), ClassId::new(0)).unwrap();
    assert_eq!(sim.read("COS1/cpus_list"), "\n");
    assert_eq!(rdt.class_of(LogicalCpu::new(3)).unwrap(), ClassId::new(0));
    // the registers behind it: COS1's mask in domain 0 is IA32_L3_QOS_MASK_1 on CPU 0
    let closid_of_cos1 = 1; // the first group made gets the lowest free CLOSID
    assert_eq!(sim.rdmsr(0, 0xc90 + closid_of_cos1), 0x7f0);
}

#[test]
fn reset_allocation_restores_defaults_and_moves_cpus_and_tasks_to_the_root() {
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let child = Sleeper::sleep();
    rdt.set_cat_classes(
        CatResource::L3,
        CacheDomain::new(0),
        &[l3(0, 0x7fc), l3(1, 0x3)],
    )
    .unwrap();
    rdt.associate(LogicalCpu::new(2), ClassId::new(1)).unwrap();
    rdt.associate_task(child.id(), ClassId::new(1)).unwrap();
    // act
    rdt.reset_allocation(&AllocReset::default()).unwrap();
    // assert
    let c = rdt
        .cat_classes(CatResource::L3, CacheDomain::new(0))
        .unwrap();
    assert!(
        c.iter().all(|c| c.mask == CatMask::Unified(mask(0x7ff))),
        "{c:?}"
    );
    assert_eq!(sim.read("COS1/cpus_list"), "\n");
    assert_eq!(sim.read("COS1/tasks"), "");
    assert_eq!(rdt.class_of_task(child.id()).unwrap(), ClassId::new(0));
    assert!(sim.read("schemata").contains("MB:0=100;"));
}

#[test]
fn tasks_move_with_every_thread_of_a_process_and_a_thread_alone() {
    // arrange: a child process, and this test process with extra threads
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let child = Sleeper::sleep();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<TaskId>();
    let t = std::thread::spawn(move || {
        // "/proc/thread-self" -> "PID/task/TID"
        let link = fs::read_link("/proc/thread-self").unwrap();
        let tid = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        tid_tx.send(tid).unwrap();
        rx.recv()
    });
    let lone = tid_rx.recv().unwrap();
    let me = TaskId::new(std::process::id());
    let my_threads: Vec<TaskId> = {
        let mut v: Vec<TaskId> = fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
            .collect();
        v.sort();
        v
    };
    assert!(my_threads.len() > 2);
    // act
    rdt.associate_task(child.id(), ClassId::new(2)).unwrap();
    rdt.associate_task(me, ClassId::new(3)).unwrap();
    // assert
    assert_eq!(rdt.class_of_task(child.id()).unwrap(), ClassId::new(2));
    assert_eq!(rdt.tasks_of_class(ClassId::new(2)).unwrap(), [child.id()]);
    let in3 = rdt.tasks_of_class(ClassId::new(3)).unwrap();
    // Other tests' harness threads come and go: check those still alive, and ours.
    let alive = |tid: &TaskId| std::path::Path::new(&format!("/proc/self/task/{tid}")).exists();
    assert!(in3.contains(&me) && in3.contains(&lone), "{in3:?}");
    for tid in my_threads.iter().filter(|t| alive(t)) {
        assert!(
            in3.contains(tid) || !alive(tid),
            "thread {tid} of this process in COS3: {in3:?}"
        );
    }
    // a thread id alone moves only that thread
    rdt.associate_task(lone, ClassId::new(4)).unwrap();
    assert_eq!(rdt.tasks_of_class(ClassId::new(4)).unwrap(), [lone]);
    assert!(!rdt.tasks_of_class(ClassId::new(3)).unwrap().contains(&lone));
    // a task that does not exist: an error, nothing created
    let e = rdt
        .associate_task(TaskId::new(999_999_999), ClassId::new(5))
        .unwrap_err();
    assert!(
        matches!(e, ResctrlError::Request(RequestError::NoSuchTask(_))),
        "{e}"
    );
    assert!(!sim.root().join("COS5").exists());
    tx.send(()).unwrap();
    t.join().unwrap().unwrap();
}

#[test]
fn task_monitoring_puts_the_group_under_the_tasks_control_group() {
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let in_cos1 = Sleeper::sleep();
    let in_root = Sleeper::sleep();
    rdt.associate_task(in_cos1.id(), ClassId::new(1)).unwrap();
    // act
    let g = rdt
        .start_monitoring_tasks(
            &[in_cos1.id(), in_root.id()],
            MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL,
        )
        .unwrap();
    // assert: one name, under COS1 (in_cos1) and the root (in_root)
    let groups = rdt.groups().unwrap();
    let ours: Vec<&str> = groups
        .iter()
        .filter(|g| g.owner == GroupOwner::Pqos && g.path.contains("pqos-"))
        .map(|g| g.path.as_str())
        .collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    let name = ours[0].rsplit('/').next().unwrap();
    assert!(name.starts_with(&format!("pqos-{}-", std::process::id())));
    assert_eq!(
        sim.read(&format!("COS1/mon_groups/{name}/tasks")),
        format!("{}\n", in_cos1.id())
    );
    assert_eq!(
        sim.read(&format!("mon_groups/{name}/tasks")),
        format!("{}\n", in_root.id())
    );
    rdt.poll().unwrap();
    let v = rdt.values(g).unwrap().clone();
    assert!(
        v.llc_occupancy_bytes.is_some() && v.mbm_local_delta_bytes == Some(0),
        "{v:?}"
    );
    // a task already monitored
    let e = rdt
        .start_monitoring_tasks(&[in_root.id()], MonEvents::LLC_OCCUPANCY)
        .unwrap_err();
    assert!(
        matches!(
            e,
            ResctrlError::Request(RequestError::AlreadyMonitored { .. })
        ),
        "{e}"
    );
    // stop removes both directories; the tasks stay in their control groups
    rdt.stop_monitoring(g).unwrap();
    assert!(!sim.root().join(format!("COS1/mon_groups/{name}")).exists());
    assert!(!sim.root().join(format!("mon_groups/{name}")).exists());
    assert_eq!(rdt.class_of_task(in_cos1.id()).unwrap(), ClassId::new(1));
}

/// A task group's tasks change in place: the joining task is written to the group's own
/// monitor group (same RMID: no directory made, none removed), the leaving one goes back
/// to its control group; what cannot be done is refused before anything moves.
#[test]
fn a_task_groups_tasks_change_without_restarting_its_counts() {
    let sim = Sim::manual(SKX_RDT);
    let mut rdt = sim.open();
    let (first, second, third) = (Sleeper::sleep(), Sleeper::sleep(), Sleeper::sleep());
    rdt.associate_task(third.id(), ClassId::new(1)).unwrap();
    let group = rdt
        .start_monitoring_tasks(
            &[first.id()],
            MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL,
        )
        .unwrap();
    let groups = rdt.groups().unwrap();
    let dir = groups
        .iter()
        .find(|x| x.owner == GroupOwner::Pqos && x.path.contains("pqos-"))
        .map(|x| x.path.clone())
        .unwrap();
    let ids =
        |text: String| -> Vec<u32> { text.lines().map(|l| l.trim().parse().unwrap()).collect() };
    rdt.poll().unwrap();
    // act: the second joins
    rdt.os()
        .unwrap()
        .change_monitoring_tasks(group, &[second.id()], &[])
        .unwrap();
    // assert: the same directory holds both (the group's RMID), nothing else was made
    let mut both = ids(sim.read(&format!("{dir}/tasks")));
    both.sort_unstable();
    let mut want = vec![first.id().get(), second.id().get()];
    want.sort_unstable();
    assert_eq!(both, want);
    assert_eq!(rdt.groups().unwrap().len(), groups.len());
    rdt.poll().unwrap();
    let values = rdt.values(group).unwrap().clone();
    assert!(values.llc_occupancy_bytes.is_some(), "{values:?}");
    // the first leaves: back to its control group (the root), out of the monitor group
    rdt.os()
        .unwrap()
        .change_monitoring_tasks(group, &[], &[first.id()])
        .unwrap();
    assert_eq!(ids(sim.read(&format!("{dir}/tasks"))), [second.id().get()]);
    assert_eq!(rdt.class_of_task(first.id()).unwrap(), ClassId::new(0));
    assert!(ids(sim.read("tasks")).contains(&first.id().get()));
    // a task under a control group the group has no directory in: refused, nothing moved
    let err = rdt
        .os()
        .unwrap()
        .change_monitoring_tasks(group, &[third.id()], &[])
        .unwrap_err();
    assert!(err.to_string().contains("control group"), "{err}");
    assert_eq!(rdt.class_of_task(third.id()).unwrap(), ClassId::new(1));
    // no task left: refused; another group's task: refused
    let err = rdt
        .os()
        .unwrap()
        .change_monitoring_tasks(group, &[], &[second.id()])
        .unwrap_err();
    assert!(
        matches!(err, ResctrlError::Request(RequestError::EmptyGroup)),
        "{err}"
    );
    let other = rdt
        .start_monitoring_tasks(&[first.id()], MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let err = rdt
        .os()
        .unwrap()
        .change_monitoring_tasks(group, &[first.id()], &[])
        .unwrap_err();
    assert!(
        matches!(
            err,
            ResctrlError::Request(RequestError::AlreadyMonitored { .. })
        ),
        "{err}"
    );
    rdt.stop_monitoring(other).unwrap();
    rdt.stop_monitoring(group).unwrap();
    assert!(!sim.root().join(&dir).exists());
}

#[test]
fn cpu_monitoring_spans_control_groups_and_sums_them() {
    // arrange: CPUs 2-7 run the default scenario's pipeline; CPU 3 goes to COS1; the
    // model's clock moves only when the test says, so files and polls see the same counts
    let sim = Sim::manual(SKX_RDT);
    let mut rdt = sim.open();
    rdt.associate(LogicalCpu::new(3), ClassId::new(1)).unwrap();
    // act
    let g = rdt
        .start_monitoring(&cpus("2-3"), MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL)
        .unwrap();
    // assert: the same name under the root and COS1, each with its CPU
    let listed: Vec<String> = rdt
        .groups()
        .unwrap()
        .into_iter()
        .filter(|g| g.path.contains("/pqos-"))
        .map(|g| g.path)
        .collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let name = listed[0].rsplit('/').next().unwrap().to_owned();
    let dirs = [
        format!("mon_groups/{name}"),
        format!("COS1/mon_groups/{name}"),
    ];
    assert_eq!(sim.read(&format!("{}/cpus_list", dirs[0])), "2\n");
    assert_eq!(sim.read(&format!("{}/cpus_list", dirs[1])), "3\n");
    // the group's values are its two directories' files in the L3 domain of their CPU
    let dom = |cpu: u32| {
        rdt.topology()
            .get(LogicalCpu::new(cpu))
            .unwrap()
            .l3
            .unwrap()
    };
    let files = [(&dirs[0], dom(2)), (&dirs[1], dom(3))];
    let sum = |event: &str| -> u64 {
        files
            .iter()
            .map(|(d, l3)| {
                sim.read(&format!("{d}/mon_data/mon_L3_{:02}/{event}", l3.get()))
                    .trim()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum()
    };
    let (total_start, local_start) = (sum("mbm_total_bytes"), sum("mbm_local_bytes"));
    sim.m.platform().advance(Duration::from_millis(500));
    rdt.poll().unwrap();
    let first = rdt.values(g).unwrap().clone();
    let (total0, local0) = (sum("mbm_total_bytes"), sum("mbm_local_bytes"));
    assert!(total0 > total_start, "the pipeline moves memory");
    assert_eq!(
        first.mbm_total_delta_bytes,
        Some(total0 - total_start),
        "the first poll: the traffic since the start"
    );
    assert_eq!(first.mbm_local_delta_bytes, Some(local0 - local_start));
    assert_eq!(first.mbm_total_bytes, Some(total0 - total_start));
    assert!(first.interval > Duration::ZERO, "since the start");
    sim.m.platform().advance(Duration::from_secs(1));
    rdt.poll().unwrap();
    let v = rdt.values(g).unwrap().clone();
    let (total, local) = (
        sum("mbm_total_bytes") - total0,
        sum("mbm_local_bytes") - local0,
    );
    assert!(total > 0, "the pipeline moves memory");
    assert_eq!(v.mbm_total_delta_bytes, Some(total));
    assert_eq!(v.mbm_local_delta_bytes, Some(local));
    assert_eq!(v.mbm_remote_delta_bytes, Some(total.saturating_sub(local)));
    assert_eq!(v.llc_occupancy_bytes, Some(sum("llc_occupancy")));
    assert!(v.llc_occupancy_bytes > Some(0), "{v:?}");
    // CPU already monitored
    let e = rdt
        .start_monitoring(&cpus("3-4"), MonEvents::LLC_OCCUPANCY)
        .unwrap_err();
    assert!(e.to_string().contains("CPU 3 is already monitored"), "{e}");
    rdt.stop_monitoring(g).unwrap();
    assert!(
        rdt.groups()
            .unwrap()
            .iter()
            .all(|g| !g.path.contains("pqos-"))
    );
}

#[test]
fn out_of_closids_names_every_group_holding_one_and_changes_nothing() {
    // arrange: skylake-sp has 8 CLOSIDs (MB's num_closids): root + 7 groups
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    assert_eq!(rdt.info().closids_supported(), 8);
    for i in 1..=6 {
        sim.mkdir(&format!("kube{i}"));
    }
    rdt.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[l3(1, 0xff)])
        .unwrap();
    let before = sim.snapshot();
    // act
    let e = rdt
        .set_cat_classes(
            CatResource::L3,
            CacheDomain::new(0),
            &[l3(1, 0xf), l3(2, 0xf)],
        )
        .unwrap_err();
    // assert
    let msg = e.to_string();
    assert!(matches!(e, ResctrlError::OutOfClosids { .. }), "{msg}");
    assert!(
        msg.contains("out of CLOSIDs") && msg.contains("COS1") && msg.contains("kube6 (foreign)"),
        "{msg}"
    );
    assert_eq!(sim.snapshot(), before, "COS1's write undone, COS2 not made");
    assert!(!sim.root().join("COS2").exists());
}

#[test]
fn out_of_rmids_names_the_groups_holding_them() {
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    // another tool takes every RMID
    let mut n = 0;
    while fs::create_dir(sim.root().join(format!("mon_groups/agent{n}"))).is_ok() {
        n += 1;
    }
    assert!(n > 10);
    let e = rdt
        .start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            ResctrlError::Request(RequestError::OutOfRmids { limbo: false, .. })
        ),
        "{msg}"
    );
    assert!(msg.contains("mon_groups/agent0 (foreign)"), "{msg}");
    assert!(
        rdt.groups()
            .unwrap()
            .iter()
            .all(|g| g.owner == GroupOwner::Foreign)
    );
}

#[test]
fn a_rejected_schemata_carries_the_kernels_message_and_is_undone() {
    // arrange: another tool's exclusive group owns ways 0-1 of every domain
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let doms = rdt.topology().l3_domains();
    let list = |m: &str| {
        doms.iter()
            .map(|d| format!("{d}={m}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    sim.write("schemata", &format!("L3:{}\n", list("7fc")));
    sim.mkdir("excl");
    sim.write("excl/schemata", &format!("L3:{}\n", list("3")));
    sim.write("excl/mode", "exclusive\n");
    let before = sim.snapshot();
    // act: COS2 is fine, COS1 overlaps the exclusive ways
    let e = rdt
        .set_cat_classes(CatResource::L3, doms[0], &[l3(1, 0x7), l3(2, 0x700)])
        .unwrap_err();
    // assert
    let ResctrlError::Rejected {
        file,
        written,
        status,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert!(file.ends_with("COS1/schemata"), "{e}");
    assert!(
        written.contains("L3:") && written.contains("=7"),
        "{written}"
    );
    assert_eq!(status, "Overlaps with exclusive group", "{e}");
    assert!(e.to_string().contains("Overlaps with exclusive group"));
    assert_eq!(sim.snapshot(), before, "no half-applied configuration");
    assert!(!sim.root().join("COS1").exists() && !sim.root().join("COS2").exists());
}

#[test]
fn a_fault_midway_through_a_multi_class_set_leaves_no_half_applied_configuration() {
    // arrange: COS1-3 exist with known masks; the write to COS2 will fail with EIO
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let d = CacheDomain::new(0);
    rdt.set_cat_classes(CatResource::L3, d, &[l3(1, 0x1), l3(2, 0x2), l3(3, 0x4)])
        .unwrap();
    let before = sim.snapshot();
    let regs_before: Vec<u64> = (1..=3).map(|n| sim.rdmsr(0, 0xc90 + n)).collect();
    fs::write(
        sim.m.path(".sim/fail"),
        "write sys/fs/resctrl/COS2/schemata errno=EIO\n",
    )
    .unwrap();
    // act
    let e = rdt
        .set_cat_classes(
            CatResource::L3,
            d,
            &[l3(1, 0x10), l3(2, 0x20), l3(3, 0x40), l3(4, 0x80)],
        )
        .unwrap_err();
    // assert
    assert!(
        matches!(&e, ResctrlError::Rejected { file, .. } if file.ends_with("COS2/schemata")),
        "{e}"
    );
    assert_eq!(sim.snapshot(), before);
    let regs_after: Vec<u64> = (1..=3).map(|n| sim.rdmsr(0, 0xc90 + n)).collect();
    assert_eq!(regs_after, regs_before);
    assert!(!sim.root().join("COS4").exists());
}

#[test]
fn a_foreign_group_survives_everything_short_of_a_remount_and_blocks_that() {
    // arrange: another tool's control group with a CPU, a task and a monitor group
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    let child = Sleeper::sleep();
    sim.mkdir("kubepods");
    sim.write("kubepods/schemata", "L3:0=f0\n");
    sim.write("kubepods/cpus_list", "6\n");
    sim.write("kubepods/tasks", &format!("{}\n", child.id()));
    sim.mkdir("kubepods/mon_groups/pod1");
    sim.write("kubepods/mon_groups/pod1/cpus_list", "6\n");
    sim.mkdir("mon_groups/agent");
    let kube_before: Vec<String> = [
        "kubepods/schemata",
        "kubepods/cpus_list",
        "kubepods/tasks",
        "kubepods/mon_groups/pod1/cpus_list",
    ]
    .iter()
    .map(|f| sim.read(f))
    .collect();
    // act: -e, -a, -m, -r, -R
    rdt.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[l3(1, 0xf)])
        .unwrap();
    rdt.associate(LogicalCpu::new(5), ClassId::new(1)).unwrap();
    let e = rdt
        .associate(LogicalCpu::new(6), ClassId::new(1))
        .unwrap_err();
    assert!(
        matches!(e, ResctrlError::Request(RequestError::ForeignGroup { .. }))
            && e.to_string().contains("kubepods"),
        "{e}"
    );
    let e = rdt.associate_task(child.id(), ClassId::new(1)).unwrap_err();
    assert!(
        matches!(e, ResctrlError::Request(RequestError::ForeignGroup { .. })),
        "{e}"
    );
    let e = rdt
        .start_monitoring(&cpus("6"), MonEvents::LLC_OCCUPANCY)
        .unwrap_err();
    assert!(e.to_string().contains("kubepods/mon_groups/pod1"), "{e}");
    let g = rdt
        .start_monitoring(&cpus("5"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    rdt.poll().unwrap();
    rdt.stop_monitoring(g).unwrap();
    rdt.start_monitoring(&cpus("7"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    fs::create_dir(sim.root().join("mon_groups/pqos-1-1")).unwrap(); // another pqos's
    rdt.reset_monitoring().unwrap();
    rdt.reset_allocation(&AllocReset::default()).unwrap();
    // assert: the foreign groups are as they were, and listed as foreign
    let kube_after: Vec<String> = [
        "kubepods/schemata",
        "kubepods/cpus_list",
        "kubepods/tasks",
        "kubepods/mon_groups/pod1/cpus_list",
    ]
    .iter()
    .map(|f| sim.read(f))
    .collect();
    assert_eq!(kube_after, kube_before);
    let groups = rdt.groups().unwrap();
    let foreign: Vec<&str> = groups
        .iter()
        .filter(|g| g.owner == GroupOwner::Foreign)
        .map(|g| g.path.as_str())
        .collect();
    assert_eq!(
        foreign,
        ["mon_groups/agent", "kubepods", "kubepods/mon_groups/pod1"]
    );
    assert!(
        groups.iter().all(|g| !g.path.contains("pqos-")),
        "-r removed every pqos-* group"
    );
    // a reset that needs a remount is refused, naming them
    let cdp_on = AllocReset {
        l3_cdp: FeatureSetting::On,
        ..AllocReset::default()
    };
    let e = rdt.reset_allocation(&cdp_on).unwrap_err();
    assert!(matches!(e, ResctrlError::RemountBlocked { .. }), "{e}");
    assert!(
        e.to_string().contains("kubepods") && e.to_string().contains("mon_groups/agent"),
        "{e}"
    );
    assert!(sim.root().join("kubepods").is_dir());
}

#[test]
fn cdp_and_mba_mbps_change_by_remounting_through_the_seam() {
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open();
    rdt.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[l3(1, 0xf)])
        .unwrap();
    assert_eq!(rdt.mba_ctrl(), Some(MbaCtrl::Disabled));
    // act: -R l3cdp-on,mbaCtrl-on
    rdt.reset_allocation(&AllocReset {
        l3_cdp: FeatureSetting::On,
        mba_ctrl: FeatureSetting::On,
        ..AllocReset::default()
    })
    .unwrap();
    // assert
    assert_eq!(
        fs::read_to_string(sim.m.path(".sim/resctrl_mount")).unwrap(),
        "cdp,mba_MBps\n"
    );
    let l3caps = rdt.capabilities().l3_cat.get().unwrap().clone();
    assert!(l3caps.cdp_enabled && rdt.mount_options().cdp);
    assert_eq!(rdt.mba_ctrl(), Some(MbaCtrl::Enabled));
    assert!(
        !sim.root().join("COS1").exists(),
        "a remount deletes every group"
    );
    let c = rdt
        .cat_classes(CatResource::L3, CacheDomain::new(0))
        .unwrap();
    assert_eq!(c.len(), l3caps.usable_classes() as usize);
    assert!(matches!(c[0].mask, CatMask::Cdp { .. }));
    let cdp = CatClass {
        class: ClassId::new(1),
        mask: CatMask::Cdp {
            data: mask(0xf0),
            code: mask(0xf),
        },
    };
    rdt.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[cdp])
        .unwrap();
    let s = sim.read("COS1/schemata");
    assert!(s.contains("L3DATA:0=f0") && s.contains("L3CODE:0=f"), "{s}");
    let mbps = |v| MbaClass {
        class: ClassId::new(1),
        limit: v,
    };
    let applied = rdt
        .set_mba_classes(CacheDomain::new(0), &[mbps(MbaLimit::MibPerSec(5000))])
        .unwrap();
    assert_eq!(applied[0].limit, MbaLimit::MibPerSec(5000));
    let e = rdt
        .set_mba_classes(CacheDomain::new(0), &[mbps(MbaLimit::Percent(50))])
        .unwrap_err();
    assert!(
        matches!(e, ResctrlError::Request(RequestError::MbaUnit { .. })),
        "{e}"
    );
    // and back
    rdt.reset_allocation(&AllocReset {
        l3_cdp: FeatureSetting::Off,
        mba_ctrl: FeatureSetting::Off,
        ..AllocReset::default()
    })
    .unwrap();
    assert_eq!(
        fs::read_to_string(sim.m.path(".sim/resctrl_mount")).unwrap(),
        "\n"
    );
    assert!(!rdt.capabilities().l3_cat.get().unwrap().cdp_enabled);
}

#[test]
fn two_writers_at_once_serialize_on_the_lock_and_neither_loses_its_change() {
    let sim = Sim::new(SKX_RDT);
    let root = sim.root();
    let open = || sim.open_with(ResctrlOptions::new(&root));
    let (mut a, mut b) = (open(), open());
    let doms = a.topology().l3_domains();
    // act: each moves its own CPUs into COS1 one by one (read, add, write cpus_list) and
    // sets COS1's mask in its own domain (read, change, write schemata)
    std::thread::scope(|s| {
        let (d0, d1) = (doms[0], doms[1]);
        s.spawn(move || {
            for cpu in 0..8 {
                a.associate(LogicalCpu::new(cpu), ClassId::new(1)).unwrap();
                a.set_cat_classes(CatResource::L3, d0, &[l3(1, 0x1 << (cpu % 8))])
                    .unwrap();
            }
        });
        s.spawn(move || {
            for cpu in 8..16 {
                b.associate(LogicalCpu::new(cpu), ClassId::new(1)).unwrap();
                b.set_cat_classes(CatResource::L3, d1, &[l3(1, 0x3 << (cpu % 8))])
                    .unwrap();
            }
        });
    });
    // assert: all CPUs, and the last mask each wrote (0x1 << 7, 0x3 << 7)
    assert_eq!(sim.read("COS1/cpus_list"), "0-15\n");
    let s = sim.read("COS1/schemata");
    assert!(
        s.contains(&format!("L3:{}=80;{}=180", doms[0], doms[1])),
        "{s}"
    );
}

#[test]
fn another_tools_lock_is_waited_for_then_reported_and_nothing_changes() {
    let sim = Sim::new(SKX_RDT);
    let mut rdt = sim.open_with(sim.options().lock_timeout(Duration::from_millis(200)));
    let before = sim.snapshot();
    let holder = fs::File::open(sim.root()).unwrap();
    holder.lock().unwrap();
    let e = rdt
        .set_cat_classes(CatResource::L3, CacheDomain::new(0), &[l3(1, 0xf)])
        .unwrap_err();
    assert!(matches!(e, ResctrlError::Locked { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("another tool holds the resctrl lock"),
        "{e}"
    );
    let e = rdt.poll().unwrap_err();
    assert!(
        matches!(e, ResctrlError::Locked { .. }),
        "a poll waits for writers too: {e}"
    );
    assert_eq!(sim.snapshot(), before);
    // a shared holder lets reads through but not changes
    holder.unlock().unwrap();
    holder.lock_shared().unwrap();
    rdt.cat_classes(CatResource::L3, CacheDomain::new(0))
        .unwrap();
    assert!(rdt.associate(LogicalCpu::new(1), ClassId::new(1)).is_err());
    holder.unlock().unwrap();
    rdt.associate(LogicalCpu::new(1), ClassId::new(1)).unwrap();
}

#[test]
fn amd_limits_are_units_and_empty_masks_are_refused_locally() {
    let sim = Sim::new("milan");
    let mut rdt = sim.open();
    let d = rdt.topology().l3_domains()[1];
    let applied = rdt
        .set_mba_classes(
            d,
            &[MbaClass {
                class: ClassId::new(1),
                limit: MbaLimit::AmdUnits(16),
            }],
        )
        .unwrap();
    assert_eq!(applied[0].limit, MbaLimit::AmdUnits(16));
    assert_eq!(rdt.mba_ctrl(), Some(MbaCtrl::Unsupported));
    let e = rdt
        .set_mba_classes(
            d,
            &[MbaClass {
                class: ClassId::new(1),
                limit: MbaLimit::Percent(50),
            }],
        )
        .unwrap_err();
    assert!(
        matches!(e, ResctrlError::Request(RequestError::MbaUnit { .. })),
        "{e}"
    );
    // non-contiguous masks are fine on AMD
    rdt.set_cat_classes(CatResource::L3, d, &[l3(2, 0xf0f)])
        .unwrap();
    assert_eq!(
        rdt.cat_classes(CatResource::L3, d).unwrap()[2].mask,
        CatMask::Unified(mask(0xf0f))
    );
}

#[test]
fn a_poll_reads_each_counter_file_once_and_opens_stats_or_lists_nothing() {
    // arrange: 4 groups of two CPUs, each pair spanning both L3 domains
    let sim = Sim::manual(SKX_RDT);
    let mut rdt = sim.open();
    let mut groups = Vec::new();
    for k in 0..4 {
        let pair = cpus(&format!("{},{}", 2 * k, 2 * k + 1));
        let doms: std::collections::BTreeSet<_> = pair
            .iter()
            .map(|c| rdt.topology().get(c).unwrap().l3)
            .collect();
        assert_eq!(doms.len(), 2, "CPUs {pair} span both domains");
        groups.push(
            rdt.start_monitoring(&pair, MonEvents::LLC_OCCUPANCY | MonEvents::MBM_REMOTE)
                .unwrap(),
        );
    }
    for _ in 0..2 {
        // act
        sim.m.mount().reset_op_counts();
        rdt.poll().unwrap();
        let c = sim.m.mount().op_counts();
        // assert: groups x domains x (occupancy, local, total) reads and nothing else
        assert_eq!(c.read, 4 * 2 * 3, "{c}");
        assert_eq!(
            (c.open, c.lookup, c.getattr, c.opendir, c.readdir, c.write),
            (0, 0, 0, 0, 0, 0),
            "{c}"
        );
        sim.m.platform().advance(Duration::from_secs(1));
    }
    assert!(
        groups
            .iter()
            .all(|g| rdt.values(*g).unwrap().mbm_remote_delta_bytes.is_some())
    );
}

/// A PMU that counts 1000 instructions, 2000 cycles and 10 misses per read, per CPU and per
/// task, and records which tasks it was asked about.
#[derive(Default)]
struct CountingPmu {
    reads: std::collections::BTreeMap<String, u64>,
    released: Vec<TaskId>,
}

impl CountingPmu {
    fn next(&mut self, key: String) -> rdt_core::PmuCounts {
        let n = self.reads.entry(key).or_default();
        *n += 1;
        rdt_core::PmuCounts {
            instructions: *n * 1000,
            cycles: *n * 2000,
            llc_misses: *n * 10,
            llc_references: Some(*n * 40),
        }
    }
}

impl rdt_core::PmuSource for CountingPmu {
    fn read(&mut self, cpu: LogicalCpu) -> Option<rdt_core::PmuCounts> {
        Some(self.next(format!("cpu{cpu}")))
    }
    fn read_task(&mut self, task: TaskId) -> Option<rdt_core::PmuCounts> {
        Some(self.next(format!("task{task}")))
    }
    fn release_task(&mut self, task: TaskId) {
        self.released.push(task);
    }
}

#[test]
fn ipc_and_misses_come_from_the_pmu_per_cpu_and_per_thread() {
    let sim = Sim::manual(SKX_RDT);
    let topo = Topology::from_sysfs(sim.m.path("sys/devices/system")).unwrap();
    let mut rdt = ResctrlBackend::open(sim.options(), topo, None, CountingPmu::default()).unwrap();
    let child = Sleeper::sleep();
    let events = MonEvents::LLC_OCCUPANCY | MonEvents::IPC | MonEvents::LLC_MISSES;
    let by_cpu = rdt.start_monitoring(&cpus("4-6"), events).unwrap();
    let by_task = rdt.start_monitoring_tasks(&[child.id()], events).unwrap();
    rdt.poll().unwrap();
    // three CPUs, one read each at start and per poll; the child's one thread
    assert_eq!(
        rdt.values(by_cpu).unwrap().instructions_delta,
        Some(3000),
        "the first poll counts since the reading at start"
    );
    rdt.poll().unwrap();
    let v = rdt.values(by_cpu).unwrap().clone();
    assert_eq!(
        (v.instructions_delta, v.cycles_delta, v.llc_misses_delta),
        (Some(3000), Some(6000), Some(30))
    );
    assert_eq!(v.ipc(), Some(0.5));
    let v = rdt.values(by_task).unwrap().clone();
    assert_eq!(v.instructions_delta, Some(1000));
    assert_eq!(rdt.pmu_mut().reads[&format!("task{}", child.id())], 3);
    rdt.stop_monitoring(by_task).unwrap();
    assert_eq!(rdt.pmu_mut().released, [child.id()]);
}

#[test]
fn telemetry_reads_the_model_and_a_removed_group_leaves_the_scrape_whose_reads_fail() {
    // arrange: a foreign group holding the pipeline's CPUs, seen by the telemetry
    // without inotify and with a long rescan interval, so that only the failed reads of
    // the removed group's open files can make it look again
    let sim = Sim::manual(SKX_RDT);
    fs::create_dir(sim.root().join("kubepods")).unwrap();
    fs::write(sim.root().join("kubepods/cpus_list"), "2-7\n").unwrap();
    let opts = rdt_resctrl::TelemetryOptions::new(sim.root())
        .watch(false)
        .rescan_interval(Duration::from_hours(1));
    let mut t = rdt_resctrl::ResctrlTelemetry::open(opts).unwrap();
    sim.m.platform().advance(Duration::from_secs(1));
    let groups = t.scrape().unwrap();
    let kube = groups.iter().find(|g| g.path == "kubepods").unwrap();
    assert_eq!(kube.cpus, Some(6));
    let occupancy: u64 = kube
        .counters
        .iter()
        .filter(|c| c.event == rdt_core::RmidEvent::LlcOccupancy)
        .map(|c| c.bytes)
        .sum();
    assert!(occupancy > 0, "the pipeline fills the cache: {kube:?}");
    // act: another tool removes it
    fs::remove_dir(sim.root().join("kubepods")).unwrap();
    let errors = t.stats().read_errors;
    let listed = t.scrape().unwrap().iter().any(|g| g.path == "kubepods");
    // assert: its open files failed, so that scrape scanned again and read the rest again
    assert!(!listed, "gone from the scrape whose reads found it gone");
    assert_eq!(t.stats().scans, 2);
    assert_eq!(
        t.stats().read_errors,
        errors,
        "the second reading's errors only"
    );
    assert!(t.incomplete().is_empty(), "{:?}", t.incomplete());
    assert!(t.scrape().unwrap().iter().all(|g| g.path != "kubepods"));
    assert_eq!(t.stats().scans, 2, "no more scans");
}

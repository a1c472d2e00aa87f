//! The OS interface end to end through the facade: `Iface::Os | Iface::Auto` ([`crate::mounted`])
//! on a FUSE-mounted simulated platform whose resctrl is at `DIR/sys/fs/resctrl`.
//! (`pqos --iface=os --sysroot DIR` on such a mount is tested with the binary, in
//! `crates/pqos-cli/tests/e2e/os_mode.rs`.)

use std::process::Command;

use rdt_pqos::resctrl::ResctrlError;
use rdt_pqos::{
    Backend, BackendExt, CacheBitmask, CacheDomain, CatCaps, CatClass, CatMask, CatResource,
    ClassId, Iface, Interface, LogicalCpu, MonEvents, OpenError, Rdt, TaskId,
};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{SimHandle, SimPlatform};

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

fn without_resctrl(model: &str) -> TestMount {
    TestMount::new(
        SimHandle::new(SimPlatform::builtin(model).expect("model")),
        MountConfig {
            resctrl: None,
            clock: SimClock::WallClock,
        },
    )
}

#[test]
fn auto_takes_the_os_interface_where_resctrl_is_mounted_and_msr_elsewhere() {
    let m = TestMount::builtin(SKX_RDT);
    let rdt = crate::mounted(Iface::Auto, m.root()).open().expect("open");
    assert_eq!(rdt.interface(), Interface::Os);
    assert!(rdt.resctrl().is_some());
    let bare = without_resctrl("skylake-sp");
    let rdt = crate::mounted(Iface::Auto, bare.root())
        .open()
        .expect("open");
    assert_eq!(rdt.interface(), Interface::Msr);
    let e = crate::mounted(Iface::Os, bare.root())
        .open()
        .expect_err("not mounted");
    assert!(
        matches!(&e, OpenError::Resctrl(ResctrlError::NotMounted { .. })),
        "{e:?}"
    );
    // The message itself says what to do: a library user printing `{e}` learns it.
    let text = e.to_string();
    assert!(text.contains("mount -t resctrl resctrl"), "{text}");
}

/// On the OS interface every allocation resource has the kernel's class count: resctrl
/// gives a control group one CLOSID valid for every resource (`closids_supported()`, the
/// fewest `num_closids`), so L3 CAT has the 8 of MBA on this Skylake-SP although its
/// `info/L3/num_closids` says 16, which the MSR interface can use.
#[test]
fn usable_classes_are_the_kernels_count_on_os_and_the_hardwares_on_msr() {
    let m = TestMount::builtin(SKX_RDT);
    let info = |f: &str| {
        let p = m.root().join("sys/fs/resctrl/info").join(f);
        std::fs::read_to_string(p).expect("info file")
    };
    assert_eq!(
        (info("L3/num_closids"), info("MB/num_closids")),
        ("16\n".into(), "8\n".into())
    );
    let l3 = |rdt: &Rdt| {
        rdt.capabilities()
            .cat(CatResource::L3)
            .map(CatCaps::usable_classes)
    };
    let mba = |rdt: &Rdt| rdt.capabilities().mba.get().map(|m| m.num_classes);
    // act
    let os = crate::mounted(Iface::Os, m.root()).open().expect("OS");
    let msr = crate::mounted(Iface::Msr, m.root()).open().expect("MSR");
    // assert
    assert_eq!((l3(&os), mba(&os)), (Some(8), Some(8)));
    assert_eq!(os.capabilities().os_classes(), 8);
    assert_eq!((l3(&msr), mba(&msr)), (Some(16), Some(8)));
}

#[test]
fn the_facade_allocates_monitors_and_moves_tasks_through_resctrl() {
    // arrange
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = crate::mounted(Iface::Os, m.root()).open().expect("open");
    let mask = CatMask::Unified(CacheBitmask::new(0x3f).expect("mask"));
    let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
    let task = TaskId::new(child.id());
    // act
    rdt.set_cat_classes(
        CatResource::L3,
        CacheDomain::new(0),
        &[CatClass {
            class: ClassId::new(1),
            mask,
        }],
    )
    .expect("set");
    rdt.associate(LogicalCpu::new(2), ClassId::new(1))
        .expect("associate");
    rdt.associate_task(task, ClassId::new(1)).expect("task");
    let g = rdt
        .start_monitoring_tasks(&[task], MonEvents::LLC_OCCUPANCY)
        .expect("monitor task");
    rdt.poll().expect("poll");
    // assert: through the facade and in the kernel's files
    assert_eq!(
        rdt.cat_classes(CatResource::L3, CacheDomain::new(0))
            .expect("read")[1]
            .mask,
        mask
    );
    assert_eq!(
        rdt.class_of(LogicalCpu::new(2)).expect("class"),
        ClassId::new(1)
    );
    assert_eq!(rdt.class_of_task(task).expect("class"), ClassId::new(1));
    assert!(rdt.values(g).expect("values").llc_occupancy_bytes.is_some());
    let root = m.path("sys/fs/resctrl");
    assert_eq!(
        std::fs::read_to_string(root.join("COS1/tasks")).expect("tasks"),
        format!("{task}\n")
    );
    assert_eq!(rdt.rmid_of(LogicalCpu::new(2)).expect("rmid"), None);
    rdt.stop_monitoring(g).expect("stop");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_msr_interface_still_refuses_task_work_with_the_unsupported_error() {
    let bare = without_resctrl("skylake-sp");
    let mut rdt = crate::mounted(Iface::Msr, bare.root())
        .open()
        .expect("open");
    let e = rdt
        .associate_task(TaskId::new(1), ClassId::new(1))
        .expect_err("MSR has no tasks");
    assert!(
        matches!(
            e,
            rdt_pqos::Error::Request(rdt_pqos::RequestError::NeedsOsInterface { .. })
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("OS (resctrl) interface"), "{e}");
}

//! CPU association through the resctrl backend on the simulated platform's resctrl served
//! in-process (`rdt_sim::inprocess`): many CPUs move in one `cpus_list` write, all or
//! nothing.
#![allow(clippy::tests_outside_test_module)]
#![allow(clippy::unwrap_used)]

use rdt_core::{
    Backend, BackendExt, ClassId, CpuSet, LogicalCpu, MountOptions, NoPmu, RequestError,
};
use rdt_resctrl::{ResctrlBackend, ResctrlError, ResctrlOptions};
use rdt_sim::inprocess::InProcessResctrl;
use rdt_sim::{SimHandle, SimPlatform};

fn open(model: &str) -> (InProcessResctrl, ResctrlBackend) {
    let handle = SimHandle::new(SimPlatform::builtin(model).unwrap());
    let resctrl = InProcessResctrl::new(handle.clone()).unwrap();
    resctrl.remount(&MountOptions::default()).unwrap();
    let (topo, caps) = {
        let p = handle.lock();
        (p.topology().clone(), p.capabilities().clone())
    };
    let opts = ResctrlOptions::new("/sys/fs/resctrl")
        .files(resctrl.files())
        .mount_control(resctrl.mount_control());
    let rdt = ResctrlBackend::open(opts, topo, Some(caps), NoPmu).unwrap();
    (resctrl, rdt)
}

fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

fn read(resctrl: &InProcessResctrl, rel: &str) -> String {
    resctrl.files().read(rel).unwrap()
}

#[test]
fn cpus_from_several_groups_move_together_and_emptied_groups_go() {
    let (resctrl, mut rdt) = open("broadwell-ep");
    rdt.associate_cpus(&cpus("2-3"), ClassId::new(1)).unwrap();
    assert_eq!(read(&resctrl, "COS1/cpus_list"), "2-3\n");
    // act: CPUs of COS1 and of the root into COS2
    rdt.associate_cpus(&cpus("0-5"), ClassId::new(2)).unwrap();
    // assert
    assert_eq!(read(&resctrl, "COS2/cpus_list"), "0-5\n");
    for cpu in 0..8 {
        let want = if cpu < 6 { 2 } else { 0 };
        assert_eq!(
            rdt.class_of(LogicalCpu::new(cpu)).unwrap(),
            ClassId::new(want)
        );
    }
    assert!(
        !resctrl.files().exists("COS1"),
        "the group this backend made for COS1 holds nothing any more"
    );
    // and back to the root in one call
    rdt.associate_cpus(&cpus("0-5"), ClassId::new(0)).unwrap();
    assert!(!resctrl.files().exists("COS2"));
}

#[test]
fn a_cpu_in_another_tools_group_refuses_the_whole_set() {
    let (resctrl, mut rdt) = open("broadwell-ep");
    let files = resctrl.files();
    files.mkdir("kubepods").unwrap();
    files.write("kubepods/cpus_list", b"6").unwrap();
    // act
    let e = rdt
        .associate_cpus(&cpus("4-7"), ClassId::new(1))
        .unwrap_err();
    // assert: named, and not one CPU moved (a loop of single moves would have moved 4 and 5)
    assert!(
        matches!(e, ResctrlError::Request(RequestError::ForeignGroup { .. }))
            && e.to_string().contains("kubepods"),
        "{e}"
    );
    assert!(!files.exists("COS1"), "no group made");
    for cpu in [4, 5, 7] {
        assert_eq!(rdt.class_of(LogicalCpu::new(cpu)).unwrap(), ClassId::new(0));
    }
    assert_eq!(read(&resctrl, "kubepods/cpus_list"), "6\n");
}

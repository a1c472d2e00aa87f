//! What the agent's FUSE tests share: skylake-sp with resctrl's L3 CAT and MBA mounted in a
//! temp dir, its clock following the wall clock, and another tool's group in it that the
//! agent must never touch.

use rdt_pqos::sim::SimHandle;
use rdt_sim::SimPlatform;
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};

/// The mounted platform, with the group `kube` (L3 `f` in both domains, CPU 20) made as
/// another tool would. Unmounted when dropped.
pub fn mount_with_foreign_group() -> TestMount {
    let platform =
        SimPlatform::builtin("skylake-sp:rdt=l3cat,mba,cmt,mbmtotal,mbmlocal").expect("model");
    let m = TestMount::new(
        SimHandle::new(platform),
        MountConfig {
            clock: SimClock::WallClock,
            ..MountConfig::default()
        },
    );
    let kube = m.root().join("sys/fs/resctrl/kube");
    std::fs::create_dir(&kube).expect("mkdir kube");
    std::fs::write(kube.join("schemata"), "L3:0=f;1=f\n").expect("write");
    std::fs::write(kube.join("cpus_list"), "20").expect("write");
    m
}

/// The foreign group's `schemata` and `cpus_list`, to compare before and after.
pub fn foreign_group(m: &TestMount) -> String {
    let kube = m.root().join("sys/fs/resctrl/kube");
    let read = |f: &str| std::fs::read_to_string(kube.join(f)).unwrap_or_default();
    format!("{}{}", read("schemata"), read("cpus_list"))
}

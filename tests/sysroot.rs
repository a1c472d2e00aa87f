//! The facade on the simulated platform FUSE-mounted at DIR, the MSR interface:
//! `crate::mounted(Iface::Msr, DIR)` reads CPUID from `DIR/dev/cpu/0/cpuid`, the
//! topology from the x2APIC ids (IA32_X2APIC_APICID through `DIR/dev/cpu/N/msr`) or from
//! `DIR/sys/devices/system`, and the registers through `DIR/dev/cpu/N/msr`.
//! (`pqos --iface=msr --sysroot DIR` on the same mount is tested with the binary, in
//! `crates/pqos-cli/tests/e2e/sysroot.rs`.)

use rdt_pqos::{Backend, BackendExt, Iface};
use rdt_sim::fs::testing::TestMount;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

#[test]
fn the_facade_opens_the_mounted_platform_under_its_paths() {
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = crate::mounted(Iface::Msr, m.root()).open().expect("open");
    // PMU capabilities are the host's perf events: the model's, or none on a host without.
    let mut expected = m.platform().lock().capabilities().clone();
    let host_pmu = rdt.capabilities().pmu;
    assert!(
        host_pmu == expected.pmu || host_pmu == rdt_pqos::PmuCaps::default(),
        "{host_pmu:?}"
    );
    expected.pmu = host_pmu;
    assert_eq!(
        rdt.capabilities(),
        &expected,
        "CPUID from DIR/dev/cpu/0/cpuid, not the host's"
    );
    // x2APIC mode (CPUID.1:ECX[21]): the topology is the x2APIC ids', core ids included
    assert_eq!(rdt.topology(), m.platform().lock().topology());
    rdt.associate(rdt_pqos::LogicalCpu::new(3), rdt_pqos::ClassId::new(2))
        .expect("associate");
    assert_eq!(
        rdt.class_of(rdt_pqos::LogicalCpu::new(3)).expect("class"),
        rdt_pqos::ClassId::new(2)
    );
}

/// Without x2APIC mode (the `milan` dump: CPUID.1:ECX[21] clear, so IA32_X2APIC_APICID
/// faults) the MSR interface takes the topology from sysfs: the same placements, without the
/// core ids sysfs's aggregated lists do not give.
#[test]
fn without_x2apic_mode_the_msr_topology_comes_from_sysfs() {
    let m = TestMount::builtin("milan");
    let rdt = crate::mounted(Iface::Msr, m.root()).open().expect("open");
    let model = m.platform().lock().topology().clone();
    assert!(rdt.topology().cpus().iter().all(|p| p.core.is_none()));
    let without_core = |t: &rdt_pqos::Topology| -> Vec<rdt_pqos::CpuPlacement> {
        t.cpus()
            .iter()
            .map(|p| rdt_pqos::CpuPlacement { core: None, ..*p })
            .collect()
    };
    assert_eq!(without_core(rdt.topology()), without_core(&model));
}

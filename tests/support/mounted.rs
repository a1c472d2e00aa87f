//! Opening the simulated platform FUSE-mounted in a directory, shared by the facade's
//! integration tests and benches (included with `#[path]`): they build without feature `sim`
//! too, where `OpenOptions::sysroot` does not attach the simulator.

/// Options to open the simulated platform FUSE-mounted at `root` through `iface`: its files
/// ([`rdt_pqos::Paths::under`]) and the simulator's resctrl mount control and PMU counters
/// ([`rdt_sim::attach`]), injected as `OpenOptions::sysroot` injects them with feature `sim`.
pub fn mounted(iface: rdt_pqos::Iface, root: impl AsRef<std::path::Path>) -> rdt_pqos::OpenOptions {
    let root = root.as_ref();
    let sim = rdt_sim::attach(root);
    let pmu = sim.clone();
    rdt_pqos::OpenOptions::new(iface)
        .paths(rdt_pqos::Paths::under(root))
        .resctrl_mount_control(move || sim.mount_control())
        .fallback_pmu(move || pmu.pmu())
}

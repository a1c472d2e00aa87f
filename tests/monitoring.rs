//! One monitoring accumulator for both interfaces: the same simulated traffic gives the same
//! `MonValues` through the MSR interface (`/dev/cpu/N/msr`) and the OS interface (resctrl's
//! `mon_data`), including a poll where one L3 domain cannot be read, which follows the
//! policy documented in `rdt_core::monitor`.

use std::time::Duration;

use rdt_pqos::msr::MsrIo as _;
use rdt_pqos::msr::regs::{IA32_PQR_ASSOC, pqr_rmid};
use rdt_pqos::{
    Backend, BackendExt, CacheDomain, CpuSet, Iface, LogicalCpu, MonEvents, MonValues, Rmid,
};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{SimHandle, SimPlatform};

/// Polls of the run; the domain of CPU 3 cannot be read in the third.
const POLLS: usize = 5;
const UNAVAILABLE_POLL: usize = 2;

/// Monitors CPUs 2-3 (one in each socket's L3 on the E5-2650L v4, which numbers even CPUs
/// on socket 0 and odd on socket 1) for `POLLS` polls one simulated second apart, on a
/// fresh mounted platform with a manual clock, through `iface`.
fn run(iface: Iface) -> Vec<MonValues> {
    let sim = SimHandle::new(SimPlatform::builtin("broadwell-ep").expect("model"));
    let m = TestMount::new(
        sim.clone(),
        MountConfig {
            clock: SimClock::Manual,
            ..MountConfig::default()
        },
    );
    let mut rdt = crate::mounted(iface, m.root())
        .rdt_iface(None)
        .open()
        .expect("open");
    let cpus: CpuSet = "2-3".parse().expect("cpus");
    let events = MonEvents::LLC_OCCUPANCY
        | MonEvents::MBM_LOCAL
        | MonEvents::MBM_TOTAL
        | MonEvents::MBM_REMOTE;
    let g = rdt.start_monitoring(&cpus, events).expect("start");
    let domain = CacheDomain::new(1);
    assert_eq!(
        rdt.topology().get(LogicalCpu::new(3)).and_then(|p| p.l3),
        Some(domain)
    );
    // The RMID the group got in that domain, as the hardware sees it.
    let rmid = {
        let mut p = sim.lock();
        Rmid::new(pqr_rmid(
            p.read(LogicalCpu::new(3), IA32_PQR_ASSOC)
                .expect("PQR_ASSOC"),
        ))
    };
    assert_ne!(rmid.get(), 0);
    // One poll reads each of the 3 events of the domain once on resctrl; the MSR interface
    // reads IA32_QM_CTR up to QM_CTR_ATTEMPTS times per event before it gives up.
    let reads_per_poll = match iface {
        Iface::Os => 3,
        _ => 3 * rdt_pqos::msr::QM_CTR_ATTEMPTS,
    };
    let mut out = Vec::with_capacity(POLLS);
    for poll in 0..POLLS {
        sim.advance(Duration::from_secs(1));
        if poll == UNAVAILABLE_POLL {
            sim.lock().inject_unavailable(domain, rmid, reads_per_poll);
        }
        rdt.poll().expect("poll");
        out.push(rdt.values(g).expect("values").without_time());
    }
    rdt.stop_monitoring(g).expect("stop");
    out
}

#[test]
fn both_interfaces_give_the_same_values_for_the_same_traffic_and_unavailable_domain() {
    // act
    let msr = run(Iface::Msr);
    let os = run(Iface::Os);
    // assert: identical, poll by poll
    assert_eq!(msr, os);
    // ... and what they agree on is the documented policy
    let v = &msr;
    // the first poll: the traffic of the simulated second since the start, on both
    assert!(
        v[0].mbm_local_delta_bytes.is_some_and(|b| b > 0),
        "first poll: {:?}",
        v[0]
    );
    assert_eq!(v[0].mbm_total_bytes, v[0].mbm_total_delta_bytes);
    assert!(
        v[1].mbm_total_delta_bytes.is_some_and(|b| b > 0),
        "{:?}",
        v[1]
    );
    let gap = &v[UNAVAILABLE_POLL];
    assert_eq!(
        gap.llc_occupancy_bytes, None,
        "a partial sum would understate"
    );
    assert_eq!(gap.mbm_total_delta_bytes, None);
    assert_eq!(gap.mbm_remote_delta_bytes, None);
    assert!(gap.domains[0].llc_occupancy_bytes.is_some());
    assert!(gap.domains[0].mbm_total_delta_bytes.is_some());
    assert_eq!(gap.domains[1].llc_occupancy_bytes, None);
    assert_eq!(
        v[UNAVAILABLE_POLL + 1].domains[1].mbm_total_delta_bytes,
        None,
        "the interval after the gap has one end missing"
    );
    let last = &v[POLLS - 1];
    assert!(last.mbm_total_delta_bytes.is_some() && last.llc_occupancy_bytes.is_some());
    // cumulative counts lose nothing: they are the sum of every domain's traffic since start
    let cumulative = |v: &MonValues| v.mbm_total_bytes.expect("cumulative");
    let before_gap = cumulative(&v[UNAVAILABLE_POLL - 1]);
    let after_gap = cumulative(&v[UNAVAILABLE_POLL + 1]);
    let per_poll = v[1].mbm_total_delta_bytes.expect("delta");
    assert!(
        after_gap >= before_gap + per_poll,
        "the gap's traffic is counted: {before_gap} -> {after_gap} (one poll: {per_poll})"
    );
    assert_eq!(
        cumulative(last),
        last.domains
            .iter()
            .map(|d| d.mbm_total_bytes.expect("domain"))
            .sum::<u64>()
    );
}

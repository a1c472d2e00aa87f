//! One monitoring poll of 64 single-CPU groups (`pqos -m all:0-63`) on the in-process
//! simulated Skylake-SP (2 × 36 CPUs), through the real MSR backend.
//!
//! Besides the time per poll, it prints the MSR accesses one poll makes, per group and per
//! hardware event, counted by the simulated platform.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rdt_pqos::{Backend, BackendExt, CpuSet, LogicalCpu, MonEvents, Rdt};
use rdt_sim::{SimHandle, SimPlatform};

const GROUPS: u32 = 64;

fn platform_with_64_groups() -> (Rdt, SimHandle) {
    let sim = SimHandle::new(SimPlatform::builtin("skylake-sp").expect("built-in model"));
    let (caps, topology) = {
        let p = sim.lock();
        (p.capabilities().clone(), p.topology().clone())
    };
    let mut rdt =
        Rdt::from_msr(Box::new(sim.clone()), caps, topology, Box::new(sim.clone())).expect("open");
    for cpu in 0..GROUPS {
        let cpus: CpuSet = std::iter::once(LogicalCpu::new(cpu)).collect();
        rdt.start_monitoring(&cpus, MonEvents::PQOS_ALL)
            .expect("start group");
    }
    rdt.poll().expect("first poll");
    (rdt, sim)
}

fn poll_64_groups(c: &mut Criterion) {
    let (mut rdt, sim) = platform_with_64_groups();

    // MSR accesses of one poll: `all` needs 3 RMID events (occupancy, local, total).
    let (r0, w0) = sim.msr_accesses();
    sim.advance(Duration::from_secs(1));
    rdt.poll().expect("poll");
    let (r1, w1) = sim.msr_accesses();
    let per_group_event =
        f64::from(u32::try_from((r1 - r0) + (w1 - w0)).unwrap_or(u32::MAX)) / f64::from(GROUPS * 3);
    eprintln!(
        "one poll of {GROUPS} groups: {} RDMSR + {} WRMSR = {per_group_event:.2} MSR accesses per group per event",
        r1 - r0,
        w1 - w0
    );

    c.bench_function(
        "MsrBackend::poll/64 groups all events skylake-sp sim",
        |b| {
            b.iter(|| {
                rdt.poll().expect("poll");
                black_box(rdt.values(rdt_pqos::MonGroupId(0)));
            });
        },
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().noise_threshold(0.05);
    targets = poll_64_groups
}
criterion_main!(benches);

//! One monitoring poll of 64 single-CPU groups (`pqos --iface=os -m all:0-63`) over the two
//! L3 domains of a FUSE-mounted simulated Skylake-SP, through the facade's OS interface
//! (`Rdt::open_at(Iface::Os, ..)`): 64 `pqos-<pid>-<n>` monitor groups, each read with one
//! positioned read per (group, domain, event) of a `mon_data` file opened at start.
//!
//! Besides the time per poll, it prints the filesystem requests one poll makes, counted by
//! the mount (`.sim/stats`): reads, opens, lookups and attribute reads, directory scans.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rdt_pqos::{Backend, BackendExt, CpuSet, Iface, LogicalCpu, MonEvents, MonGroupId};
use rdt_sim::fs::testing::TestMount;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

const GROUPS: u32 = 64;

fn report(what: &str, c: &rdt_sim::fs::OpCounts) {
    eprintln!(
        "{what}: {} reads, {} opens, {} lookups + {} getattrs, {} opendirs + {} readdirs, \
         {} writes ({:.2} reads per group per domain per event)",
        c.read,
        c.open,
        c.lookup,
        c.getattr,
        c.opendir,
        c.readdir,
        c.write,
        // `all`: occupancy, local and total (remote = total - local); one domain per group
        f64::from(u32::try_from(c.read).unwrap_or(u32::MAX)) / f64::from(GROUPS * 3),
    );
}

fn poll_64_groups(c: &mut Criterion) {
    let m = TestMount::builtin(SKX_RDT);
    let mut rdt = mounted(Iface::Os, m.root())
        .open()
        .expect("open the OS interface");
    assert_eq!(rdt.topology().l3_domains().len(), 2, "two L3 domains");
    for cpu in 0..GROUPS {
        let cpus: CpuSet = std::iter::once(LogicalCpu::new(cpu)).collect();
        rdt.start_monitoring(&cpus, MonEvents::PQOS_ALL)
            .expect("start group");
    }

    m.mount().reset_op_counts();
    rdt.poll().expect("first poll");
    report("first poll", &m.mount().op_counts());
    std::thread::sleep(Duration::from_millis(10));
    m.mount().reset_op_counts();
    rdt.poll().expect("poll");
    report("next poll", &m.mount().op_counts());

    c.bench_function(
        "ResctrlBackend::poll/64 groups all events skylake-sp FUSE",
        |b| {
            b.iter(|| {
                rdt.poll().expect("poll");
                black_box(rdt.values(MonGroupId(0)));
            });
        },
    );
    m.mount().reset_op_counts();
    rdt.poll().expect("poll");
    report("a poll after the benchmark", &m.mount().op_counts());
    rdt.reset_monitoring().expect("remove the groups");
}

criterion_group! {
    name = benches;
    config = Criterion::default().noise_threshold(0.05);
    targets = poll_64_groups
}
criterion_main!(benches);

#[path = "../tests/support/mounted.rs"]
mod support;
use support::mounted;

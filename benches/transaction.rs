//! Plan + apply of a configuration of 15 named classes (with COS 0, every class of service
//! of a 16-class Broadwell-EP): each class 1 exclusive L3 way in both domains and 2 CPUs.
//! Two configurations alternate so every apply rewrites every class: the in-process
//! simulated platform through the MSR interface, and the FUSE-mounted one through resctrl;
//! both with their run directory, so every apply records and removes its journal.
//!
//! Besides the time, it prints the writes one apply makes per class (WRMSRs on MSR;
//! `write`/`mkdir`/`rmdir` requests on resctrl) and the run-directory files the journal
//! creates per apply.
#![allow(missing_docs)]

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use rdt_pqos::config::Config;
use rdt_pqos::proc::ProcFs;
use rdt_pqos::transaction::ApplyPlan;
use rdt_pqos::{Backend, Iface, MsrSource, OpenOptions, Paths};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::{SimHandle, SimPlatform};

const CLASSES: u32 = 15;

/// 15 classes of 1 way and 2 CPUs; `shift` moves every class one way and the CPUs along,
/// so the two configurations differ in every write.
fn config(shift: u32) -> Config {
    let mut text = String::new();
    for i in 0..CLASSES {
        let way = i + shift;
        let cpu = (2 * i + 2 * shift) % 30;
        text.push_str(&format!(
            "[[class]]\nname = \"c{i}\"\nl3 = {{ mask = \"{:#x}\" }}\ncpus = \"{}-{}\"\n\n",
            1u64 << way,
            cpu,
            cpu + 1
        ));
    }
    Config::parse_toml(&text, Path::new("bench.toml")).expect("config")
}

fn apply<B: Backend>(b: &mut B, c: &Config, proc: &ProcFs) -> usize {
    let planned = c.plan(b, proc).expect("plan");
    planned.plan.apply(b).into_result().expect("apply").len()
}

fn journal_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, Iterator::count)
}

fn msr(c: &mut Criterion) {
    let run = tempfile::tempdir().expect("run dir");
    let sim = SimHandle::new(SimPlatform::builtin("broadwell-ep").expect("model"));
    let source = {
        let p = sim.lock();
        MsrSource {
            io: Box::new(sim.clone()),
            pmu: Box::new(sim.clone()),
            capabilities: p.capabilities().clone(),
            topology: p.topology().clone(),
            name: "broadwell-ep".into(),
            run_dir: Some(run.path().to_owned()),
            cpuid: None,
            os: None,
            mmio: None,
        }
    };
    let mut rdt = OpenOptions::new(Iface::Msr)
        .open_source(source)
        .expect("open");
    let proc = ProcFs::host();
    let (a, b) = (config(0), config(1));
    apply(&mut rdt, &a, &proc);
    let (_, w0) = sim.msr_accesses();
    let writes = apply(&mut rdt, &b, &proc);
    let (_, w1) = sim.msr_accesses();
    eprintln!(
        "MSR: one apply = {writes} steps, {} WRMSR = {:.2} per class; run dir holds {} file(s) \
         after it (msr.lock, msr-classes; no journal)",
        w1 - w0,
        f64::from(u32::try_from(w1 - w0).unwrap_or(u32::MAX)) / f64::from(CLASSES),
        journal_files(run.path()),
    );
    c.bench_function(
        "config plan+apply/15 classes broadwell-ep sim MSR",
        |bench| {
            bench.iter(|| {
                apply(&mut rdt, &a, &proc);
                apply(&mut rdt, &b, &proc);
            });
        },
    );
}

fn resctrl(c: &mut Criterion) {
    let m = TestMount::builtin("broadwell-ep");
    let paths = Paths::under(m.root());
    let mut rdt = mounted(Iface::Os, m.root()).open().expect("open");
    let proc = ProcFs::host();
    let (a, b) = (config(0), config(1));
    apply(&mut rdt, &a, &proc);
    m.mount().reset_op_counts();
    let steps = apply(&mut rdt, &b, &proc);
    let ops = m.mount().op_counts();
    let changes = ops.write + ops.mkdir + ops.rmdir;
    eprintln!(
        "resctrl: one apply = {steps} steps, {} writes + {} mkdir + {} rmdir = {:.2} per class \
         ({} reads, {} opens)",
        ops.write,
        ops.mkdir,
        ops.rmdir,
        f64::from(u32::try_from(changes).unwrap_or(u32::MAX)) / f64::from(CLASSES),
        ops.read,
        ops.open,
    );
    c.bench_function(
        "config plan+apply/15 classes broadwell-ep FUSE resctrl",
        |bench| {
            bench.iter(|| {
                apply(&mut rdt, &a, &proc);
                apply(&mut rdt, &b, &proc);
            });
        },
    );
    let _ = std::fs::remove_dir_all(&paths.run);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = msr, resctrl
}
criterion_main!(benches);

#[path = "../tests/support/mounted.rs"]
mod support;
use support::mounted;

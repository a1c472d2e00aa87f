//! The FUSE face against the real kernel: every test mounts a model in a temp dir (as root,
//! through `/dev/fuse`) and drives it with plain file operations and the production readers
//! (`Topology::from_sysfs`, `DevCpuid`, `DevCpuMsr`). Without `/dev/fuse` they fail, saying
//! what to install; they are never skipped.
#![allow(clippy::tests_outside_test_module)]

use std::io::{ErrorKind, Read as _};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdt_core::{Capabilities, CpuidSource, LogicalCpu, Topology};
use rdt_host::cpuid::DevCpuid;
use rdt_host::topology::TopologyFromSysfs;
use rdt_msr::{DevCpuMsr, MsrAddr, MsrError, MsrIo};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::{BUILTIN_MODELS, SimHandle, SimPlatform};

const EIO: i32 = 5;
const EBUSY: i32 = 16;
const EINVAL: i32 = 22;
const IA32_QM_EVTSEL: u32 = 0xc8d;
const IA32_QM_CTR: u32 = 0xc8e;
const L3_MASK_1: u32 = 0xc91;
/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal` (undoing the kernel's quirk).
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

fn cpu(n: u32) -> LogicalCpu {
    LogicalCpu::new(n)
}

/// Whether `dir` is a mount point now.
fn mounted(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("/proc/self/mounts");
    let dir = dir.to_str().expect("utf-8 path");
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(dir))
}

fn manual(model: &str) -> TestMount {
    let p = SimPlatform::builtin(model).expect("built-in model");
    TestMount::new(
        SimHandle::new(p),
        MountConfig {
            clock: SimClock::Manual,
            ..MountConfig::default()
        },
    )
}

/// A topology's placements without core ids, which sysfs's aggregated lists do not give
/// (`Topology::from_sysfs` leaves them `None`).
fn placements(t: &Topology) -> Vec<rdt_core::CpuPlacement> {
    t.cpus()
        .iter()
        .map(|p| rdt_core::CpuPlacement { core: None, ..*p })
        .collect()
}

#[test]
fn sysfs_topology_equals_the_models_on_every_builtin_model() {
    for model in BUILTIN_MODELS {
        // arrange
        let m = TestMount::builtin(model);
        // act
        let topo = Topology::from_sysfs(m.path("sys/devices/system"))
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        // assert
        assert_eq!(
            placements(&topo),
            placements(m.platform().lock().topology()),
            "{model}"
        );
    }
}

#[test]
fn sysfs_cache_files_agree_with_the_models_l3_geometry() {
    for model in BUILTIN_MODELS {
        let m = TestMount::builtin(model);
        let geometry = m
            .platform()
            .lock()
            .capabilities()
            .l3_cache
            .expect("L3 geometry");
        let dir = m.path("sys/devices/system/cpu/cpu0/cache/index3");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);
        assert_eq!(read("level"), "3\n", "{model}");
        assert_eq!(read("type"), "Unified\n", "{model}");
        assert_eq!(
            read("size"),
            format!("{}K\n", geometry.total_size() / 1024),
            "{model}"
        );
        assert_eq!(
            read("ways_of_associativity"),
            format!("{}\n", geometry.ways),
            "{model}"
        );
        assert_eq!(
            read("number_of_sets"),
            format!("{}\n", geometry.sets),
            "{model}"
        );
        // L1 data: per core, so exactly the thread siblings.
        let l1 = m.path("sys/devices/system/cpu/cpu0/cache/index0");
        assert_eq!(
            std::fs::read_to_string(l1.join("type")).expect("type"),
            "Data\n"
        );
        assert_eq!(
            std::fs::read_to_string(l1.join("shared_cpu_list")).expect("list"),
            std::fs::read_to_string(
                m.path("sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
            )
            .expect("siblings"),
            "{model}"
        );
    }
}

/// Leaves a reader of topology and RDT asks for.
const LEAVES: &[(u32, u32)] = &[
    (0, 0),
    (1, 0),
    (4, 0),
    (4, 1),
    (4, 2),
    (4, 3),
    (4, 4),
    (7, 0),
    (0xb, 0),
    (0xb, 1),
    (0xb, 2),
    (0xf, 0),
    (0xf, 1),
    (0x10, 0),
    (0x10, 1),
    (0x10, 2),
    (0x10, 3),
    (0x16, 0),
    (0x1f, 0),
    (0x8000_0000, 0),
    (0x8000_0001, 0),
    (0x8000_0008, 0),
    (0x8000_001d, 0),
    (0x8000_001d, 3),
    (0x8000_001e, 0),
    (0x8000_0020, 0),
    (0x8000_0020, 1),
    (0x8000_0020, 2),
    (0x8000_0020, 3),
    (0x8000_0020, 5),
    (0x8000_0026, 0),
    (0x8000_0026, 3),
];

#[test]
fn dev_cpuid_through_the_mount_answers_as_the_model_on_every_cpu() {
    for model in BUILTIN_MODELS {
        // arrange
        let m = TestMount::builtin(model);
        let (cpuid, caps, cpus) = {
            let p = m.platform().lock();
            let cpus: Vec<LogicalCpu> = p.topology().cpus().iter().map(|c| c.cpu).collect();
            (p.cpuid(), p.capabilities().clone(), cpus)
        };
        // The 384-CPU genoa is sampled (every 7th CPU and the last) to keep CI short; the
        // in-process test `synth::tests::a_topology_from_cpuid_alone_equals_the_sysfs_topology_on_every_model`
        // reads every CPU of every model.
        let step = if cpus.len() > 200 { 7 } else { 1 };
        let sample: Vec<LogicalCpu> = cpus
            .iter()
            .copied()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || i + 1 == cpus.len())
            .map(|(_, c)| c)
            .collect();
        let mut apic_ids = std::collections::BTreeSet::new();
        for &c in &sample {
            // act
            let dev = DevCpuid::open(m.path("dev"), c).expect("open cpuid");
            // assert
            for &(leaf, sub) in LEAVES {
                // the model's answer; every leaf answers, as the instruction does
                assert_eq!(
                    dev.cpuid(leaf, sub),
                    Some(rdt_sim::fs::instruction_answer(&cpuid, c, leaf, sub)),
                    "{model} CPU {c} leaf {leaf:#x}.{sub}"
                );
            }
            // x2APIC id (leaf 0BH EDX; the 8-bit id of leaf 1 repeats past 256 CPUs)
            apic_ids.insert(dev.cpuid(0xb, 0).map(|r| r.edx));
        }
        assert_eq!(apic_ids.len(), sample.len(), "{model}: per-CPU x2APIC ids");
        let dev0 = DevCpuid::open(m.path("dev"), cpu(0)).expect("open cpuid");
        assert_eq!(Capabilities::detect(&dev0), caps, "{model}");
    }
}

#[test]
fn msr_positioned_reads_and_writes_round_trip_and_a_bad_mask_is_eio() {
    // arrange
    let m = manual("broadwell-ep");
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    // act
    msr.write(cpu(0), MsrAddr::new(L3_MASK_1), 0xff00)
        .expect("write COS1");
    // assert: socket 0 (even CPUs) reads it, socket 1 keeps all ways.
    assert_eq!(
        msr.read(cpu(2), MsrAddr::new(L3_MASK_1)).expect("read"),
        0xff00
    );
    assert_eq!(
        msr.read(cpu(1), MsrAddr::new(L3_MASK_1)).expect("read"),
        0xfffff
    );
    for bad in [0, 0xf0f, 1 << 20] {
        match msr.write(cpu(0), MsrAddr::new(L3_MASK_1), bad) {
            Err(MsrError::Write { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(EIO), "{bad:#x}");
            }
            other => panic!("mask {bad:#x}: {other:?}"),
        }
    }
    assert_eq!(
        msr.read(cpu(0), MsrAddr::new(L3_MASK_1)).expect("read"),
        0xff00
    );
    match msr.read(cpu(0), MsrAddr::new(0x11)) {
        Err(MsrError::Read { source, .. }) => assert_eq!(source.raw_os_error(), Some(EIO)),
        other => panic!("{other:?}"),
    }
    // The msr driver moves 8 bytes per register: other counts are EINVAL.
    let f = std::fs::File::open(m.path("dev/cpu/0/msr")).expect("open");
    let mut four = [0u8; 4];
    let e = f
        .read_exact_at(&mut four, u64::from(L3_MASK_1))
        .expect_err("4 bytes");
    assert_eq!(e.raw_os_error(), Some(EINVAL));
}

#[test]
fn one_model_is_behind_the_mount_and_the_in_process_handle() {
    let m = manual("skylake-sp");
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    let mut handle = m.platform().clone();
    // A write through dev/cpu is what the in-process handle reads ...
    msr.write(cpu(0), MsrAddr::new(L3_MASK_1), 0x7)
        .expect("write");
    assert_eq!(
        MsrIo::read(&mut handle, cpu(0), MsrAddr::new(L3_MASK_1)).expect("read"),
        0x7
    );
    // ... and the other way round, and the accesses are counted by the one model.
    let (reads, _) = m.platform().msr_accesses();
    handle
        .write(cpu(0), MsrAddr::new(0xc92), 0x70)
        .expect("write");
    assert_eq!(msr.read(cpu(0), MsrAddr::new(0xc92)).expect("read"), 0x70);
    assert_eq!(m.platform().msr_accesses().0, reads + 1);
}

fn sh(script: &str) -> (bool, String, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .output()
        .expect("run sh");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cat_and_echo_work_on_the_mount() {
    let m = TestMount::builtin("broadwell-ep");
    let root = m.root().display();
    let (ok, out, _) = sh(&format!("cat {root}/sys/devices/system/cpu/online"));
    assert!(ok);
    assert_eq!(out, "0-55\n");
    let (ok, out, err) = sh(&format!(
        "echo 'msr 0xc91 nth=2' > {root}/.sim/fail && cat {root}/.sim/fail"
    ));
    assert!(ok, "{err}");
    assert_eq!(out, "msr 0xc91 nth=2 errno=EIO\n");
    // dash reports any write error as "I/O error"; the errno is checked in the unit tests.
    let (ok, _, _) = sh(&format!("echo 'msr 0xc91 nth=two' > {root}/.sim/fail"));
    assert!(!ok);
    let (_, status, _) = sh(&format!("cat {root}/.sim/status"));
    assert_eq!(
        status,
        "line 1: `nth=two`: nth must be a number of at least 1\n"
    );
    let (ok, _, err) = sh(&format!("echo 1 > {root}/sys/devices/system/cpu/online"));
    assert!(!ok && err.contains("Permission denied"), "{err}");
}

#[test]
fn an_armed_fault_fails_the_nth_write_with_its_errno_and_changes_nothing() {
    // arrange
    let m = manual("broadwell-ep");
    std::fs::write(m.path(".sim/fail"), "msr 0xc91 cpu=0 nth=2 errno=EBUSY\n").expect("arm");
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    let writes_before = m.platform().msr_accesses().1;
    // act
    let first = msr.write(cpu(0), MsrAddr::new(L3_MASK_1), 0xf);
    let other_cpu = msr.write(cpu(1), MsrAddr::new(L3_MASK_1), 0xf0);
    let listed = std::fs::read_to_string(m.path(".sim/fail")).expect("list");
    let second = msr.write(cpu(0), MsrAddr::new(L3_MASK_1), 0xff);
    let third = msr.write(cpu(0), MsrAddr::new(L3_MASK_1), 0xfff);
    // assert
    first.expect("the first matching write passes");
    other_cpu.expect("CPU 1 does not match cpu=0");
    assert_eq!(listed, "msr 0xc91 cpu=0 nth=1 errno=EBUSY\n");
    match second {
        Err(MsrError::Write { source, .. }) => assert_eq!(source.raw_os_error(), Some(EBUSY)),
        other => panic!("{other:?}"),
    }
    third.expect("a fault fires once");
    // The failed write never reached the model: three WRMSRs, 0xf then 0xfff on CPU 0.
    let mut h = m.platform().clone();
    assert_eq!(h.msr_accesses().1, writes_before + 3);
    assert_eq!(
        MsrIo::read(&mut h, cpu(0), MsrAddr::new(L3_MASK_1)).expect("read"),
        0xfff
    );
    assert_eq!(
        std::fs::read_to_string(m.path(".sim/fail")).expect("list"),
        ""
    );
}

#[test]
fn path_faults_cover_reads_of_any_view() {
    let m = manual("milan");
    std::fs::write(
        m.path(".sim/fail"),
        "read sys/devices/system/cpu/*/cache/*/shared_cpu_list errno=ENOSPC\n",
    )
    .expect("arm");
    let e = Topology::from_sysfs(m.path("sys/devices/system")).expect_err("fault fires");
    assert!(e.to_string().contains("shared_cpu_list"), "{e}");
    assert_eq!(
        placements(&Topology::from_sysfs(m.path("sys/devices/system")).expect("fault gone")),
        placements(m.platform().lock().topology())
    );
}

#[test]
fn with_the_wall_clock_mbm_counts_grow_while_the_reader_sleeps() {
    // arrange: RMID 0, MBM total, read on CPU 8 (the default scenario's thrasher).
    let m = TestMount::builtin("broadwell-ep");
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    msr.write(cpu(8), MsrAddr::new(IA32_QM_EVTSEL), 2)
        .expect("evtsel");
    // act
    let a = msr.read(cpu(8), MsrAddr::new(IA32_QM_CTR)).expect("ctr");
    std::thread::sleep(Duration::from_millis(300));
    let b = msr.read(cpu(8), MsrAddr::new(IA32_QM_CTR)).expect("ctr");
    // assert
    assert!(b > a, "MBM total grows with wall-clock time: {a} -> {b}");
    assert!(m.platform().lock().now() >= Duration::from_millis(300));
}

#[test]
fn with_a_manual_clock_counts_move_only_when_the_caller_advances() {
    let m = manual("broadwell-ep");
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    msr.write(cpu(8), MsrAddr::new(IA32_QM_EVTSEL), 2)
        .expect("evtsel");
    let a = msr.read(cpu(8), MsrAddr::new(IA32_QM_CTR)).expect("ctr");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(msr.read(cpu(8), MsrAddr::new(IA32_QM_CTR)).expect("ctr"), a);
    m.platform().advance(Duration::from_secs(1));
    assert!(msr.read(cpu(8), MsrAddr::new(IA32_QM_CTR)).expect("ctr") > a);
}

#[test]
fn drop_unmounts_and_removes_the_directory_even_with_a_file_open() {
    let m = TestMount::builtin("broadwell-ep");
    let dir = m.root().to_owned();
    assert!(mounted(&dir));
    let open = std::fs::File::open(m.path("dev/cpu/0/msr")).expect("open");
    drop(m);
    assert!(!mounted(&dir), "no stale mount of {}", dir.display());
    drop(open);
    assert!(!dir.exists(), "{} removed", dir.display());
}

#[test]
fn a_panicking_test_still_unmounts() {
    let dir = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let m = TestMount::builtin("broadwell-ep");
        *dir.lock().expect("lock") = Some(m.root().to_owned());
        panic!("the test fails while mounted");
    });
    assert!(result.is_err());
    let dir = dir.into_inner().expect("lock").expect("mounted");
    assert!(!mounted(&dir), "no stale mount of {}", dir.display());
    assert!(!dir.exists());
}

#[test]
fn a_schemata_write_is_what_dev_cpu_msr_reads_and_the_other_way_round() {
    // arrange
    let m = manual("broadwell-ep");
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    std::fs::create_dir(m.path("sys/fs/resctrl/p1")).expect("mkdir p1");
    let closid = {
        // The new group takes the lowest free CLOSID, 1.
        let schemata = std::fs::read_to_string(m.path("sys/fs/resctrl/p1/schemata")).expect("read");
        assert!(schemata.contains("L3:0=fffff;1=fffff"), "{schemata}");
        1
    };
    // act
    std::fs::write(m.path("sys/fs/resctrl/p1/schemata"), "L3:0=ff\n").expect("write schemata");
    std::fs::write(m.path("sys/fs/resctrl/p1/cpus_list"), "4\n").expect("move CPU 4");
    // assert: the mask of CLOSID 1 in L3 domain 0 (socket 0), and CPU 4's IA32_PQR_ASSOC.
    assert_eq!(
        msr.read(cpu(0), MsrAddr::new(0xc90 + closid))
            .expect("mask"),
        0xff
    );
    assert_eq!(
        msr.read(cpu(1), MsrAddr::new(0xc90 + closid))
            .expect("mask"),
        0xfffff
    );
    let assoc = msr.read(cpu(4), MsrAddr::new(0xc8f)).expect("PQR_ASSOC");
    assert_eq!(assoc >> 32, u64::from(closid), "{assoc:#x}");
    // And a failed schemata write (a fault) leaves the register alone.
    std::fs::write(
        m.path(".sim/fail"),
        "write sys/fs/resctrl/*/schemata errno=EIO\n",
    )
    .expect("arm");
    let e = std::fs::write(m.path("sys/fs/resctrl/p1/schemata"), "L3:0=f\n").expect_err("fault");
    assert_eq!(e.raw_os_error(), Some(EIO));
    assert_eq!(
        msr.read(cpu(0), MsrAddr::new(0xc90 + closid))
            .expect("mask"),
        0xff
    );
}

#[test]
fn resctrl_options_the_model_cannot_honour_are_refused_by_name() {
    let p = SimPlatform::builtin("broadwell-ep").expect("model");
    let dir = tempfile::tempdir().expect("tempdir");
    let e = rdt_sim::fs::Mount::new(
        SimHandle::new(p),
        dir.path(),
        MountConfig {
            resctrl: Some("mba_MBps".parse().expect("options")),
            ..MountConfig::default()
        },
    )
    .expect_err("Broadwell-EP has no MBA");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        chain.push_str(&format!(": {s}"));
        source = s.source();
    }
    assert!(chain.contains("mba_MBps requires MBM"), "{chain}");
    assert!(!mounted(dir.path()));
}

#[test]
fn without_resctrl_the_directory_is_empty_and_registers_are_left_alone() {
    let mut p = SimPlatform::builtin("skylake-sp").expect("model");
    MsrIo::write(&mut p, cpu(0), MsrAddr::new(L3_MASK_1), 0x3).expect("write");
    let m = TestMount::new(
        SimHandle::new(p),
        MountConfig {
            resctrl: None,
            ..MountConfig::default()
        },
    );
    let entries = std::fs::read_dir(m.path("sys/fs/resctrl"))
        .expect("dir")
        .count();
    assert_eq!(entries, 0);
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    assert_eq!(
        msr.read(cpu(0), MsrAddr::new(L3_MASK_1)).expect("read"),
        0x3
    );
}

/// The `rdt-sim` binary: mounts, serves, unmounts on SIGTERM and saves its state.
#[test]
fn rdt_sim_binary_serves_until_sigterm_and_keeps_its_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("mnt");
    std::fs::create_dir(&dir).expect("mkdir");
    let state = tmp.path().join("state.json");
    let start = || {
        let child = Command::new(env!("CARGO_BIN_EXE_rdt-sim"))
            .args(["mount", "--model", "milan", "--no-resctrl", "--state"])
            .arg(&state)
            .arg(&dir)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rdt-sim");
        wait_mounted(&dir);
        child
    };
    let stop = |mut child: std::process::Child| {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let status = child.wait().expect("wait");
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("stderr");
        assert!(status.success(), "{stderr}");
        assert!(!mounted(&dir), "unmounted on SIGTERM:\n{stderr}");
        stderr
    };

    let child = start();
    assert_eq!(
        std::fs::read_to_string(dir.join(".sim/model")).expect("model"),
        "milan builtin:milan\n"
    );
    DevCpuMsr::with_root(dir.join("dev/cpu"))
        .write(cpu(0), MsrAddr::new(L3_MASK_1), 0xf0f)
        .expect("write");
    let stderr = stop(child);
    assert!(stderr.contains("state saved"), "{stderr}");

    let child = start();
    let v = DevCpuMsr::with_root(dir.join("dev/cpu"))
        .read(cpu(0), MsrAddr::new(L3_MASK_1))
        .expect("read");
    stop(child);
    assert_eq!(v, 0xf0f, "the state file carried the register over");
}

#[test]
fn rdt_sim_models_lists_every_builtin_model_with_its_cpus() {
    let out = Command::new(env!("CARGO_BIN_EXE_rdt-sim"))
        .arg("models")
        .output()
        .expect("run rdt-sim models");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), BUILTIN_MODELS.len(), "{text}");
    assert!(text.starts_with("broadwell-ep (default): "), "{text}");
    assert!(
        text.contains("milan: ") && text.contains(", 128 CPUs, 16 L3 domains"),
        "{text}"
    );
}

#[test]
fn mounting_on_a_missing_directory_names_it() {
    let p = SimPlatform::builtin("broadwell-ep").expect("model");
    let missing = Path::new("/nonexistent/rdt-sim-mount-point");
    let e = rdt_sim::fs::Mount::new(SimHandle::new(p), missing, MountConfig::default())
        .expect_err("no such directory");
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(
        e.to_string().contains("/nonexistent/rdt-sim-mount-point"),
        "{e}"
    );
}

#[test]
fn stats_count_each_client_request_on_resctrl_once_by_kind() {
    // arrange: resctrl is served uncached, so every syscall of a client reaches the model
    let m = manual(SKX_RDT);
    let occ = m.path("sys/fs/resctrl/mon_data/mon_L3_00/llc_occupancy");
    let f = std::fs::File::open(&occ).expect("open llc_occupancy");
    m.mount().reset_op_counts();
    // act: three positioned reads of a file kept open, one stat, one listing
    let mut buf = [0u8; 64];
    for _ in 0..3 {
        let _ = f.read_at(&mut buf, 0).expect("pread");
    }
    let before = m.mount().op_counts();
    std::fs::metadata(m.path("sys/fs/resctrl/schemata")).expect("stat");
    let after_stat = m.mount().op_counts();
    let names = std::fs::read_dir(m.path("sys/fs/resctrl"))
        .expect("opendir")
        .count();
    let after_scan = m.mount().op_counts();
    // assert
    assert_eq!(before.read, 3, "{before}");
    assert_eq!(
        (before.open, before.lookup, before.getattr, before.readdir),
        (0, 0, 0, 0),
        "{before}"
    );
    let stat = after_stat.since(&before);
    assert_eq!(stat.read + stat.open + stat.readdir, 0, "{stat}");
    assert!(
        stat.lookup + stat.getattr >= 1,
        "a stat reaches the filesystem: {stat}"
    );
    let scan = after_scan.since(&after_stat);
    assert!(
        names > 5 && scan.opendir == 1 && scan.readdir >= 1,
        "{scan}"
    );
    let text = std::fs::read_to_string(m.path(".sim/stats")).expect(".sim/stats");
    assert!(
        text.contains(&format!("read {}\n", after_scan.read)),
        "{text}"
    );
    assert_eq!(
        m.mount().op_counts().read,
        after_scan.read,
        ".sim reads are not counted"
    );
    std::fs::write(m.path(".sim/stats"), "reset\n").expect("reset");
    assert_eq!(m.mount().op_counts().read, 0);
}

#[test]
fn writing_resctrl_mount_remounts_with_cdp_and_mba_mbps() {
    // arrange
    let m = manual(SKX_RDT);
    let ctl = m.path(".sim/resctrl_mount");
    let root = m.path("sys/fs/resctrl");
    std::fs::create_dir(root.join("other")).expect("mkdir a group");
    assert_eq!(std::fs::read_to_string(&ctl).expect("read"), "\n");
    // act
    std::fs::write(&ctl, "remount cdp,mba_MBps\n").expect("remount");
    // assert: the new mount's files, no groups, the options readable
    assert_eq!(
        std::fs::read_to_string(&ctl).expect("read"),
        "cdp,mba_MBps\n"
    );
    assert!(root.join("info/L3CODE").is_dir() && !root.join("info/L3").exists());
    assert!(!root.join("other").exists());
    let schemata = std::fs::read_to_string(root.join("schemata")).expect("schemata");
    assert!(
        schemata.contains("L3CODE:") && schemata.contains("MB:"),
        "{schemata}"
    );
    // a bad option is EINVAL and leaves the mount as it was
    let e = std::fs::write(&ctl, "remount cdpl2\n").expect_err("skylake-sp has no L2 CAT");
    assert_eq!(e.raw_os_error(), Some(EINVAL));
    assert_eq!(
        std::fs::read_to_string(&ctl).expect("read"),
        "cdp,mba_MBps\n"
    );
    assert_eq!(
        m.mount()
            .resctrl_options()
            .map(|o| o.to_string())
            .as_deref(),
        Some("cdp,mba_MBps")
    );
}

/// `rdt-sim mount --kernel`: the release decides the resctrl files (turin-dump: BMEC files on
/// 6.17; counter assignment on 6.18+, the default 6.19, read and written through FUSE).
#[test]
fn rdt_sim_kernel_option_picks_the_resctrl_files_of_the_release() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("mnt");
    std::fs::create_dir(&dir).expect("mkdir");
    let child = Command::new(env!("CARGO_BIN_EXE_rdt-sim"))
        .args(["mount", "--model", "turin-dump", "--kernel", "6.17"])
        .arg(&dir)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rdt-sim");
    wait_mounted(&dir);
    let l3mon = dir.join("sys/fs/resctrl/info/L3_MON");
    let has_config = l3mon.join("mbm_total_bytes_config").exists();
    let has_mode = l3mon.join("mbm_assign_mode").exists();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let mut child = child;
    assert!(child.wait().expect("wait").success());
    assert!(has_config && !has_mode, "6.17: BMEC files, no ABMC");

    // the default release through an in-test FUSE mount
    let m = TestMount::builtin("turin-dump");
    let root = m.path("sys/fs/resctrl");
    let assignments = root.join("mbm_L3_assignments");
    std::fs::write(&assignments, "mbm_total_bytes:0=_\n").expect("unassign");
    let text = std::fs::read_to_string(&assignments).expect("read");
    assert!(text.starts_with("mbm_total_bytes:0=_;2=e;"), "{text}");
    assert_eq!(
        std::fs::read_to_string(root.join("mon_data/mon_L3_00/mbm_total_bytes")).expect("read"),
        "Unassigned\n"
    );
    let err = std::fs::write(&assignments, "mbm_totl_bytes:0=e\n").expect_err("unknown event");
    assert_eq!(err.raw_os_error(), Some(2), "ENOENT");
}

/// `arch/x86/kernel/cpu/resctrl/core.c` `__check_quirks_intel`: the mounted stock
/// `skylake-sp` (Gold 6140, stepping 4) shows MB only in resctrl, while `dev/cpu` keeps
/// CPUID's L3 CAT; and `dev/cpu/N/msr` answers the x2APIC id (0x802) CPUID.0BH:EDX gives.
#[test]
fn stock_skylake_sp_hides_l3_in_resctrl_not_in_dev_cpu() {
    let m = manual("skylake-sp");
    let root = m.path("sys/fs/resctrl");
    assert_eq!(
        std::fs::read_to_string(root.join("schemata")).expect("schemata"),
        "MB:0=100;1=100\n"
    );
    assert!(!root.join("info/L3").exists() && !root.join("info/L3_MON").exists());
    assert!(!root.join("mon_data").exists());
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    msr.write(cpu(0), MsrAddr::new(L3_MASK_1), 0x3)
        .expect("L3 mask");
    for c in [0, 1, 71] {
        let dev = DevCpuid::open(m.path("dev"), cpu(c)).expect("open cpuid");
        let edx = dev.cpuid(0xb, 0).expect("leaf 0BH").edx;
        let id = msr.read(cpu(c), MsrAddr::new(0x802)).expect("x2APIC id");
        assert_eq!(id, u64::from(edx), "cpu {c}");
    }
}

/// `arch/x86/kernel/msr.c` and `cpuid.c`: `SEEK_END` is refused (`no_seek_end_llseek`);
/// `cpuid_read` moves one leaf per 16-byte record; the instruction answers every leaf
/// (an unrecorded one: zeros; above the maximum on Intel: the highest basic leaf); common
/// non-RDT MSRs (TSC, EFER) read instead of EIO.
#[test]
fn dev_cpu_files_answer_as_the_drivers_do() {
    use std::io::{Seek as _, SeekFrom};
    let m = manual("broadwell-ep");
    for dev in ["msr", "cpuid"] {
        let mut f = std::fs::File::open(m.path(&format!("dev/cpu/0/{dev}"))).expect("open");
        let e = f.seek(SeekFrom::End(0)).expect_err("SEEK_END");
        assert_eq!(e.raw_os_error(), Some(EINVAL), "{dev}");
        assert_eq!(f.seek(SeekFrom::Start(0x10)).expect("SEEK_SET"), 0x10);
    }
    let f = std::fs::File::open(m.path("dev/cpu/0/cpuid")).expect("open");
    let mut two = [0u8; 32];
    f.read_exact_at(&mut two, 0).expect("32 bytes");
    let dev = DevCpuid::open(m.path("dev"), cpu(0)).expect("open cpuid");
    let leaf1 = dev.cpuid(1, 0).expect("leaf 1");
    assert_eq!(two[16..20], leaf1.eax.to_le_bytes(), "record 2 is leaf 1");
    assert_eq!(dev.cpuid(8, 0).map(|r| r.eax), Some(0), "reserved leaf 8");
    assert_eq!(dev.cpuid(0x4000_0000, 0), dev.cpuid(0x14, 0));
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    assert_eq!(
        msr.read(cpu(3), MsrAddr::new(0xC000_0080)).expect("EFER"),
        0xD01
    );
    assert!(msr.read(cpu(0), MsrAddr::new(0x10)).is_ok(), "TSC");
}

/// kernfs and resctrl metadata through the mount: `rdtgroup_move_task` takes `0` as the
/// writing thread (`current`); resctrl files report `st_size` 0; `mkdir` honours the
/// mode (`rdtgroup_mkdir`, and kernfs gives `mon_groups`/`mon_data` the parent's mode); a
/// directory's link count is 2 + its subdirectories; `last_cmd_status` keeps the first
/// 511 bytes of a long message.
#[test]
fn resctrl_metadata_and_task_zero_are_the_kernels() {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    let m = manual("broadwell-ep");
    let root = m.path("sys/fs/resctrl");
    // mkdir -m 0700 (umask 022 leaves it)
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(root.join("p0"))
        .expect("mkdir");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode(&root.join("p0")), 0o700);
    assert_eq!(mode(&root.join("p0/mon_groups")), 0o700);
    assert_eq!(mode(&root.join("info")), 0o755);
    // st_size 0, nlink 2 + subdirectories
    assert_eq!(
        std::fs::metadata(root.join("schemata"))
            .expect("stat")
            .len(),
        0
    );
    let subdirs = std::fs::read_dir(&root)
        .expect("ls")
        .filter(|e| {
            e.as_ref()
                .expect("entry")
                .file_type()
                .expect("type")
                .is_dir()
        })
        .count();
    assert_eq!(
        std::fs::metadata(&root).expect("stat").nlink(),
        2 + subdirs as u64
    );
    // "0" moves the writing thread
    let tid: u32 = std::fs::read_link("/proc/thread-self")
        .expect("thread-self")
        .file_name()
        .and_then(|n| n.to_str()?.parse().ok())
        .expect("tid");
    std::fs::write(root.join("p0/tasks"), "0\n").expect("write 0");
    assert_eq!(
        std::fs::read_to_string(root.join("p0/tasks")).expect("tasks"),
        format!("{tid}\n")
    );
    let root_tasks = std::fs::read_to_string(root.join("tasks")).expect("root tasks");
    assert!(root_tasks.lines().any(|l| l == "1"), "every other thread");
    assert!(!root_tasks.lines().any(|l| l == tid.to_string()));
    // a 600-byte resource name: the status keeps 511 bytes
    let long = format!("{}:0=f\n", "x".repeat(600));
    assert!(std::fs::write(root.join("schemata"), long).is_err());
    let status = std::fs::read_to_string(root.join("info/last_cmd_status")).expect("status");
    assert_eq!(status.len(), 511);
}

/// `rdt-sim mount --scenario builtin:NAME`: the scenario runs, and `.sim/workloads` shows its
/// ground truth through the mount; an unknown name fails before mounting, naming the option.
#[test]
fn rdt_sim_scenario_option_installs_a_builtin_scenario_shown_in_sim_workloads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("mnt");
    std::fs::create_dir(&dir).expect("mkdir");
    let bad = Command::new(env!("CARGO_BIN_EXE_rdt-sim"))
        .args([
            "mount",
            "--model",
            "skylake-sp",
            "--scenario",
            "builtin:nope",
        ])
        .arg(&dir)
        .output()
        .expect("run rdt-sim");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && stderr.contains("--scenario builtin:nope"),
        "{stderr}"
    );
    assert!(!mounted(&dir));

    let child = Command::new(env!("CARGO_BIN_EXE_rdt-sim"))
        .args([
            "mount",
            "--model",
            "skylake-sp",
            "--no-resctrl",
            "--manual-clock",
        ])
        .args(["--scenario", "builtin:dpdk-pipeline"])
        .arg(&dir)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rdt-sim");
    wait_mounted(&dir);
    let text = std::fs::read_to_string(dir.join(".sim/workloads")).expect("workloads");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let mut child = child;
    assert!(child.wait().expect("wait").success());
    let first: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("a line")).expect("JSON");
    assert_eq!(first["name"], "pipeline", "{text}");
    // the paper's Table 4: the aggressor leaves the pipeline ~61 % of its 16 Mpps
    let mpps = first["ops_per_s"].as_f64().expect("ops/s") / 1e6;
    assert!((9.0..11.0).contains(&mpps), "{text}");
}

/// Waits (at most 10 s) for an `rdt-sim mount` of `dir` to serve its files.
#[track_caller]
fn wait_mounted(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.join(".sim/model").exists() {
        assert!(
            Instant::now() < deadline,
            "rdt-sim did not mount within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The RDT 1.3 generation over FUSE, through the production readers: the ACPI tables
/// (`rdt_mmio::AcpiTables::read`), the CXL regions, and `dev/mem` (`rdt_mmio::DevMem`), which
/// sees what the model counts and holds what it writes; faults reach `dev/mem` writes.
#[test]
fn xeon_rdt13_serves_its_acpi_tables_and_mmio_registers() {
    use rdt_mmio::{AcpiTables, DevMem, MbaControl, MmioIo as _, RegionMemory, regs};
    let m = manual("xeon-rdt13");
    let tables = AcpiTables::read(m.root()).expect("tables");
    assert!(tables.has_mmio() && tables.irdt.is_some());
    let kinds: Vec<_> = tables
        .regions()
        .iter()
        .map(|r| (r.id.get(), r.kind))
        .collect();
    assert_eq!(kinds, [(0, RegionMemory::Ddr), (1, RegionMemory::Cxl)]);
    let erdt = tables.erdt.expect("ERDT");
    assert!(
        Some(&erdt) == m.platform().lock().mmio().and_then(|x| x.erdt()),
        "the ERDT as served is the model's"
    );
    let names: Vec<_> = std::fs::read_dir(m.path("dev"))
        .expect("dev")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    assert!(
        names.contains(&"mem".to_owned()) && names.contains(&"cpu".to_owned()),
        "{names:?}"
    );

    // CPU 2 counts under RMID 1: its traffic shows in the region counters read through dev/mem
    let mut msr = DevCpuMsr::with_root(m.path("dev/cpu"));
    msr.write(cpu(2), MsrAddr::new(0xc8f), 1 << 32 | 1)
        .expect("PQR_ASSOC");
    m.platform().advance(Duration::from_secs(1));
    let l3 = m.platform().lock().topology().cpus()[2].l3.expect("L3");
    let d = erdt
        .domain(u16::try_from(l3.get()).expect("id"))
        .expect("domain");
    let mmrc = d.mmrc.as_ref().expect("MMRC");
    let mut mem = DevMem::open(m.root()).expect("dev/mem");
    let ddr = mem.read(mmrc.address(1, 0).expect("addr")).expect("read") & regs::BW_COUNT_MASK;
    let cxl = mem.read(mmrc.address(1, 1).expect("addr")).expect("read") & regs::BW_COUNT_MASK;
    assert!(ddr > 0 && cxl > 0 && ddr > 2 * cxl, "{ddr} {cxl}");
    // an MBA write through dev/mem is what the model holds
    let mba = d.marc.as_ref().expect("MARC");
    let addr = mba.address(MbaControl::Max, 1, 1).expect("addr");
    let old = mem.read(addr).expect("read");
    mem.write(addr, regs::with_mba_field(old, 1, 64))
        .expect("write");
    let held = m.platform().lock().mmio_read(addr).expect("model");
    assert_eq!(regs::mba_field(held, 1), 64);
    // errors: an unaligned access, a read-only counter, a fault armed on dev/mem
    let raw = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path("dev/mem"))
        .expect("open");
    let mut b = [0u8; 8];
    assert_eq!(
        raw.read_at(&mut b, addr + 4).unwrap_err().raw_os_error(),
        Some(EINVAL)
    );
    assert_eq!(
        raw.write_at(&[0; 8], mmrc.address(1, 0).expect("addr"))
            .unwrap_err()
            .raw_os_error(),
        Some(EIO)
    );
    std::fs::write(m.path(".sim/fail"), "write dev/mem nth=1 errno=EIO\n").expect("arm");
    assert!(mem.write(addr, 0).is_err());
    mem.write(addr, 0).expect("the fault fired once");
    // a model without the generation has none of it
    let skx = manual("skylake-sp");
    assert_eq!(
        AcpiTables::read(skx.root()).expect("none"),
        AcpiTables::default()
    );
    assert!(!skx.path("dev/mem").exists());
}

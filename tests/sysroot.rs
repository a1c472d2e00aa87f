//! The scenarios of `paper.rs` and `alloc.rs` again, but through the production code path:
//! `pqos --iface=msr --sysroot DIR` against the simulated platform mounted at DIR over FUSE,
//! so every register access is a positioned read or write of `DIR/dev/cpu/N/msr`
//! (`DevCpuMsr`), CPUID comes from `DIR/dev/cpu/0/cpuid` and the topology from
//! `DIR/sys/devices/system`.
//!
//! The mount is served in-process ([`rdt_sim::fs::testing::TestMount`]), resctrl mounted as
//! `rdt-sim mount` does by default (so pqos warns about mixing interfaces, as on a host), with
//! the model's clock following wall-clock time, so monitoring runs in real time (`-t 1` takes a second)
//! and the tests assert relations, not exact numbers. The native path has no PMU source yet,
//! so the IPC and MISSES columns are absent.

use std::path::Path;
use std::process::Command;

use rdt::{Backend, Iface, Paths, Rdt};
use rdt_sim::fs::testing::TestMount;
use rdt_sim::{Scenario, SimHandle};

use crate::eqnice;
use crate::util::monitor::{number_after, parse_text};
use crate::util::{Run, pqos_bin};

/// A built-in model mounted in a temp dir; unmounted when dropped, even on a failed assert.
struct Mounted {
    mount: TestMount,
}

impl Mounted {
    fn new(model: &str) -> Self {
        Self {
            mount: TestMount::builtin(model),
        }
    }

    fn root(&self) -> &Path {
        self.mount.root()
    }

    fn platform(&self) -> &SimHandle {
        self.mount.platform()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(pqos_bin());
        cmd.arg("--iface=msr")
            .arg("--sysroot")
            .arg(self.root())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE")
            .env_remove("RDT_SYSROOT");
        cmd
    }

    /// Runs `pqos --iface=msr --sysroot DIR ARGS...`.
    fn pqos(&self, args: &[&str]) -> Run {
        self.command(args).output().expect("run pqos").into()
    }
}

const MONITOR: &[&str] = &["-m", "all:[2-7];all:[8-10]", "-t", "1", "-i", "10"];

#[test]
fn paper_allocation_commands_print_pqos_lines_through_dev_cpu_msr() {
    let m = Mounted::new("broadwell-ep");
    let writes_before = m.platform().msr_accesses().1;

    let e = m.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 1 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 0 L3CA COS2 => MASK 0x3\n\
         SOCKET 1 L3CA COS2 => MASK 0x3\n\
         Allocation configuration altered.\n",
        e.stdout
    );
    assert!(
        !e.stderr.contains("simulated"),
        "the native path, not --sim: {}",
        e.stderr
    );
    // pqos looks for resctrl under the sysroot too, and warns as it does on a host.
    assert!(
        e.stderr.contains("WARN: resctl filesystem mounted!"),
        "{}",
        e.stderr
    );
    assert!(
        m.platform().msr_accesses().1 > writes_before,
        "the writes reached the mounted model"
    );

    let a = m.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    eqnice!("Allocation configuration altered.\n", a.stdout);

    let s = m.pqos(&["-s"]).ok().stdout;
    for socket in ["0", "1"] {
        let block = s
            .split("L3CA COS definitions for Socket ")
            .find(|b| b.starts_with(socket))
            .unwrap_or_else(|| panic!("socket {socket} block in\n{s}"));
        assert!(
            block.contains("\n    L3CA COS0 => MASK 0xfffff\n"),
            "{block}"
        );
        assert!(
            block.contains("\n    L3CA COS1 => MASK 0xffe00\n"),
            "{block}"
        );
        assert!(block.contains("\n    L3CA COS2 => MASK 0x3\n"), "{block}");
    }
    for cpu in 0..56 {
        let cos = match cpu {
            2..=7 => 1,
            8..=10 => 2,
            _ => 0,
        };
        let needle = format!("    Core {cpu}, ");
        let line = s
            .lines()
            .find(|l| l.starts_with(&needle))
            .unwrap_or_else(|| panic!("core {cpu} in\n{s}"));
        assert!(line.ends_with(&format!("=> COS{cos}, RMID0")), "{line}");
    }
}

#[test]
fn paper_isolating_the_thrasher_gives_the_pipeline_its_ways_back_in_real_time() {
    let m = Mounted::new("broadwell-ep");
    let verbose = m.pqos(&["-D"]).ok().stdout;
    let way_kib = number_after(&verbose, "Way size:") / 1024.0;
    let l3_kib = number_after(&verbose, "Total size:") / 1024.0;

    let before = parse_text(&m.pqos(MONITOR).ok().stdout);
    m.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    m.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    let after = parse_text(&m.pqos(MONITOR).ok().stdout);

    assert_eq!(before.len(), 2, "-t 1 -i 10: the first sample and one more");
    let last_b = before.last().expect("sample");
    let last_a = after.last().expect("sample");
    assert!(
        !last_b["2-7"].contains_key("IPC"),
        "no PMU on the native path yet: {last_b:?}"
    );
    let (pipe0, thrash0) = (last_b["2-7"]["LLC[KB]"], last_b["8-10"]["LLC[KB]"]);
    let (pipe1, thrash1) = (last_a["2-7"]["LLC[KB]"], last_a["8-10"]["LLC[KB]"]);

    assert!(
        thrash0 > pipe0 * 4.0,
        "thrasher dominates before: {thrash0} vs {pipe0}"
    );
    assert!(
        thrash1 <= 2.0 * 2.0 * way_kib,
        "thrasher within 2 ways x 2 sockets: {thrash1}"
    );
    assert!(pipe1 > pipe0 * 3.0, "pipeline recovers: {pipe0} -> {pipe1}");
    assert!(
        pipe1 <= 2.0 * 11.0 * way_kib,
        "pipeline within 11 ways x 2 sockets: {pipe1}"
    );
    assert!(pipe1 + thrash1 <= 2.0 * l3_kib);
    // Bandwidth is measured over real time: the model's clock follows the wall clock.
    assert!(last_b["8-10"]["MBL[MB/s]"] > 0.0, "{last_b:?}");
    assert!(
        last_a["2-7"]["MBL[MB/s]"] < last_b["2-7"]["MBL[MB/s]"] / 2.0,
        "less of the pipeline misses: {last_b:?} -> {last_a:?}"
    );
}

#[test]
fn paper_first_sample_reports_zero_bandwidth_and_nonzero_occupancy() {
    let m = Mounted::new("broadwell-ep");
    let samples = parse_text(&m.pqos(MONITOR).ok().stdout);
    for (group, row) in &samples[0] {
        assert!(row["MBL[MB/s]"].abs() < f64::EPSILON, "{group}: {row:?}");
        assert!(row["LLC[KB]"] > 0.0, "{group}: {row:?}");
    }
    assert!(samples[1]["8-10"]["MBL[MB/s]"] > 0.0);
}

#[test]
fn paper_ungrouped_cores_are_one_row_each_and_rmids_are_released() {
    let m = Mounted::new("broadwell-ep");
    let run = m.pqos(&["-m", "all:0-3", "-t", "1"]).ok();
    let samples = parse_text(&run.stdout);
    let groups: Vec<&String> = samples[0].keys().collect();
    assert_eq!(groups, ["0", "1", "2", "3"]);
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.lines()
            .filter(|l| l.starts_with("    Core "))
            .all(|l| l.ends_with("RMID0")),
        "{s}"
    );
}

#[test]
fn paper_allocation_while_monitoring_runs_is_not_blocked() {
    let m = Mounted::new("broadwell-ep");
    let monitor = m
        .command(&["-m", "all:0", "-t", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pqos");
    std::thread::sleep(std::time::Duration::from_millis(500));
    m.pqos(&["-e", "llc:5=0x3"]).ok();
    let monitor = monitor.wait_with_output().expect("monitor run");
    assert!(
        monitor.status.success(),
        "{}",
        String::from_utf8_lossy(&monitor.stderr)
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    L3CA COS5 => MASK 0x3\n"), "{s}");
}

#[test]
fn paper_a_scenario_set_in_process_is_what_pqos_measures_through_the_mount() {
    let m = Mounted::new("broadwell-ep");
    let scenario: Scenario =
        r#"{"workloads":[{"name":"db","cpus":"0","working_set_mib":8,"traffic_mibps":3000}]}"#
            .parse()
            .expect("scenario");
    m.platform()
        .lock()
        .set_scenario(&scenario)
        .expect("CPU 0 exists");
    let run = m.pqos(&["-m", "llc:0-1", "-t", "1"]).ok();
    let last = parse_text(&run.stdout).pop().expect("a sample");
    let (db, idle) = (last["0"]["LLC[KB]"], last["1"]["LLC[KB]"]);
    assert!(
        db > 4.0 * 1024.0 && db <= 8.0 * 1024.0,
        "CPU 0 caches most of its 8 MiB: {db}"
    );
    assert!(idle < 1024.0, "CPU 1 is idle: {idle}");
}

#[test]
fn alloc_cdp_reset_halves_classes_and_masks_have_data_and_code() {
    let m = Mounted::new("broadwell-ep");
    eqnice!(
        "Allocation reset successful\n",
        m.pqos(&["-R", "l3cdp-on"]).ok().stdout
    );
    let e = m.pqos(&["-e", "llc:3d=0x0f00,3c=0xf000"]).ok().stdout;
    eqnice!(
        "SOCKET 0 L3CA COS3 => DATA 0xf00,CODE 0xfffff\n\
         SOCKET 1 L3CA COS3 => DATA 0xf00,CODE 0xfffff\n\
         SOCKET 0 L3CA COS3 => DATA 0xf00,CODE 0xf000\n\
         SOCKET 1 L3CA COS3 => DATA 0xf00,CODE 0xf000\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.contains("\n    L3CA COS3 => DATA 0xf00, CODE 0xf000\n"),
        "{s}"
    );
    assert!(!s.contains("COS8 =>"), "only 8 classes with CDP on:\n{s}");
    let bad = m.pqos(&["-e", "llc:8=0xf"]).failed();
    assert!(bad.stderr.contains("COS8"), "{}", bad.stderr);
    // The model holds CDP on in IA32_L3_QOS_CFG of both sockets.
    let mut msr = rdt::msr::DevCpuMsr::with_root(m.root().join("dev/cpu"));
    for cpu in [0, 1] {
        let cfg = rdt::msr::MsrIo::read(
            &mut msr,
            rdt::LogicalCpu::new(cpu),
            rdt::msr::MsrAddr::new(0xc81),
        )
        .expect("IA32_L3_QOS_CFG");
        assert_eq!(cfg & 1, 1, "CPU {cpu}");
    }

    eqnice!(
        "Allocation reset successful\n",
        m.pqos(&["-R", "l3cdp-off"]).ok().stdout
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    L3CA COS3 => MASK 0xfffff\n"), "{s}");
    assert!(s.contains("\n    L3CA COS15 => MASK 0xfffff\n"), "{s}");
}

#[test]
fn alloc_l2_cat_on_sapphire_rapids_is_per_l2_id() {
    let m = Mounted::new("sapphire-rapids");
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(d.contains("            L2 CAT\n"), "{d}");
    let e = m.pqos(&["-e", "l2@0,1:1=0xf;l2@7:2=0xff00"]).ok().stdout;
    eqnice!(
        "L2ID 0 L2CA COS1 => MASK 0xf\n\
         L2ID 1 L2CA COS1 => MASK 0xf\n\
         L2ID 7 L2CA COS2 => MASK 0xff00\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    let l2_block = |id: u32| {
        s.split("L2CA COS definitions for L2ID ")
            .find(|b| b.starts_with(&format!("{id}:")))
            .unwrap_or_else(|| panic!("L2ID {id} in\n{s}"))
            .to_owned()
    };
    assert!(l2_block(1).contains("    L2CA COS1 => MASK 0xf\n"));
    assert!(l2_block(7).contains("    L2CA COS2 => MASK 0xff00\n"));
    assert!(l2_block(2).contains("    L2CA COS1 => MASK 0xffff\n"));
}

#[test]
fn alloc_intel_mba_is_rounded_to_the_granularity() {
    let m = Mounted::new("skylake-sp");
    let e = m.pqos(&["-e", "mba:1=50;mba@1:2=75"]).ok().stdout;
    eqnice!(
        "SOCKET 0 MBA COS1 => 50% requested, 50% applied\n\
         SOCKET 1 MBA COS1 => 50% requested, 50% applied\n\
         SOCKET 1 MBA COS2 => 75% requested, 80% applied\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    MBA COS2 => 80% available\n"), "{s}");
    let bad = m.pqos(&["-e", "mba:1=0"]).failed();
    assert!(bad.stderr.contains("mba:1=0"), "{}", bad.stderr);
}

#[test]
fn alloc_milan_has_one_l3_domain_per_ccx_and_amd_mba_units() {
    let m = Mounted::new("milan");
    let e = m.pqos(&["-e", "llc@0,15:1=0xff;mba@3:1=256"]).ok().stdout;
    eqnice!(
        "Core Complex 0 L3CA COS1 => MASK 0xff\n\
         Core Complex 15 L3CA COS1 => MASK 0xff\n\
         Core Complex 3 MBA COS1 => 256 requested, 256 applied\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    let headers = s
        .lines()
        .filter(|l| l.contains("COS definitions for"))
        .count();
    assert_eq!(headers, 16, "16 CCX domains from the mounted sysfs:\n{s}");
    m.pqos(&["-e", "llc@1:2=0xf0f"]).ok();
    m.pqos(&["-a", "cos:2=8"]).ok();
    let s = m.pqos(&["-s"]).ok().stdout;
    let line = s
        .lines()
        .find(|l| l.starts_with("    Core 8, "))
        .expect("core 8");
    assert!(line.contains("L3ID 1 => COS2"), "{line}");
}

#[test]
fn alloc_reset_restores_every_class_and_core() {
    let m = Mounted::new("skylake-sp");
    let fresh = m.pqos(&["-s"]).ok().stdout;
    m.pqos(&["-e", "llc:1=0xf;mba:1=30"]).ok();
    m.pqos(&["-a", "core:1=0-3"]).ok();
    assert_ne!(m.pqos(&["-s"]).ok().stdout, fresh);
    eqnice!("Allocation reset successful\n", m.pqos(&["-R"]).ok().stdout);
    eqnice!(fresh, m.pqos(&["-s"]).ok().stdout);
}

#[test]
fn an_injected_wrmsr_fault_fails_pqos_with_the_drivers_error() {
    let m = Mounted::new("broadwell-ep");
    // The second WRMSR of COS1's mask (socket 1's) fails as a #GP would.
    std::fs::write(m.root().join(".sim/fail"), "msr 0xc91 nth=2 errno=EIO\n").expect("arm");
    let run = m.pqos(&["-e", "llc:1=0xff"]).failed();
    assert!(
        run.stderr.to_lowercase().contains("c91"),
        "names the register: {}",
        run.stderr
    );
    // Socket 0 took the mask, socket 1 never saw it, as on hardware.
    let s = m.pqos(&["-s"]).ok().stdout;
    let (socket0, socket1) = s
        .split_once("L3CA COS definitions for Socket 1")
        .expect("socket 1");
    assert!(socket0.contains("\n    L3CA COS1 => MASK 0xff\n"), "{s}");
    assert!(socket1.contains("\n    L3CA COS1 => MASK 0xfffff\n"), "{s}");
    // The fault is spent: a retry succeeds.
    m.pqos(&["-e", "llc:1=0xff"]).ok();
}

#[test]
fn sysroot_comes_from_the_environment_too() {
    let m = Mounted::new("milan");
    let run: Run = Command::new(pqos_bin())
        .args(["--iface=msr", "-s"])
        .env("RDT_SYSROOT", m.root())
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run pqos")
        .into();
    let run = run.ok();
    assert!(
        run.stdout.contains("L3 Cluster (or Core Complex) 15"),
        "{}",
        run.stdout
    );
}

#[test]
fn the_facade_opens_the_mounted_platform_under_its_paths() {
    let m = Mounted::new("skylake-sp");
    let mut rdt = Rdt::open_at(Iface::Msr, &Paths::under(m.root())).expect("open");
    assert_eq!(
        rdt.capabilities(),
        m.platform().lock().capabilities(),
        "CPUID from DIR/dev/cpu/0/cpuid, not the host's"
    );
    assert_eq!(rdt.topology(), m.platform().lock().topology());
    rdt.associate(rdt::LogicalCpu::new(3), rdt::ClassId::new(2))
        .expect("associate");
    assert_eq!(
        rdt.class_of(rdt::LogicalCpu::new(3)).expect("class"),
        rdt::ClassId::new(2)
    );
}

//! Issue 34's differences from pqos: the AMD `-v` lines, `-e`'s CPU-enumeration order of
//! Core Complexes, `-R`'s AMD reset value, `-r` on turin's 32 ABMC counters per domain, MBA
//! 4.0 (`-R mba40-on|off`, `MBA 4.0 extensions:`) and top-pids mode (`-p` alone).

use super::util::{Machine, Sim};

/// `-v` names no internal API (the sim's PMU source was logged as
/// `OpenOptions::fallback_pmu`), and on AMD logs what pqos logs: MBA and SMBA `non-linear`
/// with pqos's `max`/`step` (lib/os_cap.c `os_cap_mba_discover` on the OS interface,
/// lib/hw_cap.c `amd_cap_mba_discover` on MSR), a one-thread cache `(1 bits)` (lib/cpuinfo.c
/// `nearest_pow2`), and `resctrl detected` once when the interface is named.
#[test]
fn verbose_amd_lines_are_pqos_s() {
    for model in ["milan", "genoa", "turin"] {
        let sim = Sim::new(model);
        let os = sim.pqos(&["--iface=os", "-v", "-d"]).ok();
        let log = os.raw_stdout.clone() + &os.stderr;
        assert!(!log.contains("OpenOptions"), "{model}: {log}");
        assert!(!log.contains("fallback_pmu"), "{model}: {log}");
        assert!(
            log.contains("INFO: MBA details: #COS=16, non-linear, max=100, step=1"),
            "{model}: {log}"
        );
        assert!(!log.contains("linear, max=2048") && !log.contains("linear, max=4096"));
        assert_eq!(log.matches("INFO: resctrl detected").count(), 1, "{model}: {log}");
        let msr = sim.pqos(&["--iface=msr", "-v", "-d"]).ok();
        let log = msr.raw_stdout.clone() + &msr.stderr;
        assert!(
            log.contains("INFO: MBA details: #COS=16, non-linear, max=0, step=0"),
            "{model}: {log}"
        );
        assert!(!log.contains("resctrl detected"), "{model}: {log}");
    }
    // milan's capture is SMT off: its L1 and L2 are one thread's, which pqos logs as 1 bit
    let run = Sim::new("milan").pqos(&["--iface=os", "-v", "-d"]).ok();
    let log = run.raw_stdout + &run.stderr;
    assert!(
        log.contains("INFO: CACHE: type 1, level 1, max id sharing this cache 1 (1 bits)"),
        "{log}"
    );
    assert!(!log.contains("(0 bits)"), "{log}");
    assert!(log.contains("max id sharing this cache 8 (3 bits)"), "{log}");
}

/// `-e` without `@ids` on an EPYC 9654 (`genoa`) and 9655 (`turin`): one `Core Complex N`
/// line per CCX in the order pqos enumerates them (lib/utils.c `pqos_cpu_get_l3cat_ids`:
/// first seen in CPU order), which the firmware numbers 0, 4, 8, 2, 6, 10, 3, 7, 11, 1,
/// 5, 9 per package; ascending with `-s`.
#[test]
fn alloc_lines_follow_the_cpu_enumeration_order_of_ccxs() {
    let want_pkg0 = [0, 4, 8, 2, 6, 10, 3, 7, 11, 1, 5, 9];
    for model in ["genoa", "turin"] {
        let sim = Sim::new(model);
        for iface in ["msr", "os"] {
            let run = sim.pqos(&[&format!("--iface={iface}"), "-e", "llc:1=0xf"]).ok();
            let ids: Vec<u32> = run
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("Core Complex "))
                .map(|l| l.split(' ').next().unwrap().parse().unwrap())
                .collect();
            assert_eq!(ids[..12], want_pkg0, "{model} {iface}: {}", run.stdout);
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), ids.len(), "each CCX once");
            let mba = sim.pqos(&[&format!("--iface={iface}"), "-e", "mba:1=256"]).ok();
            let first: Vec<&str> = mba
                .stdout
                .lines()
                .filter(|l| l.contains(" MBA COS1 "))
                .take(3)
                .collect();
            assert_eq!(
                first,
                [
                    "Core Complex 0 MBA COS1 => 256 requested, 256 applied",
                    "Core Complex 4 MBA COS1 => 256 requested, 256 applied",
                    "Core Complex 8 MBA COS1 => 256 requested, 256 applied",
                ],
                "{model} {iface}: {}",
                mba.stdout
            );
        }
    }
}

/// `-R` on `turin` (MSR, 12-bit bandwidth fields) leaves every MBA and SMBA class at
/// pqos's 0x800 = 2048 units (lib/allocation.c `hw_alloc_reset` writes the AMD
/// `mba_default_val`, `PQOS_MBA_MAX_AMD`), not 2^12.
#[test]
fn reset_on_turin_leaves_mba_and_smba_at_2048_as_pqos() {
    let sim = Sim::new("turin");
    sim.pqos(&["--iface=msr", "-e", "mba:1=100;smba:2=300"]).ok();
    sim.pqos(&["--iface=msr", "-R"]).ok();
    let show = sim.pqos(&["--iface=msr", "-s"]).ok();
    assert!(show.stdout.contains("    MBA COS1 => 2048 available"), "{}", show.stdout);
    assert!(show.stdout.contains("    SMBA COS2 => 2048 available"), "{}", show.stdout);
    assert!(!show.stdout.contains("4096"), "{}", show.stdout);
}

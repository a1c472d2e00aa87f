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

/// `pqos -r` (one group per CPU) and `-r -m all:0-191` on the stock `turin` (192 CPUs, 16 per
/// L3 domain, ABMC with 32 counters per domain of which resctrl's default group holds two
/// once resctrl is mounted): every CPU is monitored, as pqos monitors them; the one group
/// per domain beyond the counters counts occupancy and IPC with blank bandwidth columns,
/// and a warning names those groups. On both interfaces.
#[test]
fn reset_monitoring_on_turin_monitors_every_cpu_and_names_those_without_counters() {
    let sim = Sim::new("turin");
    for args in [
        &["--iface=os", "-r", "-t", "1", "--sim-virtual-clock"][..],
        &["--iface=os", "-r", "-m", "all:0-191", "-t", "1", "--sim-virtual-clock"][..],
        // resctrl is mounted now (its root holds two counters per domain): MSR as well
        &["--iface=msr", "-r", "-m", "all:0-191", "-t", "1", "--sim-virtual-clock"][..],
    ] {
        let run = sim.pqos(args).ok();
        let rows: Vec<&str> = run
            .stdout
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        assert_eq!(rows.len() % 192, 0, "{args:?}: every CPU a row per sample");
        let cpus: std::collections::BTreeSet<&str> = rows
            .iter()
            .map(|r| r.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(cpus.len(), 192, "{args:?}");
        let warn = run.raw_stdout.clone() + &run.stderr;
        let line = warn
            .lines()
            .find(|l| l.starts_with("WARN: no free MBM counter for 12 monitoring groups"))
            .unwrap_or_else(|| panic!("{args:?}: no warning in {warn}"));
        // the 16th CPU of each CCX (its second thread of the last core: 96 + 8k + 7)
        let named: Vec<u32> = line
            .split_once('(')
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(list, _)| list.split("; ").map(|c| c.parse().unwrap()).collect())
            .unwrap();
        assert_eq!(named, (0..12).map(|k| 103 + 8 * k).collect::<Vec<u32>>(), "{line}");
        let starved = rows
            .iter()
            .find(|r| r.split_whitespace().next() == Some("103"))
            .unwrap();
        assert_eq!(starved.split_whitespace().count(), 4, "CORE IPC MISSES LLC only: {starved:?}");
        assert_eq!(starved.len(), 8 + 5 * 12, "blank MBL and MBR cells: {starved:?}");
        let fed = rows
            .iter()
            .find(|r| r.split_whitespace().next() == Some("102"))
            .unwrap();
        assert_eq!(fed.split_whitespace().count(), 6, "{fed:?}");
    }
}

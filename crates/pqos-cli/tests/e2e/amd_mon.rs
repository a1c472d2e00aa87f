//! Current platforms' monitoring through the OS interface of the in-process simulated
//! platform (`--sim=MODEL -I`): AMD ABMC's assignable counters on `turin` (intel-cmt-cat
//! issue 311: pqos v25.04 shows nothing or 0 for groups without a counter), BMEC on
//! `genoa` and ABMC's `event_filter` on `turin` through `--mbm-config` and `-R`, and what
//! `-d`/`-D` add on those models and on `sapphire-rapids-snc2`.

use std::collections::BTreeMap;

use crate::util::monitor::{Row, parse_text};
use crate::util::{Machine, Reaped, Run, Sim};

/// The last sample of a 64-core run, after checking that every core shows MBL and MBT.
#[track_caller]
fn every_core_has_bandwidth(run: &Run) -> BTreeMap<String, Row> {
    let samples = parse_text(&run.stdout);
    let last = samples.last().expect("a sample").clone();
    assert_eq!(last.len(), 64, "{}", run.stdout);
    for (core, row) in &last {
        assert!(
            row.contains_key("MBL[MB/s]") && row.contains_key("MBT[MB/s]"),
            "core {core} has no bandwidth: {row:?}\n{}",
            run.stdout
        );
    }
    last
}

/// 64 per-core groups on turin-dump (8 L3 domains of 8 cores, 32 counters per domain): each
/// group now holds counters in its own domain only, so every group reads bandwidth. With
/// the kernel's mkdir default (a counter per event in every domain) the 16th group and
/// later had none and read blank.
#[test]
fn turin_every_per_core_group_reads_bandwidth() {
    let sim = Sim::new("turin-dump");
    let run = sim
        .monitor(&["-I", "-m", "mbl:0-63;mbt:0-63", "-t", "2"])
        .ok();
    let last = every_core_has_bandwidth(&run);
    // The model's workload runs on cores 2-10: two of them in different domains.
    for core in ["2", "8"] {
        assert!(last[core]["MBL[MB/s]"] > 0.0, "{core}: {:?}", last[core]);
        assert!(last[core]["MBT[MB/s]"] > 0.0, "{core}: {:?}", last[core]);
    }
}

/// The same 64 per-core groups on the MSR interface, with resctrl mounted in `mbm_event`
/// mode (ABMC on, the root's counters held): each group gets an ABMC counter per event in
/// its domain through L3_QOS_ABMC_CFG and reads it. pqos v25.04's MSR interface reads the
/// RMIDs' own events, which count nothing with ABMC on (intel-cmt-cat issue 311).
#[test]
fn turin_msr_every_per_core_group_reads_bandwidth_through_abmc() {
    let sim = Sim::new("turin");
    let d = sim.pqos(&["-I", "-d"]).ok().stdout;
    assert!(d.contains("mbm_assign_mode): mbm_event"), "{d}");
    let run = sim
        .monitor(&["--iface=msr", "-m", "mbl:0-63;mbt:0-63", "-t", "2"])
        .ok();
    let last = every_core_has_bandwidth(&run);
    for core in ["2", "8"] {
        assert!(last[core]["MBT[MB/s]"] > 0.0, "{core}: {:?}", last[core]);
    }
}

/// Task groups count in every L3 domain: 16 of them need 32 counters per domain, where the
/// root holds 2 of the 32. Groups asking for bandwidth only (`mbl:` and `mbt:` without the
/// PMU events pqos adds) cannot do without: the
/// start is refused before any group is made, naming the 16th group, the counters needed
/// and free, and the holders. With `all:` the 16th group is monitored without bandwidth, as
/// pqos monitors it, and a warning names it.
#[test]
fn turin_more_groups_than_counters_is_a_clear_error_and_leaves_no_group() {
    let sim = Sim::new("turin");
    let sleepers: Vec<Reaped> = (0..16).map(|_| Reaped::sleeper()).collect();
    let pids = sleepers
        .iter()
        .map(|s| s.pid().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let only_mbl = ["--disable-mon-ipc", "--disable-mon-llc_miss"];
    let run = sim.monitor(
        &[
            &["-I", "-p", &format!("mbl:{pids};mbt:{pids}"), "-t", "1"][..],
            &only_mbl[..],
        ]
        .concat(),
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let last = pids.rsplit(',').next().expect("pids");
    for part in [
        &format!("PID {last} monitoring start error: out of MBM counters"),
        "(16) need 32 of its counters (one per MBM event each), but only 30 of its 32 are free",
        "the groups holding them (counters in that domain) are: / (2);",
        "no group was created",
    ] {
        assert!(run.stderr.contains(part), "{part}: {}", run.stderr);
    }
    let state = std::fs::read_to_string(sim.state()).expect("state file");
    assert!(
        !state.contains("pqos-"),
        "no monitor group is left: {state:.2000}"
    );
    // 15 fit.
    let fifteen = pids.rsplit_once(',').expect("pids").0;
    sim.monitor(
        &[
            &[
                "-I",
                "-p",
                &format!("mbl:{fifteen};mbt:{fifteen}"),
                "-t",
                "1",
            ][..],
            &only_mbl[..],
        ]
        .concat(),
    )
    .ok();
    // all 16 with `all`: the last one without bandwidth, named
    let run = sim
        .monitor(&["-I", "-p", &format!("all:{pids}"), "-t", "1"])
        .ok();
    let log = run.raw_stdout.clone() + &run.stderr;
    assert!(
        log.contains(&format!(
            "no free MBM counter for 1 monitoring group ({last})"
        )),
        "{log}"
    );
}

/// `--mbm-config` sets BMEC's `mbm_*_bytes_config` (genoa) or ABMC's `event_filter`
/// (turin), `-D` shows it, `-R` puts the defaults back; on the MSR interface it needs BMEC.
#[test]
fn mbm_config_round_trips_and_reset_restores_the_defaults() {
    for (model, title) in [
        ("genoa", "MBM event configuration (BMEC):"),
        ("turin", "MBM event configuration (ABMC event_filter):"),
    ] {
        let sim = Sim::new(model);
        let run = sim
            .pqos(&["-I", "--mbm-config", "total=0x33,local=0x1"])
            .ok();
        assert!(
            run.stdout.contains("MBM event configuration altered."),
            "{model}"
        );
        let d = sim.pqos(&["-I", "-D"]).ok().stdout;
        let want = format!(
            "        {title}\n            Total Memory Bandwidth (TMEM): 0x33 \
             (local_reads,remote_reads,local_reads_slow_memory,remote_reads_slow_memory)\n            \
             Local Memory Bandwidth (LMEM): 0x01 (local_reads)\n"
        );
        assert!(d.contains(&want), "{model}:\n{d}");
        sim.pqos(&["-I", "-R"]).ok();
        let d = sim.pqos(&["-I", "-D"]).ok().stdout;
        assert!(
            d.contains("(TMEM): 0x7f (local_reads,remote_reads,"),
            "{model}:\n{d}"
        );
        assert!(
            d.contains(
                "(LMEM): 0x15 (local_reads,local_non_temporal_writes,local_reads_slow_memory)"
            ),
            "{model}:\n{d}"
        );
    }
    // The MSR interface writes BMEC's QOS_EVT_CFG_n (genoa has BMEC, milan does not).
    let run = Sim::new("genoa")
        .pqos(&["--iface=msr", "--mbm-config", "total=0x3"])
        .ok();
    assert!(run.stdout.contains("MBM event configuration altered."));
    let run = Sim::new("milan").pqos(&["--iface=msr", "--mbm-config", "total=0x3"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("BMEC"), "{}", run.stderr);
    let run = Sim::new("genoa").pqos(&["-I", "--mbm-config", "total=0x80"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("a transaction bitmask from 0 to 0x7f"));
}

/// `-d` adds ABMC's counters on turin; `-D` adds the SNC nodes on sapphire-rapids-snc2 (the
/// `mon_sub_L3_*` directories) and nothing on a model without ABMC, BMEC or SNC.
#[test]
fn d_shows_assignable_counters_and_big_d_the_snc_nodes() {
    let turin = Sim::new("turin").pqos(&["-I", "-d"]).ok().stdout;
    assert!(
        turin.contains(
            "        MBM counter assignment (ABMC, resctrl mbm_assign_mode): mbm_event\n            \
             Counters per L3 domain: 32\n            \
             Available counters: 30 (fewest free in any L3 domain)\n    Allocation\n"
        ),
        "{turin}"
    );
    let snc = Sim::new("sapphire-rapids-snc2");
    let d = snc.pqos(&["-I", "-d"]).ok().stdout;
    assert!(!d.contains("SNC"), "{d}");
    let big = snc.pqos(&["-I", "-D"]).ok().stdout;
    assert!(
        big.contains(
            "        Sub-NUMA Clustering (SNC): 2 nodes per L3 cache (mon_sub_L3_* in mon_data)\n"
        ),
        "{big}"
    );
    let old = Sim::new("broadwell-ep").pqos(&["-I", "-D"]).ok().stdout;
    assert!(
        !old.contains("MBM counter") && !old.contains("SNC"),
        "{old}"
    );
}

/// `--mbm-assign-mode` (ABMC, turin) and `--io-alloc` (SDCIAE, turin) switch resctrl's
/// settings, `-d` shows the result, and where resctrl lacks them (genoa: no ABMC, no
/// io_alloc) or the interface is MSR they are refused with a reason.
#[test]
fn assign_mode_and_io_alloc_switch_on_turin_and_are_refused_elsewhere() {
    let sim = Sim::new("turin");
    let run = sim.pqos(&["-I", "--mbm-assign-mode", "default"]).ok();
    assert!(
        run.stdout
            .contains("MBM counter assignment mode: default.\n")
    );
    let d = sim.pqos(&["-I", "-d"]).ok().stdout;
    assert!(
        d.contains("(ABMC, resctrl mbm_assign_mode): default\n"),
        "{d}"
    );
    sim.pqos(&["-I", "--mbm-assign-mode", "mbm_event"]).ok();
    let d = sim.pqos(&["-I", "-d"]).ok().stdout;
    assert!(d.contains("mbm_assign_mode): mbm_event"), "{d}");
    let run = sim.pqos(&["-I", "--io-alloc", "on"]).ok();
    assert!(run.stdout.contains("L3 I/O allocation enabled.\n"));
    let d = sim.pqos(&["-I", "-d"]).ok().stdout;
    assert!(
        d.contains("I/O allocation (io_alloc): enabled, COS15 reserved"),
        "{d}"
    );
    sim.pqos(&["-I", "--io-alloc", "off"]).ok();
    let d = sim.pqos(&["-I", "-d"]).ok().stdout;
    assert!(d.contains("I/O allocation (io_alloc): disabled"), "{d}");

    let genoa = Sim::new("genoa");
    let run = genoa.pqos(&["-I", "--mbm-assign-mode", "mbm_event"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("resctrl offers default"),
        "{}",
        run.stderr
    );
    let run = genoa.pqos(&["-I", "--io-alloc", "on"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("no L3 I/O allocation"),
        "{}",
        run.stderr
    );
    let run = genoa.pqos(&["--iface=msr", "--io-alloc", "on"]);
    assert_eq!(run.code, 1);
    let run = genoa.pqos(&["-I", "--io-alloc", "maybe"]);
    assert!(run.stderr.contains("`maybe`: on or off"), "{}", run.stderr);
}

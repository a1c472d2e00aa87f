//! `pqos --iface=os --sysroot DIR` end to end ([`MountedOs`]): every command of "pqos runs
//! end to end" on the resctrl of a FUSE-mounted simulated platform, with the effects checked
//! in the resctrl files behind pqos's back (`COS1/schemata`, `cpus_list`, `tasks`,
//! `mon_groups/`), real child processes for `-a pid:` and `-p`, CLOSIDs and RMIDs running
//! out, the kernel refusing a schemata, another tool's groups, two pqos at once, and faults
//! injected through `.sim/fail`.
//!
//! Where pqos's OS output is the MSR output, the scenarios of `paper.rs` and `alloc.rs` run
//! again on [`MountedOs`]; where it differs (no `, RMID` on `-s` core lines, the
//! `PID association information:` section), the expectations are written here. The model's
//! clock follows wall-clock time, so monitoring runs take real seconds and the checks are
//! relations, not exact numbers.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdt_sim::Scenario;

use crate::eqnice;
use crate::util::monitor::parse_text;
use crate::util::mounted::MountedOs;
use crate::util::{Machine, Reaped, Run, SKX_RDT};
use crate::{alloc, paper};

/// Starts `rdt-test-threaded-child` (tests/helpers, feature `test-helpers`), a process of
/// three threads, and waits until its threads run.
#[cfg(feature = "test-helpers")]
pub(crate) fn threaded_child() -> Reaped {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rdt-test-threaded-child"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the threaded child");
    let stdout = child.stdout.take().expect("stdout");
    let child = Reaped(child);
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l == "threaded child ready");
    assert!(ready, "the threaded child did not start");
    child
}

/// Waits up to 10 s for `cond`, checking every 20 ms.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `pqos-*` monitor groups present.
fn pqos_mon_groups(m: &MountedOs) -> Vec<String> {
    m.mon_groups()
        .into_iter()
        .filter(|g| g.rsplit('/').next().is_some_and(|n| n.starts_with("pqos-")))
        .collect()
}

/// The `-s` line of core `cpu`.
fn core_line(show: &str, cpu: u32) -> &str {
    let needle = format!("    Core {cpu}, ");
    show.lines()
        .find(|l| l.starts_with(&needle))
        .unwrap_or_else(|| panic!("core {cpu} in\n{show}"))
}

/// pqos's `PID association information:` section with no task in any class COS1..COS(n-1).
fn empty_pid_section(classes: u32) -> String {
    let mut s = "PID association information:\n".to_owned();
    for c in 1..classes {
        s.push_str(&format!("    COS{c} => (none)\n"));
    }
    s
}

// ---- -d, -D, -e, -a, -s: the paper's commands ----

#[test]
fn d_and_big_d_report_what_resctrl_info_says() {
    let m = MountedOs::new(SKX_RDT);
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(d.starts_with("OS capabilities (Linux kernel "), "{d}");
    // resctrl gives each group one CLOSID for every resource: pqos's `Num COS` is the
    // fewest `num_closids` (L3 16, MB 8 on Skylake-SP)
    let l3: u32 = m.read("info/L3/num_closids").trim().parse().unwrap();
    let mb: u32 = m.read("info/MB/num_closids").trim().parse().unwrap();
    let fewest = l3.min(mb);
    assert!(l3 > fewest, "the model has different counts: {l3} {mb}");
    let (cat, mba) = d
        .split_once("Memory Bandwidth Allocation (MBA)")
        .expect("MBA");
    assert!(
        cat.contains(&format!("                Num COS: {fewest}\n")),
        "{d}"
    );
    assert!(
        mba.contains(&format!("            Num COS: {fewest}\n")),
        "{d}"
    );
    // the OS library's event order: local before total
    let lmem = d.find("Local Memory Bandwidth (LMEM)").expect("LMEM");
    let tmem = d.find("Total Memory Bandwidth (TMEM)").expect("TMEM");
    assert!(lmem < tmem, "{d}");
    let big_d = m.pqos(&["-D"]).ok().stdout;
    let rmids = m.read("info/L3_MON/num_rmids");
    assert!(
        big_d.contains(&format!("max rmid: {}\n", rmids.trim())),
        "{big_d}"
    );
    let cbm = u64::from_str_radix(m.read("info/L3/cbm_mask").trim(), 16).expect("cbm_mask");
    assert!(
        big_d.contains(&format!("Max CBM bits: {}\n", cbm.count_ones())),
        "{big_d}"
    );
}

#[test]
fn pqos_iface_os_sets_shows_and_resets_classes_through_resctrl() {
    let m = MountedOs::new(SKX_RDT);
    let root = m.root();
    // -e, -a
    let run = m.pqos(&["-e", "llc:1=0xffe00"]).failed();
    assert!(run.stderr.contains("0xffe00"), "11-bit CBM: {}", run.stderr);
    m.pqos(&["-e", "llc:1=0x7f0;llc:2=0x00f"]).ok();
    m.pqos(&["-a", "llc:1=2-3"]).ok();
    let resctrl = root.join("sys/fs/resctrl");
    let s = std::fs::read_to_string(resctrl.join("COS1/schemata")).expect("COS1");
    assert!(s.contains("L3:0=7f0;1=7f0"), "{s}");
    assert_eq!(
        std::fs::read_to_string(resctrl.join("COS1/cpus_list")).expect("cpus"),
        "2-3\n"
    );
    // -s shows the same
    let show = m.pqos(&["-s"]).ok().stdout;
    assert!(
        show.contains("L3CA COS1 => MASK 0x7f0") && show.contains("L3CA COS2 => MASK 0xf"),
        "{show}"
    );
    // -m over the OS interface
    let mon = m.pqos(&["-m", "llc:2-3", "-t", "1"]).ok().stdout;
    assert!(mon.contains("TIME "), "{mon}");
    // a foreign group survives -R; ours are reset
    std::fs::create_dir(resctrl.join("kubepods")).expect("foreign group");
    std::fs::write(resctrl.join("kubepods/schemata"), "L3:0=f0\n").expect("foreign schemata");
    m.pqos(&["-R"]).ok();
    let s = std::fs::read_to_string(resctrl.join("COS1/schemata")).expect("COS1");
    assert!(s.contains("L3:0=7ff;1=7ff"), "{s}");
    assert_eq!(
        std::fs::read_to_string(resctrl.join("COS1/cpus_list")).expect("cpus"),
        "\n"
    );
    let k = std::fs::read_to_string(resctrl.join("kubepods/schemata")).expect("kubepods");
    assert!(k.contains("L3:0=f0;"), "{k}");
}

#[test]
fn paper_commands_print_pqos_os_lines_and_change_the_resctrl_files() {
    // arrange
    let m = MountedOs::new("broadwell-ep");
    // act: the paper's -e and -a
    let e = m.pqos(&["-e", "llc:1=0xffe00;llc:2=0x00003"]).ok();
    let a = m.pqos(&["-a", "llc:1=2-7;llc:2=8-10"]).ok();
    let s = m.pqos(&["-s"]).ok().stdout;
    // assert: pqos's lines, as on the MSR interface but with no warning about resctrl
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 1 L3CA COS1 => MASK 0xffe00\n\
         SOCKET 0 L3CA COS2 => MASK 0x3\n\
         SOCKET 1 L3CA COS2 => MASK 0x3\n\
         Allocation configuration altered.\n",
        e.stdout
    );
    assert!(!e.stderr.contains("WARN: resctl"), "{}", e.stderr);
    eqnice!("Allocation configuration altered.\n", a.stdout);
    // ... and the kernel's files say the same
    assert_eq!(m.read("COS1/schemata"), "    L3:0=ffe00;1=ffe00\n");
    assert_eq!(m.read("COS2/schemata"), "    L3:0=3;1=3\n");
    assert_eq!(m.read("COS1/cpus_list"), "2-7\n");
    assert_eq!(m.read("COS2/cpus_list"), "8-10\n");
    assert!(
        m.read("cpus_list").starts_with("0-1,11-"),
        "{}",
        m.read("cpus_list")
    );
    // -s: the classes per socket, core lines without RMIDs, then the task association
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
        let line = core_line(&s, cpu);
        assert!(line.ends_with(&format!(" => COS{cos}")), "{line}");
    }
    assert!(s.ends_with(&empty_pid_section(16)), "{s}");
    assert!(!s.contains("Other resctrl groups"), "{s}");
}

#[test]
fn paper_isolating_the_thrasher_through_resctrl() {
    paper::isolating_the_thrasher_gives_the_pipeline_its_ways_back_on(&MountedOs::new(
        "broadwell-ep",
    ));
}

#[test]
fn paper_first_sample_reports_bandwidth_since_the_start_through_resctrl() {
    paper::first_sample_reports_bandwidth_since_the_start_on(&MountedOs::new("broadwell-ep"));
}

#[test]
fn paper_allocation_while_monitoring_through_resctrl_outlives_the_run() {
    paper::an_allocation_made_while_monitoring_runs_outlives_the_run_on(&MountedOs::new(
        "broadwell-ep",
    ));
}

#[test]
fn paper_a_scenario_set_in_process_is_what_pqos_measures_through_resctrl() {
    let m = MountedOs::new("broadwell-ep");
    let scenario: Scenario = paper::DB_ON_CPU_0.parse().expect("scenario");
    m.platform()
        .lock()
        .set_scenario(&scenario)
        .expect("CPU 0 exists");
    paper::cpu_0_caches_the_db_and_cpu_1_idles_on(&m, &[]);
}

// ---- -e: CDP, L2, MBA, mba_max, AMD ----

#[test]
fn alloc_cdp_through_the_remount_seam() {
    let m = MountedOs::new("broadwell-ep");
    alloc::cdp_reset_halves_classes_and_masks_have_data_and_code_on(&m, || {
        // -R l3cdp-on remounted resctrl with cdp: the CODE/DATA schemas, 8 CLOSIDs
        assert_eq!(m.mount_options(), "cdp");
        assert!(m.exists("info/L3CODE") && !m.exists("info/L3"));
        assert_eq!(m.read("info/L3CODE/num_closids"), "8\n");
        assert_eq!(
            m.read("COS3/schemata"),
            "L3DATA:0=f00;1=f00\nL3CODE:0=f000;1=f000\n"
        );
    });
    assert_eq!(m.mount_options(), "");
    assert!(m.exists("info/L3") && !m.exists("COS3"), "{:?}", m.list(""));
}

#[test]
fn cdp_forms_on_a_cdp_mount() {
    let m = MountedOs::with_options("broadwell-ep", "cdp");
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(
        d.contains("CDP: enabled") && d.contains("Num COS: 8"),
        "{d}"
    );
    let e = m
        .pqos(&["-e", "llc:1d=0xf,1c=0xf0;llc@1:2=0x3"])
        .ok()
        .stdout;
    eqnice!(
        "SOCKET 0 L3CA COS1 => DATA 0xf,CODE 0xfffff\n\
         SOCKET 1 L3CA COS1 => DATA 0xf,CODE 0xfffff\n\
         SOCKET 0 L3CA COS1 => DATA 0xf,CODE 0xf0\n\
         SOCKET 1 L3CA COS1 => DATA 0xf,CODE 0xf0\n\
         SOCKET 1 L3CA COS2 => DATA 0x3,CODE 0x3\n\
         Allocation configuration altered.\n",
        e
    );
    assert_eq!(
        m.read("COS1/schemata"),
        "L3DATA:0=f;1=f\nL3CODE:0=f0;1=f0\n"
    );
    assert_eq!(
        m.read("COS2/schemata"),
        "L3DATA:0=fffff;1=3\nL3CODE:0=fffff;1=3\n"
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.contains("\n    L3CA COS1 => DATA 0xf, CODE 0xf0\n"),
        "{s}"
    );
    assert!(s.ends_with(&empty_pid_section(8)), "{s}");
}

#[test]
fn alloc_l2_cat_through_resctrl() {
    let m = MountedOs::new("sapphire-rapids");
    alloc::l2_cat_on_sapphire_rapids_is_per_l2_id_on(&m);
    let l2 = m.read("COS1/schemata");
    let l2 = l2
        .lines()
        .find(|l| l.trim_start().starts_with("L2:"))
        .expect("L2");
    assert!(l2.trim_start().starts_with("L2:0=f;1=f;2=ffff;"), "{l2}");
    assert!(m.read("COS2/schemata").contains(";7=ff00;"));
}

#[test]
fn alloc_intel_mba_through_resctrl() {
    let m = MountedOs::new(SKX_RDT);
    alloc::intel_mba_is_rounded_to_the_granularity_on(&m);
    // The kernel rounded 75 up to 80 itself.
    assert!(m.read("COS2/schemata").contains("MB:0=100;1=80"));
}

#[test]
fn mba_max_on_an_mba_mbps_mount_and_mba_ctrl_through_the_remount_seam() {
    // arrange: resctrl mounted with mba_MBps
    let m = MountedOs::with_options(SKX_RDT, "mba_MBps");
    // act + assert: MBps limits
    let e = m
        .pqos(&["-e", "mba_max:1=6000;mba_max@1:2=8000"])
        .ok()
        .stdout;
    eqnice!(
        "SOCKET 0 MBA COS1 => 6000 MBps\n\
         SOCKET 1 MBA COS1 => 6000 MBps\n\
         SOCKET 1 MBA COS2 => 8000 MBps\n\
         Allocation configuration altered.\n",
        e
    );
    assert!(m.read("COS1/schemata").contains("MB:0=6000;1=6000"));
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(
        d.contains("            Num COS: 8\n            CTRL: enabled\n"),
        "pqos's OS -d says the controller is on: {d}"
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    MBA COS1 => 6000 MBps\n"), "{s}");
    let bad = m.pqos(&["-e", "mba:1=50"]).failed();
    assert!(
        bad.stderr
            .contains("Expected MBA controller but not requested!"),
        "{}",
        bad.stderr
    );
    assert!(m.read("COS1/schemata").contains("MB:0=6000;1=6000"));
    // -R mbaCtrl-off remounts without mba_MBps: percentages again
    eqnice!(
        "Allocation reset successful\n",
        m.pqos(&["-R", "mbaCtrl-off"]).ok().stdout
    );
    assert_eq!(m.mount_options(), "");
    let d = m.pqos(&["-d"]).ok().stdout;
    // mounted without mba_MBps: pqos leaves the controller's state unknown, no CTRL line
    assert!(!d.contains("CTRL:"), "{d}");
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("\n    MBA COS1 => 100% available\n"), "{s}");
    let bad = m.pqos(&["-e", "mba_max:1=6000"]).failed();
    assert!(bad.stderr.contains("mba_MBps"), "{}", bad.stderr);
    // ... and -R mbaCtrl-on back
    m.pqos(&["-R", "mbaCtrl-on"]).ok();
    assert_eq!(m.mount_options(), "mba_MBps");
    m.pqos(&["-e", "mba_max@0:3=1234"]).ok();
    assert!(m.read("COS3/schemata").contains("MB:0=1234;"));
}

#[test]
fn alloc_milan_ccx_domains_through_resctrl() {
    let m = MountedOs::new("milan");
    let d = m.pqos(&["-d"]).ok().stdout;
    let (_, mba) = d.split_once("(MBA)").expect("MBA section");
    assert!(
        mba.contains("CTRL: unsupported\n") && !d.contains("CTRL: disabled"),
        "AMD's MBA is not linear: no mba_MBps controller (as pqos's issue-311 output): {d}"
    );
    alloc::milan_has_one_l3_domain_per_ccx_and_amd_mba_units_on(&m);
    let s = m.read("COS2/schemata");
    assert!(s.contains(";1=f0f;"), "{s}");
    assert_eq!(m.read("COS2/cpus_list"), "8\n");
}

#[test]
fn alloc_reset_through_resctrl_restores_every_class_and_core() {
    let m = MountedOs::new(SKX_RDT);
    alloc::reset_restores_every_class_and_core_on(&m);
    assert!(m.read("COS1/schemata").contains("L3:0=7ff;1=7ff"));
    assert!(m.read("COS1/schemata").contains("MB:0=100;1=100"));
    assert_eq!(m.read("COS1/cpus_list"), "\n");
}

// ---- -m, -r ----

#[test]
fn monitoring_makes_one_monitor_group_per_group_and_removes_them_after() {
    // arrange: CPUs 2-7 in COS1, so their group lives under COS1
    let m = MountedOs::new("broadwell-ep");
    m.pqos(&["-a", "llc:1=2-7"]).ok();
    // act: a two-second run, watched behind its back
    let run = m.spawn(&["-m", "all:[2-7];llc:8;mbl:9", "-t", "2"]);
    wait_for("three pqos monitor groups", || {
        pqos_mon_groups(&m).len() == 3
    });
    let groups = pqos_mon_groups(&m);
    let cpus: BTreeSet<String> = groups
        .iter()
        .map(|g| {
            let parent = g.split("mon_groups/").next().unwrap_or("");
            format!("{parent}:{}", m.read(&format!("{g}/cpus_list")).trim())
        })
        .collect();
    let out = run.wait_with_output().expect("pqos -m");
    // assert
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        groups
            .iter()
            .any(|g| g.starts_with("COS1/mon_groups/pqos-")),
        "{groups:?}"
    );
    assert_eq!(
        cpus,
        BTreeSet::from(["COS1/:2-7".to_owned(), ":8".into(), ":9".into()]),
        "{groups:?}"
    );
    let samples = parse_text(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(samples.len(), 3, "-t 2: the first sample and two more");
    let last = samples.last().expect("sample");
    assert_eq!(last.keys().collect::<Vec<_>>(), ["2-7", "8", "9"]);
    assert!(last["8"].contains_key("LLC[KB]") && !last["8"].contains_key("MBL[MB/s]"));
    assert!(last["9"]["MBL[MB/s]"] > 0.0 && !last["9"].contains_key("LLC[KB]"));
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", m.mon_groups());
}

#[test]
fn ungrouped_cores_through_resctrl_are_one_row_each_and_leave_no_group() {
    let m = MountedOs::new("broadwell-ep");
    let run = m.monitor(&["-m", "all:0-3", "-t", "1"]).ok();
    let samples = parse_text(&run.stdout);
    assert_eq!(samples[0].keys().collect::<Vec<_>>(), ["0", "1", "2", "3"]);
    assert!(m.mon_groups().is_empty(), "{:?}", m.mon_groups());
    m.monitor(&["-m", "all:0-3", "-t", "1"]).ok();
}

#[test]
fn csv_xml_and_json_through_resctrl() {
    let m = MountedOs::new("broadwell-ep");
    let args = |u: &'static str| ["-m", "all:[2-7];all:[8-10]", "-t", "1", "-u", u];
    // CSV: the header once, two rows per sample
    let csv = m.pqos(&args("csv")).ok().stdout;
    let rows: Vec<&str> = csv
        .lines()
        .skip_while(|l| !l.starts_with("Time,"))
        .collect();
    // IPC and LLC misses only where a PMU counts them: no column of blank cells
    let (header, mbl_field) = if m.has_pmu() {
        ("Time,Core,IPC,LLC Misses,LLC[KB],MBL[MB/s],MBR[MB/s]", 5)
    } else {
        ("Time,Core,LLC[KB],MBL[MB/s],MBR[MB/s]", 3)
    };
    assert_eq!(rows[0], header);
    assert_eq!(rows.len(), 5, "{csv}");
    let mbl = |row: &str| -> f64 {
        row.split(',')
            .nth(mbl_field)
            .expect("MBL")
            .parse()
            .expect("number")
    };
    assert!(
        rows[4].contains(",\"8-10\",") && mbl(rows[4]) > 0.0,
        "{csv}"
    );
    // the first sample: the thrasher's traffic since the start (pqos's resctrl path), where
    // the MSR interface prints 0.0
    assert!(
        rows[2].contains(",\"8-10\",") && mbl(rows[2]) > 0.0,
        "first sample: {csv}"
    );
    // XML: well-formed, four records
    let xml = m.pqos(&args("xml")).ok().stdout;
    let xml = &xml[xml.find("<?xml").expect("xml declaration")..];
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut records = 0;
    loop {
        match reader.read_event().expect("well-formed XML") {
            quick_xml::events::Event::Start(e) if e.name().as_ref() == b"record" => records += 1,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(records, 4, "{xml}");
    assert!(xml.ends_with("</records>\n"), "{xml}");
    // JSON lines: the second sample of the thrasher has bandwidth over a real interval
    let json = m.pqos(&args("json")).ok().stdout;
    let objs: Vec<serde_json::Value> = json
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(objs.len(), 4, "{json}");
    let last = &objs[3];
    assert_eq!(last["core"], "8-10");
    assert!(
        last["interval_s"].as_f64().expect("interval") > 0.5,
        "{last}"
    );
    assert!(
        last["mbm_local_mib_per_s"].as_f64().expect("MBL") > 0.0,
        "{last}"
    );
}

#[test]
fn r_removes_every_pqos_monitor_group_and_only_those() {
    // arrange: a stale group of another pqos run, another tool's group
    let m = MountedOs::new("broadwell-ep");
    m.mkdir("mon_groups/pqos-99999-0");
    m.write("mon_groups/pqos-99999-0/cpus_list", "5\n");
    m.mkdir("mon_groups/agent");
    m.write("mon_groups/agent/cpus_list", "6\n");
    // act: -r, then monitoring as pqos does after it (CPU 5 is free again)
    let run = m.monitor(&["-r", "-m", "llc:5", "-t", "1"]).ok();
    // assert
    assert!(
        run.stdout.contains("CMT/MBM reset successful\n"),
        "{}",
        run.stdout
    );
    assert_eq!(m.mon_groups(), ["mon_groups/agent"]);
    assert_eq!(m.read("mon_groups/agent/cpus_list"), "6\n");
    // CPU 6 stays with the other tool: monitoring it is refused, naming the group
    let bad = m.pqos(&["-m", "llc:6", "-t", "1"]).failed();
    assert!(bad.stderr.contains("mon_groups/agent"), "{}", bad.stderr);
}

// ---- tasks and PIDs ----

#[test]
#[cfg(feature = "test-helpers")]
fn pid_association_moves_every_thread_and_s_lists_them_under_the_class() {
    // arrange: a process with three threads
    let m = MountedOs::new("broadwell-ep");
    let child = threaded_child();
    let threads = child.threads();
    assert!(threads.len() >= 3, "{threads:?}");
    // act
    let a = m.pqos(&["-a", &format!("pid:1={}", child.pid())]).ok();
    // assert: every thread is in COS1/tasks, one id per line
    eqnice!("Allocation configuration altered.\n", a.stdout);
    let tasks: Vec<u32> = m
        .read("COS1/tasks")
        .lines()
        .map(|l| l.parse().expect("tid"))
        .collect();
    assert_eq!(tasks, threads);
    let s = m.pqos(&["-s"]).ok().stdout;
    let list: Vec<String> = threads.iter().map(ToString::to_string).collect();
    assert!(
        s.contains(&format!(
            "PID association information:\n    COS1 => {}\n    COS2 => (none)\n",
            list.join(", ")
        )),
        "{s}"
    );
    // -v lists COS0 too: the root's tasks, without ours
    let v = m.pqos(&["-s", "-v"]).ok().stdout;
    let cos0 = v
        .lines()
        .find(|l| l.starts_with("    COS0 => "))
        .expect("COS0 line");
    assert!(!cos0.contains(&format!(" {},", child.pid())), "{cos0}");
    // back to COS0
    m.pqos(&["-a", &format!("pid:0={}", child.pid())]).ok();
    assert_eq!(m.read("COS1/tasks"), "");
}

#[test]
fn pid_monitoring_puts_the_children_in_monitor_groups_and_removes_them_after() {
    // arrange: one child in COS1, one in COS0
    let m = MountedOs::new("broadwell-ep");
    let (c1, c2) = (Reaped::sleeper(), Reaped::sleeper());
    m.pqos(&["-a", &format!("pid:1={}", c1.pid())]).ok();
    // act
    let run = m.spawn(&[
        "-p",
        &format!("all:{};llc:{}", c1.pid(), c2.pid()),
        "-t",
        "2",
    ]);
    wait_for("two pqos monitor groups", || pqos_mon_groups(&m).len() == 2);
    let groups = pqos_mon_groups(&m);
    let tasks: Vec<String> = groups
        .iter()
        .map(|g| m.read(&format!("{g}/tasks")))
        .collect();
    let out = run.wait_with_output().expect("pqos -p");
    // assert: the group of the COS1 child lives under COS1
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(groups[0].starts_with("COS1/mon_groups/pqos-"), "{groups:?}");
    assert!(groups[1].starts_with("mon_groups/pqos-"), "{groups:?}");
    assert_eq!(
        tasks,
        [format!("{}\n", c1.pid()), format!("{}\n", c2.pid())]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("     PID     CORE "), "{stdout}");
    for c in [&c1, &c2] {
        let row = format!("\n{:>8} ", c.pid());
        assert_eq!(
            stdout.matches(&row).count(),
            3,
            "three samples of {}: {stdout}",
            c.pid()
        );
    }
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", m.mon_groups());
    assert_eq!(
        m.read("COS1/tasks"),
        format!("{}\n", c1.pid()),
        "still in COS1"
    );
}

#[test]
fn pid_monitoring_stopped_by_sigint_removes_its_group() {
    let m = MountedOs::new("broadwell-ep");
    let (c1, c2) = (Reaped::sleeper(), Reaped::sleeper());
    let run = m.spawn(&[
        "-p",
        &format!("all:[{},{}]", c1.pid(), c2.pid()),
        "-t",
        "30",
    ]);
    wait_for("the pqos monitor group", || pqos_mon_groups(&m).len() == 1);
    let g = &pqos_mon_groups(&m)[0];
    assert_eq!(
        m.read(&format!("{g}/tasks")),
        format!("{}\n{}\n", c1.pid(), c2.pid())
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(run.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let out = run.wait_with_output().expect("pqos -p");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(m.mon_groups().is_empty(), "{:?}", m.mon_groups());
}

#[test]
fn a_reader_that_stops_reading_cannot_keep_sigint_from_releasing_the_groups() {
    // arrange: 8 per-core groups at 100 ms into a 4 KiB pipe nobody reads
    let m = MountedOs::new("broadwell-ep");
    let mut run = m.spawn(&["-m", "all:0-7", "-i", "1"]);
    let stdout = run.stdout.take().expect("stdout");
    nix::fcntl::fcntl(&stdout, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).expect("F_SETPIPE_SZ");
    wait_for("the pqos monitor groups", || pqos_mon_groups(&m).len() == 8);
    // the pipe fills: 4 KiB holds about 5 samples of 8 rows; wait for twice that
    std::thread::sleep(Duration::from_millis(1500));
    assert!(run.try_wait().expect("try_wait").is_none(), "still running");
    // act
    let pid = nix::unistd::Pid::from_raw(i32::try_from(run.id()).expect("pid"));
    let signalled = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let status = loop {
        if let Some(status) = run.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(1),
            "pqos still running 1 s after SIGINT with a full stdout pipe"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // assert
    assert!(status.success(), "{status:?}");
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", m.mon_groups());
    drop(stdout);
}

#[test]
fn one_failed_counter_read_blanks_a_cell_and_three_in_a_row_end_the_run_naming_the_file() {
    // arrange: core 0's group reads mon_L3_00/llc_occupancy once per 200 ms poll
    let m = MountedOs::new("broadwell-ep");
    let llc = "sys/fs/resctrl/mon_groups/*/mon_data/mon_L3_00/llc_occupancy";
    let args = ["-m", "llc:0", "-i", "2", "-t", "1"];
    // act: the third read fails once
    m.arm(&format!("read {llc} nth=3 errno=EIO"));
    let run = m.pqos(&args).ok();
    // assert: the run went on; that sample's LLC cell is blank, the others have values
    let samples = parse_text(&run.stdout);
    assert!(samples.len() >= 4, "{}", run.stdout);
    let blank = samples
        .iter()
        .filter(|sample| !sample["0"].contains_key("LLC[KB]"))
        .count();
    assert_eq!(blank, 1, "one blank sample:\n{}", run.stdout);
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", m.mon_groups());

    // act: the 2nd, 3rd and 4th reads fail
    for nth in 2..=4 {
        m.arm(&format!("read {llc} nth={nth} errno=EIO"));
    }
    let run = m.pqos(&args).failed();
    // assert: an error naming the file, and the group removed all the same
    assert!(
        run.stderr.contains("mon_data/mon_L3_00/llc_occupancy"),
        "{}",
        run.stderr
    );
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", m.mon_groups());
}

// ---- running out of CLOSIDs and RMIDs ----

#[test]
fn out_of_closids_gives_a_clear_error_and_leaves_nothing_behind() {
    // arrange: other tools' groups take every CLOSID but one
    let m = MountedOs::new("broadwell-ep");
    let closids: u32 = m
        .read("info/L3/num_closids")
        .trim()
        .parse()
        .expect("closids");
    for i in 1..closids - 1 {
        m.mkdir(&format!("tool{i}"));
    }
    let before = m.list("");
    // act: two classes, one CLOSID
    let run = m.pqos(&["-e", "llc:1=0xf;llc:2=0xf0"]).failed();
    // assert: pqos's lines, the reason, and COS1 gone again
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xf\n\
         SOCKET 1 L3CA COS1 => MASK 0xf\n\
         SOCKET 0 L3CA COS2 - FAILED!\n\
         Allocation configuration error!\n",
        run.stdout
    );
    assert!(
        run.stderr.contains("out of CLOSIDs: cannot create")
            && run.stderr.contains("COS2")
            && run.stderr.contains("tool1 (foreign)")
            && run.stderr.contains("nothing was changed"),
        "{}",
        run.stderr
    );
    assert_eq!(m.list(""), before);
    // every CLOSID taken: an association cannot make its group either
    m.mkdir(&format!("tool{}", closids - 1));
    let run = m.pqos(&["-a", "llc:3=2"]).failed();
    eqnice!(
        "Setting allocation class of service association failed!\n\
         Allocation association error!\n",
        run.stdout
    );
    assert!(run.stderr.contains("out of CLOSIDs"), "{}", run.stderr);
    assert!(!m.exists("COS3"));
    assert!(
        m.read("cpus_list").starts_with("0-"),
        "CPU 2 still in the root"
    );
    // a class beyond num_closids is refused before anything is written
    let run = m
        .pqos(&["-e", &format!("llc:1=0xf;llc:{closids}=0xf")])
        .failed();
    assert!(
        run.stderr
            .contains(&format!("Invalid class ID: {closids}!")),
        "{}",
        run.stderr
    );
    assert!(!m.exists("COS1"));
}

#[test]
fn classes_beyond_the_fewest_closids_are_refused_before_any_write() {
    // Sapphire Rapids: L3 and MBA have 15 CLOSIDs, L2 8; resctrl gives groups 8.
    let m = MountedOs::new("sapphire-rapids");
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(
        d.contains("Num COS: 8") && !d.contains("Num COS: 15"),
        "{d}"
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.contains("L3CA COS7 =>") && !s.contains("L3CA COS8 =>"),
        "-s lists the 8 classes a group can have: {s}"
    );
    for args in [
        ["-e", "llc:1=0xf;llc:9=0xf"],
        ["-e", "mba:1=50;mba:8=50"],
        ["-a", "llc:1=1;llc:9=2"],
    ] {
        let run = m.pqos(&args).failed();
        assert!(
            run.stderr.contains("COS9")
                || run.stderr.contains("ID: 9!")
                || run.stderr.contains("ID: 8!"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("8 CLOSIDs") || run.stderr.contains("8 classes"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!m.exists("COS1"), "{args:?}: nothing written");
    }
}

#[test]
fn out_of_rmids_gives_a_short_clear_error_and_leaves_no_group() {
    // arrange: another tool's monitor groups take every RMID but three (the root has one)
    let m = MountedOs::new("broadwell-ep");
    let rmids: usize = m
        .read("info/L3_MON/num_rmids")
        .trim()
        .parse()
        .expect("rmids");
    for i in 0..rmids - 1 - 3 {
        m.mkdir(&format!("mon_groups/agent{i}"));
    }
    // act: five groups
    let run = m.pqos(&["-m", "llc:0-4", "-t", "1"]).failed();
    // assert
    assert!(
        run.stderr.contains("out of RMIDs") && run.stderr.contains("foreign"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.len() < 1000,
        "the holders are summarised, not all {rmids} listed: {}",
        run.stderr
    );
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", pqos_mon_groups(&m));
    // PIDs too
    let (c1, c2, c3, c4) = (
        Reaped::sleeper(),
        Reaped::sleeper(),
        Reaped::sleeper(),
        Reaped::sleeper(),
    );
    let pids = format!("llc:{},{},{},{}", c1.pid(), c2.pid(), c3.pid(), c4.pid());
    let run = m.pqos(&["-p", &pids, "-t", "1"]).failed();
    assert!(run.stderr.contains("out of RMIDs"), "{}", run.stderr);
    assert!(pqos_mon_groups(&m).is_empty(), "{:?}", pqos_mon_groups(&m));
}

// ---- the kernel refusing a schemata ----

/// The kernel refuses a mask over another group's exclusive ways ("Overlaps with exclusive
/// group" in last_cmd_status; the backend's own test, rdt-resctrl tests/sim.rs, shows that
/// path). pqos finds it first, from the groups' `mode` files, and writes nothing.
#[test]
fn a_mask_over_another_groups_exclusive_ways_is_refused_before_the_kernel_sees_it() {
    // arrange: another tool's exclusive group owns ways 4-7 (the root gave them up)
    let m = MountedOs::new("broadwell-ep");
    m.write("schemata", "L3:0=fff00;1=fff00\n");
    m.mkdir("kubepods");
    m.write("kubepods/schemata", "L3:0=f0;1=f0\n");
    m.write("kubepods/mode", "exclusive\n");
    assert_eq!(m.read("kubepods/mode"), "exclusive\n");
    // act: a mask the CBM rules accept (contiguous, 20 bits) but that overlaps those ways
    let run = m.pqos(&["-e", "llc:1=0xff"]).failed();
    // assert: pqos's line, and the group and ways named
    eqnice!("Allocation configuration error!\n", run.stdout);
    assert!(
        run.stderr
            .contains("overlaps ways 0xf0 of resctrl group kubepods, which holds them exclusively"),
        "{}",
        run.stderr
    );
    assert!(!m.exists("COS1"), "no group was made for it");
    // a mask beside the exclusive ways is fine
    m.pqos(&["-e", "llc:1=0xff00"]).ok();
}

// ---- another tool's group ----

#[test]
fn another_tools_group_survives_e_a_r_and_big_r_and_s_reports_it() {
    // arrange: kubepods with ways, CPU 3, a monitor group; another tool's monitor group
    let m = MountedOs::new("broadwell-ep");
    m.mkdir("kubepods");
    m.write("kubepods/schemata", "L3:0=f0\n");
    m.write("kubepods/cpus_list", "3\n");
    m.mkdir("kubepods/mon_groups/pod1");
    m.mkdir("mon_groups/agent");
    let files = ["kubepods/schemata", "kubepods/cpus_list", "kubepods/tasks"];
    let kube = || files.map(|f| m.read(f));
    let before = kube();
    assert_eq!(before[0], "    L3:0=f0;1=fffff\n");
    // -e, -a of other CPUs: fine
    m.pqos(&["-e", "llc:1=0xf;llc:2=0xf0"]).ok();
    m.pqos(&["-a", "llc:1=2,4"]).ok();
    // -a of CPU 3: refused before anything is written, naming the group
    let run = m.pqos(&["-a", "llc:2=2-3"]).failed();
    eqnice!("Allocation association error!\n", run.stdout);
    assert!(
        run.stderr
            .contains("core 3 in \"llc:2=2-3\" is in resctrl group kubepods"),
        "{}",
        run.stderr
    );
    assert_eq!(m.read("COS1/cpus_list"), "2,4\n", "CPU 2 was not moved");
    assert_eq!(m.read("COS2/cpus_list"), "\n");
    // -s: the core line names the group, and the group is listed (this tool's additions)
    let s = m.pqos(&["-s"]).ok().stdout;
    assert_eq!(
        core_line(&s, 3),
        "    Core 3, L2ID 17, L3ID 1 => kubepods (not managed by pqos)"
    );
    assert!(core_line(&s, 2).ends_with(" => COS1"));
    assert!(
        s.ends_with(
            "Other resctrl groups (not managed by pqos):\n    mon_groups/agent (monitor group)\n    \
             kubepods (control group)\n    kubepods/mon_groups/pod1 (monitor group)\n"
        ),
        "{s}"
    );
    // -r and -R leave it alone
    m.monitor(&["-r", "-m", "llc:0", "-t", "1"]).ok();
    eqnice!("Allocation reset successful\n", m.pqos(&["-R"]).ok().stdout);
    assert_eq!(m.read("COS1/schemata"), "    L3:0=fffff;1=fffff\n");
    assert_eq!(m.read("COS1/cpus_list"), "\n");
    // -R with a CDP change would remount and destroy it: refused, naming it
    let run = m.pqos(&["-R", "l3cdp-on"]).failed();
    eqnice!("Allocation reset failed!\n", run.stdout);
    assert!(
        run.stderr.contains("kubepods") && run.stderr.contains("remount"),
        "{}",
        run.stderr
    );
    assert_eq!(m.mount_options(), "");
    // after all of it
    assert_eq!(kube(), before);
    assert_eq!(
        m.mon_groups(),
        ["kubepods/mon_groups/pod1", "mon_groups/agent"]
    );
}

// ---- two pqos at once ----

#[test]
fn two_pqos_applying_at_once_take_turns_and_keep_both_changes() {
    let m = MountedOs::new("broadwell-ep");
    for round in 0..3u32 {
        // Each pair read-modify-writes one file: COS1/schemata (socket 0 and 1),
        // COS1/cpus_list (two CPUs); and one more class besides.
        let (m0, m1, m2) = (0x3u32 << round, 0xc0u32 << round, 0xf000u32 >> round);
        let (a, b) = (2 + round, 20 + round);
        let runs = [
            m.spawn(&["-e", &format!("llc@0:1={m0:#x}")]),
            m.spawn(&["-e", &format!("llc@1:1={m1:#x}")]),
            m.spawn(&["-e", &format!("llc:2={m2:#x}")]),
            m.spawn(&["-a", &format!("llc:1={a}")]),
            m.spawn(&["-a", &format!("llc:1={b}")]),
        ];
        for r in runs {
            let out: Run = r.wait_with_output().expect("pqos").into();
            out.ok();
        }
        assert_eq!(
            m.read("COS1/schemata"),
            format!("    L3:0={m0:x};1={m1:x}\n"),
            "round {round}"
        );
        assert_eq!(
            m.read("COS2/schemata"),
            format!("    L3:0={m2:x};1={m2:x}\n")
        );
        let want: String = match round {
            0 => "2,20".into(),
            1 => "2-3,20-21".into(),
            _ => "2-4,20-22".into(),
        };
        assert_eq!(
            m.read("COS1/cpus_list"),
            format!("{want}\n"),
            "round {round}"
        );
    }
}

// ---- faults injected midway ----

#[test]
fn a_schemata_write_failing_midway_leaves_no_half_applied_classes() {
    // arrange
    let m = MountedOs::new("broadwell-ep");
    let fresh = m.pqos(&["-s"]).ok().stdout;
    // act: the second schemata write (COS2's, both sockets in one write) fails
    m.arm("write sys/fs/resctrl/*/schemata nth=2 errno=EIO");
    let run = m.pqos(&["-e", "llc:1=0xf;llc:2=0xf0"]).failed();
    // assert: pqos's lines; COS1's write undone, both groups gone again
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xf\n\
         SOCKET 1 L3CA COS1 => MASK 0xf\n\
         SOCKET 0 L3CA COS2 - FAILED!\n\
         Allocation configuration error!\n",
        run.stdout
    );
    assert!(
        run.stderr.contains("nothing was changed: the 2 write(s)")
            && run.stderr.contains("COS2/schemata")
            && run.stderr.contains("Input/output error"),
        "{}",
        run.stderr
    );
    assert!(!m.exists("COS1") && !m.exists("COS2"), "{:?}", m.list(""));
    eqnice!(fresh, m.pqos(&["-s"]).ok().stdout);

    // the second write is another class's (COS2, made for it, goes too)
    m.arm("write sys/fs/resctrl/*/schemata nth=2 errno=EIO");
    let run = m.pqos(&["-e", "llc@0:1=0xf;llc@0:2=0xf0"]).failed();
    eqnice!(
        "SOCKET 0 L3CA COS1 => MASK 0xf\n\
         SOCKET 0 L3CA COS2 - FAILED!\n\
         Allocation configuration error!\n",
        run.stdout
    );
    assert!(!m.exists("COS1") && !m.exists("COS2"), "{:?}", m.list(""));

    // classes set before keep their values
    m.pqos(&["-e", "llc:1=0xff;llc:2=0xff00"]).ok();
    m.arm("write sys/fs/resctrl/*/schemata nth=2 errno=EIO");
    m.pqos(&["-e", "llc:1=0xf;llc:2=0xf0"]).failed();
    assert_eq!(m.read("COS1/schemata"), "    L3:0=ff;1=ff\n");
    assert_eq!(m.read("COS2/schemata"), "    L3:0=ff00;1=ff00\n");

    // an association failing midway puts the cores before it back
    m.arm("write sys/fs/resctrl/*/cpus_list nth=2 errno=EIO");
    let run = m.pqos(&["-a", "llc:1=4;llc:2=5"]).failed();
    eqnice!(
        "Setting allocation class of service association failed!\n\
         Allocation association error!\n",
        run.stdout
    );
    assert_eq!(m.read("COS1/cpus_list"), "\n");
    assert_eq!(m.read("COS2/cpus_list"), "\n");
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(core_line(&s, 4).ends_with(" => COS0"), "{s}");
}

/// `arch/x86/kernel/cpu/resctrl/core.c` `__check_quirks_intel`: the stock `skylake-sp`
/// (Gold 6140, stepping 4) boots with L3 CAT, CMT and MBM hidden from resctrl, so pqos on
/// the OS interface sees MBA only, as on the Skylake-SP machines of intel-cmt-cat issues
/// 228 and 290: `-s` lists MBA classes only, `-e llc:` fails with pqos's `Failed to
/// retrieve socket 0 L3 classes!`, `-d` shows no RDT monitoring and no L3 CAT, and, as
/// pqos's `os_cap_mon_discover` makes the perf events a monitoring capability of their own,
/// a Monitoring block of PMU events only where the platform has them.
#[test]
fn stock_skylake_sp_shows_mba_only_as_pqos_does_there() {
    let m = MountedOs::new("skylake-sp");
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.contains("MBA COS definitions for Socket 0:\n    MBA COS0 => 100% available\n"),
        "{s}"
    );
    assert!(!s.contains("L3CA"), "{s}");
    let e = m.pqos(&["-e", "llc:1=0x3f"]).failed();
    assert!(
        e.stdout.ends_with(
            "Failed to retrieve socket 0 L3 classes!\nAllocation configuration error!\n"
        ),
        "{}",
        e.stdout
    );
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(d.contains("Memory Bandwidth Allocation (MBA)"), "{d}");
    assert!(
        !d.contains("Cache Allocation")
            && !d.contains("Cache Monitoring Technology")
            && !d.contains("Memory Bandwidth Monitoring"),
        "{d}"
    );
    let pmu_only = "    Monitoring\n        PMU events:\n            LLC misses\n";
    assert_eq!(d.contains(pmu_only), m.has_pmu(), "{d}");
}

//! BMEC, ABMC and io_alloc on the `genoa` and `turin-dump` models, per kernel release
//! ([`super::abmc`]; spec §3.1, §5, §8.6, §9.3). `turin-dump` is the 64-CPU EPYC 9655 of the
//! dump, whose 8 L3 domains (ids 0, 2, .., 14) the expected texts name; the stock `turin`
//! has the same features (`models::tests`).

use std::time::Duration;

use super::errno::{EACCES, EINVAL, ENODEV, ENOENT, ENOSPC};
use super::{KernelVersion, MountOptions, Resctrl};
use crate::vfs::Tree;
use crate::{SimHandle, SimPlatform};

fn handle(model: &str, kernel: KernelVersion) -> SimHandle {
    let mut p = SimPlatform::builtin(model).unwrap();
    p.set_kernel(kernel);
    SimHandle::new(p)
}

fn mount(model: &str, kernel: KernelVersion) -> (SimHandle, Resctrl) {
    let sim = handle(model, kernel);
    let fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
    (sim, fs)
}

fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.unwrap_err().raw_os_error().unwrap()
}

fn text(fs: &mut Resctrl, path: &str) -> String {
    String::from_utf8(fs.read(path, 0, 1 << 20).unwrap()).unwrap()
}

fn names(fs: &Resctrl, dir: &str) -> Vec<String> {
    fs.list(dir).unwrap().into_iter().map(|(n, _)| n).collect()
}

fn status(fs: &mut Resctrl) -> String {
    text(fs, "info/last_cmd_status")
}

/// `ID=v` for every L3 domain of turin-dump (ids 0, 2, .., 14).
fn turin_all(v: &str) -> String {
    let doms: Vec<String> = (0..8).map(|i| format!("{}={v}", 2 * i)).collect();
    format!("{}\n", doms.join(";"))
}

#[test]
fn the_kernel_release_decides_which_files_exist_on_turin() {
    // 6.17: BMEC only
    let (_sim, mut fs) = mount("turin-dump", KernelVersion::V6_17);
    let l3mon = names(&fs, "info/L3_MON");
    assert!(
        l3mon.contains(&"mbm_total_bytes_config".into()),
        "{l3mon:?}"
    );
    assert!(!l3mon.contains(&"mbm_assign_mode".into()), "{l3mon:?}");
    assert_eq!(errno(fs.kind("mbm_L3_assignments")), ENOENT);
    assert_eq!(errno(fs.kind("info/L3/io_alloc")), ENOENT);
    assert!(text(&mut fs, "info/L3_MON/mon_features").contains("mbm_total_bytes_config\n"));
    fs.unmount().unwrap();
    // 6.18: ABMC on, BMEC files hidden
    let (_sim, mut fs) = mount("turin-dump", KernelVersion::V6_18);
    assert_eq!(
        names(&fs, "info/L3_MON"),
        [
            "available_mbm_cntrs",
            "max_threshold_occupancy",
            "mbm_assign_mode",
            "mbm_assign_on_mkdir",
            "mon_features",
            "num_mbm_cntrs",
            "num_rmids",
            "event_configs"
        ]
    );
    assert_eq!(
        text(&mut fs, "info/L3_MON/mbm_assign_mode"),
        "[mbm_event]\ndefault\n"
    );
    assert_eq!(text(&mut fs, "info/L3_MON/num_mbm_cntrs"), turin_all("32"));
    // the root holds 2 counters per domain from the mount
    assert_eq!(
        text(&mut fs, "info/L3_MON/available_mbm_cntrs"),
        turin_all("30")
    );
    assert_eq!(
        text(&mut fs, "info/L3_MON/mon_features"),
        "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n"
    );
    assert_eq!(
        text(
            &mut fs,
            "info/L3_MON/event_configs/mbm_local_bytes/event_filter"
        ),
        "local_reads,local_non_temporal_writes,local_reads_slow_memory\n"
    );
    assert!(names(&fs, "").contains(&"mbm_L3_assignments".into()));
    assert_eq!(errno(fs.kind("info/L3/io_alloc")), ENOENT);
    fs.unmount().unwrap();
    // 6.19: io_alloc too
    let (_sim, mut fs) = mount("turin-dump", KernelVersion::V6_19);
    assert_eq!(text(&mut fs, "info/L3/io_alloc"), "disabled\n");
    assert_eq!(text(&mut fs, "info/SMBA/num_closids"), "16\n");
}

#[test]
fn genoa_has_bmec_and_smba_but_no_assignable_counters_or_io_alloc() {
    let (_sim, mut fs) = mount("genoa", KernelVersion::V6_19);
    assert_eq!(text(&mut fs, "info/L3_MON/mbm_assign_mode"), "[default]\n");
    let all: Vec<String> = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        .iter()
        .chain(&[16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27])
        .map(|i| format!("{i}=0x7f"))
        .collect();
    assert_eq!(
        text(&mut fs, "info/L3_MON/mbm_total_bytes_config"),
        format!("{}\n", all.join(";"))
    );
    assert!(text(&mut fs, "info/L3_MON/mbm_local_bytes_config").starts_with("0=0x15;1=0x15;"));
    assert_eq!(errno(fs.kind("info/L3_MON/num_mbm_cntrs")), ENOENT);
    assert_eq!(errno(fs.kind("mbm_L3_assignments")), ENOENT);
    assert_eq!(errno(fs.kind("info/L3/io_alloc")), ENOENT);
    let schemata = text(&mut fs, "schemata");
    assert!(schemata.starts_with("  SMBA:0=2048;1=2048;"), "{schemata}");
    // mbm_assign_mode: mbm_event is not supported here
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_assign_mode", 0, b"mbm_event\n")),
        EINVAL
    );
    assert_eq!(status(&mut fs), "mbm_event mode is not supported\n");
}

#[test]
fn a_bmec_change_makes_the_next_read_unavailable_then_counts_from_zero() {
    // arrange: genoa's pipeline runs on CPUs 2-7 (L3 domain 0)
    let (sim, mut fs) = mount("genoa", KernelVersion::V6_17);
    sim.lock().advance(Duration::from_secs(1));
    let before: u64 = text(&mut fs, "mon_data/mon_L3_00/mbm_total_bytes")
        .trim()
        .parse()
        .unwrap();
    assert!(before > 0);
    // act
    fs.write("info/L3_MON/mbm_total_bytes_config", 0, b"0=0x33\n")
        .unwrap();
    // assert
    assert!(text(&mut fs, "info/L3_MON/mbm_total_bytes_config").starts_with("0=0x33;1=0x7f;"));
    assert_eq!(
        text(&mut fs, "mon_data/mon_L3_00/mbm_total_bytes"),
        "Unavailable\n"
    );
    assert_eq!(
        text(&mut fs, "mon_data/mon_L3_00/mbm_local_bytes"),
        "Unavailable\n",
        "both events of the domain are cleared"
    );
    sim.lock().advance(Duration::from_secs(1));
    let after: u64 = text(&mut fs, "mon_data/mon_L3_00/mbm_total_bytes")
        .trim()
        .parse()
        .unwrap();
    assert!(
        after > 0 && after < before + before / 2,
        "{before} then {after}"
    );
    // errors
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_total_bytes_config", 0, b"0=0x80\n")),
        EINVAL
    );
    assert_eq!(
        status(&mut fs),
        "Invalid event configuration: max valid mask is 0x7f\n"
    );
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_total_bytes_config", 0, b"x=1\n")),
        EINVAL
    );
    assert_eq!(status(&mut fs), "Missing '=' or non-numeric domain id\n");
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_total_bytes_config", 0, b"0=zz\n")),
        EINVAL
    );
    assert_eq!(status(&mut fs), "Non-numeric event configuration value\n");
    // `mon_config_write`: without `=`, the id is the whole token and parses; the value is
    // what is missing
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_total_bytes_config", 0, b"0\n")),
        EINVAL
    );
    assert_eq!(status(&mut fs), "Non-numeric event configuration value\n");
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_total_bytes_config", 0, b"13=1\n")),
        EINVAL
    );
}

#[test]
fn counters_run_out_with_a_message_and_unassigned_reads() {
    // arrange: 32 counters per domain, 2 per group: the root and 15 groups get them
    let (sim, mut fs) = mount("turin-dump", KernelVersion::V6_18);
    for i in 1..=15 {
        fs.mkdir(&format!("g{i}")).unwrap();
        assert_eq!(status(&mut fs), "ok\n", "g{i}");
    }
    assert_eq!(
        text(&mut fs, "info/L3_MON/available_mbm_cntrs"),
        turin_all("0")
    );
    // act: a 16th group (a MON group: the CLOSIDs are gone too) is made, without counters
    fs.mkdir("g1/mon_groups/g16").unwrap();
    // assert
    assert!(
        status(&mut fs).starts_with(
            "Failed to allocate counter for mbm_total_bytes in domain 0\n\
             Failed to allocate counter for mbm_total_bytes in domain 2\n"
        ),
        "{}",
        status(&mut fs)
    );
    assert_eq!(
        text(
            &mut fs,
            "g1/mon_groups/g16/mon_data/mon_L3_00/mbm_total_bytes"
        ),
        "Unassigned\n"
    );
    assert_eq!(
        text(&mut fs, "g1/mon_groups/g16/mbm_L3_assignments"),
        format!(
            "mbm_total_bytes:{}mbm_local_bytes:{}",
            turin_all("_"),
            turin_all("_")
        )
    );
    assert!(
        text(
            &mut fs,
            "g1/mon_groups/g16/mon_data/mon_L3_00/llc_occupancy"
        )
        .trim()
        .parse::<u64>()
        .is_ok()
    );
    // an explicit assignment without a free counter: ENOSPC and both messages
    assert_eq!(
        errno(fs.write(
            "g1/mon_groups/g16/mbm_L3_assignments",
            0,
            b"mbm_total_bytes:0=e\n"
        )),
        ENOSPC
    );
    assert_eq!(
        status(&mut fs),
        "Failed to allocate counter for mbm_total_bytes in domain 0\n\
         Assign operation 'mbm_total_bytes:0=e' failed\n"
    );
    // freeing one group's counters lets g16 take them
    fs.rmdir("g3").unwrap();
    assert_eq!(
        text(&mut fs, "info/L3_MON/available_mbm_cntrs"),
        turin_all("2")
    );
    fs.write(
        "g1/mon_groups/g16/mbm_L3_assignments",
        0,
        b"mbm_total_bytes:*=e\n",
    )
    .unwrap();
    sim.lock().advance(Duration::from_secs(1));
    let v = text(
        &mut fs,
        "g1/mon_groups/g16/mon_data/mon_L3_00/mbm_total_bytes",
    );
    assert!(v.trim().parse::<u64>().is_ok(), "{v}");
    assert_eq!(
        text(
            &mut fs,
            "g1/mon_groups/g16/mon_data/mon_L3_00/mbm_local_bytes"
        ),
        "Unassigned\n"
    );
}

#[test]
fn the_root_counts_traffic_and_a_ctrl_group_sums_only_assigned_members() {
    let (sim, mut fs) = mount("turin-dump", KernelVersion::V6_18);
    sim.lock().advance(Duration::from_secs(1));
    let root: u64 = text(&mut fs, "mon_data/mon_L3_00/mbm_total_bytes")
        .trim()
        .parse()
        .unwrap();
    assert!(root > 0, "the pipeline's traffic in domain 0");
    fs.mkdir("p").unwrap();
    fs.write("p/mbm_L3_assignments", 0, b"mbm_total_bytes:0=_\n")
        .unwrap();
    fs.mkdir("p/mon_groups/m").unwrap();
    fs.write(
        "p/mon_groups/m/mbm_L3_assignments",
        0,
        b"mbm_total_bytes:0=_\n",
    )
    .unwrap();
    assert_eq!(
        text(&mut fs, "p/mon_data/mon_L3_00/mbm_total_bytes"),
        "Unassigned\n"
    );
    fs.write(
        "p/mon_groups/m/mbm_L3_assignments",
        0,
        b"mbm_total_bytes:0=e\n",
    )
    .unwrap();
    assert_eq!(text(&mut fs, "p/mon_data/mon_L3_00/mbm_total_bytes"), "0\n");
}

#[test]
fn assignment_writes_report_the_kernels_errors() {
    let (_sim, mut fs) = mount("turin-dump", KernelVersion::V6_18);
    let w = |fs: &mut Resctrl, s: &str| errno(fs.write("mbm_L3_assignments", 0, s.as_bytes()));
    assert_eq!(
        w(&mut fs, "mbm_total_bytes:0=e"),
        EINVAL,
        "newline required"
    );
    assert_eq!(w(&mut fs, "mbm_totl_bytes:0=e\n"), ENOENT);
    assert_eq!(status(&mut fs), "Invalid event mbm_totl_bytes\n");
    assert_eq!(w(&mut fs, "mbm_total_bytes:1=e\n"), EINVAL);
    assert_eq!(status(&mut fs), "Invalid domain id 1\n");
    assert_eq!(w(&mut fs, "mbm_total_bytes:x=e\n"), EINVAL);
    assert_eq!(status(&mut fs), "Missing domain id\n");
    assert_eq!(w(&mut fs, "mbm_total_bytes:0=y\n"), EINVAL);
    assert_eq!(
        status(&mut fs),
        "Assign operation 'mbm_total_bytes:0=y' failed\n"
    );
    // `resctrl_parse_mbm_assignment`: without `=` the id is the whole token and the state
    // NULL, printed by the failed assignment; the token is trimmed but its id is not, so
    // `0 ` of ` 0 = e` is no number
    assert_eq!(w(&mut fs, "mbm_total_bytes:0\n"), EINVAL);
    assert_eq!(
        status(&mut fs),
        "Assign operation 'mbm_total_bytes:0=(null)' failed\n"
    );
    assert_eq!(w(&mut fs, "mbm_total_bytes: 0 = e\n"), EINVAL);
    assert_eq!(status(&mut fs), "Missing domain id\n");
    // read-only counter files
    assert_eq!(
        errno(fs.write("info/L3_MON/num_mbm_cntrs", 0, b"1\n")),
        EACCES
    );
    // event filters
    fs.write(
        "info/L3_MON/event_configs/mbm_total_bytes/event_filter",
        0,
        b"local_reads, remote_reads\n",
    )
    .unwrap();
    assert_eq!(
        text(
            &mut fs,
            "info/L3_MON/event_configs/mbm_total_bytes/event_filter"
        ),
        "local_reads,remote_reads\n"
    );
    assert_eq!(
        errno(fs.write(
            "info/L3_MON/event_configs/mbm_total_bytes/event_filter",
            0,
            b"x\n"
        )),
        EINVAL
    );
    assert_eq!(status(&mut fs), "Invalid memory transaction type x\n");
}

#[test]
fn switching_to_default_mode_frees_every_counter_and_shows_bmec_again() {
    let (_sim, mut fs) = mount("turin-dump", KernelVersion::V6_18);
    fs.mkdir("g").unwrap();
    // act
    fs.write("info/L3_MON/mbm_assign_mode", 0, b"default\n")
        .unwrap();
    // assert
    assert_eq!(
        text(&mut fs, "info/L3_MON/mbm_assign_mode"),
        "[default]\nmbm_event\n"
    );
    assert_eq!(
        errno(fs.read("info/L3_MON/available_mbm_cntrs", 0, 4096)),
        EINVAL
    );
    assert_eq!(
        status(&mut fs),
        "mbm_event counter assignment mode is not enabled\n"
    );
    assert_eq!(errno(fs.read("g/mbm_L3_assignments", 0, 4096)), EINVAL);
    assert!(names(&fs, "info/L3_MON").contains(&"mbm_total_bytes_config".into()));
    assert!(
        text(&mut fs, "g/mon_data/mon_L3_00/mbm_total_bytes")
            .trim()
            .parse::<u64>()
            .is_ok()
    );
    // back on: nothing assigned until asked
    fs.write("info/L3_MON/mbm_assign_mode", 0, b"mbm_event\n")
        .unwrap();
    assert_eq!(
        text(&mut fs, "g/mon_data/mon_L3_00/mbm_total_bytes"),
        "Unassigned\n"
    );
    assert_eq!(
        text(&mut fs, "info/L3_MON/available_mbm_cntrs"),
        turin_all("32")
    );
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_assign_mode", 0, b"other\n")),
        EINVAL
    );
    assert_eq!(status(&mut fs), "Unsupported assign mode\n");
    // mbm_assign_on_mkdir: a value kstrtobool refuses is a bare EINVAL before
    // `last_cmd_status` is cleared (`resctrl_mbm_assign_on_mkdir_write`, 6.18): the previous
    // status stays
    assert_eq!(
        errno(fs.write("info/L3_MON/mbm_assign_on_mkdir", 0, b"maybe\n")),
        EINVAL
    );
    assert_eq!(status(&mut fs), "Unsupported assign mode\n");
    fs.write("info/L3_MON/mbm_assign_on_mkdir", 0, b"0")
        .unwrap();
    fs.mkdir("h").unwrap();
    assert_eq!(
        text(&mut fs, "info/L3_MON/available_mbm_cntrs"),
        turin_all("32")
    );
    assert_eq!(text(&mut fs, "info/L3_MON/mbm_assign_on_mkdir"), "0\n");
}

#[test]
fn io_alloc_reserves_the_highest_closid_and_holds_a_cbm() {
    let (sim, mut fs) = mount("turin-dump", KernelVersion::V6_19);
    // act
    fs.write("info/L3/io_alloc", 0, b"1").unwrap();
    // assert
    assert_eq!(text(&mut fs, "info/L3/io_alloc"), "enabled\n");
    assert_eq!(text(&mut fs, "info/L3/io_alloc_cbm"), turin_all("ffff"));
    fs.write("info/L3/io_alloc_cbm", 0, b"0=ff\n").unwrap();
    assert!(text(&mut fs, "info/L3/io_alloc_cbm").starts_with("0=ff;2=ffff;"));
    // `rdt_bit_usage_show`: io_alloc's CBM counts as hardware's, so the ways I/O shares
    // with the root group read X, the others S
    assert!(
        text(&mut fs, "info/L3/bit_usage").starts_with("0=SSSSSSSSXXXXXXXX;2=XXXXXXXXXXXXXXXX;"),
        "{}",
        text(&mut fs, "info/L3/bit_usage")
    );
    // L3 mask 15 of domain 0 (CPU 0) holds it
    let mut h = sim.clone();
    let v = rdt_msr::MsrIo::read(
        &mut h,
        rdt_core::LogicalCpu::new(0),
        rdt_msr::MsrAddr::new(0xc90 + 15),
    )
    .unwrap();
    assert_eq!(v, 0xff);
    // CLOSIDs 1..=14 remain for groups
    for i in 1..=14 {
        fs.mkdir(&format!("g{i}")).unwrap();
    }
    assert_eq!(errno(fs.mkdir("g15")), ENOSPC);
    assert_eq!(status(&mut fs), "Out of CLOSIDs\n");
    // disabling frees it; a group then takes it and io_alloc cannot be enabled again
    fs.write("info/L3/io_alloc", 0, b"0\n").unwrap();
    assert_eq!(errno(fs.read("info/L3/io_alloc_cbm", 0, 4096)), EINVAL);
    assert_eq!(status(&mut fs), "io_alloc is not enabled on L3\n");
    fs.mkdir("g15").unwrap();
    assert_eq!(errno(fs.write("info/L3/io_alloc", 0, b"1")), ENOSPC);
    assert_eq!(
        status(&mut fs),
        "CLOSID (ctrl_hw_id) 15 for io_alloc is used by g15 group\n"
    );
    assert_eq!(errno(fs.write("info/L3/io_alloc", 0, b"maybe")), EINVAL);
    // MB has no io_alloc files; nothing else is ENODEV-capable here
    assert_eq!(errno(fs.kind("info/MB/io_alloc")), ENOENT);
    let _ = ENODEV;
}

#[test]
fn a_parked_mount_keeps_its_counter_assignments() {
    let (sim, mut fs) = mount("turin-dump", KernelVersion::V6_18);
    fs.mkdir("g").unwrap();
    fs.write("g/mbm_L3_assignments", 0, b"mbm_local_bytes:2=_\n")
        .unwrap();
    fs.write("info/L3_MON/mbm_assign_on_mkdir", 0, b"0\n")
        .unwrap();
    let before = text(&mut fs, "g/mbm_L3_assignments");
    // act
    let state = fs.park();
    let json = serde_json::to_string(&state).unwrap();
    let back = serde_json::from_str(&json).unwrap();
    let mut fs = Resctrl::restore(sim, &back).unwrap();
    // assert
    assert_eq!(text(&mut fs, "g/mbm_L3_assignments"), before);
    assert_eq!(text(&mut fs, "info/L3_MON/mbm_assign_on_mkdir"), "0\n");
    assert!(text(&mut fs, "info/L3_MON/available_mbm_cntrs").starts_with("0=28;2=29;"));
}

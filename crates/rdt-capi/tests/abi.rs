//! The ABI of libpqos v26.03: every structure's size and every field's offset and size, as a
//! C program compiled against `include/pqos.h` prints them (tests/c/abi.c), equal to the
//! numbers Intel's header gives; every exported function assignable to a pointer of Intel's
//! prototype type with `-Werror` (tests/c/prototypes.c), and exported by the library.

mod support;

use support::{c_source, cc, crate_dir, run};

/// Intel's layout of pqos.h v26.03 on x86-64 (System V ABI): `(name, offset, size)` for each
/// field, `(name, size, 0)` for a structure, where `name` has no dot.
///
/// Source: the field order and C types of intel-cmt-cat's `lib/pqos.h`. The header of the
/// v26.03 tag itself (PQOS_VERSION 70000) was not among the stored copies we could read;
/// compared field by field, structure by structure and prototype by prototype (2026-12-02)
/// were the two releases around it: master's `lib/pqos.h` at PQOS_VERSION 70100 ("version
/// 7.1.0", copyright 2014-2026; stored copy id 70130352864) and the 6.0.1 one (PQOS_VERSION
/// 60001; id 6700082927). Every structure here has the same fields, order and types in
/// 7.1.0, `pqos_channel.cxld` included (6.0.1 has no `cxld`: 7.x's is counted). What 7.1.0
/// has beyond 70000 and this header leaves out: `PQOS_CAP_TYPE_HYBRID` (NUMOF 6) and the
/// hybrid structures and functions, `pqos_sysconfig.mem_regions` (a trailing pointer; 6.0.1
/// has none) with the memory-region/CXL descriptions, `pqos_get_num_mem_regions`,
/// `pqos_mon_event_valid`, `pqos_open`/`pqos_fopen`/`pqos_fclose`. Its COS → CLOS rename
/// (`PQOS_MAX_CLOS*`, `pqos_*_get_clos_num`) is answered by defining and exporting both
/// names. Our unions and the CDP mask pair are named types (`pqos_capability_u`,
/// `pqos_ca_u`, `pqos_ca_masks`) where Intel's are anonymous: same layout, same member
/// names, so `cap->u.l3ca` and `ca.u.s.data_mask` compile unchanged. Derived by hand with the SysV
/// x86-64 rules: `int`, `unsigned`, enums, `pid_t` and `uint32_t` are 4 bytes aligned 4;
/// `uint16_t` 2; `uint64_t`, `double` and pointers 8 aligned 8; each field at the next
/// multiple of its alignment; a structure or union aligned to its largest member and its
/// size rounded up to that; a flexible `x[0]` member adds no size but its alignment. For
/// example `pqos_mon_data`: valid 0, event 4, context 8, values 16 (16 × 8 = 128 bytes),
/// num_pids 144, pids 152, tid_nr 160, tid_map 168, cores 176, num_cores 184, channels 192,
/// num_channels 200, intl 208, region_values 216 (13 × 8 = 104), regions 320 (5 × 4 = 20),
/// end 340, rounded to 8: 344.
const INTEL: &[(&str, usize, usize)] = &[
    ("pqos_config", 32, 0),
    ("pqos_config.fd_log", 0, 4),
    ("pqos_config.callback_log", 8, 8),
    ("pqos_config.context_log", 16, 8),
    ("pqos_config.verbose", 24, 4),
    ("pqos_config.interface", 28, 4),
    ("pqos_cap_l3ca", 48, 0),
    ("pqos_cap_l3ca.mem_size", 0, 4),
    ("pqos_cap_l3ca.num_classes", 4, 4),
    ("pqos_cap_l3ca.num_ways", 8, 4),
    ("pqos_cap_l3ca.way_size", 12, 4),
    ("pqos_cap_l3ca.way_contention", 16, 8),
    ("pqos_cap_l3ca.cdp", 24, 4),
    ("pqos_cap_l3ca.cdp_on", 28, 4),
    ("pqos_cap_l3ca.non_contiguous_cbm", 32, 4),
    ("pqos_cap_l3ca.iordt", 36, 4),
    ("pqos_cap_l3ca.iordt_on", 40, 4),
    ("pqos_cap_l2ca", 40, 0),
    ("pqos_cap_l2ca.mem_size", 0, 4),
    ("pqos_cap_l2ca.num_classes", 4, 4),
    ("pqos_cap_l2ca.num_ways", 8, 4),
    ("pqos_cap_l2ca.way_size", 12, 4),
    ("pqos_cap_l2ca.way_contention", 16, 8),
    ("pqos_cap_l2ca.cdp", 24, 4),
    ("pqos_cap_l2ca.cdp_on", 28, 4),
    ("pqos_cap_l2ca.non_contiguous_cbm", 32, 4),
    ("pqos_cap_mba", 36, 0),
    ("pqos_cap_mba.mem_size", 0, 4),
    ("pqos_cap_mba.num_classes", 4, 4),
    ("pqos_cap_mba.throttle_max", 8, 4),
    ("pqos_cap_mba.throttle_step", 12, 4),
    ("pqos_cap_mba.is_linear", 16, 4),
    ("pqos_cap_mba.ctrl", 20, 4),
    ("pqos_cap_mba.ctrl_on", 24, 4),
    ("pqos_cap_mba.mba40", 28, 4),
    ("pqos_cap_mba.mba40_on", 32, 4),
    ("pqos_monitor", 20, 0),
    ("pqos_monitor.type", 0, 4),
    ("pqos_monitor.max_rmid", 4, 4),
    ("pqos_monitor.scale_factor", 8, 4),
    ("pqos_monitor.counter_length", 12, 4),
    ("pqos_monitor.iordt", 16, 4),
    ("pqos_cap_mon", 32, 0),
    ("pqos_cap_mon.mem_size", 0, 4),
    ("pqos_cap_mon.max_rmid", 4, 4),
    ("pqos_cap_mon.l3_size", 8, 4),
    ("pqos_cap_mon.num_events", 12, 4),
    ("pqos_cap_mon.iordt", 16, 4),
    ("pqos_cap_mon.iordt_on", 20, 4),
    ("pqos_cap_mon.snc_num", 24, 4),
    ("pqos_cap_mon.snc_mode", 28, 4),
    ("pqos_cap_mon.events", 32, 0),
    ("pqos_capability", 16, 0),
    ("pqos_capability.type", 0, 4),
    ("pqos_capability.u", 8, 8),
    ("pqos_capability.u.mon", 8, 8),
    ("pqos_capability.u.smba", 8, 8),
    ("pqos_capability.u.generic_ptr", 8, 8),
    ("pqos_cap", 16, 0),
    ("pqos_cap.mem_size", 0, 4),
    ("pqos_cap.version", 4, 4),
    ("pqos_cap.num_cap", 8, 4),
    ("pqos_cap.capabilities", 16, 0),
    ("pqos_coreinfo", 32, 0),
    ("pqos_coreinfo.lcore", 0, 4),
    ("pqos_coreinfo.socket", 4, 4),
    ("pqos_coreinfo.l3_id", 8, 4),
    ("pqos_coreinfo.l2_id", 12, 4),
    ("pqos_coreinfo.l3cat_id", 16, 4),
    ("pqos_coreinfo.mba_id", 20, 4),
    ("pqos_coreinfo.numa", 24, 4),
    ("pqos_coreinfo.smba_id", 28, 4),
    ("pqos_cacheinfo", 28, 0),
    ("pqos_cacheinfo.detected", 0, 4),
    ("pqos_cacheinfo.num_ways", 4, 4),
    ("pqos_cacheinfo.num_sets", 8, 4),
    ("pqos_cacheinfo.num_partitions", 12, 4),
    ("pqos_cacheinfo.line_size", 16, 4),
    ("pqos_cacheinfo.total_size", 20, 4),
    ("pqos_cacheinfo.way_size", 24, 4),
    ("pqos_cpuinfo", 68, 0),
    ("pqos_cpuinfo.mem_size", 0, 4),
    ("pqos_cpuinfo.l2", 4, 28),
    ("pqos_cpuinfo.l3", 32, 28),
    ("pqos_cpuinfo.vendor", 60, 4),
    ("pqos_cpuinfo.num_cores", 64, 4),
    ("pqos_cpuinfo.cores", 68, 0),
    ("pqos_channel", 40, 0),
    ("pqos_channel.channel_id", 0, 8),
    ("pqos_channel.rmid_tagging", 8, 4),
    ("pqos_channel.clos_tagging", 12, 4),
    ("pqos_channel.cxld", 16, 4),
    ("pqos_channel.mmio_addr", 24, 8),
    ("pqos_channel.numa", 32, 4),
    ("pqos_dev", 72, 0),
    ("pqos_dev.type", 0, 4),
    ("pqos_dev.segment", 4, 2),
    ("pqos_dev.bdf", 6, 2),
    ("pqos_dev.channel", 8, 64),
    ("pqos_devinfo", 32, 0),
    ("pqos_devinfo.num_channels", 0, 4),
    ("pqos_devinfo.channels", 8, 8),
    ("pqos_devinfo.num_devs", 16, 4),
    ("pqos_devinfo.devs", 24, 8),
    ("pqos_cores_domains", 16, 0),
    ("pqos_cores_domains.num_cores", 0, 4),
    ("pqos_cores_domains.domains", 8, 8),
    ("pqos_channels_domains", 32, 0),
    ("pqos_channels_domains.num_channel_ids", 0, 4),
    ("pqos_channels_domains.channel_ids", 8, 8),
    ("pqos_channels_domains.domain_ids", 16, 8),
    ("pqos_channels_domains.domain_id_idxs", 24, 8),
    ("pqos_sysconfig", 56, 0),
    ("pqos_sysconfig.cap", 0, 8),
    ("pqos_sysconfig.cpu", 8, 8),
    ("pqos_sysconfig.dev", 16, 8),
    ("pqos_sysconfig.erdt", 24, 8),
    ("pqos_sysconfig.mrrm", 32, 8),
    ("pqos_sysconfig.cores_domains", 40, 8),
    ("pqos_sysconfig.channels_domains", 48, 8),
    ("pqos_event_values", 128, 0),
    ("pqos_event_values.llc", 0, 8),
    ("pqos_event_values.mbm_local", 8, 8),
    ("pqos_event_values.mbm_total", 16, 8),
    ("pqos_event_values.mbm_remote", 24, 8),
    ("pqos_event_values.mbm_local_delta", 32, 8),
    ("pqos_event_values.mbm_total_delta", 40, 8),
    ("pqos_event_values.mbm_remote_delta", 48, 8),
    ("pqos_event_values.ipc_retired", 56, 8),
    ("pqos_event_values.ipc_retired_delta", 64, 8),
    ("pqos_event_values.ipc_unhalted", 72, 8),
    ("pqos_event_values.ipc_unhalted_delta", 80, 8),
    ("pqos_event_values.ipc", 88, 8),
    ("pqos_event_values.llc_misses", 96, 8),
    ("pqos_event_values.llc_misses_delta", 104, 8),
    ("pqos_event_values.llc_references", 112, 8),
    ("pqos_event_values.llc_references_delta", 120, 8),
    ("pqos_region_aware_event_values", 104, 0),
    ("pqos_region_aware_event_values.mbm_total", 0, 32),
    ("pqos_region_aware_event_values.mbm_total_delta", 32, 32),
    ("pqos_region_aware_event_values.io_llc", 64, 8),
    ("pqos_region_aware_event_values.io_total", 72, 8),
    ("pqos_region_aware_event_values.io_total_delta", 80, 8),
    ("pqos_region_aware_event_values.io_miss", 88, 8),
    ("pqos_region_aware_event_values.io_miss_delta", 96, 8),
    ("pqos_mon_mem_region", 20, 0),
    ("pqos_mon_mem_region.region_num", 0, 16),
    ("pqos_mon_mem_region.num_mem_regions", 16, 4),
    ("pqos_mon_data", 344, 0),
    ("pqos_mon_data.valid", 0, 4),
    ("pqos_mon_data.event", 4, 4),
    ("pqos_mon_data.context", 8, 8),
    ("pqos_mon_data.values", 16, 128),
    ("pqos_mon_data.num_pids", 144, 4),
    ("pqos_mon_data.pids", 152, 8),
    ("pqos_mon_data.tid_nr", 160, 4),
    ("pqos_mon_data.tid_map", 168, 8),
    ("pqos_mon_data.cores", 176, 8),
    ("pqos_mon_data.num_cores", 184, 4),
    ("pqos_mon_data.channels", 192, 8),
    ("pqos_mon_data.num_channels", 200, 4),
    ("pqos_mon_data.intl", 208, 8),
    ("pqos_mon_data.region_values", 216, 104),
    ("pqos_mon_data.regions", 320, 20),
    ("pqos_mon_config", 8, 0),
    ("pqos_mon_config.l3_iordt", 0, 4),
    ("pqos_mon_config.snc", 4, 4),
    ("pqos_alloc_config", 40, 0),
    ("pqos_alloc_config.l3_cdp", 0, 4),
    ("pqos_alloc_config.l2_cdp", 4, 4),
    ("pqos_alloc_config.mba", 8, 4),
    ("pqos_alloc_config.mba40", 12, 4),
    ("pqos_alloc_config.l3_iordt", 16, 4),
    ("pqos_alloc_config.smba", 20, 4),
    ("pqos_alloc_config.reserved", 24, 16),
    ("pqos_l3ca", 32, 0),
    ("pqos_l3ca.domain_id", 0, 2),
    ("pqos_l3ca.class_id", 4, 4),
    ("pqos_l3ca.cdp", 8, 4),
    ("pqos_l3ca.u", 16, 16),
    ("pqos_l3ca.u.ways_mask", 16, 8),
    ("pqos_l3ca.u.s.data_mask", 16, 8),
    ("pqos_l3ca.u.s.code_mask", 24, 8),
    ("pqos_l2ca", 24, 0),
    ("pqos_l2ca.class_id", 0, 4),
    ("pqos_l2ca.cdp", 4, 4),
    ("pqos_l2ca.u", 8, 16),
    ("pqos_l2ca.u.ways_mask", 8, 8),
    ("pqos_l2ca.u.s.data_mask", 8, 8),
    ("pqos_l2ca.u.s.code_mask", 16, 8),
    ("pqos_mba_mem_region", 16, 0),
    ("pqos_mba_mem_region.bw_ctrl_val", 0, 12),
    ("pqos_mba_mem_region.region_num", 12, 4),
    ("pqos_mba", 88, 0),
    ("pqos_mba.class_id", 0, 4),
    ("pqos_mba.mb_max", 4, 4),
    ("pqos_mba.ctrl", 8, 4),
    ("pqos_mba.smba", 12, 4),
    ("pqos_mba.domain_id", 16, 2),
    ("pqos_mba.num_mem_regions", 20, 4),
    ("pqos_mba.mem_regions", 24, 64),
    ("enum_pqos_mon_event", 4, 0),
    ("enum_pqos_interface", 4, 0),
];

fn compile(source: &str, out: &std::path::Path) {
    let mut cmd = cc();
    cmd.args([
        "-std=gnu11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wno-unused-parameter",
        "-I",
    ])
    .arg(crate_dir().join("include"))
    .arg(c_source(source))
    .arg("-o")
    .arg(out);
    run(cmd);
}

#[test]
fn every_structure_has_intels_layout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = dir.path().join("abi");
    compile("abi.c", &exe);
    let printed = run(std::process::Command::new(&exe));
    let mut ours = Vec::new();
    for line in printed.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| {
            parts
                .get(i)
                .map_or(0, |s| s.parse::<usize>().expect("a number"))
        };
        ours.push((parts[0].to_owned(), num(1), num(2)));
    }
    let intel: Vec<(String, usize, usize)> = INTEL
        .iter()
        .map(|&(n, a, b)| (n.to_owned(), a, b))
        .collect();
    for (want, got) in intel.iter().zip(&ours) {
        assert_eq!(want, got, "layout differs from libpqos v26.03's");
    }
    assert_eq!(
        intel.len(),
        ours.len(),
        "every field is checked, and only those"
    );
}

#[test]
fn every_function_has_intels_prototype_and_is_exported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = dir.path().join("prototypes.o");
    let mut cmd = cc();
    cmd.args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-c", "-I"])
        .arg(crate_dir().join("include"))
        .arg(c_source("prototypes.c"))
        .arg("-o")
        .arg(&obj);
    run(cmd);
    // Every function of Intel's list is exported by the library, and nothing else is.
    let source = std::fs::read_to_string(c_source("prototypes.c")).expect("prototypes.c");
    let mut intel: Vec<&str> = source
        .lines()
        .filter_map(|l| l.strip_prefix("P("))
        .filter_map(|l| l.split(',').next())
        .collect();
    intel.sort_unstable();
    let mut nm = std::process::Command::new("nm");
    nm.args(["-D", "--defined-only"]).arg(support::cdylib());
    let symbols = run(nm);
    let mut exported: Vec<&str> = symbols
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("pqos_"))
        .collect();
    exported.sort_unstable();
    assert_eq!(
        exported, intel,
        "libpqos.so exports exactly libpqos v26.03's functions (and 7.1.0's CLOS names)"
    );
}

#[test]
fn the_library_records_its_soname() {
    let mut readelf = std::process::Command::new("readelf");
    readelf.arg("-d").arg(support::cdylib());
    let dynamic = run(readelf);
    assert!(
        dynamic.contains("Library soname: [libpqos.so.7]"),
        "soname of libpqos.so:\n{dynamic}"
    );
}

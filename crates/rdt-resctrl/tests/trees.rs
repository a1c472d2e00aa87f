//! Read-only behaviour on the eight real resctrl trees of goresctrl (`data/goresctrl`, see its
//! PROVENANCE.md): each test copies a tree into a temporary directory, opens it as the
//! resctrl root, and checks what the backend reports against the tree's own files (parsed
//! here independently of the crate's parsers).
#![allow(clippy::tests_outside_test_module)]
// Helpers outside #[test] fns unwrap too: a broken fixture should fail the test loudly.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdt_core::{
    Backend, BackendExt, CacheDomain, CatMask, CatResource, ClassId, CpuPlacement, GroupKind,
    GroupOwner, LogicalCpu, MbaCtrl, MbaKind, MbaLimit, MonEvents, NoPmu, RequestError, Topology,
};
use rdt_resctrl::{
    ResctrlBackend, ResctrlError, ResctrlOptions, ResctrlTelemetry, TelemetryOptions,
};
use tempfile::TempDir;

const TREES: &[&str] = &[
    "resctrl.full",
    "resctrl.l2",
    "resctrl.l2cdp",
    "resctrl.l2l3mb",
    "resctrl.nol3",
    "resctrl.nol3.mbps",
    "resctrl.nomb",
    "resctrl.nomb.cdp",
];

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A copy of tree `name` in a fresh temporary directory.
fn tree(name: &str) -> (TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/goresctrl")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("resctrl");
    copy_dir(&src, &root);
    (dir, root)
}

fn read(root: &Path, rel: &str) -> Option<String> {
    fs::read_to_string(root.join(rel)).ok()
}

/// The tree's root `schemata`, parsed independently: name -> [(domain, value)].
fn schemata(root: &Path) -> BTreeMap<String, Vec<(u32, String)>> {
    read(root, "schemata")
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, rest) = l.split_once(':').unwrap();
            let vals = rest
                .split(';')
                .filter(|t| !t.trim().is_empty())
                .map(|t| {
                    let (d, v) = t.split_once('=').unwrap();
                    (d.trim().parse().unwrap(), v.trim().to_owned())
                })
                .collect();
            (name.trim().to_owned(), vals)
        })
        .collect()
}

/// A topology with the tree's L3 and L2 domains: CPUs from the root's `cpus_list` (or enough
/// for every domain), spread evenly over the domains in id order.
fn topology(root: &Path) -> Topology {
    let s = schemata(root);
    let ids = |names: &[&str]| -> Vec<u32> {
        names
            .iter()
            .find_map(|n| s.get(*n))
            .map(|v| v.iter().map(|(d, _)| *d).collect())
            .unwrap_or_default()
    };
    let mut l3 = ids(&["L3", "L3DATA", "MB"]);
    if l3.is_empty() {
        l3 = fs::read_dir(root.join("mon_data"))
            .map(|rd| {
                rd.filter_map(|e| {
                    e.ok()?
                        .file_name()
                        .to_str()?
                        .strip_prefix("mon_L3_")?
                        .parse()
                        .ok()
                })
                .collect()
            })
            .unwrap_or_default();
        l3.sort_unstable();
    }
    let l2 = ids(&["L2", "L2DATA"]);
    let n_cpus: u32 = read(root, "cpus_list")
        .and_then(|t| t.trim().rsplit('-').next()?.parse::<u32>().ok())
        .map_or_else(
            || u32::try_from(l2.len().max(l3.len()).max(1)).unwrap() * 2,
            |last| last + 1,
        );
    let per = |n: usize| (n_cpus as usize).div_ceil(n.max(1));
    Topology::from_placements(
        (0..n_cpus)
            .map(|c| {
                let i = c as usize;
                CpuPlacement {
                    cpu: LogicalCpu::new(c),
                    package: 0,
                    core: Some(c),
                    l2: CacheDomain::new(l2.get(i / per(l2.len())).copied().unwrap_or(c)),
                    l3: l3.get(i / per(l3.len())).map(|&d| CacheDomain::new(d)),
                    node: 0,
                }
            })
            .collect(),
    )
}

fn open(root: &Path) -> ResctrlBackend {
    ResctrlBackend::open(ResctrlOptions::new(root), topology(root), None, NoPmu)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
}

fn num(root: &Path, rel: &str) -> Option<u64> {
    read(root, rel).map(|t| t.trim().parse().unwrap())
}

fn hex(root: &Path, rel: &str) -> Option<u64> {
    read(root, rel).map(|t| u64::from_str_radix(t.trim(), 16).unwrap())
}

#[test]
fn capabilities_are_what_info_says_on_every_tree() {
    for name in TREES {
        // arrange
        let (_d, root) = tree(name);
        // act
        let rdt = open(&root);
        let caps = rdt.capabilities();
        // every resource's class count is the kernel's: the fewest num_closids of all
        let fewest = std::fs::read_dir(root.join("info"))
            .unwrap()
            .filter_map(|e| {
                let dir = e.unwrap().file_name();
                num(
                    &root,
                    &format!("info/{}/num_closids", dir.to_string_lossy()),
                )
            })
            .min();
        // assert: every CAT resource as its info/ directory (or the CDP pair) says
        for (level, res) in [("L3", CatResource::L3), ("L2", CatResource::L2)] {
            let cdp = root.join(format!("info/{level}CODE")).is_dir();
            let dir = if cdp {
                format!("info/{level}DATA")
            } else {
                format!("info/{level}")
            };
            let Some(closids) = num(&root, &format!("{dir}/num_closids")) else {
                assert!(caps.cat(res).is_none(), "{name}: {level} not in info/");
                continue;
            };
            let cat = caps.cat(res).unwrap_or_else(|| panic!("{name}: {level}"));
            let cbm = hex(&root, &format!("{dir}/cbm_mask")).unwrap();
            assert_eq!(cat.full_mask().bits(), cbm, "{name} {level}");
            assert_eq!(
                Some(u64::from(cat.usable_classes())),
                fewest,
                "{name} {level}"
            );
            assert!(closids >= u64::from(cat.usable_classes()), "{name} {level}");
            assert_eq!(cat.cdp_enabled, cdp, "{name} {level}");
            assert_eq!(
                cat.shareable_bits,
                hex(&root, &format!("{dir}/shareable_bits")).unwrap(),
                "{name} {level}"
            );
            assert_eq!(
                u64::from(cat.min_cbm_bits),
                num(&root, &format!("{dir}/min_cbm_bits")).unwrap(),
                "{name} {level}"
            );
            if let Some(sparse) = num(&root, &format!("{dir}/sparse_masks")) {
                assert_eq!(cat.non_contiguous_cbm, sparse == 1, "{name} {level}");
            }
        }
        match num(&root, "info/MB/num_closids") {
            None => assert!(!caps.mba.is_present(), "{name}"),
            Some(n) => {
                let mba = caps.mba.get().unwrap();
                assert_eq!(Some(u64::from(mba.num_classes)), fewest, "{name}");
                assert!(n >= u64::from(mba.num_classes), "{name}");
                let min = num(&root, "info/MB/min_bandwidth").unwrap();
                assert_eq!(u64::from(mba.granularity()), min, "{name}");
                assert!(
                    matches!(mba.kind, MbaKind::IntelDelay { linear: true, .. }),
                    "{name}: delay_linear 1"
                );
            }
        }
        match num(&root, "info/L3_MON/num_rmids") {
            None => assert!(!caps.monitoring.is_present(), "{name}"),
            Some(n) => {
                let mon = caps.monitoring.get().unwrap();
                assert_eq!(u64::from(mon.num_rmids), n, "{name}");
                let features = read(&root, "info/L3_MON/mon_features").unwrap();
                assert_eq!(
                    mon.events.llc_occupancy,
                    features.lines().any(|l| l == "llc_occupancy")
                );
                assert_eq!(
                    mon.events.mbm_local,
                    features.lines().any(|l| l == "mbm_local_bytes")
                );
            }
        }
    }
}

#[test]
fn schemata_of_cos0_are_the_root_files_in_plain_padded_and_cdp_forms() {
    for name in TREES {
        let (_d, root) = tree(name);
        let mut rdt = open(&root);
        let s = schemata(&root);
        for (level, res) in [("L3", CatResource::L3), ("L2", CatResource::L2)] {
            let (uni, data, code) = (
                s.get(level),
                s.get(&format!("{level}DATA")),
                s.get(&format!("{level}CODE")),
            );
            let Some(doms) = uni.or(data) else { continue };
            for (d, _) in doms {
                // act
                let classes = rdt.cat_classes(res, CacheDomain::new(*d)).unwrap();
                // assert
                let value = |line: &Vec<(u32, String)>| {
                    let v = &line.iter().find(|(x, _)| x == d).unwrap().1;
                    u64::from_str_radix(v, 16).unwrap()
                };
                let got = classes[0].mask;
                match got {
                    CatMask::Unified(m) => assert_eq!(m.bits(), value(uni.unwrap()), "{name}"),
                    CatMask::Cdp { data: dm, code: cm } => {
                        assert_eq!(dm.bits(), value(data.unwrap()), "{name}");
                        assert_eq!(cm.bits(), value(code.unwrap()), "{name}");
                    }
                }
                // A class without a COS<n> group reads as reset: every way.
                let full = rdt.capabilities().cat(res).unwrap().full_mask();
                let last = classes.last().unwrap();
                assert!(last.class.get() > 0);
                match last.mask {
                    CatMask::Unified(m) => assert_eq!(m, full),
                    CatMask::Cdp { data, code } => assert_eq!((data, code), (full, full)),
                }
            }
        }
        if let Some(mb) = s.get("MB") {
            for (d, v) in mb {
                let classes = rdt.mba_classes(CacheDomain::new(*d)).unwrap();
                let want: u32 = v.parse().unwrap();
                let got = classes[0].limit;
                if *name == "resctrl.nol3.mbps" {
                    assert_eq!(got, MbaLimit::MibPerSec(want), "{name}");
                } else {
                    assert_eq!(
                        got,
                        MbaLimit::Percent(u8::try_from(want).unwrap()),
                        "{name}"
                    );
                }
            }
        }
    }
}

#[test]
fn mba_mbps_is_recognised_from_the_tree_and_percent_elsewhere() {
    let (_d, root) = tree("resctrl.nol3.mbps");
    let mut rdt = open(&root);
    assert!(rdt.mount_options().mba_mbps);
    assert_eq!(rdt.mba_ctrl(), Some(MbaCtrl::Enabled));
    let (_d, root) = tree("resctrl.nol3");
    let mut rdt = open(&root);
    assert!(!rdt.mount_options().mba_mbps);
    assert_eq!(rdt.mba_ctrl(), Some(MbaCtrl::Disabled));
    // The kernel's own marker (6.x): mba_MBps_event in the root.
    fs::write(root.join("mba_MBps_event"), "mbm_local_bytes\n").unwrap();
    assert_eq!(open(&root).mba_ctrl(), Some(MbaCtrl::Enabled));
    // No MBM: the controller cannot run.
    let (_d, root) = tree("resctrl.l2l3mb");
    fs::write(root.join("info/L3_MON/mon_features"), "llc_occupancy\n").unwrap();
    assert_eq!(open(&root).mba_ctrl(), Some(MbaCtrl::Unsupported));
}

#[test]
fn cdp_is_on_iff_l3code_exists() {
    let (_d, root) = tree("resctrl.nomb.cdp");
    let rdt = open(&root);
    assert!(rdt.mount_options().cdp && !rdt.mount_options().cdpl2);
    let (_d, root) = tree("resctrl.l2cdp");
    let rdt = open(&root);
    assert!(!rdt.mount_options().cdp && rdt.mount_options().cdpl2);
}

#[test]
fn groups_are_listed_and_classified_by_name() {
    // arrange: the full tree plus a COS1 control group and a pqos monitor group
    let (_d, root) = tree("resctrl.full");
    fs::create_dir_all(root.join("COS1/mon_groups/pqos-77-0")).unwrap();
    fs::create_dir_all(root.join("mon_groups/pqos-12-3")).unwrap();
    fs::create_dir_all(root.join("COS02")).unwrap(); // not pqos's spelling
    let mut rdt = open(&root);
    // act
    let groups = rdt.groups().unwrap();
    // assert: the directories as listed here
    let mut want = Vec::new();
    let subdirs = |p: PathBuf| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(p)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_type().unwrap().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    for m in subdirs(root.join("mon_groups")) {
        want.push(format!("mon_groups/{m}"));
    }
    for g in subdirs(root.clone()) {
        if ["info", "mon_groups", "mon_data"].contains(&g.as_str()) {
            continue;
        }
        want.push(g.clone());
        for m in subdirs(root.join(&g).join("mon_groups")) {
            want.push(format!("{g}/mon_groups/{m}"));
        }
    }
    let got: Vec<&str> = groups.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(got, want);
    let by = |p: &str| groups.iter().find(|g| g.path == p).unwrap();
    assert_eq!(by("COS1").owner, GroupOwner::Pqos);
    assert_eq!(by("COS1").class, Some(ClassId::new(1)));
    assert_eq!(by("COS1/mon_groups/pqos-77-0").kind, GroupKind::Monitor);
    assert_eq!(by("COS1/mon_groups/pqos-77-0").owner, GroupOwner::Pqos);
    assert_eq!(by("mon_groups/pqos-12-3").class, Some(ClassId::new(0)));
    for foreign in [
        "COS02",
        "goresctrl.Guaranteed",
        "non_goresctrl.Group",
        "mon_groups/example",
        "goresctrl.Guaranteed/mon_groups/goresctrl.predefined_group_live",
    ] {
        assert_eq!(by(foreign).owner, GroupOwner::Foreign, "{foreign}");
    }
    assert_eq!(by("goresctrl.Guaranteed").class, None);
}

/// Sum of `event` over the group's `mon_data/mon_L3_*` as the files say.
fn file_sum(root: &Path, group: &str, event: &str) -> u64 {
    let dir = root.join(group).join("mon_data");
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path().join(event);
            fs::read_to_string(p)
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

fn set_counter(root: &Path, group: &str, dom: &str, event: &str, v: &str) {
    fs::write(
        root.join(group).join("mon_data").join(dom).join(event),
        format!("{v}\n"),
    )
    .unwrap();
}

#[test]
fn watched_groups_read_the_counters_the_files_hold() {
    // arrange
    let (_d, root) = tree("resctrl.full");
    let mut rdt = open(&root);
    let all = MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL;
    let g_root = rdt.watch_group("", all).unwrap();
    let g_gua = rdt.watch_group("goresctrl.Guaranteed", all).unwrap();
    // act: first poll
    rdt.poll().unwrap();
    // assert: occupancy is the sum of the files; MBM deltas start at 0
    let v = rdt.values(g_root).unwrap().clone();
    assert_eq!(
        v.llc_occupancy_bytes,
        Some(file_sum(&root, "", "llc_occupancy"))
    );
    assert_eq!(v.mbm_local_delta_bytes, Some(0));
    let v = rdt.values(g_gua).unwrap().clone();
    assert_eq!(
        v.llc_occupancy_bytes,
        Some(file_sum(&root, "goresctrl.Guaranteed", "llc_occupancy"))
    );
    assert_eq!(v.instructions_delta, None, "no PMU for a watched group");

    // act: traffic in two domains, then poll
    let before_total = file_sum(&root, "", "mbm_total_bytes");
    let before_local = file_sum(&root, "", "mbm_local_bytes");
    let l0: u64 = read(&root, "mon_data/mon_L3_00/mbm_local_bytes")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    set_counter(
        &root,
        "",
        "mon_L3_00",
        "mbm_local_bytes",
        &(l0 + 4096).to_string(),
    );
    let t2: u64 = read(&root, "mon_data/mon_L3_02/mbm_total_bytes")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    set_counter(
        &root,
        "",
        "mon_L3_02",
        "mbm_total_bytes",
        &(t2 + 10_000).to_string(),
    );
    rdt.poll().unwrap();
    // assert
    let v = rdt.values(g_root).unwrap().clone();
    let d_local = file_sum(&root, "", "mbm_local_bytes") - before_local;
    let d_total = file_sum(&root, "", "mbm_total_bytes") - before_total;
    assert_eq!(v.mbm_local_delta_bytes, Some(d_local));
    assert_eq!(v.mbm_total_delta_bytes, Some(d_total));
    assert_eq!(v.mbm_remote_delta_bytes, Some(d_total - d_local));
    rdt.stop_monitoring(g_root).unwrap();
    assert!(
        root.join("mon_groups").is_dir(),
        "a watched group is left alone"
    );
    assert!(rdt.values(g_root).is_none());
}

#[test]
fn an_unavailable_domain_is_blank_itself_and_blanks_the_group_event() {
    let (_d, root) = tree("resctrl.nomb");
    let mut rdt = open(&root);
    let g = rdt
        .watch_group("", MonEvents::LLC_OCCUPANCY | MonEvents::MBM_TOTAL)
        .unwrap();
    rdt.poll().unwrap();
    // one domain Unavailable, one Error
    set_counter(&root, "", "mon_L3_01", "llc_occupancy", "Unavailable");
    set_counter(&root, "", "mon_L3_03", "llc_occupancy", "Error");
    let t0: u64 = read(&root, "mon_data/mon_L3_00/mbm_total_bytes")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    set_counter(
        &root,
        "",
        "mon_L3_00",
        "mbm_total_bytes",
        &(t0 + 100).to_string(),
    );
    set_counter(&root, "", "mon_L3_01", "mbm_total_bytes", "Unavailable");
    rdt.poll().unwrap();
    let v = rdt.values(g).unwrap().clone();
    let occ = |d: &str| -> u64 {
        read(&root, &format!("mon_data/{d}/llc_occupancy"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // the documented policy (rdt_core::monitor): the domains that answered keep their
    // values, the group's value of that event is unknown this poll
    let per_domain: Vec<_> = v.domains.iter().map(|d| d.llc_occupancy_bytes).collect();
    assert_eq!(
        per_domain,
        [Some(occ("mon_L3_00")), None, Some(occ("mon_L3_02")), None]
    );
    assert_eq!(v.llc_occupancy_bytes, None);
    assert_eq!(v.domains[0].mbm_total_delta_bytes, Some(100));
    assert_eq!(v.domains[1].mbm_total_delta_bytes, None);
    assert_eq!(v.mbm_total_delta_bytes, None);
    // every domain unavailable
    for d in ["mon_L3_00", "mon_L3_01", "mon_L3_02", "mon_L3_03"] {
        set_counter(&root, "", d, "llc_occupancy", "Unavailable");
        set_counter(&root, "", d, "mbm_total_bytes", "Unavailable");
    }
    rdt.poll().unwrap();
    let v = rdt.values(g).unwrap().clone();
    assert_eq!(
        (v.llc_occupancy_bytes, v.mbm_total_delta_bytes),
        (None, None)
    );
    // garbage is an error naming the file
    set_counter(&root, "", "mon_L3_00", "llc_occupancy", "12.5");
    let e = rdt.poll().unwrap_err().to_string();
    assert!(
        e.contains("mon_L3_00/llc_occupancy") && e.contains("`12.5`"),
        "{e}"
    );
}

#[test]
fn a_64_bit_counter_that_wraps_gives_the_bytes_across_the_wrap() {
    let (_d, root) = tree("resctrl.nomb");
    let mut rdt = open(&root);
    let g = rdt.watch_group("", MonEvents::MBM_LOCAL).unwrap();
    set_counter(
        &root,
        "",
        "mon_L3_00",
        "mbm_local_bytes",
        &(u64::MAX - 5).to_string(),
    );
    rdt.poll().unwrap();
    set_counter(&root, "", "mon_L3_00", "mbm_local_bytes", "10");
    rdt.poll().unwrap();
    assert_eq!(rdt.values(g).unwrap().mbm_local_delta_bytes, Some(16));
}

#[test]
fn snc_domains_are_read_at_the_l3_level_where_the_kernel_sums_them() {
    // arrange: SNC-2 under mon_L3_00: per-node files below, their sum at the L3 level
    let (_d, root) = tree("resctrl.nomb");
    let l3 = root.join("mon_data/mon_L3_00");
    for (node, occ) in [("mon_sub_L3_00", 1000u64), ("mon_sub_L3_01", 2000)] {
        fs::create_dir(l3.join(node)).unwrap();
        fs::write(l3.join(node).join("llc_occupancy"), format!("{occ}\n")).unwrap();
    }
    fs::write(l3.join("llc_occupancy"), "3000\n").unwrap();
    let mut rdt = open(&root);
    assert_eq!(
        rdt.mba_ctrl(),
        Some(MbaCtrl::Unsupported),
        "no mba_MBps under SNC"
    );
    let g = rdt.watch_group("", MonEvents::LLC_OCCUPANCY).unwrap();
    // act
    rdt.poll().unwrap();
    // assert: mon_L3_00 counts once, as the L3-level file says
    let others: u64 = ["mon_L3_01", "mon_L3_02", "mon_L3_03"]
        .iter()
        .map(|d| {
            read(&root, &format!("mon_data/{d}/llc_occupancy"))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(
        rdt.values(g).unwrap().llc_occupancy_bytes,
        Some(3000 + others)
    );
}

#[test]
fn an_unmounted_root_says_how_to_mount() {
    let dir = tempfile::tempdir().unwrap();
    let e = ResctrlBackend::open(
        ResctrlOptions::new(dir.path()),
        Topology::default(),
        None,
        NoPmu,
    )
    .unwrap_err();
    assert!(matches!(e, ResctrlError::NotMounted { .. }));
    assert!(e.to_string().contains("mount -t resctrl resctrl"), "{e}");
}

#[test]
fn a_held_lock_is_waited_for_then_reported() {
    let (_d, root) = tree("resctrl.l2");
    let holder = fs::File::open(&root).unwrap();
    holder.lock().unwrap(); // another tool's LOCK_EX
    let e = ResctrlBackend::open(
        ResctrlOptions::new(&root).lock_timeout(Duration::from_millis(100)),
        topology(&root),
        None,
        NoPmu,
    )
    .unwrap_err();
    assert!(matches!(e, ResctrlError::Locked { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("another tool holds the resctrl lock"),
        "{e}"
    );
    holder.unlock().unwrap();
    let mut rdt = open(&root);
    // A shared holder does not block readers.
    holder.lock_shared().unwrap();
    rdt.cat_classes(CatResource::L2, CacheDomain::new(0))
        .unwrap();
}

#[test]
fn bad_arguments_are_refused_before_anything_is_written() {
    let (_d, root) = tree("resctrl.nomb.cdp");
    let before = read(&root, "schemata").unwrap();
    let mut rdt = open(&root);
    let m = |b| rdt_core::CacheBitmask::new(b).unwrap();
    let unified = [rdt_core::CatClass {
        class: ClassId::new(1),
        mask: CatMask::Unified(m(0xf)),
    }];
    let e = rdt
        .set_cat_classes(CatResource::L3, CacheDomain::new(0), &unified)
        .unwrap_err();
    assert!(
        matches!(e, ResctrlError::Request(RequestError::CdpMismatch { .. })),
        "{e}"
    );
    let too_wide = [rdt_core::CatClass {
        class: ClassId::new(0),
        mask: CatMask::Cdp {
            data: m(0x1f_ffff),
            code: m(0xf),
        },
    }];
    let e = rdt
        .set_cat_classes(CatResource::L3, CacheDomain::new(0), &too_wide)
        .unwrap_err();
    assert!(e.to_string().contains("20-bit"), "{e}");
    let e = rdt
        .set_cat_classes(CatResource::L3, CacheDomain::new(9), &too_wide)
        .unwrap_err();
    assert!(
        e.to_string().contains("domain 9") && e.to_string().contains("0,1,2,3"),
        "{e}"
    );
    let out_of_range = [rdt_core::CatClass {
        class: ClassId::new(8),
        mask: CatMask::Cdp {
            data: m(0xf),
            code: m(0xf),
        },
    }];
    let e = rdt
        .set_cat_classes(CatResource::L3, CacheDomain::new(0), &out_of_range)
        .unwrap_err();
    assert!(e.to_string().contains("COS8"), "{e}");
    assert!(matches!(
        rdt.mba_classes(CacheDomain::new(0)),
        Err(ResctrlError::Request(RequestError::Limit(_)))
    ));
    assert_eq!(read(&root, "schemata").unwrap(), before);
    assert!(!root.join("COS1").exists() && !root.join("COS8").exists());
}

#[test]
fn telemetry_finds_the_groups_the_backend_lists_on_every_tree_with_the_files_values() {
    for name in TREES {
        // arrange: the tree plus a group of ours of each kind
        let (_d, root) = tree(name);
        fs::create_dir_all(root.join("COS1")).unwrap();
        fs::create_dir_all(root.join("mon_groups/pqos-12-3")).unwrap();
        let want = open(&root).groups().unwrap();
        // act
        let mut t = ResctrlTelemetry::open(TelemetryOptions::new(&root)).unwrap();
        let got = t.scrape().unwrap();
        // assert: the root first, then what BackendExt::groups lists, classified alike
        assert_eq!(got[0].path, "", "{name}");
        let got_groups: Vec<(&str, GroupKind, GroupOwner)> = got[1..]
            .iter()
            .map(|g| (g.path.as_str(), g.kind, g.owner))
            .collect();
        let want_groups: Vec<(&str, GroupKind, GroupOwner)> = want
            .iter()
            .map(|g| (g.path.as_str(), g.kind, g.owner))
            .collect();
        assert_eq!(got_groups, want_groups, "{name}");
        for g in got {
            for c in &g.counters {
                let file = root
                    .join(&g.path)
                    .join(format!("mon_data/mon_L3_{:02}", c.domain))
                    .join(c.event.resctrl_name());
                assert_eq!(
                    Some(c.bytes),
                    fs::read_to_string(&file)
                        .ok()
                        .and_then(|t| t.trim().parse().ok()),
                    "{name}: {}",
                    file.display()
                );
            }
            if g.kind == GroupKind::Control
                && let Some(text) = read(&root.join(&g.path), "schemata")
                && text.contains("L3:")
            {
                assert!(!g.cache.is_empty(), "{name}: {} has L3 masks", g.path);
            }
        }
        let full = *name == "resctrl.full";
        assert!(
            !full || got.iter().any(|g| !g.counters.is_empty()),
            "{name}"
        );
    }
}

#[test]
fn io_alloc_is_read_from_info_l3_and_a_file_that_does_not_parse_is_an_error() {
    // arrange: the full tree (16 CLOSIDs, 4 L3 domains) as a kernel before 6.19 shows it
    let (_dir, root) = tree("resctrl.full");
    let mut b = open(&root);
    assert_eq!(b.io_alloc().unwrap(), None, "no io_alloc file: none");
    let io = root.join("info/L3/io_alloc");
    // act + assert: disabled, then enabled with its masks (resctrl_io_alloc_closid: 15)
    fs::write(&io, "disabled\n").unwrap();
    let off = b.io_alloc().unwrap().unwrap();
    assert_eq!(
        (off.enabled, off.class, off.masks.len()),
        (false, ClassId::new(15), 0)
    );
    fs::write(&io, "enabled\n").unwrap();
    fs::write(root.join("info/L3/io_alloc_cbm"), "0=ff;1=fffff;2=f0;3=3\n").unwrap();
    let on = b.io_alloc().unwrap().unwrap();
    assert!(on.enabled);
    let masks: Vec<(u32, u64)> = on.masks.iter().map(|(d, m)| (d.get(), m.bits())).collect();
    assert_eq!(masks, [(0, 0xff), (1, 0xfffff), (2, 0xf0), (3, 0x3)]);
    fs::write(&io, "not supported\n").unwrap();
    assert_eq!(b.io_alloc().unwrap(), None);
    // hostile contents are errors naming the file, never a guess
    fs::write(&io, "maybe\n").unwrap();
    let e = b.io_alloc().unwrap_err().to_string();
    assert!(e.contains("info/L3/io_alloc") && e.contains("maybe"), "{e}");
    fs::write(&io, "enabled\n").unwrap();
    fs::write(root.join("info/L3/io_alloc_cbm"), "0=zz\n").unwrap();
    let e = b.io_alloc().unwrap_err().to_string();
    assert!(e.contains("io_alloc_cbm"), "{e}");
    fs::write(root.join("info/L3/io_alloc_cbm"), "0=0\n").unwrap();
    assert!(b.io_alloc().is_err(), "an empty mask");
}

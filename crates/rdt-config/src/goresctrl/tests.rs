//! The configurations and expected schemata of goresctrl's own `TestConfig`
//! (intel/goresctrl `pkg/rdt/rdt_test.go`, Apache-2.0), on the platforms of the resctrl trees
//! it runs them on (`test/data/resctrl.*`: 20-bit L3 CBM and cache ids 0-3 unless said).
//! Where goresctrl's table lists the root without the file naming it, the root is left out:
//! this import leaves an unnamed root alone.

use std::path::Path;

use super::*;

fn domains(n: u32) -> Vec<CacheDomain> {
    (0..n).map(CacheDomain::new).collect()
}

fn l3(cbm_len: u32, min: u32, cdp: bool) -> CatLevel {
    CatLevel {
        cbm_len,
        min_cbm_bits: min,
        domains: domains(4),
        cdp,
    }
}

fn mb(mbps: bool) -> MbLevel {
    MbLevel {
        domains: domains(4),
        mbps,
        min_bandwidth: 10,
        granularity: 10,
    }
}

/// `resctrl.full`: L3 (min 1 bit) and MB.
fn full() -> GoresctrlPlatform {
    GoresctrlPlatform {
        l3: Some(l3(20, 1, false)),
        mb: Some(mb(false)),
        ..GoresctrlPlatform::default()
    }
}

/// `resctrl.nomb`: L3 with min_cbm_bits 2.
fn nomb() -> GoresctrlPlatform {
    GoresctrlPlatform {
        l3: Some(l3(20, 2, false)),
        ..GoresctrlPlatform::default()
    }
}

/// `resctrl.nol3`: MB only.
fn nol3(mbps: bool) -> GoresctrlPlatform {
    GoresctrlPlatform {
        mb: Some(mb(mbps)),
        ..GoresctrlPlatform::default()
    }
}

fn parse(yaml: &str) -> GoresctrlConfig {
    GoresctrlConfig::parse_yaml(yaml, Path::new("rdt.yaml")).unwrap()
}

fn resolve(platform: &GoresctrlPlatform, yaml: &str) -> Resolved {
    parse(yaml).resolve(platform).unwrap()
}

fn resolve_err(platform: &GoresctrlPlatform, yaml: &str) -> String {
    match GoresctrlConfig::parse_yaml(yaml, Path::new("rdt.yaml")) {
        Err(e) => e.to_string(),
        Ok(c) => c.resolve(platform).unwrap_err().to_string(),
    }
}

/// Asserts every class's schemata, and that no other class is there.
fn assert_schemata(r: &Resolved, expected: &[(&str, &str)]) {
    let got: Vec<(String, String)> = r
        .classes
        .iter()
        .map(|c| (c.name.clone(), c.schemata()))
        .collect();
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
        .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    want.sort();
    assert_eq!(got_sorted, want);
}

#[test]
fn complex_config_gives_goresctrls_masks_and_mb() {
    let yaml = r#"
partitions:
  part-1:
    l3Allocation:
      all: 60%
      1: "0xff000"
      2: "9-15"
    mbAllocation:
      all: [100%]
    classes:
      class-1:
        l3Allocation: 100%
      class-2:
        l3Allocation:
          all: 100%
          0-1: 10%
          2: "0x70"
        mbAllocation:
          all: [40%]
          3: [10%]
  part-2:
    l3Allocation:
      all: 39%
      1: "0-10"
      2: "0-6"
    mbAllocation:
      all: [50%]
      1: [80%]
      2: [100%]
    classes:
      class-3:
        l3Allocation: 100%
        mbAllocation:
          all: [40%]
          0: [80%]
      class-4:
        l3Allocation: 50%
        mbAllocation: [100%]
      system/default:
        l3Allocation: 60%
        mbAllocation: [60%]
  part-3:
    l3Allocation:
      all: 1%
      1: "0x800"
      2: "7,8"
    mbAllocation: [20%]
    classes:
      class-5:
        l3Allocation: 100%
        mbAllocation:
          all: [100%]
          0: [1%]
"#;
    let r = resolve(&full(), yaml);
    assert_schemata(
        &r,
        &[
            (
                "class-1",
                "L3:0=fff;1=ff000;2=fe00;3=fff\nMB:0=100;1=100;2=100;3=100\n",
            ),
            (
                "class-2",
                "L3:0=3;1=1000;2=e000;3=fff\nMB:0=40;1=40;2=40;3=10\n",
            ),
            (
                "class-3",
                "L3:0=7f000;1=7ff;2=7f;3=7f000\nMB:0=40;1=32;2=40;3=20\n",
            ),
            (
                "class-4",
                "L3:0=f000;1=3f;2=f;3=f000\nMB:0=50;1=80;2=100;3=50\n",
            ),
            (
                "system/default",
                "L3:0=1f000;1=7f;2=1f;3=1f000\nMB:0=30;1=48;2=60;3=30\n",
            ),
            (
                "class-5",
                "L3:0=80000;1=800;2=180;3=80000\nMB:0=10;1=20;2=20;3=20\n",
            ),
        ],
    );
}

const CDP_CONFIG: &str = r"
partitions:
  part-1:
    l3Allocation:
      0,1:
        unified: 60%
        code: 70%
        data: 50%
      2,3: 40%
    classes:
      class-1:
  part-2:
    l3Allocation:
      0,1:
        unified: 40%
        code: 30%
        data: 50%
      2,3: 60%
    classes:
      class-2:
      system/default:
        l3Allocation:
          all: 100%
          3:
            unified: 80%
            code: 60%
            data: 90%
";

#[test]
fn cdp_off_uses_the_unified_allocations() {
    let r = resolve(&nomb(), CDP_CONFIG);
    assert_schemata(
        &r,
        &[
            ("class-1", "L3:0=fff;1=fff;2=ff;3=ff\n"),
            ("class-2", "L3:0=ff000;1=ff000;2=fff00;3=fff00\n"),
            ("system/default", "L3:0=ff000;1=ff000;2=fff00;3=3ff00\n"),
        ],
    );
}

#[test]
fn cdp_on_uses_code_and_data_falling_back_to_unified() {
    let platform = GoresctrlPlatform {
        l3: Some(l3(20, 1, true)),
        ..GoresctrlPlatform::default()
    };
    let r = resolve(&platform, CDP_CONFIG);
    assert_schemata(
        &r,
        &[
            (
                "class-1",
                "L3CODE:0=3fff;1=3fff;2=ff;3=ff\nL3DATA:0=3ff;1=3ff;2=ff;3=ff\n",
            ),
            (
                "class-2",
                "L3CODE:0=fc000;1=fc000;2=fff00;3=fff00\nL3DATA:0=ffc00;1=ffc00;2=fff00;3=fff00\n",
            ),
            (
                "system/default",
                "L3CODE:0=fc000;1=fc000;2=fff00;3=ff00\nL3DATA:0=ffc00;1=ffc00;2=fff00;3=7ff00\n",
            ),
        ],
    );
}

#[test]
fn an_optional_missing_level_is_skipped_with_a_warning_and_a_required_one_refused() {
    let yaml = "options:\n  l3:\n    optional: true\npartitions:\n  part-1:\n    l3Allocation: 100%\n    mbAllocation: [100%]\n    classes:\n      class-1:\n        l3Allocation: 20%\n        mbAllocation: [50%]\n";
    let r = resolve(&nol3(false), yaml);
    assert_schemata(&r, &[("class-1", "MB:0=50;1=50;2=50;3=50\n")]);
    assert!(
        r.warnings[0].to_string().contains("skipped"),
        "{:?}",
        r.warnings
    );
    let e = resolve_err(
        &nol3(false),
        "partitions:\n  part-1:\n    l3Allocation: 100%\n    classes:\n      class-1:\n        l3Allocation: 20%\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:6: partitions.part-1.classes.class-1.l3Allocation: L3 cache allocation for \
         class \"class-1\" (partition \"part-1\"), but the platform has no L3 CAT; set \
         options.l3.optional: true to skip it"
    );
}

#[test]
fn mb_optional_and_bit_numbers() {
    let yaml = "options:\n  mb:\n    optional: true\npartitions:\n  part-1:\n    l3Allocation: 100%\n    mbAllocation: [100%]\n    classes:\n      class-1:\n        l3Allocation: 0-7\n        mbAllocation: [50%]\n";
    assert_schemata(
        &resolve(&nomb(), yaml),
        &[("class-1", "L3:0=ff;1=ff;2=ff;3=ff\n")],
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    mbAllocation: [100%]\n    classes:\n      class-1:\n        mbAllocation: [50%]\n",
    );
    assert!(e.contains("the platform has no MBA"), "{e}");
    // optional or not, MBps alone is refused without MBA, as goresctrl does
    for options in ["", "options:\n  mb:\n    optional: true\n"] {
        let e = resolve_err(
            &nomb(),
            &format!(
                "{options}partitions:\n  part-1:\n    mbAllocation: [100%]\n    classes:\n      \
                 class-1:\n        mbAllocation: [\"100MBps\"]\n"
            ),
        );
        assert!(
            e.contains("no percentage value (goresctrl: missing '%' value)"),
            "{e}"
        );
        assert!(e.contains("class-1.mbAllocation"), "{e}");
    }
}

#[test]
fn classes_mix_relative_and_absolute_allocations() {
    let yaml = r#"
partitions:
  part-1:
    l3Allocation: 100%
    classes:
      class-1:
        l3Allocation:
            all: 100%
            1: 50%
      class-2:
        l3Allocation:
            all: 50%
            1: "0x7"
            2: "1-2"
"#;
    assert_schemata(
        &resolve(&nomb(), yaml),
        &[
            ("class-1", "L3:0=fffff;1=3ff;2=fffff;3=fffff\n"),
            ("class-2", "L3:0=3ff;1=7;2=6;3=3ff\n"),
        ],
    );
}

#[test]
fn partial_partition_allocations_round_down_smallest_first() {
    let yaml = r#"
partitions:
  part-1:
    l3Allocation:
      all: "21%"
      1: "42%"
      2: "63%"
      3: "89%"
    classes:
      class-1:
  part-2:
    l3Allocation:
      all: "29%"
      1: "8%"
      2: "19%"
      3: "11%"
    classes:
      class-2:
"#;
    assert_schemata(
        &resolve(&nomb(), yaml),
        &[
            ("class-1", "L3:0=f;1=ff;2=1fff;3=3ffff\n"),
            ("class-2", "L3:0=3f0;1=300;2=e000;3=c0000\n"),
        ],
    );
}

#[test]
fn min_cbm_bits_widens_a_class_mask() {
    let yaml = "partitions:\n  part-1:\n    l3Allocation: \"100%\"\n    classes:\n      class-1:\n        l3Allocation:\n          all: \"1%\"\n          1-2: \"99-100%\"\n";
    assert_schemata(
        &resolve(&nomb(), yaml),
        &[("class-1", "L3:0=3;1=c0000;2=c0000;3=3\n")],
    );
}

#[test]
fn partition_mb_is_raised_to_min_bandwidth() {
    let yaml = "partitions:\n  part-1:\n    mbAllocation: [\"1%\"]\n    classes:\n      class-1:\n        mbAllocation: [\"100%\"]\n";
    assert_schemata(
        &resolve(&nol3(false), yaml),
        &[("class-1", "MB:0=10;1=10;2=10;3=10\n")],
    );
}

#[test]
fn l2_partial_allocation() {
    // resctrl.l2: 8-bit L2 CBM, cache ids 0-1.
    let platform = GoresctrlPlatform {
        l2: Some(CatLevel {
            cbm_len: 8,
            min_cbm_bits: 1,
            domains: domains(2),
            cdp: false,
        }),
        ..GoresctrlPlatform::default()
    };
    let yaml = "partitions:\n  part-1:\n    l2Allocation:\n      all: 30%\n      1: 75%\n    classes:\n      class-1:\n  part-2:\n    l2Allocation:\n      0: 30%\n      1:\n        unified: 20%\n    classes:\n      class-2:\n  part-3:\n    l2Allocation:\n      0: 40%\n      1: 5%\n    classes:\n      system/default:\n";
    assert_schemata(
        &resolve(&platform, yaml),
        &[
            ("class-1", "L2:0=3;1=3f\n"),
            ("class-2", "L2:0=c;1=40\n"),
            ("system/default", "L2:0=f0;1=80\n"),
        ],
    );
}

#[test]
fn l2_cdp_with_l3() {
    // resctrl.l2cdp: 20-bit L2 CBM with CDP on, cache ids 0-3; 12-bit L3, cache id 0.
    let platform = GoresctrlPlatform {
        l2: Some(l3(20, 1, true)),
        l3: Some(CatLevel {
            cbm_len: 12,
            min_cbm_bits: 1,
            domains: domains(1),
            cdp: false,
        }),
        mb: None,
    };
    let yaml = r"
partitions:
  part-1:
    l2Allocation:
      all: 42%
      2:
        unified: 30%
        code: 20%
        data: 50%
      3:
        unified: 30%
        code: 40%
        data: 50%
    l3Allocation: 30%
    classes:
      class-1:
  part-2:
    l2Allocation:
      all: 43%
      2:
        unified: 70%
        code: 40%
        data: 30%
      3:
        unified: 30%
        code: 60%
        data: 50%
    l3Allocation: 50%
    classes:
      class-2:
        l2Allocation:
          all: 80%
          2:
            unified: 80%
            code: 60%
            data: 90%
      system/default:
        l3Allocation: 60%
";
    assert_schemata(
        &resolve(&platform, yaml),
        &[
            (
                "class-1",
                "L2CODE:0=ff;1=ff;2=f;3=ff\nL2DATA:0=ff;1=ff;2=3ff;3=3ff\nL3:0=7\n",
            ),
            (
                "class-2",
                "L2CODE:0=ff00;1=ff00;2=1f0;3=3ff00\nL2DATA:0=ff00;1=ff00;2=fc00;3=3fc00\nL3:0=1f8\n",
            ),
            (
                "system/default",
                "L2CODE:0=1ff00;1=1ff00;2=ff0;3=fff00\nL2DATA:0=1ff00;1=1ff00;2=fc00;3=ffc00\nL3:0=78\n",
            ),
        ],
    );
}

#[test]
fn mbps_mode_takes_the_mbps_values_and_ignores_other_units_with_a_warning() {
    let yaml = r#"
partitions:
  part-1:
    mbAllocation: ["50%", "1000MBps"]
    classes:
      class-1:
        mbAllocation: ["100%", "1500MBps"]
  part-2:
    mbAllocation:
      all: ["1000MBps"]
      # Unsupported values should just be ignored
      0,1: [50, "1GBps", "500MBps"]
    classes:
      class-2:
        mbAllocation: ["750MBps"]
"#;
    let r = resolve(&nol3(true), yaml);
    assert_schemata(
        &r,
        &[
            ("class-1", "MB:0=1000;1=1000;2=1000;3=1000\n"),
            ("class-2", "MB:0=500;1=500;2=750;3=750\n"),
        ],
    );
    let w: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
    assert!(w.iter().any(|w| w.contains("\"1GBps\" ignored")), "{w:?}");
    assert!(w.iter().any(|w| w.contains("\"50\" ignored")), "{w:?}");
}

#[test]
fn the_root_without_mb_in_mbps_mode_is_unlimited() {
    let yaml = "partitions:\n  p:\n    mbAllocation: [\"1000MBps\"]\n    classes:\n      \"\":\n        mbAllocation: [\"5000MBps\"]\n";
    let r = resolve(&nol3(true), yaml);
    assert_schemata(&r, &[("", "MB:0=1000;1=1000;2=1000;3=1000\n")]);
    assert!(r.classes[0].is_root());
}

// Refusals: each names the key path. goresctrl's own cases first.

#[test]
fn duplicate_class_names_and_two_roots_are_refused() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    classes:\n      class-1:\n  part-2:\n    classes:\n      class-1:\n",
    );
    assert!(
        e.starts_with(
            "rdt.yaml:7: partitions.part-2.classes.class-1: class \"class-1\" is defined twice"
        ),
        "{e}"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    classes:\n      \"\":\n  part-2:\n    classes:\n      system/default:\n",
    );
    assert!(
        e.contains("class \"system/default\" is defined twice"),
        "{e}"
    );
}

#[test]
fn unusable_class_names_and_cache_ids_are_refused() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    classes:\n      \"..\":\n",
    );
    assert!(e.contains("not a usable directory name"), "{e}");
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      a: 100%\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:4: partitions.part-1.l3Allocation.a: cache ids \"a\": expected `all` or a list \
         of ids like `0,2-3`"
    );
}

#[test]
fn cache_ids_are_kept_as_merged_ranges_and_the_last_entry_naming_an_id_wins() {
    // arrange: ranges out of order, overlapping and adjacent; a later entry overriding
    let yaml = "partitions:\n  p:\n    l3Allocation:\n      all: 100%\n      \"11,5,0-3,4,10-12\": 100%\n    mbAllocation:\n      all: [50%]\n      \"2-3,1\": [20%]\n      \"3\": [30%]\n    classes:\n      c:\n        mbAllocation: [100%]\n";
    // act
    let config = parse(yaml);
    let r = resolve(&full(), yaml);
    // assert
    let l3 = config.partitions[0].l3.as_ref().unwrap();
    assert_eq!(l3.entries[1].0, CacheIds::List(vec![0..=5, 10..=12]));
    assert!(
        [0, 5, 10, 12]
            .iter()
            .all(|&id| l3.entries[1].0.contains(id))
    );
    assert!(
        ![6, 9, 13, 65_535]
            .iter()
            .any(|&id| l3.entries[1].0.contains(id))
    );
    let mb: Vec<u32> = r.class("c").unwrap().mb.values().copied().collect();
    assert_eq!(mb, [50, 20, 20, 30]);
}

#[test]
fn a_file_of_whole_range_cache_ids_takes_memory_for_its_text_not_per_id() {
    // arrange: 1 MiB of keys each naming all 65,536 ids; one entry per id would be 256 KiB
    // per key, 19 GiB for the file, then 5e9 map insertions for its MBA values
    let mut yaml = "partitions:\n  p:\n    l3Allocation:\n      all: 100%\n".to_owned();
    let mut mb = "    mbAllocation:\n".to_owned();
    let mut n = 0;
    while yaml.len() + mb.len() < (1 << 20) - 64 {
        yaml += &format!("      \"{n},0-65535\": 100%\n");
        mb += &format!("      \"{n},0-65535\": [50%]\n");
        n += 1;
    }
    yaml += &mb;
    // act
    let config = parse(&yaml);
    let r = resolve(&full(), &yaml);
    // assert
    let l3 = config.partitions[0].l3.as_ref().unwrap();
    assert_eq!(l3.entries.len(), n + 1);
    assert!(
        l3.entries[1..]
            .iter()
            .all(|(ids, _)| *ids == CacheIds::List(vec![0..=65_535]))
    );
    assert!(r.classes.is_empty());
}

#[test]
fn cdp_specs_need_unified_and_both_code_and_data() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      all:\n        data: 100%\n",
    );
    assert!(
        e.ends_with("partitions.part-1.l3Allocation.all: `unified` is required"),
        "{e}"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      all:\n        unified: 100%\n        data: 100%\n",
    );
    assert!(e.ends_with("`data` given without `code`"), "{e}");
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      all:\n        unified: 100%\n        code: 100%\n",
    );
    assert!(e.ends_with("`code` given without `data`"), "{e}");
}

#[test]
fn partitions_mixing_masks_and_percentages_are_refused() {
    let e = resolve_err(
        &full(),
        "partitions:\n  part-1:\n    l3Allocation: \"0xff\"\n  part-2:\n    l3Allocation: 50%\n",
    );
    assert!(e.contains("partitions.part-2.l3Allocation: 50%: partitions mix absolute masks and percentages for L3 cache id 0"), "{e}");
    let e = resolve_err(
        &full(),
        "partitions:\n  part-1:\n    l3Allocation: 50%\n  part-2:\n    l3Allocation: \"0xff\"\n",
    );
    assert!(
        e.contains("0xff: partitions mix percentages and absolute masks"),
        "{e}"
    );
}

#[test]
fn overlapping_exclusive_partitions_are_refused_naming_the_key_and_the_other_partition() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation: \"0xff\"\n  part-2:\n    l3Allocation:\n      all: \"0xff00\"\n      2: \"0xff80\"\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:7: partitions.part-2.l3Allocation.2: L3 mask 0xff80 overlaps partition \
         \"part-1\"'s mask in cache id 2: partitions are exclusive"
    );
}

#[test]
fn percentages_over_100_are_refused_naming_the_key() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  exclusive:\n    l3Allocation:\n      all: 120%\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:4: partitions.exclusive.l3Allocation.all: 120% over 100%"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation: \"101%\"\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:3: partitions.part-1.l3Allocation: 101% over 100%"
    );
    let e = resolve_err(
        &full(),
        "partitions:\n  p:\n    mbAllocation: [\"100%\"]\n    classes:\n      c:\n        mbAllocation: [\"150%\"]\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:6: partitions.p.classes.c.mbAllocation: 150% over 100%"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    classes:\n      class-1:\n        l3Allocation: \"0-101%\"\n",
    );
    assert!(e.contains("101% over 100%"), "{e}");
}

#[test]
fn partition_totals_over_100_are_refused_naming_every_share() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      all:\n        unified: \"50%\"\n        code: \"40%\"\n        data: \"60%\"\n  part-2:\n    l3Allocation:\n      all:\n        unified: \"50%\"\n        code: \"40%\"\n        data: \"60%\"\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:13: partitions.part-2.l3Allocation.all.data: L3 \"data\" partition \
         allocations for cache id 0 add up to 120%, over 100% (part-1 60%, part-2 60%)"
    );
}

#[test]
fn a_partition_missing_a_level_or_type_another_has_is_refused() {
    let e = resolve_err(
        &full(),
        "partitions:\n  part-1:\n    l3Allocation: \"50%\"\n    mbAllocation: [\"100%\"]\n  part-2:\n    mbAllocation: [\"100%\"]\n",
    );
    assert!(
        e.contains("partitions part-2 have no L3 \"unified\" allocation for cache id 0"),
        "{e}"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      all:\n        unified: \"50%\"\n        code: \"40%\"\n        data: \"60%\"\n  part-2:\n    l3Allocation: \"50%\"\n",
    );
    assert!(
        e.contains("partitions part-2 have no L3 \"code\" allocation"),
        "{e}"
    );
}

#[test]
fn bad_masks_and_ranges_are_refused() {
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation:\n      all: \"100%\"\n      1: \"0x2f\"\n",
    );
    assert!(
        e.ends_with("\"0x2f\": more than one contiguous block of bits (0x2f)"),
        "{e}"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation: \"0xff00\"\n    classes:\n      class-1:\n        l3Allocation: \"0x1ff\"\n",
    );
    assert!(e.contains("L3 mask 0x1ff shifted to the partition's lowest bit (0x1ff00) does not fit the partition's mask 0xff00"), "{e}");
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation: \"50-100%\"\n",
    );
    assert!(
        e.ends_with("50-100%: a partition cannot take a percentage range"),
        "{e}"
    );
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    l3Allocation: \"1f%\"\n",
    );
    assert!(e.contains("is not a whole percentage"), "{e}");
    let e = resolve_err(
        &nomb(),
        "partitions:\n  part-1:\n    classes:\n      class-1:\n        l3Allocation: \"100%\"\n",
    );
    assert!(
        e.contains("sets L3 allocation, but its partition \"part-1\" has none"),
        "{e}"
    );
}

#[test]
fn mb_values_of_the_wrong_unit_or_syntax_are_refused() {
    let e = resolve_err(
        &nol3(false),
        "partitions:\n  part-1:\n    mbAllocation: [\"xyz%\"]\n",
    );
    assert!(e.contains("\"xyz%\" is not a whole percentage"), "{e}");
    let e = resolve_err(
        &nol3(false),
        "partitions:\n  part-1:\n    mbAllocation: [\"100MBps\"]\n",
    );
    assert!(
        e.ends_with(
            "no percentage value, which is needed because MBA is in percent on this platform"
        ),
        "{e}"
    );
    let e = resolve_err(
        &nol3(true),
        "partitions:\n  part-1:\n    mbAllocation: [\"100%\"]\n",
    );
    assert!(
        e.ends_with("no MBps value, which is needed because resctrl is mounted with mba_MBps"),
        "{e}"
    );
    let e = resolve_err(
        &nol3(true),
        "partitions:\n  part-1:\n    mbAllocation: [\"0xffMBps\"]\n",
    );
    assert!(e.contains("is not a whole number of MBps"), "{e}");
}

#[test]
fn unknown_keys_are_refused_and_kubernetes_options_read_without_a_note() {
    let e = resolve_err(&nomb(), "partitions:\n  p:\n    l3Alocation: 50%\n");
    assert_eq!(
        e,
        "rdt.yaml:3: partitions.p.l3Alocation: unknown key; expected one of l2Allocation, \
         l3Allocation, mbAllocation, classes"
    );
    let c = parse(
        "partitions:\n  p:\n    classes:\n      c:\n        kubernetes:\n          denyPodAnnotation: true\n      d:\n        kubernetes:\n          denyContainerAnnotation: true\n          denyPodAnnotation: false\n",
    );
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    let deny: Vec<(&str, bool, bool)> = c.partitions[0]
        .classes
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.deny_pod_annotation,
                c.deny_container_annotation,
            )
        })
        .collect();
    assert_eq!(deny, [("c", true, false), ("d", false, true)]);
}

#[test]
fn keys_match_case_insensitively_as_gos_json_decoding_does() {
    let r = resolve(
        &nomb(),
        "Partitions:\n  p:\n    L3ALLOCATION: 50%\n    classes:\n      c:\n",
    );
    assert_schemata(&r, &[("c", "L3:0=3ff;1=3ff;2=3ff;3=3ff\n")]);
}

#[test]
fn too_many_partitions_for_the_ways_are_refused_not_divided_by_zero() {
    // 1% of 20 ways is 0 bits in all: goresctrl divides by zero there.
    let e = resolve_err(&nomb(), "partitions:\n  a:\n    l3Allocation: 1%\n");
    assert!(
        e.contains("not enough L3 ways for the partitions in cache id 0"),
        "{e}"
    );
}

/// Any text: parsing never panics, an error's line is within the text, and a parsed file
/// resolves (or is refused) without panicking on a platform with L2, L3 (CDP) and MB.
#[test]
fn fuzz_goresctrl_yaml_never_panics_and_errors_name_a_line_of_the_file() {
    use proptest::prelude::*;
    use rdt_core::fake::fuzz::{fuzz, text};
    const WORDS: &[&str] = &[
        "partitions:",
        "options:",
        "classes:",
        "l2Allocation:",
        "l3Allocation:",
        "mbAllocation:",
        "unified:",
        "code:",
        "data:",
        "all:",
        "optional: true",
        "kubernetes:",
        "system/default:",
        "\"\":",
        "p:",
        "q:",
        "c:",
        "\n",
        "\n  ",
        "\n    ",
        "\n      ",
        " ",
        "60%",
        "101%",
        "0-100%",
        "50-20%",
        "0xff",
        "0x0",
        "0-7",
        "7,8",
        "0-1:",
        "2-3:",
        "[",
        "]",
        "\"100%\"",
        "\"1000MBps\"",
        "MBps",
        ",",
        "&a",
        "*a",
        "---",
        "{",
        "}",
        "~",
    ];
    let platform = GoresctrlPlatform {
        l2: Some(l3(16, 1, false)),
        l3: Some(l3(20, 2, true)),
        mb: Some(mb(false)),
    };
    fuzz("GoresctrlConfig::parse_yaml", text(WORDS, 60), |t| {
        // YAML's line breaks: `\r\n`, `\r` and `\n`; an error at the end of the input
        // may name the line after the last.
        let lines = t.replace("\r\n", "\n").split(['\n', '\r']).count() + 1;
        match GoresctrlConfig::parse_yaml(&t, Path::new("f.yaml")) {
            Ok(c) => {
                if let Err(e) = c.resolve(&platform) {
                    prop_assert!(e.line().is_some_and(|l| l <= lines), "{e} of {t:?}");
                    prop_assert!(e.key().is_some(), "a key path: {e} of {t:?}");
                }
            }
            Err(e) => {
                prop_assert!(e.line().is_none_or(|l| l <= lines), "{e} of {t:?}");
            }
        }
        Ok(())
    });
}

#[test]
fn keys_with_hiding_characters_are_escaped_in_errors() {
    // a partition name that reverses the rest of the line, and an escape sequence
    let e = resolve_err(
        &nomb(),
        "partitions:\n  \"p\\u202e\\u001b[2J\":\n    l3Allocation: 120%\n",
    );
    assert_eq!(
        e,
        "rdt.yaml:3: partitions.p\\u{202e}\\u{1b}[2J.l3Allocation: 120% over 100%"
    );
}

/// The prefix names every class's group but the root's, and `prune` takes away exactly
/// the stale named classes with the prefix that this library holds, in the same plan.
#[test]
fn the_group_prefix_names_groups_and_prune_takes_only_stale_prefixed_classes() {
    use rdt_core::fake::FakeBackend;
    use rdt_host::transaction::ApplyPlan;
    let yaml = |classes: &str| {
        GoresctrlConfig::parse_yaml(
            &format!("partitions:\n  p:\n    l3Allocation: \"100%\"\n    classes:\n{classes}"),
            Path::new("g.yaml"),
        )
        .unwrap()
    };
    let both = yaml(
        "      DEFAULT:\n        l3Allocation: \"50%\"\n      a:\n        l3Allocation: \"50%\"\n      \
         b:\n        l3Allocation: \"25%\"\n",
    );
    let only_a = yaml("      a:\n        l3Allocation: \"50%\"\n");
    let mut backend = FakeBackend::broadwell_2s();
    // a named class of ours without the prefix
    let other = backend.class_named("other").unwrap();
    backend.claim_class(other, "other", true).unwrap();
    let cri = GroupOptions {
        prefix: "cri-".into(),
        prune: true,
    };
    let planned = both.plan_with(&mut backend, &cri).unwrap();
    let names: Vec<&str> = planned.classes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["DEFAULT", "cri-a", "cri-b"]);
    assert_eq!(planned.classes[0].1, ClassId::new(0));
    planned.plan.apply(&mut backend).into_result().unwrap();
    let planned = only_a.plan_with(&mut backend, &cri).unwrap();
    let lines = planned.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cri-b (COS") && l.ends_with("named class removed")),
        "{lines:?}"
    );
    planned.plan.apply(&mut backend).into_result().unwrap();
    let mut own: Vec<String> = backend
        .own_class_names()
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    own.sort();
    assert_eq!(own, ["cri-a", "other"]);
    // without prune nothing of ours is taken away
    let keep = GroupOptions {
        prefix: String::new(),
        prune: false,
    };
    let planned = yaml("      z:\n        l3Allocation: \"50%\"\n")
        .plan_with(&mut backend, &keep)
        .unwrap();
    assert!(!planned.lines().iter().any(|l| l.contains("removed")));
}

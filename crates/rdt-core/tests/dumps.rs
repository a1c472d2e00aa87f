//! rdt-core against real captures: every CPUID dump of `tests/data/cpuid` decodes to the
//! values of the independent reference `summary.json`, the per-CPU dumps give the machines'
//! known socket and L3 counts, and the captured sysfs trees parse.
//!
//! Expected machine shapes come from the captures' own names and the parts' data sheets
//! (hwloc's `2xXeon6140` is two 18-core Gold 6140 with SMT, ...), not from this code's output.

#![allow(clippy::tests_outside_test_module)]
// Helper functions of a test binary: a panic there is a test failure with a message.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rdt_core::{
    Capabilities, CatCaps, CpuidDump, CpuidSource, Feature, LogicalCpu, MbaCaps, MbaKind,
    MonitoringCaps, Topology, Vendor, explain_no_rdt,
};
use rdt_host::cpuid::CpuidDumpFromPath;
use rdt_host::topology::TopologyFromSysfs;
use serde_json::Value;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cpuid_dir() -> PathBuf {
    manifest().join("../../tests/data/cpuid")
}

fn models_dir() -> PathBuf {
    manifest().join("../rdt-sim/models")
}

fn sysfs_dir() -> PathBuf {
    manifest().join("../../tests/data/sysfs")
}

fn summary() -> Vec<Value> {
    let text = std::fs::read_to_string(cpuid_dir().join("summary.json")).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

/// `"numRMID=144 scale=73728 ecx=0x4(CDP=1,noncontig=0) numCLOS=16"` -> key/value pairs,
/// including the parenthesised ones (`CDP`, `noncontig`). `L3:`-style prefixes are skipped.
fn fields(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for word in s.split_whitespace() {
        let mut rest = word;
        while let Some((k, v)) = rest.split_once('=') {
            let k = k.trim_start_matches(['(', ',']);
            let end = v.find(['(', ',', ')']).unwrap_or(v.len());
            out.insert(k.to_owned(), v[..end].to_owned());
            rest = &v[end..];
        }
    }
    out
}

fn num(f: &BTreeMap<String, String>, key: &str) -> u64 {
    let v = f.get(key).unwrap_or_else(|| panic!("no `{key}` in {f:?}"));
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => v.parse().unwrap(),
    }
}

fn flag(f: &BTreeMap<String, String>, key: &str) -> bool {
    num(f, key) == 1
}

fn get<'a>(entry: &'a Value, key: &str) -> Option<&'a str> {
    entry.get(key).and_then(Value::as_str)
}

fn expected_cat(s: &str, amd: bool) -> CatCaps {
    let f = fields(s);
    let ecx = num(&f, "ecx");
    CatCaps {
        cbm_len: u32::try_from(num(&f, "cbm_len")).unwrap(),
        shareable_bits: num(&f, "shareable"),
        num_classes: u32::try_from(num(&f, "numCLOS")).unwrap(),
        cdp_supported: flag(&f, "CDP"),
        cdp_enabled: false,
        // The summary reports the raw ECX[3]; AMD always accepts sparse masks.
        non_contiguous_cbm: flag(&f, "noncontig") || amd,
        io_rdt: ecx & 0b10 != 0 && s.starts_with("L3"),
        // The kernel's values: AMD accepts an empty mask.
        min_cbm_bits: u32::from(!amd),
    }
}

fn expected_amd_bw(s: &str) -> MbaCaps {
    let f = fields(s);
    let width = u32::try_from(num(&f, "bw_len")).unwrap();
    assert_eq!(num(&f, "max_bw"), 1 << width, "{s}");
    MbaCaps {
        num_classes: u32::try_from(num(&f, "numCOS")).unwrap(),
        kind: MbaKind::AmdBandwidth { width },
        ctrl_enabled: false,
    }
}

/// Monitoring as the summary decodes it: PQM and 0xF.0 EDX\[1\], parameters from 0xF.1.
fn expected_monitoring(entry: &Value) -> Feature<MonitoringCaps> {
    let pqm = entry["PQM(7.0.EBX[12])"].as_u64().unwrap() == 1;
    let f0 = get(entry, "F.0").map(fields).unwrap_or_default();
    let l3mon = f0.get("L3mon").is_some_and(|v| v == "1");
    match (pqm && l3mon, get(entry, "F.1")) {
        (false, _) => Feature::Unsupported,
        (true, None) => Feature::DetailsUnknown,
        (true, Some(s)) => {
            let f = fields(s);
            let eax = num(&f, "eax");
            Feature::Supported(MonitoringCaps {
                max_rmid: u32::try_from(num(&f0, "maxRMID")).unwrap(),
                num_rmids: u32::try_from(num(&f, "numRMID")).unwrap(),
                upscaling_factor: u32::try_from(num(&f, "scale")).unwrap(),
                counter_width: u32::try_from(num(&f, "ctr_width")).unwrap(),
                overflow_bit: flag(&f, "ovf_bit"),
                io_rdt: eax & (0b11 << 9) != 0,
                events: rdt_core::MonEventSupport {
                    llc_occupancy: flag(&f, "occ"),
                    mbm_total: flag(&f, "mbm_total"),
                    mbm_local: flag(&f, "mbm_local"),
                },
            })
        }
    }
}

/// The enumeration bits of 0x10.0 EBX that the summary reports set (and PQE set).
fn enumerated(entry: &Value, key: &str) -> bool {
    let pqe = entry["PQE(7.0.EBX[15])"].as_u64().unwrap() == 1;
    pqe && get(entry, "10.0")
        .map(fields)
        .is_some_and(|f| f.get(key).is_some_and(|v| v == "1"))
}

fn expected_cat_feature(entry: &Value, bit: &str, key: &str, amd: bool) -> Feature<CatCaps> {
    match (enumerated(entry, bit), get(entry, key)) {
        (false, _) => Feature::Unsupported,
        (true, None) => Feature::DetailsUnknown,
        (true, Some(s)) => Feature::Supported(expected_cat(s, amd)),
    }
}

/// (MBA, SMBA) as the summary decodes them: AMD from 8000_0020H, Intel from 0x10.3.
fn expected_bandwidth(
    entry: &Value,
    amd: bool,
    dump: &CpuidDump,
) -> (Feature<MbaCaps>, Feature<MbaCaps>) {
    if amd {
        let f20 = get(entry, "8000_0020.0").map(fields).unwrap_or_default();
        let bw = |bit: &str, key: &str| match (
            f20.get(bit).is_some_and(|v| v == "1"),
            get(entry, key),
        ) {
            (false, _) => Feature::Unsupported,
            (true, None) => Feature::DetailsUnknown,
            (true, Some(s)) => Feature::Supported(expected_amd_bw(s)),
        };
        return (bw("L3MBE", "8000_0020.1"), bw("L3SMBE", "8000_0020.2"));
    }
    let mba = match (enumerated(entry, "MBA"), get(entry, "10.3")) {
        (false, _) => Feature::Unsupported,
        (true, None) => panic!("MBA enumerated but no 10.3 note"),
        (true, Some(s)) if s.contains("not in dump") => Feature::DetailsUnknown,
        (true, Some(s)) => {
            let f = fields(s);
            Feature::Supported(MbaCaps {
                num_classes: u32::try_from(num(&f, "numCLOS")).unwrap(),
                kind: MbaKind::IntelDelay {
                    max_delay: u32::try_from(num(&f, "max_delay")).unwrap(),
                    linear: flag(&f, "linear"),
                    // Not in the summary: CPUID.(10H,3):ECX[0], read from the dump.
                    per_thread: dump.cpuid(0x10, 3).is_some_and(|r| r.ecx & 1 == 1),
                },
                ctrl_enabled: false,
            })
        }
    };
    (mba, Feature::Unsupported)
}

/// Checks one summary entry against detection; returns a description of each mismatch.
fn check_entry(entry: &Value) -> Vec<String> {
    let slug = get(entry, "slug").unwrap();
    let dump = CpuidDump::from_path(cpuid_dir().join(format!("{slug}.txt"))).unwrap();
    let caps = Capabilities::detect(&dump);
    let mut bad = Vec::new();
    macro_rules! check {
        ($what:literal, $got:expr, $want:expr) => {
            if $got != $want {
                bad.push(format!(
                    "{slug}: {}: got {:?}, want {:?}",
                    $what, $got, $want
                ));
            }
        };
    }
    let vendor = match get(entry, "vendor").unwrap() {
        "GenuineIntel" => Vendor::Intel,
        "AuthenticAMD" => Vendor::Amd,
        other => panic!("unexpected vendor {other}"),
    };
    let amd = vendor == Vendor::Amd;
    check!("vendor", caps.vendor, vendor);
    let brand = get(entry, "brand").unwrap();
    check!("brand", caps.brand.as_deref(), Some(brand));
    check!("processor header", dump.processor(), Some(brand));
    let sig = u32::from_str_radix(get(entry, "sig").unwrap(), 16).unwrap();
    check!("signature", caps.signature, Some(sig));
    check!("monitoring", caps.monitoring, expected_monitoring(entry));
    check!(
        "l3_cat",
        caps.l3_cat,
        expected_cat_feature(entry, "L3CAT", "10.1", amd)
    );
    check!(
        "l2_cat",
        caps.l2_cat,
        expected_cat_feature(entry, "L2CAT", "10.2", amd)
    );
    let (mba, smba) = expected_bandwidth(entry, amd, &dump);
    check!("mba", caps.mba, mba);
    check!("smba", caps.smba, smba);
    // No RDT at all <=> an explanation.
    check!(
        "explain_no_rdt",
        explain_no_rdt(&dump).is_some(),
        !caps.has_rdt()
    );
    bad
}

#[test]
fn every_dump_decodes_to_the_summary_values() {
    let entries = summary();
    assert_eq!(entries.len(), 32);
    let bad: Vec<String> = entries.iter().flat_map(check_entry).collect();
    assert!(bad.is_empty(), "mismatches:\n{}", bad.join("\n"));
}

#[test]
fn summary_covers_every_single_cpu_dump() {
    let slugs: BTreeSet<String> = summary()
        .iter()
        .map(|e| get(e, "slug").unwrap().to_owned())
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(cpuid_dir())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| {
            Path::new(n).extension().is_some_and(|e| e == "txt") && !n.ends_with(".all.txt")
        })
        .map(|n| n.trim_end_matches(".txt").to_owned())
        .collect();
    assert_eq!(slugs, files);
}

const NEGATIVE: [&str; 4] = [
    "intel-xeon-e5-4620v2_ivy-bridge-ep__hwloc",
    "amd-epyc-7451_naples__hwloc",
    "intel-core-i7-1370p_raptor-lake__hwloc",
    "intel-core-i7-12700k_alder-lake__raw-cpuid",
];

#[test]
fn negative_dumps_have_no_rdt_and_the_explanation_names_pqm_and_pqe() {
    for slug in NEGATIVE {
        let dump = CpuidDump::from_path(cpuid_dir().join(format!("{slug}.txt"))).unwrap();
        let caps = Capabilities::detect(&dump);
        assert!(!caps.has_rdt(), "{slug}: {caps:?}");
        let why = explain_no_rdt(&dump).unwrap_or_else(|| panic!("{slug}: no explanation"));
        assert!(why.contains("EBX[12] (PQM, monitoring)"), "{slug}: {why}");
        assert!(why.contains("EBX[15] (PQE, allocation)"), "{slug}: {why}");
        assert_eq!(
            why.contains("80000020H"),
            slug.starts_with("amd"),
            "{slug}: {why}"
        );
    }
}

#[test]
fn positive_dumps_have_no_explanation() {
    for entry in summary() {
        let slug = get(&entry, "slug").unwrap();
        if NEGATIVE.contains(&slug) {
            continue;
        }
        let dump = CpuidDump::from_path(cpuid_dir().join(format!("{slug}.txt"))).unwrap();
        assert_eq!(explain_no_rdt(&dump), None, "{slug}");
    }
}

#[test]
fn haswell_ep_has_occupancy_monitoring_only_and_no_leaf_10h() {
    // Max basic leaf 0xF: CAT on HSX is found by MSR probing, never by CPUID.
    let dump = CpuidDump::from_path(cpuid_dir().join("intel-xeon-e5-2680v3_haswell-ep__hwloc.txt"))
        .unwrap();
    let caps = Capabilities::detect(&dump);
    assert_eq!(caps.l3_cat, Feature::Unsupported);
    let ev = caps.monitoring.get().unwrap().events;
    assert!(ev.llc_occupancy && !ev.mbm_total && !ev.mbm_local);
}

#[test]
fn cache_geometry_matches_the_parts_data_sheets() {
    // (dump, L3 size in bytes, L3 ways)
    let cases: [(&str, u64, u32); 5] = [
        (
            "intel-xeon-gold-6140_skylake-sp__hwloc",
            (24 << 20) + (768 << 10),
            11,
        ), // 24.75 MB, 11-way
        ("intel-xeon-e5-2650lv4_broadwell-ep__hwloc", 35 << 20, 20), // 35 MB, 20-way
        ("amd-epyc-7763_milan__hwloc", 32 << 20, 16),                // 32 MB per CCX
        ("intel-xeon-d-1559_broadwell-de__instlatx64", 18 << 20, 12), // 18 MB, 12-way
        // 30 MB, 20-way, captured with Cluster-on-Die on: leaf 4 describes one half.
        ("intel-xeon-e5-2680v3_haswell-ep__hwloc", 15 << 20, 20),
    ];
    for (slug, size, ways) in cases {
        let dump = CpuidDump::from_path(cpuid_dir().join(format!("{slug}.txt"))).unwrap();
        let caps = Capabilities::detect(&dump);
        let l3 = caps
            .l3_cache
            .unwrap_or_else(|| panic!("{slug}: no L3 geometry"));
        assert_eq!((l3.total_size(), l3.ways), (size, ways), "{slug}");
        // CAT's CBM has one bit per way.
        if let Some(cat) = caps.l3_cat.get() {
            assert_eq!(cat.cbm_len, ways, "{slug}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Topology from per-CPU dumps

struct Shape {
    file: PathBuf,
    cpus: usize,
    sockets: usize,
    l3_domains: usize,
    cpus_per_l3: usize,
}

fn shapes() -> Vec<Shape> {
    let m = models_dir();
    let d = cpuid_dir();
    let s = |file: PathBuf, cpus, sockets, l3_domains, cpus_per_l3| Shape {
        file,
        cpus,
        sockets,
        l3_domains,
        cpus_per_l3,
    };
    vec![
        // hwloc Intel-Broadwell-2xXeon-E5-2650Lv4: 2 x 14 cores x 2 threads, one L3 per socket
        s(
            m.join("intel-xeon-e5-2650lv4_broadwell-ep__hwloc.all.txt"),
            56,
            2,
            2,
            28,
        ),
        // hwloc Intel-Skylake-2xXeon6140: 2 x 18 cores x 2 threads
        s(
            m.join("intel-xeon-gold-6140_skylake-sp__hwloc.all.txt"),
            72,
            2,
            2,
            36,
        ),
        // hwloc AMD-19h-Zen3-2xEpyc-7763: 2 x 64 cores, SMT off, 8 cores per CCX (one L3 each)
        s(m.join("amd-epyc-7763_milan__hwloc.all.txt"), 128, 2, 16, 8),
        // hwloc AMD-19h-Zen4-2xEpyc-9654: 2 x 96 cores x 2 threads, 12 CCDs of 8 cores each
        s(m.join("amd-epyc-9654_genoa__hwloc.all.txt"), 384, 2, 24, 16),
        // hwloc Intel-SapphireRapids-2xXeonMax9460: 2 x 40 cores x 2 threads
        s(
            m.join("intel-xeon-max-9460_sapphire-rapids__hwloc.all.txt"),
            160,
            2,
            2,
            80,
        ),
        // Xeon D-1559: single-socket SoC, 12 cores x 2 threads
        s(
            d.join("intel-xeon-d-1559_broadwell-de__instlatx64.all.txt"),
            24,
            1,
            1,
            24,
        ),
        // hwloc Intel-Haswell-2xXeon-E5-2680v3: 2 x 12 cores, SMT off, captured with
        // Cluster-on-Die on: CPUID leaf 4 gives each half-socket cluster its own 15 MB L3
        // (see cache_geometry_matches_the_parts_data_sheets), so 2 L3 domains per socket.
        s(
            d.join("intel-xeon-e5-2680v3_haswell-ep__hwloc.all.txt"),
            24,
            2,
            4,
            6,
        ),
    ]
}

#[test]
fn topology_from_every_per_cpu_dump_has_the_machines_shape() {
    for shape in shapes() {
        let name = shape
            .file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&shape.file).unwrap();
        let blocks = text
            .lines()
            .filter(|l| l.starts_with("# logical-cpu "))
            .count();
        let dump = CpuidDump::parse(&text).unwrap();
        assert_eq!(dump.cpus().len(), blocks, "{name}");
        let topo = Topology::from_cpuid_dump(&dump).unwrap();
        // act/assert
        assert_eq!(topo.cpus().len(), shape.cpus, "{name}: CPUs");
        assert_eq!(blocks, shape.cpus, "{name}: blocks");
        assert_eq!(
            topo.packages().len(),
            shape.sockets,
            "{name}: sockets {:?}",
            topo.packages()
        );
        let l3 = topo.l3_domains();
        assert_eq!(l3.len(), shape.l3_domains, "{name}: L3 domains {l3:?}");
        for d in &l3 {
            let cpus = topo.cpus_in_l3(*d);
            assert_eq!(cpus.len(), shape.cpus_per_l3, "{name}: CPUs of L3 {d}");
            // An L3 never spans packages.
            let pkgs: BTreeSet<u32> = cpus.iter().map(|c| topo.get(c).unwrap().package).collect();
            assert_eq!(pkgs.len(), 1, "{name}: L3 {d} spans packages {pkgs:?}");
        }
        // Sockets hold the same number of CPUs, and every (package, core) pair holds the
        // same number of threads.
        let per_pkg: BTreeSet<usize> = topo
            .packages()
            .iter()
            .map(|&p| topo.cpus_in_package(p).len())
            .collect();
        assert_eq!(per_pkg.len(), 1, "{name}: {per_pkg:?}");
        let mut threads: BTreeMap<(u32, Option<u32>), usize> = BTreeMap::new();
        for c in topo.cpus() {
            *threads.entry((c.package, c.core)).or_default() += 1;
        }
        let per_core: BTreeSet<usize> = threads.values().copied().collect();
        assert_eq!(per_core.len(), 1, "{name}: threads per core {per_core:?}");
        let tpc = *per_core.first().unwrap();
        assert_eq!(threads.len() * tpc, shape.cpus, "{name}");
        // L2 is per core on all of these parts.
        assert_eq!(topo.l2_domains().len(), threads.len(), "{name}: L2 domains");
        // Dumps carry no NUMA information: node = package.
        assert_eq!(topo.nodes(), topo.packages(), "{name}");
    }
}

#[test]
fn first_block_of_a_per_cpu_dump_equals_the_single_cpu_dump() {
    let pairs = [
        (models_dir(), "intel-xeon-gold-6140_skylake-sp__hwloc"),
        (models_dir(), "amd-epyc-7763_milan__hwloc"),
        (models_dir(), "amd-epyc-9654_genoa__hwloc"),
        (models_dir(), "intel-xeon-e5-2650lv4_broadwell-ep__hwloc"),
        (models_dir(), "intel-xeon-max-9460_sapphire-rapids__hwloc"),
        (cpuid_dir(), "intel-xeon-d-1559_broadwell-de__instlatx64"),
        (cpuid_dir(), "intel-xeon-e5-2680v3_haswell-ep__hwloc"),
    ];
    for (dir, slug) in pairs {
        let all = CpuidDump::from_path(dir.join(format!("{slug}.all.txt"))).unwrap();
        let one = CpuidDump::from_path(cpuid_dir().join(format!("{slug}.txt"))).unwrap();
        assert_eq!(all.cpus()[0].cpu, LogicalCpu::new(0), "{slug}");
        let a: Vec<_> = all.cpus()[0].leaves().collect();
        let b: Vec<_> = one.cpus()[0].leaves().collect();
        assert_eq!(a, b, "{slug}");
        assert_eq!(
            Capabilities::detect(&all),
            Capabilities::detect(&one),
            "{slug}"
        );
    }
}

#[test]
fn skylake_l3_ids_are_the_kernels_apic_shift_values() {
    // The kernel's sysfs L3 id on Intel is x2APIC >> ceil_log2(sharing ids): for a 2-socket
    // Gold 6140 (64 APIC ids per package, 64 sharing the L3) the ids are 0 and 1, and socket
    // 1's first CPU has x2APIC id 64.
    let dump =
        CpuidDump::from_path(models_dir().join("intel-xeon-gold-6140_skylake-sp__hwloc.all.txt"))
            .unwrap();
    let topo = Topology::from_cpuid_dump(&dump).unwrap();
    let l3: Vec<u32> = topo.l3_domains().iter().map(|d| d.get()).collect();
    assert_eq!(l3, [0, 1]);
    for block in dump.cpus() {
        let apic = block.cpuid(0xb, 0).unwrap().edx;
        let placed = topo.get(block.cpu).unwrap();
        assert_eq!(placed.l3.unwrap().get(), apic >> 6, "CPU {}", block.cpu);
        assert_eq!(placed.package, apic >> 6, "CPU {}", block.cpu);
    }
}

// ---------------------------------------------------------------------------------------------
// Topology from captured sysfs trees

fn sysfs(tree: &str) -> Topology {
    let system = sysfs_dir().join(tree).join("sys/devices/system");
    Topology::from_sysfs(Path::new(&system)).unwrap_or_else(|e| panic!("{tree}: {e:?}"))
}

#[test]
fn sysfs_two_socket_snc_tree() {
    let topo = sysfs("cri-resource-manager/2-socket-4-node-40-core");
    assert_eq!(topo.cpus().len(), 80);
    assert_eq!(topo.packages(), [0, 1]);
    assert_eq!(topo.l3_domains().len(), 2);
    assert_eq!(topo.nodes(), [0, 1, 2, 3], "SNC: two nodes per socket");
    // Hyper-thread siblings are n and n + 40: same core, same L2, same node.
    for n in 0..40 {
        let a = topo.get(LogicalCpu::new(n)).unwrap();
        let b = topo.get(LogicalCpu::new(n + 40)).unwrap();
        assert_eq!(
            (a.package, a.core, a.l2, a.l3, a.node),
            (b.package, b.core, b.l2, b.l3, b.node),
            "CPU {n}"
        );
    }
    // node0's cpulist from the capture
    let node0: Vec<u32> = topo
        .cpus()
        .iter()
        .filter(|c| c.node == 0)
        .map(|c| c.cpu.get())
        .collect();
    assert_eq!(
        node0,
        [
            0, 1, 2, 5, 6, 10, 11, 12, 15, 16, 40, 41, 42, 45, 46, 50, 51, 52, 55, 56
        ]
    );
    assert!(!topo.l3_is_per_package() || topo.l3_domains().len() == topo.packages().len());
}

#[test]
fn sysfs_desktop_tree() {
    let topo = sysfs("cri-resource-manager/desktop");
    assert_eq!(topo.cpus().len(), 20);
    assert_eq!(topo.packages(), [0]);
    assert_eq!(topo.l3_domains().len(), 1);
    assert_eq!(topo.l2_domains().len(), 10, "10 cores, one L2 each");
    assert_eq!(topo.nodes(), [0]);
}

#[test]
fn sysfs_hwloc_two_socket_silver_tree() {
    let topo = sysfs("hwloc/32intel64-2p8co2t+8ve");
    assert_eq!(topo.cpus().len(), 32);
    assert_eq!(topo.packages().len(), 2);
    assert_eq!(topo.nodes(), [0, 1]);
    assert_eq!(topo.l3_domains().len(), 2);
    assert_eq!(topo.l2_domains().len(), 16, "2 x 8 cores");
    assert!(topo.l3_is_per_package());
}

#[test]
fn sysfs_hybrid_tree() {
    let topo = sysfs("hwloc/20em64t-hybrid-1p6c2t+2ca4co1t");
    assert_eq!(topo.cpus().len(), 20);
    assert_eq!(topo.packages(), [0]);
    assert_eq!(topo.l3_domains().len(), 1);
    // 6 P-cores with a private L2 each, 2 clusters of 4 E-cores sharing one L2 each.
    assert_eq!(topo.l2_domains().len(), 8);
}

/// The per-CPU view of a captured tree, read the slow way (every CPU's own files): the
/// oracle the aggregated-list reader of `Topology::from_sysfs` must agree with.
fn per_cpu_oracle(system: &Path) -> Vec<(u32, u32, u32, Option<u32>, u32)> {
    let read = |p: PathBuf| std::fs::read_to_string(&p).map(|s| s.trim().to_owned());
    let online: rdt_core::CpuSet = read(system.join("cpu/online")).unwrap().parse().unwrap();
    let mut node_of = BTreeMap::new();
    for entry in std::fs::read_dir(system.join("node")).into_iter().flatten() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let Some(n) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let list: rdt_core::CpuSet = read(entry.path().join("cpulist")).unwrap().parse().unwrap();
        for cpu in list.iter() {
            node_of.insert(cpu.get(), n);
        }
    }
    online
        .iter()
        .map(|cpu| {
            let dir = system.join(format!("cpu/cpu{cpu}"));
            let package = read(dir.join("topology/physical_package_id"))
                .unwrap()
                .parse()
                .unwrap();
            let (mut l2, mut l3) = (cpu.get(), None);
            for k in 0..8 {
                let index = dir.join(format!("cache/index{k}"));
                let Ok(level) = read(index.join("level")) else {
                    continue;
                };
                let kind = read(index.join("type")).unwrap();
                let id: u32 = read(index.join("id")).unwrap().parse().unwrap();
                match (level.as_str(), kind.as_str()) {
                    ("2", "Data" | "Unified") => l2 = id,
                    ("3", "Unified") => l3 = Some(id),
                    _ => {}
                }
            }
            let node = node_of.get(&cpu.get()).copied().unwrap_or(0);
            (cpu.get(), package, l2, l3, node)
        })
        .collect()
}

#[test]
fn sysfs_aggregated_lists_agree_with_every_cpus_own_files() {
    for tree in [
        "cri-resource-manager/2-socket-4-node-40-core",
        "cri-resource-manager/desktop",
        "hwloc/32intel64-2p8co2t+8ve",
        "hwloc/20em64t-hybrid-1p6c2t+2ca4co1t",
    ] {
        let system = sysfs_dir().join(tree).join("sys/devices/system");
        let got: Vec<_> = sysfs(tree)
            .cpus()
            .iter()
            .map(|c| {
                (
                    c.cpu.get(),
                    c.package,
                    c.l2.get(),
                    c.l3.map(rdt_core::CacheDomain::get),
                    c.node,
                )
            })
            .collect();
        assert_eq!(got, per_cpu_oracle(&system), "{tree}");
    }
}

#[test]
fn amd_cache_lines_come_from_leaf_8000_001d() {
    // The EPYC 9654 has no leaf 4; its caches are in 8000_001DH (L3: EAX 0x0003c163, 16
    // logical CPUs share it: one CCD with SMT).
    let dump =
        CpuidDump::from_path(cpuid_dir().join("amd-epyc-9654_genoa__instlatx64.txt")).unwrap();
    let lines = rdt_core::discovery::cache_sharing_lines(&dump);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("CACHE: type 3, level 3, max id sharing this cache 16 (4 bits)"),
        "{lines:#?}"
    );
    assert_eq!(lines.len(), 4, "{lines:#?}");
}

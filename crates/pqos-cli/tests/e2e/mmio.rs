//! `pqos --iface=mmio` (pqos v26.03, RDT 1.3) on the simulated `xeon-rdt13`: region-aware
//! monitoring shows the workload model's 70 % DDR / 30 % CXL split, a maximum-bandwidth
//! limit on the CXL region lowers only that region's traffic, `-R` restores it, L3 CAT and
//! core association work as on the MSR interface; and every write of a region MBA change
//! fails or is killed and is undone (FUSE-mounted, `--sysroot`).

use std::process::Command;

use rdt_sim::fs::testing::TestMount;

use crate::crash::every_write_position;
use crate::util::{Machine, PQOS, Sim};

const MODEL: &str = "xeon-rdt13";

/// The ERDT ids of the model's CPU domains (its L3 domains), ascending.
fn cpu_domain_ids() -> Vec<u16> {
    let p = rdt_sim::SimPlatform::builtin(MODEL).expect("model");
    let mut ids: Vec<u16> = p
        .mmio()
        .and_then(|m| m.erdt())
        .expect("an ERDT")
        .domains
        .iter()
        .filter(|d| d.is_cpu_l3())
        .map(|d| d.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// The region columns of the last sample of a `-m` text run: (header names, values).
fn last_regions(stdout: &str) -> (Vec<String>, Vec<f64>) {
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .rposition(|l| l.trim_start().starts_with("CORE"))
        .unwrap_or_else(|| panic!("no header in:\n{stdout}"));
    let names: Vec<String> = lines[header]
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect();
    let row = lines
        .get(header + 1)
        .unwrap_or_else(|| panic!("no row in:\n{stdout}"));
    let cells: Vec<&str> = row.split_whitespace().skip(1).collect();
    assert_eq!(cells.len(), names.len(), "{stdout}");
    let values = names
        .iter()
        .zip(&cells)
        .filter(|(n, _)| n.starts_with("MBL-r"))
        .map(|(_, v)| v.parse::<f64>().expect("a number"))
        .collect();
    (
        names
            .into_iter()
            .filter(|n| n.starts_with("MBL-r"))
            .collect(),
        values,
    )
}

/// `-m all:2-10` (the default scenario's workloads) for three samples; the last one's
/// region bandwidths.
fn regions_now(m: &dyn Machine, extra: &[&str]) -> (Vec<String>, Vec<f64>) {
    let mut args = vec!["--iface=mmio", "-m", "all:2-10", "-t", "3"];
    args.extend_from_slice(extra);
    let run = m.monitor(&args).ok();
    last_regions(&run.stdout)
}

#[test]
fn region_monitoring_shows_the_70_30_split_and_max_bw_on_cxl_lowers_only_cxl() {
    let m = Sim::new(MODEL);
    // every region by default, in pqos v26.03's columns
    let (names, v) = regions_now(&m, &[]);
    assert_eq!(names, ["MBL-r0[MB/s]", "MBL-r1[MB/s]"]);
    let (ddr, cxl) = (v[0], v[1]);
    assert!(ddr > 10.0, "DDR traffic: {v:?}");
    let share = ddr / (ddr + cxl);
    assert!((share - 0.70).abs() < 0.02, "DDR share {share} ({v:?})");
    // the regions asked for, in the order asked
    let (names, _) = regions_now(&m, &["--mon-mem-regions=1"]);
    assert_eq!(names, ["MBL-r1[MB/s]"]);

    // COS1 for the workload's cores; a quarter of the window (0x7f of 0x1ff) as the CXL
    // region's maximum in every CPU domain
    m.pqos(&["--iface=mmio", "-a", "llc:1=2-10"]).ok();
    let ids = cpu_domain_ids();
    let id_list = ids.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let set = m
        .pqos(&[
            "--iface=mmio",
            &format!("--alloc-domain-id={id_list}"),
            "--alloc-mem-regions=1",
            "--alloc-max-bw",
            "-e",
            "mba:1=0x7f",
        ])
        .ok();
    let mut want = String::new();
    for id in &ids {
        want.push_str(&format!(
            "Domain ID {id} MBA COS1 Memory Region 1 Maximum Bandwidth=> 0x7f requested, \
             0x7f applied\n"
        ));
    }
    want.push_str("Allocation configuration altered.\n");
    crate::eqnice!(want, set.stdout);
    let (_, after) = regions_now(&m, &[]);
    assert!(
        (after[0] / ddr - 1.0).abs() < 0.02,
        "DDR unchanged: {ddr} -> {}",
        after[0]
    );
    let ratio = after[1] / cxl;
    let quarter = f64::from(0x7f_u16) / f64::from(0x1ff_u16);
    assert!(
        (ratio - quarter).abs() < 0.02,
        "CXL {cxl} -> {} ({ratio})",
        after[1]
    );

    // -R: every region control back to the window, the cores to COS0
    crate::eqnice!(
        "Allocation reset successful\n",
        m.pqos(&["--iface=mmio", "-R"]).ok().stdout
    );
    let (_, reset) = regions_now(&m, &[]);
    assert!(
        (reset[1] / cxl - 1.0).abs() < 0.02,
        "CXL restored: {cxl} -> {}",
        reset[1]
    );
}

#[test]
fn l3_cat_and_association_work_on_the_mmio_interface() {
    let m = Sim::new(MODEL);
    let e = m.pqos(&["--iface=mmio", "-e", "llc:1=0xf"]).ok().stdout;
    assert!(e.contains("L3CA COS1 => MASK 0xf\n"), "{e}");
    assert!(e.ends_with("Allocation configuration altered.\n"), "{e}");
    // pqos v26.03's -s on MMIO shows region MBA, not the L3 masks (print_domain_alloc_config)
    let s = m.pqos(&["--iface=mmio", "-s"]).ok().stdout;
    assert!(!s.contains("L3CA"), "{s}");
    assert!(
        s.contains("MBA COS1 Memory Region 0 Optimal Bandwidth=> 0x1ff\n"),
        "{s}"
    );
    // the MSR interface sees the classes (IA32_L3_QOS_MASK_n)
    let s = m.pqos(&["--iface=msr", "-s"]).ok().stdout;
    assert!(s.contains("L3CA COS1 => MASK 0xf"), "{s}");
}

#[test]
fn s_shows_every_region_control_of_every_class_and_domain_as_pqos_v26_03() {
    let m = Sim::new(MODEL);
    let ids = cpu_domain_ids();
    assert!(ids.len() >= 2, "{ids:?}");
    // COS2's minimum on region 1 (0 after reset: no guarantee), in the first domain only
    m.pqos(&[
        "--iface=mmio",
        &format!("--alloc-domain-id={}", ids[0]),
        "--alloc-mem-regions=1",
        "--alloc-min-bw",
        "-e",
        "mba:2=0x40",
    ])
    .ok();
    let s = m.pqos(&["--iface=mmio", "-s"]).ok().stdout;
    let lines: Vec<&str> = s.lines().collect();
    // pqos/alloc.c print_mba: per class, regions then controls, then a blank line
    let first = ids[0];
    assert_eq!(
        lines[..7],
        [
            format!("Domain ID {first} MBA COS0 Memory Region 0 Optimal Bandwidth=> 0x1ff"),
            format!("Domain ID {first} MBA COS0 Memory Region 0 Minimum Bandwidth=> 0x0"),
            format!("Domain ID {first} MBA COS0 Memory Region 0 Maximum Bandwidth=> 0x1ff"),
            format!("Domain ID {first} MBA COS0 Memory Region 1 Optimal Bandwidth=> 0x1ff"),
            format!("Domain ID {first} MBA COS0 Memory Region 1 Minimum Bandwidth=> 0x0"),
            format!("Domain ID {first} MBA COS0 Memory Region 1 Maximum Bandwidth=> 0x1ff"),
            String::new(),
        ],
        "{s}"
    );
    let value = |id: u16, class: u32, region: u8, control: &str| -> String {
        let head =
            format!("Domain ID {id} MBA COS{class} Memory Region {region} {control} Bandwidth=> ");
        let hits: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix(&head)).collect();
        assert_eq!(hits.len(), 1, "{head}\n{s}");
        hits[0].to_owned()
    };
    assert_eq!(value(first, 2, 1, "Minimum"), "0x40");
    assert_eq!(value(first, 2, 1, "Maximum"), "0x1ff");
    assert_eq!(value(first, 2, 0, "Minimum"), "0x0");
    assert_eq!(value(ids[1], 2, 1, "Minimum"), "0x0");
    // every domain's classes, then a blank line after the domain
    let classes = lines
        .iter()
        .filter(|l| l.starts_with(&format!("Domain ID {first} MBA COS")))
        .count()
        / 6;
    assert!(classes >= 3, "{s}");
    let block = ids.len() * (classes * 7 + 1);
    assert!(
        lines[block - 1].is_empty() && lines[block - 2].is_empty(),
        "{s}"
    );
    assert!(
        lines[block].starts_with("Core information for socket 0:"),
        "{s}"
    );
    // every core line names its ERDT domain first (pqos print_core_assoc on MMIO)
    let cores: Vec<&&str> = lines.iter().filter(|l| l.contains("Core ")).collect();
    assert!(!cores.is_empty());
    for l in cores.iter().filter(|l| !l.starts_with("Core information")) {
        let rest = l
            .strip_prefix("    Domain ID  0x")
            .unwrap_or_else(|| panic!("{l}"));
        let (hex, core) = rest
            .split_once(" =>     Core ")
            .unwrap_or_else(|| panic!("{l}"));
        let id = u16::from_str_radix(hex, 16).expect("hex domain id");
        assert!(ids.contains(&id), "{l}");
        assert!(core.ends_with(", RMID0") || core.contains("COS"), "{l}");
    }
}

/// The last `-m` sample's region cells of `-u FORMAT` output, parsed with a real parser:
/// (column or node names, values).
fn regions_in(m: &dyn Machine, format: &str) -> (Vec<String>, Vec<f64>) {
    let run = m
        .monitor(&["--iface=mmio", "-m", "all:2-10", "-t", "3", "-u", format])
        .ok();
    // from the CSV header or the XML declaration on (pqos's NOTE banner comes first)
    let at = ["Time,", "<?xml"]
        .iter()
        .find_map(|h| run.raw_stdout.find(h))
        .unwrap_or_else(|| panic!("{}", run.raw_stdout));
    let out = &run.raw_stdout[at..];
    match format {
        "csv" => {
            let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
            let header = crate::monitor_output::csv_fields(lines[0]);
            let row = crate::monitor_output::csv_fields(lines[lines.len() - 1]);
            assert_eq!(header.len(), row.len(), "{out}");
            header
                .into_iter()
                .zip(row)
                .filter(|(h, _)| h.starts_with("MBL-r"))
                .map(|(h, v)| (h, v.parse::<f64>().expect("a number")))
                .unzip()
        }
        "xml" => {
            use quick_xml::events::Event;
            let mut reader = quick_xml::Reader::from_str(out);
            let (mut names, mut values) = (Vec::new(), Vec::new());
            let mut open: Option<String> = None;
            loop {
                match reader.read_event().expect("well-formed XML") {
                    Event::Eof => break,
                    Event::Start(e) => {
                        let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                        if name == "record" {
                            names.clear();
                            values.clear();
                        }
                        open = Some(name);
                    }
                    Event::Text(t) => {
                        if let Some(name) =
                            open.as_ref().filter(|n| n.starts_with("mbm_local_region_"))
                        {
                            names.push(name.clone());
                            let text = t.decode().expect("UTF-8");
                            values.push(text.parse::<f64>().expect("a number"));
                        }
                    }
                    Event::End(_) => open = None,
                    _ => {}
                }
            }
            (names, values)
        }
        other => panic!("{other}"),
    }
}

#[test]
fn csv_and_xml_carry_the_region_columns_and_the_70_30_split() {
    let m = Sim::new(MODEL);
    let (names, v) = regions_in(&m, "csv");
    assert_eq!(names, ["MBL-r0[MB/s]", "MBL-r1[MB/s]"]);
    let share = v[0] / (v[0] + v[1]);
    assert!(v[0] > 10.0 && (share - 0.70).abs() < 0.02, "{v:?}");
    let (names, v) = regions_in(&m, "xml");
    assert_eq!(names, ["mbm_local_region_0_MB", "mbm_local_region_1_MB"]);
    let share = v[0] / (v[0] + v[1]);
    assert!(v[0] > 10.0 && (share - 0.70).abs() < 0.02, "{v:?}");
}

#[test]
fn region_options_are_refused_where_they_cannot_apply() {
    let m = Sim::new(MODEL);
    let r = m
        .pqos(&["--iface=mmio", "--alloc-mem-regions=1", "-e", "mba:1=0x10"])
        .failed();
    assert!(
        r.stderr.contains("--alloc-domain-id option is missing"),
        "{}",
        r.stderr
    );
    let id = cpu_domain_ids()[0].to_string();
    let r = m
        .pqos(&[
            "--iface=mmio",
            &format!("--alloc-domain-id={id}"),
            "--alloc-mem-regions=5",
            "-e",
            "mba:1=0x10",
        ])
        .failed();
    assert!(
        r.stderr.contains(
            "Memory region 5 is not supported on this platform, available regions are 0 to 1"
        ),
        "{}",
        r.stderr
    );
    // above the control window: refused by the plan, nothing written
    let r = m
        .pqos(&[
            "--iface=mmio",
            &format!("--alloc-domain-id={id}"),
            "--alloc-mem-regions=0",
            "-e",
            "mba:1=0x200",
        ])
        .failed();
    assert!(r.stderr.contains("control window"), "{}", r.stderr);
    // region options on the MSR interface
    let r = m
        .pqos(&[
            "--iface=msr",
            "--mon-mem-regions=0",
            "-m",
            "all:0",
            "-t",
            "1",
        ])
        .failed();
    assert!(
        r.stderr.contains("needs the MMIO interface"),
        "{}",
        r.stderr
    );
    let r = m
        .pqos(&[
            "--iface=msr",
            "--alloc-domain-id=0",
            "--alloc-mem-regions=0",
            "-e",
            "mba:1=50",
        ])
        .failed();
    assert!(
        r.stderr.contains("needs the MMIO interface"),
        "{}",
        r.stderr
    );
    // a model without ERDT and MRRM
    let r = Sim::new("skylake-sp")
        .pqos(&["--iface=mmio", "-s"])
        .failed();
    assert!(r.stderr.contains("ERDT"), "{}", r.stderr);
}

/// `xeon-rdt13` FUSE-mounted, reached through `pqos --iface=mmio --sysroot DIR`: the
/// registers through `DIR/dev/mem`, the tables from `DIR/sys/firmware/acpi/tables`.
struct MountedMmio {
    mount: TestMount,
}

impl Machine for MountedMmio {
    /// `pqos [--iface=mmio] --sysroot DIR ARGS...` (`--iface=mmio` unless ARGS name one: the
    /// `-s` that rolls a killed run back opens the MMIO interface too).
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(PQOS);
        if !args.iter().any(|a| a.starts_with("--iface")) {
            cmd.arg("--iface=mmio");
        }
        cmd.arg("--sysroot")
            .arg(self.mount.root())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE")
            .env_remove("RDT_SYSROOT");
        cmd
    }

    fn monitor_args(&self) -> &'static [&'static str] {
        &[]
    }

    fn has_pmu(&self) -> bool {
        false
    }
}

/// Every CPU's IA32_PQR_ASSOC and every region MBA register, from the model's state.
fn registers(m: &MountedMmio) -> serde_json::Value {
    let state: serde_json::Value =
        serde_json::from_str(&m.mount.platform().lock().save_state()).expect("state JSON");
    let cpus: Vec<&serde_json::Value> = state["cpus"]
        .as_array()
        .expect("cpus")
        .iter()
        .map(|c| &c["pqr_assoc"])
        .collect();
    serde_json::json!({ "pqr_assoc": cpus, "mmio_mba": state["mmio"]["mba"] })
}

#[test]
fn every_write_of_a_region_mba_change_fails_or_is_killed_and_is_undone() {
    let m = MountedMmio {
        mount: TestMount::builtin(MODEL),
    };
    let root = m.mount.root().to_owned();
    // from a reset state, which `-R` brings back between the kills (a reset writes the window
    // to the minimum controls, which power on at 0)
    m.pqos(&["-R"]).ok();
    let ids = cpu_domain_ids();
    let domains = format!("--alloc-domain-id={},{}", ids[0], ids[1]);
    // 2 domains x 2 regions x the max control, then 2 cores: regions 0 and 1 share a MARC
    // register per domain, written once for both (one run of the class's region controls;
    // both old values journaled): 2 MARC writes and 2 IA32_PQR_ASSOC
    let args = [
        domains.as_str(),
        "--alloc-mem-regions=0-1",
        "--alloc-max-bw",
        "-e",
        "mba:1=0x40",
        "-a",
        "llc:1=2,3",
    ];
    let n = every_write_position(
        &m,
        &root,
        "dev/**",
        &args,
        || registers(&m),
        || drop(m.pqos(&["-R"]).ok()),
    );
    assert_eq!(n, 4, "2 MARC writes and 2 IA32_PQR_ASSOC");
}

/// A class file with a `regions` table: the CXL region's maximum for the workload's
/// cores.
const CXL_CLASS: &str = "[[class]]\nname = \"batch\"\ncpus = \"2-10\"\n\
                         regions = { 1 = { max = 0x7f } }\n";

#[test]
fn apply_a_regions_file_then_s_shows_it_only_cxl_traffic_drops_and_r_restores() {
    let m = Sim::new(MODEL);
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = crate::declarative::file(&dir, "batch.toml", CXL_CLASS);
    let cfg = cfg.to_str().expect("UTF-8 path");
    let (_, before) = regions_now(&m, &[]);
    // the dry run prints the region steps and writes nothing
    let dry = m.pqos(&["--iface=mmio", "--apply", cfg, "--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains("batch (COS1): MBA region 1 max domain 0: 511 -> 127\n"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.ends_with("dry run: nothing written.\n"),
        "{}",
        dry.stdout
    );
    let s = m.pqos(&["--iface=mmio", "-s"]).ok().stdout;
    assert!(
        !s.contains("MBA COS1 Memory Region 1 Maximum Bandwidth=> 0x7f"),
        "{s}"
    );

    let run = m.pqos(&["--iface=mmio", "--apply", cfg]).ok();
    // the name, 2 domains' CXL maximum, 9 CPUs
    assert!(
        run.stdout.ends_with("Applied 12 write(s).\n"),
        "{}",
        run.stdout
    );
    let s = m.pqos(&["--iface=mmio", "-s"]).ok().stdout;
    for id in cpu_domain_ids() {
        let line = format!("Domain ID {id} MBA COS1 Memory Region 1 Maximum Bandwidth=> 0x7f\n");
        assert!(s.contains(&line), "{line}in:\n{s}");
        let ddr = format!("Domain ID {id} MBA COS1 Memory Region 0 Maximum Bandwidth=> 0x1ff\n");
        assert!(s.contains(&ddr), "{ddr}in:\n{s}");
    }
    let (_, after) = regions_now(&m, &[]);
    assert!(
        (after[0] / before[0] - 1.0).abs() < 0.02,
        "DDR unchanged: {before:?} -> {after:?}"
    );
    let quarter = f64::from(0x7f_u16) / f64::from(0x1ff_u16);
    assert!(
        (after[1] / before[1] - quarter).abs() < 0.02,
        "CXL to a quarter: {before:?} -> {after:?}"
    );
    crate::eqnice!(
        "Nothing to change.\n",
        m.pqos(&["--iface=mmio", "--apply", cfg]).ok().stdout
    );
    // -R: every control back to the window
    m.pqos(&["--iface=mmio", "-R"]).ok();
    let s = m.pqos(&["--iface=mmio", "-s"]).ok().stdout;
    assert!(!s.contains("Maximum Bandwidth=> 0x7f"), "{s}");

    // refused on the MSR interface, naming the file, line and key
    let e = m.pqos(&["--iface=msr", "--apply", cfg]).failed();
    assert!(
        e.stderr.contains(
            "batch.toml:4: class \"batch\": regions: region-aware MBA needs the \
                           MMIO interface"
        ),
        "{}",
        e.stderr
    );
}

#[test]
fn every_write_of_a_regions_file_fails_or_is_killed_and_is_undone() {
    let m = MountedMmio {
        mount: TestMount::builtin(MODEL),
    };
    let root = m.mount.root().to_owned();
    m.pqos(&["-R"]).ok();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = crate::declarative::file(
        &dir,
        "batch.toml",
        "[[class]]\nname = \"batch\"\ncpus = \"2,3\"\ncos = 1\n\
         regions = { 0 = { max = 0x100 }, 1 = { max = 0x40 } }\n",
    );
    let cfg = cfg.to_str().expect("UTF-8 path");
    let n = every_write_position(
        &m,
        &root,
        "dev/**",
        &["--apply", cfg],
        || registers(&m),
        || drop(m.pqos(&["-R"]).ok()),
    );
    // regions 0 and 1 share one MARC register per domain and control, and a class's region
    // controls are written as one run: one MARC write per domain (both fields at once; the
    // journal holds both old values, so a kill after it undoes both), then 2 IA32_PQR_ASSOC
    assert_eq!(n, 4, "2 MARC writes and 2 IA32_PQR_ASSOC");
}

/// `-R` on MMIO, from a region MBA change: each of its `dev/mem` writes failing leaves the
/// change as it was, and a kill at each is rolled back by the next `pqos -s` (issue 34:
/// every MMIO change survives SIGKILL at every write, the reset as well).
#[test]
fn every_mmio_write_of_a_reset_fails_or_is_killed_and_is_undone() {
    let m = MountedMmio {
        mount: TestMount::builtin(MODEL),
    };
    let root = m.mount.root().to_owned();
    m.pqos(&["-R"]).ok();
    let ids = cpu_domain_ids();
    let domains = format!("--alloc-domain-id={},{}", ids[0], ids[1]);
    let change = [
        domains.as_str(),
        "--alloc-mem-regions=0-1",
        "-e",
        "mba:1=0x40;mba:2=0x20",
        "-a",
        "llc:1=2,3",
    ];
    m.pqos(&change).ok();
    let n = every_write_position(
        &m,
        &root,
        "dev/mem",
        &["-R"],
        || registers(&m),
        || drop(m.pqos(&change).ok()),
    );
    assert!(n >= 2, "the reset writes the changed MARC registers: {n}");
}

//! `-u json`: stdout carries only JSON, and every document validates against its schema in
//! `docs/json/` (`-d`, `-D`, `-s` one document each; `-m`, `-p` JSON Lines), on the
//! in-process platform and through the OS interface of a mounted one.

use serde_json::Value;

use crate::util::mounted::MountedOs;
use crate::util::{Machine, Reaped, Run, SKX_RDT, Sim};

fn schema(name: &str) -> jsonschema::Validator {
    let path = format!(
        "{}/../../docs/json/{name}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let schema: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every error of `doc` against `v`, one per line.
fn errors(v: &jsonschema::Validator, doc: &Value) -> String {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses stdout as exactly one JSON document valid against `name`'s schema.
#[track_caller]
fn one_document(run: &Run, name: &str) -> Value {
    let doc: Value = serde_json::from_str(&run.raw_stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", run.raw_stdout));
    let errs = errors(&schema(name), &doc);
    assert!(errs.is_empty(), "{name}: {errs}\n{doc:#}");
    doc
}

/// Parses every stdout line as a JSON object valid against the monitoring schema.
#[track_caller]
fn json_lines(run: &Run) -> Vec<Value> {
    let v = schema("monitoring");
    let rows: Vec<Value> = run
        .raw_stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{}", run.raw_stdout))
        })
        .collect();
    assert!(!rows.is_empty(), "no rows:\n{}", run.stderr);
    for row in &rows {
        let errs = errors(&v, row);
        assert!(errs.is_empty(), "{errs}\n{row}");
    }
    rows
}

#[test]
fn the_schemas_reject_what_they_must() {
    // The tests below would pass vacuously if the schemas accepted anything.
    let caps = schema("capabilities");
    assert!(!caps.is_valid(&serde_json::json!({})));
    assert!(!caps.is_valid(&serde_json::json!({"interface": "mmio"})));
    let mon = schema("monitoring");
    assert!(mon.is_valid(&serde_json::json!({"time": "2024-09-23T10:00:00+02:00", "core": "0", "interval_s": 1.0, "ipc": null})));
    assert!(!mon.is_valid(&serde_json::json!({"time": "2024-09-23T10:00:00+02:00", "core": "0", "interval_s": 1.0, "ipc": "1.2"})));
    assert!(!mon.is_valid(&serde_json::json!({"time": "now", "core": "0", "interval_s": 1.0})));
    let config = schema("configuration");
    assert!(!config.is_valid(&serde_json::json!({"interface": "os", "l3_cat": [{"domain": 0, "label": null, "classes": [{"class": 0, "mask": "fff", "data_mask": null, "code_mask": null, "ways": 12}]}], "l2_cat": null, "mba": null, "cores": [], "tasks": null, "groups": null, "errors": []})));
}

#[test]
fn every_command_answers_in_schema_valid_json_on_every_model() {
    for model in [
        "broadwell-ep",
        "skylake-sp",
        "milan",
        "sapphire-rapids",
        "genoa",
        "turin",
    ] {
        let sim = Sim::new(model);
        for flag in ["-d", "-D"] {
            let run = sim.pqos(&["-u", "json", flag]).ok();
            let doc = one_document(&run, "capabilities");
            assert_eq!(doc["interface"], "msr", "{model}");
            assert!(
                doc["l3_cat"]["num_classes"].as_u64() > Some(0),
                "{model}: {doc}"
            );
        }
        // -e: pqos's report line goes to stderr, stdout stays empty (still valid: no JSON).
        let run = sim.pqos(&["-u", "json", "-e", "llc:1=0x3"]).ok();
        assert_eq!(run.raw_stdout, "", "{model}");
        assert!(
            run.stderr.contains("Allocation configuration altered."),
            "{model}: {}",
            run.stderr
        );
        let doc = one_document(&sim.pqos(&["-u", "json", "-s"]).ok(), "configuration");
        let l3 = doc["l3_cat"].as_array().expect("l3_cat");
        let cos1 = &l3[0]["classes"][1];
        assert_eq!(cos1["class"], 1, "{model}: {doc}");
        assert_eq!(cos1["mask"], "0x3", "{model}: {cos1}");
        assert_eq!(cos1["ways"], 2, "{model}: {cos1}");
        assert!(!doc["cores"].as_array().expect("cores").is_empty());

        let run = sim
            .monitor(&["-u", "json", "-m", "all:[0-1]", "-t", "2"])
            .ok();
        assert!(
            !run.raw_stdout.contains("NOTE"),
            "{model}: the banner is on stdout"
        );
        assert!(
            run.stderr.contains("NOTE:  Mixed use"),
            "{model}: {}",
            run.stderr
        );
        let rows = json_lines(&run);
        assert!(rows.iter().all(|r| r["core"] == "0-1"), "{model}");
    }
}

#[test]
fn the_os_interface_lists_other_tools_groups_and_pid_rows_in_json() {
    let m = MountedOs::new(SKX_RDT);
    m.mkdir("kubepods");
    m.mkdir("kubepods/mon_groups/pod1");
    let doc = one_document(&m.pqos(&["-u", "json", "-d"]).ok(), "capabilities");
    assert_eq!(doc["interface"], "os");
    assert!(doc["kernel"].is_string(), "{doc}");
    m.pqos(&["-e", "llc:1=0xf"]).ok();
    let doc = one_document(&m.pqos(&["-u", "json", "-s"]).ok(), "configuration");
    let groups = doc["groups"]
        .as_array()
        .expect("groups on the OS interface");
    let find = |path: &str| groups.iter().find(|g| g["path"] == path).cloned();
    let kube = find("kubepods").unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(
        (kube["kind"].as_str(), kube["owner"].as_str()),
        (Some("ctrl"), Some("foreign"))
    );
    let pod = find("kubepods/mon_groups/pod1").unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(
        (pod["kind"].as_str(), pod["owner"].as_str()),
        (Some("mon"), Some("foreign"))
    );
    let cos1 = find("COS1").unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(
        (cos1["owner"].as_str(), cos1["class"].as_u64()),
        (Some("ours"), Some(1))
    );
    assert!(doc["tasks"].is_array(), "{doc}");

    let child = Reaped::sleeper();
    let pid = child.pid().to_string();
    let run = m
        .pqos(&["-u", "json", "-p", &format!("llc:{pid}"), "-t", "1"])
        .ok();
    let rows = json_lines(&run);
    assert!(
        rows.iter().all(|r| r["pid"] == pid.as_str()),
        "{}",
        run.raw_stdout
    );
    let ours: Vec<String> = m
        .mon_groups()
        .into_iter()
        .filter(|g| g.contains("pqos-"))
        .collect();
    assert!(ours.is_empty(), "groups left: {ours:?}");
}

/// `-D -u json` on the OS interface: the `mbm` member (ours) validates, with ABMC on turin,
/// BMEC on genoa, SNC on sapphire-rapids-snc2, and is absent on broadwell-ep.
#[test]
fn os_capabilities_carry_mbm_details_where_there_are_some() {
    let doc = one_document(
        &Sim::new("turin").pqos(&["-I", "-u", "json", "-D"]).ok(),
        "capabilities",
    );
    let m = &doc["mbm"];
    assert_eq!(m["counter_assignment"]["mode"], "mbm_event", "{m}");
    assert_eq!(m["counter_assignment"]["counters"][0]["count"], 32, "{m}");
    assert_eq!(m["event_configs"][1]["source"], "event_filter", "{m}");
    assert_eq!(m["event_configs"][1]["domains"][0]["bits"], "0x15", "{m}");
    let doc = one_document(
        &Sim::new("genoa").pqos(&["-I", "-u", "json", "-d"]).ok(),
        "capabilities",
    );
    assert_eq!(doc["mbm"]["event_configs"][0]["source"], "bmec", "{doc}");
    assert!(doc["mbm"]["counter_assignment"].is_null(), "{doc}");
    let doc = one_document(
        &Sim::new("sapphire-rapids-snc2")
            .pqos(&["-I", "-u", "json", "-D"])
            .ok(),
        "capabilities",
    );
    assert_eq!(doc["mbm"]["snc_nodes_per_l3"], 2, "{doc}");
    let doc = one_document(
        &Sim::new("broadwell-ep")
            .pqos(&["-I", "-u", "json", "-D"])
            .ok(),
        "capabilities",
    );
    assert!(doc.get("mbm").is_none(), "{doc}");
}

/// `--mon-uncore -u json`: one row per socket with `socket` instead of `core` and the four
/// PCIe counts, valid against the monitoring schema.
#[test]
fn uncore_rows_are_schema_valid_json_with_socket_and_pcie_counts() {
    let run = Sim::new("skylake-sp")
        .monitor(&["-u", "json", "--mon-uncore", "-t", "1"])
        .ok();
    let rows = json_lines(&run);
    let last: Vec<&Value> = rows.iter().rev().take(2).collect();
    for (row, socket) in last.iter().rev().zip(["0", "1"]) {
        assert_eq!(row["socket"], socket, "{row}");
        assert!(row.get("core").is_none(), "{row}");
        assert!(row["llc_references_pcie_write"].as_u64() > Some(0), "{row}");
    }
    let mon = schema("monitoring");
    assert!(
        !mon.is_valid(&serde_json::json!({"time": "2024-09-23T10:00:00+02:00", "interval_s": 1.0}))
    );
}

#[test]
fn mmio_region_mba_and_region_bandwidth_validate_and_carry_the_values() {
    let m = Sim::new("xeon-rdt13");
    let s = one_document(
        &m.pqos(&["--iface=mmio", "-s", "-u", "json"]).ok(),
        "configuration",
    );
    assert_eq!(s["interface"], "mmio");
    let domains = s["region_mba"].as_array().expect("region_mba on MMIO");
    assert!(domains.len() >= 2, "{s:#}");
    let id = domains[0]["domain_id"].as_u64().expect("domain_id");
    m.pqos(&[
        "--iface=mmio",
        &format!("--alloc-domain-id={id}"),
        "--alloc-mem-regions=1",
        "--alloc-max-bw",
        "-e",
        "mba:1=0x7f",
    ])
    .ok();
    let s = one_document(
        &m.pqos(&["--iface=mmio", "-s", "-u", "json"]).ok(),
        "configuration",
    );
    let region = |d: usize, class: usize, region: usize| {
        s["region_mba"][d]["classes"][class]["regions"][region].clone()
    };
    assert_eq!(
        region(0, 1, 1),
        serde_json::json!({"region": 1, "opt": 511, "min": 0, "max": 127})
    );
    assert_eq!(region(0, 1, 0)["max"], 511);
    assert_eq!(region(1, 1, 1)["max"], 511);
    // elsewhere: null
    let msr = one_document(
        &m.pqos(&["--iface=msr", "-s", "-u", "json"]).ok(),
        "configuration",
    );
    assert!(msr["region_mba"].is_null());

    // -m: mbm_local_regions per row, the workload's 70/30 split
    let rows = json_lines(
        &m.monitor(&["--iface=mmio", "-m", "all:2-10", "-t", "3", "-u", "json"])
            .ok(),
    );
    let last = rows.last().expect("a row");
    let regions = last["mbm_local_regions"].as_array().expect("regions");
    assert_eq!(
        regions
            .iter()
            .map(|r| r["region"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1]
    );
    let v: Vec<f64> = regions
        .iter()
        .map(|r| r["mib_per_s"].as_f64().expect("a value"))
        .collect();
    let share = v[0] / (v[0] + v[1]);
    assert!(v[0] > 10.0 && (share - 0.70).abs() < 0.02, "{v:?}");
    let one = json_lines(
        &m.monitor(&[
            "--iface=mmio",
            "--mon-mem-regions=1",
            "-m",
            "all:2-10",
            "-t",
            "1",
            "-u",
            "json",
        ])
        .ok(),
    );
    assert_eq!(
        one[0]["mbm_local_regions"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(one[0]["mbm_local_regions"][0]["region"], 1);
}

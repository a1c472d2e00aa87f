//! Tests of the public entry points: parsing (both formats), every parse-time rule, loading,
//! and the platform checks.

use std::path::Path;

use super::*;
use rdt_core::fake::fixtures;
use rdt_core::{
    BackendExt, Capabilities, CatCaps, Feature, Interface, MbaCaps, MbaResource, Vendor,
};
use rdt_host::transaction::ApplyPlan;

/// The example of the module's documentation, verbatim.
const EXAMPLE: &str = r#"[[class]]
name = "pipeline"
l3 = { ways = 11 }            # or mask = "0xffe00", or percent = 55; optional per-domain table
mba = { percent = 100 }
cpus = "2-7"

[[class]]
name = "noisy"
l3 = { mask = "0x3" }
mba = { percent = 20 }
cpus = "8-10"
tasks = [1234]                # or processes = ["stress-ng"], all threads
"#;

fn toml(text: &str) -> Result<Config, ConfigError> {
    Config::parse_toml(text, Path::new("cfg.toml"))
}

fn json(text: &str) -> Result<Config, ConfigError> {
    Config::parse_json(text, Path::new("cfg.json"))
}

/// The error of `text`, as (line, key, whole display).
fn toml_err(text: &str) -> (Option<usize>, Option<String>, String) {
    let e = toml(text).expect_err("the text should be refused");
    assert_eq!(e.file(), Path::new("cfg.toml"));
    assert!(!e.to_string().contains('\n'), "{e}");
    (e.line(), e.key().map(str::to_owned), e.to_string())
}

/// Asserts that `text` is refused at `line` and `key`, with a message containing `needle`.
#[track_caller]
fn assert_refused(text: &str, line: usize, key: &str, needle: &str) {
    let (l, k, shown) = toml_err(text);
    assert_eq!(l, Some(line), "{shown}");
    assert_eq!(k.as_deref(), Some(key), "{shown}");
    assert!(shown.starts_with(&format!("cfg.toml:{line}: ")), "{shown}");
    assert!(shown.contains(&format!("{key}: ")), "{shown}");
    assert!(shown.contains(needle), "`{needle}` not in: {shown}");
}

fn class(name: &str, body: &str) -> String {
    format!("[[class]]\nname = \"{name}\"\n{body}")
}

// ---- parsing ----

#[test]
fn the_example_parses_to_the_expected_classes_and_lines() {
    // act
    let cfg = toml(EXAMPLE).unwrap();
    // assert
    assert_eq!(cfg.file, Path::new("cfg.toml"));
    assert_eq!(cfg.classes.len(), 2);
    let p = &cfg.classes[0];
    assert_eq!(p.name, "pipeline");
    assert_eq!(p.cos, None);
    assert_eq!(
        p.l3,
        Some(CacheSpec {
            size: CacheSize::Ways(11),
            shared: false,
            domains: BTreeMap::new(),
        })
    );
    assert_eq!(p.l2, None);
    assert_eq!(
        p.mba,
        Some(MbaSpec {
            limit: MbaLimit::Percent(100),
            domains: BTreeMap::new(),
        })
    );
    assert_eq!(p.cpus, "2-7".parse().unwrap());
    assert!(p.tasks.is_empty() && p.processes.is_empty());
    assert_eq!(p.lines.class(), 1);
    let lines: Vec<(&str, usize)> = p.lines.iter().collect();
    assert_eq!(
        lines,
        [
            ("cpus", 5),
            ("l3", 3),
            ("l3.ways", 3),
            ("mba", 4),
            ("mba.percent", 4),
            ("name", 2)
        ]
    );

    let n = &cfg.classes[1];
    assert_eq!(n.name, "noisy");
    assert_eq!(
        n.l3.as_ref().map(|c| c.size),
        Some(CacheSize::Mask(CacheBitmask::new(0x3).unwrap()))
    );
    assert_eq!(
        n.mba_limit(CacheDomain::new(0)),
        Some(MbaLimit::Percent(20))
    );
    assert_eq!(n.cpus.to_string(), "8-10");
    assert_eq!(n.tasks, [TaskId::new(1234)]);
    assert!(n.processes.is_empty());
    assert_eq!(n.lines.class(), 7);
    assert_eq!(n.lines.get("l3.mask"), Some(9));
    assert_eq!(n.lines.get("tasks[0]"), Some(12));
    assert_eq!(cfg.class("noisy"), Some(n));
}

#[test]
fn the_example_in_json_gives_the_same_classes() {
    let text = r#"{
  "class": [
    {
      "name": "pipeline",
      "l3": { "ways": 11 },
      "mba": { "percent": 100 },
      "cpus": "2-7"
    },
    {
      "name": "noisy",
      "l3": { "mask": "0x3" },
      "mba": { "percent": 20 },
      "cpus": "8-10",
      "tasks": [1234]
    }
  ]
}"#;
    let from_json = json(text).unwrap();
    let from_toml = toml(EXAMPLE).unwrap();
    let strip = |c: &Config| {
        c.classes
            .iter()
            .map(|c| ClassSpec {
                lines: KeyLines::default(),
                ..c.clone()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&from_json), strip(&from_toml));
    assert_eq!(from_json.classes[1].lines.class(), 9);
    assert_eq!(from_json.classes[1].lines.get("tasks"), Some(14));
}

#[test]
fn every_key_and_form_parses() {
    let text = r#"
[[class]]
name = "all"
cos = 3
cpus = ""
processes = ["stress-ng", "fio"]

[class.l3]
percent = 55
shared = true
domains = { "0" = { mask = 0xff }, "1" = { ways = 4 } }

[class.l2]
mask = "0X0f"

[class.mba]
mbps = 3000
domains."1" = { mbps = 1500 }
"#;
    let cfg = toml(text).unwrap();
    let c = &cfg.classes[0];
    assert_eq!(c.cos, Some(ClassId::new(3)));
    assert!(c.cpus.is_empty());
    assert_eq!(c.processes, ["stress-ng", "fio"]);
    let l3 = c.l3.as_ref().unwrap();
    assert_eq!((l3.size, l3.shared), (CacheSize::Percent(55), true));
    let (d0, d1, d2) = (
        CacheDomain::new(0),
        CacheDomain::new(1),
        CacheDomain::new(2),
    );
    assert_eq!(
        c.cache_size(CatResource::L3, d0),
        Some(&CacheSize::Mask(CacheBitmask::new(0xff).unwrap()))
    );
    assert_eq!(c.cache_size(CatResource::L3, d1), Some(&CacheSize::Ways(4)));
    assert_eq!(
        c.cache_size(CatResource::L3, d2),
        Some(&CacheSize::Percent(55))
    );
    assert_eq!(
        c.cache_size(CatResource::L2, d2),
        Some(&CacheSize::Mask(CacheBitmask::new(0xf).unwrap()))
    );
    assert_eq!(c.mba_limit(d0), Some(MbaLimit::MibPerSec(3000)));
    assert_eq!(c.mba_limit(d1), Some(MbaLimit::MibPerSec(1500)));
    assert_eq!(c.lines.get("l3.percent"), Some(9));
    assert_eq!(c.lines.get("l3.domains.1.ways"), Some(11));
    assert_eq!(c.lines.get("mba.domains.1.mbps"), Some(18));
    assert_eq!(c.lines.line("mba.domains.7.mbps"), 18); // nearest recorded: `mba.domains`
    assert_eq!(c.lines.line("mba.shared"), 16); // nearest recorded: `mba`
}

#[test]
fn an_empty_file_has_no_classes() {
    assert!(toml("# nothing\n").unwrap().classes.is_empty());
    assert!(json("{}").unwrap().classes.is_empty());
}

// ---- parse-time rules: each names the file, line and key ----

#[test]
fn unknown_keys_are_refused_by_name() {
    assert_refused(
        "top = 1\n[[class]]\nname = \"a\"\n",
        1,
        "top",
        "unknown top-level key \"top\"",
    );
    assert_refused(
        &class("a", "cpu = \"1\"\n"),
        3,
        "cpu",
        "unknown key \"cpu\": a class takes `name`, `cos`",
    );
    assert_refused(
        &class("a", "\nl3 = { ways = 2, exclusive = true }\n"),
        4,
        "l3.exclusive",
        "class \"a\": l3.exclusive: unknown key \"exclusive\": `l3` takes `ways`, `mask`, `percent`, `shared` or `domains`",
    );
    assert_refused(
        &class(
            "a",
            "l2 = { ways = 2, domains = { \"0\" = { ways = 1, shared = true } } }\n",
        ),
        3,
        "l2.domains.0.shared",
        "unknown key \"shared\"",
    );
    assert_refused(
        &class("a", "mba = { percent = 50, ways = 2 }\n"),
        3,
        "mba.ways",
        "`mba` takes `percent`, `mbps`, `units` or `domains`",
    );
}

#[test]
fn wrong_types_name_the_value_found() {
    assert_refused(
        &class("a", "l3 = { ways = \"11\" }\n"),
        3,
        "l3.ways",
        "expected an integer, found string \"11\"",
    );
    assert_refused(
        &class("a", "cpus = [1, 2]\n"),
        3,
        "cpus",
        "expected a CPU list string such as \"2-7,9\", found an array",
    );
    assert_refused(
        &class("a", "l3 = 4\n"),
        3,
        "l3",
        "expected a table, found integer 4",
    );
    assert_refused(
        &class("a", "l3 = { ways = 2, shared = 1 }\n"),
        3,
        "l3.shared",
        "expected true or false, found integer 1",
    );
    assert_refused(
        &class("a", "tasks = [12, 2.5]\n"),
        3,
        "tasks[1]",
        "expected an integer, found float 2.5",
    );
    assert_refused(
        &class("a", "processes = [7]\n"),
        3,
        "processes[0]",
        "found integer 7",
    );
    assert_refused(
        "[[class]]\nname = 5\n",
        2,
        "name",
        "expected a string, found integer 5",
    );
    let (line, key, shown) = toml_err("class = { name = \"a\" }\n");
    assert_eq!((line, key.as_deref()), (Some(1), Some("class")));
    assert!(
        shown.contains("expected an array of tables ([[class]])"),
        "{shown}"
    );
}

#[test]
fn a_class_without_a_name_is_refused_by_position() {
    let (line, key, shown) = toml_err(&format!("{}\n[[class]]\ncpus = \"1\"\n", class("a", "")));
    assert_eq!((line, key.as_deref()), (Some(4), Some("name")));
    assert_eq!(
        shown,
        "cfg.toml:4: class #2: name: missing: every class needs a name"
    );
}

#[test]
fn duplicate_names_are_refused_naming_the_first() {
    let text = format!("{}\n{}", class("a", ""), class("a", ""));
    assert_refused(
        &text,
        5,
        "name",
        "name \"a\" is already the name of class #1 (line 2)",
    );
}

#[test]
fn name_rules() {
    let long = "x".repeat(65);
    let cases = [
        ("", "the name is empty"),
        (long.as_str(), "is 65 bytes long, the limit is 64"),
        ("a/b", "contains `/`"),
        (".", "not a usable directory name"),
        ("..", "not a usable directory name"),
        ("a b", "whitespace or a control character"),
        ("a\\tb", "whitespace or a control character"),
        ("a\\u0007", "whitespace or a control character"),
        ("info", "reserved by resctrl"),
        ("mon_groups", "reserved by resctrl"),
        ("mon_data", "reserved by resctrl"),
        ("mon_L3_00", "reserved by resctrl"),
        ("COS1", "COS<n> names are pqos's own classes"),
        ("cos15", "COS<n> names are pqos's own classes"),
        ("Cos007", "COS<n> names are pqos's own classes"),
    ];
    for (name, needle) in cases {
        let text = format!("\n[[class]]\nname = \"{name}\"\n");
        let (line, key, shown) = toml_err(&text);
        assert_eq!((line, key.as_deref()), (Some(3), Some("name")), "{shown}");
        assert!(shown.starts_with("cfg.toml:3: class #1: name: "), "{shown}");
        assert!(shown.contains(needle), "{name:?}: {shown}");
    }
    // Near misses are fine.
    for name in [
        "x".repeat(64).as_str(),
        "cos",
        "COSx",
        "cos1a",
        "information",
        "mon_L2_0",
        "é",
    ] {
        toml(&class(name, "")).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn exactly_one_size_is_required() {
    assert_refused(
        &class("a", "l3 = { ways = 2, mask = \"0x3\" }\n"),
        3,
        "l3.mask",
        "`ways` and `mask` both given: give exactly one of `ways`, `mask` or `percent`",
    );
    assert_refused(
        &class("a", "\n[class.l2]\nshared = true\n"),
        4,
        "l2",
        "no size given: give exactly one of `ways`, `mask` or `percent`",
    );
    assert_refused(
        &class("a", "l3 = { ways = 2, domains = { \"1\" = { } } }\n"),
        3,
        "l3.domains.1",
        "no size given",
    );
    assert_refused(
        &class("a", "mba = { percent = 50, mbps = 100 }\n"),
        3,
        "mba.mbps",
        "`percent` and `mbps` both given",
    );
    assert_refused(
        &class("a", "mba = { }\n"),
        3,
        "mba",
        "no limit given: give exactly one of `percent`, `mbps` or `units`",
    );
}

#[test]
fn percentages_are_1_to_100() {
    assert_refused(
        &class("a", "l3 = { percent = 0 }\n"),
        3,
        "l3.percent",
        "percent 0 is out of range: a percentage is 1 to 100",
    );
    assert_refused(
        &class("a", "l2 = { percent = 101 }\n"),
        3,
        "l2.percent",
        "percent 101 is out of range",
    );
    assert_refused(
        &class("a", "mba = { percent = -5 }\n"),
        3,
        "mba.percent",
        "percent -5 is out of range",
    );
    toml(&class(
        "a",
        "l3 = { percent = 100 }\nmba = { percent = 1 }\n",
    ))
    .unwrap();
}

#[test]
fn zero_masks_and_zero_ways_are_refused() {
    assert_refused(
        &class("a", "l3 = { mask = \"0x0\" }\n"),
        3,
        "l3.mask",
        "mask 0x0 is zero: a class needs at least one cache way",
    );
    assert_refused(&class("a", "l3 = { mask = 0 }\n"), 3, "l3.mask", "is zero");
    assert_refused(
        &class("a", "l3 = { ways = 0 }\n"),
        3,
        "l3.ways",
        "0 ways: a class needs at least one cache way",
    );
    assert_refused(
        &class(
            "a",
            "l3 = { ways = 2, domains = { \"3\" = { ways = 0 } } }\n",
        ),
        3,
        "l3.domains.3.ways",
        "0 ways",
    );
}

#[test]
fn masks_and_ways_out_of_range_or_ambiguous_are_refused() {
    assert_refused(
        &class("a", "l3 = { ways = 65 }\n"),
        3,
        "l3.ways",
        "65 ways: a capacity bitmask has at most 64 ways",
    );
    assert_refused(
        &class("a", "l3 = { mask = \"ffe00\" }\n"),
        3,
        "l3.mask",
        "mask \"ffe00\" is ambiguous: write a mask as hexadecimal with 0x (\"0xffe00\" if hexadecimal)",
    );
    assert_refused(
        &class("a", "l3 = { mask = \"0xzz\" }\n"),
        3,
        "l3.mask",
        "mask \"0xzz\" is not a hexadecimal number",
    );
    assert_refused(
        &class("a", "l3 = { mask = \"0x1ffffffffffffffff\" }\n"),
        3,
        "l3.mask",
        "more than 64 bits",
    );
    assert_refused(
        &class("a", "l3 = { mask = -1 }\n"),
        3,
        "l3.mask",
        "is negative",
    );
}

#[test]
fn domain_keys_are_cache_ids_given_once() {
    assert_refused(
        &class(
            "a",
            "l3 = { ways = 2, domains = { \"x\" = { ways = 1 } } }\n",
        ),
        3,
        "l3.domains.x",
        "domain \"x\" is not a cache domain id",
    );
    assert_refused(
        &class(
            "a",
            "l3 = { ways = 2, domains = { \"1\" = { ways = 1 }, \"0x1\" = { ways = 2 } } }\n",
        ),
        3,
        "l3.domains.1",
        "domain 1 given twice",
    );
}

#[test]
fn mba_units_do_not_mix() {
    assert_refused(
        &class(
            "a",
            "mba = { percent = 50, domains = { \"1\" = { mbps = 100 } } }\n",
        ),
        3,
        "mba.domains.1.mbps",
        "mbps 100 mixes units with the class's percent 50",
    );
    let text = format!(
        "{}\n{}",
        class("a", "mba = { percent = 50 }\n"),
        class("b", "mba = { mbps = 800 }\n")
    );
    assert_refused(
        &text,
        7,
        "mba.mbps",
        "mbps 800 mixes units with class \"a\"'s percent (line 3)",
    );
    assert_refused(&class("a", "mba = { mbps = 0 }\n"), 3, "mba.mbps", "mbps 0");
}

#[test]
fn a_cpu_in_two_classes_is_refused() {
    let text = format!(
        "{}\n{}",
        class("a", "cpus = \"0-9\"\n"),
        class("b", "\ncpus = \"8-12\"\n")
    );
    assert_refused(
        &text,
        8,
        "cpus",
        "CPUs 8-9 are also in class \"a\" (line 3): a CPU is in one class only",
    );
    assert_refused(
        &class("a", "cpus = \"2-x\"\n"),
        3,
        "cpus",
        "`2-x` in CPU list `2-x`",
    );
}

#[test]
fn a_task_in_two_classes_is_refused() {
    let text = format!(
        "{}\n{}",
        class("a", "tasks = [10, 11]\n"),
        class("b", "tasks = [\n  12,\n  11,\n]\n")
    );
    assert_refused(
        &text,
        9,
        "tasks[1]",
        "task 11 is also in class \"a\" (line 3): a task is in one class only",
    );
    assert_refused(
        &class("a", "tasks = [5, 5]\n"),
        3,
        "tasks[1]",
        "task 5 is listed twice",
    );
    assert_refused(
        &class("a", "tasks = [0]\n"),
        3,
        "tasks[0]",
        "task id 0 is out of range: Linux task ids are 1 to 4194304",
    );
    assert_refused(
        &class("a", "tasks = [4194305]\n"),
        3,
        "tasks[0]",
        "task id 4194305 is out of range",
    );
}

#[test]
fn process_names_are_checked_and_belong_to_one_class() {
    let text = format!(
        "{}\n{}",
        class("a", "processes = [\"fio\"]\n"),
        class("b", "processes = [\"x\", \"fio\"]\n")
    );
    assert_refused(
        &text,
        7,
        "processes[1]",
        "process \"fio\" is also in class \"a\"",
    );
    assert_refused(
        &class("a", "processes = [\"\"]\n"),
        3,
        "processes[0]",
        "the process name is empty",
    );
    assert_refused(
        &class("a", "processes = [\"a-very-long-name\"]\n"),
        3,
        "processes[0]",
        "is 16 bytes long: the kernel keeps 15 bytes",
    );
}

#[test]
fn duplicate_cos_values_are_refused() {
    let text = format!("{}\n{}", class("a", "cos = 2\n"), class("b", "cos = 2\n"));
    assert_refused(
        &text,
        7,
        "cos",
        "cos 2 is also the cos of class \"a\" (line 3)",
    );
    assert_refused(
        &class("a", "cos = -1\n"),
        3,
        "cos",
        "cos -1 is out of range",
    );
}

#[test]
fn toml_syntax_errors_have_a_line_and_no_class() {
    let (line, key, shown) = toml_err("[[class]]\nname = \"a\"\nl3 = { ways = 2\n");
    assert_eq!((line, key), (Some(3), None));
    assert!(shown.starts_with("cfg.toml:3: TOML syntax: "), "{shown}");
    let e = toml("[[class]]\nname = \"a\"\nname = \"b\"\n").unwrap_err();
    assert_eq!((e.kind(), e.line()), (ConfigErrorKind::Syntax, Some(3)));
}

#[test]
fn json_errors_have_lines() {
    let e = json("{\n  \"class\": [\n    { \"name\": \"a\", }\n  ]\n}").unwrap_err();
    assert_eq!((e.kind(), e.line()), (ConfigErrorKind::Syntax, Some(3)));
    assert!(
        e.to_string().starts_with("cfg.json:3: JSON syntax: "),
        "{e}"
    );
    let e = json("{\"class\": [\n {\"name\": \"a\",\n  \"l3\": {\"ways\": 0}}]}").unwrap_err();
    assert_eq!(
        e.to_string(),
        "cfg.json:3: class \"a\": l3.ways: 0 ways: a class needs at least one cache way"
    );
    let e = json("{\"class\": [\n {\"name\": \"a\",\n  \"name\": \"b\"}]}").unwrap_err();
    assert_eq!((e.line(), e.key()), (Some(3), Some("name")));
    assert!(
        e.message().contains("key given twice (first on line 2)"),
        "{e}"
    );
    let e =
        json("{\"class\": [{\"name\": \"a\", \"l3\": {\"ways\": 2}}], \"x\": null}").unwrap_err();
    assert_eq!(e.key(), Some("x"));
    let e = json("[1]").unwrap_err();
    assert!(
        e.message()
            .contains("expected an object at the top level, found an array"),
        "{e}"
    );
}

// ---- load ----

#[test]
fn load_chooses_the_format_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("cfg.conf");
    std::fs::write(&t, EXAMPLE).unwrap();
    assert_eq!(Config::load(&t).unwrap().classes.len(), 2);
    let j = dir.path().join("cfg.JSON");
    std::fs::write(&j, r#"{"class": [{"name": "a"}]}"#).unwrap();
    let cfg = Config::load(&j).unwrap();
    assert_eq!((cfg.classes[0].name.as_str(), cfg.file), ("a", j.clone()));
    std::fs::write(&j, EXAMPLE).unwrap();
    assert_eq!(
        Config::load(&j).unwrap_err().kind(),
        ConfigErrorKind::Syntax
    );
}

/// `Config::load` takes a path in any form (`impl AsRef<Path>`): a `&str` relative to the
/// working directory, a `String`, a `PathBuf`, a `&Path`.
#[test]
fn load_takes_any_path_form_and_names_a_missing_relative_path() {
    let e = Config::load("no-such-dir/classes.toml").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Io);
    assert_eq!(
        e.to_string(),
        "no-such-dir/classes.toml: cannot open the file"
    );
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("cfg.toml");
    std::fs::write(&t, EXAMPLE).unwrap();
    assert_eq!(Config::load(t.clone()).unwrap().classes.len(), 2);
    assert_eq!(
        Config::load(t.display().to_string()).unwrap().classes.len(),
        2
    );
    assert!(matches!(
        ConfigFile::load(t.as_path()),
        Ok(ConfigFile::Classes(_))
    ));
    let e = goresctrl::GoresctrlConfig::load("no-such-dir/rdt.yaml").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Io);
    assert!(Config::parse_toml("[[class]]\nname = \"a\"\n", "inline.toml").is_ok());
}

#[test]
fn hostile_files_fail_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let fifo = dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert_eq!(
        Config::load(&fifo).unwrap_err().kind(),
        ConfigErrorKind::NotRegularFile
    );
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b' '; 2 << 20]).unwrap();
    assert_eq!(
        Config::load(&big).unwrap_err().kind(),
        ConfigErrorKind::TooLarge
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{\"class\": [\xc3\x28]}").unwrap();
    let e = Config::load(&bad).unwrap_err();
    assert_eq!((e.kind(), e.line()), (ConfigErrorKind::NotUtf8, Some(1)));
    // Deep nesting and huge values: errors, no stack overflow, one short line.
    let deep = dir.path().join("deep.toml");
    std::fs::write(&deep, format!("x = {}", "[".repeat(500_000))).unwrap();
    assert_eq!(
        Config::load(&deep).unwrap_err().kind(),
        ConfigErrorKind::Syntax
    );
    let deep = dir.path().join("deep.json");
    let n = 300_000;
    std::fs::write(
        &deep,
        format!("{{\"class\": [{}{}]}}", "[".repeat(n), "]".repeat(n)),
    )
    .unwrap();
    assert_eq!(
        Config::load(&deep).unwrap_err().kind(),
        ConfigErrorKind::Invalid
    );
    let long = dir.path().join("long.toml");
    std::fs::write(
        &long,
        format!(
            "[[class]]\nname = \"a\"\ncpus = \"{}x\"\n",
            "1,".repeat(300_000)
        ),
    )
    .unwrap();
    let e = Config::load(&long).unwrap_err();
    assert!(e.to_string().len() < 600, "{}", e.to_string().len());
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

// ---- check ----

/// Intel, 16 CPUs, two L3 domains of 8 CPUs (20-way CBM, 16 classes), L2 per pair of CPUs
/// (8-way CBM, 8 classes), MBA with 8 classes in 10 % steps.
fn platform() -> (Capabilities, Topology) {
    let mut caps = Capabilities::none(Vendor::Intel);
    caps.l3_cat = Feature::Supported(fixtures::cat(20, 16));
    caps.l2_cat = Feature::Supported(fixtures::cat(8, 8));
    caps.mba = Feature::Supported(fixtures::intel_mba(8));
    (
        caps,
        fixtures::topology((0..16).map(|c| (c, c / 8, c / 2, c / 8))),
    )
}

fn check(
    text: &str,
    caps: &Capabilities,
    topo: &Topology,
) -> Result<Vec<ConfigWarning>, ConfigError> {
    toml(text).unwrap().check(caps, topo)
}

#[track_caller]
fn assert_check_fails(text: &str, caps: &Capabilities, line: usize, key: &str, expected: &str) {
    let (_, topo) = platform();
    let e = check(text, caps, &topo).expect_err("the check should fail");
    assert_eq!((e.line(), e.key()), (Some(line), Some(key)), "{e}");
    assert_eq!(e.to_string(), expected);
}

#[test]
fn the_example_passes_the_check() {
    let (caps, topo) = platform();
    assert_eq!(check(EXAMPLE, &caps, &topo).unwrap(), []);
}

#[test]
fn ways_beyond_the_cbm_or_below_its_minimum_are_refused() {
    let (mut caps, _) = platform();
    let text = "[[class]]\nname = \"pipeline\"\ncpus = \"0\"\nl3 = { ways = 30 }\n";
    assert_check_fails(
        text,
        &caps,
        4,
        "l3.ways",
        "cfg.toml:4: class \"pipeline\": l3.ways: 30 ways, but the L3 CBM has 20",
    );
    caps.l2_cat = Feature::Supported(CatCaps {
        min_cbm_bits: 2,
        ..fixtures::cat(8, 8)
    });
    assert_check_fails(
        &class(
            "a",
            "cpus = \"0\"\nl2 = { ways = 4, domains = { \"3\" = { ways = 1 } } }\n",
        ),
        &caps,
        4,
        "l2.domains.3.ways",
        "cfg.toml:4: class \"a\": l2.domains.3.ways: 1 ways, but L2 CAT needs at least 2 (min_cbm_bits)",
    );
}

#[test]
fn masks_the_platform_refuses_carry_its_reason() {
    let (caps, _) = platform();
    assert_check_fails(
        &class("a", "cpus = \"0\"\nl3 = { mask = \"0x5\" }\n"),
        &caps,
        4,
        "l3.mask",
        "cfg.toml:4: class \"a\": l3.mask: mask 0x5 is not contiguous and this CPU's L3 CAT requires contiguous masks",
    );
    assert_check_fails(
        &class("a", "cpus = \"0\"\nl3 = { mask = \"0x100000\" }\n"),
        &caps,
        4,
        "l3.mask",
        "cfg.toml:4: class \"a\": l3.mask: mask 0x100000 is wider than the 20-bit L3 capacity bitmask (highest allowed 0xfffff)",
    );
}

#[test]
fn missing_cache_levels_and_mba_are_refused() {
    let (mut caps, _) = platform();
    caps.l2_cat = Feature::Unsupported;
    caps.mba = Feature::DetailsUnknown;
    assert_check_fails(
        &class("a", "cpus = \"0\"\n\nl2 = { ways = 2 }\n"),
        &caps,
        5,
        "l2",
        "cfg.toml:5: class \"a\": l2: this platform has no L2 CAT",
    );
    assert_check_fails(
        &class("a", "cpus = \"0\"\nmba = { percent = 50 }\n"),
        &caps,
        4,
        "mba",
        "cfg.toml:4: class \"a\": mba: MBA is enumerated but its parameters are unknown (a partial CPUID dump?)",
    );
}

#[test]
fn domains_that_do_not_exist_are_refused_listing_those_that_do() {
    let (caps, _) = platform();
    assert_check_fails(
        &class(
            "a",
            "cpus = \"0\"\nl3 = { ways = 2, domains = { \"5\" = { ways = 1 } } }\n",
        ),
        &caps,
        4,
        "l3.domains.5",
        "cfg.toml:4: class \"a\": l3.domains.5: L3 domain 5 does not exist (L3 domains: 0, 1)",
    );
    assert_check_fails(
        &class(
            "a",
            "cpus = \"0\"\nmba = { percent = 50, domains = { \"2\" = { percent = 10 } } }\n",
        ),
        &caps,
        4,
        "mba.domains.2",
        "cfg.toml:4: class \"a\": mba.domains.2: MBA domain 2 does not exist (MBA domains are L3 domains; L3 domains: 0, 1)",
    );
}

#[test]
fn cpus_that_do_not_exist_are_refused() {
    let (caps, _) = platform();
    assert_check_fails(
        &class("a", "cpus = \"14-17\"\n"),
        &caps,
        3,
        "cpus",
        "cfg.toml:3: class \"a\": cpus: CPUs 16-17 do not exist (online CPUs: 0-15)",
    );
}

#[test]
fn cos_beyond_the_classes_is_refused() {
    let (caps, _) = platform();
    assert_check_fails(
        &class("a", "cpus = \"0\"\ncos = 16\n"),
        &caps,
        4,
        "cos",
        "cfg.toml:4: class \"a\": cos: COS16 is out of range: COS association has 16 classes (COS0-COS15)",
    );
    // L2 has 8 classes: COS 8 is fine for L3, not for L2.
    assert_check_fails(
        &class("a", "cpus = \"0\"\ncos = 8\nl2 = { ways = 1 }\n"),
        &caps,
        4,
        "cos",
        "cfg.toml:4: class \"a\": cos: COS8 is out of range: L2 CAT has 8 classes (COS0-COS7)",
    );
}

#[test]
fn mba_limits_follow_the_platform_unit() {
    let (caps, topo) = fixtures::amd_2ccx();
    let e = check(
        &class("a", "cpus = \"0\"\nmba = { percent = 50 }\n"),
        &caps,
        &topo,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cfg.toml:4: class \"a\": mba.percent: percent 50: AMD MBA limits are bandwidth units of 1/8 GB/s, not percentages"
    );
    let (mut caps, topo) = platform();
    let w = check(
        &class("a", "cpus = \"0\"\nmba = { mbps = 900 }\n"),
        &caps,
        &topo,
    )
    .unwrap();
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].line, w[0].key.as_deref()),
        (Some(4), Some("mba.mbps"))
    );
    assert!(
        w[0].to_string()
            .contains("needs resctrl mounted with mba_MBps"),
        "{}",
        w[0]
    );
    caps.mba = Feature::Supported(MbaCaps {
        ctrl_enabled: true,
        ..fixtures::intel_mba(8)
    });
    assert_eq!(
        check(
            &class("a", "cpus = \"0\"\nmba = { mbps = 900 }\n"),
            &caps,
            &topo
        )
        .unwrap(),
        []
    );
    let e = check(
        &class("a", "cpus = \"0\"\nmba = { percent = 50 }\n"),
        &caps,
        &topo,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("resctrl is mounted with mba_MBps"),
        "{e}"
    );
}

#[test]
fn warnings_for_empty_classes_and_rounded_mba() {
    let (caps, topo) = platform();
    let text = class(
        "idle",
        "mba = { percent = 15, domains = { \"1\" = { percent = 74 } } }\n",
    );
    let w = check(&text, &caps, &topo).unwrap();
    let shown: Vec<String> = w.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "cfg.toml:2: class \"idle\": name: the class has no cpus, tasks or processes: nothing will run in it"
        ]
    );
    // normalised as each interface stores it, one warning per value that changes
    let cfg = toml(&text).unwrap();
    for (interface, (d0, d1), how) in [
        (
            Interface::Msr,
            (20, 70),
            "rounded half up, as pqos writes it",
        ),
        (
            Interface::Os,
            (20, 80),
            "rounded up, as the kernel stores it",
        ),
    ] {
        let (normal, w) = cfg.normalized(&caps, interface);
        let mba = normal.classes[0].mba.as_ref().unwrap();
        assert_eq!(mba.limit, MbaLimit::Percent(d0), "{interface:?}");
        assert_eq!(
            mba.limit_in(CacheDomain::new(1)),
            MbaLimit::Percent(d1),
            "{interface:?}"
        );
        let shown: Vec<String> = w.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                format!(
                    "cfg.toml:3: class \"idle\": mba.percent: percent 15 is applied as percent {d0}: the MBA granularity is 10% ({how})"
                ),
                format!(
                    "cfg.toml:3: class \"idle\": mba.domains.1.percent: percent 74 is applied as percent {d1}: the MBA granularity is 10% ({how})"
                ),
            ]
        );
        // normalised values are what the hardware keeps: normalising again changes nothing
        let (again, w) = normal.normalized(&caps, interface);
        assert_eq!((again, w.len()), (normal, 0));
    }
}

#[test]
fn sizes_that_cannot_be_placed_are_refused_at_check_time() {
    let (caps, _) = platform();
    let text = format!(
        "{}\n{}",
        class("a", "cpus = \"0\"\nl3 = { ways = 11 }\n"),
        class(
            "b",
            "cpus = \"1\"\nl3 = { ways = 4, domains = { \"1\" = { ways = 10 } } }\n"
        )
    );
    let (_, topo) = platform();
    let e = check(&text, &caps, &topo).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Placement);
    assert_eq!(
        e.to_string(),
        "cfg.toml:9: class \"b\": l3.domains.1.ways: in L3 domain 1: wanted 10 contiguous L3 ways, but 9 are free (the largest free block has 9)"
    );
    let text = format!(
        "{}\n{}",
        class("a", "cpus = \"0\"\nl3 = { mask = \"0xf\" }\n"),
        class("b", "cpus = \"1\"\nl3 = { mask = \"0x3c\" }\n")
    );
    let e = check(&text, &caps, &topo).unwrap_err();
    assert_eq!((e.line(), e.key()), (Some(9), Some("l3.mask")));
    assert_eq!(
        e.message(),
        "in L3 domain 0: overlapping exclusive classes: L3 mask 0x3c shares ways 0xc with class \"a\"'s mask 0xf; mark one shared = true or change the masks (class \"a\" is on line 4)"
    );
}

#[test]
fn config_place_gives_each_class_its_mask_per_domain() {
    let cfg = toml(&format!(
        "{}\n{}\n{}",
        class("pipeline", "l3 = { ways = 11 }\n"),
        class(
            "batch",
            "l3 = { ways = 4, domains = { \"1\" = { ways = 2 } } }\n"
        ),
        class("mba-only", "mba = { percent = 10 }\n"),
    ))
    .unwrap();
    let cat = fixtures::cat(20, 16);
    let placed = |d| {
        cfg.place(CatResource::L3, &cat, CacheDomain::new(d), 0)
            .unwrap()
            .into_iter()
            .map(|(c, m)| (c.name.as_str(), m.bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(placed(0), [("pipeline", 0xffe00), ("batch", 0x1e0)]);
    assert_eq!(placed(1), [("pipeline", 0xffe00), ("batch", 0x180)]);
}

#[test]
fn large_files_parse_whole() {
    // Each under 1 MiB; how long they take is measured by `cargo bench --bench parsers`
    // (a test asserts no wall-clock time), the shape of the duplicate-key check by
    // node::tests (comparisons counted).
    let tasks: Vec<String> = (1..=150_000).map(|t| t.to_string()).collect();
    let text = class("many", &format!("tasks = [{}]\n", tasks.join(",")));
    assert_eq!(toml(&text).unwrap().classes[0].tasks.len(), 150_000);
    let procs: Vec<String> = (0..60_000).map(|p| format!("\"p{p}\"")).collect();
    let text = class("procs", &format!("processes = [{}]\n", procs.join(",")));
    assert_eq!(toml(&text).unwrap().classes[0].processes.len(), 60_000);
    let domains: Vec<String> = (0..50_000)
        .map(|d| format!("\"{d}\": {{\"ways\": 1}}"))
        .collect();
    let text = format!(
        "{{\"class\": [{{\"name\": \"d\", \"l3\": {{\"ways\": 2, \"domains\": {{{}}}}}}}]}}",
        domains.join(",")
    );
    assert_eq!(
        json(&text).unwrap().classes[0]
            .l3
            .as_ref()
            .unwrap()
            .domains
            .len(),
        50_000
    );
    let classes: Vec<String> = (0..8000)
        .map(|i| format!("[[class]]\nname = \"c{i}\"\ncpus = \"{i}\"\n"))
        .collect();
    assert_eq!(toml(&classes.join("\n")).unwrap().classes.len(), 8000);
}

/// AMD: `mba` and `smba` in 1/8 GB/s `units`, checked against each resource's width, and
/// applied to MBA and SMBA of every L3 domain (per-domain values where given).
#[test]
fn amd_units_set_mba_and_smba_per_domain() {
    let (mut caps, topo) = fixtures::amd_2ccx();
    caps.smba = Feature::Supported(fixtures::amd_mba(16));
    let text = class(
        "a",
        "cpus = \"0\"\nmba = { units = 256 }\nsmba = { units = 128, domains = { 1 = { units = 64 } } }\n",
    );
    assert_eq!(check(&text, &caps, &topo).unwrap(), []);
    let mut b = rdt_core::fake::FakeBackend::new(caps.clone(), topo.clone());
    let cfg = toml(&text).unwrap();
    let plan = cfg.plan(&mut b, &rdt_host::proc::ProcFs::host()).unwrap();
    let (_, cos) = plan.classes[0].clone();
    plan.plan.apply(&mut b).into_result().unwrap();
    let limit = |b: &mut rdt_core::fake::FakeBackend, r, d| {
        b.bandwidth_classes(r, CacheDomain::new(d)).unwrap()[cos.get() as usize].limit
    };
    assert_eq!(limit(&mut b, MbaResource::Mba, 0), MbaLimit::AmdUnits(256));
    assert_eq!(limit(&mut b, MbaResource::Mba, 1), MbaLimit::AmdUnits(256));
    assert_eq!(limit(&mut b, MbaResource::Smba, 0), MbaLimit::AmdUnits(128));
    assert_eq!(limit(&mut b, MbaResource::Smba, 1), MbaLimit::AmdUnits(64));
    // SMBA takes units only; a platform without SMBA refuses it; units beyond the width
    assert_refused(
        &class("a", "smba = { percent = 50 }\n"),
        3,
        "smba.percent",
        "percent 50: SMBA limits are AMD units of 1/8 GB/s",
    );
    let (no_smba, _) = fixtures::amd_2ccx();
    let e = check(
        &class("a", "cpus = \"0\"\nsmba = { units = 8 }\n"),
        &no_smba,
        &topo,
    )
    .unwrap_err();
    assert!(
        e.to_string().ends_with("smba: this platform has no SMBA"),
        "{e}"
    );
    let e = check(
        &class("a", "cpus = \"0\"\nmba = { units = 4096 }\n"),
        &caps,
        &topo,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cfg.toml:4: class \"a\": mba.units: units 4096"),
        "{e}"
    );
    // Intel takes no units
    let (intel, itopo) = platform();
    let e = check(
        &class("a", "cpus = \"0\"\nmba = { units = 8 }\n"),
        &intel,
        &itopo,
    )
    .unwrap_err();
    assert!(e.to_string().contains("mba.units"), "{e}");
}

// ---- undo and removal ----

/// Two classes: L3 ways in every domain, an MBA limit the fake rounds (25 % to 30 %), CPUs.
const TWO: &str = "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\nmba = { percent = 25 }\ncpus = \"2-3\"\n\n\
                   [[class]]\nname = \"web\"\nl3 = { mask = \"0x3\" }\ncpus = \"4\"\n";

/// The whole state a configuration can change: the allocation, and the names.
fn state(
    b: &mut rdt_core::fake::FakeBackend,
) -> (rdt_core::transaction::AllocState, Vec<(ClassId, String)>) {
    (
        rdt_core::transaction::AllocState::read(b).unwrap(),
        b.class_names(),
    )
}

/// Applies `text` on `b`, returns what was written.
fn apply(b: &mut rdt_core::fake::FakeBackend, text: &str) -> Vec<rdt_core::transaction::Done> {
    let cfg = toml(text).unwrap();
    cfg.plan(b, &rdt_host::proc::ProcFs::host())
        .unwrap()
        .plan
        .apply(b)
        .into_result()
        .unwrap()
}

#[test]
fn undoing_an_applied_configuration_restores_the_state_before_and_gives_the_names_up() {
    // arrange: COS1 is someone else's (its CPU and mask stay), the rest at the defaults
    let mut b = rdt_core::fake::FakeBackend::intel_2s();
    let mask = CacheBitmask::new(0x300).unwrap();
    rdt_host::transaction::run(
        &mut b,
        &[
            rdt_core::transaction::Change::l3(CacheDomain::new(0), ClassId::new(1), mask),
            rdt_core::transaction::Change::cpu(rdt_core::LogicalCpu::new(5), ClassId::new(1)),
        ],
    )
    .unwrap()
    .into_result()
    .unwrap();
    let before = state(&mut b);
    // act
    let done = apply(&mut b, TWO);
    assert_eq!(b.own_class_names().len(), 2);
    let mba = done
        .iter()
        .find(|d| matches!(d.step, rdt_core::transaction::Step::Mba { .. }))
        .unwrap();
    assert_eq!(mba.applied, Some(MbaLimit::Percent(30)), "the fake rounds");
    let undo = rdt_core::transaction::Plan::undoing(&mut b, &done);
    // the MBA step is undone from the limit applied, not the one asked for
    let back = undo
        .steps()
        .iter()
        .find_map(|(_, s)| match s {
            rdt_core::transaction::Step::Mba { before, .. } => Some(before.limit),
            _ => None,
        })
        .unwrap();
    assert_eq!(back, MbaLimit::Percent(30));
    undo.apply(&mut b).into_result().unwrap();
    // assert
    assert_eq!(state(&mut b), before);
    assert!(b.own_class_names().is_empty());
    // applied again, the same classes come back
    let again = apply(&mut b, TWO);
    assert_eq!(again.len(), done.len());
}

#[test]
fn undo_under_cdp_puts_back_data_and_code_masks_each() {
    // arrange: CDP on; COS1 holds different data and code masks; `db` takes it over by a
    // fixed `cos`, with one mask for both
    let mut b = rdt_core::fake::FakeBackend::intel_2s();
    b.enable_l3_cdp();
    let d0 = CacheDomain::new(0);
    let (data, code) = (
        CacheBitmask::new(0xf0).unwrap(),
        CacheBitmask::new(0xf00).unwrap(),
    );
    b.set_cat_classes(
        CatResource::L3,
        d0,
        &[rdt_core::CatClass {
            class: ClassId::new(1),
            mask: rdt_core::CatMask::Cdp { data, code },
        }],
    )
    .unwrap();
    let before = state(&mut b);
    // act
    let done = apply(
        &mut b,
        "[[class]]\nname = \"db\"\ncos = 1\nl3 = { mask = \"0x3\", shared = true }\ncpus = \"2\"\n",
    );
    assert_eq!(
        b.l3_mask(0, 1),
        rdt_core::CatMask::Cdp {
            data: CacheBitmask::new(0x3).unwrap(),
            code: CacheBitmask::new(0x3).unwrap()
        }
    );
    rdt_core::transaction::Plan::undoing(&mut b, &done)
        .apply(&mut b)
        .into_result()
        .unwrap();
    // assert
    assert_eq!(b.l3_mask(0, 1), rdt_core::CatMask::Cdp { data, code });
    assert_eq!(state(&mut b), before);
}

#[test]
fn remove_gives_up_the_files_own_classes_and_its_undo_claims_them_back() {
    // arrange
    let mut b = rdt_core::fake::FakeBackend::intel_2s();
    let before = state(&mut b);
    apply(&mut b, TWO);
    let applied = state(&mut b);
    // `other` was never applied: a warning, not an error
    let cfg = toml(&format!("{TWO}\n[[class]]\nname = \"other\"\n")).unwrap();
    // act
    let removal = cfg.remove(&mut b).unwrap();
    assert_eq!(removal.warnings.len(), 1, "{:?}", removal.warnings);
    assert!(
        removal.warnings[0]
            .starts_with("cfg.toml:13: class \"other\": name: `other` is not a named class"),
        "{:?}",
        removal.warnings
    );
    assert!(
        removal
            .lines()
            .contains(&"db (COS1): CPU 2 to COS0".to_owned())
    );
    let done = removal.plan.apply(&mut b).into_result().unwrap();
    // assert: as before the apply, names included
    assert_eq!(state(&mut b), before);
    assert!(b.own_class_names().is_empty());
    // undoing the removal brings the applied classes back, names and all
    rdt_core::transaction::Plan::undoing(&mut b, &done)
        .apply(&mut b)
        .into_result()
        .unwrap();
    assert_eq!(state(&mut b), applied);
    assert_eq!(b.own_class_names().len(), 2);
}

#[test]
fn a_removal_that_fails_midway_is_rolled_back_names_included() {
    let mut b = rdt_core::fake::FakeBackend::intel_2s();
    apply(&mut b, TWO);
    let applied = state(&mut b);
    let cfg = toml(TWO).unwrap();
    let removal = cfg.remove(&mut b).unwrap();
    // the last write (web's release) fails: everything before it is undone, db's release
    // included
    let mut dry = b.clone();
    let writes = dry.writes.len();
    removal.plan.clone().apply(&mut dry).into_result().unwrap();
    let n = dry.writes.len() - writes;
    assert!(dry.writes.last().unwrap().starts_with("release web"));
    b.fail_nth_write(n);
    let outcome = removal.plan.apply(&mut b);
    assert!(
        matches!(outcome, rdt_core::transaction::Outcome::RolledBack { .. }),
        "{outcome:?}"
    );
    assert_eq!(state(&mut b), applied);
    assert_eq!(b.own_class_names().len(), 2);
}

#[test]
fn a_reset_plan_gives_up_the_named_classes_and_its_undo_brings_them_back() {
    let mut b = rdt_core::fake::FakeBackend::intel_2s();
    apply(&mut b, TWO);
    let applied = state(&mut b);
    let plan = rdt_core::transaction::Plan::new(
        &mut b,
        &[rdt_core::transaction::Change::Reset(
            rdt_core::AllocReset::default(),
        )],
    )
    .unwrap();
    let released: Vec<&str> = plan
        .steps()
        .iter()
        .filter_map(|(_, s)| match s {
            rdt_core::transaction::Step::Release { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(released, ["db", "web"]);
    let done = plan.apply(&mut b).into_result().unwrap();
    assert!(b.own_class_names().is_empty() && b.class_names().is_empty());
    assert_eq!(b.class_of_cpu(2), 0);
    rdt_core::transaction::Plan::undoing(&mut b, &done)
        .apply(&mut b)
        .into_result()
        .unwrap();
    assert_eq!(state(&mut b), applied);
}

#[test]
fn a_reapplied_class_has_exactly_the_cpus_of_the_file_and_other_classes_keep_theirs() {
    // arrange: COS1 is someone else's, with CPU 1
    let mut b = rdt_core::fake::FakeBackend::intel_2s();
    let cpu = rdt_core::LogicalCpu::new;
    rdt_host::transaction::run(
        &mut b,
        &[rdt_core::transaction::Change::cpu(cpu(1), ClassId::new(1))],
    )
    .unwrap()
    .into_result()
    .unwrap();
    apply(&mut b, &class("web", "cpus = \"4-7\"\n"));
    let web = b.class_names().iter().find(|(_, n)| n == "web").unwrap().0;
    // act: the class shrinks
    let cfg = toml(&class("web", "cpus = \"4-5\"\n")).unwrap();
    let planned = cfg.plan(&mut b, &rdt_host::proc::ProcFs::host()).unwrap();
    // assert: the two moves out, told as such, and nothing else
    assert_eq!(
        planned.lines(),
        [
            format!("web (COS{web}): CPU 6 to COS0"),
            format!("web (COS{web}): CPU 7 to COS0")
        ]
    );
    planned.plan.apply(&mut b).into_result().unwrap();
    let classes: BTreeMap<rdt_core::LogicalCpu, Option<ClassId>> =
        b.cpu_classes().unwrap().into_iter().collect();
    for (c, want) in [
        (4, web),
        (5, web),
        (6, ClassId::new(0)),
        (7, ClassId::new(0)),
    ] {
        assert_eq!(classes[&cpu(c)], Some(want), "CPU {c}");
    }
    assert_eq!(
        classes[&cpu(1)],
        Some(ClassId::new(1)),
        "another class's CPU"
    );
    // applied again: nothing to do
    assert!(
        cfg.plan(&mut b, &rdt_host::proc::ProcFs::host())
            .unwrap()
            .plan
            .is_empty()
    );
}

// ---- region-aware MBA (`regions`) ----

#[test]
fn regions_parse_per_region_control_and_domain_with_their_lines() {
    let text = class(
        "batch",
        "cpus = \"20-35\"\n\
         [class.regions.1]\n\
         max = 0x7f\n\
         min = 0\n\
         domains = { \"1\" = { max = 32 } }\n\
         [class.regions.0x0]\n\
         opt = 400\n",
    );
    let cfg = toml(&text).unwrap();
    let r = &cfg.classes[0].regions;
    assert_eq!(r.len(), 2);
    let cxl = &r[&MemRegion(1)];
    assert_eq!(
        cxl.controls,
        BTreeMap::from([(BwControl::Max, 0x7f), (BwControl::Min, 0)])
    );
    // domain 1 replaces max only; min is the region's there too
    assert_eq!(
        cxl.controls_in(CacheDomain::new(1)),
        BTreeMap::from([(BwControl::Max, 32), (BwControl::Min, 0)])
    );
    assert_eq!(cxl.controls_in(CacheDomain::new(0)), cxl.controls);
    assert_eq!(
        r[&MemRegion(0)].controls,
        BTreeMap::from([(BwControl::Optimal, 400)])
    );
    let lines = &cfg.classes[0].lines;
    assert_eq!(lines.get("regions.1"), Some(4));
    assert_eq!(lines.get("regions.1.max"), Some(5));
    assert_eq!(lines.get("regions.1.domains.1.max"), Some(7));
    assert_eq!(lines.get("regions.0.opt"), Some(9), "0x0 is recorded as 0");
    // JSON has the same shape
    let j = json(
        r#"{"class": [{"name": "batch", "cpus": "20-35",
            "regions": {"1": {"max": 127, "min": 0, "domains": {"1": {"max": 32}}},
                        "0": {"opt": 400}}}]}"#,
    )
    .unwrap();
    assert_eq!(&j.classes[0].regions, r);
}

#[test]
fn regions_refuse_bad_ids_controls_and_values_by_key() {
    let c = |body: &str| class("batch", body);
    assert_refused(
        &c("regions = { cxl = { max = 1 } }\n"),
        3,
        "regions.cxl",
        "\"cxl\" is not a memory region id",
    );
    assert_refused(
        &c("regions = { 256 = { max = 1 } }\n"),
        3,
        "regions.256",
        "0 to 255",
    );
    assert_refused(
        &c("[class.regions.1]\nmax = 1\n[class.regions.0x1]\nmin = 1\n"),
        5,
        "regions.1",
        "region 1 given twice",
    );
    assert_refused(
        &c("regions = { 1 = { maximum = 1 } }\n"),
        3,
        "regions.1.maximum",
        "unknown key \"maximum\": `regions.1` takes `opt`, `min`, `max` or `domains`",
    );
    assert_refused(
        &c("regions = { 1 = { } }\n"),
        3,
        "regions.1",
        "no control given: give one or more of `opt`, `min` or `max`",
    );
    assert_refused(
        &c("regions = { }\n"),
        3,
        "regions",
        "no memory region given",
    );
    assert_refused(
        &c("regions = { 1 = { max = -1 } }\n"),
        3,
        "regions.1.max",
        "max -1 is out of range",
    );
    assert_refused(
        &c("regions = { 1 = { opt = \"0x7f\" } }\n"),
        3,
        "regions.1.opt",
        "expected an integer",
    );
    assert_refused(
        &c("regions = { 1 = { domains = { 0 = { max = 1, percent = 5 } } } }\n"),
        3,
        "regions.1.domains.0.percent",
        "unknown key \"percent\"",
    );
    assert_refused(
        &c("regions = 5\n"),
        3,
        "regions",
        "expected a table of memory region ids",
    );
}

#[test]
fn regions_in_an_unknown_l3_domain_are_refused_by_check() {
    let b = rdt_core::fake::FakeBackend::broadwell_2s();
    let cfg = toml(&class(
        "batch",
        "regions = { 1 = { max = 9, domains = { 7 = { max = 1 } } } }\n",
    ))
    .unwrap();
    let e = cfg
        .check(
            rdt_core::Backend::capabilities(&b),
            rdt_core::Backend::topology(&b),
        )
        .unwrap_err();
    assert_eq!(e.key(), Some("regions.1.domains.7"), "{e}");
    assert!(
        e.to_string()
            .contains("region MBA domain 7 does not exist (region MBA domains are L3 domains; L3 domains: 0, 1)"),
        "{e}"
    );
}

#[test]
fn regions_on_a_backend_without_region_controls_are_refused_before_any_write() {
    let mut b = rdt_core::fake::FakeBackend::broadwell_2s();
    let before = rdt_core::transaction::AllocState::read(&mut b).unwrap();
    let cfg = toml(&class(
        "batch",
        "l3 = { ways = 2 }\ncpus = \"3\"\nregions = { 1 = { max = 9 } }\n",
    ))
    .unwrap();
    let e = cfg
        .plan(&mut b, &rdt_host::proc::ProcFs::host())
        .unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.starts_with("cfg.toml:5: class \"batch\": regions: "),
        "{shown}"
    );
    assert!(
        shown.contains("needs the MMIO interface of an RDT 1.3 platform"),
        "{shown}"
    );
    assert_eq!(
        rdt_core::transaction::AllocState::read(&mut b).unwrap(),
        before
    );
}

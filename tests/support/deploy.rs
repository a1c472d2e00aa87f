//! The files of `deploy/` read as their consumers read them (Kubernetes YAML, containerd's
//! and CRI-O's TOML, Grafana's JSON), as `serde_json` values, and the flags each container
//! of a manifest passes checked against its binary's `--help`. Shared by the tests of the
//! binaries the manifests run (`crates/rdt-agent/tests/deploy.rs`,
//! `crates/rdt-exporter/tests/deploy.rs`), each of which has its own binary at hand.
#![allow(dead_code)] // each including test uses part of it

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;

/// `deploy/` of the workspace (the including crate is `crates/<name>`).
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Whether the file `name` ends in `.ext` (any case).
pub fn has_ext(name: &str, ext: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// Every file of `deploy/`: (file name, text), sorted by name.
pub fn files() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir())
        .expect("deploy/")
        .map(|e| {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).expect("read");
            (name, text)
        })
        .collect();
    out.sort();
    out
}

/// A file of `deploy/` parsed by its kind: YAML (every document), TOML (`.toml`, and
/// `.conf`: CRI-O's drop-ins are TOML), JSON; `None` for other files (systemd units).
pub fn parse(name: &str, text: &str) -> Option<Vec<Value>> {
    let ext = Path::new(name).extension()?.to_str()?;
    match ext {
        "yaml" | "yml" => Some(yaml_documents(text).unwrap_or_else(|e| panic!("{name}: {e}"))),
        "toml" | "conf" => Some(vec![
            toml_value(text).unwrap_or_else(|e| panic!("{name}: {e}")),
        ]),
        "json" => Some(vec![
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}")),
        ]),
        _ => None,
    }
}

/// TOML as a JSON value (integers as numbers, date-times as strings).
pub fn toml_value(text: &str) -> Result<Value, String> {
    use toml::de::{DeTable, DeValue};
    fn table(t: &DeTable<'_>) -> Value {
        Value::Object(
            t.iter()
                .map(|(k, v)| (k.get_ref().to_string(), value(v.get_ref())))
                .collect(),
        )
    }
    fn value(v: &DeValue<'_>) -> Value {
        match v {
            DeValue::Table(t) => table(t),
            DeValue::Array(a) => Value::Array(a.iter().map(|v| value(v.get_ref())).collect()),
            DeValue::String(s) => Value::String(s.to_string()),
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .map_or(Value::Null, |n| Value::Number(n.into())),
            DeValue::Float(f) => serde_json::from_str(f.as_str()).unwrap_or(Value::Null),
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(d) => Value::String(d.to_string()),
        }
    }
    let doc = DeTable::parse(text).map_err(|e| e.message().to_owned())?;
    Ok(table(doc.get_ref()))
}

/// Every document of a YAML stream as a JSON value; plain scalars typed as YAML 1.2's core
/// schema types them. Aliases are refused (the manifests use none).
pub fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut parser = Parser::new_from_str(text);
    let mut docs = Vec::new();
    loop {
        let (event, span) = next(&mut parser)?;
        match event {
            Event::StreamEnd => return Ok(docs),
            Event::StreamStart | Event::DocumentStart(_) | Event::DocumentEnd | Event::Nothing => {}
            event => docs.push(node(&mut parser, event, span.start.line())?),
        }
    }
}

type Events<'a> = Parser<'a, saphyr_parser::StrInput<'a>>;

fn next<'a>(p: &mut Events<'a>) -> Result<(Event<'a>, saphyr_parser::Span), String> {
    match p.next_event() {
        Some(Ok(e)) => Ok(e),
        Some(Err(e)) => Err(format!("line {}: {}", e.marker().line(), e.info())),
        None => Err("unexpected end of the YAML stream".into()),
    }
}

fn node<'a>(p: &mut Events<'a>, event: Event<'a>, line: usize) -> Result<Value, String> {
    Ok(match event {
        Event::Scalar(text, style, _, _) => scalar(&text, style),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                let (e, span) = next(p)?;
                if matches!(e, Event::SequenceEnd) {
                    break;
                }
                items.push(node(p, e, span.start.line())?);
            }
            Value::Array(items)
        }
        Event::MappingStart(..) => {
            let mut map = serde_json::Map::new();
            loop {
                let (e, span) = next(p)?;
                let key = match e {
                    Event::MappingEnd => break,
                    Event::Scalar(k, ..) => k.into_owned(),
                    _ => {
                        return Err(format!(
                            "line {}: a key that is not a scalar",
                            span.start.line()
                        ));
                    }
                };
                let (e, span) = next(p)?;
                let v = node(p, e, span.start.line())?;
                if map.insert(key.clone(), v).is_some() {
                    return Err(format!("line {}: key {key:?} twice", span.start.line()));
                }
            }
            Value::Object(map)
        }
        Event::Alias(_) => return Err(format!("line {line}: an alias")),
        _ => return Err(format!("line {line}: unexpected YAML event")),
    })
}

fn scalar(text: &str, style: ScalarStyle) -> Value {
    if style != ScalarStyle::Plain {
        return Value::String(text.to_owned());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => text.parse::<i64>().map_or_else(
            |_| Value::String(text.to_owned()),
            |n| Value::Number(n.into()),
        ),
    }
}

/// One container (or init container) of a workload manifest.
#[derive(Debug, Clone)]
pub struct Container {
    /// The manifest's file name.
    pub manifest: String,
    /// The container's name.
    pub name: String,
    /// Its image.
    pub image: String,
    /// Its `args`.
    pub args: Vec<String>,
    /// The container object itself.
    pub spec: Value,
    /// The pod spec it is in.
    pub pod: Value,
}

/// Every container and init container of every workload (`spec.template.spec`) in the
/// YAML files of `deploy/`.
pub fn containers() -> Vec<Container> {
    let mut out = Vec::new();
    for (name, text) in files() {
        if !has_ext(&name, "yaml") {
            continue;
        }
        for doc in parse(&name, &text).unwrap_or_default() {
            let pod = &doc["spec"]["template"]["spec"];
            for list in ["initContainers", "containers"] {
                for c in pod[list].as_array().into_iter().flatten() {
                    let args = c["args"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| a.as_str().expect("args are strings").to_owned())
                        .collect();
                    out.push(Container {
                        manifest: name.clone(),
                        name: c["name"].as_str().expect("a name").to_owned(),
                        image: c["image"].as_str().expect("an image").to_owned(),
                        args,
                        spec: c.clone(),
                        pod: pod.clone(),
                    });
                }
            }
        }
    }
    out
}

/// The long flags (`--name`) a `--help` text lists.
fn help_flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    let mut rest = help;
    while let Some(i) = rest.find("--") {
        let tail = &rest[i + 2..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(tail.len());
        if end > 0 {
            flags.insert(format!("--{}", &tail[..end]));
        }
        rest = &tail[end..];
    }
    flags
}

/// Checks that every flag `c` passes is one `bin` (or its subcommand, the first argument
/// when it is not a flag) lists in its `--help`; returns the flags checked.
pub fn check_flags(bin: &str, c: &Container) -> Vec<String> {
    let sub: Vec<&str> = c
        .args
        .first()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .into_iter()
        .collect();
    let out = Command::new(bin)
        .args(&sub)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(
        out.status.success(),
        "{} {sub:?} --help: {}",
        bin,
        String::from_utf8_lossy(&out.stderr)
    );
    let known = help_flags(&String::from_utf8_lossy(&out.stdout));
    let mut checked = Vec::new();
    for a in c.args.iter().filter(|a| a.starts_with("--")) {
        let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
        assert!(
            known.contains(flag),
            "{} container {}: {flag} is not a flag of {bin} {sub:?}: {known:?}",
            c.manifest,
            c.name
        );
        checked.push(flag.to_owned());
    }
    checked
}

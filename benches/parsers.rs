//! Every configuration format at the size cap ([`MAX_CONFIG_BYTES`], 1 MiB): generated
//! worst cases, each parsed (or refused) whole, as `pqos --apply FILE` does before it looks
//! at the platform. The target is under 1 s per case (issue 22: a 1 MiB goresctrl YAML
//! of 72k keys took 35.6 s while its duplicate-key check compared every key with every
//! earlier one).
//!
//! The cases, for TOML, JSON and goresctrl's YAML:
//! - `many_keys`: one table (mapping, object) holding as many distinct keys as fit: the
//!   shape a duplicate-key check that scans earlier keys makes quadratic;
//! - `many_classes`: as many valid classes as fit (the checks across classes: names, CPUs,
//!   tasks, and for YAML class names across partitions), then, for YAML, resolved on a
//!   platform as `--apply` does;
//! - `many_ids`: cache-domain keys and ranges (`domains = { "0" = ... }`; goresctrl's
//!   `0-65535` cache-id ranges, which must not expand into one entry per id);
//! - `deep`: nesting as deep as the bytes allow (refused, without recursing that deep);
//! - `long_scalar`: one string value of nearly 1 MiB (refused, with a short message).
//!
//! Each case prints its size, the time of one run and whether it parsed, then criterion
//! times it (`cargo bench --bench parsers -- --list` runs each once, untimed by criterion).
#![allow(missing_docs)]

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rdt_pqos::CacheDomain;
use rdt_pqos::config::goresctrl::{CatLevel, GoresctrlConfig, GoresctrlPlatform, MbLevel};
use rdt_pqos::config::{Config, MAX_CONFIG_BYTES};

/// The size every generated input is filled up to: the cap, less a margin for the last
/// item and the closing brackets.
const FILL: usize = usize_of(MAX_CONFIG_BYTES) - 256;

const fn usize_of(n: u64) -> usize {
    #[allow(clippy::cast_possible_truncation)]
    let n = n as usize;
    n
}

/// `head`, then `item(i)` for i = 0, 1, ... (with `sep` between) while it fits, then `tail`.
fn fill(head: &str, item: impl Fn(usize) -> String, sep: &str, tail: &str) -> String {
    let mut text = head.to_owned();
    for i in 0.. {
        let next = item(i);
        if text.len() + next.len() + sep.len() + tail.len() > FILL {
            break;
        }
        if i > 0 {
            text.push_str(sep);
        }
        text.push_str(&next);
    }
    text.push_str(tail);
    text
}

/// (case, format, text)
fn cases() -> Vec<(&'static str, &'static str, String)> {
    let long = "x".repeat(FILL - 64);
    vec![
        // --- TOML
        (
            "many_keys",
            "toml",
            fill("", |i| format!("k{i} = 1"), "\n", "\n"),
        ),
        (
            "many_classes",
            "toml",
            fill(
                "",
                |i| format!("[[class]]\nname = \"c{i}\"\ntasks = [{}]\n", i + 1),
                "",
                "",
            ),
        ),
        (
            "many_ids",
            "toml",
            fill(
                "[[class]]\nname = \"a\"\nl3 = { ways = 1, domains = { ",
                |i| format!("\"{i}\" = {{ ways = 1 }}"),
                ", ",
                " } }\n",
            ),
        ),
        ("deep", "toml", format!("a = {}", "[".repeat(FILL - 8))),
        (
            "long_scalar",
            "toml",
            format!("[[class]]\nname = \"{long}\"\n"),
        ),
        // --- JSON
        (
            "many_keys",
            "json",
            fill("{", |i| format!("\"k{i}\":1"), ",", "}"),
        ),
        (
            "many_classes",
            "json",
            fill(
                "{\"class\":[",
                |i| format!("{{\"name\":\"c{i}\",\"tasks\":[{}]}}", i + 1),
                ",",
                "]}",
            ),
        ),
        (
            "many_ids",
            "json",
            fill(
                "{\"class\":[{\"name\":\"a\",\"l3\":{\"ways\":1,\"domains\":{",
                |i| format!("\"{i}\":{{\"ways\":1}}"),
                ",",
                "}}}]}",
            ),
        ),
        (
            "deep",
            "json",
            format!("{{\"class\":{}", "[".repeat(FILL - 16)),
        ),
        (
            "long_scalar",
            "json",
            format!("{{\"class\":[{{\"name\":\"{long}\"}}]}}"),
        ),
        // --- goresctrl YAML
        (
            "many_keys",
            "yaml",
            fill("", |i| format!("k{i}: 1"), "\n", "\n"),
        ),
        (
            "many_classes",
            "yaml",
            fill(
                "partitions:\n  p:\n    l3Allocation: 100%\n    mbAllocation: [100%]\n    classes:\n",
                |i| format!("      c{i}:\n        l3Allocation: {}%\n", 1 + i % 100),
                "",
                "",
            ),
        ),
        (
            "many_ids",
            "yaml",
            fill(
                "partitions:\n  p:\n    l3Allocation:\n",
                |i| format!("      \"{i},0-65535\": 100%"),
                "\n",
                "\n",
            ),
        ),
        ("deep", "yaml", "[".repeat(FILL)),
        (
            "long_scalar",
            "yaml",
            format!("partitions:\n  p:\n    l3Allocation: \"{long}\"\n"),
        ),
    ]
}

/// Parses `text` as `format`; `Ok` with what it became, or the error's first 100 bytes.
fn parse(format: &str, text: &str) -> Result<String, String> {
    let short = |e: &dyn std::fmt::Display| {
        let mut s = e.to_string();
        if let Some((cut, _)) = s.char_indices().nth(100) {
            s.truncate(cut);
        }
        s
    };
    match format {
        "toml" => Config::parse_toml(text, Path::new("bench.toml"))
            .map(|c| format!("{} classes", c.classes.len()))
            .map_err(|e| short(&e)),
        "json" => Config::parse_json(text, Path::new("bench.json"))
            .map(|c| format!("{} classes", c.classes.len()))
            .map_err(|e| short(&e)),
        _ => {
            let config = GoresctrlConfig::parse_yaml(text, Path::new("bench.yaml"))
                .map_err(|e| short(&e))?;
            // As `--apply` does next: resolved on a platform of 8 L3 domains (20-bit CBM, MBA).
            let domains: Vec<CacheDomain> = (0..8).map(CacheDomain::new).collect();
            let platform = GoresctrlPlatform {
                l3: Some(CatLevel {
                    cbm_len: 20,
                    min_cbm_bits: 1,
                    domains: domains.clone(),
                    cdp: false,
                }),
                mb: Some(MbLevel {
                    domains,
                    mbps: false,
                    min_bandwidth: 10,
                    granularity: 10,
                }),
                ..GoresctrlPlatform::default()
            };
            config
                .resolve(&platform)
                .map(|r| format!("{} classes resolved", r.classes.len()))
                .map_err(|e| short(&e))
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_1MiB");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for (case, format, text) in cases() {
        assert!(text.len() as u64 <= MAX_CONFIG_BYTES, "{case} {format}");
        let start = Instant::now();
        let outcome = parse(format, &text);
        let once = start.elapsed();
        let mut line = format!("{format} {case}: {} bytes, once {once:.3?}, ", text.len());
        match &outcome {
            Ok(what) => write!(line, "parsed: {what}"),
            Err(e) => write!(line, "refused: {e}"),
        }
        .expect("a String");
        eprintln!("{line}");
        group.bench_with_input(BenchmarkId::new(format, case), &text, |b, text| {
            b.iter(|| parse(format, text));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

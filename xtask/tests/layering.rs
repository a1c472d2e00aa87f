//! rdt-core is the model (issue 23): its dependencies are a short list, each with a written
//! reason in its manifest, and its library code does no file I/O. The host's files are
//! rdt-host's, the declarative formats rdt-config's.
//!
//! What is still in rdt-core and should not be is listed here as debt ([`DEBT_DEPS`],
//! [`DEBT_FILES`]); the tests fail when the debt grows (a new dependency, a new file doing
//! I/O) and when it shrinks without the list following (a file that no longer does I/O, a
//! dependency that is gone), so the lists only get shorter.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// rdt-core's dependencies as the issue wants them: the model's own.
const ALLOWED_DEPS: &[&str] = &[
    // CPUID decoding (its `CpuIdReader` seam).
    "raw-cpuid",
    // The error types.
    "thiserror",
    // MonEvents.
    "bitflags",
    // Rolled-back transactions and journals left alone are logged.
    "log",
    // Feature `fake` only (optional): the fuzz-test runner of `rdt_core::fake::fuzz`.
    "proptest",
    // Feature `serde` only (optional): the transaction journal (rdt-host) records Step and
    // AllocState; no format crate (serde_json, toml) here.
    "serde",
];

/// Dependencies rdt-core still has for host I/O: the bounded reader of files (`file.rs`,
/// which CPUID dumps and the sysfs topology use).
const DEBT_DEPS: &[&str] = &["libc"];

/// rdt-core library files that still do file I/O (relative to `crates/rdt-core/src`): the
/// bounded reader (`file.rs`), the `/dev/cpu/N/cpuid` reader and CPUID dump loading, the
/// sysfs topology reader.
const DEBT_FILES: &[&str] = &["cpuid.rs", "file.rs", "topology/sysfs.rs"];

/// Never in rdt-core: the declarative formats are rdt-config's.
const FORBIDDEN_DEPS: &[&str] = &[
    "toml",
    "saphyr-parser",
    "serde_yaml",
    "serde_yml",
    "serde_json",
];

/// Text that is file or OS I/O in library code.
const IO_MARKS: &[&str] = &[
    "std::fs",
    "fs::",
    "File::open",
    "File::create",
    "OpenOptions",
    "libc::",
    "nix::",
    "read_dir",
];

fn core_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/rdt-core")
}

/// The names of the `[dependencies]` of a manifest, and those whose entry has no comment
/// line right above it (no written reason).
fn dependencies(manifest: &str) -> (BTreeSet<String>, Vec<String>) {
    let table: toml::Table = manifest.parse().expect("rdt-core's Cargo.toml parses");
    let names: BTreeSet<String> = table
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    let mut unexplained = Vec::new();
    let mut in_deps = false;
    let mut previous = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            if names.contains(name) && !previous.starts_with('#') {
                unexplained.push(name.to_owned());
            }
        }
        previous = line;
    }
    (names, unexplained)
}

/// The I/O marks on lines of library code: comments, `#[cfg(test)]` modules (from that line
/// to the end of the file, where this workspace keeps them) and `tests.rs` files left out.
fn io_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        if IO_MARKS.iter().any(|m| {
            code.match_indices(m).any(|(at, _)| {
                // `RunFile::create` is not `File::create`; `std::fs` is both marks.
                !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
            })
        }) {
            out.push((i + 1, code.to_owned()));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("rdt-core/src lists") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn rdt_core_depends_on_the_allowed_crates_each_with_a_written_reason() {
    let manifest = std::fs::read_to_string(core_dir().join("Cargo.toml")).expect("manifest");
    let (names, unexplained) = dependencies(&manifest);
    let known: BTreeSet<&str> = ALLOWED_DEPS.iter().chain(DEBT_DEPS).copied().collect();
    let extra: Vec<&String> = names
        .iter()
        .filter(|n| !known.contains(n.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "rdt-core is the model; a dependency outside the allowed list: {extra:?} (file I/O \
         belongs in rdt-host, formats in rdt-config)"
    );
    for f in FORBIDDEN_DEPS {
        assert!(!names.contains(*f), "rdt-core depends on {f}");
    }
    let paid: Vec<&&str> = DEBT_DEPS.iter().filter(|d| !names.contains(**d)).collect();
    assert!(
        paid.is_empty(),
        "rdt-core no longer depends on {paid:?}: remove them from DEBT_DEPS"
    );
    assert!(
        unexplained.is_empty(),
        "dependencies of rdt-core without a comment saying why: {unexplained:?}"
    );
}

#[test]
fn rdt_core_library_code_does_no_file_io_outside_the_listed_debt() {
    let src = core_dir().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut doing_io = BTreeSet::new();
    let mut report = String::new();
    for path in files {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let rel = path
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let lines = io_lines(&std::fs::read_to_string(&path).expect("source reads"));
        if lines.is_empty() {
            continue;
        }
        if !DEBT_FILES.contains(&rel.as_str()) {
            for (n, code) in &lines {
                report.push_str(&format!("\n  {rel}:{n}: {code}"));
            }
        }
        doing_io.insert(rel);
    }
    assert!(
        report.is_empty(),
        "file I/O in rdt-core (it belongs in rdt-host):{report}"
    );
    let paid: Vec<&&str> = DEBT_FILES
        .iter()
        .filter(|f| !doing_io.contains(**f))
        .collect();
    assert!(
        paid.is_empty(),
        "{paid:?} no longer do file I/O in rdt-core: remove them from DEBT_FILES"
    );
}

#[test]
fn the_checks_see_io_and_unexplained_dependencies() {
    // The scanners themselves: they must be able to fail.
    let code = "use std::fs::File;\n// std::fs in a comment\nfn f() { RunFile::create(); }\n\
                fn g() { let _ = libc::O_RDONLY; }\n#[cfg(test)]\nmod tests { use std::fs; }\n";
    let found: Vec<usize> = io_lines(code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(found, [1, 4]);
    let manifest = "[package]\nname = \"x\"\n[dependencies]\n# why\nthiserror = \"2\"\n\
                    toml.workspace = true\n[dev-dependencies]\ntempfile = \"3\"\n";
    let (names, unexplained) = dependencies(manifest);
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["thiserror", "toml"]);
    assert_eq!(unexplained, ["toml"]);
}

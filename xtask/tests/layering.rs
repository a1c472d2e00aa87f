//! rdt-core is the model (issue 23): its dependencies are a short list, each with a written
//! reason in its manifest, and its code (its tests too) does no file I/O. Reading and writing
//! files is rdt-host's, the declarative formats are rdt-config's.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// rdt-core's dependencies: the model's own.
const ALLOWED_DEPS: &[&str] = &[
    // CPUID decoding (its `CpuIdReader` seam).
    "raw-cpuid",
    // The error types.
    "thiserror",
    // MonEvents.
    "bitflags",
    // The level of each discovery line (`log::Level`).
    "log",
    // Feature `fake` only (optional): the fuzz-test runner of `rdt_core::fake::fuzz`.
    "proptest",
    // Feature `serde` only (optional): the transaction journal (rdt-host) records Step and
    // AllocState; no format crate (serde_json, toml) here.
    "serde",
];

/// Never in rdt-core: the declarative formats are rdt-config's, file and OS I/O rdt-host's.
const FORBIDDEN_DEPS: &[&str] = &[
    "toml",
    "saphyr-parser",
    "serde_yaml",
    "serde_yml",
    "serde_json",
    "libc",
    "nix",
];

/// Text that is file or OS I/O.
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

/// The lines of code (comments left out) with an I/O mark.
fn io_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim();
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
    let extra: Vec<&String> = names
        .iter()
        .filter(|n| !ALLOWED_DEPS.contains(&n.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "rdt-core is the model; a dependency outside the allowed list: {extra:?} (file I/O \
         belongs in rdt-host, formats in rdt-config)"
    );
    for f in FORBIDDEN_DEPS {
        assert!(!names.contains(*f), "rdt-core depends on {f}");
    }
    assert!(
        unexplained.is_empty(),
        "dependencies of rdt-core without a comment saying why: {unexplained:?}"
    );
}

#[test]
fn rdt_core_does_no_file_io() {
    let src = core_dir().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 20,
        "rdt-core/src lists its modules: {files:?}"
    );
    let mut report = String::new();
    for path in files {
        let rel = path
            .strip_prefix(&src)
            .expect("under src")
            .display()
            .to_string();
        for (n, code) in io_lines(&std::fs::read_to_string(&path).expect("source reads")) {
            report.push_str(&format!("\n  {rel}:{n}: {code}"));
        }
    }
    assert!(
        report.is_empty(),
        "file I/O in rdt-core (it belongs in rdt-host):{report}"
    );
}

#[test]
fn the_checks_see_io_and_unexplained_dependencies() {
    // The scanners themselves: they must be able to fail.
    let code = "use std::fs::File;\n// std::fs in a comment\nfn f() { RunFile::create(); }\n\
                fn g() { let _ = libc::O_RDONLY; }\n#[cfg(test)]\nmod tests { use std::fs; }\n";
    let found: Vec<usize> = io_lines(code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(found, [1, 4, 6]);
    let manifest = "[package]\nname = \"x\"\n[dependencies]\n# why\nthiserror = \"2\"\n\
                    toml.workspace = true\n[dev-dependencies]\ntempfile = \"3\"\n";
    let (names, unexplained) = dependencies(manifest);
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["thiserror", "toml"]);
    assert_eq!(unexplained, ["toml"]);
}

/// The only places that may opt out of the workspace's `unsafe_code = "deny"`: rdt-mmio's
/// mapping of device registers (volatile loads and stores), allowed on its `mod` line in
/// `io.rs`. rdt-capi (the C ABI) allows `unsafe` in its manifest and is not scanned.
const UNSAFE_ALLOWED: &[&str] = &["crates/rdt-mmio/src/io.rs"];

/// Every `.rs` file of the workspace outside rdt-capi, `target` and hidden directories.
fn workspace_rust_files() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for top in [
        "src", "crates", "tests", "examples", "benches", "xtask", "fuzz",
    ] {
        let dir = root.join(top);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&root).ok()?.to_string_lossy().into_owned();
            let skip = rel.starts_with("crates/rdt-capi/")
                || rel.split('/').any(|c| c == "target" || c.starts_with('.'));
            (!skip).then_some((rel, p))
        })
        .collect()
}

/// Lines that opt out of the `unsafe_code` lint (`allow`, `expect` or `warn` of it).
fn unsafe_opt_outs(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start();
            !l.starts_with("//")
                && ["allow(", "expect(", "warn("]
                    .iter()
                    .any(|a| l.contains(&format!("{a}unsafe_code")))
        })
        .map(|(n, _)| n + 1)
        .collect()
}

#[test]
fn unsafe_code_is_allowed_only_where_registers_are_mapped() {
    let files = workspace_rust_files();
    assert!(
        files.iter().any(|(r, _)| r == UNSAFE_ALLOWED[0]),
        "the scan reaches {}",
        UNSAFE_ALLOWED[0]
    );
    let mut found = Vec::new();
    for (rel, path) in files {
        let text = std::fs::read_to_string(&path).expect("a source file reads");
        for line in unsafe_opt_outs(&text) {
            if !UNSAFE_ALLOWED.contains(&rel.as_str()) {
                found.push(format!("{rel}:{line}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "`unsafe` outside rdt-mmio's io::mapped and rdt-capi (the workspace denies it): {found:?}"
    );
    assert_eq!(
        // (split, so that this file does not hold an opt-out itself)
        unsafe_opt_outs(concat!(
            "#[allow(unsafe",
            "_code)]\nmod m;\n// allow(unsafe",
            "_code)\n"
        )),
        [1],
        "the check sees an opt-out and skips comments"
    );
}

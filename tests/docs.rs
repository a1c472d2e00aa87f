//! The guide (docs/guide/src) and README.md cannot drift from the programs they describe:
//! - every ```` ```console ```` block is a transcript that runs and is compared with what it
//!   shows ([trycmd](https://docs.rs/trycmd)): the `$ ` lines run with the installed
//!   binaries (the workspace's `pqos`, `rdtset`, `rdt-agent`, `rdt-sim`, `rdt-exporter`,
//!   as `cargo test` built them), stdout and stderr interleaved as on a terminal, and the
//!   lines after a command must be what it prints. Each document runs on its own simulated
//!   platforms (a fresh `XDG_RUNTIME_DIR`, so state files are its own) in a directory that
//!   holds the files its `<!-- readme: file NAME -->` blocks define; the blocks of one
//!   document run in order, on one machine (each block's first command says `--sim-fresh`);
//! - every relative link and image of those files names a file that exists (and an
//!   mdBook `{{#include}}` too);
//! - the metrics reference lists every metric the exporter's module docs list.
//!
//! Redactions (documented in docs/guide/src/reference/transcripts.md): `[..]` in an expected
//! line matches any text in that line (used for dates and times); a line `...` matches any
//! number of lines. The simulated platform's clock is made virtual
//! (`RDT_SIM_VIRTUAL_CLOCK=true`: each monitoring interval advances the model instead of
//! sleeping), so its counters are the same on every run and on every machine.
//!
//! Reblessing after an intended change of output: `TRYCMD=overwrite cargo test --test
//! integration --all-features docs::` rewrites the blocks' outputs in place (check the diff;
//! put `[..]` back where a date or time was).

use std::path::{Path, PathBuf};

/// The documents whose console blocks are transcripts and whose links must resolve.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs/guide/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("the guide's directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The programs a transcript may run, as `cargo test` built them.
const PROGRAMS: [&str; 5] = ["pqos", "rdtset", "rdt-agent", "rdt-sim", "rdt-exporter"];

/// The other commands a transcript may run, found on `PATH` (trycmd ignores a step whose
/// program it cannot resolve: every command must be one of these or of [`PROGRAMS`]).
const TOOLS: [&str; 1] = ["cat"];

/// `name`'s path on `PATH`.
fn on_path(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not on PATH"))
}

/// The program of each `$ ` line of the console blocks of `text` (after `VAR=value`s).
fn transcript_programs(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            inside = line.trim_end() == "```console";
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ").filter(|_| inside) {
            let program = cmd
                .split_whitespace()
                .find(|w| !w.contains('='))
                .unwrap_or("")
                .to_owned();
            out.push((i + 1, program));
        }
    }
    out
}

/// `target/<profile>`, where Cargo put this test's binary's siblings.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_owned()
}

/// The files `<!-- readme: file NAME -->` blocks of `text` define: (name, contents).
fn defined_files(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- readme: file ")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            continue;
        };
        let fence = lines.by_ref().find(|l| l.starts_with("```"));
        assert!(fence.is_some(), "a file block without a fence: {line}");
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        out.push((name.trim().to_owned(), body.join("\n") + "\n"));
    }
    out
}

fn has_transcript(text: &str) -> bool {
    text.lines().any(|l| l.trim_end() == "```console")
}

#[test]
fn every_console_block_prints_what_it_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bins = profile_dir();
    for program in PROGRAMS {
        assert!(
            bins.join(program).exists(),
            "{} is missing: build the binaries first (`cargo test --workspace --all-features` \
             builds them; `cargo build -p pqos-cli -p rdt-agent -p rdt-sim -p rdt-exporter`)",
            bins.join(program).display()
        );
    }
    let overwrite = std::env::var("TRYCMD").is_ok_and(|m| m == "overwrite");
    let mut failed = Vec::new();
    let mut checked = 0;
    for doc in documents(root) {
        let text = std::fs::read_to_string(&doc).expect("a document");
        if !has_transcript(&text) {
            continue;
        }
        checked += text
            .lines()
            .filter(|l| l.trim_end() == "```console")
            .count();
        let rel = doc
            .strip_prefix(root)
            .expect("under the root")
            .display()
            .to_string();
        let sandbox = tempfile::tempdir().expect("sandbox");
        let dir = sandbox.path();
        let case = dir.join("transcript.md");
        std::fs::write(&case, &text).expect("copy");
        let cwd = dir.join("transcript.in");
        std::fs::create_dir(&cwd).expect("cwd");
        for (name, body) in defined_files(&text) {
            std::fs::write(cwd.join(name), body).expect("a defined file");
        }
        let run = dir.join("run");
        std::fs::create_dir(&run).expect("run dir");
        std::fs::create_dir(dir.join("home")).expect("home");
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        }
        eprintln!("{rel}: as {}", case.display());
        let result = std::panic::catch_unwind(|| {
            let cases = trycmd::TestCases::new();
            cases
                .case(&case)
                .timeout(std::time::Duration::from_mins(2))
                .env("XDG_RUNTIME_DIR", run.display().to_string())
                .env("HOME", dir.join("home").display().to_string())
                .env("RDT_SIM_VIRTUAL_CLOCK", "true")
                .env("NO_COLOR", "1");
            for program in PROGRAMS {
                cases.register_bin(program, bins.join(program));
            }
            for tool in TOOLS {
                cases.register_bin(tool, on_path(tool));
            }
            cases.run();
        });
        if overwrite {
            let blessed = std::fs::read_to_string(&case).expect("the blessed copy");
            if blessed != text {
                std::fs::write(&doc, blessed).expect("write back");
                eprintln!("{rel}: reblessed");
            }
        }
        if result.is_err() {
            failed.push(rel);
        }
    }
    assert!(checked >= 10, "only {checked} transcripts found");
    eprintln!("{checked} console blocks checked");
    assert!(
        failed.is_empty(),
        "transcripts differ from the programs' output in: {} (the diff is above; \
         TRYCMD=overwrite reblesses)",
        failed.join(", ")
    );
}

/// The relative targets of the markdown links and images of `text` (`](target)`), and of
/// mdBook's `{{#include target}}`, without their `#anchor`.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            out.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
        if let Some(inc) = line.trim().strip_prefix("{{#include ") {
            let target = inc.trim_end_matches("}}").trim();
            out.push(target.split(':').next().unwrap_or(target).to_owned());
        }
    }
    out.into_iter()
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:") && !t.starts_with('#'))
        .map(|t| t.split('#').next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn every_relative_link_of_the_readme_and_the_guide_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut count = 0;
    let docs = documents(root);
    for doc in docs.iter().chain(
        [
            "compat.md",
            "json.md",
            "mmio.md",
            "capi.md",
            "kubernetes-pods.md",
        ]
        .map(|f| root.join("docs").join(f))
        .iter(),
    ) {
        let text = std::fs::read_to_string(doc).expect("a document");
        for target in link_targets(&text) {
            count += 1;
            let path = doc.parent().expect("a directory").join(&target);
            if !path.exists() {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(count >= 30, "only {count} links found");
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
    // Every chapter file is in SUMMARY.md (mdBook would not render it otherwise).
    let summary = std::fs::read_to_string(root.join("docs/guide/src/SUMMARY.md")).expect("SUMMARY");
    for doc in &docs {
        if let Ok(rel) = doc.strip_prefix(root.join("docs/guide/src"))
            && rel != Path::new("SUMMARY.md")
        {
            assert!(
                summary.contains(&format!("({})", rel.display())),
                "{} is not in SUMMARY.md",
                rel.display()
            );
        }
    }
}

#[test]
fn links_are_found_outside_code_and_without_anchors() {
    let t = "see [a](x.md#y) and ![f](../f.svg), [w](https://e.invalid)\n```sh\n[no](z)\n```\n\
             {{#include ../../compat.md}}\n";
    assert_eq!(link_targets(t), ["x.md", "../f.svg", "../../compat.md"]);
    let files = defined_files("<!-- readme: file a.toml -->\n```toml\nk = 1\n```\n");
    let programs =
        transcript_programs("```console\n$ X=1 pqos -s\nout\n```\n$ not\n```sh\n$ no\n```\n");
    assert_eq!(programs, [(2, "pqos".to_owned())]);
    assert_eq!(files, [("a.toml".to_owned(), "k = 1\n".to_owned())]);
}

#[test]
fn the_metrics_reference_lists_every_metric_of_the_exporter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(root.join("crates/rdt-exporter/src/metrics.rs"))
        .expect("metrics.rs");
    let guide = std::fs::read_to_string(root.join("docs/guide/src/reference/metrics.md"))
        .expect("metrics.md");
    let names: Vec<&str> = source
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `rdt_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        assert!(
            guide.contains(&format!("`rdt_{name}`")),
            "docs/guide/src/reference/metrics.md lacks rdt_{name}"
        );
    }
}

//! Every shell line of README.md and of the guide (docs/guide/src) that starts one of the
//! project's programs runs, as written, and exits 0: they cannot promise a command that
//! fails. (Console blocks are transcripts: tests/docs.rs runs them and compares their output.)
//!
//! The README's ```` ```sh ```` blocks are commands line by line, its ```` ```console ````
//! blocks the lines after `$ `. A block that starts a project program (`pqos`, `rdtset`,
//! `rdt-exporter`, `rdt-sim`, `cargo run`, `cargo xtask`, `cargo install`) runs as one bash
//! script in a sandbox of its own (a temp dir as the working directory, `HOME` and
//! `XDG_RUNTIME_DIR`; `/tmp/rdt` moved into it), with the lines that start a project program
//! checked for exit status 0 (the others, `cat` and `echo` into resctrl files, show errors on
//! purpose). What cannot run here is said next to the block, in an HTML comment the rendered
//! README hides:
//! - `<!-- readme: ci main-job -->`, `<!-- readme: ci test -->`: the Quick start commands,
//!   which `.ci/run` extracts and runs literally (here only their `cargo run -p` is resolved);
//! - `<!-- readme: skip (why) -->`: needs what no test machine has (RDT hardware, a host's
//!   resctrl), with the reason;
//! - `<!-- readme: file NAME -->` on a TOML or JSON block: written as `NAME` into the
//!   sandboxes of the blocks after it, for the commands that read it.
//!
//! `cargo run -p PKG` runs the binary Cargo would pick (`default-run`, or the package's only
//! binary; several without `default-run` fails as it fails for a newcomer), `cargo run
//! --example NAME` the built example, `cargo xtask` the built xtask; `cargo install --path P`
//! is not run (a release build) but puts P's binaries, and only those, on the blocks' `PATH`:
//! a program the README runs by name that Install does not install is "command not found".

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The project's programs, as a README line names them.
const PROGRAMS: [&str; 5] = ["pqos", "rdtset", "rdt-exporter", "rdt-sim", "rdt-agent"];

/// The longest a block may take (its monitoring runs are a few seconds each).
const BLOCK_TIMEOUT: Duration = Duration::from_mins(3);

/// What the HTML comment before a block says.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Directive {
    Ci(String),
    Skip(String),
    File(String),
}

/// A fenced block of README.md.
#[derive(Debug)]
struct Block {
    /// The document it is in, relative to the workspace root.
    file: String,
    /// The line of its opening fence (1-based).
    line: usize,
    lang: String,
    /// Its lines, with their line numbers.
    body: Vec<(usize, String)>,
    directive: Option<Directive>,
}

impl Block {
    /// The commands of a shell block: `sh` lines that are not comments, `console` lines
    /// after `$ `.
    fn commands(&self) -> Vec<(usize, String)> {
        let keep = |(n, l): &(usize, String)| -> Option<(usize, String)> {
            match self.lang.as_str() {
                "sh" | "bash" => {
                    let t = l.trim();
                    (!t.is_empty() && !t.starts_with('#')).then(|| (*n, t.to_owned()))
                }
                "console" => l.strip_prefix("$ ").map(|c| (*n, c.trim().to_owned())),
                _ => None,
            }
        };
        self.body.iter().filter_map(keep).collect()
    }
}

fn parse_directive(file: &str, line: &str) -> Option<Directive> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim()
        .strip_prefix("readme:")?
        .trim();
    let (word, rest) = inner.split_once(' ').unwrap_or((inner, ""));
    let rest = rest.trim();
    match word {
        "ci" => Some(Directive::Ci(rest.to_owned())),
        "skip" => Some(Directive::Skip(rest.to_owned())),
        "file" => Some(Directive::File(rest.to_owned())),
        _ => panic!("{file}: unknown directive {line:?}"),
    }
}

/// The fenced blocks of `text`, each with the directive of the comment just before it
/// (blank lines between allowed).
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut pending: Option<Directive> = None;
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(block) = open.as_mut() {
            if line.trim_start().starts_with("```") {
                out.extend(open.take());
            } else {
                block.body.push((n, line.to_owned()));
            }
            continue;
        }
        if let Some(info) = line.trim_start().strip_prefix("```") {
            let lang = info.split(',').next().unwrap_or("").trim().to_owned();
            open = Some(Block {
                file: file.to_owned(),
                line: n,
                lang,
                body: Vec::new(),
                directive: pending.take(),
            });
        } else if let Some(d) = parse_directive(file, line) {
            pending = Some(d);
        } else if !line.trim().is_empty() {
            pending = None;
        }
    }
    assert!(open.is_none(), "{file}: a fence is never closed");
    out
}

/// A word of a shell line: its text and where it is.
#[derive(Debug)]
struct Word {
    text: String,
    start: usize,
    end: usize,
}

/// The simple commands of a shell line: split at `&&`, `||`, `;`, `|` and `&` outside
/// quotes, each as its words (quotes kept in the text).
fn segments(line: &str) -> Vec<Vec<Word>> {
    let bytes = line.as_bytes();
    let mut segs = vec![Vec::new()];
    let mut quote: Option<u8> = None;
    let mut word_start: Option<usize> = None;
    let mut i = 0;
    let end_word = |segs: &mut Vec<Vec<Word>>, start: &mut Option<usize>, at: usize| {
        if let Some(s) = start.take() {
            segs.last_mut().expect("a segment").push(Word {
                text: line[s..at].to_owned(),
                start: s,
                end: at,
            });
        }
    };
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'\'' | b'"' => {
                word_start.get_or_insert(i);
                quote = Some(c);
            }
            b' ' | b'\t' => end_word(&mut segs, &mut word_start, i),
            b'&' | b'|' | b';' => {
                end_word(&mut segs, &mut word_start, i);
                segs.push(Vec::new());
                if i + 1 < bytes.len() && bytes[i + 1] == c && c != b';' {
                    i += 1;
                }
            }
            b'#' if word_start.is_none() => break,
            _ => {
                word_start.get_or_insert(i);
            }
        }
        i += 1;
    }
    end_word(&mut segs, &mut word_start, line.len());
    segs.retain(|s| !s.is_empty());
    segs
}

/// The words of a simple command after its `VAR=value` assignments and `sudo`.
fn command_words(seg: &[Word]) -> &[Word] {
    let skip = seg
        .iter()
        .take_while(|w| w.text == "sudo" || w.text.split_once('=').is_some_and(|(k, _)| is_var(k)))
        .count();
    &seg[skip..]
}

fn is_var(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// What the workspace's packages are: name -> (directory, binaries, `default-run`).
struct Workspace {
    root: PathBuf,
    packages: BTreeMap<String, (PathBuf, Vec<String>, Option<String>)>,
}

impl Workspace {
    fn read(root: &Path) -> Self {
        let manifest = |dir: &Path| -> toml::Table {
            let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
            text.parse().expect("Cargo.toml parses")
        };
        let top = manifest(root);
        let members = top["workspace"]["members"]
            .as_array()
            .expect("members")
            .iter()
            .map(|m| root.join(m.as_str().expect("a path")));
        let mut packages = BTreeMap::new();
        for dir in std::iter::once(root.to_owned()).chain(members) {
            let m = manifest(&dir);
            let package = m["package"].as_table().expect("[package]");
            let name = package["name"].as_str().expect("name").to_owned();
            let mut bins: Vec<String> = m
                .get("bin")
                .and_then(|b| b.as_array())
                .map(|list| {
                    list.iter()
                        .map(|b| b["name"].as_str().expect("bin name").to_owned())
                        .collect()
                })
                .unwrap_or_default();
            if bins.is_empty() && dir.join("src/main.rs").exists() {
                bins.push(name.clone());
            }
            let default_run = package
                .get("default-run")
                .and_then(|d| d.as_str())
                .map(str::to_owned);
            packages.insert(name, (dir, bins, default_run));
        }
        Self {
            root: root.to_owned(),
            packages,
        }
    }

    /// The binary `cargo run -p package` runs, or Cargo's refusal.
    fn run_target(&self, package: &str) -> Result<String, String> {
        let (_, bins, default_run) = self
            .packages
            .get(package)
            .ok_or_else(|| format!("no package {package} in the workspace"))?;
        match (default_run, bins.as_slice()) {
            (Some(d), _) => Ok(d.clone()),
            (None, [only]) => Ok(only.clone()),
            (None, []) => Err(format!("package {package} has no binary")),
            (None, _) => Err(format!(
                "cargo run could not determine which binary to run: {package} has {} and no \
                 default-run",
                bins.join(", ")
            )),
        }
    }

    /// The binaries `cargo install --path path` installs.
    fn bins_at(&self, path: &str) -> Result<Vec<String>, String> {
        let dir = self.root.join(path);
        self.packages
            .values()
            .find(|(d, _, _)| *d == dir)
            .map(|(_, bins, _)| bins.clone())
            .ok_or_else(|| format!("no workspace package at {path}"))
    }
}

/// A README line made runnable here: the text to run, and whether it starts a project
/// program (its exit status is checked).
struct Runnable {
    text: String,
    project: bool,
}

/// Rewrites the `cargo` commands of `line` (see the module docs); `bins` is
/// `target/<profile>`.
fn rewrite(
    ws: &Workspace,
    bins: &Path,
    line: &str,
    installed: &mut Vec<String>,
) -> Result<Runnable, String> {
    let mut text = line.to_owned();
    let mut project = false;
    // Rewrite from the end, so that earlier spans stay valid.
    for seg in segments(line).iter().rev() {
        let words = command_words(seg);
        let Some(first) = words.first() else { continue };
        if PROGRAMS.contains(&first.text.as_str()) {
            project = true;
            continue;
        }
        if first.text != "cargo" {
            continue;
        }
        let sub = words.get(1).map(|w| w.text.as_str());
        let (replacement, rest) = match sub {
            Some("run") => cargo_run(ws, bins, &words[2..])?,
            Some("xtask") => (built(&bins.join("xtask"))?, 2),
            Some("install") => {
                let path = words
                    .windows(2)
                    .find(|w| w[0].text == "--path")
                    .map(|w| w[1].text.clone())
                    .ok_or("cargo install without --path")?;
                installed.extend(ws.bins_at(&path)?);
                (":".to_owned(), words.len())
            }
            other => return Err(format!("cargo {other:?} is not a README command here")),
        };
        project = true;
        let end = if rest < words.len() {
            words[rest].start
        } else {
            words.last().map_or(first.end, |w| w.end)
        };
        text.replace_range(first.start..end, &format!("{replacement} "));
    }
    Ok(Runnable { text, project })
}

/// `cargo run [FLAGS] [--] ARGS` (the words after `run`): the binary, and the index (in
/// the command's words) of its first argument.
fn cargo_run(ws: &Workspace, bins: &Path, words: &[Word]) -> Result<(String, usize), String> {
    let (mut package, mut example, mut bin) = (None, None, None);
    let mut i = 0;
    while i < words.len() {
        let w = words[i].text.as_str();
        let value = || words.get(i + 1).map(|v| v.text.clone());
        match w {
            "--release" | "-q" | "--quiet" | "--locked" | "--all-features" => {}
            "-p" | "--package" => {
                package = value();
                i += 1;
            }
            "--example" => {
                example = value();
                i += 1;
            }
            "--bin" => {
                bin = value();
                i += 1;
            }
            "--features" | "-F" => i += 1,
            "--" => {
                i += 1;
                break;
            }
            _ if w.starts_with("--features=") => {}
            _ => break,
        }
        i += 1;
    }
    let path = match (example, bin, package) {
        (Some(e), _, _) => bins.join("examples").join(e),
        (None, Some(b), _) => bins.join(b),
        (None, None, Some(p)) => bins.join(ws.run_target(&p)?),
        (None, None, None) => bins.join(ws.run_target("rdt-pqos")?),
    };
    // + 2: `cargo run`
    Ok((built(&path)?, i + 2))
}

/// `path` as text, when Cargo built it.
fn built(path: &Path) -> Result<String, String> {
    if path.exists() {
        return Ok(path.display().to_string());
    }
    Err(format!(
        "{} is missing: `cargo test --workspace --all-features` builds every binary and \
         example (a test of one package does not)",
        path.display()
    ))
}

/// The bash script of a block: its commands in order, project commands checked.
fn script(block: &Block, commands: &[(usize, Runnable)], sandbox: &Path) -> String {
    let mut s = String::from(
        "set -m -o pipefail\n\
         stop_jobs() { for j in $(jobs -p); do kill -INT -- -$j 2>/dev/null; done; wait; }\n\
         trap stop_jobs EXIT\n",
    );
    let tmp_rdt = sandbox.join("rdt").display().to_string();
    for (n, cmd) in commands {
        let text = cmd.text.replace("/tmp/rdt", &tmp_rdt);
        let background = text.trim_end().ends_with('&');
        let file = &block.file;
        s.push_str(&format!("echo '+ {file}:{n}' >&2\n{text}\n"));
        if cmd.project && !background {
            s.push_str(&format!(
                "rc=$?; if [ $rc -ne 0 ]; then echo '{file}:{n}: exit status '$rc >&2; exit 97; fi\n"
            ));
        }
        if background && text.contains("rdt-sim") && text.contains(" mount ") {
            // the mount serves its files a moment after it starts
            let dir = segments(&text)
                .last()
                .and_then(|w| w.last().map(|w| w.text.clone()))
                .unwrap_or_default();
            s.push_str(&format!(
                "for _ in $(seq 200); do [ -e {dir}/.sim/model ] && break; sleep 0.05; done\n\
                 [ -e {dir}/.sim/model ] || {{ echo '{file}:{n}: the mount never came up' >&2; exit 98; }}\n"
            ));
        }
    }
    s
}

/// `target/<profile>`, where Cargo put this test's binary's siblings.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_owned()
}

/// Runs one block in a sandbox; `Err` with its output when a project command failed.
fn run_block(
    block: &Block,
    commands: &[(usize, Runnable)],
    files: &[(String, String)],
    path_dir: &Path,
) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = tempfile::tempdir().expect("sandbox");
    let dir = sandbox.path();
    for sub in ["home", "run", "rdt"] {
        std::fs::create_dir(dir.join(sub)).expect("sandbox dir");
    }
    std::fs::set_permissions(dir.join("run"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("a README file");
    }
    let path = format!(
        "{}:{}",
        path_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script(block, commands, dir))
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir.join("home"))
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RDT_IFACE")
        .env_remove("RDT_SYSROOT")
        .env_remove("RDT_SIM")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > BLOCK_TIMEOUT {
            let pgid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            return Err(format!(
                "{}:{}: the block ran longer than {BLOCK_TIMEOUT:?}",
                block.file, block.line
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("output");
    if status.success() {
        return Ok(());
    }
    Err(format!(
        "{}:{}: a command of the block failed ({status}):\n--- stderr\n{}\n--- stdout\n{}",
        block.file,
        block.line,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    ))
}

/// README.md first (its Install decides PATH), then the guide's chapters, each with its
/// blocks; each document's `file` blocks are its own.
fn documents(root: &Path) -> Vec<(String, Vec<Block>)> {
    let mut all = Vec::new();
    let mut guide = Vec::new();
    let mut stack = vec![root.join("docs/guide/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("the guide") {
            let path = entry.expect("an entry").path();
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                guide.push(path);
            }
        }
    }
    guide.sort();
    for doc in std::iter::once(root.join("README.md")).chain(guide) {
        let text = std::fs::read_to_string(&doc).expect("a document");
        let rel = doc
            .strip_prefix(root)
            .expect("under the root")
            .display()
            .to_string();
        all.push((rel.clone(), blocks(&rel, &text)));
    }
    all
}

#[test]
fn every_readme_line_that_runs_a_project_program_succeeds() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the README's mounted platforms need root (FUSE): run the tests as root (scripts/test)"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = Workspace::read(root);
    let bins = profile_dir();
    let all = documents(root);
    // What each block runs, the Install lines first resolved (they decide PATH).
    let mut installed = Vec::new();
    let mut files: Vec<(String, String)> = Vec::new();
    let mut runs = Vec::new();
    let mut errors = Vec::new();
    let mut named = Vec::new();
    for (doc, doc_blocks) in &all {
        files.clear();
        for block in doc_blocks {
            if let Some(Directive::File(name)) = &block.directive {
                let text: Vec<&str> = block.body.iter().map(|(_, l)| l.as_str()).collect();
                files.push((name.clone(), text.join("\n") + "\n"));
                continue;
            }
            let mut commands = Vec::new();
            for (n, line) in block.commands() {
                for seg in segments(&line) {
                    if let Some(w) = command_words(&seg).first()
                        && PROGRAMS.contains(&w.text.as_str())
                    {
                        named.push((format!("{doc}:{n}"), w.text.clone()));
                    }
                }
                if matches!(block.directive, Some(Directive::Skip(_))) {
                    continue; // not run: its `cargo` lines need not be ones this test runs
                }
                match rewrite(&ws, &bins, &line, &mut installed) {
                    Ok(r) => commands.push((n, r)),
                    Err(e) => errors.push(format!("{doc}:{n}: {line}: {e}")),
                }
            }
            if let Some(Directive::Skip(why)) = &block.directive {
                assert!(!why.is_empty(), "{doc}:{}: skip needs a reason", block.line);
                continue;
            }
            if !commands.iter().any(|(_, r)| r.project) {
                continue;
            }
            match &block.directive {
                Some(Directive::Ci(which)) => {
                    assert!(
                        which == "main-job" || which == "test",
                        "{doc}:{}: ci {which}?",
                        block.line
                    );
                }
                Some(Directive::Skip(why)) => {
                    assert!(!why.is_empty(), "{doc}:{}: skip needs a reason", block.line);
                }
                // console blocks are transcripts, run and compared by tests/docs.rs
                _ if block.lang == "console" => {}
                _ => runs.push((block, commands, files.clone())),
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    // Install must install every program the README runs by name.
    for (n, program) in &named {
        assert!(
            installed.contains(program),
            "{n} runs {program}, which Install does not install ({installed:?})"
        );
    }
    installed.sort();
    installed.dedup(); // README.md and the guide's Install both install them
    let path_dir = tempfile::tempdir().expect("PATH dir");
    for program in &installed {
        std::os::unix::fs::symlink(bins.join(program), path_dir.path().join(program))
            .expect("symlink");
    }
    assert!(
        runs.len() >= 4,
        "the README's and the guide's runnable sh blocks: {}",
        runs.len()
    );
    // The blocks are independent (a sandbox each): run them side by side.
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(block, commands, files)| {
                s.spawn(|| run_block(block, commands, files, path_dir.path()))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("a block's thread").err())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_package_with_two_binaries_and_no_default_run_is_what_cargo_refuses() {
    // The bug of the README's first command: `cargo run -p pqos-cli` once had pqos and
    // rdtset and no default-run.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nmembers = [\"cli\"]\n[package]\nname = \"top\"\n",
    )
    .expect("manifest");
    std::fs::create_dir(root.join("cli")).expect("dir");
    std::fs::write(
        root.join("cli/Cargo.toml"),
        "[package]\nname = \"cli\"\n[[bin]]\nname = \"a\"\n[[bin]]\nname = \"b\"\n",
    )
    .expect("manifest");
    let ws = Workspace::read(root);
    let e = ws.run_target("cli").expect_err("two binaries");
    assert!(e.contains("could not determine which binary"), "{e}");
    // and the real workspace answers pqos
    let real = Workspace::read(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(real.run_target("pqos-cli").as_deref(), Ok("pqos"));
}

#[test]
fn lines_are_split_into_commands_outside_quotes() {
    let segs =
        segments(r#"mkdir -p /tmp/rdt && X=1 cargo run -p a -- -e "llc:1=0xf;llc:2=0x3" & # c"#);
    let words: Vec<Vec<&str>> = segs
        .iter()
        .map(|s| s.iter().map(|w| w.text.as_str()).collect())
        .collect();
    assert_eq!(
        words,
        vec![
            vec!["mkdir", "-p", "/tmp/rdt"],
            vec![
                "X=1",
                "cargo",
                "run",
                "-p",
                "a",
                "--",
                "-e",
                "\"llc:1=0xf;llc:2=0x3\""
            ],
        ]
    );
    assert_eq!(command_words(&segs[1])[0].text, "cargo");
    let d = blocks(
        "README.md",
        "<!-- readme: skip (no RDT) -->\n\n```console\n$ pqos -d\nout\n```\ntext\n```sh\nls\n```\n",
    );
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].directive, Some(Directive::Skip("(no RDT)".into())));
    assert_eq!(d[0].commands(), vec![(4, "pqos -d".to_owned())]);
    assert_eq!(d[1].directive, None, "text between ends a directive");
}

#[test]
fn the_test_command_without_root_stops_before_building_and_says_what_is_missing() {
    use std::os::unix::process::CommandExt as _;
    // As an unprivileged user (nobody, dropped to from root: the tests run as root), the
    // README's test command must refuse at once, naming root and how to get it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts/test"))
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    if nix::unistd::geteuid().is_root() {
        cmd.uid(65534).gid(65534);
    }
    let start = Instant::now();
    let out = cmd.output().expect("bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot run the tests; nothing was built")
            && stderr.contains("- root: ")
            && stderr.contains("sudo"),
        "{stderr}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "it built something"
    );
}

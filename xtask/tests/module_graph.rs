//! Architecture checks over the workspace's source text.
//!
//! - **No module import cycle inside any crate.** Every target of every workspace package
//!   (`cargo metadata --no-deps`: libraries, binaries, tests, benches, examples) is a crate; its
//!   `mod` declarations give its modules. The nodes of the graph are the crate root's
//!   *top-level* modules (a submodule counts as the top-level module it is in:
//!   `resctrl/mon.rs` is `resctrl`), and a path that names another top-level module, `a` in
//!   `crate::a::…` (or in `super::…::a::…` where the `super`s climb to the root), written in
//!   module `b` is an edge `b -> a`. A cycle of that graph fails the test, printed with the
//!   file and line of each edge.
//!
//!   What does not count: code under `#[cfg(test)]` (tests may reach anywhere), comments and
//!   doc links (not dependencies), and names the crate root re-exports (`crate::SimPlatform`):
//!   the root is the crate's public face, and a type used through it is not an import of
//!   the module that defines it. (Counted, they would join most of `rdt-core`'s modules,
//!   whose types name each other through the root, into one component; the rule here is
//!   about the module structure a reader sees in `use` lines.) A cycle between submodules of
//!   one top-level module is that module's own business.
//!
//!   On the tree before issue 23 this finds one cycle, in `rdt-sim`: `platform` (the hardware
//!   model) held the kernel model's saved state and release (`crate::resctrl::…`), while
//!   `resctrl`, `sysregs` and `uncore` reached back for the numeric helpers
//!   (`crate::platform::u64_to_f64`, `Accum`).
//! - **The facade knows no simulator control plane**: no `.sim` in the root package's `src/`
//!   (the simulator's adapter, `rdt_sim::attach`, injects what it needs through
//!   `OpenOptions`).
//!
//! The parser is a small lexer (comments and string literals removed, line structure kept) and
//! relies on rustfmt's layout for the end of a `#[cfg(test)]` item (the `}` at the item's
//! indentation); `cargo fmt` is part of the project's checks.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root directory.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is a directory of the workspace")
        .to_path_buf()
}

/// Every target's root file of every workspace package: (package/target name, root file).
fn crate_roots() -> Vec<(String, PathBuf)> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut roots = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("package name");
        for target in package["targets"].as_array().expect("targets") {
            let kind = target["kind"][0].as_str().unwrap_or("?");
            let src = target["src_path"].as_str().expect("src_path");
            let target_name = target["name"].as_str().unwrap_or("?");
            roots.push((format!("{name} {kind} {target_name}"), PathBuf::from(src)));
        }
    }
    roots.sort();
    roots.dedup_by(|a, b| a.1 == b.1);
    roots
}

/// `text` with comments removed and string and char literals emptied (`""`, `' '`); newlines
/// are kept so that line numbers and indentation survive.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == b'r'
            && (i == 0 || !ident(b[i - 1]) || (b[i - 1] == b'b' && (i < 2 || !ident(b[i - 2]))))
            && matches!(b.get(i + 1), Some(b'#' | b'"'))
        {
            // A raw string r#"…"#, or an identifier that starts with r followed by `#`.
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            j += 1;
            loop {
                match b.get(j) {
                    None => break,
                    Some(b'"') if b[j + 1..].iter().take(hashes).all(|&h| h == b'#') => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(b'\n') => out.push('\n'),
                    _ => {}
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                if b.get(i) == Some(&b'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{…}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if let Some(len) = std::str::from_utf8(&b[i + 1..])
                .ok()
                .and_then(|s| s.chars().next())
                .map(char::len_utf8)
                .filter(|len| b.get(i + 1 + len) == Some(&b'\''))
            {
                out.push_str("' '");
                i += len + 2;
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            // Copy one whole UTF-8 character.
            let len = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + len]);
            i += len;
        }
    }
    out
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Blanks the items under a `#[cfg(test)]` (or another `cfg` that needs `test`) attribute,
/// keeping the line count.
fn drop_test_items(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut keep = vec![true; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        let is_test_cfg = t.starts_with("#[cfg(")
            && t.split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == "test")
            && !t.contains("not(test");
        if !is_test_cfg {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < lines.len() && lines[i].trim_start().starts_with("#[") {
            i += 1;
        }
        if i < lines.len() {
            let item = lines[i];
            let opens = item.matches(['{', '(', '[']).count();
            let closes = item.matches(['}', ')', ']']).count();
            if opens != closes {
                let at = indent(item);
                i += 1;
                while i < lines.len()
                    && !(indent(lines[i]) == at && lines[i].trim_start().starts_with(['}', ')']))
                {
                    i += 1;
                }
            } else if !item.trim_end().ends_with([';', '}']) {
                // A header over several lines (`use a::{` … `};` is caught above).
                while i < lines.len() && !lines[i].trim_end().ends_with([';', '}']) {
                    i += 1;
                }
            }
        }
        for k in keep.iter_mut().take((i + 1).min(lines.len())).skip(start) {
            *k = false;
        }
        i += 1;
    }
    lines
        .iter()
        .zip(keep)
        .map(|(l, k)| if k { *l } else { "" })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An identifier at the start of `s` (after spaces).
fn ident_at(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !c.is_alphanumeric() && c != '_')
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// One source file of a crate: its module depth below the root (1 for a top-level module's
/// own file), the top-level module it belongs to, and its code (comments, strings and test
/// items removed).
struct File {
    path: PathBuf,
    depth: usize,
    top: String,
    code: String,
}

/// The `mod NAME;` declarations of `code` outside inline modules.
fn mod_decls(code: &str) -> Vec<String> {
    let mut mods = Vec::new();
    for line in code.lines() {
        let t = line.trim();
        let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        if let Some(rest) = t.strip_prefix("mod ")
            && let Some(name) = ident_at(rest)
            && rest.trim_end().ends_with(';')
        {
            mods.push(name.to_string());
        }
    }
    mods
}

/// The `#[path = "FILE"]` attributes of `file`'s out-of-line modules, by module name: FILE
/// relative to `file`'s directory, as rustc resolves it. Read from the raw text (the code
/// the graph is built from has its strings removed).
fn path_attrs(file: &Path) -> Vec<(String, PathBuf)> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let dir = file.parent().expect("a source file is in a directory");
    let mut out = Vec::new();
    let mut pending: Option<&str> = None;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[path = \"") {
            pending = rest.strip_suffix("\"]");
        } else if line.starts_with("#[") || line.starts_with("//") {
            // other attributes and comments between the path and its `mod`
        } else {
            if let Some(p) = pending.take() {
                let decl = line
                    .trim_start_matches("pub ")
                    .trim_start_matches("pub(crate) ");
                if let Some(name) = decl.strip_prefix("mod ").and_then(ident_at) {
                    out.push((name.to_string(), dir.join(p)));
                }
            }
            pending = None;
        }
    }
    out
}

fn read_code(path: &Path) -> String {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    drop_test_items(&strip(&text))
}

/// The files of the crate whose root is `root`, each with its top-level module.
fn crate_files(root: &Path) -> Vec<File> {
    let root_code = read_code(root);
    let dir = root.parent().expect("a root file is in a directory");
    let mut files = Vec::new();
    let mut todo: Vec<(PathBuf, usize, String)> = Vec::new();
    let find = |dir: &Path, name: &str, declared_in: &Path| {
        if let Some((_, p)) = path_attrs(declared_in).into_iter().find(|(n, _)| n == name) {
            assert!(p.is_file(), "module {name}: no {}", p.display());
            return p;
        }
        let flat = dir.join(format!("{name}.rs"));
        let nested = dir.join(name).join("mod.rs");
        if flat.is_file() {
            flat
        } else {
            assert!(nested.is_file(), "module {name}: no {}", flat.display());
            nested
        }
    };
    for name in mod_decls(&root_code) {
        todo.push((find(dir, &name, root), 1, name));
    }
    while let Some((path, depth, top)) = todo.pop() {
        let code = read_code(&path);
        let sub_dir = if path.file_name().is_some_and(|n| n == "mod.rs") {
            path.parent().expect("in a directory").to_path_buf()
        } else {
            path.with_extension("")
        };
        for name in mod_decls(&code) {
            todo.push((find(&sub_dir, &name, &path), depth + 1, top.clone()));
        }
        files.push(File {
            path,
            depth,
            top,
            code,
        });
    }
    files
}

/// The first path segments after `prefix` in `code` (`crate::a::b` gives `a`;
/// `crate::{a::b, C}` gives `a` and `C`), with the line of each.
fn segments_after<'a>(code: &'a str, at: usize, out: &mut Vec<(&'a str, usize)>, line: usize) {
    let rest = code[at..].trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        // The first identifier of each element of the group at depth 1.
        let mut depth = 1;
        let mut element_start = true;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => element_start = true,
                c if element_start && depth == 1 && !c.is_whitespace() => {
                    element_start = false;
                    if let Some(id) = ident_at(&group[k..]) {
                        out.push((id, line));
                    }
                }
                _ => {}
            }
        }
    } else if let Some(id) = ident_at(rest) {
        out.push((id, line));
    }
}

/// The root-level names a file's code reaches: `crate::X`, `$crate::X`, and `super::…::X`
/// where the `super`s climb to the root. (name, 1-based line).
fn root_paths(file: &File) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let code = file.code.as_str();
    // Inline modules (`mod errno { … }`) deepen `super::`; tracked by rustfmt indentation.
    let mut inline: Vec<usize> = Vec::new();
    let mut offset = 0;
    for (n, line) in code.split('\n').enumerate() {
        let t = line.trim_start();
        if inline.last() == Some(&indent(line)) && t.starts_with('}') {
            inline.pop();
        }
        let decl = t
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ");
        if decl.starts_with("mod ") && decl.trim_end().ends_with('{') {
            inline.push(indent(line));
        }
        let depth = file.depth + inline.len();
        let mut search = 0;
        while let Some(k) = line[search..].find("crate::") {
            let at = search + k;
            let before = line[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                segments_after(code, offset + at + "crate::".len(), &mut out, n + 1);
            }
            search = at + "crate::".len();
        }
        let mut search = 0;
        while let Some(k) = line[search..].find("super::") {
            let at = search + k;
            let before = line[..at].chars().next_back();
            let mut end = at;
            let mut supers = 0;
            while line[end..].starts_with("super::") {
                supers += 1;
                end += "super::".len();
                end += line[end..].len() - line[end..].trim_start().len();
            }
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                && supers >= depth
            {
                segments_after(code, offset + end, &mut out, n + 1);
            }
            search = end;
        }
        offset += line.len() + 1;
    }
    out
}

/// Edges between the top-level modules of the crate at `root`: (from, to) -> where (file:line).
fn module_graph(root: &Path) -> BTreeMap<(String, String), String> {
    let files = crate_files(root);
    let modules: BTreeSet<String> = files.iter().map(|f| f.top.clone()).collect();
    let mut edges = BTreeMap::new();
    for file in &files {
        for (name, line) in root_paths(file) {
            if modules.contains(name) && name != file.top {
                edges
                    .entry((file.top.clone(), name.to_string()))
                    .or_insert_with(|| format!("{}:{line}", file.path.display()));
            }
        }
    }
    edges
}

/// The strongly connected components of more than one node (Tarjan).
fn cycles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        adj: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.adj.get(v).cloned().unwrap_or_default() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        adj: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for (a, b) in edges.keys() {
        t.adj.entry(a.as_str()).or_default().push(b.as_str());
        t.adj.entry(b.as_str()).or_default();
    }
    let nodes: Vec<&str> = t.adj.keys().copied().collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// The cycles of the crate at `root`, described with the edges inside them.
fn cycle_report(name: &str, root: &Path) -> String {
    let edges = module_graph(root);
    let mut report = String::new();
    for scc in cycles(&edges) {
        let _ = writeln!(
            report,
            "{name} ({}): modules {scc:?} form a cycle:",
            root.display()
        );
        for ((a, b), at) in &edges {
            if scc.contains(a) && scc.contains(b) {
                let _ = writeln!(report, "  {a} -> {b}  ({at})");
            }
        }
    }
    report
}

#[test]
fn no_crate_of_the_workspace_has_a_module_import_cycle() {
    let mut report = String::new();
    let roots = crate_roots();
    assert!(roots.len() > 10, "{roots:?}");
    for (name, root) in roots {
        report.push_str(&cycle_report(&name, &root));
    }
    assert!(report.is_empty(), "module import cycles:\n{report}");
}

#[test]
fn the_check_finds_a_cycle_through_super_and_ignores_tests_comments_and_strings() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("b")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\npub mod b;\nmod c;\npub use a::Thing;\n",
    )
    .unwrap();
    // a -> c only in a test, a comment and a string: not an edge; a -> b through the root's
    // re-export: not an edge either.
    std::fs::write(
        src.join("a.rs"),
        "//! [`crate::c`]\npub struct Thing(crate::Other);\nconst S: &str = \"crate::c\";\n\
         #[cfg(test)]\nmod tests {\n    use crate::c::X;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod inner;\npub struct Other;\n").unwrap();
    // b -> a from b's submodule, climbing to the root with super.
    std::fs::write(
        src.join("b/inner.rs"),
        "use super::super::{a::Thing, b};\nfn f() -> Thing { todo!() }\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "pub struct X;\n").unwrap();
    let root = src.join("lib.rs");
    let edges = module_graph(&root);
    let pairs: Vec<(&str, &str)> = edges
        .keys()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(pairs, [("b", "a")]);
    assert!(cycle_report("t", &root).is_empty());
    // a -> b closes the cycle.
    std::fs::write(src.join("a.rs"), "pub struct Thing(crate::b::Other);\n").unwrap();
    let report = cycle_report("t", &root);
    assert!(
        report.contains(r#"modules ["a", "b"] form a cycle"#),
        "{report}"
    );
    assert!(
        report.contains("a -> b") && report.contains("b -> a"),
        "{report}"
    );
}

#[test]
fn the_facade_knows_no_simulator_control_path() {
    let mut found = Vec::new();
    let mut todo = vec![workspace().join("src")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                for (n, line) in text.lines().enumerate() {
                    if line.contains(".sim") {
                        found.push(format!("{}:{}: {line}", path.display(), n + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the facade names the simulator's control files (inject them through OpenOptions):\n{}",
        found.join("\n")
    );
}

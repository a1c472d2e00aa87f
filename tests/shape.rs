//! The shape of the library, checked over its sources (issue 23): a small `Backend`, a
//! facade that forwards nothing an extension gives, one CAT check.

use std::path::Path;

fn source(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names of the methods declared in the block that starts at the line `header` and
/// ends at the next line that is `}` alone.
fn methods_of(text: &str, header: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "no block `{header}`");
    lines
        .take_while(|l| *l != "}")
        .filter_map(|l| l.strip_prefix("    fn "))
        .map(|l| l.split(['(', '<']).next().unwrap_or_default().to_owned())
        .collect()
}

/// The core of `Backend` stays small (at most sixteen methods: what every interface does);
/// what only some platforms or interfaces have is an extension, reached by an accessor that
/// returns `Option<&mut dyn ...Ops>` (OS, MSR, named classes, writers, regions, I/O RDT), at
/// most eight of them.
#[test]
fn the_backend_trait_has_a_small_core_and_extensions_behind_accessors() {
    let text = source("crates/rdt-core/src/backend.rs");
    let methods = methods_of(&text, "pub trait Backend {");
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("pub trait Backend {"))
        .take_while(|l| *l != "}")
        .collect();
    let accessors: Vec<&String> = methods
        .iter()
        .filter(|m| {
            body.iter()
                .any(|l| l.starts_with(&format!("    fn {m}(&mut self) -> Option<&mut dyn ")))
        })
        .collect();
    let core = methods.len() - accessors.len();
    assert!(
        (12..=16).contains(&core),
        "{core} core methods: {methods:?} (accessors {accessors:?})"
    );
    assert!(accessors.len() <= 8, "{accessors:?}");
    for accessor in ["os", "msr", "names", "writers", "regions", "io_rdt"] {
        assert!(
            accessors.iter().any(|m| *m == accessor),
            "{accessor}: {accessors:?}"
        );
    }
}

#[test]
fn the_facade_forwards_the_core_trait_only() {
    let core = methods_of(
        &source("crates/rdt-core/src/backend.rs"),
        "pub trait Backend {",
    );
    let lib = source("src/lib.rs");
    let forwarded = methods_of(&lib, "impl Backend for Rdt {");
    for m in &forwarded {
        assert!(
            core.contains(m),
            "src/lib.rs forwards `{m}`, not a core method"
        );
    }
    for ability in ["OsOps", "MsrOps", "NamedClasses", "Writers", "BackendExt"] {
        for file in ["src/lib.rs", "src/open.rs", "src/sim.rs", "src/oci.rs"] {
            let text = source(file);
            assert!(
                !text
                    .lines()
                    .any(|l| l.starts_with("impl") && l.contains(ability) && l.contains(" for ")),
                "{file} implements {ability} by hand"
            );
        }
    }
}

/// The CDP shape of a CAT write (one mask with CDP off, a data and a code mask with it on)
/// is checked in one place, `Capabilities::check_cat`, for the planner, both backends and
/// the fake.
#[test]
fn the_cdp_shape_check_exists_once() {
    let files = [
        "crates/rdt-core/src/caps.rs",
        "crates/rdt-core/src/fake.rs",
        "crates/rdt-core/src/transaction/planner.rs",
        "crates/rdt-msr/src/backend/alloc.rs",
        "crates/rdt-resctrl/src/backend/alloc.rs",
    ];
    let copies: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| source(f).contains("so the class needs a data and a code mask"))
        .collect();
    assert_eq!(copies, ["crates/rdt-core/src/caps.rs"]);
    for f in &files[1..] {
        assert!(source(f).contains("check_cat("), "{f} calls check_cat");
    }
}

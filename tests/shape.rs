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

#[test]
fn the_backend_trait_has_at_most_twenty_methods() {
    let methods = methods_of(
        &source("crates/rdt-core/src/backend.rs"),
        "pub trait Backend {",
    );
    assert!(
        (15..=20).contains(&methods.len()),
        "{} methods: {methods:?}",
        methods.len()
    );
    for accessor in ["os", "msr", "names", "writers"] {
        assert!(methods.iter().any(|m| m == accessor), "{accessor}");
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

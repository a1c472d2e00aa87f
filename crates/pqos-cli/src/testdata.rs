//! Real pqos output samples kept in `tests/data/pqos/` (provenance in its SOURCES.md).

/// The text of a sample.
pub fn sample(name: &str) -> String {
    let path = format!("{}/tests/data/pqos/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The sample without v25.04's two-line `NOTE:  Mixed use of MSR and kernel interfaces`
/// banner, which `main` prints, not the report functions under test.
pub fn without_note_banner(text: &str) -> String {
    let mut lines = text.lines().peekable();
    if lines
        .peek()
        .is_some_and(|l| l.starts_with("NOTE:  Mixed use"))
    {
        lines.next();
        lines.next();
    }
    lines.flat_map(|l| [l, "\n"]).collect()
}

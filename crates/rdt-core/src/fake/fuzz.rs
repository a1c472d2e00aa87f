//! Fuzzing as part of the tests: [`fuzz`] runs a parser on a fixed number of generated
//! inputs with proptest, asserts that it never panics (proptest catches the panic and
//! shrinks the input), lets the caller assert what an error must say, and reports the case
//! count on stderr (`fuzz NAME: N cases`), past libtest's output capture, so the CI log shows
//! how much each parser was fuzzed.
//!
//! [`text`] makes the inputs: runs of a parser's own vocabulary (keywords, separators),
//! numbers of every size, and arbitrary characters (non-ASCII, control characters), so that
//! most inputs get past the first token.
//!
//! The count is [`DEFAULT_CASES`] unless the environment says `RDT_FUZZ_CASES=N` (a longer
//! run by hand); every fuzz test of the workspace together takes a few seconds.

use std::io::Write as _;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per parser in CI.
pub const DEFAULT_CASES: u32 = 2000;

/// The number of cases: `RDT_FUZZ_CASES`, else [`DEFAULT_CASES`].
#[must_use]
pub fn cases() -> u32 {
    std::env::var("RDT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Runs `check` on [`cases`] values of `strategy`; `check` returns `Err` (with
/// `prop_assert!`) when an error does not say what it should.
///
/// # Panics
/// When `check` fails or panics for some input: the panic message holds the shrunk input.
pub fn fuzz<S: Strategy>(
    name: &str,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, check) {
        panic!("fuzz {name}: {e}");
    }
    let _ = writeln!(std::io::stderr(), "fuzz {name}: {cases} cases, no panic");
}

/// Text made of `vocabulary` words, numbers (decimal, hexadecimal, beyond 64 bits) and
/// arbitrary characters, at most `max_pieces` of them.
pub fn text(
    vocabulary: &'static [&'static str],
    max_pieces: usize,
) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => proptest::sample::select(vocabulary).prop_map(str::to_owned),
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| format!("{n:#x}")),
        1 => Just("18446744073709551616".to_owned()),
        1 => (0u32..1000).prop_map(|n| n.to_string()),
        1 => any::<char>().prop_map(String::from),
        1 => Just("é".to_owned()),
    ];
    proptest::collection::vec(piece, 0..=max_pieces).prop_map(|v| v.concat())
}

/// Whether `message` quotes `input`, or a non-empty piece of it split at one of
/// `separators` (an item of a `;` list, `=` of `llc:1=`), or split at all of them and at
/// whitespace (a number of a range): the token an error is about.
#[must_use]
pub fn names_a_token(message: &str, input: &str, separators: &[char]) -> bool {
    let input = input.trim();
    let quoted = |piece: &str| !piece.trim().is_empty() && message.contains(piece.trim());
    message.contains(input)
        || separators.iter().any(|c| input.split(*c).any(quoted))
        || input
            .split(|c: char| separators.contains(&c) || c.is_whitespace())
            .any(quoted)
}

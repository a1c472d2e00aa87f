//! Names as they may be shown on a terminal: [`Shown`].
//!
//! Class and group names come from files and from other tools' resctrl groups, so they may
//! hold characters that change what a terminal shows: control characters (an escape
//! sequence, a carriage return that overwrites the line), bidirectional overrides and
//! isolates that reorder the text after them (U+202E shows `txt.exe` as `exe.txt`), and
//! zero-width characters that make two different names look alike. Every place that puts
//! a name on a terminal (pqos's `-s`, the lines of `--apply`, error messages) writes it
//! through [`Shown`], which writes those characters as escapes.
//!
//! Reference: Unicode Standard Annex #9 (the bidirectional algorithm's explicit
//! formatting characters); CVE-2021-42574 ("Trojan Source").

use std::fmt;

/// A name written for a terminal: every character as is, except control characters
/// (C0, DEL, C1), the bidirectional formatting characters (U+061C, U+200E, U+200F,
/// U+202A-U+202E, U+2066-U+2069), invisible and zero-width ones (U+00AD, U+180E,
/// U+200B-U+200D, U+2028, U+2029, U+2060-U+2064, U+FEFF) and the backslash, which are
/// written as `\u{202e}` (the backslash as `\\`, so that an escape in the output always
/// stands for one character of the name).
///
/// ```
/// use rdt_core::Shown;
/// assert_eq!(Shown("db").to_string(), "db");
/// assert_eq!(Shown("a\u{202e}txt.exe").to_string(), "a\\u{202e}txt.exe");
/// assert_eq!(Shown("x\x1b[2Jy").to_string(), "x\\u{1b}[2Jy");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown<'a>(pub &'a str);

/// Whether `c` is written as an escape by [`Shown`].
#[must_use]
pub fn is_escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{00ad}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(|c| c == '\\' || is_escaped(c)) {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or('\\');
            if c == '\\' {
                f.write_str("\\\\")?;
            } else {
                write!(f, "\\u{{{:x}}}", u32::from(c))?;
            }
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_names_are_unchanged_and_every_hiding_character_is_escaped() {
        for name in ["db", "web-1", "kubepods_burstable", "名前", "ü"] {
            assert_eq!(Shown(name).to_string(), name);
        }
        let hiding = [
            '\u{0}', '\u{1b}', '\r', '\n', '\u{7f}', '\u{85}', '\u{9b}', '\u{061c}', '\u{00ad}',
            '\u{180e}', '\u{200b}', '\u{200c}', '\u{200d}', '\u{200e}', '\u{200f}', '\u{2028}',
            '\u{2029}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2060}',
            '\u{2064}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{feff}',
        ];
        for c in hiding {
            let shown = Shown(&format!("a{c}b")).to_string();
            assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)));
            assert!(shown.chars().all(|c| !is_escaped(c)), "{shown:?}");
        }
        assert_eq!(Shown("a\\u{202e}").to_string(), "a\\\\u{202e}");
    }
}

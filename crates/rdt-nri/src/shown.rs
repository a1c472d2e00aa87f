//! Strings from the runtime as the plugin logs them: [`shown`].

use std::fmt;

use rdt_pqos::Shown;

/// The most bytes of one runtime-supplied string a log line or an error message shows.
pub const MAX_SHOWN: usize = 256;

/// A string from the runtime (an annotation value, a container id or name, a pod's name, a
/// status message) as it may go into a log line: at most [`MAX_SHOWN`] bytes of it (cut at
/// a character boundary, followed by `…(N bytes)` with its whole length), every control,
/// bidirectional or invisible character and the backslash escaped as [`Shown`] writes them
/// (a newline cannot forge a log line, ESC cannot drive a terminal, NUL cannot cut a line).
/// The runtime's strings are protobuf strings, UTF-8 by decoding (a message with any other
/// bytes in a string does not decode and is refused whole).
///
/// ```
/// use rdt_nri::shown;
/// assert_eq!(shown("gold").to_string(), "gold");
/// assert_eq!(shown("a\nINFO forged").to_string(), "a\\u{a}INFO forged");
/// let long = "x".repeat(1000);
/// assert_eq!(shown(&long).to_string(), format!("{}…(1000 bytes)", "x".repeat(256)));
/// ```
#[must_use]
pub fn shown(s: &str) -> Logged<'_> {
    Logged(s)
}

/// A runtime-supplied string for a log line ([`shown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logged<'a>(&'a str);

impl fmt::Display for Logged<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.len() <= MAX_SHOWN {
            return Shown(s).fmt(f);
        }
        let mut end = MAX_SHOWN;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        write!(f, "{}…({} bytes)", Shown(&s[..end]), s.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newline_esc_nul_and_backslash_are_escaped_and_long_values_cut() {
        assert_eq!(
            shown("a\nb\x1b[31mc\0d\\e").to_string(),
            "a\\u{a}b\\u{1b}[31mc\\u{0}d\\\\e"
        );
        let v = "é".repeat(200); // 400 bytes: cut at a character boundary
        let s = shown(&v).to_string();
        assert!(s.starts_with(&"é".repeat(128)), "{s}");
        assert!(s.ends_with("…(400 bytes)"), "{s}");
        let big = "\n".repeat(100_000);
        let s = shown(&big).to_string();
        assert!(!s.contains('\n') && s.len() < 2000, "{}", s.len());
    }
}

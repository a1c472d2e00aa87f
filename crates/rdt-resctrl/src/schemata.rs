//! The text of a group's `schemata` file, parsed and written without I/O.
//!
//! Read side (resctrl.rst "Schemata files"; spec §6.3, §16.1): one line per schema,
//! `%*s:` (name right-aligned to the widest name, +4 for a CDP-capable resource), then
//! `ID=VALUE` joined by `;`. Before Linux 6.15 values were padded too (`L3:0=00fff`,
//! `MB:0=  100`). Parsing strips every padding, accepts any line order and non-contiguous
//! domain ids, and keeps names it does not know.
//!
//! Write side: [`Schemata`]'s `Display` writes every line unpadded and newline-terminated,
//! the form the kernel's parser takes in one `write(2)`.

use std::fmt;
use std::str::FromStr;

/// One line: a schema name and its `(domain id, value)` pairs in file order. Values are
/// kept as text with the padding removed (`fffff`, `100`, `4294967295`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SchemataLine {
    /// `L3`, `L3CODE`, `L3DATA`, `L2`, `L2CODE`, `L2DATA`, `MB`, `SMBA`, or a newer name.
    pub name: String,
    /// `(domain id, value)`.
    pub values: Vec<(u32, String)>,
}

/// A whole `schemata` file.
///
/// # Examples
/// ```
/// use rdt_resctrl::Schemata;
/// // A pre-6.15 kernel with a CDP-capable L3: names and values padded.
/// let mut s: Schemata = "    MB:0=  100;1=  100\n    L3:0=00fff;1=00fff\n".parse()?;
/// assert_eq!(s.cache_mask("L3", 1)?, Some(0xfff));
/// assert_eq!(s.bandwidth("MB", 0)?, Some(100));
/// s.set("L3", 1, "3f".into());
/// assert_eq!(s.to_string(), "MB:0=100;1=100\nL3:0=00fff;1=3f\n");
/// # Ok::<(), rdt_resctrl::SchemataError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Schemata {
    lines: Vec<SchemataLine>,
    /// Column of the first `:`, when any line was read (the kernel's name width).
    name_width: Option<usize>,
}

/// A `schemata` text does not follow the kernel's format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemataError {
    /// A non-empty line without `:`.
    #[error("schemata line `{0}` has no `:` after the resource name")]
    MissingColon(String),
    /// An element that is not `ID=VALUE` with a decimal ID.
    #[error("`{token}` in schemata line `{line}` is not DOMAIN=VALUE with a decimal domain id")]
    BadDomain {
        /// The whole line.
        line: String,
        /// The element.
        token: String,
    },
    /// A cache value that is not hexadecimal, or a bandwidth that is not decimal.
    #[error("{name} domain {domain}: `{value}` is not a {expected}")]
    BadValue {
        /// The schema.
        name: String,
        /// The domain.
        domain: u32,
        /// The text.
        value: String,
        /// `"hexadecimal mask"` or `"decimal bandwidth"`.
        expected: &'static str,
    },
}

impl FromStr for Schemata {
    type Err = SchemataError;

    fn from_str(text: &str) -> Result<Self, SchemataError> {
        let mut s = Self::default();
        for raw in text.lines() {
            if raw.trim().is_empty() {
                continue;
            }
            let colon = raw
                .find(':')
                .ok_or_else(|| SchemataError::MissingColon(raw.to_owned()))?;
            s.name_width = Some(s.name_width.map_or(colon, |w| w.max(colon)));
            let name = raw[..colon].trim().to_owned();
            let mut values = Vec::new();
            for token in raw[colon + 1..].split(';').map(str::trim) {
                if token.is_empty() {
                    continue;
                }
                let bad = || SchemataError::BadDomain {
                    line: raw.trim().to_owned(),
                    token: token.to_owned(),
                };
                let (id, value) = token.split_once('=').ok_or_else(bad)?;
                let id = id.trim();
                if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                let id: u32 = id.parse().map_err(|_| bad())?;
                values.push((id, value.trim().to_owned()));
            }
            s.lines.push(SchemataLine { name, values });
        }
        Ok(s)
    }
}

impl fmt::Display for Schemata {
    /// Every line as the kernel's parser takes it: `NAME:ID=VALUE;...\n`, unpadded.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            f.write_str(&line.name)?;
            f.write_str(":")?;
            for (i, (id, v)) in line.values.iter().enumerate() {
                if i > 0 {
                    f.write_str(";")?;
                }
                write!(f, "{id}={v}")?;
            }
            f.write_str("\n")?;
        }
        Ok(())
    }
}

impl Schemata {
    /// The lines, in file order.
    #[must_use]
    pub fn lines(&self) -> &[SchemataLine] {
        &self.lines
    }

    /// The line of schema `name`.
    #[must_use]
    pub fn line(&self, name: &str) -> Option<&SchemataLine> {
        self.lines.iter().find(|l| l.name == name)
    }

    /// The column the kernel aligned names to (the position of the widest line's `:`).
    #[must_use]
    pub const fn name_width(&self) -> Option<usize> {
        self.name_width
    }

    /// The value text of `name` in `domain`.
    #[must_use]
    pub fn value(&self, name: &str, domain: u32) -> Option<&str> {
        self.line(name)?
            .values
            .iter()
            .find(|(d, _)| *d == domain)
            .map(|(_, v)| v.as_str())
    }

    /// The domain ids of `name`, in file order.
    #[must_use]
    pub fn domains(&self, name: &str) -> Vec<u32> {
        self.line(name)
            .map(|l| l.values.iter().map(|(d, _)| *d).collect())
            .unwrap_or_default()
    }

    /// A cache schema's mask (hexadecimal, `0x` optional, leading zeros allowed) in `domain`.
    ///
    /// # Errors
    /// [`SchemataError::BadValue`] when the value is not hexadecimal.
    pub fn cache_mask(&self, name: &str, domain: u32) -> Result<Option<u64>, SchemataError> {
        let Some(v) = self.value(name, domain) else {
            return Ok(None);
        };
        let hex = v
            .strip_prefix("0x")
            .or_else(|| v.strip_prefix("0X"))
            .unwrap_or(v);
        u64::from_str_radix(hex, 16)
            .map(Some)
            .map_err(|_| SchemataError::BadValue {
                name: name.to_owned(),
                domain,
                value: v.to_owned(),
                expected: "hexadecimal mask",
            })
    }

    /// A bandwidth schema's value (decimal: percent, MBps or AMD units) in `domain`.
    ///
    /// # Errors
    /// [`SchemataError::BadValue`] when the value is not a decimal `u32`.
    pub fn bandwidth(&self, name: &str, domain: u32) -> Result<Option<u32>, SchemataError> {
        let Some(v) = self.value(name, domain) else {
            return Ok(None);
        };
        v.parse().map(Some).map_err(|_| SchemataError::BadValue {
            name: name.to_owned(),
            domain,
            value: v.to_owned(),
            expected: "decimal bandwidth",
        })
    }

    /// Sets `name`'s value in `domain`, adding the domain (or the line) when missing.
    pub fn set(&mut self, name: &str, domain: u32, value: String) {
        let i = self
            .lines
            .iter()
            .position(|l| l.name == name)
            .unwrap_or_else(|| {
                self.lines.push(SchemataLine {
                    name: name.to_owned(),
                    values: Vec::new(),
                });
                self.lines.len() - 1
            });
        let line = &mut self.lines[i];
        match line.values.iter_mut().find(|(d, _)| *d == domain) {
            Some((_, v)) => *v = value,
            None => line.values.push((domain, value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_padded_names_and_values_and_writes_them_unpadded() {
        let s: Schemata = "    MB:0=  100;1=   20\n    L3:0=00fff;1=0ffff\n"
            .parse()
            .unwrap();
        assert_eq!(s.name_width(), Some(6));
        assert_eq!(s.bandwidth("MB", 1).unwrap(), Some(20));
        assert_eq!(s.cache_mask("L3", 0).unwrap(), Some(0xfff));
        assert_eq!(s.domains("L3"), [0, 1]);
        assert_eq!(s.to_string(), "MB:0=100;1=20\nL3:0=00fff;1=0ffff\n");
    }

    #[test]
    fn tolerates_trailing_semicolon_blank_lines_and_unknown_names() {
        let s: Schemata = "\nFUTURE:3=x;\nL3:0=f;\n".parse().unwrap();
        assert_eq!(s.value("FUTURE", 3), Some("x"));
        assert_eq!(s.to_string(), "FUTURE:3=x\nL3:0=f\n");
    }

    #[test]
    fn bad_lines_are_errors_naming_the_token() {
        let e = "L3 0=f\n".parse::<Schemata>().unwrap_err();
        assert_eq!(e, SchemataError::MissingColon("L3 0=f".into()));
        let e = "L3:a=f\n".parse::<Schemata>().unwrap_err();
        assert!(e.to_string().contains("`a=f`"), "{e}");
        let s: Schemata = "L3:0=xyz\nMB:0=0x32\n".parse().unwrap();
        assert!(s.cache_mask("L3", 0).is_err());
        assert!(s.bandwidth("MB", 0).is_err());
    }

    #[test]
    fn set_replaces_or_adds() {
        let mut s: Schemata = "L3:0=f;1=f\n".parse().unwrap();
        s.set("L3", 1, "3".into());
        s.set("L3", 2, "1".into());
        s.set("MB", 0, "50".into());
        assert_eq!(s.to_string(), "L3:0=f;1=3;2=1\nMB:0=50\n");
    }

    /// Any `schemata` text parses or is an error quoting the offending token; every value
    /// of a parsed one reads as a mask or bandwidth or an error quoting it.
    #[test]
    fn fuzz_schemata_never_panics_and_errors_quote_the_token() {
        use rdt_core::fake::fuzz::{fuzz, names_a_token, text};
        const WORDS: &[&str] = &[
            "L3",
            "L2",
            "MB",
            "SMBA",
            "L3CODE",
            "    ",
            ":",
            "=",
            ";",
            "\n",
            "0",
            "1",
            "fff",
            "0x",
            "4294967296",
            "ffffffffffffffffff",
            "100",
        ];
        fuzz("Schemata::from_str", text(WORDS, 24), |t| {
            match t.parse::<Schemata>() {
                Err(e) => {
                    let m = e.to_string();
                    prop_assert!(
                        names_a_token(&m, &t, &[':', ';', '='])
                            || t.lines()
                                .any(|l| !l.trim().is_empty() && m.contains(l.trim())),
                        "{m} for {t:?}"
                    );
                    Ok(())
                }
                Ok(s) => {
                    for line in s.lines() {
                        for (d, v) in &line.values {
                            if let Err(e) = s.cache_mask(&line.name, *d) {
                                prop_assert!(e.to_string().contains(v.trim()), "{e} for {v:?}");
                            }
                            if let Err(e) = s.bandwidth(&line.name, *d) {
                                prop_assert!(e.to_string().contains(v.trim()), "{e} for {v:?}");
                            }
                        }
                    }
                    Ok(())
                }
            }
        });
    }

    proptest! {
        #[test]
        fn display_round_trips(
            lines in proptest::collection::vec(
                ("[A-Z][A-Z0-9]{0,5}", proptest::collection::vec((0u32..200, "[0-9a-f]{1,8}"), 1..6)),
                0..5,
            )
        ) {
            let mut s = Schemata::default();
            for (name, values) in &lines {
                for (d, v) in values {
                    s.set(name, *d, v.clone());
                }
            }
            let back: Schemata = s.to_string().parse().unwrap();
            prop_assert_eq!(back.lines(), s.lines());
        }
    }
}

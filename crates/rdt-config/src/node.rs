//! One document tree for both input formats, with a line number on every key and value, so
//! that the rules of the configuration ([`super::parse`]) are written once.
//!
//! TOML comes from `toml::de::DeTable` (byte spans of every key and value); JSON from
//! serde_json's [`RawValue`], whose text is a slice of the input, so its address gives the
//! byte offset of the value. A JSON key gets the line of its value.

use std::borrow::Cow;
use std::collections::{HashMap, hash_map};
use std::fmt;
use std::hash::Hash;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use toml::de::{DeTable, DeValue};

/// Nesting below this depth is not converted: no valid configuration goes deeper than 5
/// levels (`class[0].l3.domains."0".ways`), and stopping here keeps recursion bounded on
/// hostile input. The node keeps its type, so the error ("expected an integer, found an
/// array") is the same.
const MAX_DEPTH: usize = 12;

/// The input format: names types as that format does in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    Toml,
    Json,
    /// goresctrl's configuration ([`super::goresctrl`]).
    Yaml,
}

/// A value and the 1-based line where it starts.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub line: usize,
    pub value: Value,
}

/// A key of a table, the line of the key, and its value.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub key: String,
    pub line: usize,
    pub node: Node,
}

#[derive(Clone, Debug)]
pub(super) enum Value {
    /// Entries in the order of the text.
    Table(Vec<Entry>),
    Array(Vec<Node>),
    String(String),
    /// Saturated at the ends of `i128` (no field takes numbers that large).
    Integer(i128),
    /// The number as written.
    Float(String),
    Bool(bool),
    /// TOML only.
    Datetime(String),
    /// JSON and YAML only.
    Null,
    /// A table or array below [`MAX_DEPTH`], not converted.
    Deep(Kind),
}

/// A type, for "expected ..., found ..." messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Table,
    Array,
}

impl Value {
    /// What the value is, as the format calls it, with the value itself for scalars:
    /// `string "abc"`, `integer 5`, `table`.
    pub fn describe(&self, format: Format) -> String {
        let table = match format {
            Format::Toml => "a table",
            Format::Json => "an object",
            Format::Yaml => "a mapping",
        };
        match self {
            Self::Table(_) | Self::Deep(Kind::Table) => table.to_owned(),
            Self::Array(_) | Self::Deep(Kind::Array) => "an array".to_owned(),
            Self::String(s) => format!("string {:?}", Shortened(s)),
            Self::Integer(i) => format!("integer {i}"),
            Self::Float(f) => format!("float {f}"),
            Self::Bool(b) => format!("boolean {b}"),
            Self::Datetime(d) => format!("datetime {d}"),
            Self::Null => "null".to_owned(),
        }
    }
}

/// A string cut to 60 characters for messages (a hostile 1 MiB value must not become a
/// 1 MiB message).
pub(super) struct Shortened<'a>(pub &'a str);

impl fmt::Debug for Shortened<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = 60;
        match self.0.char_indices().nth(MAX) {
            None => fmt::Debug::fmt(self.0, f),
            Some((cut, _)) => {
                let head = format!("{:?}", &self.0[..cut]);
                // `"abc"` -> `"abc..."`
                write!(f, "{}...\"", &head[..head.len() - 1])
            }
        }
    }
}

/// Byte offset to 1-based line number.
pub(super) struct LineIndex {
    /// Offsets where lines start, the first 0.
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { starts }
    }

    pub fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset).max(1)
    }
}

/// The line where each key of one table (mapping, object) was first given, so that a key
/// given twice is found with one hash lookup per key: a table of n keys costs O(n), where
/// a scan of the earlier keys would cost O(n²) (72k keys took 35 s).
pub(super) struct FirstSeen<K>(HashMap<K, usize>);

impl<K: Hash + Eq> FirstSeen<K> {
    pub fn new() -> Self {
        Self(HashMap::new())
    }

    /// Records `key` at `line`; if it was given before, the line where it first was (the
    /// record keeps that first line).
    pub fn earlier(&mut self, key: K, line: usize) -> Option<usize> {
        match self.0.entry(key) {
            hash_map::Entry::Occupied(first) => Some(*first.get()),
            hash_map::Entry::Vacant(slot) => {
                slot.insert(line);
                None
            }
        }
    }
}

/// A TOML syntax error: its message and line.
#[derive(Debug)]
pub(super) struct SyntaxError {
    pub line: Option<usize>,
    pub message: String,
}

/// Parses TOML into a tree.
pub(super) fn from_toml(text: &str) -> Result<Node, SyntaxError> {
    let lines = LineIndex::new(text);
    let doc = DeTable::parse(text).map_err(|e| SyntaxError {
        line: e.span().map(|s| lines.line(s.start)),
        message: e.message().to_owned(),
    })?;
    let span = doc.span();
    Ok(Node {
        line: lines.line(span.start),
        value: toml_table(doc.get_ref(), &lines, 0),
    })
}

fn toml_table(table: &DeTable<'_>, lines: &LineIndex, depth: usize) -> Value {
    let mut entries: Vec<(usize, Entry)> = table
        .iter()
        .map(|(k, v)| {
            let start = k.span().start;
            let entry = Entry {
                key: k.get_ref().to_string(),
                line: lines.line(start),
                node: toml_node(v.get_ref(), v.span().start, lines, depth + 1),
            };
            (start, entry)
        })
        .collect();
    // The map is sorted by key; messages should follow the text.
    entries.sort_by_key(|(start, _)| *start);
    Value::Table(entries.into_iter().map(|(_, e)| e).collect())
}

fn toml_node(value: &DeValue<'_>, offset: usize, lines: &LineIndex, depth: usize) -> Node {
    let value = match value {
        DeValue::Table(_) if depth > MAX_DEPTH => Value::Deep(Kind::Table),
        DeValue::Array(_) if depth > MAX_DEPTH => Value::Deep(Kind::Array),
        DeValue::Table(t) => toml_table(t, lines, depth),
        DeValue::Array(a) => Value::Array(
            a.iter()
                .map(|v| toml_node(v.get_ref(), v.span().start, lines, depth + 1))
                .collect(),
        ),
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Integer(i) => Value::Integer(
            i128::from_str_radix(i.as_str(), i.radix()).unwrap_or(if i.as_str().starts_with('-') {
                i128::MIN
            } else {
                i128::MAX
            }),
        ),
        DeValue::Float(f) => Value::Float(f.as_str().to_owned()),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
    };
    Node {
        line: lines.line(offset),
        value,
    }
}

/// A JSON syntax error: serde_json's message without its position, line and column.
#[derive(Debug)]
pub(super) struct JsonSyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parses JSON into a tree.
pub(super) fn from_json(text: &str) -> Result<Node, JsonSyntaxError> {
    let syntax = |e: &serde_json::Error| {
        let full = e.to_string();
        let message = match full.rsplit_once(" at line ") {
            Some((m, _)) if e.line() > 0 => m.to_owned(),
            _ => full,
        };
        JsonSyntaxError {
            line: e.line(),
            column: e.column(),
            message,
        }
    };
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| syntax(&e))?;
    let lines = LineIndex::new(text);
    // The document was checked whole above; parsing its parts again cannot fail, but if it
    // did the error would still be reported.
    json_node(raw, text, &lines, 0).map_err(|e| syntax(&e))
}

/// Entries of a JSON object in text order, duplicates kept.
struct JsonEntries<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for JsonEntries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JsonEntries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<Cow<'de, str>, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(JsonEntries(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn json_node(
    raw: &RawValue,
    text: &str,
    lines: &LineIndex,
    depth: usize,
) -> Result<Node, serde_json::Error> {
    let json = raw.get();
    // `json` is a slice of `text` (a borrowed RawValue always is), so the difference of the
    // addresses is its byte offset.
    let offset = json.as_ptr().addr().saturating_sub(text.as_ptr().addr());
    let line = lines.line(offset);
    let value = match json.as_bytes().first() {
        Some(b'{') if depth > MAX_DEPTH => Value::Deep(Kind::Table),
        Some(b'[') if depth > MAX_DEPTH => Value::Deep(Kind::Array),
        Some(b'{') => {
            let entries: JsonEntries<'_> = serde_json::from_str(json)?;
            Value::Table(
                entries
                    .0
                    .into_iter()
                    .map(|(key, v)| {
                        let node = json_node(v, text, lines, depth + 1)?;
                        Ok(Entry {
                            key: key.into_owned(),
                            line: node.line,
                            node,
                        })
                    })
                    .collect::<Result<_, serde_json::Error>>()?,
            )
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(json)?;
            Value::Array(
                items
                    .into_iter()
                    .map(|v| json_node(v, text, lines, depth + 1))
                    .collect::<Result<_, _>>()?,
            )
        }
        _ => match serde_json::from_str::<serde_json::Value>(json)? {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Integer(i128::from(i))
                } else if let Some(u) = n.as_u64() {
                    Value::Integer(i128::from(u))
                } else {
                    Value::Float(n.to_string())
                }
            }
            serde_json::Value::String(s) => Value::String(s),
            // `{` and `[` are handled above.
            serde_json::Value::Array(_) => Value::Deep(Kind::Array),
            serde_json::Value::Object(_) => Value::Deep(Kind::Table),
        },
    };
    Ok(Node { line, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(node: &Node) -> Vec<(String, usize)> {
        match &node.value {
            Value::Table(entries) => entries.iter().map(|e| (e.key.clone(), e.line)).collect(),
            other => panic!("not a table: {other:?}"),
        }
    }

    #[test]
    fn toml_keys_keep_text_order_and_lines() {
        // arrange
        let text = "b = 1\n\na = { z = 2, y = 3 }\n";
        // act
        let node = from_toml(text).unwrap();
        // assert
        assert_eq!(keys(&node), [("b".into(), 1), ("a".into(), 3)]);
        let Value::Table(entries) = &node.value else {
            unreachable!()
        };
        assert_eq!(keys(&entries[1].node), [("z".into(), 3), ("y".into(), 3)]);
    }

    #[test]
    fn json_values_get_the_line_where_they_start() {
        let text = "{\n  \"b\": 1,\n  \"a\": [\n    2,\n    \"x\"\n  ],\n  \"b\": 3\n}";
        let node = from_json(text).unwrap();
        assert_eq!(
            keys(&node),
            [("b".into(), 2), ("a".into(), 3), ("b".into(), 7)]
        );
        let Value::Table(entries) = &node.value else {
            unreachable!()
        };
        let Value::Array(items) = &entries[1].node.value else {
            unreachable!()
        };
        assert_eq!(items.iter().map(|n| n.line).collect::<Vec<_>>(), [4, 5]);
    }

    #[test]
    fn json_syntax_error_has_line_and_column_and_a_bare_message() {
        let e = from_json("{\n\"a\": 1,\n}").err().unwrap();
        assert_eq!((e.line, e.column), (3, 1));
        assert!(!e.message.contains("line"), "{}", e.message);
    }

    #[test]
    fn deep_nesting_is_cut_not_recursed() {
        let n = 50_000;
        let toml = format!("a = {}{}", "[".repeat(n), "]".repeat(n));
        assert!(from_toml(&toml).is_err()); // the TOML parser's own depth limit
        let json = format!("{{\"a\": {}{}}}", "[".repeat(n), "]".repeat(n));
        let node = from_json(&json).unwrap();
        let mut depth = 0;
        let mut cur = &node;
        loop {
            match &cur.value {
                Value::Table(e) => cur = &e[0].node,
                Value::Array(a) => cur = &a[0],
                Value::Deep(Kind::Array) => break,
                other => panic!("{other:?}"),
            }
            depth += 1;
        }
        assert!(depth <= MAX_DEPTH + 1, "{depth}");
    }

    /// A key that counts how often it is compared with another.
    struct Counted<'a>(u32, &'a std::cell::Cell<usize>);

    impl std::hash::Hash for Counted<'_> {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }

    impl PartialEq for Counted<'_> {
        fn eq(&self, other: &Self) -> bool {
            self.1.set(self.1.get() + 1);
            self.0 == other.0
        }
    }
    impl Eq for Counted<'_> {}

    #[test]
    fn a_table_of_many_keys_compares_each_key_a_bounded_number_of_times() {
        // arrange: as many keys as a 1 MiB file holds
        let n = 100_000;
        let comparisons = std::cell::Cell::new(0);
        let mut seen = FirstSeen::new();
        // act
        for k in 0..n {
            assert_eq!(seen.earlier(Counted(k, &comparisons), 1 + k as usize), None);
        }
        let again = seen.earlier(Counted(7, &comparisons), n as usize + 1);
        // assert: a scan of the earlier keys would compare n²/2 = 5e9 times
        assert_eq!(again, Some(8), "the first line is kept");
        assert!(
            comparisons.get() <= 2 * n as usize,
            "{} comparisons for {n} keys",
            comparisons.get()
        );
    }

    #[test]
    fn line_index() {
        let l = LineIndex::new("a\nbc\n\nd");
        assert_eq!([0, 1, 2, 4, 5, 6].map(|o| l.line(o)), [1, 1, 2, 2, 3, 4]);
    }

    #[test]
    fn long_strings_are_shortened_in_messages() {
        let s = "x".repeat(1000);
        let d = Value::String(s).describe(Format::Toml);
        assert!(d.len() < 80, "{d}");
        assert!(d.ends_with("...\""), "{d}");
    }
}

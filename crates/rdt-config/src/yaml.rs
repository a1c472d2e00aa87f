//! YAML into the document tree of [`super::node`], for goresctrl's configuration
//! ([`super::goresctrl`]).
//!
//! The text is read as a stream of saphyr-parser events, each with its line, and built into
//! [`Node`]s by hand, so that what a configuration never needs is refused rather than
//! expanded: aliases (`*name`, the "billion laughs" of YAML), more than one document, keys
//! that are not scalars, a key twice in one mapping, nesting deeper than [`MAX_DEPTH`].
//!
//! Plain scalars are typed as YAML 1.2's core schema types them (`null`/`~`/empty, `true`/
//! `false`, decimal integers, floats); quoted and block scalars are strings. Keys keep the
//! text as written (`1:` is the key `"1"`), which is what goresctrl's loader (YAML turned into
//! JSON, keys into strings) gives too.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::node::{Entry, FirstSeen, Node, Shortened, SyntaxError, Value};

/// Nesting below this depth is refused: goresctrl's deepest key is 6 levels
/// (`partitions.p.classes.c.l3Allocation.all.code`).
const MAX_DEPTH: usize = 12;

type Events<'a> = Parser<'a, saphyr_parser::StrInput<'a>>;

fn error(line: usize, message: impl Into<String>) -> SyntaxError {
    SyntaxError {
        line: Some(line),
        message: message.into(),
    }
}

fn next<'a>(events: &mut Events<'a>) -> Result<(Event<'a>, Span), SyntaxError> {
    match events.next_event() {
        Some(Ok(e)) => Ok(e),
        Some(Err(e)) => Err(SyntaxError {
            line: Some(e.marker().line()),
            message: e.info().to_owned(),
        }),
        // The parser ends every stream with StreamEnd; running out before it is a bug there.
        None => Err(SyntaxError {
            line: None,
            message: "unexpected end of the YAML stream".to_owned(),
        }),
    }
}

/// Parses one YAML document into a tree. An empty document is an empty mapping.
pub(super) fn from_yaml(text: &str) -> Result<Node, SyntaxError> {
    let mut events = Parser::new_from_str(text);
    let mut root = None;
    loop {
        let (event, span) = next(&mut events)?;
        match event {
            Event::StreamStart | Event::DocumentStart(_) | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            _ if root.is_some() => {
                return Err(error(
                    span.start.line(),
                    "a second YAML document: a configuration is one document",
                ));
            }
            event => root = Some(node(&mut events, event, span, 1)?),
        }
    }
    Ok(root.unwrap_or(Node {
        line: 1,
        value: Value::Table(Vec::new()),
    }))
}

fn node<'a>(
    events: &mut Events<'a>,
    event: Event<'a>,
    span: Span,
    depth: usize,
) -> Result<Node, SyntaxError> {
    let line = span.start.line();
    let value = match event {
        Event::Scalar(text, style, _, tag) => {
            let is_str = tag.is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
            scalar(&text, style, is_str)
        }
        Event::Alias(_) => {
            return Err(error(
                line,
                "YAML aliases (*name) are not supported in a configuration",
            ));
        }
        Event::SequenceStart(..) | Event::MappingStart(..) if depth > MAX_DEPTH => {
            return Err(error(
                line,
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                let (event, span) = next(events)?;
                if matches!(event, Event::SequenceEnd) {
                    break;
                }
                items.push(node(events, event, span, depth + 1)?);
            }
            Value::Array(items)
        }
        Event::MappingStart(..) => {
            let mut entries: Vec<Entry> = Vec::new();
            let mut seen = FirstSeen::new();
            loop {
                let (event, span) = next(events)?;
                let key_line = span.start.line();
                let key = match event {
                    Event::MappingEnd => break,
                    Event::Scalar(text, ..) => text.into_owned(),
                    Event::Alias(_) => {
                        return Err(error(
                            key_line,
                            "YAML aliases (*name) are not supported in a configuration",
                        ));
                    }
                    _ => {
                        return Err(error(
                            key_line,
                            "a mapping key that is not a scalar (a string or number)",
                        ));
                    }
                };
                if let Some(first) = seen.earlier(key.clone(), key_line) {
                    return Err(error(
                        key_line,
                        format!(
                            "key {:?} appears twice (first on line {first})",
                            Shortened(&key)
                        ),
                    ));
                }
                let (event, span) = next(events)?;
                let node = node(events, event, span, depth + 1)?;
                entries.push(Entry {
                    key,
                    line: key_line,
                    node,
                });
            }
            Value::Table(entries)
        }
        // Only stream and document events remain, and they never come in a node.
        _ => return Err(error(line, "unexpected YAML event")),
    };
    Ok(Node { line, value })
}

/// A scalar as YAML 1.2's core schema types it.
fn scalar(text: &str, style: ScalarStyle, is_str: bool) -> Value {
    if style != ScalarStyle::Plain || is_str {
        return Value::String(text.to_owned());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let value = text.parse::<i128>().unwrap_or(if text.starts_with('-') {
            i128::MIN
        } else {
            i128::MAX
        });
        return Value::Integer(value);
    }
    if text.parse::<f64>().is_ok() && text.bytes().any(|b| b.is_ascii_digit()) {
        return Value::Float(text.to_owned());
    }
    Value::String(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(node: &Node) -> Vec<(String, usize)> {
        match &node.value {
            Value::Table(entries) => entries.iter().map(|e| (e.key.clone(), e.line)).collect(),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn mappings_keep_text_order_lines_and_keys_as_written() {
        let root = from_yaml("partitions:\n  b:\n    1: \"0xff\"\n  a: 60%\n").unwrap();
        assert_eq!(keys(&root), [("partitions".to_owned(), 1)]);
        let Value::Table(top) = &root.value else {
            panic!()
        };
        assert_eq!(
            keys(&top[0].node),
            [("b".to_owned(), 2), ("a".to_owned(), 4)]
        );
        let Value::Table(p) = &top[0].node.value else {
            panic!()
        };
        assert_eq!(keys(&p[0].node), [("1".to_owned(), 3)]);
        assert!(matches!(&p[1].node.value, Value::String(s) if s == "60%"));
    }

    #[test]
    fn plain_scalars_are_typed_by_the_core_schema_and_quoted_ones_are_strings() {
        let root = from_yaml("a: [50, \"50\", true, ~, 1.5, 0-7, '']\n").unwrap();
        let Value::Table(top) = &root.value else {
            panic!()
        };
        let Value::Array(items) = &top[0].node.value else {
            panic!()
        };
        let got: Vec<String> = items.iter().map(|n| format!("{:?}", n.value)).collect();
        assert_eq!(
            got,
            [
                "Integer(50)",
                "String(\"50\")",
                "Bool(true)",
                "Null",
                "Float(\"1.5\")",
                "String(\"0-7\")",
                "String(\"\")"
            ]
        );
    }

    #[test]
    fn aliases_duplicate_keys_and_two_documents_are_refused_with_their_line() {
        let e = from_yaml("a: &x [1]\nb: *x\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("aliases"), "{}", e.message);
        let e = from_yaml("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert_eq!(e.message, "key \"a\" appears twice (first on line 1)");
        let e = from_yaml("a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!(e.line, Some(3));
    }

    #[test]
    fn deep_nesting_is_refused_not_recursed() {
        // Past our limit: refused by the tree builder.
        let e = from_yaml(&"[".repeat(14)).unwrap_err();
        assert!(
            e.message.contains("nesting deeper than 12"),
            "{}",
            e.message
        );
        // Far past it: the parser's own limit answers first, without overflowing the stack.
        let e = from_yaml(&"[".repeat(100_000)).unwrap_err();
        assert!(e.line.is_some());
    }

    #[test]
    fn a_syntax_error_has_the_parser_line() {
        let e = from_yaml("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(e.line.is_some());
    }

    #[test]
    fn an_empty_document_is_an_empty_mapping() {
        assert!(
            matches!(from_yaml("# nothing\n").unwrap().value, Value::Table(ref t) if t.is_empty())
        );
    }
}

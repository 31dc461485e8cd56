//! Recursive-descent JSONC parser: comments, trailing commas and raw newlines in strings are accepted.

use crate::tree::{Member, Node, NodeKind, Number, Span};

/// Deeper nesting than this is refused instead of risking the stack.
const MAX_DEPTH: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("unexpected end of input")]
    UnexpectedEnd,
    #[error("unexpected character '{0}'")]
    UnexpectedChar(char),
    #[error("expected {0}")]
    Expected(&'static str),
    #[error("invalid escape sequence in string")]
    InvalidEscape,
    #[error("invalid number '{0}'")]
    InvalidNumber(String),
    #[error("unterminated comment")]
    UnterminatedComment,
    #[error("unterminated string")]
    UnterminatedString,
    #[error("nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("unexpected content after the JSON value")]
    TrailingContent,
}

/// A syntax error and where it was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub span: Span,
}

/// Parses one JSON value (with comments) from `text`. A leading byte-order mark is skipped.
pub fn parse(text: &str) -> Result<Node, ParseError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    if text.starts_with('\u{feff}') {
        p.pos = 3;
    }
    p.skip_trivia()?;
    let node = p.value(0)?;
    p.skip_trivia()?;
    if p.pos < p.bytes.len() {
        return Err(p.error_here(ParseErrorKind::TrailingContent));
    }
    Ok(node)
}

struct Parser<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error_at(&self, start: usize, kind: ParseErrorKind) -> ParseError {
        let end = (start + 1).min(self.bytes.len()).max(start);
        ParseError {
            kind,
            span: Span::new(start, end),
        }
    }

    fn error_here(&self, kind: ParseErrorKind) -> ParseError {
        self.error_at(self.pos, kind)
    }

    fn unexpected(&self) -> ParseError {
        match self.text[self.pos..].chars().next() {
            Some(c) => self.error_here(ParseErrorKind::UnexpectedChar(c)),
            None => self.error_here(ParseErrorKind::UnexpectedEnd),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    while let Some(b) = self.peek() {
                        if b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    let start = self.pos;
                    match self.text[self.pos + 2..].find("*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => {
                            return Err(self.error_at(start, ParseErrorKind::UnterminatedComment));
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error_here(ParseErrorKind::TooDeep));
        }
        let start = self.pos;
        let kind = match self.peek() {
            None => return Err(self.error_here(ParseErrorKind::UnexpectedEnd)),
            Some(b'{') => return self.object(depth),
            Some(b'[') => return self.array(depth),
            Some(b'"') => NodeKind::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => NodeKind::Number(self.number()?),
            Some(b't') if self.text[self.pos..].starts_with("true") => {
                self.pos += 4;
                NodeKind::Bool(true)
            }
            Some(b'f') if self.text[self.pos..].starts_with("false") => {
                self.pos += 5;
                NodeKind::Bool(false)
            }
            Some(b'n') if self.text[self.pos..].starts_with("null") => {
                self.pos += 4;
                NodeKind::Null
            }
            Some(_) => return Err(self.unexpected()),
        };
        Ok(Node::new(kind, Span::new(start, self.pos)))
    }

    fn object(&mut self, depth: usize) -> Result<Node, ParseError> {
        let start = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip_trivia()?;
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                Some(b'"') => {}
                None => return Err(self.error_here(ParseErrorKind::UnexpectedEnd)),
                Some(_) => {
                    return Err(self.error_here(ParseErrorKind::Expected("a property name or '}'")));
                }
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = Span::new(key_start, self.pos);
            self.skip_trivia()?;
            if self.peek() != Some(b':') {
                return Err(self.error_here(ParseErrorKind::Expected("':'")));
            }
            self.pos += 1;
            self.skip_trivia()?;
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_trivia()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error_here(ParseErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.error_here(ParseErrorKind::Expected("',' or '}'"))),
            }
        }
        Ok(Node::new(
            NodeKind::Object(members),
            Span::new(start, self.pos),
        ))
    }

    fn array(&mut self, depth: usize) -> Result<Node, ParseError> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_trivia()?;
            if self.peek() == Some(b']') {
                self.pos += 1;
                break;
            }
            items.push(self.value(depth + 1)?);
            self.skip_trivia()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error_here(ParseErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.error_here(ParseErrorKind::Expected("',' or ']'"))),
            }
        }
        Ok(Node::new(
            NodeKind::Array(items),
            Span::new(start, self.pos),
        ))
    }

    fn string(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.text[self.pos..];
            let Some(i) = rest.find(['"', '\\']) else {
                return Err(self.error_at(start, ParseErrorKind::UnterminatedString));
            };
            out.push_str(&rest[..i]);
            self.pos += i;
            if self.bytes[self.pos] == b'"' {
                self.pos += 1;
                return Ok(out);
            }
            let esc_start = self.pos;
            self.pos += 1;
            let Some(c) = self.peek() else {
                return Err(self.error_at(start, ParseErrorKind::UnterminatedString));
            };
            self.pos += 1;
            match c {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let first = self.hex4(esc_start)?;
                    if (0xD800..0xDC00).contains(&first) && self.text[self.pos..].starts_with("\\u")
                    {
                        let save = self.pos;
                        self.pos += 2;
                        let second = self.hex4(esc_start)?;
                        if (0xDC00..0xE000).contains(&second) {
                            let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            continue;
                        }
                        self.pos = save;
                    }
                    // A lone surrogate cannot live in a Rust string; keep going with U+FFFD like lossy decoders.
                    out.push(char::from_u32(first).unwrap_or('\u{fffd}'));
                }
                _ => return Err(self.error_at(esc_start, ParseErrorKind::InvalidEscape)),
            }
        }
    }

    fn hex4(&mut self, esc_start: usize) -> Result<u32, ParseError> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(digits) = digits else {
            return Err(self.error_at(esc_start, ParseErrorKind::InvalidEscape));
        };
        self.pos += 4;
        u32::from_str_radix(digits, 16)
            .map_err(|_| self.error_at(esc_start, ParseErrorKind::InvalidEscape))
    }

    fn number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits_start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        let raw = &self.text[start..self.pos];
        let invalid = || ParseError {
            kind: ParseErrorKind::InvalidNumber(raw.to_string()),
            span: Span::new(start, self.pos),
        };
        if self.pos == digits_start || !raw.bytes().any(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        if !is_float && let Ok(i) = raw.parse::<i64>() {
            return Ok(Number::Int(i));
        }
        match raw.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Number::Float(x)),
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> serde_json::Value {
        parse(text).unwrap().to_json()
    }

    #[test]
    fn comments_trailing_commas_and_newlines() {
        let text =
            "{ // c\n \"a\": 9007199254740993, /* x */ \"b\": [1,2,], \"s\": \"line1\nline2\", }";
        assert_eq!(
            json(text),
            serde_json::json!({"a": 9007199254740993i64, "b": [1, 2], "s": "line1\nline2"})
        );
    }

    #[test]
    fn key_order_and_spans() {
        let text = r#"{"z": 1, "a": {"q": true}}"#;
        let node = parse(text).unwrap();
        let keys: Vec<_> = node
            .as_object()
            .unwrap()
            .iter()
            .map(|m| m.key.as_str())
            .collect();
        assert_eq!(keys, ["z", "a"]);
        let q = node.get("a").unwrap().get("q").unwrap();
        assert_eq!(&text[q.span.range()], "true");
    }

    #[test]
    fn escapes() {
        assert_eq!(
            json(r#""\u00e9\ud83d\ude00\n\"""#),
            serde_json::json!("é😀\n\"")
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(json("-12"), serde_json::json!(-12));
        assert_eq!(json("1.5e2"), serde_json::json!(150.0));
        assert_eq!(json("99999999999999999999"), serde_json::json!(1e20));
        assert!(parse("-").is_err());
        assert!(parse("1e999").is_err());
    }

    #[test]
    fn errors_have_positions() {
        let err = parse("{\"a\": 1 \"b\": 2}").unwrap_err();
        assert_eq!(err.kind, ParseErrorKind::Expected("',' or '}'"));
        assert_eq!(err.span.start, 8);
        assert_eq!(
            parse("{\"a\": ").unwrap_err().kind,
            ParseErrorKind::UnexpectedEnd
        );
        assert_eq!(
            parse("[1] x").unwrap_err().kind,
            ParseErrorKind::TrailingContent
        );
        assert_eq!(
            parse("/* x").unwrap_err().kind,
            ParseErrorKind::UnterminatedComment
        );
        assert!(matches!(
            parse(&"[".repeat(1000)).unwrap_err().kind,
            ParseErrorKind::TooDeep
        ));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn agrees_with_serde_json(v in arb_json()) {
            let text = serde_json::to_string_pretty(&v).unwrap();
            proptest::prop_assert_eq!(parse(&text).unwrap().to_json(), v);
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "\\PC{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::vec(("[a-z]{1,4}", inner), 0..6)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}

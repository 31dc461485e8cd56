//! JSON text the way ARM's Newtonsoft.Json stack reads and writes it: compact output with Newtonsoft's escaping and
//! double formatting (used by `string()`, `format()` and `dataUri()`), and a lenient reader that accepts
//! single-quoted strings, unquoted property names, comments and `NaN`/`Infinity` (used by `base64ToJson()`).

use std::fmt;

use super::format::double_to_string;
use crate::value::{Object, Value};

/// Deeper nesting than this is refused instead of risking the stack (Newtonsoft's default limit is 64).
const MAX_DEPTH: usize = 128;

/// Writes `value` as compact JSON (Newtonsoft `Formatting.None`).
pub(crate) fn to_compact_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null | Value::Lambda(_) => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(x) => write_double(*x, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, v)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_value(v, out);
            }
            out.push('}');
        }
        Value::Unevaluated(u) => write_string(&u.expression, out),
    }
}

/// Newtonsoft writes doubles with the round-trip format and makes sure they still read back as floats (`1.0`);
/// non-finite values become strings.
fn write_double(x: f64, out: &mut String) {
    let text = double_to_string(x);
    if !x.is_finite() {
        write_string(&text, out);
        return;
    }
    out.push_str(&text);
    if !text.contains(['.', 'E', 'e']) {
        out.push_str(".0");
    }
}

/// Newtonsoft's default string escaping: quotes, backslashes, control characters and the three line separators
/// JavaScript does not accept in string literals.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{85}' || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON text that could not be read, with the character offset where reading stopped. The text itself is never
/// quoted (it may be a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JsonTextError {
    pub message: &'static str,
    pub position: usize,
}

impl fmt::Display for JsonTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} Position {}.", self.message, self.position)
    }
}

impl std::error::Error for JsonTextError {}

/// Reads one JSON value leniently, as Newtonsoft's `JToken.Parse` does: `'single'` or `"double"` quoted strings,
/// unquoted property names, `//` and `/* */` comments, trailing commas, `NaN`, `Infinity`, `undefined` (as null)
/// and hexadecimal integers. Duplicate property names keep the last value.
pub(crate) fn parse_lenient(text: &str) -> Result<Value, JsonTextError> {
    let mut reader = Reader {
        chars: text.chars().collect(),
        pos: 0,
    };
    if reader.peek() == Some('\u{feff}') {
        reader.pos += 1;
    }
    reader.skip_trivia()?;
    let value = reader.value(0)?;
    reader.skip_trivia()?;
    if reader.pos < reader.chars.len() {
        return Err(
            reader.error("Additional text encountered after finished reading JSON content.")
        );
    }
    Ok(value)
}

struct Reader {
    chars: Vec<char>,
    pos: usize,
}

impl Reader {
    fn error(&self, message: &'static str) -> JsonTextError {
        JsonTextError {
            message,
            position: self.pos,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_trivia(&mut self) -> Result<(), JsonTextError> {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += 1;
            } else if c == '/' {
                match self.chars.get(self.pos + 1) {
                    Some('/') => {
                        while self.peek().is_some_and(|c| c != '\n' && c != '\r') {
                            self.pos += 1;
                        }
                    }
                    Some('*') => {
                        self.pos += 2;
                        loop {
                            match self.peek() {
                                None => {
                                    return Err(self.error("Unexpected end while parsing comment."));
                                }
                                Some('*') if self.chars.get(self.pos + 1) == Some(&'/') => {
                                    self.pos += 2;
                                    break;
                                }
                                Some(_) => self.pos += 1,
                            }
                        }
                    }
                    _ => {
                        return Err(
                            self.error("Unexpected character encountered while parsing value.")
                        );
                    }
                }
            } else {
                break;
            }
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonTextError> {
        if depth > MAX_DEPTH {
            return Err(self.error("The reader's maximum nesting depth has been exceeded."));
        }
        match self.peek() {
            None => Err(self.error("Unexpected end of content while parsing value.")),
            Some('{') => self.object(depth),
            Some('[') => self.array(depth),
            Some(q @ ('"' | '\'')) => self.string(q).map(Value::String),
            Some(c) if c == '-' || c == '.' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_alphabetic() => {
                let word = self.word();
                match word.as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" | "undefined" => Ok(Value::Null),
                    "NaN" => Ok(Value::Float(f64::NAN)),
                    "Infinity" => Ok(Value::Float(f64::INFINITY)),
                    _ => Err(self.error("Unexpected character encountered while parsing value.")),
                }
            }
            Some(_) => Err(self.error("Unexpected character encountered while parsing value.")),
        }
    }

    /// A run of identifier characters (unquoted property names and the literal words).
    fn word(&mut self) -> String {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonTextError> {
        self.pos += 1;
        let mut object = Object::new();
        loop {
            self.skip_trivia()?;
            let key = match self.peek() {
                None => return Err(self.error("Unexpected end while parsing object.")),
                Some('}') => {
                    self.pos += 1;
                    return Ok(Value::Object(object));
                }
                Some(q @ ('"' | '\'')) => self.string(q)?,
                Some(c) if c.is_alphanumeric() || c == '_' || c == '$' => self.word(),
                Some(_) => return Err(self.error("Invalid property identifier character.")),
            };
            self.skip_trivia()?;
            if self.peek() != Some(':') {
                return Err(
                    self.error("Invalid character after parsing property name. Expected ':'.")
                );
            }
            self.pos += 1;
            self.skip_trivia()?;
            let value = self.value(depth + 1)?;
            object.insert(key, value);
            self.skip_trivia()?;
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {
                    self.pos += 1;
                    return Ok(Value::Object(object));
                }
                None => return Err(self.error("Unexpected end while parsing object.")),
                Some(_) => {
                    return Err(self
                        .error("After parsing a value an unexpected character was encountered."));
                }
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonTextError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_trivia()?;
            if self.peek() == Some(']') {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_trivia()?;
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.error("Unexpected end while parsing array.")),
                Some(_) => {
                    return Err(self
                        .error("After parsing a value an unexpected character was encountered."));
                }
            }
        }
    }

    fn string(&mut self, quote: char) -> Result<String, JsonTextError> {
        self.pos += 1;
        let mut units: Vec<u16> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("Unterminated string. Expected delimiter."));
            };
            self.pos += 1;
            match c {
                c if c == quote => break,
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.error("Unterminated string. Expected delimiter."));
                    };
                    self.pos += 1;
                    let unit = match e {
                        'b' => 0x08,
                        'f' => 0x0c,
                        'n' => 0x0a,
                        'r' => 0x0d,
                        't' => 0x09,
                        'u' => self.hex4()?,
                        '"' | '\'' | '\\' | '/' => e as u16,
                        _ => return Err(self.error("Bad JSON escape sequence.")),
                    };
                    units.push(unit);
                }
                c => {
                    let mut buf = [0u16; 2];
                    units.extend_from_slice(c.encode_utf16(&mut buf));
                }
            }
        }
        // `\u` escapes may spell surrogate pairs; a lone surrogate cannot live in a Rust string and becomes U+FFFD.
        Ok(String::from_utf16_lossy(&units))
    }

    fn hex4(&mut self) -> Result<u16, JsonTextError> {
        let digits: String = self.chars.iter().skip(self.pos).take(4).collect();
        if digits.len() != 4 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.error("Invalid Unicode escape sequence."));
        }
        self.pos += 4;
        u16::from_str_radix(&digits, 16).map_err(|_| self.error("Invalid Unicode escape sequence."))
    }

    fn number(&mut self) -> Result<Value, JsonTextError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'))
        {
            self.pos += 1;
        }
        let token: String = self.chars[start..self.pos].iter().collect();
        let bad = || JsonTextError {
            message: "Input string is not a valid number.",
            position: start,
        };
        let (negative, magnitude) = match token.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, token.as_str()),
        };
        if magnitude == "Infinity" {
            return Ok(Value::Float(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }));
        }
        if let Some(hex) = magnitude
            .strip_prefix("0x")
            .or_else(|| magnitude.strip_prefix("0X"))
        {
            let value = i64::from_str_radix(hex, 16).map_err(|_| bad())?;
            return Ok(Value::Int(if negative { -value } else { value }));
        }
        // Rust also reads "inf" and "nan"; JSON numbers start with a digit or a point.
        if !magnitude.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return Err(bad());
        }
        if magnitude.chars().all(|c| c.is_ascii_digit())
            && let Ok(i) = token.parse::<i64>()
        {
            return Ok(Value::Int(i));
        }
        // Integers beyond 64 bits (BigInteger in Newtonsoft) and decimals are kept as doubles.
        token.parse::<f64>().map(Value::Float).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> serde_json::Value {
        parse_lenient(text).expect("valid").to_json()
    }

    #[test]
    fn lenient_reading() {
        assert_eq!(
            read("{'one': 'a', 'two': 'b'}"),
            json!({"one": "a", "two": "b"})
        );
        assert_eq!(
            read("{a: 1, /* c */ b: [true, null,], // x\n}"),
            json!({"a": 1, "b": [true, null]})
        );
        assert_eq!(read(" \"x\\u0041\\n\" "), json!("xA\n"));
        assert_eq!(read("-12"), json!(-12));
        assert_eq!(read("1.5e3"), json!(1500.0));
        assert_eq!(read("0x1F"), json!(31));
        assert_eq!(read("99999999999999999999"), json!(1e20));
        assert_eq!(read("{'a': 1, 'a': 2}"), json!({"a": 2}));
        assert!(matches!(parse_lenient("NaN"), Ok(Value::Float(x)) if x.is_nan()));
    }

    #[test]
    fn lenient_reading_errors() {
        for bad in [
            "", "{", "[1 2]", "{'a' 1}", "'abc", "tru", "1 2", "inf", "/x", "\"\\q\"",
        ] {
            assert!(parse_lenient(bad).is_err(), "{bad:?} should fail");
        }
        let deep = "[".repeat(MAX_DEPTH + 2);
        assert!(parse_lenient(&deep).is_err());
    }

    fn json_values() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            (-1e6f64..1e6).prop_map(|x| json!(x)),
            "\\PC{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn compact_json_reads_back(json in json_values()) {
            let value = Value::from(json);
            let text = to_compact_json(&value);
            proptest::prop_assert_eq!(parse_lenient(&text).ok(), Some(value.clone()));
            // Strict JSON readers agree with the compact text too.
            let strict: serde_json::Value = serde_json::from_str(&text).expect("compact JSON is JSON");
            proptest::prop_assert_eq!(Value::from(strict), value);
        }

        #[test]
        fn lenient_reader_never_panics(text in "[\\[\\]{}:,'\"a-z0-9./*\\\\ -]{0,24}") {
            let _ = parse_lenient(&text);
        }
    }

    #[test]
    fn compact_writing() {
        let v = Value::from(
            json!({"a": "b\"c", "n": [1, 2.5, 1.0, true, null], "s": "\u{1}\u{2028}é"}),
        );
        assert_eq!(
            to_compact_json(&v),
            r#"{"a":"b\"c","n":[1,2.5,1.0,true,null],"s":"\u0001\u2028é"}"#
        );
        assert_eq!(to_compact_json(&Value::Float(1e21)), "1E+21");
        assert_eq!(to_compact_json(&Value::Float(1e14)), "100000000000000.0");
        assert_eq!(to_compact_json(&Value::Float(f64::NAN)), "\"NaN\"");
    }
}

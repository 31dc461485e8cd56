//! String functions: base64 and data URIs, `format`, `string`, case-insensitive prefix/suffix/wildcard tests,
//! `join`/`split`/`replace`/`padLeft`/`substring`/`trim`/`toLower`/`toUpper` (UTF-16 positions, as .NET counts),
//! and the URI functions (`uri`, `uriComponent`, `uriComponentToString`, `parseUri`, `buildUri`).
//!
//! The polymorphic functions that also work on arrays (`concat`, `contains`, `indexOf`, `length`, `skip`, ...) live
//! with the array functions.

#[path = "format.rs"]
mod format;
#[path = "json_text.rs"]
mod json_text;
#[path = "uri.rs"]
mod uri;

use std::sync::LazyLock;

use data_encoding::{BASE64, Encoding};

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::{Object, Value};

use format::FormatArg;
pub(crate) use json_text::{parse_lenient as parse_json_text, to_compact_json};

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("base64", 1, Some(1), base64),
    FunctionDef::eager("base64ToString", 1, Some(1), base64_to_string),
    FunctionDef::eager("base64ToJson", 1, Some(1), base64_to_json),
    FunctionDef::eager("dataUri", 1, Some(1), data_uri),
    FunctionDef::eager("dataUriToString", 1, Some(1), data_uri_to_string),
    FunctionDef::eager("startsWith", 2, Some(2), starts_with),
    FunctionDef::eager("endsWith", 2, Some(2), ends_with),
    FunctionDef::eager("like", 2, Some(2), like),
    FunctionDef::eager("format", 1, None, format_),
    FunctionDef::eager("join", 2, Some(2), join),
    FunctionDef::eager("padLeft", 2, Some(3), pad_left),
    FunctionDef::eager("replace", 3, Some(3), replace),
    FunctionDef::eager("split", 2, Some(2), split),
    FunctionDef::eager("string", 1, Some(1), string),
    FunctionDef::eager("substring", 1, Some(3), substring),
    FunctionDef::eager("toLower", 1, Some(1), to_lower),
    FunctionDef::eager("toUpper", 1, Some(1), to_upper),
    FunctionDef::eager("trim", 1, Some(1), trim),
    FunctionDef::eager("uri", 2, Some(2), uri_),
    FunctionDef::eager("uriComponent", 1, Some(1), uri_component),
    FunctionDef::eager("uriComponentToString", 1, Some(1), uri_component_to_string),
    FunctionDef::eager("parseUri", 1, Some(1), parse_uri),
    FunctionDef::eager("buildUri", 1, Some(1), build_uri),
];

/// `Convert.FromBase64String`: standard alphabet, padding required, unused trailing bits ignored.
static BASE64_LENIENT: LazyLock<Encoding> = LazyLock::new(|| {
    let mut spec = BASE64.specification();
    spec.check_trailing_bits = false;
    spec.encoding().unwrap_or_else(|_| BASE64.clone())
});

fn base64(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::String(BASE64.encode(args.string(0)?.as_bytes())))
}

/// Decodes base64 text as .NET does: spaces, tabs and line breaks are ignored. The input is never echoed.
fn decode_base64(text: &str) -> Result<Vec<u8>, FnError> {
    let compact: String = text
        .chars()
        .filter(|c| !matches!(c, ' ' | '\t' | '\r' | '\n'))
        .collect();
    BASE64_LENIENT.decode(compact.as_bytes()).map_err(|_| {
        FnError::msg(
            "The input is not a valid Base-64 string as it contains a non-base 64 character, more than two padding characters, or an illegal character among the padding characters.",
        )
    })
}

fn base64_to_string(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let bytes = decode_base64(args.string(0)?)?;
    Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

fn base64_to_json(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let bytes = decode_base64(args.string(0)?)?;
    let text = String::from_utf8_lossy(&bytes);
    parse_json_text(&text)
        .map_err(|e| FnError::msg(format!("the decoded value is not valid JSON: {e}")))
}

/// `dataUri`: strings as `text/plain`, objects and arrays (and other scalars) as `application/json`, both UTF-8.
fn data_uri(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let (content_type, data) = match &args.as_slice()[0] {
        Value::String(s) => ("text/plain;charset=utf8", s.clone()),
        v @ (Value::Object(_) | Value::Array(_)) => {
            ("application/json;charset=utf8", to_compact_json(v))
        }
        Value::Int(i) => ("application/json;charset=utf8", i.to_string()),
        Value::Bool(b) => ("application/json;charset=utf8", dotnet_bool(*b).to_string()),
        _ => return Err(args.type_error(0, "String")),
    };
    Ok(Value::String(format!(
        "data:{content_type};base64,{}",
        BASE64.encode(data.as_bytes())
    )))
}

/// `dataUriToString`: `data:[<mediatype>][;charset=...][;base64],<data>`; base64 or percent-encoded data, UTF-8
/// (or ASCII) text only.
fn data_uri_to_string(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = args.string(0)?;
    let invalid = || FnError::msg("the value is not a valid data URI.");
    let rest = text
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("data:"))
        .map(|_| &text[5..])
        .ok_or_else(invalid)?;
    let (metadata, data) = rest.split_once(',').ok_or_else(invalid)?;
    let tokens: Vec<&str> = if metadata.is_empty() {
        Vec::new()
    } else {
        metadata.split(';').collect()
    };
    if tokens.iter().skip(1).any(|t| t.trim().is_empty()) {
        return Err(invalid());
    }
    let is_base64 = tokens
        .last()
        .is_some_and(|t| t.eq_ignore_ascii_case("base64"));
    // With no media type, the only parameter allowed is `;base64` (`data:;base64,...`).
    if tokens.first().is_some_and(|t| t.is_empty()) && !(tokens.len() == 2 && is_base64) {
        return Err(invalid());
    }
    let charset = tokens.iter().skip(1).find_map(|t| {
        t.get(..8)
            .filter(|p| p.eq_ignore_ascii_case("charset="))
            .map(|_| &t[8..])
    });
    if let Some(charset) = charset
        && !["utf-8", "utf8", "us-ascii", "ascii"]
            .iter()
            .any(|c| charset.eq_ignore_ascii_case(c))
    {
        return Err(FnError::msg(format!(
            "the data URI charset '{charset}' is not supported; use UTF-8."
        )));
    }
    let bytes = if is_base64 {
        decode_base64(data)?
    } else {
        uri::url_decode(data).into_bytes()
    };
    Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

/// .NET's `OrdinalIgnoreCase` folding: each character compared by its simple upper-case mapping.
fn fold_case(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

fn folded(s: &str) -> Vec<char> {
    s.chars().map(fold_case).collect()
}

fn starts_with(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let (text, prefix) = (folded(args.string(0)?), folded(args.string(1)?));
    Ok(Value::Bool(text.starts_with(&prefix)))
}

fn ends_with(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let (text, suffix) = (folded(args.string(0)?), folded(args.string(1)?));
    Ok(Value::Bool(text.ends_with(&suffix)))
}

/// `like(input, pattern)`: `*` matches any run of characters; everything else matches itself, ignoring case.
fn like(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let (text, pattern) = (folded(args.string(0)?), folded(args.string(1)?));
    Ok(Value::Bool(wildcard_match(&text, &pattern)))
}

/// Greedy wildcard matching with backtracking to the last `*` (linear in practice, never exponential).
fn wildcard_match(text: &[char], pattern: &[char]) -> bool {
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

fn dotnet_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// `format(formatString, args...)`: .NET composite formatting. Strings are inserted as-is, booleans as
/// `True`/`False`, null as nothing, numbers through .NET numeric formatting, objects and arrays as compact JSON
/// with `"` turned into `'` (what ARM's engine does, confirmed by Bicep's evaluation tests).
fn format_(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let template = args.string(0)?;
    let mut format_args = Vec::with_capacity(args.len().saturating_sub(1));
    for (i, v) in args.as_slice().iter().enumerate().skip(1) {
        format_args.push(match v {
            Value::String(s) => FormatArg::Text(s.clone()),
            Value::Null => FormatArg::Text(String::new()),
            Value::Bool(b) => FormatArg::Text(dotnet_bool(*b).to_string()),
            Value::Int(n) => FormatArg::Int(*n),
            Value::Float(x) => FormatArg::Float(*x),
            v @ (Value::Array(_) | Value::Object(_)) => {
                FormatArg::Text(to_compact_json(v).replace('"', "'"))
            }
            Value::Lambda(_) | Value::Unevaluated(_) => {
                return Err(args.type_error(i, "String, Integer, Boolean, Object or Array"));
            }
        });
    }
    let budget = ev.budget();
    let max_bytes = budget.limits().max_value_bytes;
    match format::composite_within(template, &format_args, max_bytes) {
        Ok(text) => Ok(Value::String(text)),
        Err(format::FormatError::TooLong) => {
            Err(budget.value_too_large("the formatted string").into())
        }
        Err(e) => Err(FnError::msg(format!("the format string is not valid: {e}"))),
    }
}

fn join(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let items = args.array(0)?;
    let delimiter = args.string(1)?;
    let mut parts = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => parts.push(s.as_str()),
            other => {
                return Err(FnError::msg(format!(
                    "the array element at index {i} must be of type 'String', but the provided value is of type '{}'.",
                    other.value_type()
                )));
            }
        }
    }
    Ok(Value::String(parts.join(delimiter)))
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `padLeft(value, totalLength[, paddingCharacter = ' '])`: never truncates; lengths count UTF-16 code units.
fn pad_left(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = match &args.as_slice()[0] {
        Value::String(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        _ => return Err(args.type_error(0, "String or Integer")),
    };
    let total = args.int(1)?;
    if total < 0 {
        return Err(FnError::msg(
            "the total length must be zero or greater (non-negative number required).",
        ));
    }
    let pad = match args.get(2) {
        None => ' ',
        Some(Value::String(s)) => {
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) if c.len_utf16() == 1 => c,
                _ => {
                    return Err(FnError::msg(
                        "the padding character must be a string of exactly one character.",
                    ));
                }
            }
        }
        Some(_) => return Err(args.type_error(2, "String")),
    };
    let missing = usize::try_from(total)
        .unwrap_or(usize::MAX)
        .saturating_sub(utf16_len(&text));
    let bytes = missing
        .saturating_mul(pad.len_utf8())
        .saturating_add(text.len());
    ev.budget().check_size(bytes, "the padded string")?;
    let mut out = String::with_capacity(text.len() + missing);
    out.extend(std::iter::repeat_n(pad, missing));
    out.push_str(&text);
    Ok(Value::String(out))
}

/// `replace(s, old, new)`: every occurrence, ordinal and case-sensitive (.NET `String.Replace`). ARM's
/// behaviour here is not confirmed; the policy-engine port is case-insensitive, we follow .NET's default.
fn replace(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let (text, old, new) = (args.string(0)?, args.string(1)?, args.string(2)?);
    if old.is_empty() {
        return Err(FnError::msg("the string to replace must not be empty."));
    }
    if new.len() > old.len() {
        let growth = text
            .matches(old)
            .count()
            .saturating_mul(new.len() - old.len());
        ev.budget()
            .check_size(text.len().saturating_add(growth), "the replaced string")?;
    }
    Ok(Value::String(text.replace(old, new)))
}

/// `split(s, delimiter or [delimiters])`: .NET `String.Split(string[], StringSplitOptions.None)`: empty entries
/// are kept; at each position the first delimiter in array order that matches wins; with no non-empty delimiter
/// the string is split on white space.
fn split(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = args.string(0)?;
    let delimiters: Vec<&str> = match &args.as_slice()[1] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => {
            let mut delimiters = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => delimiters.push(s.as_str()),
                    _ => return Err(args.type_error(1, "String or Array of strings")),
                }
            }
            delimiters
        }
        _ => return Err(args.type_error(1, "String or Array of strings")),
    };
    let delimiters: Vec<&str> = delimiters.into_iter().filter(|d| !d.is_empty()).collect();
    let mut parts = Vec::new();
    let mut piece_start = 0;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let matched = if delimiters.is_empty() {
            rest.chars()
                .next()
                .filter(|c| c.is_whitespace())
                .map(char::len_utf8)
        } else {
            delimiters
                .iter()
                .find(|d| rest.starts_with(**d))
                .map(|d| d.len())
        };
        match matched {
            Some(len) => {
                parts.push(Value::str(&text[piece_start..i]));
                i += len;
                piece_start = i;
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    parts.push(Value::str(&text[piece_start..]));
    Ok(Value::Array(parts))
}

/// `string(x)`: strings as-is, integers in decimal, booleans `True`/`False`, doubles as .NET prints them,
/// objects and arrays as compact JSON, null as the empty string.
fn string(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::String(match &args.as_slice()[0] {
        Value::String(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => dotnet_bool(*b).to_string(),
        Value::Float(x) => format::double_to_string(*x),
        Value::Null => String::new(),
        v @ (Value::Array(_) | Value::Object(_)) => to_compact_json(v),
        Value::Lambda(_) | Value::Unevaluated(_) => return Err(args.type_error(0, "String")),
    }))
}

/// `substring(s[, startIndex = 0[, length = rest]])` over UTF-16 code units, with ARM's range error.
fn substring(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let units: Vec<u16> = args.string(0)?.encode_utf16().collect();
    let len = units.len() as i64;
    let start = match args.get(1) {
        None => 0,
        Some(_) => args.int(1)?,
    };
    let length = match args.get(2) {
        None => len.saturating_sub(start),
        Some(_) => args.int(2)?,
    };
    let in_range =
        start >= 0 && length >= 0 && start.checked_add(length).is_some_and(|end| end <= len);
    if !in_range {
        return Err(FnError::msg(format!(
            "The index and length parameters must refer to a location within the string. The index parameter: '{start}', the length parameter: '{length}', the length of the string parameter: '{len}'."
        )));
    }
    let (start, end) = (start as usize, (start + length) as usize);
    // Cutting a surrogate pair leaves half a character, which Rust strings cannot hold: it becomes U+FFFD.
    Ok(Value::String(String::from_utf16_lossy(&units[start..end])))
}

/// Invariant lower-casing, one character at a time (.NET maps each UTF-16 unit on its own, so no final-sigma
/// rule and `İ` becomes `i`).
fn to_lower(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = args.string(0)?;
    Ok(Value::String(
        text.chars()
            .map(|c| c.to_lowercase().next().unwrap_or(c))
            .collect(),
    ))
}

/// Invariant upper-casing with simple (one-to-one) mappings: `ß` stays `ß`.
fn to_upper(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = args.string(0)?;
    Ok(Value::String(
        text.chars()
            .map(|c| {
                let mut upper = c.to_uppercase();
                match (upper.next(), upper.next()) {
                    (Some(u), None) => u,
                    _ => c,
                }
            })
            .collect(),
    ))
}

fn trim(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::str(args.string(0)?.trim()))
}

fn uri_(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let base =
        uri::Uri::parse_absolute(args.string(0)?).map_err(|e| FnError::msg(e.to_string()))?;
    let resolved = base
        .resolve(args.string(1)?)
        .map_err(|e| FnError::msg(e.to_string()))?;
    Ok(Value::String(resolved.to_absolute_string()))
}

fn uri_component(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::String(uri::escape_data_string(args.string(0)?)))
}

fn uri_component_to_string(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::String(uri::url_decode(args.string(0)?)))
}

/// `parseUri(uri)` → `{ scheme, host, port, path, query }` as `System.Uri` reports them (`port` is the scheme's
/// default when none is written, -1 for schemes without one; `query` keeps its `?`).
fn parse_uri(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let parsed =
        uri::Uri::parse_absolute(args.string(0)?).map_err(|e| FnError::msg(e.to_string()))?;
    let mut o = Object::with_capacity(5);
    o.insert("scheme", Value::str(&parsed.scheme));
    o.insert("host", Value::str(parsed.host()));
    o.insert("port", Value::Int(parsed.port()));
    o.insert("path", Value::String(parsed.absolute_path()));
    o.insert("query", Value::String(parsed.query_text()));
    Ok(Value::Object(o))
}

/// `buildUri({ scheme, host, port?, path?, query? })`, the inverse of `parseUri`. A default port is dropped, as
/// `System.Uri` does.
fn build_uri(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let components = args.object(0)?;
    let text = |name: &str, required: bool| -> Result<String, FnError> {
        match components.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) if !required => Ok(String::new()),
            None | Some(Value::Null) => Err(FnError::msg(format!(
                "the URI components must contain the property '{name}'."
            ))),
            Some(other) => Err(FnError::msg(format!(
                "the URI component '{name}' must be of type 'String', but the provided value is of type '{}'.",
                other.value_type()
            ))),
        }
    };
    let scheme = text("scheme", true)?;
    let host = text("host", true)?;
    let path = text("path", false)?;
    let query = text("query", false)?;
    let port = match components.get("port") {
        None | Some(Value::Null) => None,
        Some(Value::Int(p)) => Some(*p),
        Some(other) => {
            return Err(FnError::msg(format!(
                "the URI component 'port' must be of type 'Integer', but the provided value is of type '{}'.",
                other.value_type()
            )));
        }
    };
    uri::build(&scheme, &host, port, &path, &query)
        .map(Value::String)
        .map_err(|e| FnError::msg(e.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::env::SimpleEnvironment;
    use crate::functions::test_util::eval_in;
    use crate::value::Value;
    use serde_json::json;

    /// Arrays, objects and doubles come from variables, so these tests need no other function family.
    fn env() -> SimpleEnvironment {
        let vars = json!({
            "obj": {"a": "b", "!c": 2},
            "arr": [true, 2893, "abc"],
            "foo": ["abc", "def", "ghi"],
            "names": ["Anthony", "Martin"],
            "love": ["I", "love", "Bicep"],
            "numbers": ["one", "two", "three"],
            "empty": [],
            "mixed": ["a", 1],
            "delims": [",", ";"],
            "shortFirst": ["-", "--"],
            "longFirst": ["--", "-"],
            "ints": [1],
            "testObject": {"valueA": 10, "valueB": "Example Text"},
            "letters": ["a", "b", "c"],
            "half": 2.5,
            "quarter": 0.25,
            "one": 1.0,
            "oneHalf": 1.5,
            "k": {"k": ["v", 1.0]},
            "nested": [true, null, 1.0],
            "a1": {"a": 1},
            "fullUri": {"scheme": "https", "host": "mystorage.blob.core.windows.net", "port": 8080,
                "path": "/templates/nestedTemplate.json", "query": "?st=2025-05-09"},
            "minimalUri": {"scheme": "https", "host": "example.com"},
            "noHost": {"scheme": "https"},
            "textPort": {"scheme": "https", "host": "x", "port": "80"},
            "bigPort": {"scheme": "https", "host": "x", "port": 70000}
        });
        let mut env = SimpleEnvironment::default();
        if let Value::Object(o) = Value::from(vars) {
            env.variables = o;
        }
        env
    }

    #[track_caller]
    fn check(expr: &str, expected: serde_json::Value) {
        match eval_in(&env(), expr) {
            Ok(v) => assert_eq!(
                v,
                Value::from(expected.clone()),
                "{expr} gave {:?}, expected {expected}",
                v.to_json()
            ),
            Err(e) => panic!("{expr} failed: {e}"),
        }
    }

    #[track_caller]
    fn check_err(expr: &str, fragment: &str) {
        match eval_in(&env(), expr) {
            Ok(v) => panic!(
                "{expr} gave {}, expected an error containing {fragment:?}",
                v.to_json()
            ),
            Err(e) => assert!(
                e.to_string().contains(fragment),
                "{expr} failed with {e}; expected {fragment:?}"
            ),
        }
    }

    #[test]
    fn base64_family() {
        // string-base64 conformance case
        check("base64('one, two, three')", json!("b25lLCB0d28sIHRocmVl"));
        check(
            "base64ToString('b25lLCB0d28sIHRocmVl')",
            json!("one, two, three"),
        );
        check("base64ToString(base64('héllo ✓'))", json!("héllo ✓"));
        check(
            "base64ToJson(base64('{''one'': ''a'', ''two'': ''b''}'))",
            json!({"one": "a", "two": "b"}),
        );
        check(
            "base64ToJson(base64('[1, true, null]'))",
            json!([1, true, null]),
        );
        check("base64ToString('SGVs bG8=\n')", json!("Hello"));
        check("base64('')", json!(""));
        check_err("base64ToString('SGVsbG8')", "not a valid Base-64 string");
        check_err("base64ToString('***')", "not a valid Base-64 string");
        check_err("base64ToJson(base64('{oops'))", "not valid JSON");
        check_err("base64(1)", "must be of type 'String'");
    }

    #[test]
    fn data_uris() {
        // string-datauri conformance case
        check(
            "dataUri('Hello')",
            json!("data:text/plain;charset=utf8;base64,SGVsbG8="),
        );
        check(
            "dataUriToString('data:;base64,SGVsbG8sIFdvcmxkIQ==')",
            json!("Hello, World!"),
        );
        check("dataUriToString(dataUri('héllo'))", json!("héllo"));
        check(
            "dataUriToString('data:text/plain;charset=UTF-8;page=21,the%20data:1234,5678')",
            json!("the data:1234,5678"),
        );
        check(
            "dataUri(variables('a1'))",
            json!("data:application/json;charset=utf8;base64,eyJhIjoxfQ=="),
        );
        check("dataUriToString('DATA:,a+b')", json!("a b"));
        check_err("dataUriToString('text:,abc')", "not a valid data URI");
        check_err("dataUriToString('data:abc')", "not a valid data URI");
        check_err(
            "dataUriToString('data:;charset=utf-8,abc')",
            "not a valid data URI",
        );
        check_err(
            "dataUriToString('data:text/plain;charset=utf-16,abc')",
            "charset 'utf-16'",
        );
        check_err("dataUri(null())", "must be of type 'String'");
    }

    #[test]
    fn starts_ends_like() {
        // string-startsendswith conformance case
        check("startsWith('abcdef', 'ab')", json!(true));
        check("startsWith('abcdef', 'A')", json!(true));
        check("startsWith('abcdef', 'e')", json!(false));
        check("endsWith('abcdef', 'ef')", json!(true));
        check("endsWith('abcdef', 'F')", json!(true));
        check("endsWith('abcdef', 'e')", json!(false));
        check("startsWith('ÉCOLE', 'éc')", json!(true));
        check("endsWith('abc', '')", json!(true));
        check_err(
            "startsWith('abc', 1)",
            "position 2 must be of type 'String'",
        );
        // Bicep baselines Functions_LF
        check("like('abc', 'abc')", json!(true));
        check("like('abcdef', 'a*c*')", json!(true));
        check("like('abcabc', '*abc')", json!(true));
        check("like('aXaYa', 'a*a')", json!(true));
        check("like('', '***')", json!(true));
        check("like('a', 'b')", json!(false));
        check("like('abc**def', '*def')", json!(true));
        check("like('aXbYa', 'a*b*a')", json!(true));
        check("like('ABC', 'a*C')", json!(true));
        check("like('abc', 'ab')", json!(false));
        check("like('ab', 'a?')", json!(false));
        check_err("like(1, '*')", "must be of type 'String'");
    }

    #[test]
    fn format_function() {
        // string-format conformance case
        check(
            "format('{0}, {1}. Formatted number: {2:N0}', 'Hello', 'User', 8175133)",
            json!("Hello, User. Formatted number: 8,175,133"),
        );
        // String_expressions_are_evaluated_successfully (real ARM engine)
        check(
            "format('>{0}<>{1}<>{2}<>{3}<>{4}<', false(), 12948, 'hello!', variables('obj'), variables('arr'))",
            json!(">False<>12948<>hello!<>{'a':'b','!c':2}<>[true,2893,'abc']<"),
        );
        // Multiline_interpolation_is_evaluated_successfully (raw newlines inside the literal)
        check(
            "format('>{0}<\n>${0}<\n', 12345)",
            json!(">12345<\n>$12345<\n"),
        );
        check(
            "format('>${{intVal}}<\n>{0}<\n', 12345)",
            json!(">${intVal}<\n>12345<\n"),
        );
        // Functions_are_evaluated_correctly / New_functions_are_evaluated_correctly
        check(
            "format('Hi, {0}!', join(variables('names'), ' '))",
            json!("Hi, Anthony Martin!"),
        );
        check("format('{0} {1}!', 'Hi', 'Evie')", json!("Hi Evie!"));
        check(
            "format('{0} {1}!', 'Ahoy', 'Casper')",
            json!("Ahoy Casper!"),
        );
        check(
            "format('{0} {1}!', 'Hi', 'Lady Lechuga')",
            json!("Hi Lady Lechuga!"),
        );
        // lambda-map, List_comprehension_function_evaluation_works, ResourceId_expressions_are_evaluated_successfully
        check("format('Hello {0}!', 'Evie')", json!("Hello Evie!"));
        check("format('Ahoy, {0}!', 'Casper')", json!("Ahoy, Casper!"));
        check("format('Hi {0}!', 'abc')", json!("Hi abc!"));
        check(
            "format('{0}/{1}', 'myParent', 'myChild')",
            json!("myParent/myChild"),
        );
        check(
            "format('{0:D5}|{0,-4}|{0:X}|{1:0.00}', 42, variables('half'))",
            json!("00042|42  |2A|2.50"),
        );
        check(
            "format('{0}{1}', null(), variables('k'))",
            json!("{'k':['v',1.0]}"),
        );
        check("format('no args')", json!("no args"));
        check_err(
            "format('{1}', 'a')",
            "Index (zero based) must be greater than or equal to zero",
        );
        check_err(
            "format('{0', 'a')",
            "Input string was not in a correct format.",
        );
        check_err(
            "format('{0:D}', variables('oneHalf'))",
            "Format specifier was invalid.",
        );
        check_err("format(1)", "must be of type 'String'");
    }

    #[test]
    fn join_function() {
        // Join_function_evaluation_works (real ARM engine)
        check("join(variables('foo'), '')", json!("abcdefghi"));
        check("join(variables('foo'), ',')", json!("abc,def,ghi"));
        check("join(variables('love'), ' ')", json!("I love Bicep"));
        // string-join docs example (Bicep docs table)
        check("join(variables('numbers'), ';')", json!("one;two;three"));
        check("join(variables('empty'), ',')", json!(""));
        check_err(
            "join(variables('mixed'), ',')",
            "index 1 must be of type 'String'",
        );
        check_err("join('a', ',')", "must be of type 'Array'");
    }

    #[test]
    fn pad_left() {
        // string-padleft conformance case
        check("padLeft('123', 10, '0')", json!("0000000123"));
        check("padLeft(123, 5)", json!("  123"));
        check("padLeft('abcdef', 3, '0')", json!("abcdef"));
        check("padLeft('😀', 3, 'x')", json!("x😀"));
        check("padLeft(-5, 4, '0')", json!("00-5"));
        check_err("padLeft('1', 3, '00')", "exactly one character");
        check_err("padLeft('1', 3, '😀')", "exactly one character");
        check_err("padLeft('1', -1)", "zero or greater");
        check_err("padLeft('1', 999999999)", "maxValueBytes");
        check_err("padLeft(true(), 3)", "'String or Integer'");
    }

    #[test]
    fn replace_function() {
        // string-replace conformance case
        check("replace('123-123-1234', '-', '')", json!("1231231234"));
        check(
            "replace('123-123-1234', '1234', 'xxxx')",
            json!("123-123-xxxx"),
        );
        // Functions_are_evaluated_correctly replaces placeholders one by one
        check(
            "replace(replace('Hi, $firstName $lastName!', '$firstName', 'Anthony'), '$lastName', 'Martin')",
            json!("Hi, Anthony Martin!"),
        );
        check("replace('aAa', 'a', 'b')", json!("bAb"));
        check_err("replace('abc', '', 'x')", "must not be empty");
    }

    #[test]
    fn split_function() {
        // string-split conformance case
        check(
            "split('one,two,three', ',')",
            json!(["one", "two", "three"]),
        );
        check(
            "split('one;two,three', variables('delims'))",
            json!(["one", "two", "three"]),
        );
        check("split(',a,,b,', ',')", json!(["", "a", "", "b", ""]));
        check(
            "split('a--b-c', variables('shortFirst'))",
            json!(["a", "", "b", "c"]),
        );
        check(
            "split('a--b-c', variables('longFirst'))",
            json!(["a", "b", "c"]),
        );
        check("split('abc', 'x')", json!(["abc"]));
        check("split('', ',')", json!([""]));
        check("split('a b\tc', '')", json!(["a", "b", "c"]));
        check("split('é,ü', ',')", json!(["é", "ü"]));
        check_err("split('a', 1)", "'String or Array of strings'");
        check_err(
            "split('a', variables('ints'))",
            "'String or Array of strings'",
        );
    }

    #[test]
    fn string_function() {
        // string-string conformance case
        check(
            "string(variables('testObject'))",
            json!("{\"valueA\":10,\"valueB\":\"Example Text\"}"),
        );
        check("string(variables('letters'))", json!("[\"a\",\"b\",\"c\"]"));
        check("string(5)", json!("5"));
        check("string(true())", json!("True"));
        check("string(null())", json!(""));
        check("string('x')", json!("x"));
        check("string(variables('quarter'))", json!("0.25"));
        check("string(variables('nested'))", json!("[true,null,1.0]"));
    }

    #[test]
    fn substring_function() {
        // string-substring conformance case
        check("substring('one two three', 4, 3)", json!("two"));
        check("substring('one two three', 4)", json!("two three"));
        check("substring('abc')", json!("abc"));
        check("substring('abc', 3)", json!(""));
        check("substring('abc', 1, 0)", json!(""));
        check("substring('a😀b', 1, 2)", json!("😀"));
        check("substring('a😀b', 3)", json!("b"));
        check_err(
            "substring('1234567890', 0, 11)",
            "The index and length parameters must refer to a location within the string. The index parameter: '0', the length parameter: '11', the length of the string parameter: '10'.",
        );
        check_err("substring('abc', -1)", "The index parameter: '-1'");
        check_err(
            "substring('abc', 4)",
            "The index parameter: '4', the length parameter: '-1'",
        );
        check_err("substring('abc', 1, -1)", "the length parameter: '-1'");
        check_err(
            "substring('abc', 'x')",
            "position 2 must be of type 'Integer'",
        );
    }

    #[test]
    fn case_and_trim() {
        // string-tolower and string-trim conformance cases
        check("toLower('One Two Three')", json!("one two three"));
        check("toUpper('One Two Three')", json!("ONE TWO THREE"));
        check("trim('    one two three   ')", json!("one two three"));
        // Issue8782 compares toLower(x) with toLower('test')
        check("toLower('TeSt')", json!("test"));
        check("toLower('test')", json!("test"));
        check("toUpper('straße')", json!("STRAßE"));
        check("toLower('ΟΔΟΣ İ')", json!("οδοσ i"));
        check("trim('\t\n x \u{a0}')", json!("x"));
        check_err("toLower(1)", "must be of type 'String'");
    }

    #[test]
    fn uri_functions() {
        // string-uri-rules-inline conformance case
        check(
            "uri('http://contoso.org/firstpath', 'myscript.sh')",
            json!("http://contoso.org/myscript.sh"),
        );
        check(
            "uri('http://contoso.org/firstpath/', 'myscript.sh')",
            json!("http://contoso.org/firstpath/myscript.sh"),
        );
        check(
            "uri('http://contoso.org/firstpath/azuredeploy.json', 'myscript.sh')",
            json!("http://contoso.org/firstpath/myscript.sh"),
        );
        check(
            "uri('http://contoso.org/firstpath/azuredeploy.json/', 'myscript.sh')",
            json!("http://contoso.org/firstpath/azuredeploy.json/myscript.sh"),
        );
        // string-uri conformance case
        check(
            "uri('http://contoso.com/resources/', 'nested/azuredeploy.json')",
            json!("http://contoso.com/resources/nested/azuredeploy.json"),
        );
        check(
            "uriComponent('http://contoso.com/resources/nested/azuredeploy.json')",
            json!("http%3A%2F%2Fcontoso.com%2Fresources%2Fnested%2Fazuredeploy.json"),
        );
        check(
            "uriComponentToString('http%3A%2F%2Fcontoso.com%2Fresources%2Fnested%2Fazuredeploy.json')",
            json!("http://contoso.com/resources/nested/azuredeploy.json"),
        );
        check(
            "uri('https://x.org/a/b', '../c?d=1')",
            json!("https://x.org/c?d=1"),
        );
        check("uriComponent('a b&c=é')", json!("a%20b%26c%3D%C3%A9"));
        check("uriComponentToString('a%20b+c')", json!("a b c"));
        check_err(
            "uri('nested/x', 'y')",
            "The format of the URI could not be determined",
        );
        check_err("uri('http://', 'y')", "The hostname could not be parsed");
    }

    #[test]
    fn parse_and_build_uri() {
        check(
            "parseUri('https://example.com:8080/path/to/resource?query=value')",
            json!({"scheme": "https", "host": "example.com", "port": 8080, "path": "/path/to/resource", "query": "?query=value"}),
        );
        check(
            "parseUri('http://Example.com')",
            json!({"scheme": "http", "host": "example.com", "port": 80, "path": "/", "query": ""}),
        );
        check(
            "buildUri(variables('fullUri'))",
            json!(
                "https://mystorage.blob.core.windows.net:8080/templates/nestedTemplate.json?st=2025-05-09"
            ),
        );
        check(
            "buildUri(variables('minimalUri'))",
            json!("https://example.com/"),
        );
        check(
            "buildUri(parseUri('https://example.com:443/a%20b?x=1'))",
            json!("https://example.com/a%20b?x=1"),
        );
        check_err(
            "buildUri(variables('noHost'))",
            "must contain the property 'host'",
        );
        check_err(
            "buildUri(variables('textPort'))",
            "'port' must be of type 'Integer'",
        );
        check_err("buildUri(variables('bigPort'))", "Invalid port specified");
        check_err("parseUri('not a uri')", "could not be determined");
    }

    /// A plain recursive matcher to compare the linear one against.
    fn naive_match(text: &[char], pattern: &[char]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some(('*', rest)) => (0..=text.len()).any(|i| naive_match(&text[i..], rest)),
            Some((c, rest)) => text.first() == Some(c) && naive_match(&text[1..], rest),
        }
    }

    proptest::proptest! {
        #[test]
        fn wildcard_matching_agrees_with_a_naive_matcher(text in "[ab]{0,8}", pattern in "[ab*]{0,6}") {
            let text: Vec<char> = text.chars().collect();
            let pattern: Vec<char> = pattern.chars().collect();
            proptest::prop_assert_eq!(super::wildcard_match(&text, &pattern), naive_match(&text, &pattern));
        }

        #[test]
        fn split_then_join_restores_the_input(text in "[a-c,;]{0,12}") {
            let expr = format!("join(split('{text}', ','), ',')");
            let value = eval_in(&env(), &expr).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(value, Value::String(text));
        }
    }

    #[test]
    fn arity() {
        check_err("trim()", "expects 1 argument");
        check_err("replace('a', 'b')", "replace");
        check_err("substring()", "substring");
    }
}

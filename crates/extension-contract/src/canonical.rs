//! Canonical JSON: objects' keys sorted recursively by Unicode code point, compact serde_json output.
//!
//! This form feeds reference-id derivation, so it must never change: keys are compared as UTF-8 byte strings
//! (equivalent to code point order), arrays keep their order, strings and numbers are written exactly as
//! serde_json 1.x writes them in compact mode (no spaces; `"`, `\` and control characters escaped, other
//! characters as raw UTF-8; integers in decimal; floats in their shortest round-trip form).

use serde_json::{Map, Value};

/// Returns `value` with every object's keys sorted, recursively.
pub fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
            let mut sorted = Map::with_capacity(entries.len());
            for (key, inner) in entries {
                sorted.insert(key.clone(), sort_keys(inner));
            }
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// The canonical text of `value`, written directly (no sorted copy of the tree).
pub fn to_canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (index, (key, inner)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(':');
                write_canonical(inner, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut String) {
    // Scalars print exactly as serde_json's compact `Display` prints them; that cannot fail.
    use std::fmt::Write;
    let _ = write!(out, "{value}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_recursively_and_compacts() {
        let value =
            json!({ "b": [ { "z": 1, "a": 2 } ], "a": { "y": "x:y", "x": null }, "B": 1.5 });
        assert_eq!(
            to_canonical_string(&value),
            r#"{"B":1.5,"a":{"x":null,"y":"x:y"},"b":[{"a":2,"z":1}]}"#
        );
    }

    #[test]
    fn direct_writer_matches_sorted_copy() {
        let value = json!({ "z": [ { "b": "\u{7f}", "a": -1.25e-7 } ], "": { "k": [null, true, 18446744073709551615u64] } });
        assert_eq!(to_canonical_string(&value), sort_keys(&value).to_string());
    }

    #[test]
    fn escapes_like_serde_json() {
        let value = json!({ "é": "line\nbreak \"q\" \u{1}" });
        assert_eq!(
            to_canonical_string(&value),
            "{\"é\":\"line\\nbreak \\\"q\\\" \\u0001\"}"
        );
    }
}

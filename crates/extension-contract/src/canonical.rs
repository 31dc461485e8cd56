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

/// The canonical text of `value`.
pub fn to_canonical_string(value: &Value) -> String {
    // Serializing a `Value` cannot fail (all keys are strings); `to_string` on `Value` is infallible.
    sort_keys(value).to_string()
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
    fn escapes_like_serde_json() {
        let value = json!({ "é": "line\nbreak \"q\" \u{1}" });
        assert_eq!(
            to_canonical_string(&value),
            "{\"é\":\"line\\nbreak \\\"q\\\" \\u0001\"}"
        );
    }
}

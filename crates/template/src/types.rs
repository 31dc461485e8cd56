//! Type checking of values against ARM parameter/output types and user-defined types (`definitions`).
//!
//! (Minimal first version by the lead so the expansion engine compiles; the types engineer replaces it with the
//! full checker keeping these two signatures.)

use cairn_eval::Value;
use cairn_json::Node;

use crate::diagnostics::Diagnostic;

fn resolve<'n>(schema: &'n Node, definitions: Option<&'n Node>) -> &'n Node {
    let mut current = schema;
    for _ in 0..32 {
        match current.get_ci("$ref").and_then(Node::as_str) {
            Some(r) => {
                match definitions.and_then(|d| d.get(r.trim_start_matches("#/definitions/"))) {
                    Some(next) => current = next,
                    None => break,
                }
            }
            None => break,
        }
    }
    current
}

/// Checks `value` against `schema`'s `type`.
pub fn check_value(
    value: &Value,
    schema: &Node,
    definitions: Option<&Node>,
    target: &str,
) -> Vec<Diagnostic> {
    let schema = resolve(schema, definitions);
    let Some(ty) = schema.get_ci("type").and_then(Node::as_str) else {
        return Vec::new();
    };
    let ok = match (ty.to_ascii_lowercase().as_str(), value) {
        (_, Value::Unevaluated(_) | Value::Null) => true,
        ("string" | "securestring", Value::String(_)) => true,
        ("int", Value::Int(_)) => true,
        ("bool", Value::Bool(_)) => true,
        ("object" | "secureobject", Value::Object(_)) => true,
        ("array", Value::Array(_)) => true,
        ("string" | "securestring" | "int" | "bool" | "object" | "secureobject" | "array", _) => {
            false
        }
        _ => true,
    };
    if ok {
        return Vec::new();
    }
    vec![Diagnostic::error(
        "InvalidTemplate",
        format!(
            "Expected a value of type '{ty}', but received a value of type '{}'.",
            value.value_type()
        ),
        target,
    )]
}

/// True for `securestring`/`secureObject` types.
pub fn is_secure(schema: &Node, definitions: Option<&Node>) -> bool {
    let schema = resolve(schema, definitions);
    schema
        .get_ci("type")
        .and_then(Node::as_str)
        .is_some_and(|t| {
            t.eq_ignore_ascii_case("securestring") || t.eq_ignore_ascii_case("secureobject")
        })
}

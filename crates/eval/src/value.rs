//! The evaluator's own value type: exact 64-bit integers, doubles, ordered objects with case-insensitive lookup,
//! lambdas, and the *unevaluated* marker for runtime values that are not known yet.

use std::fmt;
use std::rc::Rc;

use indexmap::IndexMap;

use cairn_expr::Expr;

/// An ordered object. Keys are exact (`a` and `A` may both exist, as in ARM's JSON objects); lookups try the
/// exact key first, then ignore ASCII case, as ARM does for property access.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Object(IndexMap<String, Value>);

impl Object {
    pub fn new() -> Object {
        Object(IndexMap::new())
    }

    pub fn with_capacity(n: usize) -> Object {
        Object(IndexMap::with_capacity(n))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value at `key`, matching case-insensitively when there is no exact match.
    pub fn get(&self, key: &str) -> Option<&Value> {
        if let Some(v) = self.0.get(key) {
            return Some(v);
        }
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        let index = self.index_of(key)?;
        self.0.get_index_mut(index).map(|(_, v)| v)
    }

    /// The stored spelling of `key` and its value.
    pub fn get_entry(&self, key: &str) -> Option<(&String, &Value)> {
        let index = self.index_of(key)?;
        self.0.get_index(index)
    }

    fn index_of(&self, key: &str) -> Option<usize> {
        self.0
            .get_index_of(key)
            .or_else(|| self.0.keys().position(|k| k.eq_ignore_ascii_case(key)))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.index_of(key).is_some()
    }

    /// Inserts or replaces the value at exactly `key` (keys differing only in case are distinct entries, as in
    /// ARM's JSON objects; lookups then prefer the exact spelling). Constant time, so building objects is linear.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        self.0.insert(key.into(), value);
    }

    /// Like [`Object::insert`], but replaces an entry whose key matches ignoring case (keeping its position and
    /// adopting the new spelling): for merges where `Name` and `name` mean the same property.
    pub fn insert_ci(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        match self.index_of(&key) {
            Some(index) => {
                let (_, slot) = self
                    .0
                    .get_index_mut(index)
                    .expect("index_of returned a valid index");
                *slot = value;
                if let Some((old_key, _)) = self.0.get_index(index)
                    && *old_key != key
                {
                    let (_, v) = self.0.shift_remove_index(index).expect("index is valid");
                    self.0.shift_insert(index, key, v);
                }
            }
            None => {
                self.0.insert(key, value);
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let index = self.index_of(key)?;
        self.0.shift_remove_index(index).map(|(_, v)| v)
    }

    pub fn iter(&self) -> indexmap::map::Iter<'_, String, Value> {
        self.0.iter()
    }

    pub fn keys(&self) -> indexmap::map::Keys<'_, String, Value> {
        self.0.keys()
    }

    pub fn values(&self) -> indexmap::map::Values<'_, String, Value> {
        self.0.values()
    }
}

impl FromIterator<(String, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Object {
        let mut o = Object::new();
        for (k, v) in iter {
            o.insert(k, v);
        }
        o
    }
}

impl IntoIterator for Object {
    type Item = (String, Value);
    type IntoIter = indexmap::map::IntoIter<String, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a String, &'a Value);
    type IntoIter = indexmap::map::Iter<'a, String, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A lambda created by `lambda('x', ..., body)`: parameter names, the body, and the lambda variables in scope
/// where it was created (so nested lambdas can read outer ones).
#[derive(Clone, Debug)]
pub struct Lambda {
    pub params: Vec<String>,
    pub body: Expr,
    pub captured: Vec<(String, Value)>,
    /// The source text the body's spans index into.
    pub source: Rc<str>,
}

/// A value that could not be computed yet (a runtime function with no answer, e.g. during offline expansion or
/// what-if). Keeps the original template string so it can be shown or sent as-is (extension preview
/// `metadata.unevaluated`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unevaluated {
    /// The original template string, brackets included: `"[reference('db').connectionName]"`.
    pub expression: String,
}

#[derive(Clone, Debug, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    Object(Object),
    Lambda(Rc<Lambda>),
    Unevaluated(Rc<Unevaluated>),
}

impl PartialEq for Value {
    /// Deep equality as ARM's `equals` defines it: strings case-sensitive, `1 == 1.0`, object key order ignored.
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Int(a), Value::Float(b)) | (Value::Float(b), Value::Int(a)) => {
                (*a as f64) == *b
            }
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => a == b,
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len() && a.iter().all(|(k, v)| b.0.get(k).is_some_and(|w| v == w))
            }
            (Value::Unevaluated(a), Value::Unevaluated(b)) => a == b,
            _ => false,
        }
    }
}

/// The JSON type name ARM uses in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Null,
    Bool,
    Int,
    Float,
    String,
    Array,
    Object,
    Lambda,
    Unevaluated,
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValueType::Null => "Null",
            ValueType::Bool => "Boolean",
            ValueType::Int => "Integer",
            ValueType::Float => "Float",
            ValueType::String => "String",
            ValueType::Array => "Array",
            ValueType::Object => "Object",
            ValueType::Lambda => "Lambda",
            ValueType::Unevaluated => "Unevaluated",
        })
    }
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Null => ValueType::Null,
            Value::Bool(_) => ValueType::Bool,
            Value::Int(_) => ValueType::Int,
            Value::Float(_) => ValueType::Float,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::Object(_) => ValueType::Object,
            Value::Lambda(_) => ValueType::Lambda,
            Value::Unevaluated(_) => ValueType::Unevaluated,
        }
    }

    pub fn str(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// True when this value, or anything inside it, is [`Value::Unevaluated`].
    pub fn contains_unevaluated(&self) -> bool {
        match self {
            Value::Unevaluated(_) => true,
            Value::Array(items) => items.iter().any(Value::contains_unevaluated),
            Value::Object(o) => o.values().any(Value::contains_unevaluated),
            _ => false,
        }
    }

    /// Converts to JSON. Unevaluated markers become their expression string; lambdas become null (they cannot
    /// escape a template function; the evaluator refuses that earlier).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null | Value::Lambda(_) => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(x) => serde_json::Number::from_f64(*x)
                .map(J::Number)
                .unwrap_or(J::Null),
            Value::String(s) => J::String(s.clone()),
            Value::Array(items) => J::Array(items.iter().map(Value::to_json).collect()),
            Value::Object(o) => {
                J::Object(o.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Value::Unevaluated(u) => J::String(u.expression.clone()),
        }
    }

    pub fn from_json(json: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match json {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) => Value::String(s.clone()),
            J::Array(items) => Value::Array(items.iter().map(Value::from_json).collect()),
            J::Object(map) => {
                let mut o = Object::with_capacity(map.len());
                for (k, v) in map {
                    o.0.insert(k.clone(), Value::from_json(v));
                }
                Value::Object(o)
            }
        }
    }

    /// Converts a parsed JSON node as plain data (no expression evaluation).
    pub fn from_node(node: &cairn_json::Node) -> Value {
        use cairn_json::{NodeKind, Number};
        match &node.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Number(Number::Int(i)) => Value::Int(*i),
            NodeKind::Number(Number::Float(x)) => Value::Float(*x),
            NodeKind::String(s) => Value::String(s.clone()),
            NodeKind::Array(items) => Value::Array(items.iter().map(Value::from_node).collect()),
            NodeKind::Object(members) => {
                let mut o = Object::with_capacity(members.len());
                for m in members {
                    o.0.insert(m.key.clone(), Value::from_node(&m.value));
                }
                Value::Object(o)
            }
        }
    }
}

impl From<serde_json::Value> for Value {
    fn from(json: serde_json::Value) -> Value {
        Value::from_json(&json)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::Array(items)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Value {
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_insensitive_lookup_prefers_exact() {
        let mut o = Object::new();
        o.insert("Name", Value::from(1));
        o.insert("name", Value::from(2));
        assert_eq!(o.len(), 2);
        assert_eq!(o.get("name"), Some(&Value::from(2)));
        assert_eq!(o.get("Name"), Some(&Value::from(1)));
        assert_eq!(o.get("NAME"), Some(&Value::from(1)));
        let mut merged = Object::new();
        merged.insert_ci("Name", Value::from(1));
        merged.insert_ci("name", Value::from(2));
        assert_eq!(merged.len(), 1);
        assert_eq!(merged.keys().next().map(String::as_str), Some("name"));
    }

    #[test]
    fn equality_rules() {
        assert_eq!(Value::Int(1), Value::Float(1.0));
        assert_ne!(Value::from("a"), Value::from("A"));
        let a = Value::from(serde_json::json!({"x": 1, "y": [1, 2]}));
        let b = Value::from(serde_json::json!({"y": [1, 2], "x": 1}));
        assert_eq!(a, b);
    }
}

//! The parsed JSON tree: nodes with spans, objects that keep their key order.

use std::fmt;

/// A byte range in the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A JSON number as written: integers that fit in `i64` stay exact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) => write!(f, "{x}"),
        }
    }
}

/// One object member: its key (with the key's own span) and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub key: String,
    pub key_span: Span,
    pub value: Node,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Node>),
    /// Members in source order. Duplicate keys are kept; [`Node::get`] returns the last one, as Json.NET does.
    Object(Vec<Member>),
}

/// A JSON value and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub span: Span,
}

impl Node {
    pub fn new(kind: NodeKind, span: Span) -> Node {
        Node { kind, span }
    }

    /// A node with no source position (for values synthesised by the engine).
    pub fn synthetic(kind: NodeKind) -> Node {
        Node {
            kind,
            span: Span::default(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.kind {
            NodeKind::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self.kind {
            NodeKind::Number(Number::Int(i)) => Some(i),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[Member]> {
        match &self.kind {
            NodeKind::Object(members) => Some(members),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, NodeKind::Null)
    }

    /// The member named `key` (exact match; the last one when a key repeats).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.member(key).map(|m| &m.value)
    }

    pub fn member(&self, key: &str) -> Option<&Member> {
        self.as_object()?.iter().rev().find(|m| m.key == key)
    }

    /// The member named `key`, ignoring ASCII case (ARM section names and most keys are case-insensitive).
    pub fn get_ci(&self, key: &str) -> Option<&Node> {
        self.member_ci(key).map(|m| &m.value)
    }

    pub fn member_ci(&self, key: &str) -> Option<&Member> {
        self.as_object()?
            .iter()
            .rev()
            .find(|m| m.key.eq_ignore_ascii_case(key))
    }

    /// A short name for the node's JSON type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "boolean",
            NodeKind::Number(Number::Int(_)) => "integer",
            NodeKind::Number(Number::Float(_)) => "number",
            NodeKind::String(_) => "string",
            NodeKind::Array(_) => "array",
            NodeKind::Object(_) => "object",
        }
    }

    /// Converts to `serde_json::Value`, dropping spans (the last of duplicate keys wins).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Number(Number::Int(i)) => Value::from(*i),
            NodeKind::Number(Number::Float(x)) => serde_json::Number::from_f64(*x)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            NodeKind::String(s) => Value::String(s.clone()),
            NodeKind::Array(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Object(members) => {
                let mut map = serde_json::Map::new();
                for m in members {
                    map.insert(m.key.clone(), m.value.to_json());
                }
                Value::Object(map)
            }
        }
    }

    /// Builds a span-less tree from a `serde_json::Value`.
    pub fn from_json(value: &serde_json::Value) -> Node {
        use serde_json::Value;
        let kind = match value {
            Value::Null => NodeKind::Null,
            Value::Bool(b) => NodeKind::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => NodeKind::Number(Number::Int(i)),
                None => NodeKind::Number(Number::Float(n.as_f64().unwrap_or(f64::NAN))),
            },
            Value::String(s) => NodeKind::String(s.clone()),
            Value::Array(items) => NodeKind::Array(items.iter().map(Node::from_json).collect()),
            Value::Object(map) => NodeKind::Object(
                map.iter()
                    .map(|(k, v)| Member {
                        key: k.clone(),
                        key_span: Span::default(),
                        value: Node::from_json(v),
                    })
                    .collect(),
            ),
        };
        Node::synthetic(kind)
    }
}

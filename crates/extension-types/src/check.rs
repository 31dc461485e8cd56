//! Judging a resource body against its type, as Bicep does at compile time: unknown property (with a
//! did-you-mean), missing required property, wrong type, read-only property set, and, on an update, an identifier
//! property changed. Values not known yet ([`Body::Unknown`]) are never judged, and no message quotes a value:
//! only property names and type names.

use std::collections::BTreeMap;

use crate::model::{ObjectProperty, TypeEntry};
use crate::set::{TypeId, TypeSet};

/// Type steps one check may take: bounds the work on a body against types that point at themselves (a union
/// containing itself), where the body's own depth would not.
const MAX_STEPS: usize = 100_000;
/// How deep into a body checks go; deeper parts are not judged.
const MAX_DEPTH: usize = 128;

/// A resource body as far as it is known: evaluated values, and [`Body::Unknown`] where an expression is not
/// evaluated yet (a `reference()` at preflight), which every check accepts.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Unknown,
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Array(Vec<Body>),
    Object(Vec<(String, Body)>),
}

impl Body {
    /// A JSON value taken as fully known.
    pub fn from_json(value: &serde_json::Value) -> Body {
        Body::convert(value, &|_| false)
    }

    /// A JSON value as written in a template: a string that is an ARM expression (`[...]`, not the `[[` escape)
    /// is not known.
    pub fn from_template_json(value: &serde_json::Value) -> Body {
        Body::convert(value, &|s: &str| {
            s.starts_with('[') && s.ends_with(']') && !s.starts_with("[[")
        })
    }

    fn convert(value: &serde_json::Value, expression: &dyn Fn(&str) -> bool) -> Body {
        match value {
            serde_json::Value::Null => Body::Null,
            serde_json::Value::Bool(b) => Body::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Body::Int(i),
                None => n.as_f64().map_or(Body::Unknown, Body::Float),
            },
            serde_json::Value::String(s) if expression(s) => Body::Unknown,
            serde_json::Value::String(s) => Body::String(s.clone()),
            serde_json::Value::Array(items) => {
                Body::Array(items.iter().map(|i| Body::convert(i, expression)).collect())
            }
            serde_json::Value::Object(members) => Body::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.clone(), Body::convert(v, expression)))
                    .collect(),
            ),
        }
    }

    /// What kind of value this is, for messages (never the value).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Body::Unknown => "unknown",
            Body::Null => "null",
            Body::Bool(_) => "bool",
            Body::Int(_) => "int",
            Body::Float(_) => "number",
            Body::String(_) => "string",
            Body::Array(_) => "array",
            Body::Object(_) => "object",
        }
    }

    fn member(&self, name: &str) -> Option<&Body> {
        let Body::Object(members) = self else {
            return None;
        };
        members
            .iter()
            .find(|(k, _)| k == name)
            .or_else(|| members.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
            .map(|(_, v)| v)
    }
}

/// One step of a path into a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// What is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// A property the type does not declare, on a closed object (BCP037).
    UnknownProperty,
    /// A required property absent (BCP035).
    MissingProperty,
    /// A value of the wrong type (BCP036).
    WrongType,
    /// A value of the right type outside its bounds (length, range, allowed values).
    InvalidValue,
    /// A read-only property given a value (BCP073).
    ReadOnlyProperty,
    /// An identifier property with another value than the resource has (an update cannot change it).
    IdentifierChanged,
    /// A resource type the extension does not declare, and it has no fallback type.
    UnknownResourceType,
}

impl FindingKind {
    /// The ARM error code the finding is reported with.
    pub fn code(self) -> &'static str {
        match self {
            FindingKind::UnknownProperty => "UnknownExtensionResourceProperty",
            FindingKind::MissingProperty => "MissingExtensionResourceProperty",
            FindingKind::WrongType => "InvalidExtensionResourcePropertyType",
            FindingKind::InvalidValue => "InvalidExtensionResourcePropertyValue",
            FindingKind::ReadOnlyProperty => "ReadOnlyExtensionResourceProperty",
            FindingKind::IdentifierChanged => "ExtensionResourceIdentifierChanged",
            FindingKind::UnknownResourceType => "UnknownExtensionResourceType",
        }
    }
}

/// One finding: what, where (relative to the body checked) and a message naming properties and types only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub path: Vec<PathSegment>,
    pub message: String,
}

impl Finding {
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

/// Checks `body` (a resource's `properties`) against the body type of resource type `resource` (a
/// `ResourceType` of `set`).
pub fn check_body(set: &TypeSet, resource: TypeId, body: &Body) -> Vec<Finding> {
    let Some(body_type) = set.body_of(resource) else {
        return Vec::new();
    };
    let mut checker = Checker {
        set,
        steps: 0,
        findings: Vec::new(),
    };
    let mut path = Vec::new();
    checker.value(body_type, body, &mut path, 0);
    checker.findings
}

/// Checks an update of a resource whose body was `old` to `new`: identifier properties (flag Identifier) must
/// keep their value, at the top of the body and inside the objects the type describes (Kubernetes'
/// `metadata.name`). Only values known on both sides are compared; a side that leaves one out says nothing.
pub fn check_update(set: &TypeSet, resource: TypeId, old: &Body, new: &Body) -> Vec<Finding> {
    let mut findings = Vec::new();
    if let Some(body) = set.body_of(resource) {
        identifiers(set, body, old, new, &mut Vec::new(), &mut findings);
    }
    findings
}

fn identifiers(
    set: &TypeSet,
    ty: TypeId,
    old: &Body,
    new: &Body,
    path: &mut Vec<PathSegment>,
    findings: &mut Vec<Finding>,
) {
    if path.len() > MAX_DEPTH {
        return;
    }
    let Some(properties) = set.properties(ty) else {
        return;
    };
    for (name, property) in properties {
        let (Some(before), Some(after)) = (old.member(name), new.member(name)) else {
            continue;
        };
        path.push(PathSegment::Key(name.clone()));
        if property.flags.identifier() {
            if known(before) && known(after) && before != after {
                findings.push(Finding {
                    kind: FindingKind::IdentifierChanged,
                    path: path.clone(),
                    message: format!(
                        "The identifier property '{name}' cannot change on an existing resource: deploy a new resource instead."
                    ),
                });
            }
        } else if let Some(inner) = set.target(&property.property_type) {
            identifiers(set, inner, before, after, path, findings);
        }
        path.pop();
    }
}

/// `value` (a resource's `properties`, as JSON) without the properties its type marks read-only, at any depth the
/// type describes: what what-if and drift compare, since the extension, not the template, sets them.
pub fn without_read_only(set: &TypeSet, resource: TypeId, value: &mut serde_json::Value) {
    if let Some(body) = set.body_of(resource) {
        strip(set, body, value, 0);
    }
}

fn strip(set: &TypeSet, ty: TypeId, value: &mut serde_json::Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match (set.get(ty), value) {
        (Some(TypeEntry::ArrayType { item_type, .. }), serde_json::Value::Array(items)) => {
            if let Some(item) = set.target(item_type) {
                items
                    .iter_mut()
                    .for_each(|i| strip(set, item, i, depth + 1));
            }
        }
        (Some(TypeEntry::ObjectType { properties, .. }), serde_json::Value::Object(members)) => {
            strip_members(set, properties, members, depth);
        }
        (
            Some(TypeEntry::DiscriminatedObjectType {
                base_properties,
                discriminator,
                elements,
                ..
            }),
            serde_json::Value::Object(members),
        ) => {
            let element = members
                .get(discriminator)
                .and_then(|d| d.as_str())
                .and_then(|d| elements.get(d))
                .and_then(|r| set.target(r))
                .and_then(|id| set.properties(id));
            strip_members(set, base_properties, members, depth);
            if let Some(element) = element {
                strip_members(set, element, members, depth);
            }
        }
        _ => {}
    }
}

fn strip_members(
    set: &TypeSet,
    properties: &BTreeMap<String, ObjectProperty>,
    members: &mut serde_json::Map<String, serde_json::Value>,
    depth: usize,
) {
    members.retain(|key, _| lookup(properties, key).is_none_or(|(_, p)| !p.flags.read_only()));
    for (key, member) in members.iter_mut() {
        if let Some(inner) = lookup(properties, key).and_then(|(_, p)| set.target(&p.property_type))
        {
            strip(set, inner, member, depth + 1);
        }
    }
}

fn known(body: &Body) -> bool {
    match body {
        Body::Unknown => false,
        Body::Array(items) => items.iter().all(known),
        Body::Object(members) => members.iter().all(|(_, v)| known(v)),
        _ => true,
    }
}

fn lookup<'p>(
    properties: &'p BTreeMap<String, ObjectProperty>,
    name: &str,
) -> Option<(&'p String, &'p ObjectProperty)> {
    properties.get_key_value(name).or_else(|| {
        properties
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
    })
}

struct Checker<'s> {
    set: &'s TypeSet,
    steps: usize,
    findings: Vec<Finding>,
}

impl Checker<'_> {
    fn report(&mut self, kind: FindingKind, path: &[PathSegment], message: String) {
        self.findings.push(Finding {
            kind,
            path: path.to_vec(),
            message,
        });
    }

    /// Whether `value` fits `ty` with no finding, without reporting (for unions).
    fn fits(&mut self, ty: TypeId, value: &Body, depth: usize) -> bool {
        let saved = std::mem::take(&mut self.findings);
        let mut path = Vec::new();
        self.value(ty, value, &mut path, depth);
        let fits = self.findings.is_empty();
        self.findings = saved;
        fits
    }

    fn describe(&self, ty: TypeId, depth: usize) -> String {
        match self.set.get(ty) {
            Some(TypeEntry::UnionType { elements }) if depth < 4 => {
                let mut names: Vec<String> = elements
                    .iter()
                    .filter_map(|e| self.set.target(e))
                    .map(|e| self.describe(e, depth + 1))
                    .collect();
                names.dedup();
                if names.len() > 12 {
                    names.truncate(12);
                    names.push("...".into());
                }
                names.join(" | ")
            }
            Some(entry) => entry.kind_name(),
            None => "any".into(),
        }
    }

    fn value(&mut self, ty: TypeId, value: &Body, path: &mut Vec<PathSegment>, depth: usize) {
        self.steps += 1;
        if matches!(value, Body::Unknown) || depth > MAX_DEPTH || self.steps > MAX_STEPS {
            return;
        }
        let set = self.set;
        let Some(entry) = set.get(ty) else {
            return;
        };
        let wrong = |checker: &mut Self, path: &[PathSegment]| {
            let expected = checker.describe(ty, 0);
            checker.report(
                FindingKind::WrongType,
                path,
                format!(
                    "The value{} is of type '{}', but the type is '{expected}'.",
                    at(path),
                    value.kind_name()
                ),
            );
        };
        match entry {
            TypeEntry::AnyType
            | TypeEntry::ResourceType { .. }
            | TypeEntry::FunctionType(_)
            | TypeEntry::ResourceFunctionType(_) => {}
            TypeEntry::NullType => {
                if !matches!(value, Body::Null) {
                    wrong(self, path.as_slice());
                }
            }
            TypeEntry::BooleanType => {
                if !matches!(value, Body::Bool(_)) {
                    wrong(self, path.as_slice());
                }
            }
            TypeEntry::IntegerType {
                min_value,
                max_value,
            } => {
                let number = match value {
                    Body::Int(i) => Some(*i),
                    Body::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(*f as i64),
                    _ => None,
                };
                let Some(number) = number else {
                    return wrong(self, path.as_slice());
                };
                if min_value.is_some_and(|min| number < min)
                    || max_value.is_some_and(|max| number > max)
                {
                    let bounds = bounds(*min_value, *max_value);
                    self.report(
                        FindingKind::InvalidValue,
                        path,
                        format!("The value{} is out of range: {bounds}.", at(path)),
                    );
                }
            }
            TypeEntry::StringType {
                min_length,
                max_length,
                ..
            } => {
                let Body::String(s) = value else {
                    return wrong(self, path.as_slice());
                };
                let length = s.chars().count() as u64;
                if min_length.is_some_and(|min| length < min)
                    || max_length.is_some_and(|max| length > max)
                {
                    let bounds = bounds(*min_length, *max_length);
                    self.report(
                        FindingKind::InvalidValue,
                        path,
                        format!(
                            "The string{} has the wrong length: {bounds} characters.",
                            at(path)
                        ),
                    );
                }
            }
            TypeEntry::StringLiteralType { value: literal } => match value {
                Body::String(s) if s == literal => {}
                Body::String(_) => self.report(
                    FindingKind::InvalidValue,
                    path,
                    format!("The value{} must be '{literal}'.", at(path)),
                ),
                _ => wrong(self, path.as_slice()),
            },
            TypeEntry::UnionType { elements } => {
                let targets: Vec<TypeId> =
                    elements.iter().filter_map(|e| self.set.target(e)).collect();
                if targets.is_empty() || targets.iter().any(|&t| self.fits(t, value, depth + 1)) {
                    return;
                }
                // One element of the value's own shape: its findings say more than "none of these".
                let same_shape: Vec<TypeId> = targets
                    .iter()
                    .copied()
                    .filter(|&t| shape_matches(self.set, t, value))
                    .collect();
                if let [only] = same_shape[..] {
                    return self.value(only, value, path, depth + 1);
                }
                let literals = targets
                    .iter()
                    .all(|&t| matches!(self.set.get(t), Some(TypeEntry::StringLiteralType { .. })));
                if literals && matches!(value, Body::String(_)) {
                    let allowed = self.describe(ty, 0);
                    self.report(
                        FindingKind::InvalidValue,
                        path,
                        format!(
                            "The value{} is not one of the allowed values: {allowed}.",
                            at(path)
                        ),
                    );
                } else {
                    wrong(self, path.as_slice());
                }
            }
            TypeEntry::ArrayType {
                item_type,
                min_length,
                max_length,
            } => {
                let Body::Array(items) = value else {
                    return wrong(self, path.as_slice());
                };
                let length = items.len() as u64;
                if min_length.is_some_and(|min| length < min)
                    || max_length.is_some_and(|max| length > max)
                {
                    let bounds = bounds(*min_length, *max_length);
                    self.report(
                        FindingKind::InvalidValue,
                        path,
                        format!(
                            "The array{} has the wrong length: {bounds} items.",
                            at(path)
                        ),
                    );
                }
                if let Some(item) = self.set.target(item_type) {
                    for (i, element) in items.iter().enumerate() {
                        path.push(PathSegment::Index(i));
                        self.value(item, element, path, depth + 1);
                        path.pop();
                    }
                }
            }
            TypeEntry::ObjectType {
                properties,
                additional_properties,
                ..
            } => {
                let Body::Object(members) = value else {
                    return wrong(self, path.as_slice());
                };
                let additional = additional_properties.as_ref().map(|r| self.set.target(r));
                self.members(
                    &[properties],
                    additional,
                    members,
                    path,
                    (depth, None),
                    true,
                );
            }
            TypeEntry::DiscriminatedObjectType {
                discriminator,
                base_properties,
                elements,
                ..
            } => {
                let Body::Object(members) = value else {
                    return wrong(self, path.as_slice());
                };
                let tag = value.member(discriminator);
                let element =
                    match tag {
                        None => {
                            path.push(PathSegment::Key(discriminator.clone()));
                            self.report(
                                FindingKind::MissingProperty,
                                path,
                                format!("The required property '{discriminator}' is missing."),
                            );
                            path.pop();
                            return;
                        }
                        Some(Body::String(tag)) => {
                            match elements.iter().find(|(k, _)| *k == tag).or_else(|| {
                                elements.iter().find(|(k, _)| k.eq_ignore_ascii_case(tag))
                            }) {
                                Some((_, r)) => self.set.target(r),
                                None => {
                                    let allowed: Vec<String> =
                                        elements.keys().map(|k| format!("'{k}'")).collect();
                                    path.push(PathSegment::Key(discriminator.clone()));
                                    self.report(
                                        FindingKind::InvalidValue,
                                        path,
                                        format!(
                                            "The value{} is not one of the allowed values: {}.",
                                            at(path),
                                            allowed.join(" | ")
                                        ),
                                    );
                                    path.pop();
                                    return;
                                }
                            }
                        }
                        // Not known yet: which element applies is open, so only the base properties are judged, and
                        // no property is called unknown.
                        Some(Body::Unknown) => {
                            self.members(
                                &[base_properties],
                                Some(None),
                                members,
                                path,
                                (depth, Some(discriminator)),
                                false,
                            );
                            return;
                        }
                        Some(_) => {
                            path.push(PathSegment::Key(discriminator.clone()));
                            self.report(
                                FindingKind::WrongType,
                                path,
                                format!("The value{} must be a string.", at(path)),
                            );
                            path.pop();
                            return;
                        }
                    };
                let element_properties = element.and_then(|e| self.set.properties(e));
                let additional = element.and_then(|e| match self.set.get(e) {
                    Some(TypeEntry::ObjectType {
                        additional_properties: Some(r),
                        ..
                    }) => Some(self.set.target(r)),
                    _ => None,
                });
                let mut sets = vec![base_properties];
                sets.extend(element_properties);
                self.members(
                    &sets,
                    additional,
                    members,
                    path,
                    (depth, Some(discriminator)),
                    true,
                );
            }
        }
    }

    /// The members of an object against the declared `properties` (several sets: a discriminated object's base
    /// and element). `additional`: `None` closed; `Some(None)` open to anything; `Some(Some(t))` open to `t`.
    /// `discriminator`: a discriminated object's tag, judged already (its elements need not declare it).
    fn members(
        &mut self,
        properties: &[&BTreeMap<String, ObjectProperty>],
        additional: Option<Option<TypeId>>,
        members: &[(String, Body)],
        path: &mut Vec<PathSegment>,
        (depth, discriminator): (usize, Option<&str>),
        require: bool,
    ) {
        let find = |name: &str| properties.iter().find_map(|set| lookup(set, name));
        for (key, member) in members {
            if discriminator.is_some_and(|d| d.eq_ignore_ascii_case(key)) && find(key).is_none() {
                continue;
            }
            path.push(PathSegment::Key(key.clone()));
            match find(key) {
                Some((name, property)) if property.flags.read_only() => {
                    self.report(
                        FindingKind::ReadOnlyProperty,
                        path,
                        format!(
                            "The property '{name}' is read-only: the extension sets it, a template cannot."
                        ),
                    );
                }
                Some((_, property)) => {
                    if let Some(inner) = self.set.target(&property.property_type) {
                        self.value(inner, member, path, depth + 1);
                    }
                }
                None => match additional {
                    Some(Some(inner)) => self.value(inner, member, path, depth + 1),
                    Some(None) => {}
                    None => {
                        let writable = properties
                            .iter()
                            .flat_map(|set| set.iter())
                            .filter(|(_, p)| !p.flags.read_only())
                            .map(|(k, _)| k.as_str());
                        let suggestion = closest(key, writable)
                            .map(|c| format!(" Did you mean '{c}'?"))
                            .unwrap_or_default();
                        self.report(
                            FindingKind::UnknownProperty,
                            path,
                            format!("The property '{key}' is not allowed here.{suggestion}"),
                        );
                    }
                },
            }
            path.pop();
        }
        if !require {
            return;
        }
        for set in properties {
            for (name, property) in set.iter() {
                if property.flags.required()
                    && !property.flags.read_only()
                    && !members.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
                {
                    path.push(PathSegment::Key(name.clone()));
                    self.report(
                        FindingKind::MissingProperty,
                        path,
                        format!("The required property '{name}' is missing."),
                    );
                    path.pop();
                }
            }
        }
    }
}

/// Whether `value` has the shape (object, array, string, ...) of type `ty`, ignoring what is inside.
fn shape_matches(set: &TypeSet, ty: TypeId, value: &Body) -> bool {
    matches!(
        (set.get(ty), value),
        (Some(TypeEntry::ObjectType { .. }), Body::Object(_))
            | (
                Some(TypeEntry::DiscriminatedObjectType { .. }),
                Body::Object(_)
            )
            | (Some(TypeEntry::ArrayType { .. }), Body::Array(_))
            | (Some(TypeEntry::StringType { .. }), Body::String(_))
            | (Some(TypeEntry::IntegerType { .. }), Body::Int(_))
    )
}

fn at(path: &[PathSegment]) -> String {
    match path.last() {
        Some(PathSegment::Key(k)) => format!(" of '{k}'"),
        Some(PathSegment::Index(i)) => format!(" at index {i}"),
        None => String::new(),
    }
}

fn bounds<T: std::fmt::Display>(min: Option<T>, max: Option<T>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!("between {min} and {max}"),
        (Some(min), None) => format!("at least {min}"),
        (None, Some(max)) => format!("at most {max}"),
        (None, None) => "any".into(),
    }
}

/// The candidate closest to `name` when it is close enough to be a typo: at most a third of its length in edits
/// (one for short names), letter case ignored; the same rule as the template checks' suggestions.
fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = name.to_lowercase();
    let budget = wanted.chars().count().max(3) / 3;
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        let distance = strsim::damerau_levenshtein(&wanted, &candidate.to_lowercase());
        if distance <= budget && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

//! Extension resource bodies checked against the types their extension declares (Bicep's type format, read by
//! `cairn-extension-types`): each finding becomes a diagnostic with an ARM code, the JSON path of the property in
//! the template and the span of the closest place the template writes it (the property itself, or the object or
//! expression it would be in), so a missing property or a value computed by an expression still points somewhere.

use std::sync::Arc;

use cairn_eval::Value;
pub use cairn_extension_types::PathSegment;
use cairn_extension_types::{Body, Finding, FindingKind, TypeId, TypeSet};
use cairn_json::{Node, NodeKind, Span};

use crate::diagnostics::{Diagnostic, join_index, join_path};
use crate::plan::{Plan, PlannedExtensionRef};

pub use cairn_extension_types as types;

/// Where type sets come from: by extension name (matched ignoring case) and the version a template asks for.
pub trait ExtensionTypes {
    fn types(&self, name: &str, version: &str) -> Option<Arc<TypeSet>>;
}

/// A fixed list of type sets, each for one extension name and exact version.
#[derive(Clone, Debug, Default)]
pub struct KnownTypes {
    sets: Vec<(String, String, Arc<TypeSet>)>,
}

impl KnownTypes {
    pub fn new() -> KnownTypes {
        KnownTypes::default()
    }

    pub fn insert(
        &mut self,
        name: impl Into<String>,
        version: impl Into<String>,
        set: Arc<TypeSet>,
    ) {
        self.sets.push((name.into(), version.into(), set));
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

impl ExtensionTypes for KnownTypes {
    fn types(&self, name: &str, version: &str) -> Option<Arc<TypeSet>> {
        self.sets
            .iter()
            .find(|(n, v, _)| n.eq_ignore_ascii_case(name) && v == version)
            .map(|(_, _, set)| Arc::clone(set))
    }
}

/// No types known: nothing is checked.
pub struct NoTypes;

impl ExtensionTypes for NoTypes {
    fn types(&self, _: &str, _: &str) -> Option<Arc<TypeSet>> {
        None
    }
}

/// One finding about a resource body.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeFinding {
    /// Target: the full JSON path of the property (`resources.f.properties.contnet`); span: where the template
    /// writes the closest part of it, when the template's nodes carry spans.
    pub diagnostic: Diagnostic,
    /// The JSON path of that closest written part, which an ARM error carries as its `TemplateViolation` path so a
    /// client can point at it (the full path of a missing property leads nowhere in the file).
    pub anchor: String,
}

/// The resource a body belongs to, as the expansion knows it.
#[derive(Clone, Copy, Debug)]
pub struct ResourceRef<'r> {
    pub extension: &'r PlannedExtensionRef,
    pub resource_type: &'r str,
    pub api_version: Option<&'r str>,
    /// JSON path of the declaration, relative to the template at `prefix` of the root.
    pub path: &'r str,
    pub existing: bool,
}

/// The `ResourceType` of a resource in `set`, or its fallback; `None` when neither applies.
pub fn resource_type_of(set: &TypeSet, resource: &ResourceRef<'_>) -> Option<TypeId> {
    set.resource(
        resource.resource_type,
        resource.api_version,
        Some(resource.extension.version.as_str()),
    )
    .or(set.fallback())
}

/// Checks one extension resource's evaluated `body` (with `properties`). `root`: the root template's node, which
/// holds the declaration at `prefix` + `resource.path`. An `existing` resource is only read, and not checked.
pub fn check_resource(
    types: &dyn ExtensionTypes,
    root: &Node,
    prefix: &str,
    resource: ResourceRef<'_>,
    body: &Value,
) -> Vec<TypeFinding> {
    if resource.existing {
        return Vec::new();
    }
    let Some(set) = types.types(&resource.extension.name, &resource.extension.version) else {
        return Vec::new();
    };
    let declaration_path = under(prefix, resource.path);
    let Some(id) = resource_type_of(&set, &resource) else {
        // Declared at another apiVersion: the extension may well accept this one (the SDK does not check
        // versions), so the body is not judged rather than refused on a guess.
        let name = resource
            .resource_type
            .split_once('@')
            .map_or(resource.resource_type, |(name, _)| name);
        let declared_elsewhere = set.resource_keys().any(|key| {
            key.split_once('@')
                .map_or(key, |(k, _)| k)
                .eq_ignore_ascii_case(name)
        });
        if declared_elsewhere {
            return Vec::new();
        }
        let target = join_path(&declaration_path, "type");
        let finding = Finding {
            kind: FindingKind::UnknownResourceType,
            path: Vec::new(),
            message: format!(
                "The extension '{}' {} has no resource type '{}'{}.",
                resource.extension.name,
                resource.extension.version,
                resource.resource_type,
                resource
                    .api_version
                    .map(|v| format!(" at version '{v}'"))
                    .unwrap_or_default()
            ),
        };
        return vec![located(root, &target, &finding)];
    };
    // `Object::get` matches the key ignoring case, as ARM does.
    let properties = match body {
        Value::Object(members) => members.get("properties"),
        _ => None,
    };
    let base = join_path(&declaration_path, "properties");
    let body = properties.map_or(Body::Object(Vec::new()), to_body);
    cairn_extension_types::check_body(&set, id, &body)
        .iter()
        .map(|f| located(root, &base, f))
        .collect()
}

/// Checks the resources of an expanded plan (nested plans too), for `template validate`. `root`: the template the
/// plan was expanded from.
pub fn check_plan(types: &dyn ExtensionTypes, root: &Node, plan: &Plan) -> Vec<TypeFinding> {
    let mut findings = Vec::new();
    walk_plan(types, root, "", plan, &mut findings);
    findings
}

fn walk_plan(
    types: &dyn ExtensionTypes,
    root: &Node,
    prefix: &str,
    plan: &Plan,
    findings: &mut Vec<TypeFinding>,
) {
    for resource in &plan.resources {
        if let (Some(extension), Some(body)) = (&resource.extension, &resource.body) {
            let r = ResourceRef {
                extension,
                resource_type: &resource.resource_type,
                api_version: resource.api_version.as_deref(),
                path: &resource.path,
                existing: resource.existing,
            };
            findings.extend(check_resource(types, root, prefix, r, body));
        }
        if let Some(child) = &resource.deployment {
            let child_prefix = join_path(
                &join_path(&under(prefix, &resource.path), "properties"),
                "template",
            );
            walk_plan(types, root, &child_prefix, child, findings);
        }
    }
}

/// The identifier properties of an extension resource that an update would change: `old` the properties the
/// resource has (as last applied or read), `new` the evaluated body about to be sent. Only values known on both
/// sides are compared.
pub fn check_identifiers(
    types: &dyn ExtensionTypes,
    root: &Node,
    prefix: &str,
    resource: ResourceRef<'_>,
    old: &serde_json::Value,
    new: &Value,
) -> Vec<TypeFinding> {
    let Some(set) = types.types(&resource.extension.name, &resource.extension.version) else {
        return Vec::new();
    };
    let Some(id) = resource_type_of(&set, &resource) else {
        return Vec::new();
    };
    let new_properties = match new {
        Value::Object(members) => members.get("properties").map_or(Body::Unknown, to_body),
        _ => Body::Unknown,
    };
    let base = join_path(&under(prefix, resource.path), "properties");
    cairn_extension_types::check_update(&set, id, &Body::from_json(old), &new_properties)
        .iter()
        .map(|f| located(root, &base, f))
        .collect()
}

/// An evaluated value as a body to check: what is not evaluated yet (or a lambda) is unknown.
pub fn to_body(value: &Value) -> Body {
    match value {
        Value::Null => Body::Null,
        Value::Bool(b) => Body::Bool(*b),
        Value::Int(i) => Body::Int(*i),
        Value::Float(f) => Body::Float(*f),
        Value::String(s) => Body::String(s.clone()),
        Value::Array(items) => Body::Array(items.iter().map(to_body).collect()),
        Value::Object(members) => Body::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), to_body(v)))
                .collect(),
        ),
        Value::Lambda(_) | Value::Unevaluated(_) => Body::Unknown,
    }
}

fn under(prefix: &str, path: &str) -> String {
    match (prefix.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) if path.starts_with('[') => format!("{prefix}{path}"),
        (false, false) => format!("{prefix}.{path}"),
    }
}

/// A finding at `base` + its path, with the span and path of the deepest part of it the template writes.
fn located(root: &Node, base: &str, finding: &Finding) -> TypeFinding {
    let mut target = base.to_string();
    for segment in &finding.path {
        target = match segment {
            PathSegment::Key(k) => join_path(&target, k),
            PathSegment::Index(i) => join_index(&target, *i),
        };
    }
    let place = deepest(root, base, &finding.path);
    // A property that should not be there is pointed at by its key; a wrong value by the value; an object or
    // array (or what is missing from one) by the key that holds it.
    let about_key = matches!(
        finding.kind,
        FindingKind::UnknownProperty | FindingKind::ReadOnlyProperty
    );
    let span = match (
        place.key_span,
        place.complete && !about_key,
        place.composite,
    ) {
        (Some(key), false, _) | (Some(key), _, true) => Some(key),
        _ => Some(place.value_span),
    }
    .filter(|s| *s != Span::default());
    let mut diagnostic = Diagnostic::error(finding.code(), finding.message.clone(), target);
    if let Some(span) = span {
        diagnostic = diagnostic.with_span(span);
    }
    TypeFinding {
        diagnostic,
        anchor: place.path,
    }
}

/// The deepest node of a path the template holds.
struct Place {
    path: String,
    /// The key of the member reached last, if the last step was a key.
    key_span: Option<Span>,
    value_span: Span,
    /// The value is an object or an array.
    composite: bool,
    /// The whole path was found.
    complete: bool,
}

fn deepest(root: &Node, base: &str, rest: &[PathSegment]) -> Place {
    let mut place = Place {
        path: String::new(),
        key_span: None,
        value_span: root.span,
        composite: true,
        complete: false,
    };
    let Some(mut segments) = parse_arm_path(base) else {
        place.path = base.to_string();
        return place;
    };
    segments.extend(rest.iter().cloned());
    let mut node = root;
    for segment in &segments {
        match segment {
            PathSegment::Key(key) => {
                let Some(member) = node.as_object().and_then(|members| {
                    members
                        .iter()
                        .rev()
                        .find(|m| m.key.eq_ignore_ascii_case(key))
                }) else {
                    return place;
                };
                place.path = join_path(&place.path, key);
                place.key_span = Some(member.key_span);
                node = &member.value;
            }
            PathSegment::Index(i) => {
                let Some(item) = node.as_array().and_then(|items| items.get(*i)) else {
                    return place;
                };
                place.path = join_index(&place.path, *i);
                place.key_span = None;
                node = item;
            }
        }
        place.value_span = node.span;
        place.composite = matches!(node.kind, NodeKind::Object(_) | NodeKind::Array(_));
    }
    place.complete = true;
    place
}

/// `resources[2].properties['a b'].x` as steps (`''` in a quoted key is a quote); `None` if it is not one. The CLI
/// locates its engine errors' paths with it too.
pub fn parse_arm_path(path: &str) -> Option<Vec<PathSegment>> {
    let mut segments = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("['") {
            let mut key = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                if c != '\'' {
                    key.push(c);
                } else if after[i + 1..].starts_with('\'') {
                    key.push('\'');
                    chars.next();
                } else {
                    break i;
                }
            };
            rest = after[end + 1..].strip_prefix(']')?;
            segments.push(PathSegment::Key(key));
        } else if let Some(after) = rest.strip_prefix('[') {
            let (index, tail) = after.split_once(']')?;
            segments.push(PathSegment::Index(index.trim().parse().ok()?));
            rest = tail;
        } else {
            let key_start = rest.strip_prefix('.').unwrap_or(rest);
            let end = key_start.find(['.', '[']).unwrap_or(key_start.len());
            if end == 0 {
                return None;
            }
            segments.push(PathSegment::Key(key_start[..end].to_string()));
            rest = &key_start[end..];
        }
    }
    Some(segments)
}

//! Type checking: values against ARM parameter/output types and user-defined types (`definitions`), and the
//! well-formedness of the type declarations themselves.
//!
//! A type declaration ("schema") is a JSON object with `type` (`string`, `securestring`, `int`, `bool`, `object`,
//! `secureObject`, `array`; case-insensitive) or `$ref` (a JSON pointer into `definitions`, possibly nested:
//! `#/definitions/foo/properties/bar`), plus the constraints `allowedValues`, `minValue`/`maxValue`,
//! `minLength`/`maxLength` (UTF-16 units for strings), `nullable`, `properties`, `additionalProperties`, `sealed`,
//! `items`, `prefixItems` and `discriminator` (reference `template-language.md` §1.2, §1.3). Keys next to a `$ref`
//! apply together with the referenced declaration; an explicit `nullable` on the outer declaration wins.
//!
//! Error codes: ARM reports both a bad value (a deployment parameter that does not match its type, an output that
//! does not match its declaration) and a malformed declaration as `InvalidTemplate` ("Deployment template validation
//! failed: ..."), so every diagnostic from this module uses that code. Messages follow ARM's wording where it is
//! known ("The provided value for the template parameter 'x' is not valid. Expected a value of type 'Int', but
//! received a value of type 'String'."). A value of a secure type is never quoted in a message.

use cairn_eval::Value;
use cairn_json::{Node, NodeKind, Number};

use crate::diagnostics::{Diagnostic, join_index, join_path};

/// The error code of every diagnostic produced here (see the module documentation).
pub const TYPE_ERROR_CODE: &str = "InvalidTemplate";

/// How many `$ref` hops are followed before a chain is considered cyclic.
pub const MAX_REF_CHAIN: usize = 32;

/// Deeper values or type declarations than this are not checked further (hostile input cannot exhaust the stack).
const MAX_DEPTH: usize = 128;

/// How many (value, declaration) pairs one [`check_value`] call visits at most: discriminator mappings and `$ref`s
/// can lead back to the same declarations, so hostile definitions could otherwise make the work explode.
const MAX_CHECK_STEPS: usize = 200_000;

/// Longest rendering of a value quoted in a message.
const MAX_QUOTED_CHARS: usize = 200;

/// The primitive ARM types a declaration's `type` may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseType {
    String,
    SecureString,
    Int,
    Bool,
    Object,
    SecureObject,
    Array,
}

impl BaseType {
    pub const ALL: [BaseType; 7] = [
        BaseType::String,
        BaseType::SecureString,
        BaseType::Int,
        BaseType::Bool,
        BaseType::Object,
        BaseType::SecureObject,
        BaseType::Array,
    ];

    /// Parses a `type` value, ignoring case.
    pub fn parse(name: &str) -> Option<BaseType> {
        BaseType::ALL
            .into_iter()
            .find(|t| t.arm_name().eq_ignore_ascii_case(name))
    }

    /// The spelling ARM uses in messages.
    pub fn arm_name(self) -> &'static str {
        match self {
            BaseType::String => "String",
            BaseType::SecureString => "SecureString",
            BaseType::Int => "Int",
            BaseType::Bool => "Bool",
            BaseType::Object => "Object",
            BaseType::SecureObject => "SecureObject",
            BaseType::Array => "Array",
        }
    }

    pub fn is_secure(self) -> bool {
        matches!(self, BaseType::SecureString | BaseType::SecureObject)
    }

    /// True when `value` (not null, not unevaluated) has this type.
    fn accepts(self, value: &Value) -> bool {
        match self {
            BaseType::String | BaseType::SecureString => matches!(value, Value::String(_)),
            BaseType::Int => matches!(value, Value::Int(_)),
            BaseType::Bool => matches!(value, Value::Bool(_)),
            BaseType::Object | BaseType::SecureObject => matches!(value, Value::Object(_)),
            BaseType::Array => matches!(value, Value::Array(_)),
        }
    }
}

fn valid_type_names() -> String {
    BaseType::ALL
        .iter()
        .map(|t| t.arm_name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves a `$ref` JSON pointer (`#/definitions/a/properties/b`, `#/definitions/t/prefixItems/1`) against the
/// template's `definitions` node.
pub fn resolve_ref<'n>(reference: &str, definitions: Option<&'n Node>) -> Option<&'n Node> {
    let rest = reference.strip_prefix("#/")?;
    let mut segments = rest.split('/').map(decode_pointer_segment);
    let first = segments.next()?;
    if !first.eq_ignore_ascii_case("definitions") {
        return None;
    }
    let mut current = definitions?;
    let mut any = false;
    for segment in segments {
        any = true;
        current = match &current.kind {
            NodeKind::Object(_) => current.get(&segment).or_else(|| current.get_ci(&segment))?,
            NodeKind::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    any.then_some(current)
}

/// JSON pointer escapes: `~1` is `/`, `~0` is `~`.
fn decode_pointer_segment(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// The declaration followed by the declarations its `$ref` chain leads to (outermost first). Stops at an
/// unresolvable reference or a cycle; [`check_schema`] reports those.
fn ref_chain<'n>(schema: &'n Node, definitions: Option<&'n Node>) -> Vec<&'n Node> {
    let mut chain = vec![schema];
    let mut current = schema;
    while let Some(reference) = current.get_ci("$ref").and_then(Node::as_str) {
        let Some(next) = resolve_ref(reference, definitions) else {
            break;
        };
        if chain.len() > MAX_REF_CHAIN || chain.iter().any(|n| std::ptr::eq(*n, next)) {
            break;
        }
        chain.push(next);
        current = next;
    }
    chain
}

fn declared_type(node: &Node) -> Option<BaseType> {
    node.get_ci("type")
        .and_then(Node::as_str)
        .and_then(BaseType::parse)
}

/// The first `type` along the `$ref` chain.
fn chain_type(chain: &[&Node]) -> Option<BaseType> {
    chain.iter().find_map(|n| declared_type(n))
}

/// `nullable` of the outermost declaration that says (default: not nullable).
fn chain_nullable(chain: &[&Node]) -> bool {
    chain
        .iter()
        .find_map(|n| n.get_ci("nullable").and_then(Node::as_bool))
        .unwrap_or(false)
}

/// True when the declaration allows `null` (`nullable: true`, directly or through `$ref`).
pub fn is_nullable(schema: &Node, definitions: Option<&Node>) -> bool {
    chain_nullable(&ref_chain(schema, definitions))
}

/// True for `securestring`/`secureObject` types, directly or through `$ref`.
pub fn is_secure(schema: &Node, definitions: Option<&Node>) -> bool {
    ref_chain(schema, definitions)
        .iter()
        .any(|n| declared_type(n).is_some_and(BaseType::is_secure))
}

/// Checks `value` against the type declaration `schema`; `target` is the JSON path of the value
/// (`parameters.p.value`, `outputs.o`), and problems inside it get paths below it (`parameters.p.value.items[2]`).
///
/// [`Value::Unevaluated`] values (and unevaluated parts of a value) are skipped: they are only known at deployment
/// time. A `null` value at the top is accepted whatever the declaration says: whether a missing or null parameter or
/// output is an error is decided by the caller (defaults, `nullable` parameters, 1.0 leniency). Nested `null`s must be
/// allowed by a `nullable` declaration (or listed in `allowedValues`).
pub fn check_value(
    value: &Value,
    schema: &Node,
    definitions: Option<&Node>,
    target: &str,
) -> Vec<Diagnostic> {
    check_value_as(value, schema, definitions, target, false)
}

/// [`check_value`] for a value that may be secure whatever its declaration says (a Key Vault secret, a value
/// computed from a secure parameter): with `secure`, no message quotes the value or its keys.
pub fn check_value_as(
    value: &Value,
    schema: &Node,
    definitions: Option<&Node>,
    target: &str,
    secure: bool,
) -> Vec<Diagnostic> {
    let mut checker = ValueChecker {
        definitions,
        subject: Subject::from_target(target),
        root: target,
        diags: Vec::new(),
        steps: 0,
    };
    checker.check(value, schema, target, secure, 0);
    checker.diags
}

/// What a message is about, derived from the root target path.
enum Subject {
    Parameter(String),
    Output(String),
    Other,
}

impl Subject {
    fn from_target(target: &str) -> Subject {
        if let Some(name) = section_member(target, "parameters") {
            return Subject::Parameter(name);
        }
        if let Some(name) = section_member(target, "outputs") {
            return Subject::Output(name);
        }
        Subject::Other
    }

    fn sentence(&self, target: &str) -> String {
        match self {
            Subject::Parameter(name) => {
                format!("The provided value for the template parameter '{name}' is not valid.")
            }
            Subject::Output(name) => format!("The template output '{name}' is not valid."),
            Subject::Other => format!("The value at '{target}' is not valid."),
        }
    }
}

/// The member name right after `section` at the start of a path built by [`join_path`]: `parameters.p.value` →
/// `p`, `parameters['a-b'].value` → `a-b`.
fn section_member(path: &str, section: &str) -> Option<String> {
    let rest = path.strip_prefix(section)?;
    if let Some(simple) = rest.strip_prefix('.') {
        let end = simple.find(['.', '[']).unwrap_or(simple.len());
        return (end > 0).then(|| simple[..end].to_string());
    }
    let quoted = rest.strip_prefix("['")?;
    let mut name = String::new();
    let mut chars = quoted.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
                name.push('\'');
                continue;
            }
            return Some(name);
        }
        name.push(c);
    }
    None
}

struct ValueChecker<'a> {
    definitions: Option<&'a Node>,
    subject: Subject,
    root: &'a str,
    diags: Vec<Diagnostic>,
    steps: usize,
}

impl ValueChecker<'_> {
    fn report(&mut self, path: &str, detail: String) {
        let mut message = self.subject.sentence(self.root);
        message.push(' ');
        if path != self.root {
            let relative = path
                .strip_prefix(self.root)
                .map(|r| r.trim_start_matches('.'))
                .unwrap_or(path);
            message.push_str(&format!("At '{relative}': "));
        }
        message.push_str(&detail);
        self.diags
            .push(Diagnostic::error(TYPE_ERROR_CODE, message, path));
    }

    fn check(&mut self, value: &Value, schema: &Node, path: &str, secure: bool, depth: usize) {
        self.steps += 1;
        if depth > MAX_DEPTH
            || self.steps > MAX_CHECK_STEPS
            || matches!(value, Value::Unevaluated(_))
        {
            return;
        }
        let chain = ref_chain(schema, self.definitions);
        let secure = secure
            || chain
                .iter()
                .any(|n| declared_type(n).is_some_and(BaseType::is_secure));
        if value.is_null() {
            let allowed_by_list = chain.iter().any(|n| {
                n.get_ci("allowedValues")
                    .and_then(Node::as_array)
                    .is_some_and(|items| items.iter().any(Node::is_null))
            });
            if depth > 0 && !chain_nullable(&chain) && !allowed_by_list {
                let expected = chain_type(&chain).map_or("non-null value", BaseType::arm_name);
                self.report(
                    path,
                    format!(
                        "Expected a value of type '{expected}', but received a value of type 'Null'."
                    ),
                );
            }
            return;
        }
        if let Some(expected) = chain_type(&chain)
            && !expected.accepts(value)
        {
            self.report(
                path,
                format!(
                    "Expected a value of type '{}', but received a value of type '{}'.",
                    expected.arm_name(),
                    value.value_type()
                ),
            );
            return;
        }
        for node in &chain {
            self.constraints(value, node, path, secure, depth);
        }
    }

    /// The constraints written on one declaration of the chain (its type has already matched).
    fn constraints(&mut self, value: &Value, node: &Node, path: &str, secure: bool, depth: usize) {
        if let Some(allowed) = node.get_ci("allowedValues").and_then(Node::as_array) {
            self.allowed_values(value, allowed, path, secure);
        }
        self.range(value, node, path, secure);
        self.length(value, node, path);
        match value {
            Value::Object(_) => self.object(value, node, path, secure, depth),
            Value::Array(items) => self.array(items, node, path, secure, depth),
            _ => {}
        }
    }

    fn allowed_values(&mut self, value: &Value, allowed: &[Node], path: &str, secure: bool) {
        if value.contains_unevaluated() {
            return;
        }
        let allowed: Vec<Value> = allowed.iter().map(Value::from_node).collect();
        if allowed.contains(value) {
            return;
        }
        let list = allowed.iter().map(render).collect::<Vec<_>>().join(",");
        // An array value is allowed when every element is (reference §1.2); a whole-array match (tuple unions)
        // was accepted above.
        if let Value::Array(items) = value {
            for (i, item) in items.iter().enumerate() {
                if item.contains_unevaluated() || allowed.contains(item) {
                    continue;
                }
                let detail = if secure {
                    format!("The value is not part of the allowed value(s): '{list}'.")
                } else {
                    format!(
                        "The value '{}' is not part of the allowed value(s): '{list}'.",
                        render(item)
                    )
                };
                self.report(&join_index(path, i), detail);
            }
            return;
        }
        let detail = if secure {
            format!("The value is not part of the allowed value(s): '{list}'.")
        } else {
            format!(
                "The value '{}' is not part of the allowed value(s): '{list}'.",
                render(value)
            )
        };
        self.report(path, detail);
    }

    fn range(&mut self, value: &Value, node: &Node, path: &str, secure: bool) {
        let Value::Int(n) = value else {
            return;
        };
        let shown = if secure {
            "The value".to_string()
        } else {
            format!("The value '{n}'")
        };
        if let Some(min) = node.get_ci("minValue").and_then(number_of)
            && (*n as f64) < min
        {
            self.report(
                path,
                format!(
                    "{shown} should be greater than or equal to '{}'.",
                    show_number(min)
                ),
            );
        }
        if let Some(max) = node.get_ci("maxValue").and_then(number_of)
            && (*n as f64) > max
        {
            self.report(
                path,
                format!(
                    "{shown} should be less than or equal to '{}'.",
                    show_number(max)
                ),
            );
        }
    }

    fn length(&mut self, value: &Value, node: &Node, path: &str) {
        let len = match value {
            Value::String(s) => s.encode_utf16().count(),
            Value::Array(items) => items.len(),
            _ => return,
        } as f64;
        if let Some(min) = node.get_ci("minLength").and_then(number_of)
            && len < min
        {
            self.report(
                path,
                format!(
                    "Length of the value should be greater than or equal to '{}'.",
                    show_number(min)
                ),
            );
        }
        if let Some(max) = node.get_ci("maxLength").and_then(number_of)
            && len > max
        {
            self.report(
                path,
                format!(
                    "Length of the value should be less than or equal to '{}'.",
                    show_number(max)
                ),
            );
        }
    }

    fn object(&mut self, value: &Value, node: &Node, path: &str, secure: bool, depth: usize) {
        let Value::Object(object) = value else {
            return;
        };
        let declared = node.get_ci("properties").and_then(Node::as_object);
        if let Some(properties) = declared {
            for p in properties {
                let child = join_path(path, &p.key);
                match object.get(&p.key) {
                    Some(v) if !v.is_null() => self.check(v, &p.value, &child, secure, depth + 1),
                    present => {
                        if !is_nullable(&p.value, self.definitions) {
                            let detail = if present.is_some() {
                                format!("The property '{}' is required and cannot be null.", p.key)
                            } else {
                                format!("Required property '{}' not found.", p.key)
                            };
                            self.report(&child, detail);
                        }
                    }
                }
            }
        }
        let is_declared = |key: &str| {
            declared.is_some_and(|ps| ps.iter().any(|p| p.key.eq_ignore_ascii_case(key)))
        };
        let sealed = node.get_ci("sealed").and_then(Node::as_bool) == Some(true);
        let additional = node.get_ci("additionalProperties");
        let closed = sealed || additional.and_then(Node::as_bool) == Some(false);
        for (key, v) in object.iter() {
            if is_declared(key) {
                continue;
            }
            // The keys of a secure object are part of the secret: findings point at the object instead.
            let child = if secure {
                path.to_string()
            } else {
                join_path(path, key)
            };
            if closed && secure {
                self.report(
                    &child,
                    "A property is not allowed: the type does not declare it.".to_string(),
                );
            } else if closed {
                self.report(
                    &child,
                    format!("The property '{key}' is not allowed: the type does not declare it."),
                );
            } else if let Some(schema) = additional.filter(|a| a.as_object().is_some()) {
                self.check(v, schema, &child, secure, depth + 1);
            }
        }
        if let Some(discriminator) = node.get_ci("discriminator") {
            self.discriminated(value, object, discriminator, path, secure, depth);
        }
    }

    fn discriminated(
        &mut self,
        value: &Value,
        object: &cairn_eval::Object,
        discriminator: &Node,
        path: &str,
        secure: bool,
        depth: usize,
    ) {
        let Some(property) = discriminator.get_ci("propertyName").and_then(Node::as_str) else {
            return;
        };
        let Some(mapping) = discriminator.get_ci("mapping").and_then(Node::as_object) else {
            return;
        };
        let tags = || {
            mapping
                .iter()
                .map(|m| m.key.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let tag = match object.get(property) {
            None | Some(Value::Null) => {
                self.report(
                    &join_path(path, property),
                    format!("Required discriminator property '{property}' not found."),
                );
                return;
            }
            Some(Value::Unevaluated(_)) => return,
            Some(Value::String(tag)) => tag,
            Some(other) => {
                self.report(
                    &join_path(path, property),
                    format!(
                        "Expected a value of type 'String' for the discriminator property '{property}', but received a value of type '{}'.",
                        other.value_type()
                    ),
                );
                return;
            }
        };
        match mapping.iter().find(|m| m.key == *tag) {
            Some(variant) => self.check(value, &variant.value, path, secure, depth + 1),
            None => {
                let shown = if secure {
                    "The value".to_string()
                } else {
                    format!("The value '{tag}'")
                };
                self.report(
                    &join_path(path, property),
                    format!(
                        "{shown} of the discriminator property '{property}' is not part of the allowed value(s): '{}'.",
                        tags()
                    ),
                );
            }
        }
    }

    fn array(&mut self, items: &[Value], node: &Node, path: &str, secure: bool, depth: usize) {
        let prefix = node
            .get_ci("prefixItems")
            .and_then(Node::as_array)
            .unwrap_or(&[]);
        let rest = node.get_ci("items");
        let closed = rest.and_then(Node::as_bool) == Some(false);
        if items.len() < prefix.len() {
            self.report(
                path,
                format!(
                    "Expected an array of {} elements, but received {} element(s).",
                    prefix.len(),
                    items.len()
                ),
            );
        }
        for (i, item) in items.iter().enumerate() {
            let child = join_index(path, i);
            if let Some(schema) = prefix.get(i) {
                self.check(item, schema, &child, secure, depth + 1);
            } else if closed {
                self.report(
                    &child,
                    format!(
                        "The array may have at most {} element(s), but received {}.",
                        prefix.len(),
                        items.len()
                    ),
                );
                break;
            } else if let Some(schema) = rest.filter(|r| r.as_object().is_some()) {
                self.check(item, schema, &child, secure, depth + 1);
            }
        }
    }
}

fn number_of(node: &Node) -> Option<f64> {
    match node.kind {
        NodeKind::Number(Number::Int(i)) => Some(i as f64),
        NodeKind::Number(Number::Float(x)) => Some(x),
        _ => None,
    }
}

fn show_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A value as ARM quotes it in messages: strings bare, everything else as compact JSON, cut to a sane length.
fn render(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_json().to_string(),
    };
    if text.chars().count() > MAX_QUOTED_CHARS {
        let cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Checks that a type declaration is well-formed: known `type` names, `$ref`s that resolve, constraints of the
/// right JSON kind, `min <= max`, nested declarations (`properties`, `additionalProperties`, `items`,
/// `prefixItems`, `discriminator.mapping`). `target` is the declaration's JSON path (`parameters.p`,
/// `definitions.t`). Whether `defaultValue` satisfies the declaration is checked at evaluation time.
pub fn check_schema(schema: &Node, definitions: Option<&Node>, target: &str) -> Vec<Diagnostic> {
    let mut checker = SchemaChecker {
        definitions,
        diags: Vec::new(),
    };
    checker.schema(schema, target, 0);
    checker.diags
}

struct SchemaChecker<'a> {
    definitions: Option<&'a Node>,
    diags: Vec<Diagnostic>,
}

impl SchemaChecker<'_> {
    fn error(&mut self, node: &Node, path: &str, message: String) {
        self.diags
            .push(Diagnostic::error(TYPE_ERROR_CODE, message, path).with_span(node.span));
    }

    fn schema(&mut self, node: &Node, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if node.as_object().is_none() {
            self.error(
                node,
                path,
                format!(
                    "The type declaration at '{path}' must be a JSON object, not {}.",
                    node.type_name()
                ),
            );
            return;
        }
        let ty = node.member_ci("type");
        if let Some(t) = ty {
            match t.value.as_str() {
                Some(name) if BaseType::parse(name).is_some() => {}
                Some(name) => self.error(
                    &t.value,
                    &join_path(path, "type"),
                    format!(
                        "The type '{name}' at '{path}' is not valid. Valid types are '{}'.",
                        valid_type_names()
                    ),
                ),
                None => self.error(
                    &t.value,
                    &join_path(path, "type"),
                    format!(
                        "The 'type' at '{path}' must be a string naming one of '{}'.",
                        valid_type_names()
                    ),
                ),
            }
        }
        if let Some(r) = node.member_ci("$ref") {
            self.reference(&r.value, &join_path(path, "$ref"));
        }
        self.bounds(node, path, "minValue", "maxValue", false);
        self.bounds(node, path, "minLength", "maxLength", true);
        for key in ["nullable", "sealed"] {
            if let Some(m) = node.member_ci(key)
                && m.value.as_bool().is_none()
            {
                self.error(
                    &m.value,
                    &join_path(path, key),
                    format!("The '{key}' property at '{path}' must be a boolean."),
                );
            }
        }
        if let Some(m) = node.member_ci("allowedValues")
            && m.value.as_array().is_none()
        {
            self.error(
                &m.value,
                &join_path(path, "allowedValues"),
                format!("The 'allowedValues' property at '{path}' must be an array."),
            );
        }
        if let Some(m) = node.member_ci("properties") {
            let here = join_path(path, "properties");
            match m.value.as_object() {
                Some(properties) => {
                    for p in properties {
                        self.schema(&p.value, &join_path(&here, &p.key), depth + 1);
                    }
                }
                None => self.error(
                    &m.value,
                    &here,
                    format!("The 'properties' property at '{path}' must be an object."),
                ),
            }
        }
        for key in ["additionalProperties", "items"] {
            if let Some(m) = node.member_ci(key) {
                let here = join_path(path, key);
                match &m.value.kind {
                    NodeKind::Bool(_) => {}
                    NodeKind::Object(_) => self.schema(&m.value, &here, depth + 1),
                    _ => self.error(
                        &m.value,
                        &here,
                        format!(
                            "The '{key}' property at '{path}' must be a type declaration or a boolean."
                        ),
                    ),
                }
            }
        }
        if let Some(m) = node.member_ci("prefixItems") {
            let here = join_path(path, "prefixItems");
            match m.value.as_array() {
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.schema(item, &join_index(&here, i), depth + 1);
                    }
                }
                None => self.error(
                    &m.value,
                    &here,
                    format!("The 'prefixItems' property at '{path}' must be an array."),
                ),
            }
        }
        if let Some(m) = node.member_ci("discriminator") {
            self.discriminator(&m.value, &join_path(path, "discriminator"), depth);
        }
    }

    fn reference(&mut self, node: &Node, path: &str) {
        let Some(reference) = node.as_str() else {
            self.error(
                node,
                path,
                format!("The type reference at '{path}' must be a string."),
            );
            return;
        };
        let Some(mut current) = resolve_ref(reference, self.definitions) else {
            self.error(
                node,
                path,
                format!(
                    "The type reference '{reference}' could not be resolved: it must point into the template's 'definitions' ('#/definitions/<name>')."
                ),
            );
            return;
        };
        // A chain of pure aliases that comes back to itself has no type at all.
        let mut seen: Vec<*const Node> = Vec::new();
        while let Some(next_ref) = current.get_ci("$ref").and_then(Node::as_str) {
            if seen.contains(&(current as *const Node)) || seen.len() > MAX_REF_CHAIN {
                self.error(
                    node,
                    path,
                    format!("The type reference '{reference}' is circular."),
                );
                return;
            }
            seen.push(current);
            match resolve_ref(next_ref, self.definitions) {
                Some(next) => current = next,
                // Reported where that reference is written.
                None => return,
            }
        }
    }

    fn bounds(
        &mut self,
        node: &Node,
        path: &str,
        min_key: &str,
        max_key: &str,
        non_negative: bool,
    ) {
        let mut read = |key: &str| -> Option<i64> {
            let m = node.member_ci(key)?;
            match m.value.as_i64() {
                Some(v) if non_negative && v < 0 => {
                    self.error(
                        &m.value,
                        &join_path(path, key),
                        format!("The '{key}' property at '{path}' must not be negative."),
                    );
                    None
                }
                Some(v) => Some(v),
                None => {
                    self.error(
                        &m.value,
                        &join_path(path, key),
                        format!("The '{key}' property at '{path}' must be an integer."),
                    );
                    None
                }
            }
        };
        let min = read(min_key);
        let max = read(max_key);
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            let span_node = node.get_ci(min_key).unwrap_or(node);
            self.error(
                span_node,
                &join_path(path, min_key),
                format!(
                    "The '{min_key}' ({min}) at '{path}' is greater than the '{max_key}' ({max})."
                ),
            );
        }
    }

    fn discriminator(&mut self, node: &Node, path: &str, depth: usize) {
        if node.as_object().is_none() {
            self.error(
                node,
                path,
                format!("The discriminator at '{path}' must be an object with 'propertyName' and 'mapping'."),
            );
            return;
        }
        if node.get_ci("propertyName").and_then(Node::as_str).is_none() {
            self.error(
                node,
                &join_path(path, "propertyName"),
                format!("The discriminator at '{path}' must have a string 'propertyName'."),
            );
        }
        match node.member_ci("mapping") {
            Some(m) => match m.value.as_object() {
                Some(variants) => {
                    let here = join_path(path, "mapping");
                    for v in variants {
                        self.schema(&v.value, &join_path(&here, &v.key), depth + 1);
                    }
                }
                None => self.error(
                    &m.value,
                    &join_path(path, "mapping"),
                    format!("The discriminator 'mapping' at '{path}' must be an object."),
                ),
            },
            None => self.error(
                node,
                &join_path(path, "mapping"),
                format!("The discriminator at '{path}' must have a 'mapping' object."),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str) -> Node {
        cairn_json::parse(text).expect("test JSON parses")
    }

    fn value(json: serde_json::Value) -> Value {
        Value::from_json(&json)
    }

    /// Checks `v` against `schema` (with optional definitions) at `parameters.p.value`; returns "target: message".
    fn run(schema: &str, defs: Option<&str>, v: serde_json::Value) -> Vec<String> {
        let schema = node(schema);
        let defs = defs.map(node);
        check_value(&value(v), &schema, defs.as_ref(), "parameters.p.value")
            .into_iter()
            .map(|d| {
                assert_eq!(d.code, TYPE_ERROR_CODE);
                format!("{}: {}", d.target, d.message)
            })
            .collect()
    }

    fn ok(schema: &str, v: serde_json::Value) {
        let found = run(schema, None, v);
        assert!(found.is_empty(), "{found:?}");
    }

    fn bad(schema: &str, v: serde_json::Value, fragment: &str) {
        let found = run(schema, None, v);
        assert!(
            found.iter().any(|m| m.contains(fragment)),
            "expected '{fragment}' in {found:?}"
        );
    }

    fn schema_errors(schema: &str, defs: Option<&str>) -> Vec<String> {
        let schema = node(schema);
        let defs = defs.map(node);
        check_schema(&schema, defs.as_ref(), "parameters.p")
            .into_iter()
            .map(|d| format!("{}: {}", d.target, d.message))
            .collect()
    }

    #[test]
    fn primitive_types() {
        ok(r#"{"type":"string"}"#, serde_json::json!("x"));
        ok(r#"{"type":"SecureString"}"#, serde_json::json!("x"));
        ok(r#"{"type":"int"}"#, serde_json::json!(3));
        ok(r#"{"type":"BOOL"}"#, serde_json::json!(true));
        ok(r#"{"type":"object"}"#, serde_json::json!({}));
        ok(r#"{"type":"secureObject"}"#, serde_json::json!({"a": 1}));
        ok(r#"{"type":"array"}"#, serde_json::json!([1, "a"]));
        bad(
            r#"{"type":"int"}"#,
            serde_json::json!("5"),
            "parameters.p.value: The provided value for the template parameter 'p' is not valid. Expected a value of type 'Int', but received a value of type 'String'.",
        );
        bad(
            r#"{"type":"bool"}"#,
            serde_json::json!("true"),
            "type 'Bool'",
        );
        bad(
            r#"{"type":"array"}"#,
            serde_json::json!({}),
            "received a value of type 'Object'",
        );
        bad(
            r#"{"type":"object"}"#,
            serde_json::json!([]),
            "received a value of type 'Array'",
        );
        bad(
            r#"{"type":"string"}"#,
            serde_json::json!(1.5),
            "received a value of type 'Float'",
        );
    }

    #[test]
    fn unevaluated_and_top_level_null_are_skipped() {
        let schema = node(r#"{"type":"int","minValue":3}"#);
        let u = Value::Unevaluated(std::rc::Rc::new(cairn_eval::Unevaluated {
            expression: "[reference('x').n]".into(),
        }));
        assert!(check_value(&u, &schema, None, "outputs.o").is_empty());
        assert!(check_value(&Value::Null, &schema, None, "outputs.o").is_empty());
        let obj = node(r#"{"type":"object","properties":{"n":{"type":"int"}}}"#);
        let mut o = cairn_eval::Object::new();
        o.insert("n", u);
        assert!(check_value(&Value::Object(o), &obj, None, "outputs.o").is_empty());
    }

    #[test]
    fn output_subject() {
        let schema = node(r#"{"type":"string"}"#);
        let d = check_value(&Value::Int(1), &schema, None, "outputs.o");
        assert_eq!(
            d[0].message,
            "The template output 'o' is not valid. Expected a value of type 'String', but received a value of type 'Integer'."
        );
        let d = check_value(&Value::Int(1), &schema, None, "parameters['a-b'].value");
        assert!(d[0].message.contains("parameter 'a-b'"), "{d:?}");
    }

    #[test]
    fn allowed_values_are_case_sensitive() {
        let s = r#"{"type":"string","allowedValues":["Standard_LRS","Standard_GRS"]}"#;
        ok(s, serde_json::json!("Standard_LRS"));
        bad(
            s,
            serde_json::json!("standard_lrs"),
            "The value 'standard_lrs' is not part of the allowed value(s): 'Standard_LRS,Standard_GRS'.",
        );
        ok(
            r#"{"type":"int","allowedValues":[1,2,3]}"#,
            serde_json::json!(2),
        );
        bad(
            r#"{"type":"int","allowedValues":[1,2,3]}"#,
            serde_json::json!(4),
            "'4' is not part",
        );
    }

    #[test]
    fn allowed_values_for_arrays_apply_per_element_or_whole() {
        let s = r#"{"type":"array","allowedValues":["a","b",null,{"k":"v"}]}"#;
        ok(s, serde_json::json!(["a", "b", "a", null, {"k": "v"}]));
        bad(s, serde_json::json!(["a", "c"]), "parameters.p.value[1]: ");
        let tuples = r#"{"type":"array","allowedValues":[["fizz","buzz"],["foo","bar"]]}"#;
        ok(tuples, serde_json::json!(["foo", "bar"]));
        bad(tuples, serde_json::json!(["foo", "buzz"]), "value[0]");
    }

    #[test]
    fn secure_values_are_never_quoted() {
        let s = r#"{"type":"securestring","allowedValues":["one","two"],"minLength":3}"#;
        let found = run(s, None, serde_json::json!("hunter2-secret"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(!found[0].contains("hunter2"), "{found:?}");
        let s = r#"{"type":"secureObject","properties":{"n":{"type":"int","maxValue":1,"allowedValues":[0,1]}}}"#;
        let found = run(s, None, serde_json::json!({"n": 987654}));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|m| !m.contains("987654")), "{found:?}");
    }

    #[test]
    fn value_ranges() {
        let s = r#"{"type":"int","minValue":-10,"maxValue":-3}"#;
        ok(s, serde_json::json!(-10));
        ok(s, serde_json::json!(-3));
        bad(
            s,
            serde_json::json!(-11),
            "The value '-11' should be greater than or equal to '-10'.",
        );
        bad(
            s,
            serde_json::json!(0),
            "The value '0' should be less than or equal to '-3'.",
        );
    }

    #[test]
    fn lengths_count_utf16_units_and_elements() {
        let s = r#"{"type":"string","minLength":3,"maxLength":4}"#;
        ok(s, serde_json::json!("abc"));
        ok(s, serde_json::json!("a😀b")); // 4 UTF-16 units
        bad(s, serde_json::json!("😀😀a"), "less than or equal to '4'"); // 5 units, 3 chars
        bad(
            s,
            serde_json::json!("ab"),
            "Length of the value should be greater than or equal to '3'.",
        );
        let a = r#"{"type":"array","minLength":1,"maxLength":2}"#;
        ok(a, serde_json::json!([1]));
        bad(a, serde_json::json!([]), "greater than or equal to '1'");
        bad(a, serde_json::json!([1, 2, 3]), "less than or equal to '2'");
    }

    #[test]
    fn object_properties_required_unless_nullable() {
        let s = r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"int","nullable":true}}}"#;
        ok(s, serde_json::json!({"a": "x"}));
        ok(s, serde_json::json!({"A": "x", "b": null, "extra": 1}));
        bad(
            s,
            serde_json::json!({"b": 1}),
            "parameters.p.value.a: The provided value for the template parameter 'p' is not valid. At 'a': Required property 'a' not found.",
        );
        bad(s, serde_json::json!({"a": null}), "cannot be null");
        bad(
            s,
            serde_json::json!({"a": "x", "b": "y"}),
            "parameters.p.value.b: ",
        );
    }

    #[test]
    fn additional_properties_and_sealed() {
        let closed =
            r#"{"type":"object","properties":{"a":{"type":"int"}},"additionalProperties":false}"#;
        ok(closed, serde_json::json!({"a": 1}));
        bad(
            closed,
            serde_json::json!({"a": 1, "b": 2}),
            "parameters.p.value.b: ",
        );
        let sealed = r#"{"type":"object","properties":{"a":{"type":"int"}},"sealed":true}"#;
        bad(
            sealed,
            serde_json::json!({"a": 1, "my-key": 2}),
            "parameters.p.value['my-key']",
        );
        let dict = r#"{"type":"object","properties":{},"additionalProperties":{"type":"string"}}"#;
        ok(dict, serde_json::json!({"x": "1", "y": "2"}));
        bad(
            dict,
            serde_json::json!({"x": "1", "y": 2}),
            "parameters.p.value.y: ",
        );
    }

    #[test]
    fn items_and_tuples() {
        let ints = r#"{"type":"array","items":{"type":"int"}}"#;
        ok(ints, serde_json::json!([1, 2]));
        bad(
            ints,
            serde_json::json!([1, {"name": 1}, "x"]),
            "parameters.p.value[2]: The provided value for the template parameter 'p' is not valid. At '[2]': Expected a value of type 'Int', but received a value of type 'String'.",
        );
        bad(ints, serde_json::json!([1, null]), "value[1]");
        let tuple =
            r#"{"type":"array","prefixItems":[{"type":"string"},{"type":"int"}],"items":false}"#;
        ok(tuple, serde_json::json!(["a", 1]));
        bad(
            tuple,
            serde_json::json!(["a"]),
            "Expected an array of 2 elements",
        );
        bad(tuple, serde_json::json!(["a", 1, 2]), "value[2]");
        bad(tuple, serde_json::json!([1, 1]), "value[0]");
        let open = r#"{"type":"array","prefixItems":[{"type":"string"}]}"#;
        ok(open, serde_json::json!(["a", 1, true]));
    }

    #[test]
    fn nested_paths_point_into_the_value() {
        let s = r#"{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}"#;
        let found = run(
            s,
            None,
            serde_json::json!({"items": [{"name": "a"}, {"name": "b"}, {"name": 3}]}),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("parameters.p.value.items[2].name: "),
            "{found:?}"
        );
    }

    const DEFS: &str = r##"{
        "typeA": {"type":"object","properties":{"type":{"type":"string","allowedValues":["a"]},"value":{"type":"string"}}},
        "typeB": {"type":"object","properties":{"type":{"type":"string","allowedValues":["b"]},"value":{"type":"int"}}},
        "union": {"type":"object","discriminator":{"propertyName":"type","mapping":{"a":{"$ref":"#/definitions/typeA"},"b":{"$ref":"#/definitions/typeB"}}}},
        "nullable": {"type":"string","nullable":true},
        "nonNullable": {"$ref":"#/definitions/nullable","nullable":false},
        "foo": {"type":"object","properties":{"objectProp":{"type":"object","properties":{"intProp":{"type":"int","minValue":1}}},
                 "recursion":{"$ref":"#/definitions/foo","nullable":true}}},
        "fooProperty": {"$ref":"#/definitions/foo/properties/objectProp/properties/intProp"},
        "tuple": {"type":"array","prefixItems":[{"type":"string"},{"type":"int"}],"items":false},
        "second": {"$ref":"#/definitions/tuple/prefixItems/1"},
        "secret": {"type":"secureObject"},
        "loopA": {"$ref":"#/definitions/loopB"},
        "loopB": {"$ref":"#/definitions/loopA"}
    }"##;

    fn with_defs(schema: &str, v: serde_json::Value) -> Vec<String> {
        run(schema, Some(DEFS), v)
    }

    #[test]
    fn references_resolve_json_pointers() {
        assert!(
            with_defs(
                r##"{"$ref":"#/definitions/fooProperty"}"##,
                serde_json::json!(5)
            )
            .is_empty()
        );
        let found = with_defs(
            r##"{"$ref":"#/definitions/fooProperty"}"##,
            serde_json::json!(0),
        );
        assert!(
            found[0].contains("greater than or equal to '1'"),
            "{found:?}"
        );
        assert!(with_defs(r##"{"$ref":"#/definitions/second"}"##, serde_json::json!(2)).is_empty());
        assert_eq!(
            with_defs(
                r##"{"$ref":"#/definitions/second"}"##,
                serde_json::json!("x")
            )
            .len(),
            1
        );
        // A cycle of pure aliases neither loops nor reports anything here (check_schema does).
        assert!(with_defs(r##"{"$ref":"#/definitions/loopA"}"##, serde_json::json!(1)).is_empty());
    }

    #[test]
    fn recursive_types() {
        let v = serde_json::json!({"objectProp": {"intProp": 2}, "recursion": {"objectProp": {"intProp": 0}}});
        let found = with_defs(r##"{"$ref":"#/definitions/foo"}"##, v);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("parameters.p.value.recursion.objectProp.intProp: "),
            "{found:?}"
        );
    }

    #[test]
    fn outer_nullable_wins() {
        let s = r##"{"type":"array","items":{"$ref":"#/definitions/nullable"}}"##;
        assert!(with_defs(s, serde_json::json!(["a", null])).is_empty());
        let s = r##"{"type":"array","items":{"$ref":"#/definitions/nonNullable"}}"##;
        let found = with_defs(s, serde_json::json!(["a", null]));
        assert!(
            found[0].contains("received a value of type 'Null'"),
            "{found:?}"
        );
        let defs = node(DEFS);
        assert!(is_nullable(
            &node(r##"{"$ref":"#/definitions/nullable"}"##),
            Some(&defs)
        ));
        assert!(!is_nullable(
            &node(r##"{"$ref":"#/definitions/nonNullable"}"##),
            Some(&defs)
        ));
    }

    #[test]
    fn discriminated_unions() {
        let s = r##"{"$ref":"#/definitions/union"}"##;
        assert!(with_defs(s, serde_json::json!({"type": "a", "value": "hello"})).is_empty());
        assert!(with_defs(s, serde_json::json!({"type": "b", "value": 42})).is_empty());
        let found = with_defs(s, serde_json::json!({"type": "b", "value": "42"}));
        assert!(
            found[0].starts_with("parameters.p.value.value: "),
            "{found:?}"
        );
        let found = with_defs(s, serde_json::json!({"type": "c"}));
        assert!(found[0].contains("'c' of the discriminator property 'type' is not part of the allowed value(s): 'a,b'"), "{found:?}");
        let found = with_defs(s, serde_json::json!({"value": 1}));
        assert!(
            found[0].contains("Required discriminator property 'type' not found."),
            "{found:?}"
        );
        let found = with_defs(s, serde_json::json!({"type": 1}));
        assert!(
            found[0]
                .contains("discriminator property 'type', but received a value of type 'Integer'"),
            "{found:?}"
        );
    }

    #[test]
    fn self_referencing_discriminators_terminate() {
        // Two declarations on one chain, each discriminating back to the start: 2^depth paths without a budget.
        let defs = node(
            r##"{"d0": {"$ref": "#/definitions/d1", "discriminator": {"propertyName": "k", "mapping": {"a": {"$ref": "#/definitions/d0"}}}},
                 "d1": {"type": "object", "discriminator": {"propertyName": "k", "mapping": {"a": {"$ref": "#/definitions/d0"}}}}}"##,
        );
        let started = std::time::Instant::now();
        let found = check_value(
            &value(serde_json::json!({"k": "a"})),
            &node(r##"{"$ref": "#/definitions/d0"}"##),
            Some(&defs),
            "outputs.o",
        );
        assert!(found.is_empty(), "{found:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn secure_through_references() {
        let defs = node(DEFS);
        assert!(is_secure(&node(r#"{"type":"securestring"}"#), None));
        assert!(is_secure(&node(r#"{"type":"SecureObject"}"#), None));
        assert!(!is_secure(&node(r#"{"type":"string"}"#), None));
        assert!(is_secure(
            &node(r##"{"$ref":"#/definitions/secret"}"##),
            Some(&defs)
        ));
        assert!(!is_secure(
            &node(r##"{"$ref":"#/definitions/typeA"}"##),
            Some(&defs)
        ));
    }

    #[test]
    fn schema_well_formed() {
        assert!(
            schema_errors(
                r#"{"type":"string","minLength":1,"maxLength":3,"allowedValues":["a"]}"#,
                None
            )
            .is_empty()
        );
        assert!(
            schema_errors(
                r##"{"$ref":"#/definitions/tuple/prefixItems/1"}"##,
                Some(DEFS)
            )
            .is_empty()
        );
        let found = schema_errors(r#"{"type":"strng"}"#, None);
        assert!(found[0].starts_with("parameters.p.type: The type 'strng' at 'parameters.p' is not valid. Valid types are 'String, SecureString, Int, Bool, Object, SecureObject, Array'."), "{found:?}");
        assert_eq!(schema_errors(r#"{"type":3}"#, None).len(), 1);
        assert_eq!(schema_errors("[]", None).len(), 1);
    }

    #[test]
    fn schema_references() {
        let found = schema_errors(r##"{"$ref":"#/definitions/missing"}"##, Some(DEFS));
        assert!(found[0].starts_with("parameters.p.$ref: The type reference '#/definitions/missing' could not be resolved"), "{found:?}");
        assert_eq!(
            schema_errors(r##"{"$ref":"#/definitions/foo"}"##, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r##"{"$ref":"definitions/foo"}"##, Some(DEFS)).len(),
            1
        );
        let found = schema_errors(r##"{"$ref":"#/definitions/loopA"}"##, Some(DEFS));
        assert!(found[0].contains("circular"), "{found:?}");
        // Recursion through a property is a legitimate recursive type.
        assert!(schema_errors(r##"{"$ref":"#/definitions/foo"}"##, Some(DEFS)).is_empty());
    }

    #[test]
    fn schema_bounds() {
        let found = schema_errors(r#"{"type":"int","minValue":5,"maxValue":1}"#, None);
        assert_eq!(
            found,
            [
                "parameters.p.minValue: The 'minValue' (5) at 'parameters.p' is greater than the 'maxValue' (1)."
            ]
        );
        assert_eq!(
            schema_errors(r#"{"type":"string","minLength":5,"maxLength":1}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"string","minLength":-1}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"int","maxValue":"3"}"#, None).len(),
            1
        );
        assert!(schema_errors(r#"{"type":"int","minValue":-5,"maxValue":-5}"#, None).is_empty());
    }

    #[test]
    fn schema_shapes() {
        assert_eq!(
            schema_errors(r#"{"type":"string","allowedValues":"a"}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"string","nullable":"yes"}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"object","properties":[]}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"object","additionalProperties":"no"}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"array","items":3}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"array","prefixItems":{}}"#, None).len(),
            1
        );
        let found = schema_errors(
            r#"{"type":"object","properties":{"a":{"type":"nope"}},"additionalProperties":{"type":"x"},"items":{"type":"y"},"prefixItems":[{"type":"z"}]}"#,
            None,
        );
        let targets: Vec<_> = found
            .iter()
            .map(|m| m.split(": ").next().unwrap_or_default())
            .collect();
        assert_eq!(
            targets,
            [
                "parameters.p.properties.a.type",
                "parameters.p.additionalProperties.type",
                "parameters.p.items.type",
                "parameters.p.prefixItems[0].type"
            ]
        );
    }

    #[test]
    fn schema_discriminators() {
        assert!(schema_errors(r#"{"type":"object","discriminator":{"propertyName":"k","mapping":{"a":{"type":"object"}}}}"#, None).is_empty());
        assert_eq!(
            schema_errors(r#"{"type":"object","discriminator":{"mapping":{}}}"#, None).len(),
            1
        );
        assert_eq!(
            schema_errors(
                r#"{"type":"object","discriminator":{"propertyName":"k"}}"#,
                None
            )
            .len(),
            1
        );
        assert_eq!(
            schema_errors(r#"{"type":"object","discriminator":"k"}"#, None).len(),
            1
        );
        let found = schema_errors(
            r#"{"type":"object","discriminator":{"propertyName":"k","mapping":{"a":{"type":"obj"}}}}"#,
            None,
        );
        assert!(
            found[0].starts_with("parameters.p.discriminator.mapping.a.type: "),
            "{found:?}"
        );
    }

    #[test]
    fn schema_spans_point_at_the_offending_node() {
        let text = r#"{"type":"strng"}"#;
        let schema = node(text);
        let d = check_schema(&schema, None, "parameters.p");
        let span = d[0].span.expect("span");
        assert_eq!(&text[span.range()], "\"strng\"");
    }
}

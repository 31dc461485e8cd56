//! Where a config value written as an expression comes from, as far as a deployment stack cares: a `list*()`
//! output is stored as an `apiReference` directive (`POST {id}/{function}` with the call's body and the property
//! path after it) instead of its value; any other way of reaching a `list*()` output is refused for stacks.
//!
//! Why: a `list*()` output is a credential by ARM convention (seed 000 allows it in `auth` because it can be
//! re-fetched). The plan, the deployment records and a stack then hold how to fetch it again, never the value;
//! the engine resolves the directive when it calls the extension, and a stack re-runs it when it deletes. A value
//! that reaches a config through a form this walk cannot turn into one call and one path (`concat`, `coalesce`, a
//! user-defined function, an index known only at run time) would be stored as nothing, so it is refused instead.
//!
//! This is the one implementation of that rule: the engine's expansion records directives and refusals with it,
//! and the stacks linter reports the same refusals from it.
//!
//! The walk follows a value through `variables()`, `if()` (the taken branch, or both when the condition is not
//! known yet), `createObject()`, `union()` (the last argument naming the property), JSON objects and arrays, and
//! property and index accessors, carrying the property path still to apply. It evaluates only what decides the
//! shape (`createObject` keys, `if` conditions, indexes, `list*` arguments, the keys of `union` arguments) with the
//! caller's evaluator, so copy loops and parameters mean what they mean in the body.

use std::collections::HashMap;
use std::rc::Rc;

use cairn_eval::{Evaluator, Object, Value};
use cairn_expr::{Expr, ExprKind};
use cairn_json::{Node, NodeKind};

/// A config value that came from a `list*()` call.
#[derive(Clone, Debug, PartialEq)]
pub struct ListSource {
    /// Where in `extensionConfigs` the value sits: alias first (`["k8s", "auth", "kubeConfig"]`).
    pub path: Vec<String>,
    /// The resource the action is called on (full ID).
    pub resource_id: String,
    pub api_version: String,
    /// The function name, which is the action (`listClusterAdminCredential`).
    pub action: String,
    /// The call's third argument.
    pub request_body: Option<serde_json::Value>,
    /// The property path after the call (`kubeconfigs[0].value`; `$` for the whole response).
    pub response_value_path: String,
}

impl ListSource {
    /// The `apiReference` item that replaces the value.
    pub fn api_reference(&self) -> Value {
        let mut reference = serde_json::json!({
            "method": "POST",
            "armResourceId": self.resource_id,
            "apiVersion": self.api_version,
            "action": self.action,
            "responseValuePath": self.response_value_path,
        });
        if let Some(body) = &self.request_body {
            reference["requestBody"] = body.clone();
        }
        Value::from_json(&serde_json::json!({ "apiReference": reference }))
    }
}

/// What the walk found at one place in `extensionConfigs`.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceKind {
    /// A `list*()` output with known arguments: stored as its `apiReference` directive.
    Directive(ListSource),
    /// A `list*()` output whose arguments are known only when the deployment runs (a preview, a validation): a
    /// directive then.
    PendingDirective { function: String },
    /// A `list*()` output reached through a form that names no single call and property path.
    Untraceable {
        /// The expression as written where the walk stopped.
        expression: String,
        /// Why, in words (`the value is computed by concat()`).
        reason: String,
    },
    /// A value that reads a secure parameter: a stack would store it as plain text (or, in a secure property, could
    /// neither store it nor ask for it again).
    SecureParameter {
        name: String,
        /// The expression as written where the walk stopped.
        expression: String,
    },
}

/// One finding of [`trace_config`].
#[derive(Clone, Debug, PartialEq)]
pub struct Traced {
    /// Where in `extensionConfigs` the value sits: alias first (`["k8s", "auth", "kubeConfig"]`).
    pub path: Vec<String>,
    pub kind: SourceKind,
}

impl Traced {
    /// The refusal's message for a deployment stack, or `None` when the value can be stored as a directive.
    pub fn refusal(&self) -> Option<String> {
        if let SourceKind::SecureParameter { name, expression } = &self.kind {
            return Some(format!(
                "The config value '{}' reads the secure parameter '{name}' through '{expression}': a deployment stack would store it as plain text, or could not fetch it again when it deletes resources. Give a secret to an extension config as a Key Vault reference (keyVaultReference) or a list* output under 'auth', never through a parameter.",
                self.path.join(".")
            ));
        }
        let SourceKind::Untraceable { expression, reason } = &self.kind else {
            return None;
        };
        Some(format!(
            "The config value '{}' comes from a list* output through '{expression}', which cannot be stored as a directive ({reason}); a deployment stack could not fetch it again when it deletes resources. Write the list* call with a property path after it, directly or through variables(), createObject(), union() or if(), so cairn stores an apiReference directive.",
            self.path.join(".")
        ))
    }
}

/// Diagnostic code of a config value that reaches a `list*()` output through a form that cannot be stored as a
/// directive: refused for a deployment stack, a warning otherwise.
pub const UNTRACEABLE_CONFIG_SOURCE: &str = "ExtensionConfigSourceNotTraceable";

/// The diagnostic code of a refusal (see [`Traced::refusal`]).
impl Traced {
    pub fn code(&self) -> &'static str {
        match self.kind {
            SourceKind::SecureParameter { .. } => SECURE_PARAMETER_CONFIG_SOURCE,
            _ => UNTRACEABLE_CONFIG_SOURCE,
        }
    }
}

/// Diagnostic code of a config value that reads a secure parameter: refused for a deployment stack (seed 000: no
/// secure parameters in a config), a warning otherwise.
pub const SECURE_PARAMETER_CONFIG_SOURCE: &str = "ExtensionConfigSecureParameter";

/// How the walk reads the template the expressions run in.
pub struct Names<'a> {
    /// A variable's declared value (`None`: not declared, or a copied variable).
    pub variable: &'a dyn Fn(&str) -> Option<Node>,
    /// Turns a `list*` call's first argument (an ID, or a symbolic name) into the resource's ID.
    pub resource_id: &'a dyn Fn(&str) -> String,
    /// Whether a parameter of the template is secure.
    pub secure_parameter: &'a dyn Fn(&str) -> bool,
}

/// Walks `extension_configs` (the raw `properties.extensionConfigs` node) and reports every `list*()` output in it:
/// a directive, a directive known only at run time, or a refusal.
pub fn trace_config(
    ev: &mut Evaluator<'_>,
    extension_configs: &Node,
    names: &Names<'_>,
) -> Vec<Traced> {
    let mut walk = Walk {
        ev,
        names,
        at: Vec::new(),
        out: Vec::new(),
        depth: 0,
        steps: 0,
        active: Vec::new(),
        lists: HashMap::new(),
        secure_reads: HashMap::new(),
    };
    walk.node(extension_configs, &[]);
    walk.out
}

/// Finds the `list*()` sources in `extension_configs` that are directives now (see [`trace_config`]).
pub fn list_sources(
    ev: &mut Evaluator<'_>,
    extension_configs: &Node,
    resource_id: &dyn Fn(&str) -> String,
    variable: &dyn Fn(&str) -> Option<Node>,
) -> Vec<ListSource> {
    directives(&trace_config(
        ev,
        extension_configs,
        &Names {
            variable,
            resource_id,
            secure_parameter: &|_: &str| false,
        },
    ))
}

/// The directives among traced values.
pub fn directives(traced: &[Traced]) -> Vec<ListSource> {
    traced
        .iter()
        .filter_map(|t| match &t.kind {
            SourceKind::Directive(source) => Some(source.clone()),
            _ => None,
        })
        .collect()
}

/// Replaces, in the evaluated `extensionConfigs` object, each value a source names with its `apiReference` item.
/// A `{value: list...()}` item becomes the `apiReference` item itself (keeping a `type`).
pub fn record_directives(extension_configs: &mut Value, sources: &[ListSource]) {
    for source in sources {
        let Some((last, parents)) = source.path.split_last() else {
            continue;
        };
        let Some(parent) = object_at(extension_configs, parents) else {
            continue;
        };
        let is_value_item = last.eq_ignore_ascii_case("value")
            && parent
                .keys()
                .all(|k| k.eq_ignore_ascii_case("value") || k.eq_ignore_ascii_case("type"));
        let reference = source.api_reference();
        if is_value_item {
            parent.remove("value");
            if let Value::Object(item) = reference {
                for (k, v) in item.iter() {
                    parent.insert(k.clone(), v.clone());
                }
            }
        } else if let Some(slot) = parent.get_mut(last) {
            *slot = reference;
        }
    }
}

fn object_at<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Object> {
    let mut current = value;
    for key in path {
        current = match current {
            Value::Object(o) => o.get_mut(key)?,
            _ => return None,
        };
    }
    match current {
        Value::Object(o) => Some(o),
        _ => None,
    }
}

/// Deepest nesting of values the walk follows (variables in variables, objects in objects).
const MAX_DEPTH: usize = 64;
/// Most values one walk visits; past it a value holding a `list*()` output is refused as too complex, so a
/// template built to branch at every step costs bounded time.
const MAX_STEPS: usize = 20_000;

struct Walk<'w, 'e> {
    ev: &'w mut Evaluator<'e>,
    names: &'w Names<'w>,
    /// Where the value being walked lands in `extensionConfigs`.
    at: Vec<String>,
    out: Vec<Traced>,
    depth: usize,
    steps: usize,
    /// Variables being walked (lower case): reading one again inside itself is a cycle.
    active: Vec<String>,
    /// Whether a variable's value holds a `list*()` call (lower-case name), once known.
    lists: HashMap<String, bool>,
    /// The secure parameter a variable's value reads (lower-case name), once known.
    secure_reads: HashMap<String, Option<String>>,
}

/// One step of a property path still to apply.
#[derive(Clone, Debug)]
enum Step {
    Member(String),
    Index(i64),
}

/// A value being walked: a JSON node (a config as written, a variable's value) or an expression in `source`.
#[derive(Clone, Copy)]
enum Val<'v> {
    Node(&'v Node),
    Expr(&'v Expr, &'v Rc<str>),
}

impl Walk<'_, '_> {
    fn refuse(&mut self, expression: String, reason: impl Into<String>) {
        self.out.push(Traced {
            path: self.at.clone(),
            kind: SourceKind::Untraceable {
                expression,
                reason: reason.into(),
            },
        });
    }

    /// Refuses `value` when a `list*()` output is in it; anything else is not this walk's concern.
    /// A value the walk stops at. It is refused when a `list*()` output is in it (no directive can stand for it)
    /// or when it reads a secure parameter; anything else is not this walk's concern.
    fn refuse_if_list(&mut self, value: Val<'_>, reason: &str) {
        let expression = || match value {
            Val::Expr(expr, source) => source.get(expr.span.range()).unwrap_or("").to_string(),
            Val::Node(node) => match &node.kind {
                NodeKind::String(s) => s.clone(),
                _ => "a JSON value".to_string(),
            },
        };
        if self.has_list(value, 0) {
            self.refuse(expression(), reason);
        } else if let Some(name) = self.secure_read(value, 0) {
            self.out.push(Traced {
                path: self.at.clone(),
                kind: SourceKind::SecureParameter {
                    name,
                    expression: expression(),
                },
            });
        }
    }

    /// The first secure parameter `value` reads, following variables.
    fn secure_read(&mut self, value: Val<'_>, depth: usize) -> Option<String> {
        if depth >= MAX_DEPTH {
            return None;
        }
        match value {
            Val::Node(node) => match &node.kind {
                NodeKind::Object(members) => members
                    .iter()
                    .find_map(|m| self.secure_read(Val::Node(&m.value), depth + 1)),
                NodeKind::Array(items) => items
                    .iter()
                    .find_map(|i| self.secure_read(Val::Node(i), depth + 1)),
                NodeKind::String(s) => match cairn_expr::parse_template_string(s) {
                    Ok(Some(expr)) => {
                        let source: Rc<str> = Rc::from(s.as_str());
                        self.secure_read(Val::Expr(&expr, &source), depth + 1)
                    }
                    _ => None,
                },
                _ => None,
            },
            Val::Expr(expr, _) => {
                let mut parameters = Vec::new();
                let mut variables = Vec::new();
                expr.walk(&mut |e| {
                    if let ExprKind::Call {
                        namespace: None,
                        name,
                        args,
                    } = &e.kind
                        && let Some(ExprKind::String(arg)) = args.first().map(|a| &a.kind)
                    {
                        if name.name.eq_ignore_ascii_case("parameters") {
                            parameters.push(arg.clone());
                        } else if name.name.eq_ignore_ascii_case("variables") {
                            variables.push(arg.clone());
                        }
                    }
                });
                if let Some(p) = parameters
                    .into_iter()
                    .find(|p| (self.names.secure_parameter)(p))
                {
                    return Some(p);
                }
                variables
                    .iter()
                    .find_map(|v| self.variable_secure_read(v, depth + 1))
            }
        }
    }

    /// The secure parameter a variable's value reads; each variable is looked at once.
    fn variable_secure_read(&mut self, name: &str, depth: usize) -> Option<String> {
        let key = name.to_ascii_lowercase();
        if let Some(known) = self.secure_reads.get(&key) {
            return known.clone();
        }
        self.secure_reads.insert(key.clone(), None);
        let found =
            (self.names.variable)(name).and_then(|node| self.secure_read(Val::Node(&node), depth));
        self.secure_reads.insert(key, found.clone());
        found
    }

    fn value(&mut self, value: Val<'_>, steps: &[Step]) {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return self.refuse_if_list(value, "the value is too complex to follow");
        }
        if self.depth >= MAX_DEPTH {
            return self.refuse_if_list(value, "the value is nested too deeply to follow");
        }
        self.depth += 1;
        match value {
            Val::Node(node) => self.node(node, steps),
            Val::Expr(expr, source) => self.expr(expr, source, steps),
        }
        self.depth -= 1;
    }

    fn node(&mut self, node: &Node, steps: &[Step]) {
        match (&node.kind, steps.split_first()) {
            (NodeKind::Object(members), None) => {
                for m in members {
                    match self.key(&m.key) {
                        Some(key) => {
                            self.at.push(key);
                            self.value(Val::Node(&m.value), &[]);
                            self.at.pop();
                        }
                        None => self.refuse_if_list(
                            Val::Node(&m.value),
                            format!(
                                "the property name '{}' is not known before the deployment runs",
                                m.key
                            )
                            .as_str(),
                        ),
                    }
                }
            }
            (NodeKind::Object(members), Some((Step::Member(name), rest))) => {
                let found = members.iter().rev().find(|m| {
                    self.key(&m.key)
                        .is_some_and(|k| k.eq_ignore_ascii_case(name))
                });
                if let Some(m) = found {
                    self.value(Val::Node(&m.value), rest);
                }
            }
            (NodeKind::Array(items), Some((Step::Index(i), rest))) => {
                if let Some(item) = usize::try_from(*i).ok().and_then(|i| items.get(i)) {
                    self.value(Val::Node(item), rest);
                }
            }
            (NodeKind::Array(_), None) => self.refuse_if_list(
                Val::Node(node),
                "an array item has no property path to store a directive at",
            ),
            (NodeKind::String(s), _) => {
                if let Ok(Some(expr)) = cairn_expr::parse_template_string(s) {
                    let source: Rc<str> = Rc::from(s.as_str());
                    self.value(Val::Expr(&expr, &source), steps);
                }
            }
            _ => {}
        }
    }

    /// A JSON object key, evaluated when it is an expression; `None` when not known.
    fn key(&mut self, key: &str) -> Option<String> {
        match cairn_expr::classify(key) {
            cairn_expr::TemplateString::Literal(k) => Some(k.into_owned()),
            cairn_expr::TemplateString::Expression { .. } => match self.ev.eval_string(key) {
                Ok(Value::String(k)) => Some(k),
                _ => None,
            },
        }
    }

    fn eval(&mut self, expr: &Expr, source: &Rc<str>) -> Option<Value> {
        self.ev
            .eval_expr(expr, source)
            .ok()
            .filter(|v| !v.contains_unevaluated())
    }

    fn expr(&mut self, expr: &Expr, source: &Rc<str>, steps: &[Step]) {
        let here = Val::Expr(expr, source);
        match &expr.kind {
            ExprKind::String(_) | ExprKind::Int(_) => {}
            ExprKind::Property { target, name } => {
                let steps = prepend(Step::Member(name.name.clone()), steps);
                self.value(Val::Expr(target, source), &steps);
            }
            ExprKind::Index { target, index } => match self.eval(index, source) {
                Some(Value::Int(i)) => {
                    self.value(Val::Expr(target, source), &prepend(Step::Index(i), steps))
                }
                Some(Value::String(s)) => {
                    self.value(Val::Expr(target, source), &prepend(Step::Member(s), steps))
                }
                _ => self.refuse_if_list(here, "the index is not known before the deployment runs"),
            },
            ExprKind::Call {
                namespace: Some(ns),
                name,
                ..
            } => self.refuse_if_list(
                here,
                &format!(
                    "the value is computed by the user-defined function {}.{}()",
                    ns.name, name.name
                ),
            ),
            ExprKind::Call {
                namespace: None,
                name,
                args,
            } => self.call(&name.name, args, expr, source, steps),
        }
    }

    fn call(&mut self, name: &str, args: &[Expr], whole: &Expr, source: &Rc<str>, steps: &[Step]) {
        let here = Val::Expr(whole, source);
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "if" if args.len() == 3 => match self.eval(&args[0], source) {
                // Only the branch the deployment takes is recorded; the other is never evaluated.
                Some(Value::Bool(taken)) => self.value(
                    Val::Expr(if taken { &args[1] } else { &args[2] }, source),
                    steps,
                ),
                // Not known yet: each branch must be storable.
                _ => {
                    self.value(Val::Expr(&args[1], source), steps);
                    self.value(Val::Expr(&args[2], source), steps);
                }
            },
            "createobject" => self.create_object(args, source, steps),
            "union" => self.union(args, whole, source, steps),
            "variables" => {
                let (key, declared) = match args.first().map(|a| &a.kind) {
                    Some(ExprKind::String(v)) => (v.to_ascii_lowercase(), (self.names.variable)(v)),
                    _ => (String::new(), None),
                };
                match declared {
                    Some(_) if self.active.contains(&key) => {
                        self.refuse_if_list(here, "the variable refers to itself")
                    }
                    Some(node) => {
                        self.active.push(key);
                        self.value(Val::Node(&node), steps);
                        self.active.pop();
                    }
                    None => self.refuse_if_list(here, "the variable's value cannot be followed"),
                }
            }
            _ if is_list(name) => self.list_call(name, args, whole, source, steps),
            _ => self.refuse_if_list(here, &format!("the value is computed by {name}()")),
        }
    }

    fn create_object(&mut self, args: &[Expr], source: &Rc<str>, steps: &[Step]) {
        let mut pairs = Vec::new();
        for pair in args.chunks(2) {
            let [key, value] = pair else { continue };
            let key = match self.eval(key, source) {
                Some(Value::String(k)) => Some(k),
                _ => None,
            };
            pairs.push((key, value));
        }
        match steps.split_first() {
            None => {
                for (key, value) in pairs {
                    match key {
                        Some(key) => {
                            self.at.push(key);
                            self.value(Val::Expr(value, source), &[]);
                            self.at.pop();
                        }
                        None => self.refuse_if_list(
                            Val::Expr(value, source),
                            "its property name is not known before the deployment runs",
                        ),
                    }
                }
            }
            Some((Step::Member(name), rest)) => {
                let found = pairs
                    .iter()
                    .rev()
                    .find(|(k, _)| k.as_deref().is_some_and(|k| k.eq_ignore_ascii_case(name)));
                match found {
                    Some((_, value)) => self.value(Val::Expr(value, source), rest),
                    None => {
                        for (key, value) in &pairs {
                            if key.is_none() {
                                self.refuse_if_list(
                                    Val::Expr(value, source),
                                    "its property name is not known before the deployment runs",
                                );
                            }
                        }
                    }
                }
            }
            Some((Step::Index(_), _)) => {}
        }
    }

    /// `union(a, b, ...)`: a property comes from the last argument that has it.
    fn union(&mut self, args: &[Expr], whole: &Expr, source: &Rc<str>, steps: &[Step]) {
        let here = Val::Expr(whole, source);
        match steps.split_first() {
            Some((Step::Member(name), _)) => {
                for arg in args.iter().rev() {
                    match self.keys(Val::Expr(arg, source), 0) {
                        Some(keys) if keys.iter().any(|k| k.eq_ignore_ascii_case(name)) => {
                            return self.value(Val::Expr(arg, source), steps);
                        }
                        Some(_) => continue,
                        None => {
                            return self.refuse_if_list(
                                here,
                                "union() of a value whose properties are not known before the deployment runs",
                            );
                        }
                    }
                }
            }
            Some((Step::Index(_), _)) => {
                self.refuse_if_list(here, "an item of a union() of arrays")
            }
            None => {
                let mut all: Vec<String> = Vec::new();
                for arg in args {
                    match self.keys(Val::Expr(arg, source), 0) {
                        Some(keys) => {
                            for k in keys {
                                if !all.iter().any(|a| a.eq_ignore_ascii_case(&k)) {
                                    all.push(k);
                                }
                            }
                        }
                        None => {
                            return self.refuse_if_list(
                                here,
                                "union() of a value whose properties are not known before the deployment runs",
                            );
                        }
                    }
                }
                for key in all {
                    self.at.push(key.clone());
                    self.union(args, whole, source, &[Step::Member(key)]);
                    self.at.pop();
                }
            }
        }
    }

    /// The property names of an object value; `None` when not known here.
    fn keys(&mut self, value: Val<'_>, depth: usize) -> Option<Vec<String>> {
        self.steps += 1;
        if depth >= MAX_DEPTH || self.steps > MAX_STEPS {
            return None;
        }
        match value {
            Val::Node(node) => match &node.kind {
                NodeKind::Object(members) => members.iter().map(|m| self.key(&m.key)).collect(),
                NodeKind::String(s) => match cairn_expr::parse_template_string(s) {
                    Ok(Some(expr)) => {
                        let source: Rc<str> = Rc::from(s.as_str());
                        self.keys(Val::Expr(&expr, &source), depth + 1)
                    }
                    _ => Some(Vec::new()),
                },
                _ => Some(Vec::new()),
            },
            Val::Expr(expr, source) => {
                if let ExprKind::Call {
                    namespace: None,
                    name,
                    args,
                } = &expr.kind
                {
                    match name.name.to_ascii_lowercase().as_str() {
                        "createobject" => {
                            return args
                                .chunks(2)
                                .map(|pair| match self.eval(&pair[0], source) {
                                    Some(Value::String(k)) => Some(k),
                                    _ => None,
                                })
                                .collect();
                        }
                        "union" => {
                            let mut all = Vec::new();
                            for arg in args {
                                all.extend(self.keys(Val::Expr(arg, source), depth + 1)?);
                            }
                            return Some(all);
                        }
                        "if" if args.len() == 3 => {
                            return match self.eval(&args[0], source) {
                                Some(Value::Bool(taken)) => self.keys(
                                    Val::Expr(if taken { &args[1] } else { &args[2] }, source),
                                    depth + 1,
                                ),
                                _ => None,
                            };
                        }
                        "variables" => {
                            if let Some(ExprKind::String(v)) = args.first().map(|a| &a.kind)
                                && let Some(node) = (self.names.variable)(v)
                            {
                                return self.keys(Val::Node(&node), depth + 1);
                            }
                            return None;
                        }
                        _ => {}
                    }
                }
                // Anything else: its keys are its value's, when it holds no list* output (evaluating one here
                // would call it once more).
                if self.has_list(value, 0) {
                    return None;
                }
                match self.eval(expr, source)? {
                    Value::Object(o) => Some(o.keys().cloned().collect()),
                    _ => Some(Vec::new()),
                }
            }
        }
    }

    /// Whether a `list*()` call is in `value`, following variables.
    fn has_list(&mut self, value: Val<'_>, depth: usize) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        match value {
            Val::Node(node) => match &node.kind {
                NodeKind::Object(members) => members
                    .iter()
                    .any(|m| self.has_list(Val::Node(&m.value), depth + 1)),
                NodeKind::Array(items) => {
                    items.iter().any(|i| self.has_list(Val::Node(i), depth + 1))
                }
                NodeKind::String(s) => match cairn_expr::parse_template_string(s) {
                    Ok(Some(expr)) => {
                        let source: Rc<str> = Rc::from(s.as_str());
                        self.has_list(Val::Expr(&expr, &source), depth + 1)
                    }
                    _ => false,
                },
                _ => false,
            },
            Val::Expr(expr, _) => {
                let mut found = false;
                let mut variables = Vec::new();
                expr.walk(&mut |e| {
                    if let ExprKind::Call {
                        namespace: None,
                        name,
                        args,
                    } = &e.kind
                    {
                        if is_list(&name.name) {
                            found = true;
                        } else if name.name.eq_ignore_ascii_case("variables")
                            && let Some(ExprKind::String(v)) = args.first().map(|a| &a.kind)
                        {
                            variables.push(v.clone());
                        }
                    }
                });
                found
                    || variables
                        .iter()
                        .any(|v| self.variable_has_list(v, depth + 1))
            }
        }
    }

    /// Whether a variable's value holds a `list*()` call; each variable is looked at once (a cycle counts as no).
    fn variable_has_list(&mut self, name: &str, depth: usize) -> bool {
        let key = name.to_ascii_lowercase();
        if let Some(known) = self.lists.get(&key) {
            return *known;
        }
        self.lists.insert(key.clone(), false);
        let found =
            (self.names.variable)(name).is_some_and(|node| self.has_list(Val::Node(&node), depth));
        self.lists.insert(key, found);
        found
    }

    /// `list*(id, apiVersion[, body])` with `steps` after it.
    fn list_call(
        &mut self,
        name: &str,
        args: &[Expr],
        whole: &Expr,
        source: &Rc<str>,
        steps: &[Step],
    ) {
        if !(2..=3).contains(&args.len()) {
            return self.refuse(
                source.get(whole.span.range()).unwrap_or("").to_string(),
                format!("{name}() takes a resource ID, an API version and an optional body"),
            );
        }
        // A directive is stored as its call: a secret among its arguments (a body holding a password) would be
        // stored with it, in plain text.
        if let Some(name) = args
            .iter()
            .find_map(|arg| self.secure_read(Val::Expr(arg, source), 0))
        {
            self.out.push(Traced {
                path: self.at.clone(),
                kind: SourceKind::SecureParameter {
                    name,
                    expression: source.get(whole.span.range()).unwrap_or("").to_string(),
                },
            });
            return;
        }
        let target = match self.eval(&args[0], source) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let api_version = match self.eval(&args[1], source) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let request_body = match args.get(2) {
            Some(body) => self.eval(body, source).map(|b| Some(b.to_json())),
            None => Some(None),
        };
        let kind = match (target, api_version, request_body) {
            (Some(target), Some(api_version), Some(request_body)) => {
                SourceKind::Directive(ListSource {
                    path: self.at.clone(),
                    resource_id: (self.names.resource_id)(&target),
                    api_version,
                    action: name.to_string(),
                    request_body,
                    response_value_path: value_path(steps),
                })
            }
            _ => SourceKind::PendingDirective {
                function: name.to_string(),
            },
        };
        self.out.push(Traced {
            path: self.at.clone(),
            kind,
        });
    }
}

fn is_list(name: &str) -> bool {
    cairn_eval::functions::lookup(name).is_some_and(cairn_eval::functions::is_list_function)
}

fn prepend(step: Step, rest: &[Step]) -> Vec<Step> {
    let mut out = Vec::with_capacity(rest.len() + 1);
    out.push(step);
    out.extend_from_slice(rest);
    out
}

/// `a.b[0]['c.d']`; `$` when there are no steps.
fn value_path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Member(m) if m.contains(['.', '[', ']', '\'', '"']) || m.is_empty() => {
                out.push_str(&format!(
                    "['{}']",
                    m.replace('\\', "\\\\").replace('\'', "\\'")
                ));
            }
            Step::Member(m) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(m);
            }
        }
    }
    if out.is_empty() { "$".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_eval::SimpleEnvironment;
    use serde_json::json;

    const AKS: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks";

    /// Walks `configs` with `params` as parameters and `variables` as the template's variables; runtime functions
    /// are unavailable (as offline), which the walk must not need. Symbolic names resolve to `{AKS}-{name}`.
    fn trace(
        params: serde_json::Value,
        variables: serde_json::Value,
        configs: serde_json::Value,
    ) -> Vec<Traced> {
        let env = SimpleEnvironment {
            parameters: Value::from_json(&params)
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..SimpleEnvironment::default()
        };
        let mut ev = Evaluator::new(&env);
        let node = cairn_json::parse(&configs.to_string()).expect("json");
        let variable = |name: &str| {
            variables
                .as_object()
                .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
                .map(|(_, v)| Node::from_json(v))
        };
        let resource_id = |t: &str| {
            if t.starts_with('/') {
                t.to_string()
            } else {
                format!("{AKS}-{t}")
            }
        };
        trace_config(
            &mut ev,
            &node,
            &Names {
                variable: &variable,
                resource_id: &resource_id,
                secure_parameter: &|p: &str| p.eq_ignore_ascii_case("secret"),
            },
        )
    }

    fn sources(params: serde_json::Value, configs: serde_json::Value) -> Vec<ListSource> {
        directives(&trace(params, json!({}), configs))
    }

    fn seed_000_flagship() -> serde_json::Value {
        json!({"k8s": "[createObject('namespace', parameters('namespace'), 'auth', createObject('kubeConfig', listClusterAdminCredential(parameters('aks'), '2024-02-01').kubeconfigs[0].value))]"})
    }

    #[test]
    fn seed_000_flagship_becomes_an_api_reference_under_auth() {
        let found = sources(
            json!({"namespace": "apps", "aks": AKS}),
            seed_000_flagship(),
        );
        assert_eq!(
            found,
            [ListSource {
                path: vec!["k8s".into(), "auth".into(), "kubeConfig".into()],
                resource_id: AKS.into(),
                api_version: "2024-02-01".into(),
                action: "listClusterAdminCredential".into(),
                request_body: None,
                response_value_path: "kubeconfigs[0].value".into(),
            }]
        );
        let mut evaluated = Value::from_json(
            &json!({"k8s": {"namespace": "apps", "auth": {"kubeConfig": "c2VjcmV0"}}}),
        );
        record_directives(&mut evaluated, &found);
        assert_eq!(
            evaluated.to_json(),
            json!({"k8s": {"namespace": "apps", "auth": {"kubeConfig": {"apiReference": {
                "method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01",
                "action": "listClusterAdminCredential", "responseValuePath": "kubeconfigs[0].value"}}}}})
        );
    }

    #[test]
    fn the_taken_if_branch_is_recorded_with_its_body() {
        let configs = json!({"k8s": {"kubeConfig": {"type": "secureString", "value":
            "[if(parameters('admin'), listClusterAdminCredential(parameters('aks'), '2024-02-01').kubeconfigs[0].value, listClusterUserCredential(parameters('aks'), '2024-02-01', createObject('format', 'exec'))['kubeconfigs'][1]['value'])]"}}});
        for (admin, action, body, path) in [
            (
                true,
                "listClusterAdminCredential",
                None,
                "kubeconfigs[0].value",
            ),
            (
                false,
                "listClusterUserCredential",
                Some(json!({"format": "exec"})),
                "kubeconfigs[1].value",
            ),
        ] {
            let found = sources(json!({"admin": admin, "aks": AKS}), configs.clone());
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].action, action);
            assert_eq!(found[0].request_body, body);
            assert_eq!(found[0].response_value_path, path);
            let mut evaluated = Value::from_json(
                &json!({"k8s": {"kubeConfig": {"type": "secureString", "value": "c2VjcmV0"}}}),
            );
            record_directives(&mut evaluated, &found);
            let item = evaluated.to_json()["k8s"]["kubeConfig"].clone();
            assert_eq!(item["type"], "secureString");
            assert_eq!(item["apiReference"]["action"], action);
            assert!(item.get("value").is_none(), "{item}");
        }
    }

    #[test]
    fn other_values_and_untaken_branches_stay_values() {
        let found = sources(
            json!({"aks": AKS, "token": "t"}),
            json!({"k8s": {
                "namespace": {"value": "apps"},
                "token": "[parameters('token')]",
                "picked": "[if(equals(1, 1), parameters('token'), listKeys(parameters('aks'), 'v').keys[0].value)]",
                "whole": "[listKeys('store', '2023-01-01')]",
                "quoted": "[listKeys(parameters('aks'), 'v').keys[0]['a.b']]",
            }}),
        );
        let paths: Vec<(String, String)> = found
            .iter()
            .map(|s| (s.path.join("."), s.response_value_path.clone()))
            .collect();
        assert_eq!(
            paths,
            [
                ("k8s.whole".to_string(), "$".to_string()),
                ("k8s.quoted".to_string(), "keys[0]['a.b']".to_string())
            ]
        );
        assert_eq!(
            found[0].resource_id,
            format!("{AKS}-store"),
            "symbolic names resolve"
        );
    }

    /// Every form of issue 43: the value reaches the config through variables, union, property paths through
    /// createObject or a variable holding the whole response, and is a directive; forms that name no single call
    /// and path are refused, naming the expression.
    #[test]
    fn forms_trace_to_a_directive_or_a_refusal() {
        const KV: &str = "resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', 'tok')";
        let list = format!("listValue({KV}, '2023-07-01')");
        let variables = json!({
            "cred": format!("[{list}.value]"),
            "resp": format!("[{list}]"),
            "obj": {"inner": format!("[{list}.value]")},
            "hop": "[variables('cred')]",
            "pw": "[parameters('secret')]",
        });
        // (description, config value of `rec.auth.token`, Ok(response path) or Err(text in the refusal))
        let cases: Vec<(&str, String, Result<&str, &str>)> = vec![
            ("direct", format!("[{list}.value]"), Ok("value")),
            ("variable", "[variables('cred')]".into(), Ok("value")),
            (
                "variable of a variable",
                "[variables('hop')]".into(),
                Ok("value"),
            ),
            (
                "whole response in a variable",
                "[variables('resp').value]".into(),
                Ok("value"),
            ),
            (
                "object variable",
                "[variables('obj').inner]".into(),
                Ok("value"),
            ),
            (
                "union",
                format!("[union(createObject('k', 'x'), createObject('k', {list}.value)).k]"),
                Ok("value"),
            ),
            (
                "union, the later literal wins",
                format!("[union(createObject('k', {list}.value), createObject('k', 'x')).k]"),
                Err(""),
            ),
            (
                "createObject path",
                format!("[createObject('a', createObject('b', {list}.value)).a.b]"),
                Ok("value"),
            ),
            (
                "index on the response",
                format!("[{list}['value']]"),
                Ok("value"),
            ),
            (
                "if branch",
                "[if(equals(1, 1), variables('cred'), 'x')]".to_string(),
                Ok("value"),
            ),
            (
                "concat",
                format!("[concat({list}.value, '')]"),
                Err("concat()"),
            ),
            (
                "coalesce",
                format!("[coalesce({list}.value, {list}.value)]"),
                Err("coalesce()"),
            ),
            (
                "concat through a variable",
                "[concat(variables('cred'))]".into(),
                Err("concat(variables('cred'))"),
            ),
            (
                "a secure parameter",
                "[parameters('secret')]".into(),
                Err("reads the secure parameter 'secret'"),
            ),
            (
                "a secure parameter through a variable",
                "[concat(variables('pw'), '')]".into(),
                Err("reads the secure parameter 'secret'"),
            ),
            (
                "a secure parameter in a list call's body",
                "[listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', 'tok'), '2023-07-01', createObject('pw', parameters('secret'))).value]".into(),
                Err("reads the secure parameter 'secret'"),
            ),
            (
                "a secure parameter in a list call's body through a variable",
                "[listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', 'tok'), '2023-07-01', createObject('pw', variables('pw'))).value]".into(),
                Err("reads the secure parameter 'secret'"),
            ),
            (
                "a non-secure parameter",
                "[parameters('plain')]".into(),
                Err(""),
            ),
            (
                "union with an unknown object",
                format!("[union(createObject('k', {list}.value), parameters('unknown')).k]"),
                Err("not known"),
            ),
        ];
        for (what, value, want) in cases {
            let traced = trace(
                json!({}),
                variables.clone(),
                json!({"rec": {"auth": {"token": value}}}),
            );
            match want {
                Ok(path) => {
                    assert_eq!(traced.len(), 1, "{what}: {traced:?}");
                    let SourceKind::Directive(source) = &traced[0].kind else {
                        panic!("{what}: {traced:?}");
                    };
                    assert_eq!(source.path, ["rec", "auth", "token"], "{what}");
                    assert_eq!(source.response_value_path, path, "{what}");
                    assert_eq!(source.action, "listValue", "{what}");
                    assert!(source.resource_id.ends_with("/secrets/tok"), "{what}");
                }
                Err("") => {
                    assert!(directives(&traced).is_empty(), "{what}: {traced:?}");
                }
                Err(text) => {
                    let refusal = traced
                        .iter()
                        .find_map(Traced::refusal)
                        .unwrap_or_else(|| panic!("{what}: no refusal in {traced:?}"));
                    assert!(refusal.contains(text), "{what}: {refusal}");
                    assert!(refusal.contains("rec.auth.token"), "{what}: {refusal}");
                    assert!(directives(&traced).is_empty(), "{what}: {traced:?}");
                }
            }
        }
    }

    #[test]
    fn a_whole_alias_from_a_variable_or_union_places_directives_by_property() {
        let list = "listValue('/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv/secrets/t', '2023-07-01')";
        let variables = json!({"cfg": {"namespace": "apps", "auth": {"kubeConfig": format!("[{list}.value]")}}});
        for configs in [
            json!({"k8s": "[variables('cfg')]"}),
            json!({"k8s": format!("[union(createObject('namespace', 'apps'), createObject('auth', createObject('kubeConfig', {list}.value)))]")}),
        ] {
            let traced = trace(json!({}), variables.clone(), configs.clone());
            let found = directives(&traced);
            assert_eq!(found.len(), 1, "{configs}: {traced:?}");
            assert_eq!(found[0].path, ["k8s", "auth", "kubeConfig"], "{configs}");
        }
    }
}

//! The expanded plan: every resource instance with its identity, dependencies and evaluated body, nested
//! deployments as child plans, effective extension configs, and outputs.

use cairn_eval::{ScopeKind, Value};
use serde_json::{Map, Value as Json, json};

/// How a copy loop deploys its instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyInfo {
    pub name: String,
    pub index: i64,
    pub serial: bool,
    pub batch_size: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct PlannedResource {
    /// Stable key within the plan: the ARM ID, or `{alias}:{symbolicName}[index]` for extensible resources.
    pub key: String,
    pub symbolic_name: Option<String>,
    pub copy: Option<CopyInfo>,
    /// The ARM resource ID (absent for extensible resources).
    pub id: Option<String>,
    pub name: Option<String>,
    pub resource_type: String,
    pub api_version: Option<String>,
    /// Extension alias, name and version for extensible resources.
    pub extension: Option<PlannedExtensionRef>,
    /// The `condition` outcome; `None` when it depends on a runtime value.
    pub condition: Option<bool>,
    pub existing: bool,
    /// Keys of the resources this one waits for (explicit, implicit and serial-copy edges).
    pub depends_on: Vec<String>,
    /// The evaluated resource body (`location`, `tags`, `sku`, `properties`, ...); `None` when not deployed.
    pub body: Option<Value>,
    /// The child plan of a nested deployment.
    pub deployment: Option<Box<Plan>>,
    /// JSON path of the declaration in its template.
    pub path: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlannedExtensionRef {
    pub alias: String,
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug)]
pub struct PlannedExtension {
    pub alias: String,
    pub name: String,
    pub version: String,
    /// The effective config, typed: directives, never resolved secrets.
    pub config: cairn_config::Config,
}

#[derive(Clone, Debug)]
pub struct PlannedOutput {
    pub output_type: String,
    pub value: Value,
    /// Declared secure: left out of the deployment's outputs.
    pub secure: bool,
    /// Computed from a secure value. The value is still returned, as ARM does, but a parent that reads it
    /// through `reference()` reports its errors without quoting values.
    pub from_secure: bool,
}

#[derive(Clone, Debug)]
pub struct PlannedParameter {
    pub param_type: String,
    pub value: Value,
    pub secure: bool,
}

/// What in a deployment waits for a value known only while the deployment runs, as ARM leaves it until then: a
/// resource copy loop whose `count` depends on a runtime value (its instances are expanded when the deployment
/// starts), a nested deployment whose template or parameters do (its child is expanded when it runs), or a resource
/// whose name or scope does (its ID is evaluated when it runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deferred {
    pub kind: DeferredKind,
    /// JSON path of the value that is not known yet (`resources[1].copy.count`).
    pub target: String,
    /// The declaration's symbolic name (2.0 templates).
    pub symbolic_name: Option<String>,
    /// The declared resource type, when it is a literal.
    pub resource_type: Option<String>,
    /// The plan key of the nested deployment or resource that waits (none for a deferred count: the loop has no
    /// instances).
    pub key: Option<String>,
    /// The value's expression, as written.
    pub expression: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferredKind {
    CopyCount,
    NestedTemplate,
    NestedParameters,
    /// A resource's name or scope: its ID (and whether it is defined twice) is known when the deployment runs.
    ResourceId,
}

impl DeferredKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeferredKind::CopyCount => "copyCount",
            DeferredKind::NestedTemplate => "nestedTemplate",
            DeferredKind::NestedParameters => "nestedParameters",
            DeferredKind::ResourceId => "resourceId",
        }
    }
}

impl Deferred {
    /// What waits and for what, for what-if and `template validate`.
    pub fn message(&self) -> String {
        let what = match self.kind {
            DeferredKind::CopyCount => "The copy count",
            DeferredKind::NestedTemplate => "The nested deployment's template",
            DeferredKind::NestedParameters => "The nested deployment's parameters",
            DeferredKind::ResourceId => "The resource's ID",
        };
        let then = match self.kind {
            DeferredKind::CopyCount => "its resources are expanded when the deployment starts",
            DeferredKind::ResourceId => "it is evaluated when the deployment runs",
            _ => "its resources are expanded when it runs",
        };
        format!(
            "{what} at '{}' depends on a value known only while the deployment runs ('{}'): {then}.",
            self.target, self.expression
        )
    }

    pub fn to_json(&self) -> Json {
        let mut out = Map::new();
        out.insert("kind".into(), json!(self.kind.as_str()));
        out.insert("target".into(), json!(self.target));
        if let Some(key) = &self.key {
            out.insert("key".into(), json!(key));
        }
        if let Some(s) = &self.symbolic_name {
            out.insert("symbolicName".into(), json!(s));
        }
        if let Some(t) = &self.resource_type {
            out.insert("type".into(), json!(t));
        }
        out.insert("expression".into(), json!(self.expression));
        Json::Object(out)
    }
}

/// The result of expanding one deployment.
#[derive(Clone, Debug)]
pub struct Plan {
    pub scope: ScopeKind,
    pub scope_id: String,
    pub deployment_name: String,
    pub location: Option<String>,
    pub parameters: Vec<(String, PlannedParameter)>,
    pub resources: Vec<PlannedResource>,
    pub extensions: Vec<PlannedExtension>,
    pub outputs: Vec<(String, PlannedOutput)>,
    /// What is expanded only while the deployment runs.
    pub deferred: Vec<Deferred>,
}

pub(crate) fn scope_name(scope: ScopeKind) -> &'static str {
    match scope {
        ScopeKind::Tenant => "tenant",
        ScopeKind::ManagementGroup => "managementGroup",
        ScopeKind::Subscription => "subscription",
        ScopeKind::ResourceGroup => "resourceGroup",
        ScopeKind::Local => "local",
    }
}

const REDACTED: &str = "<secure>";

impl Plan {
    pub fn output(&self, name: &str) -> Option<&PlannedOutput> {
        self.outputs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, o)| o)
    }

    pub fn resource(&self, key: &str) -> Option<&PlannedResource> {
        self.resources
            .iter()
            .find(|r| r.key.eq_ignore_ascii_case(key))
    }

    /// Outputs as a parent deployment's `reference()` sees them: `{ name: { type, value } }` (secure outputs
    /// omitted), values known only at deployment still unevaluated (never their expression text).
    pub fn outputs_value(&self) -> Value {
        let mut map = cairn_eval::Object::new();
        for (name, o) in &self.outputs {
            if o.secure {
                continue;
            }
            let mut output = cairn_eval::Object::new();
            output.insert("type", Value::from(o.output_type.as_str()));
            output.insert("value", o.value.clone());
            map.insert(name.clone(), Value::Object(output));
        }
        Value::Object(map)
    }

    /// Outputs as ARM returns them on a deployment: `{ name: { type, value } }` (secure outputs omitted).
    pub fn outputs_json(&self) -> Json {
        self.render_outputs(&Value::to_json)
    }

    fn render_outputs(&self, value: &dyn Fn(&Value) -> Json) -> Json {
        let mut map = Map::new();
        for (name, o) in &self.outputs {
            if o.secure {
                continue;
            }
            map.insert(
                name.clone(),
                json!({ "type": o.output_type, "value": value(&o.value) }),
            );
        }
        Json::Object(map)
    }

    /// The plan as JSON (what `cairn template expand` prints). Secure parameter values are redacted; a value known
    /// only at deployment shows as its expression.
    pub fn to_json(&self) -> Json {
        self.render(&Value::to_json)
    }

    /// [`Plan::to_json`], with each value known only at deployment shown as `{"$unknown": "<expression>"}`, so it
    /// cannot be mistaken for a string (tests compare plans this way).
    pub fn to_json_marking_unknowns(&self) -> Json {
        self.render(&marking_unknowns)
    }

    fn render(&self, value: &dyn Fn(&Value) -> Json) -> Json {
        let mut params = Map::new();
        for (name, p) in &self.parameters {
            let value = if p.secure {
                json!(REDACTED)
            } else {
                value(&p.value)
            };
            params.insert(
                name.clone(),
                json!({ "type": p.param_type, "value": value }),
            );
        }
        let extensions: Vec<Json> = self
            .extensions
            .iter()
            .map(|e| {
                json!({ "alias": e.alias, "name": e.name, "version": e.version,
                        "config": e.config.to_wire() })
            })
            .collect();
        let mut out = Map::new();
        out.insert("scope".into(), json!(scope_name(self.scope)));
        out.insert("scopeId".into(), json!(self.scope_id));
        out.insert("deploymentName".into(), json!(self.deployment_name));
        if let Some(l) = &self.location {
            out.insert("location".into(), json!(l));
        }
        out.insert("parameters".into(), Json::Object(params));
        out.insert("extensions".into(), Json::Array(extensions));
        out.insert(
            "resources".into(),
            Json::Array(self.resources.iter().map(|r| r.render(value)).collect()),
        );
        out.insert("outputs".into(), self.render_outputs(value));
        if !self.deferred.is_empty() {
            out.insert(
                "deferred".into(),
                Json::Array(self.deferred.iter().map(Deferred::to_json).collect()),
            );
        }
        Json::Object(out)
    }
}

/// A value as JSON, with each part known only at deployment as `{"$unknown": "<expression>"}`.
fn marking_unknowns(value: &Value) -> Json {
    match value {
        Value::Unevaluated(u) => json!({ "$unknown": u.expression }),
        Value::Array(items) => Json::Array(items.iter().map(marking_unknowns).collect()),
        Value::Object(o) => Json::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), marking_unknowns(v)))
                .collect(),
        ),
        other => other.to_json(),
    }
}

impl PlannedResource {
    pub fn to_json(&self) -> Json {
        self.render(&Value::to_json)
    }

    fn render(&self, value: &dyn Fn(&Value) -> Json) -> Json {
        let mut out = Map::new();
        out.insert("key".into(), json!(self.key));
        if let Some(s) = &self.symbolic_name {
            out.insert("symbolicName".into(), json!(s));
        }
        if let Some(c) = &self.copy {
            let mut copy = json!({ "name": c.name, "index": c.index, "mode": if c.serial { "serial" } else { "parallel" } });
            if let Some(b) = c.batch_size {
                copy["batchSize"] = json!(b);
            }
            out.insert("copy".into(), copy);
        }
        if let Some(id) = &self.id {
            out.insert("id".into(), json!(id));
        }
        if let Some(n) = &self.name {
            out.insert("name".into(), json!(n));
        }
        out.insert("type".into(), json!(self.resource_type));
        if let Some(v) = &self.api_version {
            out.insert("apiVersion".into(), json!(v));
        }
        if let Some(e) = &self.extension {
            out.insert(
                "extension".into(),
                json!({ "alias": e.alias, "name": e.name, "version": e.version }),
            );
        }
        out.insert(
            "condition".into(),
            self.condition.map(Json::Bool).unwrap_or(Json::Null),
        );
        if self.existing {
            out.insert("existing".into(), json!(true));
        }
        out.insert("dependsOn".into(), json!(self.depends_on));
        if let Some(b) = &self.body {
            out.insert("body".into(), value(b));
        }
        if let Some(d) = &self.deployment {
            out.insert("deployment".into(), d.render(value));
        }
        Json::Object(out)
    }
}

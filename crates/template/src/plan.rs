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

    /// Outputs as ARM returns them on a deployment: `{ name: { type, value } }` (secure outputs omitted).
    pub fn outputs_json(&self) -> Json {
        let mut map = Map::new();
        for (name, o) in &self.outputs {
            if o.secure {
                continue;
            }
            map.insert(
                name.clone(),
                json!({ "type": o.output_type, "value": o.value.to_json() }),
            );
        }
        Json::Object(map)
    }

    /// The plan as JSON (what `cairn template expand` prints). Secure parameter values are redacted.
    pub fn to_json(&self) -> Json {
        let mut params = Map::new();
        for (name, p) in &self.parameters {
            let value = if p.secure {
                json!(REDACTED)
            } else {
                p.value.to_json()
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
            Json::Array(
                self.resources
                    .iter()
                    .map(PlannedResource::to_json)
                    .collect(),
            ),
        );
        out.insert("outputs".into(), self.outputs_json());
        Json::Object(out)
    }
}

impl PlannedResource {
    pub fn to_json(&self) -> Json {
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
            out.insert("body".into(), b.to_json());
        }
        if let Some(d) = &self.deployment {
            out.insert("deployment".into(), d.to_json());
        }
        Json::Object(out)
    }
}

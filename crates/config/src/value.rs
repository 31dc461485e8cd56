//! The typed config value: [`ConfigValue`] per property, [`Config`] per extension alias, [`ConfigInput`] for what a
//! deployment gives an alias, and the key rules that tell a config item from a plain value or a group.

use std::fmt;

use cairn_arm::ResourceId;
use cairn_arm::models::common::KeyVaultParameterReference;
use cairn_arm::models::extension::{
    ApiReference, DeploymentExtensionConfigItem, ExtensionConfig as ArmConfig,
    ExtensionConfigPropertyType,
};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The reserved config property holding an extension's secure properties (REP 0006) or, in seed 003's form, the
/// instructions to fetch its one credential.
pub const AUTH: &str = "auth";

/// The wrapper keys a config item names, in their shipped spelling; an item holds exactly one of them.
pub const WRAPPER_KEYS: [&str; 3] = ["value", "keyVaultReference", "apiReference"];

/// The keys of a config item in any seed form. An object whose keys are all among them (and not only `type`) is
/// an item; any other object is a plain value, or inside `auth` a group of properties. The stacks linter reads
/// configs by the same rule.
pub const ITEM_KEYS: [&str; 8] = [
    "value",
    "type",
    "keyVaultReference",
    "reference",
    "apiReference",
    "runtimeReference",
    "apiCall",
    "armApiCall",
];

/// Whether an object with these keys is a config item (see [`ITEM_KEYS`]).
pub fn is_item_keys<'k>(keys: impl IntoIterator<Item = &'k str>) -> bool {
    let mut any = false;
    let mut beyond_type = false;
    for key in keys {
        if !ITEM_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            return false;
        }
        any = true;
        beyond_type |= !key.eq_ignore_ascii_case("type");
    }
    any && beyond_type
}

/// The wrappers (`value`, `keyVaultReference`, `apiReference`) an item's keys name, each once, seed spellings
/// included; an item may name only one (seed 000).
pub fn wrapper_kinds<'k>(keys: impl IntoIterator<Item = &'k str>) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for key in keys {
        let kind = if key.eq_ignore_ascii_case("value") {
            "value"
        } else if key.eq_ignore_ascii_case("keyVaultReference")
            || key.eq_ignore_ascii_case("reference")
        {
            "keyVaultReference"
        } else if ["apiReference", "runtimeReference", "apiCall", "armApiCall"]
            .iter()
            .any(|k| k.eq_ignore_ascii_case(key))
        {
            "apiReference"
        } else {
            continue;
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// A directive: how to fetch a config value when it is needed, instead of the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Directive {
    /// Read a Key Vault secret.
    KeyVaultReference(KeyVaultParameterReference),
    /// Call an ARM API (e.g. `POST .../listClusterAdminCredential`) and take one value out of the response. A
    /// `list*()` value in a module's config is recorded as one.
    ApiReference(ApiReference),
}

impl Directive {
    /// The ARM resource the value comes from: the Key Vault, or the resource the API is called on. `None`
    /// when the ID does not parse (the parser refuses such directives, so only hand-built ones).
    pub fn source_resource(&self) -> Option<ResourceId> {
        let id = match self {
            Self::KeyVaultReference(reference) => &reference.key_vault.id,
            Self::ApiReference(reference) => &reference.arm_resource_id,
        };
        ResourceId::parse(id).ok()
    }
}

/// Why a literal is secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecureOrigin {
    /// The item declared a secure type: `{"type": "SecureString" | "SecureObject", "value": ...}`, spelled as given.
    Declared(String),
    /// Seed 003's `auth: {"type": "UserProvided", "value": ...}`: the credential itself.
    UserProvided,
}

/// A secret given literally. `Debug` never shows the value.
#[derive(Clone, PartialEq)]
pub struct SecureLiteral {
    origin: SecureOrigin,
    value: Value,
}

impl SecureLiteral {
    pub fn new(origin: SecureOrigin, value: Value) -> Self {
        Self { origin, value }
    }

    pub fn origin(&self) -> &SecureOrigin {
        &self.origin
    }

    /// Seed 003's user-provided credential (which a stack refuses).
    pub fn is_user_provided(&self) -> bool {
        self.origin == SecureOrigin::UserProvided
    }

    /// The `type` the item carries: the declared secure type, or `UserProvided`.
    pub fn item_type(&self) -> &str {
        match &self.origin {
            SecureOrigin::Declared(declared) => declared,
            SecureOrigin::UserProvided => "UserProvided",
        }
    }

    /// The secret itself; never log it.
    pub fn expose(&self) -> &Value {
        &self.value
    }
}

impl fmt::Debug for SecureLiteral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecureLiteral({:?}, [REDACTED])", self.origin)
    }
}

/// One config property, in the form it keeps from the parameters file, request or module body to the resolver.
#[derive(Clone, PartialEq)]
pub enum ConfigValue {
    /// A value given literally (`{"value": v}`, or a bare `v`).
    Literal(Value),
    /// A secret given literally: an extension may receive it, a stack may not keep it.
    SecureLiteral(SecureLiteral),
    /// Fetched whenever the config is needed: a Key Vault secret, or an API call's answer.
    Directive(Directive),
    /// Known only when the deployment runs (a runtime value in a module's config, or a config given then): the
    /// template expression. Resolving it is an error; a deployment evaluates the config again when it runs.
    Deferred(String),
    /// Nested properties (inside the reserved `auth`); resolves to an object of their values.
    Group(Config),
}

impl fmt::Debug for ConfigValue {
    /// Literal values are printed as `[REDACTED]`: a user may have put a secret in a non-secure property.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(_) => f.write_str("Literal([REDACTED])"),
            Self::SecureLiteral(secure) => secure.fmt(f),
            Self::Directive(directive) => f.debug_tuple("Directive").field(directive).finish(),
            Self::Deferred(expression) => f.debug_tuple("Deferred").field(expression).finish(),
            Self::Group(members) => f.debug_tuple("Group").field(members).finish(),
        }
    }
}

impl ConfigValue {
    /// The item form: `{"value": v}`, `{"type": "SecureString", "value": v}`, `{"keyVaultReference": ...}`,
    /// `{"apiReference": ...}`, or a group's object of items. A deferred value shows its expression as the value.
    pub fn to_wire(&self) -> Value {
        self.wire(false)
    }

    /// [`Self::to_wire`] for deployment input read through [`crate::Input`]: a deferred value there can only be
    /// seed 002's call, so it is written back as `{"type": "armApiCall", "value": "[list...()]"}` for the
    /// deployment to evaluate.
    pub fn to_input_wire(&self) -> Value {
        self.wire(true)
    }

    fn wire(&self, input: bool) -> Value {
        let item = |key: &str, value: Value| Value::Object(Map::from_iter([(key.into(), value)]));
        match self {
            Self::Literal(value) => item("value", value.clone()),
            Self::SecureLiteral(secure) => Value::Object(Map::from_iter([
                ("type".into(), Value::from(secure.item_type())),
                ("value".into(), secure.value.clone()),
            ])),
            Self::Directive(Directive::KeyVaultReference(reference)) => item(
                "keyVaultReference",
                serde_json::to_value(reference).unwrap_or(Value::Null),
            ),
            Self::Directive(Directive::ApiReference(reference)) => item(
                "apiReference",
                serde_json::to_value(reference).unwrap_or(Value::Null),
            ),
            Self::Deferred(expression) if input => Value::Object(Map::from_iter([
                ("type".into(), Value::from("armApiCall")),
                ("value".into(), Value::from(expression.as_str())),
            ])),
            Self::Deferred(expression) => item("value", Value::from(expression.as_str())),
            Self::Group(group) => group.wire(input),
        }
    }

    /// The item in the shipped API's model: a group's members stay inside it (the request form).
    pub fn to_arm_item(&self) -> DeploymentExtensionConfigItem {
        match self {
            Self::Literal(value) => DeploymentExtensionConfigItem::value(value.clone()),
            Self::SecureLiteral(secure) => DeploymentExtensionConfigItem {
                item_type: Some(ExtensionConfigPropertyType::parse(secure.item_type())),
                ..DeploymentExtensionConfigItem::value(secure.value.clone())
            },
            Self::Directive(Directive::KeyVaultReference(reference)) => {
                DeploymentExtensionConfigItem {
                    key_vault_reference: Some(reference.clone()),
                    ..DeploymentExtensionConfigItem::default()
                }
            }
            Self::Directive(Directive::ApiReference(reference)) => DeploymentExtensionConfigItem {
                api_reference: Some(reference.clone()),
                ..DeploymentExtensionConfigItem::default()
            },
            Self::Deferred(expression) => {
                DeploymentExtensionConfigItem::value(Value::from(expression.as_str()))
            }
            Self::Group(group) => DeploymentExtensionConfigItem {
                members: match group.to_wire() {
                    Value::Object(members) => members,
                    _ => Map::new(),
                },
                ..DeploymentExtensionConfigItem::default()
            },
        }
    }
}

/// A property path inside a config, e.g. `["auth", "kubeConfig"]`.
pub type ConfigPath = Vec<String>;

/// One extension alias's config: its properties in order. Names are kept as given; lookups prefer the exact
/// spelling, then ignore ASCII case (ARM's property names ignore case).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    properties: IndexMap<String, ConfigValue>,
}

impl Config {
    pub fn new(properties: IndexMap<String, ConfigValue>) -> Self {
        Self { properties }
    }

    /// The properties in order.
    pub fn properties(&self) -> &IndexMap<String, ConfigValue> {
        &self.properties
    }

    pub fn iter(&self) -> indexmap::map::Iter<'_, String, ConfigValue> {
        self.properties.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.properties.is_empty()
    }

    pub fn len(&self) -> usize {
        self.properties.len()
    }

    /// The property named `name`: exactly, else ignoring ASCII case.
    pub fn get(&self, name: &str) -> Option<&ConfigValue> {
        self.properties.get(name).or_else(|| {
            self.properties
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Sets the property at exactly `name`.
    pub fn insert(&mut self, name: impl Into<String>, value: ConfigValue) {
        self.properties.insert(name.into(), value);
    }

    /// Overlays `input` on this config property by property: a property of the same name (ignoring case) is
    /// replaced in place and takes the input's spelling; others are appended. A declaration's defaults overlaid by
    /// a deployment's input make its effective config.
    pub fn overlay(&mut self, input: &Config) {
        for (name, value) in &input.properties {
            match self.properties.get_index_of(name.as_str()).or_else(|| {
                self.properties
                    .keys()
                    .position(|k| k.eq_ignore_ascii_case(name))
            }) {
                Some(index) => {
                    self.properties.insert(name.clone(), value.clone());
                    let last = self.properties.len() - 1;
                    if let Some((old, _)) = self.properties.get_index(index)
                        && old != name
                    {
                        // A new spelling was appended: move it to the old one's place and drop the old one.
                        self.properties.swap_indices(index, last);
                        self.properties.pop();
                    }
                }
                None => {
                    self.properties.insert(name.clone(), value.clone());
                }
            }
        }
    }

    /// Every directive with its property path, in order.
    pub fn directives(&self) -> Vec<(ConfigPath, &Directive)> {
        let mut out = Vec::new();
        self.walk(&mut Vec::new(), &mut |path, value| {
            if let ConfigValue::Directive(directive) = value {
                out.push((path.to_vec(), directive));
            }
        });
        out
    }

    /// The first value known only when the deployment runs, with its path and expression.
    pub fn first_deferred(&self) -> Option<(ConfigPath, &str)> {
        let mut found = None;
        self.walk(&mut Vec::new(), &mut |path, value| {
            if let (None, ConfigValue::Deferred(expression)) = (&found, value) {
                found = Some((path.to_vec(), expression.as_str()));
            }
        });
        found
    }

    /// Visits every non-group value with its path, in order.
    fn walk<'c>(
        &'c self,
        path: &mut Vec<String>,
        visit: &mut dyn FnMut(&[String], &'c ConfigValue),
    ) {
        for (name, value) in &self.properties {
            path.push(name.clone());
            match value {
                ConfigValue::Group(group) => group.walk(path, visit),
                other => visit(path, other),
            }
            path.pop();
        }
    }

    /// The ARM resources the directives read from (Key Vaults, resources whose actions are called): the
    /// resources an extension's credentials come from. De-duplicated, in order.
    pub fn credential_sources(&self) -> Vec<ResourceId> {
        let mut out: Vec<ResourceId> = Vec::new();
        for (_, directive) in self.directives() {
            if let Some(id) = directive.source_resource()
                && !out.contains(&id)
            {
                out.push(id);
            }
        }
        out
    }

    /// The wire form: `{"prop": {"value": v} | {"keyVaultReference": ...} | {"apiReference": ...} | {...group}}`.
    pub fn to_wire(&self) -> Value {
        self.wire(false)
    }

    /// [`ConfigValue::to_input_wire`] of every property.
    pub fn to_input_wire(&self) -> Value {
        self.wire(true)
    }

    fn wire(&self, input: bool) -> Value {
        Value::Object(
            self.properties
                .iter()
                .map(|(name, value)| (name.clone(), value.wire(input)))
                .collect(),
        )
    }

    /// The shipped API's items as a request holds them: one item per property, a group's members inside it.
    pub fn to_request(&self) -> ArmConfig {
        self.properties
            .iter()
            .map(|(name, value)| (name.clone(), value.to_arm_item()))
            .collect()
    }

    /// The shipped API's flat item map as records hold it (`deploymentExtensions[].config`): the shipped API has
    /// no groups, so grouped properties are flattened to dotted names (`auth.kubeConfig`).
    pub fn to_arm(&self) -> ArmConfig {
        fn flatten(config: &Config, prefix: &str, out: &mut ArmConfig) {
            for (name, value) in &config.properties {
                let name = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                match value {
                    ConfigValue::Group(group) => flatten(group, &name, out),
                    other => {
                        out.insert(name, other.to_arm_item());
                    }
                }
            }
        }
        let mut out = ArmConfig::new();
        flatten(self, "", &mut out);
        out
    }
}

impl FromIterator<(String, ConfigValue)> for Config {
    fn from_iter<I: IntoIterator<Item = (String, ConfigValue)>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

impl Serialize for Config {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Config::parse(&value).map_err(serde::de::Error::custom)
    }
}

/// What a deployment gives one extension alias.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigInput {
    /// Properties (seed 002's `{"type": "object", "value": {...}}` unwrapped).
    Properties(Config),
    /// Seed 002's `{"type": "inherit", "value": "<alias>"}`: the parent deployment's config of that alias.
    Inherit(String),
    /// The whole config is known only when the deployment runs: the template expression.
    Deferred(String),
}

impl ConfigInput {
    /// The config this input amounts to: an inherited config looked up by alias through `parent` (the parent
    /// deployment's effective configs), a deferred one empty (nothing to overlay before it is known).
    pub fn into_config(
        self,
        parent: &dyn Fn(&str) -> Option<Config>,
    ) -> Result<Config, crate::ConfigError> {
        match self {
            Self::Properties(config) => Ok(config),
            Self::Inherit(alias) => parent(&alias).ok_or_else(|| {
                crate::ConfigError::new(crate::ConfigErrorKind::UnknownInheritance { from: alias })
            }),
            Self::Deferred(_) => Ok(Config::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";

    fn config(value: Value) -> Config {
        Config::parse(&value).unwrap()
    }

    #[test]
    fn overlay_replaces_ignoring_case_in_place() {
        let mut defaults = config(json!({"Namespace": {"value": "default"}, "region": "west"}));
        defaults.overlay(&config(json!({"namespace": {"value": "apps"}, "extra": 1})));
        assert_eq!(
            defaults.to_wire(),
            json!({"namespace": {"value": "apps"}, "region": {"value": "west"}, "extra": {"value": 1}})
        );
        assert_eq!(
            defaults.properties().keys().collect::<Vec<_>>(),
            ["namespace", "region", "extra"]
        );
        assert!(defaults.contains("NAMESPACE"));
    }

    #[test]
    fn record_and_request_forms() {
        let config = config(json!({
            "namespace": {"value": "apps"},
            "auth": {"kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}}
        }));
        let record = serde_json::to_value(config.to_arm()).unwrap();
        assert_eq!(
            record,
            json!({"namespace": {"value": "apps"},
                   "auth.kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}})
        );
        let request = serde_json::to_value(config.to_request()).unwrap();
        assert_eq!(request, config.to_wire());
        assert_eq!(
            config.credential_sources(),
            vec![ResourceId::parse(VAULT).unwrap()]
        );
    }

    #[test]
    fn debug_never_shows_literals_or_secrets() {
        let config = config(json!({
            "token": {"value": "hunter2"},
            "password": {"type": "SecureString", "value": "s3cr3t"},
            "auth": {"type": "UserProvided", "value": "raw-credential"}
        }));
        let shown = format!("{config:?}");
        for secret in ["hunter2", "s3cr3t", "raw-credential"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("SecureLiteral(Declared(\"SecureString\"), [REDACTED])"),
            "{shown}"
        );
    }

    #[test]
    fn inheritance_and_deferred_inputs() {
        let parent = config(json!({"namespace": {"value": "apps"}}));
        let lookup = |alias: &str| (alias == "k8s").then(|| parent.clone());
        assert_eq!(
            ConfigInput::Inherit("k8s".into())
                .into_config(&lookup)
                .unwrap(),
            parent
        );
        let error = ConfigInput::Inherit("nope".into())
            .into_config(&lookup)
            .unwrap_err();
        assert_eq!(
            error.kind,
            crate::ConfigErrorKind::UnknownInheritance {
                from: "nope".into()
            }
        );
        assert!(
            ConfigInput::Deferred("[extensions('k8s').config]".into())
                .into_config(&lookup)
                .unwrap()
                .is_empty()
        );
    }
}

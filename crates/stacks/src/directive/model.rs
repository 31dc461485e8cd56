//! The persisted form of an extension config: literal values and *directives* that re-fetch secrets when a
//! stack needs the config again (to delete extensible resources), never the secrets themselves.
//!
//! [`PersistedConfig::from_wire`] reads every form the seed designs used and normalises them:
//!
//! | Form (source) | Becomes |
//! |---|---|
//! | `{"value": v}`, optionally with `"type"` (shipped API) | literal `v`; refused when `type` is secure |
//! | bare `v` (seed 003: `"cluster": "myCluster"`) | literal `v` (objects without item keys become groups) |
//! | `{"keyVaultReference": {keyVault: {id}, secretName, secretVersion?}}` (shipped, seed 000/002) | Key Vault directive |
//! | `{"reference": {...same...}}` (seed 001) | Key Vault directive |
//! | `{"apiReference": {method, armResourceId, apiVersion, action, query?, responseValuePath}}` (seed 000) | API directive |
//! | `{"runtimeReference": {resourceId, action, propertyPath, apiVersion}}` (seed 001) | API directive (`reference` action = GET of the resource) |
//! | `{"type": "armApiCall", "apiCall": {method, resourceId, apiVersion, path, query?, valueJsonPath}}` (seed 002) | API directive |
//! | `{"type": "KeyVaultSecret", keyVaultId, secretName, secretVersion?}` (seed 003 `auth`) | Key Vault directive |
//! | `{"type": "UserProvided", ...}` (seed 003 `auth`) | refused: a stack cannot keep raw credentials |
//! | `{"type": "armApiCall", "value": "[expression]"}` (seed 002 input) | refused: must be evaluated by the engine first |
//! | an object of items, e.g. REP 0006's reserved `auth` object | a group |
//! | alias level `{"type": "object", "value": {...}}` / `{"type": "inherit", "value": "k8s"}` (seed 002) | unwrapped / the inherited config |
//!
//! Secure values given literally (`{"type": "SecureString", "value": ...}`) and secure properties with no
//! directive are refused with an error naming the alias, the property and the fix. Errors never quote values.

use std::fmt;

use cairn_arm::ResourceId;
use cairn_arm::models::common::{KeyVaultParameterReference, KeyVaultReference};
use cairn_arm::models::extension::{ApiReference, DeploymentExtensionConfigItem, ExtensionConfig};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::directive::path::ValuePath;

/// How deep config groups may nest; deeper input is refused rather than recursed into.
const MAX_GROUP_DEPTH: usize = 16;

/// A directive: how to fetch a config value when it is needed, instead of the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Directive {
    /// Read a Key Vault secret.
    KeyVaultReference(KeyVaultParameterReference),
    /// Call an ARM API (e.g. `POST .../listClusterAdminCredential`) and take one value out of the response.
    ApiReference(ApiReference),
}

impl Directive {
    /// The ARM resource the value comes from: the Key Vault, or the resource the API is called on. `None`
    /// when the ID does not parse (evaluation reports that).
    pub fn source_resource(&self) -> Option<ResourceId> {
        let id = match self {
            Self::KeyVaultReference(reference) => &reference.key_vault.id,
            Self::ApiReference(reference) => &reference.arm_resource_id,
        };
        ResourceId::parse(id).ok()
    }
}

/// One config property: a literal, a directive, or a group of properties (e.g. the `auth` object).
#[derive(Clone, PartialEq)]
pub enum ConfigValue {
    /// A non-secret value, persisted as is.
    Literal(Value),
    /// Fetched again whenever the config is needed.
    Directive(Directive),
    /// Nested properties; resolves to an object of their values.
    Group(IndexMap<String, ConfigValue>),
}

impl fmt::Debug for ConfigValue {
    /// Literal values are printed as `[REDACTED]`: a user may have put a secret in a non-secure property.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(_) => f.write_str("Literal([REDACTED])"),
            Self::Directive(directive) => f.debug_tuple("Directive").field(directive).finish(),
            Self::Group(members) => f.debug_tuple("Group").field(members).finish(),
        }
    }
}

/// An extension config as a stack persists it: literals and directives only. Serializes to the wire form
/// (`{"prop": {"value": ...} | {"keyVaultReference": ...} | {"apiReference": ...} | {group...}}`) and reads
/// back any form [`PersistedConfig::from_wire`] accepts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PersistedConfig {
    properties: IndexMap<String, ConfigValue>,
}

/// A property path inside a config, e.g. `["auth", "kubeConfig"]`.
pub type ConfigPath = Vec<String>;

/// Why a config cannot be persisted for a stack.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("extension '{alias}', config property '{property}': {kind}")]
pub struct ConfigError {
    /// The extension alias (the `extensionConfigs` key).
    pub alias: String,
    /// The property path, dotted (`auth.kubeConfig`); empty for the config as a whole.
    pub property: String,
    pub kind: ConfigErrorKind,
}

/// The reasons a config item is refused. Messages end with the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigErrorKind {
    #[error(
        "the value is secure ('{declared_type}') and was given literally; a stack never stores secrets, so it could \
         not supply it again when deleting resources. Fix: give it as a 'keyVaultReference' (or an 'apiReference' \
         to the ARM action that returns it)"
    )]
    SecureLiteral { declared_type: String },
    #[error(
        "the value is secure but has no 'keyVaultReference' or 'apiReference' to fetch it again, so the stack could \
         not supply it when deleting resources. Fix: give it as a 'keyVaultReference' (or an 'apiReference')"
    )]
    SecureWithoutDirective,
    #[error(
        "auth type 'UserProvided' carries a raw credential, which a stack can neither store nor fetch again when it \
         deletes resources. Fix: store the credential in a Key Vault secret and use auth type 'KeyVaultSecret' (or a \
         'keyVaultReference')"
    )]
    UserProvidedAuth,
    #[error(
        "auth type '{auth_type}' is not supported. Fix: use 'KeyVaultSecret', a 'keyVaultReference' or an \
         'apiReference'"
    )]
    UnknownAuthType { auth_type: String },
    #[error(
        "'{form}' holds an unevaluated template expression. Fix: deploy through the stack so the deployment engine \
         evaluates it and records an 'apiReference'"
    )]
    UnevaluatedExpression { form: &'static str },
    #[error("'{form}' needs '{field}'. Fix: {fix}")]
    MissingField {
        form: &'static str,
        field: &'static str,
        fix: &'static str,
    },
    #[error("'{form}.{field}' must be {expected}")]
    InvalidField {
        form: &'static str,
        field: &'static str,
        expected: &'static str,
    },
    #[error(
        "'apiReference.method' is '{method}'; only GET and POST are evaluated, because fetching a config value must \
         never change anything. Fix: use the ARM action that returns the value (e.g. POST listClusterAdminCredential)"
    )]
    UnsupportedMethod { method: String },
    #[error(
        "the item has more than one of 'value', 'keyVaultReference', 'apiReference', 'reference', \
         'runtimeReference' and 'apiCall'. Fix: keep exactly one"
    )]
    Ambiguous,
    #[error(
        "expected a config item such as {{\"value\": ...}}, {{\"keyVaultReference\": ...}} or \
         {{\"apiReference\": ...}}"
    )]
    NotAnItem,
    #[error("the config nests more than {MAX_GROUP_DEPTH} levels deep")]
    TooDeep,
    #[error(
        "the config inherits from extension alias '{from}', which has no config here. Fix: pass the config of an \
         alias declared by the parent deployment"
    )]
    UnknownInheritance { from: String },
    #[error("an extension config must be a JSON object of properties")]
    NotAnObject,
}

/// The item keys that mark an object as a config item rather than a group.
const ITEM_KEYS: [&str; 6] = [
    "value",
    "keyVaultReference",
    "apiReference",
    "reference",
    "runtimeReference",
    "apiCall",
];

fn get_ignore_case<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    map.get(key).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn is_secure_type(declared: &str) -> bool {
    declared.eq_ignore_ascii_case("securestring") || declared.eq_ignore_ascii_case("secureobject")
}

impl PersistedConfig {
    /// A config from already-normalised properties.
    pub fn new(properties: IndexMap<String, ConfigValue>) -> Self {
        Self { properties }
    }

    /// Reads a config in any supported form (see the module docs). Alias-level `inherit` is refused here;
    /// use [`PersistedConfig::from_wire_with_inheritance`] to resolve it.
    pub fn from_wire(alias: &str, config: &Value) -> Result<Self, ConfigError> {
        Self::from_wire_with_inheritance(alias, config, &|_| None)
    }

    /// Like [`PersistedConfig::from_wire`], resolving seed 002's `{"type": "inherit", "value": "<alias>"}`
    /// through `inherited` (the parent deployment's configs by alias).
    pub fn from_wire_with_inheritance(
        alias: &str,
        config: &Value,
        inherited: &dyn Fn(&str) -> Option<PersistedConfig>,
    ) -> Result<Self, ConfigError> {
        let error = |property: &[String], kind| ConfigError {
            alias: alias.to_owned(),
            property: property.join("."),
            kind,
        };
        let Value::Object(map) = config else {
            return Err(error(&[], ConfigErrorKind::NotAnObject));
        };
        // Seed 002 wrapped a whole config: `{"type": "object" | "inherit", "value": ...}`.
        let wrapper_type = get_ignore_case(map, "type").and_then(Value::as_str);
        let wrapped = get_ignore_case(map, "value");
        if let (Some(wrapper_type), Some(wrapped), 2) = (wrapper_type, wrapped, map.len()) {
            if wrapper_type.eq_ignore_ascii_case("inherit") {
                let from = wrapped.as_str().unwrap_or_default();
                return inherited(from).ok_or_else(|| {
                    error(
                        &[],
                        ConfigErrorKind::UnknownInheritance {
                            from: from.to_owned(),
                        },
                    )
                });
            }
            if wrapper_type.eq_ignore_ascii_case("object") {
                return Self::from_wire_with_inheritance(alias, wrapped, inherited);
            }
        }
        let mut path = Vec::new();
        let properties =
            normalize_members(map, &mut path, 0).map_err(|(path, kind)| error(&path, kind))?;
        Ok(Self { properties })
    }

    /// Reads the shipped API's config items. A group's members listed under dotted names (`auth.kubeConfig`, as
    /// [`PersistedConfig::to_arm`] and deployment records write them) go back into their group, so the extension
    /// receives `{auth: {kubeConfig}}` again, as it did at deployment.
    pub fn from_arm(alias: &str, config: &ExtensionConfig) -> Result<Self, ConfigError> {
        let mut map = Map::with_capacity(config.len());
        for (name, item) in config {
            // The item model only has plain fields and JSON members, so it always serializes.
            let value = serde_json::to_value(item).unwrap_or(Value::Null);
            let path: Vec<&str> = name.split('.').collect();
            insert_at(&mut map, &path, value);
        }
        Self::from_wire(alias, &Value::Object(map))
    }

    /// The properties in order.
    pub fn properties(&self) -> &IndexMap<String, ConfigValue> {
        &self.properties
    }

    /// Whether there are no properties.
    pub fn is_empty(&self) -> bool {
        self.properties.is_empty()
    }

    /// Every directive with its property path, in order.
    pub fn directives(&self) -> Vec<(ConfigPath, &Directive)> {
        fn walk<'c>(
            members: &'c IndexMap<String, ConfigValue>,
            path: &mut Vec<String>,
            out: &mut Vec<(ConfigPath, &'c Directive)>,
        ) {
            for (name, value) in members {
                path.push(name.clone());
                match value {
                    ConfigValue::Directive(directive) => out.push((path.clone(), directive)),
                    ConfigValue::Group(inner) => walk(inner, path, out),
                    ConfigValue::Literal(_) => {}
                }
                path.pop();
            }
        }
        let mut out = Vec::new();
        walk(&self.properties, &mut Vec::new(), &mut out);
        out
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
        fn members(members: &IndexMap<String, ConfigValue>) -> Value {
            Value::Object(
                members
                    .iter()
                    .map(|(name, value)| (name.clone(), item(value)))
                    .collect(),
            )
        }
        fn item(value: &ConfigValue) -> Value {
            let mut map = Map::new();
            match value {
                ConfigValue::Literal(literal) => {
                    map.insert("value".into(), literal.clone());
                }
                ConfigValue::Directive(Directive::KeyVaultReference(reference)) => {
                    map.insert(
                        "keyVaultReference".into(),
                        serde_json::to_value(reference).unwrap_or(Value::Null),
                    );
                }
                ConfigValue::Directive(Directive::ApiReference(reference)) => {
                    map.insert(
                        "apiReference".into(),
                        serde_json::to_value(reference).unwrap_or(Value::Null),
                    );
                }
                ConfigValue::Group(inner) => return members(inner),
            }
            Value::Object(map)
        }
        members(&self.properties)
    }

    /// The shipped API's flat item map (for `deploymentExtensions[].config`). The shipped API has no groups,
    /// so grouped properties are flattened to dotted names (`auth.kubeConfig`).
    pub fn to_arm(&self) -> ExtensionConfig {
        fn walk(members: &IndexMap<String, ConfigValue>, prefix: &str, out: &mut ExtensionConfig) {
            for (name, value) in members {
                let name = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                let item = match value {
                    ConfigValue::Literal(literal) => {
                        DeploymentExtensionConfigItem::value(literal.clone())
                    }
                    ConfigValue::Directive(Directive::KeyVaultReference(reference)) => {
                        DeploymentExtensionConfigItem {
                            key_vault_reference: Some(reference.clone()),
                            ..Default::default()
                        }
                    }
                    ConfigValue::Directive(Directive::ApiReference(reference)) => {
                        DeploymentExtensionConfigItem {
                            api_reference: Some(reference.clone()),
                            ..Default::default()
                        }
                    }
                    ConfigValue::Group(inner) => {
                        walk(inner, &name, out);
                        continue;
                    }
                };
                out.insert(name, item);
            }
        }
        let mut out = ExtensionConfig::new();
        walk(&self.properties, "", &mut out);
        out
    }
}

impl Serialize for PersistedConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PersistedConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_wire("", &value).map_err(serde::de::Error::custom)
    }
}

type NormalizeError = (ConfigPath, ConfigErrorKind);

/// Puts `value` at `path` in `map`, creating the groups on the way (a group given both whole and by dotted
/// member merges; a literal in the way of a member becomes a group, which `from_wire` then refuses by shape).
fn insert_at(map: &mut Map<String, Value>, path: &[&str], value: Value) {
    match path {
        [] => {}
        [last] => match (map.get_mut(*last), value) {
            (Some(Value::Object(existing)), Value::Object(members)) => existing.extend(members),
            (_, value) => {
                map.insert((*last).to_owned(), value);
            }
        },
        [first, rest @ ..] => {
            let entry = map
                .entry((*first).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(group) = entry {
                insert_at(group, rest, value);
            }
        }
    }
}

fn normalize_members(
    map: &Map<String, Value>,
    path: &mut Vec<String>,
    depth: usize,
) -> Result<IndexMap<String, ConfigValue>, NormalizeError> {
    if depth > MAX_GROUP_DEPTH {
        return Err((path.clone(), ConfigErrorKind::TooDeep));
    }
    let mut out = IndexMap::with_capacity(map.len());
    for (name, value) in map {
        path.push(name.clone());
        let normalized = normalize_value(value, path, depth)?;
        path.pop();
        out.insert(name.clone(), normalized);
    }
    Ok(out)
}

fn normalize_value(
    value: &Value,
    path: &mut Vec<String>,
    depth: usize,
) -> Result<ConfigValue, NormalizeError> {
    let fail = |path: &Vec<String>, kind| Err((path.clone(), kind));
    let Value::Object(map) = value else {
        // Seed 003 wrote plain values (`"cluster": "myCluster"`).
        return Ok(ConfigValue::Literal(value.clone()));
    };
    let declared_type = get_ignore_case(map, "type").and_then(Value::as_str);
    if let Some(auth_type) = declared_type
        && (get_ignore_case(map, "keyVaultId").is_some()
            || auth_type.eq_ignore_ascii_case("KeyVaultSecret")
            || auth_type.eq_ignore_ascii_case("UserProvided"))
    {
        return auth_object(map, auth_type).or_else(|kind| fail(path, kind));
    }
    let present: Vec<&str> = ITEM_KEYS
        .into_iter()
        .filter(|key| get_ignore_case(map, key).is_some())
        .collect();
    let result = match present.as_slice() {
        [] => {
            if let Some(declared) = declared_type {
                if is_secure_type(declared) {
                    return fail(path, ConfigErrorKind::SecureWithoutDirective);
                }
                if declared.eq_ignore_ascii_case("armApiCall") {
                    return fail(
                        path,
                        ConfigErrorKind::MissingField {
                            form: "armApiCall",
                            field: "apiCall",
                            fix: "record the call as an 'apiReference'",
                        },
                    );
                }
                return fail(path, ConfigErrorKind::NotAnItem);
            }
            return normalize_members(map, path, depth + 1).map(ConfigValue::Group);
        }
        [_, _, ..] => return fail(path, ConfigErrorKind::Ambiguous),
        [key] => {
            let inner = get_ignore_case(map, key).unwrap_or(&Value::Null);
            match *key {
                "value" => literal(inner, declared_type),
                "keyVaultReference" => key_vault_reference("keyVaultReference", inner),
                "reference" => key_vault_reference("reference", inner),
                "apiReference" => api_reference(inner),
                "runtimeReference" => runtime_reference(inner),
                _ => api_call(inner),
            }
        }
    };
    result.or_else(|kind| fail(path, kind))
}

fn literal(value: &Value, declared_type: Option<&str>) -> Result<ConfigValue, ConfigErrorKind> {
    match declared_type {
        Some(declared) if is_secure_type(declared) => Err(ConfigErrorKind::SecureLiteral {
            declared_type: declared.to_owned(),
        }),
        Some(declared) if declared.eq_ignore_ascii_case("armApiCall") => {
            Err(ConfigErrorKind::UnevaluatedExpression { form: "armApiCall" })
        }
        _ => Ok(ConfigValue::Literal(value.clone())),
    }
}

/// Reads a required string field of a directive object.
fn required<'v>(
    map: &'v Map<String, Value>,
    form: &'static str,
    field: &'static str,
    fix: &'static str,
) -> Result<&'v str, ConfigErrorKind> {
    match get_ignore_case(map, field) {
        None | Some(Value::Null) => Err(ConfigErrorKind::MissingField { form, field, fix }),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text),
        Some(_) => Err(ConfigErrorKind::InvalidField {
            form,
            field,
            expected: "a non-empty string",
        }),
    }
}

/// Reads an optional string field; empty strings count as absent.
fn optional(
    map: &Map<String, Value>,
    form: &'static str,
    field: &'static str,
) -> Result<Option<String>, ConfigErrorKind> {
    match get_ignore_case(map, field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(ConfigErrorKind::InvalidField {
            form,
            field,
            expected: "a string",
        }),
    }
}

fn object<'v>(
    value: &'v Value,
    form: &'static str,
) -> Result<&'v Map<String, Value>, ConfigErrorKind> {
    value.as_object().ok_or(ConfigErrorKind::InvalidField {
        form,
        field: "",
        expected: "an object",
    })
}

fn checked_resource_id(
    id: &str,
    form: &'static str,
    field: &'static str,
) -> Result<String, ConfigErrorKind> {
    ResourceId::parse(id)
        .map(|_| id.to_owned())
        .map_err(|_| ConfigErrorKind::InvalidField {
            form,
            field,
            expected: "an ARM resource ID",
        })
}

const KV_FIX: &str = "name the vault and the secret: {\"keyVault\": {\"id\": \"<vault id>\"}, \"secretName\": \"<name>\"}";

fn key_vault_reference(form: &'static str, value: &Value) -> Result<ConfigValue, ConfigErrorKind> {
    let map = object(value, form)?;
    let vault = match get_ignore_case(map, "keyVault") {
        None | Some(Value::Null) => {
            return Err(ConfigErrorKind::MissingField {
                form,
                field: "keyVault",
                fix: KV_FIX,
            });
        }
        Some(vault) => object(vault, form)?,
    };
    let vault_id = checked_resource_id(required(vault, form, "id", KV_FIX)?, form, "keyVault.id")?;
    Ok(ConfigValue::Directive(Directive::KeyVaultReference(
        KeyVaultParameterReference {
            key_vault: KeyVaultReference { id: vault_id },
            secret_name: required(map, form, "secretName", KV_FIX)?.to_owned(),
            secret_version: optional(map, form, "secretVersion")?,
        },
    )))
}

fn auth_object(map: &Map<String, Value>, auth_type: &str) -> Result<ConfigValue, ConfigErrorKind> {
    if auth_type.eq_ignore_ascii_case("UserProvided") {
        return Err(ConfigErrorKind::UserProvidedAuth);
    }
    if !auth_type.eq_ignore_ascii_case("KeyVaultSecret") {
        return Err(ConfigErrorKind::UnknownAuthType {
            auth_type: auth_type.to_owned(),
        });
    }
    const FORM: &str = "KeyVaultSecret";
    const FIX: &str = "give 'keyVaultId' and 'secretName'";
    let vault_id =
        checked_resource_id(required(map, FORM, "keyVaultId", FIX)?, FORM, "keyVaultId")?;
    Ok(ConfigValue::Directive(Directive::KeyVaultReference(
        KeyVaultParameterReference {
            key_vault: KeyVaultReference { id: vault_id },
            secret_name: required(map, FORM, "secretName", FIX)?.to_owned(),
            secret_version: optional(map, FORM, "secretVersion")?,
        },
    )))
}

/// Checks an API directive and wraps it.
fn api_directive(
    reference: ApiReference,
    form: &'static str,
) -> Result<ConfigValue, ConfigErrorKind> {
    let method = reference.method.to_ascii_uppercase();
    if method != "GET" && method != "POST" {
        return Err(ConfigErrorKind::UnsupportedMethod {
            method: reference.method,
        });
    }
    if method == "GET" && reference.request_body.is_some() {
        return Err(ConfigErrorKind::InvalidField {
            form,
            field: "requestBody",
            expected: "absent for a GET (only a POST action sends a body)",
        });
    }
    checked_resource_id(&reference.arm_resource_id, form, "armResourceId")?;
    ValuePath::parse(&reference.response_value_path).map_err(|_| {
        ConfigErrorKind::InvalidField {
            form,
            field: "responseValuePath",
            expected: "a value path such as 'kubeconfigs[0].value'",
        }
    })?;
    Ok(ConfigValue::Directive(Directive::ApiReference(
        ApiReference {
            method,
            ..reference
        },
    )))
}

/// An optional JSON request body (`requestBody`; a `list*()` call's third argument). Only a `POST` sends one.
fn request_body(
    map: &Map<String, Value>,
    form: &'static str,
) -> Result<Option<Value>, ConfigErrorKind> {
    match get_ignore_case(map, "requestBody") {
        None | Some(Value::Null) => Ok(None),
        Some(body @ (Value::Object(_) | Value::Array(_))) => Ok(Some(body.clone())),
        Some(_) => Err(ConfigErrorKind::InvalidField {
            form,
            field: "requestBody",
            expected: "a JSON object or array",
        }),
    }
}

const API_FIX: &str = "give method, armResourceId, apiVersion, action and responseValuePath";

fn api_reference(value: &Value) -> Result<ConfigValue, ConfigErrorKind> {
    const FORM: &str = "apiReference";
    let map = object(value, FORM)?;
    let reference = ApiReference {
        method: required(map, FORM, "method", API_FIX)?.to_owned(),
        arm_resource_id: required(map, FORM, "armResourceId", API_FIX)?.to_owned(),
        api_version: required(map, FORM, "apiVersion", API_FIX)?.to_owned(),
        // An empty action means a GET of the resource itself.
        action: optional(map, FORM, "action")?.unwrap_or_default(),
        query: optional(map, FORM, "query")?
            .map(|q| q.trim_start_matches('?').to_owned())
            .filter(|q| !q.is_empty()),
        request_body: request_body(map, FORM)?,
        response_value_path: required(map, FORM, "responseValuePath", API_FIX)?.to_owned(),
    };
    api_directive(reference, FORM)
}

fn runtime_reference(value: &Value) -> Result<ConfigValue, ConfigErrorKind> {
    const FORM: &str = "runtimeReference";
    const FIX: &str =
        "redeploy the stack so the value is recorded as an 'apiReference' with its apiVersion";
    let map = object(value, FORM)?;
    let action = required(map, FORM, "action", FIX)?;
    // Seed 001: "reference" reads the resource itself; anything else is a POST action (`list*`).
    let (method, action) = if action.eq_ignore_ascii_case("reference") {
        ("GET", String::new())
    } else {
        ("POST", action.to_owned())
    };
    let reference = ApiReference {
        method: method.to_owned(),
        arm_resource_id: required(map, FORM, "resourceId", FIX)?.to_owned(),
        api_version: required(map, FORM, "apiVersion", FIX)?.to_owned(),
        action,
        query: None,
        request_body: None,
        response_value_path: required(map, FORM, "propertyPath", FIX)?.to_owned(),
    };
    api_directive(reference, FORM)
}

fn api_call(value: &Value) -> Result<ConfigValue, ConfigErrorKind> {
    const FORM: &str = "apiCall";
    const FIX: &str = "give method, resourceId, apiVersion, path and valueJsonPath";
    let map = object(value, FORM)?;
    let path = optional(map, FORM, "path")?.unwrap_or_default();
    let reference = ApiReference {
        method: required(map, FORM, "method", FIX)?.to_owned(),
        arm_resource_id: required(map, FORM, "resourceId", FIX)?.to_owned(),
        api_version: required(map, FORM, "apiVersion", FIX)?.to_owned(),
        action: path.trim_start_matches('/').to_owned(),
        query: optional(map, FORM, "query")?
            .map(|q| q.trim_start_matches('?').to_owned())
            .filter(|q| !q.is_empty()),
        request_body: request_body(map, FORM)?,
        response_value_path: required(map, FORM, "valueJsonPath", FIX)?.to_owned(),
    };
    api_directive(reference, FORM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";
    const AKS: &str = "/subscriptions/s/resourceGroups/app/providers/Microsoft.ContainerService/managedClusters/aks";

    fn kv(secret: &str) -> ConfigValue {
        ConfigValue::Directive(Directive::KeyVaultReference(KeyVaultParameterReference {
            key_vault: KeyVaultReference { id: VAULT.into() },
            secret_name: secret.into(),
            secret_version: None,
        }))
    }

    fn aks_credentials(path: &str) -> ConfigValue {
        ConfigValue::Directive(Directive::ApiReference(ApiReference {
            method: "POST".into(),
            arm_resource_id: AKS.into(),
            api_version: "2024-02-01".into(),
            action: "listClusterAdminCredential".into(),
            query: None,
            request_body: None,
            response_value_path: path.into(),
        }))
    }

    fn one(item: Value) -> Result<ConfigValue, ConfigError> {
        PersistedConfig::from_wire("k8s", &json!({ "kubeConfig": item }))
            .map(|config| config.properties()["kubeConfig"].clone())
    }

    fn refused(item: Value) -> ConfigErrorKind {
        one(item).unwrap_err().kind
    }

    #[test]
    fn key_vault_forms_normalise_alike() {
        let current = json!({"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}});
        let seed_001 = json!({"reference": {"keyVault": {"id": VAULT}, "secretName": "kc"}});
        let seed_002 = json!({"type": "keyVaultReference", "keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}});
        let seed_003 = json!({"type": "KeyVaultSecret", "keyVaultId": VAULT, "secretName": "kc"});
        for form in [current, seed_001, seed_002, seed_003] {
            assert_eq!(one(form.clone()).unwrap(), kv("kc"), "{form}");
        }
    }

    #[test]
    fn api_forms_normalise_alike() {
        let seed_000 = json!({"type": "securestring", "apiReference": {"method": "post", "armResourceId": AKS,
            "apiVersion": "2024-02-01", "action": "listClusterAdminCredential", "responseValuePath": "kubeconfigs[0].value"}});
        let seed_001 = json!({"runtimeReference": {"resourceId": AKS, "apiVersion": "2024-02-01",
            "action": "listClusterAdminCredential", "propertyPath": "$.kubeconfigs[0].value"}});
        let seed_002 = json!({"type": "armApiCall", "apiCall": {"method": "POST", "resourceId": AKS,
            "apiVersion": "2024-02-01", "path": "/listClusterAdminCredential", "query": "?", "valueJsonPath": "kubeconfigs[0].value"}});
        assert_eq!(
            one(seed_000).unwrap(),
            aks_credentials("kubeconfigs[0].value")
        );
        assert_eq!(
            one(seed_001).unwrap(),
            aks_credentials("$.kubeconfigs[0].value")
        );
        assert_eq!(
            one(seed_002).unwrap(),
            aks_credentials("kubeconfigs[0].value")
        );
    }

    #[test]
    fn runtime_reference_to_reference_is_a_get() {
        let ConfigValue::Directive(Directive::ApiReference(api)) = one(json!({"runtimeReference": {
            "resourceId": AKS, "apiVersion": "2024-02-01", "action": "reference", "propertyPath": "properties.fqdn"}}))
        .unwrap() else {
            panic!("expected an API directive")
        };
        assert_eq!((api.method.as_str(), api.action.as_str()), ("GET", ""));
    }

    #[test]
    fn secrets_given_literally_are_refused() {
        assert!(matches!(
            refused(json!({"type": "SecureString", "value": "apiVersion: v1 ..."})),
            ConfigErrorKind::SecureLiteral { .. }
        ));
        assert_eq!(
            refused(json!({"type": "secureObject"})),
            ConfigErrorKind::SecureWithoutDirective
        );
        assert_eq!(
            refused(json!({"type": "UserProvided", "value": "s3cr3t"})),
            ConfigErrorKind::UserProvidedAuth
        );
        let error = one(json!({"type": "SecureString", "value": "s3cr3t"})).unwrap_err();
        let message = error.to_string();
        assert!(!message.contains("s3cr3t"), "{message}");
        assert!(
            message.starts_with("extension 'k8s', config property 'kubeConfig':"),
            "{message}"
        );
        assert!(
            message.contains("Fix: give it as a 'keyVaultReference'"),
            "{message}"
        );
    }

    #[test]
    fn malformed_directives_are_refused() {
        assert_eq!(
            refused(json!({"type": "armApiCall", "value": "[listClusterAdminCredential(...)]"})),
            ConfigErrorKind::UnevaluatedExpression { form: "armApiCall" }
        );
        assert!(matches!(
            refused(
                json!({"runtimeReference": {"resourceId": AKS, "action": "listX", "propertyPath": "a"}})
            ),
            ConfigErrorKind::MissingField {
                form: "runtimeReference",
                field: "apiVersion",
                ..
            }
        ));
        assert!(matches!(
            refused(
                json!({"apiReference": {"method": "DELETE", "armResourceId": AKS, "apiVersion": "1",
                "action": "x", "responseValuePath": "a"}})
            ),
            ConfigErrorKind::UnsupportedMethod { .. }
        ));
        assert!(matches!(
            refused(
                json!({"keyVaultReference": {"keyVault": {"id": "not-an-id"}, "secretName": "kc"}})
            ),
            ConfigErrorKind::InvalidField {
                field: "keyVault.id",
                ..
            }
        ));
        assert!(matches!(
            refused(
                json!({"apiReference": {"method": "POST", "armResourceId": AKS, "apiVersion": "1",
                "action": "x", "responseValuePath": "a..b"}})
            ),
            ConfigErrorKind::InvalidField {
                field: "responseValuePath",
                ..
            }
        ));
        assert_eq!(
            refused(json!({"value": 1, "keyVaultReference": {}})),
            ConfigErrorKind::Ambiguous
        );
        assert_eq!(
            refused(json!({"type": "String"})),
            ConfigErrorKind::NotAnItem
        );
        assert_eq!(
            refused(json!({"type": "Kerberos", "keyVaultId": VAULT})),
            ConfigErrorKind::UnknownAuthType {
                auth_type: "Kerberos".into()
            }
        );
    }

    #[test]
    fn auth_groups_and_bare_literals() {
        let config = PersistedConfig::from_wire(
            "k8s",
            &json!({
                "auth": {"kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}},
                "namespace": {"value": "default"},
                "cluster": "myCluster"
            }),
        )
        .unwrap();
        let directives = config.directives();
        assert_eq!(directives.len(), 1);
        assert_eq!(
            directives[0].0,
            vec!["auth".to_owned(), "kubeConfig".to_owned()]
        );
        assert_eq!(
            config.properties()["cluster"],
            ConfigValue::Literal(json!("myCluster"))
        );
        assert_eq!(
            config.credential_sources(),
            vec![ResourceId::parse(VAULT).unwrap()]
        );
        let error = PersistedConfig::from_wire(
            "k8s",
            &json!({"auth": {"kubeConfig": {"type": "SecureString", "value": "x"}}}),
        )
        .unwrap_err();
        assert_eq!(error.property, "auth.kubeConfig");
    }

    #[test]
    fn wire_form_round_trips() {
        let config = PersistedConfig::from_wire(
            "k8s",
            &json!({
                "auth": {"kubeConfig": {"apiReference": {"method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01",
                    "action": "listClusterAdminCredential", "query": "a=1", "responseValuePath": "kubeconfigs[0].value"}}},
                "namespace": {"type": "String", "value": "default"},
                "empty": {}
            }),
        )
        .unwrap();
        let wire = config.to_wire();
        assert_eq!(PersistedConfig::from_wire("k8s", &wire).unwrap(), config);
        let text = serde_json::to_string(&config).unwrap();
        assert_eq!(
            serde_json::from_str::<PersistedConfig>(&text).unwrap(),
            config
        );
        let arm = config.to_arm();
        assert!(arm["auth.kubeConfig"].api_reference.is_some());
        assert_eq!(arm["namespace"].value, Some(json!("default")));
    }

    #[test]
    fn seed_002_wrappers_unwrap_or_inherit() {
        let parent =
            PersistedConfig::from_wire("k8s", &json!({"namespace": {"value": "apps"}})).unwrap();
        let wrapped = PersistedConfig::from_wire(
            "k8s",
            &json!({"type": "object", "value": {"namespace": {"type": "string", "value": "apps"}}}),
        )
        .unwrap();
        assert_eq!(wrapped, parent);
        let inherited = PersistedConfig::from_wire_with_inheritance(
            "kubernetes",
            &json!({"type": "inherit", "value": "k8s"}),
            &|alias| (alias == "k8s").then(|| parent.clone()),
        )
        .unwrap();
        assert_eq!(inherited, parent);
        let error =
            PersistedConfig::from_wire("kubernetes", &json!({"type": "inherit", "value": "k8s"}))
                .unwrap_err();
        assert_eq!(
            error.kind,
            ConfigErrorKind::UnknownInheritance { from: "k8s".into() }
        );
        assert_eq!(
            PersistedConfig::from_wire("x", &json!([1]))
                .unwrap_err()
                .kind,
            ConfigErrorKind::NotAnObject
        );
    }

    #[test]
    fn from_arm_puts_group_members_back_in_their_group() {
        let dotted: ExtensionConfig = serde_json::from_value(json!({
            "namespace": {"value": "app"},
            "auth.kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}
        }))
        .unwrap();
        let grouped: ExtensionConfig = serde_json::from_value(json!({
            "namespace": {"value": "app"},
            "auth": {"kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}}
        }))
        .unwrap();
        for config in [&dotted, &grouped] {
            let read = PersistedConfig::from_arm("k8s", config).unwrap();
            let ConfigValue::Group(auth) = &read.properties()["auth"] else {
                panic!("auth is a group: {read:?}");
            };
            assert_eq!(auth["kubeConfig"], kv("kc"));
            assert_eq!(
                read.to_arm(),
                dotted,
                "the record form lists members dotted"
            );
        }
    }

    #[test]
    fn from_arm_reads_the_shipped_items() {
        let arm: ExtensionConfig = serde_json::from_value(json!({
            "namespace": {"type": "String", "value": "app"},
            "kubeConfig": {"type": "SecureString", "keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}
        }))
        .unwrap();
        let config = PersistedConfig::from_arm("k8s", &arm).unwrap();
        assert_eq!(config.properties()["kubeConfig"], kv("kc"));
        let secret: ExtensionConfig =
            serde_json::from_value(json!({"kubeConfig": {"type": "SecureString", "value": "x"}}))
                .unwrap();
        assert!(PersistedConfig::from_arm("k8s", &secret).is_err());
    }

    #[test]
    fn debug_hides_literals() {
        let config =
            PersistedConfig::from_wire("k8s", &json!({"token": {"value": "hunter2"}})).unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}

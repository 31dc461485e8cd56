//! Extension configs: the wrapper items (`{value}`, `{keyVaultReference}`, `{apiReference}`), the older seed forms
//! they are normalised from, and the merge of template defaults with deployment inputs.

use cairn_eval::{Object, Value};

use crate::diagnostics::join_path;
use crate::model::ExtensionDecl;

/// The wrapper keys a normalised config item may hold; an item holds exactly one of them.
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

/// The reserved config property holding an extension's secure properties (REP 0006) or, in seed 003's form, the
/// instructions to fetch its one credential.
pub const AUTH: &str = "auth";

/// Diagnostic code of a config property the extension's declared schema does not name ("dangling"): refused for a
/// deployment stack, a warning otherwise.
pub const UNDECLARED_CONFIG_PROPERTY: &str = "ExtensionConfigPropertyNotDeclared";

/// Diagnostic code of seed 003's `auth: { type: 'UserProvided' }`: refused for a deployment stack (it can neither
/// store the credential nor ask for it again), a warning otherwise.
pub const USER_PROVIDED_AUTH: &str = "ExtensionConfigUserProvidedAuth";

/// Diagnostic code of a config a deployment cannot use (shape, null `auth`, missing required property).
pub const INVALID_CONFIG: &str = "InvalidExtensionConfig";

/// How deep groups inside `auth` may nest.
const MAX_GROUP_DEPTH: usize = 16;

/// A config that cannot be normalised: the property path under the alias (dotted, empty for the alias as a
/// whole) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub property: String,
    pub message: String,
}

impl ConfigError {
    fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            property: String::new(),
            message: message.into(),
        }
    }

    /// The same error one property further out.
    fn under(mut self, property: &str) -> ConfigError {
        self.property = if self.property.is_empty() {
            property.to_string()
        } else {
            format!("{property}.{}", self.property)
        };
        self
    }
}

/// The JSON path of a config property under `base` (the alias's path): `property` is dotted (`auth.kubeConfig`)
/// or empty for the alias itself.
pub fn property_target(base: &str, property: &str) -> String {
    property
        .split('.')
        .filter(|segment| !segment.is_empty())
        .fold(base.to_string(), |path, segment| join_path(&path, segment))
}

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

fn is_item(o: &Object) -> bool {
    is_item_keys(o.keys().map(String::as_str))
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

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn field(o: &Object, key: &str) -> Value {
    o.get(key).cloned().unwrap_or(Value::Null)
}

fn literal(value: Value) -> Value {
    Value::Object(Object::from_iter([("value".to_string(), value)]))
}

/// Normalises one config property value to `{value}`, `{keyVaultReference}` or `{apiReference}`. Accepts the
/// shipped forms, the seed-document forms — `{reference: {keyVault...}}` and `{runtimeReference}` (REP 0004),
/// typed `{type, value}` items including `keyVaultReference` and `armApiCall`/`apiCall` (REP 0006 early) — and a
/// bare value (seed 003, and what a module's `createObject(...)` config holds): anything that is not an item
/// (see [`ITEM_KEYS`]) is the literal value. An item naming more than one of the three wrappers is refused.
pub fn normalize_config_item(item: &Value) -> Result<Value, ConfigError> {
    if let Value::Unevaluated(_) = item {
        // Known at deployment time only (e.g. inherited from a config given then): kept as is.
        return Ok(item.clone());
    }
    let Some(o) = item.as_object().filter(|o| is_item(o)) else {
        return Ok(literal(item.clone()));
    };
    let kinds = wrapper_kinds(o.keys().map(String::as_str));
    if kinds.len() > 1 {
        return Err(ConfigError::new(format!(
            "A config item holds exactly one of 'value', 'keyVaultReference' and 'apiReference'; this one has {}: keep the one you mean.",
            kinds
                .iter()
                .map(|k| format!("'{k}'"))
                .collect::<Vec<_>>()
                .join(" and ")
        )));
    }
    if o.contains_key("value") && !o.contains_key("type") {
        return Ok(literal(field(o, "value")));
    }
    if let Some(kv) = o.get("keyVaultReference").or_else(|| o.get("reference")) {
        check_key_vault_reference(kv)?;
        return Ok(obj(vec![("keyVaultReference", kv.clone())]));
    }
    if let Some(api) = o.get("apiReference") {
        return Ok(obj(vec![("apiReference", api.clone())]));
    }
    if let Some(Value::Object(rt)) = o.get("runtimeReference") {
        return Ok(obj(vec![(
            "apiReference",
            obj(vec![
                ("method", Value::from("POST")),
                ("armResourceId", field(rt, "resourceId")),
                ("apiVersion", field(rt, "apiVersion")),
                ("action", field(rt, "action")),
                ("responseValuePath", field(rt, "propertyPath")),
            ]),
        )]));
    }
    if let Some(ty) = o.get("type").and_then(Value::as_str) {
        let value = field(o, "value");
        if ty.eq_ignore_ascii_case("keyVaultReference") {
            check_key_vault_reference(&value)?;
            return Ok(obj(vec![("keyVaultReference", value)]));
        }
        if ty.eq_ignore_ascii_case("armApiCall") || ty.eq_ignore_ascii_case("apiCall") {
            let call = o
                .get("apiCall")
                .or_else(|| o.get("armApiCall"))
                .cloned()
                .unwrap_or(value);
            let Some(c) = call.as_object() else {
                return Err(ConfigError::new(
                    "An 'armApiCall' config item needs the call object.",
                ));
            };
            return Ok(obj(vec![(
                "apiReference",
                obj(vec![
                    ("method", field(c, "method")),
                    ("armResourceId", field(c, "resourceId")),
                    ("apiVersion", field(c, "apiVersion")),
                    ("action", field(c, "path")),
                    ("query", field(c, "query")),
                    ("responseValuePath", field(c, "valueJsonPath")),
                ]),
            )]));
        }
        return Ok(literal(value));
    }
    Err(ConfigError::new(format!(
        "Unknown extension config item shape with keys '{}': expected 'value', 'keyVaultReference' or 'apiReference'.",
        o.keys().cloned().collect::<Vec<_>>().join(", ")
    )))
}

/// Normalises one top-level config property: the reserved `auth` by [`normalize_auth`], any other by
/// [`normalize_config_item`]. Errors name the property path.
pub fn normalize_property(name: &str, value: &Value) -> Result<Value, ConfigError> {
    if name.eq_ignore_ascii_case(AUTH) {
        normalize_auth(value, 0)
    } else {
        normalize_config_item(value)
    }
    .map_err(|e| e.under(name))
}

/// Seed 003's `auth: { type: 'KeyVaultSecret' | 'UserProvided', ... }`: the type, when `o` is that form.
pub fn seed003_auth_type(o: &Object) -> Option<&str> {
    let kind = o.get("type")?.as_str()?;
    (kind.eq_ignore_ascii_case("KeyVaultSecret") || kind.eq_ignore_ascii_case("UserProvided"))
        .then_some(kind)
}

/// The reserved `auth` object (seed 000: every secure property, at any depth) or seed 003's discriminated form.
/// A group is an object of its members' items (nested groups inside); an item (`{keyVaultReference}`, a bare
/// value) is the one credential. Seed 003's `KeyVaultSecret` becomes a Key Vault reference, `UserProvided` the
/// literal secret marked `type: UserProvided` (refused for stacks). `null` is refused.
fn normalize_auth(value: &Value, depth: usize) -> Result<Value, ConfigError> {
    let o = match value {
        Value::Null => {
            return Err(ConfigError::new(
                "The reserved config property 'auth' may not be null: give its secure properties as an object (such as { \"kubeConfig\": { \"keyVaultReference\": ... } }), or leave 'auth' out.",
            ));
        }
        Value::Object(o) => o,
        other => return normalize_config_item(other),
    };
    if depth == 0
        && let Some(kind) = seed003_auth_type(o)
    {
        if kind.eq_ignore_ascii_case("UserProvided") {
            let mut item = Object::new();
            item.insert("type", Value::from("UserProvided"));
            item.insert("value", field(o, "value"));
            return Ok(Value::Object(item));
        }
        let (Some(vault), Some(secret)) = (
            o.get("keyVaultId").filter(|v| v.as_str().is_some()),
            o.get("secretName").filter(|v| v.as_str().is_some()),
        ) else {
            return Err(ConfigError::new(
                "An auth of type 'KeyVaultSecret' needs 'keyVaultId' and 'secretName'.",
            ));
        };
        let mut reference = Object::new();
        reference.insert(
            "keyVault",
            Value::Object(Object::from_iter([("id".to_string(), vault.clone())])),
        );
        reference.insert("secretName", secret.clone());
        if let Some(version) = o.get("secretVersion").filter(|v| !v.is_null()) {
            reference.insert("secretVersion", version.clone());
        }
        return Ok(obj(vec![("keyVaultReference", Value::Object(reference))]));
    }
    if is_item(o) {
        return normalize_config_item(value);
    }
    if depth >= MAX_GROUP_DEPTH {
        return Err(ConfigError::new(format!(
            "The auth object nests deeper than {MAX_GROUP_DEPTH} levels."
        )));
    }
    let mut group = Object::new();
    for (name, member) in o {
        let normalized = match member {
            Value::Object(inner) if !is_item(inner) => normalize_auth(member, depth + 1),
            other => normalize_config_item(other),
        };
        group.insert(name.clone(), normalized.map_err(|e| e.under(name))?);
    }
    Ok(Value::Object(group))
}

fn check_key_vault_reference(v: &Value) -> Result<(), ConfigError> {
    let ok = v
        .as_object()
        .and_then(|o| {
            Some((
                o.get("keyVault")?.as_object()?.get("id")?,
                o.get("secretName")?,
            ))
        })
        .is_some();
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(
            "A Key Vault reference needs 'keyVault.id' and 'secretName'.",
        ))
    }
}

/// Overlays `input` items on `defaults` (property by property, case-insensitively).
pub fn merge_config(defaults: &Object, input: &Object) -> Object {
    let mut out = defaults.clone();
    for (k, v) in input {
        out.insert_ci(k.clone(), v.clone());
    }
    out
}

/// Normalises a whole alias value (an object of properties, or a typed `{type: object|inherit, value}` entry).
/// `inherit` resolves through `parent` (alias → the parent's effective config).
pub fn normalize_alias_input(
    value: &Value,
    parent: &dyn Fn(&str) -> Option<Object>,
) -> Result<Object, ConfigError> {
    if let Value::Unevaluated(_) = value {
        // The whole config is known at deployment time only: nothing to overlay now.
        return Ok(Object::new());
    }
    let Some(o) = value.as_object() else {
        return Err(ConfigError::new(
            "An extension config must be an object of config properties.",
        ));
    };
    if let Some(ty) = o.get("type").and_then(Value::as_str)
        && o.contains_key("value")
        && o.len() == 2
    {
        if ty.eq_ignore_ascii_case("inherit") {
            let Some(alias) = o.get("value").and_then(Value::as_str) else {
                return Err(ConfigError::new(
                    "An 'inherit' extension config needs the parent alias as 'value'.",
                ));
            };
            return parent(alias).ok_or_else(|| {
                ConfigError::new(format!(
                    "The parent deployment has no extension with alias '{alias}' to inherit."
                ))
            });
        }
        if ty.eq_ignore_ascii_case("object")
            && let Some(Value::Object(props)) = o.get("value")
        {
            return normalize_properties(props);
        }
    }
    normalize_properties(o)
}

/// Normalises every property of one alias's config.
pub fn normalize_properties(props: &Object) -> Result<Object, ConfigError> {
    let mut out = Object::new();
    for (k, v) in props {
        out.insert(k.clone(), normalize_property(k, v)?);
    }
    Ok(out)
}

/// Checks an alias's effective config against its declaration: required properties present (at the top level or
/// under `auth`; error [`INVALID_CONFIG`]), input properties the declared schema names (warning
/// [`UNDECLARED_CONFIG_PROPERTY`]), no seed 003 `UserProvided` auth (warning [`USER_PROVIDED_AUTH`]). `input` is
/// what the deployment gave (before defaults); `None` when the config is known at deployment time only.
pub fn check_config(
    decl: &ExtensionDecl,
    effective: &Object,
    input: Option<&Object>,
) -> Vec<ConfigFinding> {
    let mut out = Vec::new();
    let Some(input) = input else {
        return out;
    };
    let auth = effective.get(AUTH);
    let group = auth.and_then(Value::as_object).filter(|a| !is_item(a));
    // An `auth` given as one credential (seed 003) is the extension's secure credential.
    let credential = auth.is_some() && group.is_none();
    for required in &decl.required_properties {
        let secure = decl
            .secure_properties
            .iter()
            .any(|s| s.eq_ignore_ascii_case(required));
        let supplied = effective.contains_key(required)
            || group.is_some_and(|a| a.contains_key(required))
            || (credential && secure);
        if !supplied {
            out.push(ConfigFinding {
                code: INVALID_CONFIG,
                property: required.clone(),
                message: format!(
                    "The extension '{}' ({} {}) requires the config property '{required}', which the deployment's extensionConfigs do not supply and the declaration does not default; supply it{}.",
                    decl.alias,
                    decl.name,
                    decl.version,
                    if secure {
                        " under 'auth' as a Key Vault reference or a list* output"
                    } else {
                        " as { \"value\": ... }, or give it a defaultValue in the declaration"
                    }
                ),
                error: true,
            });
        }
    }
    if let Some(declared) = &decl.declared_properties {
        let known = |name: &str| declared.iter().any(|d| d.eq_ignore_ascii_case(name));
        let mut undeclared: Vec<String> = input
            .keys()
            .filter(|k| !k.eq_ignore_ascii_case(AUTH) && !known(k))
            .cloned()
            .collect();
        if let Some(Value::Object(group)) = input.get(AUTH)
            && !is_item(group)
        {
            undeclared.extend(
                group
                    .keys()
                    .filter(|k| !known(k))
                    .map(|k| format!("{AUTH}.{k}")),
            );
        }
        for property in undeclared {
            out.push(ConfigFinding {
                code: UNDECLARED_CONFIG_PROPERTY,
                message: format!(
                    "The extension '{}' ({} {}) declares no config property '{property}'; remove it or correct its name (declared: {}).",
                    decl.alias,
                    decl.name,
                    decl.version,
                    declared.join(", ")
                ),
                property,
                error: false,
            });
        }
    }
    if let Some(Value::Object(item)) = input.get(AUTH)
        && item
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("UserProvided"))
    {
        out.push(ConfigFinding {
            code: USER_PROVIDED_AUTH,
            property: AUTH.to_string(),
            message: format!(
                "The auth of extension '{}' has type 'UserProvided': a deployment stack can neither store user-provided credentials nor ask for them when it deletes resources; put the secret in Key Vault and use auth type 'KeyVaultSecret' (or a keyVaultReference).",
                decl.alias
            ),
            error: false,
        });
    }
    out
}

/// One finding of [`check_config`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFinding {
    pub code: &'static str,
    /// Dotted property path under the alias.
    pub property: String,
    pub message: String,
    /// An error for every deployment (else a warning that refuses only a deployment stack).
    pub error: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: serde_json::Value) -> serde_json::Value {
        normalize_config_item(&Value::from(v)).unwrap().to_json()
    }

    #[test]
    fn item_forms() {
        assert_eq!(norm(json!({"value": 1})), json!({"value": 1}));
        let kv = json!({"keyVault": {"id": "/kv"}, "secretName": "s"});
        assert_eq!(
            norm(json!({"keyVaultReference": kv})),
            json!({"keyVaultReference": kv})
        );
        assert_eq!(
            norm(json!({"reference": kv})),
            json!({"keyVaultReference": kv})
        );
        assert_eq!(
            norm(json!({"type": "string", "value": "x"})),
            json!({"value": "x"})
        );
        assert_eq!(
            norm(
                json!({"type": "armApiCall", "apiCall": {"method": "POST", "resourceId": "/r", "apiVersion": "v", "path": "listCredential", "valueJsonPath": "$.a"}})
            ),
            json!({"apiReference": {"method": "POST", "armResourceId": "/r", "apiVersion": "v", "action": "listCredential", "responseValuePath": "$.a"}})
        );
        assert!(normalize_config_item(&Value::from(json!({"keyVaultReference": {}}))).is_err());
        // Bare values (seed 003, a module's createObject form) are literals; so is an object of other keys.
        assert_eq!(norm(json!("x")), json!({"value": "x"}));
        assert_eq!(norm(json!({"a": 1})), json!({"value": {"a": 1}}));
    }

    #[test]
    fn wrappers_are_mutually_exclusive() {
        let kv = json!({"keyVault": {"id": "/kv"}, "secretName": "s"});
        for item in [
            json!({"value": "x", "keyVaultReference": kv}),
            json!({"value": "x", "apiReference": {"armResourceId": "/r"}}),
            json!({"reference": kv, "runtimeReference": {}}),
        ] {
            let e = normalize_config_item(&Value::from(item)).unwrap_err();
            assert!(e.message.contains("exactly one"), "{e}");
        }
    }

    fn property(name: &str, v: serde_json::Value) -> Result<serde_json::Value, ConfigError> {
        normalize_property(name, &Value::from(v)).map(|v| v.to_json())
    }

    #[test]
    fn auth_forms() {
        let kv = json!({"keyVault": {"id": "/kv"}, "secretName": "s"});
        // Seed 000: a group of secure properties, nested groups kept.
        assert_eq!(
            property(
                "auth",
                json!({"kubeConfig": {"keyVaultReference": kv}, "inner": {"token": "t"}})
            )
            .unwrap(),
            json!({"kubeConfig": {"keyVaultReference": kv}, "inner": {"token": {"value": "t"}}})
        );
        // Seed 003: the one credential.
        assert_eq!(
            property(
                "auth",
                json!({"type": "KeyVaultSecret", "keyVaultId": "/kv", "secretName": "s"})
            )
            .unwrap(),
            json!({"keyVaultReference": kv})
        );
        assert_eq!(
            property("auth", json!({"type": "UserProvided", "value": "raw"})).unwrap(),
            json!({"type": "UserProvided", "value": "raw"})
        );
        let e = property("auth", json!({"type": "KeyVaultSecret", "secretName": "s"})).unwrap_err();
        assert_eq!(e.property, "auth");
        // null is never valid, at the top and named by its path.
        let e = property("auth", json!(null)).unwrap_err();
        assert_eq!(e.property, "auth");
        assert!(e.message.contains("null"), "{e}");
        let e = property(
            "auth",
            json!({"kubeConfig": {"value": 1, "apiReference": {}}}),
        )
        .unwrap_err();
        assert_eq!(e.property, "auth.kubeConfig");
        assert_eq!(
            property_target("extensionConfigs.k8s", &e.property),
            "extensionConfigs.k8s.auth.kubeConfig"
        );
    }

    fn decl(template: serde_json::Value) -> ExtensionDecl {
        let (t, _) = crate::Template::parse(cairn_json::Node::from_json(&template));
        t.extensions[0].clone()
    }

    #[test]
    fn required_undeclared_and_user_provided() {
        let d = decl(
            json!({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
            "extensions": {"k8s": {"name": "Kubernetes", "version": "1.0.0", "config": {
                "namespace": {"type": "string", "defaultValue": "default"},
                "kubeConfig": {"type": "secureString"},
                "context": {"type": "string", "nullable": true}}}},
            "resources": {}}),
        );
        assert_eq!(d.required_properties, vec!["kubeConfig".to_string()]);
        let check = |input: serde_json::Value| {
            let input = normalize_properties(Value::from(input).as_object().unwrap()).unwrap();
            check_config(&d, &input, Some(&input))
                .into_iter()
                .map(|f| (f.code, f.property, f.error))
                .collect::<Vec<_>>()
        };
        assert_eq!(check(json!({"auth": {"kubeConfig": "k"}})), vec![]);
        assert_eq!(check(json!({"kubeConfig": "k", "namespace": "n"})), vec![]);
        assert_eq!(
            check(
                json!({"namespace": "n", "nmespace": "typo", "auth": {"kubeConfig": "k", "extra": 1}})
            ),
            vec![
                (UNDECLARED_CONFIG_PROPERTY, "nmespace".to_string(), false),
                (UNDECLARED_CONFIG_PROPERTY, "auth.extra".to_string(), false)
            ]
        );
        assert_eq!(
            check(json!({"namespace": "n"})),
            vec![(INVALID_CONFIG, "kubeConfig".to_string(), true)]
        );
        // Seed 003's one credential supplies the required secure property.
        assert_eq!(
            check(
                json!({"auth": {"type": "KeyVaultSecret", "keyVaultId": "/kv", "secretName": "s"}})
            ),
            vec![]
        );
        assert_eq!(
            check(json!({"kubeConfig": "k", "auth": {"type": "UserProvided", "value": "raw"}})),
            vec![(USER_PROVIDED_AUTH, "auth".to_string(), false)]
        );
        // A config known only at deployment time is not judged.
        assert!(check_config(&d, &Object::new(), None).is_empty());
        // A value-only declaration names no schema: nothing is dangling.
        let loose = decl(
            json!({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
            "extensions": {"k8s": {"name": "Kubernetes", "version": "1.0.0", "config": {
                "namespace": {"defaultValue": "default"}}}},
            "resources": {}}),
        );
        assert_eq!(loose.declared_properties, None);
        let input =
            normalize_properties(Value::from(json!({"anything": 1})).as_object().unwrap()).unwrap();
        assert!(check_config(&loose, &input, Some(&input)).is_empty());
    }

    #[test]
    fn inherit() {
        let parent = |a: &str| {
            (a == "k8s").then(|| {
                Object::from_iter([("ns".to_string(), Value::from(json!({"value": "x"})))])
            })
        };
        let got = normalize_alias_input(
            &Value::from(json!({"type": "inherit", "value": "k8s"})),
            &parent,
        )
        .unwrap();
        assert_eq!(Value::Object(got).to_json(), json!({"ns": {"value": "x"}}));
        assert!(
            normalize_alias_input(
                &Value::from(json!({"type": "inherit", "value": "nope"})),
                &parent
            )
            .is_err()
        );
    }
}

//! The persisted form of an extension config: a [`Config`] a stack may keep — literal values and *directives*
//! that re-fetch secrets when the stack needs the config again (to delete extensible resources), never the
//! secrets themselves.
//!
//! The one parser (`cairn_config::parse`) reads every form the seed designs used. A stack then refuses what it
//! could not supply again when it deletes, with an error naming the alias, the property and the fix:
//!
//! | Form | Why refused |
//! |---|---|
//! | a secure literal: `{"type": "SecureString" \| "SecureObject", "value": ...}` | a stack never stores secrets |
//! | `{"type": "UserProvided", ...}` (seed 003 `auth`) | a raw credential: neither stored nor fetched again |
//! | `{"type": "SecureString"}` alone (a secure type without its directive) | nothing to fetch it again with |
//! | `{"type": "armApiCall"}` alone, or with the call's result as its value (seed 002 input) | the engine must record the call first |
//! | `{"type": ...}` alone otherwise | not an item |
//!
//! Errors never quote values.

use cairn_arm::ResourceId;
use cairn_arm::models::extension::ExtensionConfig;
use cairn_config::{
    Config, ConfigError as ParseError, ConfigErrorKind, ConfigInput, ConfigPath, ConfigValue,
    Directive, SecureOrigin,
};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An extension config as a stack persists it: literals and directives only. Serializes to the wire form
/// (`{"prop": {"value": ...} | {"keyVaultReference": ...} | {"apiReference": ...} | {group...}}`) and reads
/// back any form [`PersistedConfig::from_wire`] accepts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PersistedConfig(Config);

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

impl ConfigError {
    fn of(alias: &str, error: ParseError) -> Self {
        Self {
            alias: alias.to_owned(),
            property: error.property,
            kind: error.kind,
        }
    }
}

fn is_secure_type(declared: &str) -> bool {
    declared.eq_ignore_ascii_case("securestring") || declared.eq_ignore_ascii_case("secureobject")
}

/// Why a stack may not keep `value`, if it may not.
fn refusal(value: &ConfigValue) -> Option<ConfigErrorKind> {
    match value {
        ConfigValue::SecureLiteral(secure) => Some(match secure.origin() {
            SecureOrigin::UserProvided => ConfigErrorKind::UserProvidedAuth,
            SecureOrigin::Declared(declared) => ConfigErrorKind::SecureLiteral {
                declared_type: declared.clone(),
            },
        }),
        ConfigValue::Deferred(_) => Some(ConfigErrorKind::UnevaluatedExpression { form: "value" }),
        // A typed item that lost its value (`{"type": "SecureString"}`) reads as a plain object.
        ConfigValue::Literal(Value::Object(map)) if map.len() == 1 => {
            let declared = map
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("type"))
                .and_then(|(_, v)| v.as_str())?;
            Some(if is_secure_type(declared) {
                ConfigErrorKind::SecureWithoutDirective
            } else if declared.eq_ignore_ascii_case("armApiCall")
                || declared.eq_ignore_ascii_case("apiCall")
            {
                ConfigErrorKind::MissingField {
                    form: "armApiCall",
                    field: "apiCall",
                    fix: "record the call as an 'apiReference'",
                }
            } else {
                ConfigErrorKind::NotAnItem
            })
        }
        ConfigValue::Literal(_) | ConfigValue::Directive(_) | ConfigValue::Group(_) => None,
    }
}

/// The first value a stack may not keep, with its path.
fn first_refusal(config: &Config, path: &mut ConfigPath) -> Option<ConfigErrorKind> {
    for (name, value) in config.iter() {
        path.push(name.clone());
        let found = match value {
            ConfigValue::Group(group) => first_refusal(group, path),
            other => refusal(other),
        };
        if found.is_some() {
            return found;
        }
        path.pop();
    }
    None
}

impl PersistedConfig {
    /// A config a stack may keep: refuses secrets given literally and values it could not fetch again.
    pub fn from_config(alias: &str, config: Config) -> Result<Self, ConfigError> {
        let mut path = Vec::new();
        match first_refusal(&config, &mut path) {
            Some(kind) => Err(ConfigError {
                alias: alias.to_owned(),
                property: path.join("."),
                kind,
            }),
            None => Ok(Self(config)),
        }
    }

    /// Reads a config in any supported form (see `cairn_config::parse`). Alias-level `inherit` is refused here;
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
        let input = ConfigInput::parse(config).map_err(|e| ConfigError::of(alias, e))?;
        if let ConfigInput::Inherit(from) = &input
            && let Some(parent) = inherited(from)
        {
            return Ok(parent);
        }
        let config = input
            .into_config(&|_| None)
            .map_err(|e| ConfigError::of(alias, e))?;
        Self::from_config(alias, config)
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

    /// The config itself.
    pub fn config(&self) -> &Config {
        &self.0
    }

    /// The properties in order.
    pub fn properties(&self) -> &IndexMap<String, ConfigValue> {
        self.0.properties()
    }

    /// Whether there are no properties.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every directive with its property path, in order.
    pub fn directives(&self) -> Vec<(ConfigPath, &Directive)> {
        self.0.directives()
    }

    /// The ARM resources the directives read from (Key Vaults, resources whose actions are called): the
    /// resources an extension's credentials come from. De-duplicated, in order.
    pub fn credential_sources(&self) -> Vec<ResourceId> {
        self.0.credential_sources()
    }

    /// The wire form: `{"prop": {"value": v} | {"keyVaultReference": ...} | {"apiReference": ...} | {...group}}`.
    pub fn to_wire(&self) -> Value {
        self.0.to_wire()
    }

    /// The shipped API's flat item map (for `deploymentExtensions[].config`): grouped properties flattened to
    /// dotted names (`auth.kubeConfig`).
    pub fn to_arm(&self) -> ExtensionConfig {
        self.0.to_arm()
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

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_arm::models::common::{KeyVaultParameterReference, KeyVaultReference};
    use cairn_arm::models::extension::ApiReference;
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
            refused(json!({"runtimeReference": {"resourceId": AKS, "action": "listX"}})),
            ConfigErrorKind::MissingField {
                form: "runtimeReference",
                field: "propertyPath",
                ..
            }
        ));
        // Seed 001 names no apiVersion: kept, and called with the version the resource was deployed with.
        let persisted = PersistedConfig::from_wire(
            "k8s",
            &json!({"kubeConfig": {"runtimeReference": {"resourceId": AKS, "action": "listX", "propertyPath": "a"}}}),
        )
        .unwrap();
        assert_eq!(
            persisted.to_wire(),
            json!({"kubeConfig": {"apiReference": {"method": "POST", "armResourceId": AKS, "action": "listX",
                                                   "responseValuePath": "a"}}})
        );
        assert_eq!(
            PersistedConfig::from_wire("k8s", &persisted.to_wire()).unwrap(),
            persisted
        );
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
            assert_eq!(auth.get("kubeConfig"), Some(&kv("kc")));
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

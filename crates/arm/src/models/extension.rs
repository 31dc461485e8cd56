//! Bicep extension shapes in the deployments and stacks APIs: `extensionConfigs` inputs (alias → property →
//! item), config items with their directives (`value`, `keyVaultReference`, `apiReference`), and the
//! `extensions[]` / `deploymentExtensions[]` / `extension` references in responses, and REP 0004's
//! `deploymentProviderConfigs` request form.

use std::fmt;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::models::common::KeyVaultParameterReference;
use crate::models::parameters::Redacted;
use crate::wire::extensible_enum;

/// One extension's configuration: `{property: item}`.
pub type ExtensionConfig = IndexMap<String, DeploymentExtensionConfigItem>;

/// `extensionConfigs`: `{alias: {property: item}}`; the keys are the template's extension aliases.
pub type ExtensionConfigs = IndexMap<String, ExtensionConfig>;

/// REP 0004's spelling of `extensionConfigs` in a deployment request, `deploymentProviderConfigs` (also
/// `deploymentProviderConfigurations`): `{alias: {property: {value} | {reference: {keyVault, secretName}}}}`.
/// Kept as raw JSON because its items are not `extensionConfigs` items; the engine normalises them into
/// `extensionConfigs` before anything is stored. `Debug` shows the aliases only.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProviderConfigs(pub Map<String, Value>);

impl fmt::Debug for ProviderConfigs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, Redacted)))
            .finish()
    }
}

/// One config property: a literal `value`, or a directive to fetch it later (`keyVaultReference`, or the
/// REP 0006 `apiReference`). `type` is read-only (set in responses; dropped from the 2026-06-01 API).
/// `Debug` never prints `value`, which may be secret.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentExtensionConfigItem {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub item_type: Option<ExtensionConfigPropertyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_vault_reference: Option<KeyVaultParameterReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_reference: Option<ApiReference>,
    /// Every other key, kept as written: the members of a group (seed 000's reserved `auth` object,
    /// `"auth": {"kubeConfig": {"keyVaultReference": ...}}`) or the fields of seed 003's discriminated `auth`
    /// (`{"type": "KeyVaultSecret", "keyVaultId", "secretName"}`). Without them such a config would lose its
    /// contents between the request and the engine. `Debug` shows their names only.
    #[serde(flatten)]
    pub members: Map<String, Value>,
}

impl DeploymentExtensionConfigItem {
    /// A literal value.
    pub fn value(value: Value) -> Self {
        Self {
            value: Some(value),
            ..Self::default()
        }
    }

    /// Whether the item is declared secure (`SecureString` / `SecureObject`).
    pub fn is_secure(&self) -> bool {
        self.item_type
            .as_ref()
            .is_some_and(ExtensionConfigPropertyType::is_secure)
    }

    /// Whether the item is a directive (re-fetched when needed) rather than a literal value.
    pub fn is_directive(&self) -> bool {
        self.key_vault_reference.is_some() || self.api_reference.is_some()
    }
}

impl fmt::Debug for DeploymentExtensionConfigItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeploymentExtensionConfigItem")
            .field("type", &self.item_type)
            .field("value", &self.value.as_ref().map(|_| Redacted))
            .field("keyVaultReference", &self.key_vault_reference)
            .field("apiReference", &self.api_reference)
            .field("members", &self.members.keys().collect::<Vec<_>>())
            .finish()
    }
}

extensible_enum! {
    /// The declared type of a config property.
    pub enum ExtensionConfigPropertyType {
        String => "String",
        Int => "Int",
        Bool => "Bool",
        Array => "Array",
        Object => "Object",
        SecureString => "SecureString",
        SecureObject => "SecureObject",
    }
}

impl ExtensionConfigPropertyType {
    /// `SecureString` or `SecureObject`.
    pub fn is_secure(&self) -> bool {
        matches!(self, Self::SecureString | Self::SecureObject)
    }
}

/// REP 0006 `apiReference` directive: call an ARM API (e.g. `listClusterAdminCredentials`) and take one
/// value out of the response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiReference {
    /// The HTTP method, e.g. `POST`.
    pub method: String,
    pub arm_resource_id: String,
    /// The API version to call with. Empty (absent on the wire) means the version the resource was deployed
    /// with: seed 001's `runtimeReference` names none, and the resolver reads it where deployments record it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The action appended to the resource ID, e.g. `listClusterAdminCredentials`; empty (or absent) for a GET
    /// of the resource itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// A query string to add, e.g. `a=1&b=2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The JSON body of a `POST` action (a `list*()` call's third argument).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body: Option<Value>,
    /// Where the value is in the response, e.g. `kubeconfigs[0].value`.
    pub response_value_path: String,
}

/// An extension as responses describe it: deployments' `extensions[]` (with `alias`) and the `extension` of
/// output resources, operation targets and what-if changes; stacks' `deploymentExtensions[]` and resource
/// references. Identity is name + version + `configId`; `config` holds non-secret values and directives only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentExtension {
    /// The template alias (deployments only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The ARM id of the deployment whose template declared the alias (deployments only): a deployment's
    /// `extensions[]` lists its nested deployments' extensions too, keyed by `deploymentId` + `alias` (REP 0006).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    pub name: String,
    pub version: String,
    /// Returned by the extension; identifies the control plane the config points at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
    /// A hash of the config (2026-06-01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ExtensionConfig>,
}

impl DeploymentExtension {
    /// The same extension without alias, deployment and config: the form used inside resource references.
    pub fn reference(&self) -> Self {
        Self {
            alias: None,
            deployment_id: None,
            name: self.name.clone(),
            version: self.version.clone(),
            config_id: self.config_id.clone(),
            config_hash: None,
            config: None,
        }
    }

    /// Whether two extensions are the same control plane: same name (ignoring case), version and `configId`.
    pub fn same_identity(&self, other: &Self) -> bool {
        self.name.eq_ignore_ascii_case(&other.name)
            && self.version == other.version
            && self.config_id == other.config_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_items_read_all_directive_forms() {
        let config: ExtensionConfig = serde_json::from_value(json!({
            "namespace": {"value": "apps"},
            "kubeConfig": {"keyVaultReference": {"keyVault": {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv"}, "secretName": "kc"}},
            "token": {"type": "SecureString", "apiReference": {"method": "POST", "armResourceId": "/x", "apiVersion": "2024-02-01",
                "action": "listClusterAdminCredentials", "query": "a=1", "responseValuePath": "kubeconfigs[0].value"}}
        }))
        .unwrap();
        assert!(!config["namespace"].is_directive());
        assert!(config["kubeConfig"].is_directive());
        assert!(config["token"].is_secure() && config["token"].is_directive());
    }

    #[test]
    fn groups_and_seed_003_auth_keep_their_contents() {
        let body = json!({
            "auth": {"kubeConfig": {"keyVaultReference": {"keyVault": {"id": "/kv"}, "secretName": "kc"}},
                     "token": {"value": "s3cret"}},
            "legacy": {"type": "KeyVaultSecret", "keyVaultId": "/kv", "secretName": "kc"},
            "namespace": {"value": "apps"}
        });
        let config: ExtensionConfig = serde_json::from_value(body.clone()).unwrap();
        assert!(config["auth"].value.is_none() && !config["auth"].is_directive());
        assert_eq!(config["auth"].members.len(), 2);
        assert!(config["namespace"].members.is_empty());
        assert_eq!(serde_json::to_value(&config).unwrap(), body);
        let shown = format!("{:?}", config["auth"]);
        assert!(
            shown.contains("kubeConfig") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn debug_hides_values() {
        let item = DeploymentExtensionConfigItem::value(json!("kubeconfig-contents"));
        assert!(!format!("{item:?}").contains("kubeconfig-contents"));
    }

    #[test]
    fn provider_configs_debug_shows_aliases_only() {
        let configs: ProviderConfigs = serde_json::from_value(
            json!({"k8s": {"kubeConfig": {"value": "kubeconfig-contents"}}}),
        )
        .unwrap();
        let shown = format!("{configs:?}");
        assert!(shown.contains("k8s") && !shown.contains("kubeconfig-contents"));
    }

    #[test]
    fn identity_ignores_alias_and_config() {
        let a: DeploymentExtension = serde_json::from_value(json!({"alias": "k8s", "deploymentId": "/d", "name": "Kubernetes", "version": "1.0.0", "configId": "X", "config": {}})).unwrap();
        assert_eq!(a.deployment_id.as_deref(), Some("/d"));
        let b = a.reference();
        assert!(a.same_identity(&b));
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            json!({"name": "Kubernetes", "version": "1.0.0", "configId": "X"})
        );
    }
}

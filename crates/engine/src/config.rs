//! Extension configs at call time: every wrapper item of an effective config (`{value}`, `{keyVaultReference}`,
//! `{apiReference}`) is resolved and the config unwrapped to the flat object an extension receives; and the
//! non-secret view of a config (non-secure values and directives) that stack-initiated deployment records show.

use std::sync::Arc;

use cairn_arm::models::extension::{DeploymentExtensionConfigItem, ExtensionConfig as ArmConfig};
use cairn_arm::{ErrorDetail, ResourceId};
use cairn_host::ExtensionConfig;
use cairn_store::{ExposeSecret, Store};
use cairn_template::config::{AUTH, is_item_keys};
use serde_json::{Map, Value};

use crate::inflight::LocalFuture;
use crate::provider::Providers;
use crate::provider::api::{ApiCall, ApiMethod, call_api};
use crate::secrets::{SecretReference, read_key_vault_secret};

/// The code of config resolution failures that are not Key Vault's.
pub const CONFIG_FAILED: &str = "InvalidExtensionConfig";

fn config_error(alias: &str, property: &str, reason: impl std::fmt::Display) -> ErrorDetail {
    ErrorDetail::new(
        CONFIG_FAILED,
        format!("The config property '{property}' of extension '{alias}' could not be resolved: {reason}"),
    )
    .with_target(format!("extensionConfigs.{alias}.{property}"))
}

/// Resolves every wrapper of `wrappers` (property → item) into the config for the extension call: items become
/// their values; a group (the reserved `auth` object of seed 000) becomes an object of its members' values, so
/// `{auth: {kubeConfig: {keyVaultReference}}}` reaches the extension as `{auth: {kubeConfig: "..."}}`.
pub async fn resolve_config(
    store: &dyn Store,
    providers: &Providers,
    alias: &str,
    wrappers: &Map<String, Value>,
) -> Result<ExtensionConfig, ErrorDetail> {
    let flat = resolve_members(store, providers, alias, "", wrappers).await?;
    Ok(ExtensionConfig::new(flat))
}

/// The values of one level of a config: `prefix` is the dotted path of the group (empty at the top).
fn resolve_members<'a>(
    store: &'a dyn Store,
    providers: &'a Providers,
    alias: &'a str,
    prefix: &'a str,
    members: &'a Map<String, Value>,
) -> LocalFuture<'a, Result<Map<String, Value>, ErrorDetail>> {
    Box::pin(async move {
        let mut out = Map::new();
        for (name, item) in members {
            let property = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            let Some(fields) = item.as_object() else {
                return Err(config_error(
                    alias,
                    &property,
                    "the item is not a { value | keyVaultReference | apiReference } object.",
                ));
            };
            let value = if !is_item_keys(fields.keys().map(String::as_str)) {
                Value::Object(resolve_members(store, providers, alias, &property, fields).await?)
            } else {
                resolve_item(store, providers, alias, &property, fields).await?
            };
            out.insert(name.clone(), value);
        }
        Ok(out)
    })
}

/// One wrapper item's value.
async fn resolve_item(
    store: &dyn Store,
    providers: &Providers,
    alias: &str,
    property: &str,
    fields: &Map<String, Value>,
) -> Result<Value, ErrorDetail> {
    if let Some(v) = fields.get("value") {
        Ok(v.clone())
    } else if let Some(kv) = fields.get("keyVaultReference") {
        let reference = SecretReference::from_json(kv).ok_or_else(|| {
            config_error(
                alias,
                property,
                "a Key Vault reference needs 'keyVault.id' and 'secretName'.",
            )
        })?;
        let secret = read_key_vault_secret(store, &reference)
            .await
            .map_err(|e| e.with_target(format!("extensionConfigs.{alias}.{property}")))?;
        Ok(Value::String(secret.expose_secret().to_string()))
    } else if let Some(api) = fields.get("apiReference") {
        api_reference(providers, alias, property, api).await
    } else {
        Err(config_error(
            alias,
            property,
            "the item holds none of 'value', 'keyVaultReference' and 'apiReference'.",
        ))
    }
}

/// `apiReference`: `GET` of `armResourceId` (or of `{armResourceId}/{action}`), or the `POST` action with its
/// `query` and `requestBody`; then `responseValuePath` in the response. Errors name the call, never a value.
async fn api_reference(
    providers: &Providers,
    alias: &str,
    property: &str,
    api: &Value,
) -> Result<Value, ErrorDetail> {
    let field = |k: &str| api.get(k).and_then(Value::as_str);
    let (Some(id), Some(api_version)) = (field("armResourceId"), field("apiVersion")) else {
        return Err(config_error(
            alias,
            property,
            "an apiReference needs 'armResourceId' and 'apiVersion' (and 'action' for a POST).",
        ));
    };
    let method_text = field("method").unwrap_or("POST");
    let Some(method) = ApiMethod::parse(method_text) else {
        return Err(config_error(
            alias,
            property,
            format!(
                "only GET and POST are evaluated (fetching a value must change nothing), not '{method_text}'."
            ),
        ));
    };
    let action = field("action").unwrap_or_default();
    let call_label = if action.is_empty() {
        format!("'{}' of '{id}'", method_text.to_ascii_uppercase())
    } else {
        format!("'{} {action}' on '{id}'", method_text.to_ascii_uppercase())
    };
    let resource_id = ResourceId::parse(id).map_err(|e| config_error(alias, property, e))?;
    let call = ApiCall {
        method,
        resource_id: &resource_id,
        api_version,
        action: Some(action),
        query: field("query"),
        body: api.get("requestBody").filter(|b| !b.is_null()),
    };
    let response = call_api(providers, &call).await.map_err(|e| {
        ErrorDetail::new(
            e.error.code(),
            format!(
                "The config property '{property}' of extension '{alias}' could not be resolved: the apiReference \
                 {call_label} (api-version {api_version}) failed: {}",
                e.error.message()
            ),
        )
        .with_target(format!("extensionConfigs.{alias}.{property}"))
    })?;
    match field("responseValuePath") {
        Some(path) if !path.is_empty() => value_at_path(&response, path)
            .filter(|v| !v.is_null())
            .cloned()
            .ok_or_else(|| {
                config_error(
                    alias,
                    property,
                    format!(
                        "the response of the apiReference {call_label} has nothing at '{path}'."
                    ),
                )
            }),
        _ => Ok(response),
    }
}

/// The value at a simple JSON path: `a.b[0].c`, optionally starting with `$` or `$.`; `['key']` is accepted.
pub fn value_at_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    let path = path.trim();
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut current = value;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let inner = after[..close].trim();
            rest = &after[close + 1..];
            current = if let Ok(index) = inner.parse::<usize>() {
                current.as_array()?.get(index)?
            } else {
                let key = inner.trim_matches(|c| c == '\'' || c == '"');
                member_ci(current, key)?
            };
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        current = member_ci(current, &rest[..end])?;
        rest = &rest[end..];
    }
    Some(current)
}

fn member_ci<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    let map = value.as_object()?;
    map.get(key).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

/// The config a stack-initiated deployment's record shows, which the stack persists to re-use when it deletes:
/// directives as given, and the value of every property not declared secure, whether or not the extension echoed
/// it (seed 000: non-secure values are resolved once and stored). A secure property given as a value is left out:
/// a record never holds a secret (the stacks lint refuses that shape before anything runs).
pub fn public_config(wrappers: &Map<String, Value>, secure: &[String]) -> ArmConfig {
    let mut out = ArmConfig::new();
    for (property, item) in wrappers {
        // Everything under the reserved `auth` is secure.
        let is_secure = property.eq_ignore_ascii_case(AUTH)
            || secure.iter().any(|s| s.eq_ignore_ascii_case(property));
        let Some(fields) = item.as_object() else {
            continue;
        };
        if !is_item_keys(fields.keys().map(String::as_str)) {
            group_directives(property, fields, &mut out);
            continue;
        }
        if let Some(kv) = fields.get("keyVaultReference")
            && let Ok(reference) = serde_json::from_value(kv.clone())
        {
            out.insert(
                property.clone(),
                DeploymentExtensionConfigItem {
                    key_vault_reference: Some(reference),
                    ..DeploymentExtensionConfigItem::default()
                },
            );
            continue;
        }
        if let Some(api) = fields.get("apiReference")
            && let Ok(reference) = serde_json::from_value(api.clone())
        {
            out.insert(
                property.clone(),
                DeploymentExtensionConfigItem {
                    api_reference: Some(reference),
                    ..DeploymentExtensionConfigItem::default()
                },
            );
            continue;
        }
        if is_secure {
            continue;
        }
        if let Some(value) = fields.get("value") {
            out.insert(
                property.clone(),
                DeploymentExtensionConfigItem::value(value.clone()),
            );
        }
    }
    out
}

/// The directives inside a group (the `auth` object), under dotted names (`auth.kubeConfig`) as the shipped API's
/// flat item map holds them; its values are secure, so never shown.
fn group_directives(prefix: &str, group: &Map<String, Value>, out: &mut ArmConfig) {
    for (name, item) in group {
        let Some(fields) = item.as_object() else {
            continue;
        };
        let property = format!("{prefix}.{name}");
        if !is_item_keys(fields.keys().map(String::as_str)) {
            group_directives(&property, fields, out);
            continue;
        }
        let directive = if let Some(kv) = fields.get("keyVaultReference") {
            serde_json::from_value(kv.clone())
                .ok()
                .map(|reference| DeploymentExtensionConfigItem {
                    key_vault_reference: Some(reference),
                    ..DeploymentExtensionConfigItem::default()
                })
        } else if let Some(api) = fields.get("apiReference") {
            serde_json::from_value(api.clone()).ok().map(|reference| {
                DeploymentExtensionConfigItem {
                    api_reference: Some(reference),
                    ..DeploymentExtensionConfigItem::default()
                }
            })
        } else {
            None
        };
        if let Some(directive) = directive {
            out.insert(property, directive);
        }
    }
}

/// Providers are shared with spawned calls.
pub type SharedProviders = Arc<Providers>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        let doc = json!({"kubeconfigs": [{"name": "a", "value": "xyz"}], "Weird": {"k.x": 1}});
        assert_eq!(
            value_at_path(&doc, "kubeconfigs[0].value"),
            Some(&json!("xyz"))
        );
        assert_eq!(
            value_at_path(&doc, "$.kubeconfigs[0].name"),
            Some(&json!("a"))
        );
        assert_eq!(value_at_path(&doc, "weird['k.x']"), Some(&json!(1)));
        assert_eq!(value_at_path(&doc, "kubeconfigs[3]"), None);
        assert_eq!(value_at_path(&doc, ""), Some(&doc));
    }

    #[test]
    fn public_config_shows_auth_directives_and_never_its_values() {
        let kv = json!({"keyVault": {"id": "/kv"}, "secretName": "k"});
        let wrappers = json!({
            "namespace": {"value": "apps"},
            "auth": {"kubeConfig": {"keyVaultReference": kv}, "token": {"value": "s3cret"}},
        });
        let out = public_config(wrappers.as_object().unwrap(), &[]);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"namespace": {"value": "apps"}, "auth.kubeConfig": {"keyVaultReference": kv}})
        );
        // Seed 003's user-provided credential is a value under `auth`: never shown.
        let wrappers = json!({"auth": {"type": "UserProvided", "value": "s3cret"}});
        let out = public_config(wrappers.as_object().unwrap(), &[]);
        assert!(out.is_empty());
    }

    #[test]
    fn public_config_keeps_directives_and_non_secure_values_echoed_or_not() {
        let wrappers = json!({
            "namespace": {"value": "apps"},
            "region": {"value": {"name": "west", "zones": [1, 2]}},
            "kube": {"keyVaultReference": {"keyVault": {"id": "/kv"}, "secretName": "k"}},
            "cred": {"apiReference": {"method": "POST", "armResourceId": "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/kv/secrets/s",
                                      "apiVersion": "2023-07-01", "action": "listValue", "requestBody": {"version": "v1"},
                                      "responseValuePath": "value"}},
            "declaredSecure": {"value": "s3cret"},
        });
        let out = public_config(
            wrappers.as_object().unwrap(),
            &["declaredSecure".to_string()],
        );
        let text = serde_json::to_value(&out).unwrap();
        assert_eq!(
            text,
            json!({"namespace": {"value": "apps"},
                   "region": {"value": {"name": "west", "zones": [1, 2]}},
                   "kube": {"keyVaultReference": {"keyVault": {"id": "/kv"}, "secretName": "k"}},
                   "cred": wrappers["cred"]})
        );
        assert!(!text.to_string().contains("s3cret"));
    }
}

//! Extension configs at call time: every wrapper item of an effective config (`{value}`, `{keyVaultReference}`,
//! `{apiReference}`) is resolved and the config unwrapped to the flat object an extension receives; and the
//! non-secret view of a config (values the extension echoed, plus directives) that stack-initiated deployment
//! records show.

use std::sync::Arc;

use cairn_arm::models::extension::{DeploymentExtensionConfigItem, ExtensionConfig as ArmConfig};
use cairn_arm::{ErrorDetail, ResourceId};
use cairn_host::{EchoedConfig, ExtensionConfig};
use cairn_store::{ExposeSecret, Store};
use cairn_template::config::{AUTH, is_item_keys};
use serde_json::{Map, Value};

use crate::inflight::LocalFuture;
use crate::provider::Providers;
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

/// `apiReference`: the provider action on `armResourceId`, then `responseValuePath` in its response.
async fn api_reference(
    providers: &Providers,
    alias: &str,
    property: &str,
    api: &Value,
) -> Result<Value, ErrorDetail> {
    let field = |k: &str| api.get(k).and_then(Value::as_str);
    let (Some(id), Some(api_version), Some(action)) =
        (field("armResourceId"), field("apiVersion"), field("action"))
    else {
        return Err(config_error(
            alias,
            property,
            "an apiReference needs 'armResourceId', 'apiVersion' and 'action'.",
        ));
    };
    if let Some(method) = field("method")
        && !method.eq_ignore_ascii_case("POST")
    {
        return Err(config_error(
            alias,
            property,
            format!("only POST actions are supported, not '{method}'."),
        ));
    }
    let id = ResourceId::parse(id).map_err(|e| config_error(alias, property, e))?;
    let provider = providers
        .require(&id.resource_type(), api_version)
        .map_err(|e| *e.error)?;
    let response = provider
        .action(&id, api_version, action, None)
        .await
        .map_err(|e| *e.error)?;
    match field("responseValuePath") {
        Some(path) if !path.is_empty() => {
            value_at_path(&response, path).cloned().ok_or_else(|| {
                config_error(
                    alias,
                    property,
                    format!("the response of '{action}' has nothing at '{path}'."),
                )
            })
        }
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

/// The config a stack-initiated deployment's record shows: directives as given, and the values of the properties
/// the extension echoed back (so not secret) unless declared secure. Nothing else.
pub fn public_config(
    wrappers: &Map<String, Value>,
    echoed: Option<&EchoedConfig>,
    secure: &[String],
) -> ArmConfig {
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
        if let Some(value) = echoed.and_then(|e| e.0.get(property)) {
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
        let echoed = EchoedConfig(
            json!({"namespace": "apps", "auth": {"kubeConfig": "kube-secret", "token": "s3cret"}})
                .as_object()
                .unwrap()
                .clone(),
        );
        let out = public_config(wrappers.as_object().unwrap(), Some(&echoed), &[]);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"namespace": {"value": "apps"}, "auth.kubeConfig": {"keyVaultReference": kv}})
        );
        // Seed 003's user-provided credential is a value under `auth`: never shown, even when echoed.
        let wrappers = json!({"auth": {"type": "UserProvided", "value": "s3cret"}});
        let echoed = EchoedConfig(json!({"auth": "s3cret"}).as_object().unwrap().clone());
        let out = public_config(wrappers.as_object().unwrap(), Some(&echoed), &[]);
        assert!(out.is_empty());
    }

    #[test]
    fn public_config_keeps_directives_and_echoed_values_only() {
        let wrappers = json!({
            "namespace": {"value": "apps"},
            "token": {"value": "s3cret"},
            "kube": {"keyVaultReference": {"keyVault": {"id": "/kv"}, "secretName": "k"}},
            "declaredSecure": {"value": "x"},
        });
        let echoed = EchoedConfig(
            json!({"namespace": "apps", "declaredSecure": "x"})
                .as_object()
                .unwrap()
                .clone(),
        );
        let out = public_config(
            wrappers.as_object().unwrap(),
            Some(&echoed),
            &["declaredSecure".to_string()],
        );
        let text = serde_json::to_value(&out).unwrap();
        assert_eq!(
            text,
            json!({"namespace": {"value": "apps"},
                   "kube": {"keyVaultReference": {"keyVault": {"id": "/kv"}, "secretName": "k"}}})
        );
    }
}

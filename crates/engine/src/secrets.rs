//! Secrets: reading Key Vault secrets for parameter references and (through [`crate::LocalResolver`])
//! `keyVaultReference` config items, and sealing
//! deployment requests before they are stored (secure parameter values and extension-config values go to the
//! store's encrypted secret API; the stored request holds `SecretRef` markers instead) and unsealing them for a
//! resumed run.

use cairn_arm::ErrorDetail;
use cairn_store::{
    ExposeSecret, SecretOwner, SecretRef, SecretString, SecretVersionInfo, Store, StoreError,
    StoreResult, Timestamp,
};
use serde_json::{Map, Value};

/// The code of every Key Vault resolution failure (ARM's for parameter references).
pub const KEY_VAULT_FAILED: &str = "KeyVaultParameterReferenceSecretRetrieveFailed";

/// A Key Vault secret reference in plain form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretReference {
    pub vault_id: String,
    pub secret_name: String,
    pub secret_version: Option<String>,
}

impl SecretReference {
    /// The cache key (vault and name compare ignoring case, as Key Vault does).
    pub fn cache_key(&self) -> String {
        format!(
            "{}|{}|{}",
            self.vault_id.to_ascii_lowercase(),
            self.secret_name.to_ascii_lowercase(),
            self.secret_version.as_deref().unwrap_or("")
        )
    }
}

/// Why a secret could not be read from the local Key Vault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VaultReadFailure {
    /// The store failed (the cause is logged, not returned: it may name internals).
    Unreadable,
    /// No such vault, secret or version.
    Missing,
    /// The version is disabled, expired or not yet valid: why.
    Unusable(&'static str),
}

impl VaultReadFailure {
    /// Why, as a sentence.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::Unreadable => "the vault could not be read.",
            Self::Missing => "the vault or the secret (version) does not exist.",
            Self::Unusable(reason) => reason,
        }
    }

    /// The failure as a config resolver reports it.
    pub(crate) fn into_resolve_failure(self) -> cairn_config::ResolveFailure {
        let message = self.reason().trim_end_matches('.').to_owned();
        match self {
            Self::Missing => cairn_config::ResolveFailure::NotFound,
            Self::Unusable(_) => cairn_config::ResolveFailure::Forbidden { message },
            Self::Unreadable => cairn_config::ResolveFailure::Failed {
                code: None,
                message,
            },
        }
    }
}

/// The value of a secret from the local Key Vault: the version named, else the current one; it must be enabled
/// and within its `nbf`/`exp`.
pub(crate) async fn read_vault_secret(
    store: &dyn Store,
    vault_id: &str,
    name: &str,
    version: Option<&str>,
) -> Result<SecretString, VaultReadFailure> {
    let found = store
        .get_vault_secret(vault_id, name, version)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "key vault read failed");
            VaultReadFailure::Unreadable
        })?;
    let secret = found.ok_or(VaultReadFailure::Missing)?;
    match unusable_reason(&secret.info, Timestamp::now()) {
        Some(reason) => Err(VaultReadFailure::Unusable(reason)),
        None => Ok(secret.value),
    }
}

/// The value of a parameter's Key Vault reference from the local Key Vault.
pub async fn read_key_vault_secret(
    store: &dyn Store,
    reference: &SecretReference,
) -> Result<SecretString, ErrorDetail> {
    read_vault_secret(
        store,
        &reference.vault_id,
        &reference.secret_name,
        reference.secret_version.as_deref(),
    )
    .await
    .map_err(|failure| {
        ErrorDetail::new(
            KEY_VAULT_FAILED,
            format!(
                "Unable to retrieve secret '{}' from the Key Vault '{}': {}",
                reference.secret_name,
                reference.vault_id,
                failure.reason()
            ),
        )
    })
}

/// Why a secret version may not be read now (disabled, expired, not yet valid); `None` when it may.
pub(crate) fn unusable_reason(info: &SecretVersionInfo, now: Timestamp) -> Option<&'static str> {
    if !info.enabled {
        return Some("the secret version is disabled.");
    }
    if info.expires.is_some_and(|exp| exp <= now) || info.not_before.is_some_and(|nbf| nbf > now) {
        return Some("the secret version is not valid at this time.");
    }
    None
}

/// A stored document's secret: its JSON serialized into the secret store.
pub(crate) async fn seal_value(
    store: &dyn Store,
    owner: &SecretOwner,
    name: &str,
    value: &Value,
) -> StoreResult<Value> {
    let text = SecretString::from(value.to_string());
    let reference = store
        .put_secret(owner, name, &text, Timestamp::now())
        .await?;
    Ok(reference.to_marker())
}

/// Replaces, in a request's `properties` JSON, the `value` of every parameter named in `secure_parameters` and the
/// `value` of every extension-config item with a secret marker, storing the values under `owner`.
pub async fn seal_request(
    store: &dyn Store,
    owner: &SecretOwner,
    properties: &mut Value,
    secure_parameters: &[String],
) -> StoreResult<()> {
    if let Some(Value::Object(params)) = properties.get_mut("parameters") {
        for (name, entry) in params.iter_mut() {
            if !secure_parameters
                .iter()
                .any(|s| s.eq_ignore_ascii_case(name))
            {
                continue;
            }
            if let Some(value) = entry.get_mut("value") {
                *value = seal_value(store, owner, &format!("parameters/{name}"), value).await?;
            }
        }
    }
    if let Some(Value::Object(configs)) = properties.get_mut("extensionConfigs") {
        for (alias, config) in configs.iter_mut() {
            let Value::Object(items) = config else {
                // A whole-alias expression in a nested template evaluates to an object; anything else holds no
                // value to protect, but may still hold one: store it whole.
                if !config.is_null() {
                    *config =
                        seal_value(store, owner, &format!("extensionConfigs/{alias}"), config)
                            .await?;
                }
                continue;
            };
            for (prop, item) in items.iter_mut() {
                match item {
                    Value::Object(fields) => {
                        if let Some(value) = fields.get_mut("value") {
                            *value = seal_value(
                                store,
                                owner,
                                &format!("extensionConfigs/{alias}/{prop}"),
                                value,
                            )
                            .await?;
                        }
                    }
                    other => {
                        *other = seal_value(
                            store,
                            owner,
                            &format!("extensionConfigs/{alias}/{prop}"),
                            other,
                        )
                        .await?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Replaces every secret marker in `value` with the stored secret.
pub async fn unseal(store: &dyn Store, value: &mut Value) -> StoreResult<()> {
    let mut markers = Vec::new();
    collect_markers(value, &mut Vec::new(), &mut markers);
    for (path, reference) in markers {
        let secret = store.get_secret(&reference).await?;
        let parsed: Value = serde_json::from_str(secret.expose_secret()).map_err(|_| {
            StoreError::corrupt(
                cairn_store::Entity::Secret,
                "a sealed request value is not JSON",
            )
        })?;
        if let Some(slot) = pointer_mut(value, &path) {
            *slot = parsed;
        }
    }
    Ok(())
}

enum Step {
    Key(String),
    Index(usize),
}

fn collect_markers(value: &Value, path: &mut Vec<Step>, out: &mut Vec<(Vec<String>, SecretRef)>) {
    if let Some(reference) = SecretRef::from_marker(value) {
        out.push((
            path.iter()
                .map(|s| match s {
                    Step::Key(k) => k.clone(),
                    Step::Index(i) => i.to_string(),
                })
                .collect(),
            reference,
        ));
        return;
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(Step::Key(k.clone()));
                collect_markers(v, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(Step::Index(i));
                collect_markers(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn pointer_mut<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    let mut current = value;
    for step in path {
        current = match current {
            Value::Object(map) => map.get_mut(step)?,
            Value::Array(items) => items.get_mut(step.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Whether a JSON document holds any secret marker.
pub fn has_markers(value: &Value) -> bool {
    let mut found = Vec::new();
    collect_markers(value, &mut Vec::new(), &mut found);
    !found.is_empty()
}

/// A copy of `map` without the members named in `names` (ignoring case).
pub fn without(map: &Map<String, Value>, names: &[String]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !names.iter().any(|n| n.eq_ignore_ascii_case(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cache_keys_fold_vault_and_name() {
        let r = SecretReference {
            vault_id: "/V".into(),
            secret_name: "S".into(),
            secret_version: Some("abc".into()),
        };
        assert_eq!(r.cache_key(), "/v|s|abc");
    }

    #[test]
    fn marker_paths_cover_arrays_and_objects() {
        let doc = json!({"a": [{"$cairnSecretRef": "r1"}], "b": {"c": {"$cairnSecretRef": "r2"}}});
        let mut found = Vec::new();
        collect_markers(&doc, &mut Vec::new(), &mut found);
        let paths: Vec<Vec<String>> = found.into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            vec![
                vec!["a".to_string(), "0".into()],
                vec!["b".into(), "c".into()]
            ]
        );
        assert!(has_markers(&doc));
        assert!(!has_markers(&json!({"a": 1})));
    }
}

//! The local Key Vault provider: `Microsoft.KeyVault/vaults` and `vaults/secrets` as a real secret store. Secret
//! values go to the store's Key Vault tables (encrypted at rest, versioned) and never come back out of this provider:
//! responses carry attributes and URIs only, as ARM's do. Values are read by the engine's Key Vault resolver
//! ([`crate::secrets`]) for parameter references, `keyVaultReference` config items and `getSecret`, and by the one
//! action a secret answers, cairn's `listValue` (`POST {secret id}/listValue`, so `listValue(secretId, apiVersion)`
//! in a template): the current value, or the version a `{"version": ...}` body names. It exists so a `list*()`
//! credential can be recorded as an `apiReference` directive and re-fetched by a stack.

use std::sync::Arc;

use cairn_arm::{ResourceId, ResourceIdKind};
use cairn_store::{
    ExposeSecret, NewSecretVersion, Precondition, SecretString, SecretVersionInfo, Store,
    StoreError, Timestamp, Vault, VaultRecord,
};
use serde_json::{Map, Value, json};

use super::{
    ProviderError, ProviderFuture, PutOutcome, ResourceProvider, member, tags_json, tags_of,
};

pub const VAULTS_TYPE: &str = "Microsoft.KeyVault/vaults";
pub const SECRETS_TYPE: &str = "Microsoft.KeyVault/vaults/secrets";
/// The action that returns a secret's value.
pub const LIST_VALUE_ACTION: &str = "listValue";

pub struct KeyVaultProvider {
    store: Arc<dyn Store>,
}

impl KeyVaultProvider {
    pub fn new(store: Arc<dyn Store>) -> Self {
        KeyVaultProvider { store }
    }
}

enum Target<'a> {
    Vault { name: &'a str },
    Secret { vault_id: String, name: &'a str },
}

fn target(id: &ResourceId) -> Result<Target<'_>, ProviderError> {
    let ty = id.resource_type();
    let names = id.names();
    if id.kind() == ResourceIdKind::Resource
        && ty.eq_ignore_ascii_case(VAULTS_TYPE)
        && let Some(name) = names.last()
    {
        return Ok(Target::Vault { name });
    }
    if id.kind() == ResourceIdKind::Resource
        && ty.eq_ignore_ascii_case(SECRETS_TYPE)
        && let (Some(parent), Some(name)) = (id.parent(), names.last())
    {
        return Ok(Target::Secret {
            vault_id: parent.to_string(),
            name,
        });
    }
    Err(ProviderError::bad_request(
        "InvalidResourceId",
        format!("'{id}' is not a Key Vault vault or secret ID."),
    ))
}

fn store_failure(what: &str, err: &StoreError) -> ProviderError {
    tracing::warn!(error = %err, "key vault provider: store failure");
    ProviderError::internal(what)
}

fn vault_uri(name: &str) -> String {
    format!("https://{}.vault.azure.net/", name.to_ascii_lowercase())
}

fn vault_json(record: &VaultRecord) -> Value {
    let v = &record.vault;
    let mut out = json!({
        "id": v.id,
        "name": v.name,
        "type": VAULTS_TYPE,
        "location": v.location,
        "properties": v.properties,
    });
    if !v.tags.is_empty() {
        out["tags"] = tags_json(&v.tags);
    }
    out
}

fn seconds(t: Timestamp) -> i64 {
    t.unix_millis() / 1000
}

fn secret_json(vault_id: &str, info: &SecretVersionInfo) -> Value {
    let vault_name = vault_id.rsplit('/').next().unwrap_or_default();
    let uri = format!("{}secrets/{}", vault_uri(vault_name), info.name);
    let mut attributes = Map::new();
    attributes.insert("enabled".into(), json!(info.enabled));
    if let Some(nbf) = info.not_before {
        attributes.insert("nbf".into(), json!(seconds(nbf)));
    }
    if let Some(exp) = info.expires {
        attributes.insert("exp".into(), json!(seconds(exp)));
    }
    attributes.insert("created".into(), json!(seconds(info.created_at)));
    attributes.insert("updated".into(), json!(seconds(info.updated_at)));
    let mut properties = Map::new();
    if let Some(ct) = &info.content_type {
        properties.insert("contentType".into(), json!(ct));
    }
    properties.insert("attributes".into(), Value::Object(attributes));
    properties.insert("secretUri".into(), json!(uri));
    properties.insert(
        "secretUriWithVersion".into(),
        json!(format!("{uri}/{}", info.version)),
    );
    let mut out = json!({
        "id": format!("{vault_id}/secrets/{}", info.name),
        "name": format!("{vault_name}/{}", info.name),
        "type": SECRETS_TYPE,
        "properties": Value::Object(properties),
    });
    if !info.tags.is_empty() {
        out["tags"] = tags_json(&info.tags);
    }
    out
}

fn timestamp_attribute(attributes: Option<&Value>, key: &str) -> Option<Timestamp> {
    attributes
        .and_then(|a| member(a, key))
        .and_then(Value::as_i64)
        .map(|s| Timestamp::from_unix_millis(s.saturating_mul(1000)))
}

impl KeyVaultProvider {
    async fn put_vault(
        &self,
        id: &ResourceId,
        name: &str,
        body: &Value,
    ) -> Result<PutOutcome, ProviderError> {
        let location = member(body, "location")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ProviderError::bad_request(
                    "LocationRequired",
                    "The location property is required for this definition.",
                )
            })?;
        let id_text = id.to_string();
        let existing = self
            .store
            .get_vault(&id_text)
            .await
            .map_err(|e| store_failure("read the vault", &e))?;
        let mut properties = match member(body, "properties") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        properties.insert("vaultUri".into(), json!(vault_uri(name)));
        properties.insert("provisioningState".into(), json!("Succeeded"));
        let vault = Vault {
            id: existing
                .as_ref()
                .map(|v| v.vault.id.clone())
                .unwrap_or(id_text),
            name: name.to_string(),
            location: location.to_string(),
            tags: tags_of(body),
            properties: Value::Object(properties),
        };
        let record = self
            .store
            .put_vault(vault, Precondition::Any, Timestamp::now())
            .await
            .map_err(|e| store_failure("write the vault", &e))?;
        Ok(PutOutcome {
            resource: vault_json(&record),
            created: existing.is_none(),
        })
    }

    async fn put_secret(
        &self,
        vault_id: &str,
        name: &str,
        body: &Value,
    ) -> Result<PutOutcome, ProviderError> {
        let properties = member(body, "properties");
        let value = properties
            .and_then(|p| member(p, "value"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ProviderError::bad_request(
                    "BadRequest",
                    "A Key Vault secret needs 'properties.value' (a string).",
                )
            })?;
        let content_type = properties
            .and_then(|p| member(p, "contentType"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let attributes = properties.and_then(|p| member(p, "attributes"));
        let enabled = attributes
            .and_then(|a| member(a, "enabled"))
            .and_then(Value::as_bool)
            .unwrap_or(true);
        if self
            .store
            .get_vault(vault_id)
            .await
            .map_err(|e| store_failure("read the vault", &e))?
            .is_none()
        {
            return Err(ProviderError::new(
                404,
                "ParentResourceNotFound",
                format!(
                    "Can not perform requested operation on nested resource. Parent resource '{}' not found.",
                    vault_id.rsplit('/').next().unwrap_or_default()
                ),
            ));
        }
        let latest = self
            .store
            .get_vault_secret(vault_id, name, None)
            .await
            .map_err(|e| store_failure("read the secret", &e))?;
        // Re-applying the same value keeps the current version, so a re-run deployment is idempotent.
        if let Some(latest) = &latest
            && latest.value.expose_secret() == value
            && latest.info.content_type == content_type
            && latest.info.enabled == enabled
        {
            return Ok(PutOutcome {
                resource: secret_json(vault_id, &latest.info),
                created: false,
            });
        }
        let info = self
            .store
            .set_vault_secret(NewSecretVersion {
                vault_id: vault_id.to_string(),
                name: name.to_string(),
                value: SecretString::from(value.to_string()),
                content_type,
                enabled,
                not_before: timestamp_attribute(attributes, "nbf"),
                expires: timestamp_attribute(attributes, "exp"),
                tags: tags_of(body),
                created_at: Timestamp::now(),
            })
            .await
            .map_err(|e| store_failure("write the secret", &e))?;
        Ok(PutOutcome {
            resource: secret_json(vault_id, &info),
            created: latest.is_none(),
        })
    }
}

impl KeyVaultProvider {
    /// `listValue`: `{value, version, contentType?}` of the current version, or of `body.version`.
    async fn list_value(
        &self,
        id: &ResourceId,
        vault_id: &str,
        name: &str,
        body: Option<&Value>,
    ) -> Result<Value, ProviderError> {
        let version = match body.and_then(|b| member(b, "version")) {
            None | Some(Value::Null) => None,
            Some(Value::String(v)) if !v.is_empty() => Some(v.as_str()),
            Some(_) => {
                return Err(ProviderError::bad_request(
                    "BadRequest",
                    "The listValue body's 'version' must be a non-empty string.",
                ));
            }
        };
        let secret = self
            .store
            .get_vault_secret(vault_id, name, version)
            .await
            .map_err(|e| store_failure("read the secret", &e))?
            .ok_or_else(|| ProviderError::not_found(id))?;
        if let Some(reason) = crate::secrets::unusable_reason(&secret.info, Timestamp::now()) {
            return Err(ProviderError::new(
                403,
                "SecretNotUsable",
                format!("The secret '{name}' cannot be read: {reason}"),
            ));
        }
        let mut out = json!({
            "value": secret.value.expose_secret(),
            "version": secret.info.version,
        });
        if let Some(ct) = &secret.info.content_type {
            out["contentType"] = json!(ct);
        }
        Ok(out)
    }
}

impl ResourceProvider for KeyVaultProvider {
    fn write_only_properties(&self, resource_type: &str) -> &'static [&'static str] {
        if resource_type.eq_ignore_ascii_case("Microsoft.KeyVault/vaults/secrets") {
            &["/properties/value"]
        } else {
            &[]
        }
    }

    fn put<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
        body: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome> {
        Box::pin(async move {
            match target(id)? {
                Target::Vault { name } => self.put_vault(id, name, body).await,
                Target::Secret { vault_id, name } => self.put_secret(&vault_id, name, body).await,
            }
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Value>> {
        Box::pin(async move {
            match target(id)? {
                Target::Vault { .. } => Ok(self
                    .store
                    .get_vault(&id.to_string())
                    .await
                    .map_err(|e| store_failure("read the vault", &e))?
                    .as_ref()
                    .map(vault_json)),
                Target::Secret { vault_id, name } => Ok(self
                    .store
                    .get_vault_secret(&vault_id, name, None)
                    .await
                    .map_err(|e| store_failure("read the secret", &e))?
                    .map(|s| secret_json(&vault_id, &s.info))),
            }
        })
    }

    fn delete<'a>(&'a self, id: &'a ResourceId, _api_version: &'a str) -> ProviderFuture<'a, bool> {
        Box::pin(async move {
            let result = match target(id)? {
                Target::Vault { .. } => self.store.delete_vault(&id.to_string()).await,
                Target::Secret { vault_id, name } => {
                    self.store.delete_vault_secret(&vault_id, name).await
                }
            };
            match result {
                Ok(()) => Ok(true),
                Err(StoreError::NotFound { .. }) => Ok(false),
                Err(e) => Err(store_failure("delete", &e)),
            }
        })
    }

    fn action<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
        action: &'a str,
        body: Option<&'a Value>,
    ) -> ProviderFuture<'a, Value> {
        Box::pin(async move {
            match target(id)? {
                Target::Secret { vault_id, name }
                    if action.eq_ignore_ascii_case(LIST_VALUE_ACTION) =>
                {
                    self.list_value(id, &vault_id, name, body).await
                }
                _ => Err(ProviderError::bad_request(
                    "InvalidResourceOperation",
                    format!(
                        "The resource type '{}' does not support the action '{action}'.",
                        id.resource_type()
                    ),
                )),
            }
        })
    }
}

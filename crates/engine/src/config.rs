//! Extension configs at call time: the engine's [`LocalResolver`] — Key Vault secrets from the store's vaults, API
//! references through the providers — which deployments, what-if and a stack's deletes resolve a config through
//! (`cairn_config::resolve_config`); how a deployment reports a config that cannot be resolved; and the non-secret
//! view of a config (non-secure values and directives) that stack-initiated deployment records show.

use cairn_arm::access::{Access, Action};
use cairn_arm::models::extension::ExtensionConfig as ArmConfig;
use cairn_arm::{ErrorDetail, ResourceId};
use cairn_config::{
    ApiRequest, Config, DirectiveError, DirectiveErrorKind, ResolveFailure, Resolver,
    SecretRequest, SecretValue,
};
use cairn_store::{ExposeSecret, ResourceKey, Store};
use cairn_template::config::stored_config;
use serde_json::Value;

use crate::provider::Providers;
use crate::provider::api::call_api;
use crate::secrets::{KEY_VAULT_FAILED, read_vault_secret};

/// Resolves config directives against the local control plane: a `keyVaultReference` reads the store's Key Vault
/// (an enabled version within its `nbf`/`exp`), an `apiReference` calls the providers
/// ([`crate::provider::api::call_api`]).
#[derive(Clone, Copy)]
pub struct LocalResolver<'a> {
    store: &'a dyn Store,
    providers: &'a Providers,
    access: &'a Access,
}

/// Reaches everything: a resolver's default.
const EVERYTHING: &Access = &Access {
    client: None,
    scopes: None,
};

impl<'a> LocalResolver<'a> {
    pub fn new(store: &'a dyn Store, providers: &'a Providers) -> Self {
        Self {
            store,
            providers,
            access: EVERYTHING,
        }
    }

    /// Resolves only what `access` reaches: a vault or a resource outside it is `Forbidden`, naming the scope.
    pub fn acting_for(self, access: &'a Access) -> Self {
        Self { access, ..self }
    }

    fn check(&self, action: Action, id: &str) -> Result<(), ResolveFailure> {
        self.access
            .check(action, id)
            .map_err(|error| ResolveFailure::Forbidden {
                message: error.detail().message().to_owned(),
            })
    }
}

impl Resolver for LocalResolver<'_> {
    async fn get_secret(&self, request: &SecretRequest) -> Result<SecretValue, ResolveFailure> {
        self.check(Action::Read, &request.vault_id.to_string())?;
        read_vault_secret(
            self.store,
            &request.vault_id.to_string(),
            &request.secret_name,
            request.secret_version.as_deref(),
        )
        .await
        .map(|secret| SecretValue::new(secret.expose_secret()))
        .map_err(|failure| failure.into_resolve_failure())
    }

    async fn call_api(&self, request: &ApiRequest) -> Result<Value, ResolveFailure> {
        self.check(Action::Invoke, &request.resource_id.to_string())?;
        let request = match &request.api_version {
            Some(_) => request.clone(),
            None => ApiRequest {
                api_version: Some(self.deployed_api_version(&request.resource_id).await?),
                ..request.clone()
            },
        };
        call_api(self.providers, &request)
            .await
            .map_err(provider_failure)
    }
}

impl LocalResolver<'_> {
    /// The API version `id` was deployed with, for a directive that names none (seed 001's `runtimeReference`):
    /// what the inventory recorded when a deployment last wrote it. A deployment and a stack's delete read the
    /// same row, so they call with the same version. A resource the inventory does not know is read once to
    /// tell "gone" (`NotFound`, as a call to it would answer) from "deployed elsewhere" (no version to use).
    async fn deployed_api_version(&self, id: &ResourceId) -> Result<String, ResolveFailure> {
        let text = id.to_string();
        let row = self
            .store
            .get_managed_resource(&ResourceKey::arm(&text))
            .await
            .map_err(|_| ResolveFailure::Failed {
                code: Some("InternalServerError".into()),
                message: "The inventory could not be read.".into(),
            })?;
        if let Some(version) = row
            .and_then(|row| row.resource.api_version)
            .filter(|v| !v.trim().is_empty())
        {
            return Ok(version);
        }
        let resource_type = id.resource_type();
        let provider = self
            .providers
            .require(&resource_type, "")
            .map_err(provider_failure)?;
        match provider.get(id, "").await.map_err(provider_failure)? {
            None => Err(ResolveFailure::NotFound),
            Some(_) => Err(ResolveFailure::Failed {
                code: Some(API_VERSION_UNKNOWN.into()),
                message: format!(
                    "The directive names no apiVersion and '{text}' was not deployed through cairn, so the version \
                     it was deployed with is unknown. Fix: give the directive an 'apiVersion'"
                ),
            }),
        }
    }
}

/// The code of a directive without `apiVersion` on a resource whose deployed version is unknown.
pub const API_VERSION_UNKNOWN: &str = "ExtensionConfigApiVersionUnknown";

/// A provider's failure as a resolver reports it: 404 not found, 401/403 forbidden, others failed.
fn provider_failure(error: crate::provider::ProviderError) -> ResolveFailure {
    match error.status {
        404 => ResolveFailure::NotFound,
        401 | 403 => ResolveFailure::Forbidden {
            message: error.error.message().to_owned(),
        },
        _ => ResolveFailure::Failed {
            code: Some(error.error.code().to_owned()),
            message: error.error.message().to_owned(),
        },
    }
}

/// How a deployment reports a config it cannot resolve: Key Vault failures with ARM's code for a secret a
/// deployment cannot read (`KeyVaultParameterReferenceSecretRetrieveFailed`), the others with their own code
/// (`ExtensionConfigApiCallFailed`, `ExtensionConfigValueNotFound`, `InvalidExtensionConfig`, ...); the message
/// names the alias, the property, the directive and the fix, never a value. Target
/// `extensionConfigs.{alias}.{property}`.
pub fn deployment_error(error: &DirectiveError) -> ErrorDetail {
    let detail = error.to_error_detail();
    match error.kind {
        DirectiveErrorKind::SecretNotFound { .. }
        | DirectiveErrorKind::SecretForbidden { .. }
        | DirectiveErrorKind::SecretFailed { .. } => ErrorDetail {
            code: Some(KEY_VAULT_FAILED.to_owned()),
            ..detail
        },
        _ => detail,
    }
}

/// The config a stack-initiated deployment's record shows, which the stack persists to re-use when it deletes:
/// directives as given (those inside `auth` too, under dotted names), and the value of every property not declared
/// secure, whether or not the extension echoed it (seed 000: non-secure values are resolved once and stored). The
/// rule is `cairn_template::config::stored_config`'s: a secret given as a value is never shown, and a stack-initiated
/// deployment holding one was refused before it ran (`ExtensionConfigNotStorable`), so nothing a stack needs is
/// left out here.
pub fn public_config(config: &Config, secure: &[String]) -> ArmConfig {
    stored_config(config, secure).0.to_arm()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_config::ConfigValue;
    use serde_json::json;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";

    fn config(value: Value) -> Config {
        Config::parse(&value).unwrap()
    }

    #[test]
    fn public_config_shows_auth_directives_and_never_its_values() {
        let kv = json!({"keyVault": {"id": VAULT}, "secretName": "k"});
        let given = config(json!({
            "namespace": {"value": "apps"},
            "auth": {"kubeConfig": {"keyVaultReference": kv}, "token": {"value": "s3cret"}},
        }));
        let out = public_config(&given, &[]);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"namespace": {"value": "apps"}, "auth.kubeConfig": {"keyVaultReference": kv}})
        );
        // Seed 003's user-provided credential is a value under `auth`: never shown.
        let given = config(json!({"auth": {"type": "UserProvided", "value": "s3cret"}}));
        assert!(public_config(&given, &[]).is_empty());
    }

    #[test]
    fn public_config_keeps_directives_and_non_secure_values_echoed_or_not() {
        let wrappers = json!({
            "namespace": {"value": "apps"},
            "region": {"value": {"name": "west", "zones": [1, 2]}},
            "kube": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "k"}},
            "cred": {"apiReference": {"method": "POST", "armResourceId": format!("{VAULT}/secrets/s"),
                                      "apiVersion": "2023-07-01", "action": "listValue", "requestBody": {"version": "v1"},
                                      "responseValuePath": "value"}},
            "declaredSecure": {"value": "s3cret"},
            "typedSecure": {"type": "SecureString", "value": "s3cret"},
        });
        let out = public_config(&config(wrappers.clone()), &["declaredSecure".to_string()]);
        let text = serde_json::to_value(&out).unwrap();
        assert_eq!(
            text,
            json!({"namespace": {"value": "apps"},
                   "region": {"value": {"name": "west", "zones": [1, 2]}},
                   "kube": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "k"}},
                   "cred": wrappers["cred"]})
        );
        assert!(!text.to_string().contains("s3cret"));
    }

    #[test]
    fn public_config_leaves_out_values_not_known_yet() {
        let mut given = config(json!({"namespace": {"value": "apps"}}));
        given.insert(
            "endpoint",
            ConfigValue::Deferred("[reference('c').fqdn]".into()),
        );
        assert_eq!(
            serde_json::to_value(public_config(&given, &[])).unwrap(),
            json!({"namespace": {"value": "apps"}})
        );
    }

    #[test]
    fn deployments_report_key_vault_failures_with_arms_code() {
        let error = |kind| DirectiveError {
            alias: "k8s".into(),
            property: "auth.kubeConfig".into(),
            kind,
        };
        let missing = deployment_error(&error(DirectiveErrorKind::SecretNotFound {
            vault: VAULT.into(),
            secret: "kc".into(),
        }));
        assert_eq!(missing.code(), KEY_VAULT_FAILED);
        assert_eq!(
            missing.target.as_deref(),
            Some("extensionConfigs.k8s.auth.kubeConfig")
        );
        let unknown = deployment_error(&error(DirectiveErrorKind::NotKnown {
            expression: "[reference('c').fqdn]".into(),
        }));
        assert_eq!(unknown.code(), cairn_template::config::INVALID_CONFIG);
        let call = deployment_error(&error(DirectiveErrorKind::ApiNotFound {
            call: "POST listCredential".into(),
            resource: VAULT.into(),
        }));
        assert_eq!(
            call.code(),
            cairn_config::codes::EXTENSION_CONFIG_API_CALL_FAILED
        );
        assert!(
            call.message().contains("'POST listCredential' on"),
            "{}",
            call.message()
        );
    }
}

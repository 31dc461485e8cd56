//! Resource providers for ARM resource types: the [`ResourceProvider`] trait (PUT, GET, DELETE and POST actions by
//! resource ID and API version), the [`Providers`] registry the engine looks types up in, and the built-in local
//! providers (resource groups, deployments, Key Vault vaults and secrets, template specs and their versions).
//!
//! A type without a provider fails with `NoRegisteredProviderFound`, naming the type: cairn has no Azure behind
//! it, so anything beyond the built-ins comes from a registered provider or a Bicep extension.

pub mod api;
mod deployments;
mod key_vault;
mod resource_groups;
mod template_specs;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cairn_arm::{ErrorDetail, ResourceId};
use serde_json::Value;

pub use deployments::{DEPLOYMENTS_TYPE, DeploymentsProvider};
pub use key_vault::{KeyVaultProvider, SECRETS_TYPE, VAULTS_TYPE};
pub use resource_groups::{RESOURCE_GROUPS_TYPE, ResourceGroupProvider};
pub(crate) use template_specs::{SpecVersion, normalize_path};
pub use template_specs::{TEMPLATE_SPEC_VERSIONS_TYPE, TEMPLATE_SPECS_TYPE, TemplateSpecProvider};

/// The future every provider method returns.
pub type ProviderFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, ProviderError>> + Send + 'a>>;

/// A provider's failure: the HTTP status it would answer with and the ARM error detail.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderError {
    pub status: u16,
    /// Boxed: errors travel through many `Result`s on the happy path.
    pub error: Box<ErrorDetail>,
}

impl ProviderError {
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        ProviderError {
            status,
            error: Box::new(ErrorDetail::new(code, message)),
        }
    }

    /// 400 with a code and message.
    pub fn bad_request(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(400, code, message)
    }

    /// 404 `ResourceNotFound` for an ID.
    pub fn not_found(id: &ResourceId) -> Self {
        Self::new(
            404,
            "ResourceNotFound",
            format!(
                "The Resource '{}' was not found.",
                id.qualified_type_and_names()
            ),
        )
    }

    /// 500 for a storage failure (the cause is logged, not returned: it may name internals).
    pub fn internal(what: &str) -> Self {
        Self::new(
            500,
            "InternalServerError",
            format!("The local provider could not {what}."),
        )
    }

    /// The HTTP reason phrase ARM puts in an operation's `statusCode`.
    pub fn status_code_name(&self) -> &'static str {
        status_name(self.status)
    }
}

/// The reason phrase of an HTTP status, as deployment operations report it (`OK`, `Created`, `BadRequest`).
pub fn status_name(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "NoContent",
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        422 => "UnprocessableEntity",
        429 => "TooManyRequests",
        500 => "InternalServerError",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        504 => "GatewayTimeout",
        _ => "Unknown",
    }
}

/// The HTTP status a journal's status code names ([`status_name`]'s inverse; a number is read as one), 0 when
/// unknown.
pub fn status_of(code: &str) -> u16 {
    if let Ok(number) = code.parse() {
        return number;
    }
    (200..600)
        .find(|&status| {
            status_name(status) != "Unknown" && status_name(status).eq_ignore_ascii_case(code)
        })
        .unwrap_or(0)
}

/// The result of a PUT: the resource as the provider now reports it, and whether it was new.
#[derive(Clone, Debug, PartialEq)]
pub struct PutOutcome {
    /// The resource envelope: `{id, name, type, location?, tags?, properties, ...}`. Must not hold secrets.
    pub resource: Value,
    pub created: bool,
}

/// One ARM resource type's control plane. Bodies are plain JSON: the engine has evaluated every expression.
pub trait ResourceProvider: Send + Sync {
    /// Creates or updates the resource `id` from `body` (`location`, `tags`, `sku`, `properties`, ...).
    fn put<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
        body: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome>;

    /// Reads a resource; `None` when it does not exist.
    fn get<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Value>>;

    /// Deletes a resource; `false` when there was nothing to delete.
    fn delete<'a>(&'a self, id: &'a ResourceId, api_version: &'a str) -> ProviderFuture<'a, bool>;

    /// JSON pointers (into the resource body) of write-only secret properties of `resource_type`, such as a Key
    /// Vault secret's `/properties/value`: what-if never shows them and cannot compare them.
    fn write_only_properties(&self, resource_type: &str) -> &'static [&'static str] {
        let _ = resource_type;
        &[]
    }

    /// `GET {parent}/{type}`: the resources of `resource_type` under `parent` (a scope for top-level types, the
    /// parent resource for child types). `None` when this provider does not list that collection.
    fn list<'a>(
        &'a self,
        parent: &'a ResourceId,
        resource_type: &'a str,
        api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Vec<Value>>> {
        let _ = (parent, resource_type, api_version);
        Box::pin(async { Ok(None) })
    }

    /// `POST {id}/{action}` (`listKeys`, `listCredentials`, ...). Providers without actions keep the default.
    fn action<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
        action: &'a str,
        body: Option<&'a Value>,
    ) -> ProviderFuture<'a, Value> {
        let _ = (api_version, body);
        let error = ProviderError::bad_request(
            "InvalidResourceOperation",
            format!(
                "The resource type '{}' does not support the action '{action}'.",
                id.resource_type()
            ),
        );
        Box::pin(async move { Err(error) })
    }

    /// [`ResourceProvider::action`] with extra query parameters (`a=1&b=2`, without `api-version`), as an
    /// `apiReference` directive may give them. The default serves actions without query parameters and refuses
    /// any, rather than dropping them silently.
    fn action_with_query<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
        action: &'a str,
        query: Option<&'a str>,
        body: Option<&'a Value>,
    ) -> ProviderFuture<'a, Value> {
        match query.filter(|q| !q.is_empty()) {
            None => self.action(id, api_version, action, body),
            Some(_) => {
                let error = ProviderError::bad_request(
                    "InvalidQueryParameter",
                    format!(
                        "The action '{action}' of the resource type '{}' takes no query parameters.",
                        id.resource_type()
                    ),
                );
                Box::pin(async move { Err(error) })
            }
        }
    }
}

/// The providers the engine knows, by resource type (case-insensitive, child types spelled out in full such as
/// `Microsoft.KeyVault/vaults/secrets`).
#[derive(Clone, Default)]
pub struct Providers {
    by_type: HashMap<String, Arc<dyn ResourceProvider>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut types: Vec<&String> = self.by_type.keys().collect();
        types.sort();
        f.debug_struct("Providers").field("types", &types).finish()
    }
}

impl Providers {
    /// No providers at all.
    pub fn empty() -> Self {
        Providers::default()
    }

    /// The built-in local providers over `store`: resource groups, deployments (reads of records; nested
    /// deployments are run by the engine itself), Key Vault (vaults and secrets) and template specs (specs and
    /// versions).
    pub fn builtin(store: Arc<dyn cairn_store::Store>) -> Self {
        let key_vault = Arc::new(KeyVaultProvider::new(store.clone()));
        let template_specs = Arc::new(TemplateSpecProvider::new(store.clone()));
        Providers::empty()
            .with(
                RESOURCE_GROUPS_TYPE,
                Arc::new(ResourceGroupProvider::new(store.clone())),
            )
            .with(DEPLOYMENTS_TYPE, Arc::new(DeploymentsProvider::new(store)))
            .with(VAULTS_TYPE, key_vault.clone())
            .with(SECRETS_TYPE, key_vault)
            .with(TEMPLATE_SPECS_TYPE, template_specs.clone())
            .with(TEMPLATE_SPEC_VERSIONS_TYPE, template_specs)
    }

    /// Adds every provider of `other`, replacing this set's provider of the same type.
    pub fn extend(&mut self, other: Providers) {
        self.by_type.extend(other.by_type);
    }

    /// Registers (or replaces) the provider of `resource_type`.
    pub fn with(mut self, resource_type: &str, provider: Arc<dyn ResourceProvider>) -> Self {
        self.register(resource_type, provider);
        self
    }

    pub fn register(&mut self, resource_type: &str, provider: Arc<dyn ResourceProvider>) {
        self.by_type
            .insert(resource_type.to_ascii_lowercase(), provider);
    }

    pub fn get(&self, resource_type: &str) -> Option<&Arc<dyn ResourceProvider>> {
        self.by_type.get(&resource_type.to_ascii_lowercase())
    }

    /// The provider of `resource_type`, or the error a deployment operation reports for a type cairn cannot
    /// deploy.
    pub fn require(
        &self,
        resource_type: &str,
        api_version: &str,
    ) -> Result<&Arc<dyn ResourceProvider>, ProviderError> {
        self.get(resource_type)
            .ok_or_else(|| no_provider(resource_type, api_version))
    }
}

/// `NoRegisteredProviderFound` for a type without a provider.
pub fn no_provider(resource_type: &str, api_version: &str) -> ProviderError {
    ProviderError::bad_request(
        "NoRegisteredProviderFound",
        format!(
            "No resource provider is registered for type '{resource_type}' (API version '{api_version}'). cairn deploys \
             Azure types only through a provider registered with the engine (built in: Microsoft.Resources/resourceGroups, \
             Microsoft.Resources/deployments, Microsoft.KeyVault/vaults, Microsoft.KeyVault/vaults/secrets, \
             Microsoft.Resources/templateSpecs, Microsoft.Resources/templateSpecs/versions); deploy other resources \
             through a Bicep extension."
        ),
    )
}

/// A string member of a JSON object, matched ignoring case.
pub(crate) fn member<'v>(body: &'v Value, key: &str) -> Option<&'v Value> {
    body.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

/// Tags from a body's `tags` member (non-string values are written as JSON text).
pub(crate) fn tags_of(body: &Value) -> cairn_store::Tags {
    let mut tags = cairn_store::Tags::new();
    if let Some(Value::Object(map)) = member(body, "tags") {
        for (k, v) in map {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            tags.insert(k.clone(), text);
        }
    }
    tags
}

pub(crate) fn tags_json(tags: &cairn_store::Tags) -> Value {
    Value::Object(
        tags.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_types_name_the_type() {
        let providers = Providers::empty();
        let err = providers
            .require("Microsoft.Storage/storageAccounts", "2023-01-01")
            .err()
            .unwrap();
        assert_eq!(err.error.code(), "NoRegisteredProviderFound");
        assert!(
            err.error
                .message()
                .contains("'Microsoft.Storage/storageAccounts'")
        );
        assert_eq!(err.status_code_name(), "BadRequest");
    }

    #[test]
    fn lookup_ignores_case() {
        struct Nothing;
        impl ResourceProvider for Nothing {
            fn put<'a>(
                &'a self,
                id: &'a ResourceId,
                _: &'a str,
                _: &'a Value,
            ) -> ProviderFuture<'a, PutOutcome> {
                Box::pin(async move { Err(ProviderError::not_found(id)) })
            }
            fn get<'a>(
                &'a self,
                _: &'a ResourceId,
                _: &'a str,
            ) -> ProviderFuture<'a, Option<Value>> {
                Box::pin(async { Ok(None) })
            }
            fn delete<'a>(&'a self, _: &'a ResourceId, _: &'a str) -> ProviderFuture<'a, bool> {
                Box::pin(async { Ok(false) })
            }
        }
        let providers = Providers::empty().with("A.B/cs", Arc::new(Nothing));
        assert!(providers.get("a.b/CS").is_some());
        assert!(providers.get("a.b/other").is_none());
    }
}

//! Resolving a config: what a directive fetches ([`Fetch`]), picking the value out of what came back
//! ([`Directive::extract`]), and the one [`Resolver`] through which deployments, what-if and a stack's deletes
//! turn a [`Config`] into the object the extension receives ([`resolve_config`]).
//!
//! The crate does no I/O: the resolver (Key Vault reads, ARM calls) is the caller's. Callers that want to
//! drive the calls themselves use [`Directive::fetch`] and [`Directive::extract`]; others implement
//! [`Resolver`] and call [`resolve_config`]. Errors name the extension alias, the property and the fix, and
//! never quote fetched values.

use std::fmt;
use std::future::Future;

use cairn_arm::ErrorDetail;
use cairn_arm::ResourceId;
use serde_json::{Map, Value};

use crate::codes;
use crate::path::{PathMiss, ValuePath};
use crate::value::{Config, ConfigValue, Directive};

/// A Key Vault secret to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRequest {
    /// The vault's ARM resource ID.
    pub vault_id: ResourceId,
    pub secret_name: String,
    /// A specific version; the current version when `None`.
    pub secret_version: Option<String>,
}

/// The HTTP method of an API directive: only reads and `POST` actions, never writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiMethod {
    Get,
    Post,
}

impl ApiMethod {
    /// `GET` or `POST`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

/// An ARM API call to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiRequest {
    pub method: ApiMethod,
    pub resource_id: ResourceId,
    /// `None`: the version the resource was deployed with, which the resolver looks up (seed 001's
    /// `runtimeReference` names no version).
    pub api_version: Option<String>,
    /// The action after the resource ID (`listClusterAdminCredential`); `None` reads the resource itself.
    pub action: Option<String>,
    /// Extra query parameters without a leading `?` (`a=1&b=2`).
    pub query: Option<String>,
    /// The JSON body of a `POST` (`requestBody`).
    pub body: Option<Value>,
}

impl ApiRequest {
    /// The request path and query relative to the ARM endpoint:
    /// `{resourceId}[/{action}]?api-version={apiVersion}[&{query}]` (without `api-version` while it is not known).
    pub fn path_and_query(&self) -> String {
        let mut out = self.resource_id.to_string();
        if let Some(action) = &self.action {
            out.push('/');
            out.push_str(action);
        }
        let mut parameters = Vec::new();
        if let Some(version) = &self.api_version {
            parameters.push(format!("api-version={version}"));
        }
        parameters.extend(self.query.clone());
        if !parameters.is_empty() {
            out.push('?');
            out.push_str(&parameters.join("&"));
        }
        out
    }

    /// How the call is named in messages: `POST listClusterAdminCredential` or `GET`.
    fn label(&self) -> String {
        match &self.action {
            Some(action) => format!("{} {action}", self.method.as_str()),
            None => self.method.as_str().to_owned(),
        }
    }
}

/// What a directive needs fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetch {
    Secret(SecretRequest),
    Api(ApiRequest),
}

/// A secret value. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue([REDACTED])")
    }
}

/// What came back for a [`Fetch`]. `Debug` never shows the content.
#[derive(Clone, PartialEq)]
pub enum Fetched {
    Secret(SecretValue),
    /// The API's JSON response body (may hold secrets; it is dropped once the value is extracted).
    Api(Value),
}

impl fmt::Debug for Fetched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(_) => f.write_str("Fetched::Secret([REDACTED])"),
            Self::Api(_) => f.write_str("Fetched::Api([REDACTED])"),
        }
    }
}

/// Why a resolver could not fetch something. Messages come from the caller's resolver and must not hold
/// secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveFailure {
    /// The secret, version or resource does not exist (404).
    NotFound,
    /// The caller may not read it (401/403).
    Forbidden { message: String },
    /// Anything else, with the upstream error code if there was one.
    Failed {
        code: Option<String>,
        message: String,
    },
}

/// The effectful side of directive evaluation, supplied by the caller: the engine's reads Key Vault secrets from
/// the store's vaults and makes API calls through its providers.
pub trait Resolver {
    /// Reads a Key Vault secret.
    fn get_secret(
        &self,
        request: &SecretRequest,
    ) -> impl Future<Output = Result<SecretValue, ResolveFailure>> + Send;

    /// Makes an ARM call and returns the JSON response body.
    fn call_api(
        &self,
        request: &ApiRequest,
    ) -> impl Future<Output = Result<Value, ResolveFailure>> + Send;
}

/// A directive that could not be evaluated, naming the alias, the property and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("extension '{alias}', config property '{property}': {kind}")]
pub struct DirectiveError {
    pub alias: String,
    /// Dotted property path (`auth.kubeConfig`).
    pub property: String,
    pub kind: DirectiveErrorKind,
}

/// Why a directive could not be evaluated. Messages end with the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DirectiveErrorKind {
    #[error(
        "the directive is malformed: {reason}. Fix: deploy again so the directive is recorded again"
    )]
    Malformed { reason: String },
    #[error(
        "Key Vault secret '{secret}' was not found in vault '{vault}'. Fix: restore the secret (or the version), or \
         deploy again with a 'keyVaultReference' to a secret that exists"
    )]
    SecretNotFound { vault: String, secret: String },
    #[error(
        "Key Vault secret '{secret}' in vault '{vault}' could not be read: {message}. Fix: enable the secret version (or \
         make it valid now), or allow the stack's identity (or, for a deployment, its caller's) to get secrets from \
         the vault"
    )]
    SecretForbidden {
        vault: String,
        secret: String,
        message: String,
    },
    #[error(
        "Key Vault secret '{secret}' in vault '{vault}' could not be read: {message}. Fix: check the vault is reachable \
         and retry"
    )]
    SecretFailed {
        vault: String,
        secret: String,
        message: String,
    },
    #[error(
        "'{call}' on '{resource}' failed: the resource was not found. Fix: if the resource was deleted, its \
         extensible resources are gone with it; otherwise deploy again with a directive to a resource that exists"
    )]
    ApiNotFound { call: String, resource: String },
    #[error(
        "'{call}' on '{resource}' was refused: {message}. Fix: allow the stack's identity (or, for a \
         deployment, its caller's) to perform the action on the resource"
    )]
    ApiForbidden {
        call: String,
        resource: String,
        message: String,
    },
    #[error("'{call}' on '{resource}' failed: {message}. Fix: check the resource and retry")]
    ApiFailed {
        call: String,
        resource: String,
        message: String,
    },
    #[error(
        "the response of '{call}' on '{resource}' has no value at '{path}' (null or missing at '{at}'). Fix: check the \
         resource still returns the value, or deploy again with a 'responseValuePath' that matches the response"
    )]
    ValueMissing {
        call: String,
        resource: String,
        path: String,
        at: String,
    },
    #[error(
        "the response of '{call}' on '{resource}' does not match '{path}': the value at '{at}' is not {expected}. Fix: \
         deploy again with a 'responseValuePath' that matches the response"
    )]
    ValueWrongType {
        call: String,
        resource: String,
        path: String,
        at: String,
        expected: &'static str,
    },
    #[error("the resolver returned a {got} for a {expected} request. Fix: this is a bug in cairn")]
    MismatchedResult {
        expected: &'static str,
        got: &'static str,
    },
    #[error(
        "the value is not known ('{expression}'): it is known only when the deployment runs, and the config was \
         not evaluated there. Fix: give the property in the deployment's extensionConfigs"
    )]
    NotKnown { expression: String },
    #[error(
        "extension '{extension}' requires this config property, and the stack kept neither a value nor a directive \
         for it, so the extension is not called without it. Fix: update the stack with the property given as a \
         Key Vault reference or a list* output (or a value, if it is not secure), then delete again"
    )]
    RequiredMissing { extension: String },
}

impl DirectiveErrorKind {
    /// The ARM error code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed { .. } | Self::MismatchedResult { .. } => {
                codes::INVALID_EXTENSION_CONFIG_DIRECTIVE
            }
            Self::SecretNotFound { .. } => codes::EXTENSION_CONFIG_SECRET_NOT_FOUND,
            Self::SecretForbidden { .. } => codes::EXTENSION_CONFIG_SECRET_FORBIDDEN,
            Self::SecretFailed { .. } => codes::EXTENSION_CONFIG_SECRET_FAILED,
            Self::ApiNotFound { .. } | Self::ApiForbidden { .. } | Self::ApiFailed { .. } => {
                codes::EXTENSION_CONFIG_API_CALL_FAILED
            }
            Self::ValueMissing { .. } | Self::ValueWrongType { .. } => {
                codes::EXTENSION_CONFIG_VALUE_NOT_FOUND
            }
            Self::NotKnown { .. } => codes::INVALID_EXTENSION_CONFIG,
            Self::RequiredMissing { .. } => codes::EXTENSION_CONFIG_REQUIRED_PROPERTY_MISSING,
        }
    }

    /// Whether retrying later may help (transient upstream failures), as opposed to needing a fix.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::SecretFailed { .. } | Self::ApiFailed { .. })
    }
}

impl DirectiveError {
    /// The ARM error: the kind's code, this message, target `extensionConfigs.{alias}.{property}`.
    pub fn to_error_detail(&self) -> ErrorDetail {
        ErrorDetail::new(self.kind.code(), self.to_string())
            .with_target(format!("extensionConfigs.{}.{}", self.alias, self.property))
    }
}

impl Directive {
    /// What to fetch for this directive.
    pub fn fetch(&self) -> Result<Fetch, DirectiveErrorKind> {
        let malformed = |reason: String| DirectiveErrorKind::Malformed { reason };
        match self {
            Self::KeyVaultReference(reference) => Ok(Fetch::Secret(SecretRequest {
                vault_id: ResourceId::parse(&reference.key_vault.id)
                    .map_err(|e| malformed(format!("keyVault.id: {e}")))?,
                secret_name: reference.secret_name.clone(),
                secret_version: reference.secret_version.clone().filter(|v| !v.is_empty()),
            })),
            Self::ApiReference(reference) => {
                let method = if reference.method.eq_ignore_ascii_case("GET") {
                    ApiMethod::Get
                } else if reference.method.eq_ignore_ascii_case("POST") {
                    ApiMethod::Post
                } else {
                    return Err(malformed(format!(
                        "method '{}' is not GET or POST",
                        reference.method
                    )));
                };
                let action = reference.action.trim_matches('/');
                let query = reference
                    .query
                    .as_deref()
                    .unwrap_or("")
                    .trim_start_matches('?');
                Ok(Fetch::Api(ApiRequest {
                    method,
                    resource_id: ResourceId::parse(&reference.arm_resource_id)
                        .map_err(|e| malformed(format!("armResourceId: {e}")))?,
                    api_version: (!reference.api_version.trim().is_empty())
                        .then(|| reference.api_version.clone()),
                    action: (!action.is_empty()).then(|| action.to_owned()),
                    query: (!query.is_empty()).then(|| query.to_owned()),
                    body: reference.request_body.clone(),
                }))
            }
        }
    }

    /// The value out of what was fetched: the secret as a JSON string, or the value at `responseValuePath`.
    pub fn extract(&self, fetched: Fetched) -> Result<Value, DirectiveErrorKind> {
        match (self, fetched) {
            (Self::KeyVaultReference(_), Fetched::Secret(secret)) => Ok(Value::String(secret.0)),
            (Self::ApiReference(reference), Fetched::Api(response)) => {
                let path = ValuePath::parse(&reference.response_value_path).map_err(|e| {
                    DirectiveErrorKind::Malformed {
                        reason: format!("responseValuePath: {e}"),
                    }
                })?;
                let call = match self.fetch()? {
                    Fetch::Api(request) => request.label(),
                    Fetch::Secret(_) => reference.method.clone(),
                };
                match path.evaluate(&response) {
                    Ok(value) => Ok(value.clone()),
                    Err(PathMiss::NullOrMissing { at }) => Err(DirectiveErrorKind::ValueMissing {
                        call,
                        resource: reference.arm_resource_id.clone(),
                        path: reference.response_value_path.clone(),
                        at,
                    }),
                    Err(PathMiss::WrongType { at, expected }) => {
                        Err(DirectiveErrorKind::ValueWrongType {
                            call,
                            resource: reference.arm_resource_id.clone(),
                            path: reference.response_value_path.clone(),
                            at,
                            expected,
                        })
                    }
                }
            }
            (Self::KeyVaultReference(_), Fetched::Api(_)) => {
                Err(DirectiveErrorKind::MismatchedResult {
                    expected: "secret",
                    got: "API response",
                })
            }
            (Self::ApiReference(_), Fetched::Secret(_)) => {
                Err(DirectiveErrorKind::MismatchedResult {
                    expected: "API call",
                    got: "secret",
                })
            }
        }
    }

    /// The error for a failed fetch.
    pub fn failure(&self, failure: ResolveFailure) -> DirectiveErrorKind {
        match self {
            Self::KeyVaultReference(reference) => {
                let vault = reference.key_vault.id.clone();
                let secret = reference.secret_name.clone();
                match failure {
                    ResolveFailure::NotFound => {
                        DirectiveErrorKind::SecretNotFound { vault, secret }
                    }
                    ResolveFailure::Forbidden { message } => DirectiveErrorKind::SecretForbidden {
                        vault,
                        secret,
                        message,
                    },
                    ResolveFailure::Failed { code, message } => DirectiveErrorKind::SecretFailed {
                        vault,
                        secret,
                        message: with_code(code, message),
                    },
                }
            }
            Self::ApiReference(reference) => {
                let call = match self.fetch() {
                    Ok(Fetch::Api(request)) => request.label(),
                    _ => reference.method.clone(),
                };
                let resource = reference.arm_resource_id.clone();
                match failure {
                    ResolveFailure::NotFound => DirectiveErrorKind::ApiNotFound { call, resource },
                    ResolveFailure::Forbidden { message } => DirectiveErrorKind::ApiForbidden {
                        call,
                        resource,
                        message,
                    },
                    ResolveFailure::Failed { code, message } => DirectiveErrorKind::ApiFailed {
                        call,
                        resource,
                        message: with_code(code, message),
                    },
                }
            }
        }
    }
}

fn with_code(code: Option<String>, message: String) -> String {
    match code {
        Some(code) => format!("{code}: {message}"),
        None => message,
    }
}

/// Evaluates one directive through `resolver`.
pub async fn evaluate_directive<R: Resolver + Sync>(
    alias: &str,
    property: &str,
    directive: &Directive,
    resolver: &R,
) -> Result<Value, DirectiveError> {
    let error = |kind| DirectiveError {
        alias: alias.to_owned(),
        property: property.to_owned(),
        kind,
    };
    let fetched = match directive.fetch().map_err(error)? {
        Fetch::Secret(request) => resolver.get_secret(&request).await.map(Fetched::Secret),
        Fetch::Api(request) => resolver.call_api(&request).await.map(Fetched::Api),
    };
    let fetched = fetched.map_err(|failure| error(directive.failure(failure)))?;
    directive.extract(fetched).map_err(error)
}

/// A config with every directive replaced by its value: what the extension receives. `Debug` never shows it.
#[derive(Clone, PartialEq)]
pub struct ResolvedConfig(Value);

impl ResolvedConfig {
    /// The config object (holds secrets).
    pub fn expose(&self) -> &Value {
        &self.0
    }

    /// The config object (holds secrets).
    pub fn into_value(self) -> Value {
        self.0
    }

    /// The config object's members (hold secrets).
    pub fn into_map(self) -> Map<String, Value> {
        match self.0 {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }
}

impl fmt::Debug for ResolvedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResolvedConfig([REDACTED])")
    }
}

/// Resolves every directive of `config` (one after another, in property order) and returns the config the
/// extension receives: literals (secure or not) as they are, directives replaced by their values, groups as
/// objects. A value known only when the deployment runs is refused before anything is fetched.
pub async fn resolve_config<R: Resolver + Sync>(
    alias: &str,
    config: &Config,
    resolver: &R,
) -> Result<ResolvedConfig, DirectiveError> {
    if let Some((path, expression)) = config.first_deferred() {
        return Err(DirectiveError {
            alias: alias.to_owned(),
            property: path.join("."),
            kind: DirectiveErrorKind::NotKnown {
                expression: expression.to_owned(),
            },
        });
    }
    let mut values = Vec::new();
    for (path, directive) in config.directives() {
        let value = evaluate_directive(alias, &path.join("."), directive, resolver).await?;
        values.push(value);
    }
    let mut values = values.into_iter();
    Ok(ResolvedConfig(assemble(config, &mut values)))
}

/// Builds the resolved object; `values` yields directive values in [`Config::directives`] order.
fn assemble(config: &Config, values: &mut impl Iterator<Item = Value>) -> Value {
    let mut out = Map::with_capacity(config.len());
    for (name, value) in config.iter() {
        let resolved = match value {
            ConfigValue::Literal(literal) => literal.clone(),
            ConfigValue::SecureLiteral(secure) => secure.expose().clone(),
            ConfigValue::Directive(_) => values.next().unwrap_or(Value::Null),
            ConfigValue::Group(inner) => assemble(inner, values),
            // Refused by `resolve_config` before anything is fetched.
            ConfigValue::Deferred(_) => Value::Null,
        };
        out.insert(name.clone(), resolved);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Mutex;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";
    const AKS: &str = "/subscriptions/s/resourceGroups/app/providers/Microsoft.ContainerService/managedClusters/aks";

    /// A resolver over fixed tables, recording the calls it saw.
    #[derive(Default)]
    struct FakeResolver {
        secrets: HashMap<String, Result<String, ResolveFailure>>,
        calls: HashMap<String, Result<Value, ResolveFailure>>,
        seen: Mutex<Vec<String>>,
    }

    impl Resolver for FakeResolver {
        fn get_secret(
            &self,
            request: &SecretRequest,
        ) -> impl Future<Output = Result<SecretValue, ResolveFailure>> + Send {
            self.seen
                .lock()
                .unwrap()
                .push(format!("secret {}", request.secret_name));
            let result = self
                .secrets
                .get(&request.secret_name)
                .cloned()
                .unwrap_or(Err(ResolveFailure::NotFound))
                .map(SecretValue::new);
            std::future::ready(result)
        }

        fn call_api(
            &self,
            request: &ApiRequest,
        ) -> impl Future<Output = Result<Value, ResolveFailure>> + Send {
            let key = format!("{} {}", request.method.as_str(), request.path_and_query());
            self.seen.lock().unwrap().push(key.clone());
            std::future::ready(
                self.calls
                    .get(&key)
                    .cloned()
                    .unwrap_or(Err(ResolveFailure::NotFound)),
            )
        }
    }

    /// Polls a future that never waits (the fake resolver's futures are ready at once).
    fn run<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut context) {
            std::task::Poll::Ready(output) => output,
            std::task::Poll::Pending => panic!("the fake resolver never waits"),
        }
    }

    fn config(value: Value) -> Config {
        Config::parse(&value).unwrap()
    }

    fn aks_directive(path: &str) -> Value {
        json!({"apiReference": {"method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01",
            "action": "listClusterAdminCredential", "query": "format=exec", "responseValuePath": path}})
    }

    const AKS_CALL: &str = "POST /subscriptions/s/resourceGroups/app/providers/Microsoft.ContainerService/managedClusters/aks/listClusterAdminCredential?api-version=2024-02-01&format=exec";

    #[test]
    fn resolves_literals_secrets_and_api_values() {
        let mut resolver = FakeResolver::default();
        resolver.secrets.insert("token".into(), Ok("t0ken".into()));
        resolver.calls.insert(
            AKS_CALL.into(),
            Ok(json!({"kubeconfigs": [{"name": "clusterAdmin", "value": "a3ViZWNvbmZpZw=="}]})),
        );
        let persisted = config(json!({
            "namespace": {"value": "apps"},
            "auth": {
                "kubeConfig": aks_directive("$.kubeconfigs[0].value"),
                "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "token"}}
            }
        }));
        let resolved = run(resolve_config("k8s", &persisted, &resolver)).unwrap();
        assert_eq!(
            resolved.expose(),
            &json!({"namespace": "apps", "auth": {"kubeConfig": "a3ViZWNvbmZpZw==", "token": "t0ken"}})
        );
        assert!(!format!("{resolved:?}").contains("t0ken"));
        assert_eq!(
            resolver.seen.lock().unwrap().as_slice(),
            [AKS_CALL, "secret token"]
        );
    }

    #[test]
    fn secure_literals_resolve_and_deferred_values_are_refused_before_any_fetch() {
        let mut resolver = FakeResolver::default();
        resolver.secrets.insert("token".into(), Ok("t0ken".into()));
        let persisted = config(json!({
            "password": {"type": "SecureString", "value": "s3cr3t"},
            "auth": {"type": "UserProvided", "value": "raw-credential"}
        }));
        let resolved = run(resolve_config("k8s", &persisted, &resolver)).unwrap();
        assert_eq!(
            resolved.expose(),
            &json!({"password": "s3cr3t", "auth": "raw-credential"})
        );
        let shown = format!("{resolved:?}");
        assert!(!shown.contains("s3cr3t") && !shown.contains("raw-credential"));

        let mut deferred = config(json!({
            "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "token"}}
        }));
        deferred.insert(
            "namespace",
            ConfigValue::Deferred("[reference('ns').name]".into()),
        );
        let error = run(resolve_config("k8s", &deferred, &resolver)).unwrap_err();
        assert_eq!(error.property, "namespace");
        assert_eq!(
            error.kind,
            DirectiveErrorKind::NotKnown {
                expression: "[reference('ns').name]".into()
            }
        );
        assert!(
            resolver.seen.lock().unwrap().is_empty(),
            "nothing is fetched for a config that cannot be complete"
        );
    }

    #[test]
    fn request_body_reaches_the_call_and_round_trips() {
        let wire = json!({"token": {"apiReference": {"method": "post", "armResourceId": AKS,
            "apiVersion": "2024-02-01", "action": "listCredential", "query": "?format=exec",
            "requestBody": {"scope": "admin"}, "responseValuePath": "value"}}});
        let persisted = config(wire);
        let (_, directive) = persisted.directives().remove(0);
        let Fetch::Api(request) = directive.fetch().unwrap() else {
            panic!("an API directive fetches from an API");
        };
        assert_eq!(request.method, ApiMethod::Post);
        assert_eq!(request.query.as_deref(), Some("format=exec"));
        assert_eq!(request.body, Some(json!({"scope": "admin"})));
        assert_eq!(
            persisted.to_wire()["token"]["apiReference"]["requestBody"],
            json!({"scope": "admin"})
        );
        let get_with_body = json!({"token": {"apiReference": {"method": "GET", "armResourceId": AKS,
            "apiVersion": "2024-02-01", "requestBody": {}, "responseValuePath": "id"}}});
        let error = Config::parse(&get_with_body).unwrap_err();
        assert!(error.to_string().contains("requestBody"), "{error}");
    }

    #[test]
    fn missing_secret_names_alias_property_and_fix() {
        let resolver = FakeResolver::default();
        let persisted = config(
            json!({"kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "gone"}}}),
        );
        let error = run(resolve_config("k8s", &persisted, &resolver)).unwrap_err();
        assert_eq!(error.property, "kubeConfig");
        assert!(matches!(
            error.kind,
            DirectiveErrorKind::SecretNotFound { .. }
        ));
        let message = error.to_string();
        assert!(
            message.starts_with(
                "extension 'k8s', config property 'kubeConfig': Key Vault secret 'gone'"
            ),
            "{message}"
        );
        assert!(message.contains("Fix: restore the secret"), "{message}");
        let detail = error.to_error_detail();
        assert_eq!(detail.code(), codes::EXTENSION_CONFIG_SECRET_NOT_FOUND);
        assert_eq!(
            detail.target.as_deref(),
            Some("extensionConfigs.k8s.kubeConfig")
        );
    }

    #[test]
    fn failing_action_is_reported_with_the_call() {
        let mut resolver = FakeResolver::default();
        resolver.calls.insert(
            AKS_CALL.into(),
            Err(ResolveFailure::Forbidden {
                message: "AuthorizationFailed".into(),
            }),
        );
        let persisted = config(json!({"kubeConfig": aks_directive("kubeconfigs[0].value")}));
        let error = run(resolve_config("k8s", &persisted, &resolver)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("'POST listClusterAdminCredential' on '/subscriptions/s/"),
            "{message}"
        );
        assert!(
            message.contains("Fix: allow the stack's identity"),
            "{message}"
        );
        resolver.calls.insert(
            AKS_CALL.into(),
            Err(ResolveFailure::Failed {
                code: Some("InternalError".into()),
                message: "boom".into(),
            }),
        );
        let error = run(resolve_config("k8s", &persisted, &resolver)).unwrap_err();
        assert!(error.kind.is_transient());
        assert_eq!(
            error.to_error_detail().code(),
            codes::EXTENSION_CONFIG_API_CALL_FAILED
        );
        resolver.calls.remove(AKS_CALL);
        let error = run(resolve_config("k8s", &persisted, &resolver)).unwrap_err();
        assert!(matches!(error.kind, DirectiveErrorKind::ApiNotFound { .. }));
    }

    #[test]
    fn null_on_the_path_names_where_it_stopped_without_quoting_the_response() {
        let mut resolver = FakeResolver::default();
        resolver.calls.insert(
            AKS_CALL.into(),
            Ok(json!({"kubeconfigs": [{"name": "clusterAdmin", "value": null}], "secretish": "s3cr3t"})),
        );
        let persisted = config(json!({"kubeConfig": aks_directive("kubeconfigs[0].value")}));
        let error = run(resolve_config("k8s", &persisted, &resolver)).unwrap_err();
        assert_eq!(
            error.kind,
            DirectiveErrorKind::ValueMissing {
                call: "POST listClusterAdminCredential".into(),
                resource: AKS.into(),
                path: "kubeconfigs[0].value".into(),
                at: "$.kubeconfigs[0].value".into(),
            }
        );
        assert!(!error.to_string().contains("s3cr3t"));
        assert_eq!(
            error.to_error_detail().code(),
            codes::EXTENSION_CONFIG_VALUE_NOT_FOUND
        );
        resolver
            .calls
            .insert(AKS_CALL.into(), Ok(json!({"kubeconfigs": "flat"})));
        let error = run(resolve_config("k8s", &persisted, &resolver)).unwrap_err();
        assert!(matches!(
            error.kind,
            DirectiveErrorKind::ValueWrongType {
                expected: "an array",
                ..
            }
        ));
    }

    #[test]
    fn stepwise_api_matches_the_resolver() {
        let persisted = config(json!({"kubeConfig": aks_directive("kubeconfigs[0].value")}));
        let (_, directive) = persisted.directives()[0].clone();
        let Fetch::Api(request) = directive.fetch().unwrap() else {
            panic!("expected an API call")
        };
        assert_eq!(format!("POST {}", request.path_and_query()), AKS_CALL);
        assert_eq!(
            directive.extract(Fetched::Api(json!({"kubeconfigs": [{"value": "v"}]}))),
            Ok(json!("v"))
        );
        assert!(matches!(
            directive.extract(Fetched::Secret(SecretValue::new("x"))),
            Err(DirectiveErrorKind::MismatchedResult { .. })
        ));
        let fetched = format!(
            "{:?} {:?}",
            Fetched::Api(json!({"kubeconfigs": [{"value": "s3cr3t"}]})),
            Fetched::Secret(SecretValue::new("s3cr3t"))
        );
        assert!(!fetched.contains("s3cr3t"), "{fetched}");
    }

    #[test]
    fn get_of_the_resource_has_no_action() {
        let persisted = config(
            json!({"fqdn": {"runtimeReference": {"resourceId": AKS, "apiVersion": "2024-02-01",
            "action": "reference", "propertyPath": "properties.fqdn"}}}),
        );
        let (_, directive) = persisted.directives()[0].clone();
        let Fetch::Api(request) = directive.fetch().unwrap() else {
            panic!("expected an API call")
        };
        assert_eq!(request.method, ApiMethod::Get);
        assert_eq!(
            request.path_and_query(),
            format!("{AKS}?api-version=2024-02-01")
        );
    }

    /// A directive without `apiVersion` leaves the version to the resolver (the one the resource was deployed
    /// with).
    #[test]
    fn a_directive_without_api_version_asks_the_resolver_for_it() {
        let persisted = config(
            json!({"kubeConfig": {"runtimeReference": {"resourceId": AKS,
            "action": "listClusterAdminCredential", "propertyPath": "kubeconfigs[0].value"}}}),
        );
        let (_, directive) = persisted.directives()[0].clone();
        let Fetch::Api(request) = directive.fetch().unwrap() else {
            panic!("expected an API call")
        };
        assert_eq!(request.api_version, None);
        assert_eq!(
            request.path_and_query(),
            format!("{AKS}/listClusterAdminCredential")
        );
        let with_query = ApiRequest {
            query: Some("a=1".into()),
            ..request
        };
        assert_eq!(
            with_query.path_and_query(),
            format!("{AKS}/listClusterAdminCredential?a=1")
        );
    }
}

//! `ExtensionHost`: the one interface the deployments engine calls (preview, createOrUpdate, get, delete).
//!
//! For every call the host resolves the extension through the [`Registry`], enforces the limits (4 MB
//! request → 413 without calling the extension, 20 MB response → 502, per-request timeout → 504), retries
//! what is safe to retry, validates responses against the contract, and drives long-running operations
//! (RELO via `/resource/get`, stepwise LRO via `/longRunningOperation/get`) to a typed result.
//!
//! # Retries
//!
//! Exponential backoff with full jitter ([`RetryPolicy`]); a 429's `Retry-After` (seconds) is honoured up
//! to `max_retry_after`. What is retried:
//! - get, preview, delete and LRO polls: connection failures, 429 and 5xx. They are idempotent: get,
//!   preview and polls have no side effects, and delete of a missing resource answers 204.
//! - createOrUpdate: only when the request was certainly not sent (connection refused / not established)
//!   and on 429 (the extension refused the request before acting on it; the contract leaves throttling to
//!   extensions, so a throttled caller is expected to come back). It is **not** retried on 5xx, resets or
//!   timeouts: the extension may have applied part of the change or started a RELO/LRO, and a second
//!   request could start a second operation.
//! - Timeouts are never retried: the contract answers a late extension with 504.
//!
//! # Secrets
//!
//! The full config travels only inside request bodies and [`ExtensionConfig`]; logs carry the extension,
//! version, operation, status and attempt, never bodies. Results carry only the echoed config.

use crate::error::{ArmError, HostError, HostErrorKind};
use crate::registry::{RegisteredExtension, Registry};
use crate::secret::{EchoedConfig, ExtensionConfig, Redacted};
use crate::settings::HostSettings;
use cairn_extension_contract::transport::{Operation, TransportRequest, TransportResponse};
use cairn_extension_contract::v2::{
    LongRunningOperation, PreviewRequestMetadata, Resource, ResourcePreview,
    ResourcePreviewSpecification, ResourceReference, ResourceSpecification,
};
use cairn_extension_contract::{
    JsonPointer, OperationStatus, ReferenceId, ReferenceIdError, ReferenceIdParts, codes, headers,
    validate,
};
use cairn_metrics::{CallOutcome, Metrics};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Which extension: the name and version the template declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtensionKey {
    /// Extension name (case-insensitive).
    pub name: String,
    /// Extension version, sent as `{extensionVersion}`.
    pub version: String,
}

impl ExtensionKey {
    /// A key.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }
}

/// Correlation data for the required request headers; missing ids are generated.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// `x-ms-client-request-id` (a fresh UUID per request when absent).
    pub client_request_id: Option<String>,
    /// `x-ms-correlation-request-id` (one UUID per host call when absent).
    pub correlation_id: Option<String>,
    /// W3C `traceparent` (generated when absent).
    pub traceparent: Option<String>,
    /// W3C `tracestate` (empty when absent).
    pub tracestate: Option<String>,
    /// `Accept-Language`.
    pub accept_language: Option<String>,
    /// `x-ms-client-tenant-id`.
    pub client_tenant_id: Option<String>,
    /// `x-ms-home-tenant-id`.
    pub home_tenant_id: Option<String>,
}

/// Input of createOrUpdate.
#[derive(Debug, Clone)]
pub struct CreateOrUpdateRequest {
    /// Resource type.
    pub resource_type: String,
    /// API version.
    pub api_version: Option<String>,
    /// Desired properties (a JSON object).
    pub properties: Value,
    /// Full config, secrets included.
    pub config: Option<ExtensionConfig>,
    /// Recorded control plane id, when known (e.g. from an earlier deployment).
    pub config_id: Option<String>,
    /// Identifiers, when known (e.g. from preflight's preview): used for the final get after a stepwise
    /// LRO. Without them the host asks `preview` for the identifiers.
    pub known_identifiers: Option<Value>,
}

/// Input of preview.
#[derive(Debug, Clone)]
pub struct PreviewRequest {
    /// Resource type.
    pub resource_type: String,
    /// API version.
    pub api_version: Option<String>,
    /// Properties, possibly with unevaluated expressions as raw strings.
    pub properties: Value,
    /// Full config (may hold unevaluated expressions too).
    pub config: Option<ExtensionConfig>,
    /// Recorded control plane id.
    pub config_id: Option<String>,
    /// Paths of unevaluated expressions.
    pub unevaluated: Vec<JsonPointer>,
}

/// Which resource get/delete act on.
#[derive(Debug, Clone)]
pub struct ResourceLocator {
    /// Resource type.
    pub resource_type: String,
    /// API version.
    pub api_version: Option<String>,
    /// The extension's identifiers.
    pub identifiers: Value,
    /// Full config; required for resources whose reference id has flags `01`.
    pub config: Option<ExtensionConfig>,
    /// Recorded control plane id; sent whenever known.
    pub config_id: Option<String>,
}

impl ResourceLocator {
    /// The locator a cairn reference id encodes, plus the extension name it names.
    pub fn from_reference_id(
        id: &ReferenceId,
        config: Option<ExtensionConfig>,
    ) -> Result<(String, Self), ReferenceIdError> {
        let parts = ReferenceIdParts::from_reference_id(id)?;
        Ok((
            parts.extension_name,
            Self {
                resource_type: parts.resource_type,
                api_version: parts.api_version,
                identifiers: parts.identifiers,
                config,
                config_id: parts.config_id,
            },
        ))
    }

    fn to_reference(&self) -> ResourceReference {
        ResourceReference {
            resource_type: self.resource_type.clone(),
            api_version: self.api_version.clone(),
            identifiers: self.identifiers.clone(),
            config: config_value(self.config.as_ref()),
            config_id: self.config_id.clone(),
        }
    }
}

/// A resource as the engine records it: safe to persist and return (no secret config).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployedResource {
    /// cairn's reference id for the resource (see the contract crate's derivation).
    pub reference_id: ReferenceId,
    /// Registered extension name.
    pub extension_name: String,
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// API version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The extension's identifiers.
    pub identifiers: Value,
    /// Properties as the extension reports them.
    pub properties: Value,
    /// The config properties the extension echoed (not secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echoed_config: Option<EchoedConfig>,
    /// Names (never values) of the config properties treated as secret.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_config_keys: Vec<String>,
    /// Control plane id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
    /// Status (`Succeeded` after create; whatever the extension reports on get).
    pub status: OperationStatus,
}

/// A preview result; `preview.config` holds only the echoed properties the host sent.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewResult {
    /// The extension's preview.
    pub preview: ResourcePreview,
    /// Names of config properties treated as secret.
    pub secret_config_keys: Vec<String>,
}

/// A delete in progress, for callers that poll themselves (the host API).
#[derive(Debug, Clone)]
pub struct PendingDelete {
    key: ExtensionKey,
    wait: PendingWait,
    /// How long to wait before the next poll.
    pub retry_after: Duration,
}

impl PendingDelete {
    /// The extension the delete runs in.
    pub fn key(&self) -> &ExtensionKey {
        &self.key
    }

    /// The polling state as JSON text, to keep across a restart (with [`Self::from_state`]). It can hold the
    /// extension config, secrets included: callers keep it sealed.
    pub fn to_state(&self) -> Redacted<String> {
        let state = PendingState {
            wait: self.wait.clone(),
            retry_after_millis: u64::try_from(self.retry_after.as_millis()).unwrap_or(u64::MAX),
        };
        Redacted::new(String::from_utf8(to_body(&state)).unwrap_or_default())
    }

    /// Reads back what [`Self::to_state`] wrote for the delete running in `key`; `None` when it is not such a
    /// state.
    pub fn from_state(key: ExtensionKey, state: &str) -> Option<Self> {
        let state: PendingState = serde_json::from_str(state).ok()?;
        Some(Self {
            key,
            wait: state.wait,
            retry_after: Duration::from_millis(state.retry_after_millis),
        })
    }
}

/// The persisted form of a [`PendingDelete`] (its key is stored beside it).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PendingState {
    wait: PendingWait,
    retry_after_millis: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum PendingWait {
    /// RELO: poll `/resource/get` until 404.
    Resource(ResourceReference),
    /// Stepwise: poll `/longRunningOperation/get` with this handle.
    Operation(Value),
}

/// Progress of a delete.
#[derive(Debug, Clone)]
pub enum DeleteProgress {
    /// The resource is gone (204, 404 while polling, or a `Succeeded` operation).
    Deleted,
    /// Still running.
    Pending(Box<PendingDelete>),
}

struct Resolved {
    entry: Arc<RegisteredExtension>,
    key: ExtensionKey,
}

/// Per-call header values (the correlation id stays fixed across the retries and polls of one call).
struct CallHeaders {
    correlation_id: String,
    traceparent: String,
    context: CallContext,
}

/// The extensibility host.
pub struct ExtensionHost {
    registry: Arc<Registry>,
    settings: HostSettings,
    referer: String,
    metrics: Metrics,
}

impl ExtensionHost {
    /// A host over `registry`; `referer` is the full URL of this host instance (sent as `Referer`).
    pub fn new(
        registry: Arc<Registry>,
        settings: HostSettings,
        referer: impl Into<String>,
    ) -> Self {
        Self {
            registry,
            settings,
            referer: referer.into(),
            metrics: Metrics::default(),
        }
    }

    /// Records the latency of every extension call into `metrics` (`cairn_extension_call_duration_seconds`).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The settings.
    pub fn settings(&self) -> &HostSettings {
        &self.settings
    }

    /// Previews a resource. `PreviewNotSupported` (400 or 422) comes back as
    /// [`HostErrorKind::PreviewNotSupported`] so preflight can ignore it.
    pub async fn preview(
        &self,
        key: &ExtensionKey,
        request: PreviewRequest,
        context: &CallContext,
    ) -> Result<PreviewResult, HostError> {
        let resolved = self.resolve(key)?;
        let call = self.call_headers(context);
        let spec = ResourcePreviewSpecification {
            resource_type: request.resource_type,
            api_version: request.api_version,
            properties: request.properties,
            config: config_value(request.config.as_ref()),
            config_id: request.config_id,
            metadata: (!request.unevaluated.is_empty()).then_some(PreviewRequestMetadata {
                unevaluated: request.unevaluated,
            }),
        };
        let response = self
            .exchange(&resolved, Operation::Preview, to_body(&spec), &call)
            .await?;
        match response.status {
            200 => {
                let mut preview =
                    validate::parse_resource_preview(&response.body).map_err(|violation| {
                        HostError::contract_violation(Operation::Preview, &violation)
                    })?;
                let (echoed, secret_config_keys) =
                    split_echo(request.config.as_ref(), preview.config.as_ref());
                preview.config = echoed.map(|echoed| Value::Object(echoed.0));
                Ok(PreviewResult {
                    preview,
                    secret_config_keys,
                })
            }
            _ => Err(self.unexpected(Operation::Preview, &response)),
        }
    }

    /// Creates or updates a resource and waits until it is done (RELO or stepwise LRO).
    pub async fn create_or_update(
        &self,
        key: &ExtensionKey,
        request: CreateOrUpdateRequest,
        context: &CallContext,
    ) -> Result<DeployedResource, HostError> {
        let resolved = self.resolve(key)?;
        let call = self.call_headers(context);
        let deadline = self.settings.operation_deadline;
        match tokio::time::timeout(
            deadline,
            self.create_or_update_inner(&resolved, &request, &call),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(HostError::deadline_exceeded(
                Operation::CreateOrUpdate,
                deadline,
            )),
        }
    }

    async fn create_or_update_inner(
        &self,
        resolved: &Resolved,
        request: &CreateOrUpdateRequest,
        call: &CallHeaders,
    ) -> Result<DeployedResource, HostError> {
        let spec = ResourceSpecification {
            resource_type: request.resource_type.clone(),
            api_version: request.api_version.clone(),
            properties: request.properties.clone(),
            config: config_value(request.config.as_ref()),
            config_id: request.config_id.clone(),
        };
        let response = self
            .exchange(resolved, Operation::CreateOrUpdate, to_body(&spec), call)
            .await?;
        let resource = match response.status {
            200 | 201 => {
                let resource = parse_resource(Operation::CreateOrUpdate, &response)?;
                self.settle_created(resolved, resource, request, call)
                    .await?
            }
            202 => {
                let operation = parse_operation(Operation::CreateOrUpdate, &response)?;
                self.await_operation(resolved, Operation::CreateOrUpdate, operation, call)
                    .await?;
                let identifiers = match &request.known_identifiers {
                    Some(identifiers) => identifiers.clone(),
                    None => {
                        self.identifiers_from_preview(resolved, request, call)
                            .await?
                    }
                };
                let reference = ResourceReference {
                    resource_type: request.resource_type.clone(),
                    api_version: request.api_version.clone(),
                    identifiers,
                    config: config_value(request.config.as_ref()),
                    config_id: request.config_id.clone(),
                };
                let resource = match self.get_once(resolved, &reference, call).await? {
                    Some(resource) => resource,
                    None => {
                        return Err(HostError::contract(
                            codes::RESOURCE_NOT_FOUND,
                            "The extension reported the createOrUpdate operation as succeeded, but the final get found no resource.",
                        ));
                    }
                };
                self.settle_created(resolved, resource, request, call)
                    .await?
            }
            _ => return Err(self.unexpected(Operation::CreateOrUpdate, &response)),
        };
        self.deployed(resolved, resource, request.config.as_ref())
    }

    /// Follows a createOrUpdate RELO: polls get until the status is terminal.
    async fn settle_created(
        &self,
        resolved: &Resolved,
        mut resource: Resource,
        request: &CreateOrUpdateRequest,
        call: &CallHeaders,
    ) -> Result<Resource, HostError> {
        loop {
            let status = resource.effective_status();
            if status.is_succeeded() {
                return Ok(resource);
            }
            if status.is_terminal() {
                return Err(HostError::operation_ended(
                    Operation::CreateOrUpdate,
                    status.is_canceled(),
                    resource.error.as_ref(),
                ));
            }
            tracing::debug!(extension = %resolved.key.name, status = %status, "createOrUpdate is running (RELO); polling get");
            tokio::time::sleep(self.settings.relo_poll_interval).await;
            let reference = ResourceReference {
                resource_type: resource.resource_type.clone(),
                api_version: resource
                    .api_version
                    .clone()
                    .or_else(|| request.api_version.clone()),
                identifiers: resource.identifiers.clone(),
                config: config_value(request.config.as_ref()),
                config_id: resource
                    .config_id
                    .clone()
                    .or_else(|| request.config_id.clone()),
            };
            resource = self.get_once(resolved, &reference, call).await?.ok_or_else(|| {
                HostError::new(
                    HostErrorKind::NotFound,
                    404,
                    ArmError::new(
                        codes::RESOURCE_NOT_FOUND,
                        "The resource disappeared while its createOrUpdate operation was running.",
                    ),
                )
            })?;
        }
    }

    async fn identifiers_from_preview(
        &self,
        resolved: &Resolved,
        request: &CreateOrUpdateRequest,
        call: &CallHeaders,
    ) -> Result<Value, HostError> {
        let spec = ResourcePreviewSpecification {
            resource_type: request.resource_type.clone(),
            api_version: request.api_version.clone(),
            properties: request.properties.clone(),
            config: config_value(request.config.as_ref()),
            config_id: request.config_id.clone(),
            metadata: None,
        };
        let response = self
            .exchange(resolved, Operation::Preview, to_body(&spec), call)
            .await?;
        if response.status != 200 {
            return Err(self.unexpected(Operation::Preview, &response));
        }
        let preview = validate::parse_resource_preview(&response.body)
            .map_err(|violation| HostError::contract_violation(Operation::Preview, &violation))?;
        match preview.identifiers.as_object() {
            Some(identifiers) if !identifiers.is_empty() => Ok(preview.identifiers),
            _ => Err(HostError::contract(
                codes::RESPONSE_MISSING_IDENTIFIERS,
                "The createOrUpdate operation succeeded, but its identifiers are unknown: the caller gave none and preview could not compute them.",
            )),
        }
    }

    /// Reads a resource; `Ok(None)` when the extension answers 404 (other than `DeploymentTargetNotFound`).
    pub async fn get(
        &self,
        key: &ExtensionKey,
        locator: &ResourceLocator,
        context: &CallContext,
    ) -> Result<Option<DeployedResource>, HostError> {
        let resolved = self.resolve(key)?;
        let call = self.call_headers(context);
        match self
            .get_once(&resolved, &locator.to_reference(), &call)
            .await?
        {
            Some(resource) => self
                .deployed(&resolved, resource, locator.config.as_ref())
                .map(Some),
            None => Ok(None),
        }
    }

    async fn get_once(
        &self,
        resolved: &Resolved,
        reference: &ResourceReference,
        call: &CallHeaders,
    ) -> Result<Option<Resource>, HostError> {
        let response = self
            .exchange(resolved, Operation::Get, to_body(reference), call)
            .await?;
        match response.status {
            200 => parse_resource(Operation::Get, &response).map(Some),
            404 => match self.unexpected(Operation::Get, &response) {
                error if error.kind() == HostErrorKind::DeploymentTargetNotFound => Err(error),
                _ => Ok(None),
            },
            _ => Err(self.unexpected(Operation::Get, &response)),
        }
    }

    /// Deletes a resource and waits until it is gone.
    pub async fn delete(
        &self,
        key: &ExtensionKey,
        locator: &ResourceLocator,
        context: &CallContext,
    ) -> Result<(), HostError> {
        let deadline = self.settings.operation_deadline;
        let run = async {
            let mut progress = self.begin_delete(key, locator, context).await?;
            loop {
                match progress {
                    DeleteProgress::Deleted => return Ok(()),
                    DeleteProgress::Pending(pending) => {
                        tokio::time::sleep(pending.retry_after).await;
                        progress = self.poll_delete(&pending, context).await?;
                    }
                }
            }
        };
        match tokio::time::timeout(deadline, run).await {
            Ok(result) => result,
            Err(_) => Err(HostError::deadline_exceeded(Operation::Delete, deadline)),
        }
    }

    /// Sends delete once: done, or a [`PendingDelete`] to poll with [`Self::poll_delete`].
    pub async fn begin_delete(
        &self,
        key: &ExtensionKey,
        locator: &ResourceLocator,
        context: &CallContext,
    ) -> Result<DeleteProgress, HostError> {
        let resolved = self.resolve(key)?;
        let call = self.call_headers(context);
        let reference = locator.to_reference();
        let response = self
            .exchange(&resolved, Operation::Delete, to_body(&reference), &call)
            .await?;
        match response.status {
            204 => Ok(DeleteProgress::Deleted),
            200 => {
                let resource = parse_resource(Operation::Delete, &response)?;
                let status = resource.effective_status();
                if !status.is_terminal() && !resolved.entry.transport().allows_delete_relo() {
                    tracing::warn!(extension = %resolved.key.name, status = %status, "delete answered with RELO, which the extension's contract forbids");
                    return Err(HostError::contract(
                        codes::DELETE_RELO_NOT_ALLOWED,
                        format!(
                            "The extension answered delete with the resource in status '{status}' (a resource-based long-running operation); its contract allows only 204, or 202 with an operation, for delete."
                        ),
                    ));
                }
                self.delete_progress_from_resource(&resolved, resource, reference)
            }
            202 => {
                let operation = parse_operation(Operation::Delete, &response)?;
                self.delete_progress_from_operation(&resolved, operation)
            }
            404 => match self.unexpected(Operation::Delete, &response) {
                error if error.kind() == HostErrorKind::NotFound => Ok(DeleteProgress::Deleted),
                error => Err(error),
            },
            _ => Err(self.unexpected(Operation::Delete, &response)),
        }
    }

    /// Polls a pending delete once.
    pub async fn poll_delete(
        &self,
        pending: &PendingDelete,
        context: &CallContext,
    ) -> Result<DeleteProgress, HostError> {
        let resolved = self.resolve(&pending.key)?;
        let call = self.call_headers(context);
        match &pending.wait {
            PendingWait::Resource(reference) => {
                match self.get_once(&resolved, reference, &call).await? {
                    None => Ok(DeleteProgress::Deleted),
                    Some(resource) => {
                        self.delete_progress_from_resource(&resolved, resource, reference.clone())
                    }
                }
            }
            PendingWait::Operation(handle) => {
                let operation = self
                    .poll_operation(&resolved, Operation::Delete, handle, &call)
                    .await?;
                self.delete_progress_from_operation(&resolved, operation)
            }
        }
    }

    fn delete_progress_from_resource(
        &self,
        resolved: &Resolved,
        resource: Resource,
        mut reference: ResourceReference,
    ) -> Result<DeleteProgress, HostError> {
        let status = resource.effective_status();
        // A terminal `Succeeded` means the extension finished the delete even if the resource is still
        // gettable with a persisted status; waiting for a 404 that may never come would only hit the deadline.
        if status.is_succeeded() {
            return Ok(DeleteProgress::Deleted);
        }
        if status.is_terminal() {
            return Err(HostError::operation_ended(
                Operation::Delete,
                status.is_canceled(),
                resource.error.as_ref(),
            ));
        }
        if reference.config_id.is_none() {
            reference.config_id = resource.config_id.clone();
        }
        Ok(DeleteProgress::Pending(Box::new(PendingDelete {
            key: resolved.key.clone(),
            wait: PendingWait::Resource(reference),
            retry_after: self.settings.relo_poll_interval,
        })))
    }

    fn delete_progress_from_operation(
        &self,
        resolved: &Resolved,
        operation: LongRunningOperation,
    ) -> Result<DeleteProgress, HostError> {
        if operation.status.is_succeeded() {
            return Ok(DeleteProgress::Deleted);
        }
        if operation.status.is_terminal() {
            return Err(HostError::operation_ended(
                Operation::Delete,
                operation.status.is_canceled(),
                operation.error.as_ref(),
            ));
        }
        let retry_after = self.poll_interval(&operation);
        // Validation guarantees a handle object on non-terminal operations.
        let handle = operation
            .operation_handle
            .unwrap_or(Value::Object(Map::new()));
        Ok(DeleteProgress::Pending(Box::new(PendingDelete {
            key: resolved.key.clone(),
            wait: PendingWait::Operation(handle),
            retry_after,
        })))
    }

    /// Polls a stepwise LRO until it is terminal; `Failed`/`Canceled` become errors.
    async fn await_operation(
        &self,
        resolved: &Resolved,
        operation_kind: Operation,
        mut operation: LongRunningOperation,
        call: &CallHeaders,
    ) -> Result<(), HostError> {
        loop {
            if operation.status.is_succeeded() {
                return Ok(());
            }
            if operation.status.is_terminal() {
                return Err(HostError::operation_ended(
                    operation_kind,
                    operation.status.is_canceled(),
                    operation.error.as_ref(),
                ));
            }
            let wait = self.poll_interval(&operation);
            tracing::debug!(extension = %resolved.key.name, status = %operation.status, wait_ms = wait.as_millis() as u64, "long-running operation is running; polling");
            tokio::time::sleep(wait).await;
            let handle = operation
                .operation_handle
                .clone()
                .unwrap_or(Value::Object(Map::new()));
            operation = self
                .poll_operation(resolved, operation_kind, &handle, call)
                .await?;
        }
    }

    async fn poll_operation(
        &self,
        resolved: &Resolved,
        operation_kind: Operation,
        handle: &Value,
        call: &CallHeaders,
    ) -> Result<LongRunningOperation, HostError> {
        let response = self
            .exchange(
                resolved,
                Operation::GetLongRunningOperation,
                to_body(handle),
                call,
            )
            .await?;
        match response.status {
            200 => parse_operation(Operation::GetLongRunningOperation, &response),
            _ => {
                let error = self.unexpected(Operation::GetLongRunningOperation, &response);
                tracing::debug!(extension = %resolved.key.name, operation = %operation_kind, code = %error.code(), "polling failed");
                Err(error)
            }
        }
    }

    fn poll_interval(&self, operation: &LongRunningOperation) -> Duration {
        let requested = Duration::from_secs(u64::from(operation.retry_after_or_default()));
        self.settings.clamp_poll_interval(requested)
    }

    fn resolve(&self, key: &ExtensionKey) -> Result<Resolved, HostError> {
        let entry = self
            .registry
            .resolve(&key.name, &key.version)
            .ok_or_else(|| HostError::not_registered(&key.name, &key.version))?;
        Ok(Resolved {
            key: key.clone(),
            entry,
        })
    }

    fn deployed(
        &self,
        resolved: &Resolved,
        resource: Resource,
        config: Option<&ExtensionConfig>,
    ) -> Result<DeployedResource, HostError> {
        let needs_config = config.is_some_and(|config| !config.is_empty());
        let parts = ReferenceIdParts::for_resource(resolved.entry.name(), &resource, needs_config);
        let reference_id = parts.to_reference_id().map_err(|error| {
            HostError::contract(
                codes::INVALID_REFERENCE_ID,
                format!("No reference id can be derived for the resource: {error}."),
            )
        })?;
        let (echoed_config, secret_config_keys) = split_echo(config, resource.config.as_ref());
        let status = resource.effective_status();
        Ok(DeployedResource {
            reference_id,
            extension_name: resolved.entry.name().to_owned(),
            resource_type: resource.resource_type,
            api_version: resource.api_version,
            identifiers: resource.identifiers,
            properties: resource.properties,
            echoed_config,
            secret_config_keys,
            config_id: resource.config_id,
            status,
        })
    }

    fn call_headers(&self, context: &CallContext) -> CallHeaders {
        CallHeaders {
            correlation_id: context.correlation_id.clone().unwrap_or_else(random_uuid),
            traceparent: context.traceparent.clone().unwrap_or_else(new_traceparent),
            context: context.clone(),
        }
    }

    fn request_headers(&self, call: &CallHeaders) -> Vec<(String, String)> {
        let context = &call.context;
        let mut headers = vec![
            (
                headers::CLIENT_REQUEST_ID.to_owned(),
                context
                    .client_request_id
                    .clone()
                    .unwrap_or_else(random_uuid),
            ),
            (
                headers::CORRELATION_REQUEST_ID.to_owned(),
                call.correlation_id.clone(),
            ),
            (headers::REFERER.to_owned(), self.referer.clone()),
            (headers::TRACEPARENT.to_owned(), call.traceparent.clone()),
            (
                headers::TRACESTATE.to_owned(),
                context.tracestate.clone().unwrap_or_default(),
            ),
        ];
        let optional = [
            (headers::ACCEPT_LANGUAGE, &context.accept_language),
            (headers::CLIENT_TENANT_ID, &context.client_tenant_id),
            (headers::HOME_TENANT_ID, &context.home_tenant_id),
        ];
        for (name, value) in optional {
            if let Some(value) = value {
                headers.push((name.to_owned(), value.clone()));
            }
        }
        headers
    }

    /// One logical request, its latency (retries included) recorded by extension, operation and outcome.
    async fn exchange(
        &self,
        resolved: &Resolved,
        operation: Operation,
        body: Vec<u8>,
        call: &CallHeaders,
    ) -> Result<TransportResponse, HostError> {
        let started = Instant::now();
        let (answer, outcome) = self
            .exchange_attempts(resolved, operation, body, call)
            .await;
        self.metrics.extension_call(
            resolved.entry.name(),
            operation.name(),
            outcome,
            started.elapsed(),
        );
        answer
    }

    /// One logical request: size check, per-request timeout, retries. Returns the final response and how the last
    /// attempt ended.
    async fn exchange_attempts(
        &self,
        resolved: &Resolved,
        operation: Operation,
        body: Vec<u8>,
        call: &CallHeaders,
    ) -> (Result<TransportResponse, HostError>, CallOutcome) {
        let name = resolved.entry.name();
        if body.len() > self.settings.max_request_bytes {
            tracing::warn!(extension = %name, operation = %operation, size = body.len(), "request body over the limit; not sent");
            return (
                Err(HostError::request_too_large(
                    body.len(),
                    self.settings.max_request_bytes,
                )),
                CallOutcome::TransportError,
            );
        }
        let timeout = resolved
            .entry
            .timeout()
            .unwrap_or(self.settings.request_timeout);
        let policy = &self.settings.retry;
        let mut attempt: u32 = 1;
        loop {
            let request = TransportRequest {
                operation,
                extension_version: resolved.key.version.clone(),
                body: body.clone(),
                headers: self.request_headers(call),
                max_response_bytes: self.settings.max_response_bytes,
            };
            let started = Instant::now();
            let outcome =
                tokio::time::timeout(timeout, resolved.entry.transport().send(request)).await;
            let may_retry = attempt < policy.max_attempts;
            let delay = match outcome {
                Err(_) => {
                    tracing::warn!(extension = %name, operation = %operation, attempt, timeout_ms = timeout.as_millis() as u64, "extension timed out");
                    return (
                        Err(HostError::timeout(operation, timeout)),
                        CallOutcome::Timeout,
                    );
                }
                Ok(Err(error)) => {
                    let retryable = error.request_not_sent()
                        || (operation != Operation::CreateOrUpdate
                            && matches!(
                                error,
                                cairn_extension_contract::TransportError::Io { .. }
                            ));
                    tracing::warn!(extension = %name, operation = %operation, attempt, error = %error, retryable, "extension call failed");
                    if !(retryable && may_retry) {
                        return (
                            Err(HostError::from_transport(operation, &error)),
                            CallOutcome::TransportError,
                        );
                    }
                    policy.backoff(attempt)
                }
                Ok(Ok(response)) => {
                    let status = response.status;
                    tracing::debug!(extension = %name, operation = %operation, attempt, status, elapsed_us = started.elapsed().as_micros() as u64, "extension answered");
                    let throttled = status == 429;
                    let server_error = status >= 500 && operation != Operation::CreateOrUpdate;
                    if !((throttled || server_error) && may_retry) {
                        return (Ok(response), CallOutcome::Status(status));
                    }
                    if throttled {
                        retry_after(&response)
                            .map(|wait| wait.min(policy.max_retry_after))
                            .unwrap_or_else(|| policy.backoff(attempt))
                    } else {
                        policy.backoff(attempt)
                    }
                }
            };
            tracing::debug!(extension = %name, operation = %operation, attempt, delay_ms = delay.as_millis() as u64, "retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// The error for a response the operation does not expect as success.
    fn unexpected(&self, operation: Operation, response: &TransportResponse) -> HostError {
        if response.status >= 400 {
            return match validate::parse_error_response(&response.body) {
                Ok(error_response) => {
                    HostError::from_extension(operation, response.status, &error_response.error)
                }
                Err(_) => HostError::new(
                    if response.status == 404 {
                        HostErrorKind::NotFound
                    } else {
                        HostErrorKind::ContractViolation
                    },
                    if response.status == 404 { 404 } else { 502 },
                    ArmError::new(
                        codes::EXTENSION_ERROR_WITHOUT_BODY,
                        format!(
                            "The extension answered the {operation} request with HTTP {} without a valid error body.",
                            response.status
                        ),
                    ),
                ),
            };
        }
        HostError::contract(
            codes::UNEXPECTED_STATUS,
            format!(
                "The extension answered the {operation} request with unexpected HTTP {}.",
                response.status
            ),
        )
    }
}

fn parse_resource(
    operation: Operation,
    response: &TransportResponse,
) -> Result<Resource, HostError> {
    validate::parse_resource(&response.body)
        .map_err(|violation| HostError::contract_violation(operation, &violation))
}

fn parse_operation(
    operation: Operation,
    response: &TransportResponse,
) -> Result<LongRunningOperation, HostError> {
    validate::parse_long_running_operation(&response.body)
        .map_err(|violation| HostError::contract_violation(operation, &violation))
}

fn config_value(config: Option<&ExtensionConfig>) -> Option<Value> {
    config.map(|config| Value::Object(config.expose().clone()))
}

fn split_echo(
    config: Option<&ExtensionConfig>,
    echoed: Option<&Value>,
) -> (Option<EchoedConfig>, Vec<String>) {
    match config {
        Some(config) => {
            let (echoed, secrets) = config.split_echo(echoed);
            (Some(echoed), secrets)
        }
        None => (None, Vec::new()),
    }
}

fn to_body<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing contract models cannot fail: every map key is a string.
    serde_json::to_vec(value).unwrap_or_default()
}

/// `Retry-After` in seconds (the HTTP-date form is not used by extensions and is ignored).
fn retry_after(response: &TransportResponse) -> Option<Duration> {
    let seconds: u64 = response.header(headers::RETRY_AFTER)?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// A v4 UUID from the thread-local RNG (uuid's own `new_v4` makes a getrandom syscall per id, which shows
/// in the host's per-call overhead).
fn random_uuid() -> String {
    uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .to_string()
}

fn new_traceparent() -> String {
    let trace: u128 = rand::random();
    let span: u64 = rand::random();
    format!("00-{trace:032x}-{span:016x}-01")
}

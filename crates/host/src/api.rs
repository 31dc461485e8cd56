//! The host's HTTP API, an axum `Router` the server mounts (e.g. under `/extensibility`).
//!
//! | Method + path | Meaning |
//! |---|---|
//! | `GET /extensions` | registered extensions (`ExtensionListing[]` under `value`) |
//! | `GET /extensions/{name}/{version}/resources/{referenceId}` | get a `00` resource |
//! | `DELETE /extensions/{name}/{version}/resources/{referenceId}` | delete a `00` resource |
//! | `POST /extensions/{name}/{version}/resources/{referenceId}/getWithConfig` | get a `01` resource; body = config object |
//! | `POST /extensions/{name}/{version}/resources/{referenceId}/deleteWithConfig` | delete a `01` resource; body = config object |
//! | `GET /{name}/{version}/operations/{operationId}` | poll a long-running delete (the `Location` handed out) |
//! | `GET /extensions/{name}/{version}/operations/{operationId}` | the same (the earlier `Location` shape, kept as an alias) |
//!
//! `referenceId` is a cairn reference id exactly as formatted (its escapes are read from the raw path, so
//! `%3A` may stay encoded). A delete that does not finish at once answers **202** with a host `Location` in
//! seed 004's shape — this host's scheme, authority and mount prefix, then the extension's name and version
//! first in the path: `/{name}/{version}/operations/{id}` — and `Retry-After`. The host keeps the extension's
//! handle (stepwise LRO) or resource reference (RELO) under that id in a [`HostOperationStore`] (the server's
//! store, so a `Location` keeps answering across a restart; in memory when none is given), sealed there since it
//! can hold the config's secrets, until the host's operation deadline. A GET on the location polls the extension
//! once with it and relays `200 {"status": ...}` (`error` when `Failed`/`Canceled`); a finished operation is
//! forgotten (GET then answers 404 `OperationNotFound`). Errors are ARM-shaped. Every response carries
//! `x-ms-request-id` (the caller's `x-ms-client-request-id`, else a new id).

use crate::error::{ArmError, HostError, HostErrorKind};
use crate::host::{
    CallContext, DeleteProgress, ExtensionHost, ExtensionKey, PendingDelete, ResourceLocator,
};
use crate::operations::MemoryOperations;
use crate::secret::ExtensionConfig;
use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cairn_extension_contract::{ReferenceId, codes, headers as contract_headers};
use cairn_store::{
    HostOperationRecord, HostOperationStore, NewHostOperation, SecretString, StoreError, Timestamp,
};
use serde_json::{Value, json};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Options of the host API.
#[derive(Clone, Default)]
pub struct HostApiOptions {
    /// Public base URL (scheme + authority, e.g. `https://cairn.example`) for `Location`; when absent the
    /// request's `Host` header with `http` is used.
    pub public_base_url: Option<String>,
    /// Where pending operations are kept; when absent, in memory (they do not survive a restart).
    pub operations: Option<Arc<dyn HostOperationStore>>,
}

impl fmt::Debug for HostApiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostApiOptions")
            .field("public_base_url", &self.public_base_url)
            .field("persistent_operations", &self.operations.is_some())
            .finish()
    }
}

struct ApiState {
    host: Arc<ExtensionHost>,
    public_base_url: Option<String>,
    operations: Arc<dyn HostOperationStore>,
}

/// Builds the router.
pub fn router(host: Arc<ExtensionHost>, options: HostApiOptions) -> Router {
    let state = Arc::new(ApiState {
        host,
        public_base_url: options.public_base_url,
        operations: options
            .operations
            .unwrap_or_else(|| Arc::new(MemoryOperations::default())),
    });
    Router::new()
        .route("/extensions", get(list_extensions))
        .route(
            "/extensions/{name}/{version}/resources/{reference_id}",
            get(get_resource).delete(delete_resource),
        )
        .route(
            "/extensions/{name}/{version}/resources/{reference_id}/getWithConfig",
            post(get_resource_with_config),
        )
        .route(
            "/extensions/{name}/{version}/resources/{reference_id}/deleteWithConfig",
            post(delete_resource_with_config),
        )
        .route(
            "/{name}/{version}/operations/{operation_id}",
            get(get_operation),
        )
        .route(
            "/extensions/{name}/{version}/operations/{operation_id}",
            get(get_operation),
        )
        .layer(axum::middleware::from_fn(echo_request_id))
        .with_state(state)
}

/// Every response carries `x-ms-request-id`: the caller's `x-ms-client-request-id`, or a fresh id.
async fn echo_request_id(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let id = request
        .headers()
        .get(contract_headers::CLIENT_REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response
            .headers_mut()
            .insert(contract_headers::REQUEST_ID, value);
    }
    response
}

impl IntoResponse for HostError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        (status, axum::Json(self.to_body())).into_response()
    }
}

type ApiResult = Result<Response, HostError>;

async fn list_extensions(State(state): State<Arc<ApiState>>) -> Response {
    axum::Json(json!({ "value": state.host.registry().list() })).into_response()
}

/// The reference id segment as sent (axum's `Path` would decode `%2F` into `/`, which ids cannot hold).
fn raw_reference_id(uri: &Uri) -> Result<ReferenceId, HostError> {
    let segments: Vec<&str> = uri.path().split('/').collect();
    let position = segments
        .iter()
        .rposition(|segment| *segment == "resources")
        .ok_or_else(|| HostError::invalid_request("The path has no reference id."))?;
    let raw = segments.get(position + 1).copied().unwrap_or_default();
    ReferenceId::parse(raw).map_err(|error| {
        HostError::new(
            HostErrorKind::InvalidRequest,
            400,
            ArmError::new(
                codes::INVALID_REFERENCE_ID,
                format!("The reference id is invalid: {error}."),
            ),
        )
    })
}

fn locate(
    name: &str,
    uri: &Uri,
    config: Option<ExtensionConfig>,
    with_config_route: bool,
) -> Result<ResourceLocator, HostError> {
    let id = raw_reference_id(uri)?;
    let invalid_id = |message: String| {
        HostError::new(
            HostErrorKind::InvalidRequest,
            400,
            ArmError::new(codes::INVALID_REFERENCE_ID, message),
        )
    };
    if id.needs_config() && !with_config_route {
        return Err(invalid_id(
            "The reference id has flags '01': its config is required; use getWithConfig or deleteWithConfig.".into(),
        ));
    }
    if !id.needs_config() && with_config_route {
        return Err(invalid_id(
            "The reference id has flags '00': use GET or DELETE on the resource.".into(),
        ));
    }
    let (extension_name, locator) =
        ResourceLocator::from_reference_id(&id, config).map_err(|error| {
            invalid_id(format!(
                "The reference id is not a cairn reference id: {error}."
            ))
        })?;
    if !extension_name.eq_ignore_ascii_case(name) {
        return Err(invalid_id(format!(
            "The reference id belongs to extension '{extension_name}', not '{name}'."
        )));
    }
    Ok(locator)
}

fn context_from(request_headers: &HeaderMap) -> CallContext {
    let value = |name: &str| {
        request_headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    CallContext {
        client_request_id: None,
        correlation_id: value(contract_headers::CORRELATION_REQUEST_ID),
        traceparent: value(contract_headers::TRACEPARENT),
        tracestate: value(contract_headers::TRACESTATE),
        accept_language: value(contract_headers::ACCEPT_LANGUAGE),
        client_tenant_id: value(contract_headers::CLIENT_TENANT_ID),
        home_tenant_id: value(contract_headers::HOME_TENANT_ID),
    }
}

async fn read_config(state: &ApiState, body: Body) -> Result<ExtensionConfig, HostError> {
    let limit = state.host.settings().max_request_bytes;
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| HostError::request_too_large(limit.saturating_add(1), limit))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| {
        HostError::invalid_request(
            "The request body must be the extension config as a JSON object.",
        )
    })?;
    ExtensionConfig::from_value(value).ok_or_else(|| {
        HostError::invalid_request(
            "The request body must be the extension config as a JSON object.",
        )
    })
}

async fn get_resource(
    State(state): State<Arc<ApiState>>,
    Path((name, version, _)): Path<(String, String, String)>,
    uri: Uri,
    request_headers: HeaderMap,
) -> ApiResult {
    let locator = locate(&name, &uri, None, false)?;
    respond_get(&state, name, version, locator, &request_headers).await
}

async fn get_resource_with_config(
    State(state): State<Arc<ApiState>>,
    Path((name, version, _)): Path<(String, String, String)>,
    uri: Uri,
    request_headers: HeaderMap,
    body: Body,
) -> ApiResult {
    let config = read_config(&state, body).await?;
    let locator = locate(&name, &uri, Some(config), true)?;
    respond_get(&state, name, version, locator, &request_headers).await
}

async fn respond_get(
    state: &ApiState,
    name: String,
    version: String,
    locator: ResourceLocator,
    request_headers: &HeaderMap,
) -> ApiResult {
    let key = ExtensionKey::new(name, version);
    match state
        .host
        .get(&key, &locator, &context_from(request_headers))
        .await?
    {
        Some(resource) => Ok(axum::Json(resource).into_response()),
        None => Err(HostError::new(
            HostErrorKind::NotFound,
            404,
            ArmError::new(
                codes::RESOURCE_NOT_FOUND,
                "The extension reports no such resource.",
            ),
        )),
    }
}

async fn delete_resource(
    State(state): State<Arc<ApiState>>,
    Path((name, version, _)): Path<(String, String, String)>,
    uri: Uri,
    original: OriginalUri,
    request_headers: HeaderMap,
) -> ApiResult {
    let locator = locate(&name, &uri, None, false)?;
    respond_delete(
        &state,
        name,
        version,
        locator,
        &uri,
        &original.0,
        &request_headers,
    )
    .await
}

async fn delete_resource_with_config(
    State(state): State<Arc<ApiState>>,
    Path((name, version, _)): Path<(String, String, String)>,
    uri: Uri,
    original: OriginalUri,
    request_headers: HeaderMap,
    body: Body,
) -> ApiResult {
    let config = read_config(&state, body).await?;
    let locator = locate(&name, &uri, Some(config), true)?;
    respond_delete(
        &state,
        name,
        version,
        locator,
        &uri,
        &original.0,
        &request_headers,
    )
    .await
}

async fn respond_delete(
    state: &ApiState,
    name: String,
    version: String,
    locator: ResourceLocator,
    uri: &Uri,
    original: &Uri,
    request_headers: &HeaderMap,
) -> ApiResult {
    let key = ExtensionKey::new(name.clone(), version.clone());
    match state
        .host
        .begin_delete(&key, &locator, &context_from(request_headers))
        .await?
    {
        DeleteProgress::Deleted => Ok(StatusCode::NO_CONTENT.into_response()),
        DeleteProgress::Pending(pending) => {
            let operation_id = uuid::Uuid::new_v4().simple().to_string();
            let retry_after = pending.retry_after;
            let location = operation_location(
                state,
                uri,
                original,
                request_headers,
                &name,
                &version,
                &operation_id,
            );
            let now = Timestamp::now();
            let expires_at = now.saturating_add(state.host.settings().operation_deadline);
            remember(state, operation_id, &pending, expires_at, now).await?;
            Ok(accepted(&location, retry_after))
        }
    }
}

/// Stores (or updates) a pending operation under `operation_id`.
async fn remember(
    state: &ApiState,
    operation_id: String,
    pending: &PendingDelete,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<(), HostError> {
    let operation = NewHostOperation {
        id: operation_id,
        extension_name: pending.key().name.clone(),
        extension_version: pending.key().version.clone(),
        state: SecretString::from(pending.to_state().expose().clone()),
        expires_at,
    };
    state
        .operations
        .put_host_operation(operation, now)
        .await
        .map_err(storage_error)
}

/// A store failure as a host error (500); store messages never hold secret values.
fn storage_error(error: StoreError) -> HostError {
    tracing::error!(%error, "the host API could not access its pending operations");
    HostError::new(
        HostErrorKind::Storage,
        500,
        ArmError::new(
            error.arm_code(),
            format!("The host could not keep track of the operation: failed to {error}."),
        ),
    )
}

fn accepted(location: &str, retry_after: Duration) -> Response {
    let mut response = StatusCode::ACCEPTED.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_seconds(retry_after)),
    );
    response
}

fn retry_after_seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// `{scheme}://{authority}{mount prefix}/{name}/{version}/operations/{id}`: seed 004's rewriting puts the extension's
/// name and version first in the path of the host's own endpoint.
fn operation_location(
    state: &ApiState,
    uri: &Uri,
    original: &Uri,
    request_headers: &HeaderMap,
    name: &str,
    version: &str,
    operation_id: &str,
) -> String {
    let original_path = original.path();
    let prefix = original_path.strip_suffix(uri.path()).unwrap_or("");
    let base = match &state.public_base_url {
        Some(base) => base.trim_end_matches('/').to_owned(),
        None => {
            let host = request_headers
                .get(header::HOST)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("localhost");
            format!("http://{host}")
        }
    };
    let encode = |segment: &str| {
        let mut url = reqwest::Url::parse("http://x/").expect("static URL parses");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.push(segment);
        }
        url.path().trim_start_matches('/').to_owned()
    };
    format!(
        "{base}{prefix}/{}/{}/operations/{operation_id}",
        encode(name),
        encode(version)
    )
}

async fn get_operation(
    State(state): State<Arc<ApiState>>,
    Path((name, version, operation_id)): Path<(String, String, String)>,
    request_headers: HeaderMap,
) -> ApiResult {
    let not_found = || {
        HostError::new(
            HostErrorKind::NotFound,
            404,
            ArmError::new(
                codes::OPERATION_NOT_FOUND,
                "The operation is unknown or has expired.",
            ),
        )
    };
    let now = Timestamp::now();
    let record = state
        .operations
        .get_host_operation(&operation_id, now)
        .await
        .map_err(storage_error)?
        .ok_or_else(not_found)?;
    if !record.extension_name.eq_ignore_ascii_case(&name) || record.extension_version != version {
        return Err(not_found());
    }
    let pending = pending_of(&record).ok_or_else(|| {
        storage_error(StoreError::corrupt(
            cairn_store::Entity::HostOperation,
            "the pending operation's state is not one this host wrote",
        ))
    })?;
    let outcome = state
        .host
        .poll_delete(&pending, &context_from(&request_headers))
        .await;
    let finish = |status: &'static str, error: Option<Value>| {
        let state = state.clone();
        let operation_id = operation_id.clone();
        async move {
            state
                .operations
                .delete_host_operation(&operation_id, Timestamp::now())
                .await
                .map_err(storage_error)?;
            let mut body = json!({ "status": status });
            if let Some(error) = error {
                body["error"] = error;
            }
            Ok::<_, HostError>(axum::Json(body).into_response())
        }
    };
    match outcome {
        Ok(DeleteProgress::Deleted) => finish("Succeeded", None).await,
        Ok(DeleteProgress::Pending(next)) => {
            let retry_after = next.retry_after;
            remember(
                &state,
                record.id.clone(),
                &next,
                record.expires_at,
                Timestamp::now(),
            )
            .await?;
            let mut response = axum::Json(json!({ "status": "Running" })).into_response();
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_seconds(retry_after)),
            );
            Ok(response)
        }
        Err(error)
            if matches!(
                error.kind(),
                HostErrorKind::OperationFailed | HostErrorKind::OperationCanceled
            ) =>
        {
            let status = if error.kind() == HostErrorKind::OperationCanceled {
                "Canceled"
            } else {
                "Failed"
            };
            let body = serde_json::to_value(error.error()).unwrap_or(Value::Null);
            finish(status, Some(body)).await
        }
        Err(error) => Err(error),
    }
}

fn pending_of(record: &HostOperationRecord) -> Option<PendingDelete> {
    use cairn_store::ExposeSecret;
    PendingDelete::from_state(
        ExtensionKey::new(
            record.extension_name.clone(),
            record.extension_version.clone(),
        ),
        record.state.expose_secret(),
    )
}

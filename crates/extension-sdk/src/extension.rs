//! [`Extension`]: registered handlers, versions and config, dispatching v2 operations and serving them as
//! an axum [`Router`] (the v2 HTTP routes, `GET /ping`, and optionally the gRPC service).

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cairn_extension_contract::transport::Operation;
use cairn_extension_contract::v2::{
    self, ResourcePreview, ResourcePreviewMetadata, ResourcePreviewSpecification,
    ResourceReference, ResourceSpecification,
};
use cairn_extension_contract::{JsonPointer, headers};
use cairn_extension_types::TypeSet;
use serde_json::{Value, json};

use crate::config::{ExtensionConfig, echo_config};
use crate::error::{ExtensionError, codes};
use crate::handler::{
    Applied, Apply, Deleted, DynHandler, Lookup, PreviewInput, RawState, RequestInfo,
    ResourceHandler, Typed,
};
use crate::lro::OperationTracker;

/// The largest request body accepted (the contract's 4 MB limit).
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// An extension: a name, the versions it serves, a config type and one handler per resource type.
///
/// ```
/// # use cairn_extension_sdk::{Extension, NoConfig};
/// let extension = Extension::<NoConfig>::new("Echo", "1.0.0");
/// let router = extension.router(); // serve with axum, or wrap in an InProcessTransport
/// ```
pub struct Extension<C: ExtensionConfig> {
    name: String,
    versions: Vec<String>,
    handlers: HashMap<String, Arc<dyn DynHandler<C>>>,
    fallback: Option<Arc<dyn DynHandler<C>>>,
    operations: Option<OperationTracker>,
    config_guard: Option<ConfigGuard<C>>,
    types: Option<Arc<TypeSet>>,
    _config: PhantomData<fn() -> C>,
}

/// See [`Extension::config_guard`].
type ConfigGuard<C> = Arc<dyn Fn(C) -> Result<C, ExtensionError> + Send + Sync>;

impl<C: ExtensionConfig> Extension<C> {
    /// An extension serving `version` (matched exactly against the `{extensionVersion}` route segment).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            versions: vec![version.into()],
            handlers: HashMap::new(),
            fallback: None,
            operations: None,
            config_guard: None,
            types: None,
            _config: PhantomData,
        }
    }

    /// Declares the extension's resource types and config type (Bicep's type format): served by `GetTypeFiles`
    /// over gRPC, written by the binaries' `--types DIR`, and checked against by a host before deploy.
    pub fn types(mut self, types: TypeSet) -> Self {
        self.types = Some(Arc::new(types));
        self
    }

    /// The declared types, if any.
    pub fn type_set(&self) -> Option<&Arc<TypeSet>> {
        self.types.as_ref()
    }

    /// The declared types as files: `index.json` and `types.json`, by name.
    pub fn type_files(&self) -> Option<BTreeMap<String, String>> {
        self.types.as_ref().map(|types| types.to_files())
    }

    /// Serves another version with the same handlers.
    pub fn also_version(mut self, version: impl Into<String>) -> Self {
        self.versions.push(version.into());
        self
    }

    /// Registers a handler for its resource type (replacing any earlier one for the same type).
    pub fn handler<H: ResourceHandler<C>>(mut self, handler: H) -> Self {
        let key = handler.resource_type().to_ascii_lowercase();
        self.handlers.insert(key, Arc::new(Typed(handler)));
        self
    }

    /// Registers a handler for every resource type no [`Extension::handler`] serves: for extensions whose
    /// types are not a fixed list but found at run time (e.g. the kinds a Kubernetes API server discovers,
    /// custom resources included). Its [`ResourceHandler::resource_type`] is not used for routing; it
    /// reads the type from each request and answers `UnsupportedResourceType` (or a more specific error)
    /// itself for a type it cannot serve.
    pub fn fallback<H: ResourceHandler<C>>(mut self, handler: H) -> Self {
        self.fallback = Some(Arc::new(Typed(handler)));
        self
    }

    /// Answers `/longRunningOperation/get` from `tracker` (handlers start operations on the same tracker).
    pub fn operations(mut self, tracker: OperationTracker) -> Self {
        self.operations = Some(tracker);
        self
    }

    /// Passes every parsed config through `guard` before `configId` is computed or a handler runs: the place
    /// for a policy of the process hosting the extension (e.g. which directories a server lets it touch),
    /// which a config parsed from the request alone cannot know. An error refuses the request, previews
    /// included.
    pub fn config_guard(
        mut self,
        guard: impl Fn(C) -> Result<C, ExtensionError> + Send + Sync + 'static,
    ) -> Self {
        self.config_guard = Some(Arc::new(guard));
        self
    }

    /// The extension's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The first registered version (what a gRPC server, which carries no version, serves).
    pub fn primary_version(&self) -> &str {
        self.versions
            .first()
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// The v2 HTTP routes: the four `POST /{v}/resource/*`, `POST /{v}/longRunningOperation/get`, and
    /// `GET /ping`. Every response carries `x-ms-request-id` (the incoming client request id) and `Date`.
    pub fn router(self) -> Router {
        let dispatcher = Arc::new(Dispatcher {
            name: self.name,
            versions: self.versions,
            handlers: self.handlers,
            fallback: self.fallback,
            operations: self.operations,
            config_guard: self.config_guard,
        });
        Router::new()
            .route("/{version}/resource/{operation}", post(resource_route::<C>))
            .route(
                "/{version}/longRunningOperation/get",
                post(operation_route::<C>),
            )
            .route("/ping", get(ping_route::<C>))
            .fallback(not_found_route)
            .method_not_allowed_fallback(method_not_allowed_route)
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .layer(axum::middleware::from_fn(correlate))
            .with_state(dispatcher)
    }
}

struct Dispatcher<C: ExtensionConfig> {
    name: String,
    versions: Vec<String>,
    handlers: HashMap<String, Arc<dyn DynHandler<C>>>,
    fallback: Option<Arc<dyn DynHandler<C>>>,
    operations: Option<OperationTracker>,
    config_guard: Option<ConfigGuard<C>>,
}

/// A dispatch result: a status with a JSON body, or 204.
enum Reply {
    Json(StatusCode, Value),
    NoContent,
}

impl Reply {
    fn ok(body: &impl serde::Serialize) -> Result<Reply, ExtensionError> {
        Ok(Reply::Json(StatusCode::OK, crate::handler::to_json(body)?))
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Json(status, body) => (status, axum::Json(body)).into_response(),
            Reply::NoContent => StatusCode::NO_CONTENT.into_response(),
        }
    }
}

impl IntoResponse for ExtensionError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.into_response_body())).into_response()
    }
}

fn parse_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, ExtensionError> {
    serde_json::from_slice(body).map_err(|err| {
        // serde_json's message names the field and position, never values.
        ExtensionError::bad_request(
            codes::INVALID_REQUEST,
            format!("The request body is not a valid {what}: {err}."),
        )
    })
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

fn request_info(version: &str, headers: &HeaderMap) -> RequestInfo {
    RequestInfo {
        extension_version: version.to_owned(),
        client_request_id: header_text(headers, headers::CLIENT_REQUEST_ID),
        correlation_id: header_text(headers, headers::CORRELATION_REQUEST_ID),
        accept_language: header_text(headers, headers::ACCEPT_LANGUAGE),
    }
}

/// What a request's config resolved to.
struct ResolvedConfig<C> {
    config: Arc<C>,
    echo: Option<Value>,
    config_id: Option<String>,
    /// False when a preview's config could not be resolved (its `configId` is unknown, not absent).
    resolved: bool,
}

impl<C: ExtensionConfig> Dispatcher<C> {
    fn check_version(&self, version: &str) -> Result<(), ExtensionError> {
        if self.versions.iter().any(|served| served == version) {
            Ok(())
        } else {
            Err(ExtensionError::bad_request(
                codes::UNSUPPORTED_EXTENSION_VERSION,
                format!("No handler found for extension version '{version}'."),
            ))
        }
    }

    fn handler(&self, resource_type: &str) -> Result<Arc<dyn DynHandler<C>>, ExtensionError> {
        self.handlers
            .get(&resource_type.to_ascii_lowercase())
            .or(self.fallback.as_ref())
            .cloned()
            .ok_or_else(|| {
                ExtensionError::invalid(
                    codes::UNSUPPORTED_RESOURCE_TYPE,
                    "/type",
                    format!("The resource type '{resource_type}' is not supported."),
                )
            })
    }

    fn parse_config(&self, config: Option<&Value>) -> Result<C, ExtensionError> {
        let parsed = C::from_request(config)?;
        match &self.config_guard {
            Some(guard) => guard(parsed),
            None => Ok(parsed),
        }
    }

    async fn resolve_config(
        &self,
        config: Option<&Value>,
        sent_config_id: Option<&str>,
    ) -> Result<ResolvedConfig<C>, ExtensionError> {
        let mut parsed = self.parse_config(config)?;
        parsed.resolve().await?;
        Self::checked_config(parsed, config, sent_config_id)
    }

    /// A preview only predicts: a config the control plane cannot resolve (e.g. an unreachable server)
    /// still previews, with `configId` unknown.
    async fn resolve_preview_config(
        &self,
        config: Option<&Value>,
        sent_config_id: Option<&str>,
    ) -> Result<ResolvedConfig<C>, ExtensionError> {
        let mut parsed = self.parse_config(config)?;
        match parsed.resolve().await {
            Ok(()) => Self::checked_config(parsed, config, sent_config_id),
            Err(_) => Ok(ResolvedConfig {
                config: Arc::new(parsed),
                echo: echo_config(config, C::SECRET_PROPERTIES),
                config_id: None,
                resolved: false,
            }),
        }
    }

    fn checked_config(
        parsed: C,
        config: Option<&Value>,
        sent_config_id: Option<&str>,
    ) -> Result<ResolvedConfig<C>, ExtensionError> {
        let config_id = parsed.config_id();
        if let (Some(sent), Some(computed)) = (sent_config_id, config_id.as_deref())
            && sent != computed
        {
            return Err(ExtensionError::new(
                422,
                codes::CONFIG_ID_MISMATCH,
                "The request's configId does not match the control plane its config points at.",
            )
            .with_target("/configId"));
        }
        Ok(ResolvedConfig {
            config: Arc::new(parsed),
            echo: echo_config(config, C::SECRET_PROPERTIES),
            config_id,
            resolved: true,
        })
    }

    fn resource(
        resource_type: String,
        api_version: Option<String>,
        state: RawState,
        config: &ResolvedConfig<C>,
    ) -> v2::Resource {
        v2::Resource {
            resource_type,
            api_version,
            identifiers: state.identifiers,
            properties: state.properties,
            config: config.echo.clone(),
            config_id: config.config_id.clone(),
            status: state.status,
            error: state.error,
        }
    }

    async fn dispatch(
        &self,
        version: &str,
        operation: Operation,
        body: &[u8],
        info: RequestInfo,
    ) -> Result<Reply, ExtensionError> {
        self.check_version(version)?;
        match operation {
            Operation::Preview => {
                self.preview(parse_body(body, "resource preview specification")?, info)
                    .await
            }
            Operation::CreateOrUpdate => {
                self.create_or_update(parse_body(body, "resource specification")?, info)
                    .await
            }
            Operation::Get => {
                self.get(parse_body(body, "resource reference")?, info)
                    .await
            }
            Operation::Delete => {
                self.delete(parse_body(body, "resource reference")?, info)
                    .await
            }
            Operation::GetLongRunningOperation => {
                let handle: Value = parse_body(body, "operation handle")?;
                match &self.operations {
                    Some(tracker) => Reply::ok(&tracker.poll(&handle)?),
                    None => Err(ExtensionError::bad_request(
                        codes::UNSUPPORTED_OPERATION,
                        format!(
                            "The extension '{}' has no long-running operations.",
                            self.name
                        ),
                    )),
                }
            }
        }
    }

    async fn preview(
        &self,
        spec: ResourcePreviewSpecification,
        info: RequestInfo,
    ) -> Result<Reply, ExtensionError> {
        let handler = self.handler(&spec.resource_type)?;
        let unevaluated: Vec<JsonPointer> =
            spec.metadata.map(|m| m.unevaluated).unwrap_or_default();
        let config_unevaluated = unevaluated
            .iter()
            .any(|p| p == "/config" || p.starts_with("/config/"));
        let config = if config_unevaluated {
            None
        } else {
            Some(
                self.resolve_preview_config(spec.config.as_ref(), spec.config_id.as_deref())
                    .await?,
            )
        };
        let input = PreviewInput {
            properties: spec.properties,
            unevaluated: unevaluated.clone(),
            config: config.as_ref().map(|c| Arc::clone(&c.config)),
            resource_type: spec.resource_type.clone(),
            api_version: spec.api_version.clone(),
            info,
        };
        let output = run_handler(handler.preview(input)).await?;
        let mut metadata = output.metadata;
        let mut unknown = metadata.unknown.take().unwrap_or_default();
        if output.identifiers.is_none() && !unknown.iter().any(|p| p == "/identifiers") {
            unknown.push("/identifiers".to_owned());
        }
        let config_id = match &config {
            Some(resolved) if resolved.resolved => resolved.config_id.clone(),
            _ => {
                unknown.push("/configId".to_owned());
                None
            }
        };
        metadata.unknown = (!unknown.is_empty()).then_some(unknown);
        categorise_unevaluated(&mut metadata, unevaluated);
        let has_metadata = metadata != ResourcePreviewMetadata::default();
        let preview = ResourcePreview {
            resource_type: spec.resource_type,
            api_version: spec.api_version,
            identifiers: output.identifiers.unwrap_or_else(|| json!({})),
            properties: output.properties,
            status: None,
            // Unevaluated config is echoed as received (minus secrets), like any other config.
            config: echo_config(spec.config.as_ref(), C::SECRET_PROPERTIES),
            config_id,
            metadata: has_metadata.then_some(metadata),
        };
        Reply::ok(&preview)
    }

    async fn create_or_update(
        &self,
        spec: ResourceSpecification,
        info: RequestInfo,
    ) -> Result<Reply, ExtensionError> {
        let handler = self.handler(&spec.resource_type)?;
        let config = self
            .resolve_config(spec.config.as_ref(), spec.config_id.as_deref())
            .await?;
        let request = Apply {
            properties: spec.properties,
            config: Arc::clone(&config.config),
            resource_type: spec.resource_type.clone(),
            api_version: spec.api_version.clone(),
            info,
        };
        match run_handler(handler.create_or_update(request)).await? {
            Applied::Resource(state) => Reply::ok(&Self::resource(
                spec.resource_type,
                spec.api_version,
                state,
                &config,
            )),
            Applied::Accepted(operation) => Ok(Reply::Json(
                StatusCode::ACCEPTED,
                crate::handler::to_json(&operation)?,
            )),
        }
    }

    fn lookup(
        reference: &ResourceReference,
        config: &ResolvedConfig<C>,
        info: RequestInfo,
    ) -> Lookup<C, Value> {
        Lookup {
            identifiers: reference.identifiers.clone(),
            config: Arc::clone(&config.config),
            resource_type: reference.resource_type.clone(),
            api_version: reference.api_version.clone(),
            info,
        }
    }

    async fn get(
        &self,
        reference: ResourceReference,
        info: RequestInfo,
    ) -> Result<Reply, ExtensionError> {
        let handler = self.handler(&reference.resource_type)?;
        let config = self
            .resolve_config(reference.config.as_ref(), reference.config_id.as_deref())
            .await?;
        match run_handler(handler.get(Self::lookup(&reference, &config, info))).await? {
            Some(state) => Reply::ok(&Self::resource(
                reference.resource_type,
                reference.api_version,
                state,
                &config,
            )),
            None => Err(ExtensionError::new(
                404,
                codes::RESOURCE_NOT_FOUND,
                format!(
                    "The resource of type {} with api version {} and identifiers {} was not found.",
                    reference.resource_type,
                    reference.api_version.as_deref().unwrap_or("(none)"),
                    reference.identifiers
                ),
            )),
        }
    }

    async fn delete(
        &self,
        reference: ResourceReference,
        info: RequestInfo,
    ) -> Result<Reply, ExtensionError> {
        let handler = self.handler(&reference.resource_type)?;
        let config = self
            .resolve_config(reference.config.as_ref(), reference.config_id.as_deref())
            .await?;
        match run_handler(handler.delete(Self::lookup(&reference, &config, info))).await? {
            Deleted::Gone => Ok(Reply::NoContent),
            Deleted::Deleting(state) => Reply::ok(&Self::resource(
                reference.resource_type,
                reference.api_version,
                state,
                &config,
            )),
            Deleted::Accepted(operation) => Ok(Reply::Json(
                StatusCode::ACCEPTED,
                crate::handler::to_json(&operation)?,
            )),
        }
    }
}

/// Lists each unevaluated path not already in a specific category under `metadata.unevaluated`.
fn categorise_unevaluated(metadata: &mut ResourcePreviewMetadata, unevaluated: Vec<JsonPointer>) {
    let specific: Vec<JsonPointer> = [
        &metadata.read_only,
        &metadata.immutable,
        &metadata.calculated,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .cloned()
    .collect();
    let mut listed = metadata.unevaluated.take().unwrap_or_default();
    for pointer in unevaluated {
        if !specific.contains(&pointer) && !listed.contains(&pointer) {
            listed.push(pointer);
        }
    }
    metadata.unevaluated = (!listed.is_empty()).then_some(listed);
}

/// Runs a handler future on its own task so that a panic becomes a 500 instead of a dropped connection.
async fn run_handler<T: Send + 'static>(
    future: crate::handler::BoxFuture<Result<T, ExtensionError>>,
) -> Result<T, ExtensionError> {
    match tokio::spawn(future).await {
        Ok(result) => result,
        Err(_) => {
            tracing::error!("an extension handler panicked");
            Err(ExtensionError::internal("An unexpected error occurred."))
        }
    }
}

async fn resource_route<C: ExtensionConfig>(
    State(dispatcher): State<Arc<Dispatcher<C>>>,
    Path((version, operation)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(operation) = Operation::from_route(&format!("resource/{operation}")) else {
        return not_found_route().await.into_response();
    };
    let info = request_info(&version, &headers);
    match dispatcher.dispatch(&version, operation, &body, info).await {
        Ok(reply) => reply.into_response(),
        Err(err) => err.into_response(),
    }
}

async fn operation_route<C: ExtensionConfig>(
    State(dispatcher): State<Arc<Dispatcher<C>>>,
    Path(version): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let info = request_info(&version, &headers);
    match dispatcher
        .dispatch(&version, Operation::GetLongRunningOperation, &body, info)
        .await
    {
        Ok(reply) => reply.into_response(),
        Err(err) => err.into_response(),
    }
}

async fn ping_route<C: ExtensionConfig>(State(dispatcher): State<Arc<Dispatcher<C>>>) -> Response {
    axum::Json(json!({ "name": dispatcher.name, "versions": dispatcher.versions })).into_response()
}

async fn not_found_route() -> ExtensionError {
    ExtensionError::new(404, codes::NOT_FOUND, "No route matches the request.")
}

async fn method_not_allowed_route() -> ExtensionError {
    ExtensionError::new(
        405,
        codes::METHOD_NOT_ALLOWED,
        "The route does not accept this HTTP method.",
    )
}

/// The current time as an RFC 7231 `Date` value.
pub(crate) fn http_date() -> String {
    jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&jiff::Timestamp::now())
        .unwrap_or_default()
}

/// Adds `x-ms-request-id` (the client's request id, or a fresh one) and `Date` to every response, and
/// turns axum's plain-text rejections (e.g. a body over the limit) into the contract's error shape.
async fn correlate(request: Request, next: Next) -> Response {
    let request_id = request
        .headers()
        .get(headers::CLIENT_REQUEST_ID)
        .filter(|value| !value.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
                .unwrap_or(HeaderValue::from_static("unknown"))
        });
    let mut response = next.run(request).await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if response.status().is_client_error() && !is_json && response.status() != StatusCode::NOT_FOUND
    {
        let status = response.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "RequestBodyTooLarge"
        } else {
            codes::INVALID_REQUEST
        };
        let reason = status.canonical_reason().unwrap_or("Bad request");
        response = ExtensionError::new(status.as_u16(), code, format!("{reason}.")).into_response();
    }
    let response_headers = response.headers_mut();
    response_headers.insert(headers::REQUEST_ID, request_id);
    if let Ok(date) = HeaderValue::from_str(&http_date()) {
        response_headers.insert(header::DATE, date);
    }
    response
}

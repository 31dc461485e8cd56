//! The server side: the `BicepExtension` service trait, a tower service routing its six methods, and
//! [`TransportBridge`], which serves any v2 [`ExtensionTransport`] over gRPC.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use cairn_extension_contract::headers;
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportRequest, TransportResponse,
};
use cairn_extension_contract::v2::LongRunningOperation;
use tonic::body::Body;
use tonic::server::{Grpc, NamedService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use crate::mapping;
use crate::proto::{
    self, Empty, LocalExtensibilityOperationResponse, Method, ResourceReference,
    ResourceSpecification, TypeFilesResponse,
};

/// A gRPC method's result.
pub type RpcResult<T> = Result<T, Status>;

/// The `extension.BicepExtension` service. Report failures in `errorData`, not as gRPC statuses.
pub trait BicepExtension: Send + Sync + 'static {
    /// `CreateOrUpdate`.
    fn create_or_update(
        &self,
        request: ResourceSpecification,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>>;
    /// `Preview`.
    fn preview(
        &self,
        request: ResourceSpecification,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>>;
    /// `Get`.
    fn get(
        &self,
        request: ResourceReference,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>>;
    /// `Delete`.
    fn delete(
        &self,
        request: ResourceReference,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>>;
    /// `GetTypeFiles`. Default: `Unimplemented`.
    fn get_type_files(&self) -> BoxFuture<'_, RpcResult<TypeFilesResponse>> {
        Box::pin(async {
            Err(Status::unimplemented(
                "this extension publishes no type files",
            ))
        })
    }
    /// `Ping`: answers as soon as the server accepts calls.
    fn ping(&self) -> BoxFuture<'_, RpcResult<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// A tower service serving a [`BicepExtension`] under `/extension.BicepExtension/*` (mount it on an axum
/// router with `route_service`, or on tonic's transport server: it implements [`NamedService`]).
pub struct BicepExtensionServer {
    inner: Arc<dyn BicepExtension>,
}

impl Clone for BicepExtensionServer {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl BicepExtensionServer {
    /// Serves `extension`.
    pub fn new(extension: Arc<dyn BicepExtension>) -> Self {
        Self { inner: extension }
    }
}

impl NamedService for BicepExtensionServer {
    const NAME: &'static str = proto::SERVICE_NAME;
}

/// Runs one unary method through tonic's codec.
async fn unary<Req, Resp, B, F, Fut>(request: http::Request<B>, handler: F) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + Sync + 'static,
    Resp: prost::Message + Send + Sync + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    F: FnOnce(Req) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = RpcResult<Resp>> + Send + 'static,
{
    let service = tower::service_fn(move |request: Request<Req>| {
        let handler = handler.clone();
        async move { handler(request.into_inner()).await.map(Response::new) }
    });
    Grpc::new(ProstCodec::<Resp, Req>::default())
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::MAX_MESSAGE_BYTES)
        .unary(service, request)
        .await
}

impl<B> tower::Service<http::Request<B>> for BicepExtensionServer
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let inner = Arc::clone(&self.inner);
        let method = Method::from_path(request.uri().path());
        Box::pin(async move {
            let response = match method {
                Some(Method::CreateOrUpdate) => {
                    unary(request, move |m: ResourceSpecification| async move {
                        inner.create_or_update(m).await
                    })
                    .await
                }
                Some(Method::Preview) => {
                    unary(request, move |m: ResourceSpecification| async move {
                        inner.preview(m).await
                    })
                    .await
                }
                Some(Method::Get) => {
                    unary(request, move |m: ResourceReference| async move {
                        inner.get(m).await
                    })
                    .await
                }
                Some(Method::Delete) => {
                    unary(request, move |m: ResourceReference| async move {
                        inner.delete(m).await
                    })
                    .await
                }
                Some(Method::GetTypeFiles) => {
                    unary(request, move |_: Empty| async move {
                        inner.get_type_files().await
                    })
                    .await
                }
                Some(Method::Ping) => {
                    unary(request, move |_: Empty| async move {
                        inner.ping().await.map(|()| Empty {})
                    })
                    .await
                }
                None => Status::unimplemented("unknown method").into_http(),
            };
            Ok(response)
        })
    }
}

/// Serves a v2 [`ExtensionTransport`] (e.g. an SDK extension in process) over the gRPC protocol.
///
/// Each gRPC call becomes one v2 request for `extension_version`; the v2 answer is mapped back
/// (200 → `resource`, 204 → the reference with empty properties, 4xx/5xx → `errorData`). gRPC has no
/// long-running operations, so a 202 is polled here until it finishes (bounded by `lro_deadline`), followed
/// by a final get after a create/update.
pub struct TransportBridge {
    transport: Arc<dyn ExtensionTransport>,
    extension_version: String,
    lro_deadline: Duration,
    type_files: Option<TypeFilesResponse>,
}

/// The largest v2 response the bridge reads (the host's single-resource limit).
const MAX_RESPONSE_BYTES: usize = 20 * 1024 * 1024;
/// The longest wait between polls of a long-running operation.
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(10);

impl TransportBridge {
    /// Bridges calls to `transport` as version `extension_version`.
    pub fn new(
        transport: Arc<dyn ExtensionTransport>,
        extension_version: impl Into<String>,
    ) -> Self {
        Self {
            transport,
            extension_version: extension_version.into(),
            lro_deadline: Duration::from_secs(3600),
            type_files: None,
        }
    }

    /// Sets how long a long-running operation may take before the call fails.
    pub fn with_lro_deadline(mut self, deadline: Duration) -> Self {
        self.lro_deadline = deadline;
        self
    }

    /// Sets what `GetTypeFiles` answers.
    pub fn with_type_files(mut self, type_files: TypeFilesResponse) -> Self {
        self.type_files = Some(type_files);
        self
    }

    async fn send(&self, operation: Operation, body: Vec<u8>) -> RpcResult<TransportResponse> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let request = TransportRequest {
            operation,
            extension_version: self.extension_version.clone(),
            body,
            headers: vec![
                (headers::CLIENT_REQUEST_ID.to_owned(), request_id.clone()),
                (headers::CORRELATION_REQUEST_ID.to_owned(), request_id),
            ],
            max_response_bytes: MAX_RESPONSE_BYTES,
        };
        self.transport
            .send(request)
            .await
            .map_err(|err| Status::internal(format!("the extension failed: {err}")))
    }

    /// Polls a 202 until it is terminal; `Ok(None)` = succeeded, `Ok(Some(reply))` = failed (as errorData).
    async fn wait_for(
        &self,
        accepted: &TransportResponse,
    ) -> RpcResult<Option<LocalExtensibilityOperationResponse>> {
        let started = Instant::now();
        let mut operation: LongRunningOperation = parse_operation(&accepted.body)?;
        loop {
            if operation.status.is_terminal() {
                if operation.status.is_succeeded() {
                    return Ok(None);
                }
                let error = operation.error.unwrap_or_else(|| {
                    cairn_extension_contract::v2::Error::new(
                        cairn_extension_contract::codes::FAILED_WITHOUT_ERROR,
                        format!("The operation ended with status '{}'.", operation.status),
                    )
                });
                return Ok(Some(mapping::error_reply(mapping::error_to_proto(error))));
            }
            let Some(handle) = operation.operation_handle.clone() else {
                return Ok(Some(mapping::error_reply(mapping::proto_error(
                    cairn_extension_contract::codes::RESPONSE_MISSING_OPERATION_HANDLE,
                    None,
                    "The extension's long-running operation has no operationHandle.",
                ))));
            };
            let wait = Duration::from_secs(u64::from(operation.retry_after_or_default()))
                .min(MAX_POLL_INTERVAL);
            if started.elapsed() + wait > self.lro_deadline {
                return Ok(Some(mapping::error_reply(mapping::proto_error(
                    cairn_extension_contract::codes::OPERATION_DEADLINE_EXCEEDED,
                    None,
                    "The extension's long-running operation did not finish in time.",
                ))));
            }
            tokio::time::sleep(wait).await;
            let body = serde_json::to_vec(&handle).unwrap_or_default();
            let polled = self.send(Operation::GetLongRunningOperation, body).await?;
            if polled.status != 200 {
                return Ok(Some(mapping::error_reply_from_v2(
                    polled.status,
                    &polled.body,
                )));
            }
            operation = parse_operation(&polled.body)?;
        }
    }

    async fn apply(
        &self,
        operation: Operation,
        request: ResourceSpecification,
    ) -> RpcResult<LocalExtensibilityOperationResponse> {
        let body = match mapping::specification_from_proto(&request) {
            Ok(body) => body,
            Err(error) => return Ok(mapping::error_reply(*error)),
        };
        let body_for_read_back = body.clone();
        let response = self.send(operation, body).await?;
        match response.status {
            200 => Ok(reply_from_resource(&response.body)),
            202 if operation == Operation::CreateOrUpdate => {
                if let Some(failed) = self.wait_for(&response).await? {
                    return Ok(failed);
                }
                self.read_back(&request, body_for_read_back).await
            }
            status => Ok(mapping::error_reply_from_v2(status, &response.body)),
        }
    }

    /// After a successful create/update LRO the resource is read with one final get. gRPC callers never
    /// saw identifiers, so they come from a preview of the same specification.
    async fn read_back(
        &self,
        request: &ResourceSpecification,
        specification: Vec<u8>,
    ) -> RpcResult<LocalExtensibilityOperationResponse> {
        let preview = self.send(Operation::Preview, specification).await?;
        if preview.status != 200 {
            return Ok(mapping::error_reply_from_v2(preview.status, &preview.body));
        }
        let identifiers = match serde_json::from_slice::<serde_json::Value>(&preview.body) {
            Ok(body) => body.get("identifiers").cloned().unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        let reference = ResourceReference {
            identifiers: identifiers.to_string(),
            config: request.config.clone(),
            r#type: request.r#type.clone(),
            api_version: request.api_version.clone(),
            config_id: request.config_id.clone(),
        };
        self.lookup(Operation::Get, reference).await
    }

    async fn lookup(
        &self,
        operation: Operation,
        request: ResourceReference,
    ) -> RpcResult<LocalExtensibilityOperationResponse> {
        let body = match mapping::reference_from_proto(&request) {
            Ok(body) => body,
            Err(error) => return Ok(mapping::error_reply(*error)),
        };
        let response = self.send(operation, body).await?;
        match (operation, response.status) {
            (_, 200) => Ok(reply_from_resource(&response.body)),
            (Operation::Delete, 204) => Ok(mapping::deleted_reply(&request)),
            (Operation::Delete, 202) => match self.wait_for(&response).await? {
                Some(failed) => Ok(failed),
                None => Ok(mapping::deleted_reply(&request)),
            },
            (_, status) => Ok(mapping::error_reply_from_v2(status, &response.body)),
        }
    }
}

fn parse_operation(body: &[u8]) -> RpcResult<LongRunningOperation> {
    serde_json::from_slice(body)
        .map_err(|_| Status::internal("the extension answered an invalid long-running operation"))
}

fn reply_from_resource(body: &[u8]) -> LocalExtensibilityOperationResponse {
    match mapping::resource_to_proto(body) {
        Ok(resource) => mapping::resource_reply(resource),
        Err(error) => mapping::error_reply(*error),
    }
}

/// Reports a failure to reach the bridged extension in `errorData`, as the protocol asks, rather than as
/// a gRPC status.
fn as_error_data(
    result: RpcResult<LocalExtensibilityOperationResponse>,
) -> RpcResult<LocalExtensibilityOperationResponse> {
    result.or_else(|status| {
        Ok(mapping::error_reply(mapping::proto_error(
            cairn_extension_contract::codes::EXTENSION_TRANSPORT_FAILED,
            None,
            status.message(),
        )))
    })
}

impl BicepExtension for TransportBridge {
    fn create_or_update(
        &self,
        request: ResourceSpecification,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>> {
        Box::pin(async move { as_error_data(self.apply(Operation::CreateOrUpdate, request).await) })
    }

    fn preview(
        &self,
        request: ResourceSpecification,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>> {
        Box::pin(async move { as_error_data(self.apply(Operation::Preview, request).await) })
    }

    fn get(
        &self,
        request: ResourceReference,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>> {
        Box::pin(async move { as_error_data(self.lookup(Operation::Get, request).await) })
    }

    fn delete(
        &self,
        request: ResourceReference,
    ) -> BoxFuture<'_, RpcResult<LocalExtensibilityOperationResponse>> {
        Box::pin(async move { as_error_data(self.lookup(Operation::Delete, request).await) })
    }

    fn get_type_files(&self) -> BoxFuture<'_, RpcResult<TypeFilesResponse>> {
        Box::pin(async move {
            self.type_files
                .clone()
                .ok_or_else(|| Status::unimplemented("this extension publishes no type files"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_extension_contract::transport::TransportError;

    /// A v2 transport that answers from a script, for bridge tests without an SDK.
    struct Scripted(std::sync::Mutex<Vec<Result<TransportResponse, TransportError>>>);

    impl ExtensionTransport for Scripted {
        fn send(
            &self,
            _request: TransportRequest,
        ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
            let next = self.0.lock().ok().map(|mut script| script.remove(0));
            Box::pin(async move { next.unwrap_or(Err(TransportError::Timeout)) })
        }
    }

    fn bridge(script: Vec<Result<TransportResponse, TransportError>>) -> TransportBridge {
        TransportBridge::new(Arc::new(Scripted(std::sync::Mutex::new(script))), "1.0.0")
    }

    fn reference() -> ResourceReference {
        ResourceReference {
            identifiers: r#"{"n":1}"#.into(),
            config: None,
            r#type: "T".into(),
            api_version: None,
            config_id: None,
        }
    }

    #[tokio::test]
    async fn transport_failures_become_error_data() {
        let reply = bridge(vec![Err(TransportError::Timeout)])
            .get(reference())
            .await
            .unwrap();
        let error = reply.error_data.unwrap().error.unwrap();
        assert_eq!(
            error.code,
            cairn_extension_contract::codes::EXTENSION_TRANSPORT_FAILED
        );
    }

    #[tokio::test]
    async fn failed_lro_delete_becomes_error_data() {
        let accepted = TransportResponse::json(
            202,
            br#"{"status":"Running","retryAfterSeconds":0,"operationHandle":{"id":1}}"#.to_vec(),
        );
        let failed = TransportResponse::json(
            200,
            br#"{"status":"Failed","error":{"code":"Stuck","message":"m"}}"#.to_vec(),
        );
        let reply = bridge(vec![Ok(accepted), Ok(failed)])
            .delete(reference())
            .await
            .unwrap();
        assert_eq!(reply.error_data.unwrap().error.unwrap().code, "Stuck");
    }

    #[tokio::test]
    async fn lro_without_handle_is_reported() {
        let accepted = TransportResponse::json(202, br#"{"status":"Running"}"#.to_vec());
        let reply = bridge(vec![Ok(accepted)])
            .delete(reference())
            .await
            .unwrap();
        assert_eq!(
            reply.error_data.unwrap().error.unwrap().code,
            cairn_extension_contract::codes::RESPONSE_MISSING_OPERATION_HANDLE
        );
    }

    #[tokio::test]
    async fn no_content_delete_echoes_the_reference() {
        let reply = bridge(vec![Ok(TransportResponse::json(204, Vec::new()))])
            .delete(reference())
            .await
            .unwrap();
        assert_eq!(reply.resource.unwrap().identifiers, r#"{"n":1}"#);
    }
}

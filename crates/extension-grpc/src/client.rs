//! A typed client for `extension.BicepExtension` over any tonic gRPC service (e.g. a `Channel`).

use std::path::Path;

use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::client::{Grpc, GrpcService};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};
use tonic_prost::ProstCodec;

use crate::proto::{
    Empty, LocalExtensibilityOperationResponse, MAX_MESSAGE_BYTES, Method, ResourceReference,
    ResourceSpecification, TypeFilesResponse,
};

/// Boxed error of the underlying channel.
type StdError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A unary client for the six methods; cheap to clone when the channel is.
#[derive(Debug, Clone)]
pub struct BicepExtensionClient<T> {
    inner: Grpc<T>,
}

impl<T> BicepExtensionClient<T>
where
    T: GrpcService<Body> + Clone,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<StdError> + Send,
    T::Error: Into<StdError>,
{
    /// Wraps a channel.
    pub fn new(channel: T) -> Self {
        let inner = Grpc::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Self { inner }
    }

    async fn unary<Req, Resp>(&mut self, method: Method, message: Req) -> Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.inner.ready().await.map_err(|err| {
            Status::unavailable(format!("the extension is not ready: {}", err.into()))
        })?;
        let path = PathAndQuery::from_static(method.path());
        let response = self
            .inner
            .unary(
                Request::new(message),
                path,
                ProstCodec::<Req, Resp>::default(),
            )
            .await?;
        Ok(response.into_inner())
    }

    /// `CreateOrUpdate`.
    pub async fn create_or_update(
        &mut self,
        request: ResourceSpecification,
    ) -> Result<LocalExtensibilityOperationResponse, Status> {
        self.unary(Method::CreateOrUpdate, request).await
    }

    /// `Preview`.
    pub async fn preview(
        &mut self,
        request: ResourceSpecification,
    ) -> Result<LocalExtensibilityOperationResponse, Status> {
        self.unary(Method::Preview, request).await
    }

    /// `Get`.
    pub async fn get(
        &mut self,
        request: ResourceReference,
    ) -> Result<LocalExtensibilityOperationResponse, Status> {
        self.unary(Method::Get, request).await
    }

    /// `Delete`.
    pub async fn delete(
        &mut self,
        request: ResourceReference,
    ) -> Result<LocalExtensibilityOperationResponse, Status> {
        self.unary(Method::Delete, request).await
    }

    /// `GetTypeFiles`.
    pub async fn get_type_files(&mut self) -> Result<TypeFilesResponse, Status> {
        self.unary(Method::GetTypeFiles, Empty {}).await
    }

    /// `Ping`.
    pub async fn ping(&mut self) -> Result<(), Status> {
        self.unary::<Empty, Empty>(Method::Ping, Empty {})
            .await
            .map(|_| ())
    }
}

/// A lazily connecting HTTP/2 channel to a gRPC server on a Unix domain socket (reconnects as needed).
/// Must be created inside a tokio runtime.
pub fn unix_socket_channel(socket: &Path) -> Channel {
    let socket = socket.to_path_buf();
    // The URI is required by the HTTP/2 client but unused: every connection goes to the socket.
    Endpoint::from_static("http://localhost").connect_with_connector_lazy(tower::service_fn(
        move |_: http::Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        },
    ))
}

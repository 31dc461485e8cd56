//! [`InProcessTransport`]: an SDK extension's router as an [`ExtensionTransport`], called without sockets.
//!
//! Built-in extensions run in the host's process but go through exactly the HTTP code path a remote
//! extension serves (routing, headers, status codes, error bodies), via `tower::ServiceExt::oneshot`.

use axum::Router;
use axum::body::Body;
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use tower::ServiceExt;

use crate::config::ExtensionConfig;
use crate::extension::Extension;

/// Characters escaped in the `{extensionVersion}` path segment (everything but unreserved characters).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Calls an axum router (normally [`Extension::router`]) in process.
#[derive(Clone)]
pub struct InProcessTransport {
    router: Router,
}

impl std::fmt::Debug for InProcessTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessTransport").finish_non_exhaustive()
    }
}

impl InProcessTransport {
    /// Wraps a router serving the v2 routes.
    pub fn new(router: Router) -> Self {
        Self { router }
    }

    /// Wraps an extension's v2 router.
    pub fn from_extension<C: ExtensionConfig>(extension: Extension<C>) -> Self {
        Self::new(extension.router())
    }

    async fn call(&self, request: TransportRequest) -> Result<TransportResponse, TransportError> {
        let uri = format!(
            "/{}/{}",
            utf8_percent_encode(&request.extension_version, SEGMENT),
            request.operation.route()
        );
        let mut builder =
            http::Request::post(uri).header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let http_request =
            builder
                .body(Body::from(request.body))
                .map_err(|_| TransportError::Io {
                    message: "the request could not be built (invalid header)".into(),
                })?;
        let response = match self.router.clone().oneshot(http_request).await {
            Ok(response) => response,
            Err(infallible) => match infallible {},
        };
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect();
        let body = axum::body::to_bytes(response.into_body(), request.max_response_bytes)
            .await
            .map_err(|_| TransportError::ResponseTooLarge {
                limit: request.max_response_bytes,
            })?;
        Ok(TransportResponse {
            status,
            headers,
            body: body.to_vec(),
        })
    }
}

impl ExtensionTransport for InProcessTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(self.call(request))
    }
}

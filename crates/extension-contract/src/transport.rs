//! The transport interface the host dispatches to: one request in "v2 HTTP semantics", one response back.
//!
//! Every transport (HTTP v2, the REST draft, local gRPC, in-process built-ins) implements
//! [`ExtensionTransport`]. A transport receives the v2 JSON body of an [`Operation`] and answers with what a
//! v2 HTTP extension would answer: a status code (200, 202, 204, 4xx, 5xx) and a v2 JSON body
//! (`Resource`, `ResourcePreview`, `LongRunningOperation` or `ErrorResponse`). Transports that speak another
//! protocol map onto this (e.g. gRPC `errorData` → 400 + `ErrorResponse`).
//!
//! The host does everything else in one place: headers, timeouts, size limits, contract validation,
//! retries, RELO/LRO polling. A transport only has to honour [`TransportRequest::max_response_bytes`]: it
//! must stop reading once the body is larger and return [`TransportError::ResponseTooLarge`].
//!
//! The trait is object-safe (`Arc<dyn ExtensionTransport>`) and uses a boxed future, so implementing it
//! needs no async-trait macro and no `futures` crate:
//!
//! ```
//! use cairn_extension_contract::transport::*;
//!
//! struct AlwaysNotFound;
//!
//! impl ExtensionTransport for AlwaysNotFound {
//!     fn send(&self, _request: TransportRequest) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
//!         Box::pin(async {
//!             Ok(TransportResponse::json(404, br#"{"error":{"code":"ResourceNotFound","message":"gone"}}"#.to_vec()))
//!         })
//!     }
//! }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// A boxed, `Send` future borrowing from `'a`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The five operations of the v2 contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `POST /{v}/resource/preview`, body `ResourcePreviewSpecification`.
    Preview,
    /// `POST /{v}/resource/createOrUpdate`, body `ResourceSpecification`.
    CreateOrUpdate,
    /// `POST /{v}/resource/get`, body `ResourceReference`.
    Get,
    /// `POST /{v}/resource/delete`, body `ResourceReference`.
    Delete,
    /// `POST /{v}/longRunningOperation/get`, body = the `operationHandle` object itself.
    GetLongRunningOperation,
}

impl Operation {
    /// All operations.
    pub const ALL: [Operation; 5] = [
        Self::Preview,
        Self::CreateOrUpdate,
        Self::Get,
        Self::Delete,
        Self::GetLongRunningOperation,
    ];

    /// The route after `/{extensionVersion}/`, e.g. `resource/createOrUpdate`.
    pub fn route(self) -> &'static str {
        match self {
            Self::Preview => "resource/preview",
            Self::CreateOrUpdate => "resource/createOrUpdate",
            Self::Get => "resource/get",
            Self::Delete => "resource/delete",
            Self::GetLongRunningOperation => "longRunningOperation/get",
        }
    }

    /// The operation for a route (the inverse of [`Self::route`]).
    pub fn from_route(route: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|operation| operation.route() == route)
    }

    /// A short name for logs: `preview`, `createOrUpdate`, `get`, `delete`, `getLongRunningOperation`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Preview => "preview",
            Self::CreateOrUpdate => "createOrUpdate",
            Self::Get => "get",
            Self::Delete => "delete",
            Self::GetLongRunningOperation => "getLongRunningOperation",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One request to an extension.
#[derive(Clone)]
pub struct TransportRequest {
    /// Which operation.
    pub operation: Operation,
    /// The extension version as the engine names it (the `{extensionVersion}` path segment).
    pub extension_version: String,
    /// The v2 JSON body. May contain secret config: never log it.
    pub body: Vec<u8>,
    /// Request headers (lower-case names; see [`crate::headers`]). May include `authorization`.
    pub headers: Vec<(String, String)>,
    /// The transport must stop reading and fail with [`TransportError::ResponseTooLarge`] past this size.
    pub max_response_bytes: usize,
}

impl TransportRequest {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

impl fmt::Debug for TransportRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The body can carry secret config and the headers a bearer token: print neither.
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("TransportRequest")
            .field("operation", &self.operation)
            .field("extension_version", &self.extension_version)
            .field("body_len", &self.body.len())
            .field("header_names", &header_names)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

/// One response from an extension, in v2 HTTP semantics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportResponse {
    /// HTTP status code (200, 202, 204, 4xx, 5xx).
    pub status: u16,
    /// Response headers (lower-case names), e.g. `retry-after` on a 429.
    pub headers: Vec<(String, String)>,
    /// The raw body (empty for 204).
    pub body: Vec<u8>,
}

impl TransportResponse {
    /// A response with a JSON body and no headers.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(candidate, _)| candidate.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Why a transport could not produce a response. Messages must never include request bodies or tokens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The connection could not be established; the request was **not** sent (safe to retry any operation).
    #[error("could not connect to the extension: {message}")]
    Connect { message: String },
    /// The exchange failed after the request may have been sent (e.g. connection reset).
    #[error("the connection to the extension failed: {message}")]
    Io { message: String },
    /// The transport's own deadline passed (the host also enforces its timeout).
    #[error("the extension did not answer in time")]
    Timeout,
    /// The response body was larger than the limit; it was dropped unread.
    #[error("the extension's response exceeded {limit} bytes")]
    ResponseTooLarge { limit: usize },
    /// The extension answered something the transport cannot map to v2 semantics (e.g. a gRPC response
    /// with both or neither of `resource` and `errorData`).
    #[error("the extension's response violates the contract: {message}")]
    InvalidResponse { message: String },
    /// The extension is not available (e.g. a local process exited or did not start).
    #[error("the extension is unavailable: {message}")]
    Unavailable { message: String },
    /// The transport does not implement this operation (e.g. long-running operations over gRPC).
    #[error("the extension transport does not support {operation}")]
    Unsupported { operation: Operation },
}

impl TransportError {
    /// Whether the request certainly never reached the extension, so that even a non-idempotent operation
    /// may be retried.
    pub fn request_not_sent(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }
}

/// A way to reach one extension (one endpoint, process or built-in).
pub trait ExtensionTransport: Send + Sync {
    /// Sends one request and returns the extension's answer in v2 HTTP semantics.
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>>;

    /// Whether the extension's contract lets delete answer with the resource in a non-terminal `status`
    /// (RELO). v2.0.0 does; the REST draft of seed 004 does not ("the pattern cannot be used with
    /// long-running resource delete operations": delete answers 204, or 202 with an operation), so for it the
    /// host treats such an answer as a contract violation.
    fn allows_delete_relo(&self) -> bool {
        true
    }

    /// The extension's type files (Bicep's type format) by name, `index.json` among them, when the transport can
    /// ask for them (local gRPC's `GetTypeFiles`) and the extension publishes some; `Ok(None)` otherwise.
    fn type_files(&self) -> BoxFuture<'_, Result<Option<TypeFiles>, TransportError>> {
        Box::pin(async { Ok(None) })
    }
}

/// Type files by name: `index.json` and the files it references.
pub type TypeFiles = std::collections::BTreeMap<String, String>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn routes_round_trip() {
        for operation in Operation::ALL {
            assert_eq!(Operation::from_route(operation.route()), Some(operation));
        }
        assert_eq!(Operation::CreateOrUpdate.route(), "resource/createOrUpdate");
        assert_eq!(
            Operation::GetLongRunningOperation.route(),
            "longRunningOperation/get"
        );
        assert_eq!(Operation::from_route("resource/save"), None);
    }

    #[test]
    fn request_debug_hides_body_and_header_values() {
        let request = TransportRequest {
            operation: Operation::Get,
            extension_version: "1.0.0".into(),
            body: br#"{"config":{"token":"s3cr3t"}}"#.to_vec(),
            headers: vec![("authorization".into(), "Bearer t0ken".into())],
            max_response_bytes: 10,
        };
        let printed = format!("{request:?}");
        assert!(
            !printed.contains("s3cr3t") && !printed.contains("t0ken"),
            "{printed}"
        );
        assert_eq!(request.header("Authorization"), Some("Bearer t0ken"));
    }

    #[test]
    fn only_connect_errors_are_unsent() {
        assert!(
            TransportError::Connect {
                message: "refused".into()
            }
            .request_not_sent()
        );
        assert!(
            !TransportError::Io {
                message: "reset".into()
            }
            .request_not_sent()
        );
        assert!(!TransportError::Timeout.request_not_sent());
    }

    struct Echo;

    impl ExtensionTransport for Echo {
        fn send(
            &self,
            request: TransportRequest,
        ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
            Box::pin(async move { Ok(TransportResponse::json(200, request.body)) })
        }
    }

    #[test]
    fn trait_is_object_safe() {
        let transport: Arc<dyn ExtensionTransport> = Arc::new(Echo);
        let future = transport.send(TransportRequest {
            operation: Operation::Preview,
            extension_version: "1".into(),
            body: b"{}".to_vec(),
            headers: Vec::new(),
            max_response_bytes: 1,
        });
        let mut future = std::pin::pin!(future);
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut context) {
            std::task::Poll::Ready(Ok(response)) => assert_eq!(response.body, b"{}"),
            other => panic!("echo transport did not answer at once: {other:?}"),
        }
    }
}

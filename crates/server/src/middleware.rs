//! The server's own layers: request and correlation ids on every response, the request-size limit
//! answered in ARM's shape (413 `RequestTooLarge`), and the ARM body for a handler that panicked.

use std::any::Any;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use cairn_arm::ArmError;

use crate::response::error_response;

/// `x-ms-request-id`: a fresh id per request, generated here.
pub const REQUEST_ID: &str = "x-ms-request-id";
/// `x-ms-correlation-request-id`: the caller's, echoed, or a fresh one.
pub const CORRELATION_REQUEST_ID: &str = "x-ms-correlation-request-id";
/// `x-ms-client-request-id`: echoed when the caller sends one.
pub const CLIENT_REQUEST_ID: &str = "x-ms-client-request-id";

/// The ids of one request, available to handlers as a request extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestIds {
    pub request_id: String,
    pub correlation_id: String,
}

/// A caller-supplied id we are willing to echo: short, visible ASCII.
fn usable_id(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?.trim();
    (!text.is_empty() && text.len() <= 200 && text.chars().all(|c| c.is_ascii_graphic()))
        .then(|| text.to_owned())
}

/// Assigns the request ids, records them in the tracing span, and puts them on the response.
pub async fn request_ids(mut request: Request, next: Next) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    let correlation_id = request
        .headers()
        .get(CORRELATION_REQUEST_ID)
        .and_then(usable_id)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let client_request_id = request.headers().get(CLIENT_REQUEST_ID).and_then(usable_id);
    let ids = RequestIds {
        request_id: request_id.clone(),
        correlation_id: correlation_id.clone(),
    };
    request.extensions_mut().insert(ids);
    let span = tracing::info_span!(
        "ids",
        request_id = %request_id,
        correlation_id = %correlation_id
    );
    let mut response = tracing::Instrument::instrument(next.run(request), span).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (REQUEST_ID, Some(request_id)),
        (CORRELATION_REQUEST_ID, Some(correlation_id)),
        (CLIENT_REQUEST_ID, client_request_id),
    ] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    response
}

/// Rejects a request whose declared `Content-Length` is above the limit before any of it is read;
/// bodies without a length are cut off where they are read (see [`crate::dispatch`]).
pub async fn limit_declared_length(
    State(limit): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > limit as u64 => {
            error_response(&ArmError::request_too_large(limit as u64))
        }
        _ => next.run(request).await,
    }
}

/// The response for a handler that panicked: a 500 with a tracking id. The panic payload is not
/// logged or returned, as it may quote request data.
pub fn panic_response(_payload: Box<dyn Any + Send + 'static>) -> Response {
    let tracking_id = uuid::Uuid::new_v4().to_string();
    tracing::error!(tracking_id = %tracking_id, "a request handler panicked");
    error_response(&ArmError::internal_server_error(&tracking_id))
}

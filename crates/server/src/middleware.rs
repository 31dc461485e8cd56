//! The server's own layers: request and correlation ids on every response, the request-size limit
//! answered in ARM's shape (413 `RequestEntityTooLarge`) so the client reads it before the connection or the
//! HTTP/2 stream is closed, and the ARM body for a handler that panicked.

use std::any::Any;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use cairn_arm::ArmError;
use http_body_util::BodyExt;
use hyper::body::{Frame, SizeHint};

use crate::listen::{LINGER_TIMEOUT, LingerOnClose};
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

/// Assigns the request ids, records them (and the client's `x-ms-client-request-id`) in the tracing span every log
/// line of the request is in, and puts them on the response.
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
    // The client's own request id, when it sends one, is on the request's log lines too.
    let span = tracing::info_span!(
        "ids",
        request_id = %request_id,
        correlation_id = %correlation_id,
        client_request_id = tracing::field::Empty
    );
    if let Some(client_request_id) = &client_request_id {
        span.record("client_request_id", client_request_id.as_str());
    }
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

/// The request-size limit and how much of an oversized body is read and thrown away before answering.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    pub max_request_bytes: usize,
    pub max_discarded_bytes: usize,
}

/// How long the rest of an oversized body may take to arrive before the 413 is sent anyway.
const DISCARD_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads every request body within the limit before any handler runs, and answers 413
/// `RequestEntityTooLarge` beyond it, for declared (`Content-Length`) and chunked bodies alike. The 413 goes out
/// once the client can read it: a client waiting on `Expect: 100-continue` is answered before it sends the body
/// (hyper sends `100 Continue` only when the body is read, which never happens); otherwise the rest of the body
/// is read and discarded, up to `max_discarded_bytes` and [`DISCARD_TIMEOUT`]. What is still unread then is
/// kept until the 413 has been sent (see [`Holding`]), and an HTTP/1 connection asks the listener to linger
/// ([`LingerOnClose`]): closing it at once would reset it under a client still sending, and a client that sends
/// its whole body before reading (Python's `requests`) would never see the 413.
pub async fn limit_body(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let limit = limits.max_request_bytes;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (parts, body) = request.into_parts();
    let rest = if declared.is_some_and(|length| length > limit as u64) {
        Some(body)
    } else {
        match read_within(body, limit).await {
            Ok(bytes) => {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
            }
            Err(BodyError::TooLarge(rest)) => Some(rest),
            Err(BodyError::Unreadable) => None,
        }
    };
    let Some(rest) = rest else {
        return error_response(&ArmError::invalid_request_content(
            "the request body could not be read",
        ));
    };
    let waiting = expects_continue(&parts.headers);
    let unread = if waiting {
        Some(rest)
    } else {
        discard(rest, limits.max_discarded_bytes).await
    };
    let mut response = too_large(limit, parts.version);
    if let Some(unread) = unread {
        if parts.version < Version::HTTP_2
            && let Some(linger) = parts.extensions.get::<LingerOnClose>()
        {
            linger.request();
        }
        // A client still waiting for `100 Continue` sends no body: the reset after the 413 tells it not to.
        let drain = parts.version == Version::HTTP_2 && !waiting;
        response = response.map(|body| {
            Body::new(Holding {
                body,
                unread,
                drain,
            })
        });
    }
    response
}

fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get(header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
}

/// 413 in ARM's shape; HTTP/1 connections are closed after it, since the body may not have been read.
fn too_large(limit: usize, version: Version) -> Response {
    let mut response = error_response(&ArmError::request_too_large(limit as u64));
    if version < Version::HTTP_2 {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

enum BodyError {
    /// Past the limit: the rest of the body, still unread.
    TooLarge(Body),
    Unreadable,
}

async fn read_within(mut body: Body, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Unreadable)?;
        if let Ok(data) = frame.into_data() {
            if bytes.len().saturating_add(data.len()) > limit {
                return Err(BodyError::TooLarge(body));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// Reads and drops up to `budget` bytes of `body`, giving up after [`DISCARD_TIMEOUT`]. Returns the body when
/// it was not read to its end.
async fn discard(mut body: Body, budget: usize) -> Option<Body> {
    let drain = async {
        let mut left = budget;
        loop {
            match body.frame().await {
                None => return true,
                // A body that fails (the client reset it) has nothing more to read.
                Some(Err(_)) => return true,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if data.len() > left {
                            return false;
                        }
                        left -= data.len();
                    }
                }
            }
        }
    };
    let ended = tokio::time::timeout(DISCARD_TIMEOUT, drain)
        .await
        .unwrap_or(false);
    (!ended).then_some(body)
}

/// A response body that keeps the unread rest of the request body until the response has been sent (hyper drops
/// the response body only once its last frame is out), then, over HTTP/2, reads it to its end for at most
/// [`LINGER_TIMEOUT`].
///
/// Dropping an HTTP/2 request body before its stream has ended resets the stream: before the response is
/// complete h2 resets with `CANCEL` and the client gets no response at all (curl: "Stream error in the HTTP/2
/// framing layer"); after it, with `NO_ERROR`, which RFC 9113 §8.1 says tells the client to stop sending and keep
/// the response, yet curl 7.88 still fails the transfer while it is uploading. Reading the stream to its end lets
/// it close cleanly; past the bound it is reset with `NO_ERROR`. Over HTTP/1 the listener lingers instead.
struct Holding {
    body: Body,
    unread: Body,
    /// Whether `unread` is read to its end once the response is sent (HTTP/2).
    drain: bool,
}

impl Drop for Holding {
    fn drop(&mut self) {
        if !self.drain {
            return;
        }
        // Outside a runtime (never under the listener) the stream is simply reset with `NO_ERROR`.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let mut unread = std::mem::take(&mut self.unread);
            runtime.spawn(async move {
                let drain = async { while let Some(Ok(_)) = unread.frame().await {} };
                let _ = tokio::time::timeout(LINGER_TIMEOUT, drain).await;
            });
        }
    }
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The response for a handler that panicked: a 500 with a tracking id. The panic payload is not
/// logged or returned, as it may quote request data.
pub fn panic_response(_payload: Box<dyn Any + Send + 'static>) -> Response {
    let tracking_id = uuid::Uuid::new_v4().to_string();
    tracing::error!(tracking_id = %tracking_id, "a request handler panicked");
    error_response(&ArmError::internal_server_error(&tracking_id))
}

//! Building responses: ARM error bodies, JSON bodies, and the absolute URLs (`Location`,
//! `Azure-AsyncOperation`, `nextLink`) clients follow.

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cairn_arm::ArmError;
use serde::Serialize;

/// The scheme a connection was accepted with, put into each request's extensions by the listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionScheme(pub &'static str);

const JSON: &str = "application/json; charset=utf-8";

/// The ARM error body for `error` with its status.
pub fn error_response(error: &ArmError) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &error.to_response())
}

/// A JSON body with `status`.
pub fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, JSON)], bytes).into_response(),
        Err(error) => {
            tracing::error!(%error, "a response body could not be serialised");
            let fallback = ArmError::internal_server_error(&uuid::Uuid::new_v4().to_string());
            let bytes = serde_json::to_vec(&fallback.to_response()).unwrap_or_default();
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, JSON)],
                bytes,
            )
                .into_response()
        }
    }
}

/// A JSON response of a body already serialised.
pub fn json_bytes_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, JSON)], body).into_response()
}

/// A response without a body.
pub fn empty_response(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// Adds a header when the value is a valid header value (URLs built from request data always are,
/// but a failure must not panic).
pub fn with_header(mut response: Response, name: &'static str, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
    response
}

/// `{scheme}://{authority}` for URLs in responses: the configured public URL, else the request's
/// scheme (from the listener) and authority (`:authority` for HTTP/2, else `Host`).
pub fn base_url<B>(request: &Request<B>, public_base_url: Option<&str>) -> String {
    if let Some(url) = public_base_url {
        return url.trim_end_matches('/').to_owned();
    }
    let scheme = request
        .extensions()
        .get::<ConnectionScheme>()
        .map_or("http", |s| s.0);
    let authority = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            request
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .filter(|h| is_authority(h))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{scheme}://{authority}")
}

/// A `Host` value usable in a URL: host[:port] characters only, so a hostile header cannot inject a
/// path or a second URL.
fn is_authority(host: &str) -> bool {
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'))
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
pub fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Percent-encodes one path segment (unreserved characters and a few safe sub-delimiters stay).
pub fn encode_path_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'('
                    | b')'
                    | b'!'
                    | b'$'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
            )
        {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A resource id (`/a/b/...`) with each segment percent-encoded, for use as a URL path.
pub fn encode_id_path(id: &str) -> String {
    id.split('/')
        .map(encode_path_segment)
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_prefers_authority_then_host() {
        let mut request = Request::builder()
            .uri("/x")
            .header("host", "example.test:8443")
            .body(())
            .unwrap();
        assert_eq!(base_url(&request, None), "http://example.test:8443");
        request.extensions_mut().insert(ConnectionScheme("https"));
        assert_eq!(base_url(&request, None), "https://example.test:8443");
        let h2 = Request::builder()
            .uri("https://127.0.0.1:9/x")
            .body(())
            .unwrap();
        assert_eq!(base_url(&h2, None), "http://127.0.0.1:9");
        let hostile = Request::builder()
            .uri("/x")
            .header("host", "evil.test/path?")
            .body(())
            .unwrap();
        assert_eq!(base_url(&hostile, None), "http://localhost");
        assert_eq!(
            base_url(&hostile, Some("https://cairn.test/")),
            "https://cairn.test"
        );
    }

    #[test]
    fn encoding_keeps_ids_readable() {
        assert_eq!(
            encode_id_path("/subscriptions/s/resourceGroups/my rg"),
            "/subscriptions/s/resourceGroups/my%20rg"
        );
        assert_eq!(encode_query_value("a b&c=d"), "a%20b%26c%3Dd");
    }
}

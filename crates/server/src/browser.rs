//! Keeps web pages from driving the API through the user's browser. A page can send a "simple" cross-site request
//! (a `text/plain` or form POST) without any CORS check, and the request runs even though the page cannot read the
//! answer; and a page on a domain the attacker points at 127.0.0.1 (DNS rebinding) reaches a loopback server as
//! its own origin. So:
//!
//! - a request body must be JSON (`application/json`, or `application/<x>+json` such as merge-patch): anything
//!   else is 415 `UnsupportedMediaType` before a handler reads it;
//! - a server without tokens answers only Host names it can stand behind (IP literals, `localhost`, the public
//!   URL's host and the configured names): any other name is 421 `MisdirectedRequest`;
//! - a server without tokens refuses a request from another origin (its `Origin` is not the Host it was sent to,
//!   or the browser marks it `Sec-Fetch-Site: cross-site`) with 403 `CrossOriginRequestRefused`, unless the
//!   origin is on the CORS allow-list, which is also the only way a response carries CORS headers.
//!
//! With tokens, a browser never sends the bearer token by itself, so the Host and origin rules are not needed;
//! the body rule holds for every server.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cairn_arm::ArmError;

use crate::response::error_response;

/// What the guard allows.
#[derive(Clone, Debug, Default)]
pub struct BrowserPolicy {
    /// The server has no tokens: Host and origin are checked.
    pub tokenless: bool,
    /// Host names (without port, lower case) a tokenless server answers besides IP literals and `localhost`.
    pub hosts: Arc<Vec<String>>,
    /// Origins (`scheme://host[:port]`, lower case) that may call the API from a page: CORS allow-list.
    pub cors_origins: Arc<Vec<String>>,
}

/// The host name of a `Host` value or an origin's authority (`name`, `name:port`, `[v6]:port`), lower case.
fn host_name(authority: &str) -> String {
    let authority = authority.trim().to_ascii_lowercase();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_owned();
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name.to_owned(),
        _ => authority,
    }
}

/// The authority of an origin (`https://name:port` → `name:port`).
fn origin_authority(origin: &str) -> Option<String> {
    let (_, rest) = origin.trim().split_once("://")?;
    Some(rest.trim_end_matches('/').to_ascii_lowercase())
}

impl BrowserPolicy {
    /// Whether a tokenless server stands behind `host`: an IP literal (a rebinding attack needs a name), `localhost`
    /// (browsers resolve it to loopback themselves), or a configured name.
    fn answers_host(&self, host: &str) -> bool {
        let name = host_name(host);
        name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.hosts.contains(&name)
    }

    fn allows_origin(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        self.cors_origins.contains(&origin)
    }
}

/// The request's authority: HTTP/2's `:authority` (in the URI), else the `Host` header.
fn authority_of(request: &Request) -> Option<String> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str().to_owned());
    }
    request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Whether the request carries a body (declared or chunked).
fn has_body(headers: &HeaderMap) -> bool {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) => length > 0,
        None => headers.contains_key(header::TRANSFER_ENCODING),
    }
}

/// `application/json` or `application/<x>+json`, with any parameters.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|subtype| subtype.ends_with("+json"))
}

fn refuse(status: u16, code: &str, message: String) -> Response {
    error_response(&ArmError::new(status, code, message))
}

/// The middleware (see the module docs).
pub async fn guard(State(policy): State<BrowserPolicy>, request: Request, next: Next) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let allowed_origin = origin.as_deref().filter(|o| policy.allows_origin(o));
    if request.method() == Method::OPTIONS
        && let Some(origin) = allowed_origin
    {
        return preflight(origin);
    }
    if policy.tokenless {
        let authority = authority_of(&request).unwrap_or_default();
        if !policy.answers_host(&authority) {
            return refuse(
                421,
                "MisdirectedRequest",
                format!(
                    "This server does not answer for the host '{}'. A server without tokens answers only IP \
                     addresses, localhost and the names it is configured with (--public-url, --allowed-host).",
                    host_name(&authority)
                ),
            );
        }
        let cross_site = request
            .headers()
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"));
        let foreign_origin = origin.as_deref().is_some_and(|o| {
            origin_authority(o).is_none_or(|a| !a.eq_ignore_ascii_case(authority.trim()))
        });
        if (cross_site || foreign_origin) && allowed_origin.is_none() {
            return refuse(
                403,
                "CrossOriginRequestRefused",
                "A request from another web origin is refused by a server without tokens; an operator may allow \
                 an origin with --cors-origin."
                    .to_owned(),
            );
        }
    }
    let writes = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    );
    if writes && has_body(request.headers()) && !is_json(request.headers()) {
        return refuse(
            415,
            "UnsupportedMediaType",
            "The request body must be JSON: send it with 'Content-Type: application/json'."
                .to_owned(),
        );
    }
    let mut response = next.run(request).await;
    if let Some(origin) = allowed_origin {
        add_cors(response.headers_mut(), origin);
    }
    response
}

fn add_cors(headers: &mut HeaderMap, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(
                "azure-asyncoperation, location, retry-after, x-ms-request-id, x-ms-correlation-request-id",
            ),
        );
    }
}

/// The answer to a CORS preflight from an allowed origin.
fn preflight(origin: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    add_cors(headers, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, HEAD, PUT, PATCH, POST, DELETE"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, prefer, x-ms-correlation-request-id, x-ms-client-request-id",
        ),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_ignore_ports_and_brackets() {
        for (authority, name) in [
            ("127.0.0.1:8080", "127.0.0.1"),
            ("[::1]:8080", "::1"),
            ("LocalHost:1", "localhost"),
            ("cairn.example", "cairn.example"),
            ("evil.example:80", "evil.example"),
        ] {
            assert_eq!(host_name(authority), name, "{authority}");
        }
    }

    #[test]
    fn a_tokenless_server_answers_addresses_localhost_and_its_names() {
        let policy = BrowserPolicy {
            tokenless: true,
            hosts: Arc::new(vec!["cairn.internal".into()]),
            cors_origins: Arc::default(),
        };
        for (host, answered) in [
            ("127.0.0.1:8080", true),
            ("[::1]:8080", true),
            ("10.1.2.3", true),
            ("localhost:8080", true),
            ("app.localhost", true),
            ("cairn.internal:443", true),
            ("rebind.attacker.example:8080", false),
            ("", false),
        ] {
            assert_eq!(policy.answers_host(host), answered, "{host}");
        }
    }

    #[test]
    fn only_json_bodies_pass() {
        for (content_type, json) in [
            (Some("application/json"), true),
            (Some("application/json; charset=utf-8"), true),
            (Some("Application/JSON"), true),
            (Some("application/merge-patch+json"), true),
            (Some("text/plain"), false),
            (Some("application/x-www-form-urlencoded"), false),
            (Some("multipart/form-data; boundary=x"), false),
            (Some("text/json"), false),
            (None, false),
        ] {
            let mut headers = HeaderMap::new();
            if let Some(value) = content_type {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            }
            assert_eq!(is_json(&headers), json, "{content_type:?}");
        }
    }
}

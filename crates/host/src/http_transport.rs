//! The HTTP v2 transport: POST `{base}/{extensionVersion}/resource/{preview,createOrUpdate,get,delete}` and
//! `{base}/{extensionVersion}/longRunningOperation/get`, with an optional bearer token.
//!
//! The base URL may carry a path prefix (`http://host:8080/extension/apis`). Response bodies are read in
//! chunks and abandoned as soon as they pass the request's `max_response_bytes`. An extension on this machine
//! (plain `http` to a loopback address) is called through hyper's pooled client directly (see `LoopbackClient`);
//! any other through the shared reqwest client.

use crate::secret::Redacted;
use bytes::Bytes;
use cairn_extension_contract::headers;
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse,
};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use reqwest::{Client, Method, Url};

/// Why a transport could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportSetupError {
    /// The URL is not an absolute http(s) URL.
    #[error("'{url}' is not an absolute http or https URL")]
    InvalidUrl { url: String },
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {message}")]
    Client { message: String },
}

/// Builds the reqwest client the host shares between HTTP transports (rustls, connection pooling).
pub fn default_http_client() -> Result<Client, TransportSetupError> {
    http_client(true)
}

/// The host's client for extensions reached over plain `http` only: it loads no root certificates, so it cannot
/// verify (and refuses) any `https` server. Reading the system's certificate store takes tens of milliseconds,
/// which every `cairn` command paid at its start.
pub fn plain_http_client() -> Result<Client, TransportSetupError> {
    http_client(false)
}

fn http_client(verifies_tls: bool) -> Result<Client, TransportSetupError> {
    Client::builder()
        // Redirects would send config to another origin: extensions must answer directly.
        .redirect(reqwest::redirect::Policy::none())
        .tls_built_in_root_certs(verifies_tls)
        .build()
        .map_err(|error| TransportSetupError::Client {
            message: error.to_string(),
        })
}

/// Whether `url` names an `https` server (and so needs a client that verifies TLS).
pub fn is_https(url: &str) -> bool {
    url.trim_start()
        .get(..6)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https:"))
}

/// Parses a base URL, requiring http(s), and ensures its path ends with `/` so joins keep the prefix.
pub(crate) fn parse_base_url(url: &str) -> Result<Url, TransportSetupError> {
    let invalid = || TransportSetupError::InvalidUrl {
        url: url.to_owned(),
    };
    let mut parsed = Url::parse(url).map_err(|_| invalid())?;
    if !matches!(parsed.scheme(), "http" | "https")
        || parsed.cannot_be_a_base()
        || parsed.host().is_none()
    {
        return Err(invalid());
    }
    if !parsed.path().ends_with('/') {
        let path = format!("{}/", parsed.path());
        parsed.set_path(&path);
    }
    parsed.set_query(None);
    parsed.set_fragment(None);
    Ok(parsed)
}

/// hyper's pooled HTTP/1 client, for an extension on this machine. reqwest's layers around the same client
/// (redirect policy, retry policy, proxy matching, the URL parsed again for each response) cost more per call than
/// the call to a local extension itself; none of them applies there: redirects are refused anyway, and a proxy has no
/// business between two processes of one machine.
pub(crate) type LoopbackClient = hyper_util::client::legacy::Client<HttpConnector, Full<Bytes>>;

/// The client for `base` when it is plain `http` to a loopback address (`127.0.0.0/8`, `::1`, `localhost`) with no
/// user info (which reqwest turns into basic authentication).
fn loopback_client(base: &Url) -> Option<LoopbackClient> {
    if !base.username().is_empty() || base.password().is_some() {
        return None;
    }
    let host = base.host_str()?;
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback());
    if base.scheme() != "http" || !loopback {
        return None;
    }
    let mut connector = HttpConnector::new();
    // As reqwest does: a request is written in one go, so Nagle's algorithm would only delay it.
    connector.set_nodelay(true);
    Some(
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .build(connector),
    )
}

/// The HTTP plumbing shared by the v2 and REST-draft transports.
#[derive(Clone)]
pub(crate) struct HttpCore {
    pub(crate) client: Client,
    pub(crate) base: Url,
    pub(crate) bearer_token: Option<Redacted<String>>,
    /// Set when `base` is on this machine: requests go through it instead of `client`.
    pub(crate) loopback: Option<LoopbackClient>,
}

impl HttpCore {
    pub(crate) fn new(
        client: Client,
        base_url: &str,
        bearer_token: Option<Redacted<String>>,
    ) -> Result<Self, TransportSetupError> {
        let base = parse_base_url(base_url)?;
        Ok(Self {
            client,
            loopback: loopback_client(&base),
            base,
            bearer_token,
        })
    }

    /// `{base}{segments joined by '/'}`, each segment percent-encoded as one path segment.
    pub(crate) fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            for segment in segments {
                path.push(segment);
            }
        }
        url
    }

    /// Like [`Self::url`], then appends `raw` segments verbatim: already URL-encoded values such as a
    /// draft reference id (validated to hold no `/`, `?` or `#`) must not be encoded twice.
    pub(crate) fn url_with_raw(&self, segments: &[&str], raw: &[&str]) -> Url {
        let mut url = self.url(segments);
        let mut path = url.path().to_owned();
        for segment in raw {
            path.push('/');
            path.push_str(segment);
        }
        url.set_path(&path);
        url
    }

    /// Sends one request and reads the response up to `max_response_bytes`.
    pub(crate) async fn execute(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        request_headers: &[(String, String)],
        max_response_bytes: usize,
    ) -> Result<TransportResponse, TransportError> {
        if let Some(loopback) = &self.loopback {
            return self
                .execute_loopback(
                    loopback,
                    method,
                    url,
                    body,
                    request_headers,
                    max_response_bytes,
                )
                .await;
        }
        let mut builder = self.client.request(method, url);
        for (name, value) in request_headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(token) = &self.bearer_token {
            builder = builder.bearer_auth(token.expose());
        }
        if let Some(body) = body {
            builder = builder
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let mut response = builder.send().await.map_err(map_reqwest_error)?;
        let status = response.status().as_u16();
        let response_headers = text_headers(response.headers());
        refuse_declared_length(response.content_length(), max_response_bytes)?;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(map_reqwest_error)? {
            // Dropping the response on an error closes the connection without reading the rest.
            append_within(&mut body, &chunk, max_response_bytes)?;
        }
        Ok(TransportResponse {
            status,
            headers: response_headers,
            body,
        })
    }
}

impl HttpCore {
    /// [`Self::execute`] through the loopback client: the same request (headers, bearer token marked sensitive, JSON
    /// content type, reqwest's `accept: */*`) and the same reading of the response.
    async fn execute_loopback(
        &self,
        client: &LoopbackClient,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        request_headers: &[(String, String)],
        max_response_bytes: usize,
    ) -> Result<TransportResponse, TransportError> {
        let invalid = |error: http::Error| TransportError::Io {
            message: format!("the request could not be built: {}", error_chain(&error)),
        };
        let mut builder = http::Request::builder().method(method).uri(url.as_str());
        for (name, value) in request_headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(token) = &self.bearer_token {
            let mut value = http::HeaderValue::try_from(format!("Bearer {}", token.expose()))
                .map_err(|error| invalid(error.into()))?;
            value.set_sensitive(true);
            builder = builder.header(http::header::AUTHORIZATION, value);
        }
        let has_body = body.is_some();
        if has_body {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        if !request_headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("accept"))
        {
            builder = builder.header(http::header::ACCEPT, "*/*");
        }
        let request = builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(invalid)?;
        let response = client.request(request).await.map_err(|error| {
            let message = error_chain(&error);
            if error.is_connect() {
                TransportError::Connect { message }
            } else {
                TransportError::Io { message }
            }
        })?;
        let status = response.status().as_u16();
        let response_headers = text_headers(response.headers());
        let declared_length = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        refuse_declared_length(declared_length, max_response_bytes)?;
        let mut incoming = response.into_body();
        let mut body = Vec::new();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|error| TransportError::Io {
                message: error_chain(&error),
            })?;
            if let Ok(chunk) = frame.into_data() {
                // Dropping the body on an error closes the connection without reading the rest.
                append_within(&mut body, &chunk, max_response_bytes)?;
            }
        }
        Ok(TransportResponse {
            status,
            headers: response_headers,
            body,
        })
    }
}

/// A response's headers whose values are text, as a transport reports them.
fn text_headers(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            value
                .to_str()
                .ok()
                .map(|value| (name.as_str().to_owned(), value.to_owned()))
        })
        .collect()
}

/// Refuses a response whose declared length passes `max_response_bytes`, before reading it.
fn refuse_declared_length(
    length: Option<u64>,
    max_response_bytes: usize,
) -> Result<(), TransportError> {
    if length.is_some_and(|length| length > max_response_bytes as u64) {
        return Err(TransportError::ResponseTooLarge {
            limit: max_response_bytes,
        });
    }
    Ok(())
}

/// Adds a chunk to a response body, refusing one that would make it pass `max_response_bytes`.
fn append_within(
    body: &mut Vec<u8>,
    chunk: &[u8],
    max_response_bytes: usize,
) -> Result<(), TransportError> {
    if body.len() + chunk.len() > max_response_bytes {
        return Err(TransportError::ResponseTooLarge {
            limit: max_response_bytes,
        });
    }
    body.extend_from_slice(chunk);
    Ok(())
}

/// Maps a reqwest failure; the URL is stripped so a base URL with user info never reaches a message.
pub(crate) fn map_reqwest_error(error: reqwest::Error) -> TransportError {
    let is_connect = error.is_connect();
    let is_timeout = error.is_timeout();
    let message = error_chain(&error.without_url());
    if is_connect {
        TransportError::Connect { message }
    } else if is_timeout {
        TransportError::Timeout
    } else {
        TransportError::Io { message }
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    message
}

/// The v2.0.0 HTTP transport.
#[derive(Clone)]
pub struct HttpV2Transport {
    core: HttpCore,
}

impl HttpV2Transport {
    /// A transport to `base_url` using `client` (share one client between transports).
    pub fn new(
        client: Client,
        base_url: &str,
        bearer_token: Option<Redacted<String>>,
    ) -> Result<Self, TransportSetupError> {
        Ok(Self {
            core: HttpCore::new(client, base_url, bearer_token)?,
        })
    }

    /// The URL a request goes to.
    pub fn url_for(&self, request: &TransportRequest) -> Url {
        let mut segments = vec![request.extension_version.as_str()];
        segments.extend(request.operation.route().split('/'));
        self.core.url(&segments)
    }
}

impl ExtensionTransport for HttpV2Transport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let url = self.url_for(&request);
            let headers: Vec<(String, String)> = request
                .headers
                .into_iter()
                .filter(|(name, _)| !name.eq_ignore_ascii_case(headers::AUTHORIZATION))
                .collect();
            self.core
                .execute(
                    Method::POST,
                    url,
                    Some(request.body),
                    &headers,
                    request.max_response_bytes,
                )
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_extension_contract::Operation;

    fn request(operation: Operation, version: &str) -> TransportRequest {
        TransportRequest {
            operation,
            extension_version: version.into(),
            body: Vec::new(),
            headers: Vec::new(),
            max_response_bytes: 1,
        }
    }

    #[test]
    fn only_https_urls_need_a_client_that_verifies_tls() {
        assert!(is_https("https://h/"));
        assert!(is_https("  HTTPS://h/"));
        assert!(!is_https("http://h/"));
        assert!(!is_https("http"));
        assert!(!is_https(""));
    }

    #[test]
    fn urls_keep_the_base_path_prefix() {
        let client = Client::new();
        let cases = [
            (
                "http://127.0.0.1:9/",
                Operation::CreateOrUpdate,
                "1.2.0",
                "http://127.0.0.1:9/1.2.0/resource/createOrUpdate",
            ),
            (
                "http://h/extension/apis",
                Operation::Get,
                "1.0.0",
                "http://h/extension/apis/1.0.0/resource/get",
            ),
            (
                "https://h/p/",
                Operation::GetLongRunningOperation,
                "2.0.0-beta",
                "https://h/p/2.0.0-beta/longRunningOperation/get",
            ),
            (
                "http://h",
                Operation::Preview,
                "a/b",
                "http://h/a%2Fb/resource/preview",
            ),
        ];
        for (base, operation, version, expected) in cases {
            let transport = HttpV2Transport::new(client.clone(), base, None).unwrap();
            assert_eq!(
                transport.url_for(&request(operation, version)).as_str(),
                expected
            );
        }
    }

    #[test]
    fn only_plain_http_to_this_machine_takes_the_loopback_client() {
        let loopback = |url: &str| loopback_client(&parse_base_url(url).unwrap()).is_some();
        for url in [
            "http://127.0.0.1:9/",
            "http://127.8.0.1/p",
            "http://[::1]:8080/",
            "http://LocalHost:1/",
        ] {
            assert!(loopback(url), "{url}");
        }
        for url in [
            "https://127.0.0.1:9/",
            "https://localhost/",
            "http://10.0.0.1/",
            "http://[::2]/",
            "http://localhost.example.com/",
            "http://h/",
            "http://user:secret@127.0.0.1:9/",
            "http://user@localhost/",
        ] {
            assert!(!loopback(url), "{url}");
        }
    }

    #[test]
    fn rejects_non_http_urls() {
        for url in ["ftp://h/", "not a url", "unix:/tmp/sock", "mailto:a@b"] {
            assert!(parse_base_url(url).is_err(), "{url}");
        }
    }
}

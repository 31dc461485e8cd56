//! The HTTP v2 transport: POST `{base}/{extensionVersion}/resource/{preview,createOrUpdate,get,delete}` and
//! `{base}/{extensionVersion}/longRunningOperation/get`, with an optional bearer token.
//!
//! The base URL may carry a path prefix (`http://host:8080/extension/apis`). Response bodies are read in
//! chunks and abandoned as soon as they pass the request's `max_response_bytes`.

use crate::secret::Redacted;
use cairn_extension_contract::headers;
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse,
};
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

/// The HTTP plumbing shared by the v2 and REST-draft transports.
#[derive(Clone)]
pub(crate) struct HttpCore {
    pub(crate) client: Client,
    pub(crate) base: Url,
    pub(crate) bearer_token: Option<Redacted<String>>,
}

impl HttpCore {
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
        let response_headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                value
                    .to_str()
                    .ok()
                    .map(|value| (name.as_str().to_owned(), value.to_owned()))
            })
            .collect();
        if response
            .content_length()
            .is_some_and(|length| length > max_response_bytes as u64)
        {
            return Err(TransportError::ResponseTooLarge {
                limit: max_response_bytes,
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(map_reqwest_error)? {
            if body.len() + chunk.len() > max_response_bytes {
                // Dropping the response here closes the connection without reading the rest.
                return Err(TransportError::ResponseTooLarge {
                    limit: max_response_bytes,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(TransportResponse {
            status,
            headers: response_headers,
            body,
        })
    }
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
            core: HttpCore {
                client,
                base: parse_base_url(base_url)?,
                bearer_token,
            },
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
    fn rejects_non_http_urls() {
        for url in ["ftp://h/", "not a url", "unix:/tmp/sock", "mailto:a@b"] {
            assert!(parse_base_url(url).is_err(), "{url}");
        }
    }
}

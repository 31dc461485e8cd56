//! The client itself: building it (base URL, bearer token, trusted CAs, timeouts, polling bounds), URLs with
//! escaped segments and an `api-version`, one request with its answer, `nextLink` paging and `Location` polling.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::API_VERSION;
use crate::error::{ClientError, arm_error, error_chain};

/// Characters escaped in a path segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// Characters escaped in a query parameter value.
const QUERY_VALUE: &AsciiSet = &SEGMENT.add(b'&').add(b'=').add(b'+').add(b'/').add(b';');

/// How long to wait between polls of a long-running operation: the server's `Retry-After`, else `default`, kept
/// within `min..=max` (a live view wants updates even when a server asks for minutes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polling {
    /// The wait when the server sends no `Retry-After`.
    pub default: Duration,
    /// The shortest wait, whatever `Retry-After` says (`Retry-After: 0` would otherwise spin).
    pub min: Duration,
    /// The longest wait, whatever `Retry-After` says.
    pub max: Duration,
}

impl Default for Polling {
    fn default() -> Self {
        Polling {
            default: Duration::from_secs(1),
            min: Duration::from_millis(200),
            max: Duration::from_secs(10),
        }
    }
}

impl Polling {
    /// The wait before the next poll, given the server's `Retry-After`.
    pub fn delay(&self, retry_after: Option<Duration>) -> Duration {
        retry_after
            .unwrap_or(self.default)
            .clamp(self.min, self.max.max(self.min))
    }
}

/// A CA certificate to trust, as given to the builder.
enum CaSource {
    File(PathBuf),
    Pem(Vec<u8>),
}

/// Builds a [`Client`]: `Client::builder(url).bearer_token(t).ca_certificate_file(p).build()`.
pub struct ClientBuilder {
    base_url: String,
    token: Option<String>,
    ca: Vec<CaSource>,
    user_agent: String,
    connect_timeout: Duration,
    timeout: Duration,
    polling: Polling,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca_certificates", &self.ca.len())
            .field("user_agent", &self.user_agent)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("polling", &self.polling)
            .finish()
    }
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer {token}` on every request (an empty token sends none). The header is marked
    /// sensitive, and neither `Debug` nor an error shows the token.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into()).filter(|t| !t.is_empty());
        self
    }

    /// Trusts the PEM certificate(s) in `path` besides the system roots (e.g. a server's self-signed
    /// certificate); read when the client is built.
    pub fn ca_certificate_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca.push(CaSource::File(path.into()));
        self
    }

    /// Trusts the PEM certificate(s) in `pem` besides the system roots.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca.push(CaSource::Pem(pem.into()));
        self
    }

    /// The `User-Agent` header (default `cairn-client/{version}`).
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// How long connecting may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one request may take, answer included (default 120 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The bounds of the waits between polls of long-running operations (default 1 s, within 200 ms..=10 s).
    pub fn polling(mut self, polling: Polling) -> Self {
        self.polling = polling;
        self
    }

    /// The client; fails on a base URL that is not `http(s)://`, a token no header can carry, or a CA
    /// certificate that cannot be read or holds no PEM certificate.
    pub fn build(self) -> Result<Client, ClientError> {
        let base = self.base_url.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::InvalidBaseUrl(self.base_url));
        }
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| ClientError::InvalidToken)?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(self.user_agent)
            .connect_timeout(self.connect_timeout)
            .timeout(self.timeout);
        for source in &self.ca {
            for cert in certificates(source)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        if base.starts_with("http://") && self.ca.is_empty() {
            // Plain http needs no root certificates, and reading the system's store was a third of a short
            // command's time (hundreds of files).
            builder = builder
                .tls_built_in_root_certs(false)
                .redirect(plain_http_redirects());
        }
        let http = builder
            .build()
            .map_err(|e| ClientError::Build(error_chain(&e)))?;
        Ok(Client {
            http,
            base,
            polling: self.polling,
        })
    }
}

/// How many redirects a request follows, as reqwest does by default.
const MAX_REDIRECTS: usize = 10;

/// The redirects a client of a plain `http` server follows: to `http` only. It holds no root certificates, so a
/// redirect to `https` is refused with what to do instead of failing its TLS handshake with an unknown issuer.
fn plain_http_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.url().scheme() != "http" {
            let origin = attempt.url().origin().ascii_serialization();
            attempt.error(format!(
                "the server redirects to {origin}: give that address as the server URL"
            ))
        } else if attempt.previous().len() >= MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// The certificates of one CA source; at least one.
fn certificates(source: &CaSource) -> Result<Vec<reqwest::Certificate>, ClientError> {
    let (pem, origin) = match source {
        CaSource::File(path) => (
            std::fs::read(path).map_err(|source| ClientError::ReadCaCertificate {
                path: path.clone(),
                source,
            })?,
            path.display().to_string(),
        ),
        CaSource::Pem(pem) => (pem.clone(), "PEM data".to_string()),
    };
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        ClientError::InvalidCaCertificate {
            origin: origin.clone(),
            reason: e.to_string(),
        }
    })?;
    if certs.is_empty() {
        return Err(ClientError::NoCaCertificate { origin });
    }
    Ok(certs)
}

/// An ARM REST client for one cairn server (or any server speaking the same API). Cheap to clone.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    polling: Polling,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base)
            .field("polling", &self.polling)
            .finish_non_exhaustive()
    }
}

/// An answer that is not an error: the status, the headers long-running operations are followed by, and the JSON
/// body (`Null` when empty).
#[derive(Clone, Debug)]
pub struct Response {
    pub status: StatusCode,
    pub body: Value,
    /// `Azure-AsyncOperation`: the operation status URL to poll (`{"status": "Running" | "Succeeded" | ...}`).
    pub async_operation: Option<String>,
    /// `Location`: the URL to poll while it answers 202.
    pub location: Option<String>,
    /// `Retry-After`, in whole seconds.
    pub retry_after: Option<Duration>,
    /// The server waited for the operation to end before answering, as `Prefer: wait` asked
    /// (`Preference-Applied: wait=N`): the next poll need not wait again.
    pub waited: bool,
    /// `ETag`: the answer's entity tag, for a later read's `If-None-Match`.
    pub etag: Option<String>,
}

impl Client {
    /// A builder for a client of the server at `base_url` (e.g. `https://127.0.0.1:8443`).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            token: None,
            ca: Vec::new(),
            user_agent: concat!("cairn-client/", env!("CARGO_PKG_VERSION")).to_string(),
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(120),
            polling: Polling::default(),
        }
    }

    /// A client of the server at `base_url` with the default settings and no token.
    pub fn new(base_url: impl Into<String>) -> Result<Self, ClientError> {
        Self::builder(base_url).build()
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The polling bounds this client applies.
    pub fn polling(&self) -> Polling {
        self.polling
    }

    /// The wait before the next poll, given the server's `Retry-After`.
    pub fn poll_delay(&self, retry_after: Option<Duration>) -> Duration {
        self.polling.delay(retry_after)
    }

    /// `{base}{path}?api-version={api_version}&{name}={value}...` with each path segment and query value escaped.
    pub fn url(&self, path: &str, api_version: &str, query: &[(&str, &str)]) -> String {
        let encoded: Vec<String> = path
            .split('/')
            .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
            .collect();
        let mut url = format!(
            "{}{}?api-version={api_version}",
            self.base,
            encoded.join("/")
        );
        for (name, value) in query {
            url.push_str(&format!(
                "&{name}={}",
                utf8_percent_encode(value, QUERY_VALUE)
            ));
        }
        url
    }

    /// Sends one request to an absolute `url` (a `Location`, `nextLink` or status URL, or one built with
    /// [`Client::url`]) with a fresh `x-ms-client-request-id`. A 4xx/5xx answer is [`ClientError::Arm`].
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Response, ClientError> {
        self.send_preferring(method, url, body, None, None).await
    }

    /// GETs an operation status `url` asking the server to answer once the operation has ended or `wait` has passed
    /// (`Prefer: wait=N`, RFC 7240, whole seconds); a server that does not wait answers at once, `waited` false.
    pub async fn poll_waiting(&self, url: &str, wait: Duration) -> Result<Response, ClientError> {
        self.send_preferring(Method::GET, url, None, Some(wait), None)
            .await
    }

    /// GETs `url` unless it still reads as `etag` (`If-None-Match`), asking the server to hold the answer until it
    /// changes or `wait` has passed (`Prefer: wait=N`): 304 with an empty body when it did not change.
    pub async fn get_if_changed(
        &self,
        url: &str,
        etag: Option<&str>,
        wait: Duration,
    ) -> Result<Response, ClientError> {
        self.send_preferring(Method::GET, url, None, Some(wait), etag)
            .await
    }

    async fn send_preferring(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        wait: Option<Duration>,
        if_none_match: Option<&str>,
    ) -> Result<Response, ClientError> {
        let mut request = self
            .http
            .request(method.clone(), url)
            .header("x-ms-client-request-id", uuid::Uuid::new_v4().to_string());
        if let Some(wait) = wait {
            request = request.header("prefer", format!("wait={}", wait.as_secs().max(1)));
        }
        if let Some(etag) = if_none_match {
            request = request.header("if-none-match", etag);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| ClientError::Unreachable {
            base: self.base.clone(),
            reason: error_chain(&e),
        })?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let async_operation = header("azure-asyncoperation");
        let etag = header("etag");
        let location = header("location");
        let retry_after = header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let waited = wait.is_some()
            && header("preference-applied").is_some_and(|applied| {
                applied
                    .split(',')
                    .any(|p| p.trim().to_ascii_lowercase().starts_with("wait"))
            });
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ClientError::ReadAnswer {
                reason: error_chain(&e),
            })?;
        let body = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|_| ClientError::NotJson {
                method,
                path: strip_query(url).to_string(),
                status,
            })?
        };
        if status.is_client_error() || status.is_server_error() {
            return Err(ClientError::Arm(arm_error(status, &body)));
        }
        Ok(Response {
            status,
            body,
            async_operation,
            location,
            retry_after,
            waited,
            etag,
        })
    }

    /// Sends one request to `path` at the deployments API version ([`API_VERSION`]).
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Response, ClientError> {
        self.send(method, &self.url(path, API_VERSION, &[]), body)
            .await
    }

    /// Follows a 202 with `Location` to its end (GET the location, waiting as `Retry-After` says, while it
    /// answers 202) and returns the final answer; any other answer is returned as is.
    pub async fn follow_location(&self, mut answer: Response) -> Result<Response, ClientError> {
        while answer.status == StatusCode::ACCEPTED {
            let Some(location) = answer.location.clone() else {
                break;
            };
            tokio::time::sleep(self.poll_delay(answer.retry_after)).await;
            answer = self.send(Method::GET, &location, None).await?;
        }
        Ok(answer)
    }

    /// The items of the list at `path` (deployments API version) and of its `nextLink` pages.
    pub async fn list(&self, path: &str) -> Result<Vec<Value>, ClientError> {
        self.list_url(self.url(path, API_VERSION, &[])).await
    }

    /// The items (`value`) of the list at `url` and of its `nextLink` pages.
    pub async fn list_url(&self, mut url: String) -> Result<Vec<Value>, ClientError> {
        let mut items = Vec::new();
        loop {
            let answer = self.send(Method::GET, &url, None).await?;
            if let Some(value) = answer.body["value"].as_array() {
                items.extend(value.iter().cloned());
            }
            match answer.body["nextLink"].as_str() {
                Some(next) if !next.is_empty() => url = next.to_string(),
                _ => return Ok(items),
            }
        }
    }
}

/// The URL without its query (an error message names the path, never the query's values).
fn strip_query(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_escaped_per_segment() {
        let client = Client::new("http://127.0.0.1:1/").unwrap();
        assert_eq!(
            client.url("/subscriptions/s/resourceGroups/my rg", API_VERSION, &[]),
            "http://127.0.0.1:1/subscriptions/s/resourceGroups/my%20rg?api-version=2025-04-01"
        );
    }

    #[test]
    fn query_values_are_escaped() {
        let client = Client::new("http://127.0.0.1:1").unwrap();
        assert_eq!(
            client.url(
                "/subscriptions/s/providers/Microsoft.Resources/deploymentStacks/st",
                crate::STACKS_API_VERSION,
                &[("unmanageAction.Resources", "delete"), ("odd", "a&b=c d")]
            ),
            "http://127.0.0.1:1/subscriptions/s/providers/Microsoft.Resources/deploymentStacks/st\
             ?api-version=2025-07-01&unmanageAction.Resources=delete&odd=a%26b%3Dc%20d"
        );
    }

    #[test]
    fn poll_delays_follow_retry_after_within_bounds() {
        let polling = Polling::default();
        assert_eq!(polling.delay(None), Duration::from_secs(1));
        assert_eq!(
            polling.delay(Some(Duration::ZERO)),
            Duration::from_millis(200)
        );
        assert_eq!(
            polling.delay(Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            polling.delay(Some(Duration::from_secs(600))),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn only_http_urls_are_servers() {
        assert!(matches!(
            Client::new("ftp://x"),
            Err(ClientError::InvalidBaseUrl(url)) if url == "ftp://x"
        ));
        assert!(Client::new("https://x/").is_ok());
    }

    #[test]
    fn tokens_never_show_in_debug_or_errors() {
        let builder = Client::builder("http://x").bearer_token("s3cr3t-token");
        assert!(!format!("{builder:?}").contains("s3cr3t"));
        let client = builder.build().unwrap();
        assert!(!format!("{client:?}").contains("s3cr3t"));
        let error = Client::builder("http://x")
            .bearer_token("s3cr3t\ntoken")
            .build()
            .unwrap_err();
        assert!(matches!(error, ClientError::InvalidToken));
        assert!(!error.to_string().contains("s3cr3t"));
    }

    #[test]
    fn ca_certificates_must_be_pem() {
        let dir = std::env::temp_dir().join(format!("cairn-client-ca-{}", uuid::Uuid::new_v4()));
        let missing = Client::builder("https://x")
            .ca_certificate_file(&dir)
            .build()
            .unwrap_err();
        assert!(matches!(missing, ClientError::ReadCaCertificate { .. }));
        assert!(missing.is_configuration());
        let empty = Client::builder("https://x")
            .ca_certificate_pem("not a certificate")
            .build()
            .unwrap_err();
        assert!(
            matches!(empty, ClientError::NoCaCertificate { .. }),
            "{empty:?}"
        );
    }
}

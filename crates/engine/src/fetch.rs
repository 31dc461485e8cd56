//! Downloading linked templates and parameters files (`templateLink.uri`, `parametersLink`): the fetcher trait,
//! its HTTP implementation and ARM's download limits. Messages never hold the URI (its query may be a credential).

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use reqwest::Url;

/// The largest linked template or parameters file ARM downloads.
pub const DEFAULT_MAX_LINKED_BYTES: usize = 4 * 1024 * 1024;
/// How long one download may take.
pub const DEFAULT_LINK_TIMEOUT: Duration = Duration::from_secs(30);

/// The future a [`TemplateFetcher`] returns.
pub type FetchFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, FetchError>> + Send + 'a>>;

/// Downloads linked templates and parameters files.
pub trait TemplateFetcher: Send + Sync {
    /// The content at `uri` (its query included), at most `max_bytes` long.
    fn fetch<'a>(&'a self, uri: &'a Url, max_bytes: usize) -> FetchFuture<'a>;
}

/// Why a download failed. Messages never hold the URI (its query may be a credential).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("the server answered with HTTP status {0}")]
    Status(u16),
    #[error("the content is larger than the limit of {0} bytes")]
    TooLarge(usize),
    #[error("the download timed out")]
    Timeout,
    #[error("{0}")]
    Failed(String),
}

/// The default fetcher: HTTP(S) with `reqwest`. Its client is built at the first download: building one loads the
/// system's root certificates (tens of milliseconds), which a deployment of an inline template never needs.
pub struct HttpTemplateFetcher {
    timeout: Duration,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl std::fmt::Debug for HttpTemplateFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTemplateFetcher")
            .finish_non_exhaustive()
    }
}

/// Redirects ARM follows: a few, and only to http or https.
const MAX_REDIRECTS: usize = 10;

impl HttpTemplateFetcher {
    pub fn new(timeout: Duration) -> Self {
        HttpTemplateFetcher {
            timeout,
            client: OnceLock::new(),
        }
    }

    fn client(&self) -> &Result<reqwest::Client, String> {
        self.client.get_or_init(|| {
            let policy = reqwest::redirect::Policy::custom(|attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    attempt.error("too many redirects")
                } else if matches!(attempt.url().scheme(), "http" | "https") {
                    attempt.follow()
                } else {
                    attempt.error("a redirect to a scheme other than http or https")
                }
            });
            reqwest::Client::builder()
                .redirect(policy)
                .timeout(self.timeout)
                .connect_timeout(self.timeout)
                .build()
                .map_err(|e| {
                    tracing::warn!(error = %e.without_url(), "the linked-template HTTP client could not start");
                    "the HTTP client could not start".to_string()
                })
        })
    }
}

/// A reqwest failure as a reason without its URL.
fn failure(e: &reqwest::Error) -> FetchError {
    if e.is_timeout() {
        FetchError::Timeout
    } else if e.is_redirect() {
        FetchError::Failed(
            "a redirect was refused (too many, or to a scheme other than http or https)".into(),
        )
    } else if e.is_connect() {
        FetchError::Failed("the server could not be reached".into())
    } else if e.is_body() || e.is_decode() {
        FetchError::Failed("the download was interrupted".into())
    } else {
        FetchError::Failed("the request failed".into())
    }
}

impl TemplateFetcher for HttpTemplateFetcher {
    fn fetch<'a>(&'a self, uri: &'a Url, max_bytes: usize) -> FetchFuture<'a> {
        Box::pin(async move {
            let client = self
                .client()
                .as_ref()
                .map_err(|e| FetchError::Failed(e.clone()))?;
            let mut response = client
                .get(uri.clone())
                .send()
                .await
                .map_err(|e| failure(&e))?;
            let status = response.status();
            if !status.is_success() {
                return Err(FetchError::Status(status.as_u16()));
            }
            if response
                .content_length()
                .is_some_and(|len| len > max_bytes as u64)
            {
                return Err(FetchError::TooLarge(max_bytes));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| failure(&e))? {
                if body.len() + chunk.len() > max_bytes {
                    return Err(FetchError::TooLarge(max_bytes));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        })
    }
}

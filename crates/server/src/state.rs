//! What every request handler shares: the engine and its store, the options, the tokens, the extension host and the
//! stack service. Nothing a request leaves behind lives here: results of operations polled through `Location` are in
//! the store (`operation_results`), so any server sharing it answers the poll; the operations lists kept between
//! polls (`operations_cache`) are read from the store too, and only spare reading it all again.

use std::sync::Arc;

use cairn_engine::Engine;
use cairn_host::ExtensionHost;
use cairn_metrics::Metrics;
use cairn_store::Store;

use crate::auth::TokenSet;
use crate::operations_cache::OperationsCache;

/// The default request-size limit (ARM's): 4 MB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// The default bound on an oversized body read and thrown away before its 413 is sent: 32 MiB.
pub const DEFAULT_MAX_DISCARDED_BYTES: usize = 32 * 1024 * 1024;

/// Tunable behaviour of the API.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// `Retry-After` (seconds) on long-running operations. ARM says 15+; locally 1 keeps clients quick.
    pub retry_after_seconds: u32,
    /// Requests with a larger body get 413 `RequestEntityTooLarge`.
    pub max_request_bytes: usize,
    /// How much of an oversized body is read and discarded before the 413, so the client is not reset while
    /// still sending; past it the connection is closed with the rest unread.
    pub max_discarded_bytes: usize,
    /// `scheme://host[:port]` for absolute URLs in responses; when unset, the request's scheme and
    /// `Host` are used (right for direct clients, wrong behind a proxy that rewrites `Host`).
    pub public_base_url: Option<String>,
    /// Who may read `/metrics`.
    pub metrics_auth: MetricsAuth,
    /// Host names a server without tokens answers besides IP addresses, `localhost` and the public URL's host
    /// (`--allowed-host`); other names get 421, which is what stops DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Web origins allowed to call the API from a page (`--cors-origin`): the only responses with CORS headers.
    pub cors_origins: Vec<String>,
}

/// Who may read `/metrics` (`--metrics-auth`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MetricsAuth {
    /// The API's bearer tokens, a token without scopes (metrics cover every subscription; a scoped token gets
    /// 403). Without a tokens file, no token is needed, as for the API.
    #[default]
    Api,
    /// No token: for a scraper on a network that only operators reach.
    None,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            retry_after_seconds: 1,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_discarded_bytes: DEFAULT_MAX_DISCARDED_BYTES,
            public_base_url: None,
            metrics_auth: MetricsAuth::Api,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
        }
    }
}

/// The state shared by all handlers.
pub struct AppState {
    pub(crate) engine: Engine,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) options: ServerOptions,
    pub(crate) tokens: Option<Arc<TokenSet>>,
    pub(crate) host: Option<Arc<ExtensionHost>>,
    /// Deployment stacks; without it the stack routes answer 501.
    pub(crate) stacks: Option<cairn_stack_service::StackService>,
    /// Where requests are counted, and what `/metrics` shows.
    pub(crate) metrics: Metrics,
    /// Deployment operations lists kept serialised between polls (derived from the store alone).
    pub(crate) operations: Arc<OperationsCache>,
}

impl AppState {
    /// State over `engine` (and its store) with default options, no authentication and no extension host
    /// API.
    pub fn new(engine: Engine) -> Self {
        Self {
            store: engine.store().clone(),
            engine,
            options: ServerOptions::default(),
            tokens: None,
            host: None,
            stacks: None,
            metrics: Metrics::default(),
            operations: Arc::default(),
        }
    }

    /// Sets the options.
    pub fn with_options(mut self, options: ServerOptions) -> Self {
        self.options = options;
        self
    }

    /// Requires a bearer token from `tokens` on every request but the health endpoint.
    pub fn with_tokens(mut self, tokens: TokenSet) -> Self {
        self.tokens = Some(Arc::new(tokens));
        self
    }

    /// Mounts the extension host's API (see [`crate::EXTENSIBILITY_PREFIX`]).
    pub fn with_extension_host(mut self, host: Arc<ExtensionHost>) -> Self {
        self.host = Some(host);
        self
    }

    /// Serves deployment stacks through `service`.
    pub fn with_stack_service(mut self, service: cairn_stack_service::StackService) -> Self {
        self.stacks = Some(service);
        self
    }

    /// Counts requests into `metrics` and serves it at `/metrics` (the same set the engine, stack service and
    /// extension host record into, for one process-wide view).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The options.
    pub fn options(&self) -> &ServerOptions {
        &self.options
    }
}

//! `cairn serve`: the ARM-compatible REST API of cairn — resource groups and deployments at resource
//! group, subscription, management group and tenant scope — over HTTP/1.1 and HTTP/2, with optional TLS
//! and bearer-token authentication. See `docs/server.md`.
//!
//! - [`app`] builds the axum application from an [`AppState`]; tests drive it with
//!   `tower::ServiceExt::oneshot`, without sockets.
//! - [`listen::Listener`] binds, terminates TLS and serves an app until a shutdown token fires.
//! - [`serve::run`] is the whole server as `cairn serve` runs it: listener, then store, extension host,
//!   engine and stack service assembled by `cairn-assembly`, recovery and sweeps, signals.
//!
//! Architecture: one catch-all handler ([`dispatch`]) classifies every ARM path with
//! `cairn_arm::route::classify`; axum's router holds only the health endpoint and the extension host
//! API, and the web console's embedded assets ([`ui`], `/ui`). Layers, outermost first: request ids (`x-ms-request-id`, `x-ms-correlation-request-id`), sensitive
//! `Authorization` header, tracing (method, path, status, latency; never headers or bodies), catch-panic
//! (500 in ARM's shape), request-size limit (413, answered after reading and discarding the rest of the body up to a bound; what the client still sends after it is read and dropped, see `docs/limits.md`), bearer-token authentication (401/403).

pub mod auth;
pub mod browser;
mod deployments;
mod dispatch;
mod groups;
pub mod listen;
pub mod middleware;
pub mod observe;
mod operation_results;
mod operations_cache;
mod resources;
pub mod response;
pub mod serve;
mod stack_drift;
mod stack_what_if;
mod stacks;
mod state;
pub mod ui;

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::routing::{any, get};
use cairn_host::api::HostApiOptions;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

pub use auth::{Caller, HEALTH_PATH, TokenFileError, TokenSet};
pub use listen::{ListenError, Listener, TlsFiles, install_crypto_provider};
pub use observe::{METRICS_PATH, READY_PATH};
pub use state::{
    AppState, DEFAULT_MAX_DISCARDED_BYTES, DEFAULT_MAX_REQUEST_BYTES, MetricsAuth, ServerOptions,
};

/// Where the extension host's API is mounted (exact case): e.g.
/// `GET /providers/Cairn.Extensibility/extensions`.
pub const EXTENSIBILITY_PREFIX: &str = "/providers/Cairn.Extensibility";

/// What the browser guard allows on this server: Host and origin checks without tokens, the configured names and
/// the public URL's host, and the CORS allow-list.
fn browser_policy(state: &AppState) -> browser::BrowserPolicy {
    let mut hosts: Vec<String> = state
        .options
        .allowed_hosts
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    if let Some(url) = &state.options.public_base_url
        && let Some((_, rest)) = url.split_once("://")
    {
        let authority = rest.split('/').next().unwrap_or_default();
        let name = authority
            .rsplit_once(':')
            .map_or(authority, |(name, _)| name);
        hosts.push(name.trim_matches(['[', ']']).to_ascii_lowercase());
    }
    browser::BrowserPolicy {
        tokenless: state.tokens.is_none(),
        hosts: Arc::new(hosts),
        cors_origins: Arc::new(
            state
                .options
                .cors_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        ),
    }
}

/// The application: health, readiness and metrics endpoints, the web console, extension host API, the ARM
/// catch-all, and the layers.
pub fn app(state: AppState) -> Router {
    let state = Arc::new(state);
    let mut router = Router::new()
        .route(HEALTH_PATH, get(observe::health))
        .route(READY_PATH, get(observe::ready))
        .route(METRICS_PATH, get(observe::metrics))
        .route(ui::UI_PATH, any(ui::serve))
        .route("/ui/", any(ui::serve))
        .route("/ui/{*path}", any(ui::serve));
    if let Some(host) = &state.host {
        let host_api = cairn_host::api::router(
            host.clone(),
            HostApiOptions {
                public_base_url: state.options.public_base_url.clone(),
                // Pending host operations live in the store, so their `Location` answers after a restart.
                operations: Some(state.store.clone()),
            },
        );
        router = router.nest_service(EXTENSIBILITY_PREFIX, host_api);
    }
    router
        .fallback(dispatch::handle)
        .with_state(state.clone())
        .layer(axum::middleware::from_fn_with_state(
            auth::AuthGate {
                tokens: state.tokens.clone(),
                metrics_public: state.options.metrics_auth == MetricsAuth::None,
            },
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(
            browser_policy(&state),
            browser::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            middleware::BodyLimits {
                max_request_bytes: state.options.max_request_bytes,
                max_discarded_bytes: state.options.max_discarded_bytes,
            },
            middleware::limit_body,
        ))
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .layer(
            // Method, URI, version, then status and latency at INFO; headers and bodies are never recorded.
            TraceLayer::new_for_http()
                .make_span_with(DefaultMakeSpan::new().level(Level::INFO))
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
        ]))
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            observe::count_request,
        ))
        .layer(axum::middleware::from_fn(middleware::request_ids))
}

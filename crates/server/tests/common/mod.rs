//! Test helpers: an app over an in-memory SQLite store, and one-shot requests with decoded answers.
#![allow(dead_code)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry};
use cairn_server::{AppState, ServerOptions, TokenSet};
use cairn_store::Store;
use cairn_store::crypto::MasterKey;
use cairn_store_sqlite::SqliteStore;
use serde_json::Value;
use tower::ServiceExt;

pub struct TestApp {
    pub router: Router,
    pub store: Arc<dyn Store>,
    pub engine: Engine,
}

/// An extension host with the built-in Local extension in process.
pub fn host() -> Arc<ExtensionHost> {
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        cairn_ext_local::NAME,
        cairn_ext_local::VERSION,
        Arc::new(cairn_ext_local::in_process_transport()),
    ));
    Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings::default(),
        "http://cairn.test",
    ))
}

/// An engine over `store` with the built-in Local extension in process.
pub fn engine(store: Arc<dyn Store>, host: Arc<ExtensionHost>) -> Engine {
    Engine::new(store, host, Providers::empty(), EngineSettings::default()).unwrap()
}

impl TestApp {
    pub async fn new() -> Self {
        Self::build(None).await
    }

    pub async fn with_tokens(tokens: &str) -> Self {
        Self::build(Some(TokenSet::parse(tokens).unwrap())).await
    }

    /// Another server on this app's store (as a second replica on one database): its own engine, host and stack
    /// service.
    pub fn replica(&self) -> Self {
        Self::on_store(self.store.clone(), None, Self::test_options())
    }

    fn test_options() -> ServerOptions {
        ServerOptions {
            retry_after_seconds: 0,
            // The tests address the server as `cairn.test`.
            allowed_hosts: vec!["cairn.test".into()],
            ..ServerOptions::default()
        }
    }

    async fn build(tokens: Option<TokenSet>) -> Self {
        Self::build_with(tokens, Self::test_options()).await
    }

    /// An app with `options` (and `tokens`, when given).
    pub async fn with_options(tokens: Option<&str>, options: ServerOptions) -> Self {
        Self::build_with(tokens.map(|t| TokenSet::parse(t).unwrap()), options).await
    }

    async fn build_with(tokens: Option<TokenSet>, options: ServerOptions) -> Self {
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open_in_memory(&MasterKey::from_bytes([7; 32]))
                .await
                .unwrap(),
        );
        Self::on_store(store, tokens, options)
    }

    fn on_store(store: Arc<dyn Store>, tokens: Option<TokenSet>, options: ServerOptions) -> Self {
        let host = host();
        let engine = engine(store.clone(), host.clone());
        let mut state = AppState::new(engine.clone())
            .with_options(options)
            .with_extension_host(host.clone())
            .with_stack_service(cairn_stack_service::StackService::new(
                engine.clone(),
                store.clone(),
                host,
                Providers::empty(),
                cairn_stack_service::StackServiceSettings {
                    retry_backoff: std::time::Duration::from_millis(10),
                    ..Default::default()
                },
            ));
        if let Some(tokens) = tokens {
            state = state.with_tokens(tokens);
        }
        Self {
            router: cairn_server::app(state),
            store,
            engine,
        }
    }
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub json: Value,
}

pub async fn call(
    router: &Router,
    method: &str,
    path: &str,
    body: Option<String>,
    authorization: Option<&str>,
) -> Answer {
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    call_with_headers(router, method, path, body, &headers).await
}

pub async fn call_with_headers(
    router: &Router,
    method: &str,
    path: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "cairn.test");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .header("content-length", body.len())
            .body(Body::from(body)),
        None => builder.body(Body::empty()),
    }
    .unwrap();
    send(router, request).await
}

/// A request whose body has no declared length.
pub async fn call_streamed(router: &Router, method: &str, path: &str, body: String) -> Answer {
    let chunks = body
        .as_bytes()
        .chunks(64 * 1024)
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "cairn.test")
        .body(Body::new(Chunked(chunks)))
        .unwrap();
    send(router, request).await
}

/// A body of data frames with no size hint, like a chunked upload.
struct Chunked(std::collections::VecDeque<bytes::Bytes>);

impl http_body::Body for Chunked {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

pub async fn send(router: &Router, request: Request<Body>) -> Answer {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        text,
        json,
    }
}

/// The files under `dir` (recursively) whose bytes contain `needle`: a plaintext secret on disk.
pub fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|window| window == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

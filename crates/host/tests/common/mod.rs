//! A scriptable fake extension (an axum app on 127.0.0.1:0) and host builders for the integration tests.

#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use cairn_extension_contract::ExtensionTransport;
use cairn_host::draft_transport::RestDraftTransport;
use cairn_host::http_transport::{HttpV2Transport, default_http_client};
use cairn_host::{
    ExtensionHost, HostSettings, Redacted, RegisteredExtension, Registry, RetryPolicy,
};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    pub fn raw(status: u16, body: &[u8]) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_vec(),
            delay: Duration::ZERO,
        }
    }

    pub fn empty(status: u16) -> Self {
        Self::raw(status, b"")
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request the fake received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct FakeState {
    scripts: Mutex<HashMap<String, VecDeque<Reply>>>,
    calls: Mutex<Vec<Recorded>>,
}

/// The fake extension. Routes are keyed `"METHOD /path"`; each call pops the next scripted reply, and
/// the last reply of a route repeats once the queue holds only it.
pub struct FakeExtension {
    pub origin: String,
    state: Arc<FakeState>,
}

impl FakeExtension {
    pub async fn start() -> Self {
        let state = Arc::new(FakeState::default());
        let app = Router::new().fallback({
            let state = state.clone();
            move |method: Method, uri: Uri, headers: HeaderMap, body: Body| {
                let state = state.clone();
                async move { answer(state, method, uri, headers, body).await }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            origin: format!("http://{address}"),
            state,
        }
    }

    pub fn script(&self, route: &str, replies: Vec<Reply>) {
        self.state
            .scripts
            .lock()
            .unwrap()
            .insert(route.to_owned(), replies.into());
    }

    pub fn calls(&self, route: &str) -> Vec<Recorded> {
        self.state
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|call| format!("{} {}", call.method, call.path) == route)
            .cloned()
            .collect()
    }

    pub fn all_calls(&self) -> Vec<Recorded> {
        self.state.calls.lock().unwrap().clone()
    }
}

async fn answer(
    state: Arc<FakeState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    let path = uri.path().to_owned();
    let route = format!("{method} {path}");
    state.calls.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path,
        headers: headers
            .iter()
            .filter_map(|(name, value)| {
                value
                    .to_str()
                    .ok()
                    .map(|v| (name.as_str().to_owned(), v.to_owned()))
            })
            .collect(),
        body,
    });
    let reply = {
        let mut scripts = state.scripts.lock().unwrap();
        match scripts.get_mut(&route) {
            Some(queue) if queue.len() > 1 => queue.pop_front(),
            Some(queue) => queue.front().cloned(),
            None => None,
        }
    };
    let Some(reply) = reply else {
        let body =
            format!(r#"{{"error":{{"code":"Unscripted","message":"no reply for {route}"}}}}"#);
        return (StatusCode::NOT_IMPLEMENTED, body).into_response();
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    for (name, value) in reply.headers {
        response.headers_mut().insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            axum::http::HeaderValue::from_str(&value).unwrap(),
        );
    }
    response
}

/// Settings that keep the tests fast: short timeout, tiny poll intervals and backoff.
pub fn fast_settings() -> HostSettings {
    HostSettings {
        request_timeout: Duration::from_millis(500),
        max_request_bytes: 4 * 1024,
        max_response_bytes: 64 * 1024,
        operation_deadline: Duration::from_secs(10),
        relo_poll_interval: Duration::from_millis(5),
        min_poll_interval: Duration::ZERO,
        max_poll_interval: Duration::from_millis(10),
        retry: RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            max_retry_after: Duration::from_millis(50),
        },
    }
}

pub const NAME: &str = "Acme";
pub const VERSION: &str = "1.2.0";
/// The path prefix the fake serves under, to prove base URLs keep their path.
pub const PREFIX: &str = "/ext";

pub fn route(method: &str, tail: &str) -> String {
    format!("{method} {PREFIX}/{VERSION}/{tail}")
}

pub fn host_with(transport: Arc<dyn ExtensionTransport>, settings: HostSettings) -> ExtensionHost {
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(NAME, "^1.0", transport));
    ExtensionHost::new(Arc::new(registry), settings, "http://cairn.test/")
}

pub fn v2_host(fake: &FakeExtension, settings: HostSettings, token: Option<&str>) -> ExtensionHost {
    let client = default_http_client().unwrap();
    let url = format!("{}{PREFIX}", fake.origin);
    let transport =
        HttpV2Transport::new(client, &url, token.map(|t| Redacted::new(t.to_owned()))).unwrap();
    host_with(Arc::new(transport), settings)
}

pub fn draft_host(fake: &FakeExtension, settings: HostSettings) -> ExtensionHost {
    let client = default_http_client().unwrap();
    let url = format!("{}{PREFIX}", fake.origin);
    let transport = RestDraftTransport::new(client, &url, None)
        .unwrap()
        .with_retry_after_bounds(0..=0);
    host_with(Arc::new(transport), settings)
}

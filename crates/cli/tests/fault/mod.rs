//! The chaos suite's extension (HTTP v2, in the test process, registered as `Matrix` 1.0.0 like the crash matrix's,
//! so the same templates and inventory reads serve both): while faults are on, every call may be late, refused with
//! 503 or with 429 + `Retry-After` before it acts, or hang past the host's timeout after it acted (a create made, a
//! delete done, the answer never sent). It keeps a ledger: what it holds, every create and delete it performed, the
//! faults it injected, and the **duplicate creates** — a create of identifiers while another create of the same
//! identifiers is still in flight (two runners of one step), or one that makes anew a resource it already made and
//! deleted since (a deleted resource brought back). A call whose client went away (a killed replica, a timed-out
//! request) is dropped by the server, and so no longer counts as in flight.
#![allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use all of it"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rand::Rng;
use serde_json::{Value, json};

/// How likely each fault is per call while faults are on, and how long a hang lasts.
#[derive(Clone, Copy, Debug)]
pub struct FaultRates {
    /// Added latency, uniform in `0..=max_latency` (every call).
    pub max_latency: Duration,
    /// 503 `ServiceUnavailable` before acting.
    pub unavailable: f64,
    /// 429 with `Retry-After: 1` before acting.
    pub throttled: f64,
    /// Act, then answer only after `hang` (past the host's per-request timeout).
    pub hang: f64,
    pub hang_for: Duration,
}

/// What the extension did and holds.
#[derive(Default, Debug)]
pub struct Ledger {
    /// Resource name → properties.
    pub held: BTreeMap<String, Value>,
    /// Names the extension ever made anew.
    pub ever_created: BTreeSet<String>,
    /// Every create performed: (name, whether it made the resource anew).
    pub creates: Vec<(String, bool)>,
    /// Every delete performed: (name, whether the resource existed).
    pub deletes: Vec<(String, bool)>,
    /// Creates in flight per name.
    pub creating: BTreeMap<String, usize>,
    /// Each duplicate create, described.
    pub duplicates: Vec<String>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, usize>,
}

/// The extension: its ledger and whether faults are on.
#[derive(Clone)]
pub struct FaultyExtension {
    pub ledger: Arc<Mutex<Ledger>>,
    faults_on: Arc<AtomicBool>,
    rates: FaultRates,
}

/// What one call does before answering.
enum Fault {
    None,
    Unavailable,
    Throttled,
    Hang,
}

impl FaultyExtension {
    /// Starts the extension on a loopback port, faults on.
    pub async fn start(rates: FaultRates) -> (FaultyExtension, SocketAddr) {
        let ext = FaultyExtension {
            ledger: Arc::default(),
            faults_on: Arc::new(AtomicBool::new(true)),
            rates,
        };
        let app = axum::Router::new()
            .route("/{version}/resource/createOrUpdate", post(create))
            .route("/{version}/resource/get", post(get))
            .route("/{version}/resource/preview", post(preview))
            .route("/{version}/resource/delete", post(delete))
            .with_state(ext.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (ext, addr)
    }

    /// From now on every call answers at once and correctly.
    pub fn stop_faults(&self) {
        self.faults_on.store(false, Ordering::SeqCst);
    }

    pub fn holdings(&self) -> BTreeSet<String> {
        self.ledger.lock().unwrap().held.keys().cloned().collect()
    }

    /// Sleeps the call's latency and picks its fault; `can_hang` for calls that act (create, delete).
    async fn fault(&self, can_hang: bool) -> Fault {
        if !self.faults_on.load(Ordering::SeqCst) {
            return Fault::None;
        }
        let (latency, roll) = {
            let mut rng = rand::rng();
            let max = self.rates.max_latency.as_millis() as u64;
            (
                Duration::from_millis(rng.random_range(0..=max)),
                rng.random::<f64>(),
            )
        };
        tokio::time::sleep(latency).await;
        let rates = self.rates;
        let (fault, kind) = if roll < rates.unavailable {
            (Fault::Unavailable, "503 before acting")
        } else if roll < rates.unavailable + rates.throttled {
            (Fault::Throttled, "429 + Retry-After before acting")
        } else if can_hang && roll < rates.unavailable + rates.throttled + rates.hang {
            (Fault::Hang, "hang past the timeout after acting")
        } else {
            return Fault::None;
        };
        *self.ledger.lock().unwrap().faults.entry(kind).or_default() += 1;
        fault
    }
}

/// Counts a create in flight until dropped (answered, or dropped with its connection).
struct Creating {
    ledger: Arc<Mutex<Ledger>>,
    name: String,
}

impl Drop for Creating {
    fn drop(&mut self) {
        let mut ledger = self.ledger.lock().unwrap();
        if let Some(count) = ledger.creating.get_mut(&self.name) {
            *count -= 1;
            if *count == 0 {
                ledger.creating.remove(&self.name);
            }
        }
    }
}

fn name_at(body: &Value, pointer: &str) -> String {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn resource(body: &Value, name: &str, properties: Value) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
            "properties": properties, "configId": "matrix" })
}

fn refusal(fault: &Fault) -> Option<Response> {
    match fault {
        Fault::Unavailable => Some(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "error": { "code": "ServiceUnavailable", "message": "injected" } })),
            )
                .into_response(),
        ),
        Fault::Throttled => {
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                Json(json!({ "error": { "code": "TooManyRequests", "message": "injected" } })),
            )
                .into_response();
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            Some(response)
        }
        Fault::None | Fault::Hang => None,
    }
}

async fn create(State(ext): State<FaultyExtension>, Json(body): Json<Value>) -> Response {
    let name = name_at(&body, "/properties/name");
    let _creating = {
        let mut ledger = ext.ledger.lock().unwrap();
        let count = ledger.creating.entry(name.clone()).or_default();
        *count += 1;
        if *count > 1 {
            ledger.duplicates.push(format!(
                "{name}: created while another create of it was in flight"
            ));
        }
        Creating {
            ledger: ext.ledger.clone(),
            name: name.clone(),
        }
    };
    let fault = ext.fault(true).await;
    if let Some(response) = refusal(&fault) {
        return response;
    }
    {
        let mut ledger = ext.ledger.lock().unwrap();
        let anew = !ledger.held.contains_key(&name);
        if anew && !ledger.ever_created.insert(name.clone()) {
            ledger
                .duplicates
                .push(format!("{name}: made anew after it had been deleted"));
        }
        ledger.held.insert(name.clone(), body["properties"].clone());
        ledger.creates.push((name.clone(), anew));
    }
    if matches!(fault, Fault::Hang) {
        tokio::time::sleep(ext.rates.hang_for).await;
    }
    Json(resource(&body, &name, body["properties"].clone())).into_response()
}

async fn preview(State(ext): State<FaultyExtension>, Json(body): Json<Value>) -> Response {
    let fault = ext.fault(false).await;
    if let Some(response) = refusal(&fault) {
        return response;
    }
    let name = name_at(&body, "/properties/name");
    Json(resource(&body, &name, body["properties"].clone())).into_response()
}

async fn get(State(ext): State<FaultyExtension>, Json(body): Json<Value>) -> Response {
    let fault = ext.fault(false).await;
    if let Some(response) = refusal(&fault) {
        return response;
    }
    let name = name_at(&body, "/identifiers/name");
    let found = ext.ledger.lock().unwrap().held.get(&name).cloned();
    match found {
        Some(properties) => Json(resource(&body, &name, properties)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
        )
            .into_response(),
    }
}

async fn delete(State(ext): State<FaultyExtension>, Json(body): Json<Value>) -> Response {
    let fault = ext.fault(true).await;
    if let Some(response) = refusal(&fault) {
        return response;
    }
    let name = name_at(&body, "/identifiers/name");
    {
        let mut ledger = ext.ledger.lock().unwrap();
        let existed = ledger.held.remove(&name).is_some();
        ledger.deletes.push((name, existed));
    }
    if matches!(fault, Fault::Hang) {
        tokio::time::sleep(ext.rates.hang_for).await;
    }
    StatusCode::NO_CONTENT.into_response()
}

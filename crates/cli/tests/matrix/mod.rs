//! The Matrix extension the process tests drive `cairn serve` with (HTTP v2, in the test process): its holdings a
//! map the test reads; a create of a chosen name creates the resource and then holds its answer, and a delete of a
//! chosen name waits before deleting, until the test releases them, so a test can kill or pause a server while a
//! call is in flight. "Down" closes its listener and "up" listens again on the same port. Plus the template of
//! Matrix resources and the checks of the inventory against the holdings that the crash matrix and the replica
//! tests share.
#![allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use all of it"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::watch;

/// How long any one wait may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(45);

/// What the extension holds and which call it is told to hold.
#[derive(Default)]
pub struct Holdings {
    /// Resource name → properties.
    pub resources: BTreeMap<String, Value>,
    /// A create of this name creates the resource, then waits for `release` before answering.
    pub hold_create: Option<String>,
    /// A delete of this name waits for `release` before deleting.
    pub hold_delete: Option<String>,
    /// Names of held calls that reached the extension.
    pub held: BTreeSet<String>,
}

#[derive(Clone)]
pub struct Extension {
    pub state: Arc<Mutex<Holdings>>,
    /// What held calls do next.
    pub release: watch::Sender<Release>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Release {
    Hold,
    /// Finish the call.
    Go,
    /// Drop the call unfinished (a held delete deletes nothing), as if the extension never got to it.
    Abandon,
}

impl Extension {
    pub fn holdings(&self) -> BTreeSet<String> {
        self.state
            .lock()
            .unwrap()
            .resources
            .keys()
            .cloned()
            .collect()
    }

    pub fn hold_create(&self, name: &str) {
        self.release.send_replace(Release::Hold);
        let mut state = self.state.lock().unwrap();
        state.hold_create = Some(name.to_owned());
        state.held.clear();
    }

    pub fn hold_delete(&self, name: &str) {
        self.release.send_replace(Release::Hold);
        let mut state = self.state.lock().unwrap();
        state.hold_delete = Some(name.to_owned());
        state.held.clear();
    }

    /// Lets held calls go (or drops them unfinished) and holds nothing from now on.
    pub fn release_all(&self, how: Release) {
        let mut state = self.state.lock().unwrap();
        state.hold_create = None;
        state.hold_delete = None;
        self.release.send_replace(how);
    }

    pub async fn wait_held(&self, name: &str) {
        let started = Instant::now();
        while !self.state.lock().unwrap().held.contains(name) {
            assert!(
                started.elapsed() < PATIENCE,
                "the call for {name} never reached the extension"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn released(&self) -> Release {
        let mut release = self.release.subscribe();
        release
            .wait_for(|how| *how != Release::Hold)
            .await
            .map(|how| *how)
            .unwrap_or(Release::Abandon)
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

async fn create(State(ext): State<Extension>, Json(body): Json<Value>) -> Json<Value> {
    let name = name_at(&body, "/properties/name");
    let held = {
        let mut state = ext.state.lock().unwrap();
        state
            .resources
            .insert(name.clone(), body["properties"].clone());
        let held = state.hold_create.as_deref() == Some(name.as_str());
        if held {
            state.held.insert(name.clone());
        }
        held
    };
    if held {
        ext.released().await;
    }
    Json(resource(&body, &name, body["properties"].clone()))
}

async fn preview(Json(body): Json<Value>) -> Json<Value> {
    let name = name_at(&body, "/properties/name");
    Json(resource(&body, &name, body["properties"].clone()))
}

async fn get(State(ext): State<Extension>, Json(body): Json<Value>) -> Response {
    let name = name_at(&body, "/identifiers/name");
    let found = ext.state.lock().unwrap().resources.get(&name).cloned();
    match found {
        Some(properties) => Json(resource(&body, &name, properties)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
        )
            .into_response(),
    }
}

async fn delete(State(ext): State<Extension>, Json(body): Json<Value>) -> StatusCode {
    let name = name_at(&body, "/identifiers/name");
    let held = {
        let mut state = ext.state.lock().unwrap();
        let held = state.hold_delete.as_deref() == Some(name.as_str());
        if held {
            state.held.insert(name.clone());
        }
        held
    };
    if held && ext.released().await == Release::Abandon {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    ext.state.lock().unwrap().resources.remove(&name);
    StatusCode::NO_CONTENT
}

/// The extension's listener: up (serving on `addr`) or down (nothing listens there).
pub struct Listener {
    pub ext: Extension,
    pub addr: SocketAddr,
    pub task: Option<tokio::task::JoinHandle<()>>,
}

impl Listener {
    pub async fn start() -> Self {
        let (release, _) = watch::channel(Release::Hold);
        let ext = Extension {
            state: Arc::default(),
            release,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut this = Listener {
            ext,
            addr,
            task: None,
        };
        this.serve(listener);
        this
    }

    pub fn serve(&mut self, listener: tokio::net::TcpListener) {
        let app = axum::Router::new()
            .route("/{version}/resource/createOrUpdate", post(create))
            .route("/{version}/resource/get", post(get))
            .route("/{version}/resource/preview", post(preview))
            .route("/{version}/resource/delete", post(delete))
            .with_state(self.ext.clone());
        self.task = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
    }

    pub fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    pub async fn up(&mut self) {
        let started = Instant::now();
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(e) => {
                    assert!(
                        started.elapsed() < PATIENCE,
                        "cannot listen again on {}: {e}",
                        self.addr
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        self.serve(listener);
    }
}

/// The inventory's Matrix resources (name → detached) of the store at `location`, read through a store of its own.
pub async fn inventory_at(location: cairn_assembly::StoreLocation) -> BTreeMap<String, bool> {
    let store = location.open().await.expect("open the store");
    let rows = store
        .list_managed_resources(cairn_store::ManagedResourceFilter::default())
        .await
        .expect("list the inventory")
        .items;
    let _ = store.close().await;
    rows.into_iter()
        .filter(|r| {
            r.resource
                .extension
                .as_ref()
                .and_then(|e| e.name.as_deref())
                == Some("Matrix")
        })
        .map(|r| {
            let name = r
                .resource
                .extension
                .as_ref()
                .and_then(|e| e.identifiers.as_ref())
                .and_then(|i| i["name"].as_str())
                .unwrap_or_default()
                .to_owned();
            (name, r.detached)
        })
        .collect()
}

/// Every resource the extension holds is inventoried (and managed), whatever else the inventory names.
pub fn tracked(inventory: &BTreeMap<String, bool>, holdings: &BTreeSet<String>) {
    for name in holdings {
        assert_eq!(
            inventory.get(name),
            Some(&false),
            "{name} exists untracked: {inventory:?} vs {holdings:?}"
        );
    }
}

/// The inventory names exactly what the extension holds.
pub fn exact(inventory: &BTreeMap<String, bool>, holdings: &BTreeSet<String>) {
    let names: BTreeSet<String> = inventory.keys().cloned().collect();
    assert_eq!(&names, holdings, "inventory {inventory:?}");
}

pub fn template(names: &[&str], chained: bool) -> Value {
    let mut resources = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        let mut r = json!({ "extension": "matrix", "type": "Thing", "apiVersion": "v1", "properties": { "name": name } });
        if chained && i > 0 {
            r["dependsOn"] = json!([names[i - 1]]);
        }
        resources.insert((*name).to_owned(), r);
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "matrix": { "name": "Matrix", "version": "1.0.0" } },
        "resources": resources
    })
}

pub fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

//! The crash matrix: `cairn serve` (the built binary) is killed with SIGKILL at chosen points of a deployment, a
//! stack update and a stack delete, and restarted on the same data directory with the extension up, or down and
//! then up again. After each restart the test asserts what a crash must never break: the operation reaches a
//! terminal state by itself, no deployment operation is left `Running`, and the inventory names what the extension
//! holds — every resource it holds (nothing untracked), and nothing else once the extension could answer.
//!
//! Kill points are chosen by durable state, never by sleeps: the test's extension (HTTP v2, in this process, its
//! holdings a map the test reads) creates a resource and then holds the answer, or holds a delete before doing it,
//! until told to go; the test kills the server once the extension reports the call. "Down" closes its listener
//! (connections are refused) and "up" listens again on the same port.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::{Server, start_server};
use serde_json::{Value, json};
use tokio::sync::watch;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const STACKS: &str = "api-version=2024-03-01";
const DEPLOYMENTS: &str = "api-version=2025-04-01";
/// How long any one wait may take before the test fails (the server's claims expire after 3 s).
const PATIENCE: Duration = Duration::from_secs(45);

/// What the extension holds and which call it is told to hold.
#[derive(Default)]
struct Holdings {
    /// Resource name → properties.
    resources: BTreeMap<String, Value>,
    /// A create of this name creates the resource, then waits for `release` before answering.
    hold_create: Option<String>,
    /// A delete of this name waits for `release` before deleting.
    hold_delete: Option<String>,
    /// Names of held calls that reached the extension.
    held: BTreeSet<String>,
}

#[derive(Clone)]
struct Extension {
    state: Arc<Mutex<Holdings>>,
    /// What held calls do next.
    release: watch::Sender<Release>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Release {
    Hold,
    /// Finish the call.
    Go,
    /// Drop the call unfinished (a held delete deletes nothing), as if the extension never got to it.
    Abandon,
}

impl Extension {
    fn holdings(&self) -> BTreeSet<String> {
        self.state
            .lock()
            .unwrap()
            .resources
            .keys()
            .cloned()
            .collect()
    }

    fn hold_create(&self, name: &str) {
        self.release.send_replace(Release::Hold);
        let mut state = self.state.lock().unwrap();
        state.hold_create = Some(name.to_owned());
        state.held.clear();
    }

    fn hold_delete(&self, name: &str) {
        self.release.send_replace(Release::Hold);
        let mut state = self.state.lock().unwrap();
        state.hold_delete = Some(name.to_owned());
        state.held.clear();
    }

    /// Lets held calls go (or drops them unfinished) and holds nothing from now on.
    fn release_all(&self, how: Release) {
        let mut state = self.state.lock().unwrap();
        state.hold_create = None;
        state.hold_delete = None;
        self.release.send_replace(how);
    }

    async fn wait_held(&self, name: &str) {
        let started = Instant::now();
        while !self.state.lock().unwrap().held.contains(name) {
            assert!(
                started.elapsed() < PATIENCE,
                "the call for {name} never reached the extension"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn released(&self) -> Release {
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
struct Listener {
    ext: Extension,
    addr: SocketAddr,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Listener {
    async fn start() -> Self {
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

    fn serve(&mut self, listener: tokio::net::TcpListener) {
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

    fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    async fn up(&mut self) {
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

/// One cairn data directory, its registry (the matrix extension as `Matrix` 1.0.0) and the server on it.
struct Cairn {
    _dir: tempfile::TempDir,
    data_dir: PathBuf,
    registry: PathBuf,
    server: Option<Server>,
    client: reqwest::Client,
}

impl Cairn {
    fn start(ext_addr: SocketAddr) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let registry = dir.path().join("extensions.json");
        std::fs::write(
            &registry,
            json!({ "extensions": [ { "name": "Matrix", "version": "1.0.0",
                                      "transport": { "kind": "http", "url": format!("http://{ext_addr}") } } ] })
            .to_string(),
        )
        .unwrap();
        let server = start_server(&data_dir, &registry);
        Cairn {
            _dir: dir,
            data_dir,
            registry,
            server: Some(server),
            client: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!(
            "{}{path}",
            self.server.as_ref().expect("a running server").url
        )
    }

    fn kill(&mut self) {
        let mut server = self.server.take().expect("a running server");
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
    }

    fn restart(&mut self) {
        self.server = Some(start_server(&self.data_dir, &self.registry));
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.client.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn resource_group(&self, name: &str) -> String {
        let scope = format!("{SUB}/resourceGroups/{name}");
        let (status, body) = self
            .send(
                reqwest::Method::PUT,
                &format!("{scope}?{DEPLOYMENTS}"),
                Some(json!({ "location": "local" })),
            )
            .await;
        assert!(
            status == 200 || status == 201,
            "resource group: {status} {body}"
        );
        scope
    }

    /// Polls `path` until its `provisioningState` is terminal (`None` once it is gone).
    async fn terminal(&self, path: &str) -> Option<Value> {
        let started = Instant::now();
        loop {
            let (status, body) = self.send(reqwest::Method::GET, path, None).await;
            if status == 404 {
                return None;
            }
            assert_eq!(status, 200, "GET {path}: {body}");
            let state = body["properties"]["provisioningState"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if matches!(state.as_str(), "succeeded" | "failed" | "canceled") {
                return Some(body);
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{path} is still {state} after a restart"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// No operation of the deployment (or of a deployment nested in it) is left `Running`.
    async fn no_operation_running(&self, deployment: &str) {
        let (status, body) = self
            .send(
                reqwest::Method::GET,
                &format!("{deployment}/operations?{DEPLOYMENTS}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        for op in body["value"].as_array().into_iter().flatten() {
            assert_ne!(op["properties"]["provisioningState"], "Running", "{op:#}");
        }
    }

    /// The inventory's Matrix resources: name → detached. Read through a second store on the same directory.
    async fn inventory(&self) -> BTreeMap<String, bool> {
        inventory_at(&self.data_dir).await
    }
}

async fn inventory_at(data_dir: &Path) -> BTreeMap<String, bool> {
    let store = cairn_assembly::StoreLocation::data_dir(data_dir)
        .open()
        .await
        .expect("open the store");
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
fn tracked(inventory: &BTreeMap<String, bool>, holdings: &BTreeSet<String>) {
    for name in holdings {
        assert_eq!(
            inventory.get(name),
            Some(&false),
            "{name} exists untracked: {inventory:?} vs {holdings:?}"
        );
    }
}

/// The inventory names exactly what the extension holds.
fn exact(inventory: &BTreeMap<String, bool>, holdings: &BTreeSet<String>) {
    let names: BTreeSet<String> = inventory.keys().cloned().collect();
    assert_eq!(&names, holdings, "inventory {inventory:?}");
}

fn template(names: &[&str], chained: bool) -> Value {
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

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// (a) A deployment killed with a create in flight: restarted with the extension down, the resumed run fails and
/// still tracks what the create made; with the extension up again, a deployment killed the same way is finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_killed_mid_create() {
    let mut listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixdeploy").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deployments/chain");
    let put = |names: &'static [&'static str]| json!({ "properties": { "mode": "Incremental", "template": template(names, true) } });

    // Killed while w1's create is in flight (the extension made w1); restarted with the extension down.
    ext.hold_create("w1");
    let (status, body) = cairn
        .send(
            reqwest::Method::PUT,
            &format!("{path}?{DEPLOYMENTS}"),
            Some(put(&["w0", "w1", "w2"])),
        )
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    ext.wait_held("w1").await;
    cairn.kill();
    listener.down();
    ext.release_all(Release::Go);
    cairn.restart();
    let record = cairn
        .terminal(&format!("{path}?{DEPLOYMENTS}"))
        .await
        .expect("the deployment");
    assert_eq!(
        record["properties"]["provisioningState"], "Failed",
        "{record:#}"
    );
    let listed: BTreeSet<String> = record["properties"]["outputResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["identifiers"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(listed, names(&["w0", "w1"]), "{record:#}");
    cairn.no_operation_running(&path).await;
    assert_eq!(ext.holdings(), names(&["w0", "w1"]));
    tracked(&cairn.inventory().await, &ext.holdings());

    // The extension is back; run it again and kill it with w2's create in flight: the restart finishes it.
    listener.up().await;
    ext.hold_create("w2");
    let (status, body) = cairn
        .send(
            reqwest::Method::PUT,
            &format!("{path}?{DEPLOYMENTS}"),
            Some(put(&["w0", "w1", "w2"])),
        )
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    ext.wait_held("w2").await;
    cairn.kill();
    ext.release_all(Release::Go);
    cairn.restart();
    let record = cairn
        .terminal(&format!("{path}?{DEPLOYMENTS}"))
        .await
        .expect("the deployment");
    assert_eq!(
        record["properties"]["provisioningState"], "Succeeded",
        "{record:#}"
    );
    cairn.no_operation_running(&path).await;
    assert_eq!(ext.holdings(), names(&["w0", "w1", "w2"]));
    exact(&cairn.inventory().await, &ext.holdings());
}

async fn put_stack(cairn: &Cairn, path: &str, names: &[&str]) {
    let (status, body) = cairn
        .send(
            reqwest::Method::PUT,
            &format!("{path}?{STACKS}"),
            Some(json!({ "properties": { "template": template(names, false),
                                         "actionOnUnmanage": { "resources": "delete" },
                                         "denySettings": { "mode": "none" } } })),
        )
        .await;
    assert!(status == 200 || status == 201, "stack PUT: {status} {body}");
}

/// (b) A stack update killed while deploying (a create in flight) and while unmanaging (a delete held), restarted
/// with the extension up, and down then up: the stack ends in a terminal state each time and the inventory follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_update_killed_mid_deploy_and_mid_unmanage() {
    let mut listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixupdate").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/upd");
    let deployment = format!("{scope}/providers/Microsoft.Resources/deployments/upd");
    put_stack(&cairn, &path, &["a", "b", "c"]).await;
    let stack = cairn
        .terminal(&format!("{path}?{STACKS}"))
        .await
        .expect("the stack");
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    exact(&cairn.inventory().await, &names(&["a", "b", "c"]));

    // Killed while the update deploys d (its create in flight); restarted with the extension up.
    ext.hold_create("d");
    put_stack(&cairn, &path, &["a", "d"]).await;
    ext.wait_held("d").await;
    cairn.kill();
    ext.release_all(Release::Go);
    cairn.restart();
    let stack = cairn
        .terminal(&format!("{path}?{STACKS}"))
        .await
        .expect("the stack");
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    cairn.no_operation_running(&deployment).await;
    assert_eq!(ext.holdings(), names(&["a", "d"]));
    exact(&cairn.inventory().await, &ext.holdings());

    // Killed while the next update's unmanage deletes d; restarted with the extension down, then up again.
    ext.hold_delete("d");
    put_stack(&cairn, &path, &["a"]).await;
    ext.wait_held("d").await;
    cairn.kill();
    listener.down();
    ext.release_all(Release::Abandon);
    cairn.restart();
    let stack = cairn
        .terminal(&format!("{path}?{STACKS}"))
        .await
        .expect("the stack");
    assert_eq!(
        stack["properties"]["provisioningState"], "failed",
        "{stack:#}"
    );
    cairn.no_operation_running(&deployment).await;
    tracked(&cairn.inventory().await, &ext.holdings());
    listener.up().await;
    put_stack(&cairn, &path, &["a"]).await;
    let stack = cairn
        .terminal(&format!("{path}?{STACKS}"))
        .await
        .expect("the stack");
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    assert_eq!(ext.holdings(), names(&["a"]));
    exact(&cairn.inventory().await, &ext.holdings());
}

/// (c) A stack delete (delete-all) killed mid-delete, restarted with the extension down (the delete fails, keeping
/// what it could not delete tracked), then killed again mid-delete and restarted with the extension up: the stack
/// is gone and so is every resource and inventory row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_delete_killed_mid_delete() {
    let mut listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixdelete").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/del");
    put_stack(&cairn, &path, &["a", "b"]).await;
    let stack = cairn
        .terminal(&format!("{path}?{STACKS}"))
        .await
        .expect("the stack");
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    let delete_all = format!("{path}?{STACKS}&unmanageAction.Resources=delete");

    ext.hold_delete("a");
    let (status, body) = cairn.send(reqwest::Method::DELETE, &delete_all, None).await;
    assert!(status == 200 || status == 202, "{status} {body}");
    ext.wait_held("a").await;
    cairn.kill();
    listener.down();
    // The extension never got to the delete the dead server asked for: a is still there.
    ext.release_all(Release::Abandon);
    cairn.restart();
    let stack = cairn
        .terminal(&format!("{path}?{STACKS}"))
        .await
        .expect("the stack stays");
    assert_eq!(
        stack["properties"]["provisioningState"], "failed",
        "{stack:#}"
    );
    tracked(&cairn.inventory().await, &ext.holdings());

    assert!(ext.holdings().contains("a"));

    // The extension is back; the next delete is killed while it deletes a (and the extension finishes it).
    listener.up().await;
    ext.hold_delete("a");
    let (status, body) = cairn.send(reqwest::Method::DELETE, &delete_all, None).await;
    assert!(status == 200 || status == 202, "{status} {body}");
    ext.wait_held("a").await;
    cairn.kill();
    ext.release_all(Release::Go);
    cairn.restart();
    assert!(
        cairn.terminal(&format!("{path}?{STACKS}")).await.is_none(),
        "the stack is deleted"
    );
    assert!(ext.holdings().is_empty(), "{:?}", ext.holdings());
    exact(&cairn.inventory().await, &BTreeSet::new());
}

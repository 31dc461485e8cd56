//! Test scaffolding: a scriptable in-process fake extension (latency, failures, concurrency tracking, config
//! capture), an engine over a temp-dir SQLite store with the built-in Local extension, and template builders.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_engine::{DeployOptions, Engine, EngineSettings, Providers};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_store::{Precondition, ResourceGroup, Store, Tags, Timestamp};
use cairn_store_sqlite::SqliteStore;
use serde_json::{Value, json};

pub const SUB: &str = "00000000-0000-0000-0000-000000000001";
pub const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1";
pub const SUB_SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000001";

/// The fake extension's config properties it never echoes (so they count as secret).
pub const SECRET_CONFIG: [&str; 2] = ["token", "kubeConfig"];

#[derive(Default)]
pub struct FakeState {
    /// (type, name) → properties.
    pub resources: Mutex<HashMap<(String, String), Value>>,
    /// Every createOrUpdate's resource name and flat config, in call order.
    pub configs: Mutex<Vec<(String, Value)>>,
    /// Names of resources in createOrUpdate call order (when the call started).
    pub started: Mutex<Vec<String>>,
    /// Names of resources in completion order.
    pub finished: Mutex<Vec<String>>,
    /// `start:{name}` and `end:{name}` in the order they happened.
    pub log: Mutex<Vec<String>>,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub creates: AtomicUsize,
    /// Previews in flight (and their most), `get`s, lookups of either kind, and calls of any kind.
    pub previews: InFlight,
    pub gets: InFlight,
    pub lookups: InFlight,
    pub calls: InFlight,
}

/// How many calls of a kind are in flight, and the most seen at once.
#[derive(Default)]
pub struct InFlight {
    now: AtomicUsize,
    pub most: AtomicUsize,
}

impl InFlight {
    fn enter(&self) -> Leave<'_> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        Leave(self)
    }

    pub fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

struct Leave<'a>(&'a InFlight);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A fake extension `Fake` 1.0.0: resources keyed by `properties.name`, a fixed latency per createOrUpdate, and
/// scripted failures for names in `fail`.
pub struct FakeExtension {
    pub state: Arc<FakeState>,
    pub latency: Mutex<Duration>,
    pub fail: Mutex<HashSet<String>>,
    /// Names whose createOrUpdate creates the resource and then never answers (the engine dies waiting).
    pub hang: Mutex<HashSet<String>>,
    /// While set, nothing reaches the extension: every call fails to connect.
    pub down: std::sync::atomic::AtomicBool,
    /// While set, preview answers `PreviewNotSupported`.
    pub no_preview: std::sync::atomic::AtomicBool,
    /// How long a preview takes (none by default).
    pub preview_latency: Mutex<Duration>,
    /// How long a `get` takes (none by default).
    pub get_latency: Mutex<Duration>,
}

impl FakeExtension {
    pub fn new(latency: Duration) -> Arc<Self> {
        Arc::new(FakeExtension {
            state: Arc::new(FakeState::default()),
            latency: Mutex::new(latency),
            fail: Mutex::new(HashSet::new()),
            hang: Mutex::new(HashSet::new()),
            down: Default::default(),
            no_preview: Default::default(),
            preview_latency: Mutex::new(Duration::ZERO),
            get_latency: Mutex::new(Duration::ZERO),
        })
    }

    pub fn fail_on(&self, name: &str) {
        self.fail.lock().unwrap().insert(name.to_string());
    }

    pub fn hang_on(&self, name: &str) {
        self.hang.lock().unwrap().insert(name.to_string());
    }

    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    pub fn resource(&self, ty: &str, name: &str) -> Option<Value> {
        self.state
            .resources
            .lock()
            .unwrap()
            .get(&(ty.to_string(), name.to_string()))
            .cloned()
    }

    pub fn count(&self) -> usize {
        self.state.resources.lock().unwrap().len()
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .state
            .resources
            .lock()
            .unwrap()
            .keys()
            .map(|(_, n)| n.clone())
            .collect();
        names.sort();
        names
    }

    fn echo(config: &Value) -> Value {
        match config {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| !SECRET_CONFIG.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            _ => Value::Null,
        }
    }

    fn config_id(config: &Value) -> String {
        config
            .get("cluster")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string()
    }

    fn error(status: u16, code: &str, message: &str) -> TransportResponse {
        TransportResponse::json(
            status,
            json!({"error": {"code": code, "message": message, "target": "/properties/name"}})
                .to_string()
                .into_bytes(),
        )
    }

    async fn handle(&self, request: TransportRequest) -> TransportResponse {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let ty = body
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let config = body.get("config").cloned().unwrap_or(Value::Null);
        let _call = self.state.calls.enter();
        match request.operation {
            Operation::CreateOrUpdate => {
                let properties = body.get("properties").cloned().unwrap_or(json!({}));
                let name = properties
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.state
                    .configs
                    .lock()
                    .unwrap()
                    .push((name.clone(), config.clone()));
                self.state.started.lock().unwrap().push(name.clone());
                self.state.log.lock().unwrap().push(format!("start:{name}"));
                let now = self.state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.state.max_in_flight.fetch_max(now, Ordering::SeqCst);
                let latency = *self.latency.lock().unwrap();
                tokio::time::sleep(latency).await;
                self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
                self.state.log.lock().unwrap().push(format!("end:{name}"));
                if self.fail.lock().unwrap().contains(&name) {
                    self.state.finished.lock().unwrap().push(name.clone());
                    return Self::error(
                        400,
                        "ScriptedFailure",
                        &format!("widget '{name}' is broken"),
                    );
                }
                let mut stored = properties.clone();
                stored["createdBy"] = json!("fake");
                self.state
                    .resources
                    .lock()
                    .unwrap()
                    .insert((ty.clone(), name.clone()), stored.clone());
                self.state.creates.fetch_add(1, Ordering::SeqCst);
                if self.hang.lock().unwrap().contains(&name) {
                    std::future::pending::<()>().await;
                }
                self.state.finished.lock().unwrap().push(name.clone());
                let response = json!({
                    "type": ty, "apiVersion": body.get("apiVersion"),
                    "identifiers": {"name": name}, "properties": stored,
                    "config": Self::echo(&config), "configId": Self::config_id(&config),
                    "status": "Succeeded"
                });
                TransportResponse::json(200, response.to_string().into_bytes())
            }
            Operation::Get => {
                let _get = self.state.gets.enter();
                let _lookup = self.state.lookups.enter();
                let latency = *self.get_latency.lock().unwrap();
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                let name = body
                    .pointer("/identifiers/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                match self.resource(&ty, &name) {
                    Some(props) => TransportResponse::json(
                        200,
                        json!({"type": ty, "apiVersion": body.get("apiVersion"), "identifiers": {"name": name},
                               "properties": props, "config": Self::echo(&config),
                               "configId": Self::config_id(&config), "status": "Succeeded"})
                        .to_string()
                        .into_bytes(),
                    ),
                    None => Self::error(404, "ResourceNotFound", "no such widget"),
                }
            }
            Operation::Preview if self.no_preview.load(Ordering::SeqCst) => {
                Self::error(422, "PreviewNotSupported", "this fake cannot preview")
            }
            Operation::Preview => {
                let _preview = self.state.previews.enter();
                let _lookup = self.state.lookups.enter();
                let latency = *self.preview_latency.lock().unwrap();
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                let properties = body.get("properties").cloned().unwrap_or(json!({}));
                let name = properties.get("name").cloned().unwrap_or(Value::Null);
                let shown = name.as_str().unwrap_or_default();
                self.state
                    .log
                    .lock()
                    .unwrap()
                    .push(format!("preview:{shown}"));
                let mut predicted = properties.clone();
                predicted["createdBy"] = json!("fake");
                TransportResponse::json(
                    200,
                    json!({"type": ty, "apiVersion": body.get("apiVersion"), "identifiers": {"name": name},
                           "properties": predicted, "config": Self::echo(&config),
                           "configId": Self::config_id(&config),
                           "metadata": {"readOnly": ["/properties/createdBy"]}})
                    .to_string()
                    .into_bytes(),
                )
            }
            Operation::Delete => {
                let name = body
                    .pointer("/identifiers/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.state.resources.lock().unwrap().remove(&(ty, name));
                TransportResponse::json(204, Vec::new())
            }
            Operation::GetLongRunningOperation => {
                Self::error(400, "NotSupported", "no long-running operations here")
            }
        }
    }
}

/// The transport handle registered with the host.
pub struct FakeTransport(pub Arc<FakeExtension>);

impl ExtensionTransport for FakeTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            if self.0.down.load(Ordering::SeqCst) {
                return Err(TransportError::Connect {
                    message: "the fake extension is down".into(),
                });
            }
            Ok(self.0.handle(request).await)
        })
    }
}

pub fn host_with(fake: &Arc<FakeExtension>) -> Arc<ExtensionHost> {
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        "Fake",
        "1.0.0",
        Arc::new(FakeTransport(fake.clone())),
    ));
    registry.register(RegisteredExtension::new(
        cairn_ext_local::NAME,
        cairn_ext_local::VERSION,
        Arc::new(cairn_ext_local::in_process_transport()),
    ));
    let settings = HostSettings {
        relo_poll_interval: Duration::from_millis(10),
        min_poll_interval: Duration::from_millis(10),
        retry: RetryPolicy::none(),
        ..HostSettings::default()
    };
    Arc::new(ExtensionHost::new(
        Arc::new(registry),
        settings,
        "http://localhost/cairn-test",
    ))
}

impl FakeExtension {
    /// The config the last createOrUpdate of `name` carried.
    pub fn config_of(&self, name: &str) -> Option<Value> {
        self.state
            .configs
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.clone())
    }
}

/// A test provider for `Test.Rp/clusters`: keeps PUT bodies in memory; `listCredentials` returns a kubeconfig.
#[derive(Default)]
pub struct ClusterProvider {
    pub resources: Mutex<HashMap<String, Value>>,
    pub actions: AtomicUsize,
}

pub const CLUSTER_TYPE: &str = "Test.Rp/clusters";
pub const API_KUBECONFIG: &str = "kubeconfig-from-the-api";

impl cairn_engine::ResourceProvider for ClusterProvider {
    fn put<'a>(
        &'a self,
        id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
        body: &'a Value,
    ) -> cairn_engine::provider::ProviderFuture<'a, cairn_engine::PutOutcome> {
        Box::pin(async move {
            let mut resource = json!({"id": id.to_string(), "name": id.name(), "type": CLUSTER_TYPE,
                                      "properties": body.get("properties").cloned().unwrap_or(json!({}))});
            resource["properties"]["provisioningState"] = json!("Succeeded");
            let created = self
                .resources
                .lock()
                .unwrap()
                .insert(id.to_string().to_lowercase(), resource.clone())
                .is_none();
            Ok(cairn_engine::PutOutcome { resource, created })
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
    ) -> cairn_engine::provider::ProviderFuture<'a, Option<Value>> {
        Box::pin(async move {
            Ok(self
                .resources
                .lock()
                .unwrap()
                .get(&id.to_string().to_lowercase())
                .cloned())
        })
    }

    fn delete<'a>(
        &'a self,
        id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
    ) -> cairn_engine::provider::ProviderFuture<'a, bool> {
        Box::pin(async move {
            Ok(self
                .resources
                .lock()
                .unwrap()
                .remove(&id.to_string().to_lowercase())
                .is_some())
        })
    }

    fn action<'a>(
        &'a self,
        id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
        action: &'a str,
        _body: Option<&'a Value>,
    ) -> cairn_engine::provider::ProviderFuture<'a, Value> {
        Box::pin(async move {
            self.actions.fetch_add(1, Ordering::SeqCst);
            if !action.eq_ignore_ascii_case("listCredentials") {
                return Err(cairn_engine::ProviderError::bad_request(
                    "UnknownAction",
                    "no such action",
                ));
            }
            if !self
                .resources
                .lock()
                .unwrap()
                .contains_key(&id.to_string().to_lowercase())
            {
                return Err(cairn_engine::ProviderError::not_found(id));
            }
            Ok(json!({"kubeconfigs": [{"name": "admin", "value": API_KUBECONFIG}]}))
        })
    }
}

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    pub engine: Engine,
    pub fake: Arc<FakeExtension>,
}

pub fn settings() -> EngineSettings {
    EngineSettings {
        parallelism: 8,
        claim_ttl: Duration::from_secs(30),
        heartbeat_interval: Duration::from_secs(5),
        ..EngineSettings::default()
    }
}

pub async fn open_store(dir: &Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(dir).await.expect("open the store"))
}

pub async fn create_group(store: &Arc<dyn Store>, name: &str) {
    store
        .put_resource_group(
            ResourceGroup {
                subscription_id: SUB.into(),
                name: name.into(),
                location: "westus".into(),
                tags: Tags::new(),
                managed_by: None,
                provisioning_state: "Succeeded".into(),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .expect("create the resource group");
}

pub async fn setup_with(
    settings: EngineSettings,
    latency: Duration,
    providers: Providers,
) -> TestEnv {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_store(dir.path()).await;
    create_group(&store, "rg1").await;
    let fake = FakeExtension::new(latency);
    let engine = Engine::new(store.clone(), host_with(&fake), providers, settings).expect("engine");
    TestEnv {
        dir,
        store,
        engine,
        fake,
    }
}

pub async fn setup() -> TestEnv {
    setup_with(settings(), Duration::from_millis(5), Providers::empty()).await
}

/// A v2 (`extensions`) template with the fake extension as `fake` (config defaults `cluster`) and `resources`.
pub fn fake_template(resources: Value, outputs: Value) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": {
            "fake": { "name": "Fake", "version": "1.0.0", "config": { "cluster": { "defaultValue": "c1" } } }
        },
        "resources": resources,
        "outputs": outputs
    })
}

/// A widget resource of the fake extension.
pub fn widget(name: &str, extra: Value) -> Value {
    let mut properties = json!({ "name": name });
    if let (Value::Object(p), Value::Object(e)) = (&mut properties, extra) {
        p.extend(e);
    }
    json!({ "extension": "fake", "type": "widget", "apiVersion": "v1", "properties": properties })
}

pub fn request(template: Value, parameters: Value) -> cairn_arm::models::deployment::Deployment {
    serde_json::from_value(json!({
        "properties": { "mode": "Incremental", "template": template, "parameters": parameters }
    }))
    .expect("a deployment request")
}

/// Deploys and waits; returns the final record as JSON.
pub async fn deploy(
    engine: &Engine,
    scope: &str,
    name: &str,
    req: cairn_arm::models::deployment::Deployment,
) -> Value {
    let mut handle = engine
        .create_or_update(scope, name, req, DeployOptions::default())
        .await
        .expect("accepted");
    let done = tokio::time::timeout(Duration::from_secs(60), handle.wait())
        .await
        .expect("the deployment finishes in time")
        .expect("record");
    serde_json::to_value(done).unwrap()
}

pub fn state(record: &Value) -> &str {
    record["properties"]["provisioningState"]
        .as_str()
        .unwrap_or_default()
}

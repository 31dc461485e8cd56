//! End-to-end stack operations over a temp-dir SQLite store, the engine, and a test extension whose credential
//! lives in the local Key Vault (with the built-in Local extension registered beside it).

mod common;
use common::*;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::query::Query;
use cairn_engine::{DeployOptions, Engine, EngineSettings, Providers};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::{JsonText, Precondition, Store, Timestamp};
use serde_json::{Value, json};

const SECRET: &str = "widget-token";

/// A widget extension that insists on the current credential for every call and can be taken down.
#[derive(Default)]
struct Widgets {
    resources: Mutex<HashMap<String, Value>>,
    /// The token the extension accepts now (rotated by tests).
    accepted_token: Mutex<String>,
    /// Tokens presented on deletes, in order.
    delete_tokens: Mutex<Vec<String>>,
    /// The widget named by every delete that reached the extension, in order (refused ones too).
    delete_attempts: Mutex<Vec<String>>,
    down: AtomicBool,
    latency_ms: AtomicUsize,
}

impl Widgets {
    fn error(status: u16, code: &str, message: &str) -> TransportResponse {
        TransportResponse::json(
            status,
            json!({"error": {"code": code, "message": message}})
                .to_string()
                .into_bytes(),
        )
    }

    fn has(&self, name: &str) -> bool {
        self.resources.lock().unwrap().contains_key(name)
    }

    async fn handle(&self, request: TransportRequest) -> TransportResponse {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let config = body.get("config").cloned().unwrap_or(Value::Null);
        let token = config["token"].as_str().unwrap_or_default().to_owned();
        let cluster = config["cluster"].as_str().unwrap_or("default").to_owned();
        let ty = body["type"].as_str().unwrap_or_default().to_owned();
        let latency = self.latency_ms.load(Ordering::SeqCst) as u64;
        tokio::time::sleep(Duration::from_millis(latency)).await;
        if self.down.load(Ordering::SeqCst) {
            return Self::error(503, "ServiceUnavailable", "the widget service is down");
        }
        if request.operation == Operation::Delete {
            self.delete_tokens.lock().unwrap().push(token.clone());
        }
        if *self.accepted_token.lock().unwrap() != token {
            return Self::error(401, "Unauthorized", "the credential was refused");
        }
        match request.operation {
            Operation::CreateOrUpdate => {
                let properties = body.get("properties").cloned().unwrap_or(json!({}));
                let name = properties["name"].as_str().unwrap_or_default().to_owned();
                self.resources
                    .lock()
                    .unwrap()
                    .insert(name.clone(), properties.clone());
                let echoed = json!({"cluster": cluster});
                TransportResponse::json(
                    200,
                    json!({"type": ty, "apiVersion": body.get("apiVersion"), "identifiers": {"name": name},
                           "properties": properties, "config": echoed, "configId": cluster,
                           "status": "Succeeded"})
                    .to_string()
                    .into_bytes(),
                )
            }
            Operation::Get => {
                let name = body
                    .pointer("/identifiers/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match self.resources.lock().unwrap().get(&name) {
                    Some(properties) => TransportResponse::json(
                        200,
                        json!({"type": ty, "apiVersion": body.get("apiVersion"), "identifiers": {"name": name},
                               "properties": properties, "config": {"cluster": cluster}, "configId": cluster,
                               "status": "Succeeded"})
                        .to_string()
                        .into_bytes(),
                    ),
                    None => Self::error(404, "ResourceNotFound", "no such widget"),
                }
            }
            Operation::Delete => {
                let name = body
                    .pointer("/identifiers/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.delete_attempts.lock().unwrap().push(name.clone());
                // A widget `within` another is its content: the container cannot go first, as a PostgreSQL role
                // that still holds grants cannot be dropped. `deleteDelayMs` slows a widget's own delete.
                let delay = self
                    .resources
                    .lock()
                    .unwrap()
                    .get(&name)
                    .and_then(|p| p["deleteDelayMs"].as_u64())
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                let contents: Vec<String> = self
                    .resources
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(_, p)| p["within"] == name.as_str())
                    .map(|(n, _)| n.clone())
                    .collect();
                if !contents.is_empty() {
                    return Self::error(
                        409,
                        "DependentObjectsStillExist",
                        &format!("'{name}' still holds {contents:?}"),
                    );
                }
                self.resources.lock().unwrap().remove(&name);
                TransportResponse::json(204, Vec::new())
            }
            _ => Self::error(400, "NotSupported", "not here"),
        }
    }
}

struct WidgetTransport(Arc<Widgets>);

impl ExtensionTransport for WidgetTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move { Ok(self.0.handle(request).await) })
    }
}

/// Serves an extension under a version it may not know (the registered one, `serve_as`), logging every delete as
/// `{name}@{registered version}`: which version of an extension a stack deletes through.
struct Versioned {
    inner: Arc<dyn ExtensionTransport>,
    registered: String,
    serve_as: &'static str,
    deletes: Arc<Mutex<Vec<String>>>,
}

impl ExtensionTransport for Versioned {
    fn send(
        &self,
        mut request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        if request.operation == Operation::Delete {
            self.deletes.lock().unwrap().push(self.registered.clone());
        }
        request.extension_version = self.serve_as.to_owned();
        self.inner.send(request)
    }
}

struct Env {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    engine: Engine,
    host: Arc<ExtensionHost>,
    service: StackService,
    widgets: Arc<Widgets>,
    /// Every delete that reached an extension, as `{name}@{version}`.
    extension_deletes: Arc<Mutex<Vec<String>>>,
}

async fn set_token(store: &Arc<dyn Store>, value: &str) {
    set_secret(store, SECRET, value).await;
}

async fn setup(settings: StackServiceSettings) -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = common::store_with_group_and_vault(dir.path()).await;
    set_token(&store, "token-1").await;
    let widgets = Arc::new(Widgets::default());
    *widgets.accepted_token.lock().unwrap() = "token-1".into();
    let extension_deletes = Arc::new(Mutex::new(Vec::new()));
    let widget_transport: Arc<dyn ExtensionTransport> = Arc::new(WidgetTransport(widgets.clone()));
    let local_transport: Arc<dyn ExtensionTransport> =
        Arc::new(cairn_ext_local::in_process_transport());
    let mut registry = Registry::new();
    // Widgets and Local at their own version and at 1.1.0 (served by the same code): an upgrade target.
    for (name, inner, serve_as) in [
        ("Widgets", &widget_transport, "1.0.0"),
        (
            cairn_ext_local::NAME,
            &local_transport,
            cairn_ext_local::VERSION,
        ),
    ] {
        for version in [serve_as, "1.1.0"] {
            registry.register(RegisteredExtension::new(
                name,
                version,
                Arc::new(Versioned {
                    inner: inner.clone(),
                    registered: format!("{name}@{version}"),
                    serve_as,
                    deletes: extension_deletes.clone(),
                }),
            ));
        }
    }
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            relo_poll_interval: Duration::from_millis(10),
            min_poll_interval: Duration::from_millis(10),
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
        "http://localhost/cairn-test",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings {
            parallelism: 4,
            ..EngineSettings::default()
        },
    )
    .expect("engine");
    let service = StackService::new(
        engine.clone(),
        store.clone(),
        host.clone(),
        Providers::empty(),
        settings,
    );
    Env {
        _dir: dir,
        store,
        engine,
        host,
        service,
        widgets,
        extension_deletes,
    }
}

fn fast() -> StackServiceSettings {
    StackServiceSettings {
        lease_ttl: Duration::from_secs(10),
        heartbeat_interval: Duration::from_millis(200),
        max_delete_rounds: 2,
        retry_backoff: Duration::from_millis(10),
        ..StackServiceSettings::default()
    }
}

/// A stack over widgets `names` (and, when `scratch`, an ARM Key Vault the stack manages).
fn stack(names: &[&str], scratch: bool, resources_action: &str, cluster: &str) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    for name in names {
        resources.insert(
            (*name).to_owned(),
            json!({"extension": "widgets", "type": "widget", "apiVersion": "v1", "properties": {"name": name}}),
        );
    }
    if scratch {
        resources.insert(
            "scratch".into(),
            json!({"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "scratch",
                   "location": "westus", "properties": {}}),
        );
    }
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "extensions": {"widgets": {"name": "Widgets", "version": "1.0.0",
                                           "config": {"cluster": {"type": "string", "defaultValue": "c1"},
                                                      "token": {"type": "secureString"}}}},
                "resources": resources,
                "outputs": {"count": {"type": "int", "value": names.len()}}
            },
            "extensionConfigs": {"widgets": {
                "cluster": {"value": cluster},
                "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": SECRET}}
            }},
            "actionOnUnmanage": {"resources": resources_action},
            "denySettings": {"mode": "none"}
        }
    }))
    .expect("a stack body")
}

fn names_of(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            r["identifiers"]["name"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| {
                    r["id"]
                        .as_str()
                        .map(|id| id.rsplit('/').next().unwrap_or("").to_owned())
                })
                .unwrap_or_default()
        })
        .collect();
    names.sort();
    names
}

fn delete_options(query: &str) -> StackDeleteOptions {
    StackDeleteOptions::from_query(&Query::parse(query)).expect("options")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_lifecycle_unmanages_and_deletes_with_fresh_credentials() {
    let env = setup(fast()).await;
    let service = &env.service;
    let scratch_id = format!("{RG}/providers/Microsoft.KeyVault/vaults/scratch");

    // Create: three widgets and a vault.
    let accepted = service
        .create_or_update(
            RG,
            "app",
            stack(&["a", "b", "c"], true, "detach", "c1"),
            None,
        )
        .await
        .expect("accepted");
    assert!(accepted.created);
    assert_eq!(
        serde_json::to_value(&accepted.stack).unwrap()["properties"]["provisioningState"],
        "deploying"
    );
    let created = settle(service, "app").await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert_eq!(
        names_of(&created["properties"]["resources"]),
        ["a", "b", "c", "scratch"]
    );
    assert_eq!(created["properties"]["outputs"]["count"]["value"], 3);
    assert!(created["properties"]["deploymentId"].is_string());
    let widget = created["properties"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["identifiers"]["name"] == "a")
        .unwrap()
        .clone();
    assert_eq!(widget["denyStatus"], "notSupported");
    assert_eq!(widget["status"], "managed");
    let extensions = created["properties"]["deploymentExtensions"].to_string();
    assert!(extensions.contains("keyVaultReference"), "{extensions}");
    assert!(
        !created.to_string().contains("token-1"),
        "no secret in the stack"
    );
    assert!(env.store.get_vault(&scratch_id).await.unwrap().is_some());

    // Update without c and the vault, deleting what leaves.
    service
        .create_or_update(RG, "app", stack(&["a", "b"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    let updated = settle(service, "app").await;
    assert_eq!(
        updated["properties"]["provisioningState"], "succeeded",
        "{updated:#}"
    );
    assert_eq!(
        names_of(&updated["properties"]["deletedResources"]),
        ["c", "scratch"]
    );
    assert_eq!(names_of(&updated["properties"]["resources"]), ["a", "b"]);
    assert!(!env.widgets.has("c"), "c was deleted through the extension");
    assert!(
        env.store.get_vault(&scratch_id).await.unwrap().is_none(),
        "the vault was deleted through its provider"
    );

    // Update without b, detaching it.
    service
        .create_or_update(RG, "app", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect("accepted");
    let detached = settle(service, "app").await;
    assert_eq!(
        detached["properties"]["provisioningState"], "succeeded",
        "{detached:#}"
    );
    assert_eq!(
        names_of(&detached["properties"]["detachedResources"]),
        ["b"]
    );
    assert_eq!(names_of(&detached["properties"]["resources"]), ["a"]);
    assert!(env.widgets.has("b"), "a detached widget stays");

    // Rotate the credential: the extension accepts only the new one from now on.
    set_token(&env.store, "token-2").await;
    *env.widgets.accepted_token.lock().unwrap() = "token-2".into();

    // The extension is down: the delete fails, the stack keeps the widget as deleteFailed.
    env.widgets.down.store(true, Ordering::SeqCst);
    assert!(
        service
            .delete(
                RG,
                "app",
                delete_options("unmanageAction.Resources=delete"),
                None
            )
            .await
            .expect("accepted")
    );
    let failed = settle(service, "app").await;
    assert_eq!(
        failed["properties"]["provisioningState"], "failed",
        "{failed:#}"
    );
    assert_eq!(names_of(&failed["properties"]["failedResources"]), ["a"]);
    assert_eq!(
        failed["properties"]["resources"][0]["status"],
        "deleteFailed"
    );
    assert_eq!(
        failed["properties"]["error"]["code"],
        "DeploymentStackDeleteResourcesFailed"
    );
    assert!(env.widgets.has("a"));

    // Back up: the next delete succeeds, with the rotated secret read at delete time.
    env.widgets.down.store(false, Ordering::SeqCst);
    service
        .delete(
            RG,
            "app",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(
        settle(service, "app").await,
        Value::Null,
        "the stack is gone"
    );
    assert!(!env.widgets.has("a"));
    assert_eq!(
        env.widgets
            .delete_tokens
            .lock()
            .unwrap()
            .last()
            .map(String::as_str),
        Some("token-2")
    );
    assert!(
        !service
            .delete(RG, "app", delete_options(""), None)
            .await
            .unwrap(),
        "204 when gone"
    );
}

/// A stack over 10 widgets (`Widgets@{version}`, `apiVersion` `{api}`) and 10 Local files under `root`
/// (`Local@{version}`, `apiVersion` `{version}`).
fn widgets_and_files(root: &str, version: &str, api: &str) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    for n in 0..10 {
        resources.insert(
            format!("w{n}"),
            json!({"extension": "widgets", "type": "widget", "apiVersion": api,
                   "properties": {"name": format!("w{n}")}}),
        );
        resources.insert(
            format!("f{n}"),
            json!({"extension": "local", "type": "File", "apiVersion": version,
                   "properties": {"path": format!("f{n}.txt"), "content": "hello"}}),
        );
    }
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "extensions": {
                    "widgets": {"name": "Widgets", "version": version,
                                "config": {"cluster": {"type": "string"}, "token": {"type": "secureString"}}},
                    "local": {"name": "Local", "version": version,
                              "config": {"rootDirectory": {"type": "string"}}}
                },
                "resources": resources
            },
            "extensionConfigs": {
                "widgets": {"cluster": {"value": "c1"},
                            "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": SECRET}}},
                "local": {"rootDirectory": {"value": root}}
            },
            "actionOnUnmanage": {"resources": "delete", "resourceGroups": "delete", "managementGroups": "delete"},
            "denySettings": {"mode": "none"}
        }
    }))
    .expect("a stack body")
}

/// Seed 003: an extension resource's identity does not change across extension versions. Moving a stack of 20
/// widgets and Local files from 1.0.0 / `v1` to 1.1.0 / `v2` with deleteAll deletes nothing; the stack records each
/// resource once, with the new version and `apiVersion`, and deleting the stack deletes each once through 1.1.0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_upgrade_with_delete_all_deletes_nothing() {
    let env = setup(fast()).await;
    let service = &env.service;
    let root = tempfile::tempdir().expect("root");
    let root_text = root.path().to_str().expect("utf-8 path");
    let resources_of = |stack: &Value| -> Vec<(String, String, String)> {
        let mut found: Vec<(String, String, String)> = stack["properties"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    format!(
                        "{}@{}",
                        r["extension"]["name"].as_str().unwrap_or(""),
                        r["extension"]["version"].as_str().unwrap_or("")
                    ),
                    r["apiVersion"].as_str().unwrap_or("").to_owned(),
                    r["status"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        found.sort();
        found
    };
    let expected = |version: &str, api: &str| {
        let mut expected: Vec<(String, String, String)> = (0..10)
            .flat_map(|_| {
                [
                    (
                        format!("Local@{version}"),
                        version.to_owned(),
                        "managed".to_owned(),
                    ),
                    (
                        format!("Widgets@{version}"),
                        api.to_owned(),
                        "managed".to_owned(),
                    ),
                ]
            })
            .collect();
        expected.sort();
        expected
    };

    service
        .create_or_update(
            RG,
            "upgrade",
            widgets_and_files(root_text, "1.0.0", "v1"),
            None,
        )
        .await
        .expect("accepted");
    let created = settle(service, "upgrade").await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert_eq!(resources_of(&created), expected("1.0.0", "v1"));

    service
        .create_or_update(
            RG,
            "upgrade",
            widgets_and_files(root_text, "1.1.0", "v2"),
            None,
        )
        .await
        .expect("accepted");
    let upgraded = settle(service, "upgrade").await;
    assert_eq!(
        upgraded["properties"]["provisioningState"], "succeeded",
        "{upgraded:#}"
    );
    assert_eq!(
        env.extension_deletes.lock().unwrap().as_slice(),
        &[] as &[String],
        "no delete reached an extension"
    );
    assert_eq!(resources_of(&upgraded), expected("1.1.0", "v2"));
    assert!(names_of(&upgraded["properties"]["deletedResources"]).is_empty());
    assert!(names_of(&upgraded["properties"]["detachedResources"]).is_empty());
    let extensions = upgraded["properties"]["deploymentExtensions"].to_string();
    assert!(!extensions.contains("1.0.0"), "{extensions}");
    for n in 0..10 {
        assert!(env.widgets.has(&format!("w{n}")));
        assert!(root.path().join(format!("f{n}.txt")).is_file());
    }

    service
        .delete(
            RG,
            "upgrade",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(
        settle(service, "upgrade").await,
        Value::Null,
        "the stack is gone"
    );
    let mut deletes = env.extension_deletes.lock().unwrap().clone();
    deletes.sort();
    let mut once_each: Vec<String> = (0..10)
        .flat_map(|_| ["Local@1.1.0".to_owned(), "Widgets@1.1.0".to_owned()])
        .collect();
    once_each.sort();
    assert_eq!(deletes, once_each);
    for n in 0..10 {
        assert!(!env.widgets.has(&format!("w{n}")));
        assert!(!root.path().join(format!("f{n}.txt")).exists());
    }
}

/// Issue 10 item 4: a stack deletes extension resources in the reverse of the order the template deployed them
/// (`dependsOn` between extension resources, recorded through `dependencies[]`), so a container is not tried before
/// its contents are gone and no retry round is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_resources_are_deleted_after_what_was_deployed_after_them() {
    let env = setup(fast()).await;
    set_token(&env.store, "t1").await;
    *env.widgets.accepted_token.lock().unwrap() = "t1".into();
    let mut body = serde_json::to_value(stack(&["shelf", "book"], false, "delete", "c1")).unwrap();
    let resources = &mut body["properties"]["template"]["resources"];
    resources["book"]["dependsOn"] = json!(["shelf"]);
    resources["book"]["properties"]["within"] = json!("shelf");
    resources["book"]["properties"]["deleteDelayMs"] = json!(150);
    let body: DeploymentStack = serde_json::from_value(body).unwrap();
    env.service
        .create_or_update(RG, "ordered", body, None)
        .await
        .expect("accepted");
    let created = settle(&env.service, "ordered").await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );

    env.service
        .delete(
            RG,
            "ordered",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(
        settle(&env.service, "ordered").await,
        Value::Null,
        "the stack is gone"
    );
    assert_eq!(
        *env.widgets.delete_attempts.lock().unwrap(),
        ["book", "shelf"],
        "the content first, the container once it is empty: no refused delete, no retry round"
    );
    assert!(env.widgets.resources.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_operation_while_one_runs_is_409() {
    let env = setup(fast()).await;
    env.widgets.latency_ms.store(400, Ordering::SeqCst);
    env.service
        .create_or_update(RG, "busy", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect("accepted");
    let again = env
        .service
        .create_or_update(RG, "busy", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect_err("409");
    assert_eq!(
        (again.status(), again.code()),
        (409, "DeploymentStackInNonTerminalState")
    );
    let delete = env
        .service
        .delete(RG, "BUSY", delete_options(""), None)
        .await
        .expect_err("409");
    assert_eq!(delete.code(), "DeploymentStackInNonTerminalState");
    assert_eq!(
        settle(&env.service, "busy").await["properties"]["provisioningState"],
        "succeeded"
    );
    let listed = env
        .service
        .list(RG, Default::default())
        .await
        .expect("list");
    assert_eq!(listed.value.len(), 1);
}

/// The end signal of an operation in this process comes once its outcome is written and its lease released:
/// right after it, a read shows the outcome and another operation is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operations_end_is_signalled_once_its_outcome_is_readable() {
    let env = setup(fast()).await;
    env.widgets.latency_ms.store(200, Ordering::SeqCst);
    let accepted = env
        .service
        .create_or_update(
            RG,
            "signal",
            stack(&["a", "b"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    let mut ended = accepted.ended.clone();
    let handed_over = ended.wait().await.expect("the stack as the update ended");
    let created = serde_json::to_value(env.service.get(RG, "signal").await.expect("get")).unwrap();
    assert_eq!(created["properties"]["provisioningState"], "succeeded");
    assert_eq!(names_of(&created["properties"]["resources"]), ["a", "b"]);
    assert_eq!(
        serde_json::to_value(&handed_over).unwrap(),
        created,
        "the stack handed over is the record"
    );
    // Waiting again returns at once: the signal stays set.
    assert!(ended.wait().await.is_some());

    let run = env
        .service
        .delete_and_report(
            RG,
            "signal",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted")
        .expect("the stack exists");
    assert!(
        run.ended().wait().await.is_none(),
        "a delete's outcome comes from finished()"
    );
    let gone = env.service.get(RG, "signal").await.expect_err("deleted");
    assert_eq!(gone.status(), 404);
    assert!(!env.widgets.has("a") && !env.widgets.has("b"));
    let last = run.finished().await.expect("the outcome");
    assert_eq!(
        names_of(&serde_json::to_value(&last).unwrap()["properties"]["deletedResources"]),
        ["a", "b"]
    );
    // The lease is free: a new stack of the same name is accepted at once.
    env.service
        .create_or_update(RG, "signal", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted after the end");
    settle(&env.service, "signal").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_operation_frees_the_stack_after_the_ttl() {
    let env = setup(fast()).await;
    let lease =
        "stack:/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/rg1/crashy";
    let now = Timestamp::now();
    env.store
        .acquire_lease(
            lease,
            "crashed-process",
            now,
            now.saturating_add(Duration::from_millis(300)),
        )
        .await
        .expect("lease");
    let refused = env
        .service
        .create_or_update(RG, "crashy", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect_err("held");
    assert_eq!(refused.status(), 409);
    tokio::time::sleep(Duration::from_millis(400)).await;
    env.service
        .create_or_update(RG, "crashy", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect("free after the TTL");
    assert_eq!(
        settle(&env.service, "crashy").await["properties"]["provisioningState"],
        "succeeded"
    );
}

/// A process that wrote its operation's terminal record and died before releasing the lease (seen under the chaos
/// suite: a replica SIGKILLed right after a stack update finished): the next operation takes the lease over at once
/// instead of answering 409 "non-terminal state 'succeeded'" until it expires. A lease held by any other operation
/// still refuses: one naming another correlation id, or one naming the record's but taken after the record was
/// written (a later operation reusing the id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_operations_lease_is_taken_over_at_once() {
    let env = setup(fast()).await;
    let before = Timestamp::now();
    env.service
        .create_or_update(
            RG,
            "finished",
            stack(&["a"], false, "delete", "c1"),
            Some("op-done".into()),
        )
        .await
        .expect("accepted");
    let done = settle(&env.service, "finished").await;
    assert_eq!(done["properties"]["provisioningState"], "succeeded");
    assert_eq!(done["properties"]["correlationId"], "op-done");
    let lease =
        "stack:/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/rg1/finished";
    let hex = |text: &str| -> String { text.bytes().map(|b| format!("{b:02x}")).collect() };
    let hold = |owner: String, acquired: Timestamp| {
        let store = env.store.clone();
        async move {
            store
                .acquire_lease(
                    lease,
                    &owner,
                    acquired,
                    Timestamp::now().saturating_add(Duration::from_secs(60)),
                )
                .await
                .expect("lease");
            owner
        }
    };
    let update = || {
        env.service.create_or_update(
            RG,
            "finished",
            stack(&["a", "b"], false, "delete", "c1"),
            None,
        )
    };

    // Held by another operation (one that never wrote this record): refused.
    let other = hold(format!("dead-replica:1:op={}", hex("op-other")), before).await;
    assert_eq!(update().await.expect_err("held").status(), 409);
    env.store
        .release_lease(lease, &other)
        .await
        .expect("release");
    // Named like the record's operation, but taken after the record was written: refused.
    let later = hold(format!("replica:2:op={}", hex("op-done")), Timestamp::now()).await;
    assert_eq!(update().await.expect_err("held").status(), 409);
    env.store
        .release_lease(lease, &later)
        .await
        .expect("release");

    // Held by the operation the terminal record names, taken before it wrote the record: taken over.
    hold(format!("dead-replica:3:op={}", hex("op-done")), before).await;
    update()
        .await
        .expect("the finished operation's lease is taken over");
    assert_eq!(
        settle(&env.service, "finished").await["properties"]["provisioningState"],
        "succeeded"
    );
    // A DELETE asks the same: held by an operation that did not write the record, refused.
    hold(format!("dead-replica:4:op={}", hex("op-delete")), before).await;
    let refused = env
        .service
        .delete(
            RG,
            "finished",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect_err("held by an operation that did not write the record");
    assert_eq!(refused.status(), 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_config_id_is_refused_and_nothing_is_unmanaged() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(RG, "moving", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    assert_eq!(
        settle(&env.service, "moving").await["properties"]["provisioningState"],
        "succeeded"
    );
    env.service
        .create_or_update(RG, "moving", stack(&["a"], false, "delete", "c2"), None)
        .await
        .expect("accepted");
    let moved = settle(&env.service, "moving").await;
    assert_failed_with(&moved, "DeploymentStackExtensionConfigIdChanged");
    assert!(
        moved["properties"]["deletedResources"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
    assert!(env.widgets.has("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_whose_record_cannot_be_read_blocks_takeovers_instead_of_losing_its_claims() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(RG, "first", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    assert_eq!(
        settle(&env.service, "first").await["properties"]["provisioningState"],
        "succeeded"
    );
    spoil_record(&env, "first").await;
    // Another stack declaring the same resource: whether "first" manages it cannot be known, so it is refused.
    env.service
        .create_or_update(RG, "second", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    let second = settle(&env.service, "second").await;
    assert_failed_with(&second, "StoreDataCorrupt");
    assert!(
        second["properties"]["resources"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{second:#}"
    );
    assert!(env.widgets.has("a"));
}

/// The stack ended `failed`, with `code` in its error.
fn assert_failed_with(stack: &Value, code: &str) {
    assert_eq!(
        stack["properties"]["provisioningState"], "failed",
        "{stack:#}"
    );
    assert!(
        stack["properties"]["error"].to_string().contains(code),
        "{stack:#}"
    );
}

/// Makes the stored record of stack `name` unreadable (a corrupt or newer-format managed set).
async fn spoil_record(env: &Env, name: &str) {
    let record = env.store.get_stack(RG, name).await.unwrap().unwrap();
    env.store
        .put_stack(
            cairn_store::NewStack {
                scope: record.scope.clone(),
                name: record.name.clone(),
                stack: record.stack.clone(),
                managed_set: JsonText::from_stored("{\"managedSet\": ".into()),
            },
            Precondition::Version(record.version),
            Timestamp::now(),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_unreadable_once_the_deployment_ran_fails_the_update_and_keeps_what_it_wrote() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(RG, "first", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    settle(&env.service, "first").await;
    env.widgets.latency_ms.store(150, Ordering::SeqCst);
    env.service
        .create_or_update(RG, "second", stack(&["b"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    // The deployment exists once the check before it passed; "first" becomes unreadable while it runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while env.engine.get(RG, "second").await.is_err() {
        assert!(std::time::Instant::now() < deadline, "no deployment");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    spoil_record(&env, "first").await;
    // Failed, not left `deploying` for recovery to retry for as long as "first" stays unreadable; nothing is
    // unmanaged, and what the deployment wrote is managed.
    let second = settle(&env.service, "second").await;
    assert_failed_with(&second, "StoreDataCorrupt");
    assert_eq!(
        second["properties"]["resources"].as_array().map(Vec::len),
        Some(1),
        "{second:#}"
    );
    assert!(env.widgets.has("a") && env.widgets.has("b"));

    // A delete of "second" cannot tell what "first" manages either: it fails with nothing deleted.
    env.service
        .delete(
            RG,
            "second",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    let second = settle(&env.service, "second").await;
    assert_failed_with(&second, "StoreDataCorrupt");
    assert!(env.widgets.has("b"), "nothing deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_refused_before_anything_runs() {
    let env = setup(fast()).await;
    let mut body = stack(&["a"], false, "delete", "c1");
    body.properties.extension_configs = serde_json::from_value(
        json!({"widgets": {"token": {"type": "SecureString", "value": "literal-secret"}}}),
    )
    .ok();
    let error = env
        .service
        .create_or_update(RG, "bad", body, None)
        .await
        .expect_err("secure literal");
    assert_eq!(
        (error.status(), error.code()),
        (400, "InvalidStackExtensionConfig")
    );
    assert!(!format!("{error:?}").contains("literal-secret"));
    let unknown = env
        .service
        .create_or_update(RG, "bad", stack(&["a"], false, "obliterate", "c1"), None)
        .await
        .expect_err("unknown action");
    assert_eq!(unknown.code(), "InvalidActionOnUnmanage");
    assert_eq!(
        env.service
            .get(RG, "bad")
            .await
            .expect_err("absent")
            .status(),
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_and_export_template() {
    let env = setup(fast()).await;
    let validated = env
        .service
        .validate(RG, "v", stack(&["a", "b"], false, "detach", "c1"))
        .await
        .expect("valid");
    let validated = serde_json::to_value(validated).unwrap();
    assert_eq!(
        validated["properties"]["validatedResources"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{validated:#}"
    );
    assert!(!env.widgets.has("a"), "validate deploys nothing");
    env.service
        .create_or_update(RG, "v", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect("accepted");
    settle(&env.service, "v").await;
    let exported = env.service.export_template(RG, "v").await.expect("export");
    assert!(
        exported.template.expect("template")["resources"]
            .get("a")
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_stack_is_out_of_sync_until_bypassed() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(RG, "torn", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect("accepted");
    settle(&env.service, "torn").await;
    // A process died mid-operation, written before records named their operation: the record says `deploying`,
    // nothing says what ran, and nobody holds the lease any more.
    leave_interrupted(&env, "torn", "deploying", Value::Null, None).await;
    let refused = env
        .service
        .create_or_update(RG, "torn", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect_err("out of sync");
    assert_eq!(
        (refused.status(), refused.code()),
        (409, "DeploymentStackOutOfSync")
    );
    let refused = env
        .service
        .delete(RG, "torn", delete_options(""), None)
        .await
        .expect_err("out of sync");
    assert_eq!(refused.code(), "DeploymentStackOutOfSync");
    let mut body = stack(&["a"], false, "detach", "c1");
    body.properties.bypass_stack_out_of_sync_error = Some(true);
    env.service
        .create_or_update(RG, "torn", body, None)
        .await
        .expect("bypassed");
    assert_eq!(
        settle(&env.service, "torn").await["properties"]["provisioningState"],
        "succeeded"
    );
}

/// A stack template whose nested deployment configures the Kubernetes extension's `auth.kubeConfig` from `source`.
fn kube_config_stack(source: Value) -> DeploymentStack {
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "parameters": {"secureParam": {"type": "securestring"}},
                "resources": {"cluster": {
                    "type": "Microsoft.Resources/deployments",
                    "apiVersion": "2025-04-01",
                    "name": "cluster",
                    "properties": {
                        "expressionEvaluationOptions": {"scope": "inner"},
                        "mode": "Incremental",
                        "extensionConfigs": {"k8s": {
                            "auth": {"kubeConfig": source},
                            "namespace": {"value": "default"}
                        }},
                        "template": {
                            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                            "languageVersion": "2.2-experimental",
                            "contentVersion": "1.0.0.0",
                            "extensions": {"k8s": {"name": "Kubernetes", "version": "1.0.0", "config": {
                                "namespace": {"type": "string", "defaultValue": "default"},
                                "kubeConfig": {"type": "secureString"}
                            }}},
                            "resources": {}
                        }
                    }
                }}
            },
            "parameters": {"secureParam": {"value": "kube-secret-material"}},
            "actionOnUnmanage": {"resources": "detach"},
            "denySettings": {"mode": "none"}
        }
    }))
    .expect("a stack body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secure_parameter_in_an_extension_config_is_refused_and_a_key_vault_reference_accepted() {
    let env = setup(fast()).await;
    let from_parameter = kube_config_stack(json!({"value": "[parameters('secureParam')]"}));
    for error in [
        env.service
            .create_or_update(RG, "kube", from_parameter.clone(), None)
            .await
            .expect_err("a secure parameter cannot be stored"),
        env.service
            .validate(RG, "kube", from_parameter)
            .await
            .expect_err("validate refuses it too"),
    ] {
        assert_eq!(
            (error.status(), error.code()),
            (400, "InvalidTemplateDeployment")
        );
        let response = serde_json::to_value(error.to_response()).unwrap();
        let details = response["error"]["details"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(details.len(), 1, "{response:#}");
        assert_eq!(details[0]["code"], "stacks-extensibility-compat");
        assert_eq!(
            details[0]["target"],
            "properties.template.resources.cluster.properties.extensionConfigs.k8s.auth.kubeConfig"
        );
        assert!(
            details[0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("secureParam")
        );
        assert!(!response.to_string().contains("kube-secret-material"));
    }
    assert_eq!(
        env.service
            .get(RG, "kube")
            .await
            .expect_err("never stored")
            .status(),
        404
    );

    let from_key_vault = kube_config_stack(
        json!({"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": SECRET}}),
    );
    env.service
        .create_or_update(RG, "kube", from_key_vault, None)
        .await
        .expect("a Key Vault reference is a directive the stack can store");
    settle(&env.service, "kube").await;
}

/// Rewrites a stack record as a process that died mid-operation leaves it: a non-terminal state and the
/// operation it was running; `lease_for` keeps the dead process's lease alive that long.
async fn leave_interrupted(
    env: &Env,
    name: &str,
    state: &str,
    pending: Value,
    lease_for: Option<Duration>,
) {
    let record = env.store.get_stack(RG, name).await.unwrap().unwrap();
    let (mut stack, mut managed_set): (Value, Value) = (
        record.stack.parse().unwrap(),
        record.managed_set.parse().unwrap(),
    );
    stack["properties"]["provisioningState"] = json!(state);
    managed_set["pending"] = pending;
    env.store
        .put_stack(
            cairn_store::NewStack {
                scope: record.scope.clone(),
                name: record.name.clone(),
                stack: JsonText::from(&stack),
                managed_set: JsonText::from(&managed_set),
            },
            Precondition::Version(record.version),
            Timestamp::now(),
        )
        .await
        .unwrap();
    if let Some(ttl) = lease_for {
        let now = Timestamp::now();
        env.store
            .acquire_lease(
                &format!("stack:/subscriptions/{SUB}/resourcegroups/rg1/{name}"),
                "crashed-process",
                now,
                now.saturating_add(ttl),
            )
            .await
            .expect("lease");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_delete_is_finished_by_recovery() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(
            RG,
            "torn",
            stack(&["a", "b", "c"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(
        settle(&env.service, "torn").await["properties"]["provisioningState"],
        "succeeded"
    );
    // The dead process had deleted `a` already, then died holding its lease.
    env.widgets.resources.lock().unwrap().remove("a");
    leave_interrupted(
        &env,
        "torn",
        "deleting",
        json!({"kind": "delete", "correlationId": "crashed", "actionOnUnmanage": {"resources": "delete"}}),
        Some(Duration::from_millis(400)),
    )
    .await;
    let held = env
        .service
        .delete(
            RG,
            "torn",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect_err("the dead process still holds the lease");
    assert_eq!(held.code(), "DeploymentStackInNonTerminalState");
    let early = env.service.recover().await.expect("sweep");
    assert!(
        early.is_empty(),
        "nothing is taken over while the lease lives: {early:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = env.service.recover().await.expect("sweep");
    assert_eq!(report.resumed_deletes.len(), 1, "{report:?}");
    assert!(report.resumed_deletes[0].ends_with("/deploymentStacks/torn"));
    assert_eq!(
        settle(&env.service, "torn").await,
        Value::Null,
        "the delete completed"
    );
    assert!(!env.widgets.has("b") && !env.widgets.has("c"));
    assert!(env.service.recover().await.expect("sweep").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_an_interrupted_stack_resumes_its_operation() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(RG, "torn", stack(&["a", "b"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    settle(&env.service, "torn").await;
    leave_interrupted(
        &env,
        "torn",
        "deleting",
        json!({"kind": "delete", "correlationId": "crashed", "actionOnUnmanage": {"resources": "delete"}}),
        None,
    )
    .await;
    let refused = env
        .service
        .create_or_update(RG, "torn", stack(&["a"], false, "detach", "c1"), None)
        .await
        .expect_err("an interrupted operation comes first");
    assert_eq!(
        (refused.status(), refused.code()),
        (409, "DeploymentStackInNonTerminalState")
    );
    assert!(refused.detail().message().contains("being resumed"));
    assert_eq!(
        settle(&env.service, "torn").await,
        Value::Null,
        "the interrupted delete finished"
    );
    assert!(!env.widgets.has("a") && !env.widgets.has("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_update_is_finished_from_its_deployment() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(
            RG,
            "torn",
            stack(&["a", "b", "c"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    settle(&env.service, "torn").await;
    // The dead process had run the update's deployment (only `a` left) but not the unmanage step.
    let update = serde_json::to_value(stack(&["a"], false, "delete", "c1")).unwrap();
    let deployment = serde_json::from_value(json!({"properties": {
        "mode": "Incremental",
        "template": update["properties"]["template"],
        "extensionConfigs": update["properties"]["extensionConfigs"],
    }}))
    .unwrap();
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "torn",
            deployment,
            DeployOptions {
                stack_initiated: true,
                correlation_id: Some("crashed-update".into()),
                ..DeployOptions::default()
            },
        )
        .await
        .expect("deployment");
    handle.wait().await.expect("deployed");
    leave_interrupted(
        &env,
        "torn",
        "deploying",
        json!({"kind": "put", "correlationId": "crashed-update"}),
        None,
    )
    .await;
    let report = env.service.recover().await.expect("sweep");
    assert_eq!(report.resumed_updates.len(), 1, "{report:?}");
    let done = settle(&env.service, "torn").await;
    assert_eq!(
        done["properties"]["provisioningState"], "succeeded",
        "{done:#}"
    );
    assert_eq!(names_of(&done["properties"]["resources"]), ["a"]);
    assert_eq!(
        names_of(&done["properties"]["deletedResources"]),
        ["b", "c"]
    );
    assert!(env.widgets.has("a") && !env.widgets.has("b") && !env.widgets.has("c"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_interrupted_before_deploying_fails_with_the_set_unchanged() {
    let env = setup(fast()).await;
    env.service
        .create_or_update(RG, "torn", stack(&["a", "b"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    settle(&env.service, "torn").await;
    // The stack's deployment is the earlier one (another correlation id): the update never started.
    leave_interrupted(
        &env,
        "torn",
        "deploying",
        json!({"kind": "put", "correlationId": "never-deployed"}),
        None,
    )
    .await;
    let report = env.service.recover().await.expect("sweep");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let failed = settle(&env.service, "torn").await;
    assert_eq!(failed["properties"]["provisioningState"], "failed");
    assert_eq!(
        failed["properties"]["error"]["code"],
        "DeploymentStackOperationInterrupted"
    );
    assert_eq!(names_of(&failed["properties"]["resources"]), ["a", "b"]);
    // Nothing is out of sync: the next update runs without the bypass.
    env.service
        .create_or_update(RG, "torn", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted without bypass");
    let updated = settle(&env.service, "torn").await;
    assert_eq!(updated["properties"]["provisioningState"], "succeeded");
    assert_eq!(names_of(&updated["properties"]["deletedResources"]), ["b"]);
}

/// When the deletes of an update are over, the record is written once with the outcome: progress not yet
/// published is not written first on its own (a big stack's record is large).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_writes_its_record_when_accepted_and_when_finished() {
    let env = setup(StackServiceSettings {
        progress_interval: Duration::from_secs(30),
        ..fast()
    })
    .await;
    let version = async || {
        env.store
            .get_stack(RG, "writes")
            .await
            .expect("read")
            .expect("the record")
            .version
    };
    env.service
        .create_or_update(
            RG,
            "writes",
            stack(&["a", "b"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    settle(&env.service, "writes").await;
    let before = version().await;
    env.service
        .create_or_update(RG, "writes", stack(&["a"], false, "delete", "c1"), None)
        .await
        .expect("accepted");
    let updated = settle(&env.service, "writes").await;
    assert_eq!(names_of(&updated["properties"]["deletedResources"]), ["b"]);
    assert!(!env.widgets.has("b"));
    assert_eq!(version().await, before + 2, "accepted, then finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_delete_publishes_its_progress() {
    let env = setup(StackServiceSettings {
        max_deletes_in_flight: 1,
        progress_interval: Duration::from_millis(10),
        ..fast()
    })
    .await;
    env.service
        .create_or_update(
            RG,
            "slow",
            stack(&["a", "b", "c", "d"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    settle(&env.service, "slow").await;
    env.widgets.latency_ms.store(150, Ordering::SeqCst);
    env.service
        .delete(
            RG,
            "slow",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    let mut seen_partial = None;
    for _ in 0..200 {
        let Ok(stack) = env.service.get(RG, "slow").await else {
            break;
        };
        let value = serde_json::to_value(&stack).unwrap();
        let deleted = names_of(&value["properties"]["deletedResources"]);
        if value["properties"]["provisioningState"] == "deleting" && !deleted.is_empty() {
            seen_partial = Some((deleted, names_of(&value["properties"]["resources"])));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (deleted, remaining) = seen_partial.expect("progress was published while the delete ran");
    assert_eq!(
        deleted.len() + remaining.len(),
        4,
        "{deleted:?} + {remaining:?}"
    );
    assert!(!remaining.is_empty());
    assert_eq!(settle(&env.service, "slow").await, Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_whose_stack_was_taken_over_does_not_overwrite_it() {
    let env = setup(StackServiceSettings {
        max_deletes_in_flight: 1,
        ..fast()
    })
    .await;
    env.service
        .create_or_update(
            RG,
            "fenced",
            stack(&["a", "b"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    settle(&env.service, "fenced").await;
    env.widgets.latency_ms.store(200, Ordering::SeqCst);
    env.service
        .delete(
            RG,
            "fenced",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    // Another process takes the stack over mid-delete (as if this one's lease had run out) and records its own
    // outcome.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let record = env.store.get_stack(RG, "fenced").await.unwrap().unwrap();
    let mut theirs: Value = record.stack.parse().unwrap();
    let set: Value = record.managed_set.parse().unwrap();
    theirs["properties"]["provisioningState"] = json!("failed");
    theirs["properties"]["description"] = json!("taken over");
    env.store
        .put_stack(
            cairn_store::NewStack {
                scope: record.scope.clone(),
                name: record.name.clone(),
                stack: JsonText::from(&theirs),
                managed_set: JsonText::from(&json!({"managedSet": set["managedSet"].clone()})),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .unwrap();
    // The first operation finishes its deletes, but neither its progress nor its end overwrites the new record.
    for _ in 0..100 {
        if !env.widgets.has("a") && !env.widgets.has("b") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let kept = env.service.get(RG, "fenced").await.expect("still there");
    let kept = serde_json::to_value(kept).unwrap();
    assert_eq!(kept["properties"]["description"], "taken over", "{kept:#}");
    assert_eq!(kept["properties"]["provisioningState"], "failed");
}

/// The inventory's widget rows as `name` (managed) or `name (detached)`, sorted.
async fn inventory_of(store: &Arc<dyn Store>) -> Vec<String> {
    let mut rows: Vec<String> = store
        .list_managed_resources(cairn_store::ManagedResourceFilter::default())
        .await
        .expect("list the inventory")
        .items
        .into_iter()
        .filter(|r| r.resource.resource_type == "widget")
        .map(|r| {
            let name = r
                .resource
                .extension
                .as_ref()
                .and_then(|e| e.identifiers.as_ref())
                .and_then(|i| i["name"].as_str())
                .unwrap_or_default()
                .to_owned();
            if r.detached {
                format!("{name} (detached)")
            } else {
                name
            }
        })
        .collect();
    rows.sort();
    rows
}

fn held(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = env
        .widgets
        .resources
        .lock()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

/// After every stack operation the inventory names exactly what the extension holds: a create inventories, an
/// update's unmanage delete and a stack delete with delete-all remove the rows of what they deleted, and detaching
/// (an update's detach, a stack delete with detach-all) keeps the rows, marked detached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inventory_matches_what_the_extension_holds_after_every_stack_operation() {
    let env = setup(fast()).await;
    let service = &env.service;
    let run = |name: &'static str, body: DeploymentStack| async move {
        service
            .create_or_update(RG, name, body, None)
            .await
            .expect("accepted");
        let stack = settle(service, name).await;
        assert_eq!(
            stack["properties"]["provisioningState"], "succeeded",
            "{stack:#}"
        );
    };
    let delete = |name: &'static str, query: &'static str| async move {
        service
            .delete(RG, name, delete_options(query), None)
            .await
            .expect("accepted");
        assert_eq!(
            settle(service, name).await,
            Value::Null,
            "the stack is deleted"
        );
    };

    run("inv", stack(&["a", "b", "c"], false, "delete", "c1")).await;
    assert_eq!(held(&env), ["a", "b", "c"]);
    assert_eq!(inventory_of(&env.store).await, ["a", "b", "c"], "create");

    run("inv", stack(&["a", "b"], false, "delete", "c1")).await;
    assert_eq!(held(&env), ["a", "b"]);
    assert_eq!(
        inventory_of(&env.store).await,
        ["a", "b"],
        "update, unmanage delete"
    );

    run("inv", stack(&["a"], false, "detach", "c1")).await;
    assert_eq!(held(&env), ["a", "b"]);
    assert_eq!(
        inventory_of(&env.store).await,
        ["a", "b (detached)"],
        "update, detach"
    );

    delete("inv", "unmanageAction.Resources=delete").await;
    assert_eq!(held(&env), ["b"]);
    assert_eq!(
        inventory_of(&env.store).await,
        ["b (detached)"],
        "stack delete, delete-all"
    );

    run("kept", stack(&["b", "d"], false, "delete", "c1")).await;
    assert_eq!(
        inventory_of(&env.store).await,
        ["b", "d"],
        "deployed again: managed"
    );
    delete("kept", "unmanageAction.Resources=detach").await;
    assert_eq!(held(&env), ["b", "d"]);
    assert_eq!(
        inventory_of(&env.store).await,
        ["b (detached)", "d (detached)"],
        "stack delete, detach-all"
    );
}

/// A service that hands over (a server shutting down) stops its running delete where it is and releases the
/// stack's lease at once: another service (a replica, or the restarted server) takes the delete over on its first
/// recovery sweep, long before the lease would have expired, and finishes it; its metrics count the takeover and
/// the operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_delete_is_finished_by_another_service_without_waiting_for_the_lease() {
    let long_lease = StackServiceSettings {
        lease_ttl: Duration::from_secs(600),
        ..fast()
    };
    let env = setup(long_lease.clone()).await;
    env.service
        .create_or_update(
            RG,
            "moving",
            stack(&["a", "b", "c"], false, "delete", "c1"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(
        settle(&env.service, "moving").await["properties"]["provisioningState"],
        "succeeded"
    );
    env.widgets.latency_ms.store(400, Ordering::SeqCst);
    let run = env
        .service
        .delete_and_report(
            RG,
            "moving",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted")
        .expect("the stack exists");
    let mut ended = run.ended();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = std::time::Instant::now();
    env.service.hand_over().await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "hand over waits for nothing"
    );
    assert!(
        ended.wait().await.is_none(),
        "a handed-over delete reports no outcome"
    );
    assert!(run.finished().await.is_none());
    let left = env
        .store
        .get_stack(RG, "moving")
        .await
        .unwrap()
        .expect("kept");
    let left: Value = left.stack.parse().unwrap();
    assert_eq!(left["properties"]["provisioningState"], "deleting");
    assert!(
        env.widgets.has("c") || env.widgets.has("b"),
        "stopped before every delete ran"
    );

    let metrics = cairn_metrics::Metrics::new();
    let successor = StackService::new(
        env.engine.clone(),
        env.store.clone(),
        env.host.clone(),
        Providers::empty(),
        StackServiceSettings {
            metrics: metrics.clone(),
            ..long_lease
        },
    );
    env.widgets.latency_ms.store(0, Ordering::SeqCst);
    let report = successor.recover().await.expect("sweep");
    assert_eq!(report.resumed_deletes.len(), 1, "{report:?}");
    assert_eq!(settle(&successor, "moving").await, Value::Null, "deleted");
    assert!(!env.widgets.has("a") && !env.widgets.has("b") && !env.widgets.has("c"));
    let text = metrics.render();
    assert!(
        text.contains("cairn_takeovers_total{kind=\"stack\",outcome=\"resumed_delete\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("cairn_stack_operation_duration_seconds_count{operation=\"delete\""),
        "{text}"
    );
}

/// `stack(...)` with `protect` and `retain` patterns.
fn with_policy(mut body: DeploymentStack, protect: &[&str], retain: &[&str]) -> DeploymentStack {
    let owned = |patterns: &[&str]| -> Option<Vec<String>> {
        (!patterns.is_empty()).then(|| patterns.iter().map(|p| (*p).to_owned()).collect())
    };
    body.properties.protect = owned(protect);
    body.properties.retain = owned(retain);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_resources_are_never_deleted_and_retained_ones_are_detached() {
    let env = setup(fast()).await;
    let service = &env.service;
    let scratch_id = format!("{RG}/providers/Microsoft.KeyVault/vaults/scratch");
    // Identifiers in any key order and any case of extension and type name the same resource.
    let protect = [r#"Widgets/widget {"name": "c"}"#, "*/vaults/SCRATCH"];
    let retain = [r#"widgets/WIDGET *"d"*"#];
    service
        .create_or_update(
            RG,
            "app",
            with_policy(
                stack(&["a", "b", "c", "d"], true, "delete", "c1"),
                &protect,
                &retain,
            ),
            None,
        )
        .await
        .expect("accepted");
    let created = settle(service, "app").await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert_eq!(created["properties"]["protect"], json!(protect));
    assert_eq!(created["properties"]["retain"], json!(retain));

    // Dropping c and the vault with deleteAll is refused, naming both: nothing is deleted or detached.
    service
        .create_or_update(
            RG,
            "app",
            with_policy(stack(&["a"], false, "delete", "c1"), &protect, &retain),
            None,
        )
        .await
        .expect("accepted");
    let refused = settle(service, "app").await;
    assert_failed_with(&refused, "DeploymentStackResourceProtected");
    let error = refused["properties"]["error"].to_string();
    assert!(
        error.contains("widget") && error.contains("scratch"),
        "{error}"
    );
    assert!(!error.contains(r#"\"b\""#), "b is not protected: {error}");
    assert_eq!(
        names_of(&refused["properties"]["resources"]),
        ["a", "b", "c", "d", "scratch"]
    );
    assert!(env.widgets.delete_attempts.lock().unwrap().is_empty());
    assert!(env.store.get_vault(&scratch_id).await.unwrap().is_some());

    // With the bypass (asked for this operation only), b, c and the vault go; d is retained: detached.
    let mut bypassing = with_policy(stack(&["a"], false, "delete", "c1"), &protect, &retain);
    bypassing.properties.bypass_protection = Some(true);
    service
        .create_or_update(RG, "app", bypassing, None)
        .await
        .expect("accepted");
    let updated = settle(service, "app").await;
    assert_eq!(
        updated["properties"]["provisioningState"], "succeeded",
        "{updated:#}"
    );
    assert_eq!(
        names_of(&updated["properties"]["deletedResources"]),
        ["b", "c", "scratch"]
    );
    assert_eq!(names_of(&updated["properties"]["detachedResources"]), ["d"]);
    assert!(env.widgets.has("d") && !env.widgets.has("c"));
    assert!(
        updated["properties"].get("bypassProtection").is_none(),
        "never stored"
    );
    // The inventory says d is detached, as for any detach.
    assert_eq!(inventory_of(&env.store).await, ["a", "d (detached)"]);

    // A stack delete that would delete a protected resource is refused before anything runs (409).
    service
        .create_or_update(
            RG,
            "app",
            with_policy(stack(&["a"], false, "delete", "c1"), &["widgets/*"], &[]),
            None,
        )
        .await
        .expect("accepted");
    settle(service, "app").await;
    let error = service
        .delete(
            RG,
            "app",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect_err("protected");
    assert_eq!(
        (error.status(), error.code()),
        (409, "DeploymentStackResourceProtected")
    );
    let kept = settle(service, "app").await;
    assert_eq!(
        kept["properties"]["provisioningState"], "succeeded",
        "{kept:#}"
    );
    assert!(env.widgets.has("a"));
    // Bulk delete honours the stack's patterns too (it has no bypass: the stack must let go first).
    let entry: cairn_stack_service::BulkDeleteEntry = serde_json::from_value(json!({
        "extension": {"name": "Widgets", "version": "1.0.0",
                      "config": {"cluster": {"value": "c1"}, "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": SECRET}}}},
        "type": "widget", "apiVersion": "v1", "identifiers": {"name": "a"}
    }))
    .expect("entry");
    let results = service
        .bulk_delete(vec![entry], None)
        .await
        .expect("bulk delete");
    assert_eq!(
        results[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("DeploymentStackResourceProtected"),
        "{results:?}"
    );
    assert!(env.widgets.has("a"));
    // Detaching deletes nothing, so protection does not stand in its way; here the bypass deletes it.
    service
        .delete(
            RG,
            "app",
            delete_options("unmanageAction.Resources=delete&bypassProtection=true"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(settle(service, "app").await, Value::Null);
    assert!(!env.widgets.has("a"));
    // Every delete that reached the extension: b and c with the bypass, a with the last delete; d never.
    let mut attempts = env.widgets.delete_attempts.lock().unwrap().clone();
    attempts.sort();
    assert_eq!(attempts, ["a", "b", "c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blank_protect_patterns_are_refused_before_anything_runs() {
    let env = setup(fast()).await;
    let error = env
        .service
        .create_or_update(
            RG,
            "app",
            with_policy(stack(&["a"], false, "delete", "c1"), &["ok", " "], &[]),
            None,
        )
        .await
        .expect_err("refused");
    assert_eq!(
        (error.status(), error.code()),
        (400, "InvalidResourcePolicy")
    );
    assert_eq!(settle(&env.service, "app").await, Value::Null);
}

/// A slow extension: a stack create canceled while it deploys ends `canceled` managing exactly what the extension
/// holds, and the next update completes it; a stack delete canceled while it deletes stops handing out deletes and
/// keeps managing what it did not delete, and the next delete finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_operation_leaves_nothing_untracked_and_the_next_one_carries_on() {
    let env = setup(fast()).await;
    let service = &env.service;
    let names: Vec<String> = (0..200).map(|i| format!("w{i:03}")).collect();
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    env.widgets.latency_ms.store(40, Ordering::SeqCst);
    let nothing_runs = service.cancel(RG, "app").await.expect_err("no stack");
    assert_eq!(nothing_runs.status(), 404);

    service
        .create_or_update(RG, "app", stack(&all, false, "delete", "c1"), None)
        .await
        .expect("accepted");
    while env.widgets.resources.lock().unwrap().len() < 8 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    service.cancel(RG, "app").await.expect("canceled");
    let canceled = settle(service, "app").await;
    assert_eq!(
        canceled["properties"]["provisioningState"], "canceled",
        "{canceled:#}"
    );
    assert_eq!(
        canceled["properties"]["error"]["code"],
        "DeploymentStackCanceled"
    );
    let managed = names_of(&canceled["properties"]["resources"]);
    assert!(
        managed.len() < all.len(),
        "stopped early: {}",
        managed.len()
    );
    assert_eq!(
        managed,
        held(&env),
        "every widget the extension holds is managed"
    );
    let again = service.cancel(RG, "app").await.expect_err("nothing runs");
    assert_eq!(
        (again.status(), again.code()),
        (409, "DeploymentStackCannotBeCanceled")
    );

    service
        .create_or_update(RG, "app", stack(&all, false, "delete", "c1"), None)
        .await
        .expect("accepted");
    let completed = settle(service, "app").await;
    assert_eq!(
        completed["properties"]["provisioningState"], "succeeded",
        "{completed:#}"
    );
    assert_eq!(
        names_of(&completed["properties"]["resources"]).len(),
        all.len()
    );

    service
        .delete(
            RG,
            "app",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    while env.widgets.resources.lock().unwrap().len() > all.len() - 8 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    service.cancel(RG, "app").await.expect("canceled");
    let stopped = settle(service, "app").await;
    assert_eq!(
        stopped["properties"]["provisioningState"], "canceled",
        "{stopped:#}"
    );
    let left = names_of(&stopped["properties"]["resources"]);
    assert!(!left.is_empty(), "stopped before the end");
    assert_eq!(left, held(&env), "what was not deleted is still managed");
    assert!(
        stopped["properties"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "managed"),
        "{stopped:#}"
    );

    service
        .delete(
            RG,
            "app",
            delete_options("unmanageAction.Resources=delete"),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(settle(service, "app").await, Value::Null);
    assert!(held(&env).is_empty());
}

//! Stack what-if and bulk delete end to end: a temp-dir SQLite store, the engine, the built-in Local extension
//! (files under a temp root), the built-in Key Vault provider, and a widget extension whose token lives in the
//! local Key Vault and which can be taken down. What-if results are persisted (they survive a service restart over
//! the same data directory, their request holds no plaintext secret on disk) and expire after `retentionInterval`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::models::stack::DeploymentStack;
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{
    BulkDeleteEntry, BulkDeleteRequest, BulkDeleteStatus, StackService, StackServiceSettings,
    bulk_delete_runs_long,
};
use cairn_store::{
    ManagedResourceFilter, NewSecretVersion, PageRequest, Precondition, ResourceGroup,
    SecretString, Store, Tags, Timestamp, Vault,
};
use cairn_store_sqlite::SqliteStore;
use serde_json::{Value, json};

const SUB: &str = "00000000-0000-0000-0000-000000000002";
const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000002/resourceGroups/rg1";
const OPS_VAULT: &str = "/subscriptions/00000000-0000-0000-0000-000000000002/resourceGroups/rg1/providers/Microsoft.KeyVault/vaults/ops";

/// Widgets: deletes need the token from the vault; `down` answers 503 to everything.
#[derive(Default)]
struct Widgets {
    resources: Mutex<HashMap<String, Value>>,
    down: AtomicBool,
}

struct WidgetTransport(Arc<Widgets>);

impl ExtensionTransport for WidgetTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let error = |status: u16, code: &str| {
                TransportResponse::json(
                    status,
                    json!({"error": {"code": code, "message": code}})
                        .to_string()
                        .into_bytes(),
                )
            };
            let this = &self.0;
            if this.down.load(Ordering::SeqCst) {
                return Ok(error(503, "ServiceUnavailable"));
            }
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            if body.pointer("/config/token").and_then(Value::as_str) != Some("token-1") {
                return Ok(error(401, "Unauthorized"));
            }
            let name = body
                .pointer("/identifiers/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Ok(match request.operation {
                Operation::Delete => match this.resources.lock().unwrap().remove(&name) {
                    Some(_) => TransportResponse::json(204, Vec::new()),
                    None => error(404, "ResourceNotFound"),
                },
                Operation::Get => match this.resources.lock().unwrap().get(&name) {
                    Some(properties) => TransportResponse::json(
                        200,
                        json!({"type": "widget", "apiVersion": "v1", "identifiers": {"name": name},
                               "properties": properties, "status": "Succeeded"})
                        .to_string()
                        .into_bytes(),
                    ),
                    None => error(404, "ResourceNotFound"),
                },
                _ => error(400, "NotSupported"),
            })
        })
    }
}

struct Env {
    dir: tempfile::TempDir,
    root: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    widgets: Arc<Widgets>,
}

async fn vault(store: &Arc<dyn Store>, id: &str, name: &str) {
    store
        .put_vault(
            Vault {
                id: id.into(),
                name: name.into(),
                location: "westus".into(),
                tags: Tags::new(),
                properties: json!({}),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .expect("vault");
}

/// A stack service (with its engine and extension host) over `store`.
fn service_over(store: Arc<dyn Store>, widgets: Arc<Widgets>) -> StackService {
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        "Widgets",
        "1.0.0",
        Arc::new(WidgetTransport(widgets)),
    ));
    registry.register(RegisteredExtension::new(
        cairn_ext_local::NAME,
        cairn_ext_local::VERSION,
        Arc::new(cairn_ext_local::in_process_transport()),
    ));
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
    let settings = StackServiceSettings {
        lease_ttl: Duration::from_secs(10),
        heartbeat_interval: Duration::from_millis(200),
        max_delete_rounds: 2,
        retry_backoff: Duration::from_millis(10),
        ..StackServiceSettings::default()
    };
    StackService::new(engine, store, host, Providers::empty(), settings)
}

async fn setup() -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = tempfile::tempdir().expect("root dir");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.expect("store"));
    store
        .put_resource_group(
            ResourceGroup {
                subscription_id: SUB.into(),
                name: "rg1".into(),
                location: "westus".into(),
                tags: Tags::new(),
                managed_by: None,
                provisioning_state: "Succeeded".into(),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .expect("group");
    vault(&store, OPS_VAULT, "ops").await;
    store
        .set_vault_secret(NewSecretVersion {
            vault_id: OPS_VAULT.into(),
            name: "widget-token".into(),
            value: SecretString::from("token-1".to_owned()),
            content_type: None,
            enabled: true,
            not_before: None,
            expires: None,
            tags: Tags::new(),
            created_at: Timestamp::now(),
        })
        .await
        .expect("secret");
    let widgets = Arc::new(Widgets::default());
    let service = service_over(store.clone(), widgets.clone());
    Env {
        dir,
        root,
        store,
        service,
        widgets,
    }
}

/// Stack properties over Local files `files` (and, when `vault`, a Key Vault named `scratch`).
fn properties(root: &str, files: &[&str], with_vault: bool, action: &str) -> Value {
    let mut resources = serde_json::Map::new();
    for file in files {
        resources.insert(
            file.replace('.', "_"),
            json!({"extension": "local", "type": "File", "apiVersion": "1.0.0",
                   "properties": {"path": file, "content": "hello"}}),
        );
    }
    if with_vault {
        resources.insert(
            "scratch".into(),
            json!({"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "scratch",
                   "location": "westus", "properties": {}}),
        );
    }
    json!({
        "template": {
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental",
            "contentVersion": "1.0.0.0",
            "extensions": {"local": {"name": "Local", "version": "1.0.0",
                                     "config": {"rootDirectory": {"type": "string"}}}},
            "resources": resources
        },
        "extensionConfigs": {"local": {"rootDirectory": {"value": root}}},
        "actionOnUnmanage": {"resources": action},
        "denySettings": {"mode": "none"}
    })
}

fn stack_id(name: &str) -> String {
    format!("{RG}/providers/Microsoft.Resources/deploymentStacks/{name}")
}

fn what_if_request(stack: &str, properties: Value) -> DeploymentStacksWhatIfResult {
    let mut properties = properties;
    properties["deploymentStackResourceId"] = json!(stack_id(stack));
    properties["retentionInterval"] = json!("P7D");
    serde_json::from_value(json!({ "properties": properties })).expect("a what-if body")
}

/// `(name, changeType)` of every resource change, sorted.
fn changes(result: &DeploymentStacksWhatIfResult) -> Vec<(String, String)> {
    let value = serde_json::to_value(result).expect("json");
    let mut found: Vec<(String, String)> = value["properties"]["changes"]["resourceChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|change| {
            let name = change["identifiers"]["path"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| {
                    change["id"]
                        .as_str()
                        .and_then(|id| id.rsplit('/').next())
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            (name, change["changeType"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    found.sort();
    found
}

async fn deploy(env: &Env, name: &str, properties: Value) {
    let body: DeploymentStack =
        serde_json::from_value(json!({ "properties": properties })).expect("stack body");
    env.service
        .create_or_update(RG, name, body, None)
        .await
        .expect("accepted");
    for _ in 0..600 {
        let stack = env.service.get(RG, name).await.expect("get");
        let value = serde_json::to_value(&stack).expect("json");
        match value["properties"]["provisioningState"].as_str() {
            Some("succeeded") => return,
            Some("failed" | "canceled") => panic!("the stack failed: {value}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("the stack did not finish in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_of_a_new_stack_creates_everything() {
    let env = setup().await;
    let root = env.root.path().to_string_lossy().into_owned();
    let request = what_if_request(
        "fresh",
        properties(&root, &["a.txt", "b.txt"], true, "delete"),
    );
    let accepted = env
        .service
        .what_if(RG, "wi1", request)
        .await
        .expect("what-if");
    assert!(accepted.created);
    assert_eq!(
        changes(&accepted.result),
        vec![
            ("a.txt".into(), "create".into()),
            ("b.txt".into(), "create".into()),
            ("scratch".into(), "create".into())
        ]
    );
    let value = serde_json::to_value(&accepted.result).expect("json");
    assert_eq!(
        value["type"],
        "Microsoft.Resources/deploymentStacksWhatIfResults"
    );
    assert_eq!(value["properties"]["provisioningState"], "succeeded");
    assert!(value["properties"].get("template").is_none());
    assert!(value["properties"]["deploymentStackLastModified"].is_null());
    // Nothing ran: the stack does not exist and no file was written.
    assert_eq!(
        env.service
            .get(RG, "fresh")
            .await
            .map(|_| ())
            .unwrap_err()
            .status(),
        404
    );
    assert!(!env.root.path().join("a.txt").exists());
    // Stored: get, list, rerun, delete.
    assert_eq!(
        env.service.get_what_if(RG, "wi1").await.expect("stored"),
        accepted.result
    );
    assert_eq!(list_names(&env.service, RG).await, ["wi1"]);
    let again = env.service.rerun_what_if(RG, "wi1").await.expect("rerun");
    assert_eq!(changes(&again), changes(&accepted.result));
    assert_ne!(
        again.properties.correlation_id, accepted.result.properties.correlation_id,
        "a rerun computes anew"
    );
    assert_eq!(
        env.service.get_what_if(RG, "wi1").await.expect("stored"),
        again,
        "the rerun's result is stored"
    );
    assert!(env.service.delete_what_if(RG, "wi1").await.expect("delete"));
    assert!(!env.service.delete_what_if(RG, "wi1").await.expect("again"));
    assert_eq!(
        env.service
            .get_what_if(RG, "wi1")
            .await
            .unwrap_err()
            .status(),
        404
    );
    assert_eq!(
        env.service
            .rerun_what_if(RG, "wi1")
            .await
            .unwrap_err()
            .status(),
        404
    );
}

async fn list_names(service: &StackService, scope: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut page = PageRequest::first(1);
    loop {
        let listed = service
            .list_what_ifs(scope, page.clone())
            .await
            .expect("list");
        names.extend(listed.items.iter().filter_map(|r| r.name.clone()));
        match listed.continuation {
            Some(token) => page.continuation = Some(token),
            None => return names,
        }
    }
}

const CANARY: &str = "what-if-canary-3b9d41e7";

/// `properties` with a `secureString` parameter whose value is [`CANARY`].
fn with_secure_parameter(mut properties: Value) -> Value {
    properties["template"]["parameters"] = json!({"adminPassword": {"type": "secureString"}});
    properties["parameters"] = json!({"adminPassword": {"value": CANARY}});
    properties
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_results_survive_a_restart_and_keep_no_plaintext_secret() {
    let env = setup().await;
    let root = env.root.path().to_string_lossy().into_owned();
    let request = what_if_request(
        "fresh",
        with_secure_parameter(properties(&root, &["a.txt"], false, "delete")),
    );
    let accepted = env
        .service
        .what_if(RG, "kept", request)
        .await
        .expect("what-if");
    let text = serde_json::to_string(&accepted.result).expect("json");
    assert!(
        !text.contains(CANARY),
        "the result holds no secure value: {text}"
    );
    // The control: the scan sees what the store keeps in plaintext (the result's name).
    assert!(!files_containing(env.dir.path(), b"deploymentStacksWhatIfResults/kept").is_empty());
    assert!(
        files_containing(env.dir.path(), CANARY.as_bytes()).is_empty(),
        "a secure parameter value is on disk in plaintext"
    );

    // Restart: close the store, open the same directory again, build a new service over it.
    let Env {
        dir,
        root,
        widgets,
        store,
        service,
    } = env;
    drop(service);
    store.close().await.expect("close");
    drop(store);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.expect("reopen"));
    let service = service_over(store.clone(), widgets);
    assert_eq!(
        service.get_what_if(RG, "KEPT").await.expect("survives"),
        accepted.result
    );
    assert_eq!(list_names(&service, RG).await, ["kept"]);
    // The sealed request (with the secure value) is read back to run it again.
    let again = service.rerun_what_if(RG, "kept").await.expect("rerun");
    assert_eq!(changes(&again), changes(&accepted.result));
    assert!(
        !serde_json::to_string(&again)
            .expect("json")
            .contains(CANARY)
    );
    store.close().await.expect("close");
    assert!(
        files_containing(dir.path(), CANARY.as_bytes()).is_empty(),
        "a secure parameter value is on disk in plaintext after checkpoint"
    );
    drop(root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_results_expire_after_their_retention_interval() {
    let env = setup().await;
    let root = env.root.path().to_string_lossy().into_owned();
    let mut short = what_if_request("fresh", properties(&root, &["a.txt"], false, "delete"));
    short.properties.retention_interval = "PT1S".into();
    env.service
        .what_if(RG, "short", short)
        .await
        .expect("what-if");
    let long = what_if_request("fresh", properties(&root, &["a.txt"], false, "delete"));
    env.service
        .what_if(RG, "long", long)
        .await
        .expect("what-if");
    assert!(env.service.get_what_if(RG, "short").await.is_ok());
    assert_eq!(list_names(&env.service, RG).await, ["long", "short"]);

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let gone = env.service.get_what_if(RG, "short").await.unwrap_err();
    assert_eq!(
        (gone.status(), gone.code()),
        (404, "DeploymentStacksWhatIfResultNotFound")
    );
    assert_eq!(list_names(&env.service, RG).await, ["long"]);
    assert_eq!(
        env.service
            .rerun_what_if(RG, "short")
            .await
            .unwrap_err()
            .status(),
        404
    );
    assert_eq!(
        env.service.purge_expired_what_ifs().await.expect("purge"),
        1
    );
    assert_eq!(
        env.service.purge_expired_what_ifs().await.expect("purge"),
        0
    );
    assert!(
        !env.service
            .delete_what_if(RG, "short")
            .await
            .expect("delete")
    );
    assert!(env.service.get_what_if(RG, "long").await.is_ok());

    // A PUT over an expired name creates it anew (201, not 200).
    let mut again = what_if_request("fresh", properties(&root, &["a.txt"], false, "delete"));
    again.properties.retention_interval = "PT1S".into();
    let first = env
        .service
        .what_if(RG, "again", again.clone())
        .await
        .expect("what-if");
    assert!(first.created);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let second = env
        .service
        .what_if(RG, "again", again)
        .await
        .expect("what-if");
    assert!(second.created, "an expired result is not replaced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_refuses_a_bad_retention_interval() {
    let env = setup().await;
    for text in ["", "7 days", "P1M", "PT0S", "P7"] {
        let mut request = what_if_request("x", properties("/tmp", &[], false, "detach"));
        request.properties.retention_interval = text.into();
        let error = env.service.what_if(RG, "bad", request).await.unwrap_err();
        assert_eq!(
            (error.status(), error.code()),
            (400, "InvalidRetentionInterval"),
            "{text:?}"
        );
        assert_eq!(
            error.detail().target.as_deref(),
            Some("properties.retentionInterval")
        );
    }
    assert!(
        list_names(&env.service, RG).await.is_empty(),
        "nothing stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_after_deploy_shows_no_change_and_removals_per_action() {
    let env = setup().await;
    let root = env.root.path().to_string_lossy().into_owned();
    deploy(
        &env,
        "st",
        properties(&root, &["a.txt", "b.txt"], true, "delete"),
    )
    .await;
    assert!(env.root.path().join("b.txt").exists());

    let same = env
        .service
        .what_if(
            RG,
            "same",
            what_if_request("st", properties(&root, &["a.txt", "b.txt"], true, "delete")),
        )
        .await
        .expect("what-if");
    let found = changes(&same.result);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found.iter().all(|(_, change)| change == "noChange"),
        "{found:?}"
    );
    let value = serde_json::to_value(&same.result).expect("json");
    assert!(value["properties"]["deploymentStackLastModified"].is_string());

    for (action, expected) in [("delete", "delete"), ("detach", "detach")] {
        let result = env
            .service
            .what_if(
                RG,
                action,
                what_if_request("st", properties(&root, &["a.txt"], false, action)),
            )
            .await
            .expect("what-if");
        assert_eq!(
            changes(&result.result),
            vec![
                ("a.txt".into(), "noChange".into()),
                ("b.txt".into(), expected.into()),
                ("scratch".into(), expected.into())
            ],
            "actionOnUnmanage {action}"
        );
    }
    // New content for a.txt is a modify with its property delta; a new deny mode shows in denySettingsChange.
    let mut changed = properties(&root, &["a.txt", "b.txt"], true, "delete");
    changed["template"]["resources"]["a_txt"]["properties"]["content"] = json!("changed");
    changed["denySettings"] = json!({"mode": "denyDelete"});
    let modified = env
        .service
        .what_if(RG, "modified", what_if_request("st", changed))
        .await
        .expect("what-if");
    assert_eq!(
        changes(&modified.result),
        vec![
            ("a.txt".into(), "modify".into()),
            ("b.txt".into(), "noChange".into()),
            ("scratch".into(), "noChange".into())
        ]
    );
    let value = serde_json::to_value(&modified.result).expect("json");
    let a = value["properties"]["changes"]["resourceChanges"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["identifiers"]["path"] == "a.txt"))
        .cloned()
        .expect("a.txt change");
    assert!(a["resourceConfigurationChanges"].is_object(), "{a}");
    assert_eq!(a["managementStatusChange"]["before"], "managed");
    let deny = &value["properties"]["changes"]["denySettingsChange"];
    assert_eq!(deny["before"]["mode"], "none");
    assert_eq!(deny["after"]["mode"], "denyDelete");
    assert_eq!(deny["delta"][0]["path"], "mode", "{deny}");
    // A what-if changes nothing.
    assert!(env.root.path().join("b.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_refuses_a_bad_stack_id() {
    let env = setup().await;
    let mut request = what_if_request("x", properties("/tmp", &[], false, "detach"));
    request.properties.deployment_stack_resource_id = RG.into();
    let error = env.service.what_if(RG, "bad", request).await.unwrap_err();
    assert_eq!(error.status(), 400);
    assert_eq!(error.code(), "InvalidDeploymentStackResourceId");
}

fn entry(value: Value) -> BulkDeleteEntry {
    serde_json::from_value(value).expect("entry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_reports_per_entry() {
    let env = setup().await;
    let root = env.root.path().to_string_lossy().into_owned();
    let doomed = format!("{RG}/providers/Microsoft.KeyVault/vaults/doomed");
    vault(&env.store, &doomed, "doomed").await;
    std::fs::write(env.root.path().join("old.txt"), "x").expect("file");
    env.widgets
        .resources
        .lock()
        .unwrap()
        .insert("w1".into(), json!({}));
    let local =
        json!({"name": "Local", "version": "1.0.0", "config": {"rootDirectory": {"value": root}}});
    let widgets = json!({"name": "Widgets", "version": "1.0.0", "config": {
        "token": {"keyVaultReference": {"keyVault": {"id": OPS_VAULT}, "secretName": "widget-token"}}}});
    let entries = vec![
        entry(json!({"id": doomed, "apiVersion": "2023-07-01"})),
        entry(
            json!({"id": format!("{RG}/providers/Microsoft.KeyVault/vaults/never"), "apiVersion": "2023-07-01"}),
        ),
        entry(
            json!({"extension": local, "type": "File", "apiVersion": "1.0.0", "identifiers": {"path": "old.txt"}}),
        ),
        entry(
            json!({"extension": local, "type": "File", "apiVersion": "1.0.0", "identifiers": {"path": "none.txt"}}),
        ),
        entry(
            json!({"extension": widgets, "type": "widget", "apiVersion": "v1", "identifiers": {"name": "w1"}}),
        ),
        entry(json!({"type": "widget"})),
        entry(
            json!({"extension": widgets, "type": "widget", "apiVersion": "v1", "identifiers": {"name": "w9"}}),
        ),
    ];
    let results = env
        .service
        .bulk_delete(entries, None)
        .await
        .expect("bulk delete");
    let statuses: Vec<BulkDeleteStatus> = results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![
            BulkDeleteStatus::Deleted,
            BulkDeleteStatus::NotFound,
            BulkDeleteStatus::Deleted,
            BulkDeleteStatus::NotFound,
            BulkDeleteStatus::Deleted,
            BulkDeleteStatus::Failed,
            BulkDeleteStatus::NotFound,
        ]
    );
    assert!(env.store.get_vault(&doomed).await.expect("get").is_none());
    assert!(!env.root.path().join("old.txt").exists());
    assert!(env.widgets.resources.lock().unwrap().is_empty());
    assert_eq!(
        results[5]
            .error
            .as_ref()
            .map(|e| e.code().to_owned())
            .as_deref(),
        Some("InvalidBulkDeleteEntry")
    );
    // Results never echo the config (the directive names a secret).
    let text = serde_json::to_string(&results).expect("json");
    assert!(
        !text.contains("widget-token") && !text.contains("rootDirectory"),
        "{text}"
    );

    // With the extension down, its entry fails with the extension's error; the rest still go.
    env.widgets
        .resources
        .lock()
        .unwrap()
        .insert("w2".into(), json!({}));
    env.widgets.down.store(true, Ordering::SeqCst);
    std::fs::write(env.root.path().join("late.txt"), "x").expect("file");
    let results = env
        .service
        .bulk_delete(
            vec![
                entry(json!({"extension": widgets, "type": "widget", "apiVersion": "v1", "identifiers": {"name": "w2"}})),
                entry(json!({"extension": local, "type": "File", "apiVersion": "1.0.0", "identifiers": {"path": "late.txt"}})),
            ],
            None,
        )
        .await
        .expect("bulk delete");
    assert_eq!(results[0].status, BulkDeleteStatus::Failed);
    assert!(results[0].error.is_some(), "{results:?}");
    assert_eq!(results[1].status, BulkDeleteStatus::Deleted);
    assert!(env.widgets.resources.lock().unwrap().contains_key("w2"));
}

/// A cairn reference id of a widget (what cairn reports for an extensible resource).
/// The inventory's `Local` files: path → the row's extension (with its configId).
async fn inventoried_files(store: &Arc<dyn Store>) -> HashMap<String, cairn_store::ExtensionRef> {
    let page = store
        .list_managed_resources(ManagedResourceFilter::default())
        .await
        .expect("inventory");
    page.items
        .into_iter()
        .filter_map(|row| {
            let extension = row.resource.extension?;
            let path = extension.identifiers.as_ref()?["path"].as_str()?.to_owned();
            Some((path, extension))
        })
        .collect()
}

/// The inventory follows a bulk delete: the row of a resource no stack manages goes with it; a stack's stays (its
/// record still lists it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_removes_the_inventory_rows_of_what_no_stack_manages() {
    let env = setup().await;
    let root = env.root.path().to_string_lossy().into_owned();
    deploy(
        &env,
        "files",
        properties(&root, &["kept.txt"], false, "detach"),
    )
    .await;
    let kept = inventoried_files(&env.store).await["kept.txt"].clone();
    // A file some deployment outside any stack wrote: its row, under the same control plane.
    std::fs::write(env.root.path().join("loose.txt"), "x").expect("file");
    let loose_identifiers = json!({ "path": "loose.txt" });
    let mut loose = env
        .store
        .list_managed_resources(ManagedResourceFilter::default())
        .await
        .expect("inventory")
        .items
        .remove(0)
        .resource;
    loose.key = cairn_store::ResourceKey::extension(
        "Local",
        kept.config_id.as_deref(),
        "File",
        &loose_identifiers,
    );
    loose.deployment = None;
    loose.extension = Some(cairn_store::ExtensionRef {
        identifiers: Some(loose_identifiers),
        ..kept.clone()
    });
    env.store
        .put_managed_resource(loose, Precondition::MustNotExist)
        .await
        .expect("a loose row");
    assert_eq!(inventoried_files(&env.store).await.len(), 2);

    let local = json!({"name": "Local", "version": "1.0.0", "configId": kept.config_id,
                       "config": {"rootDirectory": {"value": root}}});
    let entries = ["kept.txt", "loose.txt"]
        .map(|path| {
            entry(
                json!({"extension": local, "type": "File", "apiVersion": "1.0.0",
                         "identifiers": {"path": path}}),
            )
        })
        .to_vec();
    let results = env
        .service
        .bulk_delete(entries, None)
        .await
        .expect("bulk delete");
    let statuses: Vec<BulkDeleteStatus> = results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![BulkDeleteStatus::Deleted, BulkDeleteStatus::Deleted]
    );
    let left: Vec<String> = inventoried_files(&env.store).await.into_keys().collect();
    assert_eq!(
        left,
        vec!["kept.txt".to_owned()],
        "the stack still lists kept.txt"
    );
}

fn widget_reference_id(name: &str) -> String {
    cairn_extension_contract::ReferenceIdParts {
        extension_name: "Widgets".into(),
        resource_type: "widget".into(),
        api_version: Some("v1".into()),
        config_id: None,
        identifiers: json!({"name": name}),
        needs_config: true,
    }
    .to_reference_id()
    .expect("reference id")
    .to_string()
}

/// Seed 003's bulk delete body: a bare array of `import`/`id` entries, the credential an `auth` object of type
/// `KeyVaultSecret`, fetched fresh for the delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_accepts_the_gists_entries() {
    let env = setup().await;
    env.widgets
        .resources
        .lock()
        .unwrap()
        .insert("w5".into(), json!({}));
    let body = json!([
        {"import": {"provider": "Widgets", "version": "1.0.0",
                    "config": {"token": {"type": "KeyVaultSecret", "keyVaultId": OPS_VAULT, "secretName": "widget-token"}}},
         "type": "widget", "apiVersion": "v1", "id": widget_reference_id("w5")},
        {"import": {"provider": "Widgets", "version": "1.0.0",
                    "config": {"token": {"type": "KeyVaultSecret", "keyVaultId": OPS_VAULT, "secretName": "widget-token"}}},
         "type": "widget", "apiVersion": "v1", "id": widget_reference_id("w6")},
        {"import": {"provider": "Gadgets", "version": "1.0.0"}, "type": "widget", "id": widget_reference_id("w5")},
        {"import": {"provider": "Widgets", "version": "1.0.0"}, "type": "widget"}
    ]);
    let request: BulkDeleteRequest = serde_json::from_value(body).expect("the gist's body");
    assert_eq!(request.resources.len(), 4);
    assert!(
        bulk_delete_runs_long(&request.resources),
        "an entry with a credential directive makes the request large"
    );
    let results = env
        .service
        .bulk_delete(request.resources, None)
        .await
        .expect("bulk delete");
    let statuses: Vec<BulkDeleteStatus> = results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![
            BulkDeleteStatus::Deleted,
            BulkDeleteStatus::NotFound,
            BulkDeleteStatus::Failed,
            BulkDeleteStatus::Failed,
        ],
        "{results:?}"
    );
    assert!(env.widgets.resources.lock().unwrap().is_empty());
    assert_eq!(results[0].resource.identifiers, Some(json!({"name": "w5"})));
    let text = serde_json::to_string(&results).expect("json");
    assert!(
        !text.contains("widget-token") && !text.contains("token-1"),
        "{text}"
    );
    for failed in &results[2..] {
        assert_eq!(
            failed
                .error
                .as_ref()
                .map(|e| e.code().to_owned())
                .as_deref(),
            Some("InvalidBulkDeleteEntry")
        );
    }

    // cairn's own body still reads, and a small request without directives is not large.
    let plain: BulkDeleteRequest = serde_json::from_value(json!({"resources": [
        {"id": format!("{RG}/providers/Microsoft.KeyVault/vaults/v"), "apiVersion": "2023-07-01"}
    ]}))
    .expect("cairn's body");
    assert!(!bulk_delete_runs_long(&plain.resources));
}

/// Seed 003's `auth.type: UserProvided` carries a raw credential: the whole request is refused before anything
/// runs, with an error that names the entry and the fix and never the credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_refuses_user_provided_credentials() {
    let env = setup().await;
    env.widgets
        .resources
        .lock()
        .unwrap()
        .insert("w7".into(), json!({}));
    let widgets = json!({"name": "Widgets", "version": "1.0.0", "config": {
        "token": {"keyVaultReference": {"keyVault": {"id": OPS_VAULT}, "secretName": "widget-token"}}}});
    let entries = vec![
        entry(
            json!({"extension": widgets, "type": "widget", "apiVersion": "v1", "identifiers": {"name": "w7"}}),
        ),
        entry(json!({"import": {"provider": "Widgets", "version": "1.0.0",
                                "config": {"auth": {"type": "UserProvided", "token": "raw-credential-93af"}}},
                     "type": "widget", "apiVersion": "v1", "id": widget_reference_id("w7")})),
    ];
    let error = env
        .service
        .bulk_delete(entries, None)
        .await
        .expect_err("refused");
    assert_eq!(
        (error.status(), error.code()),
        (400, "InvalidStackExtensionConfig")
    );
    let body = serde_json::to_string(&error.to_response()).expect("json");
    assert!(body.contains("resources[1].import.config.auth"), "{body}");
    assert!(
        body.contains("UserProvided") && body.contains("Key Vault"),
        "{body}"
    );
    assert!(!body.contains("raw-credential-93af"), "{body}");
    assert!(
        env.widgets.resources.lock().unwrap().contains_key("w7"),
        "nothing ran"
    );
}

//! Stack drift detection end to end over a temp-dir SQLite store and the engine: Local files edited and removed by
//! hand, `Gadgets` (tests/common/gadgets.rs) changed behind the stack's back or down, a Key Vault vault (a built-in
//! ARM provider) retagged and deleted; re-applying the stack repairs what drifted; results are persisted, published
//! while reads run, bounded in parallelism, and hold no secret (result, stored record, logs).

mod common;
use common::gadgets::{GadgetTransport, Gadgets};
use common::*;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cairn_arm::models::stack::DeploymentStack;
use cairn_arm::models::stack_drift::{DeploymentStackDriftRequest, DeploymentStackDriftResult};
use cairn_stack_service::{DRIFT_DETECTION_INTERRUPTED, StackService, StackServiceSettings};
use cairn_store::{Precondition, Store, Tags, Timestamp};
use serde_json::{Value, json};

const TOKEN_SECRET: &str = "gadget-token";
/// The gadgets' credential (a Key Vault secret) and a gadget's write-only property: never in a drift result, the
/// store or the logs.
const TOKEN_CANARY: &str = "drift-token-canary-61c0e2";
const PROPERTY_CANARY: &str = "drift-property-canary-9a4f17";

/// Everything the service logs, from the first test that asks on.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_writer(move || LogWriter(sink.clone()))
            .with_ansi(false)
            .init();
        logs
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Env {
    dir: tempfile::TempDir,
    root: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    gadgets: Arc<Gadgets>,
}

async fn setup(settings: StackServiceSettings) -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = tempfile::tempdir().expect("root dir");
    let store = store_with_group_and_vault(dir.path()).await;
    set_secret(&store, TOKEN_SECRET, TOKEN_CANARY).await;
    let gadgets = Gadgets::new(TOKEN_CANARY);
    let service = stack_service(
        store.clone(),
        vec![(
            "Gadgets",
            "1.0.0",
            Arc::new(GadgetTransport(gadgets.clone())),
        )],
        settings,
    );
    Env {
        dir,
        root,
        store,
        service,
        gadgets,
    }
}

const VAULT_ID: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1/providers/Microsoft.KeyVault/vaults/appkv";

/// Two Local files, two gadgets (one with a write-only secret, one declaring the `revision` the extension
/// calculates) and a vault.
fn stack(root: &str) -> DeploymentStack {
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "parameters": {"secret": {"type": "securestring"}},
                "extensions": {
                    "local": {"name": "Local", "version": "1.0.0",
                              "config": {"rootDirectory": {"type": "string"}}},
                    "gadgets": {"name": "Gadgets", "version": "1.0.0",
                                "config": {"token": {"type": "secureString"}}}
                },
                "resources": {
                    "conf": {"extension": "local", "type": "File", "apiVersion": "1.0.0",
                             "properties": {"path": "etc/app.conf", "content": "port=80\n"}},
                    "motd": {"extension": "local", "type": "File", "apiVersion": "1.0.0",
                             "properties": {"path": "motd.txt", "content": "hello\n"}},
                    "g1": {"extension": "gadgets", "type": "gadget", "apiVersion": "v1",
                           "properties": {"name": "g1", "size": 3, "secret": "[parameters('secret')]"}},
                    "g2": {"extension": "gadgets", "type": "gadget", "apiVersion": "v1",
                           "properties": {"name": "g2", "size": 1, "revision": 0}},
                    "kv": {"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "appkv",
                           "location": "westus", "tags": {"env": "prod"},
                           "properties": {"tenantId": "t", "sku": {"family": "A", "name": "standard"}}}
                }
            },
            "parameters": {"secret": {"value": PROPERTY_CANARY}},
            "extensionConfigs": {
                "local": {"rootDirectory": {"value": root}},
                "gadgets": {"token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": TOKEN_SECRET}}}
            },
            "actionOnUnmanage": {"resources": "delete"},
            "denySettings": {"mode": "none"}
        }
    }))
    .expect("a stack body")
}

async fn put(env: &Env, name: &str) -> Value {
    env.service
        .create_or_update(RG, name, stack(&env.root.path().to_string_lossy()), None)
        .await
        .expect("accepted");
    let stack = settle(&env.service, name).await;
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    stack
}

/// Runs a drift detection to its end.
async fn detect(service: &StackService, name: &str) -> DeploymentStackDriftResult {
    let started = service
        .detect_drift(RG, name, DeploymentStackDriftRequest::default())
        .await
        .expect("started");
    assert_eq!(started.properties.status.as_str(), "Running");
    let id = started.name.clone().expect("an operation id");
    for _ in 0..600 {
        let result = service.drift_result(RG, name, &id).await.expect("result");
        if result.properties.status.is_terminal() {
            return result;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the drift detection did not end in time");
}

/// `name → (driftStatus, changed paths, error code)` of a result.
fn by_resource(result: &DeploymentStackDriftResult) -> Vec<(String, String, Vec<String>, String)> {
    let mut rows: Vec<_> = result
        .properties
        .resources
        .iter()
        .map(|r| {
            let name = r
                .identifiers
                .as_ref()
                .and_then(|i| i.get("name").or_else(|| i.get("path")))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    r.id.as_deref()
                        .map(|id| id.rsplit('/').next().unwrap().to_owned())
                })
                .unwrap_or_default();
            let paths = r
                .property_changes
                .iter()
                .flatten()
                .map(|c| format!("{} {}", c.change_type, c.path))
                .collect();
            let code = r
                .error
                .as_ref()
                .map(|e| e.code().to_owned())
                .unwrap_or_default();
            (name, r.drift_status.as_str().to_owned(), paths, code)
        })
        .collect();
    rows.sort();
    rows
}

fn row(
    name: &str,
    status: &str,
    paths: &[&str],
    code: &str,
) -> (String, String, Vec<String>, String) {
    (
        name.to_owned(),
        status.to_owned(),
        paths.iter().map(|p| (*p).to_owned()).collect(),
        code.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_detected_per_resource_and_re_applying_repairs_it() {
    let logs = captured_logs();
    let env = setup(fast_settings()).await;
    put(&env, "app").await;

    // Right after the deployment everything is as applied, though the gadgets' calculated revision moves on
    // every read and Local reports a mode the template never set.
    let clean = detect(&env.service, "app").await;
    assert_eq!(clean.properties.status.as_str(), "Succeeded", "{clean:#?}");
    assert_eq!(
        by_resource(&clean),
        [
            row("appkv", "inSync", &[], ""),
            row("etc/app.conf", "inSync", &[], ""),
            row("g1", "inSync", &[], ""),
            row("g2", "inSync", &[], ""),
            row("motd.txt", "inSync", &[], ""),
        ]
    );
    assert_eq!(clean.properties.summary.total, 5);
    assert_eq!(clean.properties.summary.in_sync, 5);

    // Behind the stack's back: a file edited, another removed, a mode changed (not declared: no drift), a gadget
    // resized, another deleted, the vault retagged.
    let root = env.root.path();
    std::fs::write(root.join("etc/app.conf"), "port=8080\n").expect("edit");
    std::fs::remove_file(root.join("motd.txt")).expect("remove");
    env.gadgets.tamper("g1", "size", json!(30));
    env.gadgets.remove("g2");
    let mut vault = env
        .store
        .get_vault(VAULT_ID)
        .await
        .unwrap()
        .expect("vault")
        .vault;
    vault.tags = Tags::from([("env".to_owned(), "dev".to_owned())]);
    env.store
        .put_vault(vault, Precondition::Any, Timestamp::now())
        .await
        .expect("retag");
    let drifted = detect(&env.service, "app").await;
    assert_eq!(
        by_resource(&drifted),
        [
            row("appkv", "modified", &["modify tags.env"], ""),
            row(
                "etc/app.conf",
                "modified",
                &["modify properties.content"],
                ""
            ),
            row("g1", "modified", &["modify properties.size"], ""),
            row("g2", "deleted", &[], ""),
            row("motd.txt", "deleted", &[], ""),
        ]
    );
    let conf = drifted
        .properties
        .resources
        .iter()
        .find(|r| {
            r.identifiers
                .as_ref()
                .is_some_and(|i| i["path"] == "etc/app.conf")
        })
        .unwrap();
    let change = &conf.property_changes.as_ref().unwrap()[0];
    assert_eq!(
        (change.before.clone(), change.after.clone()),
        (Some(json!("port=80\n")), Some(json!("port=8080\n"))),
        "before as applied, after as it is now"
    );
    let summary = &drifted.properties.summary;
    assert_eq!(
        (
            summary.in_sync,
            summary.modified,
            summary.deleted,
            summary.unreachable
        ),
        (0, 3, 2, 0)
    );

    // The result is kept: a later read (and the list) finds it.
    let id = drifted.name.clone().unwrap();
    assert_eq!(
        env.service.drift_result(RG, "app", &id).await.unwrap(),
        drifted
    );
    let listed = env
        .service
        .list_drift_results(RG, "app", cairn_store::PageRequest::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2);
    assert_eq!(listed.items[1], drifted, "oldest first");

    // Re-applying the stack repairs every drifted resource.
    let writes_before = env.gadgets.writes.lock().unwrap().len();
    put(&env, "app").await;
    assert_eq!(
        std::fs::read_to_string(root.join("etc/app.conf")).unwrap(),
        "port=80\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("motd.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(env.gadgets.get("g1").unwrap()["size"], 3);
    assert!(env.gadgets.get("g2").is_some());
    assert!(env.gadgets.writes.lock().unwrap().len() > writes_before);
    let repaired = detect(&env.service, "app").await;
    assert!(
        repaired
            .properties
            .resources
            .iter()
            .all(|r| r.drift_status.as_str() == "inSync"),
        "{repaired:#?}"
    );

    // No secret anywhere: not in the results, not on disk, not in the logs.
    for result in [&clean, &drifted, &repaired] {
        let text = serde_json::to_string(result).unwrap();
        assert!(
            !text.contains(TOKEN_CANARY) && !text.contains(PROPERTY_CANARY),
            "{text}"
        );
    }
    for canary in [TOKEN_CANARY, PROPERTY_CANARY] {
        assert_eq!(
            files_containing(env.dir.path(), canary),
            Vec::<String>::new(),
            "{canary} on disk"
        );
    }
    let logged = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(
        logged.contains("stack drift detection ended"),
        "logs captured"
    );
    assert!(!logged.contains(TOKEN_CANARY) && !logged.contains(PROPERTY_CANARY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_whose_extension_is_down_is_unreachable() {
    let env = setup(fast_settings()).await;
    put(&env, "down").await;
    env.gadgets.down.store(true, Ordering::SeqCst);
    let result = detect(&env.service, "down").await;
    assert_eq!(result.properties.status.as_str(), "Succeeded");
    let rows = by_resource(&result);
    for gadget in ["g1", "g2"] {
        assert!(
            rows.contains(&row(gadget, "unreachable", &[], "ServiceUnavailable")),
            "{rows:#?}"
        );
    }
    assert!(rows.contains(&row("motd.txt", "inSync", &[], "")));
    assert_eq!(result.properties.summary.unreachable, 2);

    // A credential that can no longer be fetched makes them unreachable too, with the directive's error.
    env.gadgets.down.store(false, Ordering::SeqCst);
    env.store
        .delete_vault_secret(VAULT, TOKEN_SECRET)
        .await
        .expect("remove the token");
    let result = detect(&env.service, "down").await;
    let rows = by_resource(&result);
    assert!(
        rows.iter().any(|(name, status, _, code)| name == "g1"
            && status == "unreachable"
            && code.starts_with("ExtensionConfigSecret")),
        "{rows:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_bounded_and_progress_is_published() {
    let env = setup(StackServiceSettings {
        max_drift_reads_in_flight: 1,
        ..fast_settings()
    })
    .await;
    put(&env, "slow").await;
    // The deployment asked whether its gadgets existed, two at once: count the detection's reads only.
    env.gadgets.max_gets_in_flight.store(0, Ordering::SeqCst);
    env.gadgets.get_latency_ms.store(300, Ordering::SeqCst);
    let started = env
        .service
        .detect_drift(RG, "slow", DeploymentStackDriftRequest::default())
        .await
        .expect("started");
    let id = started.name.unwrap();
    assert_eq!(started.properties.summary.total, 5);
    assert!(started.properties.resources.is_empty());

    // One detection at a time.
    let second = env
        .service
        .detect_drift(RG, "slow", DeploymentStackDriftRequest::default())
        .await
        .expect_err("busy");
    assert_eq!(
        (second.status(), second.code()),
        (409, "DeploymentStackDriftDetectionInProgress")
    );

    let mut partial = None;
    let finished = loop {
        let result = env.service.drift_result(RG, "slow", &id).await.unwrap();
        if result.properties.status.is_terminal() {
            break result;
        }
        let read = result.properties.resources.len();
        if read > 0 && read < 5 {
            partial = Some(result);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let partial = partial.expect("progress was published while reads ran");
    assert_eq!(
        partial.properties.summary.checked as usize,
        partial.properties.resources.len()
    );
    assert_eq!(finished.properties.summary.checked, 5);
    assert_eq!(env.gadgets.max_gets_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detection_whose_process_stopped_reads_as_interrupted() {
    // The detection's lease lapses long before its heartbeat: as if its process had died.
    let env = setup(StackServiceSettings {
        lease_ttl: Duration::from_millis(300),
        heartbeat_interval: Duration::from_secs(60),
        ..fast_settings()
    })
    .await;
    put(&env, "stuck").await;
    env.gadgets.get_latency_ms.store(3_000, Ordering::SeqCst);
    let started = env
        .service
        .detect_drift(RG, "stuck", DeploymentStackDriftRequest::default())
        .await
        .expect("started");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let read = env
        .service
        .drift_result(RG, "stuck", started.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(read.properties.status.as_str(), "Failed", "{read:#?}");
    assert_eq!(
        read.properties.error.as_ref().map(|e| e.code()),
        Some(DRIFT_DETECTION_INTERRUPTED)
    );
    // The stack is free for a new detection.
    env.service
        .detect_drift(RG, "stuck", DeploymentStackDriftRequest::default())
        .await
        .expect("a new detection starts");
}

/// A detection that ends while it is polled reads as it ended: its final result is written before its lease is
/// released, and a poll that read the result before the lease took the ending in between for a dead process (and
/// wrote `Failed` over the result).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detection_polled_as_it_ends_reads_as_it_ended() {
    let env = setup(fast_settings()).await;
    put(&env, "polled").await;
    for round in 0..80 {
        let started = env
            .service
            .detect_drift(RG, "polled", DeploymentStackDriftRequest::default())
            .await
            .expect("started");
        let id = started.name.expect("an operation id");
        let mut polls = 0;
        let ended = loop {
            let read = env.service.drift_result(RG, "polled", &id).await.unwrap();
            if read.properties.status.is_terminal() {
                break read;
            }
            polls += 1;
            assert!(polls < 100_000, "round {round}: the detection did not end");
            tokio::task::yield_now().await;
        };
        assert_eq!(
            ended.properties.status.as_str(),
            "Succeeded",
            "round {round}: {ended:#?}"
        );
        // What a later poll reads is what the detection wrote, not an interruption written over it.
        let again = env.service.drift_result(RG, "polled", &id).await.unwrap();
        assert_eq!(again.properties.status.as_str(), "Succeeded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused() {
    let env = setup(fast_settings()).await;
    let missing = env
        .service
        .detect_drift(RG, "nope", DeploymentStackDriftRequest::default())
        .await
        .expect_err("no stack");
    assert_eq!(
        (missing.status(), missing.code()),
        (404, "DeploymentStackNotFound")
    );
    put(&env, "app").await;
    let bad = env
        .service
        .detect_drift(
            RG,
            "app",
            DeploymentStackDriftRequest {
                retention_interval: Some("P1M".into()),
            },
        )
        .await
        .expect_err("a calendar unit");
    assert_eq!(
        (bad.status(), bad.code()),
        (400, "InvalidRetentionInterval")
    );
    let unknown = env
        .service
        .drift_result(RG, "app", "drift-0")
        .await
        .expect_err("no such result");
    assert_eq!(
        (unknown.status(), unknown.code()),
        (404, "DeploymentStackDriftResultNotFound")
    );
    // While the stack's own operation runs, its resources are changing: 409.
    env.gadgets.get_latency_ms.store(0, Ordering::SeqCst);
    env.service
        .create_or_update(RG, "app", stack(&env.root.path().to_string_lossy()), None)
        .await
        .expect("accepted");
    let busy = env
        .service
        .detect_drift(RG, "app", DeploymentStackDriftRequest::default())
        .await
        .expect_err("deploying");
    assert_eq!(busy.status(), 409);
    settle(&env.service, "app").await;
}

//! Stack what-if results (`deploymentStacksWhatIfResults`, 2025-07-01: PUT, GET, LIST, POST whatIf, DELETE, the
//! operation status; persisted, expiring after `retentionInterval`, at resource-group, subscription and
//! management-group scope) and `POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete` over the API.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use cairn_engine::Providers;
use cairn_server::{AppState, ServerOptions};
use cairn_store::Store;
use cairn_store_sqlite::SqliteStore;

use common::*;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const V: &str = "api-version=2025-07-01";

fn path_of(url: &str) -> String {
    url.strip_prefix("http://cairn.test")
        .unwrap_or(url)
        .to_owned()
}

fn template(vaults: &[&str]) -> Value {
    let resources: Vec<Value> = vaults
        .iter()
        .map(|name| {
            json!({"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": name,
                   "location": "local", "properties": {}})
        })
        .collect();
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": resources
    })
}

fn what_if_body(stack: &str, vaults: &[&str], action: &str) -> String {
    what_if_body_kept_for(stack, vaults, action, "P7D")
}

fn what_if_body_kept_for(stack: &str, vaults: &[&str], action: &str, retention: &str) -> String {
    json!({"properties": {
        "deploymentStackResourceId": stack,
        "retentionInterval": retention,
        "template": template(vaults),
        "actionOnUnmanage": {"resources": action},
        "denySettings": {"mode": "none"}
    }})
    .to_string()
}

fn change_types(result: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = result["properties"]["changes"]["resourceChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["id"]
                    .as_str()
                    .and_then(|id| id.rsplit('/').next())
                    .unwrap_or("")
                    .to_owned(),
                c["changeType"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    found.sort();
    found
}

async fn make_group(app: &TestApp, name: &str) {
    let answer = call(
        &app.router,
        "PUT",
        &format!("{SUB}/resourcegroups/{name}?api-version=2025-04-01"),
        Some(json!({"location": "local"}).to_string()),
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_results_over_the_api() {
    let app = TestApp::new().await;
    make_group(&app, "wi").await;
    let rg = format!("{SUB}/resourceGroups/wi");
    let stack = format!("{rg}/providers/Microsoft.Resources/deploymentStacks/st");
    let result = format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/r1");

    // First deploy of a stack that does not exist: everything is created.
    let put = call(
        &app.router,
        "PUT",
        &format!("{result}?{V}"),
        Some(what_if_body(&stack, &["v1", "v2"], "delete")),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    assert_eq!(
        change_types(&put.json),
        vec![
            ("v1".into(), "create".into()),
            ("v2".into(), "create".into())
        ]
    );
    assert_eq!(
        put.json["type"],
        "Microsoft.Resources/deploymentStacksWhatIfResults"
    );
    let status_url = put.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    let status = call(&app.router, "GET", &path_of(&status_url), None, None).await;
    assert_eq!(status.status.as_u16(), 200, "{}", status.text);
    assert_eq!(status.json["status"], "Succeeded");

    let get = call(&app.router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(get.status.as_u16(), 200);
    assert_eq!(get.json, put.json);
    let list = call(
        &app.router,
        "GET",
        &format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        list.json["value"].as_array().map(Vec::len),
        Some(1),
        "{}",
        list.text
    );

    // Deploy the stack, then ask what dropping v2 would do with detach.
    let put_stack = call(
        &app.router,
        "PUT",
        &format!("{stack}?{V}"),
        Some(
            json!({"properties": {"template": template(&["v1", "v2"]),
                   "actionOnUnmanage": {"resources": "delete"}, "denySettings": {"mode": "none"}}})
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(put_stack.status.as_u16(), 201, "{}", put_stack.text);
    let stack_status = put_stack.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    for _ in 0..400 {
        let answer = call(&app.router, "GET", &path_of(&stack_status), None, None).await;
        if answer.json["status"] != "Running" {
            assert_eq!(answer.json["status"], "Succeeded", "{}", answer.text);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let replaced = call(
        &app.router,
        "PUT",
        &format!("{result}?{V}"),
        Some(what_if_body(&stack, &["v1"], "detach")),
        None,
    )
    .await;
    assert_eq!(replaced.status.as_u16(), 200, "{}", replaced.text);
    assert_eq!(
        change_types(&replaced.json),
        vec![
            ("v1".into(), "noChange".into()),
            ("v2".into(), "detach".into())
        ]
    );
    let rerun = call(
        &app.router,
        "POST",
        &format!("{result}/whatIf?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(rerun.status.as_u16(), 200, "{}", rerun.text);
    assert_eq!(change_types(&rerun.json), change_types(&replaced.json));

    let delete = call(&app.router, "DELETE", &format!("{result}?{V}"), None, None).await;
    assert_eq!(delete.status.as_u16(), 200);
    let again = call(&app.router, "DELETE", &format!("{result}?{V}"), None, None).await;
    assert_eq!(again.status.as_u16(), 204);
    let gone = call(&app.router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(gone.status.as_u16(), 404);
    assert_eq!(
        gone.json["error"]["code"],
        "DeploymentStacksWhatIfResultNotFound"
    );
}

/// The names in a what-if LIST answer.
fn listed_names(answer: &Answer) -> Vec<String> {
    answer.json["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_results_expire_after_their_retention_interval() {
    let app = TestApp::new().await;
    make_group(&app, "ex").await;
    let rg = format!("{SUB}/resourceGroups/ex");
    let stack = format!("{rg}/providers/Microsoft.Resources/deploymentStacks/st");
    let results = format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults");
    for (name, retention) in [("short", "PT1S"), ("long", "P1D")] {
        let put = call(
            &app.router,
            "PUT",
            &format!("{results}/{name}?{V}"),
            Some(what_if_body_kept_for(&stack, &["v1"], "delete", retention)),
            None,
        )
        .await;
        assert_eq!(put.status.as_u16(), 201, "{}", put.text);
        assert_eq!(put.json["properties"]["retentionInterval"], retention);
    }
    let short = format!("{results}/short");
    let live = call(&app.router, "GET", &format!("{short}?{V}"), None, None).await;
    assert_eq!(live.status.as_u16(), 200, "{}", live.text);
    // Paged: one per page, the nextLink carries the rest.
    let first = call(
        &app.router,
        "GET",
        &format!("{results}?{V}&$top=1"),
        None,
        None,
    )
    .await;
    assert_eq!(listed_names(&first), ["long"], "{}", first.text);
    let next = first.json["nextLink"]
        .as_str()
        .expect("a nextLink")
        .to_owned();
    let second = call(&app.router, "GET", &path_of(&next), None, None).await;
    assert_eq!(listed_names(&second), ["short"], "{}", second.text);
    assert!(second.json["nextLink"].is_null(), "{}", second.text);

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let gone = call(&app.router, "GET", &format!("{short}?{V}"), None, None).await;
    assert_eq!(gone.status.as_u16(), 404, "{}", gone.text);
    assert_eq!(
        gone.json["error"]["code"],
        "DeploymentStacksWhatIfResultNotFound"
    );
    let list = call(&app.router, "GET", &format!("{results}?{V}"), None, None).await;
    assert_eq!(listed_names(&list), ["long"], "{}", list.text);
    let rerun = call(
        &app.router,
        "POST",
        &format!("{short}/whatIf?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(rerun.status.as_u16(), 404, "{}", rerun.text);
    let delete = call(&app.router, "DELETE", &format!("{short}?{V}"), None, None).await;
    assert_eq!(delete.status.as_u16(), 204, "{}", delete.text);
    let long = call(
        &app.router,
        "GET",
        &format!("{results}/long?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(long.status.as_u16(), 200, "{}", long.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_retention_interval_is_400() {
    let app = TestApp::new().await;
    make_group(&app, "bad").await;
    let rg = format!("{SUB}/resourceGroups/bad");
    let stack = format!("{rg}/providers/Microsoft.Resources/deploymentStacks/st");
    let result = format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/r");
    for retention in ["a week", "P1M", "PT0S", "P1DT"] {
        let put = call(
            &app.router,
            "PUT",
            &format!("{result}?{V}"),
            Some(what_if_body_kept_for(&stack, &["v1"], "delete", retention)),
            None,
        )
        .await;
        assert_eq!(put.status.as_u16(), 400, "{retention}: {}", put.text);
        assert_eq!(put.json["error"]["code"], "InvalidRetentionInterval");
        assert_eq!(
            put.json["error"]["target"], "properties.retentionInterval",
            "{}",
            put.text
        );
    }
    let get = call(&app.router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(get.status.as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_at_management_group_scope() {
    let app = TestApp::new().await;
    let root = tempfile::tempdir().expect("root");
    let mg = "/providers/Microsoft.Management/managementGroups/mg1";
    let stack = format!("{mg}/providers/Microsoft.Resources/deploymentStacks/st");
    let result = format!("{mg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/r1");
    let body = json!({"location": "westus", "properties": {
        "deploymentStackResourceId": stack,
        "retentionInterval": "P1D",
        "template": {
            "$schema": "https://schema.management.azure.com/schemas/2019-08-01/managementGroupDeploymentTemplate.json#",
            "languageVersion": "2.2-experimental",
            "contentVersion": "1.0.0.0",
            "extensions": {"local": {"name": "Local", "version": "1.0.0",
                                     "config": {"rootDirectory": {"type": "string"}}}},
            "resources": {"note": {"extension": "local", "type": "File", "apiVersion": "1.0.0",
                                   "properties": {"path": "note.txt", "content": "hello"}}}
        },
        "extensionConfigs": {"local": {"rootDirectory": {"value": root.path().to_string_lossy()}}},
        "actionOnUnmanage": {"resources": "delete"},
        "denySettings": {"mode": "none"}
    }});
    let put = call(
        &app.router,
        "PUT",
        &format!("{result}?{V}"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let changes = put.json["properties"]["changes"]["resourceChanges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(changes.len(), 1, "{}", put.text);
    assert_eq!(changes[0]["changeType"], "create");
    assert_eq!(changes[0]["identifiers"]["path"], "note.txt");
    assert_eq!(put.json["id"], result);
    assert_eq!(put.json["properties"]["deploymentScope"], mg);
    assert!(
        !root.path().join("note.txt").exists(),
        "a what-if runs nothing"
    );
    let get = call(&app.router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(get.json, put.json);
    let list = call(
        &app.router,
        "GET",
        &format!("{mg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(listed_names(&list), ["r1"], "{}", list.text);
    let rerun = call(
        &app.router,
        "POST",
        &format!("{result}/whatIf?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(rerun.status.as_u16(), 200, "{}", rerun.text);
    let delete = call(&app.router, "DELETE", &format!("{result}?{V}"), None, None).await;
    assert_eq!(delete.status.as_u16(), 200);
    // The tenant is no stack scope (not routed, or refused as an unsupported scope).
    let tenant = call(
        &app.router,
        "GET",
        &format!("/providers/Microsoft.Resources/deploymentStacksWhatIfResults/r1?{V}"),
        None,
        None,
    )
    .await;
    assert!(tenant.status.is_client_error(), "{}", tenant.text);
}

/// An app with a stack service over a SQLite store in `dir` (the same data directory after a restart).
async fn app_over(dir: &std::path::Path) -> (Router, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir).await.expect("store"));
    let host = common::host();
    let engine = common::engine(store.clone(), host.clone());
    let state = AppState::new(engine.clone())
        .with_options(ServerOptions {
            retry_after_seconds: 0,
            allowed_hosts: vec!["cairn.test".into()],
            ..ServerOptions::default()
        })
        .with_extension_host(host.clone())
        .with_stack_service(cairn_stack_service::StackService::new(
            engine,
            store.clone(),
            host,
            Providers::empty(),
            cairn_stack_service::StackServiceSettings::default(),
        ));
    (cairn_server::app(state), store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_results_survive_a_restart_without_plaintext_secrets() {
    const CANARY: &str = "api-what-if-canary-81c2aa07";
    let dir = tempfile::tempdir().expect("data dir");
    let (router, store) = app_over(dir.path()).await;
    let group = call(
        &router,
        "PUT",
        &format!("{SUB}/resourcegroups/rs?api-version=2025-04-01"),
        Some(json!({"location": "local"}).to_string()),
        None,
    )
    .await;
    assert!(group.status.is_success(), "{}", group.text);
    let rg = format!("{SUB}/resourceGroups/rs");
    let result = format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/kept");
    let mut secured = template(&["v1"]);
    secured["parameters"] = json!({"adminPassword": {"type": "secureString"}});
    let body = json!({"properties": {
        "deploymentStackResourceId": format!("{rg}/providers/Microsoft.Resources/deploymentStacks/st"),
        "retentionInterval": "P7D",
        "template": secured,
        "parameters": {"adminPassword": {"value": CANARY}},
        "actionOnUnmanage": {"resources": "delete"},
        "denySettings": {"mode": "none"}
    }});
    let put = call(
        &router,
        "PUT",
        &format!("{result}?{V}"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    assert!(!put.text.contains(CANARY), "{}", put.text);
    assert!(
        files_containing(dir.path(), CANARY.as_bytes()).is_empty(),
        "the secure parameter value is on disk in plaintext"
    );
    assert!(
        !files_containing(dir.path(), b"deploymentStacksWhatIfResults/kept").is_empty(),
        "the scan sees the stored result"
    );
    drop(router);
    store.close().await.expect("close");
    drop(store);

    let (router, store) = app_over(dir.path()).await;
    let get = call(&router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(get.status.as_u16(), 200, "{}", get.text);
    assert_eq!(get.json, put.json);
    let rerun = call(&router, "POST", &format!("{result}/whatIf?{V}"), None, None).await;
    assert_eq!(rerun.status.as_u16(), 200, "{}", rerun.text);
    assert_eq!(change_types(&rerun.json), change_types(&put.json));
    assert!(!rerun.text.contains(CANARY));
    store.close().await.expect("close");
    assert!(
        files_containing(dir.path(), CANARY.as_bytes()).is_empty(),
        "the secure parameter value is on disk in plaintext after checkpoint"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_over_the_api() {
    let app = TestApp::new().await;
    make_group(&app, "bd").await;
    let vault = format!("{SUB}/resourceGroups/bd/providers/Microsoft.KeyVault/vaults/doomed");
    let made = call(
        &app.router,
        "PUT",
        &format!("{vault}?api-version=2023-07-01"),
        Some(json!({"location": "local", "properties": {}}).to_string()),
        None,
    )
    .await;
    assert!(made.status.is_success(), "{}", made.text);
    let bulk = format!("{SUB}/providers/Microsoft.Resources/bulkDelete");
    let missing = format!("{SUB}/resourceGroups/bd/providers/Microsoft.KeyVault/vaults/never");
    let answer = call(
        &app.router,
        "POST",
        &format!("{bulk}?{V}"),
        Some(
            json!({"resources": [
                {"id": vault, "apiVersion": "2023-07-01"},
                {"id": missing, "apiVersion": "2023-07-01"},
                {"extension": {"name": "Nope", "version": "1.0.0"}, "type": "thing", "identifiers": {"name": "x"}}
            ]})
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    let statuses: Vec<&str> = answer.json["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        statuses,
        vec!["deleted", "notFound", "failed"],
        "{}",
        answer.text
    );
    assert!(answer.json["value"][2]["error"]["code"].is_string());
    let after = call(
        &app.router,
        "GET",
        &format!("{vault}?api-version=2023-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(after.status.as_u16(), 404);

    let other = call(
        &app.router,
        "POST",
        &format!("{bulk}?{V}"),
        Some(json!({"resources": [{"id": "/subscriptions/other/resourceGroups/x/providers/Microsoft.KeyVault/vaults/v"}]}).to_string()),
        None,
    )
    .await;
    assert_eq!(other.status.as_u16(), 400);
    assert_eq!(other.json["error"]["code"], "InvalidBulkDeleteEntry");
    let no_version = call(
        &app.router,
        "POST",
        &bulk,
        Some("{\"resources\": []}".into()),
        None,
    )
    .await;
    assert_eq!(
        no_version.json["error"]["code"],
        "MissingApiVersionParameter"
    );
    let wrong_method = call(&app.router, "GET", &format!("{bulk}?{V}"), None, None).await;
    assert_eq!(wrong_method.status.as_u16(), 405);
}

/// A large bulk delete (more than 20 entries) is an ARM long-running operation: 202 at once with
/// `Azure-AsyncOperation` (Running → Succeeded) and `Location` (202 while running, then the per-entry results).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_bulk_delete_runs_as_a_long_running_operation() {
    let app = TestApp::new().await;
    make_group(&app, "big").await;
    let vault = format!("{SUB}/resourceGroups/big/providers/Microsoft.KeyVault/vaults/doomed");
    let made = call(
        &app.router,
        "PUT",
        &format!("{vault}?api-version=2023-07-01"),
        Some(json!({"location": "local", "properties": {}}).to_string()),
        None,
    )
    .await;
    assert!(made.status.is_success(), "{}", made.text);
    let mut resources = vec![json!({"id": vault, "apiVersion": "2023-07-01"})];
    resources.extend((0..20).map(|i| {
        json!({"id": format!("{SUB}/resourceGroups/big/providers/Microsoft.KeyVault/vaults/never{i}"),
               "apiVersion": "2023-07-01"})
    }));
    let bulk = format!("{SUB}/providers/Microsoft.Resources/bulkDelete?{V}");
    let accepted = call(
        &app.router,
        "POST",
        &bulk,
        Some(json!({ "resources": resources }).to_string()),
        None,
    )
    .await;
    assert_eq!(accepted.status.as_u16(), 202, "{}", accepted.text);
    let status_url = path_of(accepted.headers["azure-asyncoperation"].to_str().unwrap());
    assert!(
        status_url.starts_with(&format!(
            "{SUB}/providers/Microsoft.Resources/bulkDelete/operationStatuses/"
        )),
        "{status_url}"
    );
    let location = path_of(accepted.headers["location"].to_str().unwrap());
    assert!(
        location.starts_with(&format!("{SUB}/operationresults/")),
        "{location}"
    );
    assert!(accepted.headers.contains_key("retry-after"));

    let mut last = Value::Null;
    for _ in 0..200 {
        let polled = call(&app.router, "GET", &status_url, None, None).await;
        assert_eq!(polled.status.as_u16(), 200, "{}", polled.text);
        last = polled.json;
        if last["status"] != "Running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(last["status"], "Succeeded", "{last}");
    let result = call(&app.router, "GET", &location, None, None).await;
    assert_eq!(result.status.as_u16(), 200, "{}", result.text);
    let statuses: Vec<&str> = result.json["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(statuses.len(), 21);
    assert_eq!(statuses[0], "deleted");
    assert!(
        statuses[1..].iter().all(|s| *s == "notFound"),
        "{statuses:?}"
    );
    let gone = call(
        &app.router,
        "GET",
        &format!("{vault}?api-version=2023-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(gone.status.as_u16(), 404);
    let unknown = call(
        &app.router,
        "GET",
        &format!(
            "{SUB}/providers/Microsoft.Resources/bulkDelete/operationStatuses/bulkdelete-nope?{V}"
        ),
        None,
        None,
    )
    .await;
    assert_eq!(unknown.status.as_u16(), 404);
    assert_eq!(unknown.json["error"]["code"], "OperationNotFound");
}

/// Seed 003's body (a bare array, `import` entries) over the API; its `UserProvided` auth is refused up front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_takes_the_gists_body_and_refuses_raw_credentials() {
    let app = TestApp::new().await;
    let bulk = format!("{SUB}/providers/Microsoft.Resources/bulkDelete?{V}");
    let missing = format!("{SUB}/resourceGroups/bd/providers/Microsoft.KeyVault/vaults/never");
    let answer = call(
        &app.router,
        "POST",
        &bulk,
        Some(json!([{"id": missing, "apiVersion": "2023-07-01"}]).to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    assert_eq!(answer.json["value"][0]["status"], "notFound");

    let refused = call(
        &app.router,
        "POST",
        &bulk,
        Some(
            json!([{"import": {"provider": "Kubernetes", "version": "0.1",
                               "config": {"cluster": "c1", "auth": {"type": "UserProvided", "kubeConfig": "raw-kubeconfig-55e1"}}},
                    "type": "apps/Deployment", "apiVersion": "v1",
                    "id": "cluster/c1/metadata.namespace/default/metadata.name/foo"}])
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.text);
    assert_eq!(refused.json["error"]["code"], "InvalidStackExtensionConfig");
    assert_eq!(
        refused.json["error"]["target"],
        "resources[0].import.config.auth"
    );
    assert!(
        !refused.text.contains("raw-kubeconfig-55e1"),
        "{}",
        refused.text
    );
}

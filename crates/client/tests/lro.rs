//! The client against a scripted ARM server on loopback: `Location` and `Azure-AsyncOperation` polling with
//! `Retry-After` kept within the polling bounds, `nextLink` pages, nested operations reported to the watcher, the
//! headers and query every request carries, and the typed errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use cairn_arm::models::stack::{
    ActionOnUnmanage, ResourcesWithoutDeleteSupportAction, StackDeleteOptions,
};
use cairn_client::{Client, ClientError, DeploymentWatcher, Polling};
use serde_json::{Value, json};

const RG: &str = "/subscriptions/s/resourceGroups/rg";

/// One request the server saw.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    authorization: Option<String>,
    request_id: Option<String>,
    prefer: Option<String>,
}

#[derive(Default)]
struct Script {
    base: String,
    seen: Vec<Seen>,
    /// How many times each path was answered.
    calls: HashMap<String, usize>,
}

type Shared = Arc<Mutex<Script>>;

fn json_answer(status: StatusCode, body: Value, headers: &[(&'static str, String)]) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(*name, value.parse().expect("header value"));
    }
    response
}

fn operation(target_type: &str, id: &str) -> Value {
    json!({"properties": {"provisioningState": "Succeeded",
        "targetResource": {"resourceType": target_type, "id": id}}})
}

/// The scripted server: every route the tests use, answered by path and by how often it was called.
async fn answer(
    State(script): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    _body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let path = uri.path().to_string();
    let (base, call) = {
        let mut s = script.lock().unwrap();
        s.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            query: uri.query().unwrap_or_default().to_string(),
            authorization: header("authorization"),
            request_id: header("x-ms-client-request-id"),
            prefer: header("prefer"),
        });
        let count = s.calls.entry(format!("{method} {path}")).or_default();
        *count += 1;
        let count = *count;
        (s.base.clone(), count)
    };
    let deployments = format!("{RG}/providers/Microsoft.Resources/deployments");
    let stacks = format!("{RG}/providers/Microsoft.Resources/deploymentStacks");
    match (method.as_str(), path.as_str()) {
        ("PUT", RG) => json_answer(StatusCode::CREATED, json!({"id": RG, "name": "rg"}), &[]),
        ("GET", RG) => json_answer(StatusCode::OK, json!({"id": RG, "name": "rg"}), &[]),
        // A plain http server that moved: to another http address, and to https.
        ("GET", "/subscriptions/moved/resourceGroups/rg") => json_answer(
            StatusCode::TEMPORARY_REDIRECT,
            Value::Null,
            &[("location", format!("{base}{RG}"))],
        ),
        ("GET", "/subscriptions/secure/resourceGroups/rg") => json_answer(
            StatusCode::TEMPORARY_REDIRECT,
            Value::Null,
            &[(
                "location",
                format!("https://127.0.0.1:1{RG}?token=not-for-errors"),
            )],
        ),
        ("DELETE", RG) => json_answer(
            StatusCode::ACCEPTED,
            Value::Null,
            &[
                ("location", format!("{base}/operations/delete-rg")),
                // Far above the client's bounds: the test would take minutes if it were obeyed.
                ("retry-after", "600".into()),
            ],
        ),
        ("GET", "/operations/delete-rg") if call < 3 => json_answer(
            StatusCode::ACCEPTED,
            Value::Null,
            &[
                ("location", format!("{base}/operations/delete-rg")),
                ("retry-after", "0".into()),
            ],
        ),
        ("GET", "/operations/delete-rg") => json_answer(StatusCode::OK, json!({}), &[]),
        ("PUT", p) if p == format!("{deployments}/app") => json_answer(
            StatusCode::CREATED,
            json!({"name": "app", "properties": {"provisioningState": "Running"}}),
            &[
                ("azure-asyncoperation", format!("{base}/status/app")),
                ("retry-after", "0".into()),
            ],
        ),
        // A server that holds a status poll asked to wait (`Prefer: wait=N`) and says so.
        ("PUT", p) if p == format!("{deployments}/held") => json_answer(
            StatusCode::CREATED,
            json!({"name": "held", "properties": {"provisioningState": "Running"}}),
            &[
                ("azure-asyncoperation", format!("{base}/status/held")),
                ("retry-after", "2".into()),
            ],
        ),
        ("GET", "/status/held") => {
            let status = if call < 3 { "Running" } else { "Succeeded" };
            let applied: Vec<(&'static str, String)> = header("prefer")
                .filter(|prefer| prefer == "wait=1")
                .map(|_| vec![("preference-applied", "wait=1".to_string())])
                .unwrap_or_default();
            json_answer(StatusCode::OK, json!({"status": status}), &applied)
        }
        ("GET", p) if p == format!("{deployments}/held") => json_answer(
            StatusCode::OK,
            json!({"name": "held", "properties": {"provisioningState": "Succeeded"}}),
            &[],
        ),
        ("GET", "/status/app") => {
            let status = if call < 3 { "Running" } else { "Succeeded" };
            json_answer(StatusCode::OK, json!({"status": status}), &[])
        }
        ("GET", p) if p == format!("{deployments}/app") => json_answer(
            StatusCode::OK,
            json!({"name": "app", "properties": {"provisioningState": "Succeeded", "duration": "PT1S"}}),
            &[],
        ),
        ("GET", p) if p == format!("{deployments}/app/operations") => {
            if uri.query().is_some_and(|q| q.contains("page=2")) {
                // The nested deployment runs during the first poll (pages 1 and 2) and has ended after.
                let mut child = operation(
                    "Microsoft.Resources/deployments",
                    &format!("{deployments}/child"),
                );
                if call <= 2 {
                    child["properties"]["provisioningState"] = json!("Running");
                }
                json_answer(StatusCode::OK, json!({"value": [child]}), &[])
            } else {
                json_answer(
                    StatusCode::OK,
                    json!({"value": [operation("Microsoft.KeyVault/vaults", "/v")],
                           "nextLink": format!("{base}{deployments}/app/operations?api-version=2025-04-01&page=2")}),
                    &[],
                )
            }
        }
        ("GET", p) if p == format!("{deployments}/child/operations") => json_answer(
            StatusCode::OK,
            json!({"value": [operation("Microsoft.KeyVault/vaults", "/w")]}),
            &[],
        ),
        // Its nested deployment ends, runs again (a resumed run) and ends again; one read of it fails.
        ("PUT", p) if p == format!("{deployments}/again") => json_answer(
            StatusCode::CREATED,
            json!({"name": "again", "properties": {"provisioningState": "Running"}}),
            &[
                ("azure-asyncoperation", format!("{base}/status/again")),
                ("retry-after", "0".into()),
            ],
        ),
        ("GET", "/status/again") => {
            let status = if call < 4 { "Running" } else { "Succeeded" };
            json_answer(StatusCode::OK, json!({"status": status}), &[])
        }
        ("GET", p) if p == format!("{deployments}/again") => json_answer(
            StatusCode::OK,
            json!({"name": "again", "properties": {"provisioningState": "Succeeded"}}),
            &[],
        ),
        ("GET", p) if p == format!("{deployments}/again/operations") => {
            let mut child = operation(
                "Microsoft.Resources/deployments",
                &format!("{deployments}/again-child"),
            );
            if call == 2 {
                child["properties"]["provisioningState"] = json!("Running");
            }
            json_answer(StatusCode::OK, json!({"value": [child]}), &[])
        }
        ("GET", p) if p == format!("{deployments}/again-child/operations") => {
            if call == 3 {
                StatusCode::SERVICE_UNAVAILABLE.into_response()
            } else {
                json_answer(
                    StatusCode::OK,
                    json!({"value": [operation("Microsoft.KeyVault/vaults", "/x")]}),
                    &[],
                )
            }
        }
        // No status URL: the record itself is polled.
        ("PUT", p) if p == format!("{deployments}/plain") => json_answer(
            StatusCode::CREATED,
            json!({"properties": {"provisioningState": "Accepted"}}),
            &[("retry-after", "0".into())],
        ),
        ("GET", p) if p == format!("{deployments}/plain") => {
            let state = if call < 3 { "Running" } else { "Failed" };
            json_answer(
                StatusCode::OK,
                json!({"properties": {"provisioningState": state}}),
                &[],
            )
        }
        ("GET", p) if p == format!("{deployments}/plain/operations") => {
            json_answer(StatusCode::OK, json!({"value": []}), &[])
        }
        ("GET", p) if p == format!("{deployments}/broken") => {
            (StatusCode::OK, "<html>not json</html>").into_response()
        }
        ("GET", p) if p == format!("{deployments}/crash") => {
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        ("DELETE", p) if p == format!("{stacks}/gone") => StatusCode::NO_CONTENT.into_response(),
        ("DELETE", p) if p == format!("{stacks}/app") => json_answer(
            StatusCode::ACCEPTED,
            Value::Null,
            &[("retry-after", "7".into())],
        ),
        ("PUT", p)
            if p == format!(
                "{RG}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/w"
            ) =>
        {
            json_answer(
                StatusCode::CREATED,
                json!({"properties": {"provisioningState": "Running"}}),
                &[("retry-after", "0".into())],
            )
        }
        ("GET", p)
            if p == format!(
                "{RG}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/w"
            ) =>
        {
            let state = if call < 2 { "Running" } else { "Succeeded" };
            json_answer(
                StatusCode::OK,
                json!({"properties": {"provisioningState": state, "changes": {}}}),
                &[],
            )
        }
        _ => json_answer(
            StatusCode::NOT_FOUND,
            json!({"error": {"code": "DeploymentNotFound", "message": format!("no {path}")}}),
            &[],
        ),
    }
}

/// Starts the scripted server; the client polls fast (10 ms without `Retry-After`, at most 20 ms).
async fn start() -> (Client, Shared) {
    let script: Shared = Arc::default();
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    script.lock().unwrap().base = base.clone();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = Client::builder(base)
        .bearer_token("test-token")
        .polling(FAST_POLLING)
        .build()
        .unwrap();
    (client, script)
}

/// Polls 10 ms apart without `Retry-After`, at most 20 ms.
const FAST_POLLING: Polling = Polling {
    default: Duration::from_millis(10),
    min: Duration::from_millis(1),
    max: Duration::from_millis(20),
};

fn calls(script: &Shared, key: &str) -> usize {
    script.lock().unwrap().calls.get(key).copied().unwrap_or(0)
}

#[derive(Default)]
struct Recorded {
    operations: Vec<(String, usize, usize)>,
    ticks: usize,
}

impl DeploymentWatcher for Recorded {
    fn operations(&mut self, deployment: &str, depth: usize, operations: &[Value]) {
        self.operations
            .push((deployment.to_string(), depth, operations.len()));
    }

    fn tick(&mut self) {
        self.ticks += 1;
    }
}

fn deployment_request() -> cairn_arm::models::deployment::Deployment {
    serde_json::from_value(json!({"properties": {"mode": "Incremental", "template": {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0", "resources": []}}}))
    .unwrap()
}

#[tokio::test]
async fn a_202_location_is_polled_until_it_ends_within_the_polling_bounds() {
    let (client, script) = start().await;
    let started = Instant::now();
    client.delete_group(RG).await.unwrap();
    assert_eq!(calls(&script, "GET /operations/delete-rg"), 3);
    // Retry-After: 600 was held to the client's 20 ms bound.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_deployment_is_followed_by_its_async_operation_and_the_watcher_sees_nested_operations() {
    let (client, script) = start().await;
    let accepted = client
        .create_deployment(RG, "app", &deployment_request())
        .await
        .unwrap();
    assert_eq!(accepted.status, cairn_client::StatusCode::CREATED);
    assert!(accepted.async_operation.is_some());
    assert_eq!(accepted.retry_after, Some(Duration::ZERO));
    let mut watcher = Recorded::default();
    let record = client
        .wait_for_deployment(RG, "app", &accepted, &mut watcher)
        .await
        .unwrap();
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    assert_eq!(calls(&script, "GET /status/app"), 3);
    // After each of the three polls: the root's two operations (two pages), then the nested deployment's one —
    // while it runs, and once more after it ended; then it is not read again.
    let root = ("app".to_string(), 0, 2);
    let child = ("child".to_string(), 1, 1);
    let expected = vec![root.clone(), child.clone(), root.clone(), child, root];
    assert_eq!(watcher.operations, expected);
    assert_eq!(
        calls(
            &script,
            &format!("GET {RG}/providers/Microsoft.Resources/deployments/child/operations")
        ),
        2
    );
    assert_eq!(
        watcher.ticks, 2,
        "a tick after each wait, none after the last poll"
    );
}

/// A watcher shown operations at most once an hour.
#[derive(Default)]
struct Hourly(Recorded);

impl DeploymentWatcher for Hourly {
    fn operations(&mut self, deployment: &str, depth: usize, operations: &[Value]) {
        self.0.operations(deployment, depth, operations);
    }

    fn operations_interval(&self) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }
}

#[tokio::test]
async fn operations_are_listed_as_often_as_the_watcher_asks_and_once_the_deployment_has_ended() {
    let (client, script) = start().await;
    let accepted = client
        .create_deployment(RG, "app", &deployment_request())
        .await
        .unwrap();
    let mut watcher = Hourly::default();
    let record = client
        .wait_for_deployment(RG, "app", &accepted, &mut watcher)
        .await
        .unwrap();
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    assert_eq!(calls(&script, "GET /status/app"), 3);
    // The first poll's listing, none at the second, and the last once the deployment ended (the nested one had
    // not ended at the first, so it is read again).
    let root = ("app".to_string(), 0, 2);
    let child = ("child".to_string(), 1, 1);
    assert_eq!(
        watcher.0.operations,
        vec![root.clone(), child.clone(), root, child]
    );
    // Two listings of two pages each.
    assert_eq!(
        calls(
            &script,
            &format!("GET {RG}/providers/Microsoft.Resources/deployments/app/operations")
        ),
        4
    );
}

#[tokio::test]
async fn a_status_poll_the_server_held_is_not_followed_by_a_wait() {
    let (_, script) = start().await;
    let base = script.lock().unwrap().base.clone();
    // Waits of two seconds between polls, whatever the server says: three polls would take four seconds.
    let client = Client::builder(base)
        .polling(Polling {
            default: Duration::from_secs(2),
            min: Duration::from_secs(2),
            max: Duration::from_secs(2),
        })
        .build()
        .unwrap();
    let accepted = client
        .create_deployment(RG, "held", &deployment_request())
        .await
        .unwrap();
    let started = Instant::now();
    let record = client
        .wait_for_deployment(RG, "held", &accepted, &mut ())
        .await
        .unwrap();
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    assert_eq!(calls(&script, "GET /status/held"), 3);
    assert!(started.elapsed() < Duration::from_millis(1500));
    // A watcher shown operations at every poll is not held: it polls at the client's pace.
    let accepted = client
        .create_deployment(RG, "app", &deployment_request())
        .await
        .unwrap();
    let fast = Client::builder(script.lock().unwrap().base.clone())
        .polling(FAST_POLLING)
        .build()
        .unwrap();
    fast.wait_for_deployment(RG, "app", &accepted, &mut Recorded::default())
        .await
        .unwrap();
    let seen = script.lock().unwrap().seen.clone();
    let prefer = |path: &str| -> Vec<Option<String>> {
        seen.iter()
            .filter(|s| s.path == path)
            .map(|s| s.prefer.clone())
            .collect()
    };
    assert_eq!(prefer("/status/held"), vec![Some("wait=1".to_string()); 3]);
    assert_eq!(prefer("/status/app"), vec![None; 3]);
}

#[tokio::test]
async fn a_nested_deployment_is_read_again_when_it_runs_again_or_its_last_read_failed() {
    let (client, script) = start().await;
    let accepted = client
        .create_deployment(RG, "again", &deployment_request())
        .await
        .unwrap();
    let mut watcher = Recorded::default();
    client
        .wait_for_deployment(RG, "again", &accepted, &mut watcher)
        .await
        .unwrap();
    assert_eq!(calls(&script, "GET /status/again"), 4);
    // Poll 1: ended and read (settled); poll 2: running again, read; poll 3: ended, its read fails; poll 4: read,
    // settled.
    assert_eq!(
        calls(
            &script,
            &format!("GET {RG}/providers/Microsoft.Resources/deployments/again-child/operations")
        ),
        4
    );
    let child = ("again-child".to_string(), 1, 1);
    assert_eq!(
        watcher
            .operations
            .iter()
            .filter(|seen| **seen == child)
            .count(),
        3,
        "{:?}",
        watcher.operations
    );
}

#[tokio::test]
async fn without_a_status_url_the_deployment_record_is_polled() {
    let (client, script) = start().await;
    let accepted = client
        .create_deployment(RG, "plain", &deployment_request())
        .await
        .unwrap();
    assert!(accepted.async_operation.is_none());
    let record = client
        .wait_for_deployment(RG, "plain", &accepted, &mut ())
        .await
        .unwrap();
    assert_eq!(record["properties"]["provisioningState"], "Failed");
    // Three polls until terminal, then the final read.
    assert_eq!(
        calls(
            &script,
            &format!("GET {RG}/providers/Microsoft.Resources/deployments/plain")
        ),
        4
    );
    // Nobody is shown operations: none were listed.
    assert_eq!(
        calls(
            &script,
            &format!("GET {RG}/providers/Microsoft.Resources/deployments/plain/operations")
        ),
        0
    );
}

#[tokio::test]
async fn a_plain_http_server_is_followed_to_http_and_refused_to_https_with_what_to_do() {
    let (client, script) = start().await;
    let group = client
        .get_group("/subscriptions/moved/resourceGroups/rg")
        .await
        .unwrap();
    assert_eq!(group["id"], RG);
    assert_eq!(calls(&script, &format!("GET {RG}")), 1);
    let error = client
        .get_group("/subscriptions/secure/resourceGroups/rg")
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, ClientError::Unreachable { .. }),
        "{error:?}"
    );
    assert!(
        message.contains(
            "the server redirects to https://127.0.0.1:1: give that address as the server URL"
        ),
        "{message}"
    );
    assert!(!message.contains("not-for-errors"), "{message}");
}

#[tokio::test]
async fn every_request_carries_the_token_a_request_id_and_its_api_version() {
    let (client, script) = start().await;
    client
        .put_group(RG, &json!({"location": "local"}))
        .await
        .unwrap();
    let mut action = ActionOnUnmanage::from_cli_preset("deleteResources").unwrap();
    action.resources_without_delete_support = Some(ResourcesWithoutDeleteSupportAction::Detach);
    let options = StackDeleteOptions {
        action_on_unmanage: action,
        bypass_stack_out_of_sync_error: true,
        bypass_protection: false,
    };
    let accepted = client
        .delete_stack(RG, "app", &options)
        .await
        .unwrap()
        .expect("the stack exists");
    assert_eq!(
        accepted.poll,
        Duration::from_millis(20),
        "Retry-After: 7 within the bounds"
    );
    assert!(
        client
            .delete_stack(RG, "gone", &options)
            .await
            .unwrap()
            .is_none(),
        "204: no such stack"
    );
    let seen = script.lock().unwrap().seen.clone();
    assert_eq!(seen.len(), 3);
    for request in &seen {
        assert_eq!(request.authorization.as_deref(), Some("Bearer test-token"));
        assert!(request.request_id.is_some());
    }
    assert_ne!(seen[0].request_id, seen[1].request_id);
    assert_eq!(seen[0].query, "api-version=2025-04-01");
    assert_eq!(seen[1].method, Method::DELETE);
    assert!(
        seen[1].path.ends_with("/deploymentStacks/app"),
        "{}",
        seen[1].path
    );
    assert_eq!(
        seen[1].query,
        "api-version=2025-07-01&unmanageAction.Resources=delete&unmanageAction.ResourceGroups=detach\
         &unmanageAction.ManagementGroups=detach&unmanageAction.ResourcesWithoutDeleteSupport=detach\
         &bypassStackOutOfSyncError=true"
    );
}

#[tokio::test]
async fn a_stack_what_if_is_followed_until_it_is_terminal() {
    let (client, script) = start().await;
    let request = serde_json::from_value(json!({"properties": {
        "deploymentStackResourceId": format!("{RG}/providers/Microsoft.Resources/deploymentStacks/app"),
        "actionOnUnmanage": {"resources": "detach"},
        "denySettings": {"mode": "none"},
        "retentionInterval": "P1D",
        "template": {"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                     "contentVersion": "1.0.0.0", "resources": []}
    }}))
    .unwrap();
    let result = client.stack_what_if(RG, "w", &request).await.unwrap();
    assert_eq!(result["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        calls(
            &script,
            &format!("GET {RG}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/w")
        ),
        2
    );
}

#[tokio::test]
async fn error_answers_are_typed() {
    let (client, _script) = start().await;
    let missing = client.get_deployment(RG, "missing").await.unwrap_err();
    let arm = missing.arm().expect("an ARM error");
    assert_eq!((arm.status(), arm.code()), (404, "DeploymentNotFound"));
    assert!(missing.is_not_found());

    let crash = client.get_deployment(RG, "crash").await.unwrap_err();
    assert_eq!(crash.status(), Some(500));
    assert_eq!(crash.arm().unwrap().code(), "InternalServerError");

    let broken = client.get_deployment(RG, "broken").await.unwrap_err();
    match &broken {
        ClientError::NotJson { status, path, .. } => {
            assert_eq!(*status, cairn_client::StatusCode::OK);
            assert!(path.ends_with("/deployments/broken"), "{path}");
            assert!(!broken.to_string().contains("api-version"), "{broken}");
        }
        other => panic!("expected NotJson, got {other:?}"),
    }

    let vault = format!("{RG}/providers/Microsoft.KeyVault/vaults/none");
    assert!(!client.vault_exists(&vault).await.unwrap());
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_unreachable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = Client::new(&base).unwrap();
    let error = client.get_group(RG).await.unwrap_err();
    match &error {
        ClientError::Unreachable { base: b, reason } => {
            assert_eq!(b, &base);
            assert!(!reason.is_empty());
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(error.to_string().starts_with("cannot reach the server at"));
}

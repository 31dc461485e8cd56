//! Crash test for deployment stacks: `cairn serve` is killed with SIGKILL while a stack DELETE (unmanage delete)
//! waits on a slow extension, then restarted on the same data directory. With nobody asking, the restarted server
//! takes the interrupted delete over once the dead process's lease has run out and finishes it: the stack is
//! deleted — never stuck in `deleting` — and the extension has seen a delete for every resource the stack managed.
//! A user's DELETE meanwhile is answered 409 (the interrupted operation comes first), not taken as a new one.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::start_server;
use serde_json::{Value, json};

const RESOURCES: usize = 5;
/// How long the extension takes to delete one resource.
const DELETE_LATENCY: Duration = Duration::from_millis(1500);
const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/stackcrash";
const API: &str = "api-version=2024-03-01";

/// A v2 extension whose delete takes `DELETE_LATENCY`. It remembers what exists, which deletes started and which
/// finished.
#[derive(Clone, Default)]
struct SlowDeletes {
    existing: Arc<Mutex<BTreeSet<String>>>,
    deletes_started: Arc<Mutex<Vec<String>>>,
    deletes_finished: Arc<Mutex<BTreeSet<String>>>,
}

fn name_in(body: &Value, pointer: &str) -> String {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn resource(body: &Value, name: &str) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
            "properties": { "name": name } })
}

async fn create(State(s): State<SlowDeletes>, Json(body): Json<Value>) -> Json<Value> {
    let name = name_in(&body, "/properties/name");
    s.existing.lock().unwrap().insert(name.clone());
    Json(resource(&body, &name))
}

async fn preview(Json(body): Json<Value>) -> Json<Value> {
    let name = name_in(&body, "/properties/name");
    Json(resource(&body, &name))
}

async fn get(State(s): State<SlowDeletes>, Json(body): Json<Value>) -> Response {
    let name = name_in(&body, "/identifiers/name");
    if s.existing.lock().unwrap().contains(&name) {
        Json(resource(&body, &name)).into_response()
    } else {
        (
            axum::http::StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
        )
            .into_response()
    }
}

async fn delete(State(s): State<SlowDeletes>, Json(body): Json<Value>) -> axum::http::StatusCode {
    let name = name_in(&body, "/identifiers/name");
    s.deletes_started.lock().unwrap().push(name.clone());
    tokio::time::sleep(DELETE_LATENCY).await;
    s.existing.lock().unwrap().remove(&name);
    s.deletes_finished.lock().unwrap().insert(name);
    axum::http::StatusCode::NO_CONTENT
}

fn stack_template() -> Value {
    let resources: serde_json::Map<String, Value> = (0..RESOURCES)
        .map(|i| {
            (
                format!("r{i}"),
                json!({ "extension": "slow", "type": "Thing", "apiVersion": "v1",
                        "properties": { "name": format!("r{i}") } }),
            )
        })
        .collect();
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "slow": { "name": "Slow", "version": "1.0.0" } },
        "resources": resources
    })
}

/// The stack's provisioning state, or `None` once it is gone (404).
async fn stack_state(client: &reqwest::Client, url: &str) -> Option<String> {
    let resp = client.get(url).send().await.expect("GET the stack");
    if resp.status().as_u16() == 404 {
        return None;
    }
    assert!(
        resp.status().is_success(),
        "GET the stack: {}",
        resp.status()
    );
    let body: Value = resp.json().await.expect("a stack body");
    Some(
        body["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stack_delete_then_restart_deletes_the_stack() {
    let slow = SlowDeletes::default();
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(create))
        .route("/{version}/resource/get", post(get))
        .route("/{version}/resource/preview", post(preview))
        .route("/{version}/resource/delete", post(delete))
        .with_state(slow.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ext_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let registry = dir.path().join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Slow", "version": "1.0.0", "transport": { "kind": "http", "url": ext_url } } ] })
            .to_string(),
    )
    .unwrap();

    let client = reqwest::Client::new();
    let server = start_server(&data_dir, &registry);
    let resp = client
        .put(format!("{}{SCOPE}?api-version=2025-04-01", server.url))
        .json(&json!({ "location": "local" }))
        .send()
        .await
        .unwrap();
    assert!(
        resp.status().is_success(),
        "resource group: {}",
        resp.status()
    );

    let stack_path = format!("{SCOPE}/providers/Microsoft.Resources/deploymentStacks/crashstack");
    let resp = client
        .put(format!("{}{stack_path}?{API}", server.url))
        .json(&json!({ "properties": { "template": stack_template(),
                                       "actionOnUnmanage": { "resources": "detach" },
                                       "denySettings": { "mode": "none" } } }))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert!(
        status == 200 || status == 201,
        "stack PUT: {status} {}",
        resp.text().await.unwrap_or_default()
    );
    let started = Instant::now();
    loop {
        let state = stack_state(&client, &format!("{}{stack_path}?{API}", server.url)).await;
        if state.as_deref() == Some("succeeded") {
            break;
        }
        assert!(
            !matches!(state.as_deref(), Some("failed" | "canceled") | None),
            "the stack did not deploy: {state:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the stack never deployed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let managed = slow.existing.lock().unwrap().clone();
    assert_eq!(managed.len(), RESOURCES, "{managed:?}");

    // DELETE with unmanage delete; kill the server once the extension is busy deleting, before any delete ends.
    let delete_query = "unmanageAction.Resources=delete";
    let resp = client
        .delete(format!("{}{stack_path}?{API}&{delete_query}", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        202,
        "{}",
        resp.text().await.unwrap_or_default()
    );
    let started = Instant::now();
    while slow.deletes_started.lock().unwrap().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the stack delete never reached the extension"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut server = server;
    server.child.kill().expect("SIGKILL");
    server.child.wait().unwrap();
    drop(server);
    assert!(
        slow.deletes_finished.lock().unwrap().len() < RESOURCES,
        "killed too late to test anything"
    );

    // Restart and leave it alone: the interrupted delete must finish by itself.
    let server = start_server(&data_dir, &registry);
    let stack_url = format!("{}{stack_path}?{API}", server.url);
    let resp = client
        .delete(format!("{stack_url}&{delete_query}"))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert!(
        status == 409 && body["error"]["code"] == "DeploymentStackInNonTerminalState"
            || status == 204,
        "a DELETE while the interrupted one is pending: {status} {body}"
    );
    let started = Instant::now();
    let mut states = Vec::new();
    loop {
        let state = stack_state(&client, &stack_url).await;
        if states.last() != Some(&state) {
            states.push(state.clone());
        }
        match state.as_deref() {
            None => break,
            Some("failed" | "canceled" | "succeeded") => {
                panic!(
                    "the interrupted delete ended {state:?} instead of deleting the stack ({states:?})"
                )
            }
            Some(_) => assert!(
                started.elapsed() < Duration::from_secs(60),
                "still not deleted a minute after the restart ({states:?})"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let finished = slow.deletes_finished.lock().unwrap().clone();
    assert_eq!(
        finished, managed,
        "every managed resource is deleted by the extension"
    );
    assert!(slow.existing.lock().unwrap().is_empty());
}

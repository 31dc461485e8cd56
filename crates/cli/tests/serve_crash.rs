//! Crash test: `cairn serve` is killed with SIGKILL in the middle of a deployment against a slow extension, then
//! restarted on the same data directory. The deployment must end (resumed to Succeeded, or Failed), never stay
//! Running, and every resource the extension created must be listed by the deployment's operations.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use common::start_server;
use serde_json::{Value, json};

const RESOURCES: usize = 6;
const LATENCY: Duration = Duration::from_millis(400);

/// A v2 extension whose createOrUpdate takes `LATENCY`; it remembers what it created.
#[derive(Clone, Default)]
struct Slow {
    created: Arc<Mutex<BTreeSet<String>>>,
}

fn resource(body: &Value, name: &str) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
            "properties": body.get("properties").cloned().unwrap_or(json!({})) })
}

async fn create(State(s): State<Slow>, Json(body): Json<Value>) -> Json<Value> {
    tokio::time::sleep(LATENCY).await;
    let name = body["properties"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    s.created.lock().unwrap().insert(name.clone());
    Json(resource(&body, &name))
}

async fn get(State(s): State<Slow>, Json(body): Json<Value>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let name = body["identifiers"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if s.created.lock().unwrap().contains(&name) {
        Json(json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
                     "properties": { "name": name } }))
        .into_response()
    } else {
        (
            axum::http::StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
        )
            .into_response()
    }
}

async fn preview(Json(body): Json<Value>) -> Json<Value> {
    let name = body["properties"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Json(resource(&body, &name))
}

async fn delete() -> axum::http::StatusCode {
    axum::http::StatusCode::NO_CONTENT
}

const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/crash";

fn template() -> Value {
    let mut resources = serde_json::Map::new();
    for i in 0..RESOURCES {
        let mut r = json!({ "extension": "slow", "type": "Thing", "apiVersion": "v1", "properties": { "name": format!("r{i}") } });
        if i > 0 {
            r["dependsOn"] = json!([format!("r{}", i - 1)]);
        }
        resources.insert(format!("r{i}"), r);
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "extensions": { "slow": { "name": "Slow", "version": "1.0.0" } },
        "resources": resources
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_deployment_then_restart_ends_the_deployment() {
    let slow = Slow::default();
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

    let mut server = start_server(&data_dir, &registry);
    let client = cairn_client::Client::new(&server.url).unwrap();
    client
        .put_group(SCOPE, &json!({ "location": "local" }))
        .await
        .expect("resource group");
    let request = serde_json::from_value(
        json!({ "properties": { "mode": "Incremental", "template": template() } }),
    )
    .unwrap();
    let accepted = client
        .create_deployment(SCOPE, "chain", &request)
        .await
        .expect("deployment accepted");
    assert_eq!(accepted.status.as_u16(), 201, "{}", accepted.body);

    // Kill it once some, but not all, resources exist.
    let started = Instant::now();
    while slow.created.lock().unwrap().len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the deployment never started creating resources"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.child.kill().expect("SIGKILL");
    server.child.wait().unwrap();
    let created_before_restart = slow.created.lock().unwrap().len();
    assert!(
        created_before_restart < RESOURCES,
        "killed too late to test anything"
    );

    let mut server = start_server(&data_dir, &registry);
    let client = cairn_client::Client::new(&server.url).unwrap();
    let started = Instant::now();
    let record = loop {
        let body = client
            .get_deployment(SCOPE, "chain")
            .await
            .expect("GET after restart");
        let state = body["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if ["Succeeded", "Failed", "Canceled"].contains(&state.as_str()) {
            break body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still {state} a minute after the restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let state = record["properties"]["provisioningState"].as_str().unwrap();
    assert!(state == "Succeeded" || state == "Failed", "ended {state}");

    // Every resource the extension created is accounted for by the deployment's operations.
    let ops = client
        .deployment_operations(SCOPE, "chain")
        .await
        .expect("operations list");
    let listed: BTreeSet<String> = ops
        .iter()
        .filter_map(|op| {
            let target = &op["properties"]["targetResource"];
            target["identifiers"]["name"]
                .as_str()
                .or_else(|| target["symbolicName"].as_str())
                .map(str::to_string)
        })
        .collect();
    let created = slow.created.lock().unwrap().clone();
    for name in &created {
        assert!(
            listed.contains(name),
            "{name} was created but the operations list only {listed:?}"
        );
    }
    if state == "Succeeded" {
        assert_eq!(created.len(), RESOURCES);
    }
    server.child.kill().ok();
    server.child.wait().ok();
}

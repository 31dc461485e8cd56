//! No crash loops: a deployment whose resource takes `cairn serve` down (here the test kills the server with
//! SIGKILL whenever the poison resource's call arrives) is resumed by the first two restarts and abandoned by the
//! third, which stays up: the deployment ends `Failed` with `DeploymentRecoveryAbandoned` and the poison is not
//! called again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use common::start_server;
use serde_json::{Value, json};

/// A v2 extension: `ok` is created at once; `poison` is counted and never answers (the server dies first).
#[derive(Clone, Default)]
struct Poison {
    hits: Arc<AtomicUsize>,
}

async fn create(State(p): State<Poison>, Json(body): Json<Value>) -> Json<Value> {
    let name = body["properties"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if name == "poison" {
        p.hits.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    Json(
        json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
                 "properties": body.get("properties").cloned().unwrap_or(json!({})) }),
    )
}

async fn not_found() -> (axum::http::StatusCode, Json<Value>) {
    (
        axum::http::StatusCode::NOT_FOUND,
        Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
    )
}

const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/poison";

fn template() -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "extensions": { "p": { "name": "Poison", "version": "1.0.0" } },
        "resources": {
            "ok": { "extension": "p", "type": "Thing", "apiVersion": "v1", "properties": { "name": "ok" } },
            "poison": { "extension": "p", "type": "Thing", "apiVersion": "v1", "properties": { "name": "poison" },
                        "dependsOn": ["ok"] }
        }
    })
}

async fn wait_for_hits(poison: &Poison, n: usize) {
    let started = Instant::now();
    while poison.hits.load(Ordering::SeqCst) < n {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the poison was not called a {n}th time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the deployment's operations show `ok` succeeded.
async fn wait_for_ok(client: &reqwest::Client, url: &str) {
    let path = format!(
        "{SCOPE}/providers/Microsoft.Resources/deployments/loop/operations?api-version=2025-04-01"
    );
    let started = Instant::now();
    loop {
        let ops: Value = client
            .get(format!("{url}{path}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ok_succeeded = ops["value"].as_array().into_iter().flatten().any(|op| {
            op["properties"]["provisioningState"] == "Succeeded"
                && op["properties"]["targetResource"]["symbolicName"] == "ok"
        });
        if ok_succeeded {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "ok never succeeded: {ops:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_third_restart_abandons_a_deployment_that_keeps_killing_the_server() {
    let poison = Poison::default();
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(create))
        .route("/{version}/resource/get", post(not_found))
        .with_state(poison.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ext_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let registry = dir.path().join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Poison", "version": "1.0.0", "transport": { "kind": "http", "url": ext_url } } ] })
            .to_string(),
    )
    .unwrap();

    let client = reqwest::Client::new();
    let mut server = start_server(&data_dir, &registry);
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
    let deployment_path =
        format!("{SCOPE}/providers/Microsoft.Resources/deployments/loop?api-version=2025-04-01");
    let resp = client
        .put(format!("{}{deployment_path}", server.url))
        .json(&json!({ "properties": { "mode": "Incremental", "template": template() } }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        201,
        "{}",
        resp.text().await.unwrap_or_default()
    );

    // The poison kills the first server, then each restart that resumes the deployment.
    // Each time, `ok` has succeeded (durably) before the kill, so every takeover sees the same progress.
    for crash in 1..=3 {
        wait_for_hits(&poison, crash).await;
        wait_for_ok(&client, &server.url).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
        server = start_server(&data_dir, &registry);
    }

    // The third restart takes the deployment over a third time without progress and abandons it.
    let started = Instant::now();
    let record = loop {
        let resp = client
            .get(format!("{}{deployment_path}", server.url))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "GET: {}", resp.status());
        let body: Value = resp.json().await.unwrap();
        let state = body["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if ["Succeeded", "Failed", "Canceled"].contains(&state.as_str()) {
            break body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still {state} a minute after the third restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        record["properties"]["provisioningState"], "Failed",
        "{record:#}"
    );
    assert_eq!(
        record["properties"]["error"]["details"][0]["code"], "DeploymentRecoveryAbandoned",
        "{record:#}"
    );
    // What the deployment created (and was creating) is listed.
    let listed: Vec<&str> = record["properties"]["outputResources"]
        .as_array()
        .expect("outputResources")
        .iter()
        .filter_map(|r| r["identifiers"]["name"].as_str())
        .collect();
    assert!(listed.contains(&"ok"), "{listed:?}");

    // The server stays up and the poison is left alone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(poison.hits.load(Ordering::SeqCst), 3);
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the third restart stays up"
    );
    let health = client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

//! `cairn serve` as an operator runs it: SIGTERM in the middle of a deployment against a slow extension ends the
//! process with exit 0 within the shutdown grace, and the next start (whose claims would last two minutes) resumes
//! the handed-over deployment at once and finishes it; its metrics show the takeover. Logs off a terminal are JSON
//! lines carrying the request's correlation id on the request's lines and on the deployment's, in both processes;
//! `--log-format plain` writes human lines without colour codes.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use common::{Server, serve_with};
use serde_json::{Value, json};

const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/ops";
const V: &str = "api-version=2025-04-01";
const CORRELATION: &str = "ops-handover-7c1e";
const RESOURCES: usize = 4;

/// A v2 extension whose createOrUpdate takes `latency_ms`; it remembers what it created.
#[derive(Clone, Default)]
struct Slow {
    latency_ms: Arc<AtomicU64>,
    created: Arc<Mutex<BTreeSet<String>>>,
}

fn resource(body: &Value) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"],
            "identifiers": { "name": body["properties"]["name"] },
            "properties": body.get("properties").cloned().unwrap_or(json!({})) })
}

async fn create(State(s): State<Slow>, Json(body): Json<Value>) -> Json<Value> {
    tokio::time::sleep(Duration::from_millis(s.latency_ms.load(Ordering::SeqCst))).await;
    let name = body["properties"]["name"].as_str().unwrap_or_default();
    s.created.lock().unwrap().insert(name.to_owned());
    Json(resource(&body))
}

async fn preview(Json(body): Json<Value>) -> Json<Value> {
    Json(resource(&body))
}

/// Starts the extension and writes a registry naming it; returns the registry's path.
async fn slow_extension(dir: &Path, slow: &Slow) -> std::path::PathBuf {
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(create))
        .route("/{version}/resource/preview", post(preview))
        .with_state(slow.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let registry = dir.join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Slow", "version": "1.0.0", "transport": { "kind": "http", "url": url } } ] })
            .to_string(),
    )
    .unwrap();
    registry
}

fn chain() -> Value {
    let mut resources = serde_json::Map::new();
    for i in 0..RESOURCES {
        let mut r = json!({ "extension": "slow", "type": "Thing", "apiVersion": "v1",
                            "properties": { "name": format!("r{i}") } });
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

/// `cairn serve` on the data directory with claims lasting two minutes, stderr to `log`.
fn start(data_dir: &Path, registry: &Path, log: &Path, extra: &[&str]) -> Server {
    let log = std::fs::File::create(log).unwrap();
    serve_with(|command| {
        command
            .args([
                "--listen",
                "127.0.0.1:0",
                "--claim-ttl",
                "120",
                "--data-dir",
            ])
            .arg(data_dir)
            .arg("--extensions")
            .arg(registry)
            .args(extra)
            .env_remove("RUST_LOG")
            .stderr(Stdio::from(log));
    })
}

fn sigterm(child: &Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// Waits for the process to exit, at most `within`.
fn exit_within(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < within,
            "still running {within:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Every line of a JSON log, parsed (a line that is not a JSON object fails the test).
fn json_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(!text.contains('\u{1b}'), "colour codes in a log file");
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            assert!(value.is_object(), "{line}");
            value
        })
        .collect()
}

/// Whether the event happened inside a span named `span` carrying our correlation id.
fn correlated(line: &Value, span: &str) -> bool {
    line["spans"].as_array().is_some_and(|spans| {
        spans
            .iter()
            .any(|s| s["name"] == span && s["correlation_id"] == CORRELATION)
    })
}

fn has_message(lines: &[Value], needle: &str, span: &str) -> bool {
    lines.iter().any(|line| {
        line["message"]
            .as_str()
            .is_some_and(|message| message.contains(needle))
            && correlated(line, span)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_a_running_deployment_over_and_the_next_start_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let slow = Slow::default();
    slow.latency_ms.store(1500, Ordering::SeqCst);
    let registry = slow_extension(dir.path(), &slow).await;
    let data_dir = dir.path().join("data");
    let first_log = dir.path().join("first.log");
    let mut first = start(
        &data_dir,
        &registry,
        &first_log,
        &["--shutdown-grace", "10s"],
    );

    let client = reqwest::Client::new();
    let group = client
        .put(format!("{}{SCOPE}?{V}", first.url))
        .json(&json!({ "location": "local" }))
        .send()
        .await
        .unwrap();
    assert_eq!(group.status().as_u16(), 201);
    let deployment = format!("{SCOPE}/providers/Microsoft.Resources/deployments/chain");
    let accepted = client
        .put(format!("{}{deployment}?{V}", first.url))
        .header("x-ms-correlation-request-id", CORRELATION)
        .header("x-ms-client-request-id", "ops-client-42")
        .json(&json!({ "properties": { "mode": "Incremental", "template": chain() } }))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 201);
    assert_eq!(
        accepted.headers()["x-ms-correlation-request-id"],
        CORRELATION
    );
    assert_eq!(
        accepted.headers()["x-ms-client-request-id"],
        "ops-client-42"
    );
    let waiting = Instant::now();
    while slow.created.lock().unwrap().is_empty() {
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "no resource created"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The second call is in flight: SIGTERM lets it finish, then hands the deployment over.
    let signalled = Instant::now();
    sigterm(&first.child);
    let status = exit_within(&mut first.child, Duration::from_secs(12));
    assert!(status.success(), "exit status {status:?}");
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}");
    let created_before = slow.created.lock().unwrap().len();
    assert!(
        created_before < RESOURCES,
        "the deployment finished before the signal; nothing was handed over"
    );

    let lines = json_lines(&first_log);
    assert!(
        has_message(&lines, "finished processing request", "ids"),
        "request lines carry the correlation id"
    );
    assert!(
        lines
            .iter()
            .any(|line| line["spans"].as_array().is_some_and(|spans| spans
                .iter()
                .any(|s| s["client_request_id"] == "ops-client-42"))),
        "and the client's request id"
    );
    assert!(
        has_message(&lines, "deployment handed over", "deployment"),
        "the deployment's lines carry its correlation id"
    );
    assert!(lines.iter().any(|l| l["message"] == "shut down"));

    // The claims of this start last two minutes: only a handed-over deployment is resumed at once.
    slow.latency_ms.store(10, Ordering::SeqCst);
    let second_log = dir.path().join("second.log");
    let second = start(&data_dir, &registry, &second_log, &[]);
    let restarted = Instant::now();
    let record = loop {
        let record: Value = client
            .get(format!("{}{deployment}?{V}", second.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let state = record["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if !matches!(state.as_str(), "Accepted" | "Running") {
            break record;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(30),
            "still {state} 30 s after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        record["properties"]["provisioningState"], "Succeeded",
        "{record:#}"
    );
    assert_eq!(record["properties"]["correlationId"], CORRELATION);
    assert_eq!(slow.created.lock().unwrap().len(), RESOURCES);

    // The record turns terminal a moment before the run counts its end: read until the count is there.
    let read_metrics = || async {
        client
            .get(format!("{}/metrics", second.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let mut metrics = read_metrics().await;
    let counted = Instant::now();
    while !metrics.contains("cairn_deployments_in_flight 0")
        && counted.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        metrics = read_metrics().await;
    }
    for series in [
        "cairn_takeovers_total{kind=\"deployment\",outcome=\"resumed\"} 1",
        "cairn_deployment_duration_seconds_count{status=\"Succeeded\"} 1",
        "cairn_deployments_in_flight 0",
        "cairn_extension_call_duration_seconds_count{extension=\"Slow\",operation=\"createOrUpdate\",outcome=\"2xx\"}",
    ] {
        assert!(metrics.contains(series), "{series} missing: {metrics}");
    }
    let mut second = second;
    sigterm(&second.child);
    assert!(exit_within(&mut second.child, Duration::from_secs(30)).success());
    let lines = json_lines(&second_log);
    assert!(
        has_message(&lines, "resuming the deployment", "deployment"),
        "the resumed run's lines carry the correlation id of the request that started it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_logs_in_a_file_are_human_lines_without_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let registry = slow_extension(dir.path(), &Slow::default()).await;
    let log = dir.path().join("plain.log");
    let mut server = start(
        &dir.path().join("data"),
        &registry,
        &log,
        &["--log-format", "plain"],
    );
    let health = reqwest::get(format!("{}/healthz", server.url))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    sigterm(&server.child);
    assert!(exit_within(&mut server.child, Duration::from_secs(30)).success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("finished processing request"),
        "request lines: {text}"
    );
    assert!(text.contains("shut down"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in a file: {text:?}");
    assert!(
        text.lines().all(|line| !line.trim_start().starts_with('{')),
        "plain lines, not JSON: {text}"
    );
}

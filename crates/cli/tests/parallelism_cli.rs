//! `--parallelism N` on `cairn deployment … create` and `cairn stack … create` (in process), and `cairn serve
//! --parallelism` with `--max-operations-in-flight` (a cap across all of a server's deployments), checked by what a
//! loopback HTTP v2 extension sees: the most calls it had in flight at once.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

/// Counts calls in flight and remembers the most at once; answers after 40 ms.
#[derive(Clone, Default)]
struct Counting {
    in_flight: Arc<AtomicUsize>,
    busiest: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

async fn answer(State(c): State<Counting>, Json(body): Json<Value>) -> Json<Value> {
    let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    c.busiest.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(40)).await;
    c.in_flight.fetch_sub(1, Ordering::SeqCst);
    c.calls.fetch_add(1, Ordering::SeqCst);
    let name = body
        .pointer("/properties/name")
        .or_else(|| body.pointer("/identifiers/name"))
        .cloned()
        .unwrap_or(Value::Null);
    Json(
        json!({ "type": body["type"], "apiVersion": body["apiVersion"],
                 "identifiers": { "name": name }, "properties": { "name": name } }),
    )
}

async fn absent() -> (axum::http::StatusCode, Json<Value>) {
    (
        axum::http::StatusCode::NOT_FOUND,
        Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
    )
}

/// The extension on a loopback port (its own runtime, on a thread); returns its state and URL.
fn extension() -> (Counting, String) {
    let counting = Counting::default();
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(answer))
        .route("/{version}/resource/get", post(absent))
        .route("/{version}/resource/preview", post(absent))
        .with_state(counting.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            let addr: SocketAddr = listener.local_addr().expect("its address");
            tx.send(format!("http://{addr}")).expect("the URL");
            axum::serve(listener, app).await.expect("serves");
        });
    });
    (counting, rx.recv().expect("the extension's URL"))
}

fn template(prefix: &str, count: usize) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "bench": { "name": "Counting", "version": "1.0.0" } },
        "resources": {
            "items": { "extension": "bench", "type": "Item", "apiVersion": "v1",
                       "copy": { "name": "items", "count": count },
                       "properties": { "name": format!("[format('{prefix}{{0}}', copyIndex())]") } }
        }
    })
}

/// A `CAIRN_HOME` whose registry has the extension at `url`, with resource group `rg`, and a template file of
/// `count` items.
fn home(url: &str, dir: &Path, count: usize) -> String {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(
        home.join("extensions.json"),
        json!({ "extensions": [ { "name": "Counting", "version": "1.0.0",
                                  "transport": { "kind": "http", "url": url } } ] })
        .to_string(),
    )
    .expect("registry");
    let ok = cairn(&home, &["group", "create", "-n", "rg", "-l", "local"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let file = dir.join("t.json");
    std::fs::write(&file, template("i", count).to_string()).expect("template");
    file.display().to_string()
}

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_EXTENSIONS")
        .env_remove("CAIRN_PARALLELISM")
        .args(args)
        .output()
        .expect("cairn runs")
}

#[test]
fn deployment_create_runs_as_many_operations_at_once_as_parallelism_says() {
    let (counting, url) = extension();
    let dir = tempfile::tempdir().unwrap();
    let file = home(&url, dir.path(), 9);
    let out = cairn(
        &dir.path().join("home"),
        &[
            "deployment",
            "group",
            "create",
            "-n",
            "d",
            "-g",
            "rg",
            "-f",
            &file,
            "--parallelism",
            "2",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(counting.calls.load(Ordering::SeqCst), 9);
    assert_eq!(counting.busiest.load(Ordering::SeqCst), 2);
}

#[test]
fn stack_create_runs_as_many_operations_at_once_as_parallelism_says() {
    let (counting, url) = extension();
    let dir = tempfile::tempdir().unwrap();
    let file = home(&url, dir.path(), 10);
    let out = cairn(
        &dir.path().join("home"),
        &[
            "stack",
            "group",
            "create",
            "-n",
            "s",
            "-g",
            "rg",
            "-f",
            &file,
            "--aou",
            "detachAll",
            "--yes",
            "--parallelism",
            "3",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(counting.calls.load(Ordering::SeqCst), 10);
    assert_eq!(counting.busiest.load(Ordering::SeqCst), 3);
}

#[test]
fn parallelism_with_a_server_is_refused_with_where_to_set_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    std::fs::write(&file, template("i", 1).to_string()).expect("template");
    let file = file.display().to_string();
    let out = cairn(
        dir.path(),
        &[
            "deployment",
            "group",
            "create",
            "-n",
            "d",
            "-g",
            "rg",
            "-f",
            &file,
            "--server",
            "http://127.0.0.1:9",
            "--parallelism",
            "2",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cairn serve --parallelism"), "{stderr}");
}

/// Two deployments of 8 through one server, each allowed 4 at once, under a server-wide cap of 3.
#[test]
fn a_servers_cap_bounds_its_concurrent_deployments_together() {
    let (counting, url) = extension();
    let dir = tempfile::tempdir().unwrap();
    let file = home(&url, dir.path(), 8);
    let data = dir.path().join("home");
    let server = common::serve_with(|command| {
        command
            .env_remove("CAIRN_EXTENSIONS")
            .env("CAIRN_MAX_OPERATIONS_IN_FLIGHT", "3")
            .args([
                "--listen",
                "127.0.0.1:0",
                "--retry-after",
                "0",
                "--parallelism",
                "4",
                "--data-dir",
            ])
            .arg(&data)
            .arg("--extensions")
            .arg(data.join("extensions.json"));
    });
    let clients: Vec<_> = ["a", "b"]
        .map(|name| {
            Command::new(env!("CARGO_BIN_EXE_cairn"))
                .env("CAIRN_HOME", &data)
                .args([
                    "deployment",
                    "group",
                    "create",
                    "-n",
                    name,
                    "-g",
                    "rg",
                    "-f",
                    &file,
                    "--server",
                    &server.url,
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("cairn runs")
        })
        .into_iter()
        .collect();
    for client in clients {
        let out = client.wait_with_output().expect("the client ends");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(counting.calls.load(Ordering::SeqCst), 16);
    assert_eq!(counting.busiest.load(Ordering::SeqCst), 3);
}

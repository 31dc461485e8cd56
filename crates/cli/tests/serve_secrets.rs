//! Secret canary, end to end: a secure parameter and a secret extension config value go through `cairn serve`
//! (logging at trace level, JSON lines since stderr is a file) into a deployment; neither appears in any API
//! response, any log line, or any file of the data directory.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};

const SECURE_PARAMETER: &str = "canary-secure-parameter-7f3a9c";
const SECRET_CONFIG: &str = "canary-secret-config-b41d2e";

/// Echoes the config without `token` (so the engine must treat `token` as secret) and answers at once.
async fn create(Json(body): Json<Value>) -> Json<Value> {
    assert_eq!(
        body["config"]["token"], SECRET_CONFIG,
        "the extension receives the resolved secret"
    );
    let name = body["properties"]["name"].clone();
    Json(
        json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
                 "properties": body["properties"], "config": { "endpoint": body["config"]["endpoint"] },
                 "configId": "endpoint-1" }),
    )
}

async fn preview(Json(body): Json<Value>) -> Json<Value> {
    Json(
        json!({ "type": body["type"], "identifiers": { "name": body["properties"]["name"] },
                 "properties": body["properties"], "configId": "endpoint-1" }),
    )
}

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// `cairn serve` on a free loopback port over `data_dir` (with the extension `registry`, when given), logging at
/// trace level into `log_path`; returns the process and its URL.
fn serve_logging_at_trace(
    data_dir: &std::path::Path,
    registry: Option<&std::path::Path>,
    log_path: &std::path::Path,
) -> (std::process::Child, String) {
    let log = std::fs::File::create(log_path).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir);
    if let Some(registry) = registry {
        command.arg("--extensions").arg(registry);
    }
    let mut child = command
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let started = Instant::now();
    let mut printed = String::new();
    let url = loop {
        let mut buf = [0u8; 256];
        let n = stdout.read(&mut buf).unwrap();
        printed.push_str(&String::from_utf8_lossy(&buf[..n]));
        if let Some(rest) = printed.split("listening on ").nth(1)
            && let Some(line) = rest.lines().next()
            && printed.contains('\n')
        {
            break line.trim().to_string();
        }
        assert!(
            n > 0 && started.elapsed() < Duration::from_secs(30),
            "no address printed: {printed}"
        );
    };
    (child, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_reach_no_response_log_or_file() {
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(create))
        .route("/{version}/resource/preview", post(preview));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ext_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let registry = dir.path().join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Echo", "version": "1.0.0", "transport": { "kind": "http", "url": ext_url } } ] })
            .to_string(),
    )
    .unwrap();
    let log_path = dir.path().join("serve.log");
    let (mut child, url) = serve_logging_at_trace(&data_dir, Some(&registry), &log_path);

    let client = reqwest::Client::new();
    let scope = "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/canary";
    let mut responses = Vec::new();
    let resp = client
        .put(format!("{url}{scope}?api-version=2025-04-01"))
        .json(&json!({ "location": "local" }))
        .send()
        .await
        .unwrap();
    responses.push(resp.text().await.unwrap());
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "parameters": { "password": { "type": "securestring" } },
        "extensions": { "echo": { "name": "Echo", "version": "1.0.0" } },
        "resources": { "thing": { "extension": "echo", "type": "Thing", "apiVersion": "v1",
                                  "properties": { "name": "thing", "length": "[length(parameters('password'))]" } } },
        "outputs": { "length": { "type": "int", "value": "[length(parameters('password'))]" } }
    });
    let deployment = format!("{scope}/providers/Microsoft.Resources/deployments/canary");
    let resp = client
        .put(format!("{url}{deployment}?api-version=2025-04-01"))
        .json(&json!({ "properties": {
            "mode": "Incremental",
            "template": template,
            "parameters": { "password": { "value": SECURE_PARAMETER } },
            "extensionConfigs": { "echo": { "endpoint": { "value": "https://echo.example" }, "token": { "value": SECRET_CONFIG } } }
        } }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    responses.push(resp.text().await.unwrap());
    let started = Instant::now();
    loop {
        let body = client
            .get(format!("{url}{deployment}?api-version=2025-04-01"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let state: Value = serde_json::from_str(&body).unwrap();
        responses.push(body.clone());
        match state["properties"]["provisioningState"].as_str() {
            Some("Succeeded") => {
                assert_eq!(
                    state["properties"]["outputs"]["length"]["value"],
                    SECURE_PARAMETER.len()
                );
                break;
            }
            Some("Failed" | "Canceled") => panic!("deployment ended: {body}"),
            _ => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "deployment did not finish: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for path in [
        format!("{deployment}/operations?api-version=2025-04-01"),
        format!("{scope}/providers/Microsoft.Resources/deployments?api-version=2025-04-01"),
        format!("{deployment}/exportTemplate?api-version=2025-04-01"),
    ] {
        let req = if path.contains("exportTemplate") {
            client.post(format!("{url}{path}"))
        } else {
            client.get(format!("{url}{path}"))
        };
        responses.push(req.send().await.unwrap().text().await.unwrap());
    }
    child.kill().ok();
    child.wait().ok();

    for canary in [SECURE_PARAMETER, SECRET_CONFIG] {
        for (i, body) in responses.iter().enumerate() {
            assert!(
                !body.contains(canary),
                "response {i} leaks {canary}: {body}"
            );
        }
        let logs = std::fs::read_to_string(&log_path).unwrap();
        assert!(!logs.is_empty(), "trace logging produced output");
        // stderr is a file, not a terminal: the log is JSON lines, each scanned whole (fields, span fields).
        for line in logs.lines().filter(|line| !line.trim().is_empty()) {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
            assert!(event.is_object(), "{line}");
        }
        assert!(!logs.contains(canary), "the log leaks {canary}");
        let mut files = Vec::new();
        files_under(&data_dir, &mut files);
        assert!(!files.is_empty());
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            assert!(
                !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
                "{} holds {canary} in plaintext",
                f.display()
            );
        }
    }
}

/// A secure parameter handed to every function whose errors once quoted their argument.
const SECURE_CANARY: &str = "canary-in-error-5e0c7a";

/// Expressions that fail on a secure value: each once quoted it in the error.
const FAILING_ON_A_SECRET: &[&str] = &[
    "[int(parameters('p'))]",
    "[float(parameters('p'))]",
    "[bool(parameters('p'))]",
    "[dateTimeAdd(parameters('p'), 'P1D')]",
    "[dateTimeToEpoch(parameters('p'))]",
    "[parseCidr(parameters('p'))]",
    "[createObject(parameters('p'), 1, parameters('p'), 2)]",
    "[createObject('a', 1)[parameters('p')]]",
    "[parameters('o')[parameters('p')]]",
    "[parameters('o').missing]",
    "[int(toUpper(parameters('p')))]",
    "[int(base64(parameters('p')))]",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_failing_expression_reaches_no_response_log_or_file() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let log_path = dir.path().join("serve.log");
    let (mut child, url) = serve_logging_at_trace(&data_dir, None, &log_path);
    let client = reqwest::Client::new();
    let scope = "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/canary";
    let mut responses = Vec::new();
    let resp = client
        .put(format!("{url}{scope}?api-version=2025-04-01"))
        .json(&json!({ "location": "local" }))
        .send()
        .await
        .unwrap();
    responses.push(resp.text().await.unwrap());
    for (index, expression) in FAILING_ON_A_SECRET.iter().enumerate() {
        // In a resource's body the expression fails at validation; in an output, when the run evaluates it.
        let in_resource = json!([{ "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01",
                                   "name": format!("v{index}"), "location": "local",
                                   "tags": { "t": expression }, "properties": {} }]);
        let in_output = json!({ "x": { "type": "string", "value": expression } });
        for (kind, resources, outputs) in
            [("v", in_resource, json!({})), ("r", json!([]), in_output)]
        {
            let body = json!({ "properties": {
                "mode": "Incremental",
                "template": {
                    "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                    "contentVersion": "1.0.0.0",
                    "parameters": { "p": { "type": "securestring" }, "o": { "type": "secureObject" } },
                    "resources": resources,
                    "outputs": outputs
                },
                "parameters": { "p": { "value": SECURE_CANARY },
                                // A key holding the secret too: an error listing the keys must not show it.
                                "o": { "value": { (format!("{SECURE_CANARY}-key")): SECURE_CANARY } } }
            } });
            let deployment =
                format!("{scope}/providers/Microsoft.Resources/deployments/d{index}{kind}");
            let validate = client
                .post(format!("{url}{deployment}/validate?api-version=2025-04-01"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = validate.status().as_u16();
            let text = validate.text().await.unwrap();
            if kind == "v" {
                assert_eq!(status, 400, "{expression}: validation passed: {text}");
            }
            responses.push(text);
            let put = client
                .put(format!("{url}{deployment}?api-version=2025-04-01"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let accepted = put.status().as_u16() == 201;
            responses.push(put.text().await.unwrap());
            let started = Instant::now();
            // A refused PUT has nothing to wait for.
            let mut running = accepted;
            while running {
                let got = client
                    .get(format!("{url}{deployment}?api-version=2025-04-01"))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let state: Value = serde_json::from_str(&got).unwrap_or_default();
                responses.push(got.clone());
                let ended = state["properties"]["provisioningState"].as_str();
                running = !matches!(ended, Some("Succeeded" | "Failed" | "Canceled"));
                if !running {
                    assert_eq!(ended, Some("Failed"), "{expression}: {got}");
                    continue;
                }
                assert!(started.elapsed() < Duration::from_secs(30), "{got}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let operations = client
                .get(format!(
                    "{url}{deployment}/operations?api-version=2025-04-01"
                ))
                .send()
                .await
                .unwrap();
            responses.push(operations.text().await.unwrap());
        }
    }
    child.kill().ok();
    child.wait().ok();
    for (i, body) in responses.iter().enumerate() {
        assert!(
            !body.contains(SECURE_CANARY),
            "response {i} leaks the secret: {body}"
        );
    }
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(!logs.contains(SECURE_CANARY), "the log leaks the secret");
    let mut files = Vec::new();
    files_under(&data_dir, &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes
                .windows(SECURE_CANARY.len())
                .any(|w| w == SECURE_CANARY.as_bytes()),
            "{} holds the secret in plaintext",
            f.display()
        );
    }
}

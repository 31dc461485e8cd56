//! A real `cairn serve` runs the built-in Local extension only inside its `--local-root` directories and never on
//! its own files: without a root a deployment using Local fails naming the flag; with one, a template cannot point
//! Local at the data directory, `/etc` or (through a symbolic link in the root) the tokens file.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SUBSCRIPTION: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const TOKEN: &str = "serve-local-test-token-7c41";

/// The server's layout: `data/` (its store), `tokens.txt`, `roots/` (the one Local root) and `outside/`.
struct Layout {
    _temp: tempfile::TempDir,
    base: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("roots/site")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("tokens.txt"), format!("{TOKEN}\n")).unwrap();
        Layout { _temp: temp, base }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.base.join(relative)
    }

    /// `cairn serve` on the layout, with `extra` arguments.
    fn serve(&self, extra: &[&Path]) -> common::Server {
        common::serve_with(|command| {
            command
                .args(["--listen", "127.0.0.1:0", "--data-dir"])
                .arg(self.path("data"))
                .arg("--tokens")
                .arg(self.path("tokens.txt"))
                .args(extra)
                .env_remove("CAIRN_EXTENSIONS")
                .env_remove("CAIRN_STORE_KEY_FILE");
        })
    }
}

/// A template importing Local with `root`, declaring `resources` and `outputs`.
fn template(root: &Path, resources: Value, outputs: Value) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "imports": { "local": { "provider": "Local", "version": "1.0.0", "config": { "rootDirectory": root } } },
        "resources": resources,
        "outputs": outputs
    })
}

/// A template writing `path` with `content`.
fn writing(root: &Path, path: &str, content: &str) -> Value {
    template(
        root,
        json!({ "f": { "import": "local", "type": "File", "properties": { "path": path, "content": content } } }),
        json!({}),
    )
}

/// A template reading the existing file `path` into an output.
fn reading(root: &Path, path: &str) -> Value {
    template(
        root,
        json!({ "f": { "import": "local", "type": "File", "existing": true, "properties": { "path": path } } }),
        json!({ "content": { "type": "string", "value": "[reference('f').content]" } }),
    )
}

/// Deploys `template` into the group `rg` as `name` through HTTP PUT and waits for its end: the final record.
async fn deploy(server: &common::Server, name: &str, template: Value) -> Value {
    let client = reqwest::Client::new();
    let group = format!("{}{SUBSCRIPTION}/resourcegroups/rg", server.url);
    let response = client
        .put(format!("{group}?api-version=2025-04-01"))
        .bearer_auth(TOKEN)
        .json(&json!({ "location": "local" }))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let url =
        format!("{group}/providers/Microsoft.Resources/deployments/{name}?api-version=2025-04-01");
    let response = client
        .put(&url)
        .bearer_auth(TOKEN)
        .json(&json!({ "properties": { "mode": "Incremental", "template": template } }))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{status}: {body}");
    let started = Instant::now();
    loop {
        let record: Value = client
            .get(&url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let state = record["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default();
        if matches!(state, "Succeeded" | "Failed" | "Canceled") {
            return record;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still {state}: {record}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn state(record: &Value) -> &str {
    record["properties"]["provisioningState"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_local_roots_local_is_off_and_the_error_names_the_flag() {
    let layout = Layout::new();
    let server = layout.serve(&[]);
    let root = layout.path("outside");
    let record = deploy(&server, "off", writing(&root, "a.txt", "x")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    let text = record.to_string();
    assert!(text.contains("LocalRootsNotConfigured"), "{record}");
    assert!(text.contains("--local-root"), "{record}");
    assert!(!root.join("a.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_local_root_only_roots_inside_it_work() {
    let layout = Layout::new();
    let server = layout.serve(&[Path::new("--local-root"), &layout.path("roots")]);
    let key = std::fs::read_to_string(layout.path("data/cairn.key")).unwrap();
    let data = layout.path("data");
    let marker = format!("cairn-serve-local-{}.txt", std::process::id());

    let record = deploy(&server, "data", writing(&data, &marker, "x")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    assert!(
        record.to_string().contains("RootDirectoryNotAllowed"),
        "{record}"
    );
    let record = deploy(&server, "key", reading(&data, "cairn.key")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    assert!(!record.to_string().contains(key.trim()), "{record}");

    let etc = Path::new("/etc");
    let record = deploy(&server, "etc", writing(etc, &marker, "x")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    assert!(
        record.to_string().contains("RootDirectoryNotAllowed"),
        "{record}"
    );
    let record = deploy(&server, "etc-read", reading(etc, "hostname")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    assert!(!etc.join(&marker).exists());
    assert!(!data.join(&marker).exists());
    assert_eq!(
        std::fs::read_to_string(layout.path("data/cairn.key")).unwrap(),
        key
    );

    let site = layout.path("roots/site");
    let record = deploy(&server, "site", writing(&site, "hello/a.txt", "hello")).await;
    assert_eq!(state(&record), "Succeeded", "{record}");
    assert_eq!(
        std::fs::read_to_string(site.join("hello/a.txt")).unwrap(),
        "hello"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokens_file_cannot_be_reached_through_a_link_in_the_root() {
    let layout = Layout::new();
    let server = layout.serve(&[Path::new("--local-root"), &layout.path("roots")]);
    let site = layout.path("roots/site");
    std::os::unix::fs::symlink(layout.path("tokens.txt"), site.join("tokens-link")).unwrap();
    std::os::unix::fs::symlink(layout.path("data"), site.join("data-link")).unwrap();

    let record = deploy(&server, "read", reading(&site, "tokens-link")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    assert!(record.to_string().contains("PathDenied"), "{record}");
    assert!(!record.to_string().contains(TOKEN), "{record}");

    let record = deploy(&server, "write", writing(&site, "tokens-link", "mine")).await;
    assert_eq!(state(&record), "Failed", "{record}");
    let record = deploy(
        &server,
        "key",
        writing(&site, "data-link/cairn.key", "mine"),
    )
    .await;
    assert_eq!(state(&record), "Failed", "{record}");
    assert_eq!(
        std::fs::read_to_string(layout.path("tokens.txt")).unwrap(),
        format!("{TOKEN}\n")
    );
    assert_ne!(
        std::fs::read_to_string(layout.path("data/cairn.key")).unwrap(),
        "mine"
    );
}

#[test]
fn a_local_root_inside_the_data_directory_stops_the_start() {
    let layout = Layout::new();
    std::fs::create_dir_all(layout.path("data/files")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(layout.path("data"))
        .arg("--local-root")
        .arg(layout.path("data/files"))
        .env_remove("CAIRN_EXTENSIONS")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--local-root") && stderr.contains("keeps for itself"),
        "{stderr}"
    );
}

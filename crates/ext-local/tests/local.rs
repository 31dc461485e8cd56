//! The Local extension's behaviour through its in-process transport (the same HTTP routes it serves).

use std::path::Path;

use cairn_extension_contract::transport::{ExtensionTransport, Operation, TransportRequest};
use serde_json::{Value, json};

async fn call(operation: Operation, body: Value) -> (u16, Value) {
    let transport = cairn_ext_local::in_process_transport();
    let response = transport
        .send(TransportRequest {
            operation,
            extension_version: "1.0.0".into(),
            body: serde_json::to_vec(&body).unwrap(),
            headers: Vec::new(),
            max_response_bytes: 1 << 20,
        })
        .await
        .unwrap();
    (
        response.status,
        serde_json::from_slice(&response.body).unwrap_or(Value::Null),
    )
}

fn file(root: &Path, properties: Value) -> Value {
    json!({ "type": "File", "properties": properties, "config": { "rootDirectory": root } })
}

fn directory(root: &Path, path: &str) -> Value {
    json!({ "type": "Directory", "properties": { "path": path }, "config": { "rootDirectory": root } })
}

fn reference(root: &Path, kind: &str, path: &str) -> Value {
    json!({ "type": kind, "identifiers": { "path": path }, "config": { "rootDirectory": root } })
}

fn error_of(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or_default(),
        body["error"]["target"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn file_create_get_update_delete() {
    let root = tempfile::tempdir().unwrap();
    let (status, body) = call(
        Operation::CreateOrUpdate,
        file(
            root.path(),
            json!({ "path": "./docs//a.txt", "content": "one", "mode": "0600" }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["identifiers"], json!({ "path": "docs/a.txt" }));
    assert_eq!(
        body["properties"],
        json!({ "path": "docs/a.txt", "content": "one", "mode": "0600" })
    );
    assert_eq!(body["config"], json!({ "rootDirectory": root.path() }));
    assert_eq!(body["configId"].as_str().map(str::len), Some(64));
    assert_eq!(
        std::fs::read_to_string(root.path().join("docs/a.txt")).unwrap(),
        "one"
    );

    let (status, body) = call(Operation::Get, reference(root.path(), "File", "docs/a.txt")).await;
    assert_eq!(
        (status, &body["properties"]["content"]),
        (200, &json!("one"))
    );

    // Updating content without a mode keeps the file's mode.
    let (status, body) = call(
        Operation::CreateOrUpdate,
        file(
            root.path(),
            json!({ "path": "docs/a.txt", "content": "two" }),
        ),
    )
    .await;
    assert_eq!((status, &body["properties"]["mode"]), (200, &json!("0600")));

    let (status, _) = call(
        Operation::Delete,
        reference(root.path(), "File", "docs/a.txt"),
    )
    .await;
    assert_eq!(status, 204);
    assert!(!root.path().join("docs/a.txt").exists());
    let (status, body) = call(Operation::Get, reference(root.path(), "File", "docs/a.txt")).await;
    assert_eq!((status, error_of(&body).0), (404, "ResourceNotFound"));
    let (status, _) = call(
        Operation::Delete,
        reference(root.path(), "File", "docs/a.txt"),
    )
    .await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn repeating_an_unchanged_file_does_not_rewrite_it() {
    let root = tempfile::tempdir().unwrap();
    let spec = file(root.path(), json!({ "path": "a.txt", "content": "same" }));
    call(Operation::CreateOrUpdate, spec.clone()).await;
    let before = std::fs::metadata(root.path().join("a.txt"))
        .unwrap()
        .modified()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (status, _) = call(Operation::CreateOrUpdate, spec).await;
    assert_eq!(status, 200);
    let after = std::fs::metadata(root.path().join("a.txt"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
}

#[tokio::test]
async fn paths_outside_the_root_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
    for path in [
        "../x.txt",
        "/etc/passwd",
        "a/../../x",
        "escape/x.txt",
        "escape",
    ] {
        let (status, body) = call(
            Operation::CreateOrUpdate,
            file(root.path(), json!({ "path": path, "content": "x" })),
        )
        .await;
        assert_eq!(
            (status, error_of(&body)),
            (400, ("PathOutsideRoot", "/properties/path")),
            "{path}"
        );
        let (status, body) = call(Operation::Get, reference(root.path(), "File", path)).await;
        assert_eq!(
            (status, error_of(&body)),
            (400, ("PathOutsideRoot", "/identifiers/path")),
            "{path}"
        );
        let (status, _) = call(Operation::Delete, reference(root.path(), "Directory", path)).await;
        assert_eq!(status, 400, "{path}");
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn invalid_input_aggregates_with_pointers() {
    let root = tempfile::tempdir().unwrap();
    let (status, body) = call(
        Operation::CreateOrUpdate,
        file(root.path(), json!({ "path": "", "mode": "rwx" })),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("MultipleErrorsOccurred"))
    );
    let targets: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["/properties/path", "/properties/mode"]);
    let (status, body) = call(
        Operation::CreateOrUpdate,
        file(root.path(), json!({ "path": "a", "colour": "red" })),
    )
    .await;
    assert_eq!(
        (status, error_of(&body)),
        (400, ("InvalidProperties", "/properties/colour"))
    );
    let (status, body) = call(
        Operation::Get,
        json!({ "type": "File", "identifiers": { "path": "a" } }),
    )
    .await;
    assert_eq!(
        (status, error_of(&body)),
        (400, ("InvalidConfig", "/config/rootDirectory"))
    );
}

#[tokio::test]
async fn directories_are_created_and_only_deleted_when_empty() {
    let root = tempfile::tempdir().unwrap();
    let (status, body) = call(
        Operation::CreateOrUpdate,
        directory(root.path(), "out/logs"),
    )
    .await;
    assert_eq!(
        (status, &body["identifiers"]),
        (200, &json!({ "path": "out/logs" }))
    );
    assert!(root.path().join("out/logs").is_dir());
    let (status, _) = call(
        Operation::CreateOrUpdate,
        directory(root.path(), "out/logs"),
    )
    .await;
    assert_eq!(status, 200, "repeat is idempotent");

    std::fs::write(root.path().join("out/logs/keep.txt"), "user data").unwrap();
    std::fs::create_dir(root.path().join("out/logs/old")).unwrap();
    let (status, body) = call(
        Operation::Delete,
        reference(root.path(), "Directory", "out/logs"),
    )
    .await;
    assert_eq!(
        (status, error_of(&body)),
        (409, ("DirectoryNotEmpty", "/identifiers/path"))
    );
    // The error names what is in the way.
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("2 entries (keep.txt, old/)"), "{message}");
    assert!(root.path().join("out/logs/keep.txt").exists());

    std::fs::remove_file(root.path().join("out/logs/keep.txt")).unwrap();
    // A file deep inside is in the way too, and nothing is removed.
    std::fs::create_dir_all(root.path().join("out/logs/old/2024/01")).unwrap();
    std::fs::write(root.path().join("out/logs/old/2024/x.log"), "x").unwrap();
    let (status, body) = call(
        Operation::Delete,
        reference(root.path(), "Directory", "out/logs"),
    )
    .await;
    assert_eq!((status, error_of(&body).0), (409, "DirectoryNotEmpty"));
    assert!(root.path().join("out/logs/old/2024/01").is_dir());
    // What is left holds no file (the parents a File made for itself, emptied by its delete): removed with it.
    std::fs::remove_file(root.path().join("out/logs/old/2024/x.log")).unwrap();
    let (status, _) = call(
        Operation::Delete,
        reference(root.path(), "Directory", "out/logs"),
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = call(
        Operation::Get,
        reference(root.path(), "Directory", "out/logs"),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn files_and_directories_do_not_replace_each_other() {
    let root = tempfile::tempdir().unwrap();
    call(Operation::CreateOrUpdate, directory(root.path(), "d")).await;
    let (status, body) = call(
        Operation::CreateOrUpdate,
        file(root.path(), json!({ "path": "d", "content": "x" })),
    )
    .await;
    assert_eq!((status, error_of(&body).0), (409, "PathIsADirectory"));
    call(
        Operation::CreateOrUpdate,
        file(root.path(), json!({ "path": "f", "content": "x" })),
    )
    .await;
    let (status, body) = call(Operation::CreateOrUpdate, directory(root.path(), "f")).await;
    assert_eq!((status, error_of(&body).0), (409, "PathIsNotADirectory"));
    let (status, body) = call(
        Operation::CreateOrUpdate,
        file(root.path(), json!({ "path": "f/inner", "content": "x" })),
    )
    .await;
    assert_eq!((status, error_of(&body).0), (400, "ParentNotDirectory"));
    // A File is not a Directory and vice versa.
    assert_eq!(
        call(Operation::Get, reference(root.path(), "Directory", "f"))
            .await
            .0,
        404
    );
    assert_eq!(
        call(Operation::Get, reference(root.path(), "File", "d"))
            .await
            .0,
        404
    );
    assert_eq!(
        call(Operation::Delete, reference(root.path(), "File", "d"))
            .await
            .0,
        204
    );
    assert!(root.path().join("d").is_dir());
}

#[tokio::test]
async fn non_text_files_cannot_be_read_as_file_resources() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
    let (status, body) = call(Operation::Get, reference(root.path(), "File", "bin")).await;
    assert_eq!((status, error_of(&body).0), (409, "FileNotText"));
}

#[tokio::test]
async fn preview_predicts_without_touching_the_disk() {
    let root = tempfile::tempdir().unwrap();
    let spec = json!({ "type": "File", "properties": { "path": "new.txt", "content": "[parameters('c')]" },
                       "config": { "rootDirectory": root.path() }, "metadata": { "unevaluated": ["/properties/content"] } });
    let (status, body) = call(Operation::Preview, spec).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["identifiers"], json!({ "path": "new.txt" }));
    assert_eq!(body["properties"]["content"], "[parameters('c')]");
    assert_eq!(
        body["metadata"],
        json!({ "calculated": ["/properties/mode"], "unevaluated": ["/properties/content"] })
    );
    assert!(!root.path().join("new.txt").exists());

    // Existing file: its mode is predicted.
    std::fs::write(root.path().join("old.txt"), "x").unwrap();
    let (_, body) = call(
        Operation::Preview,
        file(root.path(), json!({ "path": "old.txt", "content": "y" })),
    )
    .await;
    assert!(
        body["properties"]["mode"]
            .as_str()
            .is_some_and(|m| m.len() == 4),
        "{body}"
    );

    // Unevaluated path: identifiers unknown.
    let spec = json!({ "type": "Directory", "properties": { "path": "[parameters('p')]" },
                       "config": { "rootDirectory": root.path() }, "metadata": { "unevaluated": ["/properties/path"] } });
    let (status, body) = call(Operation::Preview, spec).await;
    assert_eq!(
        (status, &body["metadata"]["unknown"]),
        (200, &json!(["/identifiers"]))
    );

    // An evaluated path outside the root fails preview too.
    let (status, body) = call(
        Operation::Preview,
        file(root.path(), json!({ "path": "../x", "content": "" })),
    )
    .await;
    assert_eq!(
        (status, error_of(&body)),
        (400, ("PathOutsideRoot", "/properties/path"))
    );
}

#[tokio::test]
async fn missing_root_is_created_on_first_write_with_a_stable_config_id() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("not/yet");
    let (_, preview) = call(
        Operation::Preview,
        file(&root, json!({ "path": "a", "content": "" })),
    )
    .await;
    let (status, created) = call(
        Operation::CreateOrUpdate,
        file(&root, json!({ "path": "a", "content": "" })),
    )
    .await;
    assert_eq!(status, 200);
    assert!(root.join("a").is_file());
    assert_eq!(preview["configId"], created["configId"]);
}

//! Local confined the way `cairn serve` runs it: a root must lie in an allowed root, and no path reaches a
//! denied one (the server's data directory, tokens, keys), whether directly, through `..` or through a
//! symbolic link, for reads, writes and deletes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_ext_local::Confinement;
use cairn_extension_contract::transport::{ExtensionTransport, Operation, TransportRequest};
use serde_json::{Value, json};

async fn call(confinement: &Arc<Confinement>, operation: Operation, body: Value) -> (u16, Value) {
    let transport = cairn_ext_local::confined_in_process_transport(Arc::clone(confinement));
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

fn file(root: impl AsRef<Path>, path: &str, content: &str) -> Value {
    json!({
        "type": "File",
        "properties": { "path": path, "content": content },
        "config": { "rootDirectory": root.as_ref() }
    })
}

fn reference(root: impl AsRef<Path>, kind: &str, path: &str) -> Value {
    json!({ "type": kind, "identifiers": { "path": path }, "config": { "rootDirectory": root.as_ref() } })
}

fn error_of(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or_default(),
        body["error"]["target"].as_str().unwrap_or_default(),
    )
}

fn message_of(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// A server's layout in a temporary directory: `roots/` allowed, `data/` (with `cairn.key`) and `tokens`
/// denied, `outside/` neither.
struct Layout {
    _temp: tempfile::TempDir,
    base: PathBuf,
    confinement: Arc<Confinement>,
}

impl Layout {
    fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().canonicalize().unwrap();
        for dir in ["roots", "data", "outside"] {
            std::fs::create_dir(base.join(dir)).unwrap();
        }
        std::fs::write(base.join("data/cairn.key"), "master key").unwrap();
        std::fs::write(base.join("tokens"), "unscoped-token").unwrap();
        let confinement = Confinement::new(
            [base.join("roots")],
            [base.join("data"), base.join("tokens")],
        )
        .unwrap();
        Layout {
            _temp: temp,
            base,
            confinement: Arc::new(confinement),
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.base.join(relative)
    }
}

#[tokio::test]
async fn without_roots_every_config_is_refused_naming_the_flag() {
    let confinement = Arc::new(Confinement::new([], []).unwrap());
    let root = tempfile::tempdir().unwrap();
    for operation in [Operation::Preview, Operation::CreateOrUpdate] {
        let (status, body) = call(&confinement, operation, file(root.path(), "a.txt", "x")).await;
        assert_eq!(
            (status, error_of(&body)),
            (400, ("LocalRootsNotConfigured", "/config/rootDirectory")),
            "{body}"
        );
        assert!(message_of(&body).contains("--local-root"), "{body}");
    }
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_root_outside_the_allowed_roots_is_refused() {
    let layout = Layout::new();
    let roots = layout.path("roots");
    for root in [
        layout.path("outside"),
        layout.path("data"),
        layout.path("data/sub"),
        PathBuf::from("/etc"),
        roots.join("../outside"),
        roots.join("../data"),
        PathBuf::from("../outside"),
    ] {
        for operation in [Operation::Preview, Operation::CreateOrUpdate] {
            let (status, body) = call(
                &layout.confinement,
                operation,
                file(&root, "stolen.txt", "x"),
            )
            .await;
            assert_eq!(
                (status, error_of(&body)),
                (400, ("RootDirectoryNotAllowed", "/config/rootDirectory")),
                "{}: {body}",
                root.display()
            );
        }
        let (status, body) = call(
            &layout.confinement,
            Operation::Get,
            reference(&root, "File", "cairn.key"),
        )
        .await;
        assert_eq!(status, 400, "{}: {body}", root.display());
    }
    let (_, body) = call(
        &layout.confinement,
        Operation::CreateOrUpdate,
        file(layout.path("outside"), "x", "x"),
    )
    .await;
    assert!(
        message_of(&body).contains(&roots.display().to_string()),
        "the error names the allowed roots: {body}"
    );
    assert_eq!(
        std::fs::read_dir(layout.path("outside")).unwrap().count(),
        0
    );
    assert_eq!(std::fs::read_dir(layout.path("data")).unwrap().count(), 1);
}

#[tokio::test]
async fn a_symlinked_root_leading_out_is_refused() {
    let layout = Layout::new();
    std::os::unix::fs::symlink(layout.path("data"), layout.path("roots/data-link")).unwrap();
    let (status, body) = call(
        &layout.confinement,
        Operation::Get,
        reference(layout.path("roots/data-link"), "File", "cairn.key"),
    )
    .await;
    assert_eq!(
        (status, error_of(&body)),
        (400, ("RootDirectoryNotAllowed", "/config/rootDirectory")),
        "{body}"
    );
}

#[tokio::test]
async fn roots_inside_the_allowed_roots_work_and_relative_ones_start_at_the_first() {
    let layout = Layout::new();
    let (status, body) = call(
        &layout.confinement,
        Operation::CreateOrUpdate,
        file(layout.path("roots/site"), "a/b.txt", "hello"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(layout.path("roots/site/a/b.txt")).unwrap(),
        "hello"
    );
    let (status, body) = call(
        &layout.confinement,
        Operation::CreateOrUpdate,
        file("./rel", "c.txt", "relative"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(layout.path("roots/rel/c.txt")).unwrap(),
        "relative"
    );
    let (status, body) = call(
        &layout.confinement,
        Operation::Get,
        reference(layout.path("roots/site"), "File", "a/b.txt"),
    )
    .await;
    assert_eq!(
        (status, &body["properties"]["content"]),
        (200, &json!("hello"))
    );
}

#[tokio::test]
async fn paths_leaving_the_root_are_refused() {
    let layout = Layout::new();
    let root = layout.path("roots/site");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(layout.path("outside"), root.join("escape")).unwrap();
    for path in ["../x.txt", "/etc/passwd", "a/../../x", "escape/x.txt"] {
        let (status, body) = call(
            &layout.confinement,
            Operation::CreateOrUpdate,
            file(&root, path, "x"),
        )
        .await;
        assert_eq!(
            (status, error_of(&body)),
            (400, ("PathOutsideRoot", "/properties/path")),
            "{path}: {body}"
        );
    }
    assert_eq!(
        std::fs::read_dir(layout.path("outside")).unwrap().count(),
        0
    );
}

/// Links inside the root to the server's own files are refused for read, write and delete, and the files
/// stay as they were.
#[tokio::test]
async fn symlinks_into_denied_paths_are_refused() {
    let layout = Layout::new();
    let root = layout.path("roots/site");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(layout.path("tokens"), root.join("tokens-link")).unwrap();
    std::os::unix::fs::symlink(layout.path("data"), root.join("data-link")).unwrap();
    std::os::unix::fs::symlink(layout.path("data/cairn.key"), root.join("key-link")).unwrap();
    for path in [
        "tokens-link",
        "data-link/cairn.key",
        "key-link",
        "data-link/new.txt",
    ] {
        let (status, body) = call(
            &layout.confinement,
            Operation::Get,
            reference(&root, "File", path),
        )
        .await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            !body.to_string().contains("unscoped-token")
                && !body.to_string().contains("master key"),
            "{body}"
        );
        let (status, body) = call(
            &layout.confinement,
            Operation::CreateOrUpdate,
            file(&root, path, "overwritten"),
        )
        .await;
        assert_eq!(status, 400, "{path}: {body}");
        let (status, body) = call(
            &layout.confinement,
            Operation::Delete,
            reference(&root, "File", path),
        )
        .await;
        assert_eq!(status, 400, "{path}: {body}");
    }
    assert_eq!(
        std::fs::read_to_string(layout.path("tokens")).unwrap(),
        "unscoped-token"
    );
    assert_eq!(
        std::fs::read_to_string(layout.path("data/cairn.key")).unwrap(),
        "master key"
    );
    assert!(!layout.path("data/new.txt").exists());
}

/// A link put in place after the path was validated (by a preview) is still refused when the operation
/// runs: every operation resolves the path again.
#[tokio::test]
async fn a_symlink_swapped_in_after_validation_is_refused() {
    let layout = Layout::new();
    let root = layout.path("roots/site");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let spec = file(&root, "sub/cairn.key", "overwritten");
    let (status, body) = call(&layout.confinement, Operation::Preview, spec.clone()).await;
    assert_eq!(status, 200, "{body}");
    std::fs::remove_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(layout.path("data"), root.join("sub")).unwrap();
    let (status, body) = call(&layout.confinement, Operation::CreateOrUpdate, spec).await;
    assert_eq!(
        (status, error_of(&body)),
        (400, ("PathDenied", "/properties/path")),
        "{body}"
    );
    let (status, _) = call(
        &layout.confinement,
        Operation::Delete,
        reference(&root, "File", "sub/cairn.key"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        std::fs::read_to_string(layout.path("data/cairn.key")).unwrap(),
        "master key"
    );
}

/// A root may hold the server's files (e.g. `--local-root /srv` with the data in `/srv/cairn`): paths into
/// them are still refused, directly and through a hard link.
#[tokio::test]
async fn denied_paths_inside_an_allowed_root_are_refused() {
    let temp = tempfile::tempdir().unwrap();
    let base = temp.path().canonicalize().unwrap();
    std::fs::create_dir(base.join("data")).unwrap();
    std::fs::write(base.join("data/cairn.key"), "master key").unwrap();
    std::fs::write(base.join("tokens"), "unscoped-token").unwrap();
    std::fs::hard_link(base.join("tokens"), base.join("tokens-hard")).unwrap();
    let confinement = Arc::new(
        Confinement::new([base.clone()], [base.join("data"), base.join("tokens")]).unwrap(),
    );
    for path in ["data/cairn.key", "tokens", "data/new.txt", "data"] {
        let (status, body) =
            call(&confinement, Operation::Get, reference(&base, "File", path)).await;
        assert_eq!(
            (status, error_of(&body)),
            (400, ("PathDenied", "/identifiers/path")),
            "{path}: {body}"
        );
        let (status, body) = call(
            &confinement,
            Operation::CreateOrUpdate,
            file(&base, path, "overwritten"),
        )
        .await;
        assert_eq!(
            (status, error_of(&body)),
            (400, ("PathDenied", "/properties/path")),
            "{path}: {body}"
        );
        let (status, _) = call(
            &confinement,
            Operation::Delete,
            reference(&base, "File", path),
        )
        .await;
        assert_eq!(status, 400, "{path}");
    }
    let (status, body) = call(
        &confinement,
        Operation::Get,
        reference(&base, "File", "tokens-hard"),
    )
    .await;
    assert_eq!(status, 400, "a hard link to a denied file: {body}");
    let (status, body) = call(
        &confinement,
        Operation::CreateOrUpdate,
        file(base.join("data"), "x.txt", "x"),
    )
    .await;
    assert_eq!(
        (status, error_of(&body)),
        (400, ("RootDirectoryNotAllowed", "/config/rootDirectory")),
        "{body}"
    );
    assert_eq!(
        std::fs::read_to_string(base.join("tokens")).unwrap(),
        "unscoped-token"
    );
    assert_eq!(
        std::fs::read_to_string(base.join("data/cairn.key")).unwrap(),
        "master key"
    );
    assert!(!base.join("data/new.txt").exists());
}

#[test]
fn a_root_inside_a_denied_path_or_missing_is_refused_at_startup() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    std::fs::create_dir_all(data.join("files")).unwrap();
    let err = Confinement::new([data.join("files")], [data.clone()]).unwrap_err();
    assert!(
        matches!(err, cairn_ext_local::ConfinementError::InsideDenied { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("keeps for itself"), "{err}");
    let err = Confinement::new([temp.path().join("missing")], []).unwrap_err();
    assert!(
        matches!(err, cairn_ext_local::ConfinementError::NotADirectory(_)),
        "{err}"
    );
}

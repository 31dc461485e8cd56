//! Local's declared types: `cairn-ext-local --types DIR` writes files that load back as the same set, and they
//! judge `File` and `Directory` bodies as the handlers do.

use std::process::Command;

use cairn_extension_sdk::types::{Body, FindingKind, TypeSet, check_body};
use serde_json::json;

#[test]
fn the_binary_writes_its_type_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-ext-local"))
        .arg("--types")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index = std::fs::read_to_string(dir.path().join("index.json")).unwrap();
    let loaded = TypeSet::load(&index, |name| {
        std::fs::read_to_string(dir.path().join(name)).ok()
    })
    .unwrap();
    assert_eq!(loaded, cairn_ext_local::types());
    let settings = loaded.settings().unwrap();
    assert_eq!(
        (settings.name.as_str(), settings.version.as_str()),
        ("Local", "1.0.0")
    );
    assert!(loaded.configuration().is_some());
}

#[test]
fn file_and_directory_bodies_are_judged() {
    let types = cairn_ext_local::types();
    let file = types.resource("File", None, Some("1.0.0")).unwrap();
    let directory = types.resource("directory", None, Some("1.0.0")).unwrap();
    let kinds = |id, body: serde_json::Value| -> Vec<FindingKind> {
        check_body(&types, id, &Body::from_json(&body))
            .into_iter()
            .map(|f| f.kind)
            .collect()
    };
    assert_eq!(
        kinds(file, json!({"path": "a", "content": "x", "mode": "0644"})),
        vec![]
    );
    assert_eq!(kinds(file, json!({"path": "a", "mode": "755"})), vec![]);
    assert_eq!(kinds(directory, json!({"path": "a"})), vec![]);
    assert_eq!(
        kinds(directory, json!({"path": "a", "content": "x"})),
        vec![FindingKind::UnknownProperty]
    );
    assert_eq!(
        kinds(file, json!({"content": "x"})),
        vec![FindingKind::MissingProperty]
    );
}

#[tokio::test]
async fn a_grpc_extension_publishes_its_types_and_the_registry_fetches_them_once() {
    use std::sync::Arc;

    use cairn_extension_contract::transport::ExtensionTransport;
    use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
    use cairn_host::{RegisteredExtension, Registry};

    let transport =
        LocalProcessTransport::new(LaunchSpec::new(env!("CARGO_BIN_EXE_cairn-ext-local")));
    let files = transport
        .type_files()
        .await
        .unwrap()
        .expect("Local publishes types");
    assert_eq!(
        TypeSet::from_files(&files).unwrap(),
        cairn_ext_local::types()
    );
    transport.shutdown().await;

    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        "Local",
        "1.0.0",
        Arc::new(LocalProcessTransport::new(LaunchSpec::new(env!(
            "CARGO_BIN_EXE_cairn-ext-local"
        )))),
    ));
    assert!(registry.types("Local", "1.0.0").is_none(), "not asked yet");
    let fetched = registry
        .fetch_types("Local", "1.0.0")
        .await
        .expect("fetched");
    assert_eq!(*fetched, cairn_ext_local::types());
    assert!(
        registry.types("Local", "1.0.0").is_some(),
        "kept for the preflight"
    );
}

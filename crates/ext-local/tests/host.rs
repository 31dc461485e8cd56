//! The extensibility host drives Local through a registry: as the in-process built-in and as a gRPC
//! binary started by the process transport, with the same results.

mod common;

use std::sync::Arc;

use cairn_extension_contract::ExtensionTransport;
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use cairn_host::{
    CallContext, CreateOrUpdateRequest, ExtensionConfig, ExtensionHost, ExtensionKey, GrpcLaunch,
    HostSettings, Registry, ResourceLocator, TransportFactories,
};
use serde_json::{Value, json};

fn factories() -> TransportFactories {
    let mut factories = TransportFactories::default();
    factories.builtins.insert(
        "local".into(),
        Arc::new(cairn_ext_local::in_process_transport()),
    );
    factories.grpc_launcher = Some(Arc::new(|launch: &GrpcLaunch| {
        let mut spec = LaunchSpec::new(&launch.binary);
        spec.args = launch.args.clone();
        Ok(Arc::new(LocalProcessTransport::new(spec)) as Arc<dyn ExtensionTransport>)
    }));
    factories
}

fn config(root: &std::path::Path) -> ExtensionConfig {
    let Value::Object(map) = json!({ "rootDirectory": root }) else {
        unreachable!("an object literal")
    };
    ExtensionConfig::new(map)
}

#[tokio::test]
async fn host_deploys_through_builtin_and_grpc_local() {
    let registry_json = json!({ "extensions": [
        { "name": "Local", "version": "1.0.0", "transport": { "kind": "builtin", "builtin": "local" } },
        { "name": "LocalGrpc", "version": "1.0.0", "transport": { "kind": "grpc", "binary": common::BINARY } }
    ] });
    let registry = Registry::from_json(
        &registry_json.to_string(),
        std::path::Path::new("."),
        &factories(),
        &|_| None,
    )
    .unwrap();
    let host = ExtensionHost::new(
        Arc::new(registry),
        HostSettings::default(),
        "https://cairn.test/",
    );
    let context = CallContext::default();

    for name in ["Local", "LocalGrpc"] {
        let root = tempfile::tempdir().unwrap();
        let key = ExtensionKey::new(name, "1.0.0");
        let deployed = host
            .create_or_update(
                &key,
                CreateOrUpdateRequest {
                    resource_type: "File".into(),
                    api_version: None,
                    properties: json!({ "path": "hello.txt", "content": "hi" }),
                    config: Some(config(root.path())),
                    config_id: None,
                    known_identifiers: None,
                },
                &context,
            )
            .await
            .unwrap_or_else(|err| panic!("{name}: {err:?}"));
        assert_eq!(
            deployed.identifiers,
            json!({ "path": "hello.txt" }),
            "{name}"
        );
        assert_eq!(
            std::fs::read_to_string(root.path().join("hello.txt")).unwrap(),
            "hi"
        );

        let locator = ResourceLocator {
            resource_type: "File".into(),
            api_version: None,
            identifiers: deployed.identifiers.clone(),
            config: Some(config(root.path())),
            config_id: deployed.config_id.clone(),
        };
        let found = host
            .get(&key, &locator, &context)
            .await
            .unwrap()
            .expect("found");
        assert_eq!(found.properties["content"], "hi");
        host.delete(&key, &locator, &context).await.unwrap();
        assert!(
            host.get(&key, &locator, &context).await.unwrap().is_none(),
            "{name}"
        );
        assert!(!root.path().join("hello.txt").exists());
    }
}

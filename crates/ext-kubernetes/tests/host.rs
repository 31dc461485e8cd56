//! The extensibility host drives the Kubernetes extension as the in-process built-in and as the gRPC
//! binary: a create whose `waitFor` outlasts the request (the host polls get until ready), a delete held
//! by a finalizer (the host polls get until 404), and a delete carrying another control plane's
//! `configId`, which deletes nothing, over gRPC too (where `configId` travels in cairn's addition to the
//! messages).

mod common;

use std::sync::Arc;
use std::time::Duration;

use cairn_extension_contract::ExtensionTransport;
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use cairn_host::{
    CallContext, CreateOrUpdateRequest, ExtensionConfig, ExtensionHost, ExtensionKey, GrpcLaunch,
    HostErrorKind, HostSettings, Registry, ResourceLocator, TransportFactories,
};
use cairn_testkube::TestKube;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

fn factories() -> TransportFactories {
    let mut factories = TransportFactories::default();
    factories.builtins.insert(
        "kubernetes".into(),
        Arc::new(cairn_ext_kubernetes::in_process_transport()),
    );
    factories.grpc_launcher = Some(Arc::new(|launch: &GrpcLaunch| {
        let mut spec = LaunchSpec::new(&launch.binary);
        spec.args = launch.args.clone();
        Ok(Arc::new(LocalProcessTransport::new(spec)) as Arc<dyn ExtensionTransport>)
    }));
    factories
}

fn config(kube: &TestKube, namespace: &str) -> ExtensionConfig {
    let Value::Object(map) = common::config_for(kube, namespace) else {
        unreachable!("an object literal")
    };
    ExtensionConfig::new(map)
}

#[test]
fn host_follows_readiness_and_deletes_and_refuses_another_cluster() {
    let kube = TestKube::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let admin = common::admin(&kube).await;
        let registry_json = json!({ "extensions": [
            { "name": "Kubernetes", "version": "1.0.0",
              "transport": { "kind": "builtin", "builtin": "kubernetes" } },
            { "name": "KubernetesGrpc", "version": "1.0.0",
              "transport": { "kind": "grpc", "binary": common::BINARY } }
        ] });
        let registry = Registry::from_json(
            &registry_json.to_string(),
            std::path::Path::new("."),
            &factories(),
            &|_| None,
        )
        .unwrap();
        let settings = HostSettings {
            relo_poll_interval: Duration::from_millis(500),
            // A test that waits for something that never comes fails instead of hanging.
            operation_deadline: Duration::from_secs(120),
            ..HostSettings::default()
        };
        let host = ExtensionHost::new(Arc::new(registry), settings, "https://cairn.test/");
        let context = CallContext::default();

        for (name, namespace) in [("Kubernetes", "via-builtin"), ("KubernetesGrpc", "via-grpc")] {
            let key = ExtensionKey::new(name, "1.0.0");
            let ext = common::Ext::new(common::config_for(&kube, "default"));
            ext.applied("core/Namespace@v1", json!({ "metadata": { "name": namespace } }))
                .await
                .unwrap();
            let apply = |resource_type: &str, properties: Value| CreateOrUpdateRequest {
                resource_type: resource_type.into(),
                api_version: Some("v1".into()),
                properties,
                config: Some(config(&kube, namespace)),
                config_id: None,
                known_identifiers: None,
            };

            // Ready only after another manager scales it to zero, past the request's own wait.
            let deployments: Api<Deployment> = Api::namespaced(admin.clone(), namespace);
            let scaler = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(12)).await;
                deployments
                    .patch("web", &PatchParams { field_manager: Some("autoscaler".into()), ..Default::default() },
                           &Patch::Merge(json!({ "spec": { "replicas": 0 } })))
                    .await
            });
            let deployed = host
                .create_or_update(
                    &key,
                    apply("apps/Deployment", json!({
                        "metadata": { "name": "web" },
                        "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "web" } },
                                  "template": { "metadata": { "labels": { "app": "web" } },
                                                "spec": { "containers": [ { "name": "web", "image": "nginx:1.27" } ] } } },
                        "waitFor": { "condition": "Available", "timeoutSeconds": 60 }
                    })),
                    &context,
                )
                .await
                .unwrap_or_else(|err| panic!("{name}: {err:?}"));
            scaler.await.unwrap().unwrap();
            assert_eq!(deployed.identifiers, common::ids(namespace, "web"), "{name}");

            // A finalizer holds the ConfigMap; the host's delete returns once it is removed.
            let held = host
                .create_or_update(
                    &key,
                    apply("core/ConfigMap", json!({ "metadata": { "name": "held", "finalizers": ["example.com/hold"] } })),
                    &context,
                )
                .await
                .unwrap_or_else(|err| panic!("{name}: {err:?}"));
            let locator = ResourceLocator {
                resource_type: "core/ConfigMap".into(),
                api_version: Some("v1".into()),
                identifiers: held.identifiers.clone(),
                config: Some(config(&kube, namespace)),
                config_id: held.config_id.clone(),
            };

            let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
            // The cluster's identity comes back over both transports, and another cluster's configId is
            // refused, nothing deleted.
            assert_eq!(
                held.config_id.as_ref().map(String::len),
                Some(64),
                "{name}: {:?}",
                held.config_id
            );
            let wrong = ResourceLocator {
                config_id: Some("0".repeat(64)),
                ..locator.clone()
            };
            let err = host.delete(&key, &wrong, &context).await.unwrap_err();
            assert_eq!(err.kind(), HostErrorKind::ConfigMismatch, "{name}: {err:?}");
            let live = maps.get("held").await.unwrap();
            assert!(live.metadata.deletion_timestamp.is_none(), "{name}: deleted on a mismatch");

            let release = tokio::spawn({
                let maps = maps.clone();
                async move {
                    tokio::time::sleep(Duration::from_secs(7)).await;
                    maps.patch("held", &PatchParams::default(),
                               &Patch::Merge(json!({ "metadata": { "finalizers": null } })))
                        .await
                }
            });
            host.delete(&key, &locator, &context)
                .await
                .unwrap_or_else(|err| panic!("{name}: {err:?}"));
            release.await.unwrap().unwrap();
            assert!(maps.get_opt("held").await.unwrap().is_none(), "{name}");
            assert!(host.get(&key, &locator, &context).await.unwrap().is_none(), "{name}");
        }
    });
}

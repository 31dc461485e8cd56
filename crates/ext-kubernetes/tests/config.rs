//! The config forms against a real API server: the built-in `Kubernetes` 1.0.0 form and the OCI types'
//! form, base64 and plain YAML, both spellings, the `auth` group; what is refused (`clusterType:
//! Managed`, no kubeconfig, a kubeconfig running a program); and `configId`: one per cluster whatever
//! the form or credentials, another for another cluster, and a request carrying another cluster's id is
//! refused.

mod common;

use anyhow::{Result, ensure};
use cairn_testkube::TestKube;
use common::{Ext, Scenario, kubeconfig_base64, run_all, service_account_token, token_kubeconfig};
use serde_json::{Value, json};

fn config_map(name: &str) -> Value {
    json!({ "metadata": { "name": name }, "data": { "form": name } })
}

/// Applies a ConfigMap named `name` with `config` (as extension version `version`); its configId.
async fn apply_with(config: Value, version: &str, name: &str) -> Result<String> {
    let mut ext = Ext::new(config.clone());
    ext.version = version.into();
    let (status, body) = ext.apply("core/ConfigMap@v1", config_map(name)).await;
    ensure!(status == 200, "{name}: {status} {body}");
    ensure!(
        body["identifiers"] == json!({ "metadata": { "name": name, "namespace": "forms" } }),
        "{name}: {body}"
    );
    for secret in ["kubeConfig", "kubeconfig", "auth"] {
        ensure!(
            body["config"].get(secret).is_none(),
            "{name}: {secret} echoed: {}",
            body["config"]
        );
    }
    let id = body["configId"].as_str().unwrap_or_default().to_owned();
    ensure!(id.len() == 64, "{name}: configId {id:?}");
    Ok(id)
}

/// The error code and target of a refused request.
async fn refused(config: Value) -> (u16, String, String) {
    let (status, body) = Ext::new(config)
        .apply("core/ConfigMap@v1", config_map("refused"))
        .await;
    let error = &body["error"];
    let target = error["target"]
        .as_str()
        .or_else(|| error["details"][0]["target"].as_str())
        .unwrap_or_default()
        .to_owned();
    (
        status,
        error["code"].as_str().unwrap_or_default().to_owned(),
        target,
    )
}

#[test]
fn config_forms_and_config_id_against_real_clusters() {
    // Two control planes, started at once (each takes a while on a busy machine).
    let other = std::thread::spawn(TestKube::start);
    let kube = TestKube::start();
    let other = other.join().expect("the second control plane");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let admin = common::admin(&kube).await;
        let encoded = kubeconfig_base64(&kube);
        let plain = kube.kubeconfig().to_owned();
        let namespace = Ext::new(common::config_for(&kube, "default"));
        namespace
            .applied("core/Namespace@v1", json!({ "metadata": { "name": "forms" } }))
            .await
            .unwrap();
        let forms: Vec<(&str, &str, Value)> = vec![
            ("builtin-base64", "1.0.0", json!({ "kubeConfig": encoded, "namespace": "forms" })),
            ("builtin-plain", "1.0.0", json!({ "kubeConfig": plain, "namespace": "forms" })),
            (
                "builtin-context",
                "1.0.0",
                json!({ "kubeConfig": encoded, "namespace": "forms", "context": "cairn-testkube" }),
            ),
            (
                "oci-custom",
                "1.33.0",
                json!({ "clusterType": "Custom", "kubeconfig": encoded, "namespace": "forms" }),
            ),
            ("oci-plain", "1.37.0", json!({ "clusterType": "Custom", "kubeconfig": plain, "namespace": "forms" })),
            ("auth-group", "1.0.0", json!({ "namespace": "forms", "auth": { "kubeConfig": encoded } })),
            ("auth-lower", "1.33.0", json!({ "namespace": "forms", "auth": { "kubeconfig": plain } })),
        ];
        let mut ids = Vec::new();
        for (name, version, config) in forms {
            ids.push((name, apply_with(config, version, name).await.unwrap()));
        }
        let first = ids[0].1.clone();
        for (name, id) in &ids {
            assert_eq!(id, &first, "{name}: configId differs");
        }

        // Another cluster, another id; a request carrying this cluster's id is refused there.
        let other_config = json!({ "kubeConfig": kubeconfig_base64(&other), "namespace": "default" });
        let other_id = apply_with_default_namespace(other_config.clone()).await;
        assert_ne!(other_id, first);
        let (status, body) = Ext::new(other_config)
            .call(
                cairn_extension_contract::transport::Operation::Get,
                json!({ "type": "core/ConfigMap", "apiVersion": "v1", "configId": first,
                        "identifiers": { "metadata": { "name": "other", "namespace": "default" } } }),
            )
            .await;
        assert_eq!((status, body["error"]["code"].as_str()), (422, Some("ConfigIdMismatch")), "{body}");

        // A service account allowed to read kube-system identifies the cluster the same way; one that
        // may not falls back to the CA (stable, but its own).
        let scenarios: Vec<Scenario> = vec![
            ("cluster-admin token", Box::pin({
                let (admin, kube_config, first) = (admin.clone(), token_config_source(&kube), first.clone());
                async move {
                    let token = service_account_token(&admin, "default", "deployer", "cluster-admin", true).await?;
                    let id = apply_with(json!({ "kubeConfig": token_kubeconfig_from(&kube_config, &token),
                                                "namespace": "forms" }), "1.0.0", "by-deployer").await?;
                    ensure!(id == first, "a cluster-admin token gives another configId");
                    Ok(())
                }
            })),
            ("namespace-scoped token", Box::pin({
                let (admin, kube_config, first) = (admin.clone(), token_config_source(&kube), first.clone());
                async move {
                    let token = service_account_token(&admin, "forms", "editor", "edit", false).await?;
                    let config = json!({ "kubeConfig": token_kubeconfig_from(&kube_config, &token),
                                         "namespace": "forms" });
                    let id = apply_with(config.clone(), "1.0.0", "by-editor").await?;
                    ensure!(id != first, "a CA-based identity equals the kube-system one");
                    ensure!(id == apply_with(config, "1.0.0", "by-editor").await?, "unstable");
                    Ok(())
                }
            })),
        ];
        run_all(scenarios).await;

        // What is refused, and where it points.
        let cases = [
            (
                json!({ "clusterType": "Managed", "managedClusterId": "/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/c", "credentialType": "Admin" }),
                (400, "InvalidConfig", "/config/clusterType"),
            ),
            (json!({ "namespace": "forms" }), (400, "InvalidConfig", "/config/kubeConfig")),
            (json!({ "clusterType": "Custom", "namespace": "forms" }), (400, "InvalidConfig", "/config/kubeConfig")),
            (
                json!({ "kubeConfig": plain.replace("client-key-data:", "exec: { command: /bin/true }\n    x-key-data:"), "namespace": "forms" }),
                (400, "InvalidKubeconfig", "/config/kubeConfig"),
            ),
            (
                json!({ "kubeConfig": encoded, "context": "nope", "namespace": "forms" }),
                (400, "InvalidKubeconfig", "/config/kubeConfig"),
            ),
        ];
        for (config, (status, code, target)) in cases {
            assert_eq!(
                refused(config.clone()).await,
                (status, code.to_owned(), target.to_owned()),
                "{config}"
            );
        }
        let (status, body) = Ext::new(json!({ "clusterType": "Managed" }))
            .apply("core/ConfigMap@v1", config_map("managed"))
            .await;
        assert_eq!(status, 400);
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Azure credentials") && message.contains("'Custom'"), "{message}");
    });
    drop(runtime);

    // Clients belong to the runtime that made them (the in-process CLI runs each command on its own):
    // a later runtime gets a working client, and those of runtimes that shut down are dropped.
    let config = json!({ "kubeConfig": kubeconfig_base64(&kube), "namespace": "forms" });
    for round in 0..3 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let name = format!("round-{round}");
        runtime
            .block_on(apply_with(config.clone(), "1.0.0", &name))
            .unwrap_or_else(|err| panic!("{name}: {err:#}"));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (status, body) = Ext::new(config.clone())
            .get("core/ConfigMap@v1", common::ids("forms", "round-2"))
            .await;
        assert_eq!(status, 200, "{body}");
    });
    // Only this runtime's client is left (the registry forgets the others on the next use).
    assert_eq!(cairn_ext_kubernetes::cluster::Clusters::global().len(), 1);
}

async fn apply_with_default_namespace(config: Value) -> String {
    let (status, body) = Ext::new(config)
        .apply("core/ConfigMap@v1", config_map("other"))
        .await;
    assert_eq!(status, 200, "{body}");
    body["configId"].as_str().unwrap().to_owned()
}

/// What a token kubeconfig needs of the cluster (server URL and CA), owned for a task.
fn token_config_source(kube: &TestKube) -> (String, String) {
    (kube.server_url(), kube.ca_pem().to_owned())
}

fn token_kubeconfig_from((server, ca): &(String, String), token: &str) -> String {
    token_kubeconfig(server, ca, token)
}

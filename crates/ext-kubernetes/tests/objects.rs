//! Objects through their whole lifecycle on a real API server, each scenario in a namespace of its own
//! and all against one control plane: Namespace, ConfigMap, Secret (stringData), Deployment, Service,
//! a CRD and a custom resource right after it; server-side apply conflicts and `force`; deletes that
//! wait for finalizers and honour the propagation policy; preview by dry run (defaults shown,
//! validation errors reported, nothing written); readiness (`waitFor`); objects created by `kubectl`
//! taken over; missing and unknown objects and kinds.
//!
//! Every response and every log line of the run (the extension's and the Kubernetes client's, at
//! TRACE) is kept, and at the end none may hold the kubeconfig's credentials or a Secret's values.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use common::{Ext, Scenario, Transcript, cluster_ids, eventually, ids, run_all};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// Values that must never leave the extension: a Secret's.
const CANARY_PASSWORD: &str = "canary-Pa55word-7f3e";
const CANARY_TOKEN: &str = "canary-t0ken-91bd";

/// A log sink shared by the subscriber and the test.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn namespace(name: &str) -> Value {
    json!({ "metadata": { "name": name } })
}

fn config_map(name: &str, data: Value) -> Value {
    json!({ "metadata": { "name": name }, "data": data })
}

fn deployment(name: &str, replicas: u32, extra: Value) -> Value {
    let mut body = json!({
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [ { "name": "web", "image": "nginx:1.27" } ] }
            }
        }
    });
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    body
}

fn dynamic(
    admin: &kube::Client,
    namespace: Option<&str>,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    );
    match namespace {
        Some(namespace) => Api::namespaced_with(admin.clone(), namespace, &resource),
        None => Api::all_with(admin.clone(), &resource),
    }
}

async fn replica_sets(admin: &kube::Client, namespace: &str, app: &str) -> Result<Vec<ReplicaSet>> {
    let api: Api<ReplicaSet> = Api::namespaced(admin.clone(), namespace);
    Ok(api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?
        .items)
}

/// Namespace, ConfigMap and Secret: create, read, update (a key dropped from the template goes), delete.
async fn basics(ext: Ext, admin: kube::Client) -> Result<()> {
    let created = ext
        .applied("core/Namespace@v1", namespace("basics"))
        .await?;
    ensure!(created["identifiers"] == cluster_ids("basics"), "{created}");
    let properties = &created["properties"];
    ensure!(
        properties["kind"] == "Namespace" && properties["apiVersion"] == "v1",
        "{created}"
    );
    ensure!(
        properties.get("status").is_none(),
        "status noise: {created}"
    );
    ensure!(
        properties["metadata"].get("managedFields").is_none(),
        "{created}"
    );
    ensure!(
        properties["metadata"].get("resourceVersion").is_none(),
        "{created}"
    );
    ensure!(properties["metadata"]["uid"].is_string(), "{created}");

    let applied = ext
        .applied(
            "core/ConfigMap@v1",
            json!({ "metadata": { "name": "settings", "namespace": "basics" },
                                              "data": { "a": "1", "b": "2" } }),
        )
        .await?;
    ensure!(
        applied["identifiers"] == ids("basics", "settings"),
        "{applied}"
    );
    let (status, got) = ext
        .get("core/ConfigMap@v1", ids("basics", "settings"))
        .await;
    ensure!(
        status == 200 && got["properties"]["data"] == json!({ "a": "1", "b": "2" }),
        "{status} {got}"
    );
    ensure!(got["status"].is_null(), "{got}");
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "basics");
    ext.applied(
        "core/ConfigMap@v1",
        json!({ "metadata": { "name": "settings", "namespace": "basics" },
                                             "data": { "a": "10" } }),
    )
    .await?;
    let live = maps.get("settings").await?;
    ensure!(
        live.data == Some([("a".to_owned(), "10".to_owned())].into()),
        "b should be gone: {:?}",
        live.data
    );

    let secret = ext
        .applied(
            "core/Secret@v1",
            json!({
                "metadata": { "name": "creds", "namespace": "basics" },
                "type": "Opaque",
                "stringData": { "password": CANARY_PASSWORD },
                "data": { "token": data_encoding::BASE64.encode(CANARY_TOKEN.as_bytes()) }
            }),
        )
        .await?;
    ensure!(secret["properties"].get("data").is_none(), "{secret}");
    ensure!(secret["properties"].get("stringData").is_none(), "{secret}");
    ensure!(secret["properties"]["type"] == "Opaque", "{secret}");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "basics");
    let live = secrets.get("creds").await?.data.unwrap_or_default();
    ensure!(
        live.get("password").map(|v| v.0.as_slice()) == Some(CANARY_PASSWORD.as_bytes()),
        "password"
    );
    ensure!(
        live.get("token").map(|v| v.0.as_slice()) == Some(CANARY_TOKEN.as_bytes()),
        "token"
    );
    let (status, got) = ext.get("core/Secret@v1", ids("basics", "creds")).await;
    ensure!(
        status == 200 && got["properties"].get("data").is_none(),
        "{status} {got}"
    );

    // A secret value where the API server quotes it (a label value) comes back redacted.
    let (status, refused) = ext
        .apply(
            "core/Secret@v1",
            json!({
                "metadata": { "name": "quoted", "namespace": "basics",
                              "labels": { "leak": format!("{CANARY_PASSWORD} with spaces") } },
                "stringData": { "password": CANARY_PASSWORD }
            }),
        )
        .await;
    ensure!(status == 400, "{status} {refused}");
    ensure!(refused.to_string().contains("[REDACTED]"), "{refused}");

    for (resource_type, identifiers) in [
        ("core/ConfigMap@v1", ids("basics", "settings")),
        ("core/Secret@v1", ids("basics", "creds")),
    ] {
        let (status, body) = ext.delete(resource_type, identifiers.clone()).await;
        ensure!(status == 204, "{resource_type}: {status} {body}");
        let (status, _) = ext.get(resource_type, identifiers).await;
        ensure!(status == 404, "{resource_type}: still there");
    }
    ensure!(maps.get_opt("settings").await?.is_none() && secrets.get_opt("creds").await?.is_none());
    // The namespace controller finishes a namespace's deletion: a Deleting answer, then 404.
    let outcome = ext
        .delete_until_gone("core/Namespace@v1", cluster_ids("basics"))
        .await?;
    let namespaces: Api<Namespace> = Api::all(admin);
    ensure!(
        namespaces.get_opt("basics").await?.is_none(),
        "namespace left after {outcome:?}"
    );
    Ok(())
}

/// A Deployment (admission defaults in the answer, a ReplicaSet from the controller-manager) and a
/// Service (a cluster IP assigned); updated, deleted, dependents collected.
async fn workloads(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("workloads"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("workloads"));
    let created = ext
        .applied("apps/Deployment@v1", deployment("web", 2, json!({})))
        .await?;
    ensure!(
        created["identifiers"] == ids("workloads", "web"),
        "{created}"
    );
    let spec = &created["properties"]["spec"];
    ensure!(
        spec["strategy"]["type"] == "RollingUpdate",
        "no defaults: {created}"
    );
    ensure!(spec["revisionHistoryLimit"] == 10, "{created}");
    ensure!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent",
        "{created}"
    );
    ensure!(created["properties"].get("status").is_none(), "{created}");
    eventually("the ReplicaSet of web", Duration::from_secs(60), || {
        let admin = admin.clone();
        async move { Ok(!replica_sets(&admin, "workloads", "web").await?.is_empty()) }
    })
    .await?;
    let service = ext
        .applied("core/Service@v1", json!({
            "metadata": { "name": "web" },
            "spec": { "selector": { "app": "web" }, "ports": [ { "port": 80, "targetPort": 8080 } ] }
        }))
        .await?;
    ensure!(
        service["properties"]["spec"]["clusterIP"].is_string(),
        "{service}"
    );
    ensure!(
        service["properties"]["spec"]["type"] == "ClusterIP",
        "{service}"
    );

    ext.applied("apps/Deployment@v1", deployment("web", 3, json!({})))
        .await?;
    let (status, got) = ext.get("apps/Deployment@v1", ids("workloads", "web")).await;
    ensure!(
        status == 200 && got["properties"]["spec"]["replicas"] == 3,
        "{status} {got}"
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "workloads");
    ensure!(deployments.get("web").await?.spec.replicas == Some(3));

    ext.delete_until_gone("core/Service@v1", ids("workloads", "web"))
        .await?;
    ext.delete_until_gone("apps/Deployment@v1", ids("workloads", "web"))
        .await?;
    ensure!(deployments.get_opt("web").await?.is_none());
    eventually(
        "the ReplicaSet collected (Background)",
        Duration::from_secs(60),
        || {
            let admin = admin.clone();
            async move { Ok(replica_sets(&admin, "workloads", "web").await?.is_empty()) }
        },
    )
    .await
}

/// `propagationPolicy` on the resource: Orphan leaves the ReplicaSet, Foreground deletes it first.
async fn propagation(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("propagation"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("propagation"));
    let orphaning = ext
        .applied(
            "apps/Deployment@v1",
            deployment("keep", 1, json!({ "propagationPolicy": "Orphan" })),
        )
        .await?;
    ensure!(
        orphaning["properties"]["propagationPolicy"] == "Orphan",
        "{orphaning}"
    );
    ensure!(
        orphaning["properties"]["metadata"]["annotations"]["cairn/propagation-policy"] == "Orphan",
        "{orphaning}"
    );
    ext.applied(
        "apps/Deployment@v1",
        deployment("drop", 1, json!({ "propagationPolicy": "Foreground" })),
    )
    .await?;
    for app in ["keep", "drop"] {
        eventually(
            &format!("the ReplicaSet of {app}"),
            Duration::from_secs(60),
            || {
                let admin = admin.clone();
                async move { Ok(!replica_sets(&admin, "propagation", app).await?.is_empty()) }
            },
        )
        .await?;
    }
    ext.delete_until_gone("apps/Deployment@v1", ids("propagation", "keep"))
        .await?;
    eventually(
        "the orphaned ReplicaSet without an owner",
        Duration::from_secs(60),
        || {
            let admin = admin.clone();
            async move {
                let sets = replica_sets(&admin, "propagation", "keep").await?;
                Ok(!sets.is_empty()
                    && sets.iter().all(|set| {
                        set.metadata
                            .owner_references
                            .clone()
                            .unwrap_or_default()
                            .is_empty()
                    }))
            }
        },
    )
    .await?;
    ext.delete_until_gone("apps/Deployment@v1", ids("propagation", "drop"))
        .await?;
    // Foreground: the Deployment goes only after its ReplicaSet.
    ensure!(
        replica_sets(&admin, "propagation", "drop")
            .await?
            .is_empty(),
        "ReplicaSet outlived its owner"
    );
    Ok(())
}

fn crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({
        "metadata": { "name": format!("{plural}.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "plural": plural, "singular": kind.to_lowercase(), "kind": kind },
            "versions": [ {
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                    "spec": { "type": "object", "properties": {
                        "cronSpec": { "type": "string" }, "replicas": { "type": "integer" } } } } } }
            } ]
        }
    })
}

/// A CRD and a custom resource right after it; and a custom resource whose kind the extension had
/// looked up (not served) before an admin installed its CRD.
async fn custom_resources(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("crs")).await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("crs"));
    let definition = ext
        .applied(
            "apiextensions.k8s.io/CustomResourceDefinition@v1",
            crd("stable.example.com", "CronTab", "crontabs"),
        )
        .await?;
    ensure!(
        definition["identifiers"] == cluster_ids("crontabs.stable.example.com"),
        "{definition}"
    );
    let created = ext
        .applied("stable.example.com/CronTab@v1", json!({
            "metadata": { "name": "nightly" }, "spec": { "cronSpec": "0 3 * * *", "replicas": 1 } }))
        .await?;
    ensure!(created["identifiers"] == ids("crs", "nightly"), "{created}");
    ensure!(
        created["properties"]["apiVersion"] == "stable.example.com/v1",
        "{created}"
    );
    ext.applied(
        "stable.example.com/CronTab@v1",
        json!({
        "metadata": { "name": "nightly" }, "spec": { "cronSpec": "0 4 * * *", "replicas": 1 } }),
    )
    .await?;
    let (status, got) = ext
        .get("stable.example.com/CronTab@v1", ids("crs", "nightly"))
        .await;
    ensure!(
        status == 200 && got["properties"]["spec"]["cronSpec"] == "0 4 * * *",
        "{status} {got}"
    );
    let crontabs = dynamic(
        &admin,
        Some("crs"),
        "stable.example.com",
        "v1",
        "CronTab",
        "crontabs",
    );
    ensure!(crontabs.get("nightly").await?.data["spec"]["cronSpec"] == "0 4 * * *");

    // The extension learns that example.org/v1 is not served; then the CRD appears behind its back.
    let (status, body) = ext.get("example.org/Widget@v1", ids("crs", "w")).await;
    ensure!(status == 404, "{status} {body}");
    let definitions = dynamic(
        &admin,
        None,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let mut widget = crd("example.org", "Widget", "widgets");
    widget["apiVersion"] = json!("apiextensions.k8s.io/v1");
    widget["kind"] = json!("CustomResourceDefinition");
    definitions
        .patch(
            "widgets.example.org",
            &PatchParams::apply("cairn-tests"),
            &Patch::Apply(widget),
        )
        .await?;
    let started = Instant::now();
    let created = ext
        .applied(
            "example.org/Widget@v1",
            json!({ "metadata": { "name": "w" }, "spec": { "replicas": 2 } }),
        )
        .await?;
    ensure!(created["properties"]["spec"]["replicas"] == 2, "{created}");
    eprintln!(
        "custom resource of a fresh CRD applied after {:?}",
        started.elapsed()
    );

    for (resource_type, identifiers) in [
        ("stable.example.com/CronTab@v1", ids("crs", "nightly")),
        ("example.org/Widget@v1", ids("crs", "w")),
        (
            "apiextensions.k8s.io/CustomResourceDefinition@v1",
            cluster_ids("crontabs.stable.example.com"),
        ),
        (
            "apiextensions.k8s.io/CustomResourceDefinition@v1",
            cluster_ids("widgets.example.org"),
        ),
    ] {
        ext.delete_until_gone(resource_type, identifiers)
            .await
            .context(resource_type)?;
    }
    ensure!(
        crontabs
            .get_opt("nightly")
            .await
            .map(|o| o.is_none())
            .unwrap_or(true)
    );
    // The extension's discovery still knows CronTab; applying one now fails at once, not after a wait.
    let started = Instant::now();
    let (status, body) = ext
        .apply(
            "stable.example.com/CronTab@v1",
            json!({ "metadata": { "name": "late" } }),
        )
        .await;
    ensure!(
        status == 400 && body["error"]["code"] == "UnknownResourceType",
        "{status} {body}"
    );
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    Ok(())
}

/// Another field manager changes a field cairn applied: 409 naming it (apply and preview), `force` on
/// the resource or in the config takes it over; `fieldManager` in the config names cairn's manager.
async fn conflicts(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("conflicts"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("conflicts"));
    let manifest = config_map("shared", json!({ "owner": "cairn", "keep": "x" }));
    ext.applied("core/ConfigMap@v1", manifest.clone()).await?;
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "conflicts");
    let edit = |manager: &'static str, value: &'static str| {
        let maps = maps.clone();
        async move {
            maps.patch(
                "shared",
                &PatchParams {
                    field_manager: Some(manager.into()),
                    ..Default::default()
                },
                &Patch::Merge(json!({ "data": { "owner": value } })),
            )
            .await
        }
    };
    edit("kubectl-edit", "someone-else").await?;
    let (status, body) = ext.apply("core/ConfigMap@v1", manifest.clone()).await;
    ensure!(
        status == 409 && body["error"]["code"] == "FieldManagerConflict",
        "{status} {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains("'kubectl-edit'") && message.contains(".data.owner"),
        "{message}"
    );
    let owner = || async {
        Ok::<_, anyhow::Error>(maps.get("shared").await?.data.unwrap_or_default()["owner"].clone())
    };
    ensure!(
        owner().await? == "someone-else",
        "a refused apply changed the object"
    );
    let (status, body) = ext.preview("core/ConfigMap@v1", manifest.clone()).await;
    ensure!(
        status == 409 && body["error"]["code"] == "FieldManagerConflict",
        "preview: {status} {body}"
    );

    let mut forced = manifest.clone();
    forced["force"] = json!(true);
    let taken = ext.applied("core/ConfigMap@v1", forced).await?;
    ensure!(taken["properties"].get("force").is_none(), "{taken}");
    ensure!(
        owner().await? == "cairn",
        "force did not take the field over"
    );
    let live = maps.get("shared").await?;
    let owners: Vec<String> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:data/f:owner").is_some())
        })
        .filter_map(|entry| entry.manager)
        .collect();
    ensure!(owners == ["cairn"], "owners of data.owner: {owners:?}");

    edit("helm", "helm-value").await?;
    let forcing = ext.with_config(|config| config["force"] = json!(true));
    forcing
        .applied("core/ConfigMap@v1", manifest.clone())
        .await?;
    ensure!(
        owner().await? == "cairn",
        "config force did not take the field over"
    );

    let ops = ext.with_config(|config| config["fieldManager"] = json!("ops-team"));
    ops.applied(
        "core/ConfigMap@v1",
        config_map("by-ops", json!({ "a": "1" })),
    )
    .await?;
    let managers: Vec<String> = maps
        .get("by-ops")
        .await?
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|entry| entry.manager)
        .collect();
    ensure!(managers == ["ops-team"], "{managers:?}");
    Ok(())
}

/// A finalizer holds a deleted object: delete answers `Deleting`, get keeps answering it `Deleting`,
/// and once the finalizer is removed the object is gone (404).
async fn finalizers(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("finalizers"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("finalizers"));
    ext.applied(
        "core/ConfigMap@v1",
        json!({ "metadata": { "name": "held", "finalizers": ["example.com/hold"] },
                                             "data": { "a": "1" } }),
    )
    .await?;
    let started = Instant::now();
    let (status, body) = ext
        .delete("core/ConfigMap@v1", ids("finalizers", "held"))
        .await;
    ensure!(
        status == 200 && body["status"] == "Deleting",
        "{status} {body}"
    );
    ensure!(
        started.elapsed() >= Duration::from_secs(4),
        "delete did not wait a little first"
    );
    ensure!(body["identifiers"] == ids("finalizers", "held"), "{body}");
    let (status, body) = ext
        .get("core/ConfigMap@v1", ids("finalizers", "held"))
        .await;
    ensure!(
        status == 200 && body["status"] == "Deleting",
        "{status} {body}"
    );
    ensure!(
        body["properties"]["metadata"]["deletionTimestamp"].is_string(),
        "{body}"
    );
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "finalizers");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        maps.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
    });
    // A second delete of an object already on its way out waits the same way.
    let outcome = ext
        .delete_until_gone("core/ConfigMap@v1", ids("finalizers", "held"))
        .await?;
    release.await??;
    ensure!(
        outcome.polls > 0 || outcome.elapsed >= Duration::from_secs(2),
        "{outcome:?}"
    );
    let (status, _) = ext
        .get("core/ConfigMap@v1", ids("finalizers", "held"))
        .await;
    ensure!(status == 404);
    Ok(())
}

/// Preview is a server-side dry run: defaults show, validation errors are reported, nothing is
/// written; what the API server cannot be asked about is predicted from the manifest.
async fn previews(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("previews"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("previews"));
    let (status, preview) = ext
        .preview("apps/Deployment@v1", deployment("planned", 2, json!({})))
        .await;
    ensure!(status == 200, "{status} {preview}");
    ensure!(
        preview["identifiers"] == ids("previews", "planned"),
        "{preview}"
    );
    let spec = &preview["properties"]["spec"];
    ensure!(
        spec["strategy"]["type"] == "RollingUpdate" && spec["progressDeadlineSeconds"] == 600,
        "{preview}"
    );
    ensure!(
        spec["template"]["spec"]["containers"][0]["terminationMessagePath"]
            == "/dev/termination-log",
        "{preview}"
    );
    ensure!(preview["configId"].is_string(), "{preview}");
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "previews");
    ensure!(
        deployments.get_opt("planned").await?.is_none(),
        "a preview wrote the Deployment"
    );

    // Validation: the API server's own (selector vs labels), and strict field validation.
    let mut mismatched = deployment("broken", 1, json!({}));
    mismatched["spec"]["selector"]["matchLabels"]["app"] = json!("other");
    let (status, body) = ext.preview("apps/Deployment@v1", mismatched).await;
    ensure!(
        status == 400 && body["error"]["code"] == "KubernetesOperationFailure",
        "{status} {body}"
    );
    ensure!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("selector"),
        "{body}"
    );
    let mut typo = deployment("typo", 1, json!({}));
    typo["spec"]["replicaz"] = json!(2);
    let (status, body) = ext.preview("apps/Deployment@v1", typo).await;
    ensure!(
        status == 400 && body.to_string().contains("replicaz"),
        "{status} {body}"
    );
    ensure!(
        deployments.get_opt("broken").await?.is_none()
            && deployments.get_opt("typo").await?.is_none()
    );

    // The future state of an existing object: a key the template drops disappears.
    ext.applied(
        "core/ConfigMap@v1",
        config_map("evolving", json!({ "a": "1", "b": "2" })),
    )
    .await?;
    let (status, preview) = ext
        .preview(
            "core/ConfigMap@v1",
            config_map("evolving", json!({ "b": "3" })),
        )
        .await;
    ensure!(
        status == 200 && preview["properties"]["data"] == json!({ "b": "3" }),
        "{status} {preview}"
    );
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "previews");
    ensure!(
        maps.get("evolving").await?.data.unwrap_or_default().len() == 2,
        "a preview changed the object"
    );

    // A namespace the same deployment creates: predicted from the manifest, identifiers known.
    let (status, preview) = ext
        .preview(
            "core/ConfigMap@v1",
            json!({ "metadata": { "name": "early", "namespace": "not-yet" },
                                               "data": { "a": "1" } }),
        )
        .await;
    ensure!(
        status == 200 && preview["identifiers"] == ids("not-yet", "early"),
        "{status} {preview}"
    );
    ensure!(preview["properties"]["kind"] == "ConfigMap", "{preview}");
    // A kind a CRD of the same deployment defines: predicted, identifiers from the manifest when it names
    // the namespace, unknown otherwise.
    let (status, preview) = ext
        .preview(
            "example.net/Gadget@v1",
            json!({ "metadata": { "name": "g", "namespace": "previews" }, "spec": {} }),
        )
        .await;
    ensure!(
        status == 200 && preview["identifiers"] == ids("previews", "g"),
        "{status} {preview}"
    );
    ensure!(
        preview["properties"]["apiVersion"] == "example.net/v1",
        "{preview}"
    );
    let (status, preview) = ext
        .preview(
            "example.net/Gadget@v1",
            json!({ "metadata": { "name": "g" } }),
        )
        .await;
    ensure!(status == 200, "{status} {preview}");
    ensure!(
        preview["metadata"]["unknown"]
            .to_string()
            .contains("/identifiers"),
        "{preview}"
    );
    // Unevaluated values are echoed unchanged and not validated.
    let expression = "[parameters('replicas')]";
    let mut unevaluated = deployment("later", 1, json!({}));
    unevaluated["spec"]["replicas"] = json!(expression);
    let (status, preview) = ext
        .call(
            cairn_extension_contract::transport::Operation::Preview,
            json!({ "type": "apps/Deployment", "apiVersion": "v1", "properties": unevaluated,
                    "metadata": { "unevaluated": ["/properties/spec/replicas"] } }),
        )
        .await;
    ensure!(
        status == 200 && preview["properties"]["spec"]["replicas"] == expression,
        "{status} {preview}"
    );
    ensure!(
        preview["identifiers"] == ids("previews", "later"),
        "{preview}"
    );
    ensure!(deployments.get_opt("later").await?.is_none());
    Ok(())
}

/// What does not exist: 404 on get, 204 on delete, clear 400s for types the cluster cannot serve.
async fn missing_and_unknown(ext: Ext) -> Result<()> {
    let (status, body) = ext
        .get("core/ConfigMap@v1", ids("default", "nothing-here"))
        .await;
    ensure!(
        status == 404 && body["error"]["code"] == "ResourceNotFound",
        "{status} {body}"
    );
    let (status, _) = ext
        .delete("core/ConfigMap@v1", ids("default", "nothing-here"))
        .await;
    ensure!(status == 204);
    let (status, _) = ext
        .get("nothing.example/Thing@v1", ids("default", "t"))
        .await;
    ensure!(status == 404);
    let (status, _) = ext
        .delete("nothing.example/Thing@v1", ids("default", "t"))
        .await;
    ensure!(status == 204);
    let (status, body) = ext
        .apply(
            "core/ConfigMap@v1",
            json!({ "metadata": { "name": "lost", "namespace": "nowhere" } }),
        )
        .await;
    ensure!(
        status == 409 && body["error"]["code"] == "NamespaceNotFound",
        "{status} {body}"
    );
    let cases = [
        (
            "nothing.example/Thing@v1",
            json!({ "metadata": { "name": "t" } }),
            "UnknownResourceType",
            "/type",
        ),
        (
            "apps/Nothing@v1",
            json!({ "metadata": { "name": "t" } }),
            "UnknownResourceKind",
            "/type",
        ),
        (
            "a/b/Thing@v1",
            json!({ "metadata": { "name": "t" } }),
            "InvalidResourceType",
            "/type",
        ),
        (
            "core/ConfigMap@v1.2",
            json!({ "metadata": { "name": "t" } }),
            "InvalidApiVersion",
            "/apiVersion",
        ),
        (
            "core/Namespace@v1",
            json!({ "metadata": { "name": "t", "namespace": "default" } }),
            "InvalidProperty",
            "/properties/metadata/namespace",
        ),
        (
            "core/ConfigMap@v1",
            json!({ "kind": "Secret", "metadata": { "name": "t" } }),
            "InvalidProperty",
            "/properties/kind",
        ),
        (
            "core/ConfigMap@v1",
            json!({ "data": {} }),
            "InvalidProperty",
            "/properties/metadata",
        ),
    ];
    for (resource_type, properties, code, target) in cases {
        let started = Instant::now();
        let (status, body) = ext.apply(resource_type, properties).await;
        ensure!(
            status == 400 && body["error"]["code"] == code,
            "{resource_type}: {status} {body}"
        );
        ensure!(body["error"]["target"] == target, "{resource_type}: {body}");
        ensure!(
            started.elapsed() < Duration::from_secs(5),
            "{resource_type} took {:?}",
            started.elapsed()
        );
    }
    Ok(())
}

/// A namespace applied again while it is still terminating: the extension waits until it is gone and
/// creates it anew.
async fn recreated_namespace(ext: Ext, admin: kube::Client) -> Result<()> {
    let first = ext
        .applied("core/Namespace@v1", namespace("phoenix"))
        .await?;
    let old_uid = first["properties"]["metadata"]["uid"].clone();
    let held = ext.with_config(|config| config["namespace"] = json!("phoenix"));
    held.applied(
        "core/ConfigMap@v1",
        json!({ "metadata": { "name": "held", "finalizers": ["example.com/hold"] } }),
    )
    .await?;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces.delete("phoenix", &Default::default()).await?;
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "phoenix");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        maps.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
    });
    let again = ext
        .applied("core/Namespace@v1", namespace("phoenix"))
        .await?;
    release.await??;
    ensure!(
        again["properties"]["metadata"]["uid"] != old_uid,
        "the old namespace was kept: {again}"
    );
    let live = namespaces.get("phoenix").await?;
    ensure!(
        live.metadata.deletion_timestamp.is_none(),
        "the new namespace is terminating"
    );
    ensure!(live.status.and_then(|s| s.phase).as_deref() == Some("Active"));
    let (status, body) = held
        .apply(
            "core/ConfigMap@v1",
            config_map("after", json!({ "a": "1" })),
        )
        .await;
    if status != 200 {
        bail!("a ConfigMap in the new namespace: {status} {body}");
    }
    Ok(())
}

/// `waitFor`: ready at once, a timeout inside the request (409 with the conditions), and past the
/// request's own wait: `Running`, then ready (another manager scales to zero) or `Failed`.
async fn readiness(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("readiness"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("readiness"));
    let wait = |seconds: u64| json!({ "waitFor": { "condition": "Available", "timeoutSeconds": seconds } });
    // No pods to wait for: Available at once.
    let idle = ext
        .applied("apps/Deployment@v1", deployment("idle", 0, wait(30)))
        .await?;
    ensure!(idle["status"].is_null(), "{idle}");
    ensure!(
        idle["properties"]["waitFor"]
            == json!({ "condition": "Available", "status": "True", "timeoutSeconds": 30 }),
        "{idle}"
    );
    // The control plane has no nodes: one replica never becomes available.
    let started = Instant::now();
    let (status, body) = ext
        .apply("apps/Deployment@v1", deployment("stuck", 1, wait(3)))
        .await;
    ensure!(
        status == 409 && body["error"]["code"] == "ReadinessTimeout",
        "{status} {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains("Available=True within 3 s") && message.contains("Available=False"),
        "{message}"
    );
    ensure!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );

    let (slow, late) = tokio::join!(
        ext.apply("apps/Deployment@v1", deployment("slow", 1, wait(60))),
        ext.apply("apps/Deployment@v1", deployment("late", 1, wait(12))),
    );
    for (name, (status, body)) in [("slow", &slow), ("late", &late)] {
        ensure!(
            *status == 200 && body["status"] == "Running",
            "{name}: {status} {body}"
        );
    }
    let (status, body) = ext
        .get("apps/Deployment@v1", ids("readiness", "slow"))
        .await;
    ensure!(
        status == 200 && body["status"] == "Running",
        "{status} {body}"
    );
    // Someone else scales it to zero: it becomes available, and the next get says so.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "readiness");
    deployments
        .patch(
            "slow",
            &PatchParams {
                field_manager: Some("autoscaler".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
        )
        .await?;
    eventually("slow reported ready", Duration::from_secs(30), || {
        let ext = ext.clone();
        async move {
            let (status, body) = ext
                .get("apps/Deployment@v1", ids("readiness", "slow"))
                .await;
            ensure!(status == 200, "{status} {body}");
            Ok(body["status"].is_null())
        }
    })
    .await?;
    // Past its timeout, a get reports the resource failed, with the conditions.
    eventually("late reported failed", Duration::from_secs(30), || {
        let ext = ext.clone();
        async move {
            let (status, body) = ext
                .get("apps/Deployment@v1", ids("readiness", "late"))
                .await;
            ensure!(status == 200, "{status} {body}");
            match body["status"].as_str() {
                Some("Running") => Ok(false),
                Some("Failed") => {
                    ensure!(body["error"]["code"] == "ReadinessTimeout", "{body}");
                    ensure!(
                        body["error"]["message"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("Available=False"),
                        "{body}"
                    );
                    Ok(true)
                }
                _ => bail!("unexpected: {body}"),
            }
        }
    })
    .await
}

/// Objects created by `kubectl` (create, client-side apply) are taken over: the same values apply
/// without a conflict (shared ownership), different ones conflict until `force` takes them.
async fn adoption(ext: Ext, admin: kube::Client) -> Result<()> {
    ext.applied("core/Namespace@v1", namespace("adoption"))
        .await?;
    let ext = ext.with_config(|config| config["namespace"] = json!("adoption"));
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "adoption");
    for (name, manager, value) in [
        ("created", "kubectl-create", "1"),
        ("applied", "kubectl-client-side-apply", "old"),
    ] {
        let object: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "adoption" }, "data": { "a": value } }))?;
        maps.create(
            &kube::api::PostParams {
                field_manager: Some(manager.into()),
                ..Default::default()
            },
            &object,
        )
        .await?;
    }
    let adopted = ext
        .applied(
            "core/ConfigMap@v1",
            config_map("created", json!({ "a": "1", "b": "2" })),
        )
        .await?;
    ensure!(
        adopted["properties"]["data"] == json!({ "a": "1", "b": "2" }),
        "{adopted}"
    );
    let managers: Vec<String> = maps
        .get("created")
        .await?
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|entry| entry.manager)
        .collect();
    ensure!(
        managers.contains(&"cairn".to_owned()) && managers.contains(&"kubectl-create".to_owned()),
        "{managers:?}"
    );

    let (status, body) = ext
        .apply(
            "core/ConfigMap@v1",
            config_map("applied", json!({ "a": "new" })),
        )
        .await;
    ensure!(status == 409, "{status} {body}");
    ensure!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'kubectl-client-side-apply'"),
        "{body}"
    );
    let mut forced = config_map("applied", json!({ "a": "new" }));
    forced["force"] = json!(true);
    ext.applied("core/ConfigMap@v1", forced).await?;
    ensure!(maps.get("applied").await?.data.unwrap_or_default()["a"] == "new");
    Ok(())
}

#[test]
fn objects_through_their_lifecycle() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init()
        .expect("the test's log subscriber");
    let kube = cairn_testkube::TestKube::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let transcript = Transcript::default();
    runtime.block_on(async {
        let admin = common::admin(&kube).await;
        let ext = Ext::new(common::config_for(&kube, "default")).recording(&transcript);
        let scenarios: Vec<Scenario> = vec![
            ("basics", Box::pin(basics(ext.clone(), admin.clone()))),
            ("workloads", Box::pin(workloads(ext.clone(), admin.clone()))),
            (
                "propagation",
                Box::pin(propagation(ext.clone(), admin.clone())),
            ),
            (
                "custom resources",
                Box::pin(custom_resources(ext.clone(), admin.clone())),
            ),
            ("conflicts", Box::pin(conflicts(ext.clone(), admin.clone()))),
            (
                "finalizers",
                Box::pin(finalizers(ext.clone(), admin.clone())),
            ),
            ("previews", Box::pin(previews(ext.clone(), admin.clone()))),
            (
                "missing and unknown",
                Box::pin(missing_and_unknown(ext.clone())),
            ),
            ("readiness", Box::pin(readiness(ext.clone(), admin.clone()))),
            ("adoption", Box::pin(adoption(ext.clone(), admin.clone()))),
            (
                "recreated namespace",
                Box::pin(recreated_namespace(ext.clone(), admin.clone())),
            ),
        ];
        run_all(scenarios).await;
    });

    // The canary: no response and no log line holds a Secret's value or the kubeconfig's credentials.
    let encoded_key = data_encoding::BASE64.encode(kube.admin_key_pem().as_bytes());
    let mut secrets = vec![
        CANARY_PASSWORD.to_owned(),
        CANARY_TOKEN.to_owned(),
        data_encoding::BASE64.encode(CANARY_PASSWORD.as_bytes()),
        data_encoding::BASE64.encode(CANARY_TOKEN.as_bytes()),
        // The middle of the kubeconfig's client-key-data (its start is the same for every PEM key).
        encoded_key[60..120].to_owned(),
    ];
    secrets.extend(
        kube.admin_key_pem()
            .lines()
            .filter(|line| !line.starts_with("-----") && line.len() > 20)
            .map(str::to_owned),
    );
    let responses = transcript.lock().unwrap().join("\n");
    let log = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        responses.len() > 10_000,
        "the transcript is suspiciously short"
    );
    assert!(
        log.contains("cairn") || !log.is_empty(),
        "nothing was logged"
    );
    for secret in &secrets {
        assert!(
            !responses.contains(secret.as_str()),
            "a response holds a secret ({} chars)",
            secret.len()
        );
        assert!(
            !log.contains(secret.as_str()),
            "a log line holds a secret ({} chars)",
            secret.len()
        );
    }
}

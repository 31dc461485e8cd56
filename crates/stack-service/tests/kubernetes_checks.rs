//! A deployment stack on a real Kubernetes API server through the built-in Kubernetes extension, beyond the
//! lifecycle of `kubernetes.rs`: a template in the v1 `imports` encoding (`core/ConfigMap@v1` with `import`);
//! what-if, which shows the API server's admission defaults and its validation errors before anything is written
//! (server-side dry run); `adoptExistingResources` over objects another field manager created (as `kubectl` does);
//! and drift of a Secret given with `stringData`, which the API server turns into `data`, without noise. Every
//! check goes through the Kubernetes API; each test has a control plane of its own.

mod common;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::models::stack_drift::{DeploymentStackDriftRequest, DeploymentStackDriftResult};
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_arm::query::Query;
use cairn_stack_service::StackService;
use cairn_store::Store;
use cairn_testkube::TestKube;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const KUBECONFIG_SECRET: &str = "kubeconfig";
const STACK: &str = "checks";

struct Env {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    _kube: TestKube,
    admin: kube::Client,
}

async fn setup() -> Env {
    let kube = tokio::task::spawn_blocking(TestKube::start)
        .await
        .expect("the control plane");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kube.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    let admin = kube::Client::try_from(config).expect("client");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store_with_group_and_vault(dir.path()).await;
    set_secret(&store, KUBECONFIG_SECRET, kube.kubeconfig()).await;
    let service = stack_service(
        store.clone(),
        vec![(
            cairn_ext_kubernetes::NAME,
            cairn_ext_kubernetes::VERSION,
            Arc::new(cairn_ext_kubernetes::in_process_transport()),
        )],
        fast_settings(),
    );
    Env {
        _dir: dir,
        store,
        service,
        _kube: kube,
        admin,
    }
}

/// The stack's config for alias `k8s`: the kubeconfig from the Key Vault (seed 000's `auth` group), so the
/// stack keeps a directive, never the value.
fn extension_configs(namespace: &str) -> Value {
    json!({ "k8s": {
        "namespace": { "value": namespace },
        "auth": { "kubeConfig": { "keyVaultReference": {
            "keyVault": { "id": VAULT }, "secretName": KUBECONFIG_SECRET } } }
    } })
}

/// A v2 stack body (`extensions` + `extension`/`type`/`apiVersion`) over `resources` (name → (type@version,
/// properties)), objects in `namespace` by default.
fn stack(namespace: &str, resources: &[(&str, &str, Value)], adopt: bool) -> Value {
    let mut declared = serde_json::Map::new();
    for (name, type_version, properties) in resources {
        let (resource_type, api_version) = type_version.split_once('@').expect("type@version");
        declared.insert(
            (*name).to_owned(),
            json!({ "extension": "k8s", "type": resource_type, "apiVersion": api_version,
                    "properties": properties }),
        );
    }
    let mut body = json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0", "config": {
                    "namespace": { "type": "string" }, "kubeConfig": { "type": "secureString" } } } },
                "resources": declared
            },
            "extensionConfigs": extension_configs(namespace),
            "actionOnUnmanage": { "resources": "delete" },
            "denySettings": { "mode": "none" }
        }
    });
    if adopt {
        body["properties"]["adoptExistingResources"] = json!(true);
    }
    body
}

impl Env {
    async fn put(&self, body: Value) -> Value {
        let body: DeploymentStack = serde_json::from_value(body).expect("a stack body");
        self.service
            .create_or_update(RG, STACK, body, None)
            .await
            .expect("accepted");
        settle(&self.service, STACK).await
    }

    async fn delete(&self) -> Value {
        let options =
            StackDeleteOptions::from_query(&Query::parse("unmanageAction.Resources=delete"))
                .expect("options");
        self.service
            .delete(RG, STACK, options, None)
            .await
            .expect("accepted");
        settle(&self.service, STACK).await
    }

    async fn what_if(&self, body: Value) -> Value {
        let mut body = body;
        body["properties"]["deploymentStackResourceId"] = json!(format!(
            "{RG}/providers/Microsoft.Resources/deploymentStacks/{STACK}"
        ));
        body["properties"]["retentionInterval"] = json!("PT1H");
        let request: DeploymentStacksWhatIfResult =
            serde_json::from_value(body).expect("a what-if body");
        let accepted = self
            .service
            .what_if(RG, "checks-whatif", request)
            .await
            .expect("what-if");
        serde_json::to_value(accepted.result).expect("json")
    }

    /// A drift detection to its end: the result as JSON.
    async fn drift(&self) -> Value {
        let started = self
            .service
            .detect_drift(RG, STACK, DeploymentStackDriftRequest::default())
            .await
            .expect("started");
        let id = started.name.clone().expect("an operation id");
        for _ in 0..600 {
            let polled: DeploymentStackDriftResult = self
                .service
                .drift_result(RG, STACK, &id)
                .await
                .expect("result");
            if polled.properties.status.is_terminal() {
                return serde_json::to_value(&polled).expect("json");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the drift detection did not end");
    }

    async fn create_namespace(&self, name: &str) {
        let namespaces: Api<Namespace> = Api::all(self.admin.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap(),
            )
            .await
            .expect("create the namespace");
    }
}

/// `(object name, drift status, [changeType path])` of each resource of a drift result that is not in sync.
fn drifted(result: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut rows: Vec<_> = result["properties"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["driftStatus"] != "inSync")
        .map(|r| {
            let paths = r["propertyChanges"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{} {}",
                        c["changeType"].as_str().unwrap_or_default(),
                        c["path"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            (
                r["identifiers"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["driftStatus"].as_str().unwrap_or_default().to_owned(),
                paths,
            )
        })
        .collect();
    rows.sort();
    rows
}

fn managed_names(stack: &Value) -> Vec<String> {
    let mut names: Vec<String> = stack["properties"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["identifiers"]["metadata"]["name"].as_str())
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_imports_template_deploys_through_a_stack() {
    let env = setup().await;
    // Bicep's v1 encoding: `imports` with the raw config, each resource `import` + `type@apiVersion`. The
    // declaration names the namespace; the kubeconfig comes from the stack's `extensionConfigs`.
    let body = json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.0",
                "contentVersion": "1.0.0.0",
                "imports": { "k8s": { "provider": "Kubernetes", "version": "1.0.0",
                                      "config": { "namespace": "legacy" } } },
                "resources": {
                    "ns": { "import": "k8s", "type": "core/Namespace@v1",
                            "properties": { "metadata": { "name": "legacy" } } },
                    "settings": { "import": "k8s", "type": "core/ConfigMap@v1",
                                  "properties": { "metadata": { "name": "settings" },
                                                  "data": { "mode": "v1-imports" } },
                                  "dependsOn": ["ns"] },
                    "web": { "import": "k8s", "type": "apps/Deployment@v1",
                             "properties": {
                                 "metadata": { "name": "web" },
                                 "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "web" } },
                                           "template": { "metadata": { "labels": { "app": "web" } },
                                                         "spec": { "containers": [
                                                             { "name": "web", "image": "nginx:1.27" } ] } } } },
                             "dependsOn": ["settings"] }
                }
            },
            "extensionConfigs": { "k8s": {
                "auth": { "kubeConfig": { "keyVaultReference": {
                    "keyVault": { "id": VAULT }, "secretName": KUBECONFIG_SECRET } } }
            } },
            "actionOnUnmanage": { "resources": "delete" },
            "denySettings": { "mode": "none" }
        }
    });
    let created = env.put(body).await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert_eq!(managed_names(&created), ["legacy", "settings", "web"]);
    // In the namespace the declaration's config names, as written.
    let maps: Api<ConfigMap> = Api::namespaced(env.admin.clone(), "legacy");
    let settings = maps.get("settings").await.expect("the config map");
    assert_eq!(settings.data.unwrap_or_default()["mode"], "v1-imports");
    let fields = settings.metadata.managed_fields.unwrap_or_default();
    assert!(
        fields
            .iter()
            .any(|f| f.manager.as_deref() == Some("cairn")
                && f.operation.as_deref() == Some("Apply")),
        "applied by cairn's field manager: {fields:?}"
    );
    let deployments: Api<Deployment> = Api::namespaced(env.admin.clone(), "legacy");
    let web = deployments.get("web").await.expect("the deployment");
    assert_eq!(web.spec.replicas, Some(1));

    // The stack's delete finds the same objects through the same encoding.
    assert_eq!(env.delete().await, Value::Null, "the stack is gone");
    let namespaces: Api<Namespace> = Api::all(env.admin.clone());
    assert!(
        namespaces
            .get_opt("legacy")
            .await
            .expect("namespaces")
            .is_none(),
        "the namespace is left"
    );
}

/// The resource change of the object of type `resource_type` named `name` (or, where the what-if could not
/// tell identifiers, of the resource with that symbolic name) in a what-if result.
fn change_of<'a>(result: &'a Value, resource_type: &str, name: &str) -> &'a Value {
    result["properties"]["changes"]["resourceChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            c["type"] == resource_type
                && (c["identifiers"]["metadata"]["name"] == name || c["symbolicName"] == name)
        })
        .unwrap_or_else(|| panic!("no change for {resource_type} {name}: {result:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_shows_admission_defaults_and_validation_errors_before_writing() {
    let env = setup().await;
    env.create_namespace("preview").await;
    let web = json!({
        "metadata": { "name": "web", "labels": { "app": "web" } },
        "spec": { "replicas": 2, "selector": { "matchLabels": { "app": "web" } },
                  "template": { "metadata": { "labels": { "app": "web" } },
                                "spec": { "containers": [ { "name": "web", "image": "nginx:1.27" } ] } } }
    });
    let service = json!({ "metadata": { "name": "web" },
                          "spec": { "selector": { "app": "web" }, "ports": [ { "port": 80 } ] } });
    let body = stack(
        "preview",
        &[
            ("web", "apps/Deployment@v1", web.clone()),
            ("svc", "core/Service@v1", service),
        ],
        false,
    );
    let predicted = env.what_if(body.clone()).await;
    assert_eq!(
        predicted["properties"]["provisioningState"], "succeeded",
        "{predicted:#}"
    );
    // What the API server's defaulting adds (the template says none of it): only a server-side dry run knows.
    let web_change = change_of(&predicted, "apps/Deployment", "web");
    assert_eq!(web_change["changeType"], "create", "{web_change:#}");
    let after = &web_change["resourceConfigurationChanges"]["after"]["properties"];
    assert_eq!(
        after["spec"]["strategy"]["type"], "RollingUpdate",
        "{after:#}"
    );
    assert_eq!(after["spec"]["progressDeadlineSeconds"], 600, "{after:#}");
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent",
        "{after:#}"
    );
    let after = &change_of(&predicted, "core/Service", "web")["resourceConfigurationChanges"]["after"]
        ["properties"];
    assert_eq!(after["spec"]["type"], "ClusterIP", "{after:#}");
    assert_eq!(after["spec"]["sessionAffinity"], "None", "{after:#}");
    // Nothing was written.
    let deployments: Api<Deployment> = Api::namespaced(env.admin.clone(), "preview");
    assert!(deployments.get_opt("web").await.expect("get").is_none());

    // A manifest the API server refuses (a config map key with spaces, a negative replica count): the what-if
    // says so, naming the field, and writes nothing.
    let mut bad_web = web.clone();
    bad_web["spec"]["replicas"] = json!(-1);
    let refused = env
        .what_if(stack(
            "preview",
            &[
                ("web", "apps/Deployment@v1", bad_web),
                (
                    "settings",
                    "core/ConfigMap@v1",
                    json!({ "metadata": { "name": "settings" }, "data": { "not a key!": "x" } }),
                ),
            ],
            false,
        ))
        .await;
    // Each is a change the what-if cannot make, with the API server's 422 as the reason.
    for (resource_type, name, field) in [
        ("apps/Deployment", "web", "spec.replicas: Invalid value: -1"),
        ("core/ConfigMap", "settings", "data[not a key!]"),
    ] {
        let change = change_of(&refused, resource_type, name);
        assert_eq!(change["changeType"], "unsupported", "{change:#}");
        let reason = change["unsupportedReason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("server-side dry run")
                && reason.contains(field)
                && reason.contains("422"),
            "{change:#}"
        );
    }
    assert!(deployments.get_opt("web").await.expect("get").is_none());
    let maps: Api<ConfigMap> = Api::namespaced(env.admin.clone(), "preview");
    assert!(maps.get_opt("settings").await.expect("get").is_none());

    // The stack then creates what the what-if showed.
    let created = env.put(body).await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    let live = deployments.get("web").await.expect("the deployment");
    assert_eq!(
        live.spec.strategy.and_then(|s| s.type_),
        Some("RollingUpdate".to_owned())
    );
}

/// Creates a config map in `namespace` as `kubectl apply` (client-side) does: a create by the field manager
/// `kubectl-client-side-apply` with the `last-applied-configuration` annotation.
async fn kubectl_create(admin: &kube::Client, namespace: &str, name: &str, data: Value) {
    let manifest = json!({ "apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": { "name": name, "namespace": namespace }, "data": data });
    let mut object = manifest.clone();
    object["metadata"]["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": format!("{manifest}\n")
    });
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    maps.create(
        &PostParams {
            field_manager: Some("kubectl-client-side-apply".into()),
            ..Default::default()
        },
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .expect("kubectl create");
}

fn managers(map: &ConfigMap) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = map
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|f| {
            (
                f.manager.clone().unwrap_or_default(),
                f.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_takes_over_objects_kubectl_created() {
    let env = setup().await;
    env.create_namespace("adopt").await;
    kubectl_create(
        &env.admin,
        "adopt",
        "settings",
        json!({ "LOG_LEVEL": "info" }),
    )
    .await;
    kubectl_create(&env.admin, "adopt", "flags", json!({ "beta": "on" })).await;
    let maps: Api<ConfigMap> = Api::namespaced(env.admin.clone(), "adopt");
    let resources = |flags: Value| {
        vec![
            (
                "settings",
                "core/ConfigMap@v1",
                json!({ "metadata": { "name": "settings" }, "data": { "LOG_LEVEL": "info" } }),
            ),
            ("flags", "core/ConfigMap@v1", flags),
            (
                "fresh",
                "core/ConfigMap@v1",
                json!({ "metadata": { "name": "fresh" }, "data": { "new": "1" } }),
            ),
        ]
    };
    let flags = json!({ "metadata": { "name": "flags" }, "data": { "beta": "on", "gamma": "on" } });

    // Without adoption: refused, named, and left as kubectl made them.
    let refused = env
        .put(stack("adopt", &resources(flags.clone()), false))
        .await;
    assert_eq!(
        refused["properties"]["provisioningState"], "failed",
        "{refused:#}"
    );
    eprintln!("REFUSED {refused:#}");
    let text = refused.to_string();
    assert!(
        text.contains(cairn_engine::RESOURCE_EXISTS_UNMANAGED)
            && text.contains("settings")
            && text.contains("flags"),
        "{refused:#}"
    );
    assert_eq!(managed_names(&refused), ["fresh"]);
    let flags_live = maps.get("flags").await.expect("flags");
    assert_eq!(
        flags_live.data.clone().unwrap_or_default().len(),
        1,
        "untouched: {flags_live:?}"
    );
    assert_eq!(
        managers(&flags_live),
        [("kubectl-client-side-apply".to_owned(), "Update".to_owned())]
    );

    // With adoption: taken over, cairn's field manager now applies them, and the stack manages them.
    let adopted = env
        .put(stack("adopt", &resources(flags.clone()), true))
        .await;
    assert_eq!(
        adopted["properties"]["provisioningState"], "succeeded",
        "{adopted:#}"
    );
    assert_eq!(managed_names(&adopted), ["flags", "fresh", "settings"]);
    let flags_live = maps.get("flags").await.expect("flags");
    assert_eq!(flags_live.data.clone().unwrap_or_default()["gamma"], "on");
    assert!(
        managers(&flags_live).contains(&("cairn".to_owned(), "Apply".to_owned())),
        "{:?}",
        managers(&flags_live)
    );

    // From now on they are the stack's: a later update changes a value kubectl had set, and the stack's
    // delete removes them.
    let changed =
        json!({ "metadata": { "name": "flags" }, "data": { "beta": "off", "gamma": "on" } });
    let updated = env.put(stack("adopt", &resources(changed), false)).await;
    assert_eq!(
        updated["properties"]["provisioningState"], "succeeded",
        "{updated:#}"
    );
    let flags_live = maps.get("flags").await.expect("flags");
    assert_eq!(flags_live.data.unwrap_or_default()["beta"], "off");
    assert_eq!(env.delete().await, Value::Null, "the stack is gone");
    for name in ["settings", "flags", "fresh"] {
        assert!(
            maps.get_opt(name).await.expect("get").is_none(),
            "{name} is left"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_from_string_data_shows_no_drift_until_a_field_changes() {
    const VALUE: &str = "drift-canary-Pw-5e2b";
    const TOKEN: &str = "drift-canary-token-9d1f";
    let env = setup().await;
    env.create_namespace("vault").await;
    let secret = json!({
        "metadata": { "name": "db", "labels": { "tier": "db" } },
        "type": "Opaque",
        "stringData": { "password": VALUE },
        "data": { "token": data_encoding::BASE64.encode(TOKEN.as_bytes()) }
    });
    let created = env
        .put(stack("vault", &[("db", "core/Secret@v1", secret)], false))
        .await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    // The API server merged stringData into data: the object holds both values under `data` and no
    // `stringData`, which is not drift.
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), "vault");
    let live = secrets.get("db").await.expect("the secret");
    assert!(live.string_data.is_none());
    let data = live.data.unwrap_or_default();
    assert_eq!(data["password"].0, VALUE.as_bytes());
    assert_eq!(data["token"].0, TOKEN.as_bytes());
    let quiet = env.drift().await;
    assert_eq!(
        drifted(&quiet),
        Vec::<(String, String, Vec<String>)>::new(),
        "{quiet:#}"
    );

    // Another manager changes a label: that, and only that, is drift; no value of the secret shows.
    secrets
        .patch(
            "db",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({ "metadata": { "labels": { "tier": "cache" } } })),
        )
        .await
        .expect("kubectl edit");
    let result = env.drift().await;
    let rows = drifted(&result);
    assert_eq!(rows.len(), 1, "{result:#}");
    assert_eq!((rows[0].0.as_str(), rows[0].1.as_str()), ("db", "modified"));
    assert!(
        !rows[0].2.is_empty() && rows[0].2.iter().all(|path| path.contains("labels")),
        "{rows:?}"
    );
    let text = result.to_string();
    for secret in [
        VALUE,
        TOKEN,
        &data_encoding::BASE64.encode(VALUE.as_bytes()),
        &data_encoding::BASE64.encode(TOKEN.as_bytes()),
    ] {
        assert!(
            !text.contains(secret),
            "the drift result holds a secret value"
        );
    }
    let _ = &env.store;
}

//! A deployment stack managing a real Kubernetes API server through the built-in Kubernetes extension, with
//! the kubeconfig (a service account's token) from a Key Vault reference: create a namespace, config maps, a
//! secret (its value from a secure parameter), a deployment, a service, a CRD and two custom resources; drift
//! (none after the create, though controllers wrote to the objects; then a field `kubectl edit` changed, which
//! a re-apply reports as a conflict naming that manager until `force` takes it over); rotate
//! the credential (the service account deleted, so its token stops working, a new one in the vault); update the
//! stack dropping a custom resource and a config map with `deleteAll` (only the new token can have done it);
//! delete detaching everything (nothing deleted); re-create it over what is there; refuse to delete on another
//! cluster (the vault pointed at a second control plane: `configId` mismatch, nothing deleted anywhere); and
//! delete it for good, namespace and CRD included. Every step is checked through the Kubernetes API, and the
//! tokens, the kubeconfigs and the secret's value show up in no response, log line or store file.
//!
//! The kubeconfig is given as seed 000's reserved `auth: { kubeConfig }` group, so the stack keeps its Key Vault
//! directive and every operation, deletes included, fetches it again.

mod common;
use common::*;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::models::stack_drift::{DeploymentStackDriftRequest, DeploymentStackDriftResult};
use cairn_arm::query::Query;
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::Store;
use cairn_testkube::TestKube;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const KUBECONFIG_SECRET: &str = "kubeconfig";
const DB_SECRET: &str = "shop-db";
const DB_PASSWORD: &str = "db-canary-Pw-71c4e";
const NAMESPACE: &str = "shop";

/// Log lines of the whole test binary (one test), to scan for secrets.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Env {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    kube: TestKube,
    admin: kube::Client,
    /// Every response and error seen, to scan for secrets.
    seen: Vec<String>,
}

async fn admin_client(kube: &TestKube) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kube.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

/// A kubeconfig for `kube` authenticating with `token`.
fn token_kubeconfig(kube: &TestKube, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testkube\n  cluster:\n    server: {}\n    \
         certificate-authority-data: {}\nusers:\n- name: deployer\n  user:\n    token: {token}\ncontexts:\n\
         - name: deployer\n  context:\n    cluster: testkube\n    user: deployer\ncurrent-context: deployer\n",
        kube.server_url(),
        data_encoding::BASE64.encode(kube.ca_pem().as_bytes()),
    )
}

/// Creates the service account `kube-system/name`, a cluster-admin binding for it, and a token of it.
async fn deployer_token(admin: &kube::Client, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "kube-system");
    let apply = PatchParams::apply("cairn-tests").force();
    accounts
        .patch(
            name,
            &apply,
            &Patch::Apply(json!({ "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": { "name": name, "namespace": "kube-system" } })),
        )
        .await
        .expect("service account");
    let bindings: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
            ),
            "clusterrolebindings",
        ),
    );
    bindings
        .patch(
            name,
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": { "name": name },
                "subjects": [{ "kind": "ServiceAccount", "name": name, "namespace": "kube-system" }],
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" }
            })),
        )
        .await
        .expect("binding");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .and_then(|status| status.token)
        .expect("a token")
}

/// Whether `token` still authenticates on `kube` (any answer but 401).
async fn token_works(kube: &TestKube, token: &str) -> bool {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&token_kubeconfig(kube, token)).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let namespaces: Api<Namespace> = Api::all(client);
    !matches!(namespaces.get("default").await, Err(kube::Error::Api(status)) if status.code == 401)
}

async fn setup() -> Env {
    let kube = tokio::task::spawn_blocking(TestKube::start)
        .await
        .expect("the control plane");
    let admin = admin_client(&kube).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = common::store_with_group_and_vault(dir.path()).await;
    set_secret(&store, DB_SECRET, DB_PASSWORD).await;
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        cairn_ext_kubernetes::NAME,
        cairn_ext_kubernetes::VERSION,
        Arc::new(cairn_ext_kubernetes::in_process_transport()),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            relo_poll_interval: Duration::from_millis(100),
            min_poll_interval: Duration::from_millis(10),
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
        "http://localhost/cairn-test",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings {
            parallelism: 8,
            ..EngineSettings::default()
        },
    )
    .expect("engine");
    let service = StackService::new(
        engine,
        store.clone(),
        host,
        Providers::empty(),
        StackServiceSettings {
            lease_ttl: Duration::from_secs(10),
            heartbeat_interval: Duration::from_millis(200),
            max_delete_rounds: 6,
            retry_backoff: Duration::from_millis(50),
            ..StackServiceSettings::default()
        },
    );
    Env {
        dir,
        store,
        service,
        kube,
        admin,
        seen: Vec::new(),
    }
}

fn k8s(resource_type: &str, properties: Value, depends_on: &[&str]) -> Value {
    let (resource_type, api_version) = resource_type.split_once('@').expect("type@version");
    json!({ "extension": "k8s", "type": resource_type, "apiVersion": api_version,
            "properties": properties, "dependsOn": depends_on })
}

fn backup(name: &str, schedule: &str) -> Value {
    k8s(
        "shop.example.com/Backup@v1",
        json!({ "metadata": { "name": name }, "spec": { "schedule": schedule } }),
        &["backups", "ns"],
    )
}

/// The stack: `full` has both custom resources and both config maps; otherwise `weekly` and `extra` are gone.
fn stack(full: bool, action: &str) -> DeploymentStack {
    stack_with(full, action, false)
}

/// [`stack`], with `force: true` on the config map `settings` when `force_settings`.
fn stack_with(full: bool, action: &str, force_settings: bool) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    let mut add = |name: &str, resource: Value| {
        resources.insert(name.to_owned(), resource);
    };
    add(
        "ns",
        k8s(
            "core/Namespace@v1",
            json!({ "metadata": { "name": NAMESPACE } }),
            &[],
        ),
    );
    add(
        "settings",
        k8s(
            "core/ConfigMap@v1",
            if force_settings {
                json!({ "metadata": { "name": "settings" }, "data": { "LOG_LEVEL": "info" }, "force": true })
            } else {
                json!({ "metadata": { "name": "settings" }, "data": { "LOG_LEVEL": "info" } })
            },
            &["ns"],
        ),
    );
    add(
        "credentials",
        k8s(
            "core/Secret@v1",
            json!({ "metadata": { "name": "db" }, "stringData": { "password": "[parameters('dbPassword')]" } }),
            &["ns"],
        ),
    );
    add(
        "web",
        k8s(
            "apps/Deployment@v1",
            json!({
                "metadata": { "name": "web", "labels": { "app": "web" } },
                "spec": {
                    "replicas": 1,
                    "selector": { "matchLabels": { "app": "web" } },
                    "template": {
                        "metadata": { "labels": { "app": "web" } },
                        "spec": { "containers": [ { "name": "web", "image": "nginx:1.27",
                            "envFrom": [ { "configMapRef": { "name": "settings" } } ] } ] }
                    }
                }
            }),
            &["settings", "credentials"],
        ),
    );
    add(
        "service",
        k8s(
            "core/Service@v1",
            json!({ "metadata": { "name": "web" },
                    "spec": { "selector": { "app": "web" }, "ports": [ { "port": 80 } ] } }),
            &["ns"],
        ),
    );
    add(
        "backups",
        k8s(
            "apiextensions.k8s.io/CustomResourceDefinition@v1",
            json!({
                "metadata": { "name": "backups.shop.example.com" },
                "spec": {
                    "group": "shop.example.com", "scope": "Namespaced",
                    "names": { "plural": "backups", "singular": "backup", "kind": "Backup" },
                    "versions": [ { "name": "v1", "served": true, "storage": true,
                        "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                            "spec": { "type": "object", "properties": { "schedule": { "type": "string" } } } } } } } ]
                }
            }),
            &[],
        ),
    );
    add("nightly", backup("nightly", "0 3 * * *"));
    if full {
        add("weekly", backup("weekly", "0 4 * * 0"));
        add(
            "extra",
            k8s(
                "core/ConfigMap@v1",
                json!({ "metadata": { "name": "extra" }, "data": { "a": "1" } }),
                &["ns"],
            ),
        );
    }
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "parameters": { "dbPassword": { "type": "securestring" } },
                "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0", "config": {
                    "namespace": { "type": "string" }, "kubeConfig": { "type": "secureString" } } } },
                "resources": resources
            },
            "parameters": { "dbPassword": { "reference": {
                "keyVault": { "id": VAULT }, "secretName": DB_SECRET } } },
            "extensionConfigs": { "k8s": {
                "namespace": { "value": NAMESPACE },
                "auth": { "kubeConfig": { "keyVaultReference": {
                    "keyVault": { "id": VAULT }, "secretName": KUBECONFIG_SECRET } } }
            } },
            "actionOnUnmanage": { "resources": action },
            "denySettings": { "mode": "none" }
        }
    }))
    .expect("a stack body")
}

impl Env {
    async fn config_maps(&self) -> Vec<String> {
        let api: Api<ConfigMap> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let mut names: Vec<String> = match api.list(&Default::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .filter_map(|m| m.metadata.name)
                .collect(),
            Err(_) => Vec::new(),
        };
        names.retain(|name| name != "kube-root-ca.crt");
        names.sort();
        names
    }

    async fn backups(&self) -> Vec<String> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.admin.clone(),
            NAMESPACE,
            &ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("shop.example.com", "v1", "Backup"),
                "backups",
            ),
        );
        let mut names: Vec<String> = match api.list(&Default::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    async fn namespace_exists(&self) -> bool {
        let api: Api<Namespace> = Api::all(self.admin.clone());
        api.get_opt(NAMESPACE).await.expect("namespaces").is_some()
    }

    async fn crd_exists(&self) -> bool {
        let api: Api<DynamicObject> = Api::all_with(
            self.admin.clone(),
            &ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(
                    "apiextensions.k8s.io",
                    "v1",
                    "CustomResourceDefinition",
                ),
                "customresourcedefinitions",
            ),
        );
        api.get_opt("backups.shop.example.com")
            .await
            .expect("crds")
            .is_some()
    }

    /// Waits for the stack to settle; `null` once it is gone. Records what it saw.
    async fn settle(&mut self, name: &str) -> Value {
        for _ in 0..2400 {
            match self.service.get(RG, name).await {
                Ok(stack) => {
                    let value = serde_json::to_value(&stack).unwrap();
                    let state = value["properties"]["provisioningState"]
                        .as_str()
                        .unwrap_or("");
                    if matches!(state, "succeeded" | "failed" | "canceled") {
                        self.seen.push(value.to_string());
                        return value;
                    }
                }
                Err(error) if error.status() == 404 => return Value::Null,
                Err(error) => panic!("get: {error:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the stack operation did not finish in time");
    }

    async fn put(&mut self, body: DeploymentStack) -> Value {
        let settled = self.put_settled(body).await;
        assert_eq!(
            settled["properties"]["provisioningState"], "succeeded",
            "{settled:#}"
        );
        settled
    }

    /// Creates or updates the stack and waits for it to settle, whatever the outcome.
    async fn put_settled(&mut self, body: DeploymentStack) -> Value {
        let accepted = self
            .service
            .create_or_update(RG, "shop", body, None)
            .await
            .expect("accepted");
        self.seen
            .push(serde_json::to_value(&accepted.stack).unwrap().to_string());
        self.settle("shop").await
    }

    /// A drift detection to its end: `(object name, drift status, changed paths)` of every resource that is not
    /// in sync.
    async fn drift(&mut self) -> Vec<(String, String, Vec<String>)> {
        let started = self
            .service
            .detect_drift(RG, "shop", DeploymentStackDriftRequest::default())
            .await
            .expect("started");
        let id = started.name.clone().expect("an operation id");
        let mut result: Option<DeploymentStackDriftResult> = None;
        for _ in 0..600 {
            let polled = self
                .service
                .drift_result(RG, "shop", &id)
                .await
                .expect("result");
            if polled.properties.status.is_terminal() {
                result = Some(polled);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let result = result.expect("the drift detection ended");
        self.seen
            .push(serde_json::to_value(&result).unwrap().to_string());
        let mut rows: Vec<_> = result
            .properties
            .resources
            .iter()
            .filter(|r| r.drift_status.as_str() != "inSync")
            .map(|r| {
                let name = r
                    .identifiers
                    .as_ref()
                    .and_then(|i| i.pointer("/metadata/name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let paths = r
                    .property_changes
                    .iter()
                    .flatten()
                    .map(|c| format!("{} {}", c.change_type, c.path))
                    .collect();
                (name, r.drift_status.as_str().to_owned(), paths)
            })
            .collect();
        rows.sort();
        rows
    }

    async fn delete(&mut self, action: &str) -> Value {
        let options = StackDeleteOptions::from_query(&Query::parse(&format!(
            "unmanageAction.Resources={action}"
        )))
        .expect("options");
        self.service
            .delete(RG, "shop", options, None)
            .await
            .expect("accepted");
        self.settle("shop").await
    }
}

fn managed(stack: &Value) -> usize {
    stack["properties"]["resources"]
        .as_array()
        .map_or(0, Vec::len)
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_manages_a_real_cluster_through_rotation_update_detach_and_delete() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();

    let mut env = setup().await;
    let first_token = deployer_token(&env.admin, "deployer-1").await;
    let first_kubeconfig = token_kubeconfig(&env.kube, &first_token);
    set_secret(&env.store, KUBECONFIG_SECRET, &first_kubeconfig).await;

    // Create.
    let created = env.put(stack(true, "delete")).await;
    assert_eq!(managed(&created), 9, "{created:#}");
    assert!(env.namespace_exists().await && env.crd_exists().await);
    assert_eq!(env.config_maps().await, ["extra", "settings"]);
    assert_eq!(env.backups().await, ["nightly", "weekly"]);
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), NAMESPACE);
    let stored = secrets.get("db").await.expect("the secret");
    assert_eq!(
        stored.data.unwrap_or_default()["password"].0,
        DB_PASSWORD.as_bytes()
    );

    // No drift, though the controllers have written to the objects since (a ReplicaSet revision annotation on
    // the Deployment, a service account's token in the namespace, statuses).
    let quiet = env.drift().await;
    assert_eq!(quiet, Vec::<(String, String, Vec<String>)>::new());
    // `kubectl edit` changes a field the stack applied: drift shows it, and a re-apply is a conflict naming
    // that manager, until `force` on the resource takes the field back.
    let maps: Api<ConfigMap> = Api::namespaced(env.admin.clone(), NAMESPACE);
    maps.patch(
        "settings",
        &PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({ "data": { "LOG_LEVEL": "debug" } })),
    )
    .await
    .expect("kubectl edit");
    let drifted = env.drift().await;
    assert_eq!(drifted.len(), 1, "{drifted:?}");
    assert_eq!(
        (drifted[0].0.as_str(), drifted[0].1.as_str()),
        ("settings", "modified"),
        "{drifted:?}"
    );
    assert!(
        drifted[0].2.iter().any(|path| path.contains("LOG_LEVEL")),
        "{drifted:?}"
    );
    let conflicted = env.put_settled(stack(true, "delete")).await;
    assert_eq!(
        conflicted["properties"]["provisioningState"], "failed",
        "{conflicted:#}"
    );
    let text = conflicted.to_string();
    assert!(
        text.contains("FieldManagerConflict") && text.contains("kubectl-edit"),
        "{conflicted:#}"
    );
    env.put(stack_with(true, "delete", true)).await;
    let settings = maps.get("settings").await.expect("settings");
    assert_eq!(settings.data.unwrap_or_default()["LOG_LEVEL"], "info");
    assert_eq!(
        env.drift().await,
        Vec::<(String, String, Vec<String>)>::new()
    );

    // Rotate: the first service account goes (its token stops working), a second one's kubeconfig goes into the
    // vault.
    let accounts: Api<ServiceAccount> = Api::namespaced(env.admin.clone(), "kube-system");
    accounts
        .delete("deployer-1", &Default::default())
        .await
        .expect("delete the first service account");
    for _ in 0..100 {
        if !token_works(&env.kube, &first_token).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !token_works(&env.kube, &first_token).await,
        "the first token still works"
    );
    let second_token = deployer_token(&env.admin, "deployer-2").await;
    let second_kubeconfig = token_kubeconfig(&env.kube, &second_token);
    set_secret(&env.store, KUBECONFIG_SECRET, &second_kubeconfig).await;

    // Update dropping a custom resource and a config map: deleted, by the only token that still works.
    let updated = env.put(stack(false, "delete")).await;
    assert_eq!(managed(&updated), 7, "{updated:#}");
    assert_eq!(
        updated["properties"]["deletedResources"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{updated:#}"
    );
    assert_eq!(env.config_maps().await, ["settings"]);
    assert_eq!(env.backups().await, ["nightly"]);

    // Delete detaching everything: nothing is deleted.
    assert_eq!(env.delete("detach").await, Value::Null, "the stack is gone");
    assert!(env.namespace_exists().await && env.crd_exists().await);
    assert_eq!(env.config_maps().await, ["settings"]);
    assert_eq!(env.backups().await, ["nightly"]);

    // Re-create it over what is there (adopting what the detach left behind).
    let mut again = stack(false, "delete");
    again.properties.adopt_existing_resources = Some(true);
    let recreated = env.put(again).await;
    assert_eq!(managed(&recreated), 7, "{recreated:#}");

    // The vault now names another cluster: its configId differs from the recorded one, so the delete fails and
    // deletes nothing, there or here.
    let other = tokio::task::spawn_blocking(TestKube::start)
        .await
        .expect("a second control plane");
    set_secret(&env.store, KUBECONFIG_SECRET, other.kubeconfig()).await;
    let refused = env.delete("delete").await;
    assert_eq!(
        refused["properties"]["provisioningState"], "failed",
        "{refused:#}"
    );
    assert!(
        refused.to_string().contains("ConfigIdMismatch"),
        "{refused:#}"
    );
    assert!(env.namespace_exists().await && env.crd_exists().await);
    assert_eq!(env.config_maps().await, ["settings"]);
    assert_eq!(env.backups().await, ["nightly"]);
    drop(other);

    // Back to this cluster: the delete removes everything, custom resources before their CRD and objects
    // before their namespace.
    set_secret(&env.store, KUBECONFIG_SECRET, &second_kubeconfig).await;
    assert_eq!(env.delete("delete").await, Value::Null, "the stack is gone");
    assert!(!env.namespace_exists().await, "the namespace is left");
    assert!(!env.crd_exists().await, "the CRD is left");

    // Secret canary: no token, kubeconfig or secret value anywhere.
    let secrets = [
        first_token.as_str(),
        second_token.as_str(),
        DB_PASSWORD,
        &data_encoding::BASE64.encode(DB_PASSWORD.as_bytes()),
    ];
    for text in &env.seen {
        for secret in secrets {
            assert!(!text.contains(secret), "a response holds a secret: {text}");
        }
    }
    let log = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(log.lines().count() > 10, "the logs were captured: {log}");
    for secret in secrets {
        let leaking: Vec<&str> = log
            .lines()
            .filter(|line| line.contains(secret))
            .map(|line| line.split(secret).next().unwrap_or_default())
            .collect();
        assert!(
            leaking.is_empty(),
            "log lines hold a secret (shown up to it): {leaking:#?}"
        );
    }
    let mut scanned = 0;
    for file in files_under(env.dir.path()) {
        let bytes = std::fs::read(&file).unwrap();
        scanned += bytes.len();
        for secret in secrets {
            assert!(
                !bytes
                    .windows(secret.len())
                    .any(|window| window == secret.as_bytes()),
                "{} holds a secret in plaintext",
                file.display()
            );
        }
    }
    assert!(scanned > 0, "the store wrote files");
}

//! Shared helpers for the Kubernetes extension's tests: a real control plane, requests through the
//! in-process transport, an admin client to check what the extension did, and many scenarios run
//! against one control plane (starting one takes seconds to tens of seconds on a busy machine).

#![allow(dead_code)] // each test file uses a subset

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cairn_extension_contract::transport::{ExtensionTransport, Operation, TransportRequest};
use cairn_testkube::TestKube;
use serde_json::{Value, json};

/// The `cairn-ext-kubernetes` binary cargo built for these tests.
pub const BINARY: &str = env!("CARGO_BIN_EXE_cairn-ext-kubernetes");

/// The admin kubeconfig of `kube`, base64-encoded as Bicep's Kubernetes types send it.
pub fn kubeconfig_base64(kube: &TestKube) -> String {
    data_encoding::BASE64.encode(kube.kubeconfig().as_bytes())
}

/// The built-in form of the config for `kube`'s admin, default namespace `namespace`.
pub fn config_for(kube: &TestKube, namespace: &str) -> Value {
    json!({ "kubeConfig": kubeconfig_base64(kube), "namespace": namespace })
}

/// An admin client of `kube` (for checks, independent of the extension's requests).
pub async fn admin(kube: &TestKube) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kube.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

/// Every response body some [`Ext`]s received, to look for secrets in.
pub type Transcript = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// The extension in process with a fixed config.
#[derive(Clone)]
pub struct Ext {
    pub transport: cairn_extension_sdk::InProcessTransport,
    pub config: Value,
    pub version: String,
    pub transcript: Option<Transcript>,
}

impl Ext {
    pub fn new(config: Value) -> Ext {
        Ext {
            transport: cairn_ext_kubernetes::in_process_transport(),
            config,
            version: "1.0.0".into(),
            transcript: None,
        }
    }

    /// The same extension recording every response in `transcript`.
    pub fn recording(mut self, transcript: &Transcript) -> Ext {
        self.transcript = Some(transcript.clone());
        self
    }

    /// The same extension with `config` changed by `change`.
    pub fn with_config(&self, change: impl FnOnce(&mut Value)) -> Ext {
        let mut ext = self.clone();
        change(&mut ext.config);
        ext
    }

    /// Sends `operation` with `body` (the config added when absent); the status and JSON body.
    pub async fn call(&self, operation: Operation, mut body: Value) -> (u16, Value) {
        if body.get("config").is_none() {
            body["config"] = self.config.clone();
        }
        let (status, answer) = send(&self.transport, &self.version, operation, body).await;
        if let Some(transcript) = &self.transcript {
            transcript
                .lock()
                .unwrap()
                .push(format!("{operation:?} {status} {answer}"));
        }
        (status, answer)
    }

    pub async fn apply(&self, resource_type: &str, properties: Value) -> (u16, Value) {
        let (group_type, api_version) = split(resource_type);
        self.call(
            Operation::CreateOrUpdate,
            json!({ "type": group_type, "apiVersion": api_version, "properties": properties }),
        )
        .await
    }

    pub async fn preview(&self, resource_type: &str, properties: Value) -> (u16, Value) {
        let (group_type, api_version) = split(resource_type);
        self.call(
            Operation::Preview,
            json!({ "type": group_type, "apiVersion": api_version, "properties": properties }),
        )
        .await
    }

    pub async fn get(&self, resource_type: &str, identifiers: Value) -> (u16, Value) {
        let (group_type, api_version) = split(resource_type);
        self.call(
            Operation::Get,
            json!({ "type": group_type, "apiVersion": api_version, "identifiers": identifiers }),
        )
        .await
    }

    pub async fn delete(&self, resource_type: &str, identifiers: Value) -> (u16, Value) {
        let (group_type, api_version) = split(resource_type);
        self.call(
            Operation::Delete,
            json!({ "type": group_type, "apiVersion": api_version, "identifiers": identifiers }),
        )
        .await
    }

    /// Applies and fails unless the answer is 200; the response body.
    pub async fn applied(&self, resource_type: &str, properties: Value) -> Result<Value> {
        let (status, body) = self.apply(resource_type, properties).await;
        if status != 200 {
            bail!("apply {resource_type}: {status} {body}");
        }
        Ok(body)
    }

    /// Deletes and follows a `Deleting` answer by polling get until 404 (what the host does).
    pub async fn delete_until_gone(
        &self,
        resource_type: &str,
        identifiers: Value,
    ) -> Result<DeleteOutcome> {
        let started = Instant::now();
        let (status, body) = self.delete(resource_type, identifiers.clone()).await;
        let mut polls = 0;
        match status {
            204 => {
                return Ok(DeleteOutcome {
                    polls,
                    elapsed: started.elapsed(),
                });
            }
            200 if body["status"] == "Deleting" => {}
            _ => bail!("delete {resource_type}: {status} {body}"),
        }
        loop {
            if started.elapsed() > Duration::from_secs(120) {
                bail!("delete {resource_type}: still there after 120 s");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            polls += 1;
            let (status, body) = self.get(resource_type, identifiers.clone()).await;
            match status {
                404 => {
                    return Ok(DeleteOutcome {
                        polls,
                        elapsed: started.elapsed(),
                    });
                }
                200 if body["status"] == "Deleting" => {}
                _ => bail!("delete {resource_type}: polling get answered {status} {body}"),
            }
        }
    }
}

/// How a delete ended.
#[derive(Debug)]
pub struct DeleteOutcome {
    /// Gets polled after a `Deleting` answer (0: the delete answered 204).
    pub polls: u32,
    pub elapsed: Duration,
}

/// `core/ConfigMap@v1` → (`core/ConfigMap`, `v1`).
fn split(resource_type: &str) -> (&str, &str) {
    resource_type.split_once('@').expect("type@version")
}

/// Sends `operation` with `body` to `transport` as `version`; the status and JSON body.
pub async fn send(
    transport: &cairn_extension_sdk::InProcessTransport,
    version: &str,
    operation: Operation,
    body: Value,
) -> (u16, Value) {
    let response = transport
        .send(TransportRequest {
            operation,
            extension_version: version.into(),
            body: serde_json::to_vec(&body).unwrap(),
            headers: Vec::new(),
            max_response_bytes: 16 << 20,
        })
        .await
        .unwrap();
    let json = if response.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&response.body).unwrap()
    };
    (response.status, json)
}

/// Identifiers of a namespaced object.
pub fn ids(namespace: &str, name: &str) -> Value {
    json!({ "metadata": { "name": name, "namespace": namespace } })
}

/// Identifiers of a cluster-wide object.
pub fn cluster_ids(name: &str) -> Value {
    json!({ "metadata": { "name": name } })
}

/// A named scenario.
pub type Scenario = (
    &'static str,
    Pin<Box<dyn Future<Output = Result<()>> + Send>>,
);

/// Runs every scenario at once (each on its own task) and fails naming each that failed.
pub async fn run_all(scenarios: Vec<Scenario>) {
    let mut tasks = Vec::new();
    for (name, scenario) in scenarios {
        tasks.push((name, tokio::spawn(scenario)));
    }
    let mut failures = Vec::new();
    for (name, task) in tasks {
        match task.await {
            Ok(Ok(())) => eprintln!("scenario {name}: ok"),
            Ok(Err(err)) => failures.push(format!("{name}: {err:#}")),
            Err(err) => failures.push(format!("{name}: panicked: {err}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Polls `condition` every 200 ms until it holds or `limit` passes.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut condition: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let started = Instant::now();
    loop {
        if condition().await.with_context(|| what.to_owned())? {
            return Ok(());
        }
        if started.elapsed() > limit {
            bail!("{what}: not after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A kubeconfig (YAML) for the API server at `server` (CA `ca_pem`) authenticating with `token`.
pub fn token_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testkube\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {}\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: sa\n  \
         context:\n    cluster: testkube\n    user: sa\ncurrent-context: sa\n",
        data_encoding::BASE64.encode(ca_pem.as_bytes()),
    )
}

/// Creates the service account `namespace/name`, binds it to the cluster role `role` (cluster-wide
/// when `cluster_wide`, else in `namespace` only) and returns a token of it.
pub async fn service_account_token(
    admin: &kube::Client,
    namespace: &str,
    name: &str,
    role: &str,
    cluster_wide: bool,
) -> Result<String> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let apply = PatchParams::apply("cairn-tests").force();
    accounts
        .patch(
            name,
            &apply,
            &Patch::Apply(json!({ "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": name, "namespace": namespace } })),
        )
        .await?;
    let subjects = json!([{ "kind": "ServiceAccount", "name": name, "namespace": namespace }]);
    let role_ref =
        json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role });
    let binding_name = format!("{namespace}-{name}");
    if cluster_wide {
        let resource = kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
            ),
            "clusterrolebindings",
        );
        let bindings: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
        bindings
            .patch(
                &binding_name,
                &apply,
                &Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": { "name": binding_name }, "subjects": subjects, "roleRef": role_ref })),
            )
            .await?;
    } else {
        let resource = kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "RoleBinding"),
            "rolebindings",
        );
        let bindings: Api<DynamicObject> =
            Api::namespaced_with(admin.clone(), namespace, &resource);
        bindings
            .patch(
                &binding_name,
                &apply,
                &Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": { "name": binding_name, "namespace": namespace },
                "subjects": subjects, "roleRef": role_ref })),
            )
            .await?;
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    token
        .status
        .and_then(|status| status.token)
        .context("the token request answered no token")
}

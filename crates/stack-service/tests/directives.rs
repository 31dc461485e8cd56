//! Config directives end to end through stacks: a `list*()` credential recorded as an `apiReference` and re-run
//! at delete time after the secret rotated; `apiReference` items as the seeds write them (GET and POST, `query`,
//! `requestBody`, `responseValuePath`); non-secure values persisted although the extension echoes nothing; seed
//! 002's `armApiCall` expression in the stack's `extensionConfigs`; a resource whose config's source (the cluster)
//! is gone leaving the stack as deleted, with its reason. Each test scans the data directory for the credentials
//! it rotated away from.

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::ResourceId;
use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::query::Query;
use cairn_engine::provider::ProviderFuture;
use cairn_engine::{
    Engine, EngineSettings, ProviderError, Providers, PutOutcome, ResourceProvider,
};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::Store;
use serde_json::{Value, json};

const CLUSTER_TYPE: &str = "Contoso.Clusters/clusters";
const CLUSTER: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1/providers/Contoso.Clusters/clusters/c1";

/// An extension that records the config of every call and echoes no config back (like a REST-draft extension).
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(Operation, Value)>>,
}

impl Recorder {
    /// The configs of the calls of `operation`, in order.
    fn configs(&self, operation: Operation) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(op, _)| *op == operation)
            .map(|(_, config)| config.clone())
            .collect()
    }
}

impl ExtensionTransport for Recorder {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let config = body.get("config").cloned().unwrap_or(Value::Null);
        self.calls.lock().unwrap().push((request.operation, config));
        let response = match request.operation {
            Operation::CreateOrUpdate => {
                let properties = body.get("properties").cloned().unwrap_or(json!({}));
                TransportResponse::json(
                    200,
                    json!({"type": body["type"], "apiVersion": body.get("apiVersion"),
                           "identifiers": {"name": properties["name"]}, "properties": properties,
                           "status": "Succeeded"})
                    .to_string()
                    .into_bytes(),
                )
            }
            Operation::Delete => TransportResponse::json(204, Vec::new()),
            _ => TransportResponse::json(
                404,
                json!({"error": {"code": "ResourceNotFound", "message": "not kept"}})
                    .to_string()
                    .into_bytes(),
            ),
        };
        Box::pin(async move { Ok(response) })
    }
}

/// A cluster resource provider standing in for an ARM RP: `GET` shows its endpoint, `POST listCredential`
/// (which requires `format=exec` and a `scope` body) returns its current credential. Both rotate.
struct Clusters {
    endpoint: Mutex<String>,
    credential: Mutex<String>,
    /// While false, every call fails 503 (the cluster is there but does not answer).
    reachable: Mutex<bool>,
    /// While set, the cluster is deleted: every call answers 404.
    gone: Mutex<bool>,
    /// `(query, body)` of every `listCredential` call.
    seen: Mutex<Vec<(Option<String>, Option<Value>)>>,
}

impl Clusters {
    fn new(endpoint: &str, credential: &str) -> Self {
        Clusters {
            endpoint: Mutex::new(endpoint.into()),
            credential: Mutex::new(credential.into()),
            reachable: Mutex::new(true),
            gone: Mutex::new(false),
            seen: Mutex::new(Vec::new()),
        }
    }

    fn check(&self, id: &ResourceId) -> Result<(), ProviderError> {
        if *self.gone.lock().unwrap() || !id.to_string().eq_ignore_ascii_case(CLUSTER) {
            Err(ProviderError::not_found(id))
        } else if !*self.reachable.lock().unwrap() {
            Err(ProviderError::new(
                503,
                "ServiceUnavailable",
                "the cluster does not answer",
            ))
        } else {
            Ok(())
        }
    }
}

impl ResourceProvider for Clusters {
    fn put<'a>(
        &'a self,
        _: &'a ResourceId,
        _: &'a str,
        _: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome> {
        Box::pin(async {
            Err(ProviderError::bad_request(
                "ReadOnly",
                "clusters are read only here",
            ))
        })
    }

    fn get<'a>(&'a self, id: &'a ResourceId, _: &'a str) -> ProviderFuture<'a, Option<Value>> {
        Box::pin(async move {
            self.check(id)?;
            Ok(Some(
                json!({"id": CLUSTER, "name": "c1", "type": CLUSTER_TYPE,
                           "properties": {"endpoint": *self.endpoint.lock().unwrap()}}),
            ))
        })
    }

    fn delete<'a>(&'a self, _: &'a ResourceId, _: &'a str) -> ProviderFuture<'a, bool> {
        Box::pin(async { Ok(false) })
    }

    fn action_with_query<'a>(
        &'a self,
        id: &'a ResourceId,
        _: &'a str,
        action: &'a str,
        query: Option<&'a str>,
        body: Option<&'a Value>,
    ) -> ProviderFuture<'a, Value> {
        Box::pin(async move {
            self.check(id)?;
            self.seen
                .lock()
                .unwrap()
                .push((query.map(str::to_owned), body.cloned()));
            if !action.eq_ignore_ascii_case("listCredential")
                || query != Some("format=exec")
                || body != Some(&json!({"scope": "admin"}))
            {
                return Err(ProviderError::bad_request(
                    "BadRequest",
                    "wrong action, query or body",
                ));
            }
            Ok(
                json!({"kubeconfigs": [{"name": "admin", "value": *self.credential.lock().unwrap()}]}),
            )
        })
    }
}

struct Env {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    recorder: Arc<Recorder>,
    clusters: Arc<Clusters>,
}

async fn setup() -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = common::store_with_group_and_vault(dir.path()).await;
    let recorder = Arc::new(Recorder::default());
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        "Recorder",
        "1.0.0",
        recorder.clone(),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
        "http://localhost/cairn-test",
    ));
    let clusters = Arc::new(Clusters::new(
        "https://c1-original.example",
        "kube-ORIGINAL-4b1d",
    ));
    let providers = || Providers::empty().with(CLUSTER_TYPE, clusters.clone());
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        providers(),
        EngineSettings::default(),
    )
    .expect("engine");
    let service = StackService::new(
        engine,
        store.clone(),
        host,
        providers(),
        StackServiceSettings {
            lease_ttl: Duration::from_secs(10),
            heartbeat_interval: Duration::from_millis(200),
            max_delete_rounds: 1,
            retry_backoff: Duration::from_millis(10),
            ..StackServiceSettings::default()
        },
    );
    Env {
        dir,
        store,
        service,
        recorder,
        clusters,
    }
}

/// A stack over one recorder resource in a nested deployment whose `extensionConfigs` are `nested_configs`;
/// `root_configs` are the stack's own `extensionConfigs`.
fn stack(nested_configs: Value, root_configs: Value) -> DeploymentStack {
    serde_json::from_value(stack_body(nested_configs, root_configs)).expect("a stack body")
}

/// The JSON of [`stack`]'s body.
fn stack_body(nested_configs: Value, root_configs: Value) -> Value {
    let extension = json!({"name": "Recorder", "version": "1.0.0", "config": {
        "cluster": {"type": "string", "defaultValue": "default-cluster"},
        "endpoint": {"type": "secureString"},
        "token": {"type": "secureString"}
    }});
    let resources = json!({"w1": {"extension": "rec", "type": "thing", "apiVersion": "v1",
                                  "properties": {"name": "w1"}}});
    let template = if nested_configs.is_null() {
        json!({"extensions": {"rec": extension}, "resources": resources})
    } else {
        json!({
            "parameters": {"useAdmin": {"type": "bool"}},
            "resources": {"inner": {
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "inner",
                "properties": {
                    "mode": "Incremental",
                    "extensionConfigs": nested_configs,
                    "template": {
                        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                        "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
                        "extensions": {"rec": extension}, "resources": resources
                    }
                }
            }}
        })
    };
    let mut template = template;
    template["$schema"] =
        json!("https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#");
    template["languageVersion"] = json!("2.2-experimental");
    template["contentVersion"] = json!("1.0.0.0");
    let mut properties = json!({
        "template": template,
        "actionOnUnmanage": {"resources": "delete"},
        "denySettings": {"mode": "none"}
    });
    if !nested_configs.is_null() {
        properties["parameters"] = json!({"useAdmin": {"value": true}});
    }
    if !root_configs.is_null() {
        properties["extensionConfigs"] = root_configs;
    }
    json!({ "properties": properties })
}

async fn create(env: &Env, name: &str, body: DeploymentStack) -> Value {
    env.service
        .create_or_update(RG, name, body, None)
        .await
        .expect("accepted");
    let created = settle(&env.service, name).await;
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    created
}

async fn delete(env: &Env, name: &str) -> Value {
    let options = StackDeleteOptions::from_query(&Query::parse("unmanageAction.Resources=delete"))
        .expect("options");
    env.service
        .delete(RG, name, options, None)
        .await
        .expect("accepted");
    settle(&env.service, name).await
}

/// The stack's persisted config of the recorder extension.
fn recorder_config(stack: &Value) -> Value {
    stack["properties"]["deploymentExtensions"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["name"] == "Recorder"))
        .map(|e| e["config"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_credential_is_recorded_as_a_directive_and_re_fetched_after_rotation() {
    let env = setup().await;
    set_secret(&env.store, "admin-token", "admin-ORIGINAL-91c2").await;
    set_secret(&env.store, "user-token", "user-ORIGINAL-5e07").await;
    let secret_id = |name: &str| format!("{VAULT}/secrets/{name}");
    let nested = json!({"rec": {
        "cluster": {"value": "c7"},
        "endpoint": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "user-token"}},
        "token": "[if(parameters('useAdmin'), listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', 'admin-token'), '2023-07-01').value, listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', 'user-token'), '2023-07-01').value)]"
    }});
    let created = create(&env, "lists", stack(nested, Value::Null)).await;

    // The deployment called the extension with the value; the stack keeps the taken branch's directive.
    let creates = env.recorder.configs(Operation::CreateOrUpdate);
    assert_eq!(creates.last().unwrap()["token"], "admin-ORIGINAL-91c2");
    let config = recorder_config(&created);
    assert_eq!(
        config["token"],
        json!({"apiReference": {"method": "POST", "armResourceId": secret_id("admin-token"),
                                "apiVersion": "2023-07-01", "action": "listValue",
                                "responseValuePath": "value"}}),
        "{created:#}"
    );
    assert!(!created.to_string().contains("ORIGINAL"), "{created:#}");

    set_secret(&env.store, "admin-token", "admin-ROTATED-33aa").await;
    assert_eq!(
        delete(&env, "lists").await,
        Value::Null,
        "the stack is gone"
    );
    let deletes = env.recorder.configs(Operation::Delete);
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0]["token"], "admin-ROTATED-33aa");
    assert_eq!(deletes[0]["cluster"], "c7");
    for old in [
        "admin-ORIGINAL-91c2",
        "admin-ROTATED-33aa",
        "user-ORIGINAL-5e07",
    ] {
        assert_eq!(
            files_containing(env.dir.path(), old),
            Vec::<String>::new(),
            "{old}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_references_as_the_seeds_write_them_are_re_run_at_delete() {
    let env = setup().await;
    let root = json!({"rec": {
        "token": {"apiReference": {"method": "POST", "armResourceId": CLUSTER, "apiVersion": "2024-02-01",
                                   "action": "listCredential", "query": "format=exec",
                                   "requestBody": {"scope": "admin"}, "responseValuePath": "kubeconfigs[0].value"}},
        "endpoint": {"apiReference": {"method": "GET", "armResourceId": CLUSTER, "apiVersion": "2024-02-01",
                                      "responseValuePath": "properties.endpoint"}}
    }});
    let created = create(&env, "apis", stack(Value::Null, root.clone())).await;
    let creates = env.recorder.configs(Operation::CreateOrUpdate);
    assert_eq!(creates.last().unwrap()["token"], "kube-ORIGINAL-4b1d");
    assert_eq!(
        creates.last().unwrap()["endpoint"],
        "https://c1-original.example"
    );
    assert_eq!(
        recorder_config(&created)["token"],
        root["rec"]["token"],
        "{created:#}"
    );
    assert_eq!(
        recorder_config(&created)["endpoint"],
        root["rec"]["endpoint"]
    );
    assert_eq!(
        env.clusters.seen.lock().unwrap()[0],
        (
            Some("format=exec".to_owned()),
            Some(json!({"scope": "admin"}))
        )
    );

    // Rotate, then make the cluster unreachable: the delete fails naming the directive, never a value.
    *env.clusters.credential.lock().unwrap() = "kube-ROTATED-77e0".into();
    *env.clusters.endpoint.lock().unwrap() = "https://c1-rotated.example".into();
    *env.clusters.reachable.lock().unwrap() = false;
    let failed = delete(&env, "apis").await;
    assert_eq!(
        failed["properties"]["provisioningState"], "failed",
        "{failed:#}"
    );
    let error = failed["properties"]["failedResources"][0]["error"].to_string();
    assert!(error.contains("listCredential"), "{error}");
    assert!(error.contains(CLUSTER), "{error}");
    assert!(!error.contains("kube-"), "{error}");

    *env.clusters.reachable.lock().unwrap() = true;
    assert_eq!(delete(&env, "apis").await, Value::Null, "the stack is gone");
    let deletes = env.recorder.configs(Operation::Delete);
    let last = deletes.last().expect("a delete reached the extension");
    assert_eq!(last["token"], "kube-ROTATED-77e0");
    assert_eq!(last["endpoint"], "https://c1-rotated.example");
    let seen = env.clusters.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|call| *call
            == (
                Some("format=exec".to_owned()),
                Some(json!({"scope": "admin"}))
            )),
        "{seen:?}"
    );
    for old in ["kube-ORIGINAL-4b1d", "kube-ROTATED-77e0", "c1-original"] {
        assert_eq!(
            files_containing(env.dir.path(), old),
            Vec::<String>::new(),
            "{old}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_secure_values_are_persisted_though_the_extension_echoes_nothing() {
    let env = setup().await;
    set_secret(&env.store, "token", "t0ken-5a5a").await;
    let root = json!({"rec": {
        "cluster": {"value": "c9"},
        "endpoint": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "token"}},
        "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "token"}}
    }});
    let created = create(&env, "echoless", stack(Value::Null, root)).await;
    assert_eq!(
        recorder_config(&created)["cluster"],
        json!({"value": "c9"}),
        "{created:#}"
    );
    assert_eq!(
        delete(&env, "echoless").await,
        Value::Null,
        "the stack is gone"
    );
    let deletes = env.recorder.configs(Operation::Delete);
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0]["cluster"], "c9");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auth_group_in_the_stack_body_reaches_the_extension_nested_at_deploy_and_delete() {
    let env = setup().await;
    set_secret(&env.store, "admin-token", "auth-ORIGINAL-7d1e").await;
    set_secret(&env.store, "endpoint", "https://c9.example").await;
    let root = json!({"rec": {
        "cluster": {"value": "c9"},
        "auth": {
            "token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "admin-token"}},
            "endpoint": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "endpoint"}}
        }
    }});
    let created = create(&env, "grouped", stack(Value::Null, root)).await;

    let creates = env.recorder.configs(Operation::CreateOrUpdate);
    assert_eq!(
        creates.last().unwrap()["auth"]["token"],
        "auth-ORIGINAL-7d1e"
    );
    assert_eq!(creates.last().unwrap()["cluster"], "c9");
    // The record keeps the group's directive (under its dotted name), never its value.
    let config = recorder_config(&created);
    assert_eq!(
        config["auth.token"]["keyVaultReference"]["secretName"], "admin-token",
        "{created:#}"
    );
    assert!(!created.to_string().contains("ORIGINAL"), "{created:#}");

    set_secret(&env.store, "admin-token", "auth-ROTATED-0b4c").await;
    assert_eq!(
        delete(&env, "grouped").await,
        Value::Null,
        "the stack is gone"
    );
    let deletes = env.recorder.configs(Operation::Delete);
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(
        deletes[0]["auth"],
        json!({"token": "auth-ROTATED-0b4c", "endpoint": "https://c9.example"}),
        "the extension gets the group back, with the rotated secret: {deletes:?}"
    );
    assert_eq!(deletes[0]["cluster"], "c9");
    for old in ["auth-ORIGINAL-7d1e", "auth-ROTATED-0b4c"] {
        assert_eq!(
            files_containing(env.dir.path(), old),
            Vec::<String>::new(),
            "{old}"
        );
    }
}

/// The stack's body as JSON with `edit` applied.
fn edited(body: DeploymentStack, edit: impl FnOnce(&mut Value)) -> DeploymentStack {
    let mut value = serde_json::to_value(body).expect("a stack body");
    edit(&mut value);
    serde_json::from_value(value).expect("a stack body")
}

/// Seed 001: the cluster a resource's credentials are listed from was deleted before the stack let the resource
/// go. The directive answers 404, so the resource went with its control plane: it leaves the stack as deleted,
/// with a reason naming the cluster, instead of failing every round (and the stack with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_whose_config_source_is_gone_is_reported_deleted_with_its_reason() {
    let env = setup().await;
    let root = json!({"rec": {
        "token": {"apiReference": {"method": "POST", "armResourceId": CLUSTER, "apiVersion": "2024-02-01",
                                   "action": "listCredential", "query": "format=exec",
                                   "requestBody": {"scope": "admin"}, "responseValuePath": "kubeconfigs[0].value"}},
        "endpoint": {"apiReference": {"method": "GET", "armResourceId": CLUSTER, "apiVersion": "2024-02-01",
                                      "responseValuePath": "properties.endpoint"}}
    }});
    let body = stack(Value::Null, root.clone());
    create(&env, "orphans", body.clone()).await;
    *env.clusters.gone.lock().unwrap() = true;

    // The template no longer declares the resource: the stack unmanages (deletes) it.
    let without = edited(body, |b| {
        b["properties"]["template"]["resources"] = json!({});
    });
    let updated = create(&env, "orphans", without).await;
    let properties = &updated["properties"];
    assert_eq!(properties["failedResources"], json!([]), "{updated:#}");
    assert_eq!(properties["resources"], json!([]), "{updated:#}");
    let deleted = &properties["deletedResources"];
    assert_eq!(deleted.as_array().map(Vec::len), Some(1), "{updated:#}");
    assert_eq!(deleted[0]["identifiers"], json!({"name": "w1"}));
    let reason = &deleted[0]["reason"];
    assert_eq!(
        reason["code"], "DeploymentStackConfigSourceGone",
        "{updated:#}"
    );
    assert_eq!(reason["target"], "extensionConfigs.Recorder.token");
    let message = reason["message"].as_str().unwrap_or_default();
    assert!(message.contains(CLUSTER), "{message}");
    assert!(message.contains("listCredential"), "{message}");
    assert_eq!(
        env.recorder.configs(Operation::Delete),
        Vec::<Value>::new(),
        "no delete reached the extension"
    );
    assert_eq!(
        delete(&env, "orphans").await,
        Value::Null,
        "the stack is gone"
    );
}

/// Seed 002: a stack body's `{"type": "armApiCall", "value": "[list...()]"}` is made by the deployment, which
/// records the call; the stack persists that `apiReference` and makes the call again when it deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arm_api_call_in_the_stack_configs_is_persisted_as_a_directive_and_re_run() {
    let env = setup().await;
    set_secret(&env.store, "admin-token", "call-ORIGINAL-2f6a").await;
    let call = "[listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', parameters('secretName')), '2023-07-01').value]";
    let root = json!({"rec": {
        "cluster": {"value": "c5"},
        "endpoint": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "admin-token"}},
        "token": {"type": "armApiCall", "value": call}
    }});
    let body = edited(stack(Value::Null, root), |b| {
        b["properties"]["template"]["parameters"] = json!({"secretName": {"type": "string"}});
        b["properties"]["parameters"] = json!({"secretName": {"value": "admin-token"}});
    });
    let created = create(&env, "calls", body).await;
    let creates = env.recorder.configs(Operation::CreateOrUpdate);
    assert_eq!(creates.last().unwrap()["token"], "call-ORIGINAL-2f6a");
    assert_eq!(
        recorder_config(&created)["token"],
        json!({"apiReference": {"method": "POST", "armResourceId": format!("{VAULT}/secrets/admin-token"),
                                "apiVersion": "2023-07-01", "action": "listValue", "responseValuePath": "value"}}),
        "{created:#}"
    );
    assert!(!created.to_string().contains("ORIGINAL"), "{created:#}");

    set_secret(&env.store, "admin-token", "call-ROTATED-81d3").await;
    assert_eq!(
        delete(&env, "calls").await,
        Value::Null,
        "the stack is gone"
    );
    let deletes = env.recorder.configs(Operation::Delete);
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0]["token"], "call-ROTATED-81d3");
    assert_eq!(deletes[0]["cluster"], "c5");
    for old in ["call-ORIGINAL-2f6a", "call-ROTATED-81d3"] {
        assert_eq!(
            files_containing(env.dir.path(), old),
            Vec::<String>::new(),
            "{old}"
        );
    }
}

/// Seed 001: a `runtimeReference` names no `apiVersion`. The deployment calls with the version the source was
/// deployed with (a secret another stack deployed at `2023-07-01`), the stack persists the directive without a
/// version, and its delete looks the version up again the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_reference_without_api_version_is_persisted_and_re_run() {
    let env = setup().await;
    let secrets: DeploymentStack = serde_json::from_value(json!({"properties": {
        "template": {
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "contentVersion": "1.0.0.0",
            "resources": [{"type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01",
                           "name": "ops/runtime-token", "properties": {"value": "runtime-ORIGINAL-6c1f"}}]
        },
        "actionOnUnmanage": {"resources": "detach"},
        "denySettings": {"mode": "none"}
    }}))
    .expect("a stack body");
    create(&env, "secrets", secrets).await;
    let secret = format!("{VAULT}/secrets/runtime-token");
    let runtime = json!({"runtimeReference": {"resourceId": secret, "action": "listValue", "propertyPath": "value"}});
    let root = json!({"rec": {
        "endpoint": runtime,
        "token": runtime
    }});
    let created = create(&env, "runtime", stack(Value::Null, root)).await;
    let creates = env.recorder.configs(Operation::CreateOrUpdate);
    assert_eq!(creates.last().unwrap()["token"], "runtime-ORIGINAL-6c1f");
    assert_eq!(
        recorder_config(&created)["token"],
        json!({"apiReference": {"method": "POST", "armResourceId": secret, "action": "listValue",
                                "responseValuePath": "value"}}),
        "{created:#}"
    );

    set_secret(&env.store, "runtime-token", "runtime-ROTATED-0d9e").await;
    assert_eq!(
        delete(&env, "runtime").await,
        Value::Null,
        "the stack is gone"
    );
    let deletes = env.recorder.configs(Operation::Delete);
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0]["token"], "runtime-ROTATED-0d9e");
}

/// Issue 43: a `list*()` credential reached through variables, `union`, property paths through `createObject`,
/// or a variable holding the whole response is kept as a directive and fetched again (rotated) at delete. Each form
/// deploys its own stack with its own secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_traced_list_form_is_a_directive_re_fetched_after_rotation() {
    let env = setup().await;
    let list = |secret: &str| {
        format!(
            "listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', '{secret}'), '2023-07-01')"
        )
    };
    // (stack and secret name, the token's expression, the parent template's variables)
    let forms = [
        (
            "via-variable",
            "[variables('cred')]".to_string(),
            json!({"cred": format!("[{}.value]", list("via-variable"))}),
        ),
        (
            "via-union",
            format!(
                "[union(createObject('k', 'x'), createObject('k', {}.value)).k]",
                list("via-union")
            ),
            json!({}),
        ),
        (
            "via-object-path",
            format!(
                "[createObject('a', createObject('b', {}.value)).a.b]",
                list("via-object-path")
            ),
            json!({}),
        ),
        (
            "via-whole-response",
            "[variables('resp').value]".to_string(),
            json!({"resp": format!("[{}]", list("via-whole-response"))}),
        ),
        (
            "via-variable-if",
            format!(
                "[if(parameters('useAdmin'), variables('cred2'), {}.value)]",
                list("never-read")
            ),
            json!({"cred2": format!("[{}.value]", list("via-variable-if"))}),
        ),
    ];
    set_secret(&env.store, "endpoint", "https://c1.example").await;
    let mut failures = Vec::new();
    for (name, token, variables) in forms {
        let original = format!("{name}-ORIGINAL-1f");
        let rotated = format!("{name}-ROTATED-2e");
        set_secret(&env.store, name, &original).await;
        let mut body = stack_body(
            json!({"rec": {"cluster": {"value": "c1"}, "token": token,
                "endpoint": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "endpoint"}}}}),
            Value::Null,
        );
        body["properties"]["template"]["variables"] = variables;
        let body: DeploymentStack = serde_json::from_value(body).expect("a stack body");
        let created = create(&env, name, body).await;
        let stored = recorder_config(&created)["token"].clone();
        let want = json!({"apiReference": {"method": "POST",
            "armResourceId": format!("{VAULT}/secrets/{name}"), "apiVersion": "2023-07-01",
            "action": "listValue", "responseValuePath": "value"}});
        if stored != want {
            failures.push(format!("{name}: the stack keeps {stored} for token"));
        }
        set_secret(&env.store, name, &rotated).await;
        let before = env.recorder.configs(Operation::Delete).len();
        let gone = delete(&env, name).await;
        let deletes = env.recorder.configs(Operation::Delete)[before..].to_vec();
        if gone != Value::Null || deletes.len() != 1 || deletes[0]["token"] != rotated {
            failures.push(format!(
                "{name}: the delete sent {deletes:?}, the stack is now {}",
                gone["properties"]["provisioningState"]
            ));
        }
        for secret in [&original, &rotated] {
            let files = files_containing(env.dir.path(), secret);
            if !files.is_empty() {
                failures.push(format!("{name}: {secret} is stored in {files:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

//! Seed config forms through the engine: seed 002's `{"type": "armApiCall", "value": "[list...()]"}` in a
//! deployment's `extensionConfigs` (made at deployment, recorded as an `apiReference`), seed 001's
//! `runtimeReference` without `apiVersion` (called with the version the resource was deployed with), and a
//! config passed down three levels of modules with `extensionConfigs('alias')` (values reach the innermost
//! extension, every record keeps directives).

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::ResourceId;
use cairn_engine::provider::ProviderFuture;
use cairn_engine::{DeployOptions, Providers, PutOutcome, ResourceProvider};
use common::*;
use serde_json::{Value, json};

/// [`ClusterProvider`], also noting the API version of every action call.
#[derive(Default)]
struct Clusters {
    inner: ClusterProvider,
    versions: Mutex<Vec<String>>,
}

impl ResourceProvider for Clusters {
    fn put<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
        body: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome> {
        self.inner.put(id, api_version, body)
    }

    fn get<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Value>> {
        self.inner.get(id, api_version)
    }

    fn delete<'a>(&'a self, id: &'a ResourceId, api_version: &'a str) -> ProviderFuture<'a, bool> {
        self.inner.delete(id, api_version)
    }

    fn action<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
        action: &'a str,
        body: Option<&'a Value>,
    ) -> ProviderFuture<'a, Value> {
        self.versions.lock().unwrap().push(api_version.to_owned());
        self.inner.action(id, api_version, action, body)
    }
}

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// An engine with the cluster provider, a Key Vault `ops` holding secret `token`, and cluster `aks1` deployed
/// with API version `2024-01-01`.
async fn setup_clusters() -> (TestEnv, Arc<Clusters>) {
    let clusters = Arc::new(Clusters::default());
    let providers = Providers::empty().with(CLUSTER_TYPE, clusters.clone());
    let env = setup_with(settings(), Duration::from_millis(1), providers).await;
    let template = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "ops", "location": "westus", "properties": {} },
            { "type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "ops/token",
              "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'ops')]"],
              "properties": { "value": "token-from-the-vault" } },
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "aks1", "properties": {} }
        ]
    });
    let record = deploy(&env.engine, RG, "setup", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    (env, clusters)
}

fn cluster_id() -> String {
    format!("{RG}/providers/Test.Rp/clusters/aks1")
}

fn vault_id() -> String {
    format!("{RG}/providers/Microsoft.KeyVault/vaults/ops")
}

/// The fake extension's declaration as a stack's template gives it: the credentials typed secure, since seed 000's
/// stacks-mode table lets a directive stand only in a secure property.
fn fake_declaration() -> Value {
    json!({ "name": "Fake", "version": "1.0.0", "config": {
        "cluster": { "type": "string", "defaultValue": "c1" },
        "namespace": { "type": "string", "nullable": true },
        "token": { "type": "secureString", "nullable": true },
        "kubeConfig": { "type": "secureString", "nullable": true }
    } })
}

/// `fake_template` with [`fake_declaration`].
fn stack_template(resources: Value, outputs: Value) -> Value {
    let mut template = fake_template(resources, outputs);
    template["extensions"]["fake"] = fake_declaration();
    template
}

/// Deploys `template` as a stack would (its records show configs), with `extension_configs` as the request's.
async fn deploy_stack_initiated(
    env: &TestEnv,
    name: &str,
    template: Value,
    parameters: Value,
    extension_configs: Value,
) -> Value {
    try_deploy(env, name, template, parameters, extension_configs)
        .await
        .expect("accepted")
}

/// [`deploy_stack_initiated`], or the error of a request refused before it runs.
async fn try_deploy(
    env: &TestEnv,
    name: &str,
    template: Value,
    parameters: Value,
    extension_configs: Value,
) -> Result<Value, cairn_engine::EngineError> {
    let req: cairn_arm::models::deployment::Deployment = serde_json::from_value(json!({
        "properties": { "mode": "Incremental", "template": template, "parameters": parameters,
                        "extensionConfigs": extension_configs }
    }))
    .expect("a deployment request");
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            name,
            req,
            DeployOptions {
                stack_initiated: true,
                ..Default::default()
            },
        )
        .await?;
    let done = tokio::time::timeout(Duration::from_secs(60), handle.wait())
        .await
        .expect("the deployment finishes in time")
        .expect("record");
    Ok(serde_json::to_value(done).unwrap())
}

/// The config a deployment record shows for its own alias `fake`.
fn recorded_config(record: &Value) -> Value {
    recorded_config_of(record, "fake")
}

/// The config a deployment record shows for its own `alias`.
fn recorded_config_of(record: &Value, alias: &str) -> Value {
    let id = record["id"].as_str().unwrap_or_default();
    record["properties"]["extensions"]
        .as_array()
        .and_then(|all| {
            all.iter().find(|e| {
                e["alias"] == alias
                    && e["deploymentId"]
                        .as_str()
                        .is_none_or(|d| d.eq_ignore_ascii_case(id))
            })
        })
        .map(|e| e["config"].clone())
        .unwrap_or(Value::Null)
}

/// Seed 002: a parameters file's (so a request's) `{"type": "armApiCall", "value": "[list...()]"}` is made
/// against the deployment's own template — its parameters, its `resourceId()` — and recorded as the
/// `apiReference` a stack re-runs, never as the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arm_api_call_in_the_input_is_made_and_recorded_as_a_directive() {
    let (env, _) = setup_clusters().await;
    let template = json!({
        "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "parameters": { "clusterName": { "type": "string" } },
        "extensions": { "fake": fake_declaration() },
        "resources": { "w": widget("w", json!({})) }
    });
    let call = "[listCredentials(resourceId('Test.Rp/clusters', parameters('clusterName')), '2024-01-01').kubeconfigs[0].value]";
    let configs = json!({ "fake": {
        "namespace": { "type": "string", "value": "apps" },
        "kubeConfig": { "type": "armApiCall", "value": call }
    }});
    let record = deploy_stack_initiated(
        &env,
        "called",
        template,
        json!({ "clusterName": { "value": "aks1" } }),
        configs,
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(
        env.fake.config_of("w").unwrap(),
        json!({ "cluster": "c1", "namespace": "apps", "kubeConfig": API_KUBECONFIG })
    );
    let config = recorded_config(&record);
    assert_eq!(
        config["kubeConfig"],
        json!({ "apiReference": { "method": "POST", "armResourceId": cluster_id(), "apiVersion": "2024-01-01",
                                  "action": "listCredentials", "responseValuePath": "kubeconfigs[0].value" } }),
        "{record:#}"
    );
    assert_eq!(config["namespace"], json!({ "value": "apps" }));
    assert!(!record.to_string().contains(API_KUBECONFIG), "{record:#}");

    // Only a call can be made again: anything else is refused before the deployment runs, naming the property.
    let not_a_call = json!({ "fake": { "kubeConfig": { "type": "armApiCall", "value": "[parameters('clusterName')]" } } });
    let template = stack_template(json!({ "w2": widget("w2", json!({})) }), json!({}));
    let mut template = template;
    template["parameters"] = json!({ "clusterName": { "type": "string" } });
    let refused = try_deploy(
        &env,
        "refused",
        template,
        json!({ "clusterName": { "value": "aks1" } }),
        not_a_call,
    )
    .await
    .expect_err("refused");
    let error = serde_json::to_string(refused.to_arm().detail()).unwrap();
    assert!(error.contains("kubeConfig"), "{error}");
    assert!(error.contains("list*()"), "{error}");
    assert_eq!(env.fake.config_of("w2"), None);
}

/// Seed 001: a `runtimeReference` without `apiVersion` calls with the version the resource was deployed with
/// (`2024-01-01` here), and the record keeps it without a version, so later reads look it up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_reference_without_api_version_uses_the_deployed_version() {
    let (env, clusters) = setup_clusters().await;
    let template = stack_template(json!({ "w": widget("w", json!({})) }), json!({}));
    let configs = json!({ "fake": { "kubeConfig": { "runtimeReference": {
        "resourceId": cluster_id(), "action": "listCredentials", "propertyPath": "$.kubeconfigs[0].value" } } } });
    let record = deploy_stack_initiated(&env, "runtime", template, json!({}), configs).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(
        env.fake.config_of("w").unwrap()["kubeConfig"],
        API_KUBECONFIG
    );
    assert_eq!(*clusters.versions.lock().unwrap(), ["2024-01-01"]);
    assert_eq!(
        recorded_config(&record)["kubeConfig"],
        json!({ "apiReference": { "method": "POST", "armResourceId": cluster_id(),
                                  "action": "listCredentials", "responseValuePath": "$.kubeconfigs[0].value" } }),
        "{record:#}"
    );

    // A resource that is gone answers not found; one cairn did not deploy has no version to use.
    let gone = format!("{RG}/providers/Test.Rp/clusters/gone");
    let configs = json!({ "fake": { "kubeConfig": { "runtimeReference": {
        "resourceId": gone, "action": "listCredentials", "propertyPath": "kubeconfigs[0].value" } } } });
    let template = stack_template(json!({ "w2": widget("w2", json!({})) }), json!({}));
    let failed = deploy_stack_initiated(&env, "gone", template, json!({}), configs).await;
    assert_eq!(state(&failed), "Failed", "{failed:#}");
    let error = failed["properties"]["error"].to_string();
    assert!(error.contains("was not found"), "{error}");
    let unmanaged =
        ResourceId::parse(&format!("{RG}/providers/Test.Rp/clusters/elsewhere")).unwrap();
    clusters
        .inner
        .put(&unmanaged, "2024-01-01", &json!({}))
        .await
        .unwrap();
    let configs = json!({ "fake": { "kubeConfig": { "runtimeReference": {
        "resourceId": unmanaged.to_string(), "action": "listCredentials", "propertyPath": "kubeconfigs[0].value" } } } });
    let template = stack_template(json!({ "w3": widget("w3", json!({})) }), json!({}));
    let failed = deploy_stack_initiated(&env, "elsewhere", template, json!({}), configs).await;
    assert_eq!(state(&failed), "Failed", "{failed:#}");
    let error = failed["properties"]["error"].to_string();
    assert!(
        error.contains("ExtensionConfigApiVersionUnknown"),
        "{error}"
    );
    assert!(error.contains("apiVersion"), "{error}");
    assert_eq!(
        clusters.inner.actions.load(Ordering::SeqCst),
        1,
        "neither the gone cluster nor the one without a version is called"
    );
}

/// A module with the fake extension as `fake`, passing its config on to `inner` (when given) through
/// `extensionConfigs('fake')`, and deploying a widget named `name`.
fn passing_module(name: &str, inner: Option<Value>) -> Value {
    passing_module_as(name, "fake", json!("[extensionConfigs('fake')]"), inner)
}

/// A module with the fake extension as `alias`, given `input` as that alias's config by its parent.
fn passing_module_as(name: &str, alias: &str, input: Value, inner: Option<Value>) -> Value {
    let mut resources = json!({ "w": { "extension": alias, "type": "widget", "apiVersion": "v1",
                                       "properties": { "name": name } } });
    if let Some(inner) = inner {
        resources["next"] = inner;
    }
    let template = json!({
        "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "extensions": { alias: fake_declaration() },
        "resources": resources
    });
    json!({ "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": format!("m-{name}"),
            "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                            "extensionConfigs": { alias: input },
                            "template": template } })
}

/// Seed 002: a module passes its config to a nested module, which passes it again. The innermost extension call
/// gets the values; the record of every level keeps the directives, never the values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_passed_down_three_levels_keeps_its_directives() {
    let (env, _) = setup_clusters().await;
    let level3 = passing_module("three", None);
    let level2 = passing_module("two", Some(level3));
    let level1 = passing_module("one", Some(level2));
    let template = json!({
        "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "extensions": { "fake": fake_declaration() },
        "resources": { "w": widget("root", json!({})), "next": level1 }
    });
    let directives = json!({
        "cluster": { "value": "c3" },
        "token": { "keyVaultReference": { "keyVault": { "id": vault_id() }, "secretName": "token" } },
        "kubeConfig": { "apiReference": { "method": "POST", "armResourceId": cluster_id(), "apiVersion": "2024-01-01",
                                          "action": "listCredentials", "responseValuePath": "kubeconfigs[0].value" } }
    });
    let record = deploy_stack_initiated(
        &env,
        "levels",
        template,
        json!({}),
        json!({ "fake": directives.clone() }),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let resolved =
        json!({ "cluster": "c3", "token": "token-from-the-vault", "kubeConfig": API_KUBECONFIG });
    for widget in ["root", "one", "two", "three"] {
        assert_eq!(env.fake.config_of(widget).unwrap(), resolved, "{widget}");
    }
    for level in ["levels", "m-one", "m-two", "m-three"] {
        let level_record = serde_json::to_value(env.engine.get(RG, level).await.unwrap()).unwrap();
        assert_eq!(
            state(&level_record),
            "Succeeded",
            "{level}: {level_record:#}"
        );
        assert_eq!(
            recorded_config(&level_record),
            directives,
            "{level}: {level_record:#}"
        );
        let text = level_record.to_string();
        for secret in ["token-from-the-vault", API_KUBECONFIG] {
            assert!(!text.contains(secret), "{level}: {secret} leaked: {text}");
        }
    }
}

/// The same through three aliases and both of seed 002's spellings: `extensionConfigs('fake')` into `k1`, the
/// `{"type": "inherit"}` form from `k1` into `k2`, `extensionConfigs('k2')` into `fake` again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_passed_down_under_other_aliases_keeps_its_directives() {
    let (env, _) = setup_clusters().await;
    let level3 = passing_module_as("three", "fake", json!("[extensionConfigs('k2')]"), None);
    let level2 = passing_module_as(
        "two",
        "k2",
        json!({ "type": "inherit", "value": "k1" }),
        Some(level3),
    );
    let level1 = passing_module_as(
        "one",
        "k1",
        json!("[extensionConfigs('fake')]"),
        Some(level2),
    );
    let template = json!({
        "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "extensions": { "fake": fake_declaration() },
        "resources": { "next": level1 }
    });
    let directives = json!({
        "cluster": { "value": "c4" },
        "kubeConfig": { "apiReference": { "method": "POST", "armResourceId": cluster_id(), "apiVersion": "2024-01-01",
                                          "action": "listCredentials", "responseValuePath": "kubeconfigs[0].value" } }
    });
    let record = deploy_stack_initiated(
        &env,
        "aliases",
        template,
        json!({}),
        json!({ "fake": directives.clone() }),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    for widget in ["one", "two", "three"] {
        assert_eq!(
            env.fake.config_of(widget).unwrap(),
            json!({ "cluster": "c4", "kubeConfig": API_KUBECONFIG }),
            "{widget}"
        );
    }
    for (level, alias) in [("m-one", "k1"), ("m-two", "k2"), ("m-three", "fake")] {
        let level_record = serde_json::to_value(env.engine.get(RG, level).await.unwrap()).unwrap();
        assert_eq!(
            recorded_config_of(&level_record, alias),
            directives,
            "{level}: {level_record:#}"
        );
        assert!(
            !level_record.to_string().contains(API_KUBECONFIG),
            "{level}"
        );
    }
}

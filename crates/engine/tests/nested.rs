//! Nested deployments (inner and outer scope, copied modules, resource-group targets from a subscription
//! deployment) with their own records, and extension configs: template defaults overlaid by the deployment's
//! input, inherited whole and piecemeal into modules, Key Vault and apiReference directives resolved before the call.

mod common;

use std::sync::Arc;
use std::time::Duration;

use cairn_engine::{DeployOptions, EngineSettings, Providers};
use common::*;
use serde_json::{Value, json};

fn module(name: &str, scope: &str, extra: Value, template: Value) -> Value {
    let mut properties = json!({
        "mode": "Incremental",
        "expressionEvaluationOptions": { "scope": scope },
        "template": template,
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut properties, extra) {
        p.extend(e);
    }
    json!({ "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": name,
            "properties": properties })
}

/// A module template with one widget named by its `n` parameter and the fake extension as `fake` (no config).
fn widget_module() -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        // Typed as the fake extension's schema types them: the credentials secure.
        "extensions": { "fake": { "name": "Fake", "version": "1.0.0", "config": {
            "cluster": { "type": "string", "nullable": true }, "namespace": { "type": "string", "nullable": true },
            "token": { "type": "secureString", "nullable": true },
            "kubeConfig": { "type": "secureString", "nullable": true } } } },
        "parameters": { "n": { "type": "string" } },
        "resources": {
            "w": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                   "properties": { "name": "[parameters('n')]" } }
        },
        "outputs": { "made": { "type": "string", "value": "[reference('w').createdBy]" } }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inner_outer_and_copied_modules_run_as_child_deployments() {
    let env = setup().await;
    let outer_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [],
        "outputs": { "p": { "type": "string", "value": "[parameters('prefix')]" } }
    });
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "parameters": { "prefix": { "type": "string", "defaultValue": "p" } },
        "extensions": { "fake": { "name": "Fake", "version": "1.0.0", "config": { "cluster": { "defaultValue": "c1" } } } },
        "resources": {
            "inner": module("inner", "inner", json!({
                "parameters": { "n": { "value": "[concat(parameters('prefix'), '-in')]" } },
                "extensionConfigs": { "fake": "[extensions('fake').config]" }
            }), widget_module()),
            "outer": module("outer", "outer", json!({}), outer_template),
            "copies": {
                "copy": { "name": "copies", "count": 2 },
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01",
                "name": "[format('copy{0}', copyIndex())]",
                "properties": {
                    "mode": "Incremental",
                    "expressionEvaluationOptions": { "scope": "inner" },
                    "parameters": { "n": { "value": "[format('c{0}', copyIndex())]" } },
                    "extensionConfigs": { "fake": { "cluster": "[extensions('fake').config.cluster]" } },
                    "template": widget_module()
                }
            }
        },
        "outputs": {
            "innerMade": { "type": "string", "value": "[reference('inner').outputs.made.value]" },
            "outerP": { "type": "string", "value": "[reference('outer').outputs.p.value]" }
        }
    });
    let record = deploy(&env.engine, RG, "parent", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let p = &record["properties"];
    assert_eq!(p["outputs"]["innerMade"]["value"], "fake");
    assert_eq!(p["outputs"]["outerP"]["value"], "p");
    assert_eq!(env.fake.names(), vec!["c0", "c1", "p-in"]);
    // The parent lists its children's resources.
    let listed: Vec<&Value> = p["outputResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["identifiers"]["name"])
        .collect();
    assert_eq!(listed, vec![&json!("p-in"), &json!("c0"), &json!("c1")]);
    // Every child has its own record and operations.
    for child in ["inner", "outer", "copy0", "copy1"] {
        let c = serde_json::to_value(env.engine.get(RG, child).await.unwrap()).unwrap();
        assert_eq!(state(&c), "Succeeded", "{child}: {c:#}");
    }
    let inner = serde_json::to_value(env.engine.get(RG, "inner").await.unwrap()).unwrap();
    assert_eq!(inner["properties"]["outputs"]["made"]["value"], "fake");
    assert_eq!(
        inner["properties"]["parameters"]["n"],
        json!({"type": "String", "value": "p-in"})
    );
    let inner_ops = env.engine.operations(RG, "inner").await.unwrap();
    assert_eq!(inner_ops.len(), 1);
    let parent_ops = env.engine.operations(RG, "parent").await.unwrap();
    let targets: Vec<String> = parent_ops
        .iter()
        .filter_map(|o| o.properties.target_resource.as_ref()?.id.clone())
        .collect();
    assert!(
        targets.contains(&format!(
            "{RG}/providers/Microsoft.Resources/deployments/copy1"
        )),
        "{targets:?}"
    );
    let page = env.engine.list(RG, None, Default::default()).await.unwrap();
    assert_eq!(page.value.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_deployment_creates_a_group_and_deploys_a_key_vault_into_it() {
    let env = setup().await;
    let kv_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "secretValue": { "type": "securestring" } },
        "resources": [
            { "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "kv1",
              "location": "[resourceGroup().location]", "properties": { "tenantId": "[subscription().tenantId]" } },
            { "type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "kv1/db",
              "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'kv1')]"],
              "properties": { "value": "[parameters('secretValue')]" } }
        ],
        "outputs": { "uri": { "type": "string",
            "value": "[reference(resourceId('Microsoft.KeyVault/vaults/secrets', 'kv1', 'db')).secretUri]" } }
    });
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "secretValue": { "type": "securestring" } },
        "resources": [
            { "type": "Microsoft.Resources/resourceGroups", "apiVersion": "2024-03-01", "name": "rg2", "location": "eastus" },
            { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "vault",
              "resourceGroup": "rg2",
              "dependsOn": ["[resourceId('Microsoft.Resources/resourceGroups', 'rg2')]"],
              "properties": {
                  "mode": "Incremental",
                  "expressionEvaluationOptions": { "scope": "inner" },
                  "parameters": { "secretValue": { "value": "[parameters('secretValue')]" } },
                  "template": kv_template } }
        ],
        "outputs": { "uri": { "type": "string", "value": "[reference('vault').outputs.uri.value]" } }
    });
    let mut req = request(
        template,
        json!({ "secretValue": { "value": "canary-vault-value-1" } }),
    );
    req.location = Some("westus".into());
    let record = deploy(&env.engine, SUB_SCOPE, "sub", req).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(
        record["properties"]["outputs"]["uri"]["value"],
        "https://kv1.vault.azure.net/secrets/db"
    );
    let group = env
        .store
        .get_resource_group(SUB, "rg2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(group.group.location, "eastus");
    let rg2 = format!("{SUB_SCOPE}/resourceGroups/rg2");
    let vault_id = format!("{rg2}/providers/Microsoft.KeyVault/vaults/kv1");
    let secret = env
        .store
        .get_vault_secret(&vault_id, "db", None)
        .await
        .unwrap()
        .unwrap();
    use cairn_store::ExposeSecret;
    assert_eq!(secret.value.expose_secret(), "canary-vault-value-1");
    let child = serde_json::to_value(env.engine.get(&rg2, "vault").await.unwrap()).unwrap();
    assert_eq!(state(&child), "Succeeded");
    assert_eq!(
        child["properties"]["parameters"]["secretValue"],
        json!({"type": "SecureString"})
    );
    // Nothing returned carries the secret.
    let ops = env.engine.operations(&rg2, "vault").await.unwrap();
    let everything = format!("{record} {child} {}", serde_json::to_string(&ops).unwrap());
    assert!(!everything.contains("canary-vault-value-1"));
    // Re-running keeps the secret's version (same value).
    let versions = env
        .store
        .list_vault_secret_versions(&vault_id, "db")
        .await
        .unwrap();
    assert_eq!(versions.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_configs_are_merged_inherited_and_resolved() {
    let clusters = Arc::new(ClusterProvider::default());
    let providers = Providers::empty().with(CLUSTER_TYPE, clusters.clone());
    let env = setup_with(settings(), Duration::from_millis(5), providers).await;

    // A vault with a secret, and a cluster whose credentials an apiReference reads.
    let setup_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "ops", "location": "westus", "properties": {} },
            { "type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "ops/token",
              "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'ops')]"],
              "properties": { "value": "token-from-the-vault" } },
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "aks1", "properties": { "size": 3 } }
        ]
    });
    let setup = deploy(&env.engine, RG, "setup", request(setup_template, json!({}))).await;
    assert_eq!(state(&setup), "Succeeded", "{setup:#}");
    let vault_id = format!("{RG}/providers/Microsoft.KeyVault/vaults/ops");
    let cluster_id = format!("{RG}/providers/Test.Rp/clusters/aks1");

    let child = |extension_configs: Value, n: &str| {
        module(
            &format!("m-{n}"),
            "inner",
            json!({ "parameters": { "n": { "value": n } }, "extensionConfigs": extension_configs }),
            widget_module(),
        )
    };
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "parameters": { "pw": { "type": "securestring" } },
        // The credentials are typed secure: seed 000's stacks-mode table lets a directive stand only there.
        "extensions": { "fake": { "name": "Fake", "version": "1.0.0",
                                  "config": { "cluster": { "defaultValue": "c1" }, "namespace": { "defaultValue": "default" },
                                              "token": { "type": "secureString" }, "kubeConfig": { "type": "secureString" } } } },
        "resources": {
            "root": widget("root", json!({ "pwLength": "[length(parameters('pw'))]" })),
            "whole": child(json!({ "fake": "[extensions('fake').config]" }), "whole"),
            "piecemeal": child(json!({ "fake": {
                "cluster": "[extensions('fake').config.cluster]",
                "token": "[extensionConfigs('fake').token]",
                "namespace": { "value": "apps" } } }), "piecemeal"),
            "inherit": child(json!({ "fake": { "type": "inherit", "value": "fake" } }), "inherit"),
            "literal": child(json!({ "fake": { "cluster": { "value": "c2" } } }), "literal")
        }
    });
    let req: cairn_arm::models::deployment::Deployment = serde_json::from_value(json!({
        "properties": {
            "mode": "Incremental",
            "template": template,
            "parameters": { "pw": { "reference": { "keyVault": { "id": vault_id }, "secretName": "token" } } },
            "extensionConfigs": { "fake": {
                "token": { "keyVaultReference": { "keyVault": { "id": vault_id }, "secretName": "token" } },
                "kubeConfig": { "apiReference": { "method": "POST", "armResourceId": cluster_id, "apiVersion": "2024-01-01",
                                                  "action": "listCredentials", "responseValuePath": "kubeconfigs[0].value" } }
            } }
        }
    }))
    .unwrap();
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "configs",
            req,
            DeployOptions {
                stack_initiated: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let record = serde_json::to_value(handle.wait().await.unwrap()).unwrap();
    assert_eq!(state(&record), "Succeeded", "{record:#}");

    // Root: template defaults overlaid by the input, every directive resolved, sent flat.
    assert_eq!(
        env.fake.config_of("root").unwrap(),
        json!({ "cluster": "c1", "namespace": "default", "token": "token-from-the-vault", "kubeConfig": API_KUBECONFIG })
    );
    assert_eq!(
        env.fake.resource("widget", "root").unwrap()["pwLength"],
        json!("token-from-the-vault".len())
    );
    // Whole inheritance and the seed-002 inherit form: the same config.
    for n in ["whole", "inherit"] {
        assert_eq!(
            env.fake.config_of(n).unwrap(),
            env.fake.config_of("root").unwrap(),
            "{n}"
        );
    }
    // Piecemeal: only what the module passes (its own template declares no defaults).
    assert_eq!(
        env.fake.config_of("piecemeal").unwrap(),
        json!({ "cluster": "c1", "token": "token-from-the-vault", "namespace": "apps" })
    );
    assert_eq!(
        env.fake.config_of("literal").unwrap(),
        json!({ "cluster": "c2" })
    );

    // The stack-initiated record shows echoed values and directives, never secrets.
    let text = record.to_string();
    for secret in ["token-from-the-vault", API_KUBECONFIG] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    let root_ext = record["properties"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["alias"] == "fake" && e["configId"] == "c1")
        .unwrap()
        .clone();
    let config = &root_ext["config"];
    assert_eq!(config["cluster"], json!({"value": "c1"}));
    assert_eq!(config["namespace"], json!({"value": "default"}));
    assert_eq!(config["token"]["keyVaultReference"]["secretName"], "token");
    assert_eq!(
        config["kubeConfig"]["apiReference"]["action"],
        "listCredentials"
    );
    assert!(
        record["properties"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["configId"] == "c2"),
        "the literal module's extension is listed too"
    );
    // The parameter's Key Vault reference stays a reference in the record.
    assert_eq!(
        record["properties"]["parameters"]["pw"]["reference"]["secretName"],
        "token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolvable_configs_fail_the_resource_with_a_clear_error() {
    let env = setup().await;
    let template = fake_template(json!({ "a": widget("a", json!({})) }), json!({}));
    let req: cairn_arm::models::deployment::Deployment = serde_json::from_value(json!({
        "properties": {
            "mode": "Incremental",
            "template": template,
            "extensionConfigs": { "fake": {
                "token": { "keyVaultReference": { "keyVault": { "id": format!("{RG}/providers/Microsoft.KeyVault/vaults/none") }, "secretName": "x" } }
            } }
        }
    }))
    .unwrap();
    let record = deploy(&env.engine, RG, "noconfig", req).await;
    assert_eq!(state(&record), "Failed");
    let detail = &record["properties"]["error"]["details"][0];
    assert_eq!(
        detail["code"],
        "KeyVaultParameterReferenceSecretRetrieveFailed"
    );
    assert_eq!(env.fake.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_management_group_deployment_targets_a_subscription() {
    let env = setup().await;
    let sub_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Microsoft.Resources/resourceGroups", "apiVersion": "2024-03-01", "name": "fromMg", "location": "westus" }
        ],
        "outputs": { "sub": { "type": "string", "value": "[subscription().subscriptionId]" } }
    });
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-08-01/managementGroupDeploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "toSub",
              "subscriptionId": SUB, "location": "westus",
              "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                              "template": sub_template } }
        ],
        "outputs": { "sub": { "type": "string", "value": "[reference('toSub').outputs.sub.value]" } }
    });
    let mg = "/providers/Microsoft.Management/managementGroups/mg1";
    let mut req = request(template, json!({}));
    req.location = Some("westus".into());
    let record = deploy(&env.engine, mg, "mgdeploy", req).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(record["properties"]["outputs"]["sub"]["value"], SUB);
    assert!(
        env.store
            .get_resource_group(SUB, "fromMg")
            .await
            .unwrap()
            .is_some()
    );
    let child = serde_json::to_value(env.engine.get(SUB_SCOPE, "toSub").await.unwrap()).unwrap();
    assert_eq!(state(&child), "Succeeded");
    assert_eq!(
        child["properties"]["outputResources"][0]["id"],
        format!("{SUB_SCOPE}/resourceGroups/fromMg")
    );
}

/// The heartbeat renews the claims of every active record of a tree; a nested deployment that ends between its
/// list of records and the renewal refuses the claim (it has finished). That is no takeover: the run goes on
/// (it used to cancel the whole tree, which a 20,000-resource deployment of 40 modules hit five seconds in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modules_ending_while_the_heartbeat_renews_claims_do_not_cancel_the_run() {
    let env = setup_with(
        EngineSettings {
            heartbeat_interval: Duration::from_millis(1),
            ..settings()
        },
        Duration::from_millis(2),
        Providers::empty(),
    )
    .await;
    let modules: serde_json::Map<String, Value> = (0..24)
        .map(|i| {
            let name = format!("m{i}");
            let module = module(
                &name,
                "inner",
                json!({ "parameters": { "n": { "value": format!("w{i}") } } }),
                widget_module(),
            );
            (name, module)
        })
        .collect();
    let template = fake_template(Value::Object(modules), json!({}));
    let record = deploy(&env.engine, RG, "beating", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.count(), 24);
}

//! Runtime functions answered from providers: `list*()` as a provider action, `reference()` of resources outside
//! the template as a provider GET, Key Vault parameter references in modules (Bicep's `getSecret`), conditions, and
//! `existing` resources that are read, never written.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_engine::Providers;
use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_reference_key_vault_and_existing_resources() {
    let clusters = Arc::new(ClusterProvider::default());
    let providers = Providers::empty().with(CLUSTER_TYPE, clusters.clone());
    let env = setup_with(settings(), Duration::from_millis(5), providers).await;
    let setup_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "aks1", "properties": { "size": 3 } },
            { "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "kv", "location": "westus", "properties": {} },
            { "type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "kv/pw",
              "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'kv')]"], "properties": { "value": "hunter22" } }
        ]
    });
    assert_eq!(
        state(&deploy(&env.engine, RG, "setup", request(setup_template, json!({}))).await),
        "Succeeded"
    );
    // A widget that exists before the deployment, read as `existing`.
    let pre = fake_template(
        json!({ "old": widget("old", json!({ "color": "blue" })) }),
        json!({}),
    );
    assert_eq!(
        state(&deploy(&env.engine, RG, "pre", request(pre, json!({}))).await),
        "Succeeded"
    );
    let creates_before = env.fake.state.creates.load(Ordering::SeqCst);

    let module_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "secret": { "type": "securestring" } },
        "resources": [],
        "outputs": { "len": { "type": "int", "value": "[length(parameters('secret'))]" } }
    });
    let template = fake_template(
        json!({
            "listed": widget("listed", json!({
                "kubeconfigs": "[length(listCredentials(resourceId('Test.Rp/clusters', 'aks1'), '2024-01-01').kubeconfigs)]",
                "clusterSize": "[reference(resourceId('Test.Rp/clusters', 'aks1'), '2024-01-01').size]"
            })),
            "old": { "extension": "fake", "type": "widget", "apiVersion": "v1", "existing": true,
                     "properties": { "name": "old" } },
            "copyColor": widget("copyColor", json!({ "color": "[reference('old').color]" })),
            "kvExisting": { "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "kv", "existing": true },
            "uri": widget("uri", json!({ "vaultUri": "[reference('kvExisting').vaultUri]" })),
            "skipped": { "extension": "fake", "type": "widget", "apiVersion": "v1", "condition": false,
                         "properties": { "name": "skipped" } },
            "mod": { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "getsecret",
                     "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                     "parameters": { "secret": { "reference": {
                                         "keyVault": { "id": "[resourceId('Microsoft.KeyVault/vaults', 'kv')]" },
                                         "secretName": "pw" } } },
                                     "template": module_template } }
        }),
        json!({ "secretLength": { "type": "int", "value": "[reference('mod').outputs.len.value]" } }),
    );
    let record = deploy(&env.engine, RG, "runtime", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let listed = env.fake.resource("widget", "listed").unwrap();
    assert_eq!(listed["kubeconfigs"], 1);
    assert_eq!(listed["clusterSize"], 3);
    assert!(clusters.actions.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        env.fake.resource("widget", "copyColor").unwrap()["color"],
        "blue"
    );
    assert_eq!(
        env.fake.resource("widget", "uri").unwrap()["vaultUri"],
        "https://kv.vault.azure.net/"
    );
    assert!(env.fake.resource("widget", "skipped").is_none());
    assert_eq!(record["properties"]["outputs"]["secretLength"]["value"], 8);
    // `existing` resources are read, never written, and not output resources.
    assert_eq!(
        env.fake.state.creates.load(Ordering::SeqCst) - creates_before,
        3,
        "listed, copyColor and uri only"
    );
    let outputs = record["properties"]["outputResources"].to_string();
    assert!(
        !outputs.contains("\"old\"") && !outputs.contains("vaults/kv\""),
        "{outputs}"
    );
    let ops = serde_json::to_value(env.engine.operations(RG, "runtime").await.unwrap()).unwrap();
    let reads = ops
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["properties"]["provisioningOperation"] == "Read")
        .count();
    assert_eq!(reads, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_existing_resource_fails_its_read() {
    let env = setup().await;
    let template = fake_template(
        json!({ "ghost": { "extension": "fake", "type": "widget", "apiVersion": "v1", "existing": true,
                           "properties": { "name": "ghost" } } }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "ghost", request(template, json!({}))).await;
    assert_eq!(state(&record), "Failed");
    assert_eq!(
        record["properties"]["error"]["details"][0]["code"],
        "ResourceNotFound"
    );
    assert_eq!(env.fake.count(), 0);
}

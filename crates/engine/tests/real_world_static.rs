//! Real-world templates ARM deploys (issue 44), deployed and previewed here: false-condition resources whose
//! names cannot be evaluated, `null` for parameters with defaults, nullable `$ref` and untyped parameters,
//! `dependsOn` on loops that deploy nothing, and `roleDefinitions()`.

mod common;

use cairn_arm::models::deployment::DeploymentWhatIf;
use common::*;
use serde_json::{Value, json};

/// A template whose Key Vault is `existing`, conditional on `kvId`, and named (and scoped) from `kvId` alone;
/// a copy loop whose items are conditional the same way; a loop that deploys nothing; widgets that depend on
/// all three.
fn conditional_vault_template() -> Value {
    let mut template = fake_template(
        json!({
            "kv": {
                "condition": "[not(empty(parameters('kvId')))]",
                "existing": true,
                "type": "Microsoft.KeyVault/vaults",
                "apiVersion": "2023-07-01",
                "subscriptionId": "[split(parameters('kvId'), '/')[2]]",
                "resourceGroup": "[split(parameters('kvId'), '/')[4]]",
                "name": "[last(split(parameters('kvId'), '/'))]"
            },
            "locks": {
                "copy": { "name": "locks", "count": "[length(parameters('vaults'))]" },
                "condition": "[not(empty(parameters('vaults')[copyIndex()].id))]",
                "type": "Microsoft.Authorization/locks",
                "apiVersion": "2020-05-01",
                "scope": "[parameters('vaults')[copyIndex()].id]",
                "name": "[format('{0}-lock', last(split(parameters('vaults')[copyIndex()].id, '/')))]",
                "properties": { "level": "CanNotDelete" }
            },
            "pips": {
                "copy": { "name": "pips", "count": "[length(parameters('pipNames'))]" },
                "extension": "fake", "type": "widget", "apiVersion": "v1",
                "properties": { "name": "[parameters('pipNames')[copyIndex()]]" }
            },
            "app": {
                "extension": "fake", "type": "widget", "apiVersion": "v1",
                "dependsOn": ["kv", "locks", "pips"],
                "properties": {
                    "name": "app",
                    "vaultUri": "[if(not(empty(parameters('kvId'))), reference('kv').vaultUri, 'none')]"
                }
            }
        }),
        json!({ "usesVault": { "type": "bool", "value": "[not(empty(parameters('kvId')))]" } }),
    );
    template["parameters"] = json!({
        "kvId": { "type": "string", "nullable": true },
        "vaults": { "type": "array", "defaultValue": [{ "id": null }] },
        "pipNames": { "type": "array", "defaultValue": [] }
    });
    template
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn false_condition_resources_are_skipped_whole() {
    let env = setup().await;
    let record = deploy(
        &env.engine,
        RG,
        "skips",
        request(conditional_vault_template(), json!({})),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let app = env.fake.resource("widget", "app").expect("app is created");
    assert_eq!(app["vaultUri"], "none");
    assert_eq!(env.fake.names(), vec!["app"], "only app is deployed");
    assert_eq!(record["properties"]["outputs"]["usesVault"]["value"], false);
    // The vault is not read and the lock not created: neither appears among the output resources or the
    // operations.
    let outputs = record["properties"]["outputResources"].to_string();
    assert!(
        !outputs.contains("vaults") && !outputs.contains("locks"),
        "{outputs}"
    );
    let ops = serde_json::to_value(env.engine.operations(RG, "skips").await.unwrap()).unwrap();
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 1, "{ops:#?}");
    assert_eq!(
        ops[0]["properties"]["targetResource"]["symbolicName"],
        "app"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_to_a_skipped_resource_fails_the_deployment() {
    let env = setup().await;
    let mut template = conditional_vault_template();
    template["resources"]["app"]["properties"]["vaultUri"] = json!("[reference('kv').vaultUri]");
    let record = deploy(&env.engine, RG, "unguarded", request(template, json!({}))).await;
    assert_eq!(state(&record), "Failed", "{record:#}");
    assert!(
        record
            .to_string()
            .contains("not deployed because its condition is false"),
        "{record:#}"
    );
    assert!(env.fake.resource("widget", "app").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_leaves_false_condition_resources_out() {
    let env = setup().await;
    let request: DeploymentWhatIf = serde_json::from_value(json!({
        "properties": { "mode": "Incremental", "template": conditional_vault_template() }
    }))
    .unwrap();
    let result = env.engine.what_if(RG, "skips", request).await.unwrap();
    let result = serde_json::to_value(result).unwrap();
    assert_eq!(result["status"], "Succeeded", "{result:#}");
    let changes = result["properties"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert_eq!(changes[0]["changeType"], "Create");
    let text = result.to_string();
    assert!(
        !text.contains("vaults") && !text.contains("locks"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_take_defaults_for_null_and_nullable_types() {
    let env = setup().await;
    let module = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "definitions": {
            "lockType": { "type": "object", "properties": { "kind": { "type": "string" } }, "nullable": true },
            "moduleLockType": { "$ref": "#/definitions/lockType" }
        },
        "parameters": {
            "origins": { "type": "array", "defaultValue": [] },
            "settings": { "type": "secureObject", "defaultValue": { "enabled": true } },
            "lock": { "$ref": "#/definitions/moduleLockType" },
            "natGateway": {
                "metadata": { "__bicep_resource_derived_type!": {
                    "source": "Microsoft.Network/virtualNetworks/subnets@2023-04-01#properties/properties/properties/natGateway" } },
                "nullable": true
            }
        },
        "resources": {},
        "outputs": {
            "originCount": { "type": "int", "value": "[length(parameters('origins'))]" },
            "enabled": { "type": "bool", "value": "[parameters('settings').enabled]" },
            "locked": { "type": "bool", "value": "[not(empty(parameters('lock')))]" },
            "natGateway": {
                "metadata": { "__bicep_resource_derived_type!": {
                    "source": "Microsoft.Network/virtualNetworks/subnets@2023-04-01#properties/properties/properties/natGateway" } },
                "value": "[parameters('natGateway')]"
            }
        }
    });
    let mut template = fake_template(
        json!({
            "cdn": {
                "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "cdn",
                "properties": {
                    "mode": "Incremental",
                    "expressionEvaluationOptions": { "scope": "inner" },
                    "parameters": {
                        "origins": { "value": null },
                        "settings": { "value": null },
                        "natGateway": { "value": { "id": "[parameters('natId')]" } }
                    },
                    "template": module
                }
            }
        }),
        json!({
            "originCount": { "type": "int", "value": "[reference('cdn').outputs.originCount.value]" },
            "enabled": { "type": "bool", "value": "[reference('cdn').outputs.enabled.value]" },
            "locked": { "type": "bool", "value": "[reference('cdn').outputs.locked.value]" },
            "natGateway": { "type": "object", "value": "[reference('cdn').outputs.natGateway.value]" },
            "tags": { "type": "object", "value": "[parameters('tags')]" },
            "contributor": { "type": "object", "value": "[roleDefinitions('Contributor')]" }
        }),
    );
    template["parameters"] = json!({
        "natId": { "type": "string" },
        "tags": { "type": "object", "defaultValue": { "env": "dev" } }
    });
    let record = deploy(
        &env.engine,
        RG,
        "defaults",
        request(
            template,
            json!({ "natId": { "value": "nat1" }, "tags": { "value": null } }),
        ),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let outputs = &record["properties"]["outputs"];
    assert_eq!(outputs["originCount"]["value"], 0);
    assert_eq!(outputs["enabled"]["value"], true);
    assert_eq!(outputs["locked"]["value"], false);
    assert_eq!(outputs["natGateway"]["value"], json!({ "id": "nat1" }));
    assert_eq!(outputs["tags"]["value"], json!({ "env": "dev" }));
    assert_eq!(
        outputs["contributor"]["value"],
        json!({
            "id": format!("{SUB_SCOPE}/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c"),
            "roleDefinitionId": "b24988ac-6180-42a0-ab88-20f7382dd24c"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_on_a_module_loop_that_deploys_nothing_is_satisfied() {
    let env = setup().await;
    let empty = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": []
    });
    let mut template = fake_template(
        json!({
            "peerings": {
                "copy": { "name": "peerings", "count": "[length(parameters('peerings'))]" },
                "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01",
                "name": "[format('peering-{0}', copyIndex())]",
                "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                "template": empty }
            },
            "after": {
                "extension": "fake", "type": "widget", "apiVersion": "v1",
                "dependsOn": ["peerings"],
                "properties": { "name": "after" }
            }
        }),
        json!({}),
    );
    template["parameters"] = json!({ "peerings": { "type": "array", "defaultValue": [] } });
    let record = deploy(&env.engine, RG, "empty-loop", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.names(), vec!["after"]);
}

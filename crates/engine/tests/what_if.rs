//! What-if and validate: predicted changes for Azure resources (provider GET) and extension resources (host
//! preview + get, preview metadata dropping noise), and validation results and errors.

mod common;

use cairn_arm::models::deployment::DeploymentWhatIf;
use common::*;
use serde_json::{Value, json};

fn what_if_request(template: Value, format: Option<&str>) -> DeploymentWhatIf {
    let mut properties = json!({ "mode": "Incremental", "template": template });
    if let Some(f) = format {
        properties["whatIfSettings"] = json!({ "resultFormat": f });
    }
    serde_json::from_value(json!({ "properties": properties })).unwrap()
}

fn vault() -> Value {
    json!({ "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "kv",
            "location": "westus", "properties": { "sku": "standard" } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_compares_with_current_state() {
    let env = setup().await;
    let base = fake_template(
        json!({
            "a": widget("a", json!({ "size": 1 })),
            "same": widget("same", json!({ "size": 1 })),
            "gone": widget("gone", json!({})),
            "kv": vault()
        }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "wi", request(base, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");

    let next = fake_template(
        json!({
            "a": widget("a", json!({ "size": 2 })),
            "same": widget("same", json!({ "size": 1 })),
            "b": widget("b", json!({})),
            "b2": widget("b2", json!({ "peer": "[reference('b').createdBy]" })),
            "kv": vault(),
            "st": { "type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01", "name": "st",
                    "location": "westus", "properties": {} }
        }),
        json!({}),
    );
    let result = env
        .engine
        .what_if(RG, "wi", what_if_request(next.clone(), None))
        .await
        .unwrap();
    let result = serde_json::to_value(result).unwrap();
    assert_eq!(result["status"], "Succeeded");
    let changes = result["properties"]["changes"].as_array().unwrap();
    let change = |pred: &dyn Fn(&Value) -> bool| {
        changes
            .iter()
            .find(|c| pred(c))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let widget_change = |name: &str| change(&|c: &Value| c["identifiers"]["name"] == name);

    let a = widget_change("a");
    assert_eq!(a["changeType"], "Modify", "{a:#}");
    assert_eq!(
        a["delta"],
        json!([{ "path": "properties.size", "propertyChangeType": "Modify", "before": 1, "after": 2 }])
    );
    assert_eq!(
        a["extension"],
        json!({ "name": "Fake", "version": "1.0.0", "configId": "c1" })
    );
    assert_eq!(a["resourceType"], "widget");
    assert_eq!(a["symbolicName"], "a");
    // `createdBy` differs between the preview and nothing, but the preview marks it read-only: no noise.
    assert_eq!(widget_change("same")["changeType"], "NoChange");
    assert_eq!(widget_change("b")["changeType"], "Create");
    assert_eq!(widget_change("b2")["changeType"], "Create");
    let kv = change(&|c: &Value| c["resourceType"] == "Microsoft.KeyVault/vaults");
    assert_eq!(kv["changeType"], "NoChange", "{kv:#}");
    assert!(
        kv["resourceId"]
            .as_str()
            .unwrap()
            .ends_with("/providers/Microsoft.KeyVault/vaults/kv")
    );
    let st = change(&|c: &Value| c["resourceType"] == "Microsoft.Storage/storageAccounts");
    assert_eq!(st["changeType"], "Unsupported");
    assert!(
        st["unsupportedReason"]
            .as_str()
            .unwrap()
            .contains("Microsoft.Storage/storageAccounts")
    );
    assert_eq!(widget_change("gone")["changeType"], "Ignore");
    // Nothing was deployed.
    assert!(env.fake.resource("widget", "b").is_none());
    assert_eq!(env.fake.resource("widget", "a").unwrap()["size"], 1);

    let ids_only = env
        .engine
        .what_if(RG, "wi", what_if_request(next, Some("ResourceIdOnly")))
        .await
        .unwrap();
    let ids_only = serde_json::to_value(ids_only).unwrap();
    for c in ids_only["properties"]["changes"].as_array().unwrap() {
        assert!(c.get("before").is_none() && c.get("after").is_none() && c.get("delta").is_none());
    }
}

/// Two types with one name are two inventory rows (a ConfigMap and a Secret named alike): what-if of a template
/// that keeps only one shows the other as left alone instead of hiding it behind the one it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_of_two_types_with_equal_identifiers_stay_apart() {
    let env = setup().await;
    let gadget = |name: &str| json!({ "extension": "fake", "type": "gadget", "apiVersion": "v1", "properties": { "name": name } });
    let both = fake_template(
        json!({ "w": widget("x", json!({})), "g": gadget("x") }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "two", request(both, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let inventory = env
        .store
        .list_managed_resources(cairn_store::ManagedResourceFilter::default())
        .await
        .unwrap();
    let mut types: Vec<&str> = inventory
        .items
        .iter()
        .map(|r| r.resource.resource_type.as_str())
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["gadget", "widget"]);

    let widget_only = fake_template(json!({ "w": widget("x", json!({})) }), json!({}));
    let result = env
        .engine
        .what_if(RG, "two", what_if_request(widget_only, None))
        .await
        .unwrap();
    let result = serde_json::to_value(result).unwrap();
    let mut changes: Vec<(String, String)> = result["properties"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["resourceType"].as_str().unwrap_or("").to_owned(),
                c["changeType"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    changes.sort();
    assert_eq!(
        changes,
        [
            ("gadget".to_owned(), "Ignore".to_owned()),
            ("widget".to_owned(), "NoChange".to_owned())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_lists_resources_or_reports_the_template_errors() {
    let env = setup().await;
    let template = fake_template(
        json!({ "a": widget("a", json!({})), "kv": vault() }),
        json!({}),
    );
    let result = env
        .engine
        .validate(RG, "v", request(template, json!({})))
        .await
        .unwrap();
    let result = serde_json::to_value(result).unwrap();
    assert_eq!(result["properties"]["provisioningState"], "Succeeded");
    let validated = result["properties"]["validatedResources"]
        .as_array()
        .unwrap();
    assert_eq!(validated.len(), 2);
    assert_eq!(validated[0]["resourceType"], "widget");
    assert!(validated[1]["id"].as_str().unwrap().ends_with("/vaults/kv"));
    assert!(
        env.engine.get(RG, "v").await.is_err(),
        "validate stores nothing"
    );
    assert_eq!(env.fake.count(), 0);

    let broken = fake_template(
        json!({ "a": widget("a", json!({ "x": "[parameters('nope')]" })) }),
        json!({}),
    );
    let err = env
        .engine
        .validate(RG, "v", request(broken, json!({})))
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), "InvalidTemplateDeployment");
    let details = serde_json::to_value(err.detail()).unwrap();
    assert!(details.to_string().contains("nope"), "{details}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_never_shows_key_vault_secret_values() {
    const CANARY: &str = "what-if-canary-0c9e51";
    let env = setup().await;
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "secret": { "type": "securestring" } },
        "resources": [
            vault(),
            { "type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "kv/token",
              "dependsOn": ["kv"], "properties": { "value": "[parameters('secret')]" } }
        ]
    });
    let mut request = what_if_request(template.clone(), Some("FullResourcePayloads"));
    request.properties.parameters =
        Some(serde_json::from_value(json!({ "secret": { "value": CANARY } })).unwrap());
    let first =
        serde_json::to_value(env.engine.what_if(RG, "kvwi", request).await.unwrap()).unwrap();
    assert!(!first.to_string().contains(CANARY), "{first:#}");

    let record = deploy(
        &env.engine,
        RG,
        "kvwi",
        serde_json::from_value(
            json!({ "properties": { "mode": "Incremental", "template": template,
            "parameters": { "secret": { "value": CANARY } } } }),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");

    let mut again = what_if_request(template, Some("FullResourcePayloads"));
    again.properties.parameters =
        Some(serde_json::from_value(json!({ "secret": { "value": CANARY } })).unwrap());
    let second =
        serde_json::to_value(env.engine.what_if(RG, "kvwi", again).await.unwrap()).unwrap();
    let text = second.to_string();
    assert!(!text.contains(CANARY), "{second:#}");
    let secret_change = second["properties"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["resourceId"]
                .as_str()
                .is_some_and(|id| id.ends_with("/secrets/token"))
        })
        .expect("a change for the secret")
        .clone();
    assert_eq!(secret_change["changeType"], "Deploy", "{secret_change:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_resources_that_cannot_be_previewed_are_named_by_extension_type_and_identifiers()
{
    let env = setup().await;
    let template = fake_template(
        json!({ "a": widget("a", json!({})), "gone": widget("gone", json!({})) }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "wi", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");

    // The config now points at a secret that does not exist: nothing of the alias can be previewed.
    let next = fake_template(json!({ "a": widget("a", json!({})) }), json!({}));
    let mut request = what_if_request(next, None);
    request.properties.extension_configs = serde_json::from_value(json!({ "fake": {
        "token": { "keyVaultReference": {
            "keyVault": { "id": format!("{RG}/providers/Microsoft.KeyVault/vaults/none") }, "secretName": "x" } }
    } }))
    .unwrap();
    let result = env.engine.what_if(RG, "wi", request).await.unwrap();
    let result = serde_json::to_value(result).unwrap();
    let changes = result["properties"]["changes"].as_array().unwrap();
    let of = |name: &str| -> Vec<&Value> {
        changes
            .iter()
            .filter(|c| c["identifiers"]["name"] == name)
            .collect()
    };
    // One change for `a`, unsupported, known by its extension, type and identifiers (not a second `Ignore`).
    let a = of("a");
    assert_eq!(a.len(), 1, "{changes:#?}");
    assert_eq!(a[0]["changeType"], "Unsupported", "{:#}", a[0]);
    assert_eq!(a[0]["resourceType"], "widget");
    assert_eq!(a[0]["identifiers"], json!({ "name": "a" }));
    assert_eq!(a[0]["extension"]["name"], "Fake");
    assert!(a[0].get("resourceId").is_none(), "{:#}", a[0]);
    // What the template no longer names is ignored, by the same keys.
    let gone = of("gone");
    assert_eq!(gone.len(), 1, "{changes:#?}");
    assert_eq!(gone[0]["changeType"], "Ignore");
    assert_eq!(gone[0]["resourceType"], "widget");
    assert_eq!(gone[0]["extension"]["name"], "Fake");
    assert!(gone[0].get("resourceId").is_none(), "{:#}", gone[0]);
    assert_eq!(changes.len(), 2, "{changes:#?}");
}

//! Template specs over the ARM API (served by the engine's built-in template spec provider): PUT, GET, HEAD, LIST
//! and DELETE of specs and versions, and a deployment by `templateLink.id` whose nested deployment reaches a linked
//! template by `relativePath`; its record shows the link and exportTemplate the spec's main template.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const V: &str = "api-version=2022-02-01";
const DV: &str = "api-version=2025-04-01";
const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

fn rg() -> String {
    format!("{SUB}/resourceGroups/specs")
}

fn spec() -> String {
    format!(
        "{}/providers/Microsoft.Resources/templateSpecs/webapp",
        rg()
    )
}

fn version() -> String {
    format!("{}/versions/1.0", spec())
}

/// Main template: a nested deployment of `modules/vault.json` that creates a vault named by `name`.
fn version_body() -> Value {
    let module = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": { "name": { "type": "string" } },
        "resources": [{ "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01",
                        "name": "[parameters('name')]", "location": "local",
                        "properties": { "sku": { "family": "A", "name": "standard" } } }],
        "outputs": { "vault": { "type": "string", "value": "[parameters('name')]" } }
    });
    let main = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": { "name": { "type": "string" } },
        "resources": [{ "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "module",
                        "properties": { "mode": "Incremental",
                                        "templateLink": { "relativePath": "modules/vault.json" },
                                        "parameters": { "name": { "value": "[parameters('name')]" } } } }],
        "outputs": { "vault": { "type": "string", "value": "[reference('module').outputs.vault.value]" } }
    });
    json!({ "location": "local", "properties": {
        "description": "one vault", "mainTemplate": main,
        "linkedTemplates": [{ "path": "modules/vault.json", "template": module }] } })
}

async fn wait_terminal(app: &TestApp, deployment: &str) -> Answer {
    for _ in 0..300 {
        let answer = call(
            &app.router,
            "GET",
            &format!("{deployment}?{DV}"),
            None,
            None,
        )
        .await;
        let state = answer.json["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if ["Succeeded", "Failed", "Canceled"].contains(&state.as_str()) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{deployment} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_specs_and_versions_over_the_api() {
    let app = TestApp::new().await;
    let answer = call(
        &app.router,
        "PUT",
        &format!("{}?{DV}", rg()),
        Some(json!({ "location": "local" }).to_string()),
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);

    let body = json!({ "location": "local", "tags": { "team": "web" },
                       "properties": { "description": "the web app", "displayName": "Web app" } });
    let answer = call(
        &app.router,
        "PUT",
        &format!("{}?{V}", spec()),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.text);
    assert_eq!(answer.json["type"], "Microsoft.Resources/templateSpecs");
    assert_eq!(answer.json["name"], "webapp");
    assert_eq!(answer.json["tags"]["team"], "web");
    let answer = call(
        &app.router,
        "PUT",
        &format!("{}?{V}", spec()),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);

    let answer = call(
        &app.router,
        "PUT",
        &format!("{}?{V}", version()),
        Some(version_body().to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.text);
    assert_eq!(answer.json["name"], "1.0");
    assert_eq!(
        answer.json["type"],
        "Microsoft.Resources/templateSpecs/versions"
    );
    assert_eq!(
        answer.json["properties"]["mainTemplate"],
        version_body()["properties"]["mainTemplate"]
    );

    let answer = call(&app.router, "GET", &format!("{}?{V}", spec()), None, None).await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    assert!(
        answer.json["properties"]["versions"]["1.0"]["timeCreated"].is_string(),
        "{}",
        answer.text
    );
    assert_eq!(answer.json["properties"]["description"], "the web app");
    let answer = call(
        &app.router,
        "HEAD",
        &format!("{}?{V}", version()),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 204);
    let missing = format!("{}/versions/9.9?{V}", spec());
    let answer = call(&app.router, "GET", &missing, None, None).await;
    assert_eq!(answer.status.as_u16(), 404);
    assert_eq!(answer.json["error"]["code"], "ResourceNotFound");
    let orphan = format!(
        "{}/providers/Microsoft.Resources/templateSpecs/none/versions/1.0?{V}",
        rg()
    );
    let answer = call(
        &app.router,
        "PUT",
        &orphan,
        Some(version_body().to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 404, "{}", answer.text);
    assert_eq!(answer.json["error"]["code"], "ParentResourceNotFound");
    let mut no_template = version_body();
    no_template["properties"] = json!({ "description": "nothing to deploy" });
    let answer = call(
        &app.router,
        "PUT",
        &format!("{}/versions/2.0?{V}", spec()),
        Some(no_template.to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 400, "{}", answer.text);
    assert_eq!(answer.json["error"]["code"], "InvalidRequestContent");

    // The collections list: specs in the group, versions under the spec.
    let specs = call(
        &app.router,
        "GET",
        &format!("{}/providers/Microsoft.Resources/templateSpecs?{V}", rg()),
        None,
        None,
    )
    .await;
    assert_eq!(specs.status.as_u16(), 200, "{}", specs.text);
    let names: Vec<&str> = specs.json["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["webapp"], "{}", specs.text);
    let versions = call(
        &app.router,
        "GET",
        &format!("{}/versions?{V}", spec()),
        None,
        None,
    )
    .await;
    assert_eq!(versions.status.as_u16(), 200, "{}", versions.text);
    assert_eq!(
        versions.json["value"].as_array().map(Vec::len),
        Some(1),
        "{}",
        versions.text
    );
    let unlisted = call(
        &app.router,
        "GET",
        &format!("{}/providers/Microsoft.Storage/storageAccounts?{V}", rg()),
        None,
        None,
    )
    .await;
    assert_eq!(unlisted.status.as_u16(), 404, "{}", unlisted.text);

    // A deployment by templateLink.id: the nested relativePath link resolves inside the spec version.
    let deployment = format!(
        "{}/providers/Microsoft.Resources/deployments/fromspec",
        rg()
    );
    let request = json!({ "properties": { "mode": "Incremental",
        "templateLink": { "id": version() }, "parameters": { "name": { "value": "speckv" } } } });
    let answer = call(
        &app.router,
        "PUT",
        &format!("{deployment}?{DV}"),
        Some(request.to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.text);
    let done = wait_terminal(&app, &deployment).await;
    let properties = &done.json["properties"];
    assert_eq!(
        properties["provisioningState"], "Succeeded",
        "{}",
        done.text
    );
    assert_eq!(properties["templateLink"]["id"], json!(version()));
    assert_eq!(properties["outputs"]["vault"]["value"], "speckv");
    let vault = format!(
        "{}/providers/Microsoft.KeyVault/vaults/speckv?api-version=2023-07-01",
        rg()
    );
    let answer = call(&app.router, "GET", &vault, None, None).await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    let answer = call(
        &app.router,
        "POST",
        &format!("{deployment}/exportTemplate?{DV}"),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    assert_eq!(
        answer.json["template"],
        version_body()["properties"]["mainTemplate"]
    );

    // A missing version is refused at PUT, naming the ID.
    let gone = format!("{}/versions/7.0", spec());
    let request =
        json!({ "properties": { "mode": "Incremental", "templateLink": { "id": gone } } });
    let answer = call(
        &app.router,
        "PUT",
        &format!(
            "{}/providers/Microsoft.Resources/deployments/gone?{DV}",
            rg()
        ),
        Some(request.to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 404, "{}", answer.text);
    assert_eq!(answer.json["error"]["code"], "TemplateSpecVersionNotFound");
    assert!(answer.text.contains("/versions/7.0"), "{}", answer.text);

    // Deleting the spec deletes its versions.
    let answer = call(
        &app.router,
        "DELETE",
        &format!("{}?{V}", spec()),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    let answer = call(
        &app.router,
        "GET",
        &format!("{}?{V}", version()),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 404, "{}", answer.text);
    let answer = call(
        &app.router,
        "DELETE",
        &format!("{}?{V}", spec()),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 204, "{}", answer.text);
}

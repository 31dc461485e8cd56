//! Deployments through the API without sockets: the PUT long-running operation and its polling
//! headers, GET/HEAD/LIST, operations, validate, what-if, export, cancel and delete, at resource group and
//! subscription scope, with the built-in Local extension.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use cairn_arm::models::common::ListResult;
use cairn_store::{
    DeploymentId, DeploymentKey, DeploymentStatus, NewDeployment, Precondition, Timestamp,
};
use common::{Answer, TestApp, call, call_with_headers};
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000002";
const V: &str = "api-version=2025-04-01";

fn rg(name: &str) -> String {
    format!("{SUB}/resourcegroups/{name}")
}

fn deployment(scope: &str, name: &str) -> String {
    format!("{scope}/providers/Microsoft.Resources/deployments/{name}")
}

async fn create_group(app: &TestApp, name: &str) {
    let answer = call(
        &app.router,
        "PUT",
        &format!("{}?{V}", rg(name)),
        Some(json!({"location": "westus"}).to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED);
}

fn outputs_template() -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"who": {"type": "string"}},
        "resources": [],
        "outputs": {"greeting": {"type": "string", "value": "[format('hello {0}', parameters('who'))]"}}
    })
}

fn body(template: Value, parameters: Value) -> String {
    json!({"properties": {"mode": "Incremental", "template": template, "parameters": parameters}})
        .to_string()
}

/// The path and query of an absolute URL the server handed out.
fn local_path(url: &str) -> String {
    let rest = url
        .strip_prefix("http://cairn.test")
        .unwrap_or_else(|| panic!("{url} is not on this server"));
    rest.to_owned()
}

/// Polls an `Azure-AsyncOperation` URL until its status is terminal.
async fn poll_status(app: &TestApp, url: &str) -> Answer {
    for _ in 0..200 {
        let answer = call(&app.router, "GET", &local_path(url), None, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        let status = answer.json["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if ["Succeeded", "Failed", "Canceled"].contains(&status.as_str()) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the operation at {url} did not finish");
}

#[tokio::test]
async fn put_is_a_long_running_operation_polled_to_success() {
    let app = TestApp::new().await;
    create_group(&app, "rg1").await;
    let path = deployment(&rg("rg1"), "greet");
    let put = call_with_headers(
        &app.router,
        "PUT",
        &format!("{path}?api-version=2026-06-01"),
        Some(body(outputs_template(), json!({"who": {"value": "cairn"}}))),
        &[("x-ms-correlation-request-id", "corr-put")],
    )
    .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    assert!(
        ["Accepted", "Running"].contains(
            &put.json["properties"]["provisioningState"]
                .as_str()
                .unwrap()
        ),
        "{}",
        put.text
    );
    assert_eq!(put.json["properties"]["correlationId"], "corr-put");
    assert_eq!(put.headers["retry-after"], "0");
    let async_url = put.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    let location = put.headers["location"].to_str().unwrap().to_owned();
    assert!(async_url.starts_with(&format!(
        "http://cairn.test{SUB}/resourceGroups/rg1/providers/Microsoft.Resources/deployments/greet/operationStatuses/"
    )));
    assert!(async_url.ends_with("?api-version=2026-06-01"));
    assert_eq!(
        location,
        format!(
            "http://cairn.test{SUB}/resourceGroups/rg1/providers/Microsoft.Resources/deployments/greet?api-version=2026-06-01"
        )
    );

    let status = poll_status(&app, &async_url).await;
    assert_eq!(status.json["status"], "Succeeded", "{}", status.text);
    assert!(status.json["endTime"].is_string());

    // The SDK's final GET goes to the Location.
    let got = call(&app.router, "GET", &local_path(&location), None, None).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        got.json["properties"]["outputs"]["greeting"]["value"],
        "hello cairn"
    );
    assert_eq!(got.json["name"], "greet");
    assert_eq!(got.json["type"], "Microsoft.Resources/deployments");
    // calculateTemplateHash agrees with the hash the deployment records.
    let hashed = call(
        &app.router,
        "POST",
        "/providers/Microsoft.Resources/calculateTemplateHash?api-version=2026-06-01",
        Some(outputs_template().to_string()),
        None,
    )
    .await;
    assert_eq!(
        hashed.json["templateHash"], got.json["properties"]["templateHash"],
        "{}",
        got.text
    );

    let head = call(&app.router, "HEAD", &format!("{path}?{V}"), None, None).await;
    assert_eq!(head.status, StatusCode::NO_CONTENT);
    let missing = call(
        &app.router,
        "HEAD",
        &format!("{}?{V}", deployment(&rg("rg1"), "nope")),
        None,
        None,
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    let list = call(
        &app.router,
        "GET",
        &format!(
            "{}/providers/Microsoft.Resources/deployments?{V}",
            rg("RG1")
        ),
        None,
        None,
    )
    .await;
    assert_eq!(list.json["value"][0]["name"], "greet");
    let filtered = call(
        &app.router,
        "GET",
        &format!(
            "{}/providers/Microsoft.Resources/deployments?{V}&$filter=provisioningState%20eq%20'Failed'",
            rg("rg1")
        ),
        None,
        None,
    )
    .await;
    assert_eq!(filtered.json["value"], json!([]));

    let exported = call(
        &app.router,
        "POST",
        &format!("{path}/exportTemplate?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        exported.json["template"]["outputs"],
        outputs_template()["outputs"]
    );

    // A finished deployment cannot be canceled.
    let cancel = call(
        &app.router,
        "POST",
        &format!("{path}/cancel?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn local_extension_resources_are_deployed_and_listed_as_operations() {
    let app = TestApp::new().await;
    let root = tempfile::tempdir().unwrap();
    create_group(&app, "files").await;
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "parameters": {"root": {"type": "string"}},
        "imports": {"local": {"provider": "Local", "version": "1.0.0", "config": {"rootDirectory": "[parameters('root')]"}}},
        "resources": {"note": {"import": "local", "type": "File", "properties": {"path": "a/note.txt", "content": "written by cairn"}}},
        "outputs": {"path": {"type": "string", "value": "[reference('note').path]"}}
    });
    let path = deployment(&rg("files"), "local");
    let parameters = json!({"root": {"value": root.path().to_str().unwrap()}});

    let what_if = call(
        &app.router,
        "POST",
        &format!("{path}/whatIf?{V}"),
        Some(body(template.clone(), parameters.clone())),
        None,
    )
    .await;
    assert_eq!(what_if.status, StatusCode::ACCEPTED, "{}", what_if.text);
    let result_url = what_if.headers["location"].to_str().unwrap().to_owned();
    let result = call(&app.router, "GET", &local_path(&result_url), None, None).await;
    assert_eq!(result.status, StatusCode::OK);
    assert_eq!(result.json["status"], "Succeeded", "{}", result.text);
    assert_eq!(
        result.json["properties"]["changes"][0]["changeType"], "Create",
        "{}",
        result.text
    );

    let validate = call(
        &app.router,
        "POST",
        &format!("{path}/validate?{V}"),
        Some(body(template.clone(), parameters.clone())),
        None,
    )
    .await;
    assert_eq!(validate.status, StatusCode::OK, "{}", validate.text);

    let put = call(
        &app.router,
        "PUT",
        &format!("{path}?{V}"),
        Some(body(template, parameters)),
        None,
    )
    .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let status = poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(status.json["status"], "Succeeded", "{}", status.text);
    assert_eq!(
        std::fs::read_to_string(root.path().join("a/note.txt")).unwrap(),
        "written by cairn"
    );
    let got = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
    assert_eq!(
        got.json["properties"]["outputs"]["path"]["value"],
        "a/note.txt"
    );

    let operations = call(
        &app.router,
        "GET",
        &format!("{path}/operations?{V}"),
        None,
        None,
    )
    .await;
    let list = operations.json["value"].as_array().unwrap();
    assert!(!list.is_empty(), "{}", operations.text);
    let operation_id = list[0]["operationId"].as_str().unwrap();
    let one = call(
        &app.router,
        "GET",
        &format!("{path}/operations/{operation_id}?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.json["operationId"], operation_id);
    let top = call(
        &app.router,
        "GET",
        &format!("{path}/operations?{V}&$top=0"),
        None,
        None,
    )
    .await;
    assert_eq!(top.json["value"], json!([]));

    // Delete: 202 + Location, whose poll answers 204; the file stays.
    let deleted = call(
        &app.router,
        "DELETE",
        &format!("{path}?api-version=2026-06-01"),
        None,
        None,
    )
    .await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    let location = deleted.headers["location"].to_str().unwrap().to_owned();
    assert!(location.contains("/operationresults/"), "{location}");
    let done = call(&app.router, "GET", &local_path(&location), None, None).await;
    assert_eq!(done.status, StatusCode::NO_CONTENT);
    let gone = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
    assert_eq!(gone.json["error"]["code"], "DeploymentNotFound");
    assert!(root.path().join("a/note.txt").exists());
    let again = call(&app.router, "DELETE", &format!("{path}?{V}"), None, None).await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
}

/// The operations list a client polls is kept between requests and brought up to date from the journal: while
/// the deployment runs, after it ended, and once it ran again (the new run's operations only), it reads as the
/// engine's own list.
#[tokio::test]
async fn polled_operations_lists_read_as_the_engines_while_running_after_and_for_a_new_run() {
    let app = TestApp::new().await;
    let root = tempfile::tempdir().unwrap();
    create_group(&app, "polled").await;
    let template = |count: usize| {
        json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.0",
            "contentVersion": "1.0.0.0",
            "parameters": {"root": {"type": "string"}},
            "imports": {"local": {"provider": "Local", "version": "1.0.0",
                                   "config": {"rootDirectory": "[parameters('root')]"}}},
            "resources": {"notes": {"import": "local", "type": "File",
                                    "copy": {"name": "notes", "count": count},
                                    "properties": {"path": "[format('n{0}.txt', copyIndex())]",
                                                   "content": "polled"}}}
        })
    };
    let path = deployment(&rg("polled"), "polled");
    let parameters = json!({"root": {"value": root.path().to_str().unwrap()}});
    let engines = |app: &TestApp| {
        let engine = app.engine.clone();
        async move {
            // The scope as the server canonicalises the path's.
            let operations = engine
                .operations(&format!("{SUB}/resourceGroups/polled"), "polled")
                .await
                .expect("operations");
            serde_json::to_value(ListResult::new(operations)).unwrap()
        }
    };
    let listed = |app: &TestApp| {
        let router = app.router.clone();
        let path = path.clone();
        async move {
            call(
                &router,
                "GET",
                &format!("{path}/operations?{V}"),
                None,
                None,
            )
            .await
            .json
        }
    };

    for count in [40, 3] {
        let put = call(
            &app.router,
            "PUT",
            &format!("{path}?{V}"),
            Some(body(template(count), parameters.clone())),
            None,
        )
        .await;
        assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
        // Polled while it runs: each list is a list the engine answered at some point, never older than the last.
        let mut seen = 0;
        for _ in 0..200 {
            let list = listed(&app).await;
            let value = list["value"].as_array().unwrap();
            assert!(value.len() >= seen, "{list}");
            seen = value.len();
            let ended = app
                .engine
                .get(&rg("polled"), "polled")
                .await
                .ok()
                .and_then(|d| d.properties.provisioning_state)
                .is_some_and(|state| state.is_terminal());
            if ended {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let status = poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
        assert_eq!(status.json["status"], "Succeeded", "{}", status.text);
        let list = listed(&app).await;
        assert_eq!(list, engines(&app).await);
        assert_eq!(list["value"].as_array().unwrap().len(), count, "{list}");
    }
}

#[tokio::test]
async fn failures_are_arm_shaped() {
    let app = TestApp::new().await;
    let missing_group = call(
        &app.router,
        "PUT",
        &format!("{}?{V}", deployment(&rg("absent"), "d")),
        Some(body(outputs_template(), json!({"who": {"value": "x"}}))),
        None,
    )
    .await;
    assert_eq!(missing_group.status, StatusCode::NOT_FOUND);
    assert_eq!(missing_group.json["error"]["code"], "ResourceGroupNotFound");

    create_group(&app, "errs").await;
    let path = deployment(&rg("errs"), "d");
    let no_mode = call(
        &app.router,
        "PUT",
        &format!("{path}?{V}"),
        Some(json!({"properties": {"template": outputs_template()}}).to_string()),
        None,
    )
    .await;
    assert_eq!(no_mode.status, StatusCode::BAD_REQUEST);
    assert_eq!(no_mode.json["error"]["code"], "InvalidRequestContent");

    // A missing parameter fails validation with the validate-result model.
    let invalid = call(
        &app.router,
        "POST",
        &format!("{path}/validate?{V}"),
        Some(body(outputs_template(), json!({}))),
        None,
    )
    .await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST, "{}", invalid.text);
    assert!(
        invalid.json["error"]["code"].is_string(),
        "{}",
        invalid.text
    );

    let bad_name = call(
        &app.router,
        "PUT",
        &format!("{}?{V}", deployment(&rg("errs"), "bad%23name")),
        Some(body(outputs_template(), json!({"who": {"value": "x"}}))),
        None,
    )
    .await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST);

    let unknown_status = call(
        &app.router,
        "GET",
        &format!("{path}/operationStatuses/{}?{V}", uuid_like()),
        None,
        None,
    )
    .await;
    assert_eq!(unknown_status.status, StatusCode::NOT_FOUND);
}

fn uuid_like() -> String {
    "0b5f2f8e-0000-4000-8000-000000000000".to_owned()
}

/// A deployment record `Running` with no engine run behind it (as after its engine died), its run ID.
async fn put_running(app: &TestApp, scope: &str, name: &str) -> DeploymentId {
    let run = DeploymentId::generate();
    app.store
        .put_deployment(
            NewDeployment {
                id: run.clone(),
                key: DeploymentKey::new(scope, name),
                parent: None,
                location: None,
                tags: Default::default(),
                request: json!({"mode": "Incremental", "template": outputs_template()}),
                status: DeploymentStatus::Running,
                correlation_id: "c".into(),
                stack_initiated: false,
                created_at: Timestamp::now(),
                owner: None,
            },
            Precondition::MustNotExist,
        )
        .await
        .unwrap();
    run
}

#[tokio::test]
async fn running_deployments_block_deletes() {
    let app = TestApp::new().await;
    create_group(&app, "busy").await;
    let scope = format!("{SUB}/resourceGroups/busy");
    let run = put_running(&app, &scope, "long").await;
    let path = deployment(&scope, "long");
    let delete = call(&app.router, "DELETE", &format!("{path}?{V}"), None, None).await;
    assert_eq!(delete.status, StatusCode::CONFLICT);
    assert_eq!(delete.json["error"]["code"], "DeploymentActive");
    let group = call(
        &app.router,
        "DELETE",
        &format!("{}?{V}", rg("busy")),
        None,
        None,
    )
    .await;
    assert_eq!(group.status, StatusCode::CONFLICT);
    let replace = call(
        &app.router,
        "PUT",
        &format!("{path}?{V}"),
        Some(body(outputs_template(), json!({"who": {"value": "x"}}))),
        None,
    )
    .await;
    assert_eq!(replace.status, StatusCode::CONFLICT);
    assert_eq!(replace.json["error"]["code"], "DeploymentActive");

    // Its engine is gone (no claim), so cancel takes it over and ends it; then it can be deleted.
    let cancel = call(
        &app.router,
        "POST",
        &format!("{path}/cancel?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::NO_CONTENT, "{}", cancel.text);
    let status = call(
        &app.router,
        "GET",
        &format!("{path}/operationStatuses/{run}?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(status.json["status"], "Canceled", "{}", status.text);
    assert_eq!(status.json["error"]["code"], "DeploymentCanceled");
    let got = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
    assert_eq!(got.json["properties"]["provisioningState"], "Canceled");
    let delete = call(&app.router, "DELETE", &format!("{path}?{V}"), None, None).await;
    assert_eq!(delete.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn subscription_scope_deployments_and_group_deletion_cleans_history() {
    let app = TestApp::new().await;
    let path = deployment(SUB, "sub-level");
    let mut template = outputs_template();
    template["$schema"] = json!(
        "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#"
    );
    let put = call(
        &app.router,
        "PUT",
        &format!("{path}?{V}"),
        Some(
            json!({"location": "westus", "properties": {"mode": "Incremental", "template": template,
                   "parameters": {"who": {"value": "sub"}}}})
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let status = poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(status.json["status"], "Succeeded", "{}", status.text);
    let list = call(
        &app.router,
        "GET",
        &format!("{SUB}/providers/Microsoft.Resources/deployments?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(list.json["value"].as_array().unwrap().len(), 1);

    create_group(&app, "temp").await;
    let inner = deployment(&rg("temp"), "d");
    let put = call(
        &app.router,
        "PUT",
        &format!("{inner}?{V}"),
        Some(body(outputs_template(), json!({"who": {"value": "x"}}))),
        None,
    )
    .await;
    poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    let deleted = call(
        &app.router,
        "DELETE",
        &format!("{}?{V}", rg("temp")),
        None,
        None,
    )
    .await;
    assert_eq!(deleted.status, StatusCode::OK);
    create_group(&app, "temp").await;
    let history = call(
        &app.router,
        "GET",
        &format!(
            "{}/providers/Microsoft.Resources/deployments?{V}",
            rg("temp")
        ),
        None,
        None,
    )
    .await;
    assert_eq!(history.json["value"], json!([]));
}

#[tokio::test]
async fn deleting_a_group_deletes_its_local_key_vaults() {
    let app = TestApp::new().await;
    let vault_template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [
            {"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "vault1", "location": "westus",
             "properties": {"tenantId": "[subscription().tenantId]", "sku": {"family": "A", "name": "standard"}}},
            {"type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "vault1/s1",
             "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'vault1')]"], "properties": {"value": "hidden"}}
        ]
    });
    // `kv` and `kv2`: a prefix sibling must survive.
    for group in ["kv", "kv2"] {
        create_group(&app, group).await;
        let put = call(
            &app.router,
            "PUT",
            &format!("{}?{V}", deployment(&rg(group), "vault")),
            Some(body(vault_template.clone(), json!({}))),
            None,
        )
        .await;
        assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
        let status = poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
        assert_eq!(status.json["status"], "Succeeded", "{}", status.text);
    }
    let vault_id = |group: &str| {
        format!("{SUB}/resourceGroups/{group}/providers/Microsoft.KeyVault/vaults/vault1")
    };
    assert!(
        app.store
            .get_vault(&vault_id("kv"))
            .await
            .unwrap()
            .is_some()
    );

    let deleted = call(
        &app.router,
        "DELETE",
        &format!("{}?{V}", rg("kv")),
        None,
        None,
    )
    .await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert!(
        app.store
            .get_vault(&vault_id("kv"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        app.store
            .get_vault_secret(&vault_id("kv"), "s1", None)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        app.store
            .get_vault(&vault_id("kv2"))
            .await
            .unwrap()
            .is_some()
    );
    let inventory = app
        .store
        .get_managed_resource(&cairn_store::ResourceKey::arm(&vault_id("kv")))
        .await
        .unwrap();
    assert!(inventory.is_none());
    assert!(
        app.store
            .get_managed_resource(&cairn_store::ResourceKey::arm(&vault_id("kv2")))
            .await
            .unwrap()
            .is_some()
    );
}

/// A template writing `root.txt` through Local, with a nested deployment (`files-inner`) that declares Local
/// again (config inherited whole) and writes `inner.txt`.
fn provider_config_template() -> Value {
    let local = json!({"local": {"name": "Local", "version": "1.0.0",
                                 "config": {"rootDirectory": {"type": "string"}}}});
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": local,
        "resources": {
            "root": {"extension": "local", "type": "File", "properties": {"path": "root.txt", "content": "r"}},
            "inner": {
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "files-inner",
                "properties": {
                    "mode": "Incremental",
                    "expressionEvaluationOptions": {"scope": "inner"},
                    "extensionConfigs": {"local": "[extensions('local').config]"},
                    "template": {
                        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                        "languageVersion": "2.2-experimental",
                        "contentVersion": "1.0.0.0",
                        "extensions": local,
                        "resources": {"file": {"extension": "local", "type": "File",
                                               "properties": {"path": "inner.txt", "content": "i"}}}
                    }
                }
            }
        }
    })
}

#[tokio::test]
async fn provider_configs_in_the_body_and_extensions_with_their_deployment_ids() {
    let app = TestApp::new().await;
    create_group(&app, "providers").await;
    let scope = rg("providers");
    for (name, key) in [
        ("spelled-short", "deploymentProviderConfigs"),
        ("spelled-long", "deploymentProviderConfigurations"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap().to_owned();
        let path = deployment(&scope, name);
        let request = json!({"properties": {"mode": "Incremental", "template": provider_config_template(),
                                            key: {"local": {"rootDirectory": {"value": root}}}}});
        let put = call(
            &app.router,
            "PUT",
            &format!("{path}?{V}"),
            Some(request.to_string()),
            None,
        )
        .await;
        assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
        let status = poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
        assert_eq!(status.json["status"], "Succeeded", "{key}: {}", status.text);
        assert!(dir.path().join("root.txt").exists() && dir.path().join("inner.txt").exists());

        // Both deployments' extensions, each with the id of the deployment that declared it; a deployment the
        // API started (not a stack) never shows config.
        let got = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
        let extensions = got.json["properties"]["extensions"].as_array().unwrap();
        let mut ids: Vec<String> = extensions
            .iter()
            .map(|e| {
                assert_eq!(
                    (&e["alias"], &e["name"], &e["version"]),
                    (&json!("local"), &json!("Local"), &json!("1.0.0")),
                    "{e}"
                );
                assert!(e.get("config").is_none(), "{e}");
                e["deploymentId"].as_str().unwrap().to_owned()
            })
            .collect();
        ids.sort();
        let mut expected = vec![path.clone(), deployment(&scope, "files-inner")];
        expected.sort();
        let lower = |v: Vec<String>| -> Vec<String> {
            v.into_iter().map(|s| s.to_ascii_lowercase()).collect()
        };
        assert_eq!(lower(ids), lower(expected), "{}", got.text);
        let nested = call(
            &app.router,
            "GET",
            &format!("{}?{V}", deployment(&scope, "files-inner")),
            None,
            None,
        )
        .await;
        assert_eq!(
            nested.json["properties"]["extensions"][0]["deploymentId"]
                .as_str()
                .map(str::to_ascii_lowercase),
            Some(deployment(&scope, "files-inner").to_ascii_lowercase()),
            "{}",
            nested.text
        );

        // The body form is stored as extensionConfigs, sealed like them: the value is not in the record.
        let record = app
            .store
            .get_deployment(&DeploymentKey::new(&scope, name))
            .await
            .unwrap()
            .unwrap();
        let stored = record.request.to_string();
        assert!(!stored.contains(&root), "{stored}");
        assert!(!stored.contains(key), "{stored}");
    }

    // One alias given in both forms is refused, and nothing is stored.
    let path = deployment(&scope, "both");
    let request = json!({"properties": {"mode": "Incremental", "template": provider_config_template(),
        "extensionConfigs": {"local": {"rootDirectory": {"value": "/a"}}},
        "deploymentProviderConfigs": {"local": {"rootDirectory": {"value": "/b"}}}}});
    let put = call(
        &app.router,
        "PUT",
        &format!("{path}?{V}"),
        Some(request.to_string()),
        None,
    )
    .await;
    assert_eq!(put.status, StatusCode::BAD_REQUEST, "{}", put.text);
    assert_eq!(
        put.json["error"]["details"][0]["target"],
        "properties.deploymentProviderConfigs.local"
    );
    let gone = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_status_poll_that_prefers_to_wait_is_held_until_the_deployment_ends_or_the_wait_is_over()
{
    let app = TestApp::new().await;
    create_group(&app, "held").await;
    let scope = format!("{SUB}/resourceGroups/held");
    let run = put_running(&app, &scope, "long").await;
    let path = deployment(&scope, "long");
    let status_url = format!("{path}/operationStatuses/{run}?{V}");

    // Without the preference: answered at once, as ARM does.
    let started = std::time::Instant::now();
    let plain = call(&app.router, "GET", &status_url, None, None).await;
    assert_eq!(plain.json["status"], "Running", "{}", plain.text);
    assert!(plain.headers.get("preference-applied").is_none());
    assert!(started.elapsed() < Duration::from_millis(900));

    // Still running after the wait: answered once it is over, saying the wait was applied.
    let started = std::time::Instant::now();
    let held = call_with_headers(
        &app.router,
        "GET",
        &status_url,
        None,
        &[("prefer", "respond-async, wait=1")],
    )
    .await;
    assert_eq!(held.json["status"], "Running", "{}", held.text);
    assert_eq!(held.headers["preference-applied"], "wait=1");
    assert!(started.elapsed() >= Duration::from_millis(950));

    // Ended while held (by a cancel from elsewhere): answered with the end, long before the wait is over.
    let router = app.router.clone();
    let waiting = tokio::spawn({
        let status_url = status_url.clone();
        async move {
            let started = std::time::Instant::now();
            let answer =
                call_with_headers(&router, "GET", &status_url, None, &[("prefer", "wait=8")]).await;
            (answer, started.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = call(
        &app.router,
        "POST",
        &format!("{path}/cancel?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::NO_CONTENT, "{}", cancel.text);
    let (answer, waited) = waiting.await.unwrap();
    assert_eq!(answer.json["status"], "Canceled", "{}", answer.text);
    assert_eq!(answer.headers["preference-applied"], "wait=8");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
}

/// A deployment PUT with the stack id header is a stack's deployment: validated in stacks mode (a secret given as a
/// config value is refused) and its record shows the non-secret config; without it, neither.
#[tokio::test]
async fn the_stack_id_header_marks_a_deployment_as_a_stacks() {
    let app = TestApp::new().await;
    create_group(&app, "marked").await;
    let scope = rg("marked");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let stack = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/files");
    let body = |configs: Value| {
        // A secure `token` is declared when one is given.
        let mut declared = json!({"rootDirectory": {"type": "string"}});
        if configs["local"].get("token").is_some() {
            declared["token"] = json!({"type": "secureString"});
        }
        let template = json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental",
            "contentVersion": "1.0.0.0",
            "extensions": {"local": {"name": "Local", "version": "1.0.0", "config": declared}},
            "resources": {"f": {"extension": "local", "type": "File",
                                "properties": {"path": "a.txt", "content": "a"}}}
        });
        json!({"properties": {"mode": "Incremental", "template": template, "extensionConfigs": configs}})
            .to_string()
    };
    let plain = json!({"local": {"rootDirectory": {"value": root}}});
    let with_secret =
        json!({"local": {"rootDirectory": {"value": root}, "token": {"value": "literal-5f1e"}}});

    // (name, header, configs, expected PUT status)
    let cases = [
        ("marked", Some(stack.as_str()), plain.clone(), 201),
        ("unmarked", None, plain.clone(), 201),
        (
            "marked with a secret value",
            Some(stack.as_str()),
            with_secret.clone(),
            400,
        ),
        ("unmarked with a secret value", None, with_secret, 201),
        (
            "marked with no stack",
            Some("/subscriptions/x/resourceGroups/y"),
            plain,
            400,
        ),
    ];
    for (name, header, configs, status) in cases {
        let path = deployment(&scope, &name.replace(' ', "-"));
        let headers: Vec<(&str, &str)> = header
            .map(|h| vec![("x-ms-deployment-stack-id", h)])
            .unwrap_or_default();
        let put = call_with_headers(
            &app.router,
            "PUT",
            &format!("{path}?{V}"),
            Some(body(configs)),
            &headers,
        )
        .await;
        assert_eq!(put.status.as_u16(), status, "{name}: {}", put.text);
        assert!(!put.text.contains("literal-5f1e"), "{name}: {}", put.text);
        if status != 201 {
            continue;
        }
        let done = poll_status(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
        assert_eq!(done.json["status"], "Succeeded", "{name}: {}", done.text);
        let got = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
        let config = &got.json["properties"]["extensions"][0]["config"];
        assert_eq!(
            config["rootDirectory"].is_object(),
            header.is_some(),
            "{name}: {}",
            got.text
        );
        assert!(!got.text.contains("literal-5f1e"), "{name}: {}", got.text);
    }
}

/// A deployment marked as a stack's is held to seed 000's whole stacks-mode table by the engine itself, not only
/// to the rules the stack service checks first: a `list*()` output in a property the extension does not declare
/// secure, and a `reference()` output in one it does, are refused before anything runs, naming the property.
#[tokio::test]
async fn a_stacks_deployment_is_held_to_the_whole_stacks_mode_table() {
    let app = TestApp::new().await;
    create_group(&app, "table").await;
    let scope = rg("table");
    let stack = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/files");
    let body = |configs: Value| {
        let inner = json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental",
            "contentVersion": "1.0.0.0",
            "extensions": {"local": {"name": "Local", "version": "1.0.0", "config": {
                "rootDirectory": {"type": "string"},
                "token": {"type": "secureString", "nullable": true}}}},
            "resources": {"f": {"extension": "local", "type": "File",
                                "properties": {"path": "a.txt", "content": "a"}}}
        });
        let template = json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.0",
            "contentVersion": "1.0.0.0",
            "resources": {"inner": {
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "inner",
                "properties": {"mode": "Incremental", "extensionConfigs": {"local": configs}, "template": inner}
            }}
        });
        json!({"properties": {"mode": "Incremental", "template": template}}).to_string()
    };
    let secret = "resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', 'token')";
    // (name, configs, the property the refusal names)
    let cases = [
        (
            "list output in a plain property",
            json!({"rootDirectory": {"value": format!("[listValue({secret}, '2023-07-01').value]")}}),
            "rootDirectory",
        ),
        (
            "reference output in a secure property",
            json!({"rootDirectory": {"value": "/tmp/x"}, "token": {"value":
                "[reference(resourceId('Microsoft.KeyVault/vaults', 'ops'), '2023-07-01').vaultUri]"}}),
            "token",
        ),
    ];
    for (name, configs, property) in cases {
        let path = deployment(&scope, &name.replace(' ', "-"));
        let put = call_with_headers(
            &app.router,
            "PUT",
            &format!("{path}?{V}"),
            Some(body(configs)),
            &[("x-ms-deployment-stack-id", stack.as_str())],
        )
        .await;
        assert_eq!(put.status.as_u16(), 400, "{name}: {}", put.text);
        let details = put.json["error"]["details"].to_string();
        assert!(
            details.contains("stacks-extensibility-compat") && details.contains(property),
            "{name}: {}",
            put.text
        );
        let got = call(&app.router, "GET", &format!("{path}?{V}"), None, None).await;
        assert_eq!(
            got.status,
            StatusCode::NOT_FOUND,
            "{name}: nothing is written"
        );
    }
}

//! Stack what-if results (`deploymentStacksWhatIfResults`, 2025-07-01: PUT, GET, LIST, POST whatIf, DELETE, the
//! operation status) and `POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete` over the API.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const V: &str = "api-version=2025-07-01";

fn path_of(url: &str) -> String {
    url.strip_prefix("http://cairn.test")
        .unwrap_or(url)
        .to_owned()
}

fn template(vaults: &[&str]) -> Value {
    let resources: Vec<Value> = vaults
        .iter()
        .map(|name| {
            json!({"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": name,
                   "location": "local", "properties": {}})
        })
        .collect();
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": resources
    })
}

fn what_if_body(stack: &str, vaults: &[&str], action: &str) -> String {
    json!({"properties": {
        "deploymentStackResourceId": stack,
        "retentionInterval": "P7D",
        "template": template(vaults),
        "actionOnUnmanage": {"resources": action},
        "denySettings": {"mode": "none"}
    }})
    .to_string()
}

fn change_types(result: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = result["properties"]["changes"]["resourceChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["id"]
                    .as_str()
                    .and_then(|id| id.rsplit('/').next())
                    .unwrap_or("")
                    .to_owned(),
                c["changeType"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    found.sort();
    found
}

async fn make_group(app: &TestApp, name: &str) {
    let answer = call(
        &app.router,
        "PUT",
        &format!("{SUB}/resourcegroups/{name}?api-version=2025-04-01"),
        Some(json!({"location": "local"}).to_string()),
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_results_over_the_api() {
    let app = TestApp::new().await;
    make_group(&app, "wi").await;
    let rg = format!("{SUB}/resourceGroups/wi");
    let stack = format!("{rg}/providers/Microsoft.Resources/deploymentStacks/st");
    let result = format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/r1");

    // First deploy of a stack that does not exist: everything is created.
    let put = call(
        &app.router,
        "PUT",
        &format!("{result}?{V}"),
        Some(what_if_body(&stack, &["v1", "v2"], "delete")),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    assert_eq!(
        change_types(&put.json),
        vec![
            ("v1".into(), "create".into()),
            ("v2".into(), "create".into())
        ]
    );
    assert_eq!(
        put.json["type"],
        "Microsoft.Resources/deploymentStacksWhatIfResults"
    );
    let status_url = put.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    let status = call(&app.router, "GET", &path_of(&status_url), None, None).await;
    assert_eq!(status.status.as_u16(), 200, "{}", status.text);
    assert_eq!(status.json["status"], "Succeeded");

    let get = call(&app.router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(get.status.as_u16(), 200);
    assert_eq!(get.json, put.json);
    let list = call(
        &app.router,
        "GET",
        &format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        list.json["value"].as_array().map(Vec::len),
        Some(1),
        "{}",
        list.text
    );

    // Deploy the stack, then ask what dropping v2 would do with detach.
    let put_stack = call(
        &app.router,
        "PUT",
        &format!("{stack}?{V}"),
        Some(
            json!({"properties": {"template": template(&["v1", "v2"]),
                   "actionOnUnmanage": {"resources": "delete"}, "denySettings": {"mode": "none"}}})
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(put_stack.status.as_u16(), 201, "{}", put_stack.text);
    let stack_status = put_stack.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    for _ in 0..400 {
        let answer = call(&app.router, "GET", &path_of(&stack_status), None, None).await;
        if answer.json["status"] != "Running" {
            assert_eq!(answer.json["status"], "Succeeded", "{}", answer.text);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let replaced = call(
        &app.router,
        "PUT",
        &format!("{result}?{V}"),
        Some(what_if_body(&stack, &["v1"], "detach")),
        None,
    )
    .await;
    assert_eq!(replaced.status.as_u16(), 200, "{}", replaced.text);
    assert_eq!(
        change_types(&replaced.json),
        vec![
            ("v1".into(), "noChange".into()),
            ("v2".into(), "detach".into())
        ]
    );
    let rerun = call(
        &app.router,
        "POST",
        &format!("{result}/whatIf?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(rerun.status.as_u16(), 200, "{}", rerun.text);
    assert_eq!(change_types(&rerun.json), change_types(&replaced.json));

    let delete = call(&app.router, "DELETE", &format!("{result}?{V}"), None, None).await;
    assert_eq!(delete.status.as_u16(), 200);
    let again = call(&app.router, "DELETE", &format!("{result}?{V}"), None, None).await;
    assert_eq!(again.status.as_u16(), 204);
    let gone = call(&app.router, "GET", &format!("{result}?{V}"), None, None).await;
    assert_eq!(gone.status.as_u16(), 404);
    assert_eq!(
        gone.json["error"]["code"],
        "DeploymentStacksWhatIfResultNotFound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_over_the_api() {
    let app = TestApp::new().await;
    make_group(&app, "bd").await;
    let vault = format!("{SUB}/resourceGroups/bd/providers/Microsoft.KeyVault/vaults/doomed");
    let made = call(
        &app.router,
        "PUT",
        &format!("{vault}?api-version=2023-07-01"),
        Some(json!({"location": "local", "properties": {}}).to_string()),
        None,
    )
    .await;
    assert!(made.status.is_success(), "{}", made.text);
    let bulk = format!("{SUB}/providers/Microsoft.Resources/bulkDelete");
    let missing = format!("{SUB}/resourceGroups/bd/providers/Microsoft.KeyVault/vaults/never");
    let answer = call(
        &app.router,
        "POST",
        &format!("{bulk}?{V}"),
        Some(
            json!({"resources": [
                {"id": vault, "apiVersion": "2023-07-01"},
                {"id": missing, "apiVersion": "2023-07-01"},
                {"extension": {"name": "Nope", "version": "1.0.0"}, "type": "thing", "identifiers": {"name": "x"}}
            ]})
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    let statuses: Vec<&str> = answer.json["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        statuses,
        vec!["deleted", "notFound", "failed"],
        "{}",
        answer.text
    );
    assert!(answer.json["value"][2]["error"]["code"].is_string());
    let after = call(
        &app.router,
        "GET",
        &format!("{vault}?api-version=2023-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(after.status.as_u16(), 404);

    let other = call(
        &app.router,
        "POST",
        &format!("{bulk}?{V}"),
        Some(json!({"resources": [{"id": "/subscriptions/other/resourceGroups/x/providers/Microsoft.KeyVault/vaults/v"}]}).to_string()),
        None,
    )
    .await;
    assert_eq!(other.status.as_u16(), 400);
    assert_eq!(other.json["error"]["code"], "InvalidBulkDeleteEntry");
    let no_version = call(
        &app.router,
        "POST",
        &bulk,
        Some("{\"resources\": []}".into()),
        None,
    )
    .await;
    assert_eq!(
        no_version.json["error"]["code"],
        "MissingApiVersionParameter"
    );
    let wrong_method = call(&app.router, "GET", &format!("{bulk}?{V}"), None, None).await;
    assert_eq!(wrong_method.status.as_u16(), 405);
}

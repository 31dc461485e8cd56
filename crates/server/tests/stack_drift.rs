//! Stack drift detection and adoption over the ARM API, at resource-group, subscription and management-group scope:
//! `POST .../detectDrift` as a long-running operation (202 + `Location` + `Azure-AsyncOperation` + `Retry-After`),
//! the result through `Location` (202 while running, then 200) and the list of results; Local files edited and
//! removed by hand show as `modified` / `deleted`, and a PUT repairs them; a stack PUT leaves an existing file it
//! does not manage alone unless the body sets `adoptExistingResources`.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const API: &str = "api-version=2025-07-01";

fn path_of(url: &str) -> String {
    url.strip_prefix("http://cairn.test")
        .unwrap_or(url)
        .to_owned()
}

/// A stack of Local `File`s (`path → content`) under `root`, with the template schema of its scope.
fn file_stack(schema: &str, root: &str, files: &[(&str, &str)], adopt: bool) -> Value {
    let resources: serde_json::Map<String, Value> = files
        .iter()
        .enumerate()
        .map(|(index, (path, content))| {
            (
                format!("f{index}"),
                json!({"extension": "local", "type": "File",
                       "properties": {"path": path, "content": content}}),
            )
        })
        .collect();
    let mut body = json!({
        "location": "westus",
        "properties": {
            "template": {
                "$schema": format!("https://schema.management.azure.com/schemas/2019-04-01/{schema}.json#"),
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "extensions": {"local": {"name": "Local", "version": "1.0.0",
                                         "config": {"rootDirectory": {"type": "string"}}}},
                "resources": resources
            },
            "extensionConfigs": {"local": {"rootDirectory": {"value": root}}},
            "actionOnUnmanage": {"resources": "delete", "managementGroups": "detach"},
            "denySettings": {"mode": "none"}
        }
    });
    if adopt {
        body["properties"]["adoptExistingResources"] = json!(true);
    }
    body
}

/// PUTs a stack and polls its operation to the end; the final status.
async fn put_stack(app: &TestApp, stack: &str, body: &Value) -> Value {
    let put = call(
        &app.router,
        "PUT",
        &format!("{stack}?{API}"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert!(put.status.is_success(), "{}", put.text);
    let url = path_of(put.headers["azure-asyncoperation"].to_str().unwrap());
    for _ in 0..400 {
        let answer = call(&app.router, "GET", &url, None, None).await;
        if answer.json["status"] != "Running" {
            return answer.json;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the stack operation did not finish");
}

/// Starts a drift detection, checks the LRO headers, and follows both URLs to the end: the final result.
async fn detect(app: &TestApp, stack: &str) -> Value {
    let started = call(
        &app.router,
        "POST",
        &format!("{stack}/detectDrift?{API}"),
        None,
        None,
    )
    .await;
    assert_eq!(started.status.as_u16(), 202, "{}", started.text);
    assert_eq!(started.json["properties"]["status"], "Running");
    assert!(started.headers.contains_key("retry-after"));
    let id = started.json["name"].as_str().unwrap().to_owned();
    let location = path_of(started.headers["location"].to_str().unwrap());
    let status_url = path_of(started.headers["azure-asyncoperation"].to_str().unwrap());
    assert!(
        location.starts_with(&format!("{stack}/driftDetectionResults/{id}?")),
        "{location}"
    );
    assert!(
        status_url.starts_with(&format!("{stack}/operationStatuses/{id}?")),
        "{status_url}"
    );
    for _ in 0..400 {
        let status = call(&app.router, "GET", &status_url, None, None).await;
        assert_eq!(status.status.as_u16(), 200, "{}", status.text);
        if status.json["status"] != "Running" {
            assert_eq!(status.json["status"], "Succeeded", "{}", status.text);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let result = call(&app.router, "GET", &location, None, None).await;
    assert_eq!(result.status.as_u16(), 200, "{}", result.text);
    result.json
}

/// `path → driftStatus` of a result.
fn statuses(result: &Value) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = result["properties"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["identifiers"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["driftStatus"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn rows(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_at_every_stack_scope_and_repair() {
    let app = TestApp::new().await;
    let group = call(
        &app.router,
        "PUT",
        &format!("{SUB}/resourcegroups/drift?api-version=2025-04-01"),
        Some(json!({"location": "westus"}).to_string()),
        None,
    )
    .await;
    assert!(group.status.is_success(), "{}", group.text);
    let scopes = [
        (format!("{SUB}/resourceGroups/drift"), "deploymentTemplate"),
        (SUB.to_owned(), "subscriptionDeploymentTemplate"),
        (
            "/providers/Microsoft.Management/managementGroups/platform".to_owned(),
            "managementGroupDeploymentTemplate",
        ),
    ];
    for (scope, schema) in scopes {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap().to_owned();
        let stack = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/files");
        let body = file_stack(schema, &root, &[("a.txt", "a"), ("b.txt", "b")], false);
        let done = put_stack(&app, &stack, &body).await;
        assert_eq!(done["status"], "Succeeded", "{scope}: {done:#}");

        let clean = detect(&app, &stack).await;
        assert_eq!(
            statuses(&clean),
            rows(&[("a.txt", "inSync"), ("b.txt", "inSync")]),
            "{scope}: {clean:#}"
        );

        std::fs::write(dir.path().join("a.txt"), "edited by hand").unwrap();
        std::fs::remove_file(dir.path().join("b.txt")).unwrap();
        let drifted = detect(&app, &stack).await;
        assert_eq!(
            statuses(&drifted),
            rows(&[("a.txt", "modified"), ("b.txt", "deleted")]),
            "{scope}: {drifted:#}"
        );
        let change = &drifted["properties"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["identifiers"]["path"] == "a.txt")
            .unwrap()["propertyChanges"][0];
        assert_eq!(
            (&change["path"], &change["before"], &change["after"]),
            (
                &json!("properties.content"),
                &json!("a"),
                &json!("edited by hand")
            )
        );
        assert_eq!(drifted["properties"]["summary"]["modified"], 1);
        assert_eq!(drifted["properties"]["summary"]["deleted"], 1);

        let listed = call(
            &app.router,
            "GET",
            &format!("{stack}/driftDetectionResults?{API}"),
            None,
            None,
        )
        .await;
        assert_eq!(listed.status.as_u16(), 200, "{}", listed.text);
        assert_eq!(listed.json["value"].as_array().map(Vec::len), Some(2));

        let done = put_stack(&app, &stack, &body).await;
        assert_eq!(done["status"], "Succeeded", "{scope}: {done:#}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "a"
        );
        let repaired = detect(&app, &stack).await;
        assert_eq!(
            statuses(&repaired),
            rows(&[("a.txt", "inSync"), ("b.txt", "inSync")]),
            "{scope}: {repaired:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_requests_are_checked() {
    let app = TestApp::new().await;
    let mg = "/providers/Microsoft.Management/managementGroups/checks";
    let stack = format!("{mg}/providers/Microsoft.Resources/deploymentStacks/s");
    let missing = call(
        &app.router,
        "POST",
        &format!("{stack}/detectDrift?{API}"),
        None,
        None,
    )
    .await;
    assert_eq!(missing.status.as_u16(), 404, "{}", missing.text);
    assert_eq!(missing.json["error"]["code"], "DeploymentStackNotFound");

    let dir = tempfile::tempdir().unwrap();
    let body = file_stack(
        "managementGroupDeploymentTemplate",
        dir.path().to_str().unwrap(),
        &[("x.txt", "x")],
        false,
    );
    put_stack(&app, &stack, &body).await;
    let bad = call(
        &app.router,
        "POST",
        &format!("{stack}/detectDrift?{API}"),
        Some(json!({"retentionInterval": "P1Y"}).to_string()),
        None,
    )
    .await;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.text);
    assert_eq!(bad.json["error"]["code"], "InvalidRetentionInterval");
    assert_eq!(bad.json["error"]["target"], "retentionInterval");
    let malformed = call(
        &app.router,
        "POST",
        &format!("{stack}/detectDrift?{API}"),
        Some("{\"retentionInterval\": ".into()),
        None,
    )
    .await;
    assert_eq!(malformed.status.as_u16(), 400, "{}", malformed.text);
    let kept = call(
        &app.router,
        "POST",
        &format!("{stack}/detectDrift?{API}"),
        Some(json!({"retentionInterval": "PT1H"}).to_string()),
        None,
    )
    .await;
    assert_eq!(kept.status.as_u16(), 202, "{}", kept.text);
    assert_eq!(kept.json["properties"]["retentionInterval"], "PT1H");
    let unknown = call(
        &app.router,
        "GET",
        &format!("{stack}/driftDetectionResults/drift-0?{API}"),
        None,
        None,
    )
    .await;
    assert_eq!(unknown.status.as_u16(), 404, "{}", unknown.text);
    assert_eq!(
        unknown.json["error"]["code"],
        "DeploymentStackDriftResultNotFound"
    );
    let status = call(
        &app.router,
        "GET",
        &format!("{stack}/operationStatuses/drift-0?{API}"),
        None,
        None,
    )
    .await;
    assert_eq!(status.status.as_u16(), 404, "{}", status.text);
    assert_eq!(status.json["error"]["code"], "OperationNotFound");
    let wrong_method = call(
        &app.router,
        "GET",
        &format!("{stack}/detectDrift?{API}"),
        None,
        None,
    )
    .await;
    assert_eq!(wrong_method.status.as_u16(), 405, "{}", wrong_method.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_file_is_adopted_only_when_the_body_asks() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    std::fs::write(dir.path().join("kept.txt"), "made by hand").unwrap();
    let stack = "/providers/Microsoft.Management/managementGroups/adopt/providers/Microsoft.Resources/deploymentStacks/s";
    let files = [("kept.txt", "from the stack")];
    let refused = put_stack(
        &app,
        stack,
        &file_stack("managementGroupDeploymentTemplate", &root, &files, false),
    )
    .await;
    assert_eq!(refused["status"], "Failed", "{refused:#}");
    assert!(
        refused["error"]
            .to_string()
            .contains("DeploymentStackResourceExistsUnmanaged"),
        "{refused:#}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("kept.txt")).unwrap(),
        "made by hand"
    );
    let adopted = put_stack(
        &app,
        stack,
        &file_stack("managementGroupDeploymentTemplate", &root, &files, true),
    )
    .await;
    assert_eq!(adopted["status"], "Succeeded", "{adopted:#}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("kept.txt")).unwrap(),
        "from the stack"
    );
    let got = call(&app.router, "GET", &format!("{stack}?{API}"), None, None).await;
    assert_eq!(
        got.json["properties"]["resources"].as_array().map(Vec::len),
        Some(1),
        "{}",
        got.text
    );
    assert!(
        got.json["properties"]
            .get("adoptExistingResources")
            .is_none(),
        "{}",
        got.text
    );
}

//! Deployment stacks over the ARM API: PUT (201 + `Azure-AsyncOperation`), GET, LIST, validate, exportTemplate and
//! DELETE (202 + `Location` with `unmanageAction.*`), at resource-group and subscription scope, api versions
//! 2025-07-01 and 2024-03-01.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";

fn path_of(url: &str) -> String {
    url.strip_prefix("http://cairn.test")
        .unwrap_or(url)
        .to_owned()
}

fn stack_body(vaults: &[&str]) -> Value {
    let resources: Vec<Value> = vaults
        .iter()
        .map(|name| {
            json!({"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": name,
                   "location": "local", "properties": {}})
        })
        .collect();
    json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "contentVersion": "1.0.0.0",
                "resources": resources
            },
            "actionOnUnmanage": {"resources": "delete"},
            "denySettings": {"mode": "none"}
        }
    })
}

/// Polls an `Azure-AsyncOperation` URL until it is terminal and returns its status.
async fn poll_async(app: &TestApp, url: &str) -> Value {
    for _ in 0..400 {
        let answer = call(&app.router, "GET", &path_of(url), None, None).await;
        assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
        if answer.json["status"] != "Running" {
            return answer.json;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the stack operation did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stacks_over_the_api() {
    let app = TestApp::new().await;
    let rg = format!("{SUB}/resourcegroups/st?api-version=2025-04-01");
    let answer = call(
        &app.router,
        "PUT",
        &rg,
        Some(json!({"location": "local"}).to_string()),
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);

    for api_version in ["2025-07-01", "2024-03-01"] {
        let name = format!("s-{}", &api_version[..4]);
        // Each stack its own vaults: a vault another stack manages is refused (see the ownership assertion below).
        let (v1, v2, v3) = (format!("a{name}"), format!("b{name}"), format!("c{name}"));
        let stack = format!(
            "{SUB}/resourceGroups/st/providers/Microsoft.Resources/deploymentStacks/{name}"
        );
        let put = call(
            &app.router,
            "PUT",
            &format!("{stack}?api-version={api_version}"),
            Some(stack_body(&[&v1, &v2]).to_string()),
            None,
        )
        .await;
        assert_eq!(put.status.as_u16(), 201, "{}", put.text);
        assert_eq!(put.json["properties"]["provisioningState"], "deploying");
        let status_url = put.headers["azure-asyncoperation"]
            .to_str()
            .unwrap()
            .to_owned();
        let done = poll_async(&app, &status_url).await;
        assert_eq!(done["status"], "Succeeded", "{done:#}");

        let got = call(
            &app.router,
            "GET",
            &format!("{stack}?api-version={api_version}"),
            None,
            None,
        )
        .await;
        assert_eq!(got.status.as_u16(), 200, "{}", got.text);
        assert_eq!(got.json["properties"]["provisioningState"], "succeeded");
        assert_eq!(
            got.json["properties"]["resources"].as_array().map(Vec::len),
            Some(2)
        );

        // Update without v2: deleted (actionOnUnmanage.resources = delete); 200 for an existing stack.
        let put = call(
            &app.router,
            "PUT",
            &format!("{stack}?api-version={api_version}"),
            Some(stack_body(&[&v1]).to_string()),
            None,
        )
        .await;
        assert_eq!(put.status.as_u16(), 200, "{}", put.text);
        let done = poll_async(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
        assert_eq!(done["status"], "Succeeded", "{done:#}");
        let got = call(
            &app.router,
            "GET",
            &format!("{stack}?api-version={api_version}"),
            None,
            None,
        )
        .await;
        assert_eq!(
            got.json["properties"]["deletedResources"]
                .as_array()
                .map(Vec::len),
            Some(1),
            "{}",
            got.text
        );
        let v2 = format!(
            "{SUB}/resourceGroups/st/providers/Microsoft.KeyVault/vaults/v2?api-version=2023-07-01"
        );
        assert_eq!(
            call(&app.router, "GET", &v2, None, None)
                .await
                .status
                .as_u16(),
            404
        );

        let validate = call(
            &app.router,
            "POST",
            &format!("{stack}/validate?api-version={api_version}"),
            Some(stack_body(&[&v1, &v3]).to_string()),
            None,
        )
        .await;
        assert_eq!(validate.status.as_u16(), 200, "{}", validate.text);
        assert_eq!(
            validate.json["properties"]["validatedResources"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        let invalid = call(
            &app.router,
            "POST",
            &format!("{stack}/validate?api-version={api_version}"),
            Some(json!({"properties": {"actionOnUnmanage": {"resources": "delete"}, "denySettings": {"mode": "none"}}}).to_string()),
            None,
        )
        .await;
        assert_eq!(invalid.status.as_u16(), 400, "{}", invalid.text);
        assert!(invalid.json["error"]["code"].is_string());

        let exported = call(
            &app.router,
            "POST",
            &format!("{stack}/exportTemplate?api-version={api_version}"),
            None,
            None,
        )
        .await;
        assert_eq!(exported.status.as_u16(), 200, "{}", exported.text);
        assert!(exported.json["template"]["resources"].is_array());
    }

    // A stack may not take over a vault another stack manages.
    let thief =
        format!("{SUB}/resourceGroups/st/providers/Microsoft.Resources/deploymentStacks/thief");
    let put = call(
        &app.router,
        "PUT",
        &format!("{thief}?api-version=2025-07-01"),
        Some(stack_body(&["as-2025"]).to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let done = poll_async(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(done["status"], "Failed", "{done:#}");
    assert!(
        done["error"]
            .to_string()
            .contains("DeploymentStackResourceManagedByAnotherStack"),
        "{done:#}"
    );
    let list = call(
        &app.router,
        "GET",
        &format!("{SUB}/resourceGroups/st/providers/Microsoft.Resources/deploymentStacks?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(list.status.as_u16(), 200, "{}", list.text);
    assert_eq!(list.json["value"].as_array().map(Vec::len), Some(3));
    // The refused stack never took the vault over, so deleting it leaves the vault to its owner.
    let delete = call(
        &app.router,
        "DELETE",
        &format!("{thief}?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(delete.status.as_u16(), 202, "{}", delete.text);

    // Delete with unmanageAction.Resources=delete: 202 + Location, polled to 204.
    let stack =
        format!("{SUB}/resourceGroups/st/providers/Microsoft.Resources/deploymentStacks/s-2025");
    let delete = call(
        &app.router,
        "DELETE",
        &format!("{stack}?api-version=2025-07-01&unmanageAction.Resources=delete"),
        None,
        None,
    )
    .await;
    assert_eq!(delete.status.as_u16(), 202, "{}", delete.text);
    let mut location = delete.headers["location"].to_str().unwrap().to_owned();
    let mut finished = false;
    for _ in 0..400 {
        let answer = call(&app.router, "GET", &path_of(&location), None, None).await;
        match answer.status.as_u16() {
            202 => {
                location = answer.headers["location"].to_str().unwrap().to_owned();
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            204 => {
                finished = true;
                break;
            }
            other => panic!("unexpected {other}: {}", answer.text),
        }
    }
    assert!(finished);
    let gone = call(
        &app.router,
        "GET",
        &format!("{stack}?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(gone.status.as_u16(), 404);
    assert_eq!(gone.json["error"]["code"], "DeploymentStackNotFound");
    let again = call(
        &app.router,
        "DELETE",
        &format!("{stack}?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(again.status.as_u16(), 204);
    let bad = call(
        &app.router,
        "DELETE",
        &format!("{stack}?api-version=2025-07-01&unmanageAction.Resources=explode"),
        None,
        None,
    )
    .await;
    assert_eq!(bad.status.as_u16(), 400);

    // Subscription scope.
    let sub_stack = format!("{SUB}/providers/Microsoft.Resources/deploymentStacks/at-sub");
    let body = json!({"location": "local", "properties": {
        "template": {"$schema": "https://schema.management.azure.com/schemas/2019-04-01/subscriptionDeploymentTemplate.json#",
                     "contentVersion": "1.0.0.0", "resources": []},
        "actionOnUnmanage": {"resources": "detach"}, "denySettings": {"mode": "none"}}});
    let put = call(
        &app.router,
        "PUT",
        &format!("{sub_stack}?api-version=2025-07-01"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let done = poll_async(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done:#}");
    let list = call(
        &app.router,
        "GET",
        &format!("{SUB}/providers/Microsoft.Resources/deploymentStacks?api-version=2024-03-01"),
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
}

/// A management-group stack of Local `File` resources under `root`.
fn file_stack_body(root: &str, files: &[&str], extra: Value) -> Value {
    let resources: serde_json::Map<String, Value> = files
        .iter()
        .map(|name| {
            (
                (*name).to_owned(),
                json!({"extension": "local", "type": "File",
                       "properties": {"path": format!("{name}.txt"), "content": name}}),
            )
        })
        .collect();
    let mut body = json!({
        "location": "westus",
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-08-01/managementGroupDeploymentTemplate.json#",
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
    if let (Some(properties), Some(extra)) = (body["properties"].as_object_mut(), extra.as_object())
    {
        properties.extend(extra.clone());
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn management_group_stacks_deploy_update_and_delete() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let mg = "/providers/Microsoft.Management/managementGroups/platform";
    let stack = format!("{mg}/providers/Microsoft.Resources/deploymentStacks/files");
    let put = call(
        &app.router,
        "PUT",
        &format!("{stack}?api-version=2025-07-01"),
        Some(file_stack_body(&root, &["a", "b"], json!({})).to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    assert_eq!(put.json["properties"]["deploymentScope"], mg);
    let done = poll_async(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done:#}");
    assert!(dir.path().join("a.txt").exists() && dir.path().join("b.txt").exists());
    let got = call(
        &app.router,
        "GET",
        &format!("{stack}?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(
        got.json["properties"]["resources"].as_array().map(Vec::len),
        Some(2),
        "{}",
        got.text
    );
    assert!(
        got.json["properties"]["deploymentId"]
            .as_str()
            .is_some_and(|id| id.starts_with(mg)),
        "{}",
        got.text
    );

    // Update without b: deleted through the extension.
    let put = call(
        &app.router,
        "PUT",
        &format!("{stack}?api-version=2025-07-01"),
        Some(file_stack_body(&root, &["a"], json!({})).to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    let done = poll_async(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done:#}");
    assert!(!dir.path().join("b.txt").exists());

    let list = call(
        &app.router,
        "GET",
        &format!("{mg}/providers/Microsoft.Resources/deploymentStacks?api-version=2025-07-01"),
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

    // A management-group stack deploys into its group or a subscription, not into a resource group.
    let refused = call(
        &app.router,
        "PUT",
        &format!(
            "{mg}/providers/Microsoft.Resources/deploymentStacks/elsewhere?api-version=2025-07-01"
        ),
        Some(
            file_stack_body(
                &root,
                &["c"],
                json!({"deploymentScope": format!("{SUB}/resourceGroups/st")}),
            )
            .to_string(),
        ),
        None,
    )
    .await;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.text);
    assert_eq!(
        refused.json["error"]["code"],
        "InvalidDeploymentStackDeploymentScope"
    );
    assert_eq!(
        refused.json["error"]["target"],
        "properties.deploymentScope"
    );

    // Delete with unmanageAction.Resources=delete removes the remaining file and the stack.
    let delete = call(
        &app.router,
        "DELETE",
        &format!("{stack}?api-version=2025-07-01&unmanageAction.Resources=delete"),
        None,
        None,
    )
    .await;
    assert_eq!(delete.status.as_u16(), 202, "{}", delete.text);
    let mut gone = false;
    for _ in 0..400 {
        let answer = call(
            &app.router,
            "GET",
            &format!("{stack}?api-version=2025-07-01"),
            None,
            None,
        )
        .await;
        if answer.status.as_u16() == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(gone, "the management-group stack was deleted");
    assert!(!dir.path().join("a.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_scopes_outside_the_stack_are_refused() {
    let app = TestApp::new().await;
    let stack = format!("{SUB}/resourceGroups/st/providers/Microsoft.Resources/deploymentStacks/x");
    let mut body = stack_body(&["v"]);
    body["properties"]["deploymentScope"] = json!(format!("{SUB}/resourceGroups/other"));
    let refused = call(
        &app.router,
        "PUT",
        &format!("{stack}?api-version=2025-07-01"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.text);
    assert_eq!(
        refused.json["error"]["code"],
        "InvalidDeploymentStackDeploymentScope"
    );
    let sub_stack = format!("{SUB}/providers/Microsoft.Resources/deploymentStacks/y");
    body["properties"]["deploymentScope"] =
        json!("/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/st");
    let refused = call(
        &app.router,
        "PUT",
        &format!("{sub_stack}?api-version=2025-07-01"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.text);
    // A subscription stack needs a location for its deployment.
    let refused = call(
        &app.router,
        "PUT",
        &format!("{sub_stack}?api-version=2025-07-01"),
        Some(stack_body(&["v"]).to_string()),
        None,
    )
    .await;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.text);
    assert_eq!(refused.json["error"]["code"], "LocationRequired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_in_or_into_a_missing_resource_group_is_404_and_saves_nothing() {
    let app = TestApp::new().await;
    let missing = format!("{SUB}/resourceGroups/missing");
    let stack = format!("{missing}/providers/Microsoft.Resources/deploymentStacks/st");
    let put = call(
        &app.router,
        "PUT",
        &format!("{stack}?api-version=2025-07-01"),
        Some(stack_body(&["v"]).to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 404, "{}", put.text);
    assert_eq!(put.json["error"]["code"], "ResourceGroupNotFound");
    assert!(put.headers.get("azure-asyncoperation").is_none());
    let got = call(
        &app.router,
        "GET",
        &format!("{stack}?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(got.status.as_u16(), 404, "{}", got.text);
    assert_eq!(got.json["error"]["code"], "DeploymentStackNotFound");
    for scope in [missing.as_str(), SUB] {
        let list = call(
            &app.router,
            "GET",
            &format!(
                "{scope}/providers/Microsoft.Resources/deploymentStacks?api-version=2025-07-01"
            ),
            None,
            None,
        )
        .await;
        assert_eq!(list.json["value"], json!([]), "{scope}: {}", list.text);
    }

    // A subscription stack deploying into a missing group: the same, and the stack is not stored either.
    let sub_stack = format!("{SUB}/providers/Microsoft.Resources/deploymentStacks/into");
    let mut body = stack_body(&["v"]);
    body["location"] = json!("westus");
    body["properties"]["deploymentScope"] = json!(missing);
    let put = call(
        &app.router,
        "PUT",
        &format!("{sub_stack}?api-version=2025-07-01"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 404, "{}", put.text);
    assert_eq!(put.json["error"]["code"], "ResourceGroupNotFound");
    let got = call(
        &app.router,
        "GET",
        &format!("{sub_stack}?api-version=2025-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(got.status.as_u16(), 404, "{}", got.text);
}

/// A stack GET carries an `ETag`; with `If-None-Match` naming it, the answer is 304 at once, and with
/// `Prefer: wait=N` too the read is held until the stack changes (answered with the new stack as soon as it is
/// written) or the wait is over (304, `Preference-Applied`). A follower of a stack operation learns of each change
/// as it happens instead of up to a poll interval later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_read_is_held_until_the_stack_changes() {
    let app = TestApp::new().await;
    let rg = format!("{SUB}/resourcegroups/held?api-version=2025-04-01");
    let made = call(
        &app.router,
        "PUT",
        &rg,
        Some(json!({"location": "local"}).to_string()),
        None,
    )
    .await;
    assert!(made.status.is_success(), "{}", made.text);
    let stack = format!(
        "{SUB}/resourceGroups/held/providers/Microsoft.Resources/deploymentStacks/s?api-version=2025-07-01"
    );
    let put = call(
        &app.router,
        "PUT",
        &stack,
        Some(stack_body(&["hv1"]).to_string()),
        None,
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let status_url = put.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    poll_async(&app, &status_url).await;

    let got = call(&app.router, "GET", &stack, None, None).await;
    assert_eq!(got.status.as_u16(), 200, "{}", got.text);
    let etag = got.headers["etag"].to_str().unwrap().to_owned();
    assert!(got.headers.get("preference-applied").is_none());

    let started = std::time::Instant::now();
    let same = call_with_headers(
        &app.router,
        "GET",
        &stack,
        None,
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(same.status.as_u16(), 304, "{}", same.text);
    assert!(started.elapsed() < Duration::from_millis(900));

    let started = std::time::Instant::now();
    let held = call_with_headers(
        &app.router,
        "GET",
        &stack,
        None,
        &[("if-none-match", &etag), ("prefer", "wait=1")],
    )
    .await;
    assert_eq!(held.status.as_u16(), 304, "{}", held.text);
    assert_eq!(held.headers["preference-applied"], "wait=1");
    assert!(started.elapsed() >= Duration::from_millis(950));

    // Changed while held (an update): answered with the changed stack long before the wait is over.
    let router = app.router.clone();
    let waiting = tokio::spawn({
        let (stack, etag) = (stack.clone(), etag.clone());
        async move {
            let started = std::time::Instant::now();
            let answer = call_with_headers(
                &router,
                "GET",
                &stack,
                None,
                &[("if-none-match", &etag), ("prefer", "wait=8")],
            )
            .await;
            (answer, started.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let update = call(
        &app.router,
        "PUT",
        &stack,
        Some(stack_body(&["hv1", "hv2"]).to_string()),
        None,
    )
    .await;
    assert_eq!(update.status.as_u16(), 200, "{}", update.text);
    let (answer, waited) = waiting.await.unwrap();
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    assert_ne!(answer.headers["etag"].to_str().unwrap(), etag);
    assert!(answer.json["properties"]["provisioningState"].is_string());
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    poll_async(&app, &status_url_of(&update)).await;
}

fn status_url_of(answer: &Answer) -> String {
    answer.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned()
}

//! Two servers on one store, as two replicas on one database: a `Location` handed out by one is answered by the
//! other (deployment deletes and what-ifs, bulk deletes), and a bulk delete whose server stopped before it ended
//! reads as failed on the others once its claim expires.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use cairn_store::{NewOperationResult, OperationResultState, Timestamp};
use common::{TestApp, call};
use serde_json::json;

const SUB_ID: &str = "00000000-0000-0000-0000-000000000003";
const V: &str = "api-version=2025-04-01";

fn local_path(url: &str) -> String {
    url.strip_prefix("http://cairn.test")
        .unwrap_or_else(|| panic!("{url} is not on this server"))
        .to_owned()
}

#[tokio::test]
async fn a_location_from_one_replica_is_answered_by_another() {
    let a = TestApp::new().await;
    let b = a.replica();
    let group = format!("/subscriptions/{SUB_ID}/resourcegroups/shared");
    let created = call(
        &a.router,
        "PUT",
        &format!("{group}?{V}"),
        Some(json!({"location": "westus"}).to_string()),
        None,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let path = format!("{group}/providers/Microsoft.Resources/deployments/d");
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0", "resources": [],
        "outputs": {"o": {"type": "string", "value": "x"}}
    });
    let body = json!({"properties": {"mode": "Incremental", "template": template}}).to_string();

    // What-if through A, its result polled through B.
    let what_if = call(
        &a.router,
        "POST",
        &format!("{path}/whatIf?{V}"),
        Some(body.clone()),
        None,
    )
    .await;
    assert_eq!(what_if.status, StatusCode::ACCEPTED, "{}", what_if.text);
    let location = what_if.headers["location"].to_str().unwrap().to_owned();
    let result = call(&b.router, "GET", &local_path(&location), None, None).await;
    assert_eq!(result.status, StatusCode::OK, "{}", result.text);
    assert_eq!(result.json["status"], "Succeeded", "{}", result.text);

    // A deployment through A, deleted through A, the delete's Location polled through B.
    let put = call(&a.router, "PUT", &format!("{path}?{V}"), Some(body), None).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    for _ in 0..200 {
        let got = call(&b.router, "GET", &format!("{path}?{V}"), None, None).await;
        if got.json["properties"]["provisioningState"] == "Succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deleted = call(&a.router, "DELETE", &format!("{path}?{V}"), None, None).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED, "{}", deleted.text);
    let location = deleted.headers["location"].to_str().unwrap().to_owned();
    let done = call(&b.router, "GET", &local_path(&location), None, None).await;
    assert_eq!(done.status, StatusCode::NO_CONTENT, "{}", done.text);

    // Under another subscription the id is unknown.
    let elsewhere = local_path(&location).replace(SUB_ID, "00000000-0000-0000-0000-0000000000ff");
    let other = call(&b.router, "GET", &elsewhere, None, None).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.text);
}

#[tokio::test]
async fn a_bulk_delete_whose_server_stopped_reads_failed_everywhere() {
    let a = TestApp::new().await;
    let b = a.replica();
    let now = Timestamp::now();
    let running = |id: &str, claim_left: Duration| NewOperationResult {
        id: id.to_owned(),
        subscription: SUB_ID.to_owned(),
        state: OperationResultState::Running {
            owner: "a-server-that-stopped".into(),
            owner_expires_at: now.saturating_add(claim_left),
        },
        expires_at: now.saturating_add(Duration::from_secs(3600)),
    };
    a.store
        .put_operation_result(running("bulkdelete-live", Duration::from_secs(600)), now)
        .await
        .unwrap();
    a.store
        .put_operation_result(running("bulkdelete-orphan", Duration::ZERO), now)
        .await
        .unwrap();
    let status = |id: &str| {
        format!(
            "/subscriptions/{SUB_ID}/providers/Microsoft.Resources/bulkDelete/operationStatuses/{id}?api-version=2024-03-01"
        )
    };
    let result = |id: &str| format!("/subscriptions/{SUB_ID}/operationresults/{id}?{V}");

    let live = call(&b.router, "GET", &status("bulkdelete-live"), None, None).await;
    assert_eq!(live.json["status"], "Running", "{}", live.text);
    let live = call(&b.router, "GET", &result("bulkdelete-live"), None, None).await;
    assert_eq!(live.status, StatusCode::ACCEPTED, "{}", live.text);

    let orphan = call(&b.router, "GET", &status("bulkdelete-orphan"), None, None).await;
    assert_eq!(orphan.json["status"], "Failed", "{}", orphan.text);
    assert_eq!(
        orphan.json["error"]["code"], "OperationInterrupted",
        "{}",
        orphan.text
    );
    let orphan = call(&b.router, "GET", &result("bulkdelete-orphan"), None, None).await;
    assert_eq!(orphan.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(orphan.json["error"]["code"], "OperationInterrupted");
}

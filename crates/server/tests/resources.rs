//! Individual resources through the engine's providers: the local Key Vault (vaults and versioned secrets) over
//! the ARM API, with secret values accepted on PUT and never returned by the management plane.

mod common;

use common::*;
use serde_json::json;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_vault_vaults_and_secrets() {
    let app = TestApp::new().await;
    let rg = format!("{SUB}/resourcegroups/kv?api-version=2025-04-01");
    let answer = call(
        &app.router,
        "PUT",
        &rg,
        Some(json!({ "location": "local" }).to_string()),
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);

    let vault = format!("{SUB}/resourceGroups/kv/providers/Microsoft.KeyVault/vaults/kv1");
    let body = json!({ "location": "local", "properties": { "tenantId": "00000000-0000-0000-0000-000000000000",
                       "sku": { "family": "A", "name": "standard" } } });
    let answer = call(
        &app.router,
        "PUT",
        &format!("{vault}?api-version=2023-07-01"),
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.text);
    assert_eq!(answer.json["name"], "kv1");

    let secret = format!("{vault}/secrets/token?api-version=2023-07-01");
    let canary = "server-secret-canary-51aa";
    let answer = call(
        &app.router,
        "PUT",
        &secret,
        Some(json!({ "properties": { "value": canary } }).to_string()),
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);
    assert!(
        !answer.text.contains(canary),
        "the PUT response echoes the secret: {}",
        answer.text
    );
    let answer = call(&app.router, "GET", &secret, None, None).await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    assert!(
        !answer.text.contains(canary),
        "GET returns the secret value: {}",
        answer.text
    );
    let answer = call(&app.router, "HEAD", &secret, None, None).await;
    assert_eq!(answer.status.as_u16(), 204);

    let answer = call(
        &app.router,
        "DELETE",
        &format!("{vault}?api-version=2023-07-01"),
        None,
        None,
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);
    let answer = call(
        &app.router,
        "GET",
        &format!("{vault}?api-version=2023-07-01"),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 404, "{}", answer.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_without_a_provider_are_refused() {
    let app = TestApp::new().await;
    let id = format!(
        "{SUB}/resourceGroups/kv/providers/Microsoft.Storage/storageAccounts/st?api-version=2023-01-01"
    );
    let answer = call(&app.router, "PUT", &id, Some("{}".into()), None).await;
    assert_eq!(answer.status.as_u16(), 400);
    assert_eq!(answer.json["error"]["code"], "NoRegisteredProviderFound");
    assert!(
        answer.text.contains("Microsoft.Storage/storageAccounts"),
        "{}",
        answer.text
    );
    let answer = call(&app.router, "GET", &id, None, None).await;
    assert_eq!(answer.status.as_u16(), 404);
}

//! A scoped token is a boundary: every scope a request touches, not just its URL, is checked against the token's
//! scopes. One table of cases over the API: each cross-scope template feature (nested deployments into another
//! subscription or resource group, `listValue()`/`reference()` of another scope, Key Vault parameter references,
//! template specs through `templateLink`, a stack's deployment, bulk deletes of what another scope's stack manages)
//! and each route outside the token's scope. The same requests with an unscoped token succeed, so every refusal is
//! the token's doing.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const S1: &str = "/subscriptions/11111111-1111-1111-1111-111111111111";
const S2: &str = "/subscriptions/22222222-2222-2222-2222-222222222222";
const SUB2_ID: &str = "22222222-2222-2222-2222-222222222222";
const DV: &str = "api-version=2025-04-01";
const KV: &str = "api-version=2023-07-01";
const SV: &str = "api-version=2025-07-01";
const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
/// Subscription 2's secret: no response, record or store byte a scoped caller of subscription 1 reaches may hold it.
const OTHER_SECRET: &str = "subscription-two-secret-7d41c9";

const ADMIN: &str = "Bearer admin-token";
const SUB1: &str = "Bearer sub1-token";
const RG_A: &str = "Bearer rga-token";

fn tokens() -> String {
    format!("admin-token\nsub1-token {S1}\nrga-token {S1}/resourceGroups/rgA\n")
}

fn vault2() -> String {
    format!("{S2}/resourceGroups/rg2/providers/Microsoft.KeyVault/vaults/kv2")
}

fn spec_version2() -> String {
    format!(
        "{S2}/resourceGroups/rg2/providers/Microsoft.Resources/templateSpecs/shared/versions/1.0"
    )
}

fn path_of(url: &str) -> String {
    url.strip_prefix("http://cairn.test")
        .unwrap_or(url)
        .to_owned()
}

async fn ok(app: &TestApp, method: &str, path: &str, body: Value) {
    let answer = call(
        &app.router,
        method,
        path,
        Some(body.to_string()),
        Some(ADMIN),
    )
    .await;
    assert!(
        answer.status.is_success(),
        "{method} {path}: {}",
        answer.text
    );
}

/// Two subscriptions: 1 with groups rgA and rgB, 2 with group rg2 holding a vault with a secret, a template spec,
/// and a stack managing a file.
async fn world(root: &str) -> TestApp {
    let app = TestApp::with_tokens(&tokens()).await;
    for group in [
        format!("{S1}/resourcegroups/rgA"),
        format!("{S1}/resourcegroups/rgB"),
        format!("{S2}/resourcegroups/rg2"),
    ] {
        ok(
            &app,
            "PUT",
            &format!("{group}?{DV}"),
            json!({"location": "local"}),
        )
        .await;
    }
    ok(
        &app,
        "PUT",
        &format!("{}?{KV}", vault2()),
        json!({"location": "local", "properties": {"sku": {"family": "A", "name": "standard"}}}),
    )
    .await;
    ok(
        &app,
        "PUT",
        &format!("{}/secrets/s?{KV}", vault2()),
        json!({"properties": {"value": OTHER_SECRET}}),
    )
    .await;
    let spec_template = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": [],
        "outputs": {"from": {"type": "string", "value": "subscription two"}}
    });
    ok(
        &app,
        "PUT",
        &format!(
            "{S2}/resourceGroups/rg2/providers/Microsoft.Resources/templateSpecs/shared?api-version=2022-02-01"
        ),
        json!({"location": "local", "properties": {}}),
    )
    .await;
    ok(
        &app,
        "PUT",
        &format!("{}?api-version=2022-02-01", spec_version2()),
        json!({"location": "local", "properties": {"mainTemplate": spec_template}}),
    )
    .await;
    let stack = format!(
        "{S2}/resourceGroups/rg2/providers/Microsoft.Resources/deploymentStacks/files?{SV}"
    );
    let put = call(
        &app.router,
        "PUT",
        &stack,
        Some(file_stack(root).to_string()),
        Some(ADMIN),
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let done = poll(&app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done:#}");
    app
}

fn file_stack(root: &str) -> Value {
    json!({"properties": {
        "template": {
            "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
            "extensions": {"local": {"name": "Local", "version": "1.0.0",
                                     "config": {"rootDirectory": {"type": "string"}}}},
            "resources": {"file": {"extension": "local", "type": "File",
                                   "properties": {"path": "owned.txt", "content": "subscription two's file"}}}
        },
        "extensionConfigs": {"local": {"rootDirectory": {"value": root}}},
        "actionOnUnmanage": {"resources": "delete"},
        "denySettings": {"mode": "none"}
    }})
}

async fn poll(app: &TestApp, url: &str) -> Value {
    for _ in 0..400 {
        let answer = call(&app.router, "GET", &path_of(url), None, Some(ADMIN)).await;
        assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
        let status = answer.json["status"].as_str().unwrap_or_default();
        if !["Running", "Accepted", "InProgress"].contains(&status) {
            return answer.json;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the operation at {url} did not finish");
}

/// The status an admin's GET of the vault `name` in `group` answers (200 or 404).
async fn vault_status(app: &TestApp, group: &str, name: &str) -> u16 {
    let got = call(
        &app.router,
        "GET",
        &format!("{group}/providers/Microsoft.KeyVault/vaults/{name}?{KV}"),
        None,
        Some(ADMIN),
    )
    .await;
    got.status.as_u16()
}

/// An admin's deployment PUT at `path`, polled until it ends `Succeeded`.
async fn deploy_as_admin(app: &TestApp, path: &str, body: Value) {
    let put = call(
        &app.router,
        "PUT",
        path,
        Some(body.to_string()),
        Some(ADMIN),
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let done = poll(app, put.headers["azure-asyncoperation"].to_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done:#}");
}

/// A bulk delete of the file subscription two's stack manages, with the caller's own Local config.
fn owned_file_entry(root: &str) -> Value {
    json!({"resources": [{
        "extension": {"name": "Local", "version": "1.0.0", "config": {"rootDirectory": {"value": root}}},
        "type": "File", "apiVersion": "1.0.0", "identifiers": {"path": "owned.txt"}
    }]})
}

fn template(resources: Value, outputs: Value) -> Value {
    json!({"$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": resources, "outputs": outputs})
}

fn deployment(template: Value, parameters: Value) -> Value {
    json!({"properties": {"mode": "Incremental", "template": template, "parameters": parameters}})
}

/// A nested deployment (into `subscription`/`group`) that creates the vault `name`.
fn nested_vault(subscription: Option<&str>, group: &str, name: &str) -> Value {
    let mut nested = json!({
        "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "jump",
        "resourceGroup": group,
        "properties": {"mode": "Incremental", "template": template(json!([{
            "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": name,
            "location": "local", "properties": {"sku": {"family": "A", "name": "standard"}}
        }]), json!({}))}
    });
    if let Some(subscription) = subscription {
        nested["subscriptionId"] = json!(subscription);
    }
    nested
}

fn cross_subscription_vault(name: &str) -> Value {
    template(json!([nested_vault(Some(SUB2_ID), "rg2", name)]), json!({}))
}

/// What a case must answer.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// 403 `AuthorizationFailed` at once, naming the scope.
    Refused,
    /// Accepted, then the deployment ends `Failed` with `AuthorizationFailed` (the scope is known only at run time).
    FailsWhenRun,
    /// 200 with every entry `failed` with `AuthorizationFailed` (bulk delete).
    EveryEntryRefused,
    /// The stack operation ends failed with `AuthorizationFailed`.
    StackFails,
}

struct Case {
    name: &'static str,
    token: &'static str,
    method: &'static str,
    path: String,
    body: Option<Value>,
    expect: Expect,
    /// A part of the refused scope the error must name.
    names: String,
}

fn deploy_path(scope: &str, name: &str) -> String {
    format!("{scope}/providers/Microsoft.Resources/deployments/{name}?{DV}")
}

fn cases(root: &str) -> Vec<Case> {
    let rg_a = format!("{S1}/resourceGroups/rgA");
    let secret_id = format!("{}/secrets/s", vault2());
    vec![
        Case {
            name: "nested deployment into another subscription",
            token: SUB1,
            method: "PUT",
            path: deploy_path(&rg_a, "nested-sub"),
            body: Some(deployment(cross_subscription_vault("kv-evil"), json!({}))),
            expect: Expect::Refused,
            names: SUB2_ID.into(),
        },
        Case {
            name: "nested deployment into another resource group",
            token: RG_A,
            method: "PUT",
            path: deploy_path(&rg_a, "nested-rg"),
            body: Some(deployment(
                template(json!([nested_vault(None, "rgB", "kv-evil-b")]), json!({})),
                json!({}),
            )),
            expect: Expect::Refused,
            names: "rgB".into(),
        },
        Case {
            name: "validate of a nested deployment into another subscription",
            token: SUB1,
            method: "POST",
            path: format!(
                "{rg_a}/providers/Microsoft.Resources/deployments/v/validate?{DV}"
            ),
            body: Some(deployment(cross_subscription_vault("kv-evil"), json!({}))),
            expect: Expect::Refused,
            names: SUB2_ID.into(),
        },
        Case {
            name: "listValue() of another subscription's secret",
            token: SUB1,
            method: "PUT",
            path: deploy_path(&rg_a, "list-other"),
            body: Some(deployment(
                template(
                    json!([]),
                    json!({"leak": {"type": "string",
                                    "value": format!("[listValue('{secret_id}', '2023-07-01').value]")}}),
                ),
                json!({}),
            )),
            expect: Expect::FailsWhenRun,
            names: SUB2_ID.into(),
        },
        Case {
            name: "reference() of another subscription's vault",
            token: SUB1,
            method: "PUT",
            path: deploy_path(&rg_a, "reference-other"),
            body: Some(deployment(
                template(
                    json!([]),
                    json!({"seen": {"type": "object",
                                    "value": format!("[reference('{}', '2023-07-01', 'Full')]", vault2())}}),
                ),
                json!({}),
            )),
            expect: Expect::FailsWhenRun,
            names: SUB2_ID.into(),
        },
        Case {
            name: "Key Vault parameter reference to another subscription's vault",
            token: SUB1,
            method: "PUT",
            path: deploy_path(&rg_a, "kv-reference"),
            body: Some(deployment(
                json!({"$schema": SCHEMA, "contentVersion": "1.0.0.0",
                       "parameters": {"p": {"type": "securestring"}}, "resources": [],
                       "outputs": {"n": {"type": "int", "value": "[length(parameters('p'))]"}}}),
                json!({"p": {"reference": {"keyVault": {"id": vault2()}, "secretName": "s"}}}),
            )),
            expect: Expect::Refused,
            names: SUB2_ID.into(),
        },
        Case {
            name: "template spec of another subscription through templateLink",
            token: SUB1,
            method: "PUT",
            path: deploy_path(&rg_a, "spec-other"),
            body: Some(json!({"properties": {"mode": "Incremental",
                                             "templateLink": {"id": spec_version2()}}})),
            expect: Expect::Refused,
            names: SUB2_ID.into(),
        },
        Case {
            name: "what-if of another subscription's template spec",
            token: SUB1,
            method: "POST",
            path: format!(
                "{rg_a}/providers/Microsoft.Resources/deployments/w/whatIf?{DV}"
            ),
            body: Some(json!({"properties": {"mode": "Incremental",
                                             "templateLink": {"id": spec_version2()}}})),
            expect: Expect::Refused,
            names: SUB2_ID.into(),
        },
        Case {
            name: "a nested deployment's template spec in another subscription",
            token: SUB1,
            method: "PUT",
            path: deploy_path(&rg_a, "nested-spec"),
            body: Some(deployment(
                template(
                    json!([{"type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01",
                            "name": "linked",
                            "properties": {"mode": "Incremental",
                                           "templateLink": {"id": spec_version2()}}}]),
                    json!({}),
                ),
                json!({}),
            )),
            expect: Expect::FailsWhenRun,
            names: SUB2_ID.into(),
        },
        Case {
            name: "a stack whose deployment reaches another subscription",
            token: SUB1,
            method: "PUT",
            path: format!(
                "{rg_a}/providers/Microsoft.Resources/deploymentStacks/reach?{SV}"
            ),
            body: Some(json!({"properties": {
                "template": cross_subscription_vault("kv-evil-stack"),
                "actionOnUnmanage": {"resources": "delete"},
                "denySettings": {"mode": "none"}
            }})),
            expect: Expect::StackFails,
            names: SUB2_ID.into(),
        },
        Case {
            name: "bulk delete of a file another subscription's stack manages",
            token: SUB1,
            method: "POST",
            path: format!("{S1}/providers/Microsoft.Resources/bulkDelete?{DV}"),
            body: Some(owned_file_entry(root)),
            expect: Expect::EveryEntryRefused,
            names: SUB2_ID.into(),
        },
    ]
    .into_iter()
    .chain(route_cases())
    .collect()
}

/// Every route, addressed outside the token's scope: refused by the URL alone.
fn route_cases() -> Vec<Case> {
    let rg_b = format!("{S1}/resourceGroups/rgB");
    let routes: Vec<(&'static str, &'static str, String, Option<Value>)> = vec![
        (
            "group PUT",
            "PUT",
            format!("{rg_b}?{DV}"),
            Some(json!({"location": "local"})),
        ),
        ("group GET", "GET", format!("{rg_b}?{DV}"), None),
        ("group DELETE", "DELETE", format!("{rg_b}?{DV}"), None),
        (
            "groups LIST",
            "GET",
            format!("{S1}/resourcegroups?{DV}"),
            None,
        ),
        (
            "deployment PUT",
            "PUT",
            deploy_path(&rg_b, "d"),
            Some(deployment(template(json!([]), json!({})), json!({}))),
        ),
        ("deployment GET", "GET", deploy_path(&rg_b, "d"), None),
        (
            "deployments LIST",
            "GET",
            format!("{rg_b}/providers/Microsoft.Resources/deployments?{DV}"),
            None,
        ),
        (
            "deployment operations",
            "GET",
            format!("{rg_b}/providers/Microsoft.Resources/deployments/d/operations?{DV}"),
            None,
        ),
        (
            "deployment cancel",
            "POST",
            format!("{rg_b}/providers/Microsoft.Resources/deployments/d/cancel?{DV}"),
            None,
        ),
        ("deployment DELETE", "DELETE", deploy_path(&rg_b, "d"), None),
        (
            "vault PUT",
            "PUT",
            format!("{rg_b}/providers/Microsoft.KeyVault/vaults/v?{KV}"),
            Some(json!({"location": "local"})),
        ),
        (
            "secret GET",
            "GET",
            format!("{rg_b}/providers/Microsoft.KeyVault/vaults/v/secrets/s?{KV}"),
            None,
        ),
        (
            "template spec PUT",
            "PUT",
            format!("{rg_b}/providers/Microsoft.Resources/templateSpecs/t?api-version=2022-02-01"),
            Some(json!({"location": "local"})),
        ),
        (
            "stack PUT",
            "PUT",
            format!("{rg_b}/providers/Microsoft.Resources/deploymentStacks/s?{SV}"),
            Some(json!({"properties": {}})),
        ),
        (
            "stack GET",
            "GET",
            format!("{rg_b}/providers/Microsoft.Resources/deploymentStacks/s?{SV}"),
            None,
        ),
        (
            "stack DELETE",
            "DELETE",
            format!("{rg_b}/providers/Microsoft.Resources/deploymentStacks/s?{SV}"),
            None,
        ),
        (
            "stack what-if PUT",
            "PUT",
            format!("{rg_b}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/w?{SV}"),
            Some(json!({"properties": {}})),
        ),
        (
            "stack drift",
            "POST",
            format!(
                "{rg_b}/providers/Microsoft.Resources/deploymentStacks/s/detectDrift?api-version=2025-10-01"
            ),
            Some(json!({})),
        ),
        (
            "bulk delete",
            "POST",
            format!("{S2}/providers/Microsoft.Resources/bulkDelete?{DV}"),
            Some(json!({"resources": []})),
        ),
    ];
    routes
        .into_iter()
        .map(|(name, method, path, body)| Case {
            name,
            token: RG_A,
            method,
            path,
            body,
            expect: Expect::Refused,
            names: String::new(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_token_reaches_nothing_outside_its_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let app = world(&root).await;
    let mut failures = Vec::new();
    for case in cases(&root) {
        let answer = call(
            &app.router,
            case.method,
            &case.path,
            case.body.as_ref().map(Value::to_string),
            Some(case.token),
        )
        .await;
        assert!(
            !answer.text.contains(OTHER_SECRET),
            "{}: the answer holds subscription two's secret: {}",
            case.name,
            answer.text
        );
        let verdict = match case.expect {
            Expect::Refused => {
                let refused = answer.status.as_u16() == 403
                    && answer.text.contains("AuthorizationFailed")
                    && answer.text.contains(&case.names);
                refused.then_some(()).ok_or(answer.text.clone())
            }
            Expect::FailsWhenRun => {
                if answer.status.as_u16() != 201 {
                    Err(answer.text.clone())
                } else {
                    let done = poll(
                        &app,
                        answer.headers["azure-asyncoperation"].to_str().unwrap(),
                    )
                    .await;
                    let record = call(&app.router, "GET", &case.path, None, Some(case.token)).await;
                    let text = format!("{done} {}", record.text);
                    assert!(!text.contains(OTHER_SECRET), "{}: {text}", case.name);
                    (done["status"] == "Failed"
                        && text.contains("AuthorizationFailed")
                        && text.contains(&case.names))
                    .then_some(())
                    .ok_or(text)
                }
            }
            Expect::StackFails => {
                if answer.status.as_u16() == 403 {
                    Ok(())
                } else if answer.status.as_u16() != 201 {
                    Err(answer.text.clone())
                } else {
                    let done = poll(
                        &app,
                        answer.headers["azure-asyncoperation"].to_str().unwrap(),
                    )
                    .await;
                    (done["status"] == "Failed" && done.to_string().contains("AuthorizationFailed"))
                        .then_some(())
                        .ok_or(done.to_string())
                }
            }
            Expect::EveryEntryRefused => {
                let entries = answer.json["value"].as_array().cloned().unwrap_or_default();
                (answer.status.as_u16() == 200
                    && !entries.is_empty()
                    && entries.iter().all(|e| {
                        e["status"]
                            .as_str()
                            .is_some_and(|s| s.eq_ignore_ascii_case("failed"))
                            && e.to_string().contains("AuthorizationFailed")
                    }))
                .then_some(())
                .ok_or(answer.text.clone())
            }
        };
        if let Err(text) = verdict {
            failures.push(format!("{} ({:?}): {text}", case.name, case.expect));
        }
    }
    assert!(
        failures.is_empty(),
        "not refused as expected:\n{}",
        failures.join("\n")
    );

    // Nothing was written in the other scopes, and subscription two's file is still there.
    let rg2 = format!("{S2}/resourceGroups/rg2");
    for vault in ["kv-evil", "kv-evil-stack"] {
        assert_eq!(
            vault_status(&app, &rg2, vault).await,
            404,
            "{vault} was created"
        );
    }
    let rg_b = format!("{S1}/resourceGroups/rgB");
    assert_eq!(
        vault_status(&app, &rg_b, "kv-evil-b").await,
        404,
        "kv-evil-b was created"
    );
    assert!(
        dir.path().join("owned.txt").exists(),
        "the other stack's file was deleted"
    );
    assert!(
        files_containing(dir.path(), OTHER_SECRET.as_bytes()).is_empty(),
        "subscription two's secret reached a file"
    );
}

/// The same requests from an unscoped token go through: the refusals above are the scoped token's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unscoped_token_reaches_every_scope() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let app = world(&root).await;
    let rg_a = format!("{S1}/resourceGroups/rgA");
    deploy_as_admin(
        &app,
        &deploy_path(&rg_a, "nested-sub"),
        deployment(cross_subscription_vault("kv-allowed"), json!({})),
    )
    .await;
    let rg2 = format!("{S2}/resourceGroups/rg2");
    assert_eq!(vault_status(&app, &rg2, "kv-allowed").await, 200);
    deploy_as_admin(
        &app,
        &deploy_path(&rg_a, "spec"),
        json!({"properties": {"mode": "Incremental", "templateLink": {"id": spec_version2()}}}),
    )
    .await;

    let answer = call(
        &app.router,
        "POST",
        &format!("{S1}/providers/Microsoft.Resources/bulkDelete?{DV}"),
        Some(owned_file_entry(&root).to_string()),
        Some(ADMIN),
    )
    .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    assert!(!dir.path().join("owned.txt").exists(), "{}", answer.text);
}

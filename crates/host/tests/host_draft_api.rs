//! REST-draft transport against a scripted extension, and the host API router.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use cairn_extension_contract::{ReferenceFlags, ReferenceId, ReferenceIdParts, codes};
use cairn_host::api::{HostApiOptions, router};
use cairn_host::operations::MemoryOperations;
use cairn_host::{
    CallContext, CreateOrUpdateRequest, ExtensionConfig, ExtensionKey, ResourceLocator,
};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

fn key() -> ExtensionKey {
    ExtensionKey::new(NAME, VERSION)
}

fn draft_resource(reference_id: &str, status: Option<&str>) -> Value {
    let mut body = json!({ "type": "application@v1", "properties": { "name": "web" }, "referenceId": reference_id });
    if let Some(status) = status {
        body["status"] = json!(status);
    }
    body
}

const DRAFT_ID: &str = "01-apps%3av1%3aweb";

#[tokio::test]
async fn draft_create_uses_reference_then_put_and_polls_location() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resources/reference"),
        vec![Reply::json(200, json!({ "referenceId": DRAFT_ID }))],
    );
    let operation = format!("{}/operations/op-1", fake.origin);
    fake.script(
        &route("PUT", &format!("resources/{DRAFT_ID}")),
        vec![
            Reply::empty(202)
                .header("location", &operation)
                .header("retry-after", "30"),
        ],
    );
    fake.script(
        "GET /operations/op-1",
        vec![
            Reply::json(200, json!({ "status": "Running" })),
            Reply::json(200, json!({ "status": "Succeeded" })),
        ],
    );
    fake.script(
        &route("POST", "resources/preview"),
        vec![Reply::json(200, draft_resource(DRAFT_ID, None))],
    );
    fake.script(
        &route("POST", &format!("resources/{DRAFT_ID}/getWithConfig")),
        vec![Reply::json(200, draft_resource(DRAFT_ID, None))],
    );
    let host = draft_host(&fake, fast_settings());
    let request = CreateOrUpdateRequest {
        resource_type: "application".into(),
        api_version: Some("v1".into()),
        properties: json!({ "name": "web" }),
        config: ExtensionConfig::from_value(json!({ "kubeConfig": "c2VjcmV0" })),
        config_id: None,
        known_identifiers: None,
    };
    let resource = host
        .create_or_update(&key(), request, &CallContext::default())
        .await
        .unwrap();
    assert_eq!(resource.identifiers, json!({ "referenceId": DRAFT_ID }));
    assert_eq!(resource.resource_type, "application");
    assert_eq!(resource.secret_config_keys, vec!["kubeConfig"]);
    let put = &fake.calls(&route("PUT", &format!("resources/{DRAFT_ID}")))[0];
    assert_eq!(
        put.json(),
        json!({ "type": "application@v1", "properties": { "name": "web" }, "config": { "kubeConfig": "c2VjcmV0" } })
    );
    assert_eq!(fake.calls("GET /operations/op-1").len(), 2);
    let get = &fake.calls(&route(
        "POST",
        &format!("resources/{DRAFT_ID}/getWithConfig"),
    ))[0];
    assert_eq!(get.json(), json!({ "kubeConfig": "c2VjcmV0" }));
}

#[tokio::test]
async fn draft_get_and_delete_pick_routes_by_flags() {
    let fake = FakeExtension::start().await;
    let self_contained = "00-graph%3Agroup%3A42";
    fake.script(
        &route("GET", &format!("resources/{self_contained}")),
        vec![Reply::json(200, draft_resource(self_contained, None))],
    );
    fake.script(
        &route("DELETE", &format!("resources/{self_contained}")),
        vec![Reply::empty(204)],
    );
    let operation = format!("{}/ext/ops/9", fake.origin);
    fake.script(
        &route("POST", &format!("resources/{DRAFT_ID}/deleteWithConfig")),
        vec![Reply::empty(202).header("location", &operation)],
    );
    fake.script(
        "GET /ext/ops/9",
        vec![Reply::json(
            200,
            json!({ "status": "Failed", "error": { "code": "Stuck", "message": "finalizer" } }),
        )],
    );
    let host = draft_host(&fake, fast_settings());
    let locator = |id: &str, config: Option<Value>| ResourceLocator {
        resource_type: "application".into(),
        api_version: Some("v1".into()),
        identifiers: json!({ "referenceId": id }),
        config: config.and_then(ExtensionConfig::from_value),
        config_id: None,
    };
    let found = host
        .get(
            &key(),
            &locator(self_contained, None),
            &CallContext::default(),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(!found.reference_id.needs_config());
    host.delete(
        &key(),
        &locator(self_contained, None),
        &CallContext::default(),
    )
    .await
    .unwrap();
    let error = host
        .delete(
            &key(),
            &locator(DRAFT_ID, Some(json!({ "kubeConfig": "x" }))),
            &CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "Stuck");
    assert_eq!(fake.calls("GET /ext/ops/9").len(), 1);
}

#[tokio::test]
async fn draft_location_outside_the_extension_is_refused() {
    let fake = FakeExtension::start().await;
    let id = "00-x";
    fake.script(
        &route("DELETE", &format!("resources/{id}")),
        vec![Reply::empty(202).header("location", "http://169.254.169.254/latest")],
    );
    let host = draft_host(&fake, fast_settings());
    let locator = ResourceLocator {
        resource_type: "application".into(),
        api_version: None,
        identifiers: json!({ "referenceId": id }),
        config: None,
        config_id: None,
    };
    let error = host
        .delete(&key(), &locator, &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.status(), error.code()),
        (502, codes::RESPONSE_AMBIGUOUS)
    );
    assert_eq!(fake.all_calls().len(), 1);
}

/// Seed 004: RELO "cannot be used with long-running resource delete operations". A draft extension that answers
/// delete with its resource still `Deleting` breaks its contract: the host says so with its own code and does
/// not poll (a v2 extension may do this; see `relo_delete_is_done_on_404` in `host_v2.rs`).
#[tokio::test]
async fn draft_delete_answered_with_relo_is_a_contract_violation() {
    let fake = FakeExtension::start().await;
    let id = "00-graph%3Agroup%3A7";
    fake.script(
        &route("DELETE", &format!("resources/{id}")),
        vec![Reply::json(200, draft_resource(id, Some("Deleting")))],
    );
    let host = draft_host(&fake, fast_settings());
    let locator = ResourceLocator {
        resource_type: "application".into(),
        api_version: Some("v1".into()),
        identifiers: json!({ "referenceId": id }),
        config: None,
        config_id: None,
    };
    let error = host
        .delete(&key(), &locator, &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.status(), error.code()),
        (502, codes::DELETE_RELO_NOT_ALLOWED)
    );
    assert_eq!(error.kind(), cairn_host::HostErrorKind::ContractViolation);
    assert_eq!(fake.all_calls().len(), 1, "a forbidden RELO is not polled");

    // A draft delete that answers 200 with a terminal status is a finished delete, as before.
    fake.script(
        &route("DELETE", &format!("resources/{id}")),
        vec![Reply::json(200, draft_resource(id, Some("Succeeded")))],
    );
    host.delete(&key(), &locator, &CallContext::default())
        .await
        .unwrap();
}

// ---- host API ----

fn cairn_id(needs_config: bool) -> ReferenceId {
    ReferenceIdParts {
        extension_name: NAME.into(),
        resource_type: "Acme.Queue/queues".into(),
        api_version: Some("2025-01-01".into()),
        config_id: Some("CFG".into()),
        identifiers: json!({ "name": "orders" }),
        needs_config,
    }
    .to_reference_id()
    .unwrap()
}

fn queue() -> Value {
    json!({ "type": "Acme.Queue/queues", "apiVersion": "2025-01-01", "identifiers": { "name": "orders" },
        "properties": { "name": "orders" }, "configId": "CFG" })
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "cairn.test:8443")
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |body| Body::from(body.to_string())))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn api(fake: &FakeExtension) -> axum::Router {
    let host = Arc::new(v2_host(fake, fast_settings(), None));
    axum::Router::new().nest("/extensibility", router(host, HostApiOptions::default()))
}

#[tokio::test]
async fn api_lists_and_gets_self_contained_resources() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue())],
    );
    let app = api(&fake);
    let (status, headers, body) = send(&app, "GET", "/extensibility/extensions", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.contains_key("x-ms-request-id"));
    assert_eq!(body["value"][0]["name"], json!(NAME));

    let id = cairn_id(false);
    let (status, _, body) = send(
        &app,
        "GET",
        &format!("/extensibility/extensions/{NAME}/{VERSION}/resources/{id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["referenceId"], json!(id.to_string()));
    assert_eq!(
        fake.calls(&route("POST", "resource/get"))[0].json()["identifiers"],
        json!({ "name": "orders" })
    );
}

#[tokio::test]
async fn api_requires_the_with_config_routes_for_01_ids() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue())],
    );
    let app = api(&fake);
    let id = cairn_id(true);
    let base = format!("/extensibility/extensions/{NAME}/{VERSION}/resources/{id}");
    let (status, _, body) = send(&app, "GET", &base, None).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(codes::INVALID_REFERENCE_ID))
    );
    assert!(fake.all_calls().is_empty());

    let (status, _, _) = send(
        &app,
        "POST",
        &format!("{base}/getWithConfig"),
        Some(json!({ "kubeconfig": "abc" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        fake.calls(&route("POST", "resource/get"))[0].json()["config"],
        json!({ "kubeconfig": "abc" })
    );

    let (status, _, body) = send(
        &app,
        "GET",
        &format!(
            "/extensibility/extensions/Other/{VERSION}/resources/{}",
            cairn_id(false)
        ),
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(codes::INVALID_REFERENCE_ID))
    );
}

#[tokio::test]
async fn api_delete_answers_202_and_relays_polls() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(202, json!({ "status": "Running", "retryAfterSeconds": 7, "operationHandle": { "op": "d-1" } }))],
    );
    fake.script(
        &route("POST", "longRunningOperation/get"),
        vec![
            Reply::json(
                200,
                json!({ "status": "Running", "operationHandle": { "op": "d-2" } }),
            ),
            Reply::json(200, json!({ "status": "Succeeded" })),
        ],
    );
    let app = api(&fake);
    let id = cairn_id(true);
    let uri = format!("/extensibility/extensions/{NAME}/{VERSION}/resources/{id}/deleteWithConfig");
    let (status, headers, _) = send(&app, "POST", &uri, Some(json!({ "kubeconfig": "abc" }))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let location = headers["location"].to_str().unwrap().to_owned();
    let prefix = format!("http://cairn.test:8443/extensibility/{NAME}/{VERSION}/operations/");
    assert!(
        location.starts_with(&prefix),
        "seed 004: the extension's name and version lead the host's path: {location}"
    );
    assert_eq!(
        headers["retry-after"], "1",
        "7 s clamped to the test maximum of 10 ms, rounded up"
    );

    let path = location.trim_start_matches("http://cairn.test:8443");
    let (status, _, body) = send(&app, "GET", path, None).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "status": "Running" }))
    );
    // The earlier shape, `/extensions/{name}/{version}/operations/{id}`, still answers.
    let alias = path.replace("/extensibility/", "/extensibility/extensions/");
    let (status, _, body) = send(&app, "GET", &alias, None).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "status": "Succeeded" }))
    );
    let polls: Vec<Value> = fake
        .calls(&route("POST", "longRunningOperation/get"))
        .iter()
        .map(Recorded::json)
        .collect();
    assert_eq!(polls, vec![json!({ "op": "d-1" }), json!({ "op": "d-2" })]);
    let (status, _, body) = send(&app, "GET", path, None).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!(codes::OPERATION_NOT_FOUND))
    );
}

#[tokio::test]
async fn api_delete_relo_failure_is_reported_on_poll() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(
            200,
            json!({ "type": "Acme.Queue/queues",
        "identifiers": { "name": "orders" }, "properties": {}, "status": "Deleting" }),
        )],
    );
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(
            200,
            json!({ "type": "Acme.Queue/queues",
        "identifiers": { "name": "orders" }, "properties": {}, "status": "Failed",
        "error": { "code": "Finalizer", "message": "stuck" } }),
        )],
    );
    let app = api(&fake);
    let uri = format!(
        "/extensibility/extensions/{NAME}/{VERSION}/resources/{}",
        cairn_id(false)
    );
    let (status, headers, _) = send(&app, "DELETE", &uri, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let location = headers["location"]
        .to_str()
        .unwrap()
        .trim_start_matches("http://cairn.test:8443")
        .to_owned();
    let (status, _, body) = send(&app, "GET", &location, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({ "status": "Failed", "error": { "code": "Finalizer", "message": "stuck" } })
    );
}

#[tokio::test]
async fn api_errors_are_arm_shaped() {
    let fake = FakeExtension::start().await;
    let app = api(&fake);
    let id = ReferenceId::new(ReferenceFlags::SelfContained, "foreign").unwrap();
    let cases = [
        (
            format!("/extensibility/extensions/{NAME}/{VERSION}/resources/{id}"),
            StatusCode::BAD_REQUEST,
            codes::INVALID_REFERENCE_ID,
        ),
        (
            format!("/extensibility/extensions/{NAME}/{VERSION}/resources/02-x"),
            StatusCode::BAD_REQUEST,
            codes::INVALID_REFERENCE_ID,
        ),
        (
            format!(
                "/extensibility/extensions/{NAME}/9.0.0/resources/{}",
                cairn_id(false)
            ),
            StatusCode::NOT_FOUND,
            codes::EXTENSION_NOT_REGISTERED,
        ),
    ];
    for (uri, expected_status, expected_code) in cases {
        let (status, _, body) = send(&app, "GET", &uri, None).await;
        assert_eq!(status, expected_status, "{uri}");
        assert_eq!(body["error"]["code"], json!(expected_code), "{uri}");
        assert!(body["error"]["message"].is_string());
    }
}

/// Pending operations live in the store the router is given, not in the router: a second router (a restarted host)
/// over the same store answers the first one's `Location`, and the extension name in the path must match.
#[tokio::test]
async fn api_pending_operations_live_in_the_given_store() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(
            202,
            json!({ "status": "Running", "operationHandle": { "op": "d-1" } }),
        )],
    );
    fake.script(
        &route("POST", "longRunningOperation/get"),
        vec![Reply::json(200, json!({ "status": "Succeeded" }))],
    );
    let store = Arc::new(MemoryOperations::default());
    let with_store = |fake: &FakeExtension| {
        let host = Arc::new(v2_host(fake, fast_settings(), None));
        axum::Router::new().nest(
            "/extensibility",
            router(
                host,
                HostApiOptions {
                    operations: Some(store.clone()),
                    ..HostApiOptions::default()
                },
            ),
        )
    };
    let first = with_store(&fake);
    let uri = format!(
        "/extensibility/extensions/{NAME}/{VERSION}/resources/{}",
        cairn_id(false)
    );
    let (status, headers, _) = send(&first, "DELETE", &uri, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let path = headers["location"]
        .to_str()
        .unwrap()
        .trim_start_matches("http://cairn.test:8443")
        .to_owned();
    drop(first);

    let second = with_store(&fake);
    let (status, _, body) = send(&second, "GET", &path.replace(NAME, "Other"), None).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!(codes::OPERATION_NOT_FOUND)),
        "another extension's path does not reach the operation"
    );
    let (status, _, body) = send(&second, "GET", &path, None).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "status": "Succeeded" }))
    );
    assert_eq!(
        fake.calls(&route("POST", "longRunningOperation/get"))[0].json(),
        json!({ "op": "d-1" })
    );
}

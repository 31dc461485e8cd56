//! The ARM API without sockets (`tower::ServiceExt::oneshot`): authentication, request ids, api-version
//! checks, the request-size limit, resource groups and calculateTemplateHash.

mod common;

use axum::http::StatusCode;
use cairn_arm::api_version::ApiKind;
use common::{TestApp, call};
use serde_json::{Value, json};

const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/app-rg";
const V: &str = "api-version=2025-04-01";

#[tokio::test]
async fn health_needs_no_token_and_everything_else_does() {
    let app = TestApp::with_tokens("secret-token\n").await;
    let health = call(&app.router, "GET", "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.json["status"], "Healthy");

    let missing = call(&app.router, "GET", &format!("{RG}?{V}"), None, None).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.json["error"]["code"], "AuthenticationFailed");
    assert!(missing.headers.contains_key("www-authenticate"));
    assert!(missing.headers.contains_key("x-ms-request-id"));
    assert!(missing.headers.contains_key("x-ms-correlation-request-id"));

    let wrong = call(
        &app.router,
        "GET",
        &format!("{RG}?{V}"),
        None,
        Some("Bearer nope"),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong.json["error"]["code"], "InvalidAuthenticationToken");
    assert!(!wrong.text.contains("nope"));

    let right = call(
        &app.router,
        "GET",
        &format!("{RG}?{V}"),
        None,
        Some("Bearer secret-token"),
    )
    .await;
    assert_eq!(right.status, StatusCode::NOT_FOUND);
    assert_eq!(right.json["error"]["code"], "ResourceGroupNotFound");
}

#[tokio::test]
async fn scoped_tokens_get_403_outside_their_scope() {
    let app =
        TestApp::with_tokens("scoped /subscriptions/00000000-0000-0000-0000-000000000001\n").await;
    let inside = call(
        &app.router,
        "GET",
        &format!("{RG}?{V}"),
        None,
        Some("Bearer scoped"),
    )
    .await;
    assert_eq!(inside.status, StatusCode::NOT_FOUND);
    let outside = call(
        &app.router,
        "GET",
        &format!("/subscriptions/other/resourcegroups/x?{V}"),
        None,
        Some("Bearer scoped"),
    )
    .await;
    assert_eq!(outside.status, StatusCode::FORBIDDEN);
    assert_eq!(outside.json["error"]["code"], "AuthorizationFailed");
}

#[tokio::test]
async fn request_ids_are_generated_and_correlation_ids_echoed() {
    let app = TestApp::new().await;
    let response = common::call_with_headers(
        &app.router,
        "GET",
        &format!("{RG}?{V}"),
        None,
        &[
            ("x-ms-correlation-request-id", "corr-123"),
            ("x-ms-client-request-id", "client-9"),
        ],
    )
    .await;
    assert_eq!(response.headers["x-ms-correlation-request-id"], "corr-123");
    assert_eq!(response.headers["x-ms-client-request-id"], "client-9");
    let first = response.headers["x-ms-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let again = call(&app.router, "GET", &format!("{RG}?{V}"), None, None).await;
    assert_ne!(again.headers["x-ms-request-id"].to_str().unwrap(), first);
    assert_ne!(again.headers["x-ms-correlation-request-id"], "corr-123");
}

#[tokio::test]
async fn api_version_is_required_and_checked() {
    let app = TestApp::new().await;
    let missing = call(&app.router, "GET", RG, None, None).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.json["error"]["code"], "MissingApiVersionParameter");
    let invalid = call(
        &app.router,
        "GET",
        &format!("{RG}?api-version=1999-01-01"),
        None,
        None,
    )
    .await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST);
    assert_eq!(invalid.json["error"]["code"], "InvalidApiVersionParameter");
    // Every version the deployments API accepts reaches the handler.
    for version in ApiKind::Deployments.supported_versions() {
        let path = format!(
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Resources/deployments/d?api-version={version}"
        );
        let response = call(&app.router, "GET", &path, None, None).await;
        assert_ne!(
            response.json["error"]["code"], "InvalidApiVersionParameter",
            "{version}"
        );
    }
}

#[tokio::test]
async fn bodies_over_four_megabytes_get_413() {
    let app = TestApp::new().await;
    let big = "x".repeat(4 * 1024 * 1024 + 1);
    let body = format!("{{\"location\":\"westus\",\"tags\":{{\"t\":\"{big}\"}}}}");
    let response = call(
        &app.router,
        "PUT",
        &format!("{RG}?{V}"),
        Some(body.clone()),
        None,
    )
    .await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(response.json["error"]["code"], "RequestEntityTooLarge");
    // Without a declared length the body is cut off where it is read.
    let streamed = common::call_streamed(&app.router, "PUT", &format!("{RG}?{V}"), body).await;
    assert_eq!(streamed.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(streamed.json["error"]["code"], "RequestEntityTooLarge");
}

#[tokio::test]
async fn unknown_paths_and_methods_are_arm_errors() {
    let app = TestApp::new().await;
    let cases = [
        (
            "GET",
            "/nothing/here?api-version=2025-04-01",
            404,
            "NotFound",
        ),
        (
            "PATCH",
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Resources/deployments/d?api-version=2025-04-01",
            405,
            "MethodNotAllowed",
        ),
        (
            "GET",
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Storage/storageAccounts/sa?api-version=2023-01-01",
            404,
            "ResourceNotFound",
        ),
        (
            "PUT",
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Storage/storageAccounts/sa?api-version=2023-01-01",
            400,
            "NoRegisteredProviderFound",
        ),
        (
            "GET",
            "/subscriptions/s/operationresults/unknown?api-version=2025-04-01",
            404,
            "OperationNotFound",
        ),
    ];
    for (method, path, status, code) in cases {
        let response = call(&app.router, method, path, None, None).await;
        assert_eq!(response.status.as_u16(), status, "{method} {path}");
        assert_eq!(response.json["error"]["code"], code, "{method} {path}");
    }
}

#[tokio::test]
async fn resource_group_lifecycle() {
    let app = TestApp::new().await;
    let url = format!("{RG}?{V}");
    let put = |body: Value| call(&app.router, "PUT", &url, Some(body.to_string()), None);

    let created = put(json!({"location": "westus", "tags": {"env": "dev"}})).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(
        created.json,
        json!({"id": "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/app-rg", "name": "app-rg",
               "type": "Microsoft.Resources/resourceGroups", "location": "westus", "tags": {"env": "dev"},
               "properties": {"provisioningState": "Succeeded"}})
    );
    let updated = put(json!({"location": "West US", "tags": {"env": "prod"}})).await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(updated.json["tags"]["env"], "prod");
    let moved = put(json!({"location": "eastus"})).await;
    assert_eq!(moved.status, StatusCode::CONFLICT);
    assert_eq!(moved.json["error"]["code"], "InvalidResourceGroupLocation");
    let no_location = put(json!({"tags": {}})).await;
    assert_eq!(no_location.status, StatusCode::BAD_REQUEST);
    assert_eq!(no_location.json["error"]["code"], "InvalidRequestContent");

    // Paths match ignoring case.
    let upper = RG.to_uppercase().replace("API", "api");
    let got = call(&app.router, "GET", &format!("{upper}?{V}"), None, None).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json["name"], "app-rg");

    let head = call(&app.router, "HEAD", &format!("{RG}?{V}"), None, None).await;
    assert_eq!(head.status, StatusCode::NO_CONTENT);
    let patched = call(
        &app.router,
        "PATCH",
        &format!("{RG}?{V}"),
        Some(json!({"tags": {"team": "a"}}).to_string()),
        None,
    )
    .await;
    assert_eq!(patched.json["tags"], json!({"team": "a"}));

    let second = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/b-rg";
    let b = call(
        &app.router,
        "PUT",
        &format!("{second}?{V}"),
        Some(json!({"location": "westus"}).to_string()),
        None,
    )
    .await;
    assert_eq!(b.status, StatusCode::CREATED);
    let list = call(
        &app.router,
        "GET",
        &format!("/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups?{V}"),
        None,
        None,
    )
    .await;
    let names: Vec<&str> = list.json["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app-rg", "b-rg"]);
    let top = call(
        &app.router,
        "GET",
        &format!("/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups?{V}&$top=1"),
        None,
        None,
    )
    .await;
    assert_eq!(top.json["value"].as_array().unwrap().len(), 1);

    let deleted = call(&app.router, "DELETE", &format!("{RG}?{V}"), None, None).await;
    assert_eq!(deleted.status, StatusCode::OK);
    let gone = call(&app.router, "GET", &format!("{RG}?{V}"), None, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let head_gone = call(&app.router, "HEAD", &format!("{RG}?{V}"), None, None).await;
    assert_eq!(head_gone.status, StatusCode::NOT_FOUND);
    assert!(head_gone.text.is_empty());
    let delete_again = call(&app.router, "DELETE", &format!("{RG}?{V}"), None, None).await;
    assert_eq!(delete_again.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn resource_group_names_are_validated() {
    let app = TestApp::new().await;
    let bad = "/subscriptions/s/resourcegroups/bad%23name";
    let response = call(
        &app.router,
        "PUT",
        &format!("{bad}?{V}"),
        Some(json!({"location": "westus"}).to_string()),
        None,
    )
    .await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn template_hash_is_stable() {
    let app = TestApp::new().await;
    let path = "/providers/Microsoft.Resources/calculateTemplateHash?api-version=2025-04-01";
    let template = json!({"$schema": "x", "resources": [], "outputs": {"a": {"type": "string", "value": "b"}}});
    let first = call(&app.router, "POST", path, Some(template.to_string()), None).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.json["minifiedTemplate"],
        serde_json::to_string(&template).unwrap()
    );
    let spaced = serde_json::to_string_pretty(&template).unwrap();
    let second = call(&app.router, "POST", path, Some(spaced), None).await;
    assert_eq!(first.json["templateHash"], second.json["templateHash"]);
    let not_object = call(&app.router, "POST", path, Some("[1]".into()), None).await;
    assert_eq!(not_object.json["error"]["code"], "InvalidRequestContent");
}

#[tokio::test]
async fn subscriptions_exist_implicitly() {
    let app = TestApp::new().await;
    let sub = call(
        &app.router,
        "GET",
        "/subscriptions/abc?api-version=2022-12-01",
        None,
        None,
    )
    .await;
    assert_eq!(sub.status, StatusCode::OK);
    assert_eq!(sub.json["subscriptionId"], "abc");
}

#[tokio::test]
async fn the_extension_host_api_is_mounted_behind_authentication() {
    let app = TestApp::with_tokens("host-token\n").await;
    let path = "/providers/Cairn.Extensibility/extensions";
    let denied = call(&app.router, "GET", path, None, None).await;
    assert_eq!(denied.status, StatusCode::UNAUTHORIZED);
    let listed = call(&app.router, "GET", path, None, Some("Bearer host-token")).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert_eq!(listed.json["value"][0]["name"], "Local");
    assert!(listed.headers.contains_key("x-ms-correlation-request-id"));
}

#[test]
fn a_panicking_handler_answers_500_in_arm_shape() {
    let response = cairn_server::middleware::panic_response(Box::new("secret detail"));
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = response_body(response);
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["error"]["code"], "InternalServerError");
    assert!(!String::from_utf8_lossy(&body).contains("secret detail"));
}

fn response_body(response: axum::response::Response) -> Vec<u8> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
        .unwrap()
        .to_vec()
}

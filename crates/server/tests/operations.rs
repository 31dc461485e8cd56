//! What operators watch, without sockets: liveness and readiness answer without a token, readiness follows the
//! store, `/metrics` is authenticated like the API (or not, with `MetricsAuth::None`) and counts requests by
//! route template and status, never by the ids in their paths.

mod common;

use axum::http::StatusCode;
use cairn_server::{MetricsAuth, ServerOptions};
use common::{TestApp, call, call_with_headers};

const V: &str = "api-version=2025-04-01";
const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000001";

fn options(metrics_auth: MetricsAuth) -> ServerOptions {
    ServerOptions {
        retry_after_seconds: 0,
        metrics_auth,
        ..ServerOptions::default()
    }
}

#[tokio::test]
async fn readiness_needs_no_token_and_follows_the_store() {
    let app = TestApp::with_tokens("ops-token\n").await;
    let ready = call(&app.router, "GET", "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
    assert_eq!(ready.json["status"], "Ready");
    let health = call(&app.router, "GET", "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);

    app.store.close().await.unwrap();
    let not_ready = call(&app.router, "GET", "/readyz", None, None).await;
    assert_eq!(not_ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(not_ready.json["error"]["code"], "StoreUnavailable");
    let message = not_ready.json["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("The store is not ready"), "{message}");
    // Liveness does not depend on the store: the process is up.
    let health = call(&app.router, "GET", "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
}

#[tokio::test]
async fn metrics_are_authenticated_like_the_api_by_default() {
    let tokens = "ops-token\nscoped-token /subscriptions/00000000-0000-0000-0000-000000000001\n";
    let app = TestApp::with_options(Some(tokens), options(MetricsAuth::Api)).await;
    let anonymous = call(&app.router, "GET", "/metrics", None, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.json["error"]["code"], "AuthenticationFailed");
    // Metrics cover every subscription: a token limited to one may not read them.
    let scoped = call(
        &app.router,
        "GET",
        "/metrics",
        None,
        Some("Bearer scoped-token"),
    )
    .await;
    assert_eq!(scoped.status, StatusCode::FORBIDDEN);
    let allowed = call(
        &app.router,
        "GET",
        "/metrics",
        None,
        Some("Bearer ops-token"),
    )
    .await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(allowed.headers["content-type"], cairn_metrics::CONTENT_TYPE);
    assert!(allowed.text.ends_with("# EOF\n"), "{}", allowed.text);
}

#[tokio::test]
async fn metrics_auth_none_serves_metrics_without_a_token_and_nothing_else() {
    let app = TestApp::with_options(Some("ops-token\n"), options(MetricsAuth::None)).await;
    let metrics = call(&app.router, "GET", "/metrics", None, None).await;
    assert_eq!(metrics.status, StatusCode::OK);
    let api = call(
        &app.router,
        "GET",
        &format!("{SUB}/resourcegroups?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn requests_are_counted_by_route_template_and_status_without_ids() {
    let app = TestApp::with_options(Some("ops-token\n"), options(MetricsAuth::Api)).await;
    let auth = Some("Bearer ops-token");
    for name in ["payments-rg-7f3a", "billing-rg-91c2"] {
        let created = call(
            &app.router,
            "PUT",
            &format!("{SUB}/resourcegroups/{name}?{V}"),
            Some(r#"{"location":"westus"}"#.into()),
            auth,
        )
        .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    }
    let missing = call(
        &app.router,
        "GET",
        &format!("{SUB}/resourcegroups/absent-rg-55d1?{V}"),
        None,
        auth,
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let rejected = call(
        &app.router,
        "GET",
        &format!("{SUB}/resourcegroups/payments-rg-7f3a?{V}"),
        None,
        None,
    )
    .await;
    assert_eq!(rejected.status, StatusCode::UNAUTHORIZED);
    // A correlation id the client sends is echoed, one it does not is generated.
    let correlated = call_with_headers(
        &app.router,
        "GET",
        "/healthz",
        None,
        &[("x-ms-correlation-request-id", "ops-correlation-1")],
    )
    .await;
    assert_eq!(
        correlated.headers["x-ms-correlation-request-id"],
        "ops-correlation-1"
    );

    let text = call(&app.router, "GET", "/metrics", None, auth).await.text;
    let group = "route=\"/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}\"";
    assert_eq!(
        value(
            &text,
            &format!("cairn_http_requests_total{{method=\"PUT\",{group},status=\"201\"}}")
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("cairn_http_requests_total{{method=\"GET\",{group},status=\"404\"}}")
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("cairn_http_requests_total{{method=\"GET\",{group},status=\"401\"}}")
        ),
        Some(1.0),
        "authentication failures are counted too: {text}"
    );
    assert!(
        text.contains("cairn_http_request_duration_seconds_count{method=\"PUT\",route=\"/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}\"} 2"),
        "{text}"
    );
    for id in [
        "payments-rg-7f3a",
        "billing-rg-91c2",
        "absent-rg-55d1",
        "00000000-0000-0000-0000-000000000001",
        "ops-correlation-1",
    ] {
        assert!(!text.contains(id), "{id} in the metrics: {text}");
    }
}

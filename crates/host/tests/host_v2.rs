//! Host behaviour against a scripted v2 extension: limits, faults, retries, RELO and stepwise LRO.

mod common;

use cairn_extension_contract::codes;
use cairn_host::{
    CallContext, CreateOrUpdateRequest, ExtensionConfig, ExtensionKey, HostErrorKind,
    PreviewRequest, ResourceLocator,
};
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn key() -> ExtensionKey {
    ExtensionKey::new("acme", VERSION)
}

fn queue(status: Option<&str>) -> Value {
    let mut body = json!({ "type": "Acme.Queue/queues", "apiVersion": "2025-01-01",
        "identifiers": { "name": "orders" }, "properties": { "name": "orders", "maxDepth": 500 } });
    if let Some(status) = status {
        body["status"] = json!(status);
    }
    body
}

fn locator() -> ResourceLocator {
    ResourceLocator {
        resource_type: "Acme.Queue/queues".into(),
        api_version: Some("2025-01-01".into()),
        identifiers: json!({ "name": "orders" }),
        config: None,
        config_id: Some("CFG".into()),
    }
}

fn create_request() -> CreateOrUpdateRequest {
    CreateOrUpdateRequest {
        resource_type: "Acme.Queue/queues".into(),
        api_version: Some("2025-01-01".into()),
        properties: json!({ "name": "orders", "maxDepth": 500 }),
        config: None,
        config_id: None,
        known_identifiers: None,
    }
}

fn error_body(code: &str) -> Value {
    json!({ "error": { "code": code, "message": format!("{code} happened") } })
}

#[tokio::test]
async fn delay_past_the_timeout_is_a_gateway_timeout() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue(None)).after(Duration::from_secs(3))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let started = Instant::now();
    let error = host
        .get(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (HostErrorKind::Timeout, 504, codes::GATEWAY_TIMEOUT)
    );
    assert_eq!(fake.calls(&route("POST", "resource/get")).len(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn oversized_response_with_length_is_dropped() {
    let fake = FakeExtension::start().await;
    let mut big = queue(None);
    big["properties"]["blob"] = json!("x".repeat(100 * 1024));
    fake.script(&route("POST", "resource/get"), vec![Reply::json(200, big)]);
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .get(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (
            HostErrorKind::ResponseTooLarge,
            502,
            codes::RESPONSE_TOO_LARGE
        )
    );
    assert_eq!(fake.calls(&route("POST", "resource/get")).len(), 1);
}

/// A raw server that streams a chunked body forever: the host must stop reading at the limit.
#[tokio::test]
async fn endless_response_stops_at_the_limit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0u8; 8192];
        let _ = socket.read(&mut buffer).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = format!("{:x}\r\n{}\r\n", 4096, "a".repeat(4096));
        while socket.write_all(chunk.as_bytes()).await.is_ok() {}
    });
    let client = cairn_host::http_transport::default_http_client().unwrap();
    let transport = cairn_host::http_transport::HttpV2Transport::new(
        client,
        &format!("http://{address}"),
        None,
    )
    .unwrap();
    let host = host_with(std::sync::Arc::new(transport), fast_settings());
    let error = tokio::time::timeout(
        Duration::from_secs(5),
        host.get(&key(), &locator(), &CallContext::default()),
    )
    .await
    .expect("the host kept reading an endless body")
    .unwrap_err();
    assert_eq!(
        (error.kind(), error.status()),
        (HostErrorKind::ResponseTooLarge, 502)
    );
}

#[tokio::test]
async fn oversized_request_never_reaches_the_extension() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![Reply::json(200, queue(None))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let mut request = create_request();
    request.properties["blob"] = json!("x".repeat(8 * 1024));
    let error = host
        .create_or_update(&key(), request, &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (
            HostErrorKind::RequestTooLarge,
            413,
            codes::REQUEST_TOO_LARGE
        )
    );
    assert!(fake.all_calls().is_empty());
}

#[tokio::test]
async fn server_errors_then_success_are_retried_on_get() {
    let fake = FakeExtension::start().await;
    let failure = Reply::json(500, error_body("InternalServerError"));
    fake.script(
        &route("POST", "resource/get"),
        vec![failure.clone(), failure, Reply::json(200, queue(None))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let resource = host
        .get(&key(), &locator(), &CallContext::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resource.identifiers, json!({ "name": "orders" }));
    assert_eq!(fake.calls(&route("POST", "resource/get")).len(), 3);
}

#[tokio::test]
async fn server_errors_exhaust_the_attempts() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(503, error_body("Busy"))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .get(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (HostErrorKind::Extension, 503, "Busy")
    );
    assert_eq!(fake.calls(&route("POST", "resource/get")).len(), 4);
}

#[tokio::test]
async fn create_is_not_retried_on_server_errors() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![
            Reply::json(500, error_body("InternalServerError")),
            Reply::json(200, queue(None)),
        ],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .create_or_update(&key(), create_request(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!((error.status(), error.code()), (500, "InternalServerError"));
    assert_eq!(
        fake.calls(&route("POST", "resource/createOrUpdate")).len(),
        1
    );
}

#[tokio::test]
async fn throttling_honours_retry_after() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![
            Reply::json(429, error_body("TooManyRequests")).header("retry-after", "1"),
            Reply::json(200, queue(None)),
        ],
    );
    let mut settings = fast_settings();
    settings.retry.max_retry_after = Duration::from_millis(150);
    let host = v2_host(&fake, settings, None);
    let started = Instant::now();
    let resource = host
        .create_or_update(&key(), create_request(), &CallContext::default())
        .await
        .unwrap();
    assert!(resource.status.is_succeeded());
    assert_eq!(
        fake.calls(&route("POST", "resource/createOrUpdate")).len(),
        2
    );
    // Retry-After: 1 s, capped at 150 ms by the policy; the backoff alone would be at most 5 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn contract_violations_are_bad_gateway_with_specific_codes() {
    let cases: Vec<(&str, Reply, &str)> = vec![
        (
            "resource/get",
            Reply::raw(200, b"{not json"),
            codes::RESPONSE_INVALID_JSON,
        ),
        (
            "resource/get",
            Reply::json(200, json!({ "type": "T", "properties": {} })),
            codes::RESPONSE_MISSING_IDENTIFIERS,
        ),
        (
            "resource/get",
            Reply::json(200, json!({ "type": "T", "identifiers": {} })),
            codes::RESPONSE_MISSING_FIELD,
        ),
        (
            "resource/createOrUpdate",
            Reply::json(202, json!({ "status": "Running" })),
            codes::RESPONSE_MISSING_OPERATION_HANDLE,
        ),
        (
            "resource/createOrUpdate",
            Reply::json(
                200,
                json!({ "type": "T", "identifiers": {}, "properties": {}, "status": "Failed" }),
            ),
            codes::RESPONSE_FAILED_WITHOUT_ERROR,
        ),
        (
            "resource/createOrUpdate",
            Reply::json(202, json!({ "status": "Canceled" })),
            codes::RESPONSE_FAILED_WITHOUT_ERROR,
        ),
        (
            "resource/createOrUpdate",
            Reply::empty(204),
            codes::UNEXPECTED_STATUS,
        ),
        (
            "resource/get",
            Reply::raw(400, b"<html>bad</html>"),
            codes::EXTENSION_ERROR_WITHOUT_BODY,
        ),
    ];
    for (tail, reply, expected_code) in cases {
        let fake = FakeExtension::start().await;
        fake.script(&route("POST", tail), vec![reply]);
        let host = v2_host(&fake, fast_settings(), None);
        let error = if tail == "resource/get" {
            host.get(&key(), &locator(), &CallContext::default())
                .await
                .unwrap_err()
        } else {
            host.create_or_update(&key(), create_request(), &CallContext::default())
                .await
                .unwrap_err()
        };
        assert_eq!(
            (error.kind(), error.status(), error.code()),
            (HostErrorKind::ContractViolation, 502, expected_code),
            "{tail}"
        );
        assert_eq!(fake.calls(&route("POST", tail)).len(), 1, "{tail}");
    }
}

#[tokio::test]
async fn relo_create_polls_get_until_succeeded() {
    let fake = FakeExtension::start().await;
    let mut running = queue(Some("Running"));
    running["configId"] = json!("CFG-1");
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![Reply::json(200, running)],
    );
    fake.script(
        &route("POST", "resource/get"),
        vec![
            Reply::json(200, queue(Some("Provisioning"))),
            Reply::json(200, queue(Some("Succeeded"))),
        ],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let mut request = create_request();
    request.config = ExtensionConfig::from_value(json!({ "endpoint": "https://q" }));
    let resource = host
        .create_or_update(&key(), request, &CallContext::default())
        .await
        .unwrap();
    assert!(resource.status.is_succeeded());
    let gets = fake.calls(&route("POST", "resource/get"));
    assert_eq!(gets.len(), 2);
    assert_eq!(
        gets[0].json(),
        json!({ "type": "Acme.Queue/queues", "apiVersion": "2025-01-01", "identifiers": { "name": "orders" },
                "config": { "endpoint": "https://q" }, "configId": "CFG-1" })
    );
    assert!(resource.reference_id.needs_config());
}

#[tokio::test]
async fn relo_create_failure_carries_the_extension_error() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![Reply::json(200, queue(Some("Running")))],
    );
    let mut failed = queue(Some("Failed"));
    failed["error"] =
        json!({ "code": "QuotaExceeded", "message": "no room", "target": "/properties/maxDepth" });
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, failed)],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .create_or_update(&key(), create_request(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.code()),
        (HostErrorKind::OperationFailed, "QuotaExceeded")
    );
    assert_eq!(
        error.error().target.as_deref(),
        Some("/properties/maxDepth")
    );
}

#[tokio::test]
async fn relo_delete_is_done_on_404() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(200, queue(Some("Deleting")))],
    );
    fake.script(
        &route("POST", "resource/get"),
        vec![
            Reply::json(200, queue(Some("Deleting"))),
            Reply::json(404, error_body("ResourceNotFound")),
        ],
    );
    let host = v2_host(&fake, fast_settings(), None);
    host.delete(&key(), &locator(), &CallContext::default())
        .await
        .unwrap();
    assert_eq!(fake.calls(&route("POST", "resource/get")).len(), 2);
    assert_eq!(
        fake.calls(&route("POST", "resource/delete"))[0].json()["configId"],
        json!("CFG")
    );
}

#[tokio::test]
async fn delete_204_is_done_and_delete_is_retried() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![
            Reply::json(502, error_body("BadGateway")),
            Reply::empty(204),
        ],
    );
    let host = v2_host(&fake, fast_settings(), None);
    host.delete(&key(), &locator(), &CallContext::default())
        .await
        .unwrap();
    assert_eq!(fake.calls(&route("POST", "resource/delete")).len(), 2);
}

#[tokio::test]
async fn lro_create_polls_the_handle_then_gets_once() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![Reply::json(202, json!({ "status": "Accepted", "retryAfterSeconds": 60, "operationHandle": { "op": 1 } }))],
    );
    fake.script(
        &route("POST", "longRunningOperation/get"),
        vec![
            Reply::json(
                200,
                json!({ "status": "Running", "operationHandle": { "op": 2, "step": "b" } }),
            ),
            Reply::json(200, json!({ "status": "Succeeded" })),
        ],
    );
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue(None))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let mut request = create_request();
    request.known_identifiers = Some(json!({ "name": "orders" }));
    let started = Instant::now();
    let resource = host
        .create_or_update(&key(), request, &CallContext::default())
        .await
        .unwrap();
    assert_eq!(resource.properties["maxDepth"], json!(500));
    let polls = fake.calls(&route("POST", "longRunningOperation/get"));
    assert_eq!(
        polls.iter().map(Recorded::json).collect::<Vec<_>>(),
        vec![json!({ "op": 1 }), json!({ "op": 2, "step": "b" })]
    );
    assert_eq!(fake.calls(&route("POST", "resource/get")).len(), 1);
    assert!(fake.calls(&route("POST", "resource/preview")).is_empty());
    // retryAfterSeconds 60 clamped to the test maximum of 10 ms.
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn lro_create_without_identifiers_asks_preview() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![Reply::json(
            202,
            json!({ "status": "Running", "operationHandle": { "op": 1 } }),
        )],
    );
    fake.script(
        &route("POST", "longRunningOperation/get"),
        vec![Reply::json(200, json!({ "status": "Succeeded" }))],
    );
    fake.script(
        &route("POST", "resource/preview"),
        vec![Reply::json(200, queue(None))],
    );
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue(None))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    host.create_or_update(&key(), create_request(), &CallContext::default())
        .await
        .unwrap();
    assert_eq!(fake.calls(&route("POST", "resource/preview")).len(), 1);
    assert_eq!(
        fake.calls(&route("POST", "resource/get"))[0].json()["identifiers"],
        json!({ "name": "orders" })
    );
}

#[tokio::test]
async fn lro_delete_failure_and_polling_retries() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(202, json!({ "status": "Running", "retryAfterSeconds": 10, "operationHandle": { "opId": "q-77" } }))],
    );
    fake.script(
        &route("POST", "longRunningOperation/get"),
        vec![
            Reply::json(500, error_body("Flaky")),
            Reply::json(200, json!({ "status": "Failed", "error": { "code": "QueueNotEmpty", "message": "Queue still holds 12 messages.",
                "details": [ { "code": "PendingMessages", "message": "Drain first.", "target": "/identifiers/name" } ] } })),
        ],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .delete(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.code()),
        (HostErrorKind::OperationFailed, "QueueNotEmpty")
    );
    assert_eq!(
        error.error().details[0].target.as_deref(),
        Some("/identifiers/name")
    );
    assert_eq!(
        fake.calls(&route("POST", "longRunningOperation/get")).len(),
        2
    );
}

#[tokio::test]
async fn long_running_operations_stop_at_the_deadline() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(
            202,
            json!({ "status": "Running", "operationHandle": { "op": 1 } }),
        )],
    );
    fake.script(
        &route("POST", "longRunningOperation/get"),
        vec![Reply::json(
            200,
            json!({ "status": "Running", "operationHandle": { "op": 1 } }),
        )],
    );
    let mut settings = fast_settings();
    settings.operation_deadline = Duration::from_millis(200);
    let host = v2_host(&fake, settings, None);
    let error = host
        .delete(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (
            HostErrorKind::DeadlineExceeded,
            504,
            codes::OPERATION_DEADLINE_EXCEEDED
        )
    );
    assert!(fake.calls(&route("POST", "longRunningOperation/get")).len() >= 2);
}

#[tokio::test]
async fn preview_not_supported_is_typed_for_400_and_422() {
    for status in [400, 422] {
        let fake = FakeExtension::start().await;
        fake.script(
            &route("POST", "resource/preview"),
            vec![Reply::json(status, error_body("PreviewNotSupported"))],
        );
        let host = v2_host(&fake, fast_settings(), None);
        let request = PreviewRequest {
            resource_type: "Acme.Queue/queues".into(),
            api_version: None,
            properties: json!({ "name": "[parameters('q')]" }),
            config: None,
            config_id: None,
            unevaluated: vec!["/properties/name".into()],
        };
        let error = host
            .preview(&key(), request, &CallContext::default())
            .await
            .unwrap_err();
        assert!(error.is_preview_not_supported(), "{status}");
        assert_eq!(error.status(), status);
        let sent = fake.calls(&route("POST", "resource/preview"))[0].json();
        assert_eq!(
            sent["metadata"],
            json!({ "unevaluated": ["/properties/name"] })
        );
    }
}

#[tokio::test]
async fn config_mismatch_and_missing_target_are_typed() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(422, error_body("ClusterMismatch"))],
    );
    fake.script(
        &route("POST", "resource/delete"),
        vec![Reply::json(404, error_body("DeploymentTargetNotFound"))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .get(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status()),
        (HostErrorKind::ConfigMismatch, 422)
    );
    let error = host
        .delete(&key(), &locator(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), HostErrorKind::DeploymentTargetNotFound);
}

#[tokio::test]
async fn get_404_is_none() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(404, error_body("ResourceNotFound"))],
    );
    let host = v2_host(&fake, fast_settings(), None);
    assert!(
        host.get(&key(), &locator(), &CallContext::default())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn required_headers_and_bearer_token_are_sent() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue(None))],
    );
    let host = v2_host(&fake, fast_settings(), Some("t0ken"));
    let context = CallContext {
        correlation_id: Some("corr-1".into()),
        ..CallContext::default()
    };
    host.get(&key(), &locator(), &context).await.unwrap();
    let call = &fake.calls(&route("POST", "resource/get"))[0];
    for name in ["x-ms-client-request-id", "traceparent", "tracestate"] {
        assert!(call.headers.contains_key(name), "{name}");
    }
    assert_eq!(call.headers["x-ms-correlation-request-id"], "corr-1");
    assert_eq!(call.headers["referer"], "http://cairn.test/");
    assert_eq!(call.headers["authorization"], "Bearer t0ken");
    assert_eq!(call.headers["content-type"], "application/json");
}

/// An extension URL with user info is called through reqwest's client (the path of every extension not on this
/// machine), which sends the user info as basic authentication; the contract's headers are the same as through the
/// loopback client above.
#[tokio::test]
async fn an_extension_url_with_user_info_is_called_through_reqwest_with_basic_authentication() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue(None))],
    );
    let origin = fake.origin.replacen("http://", "http://cairn:pa55@", 1);
    let url = format!("{origin}{PREFIX}");
    let client = cairn_host::http_transport::default_http_client().unwrap();
    let transport = cairn_host::http_transport::HttpV2Transport::new(client, &url, None).unwrap();
    let host = host_with(std::sync::Arc::new(transport), fast_settings());
    host.get(&key(), &locator(), &CallContext::default())
        .await
        .unwrap();
    let call = &fake.calls(&route("POST", "resource/get"))[0];
    for name in ["x-ms-client-request-id", "traceparent", "accept"] {
        assert!(call.headers.contains_key(name), "{name}");
    }
    assert_eq!(call.headers["content-type"], "application/json");
    // base64("cairn:pa55")
    assert_eq!(call.headers["authorization"], "Basic Y2Fpcm46cGE1NQ==");
}

#[tokio::test]
async fn unregistered_versions_are_not_found() {
    let fake = FakeExtension::start().await;
    let host = v2_host(&fake, fast_settings(), None);
    let error = host
        .get(
            &ExtensionKey::new(NAME, "2.0.0"),
            &locator(),
            &CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (
            HostErrorKind::NotRegistered,
            404,
            codes::EXTENSION_NOT_REGISTERED
        )
    );
}

#[tokio::test]
async fn connection_refused_is_retried_then_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let client = cairn_host::http_transport::default_http_client().unwrap();
    let transport = cairn_host::http_transport::HttpV2Transport::new(
        client,
        &format!("http://{address}"),
        None,
    )
    .unwrap();
    let host = host_with(std::sync::Arc::new(transport), fast_settings());
    let error = host
        .create_or_update(&key(), create_request(), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.status(), error.code()),
        (
            HostErrorKind::Unreachable,
            502,
            codes::EXTENSION_UNREACHABLE
        )
    );
}

/// Every logical call is timed by extension, operation and outcome: retries fold into one observation, a
/// timeout is its own outcome.
#[tokio::test]
async fn call_latency_is_recorded_by_extension_operation_and_outcome() {
    let fake = FakeExtension::start().await;
    fake.script(
        &route("POST", "resource/get"),
        vec![
            Reply::json(503, error_body("Busy")),
            Reply::json(200, queue(None)),
        ],
    );
    let metrics = cairn_metrics::Metrics::new();
    let host = v2_host(&fake, fast_settings(), None).with_metrics(metrics.clone());
    host.get(&key(), &locator(), &CallContext::default())
        .await
        .expect("the retry succeeds");
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(200, queue(None)).after(Duration::from_secs(3))],
    );
    host.get(&key(), &locator(), &CallContext::default())
        .await
        .expect_err("times out");
    let text = metrics.render();
    assert!(
        text.contains("cairn_extension_call_duration_seconds_count{extension=\"Acme\",operation=\"get\",outcome=\"2xx\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("cairn_extension_call_duration_seconds_count{extension=\"Acme\",operation=\"get\",outcome=\"timeout\"} 1"),
        "{text}"
    );
}

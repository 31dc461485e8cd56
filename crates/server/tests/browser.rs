//! A web page in the user's browser cannot drive the API: bodies must be JSON (a cross-site `text/plain`, form or
//! multipart POST is refused before it runs), a server without tokens answers only its own Host names (no DNS
//! rebinding) and refuses other origins, and no response carries CORS headers unless an origin is allowed.

mod common;

use axum::body::Body;
use axum::http::Request;
use cairn_server::ServerOptions;
use common::*;
use serde_json::json;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000009";
const DV: &str = "api-version=2025-04-01";

struct Sent<'a> {
    method: &'a str,
    path: String,
    host: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: Option<String>,
}

async fn send_as(app: &TestApp, sent: Sent<'_>) -> Answer {
    let mut builder = Request::builder()
        .method(sent.method)
        .uri(&sent.path)
        .header("host", sent.host);
    for (name, value) in &sent.headers {
        builder = builder.header(*name, *value);
    }
    let request = match sent.body {
        Some(body) => builder
            .header("content-length", body.len())
            .body(Body::from(body)),
        None => builder.body(Body::empty()),
    }
    .unwrap();
    send(&app.router, request).await
}

fn bulk_delete_of(root: &str) -> String {
    json!({"resources": [{
        "extension": {"name": "Local", "version": "1.0.0", "config": {"rootDirectory": {"value": root}}},
        "type": "File", "apiVersion": "1.0.0", "identifiers": {"path": "keep.txt"}
    }]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenless_server_refuses_what_a_web_page_can_send() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    std::fs::write(dir.path().join("keep.txt"), "kept").unwrap();
    let bulk = format!("{SUB}/providers/Microsoft.Resources/bulkDelete?{DV}");
    let group = format!("{SUB}/resourcegroups/rg?{DV}");

    // (what, method, path, host, headers, body, expected status, expected code)
    type Case<'a> = (
        &'a str,
        &'a str,
        String,
        &'a str,
        Vec<(&'a str, &'a str)>,
        Option<String>,
        u16,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "text/plain body",
            "POST",
            bulk.clone(),
            "cairn.test",
            vec![("content-type", "text/plain")],
            Some(bulk_delete_of(&root)),
            415,
            "UnsupportedMediaType",
        ),
        (
            "form body",
            "POST",
            bulk.clone(),
            "cairn.test",
            vec![("content-type", "application/x-www-form-urlencoded")],
            Some(bulk_delete_of(&root)),
            415,
            "UnsupportedMediaType",
        ),
        (
            "multipart body",
            "POST",
            bulk.clone(),
            "cairn.test",
            vec![("content-type", "multipart/form-data; boundary=x")],
            Some(bulk_delete_of(&root)),
            415,
            "UnsupportedMediaType",
        ),
        (
            "no content type",
            "PUT",
            group.clone(),
            "cairn.test",
            vec![],
            Some(json!({"location": "local"}).to_string()),
            415,
            "UnsupportedMediaType",
        ),
        (
            "a rebound host name",
            "GET",
            format!("{SUB}/resourcegroups?{DV}"),
            "rebind.attacker.example:8080",
            vec![],
            None,
            421,
            "MisdirectedRequest",
        ),
        (
            "a rebound host name with a JSON body",
            "POST",
            bulk.clone(),
            "rebind.attacker.example",
            vec![("content-type", "application/json")],
            Some(bulk_delete_of(&root)),
            421,
            "MisdirectedRequest",
        ),
        (
            "a page of another origin",
            "PUT",
            group.clone(),
            "127.0.0.1:8080",
            vec![
                ("content-type", "application/json"),
                ("origin", "https://evil.example"),
            ],
            Some(json!({"location": "local"}).to_string()),
            403,
            "CrossOriginRequestRefused",
        ),
        (
            "a cross-site fetch",
            "GET",
            format!("{SUB}/resourcegroups?{DV}"),
            "localhost:8080",
            vec![("sec-fetch-site", "cross-site")],
            None,
            403,
            "CrossOriginRequestRefused",
        ),
        (
            "a JSON body from the same origin",
            "PUT",
            group.clone(),
            "127.0.0.1:8080",
            vec![
                ("content-type", "application/json; charset=utf-8"),
                ("origin", "http://127.0.0.1:8080"),
            ],
            Some(json!({"location": "local"}).to_string()),
            201,
            "",
        ),
        (
            "a read on localhost",
            "GET",
            format!("{SUB}/resourcegroups?{DV}"),
            "localhost:8080",
            vec![],
            None,
            200,
            "",
        ),
        (
            "a read on an IPv6 address",
            "GET",
            format!("{SUB}/resourcegroups?{DV}"),
            "[::1]:8080",
            vec![],
            None,
            200,
            "",
        ),
        (
            "the console",
            "GET",
            "/ui/".into(),
            "127.0.0.1:8080",
            vec![],
            None,
            200,
            "",
        ),
        (
            "a preflight from another origin",
            "OPTIONS",
            bulk.clone(),
            "127.0.0.1:8080",
            vec![
                ("origin", "https://evil.example"),
                ("access-control-request-method", "POST"),
            ],
            None,
            403,
            "CrossOriginRequestRefused",
        ),
    ];
    for (what, method, path, host, headers, body, status, code) in cases {
        let answer = send_as(
            &app,
            Sent {
                method,
                path,
                host,
                headers,
                body,
            },
        )
        .await;
        assert_eq!(answer.status.as_u16(), status, "{what}: {}", answer.text);
        if !code.is_empty() {
            assert_eq!(
                answer.json["error"]["code"], code,
                "{what}: {}",
                answer.text
            );
        }
        assert!(
            !answer.headers.contains_key("access-control-allow-origin"),
            "{what}: a CORS header without an allow-list"
        );
    }
    assert!(
        dir.path().join("keep.txt").exists(),
        "a refused request deleted the file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_gets_cors_and_a_token_server_answers_any_host() {
    let app = TestApp::with_options(
        None,
        ServerOptions {
            allowed_hosts: vec!["cairn.test".into()],
            cors_origins: vec!["https://console.example".into()],
            ..ServerOptions::default()
        },
    )
    .await;
    let list = format!("{SUB}/resourcegroups?{DV}");
    let preflight = send_as(
        &app,
        Sent {
            method: "OPTIONS",
            path: list.clone(),
            host: "cairn.test",
            headers: vec![
                ("origin", "https://console.example"),
                ("access-control-request-method", "PUT"),
            ],
            body: None,
        },
    )
    .await;
    assert_eq!(preflight.status.as_u16(), 204, "{}", preflight.text);
    assert_eq!(
        preflight.headers["access-control-allow-origin"],
        "https://console.example"
    );
    assert!(
        preflight.headers["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("PUT")
    );
    let read = send_as(
        &app,
        Sent {
            method: "GET",
            path: list.clone(),
            host: "cairn.test",
            headers: vec![("origin", "https://console.example")],
            body: None,
        },
    )
    .await;
    assert_eq!(read.status.as_u16(), 200, "{}", read.text);
    assert_eq!(
        read.headers["access-control-allow-origin"],
        "https://console.example"
    );

    // With tokens a browser cannot authenticate by itself: any Host is answered, the body rule still holds.
    let app = TestApp::with_tokens("t0ken\n").await;
    let read = send_as(
        &app,
        Sent {
            method: "GET",
            path: list.clone(),
            host: "cairn.example.org",
            headers: vec![("authorization", "Bearer t0ken")],
            body: None,
        },
    )
    .await;
    assert_eq!(read.status.as_u16(), 200, "{}", read.text);
    let put = send_as(
        &app,
        Sent {
            method: "PUT",
            path: format!("{SUB}/resourcegroups/rg?{DV}"),
            host: "cairn.example.org",
            headers: vec![
                ("authorization", "Bearer t0ken"),
                ("content-type", "text/plain"),
            ],
            body: Some(json!({"location": "local"}).to_string()),
        },
    )
    .await;
    assert_eq!(put.status.as_u16(), 415, "{}", put.text);
}

//! Oversized bodies over a real socket: the 413 `RequestEntityTooLarge` in ARM's error shape reaches a client
//! that sends a whole oversized body (declared or chunked, even past the discard bound), and one that waits on
//! `Expect: 100-continue` gets it without sending the body at all. Over TLS it reaches curl over HTTP/1.1 and
//! HTTP/2 and Python `requests` (the Azure SDK's transport); those tests fail naming curl or Python when missing.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use cairn_server::Listener;
use common::TestApp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const PATH: &str = "/subscriptions/s/resourcegroups/rg?api-version=2025-04-01";
/// Twice the 4 MB limit.
const OVERSIZED: usize = 8 * 1024 * 1024;

async fn serve() -> (SocketAddr, CancellationToken) {
    serve_with(TestApp::with_tokens("limit-token\n").await).await
}

async fn serve_with(app: TestApp) -> (SocketAddr, CancellationToken) {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), None)
        .await
        .unwrap();
    let addr = listener.local_addr();
    let shutdown = CancellationToken::new();
    tokio::spawn(listener.serve(app.router, shutdown.clone()));
    (addr, shutdown)
}

/// Reads the whole response (the server closes the connection after a 413): status and JSON body.
async fn read_response(stream: &mut TcpStream) -> (u16, serde_json::Value) {
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .expect("the response arrives")
        .expect("the connection is closed cleanly, not reset");
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or_default())
}

fn body_of(size: usize) -> Vec<u8> {
    let filler = "x".repeat(size);
    format!("{{\"location\":\"westus\",\"tags\":{{\"t\":\"{filler}\"}}}}").into_bytes()
}

#[track_caller]
fn assert_arm_413(status: u16, body: &serde_json::Value) {
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "RequestEntityTooLarge", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4194304")),
        "{body}"
    );
}

#[tokio::test]
async fn an_oversized_declared_body_is_answered_413_after_the_client_sent_it() {
    let (addr, shutdown) = serve().await;
    let body = body_of(OVERSIZED);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {PATH} HTTP/1.1\r\nHost: cairn.test\r\nAuthorization: Bearer limit-token\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
        .write_all(&body)
        .await
        .expect("the whole body is accepted, not reset");
    let (status, json) = read_response(&mut stream).await;
    assert_arm_413(status, &json);
    shutdown.cancel();
}

#[tokio::test]
async fn an_oversized_chunked_body_is_answered_413_after_the_client_sent_it() {
    let (addr, shutdown) = serve().await;
    let body = body_of(OVERSIZED);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {PATH} HTTP/1.1\r\nHost: cairn.test\r\nAuthorization: Bearer limit-token\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        stream
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await
            .expect("the chunk is accepted, not reset");
        stream.write_all(chunk).await.unwrap();
        stream.write_all(b"\r\n").await.unwrap();
    }
    stream.write_all(b"0\r\n\r\n").await.unwrap();
    let (status, json) = read_response(&mut stream).await;
    assert_arm_413(status, &json);
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_expecting_100_continue_gets_the_413_without_sending_the_body() {
    let (addr, shutdown) = serve().await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {PATH} HTTP/1.1\r\nHost: cairn.test\r\nAuthorization: Bearer limit-token\r\nContent-Type: application/json\r\nContent-Length: {OVERSIZED}\r\nExpect: 100-continue\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (status, json) = read_response(&mut stream).await;
    assert_arm_413(status, &json);
    shutdown.cancel();
}

/// Past the discard bound the 413 is sent while the client is still sending; the connection lingers, reading the
/// rest, so a client that reads only once it has sent everything still gets the answer rather than a reset.
#[tokio::test]
async fn a_body_past_the_discard_bound_is_read_until_the_client_is_done() {
    let (addr, shutdown) = serve_with(small_limits_app().await).await;
    let body = body_of(TLS_BODY);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {PATH} HTTP/1.1\r\nHost: cairn.test\r\nAuthorization: Bearer limit-token\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
        .write_all(&body)
        .await
        .expect("the whole body is accepted, not reset");
    let (status, json) = read_response(&mut stream).await;
    assert_tls_413(status, &json);
    shutdown.cancel();
}

#[tokio::test]
async fn a_body_within_the_limit_still_reaches_the_handler() {
    let (addr, shutdown) = serve().await;
    let body = br#"{"location":"westus"}"#;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {PATH} HTTP/1.1\r\nHost: cairn.test\r\nAuthorization: Bearer limit-token\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    stream.write_all(b"\r\n0\r\n\r\n").await.unwrap();
    let (status, json) = read_response(&mut stream).await;
    assert_eq!(status, 201, "{json}");
    assert_eq!(json["location"], "westus");
    shutdown.cancel();
}

// --- Over TLS, with the clients the Azure SDKs and operators use -----------------------------------------------

/// The limit of the TLS tests: small, so a body well over it is quick to send.
const TLS_LIMIT: usize = 64 * 1024;
/// Read and thrown away before the 413 over TLS: less than the body, as 50 MB is more than the default 32 MiB.
const TLS_DISCARD: usize = 1024 * 1024;
/// The body the TLS tests send: well over both.
const TLS_BODY: usize = 24 * 1024 * 1024;

struct TlsServer {
    url: String,
    cert: std::path::PathBuf,
    dir: tempfile::TempDir,
    shutdown: CancellationToken,
}

/// An app with the small limit and discard bound.
async fn small_limits_app() -> TestApp {
    let options = cairn_server::ServerOptions {
        max_request_bytes: TLS_LIMIT,
        max_discarded_bytes: TLS_DISCARD,
        ..cairn_server::ServerOptions::default()
    };
    TestApp::with_options(Some("limit-token\n"), options).await
}

async fn serve_tls() -> TlsServer {
    let app = small_limits_app().await;
    let dir = tempfile::tempdir().unwrap();
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let files = cairn_server::TlsFiles {
        cert: dir.path().join("cert.pem"),
        key: dir.path().join("key.pem"),
    };
    std::fs::write(&files.cert, certified.cert.pem()).unwrap();
    std::fs::write(&files.key, certified.signing_key.serialize_pem()).unwrap();
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), Some(&files))
        .await
        .unwrap();
    let url = format!("https://{}{PATH}", listener.local_addr());
    let shutdown = CancellationToken::new();
    tokio::spawn(listener.serve(app.router, shutdown.clone()));
    TlsServer {
        url,
        cert: files.cert,
        dir,
        shutdown,
    }
}

#[track_caller]
fn assert_tls_413(status: u16, body: &serde_json::Value) {
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "RequestEntityTooLarge", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&TLS_LIMIT.to_string())),
        "{body}"
    );
}

/// Runs curl with `version` (`--http1.1`, `--http2`) sending an oversized body; the status, the HTTP version
/// curl used and the response body. Fails naming curl when it is missing or lacks HTTP/2.
async fn curl_oversized(server: &TlsServer, version: &str) -> (u16, String, serde_json::Value) {
    let features = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!("this test needs curl on PATH: running `curl --version` failed: {e}")
        });
    let features = String::from_utf8_lossy(&features.stdout);
    assert!(
        features.contains("HTTP2"),
        "this test needs a curl built with HTTP/2 (nghttp2); `curl --version` says:\n{features}"
    );
    let upload = server.dir.path().join("upload.json");
    std::fs::write(&upload, body_of(TLS_BODY)).unwrap();
    let answer = server.dir.path().join(format!("answer{version}.json"));
    let output = tokio::process::Command::new("curl")
        .args(["--silent", "--show-error", version, "--request", "PUT"])
        .arg("--cacert")
        .arg(&server.cert)
        .args([
            "--header",
            "Authorization: Bearer limit-token",
            "--header",
            "Content-Type: application/json",
            "--write-out",
            "%{http_code} %{http_version}",
        ])
        .arg("--data-binary")
        .arg(format!("@{}", upload.display()))
        .arg("--output")
        .arg(&answer)
        .arg(&server.url)
        .output()
        .await
        .expect("curl runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "curl {version} failed ({}): {stdout} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let (status, used) = stdout.split_once(' ').unwrap_or((&stdout, ""));
    let body = std::fs::read_to_string(&answer).unwrap_or_default();
    (
        status.parse().unwrap_or(0),
        used.to_owned(),
        serde_json::from_str(&body).unwrap_or_default(),
    )
}

#[tokio::test]
async fn curl_over_tls_and_http1_gets_the_413() {
    let server = serve_tls().await;
    let (status, version, body) = curl_oversized(&server, "--http1.1").await;
    assert_eq!(version, "1.1");
    assert_tls_413(status, &body);
    server.shutdown.cancel();
}

#[tokio::test]
async fn curl_over_tls_and_http2_gets_the_413() {
    let server = serve_tls().await;
    let (status, version, body) = curl_oversized(&server, "--http2").await;
    assert_eq!(version, "2");
    assert_tls_413(status, &body);
    server.shutdown.cancel();
}

/// What the Azure SDK for Python sends through: `requests`, which writes the whole body before reading.
const PYTHON_PUT: &str = r#"
import json, sys
try:
    import requests
except ImportError:
    sys.exit(3)
url, cert, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = b'{"location":"westus","tags":{"t":"' + b"x" * size + b'"}}'
response = requests.put(url, data=body, verify=cert, timeout=60, headers={
    "Authorization": "Bearer limit-token", "Content-Type": "application/json"})
print(response.status_code)
print(response.text)
"#;

#[tokio::test]
async fn python_requests_over_tls_gets_the_413() {
    let server = serve_tls().await;
    // `CAIRN_TEST_PYTHON` may name another interpreter (scripts/test.sh's target/pyenv has `requests`).
    let python = std::env::var("CAIRN_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let output = tokio::process::Command::new(&python)
        .args(["-c", PYTHON_PUT, &server.url])
        .arg(&server.cert)
        .arg(TLS_BODY.to_string())
        .output()
        .await
        .unwrap_or_else(|e| panic!("this test needs {python} (with `requests`) on PATH: {e}"));
    assert_ne!(
        output.status.code(),
        Some(3),
        "this test needs the Python package `requests` in {python}: pip install requests, or set CAIRN_TEST_PYTHON"
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "python requests failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let (status, body) = stdout.split_once('\n').unwrap_or((&stdout, ""));
    assert_tls_413(
        status.trim().parse().unwrap_or(0),
        &serde_json::from_str(body).unwrap_or_default(),
    );
    server.shutdown.cancel();
}

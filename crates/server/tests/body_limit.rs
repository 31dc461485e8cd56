//! Oversized bodies over a real socket: the 413 `RequestEntityTooLarge` in ARM's error shape reaches a client
//! that sends a whole oversized body (declared or chunked), and one that waits on `Expect: 100-continue` gets it
//! without sending the body at all.

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
    let app = TestApp::with_tokens("limit-token\n").await;
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

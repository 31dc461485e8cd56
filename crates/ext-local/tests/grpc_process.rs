//! The gRPC process transport against the real `cairn-ext-local` binary: startup, crash detection and
//! restart, shutdown, and the `GetTypeFiles`/`Ping` methods through the typed client.

mod common;

use std::time::Duration;

use cairn_extension_contract::transport::{
    ExtensionTransport, Operation, TransportError, TransportRequest,
};
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use serde_json::{Value, json};

fn request(operation: Operation, body: Value) -> TransportRequest {
    TransportRequest {
        operation,
        extension_version: "1.0.0".into(),
        body: serde_json::to_vec(&body).unwrap(),
        headers: Vec::new(),
        max_response_bytes: 1 << 20,
    }
}

fn file_spec(root: &std::path::Path, path: &str, content: &str) -> Value {
    json!({ "type": "File", "properties": { "path": path, "content": content },
            "config": { "rootDirectory": root } })
}

fn alive(pid: u32) -> bool {
    // Signal 0 checks for existence; a zombie still counts, so also look at /proc's state.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !status.is_empty() && !status.contains("State:\tZ")
}

#[tokio::test]
async fn crashed_process_is_restarted_on_the_next_call() {
    let root = tempfile::tempdir().unwrap();
    let transport = LocalProcessTransport::new(LaunchSpec::new(common::BINARY));
    let first = transport
        .send(request(
            Operation::CreateOrUpdate,
            file_spec(root.path(), "a.txt", "one"),
        ))
        .await
        .unwrap();
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let pid = transport.pid().await.expect("running");

    // Kill it the hard way, as a crash would.
    let raw = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(raw, rustix::process::Signal::KILL).unwrap();
    // Up to 5 s: a loaded CI machine may be slow to reap the process.
    for _ in 0..250 {
        if transport.pid().await.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(transport.pid().await, None, "the crash was not detected");

    let second = transport
        .send(request(
            Operation::CreateOrUpdate,
            file_spec(root.path(), "b.txt", "two"),
        ))
        .await
        .unwrap();
    assert_eq!(second.status, 200);
    let new_pid = transport.pid().await.expect("restarted");
    assert_ne!(new_pid, pid);
    assert_eq!(
        std::fs::read_to_string(root.path().join("b.txt")).unwrap(),
        "two"
    );

    transport.shutdown().await;
    assert!(!alive(new_pid), "the process survived shutdown");
}

#[tokio::test]
async fn one_process_serves_many_calls() {
    let root = tempfile::tempdir().unwrap();
    let transport = LocalProcessTransport::new(LaunchSpec::new(common::BINARY));
    transport.start().await.unwrap();
    let pid = transport.pid().await;
    for index in 0..5 {
        let response = transport
            .send(request(
                Operation::CreateOrUpdate,
                file_spec(root.path(), &format!("f{index}.txt"), "x"),
            ))
            .await
            .unwrap();
        assert_eq!(response.status, 200);
    }
    assert_eq!(transport.pid().await, pid);
    let missing = transport
        .send(request(Operation::Get, json!({ "type": "File", "identifiers": { "path": "nope" }, "config": { "rootDirectory": root.path() } })))
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
    let refused = transport
        .send(request(
            Operation::CreateOrUpdate,
            file_spec(root.path(), "../x", "x"),
        ))
        .await
        .unwrap();
    assert_eq!(refused.status, 400);
    let body: Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(body["error"]["code"], "PathOutsideRoot");
    assert_eq!(body["error"]["target"], "/properties/path");
    let lro = transport
        .send(request(Operation::GetLongRunningOperation, json!({})))
        .await;
    assert!(matches!(lro, Err(TransportError::Unsupported { .. })));
    transport.shutdown().await;
}

#[tokio::test]
async fn a_binary_that_never_answers_ping_fails_startup() {
    let mut spec = LaunchSpec::new("/bin/sh");
    // `sh -c 'exit 3' --socket PATH`: exits at once without serving.
    spec.args = vec!["-c".into(), "exit 3".into()];
    let transport = LocalProcessTransport::new(spec);
    let started = std::time::Instant::now();
    let result = transport.start().await;
    assert!(
        matches!(result, Err(TransportError::Unavailable { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    let mut slow = LaunchSpec::new("/bin/sh");
    slow.args = vec!["-c".into(), "sleep 30".into()];
    slow.startup_timeout = Duration::from_millis(300);
    let transport = LocalProcessTransport::new(slow);
    let result = transport.start().await;
    assert!(
        matches!(result, Err(TransportError::Unavailable { ref message }) if message.contains("Ping")),
        "{result:?}"
    );
}

#[tokio::test]
async fn responses_larger_than_grpc_default_limit_pass() {
    let root = tempfile::tempdir().unwrap();
    // 4.5 MB: above tonic's default 4 MB message limit, below the contract's 20 MB response limit.
    let content = "x".repeat(4_500_000);
    std::fs::write(root.path().join("big.txt"), &content).unwrap();
    let transport = LocalProcessTransport::new(LaunchSpec::new(common::BINARY));
    let mut get = request(
        Operation::Get,
        json!({ "type": "File", "identifiers": { "path": "big.txt" }, "config": { "rootDirectory": root.path() } }),
    );
    get.max_response_bytes = 20 * 1024 * 1024;
    let response = transport.send(get.clone()).await.unwrap();
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body[..response.body.len().min(500)])
    );
    let body: Value = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(
        body["properties"]["content"].as_str().map(str::len),
        Some(content.len())
    );
    get.max_response_bytes = 1024;
    assert!(matches!(
        transport.send(get).await,
        Err(TransportError::ResponseTooLarge { limit: 1024 })
    ));
    transport.shutdown().await;
}

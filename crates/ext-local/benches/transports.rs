//! Latency of the Local extension over each transport, and gRPC process startup.
//!
//! `cargo bench -p cairn-ext-local --bench transports`. Prints median and p95 of a `get` on an existing
//! file, in process, over loopback HTTP (the host's `HttpV2Transport`) and over gRPC (the process
//! transport), and the time from spawning `cairn-ext-local --socket` to its first answered Ping. Under
//! `cargo test --all-targets` (no `--bench` argument) it makes a few calls only, as a smoke test.

use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_extension_contract::transport::{ExtensionTransport, Operation, TransportRequest};
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Cargo builds the binary with this bench's profile (release under `cargo bench`).
const BINARY: &str = env!("CARGO_BIN_EXE_cairn-ext-local");

fn get_request(root: &std::path::Path) -> TransportRequest {
    let body = serde_json::json!({
        "type": "File", "identifiers": { "path": "bench.txt" }, "config": { "rootDirectory": root }
    });
    TransportRequest {
        operation: Operation::Get,
        extension_version: "1.0.0".into(),
        body: serde_json::to_vec(&body).expect("json"),
        headers: vec![("x-ms-client-request-id".into(), "bench".into())],
        max_response_bytes: 1 << 20,
    }
}

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    format!(
        "median {:>7.1} µs  p95 {:>7.1} µs",
        at(0.5).as_secs_f64() * 1e6,
        at(0.95).as_secs_f64() * 1e6
    )
}

async fn measure(
    name: &str,
    transport: &dyn ExtensionTransport,
    request: &TransportRequest,
    calls: usize,
) {
    for _ in 0..calls.min(100) {
        let response = transport.send(request.clone()).await.expect("warm-up call");
        assert_eq!(response.status, 200, "{name}");
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let response = transport.send(request.clone()).await.expect("call");
        samples.push(started.elapsed());
        assert_eq!(response.status, 200);
    }
    println!("get, {name:<12} {}  ({calls} calls)", summary(samples));
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let (calls, starts) = if benchmarking { (2000, 10) } else { (20, 2) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::write(root.path().join("bench.txt"), "hello\n").expect("write");
        let request = get_request(root.path());

        let in_process = cairn_ext_local::in_process_transport();
        measure("in-process", &in_process, &request, calls).await;

        let mut server = tokio::process::Command::new(BINARY)
            .args(["--http", "0"])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
        let line = lines.next_line().await.expect("read").expect("line");
        let base = line.trim_start_matches("listening on ").to_owned();
        let client = cairn_host::http_transport::default_http_client().expect("client");
        let http = cairn_host::http_transport::HttpV2Transport::new(client, &base, None)
            .expect("transport");
        measure("http", &http, &request, calls).await;
        let _ = server.kill().await;

        let grpc = LocalProcessTransport::new(LaunchSpec::new(BINARY));
        measure("grpc", &grpc, &request, calls).await;
        grpc.shutdown().await;

        let mut times = Vec::with_capacity(starts);
        for _ in 0..starts {
            let transport = LocalProcessTransport::new(LaunchSpec::new(BINARY));
            let started = Instant::now();
            transport.start().await.expect("start");
            times.push(started.elapsed());
            transport.shutdown().await;
        }
        times.sort();
        println!(
            "grpc startup (spawn → first Ping answered): median {:.1} ms, max {:.1} ms ({starts} starts)",
            times[starts / 2].as_secs_f64() * 1e3,
            times[starts - 1].as_secs_f64() * 1e3
        );
    });
}

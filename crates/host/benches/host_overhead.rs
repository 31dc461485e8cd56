//! Benchmark: host `get` calls vs a plain HTTP client loop against the same loopback extension.
//!
//! Run: `cargo bench -p cairn-host --bench host_overhead` (optional args: seconds per phase, concurrency).
//! Reports throughput at concurrency 64 for both clients (and their ratio), and the median latency of
//! each, at concurrency 64 and sequentially, so the host's added latency can be read off directly.

use axum::Router;
use axum::routing::post;
use cairn_host::http_transport::{HttpV2Transport, default_http_client};
use cairn_host::{
    CallContext, ExtensionHost, ExtensionKey, HostSettings, RegisteredExtension, Registry,
    ResourceLocator,
};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RESOURCE: &str = r#"{"type":"Acme.Queue/queues","apiVersion":"2025-01-01","identifiers":{"name":"orders"},"properties":{"name":"orders","maxDepth":500},"configId":"CFG"}"#;

struct Phase {
    requests: usize,
    elapsed: Duration,
    median: Duration,
    p99: Duration,
}

impl Phase {
    fn throughput(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

async fn run<F, Fut>(concurrency: usize, duration: Duration, call: F) -> Phase
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    // Warm-up: open connections, fill pools.
    let warm_until = Instant::now() + Duration::from_millis(300);
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < warm_until {
                call().await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("warm-up task");
    }
    let started = Instant::now();
    let until = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < until {
                let begun = Instant::now();
                call().await;
                latencies.push(begun.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("bench task"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    Phase {
        requests: latencies.len(),
        elapsed,
        median: pick(0.5),
        p99: pick(0.99),
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let seconds: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(5);
    let concurrency: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64);
    // `cargo bench` passes `--bench`; under `cargo test --all-targets` this runs briefly as a smoke test.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let duration = if benchmarking {
        Duration::from_secs(seconds)
    } else {
        Duration::from_millis(200)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let app = Router::new().route(
            "/{version}/resource/get",
            post(|| async { ([(axum::http::header::CONTENT_TYPE, "application/json")], RESOURCE) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let base = format!("http://{address}");

        let client = default_http_client()?;
        let transport = HttpV2Transport::new(client.clone(), &base, None)?;
        let mut registry = Registry::new();
        registry.register(RegisteredExtension::new("Acme", "1.0.0", Arc::new(transport)));
        let host = Arc::new(ExtensionHost::new(Arc::new(registry), HostSettings::default(), "http://bench/"));
        let key = ExtensionKey::new("Acme", "1.0.0");
        let locator = ResourceLocator {
            resource_type: "Acme.Queue/queues".into(),
            api_version: Some("2025-01-01".into()),
            identifiers: json!({ "name": "orders" }),
            config: None,
            config_id: Some("CFG".into()),
        };
        let body = serde_json::to_vec(&json!({ "type": "Acme.Queue/queues", "apiVersion": "2025-01-01",
            "identifiers": { "name": "orders" }, "configId": "CFG" }))?;
        let url = format!("{base}/1.0.0/resource/get");

        let plain_with = |contract_headers: bool| {
            let client = client.clone();
            let url = url.clone();
            let body = body.clone();
            move || {
                let client = client.clone();
                let url = url.clone();
                let body = body.clone();
                async move {
                    let mut request = client.post(&url).header("content-type", "application/json");
                    if contract_headers {
                        // What a contract-compliant client must send anyway (fixed values: no id generation).
                        request = request
                            .header("x-ms-client-request-id", "6f1c1c47-6c1b-4c0e-9a43-0d1f4d3e2b11")
                            .header("x-ms-correlation-request-id", "0b5e8f0e-1f43-4a5f-8d0c-2a7c9c6f2e10")
                            .header("referer", "http://bench/")
                            .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                            .header("tracestate", "");
                    }
                    let response = request.body(body).send().await.expect("plain request");
                    let bytes = response.bytes().await.expect("plain body");
                    assert!(!bytes.is_empty());
                }
            }
        };
        let hosted = {
            let host = host.clone();
            move || {
                let host = host.clone();
                let key = key.clone();
                let locator = locator.clone();
                async move {
                    let found = host.get(&key, &locator, &CallContext::default()).await.expect("host get");
                    assert!(found.is_some());
                }
            }
        };

        // Interleave the clients over several rounds so background load on the machine hits all of them alike;
        // report the median round for each.
        let rounds = if benchmarking { 3 } else { 1 };
        let mut results: Vec<(&str, usize, Vec<Phase>)> = vec![
            ("plain reqwest", concurrency, Vec::new()),
            ("plain reqwest + contract headers", concurrency, Vec::new()),
            ("cairn host", concurrency, Vec::new()),
            ("plain reqwest", 1, Vec::new()),
            ("plain reqwest + contract headers", 1, Vec::new()),
            ("cairn host", 1, Vec::new()),
        ];
        for _ in 0..rounds {
            for (index, (_, c, phases)) in results.iter_mut().enumerate() {
                let phase = match index % 3 {
                    0 => run(*c, duration, plain_with(false)).await,
                    1 => run(*c, duration, plain_with(true)).await,
                    _ => run(*c, duration, hosted.clone()).await,
                };
                phases.push(phase);
            }
        }
        let median_phase = |phases: &mut Vec<Phase>| -> Phase {
            phases.sort_by(|a, b| a.throughput().total_cmp(&b.throughput()));
            phases.remove(phases.len() / 2)
        };
        let summary: Vec<(&str, usize, Phase)> =
            results.into_iter().map(|(name, c, mut phases)| (name, c, median_phase(&mut phases))).collect();

        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        println!("| client | concurrency | requests | throughput (req/s) | median (µs) | p99 (µs) |");
        println!("|---|---|---|---|---|---|");
        for (name, c, phase) in &summary {
            println!(
                "| {name} | {c} | {} | {:.0} | {:.0} | {:.0} |",
                phase.requests,
                phase.throughput(),
                micros(phase.median),
                micros(phase.p99)
            );
        }
        let [plain, plain_headers, host_concurrent, plain_seq, plain_headers_seq, host_seq] = [0, 1, 2, 3, 4, 5].map(|i| &summary[i].2);
        println!();
        println!(
            "throughput ratio at concurrency {concurrency}: host / plain = {:.1}%, host / plain + contract headers = {:.1}%",
            100.0 * host_concurrent.throughput() / plain.throughput(),
            100.0 * host_concurrent.throughput() / plain_headers.throughput()
        );
        println!(
            "median added latency, sequential: {:.0} µs vs plain, {:.0} µs vs plain + contract headers",
            micros(host_seq.median) - micros(plain_seq.median),
            micros(host_seq.median) - micros(plain_headers_seq.median)
        );
        println!(
            "median added latency at concurrency {concurrency}: {:.0} µs vs plain, {:.0} µs vs plain + contract headers",
            micros(host_concurrent.median) - micros(plain.median),
            micros(host_concurrent.median) - micros(plain_headers.median)
        );
        anyhow::Ok(())
    })
}

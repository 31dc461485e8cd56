//! API load benchmark (a bench binary, not a timed test): throughput and p50/p99 latency of `cairn serve` (the built
//! binary) for three requests — GET of a deployment, PUT of a small deployment (no resources, so no extension call:
//! the figure is the API, the engine's acceptance and the store), and LIST of a resource group's stacks — on three
//! set-ups started side by side on one machine and measured in the same run:
//!
//! - one replica on SQLite (its own data directory, the default store);
//! - one replica on PostgreSQL (a throwaway cluster from `cairn-testpg`, its own database);
//! - three replicas on PostgreSQL (another such cluster), requests spread round-robin over them.
//!
//! The PostgreSQL clusters run with a production server's durability (`fsync`, `synchronous_commit` and
//! `full_page_writes` on, unlike the test suite's clusters), as SQLite runs with `synchronous=FULL`: the stores are
//! compared syncing every commit alike.
//!
//! `cargo bench -p cairn --bench api_load -- [--secs 10] [--concurrency 32] [--rounds 1]`
//!
//! Each set-up gets a resource group with 20 finished deployments (GETs pick one at random) and 20 stacks (each LIST
//! returns all 20). Each phase runs `concurrency` clients, each sending its next request as soon as the last one
//! was answered, for `secs` seconds after a one-second warm-up; latency is from sending a request to having read
//! its whole answer. With `--rounds N` the set-ups take turns N times, so load from elsewhere on the machine hits
//! each alike. Under `cargo test --all-targets` (no `--bench` argument) it runs a fraction of a second per phase with
//! two clients, as a smoke test of the same path.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/pgshared/mod.rs"]
mod pgshared;

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Server, serve_with};
use pgshared::{DURABLE, SharedStore};
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const GROUP: &str = "load";
const DEPLOYMENTS: &str = "api-version=2025-04-01";
const STACKS: &str = "api-version=2024-03-01";
const SEEDED: usize = 20;

struct Options {
    measure: Duration,
    warm_up: Duration,
    concurrency: usize,
    rounds: usize,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<f64>().ok())
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs the binary without it: a short smoke run.
    let measuring = args.iter().any(|a| a == "--bench");
    let (secs, warm_up, concurrency) = if measuring {
        (10.0, 1.0, 32.0)
    } else {
        (0.3, 0.1, 2.0)
    };
    Options {
        measure: Duration::from_secs_f64(value("--secs").unwrap_or(secs).max(0.1)),
        warm_up: Duration::from_secs_f64(warm_up),
        concurrency: value("--concurrency").unwrap_or(concurrency).max(1.0) as usize,
        rounds: value("--rounds").unwrap_or(1.0).max(1.0) as usize,
    }
}

/// One set-up: its servers (kept running while it is measured) and their base URLs.
struct Setup {
    label: &'static str,
    _servers: Vec<Server>,
    bases: Vec<String>,
}

fn replica(args: &[OsString]) -> Server {
    serve_with(|command| {
        command.args(["--listen", "127.0.0.1:0"]).args(args);
    })
}

fn group() -> String {
    format!("{SUB}/resourceGroups/{GROUP}")
}

fn deployment_body() -> Value {
    json!({ "properties": { "mode": "Incremental", "template": {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "size": { "type": "int", "defaultValue": 3 } },
        "variables": { "doubled": "[mul(parameters('size'), 2)]" },
        "resources": [],
        "outputs": { "doubled": { "type": "int", "value": "[variables('doubled')]" } }
    } } })
}

fn stack_body() -> Value {
    json!({ "properties": {
        "template": {
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "contentVersion": "1.0.0.0",
            "resources": []
        },
        "actionOnUnmanage": { "resources": "detach" },
        "denySettings": { "mode": "none" }
    } })
}

/// Sends a request and reads the whole answer: its status and the time it took.
async fn timed(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
) -> (u16, Duration) {
    let started = Instant::now();
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(body);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = response.bytes().await;
            (status, started.elapsed())
        }
        Err(_) => (0, started.elapsed()),
    }
}

/// Waits until the deployment or stack at `path` is terminal.
async fn settled(client: &reqwest::Client, base: &str, path: &str) {
    let started = Instant::now();
    loop {
        let body: Value = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("the server answers")
            .json()
            .await
            .unwrap_or(Value::Null);
        let state = body["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(state.as_str(), "succeeded" | "failed" | "canceled") {
            assert_eq!(state, "succeeded", "{path}: {body}");
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{path} is still {state}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The resource group, the deployments GETs read and the stacks LISTs return.
async fn seed(client: &reqwest::Client, base: &str, seeded: usize) {
    let (status, _) = timed(
        client,
        reqwest::Method::PUT,
        &format!("{base}{}?{DEPLOYMENTS}", group()),
        Some(&json!({ "location": "local" })),
    )
    .await;
    assert!(matches!(status, 200 | 201), "resource group: {status}");
    for index in 0..seeded {
        let deployment = format!(
            "{}/providers/Microsoft.Resources/deployments/seed-{index}?{DEPLOYMENTS}",
            group()
        );
        let (status, _) = timed(
            client,
            reqwest::Method::PUT,
            &format!("{base}{deployment}"),
            Some(&deployment_body()),
        )
        .await;
        assert!(matches!(status, 200 | 201), "seed deployment: {status}");
        settled(client, base, &deployment).await;
        let stack = format!(
            "{}/providers/Microsoft.Resources/deploymentStacks/seed-{index}?{STACKS}",
            group()
        );
        let (status, _) = timed(
            client,
            reqwest::Method::PUT,
            &format!("{base}{stack}"),
            Some(&stack_body()),
        )
        .await;
        assert!(matches!(status, 200 | 201), "seed stack: {status}");
        settled(client, base, &stack).await;
    }
}

#[derive(Clone, Copy)]
enum Phase {
    GetDeployment,
    PutDeployment,
    ListStacks,
}

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::GetDeployment => "GET deployment",
            Phase::PutDeployment => "PUT deployment",
            Phase::ListStacks => "LIST stacks",
        }
    }
}

struct Measured {
    requests: usize,
    errors: usize,
    throughput: f64,
    p50: Duration,
    p99: Duration,
}

/// Runs one phase against a set-up: `concurrency` clients, requests round-robin over its replicas.
async fn measure(
    setup: &Setup,
    phase: Phase,
    options: &Options,
    seeded: usize,
    round: usize,
) -> Measured {
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let measure_from = started + options.warm_up;
    let until = measure_from + options.measure;
    let mut clients = tokio::task::JoinSet::new();
    for worker in 0..options.concurrency {
        let client = client.clone();
        let bases = setup.bases.clone();
        let next = next.clone();
        clients.spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0;
            let mut sent = 0usize;
            let body = deployment_body();
            while Instant::now() < until {
                let base = &bases[next.fetch_add(1, Ordering::Relaxed) % bases.len()];
                let (method, path, body) = match phase {
                    Phase::GetDeployment => (
                        reqwest::Method::GET,
                        format!(
                            "{}/providers/Microsoft.Resources/deployments/seed-{}?{DEPLOYMENTS}",
                            group(),
                            (worker + sent) % seeded
                        ),
                        None,
                    ),
                    Phase::PutDeployment => (
                        reqwest::Method::PUT,
                        format!(
                            "{}/providers/Microsoft.Resources/deployments/put-{round}-{worker}-{sent}?{DEPLOYMENTS}",
                            group()
                        ),
                        Some(&body),
                    ),
                    Phase::ListStacks => (
                        reqwest::Method::GET,
                        format!(
                            "{}/providers/Microsoft.Resources/deploymentStacks?{STACKS}",
                            group()
                        ),
                        None,
                    ),
                };
                sent += 1;
                let sent_at = Instant::now();
                let (status, latency) =
                    timed(&client, method, &format!("{base}{path}"), body).await;
                if sent_at < measure_from {
                    continue;
                }
                if (200..300).contains(&status) {
                    latencies.push(latency);
                } else {
                    errors += 1;
                }
            }
            (latencies, errors)
        });
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    while let Some(joined) = clients.join_next().await {
        let (mine, failed) = joined.expect("a client");
        latencies.extend(mine);
        errors += failed;
    }
    let elapsed = Instant::now().duration_since(measure_from).as_secs_f64();
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    Measured {
        requests: latencies.len(),
        errors,
        throughput: latencies.len() as f64 / elapsed,
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn millis(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64() * 1000.0)
}

fn main() {
    let options = options();
    let seeded = if options.measure >= Duration::from_secs(1) {
        SEEDED
    } else {
        3
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let data_dir = tempfile::tempdir().expect("tempdir");
    // No resource calls an extension; the registry the PostgreSQL replicas need names one nobody calls.
    let unused = "127.0.0.1:9".parse().expect("an address");
    let (one, three) = runtime.block_on(async {
        (
            SharedStore::start_with("load_one", unused, json!({}), &DURABLE).await,
            SharedStore::start_with("load_three", unused, json!({}), &DURABLE).await,
        )
    });
    let sqlite_args: Vec<OsString> = vec!["--data-dir".into(), data_dir.path().into()];
    let setups = [
        ("1 replica, SQLite", vec![replica(&sqlite_args)]),
        ("1 replica, PostgreSQL", vec![replica(&one.replica_args())]),
        (
            "3 replicas, PostgreSQL",
            (0..3).map(|_| replica(&three.replica_args())).collect(),
        ),
    ]
    .map(|(label, servers)| Setup {
        label,
        bases: servers.iter().map(|server| server.url.clone()).collect(),
        _servers: servers,
    });
    runtime.block_on(async {
        let client = reqwest::Client::new();
        for setup in &setups {
            seed(&client, &setup.bases[0], seeded).await;
        }
    });
    println!(
        "api_load: {} clients, {:.1} s per phase after a {:.1} s warm-up, {} round(s); {seeded} deployments and \
         {seeded} stacks per set-up",
        options.concurrency,
        options.measure.as_secs_f64(),
        options.warm_up.as_secs_f64(),
        options.rounds
    );
    println!(
        "| round | set-up | request | requests | errors | throughput (req/s) | p50 (ms) | p99 (ms) |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for round in 1..=options.rounds {
        for phase in [
            Phase::GetDeployment,
            Phase::PutDeployment,
            Phase::ListStacks,
        ] {
            for setup in &setups {
                let measured = runtime.block_on(measure(setup, phase, &options, seeded, round));
                println!(
                    "| {round} | {} | {} | {} | {} | {:.0} | {} | {} |",
                    setup.label,
                    phase.label(),
                    measured.requests,
                    measured.errors,
                    measured.throughput,
                    millis(measured.p50),
                    millis(measured.p99)
                );
                assert!(measured.requests > 0, "{}: nothing answered", setup.label);
                assert_eq!(measured.errors, 0, "{}: requests failed", setup.label);
            }
        }
    }
}

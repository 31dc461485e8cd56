//! Engine throughput benchmarks (a bench binary, not a timed test): a 100-step dependency chain against an
//! extension with 10 ms latency (ideal: 1 s), and 1,000 independent resources at 50 ms latency (ideal: 50 ms per
//! `parallelism` resources). The extension is in process and only sleeps, so what is measured is the engine: the
//! scheduler, template evaluation, host calls, and the store's journal and inventory writes (SQLite in a temp dir).
//!
//! `cargo bench -p cairn-engine --bench engine_throughput -- [--parallelism N] [--durability full|normal] [--runs N]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_engine::{DeployOptions, Engine, EngineSettings, Providers};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_store::{Precondition, ResourceGroup, Store, Tags, Timestamp};
use cairn_store_sqlite::{Durability, SqliteOptions, SqliteStore};
use serde_json::{Value, json};

const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/bench";

/// An extension that sleeps `latency` per createOrUpdate and echoes the resource back.
struct SleepyExtension {
    latency: Duration,
}

impl ExtensionTransport for SleepyExtension {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            if request.operation != Operation::CreateOrUpdate {
                return Ok(TransportResponse::json(
                    404,
                    br#"{"error":{"code":"ResourceNotFound","message":"gone"}}"#.to_vec(),
                ));
            }
            tokio::time::sleep(self.latency).await;
            let name = body
                .pointer("/properties/name")
                .cloned()
                .unwrap_or(Value::Null);
            let response = json!({
                "type": body.get("type"), "apiVersion": body.get("apiVersion"),
                "identifiers": {"name": name}, "properties": body.get("properties"),
                "config": body.get("config"), "configId": "bench", "status": "Succeeded"
            });
            Ok(TransportResponse::json(
                200,
                response.to_string().into_bytes(),
            ))
        })
    }
}

struct Options {
    parallelism: usize,
    durability: Durability,
    runs: usize,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    Options {
        parallelism: value("--parallelism")
            .and_then(|v| v.parse().ok())
            .unwrap_or(50),
        durability: match value("--durability").as_deref() {
            Some("normal") => Durability::Normal,
            _ => Durability::Full,
        },
        runs: value("--runs").and_then(|v| v.parse().ok()).unwrap_or(3),
    }
}

async fn engine(dir: &std::path::Path, latency: Duration, o: &Options) -> Engine {
    let key = cairn_store::crypto::MasterKey::generate().expect("a key");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open_with(
            dir,
            &key,
            SqliteOptions {
                durability: o.durability,
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("store"),
    );
    store
        .put_resource_group(
            ResourceGroup {
                subscription_id: "00000000-0000-0000-0000-000000000001".into(),
                name: "bench".into(),
                location: "westus".into(),
                tags: Tags::new(),
                managed_by: None,
                provisioning_state: "Succeeded".into(),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .expect("group");
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        "Sleepy",
        "1.0.0",
        Arc::new(SleepyExtension { latency }),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
        "http://localhost/bench",
    ));
    Engine::new(
        store,
        host,
        Providers::empty(),
        EngineSettings {
            parallelism: o.parallelism,
            ..EngineSettings::default()
        },
    )
    .expect("engine")
}

fn extension_template(resources: Value) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "s": { "name": "Sleepy", "version": "1.0.0", "config": { "zone": { "defaultValue": "z" } } } },
        "resources": resources
    })
}

fn chain_template(steps: usize) -> Value {
    let mut resources = serde_json::Map::new();
    for i in 0..steps {
        let mut r = json!({ "extension": "s", "type": "step", "apiVersion": "v1",
                            "properties": { "name": format!("s{i}") } });
        if i > 0 {
            // An implicit dependency through reference(), as real templates chain values.
            r["properties"]["previous"] = json!(format!("[reference('r{}').name]", i - 1));
        }
        resources.insert(format!("r{i}"), r);
    }
    extension_template(Value::Object(resources))
}

/// `total` independent resources in modules of at most 250 (ARM allows 800 per deployment).
fn wide_template(total: usize) -> Value {
    let per_module = 250;
    let modules = total.div_ceil(per_module);
    let mut resources = serde_json::Map::new();
    for m in 0..modules {
        let count = per_module.min(total - m * per_module);
        let child = json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental",
            "contentVersion": "1.0.0.0",
            "extensions": { "s": { "name": "Sleepy", "version": "1.0.0" } },
            "resources": {
                "many": { "extension": "s", "type": "item", "apiVersion": "v1",
                          "copy": { "name": "many", "count": count },
                          "properties": { "name": format!("[format('m{m}-{{0}}', copyIndex())]") } }
            }
        });
        resources.insert(
            format!("module{m}"),
            json!({ "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": format!("module{m}"),
                    "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                    "extensionConfigs": { "s": "[extensions('s').config]" },
                                    "template": child } }),
        );
    }
    extension_template(Value::Object(resources))
}

async fn run(engine: &Engine, name: &str, template: Value) -> Duration {
    let request = serde_json::from_value(
        json!({ "properties": { "mode": "Incremental", "template": template } }),
    )
    .expect("request");
    let start = Instant::now();
    let mut handle = engine
        .create_or_update(RG, name, request, DeployOptions::default())
        .await
        .expect("accepted");
    let done = handle.wait().await.expect("record");
    let elapsed = start.elapsed();
    let state = done.properties.provisioning_state.map(|s| s.to_string());
    assert_eq!(
        state.as_deref(),
        Some("Succeeded"),
        "{:?}",
        done.properties.error
    );
    elapsed
}

fn report(label: &str, ideal: Duration, times: &[Duration]) {
    let best = times.iter().min().copied().unwrap_or_default();
    let median = {
        let mut sorted = times.to_vec();
        sorted.sort();
        sorted[sorted.len() / 2]
    };
    println!(
        "{label}: ideal {:.3} s, best {:.3} s ({:.2}x), median {:.3} s ({:.2}x), runs {:?}",
        ideal.as_secs_f64(),
        best.as_secs_f64(),
        best.as_secs_f64() / ideal.as_secs_f64(),
        median.as_secs_f64(),
        median.as_secs_f64() / ideal.as_secs_f64(),
        times
            .iter()
            .map(|t| format!("{:.3}", t.as_secs_f64()))
            .collect::<Vec<_>>()
    );
}

fn main() {
    let o = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!(
            "parallelism {}, durability {:?}, {} runs each",
            o.parallelism, o.durability, o.runs
        );
        // The timer's own cost: 100 sequential 10 ms sleeps, no engine (tokio sleeps round up to whole ms).
        let floor = Instant::now();
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        println!(
            "timer floor: 100 x 10 ms sleeps take {:.3} s",
            floor.elapsed().as_secs_f64()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let chain_engine = engine(&dir.path().join("chain"), Duration::from_millis(10), &o).await;
        let mut times = Vec::new();
        for i in 0..o.runs {
            times.push(run(&chain_engine, &format!("chain{i}"), chain_template(100)).await);
        }
        report("100-step chain @ 10 ms", Duration::from_secs(1), &times);

        let wide_engine = engine(&dir.path().join("wide"), Duration::from_millis(50), &o).await;
        let mut times = Vec::new();
        for i in 0..o.runs {
            times.push(run(&wide_engine, &format!("wide{i}"), wide_template(1_000)).await);
        }
        let waves = 1_000usize.div_ceil(o.parallelism.max(1)) as u32;
        report(
            &format!("1,000 independent @ 50 ms, parallelism {}", o.parallelism),
            Duration::from_millis(50) * waves,
            &times,
        );
    });
}

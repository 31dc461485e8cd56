//! Bytes the SQLite store writes per resource, for deployments of 100 and 5,000 resources (target: within 20% of
//! each other, i.e. per-resource writes do not grow with deployment size).
//!
//! Each simulated deployment: create the run (request with a template of N resources), mark it Running, then per
//! resource two journal appends (Accepted, Running) and a third (Succeeded) recorded with its inventory upsert in
//! one commit (`record_step`), and finally one update with outputs and `outputResources` (N IDs). Resource names
//! are scattered, as real ones are. Measured from just after open to just after a final
//! `wal_checkpoint(TRUNCATE)`, for the store's checkpoint interval, SQLite's default one, and none (a single
//! checkpoint at the end, so the figure is the WAL volume plus one copy of the changed pages):
//! - `write()` bytes: the growth of `wchar` in `/proc/self/io` (every byte this process handed to `write`/`pwrite`:
//!   WAL frames, checkpoint copies into the database file); Linux only;
//! - database growth: the database file's size after the checkpoint minus its size after open.
//!
//! Run: `cargo bench -p cairn-store-sqlite --bench bytes_per_resource` (optionally `-- 100 5000 20000`).

use std::path::Path;
use std::time::Instant;

use cairn_store::crypto::MasterKey;
use cairn_store::{
    DeploymentId, DeploymentKey, DeploymentStatus, DeploymentUpdate, InventoryChange,
    ManagedResource, NewDeployment, OperationStep, Precondition, ResourceKey, Store, Tags,
    Timestamp,
};
use cairn_store_sqlite::{DATABASE_FILE_NAME, Durability, SqliteOptions, SqliteStore};
use serde_json::json;

const SCOPE: &str = "/subscriptions/7d2c9f40-1b8e-4c55-9a57-3f0e2a6b1c11/resourceGroups/rg-bench";

struct Measurement {
    resources: usize,
    write_bytes: Option<u64>,
    db_growth: u64,
    seconds: f64,
}

/// `wchar` from `/proc/self/io`: bytes passed to write-like system calls by this process so far.
fn process_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("wchar:"))
        .and_then(|value| value.trim().parse().ok())
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Resource names are scattered (a hash of the index), as real names are, so inventory keys do not arrive in
/// key order.
fn resource_name(index: usize) -> String {
    format!(
        "st{:012x}",
        (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16
    )
}

fn resource_id(index: usize) -> String {
    format!(
        "{SCOPE}/providers/Microsoft.Storage/storageAccounts/{}",
        resource_name(index)
    )
}

fn template(resources: usize) -> serde_json::Value {
    let definitions: Vec<_> = (0..resources)
        .map(|index| {
            json!({
                "type": "Microsoft.Storage/storageAccounts",
                "apiVersion": "2023-01-01",
                "name": resource_name(index),
                "location": "[parameters('location')]",
                "sku": {"name": "Standard_LRS"},
                "kind": "StorageV2",
                "properties": {"minimumTlsVersion": "TLS1_2", "supportsHttpsTrafficOnly": true}
            })
        })
        .collect();
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"location": {"type": "string"}},
        "resources": definitions
    })
}

fn journal_step(run: &DeploymentId, index: usize, state: &str, millis: i64) -> OperationStep {
    OperationStep {
        deployment_id: run.clone(),
        operation_id: format!(
            "{:016X}",
            (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ),
        target_resource: Some(json!({
            "id": resource_id(index),
            "resourceType": "Microsoft.Storage/storageAccounts",
            "resourceName": resource_name(index),
            "apiVersion": "2023-01-01",
            "symbolicName": format!("storage[{index}]"),
        })),
        provisioning_operation: "Create".into(),
        provisioning_state: state.into(),
        status_code: (state == "Succeeded").then(|| "OK".to_owned()),
        status_message: None,
        service_request_id: Some(format!("req-{index:08}")),
        timestamp: Timestamp::from_unix_millis(millis),
        duration_ms: Some(120),
        extension: None,
        request_content: None,
        response_content: None,
    }
}

async fn simulate(store: &dyn Store, resources: usize) -> anyhow::Result<()> {
    let now = Timestamp::from_unix_millis(1_767_225_600_000);
    let run = store
        .put_deployment(
            NewDeployment {
                id: DeploymentId::generate(),
                key: DeploymentKey::new(SCOPE, format!("bench-{resources}")),
                parent: None,
                location: None,
                tags: Tags::new(),
                request: json!({"mode": "Incremental", "template": template(resources),
                                "parameters": {"location": {"value": "westus"}}}),
                status: DeploymentStatus::Accepted,
                correlation_id: "6f1c2b3a-0000-4000-8000-000000000001".into(),
                stack_initiated: false,
                created_at: now,
                owner: None,
            },
            Precondition::MustNotExist,
        )
        .await?;
    let running = DeploymentUpdate {
        status: Some(DeploymentStatus::Running),
        started_at: Some(now),
        ..DeploymentUpdate::at(now)
    };
    let mut record = store
        .update_deployment(&run.id, run.version, running)
        .await?;
    let mut millis = now.unix_millis();
    for index in 0..resources {
        for state in ["Accepted", "Running"] {
            millis += 1;
            store
                .append_operation(journal_step(&run.id, index, state, millis), None)
                .await?;
        }
        millis += 1;
        let resource = ManagedResource {
            key: ResourceKey::arm(&resource_id(index)),
            resource_id: Some(resource_id(index)),
            resource_type: "Microsoft.Storage/storageAccounts".into(),
            api_version: Some("2023-01-01".into()),
            properties: json!({
                "location": "westus", "sku": {"name": "Standard_LRS", "tier": "Standard"}, "kind": "StorageV2",
                "properties": {"minimumTlsVersion": "TLS1_2", "supportsHttpsTrafficOnly": true,
                               "provisioningState": "Succeeded",
                               "primaryEndpoints": {"blob": format!("https://{}.blob.core.windows.net/", resource_name(index))}}
            }),
            applied: None,
            deployment: Some(run.key.clone()),
            extension: None,
            updated_at: Timestamp::from_unix_millis(millis),
        };
        // The finished create is journaled and inventoried in one commit.
        store
            .record_step(
                journal_step(&run.id, index, "Succeeded", millis),
                InventoryChange::Put(Box::new(resource)),
                None,
            )
            .await?;
    }
    let output_resources: Vec<_> = (0..resources)
        .map(|index| json!({"id": resource_id(index)}))
        .collect();
    let done = DeploymentUpdate {
        status: Some(DeploymentStatus::Succeeded),
        finished_at: Some(Timestamp::from_unix_millis(millis)),
        outputs: Some(json!({"count": {"type": "Int", "value": resources}})),
        output_resources: Some(json!(output_resources)),
        ..DeploymentUpdate::at(Timestamp::from_unix_millis(millis))
    };
    record = store
        .update_deployment(&record.id, record.version, done)
        .await?;
    anyhow::ensure!(record.status == DeploymentStatus::Succeeded);
    Ok(())
}

async fn measure(resources: usize, wal_autocheckpoint_pages: u32) -> anyhow::Result<Measurement> {
    let dir = tempfile::tempdir()?;
    let key = MasterKey::generate()?;
    let options = SqliteOptions {
        durability: Durability::Full,
        wal_autocheckpoint_pages,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(dir.path(), &key, options).await?;
    store.checkpoint().await?;
    let db_path = dir.path().join(DATABASE_FILE_NAME);
    let db_before = file_len(&db_path);
    let writes_before = process_write_bytes();
    let started = Instant::now();
    simulate(&store, resources).await?;
    store.checkpoint().await?;
    let seconds = started.elapsed().as_secs_f64();
    let write_bytes = match (writes_before, process_write_bytes()) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    let db_growth = file_len(&db_path).saturating_sub(db_before);
    store.close().await?;
    Ok(Measurement {
        resources,
        write_bytes,
        db_growth,
        seconds,
    })
}

fn main() -> anyhow::Result<()> {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    // `cargo bench` passes `--bench`; under `cargo test --all-targets` a small run is a smoke test.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    if sizes.is_empty() {
        sizes = if benchmarking {
            vec![100, 5_000]
        } else {
            vec![20, 100]
        };
    }
    let default_pages = SqliteOptions::default().wal_autocheckpoint_pages;
    // The store's default; SQLite's own default; no automatic checkpoint (one at the end: the WAL volume).
    let configurations = [
        (format!("default ({default_pages} pages)"), default_pages),
        ("sqlite default (1000)".to_owned(), 1_000),
        ("checkpoint at end only".to_owned(), 0),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "bytes_per_resource: SQLite store, WAL, synchronous=FULL; per resource 2 journal appends + 1 journal"
    );
    println!(
        "append with inventory upsert (record_step); plus the request (template of N resources) and a final update"
    );
    println!(
        "{:<26} {:>9} {:>15} {:>13} {:>12} {:>12} {:>8}",
        "wal_autocheckpoint",
        "resources",
        "write() bytes",
        "per resource",
        "db growth",
        "per resource",
        "seconds"
    );
    for (label, pages) in &configurations {
        let mut results = Vec::new();
        for &size in &sizes {
            let m = runtime.block_on(measure(size, *pages))?;
            let per = |total: u64| total as f64 / m.resources as f64;
            println!(
                "{:<26} {:>9} {:>15} {:>13} {:>12} {:>12.0} {:>8.2}",
                label,
                m.resources,
                m.write_bytes.map_or("n/a".to_owned(), |b| b.to_string()),
                m.write_bytes
                    .map_or("n/a".to_owned(), |b| format!("{:.0}", per(b))),
                m.db_growth,
                per(m.db_growth),
                m.seconds
            );
            results.push(m);
        }
        if let (Some(first), Some(last)) = (results.first(), results.last())
            && results.len() > 1
            && let (Some(a), Some(b)) = (first.write_bytes, last.write_bytes)
        {
            let ratio = (b as f64 / last.resources as f64) / (a as f64 / first.resources as f64);
            println!(
                "{:<26} write() bytes per resource, {} vs {}: ratio {ratio:.3} ({})",
                label,
                last.resources,
                first.resources,
                if (0.8..=1.2).contains(&ratio) {
                    "within 20%"
                } else {
                    "NOT within 20%"
                }
            );
        }
    }
    Ok(())
}

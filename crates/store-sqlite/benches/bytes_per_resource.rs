//! Bytes the SQLite store writes per resource, for deployments of 100 and 5,000 resources (target: within 20% of
//! each other, i.e. per-resource writes do not grow with deployment size).
//!
//! Each simulated deployment (`cairn_store::bench::simulate`, shared with the PostgreSQL store's bench): create the
//! run (request with a template of N resources), mark it Running, then per resource two journal appends (Accepted,
//! Running) and a third (Succeeded) recorded with its inventory upsert in one commit (`record_step`), and finally
//! one update with outputs and `outputResources` (N IDs). Resource names are scattered, as real ones are. Measured
//! from just after open to just after a final
//! `wal_checkpoint(TRUNCATE)`, for the store's checkpoint interval, SQLite's default one, and none (a single
//! checkpoint at the end, so the figure is the WAL volume plus one copy of the changed pages):
//! - `write()` bytes: the growth of `wchar` in `/proc/self/io` (every byte this process handed to `write`/`pwrite`:
//!   WAL frames, checkpoint copies into the database file); Linux only;
//! - database growth: the database file's size after the checkpoint minus its size after open.
//!
//! Run: `cargo bench -p cairn-store-sqlite --bench bytes_per_resource` (optionally `-- 100 5000 20000`).

use std::path::Path;
use std::time::Instant;

use cairn_store::Store;
use cairn_store::bench::simulate;
use cairn_store::crypto::MasterKey;
use cairn_store_sqlite::{DATABASE_FILE_NAME, Durability, SqliteOptions, SqliteStore};

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

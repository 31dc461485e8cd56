//! Bytes the PostgreSQL store writes per resource, for deployments of 100 and 5,000 resources (target: within 20% of
//! each other, i.e. per-resource writes do not grow with deployment size). The sibling of the SQLite store's bench,
//! with the same workload (`cairn_store::bench::simulate`: the run and its request, three journal steps per resource
//! — the last committed with the resource's inventory upsert — and a final update listing every resource).
//!
//! Each size runs on a fresh database of a throwaway cluster (`cairn-testpg`: `fsync` and `synchronous_commit` off,
//! which change no byte counts; autovacuum off, so the figures are the store's own writes). The database first gets
//! an earlier deployment of as many other resources — a store in use, whose tables and indexes already have pages —
//! then a `CHECKPOINT`; the measured deployment follows:
//! - **WAL bytes**: `pg_wal_lsn_diff` of `pg_current_wal_insert_lsn()` from just before the measured deployment to
//!   just after it finished — every change PostgreSQL logs for the store's writes, table and
//!   index pages alike; measured on a cluster with `full_page_writes` off (the records themselves) and on one with
//!   it on (as in production: the first change of each page after a checkpoint logs the whole 8 KiB page);
//! - **relation growth**: the growth of `pg_total_relation_size` (heap, indexes, TOAST) over the store's tables.
//!
//! Run: `cargo bench -p cairn-store-postgres --bench bytes_per_resource` (optionally `-- 100 5000 20000`). Under
//! `cargo test --all-targets` (no `--bench` argument) a small run is a smoke test.

use std::time::Instant;

use cairn_store::Store;
use cairn_store::bench::simulate_deployment;
use cairn_store::crypto::MasterKey;
use cairn_store_postgres::PostgresStore;
use cairn_testpg::TestPostgres;
use sqlx::{AssertSqlSafe, PgPool};

struct Measurement {
    resources: usize,
    wal_bytes: i64,
    relation_growth: i64,
    seconds: f64,
}

/// The total size of the store's tables with their indexes and TOAST.
async fn relation_bytes(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'",
    )
    .fetch_one(pool)
    .await?)
}

async fn measure(
    cluster: &TestPostgres,
    admin: &PgPool,
    database: &str,
    resources: usize,
) -> anyhow::Result<Measurement> {
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(admin)
        .await?;
    let url = cluster.url_for_database(database);
    let key = MasterKey::generate()?;
    let store = PostgresStore::open(&url, &key).await?;
    let probe = PgPool::connect(&url).await?;
    // A store in use: an earlier deployment of as many other resources, then a checkpoint.
    simulate_deployment(&store, "earlier", resources..2 * resources).await?;
    sqlx::query("CHECKPOINT").execute(&probe).await?;
    let relations_before = relation_bytes(&probe).await?;
    let lsn_before: String = sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(&probe)
        .await?;
    let started = Instant::now();
    simulate_deployment(&store, "measured", 0..resources).await?;
    let seconds = started.elapsed().as_secs_f64();
    let wal_bytes: i64 = sqlx::query_scalar(
        "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint",
    )
    .bind(&lsn_before)
    .fetch_one(&probe)
    .await?;
    let relation_growth = relation_bytes(&probe).await? - relations_before;
    probe.close().await;
    store.close().await?;
    Ok(Measurement {
        resources,
        wal_bytes,
        relation_growth,
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Autovacuum off: the figures are the store's own writes. `full_page_writes` off is the test clusters' default.
    let clusters = [false, true].map(|full_page_writes| {
        let setting = if full_page_writes { "on" } else { "off" };
        let cluster =
            TestPostgres::start_with(&[("autovacuum", "off"), ("full_page_writes", setting)]);
        (full_page_writes, cluster)
    });
    println!(
        "bytes_per_resource: PostgreSQL {} store; per resource 2 journal appends + 1 journal append with inventory",
        clusters[0].1.major_version()
    );
    println!("upsert (record_step); plus the request (template of N resources) and a final update");
    println!(
        "{:<18} {:>9} {:>13} {:>13} {:>16} {:>13} {:>8}",
        "full_page_writes",
        "resources",
        "WAL bytes",
        "per resource",
        "relation growth",
        "per resource",
        "seconds"
    );
    let mut database = 0;
    for (full_page_writes, cluster) in &clusters {
        let admin = runtime.block_on(PgPool::connect(&cluster.url()))?;
        let label = if *full_page_writes { "on" } else { "off" };
        let mut results = Vec::new();
        for &size in &sizes {
            database += 1;
            let m =
                runtime.block_on(measure(cluster, &admin, &format!("bytes_{database}"), size))?;
            let per = |total: i64| total as f64 / m.resources as f64;
            println!(
                "{:<18} {:>9} {:>13} {:>13.0} {:>16} {:>13.0} {:>8.2}",
                label,
                m.resources,
                m.wal_bytes,
                per(m.wal_bytes),
                m.relation_growth,
                per(m.relation_growth),
                m.seconds
            );
            results.push(m);
        }
        if let (Some(first), Some(last)) = (results.first(), results.last())
            && results.len() > 1
        {
            let per = |m: &Measurement, total: i64| total as f64 / m.resources as f64;
            let wal = per(last, last.wal_bytes) / per(first, first.wal_bytes);
            let growth = per(last, last.relation_growth) / per(first, first.relation_growth);
            println!(
                "{label:<18} per resource, {} vs {}: WAL ratio {wal:.3} ({}), relation growth ratio {growth:.3}",
                last.resources,
                first.resources,
                if (0.8..=1.2).contains(&wal) {
                    "within 20%"
                } else {
                    "NOT within 20%"
                }
            );
        }
        runtime.block_on(admin.close());
    }
    Ok(())
}

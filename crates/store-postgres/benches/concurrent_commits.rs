//! How PostgreSQL syncs the store's per-step commits when many deployments write at once — the evidence for the
//! PostgreSQL store committing each journal step in its own transaction instead of batching them as the SQLite
//! store's group commit does (`docs/store.md`).
//!
//! On a throwaway cluster with a production server's durability (`fsync`, `synchronous_commit` and
//! `full_page_writes` on), `D` simulated deployments (`cairn_store::bench::simulate_deployment`: three journal
//! steps per resource, the last committed with the resource's inventory upsert, each write awaited before the
//! next, as a running deployment's steps are) of `R` resources each run at once, for `D` = 1 and `D` = 20. For each
//! it reports store writes per second, the database's commits (`pg_stat_database.xact_commit`) and the cluster's
//! WAL syncs (`pg_stat_wal.wal_sync`) over the run: when concurrent commits share one WAL flush (PostgreSQL's own
//! group commit), commits per sync rise above 1 with the concurrency.
//!
//! Run: `cargo bench -p cairn-store-postgres --bench concurrent_commits` (optionally `-- <resources per
//! deployment>`, default 250). Under `cargo test --all-targets` (no `--bench` argument) a small run is a smoke test.

use std::time::Instant;

use cairn_store::Store;
use cairn_store::bench::simulate_deployment;
use cairn_store::crypto::MasterKey;
use cairn_store_postgres::PostgresStore;
use cairn_testpg::TestPostgres;
use sqlx::{AssertSqlSafe, PgPool};

struct Counters {
    commits: i64,
    syncs: i64,
}

async fn counters(probe: &PgPool, database: &str) -> anyhow::Result<Counters> {
    // Statistics are read in a snapshot per transaction: clear it so each call sees the current counts.
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(probe)
        .await?;
    let commits: i64 =
        sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
            .bind(database)
            .fetch_one(probe)
            .await?;
    let syncs: i64 = sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(probe)
        .await?;
    Ok(Counters { commits, syncs })
}

async fn measure(
    cluster: &TestPostgres,
    admin: &PgPool,
    database: &str,
    deployments: usize,
    resources: usize,
) -> anyhow::Result<()> {
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(admin)
        .await?;
    let url = cluster.url_for_database(database);
    let key = MasterKey::generate()?;
    let store = PostgresStore::open(&url, &key).await?;
    let probe = PgPool::connect(&url).await?;
    let before = counters(&probe, database).await?;
    let started = Instant::now();
    let store = std::sync::Arc::new(store);
    let mut runs = tokio::task::JoinSet::new();
    for d in 0..deployments {
        let store = store.clone();
        runs.spawn(async move {
            simulate_deployment(
                &*store,
                &format!("d{d}"),
                d * resources..(d + 1) * resources,
            )
            .await
        });
    }
    while let Some(result) = runs.join_next().await {
        result??;
    }
    let seconds = started.elapsed().as_secs_f64();
    // A backend reports its statistics when it exits at the latest: close the store's connections first.
    if let Some(store) = std::sync::Arc::into_inner(store) {
        store.close().await?;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let after = counters(&probe, database).await?;
    let writes = deployments * resources * 3;
    let commits = after.commits - before.commits;
    let syncs = after.syncs - before.syncs;
    println!(
        "{deployments:>11} {writes:>8} {seconds:>8.2} {:>10.0} {commits:>8} {syncs:>8} {:>15.2}",
        writes as f64 / seconds,
        commits as f64 / syncs.max(1) as f64,
    );
    probe.close().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let resources = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse::<usize>().ok())
        .unwrap_or(if benchmarking { 250 } else { 10 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cluster = TestPostgres::start_with(&[
        ("fsync", "on"),
        ("synchronous_commit", "on"),
        ("full_page_writes", "on"),
    ]);
    println!(
        "concurrent_commits: PostgreSQL {} store, {resources} resources per deployment (3 writes each)",
        cluster.major_version()
    );
    println!(
        "{:>11} {:>8} {:>8} {:>10} {:>8} {:>8} {:>15}",
        "deployments", "writes", "seconds", "writes/s", "commits", "syncs", "commits/sync"
    );
    let admin = runtime.block_on(PgPool::connect(&cluster.url()))?;
    for (n, deployments) in [1, 20].into_iter().enumerate() {
        runtime.block_on(measure(
            &cluster,
            &admin,
            &format!("commits_{n}"),
            deployments,
            resources,
        ))?;
    }
    runtime.block_on(admin.close());
    Ok(())
}

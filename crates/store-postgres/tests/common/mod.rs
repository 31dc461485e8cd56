//! The PostgreSQL store's test harness: one throwaway cluster per test binary (`cairn-testpg`), a fresh database
//! per case, and a small runner. The test binaries use it instead of libtest (`harness = false`) because a cluster
//! shared between libtest's tests would live in a `static`, which is never dropped, so the server would outlive
//! the run; here it is stopped when `run` returns. `cargo test -p cairn-store-postgres --test NAME -- FILTER` runs
//! the cases whose names contain FILTER.

#![allow(dead_code)] // each test binary uses a subset

use std::future::Future;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn_store::crypto::MasterKey;
use cairn_store_postgres::PostgresStore;
use cairn_testpg::TestPostgres;
use sqlx::PgPool;

/// The running cluster and a superuser pool on its `postgres` database.
pub struct Cluster {
    pub server: TestPostgres,
    pub admin: PgPool,
    next: AtomicU32,
}

impl Cluster {
    async fn start() -> Cluster {
        let server = TestPostgres::start();
        let admin = PgPool::connect(&server.url())
            .await
            .expect("connect as superuser");
        Cluster {
            server,
            admin,
            next: AtomicU32::new(0),
        }
    }

    /// A new empty database; its URL.
    pub async fn fresh_database(&self) -> String {
        let name = format!("cairn_{}", self.next.fetch_add(1, Ordering::SeqCst));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&self.admin)
            .await
            .expect("create database");
        self.server.url_for_database(&name)
    }

    /// A store on a new empty database, with a fresh master key.
    pub async fn fresh_store(&self) -> PostgresStore {
        let url = self.fresh_database().await;
        let key = MasterKey::generate().expect("a key");
        PostgresStore::open(&url, &key).await.expect("open")
    }
}

pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A named test case on the shared cluster.
pub struct Case {
    name: String,
    body: Box<dyn for<'a> Fn(&'a Cluster) -> CaseFuture<'a>>,
}

impl Case {
    pub fn new(
        name: impl Into<String>,
        body: impl for<'a> Fn(&'a Cluster) -> CaseFuture<'a> + 'static,
    ) -> Case {
        Case {
            name: name.into(),
            body: Box::new(body),
        }
    }
}

/// Runs the cases (those whose names contain the first non-flag argument, when there is one) one after the other
/// on one cluster, reports each like libtest does, and fails when one panicked.
pub fn run(cases: Vec<Case>) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for case in &selected {
            println!("{}: test", case.name);
        }
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let cluster = runtime.block_on(Cluster::start());
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for case in &selected {
        print!("test {} ... ", case.name);
        let _ = std::io::stdout().flush();
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on((case.body)(&cluster))));
        match outcome {
            Ok(()) => println!("ok"),
            Err(_) => {
                println!("FAILED");
                failed.push(case.name.clone());
            }
        }
    }
    let passed = selected.len() - failed.len();
    if failed.is_empty() {
        println!("\ntest result: ok. {passed} passed; 0 failed\n");
        ExitCode::SUCCESS
    } else {
        println!("\nfailures:\n    {}", failed.join("\n    "));
        println!("\nserver log:\n{}", cluster.server.log());
        println!(
            "\ntest result: FAILED. {passed} passed; {} failed\n",
            failed.len()
        );
        ExitCode::FAILURE
    }
}

//! PostgreSQL benchmark (a bench binary, not a timed test): a deployment stack creating and then deleting N roles
//! (LOGIN, a password), N databases and N database grants (`CONNECT` on database i to role i) on a throwaway
//! cluster through the built-in PostgreSql extension, against the same DDL sent directly over one connection in
//! the same run. Also measured in the same run, to show what bounds the ratio: N `CREATE DATABASE` / `DROP
//! DATABASE` over 1 and over 4 connections at once, and the server's wait events (`pg_stat_activity`, sampled
//! every 10 ms) while cairn works.
//!
//! `cargo bench -p cairn-stack-service --bench postgresql -- [--runs 3] [--count 100] [--retry-backoff-ms MS]`
//! (`RUST_LOG=debug` shows the host's calls and their statuses). Under `cargo test --all-targets` (no `--bench`
//! argument) it runs once with 5 of each, as a smoke test.
//!
//! The stack service, engine and host run with their default settings (deployment parallelism, deletes in
//! flight, retry backoff unless `--retry-backoff-ms` is given); the store is SQLite in a temp dir.

// The store set-up the stack service's integration tests use (resource group `rg1`, Key Vault `ops`).
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/counting.rs"]
mod counting;
use common::*;
use counting::{Answers, Counting, take};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::query::Query;
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_testpg::TestPostgres;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgSslMode};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

const ADMIN_SECRET: &str = "pg-admin";
const ROLE_SECRET: &str = "pg-role";
const ROLE_PASSWORD: &str = "bench-Role-Pw-4f1a";
const STACK: &str = "pgbench";

struct Options {
    runs: usize,
    count: usize,
    /// Overrides the stack service's pause between delete retry rounds (default: the service's default).
    retry_backoff: Option<Duration>,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs the binary without it, as a smoke test of
    // the same path (one small run), so the test suite stays quick.
    let measuring = args.iter().any(|a| a == "--bench");
    let (runs, count) = if measuring { (3, 100) } else { (1, 5) };
    Options {
        runs: value("--runs").unwrap_or(runs).max(1),
        count: value("--count").unwrap_or(count).max(1),
        retry_backoff: value("--retry-backoff-ms")
            .map(|ms: usize| Duration::from_millis(ms as u64)),
    }
}

fn role(i: usize) -> String {
    format!("bench_role_{i:03}")
}

fn database(i: usize) -> String {
    format!("bench_db_{i:03}")
}

fn connect_options(cluster: &TestPostgres) -> PgConnectOptions {
    PgConnectOptions::new_without_pgpass()
        .host(cluster.host())
        .port(cluster.port())
        .username(cluster.superuser())
        .password(cluster.password())
        .database("postgres")
        .ssl_mode(PgSslMode::Disable)
        .disable_statement_logging()
}

async fn connect(cluster: &TestPostgres) -> PgConnection {
    PgConnection::connect_with(&connect_options(cluster))
        .await
        .expect("connect to the cluster")
}

async fn run(connection: &mut PgConnection, statement: String) {
    sqlx::raw_sql(AssertSqlSafe(statement.clone()))
        .execute(connection)
        .await
        .unwrap_or_else(|err| panic!("{statement}: {err}"));
}

/// The server's user roles and databases (to check every phase leaves it as it found it).
async fn catalog(cluster: &TestPostgres) -> (Vec<String>, Vec<String>) {
    let mut connection = connect(cluster).await;
    let roles =
        sqlx::query_scalar("SELECT rolname::text FROM pg_roles WHERE rolname !~ '^pg_' ORDER BY 1")
            .fetch_all(&mut connection)
            .await
            .expect("roles");
    let databases = sqlx::query_scalar("SELECT datname::text FROM pg_database ORDER BY 1")
        .fetch_all(&mut connection)
        .await
        .expect("databases");
    connection.close().await.expect("close");
    (roles, databases)
}

/// Wall times of the direct DDL over one connection, with the parts of each phase.
struct Direct {
    create: Duration,
    delete: Duration,
    create_roles: Duration,
    create_databases: Duration,
    grants: Duration,
    revokes: Duration,
    drop_databases: Duration,
    drop_roles: Duration,
}

async fn direct(cluster: &TestPostgres, count: usize) -> Direct {
    let mut connection = connect(cluster).await;
    let mut timed = async |statements: Vec<String>| {
        let started = Instant::now();
        for statement in statements {
            run(&mut connection, statement).await;
        }
        started.elapsed()
    };
    let create_roles = timed(
        (0..count)
            .map(|i| format!("CREATE ROLE {} LOGIN PASSWORD '{ROLE_PASSWORD}'", role(i)))
            .collect(),
    )
    .await;
    let create_databases = timed(
        (0..count)
            .map(|i| format!("CREATE DATABASE {}", database(i)))
            .collect(),
    )
    .await;
    let grants = timed(
        (0..count)
            .map(|i| format!("GRANT CONNECT ON DATABASE {} TO {}", database(i), role(i)))
            .collect(),
    )
    .await;
    let revokes = timed(
        (0..count)
            .map(|i| format!("REVOKE ALL ON DATABASE {} FROM {}", database(i), role(i)))
            .collect(),
    )
    .await;
    let drop_databases = timed(
        (0..count)
            .map(|i| format!("DROP DATABASE {}", database(i)))
            .collect(),
    )
    .await;
    let drop_roles = timed(
        (0..count)
            .map(|i| format!("DROP ROLE {}", role(i)))
            .collect(),
    )
    .await;
    connection.close().await.expect("close");
    Direct {
        create: create_roles + create_databases + grants,
        delete: revokes + drop_databases + drop_roles,
        create_roles,
        create_databases,
        grants,
        revokes,
        drop_databases,
        drop_roles,
    }
}

/// `statement(i)` for i in 0..count, spread round-robin over `connections` connections running at once.
async fn spread(
    cluster: &TestPostgres,
    count: usize,
    connections: usize,
    statement: fn(usize) -> String,
) -> Duration {
    let mut opened = Vec::new();
    for _ in 0..connections {
        opened.push(connect(cluster).await);
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (lane, mut connection) in opened.into_iter().enumerate() {
        tasks.spawn(async move {
            for i in (lane..count).step_by(connections) {
                run(&mut connection, statement(i)).await;
            }
            connection
        });
    }
    let mut finished = Vec::new();
    while let Some(connection) = tasks.join_next().await {
        finished.push(connection.expect("a lane"));
    }
    let elapsed = started.elapsed();
    for connection in finished {
        connection.close().await.expect("close");
    }
    elapsed
}

/// Samples the wait events of the cluster's active client backends every 10 ms until stopped.
struct WaitSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<WaitSamples>,
}

#[derive(Default)]
struct WaitSamples {
    samples: usize,
    /// Active backends summed over samples (divide by `samples` for the mean).
    active: usize,
    /// `wait_event_type:wait_event` (or `CPU` when not waiting) → backend-samples.
    events: BTreeMap<String, usize>,
}

impl WaitSampler {
    async fn start(cluster: &TestPostgres) -> WaitSampler {
        let mut connection = connect(cluster).await;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let mut seen = WaitSamples::default();
            while !stopping.load(Ordering::Relaxed) {
                let rows: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) \
                     FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' \
                     AND pid <> pg_backend_pid() GROUP BY 1",
                )
                .fetch_all(&mut connection)
                .await
                .expect("sample pg_stat_activity");
                seen.samples += 1;
                for (event, backends) in rows {
                    let backends = usize::try_from(backends).unwrap_or(0);
                    seen.active += backends;
                    *seen.events.entry(event).or_default() += backends;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let _ = connection.close().await;
            seen
        });
        WaitSampler { stop, task }
    }

    async fn finish(self) -> WaitSamples {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the sampler")
    }
}

impl WaitSamples {
    fn summary(&self) -> String {
        let samples = self.samples.max(1) as f64;
        let mut events: Vec<(&String, &usize)> = self.events.iter().collect();
        events.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = events
            .iter()
            .take(5)
            .map(|(event, count)| {
                format!(
                    "{event} {:.0}%",
                    100.0 * **count as f64 / self.active.max(1) as f64
                )
            })
            .collect();
        format!(
            "{:.2} active backends on average over {} samples; {}",
            self.active as f64 / samples,
            self.samples,
            top.join(", ")
        )
    }
}

/// An in-process stack service with the built-in PostgreSql extension and default settings, its store in `dir`.
async fn service(
    dir: &std::path::Path,
    cluster: &TestPostgres,
    retry_backoff: Option<Duration>,
    answers: Answers,
) -> StackService {
    let store = common::store_with_group_and_vault(dir).await;
    set_secret(&store, ADMIN_SECRET, cluster.password()).await;
    set_secret(&store, ROLE_SECRET, ROLE_PASSWORD).await;
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        cairn_ext_postgresql::NAME,
        cairn_ext_postgresql::VERSION,
        Arc::new(Counting {
            inner: Box::new(cairn_ext_postgresql::in_process_transport()),
            answers,
        }),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings::default(),
        "http://localhost/cairn-bench",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings::default(),
    )
    .expect("engine");
    let defaults = StackServiceSettings::default();
    StackService::new(
        engine,
        store,
        host,
        Providers::empty(),
        StackServiceSettings {
            retry_backoff: retry_backoff.unwrap_or(defaults.retry_backoff),
            ..defaults
        },
    )
}

fn pg(resource_type: &str, properties: Value, depends_on: &[String]) -> Value {
    json!({ "extension": "pg", "type": resource_type, "apiVersion": "v1",
            "properties": properties, "dependsOn": depends_on })
}

/// The stack: `count` roles (LOGIN, the password from the Key Vault), `count` databases, and `count` grants
/// of CONNECT on database i to role i.
fn stack(cluster: &TestPostgres, count: usize) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    for i in 0..count {
        resources.insert(
            format!("role{i}"),
            pg(
                "PostgreSql/roles",
                json!({ "name": role(i), "login": true, "password": "[parameters('rolePassword')]" }),
                &[],
            ),
        );
        resources.insert(
            format!("db{i}"),
            pg("PostgreSql/databases", json!({ "name": database(i) }), &[]),
        );
        resources.insert(
            format!("grant{i}"),
            pg(
                "PostgreSql/grants",
                json!({ "database": database(i), "role": role(i), "objectType": "database",
                        "privileges": ["CONNECT"] }),
                &[format!("role{i}"), format!("db{i}")],
            ),
        );
    }
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "parameters": { "rolePassword": { "type": "securestring" } },
                "extensions": { "pg": { "name": "PostgreSql", "version": "1.0.0", "config": {
                    "host": { "type": "string" }, "port": { "type": "int" }, "username": { "type": "string" },
                    "sslMode": { "type": "string" }, "password": { "type": "secureString" } } } },
                "resources": resources
            },
            "parameters": { "rolePassword": { "reference": {
                "keyVault": { "id": VAULT }, "secretName": ROLE_SECRET } } },
            "extensionConfigs": { "pg": {
                "host": { "value": cluster.host() },
                "port": { "value": cluster.port() },
                "username": { "value": cluster.superuser() },
                "sslMode": { "value": "disable" },
                "auth": { "password": { "keyVaultReference": {
                    "keyVault": { "id": VAULT }, "secretName": ADMIN_SECRET } } }
            } },
            "actionOnUnmanage": { "resources": "delete" },
            "denySettings": { "mode": "none" }
        }
    }))
    .expect("a stack body")
}

/// Polls the stack every 5 ms until it settles (`Some(state)`) or is gone (`None`).
async fn settle(service: &StackService) -> Option<Value> {
    loop {
        match service.get(RG, STACK).await {
            Ok(stack) => {
                let value = serde_json::to_value(&stack).expect("a stack");
                let state = value["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or("");
                if matches!(state, "succeeded" | "failed" | "canceled") {
                    return Some(value);
                }
            }
            Err(error) if error.status() == 404 => return None,
            Err(error) => panic!("get: {error:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

struct Cairn {
    create: Duration,
    delete: Duration,
    /// The extension's answers during the create and during the delete.
    create_answers: String,
    delete_answers: String,
    create_waits: WaitSamples,
    delete_waits: WaitSamples,
}

async fn cairn(cluster: &TestPostgres, count: usize, retry_backoff: Option<Duration>) -> Cairn {
    let dir = tempfile::tempdir().expect("temp dir");
    let answers = Answers::default();
    let service = service(dir.path(), cluster, retry_backoff, answers.clone()).await;
    let body = stack(cluster, count);

    let sampler = WaitSampler::start(cluster).await;
    let started = Instant::now();
    service
        .create_or_update(RG, STACK, body, None)
        .await
        .expect("the create is accepted");
    let created = settle(&service).await.expect("the stack exists");
    let create = started.elapsed();
    let create_waits = sampler.finish().await;
    let create_answers = take(&answers);
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    let managed = created["properties"]["resources"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(managed, 3 * count, "every resource is managed");

    let options = StackDeleteOptions::from_query(&Query::parse("unmanageAction.Resources=delete"))
        .expect("options");
    let sampler = WaitSampler::start(cluster).await;
    let started = Instant::now();
    service
        .delete(RG, STACK, options, None)
        .await
        .expect("the delete is accepted");
    if let Some(failed) = settle(&service).await {
        panic!("the stack delete did not finish: {failed:#}");
    }
    let delete = started.elapsed();
    let delete_waits = sampler.finish().await;
    Cairn {
        create,
        delete,
        create_answers,
        delete_answers: take(&answers),
        create_waits,
        delete_waits,
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn seconds(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}

fn main() {
    // `RUST_LOG=warn` (or finer) shows what the stack service and the extension log, e.g. retried deletes.
    if let Ok(filter) = std::env::var("RUST_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(bench(options));
}

async fn bench(options: Options) {
    let count = options.count;
    let cluster = TestPostgres::start();
    let version: String = {
        let mut connection = connect(&cluster).await;
        let version = sqlx::query_scalar("SELECT version()")
            .fetch_one(&mut connection)
            .await
            .expect("version");
        connection.close().await.expect("close");
        version
    };
    println!("{version}");
    println!(
        "{count} roles + {count} databases + {count} grants, {} runs, cluster on 127.0.0.1:{}",
        options.runs,
        cluster.port()
    );
    let start = catalog(&cluster).await;

    let mut direct_runs = Vec::new();
    let mut cairn_runs = Vec::new();
    let mut spread_runs: Vec<[Duration; 4]> = Vec::new();
    for round in 1..=options.runs {
        let d = direct(&cluster, count).await;
        assert_eq!(catalog(&cluster).await, start, "the direct DDL cleaned up");
        println!(
            "run {round} direct: create {} (roles {}, databases {}, grants {}), delete {} (revokes {}, \
             drop databases {}, drop roles {})",
            seconds(d.create),
            seconds(d.create_roles),
            seconds(d.create_databases),
            seconds(d.grants),
            seconds(d.delete),
            seconds(d.revokes),
            seconds(d.drop_databases),
            seconds(d.drop_roles)
        );

        let create = |i| format!("CREATE DATABASE {}", database(i));
        let drop = |i| format!("DROP DATABASE {}", database(i));
        let create_one = spread(&cluster, count, 1, create).await;
        let drop_one = spread(&cluster, count, 1, drop).await;
        let create_four = spread(&cluster, count, 4, create).await;
        let drop_four = spread(&cluster, count, 4, drop).await;
        assert_eq!(catalog(&cluster).await, start, "the spread DDL cleaned up");
        println!(
            "run {round} {count} CREATE DATABASE: 1 connection {}, 4 connections {}; {count} DROP DATABASE: \
             1 connection {}, 4 connections {}",
            seconds(create_one),
            seconds(create_four),
            seconds(drop_one),
            seconds(drop_four)
        );
        spread_runs.push([create_one, create_four, drop_one, drop_four]);

        let c = cairn(&cluster, count, options.retry_backoff).await;
        assert_eq!(
            catalog(&cluster).await,
            start,
            "the stack delete cleaned up"
        );
        println!(
            "run {round} cairn: create {} ({} of direct), delete {} ({} of direct)",
            seconds(c.create),
            ratio(c.create, d.create),
            seconds(c.delete),
            ratio(c.delete, d.delete)
        );
        println!("  create calls: {}", c.create_answers);
        println!("  create waits: {}", c.create_waits.summary());
        println!("  delete calls: {}", c.delete_answers);
        println!("  delete waits: {}", c.delete_waits.summary());
        direct_runs.push(d);
        cairn_runs.push(c);
    }

    let direct_create = median(direct_runs.iter().map(|d| d.create).collect());
    let direct_delete = median(direct_runs.iter().map(|d| d.delete).collect());
    let cairn_create = median(cairn_runs.iter().map(|c| c.create).collect());
    let cairn_delete = median(cairn_runs.iter().map(|c| c.delete).collect());
    let part = |index: usize| median(spread_runs.iter().map(|s| s[index]).collect());
    println!("median of {} runs:", options.runs);
    println!(
        "  direct (1 connection): create {}, delete {}",
        seconds(direct_create),
        seconds(direct_delete)
    );
    println!(
        "    of which CREATE DATABASE {}, DROP DATABASE {}",
        seconds(median(
            direct_runs.iter().map(|d| d.create_databases).collect()
        )),
        seconds(median(
            direct_runs.iter().map(|d| d.drop_databases).collect()
        ))
    );
    println!(
        "  cairn stack: create {}, delete {}",
        seconds(cairn_create),
        seconds(cairn_delete)
    );
    println!(
        "  ratio cairn/direct: create {}, delete {}",
        ratio(cairn_create, direct_create),
        ratio(cairn_delete, direct_delete)
    );
    println!(
        "  {count} CREATE DATABASE: 1 connection {}, 4 connections {} ({}); {count} DROP DATABASE: 1 connection \
         {}, 4 connections {} ({})",
        seconds(part(0)),
        seconds(part(1)),
        ratio(part(1), part(0)),
        seconds(part(2)),
        seconds(part(3)),
        ratio(part(3), part(2))
    );
}

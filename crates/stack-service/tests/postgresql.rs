//! A deployment stack managing a real PostgreSQL server through the built-in PostgreSql extension: create
//! (two roles, two databases, schemas, an extension, grants, default privileges) with the admin password from
//! a Key Vault reference, rotate that password (in PostgreSQL and in the Key Vault), update the stack deleting
//! a database and a role, delete it detaching everything, re-create it over what is there, delete it for good,
//! and check the catalog at every step. The admin password and a role password never show up in a response,
//! an error, a log line or a store file.
//!
//! The password is given as seed 000's reserved `auth: { password }` group, so the stack keeps its Key Vault
//! directive and the delete sends the group back with the rotated password.

mod common;
use common::*;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::query::Query;
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::Store;
use cairn_testpg::TestPostgres;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

const ADMIN_SECRET: &str = "pg-admin";
const READER_SECRET: &str = "pg-reader";
const READER_PASSWORD: &str = "reader-canary-Pw-5c1e9";
const ROTATED_PASSWORD: &str = "rotated-canary-Adm1n-8d02b";

/// Log lines of the whole test binary (one test), to scan for secrets.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Env {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    service: StackService,
    cluster: TestPostgres,
    /// Every response and error seen, to scan for secrets.
    seen: Vec<String>,
}

async fn setup() -> Env {
    let cluster = TestPostgres::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = common::store_with_group_and_vault(dir.path()).await;
    set_secret(&store, ADMIN_SECRET, cluster.password()).await;
    set_secret(&store, READER_SECRET, READER_PASSWORD).await;
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        cairn_ext_postgresql::NAME,
        cairn_ext_postgresql::VERSION,
        Arc::new(cairn_ext_postgresql::in_process_transport()),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            relo_poll_interval: Duration::from_millis(10),
            min_poll_interval: Duration::from_millis(10),
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
        "http://localhost/cairn-test",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings {
            parallelism: 8,
            ..EngineSettings::default()
        },
    )
    .expect("engine");
    let service = StackService::new(
        engine,
        store.clone(),
        host,
        Providers::empty(),
        StackServiceSettings {
            lease_ttl: Duration::from_secs(10),
            heartbeat_interval: Duration::from_millis(200),
            max_delete_rounds: 6,
            retry_backoff: Duration::from_millis(50),
            ..StackServiceSettings::default()
        },
    );
    Env {
        dir,
        store,
        service,
        cluster,
        seen: Vec::new(),
    }
}

fn pg(extension: &str, resource_type: &str, properties: Value, depends_on: &[&str]) -> Value {
    json!({ "extension": extension, "type": resource_type, "apiVersion": "v1",
            "properties": properties, "dependsOn": depends_on })
}

/// The stack: `full` has both roles and databases; otherwise only the owner, `app_main`, its schema and the
/// extension remain.
fn stack(cluster: &TestPostgres, full: bool, action: &str) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    let mut add = |name: &str, resource: Value| {
        resources.insert(name.to_owned(), resource);
    };
    add(
        "owner",
        pg(
            "pg",
            "PostgreSql/roles",
            json!({ "name": "app_owner", "dropOwned": true }),
            &[],
        ),
    );
    add(
        "main",
        pg(
            "pg",
            "PostgreSql/databases",
            json!({ "name": "app_main", "owner": "app_owner", "force": true }),
            &["owner"],
        ),
    );
    add(
        "appSchema",
        pg(
            "pg",
            "PostgreSql/schemas",
            json!({ "database": "app_main", "name": "app", "owner": "app_owner" }),
            &["main"],
        ),
    );
    add(
        "crypto",
        pg(
            "pg",
            "PostgreSql/extensions",
            json!({ "database": "app_main", "name": "pgcrypto", "schema": "app" }),
            &["appSchema"],
        ),
    );
    if full {
        add(
            "reader",
            pg(
                "pg",
                "PostgreSql/roles",
                json!({ "name": "app_reader", "login": true, "dropOwned": true, "password": "[parameters('readerPassword')]" }),
                &[],
            ),
        );
        add(
            "scratch",
            pg(
                "pg",
                "PostgreSql/databases",
                json!({ "name": "app_scratch", "owner": "app_owner" }),
                &["owner"],
            ),
        );
        add(
            "scratchSchema",
            pg(
                "pg",
                "PostgreSql/schemas",
                json!({ "database": "app_scratch", "name": "work" }),
                &["scratch"],
            ),
        );
        add(
            "connectMain",
            pg(
                "pg",
                "PostgreSql/grants",
                json!({ "database": "app_main", "role": "app_reader", "objectType": "database", "privileges": ["CONNECT"] }),
                &["main", "reader"],
            ),
        );
        add(
            "usageApp",
            pg(
                "pg",
                "PostgreSql/grants",
                json!({ "database": "app_main", "role": "app_reader", "objectType": "schema", "schema": "app",
                    "privileges": ["USAGE"] }),
                &["appSchema", "reader"],
            ),
        );
        add(
            "connectScratch",
            pg(
                "pg",
                "PostgreSql/grants",
                json!({ "database": "app_scratch", "role": "app_reader", "objectType": "database",
                    "privileges": ["CONNECT", "TEMPORARY"] }),
                &["scratch", "reader"],
            ),
        );
        add(
            "readNewTables",
            pg(
                "pg",
                "PostgreSql/defaultPrivileges",
                json!({ "database": "app_main", "role": "app_reader", "forRole": "app_owner", "schema": "app",
                    "objectType": "table", "privileges": ["SELECT"] }),
                &["appSchema", "reader"],
            ),
        );
    }
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "parameters": { "readerPassword": { "type": "securestring", "defaultValue": "" } },
                "extensions": { "pg": { "name": "PostgreSql", "version": "1.0.0", "config": {
                    "host": { "type": "string" }, "port": { "type": "int" }, "username": { "type": "string" },
                    "sslMode": { "type": "string" }, "password": { "type": "secureString" } } } },
                "resources": resources
            },
            "parameters": { "readerPassword": { "reference": {
                "keyVault": { "id": VAULT }, "secretName": READER_SECRET } } },
            "extensionConfigs": { "pg": {
                "host": { "value": cluster.host() },
                "port": { "value": cluster.port() },
                "username": { "value": cluster.superuser() },
                "sslMode": { "value": "disable" },
                "auth": { "password": { "keyVaultReference": { "keyVault": { "id": VAULT }, "secretName": ADMIN_SECRET } } }
            } },
            "actionOnUnmanage": { "resources": action },
            "denySettings": { "mode": "none" }
        }
    }))
    .expect("a stack body")
}

impl Env {
    async fn connect(&self, password: &str, database: &str) -> Result<PgConnection, sqlx::Error> {
        PgConnection::connect_with(
            &PgConnectOptions::new_without_pgpass()
                .host(self.cluster.host())
                .port(self.cluster.port())
                .username(self.cluster.superuser())
                .password(password)
                .database(database)
                .ssl_mode(sqlx::postgres::PgSslMode::Disable)
                // The test's own statements (the rotation) are not the extension's: keep them out of the
                // scanned log.
                .disable_statement_logging(),
        )
        .await
    }

    async fn names(&self, password: &str, query: &str) -> Vec<String> {
        let mut connection = self.connect(password, "postgres").await.expect("connect");
        let names = sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_owned()))
            .fetch_all(&mut connection)
            .await
            .expect("query");
        connection.close().await.unwrap();
        names
    }

    async fn roles(&self, password: &str) -> Vec<String> {
        self.names(
            password,
            "SELECT rolname::text FROM pg_roles WHERE rolname !~ '^pg_' ORDER BY 1",
        )
        .await
    }

    async fn databases(&self, password: &str) -> Vec<String> {
        self.names(password, "SELECT datname::text FROM pg_database ORDER BY 1")
            .await
    }

    async fn check(&self, password: &str, database: &str, query: &str) -> bool {
        let mut connection = self.connect(password, database).await.expect("connect");
        let value = sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_owned()))
            .fetch_one(&mut connection)
            .await
            .expect("query");
        connection.close().await.unwrap();
        value
    }

    /// Waits for the stack to settle; `null` once it is gone. Records what it saw.
    async fn settle(&mut self, name: &str) -> Value {
        for _ in 0..1200 {
            match self.service.get(RG, name).await {
                Ok(stack) => {
                    let value = serde_json::to_value(&stack).unwrap();
                    let state = value["properties"]["provisioningState"]
                        .as_str()
                        .unwrap_or("");
                    if matches!(state, "succeeded" | "failed" | "canceled") {
                        self.seen.push(value.to_string());
                        return value;
                    }
                }
                Err(error) if error.status() == 404 => return Value::Null,
                Err(error) => panic!("get: {error:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the stack operation did not finish in time");
    }

    async fn put(&mut self, body: DeploymentStack) -> Value {
        let accepted = self
            .service
            .create_or_update(RG, "pg", body, None)
            .await
            .expect("accepted");
        self.seen
            .push(serde_json::to_value(&accepted.stack).unwrap().to_string());
        let settled = self.settle("pg").await;
        assert_eq!(
            settled["properties"]["provisioningState"], "succeeded",
            "{settled:#}"
        );
        settled
    }

    async fn delete(&mut self, action: &str) -> Value {
        let options = StackDeleteOptions::from_query(&Query::parse(&format!(
            "unmanageAction.Resources={action}"
        )))
        .expect("options");
        self.service
            .delete(RG, "pg", options, None)
            .await
            .expect("accepted");
        self.settle("pg").await
    }
}

fn managed(stack: &Value) -> usize {
    stack["properties"]["resources"]
        .as_array()
        .map_or(0, Vec::len)
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_manages_a_real_server_through_rotation_update_detach_and_delete() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();

    let mut env = setup().await;
    let original_password = env.cluster.password().to_owned();
    let start_roles = env.roles(&original_password).await;
    let start_databases = env.databases(&original_password).await;

    // Create.
    let created = env.put(stack(&env.cluster, true, "delete")).await;
    assert_eq!(managed(&created), 11, "{created:#}");
    let password = original_password.clone();
    let roles = env.roles(&password).await;
    assert!(
        roles.contains(&"app_owner".to_owned()) && roles.contains(&"app_reader".to_owned()),
        "{roles:?}"
    );
    let databases = env.databases(&password).await;
    assert!(
        databases.contains(&"app_main".to_owned()) && databases.contains(&"app_scratch".to_owned())
    );
    assert!(env.check(&password, "app_main",
        "SELECT EXISTS (SELECT 1 FROM information_schema.schemata WHERE schema_name = 'app' AND schema_owner = 'app_owner')").await);
    assert!(env.check(&password, "app_main",
        "SELECT EXISTS (SELECT 1 FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
         WHERE e.extname = 'pgcrypto' AND n.nspname = 'app')").await);
    assert!(
        env.check(
            &password,
            "app_main",
            "SELECT has_database_privilege('app_reader', 'app_main', 'CONNECT') \
         AND has_schema_privilege('app_reader', 'app', 'USAGE') \
         AND has_database_privilege('app_reader', 'app_scratch', 'TEMPORARY')"
        )
        .await
    );
    assert!(
        env.check(
            &password,
            "app_scratch",
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'work')"
        )
        .await
    );
    // The reader logs in with its password from the Key Vault; the owner's new tables are readable by it
    // (a privilege no grant resource declares: `dropOwned` revokes it when the reader is deleted).
    let reader = PgConnection::connect_with(
        &PgConnectOptions::new_without_pgpass()
            .host(env.cluster.host())
            .port(env.cluster.port())
            .username("app_reader")
            .password(READER_PASSWORD)
            .database("app_main")
            .ssl_mode(sqlx::postgres::PgSslMode::Disable),
    )
    .await
    .expect("the reader logs in");
    reader.close().await.unwrap();
    {
        let mut admin = env.connect(&password, "app_main").await.unwrap();
        sqlx::raw_sql("SET ROLE app_owner; CREATE TABLE app.items (id int); RESET ROLE")
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
    }
    assert!(
        env.check(
            &password,
            "app_main",
            "SELECT has_table_privilege('app_reader', 'app.items', 'SELECT')"
        )
        .await
    );

    // Rotate the admin password in PostgreSQL and in the Key Vault: the old one stops working.
    {
        let mut admin = env.connect(&password, "postgres").await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "ALTER ROLE postgres PASSWORD '{ROTATED_PASSWORD}'"
        )))
        .execute(&mut admin)
        .await
        .unwrap();
        admin.close().await.unwrap();
    }
    set_secret(&env.store, ADMIN_SECRET, ROTATED_PASSWORD).await;
    assert!(
        env.connect(&original_password, "postgres").await.is_err(),
        "the old password still works"
    );
    let password = ROTATED_PASSWORD.to_owned();

    // Update deleting a database and a role (with their schema and grants): only the rotated password can
    // have done it.
    let updated = env.put(stack(&env.cluster, false, "delete")).await;
    assert_eq!(managed(&updated), 4, "{updated:#}");
    assert_eq!(
        updated["properties"]["deletedResources"]
            .as_array()
            .map(Vec::len),
        Some(7),
        "{updated:#}"
    );
    assert!(
        !env.roles(&password)
            .await
            .contains(&"app_reader".to_owned())
    );
    assert!(
        !env.databases(&password)
            .await
            .contains(&"app_scratch".to_owned())
    );
    assert!(env.check(&password, "app_main",
        "SELECT NOT EXISTS (SELECT 1 FROM pg_default_acl) AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pgcrypto')").await);

    // Delete detaching everything: nothing is dropped.
    let before_detach = (env.roles(&password).await, env.databases(&password).await);
    assert_eq!(env.delete("detach").await, Value::Null, "the stack is gone");
    assert_eq!(
        (env.roles(&password).await, env.databases(&password).await),
        before_detach
    );
    assert!(
        env.check(
            &password,
            "app_main",
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'app')"
        )
        .await
    );

    // Re-create it over what is there (idempotent create; what the detach left behind exists and no stack
    // manages it, so taking it back is adopting it), then delete it for good: the server is back to its start
    // state.
    let mut again = stack(&env.cluster, false, "delete");
    again.properties.adopt_existing_resources = Some(true);
    let recreated = env.put(again).await;
    assert_eq!(managed(&recreated), 4, "{recreated:#}");
    assert_eq!(env.delete("delete").await, Value::Null, "the stack is gone");
    assert_eq!(env.roles(&password).await, start_roles);
    assert_eq!(env.databases(&password).await, start_databases);

    // Secret canary: neither the admin passwords nor the role password appear anywhere.
    let secrets = [
        original_password.as_str(),
        ROTATED_PASSWORD,
        READER_PASSWORD,
    ];
    for text in &env.seen {
        for secret in secrets {
            assert!(!text.contains(secret), "a response holds a secret: {text}");
        }
    }
    let log = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(log.lines().count() > 10, "the logs were captured: {log}");
    for secret in secrets {
        let leaking: Vec<&str> = log
            .lines()
            .filter(|line| line.contains(secret))
            .map(|line| line.split(secret).next().unwrap_or_default())
            .collect();
        assert!(
            leaking.is_empty(),
            "log lines hold a secret (shown up to it): {leaking:#?}"
        );
    }
    let mut scanned = 0;
    for file in files_under(env.dir.path()) {
        let bytes = std::fs::read(&file).unwrap();
        scanned += bytes.len();
        for secret in secrets {
            assert!(
                !bytes
                    .windows(secret.len())
                    .any(|window| window == secret.as_bytes()),
                "{} holds a secret in plaintext",
                file.display()
            );
        }
    }
    assert!(scanned > 0, "the store wrote files");
}

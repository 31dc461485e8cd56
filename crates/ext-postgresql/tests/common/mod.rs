//! Shared helpers for the PostgreSql extension's tests: a real throwaway cluster, requests through the
//! in-process transport, and direct catalog queries to check what the extension did.

#![allow(dead_code)] // each test file uses a subset

use cairn_extension_contract::transport::{ExtensionTransport, Operation, TransportRequest};
use cairn_testpg::TestPostgres;
use serde_json::{Value, json};
use sqlx::postgres::PgPool;

/// The `cairn-ext-postgresql` binary cargo built for these tests.
pub const BINARY: &str = env!("CARGO_BIN_EXE_cairn-ext-postgresql");

/// A cluster, the extension in process, and a superuser pool for checks.
pub struct Harness {
    pub cluster: TestPostgres,
    pub transport: cairn_extension_sdk::InProcessTransport,
    pub admin: PgPool,
}

/// The extension in process with a fixed config, for a cluster owned elsewhere.
pub struct ConfigHarness {
    pub transport: cairn_extension_sdk::InProcessTransport,
    pub config: Value,
}

impl Harness {
    pub async fn start() -> Harness {
        let cluster = TestPostgres::start();
        let admin = PgPool::connect(&cluster.url())
            .await
            .expect("connect as superuser");
        Harness {
            cluster,
            transport: cairn_ext_postgresql::in_process_transport(),
            admin,
        }
    }

    /// The extension config for the cluster's superuser (password in `auth`).
    pub fn config(&self) -> Value {
        config_for(&self.cluster)
    }

    /// A harness for `config` without a cluster of its own.
    pub fn with_cluster_config(config: Value) -> ConfigHarness {
        ConfigHarness {
            transport: cairn_ext_postgresql::in_process_transport(),
            config,
        }
    }

    /// Sends `operation` with `body` (config added when absent); returns the status and JSON body.
    pub async fn call(&self, operation: Operation, mut body: Value) -> (u16, Value) {
        if body.get("config").is_none() {
            body["config"] = self.config();
        }
        send(&self.transport, operation, body).await
    }

    pub async fn apply(&self, resource_type: &str, properties: Value) -> (u16, Value) {
        self.call(
            Operation::CreateOrUpdate,
            json!({ "type": resource_type, "apiVersion": "v1", "properties": properties }),
        )
        .await
    }

    pub async fn get(&self, resource_type: &str, identifiers: Value) -> (u16, Value) {
        self.call(
            Operation::Get,
            json!({ "type": resource_type, "apiVersion": "v1", "identifiers": identifiers }),
        )
        .await
    }

    pub async fn delete(&self, resource_type: &str, identifiers: Value) -> (u16, Value) {
        self.call(
            Operation::Delete,
            json!({ "type": resource_type, "apiVersion": "v1", "identifiers": identifiers }),
        )
        .await
    }

    /// Whether a role named exactly `name` exists.
    pub async fn role_exists(&self, name: &str) -> bool {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
            .bind(name)
            .fetch_one(&self.admin)
            .await
            .unwrap()
    }

    /// Whether a database named exactly `name` exists.
    pub async fn database_exists(&self, name: &str) -> bool {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&self.admin)
            .await
            .unwrap()
    }

    /// A catalog snapshot that changes whenever a role's or database's row is rewritten (xmin).
    pub async fn catalog_versions(&self) -> Vec<String> {
        sqlx::query_scalar(
            "SELECT rolname || ':' || xmin::text FROM pg_authid UNION ALL \
             SELECT datname || ':' || xmin::text FROM pg_database UNION ALL \
             SELECT setdatabase::text || '/' || setrole::text || ':' || xmin::text FROM pg_db_role_setting \
             ORDER BY 1",
        )
        .fetch_all(&self.admin)
        .await
        .unwrap()
    }
}

pub fn config_for(cluster: &TestPostgres) -> Value {
    json!({
        "host": cluster.host(),
        "port": cluster.port(),
        "username": cluster.superuser(),
        "sslMode": "disable",
        "auth": { "password": cluster.password() },
    })
}

/// The PostgreSql conformance profile for `cluster`.
pub fn profile(cluster: &TestPostgres) -> cairn_conformance::Profile {
    let port = cluster.port().to_string();
    cairn_conformance::Profile::parse(
        cairn_ext_postgresql::CONFORMANCE_PROFILE,
        &[
            ("host", cluster.host()),
            ("port", &port),
            ("username", cluster.superuser()),
            ("password", cluster.password()),
        ],
    )
    .expect("profile")
}

impl Harness {
    /// A superuser connection to `database` (a plain name); close it before the database is dropped.
    pub async fn connect_to(&self, database: &str) -> sqlx::PgConnection {
        use sqlx::Connection;
        sqlx::PgConnection::connect(&self.cluster.url_for_database(database))
            .await
            .expect("connect to the database")
    }

    /// Runs `statements` (simple protocol) in `database` as the superuser.
    pub async fn run_in(&self, database: &str, statements: &str) {
        use sqlx::{Connection, Executor};
        let mut connection = self.connect_to(database).await;
        connection
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(statements.to_owned())))
            .await
            .expect("run the statements");
        connection.close().await.unwrap();
    }

    /// A boolean query (bind parameters: `binds`) in `database` as the superuser.
    pub async fn check_in(&self, database: &str, query: &str, binds: &[&str]) -> bool {
        use sqlx::Connection;
        let mut connection = self.connect_to(database).await;
        let mut statement = sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(query.to_owned()));
        for bind in binds {
            statement = statement.bind(*bind);
        }
        let value = statement.fetch_one(&mut connection).await.expect("check");
        connection.close().await.unwrap();
        value
    }

    /// A text query in `database` as the superuser (one row, one column).
    pub async fn text_in(&self, database: &str, query: &str, binds: &[&str]) -> String {
        use sqlx::Connection;
        let mut connection = self.connect_to(database).await;
        let mut statement = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(query.to_owned()));
        for bind in binds {
            statement = statement.bind(*bind);
        }
        let value = statement.fetch_one(&mut connection).await.expect("query");
        connection.close().await.unwrap();
        value
    }
}

/// The `target` of an error body, or of its single detail.
pub fn error_target(body: &Value) -> Option<String> {
    body["error"]["target"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| {
            body["error"]["details"]
                .as_array()
                .and_then(|details| details.first())
                .and_then(|detail| detail["target"].as_str())
                .map(str::to_owned)
        })
}

/// Sends `operation` with `body` to `transport`; returns the status and JSON body.
pub async fn send(
    transport: &cairn_extension_sdk::InProcessTransport,
    operation: Operation,
    body: Value,
) -> (u16, Value) {
    let response = transport
        .send(TransportRequest {
            operation,
            extension_version: "1.0.0".into(),
            body: serde_json::to_vec(&body).unwrap(),
            headers: Vec::new(),
            max_response_bytes: 1 << 20,
        })
        .await
        .unwrap();
    let json = if response.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&response.body).unwrap()
    };
    (response.status, json)
}

impl ConfigHarness {
    pub async fn apply(&self, resource_type: &str, properties: Value) -> (u16, Value) {
        let body = json!({ "type": resource_type, "apiVersion": "v1", "properties": properties,
                           "config": self.config });
        send(&self.transport, Operation::CreateOrUpdate, body).await
    }

    pub async fn get(&self, resource_type: &str, identifiers: Value) -> (u16, Value) {
        let body = json!({ "type": resource_type, "apiVersion": "v1", "identifiers": identifiers,
                           "config": self.config });
        send(&self.transport, Operation::Get, body).await
    }
}

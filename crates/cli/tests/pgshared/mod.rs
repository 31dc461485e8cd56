//! One throwaway PostgreSQL database (`cairn-testpg`), the master key and the extension registry that several
//! `cairn serve` replicas share: the replica tests and the chaos suite start their servers on it.
#![allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use all of it"
)]

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use cairn_testpg::TestPostgres;
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, PgPool};

/// A production server's durability (the test clusters run without it): every commit synced, full pages logged.
pub const DURABLE: [(&str, &str); 3] = [
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("full_page_writes", "on"),
];

/// A database on its own throwaway cluster, with the key file and registry the replicas are started with.
pub struct SharedStore {
    pub cluster: TestPostgres,
    _dir: tempfile::TempDir,
    pub url: String,
    pub key_file: PathBuf,
    pub registry: PathBuf,
}

impl SharedStore {
    /// Creates the database `database` (with a 2 s idle-in-transaction timeout, as `docs/operations.md` advises, so
    /// a paused or killed replica does not hold the others up) and a registry naming the HTTP v2 extension at
    /// `ext_addr` as `Matrix` 1.0.0, with `extra` merged into its entry (e.g. `timeoutSeconds`).
    pub async fn start(database: &str, ext_addr: SocketAddr, extra: Value) -> SharedStore {
        Self::start_with(database, ext_addr, extra, &[]).await
    }

    /// [`SharedStore::start`] on a cluster with these server settings (e.g. [`DURABLE`] for a benchmark).
    pub async fn start_with(
        database: &str,
        ext_addr: SocketAddr,
        extra: Value,
        settings: &[(&str, &str)],
    ) -> SharedStore {
        assert!(
            database.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "a plain identifier: {database}"
        );
        let cluster = TestPostgres::start_with(settings);
        let admin = PgPool::connect(&cluster.url()).await.expect("connect");
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {database}")))
            .execute(&admin)
            .await
            .expect("create the database");
        sqlx::query(AssertSqlSafe(format!(
            "ALTER DATABASE {database} SET idle_in_transaction_session_timeout = '2s'"
        )))
        .execute(&admin)
        .await
        .expect("set the idle transaction timeout");
        admin.close().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let key_file = dir.path().join("cairn.key");
        std::fs::write(&key_file, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").expect("key");
        set_mode(&key_file, 0o600);
        let registry = dir.path().join("extensions.json");
        let mut entry = json!({ "name": "Matrix", "version": "1.0.0",
                                "transport": { "kind": "http", "url": format!("http://{ext_addr}") } });
        if let (Some(entry), Some(extra)) = (entry.as_object_mut(), extra.as_object()) {
            entry.extend(extra.clone());
        }
        std::fs::write(&registry, json!({ "extensions": [entry] }).to_string()).expect("registry");
        SharedStore {
            url: cluster.url_for_database(database),
            cluster,
            _dir: dir,
            key_file,
            registry,
        }
    }

    /// The `cairn serve` arguments that put a replica on this database.
    pub fn replica_args(&self) -> Vec<OsString> {
        vec![
            "--store".into(),
            self.url.clone().into(),
            "--store-key-file".into(),
            self.key_file.clone().into(),
            "--extensions".into(),
            self.registry.clone().into(),
        ]
    }

    /// Where the store is, for opening it from the test (inventory, leases).
    pub fn location(&self) -> cairn_assembly::StoreLocation {
        cairn_assembly::StoreLocation::parse(&self.url)
            .expect("a store URL")
            .with_key_file(Some(self.key_file.clone()))
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

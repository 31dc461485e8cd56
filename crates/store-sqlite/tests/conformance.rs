//! Runs cairn-store's backend-independent conformance suite against the SQLite store, on disk and in memory.

use std::ops::Deref;

use cairn_store::crypto::MasterKey;
use cairn_store_sqlite::{SqliteOptions, SqliteStore};
use tempfile::TempDir;

/// A store in its own temporary data directory, removed on drop.
struct OnDisk {
    store: SqliteStore,
    _dir: TempDir,
}

impl Deref for OnDisk {
    type Target = SqliteStore;

    fn deref(&self) -> &SqliteStore {
        &self.store
    }
}

async fn on_disk() -> OnDisk {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = MasterKey::generate().expect("key");
    let store = SqliteStore::open_with(dir.path().join("data"), &key, SqliteOptions::default())
        .await
        .expect("open");
    OnDisk { store, _dir: dir }
}

async fn in_memory() -> Box<SqliteStore> {
    let key = MasterKey::generate().expect("key");
    Box::new(SqliteStore::open_in_memory(&key).await.expect("open"))
}

mod sqlite_on_disk {
    cairn_store::store_conformance_tests!(super::on_disk);
}

mod sqlite_in_memory {
    cairn_store::store_conformance_tests!(super::in_memory);
}

/// The harness-facing list of cases and the named list agree.
#[test]
fn every_case_is_listed_once_in_each_list() {
    let names: Vec<&str> = cairn_store::conformance::ALL_CASES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(names, cairn_store::conformance::CASES);
}

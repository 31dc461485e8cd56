//! The embedded default store of cairn: [`cairn_store::Store`] on SQLite in a data directory.
//!
//! # Layout of a data directory
//!
//! - `cairn.db` (+ `cairn.db-wal`, `cairn.db-shm`): the database, in WAL mode. Closing does not checkpoint: the WAL
//!   stays for the next open (see `close_impl`).
//! - `cairn.key`: the master key (base64, mode 0600), created on first open unless `CAIRN_STORE_KEY` is set.
//!   Losing it makes the stored secrets unreadable; everything else stays readable.
//!
//! # How it works
//!
//! - One writer connection (a pool of size 1) serialises writes inside the process; the group commit's own
//!   connection writes only while holding it (see `group_commit.rs`); a pool of read-only connections serves reads
//!   concurrently (WAL lets readers run beside the writer). Write transactions start with
//!   `BEGIN IMMEDIATE`, so another process opening the same directory waits (busy timeout) instead of deadlocking.
//! - Foreign keys on; `synchronous` is `FULL` by default (each commit is on disk when its future completes) or
//!   `NORMAL` ([`Durability::Normal`]: safe against process crashes, may lose the last commits on power loss).
//! - Schema migrations are embedded and applied on open ([`LATEST_SCHEMA_VERSION`], table `schema_migrations`
//!   with a checksum per migration); a database from a newer cairn is refused.
//! - Runtime queries only (no compile-time macros), so no database is needed to build.
//! - Secret values are sealed with the store's data key (see `cairn_store::crypto`) before they reach SQL; so is
//!   the whole request of a stack what-if result (it holds secure parameter values) and the polling state of a
//!   pending extension host operation (it can hold the extension config).
//! - Per-resource writes are small and do not grow with deployment size: journal appends at the edge of the run's
//!   range, inventory upserts, updates of a deployment row that never includes the request (kept in
//!   `deployment_requests`, written once), and a 4,000-page checkpoint interval ([`SqliteOptions`]). The
//!   `bytes_per_resource` bench measures it; `docs/store.md` and `docs/benchmarks-store.md` explain the choices.

mod deployments;
mod direct_reads;
mod failpoint;
mod group_commit;
mod groups;
mod host_operations;
mod inventory;
mod journal;
mod keyvault;
mod leases;
mod migrate;
mod operation_results;
mod rows;
mod secrets;
mod stack_what_ifs;
mod stacks;
mod store_impl;
mod transfer;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use cairn_store::crypto::{DATA_KEY_ID, DataKey, MasterKey, load_master_key};
use cairn_store::schema::Migrated;
use cairn_store::{Entity, StoreError, StoreResult, Timestamp};
use rusqlite::OpenFlags;
use rusqlite::config::DbConfig;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};

pub use migrate::LATEST_SCHEMA_VERSION;

/// The database file inside a data directory.
pub const DATABASE_FILE_NAME: &str = "cairn.db";

/// How hard each commit insists on reaching the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous = FULL`: a commit is durable, even across power loss, when its future completes.
    #[default]
    Full,
    /// `synchronous = NORMAL`: durable across process crashes; the last commits may be lost on power loss.
    Normal,
}

/// Tuning for [`SqliteStore::open_with`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub durability: Durability,
    /// Read-only connections beside the single writer.
    pub reader_connections: u32,
    /// How long a connection waits for another process's lock before failing with `Backend`.
    pub busy_timeout: Duration,
    /// Checkpoint the WAL into the database file once it holds this many pages (`PRAGMA wal_autocheckpoint`;
    /// 0 turns automatic checkpoints off). The default, 4,000 pages (16 MiB), is four times SQLite's: a checkpoint
    /// writes each page changed since the last one once, so a longer interval writes hot pages back less often —
    /// it keeps the bytes written per resource within 20% between 100- and 5,000-resource deployments (see
    /// `docs/benchmarks-store.md`) at the cost of a larger WAL file.
    pub wal_autocheckpoint_pages: u32,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::Full,
            reader_connections: 4,
            busy_timeout: Duration::from_secs(5),
            wal_autocheckpoint_pages: 4_000,
        }
    }
}

/// Each read connection's page cache (`PRAGMA cache_size`, in KiB): a quarter of SQLite's 2 MiB default. Reads
/// are served from the operating system's file cache as well, while a read of a big record (a stack of thousands
/// of resources is megabytes of overflow pages) fills a connection's own cache, which then stays resident for each
/// of the pool's connections.
const READER_CACHE_KIB: u32 = 512;

/// The SQLite implementation of [`cairn_store::Store`].
pub struct SqliteStore {
    writer: SqlitePool,
    /// The per-operation writes of running deployments, committed in groups on `writer`.
    group: group_commit::GroupCommit,
    reader: SqlitePool,
    /// Reads of many rows, on connections of their own (`None` in memory: there, `reader` is the one connection).
    direct: Option<direct_reads::DirectReads>,
    data_key: DataKey,
    data_dir: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed, mode 0700) the data directory and its database, with the master key from
    /// `CAIRN_STORE_KEY` or `<data_dir>/cairn.key` (created 0600 when absent).
    pub async fn open(data_dir: impl AsRef<Path>) -> StoreResult<Self> {
        let data_dir = data_dir.as_ref();
        create_data_dir(data_dir)?;
        let (master_key, _origin) = load_master_key(data_dir)?;
        Self::open_with(data_dir, &master_key, SqliteOptions::default()).await
    }

    /// Opens a data directory with an explicit master key and options. A master key other than the one the
    /// database was created with fails with [`StoreError::Crypto`].
    pub async fn open_with(
        data_dir: impl AsRef<Path>,
        master_key: &MasterKey,
        options: SqliteOptions,
    ) -> StoreResult<Self> {
        let data_dir = data_dir.as_ref();
        create_data_dir(data_dir)?;
        let path = data_dir.join(DATABASE_FILE_NAME);
        let base = SqliteConnectOptions::new()
            .filename(&path)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout)
            .pragma(
                "wal_autocheckpoint",
                options.wal_autocheckpoint_pages.to_string(),
            )
            .synchronous(match options.durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            });
        // No ping before each acquire (`sqlx`'s default): a connection to a local file does not go stale, and the
        // ping was a round trip to the connection's thread for every write (half a millisecond a group commit).
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .test_before_acquire(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(base.clone().create_if_missing(true))
            .await
            .map_err(rows::backend)?;
        migrate::migrate(&writer, LATEST_SCHEMA_VERSION).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.reader_connections.max(1))
            .test_before_acquire(false)
            .connect_with(
                base.read_only(true)
                    .pragma("cache_size", format!("-{READER_CACHE_KIB}")),
            )
            .await
            .map_err(rows::backend)?;
        let data_key = load_data_key(&writer, master_key).await?;
        let group = group_connection(&path, OpenFlags::empty(), &options)?;
        let direct = direct_reads::DirectReads::new(path, options.busy_timeout, READER_CACHE_KIB);
        Ok(SqliteStore {
            writer,
            group: group_commit::GroupCommit::new(group),
            reader,
            direct: Some(direct),
            data_key,
            data_dir: Some(data_dir.to_owned()),
        })
    }

    /// Applies pending migrations to the database of an existing data directory (creating the database file when
    /// the directory has none) without opening the store (no master key needed), and says from which version to
    /// which. A missing directory is `NotFound`, not created: a mistyped path should not start an empty store.
    pub async fn migrate(data_dir: impl AsRef<Path>) -> StoreResult<Migrated> {
        let data_dir = data_dir.as_ref();
        if !data_dir.is_dir() {
            return Err(StoreError::not_found(
                Entity::Schema,
                format!("data directory {}", data_dir.display()),
            ));
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(data_dir.join(DATABASE_FILE_NAME))
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .foreign_keys(true),
            )
            .await
            .map_err(rows::backend)?;
        let migrated = migrate::migrate(&pool, LATEST_SCHEMA_VERSION).await;
        pool.close().await;
        migrated
    }

    /// Opens a data directory migrated only up to `schema_version`: what an older cairn would have created, for
    /// upgrade tests.
    #[cfg(test)]
    pub(crate) async fn open_at_version(
        data_dir: &Path,
        master_key: &MasterKey,
        schema_version: u32,
    ) -> StoreResult<Self> {
        let options = SqliteConnectOptions::new()
            .filename(data_dir.join(DATABASE_FILE_NAME))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(rows::backend)?;
        migrate::migrate(&pool, schema_version).await?;
        let data_key = load_data_key(&pool, master_key).await?;
        let group = group_connection(
            &data_dir.join(DATABASE_FILE_NAME),
            OpenFlags::empty(),
            &SqliteOptions::default(),
        )?;
        Ok(SqliteStore {
            writer: pool.clone(),
            group: group_commit::GroupCommit::new(group),
            reader: pool,
            direct: None,
            data_key,
            data_dir: Some(data_dir.to_owned()),
        })
    }

    /// A store in memory, for tests: one connection serves reads and writes; everything is gone when it drops.
    pub async fn open_in_memory(master_key: &MasterKey) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")
            .map_err(rows::backend)?
            .foreign_keys(true);
        let name = options.get_filename().to_owned();
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(rows::backend)?;
        migrate::migrate(&pool, LATEST_SCHEMA_VERSION).await?;
        let data_key = load_data_key(&pool, master_key).await?;
        // `sqlx` names its in-memory databases and shares their cache, so a second connection opened by that name
        // sees the same database (which lives while the pool's connection does).
        let group = group_connection(
            &name,
            OpenFlags::SQLITE_OPEN_MEMORY | OpenFlags::SQLITE_OPEN_SHARED_CACHE,
            &SqliteOptions::default(),
        )?;
        Ok(SqliteStore {
            writer: pool.clone(),
            group: group_commit::GroupCommit::new(group),
            reader: pool,
            direct: None,
            data_key,
            data_dir: None,
        })
    }

    /// The data directory, or `None` in memory.
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// The schema version of the open database.
    pub async fn schema_version(&self) -> StoreResult<u32> {
        migrate::current_version(&self.reader).await
    }

    /// Copies the WAL into the database file and truncates the WAL (`PRAGMA wal_checkpoint(TRUNCATE)`).
    pub async fn checkpoint(&self) -> StoreResult<()> {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.writer)
            .await
            .map_err(rows::backend)?;
        Ok(())
    }

    /// Rewraps the data key under `new` (master-key rotation): only the wrapped key row changes. The caller then
    /// replaces the key file or `CAIRN_STORE_KEY`.
    pub async fn rotate_master_key(&self, current: &MasterKey, new: &MasterKey) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let wrapped: Vec<u8> =
            sqlx::query_scalar("SELECT wrapped_key FROM store_keys WHERE key_id = ?1")
                .bind(DATA_KEY_ID)
                .fetch_one(&mut *tx)
                .await
                .map_err(rows::backend)?;
        let rewrapped = DataKey::rewrap(current, new, DATA_KEY_ID, &wrapped)?;
        sqlx::query("UPDATE store_keys SET wrapped_key = ?2 WHERE key_id = ?1")
            .bind(DATA_KEY_ID)
            .bind(rewrapped)
            .execute(&mut *tx)
            .await
            .map_err(rows::backend)?;
        tx.commit().await.map_err(rows::backend)
    }

    /// A write transaction that holds the database's write lock from its first statement.
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(rows::backend)
    }

    /// The readiness probe: the database answers a read, the write connection is open, and the applied schema is
    /// this build's (another process may have migrated the file further, or a restored backup may be older).
    async fn readiness_impl(&self) -> StoreResult<()> {
        let version = migrate::current_version(&self.reader).await?;
        if self.writer.is_closed() {
            return Err(StoreError::Backend("the store is closed".into()));
        }
        cairn_store::schema::check_ready(version, LATEST_SCHEMA_VERSION)
    }

    /// Closes the `sqlx` pools, then the group commit's connection, which SQLite does not let checkpoint as the
    /// last one out: the WAL stays beside the database for the next open instead of being copied into it and synced
    /// at every close (a command's last tens of milliseconds). Every commit in it is already durable; the checkpoint
    /// interval bounds it as it does in a running server.
    async fn close_impl(&self) -> StoreResult<()> {
        if let Some(direct) = &self.direct {
            direct.close();
        }
        self.reader.close().await;
        self.writer.close().await;
        self.group.close().await
    }
}

/// The group commit writer's own connection to the database at `path` (created and migrated already), set up as
/// the `sqlx` connections are: `synchronous`, foreign keys, busy timeout, checkpoint interval; and, as the store's
/// last connection to close, no checkpoint on close.
fn group_connection(
    path: &Path,
    flags: OpenFlags,
    options: &SqliteOptions,
) -> StoreResult<rusqlite::Connection> {
    let flags = flags
        | OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection =
        rusqlite::Connection::open_with_flags(path, flags).map_err(rows::direct_backend)?;
    connection
        .busy_timeout(options.busy_timeout)
        .map_err(rows::direct_backend)?;
    let synchronous = match options.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    connection
        .pragma_update(None, "foreign_keys", true)
        .and_then(|()| connection.pragma_update(None, "synchronous", synchronous))
        // Closed last (see `close_impl`): no checkpoint as it goes.
        .and_then(|()| {
            connection
                .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
                .map(drop)
        })
        .and_then(|()| {
            connection.pragma_update(None, "wal_autocheckpoint", options.wal_autocheckpoint_pages)
        })
        .map_err(rows::direct_backend)?;
    Ok(connection)
}

fn create_data_dir(path: &Path) -> StoreResult<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(path).map_err(|e| {
        StoreError::Backend(format!(
            "cannot create data directory {}: {e}",
            path.display()
        ))
    })
}

/// Reads and unwraps the store's data key, creating it on first open. Two processes opening a fresh database at
/// once both insert-if-absent and then read the same row.
async fn load_data_key(pool: &SqlitePool, master_key: &MasterKey) -> StoreResult<DataKey> {
    let existing: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT wrapped_key FROM store_keys WHERE key_id = ?1")
            .bind(DATA_KEY_ID)
            .fetch_optional(pool)
            .await
            .map_err(rows::backend)?;
    if let Some(wrapped) = existing {
        return DataKey::unwrap(master_key, DATA_KEY_ID, &wrapped);
    }
    let (_fresh, wrapped) = DataKey::generate_wrapped(master_key, DATA_KEY_ID)?;
    sqlx::query("INSERT INTO store_keys (key_id, wrapped_key, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (key_id) DO NOTHING")
        .bind(DATA_KEY_ID)
        .bind(wrapped)
        .bind(Timestamp::now().unix_millis())
        .execute(pool)
        .await
        .map_err(rows::backend)?;
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT wrapped_key FROM store_keys WHERE key_id = ?1")
            .bind(DATA_KEY_ID)
            .fetch_one(pool)
            .await
            .map_err(|e| match e {
                sqlx::Error::RowNotFound => {
                    StoreError::corrupt(Entity::StoreKey, "the data key row vanished")
                }
                other => rows::backend(other),
            })?;
    DataKey::unwrap(master_key, DATA_KEY_ID, &stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn cache_size(pool: &SqlitePool) -> i64 {
        sqlx::query_scalar("PRAGMA cache_size")
            .fetch_one(pool)
            .await
            .expect("cache_size")
    }

    #[tokio::test]
    async fn read_connections_keep_a_smaller_page_cache_than_the_writer() {
        let dir = tempfile::tempdir().expect("a directory");
        let key = MasterKey::generate().expect("a key");
        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect("open");
        assert_eq!(
            cache_size(&store.reader).await,
            -i64::from(READER_CACHE_KIB)
        );
        assert_eq!(cache_size(&store.writer).await, -2000, "SQLite's default");
        let direct = store
            .direct
            .as_ref()
            .expect("a file store reads many rows directly");
        let direct_cache: i64 = direct
            .read(|conn| {
                conn.query_row("PRAGMA cache_size", [], |row| row.get(0))
                    .map_err(rows::direct_backend)
            })
            .await
            .expect("cache_size");
        assert_eq!(direct_cache, -i64::from(READER_CACHE_KIB));
    }

    #[tokio::test]
    async fn a_closed_store_refuses_direct_reads() {
        use cairn_store::{DeploymentId, OperationJournal, Store};

        let dir = tempfile::tempdir().expect("a directory");
        let key = MasterKey::generate().expect("a key");
        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect("open");
        let run = DeploymentId::generate();
        assert!(
            store
                .latest_operations(&run)
                .await
                .expect("a read")
                .is_empty()
        );
        store.close().await.expect("close");
        let refused = store.latest_operations(&run).await;
        assert!(
            matches!(refused, Err(StoreError::Backend(ref message)) if message.contains("closed")),
            "{refused:?}"
        );
    }

    /// Closing copies nothing back into the database file: the WAL, with every commit in it, stays for the next
    /// open, which reads them all. (With a checkpoint on close, the WAL would be gone.)
    #[tokio::test]
    async fn closing_leaves_the_wal_for_the_next_open() {
        use cairn_store::{DeploymentStore, Precondition, Store};

        let dir = tempfile::tempdir().expect("a directory");
        let key = MasterKey::generate().expect("a key");
        let wal = dir.path().join(format!("{DATABASE_FILE_NAME}-wal"));
        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect("open");
        let written = store
            .put_deployment(
                cairn_store::conformance::new_deployment(
                    "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg",
                    "kept",
                    None,
                ),
                Precondition::MustNotExist,
            )
            .await
            .expect("a deployment");
        // A read of its own connection (`direct_reads`), idle when the store closes, which must not checkpoint
        // either.
        store
            .get_deployment(&written.key)
            .await
            .expect("read")
            .expect("the deployment just written");
        store.close().await.expect("close");
        drop(store);
        let kept = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        assert!(kept > 0, "the WAL was checkpointed away on close");

        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect("reopen");
        let read = store
            .get_deployment(&written.key)
            .await
            .expect("read")
            .expect("the deployment written before the close");
        assert_eq!(read.id, written.id);
    }
}

//! The shared store of cairn: [`cairn_store::Store`] on PostgreSQL 13+, so several `cairn serve` replicas can run
//! on one database.
//!
//! # How it works
//!
//! - The schema mirrors the SQLite store's table for table and column for column (`migrations/`, numbered alike),
//!   so rows are read by the same `cairn_store::codec` decoders and copy between the two (`cairn_store::transfer`,
//!   [`PostgresStore::import_from`]). Key columns are `COLLATE "C"`, so listings order bytewise as SQLite does.
//! - Migrations are embedded and applied on open, all pending ones in one transaction under an advisory lock, so
//!   replicas starting together migrate once; a database from a newer cairn is refused ([`LATEST_SCHEMA_VERSION`]).
//!   [`PostgresStore::migrate`] applies them without opening the store (no key needed).
//! - Every write is one transaction, committed before its future completes (PostgreSQL's `synchronous_commit`
//!   decides how durable a commit is; the default waits for the WAL flush). Isolation is READ COMMITTED; a write
//!   that reads before it decides (a precondition, insert-or-replace, the next journal sequence number) first
//!   takes a transaction-scoped advisory lock on its key, so concurrent writers of one key — in this process or
//!   another — take turns and see each other's commits, as SQLite's single writer does.
//! - Claims are conditional updates (`owner`, expiry) that PostgreSQL re-checks on the latest row version, so of
//!   two replicas taking over one expired claim exactly one wins; a takeover bumps the row version, fencing the old
//!   holder's version-guarded updates. Leases keep a generation that grows with every change of holder.
//! - Secrets are sealed with the store's data key before they reach SQL (`cairn_store::sealed`); the data key is
//!   stored only wrapped by the master key, which never enters the database: it comes from `CAIRN_STORE_KEY` or a
//!   key file (`cairn_store::crypto::load_server_master_key`).
//! - Runtime queries only (no compile-time macros), so no database is needed to build.

mod deployments;
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

use std::str::FromStr;
use std::time::Duration;

use cairn_store::crypto::{DATA_KEY_ID, DataKey, MasterKey};
use cairn_store::{Entity, StoreError, StoreResult, Timestamp};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

pub use cairn_store::schema::Migrated;
pub use migrate::LATEST_SCHEMA_VERSION;

use crate::rows::backend;

/// Tuning for [`PostgresStore::open_with`].
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// Connections the store's pool keeps at most.
    pub max_connections: u32,
    /// How long a call waits for a free connection (or to connect) before failing with `Backend`.
    pub acquire_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

/// The PostgreSQL implementation of [`cairn_store::Store`].
pub struct PostgresStore {
    pool: PgPool,
    data_key: DataKey,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database?sslmode=...`), applies
    /// pending migrations and unwraps the store's data key with `master_key` (creating the data key in a new
    /// database). A master key other than the one the store was created with fails with [`StoreError::Crypto`].
    pub async fn open(url: &str, master_key: &MasterKey) -> StoreResult<Self> {
        Self::open_with(url, master_key, PostgresOptions::default()).await
    }

    /// [`PostgresStore::open`] with explicit options.
    pub async fn open_with(
        url: &str,
        master_key: &MasterKey,
        options: PostgresOptions,
    ) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect_options(url)?)
            .await
            .map_err(backend)?;
        migrate::migrate(&pool, LATEST_SCHEMA_VERSION).await?;
        let data_key = load_data_key(&pool, master_key).await?;
        Ok(PostgresStore { pool, data_key })
    }

    /// Applies pending migrations to the database at `url` without opening the store (no master key needed) and
    /// says from which version to which.
    pub async fn migrate(url: &str) -> StoreResult<Migrated> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(connect_options(url)?)
            .await
            .map_err(backend)?;
        let migrated = migrate::migrate(&pool, LATEST_SCHEMA_VERSION).await;
        pool.close().await;
        migrated
    }

    /// The schema version of the open database.
    pub async fn schema_version(&self) -> StoreResult<u32> {
        migrate::current_version(&self.pool).await
    }

    /// Rewraps the data key under `new` (master-key rotation): only the wrapped key row changes. The operator then
    /// gives every replica the new key.
    pub async fn rotate_master_key(&self, current: &MasterKey, new: &MasterKey) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        let wrapped: Vec<u8> =
            sqlx::query_scalar("SELECT wrapped_key FROM store_keys WHERE key_id = $1 FOR UPDATE")
                .bind(DATA_KEY_ID)
                .fetch_one(&mut *tx)
                .await
                .map_err(backend)?;
        let rewrapped = DataKey::rewrap(current, new, DATA_KEY_ID, &wrapped)?;
        sqlx::query("UPDATE store_keys SET wrapped_key = $2 WHERE key_id = $1")
            .bind(DATA_KEY_ID)
            .bind(rewrapped)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn begin(&self) -> StoreResult<Transaction<'static, Postgres>> {
        self.pool.begin().await.map_err(backend)
    }

    /// The readiness probe: the database answers a read on a pooled connection and its schema is this build's
    /// (another server may have migrated it further, or a restored dump may be older).
    async fn readiness_impl(&self) -> StoreResult<()> {
        if self.pool.is_closed() {
            return Err(StoreError::Backend("the store is closed".into()));
        }
        let version = migrate::current_version(&self.pool).await?;
        cairn_store::schema::check_ready(version, LATEST_SCHEMA_VERSION)
    }

    async fn close_impl(&self) -> StoreResult<()> {
        self.pool.close().await;
        Ok(())
    }
}

/// The connection options of `url`. A URL that does not parse is refused without repeating it (it may hold a
/// password).
fn connect_options(url: &str) -> StoreResult<PgConnectOptions> {
    PgConnectOptions::from_str(url)
        .map(|options| options.application_name("cairn"))
        .map_err(|_| {
            StoreError::Backend(
                "the store URL is not a valid PostgreSQL URL (postgres://user:password@host:port/database)"
                    .into(),
            )
        })
}

/// Reads and unwraps the store's data key, creating it on first open. Replicas opening a fresh database at once
/// both insert-if-absent and then read the one row that won.
async fn load_data_key(pool: &PgPool, master_key: &MasterKey) -> StoreResult<DataKey> {
    let existing: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT wrapped_key FROM store_keys WHERE key_id = $1")
            .bind(DATA_KEY_ID)
            .fetch_optional(pool)
            .await
            .map_err(backend)?;
    if let Some(wrapped) = existing {
        return DataKey::unwrap(master_key, DATA_KEY_ID, &wrapped);
    }
    let (_fresh, wrapped) = DataKey::generate_wrapped(master_key, DATA_KEY_ID)?;
    sqlx::query(
        "INSERT INTO store_keys (key_id, wrapped_key, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (key_id) DO NOTHING",
    )
    .bind(DATA_KEY_ID)
    .bind(wrapped)
    .bind(Timestamp::now().unix_millis())
    .execute(pool)
    .await
    .map_err(backend)?;
    let stored: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT wrapped_key FROM store_keys WHERE key_id = $1")
            .bind(DATA_KEY_ID)
            .fetch_optional(pool)
            .await
            .map_err(backend)?;
    let stored =
        stored.ok_or_else(|| StoreError::corrupt(Entity::StoreKey, "the data key row vanished"))?;
    DataKey::unwrap(master_key, DATA_KEY_ID, &stored)
}

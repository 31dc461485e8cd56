//! Reads of many rows (a deployment's operations, its journal) on read-only `rusqlite` connections of their own,
//! each read in one call on a blocking thread: through `sqlx`, every row of a result is a round trip to its
//! connection's thread, which made reading the 800 operations of a finished deployment take five times what the
//! query itself takes.
//!
//! The connections are opened when first needed and kept for the next read (a few at most); closing the store
//! drops the idle ones, and one in use is dropped when its read returns. They never checkpoint as they close: the
//! group commit's connection is the store's last (see `SqliteStore::close_impl`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_store::codec::{Columns, Row};
use cairn_store::{Entity, StoreError, StoreResult};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use crate::rows::direct_backend;

/// Idle connections kept for the next read: reads of many rows are few at a time (a stack's snapshot, a poll of a
/// deployment's operations).
const MAX_IDLE: usize = 2;

/// Read-only connections to the store's database file, for reads of many rows.
pub(crate) struct DirectReads {
    shared: Arc<Shared>,
}

struct Shared {
    path: PathBuf,
    busy_timeout: Duration,
    cache_kib: u32,
    idle: Mutex<Vec<Connection>>,
    closed: AtomicBool,
}

impl DirectReads {
    /// Reads of the database at `path` (a file: an in-memory store reads through its one `sqlx` connection).
    pub(crate) fn new(path: PathBuf, busy_timeout: Duration, cache_kib: u32) -> Self {
        DirectReads {
            shared: Arc::new(Shared {
                path,
                busy_timeout,
                cache_kib,
                idle: Mutex::default(),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Runs `read` on one of the connections, on a blocking thread. A read of several statements that must agree
    /// runs them in a transaction of its own.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            if shared.closed.load(Ordering::Acquire) {
                return Err(closed());
            }
            let connection = match shared.idle().pop() {
                Some(connection) => connection,
                None => shared.open()?,
            };
            let result = read(&connection);
            let mut idle = shared.idle();
            if !shared.closed.load(Ordering::Acquire) && idle.len() < MAX_IDLE {
                idle.push(connection);
            }
            result
        })
        .await
        .unwrap_or_else(|_| Err(StoreError::Backend("a read stopped unexpectedly".into())))
    }

    /// Drops the idle connections; reads from now on fail as the `sqlx` pools' do.
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.idle().clear();
    }
}

impl Shared {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        // Only pushed to and popped whole connections: a panic elsewhere cannot leave it half-changed.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn open(&self) -> StoreResult<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(&self.path, flags).map_err(direct_backend)?;
        connection
            .busy_timeout(self.busy_timeout)
            .and_then(|()| {
                connection
                    .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
                    .map(drop)
            })
            .and_then(|()| connection.pragma_update(None, "cache_size", -i64::from(self.cache_kib)))
            .map_err(direct_backend)?;
        Ok(connection)
    }
}

fn closed() -> StoreError {
    StoreError::Backend("the store is closed".into())
}

/// A `rusqlite` result row's columns, by name.
pub(crate) struct DirectColumns<'r, 's>(pub(crate) &'r rusqlite::Row<'s>);

impl Columns for DirectColumns<'_, '_> {
    fn text(&self, column: &str) -> Result<Option<String>, String> {
        self.0.get(column).map_err(|e| e.to_string())
    }

    fn integer(&self, column: &str) -> Result<Option<i64>, String> {
        self.0.get(column).map_err(|e| e.to_string())
    }

    fn boolean(&self, column: &str) -> Result<Option<bool>, String> {
        self.0.get(column).map_err(|e| e.to_string())
    }

    fn bytes(&self, column: &str) -> Result<Option<Vec<u8>>, String> {
        self.0.get(column).map_err(|e| e.to_string())
    }
}

/// Runs `sql` with `params` on `connection` and reads every row of `entity`'s table with a `cairn_store::codec`
/// decoder.
pub(crate) fn query_all<T, P: rusqlite::Params>(
    connection: &Connection,
    sql: &str,
    params: P,
    entity: Entity,
    decoder: impl Fn(&Row<'_, DirectColumns<'_, '_>>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut statement = connection.prepare_cached(sql).map_err(direct_backend)?;
    let mut rows = statement.query(params).map_err(direct_backend)?;
    let mut decoded = Vec::new();
    while let Some(row) = rows.next().map_err(direct_backend)? {
        decoded.push(decoder(&Row::new(&DirectColumns(row), entity))?);
    }
    Ok(decoded)
}

/// Runs `sql` with `params` on `connection` and reads its first row, if any, as [`query_all`] reads each.
pub(crate) fn query_one<T, P: rusqlite::Params>(
    connection: &Connection,
    sql: &str,
    params: P,
    entity: Entity,
    decoder: impl Fn(&Row<'_, DirectColumns<'_, '_>>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut statement = connection.prepare_cached(sql).map_err(direct_backend)?;
    let mut rows = statement.query(params).map_err(direct_backend)?;
    match rows.next().map_err(direct_backend)? {
        Some(row) => decoder(&Row::new(&DirectColumns(row), entity)).map(Some),
        None => Ok(None),
    }
}

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
/// A row read through a prepared statement, its columns found by name. The statement's column names are read once
/// per query ([`ColumnNames`]): rusqlite looks a name up by asking SQLite for each column's name in turn and comparing
/// it, about a thousand instructions a column, which made naming the columns cost more than decoding their values.
pub(crate) struct DirectColumns<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    names: &'r ColumnNames,
}

impl<'r, 's> DirectColumns<'r, 's> {
    pub(crate) fn new(row: &'r rusqlite::Row<'s>, names: &'r ColumnNames) -> Self {
        DirectColumns { row, names }
    }

    fn get<T: rusqlite::types::FromSql>(&self, column: &str) -> Result<T, String> {
        match self.names.index_of(column) {
            Some(index) => self.row.get(index),
            // Not a name as the statement spells it: rusqlite's own lookup (which ignores ASCII case) decides.
            None => self.row.get(column),
        }
        .map_err(|e| e.to_string())
    }
}

/// The column names of a prepared statement, in order.
pub(crate) struct ColumnNames(Vec<String>);

impl ColumnNames {
    pub(crate) fn of(statement: &rusqlite::Statement<'_>) -> Self {
        ColumnNames(
            statement
                .column_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        )
    }

    fn index_of(&self, column: &str) -> Option<usize> {
        self.0.iter().position(|name| name == column)
    }
}

impl Columns for DirectColumns<'_, '_> {
    fn text(&self, column: &str) -> Result<Option<String>, String> {
        self.get(column)
    }

    fn integer(&self, column: &str) -> Result<Option<i64>, String> {
        self.get(column)
    }

    fn boolean(&self, column: &str) -> Result<Option<bool>, String> {
        self.get(column)
    }

    fn bytes(&self, column: &str) -> Result<Option<Vec<u8>>, String> {
        self.get(column)
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
    let names = ColumnNames::of(&statement);
    let mut rows = statement.query(params).map_err(direct_backend)?;
    let mut decoded = Vec::new();
    while let Some(row) = rows.next().map_err(direct_backend)? {
        decoded.push(decoder(&Row::new(
            &DirectColumns::new(row, &names),
            entity,
        ))?);
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
    let names = ColumnNames::of(&statement);
    let mut rows = statement.query(params).map_err(direct_backend)?;
    match rows.next().map_err(direct_backend)? {
        Some(row) => decoder(&Row::new(&DirectColumns::new(row, &names), entity)).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_found_by_the_statement_s_names_and_otherwise_as_rusqlite_finds_them() {
        let connection = Connection::open_in_memory().unwrap();
        let mut statement = connection
            .prepare("SELECT 7 AS seq, 'x' AS Operation_Id, NULL AS status_code")
            .unwrap();
        let names = ColumnNames::of(&statement);
        let mut rows = statement.query([]).unwrap();
        let row = rows.next().unwrap().unwrap();
        let columns = DirectColumns::new(row, &names);
        assert_eq!(columns.integer("seq"), Ok(Some(7)));
        assert_eq!(columns.text("status_code"), Ok(None));
        // Another spelling of a name: found without regard to ASCII case, as rusqlite finds it.
        assert_eq!(columns.text("operation_id"), Ok(Some("x".to_owned())));
        assert!(columns.text("missing").is_err());
        assert!(columns.text("seq").is_err(), "an integer is not text");
    }
}

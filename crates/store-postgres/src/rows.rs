//! PostgreSQL rows as `cairn_store::codec` reads them, PostgreSQL's errors as store errors, and the per-key locks
//! that serialise writers across processes.

use cairn_store::codec::{Columns, Row};
use cairn_store::{Entity, StoreError, StoreResult};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row as _};

/// Any backend failure, as `Backend`. PostgreSQL's messages (without their detail, which sqlx does not print) name
/// tables and constraints, never bound values, so no secret can reach the message.
pub(crate) fn backend(error: sqlx::Error) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// A failure of a write: a unique-key violation is a `Conflict`, a missing parent row `NotFound`.
pub(crate) fn write_error(entity: Entity, key: &str, error: sqlx::Error) -> StoreError {
    if let Some(db) = error.as_database_error() {
        match db.kind() {
            sqlx::error::ErrorKind::UniqueViolation => {
                return StoreError::conflict(entity, key, "it already exists");
            }
            sqlx::error::ErrorKind::ForeignKeyViolation => {
                return StoreError::not_found(entity, key);
            }
            _ => {}
        }
    }
    backend(error)
}

/// A PostgreSQL result row's columns, by name.
pub(crate) struct PgColumns<'r>(pub(crate) &'r PgRow);

impl Columns for PgColumns<'_> {
    fn text(&self, column: &str) -> Result<Option<String>, String> {
        self.0.try_get(column).map_err(|e| e.to_string())
    }

    fn integer(&self, column: &str) -> Result<Option<i64>, String> {
        self.0.try_get(column).map_err(|e| e.to_string())
    }

    fn boolean(&self, column: &str) -> Result<Option<bool>, String> {
        self.0.try_get(column).map_err(|e| e.to_string())
    }

    fn bytes(&self, column: &str) -> Result<Option<Vec<u8>>, String> {
        self.0.try_get(column).map_err(|e| e.to_string())
    }
}

/// Reads `row` of `entity`'s table with a `cairn_store::codec` decoder.
pub(crate) fn decode<'r, T>(
    row: &'r PgRow,
    entity: Entity,
    decoder: impl FnOnce(&Row<'_, PgColumns<'r>>) -> StoreResult<T>,
) -> StoreResult<T> {
    decoder(&Row::new(&PgColumns(row), entity))
}

/// The kinds of key a write serialises on; each is its own advisory-lock space (the first key of PostgreSQL's
/// two-key advisory locks; the migration lock uses the one-key form, a space of its own).
#[derive(Clone, Copy, Debug)]
#[repr(i32)]
pub(crate) enum LockSpace {
    ResourceGroup = 1,
    Deployment = 2,
    Journal = 3,
    ManagedResource = 4,
    Vault = 5,
    Secret = 6,
    Lease = 7,
    Stack = 8,
    StackWhatIf = 9,
    HostOperation = 10,
}

/// Waits until this transaction alone writes `key` in `space`, across every process on the database; the lock is
/// released when the transaction ends. Writes that read a row and then decide (a precondition, an insert-or-replace,
/// the next journal sequence number) take it first, so under READ COMMITTED they behave as SQLite's serialised
/// writers do: each sees the previous writer's commit. Two keys with the same hash only wait for each other.
pub(crate) async fn lock_key(
    conn: &mut PgConnection,
    space: LockSpace,
    key: &str,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(space as i32)
        .bind(key)
        .execute(conn)
        .await
        .map(drop)
        .map_err(backend)
}

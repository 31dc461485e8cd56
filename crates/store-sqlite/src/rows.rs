//! SQLite rows as `cairn_store::codec` reads them, and SQLite's errors as store errors. How each record maps to
//! its columns (JSON text, tags, preconditions, pages) lives in `cairn_store::codec`, shared with PostgreSQL.

use cairn_store::codec::{Columns, Row};
use cairn_store::{Entity, StoreError, StoreResult};
use sqlx::Row as _;
use sqlx::sqlite::SqliteRow;

/// Any backend failure, as `Backend`. SQLite's messages name tables and constraints, never bound values, so no
/// secret can reach the message.
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

/// [`backend`] for the group commit writer's own connection (`rusqlite`).
pub(crate) fn direct_backend(error: rusqlite::Error) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// [`write_error`] for the group commit writer's own connection (`rusqlite`): the same codes, the same errors.
pub(crate) fn direct_write_error(entity: Entity, key: &str, error: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(failure, _) = &error {
        match failure.extended_code {
            rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                return StoreError::conflict(entity, key, "it already exists");
            }
            rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => {
                return StoreError::not_found(entity, key);
            }
            _ => {}
        }
    }
    direct_backend(error)
}

/// A SQLite result row's columns, by name.
pub(crate) struct SqliteColumns<'r>(pub(crate) &'r SqliteRow);

impl Columns for SqliteColumns<'_> {
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
    row: &'r SqliteRow,
    entity: Entity,
    decoder: impl FnOnce(&Row<'_, SqliteColumns<'r>>) -> StoreResult<T>,
) -> StoreResult<T> {
    decoder(&Row::new(&SqliteColumns(row), entity))
}

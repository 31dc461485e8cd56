//! Conversions between store records and SQLite rows: JSON columns, integers, error mapping, preconditions.

use cairn_store::{Entity, Precondition, StoreError, StoreResult, Tags, Timestamp, format};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{Decode, Row, Sqlite, Type};

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

/// One column of a row; a type mismatch means the row is corrupt.
pub(crate) fn get<T>(row: &SqliteRow, column: &str, entity: Entity) -> StoreResult<T>
where
    T: for<'r> Decode<'r, Sqlite> + Type<Sqlite>,
{
    row.try_get(column)
        .map_err(|e| StoreError::corrupt(entity, format!("column {column}: {e}")))
}

pub(crate) fn timestamp(row: &SqliteRow, column: &str, entity: Entity) -> StoreResult<Timestamp> {
    get::<i64>(row, column, entity).map(Timestamp::from_unix_millis)
}

pub(crate) fn optional_timestamp(
    row: &SqliteRow,
    column: &str,
    entity: Entity,
) -> StoreResult<Option<Timestamp>> {
    Ok(get::<Option<i64>>(row, column, entity)?.map(Timestamp::from_unix_millis))
}

pub(crate) fn unsigned(row: &SqliteRow, column: &str, entity: Entity) -> StoreResult<u64> {
    let value: i64 = get(row, column, entity)?;
    u64::try_from(value)
        .map_err(|_| StoreError::corrupt(entity, format!("column {column} is negative")))
}

/// Checks the row's `format_version` column (or another named one).
pub(crate) fn check_format(row: &SqliteRow, column: &str, entity: Entity) -> StoreResult<u32> {
    format::accept_format(entity, get(row, column, entity)?)
}

pub(crate) fn current_format(entity: Entity) -> i64 {
    i64::from(format::current_format(entity))
}

pub(crate) fn json_text(value: &Value) -> String {
    value.to_string()
}

pub(crate) fn optional_json_text(value: Option<&Value>) -> Option<String> {
    value.map(json_text)
}

pub(crate) fn json(row: &SqliteRow, column: &str, entity: Entity) -> StoreResult<Value> {
    let text: String = get(row, column, entity)?;
    parse_json(&text, column, entity)
}

pub(crate) fn optional_json(
    row: &SqliteRow,
    column: &str,
    entity: Entity,
) -> StoreResult<Option<Value>> {
    get::<Option<String>>(row, column, entity)?
        .map(|text| parse_json(&text, column, entity))
        .transpose()
}

fn parse_json(text: &str, column: &str, entity: Entity) -> StoreResult<Value> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::corrupt(entity, format!("column {column} is not JSON: {e}")))
}

pub(crate) fn tags_text(tags: &Tags) -> String {
    // A map of strings always serialises; the fallback only keeps the signature infallible.
    serde_json::to_string(tags).unwrap_or_else(|_| "{}".to_owned())
}

pub(crate) fn tags(row: &SqliteRow, column: &str, entity: Entity) -> StoreResult<Tags> {
    let text: String = get(row, column, entity)?;
    serde_json::from_str(&text)
        .map_err(|e| StoreError::corrupt(entity, format!("column {column}: {e}")))
}

/// A `u64` for binding; versions and limits never come near `i64::MAX`, and saturating keeps a wild value from
/// matching anything.
pub(crate) fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Applies a [`Precondition`] to what a write found: the current row version, if any.
pub(crate) fn check_precondition(
    entity: Entity,
    key: &str,
    precondition: Precondition,
    found_version: Option<i64>,
) -> StoreResult<()> {
    match (precondition, found_version) {
        (Precondition::Any, _) | (Precondition::MustNotExist, None) => Ok(()),
        (Precondition::MustNotExist, Some(_)) => {
            Err(StoreError::conflict(entity, key, "it already exists"))
        }
        (Precondition::Version(_), None) => Err(StoreError::not_found(entity, key)),
        (Precondition::Version(expected), Some(found)) if signed(expected) == found => Ok(()),
        (Precondition::Version(expected), Some(found)) => Err(StoreError::conflict(
            entity,
            key,
            format!("expected version {expected}, found version {found}"),
        )),
    }
}

/// The page size plus one: fetching one extra row tells whether another page follows.
pub(crate) fn fetch_limit(page_size: u32) -> i64 {
    i64::from(page_size) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preconditions() {
        let check = |p, found| check_precondition(Entity::Lease, "k", p, found);
        assert!(check(Precondition::Any, None).is_ok());
        assert!(check(Precondition::Any, Some(3)).is_ok());
        assert!(check(Precondition::MustNotExist, None).is_ok());
        assert!(check(Precondition::MustNotExist, Some(1)).is_err_and(|e| e.is_conflict()));
        assert!(check(Precondition::Version(1), None).is_err_and(|e| e.is_not_found()));
        assert!(check(Precondition::Version(1), Some(1)).is_ok());
        assert!(check(Precondition::Version(1), Some(2)).is_err_and(|e| e.is_conflict()));
        assert!(check(Precondition::Version(u64::MAX), Some(-1)).is_err());
    }
}

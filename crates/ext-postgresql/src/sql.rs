//! SQL text building: identifiers and literals quoted the way PostgreSQL's own `quote_ident` and
//! `quote_literal` do, and the name checks that make "created exactly or refused" hold.
//!
//! DDL statements take no bind parameters, so names and values reach PostgreSQL inside the statement
//! text; everything user-supplied goes through [`ident`] or [`literal`].

use cairn_extension_sdk::{ExtensionError, codes};
use sqlx::{AssertSqlSafe, Executor, Postgres};

use crate::error::sql_error;

/// The longest identifier PostgreSQL keeps (`NAMEDATALEN - 1` bytes); longer ones would be truncated,
/// silently creating an object with another name, so they are refused.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// `name` as a double-quoted identifier (`"a""b"`): always quoted, so case and every character are kept.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `value` as a string literal: `'it''s'`, or `E'a\\b'` when it holds a backslash, so the result means
/// the same whatever `standard_conforming_strings` is.
pub fn literal(value: &str) -> String {
    let quoted = value.replace('\'', "''");
    if quoted.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// Checks a name PostgreSQL will store: not empty, no NUL (PostgreSQL cannot store it), at most
/// [`MAX_IDENTIFIER_BYTES`] bytes. `target` is the JSON pointer reported on failure.
pub fn check_name(name: &str, target: &str) -> Result<(), ExtensionError> {
    let problem = if name.is_empty() {
        "must not be empty"
    } else if name.contains('\0') {
        "must not contain the NUL character"
    } else if name.len() > MAX_IDENTIFIER_BYTES {
        "is longer than PostgreSQL's 63-byte identifier limit (it would be truncated)"
    } else {
        return Ok(());
    };
    Err(ExtensionError::invalid(
        codes::INVALID_PROPERTIES,
        target,
        format!("The name {problem}."),
    ))
}

/// Checks a string value that goes into a literal: PostgreSQL text cannot hold NUL.
pub fn check_text(value: &str, target: &str) -> Result<(), ExtensionError> {
    if value.contains('\0') {
        return Err(ExtensionError::invalid(
            codes::INVALID_PROPERTIES,
            target,
            "The value must not contain the NUL character.",
        ));
    }
    Ok(())
}

/// Runs a statement built with [`ident`]/[`literal`] (simple query protocol: DDL is not prepared);
/// failures are reported as trying to `action`.
pub async fn execute<'c, E>(
    executor: E,
    statement: String,
    action: &str,
) -> Result<(), ExtensionError>
where
    E: Executor<'c, Database = Postgres>,
{
    executor
        .execute(sqlx::raw_sql(AssertSqlSafe(statement)))
        .await
        .map(|_| ())
        .map_err(|err| sql_error(&err, action))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_double_their_quotes() {
        assert_eq!(ident("plain"), "\"plain\"");
        assert_eq!(ident("Mixed Case"), "\"Mixed Case\"");
        assert_eq!(
            ident("x\"; DROP ROLE postgres; --"),
            "\"x\"\"; DROP ROLE postgres; --\""
        );
        assert_eq!(ident("ünï😀"), "\"ünï😀\"");
    }

    #[test]
    fn literals_double_quotes_and_escape_backslashes() {
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(literal("a\\b'c"), "E'a\\\\b''c'");
        assert_eq!(literal("'; DROP TABLE x; --"), "'''; DROP TABLE x; --'");
    }

    #[test]
    fn names_that_would_not_be_kept_exactly_are_refused() {
        assert!(check_name("ok", "/properties/name").is_ok());
        assert!(check_name(&"é".repeat(31), "/p").is_ok()); // 62 bytes
        for bad in ["", "a\0b", &"é".repeat(32), &"x".repeat(64)] {
            let err = check_name(bad, "/properties/name").unwrap_err();
            assert_eq!(err.error().target.as_deref(), Some("/properties/name"));
        }
        assert!(check_text("a\0", "/p").is_err());
    }
}

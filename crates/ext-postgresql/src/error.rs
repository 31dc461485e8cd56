//! PostgreSQL and connection failures as the contract's errors: a status and code a stack can act on
//! (409 for conflicts its retry rounds may work through, 503 when the server cannot be reached), the
//! server's message and detail, and never a secret (statements are not quoted).

use cairn_extension_sdk::{ExtensionError, codes};
use sqlx::postgres::PgDatabaseError;

/// Error codes of the PostgreSql extension.
pub mod pg_codes {
    /// The server cannot be reached or the pool timed out (503).
    pub const SERVER_UNREACHABLE: &str = "ServerUnreachable";
    /// The server refused the config's credentials (401).
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    /// The config's user lacks a privilege (403).
    pub const INSUFFICIENT_PRIVILEGE: &str = "InsufficientPrivilege";
    /// Other objects still depend on the one being dropped (409).
    pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "DependentObjectsStillExist";
    /// The object is in use, e.g. a database with open connections (409).
    pub const OBJECT_IN_USE: &str = "ObjectInUse";
    /// A referenced object (role, database, schema) does not exist (409: it may be created later).
    pub const UNDEFINED_OBJECT: &str = "UndefinedObject";
    /// A property cannot be changed on an existing object (409).
    pub const IMMUTABLE_PROPERTY: &str = "ImmutablePropertyChanged";
    /// A concurrent change got in the way; retrying helps (409).
    pub const CONCURRENT_CHANGE: &str = "ConcurrentChange";
    /// Any other error PostgreSQL reported (400).
    pub const POSTGRESQL_ERROR: &str = "PostgreSqlError";
}

/// A drop refused because other objects still depend on the dropped one, with `hint` saying what the user can do;
/// any other outcome unchanged. The 409 lets a stack's next delete round try again once the dependents are gone.
pub fn with_dependents_hint<T>(
    result: Result<T, ExtensionError>,
    hint: &str,
) -> Result<T, ExtensionError> {
    match result {
        Err(err) if err.code() == pg_codes::DEPENDENT_OBJECTS_STILL_EXIST => {
            Err(ExtensionError::conflict(
                pg_codes::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("{} {hint}", err.error().message),
            )
            .with_target("/identifiers/name"))
        }
        other => other,
    }
}

/// `err` while trying to `action` (e.g. "create the role \"app\"").
pub fn sql_error(err: &sqlx::Error, action: &str) -> ExtensionError {
    match err {
        sqlx::Error::Database(database) => {
            let Some(pg) = database.try_downcast_ref::<PgDatabaseError>() else {
                return ExtensionError::new(
                    400,
                    pg_codes::POSTGRESQL_ERROR,
                    format!("Could not {action}: {}.", database.message()),
                );
            };
            database_error(pg, action)
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Protocol(_) => ExtensionError::new(
            503,
            pg_codes::SERVER_UNREACHABLE,
            format!("Could not {action}: the PostgreSQL server cannot be reached ({err})."),
        ),
        sqlx::Error::Configuration(_) => ExtensionError::invalid(
            codes::INVALID_CONFIG,
            "/config",
            format!("Could not {action}: the connection settings are not usable ({err})."),
        ),
        _ => {
            tracing::error!(action, "unexpected PostgreSQL client error: {err}");
            ExtensionError::internal(format!("Could not {action}: an unexpected error occurred."))
        }
    }
}

fn database_error(pg: &PgDatabaseError, action: &str) -> ExtensionError {
    let sqlstate = pg.code();
    // A syntax error quotes the statement, which may hold a password verifier; it is a bug here anyway.
    if sqlstate == "42601" {
        tracing::error!(
            action,
            "PostgreSQL rejected a generated statement (SQLSTATE 42601)"
        );
        return ExtensionError::internal(format!(
            "Could not {action}: the extension sent a statement PostgreSQL could not parse."
        ));
    }
    let (status, code) = match sqlstate {
        "28P01" | "28000" => (401, pg_codes::AUTHENTICATION_FAILED),
        "42501" => (403, pg_codes::INSUFFICIENT_PRIVILEGE),
        "2BP01" => (409, pg_codes::DEPENDENT_OBJECTS_STILL_EXIST),
        "55006" => (409, pg_codes::OBJECT_IN_USE),
        "42704" | "3D000" | "3F000" | "42P01" | "42883" => (409, pg_codes::UNDEFINED_OBJECT),
        "40001" | "40P01" | "42710" | "42P04" | "42P06" | "XX000" | "55P03" | "23505" => {
            (409, pg_codes::CONCURRENT_CHANGE)
        }
        "53300" | "57P01" | "57P02" | "57P03" => (503, pg_codes::SERVER_UNREACHABLE),
        _ => (400, pg_codes::POSTGRESQL_ERROR),
    };
    let mut message = format!("Could not {action}: {}", pg.message());
    if let Some(detail) = pg.detail() {
        message.push_str(&format!(" ({})", detail.replace('\n', "; ")));
    }
    message.push_str(&format!(" [SQLSTATE {sqlstate}]."));
    ExtensionError::new(status, code, message)
}

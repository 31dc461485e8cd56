//! cairn's own per-role and per-database settings (`cairn.*` placeholders in `pg_db_role_setting`), for
//! what PostgreSQL does not record but a later delete or get needs: `dropOwned`, `force`, `template`.
//!
//! A delete request carries only identifiers, so delete behaviours declared as properties are kept on the
//! object itself, where they follow the last applied template without changing the resource's identity.

use sqlx::PgConnection;

use cairn_extension_sdk::ExtensionError;

use crate::error::sql_error;
use crate::sql::{execute, ident, literal};

/// The object a mark belongs to.
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    /// `ALTER ROLE name SET ...`.
    Role(&'a str),
    /// `ALTER DATABASE name SET ...`.
    Database(&'a str),
}

/// The `cairn.*` settings of `owner` as (name without prefix, value) pairs.
pub async fn read(
    connection: &mut PgConnection,
    owner: Owner<'_>,
) -> Result<Vec<(String, String)>, ExtensionError> {
    let query = match owner {
        Owner::Role(_) => {
            "SELECT setting FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole, \
             unnest(s.setconfig) AS setting WHERE r.rolname = $1 AND s.setdatabase = 0"
        }
        Owner::Database(_) => {
            "SELECT setting FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase, \
             unnest(s.setconfig) AS setting WHERE d.datname = $1 AND s.setrole = 0"
        }
    };
    let name = match owner {
        Owner::Role(name) | Owner::Database(name) => name,
    };
    let settings: Vec<String> = sqlx::query_scalar(query)
        .bind(name)
        .fetch_all(connection)
        .await
        .map_err(|err| sql_error(&err, "read cairn's settings"))?;
    Ok(settings
        .into_iter()
        .filter_map(|setting| {
            let (key, value) = setting.split_once('=')?;
            Some((key.strip_prefix("cairn.")?.to_owned(), value.to_owned()))
        })
        .collect())
}

/// The value of mark `key` in `marks`.
pub fn value<'a>(marks: &'a [(String, String)], key: &str) -> Option<&'a str> {
    marks
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

/// Sets (or with `None` removes) mark `key` of `owner` when it differs from `current`.
pub async fn write(
    connection: &mut PgConnection,
    owner: Owner<'_>,
    current: &[(String, String)],
    key: &str,
    desired: Option<&str>,
) -> Result<(), ExtensionError> {
    if value(current, key) == desired {
        return Ok(());
    }
    let target = match owner {
        Owner::Role(name) => format!("ROLE {}", ident(name)),
        Owner::Database(name) => format!("DATABASE {}", ident(name)),
    };
    let statement = match desired {
        Some(value) => format!("ALTER {target} SET cairn.{key} = {}", literal(value)),
        None => format!("ALTER {target} RESET cairn.{key}"),
    };
    execute(connection, statement, "record cairn's settings").await
}

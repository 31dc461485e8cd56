//! Embedded, versioned schema migrations: each applied once, in order, in its own `BEGIN IMMEDIATE` transaction,
//! recorded in `schema_migrations` with a checksum so an edited migration is noticed rather than silently skipped.

use cairn_store::{Entity, StoreError, StoreResult, Timestamp};
use sqlx::SqlitePool;

use crate::rows::backend;

pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// Every migration, oldest first. Never edit a released one: add the next.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "core",
        sql: include_str!("../migrations/0001_core.sql"),
    },
    Migration {
        version: 2,
        name: "inventory_keyvault",
        sql: include_str!("../migrations/0002_inventory_keyvault.sql"),
    },
    Migration {
        version: 3,
        name: "leases",
        sql: include_str!("../migrations/0003_leases.sql"),
    },
];

/// The schema version this build creates and understands.
pub const LATEST_SCHEMA_VERSION: u32 = 3;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at INTEGER NOT NULL
)";

/// FNV-1a (64 bit) of the migration text: enough to notice an edited migration, no cryptography needed.
fn checksum(sql: &str) -> String {
    let hash = sql.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Brings the database to `target` (at most [`LATEST_SCHEMA_VERSION`]) and returns the version it is at.
pub(crate) async fn migrate(pool: &SqlitePool, target: u32) -> StoreResult<u32> {
    sqlx::query(CREATE_TABLE)
        .execute(pool)
        .await
        .map_err(backend)?;
    for migration in MIGRATIONS.iter().filter(|m| m.version <= target) {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        let applied: Vec<(i64, String)> =
            sqlx::query_as("SELECT version, checksum FROM schema_migrations ORDER BY version")
                .fetch_all(&mut *tx)
                .await
                .map_err(backend)?;
        if let Some((newest, _)) = applied.last()
            && *newest > i64::from(LATEST_SCHEMA_VERSION)
        {
            return Err(StoreError::corrupt(
                Entity::Schema,
                format!(
                    "the database has schema version {newest}, newer than this build's {LATEST_SCHEMA_VERSION}; upgrade cairn"
                ),
            ));
        }
        match applied
            .iter()
            .find(|(version, _)| *version == i64::from(migration.version))
        {
            Some((_, stored)) if *stored == checksum(migration.sql) => continue,
            Some(_) => {
                return Err(StoreError::corrupt(
                    Entity::Schema,
                    format!(
                        "migration {} ({}) differs from the one applied to this database",
                        migration.version, migration.name
                    ),
                ));
            }
            None => {}
        }
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?1, ?2, ?3, ?4)")
            .bind(i64::from(migration.version))
            .bind(migration.name)
            .bind(checksum(migration.sql))
            .bind(Timestamp::now().unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
    }
    current_version(pool).await
}

/// The highest applied migration (0 for an empty database).
pub(crate) async fn current_version(pool: &SqlitePool) -> StoreResult<u32> {
    let version: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM schema_migrations")
        .fetch_one(pool)
        .await
        .map_err(backend)?;
    u32::try_from(version.unwrap_or(0))
        .map_err(|_| StoreError::corrupt(Entity::Schema, "negative schema version"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_up_to_latest() {
        let versions: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=LATEST_SCHEMA_VERSION).collect::<Vec<_>>());
    }

    #[test]
    fn checksum_notices_edits() {
        assert_eq!(checksum("a"), checksum("a"));
        assert_ne!(
            checksum("CREATE TABLE a (x)"),
            checksum("CREATE TABLE a (y)")
        );
        assert_eq!(checksum(""), "cbf29ce484222325");
    }
}

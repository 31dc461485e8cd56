//! Embedded, versioned schema migrations, numbered like the SQLite store's (`crates/store-sqlite/migrations`): a
//! schema change is added to both. All pending migrations apply in one transaction (PostgreSQL's DDL is
//! transactional) under an advisory lock, so replicas starting together migrate once and a failed upgrade leaves
//! the database as it was. Each is recorded in `schema_migrations` with a checksum, so an edited migration is
//! noticed; a database from a newer cairn is refused (`cairn_store::schema`).

use cairn_store::schema::{self, Migrated};
use cairn_store::{StoreResult, Timestamp};
use sqlx::PgPool;

use crate::rows::backend;

pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// Every migration, oldest first. Never edit a released one: add the next (here and in the SQLite store).
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
    Migration {
        version: 4,
        name: "stacks",
        sql: include_str!("../migrations/0004_stacks.sql"),
    },
    Migration {
        version: 5,
        name: "stack_what_ifs",
        sql: include_str!("../migrations/0005_stack_what_ifs.sql"),
    },
    Migration {
        version: 6,
        name: "inventory_keys_by_type",
        sql: include_str!("../migrations/0006_inventory_keys_by_type.sql"),
    },
    Migration {
        version: 7,
        name: "host_operations",
        sql: include_str!("../migrations/0007_host_operations.sql"),
    },
    Migration {
        version: 8,
        name: "deployment_takeovers",
        sql: include_str!("../migrations/0008_deployment_takeovers.sql"),
    },
    Migration {
        version: 9,
        name: "inventory_detached",
        sql: include_str!("../migrations/0009_inventory_detached.sql"),
    },
    Migration {
        version: 10,
        name: "applied_properties",
        sql: include_str!("../migrations/0010_applied_properties.sql"),
    },
    Migration {
        version: 11,
        name: "replicas",
        sql: include_str!("../migrations/0011_replicas.sql"),
    },
];

/// The schema version this build creates and understands.
pub const LATEST_SCHEMA_VERSION: u32 = 11;

/// The advisory lock (one-key form) migrators hold: `cairn` in ASCII, a key of its own.
const MIGRATION_LOCK: i64 = 0x6361_6972_6e00_0001;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)";

/// Brings the database to `target` (at most [`LATEST_SCHEMA_VERSION`]).
pub(crate) async fn migrate(pool: &PgPool, target: u32) -> StoreResult<Migrated> {
    let mut tx = pool.begin().await.map_err(backend)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    sqlx::query(CREATE_TABLE)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    let applied: Vec<(i64, String)> =
        sqlx::query_as("SELECT version, checksum FROM schema_migrations ORDER BY version")
            .fetch_all(&mut *tx)
            .await
            .map_err(backend)?;
    let newest = applied.last().map(|(version, _)| *version);
    schema::refuse_newer(newest, LATEST_SCHEMA_VERSION)?;
    let from = schema::version_of(newest)?;
    let mut to = from;
    for migration in MIGRATIONS.iter().filter(|m| m.version <= target) {
        if schema::is_applied(&applied, migration.version, migration.name, migration.sql)? {
            continue;
        }
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::query(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(i64::from(migration.version))
        .bind(migration.name)
        .bind(schema::checksum(migration.sql))
        .bind(Timestamp::now().unix_millis())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        to = to.max(migration.version);
    }
    tx.commit().await.map_err(backend)?;
    Ok(Migrated { from, to })
}

/// The highest applied migration (0 for an empty database).
pub(crate) async fn current_version(pool: &PgPool) -> StoreResult<u32> {
    let version: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM schema_migrations")
        .fetch_one(pool)
        .await
        .map_err(backend)?;
    schema::version_of(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_up_to_latest() {
        let versions: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=LATEST_SCHEMA_VERSION).collect::<Vec<_>>());
    }

    /// Each migration has its SQLite twin under the same number and name, so a schema change lands in both.
    #[test]
    fn every_migration_mirrors_the_sqlite_one_of_its_number() {
        let sqlite_dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../store-sqlite/migrations");
        let mut sqlite: Vec<String> = std::fs::read_dir(&sqlite_dir)
            .expect("the SQLite migrations")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.ends_with(".sql"))
            .collect();
        sqlite.sort();
        let ours: Vec<String> = MIGRATIONS
            .iter()
            .map(|m| format!("{:04}_{}.sql", m.version, m.name))
            .collect();
        assert_eq!(
            sqlite, ours,
            "every SQLite migration has a PostgreSQL twin of the same number and name (and no other)"
        );
    }
}

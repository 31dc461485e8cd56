//! Embedded, versioned schema migrations: each applied once, in order, in its own `BEGIN IMMEDIATE` transaction,
//! recorded in `schema_migrations` with a checksum so an edited migration is noticed rather than silently skipped.

use cairn_store::schema::{self, Migrated};
use cairn_store::{StoreResult, Timestamp};
use sqlx::{SqliteConnection, SqlitePool};

use crate::rows::backend;

pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
    /// Rows rewritten in Rust after `sql`, in the same transaction.
    pub(crate) data: Option<DataStep>,
}

/// A data rewrite a migration runs in Rust, for what SQL cannot do reliably (Unicode case folding, canonical
/// JSON). Like the SQL, a released step is never edited.
#[derive(Clone, Copy, Debug)]
pub(crate) enum DataStep {
    /// Schema 6: extension resources' inventory keys gain their resource type.
    InventoryKeysByType,
}

impl DataStep {
    async fn run(self, conn: &mut SqliteConnection) -> StoreResult<()> {
        match self {
            Self::InventoryKeysByType => {
                crate::inventory::key_extension_resources_by_type(conn).await
            }
        }
    }
}

/// Every migration, oldest first. Never edit a released one: add the next.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "core",
        sql: include_str!("../migrations/0001_core.sql"),
        data: None,
    },
    Migration {
        version: 2,
        name: "inventory_keyvault",
        sql: include_str!("../migrations/0002_inventory_keyvault.sql"),
        data: None,
    },
    Migration {
        version: 3,
        name: "leases",
        sql: include_str!("../migrations/0003_leases.sql"),
        data: None,
    },
    Migration {
        version: 4,
        name: "stacks",
        sql: include_str!("../migrations/0004_stacks.sql"),
        data: None,
    },
    Migration {
        version: 5,
        name: "stack_what_ifs",
        sql: include_str!("../migrations/0005_stack_what_ifs.sql"),
        data: None,
    },
    Migration {
        version: 6,
        name: "inventory_keys_by_type",
        sql: include_str!("../migrations/0006_inventory_keys_by_type.sql"),
        data: Some(DataStep::InventoryKeysByType),
    },
    Migration {
        version: 7,
        name: "host_operations",
        sql: include_str!("../migrations/0007_host_operations.sql"),
        data: None,
    },
    Migration {
        version: 8,
        name: "deployment_takeovers",
        sql: include_str!("../migrations/0008_deployment_takeovers.sql"),
        data: None,
    },
    Migration {
        version: 9,
        name: "inventory_detached",
        sql: include_str!("../migrations/0009_inventory_detached.sql"),
        data: None,
    },
    Migration {
        version: 10,
        name: "applied_properties",
        sql: include_str!("../migrations/0010_applied_properties.sql"),
        data: None,
    },
    Migration {
        version: 11,
        name: "replicas",
        sql: include_str!("../migrations/0011_replicas.sql"),
        data: None,
    },
];

/// The schema version this build creates and understands.
pub const LATEST_SCHEMA_VERSION: u32 = 11;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at INTEGER NOT NULL
)";

/// Brings the database to `target` (at most [`LATEST_SCHEMA_VERSION`]) and says from which version to which.
pub(crate) async fn migrate(pool: &SqlitePool, target: u32) -> StoreResult<Migrated> {
    sqlx::query(CREATE_TABLE)
        .execute(pool)
        .await
        .map_err(backend)?;
    // Every command opens the store: a database already at `target` is told by one read, without taking the write
    // lock once per migration (a dozen round trips to the connection's thread).
    let applied = applied_migrations(pool).await?;
    let newest = applied.last().map(|(newest, _)| *newest);
    let from = schema::version_of(newest)?;
    schema::refuse_newer(newest, LATEST_SCHEMA_VERSION)?;
    if all_applied(&applied, target)? {
        return Ok(Migrated { from, to: from });
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version <= target) {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        let applied: Vec<(i64, String)> = sqlx::query_as(APPLIED)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend)?;
        schema::refuse_newer(
            applied.last().map(|(newest, _)| *newest),
            LATEST_SCHEMA_VERSION,
        )?;
        if schema::is_applied(&applied, migration.version, migration.name, migration.sql)? {
            continue;
        }
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        if let Some(step) = migration.data {
            step.run(&mut tx).await?;
        }
        sqlx::query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?1, ?2, ?3, ?4)")
            .bind(i64::from(migration.version))
            .bind(migration.name)
            .bind(schema::checksum(migration.sql))
            .bind(Timestamp::now().unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
    }
    Ok(Migrated {
        from,
        to: current_version(pool).await?,
    })
}

const APPLIED: &str = "SELECT version, checksum FROM schema_migrations ORDER BY version";

/// The applied migrations' versions and checksums, oldest first.
async fn applied_migrations(pool: &SqlitePool) -> StoreResult<Vec<(i64, String)>> {
    sqlx::query_as(APPLIED)
        .fetch_all(pool)
        .await
        .map_err(backend)
}

/// Whether every migration up to `target` is among `applied`; one applied with another checksum is
/// [`cairn_store::StoreError::Corrupt`].
fn all_applied(applied: &[(i64, String)], target: u32) -> StoreResult<bool> {
    for migration in MIGRATIONS.iter().filter(|m| m.version <= target) {
        if !schema::is_applied(applied, migration.version, migration.name, migration.sql)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The highest applied migration (0 for an empty database).
pub(crate) async fn current_version(pool: &SqlitePool) -> StoreResult<u32> {
    let version: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM schema_migrations")
        .fetch_one(pool)
        .await
        .map_err(backend)?;
    schema::version_of(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DATABASE_FILE_NAME, SqliteOptions, SqliteStore};
    use cairn_store::crypto::MasterKey;
    use cairn_store::{
        DeploymentId, DeploymentKey, DeploymentStatus, DeploymentStore, ExposeSecret,
        KeyVaultStore, LeaseStore, OperationJournal, SecretOwner, SecretStore, SecretString,
        StackWhatIfStore, Vault,
    };
    use cairn_store::{Entity, StoreError};
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    async fn raw_pool(dir: &std::path::Path) -> SqlitePool {
        let options = SqliteConnectOptions::new()
            .filename(dir.join(DATABASE_FILE_NAME))
            .create_if_missing(true)
            .foreign_keys(true);
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .expect("raw open")
    }

    /// A database left at schema v1 by an older cairn, with a deployment, its journal and a secret, opens at the
    /// latest version with its data intact and the new tables usable.
    #[tokio::test]
    async fn upgrades_a_v1_database_to_the_latest_schema() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        let pool = raw_pool(dir.path()).await;
        assert_eq!(migrate(&pool, 1).await?, Migrated { from: 0, to: 1 });
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .fetch_all(&pool)
                .await?;
        assert!(
            !tables.contains(&"leases".to_owned()) && !tables.contains(&"key_vaults".to_owned()),
            "{tables:?}"
        );
        pool.close().await;

        // Data written by a v1 build.
        let store_v1_id = {
            let store = SqliteStore::open_at_version(dir.path(), &key, 1).await?;
            let id = DeploymentId::generate();
            let owner = SecretOwner::Deployment(id.clone());
            let secret = store
                .put_secret(
                    &owner,
                    "parameters.p",
                    &SecretString::from("v1-secret".to_owned()),
                    cairn_store::Timestamp::from_unix_millis(1),
                )
                .await?;
            let mut new =
                cairn_store::conformance::new_deployment("/subscriptions/s", "old", Some(&secret));
            new.id = id.clone();
            store
                .put_deployment(new, cairn_store::Precondition::MustNotExist)
                .await?;
            store
                .append_operation(
                    cairn_store::conformance::step(&id, "op", "Running", 1),
                    None,
                )
                .await?;
            store.close_impl().await?;
            (id, secret)
        };

        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
        assert_eq!(store.schema_version().await?, LATEST_SCHEMA_VERSION);
        let old = store
            .get_deployment(&DeploymentKey::new("/subscriptions/s", "old"))
            .await?
            .expect("kept");
        assert_eq!(
            (old.id.clone(), old.status),
            (store_v1_id.0.clone(), DeploymentStatus::Accepted)
        );
        assert_eq!(store.latest_operations(&old.id).await?.len(), 1);
        assert_eq!(
            store.get_secret(&store_v1_id.1).await?.expose_secret(),
            "v1-secret"
        );
        let now = cairn_store::Timestamp::from_unix_millis(0);
        store
            .acquire_lease("l", "o", now, cairn_store::Timestamp::from_unix_millis(10))
            .await?;
        let vault = Vault {
            id: "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/v".into(),
            name: "v".into(),
            location: "westus".into(),
            tags: Default::default(),
            properties: serde_json::json!({}),
        };
        store
            .put_vault(vault, cairn_store::Precondition::Any, now)
            .await?;
        let what_if = cairn_store::NewStackWhatIf {
            scope: "/subscriptions/s".into(),
            name: "w".into(),
            result: serde_json::json!({}),
            request: SecretString::from("{}".to_owned()),
            expires_at: cairn_store::Timestamp::from_unix_millis(10),
        };
        assert!(!store.put_stack_what_if(what_if, now).await?);
        // v8: an upgraded deployment counts its recovery takeovers from zero.
        assert_eq!(store.record_takeover(&old.id, 0).await?, 1);
        // v11: an upgraded run has no cancel request, and takes one.
        assert!(!old.cancel_requested);
        assert!(
            store
                .request_deployment_cancel(&old.id)
                .await?
                .cancel_requested
        );
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM schema_migrations ORDER BY version")
                .fetch_all(&store.reader)
                .await?;
        let expected: Vec<i64> = MIGRATIONS.iter().map(|m| i64::from(m.version)).collect();
        assert_eq!(applied, expected);
        Ok(())
    }

    /// An extension resource as a build of the given key format recorded it.
    fn inventory_row(
        key: cairn_store::ResourceKey,
        extension: Option<(&str, &str)>,
        resource_type: &str,
        identifiers: serde_json::Value,
    ) -> cairn_store::ManagedResource {
        cairn_store::ManagedResource {
            key,
            resource_id: None,
            resource_type: resource_type.into(),
            api_version: Some("v1".into()),
            properties: serde_json::json!({"data": {"k": resource_type}}),
            applied: None,
            deployment: Some(DeploymentKey::new("/subscriptions/s", "d")),
            extension: extension.map(|(name, config_id)| cairn_store::ExtensionRef {
                alias: Some("ext".into()),
                name: Some(name.into()),
                version: Some("1.0.0".into()),
                config_id: Some(config_id.into()),
                reference_id: None,
                identifiers: Some(identifiers),
            }),
            updated_at: cairn_store::Timestamp::from_unix_millis(7),
        }
    }

    /// Inserts `row` as a schema 5 build did (this build's upsert also writes columns added since).
    async fn insert_as_schema_5(
        pool: &SqlitePool,
        row: &cairn_store::ManagedResource,
    ) -> anyhow::Result<cairn_store::ManagedResourceRecord> {
        let deployment = row.deployment.as_ref().map(DeploymentKey::folded);
        sqlx::query(
            "INSERT INTO managed_resources (key, resource_id, resource_id_key, resource_type, resource_type_key, \
             api_version, properties, deployment_scope, deployment_name, deployment_scope_key, \
             deployment_name_key, extension, created_at, updated_at, version, format_version) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, 1, 1)",
        )
        .bind(row.key.as_str())
        .bind(row.resource_id.as_deref())
        .bind(row.resource_id.as_deref().map(cairn_store::fold_case))
        .bind(&row.resource_type)
        .bind(row.resource_type.to_lowercase())
        .bind(row.api_version.as_deref())
        .bind(row.properties.to_string())
        .bind(row.deployment.as_ref().map(|d| d.scope.as_str()))
        .bind(row.deployment.as_ref().map(|d| d.name.as_str()))
        .bind(deployment.as_ref().map(|(scope, _)| scope.as_str()))
        .bind(deployment.as_ref().map(|(_, name)| name.as_str()))
        .bind(
            row.extension
                .as_ref()
                .map(|e| serde_json::to_string(e).expect("an extension reference")),
        )
        .bind(row.updated_at.unix_millis())
        .execute(pool)
        .await?;
        Ok(cairn_store::ManagedResourceRecord {
            resource: row.clone(),
            created_at: row.updated_at,
            version: 1,
            detached: false,
        })
    }

    /// A schema 9 inventory row reads back at schema 10 with no applied properties (nothing was recorded), and a
    /// new write records them.
    #[tokio::test]
    async fn upgrading_to_v10_keeps_inventory_rows_without_applied_properties() -> anyhow::Result<()>
    {
        use cairn_store::{InventoryStore, Precondition, ResourceKey};
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        let row = inventory_row(
            ResourceKey::extension(
                "Local",
                Some("c"),
                "File",
                &serde_json::json!({"path": "a"}),
            ),
            Some(("Local", "c")),
            "File",
            serde_json::json!({"path": "a"}),
        );
        {
            let store = SqliteStore::open_at_version(dir.path(), &key, 9).await?;
            insert_as_schema_5(&store.writer, &row).await?;
            store.close_impl().await?;
        }
        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
        let found = store.get_managed_resource(&row.key).await?.expect("kept");
        assert_eq!((found.resource.applied.clone(), found.version), (None, 1));
        let mut applied = row.clone();
        applied.applied = Some(serde_json::json!({"data": {"k": "File"}}));
        let written = store
            .put_managed_resource(applied.clone(), Precondition::Version(1))
            .await?;
        assert_eq!(written.resource, applied);
        assert_eq!(
            store
                .get_managed_resource(&row.key)
                .await?
                .map(|r| r.resource),
            Some(applied)
        );
        Ok(())
    }

    /// A schema 5 inventory keyed extension resources without their type: at schema 6 each row is re-keyed by
    /// type with its data, version and creation time intact (Unicode names and configIds folded as Rust folds
    /// them), rows of another form keep their keys, and a Secret named like a ConfigMap gets a row of its own.
    #[tokio::test]
    async fn upgrading_to_v6_keys_extension_resources_by_type() -> anyhow::Result<()> {
        use cairn_store::{InventoryStore, ManagedResourceFilter, Precondition, ResourceKey};
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        let settings = serde_json::json!({"metadata": {"namespace": "app", "name": "settings"}});
        let config_map = inventory_row(
            ResourceKey::from_stored(
                r#"ext:kubernetes:3a7f:{"metadata":{"name":"settings","namespace":"app"}}"#,
            ),
            Some(("Kubernetes", "3A7F")),
            "core/ConfigMap",
            settings.clone(),
        );
        let widget = inventory_row(
            ResourceKey::from_stored(r#"ext:wídgets:clüster-ä:{"name":"a"}"#),
            Some(("WÍDGETS", "CLÜSTER-Ä")),
            "Widget",
            serde_json::json!({"name": "a"}),
        );
        let odd = inventory_row(
            ResourceKey::from_stored("ext:not-a-v5-key"),
            None,
            "Widget",
            serde_json::json!({}),
        );
        let vault_id = "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/v";
        let mut vault = inventory_row(
            ResourceKey::arm(vault_id),
            None,
            "Microsoft.KeyVault/vaults",
            serde_json::json!({}),
        );
        vault.resource_id = Some(vault_id.into());
        let mut before = Vec::new();
        {
            let store = SqliteStore::open_at_version(dir.path(), &key, 5).await?;
            for row in [&config_map, &widget, &odd, &vault] {
                before.push(insert_as_schema_5(&store.writer, row).await?);
            }
            store.close_impl().await?;
        }

        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
        assert_eq!(store.schema_version().await?, LATEST_SCHEMA_VERSION);
        let expected_keys = [
            ResourceKey::extension("Kubernetes", Some("3A7F"), "core/ConfigMap", &settings),
            ResourceKey::extension(
                "Wídgets",
                Some("clüster-ä"),
                "widget",
                &serde_json::json!({"name": "a"}),
            ),
            odd.key.clone(),
            vault.key.clone(),
        ];
        for (old, new_key) in before.iter().zip(&expected_keys) {
            let found = store
                .get_managed_resource(new_key)
                .await?
                .unwrap_or_else(|| panic!("{new_key} after the upgrade"));
            let mut expected = old.clone();
            expected.resource.key = new_key.clone();
            assert_eq!(found, expected);
        }
        assert!(store.get_managed_resource(&config_map.key).await?.is_none());
        assert_eq!(
            expected_keys[0].as_str(),
            r#"ext:kubernetes:3a7f:core/configmap:{"metadata":{"name":"settings","namespace":"app"}}"#
        );

        let secret = inventory_row(
            ResourceKey::extension("Kubernetes", Some("3A7F"), "core/Secret", &settings),
            Some(("Kubernetes", "3A7F")),
            "core/Secret",
            settings.clone(),
        );
        store
            .put_managed_resource(secret, Precondition::MustNotExist)
            .await?;
        let listed = store
            .list_managed_resources(ManagedResourceFilter::default())
            .await?;
        assert_eq!(listed.items.len(), 5);
        Ok(())
    }

    #[tokio::test]
    async fn migrate_says_from_which_version_to_which_and_creates_no_directory()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing");
        let error = SqliteStore::migrate(&missing)
            .await
            .expect_err("no directory");
        assert!(error.is_not_found(), "{error:?}");
        assert!(!missing.exists());
        let pool = raw_pool(dir.path()).await;
        migrate(&pool, 5).await?;
        pool.close().await;
        assert_eq!(
            SqliteStore::migrate(dir.path()).await?,
            Migrated {
                from: 5,
                to: LATEST_SCHEMA_VERSION
            }
        );
        assert_eq!(
            SqliteStore::migrate(dir.path()).await?,
            Migrated {
                from: LATEST_SCHEMA_VERSION,
                to: LATEST_SCHEMA_VERSION
            }
        );
        Ok(())
    }

    /// A connection that gives up at once when the database is locked.
    async fn impatient_pool(dir: &std::path::Path) -> sqlx::Result<SqlitePool> {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(dir.join(DATABASE_FILE_NAME))
                    .busy_timeout(std::time::Duration::ZERO),
            )
            .await
    }

    /// Opening a database already at the latest schema only reads: it neither waits for nor takes the write lock,
    /// which a running server's commits hold.
    #[tokio::test]
    async fn a_current_database_is_migrated_without_the_write_lock() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let pool = raw_pool(dir.path()).await;
        migrate(&pool, LATEST_SCHEMA_VERSION).await?;
        let mut writer = pool.acquire().await?;
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *writer).await?;
        let impatient = impatient_pool(dir.path()).await?;
        assert_eq!(
            migrate(&impatient, LATEST_SCHEMA_VERSION).await?,
            Migrated {
                from: LATEST_SCHEMA_VERSION,
                to: LATEST_SCHEMA_VERSION
            }
        );
        // A database that is behind does take it, and says so while another writer holds it.
        let behind = tempfile::tempdir()?;
        let old = raw_pool(behind.path()).await;
        migrate(&old, 5).await?;
        let mut old_writer = old.acquire().await?;
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *old_writer)
            .await?;
        let impatient_behind = impatient_pool(behind.path()).await?;
        assert!(
            migrate(&impatient_behind, LATEST_SCHEMA_VERSION)
                .await
                .is_err()
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_database_from_a_newer_cairn_is_refused() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await?
            .close_impl()
            .await?;
        let pool = raw_pool(dir.path()).await;
        sqlx::query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (99, 'future', 'x', 0)")
            .execute(&pool)
            .await?;
        pool.close().await;
        let error = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect_err("newer schema");
        assert!(
            matches!(
                error,
                StoreError::Corrupt {
                    entity: Entity::Schema,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("newer than this build"),
            "{error}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn an_edited_migration_is_noticed() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await?
            .close_impl()
            .await?;
        let pool = raw_pool(dir.path()).await;
        sqlx::query("UPDATE schema_migrations SET checksum = '0000000000000000' WHERE version = 2")
            .execute(&pool)
            .await?;
        pool.close().await;
        let error = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect_err("edited");
        assert!(error.to_string().contains("migration 2"), "{error}");
        Ok(())
    }

    #[tokio::test]
    async fn rows_in_a_newer_format_are_refused_not_misread() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
        let new = cairn_store::conformance::new_deployment("/subscriptions/s", "d", None);
        let id = new.id.clone();
        store
            .put_deployment(new, cairn_store::Precondition::MustNotExist)
            .await?;
        sqlx::query("UPDATE deployment_requests SET format_version = 2")
            .execute(&store.writer)
            .await?;
        let error = store
            .get_deployment_by_id(&id)
            .await
            .expect_err("newer format");
        assert!(
            matches!(
                error,
                StoreError::Corrupt {
                    entity: Entity::Deployment,
                    ..
                }
            ),
            "{error:?}"
        );
        sqlx::query("UPDATE deployment_requests SET format_version = 1")
            .execute(&store.writer)
            .await?;
        sqlx::query("UPDATE deployments SET status = 'Sleeping'")
            .execute(&store.writer)
            .await?;
        let error = store
            .get_deployment_by_id(&id)
            .await
            .expect_err("unknown status");
        assert!(error.to_string().contains("Sleeping"), "{error}");
        Ok(())
    }

    /// Readiness names a schema that is not this build's, older (migrations not applied) or newer (a newer cairn
    /// migrated the file underneath this process), and is `Ok` once the schema is current.
    #[tokio::test]
    async fn readiness_names_a_schema_that_is_not_this_builds() -> anyhow::Result<()> {
        use cairn_store::Store;
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        let old = SqliteStore::open_at_version(dir.path(), &key, 3).await?;
        let error = old.readiness().await.expect_err("schema 3 is not current");
        assert!(matches!(error, StoreError::NotReady(_)), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains("schema version 3") && message.contains("older"),
            "{message}"
        );
        old.close_impl().await?;

        let store = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
        store.readiness().await?;
        let newer = LATEST_SCHEMA_VERSION + 1;
        sqlx::query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?1, 'future', 'x', 0)")
            .bind(i64::from(newer))
            .execute(&store.writer)
            .await?;
        let error = store.readiness().await.expect_err("a newer schema");
        let message = error.to_string();
        assert!(
            message.contains(&format!("schema version {newer}"))
                && message.contains("upgrade cairn"),
            "{message}"
        );
        assert_eq!(error.arm_code(), "StoreNotReady");
        Ok(())
    }

    #[test]
    fn migrations_are_numbered_in_order_up_to_latest() {
        let versions: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=LATEST_SCHEMA_VERSION).collect::<Vec<_>>());
    }
}

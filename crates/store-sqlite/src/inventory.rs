//! The managed-resource inventory: keyed upserts under preconditions, filtered listing, deletion.

use cairn_store::Timestamp;
use cairn_store::codec::{
    self, check_precondition, current_format, extension_text, fetch_limit, json_text,
    optional_json_text, paginate,
};
use cairn_store::{
    DeploymentKey, Entity, ExtensionRef, InventoryChange, ManagedResource, ManagedResourceFilter,
    ManagedResourceRecord, Page, Precondition, ResourceKey, StoreError, StoreResult, fold_case,
};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::group_commit::{Grouped, GroupedWrite, Pace};
use crate::rows::{backend, decode, direct_backend};

const E: Entity = Entity::ManagedResource;

macro_rules! select_resources {
    ($tail:literal) => {
        concat!(
            "SELECT key, resource_id, resource_type, api_version, properties, applied, deployment_scope, deployment_name, ",
            "extension, created_at, updated_at, version, detached, format_version FROM managed_resources ",
            $tail
        )
    };
}

fn record_from_row(row: &SqliteRow) -> StoreResult<ManagedResourceRecord> {
    decode(row, E, codec::managed_resource)
}

/// `INSERT` of every column of a resource (parameters from [`resource_values`]), then `$tail`.
macro_rules! insert_resource {
    ($tail:expr) => {
        concat!(
            "INSERT INTO managed_resources (key, resource_id, resource_id_key, resource_type, resource_type_key, ",
            "api_version, properties, deployment_scope, deployment_name, deployment_scope_key, deployment_name_key, ",
            "extension, created_at, updated_at, version, format_version, applied) ",
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, 1, ?14, ?15) ",
            $tail
        )
    };
}

/// `ON CONFLICT` clause overwriting every column of an inventoried resource (its version counts up), then `$tail`.
macro_rules! overwrite_resource {
    ($tail:literal) => {
        concat!(
            "ON CONFLICT (key) DO UPDATE SET resource_id = excluded.resource_id, ",
            "resource_id_key = excluded.resource_id_key, resource_type = excluded.resource_type, ",
            "resource_type_key = excluded.resource_type_key, api_version = excluded.api_version, ",
            "properties = excluded.properties, deployment_scope = excluded.deployment_scope, ",
            "deployment_name = excluded.deployment_name, deployment_scope_key = excluded.deployment_scope_key, ",
            "deployment_name_key = excluded.deployment_name_key, extension = excluded.extension, ",
            "updated_at = excluded.updated_at, version = managed_resources.version + 1, ",
            "format_version = excluded.format_version, applied = excluded.applied",
            $tail
        )
    };
}

/// Inserts or overwrites a resource; returns its new version and creation time.
const UPSERT_RESOURCE: &str =
    insert_resource!(overwrite_resource!(" RETURNING version, created_at"));

/// A journal step's inventory write: inserts or overwrites a resource, which a deployment writing it again manages
/// (no longer detached). Nothing is returned: SQLite buffers a `RETURNING` row in a temporary table of its own, which
/// cost more than the write.
const PUT_RESOURCE: &str = insert_resource!(overwrite_resource!(", detached = 0"));

/// Inserts a resource unless its key is inventoried already (then the row is left alone).
const INSERT_RESOURCE_IF_ABSENT: &str = insert_resource!("ON CONFLICT (key) DO NOTHING");

const DETACH_RESOURCE: &str = "UPDATE managed_resources SET detached = 1 WHERE key = ?1";
const DELETE_RESOURCE: &str = "DELETE FROM managed_resources WHERE key = ?1";
const RESOURCE_VERSION: &str = "SELECT version FROM managed_resources WHERE key = ?1";

/// The parameters of `insert_resource!`.
fn resource_values(resource: &ManagedResource) -> StoreResult<[Value; 15]> {
    let text = |value: Option<String>| value.map_or(Value::Null, Value::Text);
    let extension = extension_text(E, resource.extension.as_ref())?;
    let (scope_key, name_key) = resource
        .deployment
        .as_ref()
        .map(DeploymentKey::folded)
        .unzip();
    Ok([
        Value::Text(resource.key.as_str().to_owned()),
        text(resource.resource_id.clone()),
        text(resource.resource_id.as_deref().map(fold_case)),
        Value::Text(resource.resource_type.clone()),
        Value::Text(resource.resource_type.to_lowercase()),
        text(resource.api_version.clone()),
        Value::Text(json_text(&resource.properties)),
        text(resource.deployment.as_ref().map(|d| d.scope.clone())),
        text(resource.deployment.as_ref().map(|d| d.name.clone())),
        text(scope_key),
        text(name_key),
        text(extension),
        Value::Integer(resource.updated_at.unix_millis()),
        Value::Integer(current_format(E)),
        text(optional_json_text(resource.applied.as_ref())),
    ])
}

fn version_and_creation(version: i64, created_at: i64) -> StoreResult<(u64, Timestamp)> {
    let version = u64::try_from(version).map_err(|_| StoreError::corrupt(E, "negative version"))?;
    Ok((version, Timestamp::from_unix_millis(created_at)))
}

/// Inserts or overwrites a resource on the group commit writer's connection; returns its new version and creation
/// time.
pub(crate) fn upsert_resource(
    conn: &Connection,
    resource: &ManagedResource,
) -> StoreResult<(u64, Timestamp)> {
    let values = resource_values(resource)?;
    let (version, created_at) = conn
        .prepare_cached(UPSERT_RESOURCE)
        .and_then(|mut upsert| {
            upsert.query_row(params_from_iter(values), |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
        })
        .map_err(direct_backend)?;
    version_and_creation(version, created_at)
}

/// The version of the resource under `key`, if inventoried, on the group commit writer's connection.
pub(crate) fn resource_version(conn: &Connection, key: &ResourceKey) -> StoreResult<Option<i64>> {
    conn.prepare_cached(RESOURCE_VERSION)
        .and_then(|mut version| {
            version
                .query_row([key.as_str()], |row| row.get(0))
                .optional()
        })
        .map_err(direct_backend)
}

/// Applies one inventory change inside a transaction on the group commit's connection (a journal step's, a stack's
/// save).
pub(crate) fn apply_change_directly(
    conn: &Connection,
    change: &InventoryChange,
) -> StoreResult<()> {
    let execute = |sql: &str, values: &[Value]| {
        conn.prepare_cached(sql)
            .and_then(|mut statement| statement.execute(params_from_iter(values)))
            .map(drop)
            .map_err(direct_backend)
    };
    let key = |key: &ResourceKey| [Value::Text(key.as_str().to_owned())];
    match change {
        InventoryChange::Put(resource) => execute(PUT_RESOURCE, &resource_values(resource)?),
        InventoryChange::PutIfAbsent(resource) => {
            execute(INSERT_RESOURCE_IF_ABSENT, &resource_values(resource)?)
        }
        InventoryChange::Delete(resource) => execute(DELETE_RESOURCE, &key(resource)),
        InventoryChange::Detach(resource) => execute(DETACH_RESOURCE, &key(resource)),
    }
}

/// Schema 6 (a migration data step): extension resources' keys gain their resource type, from
/// `ext:{name}:{configId}:{identifiers}` to [`ResourceKey::extension`]'s form, so two types with equal identifiers
/// stop sharing a row. The identifiers are read back from the old key, which was built from the row's own extension
/// name and configId; a row whose key does not have that form keeps it (nothing is guessed, nothing is dropped).
pub(crate) async fn key_extension_resources_by_type(
    conn: &mut SqliteConnection,
) -> StoreResult<()> {
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT key, resource_type, extension FROM managed_resources WHERE key LIKE 'ext:%'",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(backend)?;
    for (old, resource_type, extension) in rows {
        let Some(new) = key_with_type(&old, &resource_type, extension.as_deref()) else {
            continue;
        };
        sqlx::query("UPDATE managed_resources SET key = ?1 WHERE key = ?2")
            .bind(new.as_str())
            .bind(&old)
            .execute(&mut *conn)
            .await
            .map_err(backend)?;
    }
    Ok(())
}

/// The schema 6 key of a row keyed `old` in the schema 5 form, if it is in that form.
fn key_with_type(old: &str, resource_type: &str, extension: Option<&str>) -> Option<ResourceKey> {
    let extension: ExtensionRef = serde_json::from_str(extension?).ok()?;
    let name = extension.name.as_deref()?;
    let config_id = extension.config_id.as_deref();
    let prefix = format!(
        "ext:{}:{}:",
        name.to_lowercase(),
        config_id.map(str::to_lowercase).unwrap_or_default()
    );
    let identifiers: serde_json::Value = serde_json::from_str(old.strip_prefix(&prefix)?).ok()?;
    Some(ResourceKey::extension(
        name,
        config_id,
        resource_type,
        &identifiers,
    ))
}

impl SqliteStore {
    pub(crate) async fn put_managed_resource_impl(
        &self,
        resource: ManagedResource,
        precondition: Precondition,
    ) -> StoreResult<ManagedResourceRecord> {
        match self
            .group
            .write(
                &self.writer,
                GroupedWrite::PutResource(resource, precondition),
                Pace::Lead,
            )
            .await?
        {
            Grouped::Resource(record) => Ok(*record),
            Grouped::Step(_) => Err(StoreError::corrupt(
                E,
                "an inventory write answered with a journal step",
            )),
        }
    }

    pub(crate) async fn get_managed_resource_impl(
        &self,
        key: &ResourceKey,
    ) -> StoreResult<Option<ManagedResourceRecord>> {
        sqlx::query(select_resources!("WHERE key = ?1"))
            .bind(key.as_str())
            .fetch_optional(&self.reader)
            .await
            .map_err(backend)?
            .as_ref()
            .map(record_from_row)
            .transpose()
    }

    pub(crate) async fn list_managed_resources_impl(
        &self,
        filter: ManagedResourceFilter,
    ) -> StoreResult<Page<ManagedResourceRecord>> {
        let page_size = filter.page.page_size();
        let deployment = filter.deployment.as_ref().map(DeploymentKey::folded);
        let rows = sqlx::query(select_resources!(
            "WHERE (?1 IS NULL OR (deployment_scope_key = ?1 AND deployment_name_key = ?2)) \
             AND (?3 IS NULL OR resource_type_key = ?3) \
             AND (?4 IS NULL OR resource_id_key = ?4 OR substr(resource_id_key, 1, length(?4) + 1) = ?4 || '/') \
             AND key > ?5 ORDER BY key LIMIT ?6"
        ))
        .bind(deployment.as_ref().map(|(scope, _)| scope.as_str()))
        .bind(deployment.as_ref().map(|(_, name)| name.as_str()))
        .bind(filter.resource_type.as_deref().map(str::to_lowercase))
        .bind(filter.scope.as_deref().map(fold_case))
        .bind(filter.page.continuation.as_deref().unwrap_or(""))
        .bind(fetch_limit(page_size))
        .fetch_all(&self.reader)
        .await
        .map_err(backend)?;
        let mut items = rows
            .iter()
            .map(record_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let continuation = paginate(&mut items, page_size, |r| {
            r.resource.key.as_str().to_owned()
        });
        Ok(Page {
            items,
            continuation,
        })
    }

    pub(crate) async fn delete_managed_resource_impl(
        &self,
        key: &ResourceKey,
        precondition: Precondition,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let found: Option<i64> = sqlx::query_scalar(RESOURCE_VERSION)
            .bind(key.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?;
        if found.is_none() {
            return Err(StoreError::not_found(E, key.as_str()));
        }
        check_precondition(E, key.as_str(), precondition, found)?;
        sqlx::query(DELETE_RESOURCE)
            .bind(key.as_str())
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }
}

//! The managed-resource inventory: keyed upserts under preconditions, filtered listing, deletion. Every write of a
//! key takes its lock first, so a precondition checked by one writer still holds when it writes.

use cairn_store::codec::{
    self, check_precondition, current_format, extension_text, fetch_limit, json_text, paginate,
};
use cairn_store::{
    DeploymentKey, Entity, ManagedResource, ManagedResourceFilter, ManagedResourceRecord, Page,
    Precondition, ResourceKey, StoreError, StoreResult, Timestamp, fold_case,
};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use crate::PostgresStore;
use crate::rows::{LockSpace, backend, decode, lock_key};

const E: Entity = Entity::ManagedResource;

macro_rules! select_resources {
    ($tail:literal) => {
        concat!(
            "SELECT key, resource_id, resource_type, api_version, properties, deployment_scope, deployment_name, ",
            "extension, created_at, updated_at, version, format_version FROM managed_resources ",
            $tail
        )
    };
}

fn record_from_row(row: &PgRow) -> StoreResult<ManagedResourceRecord> {
    decode(row, E, codec::managed_resource)
}

/// The version of the resource at `key`, after taking the key's lock.
async fn locked_version(conn: &mut PgConnection, key: &ResourceKey) -> StoreResult<Option<i64>> {
    lock_key(conn, LockSpace::ManagedResource, key.as_str()).await?;
    sqlx::query_scalar("SELECT version FROM managed_resources WHERE key = $1")
        .bind(key.as_str())
        .fetch_optional(conn)
        .await
        .map_err(backend)
}

/// Inserts or overwrites a resource and returns its new version and creation time.
pub(crate) async fn upsert_resource(
    conn: &mut PgConnection,
    resource: &ManagedResource,
) -> StoreResult<(u64, Timestamp)> {
    lock_key(conn, LockSpace::ManagedResource, resource.key.as_str()).await?;
    let deployment_keys = resource.deployment.as_ref().map(DeploymentKey::folded);
    let (version, created_at): (i64, i64) = sqlx::query_as(
        "INSERT INTO managed_resources (key, resource_id, resource_id_key, resource_type, resource_type_key, \
         api_version, properties, deployment_scope, deployment_name, deployment_scope_key, deployment_name_key, \
         extension, created_at, updated_at, version, format_version) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, 1, $14) \
         ON CONFLICT (key) DO UPDATE SET resource_id = excluded.resource_id, \
         resource_id_key = excluded.resource_id_key, resource_type = excluded.resource_type, \
         resource_type_key = excluded.resource_type_key, api_version = excluded.api_version, \
         properties = excluded.properties, deployment_scope = excluded.deployment_scope, \
         deployment_name = excluded.deployment_name, deployment_scope_key = excluded.deployment_scope_key, \
         deployment_name_key = excluded.deployment_name_key, extension = excluded.extension, \
         updated_at = excluded.updated_at, version = managed_resources.version + 1, \
         format_version = excluded.format_version \
         RETURNING version, created_at",
    )
    .bind(resource.key.as_str())
    .bind(resource.resource_id.as_deref())
    .bind(resource.resource_id.as_deref().map(fold_case))
    .bind(&resource.resource_type)
    .bind(resource.resource_type.to_lowercase())
    .bind(resource.api_version.as_deref())
    .bind(json_text(&resource.properties))
    .bind(resource.deployment.as_ref().map(|d| d.scope.as_str()))
    .bind(resource.deployment.as_ref().map(|d| d.name.as_str()))
    .bind(deployment_keys.as_ref().map(|(scope, _)| scope.as_str()))
    .bind(deployment_keys.as_ref().map(|(_, name)| name.as_str()))
    .bind(extension_text(E, resource.extension.as_ref())?)
    .bind(resource.updated_at.unix_millis())
    .bind(current_format(E))
    .fetch_one(conn)
    .await
    .map_err(backend)?;
    let version = u64::try_from(version).map_err(|_| StoreError::corrupt(E, "negative version"))?;
    Ok((version, Timestamp::from_unix_millis(created_at)))
}

/// Removes the resource at `key` if it is there.
pub(crate) async fn delete_resource_row(
    conn: &mut PgConnection,
    key: &ResourceKey,
) -> StoreResult<()> {
    lock_key(conn, LockSpace::ManagedResource, key.as_str()).await?;
    sqlx::query("DELETE FROM managed_resources WHERE key = $1")
        .bind(key.as_str())
        .execute(conn)
        .await
        .map(drop)
        .map_err(backend)
}

impl PostgresStore {
    pub(crate) async fn put_managed_resource_impl(
        &self,
        resource: ManagedResource,
        precondition: Precondition,
    ) -> StoreResult<ManagedResourceRecord> {
        let mut tx = self.begin().await?;
        let found = locked_version(&mut tx, &resource.key).await?;
        check_precondition(E, resource.key.as_str(), precondition, found)?;
        let (version, created_at) = upsert_resource(&mut tx, &resource).await?;
        tx.commit().await.map_err(backend)?;
        Ok(ManagedResourceRecord {
            resource,
            created_at,
            version,
        })
    }

    pub(crate) async fn get_managed_resource_impl(
        &self,
        key: &ResourceKey,
    ) -> StoreResult<Option<ManagedResourceRecord>> {
        sqlx::query(select_resources!("WHERE key = $1"))
            .bind(key.as_str())
            .fetch_optional(&self.pool)
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
            "WHERE ($1::text IS NULL OR (deployment_scope_key = $1 AND deployment_name_key = $2)) \
             AND ($3::text IS NULL OR resource_type_key = $3) \
             AND ($4::text IS NULL OR resource_id_key = $4 OR starts_with(resource_id_key, $4 || '/')) \
             AND key > $5 ORDER BY key LIMIT $6"
        ))
        .bind(deployment.as_ref().map(|(scope, _)| scope.as_str()))
        .bind(deployment.as_ref().map(|(_, name)| name.as_str()))
        .bind(filter.resource_type.as_deref().map(str::to_lowercase))
        .bind(filter.scope.as_deref().map(fold_case))
        .bind(filter.page.continuation.as_deref().unwrap_or(""))
        .bind(fetch_limit(page_size))
        .fetch_all(&self.pool)
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
        let mut tx = self.begin().await?;
        let found = locked_version(&mut tx, key).await?;
        if found.is_none() {
            return Err(StoreError::not_found(E, key.as_str()));
        }
        check_precondition(E, key.as_str(), precondition, found)?;
        delete_resource_row(&mut tx, key).await?;
        tx.commit().await.map_err(backend)
    }
}

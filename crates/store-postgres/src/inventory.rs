//! The managed-resource inventory: keyed upserts under preconditions, filtered listing, deletion. Every write of a
//! key takes its lock first, so a precondition checked by one writer still holds when it writes.

use cairn_store::codec::{
    self, check_precondition, current_format, extension_text, fetch_limit, json_text,
    optional_json_text, paginate,
};
use cairn_store::{
    DeploymentKey, Entity, InventoryChange, ManagedResource, ManagedResourceFilter,
    ManagedResourceRecord, Page, Precondition, ResourceKey, StoreError, StoreResult, Timestamp,
    fold_case,
};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use crate::PostgresStore;
use crate::rows::{LockSpace, backend, decode, lock_key};

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

/// `INSERT` of every column of a resource (bound by [`bind_resource`]), then `$tail`.
macro_rules! insert_resource {
    ($tail:literal) => {
        concat!(
            "INSERT INTO managed_resources (key, resource_id, resource_id_key, resource_type, resource_type_key, ",
            "api_version, properties, deployment_scope, deployment_name, deployment_scope_key, deployment_name_key, ",
            "extension, created_at, updated_at, version, format_version, applied) ",
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, 1, $14, $15) ",
            $tail
        )
    };
}

type ResourceQuery<'q> =
    sqlx::query::QueryAs<'q, sqlx::Postgres, (i64, i64, bool), sqlx::postgres::PgArguments>;

/// Binds a resource to the parameters of `insert_resource!`.
fn bind_resource<'q>(
    query: ResourceQuery<'q>,
    resource: &'q ManagedResource,
) -> StoreResult<ResourceQuery<'q>> {
    let extension = extension_text(E, resource.extension.as_ref())?;
    let deployment_keys = resource.deployment.as_ref().map(DeploymentKey::folded);
    Ok(query
        .bind(resource.key.as_str())
        .bind(resource.resource_id.as_deref())
        .bind(resource.resource_id.as_deref().map(fold_case))
        .bind(&resource.resource_type)
        .bind(resource.resource_type.to_lowercase())
        .bind(resource.api_version.as_deref())
        .bind(json_text(&resource.properties))
        .bind(resource.deployment.as_ref().map(|d| d.scope.as_str()))
        .bind(resource.deployment.as_ref().map(|d| d.name.as_str()))
        .bind(deployment_keys.as_ref().map(|(scope, _)| scope.clone()))
        .bind(deployment_keys.map(|(_, name)| name))
        .bind(extension)
        .bind(resource.updated_at.unix_millis())
        .bind(current_format(E))
        .bind(optional_json_text(resource.applied.as_ref())))
}

/// What an upsert left in the row: its version, creation time and detached mark.
pub(crate) struct Upserted {
    pub(crate) version: u64,
    pub(crate) created_at: Timestamp,
    pub(crate) detached: bool,
}

/// Inserts or overwrites a resource (keeping its detached mark unless `clear_detached`).
pub(crate) async fn upsert_resource(
    conn: &mut PgConnection,
    resource: &ManagedResource,
    clear_detached: bool,
) -> StoreResult<Upserted> {
    lock_key(conn, LockSpace::ManagedResource, resource.key.as_str()).await?;
    let query = sqlx::query_as(insert_resource!(
        "ON CONFLICT (key) DO UPDATE SET resource_id = excluded.resource_id, \
         resource_id_key = excluded.resource_id_key, resource_type = excluded.resource_type, \
         resource_type_key = excluded.resource_type_key, api_version = excluded.api_version, \
         properties = excluded.properties, deployment_scope = excluded.deployment_scope, \
         deployment_name = excluded.deployment_name, deployment_scope_key = excluded.deployment_scope_key, \
         deployment_name_key = excluded.deployment_name_key, extension = excluded.extension, \
         updated_at = excluded.updated_at, version = managed_resources.version + 1, \
         format_version = excluded.format_version, applied = excluded.applied, \
         detached = managed_resources.detached AND NOT $16 \
         RETURNING version, created_at, detached"
    ));
    let (version, created_at, detached) = bind_resource(query, resource)?
        .bind(clear_detached)
        .fetch_one(conn)
        .await
        .map_err(backend)?;
    let version = u64::try_from(version).map_err(|_| StoreError::corrupt(E, "negative version"))?;
    Ok(Upserted {
        version,
        created_at: Timestamp::from_unix_millis(created_at),
        detached,
    })
}

/// Applies `changes` in order inside the caller's transaction, having first locked their keys in key order, so two
/// writers touching overlapping resources in different orders wait for each other instead of deadlocking.
pub(crate) async fn apply_changes(
    conn: &mut PgConnection,
    changes: &[InventoryChange],
) -> StoreResult<()> {
    let mut keys: Vec<&str> = changes.iter().map(|c| change_key(c).as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        lock_key(conn, LockSpace::ManagedResource, key).await?;
    }
    for change in changes {
        apply_change(conn, change).await?;
    }
    Ok(())
}

fn change_key(change: &InventoryChange) -> &ResourceKey {
    match change {
        InventoryChange::Put(resource) | InventoryChange::PutIfAbsent(resource) => &resource.key,
        InventoryChange::Delete(key) | InventoryChange::Detach(key) => key,
    }
}

/// Applies one inventory change inside the caller's transaction, under the key's lock.
pub(crate) async fn apply_change(
    conn: &mut PgConnection,
    change: &InventoryChange,
) -> StoreResult<()> {
    match change {
        // A deployment wrote the resource again: it is managed, no longer detached.
        InventoryChange::Put(resource) => upsert_resource(conn, resource, true).await.map(drop),
        InventoryChange::PutIfAbsent(resource) => {
            lock_key(conn, LockSpace::ManagedResource, resource.key.as_str()).await?;
            bind_resource(
                sqlx::query_as(insert_resource!(
                    "ON CONFLICT (key) DO NOTHING RETURNING version, created_at, detached"
                )),
                resource,
            )?
            .fetch_optional(conn)
            .await
            .map(drop)
            .map_err(backend)
        }
        InventoryChange::Delete(key) => {
            lock_key(conn, LockSpace::ManagedResource, key.as_str()).await?;
            sqlx::query("DELETE FROM managed_resources WHERE key = $1")
                .bind(key.as_str())
                .execute(conn)
                .await
                .map(drop)
                .map_err(backend)
        }
        InventoryChange::Detach(key) => {
            lock_key(conn, LockSpace::ManagedResource, key.as_str()).await?;
            sqlx::query("UPDATE managed_resources SET detached = TRUE WHERE key = $1")
                .bind(key.as_str())
                .execute(conn)
                .await
                .map(drop)
                .map_err(backend)
        }
    }
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
        let upserted = upsert_resource(&mut tx, &resource, false).await?;
        tx.commit().await.map_err(backend)?;
        Ok(ManagedResourceRecord {
            resource,
            created_at: upserted.created_at,
            version: upserted.version,
            detached: upserted.detached,
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
        apply_change(&mut tx, &InventoryChange::Delete(key.clone())).await?;
        tx.commit().await.map_err(backend)
    }
}

//! Resource groups, keyed by folded subscription ID and name.

use cairn_store::codec::{
    self, check_precondition, current_format, fetch_limit, paginate, tags_text,
};
use cairn_store::{
    Entity, Page, PageRequest, Precondition, ResourceGroup, ResourceGroupRecord, StoreError,
    StoreResult, Timestamp, fold_case,
};
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::rows::{backend, decode};

const E: Entity = Entity::ResourceGroup;

macro_rules! select_groups {
    ($tail:literal) => {
        concat!(
            "SELECT subscription_id, name, location, tags, managed_by, provisioning_state, created_at, updated_at, ",
            "version, format_version FROM resource_groups ",
            $tail
        )
    };
}

fn record_from_row(row: &SqliteRow) -> StoreResult<ResourceGroupRecord> {
    decode(row, E, codec::resource_group)
}

impl SqliteStore {
    pub(crate) async fn put_resource_group_impl(
        &self,
        group: ResourceGroup,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreResult<ResourceGroupRecord> {
        let subscription_key = fold_case(&group.subscription_id);
        let name_key = group.name.to_lowercase();
        let mut tx = self.begin_write().await?;
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT version FROM resource_groups WHERE subscription_key = ?1 AND name_key = ?2",
        )
        .bind(&subscription_key)
        .bind(&name_key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        check_precondition(E, &group.resource_id(), precondition, found)?;
        sqlx::query(
            "INSERT INTO resource_groups (subscription_key, name_key, subscription_id, name, location, tags, \
             managed_by, provisioning_state, created_at, updated_at, version, format_version) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, 1, ?10) \
             ON CONFLICT (subscription_key, name_key) DO UPDATE SET subscription_id = excluded.subscription_id, \
             name = excluded.name, location = excluded.location, tags = excluded.tags, \
             managed_by = excluded.managed_by, provisioning_state = excluded.provisioning_state, \
             updated_at = excluded.updated_at, version = resource_groups.version + 1, \
             format_version = excluded.format_version",
        )
        .bind(&subscription_key)
        .bind(&name_key)
        .bind(&group.subscription_id)
        .bind(&group.name)
        .bind(&group.location)
        .bind(tags_text(&group.tags))
        .bind(group.managed_by.as_deref())
        .bind(&group.provisioning_state)
        .bind(now.unix_millis())
        .bind(current_format(E))
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        let row = sqlx::query(select_groups!(
            "WHERE subscription_key = ?1 AND name_key = ?2"
        ))
        .bind(&subscription_key)
        .bind(&name_key)
        .fetch_one(&mut *tx)
        .await
        .map_err(backend)?;
        let record = record_from_row(&row)?;
        tx.commit().await.map_err(backend)?;
        Ok(record)
    }

    pub(crate) async fn get_resource_group_impl(
        &self,
        subscription_id: &str,
        name: &str,
    ) -> StoreResult<Option<ResourceGroupRecord>> {
        sqlx::query(select_groups!(
            "WHERE subscription_key = ?1 AND name_key = ?2"
        ))
        .bind(fold_case(subscription_id))
        .bind(name.to_lowercase())
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)?
        .as_ref()
        .map(record_from_row)
        .transpose()
    }

    pub(crate) async fn list_resource_groups_impl(
        &self,
        subscription_id: &str,
        page: PageRequest,
    ) -> StoreResult<Page<ResourceGroupRecord>> {
        let page_size = page.page_size();
        let rows = sqlx::query(select_groups!(
            "WHERE subscription_key = ?1 AND name_key > ?2 ORDER BY name_key LIMIT ?3"
        ))
        .bind(fold_case(subscription_id))
        .bind(page.continuation.as_deref().unwrap_or(""))
        .bind(fetch_limit(page_size))
        .fetch_all(&self.reader)
        .await
        .map_err(backend)?;
        let mut items = rows
            .iter()
            .map(record_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let continuation = paginate(&mut items, page_size, |g| g.group.name.to_lowercase());
        Ok(Page {
            items,
            continuation,
        })
    }

    pub(crate) async fn delete_resource_group_impl(
        &self,
        subscription_id: &str,
        name: &str,
        precondition: Precondition,
    ) -> StoreResult<()> {
        let subscription_key = fold_case(subscription_id);
        let name_key = name.to_lowercase();
        let key = format!("/subscriptions/{subscription_id}/resourceGroups/{name}");
        let mut tx = self.begin_write().await?;
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT version FROM resource_groups WHERE subscription_key = ?1 AND name_key = ?2",
        )
        .bind(&subscription_key)
        .bind(&name_key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        if found.is_none() {
            return Err(StoreError::not_found(E, key));
        }
        check_precondition(E, &key, precondition, found)?;
        sqlx::query("DELETE FROM resource_groups WHERE subscription_key = ?1 AND name_key = ?2")
            .bind(&subscription_key)
            .bind(&name_key)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }
}

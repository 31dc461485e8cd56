//! Deployment stacks: the stack resource and its managed set as JSON, keyed by folded scope and name, versioned
//! for optimistic concurrency; writes of one stack take its lock, so two replicas' PUTs of one stack at one version
//! cannot both succeed.

use cairn_store::codec::{
    self, check_precondition, current_format, fetch_limit, paginate, stack_display_key,
    stack_page_key,
};
use cairn_store::{
    Entity, InventoryChange, NewStack, Page, PageRequest, Precondition, StackRecord, StoreError,
    StoreResult, Timestamp, fold_case,
};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use crate::PostgresStore;
use crate::inventory::apply_changes;
use crate::rows::{LockSpace, backend, decode, lock_key};

const E: Entity = Entity::DeploymentStack;

macro_rules! select_stacks {
    ($tail:literal) => {
        concat!(
            "SELECT scope_key, name_key, scope, name, stack, managed_set, created_at, updated_at, version, ",
            "format_version FROM deployment_stacks ",
            $tail
        )
    };
}

fn record_from_row(row: &PgRow) -> StoreResult<StackRecord> {
    decode(row, E, codec::stack)
}

/// The stack's version, after taking its lock.
async fn locked_version(
    conn: &mut PgConnection,
    scope_key: &str,
    name_key: &str,
) -> StoreResult<Option<i64>> {
    lock_key(conn, LockSpace::Stack, &stack_page_key(scope_key, name_key)).await?;
    sqlx::query_scalar(
        "SELECT version FROM deployment_stacks WHERE scope_key = $1 AND name_key = $2",
    )
    .bind(scope_key)
    .bind(name_key)
    .fetch_optional(conn)
    .await
    .map_err(backend)
}

impl PostgresStore {
    pub(crate) async fn put_stack_impl(
        &self,
        stack: NewStack,
        precondition: Precondition,
        now: Timestamp,
        changes: Vec<InventoryChange>,
    ) -> StoreResult<StackRecord> {
        let scope_key = fold_case(stack.scope.trim_end_matches('/'));
        let name_key = stack.name.to_lowercase();
        let mut tx = self.begin().await?;
        let found = locked_version(&mut tx, &scope_key, &name_key).await?;
        check_precondition(
            E,
            &stack_display_key(&stack.scope, &stack.name),
            precondition,
            found,
        )?;
        // The record is built from what was written (not read back and parsed again: a stack's JSON is large).
        let (created_at, version): (i64, i64) = sqlx::query_as(
            "INSERT INTO deployment_stacks (scope_key, name_key, scope, name, stack, managed_set, created_at, \
             updated_at, version, format_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, 1, $8) \
             ON CONFLICT (scope_key, name_key) DO UPDATE SET scope = excluded.scope, name = excluded.name, \
             stack = excluded.stack, managed_set = excluded.managed_set, updated_at = excluded.updated_at, \
             version = deployment_stacks.version + 1, format_version = excluded.format_version \
             RETURNING created_at, version",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .bind(&stack.scope)
        .bind(&stack.name)
        .bind(stack.stack.as_str())
        .bind(stack.managed_set.as_str())
        .bind(now.unix_millis())
        .bind(current_format(E))
        .fetch_one(&mut *tx)
        .await
        .map_err(backend)?;
        apply_changes(&mut tx, &changes).await?;
        tx.commit().await.map_err(backend)?;
        Ok(StackRecord {
            scope: stack.scope,
            name: stack.name,
            stack: stack.stack,
            managed_set: stack.managed_set,
            created_at: Timestamp::from_unix_millis(created_at),
            updated_at: now,
            version: u64::try_from(version)
                .map_err(|_| StoreError::corrupt(E, "negative version"))?,
        })
    }

    pub(crate) async fn get_stack_impl(
        &self,
        scope: &str,
        name: &str,
    ) -> StoreResult<Option<StackRecord>> {
        sqlx::query(select_stacks!("WHERE scope_key = $1 AND name_key = $2"))
            .bind(fold_case(scope.trim_end_matches('/')))
            .bind(name.to_lowercase())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?
            .as_ref()
            .map(record_from_row)
            .transpose()
    }

    pub(crate) async fn get_stack_resource_impl(
        &self,
        scope: &str,
        name: &str,
    ) -> StoreResult<Option<String>> {
        sqlx::query(
            "SELECT stack, format_version FROM deployment_stacks WHERE scope_key = $1 AND name_key = $2",
        )
        .bind(fold_case(scope.trim_end_matches('/')))
        .bind(name.to_lowercase())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?
        .as_ref()
        .map(|row| decode(row, E, codec::stack_resource))
        .transpose()
    }

    pub(crate) async fn list_stacks_impl(
        &self,
        scope: Option<&str>,
        page: PageRequest,
    ) -> StoreResult<Page<StackRecord>> {
        let page_size = page.page_size();
        let after = page.continuation.clone().unwrap_or_default();
        let rows = sqlx::query(select_stacks!(
            "WHERE ($1::text IS NULL OR scope_key = $1) AND (scope_key || chr(1) || name_key) > $2 \
             ORDER BY scope_key, name_key LIMIT $3"
        ))
        .bind(scope.map(|scope| fold_case(scope.trim_end_matches('/'))))
        .bind(&after)
        .bind(fetch_limit(page_size))
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        let mut items = rows
            .iter()
            .map(record_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let continuation = paginate(&mut items, page_size, |s| {
            stack_page_key(
                &fold_case(s.scope.trim_end_matches('/')),
                &s.name.to_lowercase(),
            )
        });
        Ok(Page {
            items,
            continuation,
        })
    }

    pub(crate) async fn delete_stack_impl(
        &self,
        scope: &str,
        name: &str,
        precondition: Precondition,
        changes: Vec<InventoryChange>,
    ) -> StoreResult<()> {
        let scope_key = fold_case(scope.trim_end_matches('/'));
        let name_key = name.to_lowercase();
        let key = stack_display_key(scope, name);
        let mut tx = self.begin().await?;
        let found = locked_version(&mut tx, &scope_key, &name_key).await?;
        if found.is_none() {
            return Err(StoreError::not_found(E, key));
        }
        check_precondition(E, &key, precondition, found)?;
        sqlx::query("DELETE FROM deployment_stacks WHERE scope_key = $1 AND name_key = $2")
            .bind(&scope_key)
            .bind(&name_key)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        apply_changes(&mut tx, &changes).await?;
        tx.commit().await.map_err(backend)
    }
}

//! Deployment stacks: the stack resource and its managed set as JSON, keyed by folded scope and name, versioned
//! for optimistic concurrency.

use cairn_store::codec::{
    self, check_precondition, current_format, fetch_limit, paginate, stack_display_key,
    stack_page_key,
};
use cairn_store::{
    Entity, InventoryChange, NewStack, Page, PageRequest, Precondition, StackRecord, StoreError,
    StoreResult, Timestamp, fold_case,
};
use rusqlite::{Connection, OptionalExtension, params};
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::inventory::apply_change_directly;
use crate::rows::{backend, decode, direct_backend};

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

fn record_from_row(row: &SqliteRow) -> StoreResult<StackRecord> {
    decode(row, E, codec::stack)
}

impl SqliteStore {
    pub(crate) async fn put_stack_impl(
        &self,
        stack: NewStack,
        precondition: Precondition,
        now: Timestamp,
        changes: Vec<InventoryChange>,
    ) -> StoreResult<StackRecord> {
        let scope_key = fold_case(stack.scope.trim_end_matches('/'));
        let name_key = stack.name.to_lowercase();
        let display = stack_display_key(&stack.scope, &stack.name);
        let NewStack {
            scope,
            name,
            stack,
            managed_set,
        } = stack;
        let written = self.group.exclusive(&self.writer, move |conn| {
            let found = stack_version(conn, &scope_key, &name_key)?;
            check_precondition(E, &display, precondition, found)?;
            // The record is built from what was written (not read back and parsed again: a stack's JSON is large).
            let written: (i64, i64) = conn
                .prepare_cached(
                    "INSERT INTO deployment_stacks (scope_key, name_key, scope, name, stack, managed_set, \
                     created_at, updated_at, version, format_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, 1, ?8) \
                     ON CONFLICT (scope_key, name_key) DO UPDATE SET scope = excluded.scope, name = excluded.name, \
                     stack = excluded.stack, managed_set = excluded.managed_set, updated_at = excluded.updated_at, \
                     version = deployment_stacks.version + 1, format_version = excluded.format_version \
                     RETURNING created_at, version",
                )
                .and_then(|mut upsert| {
                    upsert.query_row(
                        params![
                            scope_key,
                            name_key,
                            scope,
                            name,
                            stack.as_str(),
                            managed_set.as_str(),
                            now.unix_millis(),
                            current_format(E)
                        ],
                        |row| Ok((row.get(0)?, row.get(1)?)),
                    )
                })
                .map_err(direct_backend)?;
            for change in &changes {
                apply_change_directly(conn, change)?;
            }
            Ok((written, scope, name, stack, managed_set))
        });
        let ((created_at, version), scope, name, stack, managed_set) = written.await?;
        Ok(StackRecord {
            scope,
            name,
            stack,
            managed_set,
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
        sqlx::query(select_stacks!("WHERE scope_key = ?1 AND name_key = ?2"))
            .bind(fold_case(scope.trim_end_matches('/')))
            .bind(name.to_lowercase())
            .fetch_optional(&self.reader)
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
            "SELECT stack, format_version FROM deployment_stacks WHERE scope_key = ?1 AND name_key = ?2",
        )
        .bind(fold_case(scope.trim_end_matches('/')))
        .bind(name.to_lowercase())
        .fetch_optional(&self.reader)
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
        let rows = match scope {
            Some(scope) => sqlx::query(select_stacks!(
                "WHERE scope_key = ?1 AND (scope_key || char(1) || name_key) > ?2 \
                 ORDER BY scope_key, name_key LIMIT ?3"
            ))
            .bind(fold_case(scope.trim_end_matches('/')))
            .bind(&after)
            .bind(fetch_limit(page_size))
            .fetch_all(&self.reader)
            .await
            .map_err(backend)?,
            None => sqlx::query(select_stacks!(
                "WHERE (scope_key || char(1) || name_key) > ?1 ORDER BY scope_key, name_key LIMIT ?2"
            ))
            .bind(&after)
            .bind(fetch_limit(page_size))
            .fetch_all(&self.reader)
            .await
            .map_err(backend)?,
        };
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
        self.group
            .exclusive(&self.writer, move |conn| {
                let found = stack_version(conn, &scope_key, &name_key)?;
                if found.is_none() {
                    return Err(StoreError::not_found(E, key));
                }
                check_precondition(E, &key, precondition, found)?;
                conn.prepare_cached(
                    "DELETE FROM deployment_stacks WHERE scope_key = ?1 AND name_key = ?2",
                )
                .and_then(|mut delete| delete.execute([&scope_key, &name_key]))
                .map_err(direct_backend)?;
                for change in &changes {
                    apply_change_directly(conn, change)?;
                }
                Ok(())
            })
            .await
    }
}

/// The version of the stack under folded `scope_key` and `name_key`, if any.
fn stack_version(conn: &Connection, scope_key: &str, name_key: &str) -> StoreResult<Option<i64>> {
    conn.prepare_cached(
        "SELECT version FROM deployment_stacks WHERE scope_key = ?1 AND name_key = ?2",
    )
    .and_then(|mut version| {
        version
            .query_row([scope_key, name_key], |row| row.get(0))
            .optional()
    })
    .map_err(direct_backend)
}

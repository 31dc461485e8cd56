//! Results of long-running operations polled through `Location`: one row per operation id, `status` NULL while
//! it runs under its owner's claim, each row alive until its `expires_at`. Reads filter expired rows out in SQL;
//! renewing and finishing are single conditional updates, so only the owner of a running result changes it.

use cairn_store::codec::{self, current_format, operation_result_columns, optional_json_text};
use cairn_store::{
    Entity, NewOperationResult, OperationResultRecord, StoreError, StoreResult, Timestamp,
};
use serde_json::Value;

use crate::SqliteStore;
use crate::rows::{backend, decode};

const E: Entity = Entity::OperationResult;

macro_rules! select_results {
    ($tail:literal) => {
        concat!(
            "SELECT id, subscription_key, status, body, owner, owner_expires_at, created_at, updated_at, ",
            "expires_at, format_version FROM operation_results ",
            $tail
        )
    };
}

fn record_from_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<OperationResultRecord> {
    decode(row, E, codec::operation_result)
}

impl SqliteStore {
    pub(crate) async fn put_operation_result_impl(
        &self,
        result: NewOperationResult,
        now: Timestamp,
    ) -> StoreResult<()> {
        let (status, body, owner, owner_expires_at) = operation_result_columns(&result.state);
        // A replacement keeps `created_at`, unless the row it replaces had expired (then it starts afresh).
        sqlx::query(
            "INSERT INTO operation_results (id, subscription_key, status, body, owner, owner_expires_at, \
             created_at, updated_at, expires_at, format_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9) \
             ON CONFLICT (id) DO UPDATE SET subscription_key = excluded.subscription_key, \
             status = excluded.status, body = excluded.body, owner = excluded.owner, \
             owner_expires_at = excluded.owner_expires_at, \
             created_at = CASE WHEN operation_results.expires_at <= excluded.updated_at \
               THEN excluded.created_at ELSE operation_results.created_at END, \
             updated_at = excluded.updated_at, expires_at = excluded.expires_at, \
             format_version = excluded.format_version",
        )
        .bind(&result.id)
        .bind(result.subscription.to_lowercase())
        .bind(status)
        .bind(body)
        .bind(owner)
        .bind(owner_expires_at)
        .bind(now.unix_millis())
        .bind(result.expires_at.unix_millis())
        .bind(current_format(E))
        .execute(&self.writer)
        .await
        .map(drop)
        .map_err(backend)
    }

    pub(crate) async fn get_operation_result_impl(
        &self,
        subscription: &str,
        id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<OperationResultRecord>> {
        sqlx::query(select_results!(
            "WHERE id = ?1 AND subscription_key = ?2 AND expires_at > ?3"
        ))
        .bind(id)
        .bind(subscription.to_lowercase())
        .bind(now.unix_millis())
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)?
        .as_ref()
        .map(record_from_row)
        .transpose()
    }

    pub(crate) async fn renew_operation_result_impl(
        &self,
        id: &str,
        owner: &str,
        owner_expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()> {
        let changed = sqlx::query(
            "UPDATE operation_results SET owner_expires_at = ?3, updated_at = ?4 \
             WHERE id = ?1 AND owner = ?2 AND status IS NULL AND expires_at > ?4",
        )
        .bind(id)
        .bind(owner)
        .bind(owner_expires_at.unix_millis())
        .bind(now.unix_millis())
        .execute(&self.writer)
        .await
        .map_err(backend)?
        .rows_affected();
        self.running_result_changed(id, owner, now, changed).await
    }

    pub(crate) async fn finish_operation_result_impl(
        &self,
        id: &str,
        owner: &str,
        status: u16,
        body: Option<Value>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let changed = sqlx::query(
            "UPDATE operation_results SET status = ?3, body = ?4, owner = NULL, owner_expires_at = NULL, \
             updated_at = ?5 WHERE id = ?1 AND owner = ?2 AND status IS NULL AND expires_at > ?5",
        )
        .bind(id)
        .bind(owner)
        .bind(i64::from(status))
        .bind(optional_json_text(body.as_ref()))
        .bind(now.unix_millis())
        .execute(&self.writer)
        .await
        .map_err(backend)?
        .rows_affected();
        self.running_result_changed(id, owner, now, changed).await
    }

    /// What a conditional update of a running result that changed `changed` rows amounts to.
    async fn running_result_changed(
        &self,
        id: &str,
        owner: &str,
        now: Timestamp,
        changed: u64,
    ) -> StoreResult<()> {
        if changed > 0 {
            return Ok(());
        }
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT expires_at FROM operation_results WHERE id = ?1 AND expires_at > ?2",
        )
        .bind(id)
        .bind(now.unix_millis())
        .fetch_optional(&self.writer)
        .await
        .map_err(backend)?;
        Err(match found {
            None => StoreError::not_found(E, id),
            Some(_) => StoreError::conflict(E, id, format!("it is not running under '{owner}'")),
        })
    }

    pub(crate) async fn purge_expired_operation_results_impl(
        &self,
        now: Timestamp,
    ) -> StoreResult<u64> {
        sqlx::query("DELETE FROM operation_results WHERE expires_at <= ?1")
            .bind(now.unix_millis())
            .execute(&self.writer)
            .await
            .map(|done| done.rows_affected())
            .map_err(backend)
    }
}

//! Deployment stack what-if results: the result as JSON and the request sealed with the data key, keyed by folded
//! scope and name, each row alive until its `expires_at`. Reads filter expired rows out in SQL; writes and deletes
//! remove an expired row they meet, and the purge removes them all.

use cairn_store::codec::{self, current_format, fetch_limit, json_text, paginate};
use cairn_store::sealed::STACK_WHAT_IF_REQUEST;
use cairn_store::{
    Entity, NewStackWhatIf, Page, PageRequest, SecretString, StackWhatIfRecord, StoreResult,
    Timestamp, fold_case,
};
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::rows::{backend, decode};

const E: Entity = Entity::StackWhatIf;

macro_rules! select_what_ifs {
    ($tail:literal) => {
        concat!(
            "SELECT scope, name, result, created_at, updated_at, expires_at, format_version ",
            "FROM stack_what_ifs ",
            $tail
        )
    };
}

/// The folded `(scope, name)` a result is stored under.
fn keys(scope: &str, name: &str) -> (String, String) {
    (fold_case(scope), name.to_lowercase())
}

fn record_from_row(row: &SqliteRow) -> StoreResult<StackWhatIfRecord> {
    decode(row, E, codec::stack_what_if)
}

impl SqliteStore {
    pub(crate) async fn put_stack_what_if_impl(
        &self,
        what_if: NewStackWhatIf,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let scope = what_if.scope.trim_end_matches('/');
        let (scope_key, name_key) = keys(scope, &what_if.name);
        let sealed = STACK_WHAT_IF_REQUEST.seal(
            &self.data_key,
            &[&scope_key, &name_key],
            &what_if.request,
        )?;
        let mut tx = self.begin_write().await?;
        // An expired result is gone: the new one starts afresh rather than replacing it.
        sqlx::query(
            "DELETE FROM stack_what_ifs WHERE scope_key = ?1 AND name_key = ?2 AND expires_at <= ?3",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .bind(now.unix_millis())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        let live: Option<i64> = sqlx::query_scalar(
            "SELECT expires_at FROM stack_what_ifs WHERE scope_key = ?1 AND name_key = ?2",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        sqlx::query(
            "INSERT INTO stack_what_ifs (scope_key, name_key, scope, name, result, request, created_at, \
             updated_at, expires_at, format_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9) \
             ON CONFLICT (scope_key, name_key) DO UPDATE SET scope = excluded.scope, name = excluded.name, \
             result = excluded.result, request = excluded.request, updated_at = excluded.updated_at, \
             expires_at = excluded.expires_at, format_version = excluded.format_version",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .bind(scope)
        .bind(&what_if.name)
        .bind(json_text(&what_if.result))
        .bind(sealed)
        .bind(now.unix_millis())
        .bind(what_if.expires_at.unix_millis())
        .bind(current_format(E))
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(live.is_some())
    }

    pub(crate) async fn get_stack_what_if_impl(
        &self,
        scope: &str,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Option<StackWhatIfRecord>> {
        let (scope_key, name_key) = keys(scope, name);
        sqlx::query(select_what_ifs!(
            "WHERE scope_key = ?1 AND name_key = ?2 AND expires_at > ?3"
        ))
        .bind(&scope_key)
        .bind(&name_key)
        .bind(now.unix_millis())
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)?
        .as_ref()
        .map(record_from_row)
        .transpose()
    }

    pub(crate) async fn get_stack_what_if_request_impl(
        &self,
        scope: &str,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Option<SecretString>> {
        let (scope_key, name_key) = keys(scope, name);
        let sealed: Option<Vec<u8>> = sqlx::query_scalar(
            "SELECT request FROM stack_what_ifs WHERE scope_key = ?1 AND name_key = ?2 AND expires_at > ?3",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .bind(now.unix_millis())
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)?;
        sealed
            .map(|sealed| {
                STACK_WHAT_IF_REQUEST.open(&self.data_key, &[&scope_key, &name_key], &sealed)
            })
            .transpose()
    }

    pub(crate) async fn list_stack_what_ifs_impl(
        &self,
        scope: &str,
        page: PageRequest,
        now: Timestamp,
    ) -> StoreResult<Page<StackWhatIfRecord>> {
        let page_size = page.page_size();
        let after = page.continuation.clone().unwrap_or_default();
        let rows = sqlx::query(select_what_ifs!(
            "WHERE scope_key = ?1 AND name_key > ?2 AND expires_at > ?3 ORDER BY name_key LIMIT ?4"
        ))
        .bind(fold_case(scope))
        .bind(&after)
        .bind(now.unix_millis())
        .bind(fetch_limit(page_size))
        .fetch_all(&self.reader)
        .await
        .map_err(backend)?;
        let mut items = rows
            .iter()
            .map(record_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let continuation = paginate(&mut items, page_size, |r| r.name.to_lowercase());
        Ok(Page {
            items,
            continuation,
        })
    }

    pub(crate) async fn delete_stack_what_if_impl(
        &self,
        scope: &str,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (scope_key, name_key) = keys(scope, name);
        let mut tx = self.begin_write().await?;
        let expires_at: Option<i64> = sqlx::query_scalar(
            "SELECT expires_at FROM stack_what_ifs WHERE scope_key = ?1 AND name_key = ?2",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        let Some(expires_at) = expires_at else {
            return Ok(false);
        };
        sqlx::query("DELETE FROM stack_what_ifs WHERE scope_key = ?1 AND name_key = ?2")
            .bind(&scope_key)
            .bind(&name_key)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(expires_at > now.unix_millis())
    }

    pub(crate) async fn purge_expired_stack_what_ifs_impl(
        &self,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM stack_what_ifs WHERE expires_at <= ?1")
            .bind(now.unix_millis())
            .execute(&self.writer)
            .await
            .map_err(backend)?;
        Ok(result.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_store::crypto::MasterKey;
    use cairn_store::{ExposeSecret, StackWhatIfStore};

    fn what_if(name: &str, request: &str) -> NewStackWhatIf {
        NewStackWhatIf {
            scope: "/subscriptions/s/resourceGroups/rg".into(),
            name: name.into(),
            result: serde_json::json!({"name": name}),
            request: SecretString::from(request.to_owned()),
            expires_at: Timestamp::from_unix_millis(1_000),
        }
    }

    /// The sealed request is bound to its row: copied onto another result's row it no longer decrypts.
    #[tokio::test]
    async fn a_request_moved_to_another_row_does_not_decrypt() -> anyhow::Result<()> {
        let store = SqliteStore::open_in_memory(&MasterKey::generate()?).await?;
        let now = Timestamp::from_unix_millis(1);
        store
            .put_stack_what_if(what_if("a", "request-a"), now)
            .await?;
        store
            .put_stack_what_if(what_if("b", "request-b"), now)
            .await?;
        let scope = "/subscriptions/s/resourceGroups/rg";
        assert_eq!(
            store
                .get_stack_what_if_request(scope, "a", now)
                .await?
                .map(|r| r.expose_secret().to_owned())
                .as_deref(),
            Some("request-a")
        );
        sqlx::query(
            "UPDATE stack_what_ifs SET request = (SELECT request FROM stack_what_ifs WHERE name_key = 'a') \
             WHERE name_key = 'b'",
        )
        .execute(&store.writer)
        .await?;
        let error = store
            .get_stack_what_if_request(scope, "b", now)
            .await
            .expect_err("moved ciphertext");
        assert_eq!(error.arm_code(), "StoreEncryptionFailure");
        Ok(())
    }

    /// The request column holds ciphertext, not the request text.
    #[tokio::test]
    async fn the_request_column_is_sealed() -> anyhow::Result<()> {
        let store = SqliteStore::open_in_memory(&MasterKey::generate()?).await?;
        store
            .put_stack_what_if(
                what_if("a", "plain-request-text"),
                Timestamp::from_unix_millis(1),
            )
            .await?;
        let stored: Vec<u8> = sqlx::query_scalar("SELECT request FROM stack_what_ifs")
            .fetch_one(&store.reader)
            .await?;
        let needle = b"plain-request-text";
        assert!(!stored.windows(needle.len()).any(|w| w == needle));
        Ok(())
    }
}

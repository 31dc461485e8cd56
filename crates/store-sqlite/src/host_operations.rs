//! Pending operations of the extension host's API: the polling state sealed with the data key (bound to the row's
//! id), each row alive until its `expires_at`. Reads filter expired rows out in SQL; a put over an expired row
//! starts afresh, and the purge removes them all.

use cairn_store::codec::{self, current_format};
use cairn_store::sealed::HOST_OPERATION_STATE;
use cairn_store::{Entity, HostOperationRecord, NewHostOperation, StoreResult, Timestamp};
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::rows::{backend, decode};

const E: Entity = Entity::HostOperation;

impl SqliteStore {
    fn host_operation_from_row(&self, row: &SqliteRow) -> StoreResult<HostOperationRecord> {
        decode(row, E, |row| codec::host_operation(row, &self.data_key))
    }

    pub(crate) async fn put_host_operation_impl(
        &self,
        operation: NewHostOperation,
        now: Timestamp,
    ) -> StoreResult<()> {
        let sealed =
            HOST_OPERATION_STATE.seal(&self.data_key, &[&operation.id], &operation.state)?;
        let mut tx = self.begin_write().await?;
        // An expired operation is gone: the new one starts afresh rather than replacing it.
        sqlx::query("DELETE FROM host_operations WHERE id = ?1 AND expires_at <= ?2")
            .bind(&operation.id)
            .bind(now.unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::query(
            "INSERT INTO host_operations (id, extension_name, extension_version, state, created_at, updated_at, \
             expires_at, format_version) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7) \
             ON CONFLICT (id) DO UPDATE SET extension_name = excluded.extension_name, \
             extension_version = excluded.extension_version, state = excluded.state, \
             updated_at = excluded.updated_at, expires_at = excluded.expires_at, \
             format_version = excluded.format_version",
        )
        .bind(&operation.id)
        .bind(&operation.extension_name)
        .bind(&operation.extension_version)
        .bind(sealed)
        .bind(now.unix_millis())
        .bind(operation.expires_at.unix_millis())
        .bind(current_format(E))
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn get_host_operation_impl(
        &self,
        id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<HostOperationRecord>> {
        sqlx::query(
            "SELECT id, extension_name, extension_version, state, created_at, updated_at, expires_at, \
             format_version FROM host_operations WHERE id = ?1 AND expires_at > ?2",
        )
        .bind(id)
        .bind(now.unix_millis())
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)?
        .as_ref()
        .map(|row| self.host_operation_from_row(row))
        .transpose()
    }

    pub(crate) async fn delete_host_operation_impl(
        &self,
        id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let expires_at: Option<i64> =
            sqlx::query_scalar("DELETE FROM host_operations WHERE id = ?1 RETURNING expires_at")
                .bind(id)
                .fetch_optional(&self.writer)
                .await
                .map_err(backend)?;
        Ok(expires_at.is_some_and(|expires_at| expires_at > now.unix_millis()))
    }

    pub(crate) async fn purge_expired_host_operations_impl(
        &self,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM host_operations WHERE expires_at <= ?1")
            .bind(now.unix_millis())
            .execute(&self.writer)
            .await
            .map_err(backend)?;
        Ok(result.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use cairn_store::crypto::MasterKey;
    use cairn_store::{HostOperationStore, NewHostOperation, SecretString, Timestamp};

    use crate::SqliteStore;

    fn operation(id: &str, state: &str) -> NewHostOperation {
        NewHostOperation {
            id: id.into(),
            extension_name: "Acme".into(),
            extension_version: "1.0.0".into(),
            state: SecretString::from(state.to_owned()),
            expires_at: Timestamp::from_unix_millis(1_000),
        }
    }

    /// The state column holds ciphertext bound to its row: copied onto another operation it no longer decrypts.
    #[tokio::test]
    async fn the_state_is_sealed_and_bound_to_its_row() -> anyhow::Result<()> {
        let store = SqliteStore::open_in_memory(&MasterKey::generate()?).await?;
        let now = Timestamp::from_unix_millis(1);
        store
            .put_host_operation(operation("a", "plain-state-text"), now)
            .await?;
        store
            .put_host_operation(operation("b", "other"), now)
            .await?;
        let stored: Vec<u8> =
            sqlx::query_scalar("SELECT state FROM host_operations WHERE id = 'a'")
                .fetch_one(&store.reader)
                .await?;
        let needle = b"plain-state-text";
        assert!(!stored.windows(needle.len()).any(|w| w == needle));
        sqlx::query(
            "UPDATE host_operations SET state = (SELECT state FROM host_operations WHERE id = 'a') \
             WHERE id = 'b'",
        )
        .execute(&store.writer)
        .await?;
        let error = store
            .get_host_operation("b", now)
            .await
            .expect_err("moved ciphertext");
        assert_eq!(error.arm_code(), "StoreEncryptionFailure");
        Ok(())
    }
}

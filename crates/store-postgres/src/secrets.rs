//! Encrypted secrets referenced from plain documents. Values are sealed before they reach SQL
//! (`cairn_store::sealed::SECRET_VALUE`); setting a name again keeps its reference, under the name's lock.

use cairn_store::sealed::SECRET_VALUE;
use cairn_store::{
    Entity, SecretOwner, SecretRef, SecretString, StoreError, StoreResult, Timestamp,
};

use crate::PostgresStore;
use crate::rows::{LockSpace, backend, lock_key};

const E: Entity = Entity::Secret;

impl PostgresStore {
    pub(crate) async fn put_secret_impl(
        &self,
        owner: &SecretOwner,
        name: &str,
        value: &SecretString,
        now: Timestamp,
    ) -> StoreResult<SecretRef> {
        let (kind, owner_id) = owner.parts();
        let mut tx = self.begin().await?;
        lock_key(
            &mut tx,
            LockSpace::Secret,
            &format!("{kind}\u{1}{owner_id}\u{1}{name}"),
        )
        .await?;
        let existing: Option<String> = sqlx::query_scalar(
            "SELECT id FROM secrets WHERE owner_kind = $1 AND owner_id = $2 AND name = $3",
        )
        .bind(kind)
        .bind(owner_id)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        let reference = match existing {
            Some(id) => {
                let reference = SecretRef::from_string(id);
                let sealed = SECRET_VALUE.seal(&self.data_key, &[reference.as_str()], value)?;
                sqlx::query("UPDATE secrets SET value = $2, updated_at = $3 WHERE id = $1")
                    .bind(reference.as_str())
                    .bind(sealed)
                    .bind(now.unix_millis())
                    .execute(&mut *tx)
                    .await
                    .map_err(backend)?;
                reference
            }
            None => {
                let reference = SecretRef::generate();
                let sealed = SECRET_VALUE.seal(&self.data_key, &[reference.as_str()], value)?;
                sqlx::query(
                    "INSERT INTO secrets (id, owner_kind, owner_id, name, value, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6)",
                )
                .bind(reference.as_str())
                .bind(kind)
                .bind(owner_id)
                .bind(name)
                .bind(sealed)
                .bind(now.unix_millis())
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
                reference
            }
        };
        tx.commit().await.map_err(backend)?;
        Ok(reference)
    }

    pub(crate) async fn get_secret_impl(&self, reference: &SecretRef) -> StoreResult<SecretString> {
        let sealed: Option<Vec<u8>> = sqlx::query_scalar("SELECT value FROM secrets WHERE id = $1")
            .bind(reference.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?;
        let sealed = sealed.ok_or_else(|| StoreError::not_found(E, reference.as_str()))?;
        SECRET_VALUE.open(&self.data_key, &[reference.as_str()], &sealed)
    }

    pub(crate) async fn list_secrets_impl(
        &self,
        owner: &SecretOwner,
    ) -> StoreResult<Vec<(String, SecretRef)>> {
        let (kind, owner_id) = owner.parts();
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, id FROM secrets WHERE owner_kind = $1 AND owner_id = $2 ORDER BY name",
        )
        .bind(kind)
        .bind(owner_id)
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        Ok(rows
            .into_iter()
            .map(|(name, id)| (name, SecretRef::from_string(id)))
            .collect())
    }

    pub(crate) async fn delete_secrets_impl(&self, owner: &SecretOwner) -> StoreResult<u64> {
        let (kind, owner_id) = owner.parts();
        let result = sqlx::query("DELETE FROM secrets WHERE owner_kind = $1 AND owner_id = $2")
            .bind(kind)
            .bind(owner_id)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
        Ok(result.rows_affected())
    }
}

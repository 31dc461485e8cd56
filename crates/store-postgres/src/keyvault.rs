//! The local Key Vault: vaults, and secret versions whose values are sealed with the store's data key.

use cairn_store::codec::{
    self, check_precondition, current_format, fetch_limit, json_text, paginate, tags_text,
};
use cairn_store::sealed::VAULT_SECRET_VALUE;
use cairn_store::{
    Entity, NewSecretVersion, Page, PageRequest, Precondition, SecretVersionInfo, StoreError,
    StoreResult, Timestamp, Vault, VaultRecord, VaultSecret, fold_case,
};
use sqlx::postgres::PgRow;

use crate::PostgresStore;
use crate::rows::{LockSpace, backend, decode, lock_key, write_error};

const VAULT: Entity = Entity::KeyVault;
const SECRET: Entity = Entity::KeyVaultSecret;

macro_rules! vault_columns {
    () => {
        "id, name, location, tags, properties, created_at, updated_at, version, format_version"
    };
}

macro_rules! select_versions {
    ($tail:literal) => {
        concat!(
            "SELECT v.vault_key, v.name_key, v.name, v.version, v.value, v.content_type, v.enabled, v.not_before, ",
            "v.expires, v.tags, v.created_at, v.updated_at, v.format_version, k.id AS vault_id ",
            "FROM key_vault_secret_versions v JOIN key_vaults k ON k.id_key = v.vault_key ",
            $tail
        )
    };
}

fn vault_from_row(row: &PgRow) -> StoreResult<VaultRecord> {
    decode(row, VAULT, codec::vault)
}

fn info_from_row(row: &PgRow) -> StoreResult<SecretVersionInfo> {
    decode(row, SECRET, codec::secret_version_info)
}

impl PostgresStore {
    fn open_version(&self, row: &PgRow) -> StoreResult<VaultSecret> {
        decode(row, SECRET, |row| codec::vault_secret(row, &self.data_key))
    }

    pub(crate) async fn put_vault_impl(
        &self,
        vault: Vault,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreResult<VaultRecord> {
        let id_key = fold_case(&vault.id);
        let mut tx = self.begin().await?;
        lock_key(&mut tx, LockSpace::Vault, &id_key).await?;
        let found: Option<i64> =
            sqlx::query_scalar("SELECT version FROM key_vaults WHERE id_key = $1")
                .bind(&id_key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
        check_precondition(VAULT, &vault.id, precondition, found)?;
        let row = sqlx::query(concat!(
            "INSERT INTO key_vaults (id_key, id, name, location, tags, properties, created_at, updated_at, \
             version, format_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, 1, $8) \
             ON CONFLICT (id_key) DO UPDATE SET id = excluded.id, name = excluded.name, \
             location = excluded.location, tags = excluded.tags, properties = excluded.properties, \
             updated_at = excluded.updated_at, version = key_vaults.version + 1, \
             format_version = excluded.format_version RETURNING ",
            vault_columns!()
        ))
        .bind(&id_key)
        .bind(&vault.id)
        .bind(&vault.name)
        .bind(&vault.location)
        .bind(tags_text(&vault.tags))
        .bind(json_text(&vault.properties))
        .bind(now.unix_millis())
        .bind(current_format(VAULT))
        .fetch_one(&mut *tx)
        .await
        .map_err(backend)?;
        let record = vault_from_row(&row)?;
        tx.commit().await.map_err(backend)?;
        Ok(record)
    }

    pub(crate) async fn get_vault_impl(&self, id: &str) -> StoreResult<Option<VaultRecord>> {
        sqlx::query(concat!(
            "SELECT ",
            vault_columns!(),
            " FROM key_vaults WHERE id_key = $1"
        ))
        .bind(fold_case(id))
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?
        .as_ref()
        .map(vault_from_row)
        .transpose()
    }

    pub(crate) async fn list_vaults_impl(
        &self,
        scope: &str,
        page: PageRequest,
    ) -> StoreResult<Page<VaultRecord>> {
        let page_size = page.page_size();
        let rows = sqlx::query(concat!(
            "SELECT ",
            vault_columns!(),
            " FROM key_vaults WHERE (id_key = $1 OR starts_with(id_key, $1 || '/')) AND id_key > $2 \
             ORDER BY id_key LIMIT $3"
        ))
        .bind(fold_case(scope))
        .bind(page.continuation.as_deref().unwrap_or(""))
        .bind(fetch_limit(page_size))
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        let mut items = rows
            .iter()
            .map(vault_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let continuation = paginate(&mut items, page_size, |v| fold_case(&v.vault.id));
        Ok(Page {
            items,
            continuation,
        })
    }

    pub(crate) async fn delete_vault_impl(&self, id: &str) -> StoreResult<()> {
        let id_key = fold_case(id);
        let mut tx = self.begin().await?;
        lock_key(&mut tx, LockSpace::Vault, &id_key).await?;
        let result = sqlx::query("DELETE FROM key_vaults WHERE id_key = $1")
            .bind(&id_key)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        if result.rows_affected() == 0 {
            return Err(StoreError::not_found(VAULT, id));
        }
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn set_vault_secret_impl(
        &self,
        secret: NewSecretVersion,
    ) -> StoreResult<SecretVersionInfo> {
        let vault_key = fold_case(&secret.vault_id);
        let name_key = secret.name.to_lowercase();
        let version = uuid::Uuid::new_v4().simple().to_string();
        let sealed = VAULT_SECRET_VALUE.seal(
            &self.data_key,
            &[&vault_key, &name_key, &version],
            &secret.value,
        )?;
        let mut tx = self.begin().await?;
        // A share lock keeps the vault from being deleted until this version is in.
        let vault_id: Option<String> =
            sqlx::query_scalar("SELECT id FROM key_vaults WHERE id_key = $1 FOR SHARE")
                .bind(&vault_key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
        let Some(vault_id) = vault_id else {
            return Err(StoreError::not_found(VAULT, &secret.vault_id));
        };
        sqlx::query(
            "INSERT INTO key_vault_secret_versions (vault_key, name_key, name, version, value, content_type, \
             enabled, not_before, expires, tags, created_at, updated_at, format_version) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12)",
        )
        .bind(&vault_key)
        .bind(&name_key)
        .bind(&secret.name)
        .bind(&version)
        .bind(sealed)
        .bind(secret.content_type.as_deref())
        .bind(secret.enabled)
        .bind(secret.not_before.map(Timestamp::unix_millis))
        .bind(secret.expires.map(Timestamp::unix_millis))
        .bind(tags_text(&secret.tags))
        .bind(secret.created_at.unix_millis())
        .bind(current_format(SECRET))
        .execute(&mut *tx)
        .await
        .map_err(|e| write_error(VAULT, &secret.vault_id, e))?;
        tx.commit().await.map_err(backend)?;
        Ok(SecretVersionInfo {
            vault_id,
            name: secret.name,
            version,
            content_type: secret.content_type,
            enabled: secret.enabled,
            not_before: secret.not_before,
            expires: secret.expires,
            tags: secret.tags,
            created_at: secret.created_at,
            updated_at: secret.created_at,
        })
    }

    pub(crate) async fn get_vault_secret_impl(
        &self,
        vault_id: &str,
        name: &str,
        version: Option<&str>,
    ) -> StoreResult<Option<VaultSecret>> {
        let row = sqlx::query(select_versions!(
            "WHERE v.vault_key = $1 AND v.name_key = $2 AND ($3::text IS NULL OR v.version = $3) \
             ORDER BY v.seq DESC LIMIT 1"
        ))
        .bind(fold_case(vault_id))
        .bind(name.to_lowercase())
        .bind(version.map(str::to_lowercase))
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?;
        row.as_ref().map(|row| self.open_version(row)).transpose()
    }

    pub(crate) async fn list_vault_secrets_impl(
        &self,
        vault_id: &str,
    ) -> StoreResult<Vec<SecretVersionInfo>> {
        let rows = sqlx::query(select_versions!(
            "JOIN (SELECT MAX(seq) AS seq FROM key_vault_secret_versions WHERE vault_key = $1 GROUP BY name_key) \
             latest ON v.seq = latest.seq ORDER BY v.name_key"
        ))
        .bind(fold_case(vault_id))
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        rows.iter().map(info_from_row).collect()
    }

    pub(crate) async fn list_vault_secret_versions_impl(
        &self,
        vault_id: &str,
        name: &str,
    ) -> StoreResult<Vec<SecretVersionInfo>> {
        let rows = sqlx::query(select_versions!(
            "WHERE v.vault_key = $1 AND v.name_key = $2 ORDER BY v.seq"
        ))
        .bind(fold_case(vault_id))
        .bind(name.to_lowercase())
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        rows.iter().map(info_from_row).collect()
    }

    pub(crate) async fn set_vault_secret_enabled_impl(
        &self,
        vault_id: &str,
        name: &str,
        version: &str,
        enabled: bool,
        now: Timestamp,
    ) -> StoreResult<SecretVersionInfo> {
        let vault_key = fold_case(vault_id);
        let name_key = name.to_lowercase();
        let version = version.to_lowercase();
        let mut tx = self.begin().await?;
        let result = sqlx::query(
            "UPDATE key_vault_secret_versions SET enabled = $4, updated_at = $5 \
             WHERE vault_key = $1 AND name_key = $2 AND version = $3",
        )
        .bind(&vault_key)
        .bind(&name_key)
        .bind(&version)
        .bind(enabled)
        .bind(now.unix_millis())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        if result.rows_affected() == 0 {
            return Err(StoreError::not_found(
                SECRET,
                format!("{vault_id}/secrets/{name}/{version}"),
            ));
        }
        let row = sqlx::query(select_versions!(
            "WHERE v.vault_key = $1 AND v.name_key = $2 AND v.version = $3"
        ))
        .bind(&vault_key)
        .bind(&name_key)
        .bind(&version)
        .fetch_one(&mut *tx)
        .await
        .map_err(backend)?;
        let info = info_from_row(&row)?;
        tx.commit().await.map_err(backend)?;
        Ok(info)
    }

    pub(crate) async fn delete_vault_secret_impl(
        &self,
        vault_id: &str,
        name: &str,
    ) -> StoreResult<()> {
        let result = sqlx::query(
            "DELETE FROM key_vault_secret_versions WHERE vault_key = $1 AND name_key = $2",
        )
        .bind(fold_case(vault_id))
        .bind(name.to_lowercase())
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        if result.rows_affected() == 0 {
            return Err(StoreError::not_found(
                SECRET,
                format!("{vault_id}/secrets/{name}"),
            ));
        }
        Ok(())
    }
}

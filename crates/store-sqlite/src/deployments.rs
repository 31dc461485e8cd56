//! Deployment runs: create or replace, partial updates under optimistic concurrency, listing, deletion of
//! history, and the owner claim used for crash recovery.

use cairn_store::codec::{
    self, check_precondition, current_format, fetch_limit, json_text, optional_json_text, paginate,
    signed, tags_text,
};
use cairn_store::{
    DeploymentFilter, DeploymentId, DeploymentKey, DeploymentLookup, DeploymentRecord,
    DeploymentStatus, DeploymentSummary, DeploymentUpdate, Entity, JsonText, NewDeployment, Page,
    Precondition, StoreError, StoreResult, Timestamp, fold_case,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Sqlite, SqliteConnection, Transaction};

use crate::SqliteStore;
use crate::direct_reads::query_one;
use crate::rows::{backend, decode, write_error};

const E: Entity = Entity::Deployment;

macro_rules! select_deployments {
    ($tail:literal) => {
        concat!(
            "SELECT d.id, d.scope, d.name, d.parent_id, d.location, d.tags, d.status, d.correlation_id, ",
            "d.stack_initiated, d.created_at, d.updated_at, d.started_at, d.finished_at, d.outputs, d.error, ",
            "d.output_resources, d.extensions, d.owner, d.owner_expires_at, d.cancel_requested, d.version, ",
            "d.format_version, ",
            "r.request, r.format_version AS request_format_version ",
            "FROM deployments d JOIN deployment_requests r ON r.deployment_id = d.id ",
            $tail
        )
    };
}

/// The columns of a [`DeploymentSummary`]: none of the request's table, nor outputs or output resources.
macro_rules! select_summaries {
    ($tail:literal) => {
        concat!(
            "SELECT d.id, d.scope, d.name, d.parent_id, d.status, d.error, d.created_at, d.updated_at, ",
            "d.started_at, d.finished_at, d.cancel_requested, d.version, d.format_version FROM deployments d ",
            $tail
        )
    };
}

fn record_from_row(row: &SqliteRow) -> StoreResult<DeploymentRecord> {
    decode(row, E, codec::deployment)
}

async fn fetch_by_id(
    conn: &mut SqliteConnection,
    id: &DeploymentId,
) -> StoreResult<Option<DeploymentRecord>> {
    sqlx::query(select_deployments!("WHERE d.id = ?1"))
        .bind(id.as_str())
        .fetch_optional(conn)
        .await
        .map_err(backend)?
        .as_ref()
        .map(record_from_row)
        .transpose()
}

/// Deletes a run and everything that hangs off it (journal and request by cascade, secrets explicitly).
async fn delete_run(tx: &mut Transaction<'static, Sqlite>, id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM secrets WHERE owner_kind = 'deployment' AND owner_id = ?1")
        .bind(id)
        .execute(&mut **tx)
        .await
        .map_err(backend)?;
    sqlx::query("DELETE FROM deployments WHERE id = ?1")
        .bind(id)
        .execute(&mut **tx)
        .await
        .map_err(backend)?;
    Ok(())
}

impl SqliteStore {
    pub(crate) async fn put_deployment_impl(
        &self,
        new: NewDeployment,
        precondition: Precondition,
    ) -> StoreResult<DeploymentRecord> {
        let (scope_key, name_key) = new.key.folded();
        let key_text = new.key.to_string();
        let mut tx = self.begin_write().await?;
        let existing: Option<(String, i64)> = sqlx::query_as(
            "SELECT id, version FROM deployments WHERE scope_key = ?1 AND name_key = ?2",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        check_precondition(
            E,
            &key_text,
            precondition,
            existing.as_ref().map(|(_, version)| *version),
        )?;
        if let Some((old_id, _)) = existing {
            if old_id == new.id.as_str() {
                return Err(StoreError::conflict(
                    E,
                    key_text,
                    "a replacing run needs a new ID",
                ));
            }
            delete_run(&mut tx, &old_id).await?;
        }
        let owner = new.owner.as_ref();
        sqlx::query(
            "INSERT INTO deployments (id, scope_key, name_key, scope, name, parent_id, location, tags, status, \
             correlation_id, stack_initiated, created_at, updated_at, owner, owner_expires_at, version, format_version) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14, 1, ?15)",
        )
        .bind(new.id.as_str())
        .bind(&scope_key)
        .bind(&name_key)
        .bind(&new.key.scope)
        .bind(&new.key.name)
        .bind(new.parent.as_ref().map(DeploymentId::as_str))
        .bind(new.location.as_deref())
        .bind(tags_text(&new.tags))
        .bind(new.status.as_str())
        .bind(&new.correlation_id)
        .bind(new.stack_initiated)
        .bind(new.created_at.unix_millis())
        .bind(owner.map(|o| o.owner.as_str()))
        .bind(owner.map(|o| o.expires_at.unix_millis()))
        .bind(current_format(E))
        .execute(&mut *tx)
        .await
        .map_err(|e| write_error(E, &key_text, e))?;
        sqlx::query("INSERT INTO deployment_requests (deployment_id, request, format_version) VALUES (?1, ?2, ?3)")
            .bind(new.id.as_str())
            .bind(json_text(&new.request))
            .bind(current_format(E))
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(DeploymentRecord {
            id: new.id,
            key: new.key,
            parent: new.parent,
            location: new.location,
            tags: new.tags,
            request: new.request,
            status: new.status,
            correlation_id: new.correlation_id,
            stack_initiated: new.stack_initiated,
            created_at: new.created_at,
            updated_at: new.created_at,
            started_at: None,
            finished_at: None,
            outputs: None,
            error: None,
            output_resources: None,
            extensions: None,
            owner: new.owner,
            cancel_requested: false,
            version: 1,
        })
    }

    #[expect(
        clippy::redundant_closure,
        reason = "the closure takes rows of any lifetime; the generic decoder named alone is fixed to one"
    )]
    pub(crate) async fn get_deployment_impl(
        &self,
        key: &DeploymentKey,
    ) -> StoreResult<Option<DeploymentRecord>> {
        const BY_KEY: &str = select_deployments!("WHERE d.scope_key = ?1 AND d.name_key = ?2");
        let (scope_key, name_key) = key.folded();
        if let Some(direct) = &self.direct {
            // A finished run's record holds its template and output resources: one text each, read in one call.
            let params = (scope_key, name_key);
            return direct
                .read(move |conn| query_one(conn, BY_KEY, params, E, |row| codec::deployment(row)))
                .await;
        }
        sqlx::query(BY_KEY)
            .bind(scope_key)
            .bind(name_key)
            .fetch_optional(&self.reader)
            .await
            .map_err(backend)?
            .as_ref()
            .map(record_from_row)
            .transpose()
    }

    pub(crate) async fn get_deployment_by_id_impl(
        &self,
        id: &DeploymentId,
    ) -> StoreResult<Option<DeploymentRecord>> {
        let mut conn = self.reader.acquire().await.map_err(backend)?;
        fetch_by_id(&mut conn, id).await
    }

    pub(crate) async fn get_deployment_summary_impl(
        &self,
        lookup: DeploymentLookup<'_>,
    ) -> StoreResult<Option<DeploymentSummary>> {
        const BY_KEY: &str = select_summaries!("WHERE d.scope_key = ?1 AND d.name_key = ?2");
        const BY_ID: &str = select_summaries!("WHERE d.id = ?1");
        if let Some(direct) = &self.direct {
            // Polled while runs go on: on a connection of its own, it does not queue behind the pool's reads.
            let (sql, params) = match lookup {
                DeploymentLookup::Key(key) => {
                    let (scope_key, name_key) = key.folded();
                    (BY_KEY, vec![scope_key, name_key])
                }
                DeploymentLookup::Id(id) => (BY_ID, vec![id.as_str().to_owned()]),
            };
            return direct
                .read(move |conn| {
                    query_one(conn, sql, rusqlite::params_from_iter(params), E, |row| {
                        codec::deployment_summary(row)
                    })
                })
                .await;
        }
        let row = match lookup {
            DeploymentLookup::Key(key) => {
                let (scope_key, name_key) = key.folded();
                sqlx::query(BY_KEY)
                    .bind(scope_key)
                    .bind(name_key)
                    .fetch_optional(&self.reader)
                    .await
            }
            DeploymentLookup::Id(id) => {
                sqlx::query(BY_ID)
                    .bind(id.as_str())
                    .fetch_optional(&self.reader)
                    .await
            }
        }
        .map_err(backend)?;
        row.as_ref()
            .map(|row| decode(row, E, codec::deployment_summary))
            .transpose()
    }

    pub(crate) async fn update_deployment_impl(
        &self,
        id: &DeploymentId,
        expected_version: u64,
        update: DeploymentUpdate,
    ) -> StoreResult<DeploymentSummary> {
        let mut tx = self.begin_write().await?;
        let result = sqlx::query(
            "UPDATE deployments SET updated_at = ?3, status = COALESCE(?4, status), \
             started_at = COALESCE(?5, started_at), finished_at = COALESCE(?6, finished_at), \
             outputs = COALESCE(?7, outputs), error = COALESCE(?8, error), \
             output_resources = COALESCE(?9, output_resources), extensions = COALESCE(?10, extensions), \
             owner = CASE WHEN owner = ?12 THEN NULL ELSE owner END, \
             owner_expires_at = CASE WHEN owner = ?12 THEN NULL ELSE owner_expires_at END, \
             version = version + 1, format_version = ?11 \
             WHERE id = ?1 AND version = ?2",
        )
        .bind(id.as_str())
        .bind(signed(expected_version))
        .bind(update.updated_at.unix_millis())
        .bind(update.status.map(DeploymentStatus::as_str))
        .bind(update.started_at.map(Timestamp::unix_millis))
        .bind(update.finished_at.map(Timestamp::unix_millis))
        .bind(optional_json_text(update.outputs.as_ref()))
        .bind(optional_json_text(update.error.as_ref()))
        .bind(update.output_resources.as_ref().map(JsonText::as_str))
        .bind(optional_json_text(update.extensions.as_ref()))
        .bind(current_format(E))
        .bind(update.release_claim_of.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        if result.rows_affected() == 0 {
            let found: Option<i64> =
                sqlx::query_scalar("SELECT version FROM deployments WHERE id = ?1")
                    .bind(id.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(backend)?;
            return Err(match found {
                None => StoreError::not_found(E, id.as_str()),
                Some(found) => StoreError::conflict(
                    E,
                    id.as_str(),
                    format!("expected version {expected_version}, found version {found}"),
                ),
            });
        }
        let record = sqlx::query(select_summaries!("WHERE d.id = ?1"))
            .bind(id.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(backend)
            .and_then(|row| decode(&row, E, codec::deployment_summary))?;
        tx.commit().await.map_err(backend)?;
        Ok(record)
    }

    pub(crate) async fn list_deployments_impl(
        &self,
        scope: &str,
        filter: DeploymentFilter,
    ) -> StoreResult<Page<DeploymentRecord>> {
        let page_size = filter.page.page_size();
        let rows = sqlx::query(select_deployments!(
            "WHERE d.scope_key = ?1 AND (?2 IS NULL OR d.status = ?2) AND (?3 IS NULL OR d.parent_id = ?3) \
             AND d.name_key > ?4 ORDER BY d.name_key LIMIT ?5"
        ))
        .bind(fold_case(scope))
        .bind(filter.status.map(DeploymentStatus::as_str))
        .bind(filter.parent.as_ref().map(DeploymentId::as_str))
        .bind(filter.page.continuation.as_deref().unwrap_or(""))
        .bind(fetch_limit(page_size))
        .fetch_all(&self.reader)
        .await
        .map_err(backend)?;
        let mut items = rows
            .iter()
            .map(record_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let continuation = paginate(&mut items, page_size, |d| d.key.folded().1);
        Ok(Page {
            items,
            continuation,
        })
    }

    pub(crate) async fn delete_deployment_impl(
        &self,
        key: &DeploymentKey,
        precondition: Precondition,
    ) -> StoreResult<()> {
        let (scope_key, name_key) = key.folded();
        let mut tx = self.begin_write().await?;
        let existing: Option<(String, i64)> = sqlx::query_as(
            "SELECT id, version FROM deployments WHERE scope_key = ?1 AND name_key = ?2",
        )
        .bind(&scope_key)
        .bind(&name_key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        let Some((id, version)) = existing else {
            return Err(StoreError::not_found(E, key.to_string()));
        };
        check_precondition(E, &key.to_string(), precondition, Some(version))?;
        delete_run(&mut tx, &id).await?;
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn claim_deployment_impl(
        &self,
        id: &DeploymentId,
        owner: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<DeploymentRecord> {
        let mut tx = self.begin_write().await?;
        let result = sqlx::query(
            "UPDATE deployments SET owner = ?2, owner_expires_at = ?3, \
             version = version + CASE WHEN owner IS NOT NULL AND owner <> ?2 THEN 1 ELSE 0 END \
             WHERE id = ?1 AND status IN ('Accepted', 'Running') \
             AND (owner IS NULL OR owner = ?2 OR owner_expires_at <= ?4)",
        )
        .bind(id.as_str())
        .bind(owner)
        .bind(expires_at.unix_millis())
        .bind(now.unix_millis())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        if result.rows_affected() == 0 {
            let holder: Option<Option<String>> =
                sqlx::query_scalar("SELECT owner FROM deployments WHERE id = ?1")
                    .bind(id.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(backend)?;
            return Err(match holder {
                None => StoreError::not_found(E, id.as_str()),
                Some(Some(holder)) => {
                    StoreError::conflict(E, id.as_str(), format!("claimed by '{holder}'"))
                }
                Some(None) => StoreError::conflict(E, id.as_str(), "it has finished"),
            });
        }
        let record = fetch_by_id(&mut tx, id)
            .await?
            .ok_or_else(|| StoreError::not_found(E, id.as_str()))?;
        tx.commit().await.map_err(backend)?;
        Ok(record)
    }

    pub(crate) async fn record_takeover_impl(
        &self,
        id: &DeploymentId,
        progress: u64,
    ) -> StoreResult<u32> {
        let progress = i64::try_from(progress).unwrap_or(i64::MAX);
        let mut tx = self.begin_write().await?;
        let takeovers: Option<i64> = sqlx::query_scalar(
            "UPDATE deployments SET \
               takeovers = CASE WHEN takeovers > 0 AND ?2 <= takeover_progress THEN takeovers + 1 ELSE 1 END, \
               takeover_progress = MAX(takeover_progress, ?2) \
             WHERE id = ?1 RETURNING takeovers",
        )
        .bind(id.as_str())
        .bind(progress)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend)?;
        let takeovers = takeovers.ok_or_else(|| StoreError::not_found(E, id.as_str()))?;
        tx.commit().await.map_err(backend)?;
        Ok(u32::try_from(takeovers).unwrap_or(u32::MAX))
    }

    pub(crate) async fn release_deployment_impl(
        &self,
        id: &DeploymentId,
        owner: &str,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let holder: Option<Option<String>> =
            sqlx::query_scalar("SELECT owner FROM deployments WHERE id = ?1")
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
        match holder {
            None => return Err(StoreError::not_found(E, id.as_str())),
            Some(None) => return Ok(()),
            Some(Some(holder)) if holder != owner => {
                return Err(StoreError::conflict(
                    E,
                    id.as_str(),
                    format!("claimed by '{holder}'"),
                ));
            }
            Some(Some(_)) => {}
        }
        sqlx::query("UPDATE deployments SET owner = NULL, owner_expires_at = NULL WHERE id = ?1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn request_deployment_cancel_impl(
        &self,
        id: &DeploymentId,
    ) -> StoreResult<DeploymentRecord> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE deployments SET cancel_requested = 1 \
             WHERE id = ?1 AND status IN ('Accepted', 'Running')",
        )
        .bind(id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        let record = fetch_by_id(&mut tx, id)
            .await?
            .ok_or_else(|| StoreError::not_found(E, id.as_str()))?;
        tx.commit().await.map_err(backend)?;
        Ok(record)
    }

    pub(crate) async fn list_orphaned_deployments_impl(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<DeploymentRecord>> {
        let rows = sqlx::query(select_deployments!(
            "WHERE d.status IN ('Accepted', 'Running') AND (d.owner IS NULL OR d.owner_expires_at <= ?1) \
             ORDER BY d.created_at, d.id LIMIT ?2"
        ))
        .bind(now.unix_millis())
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(backend)?;
        rows.iter().map(record_from_row).collect()
    }
}

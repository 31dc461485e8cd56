//! The deployment operation journal: one appended row per step, numbered per run under the run's journal lock, read
//! back as the latest step of each operation or as raw rows.

use cairn_store::codec::{self, current_format, extension_text, optional_json_text, signed};
use cairn_store::{
    DeploymentId, Entity, InventoryChange, OperationRecord, OperationStep, StoreError, StoreResult,
};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use crate::PostgresStore;
use crate::inventory::apply_changes;
use crate::rows::{LockSpace, backend, decode, lock_key, write_error};

const E: Entity = Entity::DeploymentOperation;

macro_rules! select_operations {
    ($tail:literal) => {
        concat!(
            "SELECT o.deployment_id, o.seq, o.operation_id, o.provisioning_operation, o.provisioning_state, ",
            "o.status_code, o.status_message, o.target_resource, o.service_request_id, o.timestamp, o.duration_ms, ",
            "o.extension, o.request_content, o.response_content, o.format_version FROM deployment_operations o ",
            $tail
        )
    };
}

fn record_from_row(row: &PgRow) -> StoreResult<OperationRecord> {
    decode(row, E, codec::operation)
}

/// Appends one journal row and returns its sequence number (the run's highest plus one). The run's journal lock
/// makes concurrent appends to one run (from any process) number their rows one after the other. A `writer` must
/// hold the run's claim (see `OperationJournal`): its row is share-locked until the commit, so a takeover (an
/// `UPDATE` of that row) commits either before the check, refusing the write, or after the write.
async fn insert_step(
    conn: &mut PgConnection,
    step: &OperationStep,
    writer: Option<&str>,
) -> StoreResult<u64> {
    lock_key(conn, LockSpace::Journal, step.deployment_id.as_str()).await?;
    if let Some(writer) = writer {
        let holder: Option<Option<String>> =
            sqlx::query_scalar("SELECT owner FROM deployments WHERE id = $1 FOR SHARE")
                .bind(step.deployment_id.as_str())
                .fetch_optional(&mut *conn)
                .await
                .map_err(backend)?;
        codec::check_journal_writer(&step.deployment_id, writer, holder)?;
    }
    let sequence: i64 = sqlx::query_scalar(
        "INSERT INTO deployment_operations (deployment_id, seq, operation_id, provisioning_operation, \
         provisioning_state, status_code, status_message, target_resource, service_request_id, timestamp, \
         duration_ms, extension, request_content, response_content, format_version) \
         VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM deployment_operations WHERE deployment_id = $1), \
         $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING seq",
    )
    .bind(step.deployment_id.as_str())
    .bind(&step.operation_id)
    .bind(&step.provisioning_operation)
    .bind(&step.provisioning_state)
    .bind(step.status_code.as_deref())
    .bind(optional_json_text(step.status_message.as_ref()))
    .bind(optional_json_text(step.target_resource.as_ref()))
    .bind(step.service_request_id.as_deref())
    .bind(step.timestamp.unix_millis())
    .bind(step.duration_ms)
    .bind(extension_text(E, step.extension.as_ref())?)
    .bind(optional_json_text(step.request_content.as_ref()))
    .bind(optional_json_text(step.response_content.as_ref()))
    .bind(current_format(E))
    .fetch_one(conn)
    .await
    .map_err(|e| match write_error(E, step.deployment_id.as_str(), e) {
        StoreError::NotFound { .. } => {
            StoreError::not_found(Entity::Deployment, step.deployment_id.as_str())
        }
        other => other,
    })?;
    u64::try_from(sequence).map_err(|_| StoreError::corrupt(E, "negative sequence number"))
}

impl PostgresStore {
    pub(crate) async fn append_operation_impl(
        &self,
        step: OperationStep,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        let mut tx = self.begin().await?;
        let sequence = insert_step(&mut tx, &step, writer).await?;
        tx.commit().await.map_err(backend)?;
        Ok(OperationRecord { sequence, step })
    }

    pub(crate) async fn record_step_impl(
        &self,
        step: OperationStep,
        change: InventoryChange,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        let mut tx = self.begin().await?;
        let sequence = insert_step(&mut tx, &step, writer).await?;
        apply_changes(&mut tx, std::slice::from_ref(&change)).await?;
        tx.commit().await.map_err(backend)?;
        Ok(OperationRecord { sequence, step })
    }

    /// Concurrent transactions share PostgreSQL's WAL flushes already: a step written behind commits at once.
    pub(crate) async fn append_operation_behind_impl(
        &self,
        step: OperationStep,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        self.append_operation_impl(step, writer).await
    }

    pub(crate) async fn record_step_behind_impl(
        &self,
        step: OperationStep,
        change: InventoryChange,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        self.record_step_impl(step, change, writer).await
    }

    pub(crate) async fn latest_operations_impl(
        &self,
        deployment: &DeploymentId,
    ) -> StoreResult<Vec<OperationRecord>> {
        let rows = sqlx::query(select_operations!(
            "JOIN (SELECT operation_id, MAX(seq) AS last_seq, MIN(seq) AS first_seq FROM deployment_operations \
             WHERE deployment_id = $1 GROUP BY operation_id) latest ON o.seq = latest.last_seq \
             WHERE o.deployment_id = $1 ORDER BY latest.first_seq"
        ))
        .bind(deployment.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        rows.iter().map(record_from_row).collect()
    }

    pub(crate) async fn get_operation_impl(
        &self,
        deployment: &DeploymentId,
        operation_id: &str,
    ) -> StoreResult<Option<OperationRecord>> {
        sqlx::query(select_operations!(
            "WHERE o.deployment_id = $1 AND o.operation_id = $2 ORDER BY o.seq DESC LIMIT 1"
        ))
        .bind(deployment.as_str())
        .bind(operation_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?
        .as_ref()
        .map(record_from_row)
        .transpose()
    }

    pub(crate) async fn operation_journal_impl(
        &self,
        deployment: &DeploymentId,
        after_sequence: u64,
        limit: u32,
    ) -> StoreResult<Vec<OperationRecord>> {
        let rows = sqlx::query(select_operations!(
            "WHERE o.deployment_id = $1 AND o.seq > $2 ORDER BY o.seq LIMIT $3"
        ))
        .bind(deployment.as_str())
        .bind(signed(after_sequence))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        rows.iter().map(record_from_row).collect()
    }
}

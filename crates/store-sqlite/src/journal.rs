//! The deployment operation journal: one appended row per step, numbered per run, read back as the latest step
//! of each operation or as raw rows.

use std::collections::HashMap;

use cairn_store::InventoryChange;
use cairn_store::codec::{self, Row, current_format, extension_text, optional_json_text, signed};
use cairn_store::{DeploymentId, Entity, OperationRecord, OperationStep, StoreError, StoreResult};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use sqlx::sqlite::SqliteRow;

use crate::SqliteStore;
use crate::direct_reads::{ColumnNames, DirectColumns, query_all};
use crate::group_commit::{Grouped, GroupedWrite, Pace};
use crate::rows::{backend, decode, direct_backend, direct_write_error};

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

fn record_from_row(row: &SqliteRow) -> StoreResult<OperationRecord> {
    decode(row, E, codec::operation)
}

/// The latest step of each operation of `deployment`, in the order the operations started: the run's rows read
/// newest first along the primary key, each operation's first row seen (its latest) decoded and the ones after it
/// only counted for where the operation started. The same answer as the `GROUP BY` query the `sqlx` path runs,
/// without its two temporary B-trees or decoding a step that a later one replaced.
fn latest_newest_first(conn: &Connection, deployment: &str) -> StoreResult<Vec<OperationRecord>> {
    const NEWEST_FIRST: &str = select_operations!("WHERE o.deployment_id = ?1 ORDER BY o.seq DESC");
    let mut statement = conn.prepare_cached(NEWEST_FIRST).map_err(direct_backend)?;
    let names = ColumnNames::of(&statement);
    let mut rows = statement.query([deployment]).map_err(direct_backend)?;
    // Per operation: the sequence number of its first step, and its latest step.
    let mut latest: Vec<(i64, OperationRecord)> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    while let Some(row) = rows.next().map_err(direct_backend)? {
        let seq: i64 = row.get("seq").map_err(direct_backend)?;
        let operation = row.get_ref("operation_id").map_err(direct_backend)?;
        let operation = operation
            .as_str()
            .map_err(|e| StoreError::Backend(format!("operation_id: {e}")))?;
        match seen.get(operation) {
            Some(&index) => latest[index].0 = seq,
            None => {
                seen.insert(operation.to_owned(), latest.len());
                let record = codec::operation(&Row::new(&DirectColumns::new(row, &names), E))?;
                latest.push((seq, record));
            }
        }
    }
    latest.sort_unstable_by_key(|(first, _)| *first);
    Ok(latest.into_iter().map(|(_, record)| record).collect())
}

/// The claim on a run, read inside a journal write's transaction (see [`check_writer`]).
pub(crate) const RUN_OWNER: &str = "SELECT owner FROM deployments WHERE id = ?1";

/// The sequence number a run's next journal row takes: its highest plus one.
pub(crate) const NEXT_SEQUENCE: &str =
    "SELECT COALESCE(MAX(seq), 0) + 1 FROM deployment_operations WHERE deployment_id = ?1";

/// Appends one journal row: parameters from [`step_values`], then its sequence number (from [`NEXT_SEQUENCE`], read
/// in the same transaction). No `RETURNING`: SQLite buffers a returned row in a temporary table of its own, which cost
/// more than the insert.
pub(crate) const INSERT_STEP: &str = "INSERT INTO deployment_operations (deployment_id, seq, operation_id, \
     provisioning_operation, provisioning_state, status_code, status_message, target_resource, service_request_id, \
     timestamp, duration_ms, extension, request_content, response_content, format_version) \
     VALUES (?1, ?15, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";

/// The parameters of [`INSERT_STEP`].
pub(crate) fn step_values(step: &OperationStep) -> StoreResult<[Value; 14]> {
    let text = |value: Option<String>| value.map_or(Value::Null, Value::Text);
    Ok([
        Value::Text(step.deployment_id.as_str().to_owned()),
        Value::Text(step.operation_id.clone()),
        Value::Text(step.provisioning_operation.clone()),
        Value::Text(step.provisioning_state.clone()),
        text(step.status_code.clone()),
        text(optional_json_text(step.status_message.as_ref())),
        text(optional_json_text(step.target_resource.as_ref())),
        text(step.service_request_id.clone()),
        Value::Integer(step.timestamp.unix_millis()),
        step.duration_ms.map_or(Value::Null, Value::Integer),
        text(extension_text(E, step.extension.as_ref())?),
        text(optional_json_text(step.request_content.as_ref())),
        text(optional_json_text(step.response_content.as_ref())),
        Value::Integer(current_format(E)),
    ])
}

/// Refuses a journal write of `writer` unless the run is claimed by it (see `OperationJournal`): `Conflict` when it
/// is claimed by another or by nobody, `NotFound` when the run is gone. Runs inside the write's transaction, so a
/// takeover commits either before the check (the write is refused) or after the write.
pub(crate) fn check_writer(
    conn: &Connection,
    deployment: &DeploymentId,
    writer: Option<&str>,
) -> StoreResult<()> {
    let Some(writer) = writer else {
        return Ok(());
    };
    let holder: Option<Option<String>> = conn
        .prepare_cached(RUN_OWNER)
        .and_then(|mut owner| {
            owner
                .query_row([deployment.as_str()], |row| row.get(0))
                .optional()
        })
        .map_err(direct_backend)?;
    codec::check_journal_writer(deployment, writer, holder)
}

/// The sequence number `deployment`'s next journal row takes, read in the write's transaction.
pub(crate) fn next_sequence(conn: &Connection, deployment: &DeploymentId) -> StoreResult<i64> {
    conn.prepare_cached(NEXT_SEQUENCE)
        .and_then(|mut next| next.query_row([deployment.as_str()], |row| row.get(0)))
        .map_err(direct_backend)
}

/// Appends `step` as its run's row `sequence` (see [`next_sequence`]).
pub(crate) fn insert_step(
    conn: &Connection,
    step: &OperationStep,
    sequence: i64,
) -> StoreResult<u64> {
    let values = step_values(step)?;
    conn.prepare_cached(INSERT_STEP)
        .and_then(|mut insert| {
            insert.execute(params_from_iter(
                values.into_iter().chain([Value::Integer(sequence)]),
            ))
        })
        .map_err(
            |e| match direct_write_error(E, step.deployment_id.as_str(), e) {
                StoreError::NotFound { .. } => {
                    StoreError::not_found(Entity::Deployment, step.deployment_id.as_str())
                }
                other => other,
            },
        )?;
    u64::try_from(sequence).map_err(|_| StoreError::corrupt(E, "negative sequence number"))
}

impl SqliteStore {
    pub(crate) async fn append_operation_impl(
        &self,
        step: OperationStep,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        let write = GroupedWrite::AppendStep(step, writer.map(str::to_owned));
        self.grouped_step(write, Pace::Lead).await
    }

    pub(crate) async fn record_step_impl(
        &self,
        step: OperationStep,
        change: InventoryChange,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        let write = GroupedWrite::RecordStep(step, change, writer.map(str::to_owned));
        self.grouped_step(write, Pace::Lead).await
    }

    pub(crate) async fn append_operation_behind_impl(
        &self,
        step: OperationStep,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        let write = GroupedWrite::AppendStep(step, writer.map(str::to_owned));
        self.grouped_step(write, Pace::Ride).await
    }

    pub(crate) async fn record_step_behind_impl(
        &self,
        step: OperationStep,
        change: InventoryChange,
        writer: Option<&str>,
    ) -> StoreResult<OperationRecord> {
        let write = GroupedWrite::RecordStep(step, change, writer.map(str::to_owned));
        self.grouped_step(write, Pace::Ride).await
    }

    async fn grouped_step(&self, write: GroupedWrite, pace: Pace) -> StoreResult<OperationRecord> {
        match self.group.write(&self.writer, write, pace).await? {
            Grouped::Step(record) => {
                crate::failpoint::step_committed(&record.step);
                Ok(*record)
            }
            Grouped::Resource(_) => Err(StoreError::corrupt(
                E,
                "a journal write answered with a resource",
            )),
        }
    }

    pub(crate) async fn latest_operations_impl(
        &self,
        deployment: &DeploymentId,
    ) -> StoreResult<Vec<OperationRecord>> {
        const LATEST: &str = select_operations!(
            "JOIN (SELECT operation_id, MAX(seq) AS last_seq, MIN(seq) AS first_seq FROM deployment_operations \
             WHERE deployment_id = ?1 GROUP BY operation_id) latest ON o.seq = latest.last_seq \
             WHERE o.deployment_id = ?1 ORDER BY latest.first_seq"
        );
        if let Some(direct) = &self.direct {
            let deployment = deployment.as_str().to_owned();
            return direct
                .read(move |conn| latest_newest_first(conn, &deployment))
                .await;
        }
        let rows = sqlx::query(LATEST)
            .bind(deployment.as_str())
            .fetch_all(&self.reader)
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
            "WHERE o.deployment_id = ?1 AND o.operation_id = ?2 ORDER BY o.seq DESC LIMIT 1"
        ))
        .bind(deployment.as_str())
        .bind(operation_id)
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)?
        .as_ref()
        .map(record_from_row)
        .transpose()
    }

    #[expect(
        clippy::redundant_closure,
        reason = "the closure takes rows of any lifetime; the generic decoder named alone is fixed to one"
    )]
    pub(crate) async fn operation_journal_impl(
        &self,
        deployment: &DeploymentId,
        after_sequence: u64,
        limit: u32,
    ) -> StoreResult<Vec<OperationRecord>> {
        const JOURNAL: &str =
            select_operations!("WHERE o.deployment_id = ?1 AND o.seq > ?2 ORDER BY o.seq LIMIT ?3");
        if let Some(direct) = &self.direct {
            let deployment = deployment.as_str().to_owned();
            let params = (deployment, signed(after_sequence), i64::from(limit));
            return direct
                .read(move |conn| query_all(conn, JOURNAL, params, E, |row| codec::operation(row)))
                .await;
        }
        let rows = sqlx::query(JOURNAL)
            .bind(deployment.as_str())
            .bind(signed(after_sequence))
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await
            .map_err(backend)?;
        rows.iter().map(record_from_row).collect()
    }
}

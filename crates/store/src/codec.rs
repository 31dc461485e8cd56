//! What the SQL backends share between records and rows: each record read from a row through [`Columns`] (which a
//! backend implements for its row type), the text forms of JSON and tags, preconditions and pagination. Both
//! backends store the same columns in the same forms, so a row reads the same whichever backend wrote it — which
//! is also what lets `transfer` copy rows between them.

use serde_json::Value;

use crate::crypto::DataKey;
use crate::error::{Entity, StoreError, StoreResult};
use crate::format;
use crate::keys::{DeploymentId, DeploymentKey, ResourceKey};
use crate::records::{
    DeploymentOwner, DeploymentRecord, DeploymentStatus, DeploymentSummary, ExtensionRef,
    HostOperationRecord, JsonText, Lease, ManagedResource, ManagedResourceRecord, OperationRecord,
    OperationResultRecord, OperationResultState, OperationStep, Precondition, ResourceGroup,
    ResourceGroupRecord, SecretVersionInfo, StackRecord, StackWhatIfRecord, Tags, Vault,
    VaultRecord, VaultSecret,
};
use crate::sealed::{HOST_OPERATION_STATE, VAULT_SECRET_VALUE};
use crate::time::Timestamp;

/// The columns of one result row by name, as a backend decodes them: `Ok(None)` for NULL, `Err` with the backend's
/// message when the column is missing or of another type.
pub trait Columns {
    fn text(&self, column: &str) -> Result<Option<String>, String>;
    fn integer(&self, column: &str) -> Result<Option<i64>, String>;
    fn boolean(&self, column: &str) -> Result<Option<bool>, String>;
    fn bytes(&self, column: &str) -> Result<Option<Vec<u8>>, String>;
}

/// A row of `entity`'s table: typed reads whose failures are [`StoreError::Corrupt`] naming the column.
pub struct Row<'r, C: ?Sized> {
    columns: &'r C,
    entity: Entity,
}

impl<'r, C: Columns + ?Sized> Row<'r, C> {
    pub fn new(columns: &'r C, entity: Entity) -> Self {
        Row { columns, entity }
    }

    pub fn entity(&self) -> Entity {
        self.entity
    }

    fn corrupt(&self, column: &str, detail: impl std::fmt::Display) -> StoreError {
        StoreError::corrupt(self.entity, format!("column {column}: {detail}"))
    }

    fn required<T>(&self, column: &str, value: Option<T>) -> StoreResult<T> {
        value.ok_or_else(|| self.corrupt(column, "unexpected NULL"))
    }

    pub fn optional_text(&self, column: &str) -> StoreResult<Option<String>> {
        self.columns
            .text(column)
            .map_err(|e| self.corrupt(column, e))
    }

    pub fn text(&self, column: &str) -> StoreResult<String> {
        let value = self.optional_text(column)?;
        self.required(column, value)
    }

    pub fn optional_integer(&self, column: &str) -> StoreResult<Option<i64>> {
        self.columns
            .integer(column)
            .map_err(|e| self.corrupt(column, e))
    }

    pub fn integer(&self, column: &str) -> StoreResult<i64> {
        let value = self.optional_integer(column)?;
        self.required(column, value)
    }

    pub fn optional_boolean(&self, column: &str) -> StoreResult<Option<bool>> {
        self.columns
            .boolean(column)
            .map_err(|e| self.corrupt(column, e))
    }

    pub fn boolean(&self, column: &str) -> StoreResult<bool> {
        let value = self.optional_boolean(column)?;
        self.required(column, value)
    }

    pub fn optional_bytes(&self, column: &str) -> StoreResult<Option<Vec<u8>>> {
        self.columns
            .bytes(column)
            .map_err(|e| self.corrupt(column, e))
    }

    pub fn bytes(&self, column: &str) -> StoreResult<Vec<u8>> {
        let value = self.optional_bytes(column)?;
        self.required(column, value)
    }

    /// A version or count: never negative.
    pub fn unsigned(&self, column: &str) -> StoreResult<u64> {
        u64::try_from(self.integer(column)?).map_err(|_| self.corrupt(column, "negative"))
    }

    pub fn timestamp(&self, column: &str) -> StoreResult<Timestamp> {
        self.integer(column).map(Timestamp::from_unix_millis)
    }

    pub fn optional_timestamp(&self, column: &str) -> StoreResult<Option<Timestamp>> {
        Ok(self
            .optional_integer(column)?
            .map(Timestamp::from_unix_millis))
    }

    pub fn json(&self, column: &str) -> StoreResult<Value> {
        let text = self.text(column)?;
        self.parse_json(column, &text)
    }

    pub fn optional_json(&self, column: &str) -> StoreResult<Option<Value>> {
        self.optional_text(column)?
            .map(|text| self.parse_json(column, &text))
            .transpose()
    }

    fn parse_json(&self, column: &str, text: &str) -> StoreResult<Value> {
        serde_json::from_str(text).map_err(|e| self.corrupt(column, format!("not JSON: {e}")))
    }

    pub fn tags(&self, column: &str) -> StoreResult<Tags> {
        let text = self.text(column)?;
        serde_json::from_str(&text).map_err(|e| self.corrupt(column, e))
    }

    pub fn extension(&self, column: &str) -> StoreResult<Option<ExtensionRef>> {
        self.optional_json(column)?
            .map(serde_json::from_value::<ExtensionRef>)
            .transpose()
            .map_err(|e| self.corrupt(column, e))
    }

    /// Checks a format-version column: this build's format and older ones read, newer ones are refused.
    pub fn format(&self, column: &str) -> StoreResult<u32> {
        format::accept_format(self.entity, self.integer(column)?)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Records from rows. Each reads the columns its table shares across backends, by name.

pub fn resource_group<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<ResourceGroupRecord> {
    row.format("format_version")?;
    Ok(ResourceGroupRecord {
        group: ResourceGroup {
            subscription_id: row.text("subscription_id")?,
            name: row.text("name")?,
            location: row.text("location")?,
            tags: row.tags("tags")?,
            managed_by: row.optional_text("managed_by")?,
            provisioning_state: row.text("provisioning_state")?,
        },
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        version: row.unsigned("version")?,
    })
}

/// A deployment run joined with its request (`request`, `request_format_version`).
pub fn deployment<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<DeploymentRecord> {
    row.format("format_version")?;
    row.format("request_format_version")?;
    let status = row
        .text("status")?
        .parse::<DeploymentStatus>()
        .map_err(|e| StoreError::corrupt(row.entity(), e.to_string()))?;
    let owner = match (
        row.optional_text("owner")?,
        row.optional_timestamp("owner_expires_at")?,
    ) {
        (Some(owner), Some(expires_at)) => Some(DeploymentOwner { owner, expires_at }),
        (None, _) => None,
        (Some(_), None) => {
            return Err(StoreError::corrupt(
                row.entity(),
                "an owner without an expiry",
            ));
        }
    };
    Ok(DeploymentRecord {
        id: DeploymentId::from_string(row.text("id")?),
        key: DeploymentKey::new(row.text("scope")?, row.text("name")?),
        parent: row
            .optional_text("parent_id")?
            .map(DeploymentId::from_string),
        location: row.optional_text("location")?,
        tags: row.tags("tags")?,
        request: row.json("request")?,
        status,
        correlation_id: row.text("correlation_id")?,
        stack_initiated: row.boolean("stack_initiated")?,
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        started_at: row.optional_timestamp("started_at")?,
        finished_at: row.optional_timestamp("finished_at")?,
        outputs: row.optional_json("outputs")?,
        error: row.optional_json("error")?,
        output_resources: row.optional_json("output_resources")?,
        extensions: row.optional_json("extensions")?,
        owner,
        cancel_requested: row.boolean("cancel_requested")?,
        version: row.unsigned("version")?,
    })
}

/// The columns of a deployment run a [`DeploymentSummary`] reads (no request, outputs or output resources).
pub fn deployment_summary<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<DeploymentSummary> {
    row.format("format_version")?;
    Ok(DeploymentSummary {
        id: DeploymentId::from_string(row.text("id")?),
        key: DeploymentKey::new(row.text("scope")?, row.text("name")?),
        parent: row
            .optional_text("parent_id")?
            .map(DeploymentId::from_string),
        status: row
            .text("status")?
            .parse::<DeploymentStatus>()
            .map_err(|e| StoreError::corrupt(row.entity(), e.to_string()))?,
        error: row.optional_json("error")?,
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        started_at: row.optional_timestamp("started_at")?,
        finished_at: row.optional_timestamp("finished_at")?,
        cancel_requested: row.boolean("cancel_requested")?,
        version: row.unsigned("version")?,
    })
}

pub fn operation<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<OperationRecord> {
    row.format("format_version")?;
    Ok(OperationRecord {
        sequence: row.unsigned("seq")?,
        step: OperationStep {
            deployment_id: DeploymentId::from_string(row.text("deployment_id")?),
            operation_id: row.text("operation_id")?,
            target_resource: row.optional_json("target_resource")?,
            provisioning_operation: row.text("provisioning_operation")?,
            provisioning_state: row.text("provisioning_state")?,
            status_code: row.optional_text("status_code")?,
            status_message: row.optional_json("status_message")?,
            service_request_id: row.optional_text("service_request_id")?,
            timestamp: row.timestamp("timestamp")?,
            duration_ms: row.optional_integer("duration_ms")?,
            extension: row.extension("extension")?,
            request_content: row.optional_json("request_content")?,
            response_content: row.optional_json("response_content")?,
        },
    })
}

pub fn managed_resource<C: Columns + ?Sized>(
    row: &Row<'_, C>,
) -> StoreResult<ManagedResourceRecord> {
    row.format("format_version")?;
    let deployment = match (
        row.optional_text("deployment_scope")?,
        row.optional_text("deployment_name")?,
    ) {
        (Some(scope), Some(name)) => Some(DeploymentKey::new(scope, name)),
        _ => None,
    };
    Ok(ManagedResourceRecord {
        resource: ManagedResource {
            key: ResourceKey::from_stored(row.text("key")?),
            resource_id: row.optional_text("resource_id")?,
            resource_type: row.text("resource_type")?,
            api_version: row.optional_text("api_version")?,
            properties: row.json("properties")?,
            applied: row.optional_json("applied")?,
            deployment,
            extension: row.extension("extension")?,
            updated_at: row.timestamp("updated_at")?,
        },
        created_at: row.timestamp("created_at")?,
        version: row.unsigned("version")?,
        detached: row.boolean("detached")?,
    })
}

pub fn vault<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<VaultRecord> {
    row.format("format_version")?;
    Ok(VaultRecord {
        vault: Vault {
            id: row.text("id")?,
            name: row.text("name")?,
            location: row.text("location")?,
            tags: row.tags("tags")?,
            properties: row.json("properties")?,
        },
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        version: row.unsigned("version")?,
    })
}

/// A secret version's attributes, joined with its vault's ID (`vault_id`).
pub fn secret_version_info<C: Columns + ?Sized>(
    row: &Row<'_, C>,
) -> StoreResult<SecretVersionInfo> {
    row.format("format_version")?;
    Ok(SecretVersionInfo {
        vault_id: row.text("vault_id")?,
        name: row.text("name")?,
        version: row.text("version")?,
        content_type: row.optional_text("content_type")?,
        enabled: row.boolean("enabled")?,
        not_before: row.optional_timestamp("not_before")?,
        expires: row.optional_timestamp("expires")?,
        tags: row.tags("tags")?,
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
    })
}

/// A secret version with its value opened (the row also holds `vault_key`, `name_key` and `value`).
pub fn vault_secret<C: Columns + ?Sized>(
    row: &Row<'_, C>,
    data_key: &DataKey,
) -> StoreResult<VaultSecret> {
    let info = secret_version_info(row)?;
    let vault_key = row.text("vault_key")?;
    let name_key = row.text("name_key")?;
    let value = VAULT_SECRET_VALUE.open(
        data_key,
        &[&vault_key, &name_key, &info.version],
        &row.bytes("value")?,
    )?;
    Ok(VaultSecret { info, value })
}

/// A lease row; `None` when it is released (no owner).
pub fn lease<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<Option<Lease>> {
    let Some(owner) = row.optional_text("owner")? else {
        return Ok(None);
    };
    Ok(Some(Lease {
        name: row.text("name")?,
        owner,
        generation: row.unsigned("generation")?,
        acquired_at: row.timestamp("acquired_at")?,
        heartbeat_at: row.timestamp("heartbeat_at")?,
        expires_at: row.timestamp("expires_at")?,
    }))
}

pub fn stack<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<StackRecord> {
    row.format("format_version")?;
    Ok(StackRecord {
        scope: row.text("scope")?,
        name: row.text("name")?,
        stack: JsonText::from_stored(row.text("stack")?),
        managed_set: JsonText::from_stored(row.text("managed_set")?),
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        version: row.unsigned("version")?,
    })
}

/// The `stack` column of a stack row as text (with its `format_version`), without the managed set.
pub fn stack_resource<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<String> {
    row.format("format_version")?;
    row.text("stack")
}

pub fn stack_what_if<C: Columns + ?Sized>(row: &Row<'_, C>) -> StoreResult<StackWhatIfRecord> {
    row.format("format_version")?;
    Ok(StackWhatIfRecord {
        scope: row.text("scope")?,
        name: row.text("name")?,
        result: row.json("result")?,
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        expires_at: row.timestamp("expires_at")?,
    })
}

/// A host operation with its state opened.
pub fn host_operation<C: Columns + ?Sized>(
    row: &Row<'_, C>,
    data_key: &DataKey,
) -> StoreResult<HostOperationRecord> {
    row.format("format_version")?;
    let id = row.text("id")?;
    let state = HOST_OPERATION_STATE.open(data_key, &[&id], &row.bytes("state")?)?;
    Ok(HostOperationRecord {
        extension_name: row.text("extension_name")?,
        extension_version: row.text("extension_version")?,
        state,
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        expires_at: row.timestamp("expires_at")?,
        id,
    })
}

/// An operation result: `status` NULL while running (then `owner` and `owner_expires_at` say who runs it).
pub fn operation_result<C: Columns + ?Sized>(
    row: &Row<'_, C>,
) -> StoreResult<OperationResultRecord> {
    row.format("format_version")?;
    let state = match row.optional_integer("status")? {
        Some(status) => OperationResultState::Done {
            status: u16::try_from(status)
                .map_err(|_| StoreError::corrupt(row.entity(), "column status: out of range"))?,
            body: row.optional_json("body")?,
        },
        None => OperationResultState::Running {
            owner: row.text("owner")?,
            owner_expires_at: row.timestamp("owner_expires_at")?,
        },
    };
    Ok(OperationResultRecord {
        id: row.text("id")?,
        subscription: row.text("subscription_key")?,
        state,
        created_at: row.timestamp("created_at")?,
        updated_at: row.timestamp("updated_at")?,
        expires_at: row.timestamp("expires_at")?,
    })
}

/// The columns `status`, `body`, `owner`, `owner_expires_at` of an operation result's state.
pub fn operation_result_columns(
    state: &OperationResultState,
) -> (Option<i64>, Option<String>, Option<&str>, Option<i64>) {
    match state {
        OperationResultState::Running {
            owner,
            owner_expires_at,
        } => (
            None,
            None,
            Some(owner.as_str()),
            Some(owner_expires_at.unix_millis()),
        ),
        OperationResultState::Done { status, body } => (
            Some(i64::from(*status)),
            optional_json_text(body.as_ref()),
            None,
            None,
        ),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Column values from records.

pub fn json_text(value: &Value) -> String {
    // Straight into a buffer: `Display` writes through a formatter, a call per token. Writing a `Value` cannot fail
    // (its keys are strings).
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

pub fn optional_json_text(value: Option<&Value>) -> Option<String> {
    value.map(json_text)
}

pub fn tags_text(tags: &Tags) -> String {
    // A map of strings always serialises; the fallback only keeps the signature infallible.
    serde_json::to_string(tags).unwrap_or_else(|_| "{}".to_owned())
}

/// The stored form of an extension reference (its serde form).
pub fn extension_text(
    entity: Entity,
    extension: Option<&ExtensionRef>,
) -> StoreResult<Option<String>> {
    extension
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::corrupt(entity, format!("extension reference: {e}")))
}

/// The format version this build writes for `entity`, as stored.
pub fn current_format(entity: Entity) -> i64 {
    i64::from(format::current_format(entity))
}

/// A `u64` for binding; versions and limits never come near `i64::MAX`, and saturating keeps a wild value from
/// matching anything.
pub fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------------------------------------------
// Preconditions and pages.

/// Whether `writer` may write the journal of run `deployment`, whose claim `holder` names (`None`: the run is
/// gone; `Some(None)`: nobody holds it): only its holder may.
pub fn check_journal_writer(
    deployment: &DeploymentId,
    writer: &str,
    holder: Option<Option<String>>,
) -> StoreResult<()> {
    match holder {
        None => Err(StoreError::not_found(
            Entity::Deployment,
            deployment.as_str(),
        )),
        Some(Some(holder)) if holder == writer => Ok(()),
        Some(holder) => Err(StoreError::conflict(
            Entity::Deployment,
            deployment.as_str(),
            format!(
                "'{writer}' no longer holds its claim (now {})",
                holder.map_or_else(|| "unclaimed".to_owned(), |h| format!("claimed by '{h}'"))
            ),
        )),
    }
}

/// Applies a [`Precondition`] to what a write found: the current row version, if any.
pub fn check_precondition(
    entity: Entity,
    key: &str,
    precondition: Precondition,
    found_version: Option<i64>,
) -> StoreResult<()> {
    match (precondition, found_version) {
        (Precondition::Any, _) | (Precondition::MustNotExist, None) => Ok(()),
        (Precondition::MustNotExist, Some(_)) => {
            Err(StoreError::conflict(entity, key, "it already exists"))
        }
        (Precondition::Version(_), None) => Err(StoreError::not_found(entity, key)),
        (Precondition::Version(expected), Some(found)) if signed(expected) == found => Ok(()),
        (Precondition::Version(expected), Some(found)) => Err(StoreError::conflict(
            entity,
            key,
            format!("expected version {expected}, found version {found}"),
        )),
    }
}

/// The page size plus one: fetching one extra row tells whether another page follows.
pub fn fetch_limit(page_size: u32) -> i64 {
    i64::from(page_size) + 1
}

/// Trims the extra row fetched by [`fetch_limit`] and returns the continuation token (the last item's key) when
/// there was one.
pub fn paginate<T>(
    items: &mut Vec<T>,
    page_size: u32,
    key: impl Fn(&T) -> String,
) -> Option<String> {
    let page_size = usize::try_from(page_size).unwrap_or(usize::MAX);
    if items.len() > page_size {
        items.truncate(page_size);
        items.last().map(key)
    } else {
        None
    }
}

/// The continuation token of a stack: folded scope and name, separated by a character neither can hold.
pub fn stack_page_key(scope_key: &str, name_key: &str) -> String {
    format!("{scope_key}\u{1}{name_key}")
}

/// How a stack is named in errors: its resource ID.
pub fn stack_display_key(scope: &str, name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Resources/deploymentStacks/{name}",
        scope.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn preconditions() {
        let check = |p, found| check_precondition(Entity::Lease, "k", p, found);
        assert!(check(Precondition::Any, None).is_ok());
        assert!(check(Precondition::Any, Some(3)).is_ok());
        assert!(check(Precondition::MustNotExist, None).is_ok());
        assert!(check(Precondition::MustNotExist, Some(1)).is_err_and(|e| e.is_conflict()));
        assert!(check(Precondition::Version(1), None).is_err_and(|e| e.is_not_found()));
        assert!(check(Precondition::Version(1), Some(1)).is_ok());
        assert!(check(Precondition::Version(1), Some(2)).is_err_and(|e| e.is_conflict()));
        assert!(check(Precondition::Version(u64::MAX), Some(-1)).is_err());
    }

    #[test]
    fn pages_keep_the_page_size_and_name_the_last_item() {
        let mut items = vec![1, 2, 3];
        assert_eq!(paginate(&mut items, 2, |i| i.to_string()), Some("2".into()));
        assert_eq!(items, [1, 2]);
        let mut items = vec![1, 2];
        assert_eq!(paginate(&mut items, 2, |i| i.to_string()), None);
        assert_eq!(fetch_limit(2), 3);
    }

    /// A row as a map, for the decoders' own tests.
    struct MapRow(HashMap<&'static str, Option<String>>);

    impl Columns for MapRow {
        fn text(&self, column: &str) -> Result<Option<String>, String> {
            self.0
                .get(column)
                .cloned()
                .ok_or_else(|| format!("no column {column}"))
        }
        fn integer(&self, column: &str) -> Result<Option<i64>, String> {
            self.text(column)?
                .map(|t| t.parse().map_err(|_| "not an integer".to_owned()))
                .transpose()
        }
        fn boolean(&self, column: &str) -> Result<Option<bool>, String> {
            Ok(self.integer(column)?.map(|i| i != 0))
        }
        fn bytes(&self, column: &str) -> Result<Option<Vec<u8>>, String> {
            Ok(self.text(column)?.map(String::into_bytes))
        }
    }

    fn lease_row(owner: Option<&str>, generation: &str) -> MapRow {
        MapRow(HashMap::from([
            ("name", Some("l".to_owned())),
            ("owner", owner.map(str::to_owned)),
            ("generation", Some(generation.to_owned())),
            ("acquired_at", Some("1".to_owned())),
            ("heartbeat_at", Some("2".to_owned())),
            ("expires_at", Some("3".to_owned())),
        ]))
    }

    #[test]
    fn bad_columns_are_corrupt_and_named() {
        let row = lease_row(Some("a"), "-1");
        let error = lease(&Row::new(&row, Entity::Lease)).expect_err("negative generation");
        assert!(
            matches!(
                &error,
                StoreError::Corrupt {
                    entity: Entity::Lease,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("generation"), "{error}");
        let mut row = lease_row(Some("a"), "1");
        row.0.insert("expires_at", None);
        let error = lease(&Row::new(&row, Entity::Lease)).expect_err("NULL expiry");
        assert!(error.to_string().contains("expires_at"), "{error}");
        let released = lease_row(None, "4");
        assert_eq!(lease(&Row::new(&released, Entity::Lease)).unwrap(), None);
    }
}

//! Drift detection (`POST .../deploymentStacks/{name}/detectDrift`, cairn's extension of the stacks API): reads
//! every resource the stack manages live and compares it with what the stack's deployment last applied to it (the
//! inventory's `applied`, recorded by the engine with each write: the declared members as the provider answered
//! them, never a write-only value). Per resource: `inSync`, `modified` (the property changes, `before` as applied,
//! `after` as it is now, read-only and calculated paths of the extension's preview metadata and a provider's
//! write-only ones skipped), `deleted` (the provider or extension answers not found) or `unreachable` (the read
//! failed: its error). ARM resources are read through their provider (GET with the recorded `apiVersion`);
//! extension resources through the host's `get` with the stack's persisted config, its directives resolved now
//! (Key Vault secrets and API references fetched again, as a delete does), and the recorded `configId`.
//!
//! It is a long-running operation: the request answers at once with the result in state `Running`, the reads run
//! in the background (at most `max_drift_reads_in_flight` at once) and publish the resources read so far on the
//! result (at most every `progress_interval`), then the final result. Results are kept like what-if results — in
//! the same store (`StackWhatIfStore`), under the stack's ID as their scope and the operation id as their name,
//! for the request's `retentionInterval` (default `P7D`) — so they survive a restart. One detection per stack at
//! a time: it holds a lease of its own (not the stack's, so a PUT or DELETE is not blocked; a detection reads what
//! the stack managed when it started), renewed while it runs; a result left `Running` by a process that died
//! reads as `Failed` (`DeploymentStackDriftDetectionInterrupted`) once that lease is gone. Deleting the stack removes
//! its results.

use std::sync::Arc;
use std::time::Instant;

use cairn_arm::models::lro::OperationStatus;
use cairn_arm::models::stack_drift::{
    DeploymentStackDriftProperties, DeploymentStackDriftRequest, DeploymentStackDriftResult,
    DriftStatus, DriftSummary, ResourceDrift,
};
use cairn_arm::models::stack_what_if::{
    DeploymentStacksWhatIfPropertyChange, StackPropertyChangeType,
};
use cairn_arm::{ArmError, ErrorDetail};
use cairn_host::{CallContext, ExtensionHost, ExtensionKey, PreviewRequest, ResourceLocator};
use cairn_stacks::{ManagedResource, ManagedSet, ManagedTarget};
use cairn_store::{
    ExposeSecret as _, NewStackWhatIf, Page, PageRequest, SecretString, Store, Timestamp,
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::lease::add;
use crate::request::stack_id;
use crate::service::{StackService, last_modified, lease_name, store_error};
use crate::unmanage::{Deleter, host_error_detail};
use crate::what_if_changes::{internal, property_change};
use crate::what_if_retention::retention_interval_at;

/// How long a result is kept when the request names no `retentionInterval`.
const DEFAULT_RETENTION: &str = "P7D";

/// The error of a detection whose process died before it ended.
pub const DRIFT_DETECTION_INTERRUPTED: &str = "DeploymentStackDriftDetectionInterrupted";

/// Operation ids (and result names) of drift detections start with this.
pub const DRIFT_OPERATION_PREFIX: &str = "drift-";

/// The name of the lease a stack's drift detection holds.
fn drift_lease(scope: &str, name: &str) -> String {
    format!("drift:{}", lease_name(scope, name))
}

fn now_text() -> String {
    cairn_arm::time::format_timestamp(std::time::SystemTime::now())
}

fn result_not_found(id: &str) -> ArmError {
    ArmError::new(
        404,
        "DeploymentStackDriftResultNotFound",
        format!("The drift detection result '{id}' could not be found (it may have expired)."),
    )
}

impl StackService {
    /// Starts a drift detection of the stack (`POST .../detectDrift`) and returns its result as it starts
    /// (`Running`, no resource read yet); the reads run in the background. 404 when there is no such stack, 409
    /// while the stack's own operation runs or another detection of it does.
    pub async fn detect_drift(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStackDriftRequest,
    ) -> Result<DeploymentStackDriftResult, ArmError> {
        let retention_text = request
            .retention_interval
            .clone()
            .unwrap_or_else(|| DEFAULT_RETENTION.to_owned());
        let retention = retention_interval_at(&retention_text, "retentionInterval")?;
        let stack_resource_id = stack_id(scope, name)?.to_string();
        let (record, stack, state) = self
            .load(scope, name)
            .await?
            .ok_or_else(|| ArmError::deployment_stack_not_found(name))?;
        if let Some(provisioning) = stack
            .properties
            .provisioning_state
            .as_ref()
            .filter(|s| !s.is_terminal())
        {
            return Err(ArmError::new(
                409,
                cairn_arm::error::codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE,
                format!(
                    "The drift of deployment stack '{name}' cannot be detected while it is in the non-terminal \
                     state '{}': its resources are changing. Retry when the operation has ended.",
                    provisioning.as_str()
                ),
            ));
        }
        let operation_id = format!(
            "{DRIFT_OPERATION_PREFIX}{:013}-{}",
            Timestamp::now().unix_millis(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let lease = drift_lease(scope, name);
        let owner = format!("{}:{operation_id}", self.inner.settings.owner_id);
        // A detection writes its final result before it releases its lease: one whose result already reads as
        // ended is releasing it now, and a caller who saw that result may start the next at once.
        let mut waits_for_release = 100;
        let now = loop {
            let now = Timestamp::now();
            match self
                .inner
                .store
                .acquire_lease(&lease, &owner, now, add(now, self.inner.settings.lease_ttl))
                .await
            {
                Ok(_) => break now,
                Err(error) if error.is_conflict() => {
                    if waits_for_release > 0
                        && self.lease_holder_ended(&lease, &stack_resource_id).await
                    {
                        waits_for_release -= 1;
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                    return Err(ArmError::new(
                        409,
                        "DeploymentStackDriftDetectionInProgress",
                        format!(
                            "A drift detection of deployment stack '{name}' is already running; wait for its \
                             result."
                        ),
                    ));
                }
                Err(error) => return Err(store_error(error)),
            }
        };
        let resources = state.managed_set;
        let result = DeploymentStackDriftResult {
            id: Some(format!(
                "{stack_resource_id}/driftDetectionResults/{operation_id}"
            )),
            name: Some(operation_id.clone()),
            resource_type: Some(DeploymentStackDriftResult::TYPE.to_owned()),
            properties: DeploymentStackDriftProperties {
                deployment_stack_resource_id: stack_resource_id.clone(),
                status: OperationStatus::Running,
                start_time: Some(now_text()),
                end_time: None,
                deployment_stack_last_modified: Some(last_modified(&record)),
                retention_interval: Some(retention_text),
                summary: DriftSummary {
                    total: u32::try_from(resources.len()).unwrap_or(u32::MAX),
                    ..DriftSummary::default()
                },
                resources: Vec::new(),
                error: None,
            },
        };
        let store = ResultStore {
            store: self.inner.store.clone(),
            scope: stack_resource_id,
            name: operation_id,
            request: serde_json::to_string(&request).map_err(internal)?,
            expires_at: now.saturating_add(retention),
        };
        if let Err(error) = store.write(&result).await {
            self.release_drift_lease(&lease, &owner).await;
            return Err(error);
        }
        let stop = self.heartbeat(lease.clone(), owner.clone());
        let service = self.clone();
        let (stack_name, started) = (name.to_owned(), result.clone());
        tokio::spawn(async move {
            let finished = service.run_detection(&store, started, &resources).await;
            tracing::info!(
                stack = stack_name,
                operation = store.name,
                status = %finished.properties.status,
                total = finished.properties.summary.total,
                modified = finished.properties.summary.modified,
                deleted = finished.properties.summary.deleted,
                unreachable = finished.properties.summary.unreachable,
                "stack drift detection ended"
            );
            let _ = stop.send(());
            service.release_drift_lease(&lease, &owner).await;
        });
        Ok(result)
    }

    /// A drift detection result (`GET .../driftDetectionResults/{id}`): `Running` while it runs; one left
    /// `Running` by a process that died reads as `Failed`. 404 `DeploymentStackDriftResultNotFound` when there is
    /// none (or it expired).
    pub async fn drift_result(
        &self,
        scope: &str,
        name: &str,
        id: &str,
    ) -> Result<DeploymentStackDriftResult, ArmError> {
        let stack_resource_id = stack_id(scope, name)?.to_string();
        // The lease before the result: a detection writes its final result before it releases its lease, so a
        // lease found gone here means the result read next is final, or its process died. Read the other way
        // round, a detection ending between the two reads looked interrupted, and its result was overwritten.
        let alive = self.detection_alive(scope, name, id).await?;
        let record = self
            .inner
            .store
            .get_stack_what_if(&stack_resource_id, id, Timestamp::now())
            .await
            .map_err(store_error)?
            .ok_or_else(|| result_not_found(id))?;
        let mut result = stored_result(id, record.result)?;
        if result.properties.status == OperationStatus::Running && !alive {
            result.properties.status = OperationStatus::Failed;
            result.properties.end_time = Some(now_text());
            result.properties.error = Some(ErrorDetail::new(
                DRIFT_DETECTION_INTERRUPTED,
                "The drift detection was interrupted (its process stopped) before every resource was read. \
                 Start it again.",
            ));
            let request = self
                .inner
                .store
                .get_stack_what_if_request(&stack_resource_id, id, Timestamp::now())
                .await
                .map_err(store_error)?;
            if let Some(request) = request {
                let store = ResultStore {
                    store: self.inner.store.clone(),
                    scope: stack_resource_id,
                    name: id.to_owned(),
                    request: request.expose_secret().to_owned(),
                    expires_at: record.expires_at,
                };
                store.write(&result).await?;
            }
        }
        Ok(result)
    }

    /// The stack's unexpired drift detection results, oldest first, a page at a time.
    pub async fn list_drift_results(
        &self,
        scope: &str,
        name: &str,
        page: PageRequest,
    ) -> Result<Page<DeploymentStackDriftResult>, ArmError> {
        let stack_resource_id = stack_id(scope, name)?.to_string();
        let listed = self
            .inner
            .store
            .list_stack_what_ifs(&stack_resource_id, page, Timestamp::now())
            .await
            .map_err(store_error)?;
        let mut items = Vec::with_capacity(listed.items.len());
        for record in listed.items {
            let id = record.name.clone();
            let result = stored_result(&id, record.result)?;
            // A result of a detection that died reads as failed here as in GET.
            items.push(if result.properties.status == OperationStatus::Running {
                self.drift_result(scope, name, &id).await?
            } else {
                result
            });
        }
        Ok(Page {
            items,
            continuation: listed.continuation,
        })
    }

    /// Removes every drift detection result of the stack (once the stack is deleted). Failures are logged: the
    /// results would expire anyway.
    pub(crate) async fn forget_drift_results(&self, scope: &str, name: &str) {
        let Ok(stack_resource_id) = stack_id(scope, name).map(|id| id.to_string()) else {
            return;
        };
        let store = &self.inner.store;
        let mut page = PageRequest::default();
        loop {
            let listed = match store
                .list_stack_what_ifs(&stack_resource_id, page.clone(), Timestamp::now())
                .await
            {
                Ok(listed) => listed,
                Err(error) => {
                    tracing::warn!(stack = name, %error, "listing the drift detection results to remove failed");
                    return;
                }
            };
            for record in &listed.items {
                if let Err(error) = store
                    .delete_stack_what_if(&stack_resource_id, &record.name, Timestamp::now())
                    .await
                {
                    tracing::warn!(stack = name, %error, "removing a drift detection result failed");
                }
            }
            match listed.continuation {
                Some(token) => page.continuation = Some(token),
                None => return,
            }
        }
    }

    /// Whether the detection holding `lease` has already written a final result (it is releasing the lease).
    /// Any failure to tell reads as `false`: the caller then reports the detection as running.
    async fn lease_holder_ended(&self, lease: &str, stack_resource_id: &str) -> bool {
        let Ok(Some(held)) = self.inner.store.get_lease(lease).await else {
            return false;
        };
        let Some((_, id)) = held.owner.rsplit_once(':') else {
            return false;
        };
        let Ok(Some(record)) = self
            .inner
            .store
            .get_stack_what_if(stack_resource_id, id, Timestamp::now())
            .await
        else {
            return false;
        };
        stored_result(id, record.result).is_ok_and(|result| result.properties.status.is_terminal())
    }

    /// Whether detection `id` of the stack still runs somewhere: its lease is held, unexpired, by its owner.
    async fn detection_alive(&self, scope: &str, name: &str, id: &str) -> Result<bool, ArmError> {
        let lease = self
            .inner
            .store
            .get_lease(&drift_lease(scope, name))
            .await
            .map_err(store_error)?;
        Ok(lease.is_some_and(|lease| {
            lease.expires_at > Timestamp::now() && lease.owner.ends_with(&format!(":{id}"))
        }))
    }

    async fn release_drift_lease(&self, lease: &str, owner: &str) {
        if let Err(error) = self.inner.store.release_lease(lease, owner).await {
            tracing::warn!(lease, %error, "releasing the drift detection lease failed");
        }
    }

    /// Reads every resource (bounded parallelism), publishing progress, and writes the final result.
    async fn run_detection(
        &self,
        store: &ResultStore,
        mut result: DeploymentStackDriftResult,
        resources: &ManagedSet,
    ) -> DeploymentStackDriftResult {
        let reader = Arc::new(Reader {
            access: self.deleter(uuid::Uuid::new_v4().to_string()),
        });
        let limit = self.inner.settings.max_drift_reads_in_flight.max(1);
        let interval = self.inner.settings.progress_interval;
        let resources: Vec<ManagedResource> = resources.iter().cloned().collect();
        let mut read: Vec<Option<ResourceDrift>> = vec![None; resources.len()];
        let mut pending = resources.into_iter().enumerate();
        let mut in_flight = JoinSet::new();
        let mut published = Instant::now();
        let mut lost = false;
        loop {
            while in_flight.len() < limit {
                let Some((index, resource)) = pending.next() else {
                    break;
                };
                let reader = reader.clone();
                in_flight.spawn(async move { (index, reader.read(&resource).await) });
            }
            match in_flight.join_next().await {
                Some(Ok((index, drift))) => {
                    result.properties.summary.count(&drift.drift_status);
                    read[index] = Some(drift);
                    if published.elapsed() >= interval {
                        result.properties.resources = read.iter().flatten().cloned().collect();
                        if let Err(error) = store.write(&result).await {
                            tracing::warn!(operation = store.name, error = %error.detail().message(), "publishing drift detection progress failed");
                        }
                        published = Instant::now();
                    }
                }
                // A read task panicked: its resource is lost, so the result cannot be complete.
                Some(Err(_)) => lost = true,
                None => break,
            }
        }
        result.properties.resources = read.into_iter().flatten().collect();
        result.properties.end_time = Some(now_text());
        if lost {
            result.properties.status = OperationStatus::Failed;
            result.properties.error = Some(ErrorDetail::new(
                "InternalServerError",
                "A resource could not be read to the end; the drift detection is incomplete.",
            ));
        } else {
            result.properties.status = OperationStatus::Succeeded;
            result.properties.summary.checked = result.properties.summary.total;
        }
        if let Err(error) = store.write(&result).await {
            tracing::error!(operation = store.name, error = %error.detail().message(), "the drift detection result could not be recorded");
        }
        result
    }
}

/// Where one detection's result is kept.
struct ResultStore {
    store: Arc<dyn Store>,
    /// The stack's ID.
    scope: String,
    /// The operation id.
    name: String,
    /// The request as given (kept, sealed, beside the result as a what-if's request is).
    request: String,
    expires_at: Timestamp,
}

impl ResultStore {
    async fn write(&self, result: &DeploymentStackDriftResult) -> Result<(), ArmError> {
        self.store
            .put_stack_what_if(
                NewStackWhatIf {
                    scope: self.scope.clone(),
                    name: self.name.clone(),
                    result: serde_json::to_value(result).map_err(internal)?,
                    request: SecretString::from(self.request.clone()),
                    expires_at: self.expires_at,
                },
                Timestamp::now(),
            )
            .await
            .map(|_| ())
            .map_err(store_error)
    }
}

fn stored_result(id: &str, value: Value) -> Result<DeploymentStackDriftResult, ArmError> {
    serde_json::from_value(value).map_err(|_| {
        ArmError::new(
            500,
            "StoreDataCorrupt",
            format!("The stored drift detection result '{id}' cannot be read."),
        )
    })
}

/// Reads managed resources live and compares them with what was applied.
struct Reader {
    /// The providers, the host, and the config resolution deletes use.
    access: Deleter,
}

impl Reader {
    async fn read(&self, resource: &ManagedResource) -> ResourceDrift {
        let reference = resource.to_reference();
        let mut drift = ResourceDrift {
            id: reference.id,
            extension: reference.extension,
            resource_type: reference.resource_type,
            identifiers: reference.identifiers,
            api_version: reference.api_version,
            symbolic_name: resource.symbolic_name().map(str::to_owned),
            drift_status: DriftStatus::InSync,
            property_changes: None,
            error: None,
            message: None,
        };
        let applied = self.applied(resource).await;
        let compared = match resource.target() {
            ManagedTarget::Arm(_) => self.read_arm(resource, applied.as_ref()).await,
            ManagedTarget::Extensible { .. } => {
                self.read_extensible(resource, applied.as_ref()).await
            }
        };
        match compared {
            Ok(Some(changes)) if changes.is_empty() => {}
            Ok(Some(changes)) => {
                drift.drift_status = DriftStatus::Modified;
                drift.property_changes = Some(changes);
            }
            Ok(None) => drift.drift_status = DriftStatus::Deleted,
            Err(error) => {
                drift.drift_status = DriftStatus::Unreachable;
                drift.error = Some(error);
            }
        }
        if applied.is_none() && drift.drift_status == DriftStatus::InSync {
            drift.message = Some(
                "No applied properties are recorded for this resource (it was last written before cairn recorded \
                 them, or outside a deployment): only its existence was checked. Re-apply the stack to record them."
                    .into(),
            );
        }
        drift
    }

    /// What the last deployment applied, from the inventory row of the resource.
    async fn applied(&self, resource: &ManagedResource) -> Option<Value> {
        let key = match resource.target() {
            ManagedTarget::Arm(id) => cairn_store::ResourceKey::arm(&id.to_string()),
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => cairn_store::ResourceKey::extension(
                &extension.name,
                extension.config_id.as_deref(),
                resource_type,
                identifiers,
            ),
        };
        match self.access.store.get_managed_resource(&key).await {
            Ok(record) => record.and_then(|r| r.resource.applied),
            Err(error) => {
                tracing::warn!(resource = %key, %error, "reading the applied properties failed");
                None
            }
        }
    }

    /// The changes of an ARM resource; `None` when it is gone.
    async fn read_arm(
        &self,
        resource: &ManagedResource,
        applied: Option<&Value>,
    ) -> Result<Option<Vec<DeploymentStacksWhatIfPropertyChange>>, ErrorDetail> {
        let ManagedTarget::Arm(id) = resource.target() else {
            return Ok(Some(Vec::new()));
        };
        let resource_type = id.resource_type();
        let Some(provider) = self.access.providers.get(&resource_type) else {
            return Err(ErrorDetail::new(
                "NoRegisteredProviderFound",
                format!("No registered provider found for the resource type '{resource_type}'."),
            ));
        };
        let api_version = resource.api_version.as_deref().unwrap_or_default();
        let live = match provider.get(id, api_version).await {
            Ok(Some(live)) => live,
            Ok(None) => return Ok(None),
            Err(error) if error.status == 404 => return Ok(None),
            Err(error) => return Err(*error.error),
        };
        let write_only: Vec<String> = provider
            .write_only_properties(&resource_type)
            .iter()
            .map(|p| (*p).to_owned())
            .collect();
        Ok(Some(changes(&live, applied, &write_only)))
    }

    /// The changes of an extension resource; `None` when the extension says it does not exist.
    async fn read_extensible(
        &self,
        resource: &ManagedResource,
        applied: Option<&Value>,
    ) -> Result<Option<Vec<DeploymentStacksWhatIfPropertyChange>>, ErrorDetail> {
        let ManagedTarget::Extensible {
            extension,
            resource_type,
            identifiers,
        } = resource.target()
        else {
            return Ok(Some(Vec::new()));
        };
        let config = self
            .access
            .resolve(extension, resource)
            .await
            .map_err(|error| error.to_error_detail())?;
        let key = ExtensionKey::new(extension.name.clone(), extension.version.clone());
        let context = CallContext {
            correlation_id: Some(self.access.correlation_id.clone()),
            ..CallContext::default()
        };
        let config_id = extension.config_id.clone().filter(|id| !id.is_empty());
        let locator = ResourceLocator {
            resource_type: resource_type.clone(),
            api_version: resource.api_version.clone(),
            identifiers: identifiers.clone(),
            config: config.clone(),
            config_id: config_id.clone(),
        };
        let host: &ExtensionHost = &self.access.host;
        let live = match host.get(&key, &locator, &context).await {
            Ok(Some(live)) => live,
            Ok(None) => return Ok(None),
            Err(error) => return Err(host_error_detail(&error)),
        };
        let Some(applied) = applied else {
            return Ok(Some(Vec::new()));
        };
        // The paths the extension computes itself (read-only, calculated) are not drift: ask its preview of what
        // was applied. An extension that cannot preview names none.
        let mut ignored = Vec::new();
        let preview = host
            .preview(
                &key,
                PreviewRequest {
                    resource_type: resource_type.clone(),
                    api_version: resource.api_version.clone(),
                    properties: applied.clone(),
                    config,
                    config_id,
                    unevaluated: Vec::new(),
                },
                &context,
            )
            .await;
        if let Some(metadata) = preview.ok().and_then(|p| p.preview.metadata) {
            ignored.extend(metadata.read_only.into_iter().flatten());
            ignored.extend(metadata.calculated.into_iter().flatten());
        }
        // And the properties its declared types mark read-only, whatever its preview says.
        let mut live = live.properties;
        let mut applied = applied.clone();
        if let Some(types) = host.registry().types(&extension.name, &extension.version)
            && let Some(id) = types
                .resource(
                    &resource_type[..],
                    resource.api_version.as_deref(),
                    Some(extension.version.as_str()),
                )
                .or(types.fallback())
        {
            for side in [&mut live, &mut applied] {
                cairn_template::resource_types::types::without_read_only(&types, id, side);
            }
        }
        Ok(Some(changes(
            &json!({ "properties": live }),
            Some(&json!({ "properties": applied })),
            &ignored,
        )))
    }
}

/// The differences from `applied` (as recorded) to `live`, over the members `applied` holds, skipping the
/// `ignored` JSON pointers; none when nothing applied is recorded.
fn changes(
    live: &Value,
    applied: Option<&Value>,
    ignored: &[String],
) -> Vec<DeploymentStacksWhatIfPropertyChange> {
    let Some(applied) = applied else {
        return Vec::new();
    };
    // `property_diff` says how to go from its `before` to its `after`, over what `after` declares: from live to
    // applied (what a re-apply would change). Drift reads the other way: from applied to live.
    cairn_engine::property_diff(live, applied, ignored)
        .iter()
        .map(|change| reversed(property_change(change)))
        .collect()
}

fn reversed(change: DeploymentStacksWhatIfPropertyChange) -> DeploymentStacksWhatIfPropertyChange {
    DeploymentStacksWhatIfPropertyChange {
        path: change.path,
        change_type: match change.change_type {
            StackPropertyChangeType::Create => StackPropertyChangeType::Delete,
            StackPropertyChangeType::Delete => StackPropertyChangeType::Create,
            other => other,
        },
        before: change.after,
        after: change.before,
        children: change
            .children
            .map(|children| children.into_iter().map(reversed).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_read_from_applied_to_live_over_what_was_applied() {
        let applied = json!({"properties": {"content": "a", "mode": "0644", "tags": ["x", "y"],
                                            "removed": 1, "stamp": 1}});
        let live = json!({"properties": {"content": "b", "mode": "0644", "tags": ["x"],
                                         "extra": true, "stamp": 2}});
        let found = changes(&live, Some(&applied), &["/properties/stamp".to_owned()]);
        let summary: Vec<(String, String, Option<Value>, Option<Value>)> = found
            .iter()
            .map(|c| {
                (
                    c.path.clone(),
                    c.change_type.as_str().to_owned(),
                    c.before.clone(),
                    c.after.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "properties.content".into(),
                    "modify".into(),
                    Some(json!("a")),
                    Some(json!("b"))
                ),
                ("properties.tags".into(), "array".into(), None, None),
                (
                    "properties.removed".into(),
                    "delete".into(),
                    Some(json!(1)),
                    None
                ),
            ],
            "{found:#?}"
        );
        let tags = found[1].children.as_ref().expect("items");
        assert_eq!(tags[0].change_type, StackPropertyChangeType::Delete);
        assert_eq!(tags[0].before, Some(json!("y")));
        assert!(changes(&live, None, &[]).is_empty());
        assert!(changes(&applied, Some(&applied), &[]).is_empty());
    }
}

//! Bulk delete: deletes a list of output-resource entries (ARM IDs, and extensible entries with their persisted
//! config directives) with the same algorithm stacks use to unmanage — one [`DeletePlan`], driven by a
//! [`DeleteRun`] with retry rounds, ARM deletes through the providers and extensible deletes through the
//! extension host with the config resolved fresh — and answers per entry: `deleted`, `notFound` or `failed`
//! with its error. Served as `POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete`.

use std::collections::HashMap;

use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::stack::ResourceReference;
use cairn_arm::{ArmError, ErrorDetail};
use cairn_host::{CallContext, ExtensionConfig, ExtensionKey, HostErrorKind, ResourceLocator};
use cairn_stacks::directive::resolve_config;
use cairn_stacks::{
    DeleteOutcome, DeletePlan, DeleteRun, ManagedResource, ManagedTarget, ResourceKey, RunSettings,
    Step, WithoutDeleteSupport,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::unmanage::{Deleter, LocalResolver};

/// Most entries one request may carry.
pub const MAX_BULK_DELETE_ENTRIES: usize = 1000;

/// One resource to delete: an ARM `id`, or an extensible resource (`extension` with `name`, `version`,
/// `configId` and its persisted `config` — literals and `keyVaultReference` / `apiReference` directives —, `type`,
/// `identifiers`), with the `apiVersion` it was deployed with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkDeleteEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<DeploymentExtension>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
}

/// The request body: `{ "resources": [...] }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkDeleteRequest {
    pub resources: Vec<BulkDeleteEntry>,
}

/// How one entry went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BulkDeleteStatus {
    Deleted,
    /// Already gone (or its extension's control plane is gone).
    NotFound,
    Failed,
}

/// The result for one entry: the entry as a reference (the extension without its config) plus the status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkDeleteResult {
    #[serde(flatten)]
    pub resource: ResourceReference,
    pub status: BulkDeleteStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// The response body: `{ "value": [...] }`, in the order of the request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BulkDeleteResponse {
    pub value: Vec<BulkDeleteResult>,
}

/// The entry as a managed resource, or why it is not one.
fn to_resource(entry: &BulkDeleteEntry) -> Result<ManagedResource, ErrorDetail> {
    let reference = ResourceReference {
        id: entry.id.clone(),
        extension: entry.extension.clone(),
        resource_type: entry.resource_type.clone(),
        identifiers: entry.identifiers.clone(),
        api_version: entry.api_version.clone(),
        ..ResourceReference::default()
    };
    if reference.extension.is_some()
        && (reference.resource_type.as_deref().unwrap_or("").is_empty()
            || reference.identifiers.as_ref().is_none_or(Value::is_null))
    {
        return Err(ErrorDetail::new(
            "InvalidBulkDeleteEntry",
            "An extensible entry needs 'type' and 'identifiers'.",
        ));
    }
    let extensions: Vec<DeploymentExtension> = entry.extension.iter().cloned().collect();
    ManagedResource::from_reference(&reference, &extensions)
        .map_err(|e| ErrorDetail::new("InvalidBulkDeleteEntry", e.to_string()))
}

fn public_reference(entry: &BulkDeleteEntry) -> ResourceReference {
    ResourceReference {
        id: entry.id.clone(),
        extension: entry.extension.as_ref().map(|e| DeploymentExtension {
            config: None,
            ..e.clone()
        }),
        resource_type: entry.resource_type.clone(),
        identifiers: entry.identifiers.clone(),
        api_version: entry.api_version.clone(),
        ..ResourceReference::default()
    }
}

impl crate::StackService {
    /// Deletes `entries` (see the module docs) and answers one result per entry, in order. Bad entries fail on
    /// their own; only a request over [`MAX_BULK_DELETE_ENTRIES`] is refused as a whole.
    pub async fn bulk_delete(
        &self,
        entries: Vec<BulkDeleteEntry>,
        correlation_id: Option<String>,
    ) -> Result<Vec<BulkDeleteResult>, ArmError> {
        if entries.len() > MAX_BULK_DELETE_ENTRIES {
            return Err(ArmError::new(
                400,
                "TooManyResources",
                format!(
                    "A bulk delete takes at most {MAX_BULK_DELETE_ENTRIES} resources; this one has {}.",
                    entries.len()
                ),
            )
            .with_target("resources"));
        }
        let parsed: Vec<Result<ManagedResource, ErrorDetail>> =
            entries.iter().map(to_resource).collect();
        let mut unique: HashMap<ResourceKey, ManagedResource> = HashMap::new();
        for resource in parsed.iter().flatten() {
            unique
                .entry(resource.key().clone())
                .or_insert_with(|| resource.clone());
        }
        let plan = DeletePlan::build(unique.into_values());
        let settings = RunSettings {
            max_rounds: self.inner.settings.max_delete_rounds.max(1),
            max_in_flight: Some(self.inner.settings.max_deletes_in_flight.max(1)),
            without_delete_support: WithoutDeleteSupport::Fail,
        };
        let deleter = Deleter {
            store: self.inner.store.clone(),
            providers: self.inner.providers.clone(),
            host: self.inner.host.clone(),
            correlation_id: correlation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        };
        let (outcomes, failed) = self.drive(&deleter, plan, settings).await?;
        Ok(entries
            .iter()
            .zip(parsed)
            .map(|(entry, resource)| {
                let (status, error) = match resource {
                    Err(error) => (BulkDeleteStatus::Failed, Some(error)),
                    Ok(resource) => match failed.get(resource.key()) {
                        Some(error) => (BulkDeleteStatus::Failed, Some(error.clone())),
                        None => match outcomes.get(resource.key()) {
                            Some(
                                DeleteOutcome::NotFound | DeleteOutcome::DeploymentTargetNotFound,
                            ) => (BulkDeleteStatus::NotFound, None),
                            Some(outcome) if outcome.is_deleted() => {
                                (BulkDeleteStatus::Deleted, None)
                            }
                            Some(DeleteOutcome::Failed(error)) => {
                                (BulkDeleteStatus::Failed, Some(error.clone()))
                            }
                            _ => (
                                BulkDeleteStatus::Failed,
                                Some(ErrorDetail::new(
                                    "ResourceDeleteNotAttempted",
                                    "The resource was not deleted: a resource it depends on could not be deleted.",
                                )),
                            ),
                        },
                    },
                };
                BulkDeleteResult {
                    resource: public_reference(entry),
                    status,
                    error,
                }
            })
            .collect())
    }

    /// Runs the plan like [`Deleter::run`], keeping each resource's last outcome so `notFound` stays apart
    /// from `deleted`.
    async fn drive(
        &self,
        deleter: &Deleter,
        plan: DeletePlan,
        settings: RunSettings,
    ) -> Result<
        (
            HashMap<ResourceKey, DeleteOutcome>,
            HashMap<ResourceKey, ErrorDetail>,
        ),
        ArmError,
    > {
        let mut run = DeleteRun::new(plan, settings);
        let mut outcomes = HashMap::new();
        let mut in_flight = JoinSet::new();
        loop {
            match run.next_step() {
                Step::Delete(tasks) => {
                    for task in tasks {
                        let deleter = deleter.clone();
                        in_flight.spawn(async move {
                            let outcome = match probe_missing(&deleter, &task.resource).await {
                                Some(outcome) => outcome,
                                None => deleter.delete(&task.resource).await,
                            };
                            (task.key, outcome)
                        });
                    }
                }
                Step::Wait => match in_flight.join_next().await {
                    Some(Ok((key, outcome))) => {
                        run.record(&key, outcome.clone()).map_err(|e| {
                            ArmError::new(500, "InternalServerError", e.to_string())
                        })?;
                        outcomes.insert(key, outcome);
                    }
                    Some(Err(_)) | None => break,
                },
                Step::Retry { .. } => tokio::time::sleep(self.inner.settings.retry_backoff).await,
                Step::Done => break,
            }
        }
        let report = run
            .into_report()
            .map_err(|e| ArmError::new(500, "InternalServerError", e.to_string()))?;
        let failed = report
            .failed
            .into_iter()
            .map(|f| (f.resource.key().clone(), f.error))
            .collect();
        Ok((outcomes, failed))
    }
}

/// Extension hosts treat a delete of a missing resource as done, so an extensible resource is read first: gone
/// (or its control plane gone) is `notFound`. Anything else — found, or the read failed — goes on to the delete,
/// whose outcome decides.
async fn probe_missing(deleter: &Deleter, resource: &ManagedResource) -> Option<DeleteOutcome> {
    let ManagedTarget::Extensible {
        extension,
        resource_type,
        identifiers,
    } = resource.target()
    else {
        return None;
    };
    let config = match &resource.config {
        Some(persisted) => {
            let resolver = LocalResolver {
                store: deleter.store.clone(),
                providers: deleter.providers.clone(),
            };
            let resolved = resolve_config(&extension.name, persisted, &resolver)
                .await
                .ok()?;
            ExtensionConfig::from_value(resolved.into_value())
        }
        None => None,
    };
    let locator = ResourceLocator {
        resource_type: resource_type.clone(),
        api_version: resource.api_version.clone(),
        identifiers: identifiers.clone(),
        config,
        config_id: extension.config_id.clone().filter(|id| !id.is_empty()),
    };
    let key = ExtensionKey::new(extension.name.clone(), extension.version.clone());
    let context = CallContext {
        correlation_id: Some(deleter.correlation_id.clone()),
        ..CallContext::default()
    };
    match deleter.host.get(&key, &locator, &context).await {
        Ok(None) => Some(DeleteOutcome::NotFound),
        Err(error) if error.kind() == HostErrorKind::DeploymentTargetNotFound => {
            Some(DeleteOutcome::DeploymentTargetNotFound)
        }
        Ok(Some(_)) | Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_without_identity_fails_alone() {
        assert_eq!(
            to_resource(&BulkDeleteEntry::default())
                .map_err(|e| e.code().to_owned())
                .err()
                .as_deref(),
            Some("InvalidBulkDeleteEntry")
        );
    }

    #[test]
    fn results_never_echo_the_config() {
        let entry: BulkDeleteEntry = serde_json::from_value(serde_json::json!({
            "extension": {"name": "W", "version": "1", "config": {"token": {"value": "x"}}},
            "type": "widget", "identifiers": {"name": "a"}
        }))
        .expect("entry");
        assert!(
            public_reference(&entry)
                .extension
                .expect("ext")
                .config
                .is_none()
        );
    }
}

//! Bulk delete: deletes a list of output-resource entries (ARM IDs, and extensible entries with their persisted
//! config directives) with the same algorithm stacks use to unmanage — one [`DeletePlan`], driven by a
//! [`DeleteRun`] with retry rounds, ARM deletes through the providers and extensible deletes through the
//! extension host with the config resolved fresh — and answers per entry: `deleted`, `notFound` or `failed`
//! with its error. Served as `POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete`.
//!
//! # Request shapes
//!
//! The body is cairn's `{"resources": [entry...]}` or, as seed 003 (Part 3, "BulkDelete API") describes it, a bare
//! array of entries. An entry is cairn's (`id`, or `extension` + `type` + `identifiers`, with `apiVersion`) or the
//! gist's outputResources form:
//!
//! ```json
//! {"import": {"provider": "Kubernetes", "version": "0.1",
//!             "config": {"cluster": "c1", "auth": {"type": "KeyVaultSecret", "keyVaultId": "/subscriptions/...",
//!                                                  "secretName": "kubeconfig"}}},
//!  "type": "apps/Deployment", "apiVersion": "v1", "id": "<the resource's id>"}
//! ```
//!
//! `import.provider`/`version` name the extension; `import.config` is read like any persisted config (plain values,
//! `auth` objects of type `KeyVaultSecret` become Key Vault directives, `keyVaultReference`/`apiReference` items).
//! The gist's `id` is the provider's own string id. When it is a cairn reference id (what cairn reports for an
//! extensible resource) the type, API version, identifiers and configId are read from it; otherwise it is the
//! extension's own id, which cairn carries as identifiers `{"referenceId": id}` — how cairn addresses REST-draft
//! resources, the contract of the gist's era. Explicit `identifiers` win over both.
//!
//! A config a stack could not keep refuses the whole request before anything runs (400
//! `InvalidStackExtensionConfig`, target `resources[i]...config`): seed 003's `auth.type: UserProvided` carries a
//! raw credential, and stacks never hold raw credentials; so do secure values given literally.
//!
//! # Long requests
//!
//! [`bulk_delete_runs_long`] says whether a request is *large*: more than [`BULK_DELETE_SYNC_MAX_ENTRIES`]
//! entries, or any extensible entry whose config holds a directive (each such delete first fetches a credential
//! from Key Vault or an ARM API, then may wait on the extension's long-running operation). The server answers large
//! requests as an ARM long-running operation (202 + `Azure-AsyncOperation`) instead of holding the connection.

use std::collections::HashMap;

use cairn_arm::access::Action;
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::stack::ResourceReference;
use cairn_arm::{ArmError, ErrorDetail};
use cairn_extension_contract::{ReferenceId, ReferenceIdParts};
use cairn_host::draft_transport::DRAFT_REFERENCE_ID_KEY;
use cairn_host::{CallContext, ExtensionKey, HostErrorKind, ResourceLocator};
use cairn_stacks::directive::PersistedConfig;
use cairn_stacks::{
    DeleteOutcome, DeletePlan, DeleteRun, ManagedResource, ManagedTarget, ResourceKey, RunSettings,
    Step, WithoutDeleteSupport,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::task::JoinSet;

use cairn_store::Precondition;

use crate::record::inventory_key;
use crate::service::StackService;
use crate::state::StackHeader;
use crate::unmanage::Deleter;

/// Most entries one request may carry.
pub const MAX_BULK_DELETE_ENTRIES: usize = 1000;

/// Requests with more entries than this are *large* (see [`bulk_delete_runs_long`]).
pub const BULK_DELETE_SYNC_MAX_ENTRIES: usize = 20;

/// Seed 003's `import` block: which extension, and its config as the gist writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GistImport {
    pub provider: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

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
    /// Seed 003's form: the extension and its config (then `id` is the provider's id of the resource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<GistImport>,
}

/// The request body: `{ "resources": [...] }`, or seed 003's bare array of entries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "BulkDeleteBody")]
pub struct BulkDeleteRequest {
    pub resources: Vec<BulkDeleteEntry>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BulkDeleteBody {
    Wrapped { resources: Vec<BulkDeleteEntry> },
    Entries(Vec<BulkDeleteEntry>),
}

impl From<BulkDeleteBody> for BulkDeleteRequest {
    fn from(body: BulkDeleteBody) -> Self {
        match body {
            BulkDeleteBody::Wrapped { resources } | BulkDeleteBody::Entries(resources) => {
                Self { resources }
            }
        }
    }
}

/// Whether a request is large: more than [`BULK_DELETE_SYNC_MAX_ENTRIES`] entries, or an extensible entry whose
/// config holds a directive (a credential to fetch before its delete). Entries that do not parse count as plain.
pub fn bulk_delete_runs_long(entries: &[BulkDeleteEntry]) -> bool {
    entries.len() > BULK_DELETE_SYNC_MAX_ENTRIES
        || entries.iter().any(|entry| {
            normalize(entry, 0)
                .ok()
                .and_then(|entry| entry.extension)
                .and_then(|extension| {
                    let config = extension.config?;
                    PersistedConfig::from_arm(&extension.name, &config).ok()
                })
                .is_some_and(|config| !config.directives().is_empty())
        })
}

/// Checks a request before anything runs: at most [`MAX_BULK_DELETE_ENTRIES`] entries, and every extension config
/// one a stack could keep (no `UserProvided` auth, no secure literal). Other problems fail their entry alone.
pub fn check_bulk_delete(entries: &[BulkDeleteEntry]) -> Result<(), ArmError> {
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
    for (index, entry) in entries.iter().enumerate() {
        if let Err(Refusal::Config(error)) = normalize(entry, index) {
            return Err(ArmError::from_detail(400, error));
        }
    }
    Ok(())
}

/// Why an entry cannot be deleted as given.
enum Refusal {
    /// Its config is one a stack must not keep: the whole request is refused.
    Config(ErrorDetail),
    /// Something else: the entry fails alone.
    Entry(ErrorDetail),
}

/// The entry in cairn's form: seed 003 entries (`import` + `id`) are translated (see the module docs).
fn normalize(entry: &BulkDeleteEntry, index: usize) -> Result<BulkDeleteEntry, Refusal> {
    let config_check =
        |name: &str, config: Option<&cairn_arm::models::extension::ExtensionConfig>| match config
            .map(|config| PersistedConfig::from_arm(name, config))
        {
            Some(Err(error)) => Err(Refusal::Config(error.to_error_detail().with_target(
                format!("resources[{index}].extension.config.{}", error.property),
            ))),
            _ => Ok(()),
        };
    let Some(import) = &entry.import else {
        if let Some(extension) = &entry.extension {
            config_check(&extension.name, extension.config.as_ref())?;
        }
        return Ok(entry.clone());
    };
    let invalid =
        |message: String| Refusal::Entry(ErrorDetail::new("InvalidBulkDeleteEntry", message));
    if entry.extension.is_some() {
        return Err(invalid(
            "Give either 'import' (seed 003) or 'extension', not both.".into(),
        ));
    }
    if import.provider.trim().is_empty() || import.version.trim().is_empty() {
        return Err(invalid("'import' needs 'provider' and 'version'.".into()));
    }
    let config = match &import.config {
        None | Some(Value::Null) => None,
        Some(config) => Some(
            PersistedConfig::from_wire(&import.provider, config)
                .map_err(|error| {
                    let target = if error.property.is_empty() {
                        format!("resources[{index}].import.config")
                    } else {
                        format!("resources[{index}].import.config.{}", error.property)
                    };
                    Refusal::Config(error.to_error_detail().with_target(target))
                })?
                .to_arm(),
        ),
    };
    let from_id = entry
        .id
        .as_deref()
        .and_then(|id| ReferenceId::parse(id).ok())
        .and_then(|id| ReferenceIdParts::from_reference_id(&id).ok());
    if let Some(parts) = &from_id
        && !parts.extension_name.eq_ignore_ascii_case(&import.provider)
    {
        return Err(invalid(format!(
            "'id' is a reference id of extension '{}', not of '{}'.",
            parts.extension_name, import.provider
        )));
    }
    let identifiers = match (&entry.identifiers, &from_id, &entry.id) {
        (Some(identifiers), _, _) => identifiers.clone(),
        (None, Some(parts), _) => parts.identifiers.clone(),
        (None, None, Some(id)) if !id.is_empty() => {
            serde_json::json!({ DRAFT_REFERENCE_ID_KEY: id })
        }
        _ => {
            return Err(invalid(
                "An 'import' entry needs the resource's 'id' (or 'identifiers').".into(),
            ));
        }
    };
    Ok(BulkDeleteEntry {
        id: None,
        extension: Some(DeploymentExtension {
            alias: None,
            name: import.provider.clone(),
            version: import.version.clone(),
            config_id: from_id.as_ref().and_then(|parts| parts.config_id.clone()),
            config_hash: None,
            deployment_id: None,
            config,
        }),
        resource_type: entry
            .resource_type
            .clone()
            .or_else(|| from_id.as_ref().map(|parts| parts.resource_type.clone())),
        identifiers: Some(identifiers),
        api_version: entry
            .api_version
            .clone()
            .or_else(|| from_id.as_ref().and_then(|parts| parts.api_version.clone())),
        import: None,
    })
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

impl StackService {
    /// Deletes `entries` (see the module docs) and answers one result per entry, in order. Bad entries fail on
    /// their own; only a request over [`MAX_BULK_DELETE_ENTRIES`] is refused as a whole.
    pub async fn bulk_delete(
        &self,
        entries: Vec<BulkDeleteEntry>,
        correlation_id: Option<String>,
    ) -> Result<Vec<BulkDeleteResult>, ArmError> {
        check_bulk_delete(&entries)?;
        let normalized: Vec<Result<BulkDeleteEntry, ErrorDetail>> = entries
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                normalize(entry, index).map_err(|refusal| match refusal {
                    Refusal::Config(detail) | Refusal::Entry(detail) => detail,
                })
            })
            .collect();
        let mut parsed: Vec<Result<ManagedResource, ErrorDetail>> = normalized
            .iter()
            .map(|entry| entry.as_ref().map_err(Clone::clone).and_then(to_resource))
            .collect();
        let protections = self.protections_of_all_stacks().await?;
        let ownership = if self.access.is_unrestricted() && protections.is_empty() {
            None
        } else {
            Some(self.ownership_of_all_stacks().await?)
        };
        if let Some(ownership) = ownership.as_ref().filter(|_| !protections.is_empty()) {
            // A stack's `protect` patterns hold here too: bulk delete has no bypass, the stack must let go first.
            for entry in &mut parsed {
                let Ok(resource) = entry else { continue };
                let protected = ownership
                    .claims_on_any_match(resource.key())
                    .into_iter()
                    .find_map(|claim| {
                        let pattern = protections
                            .get(&claim.stack_id)?
                            .protecting(resource.key())?;
                        Some((claim.stack_id.clone(), pattern.as_str().to_owned()))
                    });
                if let Some((stack_id, pattern)) = protected {
                    *entry = Err(ErrorDetail::new(
                        cairn_stacks::error::codes::RESOURCE_PROTECTED,
                        format!(
                            "The resource is protected by the pattern '{pattern}' of deployment stack \
                             '{stack_id}'. Fix: remove the pattern from the stack, or detach the resource from it."
                        ),
                    ));
                }
            }
        }
        if let Some(ownership) = ownership
            .as_ref()
            .filter(|_| !self.access.is_unrestricted())
        {
            // A resource a stack manages belongs to that stack's scope: a caller that may not reach the stack may
            // not delete what it manages, whatever the entry's own id says.
            for entry in &mut parsed {
                let Ok(resource) = entry else { continue };
                let refused = ownership
                    .claims_on_any_match(resource.key())
                    .into_iter()
                    .find_map(|claim| self.access.check(Action::Delete, &claim.stack_id).err());
                if let Some(error) = refused {
                    *entry = Err(error.into_detail());
                }
            }
        }
        let references: Vec<ResourceReference> = normalized
            .iter()
            .zip(&entries)
            .map(|(normalized, original)| public_reference(normalized.as_ref().unwrap_or(original)))
            .collect();
        let mut unique: HashMap<ResourceKey, ManagedResource> = HashMap::new();
        for resource in parsed.iter().flatten() {
            unique
                .entry(resource.key().clone())
                .or_insert_with(|| resource.clone());
        }
        let targets: Vec<ManagedResource> = unique.into_values().collect();
        let plan = DeletePlan::build(targets.iter().cloned());
        let settings = RunSettings {
            max_rounds: self.inner.settings.max_delete_rounds.max(1),
            max_in_flight: Some(self.inner.settings.max_deletes_in_flight.max(1)),
            without_delete_support: WithoutDeleteSupport::Fail,
        };
        let deleter =
            self.deleter(correlation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()));
        let (outcomes, failed) = self.drive(&deleter, plan, settings).await?;
        self.forget_gone(&targets, &outcomes, &failed).await?;
        Ok(references
            .into_iter()
            .zip(parsed)
            .map(|(reference, resource)| {
                let (status, error) = match resource {
                    Err(error) => (BulkDeleteStatus::Failed, Some(error)),
                    Ok(resource) => match failed.get(resource.key()) {
                        Some(error) => (BulkDeleteStatus::Failed, Some(error.clone())),
                        None => match outcomes.get(resource.key()) {
                            Some(
                                DeleteOutcome::NotFound | DeleteOutcome::DeploymentTargetNotFound,
                            ) => (BulkDeleteStatus::NotFound, None),
                            // Gone with its config's source: found gone, and why.
                            Some(DeleteOutcome::ConfigSourceGone { reason }) => {
                                (BulkDeleteStatus::NotFound, Some(reason.clone()))
                            }
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
                    resource: reference,
                    status,
                    error,
                }
            })
            .collect())
    }

    /// Each stack's `protect` patterns, by stack ID; stacks without any are left out.
    async fn protections_of_all_stacks(
        &self,
    ) -> Result<HashMap<String, cairn_stacks::ResourcePolicy>, ArmError> {
        let mut protections = HashMap::new();
        for record in self.all_stack_records().await? {
            // A record that cannot be read shows no patterns; the ownership read refuses it where it matters.
            let Ok(header) = record.stack.parse::<StackHeader>() else {
                continue;
            };
            if header.protect_patterns().is_empty() {
                continue;
            }
            let Ok(policy) = cairn_stacks::ResourcePolicy::parse(header.protect_patterns(), &[])
            else {
                continue;
            };
            protections.insert(header.id.clone().unwrap_or(record.name), policy);
        }
        Ok(protections)
    }

    /// The inventory follows a bulk delete: the rows of the resources it deleted (or found gone) go — unless a stack
    /// manages the resource, whose record still lists it and whose next operation settles the row.
    async fn forget_gone(
        &self,
        targets: &[ManagedResource],
        outcomes: &HashMap<ResourceKey, DeleteOutcome>,
        failed: &HashMap<ResourceKey, ErrorDetail>,
    ) -> Result<(), ArmError> {
        let gone: Vec<&ManagedResource> = targets
            .iter()
            .filter(|r| !failed.contains_key(r.key()))
            .filter(|r| {
                outcomes.get(r.key()).is_some_and(|outcome| {
                    outcome.is_deleted()
                        || matches!(
                            outcome,
                            DeleteOutcome::NotFound | DeleteOutcome::DeploymentTargetNotFound
                        )
                })
            })
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        let ownership = self.ownership_of_all_stacks().await?;
        for resource in gone {
            if !ownership.claims(resource.key()).is_empty() {
                continue;
            }
            let key = inventory_key(resource);
            match self
                .inner
                .store
                .delete_managed_resource(&key, Precondition::Any)
                .await
            {
                Ok(()) => {}
                Err(error) if error.is_not_found() => {}
                Err(error) => {
                    tracing::warn!(resource = key.as_str(), error = %error,
                        "could not remove a bulk-deleted resource from the inventory")
                }
            }
        }
        Ok(())
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
    let config = deleter.resolve(extension, resource).await.ok()?;
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

    /// A gist `id` that is not a cairn reference id is the extension's own id: identifiers `{"referenceId": id}`,
    /// as cairn addresses REST-draft resources.
    #[test]
    fn a_providers_own_id_becomes_draft_identifiers() {
        let entry: BulkDeleteEntry = serde_json::from_value(serde_json::json!({
            "import": {"provider": "Kubernetes", "version": "0.1", "config": {"cluster": "myCluster"}},
            "type": "apps/Deployment", "apiVersion": "v1",
            "id": "cluster/ant-test-cluster/metadata.namespace/default/metadata.name/foo"
        }))
        .expect("entry");
        let Ok(normalized) = normalize(&entry, 0) else {
            panic!("normalised")
        };
        assert_eq!(
            normalized.identifiers,
            Some(
                serde_json::json!({"referenceId": "cluster/ant-test-cluster/metadata.namespace/default/metadata.name/foo"})
            )
        );
        let extension = normalized.extension.expect("extension");
        assert_eq!(
            (extension.name.as_str(), extension.version.as_str()),
            ("Kubernetes", "0.1")
        );
        assert_eq!(
            extension.config.expect("config")["cluster"].value,
            Some(serde_json::json!("myCluster"))
        );
        assert!(normalized.id.is_none() && normalized.import.is_none());
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

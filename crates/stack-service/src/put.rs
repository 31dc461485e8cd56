//! A stack PUT (create or update): the checks before anything is stored, the accepted record, and the run in the
//! background: the stack's deployment through the engine, the new managed set, the unmanage diff and its deletes,
//! the outcome recorded. Recovery finishes an interrupted update through [`StackService::complete_put`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use cairn_arm::models::deployment::DeploymentProvisioningState;
use cairn_arm::models::stack::{
    DenySettingsMode, DenyStatusMode, DeploymentStack, DeploymentStackProvisioningState,
};
use cairn_arm::{ArmError, ErrorDetail, ResourceId, ResourceIdKind};
use cairn_engine::DeployOptions;
use cairn_stacks::{
    DeploymentSnapshot, ManagedResource, ManagedSet, ManagedTarget, collect_managed_set,
    diff_collected,
};
use cairn_store::{Precondition, StackRecord};

use crate::adoption::{existing_resource_check, exists_unmanaged_report};
use crate::cancel::mark_canceled;
use crate::ending::{Ending, OperationEnded};
use crate::lease::LeasedOperation;
use crate::record::{RecordFence, iso_duration, update_failed};
use crate::request::{
    check_location, deployment_scope_of, into_deployment, link_without_credentials,
    parameters_link_without_credentials, public_parameters, resource_policy, stack_id,
    validate_body,
};
use crate::service::{StackService, store_error};
use crate::state::{PendingOperation, StoredState};
use crate::validation;

/// What a stack PUT returns right away.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// The stack as accepted (`provisioningState: deploying`).
    pub stack: DeploymentStack,
    /// Whether the stack is new (201) rather than updated (200).
    pub created: bool,
    /// Fires when the operation has ended.
    pub ended: OperationEnded,
}

impl StackService {
    /// Starts a create or update; it runs in the background. 409 while another operation runs on the stack.
    pub async fn create_or_update(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStack,
        correlation_id: Option<String>,
    ) -> Result<Accepted, ArmError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let id = stack_id(scope, name)?;
        validate_body(&request.properties)?;
        check_location(scope, &request)?;
        let deployment_scope = deployment_scope_of(scope, &request.properties)?;
        self.check_resource_groups(&[scope, &deployment_scope])
            .await?;
        validation::check_stack_template(&self.engine(), name, &request.properties).await?;
        let correlation_id = correlation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let owner = self.operation_owner(&correlation_id);
        let existing = self.load(scope, name).await?;
        let lease = self
            .take_lease(
                scope,
                name,
                &owner,
                existing.as_ref().map(|(record, stack, _)| (record, stack)),
            )
            .await?;
        let result = self
            .accept_put(scope, name, &id, request, existing, correlation_id)
            .await;
        if let Err(error) = &result {
            self.release(scope, name, &owner).await;
            self.resume_if_interrupted(error, scope, name);
        }
        let (accepted, job, ended_sender) = result?;
        let operation = LeasedOperation {
            kind: "createOrUpdate",
            lease: lease.name,
            owner,
            scope: scope.to_owned(),
            name: name.to_owned(),
            correlation_id: accepted
                .stack
                .properties
                .correlation_id
                .clone()
                .unwrap_or_default(),
        };
        let service = self.clone();
        let (scope, name) = (scope.to_owned(), name.to_owned());
        self.spawn_leased(
            operation,
            async move { service.run_put(&scope, &name, job).await },
            move |outcome| {
                let stack = outcome.and_then(Result::ok).map(Arc::new);
                let _ = ended_sender.send(Ending::Ended(stack));
            },
        );
        Ok(accepted)
    }

    /// 404 `ResourceGroupNotFound` when one of `scopes` is a resource group that does not exist (the stack's own,
    /// or the one it deploys into): checked before anything is stored, as the engine checks a deployment's.
    async fn check_resource_groups(&self, scopes: &[&str]) -> Result<(), ArmError> {
        if !self.inner.engine.settings().require_resource_groups {
            return Ok(());
        }
        for scope in scopes {
            let Ok(id) = ResourceId::parse(scope) else {
                continue;
            };
            let (ResourceIdKind::ResourceGroup, Some(subscription), Some(group)) =
                (id.kind(), id.subscription_id(), id.resource_group_name())
            else {
                continue;
            };
            let found = self
                .inner
                .store
                .get_resource_group(subscription, group)
                .await
                .map_err(store_error)?;
            if found.is_none() {
                return Err(ArmError::resource_group_not_found(group));
            }
        }
        Ok(())
    }

    async fn accept_put(
        &self,
        scope: &str,
        name: &str,
        id: &ResourceId,
        request: DeploymentStack,
        existing: Option<(StackRecord, DeploymentStack, StoredState)>,
        correlation_id: String,
    ) -> Result<(Accepted, PutJob, tokio::sync::watch::Sender<Ending>), ArmError> {
        let bypass = request
            .properties
            .bypass_stack_out_of_sync_error
            .unwrap_or(false);
        let (precondition, previous, created) = match existing {
            Some((record, current, state)) => {
                Self::check_in_sync(name, &state, &current, bypass)?;
                let version = record.version;
                let mut state = state;
                state.out_of_sync = false;
                (Precondition::Version(version), state, false)
            }
            None => (Precondition::MustNotExist, StoredState::default(), true),
        };
        let mut stack = DeploymentStack::for_id(id, request.properties.clone());
        stack.location = request.location.clone();
        stack.tags = request.tags.clone();
        let p = &mut stack.properties;
        p.template = None;
        p.template_link = request
            .properties
            .template_link
            .as_ref()
            .map(link_without_credentials);
        p.parameters_link = request
            .properties
            .parameters_link
            .as_ref()
            .map(parameters_link_without_credentials);
        p.parameters = public_parameters(&request.properties);
        p.deployment_scope = Some(deployment_scope_of(scope, &request.properties)?);
        p.provisioning_state = Some(DeploymentStackProvisioningState::Deploying);
        p.correlation_id = Some(correlation_id.clone());
        p.bypass_stack_out_of_sync_error = None;
        p.bypass_protection = None;
        // Like the bypass, adoption is asked per operation: the record never says to adopt.
        p.adopt_existing_resources = None;
        p.error = None;
        p.deleted_resources = None;
        p.detached_resources = None;
        p.failed_resources = None;
        p.resources = Some(previous.managed_set.to_references());
        p.deployment_extensions = Some(previous.managed_set.deployment_extensions());
        // The run's state says which operation is under way: if this process dies, the next one finishes it.
        let in_flight = StoredState {
            out_of_sync: false,
            pending: Some(PendingOperation::Put {
                correlation_id: correlation_id.clone(),
                access: self.access.clone(),
                bypass_protection: request.properties.bypass_protection.unwrap_or(false),
            }),
            ..previous
        };
        let written = self
            .put_record(
                scope,
                name,
                &stack,
                in_flight.record(),
                precondition,
                Vec::new(),
            )
            .await?;
        let fence = RecordFence::new(scope, name, written.version);
        let (ended_sender, ended) = OperationEnded::channel();
        Ok((
            Accepted {
                stack: stack.clone(),
                created,
                ended,
            },
            PutJob {
                request,
                stack,
                previous: in_flight,
                correlation_id,
                fence,
            },
            ended_sender,
        ))
    }

    /// Runs a PUT's deployment and the rest of it; the stack as its last write left it.
    async fn run_put(
        &self,
        scope: &str,
        name: &str,
        job: PutJob,
    ) -> Result<DeploymentStack, ArmError> {
        let started = Instant::now();
        let PutJob {
            request,
            mut stack,
            previous,
            correlation_id,
            fence,
        } = job;
        // The record written at the start lists the previous set's resources; the copy in hand does not need them
        // while the deployment runs (a big stack's are thousands of references): they are listed again from the
        // set each ending writes.
        stack.properties.resources = None;
        let deployment_scope = stack
            .properties
            .deployment_scope
            .clone()
            .unwrap_or_else(|| scope.to_owned());
        let deployment_name = name.to_owned();
        let deployed = async {
            let existing_resources = existing_resource_check(
                request.properties.adopt_existing_resources.unwrap_or(false),
                &previous.managed_set,
                &self.ownership(scope, name).await?,
            );
            let mut handle = self
                .engine()
                .create_or_update(
                    &deployment_scope,
                    &deployment_name,
                    into_deployment(request.location, request.properties),
                    DeployOptions {
                        stack_initiated: true,
                        correlation_id: Some(correlation_id.clone()),
                        existing_resources: Some(existing_resources),
                        // Progress is read from the stack and the deployment's operations, not from events.
                        follow_events: false,
                    },
                )
                .await
                .map_err(|e| e.to_arm())?;
            stack.properties.deployment_id = handle.accepted.id.clone();
            let followed = self
                .follow_operations(&deployment_scope, &deployment_name, handle.ended())
                .await;
            self.snapshot(&deployment_scope, &deployment_name, 0, followed)
                .await
        }
        .await;
        let run = PutRun {
            scope,
            name,
            fence: &fence,
            correlation_id: &correlation_id,
            started,
        };
        self.complete_put(run, stack, previous, deployed).await
    }

    /// The part of a PUT after its deployment ended: the new managed set, the unmanage diff and its deletes, the
    /// record (the stack as written is returned). Also how recovery finishes an update whose process died after
    /// (or while) deploying.
    pub(crate) async fn complete_put(
        &self,
        run: PutRun<'_>,
        mut stack: DeploymentStack,
        previous: StoredState,
        deployed: Result<DeploymentSnapshot, ArmError>,
    ) -> Result<DeploymentStack, ArmError> {
        let PutRun {
            scope,
            name,
            fence,
            correlation_id,
            started,
        } = run;
        // A stack of thousands of resources holds thousands of records in each set: each step moves the previous
        // set and the collected one along instead of copying them, and the deployment's snapshot goes as soon as
        // the collected set is read from it.
        let p = &mut stack.properties;
        let mut snapshot = match deployed {
            Ok(snapshot) => snapshot,
            Err(error) => {
                // Nothing ran (or nothing can be read): the managed set stays as it was.
                p.resources = Some(previous.managed_set.to_references());
                p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
                p.error = Some(update_failed(vec![error.into_detail()]));
                p.duration = Some(iso_duration(started.elapsed()));
                self.finish(fence, &stack, &previous).await?;
                return Ok(stack);
            }
        };
        let deployment_canceled = snapshot.deployment.properties.provisioning_state
            == Some(DeploymentProvisioningState::Canceled);
        p.outputs = snapshot.deployment.properties.outputs.take();
        p.deployment_id = snapshot.deployment.id.clone().or(p.deployment_id.take());
        let deployment_error = snapshot.deployment.properties.error.take();
        let mut errors: Vec<ErrorDetail> = Vec::new();
        if let Some(error) = deployment_error {
            errors.extend(exists_unmanaged_report(&snapshot));
            errors.push(
                ErrorDetail::new(
                    "DeploymentStackDeploymentFailed",
                    "The deployment of the stack failed.",
                )
                .with_details([error]),
            );
        }
        // The snapshot goes into the collection, which lets each deployment's records go once read.
        let collected = collect_managed_set(snapshot);
        errors.extend(
            collected
                .issues
                .iter()
                .filter(|i| i.is_error())
                .map(|i| i.to_error_detail()),
        );
        if let Some(refused) = config_id_changes(&previous.managed_set, &collected.resources) {
            // The config now points at another control plane: the old resources cannot be unmanaged through it,
            // so nothing leaves the stack; both sets stay managed until the config is put back.
            let mut state = previous;
            for resource in collected.resources.into_vec() {
                state.managed_set.merge(resource);
            }
            errors.push(refused);
            return self.fail_with(fence, stack, state, errors, started).await;
        }
        let ownership = match self.ownership(scope, name).await {
            Ok(ownership) => ownership,
            Err(error) => {
                // The deployment ran, but what the other stacks manage cannot be known (a record that cannot be
                // read): nothing is unmanaged, and everything before and everything the deployment wrote stays
                // managed — the next update's diff checks ownership again before anything is deleted or
                // detached. Failing the operation, rather than leaving it to recovery, keeps the stack from
                // staying `deploying` for as long as the other record stays unreadable.
                let mut state = previous;
                for resource in collected.resources.into_vec() {
                    state.managed_set.merge(resource);
                }
                errors.push(error.into_detail());
                return self.fail_with(fence, stack, state, errors, started).await;
            }
        };
        let bypass = previous
            .pending
            .as_ref()
            .is_some_and(PendingOperation::bypasses_protection);
        let diff = match resource_policy(&stack.properties, bypass).and_then(|policy| {
            diff_collected(
                &previous.managed_set,
                &collected,
                &stack.properties.action_on_unmanage,
                &ownership,
                &policy,
            )
            .map_err(|error| error.to_error_detail())
        }) {
            Ok(diff) => diff,
            Err(error) => {
                errors.push(error);
                // The deployment ran: keep what it created managed, along with everything before — except what
                // another stack owns and does not share, which this stack must not take over.
                let mut state = previous;
                for resource in collected.resources.into_vec() {
                    let claims = ownership.claims(resource.key());
                    if claims.iter().all(|claim| claim.shared) {
                        state.managed_set.merge(resource);
                    }
                }
                return self.fail_with(fence, stack, state, errors, started).await;
            }
        };
        drop(ownership);
        // While the deletes run, the record shows `deletingResources` and what is gone so far; the managed set it
        // publishes is the previous one with the new resources added, so a crash loses neither.
        let publishing = || {
            let mut publishing = stack.clone();
            publishing.properties.provisioning_state =
                Some(DeploymentStackProvisioningState::DeletingResources);
            publishing
                .properties
                .resources
                .get_or_insert_with(|| previous.managed_set.to_references());
            let mut publishing_state = previous.clone();
            for resource in collected.resources.iter() {
                publishing_state.managed_set.merge(resource.clone());
            }
            (publishing, publishing_state)
        };
        let action_on_unmanage = stack.properties.action_on_unmanage.clone();
        let mut result = self
            .unmanage(
                diff,
                &action_on_unmanage,
                correlation_id,
                Some((fence, publishing)),
            )
            .await?;
        drop(collected);
        let mut state = previous;
        state.managed_set = with_deny_status(
            std::mem::take(&mut result.resources),
            &stack.properties.deny_settings.mode,
        );
        // `resources` and `deploymentExtensions` come from the set with its deny status, just below.
        result.apply_to(&mut stack.properties);
        state.out_of_sync = false;
        let p = &mut stack.properties;
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        if let Some(error) = result.error.take() {
            errors.push(error);
        }
        drop(result);
        if deployment_canceled || self.cancel_requested(scope, name) {
            if errors.is_empty() {
                p.error = None;
                p.duration = Some(iso_duration(started.elapsed()));
            } else {
                Self::mark_failed(&mut stack, &state, errors, started);
            }
            mark_canceled(&mut stack);
            self.finish(fence, &stack, &state).await?;
            return Ok(stack);
        }
        if errors.is_empty() {
            p.error = None;
            p.provisioning_state = Some(DeploymentStackProvisioningState::Succeeded);
            p.duration = Some(iso_duration(started.elapsed()));
            self.finish(fence, &stack, &state).await?;
            Ok(stack)
        } else {
            self.fail_with(fence, stack, state, errors, started).await
        }
    }
}

struct PutJob {
    request: DeploymentStack,
    stack: DeploymentStack,
    /// The stored state as the PUT found it (with the PUT pending).
    previous: StoredState,
    correlation_id: String,
    fence: RecordFence,
}

/// Who a PUT's post-deployment part writes for.
pub(crate) struct PutRun<'a> {
    pub(crate) scope: &'a str,
    pub(crate) name: &'a str,
    pub(crate) fence: &'a RecordFence,
    pub(crate) correlation_id: &'a str,
    pub(crate) started: Instant,
}

/// Deny status as recorded: cairn applies no deny assignments, so ARM resources report `none` when the mode is
/// `none` and `notSupported` otherwise; extensible resources are always `notSupported`.
fn with_deny_status(set: ManagedSet, mode: &DenySettingsMode) -> ManagedSet {
    set.into_vec()
        .into_iter()
        .map(|mut resource| {
            resource.deny_status = Some(match (resource.target(), mode) {
                (ManagedTarget::Extensible { .. }, _) => DenyStatusMode::NotSupported,
                (ManagedTarget::Arm(_), DenySettingsMode::None) => DenyStatusMode::None,
                (ManagedTarget::Arm(_), _) => DenyStatusMode::NotSupported,
            });
            resource
        })
        .collect()
}

/// A resource deployed again with the same extension, type and identifiers but another `configId` means the
/// config now points at a different control plane: refused. One pass over each set (a stack of thousands of
/// resources is checked in linear time).
fn config_id_changes(previous: &ManagedSet, next: &ManagedSet) -> Option<ErrorDetail> {
    /// Extension, type and identifiers (what a resource is, on whichever control plane), and its `configId`.
    fn identity(r: &ManagedResource) -> Option<((String, String, String), String)> {
        match r.target() {
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => Some((
                (
                    extension.name.to_ascii_lowercase(),
                    resource_type.to_ascii_lowercase(),
                    identifiers.to_string(),
                ),
                extension.config_id.clone().unwrap_or_default(),
            )),
            ManagedTarget::Arm(_) => None,
        }
    }
    let mut managed_on: HashMap<(String, String, String), Vec<String>> = HashMap::new();
    for (what, config_id) in previous.iter().filter_map(identity) {
        managed_on.entry(what).or_default().push(config_id);
    }
    let mut details = Vec::new();
    for ((ext, ty, ids), config_id) in next.iter().filter_map(identity) {
        let key = (ext, ty, ids);
        let Some(old_config_ids) = managed_on.get(&key) else {
            continue;
        };
        let (ext, ty, _) = &key;
        for old_config_id in old_config_ids.iter().filter(|old| **old != config_id) {
            details.push(
                ErrorDetail::new(
                    "DeploymentStackExtensionConfigIdChanged",
                    format!(
                        "The extension '{ext}' resource of type '{ty}' was deployed to control plane \
                         '{config_id}', but the stack manages it on '{old_config_id}'. A stack cannot move \
                         resources between control planes. Fix: deploy with the config of '{old_config_id}', \
                         or remove the resource from the stack first."
                    ),
                )
                .with_target(ty.clone()),
            );
        }
    }
    (!details.is_empty()).then(|| {
        ErrorDetail::new(
            "DeploymentStackExtensionConfigIdChanged",
            "The extension config of the stack points at another control plane than the resources it manages.",
        )
        .with_details(details)
    })
}

#[cfg(test)]
mod tests {
    use cairn_arm::ResourceId;

    use super::*;

    fn widget(
        extension: &str,
        resource_type: &str,
        name: &str,
        config_id: &str,
    ) -> ManagedResource {
        ManagedResource::extensible(
            cairn_stacks::ExtensionIdentity {
                name: extension.into(),
                version: "1.0.0".into(),
                config_id: Some(config_id.into()),
            },
            resource_type,
            serde_json::json!({ "name": name }),
        )
    }

    #[test]
    fn a_resource_moved_to_another_config_id_is_refused_and_nothing_else() {
        let vault = ResourceId::parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v",
        )
        .unwrap();
        let previous: ManagedSet = [
            widget("Widgets", "widget", "a", "c1"),
            widget("Widgets", "widget", "b", "c1"),
            ManagedResource::arm(vault.clone()),
        ]
        .into_iter()
        .collect();
        assert!(config_id_changes(&previous, &previous).is_none());
        let next: ManagedSet = [
            // The same resource (extension and type compared without case) on another control plane.
            widget("WIDGETS", "Widget", "a", "c2"),
            widget("Widgets", "widget", "b", "c1"),
            widget("Widgets", "widget", "c", "c2"),
            ManagedResource::arm(vault),
        ]
        .into_iter()
        .collect();
        let refused = config_id_changes(&previous, &next).expect("refused");
        assert_eq!(refused.code(), "DeploymentStackExtensionConfigIdChanged");
        let details = serde_json::to_value(&refused).unwrap()["details"].clone();
        assert_eq!(details.as_array().map(Vec::len), Some(1), "{details:#}");
        assert_eq!(details[0]["target"], "widget");
        let message = details[0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("'c2'") && message.contains("'c1'"),
            "{message}"
        );
    }
}

//! Finishing stack operations whose process died: a stack whose record names an operation under way
//! (`deploying`, `deletingResources`, `deleting`) but whose lease has expired is taken over. An interrupted delete
//! runs again from the managed set the record kept (deletes already done count as done: 404 is success); an
//! interrupted update waits for its deployment — which the engine's own recovery resumes or fails — and then
//! diffs, unmanages and records as an update does. An update that died before its deployment started ends
//! `failed` with the managed set unchanged. Nothing is left `deploying` forever: the stack is never stuck.

use std::time::Instant;

use cairn_arm::models::stack::{DeploymentStack, DeploymentStackProvisioningState};
use cairn_arm::{ArmError, ErrorDetail};
use cairn_store::Timestamp;

use crate::lease::{LeasedOperation, add};
use crate::put::PutRun;
use crate::record::RecordFence;
use crate::record::iso_duration;
use crate::service::{StackService, lease_name, store_error};
use crate::state::{PendingOperation, StackHeader, StoredState};

/// The error an update that died before its deployment started ends with.
pub const OPERATION_INTERRUPTED: &str = "DeploymentStackOperationInterrupted";

/// What a recovery sweep did, by stack ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackRecoveryReport {
    /// Interrupted deletes started again (they run in the background).
    pub resumed_deletes: Vec<String>,
    /// Interrupted updates whose deployment had ended, being finished (in the background).
    pub resumed_updates: Vec<String>,
    /// Interrupted operations that could only be ended `failed`.
    pub failed: Vec<String>,
    /// Interrupted updates whose deployment is still running (or not yet recovered by the engine): tried again
    /// on the next sweep.
    pub waiting: Vec<String>,
}

impl StackRecoveryReport {
    pub fn is_empty(&self) -> bool {
        self.resumed_deletes.is_empty()
            && self.resumed_updates.is_empty()
            && self.failed.is_empty()
            && self.waiting.is_empty()
    }
}

pub(crate) enum Recovered {
    /// Running elsewhere, not interrupted, or already finished.
    Nothing,
    ResumedDelete,
    ResumedUpdate,
    Failed,
    Waiting,
}

impl StackService {
    /// Takes over every stack whose operation was interrupted (its lease expired while the record says an
    /// operation is under way) and finishes it. Call at start and periodically; stacks whose operation is still
    /// held by a live lease are left alone.
    pub async fn recover(&self) -> Result<StackRecoveryReport, ArmError> {
        let mut report = StackRecoveryReport::default();
        let interrupted: Vec<(String, String)> = self
            .all_stack_records()
            .await?
            .into_iter()
            .filter(|record| match record.stack.parse::<StackHeader>() {
                Ok(header) => header
                    .provisioning_state()
                    .map(DeploymentStackProvisioningState::parse)
                    .is_some_and(|state| !state.is_terminal()),
                Err(error) => {
                    // Nothing can be finished from a record that cannot be read; say so at every sweep rather
                    // than leave a stack silently in its last state.
                    tracing::warn!(
                        stack = %record.name,
                        scope = %record.scope,
                        %error,
                        "a stored stack cannot be read; its operation, if any, cannot be recovered"
                    );
                    false
                }
            })
            .map(|record| (record.scope, record.name))
            .collect();
        for (scope, name) in interrupted {
            let id = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/{name}");
            match self.recover_stack(&scope, &name).await {
                Ok(Recovered::Nothing) => {}
                Ok(Recovered::ResumedDelete) => report.resumed_deletes.push(id),
                Ok(Recovered::ResumedUpdate) => report.resumed_updates.push(id),
                Ok(Recovered::Failed) => report.failed.push(id),
                Ok(Recovered::Waiting) => report.waiting.push(id),
                Err(error) => {
                    tracing::warn!(stack = name, error = %error.detail().message(), "recovering a stack failed");
                }
            }
        }
        Ok(report)
    }

    /// Takes one stack over if its operation was interrupted.
    pub(crate) async fn recover_stack(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Recovered, ArmError> {
        let owner = format!(
            "{}:recover:{}",
            self.inner.settings.owner_id,
            uuid::Uuid::new_v4()
        );
        let now = Timestamp::now();
        let lease = match self
            .inner
            .store
            .acquire_lease(
                &lease_name(scope, name),
                &owner,
                now,
                add(now, self.inner.settings.lease_ttl),
            )
            .await
        {
            Ok(lease) => lease,
            // Someone holds it: the operation is alive (or its lease has not run out yet).
            Err(error) if error.is_conflict() => return Ok(Recovered::Nothing),
            Err(error) => return Err(store_error(error)),
        };
        let outcome = self.take_over(scope, name, lease, &owner).await;
        let counted = match &outcome {
            Ok(Recovered::ResumedDelete) => Some("resumed_delete"),
            Ok(Recovered::ResumedUpdate) => Some("resumed_update"),
            Ok(Recovered::Failed) => Some("failed"),
            _ => None,
        };
        if let Some(outcome) = counted {
            self.inner
                .settings
                .metrics
                .takeover(cairn_metrics::TakeoverKind::Stack, outcome);
        }
        if !matches!(
            outcome,
            Ok(Recovered::ResumedDelete | Recovered::ResumedUpdate)
        ) {
            // Resumed operations release the lease when they end; everything else is done now.
            self.release(scope, name, &owner).await;
        }
        outcome
    }

    async fn take_over(
        &self,
        scope: &str,
        name: &str,
        lease: cairn_store::Lease,
        owner: &str,
    ) -> Result<Recovered, ArmError> {
        // Read again under the lease: the operation may have ended between the listing and now.
        let Some((record, stack, state)) = self.load(scope, name).await? else {
            return Ok(Recovered::Nothing);
        };
        let interrupted = stack
            .properties
            .provisioning_state
            .as_ref()
            .is_some_and(|s| !s.is_terminal());
        if !interrupted {
            return Ok(Recovered::Nothing);
        }
        let fence = RecordFence::new(scope, name, record.version);
        match state.pending.clone() {
            Some(PendingOperation::Delete {
                correlation_id,
                action_on_unmanage,
                access,
                ..
            }) => {
                tracing::info!(stack = name, "resuming an interrupted stack delete");
                // Finished as the caller that started it: its deletes reach no further than that caller's.
                self.acting_for(access).spawn_delete(
                    lease,
                    owner.to_owned(),
                    fence,
                    stack,
                    state,
                    action_on_unmanage,
                    correlation_id,
                    None,
                );
                Ok(Recovered::ResumedDelete)
            }
            Some(PendingOperation::Put {
                correlation_id,
                access,
                ..
            }) => {
                self.acting_for(access)
                    .take_over_update(lease, owner, fence, stack, state, correlation_id)
                    .await
            }
            None => {
                // A record from before operations were recorded: nothing says what ran, so the set may be wrong.
                let state = StoredState {
                    out_of_sync: true,
                    ..state
                };
                self.end_interrupted(
                    &fence,
                    stack,
                    &state,
                    "The stack's last operation was interrupted and cannot be resumed; its list of managed \
                     resources may be inaccurate. Check the resources, then update or delete the stack with \
                     'bypassStackOutOfSyncError' set to true.",
                )
                .await?;
                Ok(Recovered::Failed)
            }
        }
    }

    async fn take_over_update(
        &self,
        lease: cairn_store::Lease,
        owner: &str,
        fence: RecordFence,
        stack: DeploymentStack,
        state: StoredState,
        correlation_id: String,
    ) -> Result<Recovered, ArmError> {
        let (scope, name) = (fence.scope().to_owned(), fence.name().to_owned());
        let deployment_scope = stack
            .properties
            .deployment_scope
            .clone()
            .unwrap_or_else(|| scope.clone());
        let deployment = match self.inner.engine.get(&deployment_scope, &name).await {
            Ok(deployment) => Some(deployment),
            Err(error) if error.to_arm().status() == 404 => None,
            Err(error) => return Err(error.to_arm()),
        };
        let ours = deployment
            .as_ref()
            .filter(|d| d.properties.correlation_id.as_deref() == Some(correlation_id.as_str()));
        let Some(deployment) = ours else {
            self.end_interrupted(
                &fence,
                stack,
                &state,
                "The stack's update was interrupted before its deployment started; nothing was deployed and the \
                 managed resources are unchanged. Run the update again.",
            )
            .await?;
            return Ok(Recovered::Failed);
        };
        let finished = deployment
            .properties
            .provisioning_state
            .as_ref()
            .is_some_and(|s| s.is_terminal());
        if !finished {
            return Ok(Recovered::Waiting);
        }
        tracing::info!(stack = name, "finishing an interrupted stack update");
        let operation = LeasedOperation {
            kind: "createOrUpdate",
            lease: lease.name,
            owner: owner.to_owned(),
            scope: scope.clone(),
            name: name.clone(),
            correlation_id: correlation_id.clone(),
        };
        let service = self.clone();
        self.spawn_leased(
            operation,
            async move {
                let snapshot = service.snapshot(&deployment_scope, &name, 0, None).await;
                let run = PutRun {
                    scope: &scope,
                    name: &name,
                    fence: &fence,
                    correlation_id: &correlation_id,
                    started: Instant::now(),
                };
                let mut stack = stack;
                stack.properties.deployment_id = stack
                    .properties
                    .deployment_id
                    .take()
                    .or_else(|| snapshot.as_ref().ok().and_then(|s| s.deployment.id.clone()));
                service.complete_put(run, stack, state, snapshot).await
            },
            |_| {},
        );
        Ok(Recovered::ResumedUpdate)
    }

    /// Ends an interrupted operation `failed` with `message`, keeping the stored managed set.
    async fn end_interrupted(
        &self,
        fence: &RecordFence,
        mut stack: DeploymentStack,
        state: &StoredState,
        message: &str,
    ) -> Result<(), ArmError> {
        tracing::warn!(
            stack = fence.name(),
            "ending an interrupted stack operation failed"
        );
        let p = &mut stack.properties;
        p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
        p.error = Some(ErrorDetail::new(OPERATION_INTERRUPTED, message));
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        p.duration = Some(iso_duration(std::time::Duration::ZERO));
        self.finish(fence, &stack, state).await
    }
}

//! A stack DELETE: every managed resource unmanaged with the request's actions (detach, or delete through the
//! providers and the extension host), then the record goes, or stays `failed` with what could not be deleted.

use std::time::Instant;

use cairn_arm::ArmError;
use cairn_arm::models::stack::{
    ActionOnUnmanage, DeploymentStack, DeploymentStackProvisioningState, StackDeleteOptions,
};
use cairn_stacks::{DiffError, unmanage_all};
use cairn_store::{Lease, Precondition};

use crate::cancel::mark_canceled;
use crate::ending::{Ending, OperationEnded};
use crate::lease::LeasedOperation;
use crate::record::{RecordFence, iso_duration};
use crate::request::{bad_request, check_actions, resource_policy};
use crate::service::StackService;
use crate::state::{PendingOperation, StoredState};

/// A stack delete under way in this process ([`StackService::delete_and_report`]).
#[derive(Debug)]
pub struct DeleteRun {
    outcome: tokio::sync::oneshot::Receiver<DeploymentStack>,
    ended: OperationEnded,
}

impl DeleteRun {
    /// Fires when the delete has ended; take it before [`DeleteRun::finished`], which consumes the run.
    pub fn ended(&self) -> OperationEnded {
        self.ended.clone()
    }

    /// Waits for the delete to end: the stack as the operation left it, with `deletedResources`,
    /// `detachedResources` and `failedResources` (`succeeded` when the record is gone, `failed` when it stays).
    /// `None` when the outcome could not be recorded (the stack's record says what is known).
    pub async fn finished(self) -> Option<DeploymentStack> {
        self.outcome.await.ok()
    }
}

impl StackService {
    /// Starts deleting a stack: every managed resource is unmanaged with the options' actions, then the stack
    /// record goes (unless some deletes failed: then it stays `failed` with them as `deleteFailed`). Returns
    /// `false` when there is no such stack (204).
    pub async fn delete(
        &self,
        scope: &str,
        name: &str,
        options: StackDeleteOptions,
        correlation_id: Option<String>,
    ) -> Result<bool, ArmError> {
        let started = self
            .delete_and_report(scope, name, options, correlation_id)
            .await?;
        Ok(started.is_some())
    }

    /// [`StackService::delete`] for a caller in this process that wants the outcome: `None` when there is no such
    /// stack, else the running delete, whose [`DeleteRun::finished`] gives the stack as the operation left it.
    /// A successful delete removes the record (a reader polling it may never see the last resources it unmanaged);
    /// the outcome still lists every one.
    pub async fn delete_and_report(
        &self,
        scope: &str,
        name: &str,
        options: StackDeleteOptions,
        correlation_id: Option<String>,
    ) -> Result<Option<DeleteRun>, ArmError> {
        check_actions(&options.action_on_unmanage)?;
        let Some((record, current)) = self.load_stack(scope, name).await? else {
            return Ok(None);
        };
        let correlation_id = correlation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let owner = self.operation_owner(&correlation_id);
        let lease = self
            .take_lease(scope, name, &owner, Some((&record, &current)))
            .await?;
        let accepted = async {
            let Some((record, mut stack, mut state)) = self.load(scope, name).await? else {
                return Ok(None);
            };
            Self::check_in_sync(name, &state, &stack, options.bypass_stack_out_of_sync_error)?;
            // What a `protect` pattern names is refused before anything is written or deleted; the run below
            // checks again against the ownership it reads then.
            let policy = resource_policy(&stack.properties, options.bypass_protection)
                .map_err(bad_request)?;
            // Ownership that cannot be read fails the run itself, with nothing deleted.
            if policy.protects_anything()
                && let Ok(ownership) = self.ownership(scope, name).await
                && let Err(error @ DiffError::ProtectedResources { .. }) = unmanage_all(
                    &state.managed_set,
                    &options.action_on_unmanage,
                    &ownership,
                    &policy,
                )
            {
                return Err(ArmError::from_detail(409, error.to_error_detail()));
            }
            stack.properties.provisioning_state = Some(DeploymentStackProvisioningState::Deleting);
            stack.properties.correlation_id = Some(correlation_id.clone());
            state.pending = Some(PendingOperation::Delete {
                correlation_id: correlation_id.clone(),
                action_on_unmanage: options.action_on_unmanage.clone(),
                access: self.access.clone(),
                bypass_protection: options.bypass_protection,
            });
            let written = self
                .put_record(
                    scope,
                    name,
                    &stack,
                    state.record(),
                    Precondition::Version(record.version),
                    Vec::new(),
                )
                .await?;
            Ok::<_, ArmError>(Some((
                stack,
                state,
                RecordFence::new(scope, name, written.version),
            )))
        }
        .await;
        let (stack, state, fence) = match accepted {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.release(scope, name, &owner).await;
                return Ok(None);
            }
            Err(error) => {
                self.release(scope, name, &owner).await;
                self.resume_if_interrupted(&error, scope, name);
                return Err(error);
            }
        };
        let (report, outcome) = tokio::sync::oneshot::channel();
        let (ended_sender, ended) = OperationEnded::channel();
        self.spawn_delete(
            lease,
            owner,
            fence,
            stack,
            state,
            options.action_on_unmanage,
            correlation_id,
            Some((report, ended_sender)),
        );
        Ok(Some(DeleteRun { outcome, ended }))
    }

    /// Runs a delete in the background under `lease` (renewed until it ends, then released); the stack as the
    /// delete left it goes to `report`, once the lease is released, and then its end is signalled.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn_delete(
        &self,
        lease: Lease,
        owner: String,
        fence: RecordFence,
        stack: DeploymentStack,
        state: StoredState,
        action: ActionOnUnmanage,
        correlation_id: String,
        report: Option<(
            tokio::sync::oneshot::Sender<DeploymentStack>,
            tokio::sync::watch::Sender<Ending>,
        )>,
    ) {
        let operation = LeasedOperation {
            kind: "delete",
            lease: lease.name,
            owner,
            scope: fence.scope().to_owned(),
            name: fence.name().to_owned(),
            correlation_id: correlation_id.clone(),
        };
        let service = self.clone();
        self.spawn_leased(
            operation,
            async move {
                service
                    .run_delete(&fence, stack, state, &action, &correlation_id)
                    .await
            },
            move |outcome| {
                if let Some((report, ended)) = report {
                    if let Some(Ok(stack)) = outcome {
                        let _ = report.send(stack);
                    }
                    // The outcome goes to `report`: a successful delete leaves no record to show.
                    let _ = ended.send(Ending::Ended(None));
                }
            },
        );
    }

    async fn run_delete(
        &self,
        fence: &RecordFence,
        mut stack: DeploymentStack,
        mut state: StoredState,
        action: &ActionOnUnmanage,
        correlation_id: &str,
    ) -> Result<DeploymentStack, ArmError> {
        let started = Instant::now();
        // What the other stacks manage must be known before anything is unmanaged: when it cannot be (a record
        // that cannot be read), the delete fails with nothing unmanaged instead of staying `deleting`.
        let diff = match self
            .ownership(fence.scope(), fence.name())
            .await
            .map_err(ArmError::into_detail)
            .and_then(|ownership| {
                let bypass = state
                    .pending
                    .as_ref()
                    .is_some_and(PendingOperation::bypasses_protection);
                let policy = resource_policy(&stack.properties, bypass)?;
                unmanage_all(&state.managed_set, action, &ownership, &policy)
                    .map_err(|error| error.to_error_detail())
            }) {
            Ok(diff) => diff,
            Err(error) => {
                Self::mark_failed(&mut stack, &state, vec![error], started);
                self.finish(fence, &stack, &state).await?;
                return Ok(stack);
            }
        };
        let mut result = self
            .unmanage(
                diff,
                action,
                correlation_id,
                Some((fence, || (stack.clone(), state.clone()))),
            )
            .await?;
        result.apply_to(&mut stack.properties);
        state.managed_set = std::mem::take(&mut result.resources);
        let canceled = self.cancel_requested(fence.scope(), fence.name());
        let succeeded = result.error.is_none() && !canceled;
        let p = &mut stack.properties;
        p.correlation_id = Some(correlation_id.to_owned());
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        p.duration = Some(iso_duration(started.elapsed()));
        if succeeded {
            // The record goes; the stack as it ended is only the caller's to report.
            p.provisioning_state = Some(DeploymentStackProvisioningState::Succeeded);
            self.delete_fenced(fence).await?;
            // Its drift detection results go with it: a new stack of the same name starts without them.
            self.forget_drift_results(fence.scope(), fence.name()).await;
        } else {
            p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
            if canceled {
                // The stack stays, managing what was not deleted; a later delete carries on.
                mark_canceled(&mut stack);
            }
            self.finish(fence, &stack, &state).await?;
        }
        Ok(stack)
    }
}

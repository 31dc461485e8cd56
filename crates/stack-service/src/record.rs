//! Writing a stack record while an operation runs: every write is a compare-and-swap on the version the
//! operation last wrote (a fence: once another process has taken the stack over after this one's lease ran out,
//! this one's writes fail instead of overwriting the newer state), and the unmanage progress — resources deleted
//! so far — published on the record while the deletes run, so a GET (and `cairn stack`) shows it live and a
//! process that takes over after a crash starts from what is left.
//!
//! The operation's last write goes through here too: the stack in a terminal state (`failed` with its errors, or
//! as it ended), its duration, and no operation pending.
//!
//! The inventory follows the record: what an operation deleted or detached is staged on its fence, and the next
//! fenced write — the one that records it on the stack — removes those resources' inventory rows, or marks them
//! detached, in the same store transaction.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_arm::models::stack::{
    DeploymentStack, DeploymentStackProvisioningState, ResourceReference,
};
use cairn_arm::{ArmError, ErrorDetail};
use cairn_stacks::{ManagedResource, ManagedSet, ManagedTarget, ResourceKey};
use cairn_store::{InventoryChange, Precondition};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::service::{StackService, store_error};
use crate::state::{StateRecord, StoredState};

/// The error of a write refused because another operation has written the record since this one did.
pub(crate) const SUPERSEDED: &str = "DeploymentStackOperationSuperseded";

/// One operation's right to write its stack record: the version it last wrote.
#[derive(Clone, Debug)]
pub(crate) struct RecordFence {
    scope: String,
    name: String,
    version: Arc<tokio::sync::Mutex<u64>>,
    /// Inventory changes the next write carries (what it is the first to record as deleted or detached).
    staged: Arc<std::sync::Mutex<Vec<InventoryChange>>>,
}

impl RecordFence {
    /// A fence for an operation that has just written (or read under its lease) `version` of the record.
    pub(crate) fn new(scope: &str, name: &str, version: u64) -> Self {
        Self {
            scope: scope.to_owned(),
            name: name.to_owned(),
            version: Arc::new(tokio::sync::Mutex::new(version)),
            staged: Arc::default(),
        }
    }

    /// Stages inventory changes for the next write of the record.
    pub(crate) fn stage(&self, changes: impl IntoIterator<Item = InventoryChange>) {
        self.staged_changes().extend(changes);
    }

    fn take_staged(&self) -> Vec<InventoryChange> {
        std::mem::take(&mut *self.staged_changes())
    }

    fn staged_changes(&self) -> std::sync::MutexGuard<'_, Vec<InventoryChange>> {
        // Only extended and taken whole: a panic elsewhere cannot leave it half-changed.
        self.staged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn scope(&self) -> &str {
        &self.scope
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

/// The inventory key of a resource a stack manages (the engine inventories it under the same identity).
pub(crate) fn inventory_key(resource: &ManagedResource) -> cairn_store::ResourceKey {
    match resource.target() {
        ManagedTarget::Arm(id) => cairn_store::ResourceKey::arm(&id.to_string()),
        ManagedTarget::Extensible {
            extension,
            resource_type,
            identifiers,
        } => cairn_store::ResourceKey::extension(
            &extension.name,
            extension.config_id.as_deref().filter(|id| !id.is_empty()),
            resource_type,
            identifiers,
        ),
    }
}

/// The inventory's side of resources deleted (or found gone) by a stack operation: their rows go.
pub(crate) fn deleted_rows<'r>(
    resources: impl IntoIterator<Item = &'r ManagedResource>,
) -> impl Iterator<Item = InventoryChange> {
    resources
        .into_iter()
        .map(|resource| InventoryChange::Delete(inventory_key(resource)))
}

/// The inventory's side of resources a stack operation detached: their rows stay, marked detached.
pub(crate) fn detached_rows<'r>(
    resources: impl IntoIterator<Item = &'r ManagedResource>,
) -> impl Iterator<Item = InventoryChange> {
    resources
        .into_iter()
        .map(|resource| InventoryChange::Detach(inventory_key(resource)))
}

fn superseded(name: &str) -> ArmError {
    ArmError::new(
        409,
        SUPERSEDED,
        format!(
            "The deployment stack '{name}' was changed by another operation while this one ran (this one's lease \
             had expired); its outcome was not recorded."
        ),
    )
}

impl StackService {
    /// Writes the record if nobody else has since this operation's last write; 409
    /// `DeploymentStackOperationSuperseded` otherwise.
    pub(crate) async fn write_fenced(
        &self,
        fence: &RecordFence,
        stack: &DeploymentStack,
        state: StateRecord<'_>,
    ) -> Result<(), ArmError> {
        let mut version = fence.version.lock().await;
        match self
            .put_record(
                &fence.scope,
                &fence.name,
                stack,
                state,
                Precondition::Version(*version),
                fence.take_staged(),
            )
            .await
        {
            Ok(record) => {
                *version = record.version;
                Ok(())
            }
            Err(error) if error.status() == 409 || error.status() == 404 => {
                Err(superseded(&fence.name))
            }
            Err(error) => Err(error),
        }
    }

    /// Deletes the record (the end of a successful stack delete) if nobody else has written it since this
    /// operation's last write; gone already counts as done.
    pub(crate) async fn delete_fenced(&self, fence: &RecordFence) -> Result<(), ArmError> {
        let version = fence.version.lock().await;
        match self
            .inner
            .store
            .delete_stack_with_inventory(
                &fence.scope,
                &fence.name,
                Precondition::Version(*version),
                fence.take_staged(),
            )
            .await
        {
            Ok(()) => {
                self.tell_record_changed();
                Ok(())
            }
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) if error.is_conflict() => Err(superseded(&fence.name)),
            Err(error) => Err(store_error(error)),
        }
    }

    /// Starts publishing deletes as they complete: send each deleted resource to the returned sender; the
    /// record is rewritten at most once per `interval` with `deletedResources` so far and the managed set without
    /// them (not once more when the sender is dropped: the operation's final write follows). Drop the sender and
    /// await the handle before the operation's final write.
    pub(crate) fn publish_deletes(
        &self,
        fence: RecordFence,
        stack: DeploymentStack,
        state: StoredState,
        interval: Duration,
    ) -> (mpsc::UnboundedSender<ManagedResource>, JoinHandle<()>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let service = self.clone();
        let handle = tokio::spawn(async move {
            let mut progress = DeleteProgress {
                stack,
                state,
                deleted: Vec::new(),
            };
            service
                .publish_loop(&fence, &mut progress, receiver, interval)
                .await;
        });
        (sender, handle)
    }

    async fn publish_loop(
        &self,
        fence: &RecordFence,
        progress: &mut DeleteProgress,
        mut receiver: mpsc::UnboundedReceiver<ManagedResource>,
        interval: Duration,
    ) {
        let mut writing = true;
        // `progress.deleted[..recorded]` are on the record already, their inventory rows gone with that write.
        let mut recorded = 0;
        while let Some(first) = receiver.recv().await {
            progress.deleted.push(first);
            let deadline = tokio::time::Instant::now() + interval;
            let mut closed = false;
            loop {
                tokio::select! {
                    next = receiver.recv() => match next {
                        Some(resource) => progress.deleted.push(resource),
                        None => { closed = true; break; }
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
            if closed {
                // The deletes are over and the operation's final write, which records them with the rest, comes
                // next: writing the whole record once more first would only delay it (a crash in between is
                // recovered by deleting again what is already gone, which counts as deleted).
                break;
            }
            if writing {
                let (stack, state) = progress.snapshot();
                fence.stage(deleted_rows(&progress.deleted[recorded..]));
                recorded = progress.deleted.len();
                if let Err(error) = self.write_fenced(fence, &stack, state.record()).await {
                    // Superseded or the store is failing: the final write will say so; stop publishing.
                    tracing::warn!(stack = fence.name, error = %error.detail().message(), "publishing stack delete progress failed");
                    writing = false;
                }
            }
        }
    }
}

/// The record as the deletes so far leave it.
struct DeleteProgress {
    stack: DeploymentStack,
    state: StoredState,
    deleted: Vec<ManagedResource>,
}

impl DeleteProgress {
    fn snapshot(&self) -> (DeploymentStack, StoredState) {
        let gone: HashSet<&ResourceKey> = self.deleted.iter().map(ManagedResource::key).collect();
        let remaining = ManagedSet::from_resources(
            self.state
                .managed_set
                .iter()
                .filter(|r| !gone.contains(&r.key()))
                .cloned(),
        );
        let mut stack = self.stack.clone();
        let p = &mut stack.properties;
        p.resources = Some(remaining.to_references());
        p.deployment_extensions = Some(remaining.deployment_extensions());
        p.deleted_resources = Some(
            self.deleted
                .iter()
                .map(ManagedResource::to_reference)
                .collect::<Vec<ResourceReference>>(),
        );
        let state = StoredState {
            managed_set: remaining,
            ..self.state.clone()
        };
        (stack, state)
    }
}

pub(crate) fn iso_duration(elapsed: Duration) -> String {
    format!("PT{}.{:03}S", elapsed.as_secs(), elapsed.subsec_millis())
}

pub(crate) fn update_failed(details: Vec<ErrorDetail>) -> ErrorDetail {
    ErrorDetail::new(
        "DeploymentStackUpdateFailed",
        "One or more stages of the deploymentStack failed.",
    )
    .with_details(details)
}

impl StackService {
    /// Ends the operation `failed` with `errors`; the stack as written.
    pub(crate) async fn fail_with(
        &self,
        fence: &RecordFence,
        mut stack: DeploymentStack,
        state: StoredState,
        errors: Vec<ErrorDetail>,
        started: Instant,
    ) -> Result<DeploymentStack, ArmError> {
        Self::mark_failed(&mut stack, &state, errors, started);
        self.finish(fence, &stack, &state).await?;
        Ok(stack)
    }

    /// The stack as a failed operation leaves it: `failed` with `errors`, managing `state`'s set.
    pub(crate) fn mark_failed(
        stack: &mut DeploymentStack,
        state: &StoredState,
        errors: Vec<ErrorDetail>,
        started: Instant,
    ) {
        let p = &mut stack.properties;
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
        p.error = Some(match errors.len() {
            1 if errors[0].code() == "DeploymentStackDeleteResourcesFailed" => errors[0].clone(),
            _ => update_failed(errors),
        });
        p.duration = Some(iso_duration(started.elapsed()));
    }

    /// The operation's last write: the stack in a terminal state, no operation pending.
    pub(crate) async fn finish(
        &self,
        fence: &RecordFence,
        stack: &DeploymentStack,
        state: &StoredState,
    ) -> Result<(), ArmError> {
        self.write_fenced(fence, stack, state.record().settled())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_iso_8601() {
        assert_eq!(iso_duration(Duration::from_millis(1_234)), "PT1.234S");
    }
}

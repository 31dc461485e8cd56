//! One stack operation at a time: the stack's lease (taken, renewed by a heartbeat while the operation runs,
//! released when it ends) and the out-of-sync guard that refuses to start over an interrupted operation.

use std::time::Duration;

use cairn_arm::ArmError;
use cairn_arm::models::stack::DeploymentStack;
use cairn_store::{Lease, Timestamp};

use crate::service::{StackService, lease_name, store_error};
use crate::state::StoredState;

/// When a lease taken or renewed at `now` expires.
pub(crate) fn add(now: Timestamp, duration: Duration) -> Timestamp {
    now.saturating_add(duration)
}

impl StackService {
    /// Takes the stack's lease, or answers 409 `DeploymentStackInNonTerminalState`.
    pub(crate) async fn take_lease(
        &self,
        scope: &str,
        name: &str,
        owner: &str,
        current: Option<&DeploymentStack>,
    ) -> Result<Lease, ArmError> {
        let now = Timestamp::now();
        match self
            .inner
            .store
            .acquire_lease(
                &lease_name(scope, name),
                owner,
                now,
                add(now, self.inner.settings.lease_ttl),
            )
            .await
        {
            Ok(lease) => Ok(lease),
            Err(error) if error.is_conflict() => {
                let state = current
                    .and_then(|s| s.properties.provisioning_state.as_ref())
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_else(|| "deploying".into());
                Err(ArmError::deployment_stack_in_non_terminal_state(
                    name, &state,
                ))
            }
            Err(error) => Err(store_error(error)),
        }
    }

    /// Renews `owner`'s lease until `stop` fires.
    pub(crate) fn heartbeat(
        &self,
        lease: String,
        owner: String,
    ) -> tokio::sync::oneshot::Sender<()> {
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let store = self.inner.store.clone();
        let interval = self.inner.settings.heartbeat_interval;
        let ttl = self.inner.settings.lease_ttl;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stop_rx => break,
                    () = tokio::time::sleep(interval) => {
                        let now = Timestamp::now();
                        if let Err(error) = store.renew_lease(&lease, &owner, now, add(now, ttl)).await {
                            tracing::warn!(lease, %error, "stack lease heartbeat failed");
                        }
                    }
                }
            }
        });
        stop_tx
    }

    pub(crate) async fn release(&self, scope: &str, name: &str, owner: &str) {
        if let Err(error) = self
            .inner
            .store
            .release_lease(&lease_name(scope, name), owner)
            .await
        {
            tracing::warn!(stack = name, %error, "releasing the stack lease failed");
        }
    }

    /// The out-of-sync guard: refused unless bypassed when the stored set may be wrong. A stack whose record
    /// names an interrupted operation answers 409 `DeploymentStackInNonTerminalState` (the caller starts its
    /// recovery); `bypassStackOutOfSyncError` takes the stack over as it is instead.
    pub(crate) fn check_in_sync(
        name: &str,
        state: &StoredState,
        current: &DeploymentStack,
        bypass: bool,
    ) -> Result<(), ArmError> {
        if bypass {
            return Ok(());
        }
        let interrupted = current
            .properties
            .provisioning_state
            .as_ref()
            .filter(|s| !s.is_terminal());
        if let (Some(provisioning), Some(_)) = (interrupted, &state.pending) {
            return Err(ArmError::new(
                409,
                cairn_arm::error::codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE,
                format!(
                    "The deployment stack '{name}' is in the non-terminal state '{}': its last operation was \
                     interrupted and is being resumed. Retry when it has ended, or set \
                     'bypassStackOutOfSyncError' to true to take the stack over as it is.",
                    provisioning.as_str()
                ),
            ));
        }
        if state.out_of_sync || interrupted.is_some() {
            return Err(ArmError::new(
                409,
                "DeploymentStackOutOfSync",
                format!(
                    "The deployment stack '{name}' might not have an accurate list of managed resources (its last \
                     operation did not finish). To proceed, check the resources and retry with \
                     'bypassStackOutOfSyncError' set to true."
                ),
            ));
        }
        Ok(())
    }

    /// After a request found an interrupted operation (and released the lease): resume it in the background.
    pub(crate) fn resume_if_interrupted(&self, error: &ArmError, scope: &str, name: &str) {
        if error.status() == 409
            && error.detail().code()
                == cairn_arm::error::codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE
        {
            let service = self.clone();
            let (scope, name) = (scope.to_owned(), name.to_owned());
            tokio::spawn(async move {
                if let Err(error) = service.recover_stack(&scope, &name).await {
                    tracing::warn!(stack = name, error = %error.detail().message(), "resuming an interrupted stack operation failed");
                }
            });
        }
    }
}

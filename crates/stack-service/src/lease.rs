//! One stack operation at a time: the stack's lease (taken, renewed by a heartbeat while the operation runs,
//! released when it ends) and the out-of-sync guard that refuses to start over an interrupted operation.
//!
//! An operation's lease owner names the operation (its correlation id, hex-encoded so no id can pass for another's
//! suffix). An operation's last write is the terminal record naming that correlation id, and only then does it
//! release the lease; a process that dies in between leaves a finished stack whose lease nobody renews. A new
//! operation that finds the lease held by the very operation the terminal record names (taken before the record was
//! written) takes it over at once instead of answering 409 until the lease expires (a claim TTL, a minute by default).

use std::time::{Duration, Instant};

use cairn_arm::ArmError;
use cairn_arm::models::stack::DeploymentStack;
use cairn_store::{Lease, StackRecord, Timestamp};

use crate::service::{StackService, lease_name, store_error};
use crate::state::StoredState;

use tracing::Instrument as _;

/// Separates a lease owner's unique part from the hex of its operation's correlation id.
const OPERATION_MARK: &str = ":op=";

fn hex(text: &str) -> String {
    text.bytes().map(|byte| format!("{byte:02x}")).collect()
}

/// When a lease taken or renewed at `now` expires.
pub(crate) fn add(now: Timestamp, duration: Duration) -> Timestamp {
    now.saturating_add(duration)
}

/// A stack operation run in the background under the stack's lease ([`StackService::spawn_leased`]).
pub(crate) struct LeasedOperation {
    /// `createOrUpdate` or `delete`, as the metrics name it.
    pub(crate) kind: &'static str,
    pub(crate) lease: String,
    pub(crate) owner: String,
    pub(crate) scope: String,
    pub(crate) name: String,
    pub(crate) correlation_id: String,
}

impl StackService {
    /// Runs `work` in the background under `operation`'s lease: renews the lease until the work ends, counts its
    /// duration, releases the lease, then gives `after` the outcome. When the service hands over first
    /// ([`StackService::hand_over`]) the work stops where it is (its record still names the operation, for recovery
    /// to finish), the lease is released at once and `after` gets `None`. Log lines of the work carry the stack and
    /// the operation's correlation id.
    pub(crate) fn spawn_leased<W, A>(&self, operation: LeasedOperation, work: W, after: A)
    where
        W: std::future::Future<Output = Result<DeploymentStack, ArmError>> + Send + 'static,
        A: FnOnce(Option<Result<DeploymentStack, ArmError>>) + Send + 'static,
    {
        let stop = self.heartbeat(operation.lease.clone(), operation.owner.clone());
        self.inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                operation.lease.clone(),
                tokio_util::sync::CancellationToken::new(),
            );
        let service = self.clone();
        let closing = self.inner.closing.clone();
        let span = tracing::info_span!(
            "stack_operation",
            stack = %operation.name,
            operation = operation.kind,
            correlation_id = %operation.correlation_id
        );
        self.inner.operations.spawn(
            async move {
                let started = Instant::now();
                let outcome = tokio::select! {
                    biased;
                    () = closing.cancelled() => None,
                    outcome = work => Some(outcome),
                };
                match &outcome {
                    Some(Ok(stack)) => service.inner.settings.metrics.stack_operation_ended(
                        operation.kind,
                        stack
                            .properties
                            .provisioning_state
                            .as_ref()
                            .map_or("unknown", |state| state.as_str()),
                        started.elapsed(),
                    ),
                    Some(Err(error)) => tracing::error!(
                        error = %error.detail().message(),
                        "the stack operation's outcome could not be recorded"
                    ),
                    None => tracing::info!(
                        "stack operation handed over: stopped where it was, its lease released for recovery"
                    ),
                }
                let _ = stop.send(());
                service
                    .inner
                    .cancels
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&operation.lease);
                service
                    .release(&operation.scope, &operation.name, &operation.owner)
                    .await;
                after(outcome);
            }
            .instrument(span),
        );
    }

    /// Hands this process's stack operations over to another process: each running operation stops where it is
    /// (its record still names it) and its lease is released at once, so recovery — on another replica, or in this
    /// server after a restart — takes it over without waiting for the lease to expire. Returns once every operation
    /// has stopped; operations started later stop at once. Called by `cairn serve` on shutdown, before the engine
    /// hands its deployments over.
    pub async fn hand_over(&self) {
        self.inner.closing.cancel();
        self.inner.operations.close();
        self.inner.operations.wait().await;
    }

    /// The lease owner of an operation with `correlation_id`, unique to this attempt.
    pub(crate) fn operation_owner(&self, correlation_id: &str) -> String {
        format!(
            "{}:{}{OPERATION_MARK}{}",
            self.inner.settings.owner_id,
            uuid::Uuid::new_v4(),
            hex(correlation_id)
        )
    }

    /// Takes the stack's lease, or answers 409 `DeploymentStackInNonTerminalState`. A lease held by the finished
    /// operation the `current` record names (see the module documentation) is taken over.
    pub(crate) async fn take_lease(
        &self,
        scope: &str,
        name: &str,
        owner: &str,
        current: Option<(&StackRecord, &DeploymentStack)>,
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
                if let Some(lease) = self
                    .take_finished_lease(scope, name, owner, current)
                    .await?
                {
                    return Ok(lease);
                }
                let state = current
                    .and_then(|(_, s)| s.properties.provisioning_state.as_ref())
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_else(|| "deploying".into());
                Err(ArmError::deployment_stack_in_non_terminal_state(
                    name, &state,
                ))
            }
            Err(error) => Err(store_error(error)),
        }
    }

    /// The lease for `owner` when its holder is the operation whose terminal record `current` is: that operation
    /// ended and its process died before releasing the lease. The holder must name the record's correlation id and
    /// have taken the lease before the record was written (a later operation reusing the correlation id is not the
    /// one that finished). `None` when the lease is someone else's (or was released and taken again meanwhile: the
    /// release names the holder it saw, so it cannot free another's).
    async fn take_finished_lease(
        &self,
        scope: &str,
        name: &str,
        owner: &str,
        current: Option<(&StackRecord, &DeploymentStack)>,
    ) -> Result<Option<Lease>, ArmError> {
        let Some((record, correlation_id)) = current
            .filter(|(_, stack)| {
                stack
                    .properties
                    .provisioning_state
                    .as_ref()
                    .is_some_and(|state| state.is_terminal())
            })
            .and_then(|(record, stack)| {
                Some((record, stack.properties.correlation_id.as_deref()?))
            })
        else {
            return Ok(None);
        };
        let lease_name = lease_name(scope, name);
        let store = &self.inner.store;
        let Some(held) = store.get_lease(&lease_name).await.map_err(store_error)? else {
            return Ok(None);
        };
        let finished = format!("{OPERATION_MARK}{}", hex(correlation_id));
        if !held.owner.ends_with(&finished) || held.acquired_at > record.updated_at {
            return Ok(None);
        }
        match store.release_lease(&lease_name, &held.owner).await {
            Ok(()) => {}
            Err(error) if error.is_conflict() => return Ok(None),
            Err(error) => return Err(store_error(error)),
        }
        let now = Timestamp::now();
        match store
            .acquire_lease(
                &lease_name,
                owner,
                now,
                add(now, self.inner.settings.lease_ttl),
            )
            .await
        {
            Ok(lease) => {
                tracing::info!(
                    stack = name,
                    "took over the lease of the stack's finished operation"
                );
                Ok(Some(lease))
            }
            Err(error) if error.is_conflict() => Ok(None),
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

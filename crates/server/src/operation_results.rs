//! The answers of long-running operations polled through `Location` (`/subscriptions/{s}/operationresults/{id}`):
//! kept in the store, so whichever server a poll reaches answers it. Deletes and what-ifs finish before the first
//! answer and are stored done; a large bulk delete is stored running under this server's claim, renewed while it
//! runs, and finished with its answer. A running result whose claim expired belongs to a server that stopped: it
//! reads as failed, `OperationInterrupted`.

use std::future::Future;
use std::time::Duration;

use axum::http::StatusCode;
use cairn_arm::ArmError;
use cairn_store::{
    NewOperationResult, OperationResultState, Store, StoreError, StoreResult, Timestamp,
};
use serde_json::Value;

/// How long a result is kept after its last change.
const RESULT_LIFETIME: Duration = Duration::from_secs(3600);

/// What a poll of an operation answers.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    /// Still running: poll again.
    Running,
    /// The final answer.
    Done {
        status: StatusCode,
        body: Option<Value>,
    },
}

/// Stores the final answer of an operation that ended before its first answer.
pub(crate) async fn record_done(
    store: &dyn Store,
    subscription: &str,
    id: &str,
    status: StatusCode,
    body: Option<Value>,
) -> StoreResult<()> {
    let now = Timestamp::now();
    store
        .put_operation_result(
            NewOperationResult {
                id: id.to_owned(),
                subscription: subscription.to_owned(),
                state: OperationResultState::Done {
                    status: status.as_u16(),
                    body,
                },
                expires_at: now.saturating_add(RESULT_LIFETIME),
            },
            now,
        )
        .await
}

/// The outcome of operation `id` of `subscription`, when it is known.
pub(crate) async fn read(
    store: &dyn Store,
    subscription: &str,
    id: &str,
) -> StoreResult<Option<Outcome>> {
    let now = Timestamp::now();
    Ok(store
        .get_operation_result(subscription, id, now)
        .await?
        .map(|record| match record.state {
            OperationResultState::Running {
                owner_expires_at, ..
            } if owner_expires_at > now => Outcome::Running,
            OperationResultState::Running { .. } => {
                let error = ArmError::new(
                    500,
                    "OperationInterrupted",
                    "The server running this operation stopped before it finished. What it did is done; send the \
                     request again to finish it.",
                );
                Outcome::Done {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    body: serde_json::to_value(error.to_response()).ok(),
                }
            }
            OperationResultState::Done { status, body } => Outcome::Done {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                body,
            },
        }))
}

/// Runs `work` as operation `id` of `subscription` under this server's claim (`owner`, renewed every third of
/// `claim_ttl` while it runs), then stores its answer. Returns once the operation is stored running; `work` goes on
/// in the background.
pub(crate) async fn run_claimed<W>(
    store: std::sync::Arc<dyn Store>,
    subscription: &str,
    id: &str,
    owner: &str,
    claim_ttl: Duration,
    work: W,
) -> StoreResult<()>
where
    W: Future<Output = (StatusCode, Option<Value>)> + Send + 'static,
{
    let now = Timestamp::now();
    store
        .put_operation_result(
            NewOperationResult {
                id: id.to_owned(),
                subscription: subscription.to_owned(),
                state: OperationResultState::Running {
                    owner: owner.to_owned(),
                    owner_expires_at: now.saturating_add(claim_ttl),
                },
                expires_at: now.saturating_add(RESULT_LIFETIME),
            },
            now,
        )
        .await?;
    let (id, owner) = (id.to_owned(), owner.to_owned());
    let heartbeat = {
        let (store, id, owner) = (store.clone(), id.clone(), owner.clone());
        let interval = (claim_ttl / 3).max(Duration::from_millis(100));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let now = Timestamp::now();
                if let Err(error) = store
                    .renew_operation_result(&id, &owner, now.saturating_add(claim_ttl), now)
                    .await
                {
                    tracing::warn!(operation = %id, %error, "could not renew a running operation's claim");
                }
            }
        })
    };
    tokio::spawn(async move {
        let (status, body) = work.await;
        heartbeat.abort();
        let finished = store
            .finish_operation_result(&id, &owner, status.as_u16(), body, Timestamp::now())
            .await;
        match finished {
            Ok(()) => {}
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                tracing::warn!(operation = %id, "an operation ended after its result was taken over or expired");
            }
            Err(error) => {
                tracing::warn!(operation = %id, %error, "could not record an operation's end")
            }
        }
    });
    Ok(())
}

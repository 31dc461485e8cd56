//! Helpers for long-running work: stepwise LROs (`operationHandle` + `/longRunningOperation/get`) and
//! RELO status tracking (a non-terminal `status` on the resource, reported by later gets).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cairn_extension_contract::OperationStatus;
use cairn_extension_contract::v2::{Error, LongRunningOperation};
use serde_json::{Value, json};

use crate::error::{ExtensionError, codes};

/// How long a finished operation stays pollable.
const FINISHED_RETENTION: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
enum Progress {
    Running,
    Succeeded,
    Failed(Error),
}

#[derive(Debug)]
struct Entry {
    progress: Progress,
    finished_at: Option<Instant>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the map inconsistent (single inserts and updates).
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn prune(entries: &mut HashMap<String, Entry>) {
    entries.retain(|_, entry| {
        entry
            .finished_at
            .is_none_or(|at| at.elapsed() < FINISHED_RETENTION)
    });
}

fn outcome(result: Result<Result<(), Error>, tokio::task::JoinError>) -> Progress {
    match result {
        Ok(Ok(())) => Progress::Succeeded,
        Ok(Err(error)) => Progress::Failed(error),
        Err(_) => Progress::Failed(Error::new(
            codes::INTERNAL_SERVER_ERROR,
            "An unexpected error occurred.",
        )),
    }
}

/// Runs work in the background and answers `/longRunningOperation/get` for it (stepwise LRO).
///
/// A handler calls [`OperationTracker::start`] and returns `Applied::Accepted(operation)` (or
/// `Deleted::Accepted`); register the same tracker with `Extension::operations` so polls reach it.
/// Operations live in memory: a restarted extension answers `OperationNotFound` for older handles.
#[derive(Debug, Clone)]
pub struct OperationTracker {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    retry_after_seconds: i32,
}

impl Default for OperationTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl OperationTracker {
    /// A tracker telling hosts to poll every second.
    pub fn new() -> Self {
        Self::with_retry_after(1)
    }

    /// A tracker with the given `retryAfterSeconds`.
    pub fn with_retry_after(seconds: i32) -> Self {
        Self {
            entries: Arc::default(),
            retry_after_seconds: seconds.max(0),
        }
    }

    /// Starts `work` on the tokio runtime and returns the `Running` operation to answer with (202).
    pub fn start<F>(&self, work: F) -> LongRunningOperation
    where
        F: Future<Output = Result<(), Error>> + Send + 'static,
    {
        let id = uuid::Uuid::new_v4().to_string();
        {
            let mut entries = lock(&self.entries);
            prune(&mut entries);
            entries.insert(
                id.clone(),
                Entry {
                    progress: Progress::Running,
                    finished_at: None,
                },
            );
        }
        let entries = Arc::clone(&self.entries);
        let key = id.clone();
        tokio::spawn(async move {
            let progress = outcome(tokio::spawn(work).await);
            if let Some(entry) = lock(&entries).get_mut(&key) {
                entry.progress = progress;
                entry.finished_at = Some(Instant::now());
            }
        });
        LongRunningOperation {
            status: OperationStatus::running(),
            retry_after_seconds: Some(self.retry_after_seconds),
            operation_handle: Some(json!({ "operationId": id })),
            error: None,
        }
    }

    /// Answers a poll: the body of `/longRunningOperation/get` is the handle itself.
    pub fn poll(&self, handle: &Value) -> Result<LongRunningOperation, ExtensionError> {
        let Some(id) = handle.get("operationId").and_then(Value::as_str) else {
            return Err(ExtensionError::invalid(
                codes::INVALID_REQUEST,
                "/operationId",
                "The operation handle has no 'operationId' string.",
            ));
        };
        let mut entries = lock(&self.entries);
        prune(&mut entries);
        let Some(entry) = entries.get(id) else {
            return Err(ExtensionError::new(
                404,
                codes::OPERATION_NOT_FOUND,
                format!("The operation '{id}' is unknown or expired."),
            ));
        };
        Ok(match &entry.progress {
            Progress::Running => LongRunningOperation {
                status: OperationStatus::running(),
                retry_after_seconds: Some(self.retry_after_seconds),
                operation_handle: Some(handle.clone()),
                error: None,
            },
            Progress::Succeeded => LongRunningOperation {
                status: OperationStatus::succeeded(),
                retry_after_seconds: None,
                operation_handle: None,
                error: None,
            },
            Progress::Failed(error) => LongRunningOperation {
                status: OperationStatus::failed(),
                retry_after_seconds: None,
                operation_handle: None,
                error: Some(error.clone()),
            },
        })
    }
}

/// RELO bookkeeping: the last operation's status per resource key, which the handler's `get` reports
/// as the resource's `status` (and `error`) until the next operation starts.
#[derive(Debug, Clone, Default)]
pub struct ReloBoard {
    entries: Arc<Mutex<HashMap<String, Progress>>>,
}

impl ReloBoard {
    /// An empty board.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `key` `Running`, runs `work` in the background, then records `Succeeded` or `Failed`.
    pub fn run<F>(&self, key: impl Into<String>, work: F)
    where
        F: Future<Output = Result<(), Error>> + Send + 'static,
    {
        let key = key.into();
        lock(&self.entries).insert(key.clone(), Progress::Running);
        let entries = Arc::clone(&self.entries);
        tokio::spawn(async move {
            let progress = outcome(tokio::spawn(work).await);
            lock(&entries).insert(key, progress);
        });
    }

    /// The status to report for `key` (`None`: no operation recorded, i.e. `Succeeded`), with the error
    /// of a failed operation.
    pub fn status(&self, key: &str) -> Option<(OperationStatus, Option<Error>)> {
        lock(&self.entries).get(key).map(|progress| match progress {
            Progress::Running => (OperationStatus::running(), None),
            Progress::Succeeded => (OperationStatus::succeeded(), None),
            Progress::Failed(error) => (OperationStatus::failed(), Some(error.clone())),
        })
    }

    /// Forgets `key` (e.g. after the resource is deleted).
    pub fn clear(&self, key: &str) {
        lock(&self.entries).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn wait_until_terminal(
        tracker: &OperationTracker,
        handle: &Value,
    ) -> LongRunningOperation {
        for _ in 0..200 {
            let operation = tracker.poll(handle).unwrap();
            if operation.status.is_terminal() {
                return operation;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("operation did not finish");
    }

    #[tokio::test]
    async fn stepwise_operation_runs_to_success() {
        let tracker = OperationTracker::new();
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let started = tracker.start(async move {
            let _ = wait.await;
            Ok(())
        });
        assert_eq!(started.status.as_str(), "Running");
        let handle = started.operation_handle.clone().unwrap();
        assert_eq!(tracker.poll(&handle).unwrap().status.as_str(), "Running");
        release.send(()).unwrap();
        let done = wait_until_terminal(&tracker, &handle).await;
        assert!(done.status.is_succeeded());
        assert_eq!(done.operation_handle, None);
    }

    #[tokio::test]
    async fn failed_and_panicking_work_report_errors() {
        let tracker = OperationTracker::new();
        let failed = tracker.start(async { Err(Error::new("QueueNotEmpty", "still full")) });
        let done = wait_until_terminal(&tracker, failed.operation_handle.as_ref().unwrap()).await;
        assert!(done.status.is_failed());
        assert_eq!(done.error.unwrap().code, "QueueNotEmpty");

        let panicked = tracker.start(async { panic!("boom") });
        let done = wait_until_terminal(&tracker, panicked.operation_handle.as_ref().unwrap()).await;
        assert_eq!(done.error.unwrap().code, codes::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn unknown_handles_are_rejected() {
        let tracker = OperationTracker::new();
        assert_eq!(
            tracker
                .poll(&json!({ "operationId": "nope" }))
                .unwrap_err()
                .status(),
            404
        );
        assert_eq!(tracker.poll(&json!({})).unwrap_err().status(), 400);
    }

    #[tokio::test]
    async fn relo_board_reports_running_then_result() {
        let board = ReloBoard::new();
        assert_eq!(board.status("a"), None);
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        board.run("a", async move {
            let _ = wait.await;
            Err(Error::new("Broken", "it broke"))
        });
        assert_eq!(board.status("a").unwrap().0.as_str(), "Running");
        release.send(()).unwrap();
        for _ in 0..200 {
            if board.status("a").unwrap().0.is_terminal() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (status, error) = board.status("a").unwrap();
        assert!(status.is_failed());
        assert_eq!(error.unwrap().code, "Broken");
        board.clear("a");
        assert_eq!(board.status("a"), None);
    }
}

//! The deployments running on this engine, so a cancel reaches its run, recovery leaves live runs alone, and a hand
//! over knows when every run has stopped and which claims are still held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_store::{DeploymentId, DeploymentKey};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The records of one running tree whose claims it holds: the root and its nested deployments still running.
/// Shared between the run (which renews and releases them) and the registry (which releases what a run stopped
/// by force still held).
#[derive(Clone, Default)]
pub(crate) struct Claims(Arc<Mutex<Vec<DeploymentId>>>);

impl Claims {
    pub(crate) fn of(root: DeploymentId) -> Self {
        Claims(Arc::new(Mutex::new(vec![root])))
    }

    pub(crate) fn add(&self, id: DeploymentId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(id);
    }

    pub(crate) fn remove(&self, id: &DeploymentId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|held| held != id);
    }

    pub(crate) fn ids(&self) -> Vec<DeploymentId> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// How to reach a running deployment: its run ID, its cancel and the claims its tree holds.
pub(crate) struct RunControl {
    pub id: DeploymentId,
    pub cancel: CancellationToken,
    pub claims: Claims,
}

/// The deployments running on this engine, by folded key.
pub(crate) struct RunRegistry {
    runs: Mutex<HashMap<(String, String), RunControl>>,
    /// How many runs are registered, for [`RunRegistry::wait_until_empty`].
    running: watch::Sender<usize>,
}

impl Default for RunRegistry {
    fn default() -> Self {
        RunRegistry {
            runs: Mutex::default(),
            running: watch::Sender::new(0),
        }
    }
}

impl RunRegistry {
    pub(crate) fn insert(&self, key: &DeploymentKey, control: RunControl) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(key.folded(), control);
            self.running.send_replace(runs.len());
        }
    }

    pub(crate) fn finish(&self, key: &DeploymentKey) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.remove(&key.folded());
            self.running.send_replace(runs.len());
        }
    }

    pub(crate) fn is_running(&self, key: &DeploymentKey) -> bool {
        self.runs
            .lock()
            .map(|runs| runs.contains_key(&key.folded()))
            .unwrap_or(false)
    }

    pub(crate) fn cancel(&self, key: &DeploymentKey, id: &DeploymentId) -> bool {
        let Ok(runs) = self.runs.lock() else {
            return false;
        };
        match runs.get(&key.folded()) {
            Some(control) if &control.id == id => {
                control.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// How many runs are registered.
    pub(crate) fn running(&self) -> usize {
        *self.running.borrow()
    }

    /// A receiver told of every run registered or finished from now on.
    pub(crate) fn changes(&self) -> watch::Receiver<usize> {
        self.running.subscribe()
    }

    /// Resolves once no run is registered.
    pub(crate) async fn wait_until_empty(&self) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|count| *count == 0).await;
    }

    /// Every claim the registered runs still hold.
    pub(crate) fn held_claims(&self) -> Vec<DeploymentId> {
        self.runs
            .lock()
            .map(|runs| runs.values().flat_map(|run| run.claims.ids()).collect())
            .unwrap_or_default()
    }
}

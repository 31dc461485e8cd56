//! The deployments running on this engine, so a cancel reaches its run and recovery leaves live runs alone.

use std::collections::HashMap;
use std::sync::Mutex;

use cairn_store::{DeploymentId, DeploymentKey};
use tokio_util::sync::CancellationToken;

/// How to reach a running deployment: its run ID and its cancel.
pub(crate) struct RunControl {
    pub id: DeploymentId,
    pub cancel: CancellationToken,
}

/// The deployments running on this engine, by folded key.
#[derive(Default)]
pub(crate) struct RunRegistry {
    runs: Mutex<HashMap<(String, String), RunControl>>,
}

impl RunRegistry {
    pub(crate) fn insert(&self, key: &DeploymentKey, control: RunControl) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(key.folded(), control);
        }
    }

    pub(crate) fn finish(&self, key: &DeploymentKey) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.remove(&key.folded());
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
}

//! `EngineError`: what the engine's public API returns, with the ARM error (status, code, message) the server answers
//! with. Messages never contain secret values.

use cairn_arm::{ArmError, ErrorDetail};
use cairn_store::StoreError;

/// A failure of an engine call (not of a deployment: a failed deployment is a record with `error`).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An ARM error for the caller (404 not found, 409 active, 400 invalid template, ...).
    #[error("{0}")]
    Arm(ArmError),
    /// The store failed.
    #[error("failed to {0}")]
    Store(#[from] StoreError),
    /// The engine is shutting down or its coordinator has stopped.
    #[error("the deployment engine has shut down")]
    ShutDown,
}

impl EngineError {
    pub fn arm(status: u16, code: &str, message: impl Into<String>) -> Self {
        EngineError::Arm(ArmError::new(status, code, message))
    }

    /// The ARM error for a response. Store and shutdown failures become 500/503 without internals.
    pub fn to_arm(&self) -> ArmError {
        match self {
            EngineError::Arm(e) => e.clone(),
            EngineError::Store(StoreError::NotFound { .. }) => {
                ArmError::new(404, "NotFound", "The requested record was not found.")
            }
            EngineError::Store(StoreError::Conflict { .. }) => ArmError::new(
                409,
                "Conflict",
                "The request conflicts with a concurrent change; retry it.",
            ),
            EngineError::Store(_) => ArmError::new(
                500,
                "InternalServerError",
                "The deployment store failed; see the server log.",
            ),
            EngineError::ShutDown => ArmError::new(
                503,
                "ServiceUnavailable",
                "The deployment engine is shutting down.",
            ),
        }
    }

    /// The error detail (for embedding).
    pub fn detail(&self) -> ErrorDetail {
        self.to_arm().into_detail()
    }
}

impl From<ArmError> for EngineError {
    fn from(e: ArmError) -> Self {
        EngineError::Arm(e)
    }
}

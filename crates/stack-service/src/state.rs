//! What the service persists beside the stack resource: the managed set (in `cairn-stacks`' versioned form),
//! whether it may be inaccurate (the out-of-sync guard), and the operation under way, so a process that takes
//! over after a crash can finish it.

use cairn_arm::models::stack::ActionOnUnmanage;
use cairn_stacks::ManagedSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The stack tag that lets other stacks manage this stack's resources too.
pub const SHARE_TAG: &str = "cairn.shareResources";

/// The `managed_set` column of a stack record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredState {
    pub(crate) managed_set: ManagedSet,
    /// Set when an operation could not establish the set (then PUT/DELETE need `bypassStackOutOfSyncError`).
    #[serde(default)]
    pub(crate) out_of_sync: bool,
    /// The operation under way (set while the stack is in a non-terminal state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pending: Option<PendingOperation>,
}

/// An operation a stack record says is under way: what recovery needs to finish it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum PendingOperation {
    /// A create or update. Its deployment is the stack's name at its `deploymentScope` and carries this
    /// correlation id (a deployment with another one belongs to an earlier operation: this one never started).
    #[serde(rename_all = "camelCase")]
    Put { correlation_id: String },
    /// A stack delete with these unmanage actions.
    #[serde(rename_all = "camelCase")]
    Delete {
        correlation_id: String,
        action_on_unmanage: ActionOnUnmanage,
    },
}

impl StoredState {
    pub(crate) fn to_value(&self) -> Value {
        // A managed set holds only strings, numbers and objects, so serialising cannot fail; fall back to an empty
        // object rather than panic.
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Default::default()))
    }

    pub(crate) fn from_value(value: &Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(value)
    }
}

//! What the service persists beside the stack resource: the managed set (in `cairn-stacks`' versioned form) and
//! whether it may be inaccurate (the out-of-sync guard).

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

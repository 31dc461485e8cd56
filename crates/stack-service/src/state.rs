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
#[derive(Clone, Debug, Default, Deserialize)]
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

/// A [`StoredState`] as written, borrowed: a write serialises the state it holds without copying its managed set
/// (thousands of records in a big stack), with the pending operation it is to record.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StateRecord<'a> {
    managed_set: &'a ManagedSet,
    out_of_sync: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending: Option<&'a PendingOperation>,
}

impl StateRecord<'_> {
    /// The state with no operation pending: what an operation's last write records.
    pub(crate) fn settled(self) -> Self {
        Self {
            pending: None,
            ..self
        }
    }

    pub(crate) fn to_value(self) -> Value {
        // A managed set holds only strings, numbers and objects, so serialising cannot fail; fall back to an empty
        // object rather than panic.
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Default::default()))
    }
}

impl Serialize for StoredState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.record().serialize(serializer)
    }
}

impl StoredState {
    /// The state as a write records it.
    pub(crate) fn record(&self) -> StateRecord<'_> {
        StateRecord {
            managed_set: &self.managed_set,
            out_of_sync: self.out_of_sync,
            pending: self.pending.as_ref(),
        }
    }

    pub(crate) fn from_value(value: &Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(value)
    }
}

#[cfg(test)]
mod tests {
    use cairn_arm::ResourceId;
    use cairn_stacks::ManagedResource;
    use serde_json::json;

    use super::*;

    fn state() -> StoredState {
        let site =
            ResourceId::parse("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/a")
                .unwrap();
        StoredState {
            managed_set: [ManagedResource::arm(site)].into_iter().collect(),
            out_of_sync: true,
            pending: Some(PendingOperation::Put {
                correlation_id: "c".into(),
            }),
        }
    }

    #[test]
    fn a_state_is_written_through_its_borrowed_record_and_reads_back_the_same() {
        let state = state();
        let written = state.record().to_value();
        assert_eq!(
            written,
            json!({
                "managedSet": serde_json::to_value(&state.managed_set).unwrap(),
                "outOfSync": true,
                "pending": {"kind": "put", "correlationId": "c"},
            })
        );
        assert_eq!(written, serde_json::to_value(&state).unwrap());
        let read = StoredState::from_value(&written).unwrap();
        assert_eq!(read.managed_set, state.managed_set);
        assert!(read.out_of_sync);
        assert_eq!(read.pending, state.pending);
    }

    #[test]
    fn a_settled_record_has_no_operation_pending_and_keeps_the_rest() {
        let state = state();
        let written = state.record().settled().to_value();
        assert!(written.get("pending").is_none(), "{written:#}");
        let read = StoredState::from_value(&written).unwrap();
        assert_eq!(read.managed_set, state.managed_set);
        assert!(read.out_of_sync);
        assert_eq!(read.pending, None);
        assert!(state.pending.is_some(), "the state itself is not changed");
    }
}

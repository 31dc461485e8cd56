//! What the service persists beside the stack resource: the managed set (in `cairn-stacks`' versioned form),
//! whether it may be inaccurate (the out-of-sync guard), and the operation under way, so a process that takes
//! over after a crash can finish it.

use cairn_arm::Access;
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

/// The parts of a stored stack resource that the ownership check and recovery read across every stack, parsed
/// without the rest (a big stack's resource lists thousands of resources).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StackHeader {
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    tags: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    properties: Option<HeaderProperties>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderProperties {
    #[serde(default)]
    provisioning_state: Option<String>,
    #[serde(default)]
    protect: Option<Vec<String>>,
}

impl StackHeader {
    /// The stack's `protect` patterns as written.
    pub(crate) fn protect_patterns(&self) -> &[String] {
        self.properties
            .as_ref()
            .and_then(|p| p.protect.as_deref())
            .unwrap_or_default()
    }

    /// Whether the stack lets other stacks manage its resources too ([`SHARE_TAG`] set to `true`).
    pub(crate) fn shares_resources(&self) -> bool {
        self.tags
            .as_ref()
            .and_then(|tags| tags.get(SHARE_TAG))
            .and_then(Value::as_str)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub(crate) fn provisioning_state(&self) -> Option<&str> {
        self.properties.as_ref()?.provisioning_state.as_deref()
    }
}

/// An operation a stack record says is under way: what recovery needs to finish it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum PendingOperation {
    /// A create or update. Its deployment is the stack's name at its `deploymentScope` and carries this
    /// correlation id (a deployment with another one belongs to an earlier operation: this one never started).
    #[serde(rename_all = "camelCase")]
    Put {
        correlation_id: String,
        /// What the caller that started it may reach: the operation is finished as that caller.
        #[serde(default, skip_serializing_if = "Access::is_unrestricted")]
        access: Access,
        /// The operation deletes what the stack's `protect` patterns name (asked per operation, never kept).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bypass_protection: bool,
    },
    /// A stack delete with these unmanage actions.
    #[serde(rename_all = "camelCase")]
    Delete {
        correlation_id: String,
        action_on_unmanage: ActionOnUnmanage,
        #[serde(default, skip_serializing_if = "Access::is_unrestricted")]
        access: Access,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bypass_protection: bool,
    },
}

impl PendingOperation {
    /// Whether the operation deletes protected resources too.
    pub(crate) fn bypasses_protection(&self) -> bool {
        match self {
            Self::Put {
                bypass_protection, ..
            }
            | Self::Delete {
                bypass_protection, ..
            } => *bypass_protection,
        }
    }
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
                access: Access::scoped("token-2", vec!["/subscriptions/s".into()]),
                bypass_protection: true,
            }),
        }
    }

    #[test]
    fn a_state_is_written_through_its_borrowed_record_and_reads_back_the_same() {
        let state = state();
        let text = cairn_store::JsonText::of(&state.record()).unwrap();
        let written: Value = text.parse().unwrap();
        assert_eq!(
            written,
            json!({
                "managedSet": serde_json::to_value(&state.managed_set).unwrap(),
                "outOfSync": true,
                "pending": {"kind": "put", "correlationId": "c",
                            "access": {"client": "token-2", "scopes": ["/subscriptions/s"]},
                            "bypassProtection": true},
            })
        );
        assert_eq!(written, serde_json::to_value(&state).unwrap());
        let read: StoredState = text.parse().unwrap();
        assert_eq!(read.managed_set, state.managed_set);
        assert!(read.out_of_sync);
        assert_eq!(read.pending, state.pending);
    }

    #[test]
    fn a_settled_record_has_no_operation_pending_and_keeps_the_rest() {
        let state = state();
        let text = cairn_store::JsonText::of(&state.record().settled()).unwrap();
        let written: Value = text.parse().unwrap();
        assert!(written.get("pending").is_none(), "{written:#}");
        let read: StoredState = text.parse().unwrap();
        assert_eq!(read.managed_set, state.managed_set);
        assert!(read.out_of_sync);
        assert_eq!(read.pending, None);
        assert!(state.pending.is_some(), "the state itself is not changed");
    }
}

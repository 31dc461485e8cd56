//! Long-running operation status (`Azure-AsyncOperation` polling bodies).

use serde::{Deserialize, Serialize};

use crate::error::ErrorDetail;
use crate::wire::extensible_enum;

/// `OperationStatusResult`: `{id, name, status, percentComplete?, startTime?, endTime?, operations?,
/// error?, resourceId?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationStatusResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub status: OperationStatus,
    /// 0 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_complete: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Sub-operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<OperationStatusResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// The resource the operation is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

impl OperationStatusResult {
    /// A status with nothing else filled in.
    pub fn new(status: OperationStatus) -> Self {
        Self {
            id: None,
            name: None,
            status,
            percent_complete: None,
            start_time: None,
            end_time: None,
            operations: None,
            error: None,
            resource_id: None,
        }
    }
}

extensible_enum! {
    /// An operation's status. Deployments report `Running` (and `Accepted`) while in progress; other
    /// services report `InProgress`.
    pub enum OperationStatus {
        InProgress => "InProgress",
        Running => "Running",
        Accepted => "Accepted",
        Succeeded => "Succeeded",
        Failed => "Failed",
        Canceled => "Canceled",
    }
}

impl OperationStatus {
    /// `Succeeded`, `Failed` or `Canceled`; anything else means keep polling.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Canceled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_is_required_and_terminal_states_are_known() {
        assert!(serde_json::from_value::<OperationStatusResult>(json!({"id": "x"})).is_err());
        let s: OperationStatusResult =
            serde_json::from_value(json!({"status": "Running", "percentComplete": 50.0})).unwrap();
        assert!(!s.status.is_terminal());
        assert!(OperationStatus::parse("canceled").is_terminal());
    }
}

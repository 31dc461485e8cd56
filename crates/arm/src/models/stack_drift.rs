//! Deployment stack drift detection, cairn's extension of the deployment stacks API (ARM has none): `POST
//! .../deploymentStacks/{name}/detectDrift` (body [`DeploymentStackDriftRequest`], optional) starts a long-running
//! operation whose result is the resource [`DeploymentStackDriftResult`] at
//! `.../deploymentStacks/{name}/driftDetectionResults/{id}`: per managed resource whether it is as the stack last
//! applied it (`inSync`), changed outside the stack (`modified`, with the property changes), gone (`deleted`), or
//! could not be read (`unreachable`, with the error).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorDetail;
use crate::models::extension::DeploymentExtension;
use crate::models::lro::OperationStatus;
use crate::models::stack_what_if::DeploymentStacksWhatIfPropertyChange;
use crate::wire::extensible_enum;

/// The body of `POST .../detectDrift` (all optional; an empty body is accepted).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStackDriftRequest {
    /// How long the result is kept, ISO 8601 as for what-if results (`PT12H`, `P7D`); default `P7D`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_interval: Option<String>,
}

/// A drift detection result: `{id, name, type, properties}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStackDriftResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    pub properties: DeploymentStackDriftProperties,
}

impl DeploymentStackDriftResult {
    /// The resource type, `Microsoft.Resources/deploymentStacks/driftDetectionResults`.
    pub const TYPE: &'static str = "Microsoft.Resources/deploymentStacks/driftDetectionResults";
}

/// `properties` of a drift detection result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStackDriftProperties {
    pub deployment_stack_resource_id: String,
    /// `Running` while resources are being read (the resources read so far are listed), then `Succeeded` (every
    /// resource has a drift status, `unreachable` ones included) or `Failed` (the detection as a whole failed).
    pub status: OperationStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// When the stack record the detection read was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_stack_last_modified: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_interval: Option<String>,
    #[serde(default)]
    pub summary: DriftSummary,
    /// One entry per managed resource read so far, in the stack's order.
    #[serde(default)]
    pub resources: Vec<ResourceDrift>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Counts of a drift detection result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftSummary {
    /// Managed resources to read.
    pub total: u32,
    /// Read so far (`total` once the detection has ended).
    pub checked: u32,
    pub in_sync: u32,
    pub modified: u32,
    pub deleted: u32,
    pub unreachable: u32,
}

impl DriftSummary {
    /// Counts `status` as one more resource checked.
    pub fn count(&mut self, status: &DriftStatus) {
        self.checked += 1;
        match status {
            DriftStatus::InSync => self.in_sync += 1,
            DriftStatus::Modified => self.modified += 1,
            DriftStatus::Deleted => self.deleted += 1,
            DriftStatus::Unreachable | DriftStatus::Other(_) => self.unreachable += 1,
        }
    }

    /// Whether any resource drifted (modified or deleted).
    pub fn drifted(&self) -> bool {
        self.modified > 0 || self.deleted > 0
    }
}

extensible_enum! {
    /// How a managed resource compares with what the stack last applied.
    pub enum DriftStatus {
        InSync => "inSync",
        Modified => "modified",
        Deleted => "deleted",
        Unreachable => "unreachable",
    }
}

/// One managed resource's drift: the resource as the stack's `resources[]` names it (ARM `id`, or `extension`,
/// `type`, `identifiers`), its status, and what differs or why it could not be read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDrift {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<DeploymentExtension>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic_name: Option<String>,
    pub drift_status: DriftStatus,
    /// For `modified`: each property that differs, `before` as the stack last applied it, `after` as it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property_changes: Option<Vec<DeploymentStacksWhatIfPropertyChange>>,
    /// For `unreachable`: why the resource could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// A note on how it was compared (e.g. only its existence, when nothing applied was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_round_trip_and_count() {
        let value = json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/st/driftDetectionResults/d1",
            "name": "d1",
            "type": DeploymentStackDriftResult::TYPE,
            "properties": {
                "deploymentStackResourceId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/st",
                "status": "Succeeded",
                "summary": {"total": 2, "checked": 2, "inSync": 0, "modified": 1, "deleted": 0, "unreachable": 1},
                "resources": [
                    {"extension": {"name": "Local", "version": "1.0.0", "configId": "c"}, "type": "File",
                     "identifiers": {"path": "a"}, "driftStatus": "modified",
                     "propertyChanges": [{"path": "properties.content", "changeType": "modify",
                                          "before": "a", "after": "b"}]},
                    {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v",
                     "driftStatus": "unreachable", "error": {"code": "Down", "message": "down"}}
                ]
            }
        });
        let result: DeploymentStackDriftResult = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            result.properties.resources[0].drift_status,
            DriftStatus::Modified
        );
        assert_eq!(serde_json::to_value(&result).unwrap(), value);
        let mut summary = DriftSummary {
            total: 2,
            ..DriftSummary::default()
        };
        for resource in &result.properties.resources {
            summary.count(&resource.drift_status);
        }
        assert_eq!(summary, result.properties.summary);
        assert!(summary.drifted());
    }
}

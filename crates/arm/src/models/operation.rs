//! Deployment operations (`.../deployments/{name}/operations[/{id}]`): one per resource action the engine
//! took, with its target, status and error.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorDetail;
use crate::models::common::ListResult;
use crate::models::deployment::DeploymentProvisioningState;
use crate::models::extension::DeploymentExtension;
use crate::models::parameters::Redacted;
use crate::wire::extensible_enum;

/// One deployment operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentOperation {
    /// `{deploymentId}/operations/{operationId}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    #[serde(default)]
    pub properties: DeploymentOperationProperties,
}

/// `properties` of a deployment operation (all read-only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentOperationProperties {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_operation: Option<ProvisioningOperation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<DeploymentProvisioningState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_request_id: Option<String>,
    /// The provider's HTTP status name, e.g. `OK`, `Created`, `BadRequest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<StatusMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_resource: Option<TargetResource>,
    /// Only with `debugSetting` `requestContent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<HttpMessage>,
    /// Only with `debugSetting` `responseContent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<HttpMessage>,
}

extensible_enum! {
    /// What an operation did.
    pub enum ProvisioningOperation {
        NotSpecified => "NotSpecified",
        Create => "Create",
        Delete => "Delete",
        Waiting => "Waiting",
        AzureAsyncOperationWaiting => "AzureAsyncOperationWaiting",
        ResourceCacheWaiting => "ResourceCacheWaiting",
        Action => "Action",
        Read => "Read",
        EvaluateDeploymentOutput => "EvaluateDeploymentOutput",
        DeploymentCleanup => "DeploymentCleanup",
    }
}

/// `statusMessage`: the provider's status and error, if it reported one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// `targetResource`: an Azure resource (`id`, `resourceName`, `resourceType`) or an extensible one
/// (`extension`, `identifiers`, `resourceType`, `apiVersion`, `symbolicName`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<DeploymentExtension>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic_name: Option<String>,
    /// 2026-06-01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic_name_path: Option<Vec<String>>,
}

/// A recorded request or response body. `Debug` hides the content, which may hold secrets.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

impl fmt::Debug for HttpMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpMessage")
            .field("content", &self.content.as_ref().map(|_| Redacted))
            .finish()
    }
}

/// `GET .../operations`.
pub type DeploymentOperationsListResult = ListResult<DeploymentOperation>;

//! Deployment stack what-if (`Microsoft.Resources/deploymentStacksWhatIfResults`, 2025-07-01): the result
//! resource, its predicted resource / deny settings / scope changes and diagnostics. All enums are lowerCamel.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorAdditionalInfo;
use crate::models::common::{SystemData, Tags};
use crate::models::extension::DeploymentExtension;
use crate::models::stack::{DenySettings, DenyStatusMode, stack_properties};
use crate::wire::extensible_enum;

/// A what-if result resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksWhatIfResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_data: Option<SystemData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    pub properties: DeploymentStacksWhatIfResultProperties,
}

impl DeploymentStacksWhatIfResult {
    /// The resource type, `Microsoft.Resources/deploymentStacksWhatIfResults`.
    pub const TYPE: &'static str = "Microsoft.Resources/deploymentStacksWhatIfResults";
}

stack_properties! {
    /// `properties` of a what-if result: the stack properties plus what the what-if is about and found.
    pub struct DeploymentStacksWhatIfResultProperties {
        /// The stack to compare against; it may not exist yet.
        pub deployment_stack_resource_id: String,
        /// How long the result is kept, ISO 8601 (e.g. `P7D`).
        pub retention_interval: String,
        /// When the stack was last modified, as of the what-if.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub deployment_stack_last_modified: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub changes: Option<DeploymentStacksWhatIfChange>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub diagnostics: Option<Vec<DeploymentStacksDiagnostic>>,
    }
}

/// `changes` of a what-if result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksWhatIfChange {
    #[serde(default)]
    pub resource_changes: Vec<DeploymentStacksWhatIfResourceChange>,
    #[serde(default)]
    pub deny_settings_change: DeploymentStacksChangeDelta<DenySettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_scope_change: Option<DeploymentStacksChangeBase<String>>,
}

/// `{before?, after?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksChangeBase<T> {
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub before: Option<T>,
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub after: Option<T>,
}

impl<T> Default for DeploymentStacksChangeBase<T> {
    fn default() -> Self {
        Self {
            before: None,
            after: None,
        }
    }
}

/// `{before?, after?, delta?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksChangeDelta<T> {
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub before: Option<T>,
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub after: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<Vec<DeploymentStacksWhatIfPropertyChange>>,
}

impl<T> Default for DeploymentStacksChangeDelta<T> {
    fn default() -> Self {
        Self {
            before: None,
            after: None,
            delta: None,
        }
    }
}

/// One predicted change to a stack resource (the resource reference fields plus the change).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksWhatIfResourceChange {
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
    pub deployment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic_name: Option<String>,
    pub change_type: StackResourceChangeType,
    pub change_certainty: ChangeCertainty,
    /// `before`/`after` of `managed` | `unmanaged` | `unknown` (examples also show `notManaged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_status_change: Option<DeploymentStacksChangeBase<ManagementStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_status_change: Option<DeploymentStacksChangeBase<DenyStatusMode>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_configuration_changes: Option<DeploymentStacksChangeDelta<Value>>,
}

impl DeploymentStacksWhatIfResourceChange {
    /// A change with only its type and certainty.
    pub fn new(change_type: StackResourceChangeType, change_certainty: ChangeCertainty) -> Self {
        Self {
            id: None,
            extension: None,
            resource_type: None,
            identifiers: None,
            api_version: None,
            deployment_id: None,
            symbolic_name: None,
            change_type,
            change_certainty,
            management_status_change: None,
            deny_status_change: None,
            unsupported_reason: None,
            resource_configuration_changes: None,
        }
    }
}

/// A predicted change to one property.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksWhatIfPropertyChange {
    pub path: String,
    pub change_type: StackPropertyChangeType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<DeploymentStacksWhatIfPropertyChange>>,
}

extensible_enum! {
    /// What will happen to a stack resource.
    pub enum StackResourceChangeType {
        Create => "create",
        Delete => "delete",
        Detach => "detach",
        Modify => "modify",
        NoChange => "noChange",
        Unsupported => "unsupported",
    }
}

extensible_enum! {
    /// How sure the prediction is.
    pub enum ChangeCertainty {
        Definite => "definite",
        Potential => "potential",
    }
}

extensible_enum! {
    /// What will happen to a property.
    pub enum StackPropertyChangeType {
        Array => "array",
        Create => "create",
        Delete => "delete",
        Modify => "modify",
        NoEffect => "noEffect",
    }
}

extensible_enum! {
    /// Whether the stack manages a resource.
    pub enum ManagementStatus {
        Managed => "managed",
        Unmanaged => "unmanaged",
        Unknown => "unknown",
    }
}

/// A what-if diagnostic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStacksDiagnostic {
    pub level: StackDiagnosticLevel,
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_info: Option<Vec<ErrorAdditionalInfo>>,
}

extensible_enum! {
    /// Severity of a stack what-if diagnostic.
    pub enum StackDiagnosticLevel {
        Info => "info",
        Warning => "warning",
        Error => "error",
    }
}

/// `GET .../deploymentStacksWhatIfResults`.
pub type DeploymentStacksWhatIfResultListResult =
    crate::models::common::ListResult<DeploymentStacksWhatIfResult>;

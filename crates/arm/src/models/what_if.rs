//! Deployment what-if results: predicted resource changes with before/after snapshots and property deltas.
//! (The request is [`crate::models::deployment::DeploymentWhatIf`].)

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorDetail;
use crate::models::deployment::DeploymentDiagnosticsDefinition;
use crate::models::extension::DeploymentExtension;
use crate::wire::extensible_enum;

/// The result of `POST .../whatIf`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIfOperationResult {
    /// `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<WhatIfOperationProperties>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// `properties` of a what-if result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIfOperationProperties {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<WhatIfChange>>,
    /// Changes that may happen but are not certain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub potential_changes: Option<Vec<WhatIfChange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<DeploymentDiagnosticsDefinition>>,
}

/// One predicted resource change. Azure resources have `resourceId`; extensible resources have
/// `extension`, `identifiers` and `resourceType`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIfChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    /// The deployment responsible for the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic_name: Option<String>,
    /// 2026-06-01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<DeploymentExtension>,
    pub change_type: ChangeType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<Vec<WhatIfPropertyChange>>,
}

impl WhatIfChange {
    /// A change of the given type with nothing else filled in.
    pub fn new(change_type: ChangeType) -> Self {
        Self {
            resource_id: None,
            deployment_id: None,
            symbolic_name: None,
            resource_type: None,
            identifiers: None,
            extension: None,
            change_type,
            unsupported_reason: None,
            before: None,
            after: None,
            delta: None,
        }
    }
}

extensible_enum! {
    /// What will happen to a resource.
    pub enum ChangeType {
        Create => "Create",
        Delete => "Delete",
        Ignore => "Ignore",
        Deploy => "Deploy",
        NoChange => "NoChange",
        Modify => "Modify",
        Unsupported => "Unsupported",
    }
}

/// A predicted change to one property; arrays nest their element changes in `children`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIfPropertyChange {
    /// Dotted path, e.g. `properties.enforcementMode`, or an array index such as `0`.
    pub path: String,
    pub property_change_type: PropertyChangeType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<WhatIfPropertyChange>>,
}

extensible_enum! {
    /// What will happen to a property.
    pub enum PropertyChangeType {
        Create => "Create",
        Delete => "Delete",
        Modify => "Modify",
        Array => "Array",
        NoEffect => "NoEffect",
    }
}

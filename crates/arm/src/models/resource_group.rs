//! Resource groups: the PUT/GET body, the PATCH body and the list.

use serde::{Deserialize, Serialize};

use crate::models::common::{ListResult, Tags};

/// `Microsoft.Resources/resourceGroups`. On PUT only `location` (required), `tags`, `managedBy` and
/// `properties` are read; GET fills in `id`, `name`, `type` and `properties.provisioningState`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    pub location: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<ResourceGroupProperties>,
}

impl ResourceGroup {
    /// The resource type, `Microsoft.Resources/resourceGroups`.
    pub const TYPE: &'static str = "Microsoft.Resources/resourceGroups";
}

/// `properties` of a resource group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupProperties {
    /// `Succeeded`, or `Deleting` while a delete runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
}

/// The PATCH body: every field optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupPatchable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<ResourceGroupProperties>,
}

/// `GET /subscriptions/{s}/resourcegroups`.
pub type ResourceGroupListResult = ListResult<ResourceGroup>;

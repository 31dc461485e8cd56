//! Resource groups: the PUT/GET body, the PATCH body and the list.

use serde::{Deserialize, Serialize};

use crate::id::ResourceId;
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

    /// A GET response for the group `id`: `id`, `name`, `type`, `location` and `provisioningState`.
    pub fn for_id(id: &ResourceId, location: &str, provisioning_state: &str) -> Self {
        Self {
            id: Some(id.to_string()),
            name: id.resource_group_name().map(str::to_owned),
            resource_type: Some(Self::TYPE.to_owned()),
            location: location.to_owned(),
            managed_by: None,
            tags: None,
            properties: Some(ResourceGroupProperties {
                provisioning_state: Some(provisioning_state.to_owned()),
            }),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn get_response_for_an_id() {
        let id = ResourceId::parse("/subscriptions/s/resourcegroups/My-RG").unwrap();
        assert_eq!(
            serde_json::to_value(ResourceGroup::for_id(&id, "westus", "Succeeded")).unwrap(),
            json!({"id": "/subscriptions/s/resourceGroups/My-RG", "name": "My-RG", "type": "Microsoft.Resources/resourceGroups",
                   "location": "westus", "properties": {"provisioningState": "Succeeded"}})
        );
    }
}

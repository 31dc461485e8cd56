//! `Microsoft.Resources/deploymentStacks` (2025-07-01 shapes; 2024-03-01 and 2022-08-01-preview bodies are
//! subsets): the stack resource, unmanage and deny settings, managed resource references and their keys,
//! validate and export results, and the DELETE query options.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ArmError, ErrorDetail};
use crate::id::ResourceId;
use crate::models::common::{SystemData, Tags, TemplateLink, ValidationLevel};
use crate::models::deployment::DeploymentResourceReference;
use crate::models::extension::DeploymentExtension;
use crate::models::parameters::DeploymentParameters;
use crate::query::Query;
use crate::wire::extensible_enum;

/// Defines a struct with the properties every stack body shares (stack, what-if result) plus the given
/// extra fields. Paths are absolute so the macro can be used from other modules.
macro_rules! stack_properties {
    ($(#[$meta:meta])* pub struct $name:ident { $($extra:tt)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// The template (create/update only; read it back with exportTemplate). Exclusive with `templateLink`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub template: Option<serde_json::Value>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub template_link: Option<$crate::models::common::TemplateLink>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub parameters: Option<$crate::models::parameters::DeploymentParameters>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub parameters_link: Option<$crate::models::common::ParametersLink>,
            /// 2025-07-01, create/update only.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub extension_configs: Option<$crate::models::extension::ExtensionConfigs>,
            /// 2025-07-01, create/update only.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub external_inputs: Option<$crate::models::parameters::ExternalInputs>,
            /// 2025-07-01, create/update only.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub external_input_definitions: Option<$crate::models::parameters::ExternalInputDefinitions>,
            /// Required.
            pub action_on_unmanage: $crate::models::stack::ActionOnUnmanage,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub debug_setting: Option<$crate::models::common::DebugSetting>,
            /// The scope the stack's deployment runs at; defaults to the stack's scope.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub deployment_scope: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
            /// Required.
            pub deny_settings: $crate::models::stack::DenySettings,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub provisioning_state: Option<$crate::models::stack::DeploymentStackProvisioningState>,
            /// Of the last upsert or delete (2024-03-01).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub correlation_id: Option<String>,
            /// 2025-07-01.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub validation_level: Option<$crate::models::common::ValidationLevel>,
            /// 2024-03-01; also a DELETE query parameter.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub bypass_stack_out_of_sync_error: Option<bool>,
            /// cairn's extension of the ARM shape (create/update and what-if; never stored): take over extension
            /// resources the deployment finds already existing that no stack manages. Without it such a resource
            /// is not written and the operation reports it (`DeploymentStackResourceExistsUnmanaged`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub adopt_existing_resources: Option<bool>,
            /// cairn's extension of the ARM shape: glob patterns over resource selectors (an ARM ID, or
            /// `<extension>/<type> <identifiers>`) naming resources no operation of the stack may delete unless it
            /// says `bypassProtection`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub protect: Option<Vec<String>>,
            /// cairn's extension of the ARM shape: patterns naming resources that are detached, never deleted,
            /// when they leave the stack, whatever `actionOnUnmanage` says.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub retain: Option<Vec<String>>,
            /// cairn's extension of the ARM shape (create/update; never stored; also a DELETE query parameter):
            /// delete what `protect` names if the operation unmanages it with `delete`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub bypass_protection: Option<bool>,
            /// Detached by the last operation only.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub detached_resources: Option<Vec<$crate::models::stack::ResourceReference>>,
            /// Deleted by the last operation only.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub deleted_resources: Option<Vec<$crate::models::stack::ResourceReference>>,
            /// Failed to delete in the last operation, each with its `error`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub failed_resources: Option<Vec<$crate::models::stack::ResourceReference>>,
            /// The managed set, each with `status` and `denyStatus`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub resources: Option<Vec<$crate::models::stack::ResourceReference>>,
            /// Extensions of managed extensible resources with their persisted non-secret config (2025-07-01).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub deployment_extensions: Option<Vec<$crate::models::extension::DeploymentExtension>>,
            /// The `Microsoft.Resources/deployments` ID the stack created.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub deployment_id: Option<String>,
            /// Either `{name: value}` or `{name: {value}}`; both are accepted.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub outputs: Option<serde_json::Value>,
            /// ISO 8601 duration of the last successful update.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub duration: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub error: Option<$crate::error::ErrorDetail>,
            $($extra)*
        }
    };
}

pub(crate) use stack_properties;

/// The stack resource: `{id, name, type, systemData, location?, tags?, properties}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStack {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_data: Option<SystemData>,
    /// Immutable; required for subscription and management group stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    pub properties: DeploymentStackProperties,
}

impl DeploymentStack {
    /// The resource type, `Microsoft.Resources/deploymentStacks`.
    pub const TYPE: &'static str = "Microsoft.Resources/deploymentStacks";

    /// A response for the stack `id` with `id`, `name`, `type` and the given properties.
    pub fn for_id(id: &ResourceId, properties: DeploymentStackProperties) -> Self {
        Self {
            id: Some(id.to_string()),
            name: id.name().map(str::to_owned),
            resource_type: Some(Self::TYPE.to_owned()),
            system_data: None,
            location: None,
            tags: None,
            properties,
        }
    }
}

stack_properties! {
    /// `properties` of a stack.
    pub struct DeploymentStackProperties {}
}

impl DeploymentStackProperties {
    /// Properties with only the two required settings; fill in the rest.
    pub fn new(action_on_unmanage: ActionOnUnmanage, deny_settings: DenySettings) -> Self {
        Self {
            template: None,
            template_link: None,
            parameters: None,
            parameters_link: None,
            extension_configs: None,
            external_inputs: None,
            external_input_definitions: None,
            action_on_unmanage,
            debug_setting: None,
            deployment_scope: None,
            description: None,
            deny_settings,
            provisioning_state: None,
            correlation_id: None,
            validation_level: None,
            bypass_stack_out_of_sync_error: None,
            adopt_existing_resources: None,
            protect: None,
            retain: None,
            bypass_protection: None,
            detached_resources: None,
            deleted_resources: None,
            failed_resources: None,
            resources: None,
            deployment_extensions: None,
            deployment_id: None,
            outputs: None,
            duration: None,
            error: None,
        }
    }
}

/// What happens to resources that leave the stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionOnUnmanage {
    /// Required.
    pub resources: UnmanageAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_groups: Option<UnmanageAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_groups: Option<UnmanageAction>,
    /// 2025-07-01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_without_delete_support: Option<ResourcesWithoutDeleteSupportAction>,
}

impl ActionOnUnmanage {
    /// Detach everything.
    pub fn detach_all() -> Self {
        Self {
            resources: UnmanageAction::Detach,
            resource_groups: Some(UnmanageAction::Detach),
            management_groups: Some(UnmanageAction::Detach),
            resources_without_delete_support: None,
        }
    }

    /// The CLI's `--action-on-unmanage` presets: `detachAll`, `deleteResources`, `deleteAll`.
    pub fn from_cli_preset(preset: &str) -> Option<Self> {
        let (resources, groups) = if preset.eq_ignore_ascii_case("detachAll") {
            (UnmanageAction::Detach, UnmanageAction::Detach)
        } else if preset.eq_ignore_ascii_case("deleteResources") {
            (UnmanageAction::Delete, UnmanageAction::Detach)
        } else if preset.eq_ignore_ascii_case("deleteAll") {
            (UnmanageAction::Delete, UnmanageAction::Delete)
        } else {
            return None;
        };
        Some(Self {
            resources,
            resource_groups: Some(groups.clone()),
            management_groups: Some(groups),
            resources_without_delete_support: None,
        })
    }

    /// The action for resource groups (`detach` when not given).
    pub fn for_resource_groups(&self) -> &UnmanageAction {
        self.resource_groups
            .as_ref()
            .unwrap_or(&UnmanageAction::Detach)
    }

    /// The action for management groups (`detach` when not given).
    pub fn for_management_groups(&self) -> &UnmanageAction {
        self.management_groups
            .as_ref()
            .unwrap_or(&UnmanageAction::Detach)
    }
}

extensible_enum! {
    /// Delete or detach an unmanaged resource.
    pub enum UnmanageAction {
        Delete => "delete",
        Detach => "detach",
    }
}

extensible_enum! {
    /// What to do with resources whose type cannot be deleted (2025-07-01).
    pub enum ResourcesWithoutDeleteSupportAction {
        Detach => "detach",
        Fail => "fail",
    }
}

/// Deny assignments the stack places on its managed resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DenySettings {
    /// Required.
    pub mode: DenySettingsMode,
    /// At most 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_principals: Option<Vec<String>>,
    /// At most 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_actions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_to_child_scopes: Option<bool>,
}

impl DenySettings {
    /// `{ "mode": "none" }`.
    pub fn none() -> Self {
        Self {
            mode: DenySettingsMode::None,
            excluded_principals: None,
            excluded_actions: None,
            apply_to_child_scopes: None,
        }
    }
}

extensible_enum! {
    /// Which operations the deny assignment blocks.
    pub enum DenySettingsMode {
        DenyDelete => "denyDelete",
        DenyWriteAndDelete => "denyWriteAndDelete",
        None => "none",
    }
}

extensible_enum! {
    /// A stack's provisioning state (lowerCamel, unlike deployments).
    pub enum DeploymentStackProvisioningState {
        Creating => "creating",
        Validating => "validating",
        Waiting => "waiting",
        Deploying => "deploying",
        Canceling => "canceling",
        UpdatingDenyAssignments => "updatingDenyAssignments",
        DeletingResources => "deletingResources",
        Succeeded => "succeeded",
        Failed => "failed",
        Canceled => "canceled",
        Deleting => "deleting",
        /// 2025-07-01.
        Initializing => "initializing",
        /// 2025-07-01.
        Running => "running",
    }
}

impl DeploymentStackProvisioningState {
    /// `succeeded`, `failed` or `canceled`: the states in which PUT and DELETE are allowed.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Canceled)
    }
}

extensible_enum! {
    /// `resources[].status`.
    pub enum ResourceStatusMode {
        Managed => "managed",
        RemoveDenyFailed => "removeDenyFailed",
        /// Delete failed; it is retried on the next stack deployment.
        DeleteFailed => "deleteFailed",
        /// 2022-08-01-preview only.
        None => "none",
    }
}

extensible_enum! {
    /// `resources[].denyStatus`.
    pub enum DenyStatusMode {
        DenyDelete => "denyDelete",
        /// Extensible resources cannot be locked.
        NotSupported => "notSupported",
        /// Outside the stack's scope.
        Inapplicable => "inapplicable",
        DenyWriteAndDelete => "denyWriteAndDelete",
        RemovedBySystem => "removedBySystem",
        None => "none",
        /// 2025-07-01.
        Unknown => "unknown",
    }
}

/// A resource in a stack body: `resources[]` (with `status`, `denyStatus`), `detachedResources[]`,
/// `deletedResources[]`, `failedResources[]` (with `error`) and validate's `validatedResources[]`. Azure
/// resources carry `id`; extensible resources carry `extension`, `type`, `identifiers` (+ `apiVersion`).
/// Stacks say `type` where deployments say `resourceType`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<DeploymentExtension>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
    /// The API version the resource was deployed with; deletes must use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResourceStatusMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_status: Option<DenyStatusMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// cairn: why a `deletedResources[]` entry counts as deleted without its own delete (the ARM resource its
    /// extension config comes from is gone, and its control plane with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ErrorDetail>,
}

/// ManagedResourceReference (`resources[]`) is a [`ResourceReference`] with `status` and `denyStatus`.
pub type ManagedResourceReference = ResourceReference;
/// ResourceReferenceExtended (`failedResources[]`) is a [`ResourceReference`] with `error`.
pub type ResourceReferenceExtended = ResourceReference;

impl ResourceReference {
    /// The stack form of a deployment's output resource (`resourceType` becomes `type`; the extension
    /// keeps only name, version and `configId`).
    pub fn from_output_resource(resource: &DeploymentResourceReference) -> Self {
        Self {
            id: resource.id.clone(),
            extension: resource
                .extension
                .as_ref()
                .map(DeploymentExtension::reference),
            resource_type: resource.resource_type.clone(),
            identifiers: resource.identifiers.clone(),
            api_version: resource.api_version.clone(),
            ..Self::default()
        }
    }

    /// The identity used to diff managed sets; `None` when the reference has neither a parsable `id` nor an
    /// `extension`.
    pub fn key(&self) -> Option<ResourceKey> {
        if let Some(id) = &self.id {
            return ResourceId::parse(id).ok().map(ResourceKey::Azure);
        }
        let extension = self.extension.as_ref()?;
        Some(ResourceKey::Extensible {
            extension_name: extension.name.to_ascii_lowercase(),
            extension_version: extension.version.clone(),
            config_id: extension.config_id.clone(),
            resource_type: self.resource_type.as_deref().map(str::to_ascii_lowercase),
            identifiers: canonical_json(self.identifiers.as_ref().unwrap_or(&Value::Null)),
        })
    }
}

/// How stacks tell resources apart: an Azure resource by its ID (ignoring case); an extensible resource by
/// extension name (ignoring case), version and `configId`, its type, and its identifiers as canonical JSON
/// (keys sorted recursively, no whitespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKey {
    Azure(ResourceId),
    Extensible {
        extension_name: String,
        extension_version: String,
        config_id: Option<String>,
        resource_type: Option<String>,
        identifiers: String,
    },
}

/// Compact JSON with object keys sorted recursively, so equal values compare equal as text.
fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(v, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(v, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The result of `POST .../validate` (200, or 400 with `error`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStackValidateResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_data: Option<SystemData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<DeploymentStackValidateProperties>,
}

/// `properties` of a stack validate result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStackValidateProperties {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_on_unmanage: Option<ActionOnUnmanage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_settings: Option<DenySettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<DeploymentParameters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_link: Option<TemplateLink>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validated_resources: Option<Vec<ResourceReference>>,
    /// 2025-07-01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_extensions: Option<Vec<DeploymentExtension>>,
    /// 2025-07-01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_level: Option<ValidationLevel>,
}

/// The result of `POST .../exportTemplate`, the only way to read a stack's template back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStackTemplateDefinition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_link: Option<TemplateLink>,
}

/// `GET .../deploymentStacks`.
pub type DeploymentStackListResult = crate::models::common::ListResult<DeploymentStack>;

/// What a stack DELETE (of a stack or a what-if result) asks for, from its query parameters
/// `unmanageAction.Resources`, `unmanageAction.ResourceGroups`, `unmanageAction.ManagementGroups`
/// (`delete` | `detach`; omitted means detach), `unmanageAction.ResourcesWithoutDeleteSupport`
/// (`detach` | `fail`; omitted is left to the server) and `bypassStackOutOfSyncError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackDeleteOptions {
    pub action_on_unmanage: ActionOnUnmanage,
    pub bypass_stack_out_of_sync_error: bool,
    /// cairn's `bypassProtection`: delete what the stack's `protect` patterns name.
    pub bypass_protection: bool,
}

impl StackDeleteOptions {
    /// Reads the options; a value outside the allowed ones is `InvalidQueryParameterValue`.
    pub fn from_query(query: &Query) -> Result<Self, ArmError> {
        fn unmanage(query: &Query, name: &str) -> Result<UnmanageAction, ArmError> {
            match query.get(name).map(UnmanageAction::parse) {
                None => Ok(UnmanageAction::Detach),
                Some(UnmanageAction::Other(value)) => Err(ArmError::invalid_query_parameter_value(
                    name,
                    &value,
                    UnmanageAction::KNOWN,
                )),
                Some(action) => Ok(action),
            }
        }
        const WITHOUT_DELETE: &str = "unmanageAction.ResourcesWithoutDeleteSupport";
        let resources_without_delete_support = match query
            .get(WITHOUT_DELETE)
            .map(ResourcesWithoutDeleteSupportAction::parse)
        {
            None => None,
            Some(ResourcesWithoutDeleteSupportAction::Other(value)) => {
                return Err(ArmError::invalid_query_parameter_value(
                    WITHOUT_DELETE,
                    &value,
                    ResourcesWithoutDeleteSupportAction::KNOWN,
                ));
            }
            Some(action) => Some(action),
        };
        Ok(Self {
            action_on_unmanage: ActionOnUnmanage {
                resources: unmanage(query, "unmanageAction.Resources")?,
                resource_groups: Some(unmanage(query, "unmanageAction.ResourceGroups")?),
                management_groups: Some(unmanage(query, "unmanageAction.ManagementGroups")?),
                resources_without_delete_support,
            },
            bypass_stack_out_of_sync_error: query.flag("bypassStackOutOfSyncError")?,
            bypass_protection: query.flag("bypassProtection")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;
    use serde_json::json;

    #[test]
    fn required_settings_are_required() {
        let err = serde_json::from_value::<DeploymentStack>(
            json!({"properties": {"denySettings": {"mode": "none"}}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("actionOnUnmanage"), "{err}");
        let ok: DeploymentStack = serde_json::from_value(json!({"properties": {
            "actionOnUnmanage": {"resources": "Delete"}, "denySettings": {"mode": "DenyDelete"}}}))
        .unwrap();
        assert_eq!(
            ok.properties.action_on_unmanage.resources,
            UnmanageAction::Delete
        );
        assert_eq!(
            ok.properties.deny_settings.mode,
            DenySettingsMode::DenyDelete
        );
        assert_eq!(
            ok.properties.action_on_unmanage.for_resource_groups(),
            &UnmanageAction::Detach
        );
    }

    #[test]
    fn cli_presets() {
        assert_eq!(
            ActionOnUnmanage::from_cli_preset("detachAll"),
            Some(ActionOnUnmanage::detach_all())
        );
        let delete_resources = ActionOnUnmanage::from_cli_preset("deleteresources").unwrap();
        assert_eq!(
            (
                delete_resources.resources.clone(),
                delete_resources.for_resource_groups().clone()
            ),
            (UnmanageAction::Delete, UnmanageAction::Detach)
        );
        assert_eq!(
            ActionOnUnmanage::from_cli_preset("deleteAll")
                .unwrap()
                .for_management_groups(),
            &UnmanageAction::Delete
        );
        assert_eq!(ActionOnUnmanage::from_cli_preset("keep"), None);
    }

    #[test]
    fn delete_query_defaults_to_detach() {
        let options =
            StackDeleteOptions::from_query(&Query::parse("api-version=2025-07-01")).unwrap();
        assert_eq!(options.action_on_unmanage, ActionOnUnmanage::detach_all());
        assert!(!options.bypass_stack_out_of_sync_error);
        let q = Query::parse(
            "unmanageAction.Resources=delete&unmanageAction.ResourceGroups=Delete&unmanageAction.ResourcesWithoutDeleteSupport=fail&bypassStackOutOfSyncError=true",
        );
        let options = StackDeleteOptions::from_query(&q).unwrap();
        assert_eq!(options.action_on_unmanage.resources, UnmanageAction::Delete);
        assert_eq!(
            options.action_on_unmanage.for_resource_groups(),
            &UnmanageAction::Delete
        );
        assert_eq!(
            options.action_on_unmanage.for_management_groups(),
            &UnmanageAction::Detach
        );
        assert_eq!(
            options.action_on_unmanage.resources_without_delete_support,
            Some(ResourcesWithoutDeleteSupportAction::Fail)
        );
        assert!(options.bypass_stack_out_of_sync_error);
    }

    #[test]
    fn delete_query_rejects_unknown_actions() {
        let e = StackDeleteOptions::from_query(&Query::parse("unmanageAction.Resources=purge"))
            .unwrap_err();
        assert_eq!(
            (e.status(), e.code()),
            (400, codes::INVALID_QUERY_PARAMETER_VALUE)
        );
        assert!(
            StackDeleteOptions::from_query(&Query::parse(
                "unmanageAction.ResourcesWithoutDeleteSupport=delete"
            ))
            .is_err()
        );
    }

    #[test]
    fn terminal_states_guard_updates() {
        assert!(DeploymentStackProvisioningState::parse("Succeeded").is_terminal());
        assert!(!DeploymentStackProvisioningState::DeletingResources.is_terminal());
        assert!(!DeploymentStackProvisioningState::parse("initializing").is_terminal());
    }

    #[test]
    fn resource_keys_ignore_id_case_and_identifier_order() {
        let a = ResourceReference {
            id: Some("/subscriptions/S/resourceGroups/RG/providers/A.B/t/N".into()),
            ..Default::default()
        };
        let b = ResourceReference {
            id: Some("/subscriptions/s/resourcegroups/rg/providers/a.b/T/n".into()),
            ..Default::default()
        };
        assert_eq!(a.key(), b.key());
        let ext = |identifiers: Value| ResourceReference {
            extension: Some(DeploymentExtension {
                name: "Kubernetes".into(),
                version: "1.0.0".into(),
                config_id: Some("C".into()),
                ..Default::default()
            }),
            resource_type: Some("core/ConfigMap".into()),
            identifiers: Some(identifiers),
            ..Default::default()
        };
        let x = ext(json!({"metadata": {"name": "s", "namespace": "app"}}));
        let y = ext(json!({"metadata": {"namespace": "app", "name": "s"}}));
        let z = ext(json!({"metadata": {"namespace": "other", "name": "s"}}));
        assert_eq!(x.key(), y.key());
        assert_ne!(x.key(), z.key());
        assert_eq!(ResourceReference::default().key(), None);
    }

    #[test]
    fn output_resources_convert_to_stack_references() {
        let out: DeploymentResourceReference = serde_json::from_value(json!({
            "extension": {"alias": "k8s", "name": "Kubernetes", "version": "1.0.0", "configId": "C", "config": {"namespace": {"value": "app"}}},
            "resourceType": "core/ConfigMap", "apiVersion": "v1", "identifiers": {"metadata": {"name": "s"}}
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_value(ResourceReference::from_output_resource(&out)).unwrap(),
            json!({"extension": {"name": "Kubernetes", "version": "1.0.0", "configId": "C"},
                   "type": "core/ConfigMap", "apiVersion": "v1", "identifiers": {"metadata": {"name": "s"}}})
        );
    }
}

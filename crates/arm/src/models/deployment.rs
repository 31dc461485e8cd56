//! `Microsoft.Resources/deployments` (2025-04-01 shapes, plus the 2026-06-01 additions): the PUT request,
//! the `DeploymentExtended` response, validate, export and template-hash results.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorDetail;
use crate::id::ResourceId;
use crate::models::common::{
    DebugSetting, ListResult, ParametersLink, SystemData, Tags, TemplateLink, ValidationLevel,
};
use crate::models::extension::{DeploymentExtension, ExtensionConfigs, ProviderConfigs};
use crate::models::parameters::{DeploymentParameters, ExternalInputDefinitions, ExternalInputs};
use crate::wire::extensible_enum;

/// Defines a struct with the fields of `DeploymentProperties` plus the given extra fields (what-if adds
/// `whatIfSettings`); written out rather than `#[serde(flatten)]` so unknown fields stay ignored and errors
/// name the real field.
macro_rules! deployment_properties {
    ($(#[$meta:meta])* pub struct $name:ident { $($extra:tt)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// The template (a JSON object, or a JSON string). Exclusive with `templateLink`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub template: Option<Value>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub template_link: Option<TemplateLink>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub parameters: Option<DeploymentParameters>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub parameters_link: Option<ParametersLink>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub external_inputs: Option<ExternalInputs>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub external_input_definitions: Option<ExternalInputDefinitions>,
            /// Extension configs, `{alias: {property: item}}`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub extension_configs: Option<ExtensionConfigs>,
            /// REP 0004's form of extension configs (`deploymentProviderConfigs`, also spelled
            /// `deploymentProviderConfigurations`); the engine folds it into `extension_configs`.
            #[serde(
                default,
                alias = "deploymentProviderConfigurations",
                skip_serializing_if = "Option::is_none"
            )]
            pub deployment_provider_configs: Option<ProviderConfigs>,
            /// Required.
            pub mode: DeploymentMode,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub debug_setting: Option<DebugSetting>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub on_error_deployment: Option<OnErrorDeployment>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub expression_evaluation_options: Option<ExpressionEvaluationOptions>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub validation_level: Option<ValidationLevel>,
            $($extra)*
        }
    };
}

/// The PUT body (`Deployment`; `ScopedDeployment` at tenant and management group scope, where `location`
/// is required).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// Where deployment data is stored; required at tenant, management group and subscription scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub properties: DeploymentProperties,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<DeploymentIdentity>,
}

deployment_properties! {
    /// `properties` of a deployment request.
    pub struct DeploymentProperties {}
}

impl DeploymentProperties {
    /// Properties with only a mode; fill in the rest.
    pub fn new(mode: DeploymentMode) -> Self {
        Self {
            template: None,
            template_link: None,
            parameters: None,
            parameters_link: None,
            external_inputs: None,
            external_input_definitions: None,
            extension_configs: None,
            deployment_provider_configs: None,
            mode,
            debug_setting: None,
            on_error_deployment: None,
            expression_evaluation_options: None,
            validation_level: None,
        }
    }
}

/// The body of `POST .../whatIf` (`DeploymentWhatIf`; `ScopedDeploymentWhatIf` at tenant and management
/// group scope, where `location` is required).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentWhatIf {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub properties: DeploymentWhatIfProperties,
}

deployment_properties! {
    /// `properties` of a what-if request: the deployment properties plus `whatIfSettings`.
    pub struct DeploymentWhatIfProperties {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub what_if_settings: Option<DeploymentWhatIfSettings>,
    }
}

impl DeploymentWhatIfProperties {
    /// The what-if properties of a deployment request with `settings`; the inverse of `into_parts`.
    pub fn from_parts(
        properties: DeploymentProperties,
        what_if_settings: Option<DeploymentWhatIfSettings>,
    ) -> Self {
        Self {
            template: properties.template,
            template_link: properties.template_link,
            parameters: properties.parameters,
            parameters_link: properties.parameters_link,
            external_inputs: properties.external_inputs,
            external_input_definitions: properties.external_input_definitions,
            extension_configs: properties.extension_configs,
            deployment_provider_configs: properties.deployment_provider_configs,
            mode: properties.mode,
            debug_setting: properties.debug_setting,
            on_error_deployment: properties.on_error_deployment,
            expression_evaluation_options: properties.expression_evaluation_options,
            validation_level: properties.validation_level,
            what_if_settings,
        }
    }

    /// Splits into the deployment properties the engine plans with and the what-if settings.
    pub fn into_parts(self) -> (DeploymentProperties, Option<DeploymentWhatIfSettings>) {
        let properties = DeploymentProperties {
            template: self.template,
            template_link: self.template_link,
            parameters: self.parameters,
            parameters_link: self.parameters_link,
            external_inputs: self.external_inputs,
            external_input_definitions: self.external_input_definitions,
            extension_configs: self.extension_configs,
            deployment_provider_configs: self.deployment_provider_configs,
            mode: self.mode,
            debug_setting: self.debug_setting,
            on_error_deployment: self.on_error_deployment,
            expression_evaluation_options: self.expression_evaluation_options,
            validation_level: self.validation_level,
        };
        (properties, self.what_if_settings)
    }
}

/// `whatIfSettings`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentWhatIfSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_format: Option<WhatIfResultFormat>,
}

extensible_enum! {
    /// Whether what-if returns full before/after payloads (the default) or resource IDs only.
    pub enum WhatIfResultFormat {
        ResourceIdOnly => "ResourceIdOnly",
        FullResourcePayloads => "FullResourcePayloads",
    }
}

extensible_enum! {
    /// `Incremental` leaves resources not in the template alone; `Complete` deletes them (resource group scope).
    pub enum DeploymentMode {
        Incremental => "Incremental",
        Complete => "Complete",
    }
}

/// `onErrorDeployment` (request) and `OnErrorDeploymentExtended` (response, adds `provisioningState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnErrorDeployment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub on_error_type: Option<OnErrorDeploymentType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
}

extensible_enum! {
    /// What to redeploy when a deployment fails.
    pub enum OnErrorDeploymentType {
        LastSuccessful => "LastSuccessful",
        SpecificDeployment => "SpecificDeployment",
    }
}

/// `expressionEvaluationOptions` of a nested deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionEvaluationOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ExpressionEvaluationScope>,
}

extensible_enum! {
    /// Whether a nested template sees the parent's parameters and variables (`Outer`, the default) or its own.
    pub enum ExpressionEvaluationScope {
        NotSpecified => "NotSpecified",
        Outer => "Outer",
        Inner => "Inner",
    }
}

/// `identity` of a deployment (used by deployment scripts and linked templates).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentIdentity {
    #[serde(rename = "type")]
    pub identity_type: DeploymentIdentityType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_assigned_identities: Option<IndexMap<String, UserAssignedIdentity>>,
}

extensible_enum! {
    /// The identity type of a deployment.
    pub enum DeploymentIdentityType {
        None => "None",
        UserAssigned => "UserAssigned",
    }
}

/// One user-assigned identity (read-only IDs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserAssignedIdentity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// The deployment resource returned by GET, PUT and list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentExtended {
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
    #[serde(default)]
    pub properties: DeploymentPropertiesExtended,
}

impl DeploymentExtended {
    /// The resource type, `Microsoft.Resources/deployments`.
    pub const TYPE: &'static str = "Microsoft.Resources/deployments";

    /// A response for the deployment `id` with `id`, `name` and `type` filled in.
    pub fn for_id(id: &ResourceId) -> Self {
        Self {
            id: Some(id.to_string()),
            name: id.name().map(str::to_owned),
            resource_type: Some(Self::TYPE.to_owned()),
            ..Self::default()
        }
    }
}

/// `properties` of a deployment in responses. All fields are read-only and optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPropertiesExtended {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<DeploymentProvisioningState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// See [`crate::time::format_timestamp`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// ISO 8601, e.g. `PT1.2970875S`; see [`crate::time::format_duration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// `{name: {type, value}}`; secure outputs are never returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<Provider>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<Dependency>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_link: Option<TemplateLink>,
    /// The parameters with their `type`; secure ones without value (see [`crate::secure`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<DeploymentParameters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_link: Option<ParametersLink>,
    /// The extensions used across all nested deployments; `config` only for stack-initiated deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<DeploymentExtension>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DeploymentMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_setting: Option<DebugSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error_deployment: Option<OnErrorDeployment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_hash: Option<String>,
    /// Resources created or updated (never `existing` ones), only on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_resources: Option<Vec<DeploymentResourceReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validated_resources: Option<Vec<DeploymentResourceReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<DeploymentDiagnosticsDefinition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_level: Option<ValidationLevel>,
}

extensible_enum! {
    /// A deployment's provisioning state (PascalCase, unlike stacks).
    pub enum DeploymentProvisioningState {
        NotSpecified => "NotSpecified",
        Accepted => "Accepted",
        Running => "Running",
        Ready => "Ready",
        Creating => "Creating",
        Created => "Created",
        Deleting => "Deleting",
        Deleted => "Deleted",
        Canceled => "Canceled",
        Failed => "Failed",
        Succeeded => "Succeeded",
        Updating => "Updating",
    }
}

impl DeploymentProvisioningState {
    /// `Succeeded`, `Failed` or `Canceled`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Canceled)
    }

    /// Whether the deployment can still be canceled (`Accepted` or `Running`).
    pub fn is_cancelable(&self) -> bool {
        matches!(self, Self::Accepted | Self::Running)
    }
}

/// A resource a deployment touched (`outputResources[]`, `validatedResources[]`): Azure resources carry
/// `id`; extensible resources carry `extension`, `resourceType`, `identifiers` and `apiVersion`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentResourceReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<DeploymentExtension>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Symbolic names from the root template down to the resource (2026-06-01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbolic_name_path: Option<Vec<String>>,
    /// REP 0004 (seed 001) reference ID `{flags}-{uniqueId}` for extensible resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_id: Option<String>,
}

/// A resource provider a deployment needs (`providers[]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_types: Option<Vec<ProviderResourceType>>,
}

/// A resource type of a [`Provider`] (the fields deployments fill in).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderResourceType {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_versions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_api_version: Option<String>,
}

/// A resource and what it depends on (`dependencies[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<BasicDependency>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

/// One dependency target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BasicDependency {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

/// A diagnostic from validation or what-if (e.g. `NestedDeploymentShortCircuited`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentDiagnosticsDefinition {
    pub level: DiagnosticLevel,
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_info: Option<Vec<crate::error::ErrorAdditionalInfo>>,
}

extensible_enum! {
    /// Severity of a deployment diagnostic.
    pub enum DiagnosticLevel {
        Warning => "Warning",
        Info => "Info",
        Error => "Error",
    }
}

/// The result of `POST .../validate` (200, or 400 with `error`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentValidateResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<DeploymentPropertiesExtended>,
}

/// The result of `POST .../exportTemplate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeploymentExportResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Value>,
}

/// The result of `POST /providers/Microsoft.Resources/calculateTemplateHash`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateHashResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minified_template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_hash: Option<String>,
}

/// `GET .../deployments`.
pub type DeploymentListResult = ListResult<DeploymentExtended>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mode_is_required_and_read_ignoring_case() {
        let ok: Deployment =
            serde_json::from_value(json!({"properties": {"mode": "incremental", "template": {}}}))
                .unwrap();
        assert_eq!(ok.properties.mode, DeploymentMode::Incremental);
        let err = serde_json::from_value::<Deployment>(json!({"properties": {"template": {}}}))
            .unwrap_err();
        assert!(err.to_string().contains("mode"), "{err}");
    }

    #[test]
    fn terminal_states() {
        assert!(DeploymentProvisioningState::Canceled.is_terminal());
        assert!(!DeploymentProvisioningState::Running.is_terminal());
        assert!(DeploymentProvisioningState::Accepted.is_cancelable());
        assert!(!DeploymentProvisioningState::parse("Weird").is_terminal());
    }

    #[test]
    fn response_for_an_id_names_the_deployment() {
        let id = ResourceId::parse("/subscriptions/s/providers/Microsoft.Resources/deployments/d1")
            .unwrap();
        let d = DeploymentExtended::for_id(&id);
        assert_eq!(
            (d.name.as_deref(), d.resource_type.as_deref()),
            (Some("d1"), Some(DeploymentExtended::TYPE))
        );
    }

    #[test]
    fn new_properties_serialize_to_just_the_mode() {
        assert_eq!(
            serde_json::to_value(DeploymentProperties::new(DeploymentMode::Complete)).unwrap(),
            json!({"mode": "Complete"})
        );
    }
}

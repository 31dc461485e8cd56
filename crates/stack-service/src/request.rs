//! From a stack request to what runs: the checks of a stack body before anything runs, the scope it deploys
//! into, the deployment it runs, and what the stack keeps of the request (never a secret: no secure parameter
//! values, no SAS tokens).

use cairn_arm::models::deployment::{Deployment, DeploymentMode, DeploymentProperties};
use cairn_arm::models::extension::ExtensionConfig;
use cairn_arm::models::stack::{DeploymentStack, DeploymentStackProperties};
use cairn_arm::{ArmError, ErrorDetail, ResourceId, ResourceIdKind};
use cairn_stacks::RunSettings;
use cairn_stacks::directive::{PersistedConfig, arm_api_call_expression};

pub(crate) fn stack_id(scope: &str, name: &str) -> Result<ResourceId, ArmError> {
    let text = format!(
        "{}/providers/Microsoft.Resources/deploymentStacks/{name}",
        scope.trim_end_matches('/')
    );
    ResourceId::parse(&text).map_err(|e| e.to_arm_error(&text))
}

pub(crate) fn bad_request(detail: ErrorDetail) -> ArmError {
    ArmError::from_detail(400, detail)
}

/// The parameters a stack may keep ([`cairn_stacks::kept_parameters`]).
pub(crate) use cairn_stacks::kept_parameters as public_parameters;

/// Refuses unknown `actionOnUnmanage` values (400 `InvalidActionOnUnmanage`).
pub(crate) fn check_actions(
    action: &cairn_arm::models::stack::ActionOnUnmanage,
) -> Result<(), ArmError> {
    cairn_stacks::UnmanagePolicy::from_action(action)
        .map_err(|e| bad_request(e.to_error_detail()))?;
    RunSettings::for_action(action).map_err(|e| bad_request(e.to_error_detail()))?;
    Ok(())
}

/// The stack body's `protect` and `retain` patterns as a policy; protection lifted when the operation bypasses
/// it. Errors name the pattern's property (400 `InvalidResourcePolicy`).
pub(crate) fn resource_policy(
    properties: &DeploymentStackProperties,
    bypass_protection: bool,
) -> Result<cairn_stacks::ResourcePolicy, cairn_arm::ErrorDetail> {
    cairn_stacks::ResourcePolicy::of_stack(properties, bypass_protection)
}

/// Checks what a stack body must hold before anything runs: the unmanage actions, template xor link, and
/// extension configs a stack can persist (no secure literals).
pub(crate) fn validate_body(properties: &DeploymentStackProperties) -> Result<(), ArmError> {
    check_actions(&properties.action_on_unmanage)?;
    resource_policy(properties, false).map_err(bad_request)?;
    match (&properties.template, &properties.template_link) {
        (Some(_), Some(_)) => {
            return Err(ArmError::new(
                400,
                "InvalidDeploymentStackTemplate",
                "Give either 'template' or 'templateLink', not both.",
            )
            .with_target("properties.template"));
        }
        (None, None) => {
            return Err(ArmError::new(
                400,
                "InvalidDeploymentStackTemplate",
                "The deployment stack has no 'template' or 'templateLink'.",
            )
            .with_target("properties.template"));
        }
        _ => {}
    }
    for (alias, config) in properties.extension_configs.iter().flatten() {
        // Seed 002's `{"type": "armApiCall", "value": "[list...()]"}` is not kept as given: the deployment makes
        // the call and its record holds the `apiReference`, which is what the stack persists.
        let kept: ExtensionConfig = config
            .iter()
            .filter(|(_, item)| {
                serde_json::to_value(item)
                    .map_or(true, |item| arm_api_call_expression(&item).is_none())
            })
            .map(|(name, item)| (name.clone(), item.clone()))
            .collect();
        PersistedConfig::from_arm(alias, &kept).map_err(|e| bad_request(e.to_error_detail()))?;
    }
    Ok(())
}

/// Subscription and management-group stacks run a deployment at that scope, which needs a location (ARM's
/// `LocationRequired`, refused before anything runs rather than as a failed deployment).
pub(crate) fn check_location(scope: &str, request: &DeploymentStack) -> Result<(), ArmError> {
    let needs_location = ResourceId::parse(scope).is_ok_and(|id| {
        matches!(
            id.kind(),
            ResourceIdKind::Subscription | ResourceIdKind::ManagementGroup
        )
    });
    if needs_location
        && request
            .location
            .as_deref()
            .is_none_or(|l| l.trim().is_empty())
    {
        return Err(ArmError::new(
            400,
            "LocationRequired",
            "The location property is required for a deployment stack at subscription or management group scope.",
        )
        .with_target("location"));
    }
    Ok(())
}

/// Where a stack may deploy (`deploymentScope`; default its own scope): a resource-group stack into its group; a
/// subscription stack into the subscription or one of its resource groups; a management-group stack into the
/// group or a subscription (cairn keeps no management-group hierarchy, so any subscription counts as a child).
/// Returns the effective scope.
pub(crate) fn deployment_scope_of(
    stack_scope: &str,
    properties: &DeploymentStackProperties,
) -> Result<String, ArmError> {
    let stack_scope = stack_scope.trim_end_matches('/');
    let Some(requested) = properties.deployment_scope.as_deref() else {
        return Ok(stack_scope.to_owned());
    };
    let requested = requested.trim_end_matches('/');
    let invalid = |why: &str| {
        ArmError::new(
            400,
            "InvalidDeploymentStackDeploymentScope",
            format!("The deployment scope '{requested}' is not valid for a stack at '{stack_scope}': {why}."),
        )
        .with_target("properties.deploymentScope")
    };
    let target = ResourceId::parse(requested)
        .map_err(|_| invalid("it is not a resource group, subscription or management group ID"))?;
    let stack = ResourceId::parse(stack_scope).map_err(|e| e.to_arm_error(stack_scope))?;
    let same_subscription = || {
        target
            .subscription_id()
            .zip(stack.subscription_id())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    let allowed = match (stack.kind(), target.kind()) {
        (ResourceIdKind::ResourceGroup, ResourceIdKind::ResourceGroup) => {
            requested.eq_ignore_ascii_case(stack_scope)
        }
        (ResourceIdKind::ResourceGroup, _) => false,
        (
            ResourceIdKind::Subscription,
            ResourceIdKind::Subscription | ResourceIdKind::ResourceGroup,
        ) => same_subscription(),
        (ResourceIdKind::ManagementGroup, ResourceIdKind::ManagementGroup) => {
            requested.eq_ignore_ascii_case(stack_scope)
        }
        (ResourceIdKind::ManagementGroup, ResourceIdKind::Subscription) => true,
        _ => false,
    };
    if !allowed {
        return Err(invalid(match stack.kind() {
            ResourceIdKind::ResourceGroup => {
                "a resource-group stack deploys into its own resource group"
            }
            ResourceIdKind::Subscription => {
                "a subscription stack deploys into its subscription or one of its resource groups"
            }
            _ => "a management-group stack deploys into its management group or a subscription",
        }));
    }
    Ok(requested.to_owned())
}

/// A `templateLink` as a stack keeps and returns it: its `queryString` and the query of its `uri` are credentials
/// (SAS tokens), which the engine keeps sealed for the deployment and the stack never holds.
pub(crate) fn link_without_credentials(
    link: &cairn_arm::models::common::TemplateLink,
) -> cairn_arm::models::common::TemplateLink {
    cairn_arm::models::common::TemplateLink {
        uri: link.uri.as_deref().map(uri_without_query),
        query_string: None,
        ..link.clone()
    }
}

pub(crate) fn parameters_link_without_credentials(
    link: &cairn_arm::models::common::ParametersLink,
) -> cairn_arm::models::common::ParametersLink {
    cairn_arm::models::common::ParametersLink {
        uri: uri_without_query(&link.uri),
        ..link.clone()
    }
}

fn uri_without_query(uri: &str) -> String {
    uri.split(['?', '#']).next().unwrap_or_default().to_owned()
}

/// The deployment a stack runs.
pub(crate) fn deployment_of(stack: &DeploymentStack) -> Deployment {
    into_deployment(stack.location.clone(), stack.properties.clone())
}

/// [`deployment_of`] for a request no longer needed: its template moves into the deployment instead of being copied
/// (a big stack's is megabytes).
pub(crate) fn into_deployment(
    location: Option<String>,
    p: DeploymentStackProperties,
) -> Deployment {
    let mut properties = DeploymentProperties::new(DeploymentMode::Incremental);
    properties.template = p.template;
    properties.template_link = p.template_link;
    properties.parameters = p.parameters;
    properties.parameters_link = p.parameters_link;
    properties.extension_configs = p.extension_configs;
    properties.external_inputs = p.external_inputs;
    properties.external_input_definitions = p.external_input_definitions;
    properties.debug_setting = p.debug_setting;
    properties.validation_level = p.validation_level;
    Deployment {
        location,
        properties,
        tags: None,
        identity: None,
    }
}

//! A deployment request's pure facts: its template and parameters (extension configs read once into typed
//! values), its scope, template hash and store keys, and the deployment context it runs in.

use std::borrow::Cow;

use cairn_arm::models::deployment::DeploymentProperties;
use cairn_arm::models::extension::{ExtensionConfig, ExtensionConfigs};
use cairn_arm::{ArmError, ErrorDetail, ResourceId, ResourceIdKind};
use cairn_config::InputJson;
use cairn_eval::ScopeKind;
use cairn_json::{Node, Span};
use cairn_store::DeploymentKey;
use cairn_template::config::{ConfigError, config_diagnostic};
use cairn_template::params::ExtensionConfigInput;
use cairn_template::resource_types::TypeFinding;
use cairn_template::{DeploymentContext, Diagnostic, ParametersFile};
use serde_json::{Value as Json, json};

use crate::records::EngineAnnotation;
use crate::settings::EngineSettings;

/// A template scope's kind for a deployment scope ID.
pub(crate) fn scope_kind_of(scope: &str) -> Result<ScopeKind, ArmError> {
    if scope.trim_matches('/').is_empty() {
        return Ok(ScopeKind::Tenant);
    }
    let id = ResourceId::parse(scope).map_err(|e| e.to_arm_error(scope))?;
    match id.kind() {
        ResourceIdKind::ResourceGroup => Ok(ScopeKind::ResourceGroup),
        ResourceIdKind::Subscription => Ok(ScopeKind::Subscription),
        ResourceIdKind::ManagementGroup => Ok(ScopeKind::ManagementGroup),
        ResourceIdKind::Tenant => Ok(ScopeKind::Tenant),
        _ => Err(ArmError::new(
            400,
            "InvalidDeploymentScope",
            format!(
                "Deployments can be created at a tenant, management group, subscription or resource group, not at '{scope}'."
            ),
        )),
    }
}

pub(crate) fn scope_name(kind: ScopeKind) -> &'static str {
    match kind {
        ScopeKind::Tenant => "tenant",
        ScopeKind::ManagementGroup => "management group",
        ScopeKind::Subscription => "subscription",
        ScopeKind::ResourceGroup | ScopeKind::Local => "resource group",
    }
}

/// The template JSON of a request (an object, or a JSON string holding one). A linked request is resolved first
/// ([`crate::link::resolve_request`]): its `template` then holds the downloaded template beside the link. An object
/// is lent, not copied (a big template's copy is milliseconds); a string is parsed.
pub(crate) fn template_json(properties: &DeploymentProperties) -> Result<Cow<'_, Json>, ArmError> {
    if properties.template.is_none() && properties.template_link.is_some() {
        return Err(ArmError::new(
            400,
            "InvalidRequestContent",
            "The linked template of this request was not resolved.",
        ));
    }
    match &properties.template {
        Some(template @ Json::Object(_)) => Ok(Cow::Borrowed(template)),
        Some(Json::String(text)) => serde_json::from_str::<Json>(text)
            .ok()
            .filter(Json::is_object)
            .map(Cow::Owned)
            .ok_or_else(|| {
                ArmError::new(
                    400,
                    "InvalidTemplate",
                    "The template string is not a JSON object.",
                )
            }),
        _ => Err(ArmError::new(
            400,
            "InvalidRequestContent",
            "The request content is not valid: 'properties.template' is required.",
        )),
    }
}

/// The parameters `template` declares secure (`secureString`, `secureObject`), read from its JSON (`template_json`):
/// their values are sealed before a request is stored.
pub(crate) fn secure_parameter_names(
    template: &cairn_template::Template,
    template_json: &Json,
) -> Vec<String> {
    template
        .parameters
        .iter()
        .filter(|p| {
            cairn_arm::secure::template_parameter_type(template_json, &p.name)
                .is_some_and(|t| cairn_arm::secure::is_secure_type(&t))
        })
        .map(|p| p.name.clone())
        .collect()
}

/// The parameters file a request amounts to: its `parameters`, and its `extensionConfigs` read once into typed
/// config values (each property on its own, so every invalid one is reported).
pub(crate) fn parameters_file(
    properties: &DeploymentProperties,
) -> (ParametersFile, Vec<ErrorDetail>) {
    let doc = json!({
        "parameters": properties
            .parameters
            .as_ref()
            .map(|p| Json::Object(p.0.clone()))
            .unwrap_or_else(|| json!({})),
    });
    let (mut file, diags) = ParametersFile::parse(&Node::from_json(&doc));
    let mut errors: Vec<ErrorDetail> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(diagnostic_detail)
        .collect();
    for (alias, config) in properties.extension_configs.iter().flatten() {
        let (input, config_errors) = read_config_input(alias, "extensionConfigs", config);
        errors.extend(
            config_errors
                .iter()
                .map(|e| diagnostic_detail(&config_diagnostic(e, &input.path))),
        );
        file.extension_configs.push(input);
    }
    (file, errors)
}

/// Reads one alias's request items into its typed config; `key` is the member holding the configs.
fn read_config_input(
    alias: &str,
    key: &str,
    items: &ExtensionConfig,
) -> (ExtensionConfigInput, Vec<ConfigError>) {
    // The request model's items are JSON with some members typed; their JSON is what the parser reads.
    let items: Vec<(&str, Json)> = items
        .iter()
        .map(|(property, item)| {
            (
                property.as_str(),
                serde_json::to_value(item).unwrap_or(Json::Null),
            )
        })
        .collect();
    // Read as deployment input: seed 002's `{"type": "armApiCall", "value": "[list...()]"}` is deferred, and
    // the expansion evaluates the call against this deployment's template and records it as an `apiReference`.
    ExtensionConfigInput::read(
        alias,
        cairn_template::join_path(key, alias),
        Span::default(),
        items
            .iter()
            .map(|(property, item)| (*property, InputJson::new(item))),
    )
}

/// Folds a request's `deploymentProviderConfigs` (REP 0004; also spelled `deploymentProviderConfigurations`) into
/// its `extensionConfigs`, reading the items as a parameters file reads them (`reference` is a Key Vault
/// reference), so that sealing, expansion and records see one form and the other is never stored.
pub(crate) fn fold_provider_configs(properties: &mut DeploymentProperties) -> Result<(), ArmError> {
    let Some(configs) = properties.deployment_provider_configs.take() else {
        return Ok(());
    };
    let invalid = |details: Vec<ErrorDetail>| {
        ArmError::new(
            400,
            "InvalidRequestContent",
            "The request's 'deploymentProviderConfigs' are not valid; see the details.",
        )
        .with_details(details)
    };
    let mut inputs = Vec::new();
    let mut errors = Vec::new();
    for (alias, value) in &configs.0 {
        let path = cairn_template::join_path("deploymentProviderConfigs", alias);
        let Some(members) = value.as_object() else {
            errors.push(
                ErrorDetail::new(
                    "InvalidParameterFile",
                    format!("The extension config for '{alias}' must be an object of properties."),
                )
                .with_target(format!("properties.{path}")),
            );
            continue;
        };
        let (input, config_errors) = ExtensionConfigInput::read(
            alias,
            path,
            Span::default(),
            members.iter().map(|(k, v)| (k.as_str(), v)),
        );
        errors.extend(config_errors.iter().map(|e| {
            let d = config_diagnostic(e, &input.path);
            diagnostic_detail(&d).with_target(format!("properties.{}", d.target))
        }));
        inputs.push(input);
    }
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    let merged = properties
        .extension_configs
        .get_or_insert_with(ExtensionConfigs::default);
    for input in inputs {
        if merged.keys().any(|a| a.eq_ignore_ascii_case(&input.alias)) {
            return Err(invalid(vec![
                ErrorDetail::new(
                    "InvalidExtensionConfig",
                    format!(
                        "The config of extension '{}' is given in both 'extensionConfigs' and \
                         'deploymentProviderConfigs'.",
                        input.alias
                    ),
                )
                .with_target(format!("properties.{}", input.path)),
            ]));
        }
        merged.insert(input.alias, input.config.to_request());
    }
    Ok(())
}

/// FNV-1a of the template text as a decimal string, shaped like ARM's `templateHash`.
pub(crate) fn template_hash(template: &Json) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in template.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.to_string()
}

pub(crate) fn diagnostic_detail(d: &Diagnostic) -> ErrorDetail {
    let mut e = ErrorDetail::new(d.code.clone(), d.message.clone());
    if !d.target.is_empty() {
        e = e.with_target(d.target.clone());
    }
    e
}

/// A resource body's finding against its extension's types as an ARM error: the property's full path as its
/// target, and a `TemplateViolation` naming the closest path the template writes, where a client can point.
pub(crate) fn type_finding_detail(finding: &TypeFinding) -> ErrorDetail {
    diagnostic_detail(&finding.diagnostic)
        .with_additional_info("TemplateViolation", json!({ "path": finding.anchor }))
}

/// The error of a template that cannot be expanded: one `InvalidTemplate` with the diagnostics as details.
pub(crate) fn template_error(diags: &[Diagnostic]) -> ErrorDetail {
    let errors: Vec<ErrorDetail> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(diagnostic_detail)
        .collect();
    match errors.as_slice() {
        [one] => one.clone(),
        _ => ErrorDetail::new(
            "InvalidTemplate",
            "The template is not valid; see the details.",
        )
        .with_details(errors),
    }
}

/// The deployment context (scope facts) of a deployment at `key`.
pub(crate) fn context_for(
    key: &DeploymentKey,
    location: Option<&str>,
    resource_group_location: Option<&str>,
    annotation: &EngineAnnotation,
    settings: &EngineSettings,
) -> DeploymentContext {
    let mut ctx = DeploymentContext {
        tenant_id: settings.tenant_id.clone(),
        deployment_name: key.name.clone(),
        location: location.map(str::to_string),
        utc_now: Some(annotation.utc_now.clone()).filter(|s| !s.is_empty()),
        new_guids: annotation.new_guids.clone(),
        eval_limits: settings.eval_limits,
        shared_budget: settings.eval_server_budget.clone(),
        ..DeploymentContext::default()
    };
    if let Ok(scope) = ResourceId::parse(&key.scope) {
        if let Some(sub) = scope.subscription_id() {
            ctx.subscription_id = sub.to_string();
        }
        if let Some(rg) = scope.resource_group_name() {
            ctx.resource_group = rg.to_string();
            ctx.resource_group_location = resource_group_location.unwrap_or_default().to_string();
        }
        if let Some(mg) = scope.management_group_name() {
            ctx.management_group = Some(mg.to_string());
        }
    }
    ctx
}

/// The store scope key of a deployment: the scope ID (`""` for the tenant).
pub(crate) fn scope_key(scope: &str) -> String {
    let trimmed = scope.trim_end_matches('/');
    trimmed.to_string()
}

/// The store key of a deployment resource ID.
pub(crate) fn deployment_key_of(id: &str) -> Option<DeploymentKey> {
    let lower = id.to_ascii_lowercase();
    let marker = "/providers/microsoft.resources/deployments/";
    let at = lower.rfind(marker)?;
    let scope = &id[..at];
    let name = &id[at + marker.len()..];
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some(DeploymentKey::new(scope, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secure_parameters_are_those_typed_secure() {
        let template = json!({ "parameters": {
            "password": { "type": "secureString" },
            "settings": { "type": "SecureObject" },
            "name": { "type": "string" }
        }, "resources": [] });
        let parsed = cairn_template::Template::parse(Node::from_json(&template)).0;
        assert_eq!(
            secure_parameter_names(&parsed, &template),
            ["password", "settings"]
        );
    }

    #[test]
    fn deployment_ids_become_keys() {
        let key = deployment_key_of(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/inner",
        )
        .unwrap();
        assert_eq!(key.scope, "/subscriptions/s/resourceGroups/rg");
        assert_eq!(key.name, "inner");
        let tenant = deployment_key_of("/providers/Microsoft.Resources/deployments/t").unwrap();
        assert_eq!(tenant.scope, "");
        assert!(deployment_key_of("/subscriptions/s").is_none());
    }

    #[test]
    fn scope_kinds() {
        assert_eq!(scope_kind_of("").unwrap(), ScopeKind::Tenant);
        assert_eq!(
            scope_kind_of("/subscriptions/s/resourceGroups/rg").unwrap(),
            ScopeKind::ResourceGroup
        );
        assert!(scope_kind_of("/subscriptions/s/resourceGroups/rg/providers/A.B/c/d").is_err());
    }

    #[test]
    fn template_hash_is_stable() {
        assert_eq!(
            template_hash(&json!({"a": 1})),
            template_hash(&json!({"a": 1}))
        );
        assert_ne!(
            template_hash(&json!({"a": 1})),
            template_hash(&json!({"a": 2}))
        );
    }
}

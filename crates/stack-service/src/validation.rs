//! Stacks-mode validation of a stack body before it deploys: rule `stacks-extensibility-compat` (cairn-stacks-lint)
//! over the stack's inline template, its parameters and its `extensionConfigs`.
//!
//! A stack keeps managing extension resources long after the deployment, so every extension config it is given must
//! be storable or re-fetchable (REP 0006). Findings of error level refuse the operation with 400
//! `InvalidTemplateDeployment` whose `details` are the findings (code, JSON path, message; never a value).

use cairn_arm::models::stack::DeploymentStackProperties;
use cairn_arm::{ArmError, ErrorDetail};
use cairn_stacks_lint::{LintInput, Mode, Rules};
use cairn_template::{Severity, SourceFile};
use serde_json::{Map, Value, json};

/// The schema of the parameters file the stack's parameters and extension configs are presented as.
const PARAMETERS_SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#";

/// Lints an inline stack template (a `templateLink` cannot be read before it is fetched, the engine checks it then).
/// `Ok` when nothing of error level is found.
pub(crate) fn check_stack_extension_configs(
    stack_name: &str,
    properties: &DeploymentStackProperties,
) -> Result<(), ArmError> {
    let Some(template) = &properties.template else {
        return Ok(());
    };
    let template_text = template.to_string();
    let template_file = SourceFile::new("template", template_text);
    let parameters_file =
        parameters_file_of(properties).map(|text| SourceFile::new("parameters", text));
    let rules = Rules::default();
    let findings: Vec<ErrorDetail> = cairn_stacks_lint::lint(&LintInput {
        template: &template_file,
        parameters: parameters_file.as_ref(),
        rules: &rules,
        mode: Mode::Stacks,
        rules_base: None,
    })
    .into_iter()
    .filter(|d| d.severity == Severity::Error)
    .map(|d| {
        // Parameters-file paths (`extensionConfigs.k8s...`) are the stack body's own, under `properties`.
        let target = match d.file.as_deref() {
            Some("parameters") => join_target("properties", &d.target),
            _ => join_target("properties.template", &d.target),
        };
        ErrorDetail::new(d.code, d.message).with_target(target)
    })
    .collect();
    if findings.is_empty() {
        return Ok(());
    }
    Err(ArmError::new(
        400,
        "InvalidTemplateDeployment",
        format!(
            "The template deployment of deployment stack '{stack_name}' is not valid for a deployment stack: {} \
             extension config value(s) can neither be stored nor fetched again when the stack deletes resources. \
             See inner errors for details.",
            findings.len()
        ),
    )
    .with_details(findings))
}

fn join_target(prefix: &str, target: &str) -> String {
    if target.is_empty() {
        prefix.to_owned()
    } else {
        format!("{prefix}.{target}")
    }
}

/// The stack's `parameters` and `extensionConfigs` as a parameters file (the linter checks the root deployment's
/// configs from there); `None` when the stack has neither.
fn parameters_file_of(properties: &DeploymentStackProperties) -> Option<String> {
    if properties.parameters.is_none() && properties.extension_configs.is_none() {
        return None;
    }
    let mut file = Map::new();
    file.insert("$schema".into(), json!(PARAMETERS_SCHEMA));
    file.insert("contentVersion".into(), json!("1.0.0.0"));
    file.insert(
        "parameters".into(),
        properties
            .parameters
            .as_ref()
            .and_then(|p| serde_json::to_value(p).ok())
            .unwrap_or_else(|| json!({})),
    );
    if let Some(configs) = &properties.extension_configs {
        file.insert(
            "extensionConfigs".into(),
            serde_json::to_value(configs).unwrap_or_else(|_| json!({})),
        );
    }
    Some(Value::Object(file).to_string())
}

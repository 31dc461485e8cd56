//! Seed 000's stacks-mode table as the engine applies it: the stacks linter's rule `stacks-extensibility-compat`
//! over a deployment's template, parameters and extension configs.
//!
//! The stack service runs it on a stack body before anything is written, and the engine runs it again on every
//! deployment a stack starts (the stack id header marks those), so a request that skips the stack service, or a
//! gap between the two, cannot make a stack that deletes without a credential. One function, used by both.

use cairn_arm::ErrorDetail;
use cairn_arm::models::extension::ExtensionConfigs;
use cairn_arm::models::parameters::DeploymentParameters;
use cairn_stacks_lint::{LintInput, Mode, Rules};
use cairn_template::{Severity, SourceFile};
use serde_json::{Map, Value, json};

/// The schema of the parameters file the deployment's parameters and extension configs are presented as.
const PARAMETERS_SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#";

/// The error-level findings of seed 000's stacks-mode rules for `template` deployed with `parameters` and
/// `extension_configs` (the root deployment's). Template findings are reported under `template_target`,
/// parameters-file findings under `parameters_target` (`extensionConfigs.k8s...` there is the request's own path).
/// Findings name code, JSON path and message; never a value.
pub fn stacks_mode_findings(
    template: &Value,
    parameters: Option<&DeploymentParameters>,
    extension_configs: Option<&ExtensionConfigs>,
    (template_target, parameters_target): (&str, &str),
) -> Vec<ErrorDetail> {
    let template_text = match template {
        // A template sent as a JSON string is linted as that text.
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let template_file = SourceFile::new("template", template_text);
    let parameters_file = parameters_file_of(parameters, extension_configs)
        .map(|text| SourceFile::new("parameters", text));
    let rules = Rules::default();
    cairn_stacks_lint::lint(&LintInput {
        template: &template_file,
        parameters: parameters_file.as_ref(),
        rules: &rules,
        mode: Mode::Stacks,
        rules_base: None,
    })
    .into_iter()
    .filter(|d| d.severity == Severity::Error)
    .map(|d| {
        let target = match d.file.as_deref() {
            Some("parameters") => join_target(parameters_target, &d.target),
            _ => join_target(template_target, &d.target),
        };
        ErrorDetail::new(d.code, d.message).with_target(target)
    })
    .collect()
}

fn join_target(prefix: &str, target: &str) -> String {
    match (prefix.is_empty(), target.is_empty()) {
        (_, true) => prefix.to_owned(),
        (true, false) => target.to_owned(),
        (false, false) => format!("{prefix}.{target}"),
    }
}

/// The parameters and `extensionConfigs` as a parameters file (the linter checks the root deployment's configs
/// from there); `None` when there are neither.
fn parameters_file_of(
    parameters: Option<&DeploymentParameters>,
    extension_configs: Option<&ExtensionConfigs>,
) -> Option<String> {
    if parameters.is_none() && extension_configs.is_none() {
        return None;
    }
    let mut file = Map::new();
    file.insert("$schema".into(), json!(PARAMETERS_SCHEMA));
    file.insert("contentVersion".into(), json!("1.0.0.0"));
    file.insert(
        "parameters".into(),
        parameters
            .and_then(|p| serde_json::to_value(p).ok())
            .unwrap_or_else(|| json!({})),
    );
    if let Some(configs) = extension_configs {
        file.insert(
            "extensionConfigs".into(),
            serde_json::to_value(configs).unwrap_or_else(|_| json!({})),
        );
    }
    Some(Value::Object(file).to_string())
}

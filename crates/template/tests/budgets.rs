//! Evaluation budgets at template level: a template whose variables double a string 39 times expands to an
//! `EvaluationLimitExceeded` diagnostic at the JSON path of the variable, quickly and within bounded memory; a
//! deployment's nested templates draw on the same budget; the limits come from the deployment context.

use std::time::{Duration, Instant};

use cairn_eval::{EvalLimits, LIMIT_EXCEEDED};
use cairn_template::{
    DeploymentContext, DeploymentInput, Diagnostic, Offline, ParametersFile, Template, expand,
};
use serde_json::{Value as Json, json};

/// A template whose variable `v{n}` is `v{n-1}` twice: `v39` would be 2^39 bytes.
fn doubling_template(times: usize) -> Json {
    let mut variables = serde_json::Map::new();
    variables.insert("v0".into(), json!("a"));
    for i in 1..=times {
        variables.insert(
            format!("v{i}"),
            json!(format!(
                "[concat(variables('v{}'), variables('v{}'))]",
                i - 1,
                i - 1
            )),
        );
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "variables": variables,
        "resources": [],
        "outputs": { "big": { "type": "int", "value": format!("[length(variables('v{times}'))]") } }
    })
}

fn expand_with(template: &Json, limits: EvalLimits) -> Vec<Diagnostic> {
    let (template, diags) = Template::parse(cairn_json::parse(&template.to_string()).unwrap());
    assert!(!diags.iter().any(Diagnostic::is_error), "{diags:?}");
    let context = DeploymentContext {
        eval_limits: limits,
        ..DeploymentContext::default()
    };
    let input = DeploymentInput::new(&template, &ParametersFile::default(), context);
    let (_, diags) = expand(input, &Offline);
    diags.into_iter().filter(Diagnostic::is_error).collect()
}

#[test]
fn doubling_a_string_39_times_is_an_evaluation_limit_error_at_the_variable() {
    let started = Instant::now();
    let errors = expand_with(&doubling_template(39), EvalLimits::default());
    assert!(started.elapsed() < Duration::from_secs(20));
    let error = errors
        .iter()
        .find(|d| d.code == LIMIT_EXCEEDED)
        .unwrap_or_else(|| panic!("no limit error in {errors:?}"));
    assert_eq!(error.target, "outputs.big", "{error:?}");
    // 2^22 + 2 bytes is the first value past 4 MiB: the variable that would hold it is named with its path.
    assert!(
        error.message.contains("variables.v22"),
        "the message names the variable's JSON path: {}",
        error.message
    );
    assert!(
        error.message.contains("maxValueBytes = 4194304"),
        "{}",
        error.message
    );
}

#[test]
fn the_same_template_under_the_limit_expands() {
    let errors = expand_with(&doubling_template(10), EvalLimits::default());
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn limits_come_from_the_deployment_context() {
    let errors = expand_with(
        &doubling_template(10),
        EvalLimits {
            max_value_bytes: 512,
            ..EvalLimits::default()
        },
    );
    let error = errors
        .iter()
        .find(|d| d.code == LIMIT_EXCEEDED)
        .unwrap_or_else(|| panic!("no limit error in {errors:?}"));
    assert!(error.message.contains("variables.v9"), "{}", error.message);
    assert!(
        error.message.contains("maxValueBytes = 512"),
        "{}",
        error.message
    );
}

#[test]
fn a_long_chain_of_variables_stops_at_the_depth_limit_instead_of_the_stack() {
    let mut variables = serde_json::Map::new();
    variables.insert("v0".into(), json!("a"));
    for i in 1..=2000 {
        variables.insert(format!("v{i}"), json!(format!("[variables('v{}')]", i - 1)));
    }
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "variables": variables,
        "resources": [],
        "outputs": { "o": { "type": "string", "value": "[variables('v2000')]" } }
    });
    let (template, _) = Template::parse(cairn_json::parse(&template.to_string()).unwrap());
    let input = DeploymentInput::new(
        &template,
        &ParametersFile::default(),
        DeploymentContext::default(),
    );
    let (_, diags) = expand(input, &Offline);
    assert!(
        diags
            .iter()
            .any(|d| d.code == LIMIT_EXCEEDED && d.message.contains("maxDepth")),
        "{diags:?}"
    );
}

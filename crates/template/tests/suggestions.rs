//! "Did you mean" in the expansion's findings (the ones static checks cannot make: names computed at evaluation,
//! parameters given but not declared, references to resources, properties and outputs), and their positions.

use cairn_template::{
    ContextRuntime, DeploymentContext, DeploymentInput, Diagnostic, ParametersFile, SourceFile,
    Template, expand,
};

/// The error findings of expanding `text` with the parameters file `params`, located in `text`.
fn errors(text: &str, params: &str) -> Vec<Diagnostic> {
    let source = SourceFile::new("t.json", text);
    let (template, diags) = Template::parse(cairn_json::parse(text).unwrap());
    assert!(!diags.iter().any(Diagnostic::is_error), "{diags:#?}");
    let (params, _) = ParametersFile::parse(&cairn_json::parse(params).unwrap());
    let context = DeploymentContext::default();
    let runtime = ContextRuntime { context: &context };
    let (_, diags) = expand(
        DeploymentInput::new(&template, &params, context.clone()),
        &runtime,
    );
    diags
        .into_iter()
        .filter(Diagnostic::is_error)
        .map(|d| source.locate(d))
        .collect()
}

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

#[test]
fn a_parameter_given_but_not_declared_suggests_the_declared_one() {
    let text = format!(
        r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0.0.0", "parameters": {{"siteName": {{"type": "string"}}}}, "resources": []}}"#
    );
    let found = errors(
        &text,
        r#"{"parameters": {"siteName": {"value": "a"}, "siteNme": {"value": "b"}}}"#,
    );
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].target, "parameters.siteNme");
    assert!(
        found[0].message.ends_with(
            "can therefore not be provided at deployment time. Did you mean 'siteName'?"
        ),
        "{}",
        found[0].message
    );
}

#[test]
fn computed_names_are_suggested_and_pointed_at() {
    let text = format!(
        r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0.0.0", "parameters": {{"siteName": {{"type": "string", "defaultValue": "a"}}}},
  "variables": {{"v": "[toUpper(parameters(concat('site', 'Nme')))]"}}, "resources": [],
  "outputs": {{"o": {{"type": "string", "value": "[variables('v')]"}}}}}}"#
    );
    let found = errors(&text, "{}");
    assert!(!found.is_empty(), "{found:#?}");
    let d = &found[0];
    assert!(
        d.message
            .contains("The template parameter 'siteNme' is not found. Did you mean 'siteName'?"),
        "{}",
        d.message
    );
    // The call that asked for the name, not the start of the string.
    assert_eq!(
        &text[d.span.unwrap().range()],
        "parameters(concat('site', 'Nme'))"
    );
}

#[test]
fn references_to_resources_and_properties_are_suggested() {
    let text = format!(
        r#"{{"$schema": "{SCHEMA}", "languageVersion": "2.0", "contentVersion": "1.0.0.0",
  "resources": {{"storage": {{"type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01", "name": "st", "location": "x"}}}},
  "outputs": {{"id": {{"type": "string", "value": "[reference('storag').id]"}},
              "o": {{"type": "int", "value": "[createObject('result', 1).resutl]"}}}}}}"#
    );
    let found = errors(&text, "{}");
    let messages: Vec<&str> = found.iter().map(|d| d.message.as_str()).collect();
    assert!(
        messages.iter().any(
            |m| m.contains("The template reference 'storag' is not valid")
                && m.ends_with("Did you mean 'storage'?")
        ),
        "{messages:#?}"
    );
    let property = found
        .iter()
        .find(|d| d.message.contains("'resutl' doesn't exist"))
        .unwrap_or_else(|| panic!("{messages:#?}"));
    assert!(
        property
            .message
            .ends_with("available properties are 'result'. Did you mean 'result'?"),
        "{}",
        property.message
    );
}

//! Secure values never show in expansion findings: secure parameters (directly or through `definitions`), Key Vault
//! secrets, `list*` answers and values computed from them fail functions and type checks without being quoted.

use cairn_eval::Value;
use cairn_template::{
    DeploymentContext, DeploymentInput, Diagnostic, Expansion, KeyVaultReference, ParametersFile,
    Plan, ReferenceRequest, RuntimeHook, Template, expand,
};

const CANARY: &str = "CANARYc4n4ry";

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// Answers every Key Vault reference and `list*` call with the canary.
struct SecretHook;

impl RuntimeHook for SecretHook {
    fn reference(&self, _: &ReferenceRequest<'_>) -> Option<Value> {
        None
    }
    fn list(&self, _: &str, _: &str, _: &str, _: Option<&Value>) -> Option<Value> {
        Some(Value::from(
            serde_json::json!({"value": CANARY, "keys": [CANARY]}),
        ))
    }
    fn key_vault_secret(&self, _: &KeyVaultReference) -> Option<Value> {
        Some(Value::from(CANARY))
    }
}

/// The canary's forms that must not show.
fn forbidden() -> Vec<String> {
    let mut out = vec![
        CANARY.to_string(),
        CANARY.to_ascii_uppercase(),
        CANARY.to_ascii_lowercase(),
    ];
    for pad in 0..3 {
        let text = format!("{}{CANARY}", "x".repeat(pad));
        let encoded = data_encoding::BASE64.encode(text.as_bytes());
        let start = if pad == 0 { 0 } else { 4 };
        out.push(encoded[start..encoded.len() - 4].to_string());
    }
    out
}

#[track_caller]
fn assert_clean(what: &str, diags: &[Diagnostic]) {
    let forbidden = forbidden();
    for d in diags {
        let texts = [d.message.clone(), d.target.clone(), format!("{d:?}")];
        for f in &forbidden {
            assert!(
                !texts.iter().any(|t| t.contains(f.as_str())),
                "{what}: a finding shows {f:?}: {d:#?}"
            );
        }
    }
}

/// A template with `parameters` and one output per expression (each output fails on its own).
fn template(parameters: &str, definitions: &str, variables: &str, outputs: &[&str]) -> String {
    let outputs: Vec<String> = outputs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                r#""o{i}": {{"type": "string", "value": {}}}"#,
                serde_json::to_string(&format!("[{e}]")).unwrap()
            )
        })
        .collect();
    format!(
        r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0.0.0", "definitions": {{{definitions}}},
  "parameters": {{{parameters}}}, "variables": {{{variables}}}, "resources": [],
  "outputs": {{{}}}}}"#,
        outputs.join(", ")
    )
}

/// Every finding of expanding `text` with the parameters file `params`, in one go and step by step.
fn findings(text: &str, params: &str) -> Vec<Diagnostic> {
    let (template, mut diags) = Template::parse(cairn_json::parse(text).unwrap());
    let (params, params_diags) = ParametersFile::parse(&cairn_json::parse(params).unwrap());
    diags.extend(params_diags);
    let (_, found) = expand(
        DeploymentInput::new(&template, &params, DeploymentContext::default()),
        &SecretHook,
    );
    diags.extend(found);
    match Expansion::start(
        DeploymentInput::new(&template, &params, DeploymentContext::default()),
        &SecretHook,
    ) {
        Ok(expansion) => {
            diags.extend(expansion.diagnostics());
            if let Err(found) = expansion.outputs() {
                diags.extend(found);
            }
        }
        Err(found) => diags.extend(found),
    }
    diags
}

/// Expressions that fail on a string secret `s` (written as `S`) and say why.
const STRING_FAILURES: &[&str] = &[
    "string(int(S))",
    "string(float(S))",
    "string(bool(S))",
    "dateTimeAdd(S, 'P1D')",
    "dateTimeAdd('2020-01-01', S)",
    "string(dateTimeToEpoch(S))",
    "string(parseCidr(S))",
    "string(createObject(S, 1, S, 2))",
    "string(S[5])",
    "S.missing",
    "string(createObject('a', 1)[S])",
    "string(int(toUpper(S)))",
    "string(int(base64(S)))",
    "string(json(concat('{', S)))",
    "fail(S)",
];

fn with_secret(secret: &str) -> Vec<String> {
    STRING_FAILURES
        .iter()
        .map(|e| e.replace('S', secret))
        .collect()
}

#[track_caller]
fn check(what: &str, text: &str, params: &str, expected_errors: usize) {
    let diags = findings(text, params);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    assert!(
        errors >= expected_errors,
        "{what}: expected at least {expected_errors} errors, got {diags:#?}"
    );
    assert_clean(what, &diags);
}

#[test]
fn secure_string_parameters_are_not_quoted() {
    let outputs = with_secret("parameters('sec')");
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let text = template(r#""sec": {"type": "secureString"}"#, "", "", &outputs);
    let params = format!(r#"{{"parameters": {{"sec": {{"value": "{CANARY}"}}}}}}"#);
    check("secureString", &text, &params, outputs.len());
}

#[test]
fn secure_objects_are_not_quoted() {
    let outputs = [
        "parameters('secObj')['missing']",
        "parameters('secObj').missing",
        "string(int(parameters('secObj').v))",
        "string(parameters('secObj')[5])",
        "string(createObject('a', 1)[parameters('secObj').v])",
        "fail(parameters('secObj'))",
    ];
    let text = template(r#""secObj": {"type": "secureObject"}"#, "", "", &outputs);
    let params = format!(
        r#"{{"parameters": {{"secObj": {{"value": {{"v": "{CANARY}", "{CANARY}": 1}}}}}}}}"#
    );
    check("secureObject", &text, &params, outputs.len());
}

#[test]
fn parameters_secure_through_definitions_are_not_quoted() {
    let outputs = with_secret("parameters('sec')");
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let text = template(
        r##""sec": {"$ref": "#/definitions/password"}"##,
        r#""password": {"type": "secureString", "minLength": 3}"#,
        "",
        &outputs,
    );
    let params = format!(r#"{{"parameters": {{"sec": {{"value": "{CANARY}"}}}}}}"#);
    check("$ref", &text, &params, outputs.len());
}

#[test]
fn key_vault_secrets_are_not_quoted() {
    let outputs = with_secret("parameters('kv')");
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    // Declared a plain string: the secret comes from Key Vault all the same.
    let text = template(r#""kv": {"type": "string"}"#, "", "", &outputs);
    let params = r#"{"parameters": {"kv": {"reference": {"keyVault": {"id": "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/v"}, "secretName": "pw"}}}}"#;
    check("Key Vault", &text, params, outputs.len());
}

#[test]
fn values_computed_from_secrets_are_not_quoted() {
    let mut outputs = with_secret("variables('derived')");
    outputs.extend(with_secret("parameters('plain')"));
    outputs.extend(with_secret(
        "listKeys('/subscriptions/s/x', '2020-01-01').value",
    ));
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let text = template(
        r#""sec": {"type": "secureString"},
           "plain": {"type": "string", "defaultValue": "[concat(parameters('sec'), '')]"}"#,
        "",
        r#""derived": "[concat('', parameters('sec'))]""#,
        &outputs,
    );
    let params = format!(r#"{{"parameters": {{"sec": {{"value": "{CANARY}"}}}}}}"#);
    check("derived", &text, &params, outputs.len());
}

#[test]
fn type_checks_of_secure_values_do_not_quote_them() {
    let text = template(
        r#""sec": {"type": "secureString", "allowedValues": ["a"]},
           "secObj": {"type": "secureObject", "properties": {"a": {"type": "int"}}, "additionalProperties": false},
           "derived": {"type": "string", "allowedValues": ["a"], "defaultValue": "[parameters('sec')]"},
           "kv": {"type": "string", "allowedValues": ["a"]}"#,
        "",
        "",
        &[],
    );
    let params = format!(
        r#"{{"parameters": {{"sec": {{"value": "{CANARY}"}},
            "secObj": {{"value": {{"a": "{CANARY}", "{CANARY}": 1}}}},
            "kv": {{"reference": {{"keyVault": {{"id": "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/v"}}, "secretName": "pw"}}}}}}}}"#
    );
    check("type checks", &text, &params, 4);
}

#[test]
fn errors_without_secrets_keep_their_detail() {
    let text = template(
        r#""plain": {"type": "string"}"#,
        "",
        "",
        &["string(int(parameters('plain')))"],
    );
    let diags = findings(&text, r#"{"parameters": {"plain": {"value": "hello"}}}"#);
    assert!(
        diags.iter().any(|d| d.message.contains("'hello'")),
        "{diags:#?}"
    );
}

#[test]
fn copy_counts_from_secrets_are_not_quoted() {
    let text = format!(
        r#"{{"$schema": "{SCHEMA}", "contentVersion": "1.0.0.0",
  "parameters": {{"secObj": {{"type": "secureObject"}}}},
  "resources": [{{"type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01",
    "name": "[concat('sa', copyIndex())]", "location": "x",
    "copy": {{"name": "loop", "count": "[parameters('secObj').n]"}}}}],
  "outputs": {{"o": {{"type": "array", "copy": {{"count": "[parameters('secObj').n]", "input": 1}}}}}}}}"#
    );
    let params = r#"{"parameters": {"secObj": {"value": {"n": 7391846205}}}}"#;
    let diags = findings(&text, params);
    assert!(diags.iter().any(Diagnostic::is_error), "{diags:#?}");
    for d in &diags {
        assert!(!format!("{d:?}").contains("7391846205"), "{d:#?}");
    }
}

/// The parameters file of the nested-deployment cases: a secure string, a secure object and a Key Vault secret.
fn nested_params() -> String {
    format!(
        r#"{{"parameters": {{"sec": {{"value": "{CANARY}"}},
            "secObj": {{"value": {{"v": "{CANARY}", "{CANARY}": 1}}}},
            "kv": {{"reference": {{"keyVault": {{"id": "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/v"}}, "secretName": "pw"}}}}}}}}"#
    )
}

/// Outputs named `o0`, `o1`, ... of type string, one per expression.
fn outputs_of(exprs: &[String]) -> serde_json::Value {
    exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            (
                format!("o{i}"),
                serde_json::json!({"type": "string", "value": format!("[{e}]")}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A parent with secure inputs (see [`nested_params`]), a variable and a parameter computed from them, and one
/// nested deployment `child` of `scope` that passes `passed` to a child declaring `x` of `child_type`.
fn nested_parent(
    scope: &str,
    passed: serde_json::Value,
    child_type: &str,
    child_outputs: serde_json::Value,
    parent_outputs: serde_json::Value,
) -> String {
    let child = serde_json::json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": if scope == "inner" { serde_json::json!({"x": {"type": child_type}}) } else { serde_json::json!({}) },
        "resources": [],
        "outputs": child_outputs,
    });
    let mut properties = serde_json::json!({
        "mode": "Incremental",
        "expressionEvaluationOptions": {"scope": scope},
        "template": child,
    });
    if scope == "inner" {
        properties["parameters"] = serde_json::json!({"x": {"value": passed}});
    }
    serde_json::json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": {
            "sec": {"type": "secureString"},
            "secObj": {"type": "secureObject"},
            "kv": {"type": "string"},
            "plain": {"type": "string", "defaultValue": "[concat(parameters('sec'), '')]"}
        },
        "variables": {"derived": "[concat('', parameters('sec'))]"},
        "resources": [{
            "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "child",
            "properties": properties,
        }],
        "outputs": parent_outputs,
    })
    .to_string()
}

/// Runs `expansion` step by step as an engine does: each nested deployment through [`Expansion::nested`] and
/// [`Expansion::expand_nested`], its plan handed back so the parent's `reference()` answers from it.
fn stepwise(expansion: Expansion<'_>, diags: &mut Vec<Diagnostic>) -> Option<Plan> {
    for &i in expansion.order() {
        match expansion.evaluate(i) {
            Ok(Some(_)) => {}
            Ok(None) => continue,
            Err(found) => {
                diags.extend(found);
                continue;
            }
        }
        if !expansion.resource(i).nested_deployment {
            continue;
        }
        let nested = match expansion.nested(i) {
            Ok(nested) => nested,
            Err(found) => {
                diags.extend(found);
                continue;
            }
        };
        match expansion.expand_nested(&nested, &SecretHook) {
            Ok(child) => {
                if let Some(plan) = stepwise(child, diags) {
                    expansion.set_nested_plan(i, plan);
                }
            }
            Err(found) => diags.extend(found),
        }
    }
    diags.extend(expansion.diagnostics());
    match expansion.outputs() {
        Ok(outputs) => Some(expansion.finish(outputs)),
        Err(found) => {
            diags.extend(found);
            None
        }
    }
}

/// Every finding of expanding `text` in one go and step by step (nested deployments included), and the plan
/// of the one-go expansion.
fn nested_findings(text: &str, params: &str) -> (Vec<Diagnostic>, Option<Plan>) {
    let (template, mut diags) = Template::parse(cairn_json::parse(text).unwrap());
    let (params, params_diags) = ParametersFile::parse(&cairn_json::parse(params).unwrap());
    diags.extend(params_diags);
    let input = || DeploymentInput::new(&template, &params, DeploymentContext::default());
    let (plan, found) = expand(input(), &SecretHook);
    diags.extend(found);
    match Expansion::start(input(), &SecretHook) {
        Ok(expansion) => {
            stepwise(expansion, &mut diags);
        }
        Err(found) => diags.extend(found),
    }
    (diags, plan)
}

/// One way a secret reaches a nested deployment: what the parent passes as the child's `x` (inner scope) and
/// the child expression that reads the secret as a string.
struct NestedCase {
    what: &'static str,
    scope: &'static str,
    passed: &'static str,
    child_type: &'static str,
    secret: &'static str,
}

const NESTED_CASES: &[NestedCase] = &[
    NestedCase {
        what: "inner: a secure string",
        scope: "inner",
        passed: "[parameters('sec')]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: computed from a secure string",
        scope: "inner",
        passed: "[concat('', parameters('sec'))]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: a secure variable",
        scope: "inner",
        passed: "[variables('derived')]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: a parameter computed from a secret",
        scope: "inner",
        passed: "[parameters('plain')]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: a Key Vault secret",
        scope: "inner",
        passed: "[parameters('kv')]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: a list* answer",
        scope: "inner",
        passed: "[listKeys('/subscriptions/s/x', '2020-01-01').value]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: a member of a secure object",
        scope: "inner",
        passed: "[parameters('secObj').v]",
        child_type: "string",
        secret: "parameters('x')",
    },
    NestedCase {
        what: "inner: a secure object",
        scope: "inner",
        passed: "[parameters('secObj')]",
        child_type: "object",
        secret: "parameters('x').v",
    },
    NestedCase {
        what: "inner: an object built from a secret",
        scope: "inner",
        passed: "[createObject('v', parameters('sec'))]",
        child_type: "object",
        secret: "parameters('x').v",
    },
    NestedCase {
        what: "outer: a secure string",
        scope: "outer",
        passed: "",
        child_type: "",
        secret: "parameters('sec')",
    },
    NestedCase {
        what: "outer: a secure variable",
        scope: "outer",
        passed: "",
        child_type: "",
        secret: "variables('derived')",
    },
];

#[test]
fn secrets_passed_to_nested_deployments_are_not_quoted() {
    for case in NESTED_CASES {
        let outputs = with_secret(case.secret);
        let text = nested_parent(
            case.scope,
            serde_json::Value::from(case.passed),
            case.child_type,
            outputs_of(&outputs),
            serde_json::json!({}),
        );
        let (diags, _) = nested_findings(&text, &nested_params());
        let errors = diags.iter().filter(|d| d.is_error()).count();
        assert!(
            errors >= outputs.len(),
            "{}: expected at least {} errors, got {diags:#?}",
            case.what,
            outputs.len()
        );
        assert_clean(case.what, &diags);
    }
}

#[test]
fn secrets_inside_a_nested_parameter_object_are_not_quoted() {
    // The secret is one member of a literal object: the whole parameter is secure in the child.
    let outputs = with_secret("parameters('x').v");
    let text = nested_parent(
        "inner",
        serde_json::json!({"v": "[parameters('sec')]", "w": "plain"}),
        "object",
        outputs_of(&outputs),
        serde_json::json!({}),
    );
    let (diags, _) = nested_findings(&text, &nested_params());
    assert!(
        diags.iter().filter(|d| d.is_error()).count() >= outputs.len(),
        "{diags:#?}"
    );
    assert_clean("a literal object", &diags);
}

#[test]
fn secrets_carry_through_two_levels_of_nesting() {
    let grandchild = serde_json::json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": {"y": {"type": "string"}},
        "resources": [],
        "outputs": outputs_of(&with_secret("parameters('y')")),
    });
    let child_resources = serde_json::json!([{
        "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "grandchild",
        "properties": {"mode": "Incremental", "expressionEvaluationOptions": {"scope": "inner"},
                       "parameters": {"y": {"value": "[toUpper(parameters('x'))]"}}, "template": grandchild}
    }]);
    let mut parent: serde_json::Value = serde_json::from_str(&nested_parent(
        "inner",
        serde_json::Value::from("[parameters('sec')]"),
        "string",
        serde_json::json!({}),
        serde_json::json!({}),
    ))
    .unwrap();
    parent["resources"][0]["properties"]["template"]["resources"] = child_resources;
    let (diags, _) = nested_findings(&parent.to_string(), &nested_params());
    assert!(
        diags.iter().filter(|d| d.is_error()).count() >= STRING_FAILURES.len(),
        "{diags:#?}"
    );
    assert_clean("two levels", &diags);
}

#[test]
fn outputs_computed_from_secrets_stay_secure_in_the_parent() {
    // The child's output is a plain string computed from a secret: the parent reads it through reference().
    let parent_outputs = with_secret("reference('child').outputs.o0.value");
    for (scope, child_secret) in [("inner", "parameters('x')"), ("outer", "parameters('sec')")] {
        let text = nested_parent(
            scope,
            serde_json::Value::from("[parameters('sec')]"),
            "string",
            outputs_of(&[format!("concat('', {child_secret})")]),
            outputs_of(&parent_outputs),
        );
        let (diags, _) = nested_findings(&text, &nested_params());
        assert!(
            diags.iter().filter(|d| d.is_error()).count() >= parent_outputs.len(),
            "{scope}: {diags:#?}"
        );
        assert_clean(scope, &diags);
    }
}

/// A parent passing `x` from a secret and `y` from plain values to an inner child with `child_outputs`.
fn secret_and_plain(child_outputs: &[String]) -> String {
    let mut text: serde_json::Value = serde_json::from_str(&nested_parent(
        "inner",
        serde_json::Value::from("[parameters('sec')]"),
        "string",
        outputs_of(child_outputs),
        serde_json::json!({}),
    ))
    .unwrap();
    let child = &mut text["resources"][0]["properties"];
    child["parameters"]["y"] = serde_json::json!({"value": "[concat('hel', 'lo')]"});
    child["template"]["parameters"]["y"] = serde_json::json!({"type": "string"});
    text.to_string()
}

#[test]
fn plain_values_passed_next_to_secrets_keep_their_detail() {
    let text = secret_and_plain(&["string(int(parameters('y')))".to_string()]);
    let (diags, _) = nested_findings(&text, &nested_params());
    assert!(
        diags.iter().any(|d| d.message.contains("'hello'")),
        "{diags:#?}"
    );
    assert_clean("plain next to secret", &diags);
}

#[test]
fn a_child_plan_redacts_only_the_parameters_that_carry_a_secret() {
    let text = secret_and_plain(&["parameters('y')".to_string()]);
    let (diags, plan) = nested_findings(&text, &nested_params());
    assert!(!diags.iter().any(Diagnostic::is_error), "{diags:#?}");
    let child = plan
        .and_then(|p| p.resources.into_iter().next())
        .and_then(|r| r.deployment)
        .expect("the child's plan");
    for (name, secure) in [("x", true), ("y", false)] {
        let found = child.parameters.iter().find(|(n, _)| n == name);
        assert_eq!(found.map(|(_, p)| p.secure), Some(secure), "{name}");
    }
}

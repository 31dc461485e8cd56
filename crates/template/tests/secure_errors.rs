//! Secure values never show in expansion findings: secure parameters (directly or through `definitions`), Key Vault
//! secrets, `list*` answers and values computed from them fail functions and type checks without being quoted.

use cairn_eval::Value;
use cairn_template::{
    DeploymentContext, DeploymentInput, Diagnostic, Expansion, KeyVaultReference, ParametersFile,
    ReferenceRequest, RuntimeHook, Template, expand,
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

//! Parameter files (`deploymentParameters.json`): parameter values, Key Vault references, expression parameters
//! and the top-level `extensionConfigs` block. Values in a parameters file are never evaluated.

use cairn_config::{Config, ConfigError, ConfigSource};
use cairn_eval::Value;
use cairn_json::{Node, Span};

use crate::config::config_diagnostic;
use crate::diagnostics::{Diagnostic, join_path};

/// The top-level members that hold extension configs: `extensionConfigs` and REP 0004's two spellings.
pub const EXTENSION_CONFIG_KEYS: [&str; 3] = [
    "extensionConfigs",
    "deploymentProviderConfigs",
    "deploymentProviderConfigurations",
];

/// A Key Vault secret reference: `{ keyVault: { id }, secretName, secretVersion? }`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyVaultReference {
    pub vault_id: String,
    pub secret_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_version: Option<String>,
}

impl KeyVaultReference {
    /// Reads `{ keyVault: { id }, secretName, secretVersion? }`.
    pub fn from_value(v: &Value) -> Option<KeyVaultReference> {
        let o = v.as_object()?;
        Some(KeyVaultReference {
            vault_id: o
                .get("keyVault")?
                .as_object()?
                .get("id")?
                .as_str()?
                .to_string(),
            secret_name: o.get("secretName")?.as_str()?.to_string(),
            secret_version: o
                .get("secretVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ParameterValue {
    Value(Value),
    KeyVault(KeyVaultReference),
    /// `{ "expression": "[externalInputs('x')]" }` (Bicep external inputs).
    Expression(String),
}

/// An entry of a nested deployment's evaluated `properties.parameters` that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeploymentParameterError {
    #[error("The Key Vault reference for parameter '{0}' needs 'keyVault.id' and 'secretName'.")]
    KeyVaultReference(String),
}

impl DeploymentParameterError {
    /// The parameter the entry is for.
    pub fn parameter(&self) -> &str {
        match self {
            DeploymentParameterError::KeyVaultReference(name) => name,
        }
    }
}

/// The parameter values a nested deployment's evaluated `properties.parameters` entries give its child:
/// `{ value }`, `{ reference }` (Key Vault). An entry whose value is known only at deployment (`"[createObject
/// ('value', listKeys(...))]"` before `listKeys` can answer, or a whole entry read from a runtime value) gives a
/// value that stays unevaluated until then: the child defers what depends on it, and gets the real value when the
/// deployment runs.
pub fn deployment_parameters(
    entries: &Value,
) -> Result<Vec<(String, ParameterValue)>, DeploymentParameterError> {
    let Value::Object(entries) = entries else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(entries.len());
    for (name, entry) in entries.iter() {
        let value = match entry {
            Value::Object(o) if o.contains_key("value") => {
                ParameterValue::Value(o.get("value").cloned().unwrap_or_default())
            }
            Value::Object(o) if o.contains_key("reference") => {
                match KeyVaultReference::from_value(o.get("reference").unwrap_or(&Value::Null)) {
                    Some(r) => ParameterValue::KeyVault(r),
                    None => return Err(DeploymentParameterError::KeyVaultReference(name.clone())),
                }
            }
            unknown @ Value::Unevaluated(_) => ParameterValue::Value(unknown.clone()),
            _ => ParameterValue::Value(Value::Null),
        };
        out.push((name.clone(), value));
    }
    Ok(out)
}

#[derive(Clone, Debug)]
pub struct ParameterEntry {
    pub name: String,
    pub value: ParameterValue,
    pub path: String,
    pub span: Span,
}

/// One alias's config input, read once into typed values.
#[derive(Clone, Debug)]
pub struct ExtensionConfigInput {
    pub alias: String,
    pub config: Config,
    /// The JSON path of the alias's config (`extensionConfigs.<alias>`).
    pub path: String,
    pub span: Span,
}

impl ExtensionConfigInput {
    /// Reads one alias's properties (a parameters file's nodes, a request's JSON), each on its own: the input of
    /// those that can be read, and an error for each other (its `property` under the alias).
    pub fn read<'s, S: ConfigSource<'s>>(
        alias: &str,
        path: String,
        span: Span,
        properties: impl IntoIterator<Item = (&'s str, S)>,
    ) -> (ExtensionConfigInput, Vec<ConfigError>) {
        let mut properties: Vec<(&'s str, S)> = properties.into_iter().collect();
        // Seed 002's wrapped form, `{"type": "object", "value": {...properties}}`, reads as its properties, at the
        // root as in a nested deployment.
        let member = |name: &str| {
            properties
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| *value)
        };
        let wrapped = properties.len() == 2
            && member("type")
                .and_then(ConfigSource::as_str)
                .is_some_and(|kind| kind.eq_ignore_ascii_case("object"));
        if wrapped && let Some(members) = member("value").and_then(ConfigSource::members) {
            properties = members;
        }
        let (config, errors) = Config::read(properties);
        let input = ExtensionConfigInput {
            alias: alias.to_owned(),
            config,
            path,
            span,
        };
        (input, errors)
    }
}

/// A parsed parameters file.
#[derive(Clone, Debug, Default)]
pub struct ParametersFile {
    pub parameters: Vec<ParameterEntry>,
    pub extension_configs: Vec<ExtensionConfigInput>,
    /// `externalInputDefinitions`: key → `{ kind, config? }`, kept as data.
    pub external_input_definitions: Option<Value>,
}

impl ParametersFile {
    /// Reads a parameters file. Accepts the full file shape (`{ "$schema", "parameters": {...} }`) and the bare
    /// `{ name: { value } }` map that `az` also takes.
    pub fn parse(root: &Node) -> (ParametersFile, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let mut file = ParametersFile::default();
        let Some(members) = root.as_object() else {
            diags.push(
                Diagnostic::error(
                    "InvalidParameterFile",
                    "The parameters file must be a JSON object.",
                    "",
                )
                .with_span(root.span),
            );
            return (file, diags);
        };
        let is_full_file = root.get_ci("$schema").is_some()
            || root
                .get_ci("parameters")
                .is_some_and(|p| p.as_object().is_some())
            || EXTENSION_CONFIG_KEYS
                .iter()
                .any(|key| root.get_ci(key).is_some());
        let (params, prefix) = if is_full_file {
            (
                root.get_ci("parameters")
                    .and_then(Node::as_object)
                    .unwrap_or(&[]),
                "parameters",
            )
        } else {
            (members, "")
        };
        for m in params {
            let path = join_path(prefix, &m.key);
            match parameter_value(&m.value) {
                Ok(value) => file.parameters.push(ParameterEntry {
                    name: m.key.clone(),
                    value,
                    path,
                    span: m.value.span,
                }),
                Err(message) => diags.push(
                    Diagnostic::error("InvalidParameterFile", message, path)
                        .with_span(m.value.span),
                ),
            }
        }
        for key in EXTENSION_CONFIG_KEYS {
            let Some(configs) = root.get_ci(key) else {
                continue;
            };
            let Some(aliases) = configs.as_object() else {
                diags.push(
                    Diagnostic::error(
                        "InvalidParameterFile",
                        format!("'{key}' must be a JSON object."),
                        key,
                    )
                    .with_span(configs.span),
                );
                continue;
            };
            for a in aliases {
                let path = join_path(key, &a.key);
                let Some(props) = a.value.as_object() else {
                    diags.push(
                        Diagnostic::error(
                            "InvalidParameterFile",
                            format!(
                                "The extension config for '{}' must be an object of properties.",
                                a.key
                            ),
                            &path,
                        )
                        .with_span(a.value.span),
                    );
                    continue;
                };
                let (input, errors) = ExtensionConfigInput::read(
                    &a.key,
                    path.clone(),
                    a.value.span,
                    // Read as deployment input: seed 002's `armApiCall` item is deferred to the deployment.
                    props
                        .iter()
                        .map(|p| (p.key.as_str(), cairn_config::Input::new(&p.value))),
                );
                for error in errors {
                    // The span of the offending member (`auth.kubeConfig`), else the property's.
                    let mut steps = error.property.split('.');
                    let property = steps.next().and_then(|name| a.value.get_ci(name));
                    let span = property
                        .and_then(|node| steps.try_fold(node, |node, key| node.get_ci(key)))
                        .or(property)
                        .map_or(a.value.span, |node| node.span);
                    diags.push(config_diagnostic(&error, &path).with_span(span));
                }
                file.extension_configs.push(input);
            }
        }
        file.external_input_definitions = root
            .get_ci("externalInputDefinitions")
            .map(Value::from_node);
        (file, diags)
    }

    pub fn get(&self, name: &str) -> Option<&ParameterEntry> {
        self.parameters
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }
}

fn parameter_value(node: &Node) -> Result<ParameterValue, String> {
    if node.as_object().is_none() {
        return Err(
            "A parameter entry must be an object with 'value', 'reference' or 'expression'.".into(),
        );
    }
    if let Some(v) = node.get_ci("value") {
        return Ok(ParameterValue::Value(Value::from_node(v)));
    }
    if let Some(r) = node.get_ci("reference") {
        return KeyVaultReference::from_value(&Value::from_node(r)).map(ParameterValue::KeyVault).ok_or_else(|| {
            "A Key Vault reference needs 'keyVault.id' and 'secretName' (and optionally 'secretVersion').".to_string()
        });
    }
    if let Some(e) = node.get_ci("expression").and_then(Node::as_str) {
        return Ok(ParameterValue::Expression(e.to_string()));
    }
    // ARM treats an entry without `value` as a null value.
    Ok(ParameterValue::Value(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_002_wrapped_configs_read_as_their_properties() {
        // (alias object, the properties read)
        let cases: [(&str, &[&str]); 5] = [
            (r#"{"ns": {"value": "a"}}"#, &["ns"]),
            (
                r#"{"type": "object", "value": {"ns": {"value": "a"}, "k": {"value": "b"}}}"#,
                &["k", "ns"],
            ),
            (
                r#"{"Type": "Object", "Value": {"ns": {"value": "a"}}}"#,
                &["ns"],
            ),
            // Look-alikes stay properties.
            (
                r#"{"type": {"value": "object"}, "value": {"value": "x"}}"#,
                &["type", "value"],
            ),
            (
                r#"{"type": "object", "other": {"value": "x"}}"#,
                &["other", "type"],
            ),
        ];
        for (alias, expected) in cases {
            let text = format!(r#"{{"parameters": {{}}, "extensionConfigs": {{"k8s": {alias}}}}}"#);
            let (file, _) = ParametersFile::parse(&cairn_json::parse(&text).unwrap());
            let mut names: Vec<String> = file.extension_configs[0]
                .config
                .iter()
                .map(|(name, _)| name.to_ascii_lowercase())
                .collect();
            names.sort();
            assert_eq!(names, expected, "{alias}");
        }
    }

    #[test]
    fn full_file_with_extension_configs() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/conformance/extensibility/baselines_bicepparam-Extensions/parameters.json"
        ))
        .unwrap();
        let (file, diags) = ParametersFile::parse(&cairn_json::parse(&text).unwrap());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(file.parameters.len(), 2);
        assert!(matches!(
            file.get("secureStrParam1").unwrap().value,
            ParameterValue::KeyVault(_)
        ));
        let secure = file
            .extension_configs
            .iter()
            .find(|c| c.alias == "hasSecureConfig1")
            .unwrap();
        assert!(matches!(
            secure.config.get("requiredSecureString"),
            Some(cairn_config::ConfigValue::Directive(
                cairn_config::Directive::KeyVaultReference(_)
            ))
        ));
        assert_eq!(file.extension_configs.len(), 9);
    }

    #[test]
    fn provider_configs_alone_make_a_full_file() {
        let (file, diags) = ParametersFile::parse(
            &cairn_json::parse(
                r#"{"deploymentProviderConfigs": {"k8s": {"namespace": {"value": "apps"},
                    "kubeConfig": {"reference": {"keyVault": {"id": "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/v"}, "secretName": "kc"}}}}}"#,
            )
            .unwrap(),
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert!(file.parameters.is_empty(), "{:?}", file.parameters);
        let k8s = &file.extension_configs[0];
        assert_eq!(k8s.alias, "k8s");
        assert!(matches!(
            k8s.config.get("kubeConfig"),
            Some(cairn_config::ConfigValue::Directive(
                cairn_config::Directive::KeyVaultReference(_)
            ))
        ));
    }

    #[test]
    fn bare_map_and_errors() {
        let (file, diags) = ParametersFile::parse(
            &cairn_json::parse(r#"{"a": {"value": "[[x]"}, "b": 3}"#).unwrap(),
        );
        assert_eq!(
            file.get("a").unwrap().value,
            ParameterValue::Value(Value::from("[[x]"))
        );
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].target, "b");
    }
}

//! Extension configs in a template: the typed config values (`cairn_config`, parsed once) read from evaluated
//! values, the view template expressions see (`extensions('a').config`), and the checks of an alias's effective
//! config (its declaration's defaults overlaid by the deployment's input) against its declaration.

use cairn_config::{ConfigSource, Unknown};
use cairn_eval::{Object, Unevaluated, Value};

use crate::diagnostics::{Diagnostic, join_path};
use crate::model::ExtensionDecl;

pub use cairn_config::{
    AUTH, Config, ConfigError, ConfigInput, ConfigValue, ITEM_KEYS, WRAPPER_KEYS, is_item_keys,
    wrapper_kinds,
};

/// Diagnostic code of a config property the extension's declared schema does not name ("dangling"): refused for a
/// deployment stack, a warning otherwise.
pub const UNDECLARED_CONFIG_PROPERTY: &str = "ExtensionConfigPropertyNotDeclared";

/// Diagnostic code of seed 003's `auth: { type: 'UserProvided' }`: refused for a deployment stack (it can neither
/// store the credential nor ask for it again), a warning otherwise.
pub const USER_PROVIDED_AUTH: &str = "ExtensionConfigUserProvidedAuth";

/// Diagnostic code of a config value a deployment stack can neither keep nor fetch again: a secret given as a value
/// (under `auth`, or in a property declared secure). Refused for a deployment stack, a warning otherwise.
pub const NOT_STORABLE_CONFIG: &str = "ExtensionConfigNotStorable";

/// Diagnostic code of a config a deployment cannot use (shape, null `auth`, missing required property).
pub const INVALID_CONFIG: &str = cairn_config::codes::INVALID_EXTENSION_CONFIG;

/// The JSON path of a config property under `base` (the alias's path): `property` is dotted (`auth.kubeConfig`)
/// or empty for the alias itself.
pub fn property_target(base: &str, property: &str) -> String {
    property
        .split('.')
        .filter(|segment| !segment.is_empty())
        .fold(base.to_string(), |path, segment| join_path(&path, segment))
}

/// The diagnostic of a config that cannot be read, targeted at the property under `base` (the alias's path).
pub fn config_diagnostic(error: &ConfigError, base: &str) -> Diagnostic {
    let message = if error.property.is_empty() {
        format!("The extension config is not valid: {}.", error.kind)
    } else {
        format!(
            "The config property '{}' is not valid: {}.",
            error.property, error.kind
        )
    };
    Diagnostic::error(
        INVALID_CONFIG,
        message,
        property_target(base, &error.property),
    )
}

/// An evaluated value as a config source: a runtime value that is not available yet (`Value::Unevaluated`) is
/// known only when the deployment runs.
#[derive(Clone, Copy, Debug)]
pub struct Evaluated<'v>(pub &'v Value);

impl<'v> ConfigSource<'v> for Evaluated<'v> {
    fn members(self) -> Option<Vec<(&'v str, Self)>> {
        self.0
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.as_str(), Evaluated(v))).collect())
    }

    fn as_str(self) -> Option<&'v str> {
        self.0.as_str()
    }

    fn is_null(self) -> bool {
        self.0.is_null()
    }

    fn unknown(self) -> Option<&'v str> {
        match self.0 {
            Value::Unevaluated(u) => Some(&u.expression),
            _ => None,
        }
    }

    fn to_json(self) -> Result<serde_json::Value, Unknown> {
        match first_unevaluated(self.0) {
            Some(expression) => Err(Unknown(expression.to_owned())),
            None => Ok(self.0.to_json()),
        }
    }
}

fn first_unevaluated(value: &Value) -> Option<&str> {
    match value {
        Value::Unevaluated(u) => Some(&u.expression),
        Value::Array(items) => items.iter().find_map(first_unevaluated),
        Value::Object(o) => o.values().find_map(first_unevaluated),
        _ => None,
    }
}

/// Reads what a deployment gives one alias from its evaluated value (a module's `extensionConfigs.<alias>`):
/// `inherit` resolves through `parent` (alias → the parent deployment's effective config).
pub fn read_alias_input(
    value: &Value,
    parent: &dyn Fn(&str) -> Option<Config>,
) -> Result<Config, ConfigError> {
    ConfigInput::parse(Evaluated(value))?.into_config(parent)
}

/// A config as template expressions see it (`extensions('a').config`, `extensionConfigs('a')`): an object of
/// items in their wire form — which a module may pass on and which then parses back to the same values — with
/// values known only when the deployment runs left unevaluated.
pub fn config_view(config: &Config) -> Value {
    let mut out = Object::with_capacity(config.len());
    for (name, value) in config.iter() {
        let item = match value {
            ConfigValue::Group(group) => config_view(group),
            ConfigValue::Deferred(expression) => {
                Value::Unevaluated(std::rc::Rc::new(Unevaluated {
                    expression: expression.clone(),
                }))
            }
            other => Value::from_json(&other.to_wire()),
        };
        out.insert(name.clone(), item);
    }
    Value::Object(out)
}

/// Checks an alias's effective config against its declaration: required properties present (at the top level or
/// under `auth`; error [`INVALID_CONFIG`]), input properties the declared schema names (warning
/// [`UNDECLARED_CONFIG_PROPERTY`]), no seed 003 `UserProvided` auth (warning [`USER_PROVIDED_AUTH`]). `input` is
/// what the deployment gave (before defaults); `None` when the config is known at deployment time only.
pub fn check_config(
    decl: &ExtensionDecl,
    effective: &Config,
    input: Option<&Config>,
) -> Vec<ConfigFinding> {
    let mut out = Vec::new();
    let Some(input) = input else {
        return out;
    };
    let auth = effective.get(AUTH);
    let group = match auth {
        Some(ConfigValue::Group(group)) => Some(group),
        _ => None,
    };
    // An `auth` given as one credential (seed 003) is the extension's secure credential.
    let credential = auth.is_some() && group.is_none();
    for required in &decl.required_properties {
        let secure = decl
            .secure_properties
            .iter()
            .any(|s| s.eq_ignore_ascii_case(required));
        let supplied = effective.contains(required)
            || group.is_some_and(|a| a.contains(required))
            || (credential && secure);
        if !supplied {
            out.push(ConfigFinding {
                code: INVALID_CONFIG,
                property: required.clone(),
                message: format!(
                    "The extension '{}' ({} {}) requires the config property '{required}', which the deployment's extensionConfigs do not supply and the declaration does not default; supply it{}.",
                    decl.alias,
                    decl.name,
                    decl.version,
                    if secure {
                        " under 'auth' as a Key Vault reference or a list* output"
                    } else {
                        " as { \"value\": ... }, or give it a defaultValue in the declaration"
                    }
                ),
                error: true,
            });
        }
    }
    if let Some(declared) = &decl.declared_properties {
        let known = |name: &str| declared.iter().any(|d| d.eq_ignore_ascii_case(name));
        let mut undeclared: Vec<String> = input
            .properties()
            .keys()
            .filter(|k| !k.eq_ignore_ascii_case(AUTH) && !known(k))
            .cloned()
            .collect();
        if let Some(ConfigValue::Group(group)) = input.get(AUTH) {
            undeclared.extend(
                group
                    .properties()
                    .keys()
                    .filter(|k| !known(k))
                    .map(|k| format!("{AUTH}.{k}")),
            );
        }
        for property in undeclared {
            out.push(ConfigFinding {
                code: UNDECLARED_CONFIG_PROPERTY,
                message: format!(
                    "The extension '{}' ({} {}) declares no config property '{property}'; remove it or correct its name (declared: {}).",
                    decl.alias,
                    decl.name,
                    decl.version,
                    declared.join(", ")
                ),
                property,
                error: false,
            });
        }
    }
    let user_provided = matches!(input.get(AUTH),
        Some(ConfigValue::SecureLiteral(credential)) if credential.is_user_provided());
    let (_, refused) = stored_config(input, &decl.secure_properties);
    for property in refused {
        if user_provided && property.eq_ignore_ascii_case(AUTH) {
            // Seed 003's form has its own finding below.
            continue;
        }
        out.push(ConfigFinding {
            code: NOT_STORABLE_CONFIG,
            message: format!(
                "The config property '{property}' of extension '{}' ({} {}) is secure but given as a value: a deployment stack can neither store it nor fetch it again when it deletes resources; use a Key Vault reference (keyVaultReference) or a list* output so cairn stores a directive instead.",
                decl.alias, decl.name, decl.version
            ),
            property,
            error: false,
        });
    }
    if user_provided {
        out.push(ConfigFinding {
            code: USER_PROVIDED_AUTH,
            property: AUTH.to_string(),
            message: format!(
                "The auth of extension '{}' has type 'UserProvided': a deployment stack can neither store user-provided credentials nor ask for them when it deletes resources; put the secret in Key Vault and use auth type 'KeyVaultSecret' (or a keyVaultReference).",
                decl.alias
            ),
            error: false,
        });
    }
    out
}

/// What a deployment stack keeps of a config: directives (those inside `auth` too) and the value of every property
/// not secure (`secure`: the properties declared secure; everything under `auth` is). Values known only when the
/// deployment runs are not kept yet. The second list names (dotted) the properties that hold a secret as a value:
/// a stack can keep nothing for them, so a stack-initiated deployment is refused before it runs
/// ([`NOT_STORABLE_CONFIG`]) rather than left without a credential when it deletes.
pub fn stored_config(config: &Config, secure: &[String]) -> (Config, Vec<String>) {
    let mut refused = Vec::new();
    let kept = stored_members(config, secure, false, "", &mut refused);
    (kept, refused)
}

fn stored_members(
    config: &Config,
    secure: &[String],
    in_auth: bool,
    prefix: &str,
    refused: &mut Vec<String>,
) -> Config {
    config
        .iter()
        .filter_map(|(property, value)| {
            let dotted = if prefix.is_empty() {
                property.clone()
            } else {
                format!("{prefix}.{property}")
            };
            let is_secure = in_auth
                || property.eq_ignore_ascii_case(AUTH)
                || secure.iter().any(|s| s.eq_ignore_ascii_case(property));
            let kept = match value {
                ConfigValue::Group(group) => {
                    ConfigValue::Group(stored_members(group, secure, is_secure, &dotted, refused))
                }
                ConfigValue::Directive(_) => value.clone(),
                ConfigValue::Literal(_) if !is_secure => value.clone(),
                ConfigValue::Deferred(_) => return None,
                ConfigValue::Literal(_) | ConfigValue::SecureLiteral(_) => {
                    refused.push(dotted);
                    return None;
                }
            };
            Some((property.clone(), kept))
        })
        .collect()
}

/// One finding of [`check_config`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFinding {
    pub code: &'static str,
    /// Dotted property path under the alias.
    pub property: String,
    pub message: String,
    /// An error for every deployment (else a warning that refuses only a deployment stack).
    pub error: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";

    fn decl(template: serde_json::Value) -> ExtensionDecl {
        let (t, _) = crate::Template::parse(cairn_json::Node::from_json(&template));
        t.extensions[0].clone()
    }

    fn config(value: serde_json::Value) -> Config {
        Config::parse(&value).unwrap()
    }

    #[test]
    fn required_undeclared_and_user_provided() {
        let d = decl(
            json!({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
            "extensions": {"k8s": {"name": "Kubernetes", "version": "1.0.0", "config": {
                "namespace": {"type": "string", "defaultValue": "default"},
                "kubeConfig": {"type": "secureString"},
                "context": {"type": "string", "nullable": true}}}},
            "resources": {}}),
        );
        assert_eq!(d.required_properties, vec!["kubeConfig".to_string()]);
        let check = |input: serde_json::Value| {
            let input = config(input);
            check_config(&d, &input, Some(&input))
                .into_iter()
                // Secrets given as values: `secrets_given_as_values_are_not_storable`.
                .filter(|f| f.code != NOT_STORABLE_CONFIG)
                .map(|f| (f.code, f.property, f.error))
                .collect::<Vec<_>>()
        };
        assert_eq!(check(json!({"auth": {"kubeConfig": "k"}})), vec![]);
        assert_eq!(check(json!({"kubeConfig": "k", "namespace": "n"})), vec![]);
        assert_eq!(
            check(
                json!({"namespace": "n", "nmespace": "typo", "auth": {"kubeConfig": "k", "extra": 1}})
            ),
            vec![
                (UNDECLARED_CONFIG_PROPERTY, "nmespace".to_string(), false),
                (UNDECLARED_CONFIG_PROPERTY, "auth.extra".to_string(), false)
            ]
        );
        assert_eq!(
            check(json!({"namespace": "n"})),
            vec![(INVALID_CONFIG, "kubeConfig".to_string(), true)]
        );
        // Seed 003's one credential supplies the required secure property.
        assert_eq!(
            check(
                json!({"auth": {"type": "KeyVaultSecret", "keyVaultId": VAULT, "secretName": "s"}})
            ),
            vec![]
        );
        assert_eq!(
            check(json!({"kubeConfig": "k", "auth": {"type": "UserProvided", "value": "raw"}})),
            vec![(USER_PROVIDED_AUTH, "auth".to_string(), false)]
        );
        // A config known only at deployment time is not judged.
        assert!(check_config(&d, &Config::default(), None).is_empty());
        // A value-only declaration names no schema: nothing is dangling.
        let loose = decl(
            json!({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
            "extensions": {"k8s": {"name": "Kubernetes", "version": "1.0.0", "config": {
                "namespace": {"defaultValue": "default"}}}},
            "resources": {}}),
        );
        assert_eq!(loose.declared_properties, None);
        let input = config(json!({"anything": 1}));
        assert!(check_config(&loose, &input, Some(&input)).is_empty());
    }

    #[test]
    fn secrets_given_as_values_are_not_storable() {
        let kv = json!({"keyVault": {"id": VAULT}, "secretName": "k"});
        let api = json!({"method": "POST", "armResourceId": format!("{VAULT}/secrets/s"), "apiVersion": "2023-07-01",
                         "action": "listValue", "responseValuePath": "value"});
        // (config, properties declared secure, the properties a stack cannot keep)
        let cases = [
            (json!({"namespace": {"value": "apps"}}), vec![], vec![]),
            (
                json!({"kubeConfig": {"value": "k"}}),
                vec!["kubeConfig"],
                vec!["kubeConfig"],
            ),
            (
                json!({"kubeConfig": {"keyVaultReference": kv}}),
                vec!["kubeConfig"],
                vec![],
            ),
            (
                json!({"auth": {"token": {"apiReference": api}}}),
                vec![],
                vec![],
            ),
            (
                json!({"auth": {"token": "raw", "kube": {"keyVaultReference": kv}}}),
                vec![],
                vec!["auth.token"],
            ),
            (
                json!({"password": {"type": "SecureString", "value": "s"}}),
                vec![],
                vec!["password"],
            ),
            (
                json!({"auth": {"type": "UserProvided", "value": "s"}}),
                vec![],
                vec!["auth"],
            ),
        ];
        for (given, secure, want) in cases {
            let secure: Vec<String> = secure.into_iter().map(String::from).collect();
            let (kept, refused) = stored_config(&config(given.clone()), &secure);
            assert_eq!(refused, want, "{given}");
            assert!(
                !serde_json::to_string(&kept.to_wire())
                    .unwrap()
                    .contains("\"raw\""),
                "{given}"
            );
        }
        let mut deferred = Config::default();
        deferred.insert(
            "auth",
            ConfigValue::Group({
                let mut g = Config::default();
                g.insert(
                    "token",
                    ConfigValue::Deferred("[listValue(x, 'v').value]".into()),
                );
                g
            }),
        );
        assert_eq!(
            stored_config(&deferred, &[]).1,
            Vec::<String>::new(),
            "known when the deployment runs"
        );
    }

    #[test]
    fn inherit() {
        let parent = |a: &str| (a == "k8s").then(|| config(json!({"ns": {"value": "x"}})));
        let got = read_alias_input(
            &Value::from(json!({"type": "inherit", "value": "k8s"})),
            &parent,
        )
        .unwrap();
        assert_eq!(got.to_wire(), json!({"ns": {"value": "x"}}));
        assert!(
            read_alias_input(
                &Value::from(json!({"type": "inherit", "value": "nope"})),
                &parent
            )
            .is_err()
        );
    }

    #[test]
    fn evaluated_values_defer_what_is_not_known_yet() {
        let pending = || {
            Value::Unevaluated(std::rc::Rc::new(Unevaluated {
                expression: "[reference('c').fqdn]".into(),
            }))
        };
        let mut module = Object::new();
        module.insert("namespace", Value::from(json!({"value": "apps"})));
        module.insert("endpoint", pending());
        let mut auth = Object::new();
        auth.insert("token", pending());
        module.insert("auth", Value::Object(auth));
        let read = read_alias_input(&Value::Object(module), &|_| None).unwrap();
        assert_eq!(
            read.get("endpoint"),
            Some(&ConfigValue::Deferred("[reference('c').fqdn]".into()))
        );
        assert_eq!(
            read.first_deferred().map(|(path, _)| path),
            Some(vec!["endpoint".to_owned()])
        );
        // The whole config known only then is nothing to overlay yet.
        assert!(read_alias_input(&pending(), &|_| None).unwrap().is_empty());
    }

    #[test]
    fn the_expression_view_parses_back_to_the_same_config() {
        let given = config(json!({
            "namespace": {"value": "apps"},
            "password": {"type": "SecureString", "value": "s3cr3t"},
            "kubeConfig": {"reference": {"keyVault": {"id": VAULT}, "secretName": "kc"}},
            "auth": {"token": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "t"}}}
        }));
        let view = config_view(&given);
        assert_eq!(
            view.as_object()
                .unwrap()
                .get("kubeConfig")
                .unwrap()
                .to_json(),
            json!({"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}})
        );
        assert_eq!(read_alias_input(&view, &|_| None).unwrap(), given);
        let mut deferred = Config::default();
        deferred.insert(
            "endpoint",
            ConfigValue::Deferred("[reference('c').fqdn]".into()),
        );
        let view = config_view(&deferred);
        assert!(matches!(
            view.as_object().unwrap().get("endpoint"),
            Some(Value::Unevaluated(_))
        ));
    }
}

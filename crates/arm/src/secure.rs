//! Making deployment inputs safe to return: ARM's GET of a deployment or stack shows each parameter with its
//! declared `type` and leaves the value out for `securestring` / `secureobject` parameters
//! (`"adminPassword": { "type": "SecureString" }`); a Key Vault `reference` stays, since it names a secret
//! without being one. Extension config items typed `SecureString` / `SecureObject` likewise lose their value.

use serde_json::{Map, Value};

use crate::models::extension::ExtensionConfig;
use crate::models::parameters::DeploymentParameters;
use crate::wire::eq_ignore_case;

/// How many `$ref` hops to follow before giving up (templates could loop).
const MAX_REF_HOPS: usize = 32;

/// The declared type of template parameter `name` (matched ignoring case), lowercased, following `$ref`s
/// into `definitions` for user-defined types. `None` if the parameter or its type cannot be found.
pub fn template_parameter_type(template: &Value, name: &str) -> Option<String> {
    let parameters = get_ignore_case(template, "parameters")?;
    let mut declaration = get_ignore_case(parameters, name)?;
    for _ in 0..MAX_REF_HOPS {
        if let Some(t) = get_ignore_case(declaration, "type").and_then(Value::as_str) {
            return Some(t.to_ascii_lowercase());
        }
        let reference = get_ignore_case(declaration, "$ref").and_then(Value::as_str)?;
        declaration = resolve_local_ref(template, reference)?;
    }
    None
}

/// Whether a declared type (any case) is `securestring` or `secureobject`.
pub fn is_secure_type(declared: &str) -> bool {
    declared.eq_ignore_ascii_case("securestring") || declared.eq_ignore_ascii_case("secureobject")
}

/// Replaces the entry of every secure parameter with `{"type": "SecureString" | "SecureObject"}` (keeping a
/// Key Vault `reference` if there was one). A parameter is secure when the template declares it so, or
/// when its entry already says `"type": "SecureString"`/`"SecureObject"`. Parameters the template does not
/// declare are left alone (the deployment rejects them before anything is stored).
pub fn redact_secure_parameters(parameters: &mut DeploymentParameters, template: &Value) {
    for (name, entry) in parameters.0.iter_mut() {
        let declared = template_parameter_type(template, name).or_else(|| {
            get_ignore_case(entry, "type")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase)
        });
        let Some(declared) = declared.filter(|t| is_secure_type(t)) else {
            continue;
        };
        let mut redacted = Map::new();
        redacted.insert("type".into(), Value::String(display_type(&declared)));
        if let Some(reference) = get_ignore_case(entry, "reference") {
            redacted.insert("reference".into(), reference.clone());
        }
        *entry = Value::Object(redacted);
    }
}

/// Adds the declared `type` (as ARM spells it in responses: `String`, `Int`, `Bool`, `Array`, `Object`,
/// `SecureString`, `SecureObject`) in front of every parameter entry that has none.
pub fn annotate_parameter_types(parameters: &mut DeploymentParameters, template: &Value) {
    for (name, entry) in parameters.0.iter_mut() {
        let Some(declared) = template_parameter_type(template, name) else {
            continue;
        };
        let Value::Object(fields) = entry else {
            continue;
        };
        if fields.keys().any(|k| k.eq_ignore_ascii_case("type")) {
            continue;
        }
        let mut annotated = Map::new();
        annotated.insert("type".into(), Value::String(display_type(&declared)));
        annotated.extend(std::mem::take(fields));
        *fields = annotated;
    }
}

/// Both steps, in the order a response needs them: the parameters as a deployment GET returns them.
pub fn response_parameters(
    parameters: &DeploymentParameters,
    template: &Value,
) -> DeploymentParameters {
    let mut out = parameters.clone();
    redact_secure_parameters(&mut out, template);
    annotate_parameter_types(&mut out, template);
    out
}

/// Drops the `value` of every config item typed `SecureString` / `SecureObject`; directives stay.
pub fn redact_secure_extension_config(config: &mut ExtensionConfig) {
    for item in config.values_mut() {
        if item.is_secure() {
            item.value = None;
        }
    }
}

/// The response spelling of a lowercased template type.
fn display_type(declared: &str) -> String {
    match declared {
        "string" => "String".into(),
        "securestring" => "SecureString".into(),
        "int" => "Int".into(),
        "bool" => "Bool".into(),
        "array" => "Array".into(),
        "object" => "Object".into(),
        "secureobject" => "SecureObject".into(),
        other => {
            let mut chars = other.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        }
    }
}

fn get_ignore_case<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    let object = value.as_object()?;
    object.get(key).or_else(|| {
        object
            .iter()
            .find(|(k, _)| eq_ignore_case(k, key))
            .map(|(_, v)| v)
    })
}

/// Resolves `#/a/b` (a JSON pointer into the template, `~1` = `/`, `~0` = `~`).
fn resolve_local_ref<'a>(template: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    let mut current = template;
    for raw in pointer.split('/').skip(1) {
        let key = raw.replace("~1", "/").replace("~0", "~");
        current = get_ignore_case(current, &key)?;
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::extension::DeploymentExtensionConfigItem;
    use serde_json::json;

    fn template() -> Value {
        json!({
            "parameters": {
                "adminPassword": {"type": "secureString"},
                "settings": {"type": "SECUREOBJECT"},
                "location": {"type": "string"},
                "count": {"type": "int"},
                "kvSecret": {"type": "securestring"},
                "typed": {"$ref": "#/definitions/secretType"},
                "loop": {"$ref": "#/definitions/loop"}
            },
            "definitions": {"secretType": {"type": "securestring"}, "loop": {"$ref": "#/definitions/loop"}}
        })
    }

    fn params() -> DeploymentParameters {
        serde_json::from_value(json!({
            "ADMINPASSWORD": {"value": "hunter2"},
            "settings": {"value": {"key": "s3cret"}},
            "location": {"value": "westus"},
            "count": {"value": 3},
            "kvSecret": {"reference": {"keyVault": {"id": "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/v"}, "secretName": "pw"}},
            "typed": {"value": "also-secret"},
            "loop": {"value": "plain"},
            "undeclared": {"value": "x"},
            "alreadyTyped": {"type": "SecureString", "value": "leak?"}
        }))
        .unwrap()
    }

    #[test]
    fn secure_values_are_removed_like_arm_does() {
        let mut p = params();
        redact_secure_parameters(&mut p, &template());
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["ADMINPASSWORD"], json!({"type": "SecureString"}));
        assert_eq!(v["settings"], json!({"type": "SecureObject"}));
        assert_eq!(v["typed"], json!({"type": "SecureString"}));
        assert_eq!(v["alreadyTyped"], json!({"type": "SecureString"}));
        assert_eq!(v["kvSecret"]["reference"]["secretName"], "pw");
        assert_eq!(v["kvSecret"]["type"], "SecureString");
        assert_eq!(v["location"], json!({"value": "westus"}));
        assert_eq!(v["loop"], json!({"value": "plain"}));
        let text = v.to_string();
        for secret in ["hunter2", "s3cret", "also-secret", "leak?"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn response_parameters_carry_types() {
        let out = response_parameters(&params(), &template());
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(v["location"], json!({"type": "String", "value": "westus"}));
        assert_eq!(v["count"], json!({"type": "Int", "value": 3}));
        assert_eq!(v["undeclared"], json!({"value": "x"}));
        // `type` comes first, as in ARM's responses.
        assert_eq!(
            v["location"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .map(String::as_str),
            Some("type")
        );
    }

    #[test]
    fn type_lookup_follows_refs_and_ignores_case() {
        let t = template();
        assert_eq!(
            template_parameter_type(&t, "TYPED").as_deref(),
            Some("securestring")
        );
        assert_eq!(template_parameter_type(&t, "loop"), None);
        assert_eq!(template_parameter_type(&t, "missing"), None);
        assert_eq!(template_parameter_type(&json!("not a template"), "x"), None);
    }

    #[test]
    fn secure_config_values_are_dropped() {
        let mut config: ExtensionConfig = serde_json::from_value(json!({
            "kubeConfig": {"type": "SecureString", "value": "apiVersion: v1 ..."},
            "namespace": {"type": "String", "value": "app"}
        }))
        .unwrap();
        redact_secure_extension_config(&mut config);
        assert_eq!(
            config["kubeConfig"],
            DeploymentExtensionConfigItem {
                item_type: Some(
                    crate::models::extension::ExtensionConfigPropertyType::SecureString
                ),
                ..Default::default()
            }
        );
        assert_eq!(config["namespace"].value, Some(json!("app")));
    }
}

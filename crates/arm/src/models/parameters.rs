//! Deployment inputs that may carry secrets: parameter values (`{name: {value | reference | expression}}`)
//! and external inputs. Their `Debug` output shows names only.

use std::fmt;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::models::common::KeyVaultParameterReference;
use crate::wire::eq_ignore_case;

/// Deployment or stack parameters: `{name: {value?, reference?, expression?, type?}}`, kept as raw JSON
/// because ARM passes values through untouched. The request may also send the map as a JSON string (the
/// spec allows "a JObject or a well formed JSON string"); it is parsed on input.
#[derive(Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct DeploymentParameters(pub Map<String, Value>);

impl DeploymentParameters {
    /// The entry for `name`, matched ignoring case as ARM matches parameter names.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(k, _)| eq_ignore_case(k, name))
            .map(|(_, v)| v)
    }

    /// The entry for `name` read as a typed parameter; `None` if absent or not an object.
    pub fn parameter(&self, name: &str) -> Option<DeploymentParameter> {
        self.get(name)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// The parameter names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for DeploymentParameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, Redacted)))
            .finish()
    }
}

impl<'de> Deserialize<'de> for DeploymentParameters {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(map) => Ok(Self(map)),
            Value::String(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => Ok(Self(map)),
                // The text may hold secrets: never quote it.
                _ => Err(serde::de::Error::custom(
                    "parameters string is not a JSON object",
                )),
            },
            _ => Err(serde::de::Error::custom("parameters must be a JSON object")),
        }
    }
}

/// One parameter entry, typed. In responses ARM adds `type` (e.g. `String`, `SecureString`) and leaves out
/// secure values.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentParameter {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub parameter_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// A Key Vault secret to read the value from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<KeyVaultParameterReference>,
    /// An expression over `externalInputs('...')` (2025-07-01 stacks, 2025-04-01 deployments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

impl fmt::Debug for DeploymentParameter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeploymentParameter")
            .field("type", &self.parameter_type)
            .field("value", &self.value.as_ref().map(|_| Redacted))
            .field("reference", &self.reference)
            .field("expression", &self.expression)
            .finish()
    }
}

/// `externalInputs`: `{name: {value}}`, values supplied by tooling (e.g. environment variables).
pub type ExternalInputs = IndexMap<String, DeploymentExternalInput>;

/// One external input value.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentExternalInput {
    pub value: Value,
}

impl fmt::Debug for DeploymentExternalInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeploymentExternalInput")
            .field("value", &Redacted)
            .finish()
    }
}

/// `externalInputDefinitions`: `{name: {kind, config?}}`, e.g. `{"kind": "sys.envVar", "config": "FOO"}`.
pub type ExternalInputDefinitions = IndexMap<String, DeploymentExternalInputDefinition>;

/// How tooling obtains one external input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeploymentExternalInputDefinition {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

/// Prints `[REDACTED]` in place of a value.
pub(crate) struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn debug_never_shows_values() {
        let p: DeploymentParameters =
            serde_json::from_value(json!({"adminPassword": {"value": "hunter2"}})).unwrap();
        let debug = format!("{p:?}");
        assert!(
            debug.contains("adminPassword") && !debug.contains("hunter2"),
            "{debug}"
        );
        let typed = p.parameter("ADMINPASSWORD").unwrap();
        assert!(!format!("{typed:?}").contains("hunter2"));
        let input = DeploymentExternalInput {
            value: json!("s3cret"),
        };
        assert!(!format!("{input:?}").contains("s3cret"));
    }

    #[test]
    fn parameters_may_arrive_as_a_json_string() {
        let p: DeploymentParameters =
            serde_json::from_value(json!("{\"a\": {\"value\": 1}}")).unwrap();
        assert_eq!(p.get("A"), Some(&json!({"value": 1})));
        let err =
            serde_json::from_value::<DeploymentParameters>(json!("secret-not-json")).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(serde_json::from_value::<DeploymentParameters>(json!([1])).is_err());
    }
}

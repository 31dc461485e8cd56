//! The conformance profile: which extension version, sample resource and config the kit exercises.

use serde::Deserialize;
use serde_json::Value;

/// A sample resource and how to reach it, usually loaded from a small JSON file.
///
/// ```json
/// { "extensionVersion": "1.0.0", "type": "File", "config": { "rootDirectory": "${tempDir}" },
///   "properties": { "path": "a.txt", "content": "x" },
///   "updatedProperties": { "path": "a.txt", "content": "y" },
///   "invalidProperties": { "path": "../a.txt" },
///   "secretConfigProperties": [] }
/// ```
#[derive(Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// The `{extensionVersion}` to call.
    pub extension_version: String,
    /// The resource type to create.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Its API version, if the type has one.
    #[serde(default)]
    pub api_version: Option<String>,
    /// The config to send (may hold secrets: never printed).
    #[serde(default)]
    pub config: Option<Value>,
    /// Properties of the sample resource.
    pub properties: Value,
    /// Properties for the update step (same identity, different values); the update checks are skipped
    /// without them.
    #[serde(default)]
    pub updated_properties: Option<Value>,
    /// Properties the extension must reject with a 4xx (defaults to a non-object, which every extension
    /// must reject).
    #[serde(default)]
    pub invalid_properties: Option<Value>,
    /// Config properties that are secret and must never be echoed back.
    #[serde(default)]
    pub secret_config_properties: Vec<String>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("extension_version", &self.extension_version)
            .field("resource_type", &self.resource_type)
            .field("api_version", &self.api_version)
            .field("config", &self.config.as_ref().map(|_| "[REDACTED]"))
            .finish_non_exhaustive()
    }
}

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Not valid JSON or not the profile's shape.
    #[error("invalid conformance profile: {0}")]
    Invalid(#[from] serde_json::Error),
}

impl Profile {
    /// Parses a profile, replacing each `${name}` in its string values with the given value first
    /// (e.g. `("tempDir", "/tmp/x")`).
    pub fn parse(text: &str, variables: &[(&str, &str)]) -> Result<Profile, ProfileError> {
        let mut value: Value = serde_json::from_str(text)?;
        substitute(&mut value, variables);
        Ok(serde_json::from_value(value)?)
    }

    /// A profile from command-line pieces.
    pub fn new(
        extension_version: impl Into<String>,
        resource_type: impl Into<String>,
        properties: Value,
    ) -> Profile {
        Profile {
            extension_version: extension_version.into(),
            resource_type: resource_type.into(),
            api_version: None,
            config: None,
            properties,
            updated_properties: None,
            invalid_properties: None,
            secret_config_properties: Vec::new(),
        }
    }
}

fn substitute(value: &mut Value, variables: &[(&str, &str)]) {
    match value {
        Value::String(text) => {
            for (name, replacement) in variables {
                let placeholder = format!("${{{name}}}");
                if text.contains(&placeholder) {
                    *text = text.replace(&placeholder, replacement);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| substitute(item, variables)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| substitute(item, variables)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn variables_are_substituted_in_strings() {
        let profile = Profile::parse(
            r#"{ "extensionVersion": "1", "type": "T", "config": { "root": "${tempDir}/x", "n": 1 },
                 "properties": { "list": ["${tempDir}"] } }"#,
            &[("tempDir", "/tmp/a \"b\"")],
        )
        .unwrap();
        assert_eq!(
            profile.config,
            Some(json!({ "root": "/tmp/a \"b\"/x", "n": 1 }))
        );
        assert_eq!(profile.properties, json!({ "list": ["/tmp/a \"b\""] }));
    }

    #[test]
    fn unknown_fields_are_rejected() {
        assert!(
            Profile::parse(
                r#"{ "extensionVersion": "1", "type": "T", "properties": {}, "typo": 1 }"#,
                &[]
            )
            .is_err()
        );
    }

    #[test]
    fn debug_hides_config() {
        let mut profile = Profile::new("1", "T", json!({}));
        profile.config = Some(json!({ "token": "s3cr3t" }));
        assert!(!format!("{profile:?}").contains("s3cr3t"));
    }
}

//! Config handling: the full config (secrets included) lives only in memory behind a redacting wrapper;
//! what the extension echoes back is the part safe to persist.
//!
//! The contract says an extension echoes the received `config` minus secret properties, and the engine
//! treats every property that is not echoed as secret. [`ExtensionConfig::split_echo`] applies that rule.

use serde_json::{Map, Value};
use std::fmt;

/// A value that must never be printed, logged or persisted. `Debug` prints `[REDACTED]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    /// Wraps a sensitive value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The value; callers must not log or persist it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// The full extension config as the engine evaluated it, secrets included. Only ever held in memory.
#[derive(Clone, PartialEq, Debug)]
pub struct ExtensionConfig(Redacted<Map<String, Value>>);

impl ExtensionConfig {
    /// Wraps a config object.
    pub fn new(config: Map<String, Value>) -> Self {
        Self(Redacted::new(config))
    }

    /// Wraps a JSON value, which must be an object.
    pub fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Object(map) => Some(Self::new(map)),
            _ => None,
        }
    }

    /// True when there are no properties (then get/delete need no config: flags `00`).
    pub fn is_empty(&self) -> bool {
        self.0.expose().is_empty()
    }

    /// The config to send to the extension; never log it.
    pub fn expose(&self) -> &Map<String, Value> {
        self.0.expose()
    }

    /// Splits what the extension echoed into the persistable part and the names of secret properties.
    ///
    /// Echoed properties the host did not send are dropped (they are not the user's config); sent
    /// properties missing from the echo are secret. With no echo at all, every property is secret.
    pub fn split_echo(&self, echoed: Option<&Value>) -> (EchoedConfig, Vec<String>) {
        let echoed = echoed.and_then(Value::as_object);
        let mut safe = Map::new();
        let mut secret_names = Vec::new();
        for name in self.expose().keys() {
            match echoed.and_then(|echoed| echoed.get(name)) {
                Some(value) => {
                    safe.insert(name.clone(), value.clone());
                }
                None => secret_names.push(name.clone()),
            }
        }
        (EchoedConfig(safe), secret_names)
    }
}

/// The config properties the extension echoed: not secret, safe to persist and return.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct EchoedConfig(pub Map<String, Value>);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unechoed_properties_are_secret() {
        let config =
            ExtensionConfig::from_value(json!({ "endpoint": "https://q", "token": "s3cr3t" }))
                .unwrap();
        let (safe, secrets) =
            config.split_echo(Some(&json!({ "endpoint": "https://q", "extra": 1 })));
        assert_eq!(
            serde_json::to_value(&safe).unwrap(),
            json!({ "endpoint": "https://q" })
        );
        assert_eq!(secrets, vec!["token"]);
        let (safe, secrets) = config.split_echo(None);
        assert!(safe.0.is_empty());
        assert_eq!(secrets, vec!["endpoint", "token"]);
    }

    #[test]
    fn debug_is_redacted() {
        let config = ExtensionConfig::from_value(json!({ "token": "s3cr3t" })).unwrap();
        assert_eq!(format!("{config:?}"), "ExtensionConfig([REDACTED])");
    }
}

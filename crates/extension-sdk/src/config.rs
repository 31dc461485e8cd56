//! Extension configuration: parsing, the secret-free echo and `configId`.

use std::future::Future;

use serde_json::{Map, Value};

use crate::error::ExtensionError;

/// The configuration an extension receives in every request's `config`.
///
/// One type per extension, shared by all its resource handlers. The SDK parses it, echoes it back without
/// the [`ExtensionConfig::SECRET_PROPERTIES`] (the engine treats everything not echoed as secret), computes
/// `configId`, and rejects a request whose `configId` differs from the computed one.
pub trait ExtensionConfig: Send + Sync + Sized + 'static {
    /// Top-level config properties that are secret: never echoed, never printed. Properties that are
    /// not listed are echoed verbatim, so list everything sensitive.
    const SECRET_PROPERTIES: &'static [&'static str] = &[];

    /// Parses the request's `config` (`None` when the request carries none). Errors should target
    /// `/config/...` and never quote secret values.
    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError>;

    /// Completes a parsed config with what only the control plane can tell (e.g. a server's identity, which
    /// `configId` is computed from), before [`ExtensionConfig::config_id`] is asked. Called once per request
    /// after [`ExtensionConfig::from_request`]; a preview whose config cannot be resolved keeps the parsed
    /// config and reports `configId` as unknown. Default: nothing to resolve.
    fn resolve(&mut self) -> impl Future<Output = Result<(), ExtensionError>> + Send {
        async { Ok(()) }
    }

    /// The id of the control plane this config points at (`configId`), or `None` if the extension does
    /// not distinguish control planes.
    fn config_id(&self) -> Option<String> {
        None
    }
}

/// For extensions without configuration: accepts any config (or none) and echoes nothing secret-free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoConfig;

impl ExtensionConfig for NoConfig {
    fn from_request(_config: Option<&Value>) -> Result<Self, ExtensionError> {
        Ok(NoConfig)
    }
}

/// The config to echo: the received object minus the secret properties; `None` when none was received.
///
/// A config that is not an object is not echoed at all: nothing in it can be shown to be non-secret.
pub fn echo_config(config: Option<&Value>, secret_properties: &[&str]) -> Option<Value> {
    let Value::Object(received) = config? else {
        return None;
    };
    let echoed: Map<String, Value> = received
        .iter()
        .filter(|(key, _)| !secret_properties.iter().any(|secret| secret == key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Some(Value::Object(echoed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn echo_drops_secret_properties_only() {
        let config = json!({ "endpoint": "https://x", "token": "s3cr3t", "namespace": "n" });
        let echoed = echo_config(Some(&config), &["token"]).unwrap();
        assert_eq!(echoed, json!({ "endpoint": "https://x", "namespace": "n" }));
    }

    #[test]
    fn echo_of_nothing_or_non_object_is_nothing() {
        assert_eq!(echo_config(None, &[]), None);
        assert_eq!(echo_config(Some(&json!("s3cr3t")), &[]), None);
    }

    #[test]
    fn no_config_accepts_anything() {
        assert!(NoConfig::from_request(Some(&json!({ "a": 1 }))).is_ok());
        assert!(NoConfig::from_request(None).is_ok());
        assert_eq!(NoConfig.config_id(), None);
    }
}

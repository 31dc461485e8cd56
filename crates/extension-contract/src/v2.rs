//! Models of the HTTP extension contract v2.0.0 (camelCase, nulls omitted, unknown fields tolerated).
//!
//! `properties`, `identifiers`, `config`, `operationHandle` and `innererror` are raw JSON values: they are
//! opaque to the engine and keep their key order (the workspace enables serde_json's `preserve_order`).
//! Models carrying `config` print it as `[REDACTED]` in `Debug`, because config may hold secrets.

use crate::JsonPointer;
use crate::status::OperationStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Prints an optional config without its content.
struct RedactedConfig<'a>(&'a Option<Value>);

impl fmt::Debug for RedactedConfig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(_) => f.write_str("Some([REDACTED])"),
            None => f.write_str("None"),
        }
    }
}

/// Body of `createOrUpdate` (and the base of preview): `{ type, apiVersion?, properties, config?, configId? }`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpecification {
    /// Resource type, e.g. `Acme.Queue/queues`.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// API version of the resource type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Desired resource body (a JSON object).
    pub properties: Value,
    /// Extension configuration, sent flat. May contain secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Id of the control plane the config points at, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
}

/// `metadata` of a preview request: paths of unevaluated ARM expressions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewRequestMetadata {
    /// JSON pointers (into `properties` or `config`) whose values are unevaluated expressions.
    #[serde(default)]
    pub unevaluated: Vec<JsonPointer>,
}

/// Body of `preview`: a [`ResourceSpecification`] plus `metadata.unevaluated`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePreviewSpecification {
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// API version of the resource type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Resource body, possibly holding unevaluated expressions as raw strings.
    pub properties: Value,
    /// Extension configuration. May contain secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Control plane id, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
    /// Which paths are unevaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<PreviewRequestMetadata>,
}

/// Body of `get` and `delete`: `{ type, apiVersion?, identifiers, config?, configId? }`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReference {
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// API version of the resource type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Extension-defined identifying object.
    pub identifiers: Value,
    /// Extension configuration. May contain secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Control plane id; required by the contract on delete when a config is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
}

/// A resource as an extension returns it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// API version of the resource type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Extension-defined identifying object; present in every successful response.
    pub identifiers: Value,
    /// Resource body.
    pub properties: Value,
    /// The config echoed back **minus secrets**; any property not echoed is a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Control plane id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
    /// RELO progress; missing means `Succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationStatus>,
    /// Only with `status: "Failed"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Error>,
}

impl Resource {
    /// The status, where a missing status means `Succeeded`.
    pub fn effective_status(&self) -> OperationStatus {
        OperationStatus::or_succeeded(self.status.as_ref())
    }
}

/// `metadata` of a preview response: where each path falls.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePreviewMetadata {
    /// Paths the extension computes; not set by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<Vec<JsonPointer>>,
    /// Paths that cannot change after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<Vec<JsonPointer>>,
    /// Paths that cannot be computed yet (e.g. `"/identifiers"`, `"/configId"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<Vec<JsonPointer>>,
    /// Paths whose value the extension calculates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calculated: Option<Vec<JsonPointer>>,
    /// Unevaluated paths that fit no more specific category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unevaluated: Option<Vec<JsonPointer>>,
}

/// The response of `preview`: the predicted future state.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePreview {
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// API version of the resource type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Identifiers, possibly empty when listed under `metadata.unknown`.
    pub identifiers: Value,
    /// Predicted resource body.
    pub properties: Value,
    /// Status, rarely set on previews.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationStatus>,
    /// Echoed config minus secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Control plane id, when computable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
    /// Path categories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ResourcePreviewMetadata>,
}

/// A stepwise long-running operation (202 body and `/longRunningOperation/get` response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LongRunningOperation {
    /// Progress.
    pub status: OperationStatus,
    /// Seconds to wait before the next poll; the contract default is 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<i32>,
    /// Opaque object posted back to `/longRunningOperation/get`; required while non-terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_handle: Option<Value>,
    /// Required for `Failed` and `Canceled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Error>,
}

impl LongRunningOperation {
    /// The contract's default poll interval.
    pub const DEFAULT_RETRY_AFTER_SECONDS: u32 = 60;

    /// `retryAfterSeconds`, or 60 when missing or negative.
    pub fn retry_after_or_default(&self) -> u32 {
        self.retry_after_seconds
            .and_then(|seconds| u32::try_from(seconds).ok())
            .unwrap_or(Self::DEFAULT_RETRY_AFTER_SECONDS)
    }
}

/// `{ "error": Error }`, the body of every 4xx/5xx.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// The error.
    pub error: Error,
}

/// The contract's OData-style `Error` (`innererror` spelled in lower case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Error {
    /// Machine-readable code, e.g. `ResourceNotFound`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// JSON pointer to the offending input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<JsonPointer>,
    /// Nested errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<ErrorDetail>>,
    /// Extension-defined extra data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub innererror: Option<Value>,
}

impl Error {
    /// An error with a code and message only.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            target: None,
            details: None,
            innererror: None,
        }
    }

    /// Sets the target.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }
}

/// An entry of `Error.details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    /// Machine-readable code.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// JSON pointer to the offending input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<JsonPointer>,
}

macro_rules! debug_redacting_config {
    ($ty:ident { $($field:ident),* }) => {
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field))*
                    .field("config", &RedactedConfig(&self.config))
                    .finish()
            }
        }
    };
}

debug_redacting_config!(ResourceSpecification {
    resource_type,
    api_version,
    properties,
    config_id
});
debug_redacting_config!(ResourcePreviewSpecification {
    resource_type,
    api_version,
    properties,
    config_id,
    metadata
});
debug_redacting_config!(ResourceReference {
    resource_type,
    api_version,
    identifiers,
    config_id
});
debug_redacting_config!(Resource {
    resource_type,
    api_version,
    identifiers,
    properties,
    config_id,
    status,
    error
});
debug_redacting_config!(ResourcePreview {
    resource_type,
    api_version,
    identifiers,
    properties,
    status,
    config_id,
    metadata
});

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_example_round_trips() {
        let body = json!({
            "type": "Acme.Queue/queues", "apiVersion": "2025-01-01",
            "identifiers": { "name": "orders" },
            "properties": { "name": "orders", "maxDepth": 500, "createdAt": "2026-01-02T03:04:05Z" },
            "config": { "endpoint": "https://queues.acme.example" },
            "configId": "9F2C41D0"
        });
        let resource: Resource = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(resource.config_id.as_deref(), Some("9F2C41D0"));
        assert!(resource.effective_status().is_succeeded());
        assert_eq!(serde_json::to_value(&resource).unwrap(), body);
    }

    #[test]
    fn nulls_are_omitted_and_unknown_fields_tolerated() {
        let spec: ResourceSpecification = serde_json::from_value(json!({
            "type": "T", "properties": {}, "apiVersion": null, "somethingNew": 1
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_string(&spec).unwrap(),
            r#"{"type":"T","properties":{}}"#
        );
    }

    #[test]
    fn innererror_is_lower_case() {
        let mut error = Error::new("Bad", "bad thing").with_target("/properties/name");
        error.innererror = Some(json!({ "trace": 1 }));
        let text = serde_json::to_string(&ErrorResponse { error }).unwrap();
        assert_eq!(
            text,
            r#"{"error":{"code":"Bad","message":"bad thing","target":"/properties/name","innererror":{"trace":1}}}"#
        );
    }

    #[test]
    fn lro_example_parses_with_default_retry() {
        let lro: LongRunningOperation = serde_json::from_value(json!({
            "status": "Running", "operationHandle": { "opId": "q-77" }
        }))
        .unwrap();
        assert_eq!(lro.retry_after_or_default(), 60);
        let failed: LongRunningOperation = serde_json::from_value(json!({
            "status": "Failed", "error": { "code": "QueueNotEmpty", "message": "m",
              "details": [ { "code": "PendingMessages", "message": "Drain first.", "target": "/identifiers/name" } ] }
        }))
        .unwrap();
        assert!(failed.status.is_failed());
        assert_eq!(
            failed.error.unwrap().details.unwrap()[0].code,
            "PendingMessages"
        );
    }

    #[test]
    fn preview_metadata_uses_json_pointers() {
        let preview: ResourcePreview = serde_json::from_value(json!({
            "type": "Acme.Queue/queues", "identifiers": {},
            "properties": { "name": "[parameters('q')]", "maxDepth": 500 },
            "metadata": { "immutable": ["/properties/name"], "unknown": ["/identifiers"] }
        }))
        .unwrap();
        let metadata = preview.metadata.unwrap();
        assert_eq!(metadata.unknown.unwrap(), vec!["/identifiers"]);
        assert_eq!(metadata.read_only, None);
    }

    #[test]
    fn debug_never_prints_config() {
        let spec: ResourceSpecification = serde_json::from_value(json!({
            "type": "T", "properties": {}, "config": { "token": "s3cr3t" }
        }))
        .unwrap();
        let printed = format!("{spec:?}");
        assert!(!printed.contains("s3cr3t"), "{printed}");
        assert!(printed.contains("[REDACTED]"), "{printed}");
    }
}

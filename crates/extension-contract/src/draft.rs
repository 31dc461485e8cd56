//! Models of the older REST draft contract ("vnext-A": `/{v}/resources/{referenceId}`), kept for extensions
//! that still serve it.
//!
//! In this draft `type` carries the API version (`"application@v1"`), `referenceId` names a resource, and a
//! 202 carries `Location` + `Retry-After` headers pointing at an operation answering `{status, error?}`.

use crate::status::OperationStatus;
use crate::v2::Error;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Minimum `Retry-After` (seconds) the draft allows.
pub const RETRY_AFTER_MIN_SECONDS: u64 = 10;
/// Maximum `Retry-After` (seconds) the draft allows.
pub const RETRY_AFTER_MAX_SECONDS: u64 = 600;

/// The draft's `Resource`: `{ type, properties, config? (write-only), referenceId? (read-only), status? }`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DraftResource {
    /// Type and API version in one string, e.g. `"application@v1"`.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Resource body.
    pub properties: Value,
    /// Configuration (write-only). May contain secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Reference id (read-only, set by the extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_id: Option<String>,
    /// RELO progress (read-only); missing means `Succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationStatus>,
}

impl fmt::Debug for DraftResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DraftResource")
            .field("resource_type", &self.resource_type)
            .field("properties", &self.properties)
            .field("config", &self.config.as_ref().map(|_| "[REDACTED]"))
            .field("reference_id", &self.reference_id)
            .field("status", &self.status)
            .finish()
    }
}

/// Response of `POST /{v}/resources/reference`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceIdResponse {
    /// The reference id `{flags}-{uniqueId}`.
    pub reference_id: String,
}

/// Response of `GET /{resourceOperationPath}`: `{ status, error? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DraftOperationStatus {
    /// Progress.
    pub status: OperationStatus,
    /// Required for `Failed` and `Canceled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Error>,
}

/// Joins a v2 type and API version into the draft's `type@apiVersion` form.
pub fn join_type(resource_type: &str, api_version: Option<&str>) -> String {
    match api_version {
        Some(version) if !version.is_empty() => format!("{resource_type}@{version}"),
        _ => resource_type.to_owned(),
    }
}

/// Splits the draft's `type@apiVersion` into a v2 type and API version (at the last `@`).
pub fn split_type(combined: &str) -> (String, Option<String>) {
    match combined.rsplit_once('@') {
        Some((resource_type, version)) if !resource_type.is_empty() && !version.is_empty() => {
            (resource_type.to_owned(), Some(version.to_owned()))
        }
        _ => (combined.to_owned(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_join_and_split() {
        let cases = [
            ("application", Some("v1"), "application@v1"),
            ("apps/Deployment", Some("v1"), "apps/Deployment@v1"),
            ("plain", None, "plain"),
        ];
        for (resource_type, version, joined) in cases {
            assert_eq!(join_type(resource_type, version), joined);
            assert_eq!(
                split_type(joined),
                (resource_type.to_owned(), version.map(str::to_owned))
            );
        }
    }

    #[test]
    fn draft_resource_shape() {
        let resource: DraftResource = serde_json::from_value(json!({
            "type": "application@v1", "properties": { "a": 1 }, "referenceId": "00-abc", "status": "Running"
        }))
        .unwrap();
        assert_eq!(resource.reference_id.as_deref(), Some("00-abc"));
        assert!(!resource.status.unwrap().is_terminal());
        let id: ReferenceIdResponse = serde_json::from_str(r#"{"referenceId":"01-x"}"#).unwrap();
        assert_eq!(id.reference_id, "01-x");
    }
}

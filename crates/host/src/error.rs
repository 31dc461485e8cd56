//! `HostError`: the typed, ARM-shaped error every host operation returns.
//!
//! An error carries a [`HostErrorKind`] (what the engine branches on), the HTTP status the host API answers
//! with, and an ARM error body (`code`, `message`, `target`, `details`). Messages the host writes never
//! contain config values, request bodies or tokens.

use cairn_extension_contract::codes;
use cairn_extension_contract::v2;
use cairn_extension_contract::{ContractViolation, Operation, TransportError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HostErrorKind {
    /// The extension answered with an error (4xx/5xx `ErrorResponse`) not covered by a more specific kind.
    Extension,
    /// The resource does not exist (get 404).
    NotFound,
    /// The extension cannot preview this input; preflight ignores it, What-If reports Unsupported.
    PreviewNotSupported,
    /// The config points at another control plane than the recorded `configId` (e.g. `ClusterMismatch`).
    ConfigMismatch,
    /// The deployment target (e.g. the cluster) no longer exists.
    DeploymentTargetNotFound,
    /// A long-running operation ended `Failed`.
    OperationFailed,
    /// A long-running operation ended `Canceled`.
    OperationCanceled,
    /// One request exceeded the per-request timeout (504).
    Timeout,
    /// A long-running operation exceeded the overall deadline (504).
    DeadlineExceeded,
    /// The request body exceeded the limit; the extension was not called (413).
    RequestTooLarge,
    /// The response body exceeded the limit and was dropped (502).
    ResponseTooLarge,
    /// The extension's response broke the contract (502).
    ContractViolation,
    /// The extension could not be reached or the transport failed (502).
    Unreachable,
    /// No registered extension matches (404).
    NotRegistered,
    /// The caller's request is invalid (400).
    InvalidRequest,
    /// The host could not read or write its own state, e.g. the host API's pending operations (500).
    Storage,
}

/// One entry of an ARM error's `details`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmErrorDetail {
    /// Error code.
    pub code: String,
    /// Message.
    pub message: String,
    /// Target (JSON pointer), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The ARM error shape: `{ code, message, target?, details? }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmError {
    /// Error code.
    pub code: String,
    /// Message.
    pub message: String,
    /// Target (JSON pointer), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Nested errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<ArmErrorDetail>,
}

impl ArmError {
    /// An error with only a code and message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            target: None,
            details: Vec::new(),
        }
    }
}

impl From<&v2::Error> for ArmError {
    fn from(error: &v2::Error) -> Self {
        Self {
            code: error.code.clone(),
            message: error.message.clone(),
            target: error.target.clone(),
            details: error
                .details
                .iter()
                .flatten()
                .map(|detail| ArmErrorDetail {
                    code: detail.code.clone(),
                    message: detail.message.clone(),
                    target: detail.target.clone(),
                })
                .collect(),
        }
    }
}

/// A typed host failure with an ARM-shaped body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    kind: HostErrorKind,
    status: u16,
    error: ArmError,
}

impl HostError {
    /// Builds an error.
    pub fn new(kind: HostErrorKind, status: u16, error: ArmError) -> Self {
        Self {
            kind,
            status,
            error,
        }
    }

    /// The kind.
    pub fn kind(&self) -> HostErrorKind {
        self.kind
    }

    /// The HTTP status the host API answers with.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The ARM error body.
    pub fn error(&self) -> &ArmError {
        &self.error
    }

    /// The error code.
    pub fn code(&self) -> &str {
        &self.error.code
    }

    /// True for `PreviewNotSupported` (400 or 422), which preflight ignores.
    pub fn is_preview_not_supported(&self) -> bool {
        self.kind == HostErrorKind::PreviewNotSupported
    }

    /// `{ "error": { ... } }`.
    pub fn to_body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.error })
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(
            HostErrorKind::InvalidRequest,
            400,
            ArmError::new(codes::INVALID_REQUEST, message),
        )
    }

    pub(crate) fn not_registered(name: &str, version: &str) -> Self {
        Self::new(
            HostErrorKind::NotRegistered,
            404,
            ArmError::new(
                codes::EXTENSION_NOT_REGISTERED,
                format!("No registered extension matches '{name}' version '{version}'."),
            ),
        )
    }

    pub(crate) fn request_too_large(size: usize, limit: usize) -> Self {
        Self::new(
            HostErrorKind::RequestTooLarge,
            413,
            ArmError::new(
                codes::REQUEST_TOO_LARGE,
                format!(
                    "The request body is {size} bytes, more than the limit of {limit} bytes; it was not sent to the extension."
                ),
            ),
        )
    }

    pub(crate) fn timeout(operation: Operation, after: Duration) -> Self {
        Self::new(
            HostErrorKind::Timeout,
            504,
            ArmError::new(
                codes::GATEWAY_TIMEOUT,
                format!(
                    "The extension did not answer the {operation} request within {} ms.",
                    after.as_millis()
                ),
            ),
        )
    }

    pub(crate) fn deadline_exceeded(operation: Operation, deadline: Duration) -> Self {
        Self::new(
            HostErrorKind::DeadlineExceeded,
            504,
            ArmError::new(
                codes::OPERATION_DEADLINE_EXCEEDED,
                format!(
                    "The long-running {operation} operation did not finish within {} s.",
                    deadline.as_secs_f64()
                ),
            ),
        )
    }

    pub(crate) fn contract_violation(operation: Operation, violation: &ContractViolation) -> Self {
        let mut error = ArmError::new(
            violation.code(),
            format!("The extension's {operation} response violates the contract: {violation}."),
        );
        error.target = violation.target();
        Self::new(HostErrorKind::ContractViolation, 502, error)
    }

    pub(crate) fn contract(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            HostErrorKind::ContractViolation,
            502,
            ArmError::new(code, message),
        )
    }

    pub(crate) fn from_transport(operation: Operation, error: &TransportError) -> Self {
        match error {
            TransportError::ResponseTooLarge { limit } => Self::new(
                HostErrorKind::ResponseTooLarge,
                502,
                ArmError::new(
                    codes::RESPONSE_TOO_LARGE,
                    format!(
                        "The extension's {operation} response exceeded {limit} bytes and was dropped."
                    ),
                ),
            ),
            TransportError::Timeout => Self::new(
                HostErrorKind::Timeout,
                504,
                ArmError::new(
                    codes::GATEWAY_TIMEOUT,
                    format!("The extension did not answer the {operation} request in time."),
                ),
            ),
            TransportError::InvalidResponse { message } => Self::new(
                HostErrorKind::ContractViolation,
                502,
                ArmError::new(
                    codes::RESPONSE_AMBIGUOUS,
                    format!(
                        "The extension's {operation} response violates the contract: {message}."
                    ),
                ),
            ),
            TransportError::Connect { .. } => Self::new(
                HostErrorKind::Unreachable,
                502,
                ArmError::new(
                    codes::EXTENSION_UNREACHABLE,
                    format!("The {operation} request failed: {error}."),
                ),
            ),
            _ => Self::new(
                HostErrorKind::Unreachable,
                502,
                ArmError::new(
                    codes::EXTENSION_TRANSPORT_FAILED,
                    format!("The {operation} request failed: {error}."),
                ),
            ),
        }
    }

    /// Classifies an extension's `ErrorResponse` answered with `status`.
    pub(crate) fn from_extension(operation: Operation, status: u16, error: &v2::Error) -> Self {
        let kind = if error.code == codes::PREVIEW_NOT_SUPPORTED && operation == Operation::Preview
        {
            HostErrorKind::PreviewNotSupported
        } else if error.code == codes::DEPLOYMENT_TARGET_NOT_FOUND {
            HostErrorKind::DeploymentTargetNotFound
        } else if is_config_mismatch(status, &error.code) {
            HostErrorKind::ConfigMismatch
        } else if status == 404 {
            HostErrorKind::NotFound
        } else {
            HostErrorKind::Extension
        };
        Self::new(kind, status, ArmError::from(error))
    }

    pub(crate) fn operation_ended(
        operation: Operation,
        canceled: bool,
        error: Option<&v2::Error>,
    ) -> Self {
        let kind = if canceled {
            HostErrorKind::OperationCanceled
        } else {
            HostErrorKind::OperationFailed
        };
        let error = match error {
            Some(error) => ArmError::from(error),
            None if canceled => ArmError::new(
                codes::OPERATION_CANCELED,
                format!("The {operation} operation was canceled."),
            ),
            None => ArmError::new(
                codes::FAILED_WITHOUT_ERROR,
                format!("The {operation} operation failed without an error from the extension."),
            ),
        };
        // A failed operation is the extension's verdict on the user's request, reported like ARM's
        // failed provisioning: a 4xx-class conflict rather than a gateway error.
        Self::new(kind, 409, error)
    }
}

/// `ClusterMismatch`-style errors: 422 whose code says the config/control plane does not match, or the
/// extension rejecting the config id itself.
fn is_config_mismatch(status: u16, code: &str) -> bool {
    (status == 422 && code.ends_with("Mismatch")) || code == codes::INVALID_CONFIG_ID
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.error.code, self.status, self.error.message
        )
    }
}

impl std::error::Error for HostError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_extension_errors() {
        let cases = [
            (
                Operation::Preview,
                400,
                "PreviewNotSupported",
                HostErrorKind::PreviewNotSupported,
            ),
            (
                Operation::Preview,
                422,
                "PreviewNotSupported",
                HostErrorKind::PreviewNotSupported,
            ),
            (
                Operation::Get,
                422,
                "ClusterMismatch",
                HostErrorKind::ConfigMismatch,
            ),
            (
                Operation::Delete,
                400,
                "InvalidConfigId",
                HostErrorKind::ConfigMismatch,
            ),
            (
                Operation::Delete,
                404,
                "DeploymentTargetNotFound",
                HostErrorKind::DeploymentTargetNotFound,
            ),
            (
                Operation::Get,
                404,
                "ResourceNotFound",
                HostErrorKind::NotFound,
            ),
            (
                Operation::CreateOrUpdate,
                409,
                "Conflict",
                HostErrorKind::Extension,
            ),
            (
                Operation::CreateOrUpdate,
                422,
                "Unprocessable",
                HostErrorKind::Extension,
            ),
        ];
        for (operation, status, code, kind) in cases {
            let error = HostError::from_extension(operation, status, &v2::Error::new(code, "m"));
            assert_eq!(error.kind(), kind, "{code} {status}");
            assert_eq!(error.status(), status);
        }
    }

    #[test]
    fn body_is_arm_shaped() {
        let mut extension_error = v2::Error::new("Bad", "bad").with_target("/properties/a");
        extension_error.details = Some(vec![v2::ErrorDetail {
            code: "D".into(),
            message: "d".into(),
            target: None,
        }]);
        let error = HostError::from_extension(Operation::CreateOrUpdate, 400, &extension_error);
        assert_eq!(
            error.to_body(),
            serde_json::json!({ "error": { "code": "Bad", "message": "bad", "target": "/properties/a",
                "details": [ { "code": "D", "message": "d" } ] } })
        );
    }
}

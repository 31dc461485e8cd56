//! Why a request did not succeed: the client's configuration, the connection, an answer that is not ARM's, or the
//! ARM error the server answered with.

use std::path::PathBuf;

use cairn_arm::{ArmError, ErrorDetail, ErrorResponse};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// An error of [`Client`](crate::Client). Messages never hold the bearer token or a request body.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The base URL is not `http://` or `https://`.
    #[error("'{0}' is not an http:// or https:// URL")]
    InvalidBaseUrl(String),
    /// The bearer token holds characters an HTTP header cannot carry (the token itself is not repeated).
    #[error("the token holds characters a header cannot carry")]
    InvalidToken,
    /// A CA certificate file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadCaCertificate {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A CA certificate is not PEM, or holds no certificate; `origin` names the file (or `PEM data`).
    #[error("{origin} is not a PEM certificate: {reason}")]
    InvalidCaCertificate { origin: String, reason: String },
    /// A CA certificate bundle holds no certificate.
    #[error("{origin} holds no PEM certificate")]
    NoCaCertificate { origin: String },
    /// The HTTP client could not be built (TLS backend).
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
    /// The request did not get an answer: connection refused, TLS failure, timeout. `reason` is the whole cause
    /// chain (reqwest's own message hides it).
    #[error("cannot reach the server at {base}: {reason}")]
    Unreachable { base: String, reason: String },
    /// The answer's body could not be read to its end.
    #[error("cannot read the server's answer: {reason}")]
    ReadAnswer { reason: String },
    /// The server answered with a body that is not JSON (`path` is the request URL without its query).
    #[error("the server answered {method} {path} with {status} and a body that is not JSON")]
    NotJson {
        method: Method,
        path: String,
        status: StatusCode,
    },
    /// The request body could not be serialized.
    #[error("cannot encode the request: {0}")]
    Encode(#[from] serde_json::Error),
    /// The server answered 4xx/5xx: its ARM error (`error.code`, `error.message`, ...), or one made from the
    /// status when the body carries none.
    #[error(transparent)]
    Arm(ArmError),
}

impl ClientError {
    /// The ARM error the server answered with, if that is what this is.
    pub fn arm(&self) -> Option<&ArmError> {
        match self {
            ClientError::Arm(e) => Some(e),
            _ => None,
        }
    }

    /// The HTTP status of an ARM error answer.
    pub fn status(&self) -> Option<u16> {
        self.arm().map(ArmError::status)
    }

    /// Whether the server answered 404.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether this is a problem with the client's configuration (URL, token, CA certificate) rather than with
    /// a request.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            ClientError::InvalidBaseUrl(_)
                | ClientError::InvalidToken
                | ClientError::ReadCaCertificate { .. }
                | ClientError::InvalidCaCertificate { .. }
                | ClientError::NoCaCertificate { .. }
        )
    }
}

/// An error answer as an ARM error: the body's `error` (validate results carry it too), else the status.
pub(crate) fn arm_error(status: StatusCode, body: &Value) -> ArmError {
    let detail = serde_json::from_value::<ErrorResponse>(body.clone())
        .ok()
        .map(|r| r.error)
        .filter(|d| d.code.is_some() || d.message.is_some())
        .unwrap_or_else(|| {
            ErrorDetail::new(
                status
                    .canonical_reason()
                    .unwrap_or("Error")
                    .replace(' ', ""),
                format!("The server answered {status} without an ARM error body."),
            )
        });
    ArmError::from_detail(status.as_u16(), detail)
}

/// The causes of an error, joined with `: `.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_become_arm_errors() {
        let e = arm_error(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": {"code": "DeploymentNotFound", "message": "m"}}),
        );
        assert_eq!((e.status(), e.code()), (404, "DeploymentNotFound"));
        let e = arm_error(StatusCode::BAD_GATEWAY, &Value::Null);
        assert_eq!(e.code(), "BadGateway");
    }

    #[test]
    fn configuration_errors_are_told_apart_from_request_errors() {
        assert!(ClientError::InvalidToken.is_configuration());
        let answered = ClientError::Arm(ArmError::new(404, "NotFound", "m"));
        assert!(!answered.is_configuration());
        assert!(answered.is_not_found());
        assert_eq!(answered.status(), Some(404));
        let unreachable = ClientError::Unreachable {
            base: "http://x".into(),
            reason: "refused".into(),
        };
        assert_eq!(unreachable.status(), None);
        assert!(!unreachable.is_configuration());
    }
}

//! Parses extension responses and checks the contract rules serde cannot express, naming what was wrong.
//!
//! Each [`ContractViolation`] has a stable code (see [`crate::codes`]) that the host puts in its 502 error.
//! Messages never quote values from the body: a misbehaving extension might echo secrets.

use crate::codes;
use crate::v2::{ErrorResponse, LongRunningOperation, Resource, ResourcePreview};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// How an extension response breaks the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractViolation {
    /// Not JSON, or not a JSON object.
    #[error("the {what} response is not a JSON object: {detail}")]
    InvalidJson { what: &'static str, detail: String },
    /// A successful response without an `identifiers` object.
    #[error("the {what} response has no 'identifiers' object")]
    MissingIdentifiers { what: &'static str },
    /// Another required field is missing.
    #[error("the {what} response has no '{field}'")]
    MissingField {
        what: &'static str,
        field: &'static str,
    },
    /// A field has the wrong type.
    #[error("the {what} response's '{field}' is not {expected}")]
    InvalidField {
        what: &'static str,
        field: &'static str,
        expected: &'static str,
    },
    /// A non-terminal long-running operation without an `operationHandle` object.
    #[error("the long-running operation is '{status}' but has no 'operationHandle' object")]
    MissingOperationHandle { status: String },
    /// `Failed` (or `Canceled` for operations) without `error`.
    #[error("the {what} reports status '{status}' without the required 'error'")]
    FailedWithoutError { what: &'static str, status: String },
}

impl ContractViolation {
    /// The stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson { .. } => codes::RESPONSE_INVALID_JSON,
            Self::MissingIdentifiers { .. } => codes::RESPONSE_MISSING_IDENTIFIERS,
            Self::MissingField { .. } => codes::RESPONSE_MISSING_FIELD,
            Self::InvalidField { .. } => codes::RESPONSE_INVALID_FIELD,
            Self::MissingOperationHandle { .. } => codes::RESPONSE_MISSING_OPERATION_HANDLE,
            Self::FailedWithoutError { .. } => codes::RESPONSE_FAILED_WITHOUT_ERROR,
        }
    }

    /// A JSON pointer into the response, where one applies.
    pub fn target(&self) -> Option<String> {
        match self {
            Self::MissingIdentifiers { .. } => Some("/identifiers".to_owned()),
            Self::MissingField { field, .. } | Self::InvalidField { field, .. } => {
                Some(format!("/{field}"))
            }
            Self::MissingOperationHandle { .. } => Some("/operationHandle".to_owned()),
            Self::FailedWithoutError { .. } => Some("/error".to_owned()),
            Self::InvalidJson { .. } => None,
        }
    }
}

fn parse_object(body: &[u8], what: &'static str) -> Result<Map<String, Value>, ContractViolation> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ContractViolation::InvalidJson {
            what,
            detail: "the body is not an object".into(),
        }),
        Err(_) if body.is_empty() => Err(ContractViolation::InvalidJson {
            what,
            detail: "the body is empty".into(),
        }),
        Err(error) => Err(ContractViolation::InvalidJson {
            what,
            detail: format!(
                "syntax error at line {} column {}",
                error.line(),
                error.column()
            ),
        }),
    }
}

fn require_string(
    map: &Map<String, Value>,
    what: &'static str,
    field: &'static str,
) -> Result<(), ContractViolation> {
    match map.get(field) {
        None | Some(Value::Null) => Err(ContractViolation::MissingField { what, field }),
        Some(Value::String(_)) => Ok(()),
        Some(_) => Err(ContractViolation::InvalidField {
            what,
            field,
            expected: "a string",
        }),
    }
}

fn require_object(
    map: &Map<String, Value>,
    what: &'static str,
    field: &'static str,
) -> Result<(), ContractViolation> {
    match map.get(field) {
        None | Some(Value::Null) => Err(ContractViolation::MissingField { what, field }),
        Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(ContractViolation::InvalidField {
            what,
            field,
            expected: "an object",
        }),
    }
}

fn optional_string(
    map: &Map<String, Value>,
    what: &'static str,
    field: &'static str,
) -> Result<(), ContractViolation> {
    match map.get(field) {
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
        Some(_) => Err(ContractViolation::InvalidField {
            what,
            field,
            expected: "a string",
        }),
    }
}

fn optional_object(
    map: &Map<String, Value>,
    what: &'static str,
    field: &'static str,
) -> Result<(), ContractViolation> {
    match map.get(field) {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(ContractViolation::InvalidField {
            what,
            field,
            expected: "an object",
        }),
    }
}

fn error_present(map: &Map<String, Value>) -> bool {
    !matches!(map.get("error"), None | Some(Value::Null))
}

fn finish<T: DeserializeOwned>(
    map: Map<String, Value>,
    what: &'static str,
) -> Result<T, ContractViolation> {
    // Structural checks above cover required fields; what remains are nested shape errors (e.g. a detail
    // without a code). serde's message can quote values, so report only that the schema did not match.
    serde_json::from_value(Value::Object(map)).map_err(|_| ContractViolation::InvalidJson {
        what,
        detail: "the body does not match the schema".into(),
    })
}

/// Checks `error.code` and `error.message` when an `error` object is present.
fn require_nested_strings(
    map: &Map<String, Value>,
    what: &'static str,
) -> Result<(), ContractViolation> {
    if let Some(Value::Object(error)) = map.get("error") {
        for (key, field) in [("code", "error/code"), ("message", "error/message")] {
            match error.get(key) {
                None | Some(Value::Null) => {
                    return Err(ContractViolation::MissingField { what, field });
                }
                Some(Value::String(_)) => {}
                Some(_) => {
                    return Err(ContractViolation::InvalidField {
                        what,
                        field,
                        expected: "a string",
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_resource_like(
    map: &Map<String, Value>,
    what: &'static str,
) -> Result<(), ContractViolation> {
    require_string(map, what, "type")?;
    optional_string(map, what, "apiVersion")?;
    match map.get("identifiers") {
        Some(Value::Object(_)) => {}
        _ => return Err(ContractViolation::MissingIdentifiers { what }),
    }
    require_object(map, what, "properties")?;
    optional_object(map, what, "config")?;
    optional_string(map, what, "configId")?;
    optional_string(map, what, "status")?;
    optional_object(map, what, "error")?;
    require_nested_strings(map, what)
}

/// Parses a `Resource` (createOrUpdate/get/delete 200) and checks it.
pub fn parse_resource(body: &[u8]) -> Result<Resource, ContractViolation> {
    const WHAT: &str = "resource";
    // Fast path for the common, valid answer: one typed parse plus the checks types cannot express.
    // Anything unusual goes through the field-by-field diagnosis below, which names the problem.
    if let Ok(resource) = serde_json::from_slice::<Resource>(body)
        && resource.identifiers.is_object()
        && resource.properties.is_object()
        && resource.config.as_ref().is_none_or(Value::is_object)
        && !(resource
            .status
            .as_ref()
            .is_some_and(|status| status.is_failed())
            && resource.error.is_none())
    {
        return Ok(resource);
    }
    let map = parse_object(body, WHAT)?;
    check_resource_like(&map, WHAT)?;
    if let Some(Value::String(status)) = map.get("status")
        && status == crate::OperationStatus::FAILED
        && !error_present(&map)
    {
        return Err(ContractViolation::FailedWithoutError {
            what: WHAT,
            status: status.clone(),
        });
    }
    finish(map, WHAT)
}

/// Parses a `ResourcePreview` (preview 200) and checks it.
pub fn parse_resource_preview(body: &[u8]) -> Result<ResourcePreview, ContractViolation> {
    const WHAT: &str = "preview";
    let map = parse_object(body, WHAT)?;
    check_resource_like(&map, WHAT)?;
    optional_object(&map, WHAT, "metadata")?;
    finish(map, WHAT)
}

/// Parses a `LongRunningOperation` (202 body or `/longRunningOperation/get` 200) and checks it.
pub fn parse_long_running_operation(
    body: &[u8],
) -> Result<LongRunningOperation, ContractViolation> {
    const WHAT: &str = "long-running operation";
    let map = parse_object(body, WHAT)?;
    require_string(&map, WHAT, "status")?;
    match map.get("retryAfterSeconds") {
        None | Some(Value::Null) => {}
        Some(Value::Number(number))
            if number.as_i64().is_some_and(|n| i32::try_from(n).is_ok()) => {}
        Some(_) => {
            return Err(ContractViolation::InvalidField {
                what: WHAT,
                field: "retryAfterSeconds",
                expected: "an int32",
            });
        }
    }
    optional_object(&map, WHAT, "error")?;
    require_nested_strings(&map, WHAT)?;
    let status = crate::OperationStatus::new(
        map.get("status")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    if !status.is_terminal() && !matches!(map.get("operationHandle"), Some(Value::Object(_))) {
        return Err(ContractViolation::MissingOperationHandle {
            status: status.to_string(),
        });
    }
    if status.requires_error() && !error_present(&map) {
        return Err(ContractViolation::FailedWithoutError {
            what: WHAT,
            status: status.to_string(),
        });
    }
    finish(map, WHAT)
}

/// Parses an `ErrorResponse` (4xx/5xx body) and checks it.
pub fn parse_error_response(body: &[u8]) -> Result<ErrorResponse, ContractViolation> {
    const WHAT: &str = "error";
    let map = parse_object(body, WHAT)?;
    require_object(&map, WHAT, "error")?;
    require_nested_strings(&map, WHAT)?;
    finish(map, WHAT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource_case(body: &str) -> Result<(), &'static str> {
        parse_resource(body.as_bytes())
            .map(|_| ())
            .map_err(|violation| violation.code())
    }

    #[test]
    fn resource_rules() {
        let cases: [(&str, Result<(), &str>); 11] = [
            (
                r#"{"type":"T","identifiers":{"n":1},"properties":{}}"#,
                Ok(()),
            ),
            (
                r#"{"type":"T","identifiers":{},"properties":{},"status":"Running"}"#,
                Ok(()),
            ),
            (
                r#"{"type":"T","identifiers":{},"properties":{},"status":"Failed","error":{"code":"c","message":"m"}}"#,
                Ok(()),
            ),
            (
                r#"{"type":"T","properties":{}}"#,
                Err(codes::RESPONSE_MISSING_IDENTIFIERS),
            ),
            (
                r#"{"type":"T","identifiers":"x","properties":{}}"#,
                Err(codes::RESPONSE_MISSING_IDENTIFIERS),
            ),
            (
                r#"{"identifiers":{},"properties":{}}"#,
                Err(codes::RESPONSE_MISSING_FIELD),
            ),
            (
                r#"{"type":"T","identifiers":{}}"#,
                Err(codes::RESPONSE_MISSING_FIELD),
            ),
            (
                r#"{"type":"T","identifiers":{},"properties":{},"status":"Failed"}"#,
                Err(codes::RESPONSE_FAILED_WITHOUT_ERROR),
            ),
            (
                r#"{"type":"T","identifiers":{},"properties":{},"status":7}"#,
                Err(codes::RESPONSE_INVALID_FIELD),
            ),
            (
                r#"{"type":"T","identifiers":{},"properties":{},"error":{"code":"c"}}"#,
                Err(codes::RESPONSE_MISSING_FIELD),
            ),
            (r#"{"type":"T","#, Err(codes::RESPONSE_INVALID_JSON)),
        ];
        for (body, expected) in cases {
            assert_eq!(resource_case(body), expected, "{body}");
        }
    }

    #[test]
    fn lro_rules() {
        let cases: [(&str, Result<(), &str>); 7] = [
            (r#"{"status":"Running","operationHandle":{"id":1}}"#, Ok(())),
            (r#"{"status":"Succeeded"}"#, Ok(())),
            (
                r#"{"status":"Failed","error":{"code":"c","message":"m"}}"#,
                Ok(()),
            ),
            (
                r#"{"status":"Running"}"#,
                Err(codes::RESPONSE_MISSING_OPERATION_HANDLE),
            ),
            (
                r#"{"status":"Canceled"}"#,
                Err(codes::RESPONSE_FAILED_WITHOUT_ERROR),
            ),
            (
                r#"{"status":"Running","operationHandle":{},"retryAfterSeconds":"10"}"#,
                Err(codes::RESPONSE_INVALID_FIELD),
            ),
            (r#"[]"#, Err(codes::RESPONSE_INVALID_JSON)),
        ];
        for (body, expected) in cases {
            let outcome = parse_long_running_operation(body.as_bytes())
                .map(|_| ())
                .map_err(|v| v.code());
            assert_eq!(outcome, expected, "{body}");
        }
    }

    #[test]
    fn preview_allows_empty_identifiers() {
        let body = br#"{"type":"T","identifiers":{},"properties":{},"metadata":{"unknown":["/identifiers"]}}"#;
        assert!(parse_resource_preview(body).is_ok());
    }

    #[test]
    fn error_response_rules() {
        assert!(parse_error_response(br#"{"error":{"code":"c","message":"m"}}"#).is_ok());
        assert_eq!(
            parse_error_response(br#"{"code":"c"}"#).unwrap_err().code(),
            codes::RESPONSE_MISSING_FIELD
        );
        assert_eq!(
            parse_error_response(b"").unwrap_err().code(),
            codes::RESPONSE_INVALID_JSON
        );
    }

    proptest::proptest! {
        /// Whatever an extension sends, parsing returns a value or a violation and never panics; a parsed
        /// resource always has object identifiers and properties.
        #[test]
        fn arbitrary_bodies_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
                                        json in "\\{(\"(type|identifiers|properties|status|error|operationHandle)\":(\"x\"|\\{\\}|1|null|\"Failed\"),?){0,6}\\}") {
            for candidate in [body.as_slice(), json.as_bytes()] {
                if let Ok(resource) = parse_resource(candidate) {
                    proptest::prop_assert!(resource.identifiers.is_object() && resource.properties.is_object());
                }
                let _ = parse_resource_preview(candidate);
                let _ = parse_long_running_operation(candidate);
                let _ = parse_error_response(candidate);
            }
        }
    }

    #[test]
    fn messages_never_quote_body_values() {
        let body = br#"{"type":"T","identifiers":{},"properties":{},"config":{"token":"s3cr3t"},"error":{"code":"c","message":"m","details":[{"code":"s3cr3t"}]}}"#;
        let violation = parse_resource(body).unwrap_err();
        assert!(!violation.to_string().contains("s3cr3t"), "{violation}");
    }
}

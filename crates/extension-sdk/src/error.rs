//! Errors a handler returns, in the contract's OData/ARM shape, and a validator that aggregates them.

use std::fmt;

use cairn_extension_contract::JsonPointer;
use cairn_extension_contract::v2::{Error, ErrorDetail, ErrorResponse};

/// Error codes the SDK itself produces.
pub mod codes {
    pub use cairn_extension_contract::codes::{PREVIEW_NOT_SUPPORTED, RESOURCE_NOT_FOUND};
    /// The `{extensionVersion}` route segment names no served version (400).
    pub const UNSUPPORTED_EXTENSION_VERSION: &str = "UnsupportedExtensionVersion";
    /// No handler is registered for the resource type (400).
    pub const UNSUPPORTED_RESOURCE_TYPE: &str = "UnsupportedResourceType";
    /// A long-running operation was polled but the extension tracks none (400).
    pub const UNSUPPORTED_OPERATION: &str = "UnsupportedOperation";
    /// Several validation errors, listed in `details` (400).
    pub const MULTIPLE_ERRORS_OCCURRED: &str = "MultipleErrorsOccurred";
    /// A handler failed unexpectedly (500).
    pub const INTERNAL_SERVER_ERROR: &str = "InternalServerError";
    /// The request body is not JSON or not the contract's shape (400).
    pub const INVALID_REQUEST: &str = "InvalidRequest";
    /// `properties` do not match the resource type's schema (400).
    pub const INVALID_PROPERTIES: &str = "InvalidProperties";
    /// `identifiers` do not match the resource type's schema (400).
    pub const INVALID_IDENTIFIERS: &str = "InvalidIdentifiers";
    /// `config` is missing or invalid (400).
    pub const INVALID_CONFIG: &str = "InvalidConfig";
    /// The request's `configId` differs from the one the extension computes from `config` (422).
    pub const CONFIG_ID_MISMATCH: &str = "ConfigIdMismatch";
    /// No route matches the request (404).
    pub const NOT_FOUND: &str = "NotFound";
    /// The route exists but not for this HTTP method (405).
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    /// The long-running operation handle names no known operation (404).
    pub const OPERATION_NOT_FOUND: &str = "OperationNotFound";
}

/// An error a handler returns: an HTTP status plus the contract's `Error` body.
///
/// Messages must never contain secrets (config values): they reach users verbatim.
#[derive(Clone, PartialEq)]
pub struct ExtensionError {
    status: u16,
    // Boxed: `Result<T, ExtensionError>` is returned everywhere and should stay small.
    error: Box<Error>,
}

impl ExtensionError {
    /// An error with any status (clamped to 400..=599).
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: status.clamp(400, 599),
            error: Box::new(Error::new(code, message)),
        }
    }

    /// 400 with a code and a message.
    pub fn bad_request(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(400, code, message)
    }

    /// 400 pointing at the offending input, e.g. `/properties/path`.
    pub fn invalid(
        code: impl Into<String>,
        target: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::bad_request(code, message).with_target(target)
    }

    /// 409: the request conflicts with the current state of the resource.
    pub fn conflict(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(409, code, message)
    }

    /// 500 `InternalServerError` with a message that must not reveal internals or secrets.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, codes::INTERNAL_SERVER_ERROR, message)
    }

    /// 400/422 `PreviewNotSupported`: the contract documents 422 (the .NET SDK sends 400).
    pub fn preview_not_supported(message: impl Into<String>) -> Self {
        Self::new(422, codes::PREVIEW_NOT_SUPPORTED, message)
    }

    /// Sets the JSON pointer of the offending input.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.error.target = Some(target.into());
        self
    }

    /// Adds details.
    pub fn with_details(mut self, details: Vec<ErrorDetail>) -> Self {
        self.error.details = if details.is_empty() {
            None
        } else {
            Some(details)
        };
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The code.
    pub fn code(&self) -> &str {
        &self.error.code
    }

    /// The contract `Error`.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The `{ "error": ... }` body.
    pub fn into_response_body(self) -> ErrorResponse {
        ErrorResponse { error: *self.error }
    }

    /// Wraps an `Error` (e.g. one relayed from elsewhere) with a status.
    pub fn from_error(status: u16, error: Error) -> Self {
        Self {
            status: status.clamp(400, 599),
            error: Box::new(error),
        }
    }
}

impl fmt::Debug for ExtensionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtensionError")
            .field("status", &self.status)
            .field("code", &self.error.code)
            .field("message", &self.error.message)
            .field("target", &self.error.target)
            .finish()
    }
}

impl fmt::Display for ExtensionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.error.code, self.error.message)?;
        if let Some(target) = &self.error.target {
            write!(f, " (at {target})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ExtensionError {}

/// Collects validation errors and turns them into one [`ExtensionError`]: the error itself when there is
/// one, `MultipleErrorsOccurred` with every error in `details` when there are several.
#[derive(Debug, Default)]
pub struct Validator {
    errors: Vec<ErrorDetail>,
}

impl Validator {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an error at a JSON pointer.
    pub fn error(
        &mut self,
        code: impl Into<String>,
        target: impl Into<JsonPointer>,
        message: impl Into<String>,
    ) {
        self.errors.push(ErrorDetail {
            code: code.into(),
            message: message.into(),
            target: Some(target.into()),
        });
    }

    /// Records an error when `condition` is false.
    pub fn check(
        &mut self,
        condition: bool,
        code: impl Into<String>,
        target: impl Into<JsonPointer>,
        message: impl Into<String>,
    ) {
        if !condition {
            self.error(code, target, message);
        }
    }

    /// Records the error of a sub-validation, keeping its details when it aggregated several.
    pub fn absorb<T>(&mut self, result: Result<T, ExtensionError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(err) => {
                let error = *err.error;
                match error.details {
                    Some(details) if error.code == codes::MULTIPLE_ERRORS_OCCURRED => {
                        self.errors.extend(details)
                    }
                    _ => self.errors.push(ErrorDetail {
                        code: error.code,
                        message: error.message,
                        target: error.target,
                    }),
                }
                None
            }
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Ok(())` when nothing was recorded, else the aggregated 400 error.
    pub fn finish(self) -> Result<(), ExtensionError> {
        let mut errors = self.errors;
        match errors.len() {
            0 => Ok(()),
            1 => {
                let only = errors.remove(0);
                let mut err = ExtensionError::bad_request(only.code, only.message);
                err.error.target = only.target;
                Err(err)
            }
            count => Err(ExtensionError::bad_request(
                codes::MULTIPLE_ERRORS_OCCURRED,
                format!("{count} errors occurred; see details."),
            )
            .with_details(errors)),
        }
    }
}

/// Escapes one JSON pointer reference token (RFC 6901: `~` → `~0`, `/` → `~1`).
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_validator_is_ok() {
        assert!(Validator::new().finish().is_ok());
    }

    #[test]
    fn single_error_keeps_its_code_and_target() {
        let mut v = Validator::new();
        v.error("InvalidPath", "/properties/path", "bad path");
        let err = v.finish().unwrap_err();
        assert_eq!((err.status(), err.code()), (400, "InvalidPath"));
        assert_eq!(err.error().target.as_deref(), Some("/properties/path"));
        assert_eq!(err.error().details, None);
    }

    #[test]
    fn several_errors_aggregate_as_multiple_errors_occurred() {
        let mut v = Validator::new();
        v.check(false, "A", "/properties/a", "a");
        v.check(true, "Never", "/properties/x", "x");
        v.error("B", "/config/b", "b");
        let err = v.finish().unwrap_err();
        assert_eq!(err.code(), codes::MULTIPLE_ERRORS_OCCURRED);
        let details = err.error().details.clone().unwrap();
        let targets: Vec<_> = details.iter().map(|d| d.target.clone().unwrap()).collect();
        assert_eq!(targets, ["/properties/a", "/config/b"]);
    }

    #[test]
    fn absorb_flattens_nested_aggregates() {
        let mut inner = Validator::new();
        inner.error("A", "/a", "a");
        inner.error("B", "/b", "b");
        let mut outer = Validator::new();
        assert_eq!(outer.absorb::<()>(inner.finish()), None);
        assert_eq!(outer.absorb(Ok(5)), Some(5));
        outer.error("C", "/c", "c");
        let err = outer.finish().unwrap_err();
        assert_eq!(err.error().details.as_ref().map(Vec::len), Some(3));
    }

    #[test]
    fn status_is_clamped_to_error_range() {
        assert_eq!(ExtensionError::new(200, "X", "x").status(), 400);
        assert_eq!(ExtensionError::new(700, "X", "x").status(), 599);
        assert_eq!(ExtensionError::conflict("X", "x").status(), 409);
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(escape_pointer_token("a/b~c"), "a~1b~0c");
    }
}

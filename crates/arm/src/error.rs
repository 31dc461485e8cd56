//! The ARM error model: `{ "error": { code, message, target, details, additionalInfo } }`, and the errors
//! cairn's server returns, each with its HTTP status and ARM's wording where it is known.
//!
//! Embedded errors (a deployment's or stack's `properties.error`, an operation's `statusMessage.error`, an
//! async operation status's `error`) use the unwrapped [`ErrorDetail`]; response bodies wrap it in
//! [`ErrorResponse`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::ResourceId;

/// An error response body: `{ "error": { ... } }` (common-types `ErrorResponse`, deployments' `CloudError`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// The error; a body without one reads as an empty detail.
    #[serde(default)]
    pub error: ErrorDetail,
}

/// One error with its nested causes. Every field is optional on the wire; `null`s are omitted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    /// A stable, machine-readable code such as `DeploymentNotFound`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the error is about (a property path, a resource name, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Nested errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<ErrorDetail>>,
    /// Extra machine-readable information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_info: Option<Vec<ErrorAdditionalInfo>>,
}

/// `{ type, info }` attached to an error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorAdditionalInfo {
    /// The kind of information.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub info_type: Option<String>,
    /// The information itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Value>,
}

impl ErrorDetail {
    /// An error with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: Some(code.into()),
            message: Some(message.into()),
            ..Self::default()
        }
    }

    /// Sets `target`.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Appends nested errors to `details`.
    pub fn with_details(mut self, details: impl IntoIterator<Item = ErrorDetail>) -> Self {
        self.details.get_or_insert_with(Vec::new).extend(details);
        self
    }

    /// Appends one `additionalInfo` entry.
    pub fn with_additional_info(mut self, info_type: impl Into<String>, info: Value) -> Self {
        self.additional_info
            .get_or_insert_with(Vec::new)
            .push(ErrorAdditionalInfo {
                info_type: Some(info_type.into()),
                info: Some(info),
            });
        self
    }

    /// The code, or `""` when there is none.
    pub fn code(&self) -> &str {
        self.code.as_deref().unwrap_or("")
    }

    /// The message, or `""` when there is none.
    pub fn message(&self) -> &str {
        self.message.as_deref().unwrap_or("")
    }

    /// Wraps the detail in a response body.
    pub fn into_response(self) -> ErrorResponse {
        ErrorResponse { error: self }
    }
}

impl std::fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.code, &self.message) {
            (Some(code), Some(message)) => write!(f, "{code}: {message}"),
            (Some(code), None) => f.write_str(code),
            (None, Some(message)) => f.write_str(message),
            (None, None) => f.write_str("unspecified error"),
        }
    }
}

/// The error codes cairn uses, spelled as ARM spells them.
pub mod codes {
    pub const MISSING_API_VERSION_PARAMETER: &str = "MissingApiVersionParameter";
    pub const INVALID_API_VERSION_PARAMETER: &str = "InvalidApiVersionParameter";
    pub const INVALID_REQUEST_CONTENT: &str = "InvalidRequestContent";
    pub const INVALID_QUERY_PARAMETER_VALUE: &str = "InvalidQueryParameterValue";
    pub const REQUEST_TOO_LARGE: &str = "RequestEntityTooLarge";
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    pub const INVALID_AUTHENTICATION_TOKEN: &str = "InvalidAuthenticationToken";
    pub const AUTHORIZATION_FAILED: &str = "AuthorizationFailed";
    pub const INVALID_RESOURCE_ID: &str = "InvalidResourceId";
    pub const NOT_FOUND: &str = "NotFound";
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    pub const RESOURCE_NOT_FOUND: &str = "ResourceNotFound";
    pub const RESOURCE_GROUP_NOT_FOUND: &str = "ResourceGroupNotFound";
    pub const DEPLOYMENT_NOT_FOUND: &str = "DeploymentNotFound";
    pub const DEPLOYMENT_ACTIVE: &str = "DeploymentActive";
    pub const CONFLICT: &str = "Conflict";
    pub const INVALID_TEMPLATE_DEPLOYMENT: &str = "InvalidTemplateDeployment";
    pub const DEPLOYMENT_FAILED: &str = "DeploymentFailed";
    pub const DEPLOYMENT_STACK_NOT_FOUND: &str = "DeploymentStackNotFound";
    pub const DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE: &str = "DeploymentStackInNonTerminalState";
    pub const INTERNAL_SERVER_ERROR: &str = "InternalServerError";
}

/// An error that reaches a client: an HTTP status plus the ARM error detail.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub struct ArmError {
    status: u16,
    // Boxed so `Result<_, ArmError>` stays small on the happy path.
    detail: Box<ErrorDetail>,
}

impl ArmError {
    /// An error with any status, code and message.
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status,
            detail: Box::new(ErrorDetail::new(code, message)),
        }
    }

    /// Pairs an existing detail with a status.
    pub fn from_detail(status: u16, detail: ErrorDetail) -> Self {
        Self {
            status,
            detail: Box::new(detail),
        }
    }

    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The error detail.
    pub fn detail(&self) -> &ErrorDetail {
        &self.detail
    }

    /// The error code (`""` if none).
    pub fn code(&self) -> &str {
        self.detail.code()
    }

    /// Gives up the status and keeps the detail, e.g. to embed it in `properties.error`.
    pub fn into_detail(self) -> ErrorDetail {
        *self.detail
    }

    /// The response body.
    pub fn to_response(&self) -> ErrorResponse {
        ErrorResponse {
            error: (*self.detail).clone(),
        }
    }

    /// Sets `target`.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.detail.target = Some(target.into());
        self
    }

    /// Appends nested errors.
    pub fn with_details(mut self, details: impl IntoIterator<Item = ErrorDetail>) -> Self {
        self.detail
            .details
            .get_or_insert_with(Vec::new)
            .extend(details);
        self
    }

    /// 400 `MissingApiVersionParameter`.
    pub fn missing_api_version() -> Self {
        Self::new(
            400,
            codes::MISSING_API_VERSION_PARAMETER,
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    }

    /// 400 `InvalidApiVersionParameter`, listing the supported versions as ARM does (comma-separated, no spaces).
    pub fn invalid_api_version(version: &str, supported: &[&str]) -> Self {
        Self::new(
            400,
            codes::INVALID_API_VERSION_PARAMETER,
            format!(
                "The api-version '{version}' is invalid. The supported versions are '{}'.",
                supported.join(",")
            ),
        )
    }

    /// 400 `InvalidRequestContent`; `reason` says what could not be read (e.g. a serde error). It must
    /// not quote request values, which may be secrets.
    pub fn invalid_request_content(reason: impl std::fmt::Display) -> Self {
        Self::new(
            400,
            codes::INVALID_REQUEST_CONTENT,
            format!("The request content was invalid and could not be deserialized: '{reason}'."),
        )
    }

    /// 400 `InvalidQueryParameterValue` (cairn wording).
    pub fn invalid_query_parameter_value(name: &str, value: &str, allowed: &[&str]) -> Self {
        Self::new(
            400,
            codes::INVALID_QUERY_PARAMETER_VALUE,
            format!(
                "The value '{value}' of query parameter '{name}' is invalid. The allowed values are '{}'.",
                allowed.join(", ")
            ),
        )
        .with_target(name)
    }

    /// 413 `RequestEntityTooLarge`.
    pub fn request_too_large(limit_bytes: u64) -> Self {
        Self::new(
            413,
            codes::REQUEST_TOO_LARGE,
            format!(
                "The request content size exceeds the maximum allowed size of {limit_bytes} bytes."
            ),
        )
    }

    /// 401 `AuthenticationFailed` for a request without an `Authorization` header.
    pub fn authentication_header_missing() -> Self {
        Self::new(
            401,
            codes::AUTHENTICATION_FAILED,
            "Authentication failed. The 'Authorization' header is missing.",
        )
    }

    /// 401 `AuthenticationFailed` for an `Authorization` header that is not `Bearer <token>`.
    pub fn authentication_header_invalid() -> Self {
        Self::new(
            401,
            codes::AUTHENTICATION_FAILED,
            "Authentication failed. The 'Authorization' header is provided in an invalid format.",
        )
    }

    /// 401 `InvalidAuthenticationToken`; `reason` must not contain the token.
    pub fn invalid_authentication_token(reason: impl std::fmt::Display) -> Self {
        Self::new(
            401,
            codes::INVALID_AUTHENTICATION_TOKEN,
            format!("The access token is invalid: {reason}."),
        )
    }

    /// 403 `AuthorizationFailed` in ARM's wording.
    pub fn authorization_failed(client: &str, object_id: &str, action: &str, scope: &str) -> Self {
        Self::new(
            403,
            codes::AUTHORIZATION_FAILED,
            format!(
                "The client '{client}' with object id '{object_id}' does not have authorization to perform action \
                 '{action}' over scope '{scope}' or the scope is invalid. If access was recently granted, please \
                 refresh your credentials."
            ),
        )
    }

    /// 400 `InvalidResourceId` for an ID or path that does not parse.
    pub fn invalid_resource_id(id: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(
            400,
            codes::INVALID_RESOURCE_ID,
            format!("The resource id '{id}' is invalid: {reason}."),
        )
    }

    /// 404 `NotFound` for a path cairn does not serve.
    pub fn route_not_found(path: &str) -> Self {
        Self::new(
            404,
            codes::NOT_FOUND,
            format!("The requested path '{path}' was not found."),
        )
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            codes::METHOD_NOT_ALLOWED,
            format!("The requested resource does not support http method '{method}'."),
        )
    }

    /// 404 `ResourceNotFound` in ARM's wording: `The Resource 'Ns/t1/n1/t2/n2' under resource group 'rg'
    /// was not found. ...`.
    pub fn resource_not_found(id: &ResourceId) -> Self {
        let qualified = id.qualified_type_and_names();
        let message = match id.resource_group_name() {
            Some(rg) => format!(
                "The Resource '{qualified}' under resource group '{rg}' was not found. For more details please go \
                 to https://aka.ms/ARMResourceNotFoundFix"
            ),
            None => format!(
                "The Resource '{qualified}' was not found. For more details please go to \
                 https://aka.ms/ARMResourceNotFoundFix"
            ),
        };
        Self::new(404, codes::RESOURCE_NOT_FOUND, message)
    }

    /// 404 `ResourceGroupNotFound`.
    pub fn resource_group_not_found(name: &str) -> Self {
        Self::new(
            404,
            codes::RESOURCE_GROUP_NOT_FOUND,
            format!("Resource group '{name}' could not be found."),
        )
    }

    /// 404 `DeploymentNotFound`.
    pub fn deployment_not_found(name: &str) -> Self {
        Self::new(
            404,
            codes::DEPLOYMENT_NOT_FOUND,
            format!("Deployment '{name}' could not be found."),
        )
    }

    /// 409 `DeploymentActive`: a PUT replacing a deployment that is still running (ARM's wording, without the
    /// expiration time cairn does not have).
    pub fn deployment_active(name: &str, started_at: &str) -> Self {
        Self::new(
            409,
            codes::DEPLOYMENT_ACTIVE,
            format!(
                "Unable to edit or replace deployment '{name}': previous deployment from '{started_at}' is still \
                 active. Please see https://aka.ms/arm-deploy for usage details."
            ),
        )
    }

    /// 409 `DeploymentActive`: a DELETE of a deployment that is still running (cairn wording).
    pub fn deployment_active_delete(name: &str) -> Self {
        Self::new(
            409,
            codes::DEPLOYMENT_ACTIVE,
            format!(
                "Unable to delete deployment '{name}': the deployment is still active. Cancel it or wait for it \
                 to finish."
            ),
        )
    }

    /// 409 `Conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, codes::CONFLICT, message)
    }

    /// 400 `InvalidTemplateDeployment` wrapping the validation errors in `details`.
    pub fn invalid_template_deployment(
        name: &str,
        tracking_id: &str,
        details: impl IntoIterator<Item = ErrorDetail>,
    ) -> Self {
        Self::new(
            400,
            codes::INVALID_TEMPLATE_DEPLOYMENT,
            format!(
                "The template deployment '{name}' is not valid according to the validation procedure. The tracking \
                 id is '{tracking_id}'. See inner errors for details."
            ),
        )
        .with_details(details)
    }

    /// `DeploymentFailed`, the top-level error of a failed deployment. It is normally embedded in
    /// `properties.error` (see [`ArmError::into_detail`]); the status (400) is only used when it is returned
    /// directly.
    pub fn deployment_failed(details: impl IntoIterator<Item = ErrorDetail>) -> Self {
        Self::new(
            400,
            codes::DEPLOYMENT_FAILED,
            "At least one resource deployment operation failed. Please list deployment operations for details. \
             Please see https://aka.ms/arm-deployment-operations for usage details.",
        )
        .with_details(details)
    }

    /// 404 `DeploymentStackNotFound`.
    pub fn deployment_stack_not_found(name: &str) -> Self {
        Self::new(
            404,
            codes::DEPLOYMENT_STACK_NOT_FOUND,
            format!("Deployment stack '{name}' could not be found."),
        )
    }

    /// 409 `DeploymentStackInNonTerminalState`; `state` is the stack's current provisioning state.
    pub fn deployment_stack_in_non_terminal_state(name: &str, state: &str) -> Self {
        Self::new(
            409,
            codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE,
            format!(
                "The deployment stack '{name}' could not be deployed as it is already in a non-terminal state \
                 '{state}'."
            ),
        )
    }

    /// 500 `InternalServerError`; the cause stays in the server's logs, the client gets the tracking id.
    pub fn internal_server_error(tracking_id: &str) -> Self {
        Self::new(
            500,
            codes::INTERNAL_SERVER_ERROR,
            format!("Encountered internal server error. The tracking id is '{tracking_id}'."),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nulls_and_absent_fields_are_omitted() {
        let body = ArmError::deployment_not_found("d1").to_response();
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({"error": {"code": "DeploymentNotFound", "message": "Deployment 'd1' could not be found."}})
        );
    }

    #[test]
    fn full_error_round_trips() {
        let body = json!({"error": {"code": "c", "message": "m", "target": "t",
            "details": [{"code": "inner", "message": "im"}],
            "additionalInfo": [{"type": "PolicyViolation", "info": {"a": 1}}]}});
        let parsed: ErrorResponse = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(parsed.error.details.as_ref().map(Vec::len), Some(1));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), body);
    }

    #[test]
    fn every_field_is_optional_and_nulls_read_as_absent() {
        let parsed: ErrorResponse =
            serde_json::from_value(json!({"error": {"code": null, "message": "m", "unknown": 1}}))
                .unwrap();
        assert_eq!(
            parsed.error,
            ErrorDetail {
                message: Some("m".into()),
                ..Default::default()
            }
        );
        let empty: ErrorResponse = serde_json::from_value(json!({})).unwrap();
        assert_eq!(empty.error, ErrorDetail::default());
    }

    #[test]
    fn statuses_match_the_codes() {
        let cases = [
            (
                ArmError::missing_api_version(),
                400,
                codes::MISSING_API_VERSION_PARAMETER,
            ),
            (
                ArmError::invalid_api_version("x", &["a"]),
                400,
                codes::INVALID_API_VERSION_PARAMETER,
            ),
            (
                ArmError::invalid_request_content("bad"),
                400,
                codes::INVALID_REQUEST_CONTENT,
            ),
            (
                ArmError::request_too_large(4),
                413,
                codes::REQUEST_TOO_LARGE,
            ),
            (
                ArmError::authentication_header_missing(),
                401,
                codes::AUTHENTICATION_FAILED,
            ),
            (
                ArmError::invalid_authentication_token("expired"),
                401,
                codes::INVALID_AUTHENTICATION_TOKEN,
            ),
            (
                ArmError::authorization_failed("c", "o", "a", "/"),
                403,
                codes::AUTHORIZATION_FAILED,
            ),
            (
                ArmError::resource_group_not_found("rg"),
                404,
                codes::RESOURCE_GROUP_NOT_FOUND,
            ),
            (
                ArmError::deployment_active("d", "t"),
                409,
                codes::DEPLOYMENT_ACTIVE,
            ),
            (ArmError::conflict("x"), 409, codes::CONFLICT),
            (
                ArmError::invalid_template_deployment("d", "t", []),
                400,
                codes::INVALID_TEMPLATE_DEPLOYMENT,
            ),
            (
                ArmError::deployment_stack_not_found("s"),
                404,
                codes::DEPLOYMENT_STACK_NOT_FOUND,
            ),
            (
                ArmError::deployment_stack_in_non_terminal_state("s", "deploying"),
                409,
                codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE,
            ),
            (
                ArmError::internal_server_error("t"),
                500,
                codes::INTERNAL_SERVER_ERROR,
            ),
            (
                ArmError::method_not_allowed("PATCH"),
                405,
                codes::METHOD_NOT_ALLOWED,
            ),
        ];
        for (error, status, code) in cases {
            assert_eq!((error.status(), error.code()), (status, code));
        }
    }

    #[test]
    fn invalid_api_version_lists_versions_like_arm() {
        let e = ArmError::invalid_api_version("2099-01-01", &["2025-04-01", "2024-11-01"]);
        assert_eq!(
            e.detail().message(),
            "The api-version '2099-01-01' is invalid. The supported versions are '2025-04-01,2024-11-01'."
        );
    }

    #[test]
    fn resource_not_found_names_type_and_group() {
        let id = ResourceId::parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/a",
        )
        .unwrap();
        assert!(
            ArmError::resource_not_found(&id)
                .detail()
                .message()
                .starts_with("The Resource 'Microsoft.Network/virtualNetworks/vnet/subnets/a' under resource group 'rg' was not found.")
        );
    }

    #[test]
    fn wrapping_validation_errors_keeps_them_as_details() {
        let inner = ErrorDetail::new(
            "PreflightValidationCheckFailed",
            "Preflight validation failed.",
        )
        .with_details([ErrorDetail::new("AccountNameInvalid", "bad").with_target("a")]);
        let e = ArmError::invalid_template_deployment(
            "d",
            "00000000-0000-0000-0000-000000000000",
            [inner],
        );
        let v = serde_json::to_value(e.to_response()).unwrap();
        assert_eq!(v["error"]["details"][0]["details"][0]["target"], "a");
    }
}

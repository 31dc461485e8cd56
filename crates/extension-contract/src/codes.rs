//! Error codes of the extension protocol: the ones extensions send and the ones the host produces.
//!
//! Host codes are part of cairn's public surface (they reach users inside ARM error bodies): keep them stable.

/// The extension does not know the resource (get → 404).
pub const RESOURCE_NOT_FOUND: &str = "ResourceNotFound";
/// The extension cannot preview this input (400 from the .NET SDK, 422 per the docs).
pub const PREVIEW_NOT_SUPPORTED: &str = "PreviewNotSupported";
/// Kubernetes-style config mismatch: the sent `configId` names another control plane.
pub const CLUSTER_MISMATCH: &str = "ClusterMismatch";
/// The deployment target (e.g. a cluster) no longer exists.
pub const DEPLOYMENT_TARGET_NOT_FOUND: &str = "DeploymentTargetNotFound";
/// The extension rejected a missing or malformed config id.
pub const INVALID_CONFIG_ID: &str = "InvalidConfigId";

/// Host: the extension did not answer within the per-request timeout (504).
pub const GATEWAY_TIMEOUT: &str = "GatewayTimeout";
/// Host: the long-running operation did not finish before the overall deadline (504).
pub const OPERATION_DEADLINE_EXCEEDED: &str = "ExtensionOperationDeadlineExceeded";
/// Host: the request body exceeded the 4 MB limit; the extension was not called (413).
pub const REQUEST_TOO_LARGE: &str = "RequestBodyTooLarge";
/// Host: the response body exceeded the 20 MB limit and was dropped (502).
pub const RESPONSE_TOO_LARGE: &str = "ExtensionResponseTooLarge";
/// Host: the extension could not be reached (502).
pub const EXTENSION_UNREACHABLE: &str = "ExtensionUnreachable";
/// Host: the transport failed in another way, e.g. a local extension process died (502).
pub const EXTENSION_TRANSPORT_FAILED: &str = "ExtensionTransportFailed";
/// Host: no registered extension matches the name and version (404).
pub const EXTENSION_NOT_REGISTERED: &str = "ExtensionNotRegistered";
/// Host: the request to the host itself is malformed (400).
pub const INVALID_REQUEST: &str = "InvalidRequest";
/// Host: the reference id is not a valid or not a cairn reference id (400).
pub const INVALID_REFERENCE_ID: &str = "InvalidReferenceId";
/// Host: the extension answered with an unexpected HTTP status (502).
pub const UNEXPECTED_STATUS: &str = "ExtensionUnexpectedStatus";
/// Host: the extension answered 4xx/5xx without a valid error body (502 or the extension's status).
pub const EXTENSION_ERROR_WITHOUT_BODY: &str = "ExtensionErrorWithoutBody";
/// Host: the operation failed or was canceled without the error the contract requires.
pub const FAILED_WITHOUT_ERROR: &str = "ExtensionFailedWithoutError";
/// Host: the operation was canceled.
pub const OPERATION_CANCELED: &str = "ExtensionOperationCanceled";
/// Host: a long-running operation the host tracks is unknown or expired (404).
pub const OPERATION_NOT_FOUND: &str = "OperationNotFound";

/// Contract violation: the body is not JSON or not of the expected JSON shape.
pub const RESPONSE_INVALID_JSON: &str = "ExtensionResponseInvalidJson";
/// Contract violation: a successful response lacks `identifiers` (or it is not an object).
pub const RESPONSE_MISSING_IDENTIFIERS: &str = "ExtensionResponseMissingIdentifiers";
/// Contract violation: a required field other than `identifiers` is missing.
pub const RESPONSE_MISSING_FIELD: &str = "ExtensionResponseMissingField";
/// Contract violation: a field has the wrong JSON type.
pub const RESPONSE_INVALID_FIELD: &str = "ExtensionResponseInvalidField";
/// Contract violation: a non-terminal long-running operation has no `operationHandle`.
pub const RESPONSE_MISSING_OPERATION_HANDLE: &str = "ExtensionResponseMissingOperationHandle";
/// Contract violation: `Failed`/`Canceled` without `error`.
pub const RESPONSE_FAILED_WITHOUT_ERROR: &str = "ExtensionResponseFailedWithoutError";
/// Contract violation: the response is ambiguous, e.g. both or neither of a resource and an error.
pub const RESPONSE_AMBIGUOUS: &str = "ExtensionResponseAmbiguous";
/// Contract violation: delete answered with the resource in a non-terminal status (RELO), which the
/// extension's contract (seed 004, the REST draft) does not allow for delete.
pub const DELETE_RELO_NOT_ALLOWED: &str = "ExtensionDeleteReloNotAllowed";
/// Contract violation: the REST draft 202 lacks a usable `Location`.
pub const RESPONSE_MISSING_LOCATION: &str = "ExtensionResponseMissingLocation";

//! Names of the HTTP headers the extension contract defines (lower case, as HTTP/2 sends them).

/// Client request id; required on every request to an extension.
pub const CLIENT_REQUEST_ID: &str = "x-ms-client-request-id";
/// Correlation id across services; required on every request to an extension.
pub const CORRELATION_REQUEST_ID: &str = "x-ms-correlation-request-id";
/// Optional client tenant id.
pub const CLIENT_TENANT_ID: &str = "x-ms-client-tenant-id";
/// Optional home tenant id.
pub const HOME_TENANT_ID: &str = "x-ms-home-tenant-id";
/// Full URL of the host instance sending the request; required.
pub const REFERER: &str = "referer";
/// W3C trace context; required.
pub const TRACEPARENT: &str = "traceparent";
/// W3C trace state; required (may be empty).
pub const TRACESTATE: &str = "tracestate";
/// Language for error messages.
pub const ACCEPT_LANGUAGE: &str = "accept-language";
/// Request id every extension response carries (the SDK echoes the client request id).
pub const REQUEST_ID: &str = "x-ms-request-id";
/// Extension version header on engine-facing responses.
pub const VERSION: &str = "version";
/// Operation location (REST draft and host-facing long-running responses).
pub const LOCATION: &str = "location";
/// Poll interval in seconds (REST draft and host-facing long-running responses).
pub const RETRY_AFTER: &str = "retry-after";
/// Bearer token header.
pub const AUTHORIZATION: &str = "authorization";

//! Bicep extension contract models (v2.0.0 and the REST draft), reference IDs and the transport interface.
//!
//! This crate is pure: it knows the wire shapes and rules of the extension protocol but does no I/O.
//!
//! - [`v2`]: the models of the HTTP contract v2.0.0 (`ResourceSpecification`, `Resource`,
//!   `LongRunningOperation`, `ErrorResponse`, ...). camelCase, nulls omitted, unknown fields tolerated;
//!   `properties`, `identifiers`, `config`, `operationHandle` and `innererror` stay raw [`serde_json::Value`]s.
//! - [`status`]: the open `OperationStatus` string (terminal = `Succeeded` | `Failed` | `Canceled`).
//! - [`validate`]: parses extension responses and checks contract rules, naming what was wrong with a stable code.
//! - [`draft`]: the older REST draft ("vnext-A", `/resources/{referenceId}`) models.
//! - [`reference_id`]: reference IDs `{flags}-{uniqueId}` and cairn's own stable derivation of them.
//! - [`canonical`]: canonical JSON (recursively key-sorted, compact), used by the derivation.
//! - [`transport`]: [`transport::ExtensionTransport`], the object-safe interface every transport (HTTP v2,
//!   REST draft, gRPC, in-process) implements. Every transport speaks "v2 HTTP semantics": a status code
//!   (200/202/204/4xx/5xx) and a v2 JSON body, so the host enforces limits and rules in one place.
//! - [`headers`] and [`codes`]: header names and error codes shared by the host and the SDK.
//!
//! Secrets: extension `config` may hold secrets, so every model that carries a config prints it as
//! `[REDACTED]` in its `Debug` output, and [`transport::TransportRequest`] never prints its body.

pub mod canonical;
pub mod codes;
pub mod draft;
pub mod headers;
pub mod reference_id;
pub mod status;
pub mod transport;
pub mod v2;
pub mod validate;

pub use reference_id::{ReferenceFlags, ReferenceId, ReferenceIdError, ReferenceIdParts};
pub use status::OperationStatus;
pub use transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
    TypeFiles,
};
pub use validate::ContractViolation;

/// A JSON Pointer (RFC 6901) such as `"/properties/name"`.
pub type JsonPointer = String;

//! Conformance kit that checks any extension against the Bicep extension contract.
//!
//! Give it an [`ExtensionTransport`](cairn_extension_contract::ExtensionTransport) (HTTP, gRPC or in
//! process) and a [`Profile`] naming a sample resource; [`run`] drives the resource through create, get,
//! idempotent repeat, update, preview, delete, get-after-delete and delete-of-missing, plus error shape,
//! unknown version/type, `x-ms-request-id` echo, config echo without secrets, `configId` stability and
//! mismatch, and RELO/LRO polling when the extension uses them. The [`Report`] renders as a table.

pub mod kit;
pub mod profile;

pub use kit::{CheckResult, Options, Outcome, Protocol, Report, run};
pub use profile::{Profile, ProfileError};

//! The ARM REST contract as pure Rust types: resource IDs, routes, api-versions, the error model and the
//! wire models of deployments (2025-04-01), deployment stacks (2025-07-01; 2024-03-01 accepted) and
//! resource groups.
//!
//! This crate does no I/O and knows nothing of HTTP servers or storage; the server and engine adapt it.
//!
//! - [`access`]: [`access::Access`], the scopes a caller may address, and the 403 for a scope it may not.
//! - [`id`]: [`ResourceId`], parsed and compared ignoring case, formatted with the original casing.
//! - [`route`]: [`route::classify`] turns method + path + query into a [`route::Target`] or an ARM error.
//! - [`api_version`]: the accepted `api-version` values per API and [`api_version::check`].
//! - [`error`]: [`ErrorResponse`] / [`ErrorDetail`] and [`ArmError`] (status + detail) constructors.
//! - [`models`]: request and response bodies.
//! - [`names`]: name rules for deployments, stacks and resource groups, with ARM-shaped errors.
//! - [`secure`]: redaction of secure parameters and config values for responses.
//! - [`time`]: ISO 8601 durations and ARM timestamps.
//! - [`query`]: query strings and the ARM query parameters with fixed meaning.
//!
//! Secrets: parameter values, external inputs, extension config values and recorded HTTP content never
//! appear in `Debug` output.

pub mod access;
pub mod api_version;
pub mod error;
pub mod id;
pub mod models;
pub mod names;
pub mod query;
pub mod route;
pub mod secure;
pub mod time;
mod wire;

pub use access::Access;
pub use api_version::ApiKind;
pub use error::{ArmError, ErrorAdditionalInfo, ErrorDetail, ErrorResponse};
pub use id::{ResourceId, ResourceIdError, ResourceIdKind, ScopeKind};
pub use query::Query;
pub use route::{Method, Route, Target, classify};

//! The extensibility host: drives extensions over HTTP, local gRPC and in-process transports, with limits and long-running operations.
//!
//! - [`host::ExtensionHost`]: the interface the deployments engine calls — `preview`, `create_or_update`,
//!   `get`, `delete` (plus `begin_delete`/`poll_delete` for callers that poll themselves), each for an
//!   [`host::ExtensionKey`] (name, version) resolved through the [`registry::Registry`].
//! - [`error::HostError`]: typed, ARM-shaped failures ([`error::HostErrorKind`] to branch on).
//! - [`registry`]: the registry file format and lookup by name and SemVer range; built-in transports and a
//!   gRPC launcher hook are supplied by the embedding program ([`registry::TransportFactories`]).
//! - [`http_transport::HttpV2Transport`] (contract v2.0.0) and [`draft_transport::RestDraftTransport`]
//!   (REST draft), both implementing the contract crate's `ExtensionTransport`.
//! - [`secret`]: the redacting [`secret::ExtensionConfig`] and the persistable [`secret::EchoedConfig`].
//! - [`api::router`]: the axum router for `.../extensions/{name}/{version}/resources/{referenceId}`; its pending
//!   operations live in a `cairn_store::HostOperationStore` ([`operations::MemoryOperations`] by default).
//!
//! See `docs/extension-host.md` for the behaviour in prose.

pub mod api;
pub mod draft_transport;
pub mod error;
pub mod host;
pub mod http_transport;
pub mod operations;
pub mod registry;
pub mod secret;
pub mod settings;

pub use error::{ArmError, ArmErrorDetail, HostError, HostErrorKind};
pub use host::{
    CallContext, CreateOrUpdateRequest, DeleteProgress, DeployedResource, ExtensionHost,
    ExtensionKey, PendingDelete, PreviewRequest, PreviewResult, ResourceLocator,
};
pub use registry::{
    ExtensionListing, GrpcLaunch, GrpcLauncher, OciLaunch, OciLauncher, RegisteredExtension,
    Registry, TransportFactories,
};
pub use secret::{EchoedConfig, ExtensionConfig, Redacted};
pub use settings::{HostSettings, RetryPolicy};

//! SDK for writing cairn/Bicep extensions in Rust: typed handlers served over HTTP v2 and local gRPC.
//!
//! 1. Implement [`ResourceHandler`] per resource type (typed properties and identifiers via serde).
//! 2. Register the handlers on an [`Extension`] with a config type implementing [`ExtensionConfig`]
//!    (which properties are secret, how to compute `configId`).
//! 3. Serve it: [`serve_main`] in a binary (`--socket PATH` for Bicep local-deploy gRPC, `--http PORT` or
//!    `--listen ADDR` for HTTP v2 and gRPC), [`Extension::router`] inside your own axum app, or
//!    [`InProcessTransport`] to call it in process through the same HTTP code path.
//!
//! The SDK answers the contract's rules itself: routes and versions (`UnsupportedExtensionVersion`),
//! resource types (`UnsupportedResourceType`), 404 `ResourceNotFound` when `get` finds nothing, 204 when
//! deleting a missing resource, config echo without secrets, `configId` (and rejecting a mismatched one),
//! `x-ms-request-id`/`Date` headers, OData error bodies, and 500 `InternalServerError` for panics.
//! [`Validator`] aggregates validation errors (`MultipleErrorsOccurred`); [`OperationTracker`] and
//! [`ReloBoard`] implement stepwise LROs and RELO status.
//!
//! An extension may declare its resource types ([`Extension::types`], built with [`types::TypeBuilder`]):
//! `GetTypeFiles` answers them over gRPC, `--types DIR` writes them, and a host checks bodies against them.

pub mod config;
pub mod error;
pub mod extension;
pub mod handler;
pub mod in_process;
pub mod lro;
pub mod serve;

pub use cairn_extension_contract::v2::{
    Error as ContractError, LongRunningOperation, ResourcePreviewMetadata,
};
pub use cairn_extension_contract::{JsonPointer, OperationStatus};
pub use cairn_extension_types as types;
pub use config::{ExtensionConfig, NoConfig, echo_config};
pub use error::{ExtensionError, Validator, codes};
pub use extension::Extension;
pub use handler::{
    Applied, Apply, Deleted, Lookup, PreviewInput, PreviewOutput, RequestInfo, ResourceHandler,
    ResourceState, from_json,
};
pub use in_process::InProcessTransport;
pub use lro::{OperationTracker, ReloBoard};
pub use serve::{
    Listen, full_router, parse_listen_args, serve, serve_main, serve_main_with_args,
    termination_signal, type_files_response, types_arg, write_type_files,
};

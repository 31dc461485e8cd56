//! The deployment engine: validates, expands and runs ARM/Bicep deployments. Resources go to providers (ARM types,
//! with built-in local resource groups, deployments and Key Vault) or through the extensibility host (Bicep
//! extensions); nested deployments run as child deployments with their own records; everything a run needs to
//! resume after a crash is in the store.
//!
//! Entry point: [`Engine`] (`create_or_update`, `get`, `list`, `operations`, `delete`, `cancel`, `validate`,
//! `what_if`, `export_template`, `resolve_template`, `recover`). See `docs/engine.md`.
//!
//! Templates come inline or through links: template spec versions (`templateLink.id`, served by the built-in
//! template spec provider), URIs (`templateLink.uri`, `parametersLink`, downloaded by a [`TemplateFetcher`]) and
//! `relativePath` links of nested deployments.
//!
//! # Architecture
//!
//! - The public API is `Send` and async; deployments run on the engine's own coordinator thread (template
//!   expansion is single-threaded), which spawns provider and extension calls onto worker threads.
//! - Secrets (secure parameters, extension configs, Key Vault values) live only in memory and in the store's
//!   encrypted secret API; records, operations, errors and events never hold them.

mod adoption;
mod applied;
pub mod config;
mod engine;
mod env;
pub mod error;
pub mod events;
pub mod fetch;
mod hook;
mod inflight;
pub mod link;
pub mod provider;
pub mod records;
mod recovery;
mod registry;
mod request;
mod root;
mod run;
pub mod secrets;
pub mod settings;
pub mod stacks_rules;
mod what_if;

pub use adoption::{
    ExistingResourceCheck, ExtensionResource, ManagedResources, RESOURCE_EXISTS_UNMANAGED,
};
pub use config::LocalResolver;
pub use engine::{
    DeployOptions, DeploymentHandle, DeploymentPage, Engine, HandOverReport, OperationsCursor,
    OperationsDelta, RecoveryReport,
};
pub use error::EngineError;
pub use events::{DeploymentEvent, EventKind};
pub use fetch::{FetchError, FetchFuture, HttpTemplateFetcher, TemplateFetcher};
pub use provider::{ProviderError, Providers, PutOutcome, ResourceProvider};
pub use settings::{EngineSettings, OperationSlots, RecoveryPolicy};
pub use what_if::property_diff;

pub use cairn_store::{DeploymentStatus, PageRequest};

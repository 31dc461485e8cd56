//! ARM templates and parameter files: model, validation and expansion into a deployment plan.
//!
//! Entry points: [`Template::parse`] (model + diagnostics), [`ParametersFile::parse`], [`expand`] (the plan),
//! and [`load`] for the common "text in, plan out" path. Everything here is pure: runtime answers come through
//! [`RuntimeHook`].

pub mod catalogue;
pub mod checks;
pub mod config;
pub mod config_source;
pub mod context;
pub mod diagnostics;
pub mod expand;
pub mod model;
pub mod params;
pub mod plan;
pub mod resource_types;
pub mod runtime;
pub mod types;

pub use context::DeploymentContext;
pub use diagnostics::{Diagnostic, Severity, SourceFile, join_index, join_path};
pub use expand::{
    Child, DeploymentInput, Expansion, MAX_RESOURCES, NestedTemplate, ResourceIdentity, expand,
};
pub use model::{LanguageVersion, Template};
pub use params::{KeyVaultReference, ParameterValue, ParametersFile};
pub use plan::{Deferred, DeferredKind, Plan, PlannedExtension, PlannedOutput, PlannedResource};
pub use runtime::{ContextRuntime, Offline, ReferenceRequest, RuntimeHook};

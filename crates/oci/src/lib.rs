//! Bicep extensions as OCI artifacts: `br:` references and `bicepconfig.json`, pulling with every digest
//! checked into a cache keyed by digest, publishing the artifact Bicep's `publish-extension` writes (to a
//! registry or an OCI layout directory), the `cairn.lock.json` pins, and the transport that runs a pulled
//! extension binary as a local gRPC extension.
//!
//! The types layer is carried as opaque files (`index.json` and what it references); reading the types is not
//! this crate's business.

pub mod artifact;
pub mod auth;
pub mod bicepconfig;
pub mod cache;
pub mod client;
pub mod layout;
pub mod lock;
pub mod media;
pub mod reference;
pub mod transport;

pub use artifact::{Artifact, ExtensionConfig, ExtensionManifest, TypesPackage};
pub use auth::{Credentials, RegistryPolicy};
pub use bicepconfig::BicepConfig;
pub use cache::Cache;
pub use client::{OciClient, Pulled};
pub use lock::{LockEntry, LockFile, Pin, resolve_pin};
pub use reference::ArtifactRef;
pub use transport::{OciSource, OciTransport};

use std::path::Path;

/// Why an OCI operation failed. No message holds a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OciError {
    /// The reference is not one cairn understands.
    #[error("'{reference}' is not a valid extension reference: {message}")]
    InvalidReference { reference: String, message: String },
    /// A `bicepconfig.json` could not be read.
    #[error("{path}: {message}")]
    Config { path: String, message: String },
    /// The registry is not on the allow-list.
    #[error(
        "the registry '{registry}' is not trusted: add it to CAIRN_TRUSTED_REGISTRIES (comma-separated hosts or \
         '*.suffix'), or pass --insecure-registry for a plain-HTTP registry you trust"
    )]
    Untrusted { registry: String },
    /// Credentials could not be read.
    #[error("registry credentials: {message}")]
    Credentials { message: String },
    /// The registry refused the request's credentials (or their absence).
    #[error("the registry '{registry}' refused access to '{repository}' {credentials}")]
    Unauthorized {
        registry: String,
        repository: String,
        credentials: String,
    },
    /// The reference names nothing in the registry.
    #[error("'{reference}' was not found in its registry")]
    NotFound { reference: String },
    /// The registry could not be reached or answered an error.
    #[error("registry '{registry}': {message}")]
    Registry { registry: String, message: String },
    /// Content did not match its digest.
    #[error(
        "{what} of '{reference}' does not match its digest: expected {expected}, got {actual}; refusing it"
    )]
    DigestMismatch {
        reference: String,
        what: String,
        expected: String,
        actual: String,
    },
    /// The artifact is not a Bicep extension.
    #[error("'{reference}' is not a Bicep extension artifact: {message}")]
    NotAnExtension { reference: String, message: String },
    /// The artifact has no binary this machine can run.
    #[error("'{reference}' has no extension binary for {platform} (it has: {available})")]
    NoBinary {
        reference: String,
        platform: String,
        available: String,
    },
    /// A pinned tag now names another manifest.
    #[error(
        "the tag of '{reference}' has moved: {pinned_by} pins {pinned}, the registry now has {current}; refusing \
         it until the pin is updated ({fix})"
    )]
    TagMoved {
        reference: String,
        pinned_by: String,
        pinned: String,
        current: String,
        fix: String,
    },
    /// Publishing failed before anything was pushed.
    #[error("cannot publish: {message}")]
    Publish { message: String },
    /// The target already holds an artifact at that tag.
    #[error("'{target}' already exists; pass --force to overwrite it")]
    Exists { target: String },
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl OciError {
    pub(crate) fn io(path: &Path, error: &std::io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            message: error.to_string(),
        }
    }
}

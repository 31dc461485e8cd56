//! The ARM error codes this crate produces. Codes ARM itself uses keep ARM's spelling; the others are cairn's
//! own and say so.

/// Error codes, spelled as they appear in `error.code`.
pub mod codes {
    /// ARM: a stack could not delete one or more resources; they stay in the stack with `deleteFailed`.
    pub const DEPLOYMENT_STACK_DELETE_RESOURCES_FAILED: &str =
        "DeploymentStackDeleteResourcesFailed";
    /// ARM: one resource could not be deleted (`failedResources[].error`).
    pub const DELETION_FAILED: &str = "DeletionFailed";
    /// cairn: the resource's type has no DELETE and `resourcesWithoutDeleteSupport` is `fail`.
    pub const RESOURCE_DELETE_NOT_SUPPORTED: &str = "DeploymentStackResourceDeleteNotSupported";
    /// cairn: not attempted because a resource it must be deleted after could not be deleted.
    pub const DELETE_BLOCKED: &str = "DeploymentStackDeleteBlocked";
    /// cairn: an extensible resource counts as deleted without its own delete: the ARM resource its extension
    /// config comes from (e.g. the cluster a kubeconfig is listed from) answered not found (seed 001).
    pub const CONFIG_SOURCE_GONE: &str = "DeploymentStackConfigSourceGone";
    /// cairn: the stack would take over resources another stack manages.
    pub const RESOURCE_MANAGED_BY_ANOTHER_STACK: &str =
        "DeploymentStackResourceManagedByAnotherStack";
    /// cairn: the operation would delete a resource a `protect` pattern names.
    pub const RESOURCE_PROTECTED: &str = "DeploymentStackResourceProtected";
    /// cairn: a `protect` or `retain` pattern cannot be read.
    pub const INVALID_RESOURCE_POLICY: &str = "InvalidResourcePolicy";
    /// cairn: an `actionOnUnmanage` value this version does not know.
    pub const INVALID_ACTION_ON_UNMANAGE: &str = "InvalidActionOnUnmanage";
    /// cairn: an extension config cannot be persisted for a stack (a secret given literally, ...).
    pub const INVALID_STACK_EXTENSION_CONFIG: &str = "InvalidStackExtensionConfig";
    /// cairn: evaluating a persisted directive failed (shared with the deployment engine's resolver).
    pub use cairn_config::codes::{
        EXTENSION_CONFIG_API_CALL_FAILED, EXTENSION_CONFIG_SECRET_FAILED,
        EXTENSION_CONFIG_SECRET_FORBIDDEN, EXTENSION_CONFIG_SECRET_NOT_FOUND,
        EXTENSION_CONFIG_VALUE_NOT_FOUND, INVALID_EXTENSION_CONFIG_DIRECTIVE,
    };
}

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
    /// cairn: the stack would take over resources another stack manages.
    pub const RESOURCE_MANAGED_BY_ANOTHER_STACK: &str =
        "DeploymentStackResourceManagedByAnotherStack";
    /// cairn: an `actionOnUnmanage` value this version does not know.
    pub const INVALID_ACTION_ON_UNMANAGE: &str = "InvalidActionOnUnmanage";
    /// cairn: an extension config cannot be persisted for a stack (a secret given literally, ...).
    pub const INVALID_STACK_EXTENSION_CONFIG: &str = "InvalidStackExtensionConfig";
    /// cairn: a persisted directive is malformed.
    pub const INVALID_EXTENSION_CONFIG_DIRECTIVE: &str = "InvalidExtensionConfigDirective";
    /// cairn: a `keyVaultReference` names a secret that does not exist.
    pub const EXTENSION_CONFIG_SECRET_NOT_FOUND: &str = "ExtensionConfigSecretNotFound";
    /// cairn: a `keyVaultReference` secret may not be read.
    pub const EXTENSION_CONFIG_SECRET_FORBIDDEN: &str = "ExtensionConfigSecretForbidden";
    /// cairn: reading a `keyVaultReference` secret failed otherwise.
    pub const EXTENSION_CONFIG_SECRET_FAILED: &str = "ExtensionConfigSecretFailed";
    /// cairn: an `apiReference` call failed.
    pub const EXTENSION_CONFIG_API_CALL_FAILED: &str = "ExtensionConfigApiCallFailed";
    /// cairn: an `apiReference` response has no value at `responseValuePath`.
    pub const EXTENSION_CONFIG_VALUE_NOT_FOUND: &str = "ExtensionConfigValueNotFound";
}

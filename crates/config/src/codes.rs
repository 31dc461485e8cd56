//! The ARM error codes of config values that cannot be used: cairn's own, since ARM has no directives to fetch
//! again (a deployment reports Key Vault failures with ARM's `KeyVaultParameterReferenceSecretRetrieveFailed`).

/// cairn: an extension config property has a shape no seed form gives it, or a malformed directive.
pub const INVALID_EXTENSION_CONFIG: &str = "InvalidExtensionConfig";
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
/// cairn: a config a stack kept lacks a property the extension requires, so the extension is not called.
pub const EXTENSION_CONFIG_REQUIRED_PROPERTY_MISSING: &str =
    "ExtensionConfigRequiredPropertyMissing";

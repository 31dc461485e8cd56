//! Extension config values from the parameters file, request or module body to the resolver.
//!
//! A config property is parsed once ([`parse`]) into a [`ConfigValue`] — a literal, a secure literal, a Key Vault
//! or API [`Directive`], a value known only when the deployment runs, or a group of properties — and keeps that
//! form through the template's merge with the declaration's defaults, the plan, the deployment records and a
//! stack's persisted config, until the one [`Resolver`] turns a whole [`Config`] into the object the extension
//! receives ([`resolve_config`]). Alias-level inputs (a config of properties, seed 002's `inherit` of the parent
//! deployment's config) are [`ConfigInput`]s.
//!
//! Pure: no I/O. Fetching (Key Vault secrets, ARM calls) is the caller's [`Resolver`]. Secrets never show: literal
//! and secure values, fetched values and resolved configs print as `[REDACTED]` in `Debug`, and no error quotes
//! a value.

pub mod codes;
pub mod parse;
pub mod path;
pub mod resolve;
pub mod value;

pub use parse::{
    ConfigError, ConfigErrorKind, ConfigSource, Input, InputJson, Unknown, arm_api_call_expression,
};
pub use path::{PathMiss, PathStep, PathSyntaxError, ValuePath};
pub use resolve::{
    ApiMethod, ApiRequest, DirectiveError, DirectiveErrorKind, Fetch, Fetched, ResolveFailure,
    ResolvedConfig, Resolver, SecretRequest, SecretValue, evaluate_directive, resolve_config,
};
pub use value::{
    AUTH, Config, ConfigInput, ConfigPath, ConfigValue, Directive, ITEM_KEYS, SecureLiteral,
    SecureOrigin, WRAPPER_KEYS, is_item_keys, wrapper_kinds,
};

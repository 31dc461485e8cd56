//! Extension config directives for stacks: the persisted, secret-free form of an extension config
//! ([`PersistedConfig`]), and — from `cairn-config`, shared with the deployment engine — the typed config
//! values, the value-path subset and evaluation through a caller-supplied [`Resolver`].

pub mod model;

pub use cairn_config::path;
pub use cairn_config::resolve;
pub use cairn_config::{
    ApiMethod, ApiRequest, Config, ConfigErrorKind, ConfigPath, ConfigValue, Directive,
    DirectiveError, DirectiveErrorKind, Fetch, Fetched, PathMiss, PathStep, PathSyntaxError,
    ResolveFailure, ResolvedConfig, Resolver, SecretRequest, SecretValue, ValuePath,
    arm_api_call_expression, evaluate_directive, resolve_config,
};
pub use model::{ConfigError, PersistedConfig};

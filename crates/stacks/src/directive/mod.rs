//! Extension config directives: the persisted, secret-free form of an extension config
//! ([`PersistedConfig`]), normalisation of the older seed forms, the value-path subset and evaluation
//! through a caller-supplied [`Resolver`].

pub mod model;
pub mod path;
pub mod resolve;

pub use model::{
    ConfigError, ConfigErrorKind, ConfigPath, ConfigValue, Directive, PersistedConfig,
};
pub use path::{PathMiss, PathStep, PathSyntaxError, ValuePath};
pub use resolve::{
    ApiMethod, ApiRequest, DirectiveError, DirectiveErrorKind, Fetch, Fetched, ResolveFailure,
    ResolvedConfig, Resolver, SecretRequest, SecretValue, evaluate_directive, resolve_config,
};

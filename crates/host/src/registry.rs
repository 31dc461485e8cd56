//! The extension registry: which transport serves an (extension name, version) pair.
//!
//! # File format (JSON)
//!
//! ```json
//! {
//!   "extensions": [
//!     { "name": "Acme", "version": "^1.2", "transport": { "kind": "http", "url": "http://127.0.0.1:8080/ext" },
//!       "timeoutSeconds": 30, "auth": { "bearerTokenEnv": "ACME_TOKEN" } },
//!     { "name": "Legacy", "version": "1.0.0", "transport": { "kind": "restDraft", "url": "https://legacy.example" },
//!       "auth": { "bearerTokenFile": "secrets/legacy.token" } },
//!     { "name": "Local", "version": "1.0.0", "transport": { "kind": "builtin", "builtin": "local" } },
//!     { "name": "Dsc", "version": ">=0.1.0, <1.0.0", "transport": { "kind": "grpc", "binary": "bin/dsc-ext", "args": [] } },
//!     { "name": "Widgets", "version": "1.0.0",
//!       "transport": { "kind": "oci", "reference": "br:registry.example/ext/widgets:1.0.0", "digest": "sha256:..." } }
//!   ]
//! }
//! ```
//!
//! - `name`: matched case-insensitively.
//! - `version`: an exact version (`1.2.0`, matched by SemVer equality, or by exact string when not SemVer)
//!   or a SemVer range (`^1.2`, `>=1.0.0, <2.0.0`, `*`). Exact entries win over ranges; otherwise the first
//!   matching entry in file order wins.
//! - `transport.kind`: `http` (v2.0.0 contract), `restDraft` (vnext-A), `grpc` (local binary, started by the
//!   gRPC launcher the embedding program supplies), `builtin` (an in-process transport supplied by name), `oci`
//!   (an extension artifact in an OCI registry, `br:` reference and optional manifest `digest` pin; pulled and
//!   run as a local gRPC binary by the OCI launcher the embedding program supplies).
//! - `timeoutSeconds`: per-request timeout, overriding the host default (60 s).
//! - `auth`: at most one of `bearerToken` (inline, discouraged), `bearerTokenFile` (relative to the registry
//!   file, trimmed) or `bearerTokenEnv` (environment variable). Tokens are never printed or listed.
//! - `types`: a directory holding the extension's `index.json` (Bicep's type format) and the files it references;
//!   with it, templates, deployments and stacks check this extension's resource bodies before anything runs.
//! - Relative `binary`, `bearerTokenFile` and `types` paths are resolved against the registry file's directory.

use crate::draft_transport::RestDraftTransport;
use crate::http_transport::{
    HttpV2Transport, TransportSetupError, default_http_client, is_https, plain_http_client,
};
use crate::secret::Redacted;
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse,
};
use cairn_extension_types::TypeSet;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why a registry could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The file could not be read.
    #[error("cannot read the extension registry '{path}': {message}")]
    Io { path: String, message: String },
    /// The file is not valid registry JSON. Only the position is reported: values may be tokens.
    #[error("the extension registry is not valid: {message} at line {line} column {column}")]
    Parse {
        message: String,
        line: usize,
        column: usize,
    },
    /// An entry is invalid.
    #[error("extension registry entry {index} ('{name}') is invalid: {message}")]
    InvalidEntry {
        index: usize,
        name: String,
        message: String,
    },
}

/// The registry file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryFile {
    /// Registered extensions.
    pub extensions: Vec<ExtensionEntry>,
}

/// One registry entry as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionEntry {
    /// Extension name.
    pub name: String,
    /// Exact version or SemVer range.
    pub version: String,
    /// How to reach it.
    pub transport: TransportSpec,
    /// Per-request timeout in seconds.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Bearer token source.
    #[serde(default)]
    pub auth: Option<AuthSpec>,
    /// Directory holding the extension's `index.json` and the type files it references.
    #[serde(default)]
    pub types: Option<PathBuf>,
}

/// How an extension is reached.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum TransportSpec {
    /// HTTP contract v2.0.0 at this base URL.
    Http { url: String },
    /// REST draft (vnext-A) at this base URL.
    RestDraft { url: String },
    /// A local gRPC extension binary.
    Grpc {
        binary: PathBuf,
        #[serde(default)]
        args: Vec<String>,
    },
    /// An in-process built-in, by name.
    Builtin { builtin: String },
    /// An extension artifact in an OCI registry, run as a local gRPC binary.
    Oci {
        reference: String,
        #[serde(default)]
        digest: Option<String>,
    },
}

/// Where a bearer token comes from.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthSpec {
    /// Inline token.
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// File holding the token.
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// Environment variable holding the token.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
}

impl fmt::Debug for AuthSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthSpec")
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "[REDACTED]"),
            )
            .field("bearer_token_file", &self.bearer_token_file)
            .field("bearer_token_env", &self.bearer_token_env)
            .finish()
    }
}

/// What the gRPC launcher hook receives.
#[derive(Debug, Clone, PartialEq)]
pub struct GrpcLaunch {
    /// Extension name.
    pub name: String,
    /// Version or range as registered.
    pub version: String,
    /// Binary path (absolute or relative to the working directory).
    pub binary: PathBuf,
    /// Extra arguments.
    pub args: Vec<String>,
}

/// What the OCI launcher hook receives.
#[derive(Debug, Clone, PartialEq)]
pub struct OciLaunch {
    /// Extension name.
    pub name: String,
    /// Version or range as registered.
    pub version: String,
    /// The `br:` reference.
    pub reference: String,
    /// The manifest digest the entry pins, if any.
    pub digest: Option<String>,
    /// The registry file's directory (relative paths in the launcher's own settings resolve against it).
    pub base_dir: PathBuf,
}

/// Builds a transport for an OCI extension artifact. It should pull and start it lazily, on first use.
pub type OciLauncher =
    Arc<dyn Fn(&OciLaunch) -> Result<Arc<dyn ExtensionTransport>, String> + Send + Sync>;

/// Builds a transport for a gRPC binary. It should start the process lazily, on first use.
pub type GrpcLauncher =
    Arc<dyn Fn(&GrpcLaunch) -> Result<Arc<dyn ExtensionTransport>, String> + Send + Sync>;

/// What the embedding program supplies to build transports the host crate does not own.
#[derive(Clone, Default)]
pub struct TransportFactories {
    /// Shared HTTP client; a default rustls client is built when absent.
    pub http_client: Option<reqwest::Client>,
    /// Built-in transports by name (e.g. `"local"`).
    pub builtins: HashMap<String, Arc<dyn ExtensionTransport>>,
    /// Launcher for gRPC binaries; entries load without it but fail with "unavailable" when called.
    pub grpc_launcher: Option<GrpcLauncher>,
    /// Launcher for OCI artifacts; entries load without it but fail with "unavailable" when called.
    pub oci_launcher: Option<OciLauncher>,
    /// Overrides the REST draft's 10..=600 s `Retry-After` clamp (tests).
    pub draft_retry_after_seconds: Option<RangeInclusive<u64>>,
    /// The types of built-in extensions, by the same names as `builtins`: a `builtin` entry gets them unless it
    /// names a `types` directory of its own.
    pub builtin_types: HashMap<String, Arc<TypeSet>>,
}

/// How an extension's versions are matched.
#[derive(Debug, Clone, PartialEq)]
pub enum VersionMatcher {
    /// A single version: SemVer equality, or exact string equality when not SemVer.
    Exact(String),
    /// A SemVer range.
    Range(semver::VersionReq),
}

impl VersionMatcher {
    /// Parses an exact version (preferred) or a range; anything else is an opaque exact string.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if semver::Version::parse(text).is_ok() {
            Self::Exact(text.to_owned())
        } else if let Ok(range) = semver::VersionReq::parse(text) {
            Self::Range(range)
        } else {
            Self::Exact(text.to_owned())
        }
    }

    /// Whether `requested` matches.
    pub fn matches(&self, requested: &str) -> bool {
        match self {
            Self::Exact(exact) => {
                exact == requested
                    || matches!(
                        (semver::Version::parse(exact), semver::Version::parse(requested)),
                        (Ok(a), Ok(b)) if a == b
                    )
            }
            Self::Range(range) => {
                semver::Version::parse(requested).is_ok_and(|version| range.matches(&version))
            }
        }
    }
}

/// A registered extension.
pub struct RegisteredExtension {
    name: String,
    version: String,
    matcher: VersionMatcher,
    transport_kind: &'static str,
    target: String,
    timeout: Option<Duration>,
    has_bearer_token: bool,
    transport: Arc<dyn ExtensionTransport>,
    types: Option<Arc<TypeSet>>,
    /// What the transport answered when asked for type files (`GetTypeFiles`), asked once.
    fetched: tokio::sync::OnceCell<Option<Arc<TypeSet>>>,
}

impl RegisteredExtension {
    /// A registration for a transport built by the caller (e.g. tests, built-ins).
    pub fn new(name: &str, version: &str, transport: Arc<dyn ExtensionTransport>) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            matcher: VersionMatcher::parse(version),
            transport_kind: "custom",
            target: String::new(),
            timeout: None,
            has_bearer_token: false,
            transport,
            types: None,
            fetched: tokio::sync::OnceCell::new(),
        }
    }

    /// The extension's resource types, which resource bodies are checked against before deploy.
    pub fn with_types(mut self, types: Arc<TypeSet>) -> Self {
        self.types = Some(types);
        self
    }

    /// The extension's resource types, when known: given (a built-in's, a `types` directory) or, once
    /// [`RegisteredExtension::fetch_types`] has asked, what the extension itself published.
    pub fn types(&self) -> Option<&Arc<TypeSet>> {
        self.types
            .as_ref()
            .or_else(|| self.fetched.get().and_then(Option::as_ref))
    }

    /// The extension's types, asking the extension (`GetTypeFiles` over local gRPC) the first time when none
    /// were given. An extension that publishes none, or files that do not load, leave it without types: bodies
    /// are then not checked, as before types existed (logged, never an error of the deployment).
    pub async fn fetch_types(&self) -> Option<Arc<TypeSet>> {
        if let Some(types) = &self.types {
            return Some(Arc::clone(types));
        }
        self.fetched
            .get_or_init(|| async {
                match self.transport.type_files().await {
                    Ok(Some(files)) => match TypeSet::from_files(&files) {
                        Ok(types) => Some(Arc::new(types)),
                        Err(error) => {
                            tracing::warn!(extension = %self.name, %error, "the extension's type files do not load");
                            None
                        }
                    },
                    Ok(None) => None,
                    Err(error) => {
                        tracing::warn!(extension = %self.name, %error, "the extension's type files could not be fetched");
                        None
                    }
                }
            })
            .await
            .clone()
    }

    /// Sets what `list()` shows as the transport kind (e.g. `"builtin"`) and target (e.g. its name).
    pub fn with_description(
        mut self,
        transport_kind: &'static str,
        target: impl Into<String>,
    ) -> Self {
        self.transport_kind = transport_kind;
        self.target = target.into();
        self
    }

    /// Overrides the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The registered name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The registered version or range.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The per-request timeout override.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The transport.
    pub fn transport(&self) -> &Arc<dyn ExtensionTransport> {
        &self.transport
    }

    /// The listing row.
    pub fn listing(&self) -> ExtensionListing {
        ExtensionListing {
            name: self.name.clone(),
            version: self.version.clone(),
            transport: self.transport_kind.to_owned(),
            target: self.target.clone(),
            timeout_seconds: self.timeout.map(|timeout| timeout.as_secs()),
            bearer_token: self.has_bearer_token,
        }
    }
}

impl fmt::Debug for RegisteredExtension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredExtension")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("transport", &self.transport_kind)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// One row of `cairn extension list` (never includes a token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionListing {
    /// Name.
    pub name: String,
    /// Version or range.
    pub version: String,
    /// `http`, `restDraft`, `grpc`, `builtin`, `oci` or `custom`.
    pub transport: String,
    /// URL (without user info), binary path, built-in name or OCI reference (with its pinned digest).
    pub target: String,
    /// Per-request timeout override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Whether a bearer token is configured.
    pub bearer_token: bool,
}

/// The set of registered extensions.
#[derive(Debug, Default)]
pub struct Registry {
    entries: Vec<Arc<RegisteredExtension>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a registration (after those already present).
    pub fn register(&mut self, extension: RegisteredExtension) {
        self.entries.push(Arc::new(extension));
    }

    /// Loads a registry file, reading tokens from files and the process environment.
    pub fn load(path: &Path, factories: &TransportFactories) -> Result<Self, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|error| RegistryError::Io {
            path: path.display().to_string(),
            message: error.to_string(),
        })?;
        let base_dir = path.parent().unwrap_or_else(|| Path::new("."));
        Self::from_json(&text, base_dir, factories, &|name| std::env::var(name).ok())
    }

    /// Builds a registry from registry JSON; `base_dir` resolves relative paths, `env` reads variables.
    pub fn from_json(
        text: &str,
        base_dir: &Path,
        factories: &TransportFactories,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RegistryError> {
        let file: RegistryFile =
            serde_json::from_str(text).map_err(|error| RegistryError::Parse {
                message: match error.classify() {
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                        "syntax error".into()
                    }
                    _ => "unexpected field or value".into(),
                },
                line: error.line(),
                column: error.column(),
            })?;
        let reaches_https = file.extensions.iter().any(|entry| match &entry.transport {
            TransportSpec::Http { url } | TransportSpec::RestDraft { url } => is_https(url),
            _ => false,
        });
        let client = match &factories.http_client {
            Some(client) => client.clone(),
            None => if reaches_https {
                default_http_client()
            } else {
                plain_http_client()
            }
            .map_err(|error| RegistryError::InvalidEntry {
                index: 0,
                name: String::new(),
                message: error.to_string(),
            })?,
        };
        let mut registry = Self::new();
        for (index, entry) in file.extensions.into_iter().enumerate() {
            let invalid = |message: String| RegistryError::InvalidEntry {
                index,
                name: entry.name.clone(),
                message,
            };
            if entry.name.trim().is_empty() || entry.version.trim().is_empty() {
                return Err(invalid("name and version must not be empty".into()));
            }
            let token = read_token(entry.auth.as_ref(), base_dir, env).map_err(&invalid)?;
            let has_bearer_token = token.is_some();
            let setup = |error: TransportSetupError| invalid(error.to_string());
            let (transport_kind, target, transport): (
                &'static str,
                String,
                Arc<dyn ExtensionTransport>,
            ) = match &entry.transport {
                TransportSpec::Http { url } => {
                    let transport =
                        HttpV2Transport::new(client.clone(), url, token).map_err(setup)?;
                    ("http", display_url(url), Arc::new(transport))
                }
                TransportSpec::RestDraft { url } => {
                    let mut transport =
                        RestDraftTransport::new(client.clone(), url, token).map_err(setup)?;
                    if let Some(bounds) = &factories.draft_retry_after_seconds {
                        transport = transport.with_retry_after_bounds(bounds.clone());
                    }
                    ("restDraft", display_url(url), Arc::new(transport))
                }
                TransportSpec::Grpc { binary, args } => {
                    if has_bearer_token {
                        return Err(invalid("gRPC extensions take no bearer token".into()));
                    }
                    let binary = if binary.is_relative() {
                        base_dir.join(binary)
                    } else {
                        binary.clone()
                    };
                    let launch = GrpcLaunch {
                        name: entry.name.clone(),
                        version: entry.version.clone(),
                        binary: binary.clone(),
                        args: args.clone(),
                    };
                    let transport: Arc<dyn ExtensionTransport> = match &factories.grpc_launcher {
                        Some(launcher) => launcher(&launch).map_err(&invalid)?,
                        None => Arc::new(UnavailableTransport {
                            reason: "no gRPC launcher is configured in this program".into(),
                        }),
                    };
                    ("grpc", binary.display().to_string(), transport)
                }
                TransportSpec::Builtin { builtin } => {
                    let transport = factories.builtins.get(builtin).cloned().ok_or_else(|| {
                        invalid(format!("there is no built-in extension named '{builtin}'"))
                    })?;
                    ("builtin", builtin.clone(), transport)
                }
                TransportSpec::Oci { reference, digest } => {
                    if has_bearer_token {
                        return Err(invalid(
                            "OCI extensions take no bearer token (registry credentials come from Docker's \
                             config file or the environment)"
                                .into(),
                        ));
                    }
                    if !reference.starts_with("br:") && !reference.starts_with("br/") {
                        return Err(invalid(format!(
                            "the reference '{reference}' must start with 'br:' (br:<registry>/<repository>:<tag>)"
                        )));
                    }
                    if let Some(digest) = digest
                        && !is_sha256_digest(digest)
                    {
                        return Err(invalid(format!(
                            "'{digest}' is not a sha256 digest (sha256:<64 hex digits>)"
                        )));
                    }
                    let launch = OciLaunch {
                        name: entry.name.clone(),
                        version: entry.version.trim().to_owned(),
                        reference: reference.clone(),
                        digest: digest.clone(),
                        base_dir: base_dir.to_path_buf(),
                    };
                    let transport: Arc<dyn ExtensionTransport> = match &factories.oci_launcher {
                        Some(launcher) => launcher(&launch).map_err(&invalid)?,
                        None => Arc::new(UnavailableTransport {
                            reason: "no OCI launcher is configured in this program".into(),
                        }),
                    };
                    let target = match digest {
                        Some(digest) => format!("{reference}@{digest}"),
                        None => reference.clone(),
                    };
                    ("oci", target, transport)
                }
            };
            let types = match (&entry.types, &entry.transport) {
                (Some(dir), _) => {
                    let dir = if dir.is_relative() {
                        base_dir.join(dir)
                    } else {
                        dir.clone()
                    };
                    Some(Arc::new(load_types(&dir).map_err(&invalid)?))
                }
                (None, TransportSpec::Builtin { builtin }) => {
                    factories.builtin_types.get(builtin).cloned()
                }
                (None, _) => None,
            };
            registry.register(RegisteredExtension {
                name: entry.name.clone(),
                version: entry.version.trim().to_owned(),
                matcher: VersionMatcher::parse(&entry.version),
                transport_kind,
                target,
                timeout: entry.timeout_seconds.map(Duration::from_secs),
                has_bearer_token,
                transport,
                types,
                fetched: tokio::sync::OnceCell::new(),
            });
        }
        Ok(registry)
    }

    /// The resource types of the extension serving `name` at `version`, when they are known (see
    /// [`RegisteredExtension::types`]).
    pub fn types(&self, name: &str, version: &str) -> Option<Arc<TypeSet>> {
        self.resolve(name, version)?.types().cloned()
    }

    /// [`Registry::types`], asking the extension for them first if it was not asked yet.
    pub async fn fetch_types(&self, name: &str, version: &str) -> Option<Arc<TypeSet>> {
        self.resolve(name, version)?.fetch_types().await
    }

    /// The extension serving `name` at `version`: exact matches first, then the first matching range.
    pub fn resolve(&self, name: &str, version: &str) -> Option<Arc<RegisteredExtension>> {
        let candidates = || {
            self.entries
                .iter()
                .filter(|entry| entry.name.eq_ignore_ascii_case(name))
        };
        candidates()
            .find(|entry| {
                matches!(entry.matcher, VersionMatcher::Exact(_)) && entry.matcher.matches(version)
            })
            .or_else(|| candidates().find(|entry| entry.matcher.matches(version)))
            .cloned()
    }

    /// All registrations, in order, for `cairn extension list`.
    pub fn list(&self) -> Vec<ExtensionListing> {
        self.entries.iter().map(|entry| entry.listing()).collect()
    }
}

/// Reads a types directory: its `index.json` and every file that references, by plain names inside it (the
/// type set refuses any other path before it is read).
pub fn load_types(dir: &Path) -> Result<TypeSet, String> {
    let index_path = dir.join("index.json");
    let index = std::fs::read_to_string(&index_path)
        .map_err(|error| format!("cannot read {}: {error}", index_path.display()))?;
    TypeSet::load(&index, |name| std::fs::read_to_string(dir.join(name)).ok())
        .map_err(|error| format!("the types in {} are not valid: {error}", dir.display()))
}

fn read_token(
    auth: Option<&AuthSpec>,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Redacted<String>>, String> {
    let Some(auth) = auth else { return Ok(None) };
    let sources = [
        auth.bearer_token.is_some(),
        auth.bearer_token_file.is_some(),
        auth.bearer_token_env.is_some(),
    ];
    if sources.iter().filter(|set| **set).count() > 1 {
        return Err("set only one of bearerToken, bearerTokenFile and bearerTokenEnv".into());
    }
    let token = if let Some(token) = &auth.bearer_token {
        token.clone()
    } else if let Some(file) = &auth.bearer_token_file {
        let path = if file.is_relative() {
            base_dir.join(file)
        } else {
            file.clone()
        };
        std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read the token file '{}': {error}", path.display()))?
            .trim()
            .to_owned()
    } else if let Some(variable) = &auth.bearer_token_env {
        env(variable)
            .ok_or_else(|| format!("the environment variable '{variable}' is not set"))?
            .trim()
            .to_owned()
    } else {
        return Ok(None);
    };
    if token.is_empty() {
        return Err("the bearer token is empty".into());
    }
    Ok(Some(Redacted::new(token)))
}

/// Whether `text` is `sha256:` and 64 lowercase hex digits.
fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

/// The URL for listings, without user info.
fn display_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

/// Stands in for a transport that cannot be built in this program (e.g. gRPC without a launcher).
struct UnavailableTransport {
    reason: String,
}

impl ExtensionTransport for UnavailableTransport {
    fn send(
        &self,
        _request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        let reason = self.reason.clone();
        Box::pin(async move { Err(TransportError::Unavailable { message: reason }) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factories() -> TransportFactories {
        let mut factories = TransportFactories::default();
        factories.builtins.insert(
            "local".into(),
            Arc::new(UnavailableTransport {
                reason: "test".into(),
            }) as Arc<dyn ExtensionTransport>,
        );
        factories
    }

    const FILE: &str = r#"{ "extensions": [
        { "name": "Acme", "version": "^1.2", "transport": { "kind": "http", "url": "http://u:p@127.0.0.1:1/ext" },
          "timeoutSeconds": 5, "auth": { "bearerTokenEnv": "ACME_TOKEN" } },
        { "name": "Acme", "version": "1.3.0", "transport": { "kind": "restDraft", "url": "http://127.0.0.1:2" } },
        { "name": "Local", "version": "1.0.0", "transport": { "kind": "builtin", "builtin": "local" } },
        { "name": "Dsc", "version": ">=0.1.0, <1.0.0", "transport": { "kind": "grpc", "binary": "bin/dsc" } },
        { "name": "Opaque", "version": "v2-beta", "transport": { "kind": "http", "url": "http://127.0.0.1:3" } },
        { "name": "Widgets", "version": "1.0.0", "transport": { "kind": "oci", "reference": "br:127.0.0.1:5000/ext/widgets:1.0.0" } }
    ] }"#;

    fn env(name: &str) -> Option<String> {
        (name == "ACME_TOKEN").then(|| "t0ken".to_owned())
    }

    #[test]
    fn entries_carry_types_from_their_directory_or_their_builtin() {
        let dir = tempfile::tempdir().unwrap();
        let types = dir.path().join("widgets-types");
        std::fs::create_dir(&types).unwrap();
        std::fs::write(
            types.join("index.json"),
            r##"{"resources":{"Widget@1.0.0":{"$ref":"types.json#/1"}}}"##,
        )
        .unwrap();
        std::fs::write(
            types.join("types.json"),
            r##"[{"$type":"ObjectType","name":"w","properties":{}},{"$type":"ResourceType","name":"Widget@1.0.0","body":{"$ref":"#/0"}}]"##,
        )
        .unwrap();
        let mut factories = factories();
        let builtin = cairn_extension_types::TypeBuilder::new("Local", "1.0.0").finish();
        factories
            .builtin_types
            .insert("local".into(), Arc::new(builtin));
        let file = r#"{ "extensions": [
            { "name": "Widgets", "version": "1.0.0", "transport": { "kind": "http", "url": "http://127.0.0.1:9" },
              "types": "widgets-types" },
            { "name": "Local", "version": "1.0.0", "transport": { "kind": "builtin", "builtin": "local" } },
            { "name": "Plain", "version": "1.0.0", "transport": { "kind": "http", "url": "http://127.0.0.1:9" } }
        ] }"#;
        let registry = Registry::from_json(file, dir.path(), &factories, &env).unwrap();
        let widgets = registry
            .types("widgets", "1.0.0")
            .expect("from the directory");
        assert!(widgets.resource("Widget", None, None).is_some());
        assert!(registry.types("Local", "1.0.0").is_some());
        assert!(registry.types("Plain", "1.0.0").is_none());

        // A directory that is missing or holds broken files refuses the entry, naming it.
        std::fs::write(types.join("types.json"), "[").unwrap();
        let error = Registry::from_json(file, dir.path(), &factories, &env).unwrap_err();
        assert!(
            matches!(&error, RegistryError::InvalidEntry { index: 0, .. }),
            "{error}"
        );
        let missing = file.replace("widgets-types", "nowhere");
        assert!(Registry::from_json(&missing, dir.path(), &factories, &env).is_err());
    }

    #[test]
    fn resolves_by_name_and_version() {
        let registry =
            Registry::from_json(FILE, Path::new("/etc/cairn"), &factories(), &env).unwrap();
        let cases = [
            ("acme", "1.2.5", Some(("Acme", "^1.2"))),
            ("Acme", "1.3.0", Some(("Acme", "1.3.0"))),
            ("Acme", "2.0.0", None),
            ("LOCAL", "1.0.0", Some(("Local", "1.0.0"))),
            ("Local", "1.0.1", None),
            ("Dsc", "0.9.9", Some(("Dsc", ">=0.1.0, <1.0.0"))),
            ("Opaque", "v2-beta", Some(("Opaque", "v2-beta"))),
            ("Opaque", "v2", None),
            ("Missing", "1.0.0", None),
        ];
        for (name, version, expected) in cases {
            let found = registry
                .resolve(name, version)
                .map(|entry| (entry.name().to_owned(), entry.version().to_owned()));
            assert_eq!(
                found,
                expected.map(|(n, v)| (n.to_owned(), v.to_owned())),
                "{name}@{version}"
            );
        }
    }

    #[test]
    fn list_hides_tokens_and_user_info() {
        let registry =
            Registry::from_json(FILE, Path::new("/etc/cairn"), &factories(), &env).unwrap();
        let listing = registry.list();
        assert_eq!(listing.len(), 6);
        assert_eq!(listing[5].transport, "oci");
        assert_eq!(listing[5].target, "br:127.0.0.1:5000/ext/widgets:1.0.0");
        assert_eq!(listing[0].target, "http://127.0.0.1:1/ext");
        assert!(listing[0].bearer_token);
        assert_eq!(listing[0].timeout_seconds, Some(5));
        assert_eq!(listing[3].transport, "grpc");
        assert_eq!(listing[3].target, "/etc/cairn/bin/dsc");
        let printed = format!("{listing:?} {registry:?}");
        assert!(
            !printed.contains("t0ken") && !printed.contains("u:p"),
            "{printed}"
        );
    }

    #[test]
    fn grpc_launcher_receives_the_resolved_binary() {
        let mut factories = factories();
        let launcher: GrpcLauncher = Arc::new(|launch: &GrpcLaunch| {
            assert_eq!(launch.binary, PathBuf::from("/etc/cairn/bin/dsc"));
            Ok(Arc::new(UnavailableTransport {
                reason: "launched".into(),
            }) as Arc<dyn ExtensionTransport>)
        });
        factories.grpc_launcher = Some(launcher);
        assert!(Registry::from_json(FILE, Path::new("/etc/cairn"), &factories, &env).is_ok());
    }

    #[test]
    fn rejects_bad_entries() {
        let cases = [
            (
                r#"{ "extensions": [ { "name": "A", "version": "1.0.0", "transport": { "kind": "builtin", "builtin": "nope" } } ] }"#,
                "no built-in",
            ),
            (
                r#"{ "extensions": [ { "name": "A", "version": "1.0.0", "transport": { "kind": "http", "url": "ftp://x" } } ] }"#,
                "not an absolute",
            ),
            (
                r#"{ "extensions": [ { "name": "A", "version": "1.0.0", "transport": { "kind": "http", "url": "http://x" }, "auth": { "bearerTokenEnv": "UNSET" } } ] }"#,
                "not set",
            ),
            (
                r#"{ "extensions": [ { "name": "A", "version": "1.0.0", "transport": { "kind": "http", "url": "http://x" }, "auth": { "bearerToken": "a", "bearerTokenEnv": "ACME_TOKEN" } } ] }"#,
                "only one",
            ),
            (
                r#"{ "extensions": [ { "name": "", "version": "1.0.0", "transport": { "kind": "http", "url": "http://x" } } ] }"#,
                "empty",
            ),
            (
                r#"{ "extensions": [ { "name": "W", "version": "1.0.0", "transport": { "kind": "oci", "reference": "oci://x/y:1" } } ] }"#,
                "must start with 'br:'",
            ),
            (
                r#"{ "extensions": [ { "name": "W", "version": "1.0.0", "transport": { "kind": "oci", "reference": "br:x/y:1", "digest": "sha256:12" } } ] }"#,
                "not a sha256 digest",
            ),
        ];
        for (text, expected) in cases {
            let error = Registry::from_json(text, Path::new("/"), &factories(), &env).unwrap_err();
            assert!(error.to_string().contains(expected), "{error}");
        }
        let error = Registry::from_json(
            r#"{ "extensions": [ { "name": 1 } ] }"#,
            Path::new("/"),
            &factories(),
            &env,
        )
        .unwrap_err();
        assert!(matches!(error, RegistryError::Parse { .. }), "{error}");
    }

    #[test]
    fn oci_launcher_receives_the_reference_and_pin() {
        let mut factories = factories();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let expected = digest.clone();
        let launcher: OciLauncher = Arc::new(move |launch: &OciLaunch| {
            assert_eq!(launch.name, "Widgets");
            assert_eq!(launch.reference, "br:127.0.0.1:5000/ext/widgets:1.0.0");
            assert_eq!(launch.digest.as_deref(), Some(expected.as_str()));
            assert_eq!(launch.base_dir, PathBuf::from("/etc/cairn"));
            Ok(Arc::new(UnavailableTransport {
                reason: "launched".into(),
            }) as Arc<dyn ExtensionTransport>)
        });
        factories.oci_launcher = Some(launcher);
        let text = format!(
            r#"{{ "extensions": [ {{ "name": "Widgets", "version": "1.0.0", "transport": {{ "kind": "oci", "reference": "br:127.0.0.1:5000/ext/widgets:1.0.0", "digest": "{digest}" }} }} ] }}"#
        );
        let registry =
            Registry::from_json(&text, Path::new("/etc/cairn"), &factories, &env).unwrap();
        assert!(registry.list()[0].target.ends_with(&digest));
        assert!(registry.resolve("widgets", "1.0.0").is_some());
    }

    #[test]
    fn token_file_is_read_relative_to_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "file-t0ken\n").unwrap();
        let text = r#"{ "extensions": [ { "name": "A", "version": "1.0.0", "transport": { "kind": "http", "url": "http://x" }, "auth": { "bearerTokenFile": "token" } } ] }"#;
        let path = dir.path().join("registry.json");
        std::fs::write(&path, text).unwrap();
        let registry = Registry::load(&path, &factories()).unwrap();
        assert!(registry.list()[0].bearer_token);
    }
}

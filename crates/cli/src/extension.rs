//! `cairn extension ...`: the extension registry, the conformance kit, the built-in extensions (Local,
//! PostgreSql, Kubernetes), and extensions as OCI artifacts (`pull`, `show`, `publish`, `lock`; registry entries
//! of kind `oci` and `bicepconfig.json` `extensions` beside the template, pinned by `cairn.lock.json`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use cairn_conformance::{Options, Profile, Protocol};
use cairn_extension_contract::ExtensionTransport;
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use cairn_host::http_transport::{HttpV2Transport, default_http_client};
use cairn_host::{ExtensionListing, GrpcLaunch, OciLaunch, Redacted, Registry, TransportFactories};
use cairn_oci::{ArtifactRef, OciSource, OciTransport, Pin};
use clap::{Args, Subcommand, ValueEnum};

use crate::output::{Format, OutputArgs, TableView};
use crate::query::Query;
use cairn_template::resource_types::ExtensionTypes;
use cairn_template::resource_types::types::TypeSet;
use serde_json::Value;

#[derive(Subcommand)]
pub(crate) enum ExtensionCommand {
    /// List the registered extensions (the built-in Local 1.0.0, PostgreSql 1.0.0 and Kubernetes are always
    /// there).
    List(ListArgs),
    /// Run the conformance kit against an extension and print a pass/fail table.
    Conformance(Box<ConformanceArgs>),
    /// Serve the built-in Local extension over HTTP v2 and gRPC.
    ServeLocal(ServeLocalArgs),
    /// Pull an extension artifact (`br:REGISTRY/REPO:TAG`, `@sha256:...`, or `br/ALIAS:PATH:TAG`) into the cache
    /// under $CAIRN_HOME/oci, checking every digest, and print what it holds.
    Pull(crate::extension_oci::PullArgs),
    /// Show an extension artifact's manifest digest, platforms and types (`index.json` settings) without its
    /// binary.
    Show(crate::extension_oci::PullArgs),
    /// Publish an extension as the OCI artifact Bicep's `publish-extension` writes: a types layer from
    /// index.json and one binary per platform, to `br:REGISTRY/REPO:TAG` or an OCI layout directory.
    Publish(crate::extension_oci::PublishArgs),
    /// Pin the OCI extensions a template uses to their manifest digests in cairn.lock.json beside it.
    Lock(crate::extension_oci::LockArgs),
}

#[derive(Args)]
pub(crate) struct ListArgs {
    /// Registry file [default: $CAIRN_EXTENSIONS, else $CAIRN_HOME/extensions.json].
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,
    /// Output format [default: table; json with --query].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    output: Option<Format>,
    /// JMESPath query applied to the listing before it is printed, e.g. `[].name`.
    #[arg(long, value_name = "JMESPATH", value_parser = Query::parse)]
    query: Option<Query>,
}

#[derive(Args)]
// `--version` names the extension version here, not cairn's.
#[command(disable_version_flag = true)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["url", "binary", "builtin"]))]
pub(crate) struct ConformanceArgs {
    /// Base URL of an HTTP v2 extension, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    url: Option<String>,
    /// A local gRPC extension binary (started with --socket).
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
    /// A built-in extension, in process.
    #[arg(long, value_enum, ignore_case = true)]
    builtin: Option<Builtin>,
    /// Conformance profile: a JSON file, or `local` for the Local extension's shipped profile.
    #[arg(long, value_name = "FILE|local")]
    profile: Option<String>,
    /// Extension version to call (overrides the profile).
    #[arg(long)]
    version: Option<String>,
    /// Resource type of the sample resource (overrides the profile).
    #[arg(long = "type", value_name = "TYPE")]
    resource_type: Option<String>,
    /// API version of the sample resource.
    #[arg(long)]
    api_version: Option<String>,
    /// Sample resource properties as JSON.
    #[arg(long, value_name = "JSON")]
    properties: Option<String>,
    /// Properties for the update step as JSON (same identity).
    #[arg(long, value_name = "JSON")]
    updated_properties: Option<String>,
    /// Properties the extension must reject, as JSON.
    #[arg(long, value_name = "JSON")]
    invalid_properties: Option<String>,
    /// Extension config as JSON (may contain secrets; never printed).
    #[arg(long, value_name = "JSON")]
    config: Option<String>,
    /// A config property that is secret and must not be echoed (repeatable).
    #[arg(long = "secret-config", value_name = "NAME")]
    secret_config: Vec<String>,
    /// Environment variable holding a bearer token for --url.
    #[arg(long, value_name = "VAR")]
    bearer_token_env: Option<String>,
    /// Output format [default: the kit's table with a summary line; json with --query].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    output: Option<Format>,
    /// JMESPath query applied to the results (`[{check, result, detail}]`), e.g. `[?result=='fail'].check`.
    #[arg(long, value_name = "JMESPATH", value_parser = Query::parse)]
    query: Option<Query>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Builtin {
    Local,
    /// Needs `--profile FILE` naming a server (see `docs/extensions/postgresql.md`).
    Postgresql,
    /// Needs `--profile FILE` naming a cluster's kubeconfig (see `docs/extensions/kubernetes.md`).
    Kubernetes,
}

/// An extension built into this program: its registry key (`"builtin": KEY`), name, version and transport.
struct BuiltinExtension {
    key: &'static str,
    name: &'static str,
    version: &'static str,
    transport: fn() -> cairn_extension_sdk::InProcessTransport,
    /// Its resource types, which bodies are checked against before deploy.
    types: fn() -> TypeSet,
}

const BUILTINS: &[BuiltinExtension] = &[
    BuiltinExtension {
        key: "local",
        name: cairn_ext_local::NAME,
        version: cairn_ext_local::VERSION,
        transport: cairn_ext_local::in_process_transport,
        types: cairn_ext_local::types,
    },
    BuiltinExtension {
        key: "postgresql",
        name: cairn_ext_postgresql::NAME,
        version: cairn_ext_postgresql::VERSION,
        transport: cairn_ext_postgresql::in_process_transport,
        types: cairn_ext_postgresql::types,
    },
    // Bicep's built-in `extension kubernetes` (1.0.0) and the OCI Kubernetes types packages (one version per
    // Kubernetes release): one extension, registered for both.
    BuiltinExtension {
        key: "kubernetes",
        name: cairn_ext_kubernetes::NAME,
        version: cairn_ext_kubernetes::VERSION,
        transport: cairn_ext_kubernetes::in_process_transport,
        types: cairn_ext_kubernetes::types,
    },
    BuiltinExtension {
        key: "kubernetes",
        name: cairn_ext_kubernetes::NAME,
        version: cairn_ext_kubernetes::OCI_VERSION_RANGE,
        transport: cairn_ext_kubernetes::in_process_transport,
        types: cairn_ext_kubernetes::types,
    },
];

#[derive(Args)]
#[command(group = clap::ArgGroup::new("listener").required(true).args(["http", "listen", "socket"]))]
pub(crate) struct ServeLocalArgs {
    /// Serve HTTP v2 and gRPC on 127.0.0.1:PORT (0 = any free port).
    #[arg(long, value_name = "PORT")]
    http: Option<u16>,
    /// Serve HTTP v2 and gRPC on ADDR, e.g. 0.0.0.0:8080.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Serve gRPC (and HTTP v2) on a Unix domain socket.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
}

pub(crate) fn run(cmd: ExtensionCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ExtensionCommand::List(args) => list(&args),
        ExtensionCommand::Conformance(args) => conformance(*args),
        ExtensionCommand::ServeLocal(args) => Ok(serve_local(args)),
        ExtensionCommand::Pull(args) => crate::extension_oci::pull(&args, true),
        ExtensionCommand::Show(args) => crate::extension_oci::pull(&args, false),
        ExtensionCommand::Publish(args) => crate::extension_oci::publish(&args),
        ExtensionCommand::Lock(args) => crate::extension_oci::lock(&args),
    }
}

/// The transport of a built-in: Local confined to `local` when given (a server), else as the user runs it.
fn builtin_transport(
    builtin: &BuiltinExtension,
    local: Option<&Arc<cairn_ext_local::Confinement>>,
) -> cairn_extension_sdk::InProcessTransport {
    match local {
        Some(confinement) if builtin.key == "local" => {
            cairn_ext_local::confined_in_process_transport(Arc::clone(confinement))
        }
        _ => (builtin.transport)(),
    }
}

/// The transports this program can build beyond HTTP: the built-in extensions in process (Local confined
/// to `local` when given) and a gRPC launcher for local extension binaries. The host needs these to load a
/// registry.
pub(crate) fn transport_factories(
    local: Option<&Arc<cairn_ext_local::Confinement>>,
) -> TransportFactories {
    let mut factories = TransportFactories::default();
    for builtin in BUILTINS {
        factories.builtins.insert(
            builtin.key.to_owned(),
            Arc::new(builtin_transport(builtin, local)),
        );
        factories
            .builtin_types
            .insert(builtin.key.to_owned(), Arc::new((builtin.types)()));
    }
    factories.grpc_launcher = Some(Arc::new(|launch: &GrpcLaunch| {
        let mut spec = LaunchSpec::new(&launch.binary);
        spec.args = launch.args.clone();
        Ok(Arc::new(LocalProcessTransport::new(spec)) as Arc<dyn ExtensionTransport>)
    }));
    factories.oci_launcher = Some(Arc::new(|launch: &OciLaunch| {
        let project = crate::extension_oci::project();
        let config = project.and_then(|p| p.bicep_config.as_ref());
        let reference =
            ArtifactRef::parse(&launch.reference, config).map_err(|error| error.to_string())?;
        // An entry's own digest pins it; otherwise the lock file beside the template, when a command has one.
        let pin = match (&launch.digest, project) {
            (Some(digest), _) => Pin::Digest(digest.clone()),
            (None, Some(project)) => Pin::LockFile(project.lock_path()),
            (None, None) => Pin::None,
        };
        let source = OciSource {
            name: launch.name.clone(),
            version: launch.version.clone(),
            reference,
            pin,
        };
        Ok(
            Arc::new(OciTransport::new(source, crate::extension_oci::client(&[])))
                as Arc<dyn ExtensionTransport>,
        )
    }));
    factories
}

/// The registry the engine uses: `flag`, else `$CAIRN_EXTENSIONS`, else `<data dir>/extensions.json` when the
/// store lives in a data directory and the file exists, with each built-in extension added when the file does not
/// register its name and version. `local` confines the built-in Local extension (`cairn serve`); the in-process
/// commands pass `None`, as Local works on the user's own files there.
pub(crate) fn load_registry(
    flag: Option<&Path>,
    data_dir: Option<&Path>,
    local: Option<&Arc<cairn_ext_local::Confinement>>,
) -> anyhow::Result<Registry> {
    let named = flag.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("CAIRN_EXTENSIONS")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    });
    let default = data_dir
        .map(|dir| dir.join("extensions.json"))
        .filter(|file| file.exists());
    let path = named.or(default);
    let mut registry = match path {
        Some(path) => Registry::load(&path, &transport_factories(local))
            .with_context(|| format!("cannot load the extension registry {}", path.display()))?,
        None => Registry::new(),
    };
    // The template's `bicepconfig.json` names artifacts by alias: after the registry file (an operator's own
    // entries win), before the built-ins (a project may bring its own version of one).
    if let Some(project) = crate::extension_oci::project() {
        for (name, version, source) in project.oci_sources()? {
            if registry.resolve(&name, &version).is_none() {
                let shown = source.reference.to_string();
                let client = crate::extension_oci::client(&[]);
                registry.register(
                    cairn_host::RegisteredExtension::new(
                        &name,
                        &version,
                        Arc::new(OciTransport::new(source, client)),
                    )
                    .with_description("oci", shown),
                );
            }
        }
    }
    for builtin in BUILTINS {
        if registry.resolve(builtin.name, builtin.version).is_none() {
            registry.register(
                cairn_host::RegisteredExtension::new(
                    builtin.name,
                    builtin.version,
                    Arc::new(builtin_transport(builtin, local)),
                )
                .with_types(Arc::new((builtin.types)())),
            );
        }
    }
    Ok(registry)
}

/// The extensions' resource types as `template validate` checks bodies against them: those of the registry the
/// engine would use (`$CAIRN_EXTENSIONS`, with the built-ins added), so a template validates as it deploys.
pub(crate) struct RegistryTypes(pub(crate) Registry);

impl ExtensionTypes for RegistryTypes {
    fn types(&self, name: &str, version: &str) -> Option<Arc<TypeSet>> {
        self.0.types(name, version)
    }
}

/// The registry's types for `template`'s extensions, the gRPC extensions among them asked for theirs
/// (`GetTypeFiles`), as a deployment asks.
pub(crate) fn types_for_validation(template: &Value) -> anyhow::Result<RegistryTypes> {
    let registry = load_registry(None, None, None)?;
    let declared: Vec<(String, String)> = ["extensions", "imports"]
        .into_iter()
        .filter_map(|section| template.get(section)?.as_object())
        .flat_map(|section| section.values())
        .filter_map(|declaration| {
            let name = declaration
                .get("name")
                .or_else(|| declaration.get("provider"))?
                .as_str()?;
            Some((
                name.to_owned(),
                declaration.get("version")?.as_str()?.to_owned(),
            ))
        })
        .filter(|(name, version)| registry.types(name, version).is_none())
        .collect();
    if !declared.is_empty() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(async {
            for (name, version) in &declared {
                registry.fetch_types(name, version).await;
            }
        });
    }
    Ok(RegistryTypes(registry))
}

/// The registry file: `--registry`, else `$CAIRN_EXTENSIONS`, else `$CAIRN_HOME/extensions.json`
/// (`$CAIRN_HOME` defaults to `~/.cairn`). The boolean says whether it was named explicitly.
fn registry_path(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(PathBuf, bool)> {
    if let Some(path) = flag {
        return Some((path.to_path_buf(), true));
    }
    if let Some(path) = env("CAIRN_EXTENSIONS").filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(path), true));
    }
    let home = env("CAIRN_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".cairn")))?;
    Some((home.join("extensions.json"), false))
}

/// A built-in's row, listed unless the registry registers the same name and version itself.
fn builtin_listing(builtin: &BuiltinExtension) -> ExtensionListing {
    ExtensionListing {
        name: builtin.name.to_owned(),
        version: builtin.version.to_owned(),
        transport: "builtin".to_owned(),
        target: builtin.key.to_owned(),
        timeout_seconds: None,
        bearer_token: false,
    }
}

fn load_listings(flag: Option<&Path>) -> anyhow::Result<Vec<ExtensionListing>> {
    let mut listings = Vec::new();
    if let Some((path, explicit)) = registry_path(flag, &|name| std::env::var(name).ok())
        && (explicit || path.exists())
    {
        let registry = Registry::load(&path, &transport_factories(None))
            .with_context(|| format!("cannot load the extension registry {}", path.display()))?;
        listings = registry.list();
    }
    for (position, builtin) in BUILTINS.iter().enumerate() {
        let registered = listings
            .iter()
            .any(|l| l.name.eq_ignore_ascii_case(builtin.name) && l.version == builtin.version);
        if !registered {
            listings.insert(position.min(listings.len()), builtin_listing(builtin));
        }
    }
    Ok(listings)
}

/// Columns of `extension list -o table`, over [`listing_rows`].
const LISTING_COLUMNS: &[(&str, &str)] = &[
    ("Name", "/name"),
    ("Version", "/version"),
    ("Transport", "/transport"),
    ("Target", "/target"),
    ("Timeout", "/timeout"),
    ("Auth", "/auth"),
];

/// Listings flattened for a table: the timeout with its unit, the authentication by kind, `-` for none.
fn listing_rows(listings: &[ExtensionListing]) -> Vec<Value> {
    listings
        .iter()
        .map(|l| {
            serde_json::json!({
                "name": l.name,
                "version": l.version,
                "transport": l.transport,
                "target": l.target,
                "timeout": l.timeout_seconds.map_or_else(|| "-".to_owned(), |s| format!("{s}s")),
                "auth": if l.bearer_token { "bearer" } else { "-" },
            })
        })
        .collect()
}

fn list(args: &ListArgs) -> anyhow::Result<ExitCode> {
    let listings = load_listings(args.registry.as_deref())?;
    let out = OutputArgs {
        output: args.output,
        query: args.query.clone(),
    };
    let default = if args.query.is_some() {
        Format::Json
    } else {
        Format::Table
    };
    let value = serde_json::to_value(&listings)?;
    Ok(
        match out.print(
            default,
            &value,
            TableView::Rows(listing_rows(&listings), LISTING_COLUMNS),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => failure.report(),
        },
    )
}

fn parse_json(flag: &str, text: &str) -> anyhow::Result<Value> {
    // The message names the flag and position only: the text may hold secrets.
    serde_json::from_str(text).map_err(|err| {
        anyhow::anyhow!(
            "{flag} is not valid JSON (line {}, column {})",
            err.line(),
            err.column()
        )
    })
}

/// Builds the profile from `--profile` and the overriding flags; `${tempDir}` becomes `temp_dir`.
fn build_profile(args: &ConformanceArgs, temp_dir: &Path) -> anyhow::Result<Profile> {
    let temp = temp_dir
        .to_str()
        .context("the temporary directory path is not UTF-8")?;
    let variables = [("tempDir", temp)];
    // The built-in Local extension needs no profile: its own ships with it.
    let shipped_local = args.profile.as_deref() == Some("local")
        || (args.profile.is_none()
            && args.resource_type.is_none()
            && matches!(args.builtin, Some(Builtin::Local)));
    let mut profile = match args.profile.as_deref() {
        _ if shipped_local => Profile::parse(cairn_ext_local::CONFORMANCE_PROFILE, &variables)?,
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the profile {file}"))?;
            Profile::parse(&text, &variables).with_context(|| format!("in {file}"))?
        }
        None => match (&args.resource_type, &args.properties) {
            (Some(resource_type), Some(properties)) => Profile::new(
                args.version.clone().unwrap_or_default(),
                resource_type.clone(),
                parse_json("--properties", properties)?,
            ),
            _ => bail!("give --profile FILE (or --profile local), or --type and --properties"),
        },
    };
    if let Some(version) = &args.version {
        profile.extension_version = version.clone();
    }
    if profile.extension_version.is_empty() {
        if args.binary.is_none() {
            bail!("give --version (or a profile with extensionVersion)");
        }
        // gRPC carries no extension version; the transport never sends it.
        profile.extension_version = "0.0.0".to_owned();
    }
    if let Some(resource_type) = &args.resource_type {
        profile.resource_type = resource_type.clone();
    }
    if let Some(api_version) = &args.api_version {
        profile.api_version = Some(api_version.clone());
    }
    if let Some(properties) = &args.properties {
        profile.properties = parse_json("--properties", properties)?;
    }
    if let Some(updated) = &args.updated_properties {
        profile.updated_properties = Some(parse_json("--updated-properties", updated)?);
    }
    if let Some(invalid) = &args.invalid_properties {
        profile.invalid_properties = Some(parse_json("--invalid-properties", invalid)?);
    }
    if let Some(config) = &args.config {
        profile.config = Some(parse_json("--config", config)?);
    }
    profile
        .secret_config_properties
        .extend(args.secret_config.iter().cloned());
    Ok(profile)
}

fn conformance(args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    let temp_dir = tempfile::Builder::new()
        .prefix("cairn-conformance-")
        .tempdir()?;
    let profile = build_profile(&args, temp_dir.path())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        if let Some(url) = &args.url {
            let token =
                match &args.bearer_token_env {
                    Some(variable) => Some(Redacted::new(std::env::var(variable).with_context(
                        || format!("the environment variable {variable} is not set"),
                    )?)),
                    None => None,
                };
            let transport = HttpV2Transport::new(default_http_client()?, url, token)?;
            Ok::<_, anyhow::Error>(
                cairn_conformance::run(&transport, &profile, &Options::new(Protocol::Http)).await,
            )
        } else if let Some(binary) = &args.binary {
            let transport = LocalProcessTransport::new(LaunchSpec::new(binary));
            transport
                .start()
                .await
                .with_context(|| format!("cannot start {}", binary.display()))?;
            let report =
                cairn_conformance::run(&transport, &profile, &Options::new(Protocol::Grpc)).await;
            transport.shutdown().await;
            Ok(report)
        } else {
            let transport = match args.builtin {
                Some(Builtin::Postgresql) => cairn_ext_postgresql::in_process_transport(),
                Some(Builtin::Kubernetes) => cairn_ext_kubernetes::in_process_transport(),
                _ => cairn_ext_local::in_process_transport(),
            };
            Ok(cairn_conformance::run(&transport, &profile, &Options::new(Protocol::Http)).await)
        }
    })?;
    if args.query.is_none() && matches!(args.output, None | Some(Format::Table)) {
        print!("{}", report.render_table());
    } else {
        let out = OutputArgs {
            output: args.output,
            query: args.query.clone(),
        };
        if let Err(failure) = out.print(Format::Json, &report_rows(&report), TableView::Auto) {
            return Ok(failure.report());
        }
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The conformance results as `[{check, result: pass|fail|skip, detail}]`.
fn report_rows(report: &cairn_conformance::Report) -> Value {
    let rows = report.results.iter().map(|r| {
        let result = match r.outcome {
            cairn_conformance::Outcome::Pass => "pass",
            cairn_conformance::Outcome::Fail => "fail",
            cairn_conformance::Outcome::Skip => "skip",
        };
        serde_json::json!({"check": r.name, "result": result, "detail": r.detail})
    });
    Value::Array(rows.collect())
}

fn serve_local(args: ServeLocalArgs) -> ExitCode {
    let mut argv = Vec::new();
    if let Some(port) = args.http {
        argv.extend(["--http".to_owned(), port.to_string()]);
    }
    if let Some(addr) = args.listen {
        argv.extend(["--listen".to_owned(), addr]);
    }
    if let Some(socket) = args.socket {
        argv.extend(["--socket".to_owned(), socket.display().to_string()]);
    }
    cairn_extension_sdk::serve_main_with_args(cairn_ext_local::extension(), argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    /// The subcommands as `cairn` mounts them (with cairn's propagated `--version`).
    fn command() -> clap::Command {
        use clap::Subcommand as _;
        ExtensionCommand::augment_subcommands(
            clap::Command::new("extension")
                .version("0")
                .propagate_version(true),
        )
    }

    #[test]
    fn command_line_is_consistent() {
        command().debug_assert();
        let matches = command()
            .try_get_matches_from([
                "extension",
                "conformance",
                "--url",
                "http://x",
                "--version",
                "1.0.0",
                "--profile",
                "local",
            ])
            .unwrap();
        let (name, sub) = matches.subcommand().unwrap();
        assert_eq!(
            (name, sub.get_one::<String>("version").map(String::as_str)),
            ("conformance", Some("1.0.0"))
        );
        assert!(
            command()
                .try_get_matches_from(["extension", "conformance", "--profile", "local"])
                .is_err()
        );
        assert!(
            command()
                .try_get_matches_from(["extension", "serve-local"])
                .is_err()
        );
    }

    #[test]
    fn profile_flags_override_the_profile() {
        let temp = tempfile::tempdir().unwrap();
        let matches = command()
            .try_get_matches_from([
                "extension",
                "conformance",
                "--builtin",
                "local",
                "--profile",
                "local",
                "--version",
                "9.9.9",
                "--properties",
                r#"{"path":"x","content":"y"}"#,
                "--secret-config",
                "token",
            ])
            .unwrap();
        let ExtensionCommand::Conformance(args) =
            <ExtensionCommand as clap::FromArgMatches>::from_arg_matches(&matches).unwrap()
        else {
            panic!("not conformance");
        };
        let profile = build_profile(&args, temp.path()).unwrap();
        assert_eq!(profile.extension_version, "9.9.9");
        assert_eq!(
            profile.properties,
            serde_json::json!({ "path": "x", "content": "y" })
        );
        assert_eq!(
            profile.config.unwrap()["rootDirectory"],
            temp.path().to_str().unwrap()
        );
        assert_eq!(profile.secret_config_properties, ["token"]);
    }

    fn conformance_args(argv: &[&str]) -> ConformanceArgs {
        let matches = command().try_get_matches_from(argv).unwrap();
        match <ExtensionCommand as clap::FromArgMatches>::from_arg_matches(&matches).unwrap() {
            ExtensionCommand::Conformance(args) => *args,
            _ => panic!("not conformance"),
        }
    }

    #[test]
    fn builtin_local_defaults_to_its_profile_and_grpc_needs_no_version() {
        let temp = tempfile::tempdir().unwrap();
        let local = build_profile(
            &conformance_args(&["extension", "conformance", "--builtin", "local"]),
            temp.path(),
        );
        assert_eq!(local.unwrap().resource_type, "File");
        let grpc = conformance_args(&[
            "extension",
            "conformance",
            "--binary",
            "/x",
            "--type",
            "T",
            "--properties",
            "{}",
        ]);
        assert_eq!(
            build_profile(&grpc, temp.path()).unwrap().extension_version,
            "0.0.0"
        );
        let http = conformance_args(&[
            "extension",
            "conformance",
            "--url",
            "http://x",
            "--type",
            "T",
            "--properties",
            "{}",
        ]);
        assert!(build_profile(&http, temp.path()).is_err());
        let bad = conformance_args(&[
            "extension",
            "conformance",
            "--url",
            "http://x",
            "--type",
            "T",
            "--properties",
            "{",
        ]);
        let message = build_profile(&bad, temp.path()).unwrap_err().to_string();
        assert!(
            message.contains("--properties is not valid JSON"),
            "{message}"
        );
    }

    #[test]
    fn registry_path_precedence() {
        let flag = Path::new("/flag.json");
        assert_eq!(
            registry_path(Some(flag), &env_of(&[("CAIRN_EXTENSIONS", "/env.json")])),
            Some((flag.into(), true))
        );
        assert_eq!(
            registry_path(
                None,
                &env_of(&[("CAIRN_EXTENSIONS", "/env.json"), ("CAIRN_HOME", "/h")])
            ),
            Some(("/env.json".into(), true))
        );
        assert_eq!(
            registry_path(None, &env_of(&[("CAIRN_HOME", "/h")])),
            Some(("/h/extensions.json".into(), false))
        );
        assert_eq!(
            registry_path(None, &env_of(&[("HOME", "/home/u")])),
            Some(("/home/u/.cairn/extensions.json".into(), false))
        );
        assert_eq!(registry_path(None, &env_of(&[])), None);
    }

    #[test]
    fn every_builtin_is_registered_without_a_registry_file() {
        let home = tempfile::tempdir().unwrap();
        let registry = load_registry(None, Some(home.path()), None).unwrap();
        for (name, version) in [
            ("Local", "1.0.0"),
            ("PostgreSql", "1.0.0"),
            ("Kubernetes", "1.0.0"),
            ("Kubernetes", "1.33.0"),
            ("kubernetes", "1.37.0"),
        ] {
            assert!(
                registry.resolve(name, version).is_some(),
                "{name} {version}"
            );
        }
        assert!(registry.resolve("Kubernetes", "2.0.0").is_none());
        let factories = transport_factories(None);
        assert!(factories.builtins.contains_key("postgresql"));
        assert!(factories.builtins.contains_key("kubernetes"));
    }

    #[test]
    fn listing_table_aligns_columns() {
        let mut other = builtin_listing(&BUILTINS[0]);
        other.name = "Kubernetes".into();
        other.transport = "http".into();
        other.target = "https://k8s.example/".into();
        other.timeout_seconds = Some(30);
        other.bearer_token = true;
        let rows = listing_rows(&[builtin_listing(&BUILTINS[0]), other]);
        assert_eq!(
            crate::output::table(&rows, LISTING_COLUMNS),
            "Name        Version    Transport    Target                Timeout    Auth\n\
             ----------  ---------  -----------  --------------------  ---------  ------\n\
             Local       1.0.0      builtin      local                 -          -\n\
             Kubernetes  1.0.0      http         https://k8s.example/  30s        bearer"
        );
    }
}

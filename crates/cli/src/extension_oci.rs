//! `cairn extension pull | show | publish | lock`, and what the in-process commands know of OCI extensions: the
//! template a command runs (its `bicepconfig.json` and the `cairn.lock.json` beside it) and the client every OCI
//! extension pulls through (cache under `$CAIRN_HOME/oci`, the registry policy from the environment).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::{Context, bail};
use cairn_host::registry::{RegistryFile, TransportSpec, VersionMatcher};
use cairn_oci::{
    Artifact, ArtifactRef, BicepConfig, Cache, OciClient, OciSource, Pin, RegistryPolicy,
    TypesPackage, media,
};
use clap::Args;
use serde_json::{Value, json};

use crate::output::{Failure, Format, OutputArgs, TableView};
use crate::query::Query;

/// The template a command runs, as far as OCI extensions care.
#[derive(Debug)]
pub(crate) struct Project {
    /// The template's directory: `cairn.lock.json` lives here; `bicepconfig.json` here or above.
    pub(crate) dir: PathBuf,
    /// The nearest `bicepconfig.json`, if any.
    pub(crate) bicep_config: Option<BicepConfig>,
    /// The template's extensions: (alias, name, version).
    pub(crate) extensions: Vec<(String, String, String)>,
}

static PROJECT: OnceLock<Project> = OnceLock::new();

/// Records the template this command runs (the first one read; a command runs one template).
pub(crate) fn set_project(dir: &Path, template: &Value) -> Result<(), Failure> {
    if PROJECT.get().is_some() {
        return Ok(());
    }
    let project = Project::read(dir, template).map_err(|e| Failure::usage(format!("{e:#}")))?;
    let _ = PROJECT.set(project);
    Ok(())
}

/// The template this command runs, when it has one.
pub(crate) fn project() -> Option<&'static Project> {
    PROJECT.get()
}

impl Project {
    fn read(dir: &Path, template: &Value) -> anyhow::Result<Self> {
        let bicep_config = BicepConfig::find(dir)?.map(|(_, config)| config);
        Ok(Self {
            dir: dir.to_path_buf(),
            bicep_config,
            extensions: template_extensions(template),
        })
    }

    /// `cairn.lock.json` beside the template.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.dir.join(cairn_oci::lock::FILE_NAME)
    }

    /// The template's extensions that `bicepconfig.json` maps to an OCI artifact, pinned by the lock file.
    pub(crate) fn oci_sources(&self) -> anyhow::Result<Vec<(String, String, OciSource)>> {
        let Some(config) = &self.bicep_config else {
            return Ok(Vec::new());
        };
        let mut sources = Vec::new();
        for (alias, name, version) in &self.extensions {
            if let Some(text) = config.extension_reference(alias) {
                let reference = ArtifactRef::parse(text, Some(config))
                    .with_context(|| format!("bicepconfig.json extensions.{alias}"))?;
                let source = OciSource {
                    name: name.clone(),
                    version: version.clone(),
                    reference,
                    pin: Pin::LockFile(self.lock_path()),
                };
                sources.push((name.clone(), version.clone(), source));
            }
        }
        Ok(sources)
    }
}

/// (alias, name, version) of a template's `extensions` (and the older `imports`, `provider` naming it).
fn template_extensions(template: &Value) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for (section, name_key) in [("extensions", "name"), ("imports", "provider")] {
        let Some(entries) = template.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (alias, entry) in entries {
            let name = entry
                .get(name_key)
                .or_else(|| entry.get("name"))
                .and_then(Value::as_str);
            let version = entry.get("version").and_then(Value::as_str);
            if let (Some(name), Some(version)) = (name, version) {
                found.push((alias.clone(), name.to_owned(), version.to_owned()));
            }
        }
    }
    found
}

/// The OCI client of this process: cache under `$CAIRN_HOME/oci`, trusted and insecure registries from the
/// environment plus `insecure`.
pub(crate) fn client(insecure: &[String]) -> OciClient {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let home = crate::local::cairn_home().unwrap_or_else(|_| std::env::temp_dir().join("cairn"));
    let mut policy = RegistryPolicy::from_env(&env);
    for registry in insecure {
        policy.allow_insecure(registry);
    }
    OciClient::new(Cache::new(home.join("oci")), policy)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn print(output: Option<Format>, query: Option<Query>, value: &Value) -> ExitCode {
    let out = OutputArgs { output, query };
    match out.print(Format::Json, value, TableView::Auto) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

#[derive(Args)]
pub(crate) struct PullArgs {
    /// The artifact: `br:REGISTRY/REPO:TAG`, `br:REGISTRY/REPO@sha256:...`, or `br/ALIAS:PATH:TAG` (aliases from
    /// the bicepconfig.json in this directory or above).
    #[arg(value_name = "REFERENCE")]
    reference: String,
    /// A registry reached over plain HTTP (repeatable; loopback registries always are).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registry: Vec<String>,
    /// Output format [default: json].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    output: Option<Format>,
    /// JMESPath query applied to the result.
    #[arg(long, value_name = "JMESPATH", value_parser = Query::parse)]
    query: Option<Query>,
}

pub(crate) fn pull(args: &PullArgs, with_binary: bool) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let config = BicepConfig::find(&cwd)?.map(|(_, config)| config);
    let reference = ArtifactRef::parse(&args.reference, config.as_ref())?;
    let client = client(&args.insecure_registry);
    // `show` asks for no platform, so no binary is fetched.
    let platform = if with_binary {
        media::current_platform().unwrap_or("unknown")
    } else {
        ""
    };
    let pulled = runtime()?.block_on(client.pull(&reference, platform))?;
    let mut value = json!({
        "reference": pulled.reference.to_string(),
        "digest": pulled.digest,
        "artifactType": pulled.manifest.manifest.artifact_type,
        "annotations": pulled.manifest.manifest.annotations,
        "localDeployEnabled": pulled.config.local_deploy_enabled.unwrap_or(false),
        "platforms": pulled.manifest.binaries.keys().collect::<Vec<_>>(),
        "types": {
            "files": pulled.types.files.keys().collect::<Vec<_>>(),
            "settings": pulled.types.settings(),
        },
    });
    if with_binary {
        value["binary"] = json!(pulled.binary);
    }
    Ok(print(args.output, args.query.clone(), &value))
}

#[derive(Args)]
pub(crate) struct PublishArgs {
    /// The types: index.json (with every file it references, e.g. types.json, beside it). Without it, the
    /// binary for this platform is asked for its types (GetTypeFiles), as `bicep publish-extension` does.
    #[arg(value_name = "INDEX_JSON")]
    index: Option<PathBuf>,
    /// Where to publish: `br:REGISTRY/REPO:TAG`, or a directory (an OCI image layout, tagged with the
    /// version in index.json's settings, else `latest`).
    #[arg(long, value_name = "br:REF|DIR")]
    target: String,
    /// The extension binary for linux-x64.
    #[arg(long = "bin-linux-x64", value_name = "FILE")]
    bin_linux_x64: Option<PathBuf>,
    /// The extension binary for linux-arm64.
    #[arg(long = "bin-linux-arm64", value_name = "FILE")]
    bin_linux_arm64: Option<PathBuf>,
    /// The extension binary for osx-x64.
    #[arg(long = "bin-osx-x64", value_name = "FILE")]
    bin_osx_x64: Option<PathBuf>,
    /// The extension binary for osx-arm64.
    #[arg(long = "bin-osx-arm64", value_name = "FILE")]
    bin_osx_arm64: Option<PathBuf>,
    /// The extension binary for win-x64.
    #[arg(long = "bin-win-x64", value_name = "FILE")]
    bin_win_x64: Option<PathBuf>,
    /// The extension binary for win-arm64.
    #[arg(long = "bin-win-arm64", value_name = "FILE")]
    bin_win_arm64: Option<PathBuf>,
    /// Overwrite the tag if it exists.
    #[arg(long)]
    force: bool,
    /// A registry reached over plain HTTP (repeatable; loopback registries always are).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registry: Vec<String>,
    /// Output format [default: json].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    output: Option<Format>,
}

pub(crate) fn publish(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    let flags = [
        ("linux-x64", &args.bin_linux_x64),
        ("linux-arm64", &args.bin_linux_arm64),
        ("osx-x64", &args.bin_osx_x64),
        ("osx-arm64", &args.bin_osx_arm64),
        ("win-x64", &args.bin_win_x64),
        ("win-arm64", &args.bin_win_arm64),
    ];
    let mut binaries = Vec::new();
    for (platform, file) in flags {
        if let Some(file) = file {
            let data = std::fs::read(file)
                .with_context(|| format!("cannot read --bin-{platform} {}", file.display()))?;
            binaries.push((platform.to_owned(), data));
        }
    }
    let types = match &args.index {
        Some(index) => TypesPackage::from_index(index)?,
        // As `bicep publish-extension` does without index.json: the binary for this platform says its types.
        None => {
            let platform = cairn_oci::media::current_platform().unwrap_or("unknown");
            let Some(binary) = flags
                .iter()
                .find(|(rid, _)| *rid == platform)
                .and_then(|(_, file)| file.as_ref())
            else {
                bail!(
                    "give the types as index.json, or the binary for this platform (--bin-{platform}) to ask \
                     for its types (GetTypeFiles)"
                );
            };
            types_of_binary(binary)?
        }
    };
    let artifact = Artifact::build(&types, &binaries, &cairn_oci::artifact::now())?;
    let platforms: Vec<&str> = binaries.iter().map(|(p, _)| p.as_str()).collect();
    let target = args.target.trim();
    let shown = if target.starts_with("br:") || target.starts_with("br/") {
        let cwd = std::env::current_dir()?;
        let config = BicepConfig::find(&cwd)?.map(|(_, config)| config);
        let reference = ArtifactRef::parse(target, config.as_ref())?;
        let client = client(&args.insecure_registry);
        runtime()?.block_on(client.push(&artifact, &reference, args.force))?;
        reference.to_string()
    } else {
        let tag = types
            .settings()
            .and_then(|s| s.get("version").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "latest".to_owned());
        cairn_oci::layout::write(Path::new(target), &artifact, &tag, args.force)?;
        format!("{target}:{tag}")
    };
    let value = json!({
        "target": shown,
        "digest": artifact.digest,
        "platforms": platforms,
        "types": types.files.keys().collect::<Vec<_>>(),
    });
    Ok(print(args.output, None, &value))
}

/// The type files an extension binary serves (`GetTypeFiles` over its `--socket`), as a types package.
fn types_of_binary(binary: &Path) -> anyhow::Result<TypesPackage> {
    use cairn_extension_contract::transport::ExtensionTransport as _;
    let transport = cairn_extension_grpc::LocalProcessTransport::new(
        cairn_extension_grpc::LaunchSpec::new(binary),
    );
    let files = runtime()?
        .block_on(transport.type_files())
        .map_err(|error| anyhow::anyhow!("cannot ask {} for its types: {error}", binary.display()))?
        .filter(|files| files.contains_key("index.json"))
        .with_context(|| {
            format!(
                "{} publishes no types (GetTypeFiles): give them as index.json",
                binary.display()
            )
        })?;
    Ok(TypesPackage {
        files: files
            .into_iter()
            .map(|(name, text)| (name, text.into_bytes()))
            .collect(),
    })
}

#[derive(Args)]
pub(crate) struct LockArgs {
    /// The template (ARM JSON) whose extensions to pin; cairn.lock.json is written beside it.
    #[arg(short = 'f', long = "template-file", value_name = "FILE")]
    template_file: PathBuf,
    /// Record the digest each tag names now, also where the lock file pins another (a tag that moved).
    #[arg(long)]
    upgrade: bool,
    /// Registry file [default: $CAIRN_EXTENSIONS, else $CAIRN_HOME/extensions.json]: its `oci` entries without
    /// a digest are pinned too.
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,
    /// A registry reached over plain HTTP (repeatable; loopback registries always are).
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registry: Vec<String>,
    /// Output format [default: table; json with --query].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    output: Option<Format>,
    /// JMESPath query applied to the pins.
    #[arg(long, value_name = "JMESPATH", value_parser = Query::parse)]
    query: Option<Query>,
}

pub(crate) fn lock(args: &LockArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.template_file)
        .with_context(|| format!("cannot read {}", args.template_file.display()))?;
    let template = cairn_json::parse(&text)
        .map(|node| node.to_json())
        .map_err(|_| anyhow::anyhow!("{} is not valid JSON", args.template_file.display()))?;
    let dir = args
        .template_file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let project = Project::read(dir, &template)?;
    let lock_path = project.lock_path();
    let mut sources: Vec<OciSource> = project
        .oci_sources()?
        .into_iter()
        .map(|(_, _, source)| source)
        .collect();
    // Registry file entries of kind `oci` without their own digest, for the template's extensions.
    let registry_file = args
        .registry
        .clone()
        .or_else(|| {
            std::env::var_os("CAIRN_EXTENSIONS")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| {
            crate::local::cairn_home()
                .ok()
                .map(|home| home.join("extensions.json"))
        })
        .filter(|path| path.exists());
    if let Some(path) = registry_file {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let file: RegistryFile = serde_json::from_str(&text)
            .map_err(|_| anyhow::anyhow!("{} is not a valid extension registry", path.display()))?;
        for (_, name, version) in &project.extensions {
            if sources
                .iter()
                .any(|s| s.name.eq_ignore_ascii_case(name) && s.version == *version)
            {
                continue;
            }
            let entry = file.extensions.iter().find(|entry| {
                entry.name.eq_ignore_ascii_case(name)
                    && VersionMatcher::parse(&entry.version).matches(version)
            });
            if let Some(entry) = entry
                && let TransportSpec::Oci {
                    reference,
                    digest: None,
                } = &entry.transport
            {
                sources.push(OciSource {
                    name: name.clone(),
                    version: version.clone(),
                    reference: ArtifactRef::parse(reference, project.bicep_config.as_ref())?,
                    pin: Pin::LockFile(lock_path.clone()),
                });
            }
        }
    }
    if sources.is_empty() {
        bail!(
            "the template uses no extension that bicepconfig.json or the registry file maps to an OCI artifact"
        );
    }
    let client = client(&args.insecure_registry);
    let runtime = runtime()?;
    let mut rows = Vec::new();
    for source in &sources {
        let digest = runtime.block_on(cairn_oci::resolve_pin(
            &client,
            &source.name,
            &source.version,
            &source.reference,
            &source.pin,
            args.upgrade,
        ))?;
        rows.push(json!({
            "extension": cairn_oci::LockFile::key(&source.name, &source.version),
            "reference": source.reference.to_string(),
            "digest": digest,
        }));
    }
    eprintln!("locked in {}", lock_path.display());
    let out = OutputArgs {
        output: args.output,
        query: args.query.clone(),
    };
    let default = if args.query.is_some() {
        Format::Json
    } else {
        Format::Table
    };
    const COLUMNS: &[(&str, &str)] = &[
        ("Extension", "/extension"),
        ("Reference", "/reference"),
        ("Digest", "/digest"),
    ];
    let value = Value::Array(rows.clone());
    Ok(
        match out.print(default, &value, TableView::Rows(rows, COLUMNS)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => failure.report(),
        },
    )
}

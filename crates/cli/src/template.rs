//! `cairn template validate|expand`: offline checks and expansion of ARM JSON templates.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use cairn_template::{
    ContextRuntime, DeploymentContext, DeploymentInput, Diagnostic, ParameterValue, ParametersFile,
    SourceFile,
};
use clap::{Args, Subcommand};

use crate::output::{Format, OutputArgs, TableView};
use crate::render::{self, OutputFormat};

#[derive(Subcommand)]
pub(crate) enum TemplateCommand {
    /// Check a template (and parameters) without deploying: syntax, symbols, types, limits, expansion.
    Validate(TemplateArgs),
    /// Expand a template into the deployment plan: resources after conditions and copy loops, IDs,
    /// dependencies, nested deployments, extension configs and outputs.
    Expand(TemplateArgs),
}

#[derive(Args)]
pub(crate) struct TemplateArgs {
    /// The template: ARM JSON, or Bicep (`.bicep`, compiled with the `bicep` CLI or `az bicep`).
    #[arg(short = 'f', long = "template-file", value_name = "FILE")]
    template_file: PathBuf,
    /// Parameters: a parameters file (`params.json` or `@params.json`, or a `.bicepparam` compiled like a
    /// template) or `name=value`. Repeatable.
    #[arg(short = 'p', long = "parameters", value_name = "PARAMS")]
    parameters: Vec<String>,
    /// Deployment context JSON: tenantId, subscriptionId, resourceGroup, location, deploymentName, utcNow, ...
    #[arg(long)]
    context: Option<PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
}

pub(crate) fn run(cmd: TemplateCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TemplateCommand::Validate(args) => execute(args, false),
        TemplateCommand::Expand(args) => execute(args, true),
    }
}

struct Loaded {
    sources: Vec<SourceFile>,
    diagnostics: Vec<Diagnostic>,
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn execute(args: TemplateArgs, print_plan: bool) -> anyhow::Result<ExitCode> {
    let mut loaded = Loaded {
        sources: Vec::new(),
        diagnostics: Vec::new(),
    };
    let template_source = if crate::bicep::is_bicep(&args.template_file) {
        crate::bicep::compile_template(&args.template_file)?
    } else {
        SourceFile::new(
            args.template_file.display().to_string(),
            read(&args.template_file)?,
        )
    };
    let root = match cairn_json::parse(&template_source.text) {
        Ok(root) => root,
        Err(e) => {
            let d = Diagnostic::error(
                "InvalidTemplate",
                format!("The template is not valid JSON: {e}."),
                "",
            )
            .with_span(e.span);
            let d = template_source.locate(d);
            render::print_diagnostics(&[d], &[template_source], OutputFormat::Text);
            return Ok(ExitCode::from(2));
        }
    };
    let (template, findings) = crate::check::static_findings(&template_source, root);
    loaded.diagnostics.extend(findings);
    loaded.sources.push(template_source);

    let mut params = ParametersFile::default();
    for p in &args.parameters {
        load_parameter_arg(p, &mut params, &mut loaded)?;
    }
    let context: DeploymentContext = match &args.context {
        Some(path) => serde_json::from_str(&read(path)?)
            .with_context(|| format!("{} is not a valid deployment context", path.display()))?,
        None => DeploymentContext::default(),
    };
    let runtime = ContextRuntime { context: &context };
    let parsed_cleanly = !loaded
        .diagnostics
        .iter()
        .any(|d| d.is_error() && d.code == "InvalidParameterFile");
    let plan = if parsed_cleanly {
        let (plan, diags) = cairn_template::expand(
            DeploymentInput::new(&template, &params, context.clone()),
            &runtime,
        );
        let template_source = &loaded.sources[0];
        // Expansion meets the static findings again, at their path or one above it (an output's error is about
        // `outputs.o`, the static check's about `outputs.o.value`): keep the static, more precise one.
        let reported: Vec<String> = loaded
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.target.clone())
            .collect();
        let covered = |target: &str| {
            reported.iter().any(|r| {
                r.strip_prefix(target)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            })
        };
        loaded.diagnostics.extend(
            diags
                .into_iter()
                .filter(|d| !covered(&d.target))
                .map(|d| template_source.locate(d)),
        );
        // Extension resource bodies against their extensions' types, where the registry knows them.
        if let Some(plan) = &plan {
            let json = template.root.to_json();
            // OCI extensions resolve through the bicepconfig.json near the template, as a deployment resolves them.
            let dir = args
                .template_file
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if let Err(failure) = crate::extension_oci::set_project(dir, &json) {
                let message = match failure {
                    crate::output::Failure::Usage(message) => message,
                    _ => "cannot read the bicepconfig.json near the template".to_owned(),
                };
                anyhow::bail!(message);
            }
            let types = crate::extension::types_for_validation(&json)?;
            loaded.diagnostics.extend(
                cairn_template::resource_types::check_plan(&types, &template.root, plan)
                    .into_iter()
                    .map(|f| template_source.locate(f.diagnostic)),
            );
        }
        plan
    } else {
        None
    };
    loaded.diagnostics = crate::check::unique(loaded.diagnostics);
    let failed = loaded.diagnostics.iter().any(Diagnostic::is_error);
    render::print_diagnostics(&loaded.diagnostics, &loaded.sources, OutputFormat::Text);
    if failed {
        return Ok(ExitCode::from(2));
    }
    let result = match (&plan, print_plan) {
        (Some(plan), true) => plan.to_json(),
        (Some(plan), false) if has_deferred(plan) => {
            // Valid, with parts that ARM expands only while the deployment runs: say which.
            serde_json::json!({ "status": "valid", "diagnostics": loaded.diagnostics,
                                "deferred": deferred_messages(plan, "") })
        }
        _ => serde_json::json!({ "status": "valid", "diagnostics": loaded.diagnostics }),
    };
    Ok(
        match args.out.print(Format::Json, &result, TableView::Auto) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => failure.report(),
        },
    )
}

/// Whether `plan` or a nested plan in it leaves something for the deployment's run.
fn has_deferred(plan: &cairn_template::Plan) -> bool {
    !plan.deferred.is_empty()
        || plan
            .resources
            .iter()
            .filter_map(|r| r.deployment.as_deref())
            .any(has_deferred)
}

/// What `plan` and its nested plans leave for the deployment's run, one sentence each, with targets from the root
/// template (`prefix` is the path of `plan`'s template in it).
fn deferred_messages(plan: &cairn_template::Plan, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = plan
        .deferred
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.target = under(prefix, &d.target);
            d.message()
        })
        .collect();
    for r in &plan.resources {
        if let Some(child) = r.deployment.as_deref() {
            let path = format!("{}.properties.template", r.path);
            out.extend(deferred_messages(child, &under(prefix, &path)));
        }
    }
    out
}

/// JSON path `path` below `prefix`.
fn under(prefix: &str, path: &str) -> String {
    if prefix.is_empty() {
        path.to_string()
    } else {
        format!("{prefix}.{path}")
    }
}

/// `-p` as az takes it: `@file.json`, `file.json`, or `name=value` (JSON if it parses, else a string).
fn load_parameter_arg(
    arg: &str,
    params: &mut ParametersFile,
    loaded: &mut Loaded,
) -> anyhow::Result<()> {
    let as_file = arg.strip_prefix('@').unwrap_or(arg);
    if let Some((name, value)) = arg.split_once('=')
        && !Path::new(as_file).exists()
    {
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        params
            .parameters
            .retain(|p| !p.name.eq_ignore_ascii_case(name));
        params
            .parameters
            .push(cairn_template::params::ParameterEntry {
                name: name.to_string(),
                value: ParameterValue::Value(cairn_eval::Value::from_json(&value)),
                path: format!("parameters.{name}"),
                span: Default::default(),
            });
        return Ok(());
    }
    let path = crate::inputs::parameters_file(arg).map_err(anyhow::Error::msg)?;
    let source = if crate::bicep::is_bicepparam(&path) {
        crate::bicep::compile_parameters(&path, None, &serde_json::Map::new())?.parameters
    } else {
        SourceFile::new(path.display().to_string(), read(&path)?)
    };
    match cairn_json::parse(&source.text) {
        Ok(root) => {
            let (file, diags) = ParametersFile::parse(&root);
            loaded
                .diagnostics
                .extend(diags.into_iter().map(|d| source.locate(d)));
            for entry in file.parameters {
                params
                    .parameters
                    .retain(|p| !p.name.eq_ignore_ascii_case(&entry.name));
                params.parameters.push(entry);
            }
            params.extension_configs.extend(file.extension_configs);
        }
        Err(e) => {
            let d = Diagnostic::error(
                "InvalidParameterFile",
                format!("The parameters file is not valid JSON: {e}."),
                "",
            )
            .with_span(e.span);
            loaded.diagnostics.push(source.locate(d));
        }
    }
    loaded.sources.push(source);
    Ok(())
}

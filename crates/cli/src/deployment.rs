//! `cairn deployment group|sub create|show|list|delete|validate|what-if|cancel|export` and
//! `cairn deployment operation group|sub list`, with az's flags: `-g`, `-n`, `-f`, `-p` (repeatable: `@file.json`,
//! `file.json`, `name=value`, parameter files with `extensionConfigs`), `-l`, `--mode`, `--no-wait`, `-o`.
//!
//! Template problems are found before anything is sent (the static checks) or come back from the engine as ARM
//! 400s; both are shown with file positions as `template validate` shows them ([`crate::check`], exit 2). A
//! deployment that ends `Failed` or `Canceled` prints its error tree on stderr and exits 1. `what-if` prints the
//! plan ([`crate::plan`]); `create --what-if` shows it and stops, `create -c` shows it and asks first.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use cairn_arm::models::deployment::{
    Deployment, DeploymentMode, DeploymentProperties, DeploymentWhatIf, DeploymentWhatIfProperties,
    DeploymentWhatIfSettings, WhatIfResultFormat,
};
use cairn_arm::models::extension::ExtensionConfigs;
use cairn_arm::models::parameters::DeploymentParameters;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::backend::{Backend, ParallelismArgs, TargetArgs};
use crate::check::{self, InputFiles};
use crate::inputs::TemplateSourceArgs;
use crate::output::{self, CmdResult, EXIT_FAILED, Failure, Format, OutputArgs, TableView};
use crate::plan;
use crate::progress::Progress;
use crate::prompt::{self, Answer};

#[derive(Args)]
pub(crate) struct DeploymentArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(subcommand)]
    command: DeploymentCommand,
}

#[derive(Subcommand)]
enum DeploymentCommand {
    /// Deployments at resource group scope.
    #[command(subcommand)]
    Group(ScopedCommand),
    /// Deployments at subscription scope.
    #[command(subcommand)]
    Sub(ScopedCommand),
    /// Deployment operations.
    #[command(subcommand)]
    Operation(OperationCommand),
}

#[derive(Subcommand)]
enum ScopedCommand {
    /// Start a deployment and follow it to its end (progress on stderr, the deployment on stdout).
    Create(CreateArgs),
    /// Show a deployment.
    Show(NamedArgs),
    /// List the deployments of the scope (nested deployments included).
    List(ListArgs),
    /// Delete a deployment's history (never its resources).
    Delete(NamedArgs),
    /// Check a template and parameters without deploying.
    Validate(TemplateArgs),
    /// Predict what a deployment would change: a plan of each resource's change (-o json: the what-if result).
    WhatIf(WhatIfArgs),
    /// Cancel a running deployment.
    Cancel(NamedArgs),
    /// Print the template a deployment ran.
    Export(NamedArgs),
}

#[derive(Subcommand)]
enum OperationCommand {
    /// Operations of a resource group deployment.
    #[command(subcommand)]
    Group(OperationListCommand),
    /// Operations of a subscription deployment.
    #[command(subcommand)]
    Sub(OperationListCommand),
}

#[derive(Subcommand)]
enum OperationListCommand {
    /// List a deployment's operations (one per resource, with status, duration and errors).
    List(NamedArgs),
}

/// `-g` (resource group commands) or nothing (subscription commands).
#[derive(Args, Clone)]
struct ScopeArgs {
    /// Resource group (required for `deployment group` commands).
    #[arg(short = 'g', long = "resource-group", value_name = "NAME")]
    resource_group: Option<String>,
}

#[derive(Args)]
struct TemplateArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    /// Deployment name [default: the template's name without extension].
    #[arg(short = 'n', long)]
    name: Option<String>,
    #[command(flatten)]
    source: TemplateSourceArgs,
    /// Parameters: a parameters file (`params.json` or `@params.json`, may hold `extensionConfigs`), a
    /// `.bicepparam` file, or `name=value` (JSON if it parses, else a string). Several may follow one -p, and -p
    /// repeats; later values win.
    #[arg(short = 'p', long = "parameters", value_name = "PARAMS", num_args = 1..)]
    parameters: Vec<String>,
    /// Location for the deployment's data (required for `deployment sub`).
    #[arg(short = 'l', long)]
    location: Option<String>,
    /// Deployment mode, any case (cairn runs Incremental only: Complete is refused, see docs/cli.md).
    #[arg(long, value_enum, ignore_case = true, default_value_t = Mode::Incremental)]
    mode: Mode,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct CreateArgs {
    #[command(flatten)]
    template: TemplateArgs,
    #[command(flatten)]
    parallelism: ParallelismArgs,
    /// Return once the deployment is accepted (with --server; the in-process engine always runs it to its end).
    #[arg(long)]
    no_wait: bool,
    /// No progress view on stderr.
    #[arg(long)]
    no_progress: bool,
    /// Show the what-if plan (on stderr) and ask before deploying: "Are you sure you want to execute the
    /// deployment? (y/n)". Needs a terminal, or --yes.
    #[arg(short = 'c', long = "confirm-with-what-if")]
    confirm_with_what_if: bool,
    /// Show the what-if plan and stop: nothing is deployed.
    #[arg(long = "what-if")]
    what_if: bool,
    /// With -c: deploy without asking when the plan changes nothing (only NoChange and Ignore).
    #[arg(long = "proceed-if-no-change", requires = "confirm_with_what_if")]
    proceed_if_no_change: bool,
    /// With -c: deploy after showing the plan, without asking (what a script without a terminal passes).
    #[arg(short = 'y', long, requires = "confirm_with_what_if")]
    yes: bool,
    #[command(flatten)]
    plan: PlanArgs,
}

/// How a what-if plan is asked for and shown: az's `--result-format` and `--exclude-change-types` (named
/// `--what-if-...` on `create`).
#[derive(Args)]
struct PlanArgs {
    /// Full before/after payloads with property changes (the default), or resource IDs only.
    #[arg(
        short = 'r',
        long = "what-if-result-format",
        alias = "wrf",
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    result_format: Option<ResultFormat>,
    /// Leave these kinds of change out of the plan (space separated).
    #[arg(
        short = 'x',
        long = "what-if-exclude-change-types",
        alias = "wx",
        value_enum,
        ignore_case = true,
        num_args = 1..,
        value_name = "CHANGE"
    )]
    exclude_change_types: Vec<ChangeType>,
}

#[derive(Args)]
struct WhatIfArgs {
    #[command(flatten)]
    template: TemplateArgs,
    #[command(flatten)]
    parallelism: ParallelismArgs,
    /// Print the what-if result as JSON instead of the change summary (same as `-o json`).
    #[arg(long)]
    no_pretty_print: bool,
    /// Full before/after payloads with property changes (the default), or resource IDs only.
    #[arg(
        short = 'r',
        long = "result-format",
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    result_format: Option<ResultFormat>,
    /// Leave these kinds of change out of the plan (space separated).
    #[arg(
        short = 'x',
        long = "exclude-change-types",
        value_enum,
        ignore_case = true,
        num_args = 1..,
        value_name = "CHANGE"
    )]
    exclude_change_types: Vec<ChangeType>,
}

/// az's what-if result formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ResultFormat {
    #[value(name = "FullResourcePayloads")]
    FullResourcePayloads,
    #[value(name = "ResourceIdOnly")]
    ResourceIdOnly,
}

/// az's what-if change types (for `--exclude-change-types`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ChangeType {
    #[value(name = "Create")]
    Create,
    #[value(name = "Delete")]
    Delete,
    #[value(name = "Deploy")]
    Deploy,
    #[value(name = "Ignore")]
    Ignore,
    #[value(name = "Modify")]
    Modify,
    #[value(name = "NoChange")]
    NoChange,
    #[value(name = "Unsupported")]
    Unsupported,
}

impl ChangeType {
    fn mark(self) -> &'static plan::Mark {
        match self {
            ChangeType::Create => &plan::CREATE,
            ChangeType::Delete => &plan::DELETE,
            ChangeType::Deploy => &plan::DEPLOY,
            ChangeType::Ignore => &plan::IGNORE,
            ChangeType::Modify => &plan::MODIFY,
            ChangeType::NoChange => &plan::NO_CHANGE,
            ChangeType::Unsupported => &plan::UNSUPPORTED,
        }
    }
}

/// The marks of `--exclude-change-types`.
fn excluded(types: &[ChangeType]) -> Vec<&'static plan::Mark> {
    types.iter().map(|t| t.mark()).collect()
}

/// What-if settings for `--result-format`.
fn what_if_settings(format: Option<ResultFormat>) -> Option<DeploymentWhatIfSettings> {
    format.map(|f| DeploymentWhatIfSettings {
        result_format: Some(match f {
            ResultFormat::FullResourcePayloads => WhatIfResultFormat::FullResourcePayloads,
            ResultFormat::ResourceIdOnly => WhatIfResultFormat::ResourceIdOnly,
        }),
    })
}

#[derive(Args)]
struct NamedArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    /// Deployment name.
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    #[value(name = "Incremental")]
    Incremental,
    #[value(name = "Complete")]
    Complete,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ScopeKind {
    Group,
    Subscription,
}

const DEPLOYMENT_COLUMNS: &[(&str, &str)] = &[
    ("Name", "/name"),
    ("State", "/properties/provisioningState"),
    ("Timestamp", "/properties/timestamp"),
    ("Duration", "/properties/duration"),
    ("Mode", "/properties/mode"),
];

/// Columns of `operation ... list -o table`, over [`operation_row`]s.
const OPERATION_COLUMNS: &[(&str, &str)] = &[
    ("Resource", "/resource"),
    ("Type", "/type"),
    ("Operation", "/operation"),
    ("State", "/state"),
    ("Status", "/status"),
    ("Duration", "/duration"),
    ("Error", "/error"),
];

/// An operation flattened for a table: the resource's short id (or `symbolicName` for extension resources).
fn operation_row(op: &Value) -> Value {
    let p = &op["properties"];
    let target = &p["targetResource"];
    let resource = target["id"]
        .as_str()
        .map(|id| plan::short_id(id).to_string())
        .or_else(|| target["symbolicName"].as_str().map(str::to_string));
    json!({
        "resource": resource,
        "type": target["resourceType"],
        "operation": p["provisioningOperation"],
        "state": p["provisioningState"],
        "status": p["statusCode"],
        "duration": p["duration"],
        "error": p.pointer("/statusMessage/error/code"),
    })
}

pub(crate) fn run(args: DeploymentArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let target = args.target;
    Ok(runtime.block_on(async move {
        match execute(&target, args.command).await {
            Ok(code) => code,
            Err(failure) => failure.report(),
        }
    }))
}

async fn execute(target: &TargetArgs, command: DeploymentCommand) -> CmdResult {
    let (kind, command) = match command {
        DeploymentCommand::Group(c) => (ScopeKind::Group, c),
        DeploymentCommand::Sub(c) => (ScopeKind::Subscription, c),
        DeploymentCommand::Operation(OperationCommand::Group(OperationListCommand::List(a))) => {
            return operations(target, ScopeKind::Group, a).await;
        }
        DeploymentCommand::Operation(OperationCommand::Sub(OperationListCommand::List(a))) => {
            return operations(target, ScopeKind::Subscription, a).await;
        }
    };
    match command {
        ScopedCommand::Create(a) => create(target, kind, a).await,
        ScopedCommand::Show(a) => {
            let scope = scope_of(target, kind, &a.scope)?;
            let backend = target.connect().await?;
            let record = backend.get_deployment(&scope, &a.name).await;
            backend.close().await;
            let record = without_secure_outputs(record?);
            a.out.print(
                Format::Json,
                &record,
                TableView::Columns(DEPLOYMENT_COLUMNS),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        ScopedCommand::List(a) => {
            let scope = scope_of(target, kind, &a.scope)?;
            let backend = target.connect().await?;
            let list = backend.list_deployments(&scope).await;
            backend.close().await;
            let list: Vec<Value> = list?.into_iter().map(without_secure_outputs).collect();
            a.out.print(
                Format::Json,
                &Value::Array(list),
                TableView::Columns(DEPLOYMENT_COLUMNS),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        ScopedCommand::Delete(a) => {
            let scope = scope_of(target, kind, &a.scope)?;
            let backend = target.connect().await?;
            let result = backend.delete_deployment(&scope, &a.name).await;
            backend.close().await;
            result?;
            Ok(ExitCode::SUCCESS)
        }
        ScopedCommand::Cancel(a) => {
            let scope = scope_of(target, kind, &a.scope)?;
            let backend = target.connect().await?;
            let result = backend.cancel(&scope, &a.name).await;
            backend.close().await;
            result?;
            Ok(ExitCode::SUCCESS)
        }
        ScopedCommand::Export(a) => {
            let scope = scope_of(target, kind, &a.scope)?;
            let backend = target.connect().await?;
            let exported = backend.export(&scope, &a.name).await;
            backend.close().await;
            // az prints the template itself.
            let template = exported?.get("template").cloned().unwrap_or(Value::Null);
            a.out.print(
                Format::Json,
                &template,
                TableView::Columns(&[("Content version", "/contentVersion")]),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        ScopedCommand::Validate(a) => {
            let scope = scope_of(target, kind, &a.scope)?;
            let (name, request, files) = build_request(&a, kind)?;
            let backend = target.connect().await?;
            let result = backend.validate(&scope, &name, request).await;
            backend.close().await;
            let result = result.map_err(|f| check::explain(f, &files))?;
            if let Some(error) = carried_error(&result) {
                return Err(check::explain(error, &files));
            }
            a.out.print(
                Format::Json,
                &result,
                TableView::Columns(DEPLOYMENT_COLUMNS),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        ScopedCommand::WhatIf(a) => what_if(target, kind, a).await,
    }
}

fn scope_of(target: &TargetArgs, kind: ScopeKind, scope: &ScopeArgs) -> Result<String, Failure> {
    match (kind, &scope.resource_group) {
        (ScopeKind::Group, Some(group)) => target.group_scope(group),
        (ScopeKind::Group, None) => Err(Failure::usage(
            "the following argument is required: -g/--resource-group",
        )),
        (ScopeKind::Subscription, Some(_)) => Err(Failure::usage(
            "-g/--resource-group is for `deployment group`; `deployment sub` deploys at subscription scope",
        )),
        (ScopeKind::Subscription, None) => target.subscription_scope(),
    }
}

async fn create(target: &TargetArgs, kind: ScopeKind, args: CreateArgs) -> CmdResult {
    let scope = scope_of(target, kind, &args.template.scope)?;
    let (name, request, files) = build_request(&args.template, kind)?;
    let confirm = args.confirm_with_what_if && !args.what_if;
    // As az: -c needs someone to answer, said before anything runs (unless an unchanged plan may not ask).
    if confirm && !args.yes && !args.proceed_if_no_change && !std::io::stdin().is_terminal() {
        return Err(Failure::usage(NO_TERMINAL_TO_CONFIRM));
    }
    let backend = target.connect_with(args.parallelism).await?;
    if args.what_if || confirm {
        let review = review(&backend, &scope, &name, &request, &args, &files).await;
        if !matches!(review, Ok(Review::Deploy)) {
            backend.close().await;
            return review.map(|_| ExitCode::SUCCESS);
        }
    }
    let mut progress = if args.no_progress {
        Progress::off()
    } else {
        Progress::for_stderr(true)
    };
    let result = backend
        .deploy(&scope, &name, request, !args.no_wait, &mut progress)
        .await;
    backend.close().await;
    let record = without_secure_outputs(result.map_err(|f| check::explain(f, &files))?);
    let state = record
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .unwrap_or("");
    if matches!(state, "Failed" | "Canceled") {
        let error = record
            .pointer("/properties/error")
            .cloned()
            .and_then(|e| serde_json::from_value(e).ok())
            .unwrap_or_else(|| {
                cairn_arm::ErrorDetail::new(
                    "DeploymentCanceled",
                    format!("The deployment '{name}' was canceled."),
                )
            });
        check::print_error(&error, &files);
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    args.template.out.print(
        Format::Json,
        &record,
        TableView::Columns(DEPLOYMENT_COLUMNS),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// What `--what-if` or `-c` decided once the plan was shown.
enum Review {
    Deploy,
    /// `--what-if`: the plan was all that was asked for.
    Stop,
}

/// `create --what-if` and `-c`: shows the plan and, for `-c`, asks (unless `--yes`, or `--proceed-if-no-change`
/// and nothing changes). A no, or no terminal to ask on, is a usage failure.
async fn review(
    backend: &Backend,
    scope: &str,
    name: &str,
    request: &Deployment,
    args: &CreateArgs,
    files: &InputFiles,
) -> CmdResult<Review> {
    let plan = show_plan(backend, scope, name, request, &args.plan, files).await?;
    if args.what_if {
        return Ok(Review::Stop);
    }
    if args.yes || (args.proceed_if_no_change && !plan.changes_anything()) {
        return Ok(Review::Deploy);
    }
    match prompt::ask("Are you sure you want to execute the deployment?")? {
        Answer::Yes => Ok(Review::Deploy),
        Answer::No => Err(Failure::usage(
            "not deployed: the deployment was not confirmed",
        )),
        Answer::NoTerminal => Err(Failure::usage(NO_TERMINAL_TO_CONFIRM)),
    }
}

/// Why `-c` cannot ask.
const NO_TERMINAL_TO_CONFIRM: &str = "-c/--confirm-with-what-if asks before deploying, but stdin is not a terminal: \
pass --yes to deploy after showing the plan, or --what-if to only show it";

/// The what-if result of a deployment request (secret values redacted); an invalid request is its ARM error, with
/// its template problems located in `files`.
async fn predict(
    backend: &Backend,
    scope: &str,
    name: &str,
    request: &Deployment,
    format: Option<ResultFormat>,
    files: &InputFiles,
) -> CmdResult<Value> {
    let request = DeploymentWhatIf {
        location: request.location.clone(),
        properties: DeploymentWhatIfProperties::from_parts(
            request.properties.clone(),
            what_if_settings(format),
        ),
    };
    let result = backend.what_if(scope, name, request).await;
    let result = redact_what_if(result.map_err(|f| check::explain(f, files))?);
    match carried_error(&result) {
        Some(error) => Err(check::explain(error, files)),
        None => Ok(result),
    }
}

/// `create --what-if` and `-c`: the plan of the deployment about to run, on stderr (stdout stays for the
/// deployment's JSON).
async fn show_plan(
    backend: &Backend,
    scope: &str,
    name: &str,
    request: &Deployment,
    args: &PlanArgs,
    files: &InputFiles,
) -> CmdResult<plan::Plan> {
    let result = predict(backend, scope, name, request, args.result_format, files).await?;
    let plan =
        plan::deployment_plan(scope, &result).excluding(&excluded(&args.exclude_change_types));
    eprintln!("{}\n", plan.render(output::color_stderr()));
    Ok(plan)
}

async fn what_if(target: &TargetArgs, kind: ScopeKind, args: WhatIfArgs) -> CmdResult {
    let scope = scope_of(target, kind, &args.template.scope)?;
    let (name, request, files) = build_request(&args.template, kind)?;
    let backend = target.connect_with(args.parallelism).await?;
    let result = predict(
        &backend,
        &scope,
        &name,
        &request,
        args.result_format,
        &files,
    )
    .await;
    backend.close().await;
    let result = result?;
    let out = &args.template.out;
    if out.output.is_none() && out.query.is_none() && !args.no_pretty_print {
        let plan =
            plan::deployment_plan(&scope, &result).excluding(&excluded(&args.exclude_change_types));
        crate::render::print_stdout(&plan.render(output::color_stdout()))
            .map_err(|e| Failure::Other(e.into()))?;
        return Ok(ExitCode::SUCCESS);
    }
    out.print(
        Format::Json,
        &result,
        TableView::Rows(plan::deployment_rows(&result), plan::ROW_COLUMNS),
    )?;
    Ok(ExitCode::SUCCESS)
}

async fn operations(target: &TargetArgs, kind: ScopeKind, args: NamedArgs) -> CmdResult {
    let scope = scope_of(target, kind, &args.scope)?;
    let backend = target.connect().await?;
    let ops = backend.operations(&scope, &args.name).await;
    backend.close().await;
    let ops = ops?;
    let rows = ops.iter().map(operation_row).collect();
    args.out.print(
        Format::Json,
        &Value::Array(ops),
        TableView::Rows(rows, OPERATION_COLUMNS),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Drops outputs of secure type (the engine leaves them out; a server of another make might not).
fn without_secure_outputs(mut record: Value) -> Value {
    if let Some(Value::Object(outputs)) = record.pointer_mut("/properties/outputs") {
        outputs.retain(|_, o| {
            !o.get("type").and_then(Value::as_str).is_some_and(|t| {
                t.eq_ignore_ascii_case("securestring") || t.eq_ignore_ascii_case("secureobject")
            })
        });
    }
    record
}

/// Key Vault secret values in what-if's `after` and deltas are replaced: a template's secret value is the one
/// thing what-if must not echo.
fn redact_what_if(mut result: Value) -> Value {
    let changes = result
        .pointer_mut("/properties/changes")
        .and_then(Value::as_array_mut);
    for change in changes.into_iter().flatten() {
        let resource_type = change
            .get("resourceType")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                let id = change.get("resourceId").and_then(Value::as_str)?;
                Some(cairn_arm::ResourceId::parse(id).ok()?.resource_type())
            });
        let is_secret = resource_type
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.KeyVault/vaults/secrets"));
        if !is_secret {
            continue;
        }
        for side in ["before", "after"] {
            if let Some(props) = change
                .get_mut(side)
                .and_then(|s| s.get_mut("properties"))
                .and_then(Value::as_object_mut)
                && props.contains_key("value")
            {
                props.insert("value".into(), json!("<redacted>"));
            }
        }
        if let Some(delta) = change.get_mut("delta").and_then(Value::as_array_mut) {
            for d in delta.iter_mut() {
                if d.get("path")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.eq_ignore_ascii_case("properties.value"))
                {
                    for side in ["before", "after"] {
                        if d.get(side).is_some() {
                            d[side] = json!("<redacted>");
                        }
                    }
                }
            }
        }
    }
    result
}

/// Why `--mode Complete` is refused: said before anything is read or sent.
const COMPLETE_MODE_REFUSED: &str = "--mode Complete is not supported: cairn runs deployments in Incremental mode \
only. A Complete deployment deletes every resource of the resource group that its template does not declare, and \
cairn's engine has no such pass (it would refuse the request with 400 InvalidDeploymentMode). To delete what a \
template no longer declares, deploy it as a deployment stack, which deletes only the resources it manages: \
cairn stack group create -g GROUP -n NAME -f FILE --action-on-unmanage deleteResources";

/// The ARM error a validate or what-if result carries (`error`), as the 400 it stands for.
fn carried_error(result: &Value) -> Option<Failure> {
    let error = result.get("error").filter(|e| !e.is_null())?;
    let detail: cairn_arm::ErrorDetail = serde_json::from_value(error.clone()).unwrap_or_default();
    Some(Failure::Arm(cairn_arm::ArmError::from_detail(400, detail)))
}

/// Reads the template and parameters into a deployment request, with the files read (to locate the engine's
/// findings in); diagnostics with positions end the command (exit 2) before anything is sent.
fn build_request(
    args: &TemplateArgs,
    kind: ScopeKind,
) -> Result<(String, Deployment, InputFiles), Failure> {
    let name = match &args.name {
        Some(name) => name.clone(),
        None => args
            .source
            .default_name(&args.parameters)
            .ok_or_else(|| Failure::usage("pass -n/--name: the template has no usable name"))?,
    };
    if args.mode == Mode::Complete {
        return Err(Failure::usage(COMPLETE_MODE_REFUSED));
    }
    if kind == ScopeKind::Subscription && args.location.is_none() {
        return Err(Failure::usage(
            "the following argument is required for `deployment sub`: -l/--location",
        ));
    }
    let inputs = crate::inputs::read_template_inputs(&args.source, &args.parameters)?;
    let mut properties = DeploymentProperties::new(DeploymentMode::Incremental);
    properties.template = inputs.template;
    properties.template_link = inputs.template_link;
    if !inputs.parameters.is_empty() {
        properties.parameters = Some(DeploymentParameters(inputs.parameters));
    }
    if !inputs.extension_configs.is_empty() {
        let configs: ExtensionConfigs =
            serde_json::from_value(Value::Object(inputs.extension_configs))
                .map_err(|e| Failure::usage(format!("the extension configs are not valid: {e}")))?;
        properties.extension_configs = Some(configs);
    }
    if let Some(defs) = inputs.external_input_definitions {
        properties.external_input_definitions = serde_json::from_value(defs).ok();
    }
    Ok((
        name,
        Deployment {
            location: args.location.clone(),
            properties,
            tags: None,
            identity: None,
        },
        inputs.files,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_outputs_are_dropped() {
        let record = json!({"properties": {"outputs": {
            "a": {"type": "String", "value": "x"}, "b": {"type": "SecureString", "value": "s"}}}});
        assert_eq!(
            without_secure_outputs(record)["properties"]["outputs"],
            json!({"a": {"type": "String", "value": "x"}})
        );
    }

    #[test]
    fn what_if_hides_secret_values() {
        let result = json!({"properties": {"changes": [{
            "resourceId": "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/v/secrets/x",
            "changeType": "Modify",
            "after": {"properties": {"value": "hunter2"}},
            "delta": [{"path": "properties.value", "propertyChangeType": "Create", "after": "hunter2"}]
        }]}});
        let text = redact_what_if(result).to_string();
        assert!(!text.contains("hunter2"), "{text}");
    }
}

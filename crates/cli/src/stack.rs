//! `cairn stack group|sub|mg create|show|list|delete|validate|export|what-if|drift`: deployment stacks with az's flags
//! (`az stack group create` is the model: `--action-on-unmanage detachAll|deleteResources|deleteAll`,
//! `--resources-without-delete-support detach|fail`, `--deny-settings-mode` and its excluded principals, excluded
//! actions and child scopes, `--tags`, `--deployment-resource-group`, repeated `-p`, `--yes`), on the in-process
//! stack service (`$CAIRN_HOME`) or a cairn server (`--server`, `--token`, `--ca-cert`), alike.
//!
//! `what-if` prints the plan ([`crate::plan`]); `create` shows it first and asks before deleting anything (on a
//! terminal; refused without one unless `--yes`). `create` and `delete` follow the operation to its end
//! ([`watch`]): state changes and each resource deleted, detached or failed go to stderr as they happen, then the
//! tally; stdout carries only the final JSON or table.
//! Exit codes are the other resource commands': 0 done, 1 the operation failed (or an ARM error other than 400,
//! e.g. a missing stack), 2 usage or an invalid request (400).

mod backend;
mod drift;
mod watch;

use std::process::ExitCode;

use cairn_arm::models::extension::ExtensionConfigs;
use cairn_arm::models::parameters::DeploymentParameters;
use cairn_arm::models::stack::{
    ActionOnUnmanage, DenySettings, DenySettingsMode, DeploymentStack, DeploymentStackProperties,
    ResourcesWithoutDeleteSupportAction, StackDeleteOptions,
};
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_arm::{ArmError, ErrorDetail, ResourceId};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use self::backend::{StackBackend, Started};
use self::watch::{FollowedDelete, StackWatch, follow};

use crate::backend::{ParallelismArgs, TargetArgs};
use crate::check::{self, InputFiles};
use crate::inputs::{TemplateSourceArgs, parse_tags, read_template_inputs};
use crate::output::{self, CmdResult, Failure, Format, OutputArgs, TableView};
use crate::plan;
use crate::prompt::{self, Answer};

#[derive(Args)]
pub(crate) struct StackArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(subcommand)]
    scope: StackScope,
}

#[derive(Subcommand)]
enum StackScope {
    /// Stacks at resource group scope (`-g`).
    Group {
        #[command(subcommand)]
        command: StackCommand,
    },
    /// Stacks at subscription scope.
    Sub {
        #[command(subcommand)]
        command: StackCommand,
    },
    /// Stacks at management group scope (`--management-group-id`).
    Mg {
        #[command(subcommand)]
        command: StackCommand,
    },
}

#[derive(Subcommand)]
enum StackCommand {
    /// Create or update a stack and follow it to its end (progress on stderr, the stack on stdout); without --yes
    /// its plan is shown first, and an update that deletes resources asked about.
    Create(CreateArgs),
    /// Validate a stack without deploying.
    Validate(StackFlags),
    /// Show a stack.
    Show(ShowArgs),
    /// List the stacks of the scope.
    List(ListArgs),
    /// Delete a stack, unmanaging its resources as `--action-on-unmanage` says, and follow it to its end.
    Delete(DeleteArgs),
    /// Print the template of the stack's deployment.
    Export(NameArgs),
    /// Stop the stack's running create, update or delete at its next safe point: no new resource is deployed or
    /// deleted, calls in flight finish, and the stack ends `canceled` managing everything it created and did not
    /// delete. The next create or delete carries on.
    Cancel(NameArgs),
    /// Predict what creating or updating the stack would change: a plan of the resources created, modified,
    /// unchanged, and the managed resources deleted or detached (-o json: the 2025-07-01 what-if result).
    WhatIf(StackFlags),
    /// Detect drift: read every managed resource live and report which were changed or deleted outside the stack
    /// since it last applied them (exit 3 when any is not in sync).
    Drift(drift::DriftArgs),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ScopeKind {
    Group,
    Subscription,
    ManagementGroup,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum UnmanagePreset {
    /// Every resource that leaves the stack is detached.
    #[value(name = "detachAll")]
    DetachAll,
    /// Resources are deleted, resource groups and management groups detached.
    #[value(name = "deleteResources")]
    DeleteResources,
    /// Everything that leaves the stack is deleted.
    #[value(name = "deleteAll")]
    DeleteAll,
}

impl UnmanagePreset {
    fn action(self) -> Result<ActionOnUnmanage, Failure> {
        let name = match self {
            UnmanagePreset::DetachAll => "detachAll",
            UnmanagePreset::DeleteResources => "deleteResources",
            UnmanagePreset::DeleteAll => "deleteAll",
        };
        ActionOnUnmanage::from_cli_preset(name)
            .ok_or_else(|| Failure::usage(format!("unknown --action-on-unmanage '{name}'")))
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum WithoutDeleteSupport {
    /// Resources whose type cannot be deleted are detached; the operation goes on.
    #[value(name = "detach")]
    Detach,
    /// A resource whose type cannot be deleted fails the operation (the service's default).
    #[value(name = "fail")]
    Fail,
}

impl WithoutDeleteSupport {
    fn action(self) -> ResourcesWithoutDeleteSupportAction {
        match self {
            WithoutDeleteSupport::Detach => ResourcesWithoutDeleteSupportAction::Detach,
            WithoutDeleteSupport::Fail => ResourcesWithoutDeleteSupportAction::Fail,
        }
    }
}

/// `--action-on-unmanage` and `--resources-without-delete-support`, as one `actionOnUnmanage`.
fn unmanage_action(
    preset: UnmanagePreset,
    without_delete_support: Option<WithoutDeleteSupport>,
) -> Result<ActionOnUnmanage, Failure> {
    let mut action = preset.action()?;
    action.resources_without_delete_support =
        without_delete_support.map(WithoutDeleteSupport::action);
    Ok(action)
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DenyMode {
    #[value(name = "none")]
    None,
    #[value(name = "denyDelete")]
    DenyDelete,
    #[value(name = "denyWriteAndDelete")]
    DenyWriteAndDelete,
}

#[derive(Args)]
struct ScopeArgs {
    /// Resource group (for `stack group`).
    #[arg(short = 'g', long = "resource-group", value_name = "NAME")]
    group: Option<String>,
    /// Management group id (for `stack mg`).
    #[arg(short = 'm', long = "management-group-id", value_name = "ID")]
    management_group: Option<String>,
}

/// What a stack body is made of: the flags of `create`, `validate` and `what-if`.
#[derive(Args)]
struct StackFlags {
    /// Stack name.
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    source: TemplateSourceArgs,
    #[command(flatten)]
    parallelism: ParallelismArgs,
    /// Parameters: a parameters file (`params.json` or `@params.json`, may hold `extensionConfigs`), a
    /// `.bicepparam` file, or `name=value` (JSON if it parses, else a string). Several may follow one -p, and -p
    /// repeats; later values win.
    #[arg(short = 'p', long = "parameters", value_name = "PARAMS", num_args = 1..)]
    parameters: Vec<String>,
    /// What happens to resources that leave the stack.
    #[arg(
        long = "action-on-unmanage",
        visible_alias = "aou",
        value_enum,
        ignore_case = true
    )]
    action_on_unmanage: UnmanagePreset,
    /// What happens to resources that leave the stack and whose type cannot be deleted [default: the
    /// service's, fail].
    #[arg(
        long = "resources-without-delete-support",
        value_enum,
        ignore_case = true
    )]
    resources_without_delete_support: Option<WithoutDeleteSupport>,
    /// Deny settings mode (recorded; cairn applies no deny assignments).
    #[arg(
        long = "deny-settings-mode",
        visible_alias = "dm",
        value_enum,
        ignore_case = true,
        default_value = "none"
    )]
    deny_settings_mode: DenyMode,
    /// Principal ids the deny settings exempt (at most 5).
    #[arg(
        long = "deny-settings-excluded-principals",
        visible_alias = "ep",
        value_name = "ID",
        num_args = 1..
    )]
    deny_excluded_principals: Vec<String>,
    /// Management operations the deny settings exempt (at most 200).
    #[arg(
        long = "deny-settings-excluded-actions",
        visible_alias = "ea",
        value_name = "ACTION",
        num_args = 1..
    )]
    deny_excluded_actions: Vec<String>,
    /// Apply the deny settings to child scopes of managed resources too.
    #[arg(long = "deny-settings-apply-to-child-scopes", visible_alias = "cs")]
    deny_apply_to_child_scopes: bool,
    /// Tags of the stack: `key=value` pairs (space separated, repeatable; `--tags` alone clears them).
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    tags: Option<Vec<String>>,
    /// Resource group the stack's deployment runs in (`stack sub` only; default: the subscription).
    #[arg(
        long = "deployment-resource-group",
        visible_alias = "dr",
        value_name = "NAME"
    )]
    deployment_resource_group: Option<String>,
    /// Subscription the stack's deployment runs in (`stack mg` only; default: the management group).
    #[arg(
        long = "deployment-subscription",
        visible_alias = "ds",
        value_name = "ID"
    )]
    deployment_subscription: Option<String>,
    /// Location of the stack's data (required for `stack sub` and `stack mg`).
    #[arg(short = 'l', long)]
    location: Option<String>,
    #[arg(long)]
    description: Option<String>,
    /// Proceed even if the stack's resource list may be inaccurate (an earlier operation was interrupted).
    #[arg(long = "bypass-stack-out-of-sync-error", visible_alias = "bse")]
    bypass_out_of_sync: bool,
    /// Take over extension resources the template declares that already exist and no stack manages (without it
    /// they are left unchanged and reported).
    #[arg(long)]
    adopt: bool,
    /// Never delete resources this pattern matches: an operation that would is refused before it deletes
    /// anything. A glob (`*`, `?`) over an ARM ID or `<extension>/<type> <identifiers JSON>`, e.g.
    /// `'Local/File {"path":"note-c.txt"}'`. Repeatable; the stack keeps the patterns of its last create.
    #[arg(long, value_name = "PATTERN")]
    protect: Vec<String>,
    /// Detach, never delete, resources this pattern matches when they leave the stack, whatever
    /// --action-on-unmanage says. Same form as --protect; repeatable.
    #[arg(long, value_name = "PATTERN")]
    retain: Vec<String>,
    /// Delete protected resources too, for this operation only.
    #[arg(long = "bypass-protection")]
    bypass_protection: bool,
    /// `create`: neither show the plan nor ask before resources are deleted. Without it the plan is shown first, a
    /// plan that deletes resources is asked about on a terminal, and refused without one.
    #[arg(short = 'y', long)]
    yes: bool,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct CreateArgs {
    #[command(flatten)]
    stack: StackFlags,
    /// Return once the operation is accepted, printing the stack as accepted (with --server; the in-process
    /// engine always runs it to its end). `stack show` follows it.
    #[arg(long)]
    no_wait: bool,
}

#[derive(Args)]
struct NameArgs {
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct ShowArgs {
    #[command(flatten)]
    named: NameArgs,
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct DeleteArgs {
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    scope: ScopeArgs,
    /// What happens to the stack's resources.
    #[arg(
        long = "action-on-unmanage",
        visible_alias = "aou",
        value_enum,
        ignore_case = true
    )]
    action_on_unmanage: UnmanagePreset,
    /// What happens to resources whose type cannot be deleted [default: the service's, fail].
    #[arg(
        long = "resources-without-delete-support",
        value_enum,
        ignore_case = true
    )]
    resources_without_delete_support: Option<WithoutDeleteSupport>,
    #[arg(long = "bypass-stack-out-of-sync-error", visible_alias = "bse")]
    bypass_out_of_sync: bool,
    /// Delete resources the stack's `protect` patterns name too.
    #[arg(long = "bypass-protection")]
    bypass_protection: bool,
    /// Do not ask for confirmation (it is only asked on a terminal).
    #[arg(short = 'y', long)]
    yes: bool,
    /// Printed when the delete leaves the stack behind (some resources could not be deleted).
    #[command(flatten)]
    out: OutputArgs,
}

const STACK_COLUMNS: &[(&str, &str)] = &[
    ("Name", "/name"),
    ("State", "/properties/provisioningState"),
    ("DeploymentId", "/properties/deploymentId"),
];

pub(crate) fn run(args: StackArgs) -> anyhow::Result<ExitCode> {
    // One worker: the command follows an operation that runs on the engine's own threads (or a server's), and each
    // thread that allocates holds pages of its own (see `allocator`): a second worker only added to a big stack's
    // resident memory.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    Ok(runtime.block_on(async move {
        let (kind, command) = match args.scope {
            StackScope::Group { command } => (ScopeKind::Group, command),
            StackScope::Sub { command } => (ScopeKind::Subscription, command),
            StackScope::Mg { command } => (ScopeKind::ManagementGroup, command),
        };
        match execute(&args.target, kind, command).await {
            Ok(code) => code,
            Err(failure) => failure.report(),
        }
    }))
}

fn scope_of(target: &TargetArgs, kind: ScopeKind, scope: &ScopeArgs) -> Result<String, Failure> {
    if kind != ScopeKind::ManagementGroup && scope.management_group.is_some() {
        return Err(Failure::usage("--management-group-id is for `stack mg`"));
    }
    match (kind, &scope.group) {
        (ScopeKind::Group, Some(group)) => target.group_scope(group),
        (ScopeKind::Group, None) => Err(Failure::usage(
            "the following argument is required for `stack group`: -g/--resource-group",
        )),
        (ScopeKind::Subscription, Some(_)) => Err(Failure::usage(
            "-g/--resource-group is for `stack group`; a subscription stack deploys into a resource group with \
             --deployment-resource-group",
        )),
        (ScopeKind::Subscription, None) => target.subscription_scope(),
        (ScopeKind::ManagementGroup, Some(_)) => Err(Failure::usage(
            "-g/--resource-group is for `stack group`; a management group stack deploys into a subscription with \
             --deployment-subscription",
        )),
        (ScopeKind::ManagementGroup, None) => {
            let Some(group) = &scope.management_group else {
                return Err(Failure::usage(
                    "the following argument is required for `stack mg`: -m/--management-group-id",
                ));
            };
            let id = ResourceId::management_group(group).map_err(|e| {
                Failure::usage(format!("'{group}' is not a valid management group id: {e}"))
            })?;
            Ok(id.to_string())
        }
    }
}

/// The stack body the flags describe (template and `-p` read and checked before anything is sent), with the files
/// read (to locate the service's findings in).
fn stack_request(
    target: &TargetArgs,
    kind: ScopeKind,
    a: &StackFlags,
) -> Result<(DeploymentStack, InputFiles), Failure> {
    match kind {
        ScopeKind::Subscription if a.location.is_none() => {
            return Err(Failure::usage(
                "the following argument is required for `stack sub`: -l/--location",
            ));
        }
        ScopeKind::ManagementGroup if a.location.is_none() => {
            return Err(Failure::usage(
                "the following argument is required for `stack mg`: -l/--location",
            ));
        }
        _ => {}
    }
    let deployment_scope = match (&a.deployment_resource_group, &a.deployment_subscription, kind) {
        (None, None, _) => None,
        (Some(group), None, ScopeKind::Subscription) => Some(target.group_scope(group)?),
        (None, Some(subscription), ScopeKind::ManagementGroup) => Some(
            ResourceId::subscription(subscription)
                .map_err(|e| {
                    Failure::usage(format!(
                        "--deployment-subscription '{subscription}' is not a valid subscription id: {e}"
                    ))
                })?
                .to_string(),
        ),
        (Some(_), _, _) => {
            return Err(Failure::usage(
                "--deployment-resource-group is for `stack sub`: a resource group stack deploys into its own group",
            ));
        }
        (None, Some(_), _) => {
            return Err(Failure::usage(
                "--deployment-subscription is for `stack mg`",
            ));
        }
    };
    let inputs = read_template_inputs(&a.source, &a.parameters)?;
    let deny_settings = DenySettings {
        mode: match a.deny_settings_mode {
            DenyMode::None => DenySettingsMode::None,
            DenyMode::DenyDelete => DenySettingsMode::DenyDelete,
            DenyMode::DenyWriteAndDelete => DenySettingsMode::DenyWriteAndDelete,
        },
        excluded_principals: non_empty(&a.deny_excluded_principals),
        excluded_actions: non_empty(&a.deny_excluded_actions),
        apply_to_child_scopes: a.deny_apply_to_child_scopes.then_some(true),
    };
    let mut p = DeploymentStackProperties::new(
        unmanage_action(a.action_on_unmanage, a.resources_without_delete_support)?,
        deny_settings,
    );
    p.template = inputs.template;
    p.template_link = inputs.template_link;
    if !inputs.parameters.is_empty() {
        p.parameters = Some(DeploymentParameters(inputs.parameters));
    }
    if !inputs.extension_configs.is_empty() {
        let configs: ExtensionConfigs =
            serde_json::from_value(Value::Object(inputs.extension_configs))
                .map_err(|e| Failure::usage(format!("the extension configs are not valid: {e}")))?;
        p.extension_configs = Some(configs);
    }
    if let Some(definitions) = inputs.external_input_definitions {
        p.external_input_definitions = Some(serde_json::from_value(definitions).map_err(|e| {
            Failure::usage(format!("the external input definitions are not valid: {e}"))
        })?);
    }
    p.deployment_scope = deployment_scope;
    p.description = a.description.clone();
    p.bypass_stack_out_of_sync_error = a.bypass_out_of_sync.then_some(true);
    p.adopt_existing_resources = a.adopt.then_some(true);
    p.protect = non_empty(&a.protect);
    p.retain = non_empty(&a.retain);
    p.bypass_protection = a.bypass_protection.then_some(true);
    let stack = DeploymentStack {
        id: None,
        name: None,
        resource_type: None,
        system_data: None,
        location: a.location.clone(),
        tags: a.tags.as_deref().map(parse_tags).transpose()?,
        properties: p,
    };
    Ok((stack, inputs.files))
}

fn non_empty(values: &[String]) -> Option<Vec<String>> {
    (!values.is_empty()).then(|| values.to_vec())
}

/// The what-if result resource for `request` against the stack `{scope}/.../deploymentStacks/{name}`.
fn what_if_request(
    scope: &str,
    name: &str,
    request: DeploymentStack,
) -> Result<DeploymentStacksWhatIfResult, Failure> {
    let mut body = serde_json::to_value(&request).map_err(|e| Failure::Other(e.into()))?;
    body["properties"]["deploymentStackResourceId"] = json!(format!(
        "{scope}/providers/Microsoft.Resources/deploymentStacks/{name}"
    ));
    body["properties"]["retentionInterval"] = json!("P1D");
    serde_json::from_value(body)
        .map_err(|e| Failure::usage(format!("the what-if request is not valid: {e}")))
}

/// The ARM error a result body carries (`error`), if any.
fn carried_error(result: &Value, status: u16) -> Option<Failure> {
    let error = result.get("error").filter(|e| !e.is_null())?;
    let detail: ErrorDetail = serde_json::from_value(error.clone()).unwrap_or_default();
    Some(Failure::Arm(ArmError::from_detail(status, detail)))
}

fn failed(stack: &Value) -> bool {
    stack
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .is_some_and(|s| s.eq_ignore_ascii_case("failed") || s.eq_ignore_ascii_case("canceled"))
}

/// Prints a stack's `properties.error` on stderr (a failed or canceled operation): its template problems as
/// findings in `files`, anything else as ARM's error JSON.
fn report_stack_error(stack: &Value, name: &str, files: &InputFiles) {
    let detail = stack
        .pointer("/properties/error")
        .cloned()
        .and_then(|e| serde_json::from_value(e).ok())
        .unwrap_or_else(|| {
            ErrorDetail::new(
                "DeploymentStackFailed",
                format!("The deployment stack '{name}' did not succeed."),
            )
        });
    check::print_error(&detail, files);
}

fn emit_stack(out: &OutputArgs, stack: &Value) -> CmdResult<()> {
    out.print(Format::Json, stack, TableView::Columns(STACK_COLUMNS))
}

async fn execute(target: &TargetArgs, kind: ScopeKind, command: StackCommand) -> CmdResult {
    // Everything the command line can get wrong is found before anything is opened or sent.
    let scope = match &command {
        StackCommand::Create(a) => scope_of(target, kind, &a.stack.scope)?,
        StackCommand::Validate(a) | StackCommand::WhatIf(a) => scope_of(target, kind, &a.scope)?,
        StackCommand::Show(a) => scope_of(target, kind, &a.named.scope)?,
        StackCommand::Export(a) | StackCommand::Cancel(a) => scope_of(target, kind, &a.scope)?,
        StackCommand::List(a) => scope_of(target, kind, &a.scope)?,
        StackCommand::Delete(a) => scope_of(target, kind, &a.scope)?,
        StackCommand::Drift(a) => scope_of(target, kind, &a.scope)?,
    };
    match command {
        StackCommand::Create(a) => {
            let (request, files) = stack_request(target, kind, &a.stack)?;
            with_backend(target, a.stack.parallelism, async move |backend| {
                if !a.stack.yes {
                    confirm_plan(backend, &scope, &a.stack, &request, &files).await?;
                }
                create(backend, scope, a, request, &files).await
            })
            .await
        }
        StackCommand::Validate(a) => {
            let (request, files) = stack_request(target, kind, &a)?;
            with_backend(target, a.parallelism, async move |backend| {
                let result = backend
                    .validate(&scope, &a.name, &request)
                    .await
                    .map_err(|f| check::explain(f, &files))?;
                if let Some(error) = carried_error(&result, 400) {
                    return Err(check::explain(error, &files));
                }
                a.out.print(
                    Format::Json,
                    &result,
                    TableView::Columns(&[("Name", "/name")]),
                )?;
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        StackCommand::WhatIf(a) => {
            let (request, files) = stack_request(target, kind, &a)?;
            with_backend(target, a.parallelism, async move |backend| {
                let result = predict(backend, &scope, &a.name, &request, &files).await?;
                if a.out.output.is_none() && a.out.query.is_none() {
                    let plan = plan::stack_plan(&a.name, &scope, &result);
                    crate::render::print_stdout(&plan.render(output::color_stdout()))
                        .map_err(|e| Failure::Other(e.into()))?;
                    return Ok(ExitCode::SUCCESS);
                }
                a.out.print(
                    Format::Json,
                    &result,
                    TableView::Rows(plan::stack_rows(&result), plan::ROW_COLUMNS),
                )?;
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        StackCommand::Show(a) => {
            with_backend(target, ParallelismArgs::default(), async move |backend| {
                let stack = backend.get(&scope, &a.named.name).await?;
                emit_stack(&a.named.out, &stack)?;
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        StackCommand::List(a) => {
            with_backend(target, ParallelismArgs::default(), async move |backend| {
                let stacks = backend.list(&scope).await?;
                a.out.print(
                    Format::Json,
                    &Value::Array(stacks),
                    TableView::Columns(STACK_COLUMNS),
                )?;
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        StackCommand::Export(a) => {
            with_backend(target, ParallelismArgs::default(), async move |backend| {
                let exported = backend.export_template(&scope, &a.name).await?;
                a.out.print(Format::Json, &exported, TableView::Auto)?;
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        StackCommand::Cancel(a) => {
            with_backend(target, ParallelismArgs::default(), async move |backend| {
                backend.cancel(&scope, &a.name).await?;
                eprintln!("stack {}: cancel requested", a.name);
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        StackCommand::Drift(a) => {
            with_backend(target, ParallelismArgs::default(), async move |backend| {
                drift::run(backend, &scope, a).await
            })
            .await
        }
        StackCommand::Delete(a) => {
            let action = unmanage_action(a.action_on_unmanage, a.resources_without_delete_support)?;
            if !a.yes
                && !prompt::confirm_unless_scripted(&format!(
                    "Delete stack '{}' ({} its resources)?",
                    a.name, action.resources
                ))?
            {
                return Err(Failure::usage(
                    "not deleted: the deletion was not confirmed",
                ));
            }
            let options = StackDeleteOptions {
                action_on_unmanage: action,
                bypass_stack_out_of_sync_error: a.bypass_out_of_sync,
                bypass_protection: a.bypass_protection,
            };
            with_backend(target, ParallelismArgs::default(), async move |backend| {
                delete(backend, scope, a, options).await
            })
            .await
        }
    }
}

/// Runs `work` on the backend the flags name and closes it, whatever the outcome.
async fn with_backend<F>(target: &TargetArgs, parallelism: ParallelismArgs, work: F) -> CmdResult
where
    F: AsyncFnOnce(&StackBackend) -> CmdResult,
{
    let backend = StackBackend::connect(target, parallelism).await?;
    let result = work(&backend).await;
    backend.close().await;
    result
}

/// The what-if result of creating or updating the stack `name` as `request` describes it; an invalid request is its
/// ARM error, with its template problems located in `files`.
async fn predict(
    backend: &StackBackend,
    scope: &str,
    name: &str,
    request: &DeploymentStack,
    files: &InputFiles,
) -> CmdResult<Value> {
    let request = what_if_request(scope, name, request.clone())?;
    let result = backend
        .what_if(scope, &format!("{name}-whatif"), &request)
        .await
        .map_err(|f| check::explain(f, files))?;
    match carried_error(&result, 400) {
        Some(error) => Err(check::explain(error, files)),
        None => Ok(result),
    }
}

/// Before a create or update without `--yes`: shows the plan on stderr and, when it deletes resources, asks on a
/// terminal; without one such an update is refused (a script says `--yes`). az asks before overwriting any
/// existing stack; cairn asks only when something would be deleted, and shows what.
async fn confirm_plan(
    backend: &StackBackend,
    scope: &str,
    flags: &StackFlags,
    request: &DeploymentStack,
    files: &InputFiles,
) -> CmdResult<()> {
    let result = predict(backend, scope, &flags.name, request, files).await?;
    let plan = plan::stack_plan(&flags.name, scope, &result);
    eprintln!("{}\n", plan.render(output::color_stderr()));
    let deletes = plan.deletes();
    if deletes == 0 {
        return Ok(());
    }
    let question = format!(
        "The update deletes {deletes} resource{} (marked - above). Are you sure you want to update the stack?",
        if deletes == 1 { "" } else { "s" }
    );
    match prompt::ask(&question)? {
        Answer::Yes => Ok(()),
        Answer::No => Err(Failure::usage(
            "not changed: the update of the stack was not confirmed",
        )),
        Answer::NoTerminal => Err(Failure::usage(format!(
            "not changed: the update of stack '{}' deletes {deletes} resource{} (see the plan above) and stdin is \
             not a terminal to ask: pass --yes to update it anyway",
            flags.name,
            if deletes == 1 { "" } else { "s" }
        ))),
    }
}

async fn create(
    backend: &StackBackend,
    scope: String,
    a: CreateArgs,
    request: DeploymentStack,
    files: &InputFiles,
) -> CmdResult {
    let name = &a.stack.name;
    let started = backend
        .create_or_update(&scope, name, &request)
        .await
        .map_err(|f| check::explain(f, files))?;
    // The request (its whole template) and the accepted record (an update's previous managed set) are not needed
    // while the operation is followed: a big stack's are megabytes.
    drop(request);
    let Started {
        stack: accepted,
        poll,
        ended,
        ..
    } = started;
    if a.no_wait {
        if let StackBackend::Remote(_) = backend {
            emit_stack(&a.stack.out, &accepted)?;
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "note: --no-wait needs --server; the in-process engine runs the stack operation to its end first"
        );
    }
    // The accepted record holds no lists of an earlier operation (a PUT clears them): start from it.
    let mut watch = StackWatch::of_put(name, Some(&accepted));
    for line in watch.observe(&accepted, std::time::Duration::ZERO) {
        eprintln!("{line}");
    }
    drop(accepted);
    let Some(stack) = follow(backend, &scope, name, &mut watch, poll, ended, None).await? else {
        return Err(Failure::Arm(ArmError::deployment_stack_not_found(name)));
    };
    // A failed operation prints its error alone, as a failed deployment does: the record is `stack show`'s.
    if failed(&stack) {
        report_stack_error(&stack, name, files);
        return Ok(ExitCode::from(output::EXIT_FAILED));
    }
    emit_stack(&a.stack.out, &stack)?;
    Ok(ExitCode::SUCCESS)
}

async fn delete(
    backend: &StackBackend,
    scope: String,
    a: DeleteArgs,
    options: StackDeleteOptions,
) -> CmdResult {
    let name = &a.name;
    // The record as it was: its lists are the previous operation's, and its managed set says what to account
    // for if the stack is gone before the service reports every resource.
    let before = backend.get(&scope, name).await?;
    let Some(started) = backend.delete(&scope, name, &options).await? else {
        return Err(Failure::Arm(ArmError::deployment_stack_not_found(name)));
    };
    let mut watch = StackWatch::new(name, Some(&before));
    let followed = FollowedDelete {
        action: &options.action_on_unmanage,
        outcome: started.outcome,
    };
    let remaining = follow(
        backend,
        &scope,
        name,
        &mut watch,
        started.poll,
        started.ended,
        Some(followed),
    )
    .await?;
    match remaining {
        None => Ok(ExitCode::SUCCESS),
        // The stack outlived its delete: some resources could not be deleted (they stay `deleteFailed`).
        Some(stack) => {
            emit_stack(&a.out, &stack)?;
            report_stack_error(&stack, name, &InputFiles::default());
            Ok(ExitCode::from(output::EXIT_FAILED))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The `cairn` command line, enough of it to parse `stack` flags.
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: TestCommand,
    }

    #[derive(Subcommand)]
    enum TestCommand {
        Stack(StackArgs),
    }

    fn template_file(dir: &std::path::Path) -> String {
        let path = dir.join("main.json");
        std::fs::write(
            &path,
            json!({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                   "contentVersion": "1.0.0.0", "parameters": {"a": {"type": "int"}}, "resources": []})
            .to_string(),
        )
        .unwrap();
        path.display().to_string()
    }

    /// The request `cairn stack ... create <args>` would send, with its scope kind.
    fn request_for(args: &[&str]) -> Result<DeploymentStack, Failure> {
        let mut line = vec!["cairn", "stack"];
        line.extend_from_slice(args);
        let Cli {
            command: TestCommand::Stack(parsed),
        } = Cli::try_parse_from(line).unwrap();
        let (kind, command) = match parsed.scope {
            StackScope::Group { command } => (ScopeKind::Group, command),
            StackScope::Sub { command } => (ScopeKind::Subscription, command),
            StackScope::Mg { command } => (ScopeKind::ManagementGroup, command),
        };
        let StackCommand::Create(a) = command else {
            panic!("not a create")
        };
        stack_request(&parsed.target, kind, &a.stack).map(|(stack, _)| stack)
    }

    #[test]
    fn presets_map_to_unmanage_actions() {
        let all = UnmanagePreset::DeleteAll.action().unwrap();
        assert_eq!(
            serde_json::to_value(&all).unwrap(),
            json!({"resources": "delete", "resourceGroups": "delete", "managementGroups": "delete"})
        );
        let resources = unmanage_action(
            UnmanagePreset::DeleteResources,
            Some(WithoutDeleteSupport::Detach),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&resources).unwrap(),
            json!({"resources": "delete", "resourceGroups": "detach", "managementGroups": "detach",
                   "resourcesWithoutDeleteSupport": "detach"})
        );
        let detach = UnmanagePreset::DetachAll.action().unwrap();
        assert_eq!(
            serde_json::to_value(&detach).unwrap()["resources"],
            "detach"
        );
    }

    #[test]
    fn az_flags_fill_the_stack_body() {
        let dir = tempfile::tempdir().unwrap();
        let file = template_file(dir.path());
        let request = request_for(&[
            "sub",
            "create",
            "-n",
            "st",
            "-l",
            "local",
            "-f",
            &file,
            "-p",
            "a=1",
            "-p",
            "a=2",
            "--aou",
            "deleteResources",
            "--resources-without-delete-support",
            "detach",
            "--deny-settings-mode",
            "denyDelete",
            "--deny-settings-excluded-principals",
            "p1",
            "p2",
            "--ea",
            "Microsoft.Web/sites/write",
            "--deny-settings-apply-to-child-scopes",
            "--tags",
            "env=dev",
            "team=a",
            "--deployment-resource-group",
            "app",
            "--description",
            "d",
        ])
        .unwrap();
        let body = serde_json::to_value(&request).unwrap();
        let p = &body["properties"];
        assert_eq!(p["parameters"], json!({"a": {"value": 2}}));
        assert_eq!(
            p["actionOnUnmanage"]["resourcesWithoutDeleteSupport"],
            "detach"
        );
        assert_eq!(
            p["denySettings"],
            json!({"mode": "denyDelete", "excludedPrincipals": ["p1", "p2"],
                   "excludedActions": ["Microsoft.Web/sites/write"], "applyToChildScopes": true})
        );
        assert_eq!(
            p["deploymentScope"],
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/app"
        );
        assert_eq!(body["tags"], json!({"env": "dev", "team": "a"}));
        assert_eq!(body["location"], "local");
        assert_eq!(p["description"], "d");
    }

    #[test]
    fn enum_values_match_ignoring_case() {
        let dir = tempfile::tempdir().unwrap();
        let file = template_file(dir.path());
        for (preset, without, deny) in [
            ("DELETERESOURCES", "DETACH", "DENYDELETE"),
            ("deleteresources", "Detach", "denydelete"),
            ("deleteResources", "detach", "denyDelete"),
        ] {
            let request = request_for(&[
                "group",
                "create",
                "-g",
                "rg",
                "-n",
                "st",
                "-f",
                &file,
                "--action-on-unmanage",
                preset,
                "--resources-without-delete-support",
                without,
                "--deny-settings-mode",
                deny,
            ])
            .unwrap();
            let body = serde_json::to_value(&request).unwrap();
            assert_eq!(
                body["properties"]["actionOnUnmanage"],
                json!({"resources": "delete", "resourceGroups": "detach", "managementGroups": "detach",
                       "resourcesWithoutDeleteSupport": "detach"}),
                "{preset}"
            );
            assert_eq!(body["properties"]["denySettings"]["mode"], "denyDelete");
        }
    }

    #[test]
    fn scope_flags_are_checked_before_anything_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = template_file(dir.path());
        let base = ["-n", "st", "-f", file.as_str(), "--aou", "detachAll"];
        let sub_without_location = [&["sub", "create"][..], &base[..]].concat();
        assert!(
            matches!(request_for(&sub_without_location), Err(Failure::Usage(m)) if m.contains("--location"))
        );
        let group_with_deployment_group = [
            &["group", "create", "-g", "rg"][..],
            &base[..],
            &["--deployment-resource-group", "x"][..],
        ]
        .concat();
        assert!(matches!(
            request_for(&group_with_deployment_group),
            Err(Failure::Usage(m)) if m.contains("--deployment-resource-group")
        ));
        let minimal = [&["group", "create", "-g", "rg"][..], &base[..]].concat();
        let body = serde_json::to_value(request_for(&minimal).unwrap()).unwrap();
        assert_eq!(body["properties"]["denySettings"], json!({"mode": "none"}));
        assert!(body.get("tags").is_none());
        assert!(body["properties"].get("parameters").is_none());
    }

    #[test]
    fn carried_errors_become_arm_failures() {
        let result = json!({"error": {"code": "InvalidTemplate", "message": "m", "target": "t"}});
        let Some(Failure::Arm(e)) = carried_error(&result, 400) else {
            panic!("no failure")
        };
        assert_eq!((e.status(), e.code()), (400, "InvalidTemplate"));
        assert!(carried_error(&json!({"error": null, "name": "x"}), 400).is_none());
    }
}

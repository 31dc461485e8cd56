//! `cairn stack group|sub create|show|list|delete|validate|export`: deployment stacks on the in-process engine
//! ($CAIRN_HOME), with az's flags (`--action-on-unmanage detachAll|deleteResources|deleteAll`,
//! `--deny-settings-mode`, `--yes`). Commands wait for the stack operation to end.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cairn_arm::models::stack::{
    ActionOnUnmanage, DenySettings, DenySettingsMode, DeploymentStack, DeploymentStackProperties,
    StackDeleteOptions,
};
use cairn_engine::{Engine, EngineSettings, Providers, RecoveryPolicy};
use cairn_host::{ExtensionHost, HostSettings, Registry};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::Store;
use cairn_store_sqlite::SqliteStore;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::backend::TargetArgs;
use crate::output::{self, CmdResult, Failure, Format};

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
}

#[derive(Subcommand)]
enum StackCommand {
    /// Create or update a stack and wait for it.
    Create(CreateArgs),
    /// Validate a stack without deploying.
    Validate(CreateArgs),
    /// Show a stack.
    Show(NameArgs),
    /// List the stacks of the scope.
    List(ListArgs),
    /// Delete a stack, unmanaging its resources as `--action-on-unmanage` says.
    Delete(DeleteArgs),
    /// Print the template of the stack's deployment.
    Export(NameArgs),
    /// Predict what creating or updating the stack would change: resources created, modified, unchanged, and
    /// the managed resources that would be deleted or detached (2025-07-01 what-if result).
    WhatIf(CreateArgs),
}

#[derive(Clone, Copy, ValueEnum)]
#[value(rename_all = "verbatim")]
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

#[derive(Clone, Copy, ValueEnum)]
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
    #[arg(short = 'g', long = "resource-group")]
    group: Option<String>,
}

#[derive(Args)]
struct CreateArgs {
    /// Stack name.
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Template file (ARM JSON).
    #[arg(short = 'f', long = "template-file")]
    template_file: PathBuf,
    /// A parameters file (`params.json` or `@params.json`; may hold `extensionConfigs`).
    #[arg(short = 'p', long = "parameters")]
    parameters: Option<String>,
    /// What happens to resources that leave the stack.
    #[arg(long = "action-on-unmanage", value_enum)]
    action_on_unmanage: UnmanagePreset,
    /// Deny settings mode (recorded; cairn applies no deny assignments).
    #[arg(long = "deny-settings-mode", value_enum, default_value = "none")]
    deny_settings_mode: DenyMode,
    /// Location (subscription stacks).
    #[arg(short = 'l', long)]
    location: Option<String>,
    #[arg(long)]
    description: Option<String>,
    /// Proceed even if the stack's resource list may be inaccurate (an earlier operation was interrupted).
    #[arg(long = "bypass-stack-out-of-sync-error")]
    bypass_out_of_sync: bool,
    /// Do not ask before resources may be deleted.
    #[arg(short = 'y', long)]
    yes: bool,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Json)]
    output: Format,
}

#[derive(Args)]
struct NameArgs {
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    scope: ScopeArgs,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Json)]
    output: Format,
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Json)]
    output: Format,
}

#[derive(Args)]
struct DeleteArgs {
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    scope: ScopeArgs,
    /// What happens to the stack's resources.
    #[arg(long = "action-on-unmanage", value_enum)]
    action_on_unmanage: UnmanagePreset,
    #[arg(long = "bypass-stack-out-of-sync-error")]
    bypass_out_of_sync: bool,
    /// Do not ask for confirmation (it is only asked on a terminal).
    #[arg(short = 'y', long)]
    yes: bool,
}

const STACK_COLUMNS: &[(&str, &str)] = &[
    ("Name", "/name"),
    ("State", "/properties/provisioningState"),
    ("DeploymentId", "/properties/deploymentId"),
];

pub(crate) fn run(args: StackArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(async move {
        let (is_group, command) = match args.scope {
            StackScope::Group { command } => (true, command),
            StackScope::Sub { command } => (false, command),
        };
        match execute(&args.target, is_group, command).await {
            Ok(code) => code,
            Err(failure) => failure.report(),
        }
    }))
}

fn scope_of(target: &TargetArgs, is_group: bool, scope: &ScopeArgs) -> Result<String, Failure> {
    match (is_group, &scope.group) {
        (true, Some(group)) => target.group_scope(group),
        (true, None) => Err(Failure::usage("`stack group` needs -g/--resource-group")),
        (false, _) => target.subscription_scope(),
    }
}

/// The service over $CAIRN_HOME, like the other commands' in-process engine.
struct Local {
    service: StackService,
    store: Arc<dyn Store>,
}

async fn open(target: &TargetArgs) -> Result<Local, Failure> {
    if target.server.is_some() {
        return Err(Failure::usage(
            "`cairn stack` runs on the in-process engine only for now; with a server, call its \
             .../providers/Microsoft.Resources/deploymentStacks API",
        ));
    }
    let home = crate::local::cairn_home()?;
    let registry = registry(target.registry.as_deref(), &home)?;
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&home)
            .await
            .with_context(|| format!("cannot open the cairn data directory {}", home.display()))?,
    );
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings::default(),
        "cairn://cli",
    ));
    let settings = EngineSettings {
        recovery: RecoveryPolicy::Fail,
        claim_ttl: Duration::from_secs(20),
        heartbeat_interval: Duration::from_secs(5),
        ..EngineSettings::default()
    };
    let engine = Engine::new(store.clone(), host.clone(), Providers::empty(), settings)?;
    engine.recover().await?;
    let service = StackService::new(
        engine,
        store.clone(),
        host,
        Providers::empty(),
        StackServiceSettings {
            lease_ttl: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(5),
            ..StackServiceSettings::default()
        },
    );
    Ok(Local { service, store })
}

fn read_json(path: &Path, what: &str) -> Result<Value, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("cannot read the {what} {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "the {what} {} is not valid JSON: {e}",
            path.display()
        ))
    })
}

fn stack_request(a: &CreateArgs) -> Result<DeploymentStack, Failure> {
    let template = read_json(&a.template_file, "template file")?;
    let mut properties = json!({ "template": template });
    if let Some(parameters) = &a.parameters {
        let file = read_json(
            Path::new(parameters.trim_start_matches('@')),
            "parameters file",
        )?;
        let values = file.get("parameters").cloned().unwrap_or(file.clone());
        properties["parameters"] = values;
        if let Some(configs) = file.get("extensionConfigs") {
            properties["extensionConfigs"] = configs.clone();
        }
    }
    let mut request: DeploymentStack = serde_json::from_value(json!({
        "location": a.location,
        "properties": properties_with_required(properties)?,
    }))
    .map_err(|e| Failure::usage(format!("the stack request is not valid: {e}")))?;
    let deny = match a.deny_settings_mode {
        DenyMode::None => DenySettingsMode::None,
        DenyMode::DenyDelete => DenySettingsMode::DenyDelete,
        DenyMode::DenyWriteAndDelete => DenySettingsMode::DenyWriteAndDelete,
    };
    let p: &mut DeploymentStackProperties = &mut request.properties;
    p.action_on_unmanage = a.action_on_unmanage.action()?;
    p.deny_settings = DenySettings {
        mode: deny,
        ..DenySettings::none()
    };
    p.description = a.description.clone();
    p.bypass_stack_out_of_sync_error = a.bypass_out_of_sync.then_some(true);
    Ok(request)
}

/// The two required settings as placeholders so the body parses; the flags set them right after.
fn properties_with_required(mut properties: Value) -> Result<Value, Failure> {
    let Some(map) = properties.as_object_mut() else {
        return Err(Failure::usage("the stack request is not an object"));
    };
    map.insert("actionOnUnmanage".into(), json!({"resources": "detach"}));
    map.insert("denySettings".into(), json!({"mode": "none"}));
    Ok(Value::Object(std::mem::take(map)))
}

/// Waits until the stack's operation ends; `None` when the stack is gone.
/// Waits for the stack's operation to end, reporting each state change (deploying, deleting resources, ...) with
/// its elapsed time on stderr, and the unmanage tally at the end.
async fn wait(service: &StackService, scope: &str, name: &str) -> Result<Option<Value>, Failure> {
    let started = std::time::Instant::now();
    let mut last_state = String::new();
    loop {
        match service.get(scope, name).await {
            Ok(stack) => {
                let value = serde_json::to_value(&stack).map_err(|e| Failure::Other(e.into()))?;
                let state = value["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_string();
                if state != last_state {
                    eprintln!(
                        "stack {name}: {state} ({:.1}s)",
                        started.elapsed().as_secs_f64()
                    );
                    last_state = state;
                }
                let terminal = stack
                    .properties
                    .provisioning_state
                    .as_ref()
                    .is_some_and(|s| s.is_terminal());
                if terminal {
                    let count = |key: &str| value["properties"][key].as_array().map_or(0, Vec::len);
                    eprintln!(
                        "stack {name}: {} managed, {} deleted, {} detached, {} failed",
                        count("resources"),
                        count("deletedResources"),
                        count("detachedResources"),
                        count("failedResources")
                    );
                    return Ok(Some(value));
                }
            }
            Err(error) if error.status() == 404 => {
                if !last_state.is_empty() {
                    eprintln!(
                        "stack {name}: deleted ({:.1}s)",
                        started.elapsed().as_secs_f64()
                    );
                }
                return Ok(None);
            }
            Err(error) => return Err(Failure::Arm(error)),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn failed(stack: &Value) -> bool {
    stack["properties"]["provisioningState"] == "failed"
}

async fn execute(target: &TargetArgs, is_group: bool, command: StackCommand) -> CmdResult {
    let (name, scope_args) = match &command {
        StackCommand::Create(a) | StackCommand::Validate(a) | StackCommand::WhatIf(a) => {
            (Some(a.name.as_str()), &a.scope)
        }
        StackCommand::Show(a) | StackCommand::Export(a) => (Some(a.name.as_str()), &a.scope),
        StackCommand::List(a) => (None, &a.scope),
        StackCommand::Delete(a) => (Some(a.name.as_str()), &a.scope),
    };
    let scope = scope_of(target, is_group, scope_args)?;
    let name = name.unwrap_or_default().to_owned();
    if let StackCommand::Delete(a) = &command
        && !a.yes
        && !confirm(&format!(
            "Delete stack '{name}' ({:?} its resources)? (y/n): ",
            a.action_on_unmanage.action()?.resources
        ))?
    {
        return Err(Failure::usage(
            "not deleted: the deletion was not confirmed",
        ));
    }
    if let StackCommand::Create(a) = &command
        && !a.yes
        && !matches!(a.action_on_unmanage, UnmanagePreset::DetachAll)
        && !confirm("Resources that leave the stack will be deleted. Continue? (y/n): ")?
    {
        return Err(Failure::usage("not changed: the update was not confirmed"));
    }
    let local = open(target).await?;
    let result = run_command(&local.service, &scope, &name, command).await;
    let _ = local.store.close().await;
    result
}

async fn run_command(
    service: &StackService,
    scope: &str,
    name: &str,
    command: StackCommand,
) -> CmdResult {
    match command {
        StackCommand::Create(a) => {
            let request = stack_request(&a)?;
            service
                .create_or_update(scope, name, request, None)
                .await
                .map_err(Failure::Arm)?;
            let Some(stack) = wait(service, scope, name).await? else {
                return Err(Failure::usage(format!(
                    "the stack '{name}' disappeared while it was deployed"
                )));
            };
            output::emit_one(a.output, &stack, STACK_COLUMNS)?;
            if failed(&stack) {
                return Ok(ExitCode::from(output::EXIT_FAILED));
            }
        }
        StackCommand::Validate(a) => {
            let request = stack_request(&a)?;
            let result = service
                .validate(scope, name, request)
                .await
                .map_err(Failure::Arm)?;
            let value = serde_json::to_value(result).map_err(|e| Failure::Other(e.into()))?;
            output::emit_one(a.output, &value, &[("Name", "/name")])?;
        }
        StackCommand::WhatIf(a) => {
            let request = stack_request(&a)?;
            let mut body = serde_json::to_value(&request).map_err(|e| Failure::Other(e.into()))?;
            body["properties"]["deploymentStackResourceId"] = json!(format!(
                "{scope}/providers/Microsoft.Resources/deploymentStacks/{name}"
            ));
            body["properties"]["retentionInterval"] = json!("P1D");
            let what_if = serde_json::from_value(body)
                .map_err(|e| Failure::usage(format!("the what-if request is not valid: {e}")))?;
            let accepted = service
                .what_if(scope, &format!("{name}-whatif"), what_if)
                .await
                .map_err(Failure::Arm)?;
            let value =
                serde_json::to_value(accepted.result).map_err(|e| Failure::Other(e.into()))?;
            output::emit_one(a.output, &value, &[("Name", "/name")])?;
        }
        StackCommand::Show(a) => {
            let stack = service.get(scope, name).await.map_err(Failure::Arm)?;
            let value = serde_json::to_value(stack).map_err(|e| Failure::Other(e.into()))?;
            output::emit_one(a.output, &value, STACK_COLUMNS)?;
        }
        StackCommand::List(a) => {
            let mut all = Vec::new();
            let mut page = cairn_store::PageRequest::default();
            loop {
                let listed = service
                    .list(scope, page.clone())
                    .await
                    .map_err(Failure::Arm)?;
                for stack in listed.value {
                    all.push(serde_json::to_value(stack).map_err(|e| Failure::Other(e.into()))?);
                }
                match listed.continuation {
                    Some(token) => page.continuation = Some(token),
                    None => break,
                }
            }
            output::emit_list(a.output, &all, STACK_COLUMNS)?;
        }
        StackCommand::Delete(a) => {
            let options = StackDeleteOptions {
                action_on_unmanage: a.action_on_unmanage.action()?,
                bypass_stack_out_of_sync_error: a.bypass_out_of_sync,
            };
            let started = service
                .delete(scope, name, options, None)
                .await
                .map_err(Failure::Arm)?;
            if !started {
                return Err(Failure::Arm(
                    cairn_arm::ArmError::deployment_stack_not_found(name),
                ));
            }
            if let Some(stack) = wait(service, scope, name).await? {
                output::emit_one(Format::Json, &stack, STACK_COLUMNS)?;
                return Ok(ExitCode::from(output::EXIT_FAILED));
            }
        }
        StackCommand::Export(a) => {
            let exported = service
                .export_template(scope, name)
                .await
                .map_err(Failure::Arm)?;
            let value = serde_json::to_value(exported).map_err(|e| Failure::Other(e.into()))?;
            output::emit_one(a.output, &value, &[])?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks on a terminal; scripts (stdin not a terminal) are not asked, as `--yes` is implied.
fn confirm(question: &str) -> Result<bool, Failure> {
    if !std::io::stdin().is_terminal() {
        return Ok(true);
    }
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::Other(e.into()))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

fn registry(flag: Option<&Path>, home: &Path) -> Result<Registry, Failure> {
    crate::extension::load_registry(flag, home).map_err(|e| Failure::Usage(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    #[test]
    fn presets_map_to_unmanage_actions() {
        let all = UnmanagePreset::DeleteAll.action().unwrap();
        assert_eq!(
            serde_json::to_value(&all).unwrap()["resourceGroups"],
            "delete"
        );
        let resources = UnmanagePreset::DeleteResources.action().unwrap();
        assert_eq!(
            serde_json::to_value(&resources).unwrap()["resources"],
            "delete"
        );
        assert_eq!(
            serde_json::to_value(&resources).unwrap()["resourceGroups"],
            "detach"
        );
        let detach = UnmanagePreset::DetachAll.action().unwrap();
        assert_eq!(
            serde_json::to_value(&detach).unwrap()["resources"],
            "detach"
        );
    }

    #[test]
    fn required_settings_are_filled_for_parsing() {
        let body = properties_with_required(json!({"template": {}})).unwrap();
        assert_eq!(body["actionOnUnmanage"]["resources"], "detach");
        assert!(properties_with_required(json!([])).is_err());
        let _: Map<String, Value> = serde_json::from_value(body).unwrap();
    }
}

//! `cairn group create|show|exists|list|delete`: resource groups, with az's flags (`-n`, `-l`, `--tags`, `-y`, `-o`).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::backend::TargetArgs;
use crate::output::{CmdResult, Failure, Format, OutputArgs, TableView};

#[derive(Args)]
pub(crate) struct GroupArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Subcommand)]
enum GroupCommand {
    /// Create a resource group (or update its tags).
    Create(CreateArgs),
    /// Show a resource group.
    Show(NameArgs),
    /// Say whether a resource group exists: `true` or `false` on stdout, exit 0 either way (az's `group exists`).
    Exists(NameArgs),
    /// List the resource groups of the subscription.
    List(ListArgs),
    /// Delete a resource group with its deployment history and Key Vault vaults.
    Delete(DeleteArgs),
}

#[derive(Args)]
struct CreateArgs {
    /// Resource group name.
    #[arg(
        short = 'n',
        long = "name",
        visible_alias = "resource-group",
        short_alias = 'g'
    )]
    name: String,
    /// Location (any name: cairn has no regions; `local` is customary).
    #[arg(short = 'l', long)]
    location: String,
    /// Tags: `key=value` pairs (space separated, repeatable).
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    tags: Vec<String>,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct NameArgs {
    /// Resource group name.
    #[arg(
        short = 'n',
        long = "name",
        visible_alias = "resource-group",
        short_alias = 'g'
    )]
    name: String,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct DeleteArgs {
    /// Resource group name.
    #[arg(
        short = 'n',
        long = "name",
        visible_alias = "resource-group",
        short_alias = 'g'
    )]
    name: String,
    /// Do not ask for confirmation (it is only asked on a terminal).
    #[arg(short = 'y', long)]
    yes: bool,
}

const GROUP_COLUMNS: &[(&str, &str)] = &[
    ("Name", "/name"),
    ("Location", "/location"),
    ("Status", "/properties/provisioningState"),
];

pub(crate) fn run(args: GroupArgs) -> anyhow::Result<ExitCode> {
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

async fn execute(target: &TargetArgs, command: GroupCommand) -> CmdResult {
    match command {
        GroupCommand::Create(a) => {
            let id = target.group_scope(&a.name)?;
            let mut body = json!({ "location": a.location });
            if !a.tags.is_empty() {
                body["tags"] = json!(crate::inputs::parse_tags(&a.tags)?);
            }
            let backend = target.connect().await?;
            let group = backend.put_group(&id, &body).await;
            backend.close().await;
            a.out
                .print(Format::Json, &group?, TableView::Columns(GROUP_COLUMNS))?;
        }
        GroupCommand::Show(a) => {
            let id = target.group_scope(&a.name)?;
            let backend = target.connect().await?;
            let group = backend.get_group(&id).await;
            backend.close().await;
            a.out
                .print(Format::Json, &group?, TableView::Columns(GROUP_COLUMNS))?;
        }
        GroupCommand::Exists(a) => {
            let id = target.group_scope(&a.name)?;
            let backend = target.connect().await?;
            let group = backend.get_group(&id).await;
            backend.close().await;
            let exists = match group {
                Ok(_) => true,
                Err(Failure::Arm(error)) if error.status() == 404 => false,
                Err(failure) => return Err(failure),
            };
            a.out.print(Format::Json, &json!(exists), TableView::Auto)?;
        }
        GroupCommand::List(a) => {
            target.subscription_scope()?;
            let backend = target.connect().await?;
            let groups = backend.list_groups(&target.subscription).await;
            backend.close().await;
            a.out.print(
                Format::Json,
                &Value::Array(groups?),
                TableView::Columns(GROUP_COLUMNS),
            )?;
        }
        GroupCommand::Delete(a) => {
            let id = target.group_scope(&a.name)?;
            if !a.yes
                && !crate::prompt::confirm_unless_scripted(&format!(
                    "Delete resource group '{}' with its deployment history and vaults?",
                    a.name
                ))?
            {
                return Err(Failure::usage(
                    "not deleted: the deletion was not confirmed",
                ));
            }
            let backend = target.connect().await?;
            let result = backend.delete_group(&id).await;
            backend.close().await;
            result?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

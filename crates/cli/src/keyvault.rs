//! `cairn keyvault create` and `cairn keyvault secret set|show|list`: the local Key Vault (in-process engine).
//! `secret show` is the one command that prints a secret value, because that is what it is asked for; `set` and
//! `list` print attributes only.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use cairn_store::SecretString;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::backend::{Backend, TargetArgs};
use crate::output::{CmdResult, Failure, Format, OutputArgs, TableView};

#[derive(Args)]
pub(crate) struct KeyvaultArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(subcommand)]
    command: KeyvaultCommand,
}

#[derive(Subcommand)]
enum KeyvaultCommand {
    /// Create a vault (or update its tags) in a resource group.
    Create(CreateArgs),
    /// Secrets in a vault.
    #[command(subcommand)]
    Secret(SecretCommand),
}

#[derive(Args)]
struct CreateArgs {
    /// Vault name.
    #[arg(short = 'n', long)]
    name: String,
    /// Resource group.
    #[arg(short = 'g', long = "resource-group")]
    resource_group: String,
    /// Location [default: the resource group's].
    #[arg(short = 'l', long)]
    location: Option<String>,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Subcommand)]
enum SecretCommand {
    /// Set a secret's value (a new version unless the value is unchanged). Prints the secret without its value.
    Set(SetArgs),
    /// Show a secret with its value.
    #[command(disable_version_flag = true)]
    Show(ShowArgs),
    /// List a vault's secrets (no values).
    List(VaultArgs),
}

#[derive(Args)]
struct VaultArgs {
    /// The vault's name.
    #[arg(long = "vault-name", value_name = "NAME")]
    vault_name: String,
    /// Resource group, when several vaults in the subscription share the name.
    #[arg(short = 'g', long = "resource-group")]
    resource_group: Option<String>,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct SetArgs {
    #[command(flatten)]
    vault: VaultArgs,
    /// Secret name.
    #[arg(short = 'n', long)]
    name: String,
    /// The value (beware: command lines are visible to other local users; prefer --file).
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    value: Option<String>,
    /// Read the value from a file (`-` for stdin), as UTF-8 text.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// Content type (e.g. `text/plain`).
    #[arg(long)]
    content_type: Option<String>,
}

#[derive(Args)]
struct ShowArgs {
    #[command(flatten)]
    vault: VaultArgs,
    /// Secret name.
    #[arg(short = 'n', long)]
    name: String,
    /// A version id [default: the latest].
    #[arg(long)]
    version: Option<String>,
}

const SECRET_COLUMNS: &[(&str, &str)] = &[
    ("Name", "/name"),
    ("Enabled", "/attributes/enabled"),
    ("Content type", "/contentType"),
    ("Id", "/id"),
];

pub(crate) fn run(args: KeyvaultArgs) -> anyhow::Result<ExitCode> {
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

async fn execute(target: &TargetArgs, command: KeyvaultCommand) -> CmdResult {
    match command {
        KeyvaultCommand::Create(a) => {
            let group = target.group_scope(&a.resource_group)?;
            let backend = target.connect().await?;
            let result = create_vault(&backend, &group, &a).await;
            backend.close().await;
            a.out.print(
                Format::Json,
                &result?,
                TableView::Columns(&[
                    ("Name", "/name"),
                    ("Location", "/location"),
                    ("Vault URI", "/properties/vaultUri"),
                ]),
            )?;
        }
        KeyvaultCommand::Secret(SecretCommand::Set(a)) => {
            // Read the value before opening anything, so a bad --file fails fast.
            let value = secret_value(&a)?;
            let backend = target.connect().await?;
            let result = async {
                let vault = find_vault(&backend, target, &a.vault).await?;
                backend
                    .set_secret(&vault, &a.name, value, a.content_type.clone())
                    .await
            }
            .await;
            backend.close().await;
            a.vault.out.print(
                Format::Json,
                &result?.json,
                TableView::Columns(SECRET_COLUMNS),
            )?;
        }
        KeyvaultCommand::Secret(SecretCommand::Show(a)) => {
            let backend = target.connect().await?;
            let result = async {
                let vault = find_vault(&backend, target, &a.vault).await?;
                backend
                    .show_secret(&vault, &a.name, a.version.as_deref())
                    .await
            }
            .await;
            backend.close().await;
            let mut columns = SECRET_COLUMNS.to_vec();
            columns.push(("Value", "/value"));
            a.vault
                .out
                .print(Format::Json, &result?.json, TableView::Columns(&columns))?;
        }
        KeyvaultCommand::Secret(SecretCommand::List(a)) => {
            let backend = target.connect().await?;
            let result = async {
                let vault = find_vault(&backend, target, &a).await?;
                backend.list_secrets(&vault).await
            }
            .await;
            backend.close().await;
            let items: Vec<Value> = result?.into_iter().map(|s| s.json).collect();
            a.out.print(
                Format::Json,
                &Value::Array(items),
                TableView::Columns(SECRET_COLUMNS),
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn create_vault(backend: &Backend, group: &str, args: &CreateArgs) -> Result<Value, Failure> {
    // The group must exist, as in Azure; its location is the vault's default.
    let group_record = backend.get_group(group).await?;
    let location = match &args.location {
        Some(l) => l.clone(),
        None => group_record["location"]
            .as_str()
            .unwrap_or("local")
            .to_string(),
    };
    let id = format!("{group}/providers/Microsoft.KeyVault/vaults/{}", args.name);
    let body = json!({
        "location": location,
        "properties": {
            "tenantId": crate::backend::LOCAL_SUBSCRIPTION,
            "sku": { "family": "A", "name": "standard" },
        },
    });
    backend.put_vault(&id, &body).await
}

async fn find_vault(
    backend: &Backend,
    target: &TargetArgs,
    args: &VaultArgs,
) -> Result<String, Failure> {
    let subscription = target.subscription_scope()?;
    let group = args
        .resource_group
        .as_deref()
        .map(|g| target.group_scope(g))
        .transpose()?;
    backend
        .find_vault(&subscription, group.as_deref(), &args.vault_name)
        .await
}

fn secret_value(args: &SetArgs) -> Result<SecretString, Failure> {
    match (&args.value, &args.file) {
        (Some(value), _) => Ok(SecretString::from(value.clone())),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Failure::usage(format!("cannot read the value from stdin: {e}")))?;
            Ok(SecretString::from(text))
        }
        (None, Some(path)) => std::fs::read_to_string(path)
            .map(SecretString::from)
            .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display()))),
        (None, None) => Err(Failure::usage("pass --value or --file")),
    }
}

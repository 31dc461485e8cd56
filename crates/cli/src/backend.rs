//! Where the resource commands send their requests: the engine in this process on `$CAIRN_HOME` (the embedded
//! default) or a cairn server (`--server URL`). Both answer in ARM's JSON shapes with ARM errors, so the commands
//! do not care which one they talk to.

use std::path::PathBuf;

use cairn_arm::models::deployment::{Deployment, DeploymentWhatIf};
use cairn_arm::{ArmError, ResourceId};
use clap::Args;
use serde_json::Value;

use cairn_client::Client;

use crate::local::LocalBackend;
use crate::output::Failure;
use crate::progress::Progress;

/// The subscription commands use unless `--subscription` names another. cairn has no subscriptions of its own:
/// any id works, and the all-zero GUID is the local default.
pub(crate) const LOCAL_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

/// How to reach deployments: the connection flags every resource command takes.
#[derive(Args, Clone, Debug)]
pub(crate) struct TargetArgs {
    /// A cairn server (`cairn serve`) to talk to, e.g. https://127.0.0.1:8443. Without it, the engine runs in this
    /// process on $CAIRN_HOME (default ~/.cairn).
    #[arg(long, env = "CAIRN_SERVER", value_name = "URL", global = true)]
    pub(crate) server: Option<String>,
    /// Bearer token for --server.
    #[arg(
        long,
        env = "CAIRN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        global = true
    )]
    pub(crate) token: Option<String>,
    /// A PEM certificate to trust for --server (e.g. the server's self-signed certificate).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) ca_cert: Option<PathBuf>,
    /// Extension registry for the in-process engine [default: $CAIRN_EXTENSIONS, else
    /// $CAIRN_HOME/extensions.json when present; the built-in Local extension is always there].
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) registry: Option<PathBuf>,
    /// Subscription id [default: the all-zero GUID, cairn's local subscription].
    #[arg(long, value_name = "ID", default_value = LOCAL_SUBSCRIPTION, global = true)]
    pub(crate) subscription: String,
}

impl TargetArgs {
    /// `/subscriptions/{subscription}`, checked.
    pub(crate) fn subscription_scope(&self) -> Result<String, Failure> {
        let id = ResourceId::subscription(&self.subscription).map_err(|e| {
            Failure::usage(format!(
                "--subscription '{}' is not a valid subscription id: {e}",
                self.subscription
            ))
        })?;
        Ok(id.to_string())
    }

    /// `/subscriptions/{subscription}/resourceGroups/{group}`, checked.
    pub(crate) fn group_scope(&self, group: &str) -> Result<String, Failure> {
        cairn_arm::names::validate_resource_group_name(group)?;
        let id = ResourceId::resource_group(&self.subscription, group).map_err(|e| {
            Failure::usage(format!("'{group}' is not a valid resource group name: {e}"))
        })?;
        Ok(id.to_string())
    }

    /// The client for `--server`, or `None` for the in-process engine (commands with their own in-process
    /// side, such as `cairn stack`, pair it with theirs).
    pub(crate) fn server_client(&self) -> Result<Option<Client>, Failure> {
        self.server
            .as_deref()
            .map(|url| crate::client::connect(url, self.token.as_deref(), self.ca_cert.as_deref()))
            .transpose()
    }

    /// Opens the backend these flags name.
    pub(crate) async fn connect(&self) -> Result<Backend, Failure> {
        self.connect_with(ParallelismArgs::default()).await
    }

    /// Opens the backend these flags name; an in-process engine runs deployments with `parallelism`.
    pub(crate) async fn connect_with(
        &self,
        parallelism: ParallelismArgs,
    ) -> Result<Backend, Failure> {
        let parallelism = parallelism.for_target(self)?;
        match self.server_client()? {
            Some(client) => Ok(Backend::Remote(client)),
            None => Ok(Backend::Local(Box::new(
                LocalBackend::open(self.registry.as_deref(), parallelism).await?,
            ))),
        }
    }
}

/// `--parallelism` of the commands that run deployments (`deployment … create|what-if`, `stack … create|validate|
/// what-if`) in process.
#[derive(Args, Clone, Copy, Debug, Default)]
pub(crate) struct ParallelismArgs {
    /// Resource operations (extension and provider calls) the deployment runs at once, its nested deployments
    /// included; a stack's deletes run as wide [default: 16]. For the in-process engine; a server's deployments
    /// run with its own `cairn serve --parallelism`.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(crate) parallelism: Option<usize>,
}

impl ParallelismArgs {
    /// The parallelism for the in-process engine; refused with `--server`, whose own setting applies.
    pub(crate) fn for_target(self, target: &TargetArgs) -> Result<Option<usize>, Failure> {
        match (self.parallelism, &target.server) {
            (Some(_), Some(_)) => Err(Failure::usage(
                "--parallelism is for the in-process engine; a server runs deployments with its own setting \
                 (`cairn serve --parallelism N`, or CAIRN_PARALLELISM)",
            )),
            (parallelism, _) => Ok(parallelism),
        }
    }
}

/// The engine in process, or a server.
pub(crate) enum Backend {
    Local(Box<LocalBackend>),
    Remote(Client),
}

/// A secret as `keyvault secret` commands print it (Key Vault's data-plane shape); `value` only for `show`.
pub(crate) struct SecretView {
    pub(crate) json: Value,
}

impl Backend {
    pub(crate) async fn put_group(&self, id: &str, body: &Value) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.put_group(id, body).await,
            Backend::Remote(r) => Ok(r.put_group(id, body).await?),
        }
    }

    /// The group, or 404 `ResourceGroupNotFound`.
    pub(crate) async fn get_group(&self, id: &str) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.get_group(id).await,
            Backend::Remote(r) => Ok(r.get_group(id).await?),
        }
    }

    pub(crate) async fn list_groups(&self, subscription: &str) -> Result<Vec<Value>, Failure> {
        match self {
            Backend::Local(l) => l.list_groups(subscription).await,
            Backend::Remote(r) => Ok(r.list_groups(subscription).await?),
        }
    }

    pub(crate) async fn delete_group(&self, id: &str) -> Result<(), Failure> {
        match self {
            Backend::Local(l) => l.delete_group(id).await,
            Backend::Remote(r) => Ok(r.delete_group(id).await?),
        }
    }

    /// Starts a deployment; with `wait`, follows it to the end (showing `progress`) and returns the final record,
    /// else the accepted one.
    pub(crate) async fn deploy(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
        wait: bool,
        progress: &mut Progress,
    ) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.deploy(scope, name, request, wait, progress).await,
            Backend::Remote(r) => {
                crate::client::deploy(r, scope, name, request, wait, progress).await
            }
        }
    }

    pub(crate) async fn get_deployment(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.get_deployment(scope, name).await,
            Backend::Remote(r) => Ok(r.get_deployment(scope, name).await?),
        }
    }

    pub(crate) async fn list_deployments(&self, scope: &str) -> Result<Vec<Value>, Failure> {
        match self {
            Backend::Local(l) => l.list_deployments(scope).await,
            Backend::Remote(r) => Ok(r.list_deployments(scope).await?),
        }
    }

    pub(crate) async fn delete_deployment(&self, scope: &str, name: &str) -> Result<(), Failure> {
        match self {
            Backend::Local(l) => l.delete_deployment(scope, name).await,
            Backend::Remote(r) => Ok(r.delete_deployment(scope, name).await?),
        }
    }

    /// The validate result; an invalid request is `Err` with the ARM error (400).
    pub(crate) async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
    ) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.validate(scope, name, request).await,
            Backend::Remote(r) => Ok(r.validate_deployment(scope, name, &request).await?),
        }
    }

    pub(crate) async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentWhatIf,
    ) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.what_if(scope, name, request).await,
            Backend::Remote(r) => Ok(r.deployment_what_if(scope, name, &request).await?),
        }
    }

    pub(crate) async fn cancel(&self, scope: &str, name: &str) -> Result<(), Failure> {
        match self {
            Backend::Local(l) => l.cancel(scope, name).await,
            Backend::Remote(r) => Ok(r.cancel_deployment(scope, name).await?),
        }
    }

    pub(crate) async fn export(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.export(scope, name).await,
            Backend::Remote(r) => Ok(r.export_deployment_template(scope, name).await?),
        }
    }

    pub(crate) async fn operations(&self, scope: &str, name: &str) -> Result<Vec<Value>, Failure> {
        match self {
            Backend::Local(l) => l.operations(scope, name).await,
            Backend::Remote(r) => Ok(r.deployment_operations(scope, name).await?),
        }
    }

    /// Creates or updates a vault (`Microsoft.KeyVault/vaults`).
    pub(crate) async fn put_vault(&self, id: &str, body: &Value) -> Result<Value, Failure> {
        match self {
            Backend::Local(l) => l.put_vault(id, body).await,
            Backend::Remote(r) => Ok(r.put_vault(id, body).await?),
        }
    }

    /// The id of the vault named `name` in the subscription (or in `group` when given).
    pub(crate) async fn find_vault(
        &self,
        subscription_scope: &str,
        group_scope: Option<&str>,
        name: &str,
    ) -> Result<String, Failure> {
        match self {
            Backend::Local(l) => l.find_vault(subscription_scope, group_scope, name).await,
            Backend::Remote(r) => {
                // The server has no vault listing: the vault is addressed by its resource group.
                let Some(group) = group_scope else {
                    return Err(Failure::usage(
                        "with --server, give the vault's resource group (-g/--resource-group)",
                    ));
                };
                let id = format!("{group}/providers/Microsoft.KeyVault/vaults/{name}");
                if r.vault_exists(&id).await? {
                    Ok(id)
                } else {
                    Err(Failure::Arm(ArmError::new(
                        404,
                        "VaultNotFound",
                        format!("The vault '{name}' was not found in '{group}'."),
                    )))
                }
            }
        }
    }

    /// Sets a secret's value (a new version unless it is unchanged); returns the secret without its value.
    pub(crate) async fn set_secret(
        &self,
        vault_id: &str,
        name: &str,
        value: cairn_store::SecretString,
        content_type: Option<String>,
    ) -> Result<SecretView, Failure> {
        match self {
            Backend::Local(l) => l.set_secret(vault_id, name, value, content_type).await,
            Backend::Remote(r) => {
                use cairn_store::ExposeSecret as _;
                let json = r
                    .put_secret(
                        vault_id,
                        name,
                        value.expose_secret(),
                        content_type.as_deref(),
                    )
                    .await?;
                Ok(SecretView { json })
            }
        }
    }

    /// The secret with its value (latest version, or `version`).
    pub(crate) async fn show_secret(
        &self,
        vault_id: &str,
        name: &str,
        version: Option<&str>,
    ) -> Result<SecretView, Failure> {
        match self {
            Backend::Local(l) => l.show_secret(vault_id, name, version).await,
            Backend::Remote(_) => Err(no_data_plane("keyvault secret show")),
        }
    }

    /// The vault's secrets, without values.
    pub(crate) async fn list_secrets(&self, vault_id: &str) -> Result<Vec<SecretView>, Failure> {
        match self {
            Backend::Local(l) => l.list_secrets(vault_id).await,
            Backend::Remote(_) => Err(no_data_plane("keyvault secret list")),
        }
    }

    /// Lets the in-process engine finish cleanly (closes the store).
    pub(crate) async fn close(self) {
        if let Backend::Local(l) = self {
            l.close().await;
        }
    }
}

/// The server serves Key Vault's management plane (vaults, setting secrets), not its data plane: secret values
/// and listings are read on the in-process engine.
fn no_data_plane(command: &str) -> Failure {
    Failure::Arm(ArmError::new(
        400,
        "NotSupportedWithServer",
        format!(
            "'cairn {command}' works on the in-process engine only: the cairn server serves Key Vault's management \
             plane (vaults, setting secrets), not its data plane. Run it without --server on the server's data \
             directory."
        ),
    ))
}

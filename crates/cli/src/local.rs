//! The embedded default: the deployment engine in this process over the store in `$CAIRN_HOME` (default
//! `~/.cairn`, the same directory `cairn serve` uses), with the extension registry of `--registry`,
//! `$CAIRN_EXTENSIONS` or `$CAIRN_HOME/extensions.json` and the built-in extensions, assembled by
//! `cairn-assembly` ([`assemble`], shared with `cairn stack`).
//!
//! The engine runs only while a command does, so deployments another command left unfinished (killed mid-run)
//! are ended `Failed` on the next start (`RecoveryPolicy::Fail`, listing what they created) rather than resumed
//! in a command that may exit a moment later; re-running the deployment finishes it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::deployment::{Deployment, DeploymentWhatIf};
use cairn_arm::{ArmError, ResourceId};
use cairn_assembly::{Assembly, Settings, StoreLocation};
use cairn_engine::provider::{
    KeyVaultProvider, RESOURCE_GROUPS_TYPE, ResourceGroupProvider, ResourceProvider, SECRETS_TYPE,
};
use cairn_engine::{DeployOptions, Engine, EngineSettings, RecoveryPolicy};
use cairn_host::Registry;
use cairn_stack_service::StackServiceSettings;
use cairn_store::{
    ExposeSecret, ManagedResourceFilter, NewSecretVersion, PageRequest, Precondition,
    ResourceGroupRecord, SecretString, SecretVersionInfo, Store, StoreError, Timestamp,
    VaultRecord,
};
use serde_json::{Value, json};

use crate::backend::SecretView;
use crate::output::Failure;
use crate::progress::Progress;

/// The API version the local providers are called with (they accept any).
const PROVIDER_API_VERSION: &str = "2024-03-01";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `$CAIRN_HOME`, else `~/.cairn`.
pub(crate) fn cairn_home() -> Result<PathBuf, Failure> {
    if let Some(home) = env("CAIRN_HOME") {
        return Ok(PathBuf::from(home));
    }
    let home = env("HOME").or_else(|| env("USERPROFILE")).ok_or_else(|| {
        Failure::usage("set CAIRN_HOME (or HOME) to say where cairn keeps its data")
    })?;
    Ok(Path::new(&home).join(".cairn"))
}

/// The in-process cairn on `$CAIRN_HOME` as every in-process command runs it (`cairn deployment`, `group`,
/// `keyvault`, `stack`): the data directory's store, the extension registry of `--registry`, `$CAIRN_EXTENSIONS`
/// or `$CAIRN_HOME/extensions.json` with the built-in extensions, and timing for a process that lives only as
/// long as a command, with `parallelism` (`--parallelism`) if given. Interrupted work is left to the caller's
/// recovery.
pub(crate) async fn assemble(
    registry_flag: Option<&Path>,
    parallelism: Option<usize>,
) -> Result<Assembly, Failure> {
    let home = cairn_home()?;
    let registry = registry(registry_flag, &home)?;
    let mut settings = Settings::new(
        StoreLocation::data_dir(home),
        Arc::new(registry),
        "cairn://cli",
    );
    let parallelism = parallelism.unwrap_or(cairn_engine::settings::DEFAULT_PARALLELISM);
    settings.engine = EngineSettings {
        parallelism,
        recovery: RecoveryPolicy::Fail,
        // A command killed mid-run leaves its deployment to the next command sooner than a server would.
        claim_ttl: Duration::from_secs(20),
        heartbeat_interval: Duration::from_secs(5),
        ..EngineSettings::default()
    };
    settings.stacks = StackServiceSettings {
        max_deletes_in_flight: parallelism,
        lease_ttl: Duration::from_secs(30),
        heartbeat_interval: Duration::from_secs(5),
        ..StackServiceSettings::default()
    };
    Ok(Assembly::open(settings).await?)
}

/// The in-process engine, the store it runs on, and the providers of groups and vaults the commands call directly.
pub(crate) struct LocalBackend {
    cairn: Assembly,
    groups: ResourceGroupProvider,
    key_vault: KeyVaultProvider,
}

impl LocalBackend {
    pub(crate) async fn open(
        registry_flag: Option<&Path>,
        parallelism: Option<usize>,
    ) -> Result<Self, Failure> {
        let cairn = assemble(registry_flag, parallelism).await?;
        let recovered = cairn.engine().recover().await?;
        for key in &recovered.failed {
            eprintln!(
                "note: deployment '{}' was interrupted by an earlier command and is now Failed; run it again to \
                 finish it",
                key.name
            );
        }
        Ok(LocalBackend {
            groups: ResourceGroupProvider::new(cairn.store().clone()),
            key_vault: KeyVaultProvider::new(cairn.store().clone()),
            cairn,
        })
    }

    pub(crate) async fn close(self) {
        let _ = self.cairn.close().await;
    }

    fn engine(&self) -> &Engine {
        self.cairn.engine()
    }

    fn store(&self) -> &Arc<dyn Store> {
        self.cairn.store()
    }

    pub(crate) async fn put_group(&self, id: &str, body: &Value) -> Result<Value, Failure> {
        let id = parse_id(id)?;
        let outcome = self
            .groups
            .put(&id, PROVIDER_API_VERSION, body)
            .await
            .map_err(provider_error)?;
        Ok(outcome.resource)
    }

    pub(crate) async fn get_group(&self, id: &str) -> Result<Value, Failure> {
        let parsed = parse_id(id)?;
        self.groups
            .get(&parsed, PROVIDER_API_VERSION)
            .await
            .map_err(provider_error)?
            .ok_or_else(|| {
                Failure::Arm(ArmError::resource_group_not_found(
                    parsed.resource_group_name().unwrap_or_default(),
                ))
            })
    }

    pub(crate) async fn list_groups(&self, subscription: &str) -> Result<Vec<Value>, Failure> {
        let mut groups = Vec::new();
        let mut page = PageRequest::first(cairn_store::MAX_PAGE_SIZE);
        loop {
            let result = self
                .store()
                .list_resource_groups(subscription, page.clone())
                .await?;
            groups.extend(result.items.iter().map(group_json));
            match result.continuation {
                Some(next) => page.continuation = Some(next),
                None => return Ok(groups),
            }
        }
    }

    /// Deletes the group with its deployment history and Key Vault vaults (the local resources it holds);
    /// 409 while a deployment in it runs. Extension resources (files, ...) are not the group's to delete.
    pub(crate) async fn delete_group(&self, id: &str) -> Result<(), Failure> {
        let parsed = parse_id(id)?;
        let (Some(subscription), Some(name)) =
            (parsed.subscription_id(), parsed.resource_group_name())
        else {
            return Err(Failure::usage(format!("'{id}' is not a resource group id")));
        };
        if self
            .store()
            .get_resource_group(subscription, name)
            .await?
            .is_none()
        {
            return Err(Failure::Arm(ArmError::resource_group_not_found(name)));
        }
        let deployments = self.all_deployments(id).await?;
        if let Some(active) = deployments.iter().find(|d| {
            !d.properties
                .provisioning_state
                .as_ref()
                .is_some_and(|s| s.is_terminal())
        }) {
            return Err(Failure::Arm(ArmError::conflict(format!(
                "The resource group '{name}' cannot be deleted while deployment '{}' is running. Cancel it or \
                 wait for it to finish.",
                active.name.as_deref().unwrap_or_default()
            ))));
        }
        for d in &deployments {
            if let Some(deployment) = &d.name {
                match self.engine().delete(id, deployment).await {
                    Ok(()) => {}
                    Err(e) if e.to_arm().status() == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.delete_contained_resources(id).await?;
        self.store()
            .delete_resource_group(subscription, name, Precondition::Any)
            .await?;
        Ok(())
    }

    /// What a group holds that cairn keeps itself, as `cairn serve` deletes it: the local Key Vault's vaults
    /// (with their secrets) and the inventory records of ARM resources in the group.
    async fn delete_contained_resources(&self, scope: &str) -> Result<(), Failure> {
        let mut page = PageRequest::first(cairn_store::MAX_PAGE_SIZE);
        loop {
            let vaults = self.store().list_vaults(scope, page.clone()).await?;
            for vault in vaults
                .items
                .iter()
                .filter(|v| is_inside(scope, &v.vault.id))
            {
                match self.store().delete_vault(&vault.vault.id).await {
                    Ok(()) | Err(StoreError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            match vaults.continuation {
                Some(next) => page.continuation = Some(next),
                None => break,
            }
        }
        let mut page = PageRequest::first(cairn_store::MAX_PAGE_SIZE);
        loop {
            let resources = self
                .store()
                .list_managed_resources(ManagedResourceFilter {
                    deployment: None,
                    resource_type: None,
                    scope: Some(scope.to_string()),
                    page: page.clone(),
                })
                .await?;
            for r in &resources.items {
                if r.resource
                    .resource_id
                    .as_deref()
                    .is_some_and(|id| is_inside(scope, id))
                {
                    match self
                        .store()
                        .delete_managed_resource(&r.resource.key, Precondition::Any)
                        .await
                    {
                        Ok(()) | Err(StoreError::NotFound { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            match resources.continuation {
                Some(next) => page.continuation = Some(next),
                None => return Ok(()),
            }
        }
    }

    async fn all_deployments(
        &self,
        scope: &str,
    ) -> Result<Vec<cairn_arm::models::deployment::DeploymentExtended>, Failure> {
        let mut all = Vec::new();
        let mut page = PageRequest::first(cairn_store::MAX_PAGE_SIZE);
        loop {
            let result = self.engine().list(scope, None, page.clone()).await?;
            all.extend(result.value);
            match result.continuation {
                Some(next) => page.continuation = Some(next),
                None => return Ok(all),
            }
        }
    }

    pub(crate) async fn deploy(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
        wait: bool,
        progress: &mut Progress,
    ) -> Result<Value, Failure> {
        if !wait {
            // The engine lives in this process: a deployment left behind would stop when the command exits.
            eprintln!(
                "note: --no-wait needs --server; the in-process engine runs the deployment to its end first"
            );
        }
        let mut handle = self
            .engine()
            .create_or_update(
                scope,
                name,
                request,
                DeployOptions {
                    follow_events: true,
                    ..DeployOptions::default()
                },
            )
            .await?;
        if let Some(mut events) = handle.take_events() {
            progress.start(name);
            let mut ticker = tokio::time::interval(Duration::from_millis(200));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut interrupts = 0u32;
            // One listener at a time, renewed after each Ctrl-C, so none arrives unobserved between events.
            let mut interrupt = interrupt_listener();
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(event) => progress.event(&event),
                        None => break,
                    },
                    _ = ticker.tick() => progress.tick(),
                    signal = &mut interrupt => {
                        if signal.is_err() {
                            // No signal handling here: never fire again.
                            interrupt = Box::pin(std::future::pending());
                            continue;
                        }
                        interrupt = interrupt_listener();
                        interrupts += 1;
                        if interrupts > 1 {
                            // The claim expires and the next command ends the deployment Failed.
                            eprintln!("interrupted: deployment '{name}' is left unfinished");
                            std::process::exit(130);
                        }
                        eprintln!(
                            "canceling deployment '{name}' (operations in flight finish first; Ctrl-C again to quit)..."
                        );
                        // Quitting at once would leave the deployment Running until its claim expires.
                        if let Err(e) = self.engine().cancel(scope, name).await {
                            warn_cancel_failed(&e.to_arm());
                        }
                    }
                }
            }
            progress.finish();
        }
        let record = handle.wait().await?;
        to_json(&record)
    }

    pub(crate) async fn get_deployment(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        to_json(&self.engine().get(scope, name).await?)
    }

    pub(crate) async fn list_deployments(&self, scope: &str) -> Result<Vec<Value>, Failure> {
        self.all_deployments(scope)
            .await?
            .iter()
            .map(to_json)
            .collect()
    }

    pub(crate) async fn delete_deployment(&self, scope: &str, name: &str) -> Result<(), Failure> {
        Ok(self.engine().delete(scope, name).await?)
    }

    pub(crate) async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
    ) -> Result<Value, Failure> {
        to_json(&self.engine().validate(scope, name, request).await?)
    }

    pub(crate) async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentWhatIf,
    ) -> Result<Value, Failure> {
        to_json(&self.engine().what_if(scope, name, request).await?)
    }

    pub(crate) async fn cancel(&self, scope: &str, name: &str) -> Result<(), Failure> {
        Ok(self.engine().cancel(scope, name).await?)
    }

    pub(crate) async fn export(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        to_json(&self.engine().export_template(scope, name).await?)
    }

    pub(crate) async fn operations(&self, scope: &str, name: &str) -> Result<Vec<Value>, Failure> {
        self.engine()
            .operations(scope, name)
            .await?
            .iter()
            .map(to_json)
            .collect()
    }

    pub(crate) async fn put_vault(&self, id: &str, body: &Value) -> Result<Value, Failure> {
        let parsed = parse_id(id)?;
        let outcome = self
            .key_vault
            .put(&parsed, PROVIDER_API_VERSION, body)
            .await
            .map_err(provider_error)?;
        Ok(outcome.resource)
    }

    pub(crate) async fn find_vault(
        &self,
        subscription_scope: &str,
        group_scope: Option<&str>,
        name: &str,
    ) -> Result<String, Failure> {
        let scope = group_scope.unwrap_or(subscription_scope);
        let mut found: Vec<VaultRecord> = Vec::new();
        let mut page = PageRequest::first(cairn_store::MAX_PAGE_SIZE);
        loop {
            let result = self.store().list_vaults(scope, page.clone()).await?;
            found.extend(
                result
                    .items
                    .into_iter()
                    .filter(|v| v.vault.name.eq_ignore_ascii_case(name)),
            );
            match result.continuation {
                Some(next) => page.continuation = Some(next),
                None => break,
            }
        }
        match found.len() {
            1 => Ok(found.remove(0).vault.id),
            0 => Err(Failure::Arm(ArmError::new(
                404,
                "VaultNotFound",
                format!("The vault '{name}' was not found in scope '{scope}'."),
            ))),
            _ => Err(Failure::usage(format!(
                "several vaults are named '{name}' in the subscription; pass -g/--resource-group to pick one"
            ))),
        }
    }

    pub(crate) async fn set_secret(
        &self,
        vault_id: &str,
        name: &str,
        value: SecretString,
        content_type: Option<String>,
    ) -> Result<SecretView, Failure> {
        let secret_id = format!("{vault_id}/secrets/{name}");
        let parsed = parse_id(&secret_id)?;
        if !parsed.resource_type().eq_ignore_ascii_case(SECRETS_TYPE) {
            return Err(Failure::usage(format!(
                "'{name}' is not a valid secret name"
            )));
        }
        let latest = self.store().get_vault_secret(vault_id, name, None).await?;
        // The same value again keeps the current version, as a re-run deployment does.
        if let Some(latest) = latest
            && latest.value.expose_secret() == value.expose_secret()
            && latest.info.content_type == content_type
            && latest.info.enabled
        {
            return Ok(secret_view(&latest.info, None));
        }
        let info = self
            .store()
            .set_vault_secret(NewSecretVersion {
                vault_id: vault_id.to_string(),
                name: name.to_string(),
                value,
                content_type,
                enabled: true,
                not_before: None,
                expires: None,
                tags: Default::default(),
                created_at: Timestamp::now(),
            })
            .await?;
        Ok(secret_view(&info, None))
    }

    pub(crate) async fn show_secret(
        &self,
        vault_id: &str,
        name: &str,
        version: Option<&str>,
    ) -> Result<SecretView, Failure> {
        let secret = self
            .store()
            .get_vault_secret(vault_id, name, version)
            .await?
            .ok_or_else(|| {
                Failure::Arm(ArmError::new(
                    404,
                    "SecretNotFound",
                    format!(
                        "A secret with (name/id) {name}{} was not found in this key vault.",
                        version.map(|v| format!("/{v}")).unwrap_or_default()
                    ),
                ))
            })?;
        Ok(secret_view(&secret.info, Some(&secret.value)))
    }

    pub(crate) async fn list_secrets(&self, vault_id: &str) -> Result<Vec<SecretView>, Failure> {
        let infos = self.store().list_vault_secrets(vault_id).await?;
        Ok(infos.iter().map(|i| secret_view(i, None)).collect())
    }
}

type Interrupt = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>;

fn interrupt_listener() -> Interrupt {
    Box::pin(tokio::signal::ctrl_c())
}

fn warn_cancel_failed(e: &ArmError) {
    eprintln!("warning: the cancel request failed: {}", e.detail());
}

/// Whether `id` is below `scope`, on a segment boundary (`/rg1` does not contain `/rg10/...`).
fn is_inside(scope: &str, id: &str) -> bool {
    let scope = scope.trim_end_matches('/');
    id.len() > scope.len()
        && id.is_char_boundary(scope.len())
        && id[..scope.len()].eq_ignore_ascii_case(scope)
        && id[scope.len()..].starts_with('/')
}

fn parse_id(id: &str) -> Result<ResourceId, Failure> {
    ResourceId::parse(id).map_err(|e| Failure::Arm(e.to_arm_error(id)))
}

fn provider_error(e: cairn_engine::ProviderError) -> Failure {
    Failure::Arm(ArmError::from_detail(e.status, *e.error))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::Other(e.into()))
}

/// A resource group as ARM returns it.
fn group_json(record: &ResourceGroupRecord) -> Value {
    let g = &record.group;
    let mut out = json!({
        "id": g.resource_id(),
        "name": g.name,
        "type": RESOURCE_GROUPS_TYPE,
        "location": g.location,
        "properties": { "provisioningState": g.provisioning_state },
    });
    if !g.tags.is_empty() {
        out["tags"] = json!(g.tags);
    }
    if let Some(m) = &g.managed_by {
        out["managedBy"] = json!(m);
    }
    out
}

/// Key Vault's data-plane shape (`SecretBundle`): `id` is the secret's URI with its version; `value` only when
/// given (`secret show`).
fn secret_view(info: &SecretVersionInfo, value: Option<&SecretString>) -> SecretView {
    let vault_name = info.vault_id.rsplit('/').next().unwrap_or_default();
    let uri = format!(
        "https://{}.vault.azure.net/secrets/{}",
        vault_name.to_ascii_lowercase(),
        info.name
    );
    let seconds = |t: Timestamp| t.unix_millis() / 1000;
    let mut attributes = json!({
        "enabled": info.enabled,
        "created": seconds(info.created_at),
        "updated": seconds(info.updated_at),
        "recoveryLevel": "Purgeable",
    });
    if let Some(nbf) = info.not_before {
        attributes["notBefore"] = json!(seconds(nbf));
    }
    if let Some(exp) = info.expires {
        attributes["expires"] = json!(seconds(exp));
    }
    let mut out = json!({
        "id": format!("{uri}/{}", info.version),
        "name": info.name,
        "attributes": attributes,
        "contentType": info.content_type,
        "tags": info.tags,
    });
    if let Some(value) = value {
        out["value"] = json!(value.expose_secret());
    }
    SecretView { json: out }
}

fn registry(flag: Option<&Path>, home: &Path) -> Result<Registry, Failure> {
    crate::extension::load_registry(flag, Some(home), None)
        .map_err(|e| Failure::Usage(format!("{e:#}")))
}

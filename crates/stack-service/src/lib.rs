//! Deployment stacks as a service: create/update, get, list, delete (with unmanage), validate and
//! exportTemplate over the engine, the store and the extension host.
//!
//! One stack operation at a time: a PUT or DELETE takes the stack's lease in the store (`stack:{scope}/{name}`)
//! and renews it with a heartbeat while it runs in the background; a second operation gets 409
//! `DeploymentStackInNonTerminalState`. The record says which operation is under way; every write of a running
//! operation is fenced by the record version it last wrote. A crashed operation stops renewing, so its lease
//! expires after the TTL; then [`StackService::recover`] (run at start and periodically by the server) finishes
//! it: an interrupted delete runs again from what is left, an interrupted update waits for its deployment (which
//! the engine resumes or fails) and then diffs and unmanages as usual. A PUT or DELETE that finds an interrupted
//! operation starts that recovery and answers 409, unless `bypassStackOutOfSyncError` says to take the stack over
//! as it is.
//!
//! A PUT runs the stack's deployment through the engine (stack-initiated, so its record keeps extension configs as
//! directives), collects the managed set of the deployment tree, diffs it against the stored set, unmanages what
//! left (detach, or delete: ARM resources through the providers, extensible resources through the host with the
//! persisted config resolved again at delete time) and records the outcome. The pure decisions are
//! `cairn-stacks`'.
//!
//! Sharing: a stack whose tag `cairn.shareResources` is `true` lets other stacks manage its resources too;
//! otherwise adding a resource another stack manages is refused.

mod bulk_delete;
mod record;
mod recovery;
mod state;
mod unmanage;
mod validation;
mod what_if;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_arm::models::deployment::{
    Deployment, DeploymentExtended, DeploymentMode, DeploymentProperties,
};
use cairn_arm::models::stack::{
    DenySettingsMode, DenyStatusMode, DeploymentStack, DeploymentStackProperties,
    DeploymentStackProvisioningState, DeploymentStackTemplateDefinition,
    DeploymentStackValidateProperties, DeploymentStackValidateResult, ResourceReference,
    StackDeleteOptions,
};
use cairn_arm::{ArmError, ErrorDetail, ResourceId, ResourceIdKind};
use cairn_engine::{DeployOptions, Engine, Providers};
use cairn_host::ExtensionHost;
use cairn_stacks::directive::PersistedConfig;
use cairn_stacks::{
    DeploymentSnapshot, ManagedResource, ManagedSet, ManagedTarget, Ownership, RunSettings,
    StackClaim, StackOperationResult, collect_managed_set, diff_collected, unmanage_all,
};
use cairn_store::{
    Lease, NewStack, PageRequest, Precondition, StackRecord, Store, StoreError, Timestamp,
};
use serde::Deserialize as _;
use serde_json::Value;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::record::RecordFence;
use crate::state::{PendingOperation, StoredState};
use crate::unmanage::Deleter;

pub use crate::bulk_delete::{
    BULK_DELETE_SYNC_MAX_ENTRIES, BulkDeleteEntry, BulkDeleteRequest, BulkDeleteResponse,
    BulkDeleteResult, BulkDeleteStatus, GistImport, MAX_BULK_DELETE_ENTRIES, bulk_delete_runs_long,
    check_bulk_delete,
};
pub use crate::recovery::StackRecoveryReport;
pub use crate::state::SHARE_TAG;
pub use crate::what_if::WhatIfAccepted;

/// Says when a stack operation started in this process has ended: its last write is done and its lease
/// released, so a read of the stack now shows how it ended (or finds it gone). A caller following the operation
/// by reading the record waits on this between reads instead of finding out up to a polling interval late, and
/// for a create or update gets the stack as the operation's last write left it, without reading it back.
#[derive(Clone, Debug)]
pub struct OperationEnded {
    ended: tokio::sync::watch::Receiver<Ending>,
}

/// Where an operation is, as [`OperationEnded`] tells it.
#[derive(Clone, Debug, Default)]
enum Ending {
    #[default]
    Running,
    /// Ended; with the stack as its last write left it, when that is known.
    Ended(Option<Arc<DeploymentStack>>),
}

impl OperationEnded {
    /// A signal and the sender that fires it (also when the sender is dropped, e.g. its task panicked).
    fn channel() -> (tokio::sync::watch::Sender<Ending>, OperationEnded) {
        let (sender, ended) = tokio::sync::watch::channel(Ending::Running);
        (sender, OperationEnded { ended })
    }

    /// Waits until the operation has ended (at once if it has). For a create or update whose outcome was
    /// recorded: the stack as that last write left it; `None` for a delete (see [`DeleteRun::finished`]) or when
    /// the outcome could not be recorded (then the record says what is known).
    pub async fn wait(&mut self) -> Option<DeploymentStack> {
        // An error means the sender is gone: the operation's task ended without saying so.
        match &*self
            .ended
            .wait_for(|ending| matches!(ending, Ending::Ended(_)))
            .await
            .ok()?
        {
            Ending::Ended(stack) => stack.as_deref().cloned(),
            Ending::Running => None,
        }
    }
}

/// A stack delete under way in this process ([`StackService::delete_and_report`]).
#[derive(Debug)]
pub struct DeleteRun {
    outcome: tokio::sync::oneshot::Receiver<DeploymentStack>,
    ended: OperationEnded,
}

impl DeleteRun {
    /// Fires when the delete has ended; take it before [`DeleteRun::finished`], which consumes the run.
    pub fn ended(&self) -> OperationEnded {
        self.ended.clone()
    }

    /// Waits for the delete to end: the stack as the operation left it, with `deletedResources`,
    /// `detachedResources` and `failedResources` (`succeeded` when the record is gone, `failed` when it stays).
    /// `None` when the outcome could not be recorded (the stack's record says what is known).
    pub async fn finished(self) -> Option<DeploymentStack> {
        self.outcome.await.ok()
    }
}

/// Tunables of the stack service.
#[derive(Clone, Debug)]
pub struct StackServiceSettings {
    /// Identifies this process in lease owners.
    pub owner_id: String,
    /// How long a lease lives without a heartbeat: after a crash, the stack is free again after this long.
    pub lease_ttl: Duration,
    /// How often a running operation renews its lease (well below `lease_ttl`).
    pub heartbeat_interval: Duration,
    /// Delete rounds (the first plus retries).
    pub max_delete_rounds: u32,
    /// Deletes in flight at once. The default is the engine's default parallelism, so unmanaging runs as wide as
    /// the deployment that created the resources.
    pub max_deletes_in_flight: usize,
    /// Pause between delete rounds.
    pub retry_backoff: Duration,
    /// How often a running delete publishes its progress (`deletedResources` so far) on the stack record.
    pub progress_interval: Duration,
    /// Where operation durations and recovery's takeovers are counted (the server's `/metrics`); by default a set
    /// of its own that nothing reads.
    pub metrics: cairn_metrics::Metrics,
}

impl Default for StackServiceSettings {
    fn default() -> Self {
        Self {
            owner_id: format!("stacks-{}", uuid::Uuid::new_v4()),
            lease_ttl: Duration::from_secs(120),
            heartbeat_interval: Duration::from_secs(20),
            max_delete_rounds: 4,
            max_deletes_in_flight: 16,
            retry_backoff: Duration::from_secs(2),
            progress_interval: Duration::from_millis(500),
            metrics: cairn_metrics::Metrics::default(),
        }
    }
}

/// What a stack PUT returns right away.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// The stack as accepted (`provisioningState: deploying`).
    pub stack: DeploymentStack,
    /// Whether the stack is new (201) rather than updated (200).
    pub created: bool,
    /// Fires when the operation has ended.
    pub ended: OperationEnded,
}

/// A page of stacks.
#[derive(Clone, Debug, Default)]
pub struct StackPage {
    pub value: Vec<DeploymentStack>,
    pub continuation: Option<String>,
}

/// A stack operation run in the background under the stack's lease ([`StackService::spawn_leased`]).
struct LeasedOperation {
    /// `createOrUpdate` or `delete`, as the metrics name it.
    kind: &'static str,
    lease: String,
    owner: String,
    scope: String,
    name: String,
    correlation_id: String,
}

struct Inner {
    engine: Engine,
    store: Arc<dyn Store>,
    host: Arc<ExtensionHost>,
    providers: Arc<Providers>,
    settings: StackServiceSettings,
    /// The operations running in the background here, each under its stack's lease.
    operations: TaskTracker,
    /// Fired by [`StackService::hand_over`]: running operations stop where they are.
    closing: CancellationToken,
}

/// The stack service. Cheap to clone; operations run on the tokio runtime they were started from.
#[derive(Clone)]
pub struct StackService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StackService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackService")
            .field("owner", &self.inner.settings.owner_id)
            .finish_non_exhaustive()
    }
}

fn store_error(error: StoreError) -> ArmError {
    let status = if error.is_not_found() {
        404
    } else if error.is_conflict() {
        409
    } else {
        500
    };
    ArmError::new(status, error.arm_code(), error.to_string())
}

fn stack_id(scope: &str, name: &str) -> Result<ResourceId, ArmError> {
    let text = format!(
        "{}/providers/Microsoft.Resources/deploymentStacks/{name}",
        scope.trim_end_matches('/')
    );
    ResourceId::parse(&text).map_err(|e| e.to_arm_error(&text))
}

fn lease_name(scope: &str, name: &str) -> String {
    format!(
        "stack:{}/{}",
        cairn_store::fold_case(scope),
        name.to_lowercase()
    )
}

fn add(now: Timestamp, duration: Duration) -> Timestamp {
    now.saturating_add(duration)
}

fn iso_duration(elapsed: Duration) -> String {
    format!("PT{}.{:03}S", elapsed.as_secs(), elapsed.subsec_millis())
}

fn bad_request(detail: ErrorDetail) -> ArmError {
    ArmError::from_detail(400, detail)
}

/// The parameters a stack may keep: values of parameters the template declares secure are dropped (a stack
/// record never holds secrets; the engine keeps them sealed for its own run).
fn public_parameters(
    properties: &DeploymentStackProperties,
) -> Option<cairn_arm::models::parameters::DeploymentParameters> {
    let parameters = properties.parameters.clone()?;
    let declared = properties
        .template
        .as_ref()
        .and_then(|t| t.get("parameters"))
        .and_then(Value::as_object);
    let is_secure = |name: &str| {
        declared
            .and_then(|d| d.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
            .and_then(|(_, p)| p.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| {
                t.eq_ignore_ascii_case("securestring") || t.eq_ignore_ascii_case("secureobject")
            })
    };
    Some(cairn_arm::models::parameters::DeploymentParameters(
        parameters
            .0
            .into_iter()
            .filter(|(name, _)| !is_secure(name))
            .collect(),
    ))
}

/// Refuses unknown `actionOnUnmanage` values (400 `InvalidActionOnUnmanage`).
fn check_actions(action: &cairn_arm::models::stack::ActionOnUnmanage) -> Result<(), ArmError> {
    cairn_stacks::UnmanagePolicy::from_action(action)
        .map_err(|e| bad_request(e.to_error_detail()))?;
    RunSettings::for_action(action).map_err(|e| bad_request(e.to_error_detail()))?;
    Ok(())
}

/// Checks what a stack body must hold before anything runs: the unmanage actions, template xor link, and
/// extension configs a stack can persist (no secure literals).
fn validate_body(properties: &DeploymentStackProperties) -> Result<(), ArmError> {
    check_actions(&properties.action_on_unmanage)?;
    match (&properties.template, &properties.template_link) {
        (Some(_), Some(_)) => {
            return Err(ArmError::new(
                400,
                "InvalidDeploymentStackTemplate",
                "Give either 'template' or 'templateLink', not both.",
            )
            .with_target("properties.template"));
        }
        (None, None) => {
            return Err(ArmError::new(
                400,
                "InvalidDeploymentStackTemplate",
                "The deployment stack has no 'template' or 'templateLink'.",
            )
            .with_target("properties.template"));
        }
        _ => {}
    }
    for (alias, config) in properties.extension_configs.iter().flatten() {
        PersistedConfig::from_arm(alias, config).map_err(|e| bad_request(e.to_error_detail()))?;
    }
    Ok(())
}

/// Subscription and management-group stacks run a deployment at that scope, which needs a location (ARM's
/// `LocationRequired`, refused before anything runs rather than as a failed deployment).
fn check_location(scope: &str, request: &DeploymentStack) -> Result<(), ArmError> {
    let needs_location = ResourceId::parse(scope).is_ok_and(|id| {
        matches!(
            id.kind(),
            ResourceIdKind::Subscription | ResourceIdKind::ManagementGroup
        )
    });
    if needs_location
        && request
            .location
            .as_deref()
            .is_none_or(|l| l.trim().is_empty())
    {
        return Err(ArmError::new(
            400,
            "LocationRequired",
            "The location property is required for a deployment stack at subscription or management group scope.",
        )
        .with_target("location"));
    }
    Ok(())
}

/// Where a stack may deploy (`deploymentScope`; default its own scope): a resource-group stack into its group; a
/// subscription stack into the subscription or one of its resource groups; a management-group stack into the
/// group or a subscription (cairn keeps no management-group hierarchy, so any subscription counts as a child).
/// Returns the effective scope.
fn deployment_scope_of(
    stack_scope: &str,
    properties: &DeploymentStackProperties,
) -> Result<String, ArmError> {
    let stack_scope = stack_scope.trim_end_matches('/');
    let Some(requested) = properties.deployment_scope.as_deref() else {
        return Ok(stack_scope.to_owned());
    };
    let requested = requested.trim_end_matches('/');
    let invalid = |why: &str| {
        ArmError::new(
            400,
            "InvalidDeploymentStackDeploymentScope",
            format!("The deployment scope '{requested}' is not valid for a stack at '{stack_scope}': {why}."),
        )
        .with_target("properties.deploymentScope")
    };
    let target = ResourceId::parse(requested)
        .map_err(|_| invalid("it is not a resource group, subscription or management group ID"))?;
    let stack = ResourceId::parse(stack_scope).map_err(|e| e.to_arm_error(stack_scope))?;
    let same_subscription = || {
        target
            .subscription_id()
            .zip(stack.subscription_id())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    let allowed = match (stack.kind(), target.kind()) {
        (ResourceIdKind::ResourceGroup, ResourceIdKind::ResourceGroup) => {
            requested.eq_ignore_ascii_case(stack_scope)
        }
        (ResourceIdKind::ResourceGroup, _) => false,
        (
            ResourceIdKind::Subscription,
            ResourceIdKind::Subscription | ResourceIdKind::ResourceGroup,
        ) => same_subscription(),
        (ResourceIdKind::ManagementGroup, ResourceIdKind::ManagementGroup) => {
            requested.eq_ignore_ascii_case(stack_scope)
        }
        (ResourceIdKind::ManagementGroup, ResourceIdKind::Subscription) => true,
        _ => false,
    };
    if !allowed {
        return Err(invalid(match stack.kind() {
            ResourceIdKind::ResourceGroup => {
                "a resource-group stack deploys into its own resource group"
            }
            ResourceIdKind::Subscription => {
                "a subscription stack deploys into its subscription or one of its resource groups"
            }
            _ => "a management-group stack deploys into its management group or a subscription",
        }));
    }
    Ok(requested.to_owned())
}

/// A `templateLink` as a stack keeps and returns it: its `queryString` and the query of its `uri` are credentials
/// (SAS tokens), which the engine keeps sealed for the deployment and the stack never holds.
fn link_without_credentials(
    link: &cairn_arm::models::common::TemplateLink,
) -> cairn_arm::models::common::TemplateLink {
    cairn_arm::models::common::TemplateLink {
        uri: link.uri.as_deref().map(uri_without_query),
        query_string: None,
        ..link.clone()
    }
}

fn parameters_link_without_credentials(
    link: &cairn_arm::models::common::ParametersLink,
) -> cairn_arm::models::common::ParametersLink {
    cairn_arm::models::common::ParametersLink {
        uri: uri_without_query(&link.uri),
        ..link.clone()
    }
}

fn uri_without_query(uri: &str) -> String {
    uri.split(['?', '#']).next().unwrap_or_default().to_owned()
}

/// The deployment a stack runs.
fn deployment_of(stack: &DeploymentStack) -> Deployment {
    let p = &stack.properties;
    let mut properties = DeploymentProperties::new(DeploymentMode::Incremental);
    properties.template = p.template.clone();
    properties.template_link = p.template_link.clone();
    properties.parameters = p.parameters.clone();
    properties.parameters_link = p.parameters_link.clone();
    properties.extension_configs = p.extension_configs.clone();
    properties.external_inputs = p.external_inputs.clone();
    properties.external_input_definitions = p.external_input_definitions.clone();
    properties.debug_setting = p.debug_setting.clone();
    properties.validation_level = p.validation_level.clone();
    Deployment {
        location: stack.location.clone(),
        properties,
        tags: None,
        identity: None,
    }
}

/// The `(scope, name)` of a deployment ID.
fn split_deployment_id(id: &str) -> Option<(String, String)> {
    const MARKER: &str = "/providers/microsoft.resources/deployments/";
    let at = id.to_ascii_lowercase().rfind(MARKER)?;
    let name = &id[at + MARKER.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| (id[..at].to_owned(), name.to_owned()))
}

impl StackService {
    /// A service over the engine, its store and host. `providers` are the ARM providers deletes and directive
    /// API calls go to, in addition to the built-in ones (resource groups, deployments, Key Vault).
    pub fn new(
        engine: Engine,
        store: Arc<dyn Store>,
        host: Arc<ExtensionHost>,
        providers: Providers,
        settings: StackServiceSettings,
    ) -> Self {
        let mut all = Providers::builtin(store.clone());
        all.extend(providers);
        Self {
            inner: Arc::new(Inner {
                engine,
                store,
                host,
                providers: Arc::new(all),
                settings,
                operations: TaskTracker::new(),
                closing: CancellationToken::new(),
            }),
        }
    }

    /// The record and the stack it holds, without decoding its managed set (which a GET does not need, and which
    /// is the larger part of a big stack's record).
    async fn load_stack(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Option<(StackRecord, DeploymentStack)>, ArmError> {
        let Some(record) = self
            .inner
            .store
            .get_stack(scope, name)
            .await
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        let stack = DeploymentStack::deserialize(&record.stack).map_err(|e| {
            ArmError::new(
                500,
                "StoreDataCorrupt",
                format!("stored stack '{name}': {e}"),
            )
        })?;
        Ok(Some((record, stack)))
    }

    async fn load(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Option<(StackRecord, DeploymentStack, StoredState)>, ArmError> {
        let Some((record, stack)) = self.load_stack(scope, name).await? else {
            return Ok(None);
        };
        let state = StoredState::from_value(&record.managed_set).map_err(|e| {
            ArmError::new(
                500,
                "StoreDataCorrupt",
                format!("stored managed set of '{name}': {e}"),
            )
        })?;
        Ok(Some((record, stack, state)))
    }

    /// Takes the stack's lease, or answers 409 `DeploymentStackInNonTerminalState`.
    async fn take_lease(
        &self,
        scope: &str,
        name: &str,
        owner: &str,
        current: Option<&DeploymentStack>,
    ) -> Result<Lease, ArmError> {
        let now = Timestamp::now();
        match self
            .inner
            .store
            .acquire_lease(
                &lease_name(scope, name),
                owner,
                now,
                add(now, self.inner.settings.lease_ttl),
            )
            .await
        {
            Ok(lease) => Ok(lease),
            Err(error) if error.is_conflict() => {
                let state = current
                    .and_then(|s| s.properties.provisioning_state.as_ref())
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_else(|| "deploying".into());
                Err(ArmError::deployment_stack_in_non_terminal_state(
                    name, &state,
                ))
            }
            Err(error) => Err(store_error(error)),
        }
    }

    /// Renews `owner`'s lease until `stop` fires.
    fn heartbeat(&self, lease: String, owner: String) -> tokio::sync::oneshot::Sender<()> {
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let store = self.inner.store.clone();
        let interval = self.inner.settings.heartbeat_interval;
        let ttl = self.inner.settings.lease_ttl;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stop_rx => break,
                    () = tokio::time::sleep(interval) => {
                        let now = Timestamp::now();
                        if let Err(error) = store.renew_lease(&lease, &owner, now, add(now, ttl)).await {
                            tracing::warn!(lease, %error, "stack lease heartbeat failed");
                        }
                    }
                }
            }
        });
        stop_tx
    }

    async fn release(&self, scope: &str, name: &str, owner: &str) {
        if let Err(error) = self
            .inner
            .store
            .release_lease(&lease_name(scope, name), owner)
            .await
        {
            tracing::warn!(stack = name, %error, "releasing the stack lease failed");
        }
    }

    /// Runs `work` in the background under `operation`'s lease: renews the lease until the work ends, counts its
    /// duration, releases the lease, then gives `after` the outcome. When the service hands over first
    /// ([`StackService::hand_over`]) the work stops where it is (its record still names the operation, for recovery
    /// to finish), the lease is released at once and `after` gets `None`. Log lines of the work carry the stack and
    /// the operation's correlation id.
    fn spawn_leased<W, A>(&self, operation: LeasedOperation, work: W, after: A)
    where
        W: std::future::Future<Output = Result<DeploymentStack, ArmError>> + Send + 'static,
        A: FnOnce(Option<Result<DeploymentStack, ArmError>>) + Send + 'static,
    {
        let stop = self.heartbeat(operation.lease.clone(), operation.owner.clone());
        let service = self.clone();
        let closing = self.inner.closing.clone();
        let span = tracing::info_span!(
            "stack_operation",
            stack = %operation.name,
            operation = operation.kind,
            correlation_id = %operation.correlation_id
        );
        self.inner.operations.spawn(
            async move {
                let started = Instant::now();
                let outcome = tokio::select! {
                    biased;
                    () = closing.cancelled() => None,
                    outcome = work => Some(outcome),
                };
                match &outcome {
                    Some(Ok(stack)) => service.inner.settings.metrics.stack_operation_ended(
                        operation.kind,
                        stack
                            .properties
                            .provisioning_state
                            .as_ref()
                            .map_or("unknown", |state| state.as_str()),
                        started.elapsed(),
                    ),
                    Some(Err(error)) => tracing::error!(
                        error = %error.detail().message(),
                        "the stack operation's outcome could not be recorded"
                    ),
                    None => tracing::info!(
                        "stack operation handed over: stopped where it was, its lease released for recovery"
                    ),
                }
                let _ = stop.send(());
                service
                    .release(&operation.scope, &operation.name, &operation.owner)
                    .await;
                after(outcome);
            }
            .instrument(span),
        );
    }

    /// Hands this process's stack operations over to another process: each running operation stops where it is
    /// (its record still names it) and its lease is released at once, so recovery — on another replica, or in this
    /// server after a restart — takes it over without waiting for the lease to expire. Returns once every operation
    /// has stopped; operations started later stop at once. Called by `cairn serve` on shutdown, before the engine
    /// hands its deployments over.
    pub async fn hand_over(&self) {
        self.inner.closing.cancel();
        self.inner.operations.close();
        self.inner.operations.wait().await;
    }

    /// The out-of-sync guard: refused unless bypassed when the stored set may be wrong. A stack whose record
    /// names an interrupted operation answers 409 `DeploymentStackInNonTerminalState` (the caller starts its
    /// recovery); `bypassStackOutOfSyncError` takes the stack over as it is instead.
    fn check_in_sync(
        name: &str,
        state: &StoredState,
        current: &DeploymentStack,
        bypass: bool,
    ) -> Result<(), ArmError> {
        if bypass {
            return Ok(());
        }
        let interrupted = current
            .properties
            .provisioning_state
            .as_ref()
            .filter(|s| !s.is_terminal());
        if let (Some(provisioning), Some(_)) = (interrupted, &state.pending) {
            return Err(ArmError::new(
                409,
                cairn_arm::error::codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE,
                format!(
                    "The deployment stack '{name}' is in the non-terminal state '{}': its last operation was \
                     interrupted and is being resumed. Retry when it has ended, or set \
                     'bypassStackOutOfSyncError' to true to take the stack over as it is.",
                    provisioning.as_str()
                ),
            ));
        }
        if state.out_of_sync || interrupted.is_some() {
            return Err(ArmError::new(
                409,
                "DeploymentStackOutOfSync",
                format!(
                    "The deployment stack '{name}' might not have an accurate list of managed resources (its last \
                     operation did not finish). To proceed, check the resources and retry with \
                     'bypassStackOutOfSyncError' set to true."
                ),
            ));
        }
        Ok(())
    }

    /// After a request found an interrupted operation (and released the lease): resume it in the background.
    fn resume_if_interrupted(&self, error: &ArmError, scope: &str, name: &str) {
        if error.status() == 409
            && error.detail().code()
                == cairn_arm::error::codes::DEPLOYMENT_STACK_IN_NON_TERMINAL_STATE
        {
            let service = self.clone();
            let (scope, name) = (scope.to_owned(), name.to_owned());
            tokio::spawn(async move {
                if let Err(error) = service.recover_stack(&scope, &name).await {
                    tracing::warn!(stack = name, error = %error.detail().message(), "resuming an interrupted stack operation failed");
                }
            });
        }
    }

    /// Starts a create or update; it runs in the background. 409 while another operation runs on the stack.
    pub async fn create_or_update(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStack,
        correlation_id: Option<String>,
    ) -> Result<Accepted, ArmError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let id = stack_id(scope, name)?;
        validate_body(&request.properties)?;
        check_location(scope, &request)?;
        let deployment_scope = deployment_scope_of(scope, &request.properties)?;
        self.check_resource_groups(&[scope, &deployment_scope])
            .await?;
        validation::check_stack_template(&self.inner.engine, name, &request.properties).await?;
        let owner = format!("{}:{}", self.inner.settings.owner_id, uuid::Uuid::new_v4());
        let existing = self.load(scope, name).await?;
        let lease = self
            .take_lease(scope, name, &owner, existing.as_ref().map(|(_, s, _)| s))
            .await?;
        let result = self
            .accept_put(scope, name, &id, request, existing, correlation_id)
            .await;
        if let Err(error) = &result {
            self.release(scope, name, &owner).await;
            self.resume_if_interrupted(error, scope, name);
        }
        let (accepted, job, ended_sender) = result?;
        let operation = LeasedOperation {
            kind: "createOrUpdate",
            lease: lease.name,
            owner,
            scope: scope.to_owned(),
            name: name.to_owned(),
            correlation_id: accepted
                .stack
                .properties
                .correlation_id
                .clone()
                .unwrap_or_default(),
        };
        let service = self.clone();
        let (scope, name) = (scope.to_owned(), name.to_owned());
        self.spawn_leased(
            operation,
            async move { service.run_put(&scope, &name, job).await },
            move |outcome| {
                let stack = outcome.and_then(Result::ok).map(Arc::new);
                let _ = ended_sender.send(Ending::Ended(stack));
            },
        );
        Ok(accepted)
    }

    /// 404 `ResourceGroupNotFound` when one of `scopes` is a resource group that does not exist (the stack's own,
    /// or the one it deploys into): checked before anything is stored, as the engine checks a deployment's.
    async fn check_resource_groups(&self, scopes: &[&str]) -> Result<(), ArmError> {
        if !self.inner.engine.settings().require_resource_groups {
            return Ok(());
        }
        for scope in scopes {
            let Ok(id) = ResourceId::parse(scope) else {
                continue;
            };
            let (ResourceIdKind::ResourceGroup, Some(subscription), Some(group)) =
                (id.kind(), id.subscription_id(), id.resource_group_name())
            else {
                continue;
            };
            let found = self
                .inner
                .store
                .get_resource_group(subscription, group)
                .await
                .map_err(store_error)?;
            if found.is_none() {
                return Err(ArmError::resource_group_not_found(group));
            }
        }
        Ok(())
    }

    async fn accept_put(
        &self,
        scope: &str,
        name: &str,
        id: &ResourceId,
        request: DeploymentStack,
        existing: Option<(StackRecord, DeploymentStack, StoredState)>,
        correlation_id: Option<String>,
    ) -> Result<(Accepted, PutJob, tokio::sync::watch::Sender<Ending>), ArmError> {
        let bypass = request
            .properties
            .bypass_stack_out_of_sync_error
            .unwrap_or(false);
        let (precondition, previous, created) = match existing {
            Some((record, current, state)) => {
                Self::check_in_sync(name, &state, &current, bypass)?;
                let version = record.version;
                let mut state = state;
                state.out_of_sync = false;
                (Precondition::Version(version), state, false)
            }
            None => (Precondition::MustNotExist, StoredState::default(), true),
        };
        let correlation_id = correlation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut stack = DeploymentStack::for_id(id, request.properties.clone());
        stack.location = request.location.clone();
        stack.tags = request.tags.clone();
        let p = &mut stack.properties;
        p.template = None;
        p.template_link = request
            .properties
            .template_link
            .as_ref()
            .map(link_without_credentials);
        p.parameters_link = request
            .properties
            .parameters_link
            .as_ref()
            .map(parameters_link_without_credentials);
        p.parameters = public_parameters(&request.properties);
        p.deployment_scope = Some(deployment_scope_of(scope, &request.properties)?);
        p.provisioning_state = Some(DeploymentStackProvisioningState::Deploying);
        p.correlation_id = Some(correlation_id.clone());
        p.bypass_stack_out_of_sync_error = None;
        p.error = None;
        p.deleted_resources = None;
        p.detached_resources = None;
        p.failed_resources = None;
        p.resources = Some(previous.managed_set.to_references());
        p.deployment_extensions = Some(previous.managed_set.deployment_extensions());
        // The run's state says which operation is under way: if this process dies, the next one finishes it.
        let in_flight = StoredState {
            out_of_sync: false,
            pending: Some(PendingOperation::Put {
                correlation_id: correlation_id.clone(),
            }),
            ..previous.clone()
        };
        let written = self
            .put_record(scope, name, &stack, &in_flight, precondition)
            .await?;
        let fence = RecordFence::new(scope, name, written.version);
        let (ended_sender, ended) = OperationEnded::channel();
        Ok((
            Accepted {
                stack: stack.clone(),
                created,
                ended,
            },
            PutJob {
                request,
                stack,
                previous: in_flight,
                correlation_id,
                fence,
            },
            ended_sender,
        ))
    }

    async fn put_record(
        &self,
        scope: &str,
        name: &str,
        stack: &DeploymentStack,
        state: &StoredState,
        precondition: Precondition,
    ) -> Result<StackRecord, ArmError> {
        let stack_json = serde_json::to_value(stack)
            .map_err(|e| ArmError::new(500, "InternalServerError", e.to_string()))?;
        self.inner
            .store
            .put_stack(
                NewStack {
                    scope: scope.trim_end_matches('/').to_owned(),
                    name: name.to_owned(),
                    stack: stack_json,
                    managed_set: state.to_value(),
                },
                precondition,
                Timestamp::now(),
            )
            .await
            .map_err(store_error)
    }

    /// Every stack record of every scope (the ownership check and recovery look across all of them).
    async fn all_stack_records(&self) -> Result<Vec<StackRecord>, ArmError> {
        let mut records = Vec::new();
        let mut page = PageRequest::default();
        loop {
            let listed = self
                .inner
                .store
                .list_stacks(None, page.clone())
                .await
                .map_err(store_error)?;
            records.extend(listed.items);
            match listed.continuation {
                Some(token) => page.continuation = Some(token),
                None => return Ok(records),
            }
        }
    }

    /// The other stacks' claims on resources, for the ownership check.
    async fn ownership(&self, scope: &str, name: &str) -> Result<Ownership, ArmError> {
        let mut ownership = Ownership::new();
        let me = lease_name(scope, name);
        for record in self.all_stack_records().await? {
            if lease_name(&record.scope, &record.name) == me {
                continue;
            }
            let Ok(state) = StoredState::from_value(&record.managed_set) else {
                continue;
            };
            let shared = record
                .stack
                .pointer("/tags")
                .and_then(|t| t.get(SHARE_TAG))
                .and_then(Value::as_str)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            let stack_id = record
                .stack
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(&record.name)
                .to_owned();
            for resource in &state.managed_set {
                ownership.claim(
                    resource.key().clone(),
                    StackClaim {
                        stack_id: stack_id.clone(),
                        shared,
                    },
                );
            }
        }
        Ok(ownership)
    }

    /// The deployment tree of a finished deployment, with nested deployments found through its operations.
    async fn snapshot(
        &self,
        scope: &str,
        name: &str,
        depth: u32,
    ) -> Result<DeploymentSnapshot, ArmError> {
        let deployment = self
            .inner
            .engine
            .get(scope, name)
            .await
            .map_err(|e| e.to_arm())?;
        self.snapshot_of(deployment, scope, name, depth).await
    }

    /// [`StackService::snapshot`] of a deployment whose record was just read (as the engine's handle returns it when
    /// the deployment ends): a big deployment's record is not read twice.
    async fn snapshot_of(
        &self,
        deployment: DeploymentExtended,
        scope: &str,
        name: &str,
        depth: u32,
    ) -> Result<DeploymentSnapshot, ArmError> {
        let operations = self
            .inner
            .engine
            .operations(scope, name)
            .await
            .map_err(|e| e.to_arm())?;
        let mut nested = Vec::new();
        if depth < 32 {
            for operation in &operations {
                let Some(target) = operation
                    .properties
                    .target_resource
                    .as_ref()
                    .and_then(|t| t.id.as_deref())
                else {
                    continue;
                };
                if let Some((child_scope, child_name)) = split_deployment_id(target)
                    && let Ok(child) =
                        Box::pin(self.snapshot(&child_scope, &child_name, depth + 1)).await
                {
                    nested.push(child);
                }
            }
        }
        Ok(DeploymentSnapshot {
            deployment,
            operations,
            extra_dependencies: Vec::new(),
            nested,
        })
    }

    /// Runs a PUT's deployment and the rest of it; the stack as its last write left it.
    async fn run_put(
        &self,
        scope: &str,
        name: &str,
        job: PutJob,
    ) -> Result<DeploymentStack, ArmError> {
        let started = Instant::now();
        let PutJob {
            request,
            mut stack,
            previous,
            correlation_id,
            fence,
        } = job;
        let deployment_scope = stack
            .properties
            .deployment_scope
            .clone()
            .unwrap_or_else(|| scope.to_owned());
        let deployment_name = name.to_owned();
        let deployed = async {
            let mut handle = self
                .inner
                .engine
                .create_or_update(
                    &deployment_scope,
                    &deployment_name,
                    deployment_of(&request),
                    DeployOptions {
                        stack_initiated: true,
                        correlation_id: Some(correlation_id.clone()),
                    },
                )
                .await
                .map_err(|e| e.to_arm())?;
            stack.properties.deployment_id = handle.accepted.id.clone();
            let deployment = handle.wait().await.map_err(|e| e.to_arm())?;
            self.snapshot_of(deployment, &deployment_scope, &deployment_name, 0)
                .await
        }
        .await;
        let run = PutRun {
            scope,
            name,
            fence: &fence,
            correlation_id: &correlation_id,
            started,
        };
        self.complete_put(run, stack, previous, deployed).await
    }

    /// The part of a PUT after its deployment ended: the new managed set, the unmanage diff and its deletes, the
    /// record (the stack as written is returned). Also how recovery finishes an update whose process died after
    /// (or while) deploying.
    async fn complete_put(
        &self,
        run: PutRun<'_>,
        mut stack: DeploymentStack,
        previous: StoredState,
        deployed: Result<DeploymentSnapshot, ArmError>,
    ) -> Result<DeploymentStack, ArmError> {
        let PutRun {
            scope,
            name,
            fence,
            correlation_id,
            started,
        } = run;
        let mut state = previous.clone();
        let p = &mut stack.properties;
        let snapshot = match deployed {
            Ok(snapshot) => snapshot,
            Err(error) => {
                // Nothing ran (or nothing can be read): the managed set stays as it was.
                p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
                p.error = Some(update_failed(vec![error.into_detail()]));
                p.duration = Some(iso_duration(started.elapsed()));
                self.finish(fence, &stack, &state).await?;
                return Ok(stack);
            }
        };
        p.outputs = snapshot.deployment.properties.outputs.clone();
        p.deployment_id = snapshot.deployment.id.clone().or(p.deployment_id.take());
        let deployment_error = snapshot.deployment.properties.error.clone();
        let collected = collect_managed_set(&snapshot);
        let mut errors: Vec<ErrorDetail> = Vec::new();
        if let Some(error) = deployment_error {
            errors.push(
                ErrorDetail::new(
                    "DeploymentStackDeploymentFailed",
                    "The deployment of the stack failed.",
                )
                .with_details([error]),
            );
        }
        errors.extend(
            collected
                .issues
                .iter()
                .filter(|i| i.is_error())
                .map(|i| i.to_error_detail()),
        );
        if let Some(refused) = config_id_changes(&previous.managed_set, &collected.resources) {
            // The config now points at another control plane: the old resources cannot be unmanaged through it,
            // so nothing leaves the stack; both sets stay managed until the config is put back.
            let mut merged = previous.managed_set.clone();
            for resource in collected.resources.iter() {
                merged.merge(resource.clone());
            }
            state.managed_set = merged;
            errors.push(refused);
            return self.fail_with(fence, stack, state, errors, started).await;
        }
        let ownership = self.ownership(scope, name).await?;
        let diff = match diff_collected(
            &previous.managed_set,
            &collected,
            &stack.properties.action_on_unmanage,
            &ownership,
        ) {
            Ok(diff) => diff,
            Err(error) => {
                errors.push(error.to_error_detail());
                // The deployment ran: keep what it created managed, along with everything before — except what
                // another stack owns and does not share, which this stack must not take over.
                let mut merged = previous.managed_set.clone();
                for resource in collected.resources.iter() {
                    let claims = ownership.claims(resource.key());
                    if claims.iter().all(|claim| claim.shared) {
                        merged.merge(resource.clone());
                    }
                }
                state.managed_set = merged;
                return self.fail_with(fence, stack, state, errors, started).await;
            }
        };
        // While the deletes run, the record shows `deletingResources` and what is gone so far; the managed set it
        // publishes is the previous one with the new resources added, so a crash loses neither.
        let mut publishing = stack.clone();
        publishing.properties.provisioning_state =
            Some(DeploymentStackProvisioningState::DeletingResources);
        let mut publishing_state = previous.clone();
        for resource in collected.resources.iter() {
            publishing_state.managed_set.merge(resource.clone());
        }
        let result = self
            .unmanage(
                diff,
                &stack.properties.action_on_unmanage,
                correlation_id,
                Some((fence, publishing, publishing_state)),
            )
            .await?;
        state.managed_set = with_deny_status(
            result.resources.clone(),
            &stack.properties.deny_settings.mode,
        );
        state.out_of_sync = false;
        result.apply_to(&mut stack.properties);
        let p = &mut stack.properties;
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        if let Some(error) = result.error.clone() {
            errors.push(error);
        }
        if errors.is_empty() {
            p.error = None;
            p.provisioning_state = Some(DeploymentStackProvisioningState::Succeeded);
            p.duration = Some(iso_duration(started.elapsed()));
            self.finish(fence, &stack, &state).await?;
            Ok(stack)
        } else {
            self.fail_with(fence, stack, state, errors, started).await
        }
    }

    /// Ends the operation `failed` with `errors`; the stack as written.
    async fn fail_with(
        &self,
        fence: &RecordFence,
        mut stack: DeploymentStack,
        state: StoredState,
        errors: Vec<ErrorDetail>,
        started: Instant,
    ) -> Result<DeploymentStack, ArmError> {
        Self::mark_failed(&mut stack, &state, errors, started);
        self.finish(fence, &stack, &state).await?;
        Ok(stack)
    }

    /// The stack as a failed operation leaves it: `failed` with `errors`, managing `state`'s set.
    fn mark_failed(
        stack: &mut DeploymentStack,
        state: &StoredState,
        errors: Vec<ErrorDetail>,
        started: Instant,
    ) {
        let p = &mut stack.properties;
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
        p.error = Some(match errors.len() {
            1 if errors[0].code() == "DeploymentStackDeleteResourcesFailed" => errors[0].clone(),
            _ => update_failed(errors),
        });
        p.duration = Some(iso_duration(started.elapsed()));
    }

    /// The operation's last write: the stack in a terminal state, no operation pending.
    async fn finish(
        &self,
        fence: &RecordFence,
        stack: &DeploymentStack,
        state: &StoredState,
    ) -> Result<(), ArmError> {
        let state = StoredState {
            pending: None,
            ..state.clone()
        };
        self.write_fenced(fence, stack, &state).await
    }

    /// Runs the unmanage diff's deletes. With `publish` (the operation's fence and the record as it stands), the
    /// deletes done so far are published on the record while the rest run.
    async fn unmanage(
        &self,
        diff: cairn_stacks::UnmanageDiff,
        action: &cairn_arm::models::stack::ActionOnUnmanage,
        correlation_id: &str,
        publish: Option<(&RecordFence, DeploymentStack, StoredState)>,
    ) -> Result<StackOperationResult, ArmError> {
        let mut settings =
            RunSettings::for_action(action).map_err(|e| bad_request(e.to_error_detail()))?;
        settings.max_rounds = self.inner.settings.max_delete_rounds.max(1);
        settings.max_in_flight = Some(self.inner.settings.max_deletes_in_flight.max(1));
        let deleter = Deleter {
            store: self.inner.store.clone(),
            providers: self.inner.providers.clone(),
            host: self.inner.host.clone(),
            correlation_id: correlation_id.to_owned(),
        };
        let plan = diff.delete_plan();
        let publisher = match publish {
            Some((fence, stack, state)) if !plan.is_empty() => Some(self.publish_deletes(
                fence.clone(),
                stack,
                state,
                self.inner.settings.progress_interval,
            )),
            _ => None,
        };
        let report = deleter
            .run(
                plan,
                settings,
                self.inner.settings.retry_backoff,
                publisher.as_ref().map(|(sender, _)| sender),
            )
            .await;
        if let Some((sender, handle)) = publisher {
            drop(sender);
            // The publisher's writes must land before the operation's final one (they share the fence).
            let _ = handle.await;
        }
        let report =
            report.map_err(|e| ArmError::new(500, "InternalServerError", e.to_string()))?;
        Ok(StackOperationResult::assemble(diff, report, correlation_id))
    }

    /// The stack (`GET`); 404 `DeploymentStackNotFound`.
    pub async fn get(&self, scope: &str, name: &str) -> Result<DeploymentStack, ArmError> {
        self.load_stack(scope, name)
            .await?
            .map(|(_, stack)| stack)
            .ok_or_else(|| ArmError::deployment_stack_not_found(name))
    }

    /// The stacks of a scope.
    pub async fn list(&self, scope: &str, page: PageRequest) -> Result<StackPage, ArmError> {
        let listed = self
            .inner
            .store
            .list_stacks(Some(scope), page)
            .await
            .map_err(store_error)?;
        let mut value = Vec::with_capacity(listed.items.len());
        for record in listed.items {
            let stack = serde_json::from_value(record.stack).map_err(|e| {
                ArmError::new(
                    500,
                    "StoreDataCorrupt",
                    format!("stored stack '{}': {e}", record.name),
                )
            })?;
            value.push(stack);
        }
        Ok(StackPage {
            value,
            continuation: listed.continuation,
        })
    }

    /// Starts deleting a stack: every managed resource is unmanaged with the options' actions, then the stack
    /// record goes (unless some deletes failed: then it stays `failed` with them as `deleteFailed`). Returns
    /// `false` when there is no such stack (204).
    pub async fn delete(
        &self,
        scope: &str,
        name: &str,
        options: StackDeleteOptions,
        correlation_id: Option<String>,
    ) -> Result<bool, ArmError> {
        let started = self
            .delete_and_report(scope, name, options, correlation_id)
            .await?;
        Ok(started.is_some())
    }

    /// [`StackService::delete`] for a caller in this process that wants the outcome: `None` when there is no such
    /// stack, else the running delete, whose [`DeleteRun::finished`] gives the stack as the operation left it.
    /// A successful delete removes the record (a reader polling it may never see the last resources it unmanaged);
    /// the outcome still lists every one.
    pub async fn delete_and_report(
        &self,
        scope: &str,
        name: &str,
        options: StackDeleteOptions,
        correlation_id: Option<String>,
    ) -> Result<Option<DeleteRun>, ArmError> {
        check_actions(&options.action_on_unmanage)?;
        let Some((_, current)) = self.load_stack(scope, name).await? else {
            return Ok(None);
        };
        let owner = format!("{}:{}", self.inner.settings.owner_id, uuid::Uuid::new_v4());
        let lease = self.take_lease(scope, name, &owner, Some(&current)).await?;
        let correlation_id = correlation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let accepted = async {
            let Some((record, mut stack, mut state)) = self.load(scope, name).await? else {
                return Ok(None);
            };
            Self::check_in_sync(name, &state, &stack, options.bypass_stack_out_of_sync_error)?;
            stack.properties.provisioning_state = Some(DeploymentStackProvisioningState::Deleting);
            stack.properties.correlation_id = Some(correlation_id.clone());
            state.pending = Some(PendingOperation::Delete {
                correlation_id: correlation_id.clone(),
                action_on_unmanage: options.action_on_unmanage.clone(),
            });
            let written = self
                .put_record(
                    scope,
                    name,
                    &stack,
                    &state,
                    Precondition::Version(record.version),
                )
                .await?;
            Ok::<_, ArmError>(Some((
                stack,
                state,
                RecordFence::new(scope, name, written.version),
            )))
        }
        .await;
        let (stack, state, fence) = match accepted {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.release(scope, name, &owner).await;
                return Ok(None);
            }
            Err(error) => {
                self.release(scope, name, &owner).await;
                self.resume_if_interrupted(&error, scope, name);
                return Err(error);
            }
        };
        let (report, outcome) = tokio::sync::oneshot::channel();
        let (ended_sender, ended) = OperationEnded::channel();
        self.spawn_delete(
            lease,
            owner,
            fence,
            stack,
            state,
            options.action_on_unmanage,
            correlation_id,
            Some((report, ended_sender)),
        );
        Ok(Some(DeleteRun { outcome, ended }))
    }

    /// Runs a delete in the background under `lease` (renewed until it ends, then released); the stack as the
    /// delete left it goes to `report`, once the lease is released, and then its end is signalled.
    #[allow(clippy::too_many_arguments)]
    fn spawn_delete(
        &self,
        lease: Lease,
        owner: String,
        fence: RecordFence,
        stack: DeploymentStack,
        state: StoredState,
        action: cairn_arm::models::stack::ActionOnUnmanage,
        correlation_id: String,
        report: Option<(
            tokio::sync::oneshot::Sender<DeploymentStack>,
            tokio::sync::watch::Sender<Ending>,
        )>,
    ) {
        let operation = LeasedOperation {
            kind: "delete",
            lease: lease.name,
            owner,
            scope: fence.scope().to_owned(),
            name: fence.name().to_owned(),
            correlation_id: correlation_id.clone(),
        };
        let service = self.clone();
        self.spawn_leased(
            operation,
            async move {
                service
                    .run_delete(&fence, stack, state, &action, &correlation_id)
                    .await
            },
            move |outcome| {
                if let Some((report, ended)) = report {
                    if let Some(Ok(stack)) = outcome {
                        let _ = report.send(stack);
                    }
                    // The outcome goes to `report`: a successful delete leaves no record to show.
                    let _ = ended.send(Ending::Ended(None));
                }
            },
        );
    }

    async fn run_delete(
        &self,
        fence: &RecordFence,
        mut stack: DeploymentStack,
        mut state: StoredState,
        action: &cairn_arm::models::stack::ActionOnUnmanage,
        correlation_id: &str,
    ) -> Result<DeploymentStack, ArmError> {
        let started = Instant::now();
        let ownership = self.ownership(fence.scope(), fence.name()).await?;
        let diff = match unmanage_all(&state.managed_set, action, &ownership) {
            Ok(diff) => diff,
            Err(error) => {
                Self::mark_failed(&mut stack, &state, vec![error.to_error_detail()], started);
                self.finish(fence, &stack, &state).await?;
                return Ok(stack);
            }
        };
        let result = self
            .unmanage(
                diff,
                action,
                correlation_id,
                Some((fence, stack.clone(), state.clone())),
            )
            .await?;
        state.managed_set = result.resources.clone();
        result.apply_to(&mut stack.properties);
        let succeeded = result.error.is_none();
        let p = &mut stack.properties;
        p.correlation_id = Some(correlation_id.to_owned());
        p.resources = Some(state.managed_set.to_references());
        p.deployment_extensions = Some(state.managed_set.deployment_extensions());
        p.duration = Some(iso_duration(started.elapsed()));
        if succeeded {
            // The record goes; the stack as it ended is only the caller's to report.
            p.provisioning_state = Some(DeploymentStackProvisioningState::Succeeded);
            self.delete_fenced(fence).await?;
        } else {
            p.provisioning_state = Some(DeploymentStackProvisioningState::Failed);
            self.finish(fence, &stack, &state).await?;
        }
        Ok(stack)
    }

    /// Validates a stack body and its deployment without running anything (`POST .../validate`). An invalid
    /// request is `Err` (400 with the error; the server wraps it in a `DeploymentStackValidateResult`).
    pub async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStack,
    ) -> Result<DeploymentStackValidateResult, ArmError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let id = stack_id(scope, name)?;
        validate_body(&request.properties)?;
        validation::check_stack_template(&self.inner.engine, name, &request.properties).await?;
        let deployment_scope = deployment_scope_of(scope, &request.properties)?;
        let validated = self
            .inner
            .engine
            .validate(&deployment_scope, name, deployment_of(&request))
            .await
            .map_err(|e| e.to_arm())?;
        if let Some(error) = validated.error {
            return Err(ArmError::from_detail(400, error));
        }
        let props = validated.properties.unwrap_or_default();
        let validated_resources = props
            .validated_resources
            .iter()
            .flatten()
            .map(ResourceReference::from_output_resource)
            .collect();
        let p = &request.properties;
        Ok(DeploymentStackValidateResult {
            id: Some(id.to_string()),
            name: Some(name.to_owned()),
            resource_type: Some(DeploymentStack::TYPE.to_owned()),
            system_data: None,
            error: None,
            properties: Some(DeploymentStackValidateProperties {
                action_on_unmanage: Some(p.action_on_unmanage.clone()),
                correlation_id: props.correlation_id,
                deny_settings: Some(p.deny_settings.clone()),
                deployment_scope: Some(deployment_scope),
                description: p.description.clone(),
                parameters: public_parameters(p),
                template_link: p.template_link.as_ref().map(link_without_credentials),
                validated_resources: Some(validated_resources),
                deployment_extensions: props.extensions,
                validation_level: p.validation_level.clone(),
            }),
        })
    }

    /// The template of the stack's deployment (`POST .../exportTemplate`).
    pub async fn export_template(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentStackTemplateDefinition, ArmError> {
        let stack = self.get(scope, name).await?;
        let Some((deployment_scope, deployment_name)) = stack
            .properties
            .deployment_id
            .as_deref()
            .and_then(split_deployment_id)
        else {
            return Ok(DeploymentStackTemplateDefinition {
                template: None,
                template_link: stack.properties.template_link.clone(),
            });
        };
        let exported = self
            .inner
            .engine
            .export_template(&deployment_scope, &deployment_name)
            .await
            .map_err(|e| e.to_arm())?;
        Ok(DeploymentStackTemplateDefinition {
            template: exported.template,
            template_link: stack.properties.template_link.clone(),
        })
    }
}

struct PutJob {
    request: DeploymentStack,
    stack: DeploymentStack,
    /// The stored state as the PUT found it (with the PUT pending).
    previous: StoredState,
    correlation_id: String,
    fence: RecordFence,
}

/// Who a PUT's post-deployment part writes for.
struct PutRun<'a> {
    scope: &'a str,
    name: &'a str,
    fence: &'a RecordFence,
    correlation_id: &'a str,
    started: Instant,
}

fn update_failed(details: Vec<ErrorDetail>) -> ErrorDetail {
    ErrorDetail::new(
        "DeploymentStackUpdateFailed",
        "One or more stages of the deploymentStack failed.",
    )
    .with_details(details)
}

/// Deny status as recorded: cairn applies no deny assignments, so ARM resources report `none` when the mode is
/// `none` and `notSupported` otherwise; extensible resources are always `notSupported`.
fn with_deny_status(set: ManagedSet, mode: &DenySettingsMode) -> ManagedSet {
    set.into_vec()
        .into_iter()
        .map(|mut resource| {
            resource.deny_status = Some(match (resource.target(), mode) {
                (ManagedTarget::Extensible { .. }, _) => DenyStatusMode::NotSupported,
                (ManagedTarget::Arm(_), DenySettingsMode::None) => DenyStatusMode::None,
                (ManagedTarget::Arm(_), _) => DenyStatusMode::NotSupported,
            });
            resource
        })
        .collect()
}

/// A resource deployed again with the same extension, type and identifiers but another `configId` means the
/// config now points at a different control plane: refused. One pass over each set (a stack of thousands of
/// resources is checked in linear time).
fn config_id_changes(previous: &ManagedSet, next: &ManagedSet) -> Option<ErrorDetail> {
    /// Extension, type and identifiers (what a resource is, on whichever control plane), and its `configId`.
    fn identity(r: &ManagedResource) -> Option<((String, String, String), String)> {
        match r.target() {
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => Some((
                (
                    extension.name.to_ascii_lowercase(),
                    resource_type.to_ascii_lowercase(),
                    identifiers.to_string(),
                ),
                extension.config_id.clone().unwrap_or_default(),
            )),
            ManagedTarget::Arm(_) => None,
        }
    }
    let mut managed_on: HashMap<(String, String, String), Vec<String>> = HashMap::new();
    for (what, config_id) in previous.iter().filter_map(identity) {
        managed_on.entry(what).or_default().push(config_id);
    }
    let mut details = Vec::new();
    for ((ext, ty, ids), config_id) in next.iter().filter_map(identity) {
        let key = (ext, ty, ids);
        let Some(old_config_ids) = managed_on.get(&key) else {
            continue;
        };
        let (ext, ty, _) = &key;
        for old_config_id in old_config_ids.iter().filter(|old| **old != config_id) {
            details.push(
                ErrorDetail::new(
                    "DeploymentStackExtensionConfigIdChanged",
                    format!(
                        "The extension '{ext}' resource of type '{ty}' was deployed to control plane \
                         '{config_id}', but the stack manages it on '{old_config_id}'. A stack cannot move \
                         resources between control planes. Fix: deploy with the config of '{old_config_id}', \
                         or remove the resource from the stack first."
                    ),
                )
                .with_target(ty.clone()),
            );
        }
    }
    (!details.is_empty()).then(|| {
        ErrorDetail::new(
            "DeploymentStackExtensionConfigIdChanged",
            "The extension config of the stack points at another control plane than the resources it manages.",
        )
        .with_details(details)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_ids_split_into_scope_and_name() {
        assert_eq!(
            split_deployment_id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/d"
            ),
            Some(("/subscriptions/s/resourceGroups/rg".into(), "d".into()))
        );
        assert_eq!(
            split_deployment_id("/subscriptions/s/resourceGroups/rg"),
            None
        );
        assert_eq!(
            split_deployment_id("/subscriptions/s/providers/Microsoft.Resources/deployments/"),
            None
        );
    }

    #[test]
    fn durations_are_iso_8601() {
        assert_eq!(iso_duration(Duration::from_millis(1_234)), "PT1.234S");
    }

    fn widget(
        extension: &str,
        resource_type: &str,
        name: &str,
        config_id: &str,
    ) -> ManagedResource {
        ManagedResource::extensible(
            cairn_stacks::ExtensionIdentity {
                name: extension.into(),
                version: "1.0.0".into(),
                config_id: Some(config_id.into()),
            },
            resource_type,
            serde_json::json!({ "name": name }),
        )
    }

    #[test]
    fn a_resource_moved_to_another_config_id_is_refused_and_nothing_else() {
        let vault = ResourceId::parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v",
        )
        .unwrap();
        let previous: ManagedSet = [
            widget("Widgets", "widget", "a", "c1"),
            widget("Widgets", "widget", "b", "c1"),
            ManagedResource::arm(vault.clone()),
        ]
        .into_iter()
        .collect();
        assert!(config_id_changes(&previous, &previous).is_none());
        let next: ManagedSet = [
            // The same resource (extension and type compared without case) on another control plane.
            widget("WIDGETS", "Widget", "a", "c2"),
            widget("Widgets", "widget", "b", "c1"),
            widget("Widgets", "widget", "c", "c2"),
            ManagedResource::arm(vault),
        ]
        .into_iter()
        .collect();
        let refused = config_id_changes(&previous, &next).expect("refused");
        assert_eq!(refused.code(), "DeploymentStackExtensionConfigIdChanged");
        let details = serde_json::to_value(&refused).unwrap()["details"].clone();
        assert_eq!(details.as_array().map(Vec::len), Some(1), "{details:#}");
        assert_eq!(details[0]["target"], "widget");
        let message = details[0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("'c2'") && message.contains("'c1'"),
            "{message}"
        );
    }
}

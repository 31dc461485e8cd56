//! [`Engine`]: the public, `Send` API the server and CLI call. It owns a coordinator thread (a tokio runtime with
//! a `LocalSet`) where deployments run, since template expansion is single-threaded; calls from other runtimes
//! send it jobs over a channel. Reads (get, list, operations) go straight to the store.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use cairn_arm::access::{Access, Action};
use cairn_arm::models::deployment::{
    Deployment, DeploymentExportResult, DeploymentExtended, DeploymentMode, DeploymentProperties,
    DeploymentResourceReference, DeploymentValidateResult, DeploymentWhatIf,
};
use cairn_arm::models::operation::DeploymentOperation;
use cairn_arm::models::parameters::DeploymentParameters;
use cairn_arm::models::what_if::WhatIfOperationResult;
use cairn_arm::{ArmError, ErrorDetail};
use cairn_host::ExtensionHost;
use cairn_metrics::TakeoverKind;
use cairn_store::{
    DeploymentFilter, DeploymentId, DeploymentKey, DeploymentLookup, DeploymentRecord,
    DeploymentStatus, DeploymentSummary, DeploymentUpdate, JsonText, NewDeployment, PageRequest,
    Precondition, SecretOwner, Store, StoreError, Timestamp,
};
use serde_json::Value as Json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::adoption::ExistingResourceCheck;
use crate::env::EngineEnv;
use crate::error::EngineError;
use crate::events::DeploymentEvent;
use crate::fetch::{HttpTemplateFetcher, TemplateFetcher};
use crate::inflight::LocalFuture;
use crate::link::{resolve_request, seal_links};
use crate::provider::Providers;
use crate::records::{
    ENGINE_MEMBER, EngineAnnotation, ExistingResourcesAnnotation, deployment_extended,
    deployment_operation,
};
use crate::recovery::{end_running_operations, journal_progress, touched_resources};
use crate::registry::{Claims, RunControl, RunRegistry};
use crate::request::scope_key;
use crate::root::{Prepared, RootStart, prepare, resource_group_location, run_root};
use crate::secrets::{seal_request, unseal};
use crate::settings::{EngineSettings, RecoveryPolicy};

type Job = Box<dyn FnOnce(Arc<EngineEnv>) -> LocalFuture<'static, ()> + Send>;

enum Command {
    Job(Job),
    Shutdown,
    /// Drop every run where it stands, then answer.
    Stop(oneshot::Sender<()>),
}

/// Options of a deployment PUT.
#[derive(Clone, Debug, Default)]
pub struct DeployOptions {
    /// Started by a deployment stack: the record then shows extension configs (non-secret values and directives).
    pub stack_initiated: bool,
    /// The caller's `x-ms-correlation-request-id`; generated when absent.
    pub correlation_id: Option<String>,
    /// A stack's deployment: what to do with an extension resource that exists before its first write and no
    /// stack manages (see [`crate::ExistingResourceCheck`]). Its `adopt` is kept in the record, so a run resumed
    /// after a crash checks too (`ExistingResourceCheck::resumed`).
    pub existing_resources: Option<ExistingResourceCheck>,
    /// The caller follows the run's progress events ([`DeploymentHandle::take_events`]). Off, the run sends none:
    /// a queue nobody reads would hold several events per resource until the run ends.
    pub follow_events: bool,
}

/// A page of deployments.
#[derive(Clone, Debug, Default)]
pub struct DeploymentPage {
    pub value: Vec<DeploymentExtended>,
    pub continuation: Option<String>,
}

/// Where a caller's copy of a deployment's operations list stands: the run it lists and the journal sequence
/// number it has read up to ([`Engine::operations_after`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationsCursor {
    pub run: DeploymentId,
    pub sequence: u64,
}

/// The operations that changed after a cursor ([`Engine::operations_after`]).
#[derive(Clone, Debug)]
pub struct OperationsDelta {
    /// Where the list stands with the delta applied.
    pub cursor: OperationsCursor,
    /// Whether the delta continues the caller's list (same run); otherwise the list starts again from it.
    pub continues: bool,
    /// Each operation whose latest step is newer than the cursor, with that step's sequence number, in the order
    /// the operations first appeared: replacing an operation already listed (by `operationId`) and appending the
    /// others gives the list [`Engine::operations`] reads.
    pub changed: Vec<(u64, DeploymentOperation)>,
}

/// What [`Engine::hand_over`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandOverReport {
    /// Root deployments that were running when the hand over began.
    pub running: usize,
    /// Of those, the ones still running when the time was up: stopped where they stood (as a crash would), their
    /// claims released all the same.
    pub stopped_by_force: usize,
}

/// What `recover()` did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    /// Root deployments started again from their stored requests.
    pub resumed: Vec<DeploymentKey>,
    /// Deployments ended `Failed`, with what their operations created listed.
    pub failed: Vec<DeploymentKey>,
}

struct Inner {
    env: Arc<EngineEnv>,
    commands: mpsc::UnboundedSender<Command>,
    registry: Arc<RunRegistry>,
    /// Fired by [`Engine::hand_over`]: every run stops at its next safe point.
    closing: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
    }
}

/// The deployment engine. Cheap to clone; dropping the last clone stops the coordinator at once (running
/// deployments stay `Running` in the store until `recover()` on the next start takes them over).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
    /// Whom this handle acts for ([`Engine::acting_for`]): what its deployments may reach beyond their own scope.
    access: Access,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("owner", &self.inner.env.settings.owner_id)
            .finish_non_exhaustive()
    }
}

/// A deployment accepted by [`Engine::create_or_update`]; it runs in the background.
pub struct DeploymentHandle {
    engine: Engine,
    pub key: DeploymentKey,
    pub id: DeploymentId,
    /// The record as accepted (`Accepted`).
    pub accepted: DeploymentExtended,
    events: Option<mpsc::UnboundedReceiver<DeploymentEvent>>,
    done: watch::Receiver<bool>,
}

impl std::fmt::Debug for DeploymentHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentHandle")
            .field("key", &self.key)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl DeploymentHandle {
    /// The progress events (once; the stream ends when the deployment does), when the deployment was started with
    /// [`DeployOptions::follow_events`].
    pub fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<DeploymentEvent>> {
        self.events.take()
    }

    /// Waits for the deployment to end and returns its record.
    pub async fn wait(&mut self) -> Result<DeploymentExtended, EngineError> {
        self.ended().await;
        self.engine.get(&self.key.scope, &self.key.name).await
    }

    /// Waits for the deployment to end, for a caller that reads what it needs of it itself.
    pub async fn ended(&mut self) {
        while !*self.done.borrow() {
            if self.done.changed().await.is_err() {
                break;
            }
        }
    }
}

fn store_error(e: StoreError) -> EngineError {
    EngineError::Store(e)
}

fn not_found(name: &str) -> EngineError {
    EngineError::Arm(ArmError::deployment_not_found(name))
}

impl Engine {
    /// An engine over `store` and `host`. The built-in providers (resource groups, deployments, Key Vault) are
    /// always there; `providers` adds or replaces types.
    pub fn new(
        store: Arc<dyn Store>,
        host: Arc<ExtensionHost>,
        providers: Providers,
        settings: EngineSettings,
    ) -> Result<Engine, EngineError> {
        let fetcher = Arc::new(HttpTemplateFetcher::new(settings.linked_template_timeout));
        Self::with_template_fetcher(store, host, providers, settings, fetcher)
    }

    /// [`Engine::new`] with `fetcher` downloading linked templates (`templateLink.uri`, `parametersLink`) in place
    /// of the HTTP one, e.g. an in-process fetcher in tests.
    pub fn with_template_fetcher(
        store: Arc<dyn Store>,
        host: Arc<ExtensionHost>,
        providers: Providers,
        settings: EngineSettings,
        fetcher: Arc<dyn TemplateFetcher>,
    ) -> Result<Engine, EngineError> {
        let mut all = Providers::builtin(store.clone());
        all.extend(providers);
        let env = Arc::new(EngineEnv {
            store,
            host,
            providers: Arc::new(all),
            settings,
            fetcher,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_env = env.clone();
        std::thread::Builder::new()
            .name("cairn-engine".into())
            .spawn(move || coordinator(thread_env, rx, ready_tx))
            .map_err(|_| EngineError::ShutDown)?;
        match ready_rx.recv() {
            Ok(true) => {}
            _ => return Err(EngineError::ShutDown),
        }
        Ok(Engine {
            access: Access::everything(),
            inner: Arc::new(Inner {
                env,
                commands: tx,
                registry: Arc::new(RunRegistry::default()),
                closing: CancellationToken::new(),
            }),
        })
    }

    /// This engine acting for a caller that may reach only `access`: every scope a request touches (its own, nested
    /// deployments' target scopes, `reference()`/`list*()` reads, Key Vault references, template specs) is checked
    /// against it, before anything is written where the scope is known up front and at the call otherwise. The
    /// access is kept with the deployment, so a run resumed after a crash is held to it too.
    pub fn acting_for(&self, access: Access) -> Engine {
        Engine {
            inner: self.inner.clone(),
            access,
        }
    }

    /// Whom this handle acts for.
    pub fn access(&self) -> &Access {
        &self.access
    }

    pub fn settings(&self) -> &EngineSettings {
        &self.inner.env.settings
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.env.store
    }

    /// The resource providers (built-in and added), for serving individual resources outside deployments.
    pub fn providers(&self) -> &Arc<Providers> {
        &self.inner.env.providers
    }

    /// Runs `job` on the coordinator thread and returns its result.
    async fn on_coordinator<T: Send + 'static>(
        &self,
        job: impl FnOnce(Arc<EngineEnv>) -> LocalFuture<'static, T> + Send + 'static,
    ) -> Result<T, EngineError> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let job: Job = Box::new(move |env| {
            Box::pin(async move {
                let _ = reply_tx.send(job(env).await);
            })
        });
        self.inner
            .commands
            .send(Command::Job(job))
            .map_err(|_| EngineError::ShutDown)?;
        reply_rx.await.map_err(|_| EngineError::ShutDown)
    }

    /// [`prepare`]s a request on the coordinator. The outcome comes back as soon as it is known; the coordinator
    /// frees the template and expansion it built after that, while the caller goes on. `for_run`: a run is to start
    /// for this request (`properties`, the same `Arc`), which takes the parsed template over.
    #[allow(clippy::too_many_arguments)]
    async fn prepare_on_coordinator(
        &self,
        key: DeploymentKey,
        properties: Arc<cairn_arm::models::deployment::DeploymentProperties>,
        (location, rg_location): (Option<String>, Option<String>),
        annotation: EngineAnnotation,
        tracking: String,
        stack_initiated: bool,
        for_run: bool,
    ) -> Result<Result<(Prepared, Vec<cairn_template::ResourceIdentity>), ArmError>, EngineError>
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        let job: Job = Box::new(move |env| {
            Box::pin(async move {
                prepare(
                    &env,
                    &key,
                    &properties,
                    for_run,
                    (location.as_deref(), rg_location.as_deref()),
                    annotation,
                    &tracking,
                    stack_initiated,
                    |outcome| {
                        let _ = reply_tx.send(outcome);
                    },
                );
            })
        });
        self.inner
            .commands
            .send(Command::Job(job))
            .map_err(|_| EngineError::ShutDown)?;
        reply_rx.await.map_err(|_| EngineError::ShutDown)
    }

    fn key(scope: &str, name: &str) -> DeploymentKey {
        DeploymentKey::new(scope_key(scope), name)
    }

    async fn record(&self, key: &DeploymentKey) -> Result<DeploymentRecord, EngineError> {
        self.inner
            .env
            .store
            .get_deployment(key)
            .await
            .map_err(store_error)?
            .ok_or_else(|| not_found(&key.name))
    }

    /// A deployment's id, status and times, read without its request (which holds the template): what listing its
    /// operations needs, at a cost that does not grow with the template.
    async fn summary(&self, key: &DeploymentKey) -> Result<DeploymentSummary, EngineError> {
        self.inner
            .env
            .store
            .get_deployment_summary(DeploymentLookup::Key(key))
            .await
            .map_err(store_error)?
            .ok_or_else(|| not_found(&key.name))
    }

    /// The location a deployment records, and the resource group's for resource-group deployments (checking
    /// that the group exists).
    async fn locations(
        &self,
        key: &DeploymentKey,
        location: Option<&str>,
    ) -> Result<(Option<String>, Option<String>), EngineError> {
        let env = &self.inner.env;
        let rg_location = resource_group_location(env.store.as_ref(), key).await;
        let is_rg = cairn_arm::ResourceId::parse(&key.scope)
            .ok()
            .is_some_and(|id| id.resource_group_name().is_some());
        if is_rg && rg_location.is_none() && env.settings.require_resource_groups {
            let name = cairn_arm::ResourceId::parse(&key.scope)
                .ok()
                .and_then(|id| id.resource_group_name().map(str::to_string))
                .unwrap_or_default();
            return Err(EngineError::Arm(ArmError::resource_group_not_found(&name)));
        }
        Ok((location.map(str::to_string), rg_location))
    }

    /// Starts (or replaces) the deployment `name` at `scope`. Returns once the request is validated and stored;
    /// the deployment runs in the background. 409 `DeploymentActive` while a previous run is active.
    pub async fn create_or_update(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
        options: DeployOptions,
    ) -> Result<DeploymentHandle, EngineError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let env = self.inner.env.clone();
        let key = Self::key(scope, name);
        // Its status, times and version are all this needs: not the previous request (a big deployment's template)
        // or its output resources, which would be read and held through the whole accept.
        let existing = env
            .store
            .get_deployment_summary(DeploymentLookup::Key(&key))
            .await
            .map_err(store_error)?;
        if let Some(old) = &existing
            && !old.status.is_terminal()
        {
            let started = cairn_arm::time::format_timestamp(crate::records::system_time(
                old.started_at.unwrap_or(old.created_at),
            ));
            return Err(EngineError::Arm(ArmError::deployment_active(
                name, &started,
            )));
        }
        if request.properties.mode == DeploymentMode::Complete {
            return Err(EngineError::arm(
                400,
                "InvalidDeploymentMode",
                "cairn runs deployments in 'Incremental' mode only; 'Complete' mode (deleting resources the template \
                 does not name) is not supported.",
            ));
        }
        self.access.check(Action::Write, &key.to_string())?;
        let (location, rg_location) = self.locations(&key, request.location.as_deref()).await?;
        let (resolved, _) = resolve_request(&env, &self.access, &request.properties).await?;
        let request = Deployment {
            properties: resolved,
            ..request
        };
        let correlation_id = options
            .correlation_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let annotation = EngineAnnotation {
            utc_now: cairn_arm::time::format_timestamp(std::time::SystemTime::now()),
            new_guids: (0..16).map(|_| uuid::Uuid::new_v4().to_string()).collect(),
            existing_resources: options
                .existing_resources
                .as_ref()
                .map(|check| ExistingResourcesAnnotation { adopt: check.adopt }),
            access: self.access.clone(),
            ..EngineAnnotation::default()
        };
        let properties = Arc::new(request.properties);
        let (prepared, _) = self
            .prepare_on_coordinator(
                key.clone(),
                properties.clone(),
                (location.clone(), rg_location.clone()),
                annotation,
                correlation_id.clone(),
                options.stack_initiated,
                true,
            )
            .await??;
        let id = DeploymentId::generate();
        let mut sealed = serde_json::to_value(&*properties).unwrap_or(Json::Null);
        seal_request(
            env.store.as_ref(),
            &SecretOwner::Deployment(id.clone()),
            &mut sealed,
            &prepared.secure_parameters,
        )
        .await
        .map_err(store_error)?;
        seal_links(
            env.store.as_ref(),
            Some(&SecretOwner::Deployment(id.clone())),
            &mut sealed,
        )
        .await
        .map_err(store_error)?;
        if let Json::Object(p) = &mut sealed {
            // A template sent as a JSON string (or behind a link) is stored parsed, so records can read its
            // declarations and exportTemplate returns it; an object is stored as it came, with the request.
            if let Ok(Cow::Owned(template)) = crate::request::template_json(&properties) {
                p.insert("template".into(), template);
            }
            p.insert(
                ENGINE_MEMBER.into(),
                serde_json::to_value(&prepared.annotation).unwrap_or(Json::Null),
            );
        }
        let precondition = match &existing {
            Some(old) => Precondition::Version(old.version),
            None => Precondition::MustNotExist,
        };
        let now = Timestamp::now();
        let record = env
            .store
            .put_deployment(
                NewDeployment {
                    id: id.clone(),
                    key: key.clone(),
                    parent: None,
                    location: location.clone(),
                    tags: request
                        .tags
                        .as_ref()
                        .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                        .unwrap_or_default(),
                    request: sealed,
                    status: DeploymentStatus::Accepted,
                    correlation_id,
                    stack_initiated: options.stack_initiated,
                    created_at: now,
                    owner: Some(cairn_store::DeploymentOwner {
                        owner: env.settings.owner_id.clone(),
                        expires_at: now.saturating_add(env.settings.claim_ttl),
                    }),
                },
                precondition,
            )
            .await;
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                // The sealed secrets belong to a run that was never stored.
                let _ = env
                    .store
                    .delete_secrets(&SecretOwner::Deployment(id.clone()))
                    .await;
                return Err(match e {
                    StoreError::Conflict { .. } | StoreError::NotFound { .. } => {
                        EngineError::Arm(ArmError::deployment_active(name, "now"))
                    }
                    other => EngineError::Store(other),
                });
            }
        };
        let accepted = deployment_extended(&record);
        let handle = self.start(
            record,
            properties,
            prepared.annotation,
            options.follow_events,
            false,
            options.existing_resources,
        )?;
        let (events, done) = handle;
        Ok(DeploymentHandle {
            engine: self.clone(),
            key,
            id,
            accepted,
            events,
            done,
        })
    }

    /// Hands a stored record to the coordinator.
    #[allow(clippy::type_complexity)]
    fn start(
        &self,
        record: DeploymentRecord,
        properties: Arc<cairn_arm::models::deployment::DeploymentProperties>,
        annotation: EngineAnnotation,
        with_events: bool,
        resumed: bool,
        existing_resources: Option<ExistingResourceCheck>,
    ) -> Result<
        (
            Option<mpsc::UnboundedReceiver<DeploymentEvent>>,
            watch::Receiver<bool>,
        ),
        EngineError,
    > {
        let (events_tx, events_rx) = if with_events {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let cancel = CancellationToken::new();
        if record.cancel_requested {
            // Canceled through a replica that died before it could act on it: the resumed run ends `Canceled`.
            cancel.cancel();
        }
        let (done_tx, done_rx) = watch::channel(false);
        let claims = Claims::of(record.id.clone());
        self.inner.registry.insert(
            &record.key,
            RunControl {
                id: record.id.clone(),
                cancel: cancel.clone(),
                claims: claims.clone(),
            },
        );
        let registry = self.inner.registry.clone();
        // Every log line of the run, its calls and its store writes carries the deployment and the correlation id
        // of the request that started it (also when recovery resumes it in another process).
        let span = tracing::info_span!(
            "deployment",
            deployment = %record.key,
            correlation_id = %record.correlation_id
        );
        let start = RootStart {
            record,
            properties,
            annotation,
            events: events_tx,
            cancel,
            suspend: self.inner.closing.clone(),
            claims,
            done: done_tx,
            registry,
            resumed,
            existing_resources,
        };
        let job: Job = Box::new(move |env| Box::pin(run_root(env, start).instrument(span)));
        self.inner
            .commands
            .send(Command::Job(job))
            .map_err(|_| EngineError::ShutDown)?;
        Ok((events_rx, done_rx))
    }

    /// The deployment record (`GET`).
    pub async fn get(&self, scope: &str, name: &str) -> Result<DeploymentExtended, EngineError> {
        let key = Self::key(scope, name);
        Ok(deployment_extended(&self.record(&key).await?))
    }

    /// The deployments of a scope, optionally only those in one state (`$filter=provisioningState eq '...'`).
    pub async fn list(
        &self,
        scope: &str,
        status: Option<DeploymentStatus>,
        page: PageRequest,
    ) -> Result<DeploymentPage, EngineError> {
        let page = self
            .inner
            .env
            .store
            .list_deployments(
                &scope_key(scope),
                DeploymentFilter {
                    status,
                    parent: None,
                    page,
                },
            )
            .await
            .map_err(store_error)?;
        Ok(DeploymentPage {
            value: page.items.iter().map(deployment_extended).collect(),
            continuation: page.continuation,
        })
    }

    /// The deployment's operations (the latest step of each).
    pub async fn operations(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Vec<DeploymentOperation>, EngineError> {
        let key = Self::key(scope, name);
        let record = self.summary(&key).await?;
        let rows = self
            .inner
            .env
            .store
            .latest_operations(&record.id)
            .await
            .map_err(store_error)?;
        // Each row goes as soon as it is converted: a big deployment has thousands.
        Ok(rows
            .into_iter()
            .map(|r| deployment_operation(&key, &r))
            .collect())
    }

    /// The deployment's operations that changed after `known` (a caller's copy of the list; `None` for none): a
    /// run's journal only grows and its sequence numbers follow its commits, so a caller that keeps the list it
    /// read reads only the journal rows after it, not every operation again.
    pub async fn operations_after(
        &self,
        scope: &str,
        name: &str,
        known: Option<&OperationsCursor>,
    ) -> Result<OperationsDelta, EngineError> {
        const PAGE: u32 = 1_000;
        let key = Self::key(scope, name);
        let record = self.summary(&key).await?;
        let continues = known.is_some_and(|known| known.run == record.id);
        let mut sequence = known.filter(|_| continues).map_or(0, |k| k.sequence);
        let mut changed: Vec<(u64, DeploymentOperation)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        loop {
            let rows = self
                .inner
                .env
                .store
                .operation_journal(&record.id, sequence, PAGE)
                .await
                .map_err(store_error)?;
            let full_page = rows.len() == PAGE as usize;
            for row in rows {
                sequence = sequence.max(row.sequence);
                let operation = deployment_operation(&key, &row);
                match at.get(&row.step.operation_id) {
                    Some(&index) => changed[index] = (row.sequence, operation),
                    None => {
                        at.insert(row.step.operation_id.clone(), changed.len());
                        changed.push((row.sequence, operation));
                    }
                }
            }
            if !full_page {
                break;
            }
        }
        Ok(OperationsDelta {
            cursor: OperationsCursor {
                run: record.id,
                sequence,
            },
            continues,
            changed,
        })
    }

    /// One operation.
    pub async fn operation(
        &self,
        scope: &str,
        name: &str,
        operation_id: &str,
    ) -> Result<DeploymentOperation, EngineError> {
        let key = Self::key(scope, name);
        let record = self.summary(&key).await?;
        let row = self
            .inner
            .env
            .store
            .get_operation(&record.id, operation_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| {
                EngineError::arm(
                    404,
                    "DeploymentOperationNotFound",
                    format!("Deployment operation '{operation_id}' could not be found."),
                )
            })?;
        Ok(deployment_operation(&key, &row))
    }

    /// Deletes the deployment's history (never its resources). 409 while it is running.
    pub async fn delete(&self, scope: &str, name: &str) -> Result<(), EngineError> {
        let key = Self::key(scope, name);
        let record = self.record(&key).await?;
        if !record.status.is_terminal() {
            return Err(EngineError::Arm(ArmError::deployment_active_delete(name)));
        }
        match self
            .inner
            .env
            .store
            .delete_deployment(&key, Precondition::Version(record.version))
            .await
        {
            Ok(()) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(StoreError::Conflict { .. }) => {
                Err(EngineError::Arm(ArmError::deployment_active_delete(name)))
            }
            Err(e) => Err(store_error(e)),
        }
    }

    /// Cancels a running deployment: nothing new is scheduled, operations in flight finish, and it ends
    /// `Canceled` (resources stay as far as they got). 409 when it is not running. A run of another live replica is
    /// canceled there: the request is recorded on the run, which that replica sees at its next heartbeat.
    pub async fn cancel(&self, scope: &str, name: &str) -> Result<(), EngineError> {
        let key = Self::key(scope, name);
        let record = self.record(&key).await?;
        if record.status.is_terminal() {
            return Err(EngineError::arm(
                409,
                "DeploymentCannotBeCanceled",
                format!(
                    "The deployment '{name}' cannot be canceled because it is in state '{}'.",
                    record.status
                ),
            ));
        }
        if self.inner.registry.cancel(&key, &record.id) {
            return Ok(());
        }
        // Not running here: take it over if its engine is gone, else it belongs to a live replica.
        let env = &self.inner.env;
        let now = Timestamp::now();
        match env
            .store
            .claim_deployment(
                &record.id,
                &env.settings.owner_id,
                now.saturating_add(env.settings.claim_ttl),
                now,
            )
            .await
        {
            Ok(claimed) => {
                let update = DeploymentUpdate {
                    status: Some(DeploymentStatus::Canceled),
                    finished_at: Some(now),
                    ..DeploymentUpdate::at(now)
                };
                env.store
                    .update_deployment(&claimed.id, claimed.version, update)
                    .await
                    .map_err(store_error)?;
                let _ = env
                    .store
                    .release_deployment(&claimed.id, &env.settings.owner_id)
                    .await;
                Ok(())
            }
            // Running on another live replica: the cancel is recorded on the run, and that replica cancels when it
            // next renews its claim (within a heartbeat).
            Err(StoreError::Conflict { .. }) => {
                env.store
                    .request_deployment_cancel(&record.id)
                    .await
                    .map_err(store_error)?;
                Ok(())
            }
            Err(e) => Err(store_error(e)),
        }
    }

    /// The template and parameters a deployment request amounts to: `templateLink` (a template spec version or a
    /// URI) and `parametersLink` resolved, or the inline ones. The same checks as a deployment PUT: not both
    /// `template` and `templateLink`, not both `parameters` and `parametersLink`.
    pub async fn resolve_template(
        &self,
        properties: &DeploymentProperties,
    ) -> Result<(Json, Option<DeploymentParameters>), ArmError> {
        let (resolved, _) = resolve_request(&self.inner.env, &self.access, properties).await?;
        let template = crate::request::template_json(&resolved)?.into_owned();
        Ok((template, resolved.parameters))
    }

    /// The template of a stored deployment (`exportTemplate`): for a linked deployment, the template it
    /// downloaded.
    pub async fn export_template(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentExportResult, EngineError> {
        let key = Self::key(scope, name);
        let record = self.record(&key).await?;
        Ok(DeploymentExportResult {
            template: record.request.get("template").cloned(),
        })
    }

    /// Validates a deployment request without deploying (`POST .../validate`). An invalid template is
    /// `Err` with ARM's 400 `InvalidTemplateDeployment` (the server wraps it in a `DeploymentValidateResult`).
    pub async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
    ) -> Result<DeploymentValidateResult, EngineError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let key = Self::key(scope, name);
        self.access.check(Action::Write, &key.to_string())?;
        let (location, rg_location) = self.locations(&key, request.location.as_deref()).await?;
        let (resolved, _) =
            resolve_request(&self.inner.env, &self.access, &request.properties).await?;
        let request = Deployment {
            properties: resolved,
            ..request
        };
        let tracking = uuid::Uuid::new_v4().to_string();
        let (prepared, identities) = self
            .prepare_on_coordinator(
                key.clone(),
                Arc::new(request.properties.clone()),
                (location, rg_location),
                EngineAnnotation {
                    utc_now: cairn_arm::time::format_timestamp(std::time::SystemTime::now()),
                    access: self.access.clone(),
                    ..EngineAnnotation::default()
                },
                tracking,
                false,
                false,
            )
            .await??;
        let template = crate::request::template_json(&request.properties)?;
        let validated: Vec<DeploymentResourceReference> = identities
            .iter()
            .filter(|r| r.condition != Some(false) && !r.existing)
            .map(|r| match &r.extension {
                Some(e) => DeploymentResourceReference {
                    extension: Some(cairn_arm::models::extension::DeploymentExtension {
                        alias: None,
                        deployment_id: None,
                        name: e.name.clone(),
                        version: e.version.clone(),
                        config_id: None,
                        config_hash: None,
                        config: None,
                    }),
                    resource_type: Some(r.resource_type.clone()),
                    api_version: r.api_version.clone(),
                    symbolic_name_path: r.symbolic_name.clone().map(|s| vec![s]),
                    ..DeploymentResourceReference::default()
                },
                None => DeploymentResourceReference {
                    id: r.id.clone(),
                    ..DeploymentResourceReference::default()
                },
            })
            .collect();
        let parameters = request
            .properties
            .parameters
            .as_ref()
            .map(|p| cairn_arm::secure::response_parameters(p, &template));
        let mut shown = DeploymentExtended::for_id(
            &cairn_arm::ResourceId::parse(&key.to_string())
                .map_err(|e| EngineError::Arm(e.to_arm_error(&key.to_string())))?,
        );
        shown.properties.provisioning_state =
            Some(cairn_arm::models::deployment::DeploymentProvisioningState::Succeeded);
        shown.properties.mode = Some(request.properties.mode.clone());
        shown.properties.parameters = parameters;
        shown.properties.template_link = request.properties.template_link.as_ref().map(|link| {
            let mut link = link.clone();
            link.query_string = None;
            link.uri = link.uri.as_deref().map(crate::link::display_text);
            link
        });
        shown.properties.template_hash = prepared.annotation.template_hash.clone();
        shown.properties.dependencies = Some(prepared.annotation.dependencies.clone());
        shown.properties.validated_resources = Some(validated);
        shown.properties.timestamp = Some(cairn_arm::time::format_timestamp(
            std::time::SystemTime::now(),
        ));
        Ok(DeploymentValidateResult {
            error: None,
            id: shown.id.clone(),
            name: shown.name.clone(),
            resource_type: shown.resource_type.clone(),
            properties: Some(shown.properties),
        })
    }

    /// Predicts what a deployment would change (`POST .../whatIf`).
    pub async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentWhatIf,
    ) -> Result<WhatIfOperationResult, EngineError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let key = Self::key(scope, name);
        let (properties, settings) = request.properties.into_parts();
        self.access.check(Action::Write, &key.to_string())?;
        let (location, rg_location) = self.locations(&key, request.location.as_deref()).await?;
        let (properties, origin) =
            resolve_request(&self.inner.env, &self.access, &properties).await?;
        let access = self.access.clone();
        self.on_coordinator(move |env| {
            Box::pin(async move {
                crate::what_if::what_if(
                    &env,
                    &access,
                    &key,
                    &properties,
                    origin,
                    settings,
                    (location, rg_location),
                )
                .await
            })
        })
        .await?
    }

    /// Hands this engine's running deployments over to another engine (a replica, or this server after a restart),
    /// as a server does when it shuts down: every run stops scheduling, lets the calls in flight finish and journals
    /// them, leaves its record as it is (`Running`) and releases its claim, so recovery elsewhere resumes it at once
    /// instead of waiting for the claim to expire. Runs still going after `within` (a call slower than that) are
    /// stopped where they stand, as a crash would stop them — the calls they had in flight are performed again on
    /// resume — and their claims released all the same. Deployments started afterwards stop at once the same way.
    /// The engine runs nothing more after a hand over that had to stop runs by force.
    pub async fn hand_over(&self, within: std::time::Duration) -> HandOverReport {
        let running_roots = self.running_deployments();
        self.inner.closing.cancel();
        if tokio::time::timeout(within, self.inner.registry.wait_until_empty())
            .await
            .is_ok()
        {
            tracing::info!(deployments = running_roots, "deployments handed over");
            return HandOverReport {
                running: running_roots,
                stopped_by_force: 0,
            };
        }
        let stopped_by_force = self.running_deployments();
        let (ack_tx, ack_rx) = oneshot::channel();
        if self.inner.commands.send(Command::Stop(ack_tx)).is_ok() {
            let _ = ack_rx.await;
        }
        let env = &self.inner.env;
        let held = self.inner.registry.held_claims();
        for id in &held {
            if let Err(e) = env
                .store
                .release_deployment(id, &env.settings.owner_id)
                .await
            {
                tracing::warn!(deployment = %id, error = %e, "could not hand the deployment claim over");
            }
        }
        tracing::warn!(
            deployments = running_roots,
            stopped_by_force,
            claims = held.len(),
            "deployments handed over; some were still running when the time was up and were stopped where they stood"
        );
        HandOverReport {
            running: running_roots,
            stopped_by_force,
        }
    }

    /// Told whenever a deployment starts or ends running on this engine (a run ends once its record is final):
    /// for whoever waits for a deployment's end, who then reads its record again. Runs on other engines sharing
    /// the store are not told of: such a waiter reads the record again now and then too.
    pub fn run_changes(&self) -> tokio::sync::watch::Receiver<usize> {
        self.inner.registry.changes()
    }

    /// Root deployments running on this engine now.
    pub fn running_deployments(&self) -> usize {
        self.inner.registry.running()
    }

    /// Takes over deployments whose engine died (claims expired): resumes them or ends them `Failed`, per
    /// [`EngineSettings::recovery`]. Call once at startup (and periodically with several replicas).
    pub async fn recover(&self) -> Result<RecoveryReport, EngineError> {
        let env = self.inner.env.clone();
        let now = Timestamp::now();
        let orphans = env
            .store
            .list_orphaned_deployments(now, 1_000)
            .await
            .map_err(store_error)?;
        let mut report = RecoveryReport::default();
        // Children are handled with their root; a child whose root is gone or finished is failed on its own.
        let mut roots = Vec::new();
        let mut children = Vec::new();
        for record in orphans {
            // A run of this engine whose heartbeat fell behind is not orphaned.
            if self.inner.registry.is_running(&record.key) {
                continue;
            }
            if record.parent.is_none() {
                roots.push(record);
            } else {
                children.push(record);
            }
        }
        let root_ids: Vec<DeploymentId> = roots.iter().map(|r| r.id.clone()).collect();
        // A nested run cannot be resumed on its own (its inputs come from its parent's evaluation): it ends
        // `Failed`, and a resumed root replaces it with a fresh run under the same name.
        for child in children {
            let root = self.root_of(&child).await;
            let with_root = root.as_ref().is_some_and(|r| root_ids.contains(&r.id));
            tracing::info!(deployment = %child.key, with_root, "ending an interrupted nested deployment");
            self.fail_interrupted(child, &mut report).await;
        }
        for root in roots {
            let claimed = match env
                .store
                .claim_deployment(
                    &root.id,
                    &env.settings.owner_id,
                    now.saturating_add(env.settings.claim_ttl),
                    now,
                )
                .await
            {
                Ok(r) => r,
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_error(e)),
            };
            if env.settings.recovery == RecoveryPolicy::Resume {
                let progress = journal_progress(env.store.as_ref(), &claimed.id, 0).await;
                let takeovers = match env.store.record_takeover(&claimed.id, progress).await {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!(deployment = %claimed.key, error = %e, "could not count a takeover");
                        1
                    }
                };
                let limit = env.settings.max_recovery_takeovers.max(1);
                if takeovers >= limit {
                    env.settings
                        .metrics
                        .takeover(TakeoverKind::Deployment, "abandoned");
                    tracing::warn!(
                        deployment = %claimed.key,
                        takeovers,
                        "abandoning a deployment that was taken over again and again without progress"
                    );
                    let error = ErrorDetail::new(
                        "DeploymentRecoveryAbandoned",
                        format!(
                            "The deployment was taken over {takeovers} times after its engine stopped, each time \
                             without progress, so it is no longer resumed. The resources its operations created, or \
                             were creating, are listed in outputResources. Fix what stops the engine and run the \
                             deployment again."
                        ),
                    );
                    self.fail_interrupted_with(claimed, error, &mut report)
                        .await;
                    continue;
                }
                if let Some((properties, annotation)) = self.resumable(&claimed).await {
                    let key = claimed.key.clone();
                    // A stack's deployment goes on checking what exists before writing it.
                    let existing_resources = annotation
                        .existing_resources
                        .map(|a| ExistingResourceCheck::resumed(a.adopt));
                    self.start(
                        claimed,
                        Arc::new(properties),
                        annotation,
                        false,
                        true,
                        existing_resources,
                    )?;
                    env.settings
                        .metrics
                        .takeover(TakeoverKind::Deployment, "resumed");
                    report.resumed.push(key);
                    continue;
                }
            }
            env.settings
                .metrics
                .takeover(TakeoverKind::Deployment, "failed");
            self.fail_interrupted(claimed, &mut report).await;
        }
        Ok(report)
    }

    async fn root_of(&self, record: &DeploymentRecord) -> Option<DeploymentRecord> {
        let mut current = record.clone();
        for _ in 0..=cairn_template::expand::MAX_NESTING_DEPTH {
            let Some(parent) = current.parent.clone() else {
                return Some(current);
            };
            current = self
                .inner
                .env
                .store
                .get_deployment_by_id(&parent)
                .await
                .ok()
                .flatten()?;
        }
        None
    }

    /// The stored request with its secrets, when the run can be started again.
    async fn resumable(
        &self,
        record: &DeploymentRecord,
    ) -> Option<(
        cairn_arm::models::deployment::DeploymentProperties,
        EngineAnnotation,
    )> {
        let mut request = record.request.clone();
        let annotation = EngineAnnotation::read(&request);
        if let Json::Object(map) = &mut request {
            map.remove(ENGINE_MEMBER);
        }
        if let Err(e) = unseal(self.inner.env.store.as_ref(), &mut request).await {
            tracing::warn!(deployment = %record.key, error = %e, "cannot resume: the request's secrets are unreadable");
            return None;
        }
        match serde_json::from_value(request) {
            Ok(properties) => Some((properties, annotation)),
            Err(_) => {
                tracing::warn!(deployment = %record.key, "cannot resume: the stored request does not parse");
                None
            }
        }
    }

    /// Ends an interrupted deployment `Failed`, listing what its operations created or were creating.
    async fn fail_interrupted(&self, record: DeploymentRecord, report: &mut RecoveryReport) {
        let error = ErrorDetail::new(
            "DeploymentInterrupted",
            "The engine running this deployment stopped before it finished. The resources its operations created, \
             or were creating, are listed in outputResources; run the deployment again to finish it.",
        );
        self.fail_interrupted_with(record, error, report).await;
    }

    /// Ends an interrupted deployment `Failed` with `error`, listing what its operations created.
    async fn fail_interrupted_with(
        &self,
        record: DeploymentRecord,
        error: ErrorDetail,
        report: &mut RecoveryReport,
    ) {
        let env = &self.inner.env;
        let now = Timestamp::now();
        let claimed = match env
            .store
            .claim_deployment(
                &record.id,
                &env.settings.owner_id,
                now.saturating_add(env.settings.claim_ttl),
                now,
            )
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(deployment = %record.key, error = %e, "could not claim an interrupted deployment");
                return;
            }
        };
        let (resources, extensions) = touched_resources(env.store.as_ref(), &claimed.id, 0).await;
        end_running_operations(env.store.as_ref(), &claimed.id, &error, 0).await;
        let update = DeploymentUpdate {
            status: Some(DeploymentStatus::Failed),
            finished_at: Some(now),
            error: serde_json::to_value(ArmError::deployment_failed([error]).into_detail()).ok(),
            output_resources: JsonText::of(&resources).ok(),
            extensions: serde_json::to_value(&extensions).ok(),
            ..DeploymentUpdate::at(now)
        };
        match env
            .store
            .update_deployment(&claimed.id, claimed.version, update)
            .await
        {
            Ok(_) => report.failed.push(claimed.key.clone()),
            Err(e) => {
                tracing::warn!(deployment = %claimed.key, error = %e, "could not fail an interrupted deployment")
            }
        }
        let _ = env
            .store
            .release_deployment(&claimed.id, &env.settings.owner_id)
            .await;
    }
}

/// The coordinator thread: a runtime whose `LocalSet` runs deployments; provider and extension calls are spawned
/// onto its worker threads.
fn coordinator(
    env: Arc<EngineEnv>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    ready: std::sync::mpsc::Sender<bool>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("cairn-engine-io")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "the engine runtime could not start");
            let _ = ready.send(false);
            return;
        }
    };
    let _ = ready.send(true);
    let local = tokio::task::LocalSet::new();
    let stopped = local.block_on(&runtime, async move {
        while let Some(command) = commands.recv().await {
            match command {
                Command::Job(job) => {
                    tokio::task::spawn_local(job(env.clone()));
                }
                Command::Shutdown => break,
                Command::Stop(ack) => return Some(ack),
            }
        }
        None
    });
    // Dropping the local set drops every running deployment where it stands, like a crash: nothing more is
    // written, and the claims expire (or a hand over releases them) so `recover()` can take the runs over.
    drop(local);
    runtime.shutdown_background();
    if let Some(ack) = stopped {
        let _ = ack.send(());
    }
}

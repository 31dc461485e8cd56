//! Running one deployment tree: the scheduler that walks a deployment's resource graph with bounded parallelism,
//! evaluates each body once its dependencies are deployed, calls providers and extensions, runs nested
//! deployments as child deployments with their own records, journals every operation and writes the record.
//!
//! Everything here runs on the engine's coordinator thread (`Expansion` is not `Send`); provider and extension
//! calls are spawned onto the engine runtime's worker threads and their results awaited here.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_arm::access::Action;
use cairn_arm::models::deployment::{BasicDependency, Dependency, DeploymentResourceReference};
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::operation::{StatusMessage, TargetResource};
use cairn_arm::{ArmError, ErrorDetail, ResourceId, ResourceIdKind};
use cairn_eval::Value;
use cairn_host::{CallContext, ExtensionConfig, HostError};
use cairn_store::{
    DeploymentId, DeploymentKey, DeploymentOwner, DeploymentRecord, DeploymentStatus,
    DeploymentUpdate, ExtensionRef, InventoryChange, NewDeployment, OperationStep, Precondition,
    ResourceKey, SecretOwner, Timestamp,
};
use cairn_template::plan::PlannedOutput;
use cairn_template::{
    Child, DeploymentContext, Diagnostic, Expansion, NestedTemplate, ResourceIdentity, Template,
};
use serde_json::{Map, Value as Json, json};
use tokio::sync::{OnceCell, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::adoption::ExistingResourceCheck;
use crate::config::{LocalResolver, deployment_error, public_config};
use crate::env::EngineEnv;
use crate::events::{DeploymentEvent, EventKind};
use crate::hook::{EngineHook, Miss, RuntimeValues};
use crate::link::TemplateOrigin;
use crate::provider::ProviderError;
use crate::records::{ENGINE_MEMBER, EngineAnnotation};
use crate::registry::Claims;
use crate::request::{secure_parameter_names, template_error};
use crate::secrets::{read_key_vault_secret, seal_request};

mod drive;

/// A resource operation's place: a slot of its tree's parallelism and, under an engine-wide cap, one of the shared
/// operation slots; both are given back when the operation ends (the slot drops).
pub(crate) struct Slot {
    _own: tokio::sync::OwnedSemaphorePermit,
    _shared: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Slot {
    pub(crate) fn new(
        own: tokio::sync::OwnedSemaphorePermit,
        shared: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Self {
        Slot {
            _own: own,
            _shared: shared,
        }
    }

    /// Waits for one of `places` (an extension create's lookup or queue place for its admission slot, a leaf's
    /// call slot for its place) and trades this place's own permit for it: the engine-wide slot stays held. A
    /// closed semaphore (the tree ending) leaves the place as it is.
    pub(crate) async fn trade_for(self, places: &Arc<Semaphore>) -> Self {
        match places.clone().acquire_owned().await {
            Ok(own) => Slot {
                _own: own,
                _shared: self._shared,
            },
            Err(_) => self,
        }
    }
}

/// State shared by a root deployment and every deployment nested in it.
pub(crate) struct Tree {
    pub env: Arc<EngineEnv>,
    /// Leaf operations admitted across the whole tree and not yet further along: a slot is taken when a node is
    /// admitted and held through its evaluation until the node has the next place on its way (an extension
    /// create's preview place, or a call slot).
    pub permits: Arc<Semaphore>,
    /// Extension previews in flight across the tree, as many as `permits`. An extension create trades its admission
    /// slot for one of these once its body is evaluated: the coordinator admits and evaluates the next resources
    /// while it waits, so a preview place that frees goes at once to a resource ready to call, instead of to one
    /// the coordinator has yet to admit and evaluate while it handles the wave of calls that just ended. At most
    /// `permits` resources wait so, evaluated.
    pub previews: Arc<Semaphore>,
    /// Existence `get`s in flight across the tree (a stack's deployment), as many as `permits`. An extension
    /// resource's create previews its target in its preview place, then trades it for one of these for the
    /// `get` whose identifiers the preview answered: the next resource's preview runs meanwhile, so the two
    /// lookups, each one call long, pipeline instead of holding one slot for both.
    pub lookups: Arc<Semaphore>,
    /// Extension creates looked up and not yet calling, across the tree, as many as `permits`. An extension
    /// resource's create looks up its target first (`preview`, and in a stack's deployment the existence `get`),
    /// then moves to one of these while its `Running` step is made durable and it waits for a call slot: the next
    /// resources' evaluation and lookups overlap the creates in flight instead of waiting behind them, and how
    /// many creates have said `Running` without calling stays bounded.
    pub queued: Arc<Semaphore>,
    /// Leaf calls in flight across the tree (provider and extension writes and reads), as many as `permits`: a
    /// leaf takes one only once its `Running` step is durable, so a call slot is never idle waiting for the disk.
    pub calls: Arc<Semaphore>,
    pub cancel: CancellationToken,
    /// Fired when the engine hands its runs over ([`crate::Engine::hand_over`]): stop at a safe point, leave the
    /// records as they are and release the claims, for recovery to resume the runs.
    pub suspend: CancellationToken,
    /// The tree stopped because of `suspend` (not a user's cancel): nothing terminal is written.
    pub handed_over: Cell<bool>,
    /// Progress events for a live view; `None` once the root run has ended (the stream ends with it).
    pub events: RefCell<Option<mpsc::UnboundedSender<DeploymentEvent>>>,
    pub stack_initiated: bool,
    /// What the caller that started the tree may reach (see [`crate::Engine::acting_for`]).
    pub access: cairn_arm::Access,
    /// A stack's deployment: what to do with extension resources that exist before their first write.
    pub existing_resources: Option<ExistingResourceCheck>,
    pub correlation_id: String,
    /// The root run resumes a run that died: its journal is replayed into the core.
    pub resumed: bool,
    pub values: Rc<RuntimeValues>,
    /// Records of this tree that are still active (their claims are renewed by the heartbeat).
    pub active: Claims,
}

impl Tree {
    pub(crate) fn emit(&self, event: DeploymentEvent) {
        if let Some(tx) = self.events.borrow().as_ref() {
            let _ = tx.send(event);
        }
    }

    /// Ends the progress events' stream: whoever follows it goes on.
    pub(crate) fn end_events(&self) {
        self.events.borrow_mut().take();
    }

    fn claim(&self) -> DeploymentOwner {
        DeploymentOwner {
            owner: self.env.settings.owner_id.clone(),
            expires_at: Timestamp::now().saturating_add(self.env.settings.claim_ttl),
        }
    }

    /// Resolves when the tree should stop scheduling: a user's cancel or the engine's hand over.
    pub(crate) async fn stop_requested(&self) {
        tokio::select! {
            () = self.cancel.cancelled() => {}
            () = self.suspend.cancelled() => {}
        }
    }

    /// Called once the scheduler has seen a stop request: a hand over, unless a user's cancel came first.
    pub(crate) fn note_stop(&self) {
        if self.suspend.is_cancelled() && !self.cancel.is_cancelled() {
            self.handed_over.set(true);
        }
    }

    fn call_context(&self) -> CallContext {
        CallContext {
            correlation_id: Some(self.correlation_id.clone()),
            ..CallContext::default()
        }
    }

    /// Renews the claims of the tree's active records until `stop` fires.
    pub(crate) async fn heartbeat(self: Rc<Self>, stop: CancellationToken) {
        let interval = self.env.settings.heartbeat_interval;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let ids: Vec<DeploymentId> = self.active.ids();
            for id in ids {
                let now = Timestamp::now();
                let until = now.saturating_add(self.env.settings.claim_ttl);
                match self
                    .env
                    .store
                    .claim_deployment(&id, &self.env.settings.owner_id, until, now)
                    .await
                {
                    // A cancel asked of another replica: it is recorded on the run for this one to act on.
                    Ok(record) if record.cancel_requested && !self.cancel.is_cancelled() => {
                        tracing::info!(deployment = %id, "a cancel was requested through another replica");
                        self.cancel.cancel();
                    }
                    Ok(_) => {}
                    Err(cairn_store::StoreError::Conflict { .. })
                        if self.finished_meanwhile(&id).await => {}
                    Err(cairn_store::StoreError::Conflict { .. }) => {
                        // Another replica took the run over (this one was presumed dead): stop scheduling.
                        tracing::warn!(deployment = %id, "lost the deployment claim; canceling this run");
                        self.cancel.cancel();
                    }
                    Err(e) => {
                        tracing::warn!(deployment = %id, error = %e, "could not renew the deployment claim")
                    }
                }
            }
        }
    }
}

impl Tree {
    /// A claim renewal was refused because the record ended between the heartbeat's list of active records and
    /// its renewal (a nested deployment finishing): nothing was taken over, the run goes on.
    async fn finished_meanwhile(&self, id: &DeploymentId) -> bool {
        matches!(
            self.env.store.get_deployment_by_id(id).await,
            Ok(Some(record)) if record.status.is_terminal()
        )
    }
}

/// A journal write refused because the run's claim is no longer this engine's (another replica took the run over
/// while this one was presumed dead): nothing it does from here on may land, so the run stops scheduling.
fn lost_claim_stops_the_run(
    error: &cairn_store::StoreError,
    cancel: &CancellationToken,
    key: &str,
) {
    if matches!(error, cairn_store::StoreError::Conflict { .. }) && !cancel.is_cancelled() {
        tracing::warn!(deployment = %key, "lost the deployment claim; canceling this run");
        cancel.cancel();
    }
}

#[derive(Default)]
struct Done {
    output_resources: Vec<DeploymentResourceReference>,
    extensions: Vec<DeploymentExtension>,
}

/// A deployment's end.
pub(crate) struct Finished {
    pub status: DeploymentStatus,
    pub error: Option<ErrorDetail>,
    pub outputs: Option<Vec<(String, PlannedOutput)>>,
    pub output_resources: Vec<DeploymentResourceReference>,
    pub extensions: Vec<DeploymentExtension>,
}

/// The resolved config of one extension alias, with what its calls reported.
struct ResolvedAlias {
    config: ExtensionConfig,
}

#[derive(Default)]
struct AliasSlot {
    resolved: OnceCell<Result<Rc<ResolvedAlias>, ErrorDetail>>,
    config_id: RefCell<Option<String>>,
}

/// The start of a leaf's call, awaited on the I/O runtime by the call's task ([`Run::call_start`]): the operation's
/// `Running` step made durable, then a call slot traded for the leaf's place (its admission slot, or an extension
/// create's queue place). Waiting there rather than on the coordinator, a call that ends hands its slot straight to
/// the next leaf waiting for one, without a round trip through the coordinator, which is busy with the wave of
/// calls that ended with it.
pub(crate) struct CallStart {
    written: Option<tokio::task::JoinHandle<()>>,
    calls: Arc<Semaphore>,
    place: Option<Slot>,
}

impl CallStart {
    /// Waits until the call may go out; the slot it holds meanwhile.
    pub(crate) async fn ready(self) -> Option<Slot> {
        if let Some(written) = self.written {
            let _ = written.await;
        }
        match self.place {
            Some(place) => Some(place.trade_for(&self.calls).await),
            None => None,
        }
    }
}

/// When the run needs a journal write durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Before the operation goes on: a `Running` step, settled before its call goes out ([`Run::call_start`]).
    Settled,
    /// Written behind: only the run's end waits for it (a finished operation's step), so the store may commit it
    /// with the next settled write.
    Behind,
}

/// One deployment (one record) of a tree.
pub(crate) struct Run {
    pub tree: Rc<Tree>,
    pub id: DeploymentId,
    pub key: DeploymentKey,
    pub depth: usize,
    version: Cell<u64>,
    aliases: RefCell<HashMap<String, Rc<AliasSlot>>>,
    /// Config properties declared secure, per alias (lower case).
    secure_config: HashMap<String, Vec<String>>,
    started: Instant,
    /// Store writes in flight, by operation ID.
    writes: RefCell<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// The run's last effects are being performed: what they journal has no later write to commit with.
    finishing: Cell<bool>,
    /// Where this deployment's template came from (what nested `relativePath` links resolve against).
    origin: TemplateOrigin,
    /// This deployment's facts, the base of its linked nested deployments' facts.
    context: Option<DeploymentContext>,
}

fn now() -> Timestamp {
    Timestamp::now()
}

fn elapsed_ms(since: Instant) -> i64 {
    i64::try_from(since.elapsed().as_millis()).unwrap_or(i64::MAX)
}

/// A stable operation ID for a resource of a deployment run (16 upper-case hex digits, like ARM's).
pub(crate) fn operation_id(deployment: &DeploymentId, key: &str) -> String {
    let id = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("{deployment}/{}", key.to_ascii_lowercase()).as_bytes(),
    );
    id.simple().to_string()[..16].to_ascii_uppercase()
}

fn host_error(e: &HostError) -> (u16, ErrorDetail) {
    let arm = e.error();
    let mut detail = ErrorDetail::new(arm.code.clone(), arm.message.clone());
    detail.target = arm.target.clone();
    if !arm.details.is_empty() {
        detail = detail.with_details(arm.details.iter().map(|d| {
            let mut x = ErrorDetail::new(d.code.clone(), d.message.clone());
            x.target = d.target.clone();
            x
        }));
    }
    (e.status(), detail)
}

/// The first unevaluated expression inside a value.
fn first_unevaluated(value: &Value) -> Option<String> {
    match value {
        Value::Unevaluated(u) => Some(u.expression.clone()),
        Value::Array(items) => items.iter().find_map(first_unevaluated),
        Value::Object(o) => o.values().find_map(first_unevaluated),
        _ => None,
    }
}

/// ARM's spelling of an output or parameter type in responses.
pub(crate) fn display_type(declared: &str) -> String {
    match declared.to_ascii_lowercase().as_str() {
        "string" => "String".into(),
        "securestring" => "SecureString".into(),
        "int" => "Int".into(),
        "bool" => "Bool".into(),
        "array" => "Array".into(),
        "object" => "Object".into(),
        "secureobject" => "SecureObject".into(),
        other => other.to_string(),
    }
}

/// Outputs as a record stores them (`{name: {type, value}}`); secure outputs are left out.
pub(crate) fn outputs_json(outputs: &[(String, PlannedOutput)]) -> Json {
    let mut map = Map::new();
    for (name, o) in outputs {
        if o.secure {
            continue;
        }
        map.insert(
            name.clone(),
            json!({ "type": display_type(&o.output_type), "value": o.value.to_json() }),
        );
    }
    Json::Object(map)
}

/// `dependencies[]` of a deployment from its resource identities.
pub(crate) fn dependencies(identities: &[ResourceIdentity]) -> Vec<Dependency> {
    let basic = |r: &ResourceIdentity| BasicDependency {
        id: r.id.clone(),
        resource_type: Some(r.resource_type.clone()),
        resource_name: r.name.clone().or_else(|| r.symbolic_name.clone()),
    };
    identities
        .iter()
        .filter(|r| !r.depends_on.is_empty())
        .map(|r| Dependency {
            depends_on: Some(
                r.depends_on
                    .iter()
                    .map(|&d| basic(&identities[d]))
                    .collect(),
            ),
            id: r.id.clone(),
            resource_type: Some(r.resource_type.clone()),
            resource_name: r.name.clone().or_else(|| r.symbolic_name.clone()),
        })
        .collect()
}

impl Run {
    pub(crate) fn new(
        tree: Rc<Tree>,
        id: DeploymentId,
        key: DeploymentKey,
        depth: usize,
        version: u64,
        secure_config: HashMap<String, Vec<String>>,
    ) -> Run {
        Run {
            tree,
            id,
            key,
            depth,
            version: Cell::new(version),
            aliases: RefCell::new(HashMap::new()),
            secure_config,
            started: Instant::now(),
            writes: RefCell::new(HashMap::new()),
            finishing: Cell::new(false),
            origin: TemplateOrigin::Inline,
            context: None,
        }
    }

    /// Sets where the run's template came from and its deployment facts (needed by linked nested deployments).
    pub(crate) fn set_link_context(&mut self, origin: TemplateOrigin, context: DeploymentContext) {
        self.origin = origin;
        self.context = Some(context);
    }

    /// The child deployment of nested deployment `identity` (its body evaluated): inline templates from the
    /// expansion, linked ones downloaded or read from their template spec. Also returns the child's template
    /// origin, the link its record shows and parameters read from a `parametersLink`.
    pub(crate) async fn nested_child(
        &self,
        expansion: &Expansion<'_>,
        identity: &ResourceIdentity,
        body: &Value,
    ) -> Result<NestedChild, ErrorDetail> {
        if identity.nested_deployment {
            let nested = match expansion
                .child(identity.index)
                .map_err(|diags| template_error(&diags))?
            {
                Child::Ready(nested) => *nested,
                // What-if shows this as the reason it cannot tell the child's changes; a deployment, which has
                // every runtime value its body needs by now, only if the template reads a resource it cannot.
                Child::Deferred(deferred) => {
                    return Err(ErrorDetail::new("InvalidTemplate", deferred.message())
                        .with_target(deferred.target));
                }
            };
            return Ok(NestedChild {
                nested,
                origin: self.origin.clone(),
                shown_link: None,
                fetched_parameters: None,
            });
        }
        let Some(context) = &self.context else {
            return Err(ErrorDetail::new(
                "InternalServerError",
                "The deployment facts of a linked nested deployment's parent are missing.",
            ));
        };
        let linked = crate::link::linked_nested(
            self.env(),
            &self.tree.access,
            expansion,
            identity,
            body,
            context,
            &self.origin,
        )
        .await?;
        Ok(NestedChild {
            nested: linked.nested,
            origin: linked.linked.origin,
            shown_link: Some(linked.linked.shown),
            fetched_parameters: linked.fetched_parameters,
        })
    }

    fn env(&self) -> &EngineEnv {
        &self.tree.env
    }

    fn event(
        &self,
        kind: EventKind,
        resource: &str,
        resource_type: &str,
        status: &str,
        duration: Option<Duration>,
        error: Option<ErrorDetail>,
    ) {
        self.tree.emit(DeploymentEvent {
            kind,
            deployment: self.key.name.clone(),
            depth: self.depth,
            resource: resource.to_string(),
            resource_type: resource_type.to_string(),
            status: status.to_string(),
            duration,
            error,
        });
    }

    /// Applies an update to this run's record, tracking the row version.
    pub(crate) async fn update(&self, update: DeploymentUpdate) {
        match self
            .env()
            .store
            .update_deployment(&self.id, self.version.get(), update)
            .await
        {
            Ok(record) => self.version.set(record.version),
            Err(e) => {
                tracing::warn!(deployment = %self.key, error = %e, "could not update the deployment record")
            }
        }
    }

    /// Queues a store write for operation `op_id`. Writes of one operation run in order; nothing waits for them
    /// but the deployment's end ([`Run::flush_writes`]), so dependents start as soon as a call returns.
    fn write(&self, op_id: &str, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let previous = self.writes.borrow_mut().remove(op_id);
        let handle = tokio::spawn(
            async move {
                if let Some(previous) = previous {
                    let _ = previous.await;
                }
                work.await;
            }
            .in_current_span(),
        );
        self.writes.borrow_mut().insert(op_id.to_string(), handle);
    }

    /// Queues a journal step.
    fn journal(&self, step: OperationStep, wait: Wait) {
        let store = self.env().store.clone();
        let key = self.key.to_string();
        let op_id = step.operation_id.clone();
        let writer = self.env().settings.owner_id.clone();
        let cancel = self.tree.cancel.clone();
        self.write(&op_id, async move {
            let written = match wait {
                Wait::Settled => store.append_operation(step, Some(&writer)).await,
                Wait::Behind => store.append_operation_behind(step, Some(&writer)).await,
            };
            if let Err(e) = written {
                lost_claim_stops_the_run(&e, &cancel, &key);
                tracing::warn!(deployment = %key, error = %e, "could not journal a deployment operation");
            }
        });
    }

    /// Queues a journal step together with its inventory effect, in one store transaction.
    fn record(&self, step: OperationStep, change: InventoryChange, wait: Wait) {
        let store = self.env().store.clone();
        let key = self.key.to_string();
        let op_id = step.operation_id.clone();
        let writer = self.env().settings.owner_id.clone();
        let cancel = self.tree.cancel.clone();
        self.write(&op_id, async move {
            let written = match wait {
                Wait::Settled => store.record_step(step, change, Some(&writer)).await,
                Wait::Behind => store.record_step_behind(step, change, Some(&writer)).await,
            };
            if let Err(e) = written {
                lost_claim_stops_the_run(&e, &cancel, &key);
                tracing::warn!(deployment = %key, error = %e, "could not journal a deployment operation with its resource");
            }
        });
    }

    /// Queues the removal of an inventory row that names no resource.
    fn forget(&self, op_id: &str, key: ResourceKey) {
        let store = self.env().store.clone();
        self.write(op_id, async move {
            match store.delete_managed_resource(&key, Precondition::Any).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    tracing::warn!(resource = %key, error = %e, "could not remove a stale inventory row")
                }
            }
        });
    }

    /// Waits for the queued writes of operation `op_id`: its `Running` step is durable before its call goes out, so
    /// a crash during the call leaves the operation in the journal.
    pub(crate) async fn settle_writes(&self, op_id: &str) {
        let pending = self.writes.borrow_mut().remove(op_id);
        if let Some(handle) = pending {
            let _ = handle.await;
        }
    }

    /// What a leaf's call waits for before it goes out, handed to the call's own task: the queued writes of
    /// operation `op_id` (its `Running` step), then a call slot for its `place`.
    pub(crate) fn call_start(&self, op_id: &str, place: Option<Slot>) -> CallStart {
        CallStart {
            written: self.writes.borrow_mut().remove(op_id),
            calls: self.tree.calls.clone(),
            place,
        }
    }

    /// How a finished operation's step is written: behind, unless the run is finishing — then nothing comes after
    /// it to commit with, and a step written behind would wait for one before its own commit (the store's ride
    /// wait), which the run's end waits for.
    pub(crate) fn finished_step_wait(&self) -> Wait {
        if self.finishing.get() {
            Wait::Settled
        } else {
            Wait::Behind
        }
    }

    /// The effects being performed include the run's verdict: the steps they journal are its last.
    pub(crate) fn set_finishing(&self) {
        self.finishing.set(true);
    }

    /// Waits for every queued write of this run.
    pub(crate) async fn flush_writes(&self) {
        let pending: Vec<tokio::task::JoinHandle<()>> =
            self.writes.borrow_mut().drain().map(|(_, h)| h).collect();
        for handle in pending {
            let _ = handle.await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        operation_id: &str,
        target: &TargetResource,
        operation: &str,
        state: &str,
        status_code: Option<&str>,
        error: Option<&ErrorDetail>,
        duration_ms: Option<i64>,
        extension: Option<ExtensionRef>,
    ) -> OperationStep {
        OperationStep {
            deployment_id: self.id.clone(),
            operation_id: operation_id.to_string(),
            target_resource: serde_json::to_value(target).ok(),
            provisioning_operation: operation.to_string(),
            provisioning_state: state.to_string(),
            status_code: status_code.map(str::to_string),
            status_message: error.map(|e| {
                serde_json::to_value(StatusMessage {
                    status: Some("Failed".into()),
                    error: Some(e.clone()),
                })
                .unwrap_or(Json::Null)
            }),
            service_request_id: None,
            timestamp: now(),
            duration_ms,
            extension,
            request_content: None,
            response_content: None,
        }
    }

    /// Fetches what runtime functions asked for.
    async fn fetch(&self, misses: Vec<Miss>) -> Result<(), ErrorDetail> {
        let env = self.env();
        for miss in misses {
            match miss {
                Miss::Read { id, api_version } => {
                    let parsed = ResourceId::parse(&id).map_err(|e| {
                        ErrorDetail::new("InvalidResourceId", format!("'{id}': {e}."))
                    })?;
                    self.tree
                        .access
                        .check(Action::Read, &id)
                        .map_err(ArmError::into_detail)?;
                    let api = api_version.unwrap_or_default();
                    let provider = env
                        .providers
                        .require(&parsed.resource_type(), &api)
                        .map_err(|e| *e.error)?;
                    match provider.get(&parsed, &api).await.map_err(|e| *e.error)? {
                        Some(envelope) => self.tree.values.put_arm(&id, envelope),
                        None => return Err(*ProviderError::not_found(&parsed).error),
                    }
                }
                Miss::List {
                    key,
                    id,
                    function,
                    api_version,
                    body,
                } => {
                    let parsed = ResourceId::parse(&id).map_err(|e| {
                        ErrorDetail::new("InvalidResourceId", format!("'{id}': {e}."))
                    })?;
                    self.tree
                        .access
                        .check(Action::Invoke, &id)
                        .map_err(ArmError::into_detail)?;
                    let provider = env
                        .providers
                        .require(&parsed.resource_type(), &api_version)
                        .map_err(|e| *e.error)?;
                    let response = provider
                        .action(&parsed, &api_version, &function, body.as_ref())
                        .await
                        .map_err(|e| *e.error)?;
                    self.tree.values.put_list(key, response);
                }
                Miss::Secret(reference) => {
                    self.tree
                        .access
                        .check(Action::Read, &reference.vault_id)
                        .map_err(ArmError::into_detail)?;
                    let secret = read_key_vault_secret(env.store.as_ref(), &reference).await?;
                    use cairn_store::ExposeSecret;
                    self.tree
                        .values
                        .put_secret(&reference, secret.expose_secret().to_string());
                }
            }
        }
        Ok(())
    }

    /// Calls `attempt` until the hook has answered every runtime value it needed (fetching misses in between).
    pub(crate) async fn with_runtime_values<T>(
        &self,
        hook: &EngineHook,
        mut attempt: impl FnMut() -> Result<T, Vec<Diagnostic>>,
    ) -> Result<T, ErrorDetail> {
        let rounds = self.env().settings.max_runtime_rounds.max(1);
        for _ in 0..rounds {
            let result = attempt();
            let misses = hook.take_misses();
            if misses.is_empty() {
                return result.map_err(|d| template_error(&d));
            }
            drop(result);
            self.fetch(misses).await?;
        }
        Err(ErrorDetail::new(
            "InvalidTemplate",
            "Runtime values kept changing while the template was evaluated; giving up.",
        ))
    }

    /// A resource body with every runtime value answered; `None` when its condition is false.
    async fn evaluate(
        &self,
        expansion: &Expansion<'_>,
        hook: &EngineHook,
        identity: &ResourceIdentity,
    ) -> Result<Option<Json>, ErrorDetail> {
        let body = self
            .with_runtime_values(hook, || expansion.evaluate(identity.index))
            .await?;
        let Some(body) = body else {
            return Ok(None);
        };
        if let Some(expr) = first_unevaluated(&body) {
            return Err(ErrorDetail::new(
                "InvalidTemplate",
                format!(
                    "The template resource '{}' could not be evaluated: the value of '{expr}' is not known.",
                    identity.key
                ),
            )
            .with_target(identity.path.clone()));
        }
        Ok(Some(body.to_json()))
    }

    fn slot(&self, alias: &str) -> Rc<AliasSlot> {
        self.aliases
            .borrow_mut()
            .entry(alias.to_ascii_lowercase())
            .or_default()
            .clone()
    }

    /// The resolved config of an alias (resolved once per deployment).
    async fn alias_config(
        &self,
        expansion: &Expansion<'_>,
        alias: &str,
    ) -> Result<Rc<ResolvedAlias>, ErrorDetail> {
        let slot = self.slot(alias);
        slot.resolved
            .get_or_init(|| async {
                let planned = expansion
                    .extensions()
                    .into_iter()
                    .find(|e| e.alias.eq_ignore_ascii_case(alias))
                    .ok_or_else(|| {
                        ErrorDetail::new(
                            "InvalidTemplate",
                            format!("The extension alias '{alias}' is not declared."),
                        )
                    })?;
                // A stack keeps only what `stored_config` keeps: a secret given as a value that reached the config
                // only now (a runtime value in a secure property) fails the alias's resources before the extension
                // is called, rather than leaving the stack without a credential to delete them with.
                if self.tree.stack_initiated {
                    let secure = self
                        .secure_config
                        .get(&alias.to_ascii_lowercase())
                        .cloned()
                        .unwrap_or_default();
                    let (_, refused) =
                        cairn_template::config::stored_config(&planned.config, &secure);
                    if let Some(property) = refused.first() {
                        return Err(ErrorDetail::new(
                            cairn_template::config::NOT_STORABLE_CONFIG,
                            format!(
                                "The config property '{property}' of extension alias '{alias}' is secure but its value is known only as a value: a deployment stack can neither store it nor fetch it again when it deletes resources; use a Key Vault reference (keyVaultReference) or a list* output so cairn stores a directive instead."
                            ),
                        )
                        .with_target(cairn_template::config::property_target(
                            &format!("extensionConfigs.{alias}"),
                            property,
                        )));
                    }
                }
                let resolver = LocalResolver::new(self.env().store.as_ref(), &self.env().providers)
                    .acting_for(&self.tree.access);
                let resolved = cairn_config::resolve_config(alias, &planned.config, &resolver)
                    .await
                    .map_err(|e| deployment_error(&e))?;
                let config = ExtensionConfig::new(resolved.into_map());
                Ok(Rc::new(ResolvedAlias { config }))
            })
            .await
            .clone()
    }

    /// The flat config of an alias, for a preview.
    pub(crate) async fn alias_config_for_preview(
        &self,
        expansion: &Expansion<'_>,
        alias: &str,
    ) -> Result<ExtensionConfig, ErrorDetail> {
        self.alias_config(expansion, alias)
            .await
            .map(|r| r.config.clone())
    }

    /// The extensions of this deployment as its record lists them.
    fn extensions_of(&self, expansion: &Expansion<'_>) -> Vec<DeploymentExtension> {
        expansion
            .extensions()
            .into_iter()
            .map(|e| {
                let slot = self.slot(&e.alias);
                let config_id = slot.config_id.borrow().clone();
                let config = self.tree.stack_initiated.then(|| {
                    let secure = self
                        .secure_config
                        .get(&e.alias.to_ascii_lowercase())
                        .cloned()
                        .unwrap_or_default();
                    public_config(&e.config, &secure)
                });
                DeploymentExtension {
                    alias: Some(e.alias.clone()),
                    deployment_id: Some(self.key.to_string()),
                    name: e.name.clone(),
                    version: e.version.clone(),
                    config_id,
                    config_hash: None,
                    config,
                }
            })
            .collect()
    }

    /// Drops this run's claim (its record is terminal).
    /// A root deployment ended: its run time goes to `cairn_deployment_duration_seconds` (nested deployments are
    /// part of their root's).
    pub(crate) fn count_end(&self, status: DeploymentStatus) {
        if self.depth == 0 {
            self.env()
                .settings
                .metrics
                .deployment_ended(status.as_str(), self.started.elapsed());
        }
    }

    /// Writes the run's final record and drops its claim in the same write. The heartbeat stops renewing the claim
    /// first; should the write fail, the claim is released on its own (a finished record cannot be claimed again,
    /// so a renewal racing the write cannot take it back either).
    pub(crate) async fn finish_record(&self, update: DeploymentUpdate) {
        self.tree.active.remove(&self.id);
        let owner = &self.env().settings.owner_id;
        let update = DeploymentUpdate {
            release_claim_of: Some(owner.clone()),
            ..update
        };
        match self
            .env()
            .store
            .update_deployment(&self.id, self.version.get(), update)
            .await
        {
            Ok(record) => self.version.set(record.version),
            Err(e) => {
                tracing::warn!(deployment = %self.key, error = %e, "could not update the deployment record");
                if let Err(e) = self.env().store.release_deployment(&self.id, owner).await {
                    tracing::warn!(deployment = %self.key, error = %e, "could not release the deployment claim");
                }
            }
        }
    }

    fn azure_target(identity: &ResourceIdentity) -> TargetResource {
        TargetResource {
            id: identity.id.clone(),
            resource_name: identity.name.clone(),
            resource_type: Some(identity.resource_type.clone()),
            api_version: identity.api_version.clone(),
            symbolic_name: identity.symbolic_name.clone(),
            ..TargetResource::default()
        }
    }

    fn extension_target(identity: &ResourceIdentity, config_id: Option<String>) -> TargetResource {
        let ext = identity.extension.as_ref();
        TargetResource {
            resource_type: Some(identity.resource_type.clone()),
            api_version: identity.api_version.clone(),
            symbolic_name: identity
                .symbolic_name
                .clone()
                .or_else(|| Some(identity.key.clone())),
            extension: ext.map(|e| DeploymentExtension {
                alias: Some(e.alias.clone()),
                deployment_id: None,
                name: e.name.clone(),
                version: e.version.clone(),
                config_id,
                config_hash: None,
                config: None,
            }),
            ..TargetResource::default()
        }
    }

    /// Checks that a nested deployment's target scope exists (resource groups) and fills in its facts.
    async fn check_scope(
        &self,
        nested: &mut NestedTemplate,
        child_key: &DeploymentKey,
    ) -> Result<(), ErrorDetail> {
        self.tree
            .access
            .check(Action::Write, &child_key.to_string())
            .map_err(ArmError::into_detail)?;
        let Ok(scope) = ResourceId::parse(&child_key.scope) else {
            return Ok(());
        };
        if scope.kind() != ResourceIdKind::ResourceGroup {
            return Ok(());
        }
        let (Some(sub), Some(rg)) = (scope.subscription_id(), scope.resource_group_name()) else {
            return Ok(());
        };
        match self.env().store.get_resource_group(sub, rg).await {
            Ok(Some(group)) => {
                nested.context.resource_group_location = group.group.location.clone();
                nested.context.resource_group = group.group.name.clone();
                Ok(())
            }
            Ok(None) if !self.env().settings.require_resource_groups => Ok(()),
            Ok(None) => Err(ErrorDetail::new(
                "ResourceGroupNotFound",
                format!("Resource group '{rg}' could not be found."),
            )),
            Err(e) => {
                tracing::warn!(error = %e, "could not read a resource group");
                Err(ErrorDetail::new(
                    "InternalServerError",
                    "The resource group could not be read.",
                ))
            }
        }
    }

    /// Writes the child deployment's record (claimed by this engine) with its sealed request.
    async fn create_child(
        &self,
        key: &DeploymentKey,
        body: &Json,
        nested: &NestedTemplate,
        expansion: &Expansion<'_>,
    ) -> Result<DeploymentRecord, ErrorDetail> {
        let store = &self.env().store;
        let internal = |e: &dyn std::fmt::Display| {
            tracing::warn!(deployment = %key, error = %e, "could not create a nested deployment record");
            ErrorDetail::new(
                "InternalServerError",
                "The nested deployment record could not be written.",
            )
        };
        match store.get_deployment(key).await {
            Ok(Some(existing)) if !existing.status.is_terminal() => {
                return Err(ErrorDetail::new(
                    "DeploymentActive",
                    format!(
                        "Unable to edit or replace deployment '{}': a previous deployment is still active.",
                        key.name
                    ),
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(internal(&e)),
        }
        let id = DeploymentId::generate();
        let mut properties = match body.get("properties") {
            Some(Json::Object(p)) => Json::Object(p.clone()),
            _ => json!({}),
        };
        let template_json = nested.template.root.to_json();
        // Also the parameters the parent computed from a secure value, whatever type the child declares.
        let mut secure = secure_parameter_names(&nested.template, &template_json);
        secure.extend(nested.secure_parameters.iter().cloned());
        seal_request(
            store.as_ref(),
            &SecretOwner::Deployment(id.clone()),
            &mut properties,
            &secure,
        )
        .await
        .map_err(|e| internal(&e))?;
        // Nested records are never resumed on their own: link query strings (credentials) are dropped.
        crate::link::seal_links(store.as_ref(), None, &mut properties)
            .await
            .map_err(|e| internal(&e))?;
        if let Json::Object(p) = &mut properties {
            let annotation = EngineAnnotation {
                dependencies: dependencies(&expansion.resources()),
                location: nested.context.location.clone(),
                template_hash: Some(crate::request::template_hash(&template_json)),
                ..EngineAnnotation::default()
            };
            p.insert("template".into(), template_json);
            p.insert(
                ENGINE_MEMBER.into(),
                serde_json::to_value(annotation).unwrap_or(Json::Null),
            );
        }
        let record = store
            .put_deployment(
                NewDeployment {
                    id: id.clone(),
                    key: key.clone(),
                    parent: Some(self.id.clone()),
                    location: body
                        .get("location")
                        .and_then(Json::as_str)
                        .map(str::to_string),
                    tags: Default::default(),
                    request: properties,
                    status: DeploymentStatus::Accepted,
                    correlation_id: self.tree.correlation_id.clone(),
                    stack_initiated: self.tree.stack_initiated,
                    created_at: now(),
                    owner: Some(self.tree.claim()),
                },
                Precondition::Any,
            )
            .await
            .map_err(|e| internal(&e))?;
        self.tree.active.add(id);
        Ok(record)
    }
}

/// A nested deployment's child, ready to expand.
pub(crate) struct NestedChild {
    pub nested: NestedTemplate,
    pub origin: TemplateOrigin,
    /// The `templateLink` the child's record shows (linked children only).
    pub shown_link: Option<Json>,
    pub fetched_parameters: Option<Map<String, Json>>,
}

/// Whether `identity` is a nested deployment the engine runs itself: `Microsoft.Resources/deployments` with an
/// inline template or a template link (an `existing` one is only read).
pub(crate) fn is_nested_deployment(identity: &ResourceIdentity) -> bool {
    identity.nested_deployment
        || (identity.extension.is_none()
            && !identity.existing
            && identity
                .resource_type
                .eq_ignore_ascii_case(crate::provider::DEPLOYMENTS_TYPE))
}

/// Config items a nested deployment's evaluated `extensionConfigs` (or a request's) mark `SecureString` /
/// `SecureObject`, per alias.
pub(crate) fn request_secure_items(body_or_properties: &Json) -> HashMap<String, Vec<String>> {
    let configs = body_or_properties
        .get("properties")
        .and_then(|p| p.get("extensionConfigs"))
        .or_else(|| body_or_properties.get("extensionConfigs"));
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    if let Some(Json::Object(aliases)) = configs {
        for (alias, items) in aliases {
            if let Json::Object(items) = items {
                for (prop, item) in items {
                    let secure = item
                        .get("type")
                        .and_then(Json::as_str)
                        .is_some_and(cairn_arm::secure::is_secure_type);
                    if secure {
                        out.entry(alias.to_ascii_lowercase())
                            .or_default()
                            .push(prop.clone());
                    }
                }
            }
        }
    }
    out
}

impl Run {
    /// A nested deployment's secure config properties: its own (template and request items), plus those this
    /// deployment knows secure for the same extension (name and version), whatever the alias: a child that
    /// inherits a config keeps its secure properties out of its record even if its declaration has no schema.
    fn child_secure_config(
        &self,
        expansion: &Expansion<'_>,
        child_template: &Template,
        body: &Json,
    ) -> HashMap<String, Vec<String>> {
        let mut out = secure_config(Some(child_template), request_secure_items(body));
        let parents = expansion.extensions();
        for child in &child_template.extensions {
            for parent in parents
                .iter()
                .filter(|p| p.name.eq_ignore_ascii_case(&child.name) && p.version == child.version)
            {
                if let Some(secure) = self.secure_config.get(&parent.alias.to_ascii_lowercase()) {
                    out.entry(child.alias.to_ascii_lowercase())
                        .or_default()
                        .extend(secure.iter().cloned());
                }
            }
        }
        out
    }
}

/// Config properties declared secure per alias (lower case): by the template's extension declarations and by the
/// request's item types.
pub(crate) fn secure_config(
    template: Option<&Template>,
    request_items: HashMap<String, Vec<String>>,
) -> HashMap<String, Vec<String>> {
    let mut out = request_items;
    for e in template
        .map(|t| t.extensions.as_slice())
        .unwrap_or_default()
    {
        out.entry(e.alias.to_ascii_lowercase())
            .or_default()
            .extend(e.secure_properties.iter().cloned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_stable_and_arm_shaped() {
        let d = DeploymentId::from_string("run-1");
        let a = operation_id(&d, "/subscriptions/s/x");
        assert_eq!(a, operation_id(&d, "/SUBSCRIPTIONS/S/X"));
        assert_ne!(a, operation_id(&d, "/subscriptions/s/y"));
        assert_eq!(a.len(), 16);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
        );
    }

    #[test]
    fn output_types_use_arm_spelling() {
        assert_eq!(display_type("securestring"), "SecureString");
        assert_eq!(display_type("object"), "Object");
    }
}

//! The driver: performs what the pure deployment core (`cairn-deploy-core`) asks — waits for parallelism slots,
//! evaluates bodies, journals, calls providers, extensions and child deployments — and feeds back what happened.
//! Scheduling, dependencies, failure and cancel semantics are the core's; this module only does the I/O.

use std::collections::HashMap;
use std::time::Instant;

use cairn_arm::access::Action;
use cairn_arm::models::deployment::DeploymentResourceReference;
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::operation::TargetResource;
use cairn_arm::{ErrorDetail, ResourceId};
use cairn_deploy_core::{
    Core, Effect, Evaluation, Event, Failure, Node, NodeKind, Plan, Recorded, SkipReason, Status,
};
use cairn_eval::Value;
use cairn_host::{CreateOrUpdateRequest, DeployedResource, ExtensionKey, ResourceLocator};
use cairn_store::{
    DeploymentKey, DeploymentStatus, DeploymentUpdate, ExtensionRef, InventoryChange, JsonText,
    ManagedResource, ResourceKey,
};
use cairn_template::plan::PlannedExtensionRef;
use cairn_template::{Expansion, ResourceIdentity};
use serde_json::{Value as Json, json};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use super::{
    CallStart, Done, Finished, NestedChild, Run, Slot, Wait, elapsed_ms, first_unevaluated,
    host_error, is_nested_deployment, now, operation_id, outputs_json,
};
use crate::adoption::{self, Candidate, Verdict, WrittenBefore};
use crate::applied::applied;
use crate::events::EventKind;
use crate::hook::EngineHook;
use crate::inflight::{InFlight, LocalFuture};
use crate::provider::{ProviderError, status_name};
use crate::recovery::touched_resources;
use crate::request::scope_key;

/// What evaluating a node prepared for its call.
enum Call {
    /// A provider or extension resource with its evaluated body.
    Leaf(Json),
    /// A nested deployment, its child record written; the child runs in the future that prepared it.
    Nested,
}

/// Whether an evaluated leaf goes on to its call.
enum Proceed {
    Call,
    /// The run stopped while the leaf waited for its turn to call: it never starts.
    Withdrawn,
}

/// What a performed call answered.
enum Answer {
    Arm {
        id: String,
        envelope: Json,
        status: u16,
        /// What the write applied (see `crate::applied`); `None` for an `existing` resource's read.
        applied: Option<Json>,
    },
    Extension {
        deployed: Box<DeployedResource>,
        /// What the write applied (see `crate::applied`); `None` for an `existing` resource's read.
        applied: Option<Json>,
    },
    Nested(Box<Done>),
}

/// A failed operation: the HTTP status its journal step shows, the error, and (once the driver knows) how the
/// deployment's error names the resource when the error names no target of its own.
#[derive(Clone)]
struct OpError {
    status: u16,
    error: ErrorDetail,
    shown: Option<String>,
    /// The extension refused a create and then said the resource does not exist: its inventory row can go.
    confirmed_absent: bool,
}

impl OpError {
    fn new(status: u16, error: ErrorDetail) -> Self {
        Self {
            status,
            error,
            shown: None,
            confirmed_absent: false,
        }
    }

    fn bad_request(error: ErrorDetail) -> Self {
        Self::new(400, error)
    }

    fn shown_as(mut self, identity: &ResourceIdentity) -> Self {
        self.shown = Some(display(identity));
        self
    }

    /// The error the deployment's `DeploymentFailed` lists.
    fn into_detail(self) -> ErrorDetail {
        let mut error = self.error;
        if error.target.is_none() {
            error.target = self.shown;
        }
        error
    }
}

impl From<ProviderError> for OpError {
    fn from(e: ProviderError) -> Self {
        Self::new(e.status, *e.error)
    }
}

/// What a future of the driver finished with.
enum Progress {
    /// A slot was granted (`Some`) or the wait was canceled (`None`).
    Admitted(usize, Option<Slot>),
    /// The node's evaluation, and the place a leaf's evaluation took from the driver (for an extension create
    /// whose lookups are done, traded for a queue place: `Tree::queued`).
    Evaluated(
        usize,
        Evaluation<Call, OpError>,
        Box<TargetResource>,
        Option<Slot>,
    ),
    Performed(usize, Result<Answer, Failure<OpError>>),
}

/// A nested deployment prepared its child and waits for its `Running` step to be journaled before running it.
struct NestedReady {
    node: usize,
    target: TargetResource,
    go: oneshot::Sender<()>,
}

/// The driver's own state of one node.
struct NodeSlot {
    /// Its operation's ID ([`operation_id`]: a hash, so computed once).
    operation_id: String,
    started: Instant,
    target: TargetResource,
    permit: Option<Slot>,
    done: Option<Done>,
}

/// The core's plan of an expansion: its resources, their dependencies and known conditions, in template order.
fn plan_of(identities: &[ResourceIdentity], order: &[usize]) -> Result<Plan, ErrorDetail> {
    let nodes = identities
        .iter()
        .map(|identity| Node {
            depends_on: identity.depends_on.clone(),
            condition: (identity.condition == Some(false)).then_some(false),
            kind: if is_nested_deployment(identity) {
                NodeKind::Nested
            } else {
                NodeKind::Leaf
            },
        })
        .collect();
    Plan::with_order(nodes, order.to_vec()).map_err(|e| {
        ErrorDetail::new(
            "InvalidTemplate",
            format!("The deployment's resource graph cannot be scheduled: {e}."),
        )
    })
}

impl Run {
    /// Runs the deployment's resource graph, then its outputs, and writes the final record.
    pub(crate) async fn execute(&self, expansion: &Expansion<'_>, hook: &EngineHook) -> Finished {
        self.update(DeploymentUpdate {
            status: Some(DeploymentStatus::Running),
            started_at: Some(now()),
            ..DeploymentUpdate::at(now())
        })
        .await;
        self.event(EventKind::DeploymentStarted, "", "", "Running", None, None);

        let identities = expansion.resources();
        let (status, error, outputs, output_resources, extensions) =
            match plan_of(&identities, expansion.order()) {
                Ok(plan) => self.drive(expansion, hook, &identities, plan).await,
                Err(error) => (
                    DeploymentStatus::Failed,
                    Some(error),
                    None,
                    Vec::new(),
                    Vec::new(),
                ),
            };
        self.flush_writes().await;
        if self.tree.handed_over.get() && status == DeploymentStatus::Canceled {
            // Stopped at a safe point for another engine: the record stays as it is (`Running`), its claim is
            // released with the tree's once the heartbeat has stopped, and recovery resumes the run.
            return Finished {
                status: DeploymentStatus::Canceled,
                error: None,
                outputs: None,
                output_resources: Vec::new(),
                extensions: Vec::new(),
            };
        }
        let touched;
        let listed: Option<&[DeploymentResourceReference]> = match status {
            DeploymentStatus::Succeeded => Some(&output_resources),
            // A deployment a crash interrupted lists what it touched even when it fails (as recovery's fail
            // path does): the resources an earlier run was creating may exist whatever this run managed.
            DeploymentStatus::Failed if self.tree.resumed && self.depth == 0 => {
                touched = touched_resources(self.env().store.as_ref(), &self.id, 0)
                    .await
                    .0;
                Some(&touched)
            }
            _ => None,
        };
        self.finish_record(DeploymentUpdate {
            status: Some(status),
            finished_at: Some(now()),
            outputs: outputs.as_deref().map(outputs_json),
            error: error.as_ref().and_then(|e| serde_json::to_value(e).ok()),
            output_resources: listed.and_then(|listed| JsonText::of(listed).ok()),
            extensions: serde_json::to_value(&extensions).ok(),
            ..DeploymentUpdate::at(now())
        })
        .await;
        self.count_end(status);
        self.event(
            EventKind::DeploymentFinished,
            "",
            "",
            status.as_str(),
            Some(self.started.elapsed()),
            error.clone(),
        );
        Finished {
            status,
            error,
            outputs,
            output_resources,
            extensions,
        }
    }

    /// The event/effect loop: feeds the core what happened and performs what it asks until its verdict.
    async fn drive(
        &self,
        expansion: &Expansion<'_>,
        hook: &EngineHook,
        identities: &[ResourceIdentity],
        plan: Plan,
    ) -> (
        DeploymentStatus,
        Option<ErrorDetail>,
        Option<Vec<(String, cairn_template::plan::PlannedOutput)>>,
        Vec<DeploymentResourceReference>,
        Vec<DeploymentExtension>,
    ) {
        let (mut core, journaled) = if self.tree.resumed && self.depth == 0 {
            self.resumed_core(identities, plan).await
        } else {
            (Core::new(plan), HashMap::new())
        };
        let mut slots: Vec<NodeSlot> = identities
            .iter()
            .map(|identity| NodeSlot {
                operation_id: operation_id(&self.id, &identity.key),
                started: Instant::now(),
                target: match identity.extension {
                    Some(_) => Self::extension_target(identity, None),
                    None => Self::azure_target(identity),
                },
                permit: None,
                done: None,
            })
            .collect();
        // A resumed run starts from the identities its journal recorded (what a step it never performs again, or
        // an extension that cannot tell the identity now, still names).
        for (node, earlier) in journaled {
            keep_identity(&mut slots[node].target, earlier);
        }
        let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<NestedReady>();
        let mut inflight: InFlight<'_, Progress> = InFlight::new();
        let mut cancel_seen = false;
        let mut effects: Vec<Effect<Call, Answer, OpError>> = core.start();
        let verdict = loop {
            let mut finished = None;
            if effects.iter().any(|e| matches!(e, Effect::Finish(_))) {
                self.set_finishing();
            }
            for effect in effects.drain(..) {
                match effect {
                    Effect::Admit(node) => inflight.push(self.admit(node)),
                    Effect::Evaluate(node) => {
                        let identity = &identities[node];
                        slots[node].started = Instant::now();
                        inflight.push(if is_nested_deployment(identity) {
                            self.nested_future(expansion, hook, identity, ready_tx.clone())
                        } else {
                            self.evaluate_leaf(expansion, hook, identity, slots[node].permit.take())
                        });
                    }
                    Effect::Started(node) => {
                        let identity = &identities[node];
                        let slot = &slots[node];
                        let step = self.step(
                            &slot.operation_id,
                            &slot.target,
                            operation_name(identity),
                            "Running",
                            None,
                            None,
                            None,
                            None,
                        );
                        // The target is inventoried with the step that says its create is under way, before the
                        // call: a crash during the call leaves it tracked, whatever happens after the restart.
                        match self.pending_resource(identity, &slot.target) {
                            Some(pending) => self.record(
                                step,
                                InventoryChange::PutIfAbsent(Box::new(pending)),
                                Wait::Settled,
                            ),
                            None => self.journal(step, Wait::Settled),
                        }
                        self.event(
                            EventKind::ResourceStarted,
                            &display(identity),
                            &identity.resource_type,
                            "Running",
                            None,
                            None,
                        );
                    }
                    Effect::Perform(node, Call::Leaf(body)) => {
                        let permit = slots[node].permit.take();
                        let locator = slots[node].target.clone();
                        inflight.push(self.perform_leaf(
                            expansion,
                            &identities[node],
                            slots[node].operation_id.clone(),
                            body,
                            locator,
                            permit,
                        ));
                    }
                    // The nested future runs its child once told to go (after its `Running` step).
                    Effect::Perform(_, Call::Nested) => {}
                    Effect::Succeeded(node, answer) => {
                        let done =
                            self.succeeded(hook, &identities[node], &mut slots[node], answer);
                        slots[node].done = Some(done);
                        slots[node].permit = None;
                    }
                    Effect::Failed(node, failure) => {
                        let identity = &identities[node];
                        let slot = &mut slots[node];
                        slot.permit = None;
                        let step = self.step(
                            &slot.operation_id,
                            &slot.target,
                            operation_name(identity),
                            "Failed",
                            Some(status_name(failure.status)),
                            Some(&failure.error),
                            Some(elapsed_ms(slot.started)),
                            None,
                        );
                        match self.pending_resource(identity, &slot.target) {
                            Some(pending) if failure.confirmed_absent => self.record(
                                step,
                                InventoryChange::Delete(pending.key),
                                self.finished_step_wait(),
                            ),
                            _ => self.journal(step, self.finished_step_wait()),
                        }
                        self.event(
                            EventKind::ResourceFinished,
                            &display(identity),
                            &identity.resource_type,
                            "Failed",
                            Some(slot.started.elapsed()),
                            Some(failure.error),
                        );
                    }
                    Effect::Skipped(node, reason) => {
                        let identity = &identities[node];
                        slots[node].permit = None;
                        let shown = match reason {
                            SkipReason::Condition => Some(identity.key.clone()),
                            SkipReason::Evaluated if is_nested_deployment(identity) => None,
                            SkipReason::Evaluated => Some(display(identity)),
                        };
                        if let Some(shown) = shown {
                            self.event(
                                EventKind::ResourceSkipped,
                                &shown,
                                &identity.resource_type,
                                "Skipped",
                                None,
                                None,
                            );
                        }
                    }
                    // A handed-over run leaves the step `Running`: recovery performs it again.
                    Effect::Canceled(_) if self.tree.handed_over.get() => {}
                    Effect::Canceled(node) => {
                        let identity = &identities[node];
                        let slot = &slots[node];
                        self.journal(
                            self.step(
                                &slot.operation_id,
                                &slot.target,
                                operation_name(identity),
                                "Canceled",
                                None,
                                None,
                                Some(elapsed_ms(slot.started)),
                                None,
                            ),
                            self.finished_step_wait(),
                        );
                    }
                    Effect::NotStarted(node) => slots[node].permit = None,
                    Effect::Finish(verdict) => finished = Some(verdict),
                }
            }
            if let Some(verdict) = finished {
                break verdict;
            }
            let event = tokio::select! {
                biased;
                () = self.tree.stop_requested(), if !cancel_seen => {
                    cancel_seen = true;
                    self.tree.note_stop();
                    Event::Cancel
                }
                Some(ready) = ready_rx.recv() => {
                    slots[ready.node].target = ready.target;
                    // Journal `Running` (the core's `Started`) before the child runs.
                    let step = core.step(Event::Evaluated(ready.node, Evaluation::Perform(Call::Nested)));
                    let _ = ready.go.send(());
                    match step {
                        Ok(next) => {
                            effects = next;
                            continue;
                        }
                        Err(e) => break self.protocol_error(e),
                    }
                }
                progress = inflight.next() => match progress {
                    Some(Progress::Admitted(node, Some(permit))) => {
                        slots[node].permit = Some(permit);
                        Event::Admitted(node)
                    }
                    Some(Progress::Admitted(node, None)) => Event::NotAdmitted(node),
                    Some(Progress::Evaluated(node, evaluation, target, place)) => {
                        if let Some(place) = place {
                            slots[node].permit = Some(place);
                        }
                        let mut target = *target;
                        // What the extension cannot tell now, the journal may have recorded.
                        keep_identity(&mut target, std::mem::take(&mut slots[node].target));
                        slots[node].target = target;
                        let evaluation = match evaluation {
                            Evaluation::Fail(e) => Evaluation::Fail(e.shown_as(&identities[node])),
                            other => other,
                        };
                        Event::Evaluated(node, evaluation)
                    }
                    Some(Progress::Performed(node, result)) => Event::Performed(
                        node,
                        result.map_err(|f| match f {
                            Failure::Failed(e) => Failure::Failed(e.shown_as(&identities[node])),
                            Failure::Canceled => Failure::Canceled,
                        }),
                    ),
                    None => break self.protocol_error(cairn_deploy_core::CoreError::Finished),
                },
            };
            match core.step(event) {
                Ok(next) => effects = next,
                Err(e) => break self.protocol_error(e),
            }
        };
        drop(inflight);
        // Operations the run that died left running, and this one did not perform again, end in the journal (unless
        // this run is handed over too: the next one performs them).
        let left_interrupted = if self.tree.handed_over.get() {
            &[][..]
        } else {
            &verdict.left_interrupted[..]
        };
        for &node in left_interrupted {
            let identity = &identities[node];
            let error = ErrorDetail::new(
                "DeploymentInterrupted",
                "The operation was in flight when the engine running the deployment stopped, and the resumed \
                 deployment ended before performing it again.",
            );
            self.journal(
                self.step(
                    &slots[node].operation_id,
                    &slots[node].target,
                    operation_name(identity),
                    "Failed",
                    Some(status_name(500)),
                    Some(&error),
                    None,
                    None,
                ),
                self.finished_step_wait(),
            );
        }

        let mut output_resources = Vec::new();
        // Across the tree, an extension entry is keyed by the deployment that declared it and its alias.
        let mut extensions = self.extensions_of(expansion);
        for &node in &verdict.succeeded {
            let Some(done) = slots[node].done.take() else {
                continue;
            };
            output_resources.extend(done.output_resources);
            for e in done.extensions {
                if !extensions.iter().any(|x| {
                    x.same_identity(&e) && x.alias == e.alias && x.deployment_id == e.deployment_id
                }) {
                    extensions.push(e);
                }
            }
        }
        let (status, error, outputs) = match verdict.status {
            Status::Canceled => (DeploymentStatus::Canceled, None, None),
            Status::Failed(failures) => {
                let errors: Vec<ErrorDetail> =
                    failures.into_iter().map(OpError::into_detail).collect();
                let error = cairn_arm::ArmError::deployment_failed(errors).into_detail();
                (DeploymentStatus::Failed, Some(error), None)
            }
            Status::Succeeded => self.outputs(expansion, hook).await,
        };
        (status, error, outputs, output_resources, extensions)
    }

    /// The core of a root run resumed after a crash: its journal so far replayed. Every resource is performed
    /// again (PUTs are idempotent and the run needs fresh runtime values); the operations that were in flight
    /// when the previous run died are logged by name.
    /// Also returns the targets the journal recorded for its operations, by node.
    async fn resumed_core(
        &self,
        identities: &[ResourceIdentity],
        plan: Plan,
    ) -> (Core<OpError>, HashMap<usize, TargetResource>) {
        let operations = match self.env().store.latest_operations(&self.id).await {
            Ok(operations) => operations,
            Err(e) => {
                tracing::warn!(deployment = %self.key, error = %e, "could not read the journal of a resumed run");
                return (Core::new(plan), HashMap::new());
            }
        };
        let nodes: HashMap<String, usize> = identities
            .iter()
            .map(|identity| (operation_id(&self.id, &identity.key), identity.index))
            .collect();
        let journaled: HashMap<usize, TargetResource> = operations
            .iter()
            .filter_map(|op| {
                let node = *nodes.get(&op.step.operation_id)?;
                let target = serde_json::from_value(op.step.target_resource.clone()?).ok()?;
                Some((node, target))
            })
            .collect();
        let history = operations.iter().filter_map(|op| {
            let node = *nodes.get(&op.step.operation_id)?;
            let recorded = match op.step.provisioning_state.as_str() {
                "Running" => Recorded::Started,
                "Succeeded" => Recorded::Succeeded,
                "Failed" => Recorded::Failed,
                _ => return None,
            };
            Some((node, recorded))
        });
        match Core::resume(plan.clone(), history) {
            Ok(core) => {
                for &node in core.interrupted() {
                    let resource = display(&identities[node]);
                    tracing::info!(
                        deployment = %self.key,
                        resource = %resource,
                        "performing again an operation that was in flight when the previous run died"
                    );
                }
                (core, journaled)
            }
            Err(e) => {
                tracing::warn!(deployment = %self.key, error = %e, "could not replay the journal of a resumed run");
                (Core::new(plan), journaled)
            }
        }
    }

    /// A broken protocol between driver and core is a bug: the deployment fails instead of hanging.
    fn protocol_error(
        &self,
        e: cairn_deploy_core::CoreError,
    ) -> cairn_deploy_core::Verdict<OpError> {
        tracing::error!(deployment = %self.key, error = %e, "the deployment driver and core disagree");
        cairn_deploy_core::Verdict {
            status: Status::Failed(vec![OpError::new(
                500,
                ErrorDetail::new(
                    "InternalServerError",
                    "The deployment could not be scheduled.",
                ),
            )]),
            succeeded: Vec::new(),
            left_interrupted: Vec::new(),
        }
    }

    /// Evaluates the outputs of a deployment whose resources all succeeded.
    async fn outputs(
        &self,
        expansion: &Expansion<'_>,
        hook: &EngineHook,
    ) -> (
        DeploymentStatus,
        Option<ErrorDetail>,
        Option<Vec<(String, cairn_template::plan::PlannedOutput)>>,
    ) {
        match self
            .with_runtime_values(hook, || expansion.outputs())
            .await
        {
            Ok(outputs) => match outputs.iter().find_map(|(_, o)| first_unevaluated(&o.value)) {
                Some(expr) => (
                    DeploymentStatus::Failed,
                    Some(ErrorDetail::new(
                        "DeploymentOutputEvaluationFailed",
                        format!("Unable to evaluate template outputs: the value of '{expr}' is not known."),
                    )),
                    None,
                ),
                None => (DeploymentStatus::Succeeded, None, Some(outputs)),
            },
            Err(e) => (
                DeploymentStatus::Failed,
                Some(
                    ErrorDetail::new(
                        "DeploymentOutputEvaluationFailed",
                        "Unable to evaluate template outputs. Please see error details and deployment operations. Please see https://aka.ms/arm-common-errors for usage details.",
                    )
                    .with_details([e]),
                ),
                None,
            ),
        }
    }

    /// Waits for a slot of the tree's parallelism, then for one of the engine-wide operation slots when there is a
    /// cap (or the tree's cancel). The tree's slot comes first, so a deployment waiting for its own parallelism
    /// holds none of the slots other deployments could use.
    fn admit(&self, node: usize) -> LocalFuture<'_, Progress> {
        let permits = self.tree.permits.clone();
        let tree = self.tree.clone();
        let shared = tree.env.settings.operation_slots.clone();
        Box::pin(async move {
            let slot = async {
                let own = permits.acquire_owned().await.ok()?;
                let shared = match &shared {
                    Some(slots) => Some(slots.acquire().await),
                    None => None,
                };
                Some(Slot::new(own, shared))
            };
            let slot = tokio::select! {
                slot = slot => slot,
                () = tree.stop_requested() => None,
            };
            Progress::Admitted(node, slot)
        })
    }

    /// A provider or extension resource's body, evaluated once its dependencies are deployed, in the node's
    /// admission `slot`. The slot comes back with the evaluation and moves into the node's call, which trades it
    /// for a call slot (`perform_leaf`); an extension create trades it along the way: for a preview place
    /// (`Tree::previews`), a lookup place before a stack's existence `get` (`Tree::lookups`), then a queue place once
    /// its lookups are done (`Tree::queued`).
    fn evaluate_leaf<'f>(
        &'f self,
        expansion: &'f Expansion<'_>,
        hook: &'f EngineHook,
        identity: &'f ResourceIdentity,
        slot: Option<Slot>,
    ) -> LocalFuture<'f, Progress> {
        let target = match identity.extension {
            Some(_) => Self::extension_target(identity, None),
            None => Self::azure_target(identity),
        };
        Box::pin(async move {
            let mut target = target;
            let mut slot = slot;
            let evaluation = match self.evaluate(expansion, hook, identity).await {
                Ok(Some(body)) => {
                    match self
                        .identify(expansion, identity, &body, &mut target, &mut slot)
                        .await
                    {
                        Ok(Proceed::Call) => Evaluation::Perform(Call::Leaf(body)),
                        Ok(Proceed::Withdrawn) => Evaluation::Withdrawn,
                        Err(error) => Evaluation::Fail(error),
                    }
                }
                Ok(None) => Evaluation::Skip,
                Err(error) => Evaluation::Fail(OpError::bad_request(error)),
            };
            Progress::Evaluated(identity.index, evaluation, Box::new(target), slot)
        })
    }

    /// Asks the extension (`preview`) for the identity an extension resource's create will have — its identifiers
    /// and configId — so that its `Running` step names it before the call. An extension that cannot tell (preview
    /// not supported, failing, or identifiers unknown) leaves the target as it is: the create goes ahead. In a
    /// stack's deployment the same preview serves the existence check (`crate::adoption`): a resource that exists
    /// and no stack manages fails here, before its `Running` step inventories it, unless the stack adopts it.
    ///
    /// The lookups run on a task of their own, which moves `slot` from place to place as it goes: the admission
    /// slot for a preview place (the coordinator admits and evaluates the next resource meanwhile), that for a
    /// lookup place before the existence `get`, then for a queue place once the create may go ahead. Each place is
    /// handed on there as soon as its call ends, not once the coordinator has seen the lookups' outcome: the
    /// coordinator is busy at that moment with the wave of calls that ended with them. A resource still waiting for
    /// its preview place when the run is canceled or handed over is withdrawn: it never starts.
    async fn identify(
        &self,
        expansion: &Expansion<'_>,
        identity: &ResourceIdentity,
        body: &Json,
        target: &mut TargetResource,
        slot: &mut Option<Slot>,
    ) -> Result<Proceed, OpError> {
        let Some(ext) = identity.extension.as_ref().filter(|_| !identity.existing) else {
            return Ok(Proceed::Call);
        };
        // A config that cannot be resolved fails the call itself, as before.
        let Ok(resolved) = self.alias_config(expansion, &ext.alias).await else {
            return Ok(Proceed::Call);
        };
        let properties = body.get("properties").cloned().unwrap_or_else(|| json!({}));
        let config = (!resolved.config.is_empty()).then(|| resolved.config.clone());
        let key = ExtensionKey::new(ext.name.clone(), ext.version.clone());
        let resource_type = identity.resource_type.clone();
        let api_version = identity.api_version.clone();
        let check = self.tree.existing_resources.clone();
        let written_before = self.tree.resumed.then(|| WrittenBefore {
            store: self.env().store.clone(),
            deployment: self.key.clone(),
        });
        let host = self.env().host.clone();
        let ctx = self.tree.call_context();
        let (previews, lookups, queued) = (
            self.tree.previews.clone(),
            self.tree.lookups.clone(),
            self.tree.queued.clone(),
        );
        let (cancel, suspend) = (self.tree.cancel.clone(), self.tree.suspend.clone());
        let mut held = slot.take();
        let identified = tokio::spawn(
            async move {
                if let Some(admitted) = held.take() {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return None,
                        () = suspend.cancelled() => return None,
                        place = admitted.trade_for(&previews) => held = Some(place),
                    }
                }
                let candidate = Candidate {
                    key: &key,
                    resource_type: &resource_type,
                    api_version: api_version.as_deref(),
                    properties: &properties,
                    config: config.as_ref(),
                };
                let to_lookup_place = async {
                    if let Some(previewed) = held.take() {
                        held = Some(previewed.trade_for(&lookups).await);
                    }
                };
                let identified = adoption::identify(
                    &host,
                    candidate,
                    check.as_ref(),
                    written_before.as_ref(),
                    &ctx,
                    to_lookup_place,
                )
                .await;
                // Not canceled by a stop: a create that may go ahead performs its call, and the calls holding
                // the places end on their own.
                if matches!(identified.verdict, Verdict::Write)
                    && let Some(looked_up) = held.take()
                {
                    held = Some(looked_up.trade_for(&queued).await);
                }
                Some((identified, held))
            }
            .in_current_span(),
        );
        let (identified, held) = match identified.await {
            Ok(Some(identified)) => identified,
            Ok(None) => return Ok(Proceed::Withdrawn),
            // Whether the resource exists is unknown: writing it could take over what no stack manages.
            Err(_) => {
                return Err(OpError::new(
                    500,
                    ErrorDetail::new(
                        "InternalServerError",
                        "The lookup before the resource's create stopped unexpectedly.",
                    ),
                ));
            }
        };
        *slot = held;
        if let Some(predicted) = identified.identity {
            target.identifiers = Some(predicted.identifiers);
            if let Some(extension) = &mut target.extension {
                extension.config_id = predicted.config_id;
            }
        }
        match identified.verdict {
            Verdict::Write => Ok(Proceed::Call),
            Verdict::ExistsUnmanaged(error) => Err(OpError::new(409, error)),
            Verdict::Failed(error) => {
                let (status, error) = host_error(&error);
                Err(OpError::new(status, error))
            }
        }
    }

    /// The inventory row a create's `Running` step records for its target: an extension resource whose identity
    /// is known before the call. (ARM resources of the built-in providers live in this store already; their
    /// `Running` step names them by ID.)
    fn pending_resource(
        &self,
        identity: &ResourceIdentity,
        target: &TargetResource,
    ) -> Option<ManagedResource> {
        let key = Self::pending_key(identity, target)?;
        let ext = identity.extension.as_ref()?;
        let identifiers = target.identifiers.clone()?;
        let config_id = target.extension.as_ref().and_then(|e| e.config_id.clone());
        Some(ManagedResource {
            key,
            resource_id: None,
            resource_type: identity.resource_type.clone(),
            api_version: identity.api_version.clone(),
            properties: json!({}),
            applied: None,
            deployment: Some(self.key.clone()),
            extension: Some(ExtensionRef {
                alias: Some(ext.alias.clone()),
                name: Some(ext.name.clone()),
                version: Some(ext.version.clone()),
                config_id,
                reference_id: None,
                identifiers: Some(identifiers),
            }),
            updated_at: now(),
        })
    }

    /// The key of [`Self::pending_resource`]'s row.
    fn pending_key(identity: &ResourceIdentity, target: &TargetResource) -> Option<ResourceKey> {
        if identity.existing {
            return None;
        }
        let ext = identity.extension.as_ref()?;
        let identifiers = target.identifiers.as_ref()?;
        let config_id = target
            .extension
            .as_ref()
            .and_then(|e| e.config_id.as_deref());
        Some(ResourceKey::extension(
            &ext.name,
            config_id,
            &identity.resource_type,
            identifiers,
        ))
    }

    /// Calls the provider or extension of a leaf whose `Running` step (naming `target`) is journaled, once the
    /// step is durable. Its place (the admission slot, or a create's queue place) is traded for a call slot only
    /// then: waiting for the disk holds no call slot.
    fn perform_leaf<'f>(
        &'f self,
        expansion: &'f Expansion<'_>,
        identity: &'f ResourceIdentity,
        operation_id: String,
        body: Json,
        target: TargetResource,
        permit: Option<Slot>,
    ) -> LocalFuture<'f, Progress> {
        Box::pin(async move {
            let start = || self.call_start(&operation_id, permit);
            let result = match &identity.extension {
                Some(ext) => {
                    self.call_extension(expansion, identity, ext, body, target, start)
                        .await
                }
                None => self.call_provider(identity, body, start).await,
            };
            Progress::Performed(identity.index, result.map_err(Failure::Failed))
        })
    }

    async fn call_extension(
        &self,
        expansion: &Expansion<'_>,
        identity: &ResourceIdentity,
        ext: &PlannedExtensionRef,
        body: Json,
        target: TargetResource,
        start: impl FnOnce() -> CallStart,
    ) -> Result<Answer, OpError> {
        let resolved = self
            .alias_config(expansion, &ext.alias)
            .await
            .map_err(OpError::bad_request)?;
        let key = ExtensionKey::new(ext.name.clone(), ext.version.clone());
        let properties = body.get("properties").cloned().unwrap_or_else(|| json!({}));
        let config = (!resolved.config.is_empty()).then(|| resolved.config.clone());
        let host = self.env().host.clone();
        let ctx = self.tree.call_context();
        let resource_type = identity.resource_type.clone();
        let api_version = identity.api_version.clone();
        let existing = identity.existing;
        let start = start();
        let call = tokio::spawn(
            async move {
                let _permit = start.ready().await;
                if existing {
                    let locator = ResourceLocator {
                        resource_type,
                        api_version,
                        identifiers: properties,
                        config,
                        config_id: None,
                    };
                    match host.get(&key, &locator, &ctx).await {
                        Ok(Some(r)) => Ok((r, None)),
                        Ok(None) => Err((
                            404,
                            ErrorDetail::new(
                                "ResourceNotFound",
                                "The existing resource was not found by its extension.",
                            ),
                            false,
                        )),
                        Err(e) => {
                            let (status, error) = host_error(&e);
                            Err((status, error, false))
                        }
                    }
                } else {
                    let known_identifiers = target.identifiers.clone();
                    let declared = properties.clone();
                    let request = CreateOrUpdateRequest {
                        resource_type: resource_type.clone(),
                        api_version: api_version.clone(),
                        properties,
                        config: config.clone(),
                        config_id: None,
                        known_identifiers: known_identifiers.clone(),
                    };
                    match host.create_or_update(&key, request, &ctx).await {
                        Ok(r) => {
                            let applied = applied(&declared, &r.properties, &[]);
                            Ok((r, Some(applied)))
                        }
                        Err(e) => {
                            let (status, error) = host_error(&e);
                            // A refused create of a resource whose identity is known: ask whether it exists, so
                            // the inventory row its `Running` step wrote goes only if nothing is there.
                            let absent = match known_identifiers {
                                Some(identifiers) if (400..500).contains(&status) => {
                                    let locator = ResourceLocator {
                                        resource_type,
                                        api_version,
                                        identifiers,
                                        config,
                                        config_id: target.extension.and_then(|e| e.config_id),
                                    };
                                    matches!(host.get(&key, &locator, &ctx).await, Ok(None))
                                }
                                _ => false,
                            };
                            Err((status, error, absent))
                        }
                    }
                }
            }
            .in_current_span(),
        );
        match call.await {
            Ok(Ok((deployed, applied))) => Ok(Answer::Extension {
                deployed: Box::new(deployed),
                applied,
            }),
            Ok(Err((status, error, confirmed_absent))) => Err(OpError {
                confirmed_absent,
                ..OpError::new(status, error)
            }),
            Err(_) => Err(OpError::new(
                500,
                ErrorDetail::new("InternalServerError", "The extension call was aborted."),
            )),
        }
    }

    async fn call_provider(
        &self,
        identity: &ResourceIdentity,
        body: Json,
        start: impl FnOnce() -> CallStart,
    ) -> Result<Answer, OpError> {
        let Some(id_text) = identity.id.clone() else {
            return Err(OpError::bad_request(ErrorDetail::new(
                "InvalidTemplate",
                "The resource has no ID.",
            )));
        };
        let id = ResourceId::parse(&id_text).map_err(|e| {
            OpError::bad_request(ErrorDetail::new(
                "InvalidResourceId",
                format!("The resource ID '{id_text}' is not valid: {e}."),
            ))
        })?;
        let action = if identity.existing {
            Action::Read
        } else {
            Action::Write
        };
        self.tree
            .access
            .check(action, &id_text)
            .map_err(|e| OpError::new(e.status(), e.into_detail()))?;
        let api = identity.api_version.clone().unwrap_or_default();
        let provider = self
            .env()
            .providers
            .require(&identity.resource_type, &api)
            .map_err(OpError::from)?
            .clone();
        let existing = identity.existing;
        let resource_type = identity.resource_type.clone();
        let start = start();
        let call = tokio::spawn(
            async move {
                let _permit = start.ready().await;
                if existing {
                    match provider.get(&id, &api).await {
                        Ok(Some(r)) => Ok((r, 200, None)),
                        Ok(None) => Err(ProviderError::not_found(&id)),
                        Err(e) => Err(e),
                    }
                } else {
                    provider.put(&id, &api, &body).await.map(|o| {
                        let write_only = provider.write_only_properties(&resource_type);
                        let applied = applied(&body, &o.resource, write_only);
                        (o.resource, if o.created { 201 } else { 200 }, Some(applied))
                    })
                }
            }
            .in_current_span(),
        );
        let (envelope, status, applied) = match call.await {
            Ok(r) => r?,
            Err(_) => Err(ProviderError::internal("finish the call (aborted)"))?,
        };
        Ok(Answer::Arm {
            id: id_text,
            envelope,
            status,
            applied,
        })
    }

    /// Journals and records a successful operation; what the deployment's record lists for it.
    fn succeeded(
        &self,
        hook: &EngineHook,
        identity: &ResourceIdentity,
        slot: &mut NodeSlot,
        answer: Answer,
    ) -> Done {
        let op_id = slot.operation_id.clone();
        let operation = operation_name(identity);
        let mut done = Done::default();
        match answer {
            Answer::Arm {
                id,
                envelope,
                status,
                applied,
            } => {
                self.tree.values.put_arm(&id, envelope.clone());
                let created = (!identity.existing).then(|| ManagedResource {
                    key: ResourceKey::arm(&id),
                    resource_id: Some(id.clone()),
                    resource_type: identity.resource_type.clone(),
                    api_version: identity.api_version.clone(),
                    properties: envelope,
                    applied,
                    deployment: Some(self.key.clone()),
                    extension: None,
                    updated_at: now(),
                });
                if created.is_some() {
                    done.output_resources.push(DeploymentResourceReference {
                        id: Some(id.clone()),
                        ..DeploymentResourceReference::default()
                    });
                }
                slot.target.id = Some(id);
                let step = self.step(
                    &op_id,
                    &slot.target,
                    operation,
                    "Succeeded",
                    Some(status_name(status)),
                    None,
                    Some(elapsed_ms(slot.started)),
                    None,
                );
                match created {
                    Some(resource) => self.record(
                        step,
                        InventoryChange::Put(Box::new(resource)),
                        self.finished_step_wait(),
                    ),
                    None => self.journal(step, self.finished_step_wait()),
                }
            }
            Answer::Extension { deployed, applied } => {
                let deployed = *deployed;
                let ext = identity
                    .extension
                    .as_ref()
                    .expect("an extension answer comes from an extension resource");
                let extension_ref = self.extension_deployed(identity, ext, &deployed, hook);
                let pending = Self::pending_key(identity, &slot.target);
                let written = applied.is_some();
                let created = applied.map(|applied| ManagedResource {
                    key: ResourceKey::extension(
                        &ext.name,
                        deployed.config_id.as_deref(),
                        &identity.resource_type,
                        &deployed.identifiers,
                    ),
                    resource_id: None,
                    resource_type: identity.resource_type.clone(),
                    api_version: identity.api_version.clone(),
                    properties: deployed.properties.clone(),
                    applied: Some(applied),
                    deployment: Some(self.key.clone()),
                    extension: Some(extension_ref.clone()),
                    updated_at: now(),
                });
                if written {
                    done.output_resources.push(DeploymentResourceReference {
                        extension: Some(DeploymentExtension {
                            alias: None,
                            deployment_id: None,
                            name: ext.name.clone(),
                            version: ext.version.clone(),
                            config_id: deployed.config_id.clone(),
                            config_hash: None,
                            config: None,
                        }),
                        resource_type: Some(identity.resource_type.clone()),
                        identifiers: Some(deployed.identifiers.clone()),
                        api_version: identity.api_version.clone(),
                        reference_id: extension_ref.reference_id.clone(),
                        ..DeploymentResourceReference::default()
                    });
                }
                slot.target = Self::extension_target(identity, deployed.config_id.clone());
                slot.target.identifiers = Some(deployed.identifiers);
                let step = self.step(
                    &op_id,
                    &slot.target,
                    operation,
                    "Succeeded",
                    Some("OK"),
                    None,
                    Some(elapsed_ms(slot.started)),
                    Some(extension_ref),
                );
                match created {
                    Some(resource) => {
                        // The identity the extension predicted was not the one it created under: the row the
                        // `Running` step wrote names nothing.
                        let stale = pending.filter(|key| key != &resource.key);
                        self.record(
                            step,
                            InventoryChange::Put(Box::new(resource)),
                            self.finished_step_wait(),
                        );
                        if let Some(stale) = stale {
                            self.forget(&op_id, stale);
                        }
                    }
                    None => self.journal(step, self.finished_step_wait()),
                }
            }
            Answer::Nested(nested) => {
                self.journal(
                    self.step(
                        &op_id,
                        &slot.target,
                        "Create",
                        "Succeeded",
                        Some("OK"),
                        None,
                        Some(elapsed_ms(slot.started)),
                        None,
                    ),
                    self.finished_step_wait(),
                );
                done = *nested;
            }
        }
        self.event(
            EventKind::ResourceFinished,
            &display(identity),
            &identity.resource_type,
            "Succeeded",
            Some(slot.started.elapsed()),
            None,
        );
        done
    }

    /// What an extension's answer teaches the run: the alias's configId, the resource's runtime value.
    fn extension_deployed(
        &self,
        identity: &ResourceIdentity,
        ext: &PlannedExtensionRef,
        deployed: &DeployedResource,
        hook: &EngineHook,
    ) -> ExtensionRef {
        let slot = self.slot(&ext.alias);
        if deployed.config_id.is_some() {
            *slot.config_id.borrow_mut() = deployed.config_id.clone();
        }
        hook.put_extension(
            &identity.key,
            json!({
                "type": deployed.resource_type,
                "apiVersion": deployed.api_version,
                "identifiers": deployed.identifiers,
                "properties": deployed.properties,
            }),
        );
        ExtensionRef {
            alias: Some(ext.alias.clone()),
            name: Some(ext.name.clone()),
            version: Some(ext.version.clone()),
            config_id: deployed.config_id.clone(),
            reference_id: Some(deployed.reference_id.to_string()),
            identifiers: Some(deployed.identifiers.clone()),
        }
    }

    /// A nested deployment from evaluation to its child's end. It reports `Evaluated` through its result when it
    /// fails or is skipped before the child exists; otherwise it hands `ready` to the driver (which journals
    /// `Running`), waits to be told to go, runs the child and reports `Performed`.
    fn nested_future<'f>(
        &'f self,
        expansion: &'f Expansion<'_>,
        hook: &'f EngineHook,
        identity: &'f ResourceIdentity,
        ready: mpsc::UnboundedSender<NestedReady>,
    ) -> LocalFuture<'f, Progress> {
        Box::pin(async move {
            let node = identity.index;
            let mut target = Self::azure_target(identity);
            let early = |error: ErrorDetail, target: TargetResource| {
                Progress::Evaluated(
                    node,
                    Evaluation::Fail(OpError::bad_request(error)),
                    Box::new(target),
                    None,
                )
            };
            let body = match self.evaluate(expansion, hook, identity).await {
                Ok(Some(body)) => body,
                Ok(None) => {
                    return Progress::Evaluated(node, Evaluation::Skip, Box::new(target), None);
                }
                Err(error) => return early(error, target),
            };
            let child = match self
                .nested_child(expansion, identity, &Value::from_json(&body))
                .await
            {
                Ok(child) => child,
                Err(error) => return early(error, target),
            };
            let NestedChild {
                mut nested,
                origin: child_origin,
                shown_link,
                fetched_parameters,
            } = child;
            let child_key = DeploymentKey::new(
                scope_key(&nested.context.scope_id(nested.template.scope)),
                nested.context.deployment_name.clone(),
            );
            target.id = Some(child_key.to_string());
            if let Err(error) = self.check_scope(&mut nested, &child_key).await {
                return early(error, target);
            }
            let child_hook = EngineHook::deploying(self.tree.values.clone());
            let child_expansion = match self
                .with_runtime_values(&child_hook, || {
                    expansion
                        .expand_nested(&nested, &child_hook)
                        .and_then(Expansion::require_known)
                })
                .await
            {
                Ok(x) => x,
                Err(error) => return early(error, target),
            };
            let mut body = body;
            if let Some(Json::Object(properties)) = body.get_mut("properties") {
                if let Some(link) = shown_link {
                    properties.insert("templateLink".into(), link);
                }
                if let Some(parameters) = fetched_parameters {
                    properties.insert("parameters".into(), Json::Object(parameters));
                }
            }
            let record = match self
                .create_child(&child_key, &body, &nested, &child_expansion)
                .await
            {
                Ok(r) => r,
                Err(error) => return early(error, target),
            };
            let (go, gate) = oneshot::channel();
            let handed = ready.send(NestedReady { node, target, go }).is_ok();
            if !handed || gate.await.is_err() {
                return Progress::Performed(
                    node,
                    Err(Failure::Failed(OpError::new(
                        500,
                        ErrorDetail::new(
                            "InternalServerError",
                            "The nested deployment was not started.",
                        ),
                    ))),
                );
            }
            self.settle_writes(&operation_id(&self.id, &identity.key))
                .await;
            let mut child = Run::new(
                self.tree.clone(),
                record.id.clone(),
                child_key.clone(),
                self.depth + 1,
                record.version,
                self.child_secure_config(expansion, &nested.template, &body),
            );
            child.set_link_context(child_origin, nested.context.clone());
            let finished: Finished = {
                let run: LocalFuture<'_, Finished> =
                    Box::pin(child.execute(&child_expansion, &child_hook));
                run.await
            };
            let result = match finished.status {
                DeploymentStatus::Succeeded => {
                    if let Some(outputs) = finished.outputs {
                        let plan = child_expansion.finish(outputs);
                        expansion.set_nested_plan(identity.index, plan);
                    }
                    Ok(Answer::Nested(Box::new(Done {
                        output_resources: finished.output_resources,
                        extensions: finished.extensions,
                    })))
                }
                DeploymentStatus::Canceled => Err(Failure::Canceled),
                _ => {
                    let mut error = finished.error.unwrap_or_else(|| {
                        ErrorDetail::new("DeploymentFailed", "The nested deployment failed.")
                    });
                    error.target = Some(child_key.to_string());
                    Err(Failure::Failed(OpError::bad_request(error)))
                }
            };
            Progress::Performed(node, result)
        })
    }
}

/// The operation a resource's journal shows: `Read` for an `existing` resource.
fn operation_name(identity: &ResourceIdentity) -> &'static str {
    if identity.existing && !is_nested_deployment(identity) {
        "Read"
    } else {
        "Create"
    }
}

/// How events and errors name a resource: its ID, else its symbolic key.
fn display(identity: &ResourceIdentity) -> String {
    identity.id.clone().unwrap_or_else(|| identity.key.clone())
}

/// Completes `target` (what this run knows) with the identity an earlier run's step recorded for the same
/// operation, where this run could not learn it.
fn keep_identity(target: &mut TargetResource, earlier: TargetResource) {
    if target.identifiers.is_none() && earlier.identifiers.is_some() {
        target.identifiers = earlier.identifiers;
        if let (Some(now), Some(then)) = (&mut target.extension, earlier.extension) {
            now.config_id = then.config_id;
        }
    }
    if target.id.is_none() {
        target.id = earlier.id;
    }
}

//! The delete driver: a sans-IO state machine that runs a [`DeletePlan`] — the caller performs the deletes
//! (ARM DELETE, extension delete), this decides what to delete when and what the results mean.
//!
//! ```text
//! let mut run = DeleteRun::new(plan, settings);
//! loop {
//!     match run.next_step() {
//!         Step::Delete(tasks) => start each task; later run.record(&task.key, outcome),
//!         Step::Wait => wait for a started delete to finish, then record it,
//!         Step::Retry { .. } => optionally back off before the next round,
//!         Step::Done => break,
//!     }
//! }
//! let report = run.into_report()?;
//! ```
//!
//! Scheduling: within a round a resource starts as soon as every resource it must follow (see
//! [`crate::plan`]) is settled, so the run takes about (longest chain × latency), not (waves × slowest). A
//! failure releases the resources waiting on it — deploy-time order is a hint and retrying brute-force is the
//! fallback (REP 0006) — except across credential edges: the resource a failed extensible resource needs for
//! its credentials is held back, because deleting it would make the extensible resource undeletable.
//!
//! Outcomes: `Deleted`, `NotFound` (404), `NoContent` (204), `DeploymentTargetNotFound` (the control plane
//! is gone) and `ConfigSourceGone` (the resource the config's directive reads is gone, so is the control plane;
//! reported with its reason) count as deleted; `Unsupported` is detached or failed per `resourcesWithoutDeleteSupport`;
//! `Failed` is retried in the next round, up to `max_rounds`, then reported in `failedResources`. Every
//! resource ends exactly once in deleted, detached or failed.

use std::collections::{HashMap, VecDeque};

use cairn_arm::ErrorDetail;
use cairn_config::{DirectiveError, DirectiveErrorKind};

use crate::diff::WithoutDeleteSupport;
use crate::error::codes;
use crate::key::ResourceKey;
use crate::managed::ManagedResource;
use crate::plan::{DeletePlan, EdgeKind};

/// What deleting one resource came to.
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome {
    /// The delete succeeded (200/202 then done).
    Deleted,
    /// 404: already gone, counts as deleted (#194).
    NotFound,
    /// 204: nothing to delete, counts as deleted.
    NoContent,
    /// The extension's control plane is gone (e.g. the AKS cluster was deleted), so is the resource.
    DeploymentTargetNotFound,
    /// The ARM resource a directive of the resource's config calls (the cluster its kubeconfig is listed from)
    /// answered not found: the control plane went with it, so the resource counts as deleted (seed 001), and
    /// `reason` (code `DeploymentStackConfigSourceGone`, naming the source) says why on `deletedResources[]`.
    ConfigSourceGone { reason: ErrorDetail },
    /// The resource's type cannot be deleted (Key Vault secrets, ...): `resourcesWithoutDeleteSupport` decides.
    Unsupported { message: Option<String> },
    /// The delete failed; retried in later rounds.
    Failed(ErrorDetail),
}

impl DeleteOutcome {
    /// Whether the resource counts as deleted.
    pub fn is_deleted(&self) -> bool {
        matches!(
            self,
            Self::Deleted
                | Self::NotFound
                | Self::NoContent
                | Self::DeploymentTargetNotFound
                | Self::ConfigSourceGone { .. }
        )
    }

    /// The outcome of an extensible resource whose config could not be resolved for its delete: gone with its
    /// control plane when an API directive's resource answered not found, else failed (retried) with the
    /// directive's error. A Key Vault is a credential store, not a control plane: a missing vault or secret (or
    /// a `listValue` call on one that answers not found) leaves the resource failed, with the fix to restore it.
    pub fn config_unresolved(error: &DirectiveError) -> Self {
        let DirectiveErrorKind::ApiNotFound { call, resource } = &error.kind else {
            return Self::Failed(error.to_error_detail());
        };
        let is_key_vault = cairn_arm::ResourceId::parse(resource).is_ok_and(|id| {
            id.resource_type()
                .to_ascii_lowercase()
                .starts_with("microsoft.keyvault/")
        });
        if is_key_vault {
            return Self::Failed(error.to_error_detail());
        }
        Self::ConfigSourceGone {
            reason: ErrorDetail::new(
                codes::CONFIG_SOURCE_GONE,
                format!(
                    "The resource was not deleted by its extension: '{call}' on '{resource}', which config property \
                     '{property}' of extension '{alias}' comes from, answered not found. The resource's control \
                     plane is gone with it, so the resource is gone too and leaves the stack.",
                    property = error.property,
                    alias = error.alias,
                ),
            )
            .with_target(format!("extensionConfigs.{}.{}", error.alias, error.property)),
        }
    }
}

/// How a run behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSettings {
    /// Rounds in all (the first, ordered one plus retries); at least 1.
    pub max_rounds: u32,
    /// At most this many deletes in flight at once (ARM throttles deletes per subscription); unbounded when
    /// `None`.
    pub max_in_flight: Option<usize>,
    pub without_delete_support: WithoutDeleteSupport,
}

impl RunSettings {
    /// The default settings with `resourcesWithoutDeleteSupport` taken from `action`.
    pub fn for_action(
        action: &cairn_arm::models::stack::ActionOnUnmanage,
    ) -> Result<Self, crate::diff::DiffError> {
        Ok(Self {
            without_delete_support: WithoutDeleteSupport::from_action(action)?,
            ..Self::default()
        })
    }
}

impl Default for RunSettings {
    /// Four rounds, unbounded parallelism, unsupported deletes fail.
    fn default() -> Self {
        Self {
            max_rounds: 4,
            max_in_flight: None,
            without_delete_support: WithoutDeleteSupport::Fail,
        }
    }
}

/// One delete to perform.
#[derive(Clone, Debug, PartialEq)]
pub struct DeleteTask {
    pub key: ResourceKey,
    /// The resource: its ID and `apiVersion`, or its extension, identifiers, reference ID and config.
    pub resource: ManagedResource,
    /// The round, from 1.
    pub round: u32,
    /// How many times this resource has been attempted, this one included.
    pub attempt: u32,
}

/// What the caller should do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Start these deletes (they may run concurrently) and [`DeleteRun::record`] each outcome.
    Delete(Vec<DeleteTask>),
    /// Nothing can start until a started delete is recorded.
    Wait,
    /// A retry round starts with the next call; `remaining` resources are still to delete. A caller may back
    /// off first.
    Retry { round: u32, remaining: usize },
    /// Every resource is settled; take the report with [`DeleteRun::into_report`].
    Done,
}

/// Misuse of a run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("'{0}' is not a delete in flight")]
    NotInFlight(String),
    #[error("the run has not finished: {0} resource(s) are unsettled")]
    NotFinished(usize),
}

/// A resource that could not be deleted, with its `failedResources[].error`.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedDelete {
    pub resource: ManagedResource,
    pub error: ErrorDetail,
}

/// How a run ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeleteReport {
    pub deleted: Vec<ManagedResource>,
    /// Why resources in `deleted` count as deleted without their own delete (`ConfigSourceGone`), by key.
    pub reasons: Vec<(ResourceKey, ErrorDetail)>,
    /// Detached because their type cannot be deleted (`resourcesWithoutDeleteSupport: detach`).
    pub detached: Vec<ManagedResource>,
    pub failed: Vec<FailedDelete>,
    /// Left as they were because the run was canceled first (still managed, not `deleteFailed`).
    pub not_attempted: Vec<ManagedResource>,
    /// Rounds started.
    pub rounds: u32,
    /// Deletes started.
    pub attempts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting this round.
    Pending,
    /// Every predecessor is settled; queued to be handed out.
    Ready,
    /// Handed out, no outcome yet.
    InFlight,
    /// Failed this round; retried next round.
    FailedThisRound,
    /// Not attempted this round: a resource it needs for credentials failed.
    Blocked,
    Deleted,
    Detached,
    Failed,
}

impl State {
    fn is_final(self) -> bool {
        matches!(self, Self::Deleted | Self::Detached | Self::Failed)
    }
}

/// The delete state machine (see the module docs).
#[derive(Debug)]
pub struct DeleteRun {
    plan: DeletePlan,
    settings: RunSettings,
    index: HashMap<ResourceKey, usize>,
    state: Vec<State>,
    /// Predecessors not yet settled this round.
    unmet: Vec<usize>,
    attempts: Vec<u32>,
    last_error: Vec<Option<ErrorDetail>>,
    /// The resource whose failure blocked this one (last time it was blocked).
    blocked_by: Vec<Option<usize>>,
    /// The final error of failed resources.
    final_error: Vec<Option<ErrorDetail>>,
    /// Why a deleted resource counts as deleted without its own delete.
    reason: Vec<Option<ErrorDetail>>,
    ready: VecDeque<usize>,
    /// Deleted resources in the order their deletes ended: dependents before what they depend on, so the report
    /// (and a stack's `deletedResources`, and the progress lines from it) reads as the deletes happened.
    deleted_order: Vec<usize>,
    in_flight: usize,
    round: u32,
    round_started: bool,
    done: bool,
    /// Canceled: nothing new is handed out; once the deletes in flight are recorded the run is done, and what
    /// was not deleted is left as it was.
    canceled: bool,
    total_attempts: u32,
}

impl DeleteRun {
    pub fn new(plan: DeletePlan, settings: RunSettings) -> Self {
        let count = plan.len();
        let index = plan
            .resources()
            .iter()
            .enumerate()
            .map(|(i, r)| (r.key().clone(), i))
            .collect();
        Self {
            plan,
            settings: RunSettings {
                max_rounds: settings.max_rounds.max(1),
                max_in_flight: settings.max_in_flight.map(|m| m.max(1)),
                ..settings
            },
            index,
            state: vec![State::Pending; count],
            unmet: vec![0; count],
            attempts: vec![0; count],
            last_error: vec![None; count],
            blocked_by: vec![None; count],
            final_error: vec![None; count],
            reason: vec![None; count],
            ready: VecDeque::new(),
            deleted_order: Vec::new(),
            in_flight: 0,
            round: 0,
            round_started: false,
            done: count == 0,
            canceled: false,
            total_attempts: 0,
        }
    }

    /// Stops the run at its next safe point: no delete is handed out from now on, the ones in flight are still
    /// recorded, and resources not deleted by then end in [`DeleteReport::not_attempted`], unchanged.
    pub fn cancel(&mut self) {
        self.canceled = true;
        self.ready.clear();
    }

    /// Whether [`DeleteRun::cancel`] was called.
    pub fn is_canceled(&self) -> bool {
        self.canceled
    }

    /// The plan being run.
    pub fn plan(&self) -> &DeletePlan {
        &self.plan
    }

    /// The current round (0 before the first step).
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Deletes handed out and not yet recorded.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// What to do next.
    pub fn next_step(&mut self) -> Step {
        if self.done {
            return Step::Done;
        }
        if self.canceled {
            if self.in_flight > 0 {
                return Step::Wait;
            }
            self.done = true;
            return Step::Done;
        }
        if !self.round_started {
            self.start_round();
        }
        let capacity = match self.settings.max_in_flight {
            Some(max) => max.saturating_sub(self.in_flight),
            None => usize::MAX,
        };
        if !self.ready.is_empty() && capacity > 0 {
            let take = capacity.min(self.ready.len());
            let tasks = self
                .ready
                .drain(..take)
                .collect::<Vec<_>>()
                .into_iter()
                .map(|node| self.hand_out(node))
                .collect();
            return Step::Delete(tasks);
        }
        if self.in_flight > 0 {
            return Step::Wait;
        }
        self.end_round()
    }

    /// Records the outcome of a delete handed out by [`DeleteRun::next_step`].
    pub fn record(&mut self, key: &ResourceKey, outcome: DeleteOutcome) -> Result<(), RunError> {
        let node = match self.index.get(key) {
            Some(&node) if self.state[node] == State::InFlight => node,
            _ => return Err(RunError::NotInFlight(key.to_string())),
        };
        self.in_flight -= 1;
        match outcome {
            DeleteOutcome::ConfigSourceGone { reason } => {
                self.state[node] = State::Deleted;
                self.reason[node] = Some(reason);
                self.settle(node, true);
            }
            outcome if outcome.is_deleted() => {
                self.state[node] = State::Deleted;
                self.settle(node, true);
            }
            DeleteOutcome::Unsupported { message } => match self.settings.without_delete_support {
                WithoutDeleteSupport::Detach => {
                    self.state[node] = State::Detached;
                    self.settle(node, true);
                }
                WithoutDeleteSupport::Fail => {
                    let mut reason = ErrorDetail::new(
                        codes::RESOURCE_DELETE_NOT_SUPPORTED,
                        "The resource type does not support deletion. Set 'resourcesWithoutDeleteSupport' to \
                         'detach' to detach such resources instead, or delete the resource manually.",
                    );
                    if let Some(message) = message {
                        reason = reason.with_details([ErrorDetail::new(
                            codes::RESOURCE_DELETE_NOT_SUPPORTED,
                            message,
                        )]);
                    }
                    self.state[node] = State::Failed;
                    self.final_error[node] = Some(deletion_failed(self.key_text(node), [reason]));
                    self.settle(node, false);
                }
            },
            DeleteOutcome::Failed(error) => {
                self.state[node] = State::FailedThisRound;
                self.last_error[node] = Some(error);
                self.settle(node, false);
            }
            // `is_deleted` covered the remaining variants.
            _ => {
                self.state[node] = State::Deleted;
                self.settle(node, true);
            }
        }
        if self.state[node] == State::Deleted {
            self.deleted_order.push(node);
        }
        Ok(())
    }

    /// The report, once [`Step::Done`] was returned.
    pub fn into_report(self) -> Result<DeleteReport, RunError> {
        if !self.done {
            let unsettled = self.state.iter().filter(|s| !s.is_final()).count();
            return Err(RunError::NotFinished(unsettled));
        }
        let mut report = DeleteReport {
            rounds: self.round,
            attempts: self.total_attempts,
            ..DeleteReport::default()
        };
        let mut final_error = self.final_error;
        let mut reason = self.reason;
        for &node in &self.deleted_order {
            let resource = &self.plan.resources()[node];
            if let Some(reason) = reason[node].take() {
                report.reasons.push((resource.key().clone(), reason));
            }
            report.deleted.push(resource.clone());
        }
        for (node, resource) in self.plan.resources().iter().enumerate() {
            match self.state[node] {
                State::Deleted => {}
                State::Detached => report.detached.push(resource.clone()),
                // A canceled run leaves what it did not get to (or what failed on the way) as it was.
                _ if self.canceled && final_error[node].is_none() => {
                    report.not_attempted.push(resource.clone())
                }
                _ => report.failed.push(FailedDelete {
                    resource: resource.clone(),
                    error: final_error[node]
                        .take()
                        .unwrap_or_else(|| deletion_failed(resource.key().to_string(), [])),
                }),
            }
        }
        Ok(report)
    }

    fn key_text(&self, node: usize) -> String {
        self.plan.resources()[node].key().to_string()
    }

    fn hand_out(&mut self, node: usize) -> DeleteTask {
        self.state[node] = State::InFlight;
        self.in_flight += 1;
        self.attempts[node] += 1;
        self.total_attempts += 1;
        let resource = self.plan.resources()[node].clone();
        DeleteTask {
            key: resource.key().clone(),
            resource,
            round: self.round,
            attempt: self.attempts[node],
        }
    }

    fn start_round(&mut self) {
        self.round += 1;
        self.round_started = true;
        let count = self.plan.len();
        let mut blocked = Vec::new();
        for node in 0..count {
            if self.state[node].is_final() {
                continue;
            }
            self.state[node] = State::Pending;
            let mut unmet = 0;
            let mut blocker = None;
            for &(before, kind) in self.plan.predecessors(node) {
                match self.state[before] {
                    State::Deleted | State::Detached => {}
                    State::Failed if kind == EdgeKind::Credentials => blocker = Some(before),
                    State::Failed => {}
                    _ => unmet += 1,
                }
            }
            self.unmet[node] = unmet;
            if blocker.is_some() {
                self.blocked_by[node] = blocker;
                blocked.push(node);
            }
        }
        // Mark them all before settling any, so a blocked node is never also queued.
        for &node in &blocked {
            self.state[node] = State::Blocked;
        }
        for node in blocked {
            self.settle(node, false);
        }
        for node in 0..count {
            if self.state[node] == State::Pending && self.unmet[node] == 0 {
                self.state[node] = State::Ready;
                self.ready.push_back(node);
            }
        }
    }

    /// Called when `node` is settled for this round: releases its successors, or blocks those that need it
    /// for credentials when it did not succeed.
    fn settle(&mut self, node: usize, succeeded: bool) {
        let mut work = vec![(node, succeeded)];
        while let Some((node, succeeded)) = work.pop() {
            for &(after, kind) in self.plan.successors(node) {
                if self.state[after] != State::Pending {
                    continue;
                }
                if !succeeded && kind == EdgeKind::Credentials {
                    self.state[after] = State::Blocked;
                    self.blocked_by[after] = Some(node);
                    work.push((after, false));
                    continue;
                }
                self.unmet[after] -= 1;
                if self.unmet[after] == 0 {
                    self.state[after] = State::Ready;
                    self.ready.push_back(after);
                }
            }
        }
    }

    /// No delete in flight and none ready: the round is over.
    fn end_round(&mut self) -> Step {
        let remaining = self
            .state
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    State::FailedThisRound | State::Blocked | State::Pending | State::Ready
                )
            })
            .count();
        if remaining > 0 && self.round < self.settings.max_rounds {
            self.round_started = false;
            return Step::Retry {
                round: self.round + 1,
                remaining,
            };
        }
        for node in 0..self.plan.len() {
            if self.state[node].is_final() {
                continue;
            }
            let key = self.key_text(node);
            let mut reasons = Vec::new();
            if matches!(
                self.state[node],
                State::Blocked | State::Pending | State::Ready
            ) && let Some(blocker) = self.blocked_by[node]
            {
                reasons.push(ErrorDetail::new(
                    codes::DELETE_BLOCKED,
                    format!(
                        "The resource was not deleted because '{}', which must be deleted first (its credentials \
                         come from this resource), could not be deleted.",
                        self.key_text(blocker)
                    ),
                ));
            }
            reasons.extend(self.last_error[node].take());
            self.final_error[node] = Some(deletion_failed(key, reasons));
            self.state[node] = State::Failed;
        }
        self.done = true;
        Step::Done
    }
}

/// `DeletionFailed` for one resource, with the reasons as details.
fn deletion_failed(key: String, reasons: impl IntoIterator<Item = ErrorDetail>) -> ErrorDetail {
    let reasons: Vec<ErrorDetail> = reasons.into_iter().collect();
    let error = ErrorDetail::new(
        codes::DELETION_FAILED,
        "Resource could not be deleted. Resource is still present in stack.",
    )
    .with_target(key);
    if reasons.is_empty() {
        error
    } else {
        error.with_details(reasons)
    }
}

/// Performs one delete, synchronously. For async callers, drive [`DeleteRun`] directly.
pub trait Deleter {
    fn delete(&mut self, task: &DeleteTask) -> DeleteOutcome;
}

impl<F: FnMut(&DeleteTask) -> DeleteOutcome> Deleter for F {
    fn delete(&mut self, task: &DeleteTask) -> DeleteOutcome {
        self(task)
    }
}

/// Runs a plan to the end with a synchronous deleter, one delete at a time, without backing off between
/// rounds.
pub fn run_to_completion(
    plan: DeletePlan,
    settings: RunSettings,
    deleter: &mut impl Deleter,
) -> Result<DeleteReport, RunError> {
    let mut run = DeleteRun::new(plan, settings);
    loop {
        match run.next_step() {
            Step::Delete(tasks) => {
                for task in tasks {
                    let outcome = deleter.delete(&task);
                    run.record(&task.key, outcome)?;
                }
            }
            Step::Retry { .. } => {}
            Step::Wait | Step::Done => break,
        }
    }
    run.into_report()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed::ExtensionIdentity;
    use cairn_arm::ResourceId;
    use serde_json::json;

    const RG: &str = "/subscriptions/s/resourceGroups/rg";
    const AKS: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks";

    fn arm(id: &str) -> ManagedResource {
        ManagedResource::arm(ResourceId::parse(id).unwrap())
    }

    fn site(name: &str) -> ManagedResource {
        arm(&format!("{RG}/providers/Microsoft.Web/sites/{name}"))
    }

    fn config_map() -> ManagedResource {
        let mut resource = ManagedResource::extensible(
            ExtensionIdentity {
                name: "Kubernetes".into(),
                version: "1.0.0".into(),
                config_id: None,
            },
            "core/ConfigMap",
            json!({"metadata": {"namespace": "app", "name": "settings"}}),
        );
        resource.credential_sources = vec![ResourceId::parse(AKS).unwrap()];
        resource
    }

    fn name(resource: &ManagedResource) -> String {
        match resource.arm_id() {
            Some(id) => id.name().unwrap_or("/").to_owned(),
            None => "configmap".into(),
        }
    }

    fn names(resources: &[ManagedResource]) -> Vec<String> {
        resources.iter().map(name).collect()
    }

    fn failure(code: &str) -> DeleteOutcome {
        DeleteOutcome::Failed(ErrorDetail::new(code, "nope"))
    }

    #[test]
    fn runs_in_order_and_counts_404_204_and_missing_targets_as_deleted() {
        let plan = DeletePlan::build([arm(RG), site("a"), site("b"), config_map(), arm(AKS)]);
        let mut order = Vec::new();
        let report = run_to_completion(plan, RunSettings::default(), &mut |task: &DeleteTask| {
            order.push(name(&task.resource));
            match name(&task.resource).as_str() {
                "a" => DeleteOutcome::NotFound,
                "b" => DeleteOutcome::NoContent,
                "configmap" => DeleteOutcome::DeploymentTargetNotFound,
                _ => DeleteOutcome::Deleted,
            }
        })
        .unwrap();
        assert_eq!(order, ["a", "b", "configmap", "aks", "rg"]);
        // Reported as deleted: children before their parents, not in the plan's order.
        assert_eq!(names(&report.deleted), order);
        assert_eq!((report.rounds, report.attempts), (1, 5));
    }

    #[test]
    fn failures_are_retried_then_reported() {
        let plan = DeletePlan::build([site("flaky"), site("broken")]);
        let mut calls: HashMap<String, u32> = HashMap::new();
        let settings = RunSettings {
            max_rounds: 3,
            ..RunSettings::default()
        };
        let report = run_to_completion(plan, settings, &mut |task: &DeleteTask| {
            let n = calls.entry(name(&task.resource)).or_default();
            *n += 1;
            match (name(&task.resource).as_str(), *n) {
                ("flaky", 1) => failure("Conflict"),
                ("broken", _) => failure("InternalServerError"),
                _ => DeleteOutcome::Deleted,
            }
        })
        .unwrap();
        assert_eq!(names(&report.deleted), ["flaky"]);
        assert_eq!(report.failed.len(), 1);
        assert_eq!(calls["broken"], 3, "attempted once per round");
        let error = &report.failed[0].error;
        assert_eq!(error.code(), codes::DELETION_FAILED);
        assert_eq!(
            error.details.as_ref().unwrap()[0].code(),
            "InternalServerError"
        );
        assert!(error.target.as_deref().unwrap().ends_with("/sites/broken"));
    }

    #[test]
    fn a_failure_releases_soft_successors_but_holds_credential_sources() {
        // The config map's delete keeps failing. The site it depended on (a soft, deploy-time edge) is still
        // attempted; the AKS cluster its credentials come from, and the group holding the cluster, are not.
        let mut cm = config_map();
        cm.depends_on = vec![site("a").key().clone()];
        let plan = DeletePlan::build([cm, arm(AKS), site("a"), arm(RG)]);
        let mut attempted = Vec::new();
        let settings = RunSettings {
            max_rounds: 2,
            ..RunSettings::default()
        };
        let report = run_to_completion(plan, settings, &mut |task: &DeleteTask| {
            attempted.push(name(&task.resource));
            if name(&task.resource) == "configmap" {
                failure("Timeout")
            } else {
                DeleteOutcome::Deleted
            }
        })
        .unwrap();
        assert_eq!(attempted, ["configmap", "a", "configmap"]);
        let failed: Vec<String> = report.failed.iter().map(|f| name(&f.resource)).collect();
        assert_eq!(failed, ["configmap", "aks", "rg"]);
        let aks_error = &report.failed[1].error;
        assert_eq!(
            aks_error.details.as_ref().unwrap()[0].code(),
            codes::DELETE_BLOCKED
        );
        assert_eq!(names(&report.deleted), ["a"]);
    }

    #[test]
    fn unsupported_detaches_or_fails_per_setting() {
        let secret = arm(&format!(
            "{RG}/providers/Microsoft.KeyVault/vaults/kv/secrets/s"
        ));
        for (setting, detached, failed) in [
            (WithoutDeleteSupport::Detach, 1, 0),
            (WithoutDeleteSupport::Fail, 0, 1),
        ] {
            let plan = DeletePlan::build([secret.clone()]);
            let mut calls = 0;
            let settings = RunSettings {
                without_delete_support: setting,
                ..RunSettings::default()
            };
            let report = run_to_completion(plan, settings, &mut |_: &DeleteTask| {
                calls += 1;
                DeleteOutcome::Unsupported {
                    message: Some("MethodNotAllowed".into()),
                }
            })
            .unwrap();
            assert_eq!(
                (report.detached.len(), report.failed.len(), calls),
                (detached, failed, 1)
            );
            if let Some(failure) = report.failed.first() {
                let reason = &failure.error.details.as_ref().unwrap()[0];
                assert_eq!(reason.code(), codes::RESOURCE_DELETE_NOT_SUPPORTED);
            }
        }
    }

    #[test]
    fn concurrency_is_bounded_and_records_are_checked() {
        let plan = DeletePlan::build([site("a"), site("b"), site("c")]);
        let mut run = DeleteRun::new(
            plan,
            RunSettings {
                max_in_flight: Some(2),
                ..RunSettings::default()
            },
        );
        let Step::Delete(first) = run.next_step() else {
            panic!("expected deletes")
        };
        assert_eq!(first.len(), 2);
        assert_eq!(run.next_step(), Step::Wait);
        assert!(
            run.record(&site("c").key().clone(), DeleteOutcome::Deleted)
                .is_err(),
            "not handed out yet"
        );
        run.record(&first[0].key, DeleteOutcome::Deleted).unwrap();
        assert!(
            run.record(&first[0].key, DeleteOutcome::Deleted).is_err(),
            "recorded twice"
        );
        let Step::Delete(second) = run.next_step() else {
            panic!("expected the third delete")
        };
        assert_eq!(second.len(), 1);
        assert!(matches!(run.into_report(), Err(RunError::NotFinished(2))));
    }

    #[test]
    fn retry_steps_are_announced() {
        let plan = DeletePlan::build([site("a")]);
        let mut run = DeleteRun::new(
            plan,
            RunSettings {
                max_rounds: 2,
                ..RunSettings::default()
            },
        );
        let Step::Delete(tasks) = run.next_step() else {
            panic!()
        };
        run.record(&tasks[0].key, failure("Conflict")).unwrap();
        assert_eq!(
            run.next_step(),
            Step::Retry {
                round: 2,
                remaining: 1
            }
        );
        let Step::Delete(tasks) = run.next_step() else {
            panic!()
        };
        assert_eq!((tasks[0].round, tasks[0].attempt), (2, 2));
        run.record(&tasks[0].key, DeleteOutcome::Deleted).unwrap();
        assert_eq!(run.next_step(), Step::Done);
        let report = run.into_report().unwrap();
        assert_eq!((report.deleted.len(), report.rounds), (1, 2));
    }

    #[test]
    fn settings_follow_the_action() {
        let mut action = cairn_arm::models::stack::ActionOnUnmanage::detach_all();
        assert_eq!(
            RunSettings::for_action(&action)
                .unwrap()
                .without_delete_support,
            WithoutDeleteSupport::Fail
        );
        action.resources_without_delete_support =
            Some(cairn_arm::models::stack::ResourcesWithoutDeleteSupportAction::Detach);
        assert_eq!(
            RunSettings::for_action(&action)
                .unwrap()
                .without_delete_support,
            WithoutDeleteSupport::Detach
        );
    }

    #[test]
    fn a_canceled_run_records_what_is_in_flight_and_leaves_the_rest() {
        let plan = DeletePlan::build([site("a"), site("b"), site("c"), site("d")]);
        let settings = RunSettings {
            max_in_flight: Some(2),
            ..RunSettings::default()
        };
        let mut run = DeleteRun::new(plan, settings);
        let Step::Delete(first) = run.next_step() else {
            panic!("two deletes first")
        };
        assert_eq!(first.len(), 2);
        run.cancel();
        assert_eq!(
            run.next_step(),
            Step::Wait,
            "the two in flight are still awaited"
        );
        run.record(&first[0].key, DeleteOutcome::Deleted).unwrap();
        assert_eq!(run.next_step(), Step::Wait);
        run.record(&first[1].key, failure("Conflict")).unwrap();
        assert_eq!(run.next_step(), Step::Done, "nothing new is handed out");
        let report = run.into_report().unwrap();
        assert_eq!(names(&report.deleted), [name(&first[0].resource)]);
        assert!(report.failed.is_empty());
        assert_eq!(report.not_attempted.len(), 3, "left as they were");
        assert_eq!(report.attempts, 2);
    }

    #[test]
    fn empty_plan_is_done_at_once() {
        let mut run = DeleteRun::new(DeletePlan::build(Vec::new()), RunSettings::default());
        assert_eq!(run.next_step(), Step::Done);
        assert_eq!(run.into_report().unwrap(), DeleteReport::default());
    }
}

//! Performing the unmanage plan: ARM deletes through the engine's providers, extensible deletes through the
//! extension host with the persisted config re-resolved fresh by the engine's resolver (Key Vault secrets read
//! now, API actions called now), driven by `cairn_stacks::DeleteRun`. A resource whose config cannot be resolved
//! because its directive's source is gone counts as deleted with its reason (`DeleteOutcome::config_unresolved`).

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::access::{Access, Action};
use cairn_arm::models::stack::{ActionOnUnmanage, DeploymentStack};
use cairn_arm::{ArmError, ErrorDetail};
use cairn_engine::{LocalResolver, Providers};
use cairn_host::{
    CallContext, ExtensionConfig, ExtensionHost, ExtensionKey, HostErrorKind, ResourceLocator,
};
use cairn_stacks::directive::{DirectiveError, DirectiveErrorKind, resolve_config};
use cairn_stacks::{
    DeleteOutcome, DeletePlan, DeleteReport, DeleteRun, ExtensionIdentity, ManagedResource,
    ManagedTarget, RemovalAction, RemovalReason, RunSettings, StackOperationResult, Step,
    UnmanageDiff,
};
use cairn_store::Store;
use cairn_template::catalogue::missing_required;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::record::{RecordFence, deleted_rows, detached_rows};
use crate::request::bad_request;
use crate::service::StackService;
use crate::state::StoredState;

/// Everything a delete needs; cheap to clone into tasks.
#[derive(Clone)]
pub(crate) struct Deleter {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) providers: Arc<Providers>,
    pub(crate) host: Arc<ExtensionHost>,
    pub(crate) correlation_id: String,
    /// What the caller may reach: ARM deletes and the directives a delete runs again are checked against it.
    pub(crate) access: Access,
}

pub(crate) fn host_error_detail(error: &cairn_host::HostError) -> ErrorDetail {
    serde_json::to_value(error.error())
        .ok()
        .and_then(|value| serde_json::from_value(value).ok())
        .unwrap_or_else(|| ErrorDetail::new("ExtensionError", error.to_string()))
}

impl StackService {
    /// A deleter for this service's caller.
    pub(crate) fn deleter(&self, correlation_id: String) -> Deleter {
        Deleter {
            store: self.inner.store.clone(),
            providers: self.inner.providers.clone(),
            host: self.inner.host.clone(),
            correlation_id,
            access: self.access.clone(),
        }
    }
}

impl Deleter {
    /// The config an extensible resource's delete (or read) sends: its persisted config with every directive
    /// resolved now, through the engine's resolver (Key Vault secrets read now, API actions called now). A
    /// property the extension is known to require (`cairn_template::catalogue`) that the resolved config lacks is an
    /// error for that resource, so the extension is never called without its credential.
    pub(crate) async fn resolve(
        &self,
        extension: &ExtensionIdentity,
        resource: &ManagedResource,
    ) -> Result<Option<ExtensionConfig>, DirectiveError> {
        let Some(persisted) = &resource.config else {
            return Ok(None);
        };
        let resolver =
            LocalResolver::new(self.store.as_ref(), &self.providers).acting_for(&self.access);
        let resolved = resolve_config(&extension.name, persisted.config(), &resolver).await?;
        let map = resolved.into_map();
        let missing = missing_required(&extension.name, &extension.version, &map);
        if let Some(property) = missing.first() {
            return Err(DirectiveError {
                alias: extension.name.clone(),
                property: (*property).to_owned(),
                kind: DirectiveErrorKind::RequiredMissing {
                    extension: format!("{} {}", extension.name, extension.version),
                },
            });
        }
        Ok(Some(ExtensionConfig::new(map)))
    }

    /// Deletes one resource and says how it went; never panics, every failure is an outcome.
    pub(crate) async fn delete(&self, resource: &ManagedResource) -> DeleteOutcome {
        match resource.target() {
            ManagedTarget::Arm(id) => {
                if let Err(error) = self.access.check(Action::Delete, &id.to_string()) {
                    return DeleteOutcome::Failed(error.into_detail());
                }
                let resource_type = id.resource_type();
                let Some(provider) = self.providers.get(&resource_type) else {
                    return DeleteOutcome::Failed(ErrorDetail::new(
                        "NoRegisteredProviderFound",
                        format!(
                            "No registered provider found for the resource type '{resource_type}'."
                        ),
                    ));
                };
                let api_version = resource.api_version.as_deref().unwrap_or_default();
                match provider.delete(id, api_version).await {
                    Ok(true) => DeleteOutcome::Deleted,
                    Ok(false) => DeleteOutcome::NotFound,
                    Err(error) if error.status == 404 => DeleteOutcome::NotFound,
                    Err(error) if error.status == 405 => DeleteOutcome::Unsupported {
                        message: Some(error.error.message().to_owned()),
                    },
                    Err(error) => DeleteOutcome::Failed(*error.error),
                }
            }
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => {
                let config = match self.resolve(extension, resource).await {
                    Ok(config) => config,
                    // A directive's source that is gone took the control plane with it (seed 001).
                    Err(error) => return DeleteOutcome::config_unresolved(&error),
                };
                let locator = ResourceLocator {
                    resource_type: resource_type.clone(),
                    api_version: resource.api_version.clone(),
                    identifiers: identifiers.clone(),
                    config,
                    config_id: extension.config_id.clone().filter(|id| !id.is_empty()),
                };
                let key = ExtensionKey::new(extension.name.clone(), extension.version.clone());
                let context = CallContext {
                    correlation_id: Some(self.correlation_id.clone()),
                    ..CallContext::default()
                };
                match self.host.delete(&key, &locator, &context).await {
                    Ok(()) => DeleteOutcome::Deleted,
                    Err(error) => match error.kind() {
                        HostErrorKind::NotFound => DeleteOutcome::NotFound,
                        HostErrorKind::DeploymentTargetNotFound => {
                            DeleteOutcome::DeploymentTargetNotFound
                        }
                        _ if error.status() == 405 => DeleteOutcome::Unsupported {
                            message: Some(error.error().message.clone()),
                        },
                        _ => DeleteOutcome::Failed(host_error_detail(&error)),
                    },
                }
            }
        }
    }

    /// Runs a delete plan to the end: deletes start as soon as their predecessors are settled, at most
    /// `settings.max_in_flight` at once, with `backoff` between retry rounds. Each resource that is gone
    /// (deleted, or found already gone) is sent to `deleted` as soon as it is.
    pub(crate) async fn run(
        &self,
        plan: DeletePlan,
        settings: RunSettings,
        backoff: Duration,
        deleted: Option<&mpsc::UnboundedSender<ManagedResource>>,
        cancel: Option<tokio_util::sync::CancellationToken>,
    ) -> Result<DeleteReport, cairn_stacks::RunError> {
        let mut run = DeleteRun::new(plan, settings);
        let mut in_flight = JoinSet::new();
        let cancel = cancel.unwrap_or_default();
        loop {
            if cancel.is_cancelled() && !run.is_canceled() {
                run.cancel();
            }
            match run.next_step() {
                Step::Delete(tasks) => {
                    for task in tasks {
                        let deleter = self.clone();
                        in_flight.spawn(async move {
                            let outcome = deleter.delete(&task.resource).await;
                            (task.key, task.resource, outcome)
                        });
                    }
                }
                Step::Wait => match tokio::select! {
                    joined = in_flight.join_next() => joined,
                    // Woken to stop handing out deletes; the ones in flight are awaited next time round.
                    () = cancel.cancelled(), if !run.is_canceled() => continue,
                } {
                    Some(Ok((key, resource, outcome))) => {
                        let gone = outcome.is_deleted();
                        run.record(&key, outcome)?;
                        if gone && let Some(sender) = deleted {
                            // The receiver only goes away with the operation itself.
                            let _ = sender.send(resource);
                        }
                    }
                    // A delete task panicked: its key is lost, so the run cannot settle it; stop waiting.
                    Some(Err(_)) | None => break,
                },
                Step::Retry { .. } => {
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = cancel.cancelled() => {}
                    }
                }
                Step::Done => break,
            }
        }
        run.into_report()
    }
}

impl StackService {
    /// Runs the unmanage diff's deletes. With `publish` (the operation's fence and how to build the record as it
    /// stands), the deletes done so far are published on the record while the rest run. The record is built only
    /// when there is something to delete: it copies the whole managed set.
    pub(crate) async fn unmanage(
        &self,
        diff: UnmanageDiff,
        action: &ActionOnUnmanage,
        correlation_id: &str,
        publish: Option<(
            &RecordFence,
            impl FnOnce() -> (DeploymentStack, StoredState),
        )>,
    ) -> Result<StackOperationResult, ArmError> {
        let mut settings =
            RunSettings::for_action(action).map_err(|e| bad_request(e.to_error_detail()))?;
        settings.max_rounds = self.inner.settings.max_delete_rounds.max(1);
        settings.max_in_flight = Some(self.inner.settings.max_deletes_in_flight.max(1));
        let deleter = self.deleter(correlation_id.to_owned());
        let plan = diff.delete_plan();
        let fence = publish.as_ref().map(|(fence, _)| (*fence).clone());
        let publisher = match publish {
            Some((fence, record)) if !plan.is_empty() => {
                let (stack, state) = record();
                Some(self.publish_deletes(
                    fence.clone(),
                    stack,
                    state,
                    self.inner.settings.progress_interval,
                ))
            }
            _ => None,
        };
        let report = deleter
            .run(
                plan,
                settings,
                self.inner.settings.retry_backoff,
                publisher.as_ref().map(|(sender, _)| sender),
                fence
                    .as_ref()
                    .and_then(|fence| self.cancel_token(fence.scope(), fence.name())),
            )
            .await;
        if let Some((sender, handle)) = publisher {
            drop(sender);
            // The publisher's writes must land before the operation's final one (they share the fence).
            let _ = handle.await;
        }
        let report =
            report.map_err(|e| ArmError::new(500, "InternalServerError", e.to_string()))?;
        if let Some(fence) = fence {
            // The operation's next write records these: their inventory rows go (or are marked detached) with it.
            // A resource another stack still manages stays managed in the inventory.
            let detached = diff.removed.iter().filter(|removal| {
                removal.action == RemovalAction::Detach
                    && matches!(
                        removal.reason,
                        RemovalReason::ActionOnUnmanage(_) | RemovalReason::Retained { .. }
                    )
            });
            fence.stage(deleted_rows(&report.deleted));
            fence.stage(detached_rows(
                detached
                    .map(|removal| &removal.resource)
                    .chain(&report.detached),
            ));
        }
        Ok(StackOperationResult::assemble(diff, report, correlation_id))
    }
}

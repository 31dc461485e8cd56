//! Performing the unmanage plan: ARM deletes through the engine's providers, extensible deletes through the
//! extension host with the persisted config re-resolved fresh (Key Vault secrets read now, API actions called
//! now), driven by `cairn_stacks::DeleteRun`.

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::ErrorDetail;
use cairn_engine::Providers;
use cairn_engine::provider::api::{ApiCall, ApiMethod as EngineApiMethod, call_api};
use cairn_host::{
    CallContext, ExtensionConfig, ExtensionHost, ExtensionKey, HostErrorKind, ResourceLocator,
};
use cairn_stacks::directive::{
    ApiMethod, ApiRequest, ResolveFailure, Resolver, SecretRequest, SecretValue, resolve_config,
};
use cairn_stacks::{
    DeleteOutcome, DeletePlan, DeleteReport, DeleteRun, ManagedResource, ManagedTarget,
    RunSettings, Step,
};
use cairn_store::{ExposeSecret, Store};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Reads directive sources from the local control plane: Key Vault secrets from the store, API actions from the
/// providers.
pub(crate) struct LocalResolver {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) providers: Arc<Providers>,
}

impl Resolver for LocalResolver {
    async fn get_secret(&self, request: &SecretRequest) -> Result<SecretValue, ResolveFailure> {
        let vault_id = request.vault_id.to_string();
        match self
            .store
            .get_vault_secret(
                &vault_id,
                &request.secret_name,
                request.secret_version.as_deref(),
            )
            .await
        {
            Ok(Some(secret)) if secret.info.enabled => {
                Ok(SecretValue::new(secret.value.expose_secret()))
            }
            Ok(Some(_)) => Err(ResolveFailure::Forbidden {
                message: "the secret version is disabled".into(),
            }),
            Ok(None) => Err(ResolveFailure::NotFound),
            Err(error) => Err(ResolveFailure::Failed {
                code: Some(error.arm_code().into()),
                message: error.to_string(),
            }),
        }
    }

    async fn call_api(&self, request: &ApiRequest) -> Result<Value, ResolveFailure> {
        let call = ApiCall {
            method: match request.method {
                ApiMethod::Get => EngineApiMethod::Get,
                ApiMethod::Post => EngineApiMethod::Post,
            },
            resource_id: &request.resource_id,
            api_version: &request.api_version,
            action: request.action.as_deref(),
            query: request.query.as_deref(),
            body: request.body.as_ref(),
        };
        call_api(&self.providers, &call)
            .await
            .map_err(|error| match error.status {
                404 => ResolveFailure::NotFound,
                401 | 403 => ResolveFailure::Forbidden {
                    message: error.error.message().to_owned(),
                },
                _ => ResolveFailure::Failed {
                    code: Some(error.error.code().to_owned()),
                    message: error.error.message().to_owned(),
                },
            })
    }
}

/// Everything a delete needs; cheap to clone into tasks.
#[derive(Clone)]
pub(crate) struct Deleter {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) providers: Arc<Providers>,
    pub(crate) host: Arc<ExtensionHost>,
    pub(crate) correlation_id: String,
}

fn host_error_detail(error: &cairn_host::HostError) -> ErrorDetail {
    serde_json::to_value(error.error())
        .ok()
        .and_then(|value| serde_json::from_value(value).ok())
        .unwrap_or_else(|| ErrorDetail::new("ExtensionError", error.to_string()))
}

impl Deleter {
    /// Deletes one resource and says how it went; never panics, every failure is an outcome.
    pub(crate) async fn delete(&self, resource: &ManagedResource) -> DeleteOutcome {
        match resource.target() {
            ManagedTarget::Arm(id) => {
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
                let config = match &resource.config {
                    Some(persisted) => {
                        let resolver = LocalResolver {
                            store: self.store.clone(),
                            providers: self.providers.clone(),
                        };
                        match resolve_config(&extension.name, persisted, &resolver).await {
                            Ok(resolved) => ExtensionConfig::from_value(resolved.into_value()),
                            Err(error) => return DeleteOutcome::Failed(error.to_error_detail()),
                        }
                    }
                    None => None,
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
    ) -> Result<DeleteReport, cairn_stacks::RunError> {
        let mut run = DeleteRun::new(plan, settings);
        let mut in_flight = JoinSet::new();
        loop {
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
                Step::Wait => match in_flight.join_next().await {
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
                Step::Retry { .. } => tokio::time::sleep(backoff).await,
                Step::Done => break,
            }
        }
        run.into_report()
    }
}

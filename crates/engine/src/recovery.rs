//! What recovery reads from and writes to a crashed run's journal: how far it got, what it created (or was
//! creating), and the terminal steps of the operations it left running.

use cairn_arm::ErrorDetail;
use cairn_arm::models::deployment::DeploymentResourceReference;
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::operation::{StatusMessage, TargetResource};
use cairn_store::{DeploymentId, OperationStep, Store, Timestamp};

use crate::provider::status_of;
use crate::request::deployment_key_of;

/// Ends every operation an interrupted run (and, recursively, its nested deployments) left running with a
/// `Failed` step carrying `error`, so a finished deployment shows no operation `Running`.
pub(crate) async fn end_running_operations(
    store: &dyn Store,
    id: &DeploymentId,
    error: &ErrorDetail,
    depth: usize,
) {
    let Ok(ops) = store.latest_operations(id).await else {
        return;
    };
    for op in ops {
        let step = op.step;
        let target: TargetResource = step
            .target_resource
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        let is_deployment = target
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        if is_deployment
            && depth < cairn_template::expand::MAX_NESTING_DEPTH
            && let Some(child) = target.id.as_deref().and_then(deployment_key_of)
            && let Ok(Some(child)) = store.get_deployment(&child).await
        {
            Box::pin(end_running_operations(store, &child.id, error, depth + 1)).await;
        }
        if step.provisioning_state != "Running" {
            continue;
        }
        let ended = OperationStep {
            provisioning_state: "Failed".into(),
            status_code: Some("InternalServerError".into()),
            status_message: serde_json::to_value(StatusMessage {
                status: Some("Failed".into()),
                error: Some(error.clone()),
            })
            .ok(),
            timestamp: Timestamp::now(),
            duration_ms: None,
            ..step
        };
        // Unfenced: recovery holds the root's claim, and a nested run's holder is the dead engine it replaces.
        if let Err(e) = store.append_operation(ended, None).await {
            tracing::warn!(error = %e, "could not end an interrupted operation");
        }
    }
}

/// How far an interrupted run got: the succeeded operations in its journal and, recursively, in its nested
/// deployments' journals. Recovery compares it between takeovers.
pub(crate) async fn journal_progress(store: &dyn Store, id: &DeploymentId, depth: usize) -> u64 {
    let Ok(ops) = store.latest_operations(id).await else {
        return 0;
    };
    let mut progress = 0;
    for op in ops {
        let step = &op.step;
        if step.provisioning_state == "Succeeded" {
            progress += 1;
        }
        let target: TargetResource = step
            .target_resource
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        let is_deployment = target
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        if is_deployment
            && depth < cairn_template::expand::MAX_NESTING_DEPTH
            && let Some(child) = target.id.as_deref().and_then(deployment_key_of)
            && let Ok(Some(child)) = store.get_deployment(&child).await
        {
            progress += Box::pin(journal_progress(store, &child.id, depth + 1)).await;
        }
    }
    progress
}

/// Whether a `Create` step's resource may exist: the create succeeded, is (or was, when its engine died) under
/// way, or failed without the provider refusing it (a 4xx status says nothing was created).
fn may_exist(step: &OperationStep) -> bool {
    match step.provisioning_state.as_str() {
        "Succeeded" | "Running" => true,
        "Failed" | "Canceled" => !step
            .status_code
            .as_deref()
            .is_some_and(|code| (400..500).contains(&status_of(code))),
        _ => false,
    }
}

/// What an interrupted run touched — the resources it created, or was creating, or failed to create without
/// being refused — from its journal and its nested deployments' journals: the `outputResources` of a deployment
/// that a crash kept from finishing.
pub(crate) async fn touched_resources(
    store: &dyn Store,
    id: &DeploymentId,
    depth: usize,
) -> (Vec<DeploymentResourceReference>, Vec<DeploymentExtension>) {
    let mut resources = Vec::new();
    let mut extensions: Vec<DeploymentExtension> = Vec::new();
    let Ok(ops) = store.latest_operations(id).await else {
        return (resources, extensions);
    };
    for op in ops {
        let step = &op.step;
        if step.provisioning_operation != "Create" || !may_exist(step) {
            continue;
        }
        let target: TargetResource = step
            .target_resource
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        let is_deployment = target
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        if is_deployment && depth < cairn_template::expand::MAX_NESTING_DEPTH {
            if let Some(child) = target.id.as_deref().and_then(deployment_key_of)
                && let Ok(Some(child)) = store.get_deployment(&child).await
            {
                let (r, e) = Box::pin(touched_resources(store, &child.id, depth + 1)).await;
                resources.extend(r);
                extensions.extend(e);
            }
            continue;
        }
        match &target.extension {
            Some(ext) => {
                let reference_id = step.extension.as_ref().and_then(|e| e.reference_id.clone());
                if !extensions.iter().any(|e| e.same_identity(ext)) {
                    extensions.push(ext.clone());
                }
                resources.push(DeploymentResourceReference {
                    extension: Some(ext.reference()),
                    resource_type: target.resource_type.clone(),
                    identifiers: target.identifiers.clone(),
                    api_version: target.api_version.clone(),
                    reference_id,
                    symbolic_name_path: target.symbolic_name.clone().map(|s| vec![s]),
                    ..DeploymentResourceReference::default()
                });
            }
            None => {
                if let Some(id) = target.id {
                    resources.push(DeploymentResourceReference {
                        id: Some(id),
                        ..DeploymentResourceReference::default()
                    });
                }
            }
        }
    }
    (resources, extensions)
}

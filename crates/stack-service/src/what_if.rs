//! Deployment stack what-if (`Microsoft.Resources/deploymentStacksWhatIfResults`, 2025-07-01): runs the engine's
//! deployment what-if for the stack's template and parameters, maps the predicted resources to managed-set keys,
//! compares them with the stack's current managed set (empty when the stack does not exist yet) and reports per
//! resource `create` / `modify` / `noChange` / `unsupported` (from the deployment what-if) and `delete` / `detach`
//! (what would leave the stack, per the request's `actionOnUnmanage`), plus the deny settings and deployment
//! scope changes.
//!
//! Results live in memory in the service ([`WhatIfResults`]): they are lost on restart and `retentionInterval` is
//! echoed, not enforced. The request is kept beside the result (in memory only, never logged or returned) so a
//! `POST .../whatIf` can run it again.

use std::collections::HashMap;
use std::sync::Mutex;

use cairn_arm::models::deployment::{DeploymentWhatIf, DeploymentWhatIfProperties};
use cairn_arm::models::stack::{
    DenySettingsMode, DenyStatusMode, DeploymentStack, DeploymentStackProperties,
    DeploymentStackProvisioningState,
};
use cairn_arm::models::stack_what_if::{
    ChangeCertainty, DeploymentStacksChangeBase, DeploymentStacksChangeDelta,
    DeploymentStacksDiagnostic, DeploymentStacksWhatIfChange, DeploymentStacksWhatIfPropertyChange,
    DeploymentStacksWhatIfResourceChange, DeploymentStacksWhatIfResult, ManagementStatus,
    StackDiagnosticLevel, StackPropertyChangeType, StackResourceChangeType,
};
use cairn_arm::models::what_if::{ChangeType, WhatIfChange, WhatIfPropertyChange};
use cairn_arm::{ArmError, ResourceId};
use cairn_stacks::{
    ExtensionIdentity, ManagedResource, ManagedSet, ManagedTarget, RemovalAction, ResourceKey,
    UnmanagePolicy,
};
use serde_json::Value;

const DEPLOYMENTS_TYPE: &str = "microsoft.resources/deployments";

/// What-if results kept in memory, by scope and name (case-insensitive).
#[derive(Default)]
pub(crate) struct WhatIfResults {
    entries: Mutex<HashMap<String, StoredWhatIf>>,
}

#[derive(Clone)]
struct StoredWhatIf {
    scope: String,
    /// The request as given (with its template and parameters) for `POST .../whatIf`.
    request: DeploymentStacksWhatIfResult,
    result: DeploymentStacksWhatIfResult,
}

fn result_key(scope: &str, name: &str) -> String {
    format!(
        "{}/{}",
        cairn_store::fold_case(scope.trim_end_matches('/')),
        name.to_lowercase()
    )
}

impl WhatIfResults {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredWhatIf>> {
        // A poisoned map only means a panic elsewhere mid-insert; the data is still whole.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stores a result; `true` when it replaced one.
    fn put(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStacksWhatIfResult,
        result: DeploymentStacksWhatIfResult,
    ) -> bool {
        self.lock()
            .insert(
                result_key(scope, name),
                StoredWhatIf {
                    scope: cairn_store::fold_case(scope.trim_end_matches('/')),
                    request,
                    result,
                },
            )
            .is_some()
    }

    fn exists(&self, scope: &str, name: &str) -> bool {
        self.lock().contains_key(&result_key(scope, name))
    }

    fn get(&self, scope: &str, name: &str) -> Option<StoredWhatIf> {
        self.lock().get(&result_key(scope, name)).cloned()
    }

    fn list(&self, scope: &str) -> Vec<DeploymentStacksWhatIfResult> {
        let folded = cairn_store::fold_case(scope.trim_end_matches('/'));
        let mut value: Vec<_> = self
            .lock()
            .values()
            .filter(|entry| entry.scope == folded)
            .map(|entry| entry.result.clone())
            .collect();
        value.sort_by(|a, b| a.name.cmp(&b.name));
        value
    }

    fn remove(&self, scope: &str, name: &str) -> bool {
        self.lock().remove(&result_key(scope, name)).is_some()
    }
}

/// A stored what-if result as the PUT answers it.
#[derive(Clone, Debug)]
pub struct WhatIfAccepted {
    pub result: DeploymentStacksWhatIfResult,
    /// Whether the result resource is new (201) rather than replaced (200).
    pub created: bool,
}

/// `(scope, name)` of a stack ID.
fn split_stack_id(id: &str) -> Option<(String, String)> {
    const MARKER: &str = "/providers/microsoft.resources/deploymentstacks/";
    let at = id.to_ascii_lowercase().rfind(MARKER)?;
    let name = &id[at + MARKER.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| (id[..at].to_owned(), name.to_owned()))
}

fn internal(error: impl std::fmt::Display) -> ArmError {
    ArmError::new(500, "InternalServerError", error.to_string())
}

/// The stack properties a what-if request carries (the shared stack properties).
fn stack_properties_of(
    request: &DeploymentStacksWhatIfResult,
) -> Result<DeploymentStackProperties, ArmError> {
    let value = serde_json::to_value(&request.properties).map_err(internal)?;
    serde_json::from_value(value).map_err(|_| {
        ArmError::invalid_request_content("the what-if properties are not valid stack properties")
    })
}

/// The key a predicted change has in a managed set, with the resource as far as the what-if describes it.
fn predicted_resource(change: &WhatIfChange) -> Option<ManagedResource> {
    if let Some(id) = &change.resource_id {
        let id = ResourceId::parse(id).ok()?;
        if id.resource_type().eq_ignore_ascii_case(DEPLOYMENTS_TYPE) {
            return None;
        }
        return Some(ManagedResource::arm(id));
    }
    let extension = change.extension.as_ref()?;
    Some(ManagedResource::extensible(
        ExtensionIdentity::of(extension),
        change.resource_type.clone().unwrap_or_default(),
        change.identifiers.clone().unwrap_or(Value::Null),
    ))
}

/// The managed resource `predicted` is, if the stack manages it. A what-if may not know the `configId` an
/// extension hands out on deploy, so an extensible resource without one matches on everything else.
fn find_managed<'a>(
    managed: &'a ManagedSet,
    predicted: &ManagedResource,
) -> Option<&'a ManagedResource> {
    if let Some(found) = managed.get(predicted.key()) {
        return Some(found);
    }
    let ResourceKey::Extensible(wanted) = predicted.key() else {
        return None;
    };
    if wanted.config_id().is_some() {
        return None;
    }
    managed.iter().find(|candidate| match candidate.key() {
        ResourceKey::Extensible(have) => {
            have.extension_name() == wanted.extension_name()
                && have.extension_version() == wanted.extension_version()
                && have.resource_type() == wanted.resource_type()
                && have.canonical_identifiers() == wanted.canonical_identifiers()
        }
        ResourceKey::Arm(_) => false,
    })
}

fn lower_camel(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn property_change(change: &WhatIfPropertyChange) -> DeploymentStacksWhatIfPropertyChange {
    DeploymentStacksWhatIfPropertyChange {
        path: change.path.clone(),
        change_type: StackPropertyChangeType::parse(&lower_camel(
            change.property_change_type.as_str(),
        )),
        before: change.before.clone(),
        after: change.after.clone(),
        children: change
            .children
            .as_ref()
            .map(|children| children.iter().map(property_change).collect()),
    }
}

/// Top-level differences between two JSON objects (scalars and whole sub-values).
fn value_delta(before: &Value, after: &Value) -> Vec<DeploymentStacksWhatIfPropertyChange> {
    let empty = serde_json::Map::new();
    let before_map = before.as_object().unwrap_or(&empty);
    let after_map = after.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = before_map.keys().chain(after_map.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (old, new) = (before_map.get(key), after_map.get(key));
            let change_type = match (old, new) {
                (Some(a), Some(b)) if a == b => return None,
                (Some(_), Some(_)) => StackPropertyChangeType::Modify,
                (None, Some(_)) => StackPropertyChangeType::Create,
                (Some(_), None) => StackPropertyChangeType::Delete,
                (None, None) => return None,
            };
            Some(DeploymentStacksWhatIfPropertyChange {
                path: key.clone(),
                change_type,
                before: old.cloned(),
                after: new.cloned(),
                children: None,
            })
        })
        .collect()
}

/// The deny status a resource would get under `mode` (cairn applies no deny assignments).
fn deny_status_for(resource: &ManagedResource, mode: &DenySettingsMode) -> DenyStatusMode {
    match (resource.target(), mode) {
        (ManagedTarget::Extensible { .. }, _) => DenyStatusMode::NotSupported,
        (ManagedTarget::Arm(_), DenySettingsMode::None) => DenyStatusMode::None,
        (ManagedTarget::Arm(_), _) => DenyStatusMode::NotSupported,
    }
}

fn reference_fields(resource: &ManagedResource, change: &mut DeploymentStacksWhatIfResourceChange) {
    let reference = resource.to_reference();
    change.id = reference.id;
    change.extension = reference.extension;
    change.resource_type = reference.resource_type;
    change.identifiers = reference.identifiers;
    change.api_version = reference.api_version;
}

/// What the comparison found, before it is put in a result resource.
pub(crate) struct ComputedChanges {
    pub(crate) changes: DeploymentStacksWhatIfChange,
    pub(crate) diagnostics: Vec<DeploymentStacksDiagnostic>,
}

/// Compares the deployment what-if's `predicted` changes with the stack's `managed` set.
pub(crate) fn compare(
    predicted: &[WhatIfChange],
    managed: &ManagedSet,
    current: Option<&DeploymentStackProperties>,
    next: &DeploymentStackProperties,
    claimed_elsewhere: &dyn Fn(&ResourceKey) -> Option<(String, bool)>,
) -> Result<ComputedChanges, ArmError> {
    let policy = UnmanagePolicy::from_action(&next.action_on_unmanage)
        .map_err(|e| ArmError::from_detail(400, e.to_error_detail()))?;
    let mut resource_changes = Vec::new();
    let mut diagnostics = Vec::new();
    let mut still_managed: Vec<ResourceKey> = Vec::new();
    for change in predicted {
        let (stack_change, certainty) = match &change.change_type {
            ChangeType::Create => (StackResourceChangeType::Create, ChangeCertainty::Definite),
            ChangeType::Modify => (StackResourceChangeType::Modify, ChangeCertainty::Definite),
            ChangeType::Deploy => (StackResourceChangeType::Modify, ChangeCertainty::Potential),
            ChangeType::NoChange => (StackResourceChangeType::NoChange, ChangeCertainty::Definite),
            // Not in the template (incremental mode leaves it alone): the stack side is decided below.
            ChangeType::Ignore | ChangeType::Delete => continue,
            ChangeType::Unsupported | ChangeType::Other(_) => (
                StackResourceChangeType::Unsupported,
                ChangeCertainty::Potential,
            ),
        };
        let Some(resource) = predicted_resource(change) else {
            continue;
        };
        let before = find_managed(managed, &resource);
        if let Some(before) = before {
            still_managed.push(before.key().clone());
        } else if let Some((stack_id, false)) = claimed_elsewhere(resource.key()) {
            diagnostics.push(DeploymentStacksDiagnostic {
                level: StackDiagnosticLevel::Error,
                code: "DeploymentStackResourceManagedByAnotherStack".into(),
                message: format!(
                    "The resource '{}' is managed by the deployment stack '{stack_id}', which does not share it.",
                    resource.key()
                ),
                target: Some(resource.key().to_string()),
                additional_info: None,
            });
        }
        let mut item = DeploymentStacksWhatIfResourceChange::new(stack_change, certainty);
        reference_fields(before.unwrap_or(&resource), &mut item);
        if item.api_version.is_none()
            && let Some(after) = change.after.as_ref().and_then(|a| a.get("apiVersion"))
        {
            item.api_version = after.as_str().map(str::to_owned);
        }
        item.deployment_id = change.deployment_id.clone();
        item.symbolic_name = change.symbolic_name.clone();
        item.unsupported_reason = change.unsupported_reason.clone();
        item.management_status_change = Some(DeploymentStacksChangeBase {
            before: Some(if before.is_some() {
                ManagementStatus::Managed
            } else {
                ManagementStatus::Unmanaged
            }),
            after: Some(ManagementStatus::Managed),
        });
        item.deny_status_change = Some(DeploymentStacksChangeBase {
            before: before.and_then(|b| b.deny_status.clone()),
            after: Some(deny_status_for(&resource, &next.deny_settings.mode)),
        });
        if change.before.is_some() || change.after.is_some() || change.delta.is_some() {
            item.resource_configuration_changes = Some(DeploymentStacksChangeDelta {
                before: change.before.clone(),
                after: change.after.clone(),
                delta: change
                    .delta
                    .as_ref()
                    .map(|delta| delta.iter().map(property_change).collect()),
            });
        }
        resource_changes.push(item);
    }
    for resource in managed {
        if still_managed.contains(resource.key()) {
            continue;
        }
        let action = match claimed_elsewhere(resource.key()) {
            Some(_) => RemovalAction::Detach,
            None => policy.for_bucket(resource.bucket()),
        };
        let change_type = match action {
            RemovalAction::Delete => StackResourceChangeType::Delete,
            RemovalAction::Detach => StackResourceChangeType::Detach,
        };
        let mut item =
            DeploymentStacksWhatIfResourceChange::new(change_type, ChangeCertainty::Definite);
        reference_fields(resource, &mut item);
        item.symbolic_name = resource.symbolic_name().map(str::to_owned);
        item.management_status_change = Some(DeploymentStacksChangeBase {
            before: Some(ManagementStatus::Managed),
            after: match action {
                RemovalAction::Delete => None,
                RemovalAction::Detach => Some(ManagementStatus::Unmanaged),
            },
        });
        item.deny_status_change = Some(DeploymentStacksChangeBase {
            before: resource.deny_status.clone(),
            after: None,
        });
        resource_changes.push(item);
    }
    let deny_before = current.map(|c| c.deny_settings.clone());
    let deny_delta = value_delta(
        &deny_before
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(internal)?
            .unwrap_or(Value::Null),
        &serde_json::to_value(&next.deny_settings).map_err(internal)?,
    );
    let scope_before = current.and_then(|c| c.deployment_scope.clone());
    let changes = DeploymentStacksWhatIfChange {
        resource_changes,
        deny_settings_change: DeploymentStacksChangeDelta {
            before: deny_before,
            after: Some(next.deny_settings.clone()),
            delta: (!deny_delta.is_empty()).then_some(deny_delta),
        },
        deployment_scope_change: Some(DeploymentStacksChangeBase {
            before: scope_before,
            after: next.deployment_scope.clone(),
        }),
    };
    if let Some(current) = current {
        let before = serde_json::to_value(&current.action_on_unmanage).map_err(internal)?;
        let after = serde_json::to_value(&next.action_on_unmanage).map_err(internal)?;
        if before != after {
            diagnostics.push(DeploymentStacksDiagnostic {
                level: StackDiagnosticLevel::Info,
                code: "ActionOnUnmanageChanged".into(),
                message: format!("actionOnUnmanage changes from {before} to {after}."),
                target: Some("properties.actionOnUnmanage".into()),
                additional_info: None,
            });
        }
        let params_before = current
            .parameters
            .as_ref()
            .map(|p| p.0.keys().map(|k| k.to_lowercase()).collect::<Vec<_>>());
        let params_after = next
            .parameters
            .as_ref()
            .map(|p| p.0.keys().map(|k| k.to_lowercase()).collect::<Vec<_>>());
        if params_before != params_after {
            diagnostics.push(DeploymentStacksDiagnostic {
                level: StackDiagnosticLevel::Info,
                code: "ParametersChanged".into(),
                message: "The set of parameters given to the stack changes.".into(),
                target: Some("properties.parameters".into()),
                additional_info: None,
            });
        }
    }
    Ok(ComputedChanges {
        changes,
        diagnostics,
    })
}

impl crate::StackService {
    /// Runs a stack what-if (`PUT .../deploymentStacksWhatIfResults/{name}`) and stores its result. `scope` and
    /// `name` address the result; the stack is `properties.deploymentStackResourceId` (it may not exist yet).
    pub async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStacksWhatIfResult,
    ) -> Result<WhatIfAccepted, ArmError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let result = self.compute_what_if(scope, name, &request).await?;
        let replaced = self
            .inner
            .what_ifs
            .put(scope, name, request, result.clone());
        Ok(WhatIfAccepted {
            result,
            created: !replaced,
        })
    }

    /// Runs a stored what-if again (`POST .../whatIf`); 404 when there is no such result.
    pub async fn rerun_what_if(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentStacksWhatIfResult, ArmError> {
        let stored = self
            .inner
            .what_ifs
            .get(scope, name)
            .ok_or_else(|| what_if_not_found(name))?;
        let result = self.compute_what_if(scope, name, &stored.request).await?;
        if self.inner.what_ifs.exists(scope, name) {
            self.inner
                .what_ifs
                .put(scope, name, stored.request, result.clone());
        }
        Ok(result)
    }

    /// A stored what-if result; 404 `DeploymentStacksWhatIfResultNotFound`.
    pub fn get_what_if(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentStacksWhatIfResult, ArmError> {
        self.inner
            .what_ifs
            .get(scope, name)
            .map(|stored| stored.result)
            .ok_or_else(|| what_if_not_found(name))
    }

    /// The stored what-if results of a scope, by name.
    pub fn list_what_ifs(&self, scope: &str) -> Vec<DeploymentStacksWhatIfResult> {
        self.inner.what_ifs.list(scope)
    }

    /// Forgets a what-if result; `false` when there was none.
    pub fn delete_what_if(&self, scope: &str, name: &str) -> bool {
        self.inner.what_ifs.remove(scope, name)
    }

    async fn compute_what_if(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStacksWhatIfResult,
    ) -> Result<DeploymentStacksWhatIfResult, ArmError> {
        let result_id = format!(
            "{}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/{name}",
            scope.trim_end_matches('/')
        );
        ResourceId::parse(&result_id).map_err(|e| e.to_arm_error(&result_id))?;
        let stack_resource_id = request.properties.deployment_stack_resource_id.clone();
        let (stack_scope, stack_name) = split_stack_id(&stack_resource_id).ok_or_else(|| {
            ArmError::new(
                400,
                "InvalidDeploymentStackResourceId",
                "'deploymentStackResourceId' must be the ID of a deployment stack \
                 ('{scope}/providers/Microsoft.Resources/deploymentStacks/{name}').",
            )
            .with_target("properties.deploymentStackResourceId")
        })?;
        if request.properties.retention_interval.trim().is_empty() {
            return Err(ArmError::new(
                400,
                "InvalidRetentionInterval",
                "'retentionInterval' is required (ISO 8601, e.g. 'P7D').",
            )
            .with_target("properties.retentionInterval"));
        }
        let mut next = stack_properties_of(request)?;
        crate::validate_body(&next)?;
        let deployment_scope = next
            .deployment_scope
            .clone()
            .unwrap_or_else(|| stack_scope.trim_end_matches('/').to_owned());
        next.deployment_scope = Some(deployment_scope.clone());
        let existing = self.load(&stack_scope, &stack_name).await?;
        let mut stack =
            DeploymentStack::for_id(&crate::stack_id(&stack_scope, &stack_name)?, next.clone());
        stack.location = request.location.clone();
        let deployment = crate::deployment_of(&stack);
        let what_if_properties: DeploymentWhatIfProperties =
            serde_json::from_value(serde_json::to_value(&deployment.properties).map_err(internal)?)
                .map_err(internal)?;
        let predicted = self
            .inner
            .engine
            .what_if(
                &deployment_scope,
                &stack_name,
                DeploymentWhatIf {
                    location: deployment.location.clone(),
                    properties: what_if_properties,
                },
            )
            .await
            .map_err(|e| e.to_arm())?;
        if let Some(error) = predicted.error {
            return Err(ArmError::from_detail(400, error));
        }
        let properties = predicted.properties.unwrap_or_default();
        let mut changes: Vec<WhatIfChange> = properties.changes.unwrap_or_default();
        changes.extend(properties.potential_changes.unwrap_or_default());
        let (managed, current, last_modified) = match &existing {
            Some((record, current, state)) => (
                state.managed_set.clone(),
                Some(current.properties.clone()),
                Some(cairn_arm::time::format_timestamp(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::from_millis(
                            u64::try_from(record.updated_at.unix_millis()).unwrap_or(0),
                        ),
                )),
            ),
            None => (ManagedSet::new(), None, None),
        };
        let ownership = self.ownership(&stack_scope, &stack_name).await?;
        let claimed_elsewhere = |key: &ResourceKey| {
            let claims = ownership.claims(key);
            claims.first().map(|first| {
                (
                    first.stack_id.clone(),
                    claims.iter().all(|claim| claim.shared),
                )
            })
        };
        let computed = compare(
            &changes,
            &managed,
            current.as_ref(),
            &next,
            &claimed_elsewhere,
        )?;
        let mut diagnostics = computed.diagnostics;
        for diagnostic in properties.diagnostics.unwrap_or_default() {
            let value = serde_json::to_value(&diagnostic).map_err(internal)?;
            let level = value
                .get("level")
                .and_then(Value::as_str)
                .map(lower_camel)
                .unwrap_or_else(|| "info".into());
            diagnostics.push(DeploymentStacksDiagnostic {
                level: StackDiagnosticLevel::parse(&level),
                code: value
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                message: value
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                target: value
                    .get("target")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                additional_info: None,
            });
        }
        let mut result = DeploymentStacksWhatIfResult {
            id: Some(result_id),
            name: Some(name.to_owned()),
            resource_type: Some(DeploymentStacksWhatIfResult::TYPE.to_owned()),
            system_data: None,
            location: request.location.clone(),
            tags: request.tags.clone(),
            properties: request.properties.clone(),
        };
        let p = &mut result.properties;
        // Like a stack record, a result keeps no template and no secure parameter values.
        p.template = None;
        p.parameters = crate::public_parameters(&next);
        p.bypass_stack_out_of_sync_error = None;
        p.deployment_scope = Some(deployment_scope);
        p.provisioning_state = Some(DeploymentStackProvisioningState::Succeeded);
        p.correlation_id = Some(uuid::Uuid::new_v4().to_string());
        p.deployment_stack_last_modified = last_modified;
        p.changes = Some(computed.changes);
        p.diagnostics = Some(diagnostics);
        p.error = None;
        Ok(result)
    }
}

fn what_if_not_found(name: &str) -> ArmError {
    ArmError::new(
        404,
        "DeploymentStacksWhatIfResultNotFound",
        format!("The deployment stack what-if result '{name}' could not be found."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_ids_split_into_scope_and_name() {
        assert_eq!(
            split_stack_id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/st"
            ),
            Some(("/subscriptions/s/resourceGroups/rg".into(), "st".into()))
        );
        assert_eq!(split_stack_id("/subscriptions/s/resourceGroups/rg"), None);
    }

    #[test]
    fn value_delta_lists_top_level_changes() {
        let delta = value_delta(
            &serde_json::json!({"mode": "none", "same": 1, "gone": true}),
            &serde_json::json!({"mode": "denyDelete", "same": 1, "new": [1]}),
        );
        let paths: Vec<_> = delta
            .iter()
            .map(|d| (d.path.as_str(), d.change_type.as_str()))
            .collect();
        assert_eq!(
            paths,
            vec![("gone", "delete"), ("mode", "modify"), ("new", "create")]
        );
    }

    #[test]
    fn removed_resources_follow_action_on_unmanage() {
        let id = ResourceId::parse(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v",
        )
        .expect("id");
        let managed = ManagedSet::from_resources([ManagedResource::arm(id)]);
        for (action, expected) in [("delete", "delete"), ("detach", "detach")] {
            let next: DeploymentStackProperties = serde_json::from_value(serde_json::json!({
                "actionOnUnmanage": {"resources": action}, "denySettings": {"mode": "none"}
            }))
            .expect("properties");
            let computed = compare(&[], &managed, Some(&next), &next, &|_| None).expect("compare");
            assert_eq!(
                computed.changes.resource_changes[0].change_type.as_str(),
                expected
            );
        }
    }
}

//! The pure part of a stack what-if: the deployment what-if's predicted changes compared with the stack's managed
//! set, per resource (`create` / `modify` / `noChange` / `unsupported`, and `delete` / `detach` for what would leave
//! the stack per `actionOnUnmanage`), plus the deny settings and deployment scope changes. An extension resource that
//! exists and no stack manages is "exists, unmanaged": a `DeploymentStackResourceExistsUnmanaged` diagnostic, and
//! it stays unmanaged unless the request adopts existing resources.

use cairn_arm::models::stack::{DenySettingsMode, DenyStatusMode, DeploymentStackProperties};
use cairn_arm::models::stack_what_if::{
    ChangeCertainty, DeploymentStacksChangeBase, DeploymentStacksChangeDelta,
    DeploymentStacksDiagnostic, DeploymentStacksWhatIfChange, DeploymentStacksWhatIfPropertyChange,
    DeploymentStacksWhatIfResourceChange, ManagementStatus, StackDiagnosticLevel,
    StackPropertyChangeType, StackResourceChangeType,
};
use cairn_arm::models::what_if::{ChangeType, WhatIfChange, WhatIfPropertyChange};
use cairn_arm::{ArmError, ResourceId};
use cairn_engine::RESOURCE_EXISTS_UNMANAGED;
use cairn_stacks::{
    ExtensionIdentity, ManagedResource, ManagedSet, ManagedTarget, RemovalAction, ResourceKey,
    UnmanagePolicy,
};
use serde_json::Value;

const DEPLOYMENTS_TYPE: &str = "microsoft.resources/deployments";

/// A 500 `InternalServerError` with `error`'s message (for (de)serialising ARM models, which does not fail on them).
pub(crate) fn internal(error: impl std::fmt::Display) -> ArmError {
    ArmError::new(500, "InternalServerError", error.to_string())
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
                && have.resource_type() == wanted.resource_type()
                && have.canonical_identifiers() == wanted.canonical_identifiers()
        }
        ResourceKey::Arm(_) => false,
    })
}

pub(crate) fn lower_camel(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(crate) fn property_change(
    change: &WhatIfPropertyChange,
) -> DeploymentStacksWhatIfPropertyChange {
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
    let resource_policy =
        cairn_stacks::ResourcePolicy::of_stack(next, next.bypass_protection.unwrap_or(false))
            .map_err(|detail| ArmError::from_detail(400, detail))?;
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
        // An extension resource the deployment finds existing (it would modify it, or change nothing) that no stack
        // manages: the stack's deployment takes it over only with `adoptExistingResources`, else leaves it alone.
        let exists_unmanaged = before.is_none()
            && matches!(resource.target(), ManagedTarget::Extensible { .. })
            && matches!(
                change.change_type,
                ChangeType::Modify | ChangeType::NoChange
            )
            && claimed_elsewhere(resource.key()).is_none();
        let adopt = next.adopt_existing_resources.unwrap_or(false);
        if exists_unmanaged {
            diagnostics.push(DeploymentStacksDiagnostic {
                level: if adopt {
                    StackDiagnosticLevel::Info
                } else {
                    StackDiagnosticLevel::Warning
                },
                code: RESOURCE_EXISTS_UNMANAGED.into(),
                message: if adopt {
                    format!(
                        "The resource '{}' exists, unmanaged (no deployment stack manages it): the stack will take \
                         it over ('adoptExistingResources').",
                        resource.key()
                    )
                } else {
                    format!(
                        "The resource '{}' exists, unmanaged (no deployment stack manages it): the stack's \
                         deployment will leave it unchanged and fail it, unless 'adoptExistingResources' is true.",
                        resource.key()
                    )
                },
                target: Some(resource.key().to_string()),
                additional_info: None,
            });
        }
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
            after: Some(if exists_unmanaged && !adopt {
                ManagementStatus::Unmanaged
            } else {
                ManagementStatus::Managed
            }),
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
            None if resource_policy.retaining(resource.key()).is_some() => RemovalAction::Detach,
            None => policy.for_bucket(resource.bucket()),
        };
        if action == RemovalAction::Delete
            && let Some(pattern) = resource_policy.protecting(resource.key())
        {
            diagnostics.push(DeploymentStacksDiagnostic {
                level: StackDiagnosticLevel::Error,
                code: cairn_stacks::error::codes::RESOURCE_PROTECTED.into(),
                message: format!(
                    "The resource '{}' would be deleted, but the pattern '{}' protects it: the operation will be \
                     refused before it deletes anything, unless it says 'bypassProtection'.",
                    resource.key(),
                    pattern.as_str()
                ),
                target: Some(resource.key().to_string()),
                additional_info: None,
            });
        }
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
        let params_before = current.parameters.as_ref().map(|p| {
            p.0.keys()
                .map(|k| k.to_lowercase())
                .collect::<std::collections::BTreeSet<_>>()
        });
        // Compared with what the stack would keep of them (secure values dropped, Key Vault references kept), as
        // the current set is what the stack kept: a secure value given again is no change of the set.
        let params_after = cairn_stacks::kept_parameters(next).map(|p| {
            p.0.keys()
                .map(|k| k.to_lowercase())
                .collect::<std::collections::BTreeSet<_>>()
        });
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A stack keeps a secure parameter given as a Key Vault reference (the reference, not a value), so a what-if
    /// with the same parameters reports no `ParametersChanged`; a secure value is kept by neither side.
    #[test]
    fn key_vault_referenced_parameters_are_kept_and_no_change() {
        let request: DeploymentStackProperties = serde_json::from_value(serde_json::json!({
            "actionOnUnmanage": {"resources": "delete"}, "denySettings": {"mode": "none"},
            "template": {"parameters": {
                "appName": {"type": "string"},
                "readerPassword": {"type": "securestring"},
                "adminPassword": {"type": "securestring"}
            }},
            "parameters": {
                "appName": {"value": "shop"},
                "readerPassword": {"reference": {
                    "keyVault": {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv"},
                    "secretName": "shop-reader"
                }},
                "adminPassword": {"value": "not kept"}
            }
        }))
        .expect("properties");
        let kept = cairn_stacks::kept_parameters(&request).expect("parameters");
        assert_eq!(
            serde_json::to_value(&kept).expect("json"),
            serde_json::json!({
                "appName": {"value": "shop"},
                "readerPassword": {"reference": {
                    "keyVault": {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv"},
                    "secretName": "shop-reader"
                }}
            })
        );
        let mut stored = request.clone();
        stored.parameters = Some(kept);
        let computed =
            compare(&[], &ManagedSet::new(), Some(&stored), &request, &|_| None).expect("compare");
        let codes: Vec<&str> = computed
            .diagnostics
            .iter()
            .map(|d| d.code.as_str())
            .collect();
        assert!(!codes.contains(&"ParametersChanged"), "{codes:?}");
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

    /// A template moving its widgets to a new extension version (with or without the `configId` the what-if
    /// could learn) modifies the managed resource: no delete, no create.
    #[test]
    fn an_extension_upgrade_is_a_modify_not_a_delete_and_create() {
        let mut managed_widget = ManagedResource::extensible(
            ExtensionIdentity {
                name: "Widgets".into(),
                version: "1.0.0".into(),
                config_id: Some("c1".into()),
            },
            "widget",
            serde_json::json!({"name": "a"}),
        );
        managed_widget.api_version = Some("v1".into());
        let managed = ManagedSet::from_resources([managed_widget]);
        let next: DeploymentStackProperties = serde_json::from_value(serde_json::json!({
            "actionOnUnmanage": {"resources": "delete", "resourceGroups": "delete",
                                 "managementGroups": "delete"},
            "denySettings": {"mode": "none"}
        }))
        .expect("properties");
        for config_id in [Some("c1"), None] {
            let mut predicted = WhatIfChange::new(ChangeType::Modify);
            predicted.resource_type = Some("widget".into());
            predicted.identifiers = Some(serde_json::json!({"name": "a"}));
            predicted.extension = Some(serde_json::from_value(
                serde_json::json!({"name": "Widgets", "version": "1.1.0", "configId": config_id}),
            )
            .expect("extension"));
            let computed =
                compare(&[predicted], &managed, Some(&next), &next, &|_| None).expect("compare");
            let kinds: Vec<&str> = computed
                .changes
                .resource_changes
                .iter()
                .map(|c| c.change_type.as_str())
                .collect();
            assert_eq!(kinds, ["modify"], "configId {config_id:?}");
        }
    }

    /// An extension resource the deployment would modify (so it exists) that no stack manages is "exists,
    /// unmanaged": a warning, and it stays unmanaged unless the request adopts; one another stack manages is not.
    #[test]
    fn an_existing_unmanaged_extension_resource_is_reported_and_adopted_only_when_asked() {
        let predicted = |name: &str, change_type: ChangeType| {
            let mut change = WhatIfChange::new(change_type);
            change.resource_type = Some("widget".into());
            change.identifiers = Some(serde_json::json!({ "name": name }));
            change.extension = Some(
                serde_json::from_value(
                    serde_json::json!({"name": "Widgets", "version": "1.0.0", "configId": "c1"}),
                )
                .expect("extension"),
            );
            change
        };
        let changes = [
            predicted("found", ChangeType::Modify),
            predicted("same", ChangeType::NoChange),
            predicted("new", ChangeType::Create),
            predicted("shared", ChangeType::Modify),
        ];
        let claimed = |key: &ResourceKey| {
            key.to_string()
                .contains("shared")
                .then(|| ("other".to_owned(), true))
        };
        for adopt in [None, Some(true)] {
            let mut next: DeploymentStackProperties = serde_json::from_value(serde_json::json!({
                "actionOnUnmanage": {"resources": "delete"}, "denySettings": {"mode": "none"}
            }))
            .expect("properties");
            next.adopt_existing_resources = adopt;
            let computed =
                compare(&changes, &ManagedSet::new(), None, &next, &claimed).expect("compare");
            let after: Vec<(String, &str)> = computed
                .changes
                .resource_changes
                .iter()
                .map(|c| {
                    (
                        c.identifiers.as_ref().unwrap()["name"]
                            .as_str()
                            .unwrap()
                            .to_owned(),
                        c.management_status_change
                            .as_ref()
                            .and_then(|m| m.after.as_ref())
                            .map(|a| a.as_str())
                            .unwrap_or_default(),
                    )
                })
                .collect();
            let taken = if adopt.is_some() {
                "managed"
            } else {
                "unmanaged"
            };
            assert_eq!(
                after,
                [
                    ("found".to_owned(), taken),
                    ("same".to_owned(), taken),
                    ("new".to_owned(), "managed"),
                    ("shared".to_owned(), "managed"),
                ]
            );
            let reported: Vec<(&str, &str)> = computed
                .diagnostics
                .iter()
                .map(|d| (d.code.as_str(), d.level.as_str()))
                .collect();
            let level = if adopt.is_some() { "info" } else { "warning" };
            assert_eq!(
                reported,
                [
                    (RESOURCE_EXISTS_UNMANAGED, level),
                    (RESOURCE_EXISTS_UNMANAGED, level)
                ]
            );
            for diagnostic in &computed.diagnostics {
                assert!(diagnostic.message.contains("exists, unmanaged"));
                // The message is one line however the source wraps it.
                assert!(
                    !diagnostic.message.contains("  "),
                    "stray spaces: {}",
                    diagnostic.message
                );
            }
        }
    }
}

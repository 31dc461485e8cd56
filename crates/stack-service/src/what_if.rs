//! Deployment stack what-if (`Microsoft.Resources/deploymentStacksWhatIfResults`, 2025-07-01): runs the engine's
//! deployment what-if for the stack's template and parameters, maps the predicted resources to managed-set keys,
//! compares them with the stack's current managed set (empty when the stack does not exist yet) and reports per
//! resource `create` / `modify` / `noChange` / `unsupported` (from the deployment what-if) and `delete` / `detach`
//! (what would leave the stack, per the request's `actionOnUnmanage`), plus the deny settings and deployment
//! scope changes.
//!
//! Results are persisted in the store (`StackWhatIfStore`), so they survive a restart, and kept for the request's
//! `retentionInterval` (an ISO 8601 duration: `P7D`, `PT12H`, `P1W`, ...; see [`parse_retention_interval`]) from
//! when they were computed: after that GET and `POST .../whatIf` answer 404, LIST leaves them out, DELETE finds
//! nothing, and [`crate::StackService::purge_expired_what_ifs`] (the server's periodic sweep) removes them. A
//! `POST .../whatIf` computes the result again and starts a new retention interval.
//!
//! The request is stored beside the result so `POST .../whatIf` can run it again. It holds the template and the
//! parameter values, secure ones included, so the store keeps it sealed with its data key and deletes it with the
//! result; it is never logged or returned. The result keeps no template and no secure parameter values.

use std::time::Duration;

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
use cairn_store::{
    ExposeSecret, NewStackWhatIf, Page, PageRequest, SecretString, StackWhatIfRecord, Timestamp,
};
use serde_json::Value;

use crate::request::{
    deployment_of, link_without_credentials, parameters_link_without_credentials,
    public_parameters, stack_id, validate_body,
};
use crate::service::{StackService, store_error};

const DEPLOYMENTS_TYPE: &str = "microsoft.resources/deployments";

/// Why a `retentionInterval` is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntervalError {
    /// Not an ISO 8601 duration of the accepted form.
    Syntax,
    /// Years or months: they have no fixed length.
    CalendarUnit,
    /// Zero (or less than a millisecond): nothing could be retained.
    Zero,
    /// Longer than a timestamp can hold.
    TooLong,
}

impl IntervalError {
    fn message(self, text: &str) -> String {
        // Echo a bounded prefix only: the text is the client's own, but need not be short.
        let shown: String = text.chars().take(40).collect();
        let reason = match self {
            IntervalError::Syntax => "is not an ISO 8601 duration",
            IntervalError::CalendarUnit => {
                "uses years or months, which have no fixed length; use weeks, days, hours, minutes or seconds"
            }
            IntervalError::Zero => "must be longer than zero",
            IntervalError::TooLong => "is too long",
        };
        format!(
            "The retentionInterval '{shown}' {reason} (expected a duration such as 'P7D', 'PT12H', 'P1W' or \
             'P1DT6H30M')."
        )
    }
}

/// One designator of a duration: its letter and length in milliseconds (`None`: a calendar unit).
type Unit = (char, Option<u128>);

const DATE_UNITS: &[Unit] = &[
    ('Y', None),
    ('M', None),
    ('W', Some(7 * 86_400_000)),
    ('D', Some(86_400_000)),
];
const TIME_UNITS: &[Unit] = &[
    ('H', Some(3_600_000)),
    ('M', Some(60_000)),
    ('S', Some(1_000)),
];

/// Parses an ISO 8601 duration of weeks, days, hours, minutes and seconds: `P[nW][nD][T[nH][nM][nS]]`, at least
/// one component, designators in that order, a decimal fraction (`.` or `,`) on the last component only, letters
/// in either case. Years and months are refused (no fixed length), as are zero and signs. Precision is the
/// millisecond.
pub(crate) fn parse_retention_interval(text: &str) -> Result<Duration, IntervalError> {
    let upper = text.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix('P').ok_or(IntervalError::Syntax)?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) if !time.is_empty() => (date, Some(time)),
        Some(_) => return Err(IntervalError::Syntax),
        None => (rest, None),
    };
    let mut components = components_of(date, DATE_UNITS)?;
    if let Some(time) = time {
        components.extend(components_of(time, TIME_UNITS)?);
    }
    if components.is_empty() {
        return Err(IntervalError::Syntax);
    }
    let last = components.len() - 1;
    let mut total: u128 = 0;
    for (index, (number, unit)) in components.into_iter().enumerate() {
        let (whole, fraction) = match number.split_once(['.', ',']) {
            Some((whole, fraction)) if index == last && !fraction.is_empty() => (whole, fraction),
            Some(_) => return Err(IntervalError::Syntax),
            None => (number, ""),
        };
        let Some(unit_millis) = unit.1 else {
            return Err(IntervalError::CalendarUnit);
        };
        let whole: u128 = if whole.is_empty() {
            return Err(IntervalError::Syntax);
        } else if whole.len() > 30 {
            return Err(IntervalError::TooLong);
        } else {
            whole.parse().map_err(|_| IntervalError::Syntax)?
        };
        // Digits past the ninth are below a millisecond of any unit that fits in a timestamp.
        let kept = &fraction[..fraction.len().min(9)];
        let fraction_millis = if kept.is_empty() {
            0
        } else {
            let digits: u128 = kept.parse().map_err(|_| IntervalError::Syntax)?;
            digits * unit_millis / 10u128.pow(u32::try_from(kept.len()).unwrap_or(9))
        };
        total = whole
            .checked_mul(unit_millis)
            .and_then(|millis| millis.checked_add(fraction_millis))
            .and_then(|millis| millis.checked_add(total))
            .ok_or(IntervalError::TooLong)?;
    }
    if total == 0 {
        return Err(IntervalError::Zero);
    }
    let millis = u64::try_from(total)
        .ok()
        .filter(|millis| i64::try_from(*millis).is_ok())
        .ok_or(IntervalError::TooLong)?;
    Ok(Duration::from_millis(millis))
}

/// The `(number, unit)` components of one part of a duration, checking designator order.
fn components_of<'a>(
    part: &'a str,
    units: &'static [Unit],
) -> Result<Vec<(&'a str, Unit)>, IntervalError> {
    let mut components = Vec::new();
    let mut next_unit = 0;
    let mut rest = part;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .ok_or(IntervalError::Syntax)?;
        let (number, tail) = rest.split_at(end);
        let mut chars = tail.chars();
        let designator = chars.next().ok_or(IntervalError::Syntax)?;
        let position = units[next_unit..]
            .iter()
            .position(|(letter, _)| *letter == designator)
            .ok_or(IntervalError::Syntax)?;
        if number.is_empty() {
            return Err(IntervalError::Syntax);
        }
        components.push((number, units[next_unit + position]));
        next_unit += position + 1;
        rest = chars.as_str();
    }
    Ok(components)
}

/// The request's `retentionInterval` as a duration; 400 `InvalidRetentionInterval` when missing or malformed.
fn retention_interval(request: &DeploymentStacksWhatIfResult) -> Result<Duration, ArmError> {
    let text = &request.properties.retention_interval;
    let invalid = |message: String| {
        ArmError::new(400, "InvalidRetentionInterval", message)
            .with_target("properties.retentionInterval")
    };
    if text.trim().is_empty() {
        return Err(invalid(
            "'retentionInterval' is required (ISO 8601, e.g. 'P7D').".into(),
        ));
    }
    parse_retention_interval(text).map_err(|error| invalid(error.message(text)))
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

fn stored_result(record: StackWhatIfRecord) -> Result<DeploymentStacksWhatIfResult, ArmError> {
    serde_json::from_value(record.result).map_err(|_| {
        ArmError::new(
            500,
            "StoreDataCorrupt",
            format!(
                "The stored what-if result '{}' cannot be read.",
                record.name
            ),
        )
    })
}

impl StackService {
    /// Runs a stack what-if (`PUT .../deploymentStacksWhatIfResults/{name}`) and stores its result, with the
    /// request, for `retentionInterval`. `scope` and `name` address the result; the stack is
    /// `properties.deploymentStackResourceId` (it may not exist yet).
    pub async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStacksWhatIfResult,
    ) -> Result<WhatIfAccepted, ArmError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let retention = retention_interval(&request)?;
        let result = self.compute_what_if(scope, name, &request).await?;
        let replaced = self
            .store_what_if(scope, name, &request, &result, retention)
            .await?;
        Ok(WhatIfAccepted {
            result,
            created: !replaced,
        })
    }

    /// Runs a stored what-if again (`POST .../whatIf`) and stores the new result for a new retention interval;
    /// 404 when there is no such result or it expired.
    pub async fn rerun_what_if(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentStacksWhatIfResult, ArmError> {
        let stored = self
            .inner
            .store
            .get_stack_what_if_request(scope, name, Timestamp::now())
            .await
            .map_err(store_error)?
            .ok_or_else(|| what_if_not_found(name))?;
        // The request is this service's own serialisation; a parse error could quote a value, so say nothing.
        let request: DeploymentStacksWhatIfResult = serde_json::from_str(stored.expose_secret())
            .map_err(|_| {
                ArmError::new(
                    500,
                    "StoreDataCorrupt",
                    format!("The stored request of what-if result '{name}' cannot be read."),
                )
            })?;
        let retention = retention_interval(&request)?;
        let result = self.compute_what_if(scope, name, &request).await?;
        // Deleted (or expired) while it ran: answer the result, but do not bring the resource back.
        if self
            .inner
            .store
            .get_stack_what_if(scope, name, Timestamp::now())
            .await
            .map_err(store_error)?
            .is_some()
        {
            self.store_what_if(scope, name, &request, &result, retention)
                .await?;
        }
        Ok(result)
    }

    /// A stored, unexpired what-if result; 404 `DeploymentStacksWhatIfResultNotFound`.
    pub async fn get_what_if(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentStacksWhatIfResult, ArmError> {
        let record = self
            .inner
            .store
            .get_stack_what_if(scope, name, Timestamp::now())
            .await
            .map_err(store_error)?
            .ok_or_else(|| what_if_not_found(name))?;
        stored_result(record)
    }

    /// The unexpired what-if results of a scope, by name, a page at a time.
    pub async fn list_what_ifs(
        &self,
        scope: &str,
        page: PageRequest,
    ) -> Result<Page<DeploymentStacksWhatIfResult>, ArmError> {
        let listed = self
            .inner
            .store
            .list_stack_what_ifs(scope, page, Timestamp::now())
            .await
            .map_err(store_error)?;
        Ok(Page {
            items: listed
                .items
                .into_iter()
                .map(stored_result)
                .collect::<Result<_, _>>()?,
            continuation: listed.continuation,
        })
    }

    /// Forgets a what-if result and its request; `false` when there was none (or it had expired).
    pub async fn delete_what_if(&self, scope: &str, name: &str) -> Result<bool, ArmError> {
        self.inner
            .store
            .delete_stack_what_if(scope, name, Timestamp::now())
            .await
            .map_err(store_error)
    }

    /// Removes every what-if result whose retention interval has ended, with its request; returns how many. The
    /// server calls it periodically: expired results are already invisible, this reclaims their space.
    pub async fn purge_expired_what_ifs(&self) -> Result<u64, ArmError> {
        self.inner
            .store
            .purge_expired_stack_what_ifs(Timestamp::now())
            .await
            .map_err(store_error)
    }

    /// Stores `result` with its request, sealed by the store, until `retention` from now; `true` when it replaced
    /// an unexpired result.
    async fn store_what_if(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStacksWhatIfResult,
        result: &DeploymentStacksWhatIfResult,
        retention: Duration,
    ) -> Result<bool, ArmError> {
        let now = Timestamp::now();
        let sealed_request = SecretString::from(serde_json::to_string(request).map_err(internal)?);
        let what_if = NewStackWhatIf {
            scope: scope.trim_end_matches('/').to_owned(),
            name: name.to_owned(),
            result: serde_json::to_value(result).map_err(internal)?,
            request: sealed_request,
            expires_at: now.saturating_add(retention),
        };
        self.inner
            .store
            .put_stack_what_if(what_if, now)
            .await
            .map_err(store_error)
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
        let mut next = stack_properties_of(request)?;
        validate_body(&next)?;
        let deployment_scope = next
            .deployment_scope
            .clone()
            .unwrap_or_else(|| stack_scope.trim_end_matches('/').to_owned());
        next.deployment_scope = Some(deployment_scope.clone());
        let existing = self.load(&stack_scope, &stack_name).await?;
        let mut stack =
            DeploymentStack::for_id(&stack_id(&stack_scope, &stack_name)?, next.clone());
        stack.location = request.location.clone();
        let deployment = deployment_of(&stack);
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
        p.template_link = p.template_link.as_ref().map(link_without_credentials);
        p.parameters_link = p
            .parameters_link
            .as_ref()
            .map(parameters_link_without_credentials);
        p.parameters = public_parameters(&next);
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
    fn retention_intervals_parse() {
        let secs = |s: u64| Ok(Duration::from_secs(s));
        let cases: &[(&str, Result<Duration, IntervalError>)] = &[
            ("P7D", secs(7 * 86_400)),
            ("P1W", secs(7 * 86_400)),
            ("p2w3d", secs(17 * 86_400)),
            ("PT12H", secs(12 * 3_600)),
            ("PT1M", secs(60)),
            ("P1M", Err(IntervalError::CalendarUnit)),
            ("P1Y", Err(IntervalError::CalendarUnit)),
            ("P1DT6H30M", secs(86_400 + 6 * 3_600 + 30 * 60)),
            ("PT1S", secs(1)),
            ("PT1.5S", Ok(Duration::from_millis(1_500))),
            ("PT0,25S", Ok(Duration::from_millis(250))),
            ("P0.5D", secs(43_200)),
            (" P30D ", secs(30 * 86_400)),
            ("PT90M", secs(90 * 60)),
            ("PT0S", Err(IntervalError::Zero)),
            ("P0D", Err(IntervalError::Zero)),
            ("PT0.0001S", Err(IntervalError::Zero)),
            ("", Err(IntervalError::Syntax)),
            ("P", Err(IntervalError::Syntax)),
            ("PT", Err(IntervalError::Syntax)),
            ("P1DT", Err(IntervalError::Syntax)),
            ("7D", Err(IntervalError::Syntax)),
            ("seven days", Err(IntervalError::Syntax)),
            ("P-1D", Err(IntervalError::Syntax)),
            ("-P1D", Err(IntervalError::Syntax)),
            ("PD", Err(IntervalError::Syntax)),
            ("P1D2W", Err(IntervalError::Syntax)),
            ("P1D1D", Err(IntervalError::Syntax)),
            ("PT1S1M", Err(IntervalError::Syntax)),
            ("P1H", Err(IntervalError::Syntax)),
            ("PT1D", Err(IntervalError::Syntax)),
            ("P1.5DT1H", Err(IntervalError::Syntax)),
            ("PT.5S", Err(IntervalError::Syntax)),
            ("PT5.S", Err(IntervalError::Syntax)),
            ("P1", Err(IntervalError::Syntax)),
            ("P1DX", Err(IntervalError::Syntax)),
            ("P1D T1H", Err(IntervalError::Syntax)),
            ("P١D", Err(IntervalError::Syntax)),
            (
                "P99999999999999999999999999999999D",
                Err(IntervalError::TooLong),
            ),
            ("P999999999999D", Err(IntervalError::TooLong)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_retention_interval(text), *expected, "{text:?}");
        }
    }

    /// Every duration written in canonical `PnDTnHnMnS` form (and as weeks when whole) parses back to itself.
    #[test]
    fn retention_intervals_round_trip() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2_000 {
            // xorshift: deterministic spread over days, hours, minutes, seconds and milliseconds.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let millis = seed % (400 * 86_400_000) + 1;
            let (days, rest) = (millis / 86_400_000, millis % 86_400_000);
            let (hours, rest) = (rest / 3_600_000, rest % 3_600_000);
            let (minutes, rest) = (rest / 60_000, rest % 60_000);
            let (seconds, fraction) = (rest / 1_000, rest % 1_000);
            let text = format!("P{days}DT{hours}H{minutes}M{seconds}.{fraction:03}S");
            assert_eq!(
                parse_retention_interval(&text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
            if days > 0 && days % 7 == 0 {
                assert_eq!(
                    parse_retention_interval(&format!("P{}W", days / 7)),
                    Ok(Duration::from_millis(days * 86_400_000))
                );
            }
        }
    }

    #[test]
    fn bad_retention_intervals_are_400_at_the_field() {
        for text in ["", "seven days", "P1M", "PT0S"] {
            let request: DeploymentStacksWhatIfResult =
                serde_json::from_value(serde_json::json!({"properties": {
                    "deploymentStackResourceId": "x", "retentionInterval": text,
                    "actionOnUnmanage": {"resources": "detach"}, "denySettings": {"mode": "none"}
                }}))
                .expect("request");
            let error = retention_interval(&request).expect_err(text);
            assert_eq!(
                (error.status(), error.code()),
                (400, "InvalidRetentionInterval")
            );
            assert_eq!(
                error.detail().target.as_deref(),
                Some("properties.retentionInterval")
            );
        }
    }

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
}

//! Deployment stack what-if (`Microsoft.Resources/deploymentStacksWhatIfResults`, 2025-07-01): runs the engine's
//! deployment what-if for the stack's template and parameters, maps the predicted resources to managed-set keys,
//! compares them with the stack's current managed set (empty when the stack does not exist yet) and reports per
//! resource `create` / `modify` / `noChange` / `unsupported` (from the deployment what-if) and `delete` / `detach`
//! (what would leave the stack, per the request's `actionOnUnmanage`), plus the deny settings and deployment
//! scope changes.
//!
//! Results are persisted in the store (`StackWhatIfStore`), so they survive a restart, and kept for the request's
//! `retentionInterval` (an ISO 8601 duration: `P7D`, `PT12H`, `P1W`, ...; see
//! [`parse_retention_interval`](crate::what_if_retention::parse_retention_interval)) from when they were computed:
//! after that GET and `POST .../whatIf` answer 404, LIST leaves them out, DELETE finds nothing, and
//! [`crate::StackService::purge_expired_what_ifs`] (the server's periodic sweep) removes them. A `POST .../whatIf`
//! computes the result again and starts a new retention interval.
//!
//! The request is stored beside the result so `POST .../whatIf` can run it again. It holds the template and the
//! parameter values, secure ones included, so the store keeps it sealed with its data key and deletes it with the
//! result; it is never logged or returned. The result keeps no template and no secure parameter values.

use std::time::Duration;

use cairn_arm::models::deployment::{DeploymentWhatIf, DeploymentWhatIfProperties};
use cairn_arm::models::stack::{DeploymentStackProperties, DeploymentStackProvisioningState};
use cairn_arm::models::stack_what_if::{
    DeploymentStacksDiagnostic, DeploymentStacksWhatIfResult, StackDiagnosticLevel,
};
use cairn_arm::models::what_if::WhatIfChange;
use cairn_arm::{ArmError, ResourceId};
use cairn_stacks::{ManagedSet, ResourceKey};
use cairn_store::{
    ExposeSecret, NewStackWhatIf, Page, PageRequest, SecretString, StackWhatIfRecord, Timestamp,
};
use serde_json::Value;

use crate::request::{
    into_deployment, link_without_credentials, parameters_link_without_credentials,
    public_parameters, stack_id, validate_body,
};
use crate::service::{StackService, last_modified, store_error};
use crate::what_if_changes::{compare, internal, lower_camel};
use crate::what_if_retention::retention_interval;

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

/// The stack properties a what-if request carries (the shared stack properties).
fn stack_properties_of(
    request: &DeploymentStacksWhatIfResult,
) -> Result<DeploymentStackProperties, ArmError> {
    let value = serde_json::to_value(&request.properties).map_err(internal)?;
    serde_json::from_value(value).map_err(|_| {
        ArmError::invalid_request_content("the what-if properties are not valid stack properties")
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
        // The stack's ID is checked as a PUT of it would be; the deployment is the one that PUT would run.
        stack_id(&stack_scope, &stack_name)?;
        let deployment = into_deployment(request.location.clone(), next.clone());
        let what_if_properties: DeploymentWhatIfProperties =
            serde_json::from_value(serde_json::to_value(&deployment.properties).map_err(internal)?)
                .map_err(internal)?;
        let predicted = self
            .engine()
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
                Some(last_modified(record)),
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
    fn stack_ids_split_into_scope_and_name() {
        assert_eq!(
            split_stack_id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/st"
            ),
            Some(("/subscriptions/s/resourceGroups/rg".into(), "st".into()))
        );
        assert_eq!(split_stack_id("/subscriptions/s/resourceGroups/rg"), None);
    }
}

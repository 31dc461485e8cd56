//! Resource groups (`/subscriptions/{s}/resourcegroups[/{name}]`): PUT, GET, HEAD, PATCH, DELETE and
//! LIST over the store, and the synthesized subscription resource.
//!
//! Every subscription id exists implicitly: cairn keeps no subscription records, so GET on
//! `/subscriptions/{s}` describes an enabled subscription and groups can be created in any.

use axum::http::StatusCode;
use cairn_arm::models::common::{ListResult, Tags as ArmTags};
use cairn_arm::models::resource_group::{ResourceGroup, ResourceGroupPatchable};
use cairn_arm::names::validate_resource_group_name;
use cairn_arm::{ArmError, ResourceId};
use cairn_store::{
    DeploymentFilter, DeploymentStatus, ManagedResourceFilter, PageRequest, Precondition,
    ResourceGroupRecord, Timestamp,
};
use serde_json::json;

use crate::dispatch::{ApiResult, Call, parse_body, store_error};
use crate::operation_results::Outcome;
use crate::response::{empty_response, encode_query_value, json_response, with_header};
use crate::state::AppState;

/// `GET /subscriptions/{s}`.
pub(crate) fn get_subscription(subscription: &str) -> ApiResult {
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "id": format!("/subscriptions/{subscription}"),
            "subscriptionId": subscription,
            "displayName": subscription,
            "state": "Enabled",
        }),
    ))
}

fn to_response(record: &ResourceGroupRecord) -> Result<ResourceGroup, ArmError> {
    let group = &record.group;
    let id = ResourceId::resource_group(&group.subscription_id, &group.name)
        .map_err(|e| e.to_arm_error(&group.resource_id()))?;
    let mut body = ResourceGroup::for_id(&id, &group.location, &group.provisioning_state);
    body.managed_by = group.managed_by.clone();
    if !group.tags.is_empty() {
        body.tags = Some(
            group
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
    }
    Ok(body)
}

fn store_tags(tags: Option<ArmTags>) -> cairn_store::Tags {
    tags.unwrap_or_default().into_iter().collect()
}

fn names(id: &ResourceId) -> Result<(&str, &str), ArmError> {
    match (id.subscription_id(), id.resource_group_name()) {
        (Some(s), Some(g)) => Ok((s, g)),
        _ => Err(ArmError::invalid_resource_id(
            &id.to_string(),
            "not a resource group id",
        )),
    }
}

/// Whether two ARM locations are the same (`West US` = `westus`).
fn same_location(a: &str, b: &str) -> bool {
    let fold = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    fold(a) == fold(b)
}

/// The group or 404 `ResourceGroupNotFound`.
pub(crate) async fn require(
    state: &AppState,
    subscription: &str,
    name: &str,
) -> Result<ResourceGroupRecord, ArmError> {
    state
        .store
        .get_resource_group(subscription, name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ArmError::resource_group_not_found(name))
}

pub(crate) async fn get(state: &AppState, id: &ResourceId) -> ApiResult {
    let (subscription, name) = names(id)?;
    let record = require(state, subscription, name).await?;
    Ok(json_response(StatusCode::OK, &to_response(&record)?))
}

pub(crate) async fn head(state: &AppState, id: &ResourceId) -> ApiResult {
    let (subscription, name) = names(id)?;
    let found = state
        .store
        .get_resource_group(subscription, name)
        .await
        .map_err(store_error)?;
    Ok(empty_response(if found.is_some() {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }))
}

pub(crate) async fn put(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (subscription, name) = names(id)?;
    validate_resource_group_name(name)?;
    let body: ResourceGroup = parse_body(&call.body)?;
    if body.location.trim().is_empty() {
        return Err(ArmError::new(
            400,
            "LocationRequired",
            "The location property is required for this definition.",
        ));
    }
    let existing = state
        .store
        .get_resource_group(subscription, name)
        .await
        .map_err(store_error)?;
    let (group, precondition, status) = match existing {
        Some(record) => {
            if !same_location(&record.group.location, &body.location) {
                return Err(ArmError::new(
                    409,
                    "InvalidResourceGroupLocation",
                    format!(
                        "Invalid resource group location '{}'. The Resource group already exists in location '{}'.",
                        body.location, record.group.location
                    ),
                ));
            }
            let mut group = record.group.clone();
            group.tags = store_tags(body.tags);
            group.managed_by = body.managed_by;
            (group, Precondition::Version(record.version), StatusCode::OK)
        }
        None => (
            cairn_store::ResourceGroup {
                subscription_id: subscription.to_owned(),
                name: name.to_owned(),
                location: body.location,
                tags: store_tags(body.tags),
                managed_by: body.managed_by,
                provisioning_state: "Succeeded".to_owned(),
            },
            Precondition::MustNotExist,
            StatusCode::CREATED,
        ),
    };
    let record = state
        .store
        .put_resource_group(group, precondition, Timestamp::now())
        .await
        .map_err(store_error)?;
    Ok(json_response(status, &to_response(&record)?))
}

pub(crate) async fn patch(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (subscription, name) = names(id)?;
    let body: ResourceGroupPatchable = parse_body(&call.body)?;
    let record = require(state, subscription, name).await?;
    let mut group = record.group.clone();
    if let Some(tags) = body.tags {
        group.tags = store_tags(Some(tags));
    }
    if body.managed_by.is_some() {
        group.managed_by = body.managed_by;
    }
    let record = state
        .store
        .put_resource_group(
            group,
            Precondition::Version(record.version),
            Timestamp::now(),
        )
        .await
        .map_err(store_error)?;
    Ok(json_response(StatusCode::OK, &to_response(&record)?))
}

/// Deletes the group, the deployment history at its scope and the local resources in it (see
/// [`delete_contained_resources`]). A group with a deployment still `Accepted` or `Running` is 409
/// `Conflict`.
pub(crate) async fn delete(state: &AppState, id: &ResourceId) -> ApiResult {
    let (subscription, name) = names(id)?;
    let record = require(state, subscription, name).await?;
    let scope = id.to_string();
    for status in [DeploymentStatus::Accepted, DeploymentStatus::Running] {
        let active = state
            .store
            .list_deployments(
                &scope,
                DeploymentFilter {
                    status: Some(status),
                    parent: None,
                    page: PageRequest::first(1),
                },
            )
            .await
            .map_err(store_error)?;
        if let Some(deployment) = active.items.first() {
            return Err(ArmError::conflict(format!(
                "The resource group '{name}' cannot be deleted while deployment '{}' is {}. Cancel it or wait for it to finish.",
                deployment.key.name, deployment.status
            )));
        }
    }
    crate::deployments::delete_history_at_scope(state, &scope).await?;
    delete_contained_resources(state, &scope).await?;
    state
        .store
        .delete_resource_group(subscription, name, Precondition::Version(record.version))
        .await
        .map_err(store_error)?;
    Ok(empty_response(StatusCode::OK))
}

/// Whether `id` lies inside the scope `scope` (segment boundary, ignoring case): the store's prefix
/// filters would also match `rg10` for `rg1`.
fn is_inside(scope: &str, id: &str) -> bool {
    let scope = scope.trim_end_matches('/');
    id.len() > scope.len()
        && id.is_char_boundary(scope.len())
        && id[..scope.len()].eq_ignore_ascii_case(scope)
        && id[scope.len()..].starts_with('/')
}

/// Deletes what ARM deletes with a group that cairn holds itself: the local Key Vault's vaults (with
/// their secrets) and the inventory records of ARM resources in the group. Resources that extensions
/// deployed are not inside an ARM group and stay.
async fn delete_contained_resources(state: &AppState, scope: &str) -> Result<(), ArmError> {
    let mut continuation = None;
    loop {
        let page = state
            .store
            .list_vaults(
                scope,
                PageRequest {
                    limit: None,
                    continuation: continuation.take(),
                },
            )
            .await
            .map_err(store_error)?;
        for vault in page.items.iter().filter(|v| is_inside(scope, &v.vault.id)) {
            match state.store.delete_vault(&vault.vault.id).await {
                Ok(()) | Err(cairn_store::StoreError::NotFound { .. }) => {}
                Err(e) => return Err(store_error(e)),
            }
        }
        match page.continuation {
            Some(next) => continuation = Some(next),
            None => break,
        }
    }
    let mut continuation = None;
    loop {
        let page = state
            .store
            .list_managed_resources(ManagedResourceFilter {
                deployment: None,
                resource_type: None,
                scope: Some(scope.to_owned()),
                page: PageRequest {
                    limit: None,
                    continuation: continuation.take(),
                },
            })
            .await
            .map_err(store_error)?;
        for resource in &page.items {
            let inside = resource
                .resource
                .resource_id
                .as_deref()
                .is_some_and(|id| is_inside(scope, id));
            if inside {
                match state
                    .store
                    .delete_managed_resource(&resource.resource.key, Precondition::Any)
                    .await
                {
                    Ok(()) | Err(cairn_store::StoreError::NotFound { .. }) => {}
                    Err(e) => return Err(store_error(e)),
                }
            }
        }
        match page.continuation {
            Some(next) => continuation = Some(next),
            None => return Ok(()),
        }
    }
}

pub(crate) async fn list(state: &AppState, call: &Call, subscription: &str) -> ApiResult {
    let query = &call.route.query;
    if query.get("$filter").is_some_and(|f| !f.trim().is_empty()) {
        return Err(ArmError::invalid_query_parameter_value(
            "$filter",
            query.get("$filter").unwrap_or_default(),
            &["(none: cairn does not filter resource groups)"],
        ));
    }
    let top = query.top()?;
    let page = PageRequest {
        limit: top,
        continuation: query.get("$skiptoken").map(str::to_owned),
    };
    let result = state
        .store
        .list_resource_groups(subscription, page)
        .await
        .map_err(store_error)?;
    let value = result
        .items
        .iter()
        .map(to_response)
        .collect::<Result<Vec<_>, _>>()?;
    // `$top` asks for that many results in all, so it ends the listing.
    let next_link = match (&result.continuation, top) {
        (Some(token), None) => Some(format!(
            "{}/subscriptions/{}/resourcegroups?api-version={}&$skiptoken={}",
            call.base_url,
            encode_query_value(subscription),
            encode_query_value(&call.api_version),
            encode_query_value(token)
        )),
        _ => None,
    };
    Ok(json_response(
        StatusCode::OK,
        &ListResult { value, next_link },
    ))
}

/// `GET /subscriptions/{s}/operationresults/{id}`: `Location` polling: 202 while running, then the final answer.
pub(crate) async fn operation_result(
    state: &AppState,
    subscription: &str,
    operation_id: &str,
) -> ApiResult {
    let outcome = crate::operation_results::read(state.store.as_ref(), subscription, operation_id)
        .await
        .map_err(store_error)?;
    match outcome {
        None => Err(ArmError::new(
            404,
            "OperationNotFound",
            format!("The operation '{operation_id}' could not be found."),
        )),
        // Still running (a large bulk delete): poll again.
        Some(Outcome::Running) => Ok(with_header(
            empty_response(StatusCode::ACCEPTED),
            "retry-after",
            &state.options.retry_after_seconds.to_string(),
        )),
        Some(Outcome::Done { status, body }) => Ok(match body {
            Some(body) => json_response(status, &body),
            None => empty_response(status),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::is_inside;

    #[test]
    fn inside_means_below_a_segment_boundary() {
        let rg = "/subscriptions/s/resourceGroups/rg1";
        assert!(is_inside(
            rg,
            "/subscriptions/s/resourcegroups/RG1/providers/A.B/t/n"
        ));
        assert!(!is_inside(
            rg,
            "/subscriptions/s/resourceGroups/rg10/providers/A.B/t/n"
        ));
        assert!(!is_inside(rg, rg));
        assert!(!is_inside(rg, "/subscriptions/s"));
    }
}

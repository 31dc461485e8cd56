//! Deployment stack what-if results (`{rg|sub|mg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults`,
//! 2025-07-01) and the bulk delete API (`POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete`), over
//! the stack service.
//!
//! A what-if PUT runs synchronously (planning runs nothing) and answers 201 (new) or 200 with the finished
//! result (`provisioningState: succeeded`) and an `Azure-AsyncOperation` header whose status is `Succeeded`, so
//! LRO clients that poll get the same answer. GET, LIST (paged: `$top`, `nextLink` with `$skiptoken`), DELETE
//! (200, 204 when absent) and `POST .../whatIf` (runs the stored request again; 200) complete the resource.
//! Results are persisted by the service's store and kept for the request's `retentionInterval` (ISO 8601, e.g.
//! `P7D`; a malformed one is 400 `InvalidRetentionInterval`): once it has passed a result is 404 to GET and POST,
//! absent from LIST, and 204 to DELETE. Resource-group, subscription and management-group scopes are served.
//!
//! Bulk delete is not an ARM resource path `cairn_arm::route::classify` knows, so the dispatcher hands it here
//! before classification: body `{ "resources": [entry...] }` (or seed 003's bare array), answer 200
//! `{ "value": [result...] }` in request order once every delete has settled — or, for a large request (see
//! `cairn_stack_service::bulk_delete_runs_long`), 202 with `Azure-AsyncOperation` (`.../bulkDelete/operationStatuses/
//! {id}`), `Location` (`/subscriptions/{s}/operationresults/{id}`, whose final answer is that 200 body) and
//! `Retry-After`, the deletes running in the background.

use axum::http::StatusCode;
use cairn_arm::models::common::ListResult;
use cairn_arm::models::lro::{OperationStatus, OperationStatusResult};
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_arm::{ArmError, ResourceId};
use cairn_stack_service::{
    BulkDeleteRequest, BulkDeleteResponse, StackService, bulk_delete_runs_long, check_bulk_delete,
};
use cairn_store::PageRequest;

use crate::dispatch::{ApiResult, Call, parse_body};
use crate::operation_results::Outcome;
use crate::response::{
    empty_response, encode_id_path, encode_query_value, json_response, with_header,
};
use crate::state::AppState;

fn service(state: &AppState) -> Result<&StackService, ArmError> {
    state.stacks.as_ref().ok_or_else(|| {
        ArmError::new(
            501,
            "NotImplemented",
            "Deployment stacks are not served by this cairn server (no stack service configured).",
        )
    })
}

/// `(scope, name)` of a what-if result id: resource-group, subscription or management-group scope.
fn scope_and_name(id: &ResourceId) -> Result<(String, String), ArmError> {
    let scope = id.scope_id().ok_or_else(|| {
        ArmError::invalid_resource_id(&id.to_string(), "a what-if result needs a scope")
    })?;
    if scope.subscription_id().is_none() && scope.management_group_name().is_none() {
        return Err(ArmError::new(
            400,
            "UnsupportedScope",
            "cairn serves deployment stack what-if results at resource-group, subscription and management-group scope.",
        ));
    }
    let name = id.name().ok_or_else(|| {
        ArmError::invalid_resource_id(&id.to_string(), "a what-if result needs a name")
    })?;
    Ok((
        scope.to_string().trim_end_matches('/').to_owned(),
        name.to_owned(),
    ))
}

fn status_url(call: &Call, id: &ResourceId, operation_id: &str) -> String {
    format!(
        "{}{}/operationStatuses/{}?api-version={}",
        call.base_url,
        encode_id_path(id.to_string().trim_end_matches('/')),
        encode_query_value(operation_id),
        encode_query_value(&call.api_version)
    )
}

/// `GET .../deploymentStacksWhatIfResults`: the unexpired results, by name, in pages.
pub(crate) async fn list(state: &AppState, call: &Call, scope: &ResourceId) -> ApiResult {
    let scope_text = scope.to_string();
    let scope_text = scope_text.trim_end_matches('/');
    let page = PageRequest {
        limit: call.route.query.top()?,
        continuation: call.route.query.get("$skiptoken").map(str::to_owned),
    };
    let listed = service(state)?.list_what_ifs(scope_text, page).await?;
    let next_link = listed.continuation.map(|token| {
        format!(
            "{}{}?api-version={}&$skiptoken={}",
            call.base_url,
            encode_id_path(&format!(
                "{scope_text}/providers/Microsoft.Resources/deploymentStacksWhatIfResults"
            )),
            encode_query_value(&call.api_version),
            encode_query_value(&token)
        )
    });
    Ok(json_response(
        StatusCode::OK,
        &ListResult {
            value: listed.items,
            next_link,
        },
    ))
}

/// `GET .../deploymentStacksWhatIfResults/{name}`.
pub(crate) async fn get(state: &AppState, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let result = service(state)?.get_what_if(&scope, &name).await?;
    Ok(json_response(StatusCode::OK, &result))
}

/// `PUT .../deploymentStacksWhatIfResults/{name}`: computes and stores the result.
pub(crate) async fn put(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let request: DeploymentStacksWhatIfResult = parse_body(&call.body)?;
    let accepted = service(state)?
        .acting_for(call.access.clone())
        .what_if(&scope, &name, request)
        .await?;
    let status = if accepted.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let operation_id = accepted
        .result
        .properties
        .correlation_id
        .clone()
        .unwrap_or_default();
    let response = json_response(status, &accepted.result);
    Ok(with_header(
        response,
        "azure-asyncoperation",
        &status_url(call, id, &operation_id),
    ))
}

/// `DELETE .../deploymentStacksWhatIfResults/{name}`: 200, or 204 when there is none.
pub(crate) async fn delete(state: &AppState, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    Ok(empty_response(
        if service(state)?.delete_what_if(&scope, &name).await? {
            StatusCode::OK
        } else {
            StatusCode::NO_CONTENT
        },
    ))
}

/// `POST .../deploymentStacksWhatIfResults/{name}/whatIf`: runs the stored request again.
pub(crate) async fn action(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let result = service(state)?
        .acting_for(call.access.clone())
        .rerun_what_if(&scope, &name)
        .await?;
    Ok(json_response(StatusCode::OK, &result))
}

/// The status a PUT hands out: what-ifs finish before the PUT answers, so a stored result is `Succeeded`.
pub(crate) async fn operation_status(
    state: &AppState,
    result_id: &ResourceId,
    operation_id: &str,
) -> ApiResult {
    let (scope, name) = scope_and_name(result_id)?;
    let stored = service(state)?
        .get_what_if(&scope, &name)
        .await
        .map_err(|_| {
            ArmError::new(
                404,
                "OperationNotFound",
                format!(
                    "The operation '{operation_id}' of what-if result '{name}' could not be found."
                ),
            )
        })?;
    let mut result = OperationStatusResult::new(OperationStatus::Succeeded);
    result.id = Some(format!(
        "{}/operationStatuses/{operation_id}",
        result_id.to_string().trim_end_matches('/')
    ));
    result.name = Some(operation_id.to_owned());
    result.resource_id = stored.id;
    Ok(json_response(StatusCode::OK, &result))
}

/// Operation ids of large bulk deletes start with this, so their status route answers for nothing else.
const BULK_DELETE_OPERATION_PREFIX: &str = "bulkdelete-";

/// A bulk delete path: the action, or the status of a large one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BulkDeletePath<'a> {
    /// `POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete`.
    Action { subscription: &'a str },
    /// `GET /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete/operationStatuses/{id}`.
    Status {
        subscription: &'a str,
        operation_id: &'a str,
    },
}

/// Recognises the bulk delete paths (any case).
pub(crate) fn bulk_delete_path(path: &str) -> Option<BulkDeletePath<'_>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (subscription, rest) = match segments.as_slice() {
        [
            subscriptions,
            subscription,
            providers,
            namespace,
            action,
            rest @ ..,
        ] if subscriptions.eq_ignore_ascii_case("subscriptions")
            && !subscription.is_empty()
            && providers.eq_ignore_ascii_case("providers")
            && namespace.eq_ignore_ascii_case("Microsoft.Resources")
            && action.eq_ignore_ascii_case("bulkDelete") =>
        {
            (*subscription, rest)
        }
        _ => return None,
    };
    match rest {
        [] => Some(BulkDeletePath::Action { subscription }),
        [statuses, operation_id]
            if statuses.eq_ignore_ascii_case("operationStatuses") && !operation_id.is_empty() =>
        {
            Some(BulkDeletePath::Status {
                subscription,
                operation_id,
            })
        }
        _ => None,
    }
}

/// Where a bulk delete's answers go: `{base}` and the request's api-version, echoed in the URLs handed out.
pub(crate) struct BulkDeleteCall<'a> {
    pub base_url: &'a str,
    pub api_version: &'a str,
    pub correlation_id: &'a str,
    pub access: cairn_arm::Access,
}

/// `POST /subscriptions/{s}/providers/Microsoft.Resources/bulkDelete`: every entry must name a resource in
/// subscription `{s}` (ARM ids) — extensible entries are not bound to a subscription. The request is checked
/// before anything runs; small requests answer 200 when done, large ones 202 at once.
pub(crate) async fn bulk_delete(
    state: &AppState,
    subscription: &str,
    body: &[u8],
    call: &BulkDeleteCall<'_>,
) -> ApiResult {
    let request: BulkDeleteRequest = parse_body(body)?;
    for (index, entry) in request.resources.iter().enumerate() {
        let Some(id) = &entry.id else { continue };
        if entry.import.is_some() {
            // Seed 003's `id` of an extensible entry is the provider's id, not an ARM id.
            continue;
        }
        let in_subscription = ResourceId::parse(id)
            .ok()
            .and_then(|id| id.subscription_id().map(str::to_owned))
            .is_some_and(|s| s.eq_ignore_ascii_case(subscription));
        if !in_subscription {
            return Err(ArmError::new(
                400,
                "InvalidBulkDeleteEntry",
                format!(
                    "resources[{index}].id is not a resource of subscription '{subscription}'."
                ),
            )
            .with_target(format!("resources[{index}].id")));
        }
    }
    let service = service(state)?.acting_for(call.access.clone());
    check_bulk_delete(&request.resources)?;
    if !bulk_delete_runs_long(&request.resources) {
        let value = service
            .bulk_delete(request.resources, Some(call.correlation_id.to_owned()))
            .await?;
        return Ok(json_response(StatusCode::OK, &BulkDeleteResponse { value }));
    }
    let operation_id = format!("{BULK_DELETE_OPERATION_PREFIX}{}", uuid::Uuid::new_v4());
    let correlation_id = call.correlation_id.to_owned();
    let work = async move {
        match service
            .bulk_delete(request.resources, Some(correlation_id))
            .await
        {
            Ok(value) => (
                StatusCode::OK,
                serde_json::to_value(BulkDeleteResponse { value }).ok(),
            ),
            Err(error) => (
                StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                serde_json::to_value(error.to_response()).ok(),
            ),
        }
    };
    // Stored running under this server's claim, so any server answers its polls and reads it failed if this one
    // stops before the deletes settle.
    let settings = state.engine.settings();
    crate::operation_results::run_claimed(
        state.store.clone(),
        subscription,
        &operation_id,
        &settings.owner_id,
        settings.claim_ttl,
        work,
    )
    .await
    .map_err(crate::dispatch::store_error)?;
    let subscription_path = format!("/subscriptions/{}", encode_query_value(subscription));
    let status = format!(
        "{}{subscription_path}/providers/Microsoft.Resources/bulkDelete/operationStatuses/{}?api-version={}",
        call.base_url,
        encode_query_value(&operation_id),
        encode_query_value(call.api_version)
    );
    let location = format!(
        "{}{subscription_path}/operationresults/{}?api-version={}",
        call.base_url,
        encode_query_value(&operation_id),
        encode_query_value(crate::deployments::operation_result_version(
            call.api_version
        ))
    );
    let response = with_header(
        empty_response(StatusCode::ACCEPTED),
        "azure-asyncoperation",
        &status,
    );
    let response = with_header(response, "location", &location);
    Ok(with_header(
        response,
        "retry-after",
        &state.options.retry_after_seconds.to_string(),
    ))
}

/// `GET .../bulkDelete/operationStatuses/{id}`: `Running` until the deletes have settled, then `Succeeded` (the
/// per-entry outcomes are in the `Location` result) or `Failed` with the error that stopped the request.
pub(crate) async fn bulk_delete_status(
    state: &AppState,
    subscription: &str,
    operation_id: &str,
) -> ApiResult {
    let not_found = || {
        ArmError::new(
            404,
            "OperationNotFound",
            format!("The bulk delete operation '{operation_id}' could not be found."),
        )
    };
    if !operation_id.starts_with(BULK_DELETE_OPERATION_PREFIX) {
        return Err(not_found());
    }
    let outcome = crate::operation_results::read(state.store.as_ref(), subscription, operation_id)
        .await
        .map_err(crate::dispatch::store_error)?
        .ok_or_else(not_found)?;
    let (status, body) = match outcome {
        Outcome::Running => (OperationStatus::Running, None),
        Outcome::Done { status, body } if status.is_success() => (OperationStatus::Succeeded, body),
        Outcome::Done { body, .. } => (OperationStatus::Failed, body),
    };
    let mut result = OperationStatusResult::new(status.clone());
    result.id = Some(format!(
        "/subscriptions/{subscription}/providers/Microsoft.Resources/bulkDelete/operationStatuses/{operation_id}"
    ));
    result.name = Some(operation_id.to_owned());
    if status == OperationStatus::Failed {
        result.error = body
            .and_then(|body| serde_json::from_value::<cairn_arm::ErrorResponse>(body).ok())
            .map(|response| response.error);
    }
    Ok(json_response(StatusCode::OK, &result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_delete_paths_are_recognised_in_any_case() {
        assert_eq!(
            bulk_delete_path("/subscriptions/s1/providers/Microsoft.Resources/bulkDelete"),
            Some(BulkDeletePath::Action { subscription: "s1" })
        );
        assert_eq!(
            bulk_delete_path("/SUBSCRIPTIONS/s1/PROVIDERS/microsoft.resources/BULKDELETE"),
            Some(BulkDeletePath::Action { subscription: "s1" })
        );
        assert_eq!(
            bulk_delete_path(
                "/subscriptions/s1/providers/Microsoft.Resources/bulkDelete/operationStatuses/op-1"
            ),
            Some(BulkDeletePath::Status {
                subscription: "s1",
                operation_id: "op-1"
            })
        );
        assert_eq!(
            bulk_delete_path("/subscriptions/s1/providers/Microsoft.Resources/bulkDelete/other/x"),
            None
        );
        assert_eq!(
            bulk_delete_path("/subscriptions/s1/providers/Microsoft.Resources/deployments"),
            None
        );
        assert_eq!(bulk_delete_path("/subscriptions/s1"), None);
    }
}

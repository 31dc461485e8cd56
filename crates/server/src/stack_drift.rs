//! Deployment stack drift detection, cairn's extension of the stacks API, over the stack service:
//! `POST .../deploymentStacks/{name}/detectDrift` (body optional: `{"retentionInterval": "P1D"}`) is an ARM
//! long-running operation: 202 with the result as it starts (`status: Running`), `Location:
//! .../deploymentStacks/{name}/driftDetectionResults/{id}` (202 with the result so far while it runs, then 200 with
//! the final result), `Azure-AsyncOperation: .../deploymentStacks/{name}/operationStatuses/{id}` (`Running`, then
//! `Succeeded` or `Failed` with the error) and `Retry-After`. `GET .../driftDetectionResults` lists the stack's
//! unexpired results (paged). Results are persisted by the service, so every URL answers after a restart.

use axum::http::StatusCode;
use cairn_arm::models::common::ListResult;
use cairn_arm::models::lro::{OperationStatus, OperationStatusResult};
use cairn_arm::models::stack_drift::{DeploymentStackDriftRequest, DeploymentStackDriftResult};
use cairn_arm::{ArmError, ResourceId};
use cairn_store::PageRequest;

use crate::dispatch::{ApiResult, Call, parse_body};
use crate::response::{encode_query_value, json_response, with_header};
use crate::stacks::{scope_and_name, service, status_path, url};
use crate::state::AppState;

fn result_path(stack: &ResourceId, id: &str) -> String {
    format!(
        "{}/driftDetectionResults/{}",
        stack.to_string().trim_end_matches('/'),
        encode_query_value(id)
    )
}

/// The answer for a result: 202 with `Location` and `Retry-After` while it runs, else 200.
fn result_response(
    state: &AppState,
    call: &Call,
    stack: &ResourceId,
    result: &DeploymentStackDriftResult,
) -> ApiResult {
    if result.properties.status.is_terminal() {
        return Ok(json_response(StatusCode::OK, result));
    }
    let id = result.name.clone().unwrap_or_default();
    let response = json_response(StatusCode::ACCEPTED, result);
    let response = with_header(response, "location", &url(call, &result_path(stack, &id)));
    Ok(with_header(
        response,
        "retry-after",
        &state.options.retry_after_seconds.to_string(),
    ))
}

/// `POST .../detectDrift`: starts the detection; 202.
pub(crate) async fn detect(state: &AppState, call: &Call, stack: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(stack)?;
    let request: DeploymentStackDriftRequest = if call.body.iter().all(u8::is_ascii_whitespace) {
        DeploymentStackDriftRequest::default()
    } else {
        parse_body(&call.body)?
    };
    let started = service(state)?
        .acting_for(call.access.clone())
        .detect_drift(&scope, &name, request)
        .await?;
    let id = started.name.clone().unwrap_or_default();
    let response = result_response(state, call, stack, &started)?;
    Ok(with_header(
        response,
        "azure-asyncoperation",
        &url(call, &status_path(stack, &id)),
    ))
}

/// `GET .../driftDetectionResults/{id}`.
pub(crate) async fn result(
    state: &AppState,
    call: &Call,
    stack: &ResourceId,
    id: &str,
) -> ApiResult {
    let (scope, name) = scope_and_name(stack)?;
    let result = service(state)?.drift_result(&scope, &name, id).await?;
    result_response(state, call, stack, &result)
}

/// `GET .../driftDetectionResults`: the unexpired results, oldest first, in pages (`$top`, `$skiptoken`).
pub(crate) async fn list(state: &AppState, call: &Call, stack: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(stack)?;
    let page = PageRequest {
        limit: call.route.query.top()?,
        continuation: call.route.query.get("$skiptoken").map(str::to_owned),
    };
    let listed = service(state)?
        .list_drift_results(&scope, &name, page)
        .await?;
    let next_link = listed.continuation.map(|token| {
        format!(
            "{}&$skiptoken={}",
            url(
                call,
                &format!(
                    "{}/driftDetectionResults",
                    stack.to_string().trim_end_matches('/')
                )
            ),
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

/// The `Azure-AsyncOperation` status of a detection, read from its result.
pub(crate) async fn operation_status(state: &AppState, stack: &ResourceId, id: &str) -> ApiResult {
    let (scope, name) = scope_and_name(stack)?;
    let result = service(state)?
        .drift_result(&scope, &name, id)
        .await
        .map_err(|error| {
            if error.status() == 404 {
                ArmError::new(
                    404,
                    "OperationNotFound",
                    format!(
                        "The operation '{id}' of deployment stack '{name}' could not be found."
                    ),
                )
            } else {
                error
            }
        })?;
    let status = result.properties.status.clone();
    let mut answer = OperationStatusResult::new(status.clone());
    answer.id = Some(status_path(stack, id));
    answer.name = Some(id.to_owned());
    answer.resource_id = result.id.clone();
    answer.start_time = result.properties.start_time.clone();
    answer.end_time = result.properties.end_time.clone();
    if status == OperationStatus::Failed {
        answer.error = result.properties.error.clone();
    }
    Ok(json_response(StatusCode::OK, &answer))
}

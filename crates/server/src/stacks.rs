//! Deployment stacks (`{rg|sub|mg}/providers/Microsoft.Resources/deploymentStacks/...`) over the stack service:
//! PUT as a long-running operation (201/200 + `Azure-AsyncOperation` + `Retry-After`), GET, LIST, DELETE
//! (202 + `Location` with the `unmanageAction.*` query parameters; 204 when absent), POST validate and
//! exportTemplate, and the operation status the PUT and DELETE hand out (read from the stack itself, so it
//! survives a restart). Drift detection (`detectDrift`, its results and status) is `stack_drift`'s.

use axum::http::StatusCode;
use cairn_arm::models::common::ListResult;
use cairn_arm::models::lro::{OperationStatus, OperationStatusResult};
use cairn_arm::models::stack::{
    DeploymentStack, DeploymentStackValidateResult, StackDeleteOptions,
};
use cairn_arm::route::StackAction;
use cairn_arm::{ArmError, ResourceId, ResourceIdKind};
use cairn_stack_service::{DRIFT_OPERATION_PREFIX, StackService};
use cairn_store::PageRequest;

use crate::dispatch::{ApiResult, Call, parse_body};
use crate::response::{
    empty_response, encode_id_path, encode_query_value, json_response, with_header,
};
use crate::state::AppState;

/// Operation ids of stack deletes start with this, so the status route knows to answer "done" once the stack
/// is gone.
const DELETE_PREFIX: &str = "delete-";

pub(crate) fn service(state: &AppState) -> Result<&StackService, ArmError> {
    state.stacks.as_ref().ok_or_else(|| {
        ArmError::new(
            501,
            "NotImplemented",
            "Deployment stacks are not served by this cairn server (no stack service configured).",
        )
    })
}

/// `(scope, name)` of a stack id. Stacks live at resource-group, subscription and management-group scope.
pub(crate) fn scope_and_name(id: &ResourceId) -> Result<(String, String), ArmError> {
    let scope = id
        .scope_id()
        .ok_or_else(|| ArmError::invalid_resource_id(&id.to_string(), "a stack needs a scope"))?;
    if !matches!(
        scope.kind(),
        ResourceIdKind::ResourceGroup
            | ResourceIdKind::Subscription
            | ResourceIdKind::ManagementGroup
    ) {
        return Err(ArmError::new(
            400,
            "UnsupportedScope",
            "Deployment stacks live at resource-group, subscription and management-group scope.",
        ));
    }
    let name = id
        .name()
        .ok_or_else(|| ArmError::invalid_resource_id(&id.to_string(), "a stack needs a name"))?;
    Ok((
        scope.to_string().trim_end_matches('/').to_owned(),
        name.to_owned(),
    ))
}

pub(crate) fn url(call: &Call, path: &str) -> String {
    format!(
        "{}{}?api-version={}",
        call.base_url,
        encode_id_path(path),
        encode_query_value(&call.api_version)
    )
}

pub(crate) fn status_path(id: &ResourceId, operation_id: &str) -> String {
    format!(
        "{}/operationStatuses/{}",
        id.to_string().trim_end_matches('/'),
        encode_query_value(operation_id)
    )
}

pub(crate) async fn list(state: &AppState, call: &Call, scope: &ResourceId) -> ApiResult {
    let service = service(state)?;
    let scope_text = scope.to_string();
    let page = PageRequest {
        limit: call.route.query.top()?,
        continuation: call.route.query.get("$skiptoken").map(str::to_owned),
    };
    let listed = service.list(scope_text.trim_end_matches('/'), page).await?;
    let next_link = listed.continuation.map(|token| {
        format!(
            "{}&$skiptoken={}",
            url(
                call,
                &format!(
                    "{}/providers/Microsoft.Resources/deploymentStacks",
                    scope_text.trim_end_matches('/')
                )
            ),
            encode_query_value(&token)
        )
    });
    Ok(json_response(
        StatusCode::OK,
        &ListResult {
            value: listed.value,
            next_link,
        },
    ))
}

/// GET: the stack, with a strong `ETag` of its stored text. With `If-None-Match` naming the current tag and
/// `Prefer: wait=N` (RFC 7240), the read is held until the stack changes or N seconds pass (at most
/// [`MAX_HELD_READ`]; `Preference-Applied: wait=N`), then answers 200 with the stack or 304: a client following an
/// operation learns of each change as it is written instead of up to one poll interval later.
pub(crate) async fn get(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let service = service(state)?;
    let wait = call.wait.map(|wait| wait.min(MAX_HELD_READ));
    let until = wait.map(|wait| tokio::time::Instant::now() + wait);
    // Subscribed before the first read, so a write between that read and the wait is not missed.
    let mut changes = service.record_changes();
    loop {
        let text = service.get_text(&scope, &name).await?;
        let etag = entity_tag(&text);
        let unchanged = call.if_none_match.as_deref() == Some(etag.as_str());
        let left = until.map_or(std::time::Duration::ZERO, |until| {
            until.saturating_duration_since(tokio::time::Instant::now())
        });
        if !unchanged || left.is_zero() {
            let mut response = if unchanged {
                empty_response(StatusCode::NOT_MODIFIED)
            } else {
                let stack: DeploymentStack = serde_json::from_str(&text).map_err(|e| {
                    ArmError::new(
                        500,
                        "StoreDataCorrupt",
                        format!("stored stack '{name}': {e}"),
                    )
                })?;
                json_response(StatusCode::OK, &stack)
            };
            response = with_header(response, "etag", &etag);
            if let Some(wait) = wait {
                response = with_header(
                    response,
                    "preference-applied",
                    &format!("wait={}", wait.as_secs()),
                );
            }
            return Ok(response);
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(left.min(HELD_READ_RECHECK)).await;
                }
            }
            () = tokio::time::sleep(left.min(HELD_READ_RECHECK)) => {}
        }
    }
}

/// The longest a held stack read waits for the stack to change (`Prefer: wait=N` asks for N seconds).
const MAX_HELD_READ: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a held read reads the record again when this process wrote nothing: another replica may have.
const HELD_READ_RECHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// A strong entity tag of a stack's stored text: two reads with the same tag read the same.
fn entity_tag(text: &str) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    format!("\"{:016x}-{:x}\"", hasher.finish(), text.len())
}

/// PUT: validates, takes the stack's lease, records it `deploying` and answers 201 (new) or 200; the
/// deployment and unmanage run in the background.
pub(crate) async fn put(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let request: DeploymentStack = parse_body(&call.body)?;
    let accepted = service(state)?
        .acting_for(call.access.clone())
        .create_or_update(
            &scope,
            &name,
            request,
            Some(call.ids.correlation_id.clone()),
        )
        .await?;
    let status = if accepted.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let operation_id = accepted
        .stack
        .properties
        .correlation_id
        .clone()
        .unwrap_or_default();
    let response = json_response(status, &accepted.stack);
    let response = with_header(
        response,
        "azure-asyncoperation",
        &url(call, &status_path(id, &operation_id)),
    );
    Ok(with_header(
        response,
        "retry-after",
        &state.options.retry_after_seconds.to_string(),
    ))
}

/// DELETE: the `unmanageAction.*` and `bypassStackOutOfSyncError` query parameters; 202 + `Location` (polled
/// through the stack's operation status), 204 when there is no such stack.
pub(crate) async fn delete(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let options = StackDeleteOptions::from_query(&call.route.query)?;
    let started = service(state)?
        .acting_for(call.access.clone())
        .delete(
            &scope,
            &name,
            options,
            Some(call.ids.correlation_id.clone()),
        )
        .await?;
    if !started {
        return Ok(empty_response(StatusCode::NO_CONTENT));
    }
    let operation_id = format!("{DELETE_PREFIX}{}", call.ids.correlation_id);
    let response = empty_response(StatusCode::ACCEPTED);
    let response = with_header(
        response,
        "location",
        &url(call, &status_path(id, &operation_id)),
    );
    Ok(with_header(
        response,
        "retry-after",
        &state.options.retry_after_seconds.to_string(),
    ))
}

pub(crate) async fn action(
    state: &AppState,
    call: &Call,
    id: &ResourceId,
    action: StackAction,
) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let service = service(state)?.acting_for(call.access.clone());
    match action {
        StackAction::Validate => {
            let request: DeploymentStack = parse_body(&call.body)?;
            match service.validate(&scope, &name, request).await {
                Ok(result) => Ok(json_response(StatusCode::OK, &result)),
                // ARM answers an invalid stack with 400 and a DeploymentStackValidateResult holding the error.
                Err(error) if error.status() == 400 => Ok(json_response(
                    StatusCode::BAD_REQUEST,
                    &DeploymentStackValidateResult {
                        id: Some(id.to_string()),
                        name: Some(name),
                        resource_type: Some(DeploymentStack::TYPE.to_owned()),
                        system_data: None,
                        error: Some(error.into_detail()),
                        properties: None,
                    },
                )),
                Err(error) => Err(error),
            }
        }
        StackAction::ExportTemplate => {
            let exported = service.export_template(&scope, &name).await?;
            Ok(json_response(StatusCode::OK, &exported))
        }
        StackAction::DetectDrift => crate::stack_drift::detect(state, call, id).await,
        StackAction::Cancel => {
            service.cancel(&scope, &name).await?;
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
    }
}

/// The status of a stack PUT (`Azure-AsyncOperation`) or DELETE (`Location`), read from the stack.
pub(crate) async fn operation_status(
    state: &AppState,
    call: &Call,
    stack_id: &ResourceId,
    operation_id: &str,
) -> ApiResult {
    if operation_id.starts_with(DRIFT_OPERATION_PREFIX) {
        return crate::stack_drift::operation_status(state, stack_id, operation_id).await;
    }
    let (scope, name) = scope_and_name(stack_id)?;
    let service = service(state)?;
    let is_delete = operation_id.starts_with(DELETE_PREFIX);
    let stack = match service.get(&scope, &name).await {
        Ok(stack) => Some(stack),
        Err(error) if error.status() == 404 => None,
        Err(error) => return Err(error),
    };
    let Some(stack) = stack else {
        if is_delete {
            return Ok(empty_response(StatusCode::NO_CONTENT));
        }
        return Err(ArmError::new(
            404,
            "OperationNotFound",
            format!(
                "The operation '{operation_id}' of deployment stack '{name}' could not be found."
            ),
        ));
    };
    let state_text = stack
        .properties
        .provisioning_state
        .as_ref()
        .map(|s| s.as_str().to_owned())
        .unwrap_or_default();
    let terminal = stack
        .properties
        .provisioning_state
        .as_ref()
        .is_some_and(|s| s.is_terminal());
    if is_delete {
        if !terminal {
            let response = empty_response(StatusCode::ACCEPTED);
            let response = with_header(
                response,
                "location",
                &url(call, &status_path(stack_id, operation_id)),
            );
            return Ok(with_header(
                response,
                "retry-after",
                &state.options.retry_after_seconds.to_string(),
            ));
        }
        // The stack is still here after its delete ended: some resources could not be deleted.
        let error = stack.properties.error.clone().unwrap_or_else(|| {
            cairn_arm::ErrorDetail::new(
                "DeploymentStackDeleteFailed",
                "The deployment stack could not be deleted.",
            )
        });
        return Err(ArmError::from_detail(409, error));
    }
    let status = match state_text.as_str() {
        "succeeded" => OperationStatus::Succeeded,
        "failed" => OperationStatus::Failed,
        "canceled" => OperationStatus::Canceled,
        _ => OperationStatus::Running,
    };
    let mut result = OperationStatusResult::new(status.clone());
    result.id = Some(status_path(stack_id, operation_id));
    result.name = Some(operation_id.to_owned());
    result.resource_id = Some(stack_id.to_string());
    if status == OperationStatus::Failed {
        result.error = stack.properties.error.clone();
    }
    Ok(json_response(StatusCode::OK, &result))
}

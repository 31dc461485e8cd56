//! Deployments (`{scope}/providers/Microsoft.Resources/deployments/...`) over the engine: PUT as a
//! long-running operation (201 + `Azure-AsyncOperation` + `Location` + `Retry-After`), GET, HEAD, LIST,
//! DELETE (202 + `Location` → 204), validate, whatIf (202 + `Location` → 200), cancel, exportTemplate,
//! operations, operation statuses, and `calculateTemplateHash`.
//!
//! The `Azure-AsyncOperation` id of a PUT is the id of the deployment run it started, so its status is
//! read from the store and survives a server restart.

use axum::http::{HeaderValue, StatusCode};
use cairn_arm::access::Action;
use cairn_arm::api_version::ApiKind;
use cairn_arm::models::common::ListResult;
use cairn_arm::models::deployment::{
    Deployment, DeploymentValidateResult, DeploymentWhatIf, TemplateHashResult,
};
use cairn_arm::models::lro::{OperationStatus, OperationStatusResult};
use cairn_arm::route::DeploymentAction;
use cairn_arm::{ArmError, ErrorDetail, ResourceId};
use cairn_engine::{DeployOptions, EngineError};
use cairn_store::{
    DeploymentFilter, DeploymentId, DeploymentKey, DeploymentLookup, DeploymentStatus, PageRequest,
    Precondition,
};
use serde::Serialize;
use serde_json::Value;

use crate::dispatch::{ApiResult, Call, accepted_with_location, parse_body, store_error};
use crate::response::{
    empty_response, encode_id_path, encode_query_value, json_bytes_response, json_response,
    with_header,
};
use crate::state::AppState;

/// The engine's error as the client's: ARM errors as they are, store failures logged and hidden.
fn engine_error(error: EngineError) -> ArmError {
    match error {
        EngineError::Arm(arm) => arm,
        EngineError::Store(store) => store_error(store),
        other => other.to_arm(),
    }
}

/// `(scope, name)` of a deployment id; the scope is what the engine keys deployments by.
fn scope_and_name(id: &ResourceId) -> Result<(String, String), ArmError> {
    let scope = id.scope_id().ok_or_else(|| {
        ArmError::invalid_resource_id(&id.to_string(), "a deployment needs a scope")
    })?;
    let name = id.name().ok_or_else(|| {
        ArmError::invalid_resource_id(&id.to_string(), "a deployment needs a name")
    })?;
    Ok((scope_string(&scope), name.to_owned()))
}

/// The engine's and store's scope form: the id without a trailing `/` (`""` for the tenant).
fn scope_string(scope: &ResourceId) -> String {
    scope.to_string().trim_end_matches('/').to_owned()
}

/// `{base}{path}?api-version={v}` for an ARM path.
fn url(call: &Call, path: &str, api_version: &str) -> String {
    format!(
        "{}{}?api-version={}",
        call.base_url,
        encode_id_path(path),
        encode_query_value(api_version)
    )
}

/// `Location` polling URLs go to `/subscriptions/{s}/operationresults/{id}`, a resource-groups route:
/// keep the caller's api-version when that route accepts it, else use its latest.
pub(crate) fn operation_result_version(api_version: &str) -> &str {
    if ApiKind::ResourceGroups.supports(api_version) {
        api_version
    } else {
        ApiKind::ResourceGroups.latest()
    }
}

/// Finishes a long-running POST or DELETE: at subscription-based scopes 202 + `Location` whose poll
/// answers `status` (+ `body`); elsewhere (tenant, management group) the answer itself.
async fn finish_lro(
    state: &AppState,
    call: &Call,
    id: &ResourceId,
    status: StatusCode,
    body: Option<Value>,
) -> ApiResult {
    let Some(subscription) = id.subscription_id() else {
        return Ok(match body {
            Some(body) => json_response(status, &body),
            None => empty_response(status),
        });
    };
    let operation_id = uuid::Uuid::new_v4().to_string();
    crate::operation_results::record_done(
        state.store.as_ref(),
        subscription,
        &operation_id,
        status,
        body,
    )
    .await
    .map_err(store_error)?;
    let location = format!(
        "{}/subscriptions/{}/operationresults/{}?api-version={}",
        call.base_url,
        encode_query_value(subscription),
        encode_query_value(&operation_id),
        encode_query_value(operation_result_version(&call.api_version))
    );
    Ok(accepted_with_location(state, &location))
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, ArmError> {
    serde_json::to_value(value).map_err(|e| crate::dispatch::internal_error(&e))
}

pub(crate) async fn get(state: &AppState, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let deployment = state
        .engine
        .get(&scope, &name)
        .await
        .map_err(engine_error)?;
    Ok(json_response(StatusCode::OK, &deployment))
}

pub(crate) async fn head(state: &AppState, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    match state.engine.get(&scope, &name).await {
        Ok(_) => Ok(empty_response(StatusCode::NO_CONTENT)),
        Err(EngineError::Arm(e)) if e.status() == 404 => Ok(empty_response(StatusCode::NOT_FOUND)),
        Err(e) => Err(engine_error(e)),
    }
}

/// PUT: validates and stores the deployment, starts it in the background, and answers 201 with the
/// accepted record and the polling headers.
pub(crate) async fn put(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    let request: Deployment = parse_body(&call.body)?;
    let stack_initiated = match &call.stack_id {
        None => false,
        Some(stack) => {
            check_stack_id(stack)?;
            call.access.check(Action::Write, stack)?;
            true
        }
    };
    let handle = call
        .engine(state)
        .create_or_update(
            &scope,
            &name,
            request,
            DeployOptions {
                stack_initiated,
                correlation_id: Some(call.ids.correlation_id.clone()),
                ..DeployOptions::default()
            },
        )
        .await
        .map_err(engine_error)?;
    let deployment_path = handle.key.to_string();
    let status_path = format!("{deployment_path}/operationStatuses/{}", handle.id);
    let response = json_response(StatusCode::CREATED, &handle.accepted);
    let response = with_header(
        response,
        "azure-asyncoperation",
        &url(call, &status_path, &call.api_version),
    );
    let response = with_header(
        response,
        "location",
        &url(call, &deployment_path, &call.api_version),
    );
    Ok(with_header(
        response,
        "retry-after",
        &state.options.retry_after_seconds.to_string(),
    ))
}

/// The value of a [`crate::dispatch::STACK_ID_HEADER`] must name a deployment stack.
fn check_stack_id(stack: &str) -> Result<(), ArmError> {
    let is_stack = ResourceId::parse(stack).is_ok_and(|id| {
        id.resource_type()
            .eq_ignore_ascii_case("Microsoft.Resources/deploymentStacks")
    });
    if is_stack {
        Ok(())
    } else {
        Err(ArmError::new(
            400,
            "InvalidRequestContent",
            format!(
                "The '{}' header must be a deployment stack's resource id, not '{stack}'.",
                crate::dispatch::STACK_ID_HEADER
            ),
        ))
    }
}

/// DELETE: removes the deployment's history (never its resources); 409 `DeploymentActive` while it
/// runs; 204 when there is nothing to delete.
pub(crate) async fn delete(state: &AppState, call: &Call, id: &ResourceId) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    match state.engine.delete(&scope, &name).await {
        Ok(()) => finish_lro(state, call, id, StatusCode::NO_CONTENT, None).await,
        Err(EngineError::Arm(e)) if e.status() == 404 => Ok(empty_response(StatusCode::NO_CONTENT)),
        Err(e) => Err(engine_error(e)),
    }
}

pub(crate) async fn action(
    state: &AppState,
    call: &Call,
    id: &ResourceId,
    action: DeploymentAction,
) -> ApiResult {
    let (scope, name) = scope_and_name(id)?;
    match action {
        DeploymentAction::Cancel => {
            state
                .engine
                .cancel(&scope, &name)
                .await
                .map_err(engine_error)?;
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        DeploymentAction::ExportTemplate => {
            let exported = state
                .engine
                .export_template(&scope, &name)
                .await
                .map_err(engine_error)?;
            Ok(json_response(StatusCode::OK, &exported))
        }
        DeploymentAction::Validate => {
            let request: Deployment = parse_body(&call.body)?;
            match call.engine(state).validate(&scope, &name, request).await {
                Ok(result) => Ok(json_response(StatusCode::OK, &result)),
                // ARM answers a failed validation with the validate-result model, not a plain error.
                Err(EngineError::Arm(e)) if e.status() == 400 => Ok(json_response(
                    StatusCode::BAD_REQUEST,
                    &DeploymentValidateResult {
                        error: Some(e.into_detail()),
                        ..DeploymentValidateResult::default()
                    },
                )),
                Err(e) => Err(engine_error(e)),
            }
        }
        DeploymentAction::WhatIf => {
            let request: DeploymentWhatIf = parse_body(&call.body)?;
            let result = call
                .engine(state)
                .what_if(&scope, &name, request)
                .await
                .map_err(engine_error)?;
            finish_lro(state, call, id, StatusCode::OK, Some(to_value(&result)?)).await
        }
    }
}

/// GET `{scope}/providers/Microsoft.Resources/deployments[?$filter=provisioningState eq 'X'][&$top=N]`.
pub(crate) async fn list(state: &AppState, call: &Call, scope: &ResourceId) -> ApiResult {
    let query = &call.route.query;
    let status = match query.provisioning_state_filter()? {
        None => None,
        Some(text) => match text.parse::<DeploymentStatus>() {
            Ok(status) => Some(status),
            // A state no deployment of cairn's is ever in matches nothing.
            Err(_) => {
                return Ok(json_response(
                    StatusCode::OK,
                    &ListResult::<Value>::default(),
                ));
            }
        },
    };
    let top = query.top()?;
    let page = state
        .engine
        .list(
            &scope_string(scope),
            status,
            PageRequest {
                limit: top,
                continuation: query.get("$skiptoken").map(str::to_owned),
            },
        )
        .await
        .map_err(engine_error)?;
    // `$top` asks for that many results in all, so it ends the listing.
    let next_link = match (&page.continuation, top) {
        (Some(token), None) => {
            let mut link = url(
                call,
                &format!(
                    "{}/providers/Microsoft.Resources/deployments",
                    scope_string(scope)
                ),
                &call.api_version,
            );
            if let Some(filter) = query.get("$filter") {
                link.push_str(&format!("&$filter={}", encode_query_value(filter)));
            }
            link.push_str(&format!("&$skiptoken={}", encode_query_value(token)));
            Some(link)
        }
        _ => None,
    };
    Ok(json_response(
        StatusCode::OK,
        &ListResult {
            value: page.value,
            next_link,
        },
    ))
}

/// GET `.../deployments/{name}/operations[?$top=N]`.
pub(crate) async fn list_operations(
    state: &AppState,
    call: &Call,
    deployment: &ResourceId,
) -> ApiResult {
    let (scope, name) = scope_and_name(deployment)?;
    let top = call.route.query.top()?.map(|top| top as usize);
    // The list kept from the last request is brought up to date from the journal rows after it. Kept per spelling
    // of the deployment's ID, which each operation's `id` repeats.
    let kept = format!("{scope}|{name}");
    let mut known = state.operations.cursor(&kept);
    loop {
        let delta = match state
            .engine
            .operations_after(&scope, &name, known.as_ref())
            .await
        {
            Ok(delta) => delta,
            Err(error) => {
                state.operations.forget(&kept);
                return Err(engine_error(error));
            }
        };
        let whole = !delta.continues;
        match state.operations.apply(&kept, delta, top) {
            Ok(Some(body)) => return Ok(json_bytes_response(StatusCode::OK, body)),
            // What was read continues a list another request has since dropped or replaced: read it all. A whole
            // list is always answered, so this goes round at most twice.
            Ok(None) if !whole => known = None,
            outcome => {
                match outcome {
                    Err(error) => {
                        tracing::error!(%error, "an operations list could not be serialised")
                    }
                    Ok(_) => tracing::error!("a whole operations list was not kept"),
                }
                return Err(ArmError::internal_server_error(
                    &uuid::Uuid::new_v4().to_string(),
                ));
            }
        }
    }
}

/// GET `.../deployments/{name}/operations/{operationId}`.
pub(crate) async fn get_operation(
    state: &AppState,
    deployment: &ResourceId,
    operation_id: &str,
) -> ApiResult {
    let (scope, name) = scope_and_name(deployment)?;
    let operation = state
        .engine
        .operation(&scope, &name, operation_id)
        .await
        .map_err(engine_error)?;
    Ok(json_response(StatusCode::OK, &operation))
}

/// The longest a status poll waits for its operation to end (`Prefer: wait=N` asks for N seconds).
const MAX_STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a waiting status poll reads the record again when no run of this server has ended: the run may be
/// another replica's.
const STATUS_RECHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// GET `.../deployments/{name}/operationStatuses/{id}`: the status of the run a PUT started. With `Prefer: wait=N`
/// (RFC 7240) a run still going is waited for, up to N seconds (at most [`MAX_STATUS_WAIT`]), and the answer says so
/// (`Preference-Applied: wait=N`): a client polling that way learns of the end as it happens rather than up to one
/// poll interval later, and polls less.
pub(crate) async fn operation_status(
    state: &AppState,
    call: &Call,
    deployment: &ResourceId,
    operation_id: &str,
) -> ApiResult {
    let (scope, name) = scope_and_name(deployment)?;
    let not_found = || {
        ArmError::new(
            404,
            "OperationNotFound",
            format!("The operation '{operation_id}' of deployment '{name}' could not be found."),
        )
    };
    let key = DeploymentKey::new(scope.clone(), name.clone());
    let id = DeploymentId::from_string(operation_id);
    let wait = call.wait.map(|wait| wait.min(MAX_STATUS_WAIT));
    let until = wait.map(|wait| tokio::time::Instant::now() + wait);
    // Told before the first read, so an end between that read and the wait is not missed.
    let mut run_changes = state.engine.run_changes();
    let record = loop {
        // A status poll reads no more than the status: the run's request (its template) can be megabytes.
        let record = state
            .store
            .get_deployment_summary(DeploymentLookup::Id(&id))
            .await
            .map_err(store_error)?
            .filter(|record| record.key.matches(&key))
            .ok_or_else(not_found)?;
        let ended = matches!(
            record.status,
            DeploymentStatus::Succeeded | DeploymentStatus::Failed | DeploymentStatus::Canceled
        );
        let left = until.map_or(std::time::Duration::ZERO, |until| {
            until.saturating_duration_since(tokio::time::Instant::now())
        });
        if ended || left.is_zero() {
            break record;
        }
        let recheck = tokio::time::sleep(left.min(STATUS_RECHECK));
        tokio::pin!(recheck);
        tokio::select! {
            changed = run_changes.changed() => {
                // The engine is closing: read again at the recheck's pace.
                if changed.is_err() {
                    recheck.await;
                }
            }
            () = &mut recheck => {}
        }
    };
    let status = match record.status {
        DeploymentStatus::Accepted => OperationStatus::Accepted,
        DeploymentStatus::Running => OperationStatus::Running,
        DeploymentStatus::Succeeded => OperationStatus::Succeeded,
        DeploymentStatus::Failed => OperationStatus::Failed,
        DeploymentStatus::Canceled => OperationStatus::Canceled,
    };
    let timestamp = |t: cairn_store::Timestamp| {
        let time = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(u64::try_from(t.unix_millis()).unwrap_or(0));
        cairn_arm::time::format_timestamp(time)
    };
    let error = match record.status {
        DeploymentStatus::Failed => Some(
            record
                .error
                .as_ref()
                .and_then(|e| serde_json::from_value::<ErrorDetail>(e.clone()).ok())
                .unwrap_or_else(|| ArmError::deployment_failed([]).into_detail()),
        ),
        DeploymentStatus::Canceled => Some(ErrorDetail::new(
            "DeploymentCanceled",
            format!("The deployment '{name}' was canceled."),
        )),
        _ => None,
    };
    let mut result = OperationStatusResult::new(status);
    result.id = Some(format!("{}/operationStatuses/{operation_id}", record.key));
    result.name = Some(operation_id.to_owned());
    result.start_time = Some(timestamp(record.started_at.unwrap_or(record.created_at)));
    result.end_time = record.finished_at.map(timestamp);
    result.error = error;
    result.resource_id = Some(record.key.to_string());
    let mut response = json_response(StatusCode::OK, &result);
    if let Some(wait) = wait
        && let Ok(applied) = HeaderValue::from_str(&format!("wait={}", wait.as_secs()))
    {
        response.headers_mut().insert("preference-applied", applied);
    }
    Ok(response)
}

/// `POST /providers/Microsoft.Resources/calculateTemplateHash`: the body is the template; the answer is
/// its minified text and a stable hash of it.
pub(crate) fn calculate_template_hash(call: &Call) -> ApiResult {
    let template: Value = parse_body(&call.body)?;
    if !template.is_object() {
        return Err(ArmError::invalid_request_content(
            "the template must be a JSON object",
        ));
    }
    let minified =
        serde_json::to_string(&template).map_err(|e| crate::dispatch::internal_error(&e))?;
    let hash = template_hash(&minified);
    Ok(json_response(
        StatusCode::OK,
        &TemplateHashResult {
            minified_template: Some(minified),
            template_hash: Some(hash),
        },
    ))
}

/// FNV-1a over the minified template text, printed as a decimal u64 like ARM's `templateHash`.
fn template_hash(minified: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in minified.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash.to_string()
}

/// Deletes every deployment record at `scope` (resource group deletion).
pub(crate) async fn delete_history_at_scope(state: &AppState, scope: &str) -> Result<(), ArmError> {
    loop {
        let page = state
            .store
            .list_deployments(
                scope,
                DeploymentFilter {
                    status: None,
                    parent: None,
                    page: PageRequest::first(cairn_store::MAX_PAGE_SIZE),
                },
            )
            .await
            .map_err(store_error)?;
        if page.items.is_empty() {
            return Ok(());
        }
        for record in &page.items {
            state
                .store
                .delete_deployment(&record.key, Precondition::Any)
                .await
                .map_err(store_error)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_is_stable_and_content_sensitive() {
        assert_eq!(template_hash(""), "14695981039346656037");
        assert_ne!(template_hash("{\"a\":1}"), template_hash("{\"a\":2}"));
    }

    #[test]
    fn scopes_are_the_ids_without_a_trailing_slash() {
        let tenant = ResourceId::parse("/providers/Microsoft.Resources/deployments/d").unwrap();
        assert_eq!(scope_and_name(&tenant).unwrap(), ("".into(), "d".into()));
        let rg = ResourceId::parse(
            "/subscriptions/s/resourcegroups/RG/providers/Microsoft.Resources/deployments/D",
        )
        .unwrap();
        assert_eq!(
            scope_and_name(&rg).unwrap(),
            ("/subscriptions/s/resourceGroups/RG".into(), "D".into())
        );
    }
}

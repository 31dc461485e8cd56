//! The one catch-all handler of the ARM API: classifies the raw path with `cairn_arm::route::classify`
//! (ARM ids are case-insensitive and arbitrarily deep, so no ARM route lives in axum's router), checks
//! the api-version, reads the body within the size limit and dispatches to resource groups or
//! deployments.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use cairn_arm::route::{Method, Target};
use cairn_arm::{ArmError, Route, classify};
use cairn_store::StoreError;
use serde::de::DeserializeOwned;

use crate::auth::Caller;
use crate::middleware::RequestIds;
use crate::response::{base_url, empty_response, error_response, with_header};
use crate::stack_what_if::BulkDeletePath;
use crate::state::AppState;
use crate::{deployments, groups, resources, stack_drift, stack_what_if, stacks};

/// Everything a handler needs to know about a request.
pub(crate) struct Call {
    pub route: Route,
    pub body: Bytes,
    /// `scheme://authority` for absolute URLs.
    pub base_url: String,
    pub ids: RequestIds,
    /// The (checked) api-version, echoed in the URLs the response hands out.
    pub api_version: String,
    /// `Prefer: wait=N` (RFC 7240): how long the client would have a status poll wait for the operation to end.
    pub wait: Option<std::time::Duration>,
    /// `If-None-Match`: the entity tag of the caller's last read (a held stack read answers once it differs).
    pub if_none_match: Option<String>,
    /// What the caller may reach (everything without tokens): the engine and the stack service act for it.
    pub access: cairn_arm::Access,
    /// [`STACK_ID_HEADER`]: the stack a deployment PUT is made for.
    pub stack_id: Option<String>,
}

/// The header a deployment stacks service sends with the deployment PUT it makes for a stack (the seeds' "stack
/// resource ID HTTP request header"): the deployment is then validated in stacks mode and its record keeps extension
/// configs as directives and non-secret values.
pub const STACK_ID_HEADER: &str = "x-ms-deployment-stack-id";

impl Call {
    /// The engine, acting for this call's caller.
    pub fn engine(&self, state: &AppState) -> cairn_engine::Engine {
        state.engine.acting_for(self.access.clone())
    }
}

pub(crate) type ApiResult = Result<Response, ArmError>;

/// The axum handler for every ARM path.
pub async fn handle(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let is_head = request.method() == axum::http::Method::HEAD;
    match handle_request(&state, request).await {
        Ok(response) => response,
        // HEAD answers carry no body, errors included.
        Err(error) if is_head => empty_response(
            StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        ),
        Err(error) => error_response(&error),
    }
}

async fn handle_request(state: &AppState, request: Request) -> ApiResult {
    let base_url = base_url(&request, state.options.public_base_url.as_deref());
    let (parts, body) = request.into_parts();
    // Bulk delete is no ARM resource path `classify` knows: served before classification.
    if let Some(bulk) = stack_what_if::bulk_delete_path(parts.uri.path()) {
        let query = cairn_arm::query::Query::parse(parts.uri.query().unwrap_or(""));
        let api_version = query.get("api-version").map(str::trim).unwrap_or_default();
        return match bulk {
            BulkDeletePath::Action { subscription } => {
                if parts.method != axum::http::Method::POST {
                    return Err(ArmError::method_not_allowed(parts.method.as_str()));
                }
                if api_version.is_empty() {
                    return Err(ArmError::missing_api_version());
                }
                let body = read_body(body, state.options.max_request_bytes).await?;
                let correlation_id = parts
                    .extensions
                    .get::<RequestIds>()
                    .map(|ids| ids.correlation_id.clone())
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let call = stack_what_if::BulkDeleteCall {
                    base_url: &base_url,
                    api_version,
                    correlation_id: &correlation_id,
                    access: Caller::access_of(&parts.extensions),
                };
                stack_what_if::bulk_delete(state, subscription, &body, &call).await
            }
            BulkDeletePath::Status {
                subscription,
                operation_id,
            } => {
                if parts.method != axum::http::Method::GET {
                    return Err(ArmError::method_not_allowed(parts.method.as_str()));
                }
                if api_version.is_empty() {
                    return Err(ArmError::missing_api_version());
                }
                stack_what_if::bulk_delete_status(state, subscription, operation_id).await
            }
        };
    }
    let path = legacy_deployment_path(parts.uri.path());
    let route = classify(
        parts.method.as_str(),
        path.as_deref().unwrap_or(parts.uri.path()),
        parts.uri.query(),
    )?;
    route.check_api_version()?;
    let api_version = route.api_version().unwrap_or_default().trim().to_owned();
    let body = read_body(body, state.options.max_request_bytes).await?;
    let ids = parts
        .extensions
        .get::<RequestIds>()
        .cloned()
        .unwrap_or_else(|| RequestIds {
            request_id: uuid::Uuid::new_v4().to_string(),
            correlation_id: uuid::Uuid::new_v4().to_string(),
        });
    let wait = parts
        .headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(preferred_wait);
    let call = Call {
        route,
        body,
        base_url,
        ids,
        api_version,
        wait,
        if_none_match: parts
            .headers
            .get("if-none-match")
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().to_owned()),
        access: Caller::access_of(&parts.extensions),
        stack_id: parts
            .headers
            .get(STACK_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().to_owned()),
    };
    dispatch(state, &call).await
}

/// The `wait` preference of a `Prefer` header's value (RFC 7240: `wait=N`, whole seconds, among other preferences).
fn preferred_wait(value: &str) -> Option<std::time::Duration> {
    value.split(',').find_map(|preference| {
        let (name, seconds) = preference.split(';').next()?.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("wait") {
            return None;
        }
        let seconds = seconds.trim().trim_matches('"').parse::<u64>().ok()?;
        Some(std::time::Duration::from_secs(seconds))
    })
}

async fn dispatch(state: &AppState, call: &Call) -> ApiResult {
    use Method::*;
    let method = call.route.method;
    match &call.route.target {
        Target::Subscription { subscription } => groups::get_subscription(subscription),
        Target::Subscriptions => Err(ArmError::new(
            404,
            "NotFound",
            "cairn keeps no subscription list: every subscription id is accepted. Address one with /subscriptions/{subscriptionId}.",
        )),
        Target::ResourceGroups { subscription } => groups::list(state, call, subscription).await,
        Target::ResourceGroup { id } => match method {
            Get => groups::get(state, id).await,
            Head => groups::head(state, id).await,
            Put => groups::put(state, call, id).await,
            Patch => groups::patch(state, call, id).await,
            _ => groups::delete(state, id).await,
        },
        Target::OperationResult {
            subscription,
            operation_id,
        } => groups::operation_result(state, subscription, operation_id).await,
        Target::CalculateTemplateHash => deployments::calculate_template_hash(call),
        Target::Deployments { scope } => deployments::list(state, call, scope).await,
        Target::Deployment { id } => match method {
            Get => deployments::get(state, id).await,
            Head => deployments::head(state, id).await,
            Put => deployments::put(state, call, id).await,
            _ => deployments::delete(state, call, id).await,
        },
        Target::DeploymentAction { id, action } => {
            deployments::action(state, call, id, *action).await
        }
        Target::DeploymentOperations { deployment } => {
            deployments::list_operations(state, call, deployment).await
        }
        Target::DeploymentOperation {
            deployment,
            operation_id,
        } => deployments::get_operation(state, deployment, operation_id).await,
        Target::DeploymentOperationStatus {
            deployment,
            operation_id,
        } => deployments::operation_status(state, call, deployment, operation_id).await,
        Target::DeploymentStacks { scope } => stacks::list(state, call, scope).await,
        Target::DeploymentStack { id } => match method {
            Get => stacks::get(state, call, id).await,
            Put => stacks::put(state, call, id).await,
            _ => stacks::delete(state, call, id).await,
        },
        Target::DeploymentStackAction { id, action } => {
            stacks::action(state, call, id, *action).await
        }
        Target::DeploymentStackOperationStatus {
            stack,
            operation_id,
        } => stacks::operation_status(state, call, stack, operation_id).await,
        Target::DeploymentStackDriftResults { stack } => {
            stack_drift::list(state, call, stack).await
        }
        Target::DeploymentStackDriftResult { stack, result } => {
            stack_drift::result(state, call, stack, result).await
        }
        Target::DeploymentStacksWhatIfResults { scope } => {
            stack_what_if::list(state, call, scope).await
        }
        Target::DeploymentStacksWhatIfResult { id } => match method {
            Get => stack_what_if::get(state, id).await,
            Put => stack_what_if::put(state, call, id).await,
            _ => stack_what_if::delete(state, id).await,
        },
        Target::DeploymentStacksWhatIfResultAction { id } => {
            stack_what_if::action(state, call, id).await
        }
        Target::DeploymentStacksWhatIfResultOperationStatus {
            result,
            operation_id,
        } => stack_what_if::operation_status(state, result, operation_id).await,
        Target::Resource { id } => resources::resource(state, call, id, method).await,
        Target::Resources {
            parent,
            resource_type,
        } => resources::list(state, call, parent, resource_type).await,
        Target::ResourceAction { id, action } => resources::action(state, call, id, action).await,
    }
}

/// ARM also serves resource-group deployment operations without the provider segment,
/// `/subscriptions/{s}/resourcegroups/{rg}/deployments/{name}/operations[/{id}]`, and the SDKs use that
/// form: it is rewritten to `.../resourcegroups/{rg}/providers/Microsoft.Resources/deployments/...`.
fn legacy_deployment_path(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        [subscriptions, _, resource_groups, _, deployments, _, ..]
            if subscriptions.eq_ignore_ascii_case("subscriptions")
                && resource_groups.eq_ignore_ascii_case("resourcegroups")
                && deployments.eq_ignore_ascii_case("deployments") =>
        {
            let (head, tail) = segments.split_at(4);
            Some(format!(
                "/{}/providers/Microsoft.Resources/{}",
                head.join("/"),
                tail.join("/")
            ))
        }
        _ => None,
    }
}

/// Reads the body within `limit` bytes: 413 `RequestEntityTooLarge` beyond it.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ArmError> {
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let source = error.into_inner();
        if source
            .downcast_ref::<http_body_util::LengthLimitError>()
            .is_some()
        {
            ArmError::request_too_large(limit as u64)
        } else {
            ArmError::invalid_request_content("the request body could not be read")
        }
    })
}

/// Deserializes a JSON body: 400 `InvalidRequestContent` naming the position, never the content.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ArmError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ArmError::invalid_request_content(
            "the request body is empty",
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = T::deserialize(&mut deserializer)
        .map_err(|e| ArmError::invalid_request_content(position_only(&e)))?;
    deserializer
        .end()
        .map_err(|e| ArmError::invalid_request_content(position_only(&e)))?;
    Ok(value)
}

/// A serde error reduced to its category and position: serde's messages may quote values, which may
/// be secrets. Missing and unknown field names are kept (they are schema, not data).
fn position_only(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let kind = if text.starts_with("recursion limit exceeded") {
        // serde_json's own limit; without this it reads as a syntax error.
        "the JSON is nested more than 128 levels deep".to_owned()
    } else if text.starts_with("missing field") {
        text.split(" at line")
            .next()
            .unwrap_or("missing field")
            .to_owned()
    } else {
        match error.classify() {
            serde_json::error::Category::Syntax => "invalid JSON".to_owned(),
            serde_json::error::Category::Eof => "unexpected end of JSON".to_owned(),
            serde_json::error::Category::Data => "a value has the wrong type or format".to_owned(),
            serde_json::error::Category::Io => "the body could not be read".to_owned(),
        }
    };
    format!("{kind} at line {}, column {}", error.line(), error.column())
}

/// Maps a store failure to the client's error: conflicts are 409, the rest 500 with a tracking id
/// (the cause is logged).
pub(crate) fn store_error(error: StoreError) -> ArmError {
    match error {
        StoreError::Conflict { entity, .. } => ArmError::conflict(format!(
            "The {entity} was changed by another request at the same time. Retry the request."
        )),
        StoreError::NotFound { entity, key } => ArmError::new(
            404,
            "NotFound",
            format!("The {entity} '{key}' could not be found."),
        ),
        other => internal_error(&other),
    }
}

/// A 500 for an unexpected failure; the cause goes to the log under the tracking id.
pub(crate) fn internal_error(cause: &dyn std::fmt::Display) -> ArmError {
    let tracking_id = uuid::Uuid::new_v4().to_string();
    tracing::error!(tracking_id = %tracking_id, error = %cause, "request failed");
    ArmError::internal_server_error(&tracking_id)
}

/// 202 with `Location` and `Retry-After`.
pub(crate) fn accepted_with_location(state: &AppState, location: &str) -> Response {
    let response = empty_response(StatusCode::ACCEPTED);
    let response = with_header(response, "location", location);
    with_header(
        response,
        "retry-after",
        &state.options.retry_after_seconds.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_operation_paths_gain_the_provider_segment() {
        assert_eq!(
            legacy_deployment_path("/subscriptions/s/resourcegroups/rg/deployments/d/operations/o")
                .as_deref(),
            Some(
                "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Resources/deployments/d/operations/o"
            )
        );
        assert_eq!(
            legacy_deployment_path(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/d"
            ),
            None
        );
        assert_eq!(
            legacy_deployment_path("/subscriptions/s/resourcegroups/rg/deployments"),
            None
        );
    }
}

//! Deployments (`{scope}/providers/Microsoft.Resources/deployments/...`) and `calculateTemplateHash`.

use axum::http::StatusCode;
use cairn_arm::ArmError;
use cairn_arm::ResourceId;
use cairn_arm::models::deployment::TemplateHashResult;
use cairn_arm::route::DeploymentAction;
use cairn_store::{DeploymentFilter, DeploymentKey, PageRequest, Precondition};
use serde_json::Value;

use crate::dispatch::{ApiResult, Call, parse_body, store_error};
use crate::response::json_response;
use crate::state::AppState;

fn engine_unavailable() -> ArmError {
    ArmError::new(
        503,
        "ServiceUnavailable",
        "The deployment engine is not available in this build of the server.",
    )
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
            let key: &DeploymentKey = &record.key;
            state
                .store
                .delete_deployment(key, Precondition::Any)
                .await
                .map_err(store_error)?;
        }
    }
}

pub(crate) async fn list(_state: &AppState, _call: &Call, _scope: &ResourceId) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn get(_state: &AppState, _id: &ResourceId) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn head(_state: &AppState, _id: &ResourceId) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn put(_state: &AppState, _call: &Call, _id: &ResourceId) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn delete(_state: &AppState, _call: &Call, _id: &ResourceId) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn action(
    _state: &AppState,
    _call: &Call,
    _id: &ResourceId,
    _action: DeploymentAction,
) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn list_operations(
    _state: &AppState,
    _call: &Call,
    _deployment: &ResourceId,
) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn get_operation(
    _state: &AppState,
    _deployment: &ResourceId,
    _operation_id: &str,
) -> ApiResult {
    Err(engine_unavailable())
}

pub(crate) async fn operation_status(
    _state: &AppState,
    _deployment: &ResourceId,
    _operation_id: &str,
) -> ApiResult {
    Err(engine_unavailable())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_is_stable_and_content_sensitive() {
        assert_eq!(template_hash(""), "14695981039346656037");
        assert_ne!(template_hash("{\"a\":1}"), template_hash("{\"a\":2}"));
    }
}

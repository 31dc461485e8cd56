//! Individual ARM resources outside deployments, and the collections their providers list, served by the engine's
//! resource providers (the local Key Vault: `Microsoft.KeyVault/vaults` and `vaults/secrets`; template specs and
//! their versions). Types without a provider answer `NoRegisteredProviderFound`.

use axum::http::StatusCode;
use cairn_arm::route::Method;
use cairn_arm::{ArmError, ResourceId};
use cairn_engine::ProviderError;

use crate::dispatch::{ApiResult, Call};
use crate::response::{empty_response, json_response};
use crate::state::AppState;

fn arm(e: ProviderError) -> ArmError {
    ArmError::from_detail(e.status, *e.error)
}

/// GET, HEAD, PUT and DELETE of `id`.
pub(crate) async fn resource(
    state: &AppState,
    call: &Call,
    id: &ResourceId,
    method: Method,
) -> ApiResult {
    let resource_type = id.resource_type();
    let Some(provider) = state.engine.providers().get(&resource_type).cloned() else {
        return Err(match method {
            Method::Get | Method::Head | Method::Delete => ArmError::resource_not_found(id),
            _ => no_provider(&resource_type),
        });
    };
    let api_version = call.api_version.as_str();
    match method {
        Method::Get => match provider.get(id, api_version).await.map_err(arm)? {
            Some(resource) => Ok(json_response(StatusCode::OK, &resource)),
            None => Err(ArmError::resource_not_found(id)),
        },
        Method::Head => {
            let found = provider.get(id, api_version).await.map_err(arm)?.is_some();
            Ok(empty_response(if found {
                StatusCode::NO_CONTENT
            } else {
                StatusCode::NOT_FOUND
            }))
        }
        Method::Put => {
            let body: serde_json::Value = serde_json::from_slice(&call.body).map_err(|e| {
                ArmError::new(
                    400,
                    "InvalidRequestContent",
                    format!("The request content is not valid JSON: {e}."),
                )
            })?;
            let outcome = provider.put(id, api_version, &body).await.map_err(arm)?;
            let status = if outcome.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(status, &outcome.resource))
        }
        Method::Delete => {
            let deleted = provider.delete(id, api_version).await.map_err(arm)?;
            Ok(empty_response(if deleted {
                StatusCode::OK
            } else {
                StatusCode::NO_CONTENT
            }))
        }
        _ => Err(ArmError::new(
            405,
            "MethodNotAllowed",
            format!("The method '{method:?}' is not allowed here."),
        )),
    }
}

/// `GET {parent}/{type}`: the collection, when the type's provider lists it (`{ "value": [...] }`); a type without
/// a provider, or whose provider does not list, is 404 as ARM answers an unknown collection.
pub(crate) async fn list(
    state: &AppState,
    call: &Call,
    parent: &ResourceId,
    resource_type: &str,
) -> ApiResult {
    let Some(provider) = state.engine.providers().get(resource_type).cloned() else {
        return Err(ArmError::resource_not_found(parent));
    };
    match provider
        .list(parent, resource_type, call.api_version.as_str())
        .await
        .map_err(arm)?
    {
        Some(value) => Ok(json_response(
            StatusCode::OK,
            &serde_json::json!({ "value": value }),
        )),
        None => Err(ArmError::resource_not_found(parent)),
    }
}

/// `POST {id}/{action}`.
pub(crate) async fn action(
    state: &AppState,
    call: &Call,
    id: &ResourceId,
    action: &str,
) -> ApiResult {
    let resource_type = id.resource_type();
    let Some(provider) = state.engine.providers().get(&resource_type).cloned() else {
        return Err(no_provider(&resource_type));
    };
    let body = if call.body.is_empty() {
        None
    } else {
        let json: serde_json::Value = serde_json::from_slice(&call.body).map_err(|e| {
            ArmError::new(
                400,
                "InvalidRequestContent",
                format!("The request content is not valid JSON: {e}."),
            )
        })?;
        Some(json)
    };
    let result = provider
        .action(id, call.api_version.as_str(), action, body.as_ref())
        .await
        .map_err(arm)?;
    Ok(json_response(StatusCode::OK, &result))
}

/// No provider serves the type: resources of other types are created through deployments only.
pub(crate) fn no_provider(resource_type: &str) -> ArmError {
    ArmError::new(
        400,
        "NoRegisteredProviderFound",
        format!(
            "cairn serves no resource provider for the resource type '{resource_type}'. Deploy resources of this type with a template deployment."
        ),
    )
}

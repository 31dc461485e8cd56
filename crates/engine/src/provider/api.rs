//! ARM API calls against the providers, as `apiReference` directives describe them: `GET {id}[/{action}]` reads a
//! resource (or the resource the action path names), `POST {id}/{action}` runs an action with its query string and
//! JSON body. The provider-backed half of the engine's [`crate::LocalResolver`], through which deployments,
//! what-if and a stack's deletes all read a directive.

use cairn_arm::ResourceId;
use cairn_config::{ApiMethod, ApiRequest};
use serde_json::Value;

use super::{ProviderError, Providers};

/// Makes `request` against the provider of its resource type and returns the response body.
/// A request without an API version is sent without one (the engine's resolver fills it in first:
/// [`crate::LocalResolver`]).
pub async fn call_api(providers: &Providers, request: &ApiRequest) -> Result<Value, ProviderError> {
    let api_version = request.api_version.as_deref().unwrap_or_default();
    let action = request
        .action
        .as_deref()
        .map(|a| a.trim_matches('/'))
        .filter(|a| !a.is_empty());
    let query = request
        .query
        .as_deref()
        .map(|q| q.trim_start_matches('?'))
        .filter(|q| !q.is_empty());
    match request.method {
        ApiMethod::Get => {
            if request.body.is_some() {
                return Err(ProviderError::bad_request(
                    "InvalidRequestContent",
                    "A GET sends no request body.",
                ));
            }
            let target = match action {
                None => request.resource_id.clone(),
                Some(path) => ResourceId::parse(&format!("{}/{path}", request.resource_id))
                    .map_err(|e| {
                        ProviderError::bad_request(
                            "InvalidResourceId",
                            format!(
                                "'{}/{path}' is not a resource ID cairn can read: {e}.",
                                request.resource_id
                            ),
                        )
                    })?,
            };
            if query.is_some() {
                return Err(ProviderError::bad_request(
                    "InvalidQueryParameter",
                    format!(
                        "The built-in provider of '{}' reads resources without query parameters.",
                        target.resource_type()
                    ),
                ));
            }
            let provider = providers.require(&target.resource_type(), api_version)?;
            provider
                .get(&target, api_version)
                .await?
                .ok_or_else(|| ProviderError::not_found(&target))
        }
        ApiMethod::Post => {
            let Some(action) = action else {
                return Err(ProviderError::bad_request(
                    "InvalidResourceOperation",
                    "A POST needs an action after the resource ID.",
                ));
            };
            let provider = providers.require(&request.resource_id.resource_type(), api_version)?;
            provider
                .action_with_query(
                    &request.resource_id,
                    api_version,
                    action,
                    query,
                    request.body.as_ref(),
                )
                .await
        }
    }
}

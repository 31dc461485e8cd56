//! ARM API calls against the providers, as `apiReference` directives describe them: `GET {id}[/{action}]` reads a
//! resource (or the resource the action path names), `POST {id}/{action}` runs an action with its query string and
//! JSON body. Shared by the engine (config items at deployment time) and the stack service (directives re-run at
//! delete time), so both read a directive the same way.

use cairn_arm::ResourceId;
use serde_json::Value;

use super::{ProviderError, Providers};

/// The two methods a directive may use: reads and `POST` actions, never writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiMethod {
    Get,
    Post,
}

impl ApiMethod {
    /// `GET`/`POST`, ignoring case; `None` for anything else.
    pub fn parse(method: &str) -> Option<ApiMethod> {
        if method.eq_ignore_ascii_case("GET") {
            Some(ApiMethod::Get)
        } else if method.eq_ignore_ascii_case("POST") {
            Some(ApiMethod::Post)
        } else {
            None
        }
    }
}

/// One call.
#[derive(Clone, Copy, Debug)]
pub struct ApiCall<'a> {
    pub method: ApiMethod,
    pub resource_id: &'a ResourceId,
    pub api_version: &'a str,
    /// The path after the resource ID (`listKeys`; for a GET, a child path such as `secrets/s`). Empty: none.
    pub action: Option<&'a str>,
    /// Query parameters without `?` and without `api-version`.
    pub query: Option<&'a str>,
    /// The JSON body of a `POST`.
    pub body: Option<&'a Value>,
}

/// Makes `call` against the provider of its resource type and returns the response body.
pub async fn call_api(providers: &Providers, call: &ApiCall<'_>) -> Result<Value, ProviderError> {
    let action = call
        .action
        .map(|a| a.trim_matches('/'))
        .filter(|a| !a.is_empty());
    let query = call
        .query
        .map(|q| q.trim_start_matches('?'))
        .filter(|q| !q.is_empty());
    match call.method {
        ApiMethod::Get => {
            if call.body.is_some() {
                return Err(ProviderError::bad_request(
                    "InvalidRequestContent",
                    "A GET sends no request body.",
                ));
            }
            let target = match action {
                None => call.resource_id.clone(),
                Some(path) => {
                    ResourceId::parse(&format!("{}/{path}", call.resource_id)).map_err(|e| {
                        ProviderError::bad_request(
                            "InvalidResourceId",
                            format!(
                                "'{}/{path}' is not a resource ID cairn can read: {e}.",
                                call.resource_id
                            ),
                        )
                    })?
                }
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
            let provider = providers.require(&target.resource_type(), call.api_version)?;
            provider
                .get(&target, call.api_version)
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
            let provider =
                providers.require(&call.resource_id.resource_type(), call.api_version)?;
            provider
                .action_with_query(call.resource_id, call.api_version, action, query, call.body)
                .await
        }
    }
}

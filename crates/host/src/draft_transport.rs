//! The REST-draft ("vnext-A") HTTP transport, presented to the host in v2 semantics.
//!
//! Mapping (v2 operation → draft calls):
//! - preview → `POST /{v}/resources/preview`; the draft `Resource` becomes a v2 `ResourcePreview`.
//! - createOrUpdate → `POST /{v}/resources/reference` (→ `{referenceId}`), then `PUT /{v}/resources/{referenceId}`;
//!   200/201 become a v2 200 `Resource`, 202 + `Location` + `Retry-After` a v2 202 `LongRunningOperation`
//!   whose `operationHandle` is `{"location": <absolute URL>}`.
//! - get → `GET /{v}/resources/{referenceId}`, or `POST .../getWithConfig` with the config as body for `01` ids.
//! - delete → `DELETE /{v}/resources/{referenceId}`, or `POST .../deleteWithConfig` for `01` ids.
//! - getLongRunningOperation → `GET <location>`; `{status, error?}` becomes a v2 `LongRunningOperation`.
//!
//! In v2 terms the draft resource's identifiers are `{"referenceId": "<the extension's id>"}`. Draft
//! extensions never echo config (it is write-only), so the host treats all of it as secret. Error
//! responses use the same OData shape and pass through unchanged. `Retry-After` is clamped to the draft's
//! 10..600 s unless configured otherwise (tests); a `Location` outside the extension's origin is refused.

use crate::http_transport::{HttpCore, TransportSetupError};
use crate::secret::Redacted;
use cairn_extension_contract::draft::{
    self, DraftOperationStatus, DraftResource, ReferenceIdResponse,
};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_extension_contract::v2::{
    Error, ErrorResponse, LongRunningOperation, Resource, ResourcePreview,
    ResourcePreviewSpecification, ResourceReference, ResourceSpecification,
};
use cairn_extension_contract::{OperationStatus, ReferenceId, headers};
use reqwest::{Client, Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::ops::RangeInclusive;

/// The identifiers key that carries a draft extension's reference id.
pub const DRAFT_REFERENCE_ID_KEY: &str = "referenceId";

/// The REST-draft transport.
#[derive(Clone)]
pub struct RestDraftTransport {
    core: HttpCore,
    retry_after_seconds: RangeInclusive<u64>,
}

impl RestDraftTransport {
    /// A transport to `base_url`; `Retry-After` is clamped to the draft's 10..=600 seconds.
    pub fn new(
        client: Client,
        base_url: &str,
        bearer_token: Option<Redacted<String>>,
    ) -> Result<Self, TransportSetupError> {
        Ok(Self {
            core: HttpCore::new(client, base_url, bearer_token)?,
            retry_after_seconds: draft::RETRY_AFTER_MIN_SECONDS..=draft::RETRY_AFTER_MAX_SECONDS,
        })
    }

    /// Overrides the `Retry-After` clamp (tests use `0..=0`).
    pub fn with_retry_after_bounds(mut self, seconds: RangeInclusive<u64>) -> Self {
        self.retry_after_seconds = seconds;
        self
    }

    async fn dispatch(
        &self,
        request: TransportRequest,
    ) -> Result<TransportResponse, TransportError> {
        let version = request.extension_version.clone();
        let limit = request.max_response_bytes;
        let forwarded: Vec<(String, String)> = request
            .headers
            .iter()
            .filter(|(name, _)| !name.eq_ignore_ascii_case(headers::AUTHORIZATION))
            .cloned()
            .collect();
        let exchange = Exchange {
            core: &self.core,
            headers: &forwarded,
            limit,
        };
        match request.operation {
            Operation::Preview => {
                let Ok(spec) =
                    serde_json::from_slice::<ResourcePreviewSpecification>(&request.body)
                else {
                    return Ok(bad_request(
                        "The preview request is not a ResourcePreviewSpecification.",
                    ));
                };
                let body = DraftResource {
                    resource_type: draft::join_type(
                        &spec.resource_type,
                        spec.api_version.as_deref(),
                    ),
                    properties: spec.properties,
                    config: spec.config,
                    reference_id: None,
                    status: None,
                };
                let url = self.core.url(&[&version, "resources", "preview"]);
                let response = exchange
                    .send(Method::POST, url, Some(to_json(&body)))
                    .await?;
                if response.status != 200 {
                    return Ok(response);
                }
                let resource: DraftResource = parse_draft(&response.body, "preview")?;
                let (resource_type, api_version) = draft::split_type(&resource.resource_type);
                let preview = ResourcePreview {
                    resource_type,
                    api_version,
                    identifiers: draft_identifiers(resource.reference_id.as_deref()),
                    properties: resource.properties,
                    status: resource.status,
                    config: None,
                    config_id: None,
                    metadata: None,
                };
                Ok(ok_json(200, &preview))
            }
            Operation::CreateOrUpdate => {
                let Ok(spec) = serde_json::from_slice::<ResourceSpecification>(&request.body)
                else {
                    return Ok(bad_request(
                        "The createOrUpdate request is not a ResourceSpecification.",
                    ));
                };
                let body = to_json(&DraftResource {
                    resource_type: draft::join_type(
                        &spec.resource_type,
                        spec.api_version.as_deref(),
                    ),
                    properties: spec.properties.clone(),
                    config: spec.config.clone(),
                    reference_id: None,
                    status: None,
                });
                let url = self.core.url(&[&version, "resources", "reference"]);
                let response = exchange.send(Method::POST, url, Some(body.clone())).await?;
                if response.status != 200 {
                    return Ok(response);
                }
                let ReferenceIdResponse { reference_id } =
                    parse_draft(&response.body, "resources/reference")?;
                validate_reference_id(&reference_id)?;
                let url = self
                    .core
                    .url_with_raw(&[&version, "resources"], &[&reference_id]);
                let response = exchange.send(Method::PUT, url, Some(body)).await?;
                self.map_resource_or_operation(
                    response,
                    &reference_id,
                    &spec.resource_type,
                    spec.api_version,
                )
            }
            Operation::Get | Operation::Delete => {
                let Ok(reference) = serde_json::from_slice::<ResourceReference>(&request.body)
                else {
                    return Ok(bad_request("The request is not a ResourceReference."));
                };
                let Some(reference_id) = reference
                    .identifiers
                    .get(DRAFT_REFERENCE_ID_KEY)
                    .and_then(Value::as_str)
                else {
                    return Ok(bad_request(
                        "The identifiers carry no 'referenceId' for the REST-draft extension.",
                    ));
                };
                let parsed = validate_reference_id(reference_id)?;
                let is_get = request.operation == Operation::Get;
                let (method, url, body) = if parsed.needs_config() {
                    let action = if is_get {
                        "getWithConfig"
                    } else {
                        "deleteWithConfig"
                    };
                    let config = reference.config.clone().unwrap_or_else(|| json!({}));
                    let url = self
                        .core
                        .url_with_raw(&[&version, "resources"], &[reference_id, action]);
                    (Method::POST, url, Some(to_json(&config)))
                } else {
                    let method = if is_get { Method::GET } else { Method::DELETE };
                    (
                        method,
                        self.core
                            .url_with_raw(&[&version, "resources"], &[reference_id]),
                        None,
                    )
                };
                let response = exchange.send(method, url, body).await?;
                self.map_resource_or_operation(
                    response,
                    reference_id,
                    &reference.resource_type,
                    reference.api_version,
                )
            }
            Operation::GetLongRunningOperation => {
                let location = serde_json::from_slice::<Value>(&request.body)
                    .ok()
                    .and_then(|handle| {
                        handle
                            .get("location")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    });
                let Some(location) = location else {
                    return Ok(bad_request("The operation handle has no 'location'."));
                };
                let url = self.same_origin(&location)?;
                let response = exchange.send(Method::GET, url, None).await?;
                if response.status != 200 {
                    return Ok(response);
                }
                let operation: DraftOperationStatus = parse_draft(&response.body, "operation")?;
                let terminal = operation.status.is_terminal();
                let lro = LongRunningOperation {
                    retry_after_seconds: self.retry_after(&response),
                    operation_handle: (!terminal).then(|| json!({ "location": location })),
                    status: operation.status,
                    error: operation.error,
                };
                Ok(ok_json(200, &lro))
            }
        }
    }

    fn map_resource_or_operation(
        &self,
        response: TransportResponse,
        reference_id: &str,
        requested_type: &str,
        requested_api_version: Option<String>,
    ) -> Result<TransportResponse, TransportError> {
        match response.status {
            200 | 201 => {
                let resource: DraftResource = parse_draft(&response.body, "resource")?;
                let (resource_type, api_version) = draft::split_type(&resource.resource_type);
                let (resource_type, api_version) = if resource_type.is_empty() {
                    (requested_type.to_owned(), requested_api_version)
                } else {
                    (resource_type, api_version.or(requested_api_version))
                };
                let v2 = Resource {
                    resource_type,
                    api_version,
                    identifiers: draft_identifiers(Some(
                        resource.reference_id.as_deref().unwrap_or(reference_id),
                    )),
                    properties: resource.properties,
                    config: None,
                    config_id: None,
                    status: resource.status,
                    error: None,
                };
                Ok(ok_json(200, &v2))
            }
            202 => {
                let location = response.header(headers::LOCATION).ok_or_else(|| {
                    TransportError::InvalidResponse {
                        message: "a 202 from the REST-draft extension has no Location header"
                            .into(),
                    }
                })?;
                let url = self.same_origin(location)?;
                let lro = LongRunningOperation {
                    status: OperationStatus::running(),
                    retry_after_seconds: self.retry_after(&response),
                    operation_handle: Some(json!({ "location": url.as_str() })),
                    error: None,
                };
                Ok(ok_json(202, &lro))
            }
            _ => Ok(response),
        }
    }

    /// Resolves `location` against the base URL and refuses other origins, so a handle can never make the
    /// host send requests (and the bearer token) elsewhere.
    fn same_origin(&self, location: &str) -> Result<Url, TransportError> {
        let url = self
            .core
            .base
            .join(location)
            .map_err(|_| TransportError::InvalidResponse {
                message: "the operation Location is not a URL".into(),
            })?;
        if url.origin() != self.core.base.origin() {
            return Err(TransportError::InvalidResponse {
                message: "the operation Location points outside the extension's endpoint".into(),
            });
        }
        Ok(url)
    }

    fn retry_after(&self, response: &TransportResponse) -> Option<i32> {
        let seconds: u64 = response.header(headers::RETRY_AFTER)?.trim().parse().ok()?;
        let clamped = seconds.clamp(
            *self.retry_after_seconds.start(),
            *self.retry_after_seconds.end(),
        );
        i32::try_from(clamped).ok()
    }
}

struct Exchange<'a> {
    core: &'a HttpCore,
    headers: &'a [(String, String)],
    limit: usize,
}

impl Exchange<'_> {
    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<TransportResponse, TransportError> {
        self.core
            .execute(method, url, body, self.headers, self.limit)
            .await
    }
}

impl ExtensionTransport for RestDraftTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(self.dispatch(request))
    }

    /// The draft's delete answers 204 or 202 + `Location` only (seed 004: RELO "cannot be used with
    /// long-running resource delete operations").
    fn allows_delete_relo(&self) -> bool {
        false
    }
}

fn draft_identifiers(reference_id: Option<&str>) -> Value {
    match reference_id {
        Some(id) => json!({ DRAFT_REFERENCE_ID_KEY: id }),
        None => json!({}),
    }
}

fn validate_reference_id(reference_id: &str) -> Result<ReferenceId, TransportError> {
    ReferenceId::parse(reference_id).map_err(|error| TransportError::InvalidResponse {
        message: format!("the REST-draft extension returned an invalid reference id ({error})"),
    })
}

fn parse_draft<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, TransportError> {
    serde_json::from_slice(body).map_err(|_| TransportError::InvalidResponse {
        message: format!("the REST-draft {what} response does not match the draft schema"),
    })
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these models cannot fail: all map keys are strings.
    serde_json::to_vec(value).unwrap_or_default()
}

fn ok_json<T: Serialize>(status: u16, value: &T) -> TransportResponse {
    TransportResponse {
        status,
        headers: Vec::new(),
        body: to_json(value),
    }
}

fn bad_request(message: &str) -> TransportResponse {
    let error = ErrorResponse {
        error: Error::new("InvalidRequest", message),
    };
    TransportResponse {
        status: 400,
        headers: Vec::new(),
        body: to_json(&error),
    }
}

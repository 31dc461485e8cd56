//! Pure conversions between v2 HTTP semantics and the gRPC messages, in both directions.
//!
//! Client side (host → gRPC extension): a v2 request body becomes a `ResourceSpecification` or
//! `ResourceReference`; the `LocalExtensibilityOperationResponse` becomes a v2 status and body.
//! Server side (gRPC → v2 extension): the reverse.
//!
//! gRPC has no config echo, no preview `metadata` and no long-running operations; statuses on resources
//! (RELO) pass through, and so does `configId`, in cairn's addition to the messages
//! ([`proto::CONFIG_ID_FIELD`]; a Bicep peer neither sends nor reads it).

use cairn_extension_contract::transport::{Operation, TransportError, TransportResponse};
use cairn_extension_contract::v2::{
    self, ErrorResponse, ResourcePreviewSpecification, ResourceReference, ResourceSpecification,
};
use cairn_extension_contract::{OperationStatus, codes};
use serde_json::{Map, Value};

use crate::proto;

/// Error codes that mean "no such resource": get answers 404, delete answers 204.
pub const NOT_FOUND_CODES: &[&str] = &[codes::RESOURCE_NOT_FOUND, "NotFound", "ObjectNotFound"];

/// The error code of a request whose `configId` names another system than its config reaches: answered 422
/// over HTTP, which gRPC cannot say, so the code brings the status back (the host then refuses the
/// mismatch as it does over HTTP).
pub const CONFIG_ID_MISMATCH: &str = "ConfigIdMismatch";

/// The request body is not a valid v2 request.
pub const INVALID_REQUEST: &str = "InvalidRequest";
/// A gRPC extension failed a call with a gRPC status instead of `errorData`.
pub const RPC_FAILED: &str = "ExtensionRpcFailed";

fn invalid_request(message: impl Into<String>) -> Box<v2::Error> {
    Box::new(v2::Error::new(INVALID_REQUEST, message))
}

fn to_json_string(value: &Value) -> String {
    // Serialising a `Value` cannot fail (its map keys are strings).
    serde_json::to_string(value).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Client side: v2 request → proto, proto response → v2.
// ---------------------------------------------------------------------------------------------

/// A v2 `createOrUpdate` or `preview` body as a gRPC `ResourceSpecification` (preview `metadata` has no
/// gRPC field and is dropped).
pub fn specification_to_proto(body: &[u8]) -> Result<proto::ResourceSpecification, Box<v2::Error>> {
    let spec: ResourcePreviewSpecification = serde_json::from_slice(body).map_err(|err| {
        invalid_request(format!(
            "The request body is not a resource specification: {err}."
        ))
    })?;
    Ok(proto::ResourceSpecification {
        config: spec.config.as_ref().map(to_json_string),
        r#type: spec.resource_type,
        api_version: spec.api_version,
        properties: to_json_string(&spec.properties),
        config_id: spec.config_id,
    })
}

/// A v2 `get` or `delete` body as a gRPC `ResourceReference`.
pub fn reference_to_proto(body: &[u8]) -> Result<proto::ResourceReference, Box<v2::Error>> {
    let reference: ResourceReference = serde_json::from_slice(body).map_err(|err| {
        invalid_request(format!(
            "The request body is not a resource reference: {err}."
        ))
    })?;
    Ok(proto::ResourceReference {
        identifiers: to_json_string(&reference.identifiers),
        config: reference.config.as_ref().map(to_json_string),
        r#type: reference.resource_type,
        api_version: reference.api_version,
        config_id: reference.config_id,
    })
}

fn violation(message: impl Into<String>) -> TransportError {
    TransportError::InvalidResponse {
        message: message.into(),
    }
}

fn parse_object(field: &str, text: &str) -> Result<Value, TransportError> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(violation(format!("resource.{field} is not a JSON object"))),
        Err(_) => Err(violation(format!("resource.{field} is not valid JSON"))),
    }
}

fn json_response(status: u16, body: &impl serde::Serialize) -> TransportResponse {
    TransportResponse {
        status,
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

/// A v2 error response.
pub fn error_response(status: u16, error: v2::Error) -> TransportResponse {
    json_response(status, &ErrorResponse { error })
}

fn no_content() -> TransportResponse {
    TransportResponse {
        status: 204,
        headers: Vec::new(),
        body: Vec::new(),
    }
}

/// The gRPC error as a v2 `Error` (`innerError` is parsed back to JSON; non-JSON text is kept as a string).
pub fn error_from_proto(error: proto::Error) -> v2::Error {
    let details: Vec<v2::ErrorDetail> = error
        .details
        .into_iter()
        .map(|detail| v2::ErrorDetail {
            code: detail.code,
            message: detail.message,
            target: detail.target,
        })
        .collect();
    v2::Error {
        code: error.code,
        message: error.message,
        target: error.target,
        details: if details.is_empty() {
            None
        } else {
            Some(details)
        },
        innererror: error
            .inner_error
            .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text))),
    }
}

/// Maps a gRPC operation response onto v2 semantics for `operation`.
///
/// - exactly one of `resource` / `errorData` must be set, else [`TransportError::InvalidResponse`];
/// - `resource` → 200 with a v2 `Resource` (or `ResourcePreview`); for delete, a terminal (or missing)
///   status → 204, a non-terminal one → 200 (RELO);
/// - `errorData` → 400 with an `ErrorResponse`, except not-found codes: 404 on get, 204 on delete.
pub fn response_from_proto(
    operation: Operation,
    reply: proto::LocalExtensibilityOperationResponse,
) -> Result<TransportResponse, TransportError> {
    match (reply.resource, reply.error_data) {
        (Some(resource), None) => resource_from_proto(operation, resource),
        (None, Some(error_data)) => {
            let error = error_data
                .error
                .ok_or_else(|| violation("errorData has no error"))?;
            let not_found = NOT_FOUND_CODES.contains(&error.code.as_str());
            match operation {
                Operation::Get if not_found => Ok(error_response(404, error_from_proto(error))),
                Operation::Delete if not_found => Ok(no_content()),
                _ if error.code == CONFIG_ID_MISMATCH => {
                    Ok(error_response(422, error_from_proto(error)))
                }
                _ => Ok(error_response(400, error_from_proto(error))),
            }
        }
        (Some(_), Some(_)) => Err(violation("the response sets both resource and errorData")),
        (None, None) => Err(violation(
            "the response sets neither resource nor errorData",
        )),
    }
}

fn resource_from_proto(
    operation: Operation,
    resource: proto::Resource,
) -> Result<TransportResponse, TransportError> {
    let identifiers = parse_object("identifiers", &resource.identifiers)?;
    let properties = parse_object("properties", &resource.properties)?;
    let status = resource.status.map(OperationStatus::new);
    let config_id = resource.config_id;
    match operation {
        Operation::Preview => Ok(json_response(
            200,
            &v2::ResourcePreview {
                resource_type: resource.r#type,
                api_version: resource.api_version,
                identifiers,
                properties,
                status,
                config: None,
                config_id,
                metadata: None,
            },
        )),
        Operation::Delete if status.as_ref().is_none_or(OperationStatus::is_terminal) => {
            Ok(no_content())
        }
        _ => Ok(json_response(
            200,
            &v2::Resource {
                resource_type: resource.r#type,
                api_version: resource.api_version,
                identifiers,
                properties,
                config: None,
                config_id,
                status,
                error: None,
            },
        )),
    }
}

/// Maps a gRPC status (an extension that fails calls instead of answering `errorData`) onto v2 semantics.
/// Connection-level statuses become transport errors; the rest become error responses.
pub fn response_from_status(
    operation: Operation,
    status: &tonic::Status,
) -> Result<TransportResponse, TransportError> {
    use tonic::Code;
    let describe = || {
        format!(
            "The extension failed the call with gRPC status {:?}: {}",
            status.code(),
            status.message()
        )
    };
    match status.code() {
        Code::Unavailable => Err(TransportError::Unavailable {
            message: describe(),
        }),
        Code::DeadlineExceeded => Err(TransportError::Timeout),
        Code::Cancelled | Code::Unknown if status.message().is_empty() => Err(TransportError::Io {
            message: describe(),
        }),
        Code::NotFound if operation == Operation::Get => Ok(error_response(
            404,
            v2::Error::new(codes::RESOURCE_NOT_FOUND, describe()),
        )),
        Code::NotFound if operation == Operation::Delete => Ok(no_content()),
        Code::InvalidArgument
        | Code::FailedPrecondition
        | Code::OutOfRange
        | Code::Unimplemented => Ok(error_response(400, v2::Error::new(RPC_FAILED, describe()))),
        Code::AlreadyExists | Code::Aborted => {
            Ok(error_response(409, v2::Error::new(RPC_FAILED, describe())))
        }
        Code::PermissionDenied | Code::Unauthenticated => {
            Ok(error_response(403, v2::Error::new(RPC_FAILED, describe())))
        }
        _ => Ok(error_response(500, v2::Error::new(RPC_FAILED, describe()))),
    }
}

// ---------------------------------------------------------------------------------------------
// Server side: proto request → v2, v2 response → proto.
// ---------------------------------------------------------------------------------------------

fn parse_request_object(
    field: &str,
    text: &str,
    required: bool,
) -> Result<Option<Value>, Box<proto::Error>> {
    if text.is_empty() && !required {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(Some(value)),
        _ => Err(Box::new(proto_error(
            INVALID_REQUEST,
            Some(format!("/{field}")),
            format!("'{field}' must be a JSON object serialised into a string."),
        ))),
    }
}

/// A gRPC `ResourceSpecification` as a v2 body (`createOrUpdate`, or `preview` without metadata).
pub fn specification_from_proto(
    spec: &proto::ResourceSpecification,
) -> Result<Vec<u8>, Box<proto::Error>> {
    let properties =
        parse_request_object("properties", &spec.properties, true)?.unwrap_or_default();
    let config = match &spec.config {
        Some(text) => parse_request_object("config", text, false)?,
        None => None,
    };
    let body = ResourceSpecification {
        resource_type: spec.r#type.clone(),
        api_version: spec.api_version.clone(),
        properties,
        config,
        config_id: spec.config_id.clone(),
    };
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}

/// A gRPC `ResourceReference` as a v2 body (`get`, `delete`).
pub fn reference_from_proto(
    reference: &proto::ResourceReference,
) -> Result<Vec<u8>, Box<proto::Error>> {
    let identifiers =
        parse_request_object("identifiers", &reference.identifiers, true)?.unwrap_or_default();
    let config = match &reference.config {
        Some(text) => parse_request_object("config", text, false)?,
        None => None,
    };
    let body = ResourceReference {
        resource_type: reference.r#type.clone(),
        api_version: reference.api_version.clone(),
        identifiers,
        config,
        config_id: reference.config_id.clone(),
    };
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}

/// A gRPC error.
pub fn proto_error(code: &str, target: Option<String>, message: impl Into<String>) -> proto::Error {
    proto::Error {
        code: code.to_owned(),
        target,
        message: message.into(),
        details: Vec::new(),
        inner_error: None,
    }
}

/// A v2 `Error` as a gRPC error.
pub fn error_to_proto(error: v2::Error) -> proto::Error {
    proto::Error {
        code: error.code,
        target: error.target,
        message: error.message,
        details: error
            .details
            .unwrap_or_default()
            .into_iter()
            .map(|detail| proto::ErrorDetail {
                code: detail.code,
                target: detail.target,
                message: detail.message,
            })
            .collect(),
        inner_error: error.innererror.as_ref().map(to_json_string),
    }
}

/// An `errorData` response.
pub fn error_reply(error: proto::Error) -> proto::LocalExtensibilityOperationResponse {
    proto::LocalExtensibilityOperationResponse {
        resource: None,
        error_data: Some(proto::ErrorData { error: Some(error) }),
    }
}

/// A `resource` response.
pub fn resource_reply(resource: proto::Resource) -> proto::LocalExtensibilityOperationResponse {
    proto::LocalExtensibilityOperationResponse {
        resource: Some(resource),
        error_data: None,
    }
}

/// A v2 error body (any 4xx/5xx) as `errorData`; a body that is not an `ErrorResponse` becomes a
/// generic error naming the status.
pub fn error_reply_from_v2(status: u16, body: &[u8]) -> proto::LocalExtensibilityOperationResponse {
    match serde_json::from_slice::<ErrorResponse>(body) {
        Ok(response) => error_reply(error_to_proto(response.error)),
        Err(_) => error_reply(proto_error(
            codes::EXTENSION_ERROR_WITHOUT_BODY,
            None,
            format!("The extension answered HTTP {status} without an error body."),
        )),
    }
}

/// A v2 200 body (`Resource` or `ResourcePreview`: both carry type, apiVersion, identifiers, properties,
/// status) as a gRPC `Resource`.
pub fn resource_to_proto(body: &[u8]) -> Result<proto::Resource, Box<proto::Error>> {
    let object: Map<String, Value> = serde_json::from_slice(body).map_err(|_| {
        proto_error(
            codes::RESPONSE_INVALID_JSON,
            None,
            "The extension answered 200 without a JSON object.",
        )
    })?;
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
    let object_text = |key: &str| -> Result<String, Box<proto::Error>> {
        match object.get(key) {
            Some(value @ Value::Object(_)) => Ok(to_json_string(value)),
            _ => Err(Box::new(proto_error(
                codes::RESPONSE_MISSING_FIELD,
                None,
                format!("The extension's resource has no '{key}' object."),
            ))),
        }
    };
    Ok(proto::Resource {
        r#type: text("type").unwrap_or_default(),
        api_version: text("apiVersion"),
        identifiers: object_text("identifiers")?,
        properties: object_text("properties")?,
        status: text("status"),
        config_id: text("configId"),
    })
}

/// The synthetic resource answered for a v2 204 (deleted, or never existed): the request's reference
/// with empty properties, since gRPC must answer a resource or an error.
pub fn deleted_reply(
    reference: &proto::ResourceReference,
) -> proto::LocalExtensibilityOperationResponse {
    let identifiers = if reference.identifiers.is_empty() {
        "{}".to_owned()
    } else {
        reference.identifiers.clone()
    };
    resource_reply(proto::Resource {
        r#type: reference.r#type.clone(),
        api_version: reference.api_version.clone(),
        identifiers,
        properties: "{}".to_owned(),
        status: None,
        config_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply_with_resource(status: Option<&str>) -> proto::LocalExtensibilityOperationResponse {
        resource_reply(proto::Resource {
            r#type: "File".into(),
            api_version: None,
            identifiers: r#"{"path":"a"}"#.into(),
            properties: r#"{"path":"a","content":"x"}"#.into(),
            status: status.map(str::to_owned),
            config_id: None,
        })
    }

    fn body(response: &TransportResponse) -> Value {
        serde_json::from_slice(&response.body).unwrap()
    }

    #[test]
    fn specification_carries_json_in_strings() {
        let spec = specification_to_proto(
            br#"{"type":"File","apiVersion":"v1","properties":{"a":1},"config":{"root":"/r"},"configId":"x",
                "metadata":{"unevaluated":[]}}"#,
        )
        .unwrap();
        assert_eq!(spec.r#type, "File");
        assert_eq!(spec.api_version.as_deref(), Some("v1"));
        assert_eq!(spec.properties, r#"{"a":1}"#);
        assert_eq!(spec.config.as_deref(), Some(r#"{"root":"/r"}"#));
        assert_eq!(spec.config_id.as_deref(), Some("x"));
        let back: Value =
            serde_json::from_slice(&specification_from_proto(&spec).unwrap()).unwrap();
        assert_eq!(
            back,
            json!({ "type": "File", "apiVersion": "v1", "properties": { "a": 1 }, "config": { "root": "/r" },
                    "configId": "x" })
        );
    }

    #[test]
    fn reference_round_trips() {
        let body =
            br#"{"type":"File","identifiers":{"path":"a"},"config":{"root":"/r"},"configId":"c1"}"#;
        let reference = reference_to_proto(body).unwrap();
        assert_eq!(reference.identifiers, r#"{"path":"a"}"#);
        let back: Value =
            serde_json::from_slice(&reference_from_proto(&reference).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_slice::<Value>(body).unwrap());
    }

    #[test]
    fn bad_request_bodies_are_invalid_request() {
        assert_eq!(
            specification_to_proto(b"{}").unwrap_err().code,
            INVALID_REQUEST
        );
        assert_eq!(
            reference_to_proto(b"not json").unwrap_err().code,
            INVALID_REQUEST
        );
        let bad = proto::ResourceSpecification {
            properties: "[1]".into(),
            ..Default::default()
        };
        assert_eq!(
            specification_from_proto(&bad)
                .unwrap_err()
                .target
                .as_deref(),
            Some("/properties")
        );
    }

    #[test]
    fn resource_maps_to_200_resource() {
        let response = response_from_proto(
            Operation::CreateOrUpdate,
            reply_with_resource(Some("Running")),
        )
        .unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(
            body(&response),
            json!({ "type": "File", "identifiers": { "path": "a" }, "properties": { "path": "a", "content": "x" }, "status": "Running" })
        );
    }

    #[test]
    fn delete_maps_to_204_unless_still_running() {
        let done = response_from_proto(Operation::Delete, reply_with_resource(None)).unwrap();
        assert_eq!((done.status, done.body.len()), (204, 0));
        let running =
            response_from_proto(Operation::Delete, reply_with_resource(Some("Deleting"))).unwrap();
        assert_eq!(running.status, 200);
    }

    #[test]
    fn error_data_maps_by_operation() {
        let not_found = || error_reply(proto_error("ResourceNotFound", None, "gone"));
        assert_eq!(
            response_from_proto(Operation::Get, not_found())
                .unwrap()
                .status,
            404
        );
        assert_eq!(
            response_from_proto(Operation::Delete, not_found())
                .unwrap()
                .status,
            204
        );
        assert_eq!(
            response_from_proto(Operation::CreateOrUpdate, not_found())
                .unwrap()
                .status,
            400
        );
        let mut error = proto_error("Bad", Some("/properties/path".into()), "bad");
        error.details.push(proto::ErrorDetail {
            code: "D".into(),
            target: None,
            message: "d".into(),
        });
        error.inner_error = Some(r#"{"trace":1}"#.into());
        let response = response_from_proto(Operation::Preview, error_reply(error)).unwrap();
        assert_eq!(response.status, 400);
        assert_eq!(
            body(&response),
            json!({ "error": { "code": "Bad", "message": "bad", "target": "/properties/path",
                               "details": [{ "code": "D", "message": "d" }], "innererror": { "trace": 1 } } })
        );
    }

    #[test]
    fn both_or_neither_is_a_contract_violation() {
        let mut both = reply_with_resource(None);
        both.error_data = Some(proto::ErrorData {
            error: Some(proto_error("X", None, "x")),
        });
        for reply in [both, proto::LocalExtensibilityOperationResponse::default()] {
            assert!(matches!(
                response_from_proto(Operation::Get, reply),
                Err(TransportError::InvalidResponse { .. })
            ));
        }
        let empty_error = proto::LocalExtensibilityOperationResponse {
            resource: None,
            error_data: Some(proto::ErrorData { error: None }),
        };
        assert!(response_from_proto(Operation::Get, empty_error).is_err());
    }

    #[test]
    fn non_object_identifiers_are_a_contract_violation() {
        let mut reply = reply_with_resource(None);
        if let Some(resource) = reply.resource.as_mut() {
            resource.identifiers = "\"a\"".into();
        }
        assert!(response_from_proto(Operation::Get, reply).is_err());
    }

    #[test]
    fn preview_maps_to_resource_preview() {
        let response = response_from_proto(Operation::Preview, reply_with_resource(None)).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(body(&response)["identifiers"], json!({ "path": "a" }));
    }

    #[test]
    fn grpc_statuses_map_to_errors() {
        let unavailable = tonic::Status::unavailable("down");
        assert!(matches!(
            response_from_status(Operation::Get, &unavailable),
            Err(TransportError::Unavailable { .. })
        ));
        let not_found = tonic::Status::not_found("no");
        assert_eq!(
            response_from_status(Operation::Get, &not_found)
                .unwrap()
                .status,
            404
        );
        assert_eq!(
            response_from_status(Operation::Delete, &not_found)
                .unwrap()
                .status,
            204
        );
        let internal = tonic::Status::internal("boom");
        let response = response_from_status(Operation::CreateOrUpdate, &internal).unwrap();
        assert_eq!(response.status, 500);
        assert_eq!(body(&response)["error"]["code"], RPC_FAILED);
    }

    #[test]
    fn v2_bodies_map_to_proto_replies() {
        let resource = resource_to_proto(
            br#"{"type":"File","apiVersion":"1","identifiers":{"path":"a"},"properties":{},"config":{},"configId":"c","status":"Running"}"#,
        )
        .unwrap();
        assert_eq!(resource.identifiers, r#"{"path":"a"}"#);
        assert_eq!(resource.status.as_deref(), Some("Running"));
        assert_eq!(resource.config_id.as_deref(), Some("c"));
        assert!(resource_to_proto(br#"{"type":"File","properties":{}}"#).is_err());

        let reply = error_reply_from_v2(
            400,
            br#"{"error":{"code":"C","message":"m","target":"/t","details":[{"code":"D","message":"n"}],"innererror":{"x":1}}}"#,
        );
        let error = reply.error_data.unwrap().error.unwrap();
        assert_eq!(
            (error.code.as_str(), error.target.as_deref()),
            ("C", Some("/t"))
        );
        assert_eq!(error.details.len(), 1);
        assert_eq!(error.inner_error.as_deref(), Some(r#"{"x":1}"#));
        let generic = error_reply_from_v2(502, b"oops")
            .error_data
            .unwrap()
            .error
            .unwrap();
        assert_eq!(generic.code, codes::EXTENSION_ERROR_WITHOUT_BODY);
    }

    #[test]
    fn a_config_id_mismatch_is_a_422() {
        let reply = error_reply(proto_error(CONFIG_ID_MISMATCH, None, "another cluster"));
        for operation in [Operation::Get, Operation::Delete, Operation::CreateOrUpdate] {
            let response = response_from_proto(operation, reply.clone()).unwrap();
            assert_eq!(response.status, 422, "{operation:?}");
            assert_eq!(body(&response)["error"]["code"], CONFIG_ID_MISMATCH);
        }
    }

    #[test]
    fn a_resource_answer_carries_its_config_id() {
        let mut reply = reply_with_resource(None);
        if let Some(resource) = reply.resource.as_mut() {
            resource.config_id = Some("cluster-1".into());
        }
        for operation in [
            Operation::CreateOrUpdate,
            Operation::Get,
            Operation::Preview,
        ] {
            let response = response_from_proto(operation, reply.clone()).unwrap();
            assert_eq!(body(&response)["configId"], "cluster-1", "{operation:?}");
        }
        // A peer that sends none (Bicep's own extensions): none in the answer.
        let response = response_from_proto(Operation::Get, reply_with_resource(None)).unwrap();
        assert!(body(&response).get("configId").is_none());
    }

    #[test]
    fn deleted_reply_echoes_the_reference() {
        let reference = proto::ResourceReference {
            identifiers: r#"{"path":"a"}"#.into(),
            r#type: "File".into(),
            ..Default::default()
        };
        let resource = deleted_reply(&reference).resource.unwrap();
        assert_eq!(
            (resource.identifiers.as_str(), resource.properties.as_str()),
            (r#"{"path":"a"}"#, "{}")
        );
    }
}

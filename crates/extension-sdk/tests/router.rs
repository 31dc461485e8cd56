//! The SDK's HTTP behaviour, called through the in-process transport (the same router a server serves).

use std::sync::{Arc, Mutex};

use cairn_extension_contract::transport::{
    ExtensionTransport, Operation, TransportRequest, TransportResponse,
};
use cairn_extension_sdk::{
    Applied, Apply, Deleted, Extension, ExtensionConfig, ExtensionError, InProcessTransport,
    Lookup, PreviewInput, PreviewOutput, ResourceHandler, ResourcePreviewMetadata, ResourceState,
    Validator,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

struct Config {
    endpoint: String,
}

impl ExtensionConfig for Config {
    const SECRET_PROPERTIES: &'static [&'static str] = &["token"];

    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        match config
            .and_then(|c| c.get("endpoint"))
            .and_then(Value::as_str)
        {
            Some(endpoint) => Ok(Config {
                endpoint: endpoint.to_owned(),
            }),
            None => Err(ExtensionError::invalid(
                "InvalidConfig",
                "/config/endpoint",
                "endpoint is required",
            )),
        }
    }

    fn config_id(&self) -> Option<String> {
        Some(format!("id:{}", self.endpoint))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Props {
    name: String,
    #[serde(default)]
    size: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ids {
    name: String,
}

#[derive(Default)]
struct Things {
    items: Arc<Mutex<Vec<Props>>>,
}

impl ResourceHandler<Config> for Things {
    type Properties = Props;
    type Identifiers = Ids;

    fn resource_type(&self) -> &str {
        "Test/things"
    }

    async fn preview(&self, input: PreviewInput<Config>) -> Result<PreviewOutput, ExtensionError> {
        let name_known = !input.is_unevaluated("/properties/name");
        Ok(PreviewOutput {
            identifiers: name_known.then(|| json!({ "name": input.properties["name"] })),
            properties: input.properties.clone(),
            metadata: ResourcePreviewMetadata {
                immutable: Some(vec!["/properties/name".into()]),
                ..Default::default()
            },
        })
    }

    async fn create_or_update(
        &self,
        request: Apply<Config, Props>,
    ) -> Result<Applied<Ids, Props>, ExtensionError> {
        let mut validator = Validator::new();
        validator.check(
            !request.properties.name.is_empty(),
            "EmptyName",
            "/properties/name",
            "name is empty",
        );
        validator.check(
            request.properties.size < 100,
            "TooBig",
            "/properties/size",
            "size must be below 100",
        );
        validator.finish()?;
        if request.properties.name == "panic" {
            panic!("handler bug");
        }
        let mut items = self.items.lock().unwrap();
        items.retain(|p| p.name != request.properties.name);
        items.push(request.properties.clone());
        Ok(Applied::Resource(ResourceState::new(
            Ids {
                name: request.properties.name.clone(),
            },
            request.properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<Config, Ids>,
    ) -> Result<Option<ResourceState<Ids, Props>>, ExtensionError> {
        let items = self.items.lock().unwrap();
        Ok(items
            .iter()
            .find(|p| p.name == request.identifiers.name)
            .map(|p| ResourceState::new(request.identifiers, p.clone())))
    }

    async fn delete(
        &self,
        request: Lookup<Config, Ids>,
    ) -> Result<Deleted<Ids, Props>, ExtensionError> {
        if request.identifiers.name == "locked" {
            return Err(ExtensionError::conflict("Locked", "the thing is locked"));
        }
        self.items
            .lock()
            .unwrap()
            .retain(|p| p.name != request.identifiers.name);
        Ok(Deleted::Gone)
    }
}

fn transport() -> InProcessTransport {
    InProcessTransport::from_extension(
        Extension::<Config>::new("Test", "1.0.0")
            .also_version("1.1.0")
            .handler(Things::default()),
    )
}

const CONFIG: &str = r#"{ "endpoint": "https://x.test", "token": "s3cr3t" }"#;

async fn call_version(
    transport: &InProcessTransport,
    version: &str,
    operation: Operation,
    body: Value,
) -> (TransportResponse, Value) {
    let response = transport
        .send(TransportRequest {
            operation,
            extension_version: version.into(),
            body: serde_json::to_vec(&body).unwrap(),
            headers: vec![("x-ms-client-request-id".into(), "req-123".into())],
            max_response_bytes: 1 << 20,
        })
        .await
        .unwrap();
    let json = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response, json)
}

async fn call(
    transport: &InProcessTransport,
    operation: Operation,
    body: Value,
) -> (TransportResponse, Value) {
    call_version(transport, "1.0.0", operation, body).await
}

fn config() -> Value {
    serde_json::from_str(CONFIG).unwrap()
}

fn spec(properties: Value) -> Value {
    json!({ "type": "Test/things", "properties": properties, "config": config() })
}

fn reference(name: &str) -> Value {
    json!({ "type": "Test/things", "identifiers": { "name": name }, "config": config() })
}

#[tokio::test]
async fn create_echoes_config_without_secrets_and_adds_config_id() {
    let t = transport();
    let (response, body) = call(
        &t,
        Operation::CreateOrUpdate,
        spec(json!({ "name": "a", "size": 3 })),
    )
    .await;
    assert_eq!(response.status, 200);
    assert_eq!(
        body,
        json!({ "type": "Test/things", "identifiers": { "name": "a" }, "properties": { "name": "a", "size": 3 },
                "config": { "endpoint": "https://x.test" }, "configId": "id:https://x.test" })
    );
    assert!(!String::from_utf8_lossy(&response.body).contains("s3cr3t"));
}

#[tokio::test]
async fn every_response_carries_request_id_and_date() {
    let t = transport();
    for (operation, body) in [
        (Operation::Get, reference("missing")),
        (Operation::CreateOrUpdate, json!("not an object")),
        (Operation::Delete, reference("missing")),
    ] {
        let (response, _) = call(&t, operation, body).await;
        assert_eq!(
            response.header("x-ms-request-id"),
            Some("req-123"),
            "{operation}"
        );
        let date = response.header("date").unwrap_or_default();
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
    }
}

#[tokio::test]
async fn get_missing_is_404_and_delete_missing_is_204() {
    let t = transport();
    let (response, body) = call(&t, Operation::Get, reference("nope")).await;
    assert_eq!(response.status, 404);
    assert_eq!(body["error"]["code"], "ResourceNotFound");
    let (response, _) = call(&t, Operation::Delete, reference("nope")).await;
    assert_eq!((response.status, response.body.len()), (204, 0));
}

#[tokio::test]
async fn lifecycle_round_trips_and_other_versions_are_rejected() {
    let t = transport();
    call(&t, Operation::CreateOrUpdate, spec(json!({ "name": "a" }))).await;
    let (response, body) = call_version(&t, "1.1.0", Operation::Get, reference("a")).await;
    assert_eq!(
        (response.status, &body["properties"]),
        (200, &json!({ "name": "a", "size": 0 }))
    );
    let (response, body) = call_version(&t, "2.0.0", Operation::Get, reference("a")).await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (400, Some("UnsupportedExtensionVersion"))
    );
    let (response, _) = call(&t, Operation::Delete, reference("a")).await;
    assert_eq!(response.status, 204);
    let (response, _) = call(&t, Operation::Get, reference("a")).await;
    assert_eq!(response.status, 404);
}

#[tokio::test]
async fn unknown_types_and_bad_bodies_are_odata_errors() {
    let t = transport();
    let (response, body) = call(
        &t,
        Operation::Get,
        json!({ "type": "Nope", "identifiers": {}, "config": config() }),
    )
    .await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (400, Some("UnsupportedResourceType"))
    );
    assert_eq!(body["error"]["target"], "/type");
    let (response, body) = call(&t, Operation::Get, json!({ "identifiers": {} })).await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (400, Some("InvalidRequest"))
    );
    let (response, body) = call(
        &t,
        Operation::CreateOrUpdate,
        spec(json!({ "name": "a", "extra": 1 })),
    )
    .await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (400, Some("InvalidProperties"))
    );
    assert_eq!(body["error"]["target"], "/properties/extra");
}

/// Answers every type no other handler serves, naming the type it was asked for.
struct AnyType;

impl ResourceHandler<Config> for AnyType {
    type Properties = Value;
    type Identifiers = Value;

    fn resource_type(&self) -> &str {
        "(any)"
    }

    async fn create_or_update(
        &self,
        request: Apply<Config, Value>,
    ) -> Result<Applied<Value, Value>, ExtensionError> {
        Ok(Applied::Resource(ResourceState::new(
            json!({ "type": request.resource_type }),
            request.properties,
        )))
    }

    async fn get(
        &self,
        _request: Lookup<Config, Value>,
    ) -> Result<Option<ResourceState<Value, Value>>, ExtensionError> {
        Ok(None)
    }

    async fn delete(
        &self,
        _request: Lookup<Config, Value>,
    ) -> Result<Deleted<Value, Value>, ExtensionError> {
        Ok(Deleted::Gone)
    }
}

#[tokio::test]
async fn a_fallback_serves_every_type_without_a_handler_of_its_own() {
    let t = InProcessTransport::from_extension(
        Extension::<Config>::new("Test", "1.0.0")
            .handler(Things::default())
            .fallback(AnyType),
    );
    let (response, body) = call(
        &t,
        Operation::CreateOrUpdate,
        json!({ "type": "apps/Deployment", "properties": { "a": 1 }, "config": config() }),
    )
    .await;
    assert_eq!(response.status, 200, "{body}");
    assert_eq!(body["identifiers"], json!({ "type": "apps/Deployment" }));
    // A type with a handler of its own still goes to it.
    let (response, body) = call(&t, Operation::CreateOrUpdate, spec(json!({ "name": "a" }))).await;
    assert_eq!(response.status, 200, "{body}");
    assert_eq!(body["identifiers"], json!({ "name": "a" }));
}

#[tokio::test]
async fn validation_errors_aggregate() {
    let t = transport();
    let (response, body) = call(
        &t,
        Operation::CreateOrUpdate,
        spec(json!({ "name": "", "size": 500 })),
    )
    .await;
    assert_eq!(response.status, 400);
    assert_eq!(body["error"]["code"], "MultipleErrorsOccurred");
    let targets: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["/properties/name", "/properties/size"]);
}

#[tokio::test]
async fn config_errors_and_config_id_mismatch() {
    let t = transport();
    let (response, body) = call(
        &t,
        Operation::Get,
        json!({ "type": "Test/things", "identifiers": { "name": "a" } }),
    )
    .await;
    assert_eq!(
        (response.status, body["error"]["target"].as_str()),
        (400, Some("/config/endpoint"))
    );
    let mut mismatched = reference("a");
    mismatched["configId"] = json!("id:https://other.test");
    let (response, body) = call(&t, Operation::Get, mismatched).await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (422, Some("ConfigIdMismatch"))
    );
    let mut matching = reference("a");
    matching["configId"] = json!("id:https://x.test");
    let (response, _) = call(&t, Operation::Get, matching).await;
    assert_eq!(response.status, 404);
}

#[tokio::test]
async fn handler_errors_keep_their_status_and_panics_become_500() {
    let t = transport();
    let (response, body) = call(&t, Operation::Delete, reference("locked")).await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (409, Some("Locked"))
    );
    let (response, body) = call(
        &t,
        Operation::CreateOrUpdate,
        spec(json!({ "name": "panic" })),
    )
    .await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (500, Some("InternalServerError"))
    );
    // The extension still works afterwards.
    let (response, _) = call(&t, Operation::CreateOrUpdate, spec(json!({ "name": "b" }))).await;
    assert_eq!(response.status, 200);
}

#[tokio::test]
async fn preview_reports_unknown_identifiers_and_unevaluated_paths() {
    let t = transport();
    let body = json!({ "type": "Test/things", "properties": { "name": "[parameters('n')]", "size": "[variables('s')]" },
                       "config": { "endpoint": "[reference('x').url]", "token": "t" },
                       "metadata": { "unevaluated": ["/properties/name", "/properties/size", "/config/endpoint"] } });
    let (response, preview) = call(&t, Operation::Preview, body).await;
    assert_eq!(response.status, 200, "{preview}");
    assert_eq!(preview["identifiers"], json!({}));
    assert_eq!(preview["properties"]["name"], "[parameters('n')]");
    assert_eq!(
        preview["config"],
        json!({ "endpoint": "[reference('x').url]" })
    );
    assert_eq!(preview.get("configId"), None);
    assert_eq!(
        preview["metadata"],
        json!({ "immutable": ["/properties/name"], "unknown": ["/identifiers", "/configId"],
                "unevaluated": ["/properties/size", "/config/endpoint"] })
    );
}

#[tokio::test]
async fn long_running_operations_without_a_tracker_are_unsupported() {
    let t = transport();
    let (response, body) = call(
        &t,
        Operation::GetLongRunningOperation,
        json!({ "operationId": "x" }),
    )
    .await;
    assert_eq!(
        (response.status, body["error"]["code"].as_str()),
        (400, Some("UnsupportedOperation"))
    );
}

#[tokio::test]
async fn unknown_routes_methods_and_oversized_bodies_use_the_error_shape() {
    use tower::ServiceExt;
    let router = Extension::<Config>::new("Test", "1.0.0")
        .handler(Things::default())
        .router();
    let send = |request: http::Request<axum::body::Body>| {
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    let (status, body) = send(
        http::Request::post("/1.0.0/resource/save")
            .body(Default::default())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("NotFound"))
    );
    let (status, body) = send(
        http::Request::get("/1.0.0/resource/get")
            .body(Default::default())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let huge = vec![b' '; 5 * 1024 * 1024];
    let (status, body) = send(
        http::Request::post("/1.0.0/resource/get")
            .body(huge.into())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("RequestBodyTooLarge"))
    );
    let (status, body) = send(
        http::Request::get("/ping")
            .body(Default::default())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body),
        (200, json!({ "name": "Test", "versions": ["1.0.0"] }))
    );
}

//! `ExtensionConfig::resolve`: a config completed by asking its control plane (here a fake lookup) before
//! `configId` is computed; a failure fails the operation, except a preview, which reports `configId` unknown.
//! And `Extension::config_guard`: the hosting process's policy, which refuses previews too.

use cairn_extension_contract::transport::{ExtensionTransport, Operation, TransportRequest};
use cairn_extension_sdk::{
    Applied, Apply, Deleted, Extension, ExtensionConfig, ExtensionError, InProcessTransport,
    Lookup, PreviewInput, PreviewOutput, ResourceHandler, ResourcePreviewMetadata, ResourceState,
};
use serde_json::{Value, json};

/// `server` names a control plane; its identity is only known after asking it.
struct Config {
    server: String,
    identity: Option<String>,
}

impl ExtensionConfig for Config {
    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        let server = config
            .and_then(|c| c.get("server"))
            .and_then(Value::as_str)
            .ok_or_else(|| ExtensionError::invalid("InvalidConfig", "/config/server", "server?"))?;
        Ok(Config {
            server: server.to_owned(),
            identity: None,
        })
    }

    async fn resolve(&mut self) -> Result<(), ExtensionError> {
        tokio::task::yield_now().await;
        if self.server == "down" {
            return Err(ExtensionError::new(
                503,
                "ServerUnreachable",
                "cannot reach it",
            ));
        }
        self.identity = Some(format!("cluster-of-{}", self.server));
        Ok(())
    }

    fn config_id(&self) -> Option<String> {
        self.identity.clone()
    }
}

struct Echo;

impl ResourceHandler<Config> for Echo {
    type Properties = Value;
    type Identifiers = Value;

    fn resource_type(&self) -> &str {
        "Test/echo"
    }

    async fn preview(&self, input: PreviewInput<Config>) -> Result<PreviewOutput, ExtensionError> {
        Ok(PreviewOutput {
            identifiers: Some(json!({ "name": input.properties["name"] })),
            properties: input.properties,
            metadata: ResourcePreviewMetadata::default(),
        })
    }

    async fn create_or_update(
        &self,
        request: Apply<Config, Value>,
    ) -> Result<Applied<Value, Value>, ExtensionError> {
        let identity = request.config.identity.clone();
        Ok(Applied::Resource(ResourceState::new(
            json!({ "name": request.properties["name"] }),
            json!({ "name": request.properties["name"], "seenIdentity": identity }),
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

async fn call(operation: Operation, body: Value) -> (u16, Value) {
    send(
        InProcessTransport::from_extension(Extension::<Config>::new("Test", "1.0.0").handler(Echo)),
        operation,
        body,
    )
    .await
}

async fn send(transport: InProcessTransport, operation: Operation, body: Value) -> (u16, Value) {
    let response = transport
        .send(TransportRequest {
            operation,
            extension_version: "1.0.0".into(),
            body: serde_json::to_vec(&body).unwrap(),
            headers: Vec::new(),
            max_response_bytes: 1 << 20,
        })
        .await
        .unwrap();
    (
        response.status,
        serde_json::from_slice(&response.body).unwrap(),
    )
}

fn spec(server: &str) -> Value {
    json!({ "type": "Test/echo", "properties": { "name": "a" }, "config": { "server": server } })
}

#[tokio::test]
async fn the_resolved_config_reaches_handlers_and_config_id() {
    let (status, body) = call(Operation::CreateOrUpdate, spec("db1")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["configId"], "cluster-of-db1");
    assert_eq!(body["properties"]["seenIdentity"], "cluster-of-db1");
    let mut mismatched = spec("db1");
    mismatched["configId"] = json!("cluster-of-db2");
    let (status, body) = call(Operation::CreateOrUpdate, mismatched).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("ConfigIdMismatch"))
    );
}

#[tokio::test]
async fn a_failed_resolution_fails_the_operation_with_its_error() {
    let (status, body) = call(Operation::CreateOrUpdate, spec("down")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("ServerUnreachable"))
    );
    let mut reference = spec("down");
    reference["identifiers"] = json!({ "name": "a" });
    let (status, _) = call(Operation::Delete, reference).await;
    assert_eq!(status, 503);
}

#[tokio::test]
async fn a_preview_survives_a_failed_resolution_with_config_id_unknown() {
    let (status, body) = call(Operation::Preview, spec("down")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["identifiers"], json!({ "name": "a" }));
    assert_eq!(body.get("configId"), None);
    assert_eq!(body["metadata"]["unknown"], json!(["/configId"]));
    let (status, body) = call(Operation::Preview, spec("db1")).await;
    assert_eq!(status, 200);
    assert_eq!(body["configId"], "cluster-of-db1");
}

#[tokio::test]
async fn a_config_guard_refuses_before_anything_runs_and_may_rewrite_the_config() {
    let guarded = || {
        InProcessTransport::from_extension(
            Extension::<Config>::new("Test", "1.0.0")
                .handler(Echo)
                .config_guard(|mut config: Config| {
                    if config.server == "forbidden" {
                        return Err(ExtensionError::invalid(
                            "ServerNotAllowed",
                            "/config/server",
                            "not this one",
                        ));
                    }
                    config.server = format!("pinned-{}", config.server);
                    Ok(config)
                }),
        )
    };
    for operation in [Operation::Preview, Operation::CreateOrUpdate] {
        let (status, body) = send(guarded(), operation, spec("forbidden")).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("ServerNotAllowed")),
            "{body}"
        );
    }
    let (status, body) = send(guarded(), Operation::CreateOrUpdate, spec("db1")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["configId"], "cluster-of-pinned-db1");
}

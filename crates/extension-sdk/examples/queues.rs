//! A small extension written with the SDK: in-memory queues with a secret config token, RELO creation and
//! preview. Run it and check it with the conformance kit:
//!
//! ```sh
//! cargo run -p cairn-extension-sdk --example queues -- --http 8080
//! cairn extension conformance --url http://127.0.0.1:8080 --version 1.0.0 --type Acme.Queue/queues \
//!   --properties '{"name":"orders","maxDepth":5}' --updated-properties '{"name":"orders","maxDepth":9}' \
//!   --config '{"endpoint":"https://queues.example","token":"s3cr3t"}' --secret-config token
//! ```

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_extension_sdk::{
    Applied, Apply, Deleted, Extension, ExtensionConfig, ExtensionError, Lookup, OperationStatus,
    PreviewInput, PreviewOutput, ReloBoard, ResourceHandler, ResourcePreviewMetadata,
    ResourceState, Validator, serve_main,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `{ endpoint, token }`: `token` is secret, so it is never echoed.
struct QueueConfig {
    endpoint: String,
}

impl ExtensionConfig for QueueConfig {
    const SECRET_PROPERTIES: &'static [&'static str] = &["token"];

    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        let text = |name: &str| config.and_then(|c| c.get(name)).and_then(Value::as_str);
        let mut validator = Validator::new();
        validator.check(
            text("endpoint").is_some(),
            "InvalidConfig",
            "/config/endpoint",
            "'endpoint' is required.",
        );
        validator.check(
            text("token").is_some(),
            "InvalidConfig",
            "/config/token",
            "'token' is required.",
        );
        validator.finish()?;
        Ok(QueueConfig {
            endpoint: text("endpoint").unwrap_or_default().to_owned(),
        })
    }

    /// Queues on the same endpoint are the same control plane.
    fn config_id(&self) -> Option<String> {
        Some(self.endpoint.trim_end_matches('/').to_ascii_lowercase())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Queue {
    name: String,
    max_depth: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct QueueId {
    name: String,
}

#[derive(Default)]
struct Queues {
    queues: Arc<Mutex<HashMap<String, Queue>>>,
    provisioning: ReloBoard,
}

impl ResourceHandler<QueueConfig> for Queues {
    type Properties = Queue;
    type Identifiers = QueueId;

    fn resource_type(&self) -> &str {
        "Acme.Queue/queues"
    }

    async fn preview(
        &self,
        input: PreviewInput<QueueConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
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

    /// Records the queue at once and "provisions" it in the background (RELO): gets report `Running`
    /// until the work is done.
    async fn create_or_update(
        &self,
        request: Apply<QueueConfig, Queue>,
    ) -> Result<Applied<QueueId, Queue>, ExtensionError> {
        let queue = request.properties;
        if queue.max_depth == 0 {
            return Err(ExtensionError::invalid(
                "InvalidDepth",
                "/properties/maxDepth",
                "maxDepth must be positive.",
            ));
        }
        self.queues
            .lock()
            .map_err(|_| ExtensionError::internal("The queue store is unavailable."))?
            .insert(queue.name.clone(), queue.clone());
        self.provisioning.run(queue.name.clone(), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(())
        });
        let status = self
            .provisioning
            .status(&queue.name)
            .map_or_else(OperationStatus::running, |(s, _)| s);
        Ok(Applied::Resource(
            ResourceState::new(
                QueueId {
                    name: queue.name.clone(),
                },
                queue,
            )
            .with_status(status),
        ))
    }

    async fn get(
        &self,
        request: Lookup<QueueConfig, QueueId>,
    ) -> Result<Option<ResourceState<QueueId, Queue>>, ExtensionError> {
        let queues = self
            .queues
            .lock()
            .map_err(|_| ExtensionError::internal("The queue store is unavailable."))?;
        let Some(queue) = queues.get(&request.identifiers.name).cloned() else {
            return Ok(None);
        };
        let mut state = ResourceState::new(request.identifiers, queue);
        if let Some((status, error)) = self.provisioning.status(&state.identifiers.name) {
            state.status = Some(status);
            state.error = error;
        }
        Ok(Some(state))
    }

    async fn delete(
        &self,
        request: Lookup<QueueConfig, QueueId>,
    ) -> Result<Deleted<QueueId, Queue>, ExtensionError> {
        self.queues
            .lock()
            .map_err(|_| ExtensionError::internal("The queue store is unavailable."))?
            .remove(&request.identifiers.name);
        self.provisioning.clear(&request.identifiers.name);
        Ok(Deleted::Gone)
    }
}

fn main() -> ExitCode {
    serve_main(Extension::<QueueConfig>::new("Queues", "1.0.0").handler(Queues::default()))
}

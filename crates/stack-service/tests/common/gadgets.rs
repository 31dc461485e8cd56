//! `Gadgets` 1.0.0, a test extension for drift and adoption: gadgets keyed by `properties.name`, changed or removed
//! "by hand" behind a stack's back (`tamper`, `remove`), a write-only `secret` property it never returns, a
//! `revision` it calculates itself (bumped on every write and every read; its preview names it calculated), a
//! credential (`token`, from the vault in tests) it insists on and never echoes, and a switch that takes it down.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use serde_json::{Value, json};

#[derive(Default)]
pub struct Gadgets {
    resources: Mutex<HashMap<String, Value>>,
    /// The token the extension accepts.
    pub accepted_token: Mutex<String>,
    /// Answers 503 to everything while set.
    pub down: AtomicBool,
    /// Delay of every `get`, in milliseconds.
    pub get_latency_ms: AtomicU64,
    gets_in_flight: AtomicUsize,
    /// The most `get`s that ran at once.
    pub max_gets_in_flight: AtomicUsize,
    /// Every `createOrUpdate` that reached the extension, by gadget name.
    pub writes: Mutex<Vec<String>>,
    /// Every `preview` and `get` that reached the extension, as `preview NAME` or `get NAME`.
    pub reads: Mutex<Vec<String>>,
}

fn error(status: u16, code: &str, message: &str) -> TransportResponse {
    TransportResponse::json(
        status,
        json!({"error": {"code": code, "message": message}})
            .to_string()
            .into_bytes(),
    )
}

fn answer(body: &Value, name: &str, properties: &Value) -> TransportResponse {
    TransportResponse::json(
        200,
        json!({"type": body["type"], "apiVersion": body.get("apiVersion"), "identifiers": {"name": name},
               "properties": properties, "configId": "gadget-plane"})
        .to_string()
        .into_bytes(),
    )
}

impl Gadgets {
    pub fn new(token: &str) -> Arc<Self> {
        let gadgets = Arc::new(Self::default());
        *gadgets.accepted_token.lock().unwrap() = token.to_owned();
        gadgets
    }

    /// The gadget as the extension holds it.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.resources.lock().unwrap().get(name).cloned()
    }

    /// Changes a property behind the stacks' back.
    pub fn tamper(&self, name: &str, property: &str, value: Value) {
        let mut resources = self.resources.lock().unwrap();
        let gadget = resources.get_mut(name).expect("a gadget to tamper with");
        gadget[property] = value;
    }

    /// Creates a gadget behind the stacks' back.
    pub fn plant(&self, name: &str, properties: Value) {
        let mut stored = properties;
        stored["name"] = json!(name);
        stored["revision"] = json!(1);
        self.resources
            .lock()
            .unwrap()
            .insert(name.to_owned(), stored);
    }

    /// Deletes a gadget behind the stacks' back.
    pub fn remove(&self, name: &str) {
        self.resources.lock().unwrap().remove(name);
    }

    async fn handle(&self, request: TransportRequest) -> TransportResponse {
        if self.down.load(Ordering::SeqCst) {
            return error(503, "ServiceUnavailable", "the gadget service is down");
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let token = body.pointer("/config/token").and_then(Value::as_str);
        if token != Some(self.accepted_token.lock().unwrap().as_str()) {
            return error(401, "Unauthorized", "the credential was refused");
        }
        match request.operation {
            Operation::CreateOrUpdate => {
                let mut properties = body.get("properties").cloned().unwrap_or(json!({}));
                let name = properties["name"].as_str().unwrap_or_default().to_owned();
                if let Value::Object(map) = &mut properties {
                    // Write-only: applied, never returned.
                    map.remove("secret");
                }
                let mut resources = self.resources.lock().unwrap();
                let revision = resources
                    .get(&name)
                    .and_then(|g| g["revision"].as_u64())
                    .unwrap_or(0);
                properties["revision"] = json!(revision + 1);
                resources.insert(name.clone(), properties.clone());
                self.writes.lock().unwrap().push(name.clone());
                answer(&body, &name, &properties)
            }
            Operation::Get => {
                let asked = body.pointer("/identifiers/name").and_then(Value::as_str);
                self.reads
                    .lock()
                    .unwrap()
                    .push(format!("get {}", asked.unwrap_or_default()));
                let now = self.gets_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_gets_in_flight.fetch_max(now, Ordering::SeqCst);
                let latency = self.get_latency_ms.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(latency)).await;
                self.gets_in_flight.fetch_sub(1, Ordering::SeqCst);
                let name = body
                    .pointer("/identifiers/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let mut resources = self.resources.lock().unwrap();
                match resources.get_mut(&name) {
                    Some(gadget) => {
                        // Calculated by the extension: it moves on every read.
                        let revision = gadget["revision"].as_u64().unwrap_or(0);
                        gadget["revision"] = json!(revision + 1);
                        answer(&body, &name, gadget)
                    }
                    None => error(404, "ResourceNotFound", "no such gadget"),
                }
            }
            Operation::Preview => {
                let mut properties = body.get("properties").cloned().unwrap_or(json!({}));
                let name = properties["name"].as_str().unwrap_or_default().to_owned();
                self.reads.lock().unwrap().push(format!("preview {name}"));
                if let Value::Object(map) = &mut properties {
                    map.remove("secret");
                }
                TransportResponse::json(
                    200,
                    json!({"type": body["type"], "apiVersion": body.get("apiVersion"),
                           "identifiers": {"name": name}, "properties": properties,
                           "configId": "gadget-plane",
                           "metadata": {"calculated": ["/properties/revision"]}})
                    .to_string()
                    .into_bytes(),
                )
            }
            Operation::Delete => {
                let name = body
                    .pointer("/identifiers/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.resources.lock().unwrap().remove(&name);
                TransportResponse::json(204, Vec::new())
            }
            Operation::GetLongRunningOperation => {
                error(400, "NotSupported", "no long-running operations here")
            }
        }
    }
}

/// The transport the host calls.
pub struct GadgetTransport(pub Arc<Gadgets>);

impl ExtensionTransport for GadgetTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move { Ok(self.0.handle(request).await) })
    }
}

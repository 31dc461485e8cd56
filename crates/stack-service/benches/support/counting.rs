//! What the stack benches share: an extension transport that counts its answers by operation and status, so each
//! phase can say what the extension answered (and how often it refused).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse,
};
use serde_json::Value;

/// The extension's answers during one phase: (operation, HTTP status, error code) → calls.
pub type Answers = Arc<Mutex<BTreeMap<String, usize>>>;

/// The in-process extension, counting its answers by operation and status (e.g. the 409s a delete round
/// meets when it runs deletes in an order the server refuses).
pub struct Counting {
    pub inner: Box<dyn ExtensionTransport>,
    pub answers: Answers,
}

impl ExtensionTransport for Counting {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let operation = format!("{:?}", request.operation);
            let response = self.inner.send(request).await;
            let status = match &response {
                Err(_) => "transport error".to_owned(),
                Ok(answer) if answer.status >= 400 => {
                    let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
                    let code = body["error"]["code"].as_str().unwrap_or("?");
                    format!("{} {code}", answer.status)
                }
                Ok(answer) => answer.status.to_string(),
            };
            *self
                .answers
                .lock()
                .expect("the counts")
                .entry(format!("{operation} {status}"))
                .or_default() += 1;
            response
        })
    }
}

pub fn take(answers: &Answers) -> String {
    let counts = std::mem::take(&mut *answers.lock().expect("the counts"));
    counts
        .iter()
        .map(|(answer, calls)| format!("{answer} x{calls}"))
        .collect::<Vec<_>>()
        .join(", ")
}

//! The extension host API's long-running deletes through the server: the `Location` in seed 004's
//! `/{extension}/{version}/...` shape, still answering after a restart on the same data directory, with the
//! pending operation's config never on disk in plaintext.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use cairn_engine::Providers;
use cairn_extension_contract::ReferenceIdParts;
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry};
use cairn_server::AppState;
use cairn_store::Store;
use cairn_store_sqlite::SqliteStore;
use common::*;
use serde_json::json;

const PREFIX: &str = "/providers/Cairn.Extensibility";
const CANARY: &str = "host-operation-canary-3d9b51e0";

/// An extension whose deletes are stepwise LROs: running on the first poll, done on the second.
#[derive(Default)]
struct SlowDeletes {
    polls: AtomicUsize,
}

impl ExtensionTransport for SlowDeletes {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        let answer = match request.operation {
            Operation::Delete => TransportResponse::json(
                202,
                json!({"status": "Running", "retryAfterSeconds": 1, "operationHandle": {"op": "del-1"}})
                    .to_string()
                    .into_bytes(),
            ),
            Operation::GetLongRunningOperation => {
                let status = if self.polls.fetch_add(1, Ordering::SeqCst) == 0 {
                    json!({"status": "Running", "operationHandle": {"op": "del-1"}})
                } else {
                    json!({"status": "Succeeded"})
                };
                TransportResponse::json(200, status.to_string().into_bytes())
            }
            _ => TransportResponse::json(
                400,
                json!({"error": {"code": "Unsupported", "message": "not scripted"}})
                    .to_string()
                    .into_bytes(),
            ),
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// A server over the data directory `dir`, with `Widgets` 1.0.0 served by `extension`.
async fn server_over(
    dir: &std::path::Path,
    extension: Arc<SlowDeletes>,
) -> (Router, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir).await.expect("store"));
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new("Widgets", "1.0.0", extension));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings::default(),
        "http://cairn.test",
    ));
    let engine = engine(store.clone(), host.clone());
    let state = AppState::new(engine.clone())
        .with_options(cairn_server::ServerOptions {
            // The test addresses the server as `cairn.test`.
            allowed_hosts: vec!["cairn.test".into()],
            ..cairn_server::ServerOptions::default()
        })
        .with_extension_host(host.clone())
        .with_stack_service(cairn_stack_service::StackService::new(
            engine,
            store.clone(),
            host,
            Providers::empty(),
            cairn_stack_service::StackServiceSettings::default(),
        ));
    (cairn_server::app(state), store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_delete_location_answers_after_a_restart() {
    let dir = tempfile::tempdir().expect("data dir");
    let extension = Arc::new(SlowDeletes::default());
    let (router, store) = server_over(dir.path(), extension.clone()).await;
    let id = ReferenceIdParts {
        extension_name: "Widgets".into(),
        resource_type: "widget".into(),
        api_version: Some("v1".into()),
        config_id: Some("CFG".into()),
        identifiers: json!({"name": "w1"}),
        needs_config: true,
    }
    .to_reference_id()
    .expect("reference id");
    let started = call(
        &router,
        "POST",
        &format!("{PREFIX}/extensions/Widgets/1.0.0/resources/{id}/deleteWithConfig"),
        Some(json!({"token": CANARY}).to_string()),
        None,
    )
    .await;
    assert_eq!(started.status.as_u16(), 202, "{}", started.text);
    let location = started.headers["location"].to_str().expect("location");
    let path = location
        .strip_prefix("http://cairn.test")
        .expect("the host's own endpoint")
        .to_owned();
    assert!(
        path.starts_with(&format!("{PREFIX}/Widgets/1.0.0/operations/")),
        "seed 004's shape: {path}"
    );
    store.close().await.expect("close");
    drop(router);
    assert!(
        files_containing(dir.path(), CANARY.as_bytes()).is_empty(),
        "the pending operation's config is on disk in plaintext"
    );

    let (router, store) = server_over(dir.path(), extension.clone()).await;
    let running = call(&router, "GET", &path, None, None).await;
    assert_eq!(running.status.as_u16(), 200, "{}", running.text);
    assert_eq!(running.json, json!({"status": "Running"}));
    assert!(running.headers.contains_key("retry-after"));
    // The earlier `Location` shape is an alias of the same operation.
    let alias = path.replace(
        &format!("{PREFIX}/Widgets/"),
        &format!("{PREFIX}/extensions/Widgets/"),
    );
    let done = call(&router, "GET", &alias, None, None).await;
    assert_eq!(done.json, json!({"status": "Succeeded"}), "{}", done.text);
    let gone = call(&router, "GET", &path, None, None).await;
    assert_eq!(gone.status.as_u16(), 404);
    assert_eq!(gone.json["error"]["code"], "OperationNotFound");
    assert_eq!(extension.polls.load(Ordering::SeqCst), 2);
    store.close().await.expect("close");
}

//! An SDK extension served on a Unix socket answers the local-deploy gRPC protocol (and v2 on the same
//! listener), including a stepwise LRO that the gRPC bridge waits out.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_extension_grpc::proto::{ResourceReference, ResourceSpecification};
use cairn_extension_grpc::{BicepExtensionClient, unix_socket_channel};
use cairn_extension_sdk::{
    Applied, Apply, ContractError, Deleted, Extension, ExtensionError, Listen, Lookup, NoConfig,
    OperationTracker, PreviewInput, PreviewOutput, ResourceHandler, ResourceState, full_router,
    serve,
};
use serde_json::{Value, json};

type Store = Arc<Mutex<Vec<(String, Value)>>>;

/// Stores `{ name, ... }` objects; creation is a stepwise LRO when `slow` is set.
struct Notes {
    store: Store,
    tracker: OperationTracker,
}

impl ResourceHandler<NoConfig> for Notes {
    type Properties = Value;
    type Identifiers = Value;

    fn resource_type(&self) -> &str {
        "Test/notes"
    }

    async fn preview(
        &self,
        input: PreviewInput<NoConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        Ok(PreviewOutput {
            identifiers: Some(json!({ "name": input.properties["name"] })),
            properties: input.properties.clone(),
            metadata: Default::default(),
        })
    }

    async fn create_or_update(
        &self,
        request: Apply<NoConfig, Value>,
    ) -> Result<Applied<Value, Value>, ExtensionError> {
        let Some(name) = request.properties["name"].as_str().map(str::to_owned) else {
            return Err(ExtensionError::invalid(
                "MissingName",
                "/properties/name",
                "name is required",
            ));
        };
        let properties = request.properties.clone();
        if properties["slow"] == json!(true) {
            let store = Arc::clone(&self.store);
            return Ok(Applied::Accepted(self.tracker.start(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                store.lock().unwrap().push((name, properties));
                Ok::<(), ContractError>(())
            })));
        }
        self.store
            .lock()
            .unwrap()
            .push((name.clone(), properties.clone()));
        Ok(Applied::Resource(ResourceState::new(
            json!({ "name": name }),
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<NoConfig, Value>,
    ) -> Result<Option<ResourceState<Value, Value>>, ExtensionError> {
        let store = self.store.lock().unwrap();
        let found = store
            .iter()
            .rev()
            .find(|(name, _)| json!(name) == request.identifiers["name"]);
        Ok(found.map(|(_, properties)| {
            ResourceState::new(request.identifiers.clone(), properties.clone())
        }))
    }

    async fn delete(
        &self,
        request: Lookup<NoConfig, Value>,
    ) -> Result<Deleted<Value, Value>, ExtensionError> {
        self.store
            .lock()
            .unwrap()
            .retain(|(name, _)| json!(name) != request.identifiers["name"]);
        Ok(Deleted::Gone)
    }
}

fn spec(properties: Value) -> ResourceSpecification {
    ResourceSpecification {
        config: None,
        r#type: "Test/notes".into(),
        api_version: None,
        properties: properties.to_string(),
        config_id: None,
    }
}

fn reference(name: &str) -> ResourceReference {
    ResourceReference {
        identifiers: json!({ "name": name }).to_string(),
        config: None,
        r#type: "Test/notes".into(),
        api_version: None,
        config_id: None,
    }
}

#[tokio::test]
async fn grpc_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ext.sock");
    let tracker = OperationTracker::with_retry_after(0);
    let extension = Extension::<NoConfig>::new("Notes", "1.0.0")
        .handler(Notes {
            store: Arc::default(),
            tracker: tracker.clone(),
        })
        .operations(tracker);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listen = Listen::Socket(socket.clone());
    let server = tokio::spawn(async move {
        serve(
            full_router(extension),
            &listen,
            async move {
                let _ = stopped.await;
            },
            |_| {},
        )
        .await
    });

    let mut client = BicepExtensionClient::new(unix_socket_channel(&socket));
    let mut ready = false;
    for _ in 0..100 {
        if client.ping().await.is_ok() {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready, "the server never answered Ping");

    let created = client
        .create_or_update(spec(json!({ "name": "a", "text": "hi" })))
        .await
        .unwrap();
    let resource = created.resource.expect("resource");
    assert_eq!(resource.identifiers, r#"{"name":"a"}"#);
    assert_eq!(
        serde_json::from_str::<Value>(&resource.properties).unwrap(),
        json!({ "name": "a", "text": "hi" })
    );

    let got = client.get(reference("a")).await.unwrap();
    assert!(got.resource.is_some() && got.error_data.is_none());

    let missing = client.get(reference("zzz")).await.unwrap();
    assert_eq!(
        missing.error_data.unwrap().error.unwrap().code,
        "ResourceNotFound"
    );

    let invalid = client
        .create_or_update(spec(json!({ "text": "no name" })))
        .await
        .unwrap();
    let error = invalid.error_data.unwrap().error.unwrap();
    assert_eq!(
        (error.code.as_str(), error.target.as_deref()),
        ("MissingName", Some("/properties/name"))
    );

    let unsupported = client
        .get(ResourceReference {
            r#type: "Other".into(),
            ..reference("a")
        })
        .await
        .unwrap();
    assert_eq!(
        unsupported.error_data.unwrap().error.unwrap().code,
        "UnsupportedResourceType"
    );

    // A stepwise LRO is waited out by the bridge, then read back.
    let slow = client
        .create_or_update(spec(json!({ "name": "b", "slow": true })))
        .await
        .unwrap();
    let resource = slow.resource.expect("resource after the LRO");
    assert_eq!(resource.identifiers, r#"{"name":"b"}"#);

    let deleted = client.delete(reference("a")).await.unwrap();
    assert!(deleted.resource.is_some(), "204 maps to a resource echo");
    let gone = client.get(reference("a")).await.unwrap();
    assert!(gone.error_data.is_some());

    let type_files = client.get_type_files().await.unwrap_err();
    assert_eq!(type_files.code(), tonic::Code::Unimplemented);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
    assert!(!socket.exists(), "the socket file is removed on shutdown");
}

/// Notes' types: `Test/notes@1.0.0`, a required `name`.
fn note_types() -> cairn_extension_sdk::types::TypeSet {
    use cairn_extension_sdk::types::{Flags, TypeBuilder};
    let mut b = TypeBuilder::new("Notes", "1.0.0");
    let string = b.string();
    let body = b.object(
        "note",
        vec![("name", string, Flags::REQUIRED | Flags::IDENTIFIER, "")],
        None,
    );
    b.resource("Test/notes", "1.0.0", body);
    b.finish()
}

#[tokio::test]
async fn declared_types_are_served_by_get_type_files() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("typed.sock");
    let extension = Extension::<NoConfig>::new("Notes", "1.0.0")
        .handler(Notes {
            store: Arc::default(),
            tracker: OperationTracker::new(),
        })
        .types(note_types());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listen = Listen::Socket(socket.clone());
    let server = tokio::spawn(async move {
        serve(
            full_router(extension),
            &listen,
            async move {
                let _ = stopped.await;
            },
            |_| {},
        )
        .await
    });
    let mut client = BicepExtensionClient::new(unix_socket_channel(&socket));
    let mut files = None;
    for _ in 0..100 {
        if let Ok(answer) = client.get_type_files().await {
            files = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let files = files.expect("GetTypeFiles answers");
    // What the extension serves loads back as the set it declared.
    let mut by_name: std::collections::BTreeMap<String, String> =
        files.type_files.into_iter().collect();
    by_name.insert("index.json".into(), files.index_file);
    let loaded =
        cairn_extension_sdk::types::TypeSet::from_files(&by_name).expect("valid type files");
    assert_eq!(loaded, note_types());
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[test]
fn types_flag_writes_the_files_and_nothing_else_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("types");
    let extension = Extension::<NoConfig>::new("Notes", "1.0.0").types(note_types());
    let code = cairn_extension_sdk::serve_main_with_args(
        extension,
        ["--types".to_owned(), out.display().to_string()],
    );
    assert_eq!(
        format!("{code:?}"),
        format!("{:?}", std::process::ExitCode::SUCCESS)
    );
    let index = std::fs::read_to_string(out.join("index.json")).unwrap();
    let loaded = cairn_extension_sdk::types::TypeSet::load(&index, |name| {
        std::fs::read_to_string(out.join(name)).ok()
    })
    .unwrap();
    assert_eq!(loaded, note_types());

    // An extension without types says so and fails.
    let bare = Extension::<NoConfig>::new("Bare", "1.0.0");
    let code = cairn_extension_sdk::serve_main_with_args(
        bare,
        [
            "--types".to_owned(),
            dir.path().join("none").display().to_string(),
        ],
    );
    assert_eq!(
        format!("{code:?}"),
        format!("{:?}", std::process::ExitCode::FAILURE)
    );
    assert!(!dir.path().join("none").exists());
}

//! What the engine does for deployment stacks when it writes a resource: it records what it applied (the baseline
//! of drift detection: declared members with the values the provider answered, never a write-only value), and,
//! in a stack's deployment, it refuses to take over an extension resource that exists and no stack manages unless
//! the stack asked for adoption.

mod common;
use common::*;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_engine::{
    DeployOptions, Engine, ExistingResourceCheck, ExtensionResource, ManagedResources,
    RESOURCE_EXISTS_UNMANAGED,
};
use cairn_store::ResourceKey;
use serde_json::{Value, json};

const CANARY: &str = "applied-canary-5d1e0b72";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_record_what_they_applied_without_write_only_values() {
    let env = setup().await;
    let root = tempfile::tempdir().expect("root");
    let vault_id = format!("{RG}/providers/Microsoft.KeyVault/vaults/kv");
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "parameters": {"secret": {"type": "securestring"}, "root": {"type": "string"}},
        "extensions": {
            "fake": {"name": "Fake", "version": "1.0.0", "config": {"cluster": {"defaultValue": "c1"}}},
            "local": {"name": "Local", "version": "1.0.0", "config": {"rootDirectory": {"type": "string"}}}
        },
        "resources": {
            "w": widget("w", json!({"size": 3})),
            "file": {"extension": "local", "type": "File", "apiVersion": "1.0.0",
                     "properties": {"path": "./sub//a.txt", "content": "hello"}},
            "kv": {"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "kv",
                   "location": "westus", "tags": {"env": "test"},
                   "properties": {"tenantId": "t", "sku": {"family": "A", "name": "standard"}}},
            "secret": {"type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01",
                       "name": "kv/s", "dependsOn": ["kv"],
                       "properties": {"value": "[parameters('secret')]", "contentType": "text/plain"}}
        }
    });
    let mut req = request(
        template,
        json!({"secret": {"value": CANARY}, "root": {"value": root.path().to_string_lossy()}}),
    );
    req.properties.extension_configs = Some(
        serde_json::from_value(
            json!({"local": {"rootDirectory": {"value": root.path().to_string_lossy()}}}),
        )
        .unwrap(),
    );
    let done = deploy(&env.engine, RG, "main", req).await;
    assert_eq!(state(&done), "Succeeded", "{done:#}");

    let applied = |key: ResourceKey| {
        let store = env.store.clone();
        async move {
            store
                .get_managed_resource(&key)
                .await
                .expect("read")
                .expect("recorded")
                .resource
        }
    };
    // An extension resource: the declared properties as the extension answered them (its own `createdBy` is not
    // declared, so it is left out).
    let widget = applied(ResourceKey::extension(
        "Fake",
        Some("c1"),
        "widget",
        &json!({"name": "w"}),
    ))
    .await;
    assert_eq!(widget.applied, Some(json!({"name": "w", "size": 3})));
    assert_eq!(widget.properties["createdBy"], "fake");
    // Local normalises the path; the mode it reports was not declared.
    let files = env
        .store
        .list_managed_resources(cairn_store::ManagedResourceFilter {
            resource_type: Some("File".into()),
            ..Default::default()
        })
        .await
        .expect("list");
    let [file] = files.items.as_slice() else {
        panic!("one file: {:?}", files.items);
    };
    let file = &file.resource;
    assert_eq!(file.properties["mode"].as_str().map(str::len), Some(4));
    assert_eq!(
        file.applied,
        Some(json!({"path": "sub/a.txt", "content": "hello"}))
    );
    // An ARM resource: its declared body as the provider answered it (no `apiVersion`, `dependsOn`, `id`).
    let vault = applied(ResourceKey::arm(&vault_id)).await;
    assert_eq!(
        vault.applied,
        Some(
            json!({"name": "kv", "type": "Microsoft.KeyVault/vaults", "location": "westus",
                    "tags": {"env": "test"},
                    "properties": {"tenantId": "t", "sku": {"family": "A", "name": "standard"}}})
        )
    );
    // A Key Vault secret's value is write-only: never recorded.
    let secret = applied(ResourceKey::arm(&format!("{vault_id}/secrets/s"))).await;
    let recorded = secret.applied.expect("recorded");
    assert_eq!(recorded["properties"], json!({"contentType": "text/plain"}));
    assert!(!recorded.to_string().contains(CANARY), "{recorded}");
}

/// The resources "stacks manage" in a test: keys by extension, type and identifiers.
#[derive(Default)]
struct Managed(Mutex<HashSet<String>>);

impl Managed {
    fn add(&self, extension: &str, resource_type: &str, identifiers: Value) {
        self.0.lock().unwrap().insert(format!(
            "{}|{}|{identifiers}",
            extension.to_lowercase(),
            resource_type.to_lowercase()
        ));
    }
}

impl ManagedResources for Managed {
    fn manages(&self, resource: &ExtensionResource<'_>) -> bool {
        self.0.lock().unwrap().contains(&format!(
            "{}|{}|{}",
            resource.extension.to_lowercase(),
            resource.resource_type.to_lowercase(),
            resource.identifiers
        ))
    }
}

async fn deploy_as_stack(
    engine: &Engine,
    name: &str,
    template: Value,
    check: ExistingResourceCheck,
) -> Value {
    let mut handle = engine
        .create_or_update(
            RG,
            name,
            request(template, json!({})),
            DeployOptions {
                stack_initiated: true,
                existing_resources: Some(check),
                ..DeployOptions::default()
            },
        )
        .await
        .expect("accepted");
    let done = tokio::time::timeout(Duration::from_secs(60), handle.wait())
        .await
        .expect("in time")
        .expect("record");
    serde_json::to_value(done).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_unmanaged_extension_resource_is_written_only_when_adopted() {
    let env = setup().await;
    // `taken` exists: an earlier, plain deployment created it.
    let plain = deploy(
        &env.engine,
        RG,
        "plain",
        request(
            fake_template(
                json!({"taken": widget("taken", json!({"size": 1}))}),
                json!({}),
            ),
            json!({}),
        ),
    )
    .await;
    assert_eq!(state(&plain), "Succeeded", "{plain:#}");
    let creates_before = env
        .fake
        .state
        .creates
        .load(std::sync::atomic::Ordering::SeqCst);

    let managed = Arc::new(Managed::default());
    let template = fake_template(
        json!({"taken": widget("taken", json!({"size": 2})), "fresh": widget("fresh", json!({}))}),
        json!({}),
    );
    let refused = deploy_as_stack(
        &env.engine,
        "stack",
        template.clone(),
        ExistingResourceCheck {
            adopt: false,
            managed: managed.clone(),
        },
    )
    .await;
    assert_eq!(state(&refused), "Failed", "{refused:#}");
    let error = refused["properties"]["error"].to_string();
    assert!(error.contains(RESOURCE_EXISTS_UNMANAGED), "{error}");
    assert_eq!(
        env.fake.resource("widget", "taken").unwrap()["size"],
        1,
        "an existing resource is not touched without adoption"
    );
    assert!(
        env.fake.resource("widget", "fresh").is_some(),
        "a resource that did not exist is created"
    );
    let operations = env
        .engine
        .operations(RG, "stack")
        .await
        .expect("operations");
    let taken = operations
        .iter()
        .find(|op| {
            op.properties
                .target_resource
                .as_ref()
                .and_then(|t| t.symbolic_name.as_deref())
                == Some("taken")
        })
        .expect("the refused operation");
    assert_eq!(taken.properties.status_code.as_deref(), Some("Conflict"));

    // Resources a stack manages already are written without asking (`fresh`, which the refused deployment
    // created, is now the stack's too).
    managed.add("Fake", "widget", json!({"name": "taken"}));
    managed.add("FAKE", "Widget", json!({"name": "fresh"}));
    let managed_write = deploy_as_stack(
        &env.engine,
        "stack",
        template.clone(),
        ExistingResourceCheck {
            adopt: false,
            managed: managed.clone(),
        },
    )
    .await;
    assert_eq!(state(&managed_write), "Succeeded", "{managed_write:#}");
    assert_eq!(env.fake.resource("widget", "taken").unwrap()["size"], 2);

    // Adoption writes an unmanaged existing resource.
    let other = fake_template(
        json!({"other": widget("taken", json!({"size": 5}))}),
        json!({}),
    );
    let adopted = deploy_as_stack(
        &env.engine,
        "adopter",
        other,
        ExistingResourceCheck {
            adopt: true,
            managed: Arc::new(Managed::default()),
        },
    )
    .await;
    assert_eq!(state(&adopted), "Succeeded", "{adopted:#}");
    assert_eq!(env.fake.resource("widget", "taken").unwrap()["size"], 5);
    assert!(
        env.fake
            .state
            .creates
            .load(std::sync::atomic::Ordering::SeqCst)
            > creates_before,
        "writes went through"
    );
}

/// A new resource's two lookups in a stack's deployment (its `preview`, then the existence `get`) each run in a
/// stage of their own, `parallelism` wide: while one resource's `get` is in flight the next resource's preview
/// runs, and neither kind of lookup ever exceeds the parallelism.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stacks_preview_and_existence_get_pipeline_each_within_the_parallelism() {
    let settings = cairn_engine::EngineSettings {
        parallelism: 1,
        ..common::settings()
    };
    let env = setup_with(
        settings,
        Duration::from_millis(5),
        cairn_engine::provider::Providers::empty(),
    )
    .await;
    *env.fake.preview_latency.lock().unwrap() = Duration::from_millis(60);
    *env.fake.get_latency.lock().unwrap() = Duration::from_millis(60);
    let template = fake_template(
        json!({
            "many": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                      "copy": { "name": "many", "count": 5 },
                      "properties": { "name": "[format('p{0}', copyIndex())]" } }
        }),
        json!({}),
    );
    let record = deploy_as_stack(
        &env.engine,
        "pipelined",
        template,
        ExistingResourceCheck {
            adopt: false,
            managed: Arc::new(Managed::default()),
        },
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.count(), 5);
    let fake = &env.fake.state;
    assert_eq!(fake.previews.most(), 1);
    assert_eq!(fake.gets.most(), 1);
    assert_eq!(
        fake.lookups.most(),
        2,
        "a preview overlaps the get before it"
    );
    assert_eq!(
        fake.max_in_flight.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

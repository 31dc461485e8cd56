//! An assembly over a data directory: the settings reach the host, the engine and the stack service, all three
//! share one store, what they write survives closing and reopening the directory, and a directory that cannot
//! be opened is a clear error.

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::deployment::Deployment;
use cairn_arm::models::stack::DeploymentStack;
use cairn_assembly::{Assembly, AssemblyError, Settings, StoreLocation};
use cairn_engine::{DeployOptions, EngineSettings};
use cairn_host::{HostSettings, Registry};
use serde_json::json;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
const SUBSCRIPTION_SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#";

fn settings(dir: &std::path::Path, registry: Arc<Registry>) -> Settings {
    Settings {
        host: HostSettings {
            request_timeout: Duration::from_secs(7),
            ..HostSettings::default()
        },
        engine: EngineSettings {
            owner_id: "assembly-test-engine".into(),
            parallelism: 3,
            ..EngineSettings::default()
        },
        ..Settings::new(StoreLocation::data_dir(dir), registry, "http://cairn.test")
    }
}

async fn wait_for_stack(assembly: &Assembly, scope: &str, name: &str) -> DeploymentStack {
    for _ in 0..400 {
        let stack = assembly.stacks().get(scope, name).await.unwrap();
        if stack
            .properties
            .provisioning_state
            .as_ref()
            .is_some_and(|s| s.is_terminal())
        {
            return stack;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the stack operation did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_assembles_one_store_under_host_engine_and_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let registry = Arc::new(Registry::new());
    let metrics = cairn_metrics::Metrics::new();
    let assembly = Assembly::open(Settings {
        metrics: metrics.clone(),
        ..settings(&data_dir, registry.clone())
    })
    .await
    .unwrap();
    assert!(data_dir.join("cairn.db").exists());
    assert!(Arc::ptr_eq(assembly.host().registry(), &registry));
    assert_eq!(
        assembly.host().settings().request_timeout,
        Duration::from_secs(7)
    );
    assert_eq!(
        assembly.engine().settings().owner_id,
        "assembly-test-engine"
    );
    assert_eq!(assembly.engine().settings().parallelism, 3);
    assert!(Arc::ptr_eq(assembly.engine().store(), assembly.store()));

    // The engine creates a resource group; the stack service deploys into it through the same engine and store.
    let groups: Deployment = serde_json::from_value(json!({"location": "local", "properties": {
        "mode": "Incremental",
        "template": {"$schema": SUBSCRIPTION_SCHEMA, "contentVersion": "1.0.0.0", "resources": [
            {"type": "Microsoft.Resources/resourceGroups", "apiVersion": "2024-03-01", "name": "rg",
             "location": "local"}
        ]}
    }}))
    .unwrap();
    let mut handle = assembly
        .engine()
        .create_or_update(SUB, "groups", groups, DeployOptions::default())
        .await
        .unwrap();
    let record = handle.wait().await.unwrap();
    assert_eq!(
        record
            .properties
            .provisioning_state
            .map(|s| s.as_str().to_owned()),
        Some("Succeeded".to_owned())
    );
    let rg = format!("{SUB}/resourceGroups/rg");
    let stack: DeploymentStack = serde_json::from_value(json!({"properties": {
        "template": {"$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": [
            {"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "vault1",
             "location": "local", "properties": {}}
        ]},
        "actionOnUnmanage": {"resources": "delete"},
        "denySettings": {"mode": "none"}
    }}))
    .unwrap();
    let mut accepted = assembly
        .stacks()
        .create_or_update(&rg, "app", stack, None)
        .await
        .unwrap();
    accepted.ended.wait().await;
    let done = wait_for_stack(&assembly, &rg, "app").await;
    // One set of metrics for the engine and the stack service alike.
    let text = metrics.render();
    assert!(
        text.contains("cairn_deployment_duration_seconds_count{status=\"Succeeded\"} 2"),
        "the subscription deployment and the stack's: {text}"
    );
    assert!(
        text.contains("cairn_stack_operation_duration_seconds_count{operation=\"createOrUpdate\",status=\"succeeded\"} 1"),
        "{text}"
    );
    assert_eq!(
        done.properties
            .provisioning_state
            .map(|s| s.as_str().to_owned()),
        Some("succeeded".to_owned())
    );
    assembly.close().await.unwrap();

    // Reopened on the same directory: the deployment and the stack are there.
    let reopened = Assembly::open(settings(&data_dir, Arc::new(Registry::new())))
        .await
        .unwrap();
    assert!(reopened.engine().get(SUB, "groups").await.is_ok());
    let stack = reopened.stacks().get(&rg, "app").await.unwrap();
    assert_eq!(stack.properties.resources.map(|r| r.len()), Some(1));
    reopened.close().await.unwrap();
}

#[tokio::test]
async fn a_data_dir_that_cannot_be_opened_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let error = Assembly::open(settings(&not_a_dir, Arc::new(Registry::new())))
        .await
        .err()
        .expect("a file is not a data directory");
    match &error {
        AssemblyError::OpenStore { location, .. } => {
            assert_eq!(location, &StoreLocation::data_dir(&not_a_dir));
        }
        other => panic!("expected OpenStore, got {other:?}"),
    }
    assert_eq!(
        error.to_string(),
        format!(
            "cannot open the cairn data directory {}",
            not_a_dir.display()
        )
    );
    assert!(std::error::Error::source(&error).is_some());
}

/// `max_operations_in_flight` becomes one set of operation slots for the assembly's engine, each deployment
/// keeping its own parallelism under it; without it there is no cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_on_operations_in_flight_reaches_the_engine_as_shared_slots() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::new());
    let capped = Assembly::open(Settings {
        max_operations_in_flight: Some(5),
        ..settings(&dir.path().join("capped"), registry.clone())
    })
    .await
    .unwrap();
    let slots = capped.engine().settings().operation_slots.clone();
    assert_eq!(slots.as_ref().map(|s| s.limit()), Some(5));
    assert_eq!(capped.engine().settings().parallelism, 3);
    capped.close().await.unwrap();
    let uncapped = Assembly::open(settings(&dir.path().join("uncapped"), registry))
        .await
        .unwrap();
    assert!(uncapped.engine().settings().operation_slots.is_none());
    uncapped.close().await.unwrap();
}

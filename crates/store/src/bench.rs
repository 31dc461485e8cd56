//! The workload of the bytes-per-resource benchmarks (feature `testing`), shared by the SQLite and PostgreSQL
//! stores' benches so both measure the same writes: one deployment of N resources — create the run (its request
//! holds a template of N resource definitions), mark it Running, then per resource two journal appends (Accepted,
//! Running) and a third (Succeeded) recorded with its inventory upsert in one commit (`record_step`), and finally one
//! update with outputs and `outputResources` (N IDs). Resource names are scattered (a hash of the index), as real
//! names are, so inventory keys do not arrive in key order.

use std::ops::Range;

use serde_json::json;

use crate::{
    DeploymentId, DeploymentKey, DeploymentStatus, DeploymentUpdate, InventoryChange,
    ManagedResource, NewDeployment, OperationStep, Precondition, ResourceKey, Store, StoreResult,
    Tags, Timestamp,
};

const SCOPE: &str = "/subscriptions/7d2c9f40-1b8e-4c55-9a57-3f0e2a6b1c11/resourceGroups/rg-bench";

/// Resource names are scattered (a hash of the index), as real names are, so inventory keys do not arrive in
/// key order.
fn resource_name(index: usize) -> String {
    format!(
        "st{:012x}",
        (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16
    )
}

fn resource_id(index: usize) -> String {
    format!(
        "{SCOPE}/providers/Microsoft.Storage/storageAccounts/{}",
        resource_name(index)
    )
}

fn template(resources: Range<usize>) -> serde_json::Value {
    let definitions: Vec<_> = resources
        .map(|index| {
            json!({
                "type": "Microsoft.Storage/storageAccounts",
                "apiVersion": "2023-01-01",
                "name": resource_name(index),
                "location": "[parameters('location')]",
                "sku": {"name": "Standard_LRS"},
                "kind": "StorageV2",
                "properties": {"minimumTlsVersion": "TLS1_2", "supportsHttpsTrafficOnly": true}
            })
        })
        .collect();
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"location": {"type": "string"}},
        "resources": definitions
    })
}

fn journal_step(run: &DeploymentId, index: usize, state: &str, millis: i64) -> OperationStep {
    OperationStep {
        deployment_id: run.clone(),
        operation_id: format!(
            "{:016X}",
            (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ),
        target_resource: Some(json!({
            "id": resource_id(index),
            "resourceType": "Microsoft.Storage/storageAccounts",
            "resourceName": resource_name(index),
            "apiVersion": "2023-01-01",
            "symbolicName": format!("storage[{index}]"),
        })),
        provisioning_operation: "Create".into(),
        provisioning_state: state.into(),
        status_code: (state == "Succeeded").then(|| "OK".to_owned()),
        status_message: None,
        service_request_id: Some(format!("req-{index:08}")),
        timestamp: Timestamp::from_unix_millis(millis),
        duration_ms: Some(120),
        extension: None,
        request_content: None,
        response_content: None,
    }
}

/// One simulated deployment of `resources` resources, written to `store` as the engine writes a real one.
pub async fn simulate(store: &dyn Store, resources: usize) -> StoreResult<()> {
    simulate_deployment(store, &format!("bench-{resources}"), 0..resources).await
}

/// [`simulate`] of the deployment `name`, whose resources are those numbered `resources` (a store that already
/// holds another deployment's resources, numbered apart, shows the writes of a store in use).
pub async fn simulate_deployment(
    store: &dyn Store,
    name: &str,
    resources: Range<usize>,
) -> StoreResult<()> {
    let now = Timestamp::from_unix_millis(1_767_225_600_000);
    let run = store
        .put_deployment(
            NewDeployment {
                id: DeploymentId::generate(),
                key: DeploymentKey::new(SCOPE, name),
                parent: None,
                location: None,
                tags: Tags::new(),
                request: json!({"mode": "Incremental", "template": template(resources.clone()),
                                "parameters": {"location": {"value": "westus"}}}),
                status: DeploymentStatus::Accepted,
                correlation_id: "6f1c2b3a-0000-4000-8000-000000000001".into(),
                stack_initiated: false,
                created_at: now,
                owner: None,
            },
            Precondition::MustNotExist,
        )
        .await?;
    let running = DeploymentUpdate {
        status: Some(DeploymentStatus::Running),
        started_at: Some(now),
        ..DeploymentUpdate::at(now)
    };
    let mut record = store
        .update_deployment(&run.id, run.version, running)
        .await?;
    let mut millis = now.unix_millis();
    for index in resources.clone() {
        for state in ["Accepted", "Running"] {
            millis += 1;
            store
                .append_operation(journal_step(&run.id, index, state, millis), None)
                .await?;
        }
        millis += 1;
        let resource = ManagedResource {
            key: ResourceKey::arm(&resource_id(index)),
            resource_id: Some(resource_id(index)),
            resource_type: "Microsoft.Storage/storageAccounts".into(),
            api_version: Some("2023-01-01".into()),
            properties: json!({
                "location": "westus", "sku": {"name": "Standard_LRS", "tier": "Standard"}, "kind": "StorageV2",
                "properties": {"minimumTlsVersion": "TLS1_2", "supportsHttpsTrafficOnly": true,
                               "provisioningState": "Succeeded",
                               "primaryEndpoints": {"blob": format!("https://{}.blob.core.windows.net/", resource_name(index))}}
            }),
            applied: None,
            deployment: Some(run.key.clone()),
            extension: None,
            updated_at: Timestamp::from_unix_millis(millis),
        };
        // The finished create is journaled and inventoried in one commit.
        store
            .record_step(
                journal_step(&run.id, index, "Succeeded", millis),
                InventoryChange::Put(Box::new(resource)),
                None,
            )
            .await?;
    }
    let output_resources: Vec<_> = resources
        .clone()
        .map(|index| json!({"id": resource_id(index)}))
        .collect();
    let done = DeploymentUpdate {
        status: Some(DeploymentStatus::Succeeded),
        finished_at: Some(Timestamp::from_unix_millis(millis)),
        outputs: Some(json!({"count": {"type": "Int", "value": resources.len()}})),
        output_resources: Some(crate::JsonText::from(&json!(output_resources))),
        ..DeploymentUpdate::at(Timestamp::from_unix_millis(millis))
    };
    record = store
        .update_deployment(&record.id, record.version, done)
        .await?;
    assert_eq!(record.status, DeploymentStatus::Succeeded);
    Ok(())
}

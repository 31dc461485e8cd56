//! Helpers shared by the stack service's integration tests: a SQLite store holding the test resource group and Key
//! Vault, secrets in that vault, waiting for a stack operation to finish, and scanning a data directory for text.

// Each test binary uses a subset.
#![allow(dead_code)]

pub mod gadgets;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_extension_contract::transport::ExtensionTransport;
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::{
    NewSecretVersion, Precondition, ResourceGroup, SecretString, Store, Tags, Timestamp, Vault,
};
use cairn_store_sqlite::SqliteStore;
use serde_json::{Value, json};

pub const SUB: &str = "00000000-0000-0000-0000-000000000001";
pub const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1";
pub const VAULT: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1/providers/Microsoft.KeyVault/vaults/ops";

/// A store in `dir` with the resource group `rg1` and the Key Vault `ops` in it.
pub async fn store_with_group_and_vault(dir: &Path) -> Arc<dyn Store> {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir).await.expect("store"));
    store
        .put_resource_group(
            ResourceGroup {
                subscription_id: SUB.into(),
                name: "rg1".into(),
                location: "westus".into(),
                tags: Tags::new(),
                managed_by: None,
                provisioning_state: "Succeeded".into(),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .expect("group");
    store
        .put_vault(
            Vault {
                id: VAULT.into(),
                name: "ops".into(),
                location: "westus".into(),
                tags: Tags::new(),
                properties: json!({}),
            },
            Precondition::Any,
            Timestamp::now(),
        )
        .await
        .expect("vault");
    store
}

/// Sets (or rotates) the secret `name` of the vault `ops`.
pub async fn set_secret(store: &Arc<dyn Store>, name: &str, value: &str) {
    store
        .set_vault_secret(NewSecretVersion {
            vault_id: VAULT.into(),
            name: name.into(),
            value: SecretString::from(value.to_owned()),
            content_type: None,
            enabled: true,
            not_before: None,
            expires: None,
            tags: Tags::new(),
            created_at: Timestamp::now(),
        })
        .await
        .expect("set the secret");
}

/// Waits until the stack is in a terminal state (or gone) and returns it as JSON (`null` when gone).
pub async fn settle(service: &StackService, name: &str) -> Value {
    for _ in 0..600 {
        match service.get(RG, name).await {
            Ok(stack) => {
                let value = serde_json::to_value(&stack).unwrap();
                let state = value["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or("");
                if matches!(state, "succeeded" | "failed" | "canceled") {
                    return value;
                }
            }
            Err(error) if error.status() == 404 => return Value::Null,
            Err(error) => panic!("get: {error:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the stack operation did not finish in time");
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            out.push(path.display().to_string());
        }
    }
    out
}

/// A stack service (with its engine and extension host) over `store`, with the built-in Local extension and
/// `extensions` (name, version, transport) registered.
pub fn stack_service(
    store: Arc<dyn Store>,
    extensions: Vec<(&str, &str, Arc<dyn ExtensionTransport>)>,
    settings: StackServiceSettings,
) -> StackService {
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        cairn_ext_local::NAME,
        cairn_ext_local::VERSION,
        Arc::new(cairn_ext_local::in_process_transport()),
    ));
    for (name, version, transport) in extensions {
        registry.register(RegisteredExtension::new(name, version, transport));
    }
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            relo_poll_interval: Duration::from_millis(10),
            min_poll_interval: Duration::from_millis(10),
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
        "http://localhost/cairn-test",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings {
            parallelism: 4,
            ..EngineSettings::default()
        },
    )
    .expect("engine");
    StackService::new(engine, store, host, Providers::empty(), settings)
}

/// Settings for tests: short leases and backoff.
pub fn fast_settings() -> StackServiceSettings {
    StackServiceSettings {
        lease_ttl: Duration::from_secs(10),
        heartbeat_interval: Duration::from_millis(200),
        max_delete_rounds: 2,
        retry_backoff: Duration::from_millis(10),
        progress_interval: Duration::from_millis(20),
        ..StackServiceSettings::default()
    }
}

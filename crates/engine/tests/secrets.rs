//! Secret canary: secure parameters, secure extension-config values and Key Vault secrets reach the providers
//! and extensions but never the records, operations, events, or any file in the data directory; nor does a
//! secret passed to a nested deployment (inline or linked) whose parameter is declared a plain string.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use cairn_engine::{DeployOptions, Engine, FetchError, FetchFuture, Providers, TemplateFetcher};
use common::*;
use serde_json::{Value, json};

const PARAM_CANARY: &str = "CANARY-PARAM-7f3a9e";
const CONFIG_CANARY: &str = "CANARY-CONFIG-91b2c4";
const VAULT_CANARY: &str = "CANARY-VAULT-55c1d8";

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_records_or_the_data_directory() {
    let env = setup().await;
    // A vault secret, created from a secure parameter through the Key Vault provider.
    let vault = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "v": { "type": "securestring" } },
        "resources": [
            { "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "kv", "location": "westus", "properties": {} },
            { "type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "kv/s",
              "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'kv')]"], "properties": { "value": "[parameters('v')]" } }
        ]
    });
    let first = deploy(
        &env.engine,
        RG,
        "vault",
        request(vault, json!({ "v": { "value": VAULT_CANARY } })),
    )
    .await;
    assert_eq!(state(&first), "Succeeded", "{first:#}");

    let vault_id = format!("{RG}/providers/Microsoft.KeyVault/vaults/kv");
    let child = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "fake": { "name": "Fake", "version": "1.0.0" } },
        "parameters": { "secret": { "type": "securestring" } },
        "resources": { "w": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                              "properties": { "name": "child", "len": "[length(parameters('secret'))]" } } }
    });
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "parameters": { "pw": { "type": "securestring" } },
        // `token` is declared secure and given as a value: no record keeps it, here or in the nested deployment
        // that inherits the config without a schema, and a stack-initiated deployment refuses it.
        "extensions": { "fake": { "name": "Fake", "version": "1.0.0",
                                  "config": { "cluster": { "defaultValue": "c1" }, "token": { "type": "secureString" },
                                              "kubeConfig": { "type": "secureString" } } } },
        "resources": {
            "w": widget("root", json!({ "len": "[length(parameters('pw'))]" })),
            "m": { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "mod",
                   "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                   "parameters": { "secret": { "value": "[parameters('pw')]" } },
                                   "extensionConfigs": { "fake": "[extensions('fake').config]" },
                                   "template": child } },
            "broken": { "type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01", "name": "st",
                        "location": "westus", "properties": { "note": "[length(parameters('pw'))]" } }
        },
        "outputs": { "secretOut": { "type": "securestring", "value": "[parameters('pw')]" } }
    });
    let req: cairn_arm::models::deployment::Deployment = serde_json::from_value(json!({
        "properties": {
            "mode": "Incremental",
            "template": template,
            "parameters": { "pw": { "value": PARAM_CANARY } },
            "extensionConfigs": { "fake": {
                "token": { "value": CONFIG_CANARY },
                "kubeConfig": { "keyVaultReference": { "keyVault": { "id": vault_id }, "secretName": "s" } }
            } }
        }
    }))
    .unwrap();
    // A stack could keep nothing for the secret given as a value: a stack-initiated deployment is refused before
    // anything runs, naming the property, never the value.
    let refused = env
        .engine
        .create_or_update(
            RG,
            "canary-stack",
            req.clone(),
            DeployOptions {
                stack_initiated: true,
                ..Default::default()
            },
        )
        .await
        .err()
        .map(|e| format!("{e:?}"))
        .expect("a stack-initiated deployment with a secret given as a value is refused");
    assert!(refused.contains("ExtensionConfigNotStorable"), "{refused}");
    assert!(refused.contains("extensionConfigs.fake.token"), "{refused}");
    assert!(!refused.contains(CONFIG_CANARY), "{refused}");
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "canary",
            req,
            DeployOptions {
                follow_events: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut events = handle.take_events().unwrap();
    let record = serde_json::to_value(handle.wait().await.unwrap()).unwrap();
    // The storage account has no provider: the deployment fails, after everything else ran.
    assert_eq!(state(&record), "Failed", "{record:#}");
    let config = env.fake.config_of("root").unwrap();
    assert_eq!(
        config["token"], CONFIG_CANARY,
        "the extension got the config"
    );
    assert_eq!(
        config["kubeConfig"], VAULT_CANARY,
        "the Key Vault reference was resolved"
    );
    assert_eq!(env.fake.config_of("child").unwrap()["token"], CONFIG_CANARY);

    let mut seen = vec![record.clone()];
    for name in ["canary", "mod", "vault"] {
        seen.push(serde_json::to_value(env.engine.get(RG, name).await.unwrap()).unwrap());
        seen.push(serde_json::to_value(env.engine.operations(RG, name).await.unwrap()).unwrap());
        seen.push(
            serde_json::to_value(env.engine.export_template(RG, name).await.unwrap()).unwrap(),
        );
    }
    while let Ok(e) = events.try_recv() {
        seen.push(Value::String(format!("{e:?}")));
    }
    let text = serde_json::to_string(&seen).unwrap();
    for canary in [PARAM_CANARY, CONFIG_CANARY, VAULT_CANARY] {
        assert!(!text.contains(canary), "{canary} in a response");
    }

    // Close everything and scan the data directory byte by byte.
    let TestEnv {
        dir, store, engine, ..
    } = env;
    drop(engine);
    store.close().await.unwrap();
    drop(store);
    let mut all = Vec::new();
    files(dir.path(), &mut all);
    assert!(all.iter().any(|p| p.ends_with("cairn.db")), "{all:?}");
    for path in all {
        let bytes = std::fs::read(&path).unwrap();
        for canary in [PARAM_CANARY, CONFIG_CANARY, VAULT_CANARY] {
            assert!(!contains(&bytes, canary), "{canary} in {}", path.display());
        }
    }
}

/// Templates by URI from a map, with no network.
struct MapFetcher(HashMap<String, Value>);

impl TemplateFetcher for MapFetcher {
    fn fetch<'a>(&'a self, uri: &'a reqwest::Url, _max_bytes: usize) -> FetchFuture<'a> {
        Box::pin(async move {
            let body = self.0.get(uri.path()).ok_or(FetchError::Status(404))?;
            Ok(body.to_string().into_bytes())
        })
    }
}

const NESTED_CANARY: &str = "CANARY-NESTED-3e7d21";
const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// Children that declare `x` a plain string and fail on it: in a resource body, and in an output.
fn failing_children() -> Vec<(&'static str, Value)> {
    let child = |resources: Value, outputs: Value| {
        json!({ "$schema": SCHEMA, "contentVersion": "1.0.0.0",
                "parameters": { "x": { "type": "string" } }, "resources": resources, "outputs": outputs })
    };
    vec![
        (
            "resource",
            child(
                json!([{ "type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01", "name": "st",
                         "location": "westus", "properties": { "n": "[int(parameters('x'))]" } }]),
                json!({}),
            ),
        ),
        (
            "output",
            child(
                json!([]),
                json!({ "o": { "type": "string", "value": "[string(parameters('x')[5])]" } }),
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_passed_to_plain_child_parameters_never_reach_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path()).await;
    create_group(&store, "rg1").await;
    let files = failing_children()
        .into_iter()
        .map(|(shape, t)| (format!("/{shape}.json"), t))
        .collect();
    let fake = FakeExtension::new(std::time::Duration::from_millis(1));
    let engine = Engine::with_template_fetcher(
        store.clone(),
        host_with(&fake),
        Providers::empty(),
        settings(),
        Arc::new(MapFetcher(files)),
    )
    .unwrap();
    for (shape, child) in failing_children() {
        let uri = format!("https://templates.example.invalid/{shape}.json");
        let children = [
            (
                "inline",
                json!({ "expressionEvaluationOptions": { "scope": "inner" }, "template": child }),
            ),
            ("linked", json!({ "templateLink": { "uri": uri } })),
        ];
        for (how, source) in children {
            let child_name = format!("c-{shape}-{how}");
            let mut properties = json!({ "mode": "Incremental",
                                          "parameters": { "x": { "value": "[concat('', parameters('pw'))]" } } });
            properties
                .as_object_mut()
                .unwrap()
                .extend(source.as_object().unwrap().clone());
            let parent = json!({ "$schema": SCHEMA, "contentVersion": "1.0.0.0",
                "parameters": { "pw": { "type": "securestring" } },
                "resources": [{ "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01",
                                "name": child_name, "properties": properties }] });
            let name = format!("p-{shape}-{how}");
            let req = request(parent, json!({ "pw": { "value": NESTED_CANARY } }));
            // Validation may already refuse the child (inline); else the deployment fails when it runs.
            let mut seen = Vec::new();
            match engine
                .create_or_update(RG, &name, req, DeployOptions::default())
                .await
            {
                Ok(mut handle) => {
                    let record = serde_json::to_value(handle.wait().await.unwrap()).unwrap();
                    assert_eq!(state(&record), "Failed", "{shape}/{how}: {record:#}");
                    seen.push(record);
                }
                Err(refused) => seen.push(Value::String(format!("{refused:?}"))),
            }
            for n in [&name, &child_name] {
                if let Ok(r) = engine.get(RG, n).await {
                    seen.push(serde_json::to_value(r).unwrap());
                }
                if let Ok(ops) = engine.operations(RG, n).await {
                    seen.push(serde_json::to_value(ops).unwrap());
                }
            }
            let text = serde_json::to_string(&seen).unwrap();
            // The child ran (its record exists) or validation refused it on the secret.
            assert!(
                text.contains(&child_name) || text.contains("secure value"),
                "{shape}/{how}: the child was not reached: {text}"
            );
            assert!(
                !text.contains(NESTED_CANARY),
                "{shape}/{how}: the secret shows: {text}"
            );
        }
    }
}

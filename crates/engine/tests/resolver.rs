//! The engine's config resolver against a real store and the built-in providers: Key Vault references read the
//! store's vault (an enabled version within its `nbf`/`exp`), API references call the providers, and every
//! failure names the directive, never a value. Deployments, what-if and a stack's deletes all resolve through it.

mod common;
use common::*;

use std::time::Duration;

use cairn_config::{Config, DirectiveErrorKind, resolve_config};
use cairn_engine::config::deployment_error;
use cairn_engine::secrets::KEY_VAULT_FAILED;
use cairn_engine::{LocalResolver, Providers};
use cairn_store::{NewSecretVersion, Precondition, SecretString, Tags, Timestamp, Vault};
use serde_json::{Value, json};

const VAULT_ID: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1/providers/Microsoft.KeyVault/vaults/ops";

async fn secret(
    store: &std::sync::Arc<dyn cairn_store::Store>,
    name: &str,
    enabled: bool,
    expires: Option<Timestamp>,
) {
    store
        .set_vault_secret(NewSecretVersion {
            vault_id: VAULT_ID.into(),
            name: name.into(),
            value: SecretString::from(format!("{name}-s3cr3t")),
            content_type: None,
            enabled,
            not_before: None,
            expires,
            tags: Tags::new(),
            created_at: Timestamp::now(),
        })
        .await
        .expect("secret");
}

fn key_vault(name: &str) -> Value {
    json!({"keyVaultReference": {"keyVault": {"id": VAULT_ID}, "secretName": name}})
}

fn list_value(name: &str) -> Value {
    json!({"apiReference": {"method": "POST", "armResourceId": format!("{VAULT_ID}/secrets/{name}"),
        "apiVersion": "2023-07-01", "action": "listValue", "responseValuePath": "value"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_and_api_calls_resolve_against_the_store_and_the_providers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_store(dir.path()).await;
    create_group(&store, "rg1").await;
    store
        .put_vault(
            Vault {
                id: VAULT_ID.into(),
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
    secret(&store, "current", true, None).await;
    secret(&store, "disabled", false, None).await;
    let past = Timestamp::from_unix_millis(Timestamp::now().unix_millis() - 60_000);
    secret(&store, "expired", true, Some(past)).await;
    let providers = Providers::builtin(store.clone());
    let resolver = LocalResolver::new(store.as_ref(), &providers);

    let config = Config::parse(&json!({
        "namespace": {"value": "apps"},
        "password": {"type": "SecureString", "value": "given-s3cr3t"},
        "token": key_vault("current"),
        "auth": {"listed": list_value("current")}
    }))
    .unwrap();
    let resolved = resolve_config("k8s", &config, &resolver).await.unwrap();
    assert_eq!(
        resolved.expose(),
        &json!({"namespace": "apps", "password": "given-s3cr3t", "token": "current-s3cr3t",
                "auth": {"listed": "current-s3cr3t"}})
    );

    for (item, kind_is) in [
        (key_vault("disabled"), "forbidden"),
        (key_vault("expired"), "forbidden"),
        (key_vault("missing"), "not found"),
        (list_value("disabled"), "api forbidden"),
        (list_value("missing"), "api not found"),
    ] {
        let config = Config::parse(&json!({ "token": item })).unwrap();
        let error = resolve_config("k8s", &config, &resolver).await.unwrap_err();
        let matched = matches!(
            (&error.kind, kind_is),
            (DirectiveErrorKind::SecretForbidden { .. }, "forbidden")
                | (DirectiveErrorKind::SecretNotFound { .. }, "not found")
                | (DirectiveErrorKind::ApiForbidden { .. }, "api forbidden")
                | (DirectiveErrorKind::ApiNotFound { .. }, "api not found")
        );
        assert!(matched, "{kind_is}: {error:?}");
        let detail = deployment_error(&error);
        let shown = serde_json::to_string(&detail).unwrap();
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert_eq!(detail.target.as_deref(), Some("extensionConfigs.k8s.token"));
        if kind_is == "forbidden" || kind_is == "not found" {
            assert_eq!(detail.code(), KEY_VAULT_FAILED, "{shown}");
        }
    }
    let expired = resolve_config(
        "k8s",
        &Config::parse(&json!({ "token": key_vault("expired") })).unwrap(),
        &resolver,
    )
    .await
    .unwrap_err();
    assert!(
        expired.to_string().contains("not valid at this time"),
        "{expired}"
    );
    // The resolver's futures may be sent to other threads (a stack's deletes run on worker tasks).
    let owned = (store.clone(), std::sync::Arc::new(providers));
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::spawn(async move {
            let resolver = LocalResolver::new(owned.0.as_ref(), &owned.1);
            let config = Config::parse(&json!({"token": key_vault("current")})).unwrap();
            resolve_config("k8s", &config, &resolver).await.is_ok()
        }),
    )
    .await
    .expect("in time")
    .map(|ok| assert!(ok))
    .expect("the task");
}

//! The client against a real `cairn serve` in this process (TLS with a self-signed certificate, a tokens file):
//! resource groups, a deployment with a nested one followed to its end, Key Vault, a stack's whole life, and the
//! refusals of a client that does not trust the certificate or holds the wrong token.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::stack::{ActionOnUnmanage, DeploymentStack, StackDeleteOptions};
use cairn_assembly::StoreLocation;
use cairn_client::{Client, ClientError, DeploymentWatcher, Polling};
use cairn_server::serve::{ServeConfig, run};
use cairn_server::{ServerOptions, TlsFiles};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
const TOKEN: &str = "client-test-token";

struct Served {
    url: String,
    cert_pem: String,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), cairn_server::serve::ServeError>>,
}

async fn serve(dir: &Path) -> Served {
    cairn_server::install_crypto_provider();
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert_pem = certified.cert.pem();
    let tls = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&tls.cert, &cert_pem).unwrap();
    std::fs::write(&tls.key, certified.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("tokens"), format!("{TOKEN}\n")).unwrap();
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: Some(tls),
        tokens: Some(dir.join("tokens")),
        insecure_no_auth: false,
        store: StoreLocation::data_dir(dir.join("data")),
        registry: Arc::new(cairn_host::Registry::new()),
        options: ServerOptions {
            retry_after_seconds: 0,
            ..ServerOptions::default()
        },
        engine: cairn_engine::EngineSettings::default(),
        shutdown_grace: cairn_server::serve::DEFAULT_SHUTDOWN_GRACE,
    };
    let shutdown = CancellationToken::new();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(run(config, shutdown.clone(), move |bound| {
        let _ = bound_tx.send(bound);
    }));
    let bound = bound_rx.await.expect("cairn serve listens");
    Served {
        url: bound.url(),
        cert_pem,
        shutdown,
        task,
    }
}

fn client(served: &Served) -> Client {
    Client::builder(&served.url)
        .bearer_token(TOKEN)
        .ca_certificate_pem(served.cert_pem.clone())
        .polling(Polling {
            default: Duration::from_millis(50),
            min: Duration::from_millis(10),
            max: Duration::from_millis(100),
        })
        .build()
        .unwrap()
}

#[derive(Default)]
struct Seen {
    deployments: Vec<(String, usize)>,
}

impl DeploymentWatcher for Seen {
    fn operations(&mut self, deployment: &str, depth: usize, operations: &[Value]) {
        if !operations.is_empty() && !self.deployments.iter().any(|(d, _)| d == deployment) {
            self.deployments.push((deployment.to_string(), depth));
        }
    }
}

fn vault(name: &str) -> Value {
    json!({"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": name,
           "location": "local", "properties": {}})
}

async fn wait_for_stack(client: &Client, scope: &str, name: &str, poll: Duration) -> Value {
    for _ in 0..400 {
        let stack = client.get_stack(scope, name).await.unwrap();
        let state = stack["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(state.as_str(), "succeeded" | "failed" | "canceled") {
            return stack;
        }
        tokio::time::sleep(poll).await;
    }
    panic!("the stack operation did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_drives_cairn_serve_over_tls_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path()).await;
    let client = client(&served);
    let rg = format!("{SUB}/resourceGroups/rg");

    let group = client
        .put_group(&rg, &json!({"location": "local"}))
        .await
        .unwrap();
    assert_eq!(group["name"], "rg");
    assert_eq!(client.get_group(&rg).await.unwrap()["location"], "local");
    let groups = client
        .list_groups("00000000-0000-0000-0000-000000000000")
        .await
        .unwrap();
    assert_eq!(groups.len(), 1);

    // A deployment with a nested one, followed to its end; the watcher sees both levels.
    let request = serde_json::from_value(json!({"properties": {"mode": "Incremental", "template": {
        "$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": [
            vault("outer"),
            {"type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "child",
             "properties": {"mode": "Incremental", "expressionEvaluationOptions": {"scope": "inner"},
                "template": {"$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": [vault("inner")]}}}
        ]}}}))
    .unwrap();
    let accepted = client
        .create_deployment(&rg, "app", &request)
        .await
        .unwrap();
    assert!(accepted.async_operation.is_some());
    let mut seen = Seen::default();
    let record = client
        .wait_for_deployment(&rg, "app", &accepted, &mut seen)
        .await
        .unwrap();
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        seen.deployments,
        vec![("app".to_string(), 0), ("child".to_string(), 1)]
    );
    assert!(
        client
            .list_deployments(&rg)
            .await
            .unwrap()
            .iter()
            .any(|d| d["name"] == "app")
    );
    assert_eq!(
        client
            .deployment_operations(&rg, "app")
            .await
            .unwrap()
            .len(),
        2
    );
    let exported = client.export_deployment_template(&rg, "app").await.unwrap();
    assert!(exported["template"]["resources"].is_array());
    let validated = client
        .validate_deployment(&rg, "again", &request)
        .await
        .unwrap();
    assert!(validated["properties"].is_object(), "{validated:#}");

    // Key Vault's management plane: the answer to a secret PUT never holds the value.
    let vault_id = format!("{rg}/providers/Microsoft.KeyVault/vaults/outer");
    assert!(client.vault_exists(&vault_id).await.unwrap());
    assert!(
        !client
            .vault_exists(&format!("{rg}/providers/Microsoft.KeyVault/vaults/none"))
            .await
            .unwrap()
    );
    let secret = client
        .put_secret(
            &vault_id,
            "db-password",
            "pa55-word-value",
            Some("text/plain"),
        )
        .await
        .unwrap();
    assert!(!secret.to_string().contains("pa55-word-value"), "{secret}");

    // A stack: created, listed, exported, deleted with its resources.
    let stack: DeploymentStack = serde_json::from_value(json!({"properties": {
        "template": {"$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": [vault("stacked")]},
        "actionOnUnmanage": {"resources": "delete"},
        "denySettings": {"mode": "none"}
    }}))
    .unwrap();
    let accepted = client.put_stack(&rg, "st", &stack).await.unwrap();
    assert_eq!(
        accepted.body["properties"]["provisioningState"],
        "deploying"
    );
    let done = wait_for_stack(&client, &rg, "st", accepted.poll).await;
    assert_eq!(done["properties"]["provisioningState"], "succeeded");
    assert_eq!(client.list_stacks(&rg).await.unwrap().len(), 1);
    assert!(
        client.export_stack_template(&rg, "st").await.unwrap()["template"]["resources"].is_array()
    );
    let options = StackDeleteOptions {
        action_on_unmanage: ActionOnUnmanage::from_cli_preset("deleteResources").unwrap(),
        bypass_stack_out_of_sync_error: false,
        bypass_protection: false,
    };
    let deleting = client
        .delete_stack(&rg, "st", &options)
        .await
        .unwrap()
        .expect("the stack exists");
    let mut gone = false;
    for _ in 0..400 {
        match client.get_stack(&rg, "st").await {
            Err(e) if e.is_not_found() => {
                gone = true;
                break;
            }
            Ok(_) => tokio::time::sleep(deleting.poll).await,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(gone, "the stack was deleted");
    let stacked = format!("{rg}/providers/Microsoft.KeyVault/vaults/stacked");
    assert!(!client.vault_exists(&stacked).await.unwrap());
    assert!(
        client
            .delete_stack(&rg, "st", &options)
            .await
            .unwrap()
            .is_none()
    );

    client.delete_deployment(&rg, "app").await.unwrap();
    let missing = client.get_deployment(&rg, "app").await.unwrap_err();
    assert_eq!(missing.arm().map(|e| e.code()), Some("DeploymentNotFound"));
    client.delete_group(&rg).await.unwrap();
    assert!(client.get_group(&rg).await.unwrap_err().is_not_found());

    served.shutdown.cancel();
    served.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_or_a_wrong_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path()).await;
    let rg = format!("{SUB}/resourceGroups/rg");

    let untrusting = Client::builder(&served.url)
        .bearer_token(TOKEN)
        .build()
        .unwrap();
    let error = untrusting.get_group(&rg).await.unwrap_err();
    assert!(
        matches!(error, ClientError::Unreachable { .. }),
        "{error:?}"
    );

    let wrong_token = Client::builder(&served.url)
        .bearer_token("not-the-token")
        .ca_certificate_pem(served.cert_pem.clone())
        .build()
        .unwrap();
    let error = wrong_token.get_group(&rg).await.unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert_eq!(
        error.arm().map(|e| e.code()),
        Some("InvalidAuthenticationToken")
    );
    assert!(!error.to_string().contains("not-the-token"));

    served.shutdown.cancel();
    served.task.await.unwrap().unwrap();
}

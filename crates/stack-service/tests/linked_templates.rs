//! Deployment stacks from linked templates: a stack PUT by `templateLink.id` (a template spec version whose main
//! template reaches a linked template by `relativePath`) deploys and manages what the linked template creates; the
//! stack shows and exports the link; a missing version is refused or fails the stack, naming the ID.

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::ResourceId;
use cairn_arm::models::stack::DeploymentStack;
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_host::{ExtensionHost, HostSettings, Registry};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::{Precondition, ResourceGroup, Store, Tags, Timestamp};
use cairn_store_sqlite::SqliteStore;
use serde_json::{Value, json};

const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1";
const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

struct Env {
    _dir: tempfile::TempDir,
    engine: Engine,
    service: StackService,
}

async fn setup() -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.expect("store"));
    store
        .put_resource_group(
            ResourceGroup {
                subscription_id: "00000000-0000-0000-0000-000000000001".into(),
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
    let host = Arc::new(ExtensionHost::new(
        Arc::new(Registry::new()),
        HostSettings::default(),
        "http://localhost/cairn-test",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings::default(),
    )
    .expect("engine");
    let service = StackService::new(
        engine.clone(),
        store,
        host,
        Providers::empty(),
        StackServiceSettings {
            retry_backoff: Duration::from_millis(10),
            ..StackServiceSettings::default()
        },
    );
    Env {
        _dir: dir,
        engine,
        service,
    }
}

/// A spec version whose main template deploys `modules/vault.json` (a Key Vault named by `name`).
async fn put_spec(engine: &Engine) -> String {
    let module = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": { "name": { "type": "string" } },
        "resources": [{ "type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01",
                        "name": "[parameters('name')]", "location": "westus",
                        "properties": { "sku": { "family": "A", "name": "standard" } } }]
    });
    let main = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": { "name": { "type": "string" } },
        "resources": [{ "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "module",
                        "properties": { "mode": "Incremental",
                                        "templateLink": { "relativePath": "modules/vault.json" },
                                        "parameters": { "name": { "value": "[parameters('name')]" } } } }]
    });
    let spec = format!("{RG}/providers/Microsoft.Resources/templateSpecs/vaults");
    let version = format!("{spec}/versions/1.0");
    for (id, body) in [
        (spec.clone(), json!({ "location": "westus" })),
        (
            version.clone(),
            json!({ "location": "westus", "properties": { "mainTemplate": main,
                "linkedTemplates": [{ "path": "modules/vault.json", "template": module }] } }),
        ),
    ] {
        let id = ResourceId::parse(&id).expect("id");
        let provider = engine
            .providers()
            .get(&id.resource_type())
            .expect("the template spec provider is built in")
            .clone();
        provider.put(&id, "2022-02-01", &body).await.expect("put");
    }
    version
}

fn stack(link: Value) -> DeploymentStack {
    serde_json::from_value(json!({ "properties": {
        "templateLink": link,
        "parameters": { "name": { "value": "stackkv" } },
        "actionOnUnmanage": { "resources": "delete" },
        "denySettings": { "mode": "none" }
    }}))
    .expect("a stack body")
}

async fn settle(service: &StackService, name: &str) -> Value {
    for _ in 0..600 {
        let stack = service.get(RG, name).await.expect("the stack");
        let value = serde_json::to_value(&stack).expect("json");
        let state = value["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default();
        if matches!(state, "succeeded" | "failed" | "canceled") {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the stack operation did not finish in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_by_template_spec_manages_what_its_linked_templates_deploy() {
    let env = setup().await;
    let version = put_spec(&env.engine).await;
    env.service
        .create_or_update(
            RG,
            "fromspec",
            stack(json!({ "id": version, "queryString": "sig=stack-sas-token" })),
            None,
        )
        .await
        .expect("accepted");
    let settled = settle(&env.service, "fromspec").await;
    assert!(
        !settled.to_string().contains("stack-sas-token"),
        "a stack never keeps the link's credential: {settled:#}"
    );
    assert_eq!(
        settled["properties"]["provisioningState"], "succeeded",
        "{settled:#}"
    );
    assert_eq!(settled["properties"]["templateLink"]["id"], json!(version));
    let vault = format!("{RG}/providers/Microsoft.KeyVault/vaults/stackkv");
    let managed: Vec<String> = settled["properties"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_ascii_lowercase))
        .collect();
    assert!(managed.contains(&vault.to_ascii_lowercase()), "{managed:?}");
    let exported = env
        .service
        .export_template(RG, "fromspec")
        .await
        .expect("export");
    let exported = serde_json::to_value(exported).expect("json");
    assert_eq!(exported["templateLink"]["id"], json!(version), "{exported}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_by_a_missing_template_spec_version_names_it() {
    let env = setup().await;
    let missing = format!("{RG}/providers/Microsoft.Resources/templateSpecs/none/versions/1.0");
    // Refused at PUT once the stack validation resolves links; until then the stack's deployment fails.
    let error = match env
        .service
        .create_or_update(RG, "missing", stack(json!({ "id": missing })), None)
        .await
    {
        Err(error) => serde_json::to_value(error.to_response()).expect("json"),
        Ok(_) => {
            let settled = settle(&env.service, "missing").await;
            assert_eq!(
                settled["properties"]["provisioningState"], "failed",
                "{settled:#}"
            );
            settled["properties"]["error"].clone()
        }
    };
    let text = error.to_string();
    assert!(text.contains("TemplateSpecVersionNotFound"), "{text}");
    assert!(text.contains(&missing), "{text}");
}

/// A spec version whose main template configures the Kubernetes extension's `auth.kubeConfig` from a secure
/// parameter: a value a stack can neither store nor fetch again.
async fn put_violating_spec(engine: &Engine) -> String {
    let template = json!({
        "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "parameters": { "secureParam": { "type": "securestring" } },
        "resources": { "cluster": {
            "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "cluster",
            "properties": {
                "expressionEvaluationOptions": { "scope": "inner" }, "mode": "Incremental",
                "extensionConfigs": { "k8s": {
                    "auth": { "kubeConfig": { "value": "[parameters('secureParam')]" } },
                    "namespace": { "value": "default" } } },
                "template": {
                    "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
                    "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0", "config": {
                        "namespace": { "type": "string", "defaultValue": "default" },
                        "kubeConfig": { "type": "secureString" } } } },
                    "resources": {} } } } }
    });
    let spec = format!("{RG}/providers/Microsoft.Resources/templateSpecs/kube");
    let version = format!("{spec}/versions/1.0");
    for (id, body) in [
        (spec.clone(), json!({ "location": "westus" })),
        (
            version.clone(),
            json!({ "location": "westus", "properties": { "mainTemplate": template } }),
        ),
    ] {
        let id = ResourceId::parse(&id).expect("id");
        let provider = engine
            .providers()
            .get(&id.resource_type())
            .expect("provider")
            .clone();
        provider.put(&id, "2022-02-01", &body).await.expect("put");
    }
    version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_whose_linked_template_breaks_stacks_mode_is_refused() {
    let env = setup().await;
    let version = put_violating_spec(&env.engine).await;
    let body: DeploymentStack = serde_json::from_value(json!({ "properties": {
        "templateLink": { "id": version },
        "parameters": { "secureParam": { "value": "kube-secret-material" } },
        "actionOnUnmanage": { "resources": "detach" },
        "denySettings": { "mode": "none" }
    }}))
    .expect("a stack body");
    for error in [
        env.service
            .create_or_update(RG, "kube", body.clone(), None)
            .await
            .expect_err("refused at PUT"),
        env.service
            .validate(RG, "kube", body)
            .await
            .expect_err("refused by validate"),
    ] {
        assert_eq!(
            (error.status(), error.code()),
            (400, "InvalidTemplateDeployment")
        );
        let response = serde_json::to_value(error.to_response()).expect("json");
        assert_eq!(
            response["error"]["details"][0]["code"],
            "stacks-extensibility-compat"
        );
        assert_eq!(
            response["error"]["details"][0]["target"],
            "properties.templateLink.resources.cluster.properties.extensionConfigs.k8s.auth.kubeConfig"
        );
        assert!(!response.to_string().contains("kube-secret-material"));
    }
    assert_eq!(
        env.service
            .get(RG, "kube")
            .await
            .expect_err("never stored")
            .status(),
        404
    );
}

//! One verdict for the stacks linter and the engine (issue 9 item 4): every config shape in
//! `tests/config_verdicts/*.json` runs through the linter in stacks mode and through a real stack PUT that deploys a
//! recording extension. Lint accepts ⇔ the stack deploys and the extension receives `received`; lint refuses ⇔ the
//! PUT is a 400 naming `target` and nothing reaches the extension. A case with `engine` (a code) is one the engine
//! judges on its own: a stack-initiated deployment PUT without the linter is refused with that code, before anything
//! runs.
//!
//! A case: `{ description, config? (the module's alias value), root? (the config is the stack's own), rootConfig?
//! (the stack's extensionConfigs for the root declaration), declaration? (the config schema), variables? (the root
//! template's), lint: accept|refuse, received?, stored? (properties of the config the stack keeps, such as a
//! directive), target?, engine? }`.

mod common;
use common::*;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_arm::models::deployment::Deployment;
use cairn_arm::models::stack::DeploymentStack;
use cairn_engine::{DeployOptions, Engine, EngineSettings, Providers};
use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_stacks_lint::{LintInput, Mode, Rules};
use cairn_store::{NewSecretVersion, SecretString, Tags, Timestamp};
use cairn_template::{Severity, SourceFile};
use serde_json::{Value, json};

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
/// The secure parameter's value and the literal secrets cases use: never in an error.
const CANARY: &str = "canary-secret-material";

/// An extension that records the config of every call and answers with success; it holds no resource before a
/// stack creates it (a `get` is 404), as a stack's deployment asks before its first write.
#[derive(Default)]
struct Recorder {
    /// The config of every createOrUpdate.
    configs: Mutex<Vec<Value>>,
    /// The config of every other call (the preview before a create, the get before a first write).
    other_configs: Mutex<Vec<Value>>,
    /// Calls of any kind, so a refused config is seen to reach nothing.
    calls: std::sync::atomic::AtomicUsize,
}

impl ExtensionTransport for Recorder {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if request.operation == Operation::Delete {
                return Ok(TransportResponse::json(204, Vec::new()));
            }
            let config = body.get("config").cloned().unwrap_or(Value::Null);
            if request.operation != Operation::CreateOrUpdate {
                self.other_configs.lock().unwrap().push(config);
                if request.operation == Operation::Get {
                    return Ok(TransportResponse::json(
                        404,
                        json!({"error": {"code": "ResourceNotFound", "message": "none yet"}})
                            .to_string()
                            .into_bytes(),
                    ));
                }
            } else {
                self.configs.lock().unwrap().push(config);
            }
            let properties = body.get("properties").cloned().unwrap_or(json!({}));
            Ok(TransportResponse::json(
                200,
                json!({"type": body["type"], "apiVersion": body.get("apiVersion"),
                       "identifiers": {"name": properties["name"]}, "properties": properties,
                       "status": "Succeeded"})
                .to_string()
                .into_bytes(),
            ))
        })
    }
}

struct Env {
    _dir: tempfile::TempDir,
    engine: Engine,
    service: StackService,
    recorder: Arc<Recorder>,
}

async fn setup() -> Env {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = common::store_with_group_and_vault(dir.path()).await;
    store
        .set_vault_secret(NewSecretVersion {
            vault_id: VAULT.into(),
            name: "kube".into(),
            value: SecretString::from("kube-token-1".to_owned()),
            content_type: None,
            enabled: true,
            not_before: None,
            expires: None,
            tags: Tags::new(),
            created_at: Timestamp::now(),
        })
        .await
        .expect("secret");
    let recorder = Arc::new(Recorder::default());
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        "Recorder",
        "1.0.0",
        recorder.clone(),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings {
            retry: RetryPolicy::none(),
            ..HostSettings::default()
        },
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
        recorder,
    }
}

/// The template of a case: the root declares the extension when the config is the stack's own or a module
/// inherits it; a module (inner scope) declares it and configures it with the case's `config` otherwise.
fn template_of(name: &str, case: &Value) -> Value {
    let declaration = case.get("declaration").cloned().unwrap_or_else(|| {
        json!({"namespace": {"type": "string", "defaultValue": "default"},
               "kubeConfig": {"type": "secureString"}})
    });
    let extension = json!({"rec": {"name": "Recorder", "version": "1.0.0", "config": declaration}});
    let widget = json!({"extension": "rec", "type": "widget", "apiVersion": "v1", "properties": {"name": name}});
    let root = case["root"].as_bool().unwrap_or(false);
    let mut template = json!({
        "$schema": SCHEMA, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "parameters": {"secureParam": {"type": "securestring"}},
        "resources": {}
    });
    if let Some(variables) = case.get("variables") {
        template["variables"] = variables.clone();
    }
    if root || case.get("rootConfig").is_some() {
        template["extensions"] = extension.clone();
    }
    if root {
        template["resources"]["w"] = widget;
    } else {
        template["resources"]["mod"] = json!({
            "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "mod",
            "properties": {
                "expressionEvaluationOptions": {"scope": "inner"}, "mode": "Incremental",
                "extensionConfigs": {"rec": case["config"]},
                "template": {"$schema": SCHEMA, "languageVersion": "2.2-experimental",
                             "contentVersion": "1.0.0.0", "extensions": extension,
                             "resources": {"w": widget}}
            }
        });
    }
    template
}

fn stack_of(name: &str, case: &Value) -> DeploymentStack {
    let mut properties = json!({
        "template": template_of(name, case),
        "parameters": {"secureParam": {"value": CANARY}},
        "actionOnUnmanage": {"resources": "detach"},
        "denySettings": {"mode": "none"}
    });
    if let Some(config) = case.get("rootConfig") {
        properties["extensionConfigs"] = json!({"rec": config});
    }
    serde_json::from_value(json!({"properties": properties})).expect("a stack body")
}

/// The linter's verdict in stacks mode on the stack's template and its parameters and extension configs (as the
/// stack service presents them): the targets of its errors.
fn lint_errors(name: &str, case: &Value) -> Vec<String> {
    let template = SourceFile::new("template", template_of(name, case).to_string());
    let mut parameters = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"secureParam": {"value": CANARY}}
    });
    if let Some(config) = case.get("rootConfig") {
        parameters["extensionConfigs"] = json!({"rec": config});
    }
    let parameters = SourceFile::new("parameters", parameters.to_string());
    cairn_stacks_lint::lint(&LintInput {
        template: &template,
        parameters: Some(&parameters),
        rules: &Rules::default(),
        mode: Mode::Stacks,
        rules_base: None,
    })
    .into_iter()
    .filter(|d| d.severity == Severity::Error)
    .map(|d| match d.file.as_deref() {
        Some("parameters") => format!("properties.{}", d.target),
        _ => format!("properties.template.{}", d.target),
    })
    .collect()
}

async fn settle(service: &StackService, name: &str) -> Value {
    for _ in 0..400 {
        if let Ok(stack) = service.get(RG, name).await {
            let value = serde_json::to_value(&stack).unwrap();
            let state = value["properties"]["provisioningState"]
                .as_str()
                .unwrap_or("");
            if matches!(state, "succeeded" | "failed" | "canceled") {
                return value;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the stack operation did not finish in time");
}

/// Runs one case; `Err` says how lint and engine disagree with each other or with the case.
async fn run_case(env: &Env, name: &str, case: &Value) -> Result<(), String> {
    let lint = lint_errors(name, case);
    let accepted = case["lint"] == "accept";
    if accepted != lint.is_empty() {
        return Err(format!(
            "the linter's verdict is not '{}': {lint:?}",
            case["lint"]
        ));
    }
    let calls_before = env.recorder.configs.lock().unwrap().len();
    let other_calls_before = env.recorder.other_configs.lock().unwrap().len();
    let any_calls_before = env.recorder.calls.load(std::sync::atomic::Ordering::SeqCst);
    let put = env
        .service
        .create_or_update(RG, name, stack_of(name, case), None)
        .await;
    if accepted {
        put.map_err(|e| format!("lint accepts, the stack PUT refuses: {e:?}"))?;
        let stack = settle(&env.service, name).await;
        if stack["properties"]["provisioningState"] != "succeeded" {
            return Err(format!(
                "lint accepts, the stack's deployment fails: {}",
                stack["properties"]["error"]
            ));
        }
        if let Some(stored) = case.get("stored").and_then(Value::as_object) {
            let kept = stack["properties"]["deploymentExtensions"]
                .as_array()
                .and_then(|all| all.iter().find(|e| e["name"] == "Recorder"))
                .map(|e| e["config"].clone())
                .unwrap_or(Value::Null);
            for (property, want) in stored {
                if kept[property] != *want {
                    return Err(format!(
                        "the stack keeps {} for '{property}', expected {want}",
                        kept[property]
                    ));
                }
            }
        }
        let configs = env.recorder.configs.lock().unwrap()[calls_before..].to_vec();
        if configs != [case["received"].clone()] {
            return Err(format!(
                "the extension received {configs:?}, expected [{}]",
                case["received"]
            ));
        }
        let others = env.recorder.other_configs.lock().unwrap()[other_calls_before..].to_vec();
        if others.iter().any(|config| *config != case["received"]) {
            return Err(format!(
                "the extension's other calls received {others:?}, expected [{}]",
                case["received"]
            ));
        }
        return Ok(());
    }
    let error = match put {
        Ok(_) => return Err("lint refuses, the stack PUT accepts".into()),
        Err(error) => error,
    };
    let response = serde_json::to_value(error.to_response()).unwrap();
    if (error.status(), error.code()) != (400, "InvalidTemplateDeployment") {
        return Err(format!(
            "the PUT's refusal is not a 400 InvalidTemplateDeployment: {response:#}"
        ));
    }
    let target = case["target"].as_str().unwrap_or_default();
    let targets: Vec<&str> = response["error"]["details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["target"].as_str())
        .collect();
    if !lint.iter().any(|t| t == target) || !targets.contains(&target) {
        return Err(format!(
            "expected the target '{target}': lint {lint:?}, PUT {targets:?}"
        ));
    }
    if response.to_string().contains(CANARY) {
        return Err("the refusal quotes a secret".into());
    }
    if env.service.get(RG, name).await.is_ok() {
        return Err("a refused stack was stored".into());
    }
    if let Some(code) = case.get("engine").and_then(Value::as_str) {
        let deployment: Deployment = serde_json::from_value(json!({"properties": {
            "mode": "Incremental",
            "template": template_of(name, case),
            "parameters": {"secureParam": {"value": CANARY}},
            "extensionConfigs": case.get("rootConfig").map(|c| json!({"rec": c})),
        }}))
        .map_err(|e| e.to_string())?;
        let refused = env
            .engine
            .create_or_update(
                RG,
                name,
                deployment,
                DeployOptions {
                    stack_initiated: true,
                    ..DeployOptions::default()
                },
            )
            .await;
        match refused {
            Ok(_) => return Err("the engine alone deploys what it should refuse".into()),
            Err(e) => {
                let text = format!("{e:?}");
                if !text.contains(code) || text.contains(CANARY) {
                    return Err(format!(
                        "the engine's refusal lacks '{code}' (or quotes a secret): {text}"
                    ));
                }
            }
        }
    }
    if env.recorder.calls.load(std::sync::atomic::Ordering::SeqCst) != any_calls_before {
        return Err("a refused config reached the extension".into());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lint_and_engine_agree_on_every_config_shape() {
    let env = setup().await;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/config_verdicts");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "the corpus is missing");
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let case: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
        if let Err(why) = run_case(&env, &name, &case).await {
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} case(s) disagree:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

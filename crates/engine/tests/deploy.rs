//! End-to-end deployments against the fake extension, the Local extension and the built-in providers: order,
//! parallelism, copy loops, records and operations, failures, cancel and re-runs.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_engine::{DeployOptions, EngineSettings, EventKind, Providers};
use common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_order_resources_and_reference_answers_from_the_extension() {
    let env = setup().await;
    let template = fake_template(
        json!({
            "a": widget("a", json!({})),
            "b": widget("b", json!({"peer": "[reference('a').createdBy]"})),
            "c": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                   "dependsOn": ["b"], "properties": { "name": "c" } }
        }),
        json!({ "fromB": { "type": "string", "value": "[reference('b').peer]" } }),
    );
    let record = deploy(&env.engine, RG, "order", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let started = env.fake.state.started.lock().unwrap().clone();
    assert_eq!(started, vec!["a", "b", "c"]);
    assert_eq!(env.fake.resource("widget", "b").unwrap()["peer"], "fake");
    let p = &record["properties"];
    assert_eq!(
        p["outputs"]["fromB"],
        json!({"type": "String", "value": "fake"})
    );
    assert_eq!(p["outputResources"].as_array().unwrap().len(), 3);
    let first = &p["outputResources"][0];
    assert_eq!(
        first["extension"],
        json!({"name": "Fake", "version": "1.0.0", "configId": "c1"})
    );
    assert_eq!(first["resourceType"], "widget");
    assert_eq!(first["identifiers"], json!({"name": "a"}));
    assert!(first["referenceId"].as_str().unwrap().starts_with("01-"));
    assert_eq!(
        p["extensions"],
        json!([{"alias": "fake", "deploymentId": format!("{RG}/providers/Microsoft.Resources/deployments/order"),
                "name": "Fake", "version": "1.0.0", "configId": "c1"}])
    );
    assert!(p["correlationId"].is_string() && p["duration"].as_str().unwrap().starts_with("PT"));
    let deps = p["dependencies"].as_array().unwrap();
    assert_eq!(deps.len(), 2, "{deps:?}");

    let ops = env.engine.operations(RG, "order").await.unwrap();
    assert_eq!(ops.len(), 3);
    let op = serde_json::to_value(&ops[1]).unwrap();
    assert_eq!(op["properties"]["provisioningOperation"], "Create");
    assert_eq!(op["properties"]["provisioningState"], "Succeeded");
    assert_eq!(op["properties"]["statusCode"], "OK");
    let target = &op["properties"]["targetResource"];
    assert_eq!(target["symbolicName"], "b");
    assert_eq!(target["identifiers"], json!({"name": "b"}));
    assert_eq!(target["extension"]["alias"], "fake");
    assert_eq!(target["extension"]["configId"], "c1");
}

/// A template of `count` widgets named `{prefix}0`, `{prefix}1`, ... (one copy loop, no dependencies).
fn widgets(prefix: &str, count: usize) -> Value {
    fake_template(
        json!({
            "many": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                      "copy": { "name": "many", "count": count },
                      "properties": { "name": format!("[format('{prefix}{{0}}', copyIndex())]") } }
        }),
        json!({}),
    )
}

/// An engine of `parallelism` over the fake extension answering creates after `latency`.
async fn with_parallelism(parallelism: usize, latency: Duration) -> TestEnv {
    let settings = EngineSettings {
        parallelism,
        ..common::settings()
    };
    setup_with(settings, latency, Providers::empty()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_is_bounded() {
    let env = with_parallelism(3, Duration::from_millis(40)).await;
    let record = deploy(
        &env.engine,
        RG,
        "wide",
        request(widgets("w", 10), json!({})),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.count(), 10);
    assert_eq!(env.fake.state.max_in_flight.load(Ordering::SeqCst), 3);
}

/// Operation slots shared by every deployment of the engine (a server-wide cap): two deployments of parallelism 4
/// run concurrently, yet never more than 3 calls are in flight between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_operation_slots_cap_concurrent_deployments_together() {
    let settings = EngineSettings {
        parallelism: 4,
        operation_slots: Some(cairn_engine::OperationSlots::new(3)),
        ..common::settings()
    };
    let env = setup_with(settings, Duration::from_millis(40), Providers::empty()).await;
    let (a, b) = tokio::join!(
        deploy(&env.engine, RG, "a", request(widgets("a", 8), json!({}))),
        deploy(&env.engine, RG, "b", request(widgets("b", 8), json!({}))),
    );
    assert_eq!(state(&a), "Succeeded", "{a:#}");
    assert_eq!(state(&b), "Succeeded", "{b:#}");
    assert_eq!(env.fake.count(), 16);
    assert_eq!(env.fake.state.max_in_flight.load(Ordering::SeqCst), 3);
}

/// A provider for `Test.Rp/slow` whose PUTs take 40 ms; counts its calls and, with the fake extension's
/// creates, every write in flight.
struct SlowProvider {
    fake: std::sync::Arc<FakeExtension>,
    puts: std::sync::atomic::AtomicUsize,
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl cairn_engine::ResourceProvider for SlowProvider {
    fn put<'a>(
        &'a self,
        id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
        _body: &'a Value,
    ) -> cairn_engine::provider::ProviderFuture<'a, cairn_engine::PutOutcome> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            // Writes of both kinds at once: this provider's and the extension's creates.
            let writes = now + self.fake.state.in_flight.load(Ordering::SeqCst);
            self.most.fetch_max(writes, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(40)).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.puts.fetch_add(1, Ordering::SeqCst);
            let resource = json!({"id": id.to_string(), "name": id.name(), "type": "Test.Rp/slow",
                                  "properties": {"provisioningState": "Succeeded"}});
            Ok(cairn_engine::PutOutcome {
                resource,
                created: true,
            })
        })
    }

    fn get<'a>(
        &'a self,
        _id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
    ) -> cairn_engine::provider::ProviderFuture<'a, Option<Value>> {
        Box::pin(async { Ok(None) })
    }

    fn delete<'a>(
        &'a self,
        _id: &'a cairn_arm::ResourceId,
        _api_version: &'a str,
    ) -> cairn_engine::provider::ProviderFuture<'a, bool> {
        Box::pin(async { Ok(false) })
    }
}

/// Provider resources and extension creates take their call slots from one pool: while the next resources are
/// evaluated and looked up ahead of their calls, at most `parallelism` writes of either kind are in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_and_extension_writes_share_the_parallelism() {
    let settings = EngineSettings {
        parallelism: 2,
        ..common::settings()
    };
    let fake = FakeExtension::new(Duration::from_millis(40));
    let slow = std::sync::Arc::new(SlowProvider {
        fake: fake.clone(),
        puts: Default::default(),
        in_flight: Default::default(),
        most: Default::default(),
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_store(dir.path()).await;
    create_group(&store, "rg1").await;
    let engine = cairn_engine::Engine::new(
        store,
        host_with(&fake),
        Providers::empty().with("Test.Rp/slow", slow.clone()),
        settings,
    )
    .expect("engine");
    let mut resources = serde_json::Map::new();
    for i in 0..6 {
        resources.insert(format!("w{i}"), widget(&format!("w{i}"), json!({})));
        resources.insert(
            format!("s{i}"),
            json!({ "type": "Test.Rp/slow", "apiVersion": "2024-01-01", "name": format!("s{i}"),
                    "properties": {} }),
        );
    }
    let record = deploy(
        &engine,
        RG,
        "shared",
        request(
            fake_template(Value::Object(resources), json!({})),
            json!({}),
        ),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(slow.puts.load(Ordering::SeqCst), 6);
    assert_eq!(fake.count(), 6);
    assert!(
        slow.most.load(Ordering::SeqCst) <= 2,
        "writes in flight at most {}",
        slow.most.load(Ordering::SeqCst)
    );
    // Whether two creates overlap at all depends on how the slots fall between the kinds: only the bound is sure.
    assert!(fake.state.max_in_flight.load(Ordering::SeqCst) <= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_before_creates_overlap_the_creates_in_flight() {
    let env = with_parallelism(3, Duration::from_millis(40)).await;
    *env.fake.preview_latency.lock().unwrap() = Duration::from_millis(40);
    let record = deploy(
        &env.engine,
        RG,
        "overlap",
        request(widgets("w", 12), json!({})),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.count(), 12);
    // Creates and previews each stay within the parallelism, but the next resources' previews run while the
    // creates before them are in flight: more than `parallelism` calls at once.
    assert_eq!(env.fake.state.max_in_flight.load(Ordering::SeqCst), 3);
    assert!(env.fake.state.previews.most() <= 3);
    assert!(
        env.fake.state.calls.most() > 3,
        "calls in flight at most {}",
        env.fake.state.calls.most()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_waiting_for_a_call_slot_does_not_hold_up_the_next_lookups() {
    let env = with_parallelism(1, Duration::from_millis(150)).await;
    let record = deploy(
        &env.engine,
        RG,
        "queued",
        request(widgets("w", 4), json!({})),
    )
    .await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.state.max_in_flight.load(Ordering::SeqCst), 1);
    // While the first create holds the only call slot, the second waits for it in a queue place, not in the
    // admission slot: the third is looked up meanwhile (and waits for the queue place, so no more).
    let log = env.fake.state.log.lock().unwrap().clone();
    let first_end = log.iter().position(|e| e.starts_with("end:")).unwrap();
    let previews = log[..first_end]
        .iter()
        .filter(|e| e.starts_with("preview:"))
        .count();
    assert_eq!(previews, 3, "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serial_copy_with_batch_size_runs_in_batches() {
    // Long enough that a batch's second call starts before its first ends even on a loaded machine.
    let env = setup_with(
        common::settings(),
        Duration::from_millis(100),
        Providers::empty(),
    )
    .await;
    let template = fake_template(
        json!({
            "batch": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                       "copy": { "name": "batch", "count": 6, "mode": "serial", "batchSize": 2 },
                       "properties": { "name": "[format('b{0}', copyIndex())]" } }
        }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "serial", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.state.max_in_flight.load(Ordering::SeqCst), 2);
    let log = env.fake.state.log.lock().unwrap().clone();
    let at = |event: &str| log.iter().position(|e| e == event).unwrap();
    // Batch k+1 starts only after both calls of batch k ended; the two calls of a batch overlap.
    for (batch, next) in [((0, 1), 2), ((2, 3), 4)] {
        for member in [batch.0, batch.1] {
            for started in [next, next + 1] {
                assert!(
                    at(&format!("end:b{member}")) < at(&format!("start:b{started}")),
                    "{log:?}"
                );
            }
        }
        assert!(
            at(&format!("start:b{}", batch.1)) < at(&format!("end:b{}", batch.0)),
            "{log:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_resource_gives_arms_error_tree_and_other_branches_finish() {
    let env = setup_with(
        common::settings(),
        Duration::from_millis(20),
        Providers::empty(),
    )
    .await;
    env.fake.fail_on("bad");
    let template = fake_template(
        json!({
            "bad": widget("bad", json!({})),
            "afterBad": { "extension": "fake", "type": "widget", "apiVersion": "v1", "dependsOn": ["bad"],
                          "properties": { "name": "afterBad" } },
            "slow": widget("slow", json!({})),
            "storage": { "type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01",
                         "name": "st1", "location": "westus", "properties": {} }
        }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "broken", request(template, json!({}))).await;
    assert_eq!(state(&record), "Failed");
    let error = &record["properties"]["error"];
    assert_eq!(error["code"], "DeploymentFailed");
    assert_eq!(
        error["message"],
        "At least one resource deployment operation failed. Please list deployment operations for details. Please see https://aka.ms/arm-deployment-operations for usage details."
    );
    let details = error["details"].as_array().unwrap();
    let codes: Vec<&str> = details
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"ScriptedFailure"), "{details:?}");
    assert!(codes.contains(&"NoRegisteredProviderFound"), "{details:?}");
    let storage = details
        .iter()
        .find(|d| d["code"] == "NoRegisteredProviderFound")
        .unwrap();
    assert!(
        storage["message"]
            .as_str()
            .unwrap()
            .contains("Microsoft.Storage/storageAccounts")
    );
    let scripted = details
        .iter()
        .find(|d| d["code"] == "ScriptedFailure")
        .unwrap();
    assert_eq!(scripted["target"], "/properties/name");
    // The independent branch finished; the dependent one never started.
    assert!(env.fake.resource("widget", "slow").is_some());
    assert!(env.fake.resource("widget", "afterBad").is_none());
    assert!(record["properties"].get("outputResources").is_none());
    let ops = env.engine.operations(RG, "broken").await.unwrap();
    let failed: Vec<_> = ops
        .iter()
        .filter(|o| o.properties.provisioning_state.as_ref().map(|s| s.as_str()) == Some("Failed"))
        .collect();
    assert_eq!(failed.len(), 2);
    let failed_op = serde_json::to_value(failed[0]).unwrap();
    assert!(failed_op["properties"]["statusMessage"]["error"]["code"].is_string());
}

/// Starts deployment `name` of `template`, cancels it after `delay` and returns its record once it has ended.
async fn canceled_after(env: &TestEnv, name: &str, template: Value, delay: Duration) -> Value {
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            name,
            request(template, json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    tokio::time::sleep(delay).await;
    env.engine.cancel(RG, name).await.unwrap();
    serde_json::to_value(handle.wait().await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_scheduling_and_ends_canceled() {
    let settings = EngineSettings {
        parallelism: 1,
        ..common::settings()
    };
    let env = setup_with(settings, Duration::from_millis(150), Providers::empty()).await;
    let template = fake_template(
        json!({
            "many": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                      "copy": { "name": "many", "count": 10 },
                      "properties": { "name": "[format('w{0}', copyIndex())]" } }
        }),
        json!({}),
    );
    let record = canceled_after(&env, "cancelme", template, Duration::from_millis(200)).await;
    assert_eq!(state(&record), "Canceled");
    let created = env.fake.count();
    assert!((1..10).contains(&created), "created {created}");
    // A finished deployment cannot be canceled again, but can be deleted.
    let err = env.engine.cancel(RG, "cancelme").await.unwrap_err();
    assert_eq!(err.to_arm().status(), 409);
    env.engine.delete(RG, "cancelme").await.unwrap();
    assert_eq!(
        env.engine
            .get(RG, "cancelme")
            .await
            .unwrap_err()
            .to_arm()
            .status(),
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_waiting_for_its_preview_when_the_run_is_canceled_never_starts() {
    // One at a time and slow previews: while w0 previews, w1 is admitted and evaluated and waits for the preview
    // place; the cancel comes meanwhile.
    let env = with_parallelism(1, Duration::from_millis(10)).await;
    *env.fake.preview_latency.lock().unwrap() = Duration::from_millis(400);
    let record = canceled_after(
        &env,
        "withdrawn",
        widgets("w", 3),
        Duration::from_millis(150),
    )
    .await;
    assert_eq!(state(&record), "Canceled", "{record:#}");
    let log = env.fake.state.log.lock().unwrap().clone();
    let previews: Vec<&String> = log.iter().filter(|e| e.starts_with("preview:")).collect();
    assert_eq!(previews, ["preview:w0"], "{log:?}");
    // w0, looked up when the cancel came, may still be written; nothing after it is.
    assert!(env.fake.count() <= 1, "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerunning_reapplies_idempotently_and_running_deployments_conflict() {
    let env = setup_with(
        common::settings(),
        Duration::from_millis(100),
        Providers::empty(),
    )
    .await;
    let template = fake_template(
        json!({ "a": widget("a", json!({"size": 1})), "b": widget("b", json!({})) }),
        json!({}),
    );
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "again",
            request(template.clone(), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    let busy = env
        .engine
        .create_or_update(
            RG,
            "again",
            request(template.clone(), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(busy.to_arm().code(), "DeploymentActive");
    assert_eq!(
        env.engine
            .delete(RG, "again")
            .await
            .unwrap_err()
            .to_arm()
            .status(),
        409
    );
    let first = serde_json::to_value(handle.wait().await.unwrap()).unwrap();
    assert_eq!(state(&first), "Succeeded");
    let second = deploy(&env.engine, RG, "again", request(template, json!({}))).await;
    assert_eq!(state(&second), "Succeeded");
    assert_eq!(env.fake.count(), 2);
    assert_eq!(env.fake.state.creates.load(Ordering::SeqCst), 4);
    assert_eq!(
        first["properties"]["outputResources"],
        second["properties"]["outputResources"]
    );
    let page = env.engine.list(RG, None, Default::default()).await.unwrap();
    assert_eq!(page.value.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_report_progress() {
    let env = setup().await;
    let template = fake_template(json!({ "a": widget("a", json!({})) }), json!({}));
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "events",
            request(template, json!({})),
            DeployOptions {
                follow_events: true,
                ..DeployOptions::default()
            },
        )
        .await
        .unwrap();
    let mut events = handle.take_events().unwrap();
    handle.wait().await.unwrap();
    let mut kinds = Vec::new();
    while let Some(e) = events.recv().await {
        kinds.push((e.kind, e.status));
    }
    assert_eq!(
        kinds,
        vec![
            (EventKind::DeploymentStarted, "Running".to_string()),
            (EventKind::ResourceStarted, "Running".to_string()),
            (EventKind::ResourceFinished, "Succeeded".to_string()),
            (EventKind::DeploymentFinished, "Succeeded".to_string()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_nobody_follows_queues_no_events() {
    let env = setup().await;
    let template = fake_template(json!({ "a": widget("a", json!({})) }), json!({}));
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "unfollowed",
            request(template, json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        handle.take_events().is_none(),
        "no event stream for a caller that does not follow one"
    );
    let done = handle.wait().await.unwrap();
    assert_eq!(
        done.properties
            .provisioning_state
            .as_ref()
            .map(|s| s.as_str()),
        Some("Succeeded")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_templates_are_rejected_before_anything_is_stored() {
    let env = setup().await;
    let template = fake_template(
        json!({ "a": { "extension": "fake", "type": "widget", "apiVersion": "v1", "dependsOn": ["nope"],
                       "properties": { "name": "a" } } }),
        json!({}),
    );
    let err = env
        .engine
        .create_or_update(
            RG,
            "invalid",
            request(template, json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), "InvalidTemplateDeployment");
    assert!(env.engine.get(RG, "invalid").await.is_err());
    let missing_group = env
        .engine
        .create_or_update(
            "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/nope",
            "x",
            request(fake_template(json!({}), json!({})), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap_err()
        .to_arm();
    assert_eq!(missing_group.code(), "ResourceGroupNotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_sent_as_a_string_is_stored_parsed_and_secure_parameters_stay_hidden() {
    let env = setup().await;
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "pw": { "type": "securestring" }, "n": { "type": "int" } },
        "resources": [],
        "outputs": { "n": { "type": "int", "value": "[parameters('n')]" } }
    });
    let req: cairn_arm::models::deployment::Deployment = serde_json::from_value(json!({
        "properties": { "mode": "Incremental", "template": template.to_string(),
                        "parameters": { "pw": { "value": "string-template-secret" }, "n": { "value": 4 } } }
    }))
    .unwrap();
    let record = deploy(&env.engine, RG, "stringy", req).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let p = &record["properties"];
    assert_eq!(p["parameters"]["pw"], json!({"type": "SecureString"}));
    assert_eq!(p["parameters"]["n"], json!({"type": "Int", "value": 4}));
    assert_eq!(p["outputs"]["n"], json!({"type": "Int", "value": 4}));
    let exported = env.engine.export_template(RG, "stringy").await.unwrap();
    assert_eq!(
        exported.template.unwrap()["parameters"]["pw"]["type"],
        "securestring"
    );
}

/// Seed 001's `providers` block (resources naming it with `provider`, configs as `deploymentProviderConfigs` in
/// the body) and seed 002's `extensions.<alias>.extension` spelling deploy like the shipped `extensions` form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_declaration_forms_deploy_like_the_shipped_one() {
    let env = setup().await;
    let schema = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
    let providers = json!({
        "$schema": schema, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "providers": { "fk": { "name": "Fake", "version": "1.0.0",
                               "config": { "cluster": { "type": "string" } } } },
        "resources": { "w": { "provider": "fk", "type": "widget", "apiVersion": "v1",
                              "properties": { "name": "from-providers" } } }
    });
    let req: cairn_arm::models::deployment::Deployment = serde_json::from_value(json!({
        "properties": { "mode": "Incremental", "template": providers,
                        "deploymentProviderConfigs": { "fk": { "cluster": { "value": "seed001-cluster" } } } }
    }))
    .unwrap();
    let record = deploy(&env.engine, RG, "seed001", req).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(
        env.fake.config_of("from-providers"),
        Some(json!({ "cluster": "seed001-cluster" }))
    );

    let early = json!({
        "$schema": schema, "languageVersion": "2.2-experimental", "contentVersion": "1.0.0.0",
        "extensions": { "fk": { "extension": "Fake", "version": "1.0.0",
                                "config": { "cluster": { "type": "string", "defaultValue": "seed002-cluster" } } } },
        "resources": { "w": { "extension": "fk", "type": "widget", "apiVersion": "v1",
                              "properties": { "name": "from-seed002" } } }
    });
    let record = deploy(&env.engine, RG, "seed002", request(early, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(
        env.fake.config_of("from-seed002"),
        Some(json!({ "cluster": "seed002-cluster" }))
    );
}

/// Every created extension resource is inventoried under its identity; a create the extension refused, of a
/// resource the extension then says does not exist, leaves no inventory row behind (the row its `Running` step
/// wrote goes with its `Failed` step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inventory_holds_what_the_extension_holds_after_a_refused_create() {
    let env = setup().await;
    env.fake.fail_on("bad");
    let template = fake_template(
        json!({ "good": widget("good", json!({})), "bad": widget("bad", json!({})) }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "refused", request(template, json!({}))).await;
    assert_eq!(state(&record), "Failed");
    let rows = env
        .store
        .list_managed_resources(cairn_store::ManagedResourceFilter::default())
        .await
        .unwrap()
        .items;
    let names: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.resource.extension.as_ref()?.identifiers.as_ref()?["name"].as_str())
        .collect();
    assert_eq!(names, vec!["good"], "{rows:#?}");
    assert_eq!(env.fake.names(), vec!["good"]);
}

/// A root deployment counts in `cairn_deployments_in_flight` while it runs and its run time lands in
/// `cairn_deployment_duration_seconds` under its final state; its nested deployment is not counted separately.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_are_counted_in_the_metrics() {
    let metrics = cairn_metrics::Metrics::new();
    let settings = EngineSettings {
        metrics: metrics.clone(),
        ..common::settings()
    };
    let env = setup_with(settings, Duration::from_millis(300), Providers::empty()).await;
    let nested = json!({
        "type": "Microsoft.Resources/deployments", "apiVersion": "2022-09-01", "name": "inner",
        "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
            "template": { "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                          "contentVersion": "1.0.0.0", "resources": [] } }
    });
    let template = fake_template(
        json!({ "a": widget("a", json!({})), "inner": nested }),
        json!({}),
    );
    let mut handle = env
        .engine
        .create_or_update(
            RG,
            "counted",
            request(template, json!({})),
            DeployOptions::default(),
        )
        .await
        .expect("accepted");
    let in_flight = |text: &str| {
        text.lines()
            .find(|line| line.starts_with("cairn_deployments_in_flight "))
            .map(str::to_owned)
    };
    let started = std::time::Instant::now();
    while in_flight(&metrics.render()).as_deref() != Some("cairn_deployments_in_flight 1") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}",
            metrics.render()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let done = handle.wait().await.expect("ended");
    assert_eq!(
        serde_json::to_value(&done).unwrap()["properties"]["provisioningState"],
        "Succeeded"
    );
    let text = metrics.render();
    assert!(
        text.contains("cairn_deployment_duration_seconds_count{status=\"Succeeded\"} 1"),
        "{text}"
    );
    assert!(!text.contains("status=\"Failed\""), "{text}");
    assert_eq!(
        in_flight(&text).as_deref(),
        Some("cairn_deployments_in_flight 0")
    );
}

/// `operations_after` gives what changed after a cursor: from none, the whole list `operations` reads; from its
/// own cursor, nothing; from a cursor of an earlier run, the new run's list from its start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_after_a_cursor_are_what_changed_since() {
    let env = setup().await;
    let first = deploy(
        &env.engine,
        RG,
        "delta",
        request(widgets("d", 5), json!({})),
    )
    .await;
    assert_eq!(state(&first), "Succeeded", "{first:#}");
    let whole = env.engine.operations(RG, "delta").await.unwrap();
    let from_start = env
        .engine
        .operations_after(RG, "delta", None)
        .await
        .unwrap();
    assert!(!from_start.continues);
    let listed: Vec<_> = from_start
        .changed
        .iter()
        .map(|(_, op)| op.clone())
        .collect();
    assert_eq!(listed, whole);
    assert!(
        from_start.cursor.sequence >= from_start.changed.iter().map(|(s, _)| *s).max().unwrap()
    );

    let nothing = env
        .engine
        .operations_after(RG, "delta", Some(&from_start.cursor))
        .await
        .unwrap();
    assert!(nothing.continues);
    assert!(nothing.changed.is_empty());
    assert_eq!(nothing.cursor, from_start.cursor);

    let second = deploy(
        &env.engine,
        RG,
        "delta",
        request(widgets("e", 2), json!({})),
    )
    .await;
    assert_eq!(state(&second), "Succeeded", "{second:#}");
    let next_run = env
        .engine
        .operations_after(RG, "delta", Some(&from_start.cursor))
        .await
        .unwrap();
    assert!(!next_run.continues, "another run");
    assert_ne!(next_run.cursor.run, from_start.cursor.run);
    let listed: Vec<_> = next_run.changed.into_iter().map(|(_, op)| op).collect();
    assert_eq!(listed, env.engine.operations(RG, "delta").await.unwrap());
    assert_eq!(listed.len(), 2);
}

//! Crash recovery: an engine dropped mid-deployment (a slow fake extension keeps it busy) leaves the run
//! `Running`; a new engine on the same data directory takes it over with `recover()` and either resumes it or
//! ends it `Failed` with the created resources listed. Nothing stays `Running`.

mod common;

use std::time::Duration;

use cairn_engine::{DeployOptions, Engine, EngineSettings, Providers, RecoveryPolicy};
use common::*;
use serde_json::{Value, json};

fn chain(n: usize) -> Value {
    let mut resources = serde_json::Map::new();
    for i in 0..n {
        let mut w = widget(&format!("w{i}"), json!({}));
        if i > 0 {
            w["dependsOn"] = json!([format!("r{}", i - 1)]);
        }
        resources.insert(format!("r{i}"), w);
    }
    fake_template(Value::Object(resources), json!({}))
}

fn crash_settings(policy: RecoveryPolicy) -> EngineSettings {
    EngineSettings {
        parallelism: 2,
        claim_ttl: Duration::from_millis(400),
        heartbeat_interval: Duration::from_millis(100),
        recovery: policy,
        ..EngineSettings::default()
    }
}

/// A new engine on the same store and extension, as after a restart.
fn restarted(
    store: &std::sync::Arc<dyn cairn_store::Store>,
    fake: &std::sync::Arc<FakeExtension>,
    policy: RecoveryPolicy,
) -> Engine {
    Engine::new(
        store.clone(),
        host_with(fake),
        Providers::empty(),
        crash_settings(policy),
    )
    .unwrap()
}

/// Starts a 5-step chain, lets two steps finish, then drops the engine while the third is in flight.
async fn crash_mid_deployment(policy: RecoveryPolicy) -> (TestEnv, std::sync::Arc<FakeExtension>) {
    let env = setup_with(
        crash_settings(policy),
        Duration::from_millis(300),
        Providers::empty(),
    )
    .await;
    let handle = env
        .engine
        .create_or_update(
            RG,
            "crashy",
            request(chain(5), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ops = env.engine.operations(RG, "crashy").await.unwrap();
        let done = ops
            .iter()
            .filter(|o| {
                o.properties.provisioning_state.as_ref().map(|s| s.as_str()) == Some("Succeeded")
            })
            .count();
        if done >= 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deployment did not progress"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(handle);
    let fake = env.fake.clone();
    let TestEnv {
        dir, store, engine, ..
    } = env;
    drop(engine);
    // The coordinator stops at once; give its thread a moment to drop what it held.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let record = serde_json::to_value(cairn_engine::records::deployment_extended(
        &store
            .get_deployment(&cairn_store::DeploymentKey::new(RG, "crashy"))
            .await
            .unwrap()
            .unwrap(),
    ))
    .unwrap();
    assert_eq!(state(&record), "Running", "the dead engine left it running");
    drop(store);
    // Let the dead engine's claim expire.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let store = open_store(dir.path()).await;
    let engine = restarted(&store, &fake, policy);
    (
        TestEnv {
            dir,
            store,
            engine,
            fake: fake.clone(),
        },
        fake,
    )
}

async fn wait_terminal(engine: &Engine, name: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let record = serde_json::to_value(engine.get(RG, name).await.unwrap()).unwrap();
        if !matches!(state(&record), "Running" | "Accepted") {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {record:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// No operation of a finished deployment is left `Running`.
async fn no_operation_running(engine: &Engine, name: &str) {
    for op in engine.operations(RG, name).await.unwrap() {
        let state = op
            .properties
            .provisioning_state
            .as_ref()
            .map(|s| s.as_str().to_string());
        assert_ne!(state.as_deref(), Some("Running"), "{op:?}");
    }
}

async fn nothing_running(engine: &Engine) {
    let page = engine.list(RG, None, Default::default()).await.unwrap();
    for d in page.value {
        let state = d.properties.provisioning_state.unwrap();
        assert!(state.is_terminal(), "{:?} is {state}", d.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_engine_resumes_an_interrupted_deployment() {
    let (env, fake) = crash_mid_deployment(RecoveryPolicy::Resume).await;
    let created_before = fake.count();
    assert!((2..5).contains(&created_before), "{created_before}");
    let report = env.engine.recover().await.unwrap();
    assert_eq!(report.resumed.len(), 1, "{report:?}");
    assert!(report.failed.is_empty());
    let record = wait_terminal(&env.engine, "crashy").await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(fake.names(), vec!["w0", "w1", "w2", "w3", "w4"]);
    assert_eq!(
        record["properties"]["outputResources"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    nothing_running(&env.engine).await;
    // A second recover finds nothing to do.
    let again = env.engine.recover().await.unwrap();
    assert!(again.resumed.is_empty() && again.failed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_fail_policy_an_interrupted_deployment_fails_listing_what_it_created() {
    let (env, fake) = crash_mid_deployment(RecoveryPolicy::Fail).await;
    let report = env.engine.recover().await.unwrap();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let record = serde_json::to_value(env.engine.get(RG, "crashy").await.unwrap()).unwrap();
    assert_eq!(state(&record), "Failed");
    assert_eq!(
        record["properties"]["error"]["details"][0]["code"],
        "DeploymentInterrupted"
    );
    let listed: Vec<String> = record["properties"]["outputResources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["identifiers"]["name"].as_str().map(str::to_string))
        .collect();
    let created = fake.names();
    assert!(!created.is_empty());
    for name in &created {
        assert!(
            listed.contains(name),
            "{name} created but not listed: {listed:?}"
        );
    }
    nothing_running(&env.engine).await;
    no_operation_running(&env.engine, "crashy").await;
}

/// Waits until the deployment's journal shows an operation running (its call is out).
async fn wait_running_operation(engine: &Engine, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let running = engine.operations(RG, name).await.unwrap().iter().any(|o| {
            o.properties.provisioning_state.as_ref().map(|s| s.as_str()) == Some("Running")
        });
        if running {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no operation of {name} started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Drops `engine` (a crash, as the store sees it) and waits for its claims to expire.
async fn crash(engine: Engine) {
    drop(engine);
    tokio::time::sleep(Duration::from_millis(600)).await;
}

/// A deployment that dies with its engine again and again, never finishing an operation, is resumed by the first
/// two takeovers and abandoned by the third (`max_recovery_takeovers` = 3): the engine that takes it over stays
/// up and the deployment ends `Failed` with `DeploymentRecoveryAbandoned`, listing what it was creating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_taken_over_again_and_again_without_progress_is_abandoned() {
    // The extension never answers in time: the first resource is always in flight when the engine dies.
    let env = setup_with(
        crash_settings(RecoveryPolicy::Resume),
        Duration::from_secs(60),
        Providers::empty(),
    )
    .await;
    env.engine
        .create_or_update(
            RG,
            "poison",
            request(chain(2), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    let TestEnv {
        dir,
        store,
        engine,
        fake,
    } = env;
    wait_running_operation(&engine, "poison").await;
    crash(engine).await;
    for takeover in 1..=2 {
        let engine = restarted(&store, &fake, RecoveryPolicy::Resume);
        let report = engine.recover().await.unwrap();
        assert_eq!(report.resumed.len(), 1, "takeover {takeover}: {report:?}");
        wait_running_operation(&engine, "poison").await;
        crash(engine).await;
    }
    let engine = restarted(&store, &fake, RecoveryPolicy::Resume);
    let report = engine.recover().await.unwrap();
    assert!(report.resumed.is_empty(), "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let record = serde_json::to_value(engine.get(RG, "poison").await.unwrap()).unwrap();
    assert_eq!(state(&record), "Failed");
    let detail = &record["properties"]["error"]["details"][0];
    assert_eq!(detail["code"], "DeploymentRecoveryAbandoned", "{record:#}");
    assert!(detail["message"].as_str().unwrap().contains("3 times"));
    nothing_running(&engine).await;
    no_operation_running(&engine, "poison").await;
    // Abandoned is final: a later recovery leaves it alone.
    let again = engine.recover().await.unwrap();
    assert!(again.resumed.is_empty() && again.failed.is_empty());
    drop(dir);
}

async fn succeeded_operations(engine: &Engine, name: &str) -> usize {
    engine
        .operations(RG, name)
        .await
        .unwrap()
        .iter()
        .filter(|o| {
            o.properties.provisioning_state.as_ref().map(|s| s.as_str()) == Some("Succeeded")
        })
        .count()
}

/// Takeovers that find new succeeded operations each time start the count again: a long deployment on a flaky
/// host is resumed as often as it keeps moving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeovers_with_progress_keep_resuming() {
    let env = setup_with(
        crash_settings(RecoveryPolicy::Resume),
        Duration::from_millis(150),
        Providers::empty(),
    )
    .await;
    env.engine
        .create_or_update(
            RG,
            "long",
            request(chain(8), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    let TestEnv {
        dir,
        store,
        engine,
        fake,
    } = env;
    // Let one operation succeed before each crash: four crashes, each after progress.
    let mut engine = engine;
    for round in 0..4 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while succeeded_operations(&engine, "long").await <= round {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no progress in round {round}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        crash(engine).await;
        engine = restarted(&store, &fake, RecoveryPolicy::Resume);
        let report = engine.recover().await.unwrap();
        assert_eq!(report.resumed.len(), 1, "round {round}: {report:?}");
    }
    let record = wait_terminal(&engine, "long").await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    drop(dir);
}

/// The inventory's extension resources, as the fake's `(type, name)` pairs.
async fn inventoried(store: &std::sync::Arc<dyn cairn_store::Store>) -> Vec<String> {
    let mut names: Vec<String> = store
        .list_managed_resources(cairn_store::ManagedResourceFilter::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| {
            let key = cairn_store::ResourceKey::extension(
                "Fake",
                Some("c1"),
                "widget",
                &json!({ "name": r.resource.extension.as_ref()?.identifiers.as_ref()?["name"] }),
            );
            assert_eq!(
                r.resource.key, key,
                "an inventory row keyed by the resource's identity"
            );
            r.resource.extension?.identifiers?["name"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The names `outputResources` lists by their identifiers (each with the extension and its configId).
fn listed(record: &Value) -> Vec<String> {
    let mut names: Vec<String> = record["properties"]["outputResources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            assert_eq!(r["extension"]["name"], "Fake", "{r}");
            assert_eq!(r["extension"]["configId"], "c1", "{r}");
            assert_eq!(r["resourceType"], "widget", "{r}");
            r["identifiers"]["name"]
                .as_str()
                .unwrap_or("(none)")
                .to_string()
        })
        .collect();
    names.sort();
    names
}

/// Starts `chain(3)` whose second widget is created by the extension but never answered, and drops the engine
/// once the extension holds it (its create in flight). Returns the store and the fake, the claims expired.
async fn crash_with_a_create_in_flight(
    name: &str,
    policy: RecoveryPolicy,
) -> (
    tempfile::TempDir,
    std::sync::Arc<dyn cairn_store::Store>,
    std::sync::Arc<FakeExtension>,
) {
    let env = setup_with(
        crash_settings(policy),
        Duration::from_millis(5),
        Providers::empty(),
    )
    .await;
    env.fake.hang_on("w1");
    env.engine
        .create_or_update(
            RG,
            name,
            request(chain(3), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    let TestEnv {
        dir,
        store,
        engine,
        fake,
    } = env;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while fake.resource("widget", "w1").is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "w1 was never created"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    crash(engine).await;
    (dir, store, fake)
}

/// The create of `w1` was in flight when the engine died; after the restart the extension is down, so the resumed
/// run fails. `w1` exists, and cairn still knows it: the failed deployment lists it in `outputResources` and the
/// inventory holds it, keyed by the identity the extension gave before the call. Once the extension is back, running
/// the deployment again adopts it and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_in_flight_at_a_crash_stays_tracked_when_the_resumed_run_fails() {
    let (dir, store, fake) =
        crash_with_a_create_in_flight("inflight", RecoveryPolicy::Resume).await;
    assert_eq!(fake.names(), vec!["w0", "w1"]);
    fake.set_down(true);
    let engine = restarted(&store, &fake, RecoveryPolicy::Resume);
    let report = engine.recover().await.unwrap();
    assert_eq!(report.resumed.len(), 1, "{report:?}");
    let record = wait_terminal(&engine, "inflight").await;
    assert_eq!(state(&record), "Failed", "{record:#}");
    assert_eq!(listed(&record), vec!["w0", "w1"], "{record:#}");
    assert_eq!(inventoried(&store).await, fake.names());
    no_operation_running(&engine, "inflight").await;

    fake.set_down(false);
    fake.hang.lock().unwrap().clear();
    let record = deploy(&engine, RG, "inflight", request(chain(3), json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(fake.names(), vec!["w0", "w1", "w2"]);
    assert_eq!(inventoried(&store).await, fake.names());
    drop(dir);
}

/// With the fail policy the interrupted deployment ends `Failed` at once: the create in flight is listed with its
/// identifiers and inventoried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_fail_policy_a_create_in_flight_is_listed_and_inventoried() {
    let (dir, store, fake) = crash_with_a_create_in_flight("failfast", RecoveryPolicy::Fail).await;
    let engine = restarted(&store, &fake, RecoveryPolicy::Fail);
    let report = engine.recover().await.unwrap();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let record = serde_json::to_value(engine.get(RG, "failfast").await.unwrap()).unwrap();
    assert_eq!(state(&record), "Failed");
    assert_eq!(listed(&record), vec!["w0", "w1"], "{record:#}");
    assert_eq!(inventoried(&store).await, vec!["w0", "w1"]);
    no_operation_running(&engine, "failfast").await;
    drop(dir);
}

/// An extension that cannot preview cannot name a resource before its create: the create still runs, and after a
/// restart the resumed run keeps the identity an earlier step recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_create_keeps_the_identity_recorded_before_the_crash() {
    let (dir, store, fake) =
        crash_with_a_create_in_flight("remembered", RecoveryPolicy::Resume).await;
    // After the restart the extension can create but no longer preview, and refuses w1 outright.
    fake.no_preview
        .store(true, std::sync::atomic::Ordering::SeqCst);
    fake.hang.lock().unwrap().clear();
    fake.fail_on("w1");
    let engine = restarted(&store, &fake, RecoveryPolicy::Resume);
    engine.recover().await.unwrap();
    let record = wait_terminal(&engine, "remembered").await;
    assert_eq!(state(&record), "Failed", "{record:#}");
    // The refused retry still names w1 (and w1 exists: the first attempt made it).
    let ops = engine.operations(RG, "remembered").await.unwrap();
    let w1 = ops
        .iter()
        .find(|o| {
            o.properties
                .target_resource
                .as_ref()
                .and_then(|t| t.identifiers.as_ref())
                .is_some_and(|i| i["name"] == "w1")
        })
        .expect("w1's operation names it");
    assert_eq!(
        w1.properties
            .provisioning_state
            .as_ref()
            .map(|s| s.as_str()),
        Some("Failed")
    );
    assert_eq!(inventoried(&store).await, vec!["w0", "w1"]);
    assert!(fake.resource("widget", "w1").is_some());
    drop(dir);
}

/// Settings whose claims would outlive the test by far: only a hand over lets another engine take a run over.
fn long_claims() -> EngineSettings {
    EngineSettings {
        parallelism: 2,
        claim_ttl: Duration::from_secs(600),
        heartbeat_interval: Duration::from_millis(100),
        ..EngineSettings::default()
    }
}

/// Starts a 4-step chain and waits until its first step succeeded.
async fn started_chain(latency: Duration) -> TestEnv {
    let env = setup_with(long_claims(), latency, Providers::empty()).await;
    env.engine
        .create_or_update(
            RG,
            "moving",
            request(chain(4), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while env.fake.count() < 1 {
        assert!(tokio::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    env
}

async fn record_of(
    store: &std::sync::Arc<dyn cairn_store::Store>,
) -> cairn_store::DeploymentRecord {
    store
        .get_deployment(&cairn_store::DeploymentKey::new(RG, "moving"))
        .await
        .unwrap()
        .unwrap()
}

/// Resumes the handed-over chain on another engine at once (the first engine's claim would have lasted ten
/// minutes) and waits for it to succeed.
async fn successor_finishes(env: &TestEnv) {
    let metrics = cairn_metrics::Metrics::new();
    let successor = Engine::new(
        env.store.clone(),
        host_with(&env.fake),
        Providers::empty(),
        EngineSettings {
            metrics: metrics.clone(),
            ..long_claims()
        },
    )
    .unwrap();
    let report = successor.recover().await.unwrap();
    assert_eq!(report.resumed.len(), 1, "{report:?}");
    let record = wait_terminal(&successor, "moving").await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(env.fake.count(), 4);
    no_operation_running(&successor, "moving").await;
    assert!(
        metrics
            .render()
            .contains("cairn_takeovers_total{kind=\"deployment\",outcome=\"resumed\"} 1")
    );
}

/// A hand over lets the call in flight finish and journals it, leaves the record `Running` with no claim, and
/// another engine resumes the run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_deployment_is_resumed_elsewhere_at_once() {
    let env = started_chain(Duration::from_millis(300)).await;
    let before = env
        .fake
        .state
        .creates
        .load(std::sync::atomic::Ordering::SeqCst);
    let report = env.engine.hand_over(Duration::from_secs(10)).await;
    assert_eq!(
        report,
        cairn_engine::HandOverReport {
            running: 1,
            stopped_by_force: 0
        }
    );
    assert_eq!(env.engine.running_deployments(), 0);
    let left = record_of(&env.store).await;
    assert_eq!(left.status, cairn_store::DeploymentStatus::Running);
    assert!(
        left.owner.is_none(),
        "the claim is released: {:?}",
        left.owner
    );
    // The call in flight when the hand over began (a create, or the preview that names its target first) finished
    // and its step was journaled; nothing new started.
    let created = env.fake.count();
    assert!((1..4).contains(&created), "{created} created");
    assert!(
        env.fake
            .state
            .creates
            .load(std::sync::atomic::Ordering::SeqCst)
            <= before + 1
    );
    let journaled = env
        .engine
        .operations(RG, "moving")
        .await
        .unwrap()
        .iter()
        .filter(|o| {
            o.properties.provisioning_state.as_ref().map(|s| s.as_str()) == Some("Succeeded")
        })
        .count();
    assert_eq!(journaled, created, "every finished call is journaled");
    successor_finishes(&env).await;
}

/// A call slower than the hand over's time is abandoned where it stands; the claim is released all the same and
/// the successor performs the call again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_still_busy_when_the_hand_over_time_is_up_is_stopped_and_released() {
    let env = started_chain(Duration::from_millis(300)).await;
    *env.fake.latency.lock().unwrap() = Duration::from_secs(5);
    // Let the next (now slow) call begin.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let started = std::time::Instant::now();
    let report = env.engine.hand_over(Duration::from_millis(300)).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.stopped_by_force, 1, "{report:?}");
    let left = record_of(&env.store).await;
    assert_eq!(left.status, cairn_store::DeploymentStatus::Running);
    assert!(
        left.owner.is_none(),
        "the claim is released: {:?}",
        left.owner
    );
    *env.fake.latency.lock().unwrap() = Duration::from_millis(10);
    successor_finishes(&env).await;
}

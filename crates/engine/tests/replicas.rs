//! Two engines on one store, as two `cairn serve` replicas on one database: a cancel asked of the replica that does
//! not run a deployment reaches the one that does (through the store), and a run whose claim another replica took
//! over writes nothing more — its journal steps and inventory changes are refused by the store.

mod common;

use std::time::Duration;

use cairn_engine::{DeployOptions, Engine, EngineSettings, Providers};
use cairn_store::{DeploymentKey, Timestamp};
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

fn replica_settings(heartbeat: Duration) -> EngineSettings {
    EngineSettings {
        parallelism: 2,
        claim_ttl: Duration::from_secs(30),
        heartbeat_interval: heartbeat,
        ..EngineSettings::default()
    }
}

async fn wait_state(engine: &Engine, name: &str, wanted: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let record = serde_json::to_value(engine.get(RG, name).await.unwrap()).unwrap();
        if state(&record) == wanted {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {wanted}: {record:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_running_operation(engine: &Engine, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !engine
        .operations(RG, name)
        .await
        .unwrap()
        .iter()
        .any(|o| o.properties.provisioning_state.as_ref().map(|s| s.as_str()) == Some("Running"))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no operation of {name} started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A cancel through replica B, which does not run the deployment, is recorded on the run; replica A, which runs
/// it, cancels at its next heartbeat and the deployment ends `Canceled` with resources left unstarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_replica_reaches_the_run() {
    let env = setup_with(
        replica_settings(Duration::from_millis(100)),
        Duration::from_millis(300),
        Providers::empty(),
    )
    .await;
    let other = Engine::new(
        env.store.clone(),
        host_with(&env.fake),
        Providers::empty(),
        replica_settings(Duration::from_millis(100)),
    )
    .unwrap();
    let _handle = env
        .engine
        .create_or_update(
            RG,
            "long",
            request(chain(6), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    wait_running_operation(&env.engine, "long").await;
    other
        .cancel(RG, "long")
        .await
        .expect("a cancel through the other replica is accepted");
    wait_state(&env.engine, "long", "Canceled").await;
    assert!(
        env.fake.count() < 6,
        "the run stopped before creating everything: {:?}",
        env.fake.names()
    );
}

/// Replica A's run is taken over by replica B while A's call is in flight (A was presumed dead: its heartbeat is
/// slower than the takeover). When A's call returns, its journal step and inventory change are refused, A stops,
/// and the journal and the record stay exactly as B found them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_claim_was_taken_over_writes_nothing_more() {
    let env = setup_with(
        replica_settings(Duration::from_secs(60)),
        Duration::from_millis(400),
        Providers::empty(),
    )
    .await;
    let _handle = env
        .engine
        .create_or_update(
            RG,
            "fenced",
            request(chain(3), json!({})),
            DeployOptions::default(),
        )
        .await
        .unwrap();
    wait_running_operation(&env.engine, "fenced").await;
    let record = env
        .store
        .get_deployment(&DeploymentKey::new(RG, "fenced"))
        .await
        .unwrap()
        .unwrap();
    // B takes the run over as its recovery would once A's claim expired (a minute from now, in the store's eyes).
    let later = Timestamp::now().saturating_add(Duration::from_secs(60));
    let taken = env
        .store
        .claim_deployment(
            &record.id,
            "replica-b",
            later.saturating_add(Duration::from_secs(60)),
            later,
        )
        .await
        .expect("the takeover");
    let journal_at_takeover = env
        .store
        .operation_journal(&record.id, 0, 1_000)
        .await
        .unwrap();
    let inventory_at_takeover = env
        .store
        .list_managed_resources(Default::default())
        .await
        .unwrap()
        .items;

    // A's call answers after 400 ms; give it time to try to record it, and to try to go on.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        env.fake.count() >= 1,
        "A's call reached the extension: {:?}",
        env.fake.names()
    );
    assert_eq!(
        env.store
            .operation_journal(&record.id, 0, 1_000)
            .await
            .unwrap(),
        journal_at_takeover,
        "no journal step of A landed after the takeover"
    );
    assert_eq!(
        env.store
            .list_managed_resources(Default::default())
            .await
            .unwrap()
            .items,
        inventory_at_takeover,
        "no inventory change of A landed after the takeover"
    );
    let now = env
        .store
        .get_deployment_by_id(&record.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (now.version, now.status, now.owner.map(|o| o.owner)),
        (taken.version, taken.status, Some("replica-b".to_owned())),
        "A neither finished nor released the run"
    );
    assert!(
        env.fake.count() < 3,
        "A stopped scheduling: {:?}",
        env.fake.names()
    );
}

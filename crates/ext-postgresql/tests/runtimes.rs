//! Pools belong to the tokio runtime that created them: a later runtime (as each command of the
//! in-process CLI starts one) gets working connections, and pools of runtimes that have shut down are
//! dropped, not handed out.

mod common;

use cairn_ext_postgresql::connection::Pools;
use cairn_testpg::TestPostgres;
use serde_json::json;

#[test]
fn each_runtime_gets_live_pools_and_dead_ones_are_dropped() {
    let cluster = TestPostgres::start();
    let config = common::config_for(&cluster);
    for round in 0..3 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (status, body) = runtime.block_on(async {
            let h = common::Harness::with_cluster_config(config.clone());
            h.apply(
                "PostgreSql/roles",
                json!({ "name": format!("round{round}") }),
            )
            .await
        });
        assert_eq!(status, 200, "round {round}: {body}");
        drop(runtime);
    }
    // Only the last runtime's maintenance pool is left; the registry forgets the others on the next use.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body) = runtime.block_on(async {
        let h = common::Harness::with_cluster_config(config.clone());
        h.get("PostgreSql/roles", json!({ "name": "round2" })).await
    });
    assert_eq!(status, 200, "{body}");
    assert_eq!(Pools::global().len(), 1);
}

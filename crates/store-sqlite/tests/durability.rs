//! Durability and multi-process behaviour on disk: data survives a drop without close, and two stores opened on
//! one data directory (as two processes would) still see each other's writes and conflict correctly.

use cairn_store::conformance::{at, new_deployment, step};
use cairn_store::crypto::MasterKey;
use cairn_store::{
    DeploymentStatus, DeploymentStore, DeploymentUpdate, InventoryStore, ManagedResource,
    OperationJournal, Precondition, ResourceKey, Store, StoreError,
};
use cairn_store_sqlite::{Durability, SqliteOptions, SqliteStore};

const SCOPE: &str = "/subscriptions/s/resourceGroups/rg";

#[tokio::test]
async fn writes_survive_a_drop_without_close() -> anyhow::Result<()> {
    for durability in [Durability::Full, Durability::Normal] {
        let dir = tempfile::tempdir()?;
        let key = MasterKey::generate()?;
        let options = SqliteOptions {
            durability,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open_with(dir.path(), &key, options.clone()).await?;
        let run = store
            .put_deployment(new_deployment(SCOPE, "d", None), Precondition::MustNotExist)
            .await?;
        store
            .append_operation(step(&run.id, "op", "Running", 1), None)
            .await?;
        store
            .update_deployment(
                &run.id,
                run.version,
                DeploymentUpdate {
                    status: Some(DeploymentStatus::Running),
                    ..DeploymentUpdate::at(at(1))
                },
            )
            .await?;
        drop(store);

        let store = SqliteStore::open_with(dir.path(), &key, options).await?;
        let reread = store
            .get_deployment_by_id(&run.id)
            .await?
            .expect("deployment survives");
        assert_eq!(
            (reread.status, reread.version),
            (DeploymentStatus::Running, 2),
            "{durability:?}"
        );
        assert_eq!(
            store.latest_operations(&run.id).await?.len(),
            1,
            "{durability:?}"
        );
        store.close().await?;
        assert!(
            matches!(
                store.get_deployment_by_id(&run.id).await,
                Err(StoreError::Backend(_))
            ),
            "closed store"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_directory_share_data_and_conflict() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let key = MasterKey::generate()?;
    let first = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;
    let second = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default()).await?;

    let run = first
        .put_deployment(
            new_deployment(SCOPE, "shared", None),
            Precondition::MustNotExist,
        )
        .await?;
    let seen = second
        .get_deployment_by_id(&run.id)
        .await?
        .expect("visible to the other store");
    assert_eq!(seen.version, 1);

    let update = |status| DeploymentUpdate {
        status: Some(status),
        ..DeploymentUpdate::at(at(2))
    };
    let (a, b) = tokio::join!(
        first.update_deployment(&run.id, 1, update(DeploymentStatus::Running)),
        second.update_deployment(&run.id, 1, update(DeploymentStatus::Canceled)),
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "{a:?} / {b:?}"
    );

    let (a, b) = tokio::join!(
        first.put_deployment(
            new_deployment(SCOPE, "race", None),
            Precondition::MustNotExist
        ),
        second.put_deployment(
            new_deployment(SCOPE, "RACE", None),
            Precondition::MustNotExist
        ),
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "{a:?} / {b:?}"
    );
    let loser = if a.is_ok() { b } else { a };
    assert!(
        matches!(loser, Err(StoreError::Conflict { .. })),
        "{loser:?}"
    );

    // Journal appends from both stores interleave without losing or duplicating sequence numbers.
    let mut appends = Vec::new();
    for index in 0..20 {
        let store: &dyn Store = if index % 2 == 0 { &first } else { &second };
        appends.push(store.append_operation(
            step(&run.id, &format!("op{index}"), "Accepted", index),
            None,
        ));
    }
    let mut sequences = Vec::new();
    for append in appends {
        sequences.push(append.await?.sequence);
    }
    sequences.sort_unstable();
    assert_eq!(sequences, (1..=20).collect::<Vec<u64>>());

    let resource = ManagedResource {
        key: ResourceKey::arm("/subscriptions/s/resourceGroups/rg/providers/A.B/c/d"),
        resource_id: Some("/subscriptions/s/resourceGroups/rg/providers/A.B/c/d".into()),
        resource_type: "A.B/c".into(),
        api_version: None,
        properties: serde_json::json!({}),
        applied: None,
        deployment: None,
        extension: None,
        updated_at: at(1),
    };
    first
        .put_managed_resource(resource.clone(), Precondition::MustNotExist)
        .await?;
    assert!(matches!(
        second
            .put_managed_resource(resource, Precondition::MustNotExist)
            .await,
        Err(StoreError::Conflict { .. })
    ));
    first.close().await?;
    second.close().await?;
    Ok(())
}

//! The PostgreSQL store beyond the conformance suite, on one throwaway cluster: several store handles on one
//! database (as several replicas are) with exclusive, fenced claims and leases; no plaintext secret in any table;
//! migrations (upgrade, concurrent openers, newer or edited schema refused); master keys; a copy from a SQLite data
//! directory that keeps every row.

mod common;

use std::collections::BTreeSet;
use std::process::ExitCode;

use cairn_store::conformance::{
    at, new_deployment, read_canary_everywhere, write_canary_everywhere,
};
use cairn_store::crypto::MasterKey;
use cairn_store::transfer::{ExportRows, NOT_COPIED, Row, TABLES, Table};
use cairn_store::{
    DeploymentOwner, DeploymentStatus, DeploymentStore, DeploymentUpdate, Entity, ExposeSecret,
    InventoryStore, JsonText, KeyVaultStore, LeaseStore, NewSecretVersion, NewStack,
    OperationJournal, Precondition, ResourceGroupStore, ResourceKey, SecretOwner, SecretStore,
    SecretString, StackStore, Store, StoreError, Tags, Vault,
};
use cairn_store_postgres::{LATEST_SCHEMA_VERSION, Migrated, PostgresStore};
use cairn_store_sqlite::{SqliteOptions, SqliteStore};
use common::{Case, CaseFuture, Cluster};
use serde_json::json;
use sqlx::PgPool;

const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";
const CANARY: &str = "canary-0b7e41d2-never-in-postgres";

fn main() -> ExitCode {
    fn case(name: &str, body: for<'a> fn(&'a Cluster) -> CaseFuture<'a>) -> Case {
        Case::new(name, body)
    }
    common::run(vec![
        case("two_handles_claims_are_exclusive_and_fenced", |c| {
            Box::pin(two_handles_claims_are_exclusive_and_fenced(c))
        }),
        case("two_handles_race_for_one_key_and_exactly_one_wins", |c| {
            Box::pin(two_handles_race_for_one_key_and_exactly_one_wins(c))
        }),
        case("no_plaintext_secret_in_any_table", |c| {
            Box::pin(no_plaintext_secret_in_any_table(c))
        }),
        case(
            "migrate_reports_versions_and_upgrades_an_older_schema",
            |c| Box::pin(migrate_reports_versions_and_upgrades_an_older_schema(c)),
        ),
        case(
            "replicas_opening_a_new_database_together_migrate_once",
            |c| Box::pin(replicas_opening_a_new_database_together_migrate_once(c)),
        ),
        case("a_newer_or_edited_schema_is_refused", |c| {
            Box::pin(a_newer_or_edited_schema_is_refused(c))
        }),
        case("a_wrong_master_key_is_refused_and_rotation_rewraps", |c| {
            Box::pin(a_wrong_master_key_is_refused_and_rotation_rewraps(c))
        }),
        case("the_schema_is_what_a_copy_carries", |c| {
            Box::pin(the_schema_is_what_a_copy_carries(c))
        }),
        case("a_copy_from_sqlite_keeps_every_row", |c| {
            Box::pin(a_copy_from_sqlite_keeps_every_row(c))
        }),
        case("a_copy_into_a_store_that_is_not_empty_needs_replace", |c| {
            Box::pin(a_copy_into_a_store_that_is_not_empty_needs_replace(c))
        }),
        case("a_bad_url_is_refused_without_repeating_it", |c| {
            Box::pin(a_bad_url_is_refused_without_repeating_it(c))
        }),
    ])
}

fn assert_conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "{what}: expected Conflict, got {result:?}"
    );
}

/// Two handles (two pools: as two replicas) on one database.
async fn two_handles(cluster: &Cluster) -> (PostgresStore, PostgresStore) {
    let url = cluster.fresh_database().await;
    let key = MasterKey::generate().expect("a key");
    let a = PostgresStore::open(&url, &key).await.expect("open a");
    let b = PostgresStore::open(&url, &key).await.expect("open b");
    (a, b)
}

/// Replica A claims a deployment; B cannot take it while the claim lives; once it expires B takes it over, and A —
/// which does not know it lost the claim — can no longer write through it: its update at the version it knew, its
/// renewal and its release all fail, while B's writes go through. Leases behave alike, with a fencing generation.
async fn two_handles_claims_are_exclusive_and_fenced(cluster: &Cluster) {
    let (a, b) = two_handles(cluster).await;
    let mut new = new_deployment(SCOPE, "fenced", None);
    new.owner = Some(DeploymentOwner {
        owner: "replica-a".into(),
        expires_at: at(1_000),
    });
    let created = a
        .put_deployment(new, Precondition::MustNotExist)
        .await
        .expect("A creates the run claimed");
    let running = DeploymentUpdate {
        status: Some(DeploymentStatus::Running),
        ..DeploymentUpdate::at(at(10))
    };
    let seen_by_a = a
        .update_deployment(&created.id, created.version, running)
        .await
        .expect("A updates");

    assert_conflict(
        b.claim_deployment(&created.id, "replica-b", at(5_000), at(500))
            .await,
        "B while A's claim lives",
    );
    assert!(
        b.list_orphaned_deployments(at(500), 10)
            .await
            .expect("orphans")
            .is_empty(),
        "a live claim is no orphan"
    );
    let orphans = b
        .list_orphaned_deployments(at(1_000), 10)
        .await
        .expect("orphans");
    assert_eq!(orphans.len(), 1, "expired: B sees the run orphaned");

    let taken = b
        .claim_deployment(&created.id, "replica-b", at(5_000), at(1_000))
        .await
        .expect("B takes over the expired claim");
    assert!(taken.version > seen_by_a.version);

    let finish = |millis| DeploymentUpdate {
        status: Some(DeploymentStatus::Succeeded),
        finished_at: Some(at(millis)),
        ..DeploymentUpdate::at(at(millis))
    };
    assert_conflict(
        a.update_deployment(&created.id, seen_by_a.version, finish(1_100))
            .await,
        "A's update through its old claim",
    );
    assert_conflict(
        a.claim_deployment(&created.id, "replica-a", at(2_000), at(1_100))
            .await,
        "A's renewal",
    );
    assert_conflict(
        a.release_deployment(&created.id, "replica-a").await,
        "A's release",
    );
    let done = b
        .update_deployment(&created.id, taken.version, finish(1_200))
        .await
        .expect("B finishes the run");
    let seen_by_a_now = a
        .get_deployment_by_id(&created.id)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        (
            seen_by_a_now.status,
            seen_by_a_now.version,
            seen_by_a_now.owner.map(|o| o.owner)
        ),
        (
            DeploymentStatus::Succeeded,
            done.version,
            Some("replica-b".to_owned())
        ),
        "both handles see one record"
    );

    let lease = "stack:/subscriptions/s/resourcegroups/rg/fenced";
    let held = a
        .acquire_lease(lease, "replica-a", at(0), at(100))
        .await
        .expect("A leases");
    assert_conflict(
        b.acquire_lease(lease, "replica-b", at(50), at(150)).await,
        "B while A's lease lives",
    );
    let taken = b
        .acquire_lease(lease, "replica-b", at(100), at(200))
        .await
        .expect("B takes the expired lease");
    assert!(
        taken.generation > held.generation,
        "a new fencing generation"
    );
    assert_conflict(
        a.renew_lease(lease, "replica-a", at(110), at(210)).await,
        "A's heartbeat after losing the lease",
    );
    assert_conflict(
        a.release_lease(lease, "replica-a").await,
        "A's release after losing the lease",
    );
    a.close().await.expect("close");
    b.close().await.expect("close");
}

/// Many rounds of two handles racing for one key at the same moment: exactly one creates a deployment name, one
/// takes over an expired claim, one acquires a lease, one updates a stack at a version — the others get the
/// same `Conflict` SQLite gives.
async fn two_handles_race_for_one_key_and_exactly_one_wins(cluster: &Cluster) {
    let (a, b) = two_handles(cluster).await;
    for round in 0..15 {
        let name = format!("race-{round}");
        let (x, y) = tokio::join!(
            a.put_deployment(
                new_deployment(SCOPE, &name, None),
                Precondition::MustNotExist
            ),
            b.put_deployment(
                new_deployment(&SCOPE.to_uppercase(), &name.to_uppercase(), None),
                Precondition::MustNotExist
            ),
        );
        let winner = match (x, y) {
            (Ok(won), lost) | (lost, Ok(won)) => {
                assert_conflict(lost, "the losing create");
                won
            }
            (x, y) => panic!("no create won: {x:?} / {y:?}"),
        };

        let mut claimed = new_deployment(SCOPE, &format!("claimed-{round}"), None);
        claimed.owner = Some(DeploymentOwner {
            owner: "dead".into(),
            expires_at: at(10),
        });
        let claimed = a
            .put_deployment(claimed, Precondition::MustNotExist)
            .await
            .expect("create");
        let (x, y) = tokio::join!(
            a.claim_deployment(&claimed.id, "replica-a", at(1_000), at(20)),
            b.claim_deployment(&claimed.id, "replica-b", at(1_000), at(20)),
        );
        assert_eq!(
            [x.is_ok(), y.is_ok()].iter().filter(|ok| **ok).count(),
            1,
            "one takeover: {x:?} / {y:?}"
        );

        let lease = format!("lease-{round}");
        let (x, y) = tokio::join!(
            a.acquire_lease(&lease, "replica-a", at(0), at(100)),
            b.acquire_lease(&lease, "replica-b", at(0), at(100)),
        );
        assert_eq!(
            [x.is_ok(), y.is_ok()].iter().filter(|ok| **ok).count(),
            1,
            "one lease holder: {x:?} / {y:?}"
        );

        let stack = |marker: u32| NewStack {
            scope: SCOPE.into(),
            name: format!("stack-{round}"),
            stack: JsonText::from(&json!({"marker": marker})),
            managed_set: JsonText::from(&json!({"resources": []})),
        };
        let first = a
            .put_stack(stack(0), Precondition::MustNotExist, at(1))
            .await
            .expect("create stack");
        let (x, y) = tokio::join!(
            a.put_stack(stack(1), Precondition::Version(first.version), at(2)),
            b.put_stack(stack(2), Precondition::Version(first.version), at(2)),
        );
        let won = match (x, y) {
            (Ok(won), lost) | (lost, Ok(won)) => {
                assert_conflict(lost, "the losing stack update");
                won
            }
            (x, y) => panic!("no stack update won: {x:?} / {y:?}"),
        };
        let stored = b
            .get_stack(SCOPE, &format!("stack-{round}"))
            .await
            .expect("get")
            .expect("present");
        assert_eq!((stored.version, stored.stack), (won.version, won.stack));

        let (x, y) = tokio::join!(
            a.update_deployment(&winner.id, winner.version, DeploymentUpdate::at(at(3))),
            b.update_deployment(&winner.id, winner.version, DeploymentUpdate::at(at(3))),
        );
        assert_eq!(
            [x.is_ok(), y.is_ok()].iter().filter(|ok| **ok).count(),
            1,
            "one update at a version: {x:?} / {y:?}"
        );
    }
    a.close().await.expect("close");
    b.close().await.expect("close");
}

/// Every row of every table of `pool`'s database as text (PostgreSQL's row output: bytea as hex), by table.
async fn dump(pool: &PgPool) -> Vec<(String, String)> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .expect("tables");
    let mut rows = Vec::new();
    for table in tables {
        let texts: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT t::text FROM {table} t"
        )))
        .fetch_all(pool)
        .await
        .expect("rows");
        rows.extend(texts.into_iter().map(|text| (table.clone(), text)));
    }
    rows
}

/// A canary written through every path a secret takes (secure parameter, secret config value, Key Vault secret,
/// stack what-if request, host operation state) appears in no row of any table — plain, base64 or hex — while the
/// plaintext beside it does.
async fn no_plaintext_secret_in_any_table(cluster: &Cluster) {
    let url = cluster.fresh_database().await;
    let store = PostgresStore::open(&url, &MasterKey::generate().expect("key"))
        .await
        .expect("open");
    let refs = write_canary_everywhere(&store, CANARY).await;
    read_canary_everywhere(&store, &refs, CANARY).await;
    let pool = PgPool::connect(&url).await.expect("connect");
    let rows = dump(&pool).await;
    let tables: BTreeSet<&str> = rows.iter().map(|(table, _)| table.as_str()).collect();
    for table in [
        "secrets",
        "key_vault_secret_versions",
        "stack_what_ifs",
        "host_operations",
        "deployment_requests",
    ] {
        assert!(tables.contains(table), "{table} holds the canary's rows");
    }
    assert!(
        rows.iter().any(|(_, text)| text.contains("rg-conformance")),
        "the scan sees plaintext"
    );
    let encodings = [
        CANARY.to_owned(),
        data_encoding::BASE64.encode(CANARY.as_bytes()),
        data_encoding::HEXLOWER.encode(CANARY.as_bytes()),
    ];
    for (table, text) in &rows {
        for encoding in &encodings {
            assert!(
                !text.contains(encoding.as_str()),
                "the canary is readable in {table}"
            );
        }
    }
    pool.close().await;
    store.close().await.expect("close");
}

/// Applies migrations `1..=through` the way a build of that time did.
async fn migrate_by_hand(pool: &PgPool, through: u32) {
    let files = [
        include_str!("../migrations/0001_core.sql"),
        include_str!("../migrations/0002_inventory_keyvault.sql"),
        include_str!("../migrations/0003_leases.sql"),
        include_str!("../migrations/0004_stacks.sql"),
        include_str!("../migrations/0005_stack_what_ifs.sql"),
        include_str!("../migrations/0006_inventory_keys_by_type.sql"),
        include_str!("../migrations/0007_host_operations.sql"),
    ];
    let names = [
        "core",
        "inventory_keyvault",
        "leases",
        "stacks",
        "stack_what_ifs",
        "inventory_keys_by_type",
        "host_operations",
    ];
    sqlx::query(
        "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, \
         checksum TEXT NOT NULL, applied_at BIGINT NOT NULL)",
    )
    .execute(pool)
    .await
    .expect("table");
    for (index, (sql, name)) in files.iter().zip(names).enumerate().take(through as usize) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
            .execute(pool)
            .await
            .expect("migration");
        sqlx::query("INSERT INTO schema_migrations VALUES ($1, $2, $3, 0)")
            .bind(index as i64 + 1)
            .bind(name)
            .bind(cairn_store::schema::checksum(sql))
            .execute(pool)
            .await
            .expect("record");
    }
}

/// `migrate` says where it started and ended; a database an older build left at schema 7 is brought to the latest
/// with its rows intact and the new columns usable.
async fn migrate_reports_versions_and_upgrades_an_older_schema(cluster: &Cluster) {
    let url = cluster.fresh_database().await;
    assert_eq!(
        PostgresStore::migrate(&url).await.expect("migrate"),
        Migrated {
            from: 0,
            to: LATEST_SCHEMA_VERSION
        }
    );
    assert_eq!(
        PostgresStore::migrate(&url).await.expect("again"),
        Migrated {
            from: LATEST_SCHEMA_VERSION,
            to: LATEST_SCHEMA_VERSION
        }
    );

    let url = cluster.fresh_database().await;
    let pool = PgPool::connect(&url).await.expect("connect");
    migrate_by_hand(&pool, 7).await;
    sqlx::query(
        "INSERT INTO deployments (id, scope_key, name_key, scope, name, tags, status, correlation_id, \
         stack_initiated, created_at, updated_at, version, format_version) \
         VALUES ('old-run', '/subscriptions/s', 'old', '/subscriptions/s', 'old', '{}', 'Running', 'c', false, \
         1, 1, 3, 1)",
    )
    .execute(&pool)
    .await
    .expect("a v7 deployment");
    sqlx::query(
        "INSERT INTO deployment_requests VALUES ('old-run', '{\"mode\":\"Incremental\"}', 1)",
    )
    .execute(&pool)
    .await
    .expect("its request");
    sqlx::query(
        "INSERT INTO managed_resources (key, resource_type, resource_type_key, properties, created_at, \
         updated_at, version, format_version) VALUES ('arm:/old', 'X.Y/z', 'x.y/z', '{}', 1, 1, 1, 1)",
    )
    .execute(&pool)
    .await
    .expect("a v7 inventory row");
    pool.close().await;

    assert_eq!(
        PostgresStore::migrate(&url).await.expect("upgrade"),
        Migrated {
            from: 7,
            to: LATEST_SCHEMA_VERSION
        }
    );
    let store = PostgresStore::open(&url, &MasterKey::generate().expect("key"))
        .await
        .expect("open");
    assert_eq!(
        store.schema_version().await.expect("version"),
        LATEST_SCHEMA_VERSION
    );
    let old = store
        .get_deployment(&cairn_store::DeploymentKey::new("/subscriptions/s", "old"))
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        (old.status, old.version, old.request),
        (DeploymentStatus::Running, 3, json!({"mode": "Incremental"}))
    );
    assert_eq!(
        store.record_takeover(&old.id, 0).await.expect("v8 column"),
        1,
        "an upgraded run counts takeovers from zero"
    );
    let resource = store
        .get_managed_resource(&ResourceKey::from_stored("arm:/old"))
        .await
        .expect("v9 column")
        .expect("kept");
    assert!(!resource.detached, "an upgraded inventory row is managed");
    store.close().await.expect("close");
}

/// Replicas starting together on a new database: both open, the schema is applied once, and they share one data
/// key (a secret one writes the other reads).
async fn replicas_opening_a_new_database_together_migrate_once(cluster: &Cluster) {
    let url = cluster.fresh_database().await;
    let key = MasterKey::generate().expect("key");
    let (a, b, c) = tokio::join!(
        PostgresStore::open(&url, &key),
        PostgresStore::open(&url, &key),
        PostgresStore::open(&url, &key),
    );
    let (a, b, c) = (a.expect("a"), b.expect("b"), c.expect("c"));
    let owner = SecretOwner::Other {
        kind: "test".into(),
        id: "shared".into(),
    };
    let reference = a
        .put_secret(&owner, "s", &SecretString::from("shared".to_owned()), at(0))
        .await
        .expect("put");
    for store in [&b, &c] {
        assert_eq!(
            store
                .get_secret(&reference)
                .await
                .expect("one data key")
                .expose_secret(),
            "shared"
        );
    }
    let pool = PgPool::connect(&url).await.expect("connect");
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM schema_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .expect("applied");
    let mut migrations: Vec<i64> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
            .expect("the migrations")
            .filter_map(|entry| {
                let name = entry.ok()?.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".sql")?.split('_').next()?.parse().ok()
            })
            .collect();
    migrations.sort_unstable();
    assert_eq!(applied, migrations, "each migration applied once");
    assert_eq!(applied.last(), Some(&i64::from(LATEST_SCHEMA_VERSION)));
    let keys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM store_keys")
        .fetch_one(&pool)
        .await
        .expect("keys");
    assert_eq!(keys, 1);
    pool.close().await;
    for store in [a, b, c] {
        store.close().await.expect("close");
    }
}

/// A database from a newer cairn, or whose applied migration differs from this build's, is refused at open and by
/// `migrate`, and nothing is changed.
async fn a_newer_or_edited_schema_is_refused(cluster: &Cluster) {
    let key = MasterKey::generate().expect("key");
    let url = cluster.fresh_database().await;
    PostgresStore::migrate(&url).await.expect("migrate");
    let pool = PgPool::connect(&url).await.expect("connect");
    sqlx::query("INSERT INTO schema_migrations VALUES (99, 'future', 'x', 0)")
        .execute(&pool)
        .await
        .expect("future");
    for error in [
        PostgresStore::open(&url, &key).await.expect_err("newer"),
        PostgresStore::migrate(&url).await.expect_err("newer"),
    ] {
        assert!(
            matches!(
                error,
                StoreError::Corrupt {
                    entity: Entity::Schema,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("newer than this build"),
            "{error}"
        );
    }
    sqlx::query("DELETE FROM schema_migrations WHERE version = 99")
        .execute(&pool)
        .await
        .expect("undo");
    sqlx::query("UPDATE schema_migrations SET checksum = '0000000000000000' WHERE version = 2")
        .execute(&pool)
        .await
        .expect("edit");
    let error = PostgresStore::open(&url, &key).await.expect_err("edited");
    assert!(error.to_string().contains("migration 2"), "{error}");
    pool.close().await;
}

/// The master key that created the store opens it; another is refused at open. Rotation rewraps the data key:
/// the new key opens everything, the old one no longer does.
async fn a_wrong_master_key_is_refused_and_rotation_rewraps(cluster: &Cluster) {
    let url = cluster.fresh_database().await;
    let first = MasterKey::generate().expect("key");
    let store = PostgresStore::open(&url, &first).await.expect("open");
    let owner = SecretOwner::Other {
        kind: "test".into(),
        id: "rotation".into(),
    };
    let reference = store
        .put_secret(&owner, "s", &SecretString::from("kept".to_owned()), at(0))
        .await
        .expect("put");
    let other = MasterKey::generate().expect("key");
    let error = PostgresStore::open(&url, &other)
        .await
        .expect_err("another key");
    assert_eq!(error.arm_code(), "StoreEncryptionFailure", "{error}");

    store
        .rotate_master_key(&first, &other)
        .await
        .expect("rotate");
    store.close().await.expect("close");
    let rotated = PostgresStore::open(&url, &other).await.expect("new key");
    assert_eq!(
        rotated
            .get_secret(&reference)
            .await
            .expect("get")
            .expose_secret(),
        "kept"
    );
    assert!(PostgresStore::open(&url, &first).await.is_err(), "old key");
    rotated.close().await.expect("close");
}

/// Every table and column of the schema is either carried by a copy (`transfer::TABLES`, in its column order
/// checked by name) or deliberately left out (`NOT_COPIED`): a migration that adds one must say which.
async fn the_schema_is_what_a_copy_carries(cluster: &Cluster) {
    let url = cluster.fresh_database().await;
    PostgresStore::migrate(&url).await.expect("migrate");
    let pool = PgPool::connect(&url).await.expect("connect");
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    )
    .fetch_all(&pool)
    .await
    .expect("columns");
    pool.close().await;
    let tables: BTreeSet<&str> = columns.iter().map(|(t, _)| t.as_str()).collect();
    let expected: BTreeSet<&str> = TABLES
        .iter()
        .map(|t| t.name)
        .chain(NOT_COPIED.iter().copied())
        .collect();
    assert_eq!(tables, expected);
    for table in TABLES {
        let mut in_schema: Vec<&str> = columns
            .iter()
            .filter(|(t, _)| t == table.name)
            .map(|(_, c)| c.as_str())
            .collect();
        let mut carried: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
        in_schema.sort_unstable();
        carried.sort_unstable();
        assert_eq!(in_schema, carried, "columns of {}", table.name);
    }
}

/// Every row of `table` in `store`, in key order, paged.
async fn all_rows(store: &dyn ExportRows, table: &'static Table) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    loop {
        let page = store
            .export_rows(table, rows.last(), 2)
            .await
            .expect("export");
        let done = page.len() < 2;
        rows.extend(page);
        if done {
            return rows;
        }
    }
}

/// A SQLite store holding a bit of everything: the canary through every secret path, a nested deployment, a
/// finished one with its journal, a resource group, a stack, a lease.
async fn filled_sqlite(
    dir: &std::path::Path,
) -> (SqliteStore, cairn_store::conformance::CanaryRefs) {
    let store = SqliteStore::open_with(
        dir,
        &MasterKey::generate().expect("key"),
        SqliteOptions::default(),
    )
    .await
    .expect("open sqlite");
    let refs = write_canary_everywhere(&store, CANARY).await;
    let parent = store
        .put_deployment(
            new_deployment(SCOPE, "parent", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("parent");
    // A child whose ID sorts before its parent's: the copy must not depend on the order.
    let mut child = new_deployment(SCOPE, "child", None);
    child.id = cairn_store::DeploymentId::from_string(format!("!{}", parent.id));
    child.parent = Some(parent.id.clone());
    store
        .put_deployment(child, Precondition::MustNotExist)
        .await
        .expect("child");
    for (i, state) in ["Running", "Succeeded"].iter().enumerate() {
        store
            .append_operation(
                cairn_store::conformance::step(&parent.id, "op", state, i as i64),
                None,
            )
            .await
            .expect("journal");
    }
    store
        .put_resource_group(
            cairn_store::ResourceGroup {
                subscription_id: "00000000-0000-0000-0000-000000000001".into(),
                name: "rg".into(),
                location: "westus".into(),
                tags: Tags::new(),
                managed_by: None,
                provisioning_state: "Succeeded".into(),
            },
            Precondition::Any,
            at(1),
        )
        .await
        .expect("group");
    store
        .put_stack(
            NewStack {
                scope: SCOPE.into(),
                name: "stack".into(),
                stack: JsonText::from(&json!({"properties": {"provisioningState": "succeeded"}})),
                managed_set: JsonText::from(&json!({"resources": [{"id": "x"}]})),
            },
            Precondition::MustNotExist,
            at(1),
        )
        .await
        .expect("stack");
    store
        .acquire_lease("stack-lease", "old-replica", at(0), at(100))
        .await
        .expect("lease");
    (store, refs)
}

/// Copying a SQLite data directory into an empty PostgreSQL store carries every row of every table unchanged
/// (secrets resealed with the target's own data key), leaves leases behind, and the copy reads back through the
/// store; new Key Vault versions continue after the copied ones.
async fn a_copy_from_sqlite_keeps_every_row(cluster: &Cluster) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (source, refs) = filled_sqlite(dir.path()).await;
    let target = cluster.fresh_store().await;
    let report = target.import_from(&source, false).await.expect("copy");
    for table in TABLES {
        let from = all_rows(&source, table).await;
        let to = all_rows(&target, table).await;
        assert_eq!(
            from.len() as u64,
            report.count(table.name),
            "{}",
            table.name
        );
        assert_eq!(from, to, "{}", table.name);
    }
    assert!(report.count("deployments") >= 3 && report.count("deployment_operations") >= 3);
    assert!(
        target
            .get_lease("stack-lease")
            .await
            .expect("lease")
            .is_none(),
        "leases stay behind"
    );
    read_canary_everywhere(&target, &refs, CANARY).await;

    let added = target
        .set_vault_secret(NewSecretVersion {
            vault_id: refs.vault_id.clone(),
            name: refs.vault_secret_name.clone(),
            value: SecretString::from("newer".to_owned()),
            content_type: None,
            enabled: true,
            not_before: None,
            expires: None,
            tags: Tags::new(),
            created_at: at(99),
        })
        .await
        .expect("a new version after the copy");
    let latest = target
        .get_vault_secret(&refs.vault_id, &refs.vault_secret_name, None)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        (latest.info.version, latest.value.expose_secret()),
        (added.version, "newer")
    );
    target.close().await.expect("close");
    source.close().await.expect("close");
}

/// A target that already holds records is refused (naming what it holds) and left alone; with `replace` its
/// records are replaced by the source's.
async fn a_copy_into_a_store_that_is_not_empty_needs_replace(cluster: &Cluster) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (source, _) = filled_sqlite(dir.path()).await;
    let target = cluster.fresh_store().await;
    let own = target
        .put_vault(
            Vault {
                id: format!("{SCOPE}/providers/Microsoft.KeyVault/vaults/target-only"),
                name: "target-only".into(),
                location: "westus".into(),
                tags: Tags::new(),
                properties: json!({}),
            },
            Precondition::MustNotExist,
            at(1),
        )
        .await
        .expect("a record of its own");
    let error = target
        .import_from(&source, false)
        .await
        .expect_err("not empty");
    assert!(error.is_conflict(), "{error:?}");
    assert!(error.to_string().contains("1 key vaults"), "{error}");
    assert!(
        target
            .get_vault(&own.vault.id)
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        target
            .get_stack(SCOPE, "stack")
            .await
            .expect("get")
            .is_none(),
        "a refused copy writes nothing"
    );

    let report = target.import_from(&source, true).await.expect("replace");
    assert!(
        target
            .get_vault(&own.vault.id)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        target
            .get_stack(SCOPE, "stack")
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(report.count("deployment_stacks"), 1);
    target.close().await.expect("close");
    source.close().await.expect("close");
}

/// A URL that is not one is refused without being repeated (it may hold a password); an unreachable server fails
/// with `Backend`.
async fn a_bad_url_is_refused_without_repeating_it(_cluster: &Cluster) {
    let key = MasterKey::generate().expect("key");
    let error = PostgresStore::open("postgres://u:hunter2@[bad/db", &key)
        .await
        .expect_err("bad URL");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
    let error = PostgresStore::open_with(
        "postgres://u:hunter2@127.0.0.1:1/db",
        &key,
        cairn_store_postgres::PostgresOptions {
            acquire_timeout: std::time::Duration::from_secs(2),
            ..Default::default()
        },
    )
    .await
    .expect_err("nothing listens");
    assert_eq!(error.arm_code(), "StoreUnavailable", "{error}");
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

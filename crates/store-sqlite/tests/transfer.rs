//! The SQLite store as the source of a whole-store copy (`cairn_store::transfer`): its schema is exactly what a
//! copy carries or deliberately leaves out, and its export pages through a table in key order with every row once.

use std::collections::BTreeSet;

use cairn_store::conformance::{new_deployment, step};
use cairn_store::crypto::MasterKey;
use cairn_store::transfer::{ExportRows, NOT_COPIED, Row, TABLES, Value, table};
use cairn_store::{
    DeploymentStore, OperationJournal, Precondition, SecretOwner, SecretStore, Store,
};
use cairn_store::{ExposeSecret, SecretString, Timestamp};
use cairn_store_sqlite::{DATABASE_FILE_NAME, SqliteOptions, SqliteStore};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";

/// Every table and column of the schema is carried by a copy or deliberately left out: a migration that adds one
/// must say which (and the PostgreSQL store's schema must match).
#[tokio::test]
async fn the_schema_is_what_a_copy_carries() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open_with(
        dir.path(),
        &MasterKey::generate()?,
        SqliteOptions::default(),
    )
    .await?;
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteConnectOptions::new().filename(dir.path().join(DATABASE_FILE_NAME)))
        .await?;
    let tables: BTreeSet<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .fetch_all(&pool)
    .await?
    .into_iter()
    .collect();
    let expected: BTreeSet<String> = TABLES
        .iter()
        .map(|t| t.name)
        .chain(NOT_COPIED.iter().copied())
        .map(str::to_owned)
        .collect();
    assert_eq!(tables, expected);
    for table in TABLES {
        let mut columns: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT name FROM pragma_table_info('{}')",
            table.name
        )))
        .fetch_all(&pool)
        .await?;
        let mut carried: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
        columns.sort_unstable();
        carried.sort_unstable();
        assert_eq!(columns, carried, "columns of {}", table.name);
    }
    pool.close().await;
    store.close().await?;
    Ok(())
}

/// Pages of a composite-key table (the journal of two runs) come in key order, each row once, and sealed columns
/// come opened.
#[tokio::test]
async fn export_pages_through_a_table_in_key_order() -> anyhow::Result<()> {
    let store = SqliteStore::open_in_memory(&MasterKey::generate()?).await?;
    let mut runs = Vec::new();
    for name in ["a", "b"] {
        let run = store
            .put_deployment(
                new_deployment(SCOPE, name, None),
                Precondition::MustNotExist,
            )
            .await?;
        for i in 0..7 {
            store
                .append_operation(step(&run.id, &format!("op{i}"), "Running", i), None)
                .await?;
        }
        runs.push(run.id);
    }
    let journal = table("deployment_operations").expect("the journal table");
    let mut rows: Vec<Row> = Vec::new();
    loop {
        let page = store.export_rows(journal, rows.last(), 3).await?;
        assert!(page.len() <= 3);
        let done = page.len() < 3;
        rows.extend(page);
        if done {
            break;
        }
    }
    let keys: Vec<(String, i64)> = rows
        .iter()
        .map(|row| match journal.key_values(row).expect("key")[..] {
            [Value::Text(id), Value::Integer(seq)] => (id.clone(), *seq),
            ref other => panic!("unexpected key {other:?}"),
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted, "key order, no repeats");
    assert_eq!(keys.len(), 14);

    let owner = SecretOwner::Deployment(runs[0].clone());
    store
        .put_secret(
            &owner,
            "p",
            &SecretString::from("opened".to_owned()),
            Timestamp::from_unix_millis(1),
        )
        .await?;
    let secrets = table("secrets").expect("the secrets table");
    let exported = store.export_rows(secrets, None, 10).await?;
    let value = secrets.position("value").expect("value column");
    match &exported[0].0[value] {
        Value::Secret(secret) => assert_eq!(secret.expose_secret(), "opened"),
        other => panic!("not opened: {other:?}"),
    }
    Ok(())
}

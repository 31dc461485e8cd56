//! `PostgreSql/databases` against a real server: create, get, update, idempotent re-apply, immutable
//! properties, and delete with and without `force` while sessions are connected.

mod common;

use common::Harness;
use serde_json::json;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

const DATABASES: &str = "PostgreSql/databases";
const ROLES: &str = "PostgreSql/roles";

#[tokio::test]
async fn database_lifecycle_is_exact_and_idempotent() {
    let h = Harness::start().await;
    assert_eq!(h.apply(ROLES, json!({ "name": "app_owner" })).await.0, 200);
    let declared = json!({ "name": "app_db", "owner": "app_owner", "encoding": "UTF8", "lcCollate": "C",
                           "lcCtype": "C", "template": "template0", "connectionLimit": 20 });
    let (status, created) = h.apply(DATABASES, declared.clone()).await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["identifiers"], json!({ "name": "app_db" }));
    assert_eq!(
        created["properties"],
        json!({ "name": "app_db", "owner": "app_owner", "encoding": "UTF8", "lcCollate": "C", "lcCtype": "C",
                "template": "template0", "connectionLimit": 20, "allowConnections": true,
                "isTemplate": false, "force": false })
    );

    let before = h.catalog_versions().await;
    let (status, again) = h.apply(DATABASES, declared).await;
    assert_eq!(
        (status, &again["properties"]),
        (200, &created["properties"])
    );
    assert_eq!(
        h.catalog_versions().await,
        before,
        "re-apply rewrote the catalog"
    );

    let (status, updated) = h
        .apply(
            DATABASES,
            json!({ "name": "app_db", "owner": "postgres", "allowConnections": false }),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["properties"]["owner"], "postgres");
    assert_eq!(updated["properties"]["connectionLimit"], -1);
    assert_eq!(updated["properties"]["allowConnections"], false);
    assert_eq!(updated["properties"]["template"], "template0");

    let (status, body) = h
        .apply(
            DATABASES,
            json!({ "name": "app_db", "encoding": "LATIN1", "template": "template1" }),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let targets: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["target"].as_str())
        .collect();
    assert_eq!(targets, ["/properties/encoding", "/properties/template"]);

    let (status, got) = h.get(DATABASES, json!({ "name": "app_db" })).await;
    assert_eq!((status, &got["properties"]), (200, &updated["properties"]));
    assert_eq!(
        h.delete(DATABASES, json!({ "name": "app_db" })).await.0,
        204
    );
    assert!(!h.database_exists("app_db").await);
    assert_eq!(
        h.delete(DATABASES, json!({ "name": "app_db" })).await.0,
        204
    );
    assert_eq!(h.get(DATABASES, json!({ "name": "app_db" })).await.0, 404);
}

#[tokio::test]
async fn connected_sessions_block_delete_unless_force() {
    let h = Harness::start().await;
    assert_eq!(h.apply(DATABASES, json!({ "name": "busy" })).await.0, 200);
    let session = PgConnection::connect(&h.cluster.url_for_database("busy"))
        .await
        .unwrap();

    let (status, body) = h.delete(DATABASES, json!({ "name": "busy" })).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "ObjectInUse");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("force: true")
    );
    assert!(h.database_exists("busy").await);

    let (status, applied) = h
        .apply(DATABASES, json!({ "name": "busy", "force": true }))
        .await;
    assert_eq!(
        (status, &applied["properties"]["force"]),
        (200, &json!(true))
    );
    assert_eq!(h.delete(DATABASES, json!({ "name": "busy" })).await.0, 204);
    assert!(!h.database_exists("busy").await);
    drop(session);
}

#[tokio::test]
async fn template_databases_are_deleted_too() {
    let h = Harness::start().await;
    let (status, body) = h
        .apply(DATABASES, json!({ "name": "tmpl", "isTemplate": true }))
        .await;
    assert_eq!(
        (status, &body["properties"]["isTemplate"]),
        (200, &json!(true))
    );
    assert_eq!(h.delete(DATABASES, json!({ "name": "tmpl" })).await.0, 204);
    assert!(!h.database_exists("tmpl").await);
}

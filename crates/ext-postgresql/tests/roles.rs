//! `PostgreSql/roles` against a real server: create, get, update, idempotent re-apply, memberships,
//! passwords (SCRAM verifiers, unchanged passwords not rewritten), delete, and the dropOwned rules.

mod common;

use common::Harness;
use serde_json::json;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

const ROLES: &str = "PostgreSql/roles";

#[tokio::test]
async fn role_lifecycle_is_exact_and_idempotent() {
    let h = Harness::start().await;
    let (status, _) = h.apply(ROLES, json!({ "name": "readers" })).await;
    assert_eq!(status, 200);
    let (status, created) = h
        .apply(
            ROLES,
            json!({ "name": "app", "login": true, "createDb": true, "connectionLimit": 7,
                    "validUntil": "2099-01-02T03:04:05Z", "memberOf": ["readers"], "password": "s3cret-app" }),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["identifiers"], json!({ "name": "app" }));
    assert_eq!(
        created["properties"],
        json!({ "name": "app", "login": true, "superuser": false, "createDb": true, "createRole": false,
                "inherit": true, "replication": false, "connectionLimit": 7,
                "validUntil": "2099-01-02T03:04:05Z", "memberOf": ["readers"], "dropOwned": false })
    );
    assert!(!created.to_string().contains("s3cret-app"));
    assert!(
        created["configId"]
            .as_str()
            .is_some_and(|id| id.len() == 64)
    );
    assert_eq!(created.get("config").and_then(|c| c.get("auth")), None);

    // The role logs in with its password, which is stored as a SCRAM verifier.
    let url = format!(
        "postgres://app:s3cret-app@127.0.0.1:{}/postgres?sslmode=disable",
        h.cluster.port()
    );
    PgConnection::connect(&url)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let stored: String =
        sqlx::query_scalar("SELECT rolpassword FROM pg_authid WHERE rolname = 'app'")
            .fetch_one(&h.admin)
            .await
            .unwrap();
    assert!(stored.starts_with("SCRAM-SHA-256$"));

    // Re-applying the same declaration rewrites nothing (same xmin everywhere).
    let before = h.catalog_versions().await;
    let (status, again) = h
        .apply(
            ROLES,
            json!({ "name": "app", "login": true, "createDb": true, "connectionLimit": 7,
                    "validUntil": "2099-01-02 03:04:05+00", "memberOf": ["readers"], "password": "s3cret-app" }),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(again["properties"], created["properties"]);
    assert_eq!(h.catalog_versions().await, before);

    // Update: attributes back to defaults, membership revoked, password changed.
    let (status, updated) = h
        .apply(
            ROLES,
            json!({ "name": "app", "login": true, "memberOf": [], "password": "new-pass" }),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(updated["properties"]["createDb"], false);
    assert_eq!(updated["properties"]["connectionLimit"], -1);
    assert_eq!(updated["properties"].get("validUntil"), None);
    assert_eq!(updated["properties"]["memberOf"], json!([]));
    assert!(
        PgConnection::connect(&url).await.is_err(),
        "the old password still works"
    );
    let new_url = url.replace("s3cret-app", "new-pass");
    PgConnection::connect(&new_url)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();

    let (status, got) = h.get(ROLES, json!({ "name": "app" })).await;
    assert_eq!((status, &got["properties"]), (200, &updated["properties"]));

    assert_eq!(h.delete(ROLES, json!({ "name": "app" })).await.0, 204);
    assert!(!h.role_exists("app").await);
    assert_eq!(h.delete(ROLES, json!({ "name": "app" })).await.0, 204);
    let (status, body) = h.get(ROLES, json!({ "name": "app" })).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("ResourceNotFound"))
    );
}

#[tokio::test]
async fn a_role_owning_objects_is_refused_unless_drop_owned() {
    let h = Harness::start().await;
    assert_eq!(
        h.apply(ROLES, json!({ "name": "owner1", "login": true }))
            .await
            .0,
        200
    );
    for statement in [
        "CREATE SCHEMA owned_things AUTHORIZATION owner1",
        "CREATE DATABASE owner1_db OWNER owner1",
    ] {
        sqlx::raw_sql(statement).execute(&h.admin).await.unwrap();
    }

    let (status, body) = h.delete(ROLES, json!({ "name": "owner1" })).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "DependentObjectsStillExist");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("owner of database owner1_db"), "{message}");
    assert!(message.contains("dropOwned"), "{message}");
    assert!(h.role_exists("owner1").await);

    // dropOwned drops the schema; the database it owns is a shared object, still named in the 409.
    let (status, applied) = h
        .apply(
            ROLES,
            json!({ "name": "owner1", "login": true, "dropOwned": true }),
        )
        .await;
    assert_eq!(
        (status, &applied["properties"]["dropOwned"]),
        (200, &json!(true))
    );
    let (status, body) = h.delete(ROLES, json!({ "name": "owner1" })).await;
    assert_eq!(status, 409, "{body}");
    let schema_left: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'owned_things')",
    )
    .fetch_one(&h.admin)
    .await
    .unwrap();
    assert!(!schema_left);
    sqlx::raw_sql("DROP DATABASE owner1_db")
        .execute(&h.admin)
        .await
        .unwrap();
    assert_eq!(h.delete(ROLES, json!({ "name": "owner1" })).await.0, 204);
    assert!(!h.role_exists("owner1").await);
}

#[tokio::test]
async fn bad_properties_are_refused_with_targets() {
    let h = Harness::start().await;
    let (status, body) = h
        .apply(
            ROLES,
            json!({ "name": "x".repeat(64), "connectionLimit": -2 }),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "MultipleErrorsOccurred");
    let (status, body) = h
        .apply(ROLES, json!({ "name": "x", "colour": "red" }))
        .await;
    assert_eq!(
        (status, body["error"]["target"].as_str()),
        (400, Some("/properties/colour"))
    );
    let (status, body) = h
        .apply(ROLES, json!({ "name": "x", "memberOf": ["no_such_group"] }))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("UndefinedObject")),
        "{body}"
    );
    assert!(
        !h.role_exists("x").await,
        "a failed apply left the role behind"
    );
}

#[tokio::test]
async fn wrong_credentials_and_unreachable_servers_are_clear_errors() {
    let h = Harness::start().await;
    let mut config = h.config();
    config["auth"]["password"] = json!("wrong-password-canary");
    let (status, body) = h
        .call(
            cairn_extension_contract::transport::Operation::Get,
            json!({ "type": ROLES, "identifiers": { "name": "postgres" }, "config": config }),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("AuthenticationFailed")),
        "{body}"
    );
    assert!(!body.to_string().contains("wrong-password-canary"));

    let mut config = h.config();
    config["port"] = json!(1);
    let (status, body) = h
        .call(
            cairn_extension_contract::transport::Operation::Get,
            json!({ "type": ROLES, "identifiers": { "name": "postgres" }, "config": config }),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("ServerUnreachable")),
        "{body}"
    );
    assert!(!body.to_string().contains(h.cluster.password()));
}

#[tokio::test]
async fn preview_predicts_from_input_without_the_password() {
    let h = Harness::start().await;
    let (status, preview) = h
        .call(
            cairn_extension_contract::transport::Operation::Preview,
            json!({ "type": ROLES, "properties": { "name": "future", "login": true, "password": "pw-canary" } }),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["identifiers"], json!({ "name": "future" }));
    assert_eq!(
        preview["properties"],
        json!({ "name": "future", "login": true })
    );
    assert!(!h.role_exists("future").await);
    let (status, preview) = h
        .call(
            cairn_extension_contract::transport::Operation::Preview,
            json!({ "type": ROLES, "properties": { "name": "[parameters('n')]" },
                    "metadata": { "unevaluated": ["/properties/name"] } }),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(preview["identifiers"], json!({}));
}

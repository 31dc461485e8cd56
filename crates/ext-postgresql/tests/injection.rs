//! Names and property values with quotes, semicolons, backslashes and unicode are created exactly as
//! given or refused; none of them runs as SQL.

mod common;

use common::Harness;
use serde_json::json;

const ROLES: &str = "PostgreSql/roles";
const DATABASES: &str = "PostgreSql/databases";

const HOSTILE_NAMES: &[&str] = &[
    "x\"; DROP ROLE postgres; --",
    "o'reilly; SELECT pg_sleep(5)",
    "back\\slash\\'",
    "Ünïcødé ✓ 😀",
    "  leading and trailing  ",
    "$$dollar$$",
];

#[tokio::test]
async fn hostile_names_are_created_exactly() {
    let h = Harness::start().await;
    for name in HOSTILE_NAMES {
        let (status, body) = h
            .apply(
                ROLES,
                json!({ "name": name, "login": true, "password": "p'w\"; --\\",
                                  "validUntil": "2099-01-01T00:00:00Z" }),
            )
            .await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["identifiers"]["name"], json!(name));
        assert!(h.role_exists(name).await, "{name}");

        let (status, body) = h
            .apply(DATABASES, json!({ "name": name, "owner": name }))
            .await;
        assert_eq!(status, 200, "{name}: {body}");
        assert!(h.database_exists(name).await, "{name}");
        let (status, body) = h.get(DATABASES, json!({ "name": name })).await;
        assert_eq!((status, &body["properties"]["owner"]), (200, &json!(name)));
    }
    // Nothing else was touched.
    assert!(h.role_exists("postgres").await);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE rolname !~ '^pg_'")
        .fetch_one(&h.admin)
        .await
        .unwrap();
    assert_eq!(count as usize, HOSTILE_NAMES.len() + 1);

    for name in HOSTILE_NAMES {
        assert_eq!(
            h.delete(DATABASES, json!({ "name": name })).await.0,
            204,
            "{name}"
        );
        assert_eq!(
            h.delete(ROLES, json!({ "name": name })).await.0,
            204,
            "{name}"
        );
        assert!(
            !h.role_exists(name).await && !h.database_exists(name).await,
            "{name}"
        );
    }
}

#[tokio::test]
async fn values_that_cannot_be_kept_exactly_are_refused() {
    let h = Harness::start().await;
    for (properties, target) in [
        (json!({ "name": "a\u{0}b" }), "/properties/name"),
        (json!({ "name": "é".repeat(32) }), "/properties/name"),
        (
            json!({ "name": "ok", "password": "p\u{0}w" }),
            "/properties/password",
        ),
        (
            json!({ "name": "ok", "memberOf": [""] }),
            "/properties/memberOf/0",
        ),
    ] {
        let (status, body) = h.apply(ROLES, properties).await;
        assert_eq!(
            (status, body["error"]["target"].as_str()),
            (400, Some(target)),
            "{body}"
        );
    }
    let (status, body) = h
        .apply(
            DATABASES,
            json!({ "name": "db", "encoding": "UTF8'; DROP DATABASE postgres; --" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(h.database_exists("postgres").await);
    assert!(!h.role_exists("ok").await && !h.database_exists("db").await);
}

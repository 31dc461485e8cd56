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

const SCHEMAS: &str = "PostgreSql/schemas";
const EXTENSIONS: &str = "PostgreSql/extensions";
const GRANTS: &str = "PostgreSql/grants";
const DEFAULTS: &str = "PostgreSql/defaultPrivileges";

#[tokio::test]
async fn hostile_names_in_schemas_grants_and_default_privileges_are_kept_exactly() {
    let h = Harness::start().await;
    assert_eq!(h.apply(DATABASES, json!({ "name": "inj" })).await.0, 200);
    for name in HOSTILE_NAMES {
        assert_eq!(
            h.apply(ROLES, json!({ "name": name })).await.0,
            200,
            "{name}"
        );
        let (status, body) = h
            .apply(
                SCHEMAS,
                json!({ "database": "inj", "name": name, "owner": name }),
            )
            .await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["properties"]["owner"], json!(name));
        assert!(
            h.check_in(
                "inj",
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1 AND pg_get_userbyid(nspowner) = $1)",
                &[name]
            )
            .await,
            "{name}"
        );
        // A table with the same hostile name, created directly, then granted on by name.
        h.run_in(
            "inj",
            &format!(
                "CREATE TABLE {0}.{0} (id int)",
                format_args!("\"{}\"", name.replace('"', "\"\""))
            ),
        )
        .await;
        let (status, body) = h
            .apply(
                GRANTS,
                json!({ "database": "inj", "role": name, "objectType": "table", "schema": name,
                                   "objects": [name], "privileges": ["SELECT"] }),
            )
            .await;
        assert_eq!(
            (status, &body["properties"]["privileges"]),
            (200, &json!(["SELECT"])),
            "{name}: {body}"
        );
        assert!(
            h.check_in(
                "inj",
                "SELECT has_table_privilege($1, format('%I.%I', $1, $1), 'SELECT')",
                &[name]
            )
            .await,
            "{name}"
        );
        let (status, body) = h
            .apply(
                DEFAULTS,
                json!({ "database": "inj", "role": name, "forRole": name, "schema": name,
                                     "objectType": "sequence", "privileges": ["USAGE"] }),
            )
            .await;
        assert_eq!(
            (status, &body["properties"]["privileges"]),
            (200, &json!(["USAGE"])),
            "{name}: {body}"
        );
    }
    // Nothing ran as SQL: the superuser and the maintenance database are intact, the other tables too.
    assert!(h.role_exists("postgres").await && h.database_exists("postgres").await);
    assert_eq!(
        h.text_in("inj", "SELECT count(*)::text FROM pg_class WHERE relkind = 'r' AND relnamespace::regnamespace::text <> 'pg_catalog' AND relnamespace::regnamespace::text <> 'information_schema'", &[]).await,
        HOSTILE_NAMES.len().to_string()
    );

    // Extension names and function signatures are looked up, never spliced into a statement.
    let (status, body) = h
        .apply(
            EXTENSIONS,
            json!({ "database": "inj", "name": "hstore\"; DROP DATABASE inj; --" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    h.run_in(
        "inj",
        "CREATE FUNCTION public.f(integer) RETURNS int LANGUAGE sql AS 'SELECT 1'",
    )
    .await;
    let (status, body) = h
        .apply(GRANTS, json!({ "database": "inj", "role": "PUBLIC", "objectType": "function", "schema": "public",
                               "objects": ["f(integer); DROP DATABASE inj; --)"], "privileges": ["EXECUTE"] }))
        .await;
    assert!(status == 400 || status == 409, "{status} {body}");
    assert!(h.database_exists("inj").await);
    let (status, body) = h
        .apply(GRANTS, json!({ "database": "inj", "role": "PUBLIC", "objectType": "table", "schema": "public",
                               "objects": ["x"], "privileges": ["SELECT) ON ALL TABLES IN SCHEMA public TO PUBLIC; --"] }))
        .await;
    assert_eq!(
        (
            status,
            body["error"]["details"][0]["target"]
                .as_str()
                .or(body["error"]["target"].as_str())
        ),
        (400, Some("/properties/privileges/0")),
        "{body}"
    );
}

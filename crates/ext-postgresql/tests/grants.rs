//! `PostgreSql/grants` and `PostgreSql/defaultPrivileges` against a real server: exact privilege sets
//! checked with `has_*_privilege` and `pg_default_acl`, revoking what is no longer declared, grant
//! options, all-in-schema grants, idempotent re-apply, 409s for what does not exist yet and for roles
//! still holding privileges, and deletes that revoke everything.

mod common;

use common::{Harness, error_target};
use serde_json::{Value, json};

const ROLES: &str = "PostgreSql/roles";
const DATABASES: &str = "PostgreSql/databases";
const SCHEMAS: &str = "PostgreSql/schemas";
const GRANTS: &str = "PostgreSql/grants";
const DEFAULTS: &str = "PostgreSql/defaultPrivileges";

async fn setup(h: &Harness) {
    for role in ["app_rw", "app_ro"] {
        assert_eq!(
            h.apply(ROLES, json!({ "name": role, "login": true }))
                .await
                .0,
            200
        );
    }
    assert_eq!(h.apply(DATABASES, json!({ "name": "appdb" })).await.0, 200);
    assert_eq!(
        h.apply(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
            .await
            .0,
        200
    );
    h.run_in(
        "appdb",
        "CREATE TABLE app.t1 (id int); CREATE TABLE app.t2 (id int); CREATE SEQUENCE app.s1; \
         CREATE FUNCTION app.add(a integer, b integer) RETURNS integer LANGUAGE sql AS 'SELECT a + b'",
    )
    .await;
}

async fn has(h: &Harness, query: &str) -> bool {
    h.check_in("appdb", query, &[]).await
}

#[tokio::test]
async fn grants_hold_exactly_the_declared_privileges() {
    let h = Harness::start().await;
    setup(&h).await;

    // Database and schema privileges.
    let database_grant = json!({ "database": "appdb", "role": "app_ro", "objectType": "database",
                                 "privileges": ["connect", "TEMP"] });
    let (status, body) = h.apply(GRANTS, database_grant).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["identifiers"],
        json!({ "database": "appdb", "role": "app_ro", "objectType": "database" })
    );
    assert_eq!(
        body["properties"]["privileges"],
        json!(["CONNECT", "TEMPORARY"])
    );
    assert_eq!(body["properties"]["withGrantOption"], false);
    assert!(
        has(
            &h,
            "SELECT has_database_privilege('app_ro', 'appdb', 'CONNECT')"
        )
        .await
    );
    assert!(
        !has(
            &h,
            "SELECT has_database_privilege('app_ro', 'appdb', 'CREATE')"
        )
        .await
    );
    let (status, body) = h
        .apply(
            GRANTS,
            json!({ "database": "appdb", "role": "app_ro", "objectType": "schema",
                               "schema": "app", "privileges": ["USAGE"] }),
        )
        .await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!(["USAGE"])),
        "{body}"
    );
    assert!(has(&h, "SELECT has_schema_privilege('app_ro', 'app', 'USAGE')").await);

    // Named tables, with grant option; then fewer privileges and no grant option.
    let table_grant = json!({ "database": "appdb", "role": "app_rw", "objectType": "table", "schema": "app",
                              "objects": ["t1"], "privileges": ["SELECT", "INSERT"], "withGrantOption": true });
    let (status, created) = h.apply(GRANTS, table_grant.clone()).await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(
        created["properties"]["privileges"],
        json!(["SELECT", "INSERT"])
    );
    assert_eq!(created["properties"]["withGrantOption"], true);
    assert!(
        has(
            &h,
            "SELECT has_table_privilege('app_rw', 'app.t1', 'INSERT WITH GRANT OPTION')"
        )
        .await
    );
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_rw', 'app.t2', 'SELECT')"
        )
        .await
    );
    let acl_row = "SELECT coalesce(relacl::text, '') || xmin::text FROM pg_class WHERE oid = 'app.t1'::regclass";
    let before = h.text_in("appdb", acl_row, &[]).await;
    let (status, again) = h.apply(GRANTS, table_grant).await;
    assert_eq!(
        (status, &again["properties"]),
        (200, &created["properties"])
    );
    assert_eq!(
        h.text_in("appdb", acl_row, &[]).await,
        before,
        "re-apply rewrote the ACL"
    );

    let (status, narrowed) = h
        .apply(
            GRANTS,
            json!({ "database": "appdb", "role": "app_rw", "objectType": "table", "schema": "app",
                               "objects": ["t1"], "privileges": ["SELECT"] }),
        )
        .await;
    assert_eq!(status, 200, "{narrowed}");
    assert_eq!(narrowed["properties"]["privileges"], json!(["SELECT"]));
    assert_eq!(narrowed["properties"]["withGrantOption"], false);
    assert!(
        has(
            &h,
            "SELECT has_table_privilege('app_rw', 'app.t1', 'SELECT')"
        )
        .await
    );
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_rw', 'app.t1', 'INSERT')"
        )
        .await
    );
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_rw', 'app.t1', 'SELECT WITH GRANT OPTION')"
        )
        .await
    );
    let (status, got) = h.get(GRANTS, narrowed["identifiers"].clone()).await;
    assert_eq!((status, &got["properties"]), (200, &narrowed["properties"]));

    // Every table of the schema; sequences; functions by signature.
    let (status, all) = h
        .apply(
            GRANTS,
            json!({ "database": "appdb", "role": "app_ro", "objectType": "table", "schema": "app",
                               "privileges": ["SELECT"] }),
        )
        .await;
    assert_eq!(
        (status, &all["properties"]["privileges"]),
        (200, &json!(["SELECT"])),
        "{all}"
    );
    assert!(has(&h, "SELECT has_table_privilege('app_ro', 'app.t1', 'SELECT') AND has_table_privilege('app_ro', 'app.t2', 'SELECT')").await);
    let (status, body) = h
        .apply(GRANTS, json!({ "database": "appdb", "role": "app_rw", "objectType": "sequence", "schema": "app",
                               "objects": ["s1"], "privileges": ["USAGE", "UPDATE"] }))
        .await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!(["USAGE", "UPDATE"])),
        "{body}"
    );
    assert!(
        has(
            &h,
            "SELECT has_sequence_privilege('app_rw', 'app.s1', 'UPDATE')"
        )
        .await
    );
    let function_grant = json!({ "database": "appdb", "role": "app_ro", "objectType": "function", "schema": "app",
                                 "objects": ["add(integer, integer)"], "privileges": ["EXECUTE"] });
    let (status, body) = h.apply(GRANTS, function_grant).await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!(["EXECUTE"])),
        "{body}"
    );
    assert_eq!(
        body["identifiers"]["objects"],
        json!(["add(integer, integer)"])
    );
    assert_eq!(h.get(GRANTS, body["identifiers"].clone()).await.0, 200);

    // A role still holding privileges is not dropped (409); revoking them (deleting the grants) lets it go.
    let (status, body) = h.delete(ROLES, json!({ "name": "app_rw" })).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("DependentObjectsStillExist")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("objects in database appdb"),
        "{body}"
    );
    for grant in [
        narrowed["identifiers"].clone(),
        json!({ "database": "appdb", "role": "app_rw",
                  "objectType": "sequence", "schema": "app", "objects": ["s1"] }),
    ] {
        assert_eq!(h.delete(GRANTS, grant.clone()).await.0, 204);
        assert_eq!(h.delete(GRANTS, grant.clone()).await.0, 204);
        // A grant of nothing reads as absent.
        assert_eq!(h.get(GRANTS, grant).await.0, 404);
    }
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_rw', 'app.t1', 'SELECT')"
        )
        .await
    );
    assert_eq!(h.delete(ROLES, json!({ "name": "app_rw" })).await.0, 204);
    // With the role gone the grant is gone too.
    assert_eq!(h.get(GRANTS, narrowed["identifiers"].clone()).await.0, 404);
    assert_eq!(
        h.delete(GRANTS, narrowed["identifiers"].clone()).await.0,
        204
    );

    let function_identifiers = json!({ "database": "appdb", "role": "app_ro", "objectType": "function",
                                       "schema": "app", "objects": ["add(integer, integer)"] });
    assert_eq!(h.delete(GRANTS, function_identifiers).await.0, 204);
    assert!(
        !has(
            &h,
            "SELECT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a \
                      WHERE p.proname = 'add' AND a.grantee = 'app_ro'::regrole)"
        )
        .await
    );
}

#[tokio::test]
async fn grants_to_public_and_on_missing_things() {
    let h = Harness::start().await;
    setup(&h).await;
    // PUBLIC may connect by default; the exact set takes TEMPORARY away.
    let (status, body) = h
        .apply(
            GRANTS,
            json!({ "database": "appdb", "role": "PUBLIC", "objectType": "database",
                               "privileges": ["CONNECT"] }),
        )
        .await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!(["CONNECT"])),
        "{body}"
    );
    assert!(
        !has(
            &h,
            "SELECT has_database_privilege('app_ro', 'appdb', 'TEMPORARY')"
        )
        .await
    );

    let base = json!({ "database": "appdb", "role": "app_ro", "objectType": "table", "schema": "app",
                       "privileges": ["SELECT"] });
    let with = |key: &str, value: Value| {
        let mut grant = base.clone();
        grant[key] = value;
        grant
    };
    for (grant, target) in [
        (
            with("objects", json!(["t1", "missing"])),
            "/properties/objects/1",
        ),
        (with("role", json!("nobody_yet")), "/properties/role"),
        (with("schema", json!("later")), "/properties/schema"),
        (with("database", json!("laterdb")), "/properties/database"),
    ] {
        let (status, body) = h.apply(GRANTS, grant).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "UndefinedObject");
        assert_eq!(error_target(&body).as_deref(), Some(target), "{body}");
    }
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_ro', 'app.t1', 'SELECT')"
        )
        .await,
        "a failed grant half-applied"
    );

    for (grant, target) in [
        (with("objectType", json!("view")), "/properties/objectType"),
        (
            with("privileges", json!(["SELECT", "EXECUTE"])),
            "/properties/privileges/1",
        ),
        (with("objects", json!([])), "/properties/objects"),
        (
            json!({ "database": "appdb", "role": "app_ro", "objectType": "database", "schema": "app",
                    "privileges": ["CONNECT"] }),
            "/properties/schema",
        ),
        (
            json!({ "database": "appdb", "role": "app_ro", "objectType": "function", "schema": "app",
                    "objects": ["add"], "privileges": ["EXECUTE"] }),
            "/properties/objects/0",
        ),
    ] {
        let (status, body) = h.apply(GRANTS, grant).await;
        assert_eq!(
            (status, error_target(&body).as_deref()),
            (400, Some(target)),
            "{body}"
        );
    }
}

/// A new database lets `PUBLIC` connect and create temporary tables: a grant of nothing to `PUBLIC` there
/// (`examples/postgresql`'s `noPublicConnect`) is absent before its apply — not an existing grant a stack must
/// adopt —, held with no privileges after it (what-if and drift agree with the server), and its delete gives the
/// defaults back.
#[tokio::test]
async fn a_grant_of_nothing_to_public_takes_the_defaults_away_and_delete_restores_them() {
    let h = Harness::start().await;
    setup(&h).await;
    assert_eq!(
        h.apply(DATABASES, json!({ "name": "scratch" })).await.0,
        200
    );
    let identifiers = json!({ "database": "scratch", "role": "PUBLIC", "objectType": "database" });
    let connect = "SELECT has_database_privilege('app_ro', 'scratch', 'CONNECT')";
    let temporary = "SELECT has_database_privilege('app_ro', 'scratch', 'TEMPORARY')";
    assert!(has(&h, connect).await && has(&h, temporary).await);
    let (status, body) = h.get(GRANTS, identifiers.clone()).await;
    assert_eq!(status, 404, "the server's default read as a grant: {body}");

    let mut grant = identifiers.clone();
    grant["privileges"] = json!([]);
    let (status, body) = h.apply(GRANTS, grant).await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!([])),
        "{body}"
    );
    assert!(!has(&h, connect).await && !has(&h, temporary).await);
    let (status, body) = h.get(GRANTS, identifiers.clone()).await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!([])),
        "an applied grant of nothing must read as held: {body}"
    );

    // A role's grant still reads as absent before its apply: a role holds nothing by default.
    let (status, _) = h
        .get(
            GRANTS,
            json!({ "database": "scratch", "role": "app_ro", "objectType": "database" }),
        )
        .await;
    assert_eq!(status, 404);

    assert_eq!(h.delete(GRANTS, identifiers.clone()).await.0, 204);
    assert!(has(&h, connect).await && has(&h, temporary).await);
    assert_eq!(h.get(GRANTS, identifiers).await.0, 404);
}

/// Database privileges live in the shared catalog: they are granted, read and revoked from the maintenance
/// database, without connecting to (and keeping a pool open to) the database they are on, so they also
/// work on a database that refuses connections.
#[tokio::test]
async fn database_grants_do_not_connect_to_the_database() {
    let h = Harness::start().await;
    assert_eq!(
        h.apply(ROLES, json!({ "name": "app_ro", "login": true }))
            .await
            .0,
        200
    );
    for (name, allow) in [("open_db", true), ("closed_db", false)] {
        let (status, body) = h
            .apply(
                DATABASES,
                json!({ "name": name, "allowConnections": allow }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let privilege = |database: &str| {
        format!("SELECT has_database_privilege('app_ro', '{database}', 'CONNECT')")
    };
    for database in ["open_db", "closed_db"] {
        let grant = json!({ "database": database, "role": "app_ro", "objectType": "database",
                            "privileges": ["CONNECT", "CREATE"] });
        let (status, body) = h.apply(GRANTS, grant.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["properties"]["privileges"],
            json!(["CREATE", "CONNECT"])
        );
        assert!(h.check_in("postgres", &privilege(database), &[]).await);
        let (status, body) = h.get(GRANTS, body["identifiers"].clone()).await;
        assert_eq!(
            (status, &body["properties"]["privileges"]),
            (200, &json!(["CREATE", "CONNECT"])),
            "{body}"
        );
    }
    let sessions =
        "SELECT count(*) = 0 FROM pg_stat_activity WHERE datname IN ('open_db', 'closed_db')";
    assert!(
        h.check_in("postgres", sessions, &[]).await,
        "a session is connected to a granted database"
    );
    for database in ["open_db", "closed_db"] {
        let identifiers =
            json!({ "database": database, "role": "app_ro", "objectType": "database" });
        assert_eq!(h.delete(GRANTS, identifiers).await.0, 204);
        assert!(
            !h.check_in(
                "postgres",
                &privilege(database).replace("'CONNECT'", "'CREATE'"),
                &[]
            )
            .await
        );
    }
    assert!(h.check_in("postgres", sessions, &[]).await);
}

const DEFAULT_ACL: &str = "SELECT coalesce((SELECT d.defaclacl::text || d.xmin::text FROM pg_default_acl d \
     LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace \
     WHERE d.defaclobjtype = $1 AND coalesce(n.nspname, '') = $2), 'none')";

#[tokio::test]
async fn default_privileges_apply_to_new_objects_exactly() {
    let h = Harness::start().await;
    setup(&h).await;
    let declared = json!({ "database": "appdb", "role": "app_ro", "schema": "app", "objectType": "table",
                           "privileges": ["SELECT"] });
    let (status, created) = h.apply(DEFAULTS, declared.clone()).await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(
        created["identifiers"],
        json!({ "database": "appdb", "role": "app_ro", "schema": "app", "objectType": "table" })
    );
    assert_eq!(created["properties"]["privileges"], json!(["SELECT"]));
    let row = h.text_in("appdb", DEFAULT_ACL, &["r", "app"]).await;
    assert!(row.contains("app_ro=r/postgres"), "{row}");
    h.run_in("appdb", "CREATE TABLE app.t3 (id int)").await;
    assert!(
        has(
            &h,
            "SELECT has_table_privilege('app_ro', 'app.t3', 'SELECT')"
        )
        .await
    );
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_ro', 'app.t3', 'INSERT')"
        )
        .await
    );

    let (status, again) = h.apply(DEFAULTS, declared).await;
    assert_eq!(
        (status, &again["properties"]),
        (200, &created["properties"])
    );
    assert_eq!(
        h.text_in("appdb", DEFAULT_ACL, &["r", "app"]).await,
        row,
        "re-apply rewrote it"
    );

    let (status, updated) = h
        .apply(
            DEFAULTS,
            json!({ "database": "appdb", "role": "app_ro", "schema": "app", "objectType": "table",
                                 "privileges": ["INSERT", "UPDATE"], "withGrantOption": true }),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(
        updated["properties"]["privileges"],
        json!(["INSERT", "UPDATE"])
    );
    assert_eq!(updated["properties"]["withGrantOption"], true);
    h.run_in("appdb", "CREATE TABLE app.t4 (id int)").await;
    assert!(
        has(
            &h,
            "SELECT has_table_privilege('app_ro', 'app.t4', 'UPDATE WITH GRANT OPTION')"
        )
        .await
    );
    assert!(
        !has(
            &h,
            "SELECT has_table_privilege('app_ro', 'app.t4', 'SELECT')"
        )
        .await
    );
    let (status, got) = h.get(DEFAULTS, updated["identifiers"].clone()).await;
    assert_eq!((status, &got["properties"]), (200, &updated["properties"]));

    // Database-wide: PUBLIC no longer executes new functions; deleting restores the built-in default.
    let public = json!({ "database": "appdb", "role": "PUBLIC", "objectType": "function", "privileges": [] });
    let (status, body) = h.apply(DEFAULTS, public.clone()).await;
    assert_eq!(
        (status, &body["properties"]["privileges"]),
        (200, &json!([])),
        "{body}"
    );
    assert_ne!(h.text_in("appdb", DEFAULT_ACL, &["f", ""]).await, "none");
    h.run_in(
        "appdb",
        "CREATE FUNCTION app.one() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    )
    .await;
    assert!(
        !has(
            &h,
            "SELECT has_function_privilege('app_ro', 'app.one()', 'EXECUTE')"
        )
        .await
    );
    assert_eq!(h.delete(DEFAULTS, body["identifiers"].clone()).await.0, 204);
    assert_eq!(h.text_in("appdb", DEFAULT_ACL, &["f", ""]).await, "none");

    // The grantee cannot be dropped while default privileges name it.
    let (status, body) = h.delete(ROLES, json!({ "name": "app_ro" })).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("DependentObjectsStillExist")),
        "{body}"
    );
    assert_eq!(
        h.delete(DEFAULTS, updated["identifiers"].clone()).await.0,
        204
    );
    assert_eq!(h.text_in("appdb", DEFAULT_ACL, &["r", "app"]).await, "none");
    assert_eq!(
        h.delete(DEFAULTS, updated["identifiers"].clone()).await.0,
        204
    );

    let (status, body) = h
        .apply(
            DEFAULTS,
            json!({ "database": "appdb", "role": "app_ro", "schema": "app", "objectType": "schema",
                                 "privileges": ["USAGE"] }),
        )
        .await;
    assert_eq!(
        (status, error_target(&body).as_deref()),
        (400, Some("/properties/schema")),
        "{body}"
    );
    let (status, body) = h
        .apply(
            DEFAULTS,
            json!({ "database": "appdb", "role": "app_ro", "forRole": "creator_later",
                                 "objectType": "table", "privileges": ["SELECT"] }),
        )
        .await;
    assert_eq!(
        (status, error_target(&body).as_deref()),
        (409, Some("/properties/forRole")),
        "{body}"
    );
}

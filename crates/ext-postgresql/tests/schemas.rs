//! `PostgreSql/schemas` and `PostgreSql/extensions` against a real server: create, read back, owner and
//! schema changes, idempotent re-apply, deleting in an unsafe order (409), and deleting what is gone.

mod common;

use common::{Harness, error_target};
use serde_json::json;

const ROLES: &str = "PostgreSql/roles";
const DATABASES: &str = "PostgreSql/databases";
const SCHEMAS: &str = "PostgreSql/schemas";
const EXTENSIONS: &str = "PostgreSql/extensions";

const NAMESPACE_ROW: &str = "SELECT pg_get_userbyid(nspowner)::text || ':' || xmin::text FROM pg_namespace WHERE nspname = $1";

#[tokio::test]
async fn schema_lifecycle_is_exact_and_idempotent() {
    let h = Harness::start().await;
    for role in ["owner1", "owner2"] {
        assert_eq!(h.apply(ROLES, json!({ "name": role })).await.0, 200);
    }
    let (status, body) = h
        .apply(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "UndefinedObject");
    assert_eq!(error_target(&body).as_deref(), Some("/properties/database"));

    assert_eq!(h.apply(DATABASES, json!({ "name": "appdb" })).await.0, 200);
    let declared = json!({ "database": "appdb", "name": "app", "owner": "owner1" });
    let (status, created) = h.apply(SCHEMAS, declared.clone()).await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(
        created["identifiers"],
        json!({ "database": "appdb", "name": "app" })
    );
    assert_eq!(created["properties"], declared);
    let row = h.text_in("appdb", NAMESPACE_ROW, &["app"]).await;
    assert!(row.starts_with("owner1:"), "{row}");

    let (status, again) = h.apply(SCHEMAS, declared).await;
    assert_eq!(
        (status, &again["properties"]),
        (200, &created["properties"])
    );
    assert_eq!(
        h.text_in("appdb", NAMESPACE_ROW, &["app"]).await,
        row,
        "re-apply rewrote the schema"
    );

    // No owner declared: left alone. Another owner: changed.
    let (status, body) = h
        .apply(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
        .await;
    assert_eq!(
        (status, &body["properties"]["owner"]),
        (200, &json!("owner1"))
    );
    let (status, body) = h
        .apply(
            SCHEMAS,
            json!({ "database": "appdb", "name": "app", "owner": "owner2" }),
        )
        .await;
    assert_eq!(
        (status, &body["properties"]["owner"]),
        (200, &json!("owner2"))
    );
    assert!(
        h.text_in("appdb", NAMESPACE_ROW, &["app"])
            .await
            .starts_with("owner2:")
    );
    let (status, got) = h
        .get(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
        .await;
    assert_eq!((status, &got["properties"]), (200, &body["properties"]));

    // A schema holding a table is not dropped with it.
    h.run_in("appdb", "CREATE TABLE app.kept (id int)").await;
    let (status, body) = h
        .delete(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "DependentObjectsStillExist");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("table app.kept"),
        "{body}"
    );
    h.run_in("appdb", "DROP TABLE app.kept").await;

    assert_eq!(
        h.delete(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
            .await
            .0,
        204
    );
    assert!(
        !h.check_in(
            "appdb",
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &["app"]
        )
        .await
    );
    assert_eq!(
        h.get(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
            .await
            .0,
        404
    );
    assert_eq!(
        h.delete(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
            .await
            .0,
        204
    );
    // The database's pooled connections do not keep it from being dropped; inside a missing database
    // nothing exists and deleting is a success.
    assert_eq!(h.delete(DATABASES, json!({ "name": "appdb" })).await.0, 204);
    assert_eq!(
        h.get(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
            .await
            .0,
        404
    );
    assert_eq!(
        h.delete(SCHEMAS, json!({ "database": "appdb", "name": "app" }))
            .await
            .0,
        204
    );
}

const EXTENSION_ROW: &str = "SELECT n.nspname || ':' || e.extversion || ':' || e.xmin::text FROM pg_extension e \
     JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = $1";

#[tokio::test]
async fn contrib_extensions_install_move_and_refuse_unsafe_deletes() {
    let h = Harness::start().await;
    assert_eq!(h.apply(DATABASES, json!({ "name": "extdb" })).await.0, 200);
    for schema in ["crypto", "other"] {
        assert_eq!(
            h.apply(SCHEMAS, json!({ "database": "extdb", "name": schema }))
                .await
                .0,
            200
        );
    }
    let default_version = h
        .text_in(
            "extdb",
            "SELECT default_version FROM pg_available_extensions WHERE name = $1",
            &["pgcrypto"],
        )
        .await;
    let (status, created) = h
        .apply(
            EXTENSIONS,
            json!({ "database": "extdb", "name": "pgcrypto", "schema": "crypto" }),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(
        created["identifiers"],
        json!({ "database": "extdb", "name": "pgcrypto" })
    );
    assert_eq!(
        created["properties"],
        json!({ "database": "extdb", "name": "pgcrypto", "schema": "crypto", "version": default_version })
    );
    let row = h.text_in("extdb", EXTENSION_ROW, &["pgcrypto"]).await;
    assert!(
        row.starts_with(&format!("crypto:{default_version}:")),
        "{row}"
    );
    assert!(
        h.check_in(
            "extdb",
            "SELECT crypto.digest('x', 'sha256') IS NOT NULL",
            &[]
        )
        .await
    );

    let (status, again) = h
        .apply(
            EXTENSIONS,
            json!({ "database": "extdb", "name": "pgcrypto", "schema": "crypto",
                                   "version": default_version }),
        )
        .await;
    assert_eq!(
        (status, &again["properties"]),
        (200, &created["properties"])
    );
    assert_eq!(
        h.text_in("extdb", EXTENSION_ROW, &["pgcrypto"]).await,
        row,
        "re-apply changed it"
    );

    let (status, moved) = h
        .apply(
            EXTENSIONS,
            json!({ "database": "extdb", "name": "pgcrypto", "schema": "other" }),
        )
        .await;
    assert_eq!(
        (status, &moved["properties"]["schema"]),
        (200, &json!("other")),
        "{moved}"
    );
    let (status, got) = h
        .get(
            EXTENSIONS,
            json!({ "database": "extdb", "name": "pgcrypto" }),
        )
        .await;
    assert_eq!((status, &got["properties"]), (200, &moved["properties"]));

    // hstore without a schema lands in the first schema of the search path.
    let (status, hstore) = h
        .apply(EXTENSIONS, json!({ "database": "extdb", "name": "hstore" }))
        .await;
    assert_eq!(
        (status, &hstore["properties"]["schema"]),
        (200, &json!("public")),
        "{hstore}"
    );

    // Unsafe orders are 409s a stack's retry rounds work through.
    let (status, body) = h
        .delete(SCHEMAS, json!({ "database": "extdb", "name": "other" }))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("DependentObjectsStillExist")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pgcrypto"),
        "{body}"
    );
    h.run_in("extdb", "CREATE TABLE uses_hstore (h hstore)")
        .await;
    let (status, body) = h
        .delete(EXTENSIONS, json!({ "database": "extdb", "name": "hstore" }))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("DependentObjectsStillExist")),
        "{body}"
    );
    h.run_in("extdb", "DROP TABLE uses_hstore").await;

    // What the server does not ship is refused up front.
    let (status, body) = h
        .apply(
            EXTENSIONS,
            json!({ "database": "extdb", "name": "no_such_extension" }),
        )
        .await;
    assert_eq!(
        (status, error_target(&body).as_deref()),
        (400, Some("/properties/name")),
        "{body}"
    );
    let (status, body) = h
        .apply(
            EXTENSIONS,
            json!({ "database": "extdb", "name": "citext", "version": "0.0-none" }),
        )
        .await;
    assert_eq!(
        (status, error_target(&body).as_deref()),
        (400, Some("/properties/version")),
        "{body}"
    );
    assert!(
        !h.check_in(
            "extdb",
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citext')",
            &[]
        )
        .await
    );

    for name in ["pgcrypto", "hstore"] {
        assert_eq!(
            h.delete(EXTENSIONS, json!({ "database": "extdb", "name": name }))
                .await
                .0,
            204
        );
        assert_eq!(
            h.get(EXTENSIONS, json!({ "database": "extdb", "name": name }))
                .await
                .0,
            404
        );
        assert_eq!(
            h.delete(EXTENSIONS, json!({ "database": "extdb", "name": name }))
                .await
                .0,
            204
        );
    }
    assert_eq!(
        h.delete(SCHEMAS, json!({ "database": "extdb", "name": "other" }))
            .await
            .0,
        204
    );
    assert!(
        !h.check_in(
            "extdb",
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname <> 'plpgsql')",
            &[]
        )
        .await
    );
}

#[tokio::test]
async fn previews_take_identifiers_from_the_input() {
    let h = Harness::start().await;
    let (status, preview) = h
        .call(
            cairn_extension_contract::transport::Operation::Preview,
            json!({ "type": SCHEMAS, "properties": { "database": "d", "name": "s", "owner": "o" } }),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["identifiers"],
        json!({ "database": "d", "name": "s" })
    );
    let (status, preview) = h
        .call(
            cairn_extension_contract::transport::Operation::Preview,
            json!({ "type": EXTENSIONS, "properties": { "database": "[parameters('db')]", "name": "hstore" },
                    "metadata": { "unevaluated": ["/properties/database"] } }),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["identifiers"], json!({}));
    let (status, body) = h
        .call(
            cairn_extension_contract::transport::Operation::Preview,
            json!({ "type": SCHEMAS, "properties": { "name": "s" } }),
        )
        .await;
    assert_eq!(
        (status, error_target(&body).as_deref()),
        (400, Some("/properties/database")),
        "{body}"
    );
    assert!(!h.database_exists("d").await);
}

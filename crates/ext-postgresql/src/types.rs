//! The PostgreSql extension's resource types (`PostgreSql/roles`, `databases`, `schemas`, `extensions`,
//! `grants`, `defaultPrivileges`, apiVersion `v1`) and config type in Bicep's type format, as the handlers read
//! them: identifiers flagged, a role's `password` write-only and sensitive, `objectType` an enum.

use cairn_extension_sdk::types::{Flags, TypeBuilder, TypeRef, TypeSet};

use crate::{
    DATABASE_TYPE, DEFAULT_PRIVILEGES_TYPE, EXTENSION_TYPE, GRANT_TYPE, NAME, ROLE_TYPE,
    SCHEMA_TYPE, VERSION,
};

/// The apiVersion of every resource type.
pub const API_VERSION: &str = "v1";

const ID: Flags = Flags(Flags::REQUIRED.0 | Flags::IDENTIFIER.0);

/// The extension's types.
pub fn types() -> TypeSet {
    let mut b = TypeBuilder::new(NAME, VERSION);
    let string = b.string();
    let secret = b.add(cairn_extension_sdk::types::TypeEntry::StringType {
        sensitive: Some(true),
        min_length: None,
        max_length: None,
        pattern: None,
    });
    let boolean = b.bool();
    let limit = b.int_range(Some(-1), Some(i64::from(i32::MAX)));
    let strings = b.array(string.clone());
    let optional_id = Flags::IDENTIFIER;

    let role = b.object(
        "roles",
        vec![
            ("name", string.clone(), ID, "The role name."),
            ("login", boolean.clone(), Flags::NONE, "LOGIN."),
            ("superuser", boolean.clone(), Flags::NONE, "SUPERUSER."),
            ("createDb", boolean.clone(), Flags::NONE, "CREATEDB."),
            ("createRole", boolean.clone(), Flags::NONE, "CREATEROLE."),
            ("inherit", boolean.clone(), Flags::NONE, "INHERIT."),
            ("replication", boolean.clone(), Flags::NONE, "REPLICATION."),
            (
                "connectionLimit",
                limit.clone(),
                Flags::NONE,
                "CONNECTION LIMIT (-1: none).",
            ),
            (
                "validUntil",
                string.clone(),
                Flags::NONE,
                "VALID UNTIL, UTC.",
            ),
            (
                "memberOf",
                strings.clone(),
                Flags::NONE,
                "The roles this role is a member of.",
            ),
            (
                "password",
                secret,
                Flags::WRITE_ONLY,
                "The password, sent as a SCRAM verifier.",
            ),
            (
                "dropOwned",
                boolean.clone(),
                Flags::NONE,
                "On delete, drop what the role owns first.",
            ),
        ],
        None,
    );
    resource(&mut b, ROLE_TYPE, role);

    let database = b.object(
        "databases",
        vec![
            ("name", string.clone(), ID, "The database name."),
            ("owner", string.clone(), Flags::NONE, "The owning role."),
            (
                "encoding",
                string.clone(),
                Flags::NONE,
                "Character set (creation only).",
            ),
            (
                "lcCollate",
                string.clone(),
                Flags::NONE,
                "LC_COLLATE (creation only).",
            ),
            (
                "lcCtype",
                string.clone(),
                Flags::NONE,
                "LC_CTYPE (creation only).",
            ),
            (
                "template",
                string.clone(),
                Flags::NONE,
                "Template database (creation only).",
            ),
            (
                "connectionLimit",
                limit,
                Flags::NONE,
                "CONNECTION LIMIT (-1: none).",
            ),
            (
                "allowConnections",
                boolean.clone(),
                Flags::NONE,
                "ALLOW_CONNECTIONS.",
            ),
            ("isTemplate", boolean.clone(), Flags::NONE, "IS_TEMPLATE."),
            (
                "force",
                boolean.clone(),
                Flags::NONE,
                "On delete, disconnect other sessions.",
            ),
        ],
        None,
    );
    resource(&mut b, DATABASE_TYPE, database);

    let schema = b.object(
        "schemas",
        vec![
            ("database", string.clone(), ID, "The database."),
            ("name", string.clone(), ID, "The schema name."),
            ("owner", string.clone(), Flags::NONE, "The owning role."),
        ],
        None,
    );
    resource(&mut b, SCHEMA_TYPE, schema);

    let extension = b.object(
        "extensions",
        vec![
            (
                "database",
                string.clone(),
                ID,
                "The database the extension is installed in.",
            ),
            ("name", string.clone(), ID, "The extension name."),
            (
                "schema",
                string.clone(),
                Flags::NONE,
                "The schema holding its objects.",
            ),
            (
                "version",
                string.clone(),
                Flags::NONE,
                "The installed version.",
            ),
        ],
        None,
    );
    resource(&mut b, EXTENSION_TYPE, extension);

    let grant_kind = b.literals([
        "database", "schema", "table", "sequence", "function", "type",
    ]);
    let grant = b.object(
        "grants",
        vec![
            ("database", string.clone(), ID, "The database."),
            ("role", string.clone(), ID, "The grantee role, or PUBLIC."),
            ("objectType", grant_kind.clone(), ID, "The kind of object."),
            ("schema", string.clone(), optional_id, "The schema."),
            (
                "objects",
                strings.clone(),
                optional_id,
                "Objects in the schema; absent: all.",
            ),
            (
                "privileges",
                strings.clone(),
                Flags::NONE,
                "The exact privileges (ALL expands).",
            ),
            (
                "withGrantOption",
                boolean.clone(),
                Flags::NONE,
                "WITH GRANT OPTION.",
            ),
        ],
        None,
    );
    resource(&mut b, GRANT_TYPE, grant);

    let default_privileges = b.object(
        "defaultPrivileges",
        vec![
            ("database", string.clone(), ID, "The database."),
            ("role", string.clone(), ID, "The grantee role, or PUBLIC."),
            (
                "forRole",
                string.clone(),
                optional_id,
                "Whose new objects get the privileges.",
            ),
            (
                "schema",
                string.clone(),
                optional_id,
                "Only objects created in this schema.",
            ),
            ("objectType", grant_kind, ID, "The kind of object."),
            (
                "privileges",
                strings,
                Flags::NONE,
                "The exact privileges (ALL expands).",
            ),
            (
                "withGrantOption",
                boolean,
                Flags::NONE,
                "WITH GRANT OPTION.",
            ),
        ],
        None,
    );
    resource(&mut b, DEFAULT_PRIVILEGES_TYPE, default_privileges);

    // The config, as the parser reads it: `password` flat or in `auth` (the parser insists on exactly one).
    let port = b.int_range(Some(1), Some(65535));
    let port_text = b.string();
    let port_or_text = b.union(vec![port, port_text]);
    let ssl_mode = b.literals(["disable", "prefer", "require", "verify-full"]);
    let password = b.secure_string();
    let auth = b.object(
        "auth",
        vec![(
            "password",
            password.clone(),
            Flags::REQUIRED,
            "The admin password.",
        )],
        None,
    );
    let config = b.object(
        "configuration",
        vec![
            ("host", string.clone(), Flags::REQUIRED, "The server host."),
            ("port", port_or_text, Flags::NONE, "The server port (5432)."),
            (
                "database",
                string.clone(),
                Flags::NONE,
                "The maintenance database (postgres).",
            ),
            (
                "username",
                string.clone(),
                Flags::REQUIRED,
                "The admin user.",
            ),
            (
                "sslMode",
                ssl_mode,
                Flags::NONE,
                "How the connection is protected (prefer).",
            ),
            (
                "caCertificate",
                string,
                Flags::NONE,
                "PEM CA certificate for require/verify-full.",
            ),
            ("password", password, Flags::NONE, "The admin password."),
            ("auth", auth, Flags::NONE, "Credentials: { password }."),
        ],
        None,
    );
    b.configuration(config);
    b.finish()
}

fn resource(b: &mut TypeBuilder, name: &str, body: TypeRef) {
    b.resource(name, API_VERSION, body);
}

#[cfg(test)]
mod tests {
    use cairn_extension_sdk::types::{Body, FindingKind, check_body};
    use serde_json::json;

    use super::*;

    #[test]
    fn the_files_load_back_and_judge_bodies() {
        let set = types();
        assert_eq!(TypeSet::from_files(&set.to_files()).unwrap(), set);
        let role = set.resource(ROLE_TYPE, Some(API_VERSION), None).unwrap();
        let grant = set.resource(GRANT_TYPE, None, Some(VERSION)).unwrap();
        let kinds = |id, body: serde_json::Value| -> Vec<FindingKind> {
            check_body(&set, id, &Body::from_json(&body))
                .into_iter()
                .map(|f| f.kind)
                .collect()
        };
        let reader = json!({"name": "r", "login": true, "connectionLimit": 20, "password": "pw",
                            "memberOf": ["a"], "dropOwned": true, "validUntil": "2030-01-01T00:00:00Z"});
        assert_eq!(kinds(role, reader), vec![]);
        assert_eq!(
            kinds(role, json!({"name": "r", "login": "yes"})),
            vec![FindingKind::WrongType]
        );
        let select = json!({"database": "d", "role": "PUBLIC", "objectType": "table", "schema": "app",
                            "privileges": ["SELECT"], "withGrantOption": false});
        assert_eq!(kinds(grant, select), vec![]);
        assert_eq!(
            kinds(
                grant,
                json!({"database": "d", "role": "r", "objectType": "view"})
            ),
            vec![FindingKind::InvalidValue]
        );
    }
}

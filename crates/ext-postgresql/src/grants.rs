//! `PostgreSql/grants`: the exact set of privileges a role (or `PUBLIC`) holds on a database, a schema, or
//! tables, sequences or functions of a schema.
//!
//! A grant is identified by `{ database, role, objectType, schema?, objects? }`; `privileges` is the
//! exact set on every object: what is missing is granted, what is no longer declared revoked (also the
//! grant option when `withGrantOption` is false), and deleting the grant puts the grantee back to
//! PostgreSQL's defaults there (nothing for a role; `CONNECT` and `TEMPORARY` on a database for `PUBLIC`),
//! which is also how a grant not applied yet reads: absent. For tables, sequences and functions, absent `objects` means every such object
//! that exists in the schema when the grant is applied (`default privileges` cover later ones); functions
//! are named by signature, e.g. `add(integer, integer)`. Privileges are those granted by the objects'
//! owners (what a superuser's or owner's `GRANT` records). A role, schema or object that does not exist
//! yet is a 409 `UndefinedObject`, which a stack's retry rounds work through.

use std::collections::BTreeMap;

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourceState, Validator, codes,
};
use serde::{Deserialize, Serialize};
use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, Postgres};

use crate::acl::{self, Grantee, Held, ObjectKind, Statements};
use crate::config::PgConfig;
use crate::connection::{database_connection, missing_database, shared_catalog_connection};
use crate::error::{pg_codes, sql_error};
use crate::preview::{optional, preview_with_identifiers, required};
use crate::sql::{check_name, check_text, ident};

/// The resource type.
pub const GRANT_TYPE: &str = "PostgreSql/grants";

/// A grant's desired (input) or actual (output) properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantProperties {
    /// The database (identifier); for `objectType: database`, the database the privileges are on.
    pub database: String,
    /// The grantee role, or `PUBLIC` (identifier).
    pub role: String,
    /// `database`, `schema`, `table`, `sequence` or `function` (identifier).
    pub object_type: String,
    /// The schema: the object of a `schema` grant, the container of tables, sequences, functions
    /// (identifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Tables, sequences or functions (signatures) in `schema`; absent: all of them (identifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<String>>,
    /// The exact privileges (`ALL` expands); read back in PostgreSQL's order, as held on every object.
    #[serde(default)]
    pub privileges: Vec<String>,
    /// Whether the role may grant them on (`WITH GRANT OPTION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_grant_option: Option<bool>,
}

/// A grant's identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantIdentifiers {
    /// The database.
    pub database: String,
    /// The grantee.
    pub role: String,
    /// The kind of object.
    pub object_type: String,
    /// The schema, when the kind has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The objects, when named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<String>>,
}

impl GrantIdentifiers {
    fn of(properties: &GrantProperties) -> GrantIdentifiers {
        GrantIdentifiers {
            database: properties.database.clone(),
            role: properties.role.clone(),
            object_type: properties.object_type.clone(),
            schema: properties.schema.clone(),
            objects: properties.objects.clone(),
        }
    }
}

/// The handler of [`GRANT_TYPE`].
#[derive(Debug, Default, Clone, Copy)]
pub struct GrantHandler;

/// A validated grant scope.
struct Scope<'a> {
    database: &'a str,
    grantee: Grantee,
    kind: ObjectKind,
    schema: Option<&'a str>,
    objects: Option<&'a [String]>,
}

fn scope<'a>(
    identifiers: &'a GrantIdentifiers,
    base: &str,
    validator: &mut Validator,
) -> Option<Scope<'a>> {
    validator.absorb(check_name(
        &identifiers.database,
        &format!("{base}/database"),
    ));
    let grantee = validator.absorb(Grantee::parse(&identifiers.role, &format!("{base}/role")));
    let kind = ObjectKind::parse(&identifiers.object_type).filter(|kind| *kind != ObjectKind::Type);
    validator.check(
        kind.is_some(),
        codes::INVALID_PROPERTIES,
        format!("{base}/objectType"),
        "'objectType' must be one of database, schema, table, sequence, function.",
    );
    let kind = kind?;
    let in_schema = matches!(
        kind,
        ObjectKind::Table | ObjectKind::Sequence | ObjectKind::Function
    );
    match (&identifiers.schema, kind) {
        (Some(_), ObjectKind::Database) => validator.error(
            codes::INVALID_PROPERTIES,
            format!("{base}/schema"),
            "A database grant takes no 'schema'.",
        ),
        (Some(schema), _) => {
            validator.absorb(check_name(schema, &format!("{base}/schema")));
        }
        (None, ObjectKind::Database) => {}
        (None, _) => validator.error(
            codes::INVALID_PROPERTIES,
            format!("{base}/schema"),
            format!(
                "A {} grant needs 'schema'.",
                identifiers.object_type.to_ascii_lowercase()
            ),
        ),
    }
    match &identifiers.objects {
        Some(_) if !in_schema => validator.error(
            codes::INVALID_PROPERTIES,
            format!("{base}/objects"),
            "'objects' names tables, sequences or functions; a database or schema grant is on \
             'database' or 'schema' itself.",
        ),
        Some(objects) if objects.is_empty() => validator.error(
            codes::INVALID_PROPERTIES,
            format!("{base}/objects"),
            "'objects' must not be empty; leave it out to grant on every object in the schema.",
        ),
        Some(objects) => {
            for (index, object) in objects.iter().enumerate() {
                let target = format!("{base}/objects/{index}");
                validator.absorb(if kind == ObjectKind::Function {
                    check_function_signature(object, &target)
                } else {
                    check_name(object, &target)
                });
            }
        }
        None => {}
    }
    Some(Scope {
        database: &identifiers.database,
        grantee: grantee?,
        kind,
        schema: identifiers.schema.as_deref(),
        objects: identifiers.objects.as_deref(),
    })
}

/// A function is named `name(argument types)`, as PostgreSQL writes a signature.
fn check_function_signature(signature: &str, target: &str) -> Result<(), ExtensionError> {
    check_text(signature, target)?;
    let trimmed = signature.trim();
    if trimmed.len() < 3 || !trimmed.ends_with(')') || !trimmed.contains('(') {
        return Err(ExtensionError::invalid(
            codes::INVALID_PROPERTIES,
            target,
            "A function is named by its signature, e.g. 'add(integer, integer)'.",
        ));
    }
    Ok(())
}

/// A pooled connection for the scope's objects, or `None` when its database does not exist. Database
/// privileges are in the shared catalog `pg_database`, so they are read and changed from the maintenance
/// database: granting on many databases opens no connection (and keeps no pool) to each of them, and
/// works on databases that refuse connections (`allowConnections: false`).
async fn scope_connection(
    config: &PgConfig,
    scope: &Scope<'_>,
) -> Result<Option<PoolConnection<Postgres>>, ExtensionError> {
    if scope.kind == ObjectKind::Database {
        shared_catalog_connection(config, scope.database).await
    } else {
        database_connection(config, scope.database).await
    }
}

/// One object of the scope: the key it was declared (or found) by, its name in SQL, what the grantee holds,
/// and what it holds by PostgreSQL's default for the object (`acldefault`: `PUBLIC` may connect to a new
/// database and execute a new function, the owner holds everything).
struct Target {
    key: String,
    sql_name: String,
    held: Held,
    default: Held,
}

impl Target {
    /// The privileges the grantee holds by default, in the kind's order: what a delete gives back.
    fn default_privileges(&self, kind: ObjectKind) -> Vec<&'static str> {
        kind.privileges()
            .iter()
            .copied()
            .filter(|privilege| self.default.contains_key(*privilege))
            .collect()
    }
}

/// The catalog rows of the scope's objects: `(key, quoted name, acl, default acl)`, with `$2` the schema, `$3`
/// the declared objects (NULL for all in the schema) and `$4` the database.
fn source(kind: ObjectKind, named: bool) -> &'static str {
    match (kind, named) {
        (ObjectKind::Database, _) => {
            "SELECT datname::text, quote_ident(datname), coalesce(datacl, acldefault('d', datdba)), \
             acldefault('d', datdba) FROM pg_database WHERE datname = $4"
        }
        (ObjectKind::Schema, _) => {
            "SELECT nspname::text, quote_ident(nspname), coalesce(nspacl, acldefault('n', nspowner)), \
             acldefault('n', nspowner) FROM pg_namespace WHERE nspname = $2"
        }
        (ObjectKind::Table, _) => {
            "SELECT c.relname::text, format('%I.%I', n.nspname, c.relname), \
             coalesce(c.relacl, acldefault('r', c.relowner)), acldefault('r', c.relowner) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $2 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') \
             AND ($3::text[] IS NULL OR c.relname = ANY($3::text[]))"
        }
        (ObjectKind::Sequence, _) => {
            "SELECT c.relname::text, format('%I.%I', n.nspname, c.relname), \
             coalesce(c.relacl, acldefault('s', c.relowner)), acldefault('s', c.relowner) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $2 AND c.relkind = 'S' \
             AND ($3::text[] IS NULL OR c.relname = ANY($3::text[]))"
        }
        (ObjectKind::Function | ObjectKind::Type, false) => {
            "SELECT format('%s(%s)', p.proname, pg_get_function_identity_arguments(p.oid)), \
             format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)), \
             coalesce(p.proacl, acldefault('f', p.proowner)), acldefault('f', p.proowner) \
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = $2 AND p.prokind IN ('f', 'p')"
        }
        (ObjectKind::Function | ObjectKind::Type, true) => {
            "SELECT o, format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)), \
             coalesce(p.proacl, acldefault('f', p.proowner)), acldefault('f', p.proowner) \
             FROM unnest($3::text[]) AS o \
             JOIN pg_proc p ON p.oid = to_regprocedure(format('%I.', $2::text) || o) \
             JOIN pg_namespace n ON n.oid = p.pronamespace"
        }
    }
}

/// A row of [`targets`]' query: key, quoted name, privilege and grant option (none for an object the grantee holds
/// nothing on), whether the privilege is a default one.
type PrivilegeRow = (String, String, Option<String>, Option<bool>, bool);

/// The scope's existing objects, what the grantee (OID `grantee`) holds on each and what it would hold by
/// default.
async fn targets(
    connection: &mut PgConnection,
    scope: &Scope<'_>,
    grantee: i64,
) -> Result<Vec<Target>, ExtensionError> {
    // One row per object with nothing held, else one per privilege held (`is_default` false) or held by default
    // (true).
    let query = format!(
        "WITH s(key, sql_name, acl, dflt) AS ({}) \
         SELECT s.key, s.sql_name, a.privilege_type::text, a.is_grantable, false FROM s \
         LEFT JOIN LATERAL (SELECT x.privilege_type, x.is_grantable FROM aclexplode(s.acl) x \
                            WHERE x.grantee::int8 = $1) a ON true \
         UNION ALL \
         SELECT s.key, s.sql_name, d.privilege_type::text, false, true FROM s \
         JOIN LATERAL aclexplode(s.dflt) d ON d.grantee::int8 = $1 \
         ORDER BY 1",
        source(scope.kind, scope.objects.is_some())
    );
    let rows: Vec<PrivilegeRow> = sqlx::query_as(sqlx::AssertSqlSafe(query))
        .bind(grantee)
        .bind(scope.schema)
        .bind(scope.objects)
        .bind(scope.database)
        .fetch_all(connection)
        .await
        .map_err(|err| sql_error(&err, "read the privileges"))?;
    let mut targets: BTreeMap<String, Target> = BTreeMap::new();
    for (key, sql_name, privilege, grantable, is_default) in rows {
        let target = targets.entry(key.clone()).or_insert_with(|| Target {
            key,
            sql_name,
            held: Held::new(),
            default: Held::new(),
        });
        if let (Some(privilege), Some(grantable)) = (privilege, grantable) {
            let privilege = if privilege == "TEMP" {
                "TEMPORARY".to_owned()
            } else {
                privilege
            };
            let map = if is_default {
                &mut target.default
            } else {
                &mut target.held
            };
            let entry = map.entry(privilege).or_insert(false);
            *entry |= grantable;
        }
    }
    Ok(targets.into_values().collect())
}

async fn schema_exists(
    connection: &mut PgConnection,
    schema: &str,
) -> Result<bool, ExtensionError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(connection)
        .await
        .map_err(|err| sql_error(&err, "look the schema up"))
}

fn undefined(target: String, message: String) -> ExtensionError {
    ExtensionError::conflict(pg_codes::UNDEFINED_OBJECT, message).with_target(target)
}

/// The properties as held now.
fn properties_of(
    identifiers: &GrantIdentifiers,
    kind: ObjectKind,
    targets: &[Target],
) -> GrantProperties {
    let held: Vec<Held> = targets.iter().map(|target| target.held.clone()).collect();
    let (privileges, with_grant_option) = acl::common(kind, &held);
    GrantProperties {
        database: identifiers.database.clone(),
        role: identifiers.role.clone(),
        object_type: identifiers.object_type.clone(),
        schema: identifiers.schema.clone(),
        objects: identifiers.objects.clone(),
        privileges,
        with_grant_option: Some(with_grant_option),
    }
}

async fn apply(
    config: &PgConfig,
    desired: &GrantProperties,
) -> Result<GrantProperties, ExtensionError> {
    let identifiers = GrantIdentifiers::of(desired);
    let mut validator = Validator::new();
    let scope = scope(&identifiers, "/properties", &mut validator);
    let privileges = scope.as_ref().map(|scope| {
        acl::normalise(
            scope.kind,
            &desired.privileges,
            "/properties/privileges",
            &mut validator,
        )
    });
    validator.finish()?;
    let (Some(scope), Some(privileges)) = (scope, privileges) else {
        return Err(ExtensionError::internal(
            "The grant could not be validated.",
        ));
    };
    let with_grant_option = desired.with_grant_option.unwrap_or(false);
    let mut connection = scope_connection(config, &scope)
        .await?
        .ok_or_else(|| missing_database(scope.database))?;
    let Some(grantee) = scope.grantee.oid(&mut connection).await? else {
        return Err(undefined(
            "/properties/role".into(),
            format!(
                "The role {} does not exist; create it first.",
                scope.grantee.sql()
            ),
        ));
    };
    if let Some(schema) = scope.schema
        && !schema_exists(&mut connection, schema).await?
    {
        return Err(undefined(
            "/properties/schema".into(),
            format!(
                "The schema {} does not exist in the database {}; create it first.",
                ident(schema),
                ident(scope.database)
            ),
        ));
    }
    let mut tx = connection
        .begin()
        .await
        .map_err(|err| sql_error(&err, "start a transaction"))?;
    let current = targets(&mut tx, &scope, grantee).await?;
    if let Some(objects) = scope.objects {
        let missing: Vec<usize> = (0..objects.len())
            .filter(|index| !current.iter().any(|target| target.key == objects[*index]))
            .collect();
        if let Some(first) = missing.first() {
            let names: Vec<String> = missing
                .iter()
                .map(|index| ident(&objects[*index]))
                .collect();
            return Err(undefined(
                format!("/properties/objects/{first}"),
                format!(
                    "No {} {} in the schema {}; create it first.",
                    identifiers.object_type.to_ascii_lowercase(),
                    names.join(", "),
                    ident(scope.schema.unwrap_or_default())
                ),
            ));
        }
    }
    let grantee_sql = scope.grantee.sql();
    for target in &current {
        let object = format!("{} {}", scope.kind.keyword(), target.sql_name);
        let statements = Statements {
            prefix: "",
            object: &object,
            grantee: &grantee_sql,
        }
        .reconcile(&target.held, &privileges, with_grant_option);
        acl::run(&mut tx, statements, &object).await?;
    }
    let applied = targets(&mut tx, &scope, grantee).await?;
    tx.commit()
        .await
        .map_err(|err| sql_error(&err, "commit the privileges"))?;
    Ok(properties_of(&identifiers, scope.kind, &applied))
}

/// Reads the grant; `None` when its database, role or schema (or every named object) is gone, or the role holds no
/// privilege there.
async fn read(
    config: &PgConfig,
    identifiers: &GrantIdentifiers,
) -> Result<Option<GrantProperties>, ExtensionError> {
    let mut validator = Validator::new();
    let scope = scope(identifiers, "/identifiers", &mut validator);
    validator.finish()?;
    let Some(scope) = scope else {
        return Err(ExtensionError::internal(
            "The grant could not be validated.",
        ));
    };
    let Some(mut connection) = scope_connection(config, &scope).await? else {
        return Ok(None);
    };
    let Some(grantee) = scope.grantee.oid(&mut connection).await? else {
        return Ok(None);
    };
    let targets = targets(&mut connection, &scope, grantee).await?;
    let gone = match scope.kind {
        ObjectKind::Database => false,
        ObjectKind::Schema => targets.is_empty(),
        _ => match scope.schema {
            Some(schema) => {
                !schema_exists(&mut connection, schema).await?
                    || (scope.objects.is_some() && targets.is_empty())
            }
            None => true,
        },
    };
    if gone {
        return Ok(None);
    }
    // A grant that changes nothing is no grant: before its first apply and after its delete the grantee holds
    // what PostgreSQL gives it by default (nothing for a role, `CONNECT` and `TEMPORARY` on a new database for
    // `PUBLIC`), and it reads as absent — so a deployment stack does not take it for an existing one to adopt,
    // and drift detection sees privileges put back to the default by hand as the grant gone. A grant of
    // `privileges: []` to `PUBLIC` on a database does change something, and reads as held once applied.
    if targets.iter().all(|target| target.held == target.default) {
        return Ok(None);
    }
    Ok(Some(properties_of(identifiers, scope.kind, &targets)))
}

async fn delete(config: &PgConfig, identifiers: &GrantIdentifiers) -> Result<(), ExtensionError> {
    let mut validator = Validator::new();
    let scope = scope(identifiers, "/identifiers", &mut validator);
    validator.finish()?;
    let Some(scope) = scope else {
        return Err(ExtensionError::internal(
            "The grant could not be validated.",
        ));
    };
    let Some(mut connection) = scope_connection(config, &scope).await? else {
        return Ok(());
    };
    let Some(grantee) = scope.grantee.oid(&mut connection).await? else {
        return Ok(());
    };
    let mut tx = connection
        .begin()
        .await
        .map_err(|err| sql_error(&err, "start a transaction"))?;
    let grantee_sql = scope.grantee.sql();
    for target in targets(&mut tx, &scope, grantee).await? {
        let object = format!("{} {}", scope.kind.keyword(), target.sql_name);
        // Back to PostgreSQL's default, not to nothing: deleting a grant that took `CONNECT` away from
        // `PUBLIC` gives it back.
        let restored = target.default_privileges(scope.kind);
        let statements = Statements {
            prefix: "",
            object: &object,
            grantee: &grantee_sql,
        }
        .reconcile(&target.held, &restored, false);
        acl::run(&mut tx, statements, &object).await?;
    }
    tx.commit()
        .await
        .map_err(|err| sql_error(&err, "commit the privileges"))
}

impl ResourceHandler<PgConfig> for GrantHandler {
    type Properties = GrantProperties;
    type Identifiers = GrantIdentifiers;

    fn resource_type(&self) -> &str {
        GRANT_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<PgConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        preview_with_identifiers(
            &input,
            &[
                required("database"),
                required("role"),
                required("objectType"),
                optional("schema"),
                optional("objects"),
            ],
            &[],
            |identifiers| {
                let identifiers: GrantIdentifiers = cairn_extension_sdk::from_json(
                    serde_json::Value::Object(identifiers.clone()),
                    "/properties",
                    codes::INVALID_PROPERTIES,
                )?;
                let mut validator = Validator::new();
                scope(&identifiers, "/properties", &mut validator);
                validator.finish()
            },
        )
    }

    async fn create_or_update(
        &self,
        request: Apply<PgConfig, GrantProperties>,
    ) -> Result<Applied<GrantIdentifiers, GrantProperties>, ExtensionError> {
        let properties = apply(&request.config, &request.properties).await?;
        Ok(Applied::Resource(ResourceState::new(
            GrantIdentifiers::of(&properties),
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<PgConfig, GrantIdentifiers>,
    ) -> Result<Option<ResourceState<GrantIdentifiers, GrantProperties>>, ExtensionError> {
        Ok(read(&request.config, &request.identifiers)
            .await?
            .map(|properties| ResourceState::new(request.identifiers, properties)))
    }

    async fn delete(
        &self,
        request: Lookup<PgConfig, GrantIdentifiers>,
    ) -> Result<Deleted<GrantIdentifiers, GrantProperties>, ExtensionError> {
        delete(&request.config, &request.identifiers).await?;
        Ok(Deleted::Gone)
    }
}

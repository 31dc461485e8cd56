//! `PostgreSql/defaultPrivileges`: the exact set of privileges a role (or `PUBLIC`) receives on objects
//! created later, by `forRole` (default: the config's user), in one schema or everywhere in a database
//! (`ALTER DEFAULT PRIVILEGES`, read back from `pg_default_acl`).
//!
//! Identified by `{ database, role, forRole?, schema?, objectType }` with `objectType` one of `table`,
//! `sequence`, `function`, `type`, `schema` (the last only database-wide). Missing privileges are added,
//! undeclared ones removed; deleting the resource removes them all. Without `schema` the set replaces
//! PostgreSQL's built-in defaults (e.g. `PUBLIC` may execute new functions); within a schema it only adds
//! to the database-wide set, as in PostgreSQL.

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourceState, Validator, codes,
};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection};

use crate::acl::{self, Grantee, Held, ObjectKind, Statements};
use crate::config::PgConfig;
use crate::connection::{database_connection, existing_database_connection};
use crate::error::{pg_codes, sql_error};
use crate::preview::{optional, preview_with_identifiers, required};
use crate::sql::{check_name, ident};

/// The resource type.
pub const DEFAULT_PRIVILEGES_TYPE: &str = "PostgreSql/defaultPrivileges";

/// Default privileges' desired (input) or actual (output) properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPrivilegesProperties {
    /// The database (identifier).
    pub database: String,
    /// The grantee role, or `PUBLIC` (identifier).
    pub role: String,
    /// Whose new objects get the privileges; default: the config's user (identifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_role: Option<String>,
    /// Only objects created in this schema (identifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// `table`, `sequence`, `function`, `type` or `schema` (identifier).
    pub object_type: String,
    /// The exact privileges (`ALL` expands); read back in PostgreSQL's order.
    #[serde(default)]
    pub privileges: Vec<String>,
    /// Whether the role may grant them on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_grant_option: Option<bool>,
}

/// Default privileges' identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPrivilegesIdentifiers {
    /// The database.
    pub database: String,
    /// The grantee.
    pub role: String,
    /// The creating role, when not the config's user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_role: Option<String>,
    /// The schema, when limited to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The kind of object.
    pub object_type: String,
}

impl DefaultPrivilegesIdentifiers {
    fn of(properties: &DefaultPrivilegesProperties) -> DefaultPrivilegesIdentifiers {
        DefaultPrivilegesIdentifiers {
            database: properties.database.clone(),
            role: properties.role.clone(),
            for_role: properties.for_role.clone(),
            schema: properties.schema.clone(),
            object_type: properties.object_type.clone(),
        }
    }
}

/// The handler of [`DEFAULT_PRIVILEGES_TYPE`].
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultPrivilegesHandler;

struct Scope<'a> {
    database: &'a str,
    grantee: Grantee,
    for_role: &'a str,
    schema: Option<&'a str>,
    kind: ObjectKind,
}

fn scope<'a>(
    identifiers: &'a DefaultPrivilegesIdentifiers,
    config_user: &'a str,
    base: &str,
    validator: &mut Validator,
) -> Option<Scope<'a>> {
    validator.absorb(check_name(
        &identifiers.database,
        &format!("{base}/database"),
    ));
    let grantee = validator.absorb(Grantee::parse(&identifiers.role, &format!("{base}/role")));
    if let Some(for_role) = &identifiers.for_role {
        validator.absorb(check_name(for_role, &format!("{base}/forRole")));
    }
    if let Some(schema) = &identifiers.schema {
        validator.absorb(check_name(schema, &format!("{base}/schema")));
    }
    let kind =
        ObjectKind::parse(&identifiers.object_type).filter(|kind| *kind != ObjectKind::Database);
    validator.check(
        kind.is_some(),
        codes::INVALID_PROPERTIES,
        format!("{base}/objectType"),
        "'objectType' must be one of table, sequence, function, type, schema.",
    );
    validator.check(
        !(kind == Some(ObjectKind::Schema) && identifiers.schema.is_some()),
        codes::INVALID_PROPERTIES,
        format!("{base}/schema"),
        "Default privileges on schemas are database-wide; leave 'schema' out.",
    );
    Some(Scope {
        database: &identifiers.database,
        grantee: grantee?,
        for_role: identifiers.for_role.as_deref().unwrap_or(config_user),
        schema: identifiers.schema.as_deref(),
        kind: kind?,
    })
}

/// `pg_default_acl.defaclobjtype` of a kind.
fn defacl_code(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Table => "r",
        ObjectKind::Sequence => "S",
        ObjectKind::Function => "f",
        ObjectKind::Type => "T",
        ObjectKind::Schema | ObjectKind::Database => "n",
    }
}

/// The OIDs the scope refers to: the creating role's and the schema's ("0" database-wide), as text.
async fn oids(
    connection: &mut PgConnection,
    scope: &Scope<'_>,
) -> Result<Result<(String, String), ExtensionError>, ExtensionError> {
    let for_role: Option<String> =
        sqlx::query_scalar("SELECT oid::text FROM pg_roles WHERE rolname = $1")
            .bind(scope.for_role)
            .fetch_optional(&mut *connection)
            .await
            .map_err(|err| sql_error(&err, "look the role up"))?;
    let Some(for_role) = for_role else {
        return Ok(Err(ExtensionError::conflict(
            pg_codes::UNDEFINED_OBJECT,
            format!(
                "The role {} does not exist; create it first.",
                ident(scope.for_role)
            ),
        )
        .with_target("/properties/forRole")));
    };
    let namespace = match scope.schema {
        None => "0".to_owned(),
        Some(schema) => {
            let oid: Option<String> =
                sqlx::query_scalar("SELECT oid::text FROM pg_namespace WHERE nspname = $1")
                    .bind(schema)
                    .fetch_optional(&mut *connection)
                    .await
                    .map_err(|err| sql_error(&err, "look the schema up"))?;
            let Some(oid) = oid else {
                return Ok(Err(ExtensionError::conflict(
                    pg_codes::UNDEFINED_OBJECT,
                    format!(
                        "The schema {} does not exist in the database {}; create it first.",
                        ident(schema),
                        ident(scope.database)
                    ),
                )
                .with_target("/properties/schema")));
            };
            oid
        }
    };
    Ok(Ok((for_role, namespace)))
}

async fn held(
    connection: &mut PgConnection,
    scope: &Scope<'_>,
    grantee: i64,
    (for_role, namespace): &(String, String),
) -> Result<Held, ExtensionError> {
    acl::held(
        connection,
        "SELECT coalesce((SELECT defaclacl FROM pg_default_acl WHERE defaclrole = $2::text::oid \
           AND defaclnamespace = $3::text::oid AND defaclobjtype = $4::text::\"char\"), \
           CASE WHEN $3::text = '0' THEN acldefault($5::text::\"char\", $2::text::oid) \
           ELSE NULL END)",
        &[
            for_role,
            namespace,
            defacl_code(scope.kind),
            scope.kind.acldefault_code(),
        ],
        grantee,
        scope.kind,
    )
    .await
}

/// What deleting leaves the grantee: nothing within a schema; database-wide, PostgreSQL's built-in
/// defaults (the creator's own privileges, `EXECUTE`/`USAGE` for `PUBLIC` on functions/types).
async fn restored_on_delete(
    connection: &mut PgConnection,
    scope: &Scope<'_>,
    grantee: i64,
    (for_role, _): &(String, String),
) -> Result<Held, ExtensionError> {
    if scope.schema.is_some() {
        return Ok(Held::new());
    }
    acl::held(
        connection,
        "SELECT acldefault($2::text::\"char\", $3::text::oid)",
        &[scope.kind.acldefault_code(), for_role],
        grantee,
        scope.kind,
    )
    .await
}

fn statements_prefix(scope: &Scope<'_>) -> String {
    let mut prefix = format!(
        "ALTER DEFAULT PRIVILEGES FOR ROLE {}",
        ident(scope.for_role)
    );
    if let Some(schema) = scope.schema {
        prefix.push_str(&format!(" IN SCHEMA {}", ident(schema)));
    }
    prefix.push(' ');
    prefix
}

fn properties_of(
    identifiers: &DefaultPrivilegesIdentifiers,
    kind: ObjectKind,
    held: &Held,
) -> DefaultPrivilegesProperties {
    let (privileges, with_grant_option) = acl::common(kind, std::slice::from_ref(held));
    DefaultPrivilegesProperties {
        database: identifiers.database.clone(),
        role: identifiers.role.clone(),
        for_role: identifiers.for_role.clone(),
        schema: identifiers.schema.clone(),
        object_type: identifiers.object_type.clone(),
        privileges,
        with_grant_option: Some(with_grant_option),
    }
}

/// Runs the statements making the scope's privileges exactly `desired`; returns what is held after.
async fn reconcile(
    connection: &mut PgConnection,
    scope: &Scope<'_>,
    grantee: i64,
    oids: &(String, String),
    desired: &[&str],
    with_grant_option: bool,
) -> Result<Held, ExtensionError> {
    let mut tx = connection
        .begin()
        .await
        .map_err(|err| sql_error(&err, "start a transaction"))?;
    let current = held(&mut tx, scope, grantee, oids).await?;
    let prefix = statements_prefix(scope);
    let grantee_sql = scope.grantee.sql();
    let statements = Statements {
        prefix: &prefix,
        object: scope.kind.plural(),
        grantee: &grantee_sql,
    }
    .reconcile(&current, desired, with_grant_option);
    acl::run(
        &mut tx,
        statements,
        &format!("new {}", scope.kind.plural().to_ascii_lowercase()),
    )
    .await?;
    let after = held(&mut tx, scope, grantee, oids).await?;
    tx.commit()
        .await
        .map_err(|err| sql_error(&err, "commit the default privileges"))?;
    Ok(after)
}

async fn apply(
    config: &PgConfig,
    desired: &DefaultPrivilegesProperties,
) -> Result<DefaultPrivilegesProperties, ExtensionError> {
    let identifiers = DefaultPrivilegesIdentifiers::of(desired);
    let mut validator = Validator::new();
    let scope = scope(
        &identifiers,
        config.username(),
        "/properties",
        &mut validator,
    );
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
            "The default privileges could not be validated.",
        ));
    };
    let mut connection = existing_database_connection(config, scope.database).await?;
    let Some(grantee) = scope.grantee.oid(&mut connection).await? else {
        return Err(ExtensionError::conflict(
            pg_codes::UNDEFINED_OBJECT,
            format!(
                "The role {} does not exist; create it first.",
                scope.grantee.sql()
            ),
        )
        .with_target("/properties/role"));
    };
    let oids = oids(&mut connection, &scope).await??;
    let after = reconcile(
        &mut connection,
        &scope,
        grantee,
        &oids,
        &privileges,
        desired.with_grant_option.unwrap_or(false),
    )
    .await?;
    Ok(properties_of(&identifiers, scope.kind, &after))
}

/// Looks the scope up: `None` when its database, roles or schema are gone.
async fn lookup<'a>(
    config: &'a PgConfig,
    identifiers: &'a DefaultPrivilegesIdentifiers,
) -> Result<
    Option<(
        sqlx::pool::PoolConnection<sqlx::Postgres>,
        Scope<'a>,
        i64,
        (String, String),
    )>,
    ExtensionError,
> {
    let mut validator = Validator::new();
    let scope = scope(
        identifiers,
        config.username(),
        "/identifiers",
        &mut validator,
    );
    validator.finish()?;
    let Some(scope) = scope else {
        return Err(ExtensionError::internal(
            "The default privileges could not be validated.",
        ));
    };
    let Some(mut connection) = database_connection(config, scope.database).await? else {
        return Ok(None);
    };
    let Some(grantee) = scope.grantee.oid(&mut connection).await? else {
        return Ok(None);
    };
    let Ok(oids) = oids(&mut connection, &scope).await? else {
        return Ok(None);
    };
    Ok(Some((connection, scope, grantee, oids)))
}

impl ResourceHandler<PgConfig> for DefaultPrivilegesHandler {
    type Properties = DefaultPrivilegesProperties;
    type Identifiers = DefaultPrivilegesIdentifiers;

    fn resource_type(&self) -> &str {
        DEFAULT_PRIVILEGES_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<PgConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        let config_user = input
            .config
            .as_ref()
            .map(|config| config.username().to_owned())
            .unwrap_or_default();
        preview_with_identifiers(
            &input,
            &[
                required("database"),
                required("role"),
                optional("forRole"),
                optional("schema"),
                required("objectType"),
            ],
            &[],
            |identifiers| {
                let identifiers: DefaultPrivilegesIdentifiers = cairn_extension_sdk::from_json(
                    serde_json::Value::Object(identifiers.clone()),
                    "/properties",
                    codes::INVALID_PROPERTIES,
                )?;
                let mut validator = Validator::new();
                scope(&identifiers, &config_user, "/properties", &mut validator);
                validator.finish()
            },
        )
    }

    async fn create_or_update(
        &self,
        request: Apply<PgConfig, DefaultPrivilegesProperties>,
    ) -> Result<Applied<DefaultPrivilegesIdentifiers, DefaultPrivilegesProperties>, ExtensionError>
    {
        let properties = apply(&request.config, &request.properties).await?;
        Ok(Applied::Resource(ResourceState::new(
            DefaultPrivilegesIdentifiers::of(&properties),
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<PgConfig, DefaultPrivilegesIdentifiers>,
    ) -> Result<
        Option<ResourceState<DefaultPrivilegesIdentifiers, DefaultPrivilegesProperties>>,
        ExtensionError,
    > {
        let Some((mut connection, scope, grantee, oids)) =
            lookup(&request.config, &request.identifiers).await?
        else {
            return Ok(None);
        };
        let held = held(&mut connection, &scope, grantee, &oids).await?;
        // Default privileges that are as their delete leaves them (none within a schema, PostgreSQL's built-in
        // defaults database-wide) read as absent: before the first apply and after the delete, nothing is set —
        // so a deployment stack does not take them for existing ones to adopt, and drift detection sees them
        // reset by hand as gone.
        if held == restored_on_delete(&mut connection, &scope, grantee, &oids).await? {
            return Ok(None);
        }
        let properties = properties_of(&request.identifiers, scope.kind, &held);
        Ok(Some(ResourceState::new(
            request.identifiers.clone(),
            properties,
        )))
    }

    async fn delete(
        &self,
        request: Lookup<PgConfig, DefaultPrivilegesIdentifiers>,
    ) -> Result<Deleted<DefaultPrivilegesIdentifiers, DefaultPrivilegesProperties>, ExtensionError>
    {
        if let Some((mut connection, scope, grantee, oids)) =
            lookup(&request.config, &request.identifiers).await?
        {
            let restored = restored_on_delete(&mut connection, &scope, grantee, &oids).await?;
            let restored: Vec<&str> = restored.keys().map(String::as_str).collect();
            reconcile(&mut connection, &scope, grantee, &oids, &restored, false).await?;
        }
        Ok(Deleted::Gone)
    }
}

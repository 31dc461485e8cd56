//! `PostgreSql/roles`: login and group roles with their attributes, memberships and a write-only password.
//!
//! Unset attributes mean PostgreSQL's defaults (`login: false`, `inherit: true`, `connectionLimit: -1`,
//! no `validUntil`), so removing one from a template resets it. `memberOf` is the exact set of roles this
//! role is a member of when given (missing ones granted, others revoked) and left alone when absent.
//! `password` is sent as a SCRAM-SHA-256 verifier and never returned; an unchanged password is detected
//! from the stored verifier, so re-applying changes nothing. Deleting a role that still owns objects or
//! holds privileges fails with 409 naming them, unless `dropOwned: true` was applied, which drops what it
//! owns in every database first.

use std::collections::BTreeSet;

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourceState, Validator, codes,
};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection, Row};

use crate::config::PgConfig;
use crate::connection::Pools;
use crate::error::{sql_error, with_dependents_hint};
use crate::marks::{self, Owner};
use crate::preview::preview_by_name;
use crate::scram;
use crate::sql::{check_name, check_text, execute, ident, literal};

/// The resource type.
pub const ROLE_TYPE: &str = "PostgreSql/roles";

const DROP_OWNED_MARK: &str = "drop_owned";

/// A role's desired (input) or actual (output) properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleProperties {
    /// The role name (identifier).
    pub name: String,
    /// `LOGIN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<bool>,
    /// `SUPERUSER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superuser: Option<bool>,
    /// `CREATEDB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_db: Option<bool>,
    /// `CREATEROLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_role: Option<bool>,
    /// `INHERIT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherit: Option<bool>,
    /// `REPLICATION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<bool>,
    /// `CONNECTION LIMIT` (-1: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i32>,
    /// `VALID UNTIL`, read back as `YYYY-MM-DDTHH:MM:SSZ` (UTC); absent (or `infinity`) never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<String>,
    /// The roles this role is a member of (read back sorted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_of: Option<Vec<String>>,
    /// Write-only: never serialised.
    #[serde(default, skip_serializing)]
    pub password: Option<String>,
    /// On delete, drop what the role owns (and revoke its privileges) in every database first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_owned: Option<bool>,
}

/// A role's identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleIdentifiers {
    /// The role name.
    pub name: String,
}

/// The handler of [`ROLE_TYPE`].
#[derive(Debug, Default, Clone, Copy)]
pub struct RoleHandler;

/// The attributes as they are (or should be) in `pg_roles`.
#[derive(Debug, Clone, PartialEq)]
struct Attributes {
    login: bool,
    superuser: bool,
    create_db: bool,
    create_role: bool,
    inherit: bool,
    replication: bool,
    connection_limit: i32,
}

impl Attributes {
    fn desired(properties: &RoleProperties) -> Attributes {
        Attributes {
            login: properties.login.unwrap_or(false),
            superuser: properties.superuser.unwrap_or(false),
            create_db: properties.create_db.unwrap_or(false),
            create_role: properties.create_role.unwrap_or(false),
            inherit: properties.inherit.unwrap_or(true),
            replication: properties.replication.unwrap_or(false),
            connection_limit: properties.connection_limit.unwrap_or(-1),
        }
    }

    /// The `CREATE/ALTER ROLE ... WITH` options that turn `current` (or nothing) into `self`.
    fn options(&self, current: Option<&Attributes>) -> Vec<String> {
        let flag = |on: bool, name: &str| {
            if on {
                name.to_owned()
            } else {
                format!("NO{name}")
            }
        };
        let mut options = Vec::new();
        let mut add = |desired: bool, current: Option<bool>, name: &str| {
            if current != Some(desired) {
                options.push(flag(desired, name));
            }
        };
        add(self.login, current.map(|c| c.login), "LOGIN");
        add(self.superuser, current.map(|c| c.superuser), "SUPERUSER");
        add(self.create_db, current.map(|c| c.create_db), "CREATEDB");
        add(
            self.create_role,
            current.map(|c| c.create_role),
            "CREATEROLE",
        );
        add(self.inherit, current.map(|c| c.inherit), "INHERIT");
        add(
            self.replication,
            current.map(|c| c.replication),
            "REPLICATION",
        );
        if current.map(|c| c.connection_limit) != Some(self.connection_limit) {
            options.push(format!("CONNECTION LIMIT {}", self.connection_limit));
        }
        options
    }
}

/// A role as read from the catalog.
struct Current {
    attributes: Attributes,
    valid_until: Option<String>,
    member_of: Vec<String>,
    marks: Vec<(String, String)>,
}

/// NULL and `infinity` both mean "never expires" (PostgreSQL cannot set NULL back): read as absent.
const VALID_UNTIL_TEXT: &str = "CASE WHEN rolvaliduntil = 'infinity' THEN NULL \
     ELSE to_char(rolvaliduntil AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') END";

async fn read(
    connection: &mut PgConnection,
    name: &str,
) -> Result<Option<Current>, ExtensionError> {
    let query = format!(
        "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolinherit, rolreplication, \
         rolconnlimit, {VALID_UNTIL_TEXT} AS valid_until, \
         ARRAY(SELECT b.rolname::text FROM pg_auth_members m JOIN pg_roles b ON b.oid = m.roleid \
               WHERE m.member = r.oid ORDER BY 1) AS member_of \
         FROM pg_roles r WHERE rolname = $1"
    );
    let action = format!("read the role {}", ident(name));
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(query))
        .bind(name)
        .fetch_optional(&mut *connection)
        .await
        .map_err(|err| sql_error(&err, &action))?
    else {
        return Ok(None);
    };
    let get_error = |err: sqlx::Error| sql_error(&err, &action);
    let attributes = Attributes {
        login: row.try_get(0).map_err(get_error)?,
        superuser: row.try_get(1).map_err(get_error)?,
        create_db: row.try_get(2).map_err(get_error)?,
        create_role: row.try_get(3).map_err(get_error)?,
        inherit: row.try_get(4).map_err(get_error)?,
        replication: row.try_get(5).map_err(get_error)?,
        connection_limit: row.try_get(6).map_err(get_error)?,
    };
    let valid_until: Option<String> = row.try_get(7).map_err(get_error)?;
    let member_of: Vec<String> = row.try_get(8).map_err(get_error)?;
    let marks = marks::read(connection, Owner::Role(name)).await?;
    Ok(Some(Current {
        attributes,
        valid_until,
        member_of,
        marks,
    }))
}

fn properties_of(name: &str, current: Current) -> RoleProperties {
    let a = current.attributes;
    RoleProperties {
        name: name.to_owned(),
        login: Some(a.login),
        superuser: Some(a.superuser),
        create_db: Some(a.create_db),
        create_role: Some(a.create_role),
        inherit: Some(a.inherit),
        replication: Some(a.replication),
        connection_limit: Some(a.connection_limit),
        valid_until: current.valid_until,
        member_of: Some(current.member_of),
        password: None,
        drop_owned: Some(marks::value(&current.marks, DROP_OWNED_MARK) == Some("true")),
    }
}

fn validate(properties: &RoleProperties) -> Result<(), ExtensionError> {
    let mut validator = Validator::new();
    validator.absorb(check_name(&properties.name, "/properties/name"));
    if let Some(limit) = properties.connection_limit {
        validator.check(
            limit >= -1,
            codes::INVALID_PROPERTIES,
            "/properties/connectionLimit",
            "'connectionLimit' must be -1 (no limit) or more.",
        );
    }
    if let Some(valid_until) = &properties.valid_until {
        validator.absorb(check_text(valid_until, "/properties/validUntil"));
    }
    if let Some(password) = &properties.password {
        validator.absorb(check_text(password, "/properties/password"));
    }
    for (index, member) in properties.member_of.iter().flatten().enumerate() {
        validator.absorb(check_name(member, &format!("/properties/memberOf/{index}")));
    }
    validator.finish()
}

/// Whether `desired` (any input PostgreSQL accepts) denotes the same instant as `current`.
async fn same_valid_until(
    connection: &mut PgConnection,
    desired: Option<&str>,
    current: Option<&str>,
) -> Result<bool, ExtensionError> {
    match (desired, current) {
        (None, None) => Ok(true),
        (Some(desired), Some(current)) => sqlx::query_scalar::<_, bool>(
            "SELECT $1::timestamptz IS NOT DISTINCT FROM $2::timestamptz",
        )
        .bind(desired)
        .bind(current)
        .fetch_one(connection)
        .await
        .map_err(|err| sql_error(&err, "compare 'validUntil'")),
        _ => Ok(false),
    }
}

/// Whether the role's stored password already is `password`; `false` when it cannot be read (the
/// config's user is not a superuser), so the password is set again.
async fn password_unchanged(connection: &mut PgConnection, name: &str, password: &str) -> bool {
    let stored: Result<Option<Option<String>>, _> =
        sqlx::query_scalar("SELECT rolpassword FROM pg_authid WHERE rolname = $1")
            .bind(name)
            .fetch_optional(connection)
            .await;
    match stored {
        Ok(Some(Some(stored))) => scram::matches(&stored, password),
        _ => false,
    }
}

async fn apply(
    config: &PgConfig,
    desired: &RoleProperties,
) -> Result<RoleProperties, ExtensionError> {
    validate(desired)?;
    let name = desired.name.as_str();
    let role = ident(name);
    let pool = Pools::global().maintenance(config);
    let mut tx = pool
        .begin()
        .await
        .map_err(|err| sql_error(&err, "connect to the server"))?;
    let attributes = Attributes::desired(desired);
    let current = read(&mut tx, name).await?;
    let mut options = attributes.options(current.as_ref().map(|c| &c.attributes));
    let desired_valid_until = desired
        .valid_until
        .as_deref()
        .filter(|until| !until.trim().eq_ignore_ascii_case("infinity"));
    let valid_until_same = same_valid_until(
        &mut tx,
        desired_valid_until,
        current.as_ref().and_then(|c| c.valid_until.as_deref()),
    )
    .await?;
    if !valid_until_same {
        options.push(format!(
            "VALID UNTIL {}",
            literal(desired_valid_until.unwrap_or("infinity"))
        ));
    }
    if let Some(password) = &desired.password
        && (current.is_none() || !password_unchanged(&mut tx, name, password).await)
    {
        options.push(format!("PASSWORD {}", literal(&scram::verifier(password))));
    }
    match &current {
        None => {
            execute(
                &mut *tx,
                format!("CREATE ROLE {role} WITH {}", options.join(" ")),
                &format!("create the role {role}"),
            )
            .await?
        }
        Some(_) if options.is_empty() => {}
        Some(_) => {
            execute(
                &mut *tx,
                format!("ALTER ROLE {role} WITH {}", options.join(" ")),
                &format!("update the role {role}"),
            )
            .await?
        }
    }
    if let Some(member_of) = &desired.member_of {
        let wanted: BTreeSet<&str> = member_of.iter().map(String::as_str).collect();
        let had: BTreeSet<&str> = current
            .as_ref()
            .map(|c| c.member_of.iter().map(String::as_str).collect())
            .unwrap_or_default();
        for group in wanted.difference(&had) {
            execute(
                &mut *tx,
                format!("GRANT {} TO {role}", ident(group)),
                &format!("add the role {role} to {}", ident(group)),
            )
            .await?;
        }
        for group in had.difference(&wanted) {
            execute(
                &mut *tx,
                format!("REVOKE {} FROM {role}", ident(group)),
                &format!("remove the role {role} from {}", ident(group)),
            )
            .await?;
        }
    }
    let no_marks = Vec::new();
    let current_marks = current.as_ref().map_or(&no_marks, |c| &c.marks);
    let drop_owned = desired.drop_owned.unwrap_or(false).then_some("true");
    marks::write(
        &mut tx,
        Owner::Role(name),
        current_marks,
        DROP_OWNED_MARK,
        drop_owned,
    )
    .await?;
    let applied = read(&mut tx, name).await?;
    tx.commit()
        .await
        .map_err(|err| sql_error(&err, &format!("commit the changes to the role {role}")))?;
    applied
        .map(|current| properties_of(name, current))
        .ok_or_else(|| ExtensionError::internal("The role vanished while it was being applied."))
}

async fn databases_to_clean(connection: &mut PgConnection) -> Result<Vec<String>, ExtensionError> {
    sqlx::query_scalar("SELECT datname::text FROM pg_database WHERE datallowconn ORDER BY 1")
        .fetch_all(connection)
        .await
        .map_err(|err| sql_error(&err, "list the databases"))
}

async fn delete(config: &PgConfig, name: &str) -> Result<(), ExtensionError> {
    check_name(name, "/identifiers/name")?;
    let role = ident(name);
    let pool = Pools::global().maintenance(config);
    let mut connection = pool
        .acquire()
        .await
        .map_err(|err| sql_error(&err, "connect to the server"))?;
    let Some(current) = read(&mut connection, name).await? else {
        return Ok(());
    };
    if marks::value(&current.marks, DROP_OWNED_MARK) == Some("true") {
        // One short-lived connection per database: pooled ones would keep every database open.
        for database in databases_to_clean(&mut connection).await? {
            let action = format!(
                "drop what the role {role} owns in the database {}",
                ident(&database)
            );
            let mut one = PgConnection::connect_with(&config.connect_options(&database))
                .await
                .map_err(|err| sql_error(&err, &action))?;
            let dropped = execute(&mut one, format!("DROP OWNED BY {role}"), &action).await;
            let _ = one.close().await;
            dropped?;
        }
    }
    with_dependents_hint(
        execute(
            &mut *connection,
            format!("DROP ROLE IF EXISTS {role}"),
            &format!("delete the role {role}"),
        )
        .await,
        "Delete or reassign those objects (and revoke the privileges) first, or apply \
         the role with 'dropOwned: true' to drop them with it.",
    )
}

impl ResourceHandler<PgConfig> for RoleHandler {
    type Properties = RoleProperties;
    type Identifiers = RoleIdentifiers;

    fn resource_type(&self) -> &str {
        ROLE_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<PgConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        preview_by_name(&input, &["/properties/password"])
    }

    async fn create_or_update(
        &self,
        request: Apply<PgConfig, RoleProperties>,
    ) -> Result<Applied<RoleIdentifiers, RoleProperties>, ExtensionError> {
        let properties = apply(&request.config, &request.properties).await?;
        Ok(Applied::Resource(ResourceState::new(
            RoleIdentifiers {
                name: properties.name.clone(),
            },
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<PgConfig, RoleIdentifiers>,
    ) -> Result<Option<ResourceState<RoleIdentifiers, RoleProperties>>, ExtensionError> {
        let name = request.identifiers.name.clone();
        check_name(&name, "/identifiers/name")?;
        let pool = Pools::global().maintenance(&request.config);
        let mut connection = pool
            .acquire()
            .await
            .map_err(|err| sql_error(&err, "connect to the server"))?;
        Ok(read(&mut connection, &name)
            .await?
            .map(|current| ResourceState::new(request.identifiers, properties_of(&name, current))))
    }

    async fn delete(
        &self,
        request: Lookup<PgConfig, RoleIdentifiers>,
    ) -> Result<Deleted<RoleIdentifiers, RoleProperties>, ExtensionError> {
        delete(&request.config, &request.identifiers.name).await?;
        Ok(Deleted::Gone)
    }
}

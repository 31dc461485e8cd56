//! `PostgreSql/databases`: databases with owner, encoding and locale, template, connection settings.
//!
//! `encoding`, `lcCollate`, `lcCtype` and `template` are fixed at creation: a different value later is a 409
//! (the database would have to be recreated). `template` is not in PostgreSQL's catalog, so cairn records
//! it on the database (a `cairn.template` setting) to read it back. Unset `connectionLimit`,
//! `allowConnections` and `isTemplate` mean PostgreSQL's defaults; an unset `owner` is left alone (the
//! config's user at creation). Deleting refuses while other sessions are connected (409) unless
//! `force: true` was applied (`DROP DATABASE ... WITH (FORCE)`, PostgreSQL 13+).

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourceState, Validator, codes,
};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, Row};

use crate::config::PgConfig;
use crate::connection::Pools;
use crate::error::{pg_codes, sql_error};
use crate::marks::{self, Owner};
use crate::preview::preview_by_name;
use crate::sql::{check_name, check_text, execute, ident, literal};

/// The resource type.
pub const DATABASE_TYPE: &str = "PostgreSql/databases";

const FORCE_MARK: &str = "force";
const TEMPLATE_MARK: &str = "template";

/// A database's desired (input) or actual (output) properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatabaseProperties {
    /// The database name (identifier).
    pub name: String,
    /// The owning role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Character set, e.g. `UTF8` (creation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// `LC_COLLATE` (creation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lc_collate: Option<String>,
    /// `LC_CTYPE` (creation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lc_ctype: Option<String>,
    /// The template database copied at creation (creation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// `CONNECTION LIMIT` (-1: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i32>,
    /// `ALLOW_CONNECTIONS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_connections: Option<bool>,
    /// `IS_TEMPLATE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_template: Option<bool>,
    /// On delete, disconnect other sessions (`WITH (FORCE)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// A database's identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatabaseIdentifiers {
    /// The database name.
    pub name: String,
}

/// The handler of [`DATABASE_TYPE`].
#[derive(Debug, Default, Clone, Copy)]
pub struct DatabaseHandler;

async fn read(
    connection: &mut PgConnection,
    name: &str,
) -> Result<Option<DatabaseProperties>, ExtensionError> {
    let action = format!("read the database {}", ident(name));
    let Some(row) = sqlx::query(
        "SELECT pg_get_userbyid(datdba)::text, pg_encoding_to_char(encoding)::text, datcollate::text, \
         datctype::text, datconnlimit, datallowconn, datistemplate FROM pg_database WHERE datname = $1",
    )
    .bind(name)
    .fetch_optional(&mut *connection)
    .await
    .map_err(|err| sql_error(&err, &action))?
    else {
        return Ok(None);
    };
    let get_error = |err: sqlx::Error| sql_error(&err, &action);
    let marks = marks::read(connection, Owner::Database(name)).await?;
    Ok(Some(DatabaseProperties {
        name: name.to_owned(),
        owner: Some(row.try_get(0).map_err(get_error)?),
        encoding: Some(row.try_get(1).map_err(get_error)?),
        lc_collate: Some(row.try_get(2).map_err(get_error)?),
        lc_ctype: Some(row.try_get(3).map_err(get_error)?),
        template: marks::value(&marks, TEMPLATE_MARK).map(str::to_owned),
        connection_limit: Some(row.try_get(4).map_err(get_error)?),
        allow_connections: Some(row.try_get(5).map_err(get_error)?),
        is_template: Some(row.try_get(6).map_err(get_error)?),
        force: Some(marks::value(&marks, FORCE_MARK) == Some("true")),
    }))
}

fn validate(properties: &DatabaseProperties) -> Result<(), ExtensionError> {
    let mut validator = Validator::new();
    validator.absorb(check_name(&properties.name, "/properties/name"));
    for (value, target, is_name) in [
        (&properties.owner, "/properties/owner", true),
        (&properties.template, "/properties/template", true),
        (&properties.encoding, "/properties/encoding", false),
        (&properties.lc_collate, "/properties/lcCollate", false),
        (&properties.lc_ctype, "/properties/lcCtype", false),
    ] {
        if let Some(value) = value {
            validator.absorb(if is_name {
                check_name(value, target)
            } else {
                check_text(value, target)
            });
        }
    }
    if let Some(limit) = properties.connection_limit {
        validator.check(
            limit >= -1,
            codes::INVALID_PROPERTIES,
            "/properties/connectionLimit",
            "'connectionLimit' must be -1 (no limit) or more.",
        );
    }
    validator.finish()
}

/// Refuses changes to what only creation can set.
fn check_immutable(
    desired: &DatabaseProperties,
    current: &DatabaseProperties,
) -> Result<(), ExtensionError> {
    let mut validator = Validator::new();
    let same_encoding = |a: &str, b: &str| {
        a.replace(['-', '_'], "")
            .eq_ignore_ascii_case(&b.replace(['-', '_'], ""))
    };
    for (name, wanted, actual, equal) in [
        (
            "encoding",
            &desired.encoding,
            &current.encoding,
            same_encoding as fn(&str, &str) -> bool,
        ),
        (
            "lcCollate",
            &desired.lc_collate,
            &current.lc_collate,
            |a: &str, b: &str| a == b,
        ),
        (
            "lcCtype",
            &desired.lc_ctype,
            &current.lc_ctype,
            |a: &str, b: &str| a == b,
        ),
        (
            "template",
            &desired.template,
            &current.template,
            |a: &str, b: &str| a == b,
        ),
    ] {
        if let Some(wanted) = wanted
            && !actual
                .as_deref()
                .is_some_and(|actual| equal(wanted, actual))
        {
            validator.error(
                pg_codes::IMMUTABLE_PROPERTY,
                format!("/properties/{name}"),
                format!(
                    "The database {} exists with {name} {}; it cannot be changed to {} without \
                     recreating the database.",
                    ident(&current.name),
                    actual.as_deref().map_or("(unknown)".to_owned(), literal),
                    literal(wanted)
                ),
            );
        }
    }
    validator
        .finish()
        .map_err(|err| ExtensionError::from_error(409, err.error().clone()))
}

/// PostgreSQL reports an unknown encoding as a missing object; it is bad input.
async fn check_encoding(
    connection: &mut PgConnection,
    encoding: &str,
) -> Result<(), ExtensionError> {
    let known: bool = sqlx::query_scalar("SELECT pg_char_to_encoding($1) >= 0")
        .bind(encoding)
        .fetch_one(connection)
        .await
        .map_err(|err| sql_error(&err, "check the encoding"))?;
    if known {
        return Ok(());
    }
    Err(ExtensionError::invalid(
        codes::INVALID_PROPERTIES,
        "/properties/encoding",
        format!("{} is not an encoding PostgreSQL knows.", literal(encoding)),
    ))
}

async fn apply(
    config: &PgConfig,
    desired: &DatabaseProperties,
) -> Result<DatabaseProperties, ExtensionError> {
    validate(desired)?;
    let name = desired.name.as_str();
    let database = ident(name);
    let pool = Pools::global().maintenance(config);
    let mut connection = pool
        .acquire()
        .await
        .map_err(|err| sql_error(&err, "connect to the server"))?;
    let connection_limit = desired.connection_limit.unwrap_or(-1);
    let allow_connections = desired.allow_connections.unwrap_or(true);
    let is_template = desired.is_template.unwrap_or(false);
    let current = read(&mut connection, name).await?;
    match &current {
        None => {
            if let Some(encoding) = &desired.encoding {
                check_encoding(&mut connection, encoding).await?;
            }
            // CREATE DATABASE cannot run in a transaction; the settings follow it.
            let mut options = Vec::new();
            if let Some(owner) = &desired.owner {
                options.push(format!("OWNER {}", ident(owner)));
            }
            if let Some(template) = &desired.template {
                options.push(format!("TEMPLATE {}", ident(template)));
            }
            if let Some(encoding) = &desired.encoding {
                options.push(format!("ENCODING {}", literal(encoding)));
            }
            if let Some(collate) = &desired.lc_collate {
                options.push(format!("LC_COLLATE {}", literal(collate)));
            }
            if let Some(ctype) = &desired.lc_ctype {
                options.push(format!("LC_CTYPE {}", literal(ctype)));
            }
            options.push(format!("CONNECTION LIMIT {connection_limit}"));
            options.push(format!("ALLOW_CONNECTIONS {allow_connections}"));
            options.push(format!("IS_TEMPLATE {is_template}"));
            execute(
                &mut *connection,
                format!("CREATE DATABASE {database} WITH {}", options.join(" ")),
                &format!("create the database {database}"),
            )
            .await?;
        }
        Some(current) => {
            check_immutable(desired, current)?;
            if let Some(owner) = &desired.owner
                && current.owner.as_deref() != Some(owner)
            {
                execute(
                    &mut *connection,
                    format!("ALTER DATABASE {database} OWNER TO {}", ident(owner)),
                    &format!("change the owner of the database {database}"),
                )
                .await?;
            }
            let mut options = Vec::new();
            if current.connection_limit != Some(connection_limit) {
                options.push(format!("CONNECTION LIMIT {connection_limit}"));
            }
            if current.allow_connections != Some(allow_connections) {
                options.push(format!("ALLOW_CONNECTIONS {allow_connections}"));
            }
            if current.is_template != Some(is_template) {
                options.push(format!("IS_TEMPLATE {is_template}"));
            }
            if !options.is_empty() {
                execute(
                    &mut *connection,
                    format!("ALTER DATABASE {database} WITH {}", options.join(" ")),
                    &format!("update the database {database}"),
                )
                .await?;
            }
        }
    }
    let marks = marks::read(&mut connection, Owner::Database(name)).await?;
    if current.is_none() {
        let template = desired.template.as_deref();
        marks::write(
            &mut connection,
            Owner::Database(name),
            &marks,
            TEMPLATE_MARK,
            template,
        )
        .await?;
    }
    let force = desired.force.unwrap_or(false).then_some("true");
    marks::write(
        &mut connection,
        Owner::Database(name),
        &marks,
        FORCE_MARK,
        force,
    )
    .await?;
    read(&mut connection, name).await?.ok_or_else(|| {
        ExtensionError::internal("The database vanished while it was being applied.")
    })
}

async fn delete(config: &PgConfig, name: &str) -> Result<(), ExtensionError> {
    check_name(name, "/identifiers/name")?;
    let database = ident(name);
    let pool = Pools::global().maintenance(config);
    let mut connection = pool
        .acquire()
        .await
        .map_err(|err| sql_error(&err, "connect to the server"))?;
    let Some(current) = read(&mut connection, name).await? else {
        return Ok(());
    };
    // This process's own idle connections (schemas, grants) must not hold the database open.
    Pools::global().close_database(config, name).await;
    if current.is_template == Some(true) {
        execute(
            &mut *connection,
            format!("ALTER DATABASE {database} WITH IS_TEMPLATE false"),
            &format!("unmark the template database {database}"),
        )
        .await?;
    }
    let force = current.force == Some(true);
    let statement = if force {
        format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    } else {
        format!("DROP DATABASE IF EXISTS {database}")
    };
    match execute(
        &mut *connection,
        statement,
        &format!("delete the database {database}"),
    )
    .await
    {
        Err(err) if err.code() == pg_codes::OBJECT_IN_USE => Err(ExtensionError::conflict(
            pg_codes::OBJECT_IN_USE,
            format!(
                "{} Close those sessions first, or apply the database with 'force: true' to \
                 disconnect them on delete.",
                err.error().message
            ),
        )
        .with_target("/identifiers/name")),
        other => other,
    }
}

impl ResourceHandler<PgConfig> for DatabaseHandler {
    type Properties = DatabaseProperties;
    type Identifiers = DatabaseIdentifiers;

    fn resource_type(&self) -> &str {
        DATABASE_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<PgConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        preview_by_name(&input, &[])
    }

    async fn create_or_update(
        &self,
        request: Apply<PgConfig, DatabaseProperties>,
    ) -> Result<Applied<DatabaseIdentifiers, DatabaseProperties>, ExtensionError> {
        let properties = apply(&request.config, &request.properties).await?;
        Ok(Applied::Resource(ResourceState::new(
            DatabaseIdentifiers {
                name: properties.name.clone(),
            },
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<PgConfig, DatabaseIdentifiers>,
    ) -> Result<Option<ResourceState<DatabaseIdentifiers, DatabaseProperties>>, ExtensionError>
    {
        check_name(&request.identifiers.name, "/identifiers/name")?;
        let pool = Pools::global().maintenance(&request.config);
        let mut connection = pool
            .acquire()
            .await
            .map_err(|err| sql_error(&err, "connect to the server"))?;
        Ok(read(&mut connection, &request.identifiers.name)
            .await?
            .map(|properties| ResourceState::new(request.identifiers, properties)))
    }

    async fn delete(
        &self,
        request: Lookup<PgConfig, DatabaseIdentifiers>,
    ) -> Result<Deleted<DatabaseIdentifiers, DatabaseProperties>, ExtensionError> {
        delete(&request.config, &request.identifiers.name).await?;
        Ok(Deleted::Gone)
    }
}

//! `PostgreSql/extensions`: extensions installed in a database (e.g. `pgcrypto`, `hstore` from contrib),
//! with their schema and version.
//!
//! Unset `schema` and `version` are left alone (PostgreSQL's choice at creation: the first schema of the
//! search path, the default version) and read back as they are. A later `version` runs `ALTER EXTENSION
//! ... UPDATE TO`, a later `schema` `SET SCHEMA` (for relocatable extensions). An extension the server does
//! not ship is a 400 naming it. Deleting an extension other objects depend on (e.g. a column of type
//! `hstore`) is refused with 409 `DependentObjectsStillExist`.

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourceState, Validator, codes,
};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::config::PgConfig;
use crate::connection::{database_connection, existing_database_connection};
use crate::error::{sql_error, with_dependents_hint};
use crate::preview::{name_identifier, preview_with_identifiers, required};
use crate::sql::{check_name, check_text, execute, ident, literal};

/// The resource type.
pub const EXTENSION_TYPE: &str = "PostgreSql/extensions";

/// An extension's desired (input) or actual (output) properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionProperties {
    /// The database the extension is installed in (identifier).
    pub database: String,
    /// The extension name (identifier).
    pub name: String,
    /// The schema holding its objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The installed version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An extension's identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionIdentifiers {
    /// The database the extension is installed in.
    pub database: String,
    /// The extension name.
    pub name: String,
}

/// The handler of [`EXTENSION_TYPE`].
#[derive(Debug, Default, Clone, Copy)]
pub struct ExtensionHandler;

/// `(schema, version)` of the installed extension, or `None`.
async fn read(
    connection: &mut PgConnection,
    name: &str,
) -> Result<Option<(String, String)>, ExtensionError> {
    sqlx::query_as(
        "SELECT n.nspname::text, e.extversion FROM pg_extension e \
         JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = $1",
    )
    .bind(name)
    .fetch_optional(connection)
    .await
    .map_err(|err| sql_error(&err, &format!("read the extension {}", ident(name))))
}

fn check_identifiers(database: &str, name: &str, base: &str) -> Result<(), ExtensionError> {
    let mut validator = Validator::new();
    validator.absorb(check_name(database, &format!("{base}/database")));
    validator.absorb(check_name(name, &format!("{base}/name")));
    validator.finish()
}

/// Refuses extensions (and versions) the server does not ship, naming what it does.
async fn check_available(
    connection: &mut PgConnection,
    desired: &ExtensionProperties,
) -> Result<(), ExtensionError> {
    let versions: Vec<String> = sqlx::query_scalar(
        "SELECT version FROM pg_available_extension_versions WHERE name = $1 ORDER BY 1",
    )
    .bind(&desired.name)
    .fetch_all(&mut *connection)
    .await
    .map_err(|err| sql_error(&err, "list the available extensions"))?;
    if versions.is_empty() {
        return Err(ExtensionError::invalid(
            codes::INVALID_PROPERTIES,
            "/properties/name",
            format!(
                "The extension {} is not available on this server; install its package first \
                 (contrib extensions such as pgcrypto and hstore come with Debian's postgresql or \
                 postgresql-contrib).",
                ident(&desired.name)
            ),
        ));
    }
    if let Some(version) = &desired.version
        && !versions.contains(version)
    {
        return Err(ExtensionError::invalid(
            codes::INVALID_PROPERTIES,
            "/properties/version",
            format!(
                "The extension {} has no version {} on this server (available: {}).",
                ident(&desired.name),
                literal(version),
                versions.join(", ")
            ),
        ));
    }
    Ok(())
}

async fn apply(
    config: &PgConfig,
    desired: &ExtensionProperties,
) -> Result<ExtensionProperties, ExtensionError> {
    let mut validator = Validator::new();
    validator.absorb(check_identifiers(
        &desired.database,
        &desired.name,
        "/properties",
    ));
    if let Some(schema) = &desired.schema {
        validator.absorb(check_name(schema, "/properties/schema"));
    }
    if let Some(version) = &desired.version {
        validator.absorb(check_text(version, "/properties/version"));
    }
    validator.finish()?;
    let extension = ident(&desired.name);
    let mut connection = existing_database_connection(config, &desired.database).await?;
    match read(&mut connection, &desired.name).await? {
        None => {
            check_available(&mut connection, desired).await?;
            let mut statement = format!("CREATE EXTENSION {extension}");
            if let Some(schema) = &desired.schema {
                statement.push_str(&format!(" SCHEMA {}", ident(schema)));
            }
            if let Some(version) = &desired.version {
                statement.push_str(&format!(" VERSION {}", literal(version)));
            }
            execute(
                &mut *connection,
                statement,
                &format!("create the extension {extension}"),
            )
            .await?;
        }
        Some((schema, version)) => {
            if let Some(wanted) = desired
                .version
                .as_deref()
                .filter(|wanted| *wanted != version)
            {
                check_available(&mut connection, desired).await?;
                execute(
                    &mut *connection,
                    format!("ALTER EXTENSION {extension} UPDATE TO {}", literal(wanted)),
                    &format!("update the extension {extension}"),
                )
                .await?;
            }
            if let Some(wanted) = desired.schema.as_deref().filter(|wanted| *wanted != schema) {
                execute(
                    &mut *connection,
                    format!("ALTER EXTENSION {extension} SET SCHEMA {}", ident(wanted)),
                    &format!("move the extension {extension}"),
                )
                .await?;
            }
        }
    }
    let (schema, version) = read(&mut connection, &desired.name).await?.ok_or_else(|| {
        ExtensionError::internal("The extension vanished while it was being applied.")
    })?;
    Ok(ExtensionProperties {
        database: desired.database.clone(),
        name: desired.name.clone(),
        schema: Some(schema),
        version: Some(version),
    })
}

async fn delete(
    config: &PgConfig,
    identifiers: &ExtensionIdentifiers,
) -> Result<(), ExtensionError> {
    check_identifiers(&identifiers.database, &identifiers.name, "/identifiers")?;
    let Some(mut connection) = database_connection(config, &identifiers.database).await? else {
        return Ok(());
    };
    let extension = ident(&identifiers.name);
    with_dependents_hint(
        execute(
            &mut *connection,
            format!("DROP EXTENSION IF EXISTS {extension}"),
            &format!("delete the extension {extension}"),
        )
        .await,
        "Delete the objects that use the extension first.",
    )
}

impl ResourceHandler<PgConfig> for ExtensionHandler {
    type Properties = ExtensionProperties;
    type Identifiers = ExtensionIdentifiers;

    fn resource_type(&self) -> &str {
        EXTENSION_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<PgConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        preview_with_identifiers(
            &input,
            &[required("database"), required("name")],
            &[],
            |identifiers| {
                name_identifier(identifiers, "database", true)?;
                name_identifier(identifiers, "name", true).map(|_| ())
            },
        )
    }

    async fn create_or_update(
        &self,
        request: Apply<PgConfig, ExtensionProperties>,
    ) -> Result<Applied<ExtensionIdentifiers, ExtensionProperties>, ExtensionError> {
        let properties = apply(&request.config, &request.properties).await?;
        Ok(Applied::Resource(ResourceState::new(
            ExtensionIdentifiers {
                database: properties.database.clone(),
                name: properties.name.clone(),
            },
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<PgConfig, ExtensionIdentifiers>,
    ) -> Result<Option<ResourceState<ExtensionIdentifiers, ExtensionProperties>>, ExtensionError>
    {
        let identifiers = request.identifiers;
        check_identifiers(&identifiers.database, &identifiers.name, "/identifiers")?;
        let Some(mut connection) =
            database_connection(&request.config, &identifiers.database).await?
        else {
            return Ok(None);
        };
        Ok(read(&mut connection, &identifiers.name)
            .await?
            .map(|(schema, version)| {
                let properties = ExtensionProperties {
                    database: identifiers.database.clone(),
                    name: identifiers.name.clone(),
                    schema: Some(schema),
                    version: Some(version),
                };
                ResourceState::new(identifiers, properties)
            }))
    }

    async fn delete(
        &self,
        request: Lookup<PgConfig, ExtensionIdentifiers>,
    ) -> Result<Deleted<ExtensionIdentifiers, ExtensionProperties>, ExtensionError> {
        delete(&request.config, &request.identifiers).await?;
        Ok(Deleted::Gone)
    }
}

//! `PostgreSql/schemas`: schemas inside a database, with their owner.
//!
//! An unset `owner` is left alone (the config's user at creation). Deleting a schema that still holds
//! objects (tables, functions, an extension's objects) is refused with 409 `DependentObjectsStillExist`
//! naming them: they belong to something else, so a stack deletes them (or their extension) first and its
//! retry rounds work through the order.

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourceState, Validator,
};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::config::PgConfig;
use crate::connection::{database_connection, existing_database_connection};
use crate::error::{sql_error, with_dependents_hint};
use crate::preview::{name_identifier, preview_with_identifiers, required};
use crate::sql::{check_name, execute, ident};

/// The resource type.
pub const SCHEMA_TYPE: &str = "PostgreSql/schemas";

/// A schema's desired (input) or actual (output) properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchemaProperties {
    /// The database holding the schema (identifier).
    pub database: String,
    /// The schema name (identifier).
    pub name: String,
    /// The owning role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A schema's identifiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchemaIdentifiers {
    /// The database holding the schema.
    pub database: String,
    /// The schema name.
    pub name: String,
}

/// The handler of [`SCHEMA_TYPE`].
#[derive(Debug, Default, Clone, Copy)]
pub struct SchemaHandler;

/// The schema's owner, or `None` when there is no such schema.
async fn owner_of(
    connection: &mut PgConnection,
    name: &str,
) -> Result<Option<String>, ExtensionError> {
    sqlx::query_scalar(
        "SELECT pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = $1",
    )
    .bind(name)
    .fetch_optional(connection)
    .await
    .map_err(|err| sql_error(&err, &format!("read the schema {}", ident(name))))
}

fn check_identifiers(database: &str, name: &str, base: &str) -> Result<(), ExtensionError> {
    let mut validator = Validator::new();
    validator.absorb(check_name(database, &format!("{base}/database")));
    validator.absorb(check_name(name, &format!("{base}/name")));
    validator.finish()
}

async fn apply(
    config: &PgConfig,
    desired: &SchemaProperties,
) -> Result<SchemaProperties, ExtensionError> {
    check_identifiers(&desired.database, &desired.name, "/properties")?;
    if let Some(owner) = &desired.owner {
        check_name(owner, "/properties/owner")?;
    }
    let schema = ident(&desired.name);
    let mut connection = existing_database_connection(config, &desired.database).await?;
    match owner_of(&mut connection, &desired.name).await? {
        None => {
            let authorization = desired
                .owner
                .as_deref()
                .map(|owner| format!(" AUTHORIZATION {}", ident(owner)))
                .unwrap_or_default();
            execute(
                &mut *connection,
                format!("CREATE SCHEMA {schema}{authorization}"),
                &format!("create the schema {schema}"),
            )
            .await?;
        }
        Some(current) => {
            if let Some(owner) = desired.owner.as_deref().filter(|owner| *owner != current) {
                execute(
                    &mut *connection,
                    format!("ALTER SCHEMA {schema} OWNER TO {}", ident(owner)),
                    &format!("change the owner of the schema {schema}"),
                )
                .await?;
            }
        }
    }
    let owner = owner_of(&mut connection, &desired.name)
        .await?
        .ok_or_else(|| {
            ExtensionError::internal("The schema vanished while it was being applied.")
        })?;
    Ok(SchemaProperties {
        database: desired.database.clone(),
        name: desired.name.clone(),
        owner: Some(owner),
    })
}

async fn delete(config: &PgConfig, identifiers: &SchemaIdentifiers) -> Result<(), ExtensionError> {
    check_identifiers(&identifiers.database, &identifiers.name, "/identifiers")?;
    let Some(mut connection) = database_connection(config, &identifiers.database).await? else {
        return Ok(());
    };
    let schema = ident(&identifiers.name);
    with_dependents_hint(
        execute(
            &mut *connection,
            format!("DROP SCHEMA IF EXISTS {schema}"),
            &format!("delete the schema {schema}"),
        )
        .await,
        "Delete those objects (or the extension that owns them) first; cairn never \
         drops a schema's contents with it.",
    )
}

impl ResourceHandler<PgConfig> for SchemaHandler {
    type Properties = SchemaProperties;
    type Identifiers = SchemaIdentifiers;

    fn resource_type(&self) -> &str {
        SCHEMA_TYPE
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
        request: Apply<PgConfig, SchemaProperties>,
    ) -> Result<Applied<SchemaIdentifiers, SchemaProperties>, ExtensionError> {
        let properties = apply(&request.config, &request.properties).await?;
        Ok(Applied::Resource(ResourceState::new(
            SchemaIdentifiers {
                database: properties.database.clone(),
                name: properties.name.clone(),
            },
            properties,
        )))
    }

    async fn get(
        &self,
        request: Lookup<PgConfig, SchemaIdentifiers>,
    ) -> Result<Option<ResourceState<SchemaIdentifiers, SchemaProperties>>, ExtensionError> {
        let identifiers = request.identifiers;
        check_identifiers(&identifiers.database, &identifiers.name, "/identifiers")?;
        let Some(mut connection) =
            database_connection(&request.config, &identifiers.database).await?
        else {
            return Ok(None);
        };
        let owner = owner_of(&mut connection, &identifiers.name).await?;
        Ok(owner.map(|owner| {
            let properties = SchemaProperties {
                database: identifiers.database.clone(),
                name: identifiers.name.clone(),
                owner: Some(owner),
            };
            ResourceState::new(identifiers, properties)
        }))
    }

    async fn delete(
        &self,
        request: Lookup<PgConfig, SchemaIdentifiers>,
    ) -> Result<Deleted<SchemaIdentifiers, SchemaProperties>, ExtensionError> {
        delete(&request.config, &request.identifiers).await?;
        Ok(Deleted::Gone)
    }
}

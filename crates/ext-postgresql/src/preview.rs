//! Preview shared by every resource type: identifiers taken from the input (unknown while one of them is
//! unevaluated), the input echoed as the predicted properties without its write-only ones.

use cairn_extension_sdk::{
    ExtensionError, PreviewInput, PreviewOutput, ResourcePreviewMetadata, codes,
};
use serde_json::{Map, Value};

use crate::config::PgConfig;
use crate::sql::check_name;

/// An identifier property of a resource type.
#[derive(Debug, Clone, Copy)]
pub struct IdentifierKey {
    /// The property name (the same under `/identifiers`).
    pub name: &'static str,
    /// Whether the input must carry it.
    pub required: bool,
}

/// A required identifier.
pub const fn required(name: &'static str) -> IdentifierKey {
    IdentifierKey {
        name,
        required: true,
    }
}

/// An optional identifier.
pub const fn optional(name: &'static str) -> IdentifierKey {
    IdentifierKey {
        name,
        required: false,
    }
}

/// Preview for types identified by `name` alone.
pub fn preview_by_name(
    input: &PreviewInput<PgConfig>,
    write_only: &[&str],
) -> Result<PreviewOutput, ExtensionError> {
    preview_with_identifiers(input, &[required("name")], write_only, |identifiers| {
        name_identifier(identifiers, "name", true).map(|_| ())
    })
}

/// The identifier `key` as a checked name (`None` when absent and not `required`).
pub fn name_identifier<'a>(
    identifiers: &'a Map<String, Value>,
    key: &str,
    required: bool,
) -> Result<Option<&'a str>, ExtensionError> {
    let target = format!("/properties/{key}");
    match identifiers.get(key) {
        Some(Value::String(name)) => {
            check_name(name, &target)?;
            Ok(Some(name))
        }
        None if !required => Ok(None),
        _ => Err(ExtensionError::invalid(
            codes::INVALID_PROPERTIES,
            target,
            format!("'{key}' is required and must be a string."),
        )),
    }
}

/// Preview for types identified by `keys`; `check` validates the (evaluated) identifiers.
pub fn preview_with_identifiers(
    input: &PreviewInput<PgConfig>,
    keys: &[IdentifierKey],
    write_only: &[&str],
    check: impl FnOnce(&Map<String, Value>) -> Result<(), ExtensionError>,
) -> Result<PreviewOutput, ExtensionError> {
    let Value::Object(properties) = &input.properties else {
        return Err(ExtensionError::invalid(
            codes::INVALID_PROPERTIES,
            "/properties",
            "The properties must be an object.",
        ));
    };
    let mut identifiers = Map::new();
    let mut unknown = false;
    for key in keys {
        let pointer = format!("/properties/{}", key.name);
        match properties.get(key.name) {
            Some(_) if input.is_unevaluated(&pointer) => unknown = true,
            Some(value) => {
                identifiers.insert(key.name.to_owned(), value.clone());
            }
            None if key.required => {
                return Err(ExtensionError::invalid(
                    codes::INVALID_PROPERTIES,
                    pointer,
                    format!("'{}' is required.", key.name),
                ));
            }
            None => {}
        }
    }
    if !unknown {
        check(&identifiers)?;
    }
    let mut predicted = properties.clone();
    for pointer in write_only {
        if let Some(key) = pointer.strip_prefix("/properties/") {
            predicted.remove(key);
        }
    }
    Ok(PreviewOutput {
        identifiers: (!unknown).then_some(Value::Object(identifiers)),
        properties: Value::Object(predicted),
        metadata: ResourcePreviewMetadata {
            immutable: Some(
                keys.iter()
                    .map(|key| format!("/properties/{}", key.name))
                    .collect(),
            ),
            ..Default::default()
        },
    })
}

//! The serde model of `index.json` and `types.json`, field for field as Azure/bicep-types writes them (camelCase,
//! `$type` tags, `$ref` pointers), read leniently: fields this model does not use are ignored, not refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A pointer to a type: `types.json#/N` from `index.json`, `#/N` (same file) or `other.json#/N` inside a types
/// file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeRef {
    #[serde(rename = "$ref")]
    pub reference: String,
}

impl TypeRef {
    pub fn new(reference: impl Into<String>) -> TypeRef {
        TypeRef {
            reference: reference.into(),
        }
    }

    /// The file part (empty for the same file) and the index, or `None` when the pointer is not of the form
    /// `[file]#/N`.
    pub fn parts(&self) -> Option<(&str, usize)> {
        let (file, pointer) = self.reference.split_once('#')?;
        let index = pointer.strip_prefix('/')?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((file, index.parse().ok()?))
    }
}

/// Property flags (`ObjectTypePropertyFlags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Flags(pub u32);

impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const REQUIRED: Flags = Flags(1);
    pub const READ_ONLY: Flags = Flags(2);
    pub const WRITE_ONLY: Flags = Flags(4);
    pub const DEPLOY_TIME_CONSTANT: Flags = Flags(8);
    pub const IDENTIFIER: Flags = Flags(16);

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn required(self) -> bool {
        self.contains(Flags::REQUIRED)
    }

    pub fn read_only(self) -> bool {
        self.contains(Flags::READ_ONLY)
    }

    pub fn identifier(self) -> bool {
        self.contains(Flags::IDENTIFIER)
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// One property of an [`TypeEntry::ObjectType`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectProperty {
    #[serde(rename = "type")]
    pub property_type: TypeRef,
    #[serde(default)]
    pub flags: Flags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One entry of a types file, tagged by `$type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "$type")]
pub enum TypeEntry {
    AnyType,
    NullType,
    BooleanType,
    #[serde(rename_all = "camelCase")]
    IntegerType {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_value: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_value: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    StringType {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sensitive: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_length: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_length: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
    StringLiteralType {
        value: String,
    },
    UnionType {
        elements: Vec<TypeRef>,
    },
    #[serde(rename_all = "camelCase")]
    ArrayType {
        item_type: TypeRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_length: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_length: Option<u64>,
    },
    #[serde(rename_all = "camelCase")]
    ObjectType {
        name: String,
        #[serde(default)]
        properties: BTreeMap<String, ObjectProperty>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        additional_properties: Option<TypeRef>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sensitive: Option<bool>,
    },
    #[serde(rename_all = "camelCase")]
    DiscriminatedObjectType {
        name: String,
        discriminator: String,
        #[serde(default)]
        base_properties: BTreeMap<String, ObjectProperty>,
        #[serde(default)]
        elements: BTreeMap<String, TypeRef>,
    },
    #[serde(rename_all = "camelCase")]
    ResourceType {
        name: String,
        body: TypeRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        readable_scopes: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        writable_scopes: Option<u32>,
        /// Older files: `scopeType`, `readOnlyScopes` and `flags`; read, not used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope_type: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_only_scopes: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flags: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        functions: Option<serde_json::Value>,
    },
    /// Functions are kept as written: cairn checks resource bodies, not function calls.
    FunctionType(serde_json::Map<String, serde_json::Value>),
    ResourceFunctionType(serde_json::Map<String, serde_json::Value>),
}

impl TypeEntry {
    /// The type's name as messages show it (`string`, `int`, `'literal'`, an object's name).
    pub fn kind_name(&self) -> String {
        match self {
            TypeEntry::AnyType => "any".into(),
            TypeEntry::NullType => "null".into(),
            TypeEntry::BooleanType => "bool".into(),
            TypeEntry::IntegerType { .. } => "int".into(),
            TypeEntry::StringType { .. } => "string".into(),
            TypeEntry::StringLiteralType { value } => format!("'{value}'"),
            TypeEntry::UnionType { .. } => "union".into(),
            TypeEntry::ArrayType { .. } => "array".into(),
            TypeEntry::ObjectType { .. } | TypeEntry::DiscriminatedObjectType { .. } => {
                "object".into()
            }
            TypeEntry::ResourceType { name, .. } => format!("resource '{name}'"),
            TypeEntry::FunctionType(_) | TypeEntry::ResourceFunctionType(_) => "function".into(),
        }
    }
}

/// `settings` of `index.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexSettings {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub is_singleton: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_preview: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_deprecated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_type: Option<TypeRef>,
}

/// `index.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeIndex {
    #[serde(default)]
    pub resources: BTreeMap<String, TypeRef>,
    #[serde(default)]
    pub resource_functions: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_functions: Vec<TypeRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<IndexSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_resource_type: Option<TypeRef>,
}

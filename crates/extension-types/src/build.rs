//! Building a type set in code, for extensions that describe their own resource types: add types, get pointers
//! back, name resources `Type@apiVersion`, and finish into a [`TypeSet`] (which writes `index.json` and
//! `types.json`).

use std::collections::BTreeMap;

use crate::model::{Flags, IndexSettings, ObjectProperty, TypeEntry, TypeRef};
use crate::set::{TypeId, TypeSet};

/// Builds one extension's types. Pointers it hands out are `#/N` into the one `types.json` it writes.
#[derive(Clone, Debug)]
pub struct TypeBuilder {
    types: Vec<TypeEntry>,
    resources: BTreeMap<String, TypeId>,
    settings: IndexSettings,
    configuration: Option<TypeId>,
    fallback: Option<TypeId>,
    /// Shared primitives, added once.
    cache: BTreeMap<&'static str, TypeRef>,
}

impl TypeBuilder {
    /// Types of extension `name` at `version` (`settings.name` / `settings.version`).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> TypeBuilder {
        TypeBuilder {
            types: Vec::new(),
            resources: BTreeMap::new(),
            settings: IndexSettings {
                name: name.into(),
                version: version.into(),
                is_singleton: false,
                ..IndexSettings::default()
            },
            configuration: None,
            fallback: None,
            cache: BTreeMap::new(),
        }
    }

    /// Adds a type and returns its pointer.
    pub fn add(&mut self, entry: TypeEntry) -> TypeRef {
        self.types.push(entry);
        TypeRef::new(format!("#/{}", self.types.len() - 1))
    }

    fn shared(&mut self, key: &'static str, entry: TypeEntry) -> TypeRef {
        if let Some(r) = self.cache.get(key) {
            return r.clone();
        }
        let r = self.add(entry);
        self.cache.insert(key, r.clone());
        r
    }

    pub fn string(&mut self) -> TypeRef {
        self.shared(
            "string",
            TypeEntry::StringType {
                sensitive: None,
                min_length: None,
                max_length: None,
                pattern: None,
            },
        )
    }

    /// A string whose value is secret: checks never quote it (they quote no value anyway), Bicep hides it.
    pub fn secure_string(&mut self) -> TypeRef {
        self.shared(
            "secureString",
            TypeEntry::StringType {
                sensitive: Some(true),
                min_length: None,
                max_length: None,
                pattern: None,
            },
        )
    }

    pub fn int(&mut self) -> TypeRef {
        self.shared(
            "int",
            TypeEntry::IntegerType {
                min_value: None,
                max_value: None,
            },
        )
    }

    pub fn int_range(&mut self, min_value: Option<i64>, max_value: Option<i64>) -> TypeRef {
        self.add(TypeEntry::IntegerType {
            min_value,
            max_value,
        })
    }

    pub fn bool(&mut self) -> TypeRef {
        self.shared("bool", TypeEntry::BooleanType)
    }

    pub fn any(&mut self) -> TypeRef {
        self.shared("any", TypeEntry::AnyType)
    }

    pub fn null(&mut self) -> TypeRef {
        self.shared("null", TypeEntry::NullType)
    }

    pub fn array(&mut self, item_type: TypeRef) -> TypeRef {
        self.add(TypeEntry::ArrayType {
            item_type,
            min_length: None,
            max_length: None,
        })
    }

    /// A union of string literals (an enum).
    pub fn literals<'a>(&mut self, values: impl IntoIterator<Item = &'a str>) -> TypeRef {
        let elements = values
            .into_iter()
            .map(|value| {
                self.add(TypeEntry::StringLiteralType {
                    value: value.to_string(),
                })
            })
            .collect();
        self.add(TypeEntry::UnionType { elements })
    }

    pub fn union(&mut self, elements: Vec<TypeRef>) -> TypeRef {
        self.add(TypeEntry::UnionType { elements })
    }

    /// A map with values of one type (`additionalProperties` only).
    pub fn map(&mut self, name: impl Into<String>, values: TypeRef) -> TypeRef {
        self.add(TypeEntry::ObjectType {
            name: name.into(),
            properties: BTreeMap::new(),
            additional_properties: Some(values),
            sensitive: None,
        })
    }

    /// An object with the given properties: closed (no other property allowed) unless `additional` is given.
    pub fn object(
        &mut self,
        name: impl Into<String>,
        properties: Vec<(&str, TypeRef, Flags, &str)>,
        additional: Option<TypeRef>,
    ) -> TypeRef {
        let properties = properties
            .into_iter()
            .map(|(key, property_type, flags, description)| {
                (
                    key.to_string(),
                    ObjectProperty {
                        property_type,
                        flags,
                        description: (!description.is_empty()).then(|| description.to_string()),
                    },
                )
            })
            .collect();
        self.add(TypeEntry::ObjectType {
            name: name.into(),
            properties,
            additional_properties: additional,
            sensitive: None,
        })
    }

    /// Declares resource type `name` at `api_version` with body `body`; the index key is `name@api_version`.
    pub fn resource(&mut self, name: &str, api_version: &str, body: TypeRef) -> TypeRef {
        let key = format!("{name}@{api_version}");
        let r = self.add(TypeEntry::ResourceType {
            name: key.clone(),
            body,
            readable_scopes: Some(0),
            writable_scopes: Some(0),
            scope_type: None,
            read_only_scopes: None,
            flags: None,
            functions: None,
        });
        self.resources.insert(key, TypeId(self.types.len() - 1));
        r
    }

    /// The resource type used for types the index does not name (Bicep's `fallbackResourceType`).
    pub fn fallback(&mut self, body: TypeRef) -> TypeRef {
        let r = self.add(TypeEntry::ResourceType {
            name: "fallback".into(),
            body,
            readable_scopes: Some(0),
            writable_scopes: Some(0),
            scope_type: None,
            read_only_scopes: None,
            flags: None,
            functions: None,
        });
        self.fallback = Some(TypeId(self.types.len() - 1));
        r
    }

    /// The extension config's type (`settings.configurationType`).
    pub fn configuration(&mut self, config: TypeRef) {
        self.configuration = config.parts().map(|(_, index)| TypeId(index));
    }

    pub fn singleton(&mut self, is_singleton: bool) {
        self.settings.is_singleton = is_singleton;
    }

    /// The finished set. Pointers handed out by this builder are valid in it; a pointer made elsewhere that
    /// points past the end would be kept as written, which [`TypeSet::load`] of the written files refuses.
    pub fn finish(self) -> TypeSet {
        TypeSet::from_parts(
            self.types,
            self.resources,
            Some(self.settings),
            self.configuration,
            self.fallback,
        )
    }
}

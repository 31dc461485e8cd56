//! A resolved type set: `index.json` and every types file it references, loaded from their text into one flat
//! list in which every `$ref` has been checked and rewritten to `#/N` of that list, so lookups cannot fail later.

use std::collections::{BTreeMap, HashMap};

use crate::model::{IndexSettings, ObjectProperty, TypeEntry, TypeIndex, TypeRef};

/// Bounds on what a set may hold, so a hostile or broken file cannot make loading take unbounded memory.
const MAX_FILES: usize = 64;
const MAX_TYPES: usize = 200_000;

/// The position of a type in a [`TypeSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeId(pub usize);

/// Why a set of type files could not be loaded. Names files and pointers, never values.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file} is not valid type-file JSON: {message}")]
    Syntax { file: String, message: String },
    #[error("{file} is referenced but was not given")]
    MissingFile { file: String },
    #[error("{file} is not a relative path inside the types directory")]
    UnsafePath { file: String },
    #[error("{file}: '{reference}' is not a type pointer of the form 'file#/N' or '#/N'")]
    BadReference { file: String, reference: String },
    #[error("{file}: '{reference}' points past the end of {target} ({len} types)")]
    OutOfRange {
        file: String,
        reference: String,
        target: String,
        len: usize,
    },
    #[error("index.json: resource '{key}' points to a {found}, not a ResourceType")]
    NotAResourceType { key: String, found: String },
    #[error("the type files hold more than {limit} {what}")]
    TooLarge { what: &'static str, limit: usize },
}

/// `index.json` and its types, resolved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeSet {
    types: Vec<TypeEntry>,
    resources: BTreeMap<String, TypeId>,
    settings: Option<IndexSettings>,
    configuration: Option<TypeId>,
    fallback: Option<TypeId>,
}

impl TypeSet {
    /// Loads `index.json` (text `index`) and every file it references, read through `read` by the path written in
    /// the pointer (relative to the index's directory).
    pub fn load(
        index: &str,
        mut read: impl FnMut(&str) -> Option<String>,
    ) -> Result<TypeSet, LoadError> {
        let parsed: TypeIndex = serde_json::from_str(index).map_err(|e| LoadError::Syntax {
            file: "index.json".into(),
            message: e.to_string(),
        })?;
        let mut loader = Loader {
            files: HashMap::new(),
            order: Vec::new(),
            types: Vec::new(),
        };
        // Load every file reachable from the index, breadth first, each once.
        let mut pending: Vec<String> = Vec::new();
        let index_refs = parsed
            .resources
            .values()
            .chain(
                parsed
                    .settings
                    .iter()
                    .filter_map(|s| s.configuration_type.as_ref()),
            )
            .chain(parsed.fallback_resource_type.iter());
        for r in index_refs {
            let (file, _) = parts(r, "index.json")?;
            let file = if file.is_empty() { "types.json" } else { file };
            pending.push(file.to_string());
        }
        while let Some(file) = pending.pop() {
            if loader.files.contains_key(&file) {
                continue;
            }
            check_path(&file)?;
            if loader.files.len() >= MAX_FILES {
                return Err(LoadError::TooLarge {
                    what: "files",
                    limit: MAX_FILES,
                });
            }
            let text = read(&file).ok_or_else(|| LoadError::MissingFile { file: file.clone() })?;
            let entries: Vec<TypeEntry> =
                serde_json::from_str(&text).map_err(|e| LoadError::Syntax {
                    file: file.clone(),
                    message: e.to_string(),
                })?;
            if loader.types.len() + entries.len() > MAX_TYPES {
                return Err(LoadError::TooLarge {
                    what: "types",
                    limit: MAX_TYPES,
                });
            }
            for entry in &entries {
                for r in refs(entry) {
                    let (target, _) = parts(r, &file)?;
                    if !target.is_empty() && !loader.files.contains_key(target) {
                        pending.push(target.to_string());
                    }
                }
            }
            loader
                .files
                .insert(file.clone(), (loader.types.len(), entries.len()));
            loader.order.push(file);
            loader.types.extend(entries);
        }
        // Rewrite every pointer to the flat list.
        let mut types = std::mem::take(&mut loader.types);
        for (file, (start, len)) in loader
            .order
            .iter()
            .map(|f| (f.clone(), loader.files[f]))
            .collect::<Vec<_>>()
        {
            for entry in &mut types[start..start + len] {
                for r in refs_mut(entry) {
                    let id = loader.resolve(r, &file)?;
                    *r = TypeRef::new(format!("#/{}", id.0));
                }
            }
        }
        let resolve_index = |r: &TypeRef| -> Result<TypeId, LoadError> {
            let (file, _) = parts(r, "index.json")?;
            let file = if file.is_empty() { "types.json" } else { file };
            loader.resolve(
                &TypeRef::new(format!("{file}#{}", pointer(r))),
                "index.json",
            )
        };
        let mut resources = BTreeMap::new();
        for (key, r) in &parsed.resources {
            let id = resolve_index(r)?;
            if !matches!(types[id.0], TypeEntry::ResourceType { .. }) {
                return Err(LoadError::NotAResourceType {
                    key: key.clone(),
                    found: types[id.0].kind_name(),
                });
            }
            resources.insert(key.clone(), id);
        }
        let configuration = match parsed
            .settings
            .as_ref()
            .and_then(|s| s.configuration_type.as_ref())
        {
            Some(r) => Some(resolve_index(r)?),
            None => None,
        };
        let fallback = match &parsed.fallback_resource_type {
            Some(r) => {
                let id = resolve_index(r)?;
                if !matches!(types[id.0], TypeEntry::ResourceType { .. }) {
                    return Err(LoadError::NotAResourceType {
                        key: "fallbackResourceType".into(),
                        found: types[id.0].kind_name(),
                    });
                }
                Some(id)
            }
            None => None,
        };
        let mut settings = parsed.settings;
        if let (Some(s), Some(id)) = (settings.as_mut(), configuration) {
            s.configuration_type = Some(TypeRef::new(format!("types.json#/{}", id.0)));
        }
        Ok(TypeSet {
            types,
            resources,
            settings,
            configuration,
            fallback,
        })
    }

    /// Loads from files given by name (`index.json` and what it references).
    pub fn from_files(files: &BTreeMap<String, String>) -> Result<TypeSet, LoadError> {
        let index = files
            .get("index.json")
            .ok_or_else(|| LoadError::MissingFile {
                file: "index.json".into(),
            })?;
        TypeSet::load(index, |name| files.get(name).cloned())
    }

    /// The set written back as files: `index.json` and one `types.json`.
    pub fn to_files(&self) -> BTreeMap<String, String> {
        let pointer = |id: TypeId| TypeRef::new(format!("types.json#/{}", id.0));
        let index = TypeIndex {
            resources: self
                .resources
                .iter()
                .map(|(k, id)| (k.clone(), pointer(*id)))
                .collect(),
            resource_functions: BTreeMap::new(),
            namespace_functions: Vec::new(),
            settings: self.settings.clone().map(|mut s| {
                s.configuration_type = self.configuration.map(pointer);
                s
            }),
            fallback_resource_type: self.fallback.map(pointer),
        };
        let mut files = BTreeMap::new();
        // Serialising these plain data types cannot fail (string keys, no non-finite floats).
        files.insert(
            "index.json".to_string(),
            serde_json::to_string_pretty(&index).unwrap_or_default(),
        );
        files.insert(
            "types.json".to_string(),
            serde_json::to_string_pretty(&self.types).unwrap_or_default(),
        );
        files
    }

    pub(crate) fn from_parts(
        types: Vec<TypeEntry>,
        resources: BTreeMap<String, TypeId>,
        settings: Option<IndexSettings>,
        configuration: Option<TypeId>,
        fallback: Option<TypeId>,
    ) -> TypeSet {
        // The settings name the config type the way the loader leaves them, so a built set equals its reload.
        let mut settings = settings;
        if let Some(s) = settings.as_mut() {
            s.configuration_type =
                configuration.map(|id| TypeRef::new(format!("types.json#/{}", id.0)));
        }
        TypeSet {
            types,
            resources,
            settings,
            configuration,
            fallback,
        }
    }

    pub fn settings(&self) -> Option<&IndexSettings> {
        self.settings.as_ref()
    }

    /// The extension config's type (`settings.configurationType`).
    pub fn configuration(&self) -> Option<TypeId> {
        self.configuration
    }

    pub fn fallback(&self) -> Option<TypeId> {
        self.fallback
    }

    /// The index's resource keys (`Type@apiVersion`).
    pub fn resource_keys(&self) -> impl Iterator<Item = &str> {
        self.resources.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.types.len()
    }

    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    pub fn get(&self, id: TypeId) -> Option<&TypeEntry> {
        self.types.get(id.0)
    }

    /// The type a (resolved) pointer of this set names.
    pub fn target(&self, r: &TypeRef) -> Option<TypeId> {
        let (_, index) = r.parts()?;
        (index < self.types.len()).then_some(TypeId(index))
    }

    /// The `ResourceType` for a resource of type `resource_type` (which may carry `@apiVersion` itself), matched
    /// ignoring case: `Type@apiVersion` exactly; without a version, `Type@extension_version`, else the only
    /// version the index has of that type. `None` when the index does not describe it (the fallback, if any, is
    /// the caller's choice: see [`TypeSet::fallback`]).
    pub fn resource(
        &self,
        resource_type: &str,
        api_version: Option<&str>,
        extension_version: Option<&str>,
    ) -> Option<TypeId> {
        let (name, version) = match resource_type.split_once('@') {
            Some((name, version)) => (name, Some(version)),
            None => (resource_type, api_version),
        };
        let find = |version: &str| {
            self.resources.iter().find_map(|(key, id)| {
                let (k, v) = key.split_once('@').unwrap_or((key, ""));
                (k.eq_ignore_ascii_case(name) && v.eq_ignore_ascii_case(version)).then_some(*id)
            })
        };
        if let Some(version) = version {
            return find(version);
        }
        if let Some(found) = extension_version.and_then(find) {
            return Some(found);
        }
        let mut same_name = self.resources.iter().filter(|(key, _)| {
            key.split_once('@')
                .map_or(key.as_str(), |(k, _)| k)
                .eq_ignore_ascii_case(name)
        });
        match (same_name.next(), same_name.next()) {
            (Some((_, id)), None) => Some(*id),
            _ => None,
        }
    }

    /// The body type of a `ResourceType`.
    pub fn body_of(&self, resource: TypeId) -> Option<TypeId> {
        match self.get(resource)? {
            TypeEntry::ResourceType { body, .. } => self.target(body),
            _ => None,
        }
    }

    /// The properties of an object type (a discriminated object's base properties), for callers that walk them.
    pub fn properties(&self, id: TypeId) -> Option<&BTreeMap<String, ObjectProperty>> {
        match self.get(id)? {
            TypeEntry::ObjectType { properties, .. } => Some(properties),
            TypeEntry::DiscriminatedObjectType {
                base_properties, ..
            } => Some(base_properties),
            _ => None,
        }
    }
}

struct Loader {
    /// File name → (first index in `types`, count).
    files: HashMap<String, (usize, usize)>,
    order: Vec<String>,
    types: Vec<TypeEntry>,
}

impl Loader {
    fn resolve(&self, r: &TypeRef, from: &str) -> Result<TypeId, LoadError> {
        let (file, index) = parts(r, from)?;
        let file = if file.is_empty() { from } else { file };
        let (start, len) = *self
            .files
            .get(file)
            .ok_or_else(|| LoadError::MissingFile { file: file.into() })?;
        if index >= len {
            return Err(LoadError::OutOfRange {
                file: from.into(),
                reference: r.reference.clone(),
                target: file.into(),
                len,
            });
        }
        Ok(TypeId(start + index))
    }
}

fn parts<'r>(r: &'r TypeRef, file: &str) -> Result<(&'r str, usize), LoadError> {
    r.parts().ok_or_else(|| LoadError::BadReference {
        file: file.into(),
        reference: r.reference.clone(),
    })
}

fn pointer(r: &TypeRef) -> &str {
    r.reference
        .split_once('#')
        .map_or("", |(_, pointer)| pointer)
}

/// Type files are named by pointers another party wrote: only plain relative names inside the directory.
fn check_path(file: &str) -> Result<(), LoadError> {
    let bad = file.is_empty()
        || file.starts_with('/')
        || file.contains('\\')
        || file.contains(':')
        || file
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(LoadError::UnsafePath { file: file.into() });
    }
    Ok(())
}

fn refs(entry: &TypeEntry) -> Vec<&TypeRef> {
    let mut out = Vec::new();
    match entry {
        TypeEntry::UnionType { elements } => out.extend(elements),
        TypeEntry::ArrayType { item_type, .. } => out.push(item_type),
        TypeEntry::ObjectType {
            properties,
            additional_properties,
            ..
        } => {
            out.extend(properties.values().map(|p| &p.property_type));
            out.extend(additional_properties);
        }
        TypeEntry::DiscriminatedObjectType {
            base_properties,
            elements,
            ..
        } => {
            out.extend(base_properties.values().map(|p| &p.property_type));
            out.extend(elements.values());
        }
        TypeEntry::ResourceType { body, .. } => out.push(body),
        _ => {}
    }
    out
}

fn refs_mut(entry: &mut TypeEntry) -> Vec<&mut TypeRef> {
    let mut out = Vec::new();
    match entry {
        TypeEntry::UnionType { elements } => out.extend(elements.iter_mut()),
        TypeEntry::ArrayType { item_type, .. } => out.push(item_type),
        TypeEntry::ObjectType {
            properties,
            additional_properties,
            ..
        } => {
            out.extend(properties.values_mut().map(|p| &mut p.property_type));
            out.extend(additional_properties.iter_mut());
        }
        TypeEntry::DiscriminatedObjectType {
            base_properties,
            elements,
            ..
        } => {
            out.extend(base_properties.values_mut().map(|p| &mut p.property_type));
            out.extend(elements.values_mut());
        }
        TypeEntry::ResourceType { body, .. } => out.push(body),
        _ => {}
    }
    out
}

//! The local template spec provider: `Microsoft.Resources/templateSpecs` and `templateSpecs/versions`, kept in the
//! store's managed-resource inventory (one record per resource, its body as ARM returns it). A version holds a
//! `mainTemplate` and the `linkedTemplates` its nested deployments reach by `relativePath`; deployments read them
//! by `templateLink.id` ([`crate::link`]). Deleting a spec deletes its versions.

use std::sync::Arc;

use cairn_arm::{ResourceId, ResourceIdKind};
use cairn_store::{
    ManagedResource, ManagedResourceFilter, ManagedResourceRecord, PageRequest, Precondition,
    ResourceKey, Store, StoreError, Timestamp,
};
use serde_json::{Map, Value, json};

use super::{
    ProviderError, ProviderFuture, PutOutcome, ResourceProvider, member, tags_json, tags_of,
};
use crate::records::system_time;

pub const TEMPLATE_SPECS_TYPE: &str = "Microsoft.Resources/templateSpecs";
pub const TEMPLATE_SPEC_VERSIONS_TYPE: &str = "Microsoft.Resources/templateSpecs/versions";

/// The largest description ARM takes (characters).
const MAX_DESCRIPTION: usize = 4096;

pub struct TemplateSpecProvider {
    store: Arc<dyn Store>,
}

impl TemplateSpecProvider {
    pub fn new(store: Arc<dyn Store>) -> Self {
        TemplateSpecProvider { store }
    }
}

enum Target {
    Spec,
    Version { spec: ResourceId },
}

fn target(id: &ResourceId) -> Result<Target, ProviderError> {
    let ty = id.resource_type();
    if id.kind() != ResourceIdKind::Resource || id.resource_group_name().is_none() {
        return Err(ProviderError::bad_request(
            "InvalidResourceId",
            format!("'{id}' is not a template spec ID: template specs live in resource groups."),
        ));
    }
    if ty.eq_ignore_ascii_case(TEMPLATE_SPECS_TYPE) {
        return Ok(Target::Spec);
    }
    if ty.eq_ignore_ascii_case(TEMPLATE_SPEC_VERSIONS_TYPE)
        && let Some(spec) = id.parent()
    {
        return Ok(Target::Version { spec });
    }
    Err(ProviderError::bad_request(
        "InvalidResourceId",
        format!("'{id}' is not a template spec or template spec version ID."),
    ))
}

fn store_failure(what: &str, err: &StoreError) -> ProviderError {
    tracing::warn!(error = %err, "template spec provider: store failure");
    ProviderError::internal(what)
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::bad_request("InvalidRequestContent", message)
}

fn timestamp(t: Timestamp) -> String {
    cairn_arm::time::format_timestamp(system_time(t))
}

/// The resource as GET returns it: the stored body plus `systemData` from the record's times.
fn with_system_data(record: &ManagedResourceRecord) -> Value {
    let mut body = record.resource.properties.clone();
    if let Value::Object(map) = &mut body {
        map.insert(
            "systemData".into(),
            json!({
                "createdAt": timestamp(record.created_at),
                "lastModifiedAt": timestamp(record.resource.updated_at),
            }),
        );
    }
    body
}

/// A string member of `properties`, checked to be a string when present.
fn optional_string(
    properties: &Map<String, Value>,
    key: &str,
) -> Result<Option<String>, ProviderError> {
    match properties
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
    {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("'properties.{key}' must be a string."))),
    }
}

fn properties_of(body: &Value) -> Result<Map<String, Value>, ProviderError> {
    match member(body, "properties") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(p)) => Ok(p.clone()),
        Some(_) => Err(invalid("'properties' must be an object.")),
    }
}

fn description(properties: &Map<String, Value>) -> Result<Option<String>, ProviderError> {
    let description = optional_string(properties, "description")?;
    if description
        .as_ref()
        .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION)
    {
        return Err(invalid(format!(
            "'properties.description' is longer than {MAX_DESCRIPTION} characters."
        )));
    }
    Ok(description)
}

fn location_of(body: &Value) -> Result<&str, ProviderError> {
    member(body, "location")
        .and_then(Value::as_str)
        .filter(|l| !l.trim().is_empty())
        .ok_or_else(|| {
            ProviderError::bad_request(
                "LocationRequired",
                "The location property is required for this definition.",
            )
        })
}

/// Normalizes a linked template path: forward slashes, `.` and `..` resolved; `None` when it is absolute or climbs
/// above the version's root.
pub(crate) fn normalize_path(path: &str) -> Option<String> {
    let path = path.replace('\\', "/");
    if path.starts_with('/') || path.contains(':') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

/// Checks `linkedTemplates`: an array of `{path, template}` with relative, distinct paths (compared ignoring case)
/// and object templates.
fn linked_templates(properties: &Map<String, Value>) -> Result<Option<Value>, ProviderError> {
    let Some(value) = properties
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("linkedTemplates"))
        .map(|(_, v)| v)
    else {
        return Ok(None);
    };
    let Value::Array(items) = value else {
        return Err(invalid("'properties.linkedTemplates' must be an array."));
    };
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = member(item, "path")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                invalid(format!(
                    "'properties.linkedTemplates[{i}].path' is required (a relative path)."
                ))
            })?;
        let normalized = normalize_path(path).ok_or_else(|| {
            invalid(format!(
                "'properties.linkedTemplates[{i}].path' ('{path}') must be a relative path inside the template spec."
            ))
        })?;
        let folded = normalized.to_ascii_lowercase();
        if seen.contains(&folded) {
            return Err(invalid(format!(
                "'properties.linkedTemplates' names the path '{path}' more than once."
            )));
        }
        seen.push(folded);
        let template = match member(item, "template") {
            Some(Value::Object(t)) => Value::Object(t.clone()),
            _ => {
                return Err(invalid(format!(
                    "'properties.linkedTemplates[{i}].template' must be a template object."
                )));
            }
        };
        out.push(json!({ "path": path, "template": template }));
    }
    Ok(Some(Value::Array(out)))
}

/// Template spec resources in the inventory, with `resource_type` under `scope`.
async fn list_records(
    store: &dyn Store,
    resource_type: &str,
    scope: &str,
) -> Result<Vec<ManagedResourceRecord>, ProviderError> {
    let mut out = Vec::new();
    let mut continuation = None;
    loop {
        let page = store
            .list_managed_resources(ManagedResourceFilter {
                deployment: None,
                resource_type: Some(resource_type.to_string()),
                scope: Some(scope.to_string()),
                page: PageRequest {
                    limit: None,
                    continuation: continuation.take(),
                },
            })
            .await
            .map_err(|e| store_failure("list template specs", &e))?;
        out.extend(page.items);
        match page.continuation {
            Some(next) => continuation = Some(next),
            None => return Ok(out),
        }
    }
}

/// The versions of the spec `spec` (scope filters are prefixes: `spec-1` would match `spec-10`, so parents are
/// compared exactly).
async fn versions_of(
    store: &dyn Store,
    spec: &ResourceId,
) -> Result<Vec<ManagedResourceRecord>, ProviderError> {
    let scope = format!("{spec}/versions/");
    let records = list_records(store, TEMPLATE_SPEC_VERSIONS_TYPE, &scope).await?;
    Ok(records
        .into_iter()
        .filter(|r| {
            r.resource
                .resource_id
                .as_deref()
                .and_then(|id| ResourceId::parse(id).ok())
                .and_then(|id| id.parent())
                .is_some_and(|parent| &parent == spec)
        })
        .collect())
}

impl TemplateSpecProvider {
    async fn record(
        &self,
        id: &ResourceId,
    ) -> Result<Option<ManagedResourceRecord>, ProviderError> {
        self.store
            .get_managed_resource(&ResourceKey::arm(&id.to_string()))
            .await
            .map_err(|e| store_failure("read the template spec", &e))
    }

    async fn write(
        &self,
        id_text: &str,
        resource_type: &str,
        api_version: &str,
        body: Value,
    ) -> Result<ManagedResourceRecord, ProviderError> {
        self.store
            .put_managed_resource(
                ManagedResource {
                    key: ResourceKey::arm(id_text),
                    resource_id: Some(id_text.to_string()),
                    resource_type: resource_type.to_string(),
                    api_version: Some(api_version.to_string()).filter(|v| !v.is_empty()),
                    properties: body,
                    applied: None,
                    deployment: None,
                    extension: None,
                    updated_at: Timestamp::now(),
                },
                Precondition::Any,
            )
            .await
            .map_err(|e| store_failure("write the template spec", &e))
    }

    /// A spec as GET returns it: its versions summarized under `properties.versions`.
    async fn spec_json(&self, record: &ManagedResourceRecord) -> Result<Value, ProviderError> {
        let mut body = with_system_data(record);
        let spec_id = record
            .resource
            .resource_id
            .as_deref()
            .and_then(|id| ResourceId::parse(id).ok());
        let mut versions = Map::new();
        if let Some(spec_id) = &spec_id {
            for version in versions_of(self.store.as_ref(), spec_id).await? {
                let name = version
                    .resource
                    .properties
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                versions.insert(
                    name,
                    json!({
                        "timeCreated": timestamp(version.created_at),
                        "timeModified": timestamp(version.resource.updated_at),
                    }),
                );
            }
        }
        if let Some(Value::Object(p)) = body.get_mut("properties") {
            p.insert("versions".into(), Value::Object(versions));
        }
        Ok(body)
    }

    async fn put_spec(
        &self,
        id: &ResourceId,
        api_version: &str,
        body: &Value,
    ) -> Result<PutOutcome, ProviderError> {
        let location = location_of(body)?;
        let properties = properties_of(body)?;
        let existing = self.record(id).await?;
        let stored_location = existing
            .as_ref()
            .and_then(|r| r.resource.properties.get("location"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(old) = &stored_location
            && !old.eq_ignore_ascii_case(location)
        {
            return Err(location_change(id, old, location));
        }
        let mut props = Map::new();
        if let Some(d) = description(&properties)? {
            props.insert("description".into(), json!(d));
        }
        if let Some(d) = optional_string(&properties, "displayName")? {
            props.insert("displayName".into(), json!(d));
        }
        if let Some(m) = properties.get("metadata").filter(|m| !m.is_null()) {
            props.insert("metadata".into(), m.clone());
        }
        let id_text = existing
            .as_ref()
            .and_then(|r| r.resource.resource_id.clone())
            .unwrap_or_else(|| id.to_string());
        let name = ResourceId::parse(&id_text)
            .ok()
            .and_then(|i| i.name().map(str::to_string))
            .unwrap_or_default();
        let mut stored = json!({
            "id": id_text,
            "name": name,
            "type": TEMPLATE_SPECS_TYPE,
            "location": stored_location.as_deref().unwrap_or(location),
            "properties": Value::Object(props),
        });
        let tags = tags_of(body);
        if !tags.is_empty() {
            stored["tags"] = tags_json(&tags);
        }
        let record = self
            .write(&id_text, TEMPLATE_SPECS_TYPE, api_version, stored)
            .await?;
        Ok(PutOutcome {
            resource: self.spec_json(&record).await?,
            created: existing.is_none(),
        })
    }

    async fn put_version(
        &self,
        id: &ResourceId,
        spec: &ResourceId,
        api_version: &str,
        body: &Value,
    ) -> Result<PutOutcome, ProviderError> {
        let location = location_of(body)?;
        let properties = properties_of(body)?;
        let Some(spec_record) = self.record(spec).await? else {
            return Err(ProviderError::new(
                404,
                "ParentResourceNotFound",
                format!(
                    "Can not perform requested operation on nested resource. Parent resource '{}' not found.",
                    spec.name().unwrap_or_default()
                ),
            ));
        };
        let spec_location = spec_record
            .resource
            .properties
            .get("location")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !spec_location.eq_ignore_ascii_case(location) {
            return Err(ProviderError::bad_request(
                "InvalidResourceLocation",
                format!(
                    "The template spec version must be in the template spec's location '{spec_location}', not '{location}'."
                ),
            ));
        }
        let main_template = match properties
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("mainTemplate"))
            .map(|(_, v)| v)
        {
            Some(Value::Object(t)) => Value::Object(t.clone()),
            Some(Value::String(text)) => serde_json::from_str::<Value>(text)
                .ok()
                .filter(Value::is_object)
                .ok_or_else(|| invalid("'properties.mainTemplate' is not a JSON object."))?,
            _ => {
                return Err(invalid(
                    "'properties.mainTemplate' is required: the template the version deploys.",
                ));
            }
        };
        let mut props = Map::new();
        if let Some(d) = description(&properties)? {
            props.insert("description".into(), json!(d));
        }
        if let Some(linked) = linked_templates(&properties)? {
            props.insert("linkedTemplates".into(), linked);
        }
        for key in ["metadata", "uiFormDefinition"] {
            if let Some(v) = properties
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
                .filter(|v| !v.is_null())
            {
                props.insert(key.into(), v.clone());
            }
        }
        props.insert("mainTemplate".into(), main_template);
        let existing = self.record(id).await?;
        let id_text = existing
            .as_ref()
            .and_then(|r| r.resource.resource_id.clone())
            .unwrap_or_else(|| id.to_string());
        let version = ResourceId::parse(&id_text)
            .ok()
            .and_then(|i| i.name().map(str::to_string))
            .unwrap_or_default();
        let mut stored = json!({
            "id": id_text,
            "name": version,
            "type": TEMPLATE_SPEC_VERSIONS_TYPE,
            "location": spec_location,
            "properties": Value::Object(props),
        });
        let tags = tags_of(body);
        if !tags.is_empty() {
            stored["tags"] = tags_json(&tags);
        }
        let record = self
            .write(&id_text, TEMPLATE_SPEC_VERSIONS_TYPE, api_version, stored)
            .await?;
        Ok(PutOutcome {
            resource: with_system_data(&record),
            created: existing.is_none(),
        })
    }

    async fn delete_record(&self, id: &ResourceId) -> Result<bool, ProviderError> {
        match self
            .store
            .delete_managed_resource(&ResourceKey::arm(&id.to_string()), Precondition::Any)
            .await
        {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(store_failure("delete the template spec", &e)),
        }
    }
}

fn location_change(id: &ResourceId, old: &str, new: &str) -> ProviderError {
    ProviderError::bad_request(
        "InvalidResourceLocation",
        format!(
            "The resource '{}' already exists in location '{old}'. A resource with the same name cannot be created in \
             location '{new}'.",
            id.qualified_type_and_names()
        ),
    )
}

impl ResourceProvider for TemplateSpecProvider {
    fn put<'a>(
        &'a self,
        id: &'a ResourceId,
        api_version: &'a str,
        body: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome> {
        Box::pin(async move {
            match target(id)? {
                Target::Spec => self.put_spec(id, api_version, body).await,
                Target::Version { spec } => self.put_version(id, &spec, api_version, body).await,
            }
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Value>> {
        Box::pin(async move {
            let kind = target(id)?;
            let Some(record) = self.record(id).await? else {
                return Ok(None);
            };
            match kind {
                Target::Spec => Ok(Some(self.spec_json(&record).await?)),
                Target::Version { .. } => Ok(Some(with_system_data(&record))),
            }
        })
    }

    fn delete<'a>(&'a self, id: &'a ResourceId, _api_version: &'a str) -> ProviderFuture<'a, bool> {
        Box::pin(async move {
            match target(id)? {
                Target::Spec => {
                    // Versions first: a spec whose delete fails halfway is still there to delete again.
                    for version in versions_of(self.store.as_ref(), id).await? {
                        match self
                            .store
                            .delete_managed_resource(&version.resource.key, Precondition::Any)
                            .await
                        {
                            Ok(()) | Err(StoreError::NotFound { .. }) => {}
                            Err(e) => {
                                return Err(store_failure("delete a template spec version", &e));
                            }
                        }
                    }
                    self.delete_record(id).await
                }
                Target::Version { .. } => self.delete_record(id).await,
            }
        })
    }

    fn list<'a>(
        &'a self,
        parent: &'a ResourceId,
        resource_type: &'a str,
        _api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Vec<Value>>> {
        Box::pin(async move {
            if resource_type.eq_ignore_ascii_case(TEMPLATE_SPEC_VERSIONS_TYPE) {
                if !matches!(target(parent)?, Target::Spec) {
                    return Ok(None);
                }
                if self.record(parent).await?.is_none() {
                    return Err(ProviderError::not_found(parent));
                }
                let versions = versions_of(self.store.as_ref(), parent).await?;
                return Ok(Some(versions.iter().map(with_system_data).collect()));
            }
            if resource_type.eq_ignore_ascii_case(TEMPLATE_SPECS_TYPE)
                && matches!(
                    parent.kind(),
                    ResourceIdKind::ResourceGroup | ResourceIdKind::Subscription
                )
            {
                let scope = format!("{parent}/");
                let mut out = Vec::new();
                for record in list_records(self.store.as_ref(), TEMPLATE_SPECS_TYPE, &scope).await?
                {
                    out.push(self.spec_json(&record).await?);
                }
                return Ok(Some(out));
            }
            Ok(None)
        })
    }
}

/// A template spec version's templates, read for a deployment.
#[derive(Clone, Debug)]
pub(crate) struct SpecVersion {
    pub main_template: Value,
    /// `(normalized path, template)` of each linked template.
    pub linked_templates: Vec<(String, Value)>,
}

impl SpecVersion {
    /// A version from its GET body; `None` when it holds no main template.
    pub(crate) fn from_body(body: &Value) -> Option<SpecVersion> {
        let properties = body.get("properties")?;
        let main_template = properties
            .get("mainTemplate")
            .filter(|t| t.is_object())?
            .clone();
        let linked_templates = properties
            .get("linkedTemplates")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| {
                        let path = normalize_path(item.get("path")?.as_str()?)?;
                        Some((path, item.get("template")?.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(SpecVersion {
            main_template,
            linked_templates,
        })
    }

    /// The linked template at `path` (normalized; compared ignoring case, as ARM does).
    pub(crate) fn linked(&self, path: &str) -> Option<&Value> {
        self.linked_templates
            .iter()
            .find(|(p, _)| p.eq_ignore_ascii_case(path))
            .map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_paths_normalize() {
        assert_eq!(normalize_path("a/b.json").as_deref(), Some("a/b.json"));
        assert_eq!(normalize_path("./a\\b.json").as_deref(), Some("a/b.json"));
        assert_eq!(normalize_path("a/../c.json").as_deref(), Some("c.json"));
        assert_eq!(normalize_path("../c.json"), None);
        assert_eq!(normalize_path("/c.json"), None);
        assert_eq!(normalize_path("c:/x.json"), None);
        assert_eq!(normalize_path(""), None);
    }

    #[test]
    fn versions_read_their_templates() {
        let body = json!({"properties": {
            "mainTemplate": {"resources": []},
            "linkedTemplates": [{"path": "Modules/A.json", "template": {"x": 1}}]
        }});
        let version = SpecVersion::from_body(&body).unwrap();
        assert_eq!(version.linked("modules/a.json"), Some(&json!({"x": 1})));
        assert!(version.linked("modules/b.json").is_none());
        assert!(SpecVersion::from_body(&json!({"properties": {}})).is_none());
    }
}

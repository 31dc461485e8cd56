//! The local `Microsoft.Resources/resourceGroups` provider: resource groups kept in the store.

use std::sync::Arc;

use cairn_arm::{ResourceId, ResourceIdKind};
use cairn_store::{Precondition, ResourceGroup, ResourceGroupRecord, Store, StoreError, Timestamp};
use serde_json::{Value, json};

use super::{
    ProviderError, ProviderFuture, PutOutcome, ResourceProvider, member, tags_json, tags_of,
};

pub const RESOURCE_GROUPS_TYPE: &str = "Microsoft.Resources/resourceGroups";

pub struct ResourceGroupProvider {
    store: Arc<dyn Store>,
}

impl ResourceGroupProvider {
    pub fn new(store: Arc<dyn Store>) -> Self {
        ResourceGroupProvider { store }
    }
}

fn group_parts(id: &ResourceId) -> Result<(&str, &str), ProviderError> {
    match (id.kind(), id.subscription_id(), id.resource_group_name()) {
        (ResourceIdKind::ResourceGroup, Some(sub), Some(name)) => Ok((sub, name)),
        _ => Err(ProviderError::bad_request(
            "InvalidResourceId",
            format!("'{id}' is not a resource group ID."),
        )),
    }
}

/// A resource group as ARM returns it.
pub(crate) fn group_json(record: &ResourceGroupRecord) -> Value {
    let g = &record.group;
    let mut out = json!({
        "id": g.resource_id(),
        "name": g.name,
        "type": RESOURCE_GROUPS_TYPE,
        "location": g.location,
        "properties": { "provisioningState": g.provisioning_state },
    });
    if !g.tags.is_empty() {
        out["tags"] = tags_json(&g.tags);
    }
    if let Some(m) = &g.managed_by {
        out["managedBy"] = json!(m);
    }
    out
}

fn store_failure(what: &str, err: &StoreError) -> ProviderError {
    tracing::warn!(error = %err, "resource group provider: store failure");
    ProviderError::internal(what)
}

impl ResourceProvider for ResourceGroupProvider {
    fn put<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
        body: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome> {
        Box::pin(async move {
            let (sub, name) = group_parts(id)?;
            let location = member(body, "location")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ProviderError::bad_request(
                        "LocationRequired",
                        "The location property is required for this definition.",
                    )
                })?;
            let existing = self
                .store
                .get_resource_group(sub, name)
                .await
                .map_err(|e| store_failure("read the resource group", &e))?;
            if let Some(old) = &existing
                && !old.group.location.eq_ignore_ascii_case(location)
            {
                return Err(ProviderError::new(
                    409,
                    "InvalidResourceGroupLocation",
                    format!(
                        "Invalid resource group location '{location}'. The Resource group already exists in location '{}'.",
                        old.group.location
                    ),
                ));
            }
            let group = ResourceGroup {
                subscription_id: sub.to_string(),
                name: existing
                    .as_ref()
                    .map(|g| g.group.name.clone())
                    .unwrap_or_else(|| name.to_string()),
                location: location.to_string(),
                tags: tags_of(body),
                managed_by: member(body, "managedBy")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                provisioning_state: "Succeeded".into(),
            };
            let record = self
                .store
                .put_resource_group(group, Precondition::Any, Timestamp::now())
                .await
                .map_err(|e| store_failure("write the resource group", &e))?;
            Ok(PutOutcome {
                resource: group_json(&record),
                created: existing.is_none(),
            })
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Value>> {
        Box::pin(async move {
            let (sub, name) = group_parts(id)?;
            let record = self
                .store
                .get_resource_group(sub, name)
                .await
                .map_err(|e| store_failure("read the resource group", &e))?;
            Ok(record.as_ref().map(group_json))
        })
    }

    fn delete<'a>(&'a self, id: &'a ResourceId, _api_version: &'a str) -> ProviderFuture<'a, bool> {
        Box::pin(async move {
            let (sub, name) = group_parts(id)?;
            match self
                .store
                .delete_resource_group(sub, name, Precondition::Any)
                .await
            {
                Ok(()) => Ok(true),
                Err(StoreError::NotFound { .. }) => Ok(false),
                Err(e) => Err(store_failure("delete the resource group", &e)),
            }
        })
    }
}

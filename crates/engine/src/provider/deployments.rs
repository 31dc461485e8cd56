//! `Microsoft.Resources/deployments` as a provider, for what is not a nested deployment of a template: GET answers
//! `reference()` of deployments outside the template from their records. Nested deployments (inline or linked
//! templates) are run by the engine itself, never PUT through here.

use std::sync::Arc;

use cairn_arm::ResourceId;
use cairn_store::{Precondition, Store, StoreError};
use serde_json::Value;

use super::{ProviderError, ProviderFuture, PutOutcome, ResourceProvider};
use crate::records::deployment_extended;
use crate::request::deployment_key_of;

pub const DEPLOYMENTS_TYPE: &str = "Microsoft.Resources/deployments";

pub struct DeploymentsProvider {
    store: Arc<dyn Store>,
}

impl DeploymentsProvider {
    pub fn new(store: Arc<dyn Store>) -> Self {
        DeploymentsProvider { store }
    }
}

fn store_failure(err: &StoreError) -> ProviderError {
    tracing::warn!(error = %err, "deployments provider: store failure");
    ProviderError::internal("read the deployment")
}

impl ResourceProvider for DeploymentsProvider {
    fn put<'a>(
        &'a self,
        _id: &'a ResourceId,
        _api_version: &'a str,
        _body: &'a Value,
    ) -> ProviderFuture<'a, PutOutcome> {
        Box::pin(async {
            Err(ProviderError::bad_request(
                "InvalidTemplate",
                "Deployments are created through the deployments API or as nested deployments of a template, \
                 not as individual resources.",
            ))
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a ResourceId,
        _api_version: &'a str,
    ) -> ProviderFuture<'a, Option<Value>> {
        Box::pin(async move {
            let Some(key) = deployment_key_of(&id.to_string()) else {
                return Ok(None);
            };
            let record = self
                .store
                .get_deployment(&key)
                .await
                .map_err(|e| store_failure(&e))?;
            Ok(
                record
                    .map(|r| serde_json::to_value(deployment_extended(&r)).unwrap_or(Value::Null)),
            )
        })
    }

    fn delete<'a>(&'a self, id: &'a ResourceId, _api_version: &'a str) -> ProviderFuture<'a, bool> {
        Box::pin(async move {
            let Some(key) = deployment_key_of(&id.to_string()) else {
                return Ok(false);
            };
            match self.store.get_deployment(&key).await {
                Ok(Some(r)) if !r.status.is_terminal() => Err(ProviderError::new(
                    409,
                    "DeploymentActive",
                    format!(
                        "Unable to delete deployment '{}': the deployment is still active.",
                        key.name
                    ),
                )),
                Ok(Some(_)) => match self.store.delete_deployment(&key, Precondition::Any).await {
                    Ok(()) => Ok(true),
                    Err(StoreError::NotFound { .. }) => Ok(false),
                    Err(e) => Err(store_failure(&e)),
                },
                Ok(None) => Ok(false),
                Err(e) => Err(store_failure(&e)),
            }
        })
    }
}

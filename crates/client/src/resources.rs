//! Resource groups and the local Key Vault's management plane (vaults, setting secrets) through the server's
//! resource API, api-version 2025-04-01.

use reqwest::Method;
use serde_json::{Value, json};

use crate::client::Client;
use crate::error::ClientError;

impl Client {
    /// Creates or updates the resource group `id` (`/subscriptions/{s}/resourceGroups/{name}`) with `body`
    /// (`{"location": ..., "tags": ...}`); the group as the server returns it.
    pub async fn put_group(&self, id: &str, body: &Value) -> Result<Value, ClientError> {
        Ok(self.request(Method::PUT, id, Some(body)).await?.body)
    }

    /// The resource group, or 404 `ResourceGroupNotFound`.
    pub async fn get_group(&self, id: &str) -> Result<Value, ClientError> {
        Ok(self.request(Method::GET, id, None).await?.body)
    }

    /// The resource groups of a subscription, every page.
    pub async fn list_groups(&self, subscription: &str) -> Result<Vec<Value>, ClientError> {
        self.list(&format!("/subscriptions/{subscription}/resourcegroups"))
            .await
    }

    /// Deletes the resource group and follows the delete (202 + `Location`) to its end.
    pub async fn delete_group(&self, id: &str) -> Result<(), ClientError> {
        let answer = self.request(Method::DELETE, id, None).await?;
        self.follow_location(answer).await?;
        Ok(())
    }

    /// Creates or updates the Key Vault vault `id` (`.../providers/Microsoft.KeyVault/vaults/{name}`).
    pub async fn put_vault(&self, id: &str, body: &Value) -> Result<Value, ClientError> {
        Ok(self.request(Method::PUT, id, Some(body)).await?.body)
    }

    /// Whether the vault `id` exists (a 404 is `false`, any other error is returned).
    pub async fn vault_exists(&self, id: &str) -> Result<bool, ClientError> {
        match self.request(Method::GET, id, None).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets a secret of the vault (a new version); the answer never holds the value.
    pub async fn put_secret(
        &self,
        vault_id: &str,
        name: &str,
        value: &str,
        content_type: Option<&str>,
    ) -> Result<Value, ClientError> {
        let mut properties = json!({ "value": value });
        if let Some(ct) = content_type {
            properties["contentType"] = Value::String(ct.to_string());
        }
        let body = json!({ "properties": properties });
        Ok(self
            .request(
                Method::PUT,
                &format!("{vault_id}/secrets/{name}"),
                Some(&body),
            )
            .await?
            .body)
    }
}

//! Deployments (`Microsoft.Resources/deployments`, api-version 2025-04-01) at any scope: create and follow to
//! the end, read, list, delete, validate, what-if, cancel, export, and the operations of a deployment and of the
//! deployments it nested.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cairn_arm::models::deployment::{Deployment, DeploymentWhatIf};
use reqwest::Method;
use serde_json::Value;

use crate::client::{Client, Response};
use crate::error::ClientError;

/// How long [`Client::wait_for_deployment`] asks the server to hold a status poll (`Prefer: wait=1`).
const STATUS_HOLD: Duration = Duration::from_secs(1);

/// How deep [`Client::wait_for_deployment`] reads the operations of nested deployments.
const MAX_WATCHED_DEPTH: usize = 4;

/// What [`Client::wait_for_deployment`] reports while it polls; every method has a default that does nothing, and
/// `()` watches nothing.
pub trait DeploymentWatcher {
    /// The operations of `deployment` as the server lists them after a poll: the root deployment at depth 0,
    /// deployments it nested at depth 1, and so on.
    fn operations(&mut self, deployment: &str, depth: usize, operations: &[Value]) {
        let _ = (deployment, depth, operations);
    }

    /// Called after each wait between polls (a live view refreshes its clocks).
    fn tick(&mut self) {}

    /// How often it is shown operations: at every poll (`Some(ZERO)`, the default), at most once per interval and
    /// once more when the deployment has ended, or never (`None`), when a poll reads only the deployment's status.
    /// Listing a big deployment's operations is most of what a poll costs, the server and the client alike: twenty
    /// clients following 250-resource deployments at every poll took a quarter of a two-core server.
    fn operations_interval(&self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

/// Follows a deployment without showing its operations.
impl DeploymentWatcher for () {
    fn operations_interval(&self) -> Option<Duration> {
        None
    }
}

/// The terminal states of a deployment and of an `Azure-AsyncOperation` status.
fn is_terminal(state: Option<&str>) -> bool {
    matches!(state, Some("Succeeded" | "Failed" | "Canceled"))
}

/// `{scope}/providers/Microsoft.Resources/deployments/{name}`.
pub fn deployment_path(scope: &str, name: &str) -> String {
    format!("{scope}/providers/Microsoft.Resources/deployments/{name}")
}

impl Client {
    /// Starts a deployment (`PUT`; 201/200 with `Azure-AsyncOperation`): the accepted answer, whose body is the
    /// deployment record as it starts. Follow it with [`Client::wait_for_deployment`].
    pub async fn create_deployment(
        &self,
        scope: &str,
        name: &str,
        request: &Deployment,
    ) -> Result<Response, ClientError> {
        let body = serde_json::to_value(request)?;
        self.request(Method::PUT, &deployment_path(scope, name), Some(&body))
            .await
    }

    /// Follows a deployment `create_deployment` started until it is terminal and returns its final record. It
    /// polls the `Azure-AsyncOperation` status when the server gave one, else the record itself, waiting as
    /// `Retry-After` says; after a poll, as often as [`DeploymentWatcher::operations_interval`] asks and once the
    /// deployment has ended, `watcher` gets the operations of the deployment and of its nested deployments (a
    /// failure to list them is not fatal: progress is best effort, the record is the truth).
    pub async fn wait_for_deployment(
        &self,
        scope: &str,
        name: &str,
        accepted: &Response,
        watcher: &mut dyn DeploymentWatcher,
    ) -> Result<Value, ClientError> {
        let path = deployment_path(scope, name);
        let mut delay = self.poll_delay(accepted.retry_after);
        let mut settled = HashSet::new();
        let mut listed: Option<Instant> = None;
        // Unless operations are shown more often than that, the server is asked to hold each status poll until the
        // deployment ends or a second has passed: the end is seen as it happens, not up to a poll interval later.
        let hold = watcher
            .operations_interval()
            .is_none_or(|interval| interval >= STATUS_HOLD);
        loop {
            let mut waited = false;
            // The record is the truth; the async status only tells when to stop.
            let terminal = match &accepted.async_operation {
                Some(url) => {
                    let status = if hold {
                        self.poll_waiting(url, STATUS_HOLD).await?
                    } else {
                        self.send(Method::GET, url, None).await?
                    };
                    waited = status.waited;
                    delay = self.poll_delay(status.retry_after.or(Some(delay)));
                    is_terminal(status.body["status"].as_str())
                }
                None => {
                    let record = self.request(Method::GET, &path, None).await?;
                    is_terminal(
                        record
                            .body
                            .pointer("/properties/provisioningState")
                            .and_then(Value::as_str),
                    )
                }
            };
            let due = watcher.operations_interval().is_some_and(|interval| {
                terminal || listed.is_none_or(|at| at.elapsed() >= interval)
            });
            if due && let Ok(ops) = self.deployment_operations(scope, name).await {
                listed = Some(Instant::now());
                watcher.operations(name, 0, &ops);
                self.watch_nested(&ops, 1, watcher, &mut settled).await;
            }
            if terminal {
                break;
            }
            // A poll the server held has waited already.
            if !waited {
                tokio::time::sleep(delay).await;
            }
            watcher.tick();
        }
        Ok(self.request(Method::GET, &path, None).await?.body)
    }

    /// Reports the operations of nested deployments (one level per call, down to a fixed depth). A nested
    /// deployment whose operation had ended when its operations, and those of every deployment nested in it, were
    /// last read (`settled`, by id) is not read again while its operation stays ended: nothing in it changes any
    /// more, and a big deployment's modules are thousands of operations a poll. One whose read failed, or whose
    /// operation runs again (a resumed run), is read at the next poll. Whether every nested deployment was read.
    async fn watch_nested(
        &self,
        ops: &[Value],
        depth: usize,
        watcher: &mut dyn DeploymentWatcher,
        settled: &mut HashSet<String>,
    ) -> bool {
        if depth > MAX_WATCHED_DEPTH {
            return true;
        }
        let mut all_read = true;
        for op in ops {
            let target = &op["properties"]["targetResource"];
            let is_deployment = target["resourceType"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
            let Some(id) = target["id"].as_str().filter(|_| is_deployment) else {
                continue;
            };
            let Some((scope, child)) = split_deployment_id(id) else {
                continue;
            };
            let ended = is_terminal(op["properties"]["provisioningState"].as_str());
            if !ended {
                settled.remove(id);
            } else if settled.contains(id) {
                continue;
            }
            match self.deployment_operations(&scope, &child).await {
                Ok(child_ops) => {
                    watcher.operations(&child, depth, &child_ops);
                    let below =
                        Box::pin(self.watch_nested(&child_ops, depth + 1, watcher, settled)).await;
                    if ended && below {
                        settled.insert(id.to_owned());
                    }
                    all_read &= below;
                }
                Err(_) => all_read = false,
            }
        }
        all_read
    }

    /// The deployment record, or 404 `DeploymentNotFound`.
    pub async fn get_deployment(&self, scope: &str, name: &str) -> Result<Value, ClientError> {
        Ok(self
            .request(Method::GET, &deployment_path(scope, name), None)
            .await?
            .body)
    }

    /// The deployments of a scope, every page.
    pub async fn list_deployments(&self, scope: &str) -> Result<Vec<Value>, ClientError> {
        self.list(&format!(
            "{scope}/providers/Microsoft.Resources/deployments"
        ))
        .await
    }

    /// Deletes a deployment record and follows the delete to its end; a missing deployment is 404
    /// `DeploymentNotFound` (ARM answers a DELETE of one with 204, az reports it as not found).
    pub async fn delete_deployment(&self, scope: &str, name: &str) -> Result<(), ClientError> {
        let path = deployment_path(scope, name);
        self.request(Method::GET, &path, None).await?;
        let answer = self.request(Method::DELETE, &path, None).await?;
        self.follow_location(answer).await?;
        Ok(())
    }

    /// `POST .../validate`: the validate result; an invalid request is the 400 ARM error.
    pub async fn validate_deployment(
        &self,
        scope: &str,
        name: &str,
        request: &Deployment,
    ) -> Result<Value, ClientError> {
        let body = serde_json::to_value(request)?;
        let path = format!("{}/validate", deployment_path(scope, name));
        let answer = self.request(Method::POST, &path, Some(&body)).await?;
        Ok(self.follow_location(answer).await?.body)
    }

    /// `POST .../whatIf`, followed to its result.
    pub async fn deployment_what_if(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentWhatIf,
    ) -> Result<Value, ClientError> {
        let body = serde_json::to_value(request)?;
        let path = format!("{}/whatIf", deployment_path(scope, name));
        let answer = self.request(Method::POST, &path, Some(&body)).await?;
        Ok(self.follow_location(answer).await?.body)
    }

    /// `POST .../cancel`.
    pub async fn cancel_deployment(&self, scope: &str, name: &str) -> Result<(), ClientError> {
        let path = format!("{}/cancel", deployment_path(scope, name));
        self.request(Method::POST, &path, None).await?;
        Ok(())
    }

    /// `POST .../exportTemplate`: `{template}`.
    pub async fn export_deployment_template(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Value, ClientError> {
        let path = format!("{}/exportTemplate", deployment_path(scope, name));
        Ok(self.request(Method::POST, &path, None).await?.body)
    }

    /// The deployment's operations, every page.
    pub async fn deployment_operations(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Vec<Value>, ClientError> {
        self.list(&format!("{}/operations", deployment_path(scope, name)))
            .await
    }
}

/// `(scope, name)` of `{scope}/providers/Microsoft.Resources/deployments/{name}`.
pub fn split_deployment_id(id: &str) -> Option<(String, String)> {
    let lower = id.to_ascii_lowercase();
    let marker = "/providers/microsoft.resources/deployments/";
    let at = lower.rfind(marker)?;
    let name = &id[at + marker.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| (id[..at].to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_ids_split_into_scope_and_name() {
        assert_eq!(
            split_deployment_id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/child"
            ),
            Some(("/subscriptions/s/resourceGroups/rg".into(), "child".into()))
        );
        assert_eq!(
            split_deployment_id("/subscriptions/s/resourceGroups/rg"),
            None
        );
    }

    #[test]
    fn deployment_paths_name_the_scope() {
        let path = deployment_path("/subscriptions/s", "d");
        assert_eq!(
            path,
            "/subscriptions/s/providers/Microsoft.Resources/deployments/d"
        );
        assert_eq!(
            split_deployment_id(&path),
            Some(("/subscriptions/s".into(), "d".into()))
        );
    }
}

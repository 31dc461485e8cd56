//! Deployment stacks (`deploymentStacks`, `deploymentStacksWhatIfResults`, api-version 2025-07-01: extension
//! configs, `resourcesWithoutDeleteSupport`, what-if results; cairn's drift detection). A PUT or DELETE returns once accepted, with the
//! polling interval the server asked for: the stack record itself (GET) carries the per-resource progress, so a
//! caller follows the record rather than the operation status.

use std::time::Duration;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::models::stack_drift::DeploymentStackDriftRequest;
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::STACKS_API_VERSION;
use crate::client::Client;
use crate::error::ClientError;

/// A stack PUT or DELETE the server took: the answer's body (the accepted stack for a PUT, `Null` for a DELETE)
/// and how long to wait between reads of the stack (`Retry-After`, within the client's polling bounds).
#[derive(Clone, Debug)]
pub struct Accepted {
    pub body: Value,
    pub poll: Duration,
}

/// A stack drift detection the server started (`POST .../detectDrift`, 202): the result as it started, where its
/// result is read (`Location`: 202 while it runs, then 200), and how long to wait between reads.
#[derive(Clone, Debug)]
pub struct DriftStarted {
    pub body: Value,
    pub location: String,
    pub poll: Duration,
}

/// One read of a drift detection's result.
#[derive(Clone, Debug)]
pub struct DriftRead {
    /// The result: the resources read so far while it runs, all of them when it has ended.
    pub body: Value,
    /// Whether the detection has ended (`Succeeded` or `Failed`).
    pub ended: bool,
    pub poll: Duration,
}

/// `{scope}/providers/Microsoft.Resources/deploymentStacks/{name}`.
pub fn stack_path(scope: &str, name: &str) -> String {
    format!("{scope}/providers/Microsoft.Resources/deploymentStacks/{name}")
}

impl Client {
    fn stack_url(&self, scope: &str, name: &str, suffix: &str) -> String {
        self.url(
            &format!("{}{suffix}", stack_path(scope, name)),
            STACKS_API_VERSION,
            &[],
        )
    }

    /// Starts a stack create or update (`PUT`, 201/200 + `Azure-AsyncOperation`); an invalid request, or a stack
    /// busy with another operation, is the server's ARM error.
    pub async fn put_stack(
        &self,
        scope: &str,
        name: &str,
        stack: &DeploymentStack,
    ) -> Result<Accepted, ClientError> {
        let body = serde_json::to_value(stack)?;
        let url = self.stack_url(scope, name, "");
        let answer = self.send(Method::PUT, &url, Some(&body)).await?;
        Ok(Accepted {
            poll: self.poll_delay(answer.retry_after),
            body: answer.body,
        })
    }

    /// The stack, or 404 `DeploymentStackNotFound`.
    pub async fn get_stack(&self, scope: &str, name: &str) -> Result<Value, ClientError> {
        let url = self.stack_url(scope, name, "");
        Ok(self.send(Method::GET, &url, None).await?.body)
    }

    /// The stack unless it still reads as `etag`, the server holding the read until it changes or `wait` passes:
    /// `None` when unchanged. The answer's tag, and whether the server held the read, come with it.
    pub async fn get_stack_if_changed(
        &self,
        scope: &str,
        name: &str,
        etag: Option<&str>,
        wait: Duration,
    ) -> Result<HeldRead, ClientError> {
        let url = self.stack_url(scope, name, "");
        let answer = self.get_if_changed(&url, etag, wait).await?;
        Ok(HeldRead {
            stack: (answer.status != StatusCode::NOT_MODIFIED).then_some(answer.body),
            etag: answer.etag,
            held: answer.waited,
        })
    }

    /// The stacks of a scope, every page.
    pub async fn list_stacks(&self, scope: &str) -> Result<Vec<Value>, ClientError> {
        let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks");
        self.list_url(self.url(&path, STACKS_API_VERSION, &[]))
            .await
    }

    /// Starts deleting a stack with the options as `unmanageAction.*` and `bypassStackOutOfSyncError` query
    /// parameters; `None` when there is no such stack (204).
    pub async fn delete_stack(
        &self,
        scope: &str,
        name: &str,
        options: &StackDeleteOptions,
    ) -> Result<Option<Accepted>, ClientError> {
        let action = &options.action_on_unmanage;
        let mut query = vec![
            ("unmanageAction.Resources", action.resources.as_str()),
            (
                "unmanageAction.ResourceGroups",
                action.for_resource_groups().as_str(),
            ),
            (
                "unmanageAction.ManagementGroups",
                action.for_management_groups().as_str(),
            ),
        ];
        if let Some(without) = &action.resources_without_delete_support {
            query.push((
                "unmanageAction.ResourcesWithoutDeleteSupport",
                without.as_str(),
            ));
        }
        if options.bypass_stack_out_of_sync_error {
            query.push(("bypassStackOutOfSyncError", "true"));
        }
        if options.bypass_protection {
            query.push(("bypassProtection", "true"));
        }
        let url = self.url(&stack_path(scope, name), STACKS_API_VERSION, &query);
        let answer = self.send(Method::DELETE, &url, None).await?;
        if answer.status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(Accepted {
            poll: self.poll_delay(answer.retry_after),
            body: answer.body,
        }))
    }

    /// `POST .../validate`: the validate result; an invalid stack is the 400 ARM error the result carries.
    pub async fn validate_stack(
        &self,
        scope: &str,
        name: &str,
        stack: &DeploymentStack,
    ) -> Result<Value, ClientError> {
        let body = serde_json::to_value(stack)?;
        let url = self.stack_url(scope, name, "/validate");
        let answer = self.send(Method::POST, &url, Some(&body)).await?;
        Ok(self.follow_location(answer).await?.body)
    }

    /// `POST .../exportTemplate`: `{template?, templateLink?}`.
    pub async fn export_stack_template(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Value, ClientError> {
        let url = self.stack_url(scope, name, "/exportTemplate");
        Ok(self.send(Method::POST, &url, None).await?.body)
    }

    /// Cancels the stack's running operation (cairn's `POST .../cancel`): 409 when nothing runs.
    pub async fn cancel_stack(&self, scope: &str, name: &str) -> Result<(), ClientError> {
        let url = self.stack_url(scope, name, "/cancel");
        self.send(Method::POST, &url, None).await?;
        Ok(())
    }

    /// Starts a drift detection of a stack (cairn's `POST .../detectDrift`); a missing stack is 404
    /// `DeploymentStackNotFound`, a detection already running 409.
    pub async fn detect_stack_drift(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStackDriftRequest,
    ) -> Result<DriftStarted, ClientError> {
        let body = serde_json::to_value(request)?;
        let url = self.stack_url(scope, name, "/detectDrift");
        let answer = self.send(Method::POST, &url, Some(&body)).await?;
        // Without a `Location` the result is found by its id.
        let location = answer.location.clone().unwrap_or_else(|| {
            let id = answer.body["name"].as_str().unwrap_or_default();
            self.stack_url(scope, name, &format!("/driftDetectionResults/{id}"))
        });
        Ok(DriftStarted {
            poll: self.poll_delay(answer.retry_after),
            body: answer.body,
            location,
        })
    }

    /// Reads a drift detection's result at its `Location`.
    pub async fn read_stack_drift(&self, location: &str) -> Result<DriftRead, ClientError> {
        let answer = self.send(Method::GET, location, None).await?;
        Ok(DriftRead {
            ended: answer.status != StatusCode::ACCEPTED,
            poll: self.poll_delay(answer.retry_after),
            body: answer.body,
        })
    }

    /// Computes a stack what-if result (`PUT .../deploymentStacksWhatIfResults/{name}`) and follows it until it
    /// is terminal (cairn answers with the finished result; another server may still be running it).
    pub async fn stack_what_if(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStacksWhatIfResult,
    ) -> Result<Value, ClientError> {
        let body = serde_json::to_value(request)?;
        let path =
            format!("{scope}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/{name}");
        let url = self.url(&path, STACKS_API_VERSION, &[]);
        let mut answer = self.send(Method::PUT, &url, Some(&body)).await?;
        loop {
            let state = answer
                .body
                .pointer("/properties/provisioningState")
                .and_then(Value::as_str)
                .unwrap_or("succeeded");
            if matches!(
                state.to_ascii_lowercase().as_str(),
                "succeeded" | "failed" | "canceled"
            ) {
                return Ok(answer.body);
            }
            tokio::time::sleep(self.poll_delay(answer.retry_after)).await;
            answer = self.send(Method::GET, &url, None).await?;
        }
    }
}

/// A stack read that the server may hold until the stack changes ([`Client::get_stack_if_changed`]).
#[derive(Clone, Debug)]
pub struct HeldRead {
    /// The stack, `None` when it still reads as the tag asked with.
    pub stack: Option<Value>,
    /// The stack's entity tag now.
    pub etag: Option<String>,
    /// Whether the server held the read (`Preference-Applied: wait`); when not, a follower paces its reads itself.
    pub held: bool,
}

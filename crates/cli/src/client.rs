//! `--server URL` mode: an ARM REST client for a cairn server (resource groups, deployments, Key Vault's
//! management plane and deployment stacks), with bearer tokens, a custom CA for self-signed certificates, and ARM's
//! long-running operations: `Azure-AsyncOperation` (status polling), `Location` (202 polling) and `Retry-After`.
//!
//! Deployment stacks use their own API version (2025-07-01: extension configs, `resourcesWithoutDeleteSupport`,
//! what-if results). Their PUT and DELETE return once accepted with the polling interval the server asked for:
//! the stack commands follow the stack record itself (GET), which carries the per-resource progress.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use cairn_arm::models::deployment::{Deployment, DeploymentWhatIf};
use cairn_arm::models::stack::StackDeleteOptions;
use cairn_arm::{ArmError, ErrorDetail, ErrorResponse};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::output::Failure;
use crate::progress::{Progress, parse_iso_duration};

/// The API version of every request but the stack ones (resource groups and deployments share it).
const API_VERSION: &str = "2025-04-01";
/// The API version of deployment stack requests (`deploymentStacks`, `deploymentStacksWhatIfResults`).
const STACKS_API_VERSION: &str = "2025-07-01";
/// Polling interval when the server sends no `Retry-After`.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Longest wait between polls, whatever `Retry-After` says (a live view wants updates).
const MAX_POLL: Duration = Duration::from_secs(10);

/// Characters escaped in a path segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// Characters escaped in a query parameter value.
const QUERY_VALUE: &AsciiSet = &SEGMENT.add(b'&').add(b'=').add(b'+').add(b'/').add(b';');

/// A stack PUT or DELETE the server took: the answer's body (the accepted stack for a PUT, `Null` for a DELETE)
/// and how long to wait between polls (`Retry-After`, bounded).
#[derive(Debug)]
pub(crate) struct StackAccepted {
    pub(crate) body: Value,
    pub(crate) poll: Duration,
}

/// A client for one server.
pub(crate) struct ArmClient {
    http: reqwest::Client,
    base: String,
}

/// A response: status, the headers the poller needs, and the JSON body (`Null` when empty).
struct Answer {
    status: StatusCode,
    body: Value,
    async_operation: Option<String>,
    location: Option<String>,
    retry_after: Option<Duration>,
}

impl ArmClient {
    pub(crate) fn new(
        server: &str,
        token: Option<&str>,
        ca_cert: Option<&Path>,
    ) -> Result<Self, Failure> {
        cairn_server::install_crypto_provider();
        let base = server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::usage(format!(
                "--server '{server}' must be an http:// or https:// URL"
            )));
        }
        let mut headers = HeaderMap::new();
        if let Some(token) = token.filter(|t| !t.is_empty()) {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| Failure::usage("the token holds characters a header cannot carry"))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!("cairn-cli/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120));
        if let Some(path) = ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                Failure::usage(format!("{} is not a PEM certificate: {e}", path.display()))
            })?;
            if certs.is_empty() {
                return Err(Failure::usage(format!(
                    "{} holds no PEM certificate",
                    path.display()
                )));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .context("cannot build the HTTP client")
            .map_err(Failure::Other)?;
        Ok(ArmClient { http, base })
    }

    /// `{base}{path}?api-version=...` with each path segment escaped.
    fn url(&self, path: &str) -> String {
        self.url_at(path, API_VERSION, &[])
    }

    /// `{base}{path}?api-version={api_version}&{name}={value}...` with path segments and values escaped.
    fn url_at(&self, path: &str, api_version: &str, query: &[(&str, &str)]) -> String {
        let encoded: Vec<String> = path
            .split('/')
            .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
            .collect();
        let mut url = format!(
            "{}{}?api-version={api_version}",
            self.base,
            encoded.join("/")
        );
        for (name, value) in query {
            url.push_str(&format!(
                "&{name}={}",
                utf8_percent_encode(value, QUERY_VALUE)
            ));
        }
        url
    }

    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let mut request = self
            .http
            .request(method.clone(), url)
            .header("x-ms-client-request-id", uuid::Uuid::new_v4().to_string());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| {
            Failure::Other(anyhow::anyhow!(
                "cannot reach the server at {}: {}",
                self.base,
                error_chain(&e)
            ))
        })?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let async_operation = header("azure-asyncoperation");
        let location = header("location");
        let retry_after = header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = response.bytes().await.map_err(|e| {
            Failure::Other(anyhow::anyhow!(
                "cannot read the server's answer: {}",
                error_chain(&e)
            ))
        })?;
        let body = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|_| {
                Failure::Other(anyhow::anyhow!(
                    "the server answered {method} {} with {status} and a body that is not JSON",
                    strip_query(url)
                ))
            })?
        };
        if status.is_client_error() || status.is_server_error() {
            return Err(Failure::Arm(arm_error(status, &body)));
        }
        Ok(Answer {
            status,
            body,
            async_operation,
            location,
            retry_after,
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        self.send(method, &self.url(path), body).await
    }

    /// Follows a 202 + `Location` to its end and returns the final answer.
    async fn follow_location(&self, mut answer: Answer) -> Result<Answer, Failure> {
        while answer.status == StatusCode::ACCEPTED {
            let Some(location) = answer.location.clone() else {
                break;
            };
            tokio::time::sleep(poll_delay(answer.retry_after)).await;
            answer = self.send(Method::GET, &location, None).await?;
        }
        Ok(answer)
    }

    /// Creates or updates a local Key Vault vault through the server's resource API.
    pub(crate) async fn put_vault(&self, id: &str, body: &Value) -> Result<Value, Failure> {
        Ok(self.call(Method::PUT, id, Some(body)).await?.body)
    }

    /// Whether the vault `id` exists.
    pub(crate) async fn vault_exists(&self, id: &str) -> Result<bool, Failure> {
        match self.call(Method::GET, id, None).await {
            Ok(_) => Ok(true),
            Err(Failure::Arm(e)) if e.status() == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets a secret (a new version) through the server's resource API; the answer never holds the value.
    pub(crate) async fn put_secret(
        &self,
        vault_id: &str,
        name: &str,
        value: &str,
        content_type: Option<&str>,
    ) -> Result<Value, Failure> {
        let mut properties = serde_json::json!({ "value": value });
        if let Some(ct) = content_type {
            properties["contentType"] = Value::String(ct.to_string());
        }
        let body = serde_json::json!({ "properties": properties });
        Ok(self
            .call(
                Method::PUT,
                &format!("{vault_id}/secrets/{name}"),
                Some(&body),
            )
            .await?
            .body)
    }

    /// GETs a list and its `nextLink` pages.
    async fn list(&self, path: &str) -> Result<Vec<Value>, Failure> {
        self.list_url(self.url(path)).await
    }

    /// GETs the list at `url` and its `nextLink` pages.
    async fn list_url(&self, mut url: String) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        loop {
            let answer = self.send(Method::GET, &url, None).await?;
            if let Some(value) = answer.body["value"].as_array() {
                items.extend(value.iter().cloned());
            }
            match answer.body["nextLink"].as_str() {
                Some(next) if !next.is_empty() => url = next.to_string(),
                _ => return Ok(items),
            }
        }
    }

    pub(crate) async fn put_group(&self, id: &str, body: &Value) -> Result<Value, Failure> {
        Ok(self.call(Method::PUT, id, Some(body)).await?.body)
    }

    pub(crate) async fn get_group(&self, id: &str) -> Result<Value, Failure> {
        Ok(self.call(Method::GET, id, None).await?.body)
    }

    pub(crate) async fn list_groups(&self, subscription: &str) -> Result<Vec<Value>, Failure> {
        self.list(&format!("/subscriptions/{subscription}/resourcegroups"))
            .await
    }

    pub(crate) async fn delete_group(&self, id: &str) -> Result<(), Failure> {
        let answer = self.call(Method::DELETE, id, None).await?;
        self.follow_location(answer).await?;
        Ok(())
    }

    fn deployment_path(scope: &str, name: &str) -> String {
        format!("{scope}/providers/Microsoft.Resources/deployments/{name}")
    }

    pub(crate) async fn deploy(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
        wait: bool,
        progress: &mut Progress,
    ) -> Result<Value, Failure> {
        let path = Self::deployment_path(scope, name);
        let body = serde_json::to_value(&request).map_err(|e| Failure::Other(e.into()))?;
        let accepted = self.call(Method::PUT, &path, Some(&body)).await?;
        if !wait {
            return Ok(accepted.body);
        }
        progress.start(name);
        let mut delay = poll_delay(accepted.retry_after);
        let status_url = accepted.async_operation.clone();
        loop {
            // The record is the truth; the async status only tells when to stop.
            let terminal = match &status_url {
                Some(url) => {
                    let status = self.send(Method::GET, url, None).await?;
                    delay = poll_delay(status.retry_after.or(Some(delay)));
                    matches!(
                        status.body["status"].as_str(),
                        Some("Succeeded" | "Failed" | "Canceled")
                    )
                }
                None => {
                    let record = self.call(Method::GET, &path, None).await?;
                    matches!(
                        record
                            .body
                            .pointer("/properties/provisioningState")
                            .and_then(Value::as_str),
                        Some("Succeeded" | "Failed" | "Canceled")
                    )
                }
            };
            if let Ok(ops) = self.operations(scope, name).await {
                progress.operations(name, 0, &ops);
                self.nested_progress(&ops, 1, progress).await;
            }
            if terminal {
                break;
            }
            tokio::time::sleep(delay).await;
            progress.tick();
        }
        let record = self.call(Method::GET, &path, None).await?.body;
        let properties = &record["properties"];
        progress.done(
            properties["provisioningState"]
                .as_str()
                .unwrap_or("Unknown"),
            properties["duration"].as_str().and_then(parse_iso_duration),
        );
        progress.finish();
        Ok(record)
    }

    /// Shows the operations of nested deployments (one level per call, down to a fixed depth).
    async fn nested_progress(&self, ops: &[Value], depth: usize, progress: &mut Progress) {
        const MAX_SHOWN_DEPTH: usize = 4;
        if depth > MAX_SHOWN_DEPTH {
            return;
        }
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
            if let Ok(child_ops) = self.operations(&scope, &child).await {
                progress.operations(&child, depth, &child_ops);
                Box::pin(self.nested_progress(&child_ops, depth + 1, progress)).await;
            }
        }
    }

    pub(crate) async fn get_deployment(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        Ok(self
            .call(Method::GET, &Self::deployment_path(scope, name), None)
            .await?
            .body)
    }

    pub(crate) async fn list_deployments(&self, scope: &str) -> Result<Vec<Value>, Failure> {
        self.list(&format!(
            "{scope}/providers/Microsoft.Resources/deployments"
        ))
        .await
    }

    pub(crate) async fn delete_deployment(&self, scope: &str, name: &str) -> Result<(), Failure> {
        let path = Self::deployment_path(scope, name);
        // ARM answers DELETE of a missing deployment with 204; az reports it as not found.
        self.call(Method::GET, &path, None).await?;
        let answer = self.call(Method::DELETE, &path, None).await?;
        self.follow_location(answer).await?;
        Ok(())
    }

    pub(crate) async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: Deployment,
    ) -> Result<Value, Failure> {
        let body = serde_json::to_value(&request).map_err(|e| Failure::Other(e.into()))?;
        let path = format!("{}/validate", Self::deployment_path(scope, name));
        let answer = self.call(Method::POST, &path, Some(&body)).await?;
        Ok(self.follow_location(answer).await?.body)
    }

    pub(crate) async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentWhatIf,
    ) -> Result<Value, Failure> {
        let body = serde_json::to_value(&request).map_err(|e| Failure::Other(e.into()))?;
        let path = format!("{}/whatIf", Self::deployment_path(scope, name));
        let answer = self.call(Method::POST, &path, Some(&body)).await?;
        Ok(self.follow_location(answer).await?.body)
    }

    pub(crate) async fn cancel(&self, scope: &str, name: &str) -> Result<(), Failure> {
        let path = format!("{}/cancel", Self::deployment_path(scope, name));
        self.call(Method::POST, &path, None).await?;
        Ok(())
    }

    pub(crate) async fn export(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        let path = format!("{}/exportTemplate", Self::deployment_path(scope, name));
        Ok(self.call(Method::POST, &path, None).await?.body)
    }

    pub(crate) async fn operations(&self, scope: &str, name: &str) -> Result<Vec<Value>, Failure> {
        self.list(&format!(
            "{}/operations",
            Self::deployment_path(scope, name)
        ))
        .await
    }

    fn stack_path(scope: &str, name: &str) -> String {
        format!("{scope}/providers/Microsoft.Resources/deploymentStacks/{name}")
    }

    fn stack_url(&self, scope: &str, name: &str, suffix: &str) -> String {
        self.url_at(
            &format!("{}{suffix}", Self::stack_path(scope, name)),
            STACKS_API_VERSION,
            &[],
        )
    }

    /// Starts a stack create or update (`PUT`, 201/200 + `Azure-AsyncOperation`); an invalid request, or a stack
    /// busy with another operation, is the server's ARM error.
    pub(crate) async fn put_stack(
        &self,
        scope: &str,
        name: &str,
        body: &Value,
    ) -> Result<StackAccepted, Failure> {
        let url = self.stack_url(scope, name, "");
        let answer = self.send(Method::PUT, &url, Some(body)).await?;
        Ok(StackAccepted {
            poll: poll_delay(answer.retry_after),
            body: answer.body,
        })
    }

    /// The stack, or 404 `DeploymentStackNotFound`.
    pub(crate) async fn get_stack(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        let url = self.stack_url(scope, name, "");
        Ok(self.send(Method::GET, &url, None).await?.body)
    }

    /// The stacks of a scope, every page.
    pub(crate) async fn list_stacks(&self, scope: &str) -> Result<Vec<Value>, Failure> {
        let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks");
        self.list_url(self.url_at(&path, STACKS_API_VERSION, &[]))
            .await
    }

    /// Starts deleting a stack with the options as `unmanageAction.*` and `bypassStackOutOfSyncError` query
    /// parameters; `None` when there is no such stack (204).
    pub(crate) async fn delete_stack(
        &self,
        scope: &str,
        name: &str,
        options: &StackDeleteOptions,
    ) -> Result<Option<StackAccepted>, Failure> {
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
        let url = self.url_at(&Self::stack_path(scope, name), STACKS_API_VERSION, &query);
        let answer = self.send(Method::DELETE, &url, None).await?;
        if answer.status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(StackAccepted {
            poll: poll_delay(answer.retry_after),
            body: answer.body,
        }))
    }

    /// `POST .../validate`: the validate result; an invalid stack is the 400 ARM error the result carries.
    pub(crate) async fn validate_stack(
        &self,
        scope: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, Failure> {
        let url = self.stack_url(scope, name, "/validate");
        let answer = self.send(Method::POST, &url, Some(body)).await?;
        Ok(self.follow_location(answer).await?.body)
    }

    /// `POST .../exportTemplate`: `{template?, templateLink?}`.
    pub(crate) async fn export_stack_template(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Value, Failure> {
        let url = self.stack_url(scope, name, "/exportTemplate");
        Ok(self.send(Method::POST, &url, None).await?.body)
    }

    /// Computes a stack what-if result (`PUT .../deploymentStacksWhatIfResults/{name}`) and follows it until it
    /// is terminal (cairn answers with the finished result; another server may still be running it).
    pub(crate) async fn stack_what_if(
        &self,
        scope: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, Failure> {
        let path =
            format!("{scope}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/{name}");
        let url = self.url_at(&path, STACKS_API_VERSION, &[]);
        let mut answer = self.send(Method::PUT, &url, Some(body)).await?;
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
            tokio::time::sleep(poll_delay(answer.retry_after)).await;
            answer = self.send(Method::GET, &url, None).await?;
        }
    }
}

/// `(scope, name)` of `{scope}/providers/Microsoft.Resources/deployments/{name}`.
fn split_deployment_id(id: &str) -> Option<(String, String)> {
    let lower = id.to_ascii_lowercase();
    let marker = "/providers/microsoft.resources/deployments/";
    let at = lower.rfind(marker)?;
    let name = &id[at + marker.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| (id[..at].to_string(), name.to_string()))
}

/// An error answer as an ARM error: the body's `error` (validate results carry it too), else the status.
fn arm_error(status: StatusCode, body: &Value) -> ArmError {
    let detail = serde_json::from_value::<ErrorResponse>(body.clone())
        .ok()
        .map(|r| r.error)
        .filter(|d| d.code.is_some() || d.message.is_some())
        .unwrap_or_else(|| {
            ErrorDetail::new(
                status
                    .canonical_reason()
                    .unwrap_or("Error")
                    .replace(' ', ""),
                format!("The server answered {status} without an ARM error body."),
            )
        });
    ArmError::from_detail(status.as_u16(), detail)
}

fn poll_delay(retry_after: Option<Duration>) -> Duration {
    retry_after
        .unwrap_or(DEFAULT_POLL)
        .clamp(Duration::from_millis(200), MAX_POLL)
}

fn strip_query(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// The causes of a reqwest error, joined (reqwest's own message hides them).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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
    fn error_bodies_become_arm_errors() {
        let e = arm_error(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": {"code": "DeploymentNotFound", "message": "m"}}),
        );
        assert_eq!((e.status(), e.code()), (404, "DeploymentNotFound"));
        let e = arm_error(StatusCode::BAD_GATEWAY, &Value::Null);
        assert_eq!(e.code(), "BadGateway");
    }

    #[test]
    fn stack_urls_carry_their_api_version_and_escaped_query() {
        let client = ArmClient::new("http://127.0.0.1:1", None, None).unwrap();
        assert_eq!(
            client.url_at(
                "/subscriptions/s/providers/Microsoft.Resources/deploymentStacks/st",
                STACKS_API_VERSION,
                &[("unmanageAction.Resources", "delete"), ("odd", "a&b=c d")]
            ),
            "http://127.0.0.1:1/subscriptions/s/providers/Microsoft.Resources/deploymentStacks/st\
             ?api-version=2025-07-01&unmanageAction.Resources=delete&odd=a%26b%3Dc%20d"
        );
    }

    #[test]
    fn paths_are_escaped_per_segment() {
        let client = ArmClient::new("http://127.0.0.1:1/", None, None).unwrap();
        assert_eq!(
            client.url("/subscriptions/s/resourceGroups/my rg"),
            "http://127.0.0.1:1/subscriptions/s/resourceGroups/my%20rg?api-version=2025-04-01"
        );
    }
}

//! `cairn-client`: an ARM REST client for a cairn server (`cairn serve`) — resource groups, deployments at any
//! scope, Key Vault's management plane and deployment stacks — for the `cairn` CLI's `--server` mode, other
//! programs and test suites.
//!
//! ```no_run
//! # async fn example() -> Result<(), cairn_client::ClientError> {
//! use cairn_client::Client;
//!
//! let client = Client::builder("https://127.0.0.1:8443")
//!     .bearer_token("my-token")
//!     .ca_certificate_file("server.pem")
//!     .build()?;
//! let group = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg";
//! client.put_group(group, &serde_json::json!({"location": "local"})).await?;
//! let request = serde_json::from_value(serde_json::json!({
//!     "properties": {"mode": "Incremental", "template": {
//!         "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
//!         "contentVersion": "1.0.0.0", "resources": []
//!     }}
//! }))?;
//! let accepted = client.create_deployment(group, "app", &request).await?;
//! let record = client.wait_for_deployment(group, "app", &accepted, &mut ()).await?;
//! assert_eq!(record["properties"]["provisioningState"], "Succeeded");
//! # Ok(()) }
//! ```
//!
//! - [`Client`] is built with [`Client::builder`]: base URL, bearer token (a sensitive header; never in `Debug`
//!   or an error), extra trusted CA certificates (PEM, e.g. a self-signed server certificate), timeouts and
//!   [`Polling`] bounds. It is cheap to clone.
//! - Low level: [`Client::url`] (escaped segments, `api-version`, escaped query values), [`Client::send`] (one
//!   request; a 4xx/5xx answer is [`ClientError::Arm`] with the server's ARM error), [`Client::list_url`]
//!   (`nextLink` pages), [`Client::follow_location`].
//! - Long-running operations, per ARM: a 202 with `Location` is polled (GET) while it answers 202; a deployment
//!   PUT's `Azure-AsyncOperation` status is polled until `Succeeded`, `Failed` or `Canceled` (the record when the
//!   server gave no status URL), then the record is read; each wait is the answer's `Retry-After` within the
//!   client's [`Polling`] bounds (default 1 s when absent, at least 200 ms, at most 10 s). Stack PUT and DELETE
//!   return [`Accepted`] with the wait the server asked for, and the caller follows the stack record.
//! - Resource helpers return the server's JSON as is (`serde_json::Value`), so fields this crate does not model
//!   survive; requests take the typed models of `cairn-arm`.
//!
//! Errors are typed ([`ClientError`]); the crate does no logging and reads no environment.

mod client;
mod deployments;
mod error;
mod resources;
mod stacks;

pub use client::{Client, ClientBuilder, Polling, Response};
pub use deployments::{DeploymentWatcher, deployment_path, split_deployment_id};
pub use error::ClientError;
pub use reqwest::{Method, StatusCode};
pub use stacks::{Accepted, DriftRead, DriftStarted, HeldRead, stack_path};

/// The API version of every request but the stack ones (resource groups, deployments, Key Vault).
pub const API_VERSION: &str = "2025-04-01";
/// The API version of deployment stack requests (`deploymentStacks`, `deploymentStacksWhatIfResults`).
pub const STACKS_API_VERSION: &str = "2025-07-01";

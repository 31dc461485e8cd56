//! `--server URL` mode: the `cairn-client` crate's ARM client built from the connection flags, its errors as the
//! CLI's failures, and a deployment followed with the progress view.

use std::path::Path;

use cairn_arm::models::deployment::Deployment;
use cairn_client::{Client, ClientError, DeploymentWatcher};
use serde_json::Value;

use crate::output::Failure;
use crate::progress::{Progress, parse_iso_duration};

/// The client for `--server URL` with `--token` and `--ca-cert`.
pub(crate) fn connect(
    server: &str,
    token: Option<&str>,
    ca_cert: Option<&Path>,
) -> Result<Client, Failure> {
    cairn_server::install_crypto_provider();
    let mut builder =
        Client::builder(server).user_agent(concat!("cairn-cli/", env!("CARGO_PKG_VERSION")));
    if let Some(token) = token {
        builder = builder.bearer_token(token);
    }
    if let Some(path) = ca_cert {
        builder = builder.ca_certificate_file(path);
    }
    builder.build().map_err(Failure::from)
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Arm(e) => Failure::Arm(e),
            ClientError::InvalidBaseUrl(url) => Failure::usage(format!(
                "--server '{url}' must be an http:// or https:// URL"
            )),
            e if e.is_configuration() => Failure::Usage(e.to_string()),
            e => Failure::Other(e.into()),
        }
    }
}

impl DeploymentWatcher for Progress {
    fn operations(&mut self, deployment: &str, depth: usize, operations: &[Value]) {
        Progress::operations(self, deployment, depth, operations);
    }

    fn tick(&mut self) {
        Progress::tick(self);
    }

    fn operations_interval(&self) -> Option<std::time::Duration> {
        Progress::operations_interval(self)
    }
}

/// Starts a deployment on the server; with `wait`, follows it to the end (showing `progress`) and returns the
/// final record, else the accepted one.
pub(crate) async fn deploy(
    client: &Client,
    scope: &str,
    name: &str,
    request: Deployment,
    wait: bool,
    progress: &mut Progress,
) -> Result<Value, Failure> {
    let accepted = client.create_deployment(scope, name, &request).await?;
    if !wait {
        return Ok(accepted.body);
    }
    progress.start(name);
    let record = client
        .wait_for_deployment(scope, name, &accepted, progress)
        .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_keep_their_exit_codes() {
        let bad_url = connect("ftp://x", None, None).unwrap_err();
        assert!(
            matches!(&bad_url, Failure::Usage(m) if m.contains("--server 'ftp://x'")),
            "{bad_url:?}"
        );
        let bad_token = connect("http://x", Some("a\nb"), None).unwrap_err();
        assert!(matches!(bad_token, Failure::Usage(_)));
        let not_found = Failure::from(ClientError::Arm(cairn_arm::ArmError::new(
            404,
            "DeploymentNotFound",
            "m",
        )));
        assert_eq!(not_found.exit_code(), crate::output::EXIT_FAILED);
        let unreachable = Failure::from(ClientError::Unreachable {
            base: "http://x".into(),
            reason: "refused".into(),
        });
        assert!(
            matches!(&unreachable, Failure::Other(e) if e.to_string().contains("cannot reach the server"))
        );
    }
}

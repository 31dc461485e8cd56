//! Shared helpers for the Local extension's integration tests: a loopback HTTP transport and the binary.

#![allow(dead_code)] // each test file uses a subset

use std::process::Stdio;

use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse,
};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The `cairn-ext-local` binary cargo built for these tests.
pub const BINARY: &str = env!("CARGO_BIN_EXE_cairn-ext-local");

/// A minimal v2 HTTP client transport for loopback tests (the host crate has the real one).
pub struct LoopbackHttp {
    pub client: reqwest::Client,
    pub base: String,
}

impl ExtensionTransport for LoopbackHttp {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let url = format!(
                "{}/{}/{}",
                self.base,
                request.extension_version,
                request.operation.route()
            );
            let mut builder = self
                .client
                .post(url)
                .header("content-type", "application/json");
            for (name, value) in &request.headers {
                builder = builder.header(name.as_str(), value.as_str());
            }
            let response =
                builder
                    .body(request.body)
                    .send()
                    .await
                    .map_err(|err| TransportError::Io {
                        message: err.to_string(),
                    })?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
                .collect();
            let body = response.bytes().await.map_err(|err| TransportError::Io {
                message: err.to_string(),
            })?;
            Ok(TransportResponse {
                status,
                headers,
                body: body.to_vec(),
            })
        })
    }
}

/// A running `cairn-ext-local --http 0` and its base URL; killed on drop.
pub struct HttpServer {
    pub child: tokio::process::Child,
    pub base: String,
}

/// Starts the binary on a free loopback port and waits for its `listening on` line.
pub async fn start_http_server() -> HttpServer {
    let mut child = tokio::process::Command::new(BINARY)
        .args(["--http", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start cairn-ext-local");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the server printed its address in time")
        .expect("read stdout")
        .expect("a line");
    let base = line
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_owned();
    HttpServer { child, base }
}

/// The Local conformance profile with a fresh root directory.
pub fn profile(root: &std::path::Path) -> cairn_conformance::Profile {
    let root = root.to_str().expect("utf-8 temp dir");
    cairn_conformance::Profile::parse(cairn_ext_local::CONFORMANCE_PROFILE, &[("tempDir", root)])
        .expect("profile")
}

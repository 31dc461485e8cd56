//! [`LocalProcessTransport`]: the host's transport for a local gRPC extension binary.
//!
//! The binary is started with `--socket <path>` (a Unix socket in a private 0700 temporary directory) and
//! is ready once `Ping` succeeds (tried every 50 ms, for at most 30 s; the process exiting first is a
//! failure). One process serves every call; if it has died, the next call starts a new one. Shutdown sends
//! SIGTERM and kills the process after a grace period.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, Operation, TransportError, TransportRequest, TransportResponse,
    TypeFiles,
};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tonic::transport::Channel;

use crate::client::{BicepExtensionClient, unix_socket_channel};
use crate::mapping;

/// How to start a local extension.
#[derive(Clone)]
pub struct LaunchSpec {
    /// The extension binary.
    pub program: PathBuf,
    /// Arguments placed before `--socket <path>`.
    pub args: Vec<String>,
    /// Extra environment variables (names and values are not logged).
    pub env: Vec<(String, String)>,
    /// How long the process may take to answer `Ping` (Bicep: 30 s).
    pub startup_timeout: Duration,
    /// Interval between startup pings (Bicep: 50 ms).
    pub ping_interval: Duration,
    /// How long shutdown waits after SIGTERM before killing the process.
    pub shutdown_grace: Duration,
}

impl LaunchSpec {
    /// Bicep's defaults: 30 s startup limit, pings every 50 ms, 5 s grace on shutdown.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            startup_timeout: Duration::from_secs(30),
            ping_interval: Duration::from_millis(50),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

impl std::fmt::Debug for LaunchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Environment values may be credentials: print the names only.
        let env_names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("LaunchSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_names", &env_names)
            .field("startup_timeout", &self.startup_timeout)
            .field("ping_interval", &self.ping_interval)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

struct Running {
    child: Child,
    pid: u32,
    client: BicepExtensionClient<Channel>,
    // Dropped with the process: removes the socket and its directory.
    _socket_dir: tempfile::TempDir,
}

/// An [`ExtensionTransport`] that runs a local extension binary and talks gRPC to it.
///
/// Construct it with [`LocalProcessTransport::new`] inside a tokio runtime; the process starts on the
/// first call (or [`LocalProcessTransport::start`]). Call [`LocalProcessTransport::shutdown`] when done;
/// dropping it sends SIGTERM and kills the process after the grace period.
pub struct LocalProcessTransport {
    spec: LaunchSpec,
    running: Mutex<Option<Running>>,
}

impl std::fmt::Debug for LocalProcessTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProcessTransport")
            .field("program", &self.spec.program)
            .finish_non_exhaustive()
    }
}

fn unavailable(message: impl Into<String>) -> TransportError {
    TransportError::Unavailable {
        message: message.into(),
    }
}

fn terminate(pid: u32) {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        // The process may already be gone; nothing to do then.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

/// Forwards a child's output to the debug log line by line (and keeps the pipe from filling up).
fn drain<R: AsyncRead + Unpin + Send + 'static>(
    stream: Option<R>,
    program: String,
    which: &'static str,
) {
    if let Some(stream) = stream {
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "cairn_extension_grpc::child", %program, stream = which, "{line}");
            }
        });
    }
}

fn private_socket_dir() -> Result<tempfile::TempDir, TransportError> {
    let dir = tempfile::Builder::new()
        .prefix("cairn-ext-")
        .tempdir()
        .map_err(|err| unavailable(format!("could not create a socket directory: {err}")))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(|err| unavailable(format!("could not protect the socket directory: {err}")))?;
    }
    Ok(dir)
}

async fn launch(spec: &LaunchSpec) -> Result<Running, TransportError> {
    let socket_dir = private_socket_dir()?;
    let socket = socket_dir.path().join("extension.sock");
    let program = spec.program.display().to_string();
    let mut child = Command::new(&spec.program)
        .args(&spec.args)
        .arg("--socket")
        .arg(&socket)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| unavailable(format!("could not start {program}: {err}")))?;
    let pid = child.id().unwrap_or_default();
    drain(child.stdout.take(), program.clone(), "stdout");
    drain(child.stderr.take(), program.clone(), "stderr");

    let mut client = BicepExtensionClient::new(unix_socket_channel(&socket));
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(unavailable(format!(
                "{program} exited during startup ({status})"
            )));
        }
        let attempt = tokio::time::timeout(
            spec.ping_interval.max(Duration::from_millis(500)),
            client.ping(),
        )
        .await;
        if let Ok(Ok(())) = attempt {
            tracing::debug!(%program, pid, elapsed_ms = started.elapsed().as_millis() as u64, "local extension ready");
            return Ok(Running {
                child,
                pid,
                client,
                _socket_dir: socket_dir,
            });
        }
        if started.elapsed() >= spec.startup_timeout {
            terminate(pid);
            let _ = child.kill().await;
            return Err(unavailable(format!(
                "{program} did not answer Ping within {} s",
                spec.startup_timeout.as_secs_f32()
            )));
        }
        tokio::time::sleep(spec.ping_interval).await;
    }
}

impl LocalProcessTransport {
    /// A transport for `spec`; nothing starts until the first call.
    pub fn new(spec: LaunchSpec) -> Self {
        Self {
            spec,
            running: Mutex::new(None),
        }
    }

    /// Starts the process now if it is not running (or has died), and waits until it answers `Ping`.
    pub async fn start(&self) -> Result<(), TransportError> {
        self.client().await.map(|_| ())
    }

    /// The process id of the running extension, if one is running.
    pub async fn pid(&self) -> Option<u32> {
        let mut running = self.running.lock().await;
        let process = running.as_mut()?;
        matches!(process.child.try_wait(), Ok(None)).then_some(process.pid)
    }

    /// A client for a live process, restarting the process if it exited.
    async fn client(&self) -> Result<BicepExtensionClient<Channel>, TransportError> {
        let mut running = self.running.lock().await;
        if let Some(process) = running.as_mut() {
            match process.child.try_wait() {
                Ok(None) => return Ok(process.client.clone()),
                Ok(Some(status)) => {
                    tracing::warn!(program = %self.spec.program.display(), %status, "local extension exited; restarting it");
                }
                Err(err) => {
                    tracing::warn!(program = %self.spec.program.display(), %err, "local extension lost; restarting it");
                }
            }
            *running = None;
        }
        let process = launch(&self.spec).await?;
        let client = process.client.clone();
        *running = Some(process);
        Ok(client)
    }

    /// Stops the process: SIGTERM, then a kill after the grace period.
    pub async fn shutdown(&self) {
        let Some(mut process) = self.running.lock().await.take() else {
            return;
        };
        terminate(process.pid);
        if tokio::time::timeout(self.spec.shutdown_grace, process.child.wait())
            .await
            .is_err()
        {
            tracing::warn!(program = %self.spec.program.display(), "local extension ignored SIGTERM; killing it");
            let _ = process.child.kill().await;
        }
    }

    async fn call(&self, request: TransportRequest) -> Result<TransportResponse, TransportError> {
        let operation = request.operation;
        if operation == Operation::GetLongRunningOperation {
            return Err(TransportError::Unsupported { operation });
        }
        let mut client = self.client().await?;
        let reply = match operation {
            Operation::CreateOrUpdate | Operation::Preview => {
                let message = match mapping::specification_to_proto(&request.body) {
                    Ok(message) => message,
                    Err(error) => return Ok(mapping::error_response(400, *error)),
                };
                if operation == Operation::Preview {
                    client.preview(message).await
                } else {
                    client.create_or_update(message).await
                }
            }
            Operation::Get | Operation::Delete => {
                let message = match mapping::reference_to_proto(&request.body) {
                    Ok(message) => message,
                    Err(error) => return Ok(mapping::error_response(400, *error)),
                };
                if operation == Operation::Get {
                    client.get(message).await
                } else {
                    client.delete(message).await
                }
            }
            Operation::GetLongRunningOperation => {
                return Err(TransportError::Unsupported { operation });
            }
        };
        let response = match reply {
            Ok(reply) => mapping::response_from_proto(operation, reply)?,
            Err(status) => mapping::response_from_status(operation, &status)?,
        };
        if response.body.len() > request.max_response_bytes {
            return Err(TransportError::ResponseTooLarge {
                limit: request.max_response_bytes,
            });
        }
        Ok(response)
    }
}

impl ExtensionTransport for LocalProcessTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(self.call(request))
    }

    /// `GetTypeFiles`; an extension that answers `Unimplemented` publishes none.
    fn type_files(&self) -> BoxFuture<'_, Result<Option<TypeFiles>, TransportError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            match client.get_type_files().await {
                Ok(answer) => {
                    let mut files: TypeFiles = answer.type_files.into_iter().collect();
                    files.insert("index.json".to_owned(), answer.index_file);
                    Ok(Some(files))
                }
                Err(status) if status.code() == tonic::Code::Unimplemented => Ok(None),
                Err(status) => Err(TransportError::InvalidResponse {
                    message: format!("GetTypeFiles failed: {}", status.message()),
                }),
            }
        })
    }
}

impl Drop for LocalProcessTransport {
    fn drop(&mut self) {
        let Some(mut process) = self.running.get_mut().take() else {
            return;
        };
        terminate(process.pid);
        let grace = self.spec.shutdown_grace;
        match tokio::runtime::Handle::try_current() {
            // Give the process its grace period in the background, then kill it.
            Ok(runtime) => {
                runtime.spawn(async move {
                    if tokio::time::timeout(grace, process.child.wait())
                        .await
                        .is_err()
                    {
                        let _ = process.child.kill().await;
                    }
                });
            }
            // No runtime to wait on: the child is killed as it drops (`kill_on_drop`).
            Err(_) => drop(process),
        }
    }
}

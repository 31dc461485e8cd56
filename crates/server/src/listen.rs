//! The listener: binds a TCP address, optionally terminates TLS (rustls with the ring provider, ALPN
//! `h2` and `http/1.1`), serves HTTP/1.1 and HTTP/2 (h2 over TLS via ALPN, h2c by prior knowledge) with
//! hyper-util's auto builder, and shuts down gracefully: on the shutdown signal it stops accepting,
//! lets open connections finish their requests (up to a grace period) and returns.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::response::ConnectionScheme;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Installs rustls' ring provider as the process default (once; later calls are no-ops). The listener
/// names its provider explicitly, so this only matters for other rustls users in the process.
pub fn install_crypto_provider() {
    // An error means a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("read the TLS certificate {path}: {reason}")]
    Certificate { path: PathBuf, reason: String },
    #[error("read the TLS private key {path}: {reason}")]
    PrivateKey { path: PathBuf, reason: String },
    #[error("configure TLS: {0}")]
    Tls(String),
}

/// The certificate chain and key files (PEM).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Builds the rustls server configuration from PEM files: the certificate chain (leaf first) and a
/// PKCS#8, PKCS#1 or SEC1 private key. ALPN offers `h2` then `http/1.1`.
pub fn tls_config(files: &TlsFiles) -> Result<ServerConfig, ListenError> {
    let certificates = load_certificates(&files.cert)?;
    let key = load_key(&files.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ListenError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .map_err(|e| ListenError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn load_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, ListenError> {
    let error = |reason: String| ListenError::Certificate {
        path: path.to_owned(),
        reason,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    if certificates.is_empty() {
        return Err(error("the file holds no PEM certificate".to_owned()));
    }
    Ok(certificates)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, ListenError> {
    // The parser's messages describe the PEM structure, never the key material.
    PrivateKeyDer::from_pem_file(path).map_err(|e| ListenError::PrivateKey {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// A bound, not yet serving, listener.
pub struct Listener {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    local_addr: SocketAddr,
    grace_period: Duration,
}

impl Listener {
    /// Binds `addr` (port 0 picks a free port) with optional TLS.
    pub async fn bind(addr: SocketAddr, tls: Option<&TlsFiles>) -> Result<Self, ListenError> {
        let tls = tls
            .map(tls_config)
            .transpose()?
            .map(|config| TlsAcceptor::from(Arc::new(config)));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ListenError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ListenError::Bind { addr, source })?;
        Ok(Self {
            listener,
            tls,
            local_addr,
            grace_period: Duration::from_secs(30),
        })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// How long open connections may take to finish after shutdown is signalled (default 30 s).
    pub fn with_grace_period(mut self, grace_period: Duration) -> Self {
        self.grace_period = grace_period;
        self
    }

    /// Serves `app` until `shutdown` is cancelled, then drains open connections (up to the grace period). Returns
    /// when it stopped accepting connections.
    pub async fn serve(self, app: Router, shutdown: CancellationToken) -> std::time::Instant {
        let scheme = ConnectionScheme(if self.tls.is_some() { "https" } else { "http" });
        let tracker = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Usually running out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let app = app.clone();
            let tls = self.tls.clone();
            let shutdown = shutdown.clone();
            tracker.spawn(async move {
                match tls {
                    None => serve_connection(TokioIo::new(stream), app, scheme, shutdown).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        {
                            Ok(Ok(stream)) => {
                                serve_connection(TokioIo::new(stream), app, scheme, shutdown).await
                            }
                            Ok(Err(error)) => {
                                tracing::debug!(%peer, %error, "TLS handshake failed");
                            }
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                }
            });
        }
        drop(self.listener);
        let stopped_accepting = std::time::Instant::now();
        tracker.close();
        if tokio::time::timeout(self.grace_period, tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("connections still open after the grace period were closed");
        }
        stopped_accepting
    }
}

async fn serve_connection<I>(
    io: TokioIo<I>,
    app: Router,
    scheme: ConnectionScheme,
    shutdown: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = app.map_request(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(scheme);
        request.map(Body::new)
    });
    let service = TowerToHyperService::new(service);
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(error = %error, "connection ended with an error");
            }
        }
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            if let Err(error) = connection.await {
                tracing::debug!(error = %error, "connection ended with an error during shutdown");
            }
        }
    }
}

//! The listener: binds a TCP address, optionally terminates TLS (rustls with the ring provider, ALPN
//! `h2` and `http/1.1`), serves HTTP/1.1 and HTTP/2 (h2 over TLS via ALPN, h2c by prior knowledge) with
//! hyper-util's auto builder, and shuts down gracefully: on the shutdown signal it stops accepting,
//! lets open connections finish their requests (up to a grace period) and returns. An HTTP/1 connection closed
//! after an answer that left the request body unread (the 413 of an oversized body) lingers: it reads and drops
//! what the client still sends, so the client is not reset before it reads the answer ([`LingerOnClose`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
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
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::response::ConnectionScheme;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long what a client still sends after a 413 is read and dropped: on a closing HTTP/1 connection
/// ([`LingerOnClose`]) and on an HTTP/2 stream.
pub(crate) const LINGER_TIMEOUT: Duration = Duration::from_secs(10);

/// A request extension on every request the listener serves: a response that leaves the request body unread on
/// an HTTP/1 connection about to close asks, through it, that closing the connection first reads and drops what
/// the client still sends, until the client closes or [`LINGER_TIMEOUT`] passes.
///
/// Why: the kernel resets a socket closed with unread data, and a client still writing its body then fails
/// instead of reading the answer already sent. Over plain HTTP, Python's urllib3 (under `requests` and the Azure
/// SDK) ignores the broken pipe and reads the answer anyway; over TLS the same failure is an `SSLError` it does
/// not ignore, so the client never saw the 413. Lingering closes once the client has sent everything, as nginx's
/// lingering close does. It is bounded by time, not bytes: the answer is already out, and what is read is
/// dropped at once.
#[derive(Clone, Debug, Default)]
pub struct LingerOnClose(Arc<AtomicBool>);

impl LingerOnClose {
    /// Asks that closing the connection first read and drop what the client still sends.
    pub fn request(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

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
                    None => serve_connection(stream, app, scheme, shutdown).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        {
                            Ok(Ok(stream)) => serve_connection(stream, app, scheme, shutdown).await,
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
    io: I,
    app: Router,
    scheme: ConnectionScheme,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let linger = LingerOnClose::default();
    let io = TokioIo::new(Lingering {
        io,
        linger: linger.clone(),
        closing: Closing::Open,
    });
    let service = app.map_request(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(scheme);
        request.extensions_mut().insert(linger.clone());
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

/// A connection's stream whose shutdown lingers when a response asked for it ([`LingerOnClose`]): it shuts the
/// writing side down (TLS `close_notify`, then FIN), so the client sees the answer end, then reads and drops what
/// the client still sends until it closes or [`LINGER_TIMEOUT`] passes. Only then is the socket dropped.
struct Lingering<I> {
    io: I,
    linger: LingerOnClose,
    closing: Closing,
}

enum Closing {
    Open,
    Draining(Pin<Box<Sleep>>),
    Closed,
}

impl<I: AsyncRead + Unpin> AsyncRead for Lingering<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.closing {
                Closing::Open => {
                    ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    this.closing = if this.linger.requested() {
                        Closing::Draining(Box::pin(tokio::time::sleep(LINGER_TIMEOUT)))
                    } else {
                        Closing::Closed
                    };
                }
                Closing::Draining(deadline) => {
                    if deadline.as_mut().poll(cx).is_ready() {
                        this.closing = Closing::Closed;
                        continue;
                    }
                    let mut scratch = [0u8; 8 * 1024];
                    let mut read = ReadBuf::new(&mut scratch);
                    match ready!(Pin::new(&mut this.io).poll_read(cx, &mut read)) {
                        Ok(()) if !read.filled().is_empty() => {}
                        // The client closed, or its connection failed.
                        _ => this.closing = Closing::Closed,
                    }
                }
                Closing::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

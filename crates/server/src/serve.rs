//! The whole server as `cairn serve` runs it: checks the configuration, binds the listener, assembles cairn
//! (`cairn-assembly`: the store where the configuration says, the extension host over the given registry, the
//! engine and the stack service), recovers deployments and stack operations an earlier run left unfinished,
//! reports the bound address, and serves until SIGTERM or Ctrl-C. Then it shuts down gracefully within
//! [`ServeConfig::shutdown_grace`]: stops accepting connections, lets open requests finish, hands running stack
//! operations and deployments over (stopped at a safe point, leases and claims released so another replica or
//! the next start resumes them at once), closes the store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_assembly::{Assembly, AssemblyError, Settings, StoreLocation};
use cairn_engine::{EngineError, EngineSettings};
use cairn_host::Registry;
use cairn_stack_service::StackServiceSettings;
use tokio_util::sync::CancellationToken;

use crate::auth::{TokenFileError, TokenSet};
use crate::listen::{ListenError, Listener, TlsFiles};
use crate::state::{AppState, ServerOptions};

/// Everything `cairn serve` is configured with.
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub tls: Option<TlsFiles>,
    /// The tokens file; without one, requests are not authenticated.
    pub tokens: Option<PathBuf>,
    /// Allows serving without tokens on a non-loopback address.
    pub insecure_no_auth: bool,
    /// Where the store lives (a data directory or a PostgreSQL database).
    pub store: StoreLocation,
    pub registry: Arc<Registry>,
    pub options: ServerOptions,
    /// Engine settings (parallelism per deployment, the server-wide cap on operations in flight, claim TTL and
    /// heartbeat for crash recovery); a stack operation's lease follows the same TTL and heartbeat, and its deletes
    /// the same parallelism.
    pub engine: EngineSettings,
    /// How long a shutdown may take in all: open requests finishing, then running deployments reaching a safe
    /// point; what is still running then is stopped where it stands (and resumed by recovery all the same).
    pub shutdown_grace: Duration,
}

/// The default of [`ServeConfig::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Why `cairn serve` could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to serve without authentication on {0}, which is not a loopback address: pass --tokens FILE (or --insecure-no-auth)"
    )]
    UnauthenticatedNonLoopback(SocketAddr),
    #[error(transparent)]
    Tokens(#[from] TokenFileError),
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The store could not be opened, or the engine refused its settings.
    #[error(transparent)]
    Assembly(#[from] AssemblyError),
    #[error("recover interrupted deployments: {0}")]
    Recovery(#[from] EngineError),
}

/// What [`run`] reports once it listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    pub addr: SocketAddr,
    pub tls: bool,
    pub authenticated: bool,
}

impl Bound {
    /// `https://127.0.0.1:8443`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.addr
        )
    }
}

/// Runs the server until `shutdown` fires (or a signal arrives), calling `on_bound` once listening.
pub async fn run(
    config: ServeConfig,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(Bound),
) -> Result<(), ServeError> {
    let tokens = config.tokens.as_deref().map(TokenSet::load).transpose()?;
    if tokens.is_none() && !config.insecure_no_auth && !config.listen.ip().is_loopback() {
        return Err(ServeError::UnauthenticatedNonLoopback(config.listen));
    }
    let listener = Listener::bind(config.listen, config.tls.as_ref()).await?;
    let bound = Bound {
        addr: listener.local_addr(),
        tls: listener.is_tls(),
        authenticated: tokens.is_some(),
    };
    let recovery_interval = (config.engine.claim_ttl / 2).max(std::time::Duration::from_secs(1));
    // A stack operation's lease follows the same crash-recovery clock as a deployment's claim: after a crash the
    // stack's interrupted operation is taken over (and finished) once the claim TTL has passed.
    let stacks = StackServiceSettings {
        lease_ttl: config.engine.claim_ttl,
        heartbeat_interval: config.engine.heartbeat_interval,
        // A stack's deletes run as wide as its deployment's resource operations.
        max_deletes_in_flight: config.engine.parallelism.max(1),
        ..StackServiceSettings::default()
    };
    let metrics = cairn_metrics::Metrics::new();
    let mut settings = Settings::new(config.store, config.registry, bound.url());
    settings.engine = config.engine;
    settings.stacks = stacks;
    settings.metrics = metrics.clone();
    let cairn = Assembly::open(settings).await?;
    let (engine, host, stack_service) = (
        cairn.engine().clone(),
        cairn.host().clone(),
        cairn.stacks().clone(),
    );
    // Periodic sweeps run on one server at a time: the one holding the sweeper lease, renewed at every recovery tick
    // and taken over by another server once its holder stops renewing it.
    let engine_owner = engine.settings().owner_id.clone();
    let sweeps = SweepTurn {
        store: cairn.store().clone(),
        owner: engine.settings().owner_id.clone(),
        ttl: engine.settings().claim_ttl.max(recovery_interval * 2),
    };
    // Deployments whose server died mid-run are resumed (or failed) before new requests arrive.
    if sweeps.mine().await {
        let recovered = engine.recover().await?;
        if !recovered.resumed.is_empty() || !recovered.failed.is_empty() {
            tracing::info!(
                resumed = recovered.resumed.len(),
                failed = recovered.failed.len(),
                "recovered interrupted deployments"
            );
        }
        log_stack_recovery(stack_service.recover().await);
    }
    // A deployment whose engine died keeps its claim until the claim's TTL runs out (another replica, or this
    // process restarted after a crash, cannot know sooner): look for such orphans periodically, not only at start.
    let periodic = engine.clone();
    let periodic_stacks = stack_service.clone();
    let recovery_stop = shutdown.clone();
    let recovery_turn = sweeps.clone();
    let recovery_loop = tokio::spawn(async move {
        let mut tick = tokio::time::interval(recovery_interval);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = recovery_stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            if !recovery_turn.mine().await {
                continue;
            }
            match periodic.recover().await {
                Ok(r) if !r.resumed.is_empty() || !r.failed.is_empty() => tracing::info!(
                    resumed = r.resumed.len(),
                    failed = r.failed.len(),
                    "recovered interrupted deployments"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "recovering interrupted deployments failed"),
            }
            // After the engine's pass: an interrupted stack update waits for its deployment to end.
            log_stack_recovery(periodic_stacks.recover().await);
        }
    });
    // Stack what-if results past their retentionInterval, extension host operations past the host's deadline and
    // operation results past their hour are already invisible to the API; this sweep (at start, then every five
    // minutes, by the sweeper lease's holder) removes them and their sealed contents from the store.
    let what_if_sweeper = stack_service.clone();
    let operation_sweeper = cairn.store().clone();
    let sweep_stop = shutdown.clone();
    let sweep_loop = tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(300));
        loop {
            tokio::select! {
                _ = sweep_stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            if !sweeps.mine().await {
                continue;
            }
            match what_if_sweeper.purge_expired_what_ifs().await {
                Ok(0) => {}
                Ok(purged) => tracing::info!(purged, "purged expired stack what-if results"),
                Err(error) => tracing::warn!(
                    error = %error.detail().message(),
                    "purging expired stack what-if results failed"
                ),
            }
            match operation_sweeper
                .purge_expired_host_operations(cairn_store::Timestamp::now())
                .await
            {
                Ok(0) => {}
                Ok(purged) => tracing::info!(purged, "purged expired extension host operations"),
                Err(error) => {
                    tracing::warn!(%error, "purging expired extension host operations failed")
                }
            }
            match operation_sweeper
                .purge_expired_operation_results(cairn_store::Timestamp::now())
                .await
            {
                Ok(0) => {}
                Ok(purged) => tracing::info!(purged, "purged expired operation results"),
                Err(error) => tracing::warn!(%error, "purging expired operation results failed"),
            }
        }
    });
    let mut state = AppState::new(engine.clone())
        .with_options(config.options)
        .with_extension_host(host)
        .with_stack_service(stack_service.clone())
        .with_metrics(metrics);
    if let Some(tokens) = tokens {
        state = state.with_tokens(tokens);
    }
    let app = crate::app(state);
    on_bound(bound);

    let signal_shutdown = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown signal received");
        signal_shutdown.cancel();
    });
    let grace = config.shutdown_grace;
    let stopped_accepting = listener.with_grace_period(grace).serve(app, shutdown).await;
    // The time open requests took counts against the grace.
    let deadline = stopped_accepting + grace;
    // Nothing may start a run or a stack operation once they are handed over: the sweeps end first.
    let _ = recovery_loop.await;
    let _ = sweep_loop.await;
    stack_service.hand_over().await;
    let handed = engine
        .hand_over(deadline.saturating_duration_since(Instant::now()))
        .await;
    tracing::info!(
        deployments = handed.running,
        stopped_by_force = handed.stopped_by_force,
        "running work handed over"
    );
    drop((engine, stack_service));
    // Hand the sweeps over at once rather than when the lease expires.
    let _ = cairn
        .store()
        .release_lease(SWEEPER_LEASE, &engine_owner)
        .await;
    if let Err(error) = cairn.close().await {
        tracing::warn!(%error, "closing the store failed");
    }
    tracing::info!("shut down");
    Ok(())
}

/// The name of the lease whose holder runs the periodic sweeps.
pub const SWEEPER_LEASE: &str = "cairn-server/sweeps";

/// This server's turn at the periodic sweeps: the sweeper lease, taken when free or expired and renewed by taking it
/// again, so of several servers on one store one sweeps at a time and another takes over once it stops.
#[derive(Clone)]
struct SweepTurn {
    store: Arc<dyn cairn_store::Store>,
    owner: String,
    ttl: std::time::Duration,
}

impl SweepTurn {
    /// Whether this server holds the sweeper lease now (taking or renewing it).
    async fn mine(&self) -> bool {
        let now = cairn_store::Timestamp::now();
        match self
            .store
            .acquire_lease(
                SWEEPER_LEASE,
                &self.owner,
                now,
                now.saturating_add(self.ttl),
            )
            .await
        {
            Ok(_) => true,
            Err(cairn_store::StoreError::Conflict { .. }) => false,
            Err(error) => {
                tracing::warn!(%error, "could not take the sweeper lease");
                false
            }
        }
    }
}

fn log_stack_recovery(
    recovered: Result<cairn_stack_service::StackRecoveryReport, cairn_arm::ArmError>,
) {
    match recovered {
        Ok(r)
            if !r.resumed_deletes.is_empty()
                || !r.resumed_updates.is_empty()
                || !r.failed.is_empty() =>
        {
            tracing::info!(
                resumed_deletes = r.resumed_deletes.len(),
                resumed_updates = r.resumed_updates.len(),
                failed = r.failed.len(),
                waiting = r.waiting.len(),
                "recovered interrupted stack operations"
            );
        }
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(error = %error.detail().message(), "recovering interrupted stack operations failed");
        }
    }
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
async fn wait_for_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = ctrl_c => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

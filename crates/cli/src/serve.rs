//! `cairn serve`: runs the ARM-compatible API server (see `docs/server.md`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use cairn_server::serve::{ServeConfig, run};
use cairn_server::{ServerOptions, TlsFiles};
use clap::Args;
use tokio_util::sync::CancellationToken;

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// TLS certificate chain (PEM, leaf first); serves HTTPS with h2 and http/1.1 via ALPN.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Bearer tokens file: one token per line, optionally followed by the resource-id scopes it may use.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Serve without authentication on a non-loopback address.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Where cairn keeps its state: a data directory (the embedded SQLite store) or a PostgreSQL database
    /// (postgres://user:password@host:port/database) shared by several servers [default: $CAIRN_STORE, else
    /// $CAIRN_HOME, else ~/.cairn].
    #[arg(long, value_name = "DIR|URL", conflicts_with = "data_dir")]
    store: Option<PathBuf>,
    /// Data directory (the same as --store DIR).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A PostgreSQL store's master key file (base64 of 32 bytes, mode 0600) [default: $CAIRN_STORE_KEY, else
    /// $CAIRN_STORE_KEY_FILE]. The key is never kept in the database; without one the server refuses to start.
    #[arg(long, value_name = "FILE")]
    store_key_file: Option<PathBuf>,
    /// Extension registry file [default: $CAIRN_EXTENSIONS, else <data dir>/extensions.json when present].
    #[arg(long, value_name = "FILE")]
    extensions: Option<PathBuf>,
    /// Retry-After seconds on long-running operations.
    #[arg(long, value_name = "SECONDS", default_value_t = 1)]
    retry_after: u32,
    /// Public base URL for Location headers when behind a proxy, e.g. https://cairn.example.
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// How long a running deployment's claim lasts without a heartbeat; after a crash, the restarted server
    /// takes the deployment over (resumes or fails it) once the claim has expired. A deployment stack's operation
    /// lease lasts as long: after a crash, the stack takes a new PUT or DELETE once it has expired.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    claim_ttl: u64,
    /// After a crash, a deployment taken over this many times in a row without progress ends Failed
    /// (DeploymentRecoveryAbandoned) instead of being resumed again, so it cannot crash the server forever.
    #[arg(long, value_name = "N", default_value_t = cairn_engine::settings::DEFAULT_MAX_RECOVERY_TAKEOVERS)]
    max_recovery_takeovers: u32,
    /// Largest request body; larger ones get 413 RequestEntityTooLarge (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = cairn_server::DEFAULT_MAX_REQUEST_BYTES)]
    max_request_bytes: usize,
    /// Largest value a template expression may produce (EvaluationLimitExceeded past it).
    #[arg(long, value_name = "BYTES", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_VALUE_BYTES)]
    max_eval_value_bytes: usize,
    /// Bytes of values one deployment's template evaluation may produce in all.
    #[arg(long, value_name = "BYTES", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_TOTAL_BYTES)]
    max_eval_total_bytes: u64,
    /// Evaluation steps (JSON nodes, expression nodes, function calls) per deployment.
    #[arg(long, value_name = "STEPS", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_STEPS)]
    max_eval_steps: u64,
    /// Nesting depth of an evaluation (expressions, JSON, variables, user functions, lambdas).
    #[arg(long, value_name = "LEVELS", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_DEPTH)]
    max_eval_depth: usize,
}

pub(crate) fn run_serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    cairn_server::install_crypto_provider();
    init_logging();
    let store = crate::store::resolve_location(args.store.or(args.data_dir), args.store_key_file)?;
    let registry =
        crate::extension::load_registry(args.extensions.as_deref(), store.as_data_dir())?;
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    let config = ServeConfig {
        listen: args.listen,
        tls,
        tokens: args.tokens,
        insecure_no_auth: args.insecure_no_auth,
        store,
        registry: Arc::new(registry),
        options: ServerOptions {
            retry_after_seconds: args.retry_after,
            public_base_url: args.public_url,
            max_request_bytes: args.max_request_bytes,
            ..ServerOptions::default()
        },
        engine: {
            let ttl = std::time::Duration::from_secs(args.claim_ttl.max(1));
            cairn_engine::EngineSettings {
                claim_ttl: ttl,
                max_recovery_takeovers: args.max_recovery_takeovers.max(1),
                heartbeat_interval: (ttl / 4).max(std::time::Duration::from_millis(250)),
                eval_limits: cairn_eval::EvalLimits {
                    max_value_bytes: args.max_eval_value_bytes,
                    max_total_bytes: args.max_eval_total_bytes,
                    max_steps: args.max_eval_steps,
                    max_depth: args.max_eval_depth,
                },
                ..cairn_engine::EngineSettings::default()
            }
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run(config, CancellationToken::new(), |bound| {
        let mut out = std::io::stdout().lock();
        // Tests and scripts read this line for the address (port 0 picks one).
        let _ = writeln!(out, "cairn serve listening on {}", bound.url());
        let _ = out.flush();
        if !bound.authenticated {
            eprintln!("warning: no --tokens file: requests are not authenticated");
        }
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr, filtered by `RUST_LOG` (default: the server's messages and one line per request at
/// `info`, everything else at `warn`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,cairn_server=info,tower_http=info")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use crate::store::resolve_location;
    use cairn_assembly::StoreLocation;

    #[test]
    fn a_store_flag_selects_the_backend_without_repeating_credentials() {
        let location = resolve_location(
            Some("postgres://u:hunter2@db/cairn".into()),
            Some("/etc/cairn/key".into()),
        )
        .expect("a PostgreSQL store");
        assert!(
            matches!(&location, StoreLocation::Postgres(pg) if pg.key_file() == Some(std::path::Path::new("/etc/cairn/key"))),
            "{location:?}"
        );
        assert!(!location.to_string().contains("hunter2"), "{location}");
        let error = resolve_location(Some("mysql://u:hunter2@db/cairn".into()), None)
            .expect_err("no MySQL store");
        let message = format!("{error:#}");
        assert!(message.contains("not supported"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        assert_eq!(
            resolve_location(Some("/srv/cairn".into()), None).unwrap(),
            StoreLocation::data_dir("/srv/cairn")
        );
    }
}

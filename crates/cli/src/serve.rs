//! `cairn serve`: runs the ARM-compatible API server (see `docs/server.md`), and sets up its logs (human lines on
//! a terminal, JSON lines otherwise; `docs/operations.md`).

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use cairn_assembly::StoreLocation;
use cairn_server::serve::{ServeConfig, run};
use cairn_server::{MetricsAuth, ServerOptions, TlsFiles};
use clap::{Args, ValueEnum};

/// The default of `--max-eval-server-bytes`: four deployments at their own default budget.
const DEFAULT_MAX_EVAL_SERVER_BYTES: u64 = 4 * cairn_eval::EvalLimits::DEFAULT_MAX_TOTAL_BYTES;
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
    /// A directory the built-in Local extension may work in (repeatable): a template's `rootDirectory` must lie
    /// inside one (a relative one is taken against the first). Without any, Local is off on this server. Local
    /// never reaches the data directory, the tokens, TLS and key files, or the registry file, even inside a root.
    #[arg(long = "local-root", value_name = "DIR")]
    local_roots: Vec<PathBuf>,
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
    /// Resource operations (extension and provider calls) each deployment runs at once, its nested deployments
    /// included; a stack's deletes run as wide.
    #[arg(long, env = "CAIRN_PARALLELISM", value_name = "N", default_value_t = cairn_engine::settings::DEFAULT_PARALLELISM,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    parallelism: usize,
    /// A cap on resource operations in flight across all deployments of this server together (each keeps its
    /// own --parallelism under it) [default: no cap].
    #[arg(long, env = "CAIRN_MAX_OPERATIONS_IN_FLIGHT", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_operations_in_flight: Option<usize>,
    /// Largest request body; larger ones get 413 RequestEntityTooLarge (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = cairn_server::DEFAULT_MAX_REQUEST_BYTES)]
    max_request_bytes: usize,
    /// Largest value a template expression may produce (EvaluationLimitExceeded past it).
    #[arg(long, value_name = "BYTES", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_VALUE_BYTES)]
    max_eval_value_bytes: usize,
    /// Bytes of values one deployment's template evaluation may produce in all.
    #[arg(long, value_name = "BYTES", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_TOTAL_BYTES)]
    max_eval_total_bytes: u64,
    /// Bytes of evaluated values all running deployments of this server may hold together; the deployment that asks
    /// for more fails with EvaluationLimitExceeded (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_EVAL_SERVER_BYTES)]
    max_eval_server_bytes: u64,
    /// Evaluation steps (JSON nodes, expression nodes, function calls) per deployment.
    #[arg(long, value_name = "STEPS", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_STEPS)]
    max_eval_steps: u64,
    /// Nesting depth of an evaluation (expressions, JSON, variables, user functions, lambdas).
    #[arg(long, value_name = "LEVELS", default_value_t = cairn_eval::EvalLimits::DEFAULT_MAX_DEPTH)]
    max_eval_depth: usize,
    /// Log format on stderr: `auto` writes human lines on a terminal and JSON lines otherwise (a file, a pipe, a
    /// log collector); `plain` is human lines without colours off a terminal.
    #[arg(long, value_enum, ignore_case = true, value_name = "FORMAT", default_value_t = LogFormat::Auto)]
    log_format: LogFormat,
    /// How long a shutdown (SIGTERM, Ctrl-C) may take: open requests finish, running deployments and stack
    /// operations stop at a safe point and are handed over (resumed at once by another replica or the next
    /// start). E.g. `30s`, `500ms`, `2m`; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    shutdown_grace: std::time::Duration,
    /// Who may read /metrics: `api` needs a bearer token of the tokens file without scopes, like the API;
    /// `none` serves it without a token (for a scraper on a network only operators reach).
    #[arg(long, value_enum, ignore_case = true, value_name = "WHO", default_value_t = MetricsAccess::Api)]
    metrics_auth: MetricsAccess,
    /// A host name a server without --tokens answers (repeatable). Such a server answers IP addresses, localhost
    /// and the --public-url host; any other name gets 421, so a web page cannot reach it through DNS rebinding.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// A web origin (`https://console.example:8443`) whose pages may call the API (repeatable): its requests get
    /// CORS headers. No origin is allowed by default.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Auto,
    Json,
    Plain,
}

/// `--metrics-auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum MetricsAccess {
    Api,
    None,
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration such as 30s, 500ms or 2m"))?;
    let duration = match unit {
        "" | "s" => std::time::Duration::from_secs(number),
        "ms" => std::time::Duration::from_millis(number),
        "m" => std::time::Duration::from_secs(number.saturating_mul(60)),
        "h" => std::time::Duration::from_secs(number.saturating_mul(3600)),
        _ => return Err(format!("'{text}': the unit must be ms, s, m or h")),
    };
    Ok(duration)
}

pub(crate) fn run_serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    cairn_server::install_crypto_provider();
    init_logging(args.log_format);
    let store = crate::store::resolve_location(args.store.or(args.data_dir), args.store_key_file)?;
    let own_files = [
        &args.tokens,
        &args.tls_cert,
        &args.tls_key,
        &args.extensions,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect();
    let local = Arc::new(local_confinement(&args.local_roots, own_files, &store)?);
    let registry = crate::extension::load_registry(
        args.extensions.as_deref(),
        store.as_data_dir(),
        Some(&local),
    )?;
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
            metrics_auth: match args.metrics_auth {
                MetricsAccess::Api => MetricsAuth::Api,
                MetricsAccess::None => MetricsAuth::None,
            },
            allowed_hosts: args.allowed_hosts,
            cors_origins: args.cors_origins,
            ..ServerOptions::default()
        },
        shutdown_grace: args.shutdown_grace,
        engine: {
            let ttl = std::time::Duration::from_secs(args.claim_ttl.max(1));
            cairn_engine::EngineSettings {
                parallelism: args.parallelism,
                operation_slots: args
                    .max_operations_in_flight
                    .map(cairn_engine::OperationSlots::new),
                claim_ttl: ttl,
                max_recovery_takeovers: args.max_recovery_takeovers.max(1),
                heartbeat_interval: (ttl / 4).max(std::time::Duration::from_millis(250)),
                eval_limits: cairn_eval::EvalLimits {
                    max_value_bytes: args.max_eval_value_bytes,
                    max_total_bytes: args.max_eval_total_bytes,
                    max_steps: args.max_eval_steps,
                    max_depth: args.max_eval_depth,
                },
                eval_server_budget: Some(cairn_eval::SharedBudget::new(args.max_eval_server_bytes)),
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
            tracing::warn!("no --tokens file: requests are not authenticated");
        }
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// Where the built-in Local extension may work on this server: inside `roots`, and never in the files the server
/// keeps for itself (an API caller must not read its tokens or keys, nor write its store or registry).
/// `own_files` are the files named on the command line (tokens, TLS, registry).
fn local_confinement(
    roots: &[PathBuf],
    own_files: Vec<PathBuf>,
    store: &StoreLocation,
) -> anyhow::Result<cairn_ext_local::Confinement> {
    let mut denied = own_files;
    denied.extend(store.as_data_dir().map(PathBuf::from));
    if let StoreLocation::Postgres(postgres) = store {
        denied.extend(postgres.key_file().map(PathBuf::from));
    }
    for variable in ["CAIRN_STORE_KEY_FILE", "CAIRN_EXTENSIONS"] {
        denied.extend(crate::store::env(variable).map(PathBuf::from));
    }
    let confinement =
        cairn_ext_local::Confinement::new(roots.iter().cloned(), denied).context("--local-root")?;
    if confinement.roots().is_empty() {
        tracing::info!("no --local-root: the Local extension is off on this server");
    } else {
        let shown: Vec<String> = confinement
            .roots()
            .iter()
            .map(|root| root.display().to_string())
            .collect();
        tracing::info!(roots = %shown.join(", "), "the Local extension works only inside these roots");
    }
    Ok(confinement)
}

/// Logs to stderr, filtered by `RUST_LOG` (default: the server's messages and one line per request at
/// `info`, everything else at `warn`): JSON lines (one object per event, with the fields of the spans it happened
/// in: request and correlation ids, the deployment or stack operation) when `format` says so or stderr is not a
/// terminal, else human lines, coloured only on a terminal without `NO_COLOR`.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,cairn_server=info,cairn_engine=info,cairn_stack_service=info,tower_http=info",
        )
    });
    let terminal = std::io::stderr().is_terminal();
    let json = match format {
        LogFormat::Auto => !terminal,
        LogFormat::Json => true,
        LogFormat::Plain => false,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .try_init()
    } else {
        let colours = terminal && crate::store::env("NO_COLOR").is_none();
        builder.with_ansi(colours).try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use crate::store::resolve_location;
    use cairn_assembly::StoreLocation;

    #[test]
    fn durations_take_a_unit_or_are_seconds() {
        use std::time::Duration;
        assert_eq!(
            parse_duration("30s"),
            Ok(cairn_server::serve::DEFAULT_SHUTDOWN_GRACE),
            "the flag's default is the server's"
        );
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_duration("3d").unwrap_err().contains("unit"));
    }

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

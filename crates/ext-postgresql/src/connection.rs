//! Connection pools shared by every request of the process, one per tokio runtime, server, credentials
//! and database, so that a stack's many resources do not each pay for a connection (and its SCRAM
//! handshake).
//!
//! The pools are process-wide because configs are parsed per request without extension state; a
//! changed password (rotation) gives a new key, so the new credentials are used from the next request.
//! A pool's connections and maintenance task belong to the runtime that created it, and the in-process
//! CLI runs each command on a runtime of its own: pools are therefore keyed by runtime, and those of
//! runtimes that have shut down are dropped instead of being handed out.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use cairn_extension_sdk::ExtensionError;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres};
use tokio::runtime::{Handle, Id as RuntimeId};

use crate::config::{PgConfig, SslMode};
use crate::error::sql_error;
use crate::sql::ident;

/// Connections per pool: enough for parallel stack operations against one database.
const MAX_CONNECTIONS: u32 = 16;
/// Pools to rarely used databases close their connections after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(20);

/// What a pool is for, apart from the database: never the password itself, only its digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerKey {
    /// Lower-cased host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User name.
    pub username: String,
    /// TLS mode.
    pub ssl_mode: SslMode,
    /// SHA-256 of the CA certificate, if one was given.
    pub ca_digest: Option<String>,
    /// SHA-256 of the password.
    pub password_digest: String,
}

type PoolKey = (RuntimeId, ServerKey, String);

/// The process's pools.
#[derive(Default)]
pub struct Pools {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    pools: HashMap<PoolKey, PgPool>,
    /// Per runtime, a token held by a task parked on it: the task (and the token) is dropped when the
    /// runtime shuts down.
    runtimes: HashMap<RuntimeId, Weak<()>>,
}

impl State {
    /// Registers the current runtime (once) and forgets the pools of runtimes that are gone.
    fn track(&mut self, runtime: &Handle) {
        let id = runtime.id();
        if let std::collections::hash_map::Entry::Vacant(entry) = self.runtimes.entry(id) {
            let token = Arc::new(());
            entry.insert(Arc::downgrade(&token));
            runtime.spawn(async move {
                let _alive = token;
                std::future::pending::<()>().await;
            });
        }
        let dead: Vec<RuntimeId> = self
            .runtimes
            .iter()
            .filter(|(_, token)| token.strong_count() == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.runtimes.remove(&id);
            self.pools.retain(|(runtime, _, _), _| *runtime != id);
        }
    }
}

static POOLS: LazyLock<Pools> = LazyLock::new(Pools::default);

impl Pools {
    /// The process-wide registry.
    pub fn global() -> &'static Pools {
        &POOLS
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A pool to the config's maintenance database.
    pub fn maintenance(&self, config: &PgConfig) -> PgPool {
        self.database(config, config.maintenance_database())
    }

    /// A pool to `database` on the config's server for the current tokio runtime (connections are
    /// opened on first use). Must be called within a tokio runtime.
    pub fn database(&self, config: &PgConfig, database: &str) -> PgPool {
        let runtime = Handle::current();
        let key = (runtime.id(), config.server_key(), database.to_owned());
        let mut state = self.lock();
        state.track(&runtime);
        if let Some(pool) = state.pools.get(&key).filter(|pool| !pool.is_closed()) {
            return pool.clone();
        }
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .min_connections(0)
            .idle_timeout(IDLE_TIMEOUT)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(config.connect_options(database));
        state.pools.insert(key, pool.clone());
        pool
    }

    /// How many pools are held (for tests of the runtime bookkeeping).
    pub fn len(&self) -> usize {
        self.lock().pools.len()
    }

    /// Whether no pool is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes this process's connections to `database` on the config's server (any credentials, any
    /// runtime), so that they do not keep it from being dropped or renamed.
    pub async fn close_database(&self, config: &PgConfig, database: &str) {
        let server = config.server_key();
        let closing: Vec<PgPool> = {
            let mut state = self.lock();
            let keys: Vec<PoolKey> = state
                .pools
                .keys()
                .filter(|(_, key, name)| {
                    name == database && key.host == server.host && key.port == server.port
                })
                .cloned()
                .collect();
            keys.iter()
                .filter_map(|key| state.pools.remove(key))
                .collect()
        };
        for pool in closing {
            pool.close().await;
        }
    }
}

/// A pooled connection to the maintenance database.
pub async fn maintenance_connection(
    config: &PgConfig,
) -> Result<PoolConnection<Postgres>, ExtensionError> {
    Pools::global()
        .maintenance(config)
        .acquire()
        .await
        .map_err(|err| sql_error(&err, "connect to the server"))
}

async fn database_exists(
    connection: &mut PoolConnection<Postgres>,
    database: &str,
) -> Result<bool, ExtensionError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(database)
        .fetch_one(&mut **connection)
        .await
        .map_err(|err| sql_error(&err, "look the database up"))
}

/// A pooled connection to the maintenance database for work on `database` that only touches the cluster's
/// shared catalogs (`pg_database`, `pg_authid`), e.g. database privileges; `None` when `database` does not
/// exist. Unlike [`database_connection`] it opens no connection to `database` itself, so it works on
/// databases that refuse connections, and a stack of many databases does not hold a pool open to each.
pub async fn shared_catalog_connection(
    config: &PgConfig,
    database: &str,
) -> Result<Option<PoolConnection<Postgres>>, ExtensionError> {
    let mut connection = maintenance_connection(config).await?;
    Ok(database_exists(&mut connection, database)
        .await?
        .then_some(connection))
}

/// A pooled connection to `database`, or `None` when the database does not exist (so whatever lives in
/// it does not exist either).
pub async fn database_connection(
    config: &PgConfig,
    database: &str,
) -> Result<Option<PoolConnection<Postgres>>, ExtensionError> {
    if !database_exists(&mut maintenance_connection(config).await?, database).await? {
        return Ok(None);
    }
    let connection = Pools::global()
        .database(config, database)
        .acquire()
        .await
        .map_err(|err| {
            sql_error(
                &err,
                &format!("connect to the database {}", ident(database)),
            )
        })?;
    Ok(Some(connection))
}

/// A pooled connection to `database` for creating or updating something in it; a missing database is a
/// 409 `UndefinedObject` (it may be created later in the same deployment).
pub async fn existing_database_connection(
    config: &PgConfig,
    database: &str,
) -> Result<PoolConnection<Postgres>, ExtensionError> {
    database_connection(config, database)
        .await?
        .ok_or_else(|| missing_database(database))
}

/// The 409 `UndefinedObject` for creating or updating something in a database that does not exist (yet).
pub fn missing_database(database: &str) -> ExtensionError {
    ExtensionError::conflict(
        crate::error::pg_codes::UNDEFINED_OBJECT,
        format!(
            "The database {} does not exist; create it first.",
            ident(database)
        ),
    )
    .with_target("/properties/database")
}

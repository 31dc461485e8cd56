//! Connection pools shared by every request of the process, one per server, credentials and database, so
//! that a stack's many resources do not each pay for a connection (and its SCRAM handshake).
//!
//! The pools are process-wide because configs are parsed per request without extension state; a
//! changed password (rotation) gives a new key, so the new credentials are used from the next request.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::config::{PgConfig, SslMode};

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

/// The process's pools.
#[derive(Default)]
pub struct Pools {
    pools: Mutex<HashMap<(ServerKey, String), PgPool>>,
}

static POOLS: LazyLock<Pools> = LazyLock::new(Pools::default);

impl Pools {
    /// The process-wide registry.
    pub fn global() -> &'static Pools {
        &POOLS
    }

    /// A pool to the config's maintenance database.
    pub fn maintenance(&self, config: &PgConfig) -> PgPool {
        self.database(config, config.maintenance_database())
    }

    /// A pool to `database` on the config's server (connections are opened on first use).
    pub fn database(&self, config: &PgConfig, database: &str) -> PgPool {
        let key = (config.server_key(), database.to_owned());
        let mut pools = self
            .pools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(pool) = pools.get(&key).filter(|pool| !pool.is_closed()) {
            return pool.clone();
        }
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .min_connections(0)
            .idle_timeout(IDLE_TIMEOUT)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(config.connect_options(database));
        pools.insert(key, pool.clone());
        pool
    }

    /// Closes this process's connections to `database` on the config's server (any credentials), so that
    /// they do not keep it from being dropped or renamed.
    pub async fn close_database(&self, config: &PgConfig, database: &str) {
        let server = config.server_key();
        let closing: Vec<PgPool> = {
            let mut pools = self
                .pools
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let keys: Vec<(ServerKey, String)> = pools
                .keys()
                .filter(|(key, name)| {
                    name == database && key.host == server.host && key.port == server.port
                })
                .cloned()
                .collect();
            keys.iter().filter_map(|key| pools.remove(key)).collect()
        };
        for pool in closing {
            pool.close().await;
        }
    }
}

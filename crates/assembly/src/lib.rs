//! `cairn-assembly`: turns settings into a running cairn — the store opened where [`StoreLocation`] says, and on
//! it the extensibility host over the given registry, the deployment engine and the stack service. `cairn serve`
//! (`cairn-server`) and the CLI's in-process commands (deployments, groups, Key Vault, stacks) all start cairn
//! through [`Assembly::open`]; test suites and other programs can too.
//!
//! ```no_run
//! # async fn example() -> Result<(), cairn_assembly::AssemblyError> {
//! use std::sync::Arc;
//! use cairn_assembly::{Assembly, Settings, StoreLocation};
//!
//! let settings = Settings::new(
//!     StoreLocation::data_dir("/var/lib/cairn"),
//!     Arc::new(cairn_host::Registry::new()),
//!     "https://cairn.example",
//! );
//! let cairn = Assembly::open(settings).await?;
//! cairn.engine().recover().await?;
//! // ... serve cairn.engine(), cairn.stacks(), cairn.host() ...
//! cairn.close().await.ok();
//! # Ok(()) }
//! ```
//!
//! **Invariant:** the store is chosen in one place, [`StoreLocation`] (opened by [`StoreLocation::open`], migrated by
//! [`StoreLocation::migrate`], copied by [`copy_store`]); no other code outside the store crates and their tests
//! names a store backend. A data directory is the embedded SQLite store; a `postgres://` URL the PostgreSQL store
//! ([`PostgresLocation`], its master key from a key file or the environment, never from the database).
//!
//! What differs between the callers stays in their [`Settings`] (the engine's recovery policy and claim timing,
//! the stack service's lease, the host's URL) and in what they do once assembled (recovery, background sweeps,
//! serving): the assembly itself starts no task and recovers nothing.

mod key_rotation;
mod store;

use std::sync::Arc;

use cairn_engine::{Engine, EngineError, EngineSettings, OperationSlots, Providers};
use cairn_host::{ExtensionHost, HostSettings, Registry};
use cairn_metrics::Metrics;
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_store::{Store, StoreError};

pub use cairn_store::schema::Migrated;
pub use cairn_store::transfer::CopyReport;
pub use key_rotation::{NEXT_KEY_FILE_NAME, RotatedKey};
pub use store::{PostgresLocation, StoreLocation, copy_store};

/// Why cairn could not be assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssemblyError {
    /// A store URL of a kind cairn has no backend for. The URL itself is not repeated (it may carry credentials).
    #[error(
        "{scheme}:// stores are not supported: give a data directory for the embedded store or a postgres:// URL"
    )]
    UnsupportedStore { scheme: String },
    /// The store could not be opened (created, migrated, its key read).
    #[error("cannot open the cairn {location}")]
    OpenStore {
        location: StoreLocation,
        #[source]
        source: StoreError,
    },
    /// The store's schema could not be brought up to date.
    #[error("cannot migrate the cairn {location}")]
    MigrateStore {
        location: StoreLocation,
        #[source]
        source: StoreError,
    },
    /// A copy into `to` failed (and changed nothing there).
    #[error("cannot copy into the cairn {to}")]
    CopyStore {
        to: StoreLocation,
        #[source]
        source: StoreError,
    },
    /// The store's master key could not be rotated (the store still opens with the key it had, or — a data
    /// directory stopped half way — finishes the rotation when opened).
    #[error("cannot rotate the master key of the cairn {location}")]
    RotateKey {
        location: StoreLocation,
        #[source]
        source: StoreError,
    },
    /// A copy goes from a data directory into a PostgreSQL database; other directions are not supported.
    #[error("a copy goes from a data directory (the embedded store) into a postgres:// database")]
    UnsupportedCopy,
    /// The engine refused its settings.
    #[error("cannot start the deployment engine: {0}")]
    Engine(#[from] EngineError),
}

/// Everything cairn is assembled from.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where the store lives.
    pub store: StoreLocation,
    /// The extensions the host can call (the caller adds its built-in extensions).
    pub registry: Arc<Registry>,
    /// The host's limits and timing.
    pub host: HostSettings,
    /// The URL of this host instance, sent to extensions as `Referer` (the server's bound URL; `cairn://cli` in
    /// process).
    pub host_url: String,
    /// Parallelism, owner id, claim TTL and heartbeat, recovery policy, tenant, evaluation limits.
    pub engine: EngineSettings,
    /// A cap on resource operations in flight across every deployment of this assembly (each deployment keeps
    /// its own `engine.parallelism` under it): one set of slots shared by all of them. `None`: no cap.
    pub max_operations_in_flight: Option<usize>,
    /// The stack service's owner id, lease TTL and heartbeat, delete rounds.
    pub stacks: StackServiceSettings,
    /// Where the host (extension call latency), the engine and the stack service record their metrics: one set
    /// for the whole assembly, replacing the engine's and stack service's own.
    pub metrics: Metrics,
}

impl Settings {
    /// Settings with the default host, engine and stack service settings.
    pub fn new(store: StoreLocation, registry: Arc<Registry>, host_url: impl Into<String>) -> Self {
        Settings {
            store,
            registry,
            host: HostSettings::default(),
            host_url: host_url.into(),
            engine: EngineSettings::default(),
            max_operations_in_flight: None,
            stacks: StackServiceSettings::default(),
            metrics: Metrics::default(),
        }
    }
}

/// A running cairn: one store with the host, engine and stack service built on it. The pieces are cheap to clone
/// (`Arc`s and handles), so callers take what they serve.
pub struct Assembly {
    store: Arc<dyn Store>,
    host: Arc<ExtensionHost>,
    engine: Engine,
    stacks: StackService,
}

impl Assembly {
    /// Opens the store and builds the host, the engine and the stack service on it. Interrupted deployments and
    /// stack operations are left for the caller's `recover()`, whose policy (resume or fail, report or not) is
    /// its own.
    pub async fn open(settings: Settings) -> Result<Self, AssemblyError> {
        let store = settings.store.open().await?;
        let host = Arc::new(
            ExtensionHost::new(settings.registry, settings.host, settings.host_url)
                .with_metrics(settings.metrics.clone()),
        );
        let engine = match Engine::new(
            store.clone(),
            host.clone(),
            Providers::empty(),
            EngineSettings {
                metrics: settings.metrics.clone(),
                operation_slots: settings
                    .max_operations_in_flight
                    .map(OperationSlots::new)
                    .or(settings.engine.operation_slots),
                ..settings.engine
            },
        ) {
            Ok(engine) => engine,
            Err(error) => {
                // Best effort: the engine error is the one worth reporting.
                let _ = store.close().await;
                return Err(error.into());
            }
        };
        let stacks = StackService::new(
            engine.clone(),
            store.clone(),
            host.clone(),
            Providers::empty(),
            StackServiceSettings {
                metrics: settings.metrics,
                ..settings.stacks
            },
        );
        Ok(Assembly {
            store,
            host,
            engine,
            stacks,
        })
    }

    /// The store everything runs on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The extensibility host.
    pub fn host(&self) -> &Arc<ExtensionHost> {
        &self.host
    }

    /// The deployment engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The stack service (over the same engine, store and host).
    pub fn stacks(&self) -> &StackService {
        &self.stacks
    }

    /// Drops the engine, the stack service and the host, then closes the store. Clones taken earlier keep
    /// working only until the store is closed, so callers close once they are done serving.
    pub async fn close(self) -> Result<(), StoreError> {
        let Assembly {
            store,
            host,
            engine,
            stacks,
        } = self;
        drop(stacks);
        drop(engine);
        drop(host);
        store.close().await
    }
}

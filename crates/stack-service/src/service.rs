//! The stack service handle: its settings, the engine, store and host it works over, the reads and writes of a
//! stack record every operation shares, and the read side of the API (`GET`, list).

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::stack::DeploymentStack;
use cairn_arm::{Access, ArmError};
use cairn_engine::{Engine, Providers};
use cairn_host::ExtensionHost;
use cairn_stacks::{Ownership, StackClaim};
use cairn_store::{
    InventoryChange, JsonText, NewStack, PageRequest, Precondition, StackRecord, Store, StoreError,
    Timestamp,
};

use crate::state::{StackHeader, StateRecord, StoredState};

/// Tunables of the stack service.
#[derive(Clone, Debug)]
pub struct StackServiceSettings {
    /// Identifies this process in lease owners.
    pub owner_id: String,
    /// How long a lease lives without a heartbeat: after a crash, the stack is free again after this long.
    pub lease_ttl: Duration,
    /// How often a running operation renews its lease (well below `lease_ttl`).
    pub heartbeat_interval: Duration,
    /// Delete rounds (the first plus retries).
    pub max_delete_rounds: u32,
    /// Deletes in flight at once. The default is the engine's default parallelism, so unmanaging runs as wide as
    /// the deployment that created the resources.
    pub max_deletes_in_flight: usize,
    /// Pause between delete rounds.
    pub retry_backoff: Duration,
    /// How often a running delete publishes its progress (`deletedResources` so far) on the stack record, and a
    /// drift detection the resources it has read so far on its result.
    pub progress_interval: Duration,
    /// Managed resources a drift detection reads at once.
    pub max_drift_reads_in_flight: usize,
    /// Where operation durations and recovery's takeovers are counted (the server's `/metrics`); by default a set
    /// of its own that nothing reads.
    pub metrics: cairn_metrics::Metrics,
}

impl Default for StackServiceSettings {
    fn default() -> Self {
        Self {
            owner_id: format!("stacks-{}", uuid::Uuid::new_v4()),
            lease_ttl: Duration::from_secs(120),
            heartbeat_interval: Duration::from_secs(20),
            max_delete_rounds: 4,
            max_deletes_in_flight: 16,
            retry_backoff: Duration::from_secs(2),
            progress_interval: Duration::from_millis(500),
            max_drift_reads_in_flight: 16,
            metrics: cairn_metrics::Metrics::default(),
        }
    }
}

/// A page of stacks.
#[derive(Clone, Debug, Default)]
pub struct StackPage {
    pub value: Vec<DeploymentStack>,
    pub continuation: Option<String>,
}

/// What every clone of the service shares.
pub(crate) struct Inner {
    pub(crate) engine: Engine,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) host: Arc<ExtensionHost>,
    pub(crate) providers: Arc<Providers>,
    pub(crate) settings: StackServiceSettings,
    /// The operations running in the background here, each under its stack's lease.
    pub(crate) operations: tokio_util::task::TaskTracker,
    /// Fired by [`StackService::hand_over`]: running operations stop where they are.
    pub(crate) closing: tokio_util::sync::CancellationToken,
    /// The cancel token of each operation running here, by its stack's lease name ([`StackService::cancel`]).
    pub(crate) cancels:
        std::sync::Mutex<std::collections::HashMap<String, tokio_util::sync::CancellationToken>>,
    /// Bumped after every stack record this process writes or deletes ([`StackService::record_changes`]).
    pub(crate) record_changes: tokio::sync::watch::Sender<u64>,
}

/// The stack service. Cheap to clone; operations run on the tokio runtime they were started from.
#[derive(Clone)]
pub struct StackService {
    pub(crate) inner: Arc<Inner>,
    /// Whom this handle acts for ([`StackService::acting_for`]).
    pub(crate) access: Access,
}

impl std::fmt::Debug for StackService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackService")
            .field("owner", &self.inner.settings.owner_id)
            .finish_non_exhaustive()
    }
}

pub(crate) fn store_error(error: StoreError) -> ArmError {
    let status = if error.is_not_found() {
        404
    } else if error.is_conflict() {
        409
    } else {
        500
    };
    ArmError::new(status, error.arm_code(), error.to_string())
}

/// When a stack record was last written, as ARM prints a time (`deploymentStackLastModified`).
pub(crate) fn last_modified(record: &StackRecord) -> String {
    cairn_arm::time::format_timestamp(
        std::time::UNIX_EPOCH
            + Duration::from_millis(u64::try_from(record.updated_at.unix_millis()).unwrap_or(0)),
    )
}

/// The name of the stack's lease; also how two stack records are told to be the same stack (scope and name
/// compared without case).
pub(crate) fn lease_name(scope: &str, name: &str) -> String {
    format!(
        "stack:{}/{}",
        cairn_store::fold_case(scope),
        name.to_lowercase()
    )
}

impl StackService {
    /// A service over the engine, its store and host. `providers` are the ARM providers deletes and directive
    /// API calls go to, in addition to the built-in ones (resource groups, deployments, Key Vault).
    pub fn new(
        engine: Engine,
        store: Arc<dyn Store>,
        host: Arc<ExtensionHost>,
        providers: Providers,
        settings: StackServiceSettings,
    ) -> Self {
        let mut all = Providers::builtin(store.clone());
        all.extend(providers);
        Self {
            access: Access::everything(),
            inner: Arc::new(Inner {
                engine,
                store,
                host,
                providers: Arc::new(all),
                settings,
                operations: tokio_util::task::TaskTracker::new(),
                closing: tokio_util::sync::CancellationToken::new(),
                cancels: std::sync::Mutex::default(),
                record_changes: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    /// This service acting for a caller that may reach only `access`: the stack's deployment runs as that caller
    /// ([`Engine::acting_for`]), and every delete (a stack's unmanage, a bulk delete) and every directive run again
    /// to fetch a delete's credentials is checked against it.
    pub fn acting_for(&self, access: Access) -> Self {
        Self {
            inner: self.inner.clone(),
            access,
        }
    }

    /// The engine, acting for this service's caller.
    pub(crate) fn engine(&self) -> Engine {
        self.inner.engine.acting_for(self.access.clone())
    }

    /// The record and the stack it holds, without decoding its managed set (which a GET does not need, and which
    /// is the larger part of a big stack's record).
    pub(crate) async fn load_stack(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Option<(StackRecord, DeploymentStack)>, ArmError> {
        let Some(record) = self
            .inner
            .store
            .get_stack(scope, name)
            .await
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        let stack = record
            .stack
            .parse::<DeploymentStack>()
            .map_err(|e| stack_corrupt(name, e))?;
        Ok(Some((record, stack)))
    }

    pub(crate) async fn load(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<Option<(StackRecord, DeploymentStack, StoredState)>, ArmError> {
        let Some((record, stack)) = self.load_stack(scope, name).await? else {
            return Ok(None);
        };
        let state = record.managed_set.parse::<StoredState>().map_err(|e| {
            ArmError::new(
                500,
                "StoreDataCorrupt",
                format!("stored managed set of '{name}': {e}"),
            )
        })?;
        Ok(Some((record, stack, state)))
    }

    pub(crate) async fn put_record(
        &self,
        scope: &str,
        name: &str,
        stack: &DeploymentStack,
        state: StateRecord<'_>,
        precondition: Precondition,
        inventory: Vec<InventoryChange>,
    ) -> Result<StackRecord, ArmError> {
        let internal =
            |e: serde_json::Error| ArmError::new(500, "InternalServerError", e.to_string());
        let stack_json = JsonText::of(stack).map_err(internal)?;
        let managed_set = JsonText::of(&state).map_err(internal)?;
        let written = self
            .inner
            .store
            .put_stack_with_inventory(
                NewStack {
                    scope: scope.trim_end_matches('/').to_owned(),
                    name: name.to_owned(),
                    stack: stack_json,
                    managed_set,
                },
                precondition,
                Timestamp::now(),
                inventory,
            )
            .await
            .map_err(store_error);
        if written.is_ok() {
            self.tell_record_changed();
        }
        written
    }

    /// Every stack record of every scope (the ownership check and recovery look across all of them).
    pub(crate) async fn all_stack_records(&self) -> Result<Vec<StackRecord>, ArmError> {
        let mut records = Vec::new();
        let mut page = PageRequest::default();
        loop {
            let listed = self
                .inner
                .store
                .list_stacks(None, page.clone())
                .await
                .map_err(store_error)?;
            records.extend(listed.items);
            match listed.continuation {
                Some(token) => page.continuation = Some(token),
                None => return Ok(records),
            }
        }
    }

    /// The other stacks' claims on resources, for the ownership check.
    pub(crate) async fn ownership(&self, scope: &str, name: &str) -> Result<Ownership, ArmError> {
        self.ownership_except(Some(lease_name(scope, name))).await
    }

    /// What every stack manages.
    pub(crate) async fn ownership_of_all_stacks(&self) -> Result<Ownership, ArmError> {
        self.ownership_except(None).await
    }

    async fn ownership_except(&self, me: Option<String>) -> Result<Ownership, ArmError> {
        let mut ownership = Ownership::new();
        for record in self.all_stack_records().await? {
            if me.as_deref() == Some(lease_name(&record.scope, &record.name).as_str()) {
                continue;
            }
            // A stack whose record cannot be read has claims nobody can see: refuse rather than let another
            // stack take its resources over.
            let unreadable = |e: serde_json::Error| {
                ArmError::new(
                    500,
                    "StoreDataCorrupt",
                    format!(
                        "the stored stack '{}' cannot be read, so which resources it manages is unknown: {e}",
                        record.name
                    ),
                )
            };
            let state = record
                .managed_set
                .parse::<StoredState>()
                .map_err(unreadable)?;
            let header = record.stack.parse::<StackHeader>().map_err(unreadable)?;
            let shared = header.shares_resources();
            let stack_id = header.id.unwrap_or_else(|| record.name.clone());
            for resource in &state.managed_set {
                ownership.claim(
                    resource.key().clone(),
                    StackClaim {
                        stack_id: stack_id.clone(),
                        shared,
                    },
                );
            }
        }
        Ok(ownership)
    }

    /// The stack (`GET`); 404 `DeploymentStackNotFound`. Its managed set is not read: a client following an
    /// operation reads the stack again and again, and a big stack's set is thousands of records.
    pub async fn get(&self, scope: &str, name: &str) -> Result<DeploymentStack, ArmError> {
        let stack = self.get_text(scope, name).await?;
        serde_json::from_str(&stack).map_err(|e| stack_corrupt(name, e))
    }

    /// Told after every stack record this process writes or deletes: a held status poll wakes on it to read again
    /// (records other replicas write are not told here; such a poll also reads again at its own pace).
    pub fn record_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.record_changes.subscribe()
    }

    pub(crate) fn tell_record_changed(&self) {
        self.inner
            .record_changes
            .send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The stack resource as its stored JSON text, not parsed: a caller following an operation compares it with
    /// the last read and parses only what changed.
    pub async fn get_text(&self, scope: &str, name: &str) -> Result<String, ArmError> {
        self.inner
            .store
            .get_stack_resource(scope, name)
            .await
            .map_err(store_error)?
            .ok_or_else(|| ArmError::deployment_stack_not_found(name))
    }

    /// The stacks of a scope.
    pub async fn list(&self, scope: &str, page: PageRequest) -> Result<StackPage, ArmError> {
        let listed = self
            .inner
            .store
            .list_stacks(Some(scope), page)
            .await
            .map_err(store_error)?;
        let mut value = Vec::with_capacity(listed.items.len());
        for record in listed.items {
            let stack = record
                .stack
                .parse()
                .map_err(|e| stack_corrupt(&record.name, e))?;
            value.push(stack);
        }
        Ok(StackPage {
            value,
            continuation: listed.continuation,
        })
    }
}

/// 500 `StoreDataCorrupt`: stack `name`'s record holds no stack resource.
fn stack_corrupt(name: &str, error: serde_json::Error) -> ArmError {
    ArmError::new(
        500,
        "StoreDataCorrupt",
        format!("stored stack '{name}': {error}"),
    )
}

//! The storage traits: one per area, all object-safe (methods return boxed `Send` futures), gathered by [`Store`].
//! The engine and API server hold an `Arc<dyn Store>` and never see SQL or a particular backend.

use std::future::Future;
use std::pin::Pin;

use secrecy::SecretString;
use serde_json::Value;

use crate::error::StoreResult;
use crate::keys::{DeploymentId, DeploymentKey, ResourceKey};
use crate::records::{
    DeploymentFilter, DeploymentLookup, DeploymentRecord, DeploymentSummary, DeploymentUpdate,
    InventoryChange, Lease, ManagedResource, ManagedResourceFilter, ManagedResourceRecord,
    NewDeployment, NewSecretVersion, OperationRecord, OperationStep, Page, PageRequest,
    Precondition, ResourceGroup, ResourceGroupRecord, SecretVersionInfo, Vault, VaultRecord,
    VaultSecret,
};
use crate::records::{
    HostOperationRecord, NewHostOperation, NewOperationResult, NewStack, NewStackWhatIf,
    OperationResultRecord, StackRecord, StackWhatIfRecord,
};
use crate::secret::{SecretOwner, SecretRef};
use crate::time::Timestamp;

/// The future every store method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'a>>;

/// Resource groups of the local control plane, keyed by subscription and name (case-insensitive).
pub trait ResourceGroupStore: Send + Sync {
    fn put_resource_group<'a>(
        &'a self,
        group: ResourceGroup,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreFuture<'a, ResourceGroupRecord>;

    fn get_resource_group<'a>(
        &'a self,
        subscription_id: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<ResourceGroupRecord>>;

    /// The subscription's groups ordered by folded name.
    fn list_resource_groups<'a>(
        &'a self,
        subscription_id: &'a str,
        page: PageRequest,
    ) -> StoreFuture<'a, Page<ResourceGroupRecord>>;

    /// `NotFound` when absent; `Precondition::Version` guards against deleting a changed group.
    fn delete_resource_group<'a>(
        &'a self,
        subscription_id: &'a str,
        name: &'a str,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()>;
}

/// Deployment runs: the request, status, results and the owning engine's claim.
pub trait DeploymentStore: Send + Sync {
    /// Creates a deployment run. When one exists under the same key, `precondition` decides: `MustNotExist` gives
    /// `Conflict`, `Version(v)` or `Any` replace it — the old run's journal and secrets are deleted with it, in the
    /// same transaction. `Version(v)` with no existing run is `NotFound`; an `id` already in use is `Conflict`.
    fn put_deployment<'a>(
        &'a self,
        deployment: NewDeployment,
        precondition: Precondition,
    ) -> StoreFuture<'a, DeploymentRecord>;

    fn get_deployment<'a>(
        &'a self,
        key: &'a DeploymentKey,
    ) -> StoreFuture<'a, Option<DeploymentRecord>>;

    fn get_deployment_by_id<'a>(
        &'a self,
        id: &'a DeploymentId,
    ) -> StoreFuture<'a, Option<DeploymentRecord>>;

    /// A run's status, error and times without its request, outputs or output resources (a status poll's read).
    fn get_deployment_summary<'a>(
        &'a self,
        lookup: DeploymentLookup<'a>,
    ) -> StoreFuture<'a, Option<DeploymentSummary>>;

    /// Applies a partial update if the row is still at `expected_version` (else `Conflict`), and returns the
    /// run's summary at its new version (not the whole record: the request would be read back and parsed for
    /// nothing on every progress update).
    fn update_deployment<'a>(
        &'a self,
        id: &'a DeploymentId,
        expected_version: u64,
        update: DeploymentUpdate,
    ) -> StoreFuture<'a, DeploymentSummary>;

    /// The scope's deployments (folded scope match), ordered by folded name.
    fn list_deployments<'a>(
        &'a self,
        scope: &'a str,
        filter: DeploymentFilter,
    ) -> StoreFuture<'a, Page<DeploymentRecord>>;

    /// Deletes a deployment's history: the record, its journal and its secrets; resources stay. Nested
    /// deployments survive with their parent link cleared.
    fn delete_deployment<'a>(
        &'a self,
        key: &'a DeploymentKey,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()>;

    /// Claims (or renews the claim on) an active (`Accepted`/`Running`) deployment for `owner` until `expires_at`.
    /// Succeeds when unclaimed, already `owner`'s, or the other claim expired by `now`; otherwise `Conflict` — also
    /// for a finished run, so a stale heartbeat cannot claim a run its successor finished and released. Taking the claim over from
    /// another owner bumps the row version, so the old holder's `update_deployment` at the version it knew fails
    /// with `Conflict` (fencing), as do its renewals and its release.
    fn claim_deployment<'a>(
        &'a self,
        id: &'a DeploymentId,
        owner: &'a str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreFuture<'a, DeploymentRecord>;

    /// Drops `owner`'s claim; a claim held by someone else is `Conflict`, no claim is fine.
    fn release_deployment<'a>(
        &'a self,
        id: &'a DeploymentId,
        owner: &'a str,
    ) -> StoreFuture<'a, ()>;

    /// Records that recovery takes over deployment `id` whose journal holds `progress` succeeded steps, and returns
    /// how many takeovers in a row (this one included) found no progress: 1 at the first takeover or when
    /// `progress` passed the highest one any takeover saw, one more than last time otherwise.
    fn record_takeover<'a>(&'a self, id: &'a DeploymentId, progress: u64) -> StoreFuture<'a, u32>;

    /// Active (`Accepted`/`Running`) deployments with no claim or an expired one: the runs to resume after a
    /// crash. Oldest first, at most `limit`.
    fn list_orphaned_deployments<'a>(
        &'a self,
        now: Timestamp,
        limit: u32,
    ) -> StoreFuture<'a, Vec<DeploymentRecord>>;

    /// Marks an active run `cancel_requested` (a cancel asked of a server that does not run it) and returns the
    /// record; the row version stays, so the running server's updates go on. A finished run is returned unchanged;
    /// `NotFound` when the run is gone.
    fn request_deployment_cancel<'a>(
        &'a self,
        id: &'a DeploymentId,
    ) -> StoreFuture<'a, DeploymentRecord>;
}

/// The deployment operation journal: append-only, one row per step.
///
/// Journal writes are fenced by the run's claim: a writer that names itself (`writer: Some(owner)`) is refused with
/// `Conflict`, writing nothing, unless the run is claimed by `owner` when the write commits — so a server whose
/// claim was taken over (it was presumed dead: paused, partitioned, slow) cannot add steps or inventory changes
/// behind its successor's back. `writer: None` writes unconditionally (tools and tests that hold no claim).
pub trait OperationJournal: Send + Sync {
    /// Appends a step and returns it with its sequence number; `NotFound` when the deployment run is gone,
    /// `Conflict` when `writer` no longer holds its claim.
    fn append_operation<'a>(
        &'a self,
        step: OperationStep,
        writer: Option<&'a str>,
    ) -> StoreFuture<'a, OperationRecord>;

    /// The latest step of each operation of a run, in the order the operations first appeared.
    fn latest_operations<'a>(
        &'a self,
        deployment: &'a DeploymentId,
    ) -> StoreFuture<'a, Vec<OperationRecord>>;

    /// The latest step of one operation.
    fn get_operation<'a>(
        &'a self,
        deployment: &'a DeploymentId,
        operation_id: &'a str,
    ) -> StoreFuture<'a, Option<OperationRecord>>;

    /// Raw journal rows with a sequence number above `after_sequence`, in order, at most `limit`.
    fn operation_journal<'a>(
        &'a self,
        deployment: &'a DeploymentId,
        after_sequence: u64,
        limit: u32,
    ) -> StoreFuture<'a, Vec<OperationRecord>>;

    /// Appends a step together with its inventory effect, atomically: a finished create is journaled and its
    /// resource inventoried in one commit, so a crash can never leave one without the other (and the store writes
    /// one commit instead of two). `NotFound` when the deployment run is gone, `Conflict` when `writer` no longer
    /// holds its claim; then nothing changes.
    fn record_step<'a>(
        &'a self,
        step: OperationStep,
        change: InventoryChange,
        writer: Option<&'a str>,
    ) -> StoreFuture<'a, OperationRecord>;

    /// [`append_operation`](Self::append_operation) for a step written behind: its caller goes on without waiting
    /// for it (a finished operation's step; its dependents start at once), so the store may hold it for a moment
    /// to commit it together with the next write someone does wait for — one durable commit instead of two. Once
    /// the future completes, the step is as durable as any other.
    fn append_operation_behind<'a>(
        &'a self,
        step: OperationStep,
        writer: Option<&'a str>,
    ) -> StoreFuture<'a, OperationRecord> {
        self.append_operation(step, writer)
    }

    /// [`record_step`](Self::record_step) for a step written behind (see
    /// [`append_operation_behind`](Self::append_operation_behind)).
    fn record_step_behind<'a>(
        &'a self,
        step: OperationStep,
        change: InventoryChange,
        writer: Option<&'a str>,
    ) -> StoreFuture<'a, OperationRecord> {
        self.record_step(step, change, writer)
    }
}

/// The managed-resource inventory of local providers and extension resources.
pub trait InventoryStore: Send + Sync {
    fn put_managed_resource<'a>(
        &'a self,
        resource: ManagedResource,
        precondition: Precondition,
    ) -> StoreFuture<'a, ManagedResourceRecord>;

    fn get_managed_resource<'a>(
        &'a self,
        key: &'a ResourceKey,
    ) -> StoreFuture<'a, Option<ManagedResourceRecord>>;

    /// Ordered by key.
    fn list_managed_resources<'a>(
        &'a self,
        filter: ManagedResourceFilter,
    ) -> StoreFuture<'a, Page<ManagedResourceRecord>>;

    fn delete_managed_resource<'a>(
        &'a self,
        key: &'a ResourceKey,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()>;
}

/// The local Key Vault provider's vaults and versioned secrets; values are encrypted at rest.
pub trait KeyVaultStore: Send + Sync {
    fn put_vault<'a>(
        &'a self,
        vault: Vault,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreFuture<'a, VaultRecord>;

    fn get_vault<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<VaultRecord>>;

    /// Vaults whose ID starts with `scope` (case-insensitive), ordered by folded ID.
    fn list_vaults<'a>(
        &'a self,
        scope: &'a str,
        page: PageRequest,
    ) -> StoreFuture<'a, Page<VaultRecord>>;

    /// Deletes a vault and all its secrets.
    fn delete_vault<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()>;

    /// Adds a new version of a secret (creating the secret on first set); `NotFound` when the vault is missing.
    fn set_vault_secret<'a>(
        &'a self,
        secret: NewSecretVersion,
    ) -> StoreFuture<'a, SecretVersionInfo>;

    /// One version, or the latest when `version` is `None`.
    fn get_vault_secret<'a>(
        &'a self,
        vault_id: &'a str,
        name: &'a str,
        version: Option<&'a str>,
    ) -> StoreFuture<'a, Option<VaultSecret>>;

    /// The latest version of each secret of a vault, ordered by folded name; no values.
    fn list_vault_secrets<'a>(
        &'a self,
        vault_id: &'a str,
    ) -> StoreFuture<'a, Vec<SecretVersionInfo>>;

    /// All versions of one secret, oldest first; no values.
    fn list_vault_secret_versions<'a>(
        &'a self,
        vault_id: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Vec<SecretVersionInfo>>;

    /// Enables or disables one version.
    fn set_vault_secret_enabled<'a>(
        &'a self,
        vault_id: &'a str,
        name: &'a str,
        version: &'a str,
        enabled: bool,
        now: Timestamp,
    ) -> StoreFuture<'a, SecretVersionInfo>;

    /// Deletes every version of a secret; `NotFound` when it has none.
    fn delete_vault_secret<'a>(&'a self, vault_id: &'a str, name: &'a str) -> StoreFuture<'a, ()>;
}

/// Named leases with heartbeat (deployment stacks' one-operation-at-a-time rule, singleton workers).
pub trait LeaseStore: Send + Sync {
    /// Takes the lease when free, expired by `now`, or already `owner`'s (then it is renewed); else `Conflict`.
    fn acquire_lease<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreFuture<'a, Lease>;

    /// A heartbeat: extends `owner`'s lease. `Conflict` when another owner holds it, `NotFound` when nobody does.
    fn renew_lease<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreFuture<'a, Lease>;

    /// Gives the lease up; `Conflict` when another owner holds it, nothing to do when nobody does.
    fn release_lease<'a>(&'a self, name: &'a str, owner: &'a str) -> StoreFuture<'a, ()>;

    fn get_lease<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Lease>>;
}

/// Encrypted secrets referenced from plain documents (secure parameters, secret extension-config values,
/// credential directives).
pub trait SecretStore: Send + Sync {
    /// Stores a secret under `(owner, name)` and returns its reference; setting the same name again replaces the
    /// value and keeps the reference.
    fn put_secret<'a>(
        &'a self,
        owner: &'a SecretOwner,
        name: &'a str,
        value: &'a SecretString,
        now: Timestamp,
    ) -> StoreFuture<'a, SecretRef>;

    /// The decrypted value; `NotFound` for an unknown reference, `Crypto` when it cannot be decrypted.
    fn get_secret<'a>(&'a self, reference: &'a SecretRef) -> StoreFuture<'a, SecretString>;

    /// The owner's secrets as `(name, reference)`, ordered by name.
    fn list_secrets<'a>(
        &'a self,
        owner: &'a SecretOwner,
    ) -> StoreFuture<'a, Vec<(String, SecretRef)>>;

    /// Deletes all the owner's secrets and returns how many there were.
    fn delete_secrets<'a>(&'a self, owner: &'a SecretOwner) -> StoreFuture<'a, u64>;
}

/// Deployment stacks: the stack resource and its managed set, keyed by folded scope and name, versioned.
pub trait StackStore: Send + Sync {
    /// Creates or replaces a stack; `precondition` as for resource groups (`Version(v)` guards against a
    /// concurrent writer). The version starts at 1 and grows by one per write.
    fn put_stack<'a>(
        &'a self,
        stack: NewStack,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreFuture<'a, StackRecord>;

    fn get_stack<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<StackRecord>>;

    /// The stack resource of a stack as JSON text (the `stack` that [`StackStore::get_stack`] reads), without reading
    /// its managed set or parsing it: what a GET of the stack needs, read straight into its type. A big stack's
    /// managed set is thousands of records, and so is its `resources` list.
    fn get_stack_resource<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<String>>;

    /// The stacks of one scope (folded match), or of every scope when `scope` is `None` (the ownership check
    /// between stacks), ordered by folded scope and name.
    fn list_stacks<'a>(
        &'a self,
        scope: Option<&'a str>,
        page: PageRequest,
    ) -> StoreFuture<'a, Page<StackRecord>>;

    /// `NotFound` when absent; `Precondition::Version` guards against deleting a changed stack.
    fn delete_stack<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()>;

    /// [`StackStore::put_stack`] that applies `changes` to the inventory in the same transaction (all or nothing):
    /// the write of a stack operation's record that first records resources as deleted or detached removes or
    /// marks their inventory rows with it.
    fn put_stack_with_inventory<'a>(
        &'a self,
        stack: NewStack,
        precondition: Precondition,
        now: Timestamp,
        changes: Vec<InventoryChange>,
    ) -> StoreFuture<'a, StackRecord>;

    /// [`StackStore::delete_stack`] that applies `changes` to the inventory in the same transaction (the end of a
    /// stack delete: the record goes with the rows of what it deleted).
    fn delete_stack_with_inventory<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        precondition: Precondition,
        changes: Vec<InventoryChange>,
    ) -> StoreFuture<'a, ()>;
}

/// Deployment stack what-if results (`deploymentStacksWhatIfResults`), keyed by folded scope and lower-cased name,
/// each kept until its `expires_at`. Every read takes `now` and treats a record expired by then (`expires_at <=
/// now`) as absent; [`StackWhatIfStore::purge_expired_stack_what_ifs`] reclaims their space. The request beside
/// each result is sealed at rest and deleted with it.
pub trait StackWhatIfStore: Send + Sync {
    /// Creates or replaces a result (with its request); `true` when it replaced one that had not expired by `now`.
    fn put_stack_what_if<'a>(
        &'a self,
        what_if: NewStackWhatIf,
        now: Timestamp,
    ) -> StoreFuture<'a, bool>;

    fn get_stack_what_if<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<StackWhatIfRecord>>;

    /// The request a result was computed from, decrypted; `None` when there is no unexpired result.
    fn get_stack_what_if_request<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<SecretString>>;

    /// The unexpired results of one scope (folded match), ordered by folded name.
    fn list_stack_what_ifs<'a>(
        &'a self,
        scope: &'a str,
        page: PageRequest,
        now: Timestamp,
    ) -> StoreFuture<'a, Page<StackWhatIfRecord>>;

    /// Deletes a result and its request; `true` when an unexpired one existed (an expired one is removed too).
    fn delete_stack_what_if<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, bool>;

    /// Deletes every result (and request) expired by `now`; returns how many.
    fn purge_expired_stack_what_ifs<'a>(&'a self, now: Timestamp) -> StoreFuture<'a, u64>;
}

/// Pending operations of the extension host's API, keyed by their id (exact), each kept until its `expires_at`.
/// Reads take `now` and treat a record expired by then (`expires_at <= now`) as absent; the state is sealed at rest.
pub trait HostOperationStore: Send + Sync {
    /// Creates or replaces the operation `operation.id` (a replacement keeps `created_at`, unless the old one had
    /// expired by `now`).
    fn put_host_operation<'a>(
        &'a self,
        operation: NewHostOperation,
        now: Timestamp,
    ) -> StoreFuture<'a, ()>;

    fn get_host_operation<'a>(
        &'a self,
        id: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<HostOperationRecord>>;

    /// Deletes the operation; `true` when an unexpired one existed (an expired one is removed too).
    fn delete_host_operation<'a>(&'a self, id: &'a str, now: Timestamp) -> StoreFuture<'a, bool>;

    /// Deletes every operation expired by `now`; returns how many.
    fn purge_expired_host_operations<'a>(&'a self, now: Timestamp) -> StoreFuture<'a, u64>;
}

/// Results of long-running operations polled through `Location` (deployment deletes and what-ifs, bulk deletes),
/// by id, each kept until its `expires_at`: every read takes `now` and treats an expired result as absent. A running
/// one is claimed by the server running it, which renews the claim and records the end; only that owner can.
pub trait OperationResultStore: Send + Sync {
    /// Creates or replaces a result.
    fn put_operation_result<'a>(
        &'a self,
        result: NewOperationResult,
        now: Timestamp,
    ) -> StoreFuture<'a, ()>;

    /// The unexpired result `id` of `subscription` (compared case-insensitively).
    fn get_operation_result<'a>(
        &'a self,
        subscription: &'a str,
        id: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<OperationResultRecord>>;

    /// Renews `owner`'s claim on a running result until `owner_expires_at`. `NotFound` when absent or expired,
    /// `Conflict` when it is not running under `owner` (ended, or claimed by another).
    fn renew_operation_result<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        owner_expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreFuture<'a, ()>;

    /// Records the end of a result running under `owner`: its status and body. Same refusals as renewing.
    fn finish_operation_result<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        status: u16,
        body: Option<Value>,
        now: Timestamp,
    ) -> StoreFuture<'a, ()>;

    /// Deletes every result expired by `now`; returns how many.
    fn purge_expired_operation_results<'a>(&'a self, now: Timestamp) -> StoreFuture<'a, u64>;
}

/// Everything a deployment needs persisted. Implemented by the embedded SQLite store and by PostgreSQL.
pub trait Store:
    ResourceGroupStore
    + DeploymentStore
    + OperationJournal
    + InventoryStore
    + KeyVaultStore
    + LeaseStore
    + SecretStore
    + StackStore
    + StackWhatIfStore
    + HostOperationStore
    + OperationResultStore
{
    /// A short name for diagnostics (`sqlite`, `postgres`).
    fn backend_name(&self) -> &'static str;

    /// Whether the store can serve requests now (a readiness probe, cheap enough to call every few seconds): it
    /// answers, and its schema is the version this build expects. `Ok` when ready; otherwise the error names the
    /// problem: `Backend` when the store cannot be reached (or was closed), `NotReady` when its schema is older
    /// (migrations not applied) or newer (written by a newer cairn) than this build's.
    fn readiness<'a>(&'a self) -> StoreFuture<'a, ()>;

    /// Flushes and closes the backend; later calls fail with `Backend`. Dropping without closing is safe (every
    /// write is durable when its future completes), closing just does it tidily.
    fn close<'a>(&'a self) -> StoreFuture<'a, ()>;
}

//! The persistence interface of cairn: the [`Store`] trait, the records it keeps, envelope encryption of secrets,
//! and backend-independent conformance tests.
//!
//! # What is stored
//!
//! - **Deployments**, keyed by scope and name (case-insensitive). Each PUT starts a *run* with its own
//!   [`DeploymentId`]; the run holds the request (secrets replaced by [`SecretRef`] markers), status, timestamps,
//!   results, and the claim of the engine replica driving it (owner + expiry) for crash recovery.
//! - **The operation journal**: one appended row per operation step, never a rewrite. With the request and the
//!   inventory it is everything a restarted engine needs to resume a run (see `docs/store.md`).
//! - **The managed-resource inventory** of local providers and extension resources, **resource groups**, the local
//!   **Key Vault** (vaults and versioned secrets), generic **leases** with heartbeat, and **secrets**.
//! - **Deployment stacks** (the stack resource and its managed set) and **stack what-if results**, the latter with
//!   their request sealed at rest and an expiry (`retentionInterval`) after which reads no longer see them.
//! - **Pending operations of the extension host's API** (a delete still running behind a `Location`), their polling
//!   state sealed at rest, each until its expiry, so the `Location` keeps answering across a restart.
//!
//! # Architecture invariants
//!
//! - No SQL here and nothing backend-specific: the engine sees only `dyn Store`. The SQLite store
//!   (`cairn-store-sqlite`) is the embedded default; the PostgreSQL store (`cairn-store-postgres`) serves several
//!   server replicas. Both implement the same traits and pass the same `conformance` suite (feature `testing`), and
//!   share what is not SQL: how records are read from rows (`codec`), which columns are sealed and how (`sealed`),
//!   the migration rules (`schema`) and the tables a copy between them carries (`transfer`).
//! - No secret value is ever stored in plaintext, printed by `Debug`, or put in an error message. Secret values
//!   travel as [`SecretString`] and are sealed by [`crypto::DataKey`] (XChaCha20-Poly1305, random nonce per record,
//!   associated data = table + row ID + column) under a data key wrapped by the [`crypto::MasterKey`].
//! - Writes are journaled: per-resource writes are appends and small keyed upserts, so the bytes written per
//!   resource do not grow with deployment size.
//! - The store never reads a clock: callers pass `now` and record timestamps ([`Timestamp`], Unix milliseconds).
//! - Every row holding JSON records its format version (see the `format` module); readers accept older versions.

pub mod codec;
pub mod crypto;
mod delegate;
mod error;
pub mod format;
mod keys;
mod records;
pub mod schema;
pub mod sealed;
mod secret;
mod store;
mod time;
pub mod transfer;

#[cfg(feature = "testing")]
pub mod bench;
#[cfg(feature = "testing")]
pub mod conformance;

pub use error::{Entity, StoreError, StoreResult};
pub use keys::{DeploymentId, DeploymentKey, ResourceKey, fold_case, write_canonical_json};
pub use records::{
    DeploymentFilter, DeploymentLookup, DeploymentOwner, DeploymentRecord, DeploymentStatus,
    DeploymentSummary, DeploymentUpdate, ExtensionRef, HostOperationRecord, InventoryChange,
    JsonText, Lease, MAX_PAGE_SIZE, ManagedResource, ManagedResourceFilter, ManagedResourceRecord,
    NewDeployment, NewHostOperation, NewOperationResult, NewSecretVersion, NewStack,
    NewStackWhatIf, OperationRecord, OperationResultRecord, OperationResultState, OperationStep,
    Page, PageRequest, Precondition, ResourceGroup, ResourceGroupRecord, SecretVersionInfo,
    StackRecord, StackWhatIfRecord, Tags, UnknownStatus, Vault, VaultRecord, VaultSecret,
};
pub use secrecy::{ExposeSecret, SecretString};
pub use secret::{SECRET_REF_MEMBER, SecretOwner, SecretRef};
pub use store::{
    DeploymentStore, HostOperationStore, InventoryStore, KeyVaultStore, LeaseStore,
    OperationJournal, OperationResultStore, ResourceGroupStore, SecretStore, StackStore,
    StackWhatIfStore, Store, StoreFuture,
};
pub use time::Timestamp;

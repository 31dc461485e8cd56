//! The records the store persists: resource groups, deployments and their operation journal, the managed-resource
//! inventory, Key Vault vaults and secret versions, and leases. JSON documents the store does not interpret
//! (requests, outputs, errors, properties) are `serde_json::Value`; they must never hold a secret value — secrets go
//! through `SecretStore` and appear in documents as [`crate::SecretRef`] markers.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use secrecy::SecretString;
use serde_json::Value;

use crate::keys::{DeploymentId, DeploymentKey, ResourceKey};
use crate::time::Timestamp;

/// Resource tags: name → value.
pub type Tags = BTreeMap<String, String>;

/// What a conditional write expects to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Create or overwrite unconditionally.
    Any,
    /// Create only; an existing record is a `Conflict`.
    MustNotExist,
    /// Overwrite only the record at this row version; a missing record is `NotFound`, another version `Conflict`.
    Version(u64),
}

/// Options for listing in pages, ordered by the record's folded key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items (`None`: the backend's maximum, 1,000).
    pub limit: Option<u32>,
    /// The continuation token of the previous page.
    pub continuation: Option<String>,
}

/// The largest page any backend returns.
pub const MAX_PAGE_SIZE: u32 = 1_000;

impl PageRequest {
    pub fn first(limit: u32) -> Self {
        PageRequest {
            limit: Some(limit),
            continuation: None,
        }
    }

    /// The effective page size: the requested limit clamped to 1..=[`MAX_PAGE_SIZE`].
    pub fn page_size(&self) -> u32 {
        self.limit.unwrap_or(MAX_PAGE_SIZE).clamp(1, MAX_PAGE_SIZE)
    }
}

/// One page of a listing; `continuation` is set when more items follow.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub continuation: Option<String>,
}

// ---------------------------------------------------------------------------------------------------------------
// Resource groups

/// A resource group as the local control plane keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceGroup {
    pub subscription_id: String,
    pub name: String,
    pub location: String,
    pub tags: Tags,
    pub managed_by: Option<String>,
    /// `Succeeded`, `Deleting`, ... (ARM's extensible provisioning states, kept as written).
    pub provisioning_state: String,
}

impl ResourceGroup {
    /// `/subscriptions/{sub}/resourceGroups/{name}`.
    pub fn resource_id(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}",
            self.subscription_id, self.name
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceGroupRecord {
    pub group: ResourceGroup,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

// ---------------------------------------------------------------------------------------------------------------
// Deployments

/// A deployment's lifecycle state. Only `Accepted` and `Running` are active; the rest are terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeploymentStatus {
    Accepted,
    Running,
    Succeeded,
    Failed,
    Canceled,
}

impl DeploymentStatus {
    pub const ALL: [DeploymentStatus; 5] = [
        DeploymentStatus::Accepted,
        DeploymentStatus::Running,
        DeploymentStatus::Succeeded,
        DeploymentStatus::Failed,
        DeploymentStatus::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentStatus::Accepted => "Accepted",
            DeploymentStatus::Running => "Running",
            DeploymentStatus::Succeeded => "Succeeded",
            DeploymentStatus::Failed => "Failed",
            DeploymentStatus::Canceled => "Canceled",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, DeploymentStatus::Accepted | DeploymentStatus::Running)
    }
}

impl fmt::Display for DeploymentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not one of the five deployment states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown deployment status '{0}'")]
pub struct UnknownStatus(pub String);

impl FromStr for DeploymentStatus {
    type Err = UnknownStatus;

    /// Case-insensitive, as ARM's `$filter=provisioningState eq '...'` is.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        DeploymentStatus::ALL
            .into_iter()
            .find(|status| status.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| UnknownStatus(text.to_owned()))
    }
}

/// Who is driving a deployment and until when. An engine replica claims a deployment before working on it and
/// renews the claim; a claim that has expired marks the deployment as orphaned (its engine crashed), so another
/// replica may claim and resume it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeploymentOwner {
    pub owner: String,
    pub expires_at: Timestamp,
}

/// A deployment as first written (a PUT accepted by the API).
#[derive(Clone, Debug, PartialEq)]
pub struct NewDeployment {
    /// The run's ID, chosen by the caller ([`DeploymentId::generate`]) so secrets can be stored under
    /// `SecretOwner::Deployment(id)` before the request that references them.
    pub id: DeploymentId,
    pub key: DeploymentKey,
    /// The deployment that started this one, for nested deployments.
    pub parent: Option<DeploymentId>,
    pub location: Option<String>,
    pub tags: Tags,
    /// The request body's `properties` (template or templateLink, parameters, extensionConfigs, mode, ...), with
    /// every secure parameter value and secret config value replaced by a `SecretRef` marker.
    pub request: Value,
    pub status: DeploymentStatus,
    pub correlation_id: String,
    /// Started by a deployment stack (the API then returns extension `config`).
    pub stack_initiated: bool,
    pub created_at: Timestamp,
    /// Claim the new deployment at once, so no other replica picks it up between creation and the first claim.
    pub owner: Option<DeploymentOwner>,
}

/// A stored deployment run.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentRecord {
    pub id: DeploymentId,
    pub key: DeploymentKey,
    pub parent: Option<DeploymentId>,
    pub location: Option<String>,
    pub tags: Tags,
    pub request: Value,
    pub status: DeploymentStatus,
    pub correlation_id: String,
    pub stack_initiated: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// `{name: {type, value}}`.
    pub outputs: Option<Value>,
    /// The flat ARM error detail of a failed deployment.
    pub error: Option<Value>,
    /// `outputResources[]`.
    pub output_resources: Option<Value>,
    /// `extensions[]` (non-secret parts only).
    pub extensions: Option<Value>,
    pub owner: Option<DeploymentOwner>,
    /// A cancel was asked for (`DeploymentStore::request_deployment_cancel`) while another server ran the run: the
    /// holder of the claim sees it when it renews the claim, and cancels.
    pub cancel_requested: bool,
    /// The row version, bumped by every `update_deployment` and by a claim taken over from another owner (which
    /// fences the old holder's updates); claiming an unclaimed run, renewals and cancel requests leave it alone.
    pub version: u64,
}

/// What a status poll needs of a deployment run, read without its request (the template), outputs or output
/// resources: reading it costs the same for a run of 5 resources as of 5,000.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentSummary {
    pub id: DeploymentId,
    pub key: DeploymentKey,
    pub parent: Option<DeploymentId>,
    pub status: DeploymentStatus,
    /// The flat ARM error detail of a failed deployment.
    pub error: Option<Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// See [`DeploymentRecord::cancel_requested`].
    pub cancel_requested: bool,
    pub version: u64,
}

impl From<&DeploymentRecord> for DeploymentSummary {
    fn from(record: &DeploymentRecord) -> Self {
        DeploymentSummary {
            id: record.id.clone(),
            key: record.key.clone(),
            parent: record.parent.clone(),
            status: record.status,
            error: record.error.clone(),
            created_at: record.created_at,
            updated_at: record.updated_at,
            started_at: record.started_at,
            finished_at: record.finished_at,
            cancel_requested: record.cancel_requested,
            version: record.version,
        }
    }
}

/// Which deployment run to read: the current run under a key (folded case), or a run by its id.
#[derive(Clone, Copy, Debug)]
pub enum DeploymentLookup<'a> {
    Key(&'a DeploymentKey),
    Id(&'a DeploymentId),
}

/// A partial update of a deployment: only the fields that are `Some` change, so progress updates stay small and
/// never rewrite the request.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentUpdate {
    pub updated_at: Timestamp,
    pub status: Option<DeploymentStatus>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub outputs: Option<Value>,
    pub error: Option<Value>,
    /// `outputResources[]`, as text: thousands of entries for a big deployment, written without a JSON tree.
    pub output_resources: Option<JsonText>,
    pub extensions: Option<Value>,
    /// The owner whose claim the same write drops when it still holds it: a run's last update releases its claim
    /// without a write of its own (a claim held by someone else stays; a takeover also fails the version check).
    pub release_claim_of: Option<String>,
}

impl DeploymentUpdate {
    /// An update that changes nothing but `updated_at`; set fields with struct-update syntax.
    pub fn at(updated_at: Timestamp) -> Self {
        DeploymentUpdate {
            updated_at,
            status: None,
            started_at: None,
            finished_at: None,
            outputs: None,
            error: None,
            output_resources: None,
            extensions: None,
            release_claim_of: None,
        }
    }
}

/// Which deployments of a scope to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentFilter {
    /// `$filter=provisioningState eq '...'`.
    pub status: Option<DeploymentStatus>,
    /// Only deployments nested in this one.
    pub parent: Option<DeploymentId>,
    pub page: PageRequest,
}

// ---------------------------------------------------------------------------------------------------------------
// Deployment operations (the journal)

/// The extension-specific identity of an operation's or managed resource's target (REP 0006). Its serde form
/// (camelCase, absent fields omitted) is the persisted format every backend uses.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtensionRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
    /// The extension's opaque reference for the resource (`referenceId`), when it returns one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Value>,
}

/// One step of a deployment operation, appended to the journal.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationStep {
    pub deployment_id: DeploymentId,
    /// Stable across all steps of one operation (one target resource and action).
    pub operation_id: String,
    /// `targetResource` (`{id?, resourceName?, resourceType?, apiVersion?, symbolicName?, ...}`).
    pub target_resource: Option<Value>,
    /// `Create`, `Delete`, `Read`, `EvaluateDeploymentOutput`, ... (kept as written: the enum is extensible).
    pub provisioning_operation: String,
    /// `Accepted`, `Running`, `Succeeded`, `Failed`, ...
    pub provisioning_state: String,
    pub status_code: Option<String>,
    /// `statusMessage` (`{status?, error?}`).
    pub status_message: Option<Value>,
    pub service_request_id: Option<String>,
    pub timestamp: Timestamp,
    pub duration_ms: Option<i64>,
    pub extension: Option<ExtensionRef>,
    /// `request.content` / `response.content`, only with `debugSetting`; never secrets.
    pub request_content: Option<Value>,
    pub response_content: Option<Value>,
}

/// A journal row: a step plus the sequence number the store gave it (1, 2, ... per deployment run).
#[derive(Clone, Debug, PartialEq)]
pub struct OperationRecord {
    pub sequence: u64,
    pub step: OperationStep,
}

// ---------------------------------------------------------------------------------------------------------------
// Managed-resource inventory

/// A resource the local providers or an extension hold for cairn: enough to read, diff and delete it later.
#[derive(Clone, Debug, PartialEq)]
pub struct ManagedResource {
    pub key: ResourceKey,
    /// The ARM resource ID, for ARM-addressed resources.
    pub resource_id: Option<String>,
    pub resource_type: String,
    /// Kept per resource so deletes use the version that created it.
    pub api_version: Option<String>,
    /// The resource body as last returned by its provider (non-secret).
    pub properties: Value,
    /// What the last deployment that wrote the resource applied, as its provider answered it: the members of
    /// `properties` (for an ARM resource, of its whole body) the request declared, with the values the provider
    /// answered (normalised as it stores them). A value the provider does not answer (write-only, e.g. a password)
    /// and the provider's write-only properties are left out, so it holds no secret. The baseline drift detection
    /// compares the live resource with; `None` for rows written by an earlier build or outside a deployment.
    pub applied: Option<Value>,
    /// The deployment that last wrote it.
    pub deployment: Option<DeploymentKey>,
    pub extension: Option<ExtensionRef>,
    pub updated_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ManagedResourceRecord {
    pub resource: ManagedResource,
    pub created_at: Timestamp,
    pub version: u64,
    /// A deployment stack stopped managing the resource and left it in place (`InventoryChange::Detach`); the next
    /// `InventoryChange::Put` (a deployment's finished create) clears it.
    pub detached: bool,
}

/// The inventory effect of an operation step, recorded in the same transaction as the step.
#[derive(Clone, Debug, PartialEq)]
pub enum InventoryChange {
    /// Create or overwrite the resource (no precondition).
    Put(Box<ManagedResource>),
    /// Create the resource unless the key is already inventoried, in which case the row is left as it is. A
    /// create's `Running` step records its target this way before the call goes out, so a crash during the call
    /// cannot leave a resource nobody tracks, and an update in flight keeps what its provider last returned.
    PutIfAbsent(Box<ManagedResource>),
    /// Remove the resource; nothing to do when it is already gone.
    Delete(ResourceKey),
    /// Mark the resource detached (left in place, no longer managed); nothing to do when it is not inventoried.
    Detach(ResourceKey),
}

/// Which managed resources to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedResourceFilter {
    /// Only resources last written by this deployment.
    pub deployment: Option<DeploymentKey>,
    /// Only this resource type (case-insensitive).
    pub resource_type: Option<String>,
    /// Only ARM resources whose ID starts with this scope (case-insensitive), e.g. a resource group's ID.
    pub scope: Option<String>,
    pub page: PageRequest,
}

// ---------------------------------------------------------------------------------------------------------------
// Key Vault

/// A vault of the local Key Vault provider.
#[derive(Clone, Debug, PartialEq)]
pub struct Vault {
    /// The ARM ID (`.../providers/Microsoft.KeyVault/vaults/{name}`), compared case-insensitively.
    pub id: String,
    pub name: String,
    pub location: String,
    pub tags: Tags,
    pub properties: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VaultRecord {
    pub vault: Vault,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

/// A new version of a vault secret.
#[derive(Debug)]
pub struct NewSecretVersion {
    pub vault_id: String,
    /// Compared case-insensitively, as Key Vault does.
    pub name: String,
    pub value: SecretString,
    pub content_type: Option<String>,
    pub enabled: bool,
    pub not_before: Option<Timestamp>,
    pub expires: Option<Timestamp>,
    pub tags: Tags,
    pub created_at: Timestamp,
}

/// A secret version's attributes, without its value.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretVersionInfo {
    pub vault_id: String,
    pub name: String,
    /// 32 lowercase hex digits, as Key Vault's version IDs.
    pub version: String,
    pub content_type: Option<String>,
    pub enabled: bool,
    pub not_before: Option<Timestamp>,
    pub expires: Option<Timestamp>,
    pub tags: Tags,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A secret version with its value; `Debug` shows `[REDACTED]` for the value.
#[derive(Debug)]
pub struct VaultSecret {
    pub info: SecretVersionInfo,
    pub value: SecretString,
}

// ---------------------------------------------------------------------------------------------------------------
// Leases

/// A named lease: at most one owner at a time, kept alive by heartbeats, taken over after it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub name: String,
    pub owner: String,
    /// Increases every time the lease changes hands: a fencing token writers can attach to their work.
    pub generation: u64,
    pub acquired_at: Timestamp,
    pub heartbeat_at: Timestamp,
    pub expires_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_case_insensitively() {
        for status in DeploymentStatus::ALL {
            assert_eq!(
                status.as_str().to_uppercase().parse::<DeploymentStatus>(),
                Ok(status)
            );
        }
        assert_eq!(
            "Deleting".parse::<DeploymentStatus>(),
            Err(UnknownStatus("Deleting".into()))
        );
    }

    #[test]
    fn only_accepted_and_running_are_active() {
        let active: Vec<_> = DeploymentStatus::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .collect();
        assert_eq!(
            active,
            [DeploymentStatus::Accepted, DeploymentStatus::Running]
        );
    }

    #[test]
    fn page_size_is_clamped() {
        assert_eq!(PageRequest::default().page_size(), MAX_PAGE_SIZE);
        assert_eq!(PageRequest::first(0).page_size(), 1);
        assert_eq!(PageRequest::first(50_000).page_size(), MAX_PAGE_SIZE);
    }

    #[test]
    fn resource_group_id() {
        let group = ResourceGroup {
            subscription_id: "s1".into(),
            name: "rg".into(),
            location: "westus".into(),
            tags: Tags::new(),
            managed_by: None,
            provisioning_state: "Succeeded".into(),
        };
        assert_eq!(group.resource_id(), "/subscriptions/s1/resourceGroups/rg");
    }

    #[test]
    fn vault_secret_debug_hides_the_value() {
        let secret = VaultSecret {
            info: SecretVersionInfo {
                vault_id: "v".into(),
                name: "n".into(),
                version: "0".repeat(32),
                content_type: None,
                enabled: true,
                not_before: None,
                expires: None,
                tags: Tags::new(),
                created_at: Timestamp::from_unix_millis(0),
                updated_at: Timestamp::from_unix_millis(0),
            },
            value: SecretString::from("canary-value".to_owned()),
        };
        let debug = format!("{secret:?}");
        assert!(!debug.contains("canary-value"), "{debug}");
        assert!(debug.contains("REDACTED"));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Deployment stacks

/// A deployment stack to write, keyed by scope and name (both case-insensitive).
#[derive(Clone, Debug, PartialEq)]
pub struct NewStack {
    /// The scope the stack lives at (`/subscriptions/{sub}` or `/subscriptions/{sub}/resourceGroups/{rg}`).
    pub scope: String,
    pub name: String,
    /// The stack resource as the API returns it (`DeploymentStack` JSON; never secrets).
    pub stack: JsonText,
    /// The managed set in its persisted, versioned form (`cairn_stacks::ManagedSet::to_persisted`).
    pub managed_set: JsonText,
}

/// A JSON document kept as its text. A large stack's resource and managed set are thousands of records: they are
/// written from their owners' types and read back into them without a `serde_json::Value` tree in between, and a
/// reader that needs neither (another stack's ownership check skipping its own) does not parse them at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// The JSON text of `value`.
    pub fn of<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        serde_json::to_string(value).map(JsonText)
    }

    /// Text read back from a store that wrote it with [`JsonText::of`]: not parsed here; [`JsonText::parse`]
    /// reports text that is not JSON.
    pub fn from_stored(text: String) -> Self {
        JsonText(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The document as `T`, parsed straight from the text.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }
}

impl From<&Value> for JsonText {
    fn from(value: &Value) -> Self {
        JsonText(value.to_string())
    }
}

/// A stored deployment stack with its row version for optimistic concurrency.
#[derive(Clone, Debug, PartialEq)]
pub struct StackRecord {
    pub scope: String,
    pub name: String,
    pub stack: JsonText,
    pub managed_set: JsonText,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

// ---------------------------------------------------------------------------------------------------------------
// Deployment stack what-if results

/// A deployment stack what-if result to write, keyed by scope and name (both case-insensitive). It lives until
/// `expires_at` (the request's `retentionInterval` after it was computed): from then on reads do not see it and
/// `StackWhatIfStore::purge_expired_stack_what_ifs` removes it.
#[derive(Clone, Debug)]
pub struct NewStackWhatIf {
    /// The scope the result lives at (resource group, subscription or management group ID).
    pub scope: String,
    pub name: String,
    /// The result as the API returns it (`DeploymentStacksWhatIfResult` JSON; never secrets).
    pub result: Value,
    /// The request as given, kept to run it again (`POST .../whatIf`). It holds the template and parameter
    /// values, secure ones included, so backends keep it sealed at rest and never print it (`Debug` redacts it).
    pub request: SecretString,
    pub expires_at: Timestamp,
}

/// A stored, unexpired stack what-if result (without its sealed request; see
/// `StackWhatIfStore::get_stack_what_if_request`).
#[derive(Clone, Debug, PartialEq)]
pub struct StackWhatIfRecord {
    pub scope: String,
    pub name: String,
    pub result: Value,
    /// When the result was first stored under this key (a replacement keeps it, unless the old one had expired).
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Timestamp,
}

impl StackWhatIfRecord {
    /// Whether retention has ended at `now` (expiry is exclusive: at `expires_at` the record is gone).
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Pending operations of the extension host's API

/// A long-running operation the extension host's API handed out a `Location` for (a delete an extension is still
/// running), stored so a poll of that `Location` still answers after a restart. It lives until `expires_at`.
#[derive(Clone, Debug)]
pub struct NewHostOperation {
    /// The id in the `Location` (unique, compared exactly).
    pub id: String,
    /// The extension the operation runs in, as the `Location` names it.
    pub extension_name: String,
    pub extension_version: String,
    /// The host's polling state (the extension's operation handle, or the resource reference with its config).
    /// It can hold the extension config's secrets, so backends keep it sealed at rest; `Debug` redacts it.
    pub state: SecretString,
    pub expires_at: Timestamp,
}

/// A stored, unexpired host operation, its state decrypted.
#[derive(Clone, Debug)]
pub struct HostOperationRecord {
    pub id: String,
    pub extension_name: String,
    pub extension_version: String,
    pub state: SecretString,
    /// When the operation was first stored (a replacement keeps it).
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Timestamp,
}

// ---------------------------------------------------------------------------------------------------------------
// Results of long-running operations polled through `Location`

/// Where a long-running operation polled through `Location` stands.
#[derive(Clone, Debug, PartialEq)]
pub enum OperationResultState {
    /// Still running, on the server holding the claim (renewed while it works). A claim that expired means that
    /// server stopped before the operation ended.
    Running {
        owner: String,
        owner_expires_at: Timestamp,
    },
    /// Ended: the HTTP status and body the poll answers (never secrets).
    Done { status: u16, body: Option<Value> },
}

/// The result of a long-running operation (a deployment delete or what-if, a bulk delete), stored so that a poll
/// of its `Location` reaches it on any server sharing the store. It lives until `expires_at`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewOperationResult {
    /// The id in the `Location` (unique, compared exactly).
    pub id: String,
    /// The subscription the `Location` names (compared case-insensitively).
    pub subscription: String,
    pub state: OperationResultState,
    pub expires_at: Timestamp,
}

/// A stored, unexpired operation result.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationResultRecord {
    pub id: String,
    /// The subscription, lower-cased.
    pub subscription: String,
    pub state: OperationResultState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Timestamp,
}

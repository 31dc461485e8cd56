//! The typed error every store operation returns, shared by all backends.

use std::fmt;

/// What kind of stored thing an error is about; part of every [`StoreError`] message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entity {
    ResourceGroup,
    Deployment,
    DeploymentOperation,
    ManagedResource,
    KeyVault,
    KeyVaultSecret,
    Lease,
    Secret,
    StoreKey,
    DeploymentStack,
    StackWhatIf,
    HostOperation,
    OperationResult,
    Schema,
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Entity::ResourceGroup => "resource group",
            Entity::Deployment => "deployment",
            Entity::DeploymentOperation => "deployment operation",
            Entity::ManagedResource => "managed resource",
            Entity::KeyVault => "key vault",
            Entity::KeyVaultSecret => "key vault secret",
            Entity::Lease => "lease",
            Entity::Secret => "secret",
            Entity::StoreKey => "store key",
            Entity::DeploymentStack => "deployment stack",
            Entity::StackWhatIf => "deployment stack what-if result",
            Entity::HostOperation => "extension host operation",
            Entity::OperationResult => "operation result",
            Entity::Schema => "schema",
        })
    }
}

/// A store failure. Messages are lowercase fragments that read after "failed to ..." and never contain a secret
/// value: keys and names are included, plaintext and ciphertext never are.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The addressed record does not exist.
    #[error("find {entity} '{key}'")]
    NotFound { entity: Entity, key: String },
    /// A precondition failed: the row version moved on (optimistic concurrency), a unique key is taken, or a
    /// lease is held by another owner.
    #[error("write {entity} '{key}': {reason}")]
    Conflict {
        entity: Entity,
        key: String,
        reason: String,
    },
    /// Stored data cannot be read back: an unknown enum string, malformed JSON, a format or schema version newer
    /// than this build understands, or a changed migration.
    #[error("read {entity}: stored data is corrupt: {detail}")]
    Corrupt { entity: Entity, detail: String },
    /// Encryption or decryption failed: wrong key, tampered ciphertext, unusable key material.
    #[error("protect secrets: {0}")]
    Crypto(String),
    /// The backend (database, file system) failed; the message is the backend's and may be retried.
    #[error("access the store: {0}")]
    Backend(String),
    /// The store answers but cannot serve this build: its schema is not the version this build migrates it to
    /// (an older one whose migrations have not run, or a newer one written by a newer cairn).
    #[error("serve requests: {0}")]
    NotReady(String),
}

impl StoreError {
    pub fn not_found(entity: Entity, key: impl Into<String>) -> Self {
        StoreError::NotFound {
            entity,
            key: key.into(),
        }
    }

    pub fn conflict(entity: Entity, key: impl Into<String>, reason: impl Into<String>) -> Self {
        StoreError::Conflict {
            entity,
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub fn corrupt(entity: Entity, detail: impl Into<String>) -> Self {
        StoreError::Corrupt {
            entity,
            detail: detail.into(),
        }
    }

    /// The ARM-style error code for this failure, for callers that surface store errors to users.
    pub fn arm_code(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "NotFound",
            StoreError::Conflict { .. } => "Conflict",
            StoreError::Corrupt { .. } => "StoreDataCorrupt",
            StoreError::Crypto(_) => "StoreEncryptionFailure",
            StoreError::Backend(_) => "StoreUnavailable",
            StoreError::NotReady(_) => "StoreNotReady",
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }
}

/// The result of every store operation.
pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_after_failed_to() {
        let e = StoreError::not_found(Entity::Deployment, "/subscriptions/s/deployments/d");
        assert_eq!(
            e.to_string(),
            "find deployment '/subscriptions/s/deployments/d'"
        );
        assert_eq!(e.arm_code(), "NotFound");
        let e = StoreError::conflict(Entity::Lease, "stack:a", "held by another owner");
        assert_eq!(
            e.to_string(),
            "write lease 'stack:a': held by another owner"
        );
        assert!(e.is_conflict());
    }
}

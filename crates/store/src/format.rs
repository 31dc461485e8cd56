//! Versions of the persisted record formats. Every stored row that holds JSON carries the format version it was
//! written with; readers accept that version and every older one, and refuse newer ones rather than misread them.

use crate::error::{Entity, StoreError, StoreResult};

/// The format version this build writes for records of `entity`. Bump it when the meaning or shape of a stored
/// JSON column changes, and teach the backend's reader to upgrade the older shape on read.
pub const fn current_format(entity: Entity) -> u32 {
    match entity {
        Entity::ResourceGroup
        | Entity::Deployment
        | Entity::DeploymentOperation
        | Entity::ManagedResource
        | Entity::KeyVault
        | Entity::KeyVaultSecret
        | Entity::Lease
        | Entity::Secret
        | Entity::StoreKey
        | Entity::DeploymentStack
        | Entity::StackWhatIf
        | Entity::HostOperation
        | Entity::OperationResult
        | Entity::Schema => 1,
    }
}

/// Checks a stored format version: 1 up to [`current_format`] are readable, anything else is
/// [`StoreError::Corrupt`] (a newer cairn wrote it, or the row is damaged).
pub fn accept_format(entity: Entity, stored: i64) -> StoreResult<u32> {
    let current = current_format(entity);
    match u32::try_from(stored) {
        Ok(version) if (1..=current).contains(&version) => Ok(version),
        _ if stored > i64::from(current) => Err(StoreError::corrupt(
            entity,
            format!(
                "format version {stored} is newer than this build understands (up to {current}); upgrade cairn"
            ),
        )),
        _ => Err(StoreError::corrupt(
            entity,
            format!("invalid format version {stored}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_current_and_older_only() {
        assert_eq!(accept_format(Entity::Deployment, 1).ok(), Some(1));
        let newer = accept_format(Entity::Deployment, 2).expect_err("newer");
        assert!(newer.to_string().contains("newer than this build"));
        assert!(accept_format(Entity::Deployment, 0).is_err());
        assert!(accept_format(Entity::Deployment, -1).is_err());
    }
}

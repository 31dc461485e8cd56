//! Where the host API keeps its pending operations when the embedding program gives it no store: in memory, for
//! the life of the process (a restart forgets them; `cairn serve` passes its store instead).

use std::collections::HashMap;
use std::sync::Mutex;

use cairn_store::{
    HostOperationRecord, HostOperationStore, NewHostOperation, StoreFuture, Timestamp,
};

/// An in-memory [`HostOperationStore`] with the same expiry rules as the persistent ones.
#[derive(Default)]
pub struct MemoryOperations {
    entries: Mutex<HashMap<String, HostOperationRecord>>,
}

impl MemoryOperations {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, HostOperationRecord>> {
        // A poisoned lock only means another request panicked mid-update; the map itself stays usable.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl HostOperationStore for MemoryOperations {
    fn put_host_operation<'a>(
        &'a self,
        operation: NewHostOperation,
        now: Timestamp,
    ) -> StoreFuture<'a, ()> {
        let mut entries = self.entries();
        entries.retain(|_, entry| entry.expires_at > now);
        let created_at = entries
            .get(&operation.id)
            .map_or(now, |entry| entry.created_at);
        entries.insert(
            operation.id.clone(),
            HostOperationRecord {
                id: operation.id,
                extension_name: operation.extension_name,
                extension_version: operation.extension_version,
                state: operation.state,
                created_at,
                updated_at: now,
                expires_at: operation.expires_at,
            },
        );
        Box::pin(async { Ok(()) })
    }

    fn get_host_operation<'a>(
        &'a self,
        id: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<HostOperationRecord>> {
        let found = self
            .entries()
            .get(id)
            .filter(|entry| entry.expires_at > now)
            .cloned();
        Box::pin(async { Ok(found) })
    }

    fn delete_host_operation<'a>(&'a self, id: &'a str, now: Timestamp) -> StoreFuture<'a, bool> {
        let removed = self
            .entries()
            .remove(id)
            .is_some_and(|entry| entry.expires_at > now);
        Box::pin(async move { Ok(removed) })
    }

    fn purge_expired_host_operations<'a>(&'a self, now: Timestamp) -> StoreFuture<'a, u64> {
        let mut entries = self.entries();
        let before = entries.len();
        entries.retain(|_, entry| entry.expires_at > now);
        let purged = u64::try_from(before - entries.len()).unwrap_or(u64::MAX);
        Box::pin(async move { Ok(purged) })
    }
}

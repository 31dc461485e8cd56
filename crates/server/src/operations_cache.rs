//! Deployment operations lists kept serialised between requests. A client that follows a deployment lists its
//! operations every few hundred milliseconds; each list now reads only the journal rows after the one it keeps
//! (`Engine::operations_after`) and serialises only the operations that changed, instead of reading, converting
//! and serialising every operation of the run again. The kept lists are derived from the store alone (any server
//! sharing it answers the same), bounded in number and size, and dropped least recently used first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cairn_engine::{OperationsCursor, OperationsDelta};

/// At most this many deployments' lists are kept.
const MAX_LISTS: usize = 64;
/// At most this many bytes of serialised operations are kept across the lists.
const MAX_BYTES: usize = 64 * 1024 * 1024;

/// The kept lists, by deployment (scope and name, case-folded).
#[derive(Default)]
pub(crate) struct OperationsCache {
    inner: Mutex<Lists>,
}

#[derive(Default)]
struct Lists {
    by_deployment: HashMap<String, Arc<Mutex<KeptList>>>,
    /// Bumped by every use: what "least recently used" compares.
    clock: u64,
}

/// One deployment's list as last brought up to date.
struct KeptList {
    cursor: OperationsCursor,
    operations: Vec<KeptOperation>,
    /// Index into `operations` by `operationId`.
    at: HashMap<String, usize>,
    bytes: usize,
    used: u64,
}

struct KeptOperation {
    /// The journal sequence number of the step this was serialised from.
    sequence: u64,
    json: Box<str>,
}

impl OperationsCache {
    /// The cursor of the list kept for `deployment`, if any.
    pub(crate) fn cursor(&self, deployment: &str) -> Option<OperationsCursor> {
        let list = self.lists().by_deployment.get(deployment).cloned()?;
        let list = list.lock().unwrap_or_else(PoisonError::into_inner);
        Some(list.cursor.clone())
    }

    /// Brings the list kept for `deployment` up to date with `delta` and answers its first `top` operations as the
    /// body of an ARM list (`{"value":[...]}`). `None` when `delta` continues a list that is no longer kept (dropped,
    /// or replaced by another run's since the cursor was read): it holds only what changed after that list, so the
    /// caller reads the whole list again (a delta read without a cursor is always answered).
    pub(crate) fn apply(
        &self,
        deployment: &str,
        delta: OperationsDelta,
        top: Option<usize>,
    ) -> Result<Option<Vec<u8>>, serde_json::Error> {
        let list = {
            let mut lists = self.lists();
            lists.clock += 1;
            let used = lists.clock;
            let list = match lists.by_deployment.get(deployment) {
                Some(list) => list.clone(),
                None if delta.continues => return Ok(None),
                None => {
                    let list = Arc::new(Mutex::new(KeptList::new(delta.cursor.clone())));
                    lists
                        .by_deployment
                        .insert(deployment.to_owned(), list.clone());
                    list
                }
            };
            list.lock().unwrap_or_else(PoisonError::into_inner).used = used;
            list
        };
        let body = {
            let mut list = list.lock().unwrap_or_else(PoisonError::into_inner);
            if delta.continues && delta.cursor.run != list.cursor.run {
                return Ok(None);
            }
            list.merge(delta)?;
            list.body(top)
        };
        self.evict();
        Ok(Some(body))
    }

    /// Forgets the list of a deployment that is gone.
    pub(crate) fn forget(&self, deployment: &str) {
        self.lists().by_deployment.remove(deployment);
    }

    fn lists(&self) -> std::sync::MutexGuard<'_, Lists> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the least recently used lists while there are too many or they are too big together.
    fn evict(&self) {
        let mut lists = self.lists();
        loop {
            let sizes: Vec<(String, u64, usize)> = lists
                .by_deployment
                .iter()
                .map(|(key, list)| {
                    let list = list.lock().unwrap_or_else(PoisonError::into_inner);
                    (key.clone(), list.used, list.bytes)
                })
                .collect();
            let total: usize = sizes.iter().map(|(_, _, bytes)| bytes).sum();
            if sizes.len() <= MAX_LISTS && total <= MAX_BYTES {
                return;
            }
            let Some((oldest, _, _)) = sizes.into_iter().min_by_key(|(_, used, _)| *used) else {
                return;
            };
            lists.by_deployment.remove(&oldest);
        }
    }
}

impl KeptList {
    fn new(cursor: OperationsCursor) -> Self {
        KeptList {
            cursor,
            operations: Vec::new(),
            at: HashMap::new(),
            bytes: 0,
            used: 0,
        }
    }

    /// Applies `delta`. A whole list of another run replaces the list (a continuing delta of another run never gets
    /// here: see `OperationsCache::apply`); within a run each operation keeps the newest step either has, so deltas
    /// applied in any order (two requests racing) never take the list back.
    fn merge(&mut self, delta: OperationsDelta) -> Result<(), serde_json::Error> {
        if delta.cursor.run != self.cursor.run {
            *self = KeptList {
                used: self.used,
                ..KeptList::new(delta.cursor.clone())
            };
        }
        for (sequence, operation) in delta.changed {
            let operation_id = operation.operation_id.clone().unwrap_or_default();
            match self.at.get(&operation_id) {
                Some(&index) if self.operations[index].sequence >= sequence => {}
                Some(&index) => {
                    let json = serde_json::to_string(&operation)?.into_boxed_str();
                    let kept = &mut self.operations[index];
                    self.bytes = self.bytes - kept.json.len() + json.len();
                    *kept = KeptOperation { sequence, json };
                }
                None => {
                    let json = serde_json::to_string(&operation)?.into_boxed_str();
                    self.bytes += json.len();
                    self.at.insert(operation_id, self.operations.len());
                    self.operations.push(KeptOperation { sequence, json });
                }
            }
        }
        self.cursor.sequence = self.cursor.sequence.max(delta.cursor.sequence);
        Ok(())
    }

    fn body(&self, top: Option<usize>) -> Vec<u8> {
        let listed = &self.operations[..top.unwrap_or(usize::MAX).min(self.operations.len())];
        let mut body =
            Vec::with_capacity(listed.iter().map(|o| o.json.len() + 1).sum::<usize>() + 12);
        body.extend_from_slice(b"{\"value\":[");
        for (index, operation) in listed.iter().enumerate() {
            if index > 0 {
                body.push(b',');
            }
            body.extend_from_slice(operation.json.as_bytes());
        }
        body.extend_from_slice(b"]}");
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_arm::models::common::ListResult;
    use cairn_arm::models::deployment::DeploymentProvisioningState;
    use cairn_arm::models::operation::{DeploymentOperation, DeploymentOperationProperties};
    use cairn_store::DeploymentId;

    fn operation(id: &str, state: DeploymentProvisioningState) -> DeploymentOperation {
        DeploymentOperation {
            id: Some(format!("/d/operations/{id}")),
            operation_id: Some(id.to_owned()),
            properties: DeploymentOperationProperties {
                provisioning_state: Some(state),
                ..Default::default()
            },
        }
    }

    /// What changed after a kept list's cursor.
    fn delta(
        run: &str,
        sequence: u64,
        changed: Vec<(u64, DeploymentOperation)>,
    ) -> OperationsDelta {
        OperationsDelta {
            cursor: OperationsCursor {
                run: DeploymentId::from_string(run),
                sequence,
            },
            continues: true,
            changed,
        }
    }

    /// A whole list, read without a cursor.
    fn whole(
        run: &str,
        sequence: u64,
        changed: Vec<(u64, DeploymentOperation)>,
    ) -> OperationsDelta {
        OperationsDelta {
            continues: false,
            ..delta(run, sequence, changed)
        }
    }

    fn answered(body: Result<Option<Vec<u8>>, serde_json::Error>) -> Vec<DeploymentOperation> {
        listed(&body.unwrap().expect("the delta continues the kept list"))
    }

    fn listed(body: &[u8]) -> Vec<DeploymentOperation> {
        serde_json::from_slice::<ListResult<DeploymentOperation>>(body)
            .unwrap()
            .value
    }

    use DeploymentProvisioningState::{Running, Succeeded};

    #[test]
    fn a_kept_list_takes_changed_operations_in_place_and_new_ones_at_the_end() {
        let cache = OperationsCache::default();
        let first = whole(
            "r1",
            2,
            vec![(1, operation("a", Running)), (2, operation("b", Running))],
        );
        assert_eq!(
            answered(cache.apply("rg|d", first, None)),
            vec![operation("a", Running), operation("b", Running)]
        );
        assert_eq!(cache.cursor("rg|d").unwrap().sequence, 2);

        let next = delta(
            "r1",
            4,
            vec![(3, operation("a", Succeeded)), (4, operation("c", Running))],
        );
        let expected = vec![
            operation("a", Succeeded),
            operation("b", Running),
            operation("c", Running),
        ];
        assert_eq!(answered(cache.apply("rg|d", next, None)), expected);
        // `$top`: the first operations.
        assert_eq!(
            answered(cache.apply("rg|d", delta("r1", 4, vec![]), Some(1))),
            vec![operation("a", Succeeded)]
        );
    }

    #[test]
    fn an_older_delta_never_takes_the_list_back_and_another_run_replaces_it() {
        let cache = OperationsCache::default();
        cache
            .apply(
                "rg|d",
                whole("r1", 5, vec![(5, operation("a", Succeeded))]),
                None,
            )
            .unwrap();
        // A request that read before the one above applies after it.
        let body = cache.apply(
            "rg|d",
            delta("r1", 3, vec![(3, operation("a", Running))]),
            None,
        );
        assert_eq!(answered(body), vec![operation("a", Succeeded)]);
        assert_eq!(cache.cursor("rg|d").unwrap().sequence, 5);

        // The deployment ran again: its operations are the new run's only.
        let body = cache.apply(
            "rg|d",
            whole("r2", 9, vec![(9, operation("z", Running))]),
            None,
        );
        assert_eq!(answered(body), vec![operation("z", Running)]);
        assert_eq!(
            cache.cursor("rg|d").unwrap().run,
            DeploymentId::from_string("r2")
        );
    }

    #[test]
    fn a_delta_of_a_list_no_longer_kept_is_not_answered_from_what_is_kept() {
        let cache = OperationsCache::default();
        let first = whole(
            "r1",
            2,
            vec![(1, operation("a", Running)), (2, operation("b", Running))],
        );
        cache.apply("rg|d", first, None).unwrap();
        // A request read r1's changes after its cursor while another replaced the list with the new run's: what it
        // read is only part of r1's list, and it must not take the new run's list back.
        cache
            .apply(
                "rg|d",
                whole("r2", 7, vec![(7, operation("z", Running))]),
                None,
            )
            .unwrap();
        let stale = delta("r1", 3, vec![(3, operation("a", Succeeded))]);
        assert!(cache.apply("rg|d", stale, None).unwrap().is_none());
        assert_eq!(
            answered(cache.apply("rg|d", delta("r2", 7, vec![]), None)),
            vec![operation("z", Running)]
        );

        // The list was dropped (evicted, or the deployment's read failed) after a request read its cursor.
        cache.forget("rg|d");
        assert!(cache.cursor("rg|d").is_none());
        let orphan = delta("r2", 8, vec![(8, operation("z", Succeeded))]);
        assert!(cache.apply("rg|d", orphan, None).unwrap().is_none());
        assert!(cache.cursor("rg|d").is_none(), "nothing kept from a part");
    }

    #[test]
    fn the_least_recently_used_lists_go_first() {
        let cache = OperationsCache::default();
        for n in 0..=MAX_LISTS {
            let body = cache.apply(
                &format!("rg|d{n}"),
                whole("r", 1, vec![(1, operation("a", Running))]),
                None,
            );
            assert!(body.is_ok());
        }
        assert!(
            cache.cursor("rg|d0").is_none(),
            "the oldest list was dropped"
        );
        assert!(cache.cursor(&format!("rg|d{MAX_LISTS}")).is_some());
    }
}

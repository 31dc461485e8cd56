//! The latest step of each operation reads the same on both of the SQLite store's read paths: a store on disk reads
//! its journal newest first on a read-only connection of its own, an in-memory one runs the `GROUP BY` query through
//! `sqlx`. Generated journals (operations interleaved, one to four steps each) go into both, and both answers must be
//! what the journal says: each operation's last step, in the order the operations started.

use std::collections::HashMap;

use cairn_store::conformance::{new_deployment, step};
use cairn_store::crypto::MasterKey;
use cairn_store::{DeploymentId, Precondition, Store};
use cairn_store_sqlite::{SqliteOptions, SqliteStore};

const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg";
const STATES: [&str; 4] = ["Accepted", "Running", "Failed", "Succeeded"];

/// A small deterministic generator (xorshift64), so a failing journal is the same on every run.
struct Journal(u64);

impl Journal {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below as u64) as usize
    }

    /// `(operation, state)` steps: `operations` operations, each with one to four steps, interleaved at random.
    fn steps(&mut self, operations: usize) -> Vec<(String, &'static str)> {
        let mut left: Vec<(String, usize)> = (0..operations)
            .map(|i| (format!("op-{i:03}"), 1 + self.next(4)))
            .collect();
        let mut steps = Vec::new();
        while !left.is_empty() {
            // Operations start in order, so the journal's first-step order is not just the name order reversed.
            let window = left.len().min(1 + self.next(5));
            let pick = self.next(window);
            let (operation, remaining) = &mut left[pick];
            steps.push((operation.clone(), STATES[self.next(STATES.len())]));
            *remaining -= 1;
            if *remaining == 0 {
                left.remove(pick);
            }
        }
        steps
    }
}

/// What the journal says: each operation's last state and sequence number, in the order of its first step.
fn expected(steps: &[(String, &'static str)]) -> Vec<(String, String, u64)> {
    let mut latest: Vec<(String, String, u64)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (index, (operation, state)) in steps.iter().enumerate() {
        let sequence = index as u64 + 1;
        match at.get(operation.as_str()) {
            Some(&i) => latest[i] = (operation.clone(), (*state).to_owned(), sequence),
            None => {
                at.insert(operation, latest.len());
                latest.push((operation.clone(), (*state).to_owned(), sequence));
            }
        }
    }
    latest
}

async fn latest_after(
    store: &dyn Store,
    steps: &[(String, &'static str)],
) -> Vec<(String, String, u64)> {
    let run = store
        .put_deployment(new_deployment(SCOPE, "main", None), Precondition::Any)
        .await
        .expect("create");
    // Another run's steps interleave in the table and must not show.
    let other = store
        .put_deployment(new_deployment(SCOPE, "other", None), Precondition::Any)
        .await
        .expect("create");
    for (index, (operation, state)) in steps.iter().enumerate() {
        let millis = index as i64;
        store
            .append_operation(step(&run.id, operation, state, millis), None)
            .await
            .expect("append");
        store
            .append_operation(step(&other.id, operation, "Failed", millis), None)
            .await
            .expect("append to the other run");
    }
    read(store, &run.id).await
}

async fn read(store: &dyn Store, run: &DeploymentId) -> Vec<(String, String, u64)> {
    store
        .latest_operations(run)
        .await
        .expect("latest")
        .into_iter()
        .map(|r| (r.step.operation_id, r.step.provisioning_state, r.sequence))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_read_paths_answer_each_operations_last_step_in_start_order() {
    let key = MasterKey::generate().expect("key");
    for seed in 1..=12u64 {
        let mut journal = Journal(0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let operations = 1 + journal.next(40);
        let steps = journal.steps(operations);
        let want = expected(&steps);

        let dir = tempfile::tempdir().expect("tempdir");
        let on_disk =
            SqliteStore::open_with(dir.path().join("data"), &key, SqliteOptions::default())
                .await
                .expect("open");
        let in_memory = SqliteStore::open_in_memory(&key).await.expect("open");

        assert_eq!(
            latest_after(&on_disk, &steps).await,
            want,
            "on disk (newest first), seed {seed}"
        );
        assert_eq!(
            latest_after(&in_memory, &steps).await,
            want,
            "in memory (GROUP BY), seed {seed}"
        );
        on_disk.close().await.expect("close");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_steps_has_no_operations() {
    let key = MasterKey::generate().expect("key");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open_with(dir.path().join("data"), &key, SqliteOptions::default())
        .await
        .expect("open");
    assert_eq!(latest_after(&store, &[]).await, Vec::new());
    store.close().await.expect("close");
}

//! Group commit for the writes a running deployment makes per resource operation — journal appends, journal steps
//! with their inventory change, inventory upserts: writes that arrive while a commit is under way are committed
//! together in the next transaction, with one WAL sync for all of them instead of one each.
//!
//! Durability and isolation are each write's own, as if it had its own transaction: a caller's future completes
//! only once the transaction holding its write is committed (with `synchronous = FULL`, on disk); a write that is
//! refused (a precondition, a missing deployment, a taken key) is undone alone and reports its own error while the
//! others commit; writes are applied in the order they were submitted. A refused single-statement write needs no
//! savepoint — SQLite undoes a failed statement and keeps the transaction — so only a journal step with its
//! inventory change (two statements) gets one. Any other failure (the database's own: I/O, a full disk, the
//! transaction's begin or commit) fails every write of the group, and none is committed.
//!
//! How a group forms: a write queues itself, then waits for its answer or the leader lock, whichever comes
//! first. Whoever holds the lock commits everything queued, answering each write of the group; a write that gets the
//! lock with its answer still pending commits the queue that formed meanwhile. The commit runs in its own task, so a
//! caller that is dropped mid-commit does not abort the others' writes. The group is taken from the queue only once
//! the commit's thread holds the writer, just before its transaction begins: writes queued during the hop to that
//! thread join it rather than wait for the next commit (fewer, larger commits at no cost in latency).
//!
//! A write its caller does not wait on before going on (a journal step written behind, [`Pace::Ride`]) does not
//! lead a commit at once: it waits up to [`RIDE_WAIT`] for a leader to take it, so it commits together with the
//! next write someone does wait on (the next operation's `Running` step) — one durable commit where there were
//! two, and an operation that follows another waits for one commit, not two. Only when no such write comes does it
//! lead a commit of its own.
//!
//! Where a group runs: in one call on a blocking thread, on the group commit's own connection (`rusqlite`), with
//! its prepared statements cached, while the store's `sqlx` writer connection is held, so no other write of the
//! store interleaves. Through `sqlx`, each statement was a round trip to its connection's thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_store::codec::check_precondition;
use cairn_store::{
    DeploymentId, Entity, InventoryChange, ManagedResource, ManagedResourceRecord, OperationRecord,
    OperationStep, Precondition, StoreError, StoreResult,
};
use rusqlite::{Connection, TransactionBehavior};
use sqlx::SqlitePool;
use tokio::sync::oneshot;

use crate::inventory::{apply_change_directly, resource_version, upsert_resource};
use crate::journal::{check_writer, insert_step, next_sequence};
use crate::rows::{backend, direct_backend};

/// The most writes one transaction commits: a larger queue (many deployments writing at once) is committed in
/// several transactions, one after the other, so no write waits behind an unbounded transaction and no
/// transaction's undo state grows without bound.
pub(crate) const MAX_GROUP_WRITES: usize = 256;

/// How long a write that rides ([`Pace::Ride`]) waits for a leader before it leads a commit itself: about one
/// commit's time on a disk that syncs, so a caller that goes on at once has its next write queued by then.
pub(crate) const RIDE_WAIT: std::time::Duration = std::time::Duration::from_millis(3);

/// When a write's commit should start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Its caller waits for it: commit it now, with whatever else is waiting.
    Lead,
    /// Written behind (its caller went on): commit it with the next write that leads, or after [`RIDE_WAIT`].
    Ride,
}

/// A write that may be committed together with others.
pub(crate) enum GroupedWrite {
    /// `OperationJournal::append_operation`, with its writer.
    AppendStep(OperationStep, Option<String>),
    /// `OperationJournal::record_step`, with its writer.
    RecordStep(OperationStep, InventoryChange, Option<String>),
    /// `InventoryStore::put_managed_resource`.
    PutResource(ManagedResource, Precondition),
}

/// What a grouped write returns.
pub(crate) enum Grouped {
    Step(Box<OperationRecord>),
    Resource(Box<ManagedResourceRecord>),
}

struct Pending {
    write: GroupedWrite,
    reply: oneshot::Sender<StoreResult<Grouped>>,
}

/// The queue of writes waiting for a commit, the lock of the one committing them, and the connection they are
/// committed on.
pub(crate) struct GroupCommit {
    queue: Arc<Mutex<Vec<Pending>>>,
    leader: tokio::sync::Mutex<()>,
    /// The writer's own connection to the database, used on a blocking thread while the store's `sqlx` writer
    /// connection is held (so the two never write at once); `None` once the store is closed.
    connection: Arc<Mutex<Option<Connection>>>,
    /// How long a riding write waits for a leader, in microseconds ([`RIDE_WAIT`]; tests lengthen it).
    ride_wait_micros: std::sync::atomic::AtomicU64,
    /// Transactions committed (or attempted) for grouped writes, for tests.
    #[cfg(test)]
    pub(crate) transactions: std::sync::atomic::AtomicUsize,
    /// A failpoint for tests: the commit succeeds and no write of it is answered, as when the process dies
    /// between a group's commit and its acknowledgements.
    #[cfg(test)]
    pub(crate) die_before_answering: std::sync::atomic::AtomicBool,
}

impl GroupCommit {
    /// Group commit on `connection`, a connection of its own to the store's database.
    pub(crate) fn new(connection: Connection) -> Self {
        GroupCommit {
            queue: Arc::default(),
            leader: tokio::sync::Mutex::default(),
            connection: Arc::new(Mutex::new(Some(connection))),
            ride_wait_micros: (RIDE_WAIT.as_micros() as u64).into(),
            #[cfg(test)]
            transactions: Default::default(),
            #[cfg(test)]
            die_before_answering: Default::default(),
        }
    }

    /// Commits `write` on `writer`, together with whatever else is waiting, and returns its own result.
    pub(crate) async fn write(
        &self,
        writer: &SqlitePool,
        write: GroupedWrite,
        pace: Pace,
    ) -> StoreResult<Grouped> {
        let (reply, mut answer) = oneshot::channel();
        self.queued().push(Pending { write, reply });
        if pace == Pace::Ride {
            // Taken into a leader's group (committed or under way) or not, it goes on as any write after the wait.
            let wait = self
                .ride_wait_micros
                .load(std::sync::atomic::Ordering::Relaxed);
            let wait = std::time::Duration::from_micros(wait);
            if let Ok(result) = tokio::time::timeout(wait, &mut answer).await {
                return result.unwrap_or_else(|_| Err(abandoned()));
            }
        }
        loop {
            // A leader before us may commit ours: then the answer comes without taking the lock (the writes of a
            // group do not hand the lock on to each other just to find their answer).
            let leader = tokio::select! {
                biased;
                result = &mut answer => return result.unwrap_or_else(|_| Err(abandoned())),
                leader = self.leader.lock() => leader,
            };
            match answer.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Closed) => return Err(abandoned()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            if self.queued().is_empty() {
                // Ours is in a group whose leader was dropped while its commit goes on: wait for that commit.
                drop(leader);
                return answer.await.unwrap_or_else(|_| Err(abandoned()));
            }
            #[cfg(test)]
            self.transactions
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            #[cfg(test)]
            let answer_writes = !self
                .die_before_answering
                .load(std::sync::atomic::Ordering::SeqCst);
            #[cfg(not(test))]
            let answer_writes = true;
            // The commit runs on a blocking thread to its end (answers included) even if this caller is dropped
            // meanwhile; a panic in it drops the replies: their callers see `abandoned`.
            let connection = self.connection.clone();
            let queue = self.queue.clone();
            let writer = writer.clone();
            let runtime = tokio::runtime::Handle::current();
            let _ = tokio::task::spawn_blocking(move || {
                commit(&runtime, &writer, &connection, &queue, answer_writes);
            })
            .await;
            drop(leader);
        }
    }

    /// Runs `write` in one transaction of its own on the group commit's connection, between groups: a write of
    /// many statements (a stack's save with its inventory changes) in one call instead of a round trip to `sqlx`'s
    /// thread per statement. An error rolls the whole transaction back. Like a group, it runs to its end even if the
    /// caller is dropped meanwhile.
    pub(crate) async fn exclusive<T: Send + 'static>(
        &self,
        writer: &SqlitePool,
        write: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let connection = self.connection.clone();
        let writer = writer.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            with_writer(&runtime, &writer, &connection, |conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(direct_backend)?;
                let written = write(&tx)?;
                tx.commit().map_err(direct_backend)?;
                Ok(written)
            })
        })
        .await
        .unwrap_or_else(|_| Err(abandoned()))
    }

    /// Closes the connection (the store is closing): later writes fail with `Backend`, as the `sqlx` pools' do.
    pub(crate) async fn close(&self) -> StoreResult<()> {
        let connection = self.connection.clone();
        let closing = tokio::task::spawn_blocking(move || {
            let taken = connection
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            match taken {
                Some(connection) => connection.close().map_err(|(_, e)| direct_backend(e)),
                None => Ok(()),
            }
        });
        closing.await.unwrap_or_else(|_| Err(abandoned()))
    }

    fn queued(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        // The queue is only pushed to and taken whole: a panic elsewhere cannot leave it half-changed.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes waiting for a commit (for tests that build a group on purpose).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.queued().len()
    }

    /// Sets how long a riding write waits for a leader (for tests that need it not to lead on its own).
    #[cfg(test)]
    pub(crate) fn set_ride_wait(&self, wait: std::time::Duration) {
        self.ride_wait_micros.store(
            wait.as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Holds the leader lock: writes queue up until the guard drops (for tests that build a group on purpose).
    #[cfg(test)]
    pub(crate) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.leader.lock().await
    }
}

fn abandoned() -> StoreError {
    StoreError::Backend("the commit of this write was abandoned".into())
}

/// Commits the queue's next group in one transaction, then (unless a test's failpoint says not to) answers each
/// write: a write is acknowledged only once the transaction holding it is committed.
///
/// Runs on a blocking thread: the whole group in one call on the writer's own connection with its prepared
/// statements cached, while the `sqlx` writer connection is held. No write of the group waits for a round trip to
/// `sqlx`'s connection thread, no task is spawned per group, and no other write of this store runs meanwhile.
fn commit(
    runtime: &tokio::runtime::Handle,
    writer: &SqlitePool,
    connection: &Mutex<Option<Connection>>,
    queue: &Mutex<Vec<Pending>>,
    answer_writes: bool,
) {
    let mut replies = Vec::new();
    let committed = with_writer(runtime, writer, connection, |conn| {
        apply_all(conn, take_group(queue, &mut replies))
    });
    if replies.is_empty() {
        // The writer could not be had (the store is closing): the group is taken all the same, to fail it.
        drop(take_group(queue, &mut replies));
    }
    match committed {
        // The replies drop unanswered: their callers see `abandoned`.
        Ok(_) if !answer_writes => {}
        Ok(results) => {
            for (reply, result) in replies.into_iter().zip(results) {
                // The caller may be gone; its write stands.
                let _ = reply.send(result);
            }
        }
        Err(error) => {
            let message = error.to_string();
            for reply in replies {
                let _ = reply.send(Err(StoreError::Backend(message.clone())));
            }
        }
    }
}

/// Takes the next group from the queue: its writes, in submission order, with their replies put in `replies`.
fn take_group(
    queue: &Mutex<Vec<Pending>>,
    replies: &mut Vec<oneshot::Sender<StoreResult<Grouped>>>,
) -> Vec<GroupedWrite> {
    let mut queue = queue
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let size = queue.len().min(MAX_GROUP_WRITES);
    queue
        .drain(..size)
        .map(|pending| {
            replies.push(pending.reply);
            pending.write
        })
        .collect()
}

/// Runs `work` on the group commit's connection while holding the `sqlx` writer connection (so no other write of
/// the store runs meanwhile). On a blocking thread.
fn with_writer<T>(
    runtime: &tokio::runtime::Handle,
    writer: &SqlitePool,
    connection: &Mutex<Option<Connection>>,
    work: impl FnOnce(&mut Connection) -> StoreResult<T>,
) -> StoreResult<T> {
    let exclusive = runtime.block_on(writer.acquire()).map_err(backend)?;
    let mut connection = connection
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let done = match connection.as_mut() {
        Some(connection) => work(connection),
        None => Err(StoreError::Backend("the store is closed".into())),
    };
    drop(connection);
    // Back to the pool from within the runtime (`sqlx` returns a connection with a task).
    runtime.block_on(async move { drop(exclusive) });
    done
}

/// Applies every write in one transaction, each in a savepoint of its own: the per-write results, or the error
/// that failed the whole transaction (then nothing of it is committed: the transaction rolls back when dropped).
fn apply_all(
    conn: &mut Connection,
    writes: Vec<GroupedWrite>,
) -> StoreResult<Vec<StoreResult<Grouped>>> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(direct_backend)?;
    let mut results = Vec::with_capacity(writes.len());
    let mut memo = GroupMemo::default();
    for write in writes {
        let statements = match write {
            GroupedWrite::RecordStep(..) => Statements::Several,
            GroupedWrite::AppendStep(..) | GroupedWrite::PutResource(..) => Statements::One,
        };
        if statements == Statements::Several {
            statement(&tx, "SAVEPOINT grouped_write")?;
        }
        let result = apply(&tx, &mut memo, write);
        match (&result, statements) {
            (Ok(_), _) => {}
            (Err(error), Statements::One) if refused(error) => {}
            (Err(_), Statements::Several) => {
                statement(&tx, "ROLLBACK TO SAVEPOINT grouped_write")?;
            }
            // The database failed mid-transaction: nothing of the group is trusted to commit.
            (Err(error), Statements::One) => return Err(StoreError::Backend(error.to_string())),
        }
        if statements == Statements::Several {
            statement(&tx, "RELEASE SAVEPOINT grouped_write")?;
        }
        results.push(result);
    }
    tx.commit().map_err(direct_backend)?;
    Ok(results)
}

/// How many statements a write takes: a refused single statement is undone by SQLite itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Statements {
    One,
    Several,
}

/// A write refused before it changed anything, or by a constraint (whose statement SQLite undid): the transaction
/// goes on.
fn refused(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::NotFound { .. } | StoreError::Conflict { .. }
    )
}

fn statement(conn: &Connection, sql: &'static str) -> StoreResult<()> {
    conn.prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
        .map(drop)
        .map_err(direct_backend)
}

/// What a group's transaction has learnt of the runs it writes to. No other write runs inside it (and no grouped
/// write changes a run's claim), so a claim checked once holds for the rest of the group, and a run's next journal
/// row is the one after the last the group wrote: one query each per run and group instead of one per step.
#[derive(Default)]
struct GroupMemo {
    /// Runs whose claim was checked, with the writer it was checked for.
    claimed: HashMap<DeploymentId, String>,
    /// The sequence number each run's next journal row takes, for runs this group wrote a row of.
    next_sequence: HashMap<DeploymentId, i64>,
}

impl GroupMemo {
    fn check_writer(
        &mut self,
        conn: &Connection,
        deployment: &DeploymentId,
        writer: Option<&str>,
    ) -> StoreResult<()> {
        if let Some(writer) = writer
            && self.claimed.get(deployment).map(String::as_str) != Some(writer)
        {
            check_writer(conn, deployment, Some(writer))?;
            self.claimed.insert(deployment.clone(), writer.to_owned());
        }
        Ok(())
    }

    fn insert_step(&mut self, conn: &Connection, step: &OperationStep) -> StoreResult<u64> {
        let run = &step.deployment_id;
        let sequence = match self.next_sequence.get(run) {
            Some(next) => *next,
            None => next_sequence(conn, run)?,
        };
        let written = insert_step(conn, step, sequence)?;
        self.next_sequence.insert(run.clone(), sequence + 1);
        Ok(written)
    }
}

fn apply(conn: &Connection, memo: &mut GroupMemo, write: GroupedWrite) -> StoreResult<Grouped> {
    match write {
        GroupedWrite::AppendStep(step, writer) => {
            memo.check_writer(conn, &step.deployment_id, writer.as_deref())?;
            let sequence = memo.insert_step(conn, &step)?;
            Ok(Grouped::Step(Box::new(OperationRecord { sequence, step })))
        }
        GroupedWrite::RecordStep(step, change, writer) => {
            memo.check_writer(conn, &step.deployment_id, writer.as_deref())?;
            let sequence = memo.insert_step(conn, &step)?;
            if let Err(error) = apply_change_directly(conn, &change) {
                // The savepoint's rollback takes the step back: the run's next row is read again.
                memo.next_sequence.remove(&step.deployment_id);
                return Err(error);
            }
            Ok(Grouped::Step(Box::new(OperationRecord { sequence, step })))
        }
        GroupedWrite::PutResource(resource, precondition) => {
            let found = resource_version(conn, &resource.key)?;
            check_precondition(
                Entity::ManagedResource,
                resource.key.as_str(),
                precondition,
                found,
            )?;
            let (version, created_at) = upsert_resource(conn, &resource)?;
            Ok(Grouped::Resource(Box::new(ManagedResourceRecord {
                resource,
                created_at,
                version,
                detached: false,
            })))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use cairn_store::conformance::{new_deployment, step};
    use cairn_store::crypto::MasterKey;
    use cairn_store::{
        DeploymentId, DeploymentStore, InventoryStore, OperationJournal, Precondition, ResourceKey,
        Timestamp,
    };
    use serde_json::json;

    use super::*;
    use crate::{SqliteOptions, SqliteStore};

    const SCOPE: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";

    async fn store(dir: &std::path::Path) -> Arc<SqliteStore> {
        let key = MasterKey::generate().expect("a key");
        Arc::new(
            SqliteStore::open_with(dir, &key, SqliteOptions::default())
                .await
                .expect("store"),
        )
    }

    async fn deployment(store: &SqliteStore, name: &str) -> DeploymentId {
        store
            .put_deployment(
                new_deployment(SCOPE, name, None),
                Precondition::MustNotExist,
            )
            .await
            .expect("a deployment")
            .id
    }

    fn resource(name: &str) -> ManagedResource {
        let id = format!("{SCOPE}/providers/Microsoft.Storage/storageAccounts/{name}");
        ManagedResource {
            key: ResourceKey::arm(&id),
            resource_id: Some(id),
            resource_type: "Microsoft.Storage/storageAccounts".into(),
            api_version: Some("2023-01-01".into()),
            properties: json!({ "name": name }),
            applied: None,
            deployment: None,
            extension: None,
            updated_at: Timestamp::now(),
        }
    }

    /// Waits until `count` writes are queued behind the held leader lock.
    async fn queued(store: &SqliteStore, count: usize) {
        while store.group.waiting() < count {
            tokio::task::yield_now().await;
        }
    }

    /// Writes that queue while a commit is under way are committed together, and every one lands with the
    /// result it would have had alone: journal sequences per run in submission order, inventory versions.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_queued_during_a_commit_are_committed_in_one_transaction() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let runs = [deployment(&store, "a").await, deployment(&store, "b").await];
        let held = store.group.hold().await;
        let mut steps = tokio::task::JoinSet::new();
        for i in 0..20 {
            let writer = store.clone();
            let run = runs[i % 2].clone();
            steps.spawn(async move {
                let appended = writer
                    .append_operation(step(&run, &format!("op{i}"), "Running", 1), None)
                    .await;
                appended.map(|r| (run, r.sequence))
            });
            queued(&store, i + 1).await;
        }
        let mut resources = tokio::task::JoinSet::new();
        for i in 0..5 {
            let writer = store.clone();
            resources.spawn(async move {
                writer
                    .put_managed_resource(resource(&format!("r{i}")), Precondition::MustNotExist)
                    .await
            });
            queued(&store, 21 + i).await;
        }
        let before = store.group.transactions.load(Ordering::SeqCst);
        drop(held);
        let mut sequences: Vec<(DeploymentId, u64)> = Vec::new();
        while let Some(done) = steps.join_next().await {
            sequences.push(done.expect("a write task").expect("the write"));
        }
        while let Some(done) = resources.join_next().await {
            assert_eq!(done.expect("a write task").expect("the write").version, 1);
        }
        assert_eq!(
            store.group.transactions.load(Ordering::SeqCst) - before,
            1,
            "25 writes queued behind one lock form one group"
        );
        for run in &runs {
            let mut numbers: Vec<u64> = sequences
                .iter()
                .filter(|(r, _)| r == run)
                .map(|(_, n)| *n)
                .collect();
            numbers.sort_unstable();
            assert_eq!(numbers, (1..=10).collect::<Vec<u64>>());
            let journal = store.operation_journal(run, 0, 100).await.expect("journal");
            let first = if run == &runs[0] { 0 } else { 1 };
            let expected: Vec<String> = (first..20).step_by(2).map(|i| format!("op{i}")).collect();
            let written: Vec<String> = journal.into_iter().map(|r| r.step.operation_id).collect();
            assert_eq!(written, expected, "in submission order");
        }
        for i in 0..5 {
            let key = resource(&format!("r{i}")).key;
            let found = store.get_managed_resource(&key).await.expect("read");
            assert_eq!(found.map(|r| r.version), Some(1));
        }
    }

    /// The group is taken from the queue once the commit's thread holds the writer: writes queued while it waits for
    /// the writer (here, held by the test, as by any other write of the store) join the leader's transaction rather
    /// than waiting for the next one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_queued_while_a_commit_waits_for_the_writer_join_its_group() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "a").await;
        let writer = store.writer.acquire().await.expect("the writer");
        let before = store.group.transactions.load(Ordering::SeqCst);
        let mut steps = tokio::task::JoinSet::new();
        let mut waiting_before = 0;
        for i in 0..6 {
            let writing = store.clone();
            let run = run.clone();
            steps.spawn(async move {
                writing
                    .append_operation(step(&run, &format!("op{i}"), "Running", 1), None)
                    .await
            });
            if i == 0 {
                // The first write leads: its commit is under way, waiting for the writer.
                while store.group.transactions.load(Ordering::SeqCst) == before {
                    tokio::task::yield_now().await;
                }
                waiting_before = store.group.waiting();
            } else {
                // One at a time, so the queue holds them in this order.
                queued(&store, waiting_before + i).await;
            }
        }
        drop(writer);
        while let Some(done) = steps.join_next().await {
            done.expect("a write task").expect("the write");
        }
        assert_eq!(
            store.group.transactions.load(Ordering::SeqCst) - before,
            1,
            "the five writes queued while the leader waited for the writer commit with it"
        );
        let journal = store
            .operation_journal(&run, 0, 100)
            .await
            .expect("journal");
        let written: Vec<String> = journal.into_iter().map(|r| r.step.operation_id).collect();
        let expected: Vec<String> = (0..6).map(|i| format!("op{i}")).collect();
        assert_eq!(written, expected, "in submission order");
    }

    /// A step written behind waits for the next write that leads and is committed in its transaction: one commit
    /// for the two, the step that rode first in the journal.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_written_behind_rides_in_the_next_leading_write() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "a").await;
        // Long enough that it cannot lead on its own, however slow the machine.
        store
            .group
            .set_ride_wait(std::time::Duration::from_secs(600));
        let before = store.group.transactions.load(Ordering::SeqCst);
        let rider = {
            let writer = store.clone();
            let run = run.clone();
            tokio::spawn(async move {
                writer
                    .append_operation_behind(step(&run, "op0", "Succeeded", 1), None)
                    .await
            })
        };
        // (Were it to lead at once, it would be committed and gone from the queue.)
        while store.group.waiting() < 1 && !rider.is_finished() {
            tokio::task::yield_now().await;
        }
        let leader = store
            .append_operation(step(&run, "op1", "Running", 1), None)
            .await
            .expect("the leading write");
        let rode = rider.await.expect("the rider's task").expect("the rider");
        assert_eq!(
            store.group.transactions.load(Ordering::SeqCst) - before,
            1,
            "one commit for both"
        );
        assert_eq!((rode.sequence, leader.sequence), (1, 2));
    }

    /// A step written behind that no leading write comes for commits on its own after `RIDE_WAIT`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_written_behind_alone_commits_after_its_wait() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "a").await;
        let before = store.group.transactions.load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        let written = store
            .record_step_behind(
                step(&run, "op0", "Succeeded", 1),
                InventoryChange::Put(Box::new(resource("r0"))),
                None,
            )
            .await
            .expect("the step");
        assert!(
            started.elapsed() >= RIDE_WAIT,
            "it waited for a leader first"
        );
        assert_eq!(written.sequence, 1);
        assert_eq!(store.group.transactions.load(Ordering::SeqCst) - before, 1);
        let key = resource("r0").key;
        let found = store.get_managed_resource(&key).await.expect("read");
        assert_eq!(
            found.map(|r| r.version),
            Some(1),
            "with its inventory change"
        );
    }

    /// The process dying between a group's commit and its acknowledgements: no caller is told its write succeeded,
    /// yet every write of the group is on disk (a fresh store on the same directory reads them), so what the engine
    /// recovers from the journal is never less than what it was told.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_committed_but_never_acknowledged_is_durable_and_reports_no_success() {
        let dir = tempfile::tempdir().expect("temp dir");
        let key = MasterKey::generate().expect("a key");
        let store = Arc::new(
            SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
                .await
                .expect("store"),
        );
        let run = deployment(&store, "dies").await;
        let held = store.group.hold().await;
        let mut steps = tokio::task::JoinSet::new();
        for i in 0..3 {
            let writer = store.clone();
            let run = run.clone();
            steps.spawn(async move {
                writer
                    .append_operation(step(&run, &format!("op{i}"), "Running", 1), None)
                    .await
            });
            queued(&store, i + 1).await;
        }
        store
            .group
            .die_before_answering
            .store(true, Ordering::SeqCst);
        drop(held);
        while let Some(done) = steps.join_next().await {
            let answer = done.expect("a write task");
            assert!(answer.is_err(), "no acknowledgement: {answer:?}");
        }
        let reopened = SqliteStore::open_with(dir.path(), &key, SqliteOptions::default())
            .await
            .expect("the store again");
        let journal = reopened
            .operation_journal(&run, 0, 10)
            .await
            .expect("journal");
        let written: Vec<String> = journal.into_iter().map(|r| r.step.operation_id).collect();
        assert_eq!(written, ["op0", "op1", "op2"]);
    }

    /// A queue longer than a group's bound is committed in several transactions, in submission order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_queue_is_committed_in_bounded_groups() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "long").await;
        let held = store.group.hold().await;
        let count = MAX_GROUP_WRITES + 10;
        let mut steps = tokio::task::JoinSet::new();
        for i in 0..count {
            let writer = store.clone();
            let run = run.clone();
            steps.spawn(async move {
                writer
                    .append_operation(step(&run, &format!("op{i:04}"), "Running", 1), None)
                    .await
            });
            queued(&store, i + 1).await;
        }
        let before = store.group.transactions.load(Ordering::SeqCst);
        drop(held);
        while let Some(done) = steps.join_next().await {
            done.expect("a write task").expect("the write");
        }
        assert_eq!(
            store.group.transactions.load(Ordering::SeqCst) - before,
            2,
            "{count} writes queued behind one lock: a full group, then the rest"
        );
        let journal = store
            .operation_journal(&run, 0, u32::try_from(count + 1).expect("a small count"))
            .await
            .expect("journal");
        let written: Vec<String> = journal.into_iter().map(|r| r.step.operation_id).collect();
        let expected: Vec<String> = (0..count).map(|i| format!("op{i:04}")).collect();
        assert_eq!(written, expected, "in submission order");
    }

    /// A write of the group that fails is rolled back alone, with its own error; the others commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_write_in_a_group_fails_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "a").await;
        store
            .put_managed_resource(resource("taken"), Precondition::MustNotExist)
            .await
            .expect("the first write");
        let held = store.group.hold().await;
        let first = {
            let (store, run) = (store.clone(), run.clone());
            tokio::spawn(async move {
                store
                    .append_operation(step(&run, "op1", "Running", 1), None)
                    .await
            })
        };
        queued(&store, 1).await;
        let taken = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .put_managed_resource(resource("taken"), Precondition::MustNotExist)
                    .await
            })
        };
        queued(&store, 2).await;
        let unknown_run = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .append_operation(step(&DeploymentId::generate(), "op1", "Running", 1), None)
                    .await
            })
        };
        queued(&store, 3).await;
        let last = {
            let (store, run) = (store.clone(), run.clone());
            tokio::spawn(async move {
                store
                    .record_step(
                        step(&run, "op2", "Succeeded", 2),
                        InventoryChange::Put(Box::new(resource("fresh"))),
                        None,
                    )
                    .await
            })
        };
        queued(&store, 4).await;
        drop(held);
        assert_eq!(first.await.unwrap().expect("committed").sequence, 1);
        let conflict = taken.await.unwrap().expect_err("the key exists");
        assert!(conflict.is_conflict(), "{conflict}");
        let missing = unknown_run.await.unwrap().expect_err("no such run");
        assert!(missing.is_not_found(), "{missing}");
        assert_eq!(last.await.unwrap().expect("committed").sequence, 2);
        assert_eq!(store.operation_journal(&run, 0, 10).await.unwrap().len(), 2);
        let fresh = store
            .get_managed_resource(&resource("fresh").key)
            .await
            .unwrap();
        assert!(
            fresh.is_some(),
            "the journal step's inventory change committed with it"
        );
        let taken = store
            .get_managed_resource(&resource("taken").key)
            .await
            .unwrap();
        assert_eq!(
            taken.map(|r| r.version),
            Some(1),
            "the refused write changed nothing"
        );
    }

    /// A run's claim checked once in a group holds for the group's other steps of that writer, not for another
    /// writer's, nor for the next group: a claim taken over between two groups refuses the old writer's next step.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_checked_in_a_group_holds_for_that_group_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "a").await;
        let at = Timestamp::from_unix_millis;
        store
            .claim_deployment(&run, "replica-a", at(1_000), at(0))
            .await
            .expect("claimed");
        let held = store.group.hold().await;
        let mut writes = Vec::new();
        for (i, writer) in ["replica-a", "replica-b", "replica-a"]
            .into_iter()
            .enumerate()
        {
            let (writing, run) = (store.clone(), run.clone());
            writes.push(tokio::spawn(async move {
                writing
                    .append_operation(step(&run, &format!("op{i}"), "Running", 1), Some(writer))
                    .await
            }));
            queued(&store, i + 1).await;
        }
        drop(held);
        let mut results = Vec::new();
        for write in writes {
            results.push(write.await.unwrap());
        }
        assert_eq!(results[0].as_ref().expect("claimed by a").sequence, 1);
        let refused = results[1].as_ref().expect_err("not claimed by b");
        assert!(refused.is_conflict(), "{refused}");
        assert_eq!(results[2].as_ref().expect("claimed by a").sequence, 2);

        store
            .claim_deployment(&run, "replica-b", at(3_000), at(2_000))
            .await
            .expect("taken over once a's claim expired");
        let stale = store
            .append_operation(step(&run, "op3", "Running", 1), Some("replica-a"))
            .await
            .expect_err("a's claim was taken over");
        assert!(stale.is_conflict(), "{stale}");
        let taken_over = store
            .append_operation(step(&run, "op3", "Running", 1), Some("replica-b"))
            .await
            .expect("claimed by b");
        assert_eq!(taken_over.sequence, 3);
    }

    /// A group is committed on the writer's own connection only while no other write of the store is under way: a
    /// write transaction held on the `sqlx` writer for longer than the busy timeout delays the group instead of
    /// failing it with "database is locked".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_waits_for_the_stores_other_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let key = MasterKey::generate().expect("a key");
        let options = SqliteOptions {
            busy_timeout: std::time::Duration::from_millis(50),
            ..SqliteOptions::default()
        };
        let store = Arc::new(
            SqliteStore::open_with(dir.path(), &key, options)
                .await
                .expect("store"),
        );
        let run = deployment(&store, "waits").await;
        let other = store.begin_write().await.expect("another write");
        let grouped = {
            let (store, run) = (store.clone(), run.clone());
            tokio::spawn(async move {
                store
                    .append_operation(step(&run, "op1", "Running", 1), None)
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(
            !grouped.is_finished(),
            "the group waits for the other write"
        );
        other.commit().await.expect("the other write commits");
        let appended = grouped.await.expect("a write task").expect("committed");
        assert_eq!(appended.sequence, 1);
    }

    /// Closing the store closes the group commit's connection too: a later grouped write fails with `Backend`
    /// (as the `sqlx` pools' writes do), and nothing keeps the database open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_store_refuses_grouped_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "closed").await;
        store.close_impl().await.expect("close");
        assert!(store.group.connection.lock().unwrap().is_none());
        let refused = store
            .append_operation(step(&run, "op1", "Running", 1), None)
            .await
            .expect_err("a closed store");
        assert!(matches!(refused, StoreError::Backend(_)), "{refused:?}");
    }

    /// A caller dropped while its write waits for a commit leaves the group intact: the write is committed in
    /// its place and the other writes get their answers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_dropped_while_queued_leaves_its_group_intact() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = store(dir.path()).await;
        let run = deployment(&store, "a").await;
        let held = store.group.hold().await;
        let dropped = {
            let (store, run) = (store.clone(), run.clone());
            tokio::spawn(async move {
                store
                    .append_operation(step(&run, "op1", "Running", 1), None)
                    .await
            })
        };
        queued(&store, 1).await;
        let kept = {
            let (store, run) = (store.clone(), run.clone());
            tokio::spawn(async move {
                store
                    .append_operation(step(&run, "op2", "Running", 2), None)
                    .await
            })
        };
        queued(&store, 2).await;
        dropped.abort();
        drop(held);
        assert_eq!(kept.await.unwrap().expect("committed").sequence, 2);
        let journal = store.operation_journal(&run, 0, 10).await.unwrap();
        let operations: Vec<&str> = journal
            .iter()
            .map(|r| r.step.operation_id.as_str())
            .collect();
        assert_eq!(operations, ["op1", "op2"]);
    }
}

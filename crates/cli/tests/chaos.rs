//! The chaos suite: three `cairn serve` replicas (the built binary) on one throwaway PostgreSQL database, in front of
//! a fault-injecting extension (`fault`: latency, 503, 429 + `Retry-After`, hangs past the host's timeout). Fifty
//! deployment workers (three resources each time, chained by `dependsOn` for half of them) and twenty stack workers
//! (each stack created, updated, deleted, again and again) send their requests through random replicas, follow
//! `Azure-AsyncOperation`/`Location` through random replicas, and retry another replica when one refuses the
//! connection; meanwhile a random replica is killed with SIGKILL and started again on the same port every few seconds.
//!
//! When the chaos ends (faults off, every replica up), every operation must reach a terminal state within a bound,
//! and the test reports and asserts: **0** operations stuck non-terminal (the workers' own, every deployment and
//! stack the API lists, every deployment operation), **0** resources the extension holds that no deployment, stack or
//! inventory row records, **0** duplicate creates, **0** deletes lost (a resource a finished stack update or delete
//! said it deleted that the extension still holds).
//!
//! Short form (about 30 s of chaos) under `cargo test`; the long form (`docs/operations.md`):
//! `CAIRN_CHAOS_SECS=120 cargo test -p cairn --test chaos -- --nocapture`.

mod common;
mod fault;
mod matrix;
mod pgshared;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, serve_with};
use fault::{FaultRates, FaultyExtension};
use matrix::{inventory_at, template};
use pgshared::SharedStore;
use rand::Rng;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const GROUP: &str = "chaos";
const STACKS: &str = "api-version=2024-03-01";
const DEPLOYMENTS: &str = "api-version=2025-04-01";
const REPLICAS: usize = 3;
const DEPLOYMENT_WORKERS: usize = 50;
const STACK_WORKERS: usize = 20;
/// Seconds of chaos without `CAIRN_CHAOS_SECS`.
const SHORT_FORM_SECS: u64 = 30;
/// How long, after the chaos, every operation has to reach a terminal state.
const SETTLE: Duration = Duration::from_secs(45);
/// The claim TTL of every replica (seconds): a killed replica's work is taken over this long after its death.
const CLAIM_TTL: &str = "3";
/// The host's per-request timeout for the extension (registry `timeoutSeconds`); hangs last longer.
const EXTENSION_TIMEOUT_SECS: u64 = 2;

fn faults() -> FaultRates {
    FaultRates {
        max_latency: Duration::from_millis(150),
        unavailable: 0.04,
        throttled: 0.04,
        hang: 0.02,
        hang_for: Duration::from_secs(EXTENSION_TIMEOUT_SECS + 1),
    }
}

fn random_below(n: usize) -> usize {
    rand::rng().random_range(0..n)
}

fn random_millis(from: u64, to: u64) -> Duration {
    Duration::from_millis(rand::rng().random_range(from..=to))
}

/// The replicas: fixed ports, each slot a running server or empty while it is down.
struct Replicas {
    ports: Vec<u16>,
    servers: Vec<Mutex<Option<Server>>>,
    args: Vec<OsString>,
}

impl Replicas {
    fn start(args: Vec<OsString>) -> Replicas {
        let mut ports = Vec::new();
        let mut servers = Vec::new();
        for _ in 0..REPLICAS {
            let port = listening_port();
            let server = launch(&args, &format!("127.0.0.1:{port}"));
            assert_eq!(port_of(&server.url), port);
            ports.push(port);
            servers.push(Mutex::new(Some(server)));
        }
        Replicas {
            ports,
            servers,
            args,
        }
    }

    fn kill(&self, index: usize) -> bool {
        let Some(mut server) = self.servers[index].lock().unwrap().take() else {
            return false;
        };
        server.child.kill().expect("SIGKILL");
        server.child.wait().expect("reaped");
        true
    }

    /// Starts replica `index` again on its port, unless it runs.
    fn restart(&self, index: usize) {
        let mut slot = self.servers[index].lock().unwrap();
        if slot.is_none() {
            *slot = Some(launch(
                &self.args,
                &format!("127.0.0.1:{}", self.ports[index]),
            ));
        }
    }
}

/// A replica listening on `listen`.
fn launch(args: &[OsString], listen: &str) -> Server {
    serve_with(|command| {
        command
            .args(["--listen", listen, "--claim-ttl", CLAIM_TTL])
            .args(args);
    })
}

/// A free loopback port below the kernel's ephemeral range: a replica restarted on it never finds it taken by an
/// outgoing connection (which take ephemeral ports), as it could with a port the kernel handed out.
fn listening_port() -> u16 {
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    for _ in 0..1000 {
        let port = rand::rng().random_range(10_000..ephemeral_from.max(10_001));
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below {ephemeral_from}");
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|port| port.trim_end_matches('/').parse().ok())
        .expect("a URL with a port")
}

/// What the workers saw, for the report and the checks.
#[derive(Default)]
struct Tally {
    /// (operation kind, how it ended) → count.
    outcomes: BTreeMap<(&'static str, String), usize>,
    /// Operations that did not reach a terminal state in time.
    stuck: Vec<String>,
    /// Answers a correct server never gives (a 5xx from cairn, a 404 for a stack being updated, ...).
    unexpected: Vec<String>,
    /// Resources a finished stack update or delete said it deleted.
    said_deleted: BTreeSet<String>,
}

/// An HTTP client spreading requests over the replicas.
struct Client {
    http: reqwest::Client,
    ports: Vec<u16>,
    tally: Arc<Mutex<Tally>>,
    /// Requests sent again because a replica refused or dropped the connection.
    retries: AtomicUsize,
    /// Requests sent again because the operation was not accepted (a 409 from a lease a killed replica held).
    not_accepted: AtomicUsize,
    /// The end of the settling period: no operation waits past it.
    deadline: Mutex<Instant>,
}

struct Reply {
    status: u16,
    async_url: Option<String>,
    body: Value,
}

impl Client {
    fn base(&self) -> String {
        format!(
            "http://127.0.0.1:{}",
            self.ports[random_below(self.ports.len())]
        )
    }

    fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap()
    }

    /// Sends the request to a random replica, again to another while replicas refuse or drop the connection (a
    /// dropped PUT may or may not have been accepted: the callers treat a 409 after it as their own). `None` when
    /// the deadline passed first.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        correlation: Option<&str>,
    ) -> Option<Reply> {
        loop {
            let mut request = self
                .http
                .request(method.clone(), format!("{}{path}", self.base()))
                .timeout(Duration::from_secs(20));
            if let Some(body) = body {
                request = request.json(body);
            }
            if let Some(correlation) = correlation {
                request = request.header("x-ms-correlation-request-id", correlation);
            }
            match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let async_url = ["azure-asyncoperation", "location"]
                        .iter()
                        .find_map(|name| response.headers().get(*name))
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_owned);
                    match response.bytes().await {
                        Ok(bytes) => {
                            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            if status >= 500 {
                                self.unexpected(format!("{method} {path}: {status} {body}"));
                            } else {
                                return Some(Reply {
                                    status,
                                    async_url,
                                    body,
                                });
                            }
                        }
                        Err(_) => {
                            self.retries.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Err(_) => {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                }
            }
            if Instant::now() > self.deadline() {
                return None;
            }
            tokio::time::sleep(random_millis(50, 250)).await;
        }
    }

    async fn get(&self, path: &str) -> Option<Reply> {
        self.send(reqwest::Method::GET, path, None, None).await
    }

    fn unexpected(&self, what: String) {
        self.tally.lock().unwrap().unexpected.push(what);
    }

    fn outcome(&self, kind: &'static str, how: impl Into<String>) {
        *self
            .tally
            .lock()
            .unwrap()
            .outcomes
            .entry((kind, how.into()))
            .or_default() += 1;
    }

    fn stuck(&self, what: String) {
        self.tally.lock().unwrap().stuck.push(what);
    }

    /// Follows an `Azure-AsyncOperation` or `Location` URL (through random replicas) until it says the operation
    /// ended. False when the deadline passed first.
    async fn follow(&self, url: &str) -> bool {
        let path = url
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|slash| &rest[slash..]))
            .unwrap_or(url);
        loop {
            tokio::time::sleep(random_millis(300, 700)).await;
            let Some(reply) = self.get(path).await else {
                return false;
            };
            let running = reply.status == 202
                || (reply.status == 200
                    && !matches!(
                        reply.body["status"].as_str(),
                        Some("Succeeded" | "Failed" | "Canceled") | None
                    ));
            if !running {
                return true;
            }
            if Instant::now() > self.deadline() {
                return false;
            }
        }
    }

    /// Polls a deployment or stack until its `provisioningState` is terminal: the record, or `None` once it is
    /// gone (404). `Err` with the last state when the deadline passed first.
    async fn settled(&self, path: &str) -> Result<Option<Value>, String> {
        loop {
            let Some(reply) = self.get(path).await else {
                return Err("unreachable".to_owned());
            };
            if reply.status == 404 {
                return Ok(None);
            }
            let state = reply.body["properties"]["provisioningState"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if reply.status == 200 && matches!(state.as_str(), "succeeded" | "failed" | "canceled")
            {
                return Ok(Some(reply.body));
            }
            if Instant::now() > self.deadline() {
                return Err(format!("{} {state}", reply.status));
            }
            tokio::time::sleep(random_millis(300, 700)).await;
        }
    }

    /// PUTs (or DELETEs) `path` and waits for the operation to end: the final record (`None` once gone). Every
    /// attempt carries the operation's own correlation id, which the record of an accepted operation names: a 409
    /// after a dropped connection is this operation's earlier attempt if the record names it, else the lease of an
    /// attempt a killed replica took but never recorded (held until it expires), and the request is sent again.
    async fn operate(
        &self,
        kind: &'static str,
        method: reqwest::Method,
        path: &str,
        query: &str,
        body: Option<&Value>,
    ) -> Option<Option<Value>> {
        let record_path = format!("{path}?{}", query.split('&').next().unwrap_or(query));
        let correlation = format!("chaos-{:032x}", rand::random::<u128>());
        loop {
            let Some(reply) = self
                .send(
                    method.clone(),
                    &format!("{path}?{query}"),
                    body,
                    Some(&correlation),
                )
                .await
            else {
                self.stuck(format!("{kind} {path}: never accepted"));
                return None;
            };
            let answered = reply.status;
            match answered {
                200..=202 => {
                    if let Some(url) = reply.async_url
                        && !self.follow(&url).await
                    {
                        self.stuck(format!("{kind} {path}: its status never ended"));
                        return None;
                    }
                }
                204 | 409 => {}
                status => {
                    self.unexpected(format!("{kind} {path}: {status} {}", reply.body));
                    self.outcome(kind, format!("refused {status}"));
                    return None;
                }
            }
            let record = match self.settled(&record_path).await {
                Ok(record) => record,
                Err(state) => {
                    self.stuck(format!("{kind} {path}: still {state}"));
                    return None;
                }
            };
            let ours = record
                .as_ref()
                .map_or(method == reqwest::Method::DELETE, |record| {
                    record["properties"]["correlationId"] == correlation.as_str()
                });
            if !ours {
                if Instant::now() > self.deadline() {
                    self.stuck(format!(
                        "{kind} {path}: never accepted (last answer {answered})"
                    ));
                    return None;
                }
                self.not_accepted.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(random_millis(300, 800)).await;
                continue;
            }
            let state = record.as_ref().map_or("gone".to_owned(), |record| {
                record["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or_default()
                    .to_ascii_lowercase()
            });
            // A DELETE of a stack either removes it or fails.
            if method == reqwest::Method::DELETE && state == "succeeded" {
                self.unexpected(format!(
                    "{kind} {path} (answered {answered}) ended {state}: {:#}",
                    record.as_ref().map_or(&Value::Null, |r| &r["properties"])
                ));
            }
            self.outcome(kind, state);
            return Some(record);
        }
    }
}

fn group() -> String {
    format!("{SUB}/resourceGroups/{GROUP}")
}

fn names_in(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["identifiers"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn deployment_worker(client: Arc<Client>, worker: usize, chaos: Arc<AtomicBool>) {
    let mut round = 0;
    while chaos.load(Ordering::SeqCst) {
        let names: Vec<String> = (0..3).map(|k| format!("d{worker}-{round}-{k}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        // Half the workers chain their resources (`dependsOn`), so kills also land between dependent creates.
        let chained = worker.is_multiple_of(2);
        let body = json!({ "properties": { "mode": "Incremental", "template": template(&names, chained) } });
        let path = format!(
            "{}/providers/Microsoft.Resources/deployments/dep-{worker}-{round}",
            group()
        );
        if client
            .operate(
                "deployment PUT",
                reqwest::Method::PUT,
                &path,
                DEPLOYMENTS,
                Some(&body),
            )
            .await
            .is_none()
        {
            return;
        }
        round += 1;
        tokio::time::sleep(random_millis(500, 2500)).await;
    }
}

fn stack_body(names: &[String]) -> Value {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    json!({ "properties": { "template": template(&names, false),
                            "actionOnUnmanage": { "resources": "delete" },
                            "denySettings": { "mode": "none" } } })
}

/// Creates a stack, updates it (one resource kept, two dropped, two added), deletes it with its resources; again
/// with a new stack while the chaos lasts. Records what finished updates and deletes said they deleted.
async fn stack_worker(client: Arc<Client>, worker: usize, chaos: Arc<AtomicBool>) {
    let mut round = 0;
    while chaos.load(Ordering::SeqCst) {
        let path = format!(
            "{}/providers/Microsoft.Resources/deploymentStacks/stk-{worker}-{round}",
            group()
        );
        let first: Vec<String> = (0..3).map(|k| format!("s{worker}-{round}-a{k}")).collect();
        let second: Vec<String> = std::iter::once(first[0].clone())
            .chain((0..2).map(|k| format!("s{worker}-{round}-b{k}")))
            .collect();
        for (kind, names) in [("stack create", &first), ("stack update", &second)] {
            let Some(record) = client
                .operate(
                    kind,
                    reqwest::Method::PUT,
                    &path,
                    STACKS,
                    Some(&stack_body(names)),
                )
                .await
            else {
                return;
            };
            match record {
                Some(record) => {
                    let deleted = names_in(&record["properties"]["deletedResources"]);
                    client.tally.lock().unwrap().said_deleted.extend(deleted);
                }
                None => return,
            }
        }
        let before = match client.get(&format!("{path}?{STACKS}")).await {
            Some(reply) if reply.status == 200 => names_in(&reply.body["properties"]["resources"]),
            _ => return,
        };
        let Some(record) = client
            .operate(
                "stack DELETE",
                reqwest::Method::DELETE,
                &path,
                &format!("{STACKS}&unmanageAction.Resources=delete"),
                None,
            )
            .await
        else {
            return;
        };
        let deleted = match record {
            None => before,
            Some(record) => names_in(&record["properties"]["deletedResources"]),
        };
        client.tally.lock().unwrap().said_deleted.extend(deleted);
        round += 1;
        tokio::time::sleep(random_millis(200, 1000)).await;
    }
}

/// Kills a random replica every few seconds and starts it again a moment later, while the chaos lasts.
async fn killer(replicas: Arc<Replicas>, chaos: Arc<AtomicBool>) -> usize {
    let mut kills = 0;
    while chaos.load(Ordering::SeqCst) {
        tokio::time::sleep(random_millis(2000, 4000)).await;
        let index = random_below(REPLICAS);
        let killed = {
            let replicas = replicas.clone();
            tokio::task::spawn_blocking(move || replicas.kill(index))
                .await
                .expect("kill")
        };
        kills += usize::from(killed);
        tokio::time::sleep(random_millis(300, 1500)).await;
        let replicas = replicas.clone();
        tokio::task::spawn_blocking(move || replicas.restart(index))
            .await
            .expect("restart");
    }
    kills
}

/// Every page of a list.
async fn list_all(client: &Client, path: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(page) = next.take() {
        let reply = client.get(&page).await.expect("a replica answers the list");
        assert_eq!(reply.status, 200, "GET {page}: {}", reply.body);
        items.extend(reply.body["value"].as_array().cloned().unwrap_or_default());
        next = reply.body["nextLink"].as_str().map(|link| {
            link.split_once("://")
                .and_then(|(_, rest)| rest.find('/').map(|slash| rest[slash..].to_owned()))
                .unwrap_or_else(|| link.to_owned())
        });
    }
    items
}

fn is_terminal(record: &Value) -> bool {
    matches!(
        record["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_str(),
        "succeeded" | "failed" | "canceled"
    )
}

/// What the API says once everything settled: records not terminal, deployment operations still `Running`, and
/// every resource a deployment or stack records.
struct Survey {
    not_terminal: Vec<String>,
    recorded: BTreeSet<String>,
    deployments: usize,
    stacks: usize,
}

async fn survey(client: &Client) -> Survey {
    let deployments = list_all(
        client,
        &format!(
            "{}/providers/Microsoft.Resources/deployments?{DEPLOYMENTS}",
            group()
        ),
    )
    .await;
    let stacks = list_all(
        client,
        &format!(
            "{}/providers/Microsoft.Resources/deploymentStacks?{STACKS}",
            group()
        ),
    )
    .await;
    let mut survey = Survey {
        not_terminal: Vec::new(),
        recorded: BTreeSet::new(),
        deployments: deployments.len(),
        stacks: stacks.len(),
    };
    for deployment in &deployments {
        let id = deployment["id"].as_str().unwrap_or_default();
        if !is_terminal(deployment) {
            survey.not_terminal.push(format!(
                "deployment {id}: {}",
                deployment["properties"]["provisioningState"]
            ));
        }
        survey
            .recorded
            .extend(names_in(&deployment["properties"]["outputResources"]));
        for operation in list_all(client, &format!("{id}/operations?{DEPLOYMENTS}")).await {
            if operation["properties"]["provisioningState"] == "Running" {
                survey
                    .not_terminal
                    .push(format!("operation {}: Running", operation["id"]));
            }
        }
    }
    for stack in &stacks {
        if !is_terminal(stack) {
            survey.not_terminal.push(format!(
                "stack {}: {}",
                stack["id"], stack["properties"]["provisioningState"]
            ));
        }
        for list in ["resources", "failedResources", "detachedResources"] {
            survey.recorded.extend(names_in(&stack["properties"][list]));
        }
    }
    survey
}

/// Prints, for each deployment an orphan came from, its record and operations (a failing run's diagnosis).
async fn explain_orphans(client: &Client, orphans: &[&String]) {
    let deployments: BTreeSet<String> = orphans
        .iter()
        .filter_map(|name| {
            let (worker, rest) = name.strip_prefix('d')?.split_once('-')?;
            let (round, _) = rest.split_once('-')?;
            Some(format!("dep-{worker}-{round}"))
        })
        .collect();
    for name in deployments.iter().take(5) {
        let path = format!(
            "{}/providers/Microsoft.Resources/deployments/{name}",
            group()
        );
        if let Some(reply) = client.get(&format!("{path}?{DEPLOYMENTS}")).await {
            println!(
                "    orphan's deployment {name}: {} {:#}",
                reply.status, reply.body["properties"]
            );
        }
        if let Some(reply) = client
            .get(&format!("{path}/operations?{DEPLOYMENTS}"))
            .await
        {
            println!("    its operations: {:#}", reply.body);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_under_chaos_lose_nothing() {
    let chaos_for = Duration::from_secs(
        std::env::var("CAIRN_CHAOS_SECS")
            .ok()
            .and_then(|secs| secs.parse().ok())
            .unwrap_or(SHORT_FORM_SECS),
    );
    let (ext, ext_addr) = FaultyExtension::start(faults()).await;
    let store = SharedStore::start(
        "chaos",
        ext_addr,
        json!({ "timeoutSeconds": EXTENSION_TIMEOUT_SECS }),
    )
    .await;
    let replicas = Arc::new(Replicas::start(store.replica_args()));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let client = Arc::new(Client {
        http: reqwest::Client::new(),
        ports: replicas.ports.clone(),
        tally: tally.clone(),
        retries: AtomicUsize::new(0),
        not_accepted: AtomicUsize::new(0),
        deadline: Mutex::new(Instant::now() + chaos_for + SETTLE),
    });
    let reply = client
        .send(
            reqwest::Method::PUT,
            &format!("{}?{DEPLOYMENTS}", group()),
            Some(&json!({ "location": "local" })),
            None,
        )
        .await
        .expect("the resource group");
    assert!(matches!(reply.status, 200 | 201), "{}", reply.body);

    let started = Instant::now();
    let chaos = Arc::new(AtomicBool::new(true));
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..DEPLOYMENT_WORKERS {
        workers.spawn(deployment_worker(client.clone(), worker, chaos.clone()));
    }
    for worker in 0..STACK_WORKERS {
        workers.spawn(stack_worker(client.clone(), worker, chaos.clone()));
    }
    let killing = tokio::spawn(killer(replicas.clone(), chaos.clone()));
    tokio::time::sleep(chaos_for).await;

    // The chaos ends: no more kills or faults, every replica up; the operations under way must all end.
    chaos.store(false, Ordering::SeqCst);
    let kills = killing.await.expect("the killer");
    ext.stop_faults();
    for index in 0..REPLICAS {
        let replicas = replicas.clone();
        tokio::task::spawn_blocking(move || replicas.restart(index))
            .await
            .expect("restart");
    }
    let settle_from = Instant::now();
    *client.deadline.lock().unwrap() = settle_from + SETTLE;
    while let Some(joined) = workers.join_next().await {
        joined.expect("a worker");
    }
    // Anything the workers did not see end (an accepted PUT whose answer was lost, say) must end too.
    let survey = loop {
        let survey = survey(&client).await;
        if survey.not_terminal.is_empty() || Instant::now() > client.deadline() {
            break survey;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let settled_in = settle_from.elapsed();

    let inventory = inventory_at(store.location()).await;
    let holdings = ext.holdings();
    // Everything has ended: take what the workers and the extension saw.
    let tally = std::mem::take(&mut *tally.lock().unwrap());
    let ledger = std::mem::take(&mut *ext.ledger.lock().unwrap());
    let mut recorded = survey.recorded.clone();
    recorded.extend(inventory.keys().cloned());
    let orphans: Vec<&String> = holdings.difference(&recorded).collect();
    let lost_deletes: Vec<&String> = tally.said_deleted.intersection(&holdings).collect();
    let mut stuck = tally.stuck.clone();
    stuck.extend(survey.not_terminal.iter().cloned());

    println!(
        "chaos report ({:.0?} of chaos, settled in {settled_in:.1?}, {:.0?} in all)",
        chaos_for,
        started.elapsed()
    );
    println!("  replicas killed (SIGKILL) and restarted:     {kills}");
    println!(
        "  requests retried on another replica:         {}",
        client.retries.load(Ordering::Relaxed)
    );
    println!(
        "  requests sent again, not accepted (409):      {}",
        client.not_accepted.load(Ordering::Relaxed)
    );
    for ((kind, how), count) in &tally.outcomes {
        println!("  {kind:<16} ended {how:<12}            {count}");
    }
    for (kind, count) in &ledger.faults {
        println!("  fault injected: {kind:<34} {count}");
    }
    println!(
        "  creates performed by the extension:           {} ({} new)",
        ledger.creates.len(),
        ledger.creates.iter().filter(|(_, anew)| *anew).count()
    );
    println!(
        "  deletes performed by the extension:           {} ({} of existing)",
        ledger.deletes.len(),
        ledger
            .deletes
            .iter()
            .filter(|(_, existed)| *existed)
            .count()
    );
    println!(
        "  resources held at the end:                    {}",
        holdings.len()
    );
    println!(
        "  deployments / stacks listed at the end:       {} / {}",
        survey.deployments, survey.stacks
    );
    println!(
        "  unexpected answers:                           {}",
        tally.unexpected.len()
    );
    println!(
        "  operations stuck non-terminal:                {}",
        stuck.len()
    );
    println!(
        "  resources held that nothing records:          {}",
        orphans.len()
    );
    println!(
        "  duplicate creates:                            {}",
        ledger.duplicates.len()
    );
    println!(
        "  deletes lost:                                 {}",
        lost_deletes.len()
    );
    for what in &tally.unexpected {
        println!("    unexpected: {what}");
    }
    explain_orphans(&client, &orphans).await;

    assert!(
        stuck.is_empty(),
        "operations stuck non-terminal: {stuck:#?}"
    );
    assert!(
        orphans.is_empty(),
        "resources held that nothing records: {orphans:?}"
    );
    assert!(
        ledger.duplicates.is_empty(),
        "duplicate creates: {:#?}",
        ledger.duplicates
    );
    assert!(lost_deletes.is_empty(), "deletes lost: {lost_deletes:?}");
    assert!(
        tally.unexpected.is_empty(),
        "unexpected answers: {:#?}",
        tally.unexpected
    );
    let finished: usize = tally.outcomes.values().sum();
    assert!(
        finished >= DEPLOYMENT_WORKERS + STACK_WORKERS,
        "too little work finished: {:?}",
        tally.outcomes
    );
}

/// The extension's ledger catches what the suite asserts on: two creates of one resource in flight at once, and a
/// deleted resource made anew; and a create whose client went away (a killed replica, a timed-out request) stops
/// counting as in flight, so a later create of the same resource is no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extension_detects_duplicate_creates() {
    let hanging = FaultRates {
        max_latency: Duration::ZERO,
        unavailable: 0.0,
        throttled: 0.0,
        hang: 1.0,
        hang_for: Duration::from_secs(2),
    };
    let (ext, addr) = FaultyExtension::start(hanging).await;
    let http = reqwest::Client::new();
    let call = |operation: &str, body: Value, timeout: Duration| {
        http.post(format!("http://{addr}/v1/resource/{operation}"))
            .json(&body)
            .timeout(timeout)
            .send()
    };
    let create =
        |name: &str| json!({ "type": "Thing", "apiVersion": "v1", "properties": { "name": name } });
    let short = Duration::from_millis(200);

    // A create whose client gives up: dropped with its connection.
    assert!(call("createOrUpdate", create("a"), short).await.is_err());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        ext.ledger.lock().unwrap().creating.is_empty(),
        "the abandoned create is no longer in flight"
    );
    assert!(call("createOrUpdate", create("a"), short).await.is_err());
    assert!(ext.ledger.lock().unwrap().duplicates.is_empty());

    // Two creates of b at once.
    let (first, second) = tokio::join!(call("createOrUpdate", create("b"), short), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        call("createOrUpdate", create("b"), short).await
    });
    assert!(first.is_err() && second.is_err());
    assert_eq!(ext.ledger.lock().unwrap().duplicates.len(), 1);

    // b deleted, then made anew.
    let identifiers =
        json!({ "type": "Thing", "apiVersion": "v1", "identifiers": { "name": "b" } });
    assert!(call("delete", identifiers, short).await.is_err());
    assert!(!ext.holdings().contains("b"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(call("createOrUpdate", create("b"), short).await.is_err());
    let ledger = ext.ledger.lock().unwrap();
    assert_eq!(ledger.duplicates.len(), 2, "{:?}", ledger.duplicates);
    assert!(
        ledger.duplicates[1].contains("deleted"),
        "{:?}",
        ledger.duplicates
    );
}

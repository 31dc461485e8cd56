//! Replicas: several `cairn serve` processes (the built binary) on one throwaway PostgreSQL database (`cairn-testpg`),
//! with 3 s claims, in front of the test's Matrix extension (`matrix`), which holds a chosen call until released:
//!
//! - a replica killed (SIGKILL) with a deployment's create in flight: another replica takes the run over once the
//!   claim expires and finishes it; the inventory names exactly what the extension holds;
//! - a replica paused (SIGSTOP) with a create in flight: another replica takes the run over and finishes it; the
//!   paused one, resumed (SIGCONT), gets its create's answer and tries to record it — the store refuses it, so the
//!   journal, the record and the inventory stay exactly as the successor left them;
//! - concurrent PUTs of one deployment name and of one stack through two replicas: exactly one proceeds, the other
//!   gets ARM's 409; a cancel through the replica that does not run the deployment reaches the one that does.

mod common;
mod matrix;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_testpg::TestPostgres;
use common::{Server, start_serve};
use matrix::{Listener, PATIENCE, Release, exact, inventory_at, names, template};
use serde_json::{Value, json};
use sqlx::PgPool;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const STACKS: &str = "api-version=2024-03-01";
const DEPLOYMENTS: &str = "api-version=2025-04-01";

/// One PostgreSQL database, the master key and the extension registry several servers share.
struct Shared {
    _cluster: TestPostgres,
    _dir: tempfile::TempDir,
    url: String,
    key_file: PathBuf,
    registry: PathBuf,
    client: reqwest::Client,
}

impl Shared {
    async fn start(ext_addr: std::net::SocketAddr) -> Shared {
        let cluster = TestPostgres::start();
        let admin = PgPool::connect(&cluster.url()).await.expect("connect");
        sqlx::query("CREATE DATABASE replicas")
            .execute(&admin)
            .await
            .expect("create the database");
        // A paused replica must not hold the others up with a transaction it left open (operations.md advises it).
        sqlx::query("ALTER DATABASE replicas SET idle_in_transaction_session_timeout = '2s'")
            .execute(&admin)
            .await
            .expect("set the idle transaction timeout");
        admin.close().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let key_file = dir.path().join("cairn.key");
        std::fs::write(&key_file, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").expect("key");
        set_mode(&key_file, 0o600);
        let registry = dir.path().join("extensions.json");
        std::fs::write(
            &registry,
            json!({ "extensions": [ { "name": "Matrix", "version": "1.0.0",
                                      "transport": { "kind": "http", "url": format!("http://{ext_addr}") } } ] })
            .to_string(),
        )
        .expect("registry");
        Shared {
            url: cluster.url_for_database("replicas"),
            _cluster: cluster,
            _dir: dir,
            key_file,
            registry,
            client: reqwest::Client::new(),
        }
    }

    /// A `cairn serve` on the shared database.
    fn replica(&self) -> Server {
        start_serve(
            &[
                OsStr::new("--store"),
                OsStr::new(&self.url),
                OsStr::new("--store-key-file"),
                self.key_file.as_os_str(),
                OsStr::new("--extensions"),
                self.registry.as_os_str(),
            ],
            &[],
        )
    }

    async fn send(
        &self,
        server: &Server,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.client.request(method, format!("{}{path}", server.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, server: &Server, path: &str) -> Value {
        let (status, body) = self.send(server, reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Polls `path` through `server` until its `provisioningState` is terminal.
    async fn terminal(&self, server: &Server, path: &str) -> Value {
        let started = Instant::now();
        loop {
            let body = self.get(server, path).await;
            let state = body["properties"]["provisioningState"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if matches!(state.as_str(), "succeeded" | "failed" | "canceled") {
                return body;
            }
            assert!(started.elapsed() < PATIENCE, "{path} is still {state}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn resource_group(&self, server: &Server, name: &str) -> String {
        let scope = format!("{SUB}/resourceGroups/{name}");
        let (status, body) = self
            .send(
                server,
                reqwest::Method::PUT,
                &format!("{scope}?{DEPLOYMENTS}"),
                Some(json!({ "location": "local" })),
            )
            .await;
        assert!(
            status == 200 || status == 201,
            "resource group: {status} {body}"
        );
        scope
    }

    /// The operations of a deployment as a replica lists them.
    async fn operations(&self, server: &Server, deployment: &str) -> Vec<Value> {
        let body = self
            .get(server, &format!("{deployment}/operations?{DEPLOYMENTS}"))
            .await;
        body["value"].as_array().cloned().unwrap_or_default()
    }

    fn location(&self) -> cairn_assembly::StoreLocation {
        cairn_assembly::StoreLocation::parse(&self.url)
            .expect("a store URL")
            .with_key_file(Some(self.key_file.clone()))
    }

    async fn inventory(&self) -> BTreeMap<String, bool> {
        inventory_at(self.location()).await
    }

    /// Who holds the sweeper lease (the replica that runs takeovers and purges), if anyone.
    async fn sweeper(&self) -> Option<String> {
        let store = self.location().open().await.expect("open the store");
        let lease = store
            .get_lease(cairn_server::serve::SWEEPER_LEASE)
            .await
            .expect("read the lease");
        let _ = store.close().await;
        lease.map(|lease| lease.owner)
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Sends `signal` (`KILL`, `STOP`, `CONT`) to a server process.
fn signal(server: &Server, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(server.child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal}");
}

fn deployment_body(names: &[&str]) -> Value {
    json!({ "properties": { "mode": "Incremental", "template": template(names, true) } })
}

/// A replica killed with a create in flight: another finishes the deployment after the claim expires. The killed
/// one started first and so held the sweeper lease: the other takes that over too (it ran the takeover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_deployment_is_finished_by_another() {
    let listener = Listener::start().await;
    let ext = listener.ext.clone();
    let shared = Shared::start(listener.addr).await;
    let mut a = shared.replica();
    let sweeper_a = shared.sweeper().await.expect("the first replica sweeps");
    let b = shared.replica();
    assert_eq!(
        shared.sweeper().await.as_ref(),
        Some(&sweeper_a),
        "one replica sweeps at a time"
    );
    let scope = shared.resource_group(&a, "killed").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deployments/chain");

    ext.hold_create("w1");
    let (status, body) = shared
        .send(
            &a,
            reqwest::Method::PUT,
            &format!("{path}?{DEPLOYMENTS}"),
            Some(deployment_body(&["w0", "w1", "w2"])),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    ext.wait_held("w1").await;
    a.child.kill().expect("SIGKILL");
    a.child.wait().expect("reaped");
    ext.release_all(Release::Go);

    let record = shared.terminal(&b, &format!("{path}?{DEPLOYMENTS}")).await;
    assert_eq!(
        record["properties"]["provisioningState"], "Succeeded",
        "{record:#}"
    );
    for op in shared.operations(&b, &path).await {
        assert_ne!(op["properties"]["provisioningState"], "Running", "{op:#}");
    }
    assert_eq!(ext.holdings(), names(&["w0", "w1", "w2"]));
    exact(&shared.inventory().await, &ext.holdings());
    let sweeper_b = shared.sweeper().await.expect("a replica sweeps");
    assert_ne!(
        sweeper_b, sweeper_a,
        "the surviving replica took the sweeps over"
    );
}

/// A replica paused with a create in flight: another takes the run over and finishes it; resumed, the paused one's
/// writes are refused, so nothing of it lands after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replica_writes_nothing_after_its_run_was_taken_over() {
    let listener = Listener::start().await;
    let ext = listener.ext.clone();
    let shared = Shared::start(listener.addr).await;
    let a = shared.replica();
    let b = shared.replica();
    let scope = shared.resource_group(&a, "paused").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deployments/chain");

    ext.hold_create("w1");
    let (status, body) = shared
        .send(
            &a,
            reqwest::Method::PUT,
            &format!("{path}?{DEPLOYMENTS}"),
            Some(deployment_body(&["w0", "w1", "w2"])),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    ext.wait_held("w1").await;
    signal(&a, "STOP");
    // B's resumed run calls the create again once A's claim expired: hold that one too, then let both answer.
    ext.hold_create("w1");
    ext.wait_held("w1").await;
    ext.release_all(Release::Go);
    let finished = shared.terminal(&b, &format!("{path}?{DEPLOYMENTS}")).await;
    assert_eq!(
        finished["properties"]["provisioningState"], "Succeeded",
        "{finished:#}"
    );
    let operations = shared.operations(&b, &path).await;
    let inventory = shared.inventory().await;

    signal(&a, "CONT");
    // A reads its create's answer and tries to record it (and to go on); give it several heartbeats.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        shared.operations(&b, &path).await,
        operations,
        "no journal step of the paused replica landed"
    );
    assert_eq!(
        shared.get(&b, &format!("{path}?{DEPLOYMENTS}")).await,
        finished,
        "the record is the successor's"
    );
    assert_eq!(
        shared.inventory().await,
        inventory,
        "nor any inventory change"
    );
    exact(&inventory, &ext.holdings());
    // The resumed replica still answers, from the same store.
    assert_eq!(
        shared.get(&a, &format!("{path}?{DEPLOYMENTS}")).await,
        finished
    );
}

/// Two replicas racing: one deployment name, one stack. Exactly one PUT proceeds, the other gets ARM's 409; a cancel
/// through the replica that does not run the deployment ends it `Canceled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_through_two_replicas_one_proceeds() {
    let listener = Listener::start().await;
    let ext = listener.ext.clone();
    let shared = Shared::start(listener.addr).await;
    let a = shared.replica();
    let b = shared.replica();
    let scope = shared.resource_group(&a, "racing").await;

    let path = format!("{scope}/providers/Microsoft.Resources/deployments/race");
    ext.hold_create("r0");
    let put_path = format!("{path}?{DEPLOYMENTS}");
    let put = |server| {
        shared.send(
            server,
            reqwest::Method::PUT,
            &put_path,
            Some(deployment_body(&["r0", "r1"])),
        )
    };
    let ((status_a, body_a), (status_b, body_b)) = tokio::join!(put(&a), put(&b));
    let mut statuses = [status_a, status_b];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409], "{body_a} {body_b}");
    let refused = if status_a == 409 { &body_a } else { &body_b };
    assert_eq!(refused["error"]["code"], "DeploymentActive", "{refused}");
    let runner = if status_a == 201 { &a } else { &b };
    let other = if status_a == 201 { &b } else { &a };
    ext.wait_held("r0").await;
    let (status, body) = shared
        .send(
            other,
            reqwest::Method::POST,
            &format!("{path}/cancel?{DEPLOYMENTS}"),
            None,
        )
        .await;
    assert_eq!(status, 204, "a cancel through the other replica: {body}");
    // The runner sees the request at its next heartbeat; then the held create may answer.
    let started = Instant::now();
    loop {
        let record = shared.get(runner, &format!("{path}?{DEPLOYMENTS}")).await;
        if record["properties"]["provisioningState"] == "Canceled" {
            break;
        }
        if started.elapsed() > Duration::from_secs(2) {
            ext.release_all(Release::Go);
        }
        assert!(started.elapsed() < PATIENCE, "{record:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ext.release_all(Release::Go);
    assert!(
        !ext.holdings().contains("r1"),
        "the canceled run started nothing more: {:?}",
        ext.holdings()
    );

    let stack = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/race");
    ext.hold_create("s0");
    let stack_path = format!("{stack}?{STACKS}");
    let put_stack = |server| {
        shared.send(
            server,
            reqwest::Method::PUT,
            &stack_path,
            Some(
                json!({ "properties": { "template": template(&["s0"], false),
                                         "actionOnUnmanage": { "resources": "delete" },
                                         "denySettings": { "mode": "none" } } }),
            ),
        )
    };
    let ((status_a, body_a), (status_b, body_b)) = tokio::join!(put_stack(&a), put_stack(&b));
    let mut statuses = [status_a, status_b];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409], "{body_a} {body_b}");
    let refused = if status_a == 409 { &body_a } else { &body_b };
    assert_eq!(
        refused["error"]["code"], "DeploymentStackInNonTerminalState",
        "{refused}"
    );
    ext.wait_held("s0").await;
    ext.release_all(Release::Go);
    let done = shared.terminal(&b, &format!("{stack}?{STACKS}")).await;
    assert_eq!(
        done["properties"]["provisioningState"], "succeeded",
        "{done:#}"
    );
}

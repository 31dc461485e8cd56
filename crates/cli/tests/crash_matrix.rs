//! The crash matrix: `cairn serve` (the built binary) is killed with SIGKILL at chosen points of a deployment, a
//! stack update and a stack delete, and restarted on the same data directory with the extension up, or down and
//! then up again. After each restart the test asserts what a crash must never break: the operation reaches a
//! terminal state by itself, no deployment operation is left `Running`, and the inventory names what the extension
//! holds — every resource it holds (nothing untracked), and nothing else once the extension could answer.
//!
//! Kill points are chosen by durable state, never by sleeps: the test's extension (`matrix`: HTTP v2, in this
//! process, its holdings a map the test reads) creates a resource and then holds the answer, or holds a delete before
//! doing it, until told to go; the test kills the server once the extension reports the call. "Down" closes its
//! listener (connections are refused) and "up" listens again on the same port.

mod common;
mod matrix;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Server, start_serve, start_server};
use matrix::{Listener, PATIENCE, Release, exact, inventory_at, names, template, tracked};
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const STACKS: &str = "api-version=2024-03-01";
const DEPLOYMENTS: &str = "api-version=2025-04-01";

/// One cairn data directory, its registry (the matrix extension as `Matrix` 1.0.0) and the server on it.
struct Cairn {
    _dir: tempfile::TempDir,
    data_dir: PathBuf,
    registry: PathBuf,
    server: Option<Server>,
    client: reqwest::Client,
}

impl Cairn {
    fn start(ext_addr: SocketAddr) -> Self {
        Self::start_with(ext_addr, None)
    }

    /// [`Cairn::start`] with the store's process-level failpoint (`CAIRN_FAILPOINT_ABORT_AFTER_COMMIT`) set.
    fn start_with(ext_addr: SocketAddr, abort_after_commit: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let registry = dir.path().join("extensions.json");
        std::fs::write(
            &registry,
            json!({ "extensions": [ { "name": "Matrix", "version": "1.0.0",
                                      "transport": { "kind": "http", "url": format!("http://{ext_addr}") } } ] })
            .to_string(),
        )
        .unwrap();
        let server = match abort_after_commit {
            None => start_server(&data_dir, &registry),
            Some(failpoint) => start_serve(
                &[
                    OsStr::new("--data-dir"),
                    data_dir.as_os_str(),
                    OsStr::new("--extensions"),
                    registry.as_os_str(),
                ],
                &[("CAIRN_FAILPOINT_ABORT_AFTER_COMMIT", OsStr::new(failpoint))],
            ),
        };
        Cairn {
            _dir: dir,
            data_dir,
            registry,
            server: Some(server),
            client: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!(
            "{}{path}",
            self.server.as_ref().expect("a running server").url
        )
    }

    fn kill(&mut self) {
        let mut server = self.server.take().expect("a running server");
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
    }

    /// SIGKILLs the server once the extension holds `name`'s call (the kill point is the held call, never a sleep).
    async fn kill_when_held(&mut self, ext: &matrix::Extension, name: &str) {
        ext.wait_held(name).await;
        self.kill();
    }

    /// Waits for the server to die by itself (its failpoint) and asserts it aborted.
    async fn aborts(&mut self) {
        let mut server = self.server.take().expect("a running server");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                break status;
            }
            assert!(started.elapsed() < PATIENCE, "the server did not abort");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(6), "SIGABRT: {status}");
    }

    fn restart(&mut self) {
        self.server = Some(start_server(&self.data_dir, &self.registry));
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.client.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn resource_group(&self, name: &str) -> String {
        let scope = format!("{SUB}/resourceGroups/{name}");
        let (status, body) = self
            .send(
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

    /// Polls `path` until its `provisioningState` is terminal (`None` once it is gone).
    async fn terminal(&self, path: &str) -> Option<Value> {
        let started = Instant::now();
        loop {
            let (status, body) = self.send(reqwest::Method::GET, path, None).await;
            if status == 404 {
                return None;
            }
            assert_eq!(status, 200, "GET {path}: {body}");
            let state = body["properties"]["provisioningState"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if matches!(state.as_str(), "succeeded" | "failed" | "canceled") {
                return Some(body);
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{path} is still {state} after a restart"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls `path` until terminal and asserts the state it ended in.
    async fn ends(&self, path: &str, state: &str) -> Value {
        let record = self.terminal(path).await.expect("the record stays");
        assert_eq!(
            record["properties"]["provisioningState"], state,
            "{record:#}"
        );
        record
    }

    /// No operation of the deployment (or of a deployment nested in it) is left `Running`.
    async fn no_operation_running(&self, deployment: &str) {
        let (status, body) = self
            .send(
                reqwest::Method::GET,
                &format!("{deployment}/operations?{DEPLOYMENTS}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        for op in body["value"].as_array().into_iter().flatten() {
            assert_ne!(op["properties"]["provisioningState"], "Running", "{op:#}");
        }
    }

    /// The inventory's Matrix resources: name → detached. Read through a second store on the same directory.
    async fn inventory(&self) -> BTreeMap<String, bool> {
        inventory_at(cairn_assembly::StoreLocation::data_dir(&self.data_dir)).await
    }
}

/// (a) A deployment killed with a create in flight: restarted with the extension down, the resumed run fails and
/// still tracks what the create made; with the extension up again, a deployment killed the same way is finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_killed_mid_create() {
    let mut listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixdeploy").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deployments/chain");

    // Killed while w1's create is in flight (the extension made w1); restarted with the extension down.
    ext.hold_create("w1");
    put_deployment(&cairn, &path, &["w0", "w1", "w2"]).await;
    cairn.kill_when_held(&ext, "w1").await;
    listener.down();
    ext.release_all(Release::Go);
    cairn.restart();
    let record = cairn.ends(&format!("{path}?{DEPLOYMENTS}"), "Failed").await;
    let listed: BTreeSet<String> = record["properties"]["outputResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["identifiers"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(listed, names(&["w0", "w1"]), "{record:#}");
    cairn.no_operation_running(&path).await;
    assert_eq!(ext.holdings(), names(&["w0", "w1"]));
    tracked(&cairn.inventory().await, &ext.holdings());

    // The extension is back; run it again and kill it with w2's create in flight: the restart finishes it.
    listener.up().await;
    ext.hold_create("w2");
    put_deployment(&cairn, &path, &["w0", "w1", "w2"]).await;
    cairn.kill_when_held(&ext, "w2").await;
    ext.release_all(Release::Go);
    cairn.restart();
    cairn
        .ends(&format!("{path}?{DEPLOYMENTS}"), "Succeeded")
        .await;
    cairn.no_operation_running(&path).await;
    assert_eq!(ext.holdings(), names(&["w0", "w1", "w2"]));
    exact(&cairn.inventory().await, &ext.holdings());
}

/// (d) The process dies after a journal step's group is committed and before the run that wrote the step hears of
/// it (the store's failpoint aborts it): after w1's `Running` step (so its create is never called), and after its
/// `Succeeded` step. Restarted without the failpoint, the deployment finishes and the inventory names exactly what
/// the extension holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_dies_between_a_steps_commit_and_its_acknowledgement() {
    for (failpoint, made) in [("Running w1", &["w0"][..]), ("Succeeded w1", &["w0", "w1"])] {
        let listener = Listener::start().await;
        let ext = listener.ext.clone();
        let mut cairn = Cairn::start_with(listener.addr, Some(failpoint));
        let scope = cairn.resource_group("matrixcommit").await;
        let path = format!("{scope}/providers/Microsoft.Resources/deployments/chain");
        put_deployment(&cairn, &path, &["w0", "w1", "w2"]).await;
        cairn.aborts().await;
        let holdings = ext.holdings();
        assert!(
            names(made).is_subset(&holdings),
            "{failpoint}: {holdings:?}"
        );
        if failpoint.starts_with("Running") {
            // Its `Running` step is durable, its create never called: the run was not told it could go on.
            assert_eq!(holdings, names(made), "{failpoint}");
        }
        tracked(&cairn.inventory().await, &holdings);

        cairn.restart();
        cairn
            .ends(&format!("{path}?{DEPLOYMENTS}"), "Succeeded")
            .await;
        cairn.no_operation_running(&path).await;
        assert_eq!(ext.holdings(), names(&["w0", "w1", "w2"]), "{failpoint}");
        exact(&cairn.inventory().await, &ext.holdings());
    }
}

/// (e) A stack update killed mid-deployment, after which a resource its template names and its deployment had not
/// reached yet is created behind its back: the resumed deployment asks whether it exists, as the interrupted one
/// would have, and leaves it alone (the stack does not adopt); what the stack's deployment wrote before, it writes
/// again without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stack_deployment_does_not_take_over_what_appeared_meanwhile() {
    let listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixresume").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/resume");
    put_stack_of(&cairn, &path, &["a"], true).await;
    cairn.ends(&format!("{path}?{STACKS}"), "succeeded").await;

    // The update (a, then b, then c) is killed while it writes a again; then someone else makes b.
    ext.hold_create("a");
    put_stack_of(&cairn, &path, &["a", "b", "c"], true).await;
    cairn.kill_when_held(&ext, "a").await;
    ext.state
        .lock()
        .unwrap()
        .resources
        .insert("b".into(), json!({ "name": "b", "owner": "someone else" }));
    ext.release_all(Release::Go);
    cairn.restart();

    let stack = cairn.ends(&format!("{path}?{STACKS}"), "failed").await;
    // Refused: b, which exists and no stack manages; not a, which the stack's deployment wrote before.
    fn refusals(error: &Value, out: &mut Vec<String>) {
        let message = error["message"].as_str().unwrap_or_default();
        if error["code"] == "DeploymentStackResourceExistsUnmanaged"
            && message.contains("identifiers")
        {
            out.push(message.to_owned());
        }
        for detail in error["details"].as_array().into_iter().flatten() {
            refusals(detail, out);
        }
    }
    let mut refused = Vec::new();
    refusals(&stack["properties"]["error"], &mut refused);
    assert!(!refused.is_empty(), "{stack:#}");
    for message in &refused {
        assert!(message.contains(r#"{"name":"b"}"#), "{message}");
    }
    let b = ext.state.lock().unwrap().resources["b"].clone();
    assert_eq!(b["owner"], "someone else", "b was written: {b}");
    assert_eq!(ext.holdings(), names(&["a", "b"]), "c comes after b");
    let managed: BTreeSet<String> = stack["properties"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["identifiers"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(managed, names(&["a"]), "{stack:#}");
}

async fn put_deployment(cairn: &Cairn, path: &str, names: &[&str]) {
    let (status, body) = cairn
        .send(
            reqwest::Method::PUT,
            &format!("{path}?{DEPLOYMENTS}"),
            Some(json!({ "properties": { "mode": "Incremental", "template": template(names, true) } })),
        )
        .await;
    assert!(
        status == 200 || status == 201,
        "deployment PUT: {status} {body}"
    );
}

async fn put_stack(cairn: &Cairn, path: &str, names: &[&str]) {
    put_stack_of(cairn, path, names, false).await;
}

/// A stack PUT of the matrix template (its resources one after the other with `chained`).
async fn put_stack_of(cairn: &Cairn, path: &str, names: &[&str], chained: bool) {
    let (status, body) = cairn
        .send(
            reqwest::Method::PUT,
            &format!("{path}?{STACKS}"),
            Some(
                json!({ "properties": { "template": template(names, chained),
                                         "actionOnUnmanage": { "resources": "delete" },
                                         "denySettings": { "mode": "none" } } }),
            ),
        )
        .await;
    assert!(status == 200 || status == 201, "stack PUT: {status} {body}");
}

/// (b) A stack update killed while deploying (a create in flight) and while unmanaging (a delete held), restarted
/// with the extension up, and down then up: the stack ends in a terminal state each time and the inventory follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_update_killed_mid_deploy_and_mid_unmanage() {
    let mut listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixupdate").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/upd");
    let deployment = format!("{scope}/providers/Microsoft.Resources/deployments/upd");
    put_stack(&cairn, &path, &["a", "b", "c"]).await;
    cairn.ends(&format!("{path}?{STACKS}"), "succeeded").await;
    exact(&cairn.inventory().await, &names(&["a", "b", "c"]));

    // Killed while the update deploys d (its create in flight); restarted with the extension up.
    ext.hold_create("d");
    put_stack(&cairn, &path, &["a", "d"]).await;
    cairn.kill_when_held(&ext, "d").await;
    ext.release_all(Release::Go);
    cairn.restart();
    cairn.ends(&format!("{path}?{STACKS}"), "succeeded").await;
    cairn.no_operation_running(&deployment).await;
    assert_eq!(ext.holdings(), names(&["a", "d"]));
    exact(&cairn.inventory().await, &ext.holdings());

    // Killed while the next update's unmanage deletes d; restarted with the extension down, then up again.
    ext.hold_delete("d");
    put_stack(&cairn, &path, &["a"]).await;
    cairn.kill_when_held(&ext, "d").await;
    listener.down();
    ext.release_all(Release::Abandon);
    cairn.restart();
    cairn.ends(&format!("{path}?{STACKS}"), "failed").await;
    cairn.no_operation_running(&deployment).await;
    tracked(&cairn.inventory().await, &ext.holdings());
    listener.up().await;
    put_stack(&cairn, &path, &["a"]).await;
    cairn.ends(&format!("{path}?{STACKS}"), "succeeded").await;
    assert_eq!(ext.holdings(), names(&["a"]));
    exact(&cairn.inventory().await, &ext.holdings());
}

/// (c) A stack delete (delete-all) killed mid-delete, restarted with the extension down (the delete fails, keeping
/// what it could not delete tracked), then killed again mid-delete and restarted with the extension up: the stack
/// is gone and so is every resource and inventory row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_delete_killed_mid_delete() {
    let mut listener = Listener::start().await;
    let ext = listener.ext.clone();
    let mut cairn = Cairn::start(listener.addr);
    let scope = cairn.resource_group("matrixdelete").await;
    let path = format!("{scope}/providers/Microsoft.Resources/deploymentStacks/del");
    put_stack(&cairn, &path, &["a", "b"]).await;
    cairn.ends(&format!("{path}?{STACKS}"), "succeeded").await;
    let delete_all = format!("{path}?{STACKS}&unmanageAction.Resources=delete");

    ext.hold_delete("a");
    let (status, body) = cairn.send(reqwest::Method::DELETE, &delete_all, None).await;
    assert!(status == 200 || status == 202, "{status} {body}");
    cairn.kill_when_held(&ext, "a").await;
    listener.down();
    // The extension never got to the delete the dead server asked for: a is still there.
    ext.release_all(Release::Abandon);
    cairn.restart();
    cairn.ends(&format!("{path}?{STACKS}"), "failed").await;
    tracked(&cairn.inventory().await, &ext.holdings());

    assert!(ext.holdings().contains("a"));

    // The extension is back; the next delete is killed while it deletes a (and the extension finishes it).
    listener.up().await;
    ext.hold_delete("a");
    let (status, body) = cairn.send(reqwest::Method::DELETE, &delete_all, None).await;
    assert!(status == 200 || status == 202, "{status} {body}");
    cairn.kill_when_held(&ext, "a").await;
    ext.release_all(Release::Go);
    cairn.restart();
    assert!(
        cairn.terminal(&format!("{path}?{STACKS}")).await.is_none(),
        "the stack is deleted"
    );
    assert!(ext.holdings().is_empty(), "{:?}", ext.holdings());
    exact(&cairn.inventory().await, &BTreeSet::new());
}

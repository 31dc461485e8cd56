//! What the CLI benches share: a loopback HTTP v2 extension ("Bench" 1.0.0, type `Item`) that answers every call
//! after a fixed latency (zero: at once) and records the calls it answered, templates of its resources, a fresh
//! `CAIRN_HOME` that knows it, and running the `cairn` binary on that home, timed from spawn to exit, with the
//! child's peak resident memory.

#![allow(
    dead_code,
    reason = "each bench binary compiles this module and uses its own part of it"
)]

use std::collections::{BTreeSet, BinaryHeap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One call the extension answered: operation, start and end (since the extension started).
#[derive(Clone, Copy)]
pub struct Call {
    pub operation: &'static str,
    /// The client's port: calls on one connection come one after the other.
    pub connection: u16,
    pub start: Duration,
    pub end: Duration,
}

/// The extension: answers every call after `latency` and remembers which items exist and every call it answered.
#[derive(Clone)]
pub struct Extension {
    pub latency: Duration,
    pub origin: Instant,
    pub existing: Arc<Mutex<BTreeSet<String>>>,
    calls: Arc<Mutex<Vec<Call>>>,
    in_flight: Arc<AtomicUsize>,
    busiest: Arc<AtomicUsize>,
}

impl Extension {
    pub fn new(latency: Duration) -> Extension {
        Extension {
            latency,
            origin: Instant::now(),
            existing: Arc::default(),
            calls: Arc::default(),
            in_flight: Arc::default(),
            busiest: Arc::default(),
        }
    }

    async fn answer(&self, operation: &'static str, connection: SocketAddr) -> CallRecord {
        let start = self.origin.elapsed();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.busiest.fetch_max(now, Ordering::SeqCst);
        if !self.latency.is_zero() {
            latency_timer()
                .wait_until(Instant::now() + self.latency)
                .await;
        }
        CallRecord {
            extension: self.clone(),
            operation,
            connection: connection.port(),
            start,
        }
    }

    /// The calls since the last take, and the busiest concurrency among them.
    pub fn take(&self) -> (Vec<Call>, usize) {
        let calls = std::mem::take(&mut *self.calls.lock().expect("calls"));
        (calls, self.busiest.swap(0, Ordering::SeqCst))
    }

    pub fn existing(&self) -> BTreeSet<String> {
        self.existing.lock().expect("existing").clone()
    }

    /// Forgets the items (the next run starts from an empty extension).
    pub fn clear(&self) {
        self.existing.lock().expect("existing").clear();
    }
}

/// Ends the calls' latencies: one thread that sleeps until the earliest deadline and answers every call due by
/// then. Not tokio's timer, which rounds a sleep up to its next millisecond tick (answering in 21.2 ms on average
/// for 20), and not a blocking thread per call, which made every call wake a thread of its own: on a machine whose
/// two cores run cairn too, the wave of calls ending together then cost the extension about as much CPU as cairn.
struct LatencyTimer {
    due: Mutex<BinaryHeap<Due>>,
    earlier: Condvar,
}

/// A call waiting for its deadline (ordered soonest first).
struct Due {
    at: Instant,
    answer: tokio::sync::oneshot::Sender<()>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

fn latency_timer() -> &'static LatencyTimer {
    static TIMER: OnceLock<&'static LatencyTimer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static LatencyTimer = Box::leak(Box::new(LatencyTimer {
            due: Mutex::default(),
            earlier: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("latency".into())
            .spawn(|| timer.run())
            .expect("the latency thread");
        timer
    })
}

impl LatencyTimer {
    async fn wait_until(&self, at: Instant) {
        let (answer, answered) = tokio::sync::oneshot::channel();
        {
            let mut due = self.due.lock().expect("deadlines");
            let soonest = due.peek().is_none_or(|first| at < first.at);
            due.push(Due { at, answer });
            if soonest {
                self.earlier.notify_one();
            }
        }
        answered.await.expect("the latency thread answers");
    }

    fn run(&self) {
        let mut due = self.due.lock().expect("deadlines");
        loop {
            let now = Instant::now();
            while due.peek().is_some_and(|first| first.at <= now) {
                if let Some(call) = due.pop() {
                    let _ = call.answer.send(());
                }
            }
            due = match due
                .peek()
                .map(|first| first.at.saturating_duration_since(Instant::now()))
            {
                Some(wait) => self.earlier.wait_timeout(due, wait).expect("deadlines").0,
                None => self.earlier.wait(due).expect("deadlines"),
            };
        }
    }
}

/// Records a call when its answer is ready (dropped at the end of the handler).
struct CallRecord {
    extension: Extension,
    operation: &'static str,
    connection: u16,
    start: Duration,
}

impl Drop for CallRecord {
    fn drop(&mut self) {
        self.extension.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.extension.calls.lock().expect("calls").push(Call {
            operation: self.operation,
            connection: self.connection,
            start: self.start,
            end: self.extension.origin.elapsed(),
        });
    }
}

fn name_in(body: &Value, pointer: &str) -> String {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn item(body: &Value, name: &str) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
            "properties": { "name": name } })
}

async fn create(
    State(e): State<Extension>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let _record = e.answer("createOrUpdate", peer).await;
    let name = name_in(&body, "/properties/name");
    e.existing.lock().expect("existing").insert(name.clone());
    Json(item(&body, &name))
}

async fn preview(
    State(e): State<Extension>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let _record = e.answer("preview", peer).await;
    let name = name_in(&body, "/properties/name");
    Json(item(&body, &name))
}

async fn get(
    State(e): State<Extension>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(body): Json<Value>,
) -> Response {
    let _record = e.answer("get", peer).await;
    let name = name_in(&body, "/identifiers/name");
    if e.existing.lock().expect("existing").contains(&name) {
        Json(item(&body, &name)).into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
        )
            .into_response()
    }
}

async fn delete(
    State(e): State<Extension>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(body): Json<Value>,
) -> StatusCode {
    let _record = e.answer("delete", peer).await;
    let name = name_in(&body, "/identifiers/name");
    e.existing.lock().expect("existing").remove(&name);
    StatusCode::NO_CONTENT
}

/// Serves the extension on a loopback port from `runtime`; returns its URL.
pub fn serve(runtime: &tokio::runtime::Runtime, extension: Extension) -> String {
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(create))
        .route("/{version}/resource/preview", post(preview))
        .route("/{version}/resource/get", post(get))
        .route("/{version}/resource/delete", post(delete))
        .with_state(extension);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    runtime.spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    url
}

/// A runtime for the extension: two workers (the machine's cores are the CLI's too).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

fn template_of(resources: Value) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "bench": { "name": "Bench", "version": "1.0.0" } },
        "resources": resources
    })
}

/// A template of `count` independent items named `{prefix}0000`, `{prefix}0001`, ...
pub fn template(prefix: &str, count: usize) -> Value {
    let resources: serde_json::Map<String, Value> = (0..count)
        .map(|i| {
            let name = format!("{prefix}{i:04}");
            (
                name.clone(),
                json!({ "extension": "bench", "type": "Item", "apiVersion": "v1",
                        "properties": { "name": name } }),
            )
        })
        .collect();
    template_of(Value::Object(resources))
}

/// A template of `count` independent items in modules (nested deployments) of at most `per_module`, each module a
/// copy loop; item `i` of module `m` is named `{prefix}{m}-{i}`.
pub fn modules_template(prefix: &str, count: usize, per_module: usize) -> Value {
    let per_module = per_module.max(1);
    let modules = count.div_ceil(per_module);
    let resources: serde_json::Map<String, Value> = (0..modules)
        .map(|m| {
            let items = per_module.min(count - m * per_module);
            let child = template_of(json!({
                "items": { "extension": "bench", "type": "Item", "apiVersion": "v1",
                           "copy": { "name": "items", "count": items },
                           "properties": { "name": format!("[format('{prefix}{m}-{{0}}', copyIndex())]") } }
            }));
            let name = format!("module{m}");
            let module = json!({
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": name,
                "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                "template": child }
            });
            (name, module)
        })
        .collect();
    template_of(Value::Object(resources))
}

/// A fresh `CAIRN_HOME` (in a temp dir that also holds the templates) whose registry has the extension at `url`.
pub struct Home {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
}

impl Home {
    pub fn new(url: &str) -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(
            home.join("extensions.json"),
            json!({ "extensions": [ { "name": "Bench", "version": "1.0.0",
                                      "transport": { "kind": "http", "url": url } } ] })
            .to_string(),
        )
        .expect("the registry");
        Home { dir, home }
    }

    /// Writes `template` next to the home; returns its path.
    pub fn file(&self, name: &str, template: &Value) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, template.to_string()).expect("a template");
        path.display().to_string()
    }
}

/// A finished `cairn` command: its output, its time from spawn to exit, its peak resident memory.
pub struct Ran {
    pub output: Output,
    pub wall: Duration,
    /// The process's peak resident set (`ru_maxrss`), in KiB.
    pub peak_rss_kib: u64,
    /// The process's CPU time (user and system), as last sampled before it exited.
    pub cpu: Duration,
}

/// Runs `cairn args` on `home` (in process: no server, no extension override), asserting it succeeds.
pub fn cairn(binary: &Path, home: &Path, args: &[&str]) -> Ran {
    succeeded(spawn(binary, home, args).finish(), args)
}

/// Runs `cairn args` like [`cairn`], timed to its exit as `wait` sees it, without sampling its memory and CPU while
/// it runs (`Ran::peak_rss_kib` and `Ran::cpu` stay zero): what times only its wall clock reads no `/proc` files
/// every 2 ms beside it, and notices its exit at once rather than at the next sample.
pub fn cairn_timed(binary: &Path, home: &Path, args: &[&str]) -> Ran {
    succeeded(spawn(binary, home, args).finish_unsampled(), args)
}

fn succeeded(ran: Ran, args: &[&str]) -> Ran {
    assert_eq!(
        ran.output.status.code(),
        Some(0),
        "cairn {args:?}\nstderr: {}",
        String::from_utf8_lossy(&ran.output.stderr)
    );
    ran
}

/// A `cairn` process under way.
pub struct Running {
    child: std::process::Child,
    started: Instant,
}

/// Starts `cairn args` on `home` with its output piped.
pub fn spawn(binary: &Path, home: &Path, args: &[&str]) -> Running {
    let started = Instant::now();
    // A profiler to run cairn under (e.g. `CAIRN_BENCH_WRAP="heaptrack -o /tmp/cairn"`); its figures then include the
    // profiler's own cost.
    let wrapper = std::env::var("CAIRN_BENCH_WRAP").ok();
    let words: Vec<&str> = wrapper
        .as_deref()
        .map(|w| w.split_whitespace().collect())
        .unwrap_or_default();
    let mut command = match words.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(binary);
            command
        }
        None => Command::new(binary),
    };
    let child = command
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_EXTENSIONS")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cairn runs");
    Running { child, started }
}

impl Running {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process (reading its output meanwhile) and takes its resource usage with it.
    pub fn finish(self) -> Ran {
        self.finish_with(wait_with_usage)
    }

    /// Waits for the process (reading its output meanwhile), its resource usage unread.
    pub fn finish_unsampled(self) -> Ran {
        self.finish_with(|child| {
            let status = child.wait().expect("the child's status");
            (status, 0, Duration::ZERO)
        })
    }

    fn finish_with(
        mut self,
        wait: impl FnOnce(&mut std::process::Child) -> (std::process::ExitStatus, u64, Duration),
    ) -> Ran {
        let mut stdout = self.child.stdout.take().expect("piped stdout");
        let mut stderr = self.child.stderr.take().expect("piped stderr");
        let read = |pipe: &mut dyn std::io::Read| {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).expect("the output");
            bytes
        };
        let child = &mut self.child;
        let (out, err, (status, peak_rss_kib, cpu)) = std::thread::scope(|scope| {
            let err = scope.spawn(|| read(&mut stderr));
            let out = scope.spawn(|| read(&mut stdout));
            let usage = wait(child);
            (
                out.join().expect("stdout reader"),
                err.join().expect("stderr reader"),
                usage,
            )
        });
        let wall = self.started.elapsed();
        Ran {
            output: Output {
                status,
                stdout: out,
                stderr: err,
            },
            wall,
            peak_rss_kib,
            cpu,
        }
    }
}

/// Waits for the child, sampling its peak resident set (`VmHWM` in `/proc/<pid>/status`, in KiB) and its CPU time
/// every 2 ms while it runs: both only grow, so what a sample can miss is the process's last 2 ms. (`wait4`'s
/// `ru_maxrss` and `ru_utime` would be exact, but need `unsafe`, which the workspace forbids.)
fn wait_with_usage(child: &mut std::process::Child) -> (std::process::ExitStatus, u64, Duration) {
    let status = format!("/proc/{}/status", child.id());
    let (mut peak, mut cpu) = (0, Duration::ZERO);
    loop {
        if let Some(hwm) = std::fs::read_to_string(&status)
            .ok()
            .as_deref()
            .and_then(high_water_mark_kib)
        {
            peak = peak.max(hwm);
        }
        cpu = cpu_time(child.id()).unwrap_or(cpu).max(cpu);
        if let Some(exit) = child.try_wait().expect("the child's status") {
            return (exit, peak, cpu);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The CPU time (user and system) a running process has used so far, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are counted from its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
    // `utime` and `stime` are fields 14 and 15, in clock ticks: 100 a second on Linux (`USER_HZ`).
    Some(Duration::from_millis((ticks(14)? + ticks(15)?) * 10))
}

/// The peak resident set of a running process, in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    high_water_mark_kib(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

fn high_water_mark_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

pub fn seconds(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}

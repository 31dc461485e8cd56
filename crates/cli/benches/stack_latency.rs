//! Stack latency benchmark (a bench binary, not a timed test): `cairn stack group create` run as a user runs it
//! (the `cairn` binary, in-process engine on its own `CAIRN_HOME`) against a loopback HTTP v2 extension that
//! answers every call after a fixed latency, compared with the ideal the engine's parallelism allows.
//!
//! `cargo bench -p cairn --bench stack_latency -- [--runs 3] [--count 800] [--update-to 400] [--latency-ms 20]
//! [--baseline PATH]`
//!
//! With `--baseline PATH` (another build of the `cairn` binary, e.g. of an earlier commit), every run measures both
//! binaries, alternating which goes first, so a before/after comparison shares the machine's load of the moment.
//!
//! Per run, on a fresh data directory with one resource group:
//! 1. **create**: a stack of `count` independent extension resources (`--action-on-unmanage deleteAll`);
//! 2. **update**: the same stack with the first `update-to` of them: those are applied again, the rest deleted;
//! 3. **deployment** (the reference the stack is held to): `cairn deployment group create` of `count` other
//!    independent resources on the same extension.
//!
//! Each phase is timed from spawning the command to its exit (process start, opening the store, the operation,
//! following it to its end, printing the result). The ideal is the extension's latency times the waves the
//! deployment parallelism (16, the engine's default) needs: create ⌈count/16⌉ × latency; update ⌈kept/16⌉ ×
//! latency to apply the kept resources again plus ⌈deleted/16⌉ × latency to delete the rest (the deletes can only
//! start once the deployment has ended, since the stack's diff needs its result). With 800 → 400 at 20 ms both
//! are 1.0 s. The extension records every call, so each phase is also split into: before the first call (process
//! start, store, template, records), the calls themselves (first start to last end; with the busiest concurrency
//! seen), the pause between the update's last apply and its first delete, and after the last call (recording the
//! outcome, the CLI noticing it, printing, exiting).
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it runs once with 24 resources updated to 12, as a smoke
//! test of the same path.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The engine's default parallelism, which the ideal assumes (the CLI runs with the defaults).
const PARALLELISM: usize = 16;
const STACK: &str = "bench";
const GROUP: &str = "rg";

struct Options {
    runs: usize,
    count: usize,
    update_to: usize,
    latency: Duration,
    /// Another `cairn` binary measured in the same runs.
    baseline: Option<PathBuf>,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs the binary without it: one small run.
    let measuring = args.iter().any(|a| a == "--bench");
    let (runs, count) = if measuring { (3, 800) } else { (1, 24) };
    let count = value("--count").unwrap_or(count).max(1);
    Options {
        runs: value("--runs").unwrap_or(runs).max(1),
        count,
        update_to: value("--update-to").unwrap_or(count / 2).min(count),
        latency: Duration::from_millis(value("--latency-ms").unwrap_or(20) as u64),
        baseline: args
            .iter()
            .position(|a| a == "--baseline")
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from),
    }
}

/// One call the extension answered: operation, start and end (since the extension started).
#[derive(Clone, Copy)]
struct Call {
    operation: &'static str,
    /// The client's port: calls on one connection come one after the other.
    connection: u16,
    start: Duration,
    end: Duration,
}

/// A v2 extension ("Bench" 1.0.0, type `Item`) that answers every call after `latency` and remembers which items
/// exist and every call it answered.
#[derive(Clone)]
struct Extension {
    latency: Duration,
    origin: Instant,
    existing: Arc<Mutex<BTreeSet<String>>>,
    calls: Arc<Mutex<Vec<Call>>>,
    in_flight: Arc<AtomicUsize>,
    busiest: Arc<AtomicUsize>,
}

impl Extension {
    async fn answer(&self, operation: &'static str, connection: SocketAddr) -> CallRecord {
        let start = self.origin.elapsed();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.busiest.fetch_max(now, Ordering::SeqCst);
        // The OS timer on a blocking thread, not tokio's: tokio rounds a sleep up to its next millisecond tick and
        // answered in 21.2 ms on average for 20, which would charge the extension's lateness to cairn.
        let latency = self.latency;
        tokio::task::spawn_blocking(move || std::thread::sleep(latency))
            .await
            .expect("the latency");
        CallRecord {
            extension: self.clone(),
            operation,
            connection: connection.port(),
            start,
        }
    }

    /// The calls since the last take, and the busiest concurrency among them.
    fn take(&self) -> (Vec<Call>, usize) {
        let calls = std::mem::take(&mut *self.calls.lock().expect("calls"));
        (calls, self.busiest.swap(0, Ordering::SeqCst))
    }

    fn existing(&self) -> BTreeSet<String> {
        self.existing.lock().expect("existing").clone()
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
fn serve(runtime: &tokio::runtime::Runtime, extension: Extension) -> String {
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

fn template(prefix: &str, count: usize) -> Value {
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
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "bench": { "name": "Bench", "version": "1.0.0" } },
        "resources": resources
    })
}

fn cairn(binary: &Path, home: &Path, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new(binary)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_EXTENSIONS")
        .args(args)
        .output()
        .expect("cairn runs");
    let elapsed = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "cairn {args:?}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, elapsed)
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn waves(resources: usize) -> u32 {
    resources.div_ceil(PARALLELISM) as u32
}

/// One timed command and where its time went, from the extension's record of its calls.
struct Phase {
    wall: Duration,
    ideal: Duration,
    /// Process start to the first call.
    before: Duration,
    /// First call start to last call end.
    calls: Duration,
    /// The update's last apply end to its first delete start.
    pause: Option<Duration>,
    /// Last call end to the command's exit.
    after: Duration,
    busiest: usize,
    /// The mean time the extension took per call (its latency, as its timer delivered it).
    mean_call: Duration,
    /// The share of the calls' span the `PARALLELISM` slots spent inside calls (1.0: never idle between them).
    occupancy: f64,
    /// The mean time from the extension's answer to the next request on the same connection (under 5 ms: the
    /// client's turnaround, not a pause of the operation): what cairn takes per call beyond the latency.
    turnaround: Duration,
    counts: BTreeMap<&'static str, usize>,
}

impl Phase {
    fn of(
        wall: Duration,
        ideal: Duration,
        origin: Duration,
        calls: &[Call],
        busiest: usize,
    ) -> Phase {
        let first = calls.iter().map(|c| c.start).min().unwrap_or(origin);
        let last = calls.iter().map(|c| c.end).max().unwrap_or(origin);
        let last_apply = calls
            .iter()
            .filter(|c| c.operation == "createOrUpdate")
            .map(|c| c.end)
            .max();
        let first_delete = calls
            .iter()
            .filter(|c| c.operation == "delete")
            .map(|c| c.start)
            .min();
        let mut counts = BTreeMap::new();
        for call in calls {
            *counts.entry(call.operation).or_default() += 1;
        }
        let inside: Duration = calls.iter().map(|c| c.end.saturating_sub(c.start)).sum();
        let mut by_connection: BTreeMap<u16, Vec<&Call>> = BTreeMap::new();
        for call in calls {
            by_connection.entry(call.connection).or_default().push(call);
        }
        let gaps: Vec<Duration> = by_connection
            .values_mut()
            .flat_map(|calls| {
                calls.sort_by_key(|c| c.start);
                calls
                    .windows(2)
                    .map(|pair| pair[1].start.saturating_sub(pair[0].end))
                    .collect::<Vec<_>>()
            })
            .filter(|gap| *gap < Duration::from_millis(5))
            .collect();
        let turnaround =
            gaps.iter().sum::<Duration>() / u32::try_from(gaps.len().max(1)).unwrap_or(u32::MAX);
        let span = last.saturating_sub(first);
        Phase {
            wall,
            ideal,
            before: first.saturating_sub(origin),
            calls: span,
            pause: last_apply
                .zip(first_delete)
                .map(|(apply, delete)| delete.saturating_sub(apply)),
            after: (origin + wall).saturating_sub(last),
            busiest,
            mean_call: inside / u32::try_from(calls.len().max(1)).unwrap_or(u32::MAX),
            turnaround,
            occupancy: inside.as_secs_f64()
                / (span.as_secs_f64() * PARALLELISM as f64).max(f64::MIN_POSITIVE),
            counts,
        }
    }

    fn ratio(&self) -> f64 {
        self.wall.as_secs_f64() / self.ideal.as_secs_f64()
    }

    fn line(&self, what: &str) -> String {
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(op, n)| format!("{op} x{n}"))
            .collect();
        format!(
            "{what}: {} ({:.2}x of {}); before the first call {}, calls {}{}, after the last {}; busiest {} at \
             once, {:.1} ms per call, {:.2} ms turnaround, slots {:.0}% busy; {}",
            seconds(self.wall),
            self.ratio(),
            seconds(self.ideal),
            seconds(self.before),
            seconds(self.calls),
            self.pause
                .map(|p| format!(" (pause between applies and deletes {})", seconds(p)))
                .unwrap_or_default(),
            seconds(self.after),
            self.busiest,
            self.mean_call.as_secs_f64() * 1000.0,
            self.turnaround.as_secs_f64() * 1000.0,
            self.occupancy * 100.0,
            counts.join(", ")
        )
    }
}

/// Runs `cairn args` and accounts for it against the extension's calls.
fn timed(
    binary: &Path,
    home: &Path,
    args: &[&str],
    extension: &Extension,
    ideal: Duration,
) -> (Output, Phase) {
    extension.take();
    let origin = extension.origin.elapsed();
    let (out, wall) = cairn(binary, home, args);
    let (calls, busiest) = extension.take();
    (out, Phase::of(wall, ideal, origin, &calls, busiest))
}

struct Run {
    create: Phase,
    update: Phase,
    deployment: Phase,
}

fn run(options: &Options, binary: &Path, extension: &Extension, url: &str) -> Run {
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
    let file = |name: &str, template: Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, template.to_string()).expect("a template");
        path.display().to_string()
    };
    let (count, kept) = (options.count, options.update_to);
    let full = file("full.json", template("r", count));
    let smaller = file("smaller.json", template("r", kept));
    let deployment = file("deployment.json", template("d", count));
    cairn(
        binary,
        &home,
        &["group", "create", "-n", GROUP, "-l", "local"],
    );

    let latency = options.latency;
    let stack = |template: &str| {
        [
            "stack",
            "group",
            "create",
            "-n",
            STACK,
            "-g",
            GROUP,
            "-f",
            template,
            "--aou",
            "deleteAll",
            "--yes",
        ]
        .map(str::to_owned)
    };
    let (out, create) = timed(
        binary,
        &home,
        &stack(&full).each_ref().map(String::as_str),
        extension,
        latency * waves(count),
    );
    check_stack(&out, count);
    assert_eq!(extension.existing().len(), count, "every item was created");
    assert_eq!(create.counts.get("createOrUpdate"), Some(&count));

    let ideal = latency * (waves(kept) + waves(count - kept));
    let (out, update) = timed(
        binary,
        &home,
        &stack(&smaller).each_ref().map(String::as_str),
        extension,
        ideal,
    );
    check_stack(&out, kept);
    let left = extension.existing();
    assert_eq!(
        left.len(),
        kept,
        "the items that left the stack were deleted"
    );
    assert!(left.iter().all(|name| name.starts_with('r') && name[1..].parse::<usize>().is_ok_and(|i| i < kept)));
    assert_eq!(update.counts.get("createOrUpdate"), Some(&kept));
    assert_eq!(
        update.counts.get("delete").copied().unwrap_or(0),
        count - kept
    );

    let (out, deployment) = timed(
        binary,
        &home,
        &[
            "deployment",
            "group",
            "create",
            "-n",
            "reference",
            "-g",
            GROUP,
            "-f",
            &deployment,
        ],
        extension,
        latency * waves(count),
    );
    let deployed = stdout_json(&out);
    assert_eq!(
        deployed["properties"]["provisioningState"], "Succeeded",
        "{deployed:#}"
    );
    // The next run starts from an empty extension.
    extension.existing.lock().expect("existing").clear();
    Run {
        create,
        update,
        deployment,
    }
}

fn check_stack(out: &Output, managed: usize) {
    let stack = stdout_json(out);
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );
    assert_eq!(
        stack["properties"]["resources"].as_array().map(Vec::len),
        Some(managed),
        "the stack manages what its template declares"
    );
}

fn seconds(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}

/// Best and median of the phases' wall times, with their ratios.
fn summary(what: &str, phases: &[&Phase]) -> String {
    let mut walls: Vec<Duration> = phases.iter().map(|p| p.wall).collect();
    walls.sort();
    let ideal = phases[0].ideal;
    let ratio = |d: Duration| d.as_secs_f64() / ideal.as_secs_f64();
    let (best, median) = (walls[0], walls[walls.len() / 2]);
    format!(
        "{what}: ideal {}, best {} ({:.2}x), median {} ({:.2}x)",
        seconds(ideal),
        seconds(best),
        ratio(best),
        seconds(median),
        ratio(median)
    )
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
        .expect("a runtime");
    let extension = Extension {
        latency: options.latency,
        origin: Instant::now(),
        existing: Arc::default(),
        calls: Arc::default(),
        in_flight: Arc::default(),
        busiest: Arc::default(),
    };
    let url = serve(&runtime, extension.clone());
    println!(
        "stack of {} independent extension resources, updated to {}; extension latency {} ms; {} runs",
        options.count,
        options.update_to,
        options.latency.as_millis(),
        options.runs
    );
    let mut binaries = vec![("cairn", PathBuf::from(env!("CARGO_BIN_EXE_cairn")))];
    if let Some(baseline) = &options.baseline {
        binaries.insert(0, ("baseline", baseline.clone()));
    }
    let mut runs: Vec<Vec<Run>> = binaries.iter().map(|_| Vec::new()).collect();
    for round in 1..=options.runs {
        // Alternate which binary goes first, so neither always meets the machine in the same state.
        let mut order: Vec<usize> = (0..binaries.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for which in order {
            let (label, binary) = &binaries[which];
            let run = run(&options, binary, &extension, &url);
            println!("run {round}, {label}");
            println!("  {}", run.create.line("stack create"));
            println!("  {}", run.update.line("stack update"));
            println!("  {}", run.deployment.line("deployment"));
            runs[which].push(run);
        }
    }
    for ((label, binary), runs) in binaries.iter().zip(&runs) {
        println!(
            "{label} ({}), best and median of {} runs:",
            binary.display(),
            options.runs
        );
        let all = |pick: fn(&Run) -> &Phase| runs.iter().map(pick).collect::<Vec<_>>();
        println!("  {}", summary("stack create", &all(|r| &r.create)));
        println!("  {}", summary("stack update", &all(|r| &r.update)));
        println!("  {}", summary("deployment", &all(|r| &r.deployment)));
    }
}

//! Kubernetes benchmark (a bench binary, not a timed test): a deployment stack creating N config maps on a real
//! API server (`cairn-testkube`) through the built-in Kubernetes extension, updating it to keep only half of them
//! (the others deleted: `actionOnUnmanage: delete`) and deleting it, against `kubectl` doing the same to the same
//! manifests in the same run on the same API server: `kubectl apply --server-side -f` of all, `kubectl apply
//! --server-side --prune` of the half (through an ApplySet with kubectl 1.27 and later, which prune nothing
//! server-side applied otherwise; by label with `--prune-whitelist` before), and `kubectl delete -f` of the
//! half. Also measured, to show what bounds the ratio: the CPU time of the API server, etcd and the tool
//! (cairn's process or kubectl) in each phase, and the extension's answers by operation and status.
//!
//! `cargo bench -p cairn-stack-service --bench kubernetes -- [--runs 3] [--count 500]` (`RUST_LOG=debug` shows
//! the host's calls). Under `cargo test --all-targets` (no `--bench` argument) it runs once with 5 config maps,
//! as a smoke test. `kubectl` is whatever `kubectl` is on the `PATH` (Debian's `kubernetes-client`;
//! `CAIRN_BENCH_KUBECTL` names another).
//!
//! The stack service, engine and host run with their default settings; the store is SQLite in a temp dir; the
//! kubeconfig (the admin's client certificate) comes from a Key Vault reference, as a stack keeps it.

// The store set-up the stack service's integration tests use (resource group `rg1`, Key Vault `ops`).
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/counting.rs"]
mod counting;
use common::*;
use counting::{Answers, Counting, take};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::query::Query;
use cairn_engine::{Engine, EngineSettings, Providers};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry};
use cairn_stack_service::{StackService, StackServiceSettings};
use cairn_testkube::TestKube;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const KUBECONFIG_SECRET: &str = "kubeconfig";
const STACK: &str = "kubebench";
const NAMESPACE: &str = "bench";
/// The label every benchmark object carries: kubectl's prune selects by it.
const LABEL: &str = "cairn-bench";
const LABEL_VALUE: &str = "configmaps";

struct Options {
    runs: usize,
    count: usize,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs the binary without it, as a smoke test of
    // the same path (one small run), so the test suite stays quick.
    let measuring = args.iter().any(|a| a == "--bench");
    let (runs, count) = if measuring { (3, 500) } else { (1, 5) };
    Options {
        runs: value("--runs").unwrap_or(runs).max(1),
        // At least 2, so that the update keeps some and removes some.
        count: value("--count").unwrap_or(count).max(2),
    }
}

fn name(i: usize) -> String {
    format!("bench-cm-{i:04}")
}

/// The manifest of config map `i`, as both tools get it (cairn adds `apiVersion` and `kind` from the type).
fn manifest(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name(i), "namespace": NAMESPACE, "labels": { LABEL: LABEL_VALUE } },
        "data": { "index": i.to_string(), "greeting": "hello from the benchmark" }
    })
}

/// Kept by the update: the first half.
fn kept(count: usize) -> usize {
    count / 2
}

/// CPU time (user + system) of a process so far, and of its waited-for children, from `/proc/<pid>/stat`.
fn cpu(pid: &str) -> (Duration, Duration) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (Duration::ZERO, Duration::ZERO);
    };
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    // utime, stime, cutime, cstime are fields 14-17, i.e. 11-14 after the state (field 3 = index 0). The
    // kernel counts in USER_HZ, 100 on Linux.
    let ticks = |index: usize| Duration::from_millis(10 * fields.get(index).copied().unwrap_or(0));
    (ticks(11) + ticks(12), ticks(13) + ticks(14))
}

/// CPU time counters of the control plane and of this process (its own, and its waited-for children's).
#[derive(Clone, Copy)]
struct CpuSnapshot {
    etcd: Duration,
    apiserver: Duration,
    own: Duration,
    children: Duration,
}

impl CpuSnapshot {
    fn take(kube: &TestKube) -> CpuSnapshot {
        let pids = kube.process_ids();
        let of = |index: usize| {
            pids.get(index)
                .map_or(Duration::ZERO, |pid| cpu(&pid.to_string()).0)
        };
        let (own, children) = cpu("self");
        CpuSnapshot {
            etcd: of(0),
            apiserver: of(1),
            own,
            children,
        }
    }
}

/// What one phase cost: wall time and CPU time of the API server, etcd and the tool.
#[derive(Clone, Copy)]
struct Phase {
    wall: Duration,
    apiserver: Duration,
    etcd: Duration,
    tool: Duration,
}

impl Phase {
    fn between(before: CpuSnapshot, after: CpuSnapshot, wall: Duration, kubectl: bool) -> Phase {
        Phase {
            wall,
            apiserver: after.apiserver.saturating_sub(before.apiserver),
            etcd: after.etcd.saturating_sub(before.etcd),
            tool: if kubectl {
                after.children.saturating_sub(before.children)
            } else {
                after.own.saturating_sub(before.own)
            },
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} (CPU: API server {:.2} s, etcd {:.2} s, tool {:.2} s)",
            seconds(self.wall),
            self.apiserver.as_secs_f64(),
            self.etcd.as_secs_f64(),
            self.tool.as_secs_f64()
        )
    }
}

/// A phase timed with the CPU counters around it.
async fn timed<F: std::future::Future<Output = ()>>(
    kube: &TestKube,
    kubectl: bool,
    work: F,
) -> Phase {
    let before = CpuSnapshot::take(kube);
    let started = Instant::now();
    work.await;
    let wall = started.elapsed();
    Phase::between(before, CpuSnapshot::take(kube), wall, kubectl)
}

/// The three phases of one tool in one run.
#[derive(Clone, Copy)]
struct Lifecycle {
    create: Phase,
    update: Phase,
    delete: Phase,
}

async fn admin_client(kube: &TestKube) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kube.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

/// The benchmark's config maps on the server, by name.
async fn present(admin: &kube::Client) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    let mut names: Vec<String> = api
        .list(&ListParams::default().labels(&format!("{LABEL}={LABEL_VALUE}")))
        .await
        .expect("list the config maps")
        .items
        .into_iter()
        .filter_map(|map| map.metadata.name)
        .collect();
    names.sort();
    names
}

fn names(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(name).collect()
}

/// How kubectl prunes what the update's manifests no longer hold.
enum Prune {
    /// kubectl 1.27 and later: an ApplySet (`KUBECTL_APPLYSET=true`, `--prune --applyset=<secret>`), the only
    /// pruning these versions do for objects created by server-side apply ("--prune is in alpha and doesn't
    /// currently work on objects created by server-side apply" otherwise). The create names it too, so that
    /// the objects it creates belong to the set.
    ApplySet,
    /// Older kubectl (Debian's 1.20): `--prune -l <label>` with this allowlist flag (`--prune-whitelist`
    /// before 1.26).
    Label(&'static str),
}

/// The ApplySet's parent object (a Secret in the benchmark's namespace) for kubectl 1.27 and later.
const APPLYSET: &str = "cairn-bench-set";

/// Where the kubectl runs find their manifests and kubeconfig.
struct KubectlFiles {
    program: String,
    kubeconfig: PathBuf,
    all: PathBuf,
    half: PathBuf,
    prune: Prune,
    version: String,
}

impl KubectlFiles {
    fn write(dir: &Path, kube: &TestKube, count: usize) -> KubectlFiles {
        // A multi-document YAML stream of JSON documents (JSON is YAML), as `kubectl apply -f` reads it.
        let stream = |range: std::ops::Range<usize>| {
            range
                .map(|i| format!("---\n{}\n", manifest(i)))
                .collect::<String>()
        };
        let all = dir.join("all.yaml");
        let half = dir.join("half.yaml");
        std::fs::write(&all, stream(0..count)).expect("write the manifests");
        std::fs::write(&half, stream(0..kept(count))).expect("write the manifests");
        let program = std::env::var("CAIRN_BENCH_KUBECTL").unwrap_or_else(|_| "kubectl".into());
        let output = Command::new(&program)
            .args(["version", "--client", "-o", "json"])
            .output()
            .unwrap_or_else(|err| {
                panic!(
                    "could not run `{program}` ({err}): the benchmark compares with kubectl; install it with \
                     `apt-get install -y kubernetes-client` (scripts/test.sh does)"
                )
            });
        let version: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        let minor: u32 = version["clientVersion"]["minor"]
            .as_str()
            .unwrap_or("0")
            .trim_end_matches('+')
            .parse()
            .unwrap_or(0);
        let prune = match minor {
            27.. => Prune::ApplySet,
            26 => Prune::Label("--prune-allowlist=core/v1/ConfigMap"),
            _ => Prune::Label("--prune-whitelist=core/v1/ConfigMap"),
        };
        KubectlFiles {
            program,
            kubeconfig: kube.kubeconfig_path(),
            all,
            half,
            prune,
            version: version["clientVersion"]["gitVersion"]
                .as_str()
                .unwrap_or("unknown")
                .to_owned(),
        }
    }

    /// `kubectl apply --server-side` of `file`, pruning what it does not hold when `prune`.
    fn apply_args(&self, file: &Path, prune: bool) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "apply".into(),
            "--server-side".into(),
            "-n".into(),
            NAMESPACE.into(),
        ];
        match self.prune {
            Prune::ApplySet => args.extend(["--prune".into(), format!("--applyset={APPLYSET}")]),
            Prune::Label(allowlist) if prune => args.extend([
                "--prune".into(),
                "-l".into(),
                format!("{LABEL}={LABEL_VALUE}"),
                allowlist.into(),
            ]),
            Prune::Label(_) => {}
        }
        args.extend(["-f".into(), file_arg(file)]);
        args
    }

    /// Runs kubectl with `args` (on a blocking thread: it takes seconds), panicking with its stderr on failure.
    async fn run(&self, args: Vec<String>) {
        let program = self.program.clone();
        let kubeconfig = self.kubeconfig.clone();
        let applyset = matches!(self.prune, Prune::ApplySet);
        tokio::task::spawn_blocking(move || {
            let mut command = Command::new(&program);
            if applyset {
                command.env("KUBECTL_APPLYSET", "true");
            }
            let output = command
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(&args)
                .output()
                .expect("run kubectl");
            assert!(
                output.status.success(),
                "kubectl {}: {}\n{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        })
        .await
        .expect("kubectl");
    }

    fn describe(&self) -> String {
        match self.prune {
            Prune::ApplySet => format!(
                "kubectl {} (prunes through the ApplySet `{APPLYSET}`)",
                self.version
            ),
            Prune::Label(_) => format!("kubectl {} (prunes by label)", self.version),
        }
    }
}

fn file_arg(path: &Path) -> String {
    path.display().to_string()
}

async fn kubectl(
    kube: &TestKube,
    admin: &kube::Client,
    files: &KubectlFiles,
    count: usize,
) -> Lifecycle {
    let create = timed(kube, true, files.run(files.apply_args(&files.all, false))).await;
    assert_eq!(
        present(admin).await,
        names(0..count),
        "kubectl created them"
    );
    let update = timed(kube, true, files.run(files.apply_args(&files.half, true))).await;
    assert_eq!(
        present(admin).await,
        names(0..kept(count)),
        "kubectl pruned the other half"
    );
    let delete = timed(
        kube,
        true,
        files.run(vec!["delete".into(), "-f".into(), file_arg(&files.half)]),
    )
    .await;
    assert_eq!(
        present(admin).await,
        Vec::<String>::new(),
        "kubectl deleted them"
    );
    if matches!(files.prune, Prune::ApplySet) {
        // The set's parent, which only kubectl's pruning needs (not timed).
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(admin.clone(), NAMESPACE);
        secrets
            .delete(APPLYSET, &Default::default())
            .await
            .expect("delete the ApplySet's parent");
    }
    Lifecycle {
        create,
        update,
        delete,
    }
}

/// An in-process stack service with the built-in Kubernetes extension and default settings, its store in `dir`
/// with the admin kubeconfig in the vault.
async fn service(dir: &Path, kube: &TestKube, answers: Answers) -> StackService {
    let store = common::store_with_group_and_vault(dir).await;
    set_secret(&store, KUBECONFIG_SECRET, kube.kubeconfig()).await;
    let mut registry = Registry::new();
    registry.register(RegisteredExtension::new(
        cairn_ext_kubernetes::NAME,
        cairn_ext_kubernetes::VERSION,
        Arc::new(Counting {
            inner: Box::new(cairn_ext_kubernetes::in_process_transport()),
            answers,
        }),
    ));
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        HostSettings::default(),
        "http://localhost/cairn-bench",
    ));
    let engine = Engine::new(
        store.clone(),
        host.clone(),
        Providers::empty(),
        EngineSettings::default(),
    )
    .expect("engine");
    StackService::new(
        engine,
        store,
        host,
        Providers::empty(),
        StackServiceSettings::default(),
    )
}

/// The stack: config maps `0..count`, the extension's kubeconfig from the Key Vault.
fn stack(count: usize) -> DeploymentStack {
    let mut resources = serde_json::Map::new();
    for i in 0..count {
        let mut properties = manifest(i);
        if let Value::Object(properties) = &mut properties {
            properties.remove("apiVersion");
            properties.remove("kind");
        }
        resources.insert(
            format!("cm{i}"),
            json!({ "extension": "k8s", "type": "core/ConfigMap", "apiVersion": "v1",
                    "properties": properties }),
        );
    }
    serde_json::from_value(json!({
        "properties": {
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.2-experimental",
                "contentVersion": "1.0.0.0",
                "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0", "config": {
                    "namespace": { "type": "string" }, "kubeConfig": { "type": "secureString" } } } },
                "resources": resources
            },
            "extensionConfigs": { "k8s": {
                "namespace": { "value": NAMESPACE },
                "auth": { "kubeConfig": { "keyVaultReference": {
                    "keyVault": { "id": VAULT }, "secretName": KUBECONFIG_SECRET } } }
            } },
            "actionOnUnmanage": { "resources": "delete" },
            "denySettings": { "mode": "none" }
        }
    }))
    .expect("a stack body")
}

/// Polls the stack every 5 ms until it settles (`Some(state)`) or is gone (`None`).
async fn settle(service: &StackService) -> Option<Value> {
    loop {
        match service.get(RG, STACK).await {
            Ok(stack) => {
                let value = serde_json::to_value(&stack).expect("a stack");
                let state = value["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or("");
                if matches!(state, "succeeded" | "failed" | "canceled") {
                    return Some(value);
                }
            }
            Err(error) if error.status() == 404 => return None,
            Err(error) => panic!("get: {error:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn put(service: &StackService, body: DeploymentStack) {
    service
        .create_or_update(RG, STACK, body, None)
        .await
        .expect("the stack write is accepted");
    let settled = settle(service).await.expect("the stack exists");
    assert_eq!(
        settled["properties"]["provisioningState"], "succeeded",
        "{settled:#}"
    );
}

/// The cairn lifecycle and the extension's answers in each phase.
async fn cairn(kube: &TestKube, admin: &kube::Client, count: usize) -> (Lifecycle, [String; 3]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let answers = Answers::default();
    let service = service(dir.path(), kube, answers.clone()).await;

    let create = timed(kube, false, put(&service, stack(count))).await;
    let create_answers = take(&answers);
    assert_eq!(
        present(admin).await,
        names(0..count),
        "the stack created them"
    );

    let update = timed(kube, false, put(&service, stack(kept(count)))).await;
    let update_answers = take(&answers);
    assert_eq!(
        present(admin).await,
        names(0..kept(count)),
        "the update deleted the other half"
    );

    let options = StackDeleteOptions::from_query(&Query::parse("unmanageAction.Resources=delete"))
        .expect("options");
    let delete = timed(kube, false, async {
        service
            .delete(RG, STACK, options, None)
            .await
            .expect("the delete is accepted");
        if let Some(failed) = settle(&service).await {
            panic!("the stack delete did not finish: {failed:#}");
        }
    })
    .await;
    let delete_answers = take(&answers);
    assert_eq!(
        present(admin).await,
        Vec::<String>::new(),
        "the stack deleted them"
    );
    (
        Lifecycle {
            create,
            update,
            delete,
        },
        [create_answers, update_answers, delete_answers],
    )
}

/// One phase of a lifecycle.
type Pick = fn(&Lifecycle) -> Phase;

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn seconds(duration: Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}

fn main() {
    // `RUST_LOG=warn` (or finer) shows what the stack service and the extension log.
    if let Ok(filter) = std::env::var("RUST_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(bench(options));
}

async fn bench(options: Options) {
    let count = options.count;
    let kube = tokio::task::spawn_blocking(TestKube::start)
        .await
        .expect("the control plane");
    let admin = admin_client(&kube).await;
    let server = admin
        .apiserver_version()
        .await
        .map(|info| info.git_version)
        .unwrap_or_else(|_| "unknown".into());
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))
                .expect("a namespace"),
        )
        .await
        .expect("create the namespace");
    let manifests = tempfile::tempdir().expect("temp dir");
    let files = KubectlFiles::write(manifests.path(), &kube, count);
    println!(
        "kube-apiserver {server} on 127.0.0.1:{}, {}; {count} config maps, update keeps {}, {} runs",
        kube.port(),
        files.describe(),
        kept(count),
        options.runs
    );

    let mut kubectl_runs = Vec::new();
    let mut cairn_runs = Vec::new();
    for round in 1..=options.runs {
        let k = kubectl(&kube, &admin, &files, count).await;
        println!(
            "run {round} kubectl: create {}\n  update {}\n  delete {}",
            k.create.describe(),
            k.update.describe(),
            k.delete.describe()
        );
        let (c, answers) = cairn(&kube, &admin, count).await;
        println!(
            "run {round} cairn: create {}\n  update {}\n  delete {}",
            c.create.describe(),
            c.update.describe(),
            c.delete.describe()
        );
        for (phase, answers) in ["create", "update", "delete"].iter().zip(&answers) {
            println!("  {phase} calls: {answers}");
        }
        kubectl_runs.push(k);
        cairn_runs.push(c);
    }

    let of = |runs: &[Lifecycle], pick: Pick, part: fn(&Phase) -> Duration| {
        median(runs.iter().map(|run| part(&pick(run))).collect())
    };
    let phases: [(&str, Pick); 3] = [
        ("create", |l| l.create),
        ("update (remove half)", |l| l.update),
        ("delete", |l| l.delete),
    ];
    println!("median of {} runs, {count} config maps:", options.runs);
    println!(
        "  {:<22} {:>10} {:>10} {:>14}   {:<34} CPU kubectl: apiserver/etcd/kubectl",
        "phase", "cairn", "kubectl", "cairn/kubectl", "CPU cairn: apiserver/etcd/cairn",
    );
    for (label, pick) in phases {
        let cairn_wall = of(&cairn_runs, pick, |p| p.wall);
        let kubectl_wall = of(&kubectl_runs, pick, |p| p.wall);
        let cpu = |runs: &[Lifecycle]| {
            format!(
                "{:.2} / {:.2} / {:.2} s",
                of(runs, pick, |p| p.apiserver).as_secs_f64(),
                of(runs, pick, |p| p.etcd).as_secs_f64(),
                of(runs, pick, |p| p.tool).as_secs_f64()
            )
        };
        println!(
            "  {label:<22} {:>10} {:>10} {:>14}   {:<34} {}",
            seconds(cairn_wall),
            seconds(kubectl_wall),
            ratio(cairn_wall, kubectl_wall),
            cpu(&cairn_runs),
            cpu(&kubectl_runs)
        );
    }
}

//! Stack diff and delete-driver benchmarks.
//!
//! `cargo bench -p cairn-stacks --bench diff`:
//! 1. Diff of a 10,000-resource stack (8,000 ARM resources in 25 resource groups with child resources and
//!    dependency chains, 2,000 Kubernetes resources with a shared config whose credentials come from an AKS
//!    cluster), 10 % removed and 10 % added, including building the delete plan. Median of 30 runs.
//! 2. Deleting 800 resources (dependency depth 10) through [`DeleteRun`] with a fake async deleter that takes
//!    20 ms per delete, on tokio, against the depth-bound ideal (10 × 20 ms).
//! 3. Collecting the managed set of a deployment tree where dependencies meet large sets: a module of 5,000 ARM
//!    resources that 10 resources were deployed after, and a copy loop of 5,000 extension resources that one
//!    extension resource was deployed after (named by type and symbolic name). Median of 10 runs.
//!
//! Under `cargo test` (no `--bench` argument) both run once at a small size as a smoke test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_arm::ResourceId;
use cairn_arm::models::stack::ActionOnUnmanage;
use cairn_stacks::directive::PersistedConfig;
use cairn_stacks::{
    DeleteOutcome, DeletePlan, DeleteRun, DeploymentSnapshot, ExtensionIdentity, ManagedResource,
    ManagedSet, Ownership, ResourceKey, RunSettings, Step, UnmanageBucket, collect_managed_set,
    diff,
};
use serde_json::json;

const SUBSCRIPTION: &str = "/subscriptions/00000000-0000-0000-0000-000000000001";

fn group_id(group: usize) -> String {
    format!("{SUBSCRIPTION}/resourceGroups/rg-{group:03}")
}

fn aks_id() -> String {
    format!(
        "{}/providers/Microsoft.ContainerService/managedClusters/aks",
        group_id(999)
    )
}

/// The ARM resources of one resource group: the group, `per_group / 2` virtual networks each depending on
/// the previous one (chains of 8), and a subnet in each.
fn arm_group(group: usize, per_group: usize, salt: &str) -> Vec<ManagedResource> {
    let mut out = Vec::with_capacity(per_group);
    let mut group_resource = ManagedResource::arm(ResourceId::parse(&group_id(group)).expect("id"));
    group_resource.api_version = Some("2024-03-01".into());
    out.push(group_resource);
    let mut previous: Option<ResourceKey> = None;
    let mut n: usize = 0;
    while out.len() < per_group {
        let vnet = format!(
            "{}/providers/Microsoft.Network/virtualNetworks/vnet-{salt}{n:04}",
            group_id(group)
        );
        let mut parent = ManagedResource::arm(ResourceId::parse(&vnet).expect("id"));
        parent.api_version = Some("2024-05-01".into());
        parent.symbolic_name_path = vec![format!("vnet{n}")];
        if !n.is_multiple_of(8)
            && let Some(previous) = &previous
        {
            parent.depends_on.push(previous.clone());
        }
        previous = Some(parent.key().clone());
        let mut child = ManagedResource::arm(
            ResourceId::parse(&format!("{vnet}/subnets/default")).expect("id"),
        );
        child.api_version = Some("2024-05-01".into());
        child.depends_on.push(parent.key().clone());
        out.push(parent);
        if out.len() < per_group {
            out.push(child);
        }
        n += 1;
    }
    out
}

fn kubernetes_config() -> Arc<PersistedConfig> {
    Arc::new(
        PersistedConfig::from_wire(
            "k8s",
            &json!({"namespace": {"value": "default"},
                    "kubeConfig": {"apiReference": {"method": "POST", "armResourceId": aks_id(), "apiVersion": "2024-02-01",
                        "action": "listClusterAdminCredential", "responseValuePath": "kubeconfigs[0].value"}}}),
        )
        .expect("config"),
    )
}

fn config_map(n: usize, salt: &str, config: &Arc<PersistedConfig>) -> ManagedResource {
    let mut resource = ManagedResource::extensible(
        ExtensionIdentity {
            name: "Kubernetes".into(),
            version: "1.0.0".into(),
            config_id: Some("3A7F".into()),
        },
        "core/ConfigMap",
        json!({"metadata": {"namespace": format!("ns-{}", n % 4), "name": format!("cm-{salt}{n:05}")}}),
    );
    resource.api_version = Some("v1".into());
    resource.set_config(config.clone());
    resource
}

/// The previous and next sets: `size` resources each (4/5 ARM in 25 groups, 1/5 Kubernetes); the next set
/// drops two whole resource groups plus every tenth Kubernetes resource (10 % in all) and adds as many new
/// resources.
fn stack_sets(size: usize) -> (ManagedSet, ManagedSet) {
    let groups = 25;
    let per_group = size * 4 / 5 / groups;
    let kubernetes = size - groups * per_group;
    let config = kubernetes_config();
    let mut previous = Vec::with_capacity(size);
    for group in 0..groups {
        previous.extend(arm_group(group, per_group, ""));
    }
    for n in 0..kubernetes {
        previous.push(config_map(n, "", &config));
    }
    let removed_groups = 2;
    let removed_kubernetes = size / 10 - removed_groups * per_group;
    let mut next: Vec<ManagedResource> = Vec::with_capacity(size);
    let mut dropped_kubernetes = 0;
    for resource in &previous {
        let in_removed_group = resource
            .arm_id()
            .and_then(ResourceId::resource_group_name)
            .is_some_and(|rg| rg == "rg-000" || rg == "rg-001");
        let dropped = if resource.extension().is_some() && dropped_kubernetes < removed_kubernetes {
            let drop = next.len().is_multiple_of(9);
            dropped_kubernetes += usize::from(drop);
            drop
        } else {
            in_removed_group
        };
        if !dropped {
            next.push(resource.clone());
        }
    }
    let to_add = size - next.len();
    let mut added = arm_group(groups, per_group, "new");
    added.truncate(to_add);
    let mut n = 0;
    while added.len() < to_add {
        added.push(config_map(n, "new", &config));
        n += 1;
    }
    next.extend(added);
    (
        ManagedSet::from_resources(previous),
        ManagedSet::from_resources(next),
    )
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn bench_diff(size: usize, runs: usize) {
    let (previous, next) = stack_sets(size);
    let action = ActionOnUnmanage::from_cli_preset("deleteAll").expect("preset");
    let ownership = Ownership::new();
    let mut samples = Vec::with_capacity(runs);
    let mut diff_samples = Vec::with_capacity(runs);
    let mut last = None;
    let warm_up = if runs > 1 { 3 } else { 0 };
    for run in 0..runs + warm_up {
        let started = Instant::now();
        let result = diff::diff(
            &previous,
            &next,
            true,
            &action,
            &ownership,
            &cairn_stacks::ResourcePolicy::none(),
        )
        .expect("diff");
        let diffed = started.elapsed();
        let plan = result.delete_plan();
        let elapsed = started.elapsed();
        if run >= warm_up {
            samples.push(elapsed);
            diff_samples.push(diffed);
        }
        last = Some((result, plan));
    }
    let (result, plan) = last.expect("at least one run");
    assert_eq!(result.kept.len() + result.removed.len(), previous.len());
    assert_eq!(result.kept.len() + result.added.len(), next.len());
    assert_eq!(plan.len(), result.removed.len());
    assert_eq!(previous.len(), size);
    assert_eq!(next.len(), size);
    let removed_groups = result
        .removed
        .iter()
        .filter(|r| r.resource.bucket() == UnmanageBucket::ResourceGroups)
        .count();
    println!(
        "diff + delete plan, {size} resources ({} kept, {} added, {} removed incl. {removed_groups} resource groups; \
         plan {} waves, {} edges): median {:.2} ms (diff alone {:.2} ms), min {:.2} ms over {} runs",
        result.kept.len(),
        result.added.len(),
        result.removed.len(),
        plan.waves().len(),
        plan.edges().len(),
        median(samples.clone()).as_secs_f64() * 1e3,
        median(diff_samples).as_secs_f64() * 1e3,
        samples.iter().min().expect("samples").as_secs_f64() * 1e3,
        samples.len(),
    );
}

/// `levels` × `width` resources: each depends on one or two resources of the level before, so the longest
/// chain is `levels`.
fn layered_plan(levels: usize, width: usize) -> DeletePlan {
    let id = |level: usize, n: usize| {
        ResourceId::parse(&format!(
            "{}/providers/Microsoft.Web/sites/site-{level:02}-{n:03}",
            group_id(0)
        ))
        .expect("id")
    };
    let mut resources = Vec::with_capacity(levels * width);
    for level in 0..levels {
        for n in 0..width {
            let mut resource = ManagedResource::arm(id(level, n));
            if level > 0 {
                resource
                    .depends_on
                    .push(ResourceKey::arm(&id(level - 1, n)));
                resource
                    .depends_on
                    .push(ResourceKey::arm(&id(level - 1, (n * 7 + 3) % width)));
            }
            resources.push(resource);
        }
    }
    DeletePlan::build(resources)
}

/// Runs `plan` with a deleter that takes `latency` per delete; returns the wall time.
async fn drive(plan: DeletePlan, latency: Duration) -> (Duration, usize) {
    let mut run = DeleteRun::new(plan, RunSettings::default());
    let mut in_flight = tokio::task::JoinSet::new();
    let started = Instant::now();
    loop {
        match run.next_step() {
            Step::Delete(tasks) => {
                for task in tasks {
                    in_flight.spawn(async move {
                        tokio::time::sleep(latency).await;
                        (task.key, DeleteOutcome::Deleted)
                    });
                }
            }
            Step::Wait => {
                let (key, outcome) = in_flight
                    .join_next()
                    .await
                    .expect("a delete in flight")
                    .expect("task");
                run.record(&key, outcome).expect("in flight");
            }
            Step::Retry { .. } => {}
            Step::Done => break,
        }
    }
    let elapsed = started.elapsed();
    let report = run.into_report().expect("done");
    assert!(report.failed.is_empty());
    (elapsed, report.deleted.len())
}

fn bench_delete(levels: usize, width: usize, latency: Duration, runs: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let plan = layered_plan(levels, width);
        assert_eq!(plan.waves().len(), levels);
        let (elapsed, deleted) = runtime.block_on(drive(plan, latency));
        assert_eq!(deleted, levels * width);
        samples.push(elapsed);
    }
    let ideal = latency * levels as u32;
    let median = median(samples);
    println!(
        "delete {} resources, depth {levels}, {} ms per delete: median {:.1} ms over {runs} runs; ideal {:.1} ms; \
         ratio {:.3}x",
        levels * width,
        latency.as_millis(),
        median.as_secs_f64() * 1e3,
        ideal.as_secs_f64() * 1e3,
        median.as_secs_f64() / ideal.as_secs_f64(),
    );
}

/// A deployment tree: `after_module` resources deployed after a module of `size` ARM resources, and one extension
/// resource deployed after a copy loop of `size` extension resources.
fn tree_with_large_dependencies(size: usize, after_module: usize) -> DeploymentSnapshot {
    let group = group_id(1);
    let module_id = format!("{group}/providers/Microsoft.Resources/deployments/storage");
    let account =
        |n: usize| format!("{group}/providers/Microsoft.Storage/storageAccounts/sa{n:05}");
    let app = |n: usize| format!("{group}/providers/Microsoft.Web/sites/app{n:03}");
    let extension =
        json!({"alias": "pg", "name": "PostgreSql", "version": "1.0.0", "configId": "P1"});
    let role = |n: usize| {
        json!({"extension": extension, "resourceType": "PostgreSql/roles", "apiVersion": "v1",
               "identifiers": {"name": format!("role{n:05}")}})
    };
    let grant = json!({"extension": extension, "resourceType": "PostgreSql/grants", "apiVersion": "v1",
                       "identifiers": {"name": "grant"}});
    let mut outputs: Vec<serde_json::Value> =
        (0..after_module).map(|n| json!({"id": app(n)})).collect();
    outputs.push(json!({"id": module_id}));
    outputs.extend((0..size).map(role));
    outputs.push(grant.clone());
    let mut dependencies: Vec<serde_json::Value> = (0..after_module)
        .map(|n| json!({"id": app(n), "dependsOn": [{"id": module_id}]}))
        .collect();
    dependencies.push(json!({"resourceType": "PostgreSql/grants", "resourceName": "grant",
                             "dependsOn": [{"resourceType": "PostgreSql/roles", "resourceName": "roles"}]}));
    let operation = |symbol: &str, target: &serde_json::Value| {
        let mut target = target.clone();
        target["symbolicName"] = json!(symbol);
        json!({"properties": {"provisioningOperation": "Create", "provisioningState": "Succeeded",
                              "targetResource": target}})
    };
    let mut operations: Vec<serde_json::Value> =
        (0..size).map(|n| operation("roles", &role(n))).collect();
    operations.push(operation("grant", &grant));
    DeploymentSnapshot {
        deployment: serde_json::from_value(json!({
            "id": format!("{group}/providers/Microsoft.Resources/deployments/root"),
            "properties": {"provisioningState": "Succeeded", "outputResources": outputs,
                           "dependencies": dependencies}
        }))
        .expect("a deployment"),
        operations: serde_json::from_value(json!(operations)).expect("operations"),
        extra_dependencies: Vec::new(),
        nested: vec![DeploymentSnapshot {
            deployment: serde_json::from_value(json!({
                "id": module_id,
                "properties": {"provisioningState": "Succeeded",
                               "outputResources": (0..size).map(|n| json!({"id": account(n)})).collect::<Vec<_>>()}
            }))
            .expect("a module"),
            operations: Vec::new(),
            extra_dependencies: Vec::new(),
            nested: Vec::new(),
        }],
    }
}

fn bench_collect(size: usize, after_module: usize, runs: usize) {
    let mut times = Vec::with_capacity(runs);
    let mut edges = 0;
    for _ in 0..runs {
        let tree = tree_with_large_dependencies(size, after_module);
        let started = Instant::now();
        let collected = collect_managed_set(tree);
        times.push(started.elapsed());
        edges = collected
            .resources
            .iter()
            .map(|r| r.depends_on.len())
            .sum::<usize>();
        assert_eq!(collected.resources.len(), 2 * size + after_module + 1);
        assert_eq!(edges, (after_module + 1) * size);
    }
    times.sort();
    println!(
        "collect of {} resources ({after_module} after a module of {size}, one after a copy loop of {size}; \
         {edges} dependency edges): median {:.1} ms, min {:.1} ms over {runs} runs",
        2 * size + after_module + 1,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
    );
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    if benchmarking {
        bench_diff(10_000, 30);
        bench_delete(10, 80, Duration::from_millis(20), 7);
        bench_collect(5_000, 10, 10);
    } else {
        bench_diff(1_000, 1);
        bench_delete(3, 10, Duration::from_millis(1), 1);
        bench_collect(100, 3, 1);
    }
}

//! Property tests: the diff is a partition; the delete plan respects every edge it keeps (and only breaks
//! dependency edges); a delete run, whatever the outcomes and their order, settles every resource exactly once
//! in deleted, detached or failed, never starts a resource before those it must follow, and never deletes a
//! credential source before the extensible resources that need it.

use std::collections::{HashMap, HashSet};

use cairn_arm::ResourceId;
use cairn_arm::models::stack::{ActionOnUnmanage, ResourceStatusMode, UnmanageAction};
use cairn_stacks::directive::ValuePath;
use cairn_stacks::{
    DeleteOutcome, DeletePlan, DeleteRun, EdgeKind, ExtensionIdentity, ManagedResource, ManagedSet,
    Ownership, RemovalAction, ResourceKey, ResourcePolicy, RunSettings, StackClaim, Step,
    UnmanageBucket, WithoutDeleteSupport, diff, policy,
};
use proptest::prelude::*;
use serde_json::json;

const RG0: &str = "/subscriptions/s/resourceGroups/rg0";
const RG1: &str = "/subscriptions/s/resourceGroups/rg1";

/// A pool of ARM IDs with containment between them: groups, sites, slots (children), locks (extension
/// resources), a cluster.
fn arm_pool() -> Vec<String> {
    let mut ids = vec![RG0.to_owned(), RG1.to_owned()];
    for rg in [RG0, RG1] {
        for site in ["a", "b", "c"] {
            let site_id = format!("{rg}/providers/Microsoft.Web/sites/{site}");
            ids.push(format!("{site_id}/slots/staging"));
            ids.push(format!(
                "{site_id}/providers/Microsoft.Authorization/locks/nodelete"
            ));
            ids.push(site_id);
        }
    }
    ids.push(format!(
        "{RG1}/providers/Microsoft.ContainerService/managedClusters/aks"
    ));
    ids.push("/providers/Microsoft.Management/managementGroups/mg".to_owned());
    ids
}

const EXTENSIBLE: usize = 6;

fn extensible(n: usize) -> ManagedResource {
    let (resource_type, metadata) = match n {
        0 => ("core/Namespace", json!({"name": "app"})),
        1 => (
            "apiextensions.k8s.io/CustomResourceDefinition",
            json!({"name": "widgets.example.com"}),
        ),
        2 => (
            "example.com/Widget",
            json!({"name": "w", "namespace": "app"}),
        ),
        _ => (
            "core/ConfigMap",
            json!({"name": format!("cm{n}"), "namespace": "app"}),
        ),
    };
    ManagedResource::extensible(
        ExtensionIdentity {
            name: "Kubernetes".into(),
            version: "1.0.0".into(),
            config_id: Some("C".into()),
        },
        resource_type,
        json!({ "metadata": metadata }),
    )
}

/// Resource `index` of the universe: the ARM pool, then the extensible resources.
fn universe(index: usize) -> ManagedResource {
    let pool = arm_pool();
    match pool.get(index) {
        Some(id) => ManagedResource::arm(ResourceId::parse(id).expect("pool id")),
        None => extensible(index - pool.len()),
    }
}

fn universe_size() -> usize {
    arm_pool().len() + EXTENSIBLE
}

/// A resource of the universe with random edges to other universe resources.
#[derive(Clone, Debug)]
struct Spec {
    index: usize,
    depends_on: Vec<usize>,
    credential_sources: Vec<usize>,
    delete_failed: bool,
}

fn build(spec: &Spec) -> ManagedResource {
    let mut resource = universe(spec.index);
    resource.depends_on = spec
        .depends_on
        .iter()
        .map(|&i| universe(i).key().clone())
        .collect();
    if resource.extension().is_some() {
        let pool = arm_pool();
        resource.credential_sources = spec
            .credential_sources
            .iter()
            .filter_map(|&i| pool.get(i % pool.len()))
            .map(|id| ResourceId::parse(id).expect("pool id"))
            .collect();
    }
    if spec.delete_failed {
        resource.status = ResourceStatusMode::DeleteFailed;
    }
    resource
}

fn specs() -> impl Strategy<Value = Vec<Spec>> {
    let size = universe_size();
    prop::collection::vec(
        (
            prop::collection::vec(0..size, 0..3),
            prop::collection::vec(0..size, 0..2),
            any::<bool>(),
            any::<bool>(),
        ),
        size,
    )
    .prop_map(|entries| {
        entries
            .into_iter()
            .enumerate()
            .filter(|(_, (_, _, included, _))| *included)
            .map(
                |(index, (depends_on, credential_sources, _, delete_failed))| Spec {
                    index,
                    depends_on,
                    credential_sources,
                    delete_failed,
                },
            )
            .collect()
    })
}

fn action(resources: bool, groups: bool, management_groups: bool) -> ActionOnUnmanage {
    let pick = |delete| {
        if delete {
            UnmanageAction::Delete
        } else {
            UnmanageAction::Detach
        }
    };
    ActionOnUnmanage {
        resources: pick(resources),
        resource_groups: Some(pick(groups)),
        management_groups: Some(pick(management_groups)),
        resources_without_delete_support: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn diff_is_a_partition(
        previous in specs(),
        next in specs(),
        complete in any::<bool>(),
        actions in (any::<bool>(), any::<bool>(), any::<bool>()),
        shared in prop::collection::vec(any::<bool>(), universe_size()),
    ) {
        let previous = ManagedSet::from_resources(previous.iter().map(build));
        let next = ManagedSet::from_resources(next.iter().map(build));
        let mut ownership = Ownership::new();
        for (index, claimed) in shared.iter().enumerate() {
            if *claimed {
                ownership.claim(universe(index).key().clone(), StackClaim { stack_id: "other".into(), shared: true });
            }
        }
        let action = action(actions.0, actions.1, actions.2);
        let result = diff::diff(&previous, &next, complete, &action, &ownership, &ResourcePolicy::none()).expect("shared claims never conflict");
        let mut seen: HashMap<ResourceKey, &str> = HashMap::new();
        let lists = [
            ("kept", result.kept.iter().collect::<Vec<_>>()),
            ("added", result.added.iter().collect()),
            ("removed", result.removed.iter().map(|r| &r.resource).collect()),
        ];
        for (list, resources) in &lists {
            for resource in resources {
                prop_assert!(seen.insert(resource.key().clone(), list).is_none(), "{} twice", resource.key());
            }
        }
        let all: HashSet<&ResourceKey> = previous.iter().chain(&next).map(ManagedResource::key).collect();
        prop_assert_eq!(seen.len(), all.len());
        for key in all {
            let expected = match (previous.contains(key), next.contains(key)) {
                (true, true) => "kept",
                (false, true) => "added",
                (true, false) if complete => "removed",
                (true, false) => "kept",
                (false, false) => unreachable!(),
            };
            prop_assert_eq!(seen[key], expected, "{}", key);
        }
        for removal in &result.removed {
            let claimed = !ownership.claims(removal.resource.key()).is_empty();
            let delete = match removal.resource.bucket() {
                UnmanageBucket::Resources => actions.0,
                UnmanageBucket::ResourceGroups => actions.1,
                UnmanageBucket::ManagementGroups => actions.2,
            };
            let expected = if delete && !claimed { RemovalAction::Delete } else { RemovalAction::Detach };
            prop_assert_eq!(removal.action, expected);
        }
        prop_assert!(result.added.iter().chain(&result.kept).filter(|r| next.contains(r.key())).all(|r| r.status == ResourceStatusMode::Managed));
    }

    #[test]
    fn protected_resources_are_never_deleted_and_retained_ones_are_detached(
        previous in specs(),
        next in specs(),
        protect in prop::collection::vec(any::<bool>(), universe_size()),
        retain in prop::collection::vec(any::<bool>(), universe_size()),
    ) {
        let previous = ManagedSet::from_resources(previous.iter().map(build));
        let next = ManagedSet::from_resources(next.iter().map(build));
        let pick = |flags: &[bool]| -> Vec<String> {
            flags.iter().enumerate().filter(|(_, on)| **on).map(|(i, _)| policy::selector(universe(i).key())).collect()
        };
        let policy = ResourcePolicy::parse(&pick(&protect), &pick(&retain)).expect("selectors are patterns");
        let delete_all = action(true, true, true);
        let named = |flags: &[bool], key: &ResourceKey| (0..universe_size()).any(|i| flags[i] && universe(i).key() == key);
        let would_delete: Vec<&ResourceKey> = previous.iter().map(ManagedResource::key)
            .filter(|key| !next.contains(key) && !named(&retain, key)).collect();
        let blocked = would_delete.iter().any(|key| named(&protect, key));
        match diff::diff(&previous, &next, true, &delete_all, &Ownership::new(), &policy) {
            Ok(result) => {
                prop_assert!(!blocked);
                for removal in &result.removed {
                    let key = removal.resource.key();
                    let expected = if named(&retain, key) { RemovalAction::Detach } else { RemovalAction::Delete };
                    prop_assert_eq!(removal.action, expected, "{}", key);
                }
            }
            Err(diff::DiffError::ProtectedResources { resources }) => {
                prop_assert!(blocked);
                let expected: HashSet<String> = would_delete.iter().filter(|key| named(&protect, key)).map(|key| key.to_string()).collect();
                let reported: HashSet<String> = resources.into_iter().map(|r| r.resource).collect();
                prop_assert_eq!(reported, expected);
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    #[test]
    fn unshared_claims_on_added_resources_are_refused(
        previous in specs(),
        next in specs(),
        claimed in prop::collection::vec(any::<bool>(), universe_size()),
    ) {
        let previous = ManagedSet::from_resources(previous.iter().map(build));
        let next = ManagedSet::from_resources(next.iter().map(build));
        let mut ownership = Ownership::new();
        for (index, claim) in claimed.iter().enumerate() {
            if *claim {
                ownership.claim(universe(index).key().clone(), StackClaim { stack_id: "other".into(), shared: false });
            }
        }
        let conflicting = next.iter().any(|r| !previous.contains(r.key()) && !ownership.claims(r.key()).is_empty());
        let result = diff::diff(&previous, &next, true, &ActionOnUnmanage::detach_all(), &ownership, &ResourcePolicy::none());
        prop_assert_eq!(result.is_err(), conflicting);
    }

    #[test]
    fn delete_plan_respects_every_kept_edge(specs in specs()) {
        let plan = DeletePlan::build(specs.iter().map(build));
        let wave = |i: usize| plan.wave_of(i).expect("planned");
        for edge in plan.edges() {
            prop_assert!(wave(edge.before) < wave(edge.after), "{:?}", edge);
        }
        prop_assert!(plan.broken_edges().iter().all(|e| e.kind == EdgeKind::Dependency), "{:?}", plan.broken_edges());
        let broken: HashSet<(usize, usize)> = plan.broken_edges().iter().map(|e| (e.before, e.after)).collect();
        let resources = plan.resources();
        for (a, resource) in resources.iter().enumerate() {
            // Containment: every planned ancestor of an ARM resource comes later.
            if let Some(id) = resource.arm_id() {
                for (p, parent) in resources.iter().enumerate() {
                    if p != a && parent.arm_id().is_some_and(|pid| pid.contains(id)) {
                        prop_assert!(wave(a) < wave(p), "{} before its container {}", resource.key(), parent.key());
                    }
                }
            }
            // Dependencies: before what it depended on, unless the edge was broken or contradicts containment.
            for dependency in &resource.depends_on {
                let Some(b) = plan.index_of(dependency) else { continue };
                let contains = |x: usize, y: usize| match (resources[x].arm_id(), resources[y].arm_id()) {
                    (Some(outer), Some(inner)) => x != y && outer.contains(inner),
                    _ => false,
                };
                if a == b || contains(a, b) || contains(b, a) || broken.contains(&(a, b)) {
                    continue;
                }
                prop_assert!(wave(a) < wave(b), "{} before its dependency {}", resource.key(), dependency);
            }
            // Credentials: before the source and the source's planned containers.
            if resource.extension().is_some() {
                for source in &resource.credential_sources {
                    for (s, target) in resources.iter().enumerate() {
                        if target.arm_id().is_some_and(|tid| tid.contains(source)) {
                            prop_assert!(wave(a) < wave(s), "{} before credential source {}", resource.key(), target.key());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn acyclic_dependencies_break_nothing(
        edges in prop::collection::vec(prop::collection::vec(any::<prop::sample::Index>(), 0..3), 1..30),
    ) {
        // Sites in one group (no group planned): dependencies only on earlier sites form a DAG.
        let resources: Vec<ManagedResource> = (0..edges.len())
            .map(|i| {
                let id = format!("{RG0}/providers/Microsoft.Web/sites/s{i}");
                let mut resource = ManagedResource::arm(ResourceId::parse(&id).expect("id"));
                if i > 0 {
                    resource.depends_on = edges[i]
                        .iter()
                        .map(|pick| {
                            let j = pick.index(i);
                            ResourceKey::arm(&ResourceId::parse(&format!("{RG0}/providers/Microsoft.Web/sites/s{j}")).expect("id"))
                        })
                        .collect();
                }
                resource
            })
            .collect();
        let plan = DeletePlan::build(resources);
        prop_assert!(plan.broken_edges().is_empty());
    }

    #[test]
    fn every_resource_settles_exactly_once_and_order_holds(
        specs in specs(),
        outcomes in prop::collection::vec(0u8..6, 64),
        completion_order in prop::collection::vec(any::<prop::sample::Index>(), 256),
        max_rounds in 1u32..5,
        max_in_flight in prop::option::of(1usize..4),
        detach_unsupported in any::<bool>(),
    ) {
        let plan = DeletePlan::build(specs.iter().map(build));
        let keys: Vec<ResourceKey> = plan.resources().iter().map(|r| r.key().clone()).collect();
        let index: HashMap<ResourceKey, usize> = keys.iter().cloned().enumerate().map(|(i, k)| (k, i)).collect();
        let edges = plan.edges().to_vec();
        let settings = RunSettings {
            max_rounds,
            max_in_flight,
            without_delete_support: if detach_unsupported { WithoutDeleteSupport::Detach } else { WithoutDeleteSupport::Fail },
        };
        let mut run = DeleteRun::new(plan, settings);
        let mut in_flight: Vec<usize> = Vec::new();
        let mut attempts = vec![0u32; keys.len()];
        let mut recorded_in_round: Vec<Option<u32>> = vec![None; keys.len()];
        let mut settled_ok = vec![false; keys.len()];
        let mut handed_out_in_round: Vec<Option<u32>> = vec![None; keys.len()];
        let mut picks = completion_order.iter().cycle();
        let mut steps = 0;
        loop {
            steps += 1;
            prop_assert!(steps < 10_000, "the run must end");
            match run.next_step() {
                Step::Delete(tasks) => {
                    for task in tasks {
                        let node = index[&task.key];
                        attempts[node] += 1;
                        prop_assert_eq!(task.attempt, attempts[node]);
                        handed_out_in_round[node] = Some(task.round);
                        for edge in edges.iter().filter(|e| e.after == node) {
                            let before = edge.before;
                            prop_assert!(!in_flight.contains(&before), "{} started while {} is in flight", keys[node], keys[before]);
                            if handed_out_in_round[before] == Some(task.round) {
                                prop_assert_eq!(recorded_in_round[before], Some(task.round), "{} started before {} was recorded", &keys[node], &keys[before]);
                            }
                            if edge.kind == EdgeKind::Credentials {
                                prop_assert!(settled_ok[before], "{} started while {} (needing its credentials) remains", keys[node], keys[before]);
                            }
                        }
                        in_flight.push(node);
                    }
                }
                Step::Wait => {
                    prop_assert!(!in_flight.is_empty());
                    let pick = picks.next().expect("cycle").index(in_flight.len());
                    let node = in_flight.swap_remove(pick);
                    let outcome = match outcomes[(node * 7 + attempts[node] as usize) % outcomes.len()] {
                        0 => DeleteOutcome::Deleted,
                        1 => DeleteOutcome::NotFound,
                        2 => DeleteOutcome::DeploymentTargetNotFound,
                        3 => DeleteOutcome::Unsupported { message: None },
                        _ => DeleteOutcome::Failed(cairn_arm::ErrorDetail::new("Conflict", "busy")),
                    };
                    let ok = outcome.is_deleted() || (detach_unsupported && matches!(outcome, DeleteOutcome::Unsupported { .. }));
                    settled_ok[node] |= ok;
                    recorded_in_round[node] = Some(run.round());
                    run.record(&keys[node], outcome).expect("in flight");
                }
                Step::Retry { .. } => {}
                Step::Done => break,
            }
        }
        prop_assert!(in_flight.is_empty());
        let report = run.into_report().expect("done");
        let mut seen = HashSet::new();
        for resource in report.deleted.iter().chain(&report.detached).chain(report.failed.iter().map(|f| &f.resource)) {
            prop_assert!(seen.insert(resource.key().clone()), "{} settled twice", resource.key());
        }
        prop_assert_eq!(seen.len(), keys.len());
        prop_assert!(attempts.iter().all(|&a| a <= max_rounds));
        prop_assert!(report.rounds <= max_rounds);
        for failed in &report.failed {
            prop_assert_eq!(failed.error.code(), "DeletionFailed");
        }
    }

    #[test]
    fn value_paths_never_panic_and_round_trip(text in "\\PC{0,40}") {
        if let Ok(path) = ValuePath::parse(&text) {
            let formatted = path.to_string();
            prop_assert_eq!(ValuePath::parse(&formatted).expect("reparses"), path);
            let _ = ValuePath::parse(&formatted).expect("reparses").evaluate(&json!({"a": [1, {"b": null}]}));
        }
    }

    #[test]
    fn structured_value_paths_round_trip(steps in prop::collection::vec(prop_oneof![
        "[a-zA-Z_][a-zA-Z0-9_]{0,8}".prop_map(|s| s),
        "[ -~]{1,8}".prop_map(|s| s),
        (0usize..50).prop_map(|i| format!("#{i}")),
    ], 0..6)) {
        // Build a path from member names (any printable text) and indexes, format it, parse it back.
        let mut text = String::from("$");
        for step in &steps {
            match step.strip_prefix('#').and_then(|i| i.parse::<usize>().ok()) {
                Some(i) => text.push_str(&format!("[{i}]")),
                None => {
                    text.push_str("['");
                    for c in step.chars() {
                        if c == '\'' || c == '\\' { text.push('\\'); }
                        text.push(c);
                    }
                    text.push_str("']");
                }
            }
        }
        let path = ValuePath::parse(&text).expect("well-formed");
        prop_assert_eq!(path.steps().len(), steps.len());
        prop_assert_eq!(ValuePath::parse(&path.to_string()).expect("reparses"), path);
    }
}

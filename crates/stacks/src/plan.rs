//! Delete ordering: which of the resources to delete must go before which, as a graph and as waves.
//!
//! "X before Y" edges, among the resources being deleted:
//! - **Dependency** (reverse of deploy order): a resource is deleted before what it depended on. A
//!   dependency on a resource *inside* a container that is deleted also orders the resource before the
//!   container (deleting the container deletes the dependency with it).
//! - **Containment**: contents before containers — child resources before their parent, extension resources
//!   before the resource they extend, resources before their resource group (or subscription, management
//!   group). For Kubernetes resources (the only extension whose containment the identifiers reveal):
//!   namespaced objects before their `Namespace`, custom resources before their `CustomResourceDefinition`.
//! - **Credentials**: an extensible resource before the ARM resources its credentials come from (and their
//!   containers), since without them it can never be deleted.
//!
//! Deploy-time dependencies are create dependencies, not delete dependencies (REP 0006), so the order is a
//! best effort and [`crate::run`] still retries; only credential edges are strict there. A dependency edge
//! that contradicts containment (a container that depended on its own content) is dropped, and each remaining
//! cycle is broken by dropping one of its edges, a dependency edge when it has one (recorded in
//! [`DeletePlan::broken_edges`]). Only contrived inputs (e.g. two CRDs named into each other's API
//! group) make a cycle of containment or credential edges alone.

use std::collections::{HashMap, VecDeque};

use cairn_arm::ResourceId;
use serde_json::Value;

use crate::key::ResourceKey;
use crate::managed::{ManagedResource, ManagedSet, ManagedTarget};

/// Why one resource must be deleted before another. Ordered by strength: when two edges join the same pair,
/// the stronger kind is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// The later resource was deployed first (create dependency, reversed).
    Dependency,
    /// The later resource contains the earlier one.
    Containment,
    /// The earlier (extensible) resource's credentials come from the later one.
    Credentials,
}

/// An ordering constraint between two plan entries (indexes into [`DeletePlan::resources`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanEdge {
    pub before: usize,
    pub after: usize,
    pub kind: EdgeKind,
}

/// The resources to delete with their ordering constraints, layered into waves: a wave holds resources whose
/// predecessors are all in earlier waves. Deleting wave by wave respects every edge; [`crate::run::DeleteRun`]
/// does better, starting each resource as soon as its own predecessors are done.
#[derive(Clone, Debug, Default)]
pub struct DeletePlan {
    resources: Vec<ManagedResource>,
    edges: Vec<PlanEdge>,
    broken: Vec<PlanEdge>,
    waves: Vec<Vec<usize>>,
    wave_of: Vec<usize>,
    predecessors: Vec<Vec<(usize, EdgeKind)>>,
    successors: Vec<Vec<(usize, EdgeKind)>>,
}

impl DeletePlan {
    /// Orders `resources` (duplicate keys are merged).
    pub fn build(resources: impl IntoIterator<Item = ManagedResource>) -> Self {
        let resources = ManagedSet::from_resources(resources).into_vec();
        let edges = Graph::new(&resources).edges();
        let count = resources.len();
        let (kept, broken, wave_of) = layer(count, edges);
        let wave_count = wave_of.iter().copied().max().map_or(0, |w| w + 1);
        let mut waves = vec![Vec::new(); wave_count];
        for (index, &wave) in wave_of.iter().enumerate() {
            waves[wave].push(index);
        }
        let mut predecessors = vec![Vec::new(); count];
        let mut successors = vec![Vec::new(); count];
        for edge in &kept {
            predecessors[edge.after].push((edge.before, edge.kind));
            successors[edge.before].push((edge.after, edge.kind));
        }
        Self {
            resources,
            edges: kept,
            broken,
            waves,
            wave_of,
            predecessors,
            successors,
        }
    }

    /// The resources, in input order (de-duplicated).
    pub fn resources(&self) -> &[ManagedResource] {
        &self.resources
    }

    pub fn len(&self) -> usize {
        self.resources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// The waves, as indexes into [`DeletePlan::resources`].
    pub fn waves(&self) -> &[Vec<usize>] {
        &self.waves
    }

    /// The wave of resource `index`.
    pub fn wave_of(&self, index: usize) -> Option<usize> {
        self.wave_of.get(index).copied()
    }

    /// The index of the resource with `key`.
    pub fn index_of(&self, key: &ResourceKey) -> Option<usize> {
        self.resources.iter().position(|r| r.key() == key)
    }

    /// The edges the order respects.
    pub fn edges(&self) -> &[PlanEdge] {
        &self.edges
    }

    /// Edges dropped to break cycles; the order does not respect them.
    pub fn broken_edges(&self) -> &[PlanEdge] {
        &self.broken
    }

    pub(crate) fn predecessors(&self, index: usize) -> &[(usize, EdgeKind)] {
        &self.predecessors[index]
    }

    pub(crate) fn successors(&self, index: usize) -> &[(usize, EdgeKind)] {
        &self.successors[index]
    }
}

/// Builds the edges among the plan's resources.
struct Graph<'r> {
    resources: &'r [ManagedResource],
    index: HashMap<&'r ResourceKey, usize>,
    /// For each resource, the plan entries that contain it (nearest first).
    containers: Vec<Vec<usize>>,
    edges: HashMap<(usize, usize), EdgeKind>,
}

impl<'r> Graph<'r> {
    fn new(resources: &'r [ManagedResource]) -> Self {
        let index: HashMap<&ResourceKey, usize> = resources
            .iter()
            .enumerate()
            .map(|(i, r)| (r.key(), i))
            .collect();
        let mut graph = Self {
            resources,
            index,
            containers: Vec::new(),
            edges: HashMap::new(),
        };
        graph.containers = resources
            .iter()
            .map(|r| match r.arm_id() {
                Some(id) => graph.containers_of(id),
                None => Vec::new(),
            })
            .collect();
        graph
    }

    /// The plan entries that are proper ancestors of `id` (its parent, scope, resource group, ...), nearest first.
    fn containers_of(&self, id: &ResourceId) -> Vec<usize> {
        let mut out = Vec::new();
        let mut current = id.parent();
        while let Some(ancestor) = current {
            if let Some(&at) = self.index.get(&ResourceKey::arm(&ancestor)) {
                out.push(at);
            }
            current = ancestor.parent();
        }
        out
    }

    /// The plan entries deleting which removes `id`: itself (if planned) and its containers.
    fn self_and_containers(&self, id: &ResourceId) -> Vec<usize> {
        let mut out = Vec::new();
        if let Some(&at) = self.index.get(&ResourceKey::arm(id)) {
            out.push(at);
        }
        out.extend(self.containers_of(id));
        out
    }

    fn add(&mut self, before: usize, after: usize, kind: EdgeKind) {
        if before == after {
            return;
        }
        let entry = self.edges.entry((before, after)).or_insert(kind);
        *entry = (*entry).max(kind);
    }

    fn edges(mut self) -> Vec<PlanEdge> {
        let resources = self.resources;
        for (index, resource) in resources.iter().enumerate() {
            if let Some(&nearest) = self.containers[index].first() {
                self.add(index, nearest, EdgeKind::Containment);
            }
            for dependency in &resource.depends_on {
                let targets = match dependency {
                    ResourceKey::Arm(key) => self.self_and_containers(key.id()),
                    ResourceKey::Extensible(_) => {
                        self.index.get(dependency).copied().into_iter().collect()
                    }
                };
                for target in targets {
                    let contains_target = self.containers[target].contains(&index);
                    let contained_by_target = self.containers[index].contains(&target);
                    // A container never waits for its content; and "before my own container" is
                    // already implied by containment.
                    if !contains_target && !contained_by_target {
                        self.add(index, target, EdgeKind::Dependency);
                    }
                }
            }
            if resource.extension().is_some() {
                for source in &resource.credential_sources {
                    for target in self.self_and_containers(source) {
                        self.add(index, target, EdgeKind::Credentials);
                    }
                }
            }
        }
        self.kubernetes_containment();
        let mut edges: Vec<PlanEdge> = self
            .edges
            .into_iter()
            .map(|((before, after), kind)| PlanEdge {
                before,
                after,
                kind,
            })
            .collect();
        edges.sort_by_key(|e| (e.after, e.before));
        edges
    }

    /// Namespaced objects before their Namespace; custom resources before their CRD (deleting either
    /// container deletes the content).
    fn kubernetes_containment(&mut self) {
        struct K8s<'v> {
            index: usize,
            kind: &'v str,
            group: &'v str,
            name: Option<&'v str>,
            namespace: Option<&'v str>,
        }
        let mut objects: Vec<(usize, K8s<'_>)> = Vec::new();
        let mut planes: Vec<&ResourceKey> = Vec::new();
        let resources = self.resources;
        for (index, resource) in resources.iter().enumerate() {
            let ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } = resource.target()
            else {
                continue;
            };
            if !extension.name.eq_ignore_ascii_case("Kubernetes") {
                continue;
            }
            let ResourceKey::Extensible(key) = resource.key() else {
                continue;
            };
            let plane = match planes.iter().position(|p| match p {
                ResourceKey::Extensible(other) => other.same_control_plane(key),
                ResourceKey::Arm(_) => false,
            }) {
                Some(plane) => plane,
                None => {
                    planes.push(resource.key());
                    planes.len() - 1
                }
            };
            let (group, kind) = resource_type
                .rsplit_once('/')
                .unwrap_or(("", resource_type));
            let metadata = |field: &str| {
                identifiers
                    .get("metadata")
                    .and_then(|m| m.get(field))
                    .and_then(Value::as_str)
            };
            objects.push((
                plane,
                K8s {
                    index,
                    kind,
                    group,
                    name: metadata("name"),
                    namespace: metadata("namespace"),
                },
            ));
        }
        let is_core = |group: &str| group.is_empty() || group.eq_ignore_ascii_case("core");
        let mut edges = Vec::new();
        for (plane, container) in &objects {
            let is_namespace =
                container.kind.eq_ignore_ascii_case("Namespace") && is_core(container.group);
            let is_crd = container
                .kind
                .eq_ignore_ascii_case("CustomResourceDefinition");
            if !is_namespace && !is_crd {
                continue;
            }
            let Some(name) = container.name else {
                continue;
            };
            for (other_plane, content) in &objects {
                if other_plane != plane || content.index == container.index {
                    continue;
                }
                let contained = if is_namespace {
                    content.namespace == Some(name)
                } else {
                    // A CRD is named `<plural>.<group>`.
                    !content.group.is_empty()
                        && name.len() > content.group.len()
                        && name.ends_with(content.group)
                        && name.as_bytes()[name.len() - content.group.len() - 1] == b'.'
                };
                if contained {
                    edges.push((content.index, container.index));
                }
            }
        }
        for (before, after) in edges {
            self.add(before, after, EdgeKind::Containment);
        }
    }
}

/// Kahn's algorithm with longest-path layering. When stuck on a cycle, drops one edge of it (a dependency
/// edge when the cycle has one) and carries on. Returns (kept edges, broken edges, wave of each node).
fn layer(count: usize, edges: Vec<PlanEdge>) -> (Vec<PlanEdge>, Vec<PlanEdge>, Vec<usize>) {
    let mut incoming: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (at, edge) in edges.iter().enumerate() {
        incoming[edge.after].push(at);
        outgoing[edge.before].push(at);
    }
    let mut unmet: Vec<usize> = incoming.iter().map(Vec::len).collect();
    let mut broken = vec![false; edges.len()];
    let mut done = vec![false; count];
    let mut wave = vec![0usize; count];
    let mut queue: VecDeque<usize> = (0..count).filter(|&i| unmet[i] == 0).collect();
    let mut processed = 0;
    loop {
        while let Some(node) = queue.pop_front() {
            done[node] = true;
            processed += 1;
            for &at in &outgoing[node] {
                if broken[at] {
                    continue;
                }
                let next = edges[at].after;
                wave[next] = wave[next].max(wave[node] + 1);
                unmet[next] -= 1;
                if unmet[next] == 0 {
                    queue.push_back(next);
                }
            }
        }
        if processed == count {
            break;
        }
        // Stuck: every remaining node waits on another remaining node, so walking waiting-on edges backwards
        // from any of them must come round to a node already seen. Break one edge of that cycle, a dependency
        // edge if it has one, and carry on.
        let Some(start) = (0..count).find(|&i| !done[i]) else {
            break;
        };
        let mut path: Vec<usize> = Vec::new();
        let mut seen_at: HashMap<usize, usize> = HashMap::new();
        let mut node = start;
        let cycle = loop {
            if let Some(&at) = seen_at.get(&node) {
                break &path[at..];
            }
            seen_at.insert(node, path.len());
            let waiting_on = incoming[node]
                .iter()
                .copied()
                .find(|&at| !broken[at] && !done[edges[at].before]);
            match waiting_on {
                Some(at) => {
                    path.push(at);
                    node = edges[at].before;
                }
                // Cannot happen (a stuck node waits on an unfinished one); stop rather than loop.
                None => break &path[path.len()..],
            }
        };
        let Some(at) = cycle
            .iter()
            .copied()
            .find(|&at| edges[at].kind == EdgeKind::Dependency)
            .or_else(|| cycle.first().copied())
        else {
            break;
        };
        broken[at] = true;
        let node = edges[at].after;
        unmet[node] -= 1;
        if unmet[node] == 0 {
            queue.push_back(node);
        }
    }
    let mut kept = Vec::with_capacity(edges.len());
    let mut dropped = Vec::new();
    for (at, edge) in edges.into_iter().enumerate() {
        if broken[at] {
            dropped.push(edge);
        } else {
            kept.push(edge);
        }
    }
    (kept, dropped, wave)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directive::PersistedConfig;
    use crate::managed::ExtensionIdentity;
    use serde_json::json;
    use std::sync::Arc;

    const RG: &str = "/subscriptions/s/resourceGroups/rg";
    const AKS: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks";

    fn arm(id: &str) -> ManagedResource {
        ManagedResource::arm(ResourceId::parse(id).unwrap())
    }

    fn key(id: &str) -> ResourceKey {
        ResourceKey::arm(&ResourceId::parse(id).unwrap())
    }

    fn k8s(resource_type: &str, namespace: Option<&str>, name: &str) -> ManagedResource {
        let mut metadata = json!({"name": name});
        if let Some(namespace) = namespace {
            metadata["namespace"] = json!(namespace);
        }
        ManagedResource::extensible(
            ExtensionIdentity {
                name: "Kubernetes".into(),
                version: "1.0.0".into(),
                config_id: Some("C".into()),
            },
            resource_type,
            json!({"metadata": metadata}),
        )
    }

    /// The wave of each resource, by a short label.
    fn waves(plan: &DeletePlan, label: impl Fn(&ManagedResource) -> String) -> Vec<Vec<String>> {
        plan.waves()
            .iter()
            .map(|wave| wave.iter().map(|&i| label(&plan.resources()[i])).collect())
            .collect()
    }

    fn last_segment(resource: &ManagedResource) -> String {
        match resource.arm_id() {
            Some(id) => id.name().unwrap_or("/").to_owned(),
            None => resource.key().to_string(),
        }
    }

    #[test]
    fn contents_before_containers_and_dependents_before_dependencies() {
        let vnet = format!("{RG}/providers/Microsoft.Network/virtualNetworks/vnet");
        let subnet = format!("{vnet}/subnets/default");
        let nic = format!("{RG}/providers/Microsoft.Network/networkInterfaces/nic");
        let lock = format!("{nic}/providers/Microsoft.Authorization/locks/nolock");
        let mut nic_resource = arm(&nic);
        nic_resource.depends_on = vec![key(&subnet)];
        let plan = DeletePlan::build([arm(RG), arm(&vnet), arm(&subnet), nic_resource, arm(&lock)]);
        assert_eq!(
            waves(&plan, last_segment),
            vec![
                vec!["nolock"],
                vec!["nic"],
                vec!["default"],
                vec!["vnet"],
                vec!["rg"]
            ]
        );
        assert!(plan.broken_edges().is_empty());
    }

    #[test]
    fn dependency_on_unplanned_content_orders_before_its_planned_container() {
        // The subnet itself stays (not planned), but the vnet holding it is deleted: the NIC goes first.
        let vnet = format!("{RG}2/providers/Microsoft.Network/virtualNetworks/vnet");
        let mut nic = arm(&format!(
            "{RG}/providers/Microsoft.Network/networkInterfaces/nic"
        ));
        nic.depends_on = vec![key(&format!("{vnet}/subnets/default"))];
        let plan = DeletePlan::build([arm(&vnet), nic]);
        assert_eq!(waves(&plan, last_segment), vec![vec!["nic"], vec!["vnet"]]);
    }

    #[test]
    fn extension_resources_go_before_their_credential_source() {
        let with_credentials = |mut resource: ManagedResource| {
            resource.credential_sources = vec![ResourceId::parse(AKS).unwrap()];
            resource
        };
        let config_map = with_credentials(k8s("core/ConfigMap", Some("app"), "settings"));
        let namespace = with_credentials(k8s("core/Namespace", None, "app"));
        let other_namespace_object = with_credentials(k8s("core/ConfigMap", Some("other"), "x"));
        let plan = DeletePlan::build([
            arm(RG),
            arm(AKS),
            namespace,
            config_map,
            other_namespace_object,
        ]);
        let label = |r: &ManagedResource| match r.target() {
            ManagedTarget::Arm(_) => last_segment(r),
            ManagedTarget::Extensible {
                resource_type,
                identifiers,
                ..
            } => {
                format!(
                    "{resource_type}:{}",
                    identifiers["metadata"]["name"].as_str().unwrap()
                )
            }
        };
        assert_eq!(
            waves(&plan, label),
            vec![
                vec!["core/ConfigMap:settings", "core/ConfigMap:x"],
                vec!["core/Namespace:app"],
                vec!["aks"],
                vec!["rg"]
            ]
        );
        let credentials: Vec<_> = plan
            .edges()
            .iter()
            .filter(|e| e.kind == EdgeKind::Credentials)
            .collect();
        assert_eq!(
            credentials.len(),
            6,
            "each object to the cluster and to its resource group: {credentials:?}"
        );
    }

    #[test]
    fn credential_sources_come_from_config_directives() {
        let mut config_map = k8s("core/ConfigMap", Some("app"), "settings");
        config_map.set_config(Arc::new(
            PersistedConfig::from_wire(
                "k8s",
                &json!({"kubeConfig": {"apiReference": {"method": "POST", "armResourceId": AKS, "apiVersion": "2024-02-01",
                    "action": "listClusterAdminCredential", "responseValuePath": "kubeconfigs[0].value"}}}),
            )
            .unwrap(),
        ));
        let plan = DeletePlan::build([arm(AKS), config_map]);
        assert_eq!(plan.waves().len(), 2);
        assert_eq!(plan.waves()[1], vec![0]);
    }

    #[test]
    fn custom_resources_before_their_definition() {
        let crd = k8s(
            "apiextensions.k8s.io/CustomResourceDefinition",
            None,
            "widgets.example.com",
        );
        let widget = k8s("example.com/Widget", Some("app"), "w1");
        let unrelated = k8s("example.org/Gadget", Some("app"), "g1");
        let plan = DeletePlan::build([crd, widget, unrelated]);
        assert_eq!(plan.waves().len(), 2);
        assert_eq!(plan.waves()[0], vec![1, 2]);
        assert_eq!(plan.waves()[1], vec![0]);
    }

    /// A namespace created through one version of the Kubernetes extension holds the objects created through
    /// another: the control plane is the cluster (`configId`), not the extension version.
    #[test]
    fn containment_spans_extension_versions_of_one_control_plane() {
        let namespace = k8s("core/Namespace", None, "app");
        let ManagedTarget::Extensible {
            extension,
            resource_type,
            identifiers,
        } = k8s("core/ConfigMap", Some("app"), "settings")
            .target()
            .clone()
        else {
            unreachable!("k8s builds extensible resources")
        };
        let config_map = ManagedResource::extensible(
            ExtensionIdentity {
                version: "2.0.0".into(),
                ..extension
            },
            resource_type,
            identifiers,
        );
        let plan = DeletePlan::build([namespace, config_map]);
        assert_eq!(plan.waves(), &[vec![1], vec![0]]);
    }

    #[test]
    fn a_container_depending_on_its_content_is_not_a_cycle() {
        let site = format!("{RG}/providers/Microsoft.Web/sites/app");
        let mut group = arm(RG);
        group.depends_on = vec![key(&site)];
        let plan = DeletePlan::build([group, arm(&site)]);
        assert!(plan.broken_edges().is_empty());
        assert_eq!(plan.waves(), &[vec![1], vec![0]]);
    }

    #[test]
    fn cycles_are_broken_at_dependency_edges() {
        let a = format!("{RG}/providers/Microsoft.Web/sites/a");
        let b = format!("{RG}/providers/Microsoft.Web/sites/b");
        let mut site_a = arm(&a);
        site_a.depends_on = vec![key(&b)];
        let mut site_b = arm(&b);
        site_b.depends_on = vec![key(&a)];
        let plan = DeletePlan::build([site_a, site_b, arm(RG)]);
        assert_eq!(plan.broken_edges().len(), 1, "one edge breaks the cycle");
        assert!(
            plan.broken_edges()
                .iter()
                .all(|e| e.kind == EdgeKind::Dependency)
        );
        assert_eq!(plan.waves(), &[vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn duplicates_are_merged_and_empty_plans_are_empty() {
        let plan = DeletePlan::build([arm(RG), arm("/subscriptions/S/resourcegroups/RG")]);
        assert_eq!(plan.len(), 1);
        let empty = DeletePlan::build(Vec::new());
        assert!(empty.is_empty() && empty.waves().is_empty());
    }
}

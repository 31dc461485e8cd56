//! The managed set a deployment tree produces: what the tree created or updated, never `existing` resources
//! and never the nested deployments themselves.
//!
//! - A **succeeded** deployment contributes its `outputResources` (which list created/updated resources only).
//! - A deployment that did **not** succeed has no `outputResources` (REP 0006), so its **operations** are read
//!   instead: every `Create` operation whose create may have started — succeeded, still running, or failed
//!   after the provider accepted it. A `Create` that failed with a 4xx status was refused by the provider, so
//!   nothing was created by this request; it is left out (a resource the stack already managed stays managed
//!   anyway: see [`crate::diff`] on incomplete sets). `Read` operations (how `existing` resources show up) are
//!   never managed.
//!
//! Everything else known about a resource is merged in from operations and the deployment record: its
//! `apiVersion`, symbolic name, reference ID, dependency edges (`dependencies[]`, with nested deployments
//! expanded to the resources they deployed) and, for extensible resources, the persisted config of their
//! extension with the ARM resources its directives read from.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_arm::ErrorDetail;
use cairn_arm::ResourceId;
use cairn_arm::models::deployment::{
    Dependency, DeploymentExtended, DeploymentProvisioningState, DeploymentResourceReference,
};
use cairn_arm::models::operation::{DeploymentOperation, ProvisioningOperation, TargetResource};
use cairn_extension_contract::ReferenceId;
use indexmap::IndexSet;
use serde_json::Value;

use crate::directive::{ConfigError, PersistedConfig};
use crate::error::codes;
use crate::key::ResourceKey;
use crate::managed::{DEPLOYMENTS_TYPE, ExtensionIdentity, ManagedResource, ManagedSet};

/// One deployment of the tree a stack deployed, with its nested deployments.
#[derive(Clone, Debug, Default)]
pub struct DeploymentSnapshot {
    /// The deployment as GET returns it (`provisioningState`, `outputResources`, `extensions`, `dependencies`).
    pub deployment: DeploymentExtended,
    /// Its operations.
    pub operations: Vec<DeploymentOperation>,
    /// Dependency edges the engine knows beyond `dependencies[]` (e.g. between extensible resources, which
    /// `dependencies[]` cannot name).
    pub extra_dependencies: Vec<RecordedDependency>,
    /// The nested deployments it ran.
    pub nested: Vec<DeploymentSnapshot>,
}

/// `dependent` was deployed after `dependency`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedDependency {
    pub dependent: ResourceKey,
    pub dependency: ResourceKey,
}

/// The result of [`collect_managed_set`].
#[derive(Clone, Debug, Default)]
pub struct CollectedSet {
    pub resources: ManagedSet,
    /// Whether every deployment of the tree succeeded. An incomplete set lists what the tree may have
    /// created, not everything the template declares, so it must not unmanage anything.
    pub complete: bool,
    /// What could not be read. Issues with [`CollectIssue::is_error`] mean a resource was recorded without
    /// something a later delete needs.
    pub issues: Vec<CollectIssue>,
}

/// Something [`collect_managed_set`] could not use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectIssue {
    /// The deployment's ID, when it has one.
    pub deployment: Option<String>,
    pub kind: CollectIssueKind,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CollectIssueKind {
    #[error("'{id}' is not a valid resource ID ({reason}); the resource is not managed")]
    InvalidResourceId { id: String, reason: String },
    #[error("a resource has neither 'id' nor 'extension'; it is not managed")]
    NoIdentity,
    #[error(
        "resource '{resource}' has an invalid reference ID ({reason}); it is managed without one"
    )]
    InvalidReferenceId { resource: String, reason: String },
    /// The extension's config cannot be persisted: its resources are managed, but a later delete will fail
    /// until the stack is redeployed with a valid config.
    #[error(transparent)]
    Config(ConfigError),
}

impl CollectIssue {
    /// Whether the issue breaks a later delete (as opposed to an unmanaged oddity).
    pub fn is_error(&self) -> bool {
        matches!(self.kind, CollectIssueKind::Config(_))
    }

    /// The ARM error.
    pub fn to_error_detail(&self) -> ErrorDetail {
        let code = match &self.kind {
            CollectIssueKind::Config(_) => codes::INVALID_STACK_EXTENSION_CONFIG,
            CollectIssueKind::InvalidResourceId { .. } => "InvalidResourceId",
            CollectIssueKind::NoIdentity | CollectIssueKind::InvalidReferenceId { .. } => {
                "InvalidResourceReference"
            }
        };
        let detail = ErrorDetail::new(code, self.kind.to_string());
        match &self.kind {
            CollectIssueKind::Config(error) => detail.with_target(format!(
                "extensionConfigs.{}.{}",
                error.alias, error.property
            )),
            _ => match &self.deployment {
                Some(deployment) => detail.with_target(deployment.clone()),
                None => detail,
            },
        }
    }
}

impl ConfigError {
    /// The ARM error (`InvalidStackExtensionConfig`, target `extensionConfigs.{alias}.{property}`).
    pub fn to_error_detail(&self) -> ErrorDetail {
        ErrorDetail::new(codes::INVALID_STACK_EXTENSION_CONFIG, self.to_string())
            .with_target(format!("extensionConfigs.{}.{}", self.alias, self.property))
    }
}

/// Reads the managed set out of a deployment tree (see the module docs). The tree is consumed: each deployment's
/// records go as soon as what they hold is read, so a big stack's tree and the set read from it are not held in
/// full at once.
pub fn collect_managed_set(root: DeploymentSnapshot) -> CollectedSet {
    let mut snapshots = Vec::new();
    let mut children = Vec::new();
    flatten(root, &mut snapshots, &mut children);
    let deployment_keys: Vec<Option<ResourceKey>> = snapshots
        .iter()
        .map(|snapshot| {
            snapshot
                .deployment
                .id
                .as_deref()
                .and_then(|id| ResourceId::parse(id).ok())
                .map(|id| ResourceKey::arm(&id))
        })
        .collect();
    let mut collector = Collector {
        set: ManagedSet::new(),
        complete: true,
        issues: Vec::new(),
        configs: Vec::new(),
    };
    for (index, snapshot) in snapshots.iter().enumerate() {
        collector.read_configs(index, snapshot);
    }
    let mut own_keys = Vec::with_capacity(snapshots.len());
    let mut edges = Vec::with_capacity(snapshots.len());
    for (index, snapshot) in snapshots.iter_mut().enumerate() {
        own_keys.push(collector.read_resources(index, snapshot));
        edges.push(dependency_edges(snapshot));
        *snapshot = DeploymentSnapshot::default();
    }
    let members = deployment_members(&children, &deployment_keys, &own_keys);
    for edges in edges {
        collector.add_dependencies(edges, &members);
    }
    CollectedSet {
        resources: collector.set,
        complete: collector.complete,
        issues: collector.issues,
    }
}

/// Moves the tree into `out` in pre-order (a deployment before those nested in it), with the indices of each one's
/// nested deployments in `children`; returns `snapshot`'s index.
fn flatten(
    mut snapshot: DeploymentSnapshot,
    out: &mut Vec<DeploymentSnapshot>,
    children: &mut Vec<Vec<usize>>,
) -> usize {
    let index = out.len();
    let nested = std::mem::take(&mut snapshot.nested);
    out.push(snapshot);
    children.push(Vec::with_capacity(nested.len()));
    for child in nested {
        let child = flatten(child, out, children);
        children[index].push(child);
    }
    index
}

/// For each deployment ID in the tree, the keys of every resource it (or a deployment nested in it) deployed:
/// what a `dependsOn` on a module means.
fn deployment_members(
    children: &[Vec<usize>],
    deployment_keys: &[Option<ResourceKey>],
    own_keys: &[Vec<ResourceKey>],
) -> HashMap<ResourceKey, Vec<ResourceKey>> {
    fn walk(
        index: usize,
        children: &[Vec<usize>],
        deployment_keys: &[Option<ResourceKey>],
        own_keys: &[Vec<ResourceKey>],
        members: &mut HashMap<ResourceKey, Vec<ResourceKey>>,
    ) -> Vec<ResourceKey> {
        let mut keys = own_keys.get(index).cloned().unwrap_or_default();
        for &child in children.get(index).into_iter().flatten() {
            keys.extend(walk(child, children, deployment_keys, own_keys, members));
        }
        if let Some(Some(key)) = deployment_keys.get(index) {
            members.insert(key.clone(), keys.clone());
        }
        keys
    }
    let mut members = HashMap::new();
    if !own_keys.is_empty() {
        walk(0, children, deployment_keys, own_keys, &mut members);
    }
    members
}

/// The dependency edges one deployment records, `(dependent, dependency)`, with its nested deployments still
/// named by their own keys (expanded later, once every deployment's resources are known).
fn dependency_edges(snapshot: &DeploymentSnapshot) -> Vec<(ResourceKey, ResourceKey)> {
    let dependencies: Vec<&Dependency> = snapshot
        .deployment
        .properties
        .dependencies
        .iter()
        .flatten()
        .filter(|dependency| {
            dependency
                .depends_on
                .as_ref()
                .is_some_and(|on| !on.is_empty())
        })
        .collect();
    // Naming extension resources costs a key per operation: only a deployment that records dependencies needs it.
    let mut edges = if dependencies.is_empty() {
        Vec::new()
    } else {
        named_dependency_edges(snapshot, &dependencies)
    };
    edges.extend(
        snapshot
            .extra_dependencies
            .iter()
            .map(|d| (d.dependent.clone(), d.dependency.clone())),
    );
    edges
}

/// The edges of `dependencies` (entries of `snapshot`'s record that depend on something), their ends named by key.
fn named_dependency_edges(
    snapshot: &DeploymentSnapshot,
    dependencies: &[&Dependency],
) -> Vec<(ResourceKey, ResourceKey)> {
    // An extension resource has no ARM id: `dependencies[]` names it by type and symbolic name
    // (`resourceName`), which its operations' targets map to its key (to every instance of a copy loop: a set, as
    // a loop of thousands would make a list's membership test quadratic).
    let mut by_name: HashMap<(String, String), IndexSet<ResourceKey>> = HashMap::new();
    for operation in &snapshot.operations {
        let Some(target) = &operation.properties.target_resource else {
            continue;
        };
        let (None, Some(extension), Some(resource_type), Some(name)) = (
            &target.id,
            &target.extension,
            &target.resource_type,
            &target.symbolic_name,
        ) else {
            continue;
        };
        let key = ManagedResource::extensible(
            ExtensionIdentity::of(extension),
            resource_type.as_str(),
            target.identifiers.clone().unwrap_or(Value::Null),
        )
        .key()
        .clone();
        by_name
            .entry((resource_type.to_lowercase(), name.clone()))
            .or_default()
            .insert(key);
    }
    let named = |id: Option<&str>, resource_type: Option<&str>, name: Option<&str>| match id
        .and_then(|id| ResourceId::parse(id).ok())
    {
        Some(id) => vec![ResourceKey::arm(&id)],
        None => match (id, resource_type, name) {
            (None, Some(resource_type), Some(name)) => by_name
                .get(&(resource_type.to_lowercase(), name.to_owned()))
                .map(|keys| keys.iter().cloned().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        },
    };
    let mut edges: Vec<(ResourceKey, ResourceKey)> = Vec::new();
    for dependency in dependencies {
        let dependents = named(
            dependency.id.as_deref(),
            dependency.resource_type.as_deref(),
            dependency.resource_name.as_deref(),
        );
        for target in dependency.depends_on.iter().flatten() {
            for target in named(
                target.id.as_deref(),
                target.resource_type.as_deref(),
                target.resource_name.as_deref(),
            ) {
                for dependent in &dependents {
                    edges.push((dependent.clone(), target.clone()));
                }
            }
        }
    }
    edges
}

struct ConfigEntry {
    snapshot: usize,
    alias: Option<String>,
    identity: ExtensionIdentity,
    config: Arc<PersistedConfig>,
}

/// Whether [`Collector::managed`] reports what it cannot read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Report {
    Issues,
    Quiet,
}

struct Collector {
    set: ManagedSet,
    complete: bool,
    issues: Vec<CollectIssue>,
    configs: Vec<ConfigEntry>,
}

fn is_deployment_type(resource_type: &str) -> bool {
    resource_type.eq_ignore_ascii_case(DEPLOYMENTS_TYPE)
}

/// Whether an operation's status code says the provider refused the request (4xx), so it created nothing.
fn refused_by_provider(status_code: Option<&str>) -> bool {
    let Some(code) = status_code else {
        return false;
    };
    if let Ok(number) = code.parse::<u16>() {
        return (400..500).contains(&number);
    }
    const CLIENT_ERRORS: [&str; 14] = [
        "BadRequest",
        "Unauthorized",
        "PaymentRequired",
        "Forbidden",
        "NotFound",
        "MethodNotAllowed",
        "NotAcceptable",
        "Conflict",
        "Gone",
        "PreconditionFailed",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "UnprocessableEntity",
        "TooManyRequests",
    ];
    CLIENT_ERRORS.iter().any(|c| c.eq_ignore_ascii_case(code))
}

/// Whether a `Create` operation may have created its resource (see the module docs).
fn create_may_have_started(operation: &DeploymentOperation) -> bool {
    let properties = &operation.properties;
    if properties.provisioning_operation != Some(ProvisioningOperation::Create) {
        return false;
    }
    match &properties.provisioning_state {
        Some(DeploymentProvisioningState::Failed | DeploymentProvisioningState::Canceled) => {
            !refused_by_provider(properties.status_code.as_deref())
        }
        _ => true,
    }
}

/// A resource as some part of a deployment describes it, before it becomes a [`ManagedResource`].
struct Described<'d> {
    id: Option<&'d str>,
    extension: Option<&'d cairn_arm::models::extension::DeploymentExtension>,
    resource_type: Option<&'d str>,
    identifiers: Option<&'d Value>,
    api_version: Option<&'d str>,
    symbolic_name_path: Vec<String>,
    reference_id: Option<&'d str>,
}

impl<'d> Described<'d> {
    fn from_output(resource: &'d DeploymentResourceReference) -> Self {
        Self {
            id: resource.id.as_deref(),
            extension: resource.extension.as_ref(),
            resource_type: resource.resource_type.as_deref(),
            identifiers: resource.identifiers.as_ref(),
            api_version: resource.api_version.as_deref(),
            symbolic_name_path: resource.symbolic_name_path.clone().unwrap_or_default(),
            reference_id: resource.reference_id.as_deref(),
        }
    }

    fn from_target(target: &'d TargetResource) -> Self {
        let symbolic_name_path = match (&target.symbolic_name_path, &target.symbolic_name) {
            (Some(path), _) if !path.is_empty() => path.clone(),
            (_, Some(name)) => vec![name.clone()],
            _ => Vec::new(),
        };
        Self {
            id: target.id.as_deref(),
            extension: target.extension.as_ref(),
            resource_type: target.resource_type.as_deref(),
            identifiers: target.identifiers.as_ref(),
            api_version: target.api_version.as_deref(),
            symbolic_name_path,
            reference_id: None,
        }
    }
}

impl Collector {
    fn issue(&mut self, snapshot: &DeploymentSnapshot, kind: CollectIssueKind) {
        self.issues.push(CollectIssue {
            deployment: snapshot.deployment.id.clone(),
            kind,
        });
    }

    fn read_configs(&mut self, index: usize, snapshot: &DeploymentSnapshot) {
        for extension in snapshot.deployment.properties.extensions.iter().flatten() {
            let Some(config) = &extension.config else {
                continue;
            };
            let alias = extension.alias.as_deref().unwrap_or(&extension.name);
            match PersistedConfig::from_arm(alias, config) {
                Ok(persisted) => self.configs.push(ConfigEntry {
                    snapshot: index,
                    alias: extension.alias.clone(),
                    identity: ExtensionIdentity::of(extension),
                    config: Arc::new(persisted),
                }),
                Err(error) => self.issue(snapshot, CollectIssueKind::Config(error)),
            }
        }
    }

    /// The config for a resource of `identity` deployed by snapshot `index`: the same deployment's config
    /// under the operation's alias, else the same deployment's by identity, else any deployment's. Several
    /// configs with one `configId` point at the same control plane (that is what `configId` means), so any of
    /// them can delete the resource.
    fn config_for(
        &self,
        index: usize,
        alias: Option<&str>,
        identity: &ExtensionIdentity,
    ) -> Option<Arc<PersistedConfig>> {
        let matching = || {
            self.configs
                .iter()
                .filter(move |entry| entry.identity.same_as(identity))
        };
        let by_alias = alias.and_then(|alias| {
            matching()
                .find(|entry| entry.snapshot == index && entry.alias.as_deref() == Some(alias))
        });
        by_alias
            .or_else(|| matching().find(|entry| entry.snapshot == index))
            .or_else(|| matching().next())
            .map(|entry| entry.config.clone())
    }

    /// Builds the managed resource a description names; `None` (with an issue) when it cannot be identified,
    /// and `None` silently for nested deployments.
    fn managed(
        &mut self,
        index: usize,
        snapshot: &DeploymentSnapshot,
        described: Described<'_>,
        report: Report,
    ) -> Option<ManagedResource> {
        let mut resource = match (described.id, described.extension) {
            (Some(id), _) => {
                let parsed = match ResourceId::parse(id) {
                    Ok(parsed) => parsed,
                    Err(error) => {
                        if report == Report::Issues {
                            self.issue(
                                snapshot,
                                CollectIssueKind::InvalidResourceId {
                                    id: id.to_owned(),
                                    reason: error.to_string(),
                                },
                            );
                        }
                        return None;
                    }
                };
                if is_deployment_type(&parsed.resource_type()) {
                    return None;
                }
                ManagedResource::arm(parsed)
            }
            (None, Some(extension)) => {
                let resource_type = described.resource_type.unwrap_or_default();
                if is_deployment_type(resource_type) {
                    return None;
                }
                let identity = ExtensionIdentity::of(extension);
                let config = self.config_for(index, extension.alias.as_deref(), &identity);
                let mut resource = ManagedResource::extensible(
                    identity,
                    resource_type,
                    described.identifiers.cloned().unwrap_or(Value::Null),
                );
                if let Some(config) = config {
                    resource.set_config(config);
                }
                resource
            }
            (None, None) => {
                if report == Report::Issues {
                    self.issue(snapshot, CollectIssueKind::NoIdentity);
                }
                return None;
            }
        };
        resource.api_version = described.api_version.map(str::to_owned);
        resource.symbolic_name_path = described.symbolic_name_path;
        if let Some(text) = described.reference_id {
            match ReferenceId::parse(text) {
                Ok(reference_id) => resource.reference_id = Some(reference_id),
                Err(error) if report == Report::Issues => self.issue(
                    snapshot,
                    CollectIssueKind::InvalidReferenceId {
                        resource: resource.key().to_string(),
                        reason: error.to_string(),
                    },
                ),
                Err(_) => {}
            }
        }
        Some(resource)
    }

    /// Adds the snapshot's own resources; returns their keys.
    fn read_resources(&mut self, index: usize, snapshot: &DeploymentSnapshot) -> Vec<ResourceKey> {
        let properties = &snapshot.deployment.properties;
        let succeeded =
            properties.provisioning_state == Some(DeploymentProvisioningState::Succeeded);
        if !succeeded {
            self.complete = false;
        }
        let mut keys = Vec::new();
        let mut add = |collector: &mut Self, resource: ManagedResource| {
            keys.push(resource.key().clone());
            collector.set.merge(resource);
        };
        if succeeded {
            for output in properties.output_resources.iter().flatten() {
                if let Some(resource) = self.managed(
                    index,
                    snapshot,
                    Described::from_output(output),
                    Report::Issues,
                ) {
                    add(self, resource);
                }
            }
        } else {
            for operation in &snapshot.operations {
                let Some(target) = &operation.properties.target_resource else {
                    continue;
                };
                if !create_may_have_started(operation) {
                    continue;
                }
                if let Some(resource) = self.managed(
                    index,
                    snapshot,
                    Described::from_target(target),
                    Report::Issues,
                ) {
                    add(self, resource);
                }
            }
        }
        // Operations fill in what outputs lack (outputs of ARM resources carry only the ID).
        for operation in &snapshot.operations {
            let Some(target) = &operation.properties.target_resource else {
                continue;
            };
            if operation.properties.provisioning_operation == Some(ProvisioningOperation::Read) {
                continue;
            }
            // Unidentifiable operation targets were reported when read as resources, or are not resources.
            let enrichment = self.managed(
                index,
                snapshot,
                Described::from_target(target),
                Report::Quiet,
            );
            if let Some(enrichment) = enrichment
                && let Some(present) = self.set.get_mut(enrichment.key())
            {
                present.absorb(enrichment);
            }
        }
        keys
    }

    fn add_dependencies(
        &mut self,
        edges: Vec<(ResourceKey, ResourceKey)>,
        members: &HashMap<ResourceKey, Vec<ResourceKey>>,
    ) {
        let expand = |key: &ResourceKey| -> Vec<ResourceKey> {
            members
                .get(key)
                .cloned()
                .unwrap_or_else(|| vec![key.clone()])
        };
        // Each resource's dependencies as a set while edges are added (its recorded ones first, then new ones in
        // the order met): a resource deployed after a module of thousands gets an edge to each of its members,
        // which a membership test on the list would make quadratic.
        let mut grown: HashMap<ResourceKey, IndexSet<ResourceKey>> = HashMap::new();
        for (dependent, dependency) in edges {
            let targets = expand(&dependency);
            for from in expand(&dependent) {
                let Some(resource) = self.set.get(&from) else {
                    continue;
                };
                let depends_on = grown
                    .entry(from.clone())
                    .or_insert_with(|| resource.depends_on.iter().cloned().collect());
                for to in &targets {
                    if *to != from {
                        depends_on.insert(to.clone());
                    }
                }
            }
        }
        for (from, depends_on) in grown {
            if let Some(resource) = self.set.get_mut(&from) {
                resource.depends_on = depends_on.into_iter().collect();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SUB: &str = "/subscriptions/1111";
    const RG: &str = "/subscriptions/1111/resourceGroups/app";
    const VAULT: &str =
        "/subscriptions/1111/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/ops";

    fn resource(name: &str) -> String {
        format!("{RG}/providers/Microsoft.Storage/storageAccounts/{name}")
    }

    fn deployment(value: Value) -> DeploymentExtended {
        serde_json::from_value(value).unwrap()
    }

    fn operations(value: Value) -> Vec<DeploymentOperation> {
        serde_json::from_value(value).unwrap()
    }

    fn key(id: &str) -> ResourceKey {
        ResourceKey::arm(&ResourceId::parse(id).unwrap())
    }

    fn keys(set: &CollectedSet) -> Vec<String> {
        set.resources.iter().map(|r| r.key().to_string()).collect()
    }

    fn k8s_extension() -> Value {
        json!({"alias": "k8s", "name": "Kubernetes", "version": "1.0.0", "configId": "C1",
               "config": {"namespace": {"type": "String", "value": "app"},
                          "kubeConfig": {"type": "SecureString", "keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "kc"}}}})
    }

    #[test]
    fn succeeded_tree_uses_output_resources_and_expands_module_dependencies() {
        let module_id = format!("{RG}/providers/Microsoft.Resources/deployments/k8sModule");
        let root = DeploymentSnapshot {
            deployment: deployment(json!({
                "id": format!("{RG}/providers/Microsoft.Resources/deployments/root"),
                "properties": {
                    "provisioningState": "Succeeded",
                    "outputResources": [{"id": resource("data")}, {"id": module_id}],
                    "dependencies": [{"id": module_id, "dependsOn": [{"id": resource("data")}]}]
                }
            })),
            operations: operations(json!([
                {"properties": {"provisioningOperation": "Create", "provisioningState": "Succeeded",
                    "targetResource": {"id": resource("data"), "apiVersion": "2023-05-01", "symbolicName": "data"}}},
                {"properties": {"provisioningOperation": "Read", "provisioningState": "Succeeded",
                    "targetResource": {"id": resource("shared"), "apiVersion": "2023-05-01"}}}
            ])),
            extra_dependencies: Vec::new(),
            nested: vec![DeploymentSnapshot {
                deployment: deployment(json!({
                    "id": module_id,
                    "properties": {
                        "provisioningState": "Succeeded",
                        "extensions": [k8s_extension()],
                        "outputResources": [{"extension": {"name": "Kubernetes", "version": "1.0.0", "configId": "C1"},
                            "resourceType": "core/ConfigMap", "apiVersion": "v1",
                            "identifiers": {"metadata": {"namespace": "app", "name": "settings"}},
                            "referenceId": "00-cm%2Fsettings", "symbolicNamePath": ["k8sModule", "settings"]}]
                    }
                })),
                ..DeploymentSnapshot::default()
            }],
        };
        let collected = collect_managed_set(root);
        assert!(collected.complete);
        assert!(collected.issues.is_empty(), "{:?}", collected.issues);
        assert_eq!(
            keys(&collected).len(),
            2,
            "no deployments, no `existing` resources: {:?}",
            keys(&collected)
        );
        let data = collected.resources.get(&key(&resource("data"))).unwrap();
        assert_eq!(
            data.api_version.as_deref(),
            Some("2023-05-01"),
            "filled in from operations"
        );
        assert_eq!(data.symbolic_name(), Some("data"));
        let config_map = collected
            .resources
            .iter()
            .find(|r| r.extension().is_some())
            .unwrap();
        assert_eq!(
            config_map.depends_on,
            vec![key(&resource("data"))],
            "module dependency expanded"
        );
        assert_eq!(
            config_map.credential_sources,
            vec![ResourceId::parse(VAULT).unwrap()]
        );
        assert!(config_map.config.is_some());
        assert_eq!(
            config_map.reference_id.as_ref().map(|r| r.unique_id()),
            Some("cm/settings")
        );
        assert_eq!(config_map.symbolic_name_path, vec!["k8sModule", "settings"]);
    }

    #[test]
    fn failed_deployment_reads_creates_that_may_have_started() {
        let op = |name: &str, operation: &str, state: &str, code: Option<&str>| {
            json!({"properties": {"provisioningOperation": operation, "provisioningState": state, "statusCode": code,
                "targetResource": {"id": resource(name), "apiVersion": "2023-05-01"}}})
        };
        let root = DeploymentSnapshot {
            deployment: deployment(json!({"properties": {"provisioningState": "Failed",
                "outputResources": [{"id": resource("ignored")}]}})),
            operations: operations(json!([
                op("done", "Create", "Succeeded", Some("OK")),
                op("running", "Create", "Running", None),
                op("asyncFailed", "Create", "Failed", Some("InternalServerError")),
                op("refused", "Create", "Failed", Some("BadRequest")),
                op("refused409", "Create", "Failed", Some("409")),
                op("existing", "Read", "Succeeded", Some("OK")),
                {"properties": {"provisioningOperation": "Create", "provisioningState": "Succeeded",
                    "targetResource": {"id": format!("{SUB}/providers/Microsoft.Resources/deployments/nested")}}}
            ])),
            ..DeploymentSnapshot::default()
        };
        let collected = collect_managed_set(root);
        assert!(!collected.complete);
        let names: Vec<String> = keys(&collected)
            .into_iter()
            .map(|k| k.rsplit('/').next().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["done", "running", "asyncFailed"]);
    }

    #[test]
    fn refused_configs_and_bad_ids_are_reported() {
        let root = DeploymentSnapshot {
            deployment: deployment(
                json!({"id": "/subscriptions/1111/providers/Microsoft.Resources/deployments/d",
                "properties": {
                "provisioningState": "Succeeded",
                "extensions": [{"alias": "k8s", "name": "Kubernetes", "version": "1.0.0", "configId": "C1",
                    "config": {"kubeConfig": {"type": "SecureString", "value": "c2VjcmV0LWt1YmVjb25maWc="}}}],
                "outputResources": [
                    {"id": "not/an/id"},
                    {"extension": {"name": "Kubernetes", "version": "1.0.0", "configId": "C1"},
                     "resourceType": "core/Secret", "identifiers": {"metadata": {"namespace": "a", "name": "b"}}}
                ]}}),
            ),
            ..DeploymentSnapshot::default()
        };
        let collected = collect_managed_set(root);
        assert_eq!(collected.resources.len(), 1);
        assert!(collected.resources.iter().next().unwrap().config.is_none());
        assert_eq!(collected.issues.len(), 2, "{:?}", collected.issues);
        let config_issue = collected.issues.iter().find(|i| i.is_error()).unwrap();
        let detail = config_issue.to_error_detail();
        assert_eq!(detail.code(), codes::INVALID_STACK_EXTENSION_CONFIG);
        assert_eq!(
            detail.target.as_deref(),
            Some("extensionConfigs.k8s.kubeConfig")
        );
        assert!(!detail.message().contains("c2VjcmV0LWt1YmVjb25maWc="));
    }

    #[test]
    fn a_resource_after_a_module_and_its_members_depends_on_each_member_once_in_order() {
        let module_id = format!("{RG}/providers/Microsoft.Resources/deployments/storage");
        let root = DeploymentSnapshot {
            deployment: deployment(json!({
                "id": format!("{RG}/providers/Microsoft.Resources/deployments/root"),
                "properties": {
                    "provisioningState": "Succeeded",
                    "outputResources": [{"id": resource("app")}, {"id": module_id}],
                    "dependencies": [{"id": resource("app"), "dependsOn": [
                        {"id": module_id}, {"id": resource("a")}, {"id": resource("app")}]}]
                }
            })),
            nested: vec![DeploymentSnapshot {
                deployment: deployment(json!({
                    "id": module_id,
                    "properties": {"provisioningState": "Succeeded",
                                   "outputResources": [{"id": resource("a")}, {"id": resource("b")}]}
                })),
                ..DeploymentSnapshot::default()
            }],
            ..DeploymentSnapshot::default()
        };
        let collected = collect_managed_set(root);
        assert_eq!(
            collected
                .resources
                .get(&key(&resource("app")))
                .unwrap()
                .depends_on,
            vec![key(&resource("a")), key(&resource("b"))],
            "the module's members in order, `a` once, never itself"
        );
    }

    #[test]
    fn dependencies_name_extension_resources_by_type_and_symbolic_name() {
        let ext =
            json!({"alias": "pg", "name": "PostgreSql", "version": "1.0.0", "configId": "P1"});
        let ids = |name: &str| json!({"name": name});
        let op = |symbol: &str, resource_type: &str, name: &str| {
            json!({"properties": {"provisioningOperation": "Create", "provisioningState": "Succeeded",
                "targetResource": {"extension": ext, "resourceType": resource_type, "apiVersion": "v1",
                                   "symbolicName": symbol, "identifiers": ids(name)}}})
        };
        let output = |resource_type: &str, name: &str| json!({"extension": ext, "resourceType": resource_type, "identifiers": ids(name)});
        let pg_key = |resource_type: &str, name: &str| {
            ResourceKey::extensible("PostgreSql", Some("P1"), resource_type, &ids(name))
        };
        let root = DeploymentSnapshot {
            deployment: deployment(json!({"properties": {"provisioningState": "Succeeded",
                "outputResources": [output("PostgreSql/roles", "app"), output("PostgreSql/roles", "ops"),
                                    output("PostgreSql/grants", "g")],
                "dependencies": [{"resourceType": "PostgreSql/grants", "resourceName": "grant",
                                  "dependsOn": [{"resourceType": "PostgreSql/roles", "resourceName": "roles"}]}]}})),
            // An instance met twice (a retried operation) is one dependency.
            operations: operations(json!([
                op("roles", "PostgreSql/roles", "app"),
                op("roles", "PostgreSql/roles", "ops"),
                op("roles", "PostgreSql/roles", "app"),
                op("grant", "PostgreSql/grants", "g")
            ])),
            ..DeploymentSnapshot::default()
        };
        let collected = collect_managed_set(root);
        assert_eq!(
            collected
                .resources
                .get(&pg_key("PostgreSql/grants", "g"))
                .unwrap()
                .depends_on,
            vec![
                pg_key("PostgreSql/roles", "app"),
                pg_key("PostgreSql/roles", "ops")
            ],
            "the grant is deleted before every instance of the roles it was deployed after"
        );
        assert!(
            collected
                .resources
                .get(&pg_key("PostgreSql/roles", "app"))
                .unwrap()
                .depends_on
                .is_empty()
        );
    }

    #[test]
    fn extra_dependencies_link_extensible_resources() {
        let ext = json!({"name": "Kubernetes", "version": "1.0.0", "configId": "C1"});
        let output = |name: &str| {
            json!({"extension": ext, "resourceType": "apps/Deployment",
            "identifiers": {"metadata": {"namespace": "app", "name": name}}})
        };
        let ext_key = |name: &str| {
            ResourceKey::extensible(
                "Kubernetes",
                Some("C1"),
                "apps/Deployment",
                &json!({"metadata": {"namespace": "app", "name": name}}),
            )
        };
        let root = DeploymentSnapshot {
            deployment: deployment(json!({"properties": {"provisioningState": "Succeeded",
                "outputResources": [output("web"), output("db")]}})),
            extra_dependencies: vec![RecordedDependency {
                dependent: ext_key("web"),
                dependency: ext_key("db"),
            }],
            ..DeploymentSnapshot::default()
        };
        let collected = collect_managed_set(root);
        assert_eq!(
            collected.resources.get(&ext_key("web")).unwrap().depends_on,
            vec![ext_key("db")]
        );
        assert!(
            collected
                .resources
                .get(&ext_key("db"))
                .unwrap()
                .depends_on
                .is_empty()
        );
    }
}

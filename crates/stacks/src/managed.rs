//! Managed resources and managed sets: what a stack records about each resource it manages (identity,
//! `apiVersion`, reference ID, symbolic name, the dependency edges recorded at deploy time, where an extensible
//! resource's credentials come from, and its persisted config directives), and conversion to and from the
//! stack API's `resources[]` / `deploymentExtensions[]` shapes.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::stack::{DenyStatusMode, ResourceReference, ResourceStatusMode};
use cairn_arm::{ResourceId, ResourceIdKind};
use cairn_extension_contract::ReferenceId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::directive::{ConfigError, PersistedConfig};
use crate::key::ResourceKey;

/// The type of nested deployments: the structure of a deployment tree, never a managed resource.
pub const DEPLOYMENTS_TYPE: &str = "Microsoft.Resources/deployments";

/// The extension an extensible resource was deployed through: the control plane (extension name and `configId`)
/// and the extension version that reached it. The version is not part of the resource's identity (see
/// [`crate::key`]); it says which version of the extension to call (deletes use the recorded one).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionIdentity {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_id: Option<String>,
}

impl ExtensionIdentity {
    /// The identity of an extension as the deployments API describes it.
    pub fn of(extension: &DeploymentExtension) -> Self {
        Self {
            name: extension.name.clone(),
            version: extension.version.clone(),
            config_id: extension.config_id.clone().filter(|c| !c.is_empty()),
        }
    }

    /// The reference form used inside resource references (no alias, no config).
    pub fn to_extension(&self) -> DeploymentExtension {
        DeploymentExtension {
            name: self.name.clone(),
            version: self.version.clone(),
            config_id: self.config_id.clone(),
            ..DeploymentExtension::default()
        }
    }

    /// Whether two identities name the same extension version on the same control plane (name ignoring
    /// case): what an extension config belongs to, since configs can differ between versions.
    pub fn same_as(&self, other: &Self) -> bool {
        self.same_control_plane(other) && self.version == other.version
    }

    /// Whether two identities name the same control plane (name ignoring case), whatever their versions.
    pub fn same_control_plane(&self, other: &Self) -> bool {
        self.name.eq_ignore_ascii_case(&other.name) && self.config_id == other.config_id
    }

    /// Orders the versions of one extension: semantic-version order when both are semantic versions, else
    /// dot-separated segments compared numerically where both are numbers (`1.10` after `1.9`), else as text.
    pub fn compare_versions(a: &str, b: &str) -> Ordering {
        if let (Ok(a), Ok(b)) = (semver::Version::parse(a), semver::Version::parse(b)) {
            return a.cmp(&b);
        }
        let mut left = a.split('.');
        let mut right = b.split('.');
        loop {
            match (left.next(), right.next()) {
                (None, None) => return a.cmp(b),
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(x), Some(y)) => {
                    let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                        (Ok(x), Ok(y)) => x.cmp(&y),
                        _ => x.cmp(y),
                    };
                    if order != Ordering::Equal {
                        return order;
                    }
                }
            }
        }
    }
}

/// What a managed resource is.
#[derive(Clone, Debug, PartialEq)]
pub enum ManagedTarget {
    /// An ARM resource (or resource group, subscription, management group).
    Arm(ResourceId),
    /// An extensible resource.
    Extensible {
        extension: ExtensionIdentity,
        resource_type: String,
        identifiers: Value,
    },
}

/// Which `actionOnUnmanage` setting applies to a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnmanageBucket {
    /// `actionOnUnmanage.resources`: every resource that is not a resource group or management group,
    /// including extensible resources and subscriptions.
    Resources,
    /// `actionOnUnmanage.resourceGroups`.
    ResourceGroups,
    /// `actionOnUnmanage.managementGroups`.
    ManagementGroups,
}

/// A resource a stack manages. The identity (`target`, and its [`ResourceKey`]) is fixed at construction;
/// everything else is plain data.
#[derive(Clone, Debug, PartialEq)]
pub struct ManagedResource {
    key: ResourceKey,
    target: ManagedTarget,
    /// The API version it was deployed with; deletes must use it (#182).
    pub api_version: Option<String>,
    /// The REP 0004 reference ID an extension returned, if any.
    pub reference_id: Option<ReferenceId>,
    /// Symbolic names from the root template down to the resource.
    pub symbolic_name_path: Vec<String>,
    /// Resources this one was deployed after (its `dependsOn`, recorded at deploy time). Deletion goes the
    /// other way: this resource before those.
    pub depends_on: Vec<ResourceKey>,
    /// ARM resources its credentials come from (the AKS cluster, the Key Vault). It must be deleted while they
    /// still exist.
    pub credential_sources: Vec<ResourceId>,
    /// The persisted (secret-free) config of its extension, shared between resources of one config.
    pub config: Option<Arc<PersistedConfig>>,
    pub status: ResourceStatusMode,
    pub deny_status: Option<DenyStatusMode>,
}

impl ManagedResource {
    /// A managed ARM resource.
    pub fn arm(id: ResourceId) -> Self {
        Self::new(ManagedTarget::Arm(id))
    }

    /// A managed extensible resource.
    pub fn extensible(
        extension: ExtensionIdentity,
        resource_type: impl Into<String>,
        identifiers: Value,
    ) -> Self {
        Self::new(ManagedTarget::Extensible {
            extension,
            resource_type: resource_type.into(),
            identifiers,
        })
    }

    /// A managed resource with status `managed` and nothing else recorded.
    pub fn new(target: ManagedTarget) -> Self {
        let key = match &target {
            ManagedTarget::Arm(id) => ResourceKey::arm(id),
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => ResourceKey::extensible(
                &extension.name,
                extension.config_id.as_deref(),
                resource_type,
                identifiers,
            ),
        };
        let deny_status = match target {
            ManagedTarget::Arm(_) => None,
            ManagedTarget::Extensible { .. } => Some(DenyStatusMode::NotSupported),
        };
        Self {
            key,
            target,
            api_version: None,
            reference_id: None,
            symbolic_name_path: Vec::new(),
            depends_on: Vec::new(),
            credential_sources: Vec::new(),
            config: None,
            status: ResourceStatusMode::Managed,
            deny_status,
        }
    }

    /// The stable key.
    pub fn key(&self) -> &ResourceKey {
        &self.key
    }

    /// What the resource is.
    pub fn target(&self) -> &ManagedTarget {
        &self.target
    }

    /// The ARM resource ID, for ARM resources.
    pub fn arm_id(&self) -> Option<&ResourceId> {
        match &self.target {
            ManagedTarget::Arm(id) => Some(id),
            ManagedTarget::Extensible { .. } => None,
        }
    }

    /// The extension, for extensible resources.
    pub fn extension(&self) -> Option<&ExtensionIdentity> {
        match &self.target {
            ManagedTarget::Arm(_) => None,
            ManagedTarget::Extensible { extension, .. } => Some(extension),
        }
    }

    /// The innermost symbolic name.
    pub fn symbolic_name(&self) -> Option<&str> {
        self.symbolic_name_path.last().map(String::as_str)
    }

    /// Which `actionOnUnmanage` setting applies.
    pub fn bucket(&self) -> UnmanageBucket {
        match self.arm_id().map(ResourceId::kind) {
            Some(ResourceIdKind::ResourceGroup) => UnmanageBucket::ResourceGroups,
            Some(ResourceIdKind::ManagementGroup) => UnmanageBucket::ManagementGroups,
            _ => UnmanageBucket::Resources,
        }
    }

    /// Sets the persisted config and adds the resources its directives read from to `credential_sources`.
    pub fn set_config(&mut self, config: Arc<PersistedConfig>) {
        for source in config.credential_sources() {
            if !self.credential_sources.contains(&source) {
                self.credential_sources.push(source);
            }
        }
        self.config = Some(config);
    }

    /// The reference without status: the form of `deletedResources[]` and `detachedResources[]`.
    pub fn to_reference(&self) -> ResourceReference {
        match &self.target {
            ManagedTarget::Arm(id) => ResourceReference {
                id: Some(id.to_string()),
                api_version: self.api_version.clone(),
                ..ResourceReference::default()
            },
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => ResourceReference {
                extension: Some(extension.to_extension()),
                resource_type: Some(resource_type.clone()),
                identifiers: Some(identifiers.clone()),
                api_version: self.api_version.clone(),
                ..ResourceReference::default()
            },
        }
    }

    /// The `resources[]` form, with `status` and `denyStatus`.
    pub fn to_managed_reference(&self) -> ResourceReference {
        ResourceReference {
            status: Some(self.status.clone()),
            deny_status: self.deny_status.clone(),
            ..self.to_reference()
        }
    }

    /// Reads a stack's `resources[]` entry back, taking the extension config from `extensions` (the stack's
    /// `deploymentExtensions[]`) by extension identity.
    pub fn from_reference(
        reference: &ResourceReference,
        extensions: &[DeploymentExtension],
    ) -> Result<Self, ManagedResourceError> {
        let mut resource =
            match (&reference.id, &reference.extension) {
                (Some(id), None) => Self::arm(ResourceId::parse(id).map_err(|e| {
                    ManagedResourceError::InvalidId {
                        id: id.clone(),
                        reason: e.to_string(),
                    }
                })?),
                (None, Some(extension)) => {
                    let identity = ExtensionIdentity::of(extension);
                    let mut resource = Self::extensible(
                        identity.clone(),
                        reference.resource_type.clone().unwrap_or_default(),
                        reference.identifiers.clone().unwrap_or(Value::Null),
                    );
                    let config = extensions
                        .iter()
                        .find(|e| ExtensionIdentity::of(e).same_as(&identity))
                        .and_then(|e| e.config.as_ref());
                    if let Some(config) = config {
                        let persisted = PersistedConfig::from_arm(&extension.name, config)
                            .map_err(ManagedResourceError::Config)?;
                        resource.set_config(Arc::new(persisted));
                    }
                    resource
                }
                _ => return Err(ManagedResourceError::NoIdentity),
            };
        resource.api_version = reference.api_version.clone();
        resource.status = reference
            .status
            .clone()
            .unwrap_or(ResourceStatusMode::Managed);
        if reference.deny_status.is_some() {
            resource.deny_status = reference.deny_status.clone();
        }
        Ok(resource)
    }

    /// Whether `self` was recorded through a newer version of its extension than `other` (an upgrade moved
    /// the resource to it). Always false for ARM resources.
    fn supersedes(&self, other: &Self) -> bool {
        match (self.extension(), other.extension()) {
            (Some(mine), Some(theirs)) => {
                ExtensionIdentity::compare_versions(&mine.version, &theirs.version)
                    == Ordering::Greater
            }
            _ => false,
        }
    }

    /// Fills what `self` lacks from `other` (same key): used when several sources describe one resource.
    pub(crate) fn absorb(&mut self, other: ManagedResource) {
        if self.api_version.is_none() {
            self.api_version = other.api_version;
        }
        if self.reference_id.is_none() {
            self.reference_id = other.reference_id;
        }
        if self.symbolic_name_path.is_empty() {
            self.symbolic_name_path = other.symbolic_name_path;
        }
        extend_unique(&mut self.depends_on, other.depends_on);
        for source in other.credential_sources {
            if !self.credential_sources.contains(&source) {
                self.credential_sources.push(source);
            }
        }
        if self.config.is_none() {
            self.config = other.config;
        }
    }
}

/// Appends the keys of `more` that `list` lacks, in order. A resource deployed after a module lists every member,
/// thousands of them: past a few, membership goes through a set, as scanning the list for each would be quadratic.
fn extend_unique(list: &mut Vec<ResourceKey>, more: Vec<ResourceKey>) {
    const SCANNED: usize = 16;
    if more.is_empty() {
        return;
    }
    if list.len() + more.len() <= SCANNED {
        for key in more {
            if !list.contains(&key) {
                list.push(key);
            }
        }
        return;
    }
    let mut present: std::collections::HashSet<ResourceKey> = list.iter().cloned().collect();
    for key in more {
        if present.insert(key.clone()) {
            list.push(key);
        }
    }
}

/// Why a stored or returned resource reference cannot be read as a managed resource.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManagedResourceError {
    #[error("a managed resource needs exactly one of 'id' and 'extension'")]
    NoIdentity,
    #[error("'{id}' is not a valid resource ID: {reason}")]
    InvalidId { id: String, reason: String },
    #[error(transparent)]
    Config(ConfigError),
}

/// The persisted form of a managed resource: the stack's resource reference plus what cairn records beside it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedResourceRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<ResourceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extension: Option<ExtensionIdentity>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identifiers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reference_id: Option<ReferenceId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    symbolic_name_path: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    depends_on: Vec<ResourceKey>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    credential_sources: Vec<ResourceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<Arc<PersistedConfig>>,
    status: ResourceStatusMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deny_status: Option<DenyStatusMode>,
}

impl Serialize for ManagedResource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (id, extension, resource_type, identifiers) = match &self.target {
            ManagedTarget::Arm(id) => (Some(id.clone()), None, None, None),
            ManagedTarget::Extensible {
                extension,
                resource_type,
                identifiers,
            } => (
                None,
                Some(extension.clone()),
                Some(resource_type.clone()),
                Some(identifiers.clone()),
            ),
        };
        ManagedResourceRecord {
            id,
            extension,
            resource_type,
            identifiers,
            api_version: self.api_version.clone(),
            reference_id: self.reference_id.clone(),
            symbolic_name_path: self.symbolic_name_path.clone(),
            depends_on: self.depends_on.clone(),
            credential_sources: self.credential_sources.clone(),
            config: self.config.clone(),
            status: self.status.clone(),
            deny_status: self.deny_status.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ManagedResource {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let record = ManagedResourceRecord::deserialize(deserializer)?;
        let target = match (record.id, record.extension) {
            (Some(id), None) => ManagedTarget::Arm(id),
            (None, Some(extension)) => ManagedTarget::Extensible {
                extension,
                resource_type: record.resource_type.unwrap_or_default(),
                identifiers: record.identifiers.unwrap_or(Value::Null),
            },
            _ => {
                return Err(serde::de::Error::custom(
                    ManagedResourceError::NoIdentity.to_string(),
                ));
            }
        };
        let mut resource = Self::new(target);
        resource.api_version = record.api_version;
        resource.reference_id = record.reference_id;
        resource.symbolic_name_path = record.symbolic_name_path;
        resource.depends_on = record.depends_on;
        resource.credential_sources = record.credential_sources;
        resource.config = record.config;
        resource.status = record.status;
        resource.deny_status = record.deny_status;
        Ok(resource)
    }
}

/// A set of managed resources with unique keys, in insertion order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ManagedSet {
    resources: Vec<ManagedResource>,
    index: HashMap<ResourceKey, usize>,
}

impl ManagedSet {
    /// The version of the persisted format ([`Serialize`] writes it; [`Deserialize`] refuses newer ones).
    pub const FORMAT_VERSION: u32 = 1;

    pub fn new() -> Self {
        Self::default()
    }

    /// A set of `resources`; a resource whose key is already present fills in what the earlier one lacks.
    pub fn from_resources(resources: impl IntoIterator<Item = ManagedResource>) -> Self {
        let resources = resources.into_iter();
        // Sized up front: a set read back holds thousands of records, and growing by doubling leaves up to half of
        // both allocations unused.
        let (expected, _) = resources.size_hint();
        let mut set = Self {
            resources: Vec::with_capacity(expected),
            index: HashMap::with_capacity(expected),
        };
        for resource in resources {
            set.merge(resource);
        }
        set
    }

    /// Adds `resource`, or fills in what the present resource with its key lacks. When the two were recorded
    /// through different versions of their extension (one resource before and after an upgrade), the newer
    /// version's record is kept and the older fills its gaps, whatever the order they come in.
    pub fn merge(&mut self, resource: ManagedResource) {
        match self.index.get(resource.key()) {
            Some(&at) => {
                let present = &mut self.resources[at];
                if resource.supersedes(present) {
                    let older = std::mem::replace(present, resource);
                    present.absorb(older);
                } else {
                    present.absorb(resource);
                }
            }
            None => {
                self.index
                    .insert(resource.key().clone(), self.resources.len());
                self.resources.push(resource);
            }
        }
    }

    /// Adds `resource`, replacing and returning the one with its key.
    pub fn insert(&mut self, resource: ManagedResource) -> Option<ManagedResource> {
        match self.index.get(resource.key()) {
            Some(&at) => Some(std::mem::replace(&mut self.resources[at], resource)),
            None => {
                self.index
                    .insert(resource.key().clone(), self.resources.len());
                self.resources.push(resource);
                None
            }
        }
    }

    pub fn get(&self, key: &ResourceKey) -> Option<&ManagedResource> {
        self.index.get(key).map(|&at| &self.resources[at])
    }

    pub fn get_mut(&mut self, key: &ResourceKey) -> Option<&mut ManagedResource> {
        self.index.get(key).map(|&at| &mut self.resources[at])
    }

    pub fn contains(&self, key: &ResourceKey) -> bool {
        self.index.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.resources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ManagedResource> {
        self.resources.iter()
    }

    pub fn as_slice(&self) -> &[ManagedResource] {
        &self.resources
    }

    pub fn into_vec(self) -> Vec<ManagedResource> {
        self.resources
    }

    /// The stack's `resources[]`.
    pub fn to_references(&self) -> Vec<ResourceReference> {
        self.resources
            .iter()
            .map(ManagedResource::to_managed_reference)
            .collect()
    }

    /// The stack's `deploymentExtensions[]`: each extension identity with its persisted config, once per distinct
    /// config (one `configId` can carry several configs; each is listed).
    pub fn deployment_extensions(&self) -> Vec<DeploymentExtension> {
        let mut seen: Vec<(&ExtensionIdentity, Option<&PersistedConfig>)> = Vec::new();
        for resource in &self.resources {
            let Some(identity) = resource.extension() else {
                continue;
            };
            let config = resource.config.as_deref();
            if !seen
                .iter()
                .any(|(i, c)| i.same_as(identity) && *c == config)
            {
                seen.push((identity, config));
            }
        }
        seen.into_iter()
            .map(|(identity, config)| DeploymentExtension {
                config: config.map(PersistedConfig::to_arm),
                ..identity.to_extension()
            })
            .collect()
    }

    /// Reads a stack's `resources[]` and `deploymentExtensions[]` back.
    pub fn from_stack(
        resources: &[ResourceReference],
        extensions: &[DeploymentExtension],
    ) -> Result<Self, ManagedResourceError> {
        let mut set = Self::new();
        for reference in resources {
            set.merge(ManagedResource::from_reference(reference, extensions)?);
        }
        Ok(set)
    }
}

impl<'a> IntoIterator for &'a ManagedSet {
    type Item = &'a ManagedResource;
    type IntoIter = std::slice::Iter<'a, ManagedResource>;
    fn into_iter(self) -> Self::IntoIter {
        self.resources.iter()
    }
}

impl FromIterator<ManagedResource> for ManagedSet {
    fn from_iter<I: IntoIterator<Item = ManagedResource>>(iter: I) -> Self {
        Self::from_resources(iter)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedSetRecord {
    format_version: u32,
    resources: Vec<ManagedResource>,
}

impl Serialize for ManagedSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Borrowed<'a> {
            format_version: u32,
            resources: &'a [ManagedResource],
        }
        Borrowed {
            format_version: Self::FORMAT_VERSION,
            resources: &self.resources,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ManagedSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let record = ManagedSetRecord::deserialize(deserializer)?;
        if record.format_version > Self::FORMAT_VERSION {
            return Err(serde::de::Error::custom(format!(
                "managed set format version {} is newer than this version of cairn reads ({})",
                record.format_version,
                Self::FORMAT_VERSION
            )));
        }
        Ok(Self::from_resources(record.resources))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VAULT: &str =
        "/subscriptions/s/resourceGroups/ops/providers/Microsoft.KeyVault/vaults/kv";

    #[test]
    fn absorbing_keeps_each_dependency_once_in_order_for_short_and_long_lists() {
        let key = |n: usize| {
            ResourceKey::arm(
                &ResourceId::parse(&format!(
                    "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/sa{n}"
                ))
                .unwrap(),
            )
        };
        for size in [3, 40] {
            let mut resource = ManagedResource::arm(ResourceId::parse(VAULT).unwrap());
            resource.depends_on = (0..size).map(key).collect();
            let mut other = resource.clone();
            other.depends_on = (size / 2..size + 2).rev().map(key).collect();
            resource.absorb(other);
            let expected: Vec<ResourceKey> = (0..size).chain([size + 1, size]).map(key).collect();
            assert_eq!(resource.depends_on, expected, "{size}");
        }
    }

    fn kubernetes() -> ExtensionIdentity {
        ExtensionIdentity {
            name: "Kubernetes".into(),
            version: "1.0.0".into(),
            config_id: Some("3A7F".into()),
        }
    }

    fn config_map() -> ManagedResource {
        let mut resource = ManagedResource::extensible(
            kubernetes(),
            "core/ConfigMap",
            json!({"metadata": {"name": "settings", "namespace": "app"}}),
        );
        resource.api_version = Some("v1".into());
        let config = PersistedConfig::from_wire(
            "k8s",
            &json!({"namespace": {"value": "app"},
                    "kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "aks-kubeconfig"}}}),
        )
        .unwrap();
        resource.set_config(Arc::new(config));
        resource
    }

    #[test]
    fn buckets_follow_the_id_kind() {
        let bucket = |id: &str| ManagedResource::arm(ResourceId::parse(id).unwrap()).bucket();
        assert_eq!(
            bucket("/subscriptions/s/resourceGroups/rg"),
            UnmanageBucket::ResourceGroups
        );
        assert_eq!(
            bucket("/providers/Microsoft.Management/managementGroups/mg"),
            UnmanageBucket::ManagementGroups
        );
        assert_eq!(
            bucket("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/a"),
            UnmanageBucket::Resources
        );
        assert_eq!(config_map().bucket(), UnmanageBucket::Resources);
    }

    #[test]
    fn stack_shapes_match_the_reference_example() {
        let mut storage = ManagedResource::arm(
            ResourceId::parse("/subscriptions/1111/resourceGroups/app/providers/Microsoft.Storage/storageAccounts/appdata")
                .unwrap(),
        );
        storage.api_version = Some("2023-05-01".into());
        storage.deny_status = Some(DenyStatusMode::DenyDelete);
        let set = ManagedSet::from_resources([storage, config_map()]);
        assert_eq!(
            serde_json::to_value(set.to_references()).unwrap(),
            json!([
                {"id": "/subscriptions/1111/resourceGroups/app/providers/Microsoft.Storage/storageAccounts/appdata",
                 "status": "managed", "denyStatus": "denyDelete", "apiVersion": "2023-05-01"},
                {"extension": {"name": "Kubernetes", "version": "1.0.0", "configId": "3A7F"},
                 "type": "core/ConfigMap", "apiVersion": "v1",
                 "identifiers": {"metadata": {"name": "settings", "namespace": "app"}},
                 "status": "managed", "denyStatus": "notSupported"}
            ])
        );
        let extensions = set.deployment_extensions();
        assert_eq!(
            serde_json::to_value(&extensions).unwrap(),
            json!([{"name": "Kubernetes", "version": "1.0.0", "configId": "3A7F",
                    "config": {"namespace": {"value": "app"},
                               "kubeConfig": {"keyVaultReference": {"keyVault": {"id": VAULT}, "secretName": "aks-kubeconfig"}}}}])
        );
        let back = ManagedSet::from_stack(&set.to_references(), &extensions).unwrap();
        assert_eq!(back, set);
    }

    #[test]
    fn persisted_form_round_trips_and_is_versioned() {
        let mut resource = config_map();
        resource
            .depends_on
            .push(ResourceKey::arm(&ResourceId::parse(VAULT).unwrap()));
        resource.symbolic_name_path = vec!["k8sModule".into(), "settings".into()];
        resource.status = ResourceStatusMode::DeleteFailed;
        let set = ManagedSet::from_resources([resource]);
        let text = serde_json::to_string(&set).unwrap();
        assert!(text.starts_with(r#"{"formatVersion":1,"#), "{text}");
        let back: ManagedSet = serde_json::from_str(&text).unwrap();
        assert_eq!(back, set);
        assert_eq!(
            back.iter().next().unwrap().credential_sources,
            vec![ResourceId::parse(VAULT).unwrap()]
        );
        assert!(
            serde_json::from_value::<ManagedSet>(json!({"formatVersion": 2, "resources": []}))
                .is_err()
        );
        assert!(serde_json::from_value::<ManagedResource>(json!({"status": "managed"})).is_err());
    }

    #[test]
    fn merging_fills_gaps_without_duplicates() {
        let id = ResourceId::parse("/subscriptions/s/resourceGroups/rg").unwrap();
        let mut first = ManagedResource::arm(id.clone());
        first.symbolic_name_path = vec!["rg".into()];
        let mut second =
            ManagedResource::arm(ResourceId::parse("/subscriptions/S/resourcegroups/RG").unwrap());
        second.api_version = Some("2024-03-01".into());
        let set = ManagedSet::from_resources([first, second]);
        assert_eq!(set.len(), 1);
        let merged = set.get(&ResourceKey::arm(&id)).unwrap();
        assert_eq!(
            (merged.symbolic_name(), merged.api_version.as_deref()),
            (Some("rg"), Some("2024-03-01"))
        );
    }

    fn widget(version: &str, api_version: &str) -> ManagedResource {
        let mut resource = ManagedResource::extensible(
            ExtensionIdentity {
                name: "Widgets".into(),
                version: version.into(),
                config_id: Some("c1".into()),
            },
            "widget",
            json!({"name": "a"}),
        );
        resource.api_version = Some(api_version.into());
        resource
    }

    /// A set stored before the version left the identity can hold one resource twice (before and after an
    /// upgrade): it loads as one resource, recorded through the newer version, in whichever order it was stored.
    #[test]
    fn a_stored_set_with_one_resource_at_two_versions_keeps_the_newer_record() {
        let mut old = widget("1.0.0", "v1");
        old.status = ResourceStatusMode::DeleteFailed;
        old.symbolic_name_path = vec!["a".into()];
        let new = widget("1.1.0", "v2");
        for stored in [
            vec![old.clone(), new.clone()],
            vec![new.clone(), old.clone()],
        ] {
            let text = json!({"formatVersion": 1, "resources": stored}).to_string();
            let set: ManagedSet = serde_json::from_str(&text).unwrap();
            assert_eq!(set.len(), 1, "{text}");
            let kept = set.iter().next().unwrap();
            assert_eq!(kept.extension().unwrap().version, "1.1.0");
            assert_eq!(kept.api_version.as_deref(), Some("v2"));
            assert_eq!(kept.status, ResourceStatusMode::Managed);
            assert_eq!(kept.symbolic_name(), Some("a"), "the older fills gaps");
        }
    }

    #[test]
    fn extension_versions_order_semantically_then_by_segment() {
        use std::cmp::Ordering::{Greater, Less};
        let cmp = ExtensionIdentity::compare_versions;
        assert_eq!(cmp("1.10.0", "1.9.0"), Greater);
        assert_eq!(cmp("1.0.0-beta", "1.0.0"), Less);
        assert_eq!(cmp("1.10", "1.9"), Greater, "not semantic versions");
        assert_eq!(cmp("2", "1.9"), Greater);
        assert_eq!(cmp("1.0", "1.0.1"), Less);
        assert_eq!(cmp("v2", "v1"), Greater);
    }

    #[test]
    fn configs_belong_to_one_version_of_a_control_plane() {
        let one = widget("1.0.0", "v1");
        let two = widget("1.1.0", "v2");
        let (a, b) = (one.extension().unwrap(), two.extension().unwrap());
        assert!(a.same_control_plane(b));
        assert!(!a.same_as(b));
        let set = ManagedSet::from_resources([one, widget("1.0.0", "v1")]);
        assert_eq!(set.deployment_extensions().len(), 1);
    }
}

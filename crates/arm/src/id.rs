//! ARM resource IDs: parsing and formatting them, their scope and parts, and comparing them ignoring case.
//!
//! Grammar (keywords match ignoring case; names keep their casing):
//!
//! ```text
//! id      = root layer*
//! root    = ""                                                   (tenant)
//!         | "/providers/Microsoft.Management/managementGroups/" mg   (only when followed by a layer or the end)
//!         | "/subscriptions/" sub [ "/resourceGroups/" rg ]
//! layer   = "/providers/" namespace ( "/" type "/" name )+       (a second layer is an extension resource)
//! ```
//!
//! The tenant root alone formats as `/`. Formatting writes the keywords in their canonical spelling
//! (`resourceGroups`, `providers`, ...), so `.../resourcegroups/...` comes back as `.../resourceGroups/...`.
//!
//! Architecture invariant: parsing never panics, whatever the input.

use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::error::ArmError;
use crate::wire::{eq_ignore_case, hash_ignore_case};

const MANAGEMENT_NAMESPACE: &str = "Microsoft.Management";
const MANAGEMENT_GROUPS: &str = "managementGroups";

/// A parsed ARM resource ID. Equality and hashing ignore case; [`fmt::Display`] keeps the original casing of
/// every name, namespace and type.
#[derive(Clone)]
pub struct ResourceId {
    root: Root,
    layers: Vec<ProviderLayer>,
}

#[derive(Clone, Debug)]
enum Root {
    Tenant,
    ManagementGroup { name: String },
    Subscription { subscription: String },
    ResourceGroup { subscription: String, name: String },
}

/// One `/providers/{namespace}/{type}/{name}[/{type}/{name}...]` run of an ID.
#[derive(Clone, Debug)]
pub struct ProviderLayer {
    namespace: String,
    /// (type, name) pairs; never empty.
    segments: Vec<(String, String)>,
}

impl ProviderLayer {
    /// The resource provider namespace, e.g. `Microsoft.Storage`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The `(type, name)` pairs, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = (&str, &str)> {
        self.segments.iter().map(|(t, n)| (t.as_str(), n.as_str()))
    }

    /// `Namespace/type1/type2`.
    pub fn full_type(&self) -> String {
        let mut out = self.namespace.clone();
        for (t, _) in &self.segments {
            out.push('/');
            out.push_str(t);
        }
        out
    }

    fn eq_ignore_case(&self, other: &Self) -> bool {
        eq_ignore_case(&self.namespace, &other.namespace)
            && self.segments.len() == other.segments.len()
            && self
                .segments
                .iter()
                .zip(&other.segments)
                .all(|((t1, n1), (t2, n2))| eq_ignore_case(t1, t2) && eq_ignore_case(n1, n2))
    }
}

/// What an ID itself names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceIdKind {
    /// `/`.
    Tenant,
    /// `/providers/Microsoft.Management/managementGroups/{mg}`.
    ManagementGroup,
    /// `/subscriptions/{sub}`.
    Subscription,
    /// `/subscriptions/{sub}/resourceGroups/{rg}`.
    ResourceGroup,
    /// A provider resource at a tenant, management group, subscription or resource group.
    Resource,
    /// A provider resource on top of another provider resource (`{resourceId}/providers/...`).
    ExtensionResource,
}

/// The kind of scope a resource lives at (the kind of [`ResourceId::scope_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScopeKind {
    Tenant,
    ManagementGroup,
    Subscription,
    ResourceGroup,
    /// The scope is itself a provider resource (extension resources).
    Resource,
}

/// Why an ID could not be parsed or built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceIdError {
    #[error("the resource id is empty")]
    Empty,
    #[error("the resource id must start with '/'")]
    MissingLeadingSlash,
    #[error("the resource id contains an empty segment")]
    EmptySegment,
    #[error("expected {expected} but found '{found}'")]
    UnexpectedSegment {
        found: String,
        expected: &'static str,
    },
    #[error("'{after}' must be followed by a name")]
    MissingName { after: String },
    #[error("'providers' must be followed by a resource provider namespace")]
    MissingNamespace,
    #[error("the namespace '{namespace}' must be followed by a resource type and a name")]
    MissingResourceType { namespace: String },
    #[error(
        "'{0}' is not a valid name, namespace or type: it must be non-empty and contain no '/'"
    )]
    InvalidSegment(String),
    #[error("'providers' cannot be used as a resource type")]
    ReservedType,
    #[error("the resource type '{0}' is not valid: it must be 'Namespace/type[/childType...]'")]
    InvalidType(String),
    #[error(
        "the resource type '{full_type}' has {types} type segment(s) but {names} name(s) were given"
    )]
    MismatchedNames {
        full_type: String,
        types: usize,
        names: usize,
    },
    #[error("a child resource can only be added to a provider resource")]
    NotAProviderResource,
}

impl ResourceIdError {
    /// The ARM error (400 `InvalidResourceId`) for `id`.
    pub fn to_arm_error(&self, id: &str) -> ArmError {
        ArmError::invalid_resource_id(id, self)
    }
}

impl ResourceId {
    /// Parses an ID such as `/subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{t}/{n}`. One trailing `/`
    /// is tolerated.
    pub fn parse(input: &str) -> Result<Self, ResourceIdError> {
        let segments = split_segments(input)?;
        Self::from_segments(&segments)
    }

    /// Parses already split (and, for URL paths, already percent-decoded) segments.
    pub(crate) fn from_segments<S: AsRef<str>>(segments: &[S]) -> Result<Self, ResourceIdError> {
        let seg = |i: usize| segments.get(i).map(AsRef::as_ref);
        for s in segments {
            validate_segment(s.as_ref())?;
        }
        let (root, mut i) = match seg(0) {
            None => (Root::Tenant, 0),
            Some(first) if eq_ignore_case(first, "subscriptions") => {
                let subscription = seg(1).ok_or_else(|| ResourceIdError::MissingName {
                    after: first.to_owned(),
                })?;
                match seg(2) {
                    Some(keyword) if eq_ignore_case(keyword, "resourceGroups") => {
                        let name = seg(3).ok_or_else(|| ResourceIdError::MissingName {
                            after: keyword.to_owned(),
                        })?;
                        (
                            Root::ResourceGroup {
                                subscription: subscription.to_owned(),
                                name: name.to_owned(),
                            },
                            4,
                        )
                    }
                    _ => (
                        Root::Subscription {
                            subscription: subscription.to_owned(),
                        },
                        2,
                    ),
                }
            }
            Some(first) if eq_ignore_case(first, "providers") => {
                let is_management_group = matches!(
                    (seg(1), seg(2), seg(3), seg(4)),
                    (Some(ns), Some(t), Some(_), next)
                        if eq_ignore_case(ns, MANAGEMENT_NAMESPACE)
                            && eq_ignore_case(t, MANAGEMENT_GROUPS)
                            && next.is_none_or(|n| eq_ignore_case(n, "providers"))
                );
                match seg(3) {
                    Some(name) if is_management_group => (
                        Root::ManagementGroup {
                            name: name.to_owned(),
                        },
                        4,
                    ),
                    _ => (Root::Tenant, 0),
                }
            }
            Some(other) => {
                return Err(ResourceIdError::UnexpectedSegment {
                    found: other.to_owned(),
                    expected: "'subscriptions' or 'providers'",
                });
            }
        };

        let mut layers = Vec::new();
        while let Some(keyword) = seg(i) {
            if !eq_ignore_case(keyword, "providers") {
                return Err(ResourceIdError::UnexpectedSegment {
                    found: keyword.to_owned(),
                    expected: match (&root, layers.is_empty()) {
                        (Root::Subscription { .. }, true) => "'resourceGroups' or 'providers'",
                        _ => "'providers'",
                    },
                });
            }
            let namespace = seg(i + 1).ok_or(ResourceIdError::MissingNamespace)?;
            i += 2;
            let mut pairs = Vec::new();
            while let Some(resource_type) = seg(i) {
                if eq_ignore_case(resource_type, "providers") {
                    break;
                }
                let name = seg(i + 1).ok_or_else(|| ResourceIdError::MissingName {
                    after: resource_type.to_owned(),
                })?;
                pairs.push((resource_type.to_owned(), name.to_owned()));
                i += 2;
            }
            if pairs.is_empty() {
                return Err(ResourceIdError::MissingResourceType {
                    namespace: namespace.to_owned(),
                });
            }
            layers.push(ProviderLayer {
                namespace: namespace.to_owned(),
                segments: pairs,
            });
        }
        Ok(Self { root, layers })
    }

    /// The tenant root, `/`.
    pub fn tenant() -> Self {
        Self {
            root: Root::Tenant,
            layers: Vec::new(),
        }
    }

    /// `/providers/Microsoft.Management/managementGroups/{name}`.
    pub fn management_group(name: &str) -> Result<Self, ResourceIdError> {
        validate_segment(name)?;
        Ok(Self {
            root: Root::ManagementGroup {
                name: name.to_owned(),
            },
            layers: Vec::new(),
        })
    }

    /// `/subscriptions/{subscription}`.
    pub fn subscription(subscription: &str) -> Result<Self, ResourceIdError> {
        validate_segment(subscription)?;
        Ok(Self {
            root: Root::Subscription {
                subscription: subscription.to_owned(),
            },
            layers: Vec::new(),
        })
    }

    /// `/subscriptions/{subscription}/resourceGroups/{name}`.
    pub fn resource_group(subscription: &str, name: &str) -> Result<Self, ResourceIdError> {
        validate_segment(subscription)?;
        validate_segment(name)?;
        Ok(Self {
            root: Root::ResourceGroup {
                subscription: subscription.to_owned(),
                name: name.to_owned(),
            },
            layers: Vec::new(),
        })
    }

    /// `{self}/providers/{namespace}/{resource_type}/{name}`: a resource at this scope (an extension resource
    /// when `self` is a provider resource).
    pub fn provider(
        &self,
        namespace: &str,
        resource_type: &str,
        name: &str,
    ) -> Result<Self, ResourceIdError> {
        validate_segment(namespace)?;
        validate_type(resource_type)?;
        validate_segment(name)?;
        let mut id = self.clone();
        id.layers.push(ProviderLayer {
            namespace: namespace.to_owned(),
            segments: vec![(resource_type.to_owned(), name.to_owned())],
        });
        Ok(id.normalized())
    }

    /// `{self}/providers/{Ns}/{t1}/{n1}/{t2}/{n2}...` from a full type `Ns/t1/t2` and its names.
    pub fn with_resource(&self, full_type: &str, names: &[&str]) -> Result<Self, ResourceIdError> {
        let mut parts = full_type.split('/');
        let namespace = parts.next().unwrap_or_default();
        let types: Vec<&str> = parts.collect();
        if namespace.is_empty() || types.is_empty() {
            return Err(ResourceIdError::InvalidType(full_type.to_owned()));
        }
        if types.len() != names.len() {
            return Err(ResourceIdError::MismatchedNames {
                full_type: full_type.to_owned(),
                types: types.len(),
                names: names.len(),
            });
        }
        validate_segment(namespace)?;
        let mut segments = Vec::with_capacity(types.len());
        for (t, n) in types.iter().zip(names) {
            validate_type(t)?;
            validate_segment(n)?;
            segments.push(((*t).to_owned(), (*n).to_owned()));
        }
        let mut id = self.clone();
        id.layers.push(ProviderLayer {
            namespace: namespace.to_owned(),
            segments,
        });
        Ok(id.normalized())
    }

    /// `{self}/{resource_type}/{name}`: a child of this provider resource.
    pub fn child(&self, resource_type: &str, name: &str) -> Result<Self, ResourceIdError> {
        validate_type(resource_type)?;
        validate_segment(name)?;
        let mut id = self.clone();
        if id.layers.is_empty() {
            // A management group is also the tenant-level resource Microsoft.Management/managementGroups/{mg};
            // its children (e.g. `/subscriptions/{s}`) are written in that form.
            let Root::ManagementGroup { name: mg } = &id.root else {
                return Err(ResourceIdError::NotAProviderResource);
            };
            id.layers.push(ProviderLayer {
                namespace: MANAGEMENT_NAMESPACE.to_owned(),
                segments: vec![(MANAGEMENT_GROUPS.to_owned(), mg.clone())],
            });
            id.root = Root::Tenant;
        }
        if let Some(layer) = id.layers.last_mut() {
            layer
                .segments
                .push((resource_type.to_owned(), name.to_owned()));
        }
        Ok(id)
    }

    /// The parser reads `/providers/Microsoft.Management/managementGroups/{mg}` (followed by a layer or the end)
    /// as a management-group root; builders produce the same form so that equal strings mean equal IDs.
    fn normalized(mut self) -> Self {
        if matches!(self.root, Root::Tenant)
            && let Some(first) = self.layers.first()
            && first.segments.len() == 1
            && eq_ignore_case(&first.namespace, MANAGEMENT_NAMESPACE)
            && eq_ignore_case(&first.segments[0].0, MANAGEMENT_GROUPS)
        {
            let layer = self.layers.remove(0);
            let name = layer
                .segments
                .into_iter()
                .next()
                .map(|(_, n)| n)
                .unwrap_or_default();
            self.root = Root::ManagementGroup { name };
        }
        self
    }

    /// What this ID names.
    pub fn kind(&self) -> ResourceIdKind {
        match (self.layers.len(), &self.root) {
            (0, Root::Tenant) => ResourceIdKind::Tenant,
            (0, Root::ManagementGroup { .. }) => ResourceIdKind::ManagementGroup,
            (0, Root::Subscription { .. }) => ResourceIdKind::Subscription,
            (0, Root::ResourceGroup { .. }) => ResourceIdKind::ResourceGroup,
            (1, _) => ResourceIdKind::Resource,
            _ => ResourceIdKind::ExtensionResource,
        }
    }

    /// The kind of scope this resource lives at; `None` for the tenant root.
    pub fn scope_kind(&self) -> Option<ScopeKind> {
        match self.layers.len() {
            0 => match self.root {
                Root::Tenant => None,
                Root::ManagementGroup { .. } | Root::Subscription { .. } => Some(ScopeKind::Tenant),
                Root::ResourceGroup { .. } => Some(ScopeKind::Subscription),
            },
            1 => Some(self.root_scope_kind()),
            _ => Some(ScopeKind::Resource),
        }
    }

    fn root_scope_kind(&self) -> ScopeKind {
        match self.root {
            Root::Tenant => ScopeKind::Tenant,
            Root::ManagementGroup { .. } => ScopeKind::ManagementGroup,
            Root::Subscription { .. } => ScopeKind::Subscription,
            Root::ResourceGroup { .. } => ScopeKind::ResourceGroup,
        }
    }

    /// The scope this resource lives at: the ID without its last provider layer (for a child resource, that
    /// is the scope of its top-level parent, not the parent). A resource group's scope is its subscription;
    /// a subscription's and a management group's is the tenant; the tenant has none.
    pub fn scope_id(&self) -> Option<Self> {
        let mut id = self.clone();
        if id.layers.pop().is_some() {
            return Some(id);
        }
        match &self.root {
            Root::Tenant => None,
            Root::ManagementGroup { .. } | Root::Subscription { .. } => Some(Self::tenant()),
            Root::ResourceGroup { subscription, .. } => Some(Self {
                root: Root::Subscription {
                    subscription: subscription.clone(),
                },
                layers: Vec::new(),
            }),
        }
    }

    /// The parent: for a child resource the resource one level up, for a top-level resource its scope.
    pub fn parent(&self) -> Option<Self> {
        match self.layers.last() {
            Some(layer) if layer.segments.len() > 1 => {
                let mut id = self.clone();
                if let Some(last) = id.layers.last_mut() {
                    last.segments.pop();
                }
                Some(id.normalized())
            }
            _ => self.scope_id(),
        }
    }

    /// The subscription ID, if the ID is under a subscription.
    pub fn subscription_id(&self) -> Option<&str> {
        match &self.root {
            Root::Subscription { subscription } | Root::ResourceGroup { subscription, .. } => {
                Some(subscription)
            }
            _ => None,
        }
    }

    /// The resource group name, if the ID is under a resource group.
    pub fn resource_group_name(&self) -> Option<&str> {
        match &self.root {
            Root::ResourceGroup { name, .. } => Some(name),
            _ => None,
        }
    }

    /// The management group name, if the ID is under a management group.
    pub fn management_group_name(&self) -> Option<&str> {
        match &self.root {
            Root::ManagementGroup { name } => Some(name),
            _ => None,
        }
    }

    /// The provider layers, outermost first; empty for scope IDs.
    pub fn layers(&self) -> &[ProviderLayer] {
        &self.layers
    }

    /// The namespace of the last provider layer (`None` for scope IDs).
    pub fn namespace(&self) -> Option<&str> {
        self.layers.last().map(ProviderLayer::namespace)
    }

    /// The full resource type, `Ns/t1/t2`. Scope IDs have the types ARM gives them:
    /// `Microsoft.Resources/resourceGroups`, `Microsoft.Resources/subscriptions`,
    /// `Microsoft.Management/managementGroups`, and `Microsoft.Resources/tenants` for `/`.
    pub fn resource_type(&self) -> String {
        if let Some(layer) = self.layers.last() {
            return layer.full_type();
        }
        match self.root {
            Root::Tenant => "Microsoft.Resources/tenants",
            Root::ManagementGroup { .. } => "Microsoft.Management/managementGroups",
            Root::Subscription { .. } => "Microsoft.Resources/subscriptions",
            Root::ResourceGroup { .. } => "Microsoft.Resources/resourceGroups",
        }
        .to_owned()
    }

    /// The names of the last provider layer, outermost first (`[n1, n2]` for `.../t1/n1/t2/n2`); for scope
    /// IDs the scope's own name; empty for `/`.
    pub fn names(&self) -> Vec<&str> {
        if let Some(layer) = self.layers.last() {
            return layer.segments.iter().map(|(_, n)| n.as_str()).collect();
        }
        match &self.root {
            Root::Tenant => Vec::new(),
            Root::ManagementGroup { name } | Root::ResourceGroup { name, .. } => vec![name],
            Root::Subscription { subscription } => vec![subscription],
        }
    }

    /// The last name (the resource's own name); `None` for `/`.
    pub fn name(&self) -> Option<&str> {
        self.names().pop()
    }

    /// `Ns/t1/n1/t2/n2`, the form ARM uses in "resource not found" messages.
    pub fn qualified_type_and_names(&self) -> String {
        let Some(layer) = self.layers.last() else {
            let mut out = self.resource_type();
            if let Some(name) = self.name() {
                out.push('/');
                out.push_str(name);
            }
            return out;
        };
        let mut out = layer.namespace.clone();
        for (t, n) in &layer.segments {
            out.push('/');
            out.push_str(t);
            out.push('/');
            out.push_str(n);
        }
        out
    }

    /// Whether `self` is `other` or one of its ancestors (a scope or parent of it), ignoring case.
    pub fn contains(&self, other: &Self) -> bool {
        let mut current = Some(other.clone());
        while let Some(id) = current {
            if &id == self {
                return true;
            }
            current = id.parent();
        }
        false
    }
}

fn split_segments(input: &str) -> Result<Vec<&str>, ResourceIdError> {
    if input.is_empty() {
        return Err(ResourceIdError::Empty);
    }
    let Some(rest) = input.strip_prefix('/') else {
        return Err(ResourceIdError::MissingLeadingSlash);
    };
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(ResourceIdError::EmptySegment);
    }
    Ok(segments)
}

fn validate_segment(segment: &str) -> Result<(), ResourceIdError> {
    if segment.is_empty() || segment.contains('/') {
        return Err(ResourceIdError::InvalidSegment(segment.to_owned()));
    }
    Ok(())
}

fn validate_type(resource_type: &str) -> Result<(), ResourceIdError> {
    validate_segment(resource_type)?;
    if eq_ignore_case(resource_type, "providers") {
        return Err(ResourceIdError::ReservedType);
    }
    Ok(())
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            Root::Tenant if self.layers.is_empty() => return f.write_str("/"),
            Root::Tenant => {}
            Root::ManagementGroup { name } => write!(
                f,
                "/providers/{MANAGEMENT_NAMESPACE}/{MANAGEMENT_GROUPS}/{name}"
            )?,
            Root::Subscription { subscription } => write!(f, "/subscriptions/{subscription}")?,
            Root::ResourceGroup { subscription, name } => {
                write!(f, "/subscriptions/{subscription}/resourceGroups/{name}")?
            }
        }
        for layer in &self.layers {
            write!(f, "/providers/{}", layer.namespace)?;
            for (t, n) in &layer.segments {
                write!(f, "/{t}/{n}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResourceId({self})")
    }
}

impl std::str::FromStr for ResourceId {
    type Err = ResourceIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl PartialEq for ResourceId {
    fn eq(&self, other: &Self) -> bool {
        let roots_equal = match (&self.root, &other.root) {
            (Root::Tenant, Root::Tenant) => true,
            (Root::ManagementGroup { name: a }, Root::ManagementGroup { name: b }) => {
                eq_ignore_case(a, b)
            }
            (Root::Subscription { subscription: a }, Root::Subscription { subscription: b }) => {
                eq_ignore_case(a, b)
            }
            (
                Root::ResourceGroup {
                    subscription: s1,
                    name: n1,
                },
                Root::ResourceGroup {
                    subscription: s2,
                    name: n2,
                },
            ) => eq_ignore_case(s1, s2) && eq_ignore_case(n1, n2),
            _ => false,
        };
        roots_equal
            && self.layers.len() == other.layers.len()
            && self
                .layers
                .iter()
                .zip(&other.layers)
                .all(|(a, b)| a.eq_ignore_case(b))
    }
}

impl Eq for ResourceId {}

impl Hash for ResourceId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match &self.root {
            Root::Tenant => 0u8.hash(state),
            Root::ManagementGroup { name } => {
                1u8.hash(state);
                hash_ignore_case(name, state);
            }
            Root::Subscription { subscription } => {
                2u8.hash(state);
                hash_ignore_case(subscription, state);
            }
            Root::ResourceGroup { subscription, name } => {
                3u8.hash(state);
                hash_ignore_case(subscription, state);
                hash_ignore_case(name, state);
            }
        }
        for layer in &self.layers {
            hash_ignore_case(&layer.namespace, state);
            for (t, n) in &layer.segments {
                hash_ignore_case(t, state);
                hash_ignore_case(n, state);
            }
        }
    }
}

impl Serialize for ResourceId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ResourceId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl serde::de::Visitor<'_> for IdVisitor {
            type Value = ResourceId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an ARM resource id such as '/subscriptions/{id}/resourceGroups/{name}'",
                )
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<ResourceId, E> {
                ResourceId::parse(value).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(IdVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ResourceId {
        ResourceId::parse(s).unwrap()
    }

    #[test]
    fn scopes_parse_to_their_kinds() {
        let cases = [
            ("/", ResourceIdKind::Tenant),
            (
                "/providers/Microsoft.Management/managementGroups/mg1",
                ResourceIdKind::ManagementGroup,
            ),
            ("/subscriptions/s1", ResourceIdKind::Subscription),
            (
                "/subscriptions/s1/resourcegroups/rg1",
                ResourceIdKind::ResourceGroup,
            ),
            (
                "/providers/Microsoft.Resources/deployments/d",
                ResourceIdKind::Resource,
            ),
            (
                "/subscriptions/s/resourceGroups/rg/providers/A.B/t/n/providers/C.D/u/m",
                ResourceIdKind::ExtensionResource,
            ),
        ];
        for (input, kind) in cases {
            assert_eq!(id(input).kind(), kind, "{input}");
        }
    }

    #[test]
    fn keywords_are_canonicalised_and_names_keep_their_case() {
        let parsed = id(
            "/SUBSCRIPTIONS/S1/resourcegroups/My-RG/PROVIDERS/Microsoft.Storage/storageAccounts/SA/",
        );
        assert_eq!(
            parsed.to_string(),
            "/subscriptions/S1/resourceGroups/My-RG/providers/Microsoft.Storage/storageAccounts/SA"
        );
    }

    #[test]
    fn child_resources_expose_type_names_and_parent() {
        let vm = id(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
        );
        assert_eq!(
            vm.resource_type(),
            "Microsoft.Network/virtualNetworks/subnets"
        );
        assert_eq!(vm.names(), ["v", "a"]);
        assert_eq!(vm.name(), Some("a"));
        assert_eq!(
            vm.parent().unwrap().to_string(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v"
        );
        assert_eq!(
            vm.scope_id().unwrap().to_string(),
            "/subscriptions/s/resourceGroups/rg"
        );
        assert_eq!(vm.scope_kind(), Some(ScopeKind::ResourceGroup));
        assert_eq!(vm.subscription_id(), Some("s"));
        assert_eq!(vm.resource_group_name(), Some("rg"));
    }

    #[test]
    fn extension_resources_have_a_resource_scope() {
        let lock = id(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa/providers/Microsoft.Authorization/locks/l",
        );
        assert_eq!(lock.kind(), ResourceIdKind::ExtensionResource);
        assert_eq!(lock.scope_kind(), Some(ScopeKind::Resource));
        assert_eq!(lock.resource_type(), "Microsoft.Authorization/locks");
        assert_eq!(
            lock.scope_id().unwrap().to_string(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa"
        );
    }

    #[test]
    fn management_group_children_are_tenant_resources() {
        let sub = id("/providers/Microsoft.Management/managementGroups/mg/subscriptions/s");
        assert_eq!(sub.kind(), ResourceIdKind::Resource);
        assert_eq!(
            sub.resource_type(),
            "Microsoft.Management/managementGroups/subscriptions"
        );
        assert_eq!(sub.scope_kind(), Some(ScopeKind::Tenant));
        let mg = ResourceId::management_group("mg").unwrap();
        assert_eq!(mg.child("subscriptions", "s").unwrap(), sub);
        assert_eq!(sub.parent().unwrap(), mg);
    }

    #[test]
    fn management_group_deployments_live_at_the_group() {
        let d = id(
            "/providers/Microsoft.Management/managementGroups/mg/providers/Microsoft.Resources/deployments/d",
        );
        assert_eq!(d.scope_kind(), Some(ScopeKind::ManagementGroup));
        assert_eq!(d.management_group_name(), Some("mg"));
        let built = ResourceId::tenant()
            .provider("Microsoft.Management", "managementGroups", "mg")
            .unwrap()
            .provider("Microsoft.Resources", "deployments", "d")
            .unwrap();
        assert_eq!(built.to_string(), d.to_string());
    }

    #[test]
    fn equality_and_hash_ignore_case() {
        use std::collections::HashSet;
        let a = id("/subscriptions/ABC/resourceGroups/RG/providers/Microsoft.Web/sites/Site");
        let b = id("/subscriptions/abc/resourcegroups/rg/providers/microsoft.web/SITES/site");
        assert_eq!(a, b);
        assert_eq!(
            HashSet::from([a.clone()]).len(),
            HashSet::from([a, b]).len()
        );
        assert_ne!(
            id("/subscriptions/a"),
            id("/subscriptions/a/resourceGroups/a")
        );
    }

    #[test]
    fn names_may_look_like_keywords() {
        let odd = id(
            "/subscriptions/s/resourceGroups/providers/providers/Ns/t/providers/providers/X/u/v",
        );
        assert_eq!(odd.resource_group_name(), Some("providers"));
        assert_eq!(odd.layers().len(), 2);
        assert_eq!(
            odd.layers()[0].segments().collect::<Vec<_>>(),
            [("t", "providers")]
        );
    }

    #[test]
    fn malformed_ids_give_typed_errors() {
        let cases = [
            ("", ResourceIdError::Empty),
            ("subscriptions/s", ResourceIdError::MissingLeadingSlash),
            (
                "/subscriptions//resourceGroups",
                ResourceIdError::EmptySegment,
            ),
            ("//", ResourceIdError::EmptySegment),
            (
                "/subscriptions",
                ResourceIdError::MissingName {
                    after: "subscriptions".into(),
                },
            ),
            (
                "/subscriptions/s/resourceGroups",
                ResourceIdError::MissingName {
                    after: "resourceGroups".into(),
                },
            ),
            ("/providers", ResourceIdError::MissingNamespace),
            (
                "/providers/Ns",
                ResourceIdError::MissingResourceType {
                    namespace: "Ns".into(),
                },
            ),
            (
                "/providers/Ns/t",
                ResourceIdError::MissingName { after: "t".into() },
            ),
            (
                "/foo",
                ResourceIdError::UnexpectedSegment {
                    found: "foo".into(),
                    expected: "'subscriptions' or 'providers'",
                },
            ),
            (
                "/subscriptions/s/locations/x",
                ResourceIdError::UnexpectedSegment {
                    found: "locations".into(),
                    expected: "'resourceGroups' or 'providers'",
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(ResourceId::parse(input).unwrap_err(), expected, "{input:?}");
        }
    }

    #[test]
    fn with_resource_builds_nested_types() {
        let rg = ResourceId::resource_group("s", "rg").unwrap();
        let subnet = rg
            .with_resource("Microsoft.Network/virtualNetworks/subnets", &["v", "a"])
            .unwrap();
        assert_eq!(
            subnet,
            id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a"
            )
        );
        assert_eq!(
            rg.with_resource("Microsoft.Network/virtualNetworks/subnets", &["v"])
                .unwrap_err(),
            ResourceIdError::MismatchedNames {
                full_type: "Microsoft.Network/virtualNetworks/subnets".into(),
                types: 2,
                names: 1
            }
        );
        assert!(rg.with_resource("Microsoft.Network", &[]).is_err());
        assert!(rg.provider("Ns", "providers", "x").is_err());
        assert!(rg.provider("Ns", "t", "a/b").is_err());
        assert!(rg.child("t", "n").is_err());
    }

    #[test]
    fn contains_walks_parents_and_scopes() {
        let rg = id("/subscriptions/s/resourceGroups/rg");
        let subnet = id(
            "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
        );
        assert!(rg.contains(&subnet));
        assert!(ResourceId::tenant().contains(&rg));
        assert!(!subnet.contains(&rg));
    }

    #[test]
    fn serde_uses_the_string_form() {
        let d: ResourceId = serde_json::from_str("\"/subscriptions/s/resourcegroups/rg\"").unwrap();
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            "\"/subscriptions/s/resourceGroups/rg\""
        );
        assert!(serde_json::from_str::<ResourceId>("\"nope\"").is_err());
    }
}

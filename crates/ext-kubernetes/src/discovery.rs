//! Resource types `<group>/<Kind>` with apiVersion `<version>` (`core/ConfigMap` + `v1`,
//! `apps/Deployment` + `v1`, `stable.example.com/CronTab` + `v1`), resolved by API discovery into the
//! REST resource (plural) and scope (namespaced or cluster-wide) the API server serves them under.
//!
//! Discovery is cached per cluster and group-version: a stack's hundred ConfigMaps ask `/api/v1` once.
//! A kind that is not found refreshes its group-version (at most every [`MIN_REFRESH`]), so a CRD
//! created earlier in the same deployment is found as soon as the API server serves it; concurrent
//! lookups of one group-version wait for a single request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_extension_sdk::ExtensionError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;

use crate::error::{KubeError, k8s_codes};

/// The shortest interval between two discovery requests for one group-version after a miss.
pub const MIN_REFRESH: Duration = Duration::from_millis(200);

/// A resource type as the request names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TypeName {
    /// The API group; empty for the core group (written `core`).
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
}

impl TypeName {
    /// Parses `type` (`core/ConfigMap`, `apps/Deployment`, `ConfigMap`) and `apiVersion` (`v1`; a full
    /// `apps/v1` naming the same group is accepted too).
    pub fn parse(
        resource_type: &str,
        api_version: Option<&str>,
    ) -> Result<TypeName, ExtensionError> {
        let invalid_type = || {
            ExtensionError::invalid(
                k8s_codes::INVALID_RESOURCE_TYPE,
                "/type",
                format!(
                    "The resource type '{resource_type}' is not a Kubernetes type '<group>/<Kind>' such as \
                     'core/ConfigMap' or 'apps/Deployment'."
                ),
            )
        };
        let (group, kind) = match resource_type.rsplit_once('/') {
            Some((group, kind)) => (group, kind),
            None => ("core", resource_type),
        };
        let group_ok = !group.is_empty()
            && group.len() <= 253
            && group
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        let kind_ok = kind.len() <= 63
            && kind.starts_with(|c: char| c.is_ascii_alphabetic())
            && kind.bytes().all(|b| b.is_ascii_alphanumeric());
        if !group_ok || !kind_ok {
            return Err(invalid_type());
        }
        let group = if group.eq_ignore_ascii_case("core") {
            String::new()
        } else {
            group.to_ascii_lowercase()
        };
        let Some(api_version) = api_version.filter(|v| !v.is_empty()) else {
            return Err(ExtensionError::invalid(
                k8s_codes::NULL_API_VERSION,
                "/apiVersion",
                format!(
                    "The resource type '{resource_type}' needs an apiVersion, the Kubernetes version such as 'v1'."
                ),
            ));
        };
        let version = match api_version.rsplit_once('/') {
            Some((prefix, version)) if prefix == group => version,
            Some(_) => "",
            None => api_version,
        };
        if version.is_empty()
            || version.len() > 63
            || !version.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(ExtensionError::invalid(
                k8s_codes::INVALID_API_VERSION,
                "/apiVersion",
                format!(
                    "The apiVersion '{api_version}' is not a Kubernetes version of the group of '{resource_type}' \
                     (such as 'v1' or 'v1beta1')."
                ),
            ));
        }
        Ok(TypeName {
            group,
            version: version.to_owned(),
            kind: kind.to_owned(),
        })
    }

    /// The manifest's `apiVersion`: `v1` for the core group, `<group>/<version>` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Kind` or `group/Kind`, for messages.
    pub fn display(&self) -> String {
        if self.group.is_empty() {
            format!("{} ({})", self.kind, self.version)
        } else {
            format!("{} ({}/{})", self.kind, self.group, self.version)
        }
    }
}

/// A kind the API server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKind {
    /// The group, version and kind.
    pub name: TypeName,
    /// The REST resource, e.g. `configmaps`.
    pub plural: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

impl ApiKind {
    /// The collection URL of objects in `namespace` (ignored for cluster-wide kinds).
    pub fn collection_url(&self, namespace: Option<&str>) -> String {
        let base = if self.name.group.is_empty() {
            format!("/api/{}", self.name.version)
        } else {
            format!("/apis/{}/{}", self.name.group, self.name.version)
        };
        match namespace {
            Some(namespace) if self.namespaced => {
                format!("{base}/namespaces/{namespace}/{}", self.plural)
            }
            _ => format!("{base}/{}", self.plural),
        }
    }

    /// Whether this is `apiextensions.k8s.io/CustomResourceDefinition`.
    pub fn is_crd(&self) -> bool {
        self.name.group == "apiextensions.k8s.io" && self.name.kind == "CustomResourceDefinition"
    }

    /// Whether this is `core/Namespace`.
    pub fn is_namespace(&self) -> bool {
        self.name.group.is_empty() && self.name.kind == "Namespace"
    }

    /// Whether this is `core/Secret`.
    pub fn is_secret(&self) -> bool {
        self.name.group.is_empty() && self.name.kind == "Secret"
    }
}

/// One group-version's resources as last read, or that it is not served (`None`).
#[derive(Default)]
struct Entry {
    resources: Option<Arc<APIResourceList>>,
    fetched: Option<Instant>,
}

/// A cluster's discovery cache.
#[derive(Default)]
pub struct Discovery {
    entries: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Entry>>>>,
}

impl Discovery {
    fn slot(&self, api_version: &str) -> Arc<tokio::sync::Mutex<Entry>> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(entries.entry(api_version.to_owned()).or_default())
    }

    /// Forgets what is known of `group` (a CRD of that group was just applied).
    pub fn forget_group(&self, group: &str) {
        let prefix = format!("{group}/");
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|api_version, _| !api_version.starts_with(&prefix));
    }

    /// The served kind `name`, or `None` when the API server does not serve it (after one refresh
    /// when the cached answer lacks it). `Err` when discovery itself fails.
    pub async fn resolve(
        &self,
        client: &kube::Client,
        name: &TypeName,
    ) -> Result<Option<ApiKind>, KubeError> {
        let api_version = name.api_version();
        let slot = self.slot(&api_version);
        let mut entry = slot.lock().await;
        if let Some(found) = entry.resources.as_deref().and_then(|list| find(list, name)) {
            return Ok(Some(found));
        }
        let stale = entry
            .fetched
            .is_none_or(|fetched| fetched.elapsed() >= MIN_REFRESH);
        if !stale {
            return Ok(None);
        }
        let fetched = if name.group.is_empty() {
            client.list_core_api_resources(&name.version).await
        } else {
            client.list_api_group_resources(&api_version).await
        };
        entry.fetched = Some(Instant::now());
        entry.resources = match fetched {
            Ok(list) => Some(Arc::new(list)),
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(err) => {
                return Err(KubeError::from_client(
                    err,
                    format!("discover the API group-version {api_version}"),
                ));
            }
        };
        Ok(entry.resources.as_deref().and_then(|list| find(list, name)))
    }

    /// Whether the API server serves the group-version of `name` at all (from the cache, after a
    /// [`Discovery::resolve`]).
    pub async fn serves_group_version(&self, name: &TypeName) -> bool {
        let slot = self.slot(&name.api_version());
        let entry = slot.lock().await;
        entry.resources.is_some()
    }
}

/// The top-level resource of `name`'s kind in `list` (subresources such as `deployments/scale` share the
/// kind and are skipped); an exact kind first, else one differing only in case.
fn find(list: &APIResourceList, name: &TypeName) -> Option<ApiKind> {
    let top_level = || list.resources.iter().filter(|r| !r.name.contains('/'));
    let resource = top_level()
        .find(|r| r.kind == name.kind)
        .or_else(|| top_level().find(|r| r.kind.eq_ignore_ascii_case(&name.kind)))?;
    Some(ApiKind {
        name: TypeName {
            kind: resource.kind.clone(),
            ..name.clone()
        },
        plural: resource.name.clone(),
        namespaced: resource.namespaced,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_parse_in_every_spelling() {
        let cases = [
            ("core/ConfigMap", "v1", "", "v1", "ConfigMap"),
            ("ConfigMap", "v1", "", "v1", "ConfigMap"),
            ("apps/Deployment", "v1", "apps", "v1", "Deployment"),
            ("apps/Deployment", "apps/v1", "apps", "v1", "Deployment"),
            (
                "apiextensions.k8s.io/CustomResourceDefinition",
                "v1",
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            (
                "karpenter.k8s.aws/EC2NodeClass",
                "v1beta1",
                "karpenter.k8s.aws",
                "v1beta1",
                "EC2NodeClass",
            ),
        ];
        for (resource_type, api_version, group, version, kind) in cases {
            let name = TypeName::parse(resource_type, Some(api_version)).unwrap();
            assert_eq!(
                (
                    name.group.as_str(),
                    name.version.as_str(),
                    name.kind.as_str()
                ),
                (group, version, kind),
                "{resource_type}"
            );
        }
        assert_eq!(
            TypeName::parse("core/Pod", Some("v1"))
                .unwrap()
                .api_version(),
            "v1"
        );
        assert_eq!(
            TypeName::parse("apps/Deployment", Some("v1"))
                .unwrap()
                .api_version(),
            "apps/v1"
        );
    }

    #[test]
    fn bad_types_and_versions_name_their_code() {
        let cases = [
            ("a/b/C", Some("v1"), k8s_codes::INVALID_RESOURCE_TYPE),
            ("apps/", Some("v1"), k8s_codes::INVALID_RESOURCE_TYPE),
            (
                "apps/Deploy-ment",
                Some("v1"),
                k8s_codes::INVALID_RESOURCE_TYPE,
            ),
            ("/Pod", Some("v1"), k8s_codes::INVALID_RESOURCE_TYPE),
            ("core/Pod", None, k8s_codes::NULL_API_VERSION),
            ("core/Pod", Some(""), k8s_codes::NULL_API_VERSION),
            ("core/Pod", Some("v1.2"), k8s_codes::INVALID_API_VERSION),
            (
                "apps/Deployment",
                Some("batch/v1"),
                k8s_codes::INVALID_API_VERSION,
            ),
        ];
        for (resource_type, api_version, code) in cases {
            let err = TypeName::parse(resource_type, api_version).unwrap_err();
            assert_eq!(err.code(), code, "{resource_type} {api_version:?}");
        }
    }

    #[test]
    fn urls_follow_group_and_scope() {
        let kind = |group: &str, plural: &str, namespaced| ApiKind {
            name: TypeName {
                group: group.into(),
                version: "v1".into(),
                kind: "K".into(),
            },
            plural: plural.into(),
            namespaced,
        };
        assert_eq!(
            kind("", "configmaps", true).collection_url(Some("apps")),
            "/api/v1/namespaces/apps/configmaps"
        );
        assert_eq!(
            kind("", "namespaces", false).collection_url(Some("apps")),
            "/api/v1/namespaces"
        );
        assert_eq!(
            kind("rbac.authorization.k8s.io", "clusterroles", false).collection_url(None),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        );
    }
}

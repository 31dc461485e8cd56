//! The Kubernetes extension's config, in the two forms Bicep users write, and its `configId`.
//!
//! - The built-in `Kubernetes` 1.0.0: `{ kubeConfig (secure), namespace, context? }`.
//! - The OCI Kubernetes types (`1.33.0`-style versions): `{ clusterType: 'Custom', kubeconfig,
//!   namespace?, context? }`. `clusterType: 'Managed'` (an AKS cluster named by `managedClusterId`,
//!   whose kubeconfig Azure hands out to Azure credentials) is refused: cairn holds no Azure
//!   credentials to fetch it with.
//!
//! Both spellings `kubeConfig` and `kubeconfig` are accepted (the reference extension's schema uses the
//! lower-case one, Bicep's built-in type the other), at the top level or in the reserved `auth` group
//! (`auth: { kubeConfig }`, so that a stack can only take it from a Key Vault reference or a `list*`
//! directive and fetches it again at delete). The value is base64 (as Bicep's types send it) or plain
//! YAML. cairn adds `fieldManager` (default `cairn`) and `force` (take over fields other managers own).
//!
//! `configId` is the lower-case hex SHA-256 of the server URL and the UID of the cluster's `kube-system`
//! namespace, read at [`ExtensionConfig::resolve`]: the same cluster under other credentials has the
//! same id, another cluster behind the same URL (recreated, or a tunnel pointed elsewhere) does not, so
//! a stack never deletes on the wrong cluster. Credentials that may not read `kube-system` fall back to
//! the cluster CA's digest in place of the UID.

use std::fmt;
use std::sync::Arc;

use cairn_extension_sdk::{ExtensionConfig, ExtensionError, Validator, codes};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::cluster::{Cluster, Clusters};
use crate::error::k8s_codes;
use crate::kubeconfig::ParsedKubeconfig;

/// The field manager cairn applies as unless the config names another.
pub const DEFAULT_FIELD_MANAGER: &str = "cairn";

/// The namespace of namespaced objects that name none, when neither the config nor the kubeconfig's
/// context names one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Config properties the extension reads.
const KNOWN: &[&str] = &[
    "kubeConfig",
    "kubeconfig",
    "namespace",
    "context",
    "clusterType",
    "auth",
    "fieldManager",
    "force",
    "managedClusterId",
    "credentialType",
];

/// The parsed config; after [`ExtensionConfig::resolve`] it also holds a client and the cluster's
/// identity.
#[derive(Clone)]
pub struct K8sConfig {
    kubeconfig: ParsedKubeconfig,
    namespace: Option<String>,
    field_manager: String,
    force: bool,
    resolved: Option<Resolved>,
}

#[derive(Clone)]
struct Resolved {
    cluster: Arc<Cluster>,
    identity: String,
}

impl fmt::Debug for K8sConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("K8sConfig")
            .field("context", &self.kubeconfig.context())
            .field("server", &self.kubeconfig.server())
            .field("namespace", &self.namespace)
            .field("field_manager", &self.field_manager)
            .field("force", &self.force)
            .field("kubeconfig", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl K8sConfig {
    /// The kubeconfig and its selected context.
    pub fn kubeconfig(&self) -> &ParsedKubeconfig {
        &self.kubeconfig
    }

    /// The namespace of namespaced objects that name none: the config's, else the kubeconfig context's,
    /// else `default`.
    pub fn default_namespace(&self) -> &str {
        self.namespace
            .as_deref()
            .or(self.kubeconfig.namespace())
            .unwrap_or(DEFAULT_NAMESPACE)
    }

    /// The field manager server-side apply runs as.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Whether every apply takes over conflicting fields.
    pub fn force(&self) -> bool {
        self.force
    }

    /// The cluster, once [`ExtensionConfig::resolve`] has reached it.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.resolved.as_ref().map(|resolved| &resolved.cluster)
    }

    fn parse(object: &Map<String, Value>) -> Result<K8sConfig, ExtensionError> {
        let mut validator = Validator::new();
        for key in object.keys() {
            validator.check(
                KNOWN.contains(&key.as_str()),
                codes::INVALID_CONFIG,
                format!("/config/{key}"),
                format!(
                    "'{key}' is not a Kubernetes config property (known: kubeConfig (or kubeconfig), namespace, \
                     context, clusterType, auth, fieldManager, force)."
                ),
            );
        }
        match object.get("clusterType") {
            None => {}
            Some(Value::String(kind)) if kind == "Custom" => {}
            Some(Value::String(kind)) if kind == "Managed" => {
                return Err(ExtensionError::invalid(
                    codes::INVALID_CONFIG,
                    "/config/clusterType",
                    "clusterType 'Managed' is not supported: it makes the extension fetch an AKS cluster's \
                     kubeconfig from Azure with Azure credentials (managedClusterId, credentialType), and cairn \
                     has none. Use clusterType 'Custom' with the cluster's kubeconfig (for AKS, the output of \
                     `az aks get-credentials --file -`, base64-encoded), from a Key Vault reference or a \
                     listClusterUserCredential output.",
                ));
            }
            Some(_) => validator.error(
                codes::INVALID_CONFIG,
                "/config/clusterType",
                "'clusterType' must be 'Custom' (or 'Managed', which cairn does not support).",
            ),
        }
        for key in ["managedClusterId", "credentialType"] {
            validator.check(
                !object.contains_key(key),
                codes::INVALID_CONFIG,
                format!("/config/{key}"),
                format!("'{key}' belongs to clusterType 'Managed', which cairn does not support."),
            );
        }
        let text = |validator: &mut Validator, key: &str| -> Option<String> {
            match object.get(key) {
                None | Some(Value::Null) => None,
                Some(Value::String(value)) if !value.trim().is_empty() => Some(value.clone()),
                Some(_) => {
                    validator.error(
                        codes::INVALID_CONFIG,
                        format!("/config/{key}"),
                        format!("'{key}' must be a non-empty string."),
                    );
                    None
                }
            }
        };
        let namespace = text(&mut validator, "namespace");
        if let Some(namespace) = &namespace {
            validator.check(
                crate::manifest::is_dns_label(namespace),
                codes::INVALID_CONFIG,
                "/config/namespace",
                "'namespace' must be a namespace name (lower-case letters, digits and '-', at most 63).",
            );
        }
        let context = text(&mut validator, "context");
        let field_manager = text(&mut validator, "fieldManager")
            .unwrap_or_else(|| DEFAULT_FIELD_MANAGER.to_owned());
        validator.check(
            field_manager.len() <= 128,
            codes::INVALID_CONFIG,
            "/config/fieldManager",
            "'fieldManager' must be at most 128 characters.",
        );
        let force = match object.get("force") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(force)) => *force,
            Some(Value::String(text)) if text.eq_ignore_ascii_case("true") => true,
            Some(Value::String(text)) if text.eq_ignore_ascii_case("false") => false,
            Some(_) => {
                validator.error(
                    codes::INVALID_CONFIG,
                    "/config/force",
                    "'force' must be true or false.",
                );
                false
            }
        };
        let kubeconfig = kubeconfig_value(object, &mut validator).and_then(|(target, value)| {
            match ParsedKubeconfig::parse(value, context.as_deref()) {
                Ok(parsed) => Some(parsed),
                Err(err) => {
                    validator.error(
                        k8s_codes::INVALID_KUBECONFIG,
                        target,
                        format!("The kubeconfig cannot be used: {err}."),
                    );
                    None
                }
            }
        });
        validator.finish()?;
        let Some(kubeconfig) = kubeconfig else {
            return Err(ExtensionError::internal("The config could not be parsed."));
        };
        Ok(K8sConfig {
            kubeconfig,
            namespace,
            field_manager,
            force,
            resolved: None,
        })
    }
}

/// The kubeconfig value and where it was: `kubeConfig` or `kubeconfig`, at the top level or under
/// `auth`; exactly one of them.
fn kubeconfig_value<'a>(
    object: &'a Map<String, Value>,
    validator: &mut Validator,
) -> Option<(String, &'a str)> {
    let mut found: Vec<(String, &'a Value)> = Vec::new();
    for key in ["kubeConfig", "kubeconfig"] {
        if let Some(value) = object.get(key).filter(|value| !value.is_null()) {
            found.push((format!("/config/{key}"), value));
        }
    }
    match object.get("auth") {
        None | Some(Value::Null) => {}
        Some(Value::Object(auth)) => {
            for key in auth.keys() {
                if key == "kubeConfig" || key == "kubeconfig" {
                    if let Some(value) = auth.get(key).filter(|value| !value.is_null()) {
                        found.push((format!("/config/auth/{key}"), value));
                    }
                } else {
                    validator.error(
                        codes::INVALID_CONFIG,
                        format!("/config/auth/{key}"),
                        format!("'auth.{key}' is not known; 'auth' holds 'kubeConfig'."),
                    );
                }
            }
        }
        Some(_) => {
            validator.error(
                codes::INVALID_CONFIG,
                "/config/auth",
                "'auth' must be an object { kubeConfig }.",
            );
            return None;
        }
    }
    match found.len() {
        0 => {
            validator.error(
                codes::INVALID_CONFIG,
                "/config/kubeConfig",
                "The Kubernetes config needs the secure 'kubeConfig' (or 'kubeconfig', or 'auth.kubeConfig'): \
                 the cluster's kubeconfig, base64-encoded or as YAML.",
            );
            None
        }
        1 => {
            let (target, value) = found.remove(0);
            match value {
                Value::String(text) => Some((target, text.as_str())),
                _ => {
                    validator.error(
                        k8s_codes::INVALID_KUBECONFIG,
                        target,
                        "The kubeconfig must be a string (base64 or YAML).",
                    );
                    None
                }
            }
        }
        _ => {
            let places: Vec<&str> = found.iter().map(|(target, _)| target.as_str()).collect();
            validator.error(
                codes::INVALID_CONFIG,
                found[1].0.clone(),
                format!("Give the kubeconfig once, not at {}.", places.join(" and ")),
            );
            None
        }
    }
}

impl ExtensionConfig for K8sConfig {
    const SECRET_PROPERTIES: &'static [&'static str] = &["kubeConfig", "kubeconfig", "auth"];

    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        match config {
            Some(Value::Object(object)) => K8sConfig::parse(object),
            Some(_) => Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config",
                "The config must be an object.",
            )),
            None => Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config",
                "The Kubernetes extension needs a config with the cluster's 'kubeConfig'.",
            )),
        }
    }

    /// Gets a client for the kubeconfig (cached per credentials) and the cluster's identity.
    async fn resolve(&mut self) -> Result<(), ExtensionError> {
        let cluster = Clusters::global().cluster(&self.kubeconfig).await?;
        let identity = cluster.identity().await?;
        self.resolved = Some(Resolved { cluster, identity });
        Ok(())
    }

    /// Lower-case hex SHA-256 of the server URL and the cluster identity.
    fn config_id(&self) -> Option<String> {
        let resolved = self.resolved.as_ref()?;
        let text = format!("{}\n{}", resolved.cluster.server_url(), resolved.identity);
        Some(data_encoding::HEXLOWER.encode(&Sha256::digest(text.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KUBECONFIG: &str = "\
clusters:
- name: c
  cluster: { server: 'https://127.0.0.1:6443' }
users:
- name: u
  user: { token: s3cr3t-token }
contexts:
- name: ctx
  context: { cluster: c, user: u, namespace: team }
current-context: ctx
";

    fn parse(config: Value) -> Result<K8sConfig, ExtensionError> {
        K8sConfig::from_request(Some(&config))
    }

    fn targets(err: &ExtensionError) -> Vec<String> {
        match &err.error().details {
            Some(details) => details.iter().filter_map(|d| d.target.clone()).collect(),
            None => err.error().target.clone().into_iter().collect(),
        }
    }

    #[test]
    fn both_surfaces_and_both_spellings_parse() {
        let encoded = data_encoding::BASE64.encode(KUBECONFIG.as_bytes());
        let forms = [
            json!({ "kubeConfig": encoded, "namespace": "apps" }),
            json!({ "kubeConfig": KUBECONFIG, "namespace": "apps", "context": "ctx" }),
            json!({ "clusterType": "Custom", "kubeconfig": encoded, "namespace": "apps" }),
            json!({ "namespace": "apps", "auth": { "kubeConfig": encoded } }),
            json!({ "namespace": "apps", "auth": { "kubeconfig": KUBECONFIG } }),
        ];
        for form in forms {
            let config = parse(form.clone()).unwrap_or_else(|err| panic!("{form}: {err}"));
            assert_eq!(config.default_namespace(), "apps");
            assert_eq!(config.field_manager(), "cairn");
            assert!(!config.force());
            assert_eq!(config.kubeconfig().server(), "https://127.0.0.1:6443");
        }
        // Without a namespace in the config, the context's; cairn's own settings.
        let config = parse(json!({ "clusterType": "Custom", "kubeconfig": encoded,
                                   "fieldManager": "ops", "force": true }))
        .unwrap();
        assert_eq!(
            (
                config.default_namespace(),
                config.field_manager(),
                config.force()
            ),
            ("team", "ops", true)
        );
    }

    #[test]
    fn managed_clusters_are_refused_naming_why() {
        let err = parse(json!({ "clusterType": "Managed",
            "managedClusterId": "/subscriptions/x/resourceGroups/y/providers/Microsoft.ContainerService/managedClusters/z",
            "credentialType": "Admin" }))
        .unwrap_err();
        assert_eq!(err.code(), codes::INVALID_CONFIG);
        assert_eq!(targets(&err), ["/config/clusterType"]);
        assert!(err.error().message.contains("Azure credentials"), "{err}");
        assert!(
            err.error().message.contains("clusterType 'Custom'"),
            "{err}"
        );
    }

    #[test]
    fn bad_configs_point_at_each_property_without_quoting_the_kubeconfig() {
        let cases = [
            (json!({ "namespace": "apps" }), vec!["/config/kubeConfig"]),
            (
                json!({ "kubeConfig": KUBECONFIG, "kubeconfig": KUBECONFIG }),
                vec!["/config/kubeconfig"],
            ),
            (
                json!({ "kubeConfig": KUBECONFIG, "auth": { "kubeConfig": KUBECONFIG } }),
                vec!["/config/auth/kubeConfig"],
            ),
            (
                json!({ "kubeConfig": 5, "namespace": "Not_A_Namespace", "colour": "red",
                        "force": "maybe", "clusterType": "Other" }),
                vec![
                    "/config/clusterType",
                    "/config/colour",
                    "/config/force",
                    "/config/kubeConfig",
                    "/config/namespace",
                ],
            ),
            (
                json!({ "kubeconfig": "not: [a kubeconfig s3cr3t-token" }),
                vec!["/config/kubeconfig"],
            ),
            (
                json!({ "kubeConfig": KUBECONFIG, "context": "nope" }),
                vec!["/config/kubeConfig"],
            ),
            (
                json!({ "auth": { "password": "s3cr3t-token" } }),
                vec!["/config/auth/password", "/config/kubeConfig"],
            ),
        ];
        for (config, want) in cases {
            let err = parse(config.clone()).unwrap_err();
            let mut got = targets(&err);
            got.sort();
            assert_eq!(got, want, "{config}: {err:?}");
            let text = format!("{err:?} {:?}", err.error().details);
            assert!(!text.contains("s3cr3t"), "{text}");
        }
        assert!(K8sConfig::from_request(None).is_err());
        assert!(K8sConfig::from_request(Some(&json!("x"))).is_err());
    }

    #[test]
    fn debug_never_shows_the_kubeconfig() {
        let config = parse(json!({ "kubeConfig": KUBECONFIG })).unwrap();
        let text = format!("{config:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("ctx"));
    }
}

//! Clients shared by every request of the process, one per tokio runtime and kubeconfig, so that a
//! stack's many objects do not each pay for a TLS handshake and discovery.
//!
//! Configs are parsed per request without extension state, so the registry is process-wide, keyed by
//! a digest of the kubeconfig: a rotated credential is a new kubeconfig and gets a new client from the
//! next request on, and a client unused for [`IDLE_LIMIT`] is dropped. A kube client's connection pool
//! and request buffer belong to the runtime that created it, and the in-process CLI runs each command
//! on a runtime of its own: clients are therefore keyed by runtime too, and those of runtimes that have
//! shut down are dropped instead of being handed out.
//!
//! Discovery is per cluster (server URL), shared by all credentials for it ([`crate::discovery`]).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};

use cairn_extension_sdk::{ExtensionError, codes};
use k8s_openapi::api::core::v1::Namespace;
use sha2::{Digest, Sha256};
use tokio::runtime::{Handle, Id as RuntimeId};

use crate::discovery::Discovery;
use crate::error::{KubeError, Redactor, k8s_codes};
use crate::kubeconfig::{ParsedKubeconfig, digest};

/// A client unused this long is dropped at the next lookup.
pub const IDLE_LIMIT: Duration = Duration::from_secs(600);

/// How long the cluster's identity is trusted before it is read again.
const IDENTITY_TTL: Duration = Duration::from_secs(30);

/// How long a single API request may take (the host gives a whole extension call 60 seconds).
const READ_TIMEOUT: Duration = Duration::from_secs(40);

/// A client for one kubeconfig on one runtime, with what it learned about its cluster.
pub struct Cluster {
    client: kube::Client,
    server_url: String,
    ca_digest: Option<String>,
    discovery: Arc<Discovery>,
    identity: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("server_url", &self.server_url)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The API server's URL, normalised (lower-case scheme and host, no trailing `/`).
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The cluster's discovery cache.
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// What identifies the cluster apart from its URL: `kube-system:<uid>`, or `ca:<sha256>` when the
    /// credentials may not read the `kube-system` namespace. Cached for [`IDENTITY_TTL`].
    pub async fn identity(&self) -> Result<String, ExtensionError> {
        let mut cached = self.identity.lock().await;
        if let Some((identity, at)) = cached.as_ref()
            && at.elapsed() < IDENTITY_TTL
        {
            return Ok(identity.clone());
        }
        let api: kube::Api<Namespace> = kube::Api::all(self.client.clone());
        let identity = match api.get("kube-system").await {
            Ok(namespace) => match namespace.metadata.uid {
                Some(uid) => format!("kube-system:{uid}"),
                None => {
                    return Err(ExtensionError::new(
                        502,
                        k8s_codes::KUBERNETES_OPERATION_FAILURE,
                        "The API server answered the namespace kube-system without a UID.",
                    ));
                }
            },
            Err(kube::Error::Api(status)) if status.code == 403 => match &self.ca_digest {
                Some(digest) => format!("ca:{digest}"),
                None => {
                    return Err(ExtensionError::new(
                        403,
                        k8s_codes::FORBIDDEN,
                        "The credentials may not read the namespace kube-system, whose UID identifies the \
                         cluster (configId), and the kubeconfig has no certificate-authority-data to identify \
                         it by instead: grant 'get' on namespaces/kube-system or add the cluster's CA.",
                    ));
                }
            },
            Err(err) => {
                return Err(KubeError::from_client(err, "read the cluster's identity")
                    .into_extension_error(&Redactor::new()));
            }
        };
        *cached = Some((identity.clone(), Instant::now()));
        Ok(identity)
    }
}

/// The process's clients.
#[derive(Default)]
pub struct Clusters {
    state: Mutex<State>,
}

type ClientKey = (RuntimeId, String);

#[derive(Default)]
struct State {
    clusters: HashMap<ClientKey, (Arc<Cluster>, Instant)>,
    /// Per runtime, a token held by a task parked on it: the task (and the token) is dropped when the
    /// runtime shuts down.
    runtimes: HashMap<RuntimeId, Weak<()>>,
    /// Discovery per normalised server URL.
    discovery: HashMap<String, Arc<Discovery>>,
}

impl State {
    /// Registers the current runtime (once) and forgets clients of runtimes that are gone or that
    /// were not used for [`IDLE_LIMIT`].
    fn track(&mut self, runtime: &Handle) {
        let id = runtime.id();
        if let std::collections::hash_map::Entry::Vacant(entry) = self.runtimes.entry(id) {
            let token = Arc::new(());
            entry.insert(Arc::downgrade(&token));
            runtime.spawn(async move {
                let _alive = token;
                std::future::pending::<()>().await;
            });
        }
        let dead: Vec<RuntimeId> = self
            .runtimes
            .iter()
            .filter(|(_, token)| token.strong_count() == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.runtimes.remove(&id);
            self.clusters.retain(|(runtime, _), _| *runtime != id);
        }
        self.clusters
            .retain(|_, (_, used)| used.elapsed() < IDLE_LIMIT);
    }
}

static CLUSTERS: LazyLock<Clusters> = LazyLock::new(Clusters::default);

impl Clusters {
    /// The process-wide registry.
    pub fn global() -> &'static Clusters {
        &CLUSTERS
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many clients are cached (for tests).
    pub fn len(&self) -> usize {
        self.lock().clusters.len()
    }

    /// Whether no client is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The client for `kubeconfig` on the current runtime, created on first use. Must be called within
    /// a tokio runtime.
    pub async fn cluster(
        &self,
        kubeconfig: &ParsedKubeconfig,
    ) -> Result<Arc<Cluster>, ExtensionError> {
        let runtime = Handle::current();
        let key = (runtime.id(), digest(kubeconfig));
        {
            let mut state = self.lock();
            state.track(&runtime);
            if let Some((cluster, used)) = state.clusters.get_mut(&key) {
                *used = Instant::now();
                return Ok(Arc::clone(cluster));
            }
        }
        let mut config = kubeconfig.client_config().await.map_err(|err| {
            ExtensionError::invalid(
                k8s_codes::INVALID_KUBECONFIG,
                "/config/kubeConfig",
                format!("The kubeconfig cannot be used: {err}."),
            )
        })?;
        config.read_timeout = Some(READ_TIMEOUT);
        let server_url = normalise_url(&config.cluster_url.to_string());
        let ca_digest = config.root_cert.as_ref().map(|certificates| {
            let mut hasher = Sha256::new();
            for certificate in certificates {
                hasher.update(certificate);
            }
            data_encoding::HEXLOWER.encode(&hasher.finalize())
        });
        let client = kube::Client::try_from(config).map_err(|_| {
            ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config/kubeConfig",
                "The kubeconfig's TLS settings or credentials cannot be used by the Kubernetes client.",
            )
        })?;
        let mut state = self.lock();
        let discovery = Arc::clone(
            state
                .discovery
                .entry(server_url.clone())
                .or_insert_with(|| Arc::new(Discovery::default())),
        );
        let cluster = Arc::new(Cluster {
            client,
            server_url,
            ca_digest,
            discovery,
            identity: tokio::sync::Mutex::new(None),
        });
        // Two requests may have built a client at once; the first one in wins, so both use one pool.
        let (cluster, used) = state
            .clusters
            .entry(key)
            .or_insert_with(|| (cluster, Instant::now()));
        *used = Instant::now();
        Ok(Arc::clone(cluster))
    }
}

/// `https://Host:443/` → `https://host:443`: what the configId hashes, so spelling does not matter.
pub fn normalise_url(url: &str) -> String {
    let trimmed = url.trim().trim_end_matches('/');
    match trimmed.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(at) => rest.split_at(at),
                None => (rest, ""),
            };
            format!(
                "{}://{}{path}",
                scheme.to_ascii_lowercase(),
                authority.to_ascii_lowercase()
            )
        }
        None => trimmed.to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalised() {
        assert_eq!(
            normalise_url("HTTPS://Kube.Example:6443/"),
            "https://kube.example:6443"
        );
        assert_eq!(
            normalise_url("https://kube.example/Prefix/"),
            "https://kube.example/Prefix"
        );
    }
}

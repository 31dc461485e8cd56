//! Pull and push through the OCI distribution API (`oci-client`), with the policy of [`RegistryPolicy`],
//! credentials from [`crate::auth`], every digest checked, and pulled blobs kept in the [`Cache`].

use std::path::PathBuf;
use std::sync::Arc;

use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;

use crate::artifact::{Artifact, Descriptor, ExtensionConfig, ExtensionManifest, sha256_digest};
use crate::auth::{Credentials, RegistryPolicy, credentials_for};
use crate::{ArtifactRef, Cache, OciError, TypesPackage, media};

/// Reads an environment variable.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A pulled extension artifact, every blob checked against its digest.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The reference as asked, with the manifest digest.
    pub reference: ArtifactRef,
    /// The manifest digest.
    pub digest: String,
    /// The checked manifest.
    pub manifest: ExtensionManifest,
    /// The config blob.
    pub config: ExtensionConfig,
    /// The types layer's files.
    pub types: TypesPackage,
    /// The binary for this platform, in the cache, when the artifact has one.
    pub binary: Option<PathBuf>,
}

/// Talks to registries under a policy, caching what it pulls.
#[derive(Clone)]
pub struct OciClient {
    policy: RegistryPolicy,
    cache: Cache,
    credentials: Option<Credentials>,
    env: EnvLookup,
}

impl OciClient {
    /// A client caching under `cache`, reading credentials from the process environment and Docker's config.
    pub fn new(cache: Cache, policy: RegistryPolicy) -> Self {
        Self {
            policy,
            cache,
            credentials: None,
            env: Arc::new(|name| std::env::var(name).ok().filter(|v| !v.is_empty())),
        }
    }

    /// Uses these credentials for every registry instead of looking them up.
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Reads environment variables (and finds Docker's config) through `env`.
    pub fn with_env(mut self, env: EnvLookup) -> Self {
        self.env = env;
        self
    }

    /// The cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// A client for `reference`'s registry and how it authenticates; refuses an untrusted registry.
    async fn connect(
        &self,
        reference: &ArtifactRef,
    ) -> Result<(Client, RegistryAuth, Option<String>), OciError> {
        let plain_http = self.policy.check(&reference.registry)?;
        let credentials = match &self.credentials {
            Some(credentials) => Some(credentials.clone()),
            None => credentials_for(&reference.registry, &|name| (self.env)(name))?,
        };
        let config = ClientConfig {
            protocol: if plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            // One PUT per blob: the artifact's blobs are few, and chunked uploads cost round trips.
            use_monolithic_push: true,
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|error| OciError::Registry {
            registry: reference.registry.clone(),
            message: format!("cannot build the HTTP client: {error}"),
        })?;
        let auth = credentials
            .as_ref()
            .map_or(RegistryAuth::Anonymous, Credentials::to_auth);
        client
            .store_auth_if_needed(&reference.registry, &auth)
            .await;
        Ok((client, auth, credentials.map(|c| c.source)))
    }

    /// The manifest digest a reference names now (a tag resolved by the registry; a digest as given).
    pub async fn resolve(&self, reference: &ArtifactRef) -> Result<String, OciError> {
        if let Some(digest) = &reference.digest {
            return Ok(digest.clone());
        }
        let (client, auth, source) = self.connect(reference).await?;
        let digest = client
            .fetch_manifest_digest(&reference.to_client(), &auth)
            .await
            .map_err(|error| map_error(error, reference, source.as_deref(), "the manifest"))?;
        crate::reference::check_digest(&digest).map_err(|message| OciError::Registry {
            registry: reference.registry.clone(),
            message,
        })?;
        Ok(digest)
    }

    /// Pulls `reference` (or, given, the manifest `digest` in its repository): manifest, config, types and the
    /// binary for `platform` when the artifact enables local deploy and has one. Cached blobs are not fetched
    /// again; everything fetched is checked against its digest before it is cached or used.
    pub async fn pull(&self, reference: &ArtifactRef, platform: &str) -> Result<Pulled, OciError> {
        let shown = reference.to_string();
        let cached_manifest = reference
            .digest
            .as_ref()
            .and_then(|digest| self.cache.read(digest).map(|bytes| (digest.clone(), bytes)));
        let mut connection = None;
        let (digest, manifest_bytes) = match cached_manifest {
            Some(found) => found,
            None => {
                let (client, auth, source) = self.connect(reference).await?;
                let (bytes, digest) = client
                    .pull_manifest_raw(&reference.to_client(), &auth, &[media::MANIFEST])
                    .await
                    .map_err(|error| {
                        map_error(error, reference, source.as_deref(), "the manifest")
                    })?;
                let actual = sha256_digest(&bytes);
                let expected = reference.digest.clone().unwrap_or(digest);
                if actual != expected {
                    return Err(OciError::DigestMismatch {
                        reference: shown,
                        what: "the manifest".into(),
                        expected,
                        actual,
                    });
                }
                self.cache
                    .store(&actual, &bytes, false, &shown, "the manifest")?;
                connection = Some((client, source));
                (actual, bytes)
            }
        };
        let manifest = ExtensionManifest::inspect(&manifest_bytes, &shown)?;
        let pinned = reference.with_digest(&digest);
        let config_bytes = self
            .blob(
                &pinned,
                &manifest.manifest.config,
                false,
                "the config blob",
                &mut connection,
            )
            .await?;
        let config: ExtensionConfig =
            serde_json::from_slice(&config_bytes).map_err(|error| OciError::NotAnExtension {
                reference: shown.clone(),
                message: format!("its config blob is not valid: {error}"),
            })?;
        let types_bytes = self
            .blob(
                &pinned,
                &manifest.types,
                false,
                "the types layer",
                &mut connection,
            )
            .await?;
        let types =
            TypesPackage::from_tgz(&types_bytes).map_err(|message| OciError::NotAnExtension {
                reference: shown.clone(),
                message,
            })?;
        let enabled = config.local_deploy_enabled == Some(true)
            && config
                .supported_architectures
                .as_ref()
                .is_some_and(|platforms| {
                    platforms.iter().any(|p| p.eq_ignore_ascii_case(platform))
                });
        let binary = match manifest.binaries.get(platform) {
            Some(layer) if enabled => {
                // A cached binary was checked when it was cached: not read again (it may be large).
                if !self.cache.contains(&layer.digest) {
                    self.blob(
                        &pinned,
                        layer,
                        true,
                        "the extension binary",
                        &mut connection,
                    )
                    .await?;
                }
                Some(self.cache.blob_path(&layer.digest))
            }
            _ => None,
        };
        Ok(Pulled {
            reference: pinned,
            digest,
            manifest,
            config,
            types,
            binary,
        })
    }

    /// One blob: from the cache, else from the registry, checked against its descriptor and cached.
    async fn blob(
        &self,
        reference: &ArtifactRef,
        descriptor: &Descriptor,
        executable: bool,
        what: &str,
        connection: &mut Option<(Client, Option<String>)>,
    ) -> Result<Vec<u8>, OciError> {
        if let Some(bytes) = self.cache.read(&descriptor.digest) {
            return Ok(bytes);
        }
        if connection.is_none() {
            let (client, _, source) = self.connect(reference).await?;
            *connection = Some((client, source));
        }
        let Some((client, source)) = connection.as_ref() else {
            return Err(OciError::Registry {
                registry: reference.registry.clone(),
                message: "no connection to the registry".into(),
            });
        };
        let mut data =
            Vec::with_capacity(usize::try_from(descriptor.size).unwrap_or(0).min(1 << 28));
        client
            .pull_blob(
                &reference.to_client(),
                descriptor.digest.as_str(),
                &mut data,
            )
            .await
            .map_err(|error| map_error(error, reference, source.as_deref(), what))?;
        if data.len() as u64 != descriptor.size {
            return Err(OciError::DigestMismatch {
                reference: reference.to_string(),
                what: format!("{what} (size)"),
                expected: format!("{} bytes", descriptor.size),
                actual: format!("{} bytes", data.len()),
            });
        }
        self.cache.store(
            &descriptor.digest,
            &data,
            executable,
            &reference.to_string(),
            what,
        )?;
        Ok(data)
    }

    /// Pushes `artifact` to `target` (a tag); refuses to overwrite an existing tag unless `force`. Returns the
    /// manifest digest.
    pub async fn push(
        &self,
        artifact: &Artifact,
        target: &ArtifactRef,
        force: bool,
    ) -> Result<String, OciError> {
        if target.tag.is_none() || target.digest.is_some() {
            return Err(OciError::Publish {
                message: format!("the target '{target}' must name a tag (and no digest)"),
            });
        }
        let (client, auth, source) = self.connect(target).await?;
        let image = target.to_client();
        if !force {
            match client.fetch_manifest_digest(&image, &auth).await {
                Ok(_) => {
                    return Err(OciError::Exists {
                        target: target.to_string(),
                    });
                }
                Err(error) => match map_error(error, target, source.as_deref(), "the manifest") {
                    OciError::NotFound { .. } => {}
                    other => return Err(other),
                },
            }
        }
        for blob in artifact.blobs() {
            client
                .push_blob(&image, &blob.data, &blob.descriptor.digest)
                .await
                .map_err(|error| map_error(error, target, source.as_deref(), "a blob"))?;
        }
        let content_type = http_header(media::MANIFEST);
        client
            .push_manifest_raw(&image, artifact.manifest.clone(), content_type)
            .await
            .map_err(|error| map_error(error, target, source.as_deref(), "the manifest"))?;
        Ok(artifact.digest.clone())
    }
}

fn http_header(value: &'static str) -> http::HeaderValue {
    http::HeaderValue::from_static(value)
}

/// Maps a client error to ours, naming where credentials came from but never their values.
fn map_error(
    error: OciDistributionError,
    reference: &ArtifactRef,
    credentials: Option<&str>,
    what: &str,
) -> OciError {
    let unauthorized = || OciError::Unauthorized {
        registry: reference.registry.clone(),
        repository: reference.repository.clone(),
        credentials: match credentials {
            Some(source) => {
                format!("with the credentials from {source}: check the user and password")
            }
            None => format!(
                "without credentials: log in (Docker's config.json 'auths') or set {} and {}",
                crate::auth::USERNAME_VARIABLE,
                crate::auth::PASSWORD_VARIABLE
            ),
        },
    };
    let not_found = || OciError::NotFound {
        reference: reference.to_string(),
    };
    match error {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => unauthorized(),
        OciDistributionError::ImageManifestNotFoundError(_) => not_found(),
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes.iter().any(|code| {
                matches!(
                    code,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                )
            }) {
                not_found()
            } else if codes
                .iter()
                .any(|code| matches!(code, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                unauthorized()
            } else {
                OciError::Registry {
                    registry: reference.registry.clone(),
                    message: format!(
                        "{what}: {}",
                        envelope
                            .errors
                            .iter()
                            .map(|e| e.message.clone())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                }
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => not_found(),
        OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => unauthorized(),
        OciDistributionError::DigestError(digest_error) => OciError::DigestMismatch {
            reference: reference.to_string(),
            what: what.to_owned(),
            expected: "the digest the manifest names".into(),
            actual: digest_error.to_string(),
        },
        other => OciError::Registry {
            registry: reference.registry.clone(),
            message: format!("{what}: {other}"),
        },
    }
}

//! The transport of an OCI extension: on its first call it pins the digest (registry entry or lock file),
//! pulls the artifact (from the cache when it is there), and starts the binary as a local gRPC extension
//! (`--socket`), which then serves every call. Its types come from the artifact's types layer, without starting
//! the binary, so a types-only artifact still checks resource bodies before deploy.

use std::sync::Arc;

use cairn_extension_contract::transport::{
    BoxFuture, ExtensionTransport, TransportError, TransportRequest, TransportResponse, TypeFiles,
};
use cairn_extension_grpc::{LaunchSpec, LocalProcessTransport};
use tokio::sync::OnceCell;

use crate::lock::{Pin, resolve_pin};
use crate::{ArtifactRef, OciClient, OciError, media};

/// Where an extension's artifact is and how it is pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciSource {
    /// Extension name (the lock file's key with `version`).
    pub name: String,
    /// Extension version.
    pub version: String,
    /// The artifact.
    pub reference: ArtifactRef,
    /// The pin.
    pub pin: Pin,
}

/// What a started OCI extension resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The manifest digest.
    pub digest: String,
    /// The binary run.
    pub binary: std::path::PathBuf,
}

/// Runs a pulled extension binary, pulling and starting it on first use.
pub struct OciTransport {
    source: OciSource,
    client: OciClient,
    running: OnceCell<(Started, Arc<LocalProcessTransport>)>,
}

impl OciTransport {
    /// A transport for `source`; nothing is pulled or started until the first call.
    pub fn new(source: OciSource, client: OciClient) -> Self {
        Self {
            source,
            client,
            running: OnceCell::new(),
        }
    }

    /// The source.
    pub fn source(&self) -> &OciSource {
        &self.source
    }

    /// Pins, pulls and starts the extension (once); later calls return what the first one started.
    pub async fn start(&self) -> Result<&Started, OciError> {
        let (started, _) = self.running().await?;
        Ok(started)
    }

    /// Pins and pulls the artifact (from the cache once it is there): its digest and contents.
    async fn pull(&self) -> Result<(String, crate::Pulled), OciError> {
        let source = &self.source;
        let digest = resolve_pin(
            &self.client,
            &source.name,
            &source.version,
            &source.reference,
            &source.pin,
            false,
        )
        .await?;
        let platform = media::current_platform().unwrap_or("unknown");
        let pulled = self
            .client
            .pull(&source.reference.with_digest(&digest), platform)
            .await?;
        Ok((digest, pulled))
    }

    async fn running(&self) -> Result<&(Started, Arc<LocalProcessTransport>), OciError> {
        self.running
            .get_or_try_init(|| async {
                let source = &self.source;
                let platform = media::current_platform().unwrap_or("unknown");
                let (digest, pulled) = self.pull().await?;
                let binary = pulled.binary.ok_or_else(|| OciError::NoBinary {
                    reference: source.reference.to_string(),
                    platform: platform.to_owned(),
                    available: if pulled.manifest.binaries.is_empty() {
                        "none".to_owned()
                    } else {
                        pulled
                            .manifest
                            .binaries
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                })?;
                let transport = LocalProcessTransport::new(LaunchSpec::new(&binary));
                Ok((Started { digest, binary }, Arc::new(transport)))
            })
            .await
    }
}

impl ExtensionTransport for OciTransport {
    fn send(
        &self,
        request: TransportRequest,
    ) -> BoxFuture<'_, Result<TransportResponse, TransportError>> {
        Box::pin(async move {
            let (_, transport) =
                self.running()
                    .await
                    .map_err(|error| TransportError::Unavailable {
                        message: error.to_string(),
                    })?;
            transport.send(request).await
        })
    }

    /// The artifact's types layer (`index.json` and the files it references).
    fn type_files(&self) -> BoxFuture<'_, Result<Option<TypeFiles>, TransportError>> {
        Box::pin(async move {
            let (_, pulled) = self
                .pull()
                .await
                .map_err(|error| TransportError::Unavailable {
                    message: error.to_string(),
                })?;
            let mut files = TypeFiles::new();
            for (name, bytes) in pulled.types.files {
                let text =
                    String::from_utf8(bytes).map_err(|_| TransportError::InvalidResponse {
                        message: format!("the artifact's type file '{name}' is not UTF-8 text"),
                    })?;
                files.insert(name, text);
            }
            Ok(Some(files))
        })
    }
}

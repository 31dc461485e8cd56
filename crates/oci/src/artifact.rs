//! The extension artifact Bicep publishes: the types layer (`types.tgz`: `index.json` and every file it
//! references), one `extension.bin` layer per platform, the config blob and the manifest; and the checks a
//! pulled manifest must pass.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::{OciError, media};

/// The largest types layer cairn unpacks (a guard against a gzip bomb in a registry's artifact).
const MAX_TYPES_BYTES: u64 = 64 * 1024 * 1024;

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(data))
    )
}

/// Now, as the `org.opencontainers.image.created` annotation (RFC 3339, UTC, seconds).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An OCI image manifest as an extension artifact uses it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`media::MANIFEST`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// [`media::ARTIFACT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The config blob (`OciExtensionV1Config`): camelCase, nulls omitted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionConfig {
    /// Whether the artifact has binaries to run locally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_deploy_enabled: Option<bool>,
    /// The platforms with a binary layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported_architectures: Option<Vec<String>>,
}

/// A blob with its descriptor.
#[derive(Debug, Clone)]
pub struct Blob {
    /// Its descriptor.
    pub descriptor: Descriptor,
    /// Its bytes.
    pub data: Vec<u8>,
}

impl Blob {
    fn new(media_type: &str, data: Vec<u8>, title: Option<&str>) -> Self {
        Self {
            descriptor: Descriptor {
                media_type: media_type.to_owned(),
                digest: sha256_digest(&data),
                size: data.len() as u64,
                annotations: title
                    .map(|title| BTreeMap::from([(media::TITLE.to_owned(), title.to_owned())])),
            },
            data,
        }
    }
}

/// An artifact ready to push or write: manifest bytes, config and layers.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The manifest as pushed (its digest is the artifact's).
    pub manifest: Vec<u8>,
    /// `sha256:` of [`Self::manifest`].
    pub digest: String,
    /// The config blob.
    pub config: Blob,
    /// The types layer, then one binary layer per platform.
    pub layers: Vec<Blob>,
}

impl Artifact {
    /// Builds the artifact Bicep's `publish-extension` writes from a types package and `(platform, binary)`
    /// pairs; `created` is the `org.opencontainers.image.created` annotation (RFC 3339).
    pub fn build(
        types: &TypesPackage,
        binaries: &[(String, Vec<u8>)],
        created: &str,
    ) -> Result<Self, OciError> {
        let mut config = ExtensionConfig::default();
        if !binaries.is_empty() {
            let mut platforms: Vec<String> = Vec::new();
            for platform in media::PLATFORMS {
                if binaries.iter().any(|(p, _)| p == platform) {
                    platforms.push((*platform).to_owned());
                }
            }
            for (platform, _) in binaries {
                if !media::PLATFORMS.contains(&platform.as_str()) {
                    return Err(OciError::Publish {
                        message: format!(
                            "'{platform}' is not a platform Bicep knows ({})",
                            media::PLATFORMS.join(", ")
                        ),
                    });
                }
            }
            if platforms.len() != binaries.len() {
                return Err(OciError::Publish {
                    message: "each platform takes one binary".into(),
                });
            }
            config.local_deploy_enabled = Some(true);
            config.supported_architectures = Some(platforms);
        }
        let config_bytes = serde_json::to_vec(&config).map_err(|error| OciError::Publish {
            message: error.to_string(),
        })?;
        let config = Blob::new(media::CONFIG, config_bytes, None);
        let mut layers = vec![Blob::new(
            media::TYPES_LAYER,
            types.to_tgz()?,
            Some("types.tgz"),
        )];
        for platform in media::PLATFORMS {
            if let Some((_, binary)) = binaries.iter().find(|(p, _)| p == platform) {
                layers.push(Blob::new(
                    &media::binary_layer(platform),
                    binary.clone(),
                    Some("extension.bin"),
                ));
            }
        }
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(media::MANIFEST.to_owned()),
            artifact_type: Some(media::ARTIFACT.to_owned()),
            config: config.descriptor.clone(),
            layers: layers
                .iter()
                .map(|layer| layer.descriptor.clone())
                .collect(),
            annotations: Some(BTreeMap::from([
                (media::SERIALIZATION_FORMAT.to_owned(), "v1".to_owned()),
                (media::CREATED.to_owned(), created.to_owned()),
            ])),
        };
        let manifest = serde_json::to_vec(&manifest).map_err(|error| OciError::Publish {
            message: error.to_string(),
        })?;
        Ok(Self {
            digest: sha256_digest(&manifest),
            manifest,
            config,
            layers,
        })
    }

    /// The config and every layer.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        std::iter::once(&self.config).chain(&self.layers)
    }
}

/// A checked extension manifest: which layer holds the types and which the binaries.
#[derive(Debug, Clone)]
pub struct ExtensionManifest {
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The types layer.
    pub types: Descriptor,
    /// Binary layers by platform.
    pub binaries: BTreeMap<String, Descriptor>,
}

impl ExtensionManifest {
    /// Parses a pulled manifest and checks it is a Bicep extension: its `artifactType` (when present) and the
    /// config media type are Bicep's (compared case-insensitively) and it has exactly one types layer.
    pub fn inspect(bytes: &[u8], reference: &str) -> Result<Self, OciError> {
        let not_extension = |message: String| OciError::NotAnExtension {
            reference: reference.to_owned(),
            message,
        };
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|error| {
            not_extension(format!(
                "its manifest is not an OCI image manifest: {error}"
            ))
        })?;
        if let Some(media_type) = &manifest.media_type
            && !media_type.eq_ignore_ascii_case(media::MANIFEST)
        {
            return Err(not_extension(format!(
                "its manifest media type is '{media_type}'"
            )));
        }
        if let Some(artifact_type) = &manifest.artifact_type
            && !artifact_type.eq_ignore_ascii_case(media::ARTIFACT)
        {
            return Err(not_extension(format!(
                "its artifact type is '{artifact_type}', not '{}'",
                media::ARTIFACT
            )));
        }
        if !manifest
            .config
            .media_type
            .eq_ignore_ascii_case(media::CONFIG)
        {
            return Err(not_extension(format!(
                "its config media type is '{}', not '{}'",
                manifest.config.media_type,
                media::CONFIG
            )));
        }
        let mut types = None;
        let mut binaries = BTreeMap::new();
        for layer in &manifest.layers {
            crate::reference::check_digest(&layer.digest).map_err(not_extension)?;
            if layer.media_type.eq_ignore_ascii_case(media::TYPES_LAYER) {
                if types.replace(layer.clone()).is_some() {
                    return Err(not_extension("it has more than one types layer".into()));
                }
            } else if let Some(platform) = media::platform_of(&layer.media_type)
                && binaries.insert(platform.clone(), layer.clone()).is_some()
            {
                return Err(not_extension(format!("it has two binaries for {platform}")));
            }
        }
        let types = types.ok_or_else(|| not_extension("it has no types layer".into()))?;
        crate::reference::check_digest(&manifest.config.digest).map_err(not_extension)?;
        Ok(Self {
            manifest,
            types,
            binaries,
        })
    }
}

/// The types of an extension: `index.json` and the files it references, by their path in the package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypesPackage {
    /// Relative path (`/`-separated) → contents; always holds `index.json`.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl TypesPackage {
    /// Reads `index.json` and every file it references (`{"$ref": "types.json#/N"}`), transitively, from
    /// the directory holding it; a reference outside that directory is refused.
    pub fn from_index(index: &Path) -> Result<Self, OciError> {
        let base = index.parent().unwrap_or(Path::new("."));
        let mut files = BTreeMap::new();
        let mut pending = vec![(
            "index.json".to_owned(),
            std::fs::read(index).map_err(|error| OciError::io(index, &error))?,
        )];
        while let Some((name, data)) = pending.pop() {
            let value: serde_json::Value =
                serde_json::from_slice(&data).map_err(|error| OciError::Publish {
                    message: format!("the types file '{name}' is not JSON: {error}"),
                })?;
            let mut references = Vec::new();
            collect_file_refs(&value, &mut references);
            files.insert(name, data);
            for reference in references {
                if files.contains_key(&reference) || pending.iter().any(|(n, _)| *n == reference) {
                    continue;
                }
                let relative = Path::new(&reference);
                if relative
                    .components()
                    .any(|c| !matches!(c, Component::Normal(_)))
                {
                    return Err(OciError::Publish {
                        message: format!(
                            "the types reference '{reference}' leaves the directory of index.json"
                        ),
                    });
                }
                let path = base.join(relative);
                let data = std::fs::read(&path).map_err(|error| OciError::io(&path, &error))?;
                pending.push((reference, data));
            }
        }
        Ok(Self { files })
    }

    /// The package as Bicep's `types.tgz` (deterministic: sorted names, no times or owners).
    pub fn to_tgz(&self) -> Result<Vec<u8>, OciError> {
        let io = |error: std::io::Error| OciError::Publish {
            message: format!("cannot build types.tgz: {error}"),
        };
        let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut builder = tar::Builder::new(encoder);
        for (name, data) in &self.files {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_entry_type(tar::EntryType::Regular);
            builder
                .append_data(&mut header, name, data.as_slice())
                .map_err(io)?;
        }
        builder.into_inner().map_err(io)?.finish().map_err(io)
    }

    /// Unpacks a `types.tgz`, refusing paths outside the package and oversized contents.
    pub fn from_tgz(data: &[u8]) -> Result<Self, String> {
        let decoder = flate2::read::GzDecoder::new(data).take(MAX_TYPES_BYTES);
        let mut archive = tar::Archive::new(decoder);
        let mut files = BTreeMap::new();
        for entry in archive.entries().map_err(|error| error.to_string())? {
            let mut entry = entry.map_err(|error| error.to_string())?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = entry
                .path()
                .map_err(|error| error.to_string())?
                .into_owned();
            if path
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
            {
                return Err(format!(
                    "types.tgz holds a path outside it: {}",
                    path.display()
                ));
            }
            let name = path
                .components()
                .filter_map(|c| match c {
                    Component::Normal(part) => part.to_str().map(str::to_owned),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("/");
            let mut data = Vec::new();
            entry
                .read_to_end(&mut data)
                .map_err(|error| error.to_string())?;
            files.insert(name, data);
        }
        if !files.contains_key("index.json") {
            return Err("types.tgz has no index.json".into());
        }
        Ok(Self { files })
    }

    /// `settings` of `index.json` (`name`, `version`, ...), when present.
    pub fn settings(&self) -> Option<serde_json::Value> {
        let index: serde_json::Value =
            serde_json::from_slice(self.files.get("index.json")?).ok()?;
        index.get("settings").cloned()
    }
}

/// The file parts of every `$ref` (`types.json#/3` → `types.json`; `#/3` stays in the same file).
fn collect_file_refs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                if key == "$ref"
                    && let Some(text) = item.as_str()
                {
                    let file = text.split('#').next().unwrap_or_default();
                    if !file.is_empty() && !out.iter().any(|known| known == file) {
                        out.push(file.to_owned());
                    }
                } else {
                    collect_file_refs(item, out);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                collect_file_refs(item, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(dir: &Path) -> TypesPackage {
        std::fs::write(
            dir.join("index.json"),
            r##"{ "resources": { "File@1.0.0": { "$ref": "types.json#/1" } },
                 "settings": { "name": "Local", "version": "1.0.0", "isSingleton": false } }"##,
        )
        .unwrap();
        std::fs::write(
            dir.join("types.json"),
            r##"[ { "$type": "StringType" }, { "$type": "ResourceType", "name": "File@1.0.0", "body": { "$ref": "#/0" } } ]"##,
        )
        .unwrap();
        TypesPackage::from_index(&dir.join("index.json")).unwrap()
    }

    #[test]
    fn builds_bicep_s_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let types = package(dir.path());
        assert_eq!(
            types.files.keys().collect::<Vec<_>>(),
            ["index.json", "types.json"]
        );
        let artifact = Artifact::build(
            &types,
            &[("linux-x64".into(), b"ELF".to_vec())],
            "2026-01-01T00:00:00Z",
        )
        .unwrap();
        let manifest: serde_json::Value = serde_json::from_slice(&artifact.manifest).unwrap();
        assert_eq!(manifest["artifactType"], media::ARTIFACT);
        assert_eq!(manifest["annotations"]["bicep.serialization.format"], "v1");
        assert_eq!(manifest["config"]["mediaType"], media::CONFIG);
        assert_eq!(
            String::from_utf8(artifact.config.data.clone()).unwrap(),
            r#"{"localDeployEnabled":true,"supportedArchitectures":["linux-x64"]}"#
        );
        assert_eq!(
            manifest["layers"][0]["annotations"][media::TITLE],
            "types.tgz"
        );
        assert_eq!(
            manifest["layers"][1]["mediaType"],
            "application/vnd.ms.bicep.provider.layer.v1.linux-x64.binary"
        );
        let checked = ExtensionManifest::inspect(&artifact.manifest, "test").unwrap();
        assert_eq!(checked.binaries.keys().collect::<Vec<_>>(), ["linux-x64"]);
        let unpacked = TypesPackage::from_tgz(&artifact.layers[0].data).unwrap();
        assert_eq!(unpacked, types);
        assert_eq!(unpacked.settings().unwrap()["name"], "Local");
        // The same inputs give the same bytes: the types layer has no timestamps.
        assert_eq!(types.to_tgz().unwrap(), unpacked.to_tgz().unwrap());
        let types_only = Artifact::build(&types, &[], "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(types_only.config.data, b"{}");
        assert_eq!(types_only.layers.len(), 1);
    }

    #[test]
    fn refuses_other_artifacts() {
        let dir = tempfile::tempdir().unwrap();
        let artifact = Artifact::build(&package(dir.path()), &[], "2026-01-01T00:00:00Z").unwrap();
        let mut manifest: serde_json::Value = serde_json::from_slice(&artifact.manifest).unwrap();
        manifest["artifactType"] = "APPLICATION/VND.MS.BICEP.PROVIDER.ARTIFACT".into();
        assert!(ExtensionManifest::inspect(&serde_json::to_vec(&manifest).unwrap(), "r").is_ok());
        manifest["artifactType"] = "application/vnd.example".into();
        let error = ExtensionManifest::inspect(&serde_json::to_vec(&manifest).unwrap(), "r")
            .unwrap_err()
            .to_string();
        assert!(error.contains("artifact type"), "{error}");
        // Without an artifactType (older publishers), the config media type decides.
        manifest.as_object_mut().unwrap().remove("artifactType");
        manifest["config"]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
        let error = ExtensionManifest::inspect(&serde_json::to_vec(&manifest).unwrap(), "r")
            .unwrap_err()
            .to_string();
        assert!(error.contains("config media type"), "{error}");
        let error = ExtensionManifest::inspect(b"not json", "r")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not an OCI image manifest"), "{error}");
    }

    #[test]
    fn refuses_references_outside_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("index.json"),
            r#"{ "resources": { "A@1": { "$ref": "../secret.json#/0" } } }"#,
        )
        .unwrap();
        let error = TypesPackage::from_index(&dir.path().join("index.json"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("leaves the directory"), "{error}");
    }
}

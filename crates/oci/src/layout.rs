//! Publishing to a directory: an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`), which
//! other OCI tools (skopeo, oras) copy into a registry.

use std::path::Path;

use serde_json::{Value, json};

use crate::{Artifact, OciError, media};

/// The annotation naming a manifest in a layout's index.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Writes `artifact` into the layout at `dir` under the name `tag`, creating the layout when needed; an
/// existing `tag` is replaced only with `force`.
pub fn write(dir: &Path, artifact: &Artifact, tag: &str, force: bool) -> Result<(), OciError> {
    let io = |path: &Path, error: std::io::Error| OciError::io(path, &error);
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).map_err(|e| io(&blobs, e))?;
    let index_path = dir.join("index.json");
    let mut index: Value = match std::fs::read(&index_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| OciError::Publish {
            message: format!(
                "{} is not an OCI layout index: {error}",
                index_path.display()
            ),
        })?,
        Err(_) => json!({ "schemaVersion": 2, "mediaType": media::INDEX, "manifests": [] }),
    };
    let manifests = index
        .get_mut("manifests")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| OciError::Publish {
            message: format!("{} has no 'manifests' array", index_path.display()),
        })?;
    let named = |entry: &Value| {
        entry
            .pointer(&format!("/annotations/{}", REF_NAME.replace('/', "~1")))
            .and_then(Value::as_str)
            == Some(tag)
    };
    if manifests.iter().any(named) {
        if !force {
            return Err(OciError::Exists {
                target: format!("{}:{tag}", dir.display()),
            });
        }
        manifests.retain(|entry| !named(entry));
    }
    for blob in artifact.blobs() {
        write_blob(dir, &blob.descriptor.digest, &blob.data)?;
    }
    write_blob(dir, &artifact.digest, &artifact.manifest)?;
    manifests.push(json!({
        "mediaType": media::MANIFEST,
        "artifactType": media::ARTIFACT,
        "digest": artifact.digest,
        "size": artifact.manifest.len(),
        "annotations": { REF_NAME: tag },
    }));
    let layout = dir.join("oci-layout");
    std::fs::write(&layout, br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(|e| io(&layout, e))?;
    let text = serde_json::to_vec_pretty(&index).map_err(|error| OciError::Publish {
        message: error.to_string(),
    })?;
    std::fs::write(&index_path, text).map_err(|e| io(&index_path, e))
}

fn write_blob(dir: &Path, digest: &str, data: &[u8]) -> Result<(), OciError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let path = dir.join("blobs/sha256").join(hex);
    std::fs::write(&path, data).map_err(|error| OciError::io(&path, &error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TypesPackage;
    use std::collections::BTreeMap;

    #[test]
    fn writes_a_layout_and_refuses_to_overwrite_without_force() {
        let types = TypesPackage {
            files: BTreeMap::from([("index.json".to_owned(), b"{}".to_vec())]),
        };
        let artifact = Artifact::build(&types, &[], "2026-01-01T00:00:00Z").unwrap();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &artifact, "1.0.0", false).unwrap();
        let index: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).unwrap()).unwrap();
        assert_eq!(index["manifests"][0]["digest"], artifact.digest.as_str());
        let hex = artifact.digest.strip_prefix("sha256:").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("blobs/sha256").join(hex)).unwrap(),
            artifact.manifest
        );
        let error = write(dir.path(), &artifact, "1.0.0", false).unwrap_err();
        assert!(matches!(error, OciError::Exists { .. }), "{error}");
        write(dir.path(), &artifact, "1.0.0", true).unwrap();
        write(dir.path(), &artifact, "2.0.0", false).unwrap();
        let index: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).unwrap()).unwrap();
        assert_eq!(index["manifests"].as_array().unwrap().len(), 2);
    }
}

//! The content-addressed cache of pulled blobs: `<root>/blobs/sha256/<hex>`, each written through a
//! temporary file and renamed into place only after its digest checked, so a blob in the cache is whole.

use std::path::{Path, PathBuf};

use crate::OciError;
use crate::artifact::sha256_digest;

/// A blob cache under a directory (`$CAIRN_HOME/oci`).
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The cache at `root` (created when first written).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Its directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the blob `digest` lives (whether or not it is there).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.root.join("blobs/sha256").join(hex)
    }

    /// The blob's bytes, when cached.
    pub fn read(&self, digest: &str) -> Option<Vec<u8>> {
        std::fs::read(self.blob_path(digest)).ok()
    }

    /// Whether the blob is cached.
    pub fn contains(&self, digest: &str) -> bool {
        self.blob_path(digest).is_file()
    }

    /// Stores `data` as `digest` after checking it; `executable` makes the file runnable (a binary layer).
    pub fn store(
        &self,
        digest: &str,
        data: &[u8],
        executable: bool,
        reference: &str,
        what: &str,
    ) -> Result<PathBuf, OciError> {
        let actual = sha256_digest(data);
        if actual != digest {
            return Err(OciError::DigestMismatch {
                reference: reference.to_owned(),
                what: what.to_owned(),
                expected: digest.to_owned(),
                actual,
            });
        }
        let path = self.blob_path(digest);
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(|error| OciError::io(dir, &error))?;
        let mut temp =
            tempfile::NamedTempFile::new_in(dir).map_err(|error| OciError::io(dir, &error))?;
        std::io::Write::write_all(&mut temp, data).map_err(|error| OciError::io(dir, &error))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = if executable { 0o755 } else { 0o644 };
            std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(mode))
                .map_err(|error| OciError::io(temp.path(), &error))?;
        }
        #[cfg(not(unix))]
        let _ = executable;
        temp.persist(&path)
            .map_err(|error| OciError::io(&path, &error.error))?;
        Ok(path)
    }

    /// The digests of the cached blobs.
    pub fn list(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.root.join("blobs/sha256")) else {
            return Vec::new();
        };
        let mut digests: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.len() == 64)
            .map(|hex| format!("sha256:{hex}"))
            .collect();
        digests.sort();
        digests
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_only_what_matches_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path());
        let digest = sha256_digest(b"hello");
        assert!(!cache.contains(&digest));
        let path = cache.store(&digest, b"hello", true, "r", "blob").unwrap();
        assert_eq!(cache.read(&digest).unwrap(), b"hello");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o755
            );
        }
        let error = cache
            .store(&digest, b"tampered", false, "r", "blob")
            .unwrap_err();
        assert!(matches!(error, OciError::DigestMismatch { .. }), "{error}");
        assert_eq!(cache.list(), [digest]);
    }
}

//! `cairn.lock.json`, beside the template: each OCI extension `name@version` pinned to the manifest digest its
//! reference named when it was locked. A tag that has moved since is refused until `cairn extension lock
//! --upgrade` records the new digest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::{ArtifactRef, OciClient, OciError};

/// The lock file's name.
pub const FILE_NAME: &str = "cairn.lock.json";

/// Serialises read-modify-write of lock files within this process (extensions resolve concurrently).
static WRITING: Mutex<()> = Mutex::new(());

/// One pinned extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockEntry {
    /// The reference as configured (`br:...`).
    pub reference: String,
    /// The manifest digest it named when locked.
    pub digest: String,
}

/// The lock file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockFile {
    /// Format version (1).
    pub lock_version: u32,
    /// `name@version` → pin.
    pub extensions: BTreeMap<String, LockEntry>,
}

impl LockFile {
    /// Reads `path`; a missing file is an empty lock.
    pub fn load(path: &Path) -> Result<Self, OciError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| OciError::Config {
                path: path.display().to_string(),
                message: format!("not a valid lock file: {error}"),
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                lock_version: 1,
                extensions: BTreeMap::new(),
            }),
            Err(error) => Err(OciError::io(path, &error)),
        }
    }

    /// Writes `path` (through a temporary file, so a reader never sees half of it).
    pub fn save(&self, path: &Path) -> Result<(), OciError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut text = serde_json::to_string_pretty(self).map_err(|error| OciError::Config {
            path: path.display().to_string(),
            message: error.to_string(),
        })?;
        text.push('\n');
        let mut temp =
            tempfile::NamedTempFile::new_in(dir).map_err(|error| OciError::io(dir, &error))?;
        std::io::Write::write_all(&mut temp, text.as_bytes())
            .map_err(|error| OciError::io(path, &error))?;
        temp.persist(path)
            .map_err(|error| OciError::io(path, &error.error))?;
        Ok(())
    }

    /// The key of an extension: `name@version`.
    pub fn key(name: &str, version: &str) -> String {
        format!("{name}@{version}")
    }

    /// The pin of `name@version` (name compared case-insensitively).
    pub fn get(&self, name: &str, version: &str) -> Option<&LockEntry> {
        let wanted = Self::key(name, version).to_ascii_lowercase();
        self.extensions
            .iter()
            .find(|(key, _)| key.to_ascii_lowercase() == wanted)
            .map(|(_, entry)| entry)
    }

    fn set(&mut self, name: &str, version: &str, entry: LockEntry) {
        let wanted = Self::key(name, version).to_ascii_lowercase();
        self.extensions
            .retain(|key, _| key.to_ascii_lowercase() != wanted);
        self.extensions.insert(Self::key(name, version), entry);
    }
}

/// How an extension's digest is pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// A digest given with the reference (the registry file's `digest`).
    Digest(String),
    /// The lock file at this path.
    LockFile(PathBuf),
    /// Nothing: the tag is resolved each time.
    None,
}

/// The manifest digest to use for `name@version` at `reference` under `pin`. With a lock file, an extension
/// not yet in it is added; one whose tag moved is refused unless `upgrade`, which records the new digest.
pub async fn resolve_pin(
    client: &OciClient,
    name: &str,
    version: &str,
    reference: &ArtifactRef,
    pin: &Pin,
    upgrade: bool,
) -> Result<String, OciError> {
    match pin {
        Pin::Digest(digest) => {
            crate::reference::check_digest(digest).map_err(|message| {
                OciError::InvalidReference {
                    reference: reference.to_string(),
                    message,
                }
            })?;
            Ok(digest.clone())
        }
        Pin::None => client.resolve(reference).await,
        Pin::LockFile(path) => {
            let shown = reference.to_string();
            let locked = LockFile::load(path)?.get(name, version).cloned();
            let current = client.resolve(reference).await?;
            if let Some(entry) = &locked
                && !upgrade
            {
                if entry.reference != shown {
                    return Err(OciError::TagMoved {
                        reference: shown,
                        pinned_by: format!("{} (for {})", path.display(), entry.reference),
                        pinned: entry.digest.clone(),
                        current,
                        fix: "the reference changed: run `cairn extension lock --upgrade`".into(),
                    });
                }
                if entry.digest != current {
                    return Err(OciError::TagMoved {
                        reference: shown,
                        pinned_by: path.display().to_string(),
                        pinned: entry.digest.clone(),
                        current,
                        fix: "run `cairn extension lock --upgrade` to accept the new artifact"
                            .into(),
                    });
                }
                return Ok(current);
            }
            record(
                path,
                name,
                version,
                LockEntry {
                    reference: shown,
                    digest: current.clone(),
                },
            )?;
            Ok(current)
        }
    }
}

/// Sets one pin in the lock file at `path`, under the process-wide write lock.
fn record(path: &Path, name: &str, version: &str, entry: LockEntry) -> Result<(), OciError> {
    let _guard = WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut lock = LockFile::load(path)?;
    lock.lock_version = 1;
    lock.set(name, version, entry);
    lock.save(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut lock = LockFile::load(&path).unwrap();
        assert!(lock.extensions.is_empty());
        lock.set(
            "Widgets",
            "1.0.0",
            LockEntry {
                reference: "br:r.example/w:1.0.0".into(),
                digest: format!("sha256:{}", "0".repeat(64)),
            },
        );
        lock.save(&path).unwrap();
        let read = LockFile::load(&path).unwrap();
        assert_eq!(read, lock);
        assert!(read.get("widgets", "1.0.0").is_some());
        assert!(read.get("widgets", "2.0.0").is_none());
        std::fs::write(&path, "{").unwrap();
        assert!(LockFile::load(&path).is_err());
    }
}

//! Confinement for a Local extension a server runs for its API callers: the roots its operator allows and
//! the paths it keeps for itself (data directory, tokens, keys), which Local never reaches.
//!
//! The in-process CLI runs Local on the user's own files and uses none of this: there the template's author
//! and the person running it are the same. On a server they are not, so the template must not choose where
//! the server's process reads and writes.

use std::io;
use std::path::{Path, PathBuf};

use cairn_extension_sdk::{ExtensionError, codes};

use crate::paths::normalise_root;

/// Error code of a config whose root the confinement refuses.
pub const ROOT_NOT_ALLOWED: &str = "RootDirectoryNotAllowed";
/// Error code of every config when the server allows no root.
pub const NO_LOCAL_ROOTS: &str = "LocalRootsNotConfigured";

/// The directories Local may work in, and the paths it must never reach even inside them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    roots: Vec<PathBuf>,
    denied: Vec<PathBuf>,
    /// Device and inode of each denied path that existed at startup, so that a hard link to one (which no
    /// path check can see) is refused too.
    identities: Vec<(u64, u64)>,
}

/// Why a confinement cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfinementError {
    /// A root or denied path cannot be made absolute or resolved.
    #[error("cannot resolve {}: {source}", path.display())]
    Unresolvable {
        /// The path as given.
        path: PathBuf,
        /// What failed.
        #[source]
        source: io::Error,
    },
    /// A root does not exist or is not a directory.
    #[error("the Local root {} is not an existing directory; create it first", .0.display())]
    NotADirectory(PathBuf),
    /// A root lies inside a denied path (e.g. the server's data directory).
    #[error(
        "the Local root {} is inside {}, which the server keeps for itself; choose a directory outside it",
        root.display(),
        denied.display()
    )]
    InsideDenied {
        /// The root as resolved.
        root: PathBuf,
        /// The denied path it lies in.
        denied: PathBuf,
    },
}

impl Confinement {
    /// Allows `roots` (existing directories) and refuses `denied` (files or directories, existing or not)
    /// wherever they are. With no roots, every config is refused.
    pub fn new(
        roots: impl IntoIterator<Item = PathBuf>,
        denied: impl IntoIterator<Item = PathBuf>,
    ) -> Result<Self, ConfinementError> {
        let mut confinement = Confinement {
            roots: Vec::new(),
            denied: Vec::new(),
            identities: Vec::new(),
        };
        for path in denied {
            let resolved = resolve_path(&path)?;
            // The path as spelled and as resolved: a symbolic link to a secret is as secret as its target.
            let spelled =
                std::path::absolute(&path).map_err(|source| ConfinementError::Unresolvable {
                    path: path.clone(),
                    source,
                })?;
            for denied in [resolved, spelled] {
                if !confinement.denied.contains(&denied) {
                    confinement.denied.push(denied);
                }
            }
            if let Some(identity) = identity_of(&path) {
                confinement.identities.push(identity);
            }
        }
        for path in roots {
            let root = resolve_path(&path)?;
            if !std::fs::metadata(&root).is_ok_and(|m| m.is_dir()) {
                return Err(ConfinementError::NotADirectory(path));
            }
            if let Some(denied) = confinement.denied_prefix(&root) {
                return Err(ConfinementError::InsideDenied {
                    root: root.clone(),
                    denied: denied.to_path_buf(),
                });
            }
            if !confinement.roots.contains(&root) {
                confinement.roots.push(root);
            }
        }
        Ok(confinement)
    }

    /// The allowed roots, resolved, in the order given.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The denied paths, resolved (each also as spelled).
    pub fn denied(&self) -> &[PathBuf] {
        &self.denied
    }

    /// Whether `path` (absolute, resolved) is a denied path or inside one.
    pub fn is_denied(&self, path: &Path) -> bool {
        self.denied_prefix(path).is_some()
    }

    fn denied_prefix(&self, path: &Path) -> Option<&Path> {
        self.denied
            .iter()
            .find(|denied| path.starts_with(denied))
            .map(PathBuf::as_path)
    }

    /// Whether the file with this device and inode is a denied path itself (e.g. through a hard link).
    pub fn is_denied_identity(&self, identity: (u64, u64)) -> bool {
        self.identities.contains(&identity)
    }

    /// The root a config's `rootDirectory` stands for: a relative value is taken against the first allowed
    /// root (the server's working directory means nothing to an API caller), and the result must lie in an
    /// allowed root and outside every denied path.
    pub(crate) fn confine_root(&self, given: &Path) -> Result<PathBuf, ExtensionError> {
        let Some(first) = self.roots.first() else {
            return Err(ExtensionError::invalid(
                NO_LOCAL_ROOTS,
                "/config/rootDirectory",
                "This server has no Local roots, so it does not run the Local extension: its operator \
                 must start `cairn serve` with `--local-root DIR` (repeatable) to allow Local under DIR.",
            ));
        };
        let joined = if given.is_relative() {
            first.join(given)
        } else {
            given.to_path_buf()
        };
        let root = normalise_root(&joined).map_err(|err| {
            ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config/rootDirectory",
                format!("The root directory cannot be resolved: {err}."),
            )
        })?;
        let shown = root.display();
        if self.is_denied(&root) {
            return Err(ExtensionError::invalid(
                ROOT_NOT_ALLOWED,
                "/config/rootDirectory",
                format!(
                    "The root directory '{shown}' is inside a location this server keeps for itself \
                     (its data directory, tokens or key files)."
                ),
            ));
        }
        if !self.roots.iter().any(|allowed| root.starts_with(allowed)) {
            let allowed: Vec<String> = self
                .roots
                .iter()
                .map(|r| format!("'{}'", r.display()))
                .collect();
            return Err(ExtensionError::invalid(
                ROOT_NOT_ALLOWED,
                "/config/rootDirectory",
                format!(
                    "The root directory '{shown}' is not inside a Local root of this server; allowed: {} \
                     (the operator sets them with `cairn serve --local-root`).",
                    allowed.join(", ")
                ),
            ));
        }
        Ok(root)
    }
}

fn resolve_path(path: &Path) -> Result<PathBuf, ConfinementError> {
    normalise_root(path).map_err(|source| ConfinementError::Unresolvable {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(unix)]
fn identity_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity_of(_path: &Path) -> Option<(u64, u64)> {
    None
}

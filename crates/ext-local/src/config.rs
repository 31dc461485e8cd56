//! The Local extension's config `{ rootDirectory }` and its `configId`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_extension_sdk::{ExtensionConfig, ExtensionError, codes};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::confine::Confinement;
use crate::paths::normalise_root;

/// The parsed config: the normalised root directory every path is relative to, and on a server the
/// confinement it was checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    given: PathBuf,
    root: PathBuf,
    confinement: Option<Arc<Confinement>>,
}

impl LocalConfig {
    /// A config for `root` (made absolute and normalised).
    pub fn new(root: &Path) -> Result<Self, ExtensionError> {
        let given = root.to_path_buf();
        let root = normalise_root(root).map_err(|err| {
            ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config/rootDirectory",
                format!("The root directory cannot be resolved: {err}."),
            )
        })?;
        Ok(Self {
            given,
            root,
            confinement: None,
        })
    }

    /// The same config under `confinement`: the root is taken again from the value the request gave (a
    /// relative one against the first allowed root) and refused unless the confinement allows it; every
    /// path is then kept out of the confinement's denied paths.
    pub fn confined(self, confinement: &Arc<Confinement>) -> Result<Self, ExtensionError> {
        let root = confinement.confine_root(&self.given)?;
        Ok(Self {
            given: self.given,
            root,
            confinement: Some(Arc::clone(confinement)),
        })
    }

    /// The absolute, normalised root directory (symbolic links in its existing part resolved).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The confinement the config was checked against, if any (none in the in-process CLI).
    pub fn confinement(&self) -> Option<&Confinement> {
        self.confinement.as_deref()
    }
}

impl ExtensionConfig for LocalConfig {
    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        let missing = || {
            ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config/rootDirectory",
                "The Local extension needs a config with 'rootDirectory', the directory all paths are relative to.",
            )
        };
        let config = config.ok_or_else(missing)?;
        let Value::Object(object) = config else {
            return Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config",
                "The config must be an object.",
            ));
        };
        match object.get("rootDirectory") {
            Some(Value::String(root)) if !root.trim().is_empty() => {
                LocalConfig::new(Path::new(root))
            }
            Some(Value::String(_)) => Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config/rootDirectory",
                "'rootDirectory' must not be empty.",
            )),
            Some(_) => Err(ExtensionError::invalid(
                codes::INVALID_CONFIG,
                "/config/rootDirectory",
                "'rootDirectory' must be a string.",
            )),
            None => Err(missing()),
        }
    }

    /// Lower-case hex SHA-256 of the normalised root directory: two configs naming the same directory
    /// (e.g. through `.` or a symbolic link) share an id.
    fn config_id(&self) -> Option<String> {
        let digest = Sha256::digest(self.root.as_os_str().as_encoded_bytes());
        Some(data_encoding::HEXLOWER.encode(&digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_id_is_stable_across_spellings() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("root")).unwrap();
        let plain =
            LocalConfig::from_request(Some(&json!({ "rootDirectory": temp.path().join("root") })))
                .unwrap();
        let dotted = LocalConfig::from_request(Some(
            &json!({ "rootDirectory": temp.path().join("x/../root/.") }),
        ))
        .unwrap();
        assert_eq!(plain.config_id(), dotted.config_id());
        let id = plain.config_id().unwrap();
        assert_eq!(id.len(), 64);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        let other =
            LocalConfig::from_request(Some(&json!({ "rootDirectory": temp.path() }))).unwrap();
        assert_ne!(plain.config_id(), other.config_id());
    }

    #[test]
    fn bad_configs_point_at_root_directory() {
        for config in [
            None,
            Some(json!({})),
            Some(json!({ "rootDirectory": "" })),
            Some(json!({ "rootDirectory": 3 })),
        ] {
            let err = LocalConfig::from_request(config.as_ref()).unwrap_err();
            assert_eq!(err.code(), codes::INVALID_CONFIG);
            assert_eq!(
                err.error().target.as_deref(),
                Some("/config/rootDirectory"),
                "{config:?}"
            );
        }
        let err = LocalConfig::from_request(Some(&json!("x"))).unwrap_err();
        assert_eq!(err.error().target.as_deref(), Some("/config"));
    }
}

//! `bicepconfig.json`: the `extensions` map (alias → `br:` reference) and `moduleAliases.br`, found beside the
//! template or in a directory above it, as Bicep looks for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::OciError;

/// The file name Bicep looks for.
pub const FILE_NAME: &str = "bicepconfig.json";

/// What cairn reads of a `bicepconfig.json`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BicepConfig {
    /// `extensions`: alias → `br:...`, `br/<alias>:...` or `builtin:`.
    #[serde(default)]
    pub extensions: BTreeMap<String, String>,
    /// `moduleAliases`.
    #[serde(default)]
    pub module_aliases: ModuleAliases,
}

/// `moduleAliases` (only `br` matters to extensions).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ModuleAliases {
    /// `br`: alias → registry and path.
    #[serde(default)]
    pub br: BTreeMap<String, BrAlias>,
}

/// One `moduleAliases.br.<alias>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrAlias {
    /// The registry host.
    pub registry: String,
    /// A repository prefix.
    #[serde(default)]
    pub module_path: Option<String>,
}

impl BicepConfig {
    /// Parses the file's text (comments allowed, as Bicep allows them).
    pub fn parse(text: &str) -> Result<Self, String> {
        let node = cairn_json::parse(text).map_err(|error| {
            let index = cairn_json::LineIndex::new(text);
            let at = index.line_col(text, error.span.start as usize);
            format!("not valid JSON at line {} column {}", at.line, at.column)
        })?;
        serde_json::from_value(node.to_json()).map_err(|error| error.to_string())
    }

    /// Finds and reads the `bicepconfig.json` for a template in `dir`: the nearest one in `dir` or above.
    pub fn find(dir: &Path) -> Result<Option<(PathBuf, Self)>, OciError> {
        let mut current = Some(dir);
        while let Some(candidate) = current {
            let path = candidate.join(FILE_NAME);
            if path.is_file() {
                let text =
                    std::fs::read_to_string(&path).map_err(|error| OciError::io(&path, &error))?;
                let config = Self::parse(&text).map_err(|message| OciError::Config {
                    path: path.display().to_string(),
                    message,
                })?;
                return Ok(Some((path, config)));
            }
            current = candidate.parent();
        }
        Ok(None)
    }

    /// `moduleAliases.br.<alias>`.
    pub fn br_alias(&self, alias: &str) -> Option<&BrAlias> {
        self.module_aliases.br.get(alias)
    }

    /// The OCI reference of an extension alias, when it names one (`builtin:` entries do not).
    pub fn extension_reference(&self, alias: &str) -> Option<&str> {
        self.extensions
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(alias))
            .map(|(_, value)| value.as_str())
            .filter(|value| value.starts_with("br:") || value.starts_with("br/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_nearest_file_upwards() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        assert!(BicepConfig::find(&nested).unwrap().is_none());
        std::fs::write(
            dir.path().join(FILE_NAME),
            r#"{ "extensions": { "widgets": "br:r.example/w:1", "k8s": "builtin:" } }"#,
        )
        .unwrap();
        let (path, config) = BicepConfig::find(&nested).unwrap().unwrap();
        assert_eq!(path, dir.path().join(FILE_NAME));
        assert_eq!(
            config.extension_reference("Widgets"),
            Some("br:r.example/w:1")
        );
        assert_eq!(config.extension_reference("k8s"), None);
        std::fs::write(nested.join(FILE_NAME), "{ \"extensions\": [ }").unwrap();
        let error = BicepConfig::find(&nested).unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
    }
}

//! The rules file: the level of `stacks-extensibility-compat` per file (with glob overrides), and per-extension lists
//! of secure and required config properties.
//!
//! Shape (JSON with comments):
//!
//! ```json
//! { "analyzers": { "rules": { "stacks-extensibility-compat": {
//!       "level": "warning",
//!       "fileOverrides": [ { "files": ["*.stack.json", "stacks/**/*.json"], "level": "error" } ] } } },
//!   "secureProperties": { "Kubernetes": ["kubeConfig"] },
//!   "requiredProperties": { "Kubernetes": ["namespace"] } }
//! ```
//!
//! Also read, for the seed designs and Bicep: `analyzers.core.rules`, a top-level `rules`, the rule names
//! `stacks-extensibility-compatibility` (seed 000) and `stacks-compatibility` (seed 002), `fileOverrides` as a
//! `{ glob: level }` map (seed 000), `levelOverrides` and `includedFiles` (seed 002).

use cairn_json::{Node, NodeKind};

use crate::glob::{Glob, GlobError};

/// The rule's code, as the shipped Bicep linter names it.
pub const RULE_CODE: &str = "stacks-extensibility-compat";

/// Names the rule went by in the seed designs; accepted as aliases.
const RULE_ALIASES: [&str; 3] = [
    RULE_CODE,
    "stacks-extensibility-compatibility",
    "stacks-compatibility",
];

/// How loudly a finding is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Off,
    Info,
    Warning,
    Error,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "off" | "none" => Some(Level::Off),
            "info" => Some(Level::Info),
            "warning" => Some(Level::Warning),
            "error" => Some(Level::Error),
            _ => None,
        }
    }
}

/// Whether the template is validated for a deployment stack (`--stacks`) or for an ordinary deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A stack deployment: findings are errors unless the rules file says otherwise.
    Stacks,
    /// An ordinary deployment: every table row is allowed, so findings are warnings about stacks compatibility.
    Standard,
}

impl Mode {
    pub fn default_level(self) -> Level {
        match self {
            Mode::Stacks => Level::Error,
            Mode::Standard => Level::Warning,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOverride {
    pub files: Vec<Glob>,
    pub level: Level,
}

/// The parsed rules file. [`Rules::default`] is "no rules file".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// The rule's level for all files; `None` = the mode's default.
    pub level: Option<Level>,
    /// Later overrides win over earlier ones.
    pub file_overrides: Vec<FileOverride>,
    /// Seed 002 `includedFiles`: files outside these globs are not checked.
    pub included_files: Option<Vec<Glob>>,
    /// Extension name (case-insensitive) → config properties that are secure.
    pub secure_properties: Vec<(String, Vec<String>)>,
    /// Extension name (case-insensitive) → config properties that must have a value.
    pub required_properties: Vec<(String, Vec<String>)>,
}

/// A rules file that cannot be used. `path` is the JSON path of the problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    #[error("the rules file is not valid JSON: {0}")]
    Json(String),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: {source}")]
    Glob {
        path: String,
        #[source]
        source: GlobError,
    },
}

fn invalid(path: &str, message: impl Into<String>) -> RulesError {
    RulesError::Invalid {
        path: path.to_string(),
        message: message.into(),
    }
}

impl Rules {
    /// Reads a rules file (JSON with comments).
    pub fn parse(text: &str) -> Result<Rules, RulesError> {
        let root = cairn_json::parse(text).map_err(|e| RulesError::Json(e.to_string()))?;
        Rules::from_node(&root)
    }

    pub fn from_node(root: &Node) -> Result<Rules, RulesError> {
        if root.as_object().is_none() {
            return Err(invalid("", "the rules file must be a JSON object"));
        }
        let mut rules = Rules::default();
        let containers = [
            (
                root.get_ci("analyzers").and_then(|a| a.get_ci("rules")),
                "analyzers.rules",
            ),
            (
                root.get_ci("analyzers")
                    .and_then(|a| a.get_ci("core"))
                    .and_then(|c| c.get_ci("rules")),
                "analyzers.core.rules",
            ),
            (root.get_ci("rules"), "rules"),
        ];
        for (container, container_path) in containers {
            let Some(container) = container else {
                continue;
            };
            for name in RULE_ALIASES {
                if let Some(rule) = container.get_ci(name) {
                    rules.read_rule(rule, &format!("{container_path}['{name}']"))?;
                }
            }
        }
        if let Some(secure) = root.get_ci("secureProperties") {
            rules.secure_properties = property_lists(secure, "secureProperties")?;
        }
        if let Some(required) = root.get_ci("requiredProperties") {
            rules.required_properties = property_lists(required, "requiredProperties")?;
        }
        Ok(rules)
    }

    fn read_rule(&mut self, rule: &Node, path: &str) -> Result<(), RulesError> {
        if rule.as_object().is_none() {
            return Err(invalid(path, "the rule settings must be an object"));
        }
        if let Some(level) = rule.get_ci("level") {
            self.level = Some(level_of(level, &format!("{path}.level"))?);
        }
        if let Some(overrides) = rule.get_ci("fileOverrides") {
            let opath = format!("{path}.fileOverrides");
            match &overrides.kind {
                NodeKind::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let ipath = format!("{opath}[{i}]");
                        let files = match item.get_ci("files") {
                            Some(files) => globs(files, &format!("{ipath}.files"))?,
                            None => return Err(invalid(&ipath, "an override needs 'files'")),
                        };
                        let level = match item.get_ci("level") {
                            Some(level) => level_of(level, &format!("{ipath}.level"))?,
                            None => return Err(invalid(&ipath, "an override needs 'level'")),
                        };
                        self.file_overrides.push(FileOverride { files, level });
                    }
                }
                NodeKind::Object(_) => self.read_override_map(overrides, &opath)?,
                _ => {
                    return Err(invalid(
                        &opath,
                        "'fileOverrides' must be an array of { files, level } or an object of glob → level",
                    ));
                }
            }
        }
        if let Some(overrides) = rule.get_ci("levelOverrides") {
            self.read_override_map(overrides, &format!("{path}.levelOverrides"))?;
        }
        if let Some(included) = rule.get_ci("includedFiles") {
            self.included_files = Some(globs(included, &format!("{path}.includedFiles"))?);
        }
        for key in ["secureProperties", "requiredProperties"] {
            if let Some(lists) = rule.get_ci(key) {
                let parsed = property_lists(lists, &format!("{path}.{key}"))?;
                if key == "secureProperties" {
                    self.secure_properties.extend(parsed);
                } else {
                    self.required_properties.extend(parsed);
                }
            }
        }
        Ok(())
    }

    fn read_override_map(&mut self, map: &Node, path: &str) -> Result<(), RulesError> {
        let Some(members) = map.as_object() else {
            return Err(invalid(path, "must be an object of glob → level"));
        };
        for m in members {
            let mpath = format!("{path}['{}']", m.key);
            let glob = Glob::new(&m.key).map_err(|source| RulesError::Glob {
                path: mpath.clone(),
                source,
            })?;
            let level = level_of(&m.value, &mpath)?;
            self.file_overrides.push(FileOverride {
                files: vec![glob],
                level,
            });
        }
        Ok(())
    }

    /// The level for findings in `file` (the path as given, or relative to the rules file).
    pub fn level_for(&self, file: &str, mode: Mode) -> Level {
        if let Some(included) = &self.included_files
            && !included.iter().any(|g| g.matches(file))
        {
            return Level::Off;
        }
        self.file_overrides
            .iter()
            .rev()
            .find(|o| o.files.iter().any(|g| g.matches(file)))
            .map(|o| o.level)
            .or(self.level)
            .unwrap_or(mode.default_level())
    }

    /// Secure properties the rules file lists for an extension name.
    pub fn secure_properties_for<'s>(
        &'s self,
        extension: &'s str,
    ) -> impl Iterator<Item = &'s str> {
        lists_for(&self.secure_properties, extension)
    }

    /// Required properties the rules file lists for an extension name.
    pub fn required_properties_for<'s>(
        &'s self,
        extension: &'s str,
    ) -> impl Iterator<Item = &'s str> {
        lists_for(&self.required_properties, extension)
    }
}

fn lists_for<'a>(
    lists: &'a [(String, Vec<String>)],
    extension: &'a str,
) -> impl Iterator<Item = &'a str> {
    lists
        .iter()
        .filter(move |(name, _)| name.eq_ignore_ascii_case(extension))
        .flat_map(|(_, props)| props.iter().map(String::as_str))
}

fn level_of(node: &Node, path: &str) -> Result<Level, RulesError> {
    node.as_str().and_then(Level::parse).ok_or_else(|| {
        invalid(
            path,
            "the level must be one of \"error\", \"warning\", \"info\" or \"off\"",
        )
    })
}

fn globs(node: &Node, path: &str) -> Result<Vec<Glob>, RulesError> {
    let items: Vec<&Node> = match &node.kind {
        NodeKind::Array(items) => items.iter().collect(),
        NodeKind::String(_) => vec![node],
        _ => return Err(invalid(path, "must be a list of file patterns")),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let ipath = format!("{path}[{i}]");
            let Some(pattern) = item.as_str() else {
                return Err(invalid(&ipath, "a file pattern must be a string"));
            };
            Glob::new(pattern).map_err(|source| RulesError::Glob {
                path: ipath,
                source,
            })
        })
        .collect()
}

fn property_lists(node: &Node, path: &str) -> Result<Vec<(String, Vec<String>)>, RulesError> {
    let Some(members) = node.as_object() else {
        return Err(invalid(
            path,
            "must be an object of extension name → list of property names",
        ));
    };
    let mut out = Vec::new();
    for m in members {
        let mpath = format!("{path}['{}']", m.key);
        let Some(items) = m.value.as_array() else {
            return Err(invalid(&mpath, "must be a list of property names"));
        };
        let mut props = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(p) => props.push(p.to_string()),
                None => {
                    return Err(invalid(
                        &format!("{mpath}[{i}]"),
                        "a property name must be a string",
                    ));
                }
            }
        }
        out.push((m.key.clone(), props));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_mode() {
        let rules = Rules::default();
        assert_eq!(rules.level_for("main.json", Mode::Stacks), Level::Error);
        assert_eq!(rules.level_for("main.json", Mode::Standard), Level::Warning);
    }

    #[test]
    fn brief_shape_with_overrides() {
        let rules = Rules::parse(
            r#"{ // comments are fine
              "analyzers": { "rules": { "stacks-extensibility-compat": {
                "level": "warning",
                "fileOverrides": [ { "files": ["*.stack.json"], "level": "error" },
                                   { "files": ["modules/**/*.json"], "level": "off" } ] } } },
              "secureProperties": { "hasSecureConfig": ["token"] } }"#,
        )
        .unwrap();
        assert_eq!(rules.level_for("main.json", Mode::Stacks), Level::Warning);
        assert_eq!(
            rules.level_for("x/main.stack.json", Mode::Standard),
            Level::Error
        );
        assert_eq!(
            rules.level_for("modules/a/b.json", Mode::Stacks),
            Level::Off
        );
        assert_eq!(
            rules
                .secure_properties_for("HASSECURECONFIG")
                .collect::<Vec<_>>(),
            vec!["token"]
        );
    }

    #[test]
    fn seed_shapes() {
        let seed000 = Rules::parse(
            r#"{ "rules": { "stacks-extensibility-compatibility": { "level": "info",
                 "fileOverrides": { "*.stack.json": "error" } } } }"#,
        )
        .unwrap();
        assert_eq!(seed000.level_for("a.json", Mode::Stacks), Level::Info);
        assert_eq!(
            seed000.level_for("a.stack.json", Mode::Stacks),
            Level::Error
        );
        let seed002 = Rules::parse(
            r#"{ "rules": { "stacks-compatibility": { "level": "warning", "includedFiles": ["stacks/*"],
                 "levelOverrides": { "*.stack.json": "error" } } } }"#,
        )
        .unwrap();
        assert_eq!(seed002.level_for("other/a.json", Mode::Stacks), Level::Off);
        assert_eq!(
            seed002.level_for("stacks/a.json", Mode::Stacks),
            Level::Warning
        );
        assert_eq!(
            seed002.level_for("stacks/a.stack.json", Mode::Stacks),
            Level::Error
        );
        let bicep = Rules::parse(
            r#"{ "analyzers": { "core": { "rules": { "stacks-extensibility-compat": { "level": "off" } } } } }"#,
        )
        .unwrap();
        assert_eq!(bicep.level_for("a.json", Mode::Stacks), Level::Off);
    }

    #[test]
    fn errors_name_the_path() {
        let e = Rules::parse(
            r#"{ "analyzers": { "rules": { "stacks-extensibility-compat": { "level": "loud" } } } }"#,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("analyzers.rules['stacks-extensibility-compat'].level")
        );
        assert!(matches!(Rules::parse("{"), Err(RulesError::Json(_))));
        assert!(matches!(
            Rules::parse(
                r#"{ "rules": { "stacks-compatibility": { "fileOverrides": { "[x": "error" } } } }"#
            ),
            Err(RulesError::Glob { .. })
        ));
        assert!(Rules::parse(r#"{ "secureProperties": { "k": [1] } }"#).is_err());
    }
}

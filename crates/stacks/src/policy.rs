//! Per-resource policy of a stack: `protect` patterns name resources no operation may delete, `retain` patterns
//! name resources that are detached, never deleted, when they leave the stack (Pulumi's `protect` and
//! `retainOnDelete`, Terraform's `prevent_destroy` and `removed { destroy = false }`).
//!
//! A pattern is a glob (`*` any run of characters, `/` included; `?` one character) matched, ignoring case, against
//! a resource's **selector**: its ARM ID, or for an extension resource `<extension>/<type> <identifiers>` with the
//! identifiers as compact JSON, keys sorted (`local/file {"path":"note-c.txt"}`). When the part of a pattern after
//! the first space is JSON without wildcards, it is put in that canonical form first, so `{"b":1,"a":2}` matches
//! what the stack records as `{"a":2,"b":1}`. Case is ignored because matching more only ever keeps more.

use cairn_arm::ErrorDetail;
use cairn_extension_contract::canonical::to_canonical_string;

use crate::error::codes;
use crate::key::ResourceKey;

/// The selector of a resource key, the text patterns are matched against.
pub fn selector(key: &ResourceKey) -> String {
    match key {
        ResourceKey::Arm(key) => key.id().to_string(),
        ResourceKey::Extensible(key) => format!(
            "{}/{} {}",
            key.extension_name(),
            key.resource_type(),
            key.canonical_identifiers()
        ),
    }
}

/// One glob pattern, folded for matching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// As written, for messages.
    written: String,
    folded: Vec<char>,
}

impl Pattern {
    /// Parses a pattern; an empty or blank one is refused (it could only match nothing or, trimmed, everything).
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        if text.trim().is_empty() {
            return Err(PolicyError::EmptyPattern);
        }
        let normalized = match text.split_once(' ') {
            Some((head, tail)) if !tail.contains(['*', '?']) => {
                match serde_json::from_str::<serde_json::Value>(tail) {
                    Ok(identifiers) => format!("{head} {}", to_canonical_string(&identifiers)),
                    Err(_) => text.to_owned(),
                }
            }
            _ => text.to_owned(),
        };
        Ok(Self {
            written: text.to_owned(),
            folded: fold(&normalized).chars().collect(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.written
    }

    /// Whether the pattern matches the selector of `key`.
    pub fn matches(&self, key: &ResourceKey) -> bool {
        let text: Vec<char> = fold(&selector(key)).chars().collect();
        glob_matches(&self.folded, &text)
    }
}

fn fold(text: &str) -> String {
    text.chars().flat_map(char::to_lowercase).collect()
}

/// Iterative glob match with single-star backtracking: linear in practice, never exponential.
fn glob_matches(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// Why a policy could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("a resource pattern is empty")]
    EmptyPattern,
}

/// A stack's `protect` and `retain` patterns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourcePolicy {
    protect: Vec<Pattern>,
    retain: Vec<Pattern>,
}

impl ResourcePolicy {
    /// No pattern: every resource follows `actionOnUnmanage`.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads the patterns of a stack body (`properties.protect`, `properties.retain`); errors name the property.
    pub fn parse(protect: &[String], retain: &[String]) -> Result<Self, ErrorDetail> {
        let read = |property: &str, patterns: &[String]| {
            patterns
                .iter()
                .enumerate()
                .map(|(index, text)| {
                    Pattern::parse(text).map_err(|error| {
                        ErrorDetail::new(codes::INVALID_RESOURCE_POLICY, error.to_string())
                            .with_target(format!("properties.{property}[{index}]"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            protect: read("protect", protect)?,
            retain: read("retain", retain)?,
        })
    }

    /// The patterns of a stack body (`properties.protect`, `properties.retain`), protection lifted when the
    /// operation says `bypass_protection`. Errors name the pattern's property (`InvalidResourcePolicy`).
    pub fn of_stack(
        properties: &cairn_arm::models::stack::DeploymentStackProperties,
        bypass_protection: bool,
    ) -> Result<Self, ErrorDetail> {
        let policy = Self::parse(
            properties.protect.as_deref().unwrap_or_default(),
            properties.retain.as_deref().unwrap_or_default(),
        )?;
        Ok(if bypass_protection {
            policy.without_protection()
        } else {
            policy
        })
    }

    /// The same policy with protection lifted, for an operation that says to delete protected resources.
    pub fn without_protection(mut self) -> Self {
        self.protect.clear();
        self
    }

    /// The first `protect` pattern matching `key`.
    pub fn protecting(&self, key: &ResourceKey) -> Option<&Pattern> {
        self.protect.iter().find(|p| p.matches(key))
    }

    /// The first `retain` pattern matching `key`.
    pub fn retaining(&self, key: &ResourceKey) -> Option<&Pattern> {
        self.retain.iter().find(|p| p.matches(key))
    }

    /// Whether any `protect` pattern is in force.
    pub fn protects_anything(&self) -> bool {
        !self.protect.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_arm::ResourceId;
    use serde_json::json;

    fn arm(id: &str) -> ResourceKey {
        ResourceKey::arm(&ResourceId::parse(id).unwrap())
    }

    fn file(path: &str) -> ResourceKey {
        ResourceKey::extensible("Local", Some("c1"), "File", &json!({ "path": path }))
    }

    #[test]
    fn patterns_match_selectors_as_globs_ignoring_case() {
        let storage = arm(
            "/subscriptions/s1/resourceGroups/RG1/providers/Microsoft.Storage/storageAccounts/logs",
        );
        let two_keys = ResourceKey::extensible(
            "Kubernetes",
            None,
            "core/ConfigMap",
            &json!({"metadata": {"namespace": "app", "name": "settings"}}),
        );
        let cases: &[(&str, &ResourceKey, bool)] = &[
            ("/subscriptions/*/resourceGroups/rg1/*", &storage, true),
            ("*/storageAccounts/logs", &storage, true),
            ("*/storageAccounts/log", &storage, false),
            ("*/storageAccounts/l?gs", &storage, true),
            (
                "Local/File {\"path\":\"note-c.txt\"}",
                &file("note-c.txt"),
                true,
            ),
            (
                "local/file {\"path\": \"note-c.txt\"}",
                &file("note-c.txt"),
                true,
            ),
            (
                "Local/File {\"path\":\"note-c.txt\"}",
                &file("note-d.txt"),
                false,
            ),
            ("Local/File *", &file("any/where.txt"), true),
            ("Local/Directory *", &file("x"), false),
            (
                "Kubernetes/core/ConfigMap {\"metadata\":{\"name\":\"settings\",\"namespace\":\"app\"}}",
                &two_keys,
                true,
            ),
            ("kubernetes/core/* *\"namespace\":\"app\"*", &two_keys, true),
            ("*", &storage, true),
            ("**", &file("a"), true),
        ];
        for (pattern, key, expected) in cases {
            let parsed = Pattern::parse(pattern).unwrap();
            assert_eq!(
                parsed.matches(key),
                *expected,
                "{pattern} against {}",
                selector(key)
            );
        }
    }

    #[test]
    fn blank_patterns_are_refused_naming_the_property() {
        let error = ResourcePolicy::parse(&["*".into()], &["ok".into(), "  ".into()]).unwrap_err();
        assert_eq!(error.code.as_deref(), Some(codes::INVALID_RESOURCE_POLICY));
        assert_eq!(error.target.as_deref(), Some("properties.retain[1]"));
    }

    /// The definition of a glob, slow and obviously right.
    fn naive(pattern: &[char], text: &[char]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some(('*', rest)) => (0..=text.len()).any(|skip| naive(rest, &text[skip..])),
            Some((&c, rest)) => text
                .split_first()
                .is_some_and(|(&t, tail)| (c == '?' || c == t) && naive(rest, tail)),
        }
    }

    proptest::proptest! {
        #[test]
        fn glob_matching_agrees_with_its_definition(pattern in "[ab*?]{0,8}", text in "[ab]{0,10}") {
            let pattern: Vec<char> = pattern.chars().collect();
            let text: Vec<char> = text.chars().collect();
            proptest::prop_assert_eq!(glob_matches(&pattern, &text), naive(&pattern, &text));
        }
    }

    #[test]
    fn lifting_protection_keeps_retention() {
        let policy = ResourcePolicy::parse(&["*".into()], &["*".into()])
            .unwrap()
            .without_protection();
        assert!(policy.protecting(&file("a")).is_none());
        assert!(policy.retaining(&file("a")).is_some());
    }
}

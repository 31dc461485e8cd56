//! What cairn knows about well-known extensions' config schemas without their types package: which properties are
//! secure, and (for a pinned version) which are required. The stacks linter reads it to judge configs, and a stack's
//! delete to check a config before it calls the extension (a stack keeps no template to read the declaration from).
//!
//! Sources: reference `arm-json-extensions.md` §5 — the built-in Bicep `kubernetes` extension (`Kubernetes` 1.0.0:
//! `namespace` required, `kubeConfig` secure and required, `context` optional) and the OCI Kubernetes types
//! (`kubeconfig` sensitive, discriminated by `clusterType`, so no fixed required list).

/// One catalogue entry.
pub struct KnownExtension {
    /// Extension name, matched case-insensitively.
    pub name: &'static str,
    /// Secure config properties (any version).
    pub secure: &'static [&'static str],
    /// Versions whose config schema is fixed, with the properties they require.
    pub required: &'static [(&'static str, &'static [&'static str])],
}

pub const CATALOGUE: &[KnownExtension] = &[KnownExtension {
    name: "Kubernetes",
    secure: &["kubeConfig", "kubeconfig"],
    required: &[("1.0.0", &["namespace", "kubeConfig"])],
}];

pub fn lookup(name: &str) -> Option<&'static KnownExtension> {
    CATALOGUE.iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// Secure properties the catalogue knows for an extension name.
pub fn secure_properties(name: &str) -> &'static [&'static str] {
    lookup(name).map(|e| e.secure).unwrap_or(&[])
}

/// Required properties the catalogue knows for an extension name and version.
pub fn required_properties(name: &str, version: &str) -> &'static [&'static str] {
    lookup(name)
        .and_then(|e| e.required.iter().find(|(v, _)| *v == version))
        .map(|(_, props)| *props)
        .unwrap_or(&[])
}

/// The properties a known extension version requires that `config` (the object the extension receives) has
/// neither at the top level nor under `auth`, nor as a null. A stack's delete refuses to call the extension
/// without them: an anonymous delete would answer 401 and leave the resource orphaned.
pub fn missing_required(
    name: &str,
    version: &str,
    config: &serde_json::Map<String, serde_json::Value>,
) -> Vec<&'static str> {
    let has = |map: &serde_json::Map<String, serde_json::Value>, key: &str| {
        map.iter()
            .any(|(k, v)| k.eq_ignore_ascii_case(key) && !v.is_null())
    };
    let auth = config
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(crate::config::AUTH))
        .and_then(|(_, v)| v.as_object());
    required_properties(name, version)
        .iter()
        .copied()
        .filter(|p| !has(config, p) && !auth.is_some_and(|a| has(a, p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes() {
        assert!(secure_properties("kubernetes").contains(&"kubeConfig"));
        assert_eq!(
            required_properties("Kubernetes", "1.0.0"),
            &["namespace", "kubeConfig"]
        );
        assert!(required_properties("Kubernetes", "1.33.0").is_empty());
        assert!(secure_properties("MicrosoftGraph").is_empty());
    }

    #[test]
    fn missing_required_properties() {
        let map = |v: serde_json::Value| v.as_object().cloned().unwrap();
        // (extension, version, the config the extension would get, what is missing)
        let cases = [
            (
                "Kubernetes",
                "1.0.0",
                serde_json::json!({"namespace": "a", "kubeConfig": "k"}),
                vec![],
            ),
            (
                "kubernetes",
                "1.0.0",
                serde_json::json!({"namespace": "a", "auth": {"kubeconfig": "k"}}),
                vec![],
            ),
            (
                "Kubernetes",
                "1.0.0",
                serde_json::json!({"namespace": "a"}),
                vec!["kubeConfig"],
            ),
            (
                "Kubernetes",
                "1.0.0",
                serde_json::json!({"kubeConfig": null}),
                vec!["namespace", "kubeConfig"],
            ),
            ("Kubernetes", "1.33.0", serde_json::json!({}), vec![]),
            ("Recorder", "1.0.0", serde_json::json!({}), vec![]),
        ];
        for (name, version, config, want) in cases {
            assert_eq!(
                missing_required(name, version, &map(config.clone())),
                want,
                "{name} {version} {config}"
            );
        }
    }
}

//! What cairn knows about well-known extensions' config schemas without their types package: which properties are
//! secure, and (for a pinned version) which are required.
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
}

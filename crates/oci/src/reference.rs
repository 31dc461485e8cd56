//! Extension references: `br:<registry>/<repository>:<tag>`, `br:<registry>/<repository>@sha256:<hex>` and
//! `br/<alias>:<path>:<tag>` through `bicepconfig.json`'s `moduleAliases.br`.

use std::fmt;

use crate::OciError;
use crate::bicepconfig::BicepConfig;

/// A resolved reference to an artifact in a registry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArtifactRef {
    /// `host[:port]`.
    pub registry: String,
    /// The repository path, lowercase as OCI requires.
    pub repository: String,
    /// The tag, when named by tag.
    pub tag: Option<String>,
    /// The manifest digest, when named by digest (`sha256:<hex>`).
    pub digest: Option<String>,
}

impl ArtifactRef {
    /// Parses `br:...` or `br/<alias>:...` (aliases from `config`; `br/public` is built in).
    pub fn parse(text: &str, config: Option<&BicepConfig>) -> Result<Self, OciError> {
        let invalid = |why: &str| OciError::InvalidReference {
            reference: text.to_owned(),
            message: why.to_owned(),
        };
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("br:") {
            return Self::parse_plain(rest).map_err(|why| invalid(&why));
        }
        let Some(rest) = text.strip_prefix("br/") else {
            return Err(invalid(
                "an extension reference starts with 'br:' or 'br/<alias>:'",
            ));
        };
        let (alias, path) = rest
            .split_once(':')
            .ok_or_else(|| invalid("'br/<alias>:' must be followed by '<path>:<tag>'"))?;
        let (registry, module_path) = match config.and_then(|config| config.br_alias(alias)) {
            Some(found) => (found.registry.clone(), found.module_path.clone()),
            None if alias == "public" => ("mcr.microsoft.com".to_owned(), Some("bicep".to_owned())),
            None => {
                return Err(invalid(&format!(
                    "the alias '{alias}' is not defined in bicepconfig.json moduleAliases.br"
                )));
            }
        };
        let full = match module_path.as_deref().map(|p| p.trim_matches('/')) {
            Some(prefix) if !prefix.is_empty() => format!("{registry}/{prefix}/{path}"),
            _ => format!("{registry}/{path}"),
        };
        Self::parse_plain(&full).map_err(|why| invalid(&why))
    }

    /// Parses `<registry>/<repository>(:<tag>|@<digest>)`.
    pub fn parse_plain(text: &str) -> Result<Self, String> {
        let (name, digest) = match text.split_once('@') {
            Some((name, digest)) => {
                check_digest(digest)?;
                (name, Some(digest.to_owned()))
            }
            None => (text, None),
        };
        let (registry, rest) = name.split_once('/').ok_or(
            "a reference needs a registry and a repository: <registry>/<repository>:<tag>",
        )?;
        if registry.is_empty()
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        {
            return Err(format!("'{registry}' is not a registry host"));
        }
        // A ':' after the last '/' separates the tag (a registry's port comes before the first '/').
        let (repository, tag) = match rest.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag.to_owned())),
            _ => (rest, None),
        };
        if tag.is_none() && digest.is_none() {
            return Err("a reference needs a tag (':<tag>') or a digest ('@sha256:<hex>')".into());
        }
        if let Some(tag) = &tag
            && (tag.is_empty()
                || tag.len() > 128
                || !tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        {
            return Err(format!("'{tag}' is not a valid tag"));
        }
        if repository.is_empty()
            || repository.split('/').any(|part| {
                part.is_empty()
                    || !part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            })
        {
            return Err(format!(
                "'{repository}' is not a valid repository (lowercase letters, digits, '.', '_', '-' and '/')"
            ));
        }
        Ok(Self {
            registry: registry.to_ascii_lowercase(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// The same artifact named by `digest`.
    pub fn with_digest(&self, digest: &str) -> Self {
        Self {
            digest: Some(digest.to_owned()),
            ..self.clone()
        }
    }

    /// The host without port, for trust and loopback checks.
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    pub(crate) fn to_client(&self) -> oci_client::Reference {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            (None, Some(tag)) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            (None, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                "latest".into(),
            ),
        }
    }
}

impl fmt::Display for ArtifactRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "br:{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// The host of `host[:port]` (IPv6 in brackets kept whole).
pub(crate) fn host_of(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry
            .split_once(']')
            .map_or(registry, |(host, _)| &registry[..=host.len()]);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// Checks `sha256:<64 lowercase hex>`.
pub fn check_digest(digest: &str) -> Result<(), String> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "'{digest}' is not a sha256 digest (sha256:<64 hex digits>)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = ArtifactRef::parse("br:127.0.0.1:5000/ext/widgets:1.0.0", None).unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "ext/widgets");
        assert_eq!(r.tag.as_deref(), Some("1.0.0"));
        assert_eq!(r.host(), "127.0.0.1");
        assert_eq!(r.to_string(), "br:127.0.0.1:5000/ext/widgets:1.0.0");
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = ArtifactRef::parse(&format!("br:example.azurecr.io/w@{digest}"), None).unwrap();
        assert_eq!(r.digest.as_deref(), Some(digest.as_str()));
        assert_eq!(r.tag, None);
        let public = ArtifactRef::parse("br/public:extensions/x:1.0", None).unwrap();
        assert_eq!(public.registry, "mcr.microsoft.com");
        assert_eq!(public.repository, "bicep/extensions/x");
    }

    #[test]
    fn aliases_come_from_bicepconfig() {
        let config = BicepConfig::parse(
            r#"{ // comments are allowed
                "moduleAliases": { "br": { "acme": { "registry": "acme.azurecr.io", "modulePath": "bicep/ext" } } },
                "extensions": { "widgets": "br/acme:widgets:2.0.0" } }"#,
        )
        .unwrap();
        let r = ArtifactRef::parse("br/acme:widgets:2.0.0", Some(&config)).unwrap();
        assert_eq!(r.to_string(), "br:acme.azurecr.io/bicep/ext/widgets:2.0.0");
        let error = ArtifactRef::parse("br/nope:x:1", Some(&config)).unwrap_err();
        assert!(
            error.to_string().contains("'nope' is not defined"),
            "{error}"
        );
    }

    #[test]
    fn refuses_bad_references() {
        for (text, expected) in [
            ("oci://x/y:1", "starts with"),
            ("br:x", "registry and a repository"),
            ("br:x/y", "needs a tag"),
            ("br:x/Y:1", "not a valid repository"),
            ("br:x/y:1@sha256:12", "not a sha256 digest"),
            ("br:x/y:bad tag", "not a valid tag"),
            ("br:x//y:1", "not a valid repository"),
        ] {
            let error = ArtifactRef::parse(text, None).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}

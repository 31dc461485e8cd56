//! Which registries cairn talks to and how: the trusted allow-list, plain HTTP (loopback or an explicit insecure
//! registry only), and credentials from the environment or Docker's config file.

use std::fmt;
use std::path::PathBuf;

use crate::OciError;
use crate::reference::host_of;

/// Registries trusted without being named, as Bicep trusts them.
pub const DEFAULT_TRUSTED: &[&str] = &["*.azurecr.io", "mcr.microsoft.com", "ghcr.io"];

/// Environment variable: more trusted registries, comma-separated (`host`, `host:port` or `*.suffix`).
pub const TRUSTED_VARIABLE: &str = "CAIRN_TRUSTED_REGISTRIES";
/// Environment variable: registries reached over plain HTTP, comma-separated (`host:port` or `host`).
pub const INSECURE_VARIABLE: &str = "CAIRN_INSECURE_REGISTRIES";
/// Environment variables: a user and password for every trusted registry (win over Docker's config).
pub const USERNAME_VARIABLE: &str = "CAIRN_REGISTRY_USERNAME";
/// See [`USERNAME_VARIABLE`].
pub const PASSWORD_VARIABLE: &str = "CAIRN_REGISTRY_PASSWORD";

/// Which registries may be used, and which over plain HTTP.
#[derive(Debug, Clone, Default)]
pub struct RegistryPolicy {
    /// Trusted registry patterns beyond [`DEFAULT_TRUSTED`] and loopback.
    pub trusted: Vec<String>,
    /// Registries reached over plain HTTP (also trusted: naming one is a decision about it).
    pub insecure: Vec<String>,
}

impl RegistryPolicy {
    /// The policy from `CAIRN_TRUSTED_REGISTRIES` and `CAIRN_INSECURE_REGISTRIES`.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let list = |name: &str| -> Vec<String> {
            env(name)
                .unwrap_or_default()
                .split(',')
                .map(|item| item.trim().to_ascii_lowercase())
                .filter(|item| !item.is_empty())
                .collect()
        };
        Self {
            trusted: list(TRUSTED_VARIABLE),
            insecure: list(INSECURE_VARIABLE),
        }
    }

    /// Adds a registry reached over plain HTTP (`--insecure-registry`).
    pub fn allow_insecure(&mut self, registry: &str) {
        self.insecure.push(registry.trim().to_ascii_lowercase());
    }

    /// Whether `registry` is used over plain HTTP; refuses a registry that is not trusted.
    pub fn check(&self, registry: &str) -> Result<bool, OciError> {
        let registry = registry.to_ascii_lowercase();
        let host = host_of(&registry);
        let insecure = self
            .insecure
            .iter()
            .any(|item| *item == registry || item == host);
        if is_loopback(host) || insecure {
            return Ok(true);
        }
        let trusted = DEFAULT_TRUSTED
            .iter()
            .copied()
            .chain(self.trusted.iter().map(String::as_str))
            .any(|pattern| matches_pattern(pattern, &registry, host));
        if trusted {
            Ok(false)
        } else {
            Err(OciError::Untrusted {
                registry: registry.clone(),
            })
        }
    }
}

fn matches_pattern(pattern: &str, registry: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")),
        None => pattern == registry || pattern == host,
    }
}

/// Whether `host` is this machine.
pub fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// A user and password for a registry; the password never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user.
    pub username: String,
    password: String,
    /// Where they came from, for messages (never the values).
    pub source: String,
}

impl Credentials {
    /// Credentials given directly (tests, flags).
    pub fn new(username: &str, password: &str, source: &str) -> Self {
        Self {
            username: username.to_owned(),
            password: password.to_owned(),
            source: source.to_owned(),
        }
    }

    pub(crate) fn to_auth(&self) -> oci_client::secrets::RegistryAuth {
        oci_client::secrets::RegistryAuth::Basic(self.username.clone(), self.password.clone())
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"[REDACTED]")
            .field("source", &self.source)
            .finish()
    }
}

/// The credentials for `registry`: `CAIRN_REGISTRY_USERNAME`/`CAIRN_REGISTRY_PASSWORD`, else the `auths`
/// entry of Docker's config file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), else none.
pub fn credentials_for(
    registry: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, OciError> {
    match (env(USERNAME_VARIABLE), env(PASSWORD_VARIABLE)) {
        (Some(username), Some(password)) => {
            return Ok(Some(Credentials::new(
                &username,
                &password,
                "CAIRN_REGISTRY_USERNAME/CAIRN_REGISTRY_PASSWORD",
            )));
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(OciError::Credentials {
                message: "set both CAIRN_REGISTRY_USERNAME and CAIRN_REGISTRY_PASSWORD, or neither"
                    .into(),
            });
        }
        (None, None) => {}
    }
    let path = match env("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir).join("config.json"),
        None => match env("HOME") {
            Some(home) => PathBuf::from(home).join(".docker/config.json"),
            None => return Ok(None),
        },
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    docker_config_credentials(&text, registry, &path.display().to_string())
}

/// Reads `auths.<registry>` of a Docker config file: `auth` (base64 `user:password`) or `username`/`password`.
pub fn docker_config_credentials(
    text: &str,
    registry: &str,
    source: &str,
) -> Result<Option<Credentials>, OciError> {
    // The message names the file only: the file holds secrets.
    let bad = |why: &str| OciError::Credentials {
        message: format!("the Docker config file {source} {why}"),
    };
    let config: serde_json::Value =
        serde_json::from_str(text).map_err(|_| bad("is not valid JSON"))?;
    let Some(auths) = config.get("auths").and_then(|auths| auths.as_object()) else {
        return Ok(None);
    };
    let wanted = registry.to_ascii_lowercase();
    let entry = auths.iter().find(|(key, _)| {
        let key = key.to_ascii_lowercase();
        let key = key
            .strip_prefix("https://")
            .or_else(|| key.strip_prefix("http://"))
            .unwrap_or(&key);
        key.split('/').next() == Some(wanted.as_str())
    });
    let Some((_, entry)) = entry else {
        return Ok(None);
    };
    let source = format!("{source} (auths.{registry})");
    if let Some(encoded) = entry.get("auth").and_then(|auth| auth.as_str())
        && !encoded.is_empty()
    {
        let decoded = data_encoding::BASE64
            .decode(encoded.trim().as_bytes())
            .map_err(|_| bad(&format!("has an 'auth' for {registry} that is not base64")))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| bad(&format!("has an 'auth' for {registry} that is not text")))?;
        let (username, password) = decoded.split_once(':').ok_or_else(|| {
            bad(&format!(
                "has an 'auth' for {registry} without 'user:password'"
            ))
        })?;
        return Ok(Some(Credentials::new(username, password, &source)));
    }
    match (
        entry.get("username").and_then(|v| v.as_str()),
        entry.get("password").and_then(|v| v.as_str()),
    ) {
        (Some(username), Some(password)) => Ok(Some(Credentials::new(username, password, &source))),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_and_plain_http() {
        let policy = RegistryPolicy::from_env(&|name| match name {
            TRUSTED_VARIABLE => Some("registry.example, *.corp.example".into()),
            INSECURE_VARIABLE => Some("10.0.0.5:5000".into()),
            _ => None,
        });
        assert!(policy.check("127.0.0.1:5000").unwrap());
        assert!(policy.check("localhost:5000").unwrap());
        assert!(policy.check("[::1]:5000").unwrap());
        assert!(!policy.check("acme.azurecr.io").unwrap());
        assert!(!policy.check("registry.example:443").unwrap());
        assert!(!policy.check("a.corp.example").unwrap());
        assert!(policy.check("10.0.0.5:5000").unwrap());
        let error = policy.check("evil.example").unwrap_err().to_string();
        assert!(error.contains("CAIRN_TRUSTED_REGISTRIES"), "{error}");
        assert!(policy.check("azurecr.io.evil.example").is_err());
    }

    #[test]
    fn docker_config_auth_is_read_and_never_printed() {
        let encoded = data_encoding::BASE64.encode(b"me:s3cret");
        let text = format!(
            r#"{{ "auths": {{ "https://127.0.0.1:5000/v1/": {{ "auth": "{encoded}" }}, "other.example": {{ "username": "u", "password": "p" }} }} }}"#
        );
        let found = docker_config_credentials(&text, "127.0.0.1:5000", "config.json")
            .unwrap()
            .unwrap();
        assert_eq!(found.username, "me");
        assert_eq!(found.password, "s3cret");
        assert!(!format!("{found:?}").contains("s3cret"));
        let other = docker_config_credentials(&text, "other.example", "c")
            .unwrap()
            .unwrap();
        assert_eq!(other.username, "u");
        assert!(
            docker_config_credentials(&text, "none.example", "c")
                .unwrap()
                .is_none()
        );
        let error = docker_config_credentials(r#"{"auths":{"x":{"auth":"%%%"}}}"#, "x", "c")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not base64") && !error.contains("%%%"),
            "{error}"
        );
    }

    #[test]
    fn environment_credentials_win() {
        let env = |name: &str| match name {
            USERNAME_VARIABLE => Some("env-user".to_owned()),
            PASSWORD_VARIABLE => Some("env-pass".to_owned()),
            _ => None,
        };
        let found = credentials_for("r.example", &env).unwrap().unwrap();
        assert_eq!(found.username, "env-user");
        let half = |name: &str| (name == USERNAME_VARIABLE).then(|| "u".to_owned());
        assert!(credentials_for("r.example", &half).is_err());
    }
}

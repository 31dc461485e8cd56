//! The kubeconfig a config carries: decoded (base64, as Bicep's Kubernetes types send it, or plain
//! YAML), parsed, checked against what an extension serving other people's templates may use, and
//! turned into the client's settings for the chosen context.
//!
//! Only inline credentials are accepted. A kubeconfig names files (`certificate-authority`,
//! `client-certificate`, `client-key`, `tokenFile`) and programs (`exec`, `auth-provider`) that the
//! extension's own process would read or run: a template could then make it send a local file (say,
//! its own service-account token) to a server of the template's choosing, or run a command. Such
//! kubeconfigs are refused with a message naming the setting, never its value.
//!
//! Nothing here ever quotes the kubeconfig: the YAML parser's messages can, so they are replaced by
//! fixed texts.

use std::fmt;

use kube::config::{KubeConfigOptions, Kubeconfig};
use secrecy::{ExposeSecret, SecretString};

/// Why a kubeconfig cannot be used; the texts never quote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    /// The value is empty.
    #[error("the kubeconfig is empty")]
    Empty,
    /// Base64 that does not decode to UTF-8 text.
    #[error("the kubeconfig is base64 but does not decode to UTF-8 text")]
    NotText,
    /// Neither base64 nor YAML a kubeconfig can be read from.
    #[error(
        "the kubeconfig is neither base64 nor a YAML kubeconfig (clusters, users, contexts) that can be read"
    )]
    Unreadable,
    /// The context asked for (or the current one) is not there.
    #[error("{0}")]
    Context(String),
    /// A setting cairn refuses (a file or a program of the extension's host).
    #[error(
        "the kubeconfig's {entry} uses '{setting}', which makes the extension read a file or run a program on \
         its own host; give the credentials inline ({instead})"
    )]
    Refused {
        /// `user 'admin'` or `cluster 'prod'`.
        entry: String,
        /// The refused key.
        setting: &'static str,
        /// What to use instead.
        instead: &'static str,
    },
    /// The cluster entry has no usable server URL.
    #[error("the kubeconfig's cluster '{0}' has no https:// or http:// server URL")]
    NoServer(String),
    /// The client could not be configured from it (certificates that do not parse, and the like).
    #[error("the kubeconfig's {0}")]
    Unusable(&'static str),
}

/// A parsed kubeconfig and the context to use, with the text kept secret.
#[derive(Clone)]
pub struct ParsedKubeconfig {
    text: SecretString,
    kubeconfig: Kubeconfig,
    context: String,
    namespace: Option<String>,
    server: String,
}

impl fmt::Debug for ParsedKubeconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParsedKubeconfig")
            .field("context", &self.context)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl ParsedKubeconfig {
    /// Decodes and parses `value` and selects `context` (or the kubeconfig's current context).
    pub fn parse(value: &str, context: Option<&str>) -> Result<ParsedKubeconfig, KubeconfigError> {
        let text = decode(value)?;
        let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|_| KubeconfigError::Unreadable)?;
        if kubeconfig.clusters.is_empty() && kubeconfig.contexts.is_empty() {
            return Err(KubeconfigError::Unreadable);
        }
        let context_name = match context {
            Some(name) => name.to_owned(),
            None => match &kubeconfig.current_context {
                Some(name) if !name.is_empty() => name.clone(),
                _ if kubeconfig.contexts.len() == 1 => kubeconfig.contexts[0].name.clone(),
                _ => {
                    return Err(KubeconfigError::Context(format!(
                        "the kubeconfig has no current-context and {} contexts; name one in the config's 'context'",
                        kubeconfig.contexts.len()
                    )));
                }
            },
        };
        let named = kubeconfig
            .contexts
            .iter()
            .find(|named| named.name == context_name)
            .ok_or_else(|| {
                KubeconfigError::Context(format!(
                    "the kubeconfig has no context '{context_name}' (it has: {})",
                    names(kubeconfig.contexts.iter().map(|c| c.name.as_str()))
                ))
            })?;
        let selected = named.context.clone().unwrap_or_default();
        let cluster = kubeconfig
            .clusters
            .iter()
            .find(|cluster| cluster.name == selected.cluster)
            .ok_or_else(|| {
                KubeconfigError::Context(format!(
                    "the kubeconfig's context '{context_name}' names the cluster '{}', which it does not define",
                    selected.cluster
                ))
            })?;
        let settings = cluster.cluster.clone().unwrap_or_default();
        let cluster_entry = format!("cluster '{}'", cluster.name);
        if settings.certificate_authority.is_some() {
            return Err(KubeconfigError::Refused {
                entry: cluster_entry,
                setting: "certificate-authority",
                instead: "certificate-authority-data",
            });
        }
        if settings.proxy_url.is_some() {
            return Err(KubeconfigError::Refused {
                entry: cluster_entry,
                setting: "proxy-url",
                instead: "a server the extension reaches directly",
            });
        }
        let server = settings
            .server
            .clone()
            .filter(|server| server.starts_with("https://") || server.starts_with("http://"))
            .ok_or_else(|| KubeconfigError::NoServer(cluster.name.clone()))?;
        if let Some(user_name) = &selected.user {
            let user = kubeconfig
                .auth_infos
                .iter()
                .find(|user| &user.name == user_name)
                .ok_or_else(|| {
                    KubeconfigError::Context(format!(
                        "the kubeconfig's context '{context_name}' names the user '{user_name}', which it does not define"
                    ))
                })?;
            if let Some(auth) = &user.auth_info {
                let entry = format!("user '{}'", user.name);
                let refused = [
                    (
                        auth.exec.is_some(),
                        "exec",
                        "token or client-certificate-data",
                    ),
                    (
                        auth.auth_provider.is_some(),
                        "auth-provider",
                        "token or client-certificate-data",
                    ),
                    (auth.token_file.is_some(), "tokenFile", "token"),
                    (
                        auth.client_certificate.is_some(),
                        "client-certificate",
                        "client-certificate-data",
                    ),
                    (auth.client_key.is_some(), "client-key", "client-key-data"),
                ];
                if let Some((_, setting, instead)) = refused.into_iter().find(|(used, ..)| *used) {
                    return Err(KubeconfigError::Refused {
                        entry,
                        setting,
                        instead,
                    });
                }
            }
        }
        Ok(ParsedKubeconfig {
            text: SecretString::from(text),
            namespace: selected.namespace.clone().filter(|ns| !ns.is_empty()),
            kubeconfig,
            context: context_name,
            server,
        })
    }

    /// The selected context's name.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The selected context's namespace, if it names one.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The selected cluster's server URL, as written.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The decoded kubeconfig text (to digest it; never to print it).
    pub fn text(&self) -> &SecretString {
        &self.text
    }

    /// The client settings for the selected context.
    pub async fn client_config(&self) -> Result<kube::Config, KubeconfigError> {
        let options = KubeConfigOptions {
            context: Some(self.context.clone()),
            cluster: None,
            user: None,
        };
        kube::Config::from_custom_kubeconfig(self.kubeconfig.clone(), &options)
            .await
            .map_err(|err| {
                use kube::config::KubeconfigError as E;
                KubeconfigError::Unusable(match err {
                    E::LoadCertificateAuthority(_) | E::ParseCertificates(_) => {
                        "certificate-authority-data is not a base64 PEM certificate"
                    }
                    E::LoadClientCertificate(_) => {
                        "client-certificate-data is not a base64 PEM certificate"
                    }
                    E::LoadClientKey(_) => "client-key-data is not a base64 PEM key",
                    E::ParseClusterUrl(_) => "server URL cannot be parsed",
                    E::MissingClusterUrl => "cluster has no server URL",
                    _ => "settings cannot be used by the Kubernetes client",
                })
            })
    }
}

/// The kubeconfig text: `value` base64-decoded when it is base64 (line breaks allowed), else `value`
/// itself (plain YAML always holds a `:`, which base64 never does).
pub fn decode(value: &str) -> Result<String, KubeconfigError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(KubeconfigError::Empty);
    }
    let compact: String = trimmed
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let looks_base64 = compact
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'));
    if !looks_base64 {
        return Ok(value.to_owned());
    }
    let bytes = data_encoding::BASE64
        .decode(compact.as_bytes())
        .or_else(|_| data_encoding::BASE64_NOPAD.decode(compact.as_bytes()))
        .or_else(|_| data_encoding::BASE64URL.decode(compact.as_bytes()))
        .or_else(|_| data_encoding::BASE64URL_NOPAD.decode(compact.as_bytes()))
        .map_err(|_| KubeconfigError::Unreadable)?;
    String::from_utf8(bytes).map_err(|_| KubeconfigError::NotText)
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<String> = names.map(|name| format!("'{name}'")).collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}

/// Lower-case hex SHA-256 of the kubeconfig text and context: what tells cached clients apart (a
/// rotated credential is a new kubeconfig, so it gets a new client).
pub fn digest(parsed: &ParsedKubeconfig) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(parsed.text.expose_secret().as_bytes());
    hasher.update([0]);
    hasher.update(parsed.context.as_bytes());
    data_encoding::HEXLOWER.encode(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: one
  cluster:
    server: https://127.0.0.1:6443
- name: two
  cluster:
    server: https://127.0.0.2:6443
users:
- name: admin
  user:
    token: s3cr3t-token
contexts:
- name: first
  context: { cluster: one, user: admin, namespace: apps }
- name: second
  context: { cluster: two, user: admin }
current-context: first
";

    fn base64(text: &str) -> String {
        data_encoding::BASE64.encode(text.as_bytes())
    }

    #[test]
    fn base64_and_plain_yaml_give_the_same_kubeconfig() {
        let plain = ParsedKubeconfig::parse(KUBECONFIG, None).unwrap();
        let encoded = ParsedKubeconfig::parse(&base64(KUBECONFIG), None).unwrap();
        // `base64 -w 76` wraps lines.
        let wrapped: String = base64(KUBECONFIG)
            .as_bytes()
            .chunks(76)
            .map(|chunk| format!("{}\n", std::str::from_utf8(chunk).unwrap()))
            .collect();
        let wrapped = ParsedKubeconfig::parse(&wrapped, None).unwrap();
        for parsed in [&plain, &encoded, &wrapped] {
            assert_eq!(parsed.context(), "first");
            assert_eq!(parsed.namespace(), Some("apps"));
            assert_eq!(parsed.server(), "https://127.0.0.1:6443");
        }
        assert_eq!(digest(&plain), digest(&encoded));
        let second = ParsedKubeconfig::parse(KUBECONFIG, Some("second")).unwrap();
        assert_eq!(
            (second.server(), second.namespace()),
            ("https://127.0.0.2:6443", None)
        );
        assert_ne!(digest(&plain), digest(&second));
    }

    #[test]
    fn unusable_kubeconfigs_are_named_without_quoting_them() {
        let cases: Vec<(String, Option<&str>, &str)> = vec![
            ("   ".into(), None, "empty"),
            (base64("\u{0}\u{ff}"), None, "neither base64 nor"),
            ("token: s3cr3t-token: [".into(), None, "neither base64 nor"),
            (KUBECONFIG.into(), Some("third"), "no context 'third'"),
            (
                KUBECONFIG.replace("current-context: first\n", ""),
                None,
                "no current-context and 2 contexts",
            ),
            (
                KUBECONFIG.replace("token: s3cr3t-token", "tokenFile: /var/run/secrets/token"),
                None,
                "uses 'tokenFile'",
            ),
            (
                KUBECONFIG.replace(
                    "token: s3cr3t-token",
                    "exec: { command: /bin/sh, apiVersion: client.authentication.k8s.io/v1 }",
                ),
                None,
                "uses 'exec'",
            ),
            (
                KUBECONFIG.replace("token: s3cr3t-token", "client-key: /etc/key.pem"),
                None,
                "uses 'client-key'",
            ),
            (
                KUBECONFIG.replace(
                    "server: https://127.0.0.1:6443",
                    "server: https://127.0.0.1:6443\n    certificate-authority: /etc/ca.pem",
                ),
                None,
                "cluster 'one' uses 'certificate-authority'",
            ),
            (
                KUBECONFIG.replace("server: https://127.0.0.1:6443", "server: 127.0.0.1"),
                None,
                "no https:// or http:// server URL",
            ),
        ];
        for (value, context, want) in cases {
            let err = ParsedKubeconfig::parse(&value, context).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(want), "{want}: {text}");
            assert!(!text.contains("s3cr3t"), "{text}");
        }
        let base64_err = ParsedKubeconfig::parse(
            &base64(&KUBECONFIG.replace("current-context: first\n", "")),
            None,
        )
        .unwrap_err();
        assert!(matches!(base64_err, KubeconfigError::Context(_)));
    }

    #[test]
    fn debug_never_shows_the_credentials() {
        let parsed = ParsedKubeconfig::parse(KUBECONFIG, None).unwrap();
        assert!(!format!("{parsed:?}").contains("s3cr3t"));
    }
}

//! Kubernetes failures as the contract's errors: a status and code a stack can act on (409 for conflicts
//! its retry rounds or a `force` can resolve, 503 when the API server cannot be reached), the API
//! server's own message, and never a secret.
//!
//! The API server's messages quote field values (`Invalid value: "..."`), and a Secret's values are
//! secrets: every message built here goes through a [`Redactor`] holding the values of the request
//! being served (the Secret's `data`/`stringData`), so they are cut out before an error leaves the
//! extension. The kubeconfig never reaches the API server, and errors of the client library that could
//! quote it (parsing, credentials) are replaced by fixed messages where they occur.

use cairn_extension_contract::v2::ErrorDetail;
use cairn_extension_sdk::ExtensionError;
use kube::core::Status;

/// Error codes of the Kubernetes extension (the reference extension's where it has one).
pub mod k8s_codes {
    /// The resource type is not `<group>/<Kind>` (400).
    pub const INVALID_RESOURCE_TYPE: &str = "InvalidResourceType";
    /// The request has no `apiVersion` (400).
    pub const NULL_API_VERSION: &str = "NullApiVersion";
    /// The `apiVersion` is not a Kubernetes version such as `v1` (400).
    pub const INVALID_API_VERSION: &str = "InvalidApiVersion";
    /// A property of the manifest is not valid (400).
    pub const INVALID_PROPERTY: &str = "InvalidProperty";
    /// The identifiers are not `{ metadata: { name, namespace? } }` (400).
    pub const INVALID_IDENTIFIER: &str = "InvalidIdentifier";
    /// The kubeconfig cannot be used: not base64 or YAML, no such context, or a credential cairn refuses
    /// to use (400, target `/config/kubeConfig` or `/config/kubeconfig`).
    pub const INVALID_KUBECONFIG: &str = "InvalidKubeconfig";
    /// The API server serves no such group and version (400).
    pub const UNKNOWN_RESOURCE_TYPE: &str = "UnknownResourceType";
    /// The group and version are served but have no such kind, and no CRD is on its way to adding it (400).
    pub const UNKNOWN_RESOURCE_KIND: &str = "UnknownResourceKind";
    /// The object does not exist (404).
    pub const OBJECT_NOT_FOUND: &str = "ObjectNotFound";
    /// Server-side apply found fields owned by another field manager (409); `force` takes them over.
    pub const FIELD_MANAGER_CONFLICT: &str = "FieldManagerConflict";
    /// The namespace the object belongs in does not exist (409: a later round, after the template
    /// creates it, may pass).
    pub const NAMESPACE_NOT_FOUND: &str = "NamespaceNotFound";
    /// The object (or its namespace) is still being deleted after the wait (409: a later round may pass).
    pub const STILL_TERMINATING: &str = "StillTerminating";
    /// A CRD did not become `Established` in time, or its names were not accepted (409 or 400).
    pub const CRD_NOT_ESTABLISHED: &str = "CustomResourceDefinitionNotEstablished";
    /// A resource's `waitFor` condition did not hold in time (409: a later round may find it ready).
    pub const READINESS_TIMEOUT: &str = "ReadinessTimeout";
    /// The API server refused the credentials (401).
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// The credentials lack a permission (403).
    pub const FORBIDDEN: &str = "Forbidden";
    /// The API server cannot be reached, or answered that it is unavailable (503).
    pub const CLUSTER_UNREACHABLE: &str = "ClusterUnreachable";
    /// Any other failure the API server reported (its status; 502 for its own internal errors).
    pub const KUBERNETES_OPERATION_FAILURE: &str = "KubernetesOperationFailure";
}

/// A failure talking to the API server, before it becomes an [`ExtensionError`].
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The API server answered with a failure `Status`.
    #[error("could not {action}: {}", status.message)]
    Api {
        /// What was being done, e.g. `apply ConfigMap default/app`.
        action: String,
        /// The API server's answer.
        status: Box<Status>,
    },
    /// Server-side apply found fields another manager owns.
    #[error("could not {action}: fields owned by {managers:?}")]
    Conflict {
        /// What was being done.
        action: String,
        /// The other field managers, in the API server's order, without repeats.
        managers: Vec<String>,
        /// The conflicting fields (`.data.key`).
        fields: Vec<String>,
    },
    /// The request did not reach the API server or got no answer.
    #[error("could not {action}: the API server cannot be reached ({detail})")]
    Unreachable {
        /// What was being done.
        action: String,
        /// The transport's reason (no secrets: connection and TLS errors only).
        detail: String,
    },
    /// The client failed in another way (a response it could not read, a request it could not build).
    #[error("could not {action}: {detail}")]
    Client {
        /// What was being done.
        action: String,
        /// The client's reason.
        detail: String,
    },
}

impl KubeError {
    /// Classifies a client error met while trying to `action`.
    pub fn from_client(err: kube::Error, action: impl Into<String>) -> KubeError {
        let action = action.into();
        match err {
            kube::Error::Api(status) => {
                if status.code == 409 && status.reason == "Conflict" {
                    let causes = status
                        .details
                        .as_ref()
                        .map(|details| details.causes.as_slice())
                        .unwrap_or_default();
                    let conflicts: Vec<_> = causes
                        .iter()
                        .filter(|cause| cause.reason == "FieldManagerConflict")
                        .collect();
                    if !conflicts.is_empty() {
                        let mut managers = Vec::new();
                        for cause in &conflicts {
                            if let Some(manager) = conflict_manager(&cause.message)
                                && !managers.contains(&manager)
                            {
                                managers.push(manager);
                            }
                        }
                        return KubeError::Conflict {
                            action,
                            managers,
                            fields: conflicts.iter().map(|cause| cause.field.clone()).collect(),
                        };
                    }
                }
                KubeError::Api { action, status }
            }
            kube::Error::HyperError(err) => KubeError::Unreachable {
                action,
                detail: err.to_string(),
            },
            kube::Error::Service(err) => KubeError::Unreachable {
                action,
                detail: service_error_text(err.as_ref()),
            },
            kube::Error::SerdeError(_) | kube::Error::FromUtf8(_) => KubeError::Client {
                action,
                detail: "the API server's answer could not be read".into(),
            },
            other => KubeError::Client {
                action,
                detail: format!("the Kubernetes client failed ({})", variant_name(&other)),
            },
        }
    }

    /// The API server's HTTP status, when it answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            KubeError::Api { status, .. } => Some(status.code),
            KubeError::Conflict { .. } => Some(409),
            _ => None,
        }
    }

    /// The API server's `reason` (`NotFound`, `AlreadyExists`, ...), when it answered.
    pub fn reason(&self) -> Option<&str> {
        match self {
            KubeError::Api { status, .. } => Some(status.reason.as_str()),
            KubeError::Conflict { .. } => Some("Conflict"),
            _ => None,
        }
    }

    /// Whether the API server answered 404.
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// The `kind` in the failure's details (`namespaces` when a namespace is missing), if any.
    pub fn details_kind(&self) -> Option<&str> {
        match self {
            KubeError::Api { status, .. } => status
                .details
                .as_ref()
                .map(|details| details.kind.as_str())
                .filter(|kind| !kind.is_empty()),
            _ => None,
        }
    }

    /// Whether a namespace is in the way: it does not exist (404 for kind `namespaces`).
    pub fn is_namespace_missing(&self) -> bool {
        self.is_not_found() && self.details_kind() == Some("namespaces")
    }

    /// Whether the object's namespace is being deleted (the API server refuses new content in it).
    pub fn is_namespace_terminating(&self) -> bool {
        match self {
            KubeError::Api { status, .. } => {
                status.code == 403
                    && (status.details.as_ref().is_some_and(|details| {
                        details
                            .causes
                            .iter()
                            .any(|cause| cause.reason == "NamespaceTerminating")
                    }) || status.message.contains("because it is being terminated"))
            }
            _ => false,
        }
    }

    /// The contract error, with `redactor` applied to every text that came from elsewhere.
    pub fn into_extension_error(self, redactor: &Redactor) -> ExtensionError {
        use k8s_codes::*;
        match self {
            KubeError::Api { action, status } => {
                let (http, code) = match status.code {
                    // Server-side apply reports a manifest that does not fit the kind's schema (an unknown
                    // field) as an internal error; it is the manifest's fault.
                    500 if status
                        .message
                        .contains("failed to create typed patch object") =>
                    {
                        (400, KUBERNETES_OPERATION_FAILURE)
                    }
                    400 | 422 => (400, KUBERNETES_OPERATION_FAILURE),
                    401 => (401, UNAUTHORIZED),
                    403 => (403, FORBIDDEN),
                    404 => (404, OBJECT_NOT_FOUND),
                    409 => (409, KUBERNETES_OPERATION_FAILURE),
                    429 => (429, KUBERNETES_OPERATION_FAILURE),
                    502..=504 => (503, CLUSTER_UNREACHABLE),
                    500..=599 => (502, KUBERNETES_OPERATION_FAILURE),
                    _ => (400, KUBERNETES_OPERATION_FAILURE),
                };
                let mut message = format!("Could not {action}: {}", status.message.trim_end());
                if !status.reason.is_empty() {
                    message.push_str(&format!(" [{} {}]", status.code, status.reason));
                }
                let details: Vec<_> = status
                    .details
                    .iter()
                    .flat_map(|details| &details.causes)
                    .filter(|cause| !cause.message.is_empty())
                    .map(|cause| ErrorDetail {
                        code: if cause.reason.is_empty() {
                            KUBERNETES_OPERATION_FAILURE.to_owned()
                        } else {
                            cause.reason.clone()
                        },
                        message: redactor.redact(&cause.message),
                        target: field_target(&cause.field),
                    })
                    .collect();
                ExtensionError::new(http, code, redactor.redact(&message)).with_details(details)
            }
            KubeError::Conflict {
                action,
                managers,
                fields,
            } => {
                let managers = managers
                    .iter()
                    .map(|manager| format!("'{manager}'"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let message = format!(
                    "Could not {action}: server-side apply conflicts with field manager(s) {managers}, \
                     which own {}. Another client changed these fields since cairn applied them; set \
                     'force: true' on the resource (or in the extension config) to take them over, or \
                     drop them from the template.",
                    fields.join(", ")
                );
                ExtensionError::conflict(FIELD_MANAGER_CONFLICT, redactor.redact(&message))
            }
            KubeError::Unreachable { action, detail } => ExtensionError::new(
                503,
                CLUSTER_UNREACHABLE,
                redactor.redact(&format!(
                    "Could not {action}: the Kubernetes API server cannot be reached ({detail})."
                )),
            ),
            KubeError::Client { action, detail } => {
                tracing::warn!(action, "Kubernetes client failure: {detail}");
                ExtensionError::new(
                    502,
                    KUBERNETES_OPERATION_FAILURE,
                    redactor.redact(&format!("Could not {action}: {detail}.")),
                )
            }
        }
    }
}

/// The manager named in a conflict cause's message: `conflict with "kubectl" using v1: .data.a`
/// (or `conflict with "kubectl" with subresource "scale" using apps/v1: ...`).
fn conflict_manager(message: &str) -> Option<String> {
    let rest = message.split_once("conflict with \"")?.1;
    Some(rest.split_once('"')?.0.to_owned())
}

/// A JSON pointer under `/properties` for a Kubernetes field path (`.data.key`, `spec.replicas`,
/// `metadata.labels[app]`): only the simple dotted forms are translated; others name no target.
fn field_target(field: &str) -> Option<String> {
    let field = field.trim_start_matches('.');
    if field.is_empty() || field.contains(['[', ']', '=', '"']) {
        return None;
    }
    Some(format!(
        "/properties/{}",
        field.replace('~', "~0").replace('.', "/")
    ))
}

/// A connection failure's text, from the innermost error outwards (hyper-util's "client error
/// (Connect)" alone says nothing).
fn service_error_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        source = inner.source();
    }
    parts.join(": ")
}

/// The variant of a client error, for failures whose text could quote configuration.
fn variant_name(err: &kube::Error) -> &'static str {
    match err {
        kube::Error::HttpError(_) => "the request could not be built",
        kube::Error::BuildRequest(_) => "the request could not be built",
        kube::Error::Auth(_) => "the credentials could not be used",
        kube::Error::Discovery(_) => "discovery failed",
        _ => "unexpected error",
    }
}

/// Cuts secret values out of messages: every occurrence of a registered value is replaced.
#[derive(Default, Clone)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

/// What replaces a secret value in a message.
pub const REDACTED: &str = "[REDACTED]";

impl Redactor {
    /// Nothing to redact.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a secret value. Very short values are registered too: a 1-character secret is rare,
    /// and cutting a character out of a message is better than leaking it.
    pub fn add(&mut self, secret: &str) {
        if !secret.is_empty() && !self.secrets.iter().any(|known| known == secret) {
            self.secrets.push(secret.to_owned());
            // Longest first, so that a secret containing another is cut whole.
            self.secrets
                .sort_by_key(|known| std::cmp::Reverse(known.len()));
        }
    }

    /// `text` with every registered value replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    fn status(code: u16, reason: &str, message: &str, causes: Vec<StatusCause>) -> Box<Status> {
        Box::new(Status {
            status: None,
            code,
            message: message.into(),
            metadata: None,
            reason: reason.into(),
            details: Some(StatusDetails {
                name: "x".into(),
                group: String::new(),
                kind: "configmaps".into(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
        })
    }

    fn cause(reason: &str, message: &str, field: &str) -> StatusCause {
        StatusCause {
            reason: reason.into(),
            message: message.into(),
            field: field.into(),
        }
    }

    #[test]
    fn conflicts_name_every_other_manager_once() {
        let err = KubeError::from_client(
            kube::Error::Api(status(
                409,
                "Conflict",
                "Apply failed with 2 conflicts",
                vec![
                    cause(
                        "FieldManagerConflict",
                        "conflict with \"kubectl-edit\" using v1: .data.a",
                        ".data.a",
                    ),
                    cause(
                        "FieldManagerConflict",
                        "conflict with \"kubectl-edit\" using v1: .data.b",
                        ".data.b",
                    ),
                    cause(
                        "FieldManagerConflict",
                        "conflict with \"helm\" with subresource \"scale\" using apps/v1: .spec.replicas",
                        ".spec.replicas",
                    ),
                ],
            )),
            "apply ConfigMap default/x",
        );
        let KubeError::Conflict {
            managers, fields, ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(managers, &["kubectl-edit", "helm"]);
        assert_eq!(fields, &[".data.a", ".data.b", ".spec.replicas"]);
        let error = err.into_extension_error(&Redactor::new());
        assert_eq!(
            (error.status(), error.code()),
            (409, k8s_codes::FIELD_MANAGER_CONFLICT)
        );
        assert!(error.error().message.contains("'kubectl-edit', 'helm'"));
        assert!(error.error().message.contains("force: true"));
    }

    #[test]
    fn api_failures_map_to_statuses_with_redacted_messages_and_causes() {
        let mut redactor = Redactor::new();
        redactor.add("hunter2");
        let err = KubeError::from_client(
            kube::Error::Api(status(
                422,
                "Invalid",
                "Secret \"s\" is invalid: data[hunter2]: Invalid value: \"hunter2\"",
                vec![cause(
                    "FieldValueInvalid",
                    "Invalid value: \"hunter2\"",
                    "data.key",
                )],
            )),
            "apply Secret default/s",
        )
        .into_extension_error(&redactor);
        assert_eq!(
            (err.status(), err.code()),
            (400, k8s_codes::KUBERNETES_OPERATION_FAILURE)
        );
        let text = format!("{err:?} {:?}", err.error().details);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains(REDACTED));
        let details = err.error().details.clone().unwrap();
        assert_eq!(details[0].target.as_deref(), Some("/properties/data/key"));
        for (code, want) in [
            (401, 401),
            (403, 403),
            (404, 404),
            (409, 409),
            (500, 502),
            (503, 503),
            (418, 400),
        ] {
            let err =
                KubeError::from_client(kube::Error::Api(status(code, "X", "m", vec![])), "get x")
                    .into_extension_error(&Redactor::new());
            assert_eq!(err.status(), want, "{code}");
        }
    }

    #[test]
    fn namespace_conditions_are_recognised() {
        let mut not_found = status(404, "NotFound", "namespaces \"n\" not found", vec![]);
        if let Some(details) = not_found.details.as_mut() {
            details.kind = "namespaces".into();
        }
        let missing = KubeError::from_client(kube::Error::Api(not_found), "apply");
        assert!(missing.is_namespace_missing());
        let terminating = KubeError::from_client(
            kube::Error::Api(status(
                403,
                "Forbidden",
                "unable to create new content in namespace n because it is being terminated",
                vec![cause(
                    "NamespaceTerminating",
                    "namespace n is being terminated",
                    "metadata.namespace",
                )],
            )),
            "apply",
        );
        assert!(terminating.is_namespace_terminating());
        assert!(!terminating.is_namespace_missing());
    }

    #[test]
    fn field_targets_translate_simple_paths_only() {
        assert_eq!(
            field_target(".spec.replicas").as_deref(),
            Some("/properties/spec/replicas")
        );
        assert_eq!(field_target("metadata.labels[app]"), None);
        assert_eq!(field_target(""), None);
    }

    #[test]
    fn redactor_cuts_longest_values_first() {
        let mut redactor = Redactor::new();
        redactor.add("abc");
        redactor.add("abcdef");
        redactor.add("");
        assert_eq!(
            redactor.redact("x abcdef y abc"),
            format!("x {REDACTED} y {REDACTED}")
        );
    }
}

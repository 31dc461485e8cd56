//! Existing extension resources in a stack's deployment: before the first write of an extension resource no stack
//! manages, the engine asks the extension whether it already exists (preview for its identifiers, then `get`), and
//! writes it — so the stack takes it over — only when the caller allows adoption; otherwise the operation fails
//! with [`RESOURCE_EXISTS_UNMANAGED`] and the resource is not touched.
//!
//! Why ask first: the v2 contract's createOrUpdate answers 200 whether it created or updated, so its answer cannot
//! tell, and after the write it is too late to leave the resource alone. The question costs two calls (preview,
//! get), and only for resources no stack manages yet (a stack's steady-state updates ask nothing). A resource
//! whose identifiers the extension cannot predict (its preview answers a 4xx such as `PreviewNotSupported`, or the
//! identifiers are unknown before the deployment) cannot be looked up, so it is written as before.

use std::fmt;
use std::sync::Arc;

use cairn_arm::ErrorDetail;
use cairn_host::{
    CallContext, ExtensionConfig, ExtensionHost, ExtensionKey, HostError, PreviewRequest,
    ResourceLocator,
};
use serde_json::Value as Json;

/// The code of an operation refused because its extension resource exists and no stack manages it.
pub const RESOURCE_EXISTS_UNMANAGED: &str = "DeploymentStackResourceExistsUnmanaged";

/// An extension resource as a stack's managed set names it (extension version and `apiVersion` are not part of a
/// resource's identity).
#[derive(Clone, Copy, Debug)]
pub struct ExtensionResource<'a> {
    pub extension: &'a str,
    /// The control plane the extension's preview named, when it could.
    pub config_id: Option<&'a str>,
    pub resource_type: &'a str,
    pub identifiers: &'a Json,
}

/// Which extension resources deployment stacks manage already (the deploying stack's own, and those of other
/// stacks, whose ownership the stack service checks after the deployment as before).
pub trait ManagedResources: Send + Sync {
    fn manages(&self, resource: &ExtensionResource<'_>) -> bool;
}

/// What a stack's deployment does with an extension resource that exists before its first write.
#[derive(Clone)]
pub struct ExistingResourceCheck {
    /// Write it anyway, so the stack manages it from now on (`adoptExistingResources`); else refuse it.
    pub adopt: bool,
    /// Resources written without asking: stacks manage them already.
    pub managed: Arc<dyn ManagedResources>,
}

impl fmt::Debug for ExistingResourceCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExistingResourceCheck")
            .field("adopt", &self.adopt)
            .finish_non_exhaustive()
    }
}

/// The resource a create is about to write.
pub(crate) struct Candidate<'a> {
    pub key: &'a ExtensionKey,
    pub resource_type: &'a str,
    pub api_version: Option<&'a str>,
    pub properties: &'a Json,
    pub config: Option<&'a ExtensionConfig>,
}

/// What the check found.
pub(crate) enum Verdict {
    /// Write it; the identifiers the preview predicted, when it did (the host uses them after a stepwise LRO).
    Write { identifiers: Option<Json> },
    /// Do not write it: it exists and no stack manages it (the operation's 409 error).
    ExistsUnmanaged(ErrorDetail),
    /// The extension could not answer whether it exists: the operation fails with its error.
    Failed(HostError),
}

/// Runs the check for one resource (see the module docs).
pub(crate) async fn check(
    host: &ExtensionHost,
    check: &ExistingResourceCheck,
    candidate: Candidate<'_>,
    context: &CallContext,
) -> Verdict {
    let preview = host
        .preview(
            candidate.key,
            PreviewRequest {
                resource_type: candidate.resource_type.to_owned(),
                api_version: candidate.api_version.map(str::to_owned),
                properties: candidate.properties.clone(),
                config: candidate.config.cloned(),
                config_id: None,
                unevaluated: Vec::new(),
            },
            context,
        )
        .await;
    let preview = match preview {
        Ok(result) => result.preview,
        // The extension cannot (or will not) preview this resource: nothing to look it up by, so it is written as
        // without the check (a request the extension refuses fails its create with the extension's own error).
        Err(error) if error.is_preview_not_supported() || (400..500).contains(&error.status()) => {
            return Verdict::Write { identifiers: None };
        }
        Err(error) => return Verdict::Failed(error),
    };
    let unknown = preview.metadata.as_ref().is_some_and(|m| {
        m.unknown
            .iter()
            .flatten()
            .chain(m.unevaluated.iter().flatten())
            .any(|pointer| pointer.starts_with("/identifiers"))
    });
    let identifiers = preview.identifiers;
    if unknown || identifiers.as_object().is_none_or(|o| o.is_empty()) {
        return Verdict::Write { identifiers: None };
    }
    let resource = ExtensionResource {
        extension: &candidate.key.name,
        config_id: preview.config_id.as_deref(),
        resource_type: candidate.resource_type,
        identifiers: &identifiers,
    };
    if check.managed.manages(&resource) {
        return Verdict::Write {
            identifiers: Some(identifiers),
        };
    }
    let locator = ResourceLocator {
        resource_type: candidate.resource_type.to_owned(),
        api_version: candidate.api_version.map(str::to_owned),
        identifiers: identifiers.clone(),
        config: candidate.config.cloned(),
        config_id: preview.config_id.clone(),
    };
    match host.get(candidate.key, &locator, context).await {
        Ok(None) => Verdict::Write {
            identifiers: Some(identifiers),
        },
        Ok(Some(_)) if check.adopt => Verdict::Write {
            identifiers: Some(identifiers),
        },
        Ok(Some(_)) => Verdict::ExistsUnmanaged(exists_unmanaged(&resource)),
        Err(error) => Verdict::Failed(error),
    }
}

fn exists_unmanaged(resource: &ExtensionResource<'_>) -> ErrorDetail {
    ErrorDetail::new(
        RESOURCE_EXISTS_UNMANAGED,
        format!(
            "The '{}' resource of type '{}' with identifiers {} already exists and no deployment stack manages it. \
             A stack takes over an existing resource only when asked: deploy the stack with \
             'adoptExistingResources' set to true (cairn stack ... create --adopt), or declare the resource \
             'existing' to only read it.",
            resource.extension, resource.resource_type, resource.identifiers
        ),
    )
}

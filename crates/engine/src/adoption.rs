//! The identity of an extension resource before its create, and existing resources in a stack's deployment.
//!
//! Before every create the engine previews the resource once for the identity the create will have (identifiers,
//! configId): its `Running` step names and inventories that target before the call (`docs/engine.md`). In a
//! stack's deployment the same identifiers also answer whether the resource already exists: before the first
//! write of an extension resource no stack manages, the engine asks `get`, and writes an existing resource — so the
//! stack takes it over — only when the caller allows adoption; otherwise the operation fails with
//! [`RESOURCE_EXISTS_UNMANAGED`] before its `Running` step, and the resource is neither touched nor inventoried.
//!
//! Why ask first: the v2 contract's createOrUpdate answers 200 whether it created or updated, so its answer cannot
//! tell, and after the write it is too late to leave the resource alone. The question costs one `get` beyond the
//! preview every create makes, and only for resources no stack manages yet (a stack's steady-state updates ask
//! nothing more, nor does a stack that adopts what exists). A resource whose identifiers the extension cannot
//! predict (its preview answers a 4xx such as `PreviewNotSupported`, or the identifiers are unknown before the
//! deployment) cannot be looked up, so it is written as before. The preview runs in a preview place
//! (`Tree::previews`), which the create takes in exchange for its admission slot once its body is evaluated, the
//! `get` in a lookup place (`Tree::lookups`) so the next resource's preview overlaps it; the create then waits
//! in a queue place (`Tree::queued`) for its durable `Running` step and a call slot (`Tree::calls`), so the next
//! resources' lookups overlap the creates in flight.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use cairn_arm::ErrorDetail;
use cairn_host::{
    CallContext, ExtensionConfig, ExtensionHost, ExtensionKey, HostError, PreviewRequest,
    ResourceLocator,
};
use cairn_store::{DeploymentKey, ResourceKey, Store};
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

impl ExistingResourceCheck {
    /// The check of a stack's deployment resumed after a crash. The stack's managed set is not at hand then, so
    /// only what the deployment itself wrote before the crash (see [`WrittenBefore`]) is written without asking:
    /// any other existing resource is refused unless the stack adopts — a resource of the stack's that another
    /// deployment wrote since is refused too, and the next stack update writes it (failing closed, never taking
    /// over what the stack was not allowed to).
    pub(crate) fn resumed(adopt: bool) -> Self {
        ExistingResourceCheck {
            adopt,
            managed: Arc::new(NoneManaged),
        }
    }
}

struct NoneManaged;

impl ManagedResources for NoneManaged {
    fn manages(&self, _: &ExtensionResource<'_>) -> bool {
        false
    }
}

/// In a run resumed after a crash: the inventory, to tell the resources the same deployment (same scope and name:
/// the interrupted run, or the earlier run of a nested deployment started again) wrote before — its `Running` step
/// inventories its target before the call — and that it may write again without asking.
pub(crate) struct WrittenBefore {
    pub store: Arc<dyn Store>,
    pub deployment: DeploymentKey,
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

/// The identity a create's preview predicted: what its `Running` step names and inventories before the call.
pub(crate) struct PredictedIdentity {
    pub identifiers: Json,
    pub config_id: Option<String>,
}

/// What the one preview before a create (and, in a stack's deployment, the existence check) found.
pub(crate) struct Identified {
    /// The target's identity, when the extension could tell it.
    pub identity: Option<PredictedIdentity>,
    pub verdict: Verdict,
}

/// Whether the create goes ahead.
pub(crate) enum Verdict {
    Write,
    /// Do not write it: it exists and no stack manages it (the operation's 409 error).
    ExistsUnmanaged(ErrorDetail),
    /// The extension could not answer whether it exists: the operation fails with its error.
    Failed(HostError),
}

/// Previews a create once for its target's identity and, when `check` is given (a stack's deployment) and the
/// identity is one no stack manages, asks `get` whether it exists already (see the module docs), once `before_get`
/// is done (the engine moves the create to its lookup stage there). Without `check`
/// an extension that cannot tell the identity (preview not supported, failing, identifiers empty or unknown) lets
/// the create go ahead unnamed; with it, only a preview the extension refuses (4xx) does — any other failure fails
/// the operation, as whether the resource exists cannot be known.
pub(crate) async fn identify(
    host: &ExtensionHost,
    candidate: Candidate<'_>,
    check: Option<&ExistingResourceCheck>,
    written_before: Option<&WrittenBefore>,
    context: &CallContext,
    before_get: impl Future<Output = ()>,
) -> Identified {
    let unnamed = |verdict| Identified {
        identity: None,
        verdict,
    };
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
        Err(error)
            if check.is_some()
                && !error.is_preview_not_supported()
                && !(400..500).contains(&error.status()) =>
        {
            return unnamed(Verdict::Failed(error));
        }
        Err(error) => {
            tracing::debug!(resource_type = candidate.resource_type, error = %error,
                "the extension could not tell the resource's identity before its create");
            return unnamed(Verdict::Write);
        }
    };
    let unknown = preview.metadata.as_ref().is_some_and(|m| {
        m.unknown
            .iter()
            .flatten()
            .chain(m.unevaluated.iter().flatten())
            .any(|pointer| pointer.starts_with("/identifiers"))
    });
    if unknown || preview.identifiers.as_object().is_none_or(|o| o.is_empty()) {
        return unnamed(Verdict::Write);
    }
    let identity = PredictedIdentity {
        identifiers: preview.identifiers,
        config_id: preview.config_id,
    };
    let verdict = match check {
        Some(check) => {
            exists_check(
                host,
                check,
                written_before,
                &candidate,
                &identity,
                context,
                before_get,
            )
            .await
        }
        None => Verdict::Write,
    };
    Identified {
        identity: Some(identity),
        verdict,
    }
}

/// The existence check of a create whose identity is known: a resource stacks manage is written without asking.
async fn exists_check(
    host: &ExtensionHost,
    check: &ExistingResourceCheck,
    written_before: Option<&WrittenBefore>,
    candidate: &Candidate<'_>,
    identity: &PredictedIdentity,
    context: &CallContext,
    before_get: impl Future<Output = ()>,
) -> Verdict {
    let resource = ExtensionResource {
        extension: &candidate.key.name,
        config_id: identity.config_id.as_deref(),
        resource_type: candidate.resource_type,
        identifiers: &identity.identifiers,
    };
    // Adopting writes the resource whether or not it exists: there is nothing to ask.
    if check.adopt || check.managed.manages(&resource) {
        return Verdict::Write;
    }
    if let Some(run) = written_before {
        let key = ResourceKey::extension(
            resource.extension,
            resource.config_id,
            resource.resource_type,
            resource.identifiers,
        );
        match run.store.get_managed_resource(&key).await {
            Ok(Some(row))
                if !row.detached && row.resource.deployment.as_ref() == Some(&run.deployment) =>
            {
                return Verdict::Write;
            }
            Ok(_) => {}
            // Not known to be its own: the extension is asked, as for any other resource.
            Err(error) => {
                tracing::warn!(error = %error, "could not read the inventory before an existence check")
            }
        }
    }
    let locator = ResourceLocator {
        resource_type: candidate.resource_type.to_owned(),
        api_version: candidate.api_version.map(str::to_owned),
        identifiers: identity.identifiers.clone(),
        config: candidate.config.cloned(),
        config_id: identity.config_id.clone(),
    };
    before_get.await;
    match host.get(candidate.key, &locator, context).await {
        Ok(None) => Verdict::Write,
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

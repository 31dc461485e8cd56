//! The one handler behind every resource type: any kind the API server serves, built-in or defined by a
//! CRD, found by discovery at each request.
//!
//! - **createOrUpdate** is server-side apply as the config's field manager (`cairn`). A conflict with
//!   another manager is a 409 naming it, unless `force` is set on the resource or the config. A kind
//!   not served yet is waited for (bounded) while a CRD defining it exists, so a custom resource can
//!   follow its CRD in one deployment; a CRD itself is waited for until `Established`. An object, or a
//!   namespace, still being deleted is waited for too, then the object is created anew. The fields the
//!   apply shares with `kubectl apply`'s client-side manager are then moved to cairn's
//!   ([`crate::ownership`]), so that an adopted object is cairn's to change.
//!   With `waitFor`, the apply is done once the object is ready ([`crate::readiness`]): after a short
//!   wait here, the resource is answered `Running` and the host polls get.
//! - **get** answers the live object (see [`crate::manifest::present`]), with status `Deleting` while
//!   finalizers run, and `Running` or `Failed` while a `waitFor` is pending or has timed out; 404 when
//!   it, or its kind, does not exist.
//! - **delete** uses the propagation policy kept on the object (default `Background`), waits a little
//!   for the object to go, and otherwise answers it `Deleting` (a resource-based long-running operation:
//!   the host polls get until 404). A missing object, or kind, is deleted already (204).
//! - **preview** is server-side apply with `dryRun=All`, so admission defaults show and validation
//!   errors surface before anything is written. What the API server cannot be asked about (unevaluated
//!   values, a kind a CRD of the same deployment will define, a namespace not created yet, an
//!   unreachable cluster) is predicted from the manifest alone, as the reference extension does.
//!
//! Every wait in a request ends within [`WAIT_BUDGET`], well inside the host's 60-second limit; what
//! is still pending then fails with a 409, which a stack's next round retries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, OperationStatus, PreviewInput, PreviewOutput,
    ResourceHandler, ResourcePreviewMetadata, ResourceState,
};
use serde_json::{Map, Value};

use crate::api::{self, ApplyOptions, Establishment, ObjectRef};
use crate::cluster::Cluster;
use crate::config::K8sConfig;
use crate::discovery::{ApiKind, TypeName};
use crate::error::{KubeError, Redactor, k8s_codes};
use crate::manifest::{self, Manifest, Propagation, identifiers, parse_identifiers, present};
use crate::readiness::{self, Readiness, WaitFor};

/// The longest a request waits for a CRD, a terminating namespace or object, all together.
pub const WAIT_BUDGET: Duration = Duration::from_secs(40);

/// How long a delete waits for the object to go before answering it `Deleting`.
pub const DELETE_WAIT: Duration = Duration::from_secs(5);

/// The status of an object whose finalizers still run.
pub const DELETING: &str = "Deleting";

/// The handler of every Kubernetes resource type.
#[derive(Debug, Default, Clone, Copy)]
pub struct ObjectHandler;

type State = ResourceState<Value, Value>;

fn cluster_of(config: &K8sConfig) -> Result<&Arc<Cluster>, ExtensionError> {
    config.cluster().ok_or_else(|| {
        ExtensionError::internal("The cluster of the config was not resolved before the request.")
    })
}

fn state(
    object: Value,
    kind: &ApiKind,
    namespace: Option<&str>,
    name: &str,
    config: &K8sConfig,
) -> State {
    let terminating = api::is_terminating(&object);
    let state = ResourceState::new(
        identifiers(name, namespace),
        present(object, kind, config.field_manager()),
    );
    if terminating {
        state.with_status(OperationStatus::new(DELETING))
    } else {
        state
    }
}

/// The kind `name` names, or `None` when the API server does not serve it.
async fn discover(cluster: &Cluster, name: &TypeName) -> Result<Option<ApiKind>, ExtensionError> {
    cluster
        .discovery()
        .resolve(cluster.client(), name)
        .await
        .map_err(|err| err.into_extension_error(&Redactor::new()))
}

/// The kind `name` names, waiting (until `deadline`) while a CRD defining it exists but is not served
/// yet; a 400 naming what is missing otherwise.
async fn discover_waiting(
    cluster: &Cluster,
    name: &TypeName,
    deadline: Instant,
) -> Result<ApiKind, ExtensionError> {
    let mut backoff = api::FIRST_BACKOFF;
    loop {
        if let Some(kind) = discover(cluster, name).await? {
            return Ok(kind);
        }
        // Built-in groups have no CRDs; for others, only a CRD on its way is worth waiting for. When the
        // CRDs cannot be listed (RBAC), wait: the template may still be creating one.
        let pending = !name.group.is_empty()
            && api::crd_defines(cluster, &name.group, &name.version, &name.kind)
                .await
                .unwrap_or(true);
        if !pending || !api::pause(&mut backoff, deadline).await {
            return Err(unknown_kind(cluster, name, pending).await);
        }
    }
}

async fn unknown_kind(cluster: &Cluster, name: &TypeName, pending: bool) -> ExtensionError {
    let api_version = name.api_version();
    if pending {
        return ExtensionError::conflict(
            k8s_codes::CRD_NOT_ESTABLISHED,
            format!(
                "The API server does not serve {} yet: the CustomResourceDefinition that defines it did not \
                 become established within {} s.",
                name.display(),
                WAIT_BUDGET.as_secs()
            ),
        )
        .with_target("/type");
    }
    if cluster.discovery().serves_group_version(name).await {
        ExtensionError::invalid(
            k8s_codes::UNKNOWN_RESOURCE_KIND,
            "/type",
            format!(
                "The API group-version '{api_version}' has no kind '{}' on this cluster.",
                name.kind
            ),
        )
    } else {
        ExtensionError::invalid(
            k8s_codes::UNKNOWN_RESOURCE_TYPE,
            "/type",
            format!(
                "Unknown API group version '{api_version}': the cluster does not serve it (for {}, install the \
                 CustomResourceDefinition that defines it first).",
                name.kind
            ),
        )
    }
}

/// The namespace an object with these identifiers lives in as `kind`.
fn namespace_of(kind: &ApiKind, declared: Option<String>, config: &K8sConfig) -> Option<String> {
    kind.namespaced
        .then(|| declared.unwrap_or_else(|| config.default_namespace().to_owned()))
}

impl ResourceHandler<K8sConfig> for ObjectHandler {
    type Properties = Value;
    type Identifiers = Value;

    /// Not used for routing: the handler is the extension's fallback and reads each request's type.
    fn resource_type(&self) -> &str {
        "<group>/<Kind>"
    }

    async fn preview(
        &self,
        mut input: PreviewInput<K8sConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        let name = TypeName::parse(&input.resource_type, input.api_version.as_deref())?;
        // The gRPC protocol carries no preview metadata: there, unevaluated values are only recognisable
        // as what they look like.
        for pointer in expression_pointers(&input.properties, "/properties") {
            if !input.is_unevaluated(&pointer) {
                input.unevaluated.push(pointer);
            }
        }
        let cluster = input.config.as_ref().and_then(|config| config.cluster());
        let kind = match cluster {
            Some(cluster) => discover(cluster, &name).await?,
            None => None,
        };
        let metadata = ResourcePreviewMetadata {
            read_only: Some(vec![
                "/properties/metadata/uid".into(),
                "/properties/metadata/creationTimestamp".into(),
            ]),
            immutable: Some(vec![
                "/properties/metadata/name".into(),
                "/properties/metadata/namespace".into(),
            ]),
            ..Default::default()
        };
        let (Some(config), Some(cluster), Some(kind), false) = (
            input.config.as_deref(),
            cluster,
            kind.as_ref(),
            input.has_unevaluated_properties(),
        ) else {
            return client_side_preview(&input, &name, kind.as_ref(), metadata);
        };
        let manifest = Manifest::parse(input.properties.clone(), &name)?;
        let namespace = manifest.namespace_for(kind, config.default_namespace())?;
        let object = ObjectRef {
            kind,
            namespace: namespace.as_deref(),
            name: manifest.name(),
        };
        let options = ApplyOptions {
            field_manager: config.field_manager(),
            force: manifest.force() || config.force(),
            dry_run: true,
        };
        let body = manifest.body_for(kind, namespace.as_deref());
        match api::apply(cluster, &object, &body, options).await {
            Ok(predicted) => Ok(PreviewOutput {
                identifiers: Some(identifiers(manifest.name(), namespace.as_deref())),
                properties: present(predicted, kind, config.field_manager()),
                metadata,
            }),
            // The namespace is created by the same deployment: nothing to dry-run against yet.
            Err(err) if err.is_namespace_missing() => {
                client_side_preview(&input, &name, Some(kind), metadata)
            }
            Err(err) => Err(err.into_extension_error(manifest.redactor())),
        }
    }

    async fn create_or_update(
        &self,
        request: Apply<K8sConfig, Value>,
    ) -> Result<Applied<Value, Value>, ExtensionError> {
        let name = TypeName::parse(&request.resource_type, request.api_version.as_deref())?;
        let manifest = Manifest::parse(request.properties, &name)?;
        let config = &request.config;
        let cluster = cluster_of(config)?;
        let deadline = Instant::now() + WAIT_BUDGET;
        let kind = discover_waiting(cluster, &name, deadline).await?;
        let namespace = manifest.namespace_for(&kind, config.default_namespace())?;
        let object = ObjectRef {
            kind: &kind,
            namespace: namespace.as_deref(),
            name: manifest.name(),
        };
        let options = ApplyOptions {
            field_manager: config.field_manager(),
            force: manifest.force() || config.force(),
            dry_run: false,
        };
        let body = manifest.body_for(&kind, namespace.as_deref());
        let redactor = manifest.redactor();
        let fail = |err: KubeError| err.into_extension_error(redactor);
        let mut backoff = api::FIRST_BACKOFF;
        let live = loop {
            match api::apply(cluster, &object, &body, options).await {
                Ok(live) if api::is_terminating(&live) => {
                    // Applying to an object on its way out changes it but does not keep it: wait until
                    // it is gone, then create it anew.
                    let uid = api::uid(&live).map(str::to_owned);
                    if !api::wait_gone(cluster, &object, uid.as_deref(), deadline)
                        .await
                        .map_err(fail)?
                    {
                        return Err(still_terminating(&object, "it"));
                    }
                }
                Ok(live) => break live,
                Err(err) if err.is_namespace_terminating() => {
                    if !api::pause(&mut backoff, deadline).await {
                        return Err(still_terminating(&object, "its namespace"));
                    }
                }
                Err(err) if err.is_namespace_missing() => {
                    return Err(ExtensionError::conflict(
                        k8s_codes::NAMESPACE_NOT_FOUND,
                        format!(
                            "Could not apply {}: its namespace does not exist (yet). Declare the Namespace in \
                             the template and make this resource depend on it.",
                            object.describe()
                        ),
                    )
                    .with_target("/properties/metadata/namespace"));
                }
                // Either discovery answered before the API server's handlers were ready for a new CRD's
                // kind, or the kind is gone (its CRD deleted) and discovery's answer is stale: look again,
                // which fails at once when no CRD defines the kind any more.
                Err(err) if err.is_not_found() => {
                    if !kind.name.group.is_empty() {
                        cluster.discovery().forget_group(&kind.name.group);
                        discover_waiting(cluster, &name, deadline).await?;
                    }
                    if !api::pause(&mut backoff, deadline).await {
                        return Err(fail(err));
                    }
                }
                Err(err) => return Err(fail(err)),
            }
        };
        // An object `kubectl apply` made (adopted, say): what this apply holds is cairn's from now on.
        let live =
            api::take_over_client_side_apply(cluster, &object, live, config.field_manager()).await;
        if kind.is_crd() {
            match api::wait_established(cluster, &object, deadline)
                .await
                .map_err(fail)?
            {
                Establishment::Established => {}
                Establishment::NamesRejected(message) => {
                    return Err(ExtensionError::invalid(
                        k8s_codes::CRD_NOT_ESTABLISHED,
                        "/properties/spec/names",
                        format!(
                            "The CustomResourceDefinition {} was stored but its names were not accepted: {message}.",
                            manifest.name()
                        ),
                    ));
                }
                Establishment::Pending(conditions) => {
                    return Err(ExtensionError::conflict(
                        k8s_codes::CRD_NOT_ESTABLISHED,
                        format!(
                            "The CustomResourceDefinition {} is not established after {} s: {conditions}.",
                            manifest.name(),
                            WAIT_BUDGET.as_secs()
                        ),
                    ));
                }
            }
            if let Some(group) = live.pointer("/spec/group").and_then(Value::as_str) {
                cluster.discovery().forget_group(group);
            }
        }
        let (live, running) = match manifest.wait_for() {
            None => (live, false),
            Some(wait_for) => wait_until_ready(cluster, &object, live, wait_for, redactor).await?,
        };
        let mut applied = state(live, &kind, namespace.as_deref(), manifest.name(), config);
        if running {
            applied.status = Some(OperationStatus::running());
        }
        Ok(Applied::Resource(applied))
    }

    async fn get(
        &self,
        request: Lookup<K8sConfig, Value>,
    ) -> Result<Option<State>, ExtensionError> {
        let name = TypeName::parse(&request.resource_type, request.api_version.as_deref())?;
        let (object_name, declared_namespace) = parse_identifiers(&request.identifiers)?;
        let config = &request.config;
        let cluster = cluster_of(config)?;
        // A kind the cluster does not serve has no objects.
        let Some(kind) = discover(cluster, &name).await? else {
            return Ok(None);
        };
        let namespace = namespace_of(&kind, declared_namespace, config);
        let object = ObjectRef {
            kind: &kind,
            namespace: namespace.as_deref(),
            name: &object_name,
        };
        let found = api::get(cluster, &object)
            .await
            .map_err(|err| err.into_extension_error(&Redactor::new()))?;
        let Some(live) = found else {
            return Ok(None);
        };
        let readiness = if api::is_terminating(&live) {
            None
        } else {
            WaitFor::of_object(&live).map(|wait_for| match readiness::judge(&live, &wait_for) {
                Readiness::Ready => Ok(()),
                Readiness::NotReady(conditions) => Err((readiness::past_deadline(
                    &live,
                    &wait_for,
                    config.field_manager(),
                ))
                .then(|| readiness::timed_out(&object.describe(), &wait_for, &conditions))),
            })
        };
        let found = state(live, &kind, namespace.as_deref(), &object_name, config);
        Ok(Some(match readiness {
            None | Some(Ok(())) => found,
            Some(Err(None)) => found.with_status(OperationStatus::running()),
            Some(Err(Some(timed_out))) => found.failed(timed_out.error().clone()),
        }))
    }

    async fn delete(
        &self,
        request: Lookup<K8sConfig, Value>,
    ) -> Result<Deleted<Value, Value>, ExtensionError> {
        let name = TypeName::parse(&request.resource_type, request.api_version.as_deref())?;
        let (object_name, declared_namespace) = parse_identifiers(&request.identifiers)?;
        let config = &request.config;
        let cluster = cluster_of(config)?;
        let Some(kind) = discover(cluster, &name).await? else {
            return Ok(Deleted::Gone);
        };
        let namespace = namespace_of(&kind, declared_namespace, config);
        let object = ObjectRef {
            kind: &kind,
            namespace: namespace.as_deref(),
            name: &object_name,
        };
        let fail = |err: KubeError| err.into_extension_error(&Redactor::new());
        let Some(live) = api::get(cluster, &object).await.map_err(fail)? else {
            return Ok(Deleted::Gone);
        };
        let uid = api::uid(&live).map(str::to_owned);
        let remaining = if api::is_terminating(&live) {
            Some(live)
        } else {
            let policy = Propagation::of_object(&live).unwrap_or_default();
            api::delete(cluster, &object, uid.as_deref(), policy)
                .await
                .map_err(fail)?
        };
        let Some(remaining) = remaining else {
            return Ok(Deleted::Gone);
        };
        if api::wait_gone(
            cluster,
            &object,
            uid.as_deref(),
            Instant::now() + DELETE_WAIT,
        )
        .await
        .map_err(fail)?
        {
            return Ok(Deleted::Gone);
        }
        let mut deleting = state(remaining, &kind, namespace.as_deref(), &object_name, config);
        deleting.status = Some(OperationStatus::new(DELETING));
        Ok(Deleted::Deleting(deleting))
    }
}

/// Waits (up to [`readiness::SYNC_WAIT`], or the resource's shorter timeout) for `live` to be ready: the
/// object as last read, and whether it is still not ready (the host then polls get).
async fn wait_until_ready(
    cluster: &Cluster,
    object: &ObjectRef<'_>,
    mut live: Value,
    wait_for: &WaitFor,
    redactor: &Redactor,
) -> Result<(Value, bool), ExtensionError> {
    let started = Instant::now();
    let wait = readiness::SYNC_WAIT.min(wait_for.timeout());
    let mut backoff = api::FIRST_BACKOFF;
    loop {
        let conditions = match readiness::judge(&live, wait_for) {
            Readiness::Ready => return Ok((live, false)),
            Readiness::NotReady(conditions) => conditions,
        };
        if !api::pause(&mut backoff, started + wait).await {
            if wait_for.timeout() <= readiness::SYNC_WAIT {
                return Err(readiness::timed_out(
                    &object.describe(),
                    wait_for,
                    &conditions,
                ));
            }
            readiness::remember_deadline(&live, started + wait_for.timeout());
            return Ok((live, true));
        }
        live = match api::get(cluster, object).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                return Err(ExtensionError::conflict(
                    k8s_codes::STILL_TERMINATING,
                    format!(
                        "{} was deleted while cairn waited for it to be ready.",
                        object.describe()
                    ),
                ));
            }
            Err(err) => return Err(err.into_extension_error(redactor)),
        };
    }
}

fn still_terminating(object: &ObjectRef<'_>, what: &str) -> ExtensionError {
    ExtensionError::conflict(
        k8s_codes::STILL_TERMINATING,
        format!(
            "Could not apply {}: {what} is still being deleted after {} s (finalizers are running); \
             a later attempt creates it anew.",
            object.describe(),
            WAIT_BUDGET.as_secs()
        ),
    )
}

/// A preview from the manifest alone: the input with `apiVersion`, `kind` and the namespace filled in
/// where they are known, unevaluated values echoed unchanged, cairn's `force` and a Secret's values
/// left out; identifiers when name and namespace are known.
fn client_side_preview(
    input: &PreviewInput<K8sConfig>,
    name: &TypeName,
    kind: Option<&ApiKind>,
    metadata: ResourcePreviewMetadata,
) -> Result<PreviewOutput, ExtensionError> {
    let Value::Object(properties) = &input.properties else {
        return Err(ExtensionError::invalid(
            k8s_codes::INVALID_PROPERTY,
            "/properties",
            "The properties must be the object's manifest (an object with 'metadata', 'spec', ...).",
        ));
    };
    let default_namespace = input
        .config
        .as_deref()
        .map(K8sConfig::default_namespace)
        .unwrap_or(crate::config::DEFAULT_NAMESPACE);
    if !input.has_unevaluated_properties() {
        // Everything is known: the same checks as createOrUpdate's.
        let manifest = Manifest::parse(input.properties.clone(), name)?;
        let namespace = match kind {
            Some(kind) => manifest.namespace_for(kind, default_namespace)?,
            None => manifest.declared_namespace().map(str::to_owned),
        };
        let predicted = manifest.echo(name, namespace.as_deref());
        let known_scope = kind.is_some() || namespace.is_some();
        return Ok(PreviewOutput {
            identifiers: known_scope.then(|| identifiers(manifest.name(), namespace.as_deref())),
            properties: predicted,
            metadata,
        });
    }
    let mut predicted = Map::new();
    let api_version = properties
        .get("apiVersion")
        .cloned()
        .unwrap_or_else(|| Value::String(name.api_version()));
    let kind_name = properties
        .get("kind")
        .cloned()
        .unwrap_or_else(|| Value::String(kind.map_or(name.kind.clone(), |k| k.name.kind.clone())));
    predicted.insert("apiVersion".into(), api_version);
    predicted.insert("kind".into(), kind_name);
    for (key, value) in properties {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "force") {
            predicted.insert(key.clone(), value.clone());
        }
    }
    if name.group.is_empty() && name.kind == "Secret" {
        predicted.remove("data");
        predicted.remove("stringData");
    }
    let object_name = properties
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|_| !input.is_unevaluated("/properties/metadata/name"))
        .filter(|name| manifest::is_object_name(name));
    let namespace_unevaluated = input.is_unevaluated("/properties/metadata/namespace");
    let declared_namespace = properties
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|_| !namespace_unevaluated);
    let namespace = match kind {
        Some(kind) if kind.namespaced && !namespace_unevaluated => {
            let namespace = declared_namespace.unwrap_or(default_namespace).to_owned();
            if let Some(Value::Object(metadata)) = predicted.get_mut("metadata") {
                metadata
                    .entry("namespace")
                    .or_insert_with(|| Value::String(namespace.clone()));
            }
            Some(Some(namespace))
        }
        Some(kind) if !kind.namespaced => Some(None),
        _ => declared_namespace.map(|ns| Some(ns.to_owned())),
    };
    let identifiers = match (object_name, namespace) {
        (Some(object_name), Some(namespace)) => {
            Some(identifiers(object_name, namespace.as_deref()))
        }
        _ => None,
    };
    Ok(PreviewOutput {
        identifiers,
        properties: Value::Object(predicted),
        metadata,
    })
}

/// JSON pointers of the strings in `value` that are ARM template expressions (`[...]`, not the escaped
/// `[[...`).
fn expression_pointers(value: &Value, base: &str) -> Vec<String> {
    match value {
        Value::String(text)
            if text.starts_with('[') && !text.starts_with("[[") && text.ends_with(']') =>
        {
            vec![base.to_owned()]
        }
        Value::Object(map) => map
            .iter()
            .flat_map(|(key, value)| {
                expression_pointers(
                    value,
                    &format!("{base}/{}", key.replace('~', "~0").replace('/', "~1")),
                )
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .flat_map(|(index, value)| expression_pointers(value, &format!("{base}/{index}")))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_are_found_where_they_are() {
        let properties = json!({
            "apiVersion": "[parameters('v')]",
            "metadata": { "name": "[[literal]", "labels": { "a/b": "[concat('x')]" } },
            "spec": { "args": ["plain", "[variables('arg')]"] }
        });
        assert_eq!(
            expression_pointers(&properties, "/properties"),
            [
                "/properties/apiVersion",
                "/properties/metadata/labels/a~1b",
                "/properties/spec/args/1",
            ]
        );
    }
}

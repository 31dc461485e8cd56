//! What-if: expands a deployment without deploying and compares each resource with its current state. Azure
//! resources are read through their provider; extension resources go through the host's `preview` (the predicted
//! state, with metadata naming read-only, calculated, unknown and unevaluated paths, which are dropped from the
//! comparison as noise) and `get`. Change types: `Create`, `Modify`, `NoChange`, `Deploy` (cannot tell: depends
//! on values known only while deploying), `Unsupported` (no provider, or preview not supported), `Ignore`
//! (resources an earlier run of this deployment created that the template no longer names; Incremental mode
//! leaves them alone). Extension resources are named by extension, type and identifiers, never an ARM id.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use cairn_arm::access::Action;
use cairn_arm::models::deployment::{
    DeploymentDiagnosticsDefinition, DeploymentProperties, DeploymentWhatIfSettings,
    DiagnosticLevel, WhatIfResultFormat,
};
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::operation::TargetResource;
use cairn_arm::models::what_if::{
    ChangeType, PropertyChangeType, WhatIfChange, WhatIfOperationProperties, WhatIfOperationResult,
    WhatIfPropertyChange,
};
use cairn_arm::{ArmError, ResourceId};
use cairn_eval::Value;
use cairn_host::{ExtensionKey, PreviewRequest, ResourceLocator};
use cairn_json::Node;
use cairn_store::{DeploymentId, DeploymentKey, ManagedResourceFilter, PageRequest};
use cairn_template::resource_types::types::{Body, PathSegment, TypeId, TypeSet, check_update};
use cairn_template::resource_types::{ResourceRef, check_resource};
use cairn_template::{DeploymentInput, Expansion, ResourceIdentity, Template};
use serde_json::Value as Json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::env::EngineEnv;
use crate::error::EngineError;
use crate::hook::{EngineHook, RuntimeValues};
use crate::link::TemplateOrigin;
use crate::records::EngineAnnotation;
use crate::request::{context_for, parameters_file, scope_kind_of, template_error, template_json};
use crate::run::{Run, Tree, is_nested_deployment};

const MAX_DEPTH: usize = cairn_template::expand::MAX_NESTING_DEPTH;

struct Collector {
    changes: Vec<WhatIfChange>,
    full: bool,
    /// Findings beside the changes (an extension resource whose identifiers the template changed).
    diagnostics: Vec<DeploymentDiagnosticsDefinition>,
}

/// Runs what-if for a request at `key`.
pub(crate) async fn what_if(
    env: &Arc<EngineEnv>,
    access: &cairn_arm::Access,
    key: &DeploymentKey,
    properties: &DeploymentProperties,
    origin: TemplateOrigin,
    settings: Option<DeploymentWhatIfSettings>,
    (location, rg_location): (Option<String>, Option<String>),
) -> Result<WhatIfOperationResult, EngineError> {
    let tracking = uuid::Uuid::new_v4().to_string();
    let invalid = |details| {
        EngineError::Arm(ArmError::invalid_template_deployment(
            &key.name, &tracking, details,
        ))
    };
    scope_kind_of(&key.scope)?;
    let template_value = template_json(properties)?;
    let (template, diags) = Template::parse(Node::from_json(&template_value));
    if diags.iter().any(|d| d.is_error()) {
        return Err(invalid(vec![template_error(&diags)]));
    }
    let (file, errors) = parameters_file(properties);
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    let annotation = EngineAnnotation {
        utc_now: cairn_arm::time::format_timestamp(std::time::SystemTime::now()),
        ..EngineAnnotation::default()
    };
    let ctx = context_for(
        key,
        location.as_deref(),
        rg_location.as_deref(),
        &annotation,
        &env.settings,
    );
    let tree = Rc::new(Tree {
        env: env.clone(),
        permits: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        previews: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        lookups: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        queued: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        calls: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        cancel: CancellationToken::new(),
        suspend: CancellationToken::new(),
        handed_over: std::cell::Cell::new(false),
        events: RefCell::new(None),
        stack_initiated: false,
        access: access.clone(),
        existing_resources: None,
        correlation_id: tracking.clone(),
        resumed: false,
        values: Rc::new(RuntimeValues::default()),
        active: crate::registry::Claims::default(),
    });
    // A run that is never written: what-if only uses its runtime-value fetching and config resolution.
    let mut run = Run::new(
        tree.clone(),
        DeploymentId::from_string(format!("what-if-{tracking}")),
        key.clone(),
        0,
        0,
        Default::default(),
    );
    run.set_link_context(origin, ctx.clone());
    let hook = EngineHook::new(tree.values.clone());
    let expansion = run
        .with_runtime_values(&hook, || {
            Expansion::start(DeploymentInput::new(&template, &file, ctx.clone()), &hook)
        })
        .await
        .map_err(|e| invalid(vec![e]))?;
    let full = settings
        .and_then(|s| s.result_format)
        .is_none_or(|f| f != WhatIfResultFormat::ResourceIdOnly);
    let collector = RefCell::new(Collector {
        changes: Vec::new(),
        full,
        diagnostics: Vec::new(),
    });
    let deployment_id = key.to_string();
    walk(
        &run,
        &expansion,
        &hook,
        &collector,
        (&deployment_id, &template.root, ""),
        0,
    )
    .await;
    let mut collector = collector.into_inner();
    identify_from_last_run(env, &mut collector.changes).await;
    // Resources an earlier run of this deployment wrote that the template no longer names.
    if let Ok(page) = env
        .store
        .list_managed_resources(ManagedResourceFilter {
            deployment: Some(key.clone()),
            page: PageRequest::default(),
            ..ManagedResourceFilter::default()
        })
        .await
    {
        for record in page.items {
            let r = record.resource;
            // An extension resource is named by extension, type and identifiers, whatever extension version or
            // apiVersion either side uses (they change without the resource changing).
            let named = collector
                .changes
                .iter()
                .any(|c| match (&r.resource_id, &c.resource_id) {
                    (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                    _ => match (&r.extension, &c.extension, &c.identifiers) {
                        (Some(ext), Some(named_by), Some(ids)) => {
                            ext.name
                                .as_deref()
                                .is_some_and(|name| name.eq_ignore_ascii_case(&named_by.name))
                                && c.resource_type
                                    .as_deref()
                                    .is_some_and(|t| t.eq_ignore_ascii_case(&r.resource_type))
                                && ext.identifiers.as_ref() == Some(ids)
                        }
                        _ => false,
                    },
                });
            if named {
                continue;
            }
            let mut change = WhatIfChange::new(ChangeType::Ignore);
            change.resource_id = r.resource_id.clone();
            change.resource_type = Some(r.resource_type.clone());
            change.deployment_id = Some(deployment_id.clone());
            if let Some(ext) = &r.extension {
                change.identifiers = ext.identifiers.clone();
                change.extension = ext.name.clone().map(|name| DeploymentExtension {
                    alias: None,
                    deployment_id: None,
                    name,
                    version: ext.version.clone().unwrap_or_default(),
                    config_id: ext.config_id.clone(),
                    config_hash: None,
                    config: None,
                });
            }
            if collector.full {
                change.before = Some(r.properties.clone());
            }
            collector.changes.push(change);
        }
    }
    Ok(WhatIfOperationResult {
        status: Some("Succeeded".into()),
        properties: Some(WhatIfOperationProperties {
            changes: Some(collector.changes),
            potential_changes: None,
            diagnostics: (!collector.diagnostics.is_empty()).then_some(collector.diagnostics),
        }),
        error: None,
    })
}

/// Gives an extension resource whose change could not be previewed (config not resolvable, preview unsupported,
/// body not evaluable) the identifiers its deployment's last run gave it: the journal's operation for the same
/// symbolic name and type, when exactly one says. An extension resource is known by extension, type and
/// identifiers; without them the change would not say which resource it is, and the record of it would show again
/// as `Ignore`.
async fn identify_from_last_run(env: &EngineEnv, changes: &mut [WhatIfChange]) {
    let mut journals: HashMap<String, Vec<TargetResource>> = HashMap::new();
    for change in changes.iter_mut() {
        let (Some(extension), Some(symbolic), Some(deployment), None) = (
            &change.extension,
            &change.symbolic_name,
            &change.deployment_id,
            &change.identifiers,
        ) else {
            continue;
        };
        if !journals.contains_key(deployment) {
            let targets = last_run_targets(env, deployment).await;
            journals.insert(deployment.clone(), targets);
        }
        let resource_type = change.resource_type.as_deref().unwrap_or_default();
        let mut matching = journals[deployment].iter().filter(|t| {
            t.symbolic_name.as_deref() == Some(symbolic.as_str())
                && t.resource_type
                    .as_deref()
                    .is_some_and(|ty| ty.eq_ignore_ascii_case(resource_type))
                && t.extension
                    .as_ref()
                    .is_some_and(|e| e.name.eq_ignore_ascii_case(&extension.name))
                && t.identifiers.is_some()
        });
        if let (Some(only), None) = (matching.next(), matching.next()) {
            change.identifiers = only.identifiers.clone();
            if let Some(e) = &mut change.extension
                && e.config_id.is_none()
            {
                e.config_id = only.extension.as_ref().and_then(|x| x.config_id.clone());
            }
        }
    }
}

/// The targets of the last run's create operations of the deployment `deployment_id` (none when it never ran).
async fn last_run_targets(env: &EngineEnv, deployment_id: &str) -> Vec<TargetResource> {
    let Some(key) = crate::request::deployment_key_of(deployment_id) else {
        return Vec::new();
    };
    let Ok(Some(record)) = env.store.get_deployment(&key).await else {
        return Vec::new();
    };
    let Ok(operations) = env.store.latest_operations(&record.id).await else {
        return Vec::new();
    };
    operations
        .into_iter()
        .filter(|op| op.step.provisioning_operation == "Create")
        .filter_map(|op| serde_json::from_value(op.step.target_resource?).ok())
        .collect()
}

/// `place`: the deployment's ID, the root template's node and the JSON path of this deployment's template in it.
fn walk<'f>(
    run: &'f Run,
    expansion: &'f Expansion<'_>,
    hook: &'f EngineHook,
    collector: &'f RefCell<Collector>,
    (deployment_id, root, prefix): (&'f str, &'f Node, &'f str),
    depth: usize,
) -> crate::inflight::LocalFuture<'f, ()> {
    Box::pin(async move {
        // Copy loops whose count only the deployment's run knows: ARM's what-if cannot analyse them either.
        for deferred in expansion.deferred() {
            let mut change = WhatIfChange::new(ChangeType::Unsupported);
            change.deployment_id = Some(deployment_id.to_string());
            change.symbolic_name = deferred.symbolic_name.clone();
            change.resource_type = deferred.resource_type.clone();
            change.unsupported_reason = Some(deferred.message());
            collector.borrow_mut().changes.push(change);
        }
        for &index in expansion.order() {
            let identity = expansion.resource(index);
            if identity.condition == Some(false) || identity.existing {
                continue;
            }
            let body = match run
                .with_runtime_values(hook, || expansion.evaluate(index))
                .await
            {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(error) => {
                    let mut change = base_change(&identity, deployment_id, ChangeType::Unsupported);
                    change.unsupported_reason = Some(error.message().to_string());
                    collector.borrow_mut().changes.push(change);
                    continue;
                }
            };
            if is_nested_deployment(&identity) {
                if depth >= MAX_DEPTH {
                    continue;
                }
                let nested = match run.nested_child(expansion, &identity, &body).await {
                    Ok(child) => child,
                    Err(error) => {
                        // A linked template that cannot be read: the deployment's changes are unknown.
                        let mut change =
                            base_change(&identity, deployment_id, ChangeType::Unsupported);
                        change.unsupported_reason = Some(error.message().to_string());
                        collector.borrow_mut().changes.push(change);
                        continue;
                    }
                };
                let mut child_run = Run::new(
                    run.tree.clone(),
                    run.id.clone(),
                    run.key.clone(),
                    depth + 1,
                    0,
                    Default::default(),
                );
                child_run.set_link_context(nested.origin.clone(), nested.nested.context.clone());
                let nested = nested.nested;
                let child_hook = EngineHook::new(hook.shared().clone());
                let child = match run
                    .with_runtime_values(&child_hook, || {
                        expansion.expand_nested(&nested, &child_hook)
                    })
                    .await
                {
                    Ok(child) => child,
                    // The child's changes cannot be told; say why rather than leave them out unseen.
                    Err(error) => {
                        let mut change =
                            base_change(&identity, deployment_id, ChangeType::Unsupported);
                        change.unsupported_reason = Some(error.message().to_string());
                        collector.borrow_mut().changes.push(change);
                        continue;
                    }
                };
                let child_id = format!(
                    "{}/providers/Microsoft.Resources/deployments/{}",
                    nested.context.scope_id(nested.template.scope),
                    nested.context.deployment_name
                );
                let child_prefix = if prefix.is_empty() {
                    nested.path.clone()
                } else {
                    format!("{prefix}.{}", nested.path)
                };
                walk(
                    &child_run,
                    &child,
                    &child_hook,
                    collector,
                    (&child_id, root, &child_prefix),
                    depth + 1,
                )
                .await;
                // The parent's later resources and outputs read the child's outputs, as when it deploys; those
                // the child cannot know before it runs stay unknown.
                if let Ok(outputs) = child_run
                    .with_runtime_values(&child_hook, || child.outputs())
                    .await
                {
                    expansion.set_nested_plan(index, child.finish(outputs));
                }
                continue;
            }
            let change = match &identity.extension {
                Some(extension) => {
                    // The body against the extension's declared types, as the deployment's preflight checks it.
                    let resource = ResourceRef {
                        extension,
                        resource_type: &identity.resource_type,
                        api_version: identity.api_version.as_deref(),
                        path: &identity.path,
                        existing: identity.existing,
                    };
                    let types = crate::env::RegistryTypes(run.tree.env.host.registry());
                    let findings = check_resource(&types, root, prefix, resource, &body);
                    collector
                        .borrow_mut()
                        .diagnostics
                        .extend(findings.iter().map(|f| DeploymentDiagnosticsDefinition {
                            level: DiagnosticLevel::Error,
                            code: f.diagnostic.code.clone(),
                            message: f.diagnostic.message.clone(),
                            target: Some(f.diagnostic.target.clone()),
                            additional_info: None,
                        }));
                    let change =
                        extension_change(run, expansion, &identity, &body, deployment_id).await;
                    let moved = identifiers_changed(run, &identity, &change, deployment_id).await;
                    collector.borrow_mut().diagnostics.extend(moved);
                    change
                }
                None => azure_change(run, &identity, &body, deployment_id).await,
            };
            let mut change = change;
            if !collector.borrow().full {
                change.before = None;
                change.after = None;
                change.delta = None;
            }
            collector.borrow_mut().changes.push(change);
        }
    })
}

fn base_change(
    identity: &ResourceIdentity,
    deployment_id: &str,
    change_type: ChangeType,
) -> WhatIfChange {
    let mut change = WhatIfChange::new(change_type);
    change.resource_id = identity.id.clone();
    change.deployment_id = Some(deployment_id.to_string());
    change.symbolic_name = identity.symbolic_name.clone();
    change.resource_type = Some(identity.resource_type.clone());
    if let Some(e) = &identity.extension {
        change.extension = Some(DeploymentExtension {
            alias: None,
            deployment_id: None,
            name: e.name.clone(),
            version: e.version.clone(),
            config_id: None,
            config_hash: None,
            config: None,
        });
    }
    change
}

/// What what-if shows in place of a write-only secret value.
const REDACTED: &str = "[secure value]";

/// The declared body of an Azure resource, as it would be sent (without the engine's name/type/apiVersion).
fn desired(body: &Value) -> Json {
    let mut json = body.to_json();
    if let Json::Object(map) = &mut json {
        map.remove("apiVersion");
    }
    json
}

async fn azure_change(
    run: &Run,
    identity: &ResourceIdentity,
    body: &Value,
    deployment_id: &str,
) -> WhatIfChange {
    let env = run.tree.env.clone();
    let api = identity.api_version.clone().unwrap_or_default();
    let provider = match env.providers.require(&identity.resource_type, &api) {
        Ok(p) => p.clone(),
        Err(e) => {
            let mut change = base_change(identity, deployment_id, ChangeType::Unsupported);
            change.unsupported_reason = Some(e.error.message().to_string());
            return change;
        }
    };
    let Some(id) = identity
        .id
        .as_deref()
        .and_then(|i| ResourceId::parse(i).ok())
    else {
        let mut change = base_change(identity, deployment_id, ChangeType::Unsupported);
        change.unsupported_reason =
            Some("The resource ID could not be determined before deployment.".into());
        return change;
    };
    // A resource the caller may not reach is neither read nor shown: the deployment would be refused.
    if let Err(error) = run.tree.access.check(Action::Write, &id.to_string()) {
        let mut change = base_change(identity, deployment_id, ChangeType::Unsupported);
        change.unsupported_reason = Some(error.detail().message().to_string());
        return change;
    }
    let mut after = desired(body);
    // Secret values are write-only: never shown, never compared (a resource holding one is `Deploy`: it will be
    // applied again and the value may or may not change).
    let write_only: Vec<String> = provider
        .write_only_properties(&identity.resource_type)
        .iter()
        .map(|p| p.to_string())
        .collect();
    let mut hides_secret = false;
    for pointer in &write_only {
        if let Some(v) = after.pointer_mut(pointer) {
            *v = Json::String(REDACTED.into());
            hides_secret = true;
        }
    }
    let before = match provider.get(&id, &api).await {
        Ok(b) => b,
        Err(e) => {
            let mut change = base_change(identity, deployment_id, ChangeType::Unsupported);
            change.unsupported_reason = Some(e.error.message().to_string());
            return change;
        }
    };
    let unevaluated = body.contains_unevaluated();
    let mut change = match before {
        None => base_change(identity, deployment_id, ChangeType::Create),
        Some(mut before) => {
            for pointer in &write_only {
                if let Some(v) = before.pointer_mut(pointer) {
                    *v = Json::String(REDACTED.into());
                }
            }
            let delta = diff("", &before, &after, &write_only);
            let kind = if unevaluated || (hides_secret && delta.is_empty()) {
                ChangeType::Deploy
            } else if delta.is_empty() {
                ChangeType::NoChange
            } else {
                ChangeType::Modify
            };
            let mut c = base_change(identity, deployment_id, kind);
            c.before = Some(before);
            if !delta.is_empty() {
                c.delta = Some(delta);
            }
            c
        }
    };
    change.after = Some(after);
    change
}

async fn extension_change(
    run: &Run,
    expansion: &Expansion<'_>,
    identity: &ResourceIdentity,
    body: &Value,
    deployment_id: &str,
) -> WhatIfChange {
    let Some(ext) = &identity.extension else {
        return base_change(identity, deployment_id, ChangeType::Unsupported);
    };
    let unsupported = |reason: String| {
        let mut change = base_change(identity, deployment_id, ChangeType::Unsupported);
        change.unsupported_reason = Some(reason);
        change
    };
    let config = match run.alias_config_for_preview(expansion, &ext.alias).await {
        Ok(c) => c,
        Err(e) => return unsupported(e.message().to_string()),
    };
    let properties_value = body
        .as_object()
        .and_then(|o| o.get("properties"))
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let mut unevaluated = Vec::new();
    unevaluated_pointers(&properties_value, "/properties", &mut unevaluated);
    let key = ExtensionKey::new(ext.name.clone(), ext.version.clone());
    let env = run.tree.env.clone();
    let ctx = cairn_host::CallContext::default();
    let request = PreviewRequest {
        resource_type: identity.resource_type.clone(),
        api_version: identity.api_version.clone(),
        properties: properties_value.to_json(),
        config: (!config.is_empty()).then(|| config.clone()),
        config_id: None,
        unevaluated: unevaluated
            .iter()
            .filter_map(|p| serde_json::from_value(Json::String(p.clone())).ok())
            .collect(),
    };
    let preview = match env.host.preview(&key, request, &ctx).await {
        Ok(p) => p.preview,
        Err(e) if e.is_preview_not_supported() => {
            return unsupported(format!(
                "The extension cannot preview this resource: {}",
                e.error().message
            ));
        }
        Err(e) => return unsupported(e.error().message.clone()),
    };
    let mut ignored: Vec<String> = unevaluated.clone();
    if let Some(m) = &preview.metadata {
        for list in [&m.read_only, &m.calculated, &m.unknown, &m.unevaluated]
            .into_iter()
            .flatten()
        {
            ignored.extend(
                list.iter()
                    .filter_map(|p| serde_json::to_value(p).ok()?.as_str().map(str::to_string)),
            );
        }
    }
    let mut change = base_change(identity, deployment_id, ChangeType::Create);
    change.identifiers = Some(preview.identifiers.clone());
    if let Some(e) = &mut change.extension {
        e.config_id = preview.config_id.clone();
    }
    let after = serde_json::json!({ "properties": preview.properties });
    let locator = ResourceLocator {
        resource_type: identity.resource_type.clone(),
        api_version: identity.api_version.clone(),
        identifiers: preview.identifiers.clone(),
        config: (!config.is_empty()).then(|| config.clone()),
        config_id: preview.config_id.clone(),
    };
    let identifiers_known = preview
        .identifiers
        .as_object()
        .is_some_and(|o| !o.is_empty());
    let current = if identifiers_known {
        match env.host.get(&key, &locator, &ctx).await {
            Ok(c) => c,
            Err(e) => return unsupported(e.error().message.clone()),
        }
    } else {
        None
    };
    if let Some(current) = current {
        let before = serde_json::json!({ "properties": current.properties });
        // Read-only properties are the extension's to set: never a change the template makes.
        let delta = match declared_type(&env, ext, identity) {
            Some((types, id)) => {
                let (mut before, mut after) = (before.clone(), after.clone());
                for side in [&mut before, &mut after] {
                    if let Some(properties) = side.get_mut("properties") {
                        cairn_template::resource_types::types::without_read_only(
                            &types, id, properties,
                        );
                    }
                }
                diff("", &before, &after, &ignored)
            }
            None => diff("", &before, &after, &ignored),
        };
        change.change_type = if !unevaluated.is_empty() && !delta.is_empty() {
            ChangeType::Deploy
        } else if delta.is_empty() {
            ChangeType::NoChange
        } else {
            ChangeType::Modify
        };
        change.before = Some(before);
        if !delta.is_empty() {
            change.delta = Some(delta);
        }
    } else if !identifiers_known {
        change.change_type = ChangeType::Deploy;
    }
    change.after = Some(after);
    change
}

/// The extension's declared type of a resource, when the registry knows the extension's types.
fn declared_type(
    env: &EngineEnv,
    extension: &cairn_template::plan::PlannedExtensionRef,
    identity: &ResourceIdentity,
) -> Option<(Arc<TypeSet>, TypeId)> {
    let types = env
        .host
        .registry()
        .types(&extension.name, &extension.version)?;
    let id = types
        .resource(
            &identity.resource_type,
            identity.api_version.as_deref(),
            Some(extension.version.as_str()),
        )
        .or(types.fallback())?;
    Some((types, id))
}

/// An extension resource whose identifier properties the template changed since this deployment's last run
/// created it: the change creates another resource, and (in a stack) the old one leaves the stack. The old
/// identifiers come from the last run's create of the same symbolic name and type; the new from the preview.
async fn identifiers_changed(
    run: &Run,
    identity: &ResourceIdentity,
    change: &WhatIfChange,
    deployment_id: &str,
) -> Vec<DeploymentDiagnosticsDefinition> {
    let (Some(extension), Some(symbolic), Some(new)) = (
        &identity.extension,
        &identity.symbolic_name,
        &change.identifiers,
    ) else {
        return Vec::new();
    };
    let env = run.tree.env.clone();
    let Some((types, id)) = declared_type(&env, extension, identity) else {
        return Vec::new();
    };
    let targets = last_run_targets(&env, deployment_id).await;
    let Some(old) = targets.iter().find_map(|t| {
        (t.symbolic_name.as_deref() == Some(symbolic.as_str())
            && t.resource_type
                .as_deref()
                .is_some_and(|ty| ty.eq_ignore_ascii_case(&identity.resource_type)))
        .then_some(t.identifiers.as_ref())
        .flatten()
    }) else {
        return Vec::new();
    };
    let base = format!("{}.properties", identity.path);
    check_update(&types, id, &Body::from_json(old), &Body::from_json(new))
        .into_iter()
        .map(|finding| {
            let mut target = base.clone();
            for segment in &finding.path {
                target = match segment {
                    PathSegment::Key(k) => cairn_template::join_path(&target, k),
                    PathSegment::Index(i) => cairn_template::join_index(&target, *i),
                };
            }
            DeploymentDiagnosticsDefinition {
                level: DiagnosticLevel::Warning,
                code: finding.code().to_string(),
                message: format!(
                    "{} This deployment creates another resource; a stack would stop managing the one it has.",
                    finding.message
                ),
                target: Some(target),
                additional_info: None,
            }
        })
        .collect()
}

/// JSON pointers of the unevaluated values inside `value`.
fn unevaluated_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Unevaluated(_) => out.push(at.to_string()),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                unevaluated_pointers(v, &format!("{at}/{i}"), out);
            }
        }
        Value::Object(o) => {
            for (k, v) in o.iter() {
                let escaped = k.replace('~', "~0").replace('/', "~1");
                unevaluated_pointers(v, &format!("{at}/{escaped}"), out);
            }
        }
        _ => {}
    }
}

fn pointer_of(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    format!(
        "/{}",
        path.split('.')
            .map(|s| s.replace('~', "~0").replace('/', "~1"))
            .collect::<Vec<_>>()
            .join("/")
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Property changes from `before` to `after` over the members `after` declares (a provider's or extension's
/// extra, server-side properties are not changes), skipping paths under the `ignored` JSON pointers: what-if's
/// comparison, which stack drift detection makes too (the recorded applied properties against the live resource).
pub fn property_diff(before: &Json, after: &Json, ignored: &[String]) -> Vec<WhatIfPropertyChange> {
    diff("", before, after, ignored)
}

/// Property changes from `before` to `after`. Only what `after` declares is compared (a provider's or extension's
/// extra, server-side properties are not changes); paths under `ignored` pointers are skipped.
pub(crate) fn diff(
    path: &str,
    before: &Json,
    after: &Json,
    ignored: &[String],
) -> Vec<WhatIfPropertyChange> {
    let pointer = pointer_of(path);
    if !path.is_empty()
        && ignored
            .iter()
            .any(|i| i == &pointer || pointer.starts_with(&format!("{i}/")))
    {
        return Vec::new();
    }
    match (before, after) {
        (Json::Object(b), Json::Object(a)) => {
            let mut out = Vec::new();
            for (k, av) in a {
                let child = join(path, k);
                let bv = b.get(k).or_else(|| {
                    b.iter()
                        .find(|(bk, _)| bk.eq_ignore_ascii_case(k))
                        .map(|(_, v)| v)
                });
                match bv {
                    None if !av.is_null() && !ignored.contains(&pointer_of(&child)) => {
                        out.push(change(
                            &child,
                            PropertyChangeType::Create,
                            None,
                            Some(av.clone()),
                            None,
                        ));
                    }
                    None => {}
                    Some(bv) => out.extend(diff(&child, bv, av, ignored)),
                }
            }
            out
        }
        (Json::Array(b), Json::Array(a)) => {
            if b == a {
                return Vec::new();
            }
            let mut children = Vec::new();
            for i in 0..a.len().max(b.len()) {
                let child = join(path, &i.to_string());
                match (b.get(i), a.get(i)) {
                    (Some(bv), Some(av)) => {
                        let inner = diff(&child, bv, av, ignored);
                        if !inner.is_empty() {
                            children.push(change(
                                &i.to_string(),
                                PropertyChangeType::Modify,
                                Some(bv.clone()),
                                Some(av.clone()),
                                Some(inner),
                            ));
                        }
                    }
                    (None, Some(av)) => children.push(change(
                        &i.to_string(),
                        PropertyChangeType::Create,
                        None,
                        Some(av.clone()),
                        None,
                    )),
                    (Some(bv), None) => children.push(change(
                        &i.to_string(),
                        PropertyChangeType::Delete,
                        Some(bv.clone()),
                        None,
                        None,
                    )),
                    (None, None) => {}
                }
            }
            if children.is_empty() {
                return Vec::new();
            }
            vec![change(
                path,
                PropertyChangeType::Array,
                None,
                None,
                Some(children),
            )]
        }
        (b, a) if values_equal(b, a) => Vec::new(),
        (b, a) => vec![change(
            path,
            PropertyChangeType::Modify,
            Some(b.clone()),
            Some(a.clone()),
            None,
        )],
    }
}

fn values_equal(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        (Json::String(x), Json::String(y)) => x == y,
        _ => a == b,
    }
}

fn change(
    path: &str,
    kind: PropertyChangeType,
    before: Option<Json>,
    after: Option<Json>,
    children: Option<Vec<WhatIfPropertyChange>>,
) -> WhatIfPropertyChange {
    WhatIfPropertyChange {
        path: path.to_string(),
        property_change_type: kind,
        before,
        after,
        children,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_reports_declared_changes_only() {
        let before = json!({"properties": {"size": 1, "state": "Running", "tags": ["a"]}});
        let after = json!({"properties": {"size": 2, "tags": ["a", "b"], "new": true}});
        let d = diff("", &before, &after, &[]);
        let paths: Vec<(&str, &PropertyChangeType)> = d
            .iter()
            .map(|c| (c.path.as_str(), &c.property_change_type))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("properties.size", &PropertyChangeType::Modify),
                ("properties.tags", &PropertyChangeType::Array),
                ("properties.new", &PropertyChangeType::Create),
            ]
        );
        assert!(diff("", &before, &json!({"properties": {"size": 1}}), &[]).is_empty());
    }

    #[test]
    fn ignored_pointers_are_skipped() {
        let before = json!({"properties": {"etag": "1", "size": 1}});
        let after = json!({"properties": {"etag": "2", "size": 1}});
        assert!(diff("", &before, &after, &["/properties/etag".to_string()]).is_empty());
        assert_eq!(diff("", &before, &after, &[]).len(), 1);
    }
}

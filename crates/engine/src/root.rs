//! Root deployments on the coordinator: preparing a request (parse, expand phase one, dependencies), running a
//! root deployment tree with its heartbeat, and the recovery of runs whose engine died.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use cairn_arm::models::deployment::{DeploymentProperties, DeploymentResourceReference};
use cairn_arm::models::extension::{DeploymentExtension, ExtensionConfig, ExtensionConfigs};
use cairn_arm::models::operation::{StatusMessage, TargetResource};
use cairn_arm::{ArmError, ErrorDetail, ResourceId, ResourceIdKind};
use cairn_eval::ScopeKind;
use cairn_json::Node;
use cairn_store::{
    DeploymentId, DeploymentKey, DeploymentRecord, DeploymentStatus, DeploymentUpdate,
    OperationStep, Store, Timestamp,
};
use cairn_template::{DeploymentInput, Diagnostic, Expansion, ParametersFile, Template};
use serde_json::{Value as Json, json};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::events::{DeploymentEvent, EventKind};
use crate::hook::{EngineHook, RuntimeValues};
use crate::link::TemplateOrigin;
use crate::records::EngineAnnotation;
use crate::run::{
    EngineEnv, Run, Tree, context_for, dependencies, diagnostic_detail, request_secure_items,
    secure_config, template_error,
};

/// What `prepare` learned about a request.
pub(crate) struct Prepared {
    pub annotation: EngineAnnotation,
    /// Parameters the template declares secure (their values are sealed before storing).
    pub secure_parameters: Vec<String>,
}

/// A template scope's kind for a deployment scope ID.
pub(crate) fn scope_kind_of(scope: &str) -> Result<ScopeKind, ArmError> {
    if scope.trim_matches('/').is_empty() {
        return Ok(ScopeKind::Tenant);
    }
    let id = ResourceId::parse(scope).map_err(|e| e.to_arm_error(scope))?;
    match id.kind() {
        ResourceIdKind::ResourceGroup => Ok(ScopeKind::ResourceGroup),
        ResourceIdKind::Subscription => Ok(ScopeKind::Subscription),
        ResourceIdKind::ManagementGroup => Ok(ScopeKind::ManagementGroup),
        ResourceIdKind::Tenant => Ok(ScopeKind::Tenant),
        _ => Err(ArmError::new(
            400,
            "InvalidDeploymentScope",
            format!(
                "Deployments can be created at a tenant, management group, subscription or resource group, not at '{scope}'."
            ),
        )),
    }
}

fn scope_name(kind: ScopeKind) -> &'static str {
    match kind {
        ScopeKind::Tenant => "tenant",
        ScopeKind::ManagementGroup => "management group",
        ScopeKind::Subscription => "subscription",
        ScopeKind::ResourceGroup | ScopeKind::Local => "resource group",
    }
}

/// The template JSON of a request (an object, or a JSON string holding one). A linked request is resolved first
/// ([`crate::link::resolve_request`]): its `template` then holds the downloaded template beside the link.
pub(crate) fn template_json(properties: &DeploymentProperties) -> Result<Json, ArmError> {
    if properties.template.is_none() && properties.template_link.is_some() {
        return Err(ArmError::new(
            400,
            "InvalidRequestContent",
            "The linked template of this request was not resolved.",
        ));
    }
    match &properties.template {
        Some(Json::Object(_)) => Ok(properties.template.clone().unwrap_or(Json::Null)),
        Some(Json::String(text)) => serde_json::from_str::<Json>(text)
            .ok()
            .filter(Json::is_object)
            .ok_or_else(|| {
                ArmError::new(
                    400,
                    "InvalidTemplate",
                    "The template string is not a JSON object.",
                )
            }),
        _ => Err(ArmError::new(
            400,
            "InvalidRequestContent",
            "The request content is not valid: 'properties.template' is required.",
        )),
    }
}

/// The parameters file a request amounts to: its `parameters` and `extensionConfigs`.
pub(crate) fn parameters_file(
    properties: &DeploymentProperties,
) -> (ParametersFile, Vec<ErrorDetail>) {
    let mut doc = serde_json::Map::new();
    doc.insert(
        "parameters".into(),
        properties
            .parameters
            .as_ref()
            .map(|p| Json::Object(p.0.clone()))
            .unwrap_or_else(|| json!({})),
    );
    if let Some(configs) = &properties.extension_configs {
        doc.insert(
            "extensionConfigs".into(),
            serde_json::to_value(configs).unwrap_or_else(|_| json!({})),
        );
    }
    let (file, diags) = ParametersFile::parse(&Node::from_json(&Json::Object(doc)));
    let errors = diags
        .iter()
        .filter(|d| d.is_error())
        .map(diagnostic_detail)
        .collect();
    (file, errors)
}

/// Folds a request's `deploymentProviderConfigs` (REP 0004; also spelled `deploymentProviderConfigurations`) into
/// its `extensionConfigs`, reading the items as a parameters file reads them (`reference` is a Key Vault
/// reference), so that sealing, expansion and records see one form and the other is never stored.
pub(crate) fn fold_provider_configs(properties: &mut DeploymentProperties) -> Result<(), ArmError> {
    let Some(configs) = properties.deployment_provider_configs.take() else {
        return Ok(());
    };
    let invalid = |details: Vec<ErrorDetail>| {
        ArmError::new(
            400,
            "InvalidRequestContent",
            "The request's 'deploymentProviderConfigs' are not valid; see the details.",
        )
        .with_details(details)
    };
    let doc = json!({ "deploymentProviderConfigs": Json::Object(configs.0) });
    let (file, diags) = ParametersFile::parse(&Node::from_json(&doc));
    let errors: Vec<ErrorDetail> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| diagnostic_detail(d).with_target(format!("properties.{}", d.target)))
        .collect();
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    let merged = properties
        .extension_configs
        .get_or_insert_with(ExtensionConfigs::default);
    for input in file.extension_configs {
        let target = format!("properties.{}", input.path);
        if merged.keys().any(|a| a.eq_ignore_ascii_case(&input.alias)) {
            return Err(invalid(vec![
                ErrorDetail::new(
                    "InvalidExtensionConfig",
                    format!(
                        "The config of extension '{}' is given in both 'extensionConfigs' and \
                         'deploymentProviderConfigs'.",
                        input.alias
                    ),
                )
                .with_target(target),
            ]));
        }
        let mut config = ExtensionConfig::new();
        for (property, item) in input.items {
            // The item may hold a secret: the message names the property, never the value.
            let item = serde_json::from_value(item.to_json()).map_err(|_| {
                invalid(vec![
                    ErrorDetail::new(
                        "InvalidExtensionConfig",
                        format!(
                            "The config property '{property}' of extension '{}' is not a value or a Key Vault reference.",
                            input.alias
                        ),
                    )
                    .with_target(format!("{target}.{property}")),
                ])
            })?;
            config.insert(property, item);
        }
        merged.insert(input.alias, config);
    }
    Ok(())
}

/// FNV-1a of the template text as a decimal string, shaped like ARM's `templateHash`.
pub(crate) fn template_hash(template: &Json) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in template.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.to_string()
}

fn invalid(name: &str, tracking: &str, details: Vec<ErrorDetail>) -> ArmError {
    ArmError::invalid_template_deployment(name, tracking, details)
}

/// Diagnostic codes that are warnings for an ordinary deployment but refuse a stack-initiated one (REP 0006: a
/// config property the declaration does not know; seed 003: a stack cannot keep user-provided credentials).
const REFUSED_FOR_STACKS: [&str; 2] = [
    cairn_template::config::UNDECLARED_CONFIG_PROPERTY,
    cairn_template::config::USER_PROVIDED_AUTH,
];

/// Checks one deployment's expansion before anything runs: every body evaluates, and every inline nested
/// deployment's child expands (its extension configs normalise, its required config properties are supplied),
/// recursively. For a stack-initiated deployment the [`REFUSED_FOR_STACKS`] warnings are errors too. `prefix`
/// is the JSON path of this deployment's template in the root's.
fn preflight(
    expansion: &Expansion<'_>,
    hook: &EngineHook,
    stack_initiated: bool,
    prefix: &str,
    errors: &mut Vec<ErrorDetail>,
) {
    let located = |diags: Vec<Diagnostic>| -> Vec<Diagnostic> {
        diags
            .into_iter()
            .map(|mut d| {
                if !prefix.is_empty() {
                    d.target = if d.target.is_empty() {
                        prefix.to_string()
                    } else {
                        format!("{prefix}.{}", d.target)
                    };
                }
                d
            })
            .collect()
    };
    if stack_initiated {
        for d in located(expansion.diagnostics()) {
            if !d.is_error() && REFUSED_FOR_STACKS.contains(&d.code.as_str()) {
                errors.push(diagnostic_detail(&d));
            }
        }
    }
    for &index in expansion.order() {
        match expansion.evaluate(index) {
            Ok(Some(_)) => {}
            Ok(None) => continue,
            Err(diags) => {
                errors.push(template_error(&located(diags)));
                continue;
            }
        }
        if !expansion.resource(index).nested_deployment {
            continue;
        }
        // Not inline (a templateLink): fetched and checked when it runs.
        let nested = match expansion.nested(index) {
            Ok(nested) => nested,
            Err(diags) if diags.is_empty() => continue,
            Err(diags) => {
                errors.push(template_error(&located(diags)));
                continue;
            }
        };
        match expansion.expand_nested(&nested, hook) {
            Ok(child) => {
                let child_prefix = if prefix.is_empty() {
                    nested.path.clone()
                } else {
                    format!("{prefix}.{}", nested.path)
                };
                preflight(&child, hook, stack_initiated, &child_prefix, errors);
            }
            Err(diags) => errors.push(template_error(&located(diags))),
        }
    }
}

/// Validates a request for a deployment at `key` and computes what is stored beside it. Runs phase one of the
/// expansion with no runtime values (so `reference()`-dependent parts stay open) and the [`preflight`], in stacks
/// mode when `stack_initiated`. `locations`: the deployment's and its resource group's.
pub(crate) fn prepare(
    env: &EngineEnv,
    key: &DeploymentKey,
    properties: &DeploymentProperties,
    (location, resource_group_location): (Option<&str>, Option<&str>),
    annotation: EngineAnnotation,
    tracking: &str,
    stack_initiated: bool,
) -> Result<(Prepared, Vec<cairn_template::ResourceIdentity>), ArmError> {
    let template_value = template_json(properties)?;
    let root = Node::from_json(&template_value);
    // ARM's static validation first (limits such as the expression length, expression syntax, references),
    // as `cairn template validate` does: a template it refuses never reaches evaluation.
    let static_diags = cairn_template::checks::check_template(&root);
    let (template, model_diags) = Template::parse(root);
    // The model reports some of the same findings (duplicate names, section shapes): one list, not both.
    let diags = if static_diags.iter().any(Diagnostic::is_error) {
        static_diags
    } else {
        model_diags
    };
    let errors: Vec<ErrorDetail> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(diagnostic_detail)
        .collect();
    if !errors.is_empty() {
        return Err(invalid(&key.name, tracking, errors));
    }
    let kind = scope_kind_of(&key.scope)?;
    let template_kind = match template.scope {
        ScopeKind::Local => ScopeKind::ResourceGroup,
        other => other,
    };
    if template_kind != kind {
        return Err(invalid(
            &key.name,
            tracking,
            vec![ErrorDetail::new(
                "InvalidDeploymentScope",
                format!(
                    "The template is for {} deployments ($schema), but the deployment is at {} scope.",
                    scope_name(template_kind),
                    scope_name(kind)
                ),
            )],
        ));
    }
    if !matches!(kind, ScopeKind::ResourceGroup) && location.is_none() {
        return Err(ArmError::new(
            400,
            "LocationRequired",
            "The location property is required for this definition.",
        ));
    }
    let (file, errors) = parameters_file(properties);
    if !errors.is_empty() {
        return Err(invalid(&key.name, tracking, errors));
    }
    let ctx = context_for(
        key,
        location,
        resource_group_location,
        &annotation,
        &env.settings,
    );
    let hook = EngineHook::new(Rc::new(RuntimeValues::default()));
    let input = DeploymentInput::new(&template, &file, ctx);
    let expansion = Expansion::start(input, &hook)
        .map_err(|diags| invalid(&key.name, tracking, vec![template_error(&diags)]))?;
    // Preflight, as ARM's: every body must evaluate (runtime values may stay open; hard errors may not).
    let mut errors = Vec::new();
    preflight(&expansion, &hook, stack_initiated, "", &mut errors);
    drop(hook.take_misses());
    if !errors.is_empty() {
        return Err(invalid(&key.name, tracking, errors));
    }
    let identities = expansion.resources();
    let secure_parameters = template
        .parameters
        .iter()
        .filter(|p| {
            cairn_arm::secure::template_parameter_type(&template_value, &p.name)
                .is_some_and(|t| cairn_arm::secure::is_secure_type(&t))
        })
        .map(|p| p.name.clone())
        .collect();
    let annotation = EngineAnnotation {
        dependencies: dependencies(&identities),
        template_hash: Some(template_hash(&template_value)),
        location: location.map(str::to_string),
        ..annotation
    };
    Ok((
        Prepared {
            annotation,
            secure_parameters,
        },
        identities,
    ))
}

/// Everything a root run needs.
pub(crate) struct RootStart {
    pub record: DeploymentRecord,
    /// The request with its secrets (in memory only).
    pub properties: DeploymentProperties,
    pub annotation: EngineAnnotation,
    pub events: Option<mpsc::UnboundedSender<DeploymentEvent>>,
    pub cancel: CancellationToken,
    pub done: watch::Sender<bool>,
    pub registry: Arc<crate::engine::RunRegistry>,
    /// Recovery resumes this run after a crash.
    pub resumed: bool,
}

/// Runs a root deployment tree to its end.
pub(crate) async fn run_root(env: Arc<EngineEnv>, start: RootStart) {
    let record = start.record;
    let tree = Rc::new(Tree {
        permits: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        env,
        cancel: start.cancel,
        events: start.events,
        stack_initiated: record.stack_initiated,
        correlation_id: record.correlation_id.clone(),
        resumed: start.resumed,
        values: Rc::new(RuntimeValues::default()),
        active: std::cell::RefCell::new(vec![record.id.clone()]),
    });
    let heartbeat_stop = CancellationToken::new();
    let heartbeat = tokio::task::spawn_local(tree.clone().heartbeat(heartbeat_stop.clone()));
    run_tree(&tree, &record, &start.properties, &start.annotation).await;
    heartbeat_stop.cancel();
    let _ = heartbeat.await;
    start.registry.finish(&record.key);
    let _ = start.done.send(true);
}

async fn run_tree(
    tree: &Rc<Tree>,
    record: &DeploymentRecord,
    properties: &DeploymentProperties,
    annotation: &EngineAnnotation,
) {
    let env = tree.env.clone();
    let properties_json = serde_json::to_value(properties).unwrap_or(Json::Null);
    let template_value = match template_json(properties) {
        Ok(t) => t,
        Err(e) => {
            let run = bare_run(tree, record);
            run.fail_record(e.into_detail()).await;
            return;
        }
    };
    let (template, diags) = Template::parse(Node::from_json(&template_value));
    let mut run = Run::new(
        tree.clone(),
        record.id.clone(),
        record.key.clone(),
        0,
        record.version,
        secure_config(Some(&template), request_secure_items(&properties_json)),
    );
    if diags.iter().any(|d| d.is_error()) {
        run.fail_record(template_error(&diags)).await;
        return;
    }
    let (file, errors) = parameters_file(properties);
    if !errors.is_empty() {
        run.fail_record(
            ErrorDetail::new("InvalidTemplate", "The parameters are not valid.")
                .with_details(errors),
        )
        .await;
        return;
    }
    let rg_location = resource_group_location(env.store.as_ref(), &record.key).await;
    let ctx = context_for(
        &record.key,
        annotation
            .location
            .as_deref()
            .or(record.location.as_deref()),
        rg_location.as_deref(),
        annotation,
        &env.settings,
    );
    run.set_link_context(TemplateOrigin::of(properties), ctx.clone());
    let hook = EngineHook::new(tree.values.clone());
    let expansion = run
        .with_runtime_values(&hook, || {
            Expansion::start(DeploymentInput::new(&template, &file, ctx.clone()), &hook)
        })
        .await;
    match expansion {
        Ok(expansion) => {
            run.execute(&expansion, &hook).await;
        }
        Err(error) => run.fail_record(error).await,
    }
}

fn bare_run(tree: &Rc<Tree>, record: &DeploymentRecord) -> Run {
    Run::new(
        tree.clone(),
        record.id.clone(),
        record.key.clone(),
        0,
        record.version,
        HashMap::new(),
    )
}

/// The location of the resource group a deployment key is in, when it is a resource-group deployment.
pub(crate) async fn resource_group_location(
    store: &dyn Store,
    key: &DeploymentKey,
) -> Option<String> {
    let id = ResourceId::parse(&key.scope).ok()?;
    let (sub, rg) = (id.subscription_id()?, id.resource_group_name()?);
    store
        .get_resource_group(sub, rg)
        .await
        .ok()
        .flatten()
        .map(|g| g.group.location)
}

impl Run {
    /// Ends a run that could not start: `Failed` with `error` (wrapped as ARM's `DeploymentFailed` unless it
    /// already is one).
    pub(crate) async fn fail_record(&self, error: ErrorDetail) {
        let error = if error.code() == "DeploymentFailed" {
            error
        } else {
            ArmError::deployment_failed([error]).into_detail()
        };
        let now = Timestamp::now();
        self.update(DeploymentUpdate {
            status: Some(DeploymentStatus::Failed),
            started_at: Some(now),
            finished_at: Some(now),
            error: serde_json::to_value(&error).ok(),
            extensions: Some(json!([])),
            ..DeploymentUpdate::at(now)
        })
        .await;
        self.release().await;
        self.tree.emit(DeploymentEvent {
            kind: EventKind::DeploymentFinished,
            deployment: self.key.name.clone(),
            depth: self.depth,
            resource: String::new(),
            resource_type: String::new(),
            status: "Failed".into(),
            duration: None,
            error: Some(error),
        });
    }
}

/// Ends every operation an interrupted run (and, recursively, its nested deployments) left running with a
/// `Failed` step carrying `error`, so a finished deployment shows no operation `Running`.
pub(crate) async fn end_running_operations(
    store: &dyn Store,
    id: &DeploymentId,
    error: &ErrorDetail,
    depth: usize,
) {
    let Ok(ops) = store.latest_operations(id).await else {
        return;
    };
    for op in ops {
        let step = op.step;
        let target: TargetResource = step
            .target_resource
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        let is_deployment = target
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        if is_deployment
            && depth < cairn_template::expand::MAX_NESTING_DEPTH
            && let Some(child) = target.id.as_deref().and_then(deployment_key_of)
            && let Ok(Some(child)) = store.get_deployment(&child).await
        {
            Box::pin(end_running_operations(store, &child.id, error, depth + 1)).await;
        }
        if step.provisioning_state != "Running" {
            continue;
        }
        let ended = OperationStep {
            provisioning_state: "Failed".into(),
            status_code: Some("InternalServerError".into()),
            status_message: serde_json::to_value(StatusMessage {
                status: Some("Failed".into()),
                error: Some(error.clone()),
            })
            .ok(),
            timestamp: Timestamp::now(),
            duration_ms: None,
            ..step
        };
        if let Err(e) = store.append_operation(ended).await {
            tracing::warn!(error = %e, "could not end an interrupted operation");
        }
    }
}

/// How far an interrupted run got: the succeeded operations in its journal and, recursively, in its nested
/// deployments' journals. Recovery compares it between takeovers.
pub(crate) async fn journal_progress(store: &dyn Store, id: &DeploymentId, depth: usize) -> u64 {
    let Ok(ops) = store.latest_operations(id).await else {
        return 0;
    };
    let mut progress = 0;
    for op in ops {
        let step = &op.step;
        if step.provisioning_state == "Succeeded" {
            progress += 1;
        }
        let target: TargetResource = step
            .target_resource
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        let is_deployment = target
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        if is_deployment
            && depth < cairn_template::expand::MAX_NESTING_DEPTH
            && let Some(child) = target.id.as_deref().and_then(deployment_key_of)
            && let Ok(Some(child)) = store.get_deployment(&child).await
        {
            progress += Box::pin(journal_progress(store, &child.id, depth + 1)).await;
        }
    }
    progress
}

/// What an interrupted run created (or was creating), from its journal and its nested deployments' journals.
pub(crate) async fn interrupted_resources(
    store: &dyn Store,
    id: &DeploymentId,
    depth: usize,
) -> (Vec<DeploymentResourceReference>, Vec<DeploymentExtension>) {
    let mut resources = Vec::new();
    let mut extensions: Vec<DeploymentExtension> = Vec::new();
    let Ok(ops) = store.latest_operations(id).await else {
        return (resources, extensions);
    };
    for op in ops {
        let step = &op.step;
        if step.provisioning_operation != "Create" {
            continue;
        }
        if !matches!(step.provisioning_state.as_str(), "Succeeded" | "Running") {
            continue;
        }
        let target: TargetResource = step
            .target_resource
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        let is_deployment = target
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Resources/deployments"));
        if is_deployment && depth < cairn_template::expand::MAX_NESTING_DEPTH {
            if let Some(child) = target.id.as_deref().and_then(deployment_key_of)
                && let Ok(Some(child)) = store.get_deployment(&child).await
            {
                let (r, e) = Box::pin(interrupted_resources(store, &child.id, depth + 1)).await;
                resources.extend(r);
                extensions.extend(e);
            }
            continue;
        }
        match &target.extension {
            Some(ext) => {
                let reference_id = step.extension.as_ref().and_then(|e| e.reference_id.clone());
                if !extensions.iter().any(|e| e.same_identity(ext)) {
                    extensions.push(ext.clone());
                }
                resources.push(DeploymentResourceReference {
                    extension: Some(ext.reference()),
                    resource_type: target.resource_type.clone(),
                    identifiers: target.identifiers.clone(),
                    api_version: target.api_version.clone(),
                    reference_id,
                    symbolic_name_path: target.symbolic_name.clone().map(|s| vec![s]),
                    ..DeploymentResourceReference::default()
                });
            }
            None => {
                if let Some(id) = target.id {
                    resources.push(DeploymentResourceReference {
                        id: Some(id),
                        ..DeploymentResourceReference::default()
                    });
                }
            }
        }
    }
    (resources, extensions)
}

/// The store key of a deployment resource ID.
pub(crate) fn deployment_key_of(id: &str) -> Option<DeploymentKey> {
    let lower = id.to_ascii_lowercase();
    let marker = "/providers/microsoft.resources/deployments/";
    let at = lower.rfind(marker)?;
    let scope = &id[..at];
    let name = &id[at + marker.len()..];
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some(DeploymentKey::new(scope, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_ids_become_keys() {
        let key = deployment_key_of(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/inner",
        )
        .unwrap();
        assert_eq!(key.scope, "/subscriptions/s/resourceGroups/rg");
        assert_eq!(key.name, "inner");
        let tenant = deployment_key_of("/providers/Microsoft.Resources/deployments/t").unwrap();
        assert_eq!(tenant.scope, "");
        assert!(deployment_key_of("/subscriptions/s").is_none());
    }

    #[test]
    fn scope_kinds() {
        assert_eq!(scope_kind_of("").unwrap(), ScopeKind::Tenant);
        assert_eq!(
            scope_kind_of("/subscriptions/s/resourceGroups/rg").unwrap(),
            ScopeKind::ResourceGroup
        );
        assert!(scope_kind_of("/subscriptions/s/resourceGroups/rg/providers/A.B/c/d").is_err());
    }

    #[test]
    fn template_hash_is_stable() {
        assert_eq!(
            template_hash(&json!({"a": 1})),
            template_hash(&json!({"a": 1}))
        );
        assert_ne!(
            template_hash(&json!({"a": 1})),
            template_hash(&json!({"a": 2}))
        );
    }
}

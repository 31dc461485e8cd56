//! Root deployments on the coordinator: preparing a request (parse, expand phase one, dependencies), running a
//! root deployment tree with its heartbeat, and the recovery of runs whose engine died.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Weak};

use cairn_arm::access::{Access, Action};
use cairn_arm::models::deployment::DeploymentProperties;
use cairn_arm::{ArmError, ErrorDetail, ResourceId};
use cairn_eval::ScopeKind;
use cairn_json::Node;
use cairn_store::{
    DeploymentKey, DeploymentRecord, DeploymentStatus, DeploymentUpdate, Store, Timestamp,
};
use cairn_template::resource_types::{ExtensionTypes, ResourceRef, check_resource};
use cairn_template::{Child, DeploymentInput, Diagnostic, Expansion, Template};
use serde_json::{Value as Json, json};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::adoption::ExistingResourceCheck;
use crate::env::{EngineEnv, RegistryTypes};
use crate::events::{DeploymentEvent, EventKind};
use crate::hook::{EngineHook, RuntimeValues};
use crate::link::TemplateOrigin;
use crate::records::EngineAnnotation;
use crate::request::{
    context_for, diagnostic_detail, parameters_file, scope_kind_of, scope_name,
    secure_parameter_names, template_error, template_hash, template_json, type_finding_detail,
};
use crate::run::{Run, Tree, dependencies, request_secure_items, secure_config};

thread_local! {
    /// The template the coordinator's last `prepare` for a run parsed, with the request it came from: the run
    /// started for that request takes it instead of parsing the template again. One slot: a request whose run
    /// never starts (its record could not be stored) is replaced by the next. The request is held weakly and
    /// compared by address, which cannot be reused while the weak reference keeps its allocation.
    static PARSED_FOR_RUN: RefCell<Option<(Weak<DeploymentProperties>, Rc<Template>)>> =
        const { RefCell::new(None) };
}

/// The template `prepare` parsed for `properties`, when it is the last one it parsed for a run.
fn parsed_for_run(properties: &Arc<DeploymentProperties>) -> Option<Rc<Template>> {
    PARSED_FOR_RUN.with(|slot| {
        let mut slot = slot.borrow_mut();
        match slot.take() {
            Some((request, template)) if Weak::ptr_eq(&request, &Arc::downgrade(properties)) => {
                Some(template)
            }
            other => {
                *slot = other;
                None
            }
        }
    })
}

/// What `prepare` learned about a request.
pub(crate) struct Prepared {
    pub annotation: EngineAnnotation,
    /// Parameters the template declares secure (their values are sealed before storing).
    pub secure_parameters: Vec<String>,
}

fn invalid(name: &str, tracking: &str, details: Vec<ErrorDetail>) -> ArmError {
    ArmError::invalid_template_deployment(name, tracking, details)
}

/// Diagnostic codes that are warnings for an ordinary deployment but refuse a stack-initiated one: seed 000's
/// stacks-mode rules as the engine can judge them itself, so that a gap in the stacks linter cannot become a stack
/// that deletes without a credential. REP 0006: a config property the declaration does not know; a secret given as
/// a value, which a stack can neither keep nor fetch again; a `list*()` output reached through a form no directive
/// can stand for, or a config value that reads a secure parameter (`cairn_template::config_source`, the rule the
/// linter shares). Seed 003: a stack cannot keep
/// user-provided credentials.
const REFUSED_FOR_STACKS: [&str; 5] = [
    cairn_template::config::UNDECLARED_CONFIG_PROPERTY,
    cairn_template::config::USER_PROVIDED_AUTH,
    cairn_template::config::NOT_STORABLE_CONFIG,
    cairn_template::config_source::UNTRACEABLE_CONFIG_SOURCE,
    cairn_template::config_source::SECURE_PARAMETER_CONFIG_SOURCE,
];

/// Checks one deployment's expansion before anything runs: every body evaluates, and every inline nested
/// deployment's child expands (its extension configs normalise, its required config properties are supplied),
/// recursively. For a stack-initiated deployment the [`REFUSED_FOR_STACKS`] warnings are errors too. `prefix`
/// is the JSON path of this deployment's template in the root's. Every resource whose ID is known up front (nested
/// deployments' included, in their target scopes) must lie within `access`; those that do not go to `denied`.
fn preflight(
    expansion: &Expansion<'_>,
    hook: &EngineHook,
    (access, denied): (&Access, &mut Vec<ArmError>),
    (types, root): (&dyn ExtensionTypes, &Node),
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
    for &index in expansion.order() {
        let body = match expansion.evaluate(index) {
            Ok(Some(body)) => body,
            Ok(None) => continue,
            Err(diags) => {
                errors.push(template_error(&located(diags)));
                continue;
            }
        };
        let identity = expansion.resource(index);
        // An extension resource's body against its extension's declared types, where they are known.
        if let Some(extension) = &identity.extension {
            let resource = ResourceRef {
                extension,
                resource_type: &identity.resource_type,
                api_version: identity.api_version.as_deref(),
                path: &identity.path,
                existing: identity.existing,
            };
            errors.extend(
                check_resource(types, root, prefix, resource, &body)
                    .iter()
                    .map(type_finding_detail),
            );
        }
        if let Some(id) = identity.id.as_deref().filter(|id| id.starts_with('/')) {
            let action = if identity.existing {
                Action::Read
            } else {
                Action::Write
            };
            if let Err(error) = access.check(action, id) {
                denied.push(error);
            }
        }
        if !identity.nested_deployment {
            continue;
        }
        // Not inline (a templateLink): fetched and checked when it runs. A child whose template or parameters
        // depend on a runtime value is expanded then too.
        let nested = match expansion.child(index) {
            Ok(Child::Ready(nested)) => *nested,
            Ok(Child::Deferred(_)) => continue,
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
                preflight(
                    &child,
                    hook,
                    (access, &mut *denied),
                    (types, root),
                    stack_initiated,
                    &child_prefix,
                    errors,
                );
            }
            Err(diags) => errors.push(template_error(&located(diags))),
        }
    }
    // After the bodies: evaluating a module's body judges where its config values come from.
    if stack_initiated {
        for d in located(expansion.diagnostics()) {
            if !d.is_error() && REFUSED_FOR_STACKS.contains(&d.code.as_str()) {
                errors.push(diagnostic_detail(&d));
            }
        }
    }
}

/// Validates a request for a deployment at `key` and computes what is stored beside it. Runs phase one of the
/// expansion with no runtime values (so `reference()`-dependent parts stay open) and the [`preflight`], in stacks
/// mode when `stack_initiated`. `locations`: the deployment's and its resource group's.
///
/// The outcome goes to `then` before the template, its expansion and the rest are freed (a big template's are
/// milliseconds to free, which a caller waiting on the outcome need not wait for): `then` may hand it on (a channel
/// to the caller) and the freeing follows. `for_run`: a run is to start for this very request (`properties`), which
/// takes the parsed template over from here (`PARSED_FOR_RUN`) instead of parsing it again.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare<R>(
    env: &EngineEnv,
    key: &DeploymentKey,
    properties: &Arc<DeploymentProperties>,
    for_run: bool,
    (location, resource_group_location): (Option<&str>, Option<&str>),
    annotation: EngineAnnotation,
    tracking: &str,
    stack_initiated: bool,
    then: impl FnOnce(Result<(Prepared, Vec<cairn_template::ResourceIdentity>), ArmError>) -> R,
) -> R {
    // Declared out here so that they outlive `then` (dropped in reverse order: the expansion before what it
    // borrows).
    let template_value;
    let template;
    let file;
    let hook;
    let expansion;
    let outcome = 'prepared: {
        template_value = match template_json(properties) {
            Ok(value) => value,
            Err(error) => break 'prepared Err(error),
        };
        let root = Node::from_json(&template_value);
        // ARM's static validation first (limits such as the expression length, expression syntax, references),
        // as `cairn template validate` does: a template it refuses never reaches evaluation.
        let static_diags = cairn_template::checks::check_template(&root);
        let (parsed, model_diags) = Template::parse(root);
        template = Rc::new(parsed);
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
            break 'prepared Err(invalid(&key.name, tracking, errors));
        }
        let kind = match scope_kind_of(&key.scope) {
            Ok(kind) => kind,
            Err(error) => break 'prepared Err(error),
        };
        let template_kind = match template.scope {
            ScopeKind::Local => ScopeKind::ResourceGroup,
            other => other,
        };
        if template_kind != kind {
            break 'prepared Err(invalid(
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
            break 'prepared Err(ArmError::new(
                400,
                "LocationRequired",
                "The location property is required for this definition.",
            ));
        }
        let errors;
        (file, errors) = parameters_file(properties);
        if !errors.is_empty() {
            break 'prepared Err(invalid(&key.name, tracking, errors));
        }
        // A Key Vault reference among the parameters names its vault up front.
        for entry in &file.parameters {
            if let cairn_template::ParameterValue::KeyVault(reference) = &entry.value
                && let Err(error) = annotation.access.check(Action::Read, &reference.vault_id)
            {
                break 'prepared Err(error);
            }
        }
        let ctx = context_for(
            key,
            location,
            resource_group_location,
            &annotation,
            &env.settings,
        );
        hook = EngineHook::new(Rc::new(RuntimeValues::default()));
        let input = DeploymentInput::new(&template, &file, ctx);
        expansion = match Expansion::start(input, &hook) {
            Ok(expansion) => expansion,
            Err(diags) => {
                break 'prepared Err(invalid(&key.name, tracking, vec![template_error(&diags)]));
            }
        };
        // Preflight, as ARM's: every body must evaluate (runtime values may stay open; hard errors may not).
        let mut errors = Vec::new();
        let mut denied = Vec::new();
        preflight(
            &expansion,
            &hook,
            (&annotation.access, &mut denied),
            (&RegistryTypes(env.host.registry()), &template.root),
            stack_initiated,
            "",
            &mut errors,
        );
        drop(hook.take_misses());
        if let Some(first) = denied.first() {
            // What the caller may not reach is known before anything is written: refuse the whole request, as ARM
            // does, with every scope it reached for.
            let refused = first.clone();
            break 'prepared Err(if denied.len() > 1 {
                refused.with_details(denied.iter().map(|e| e.detail().clone()))
            } else {
                refused
            });
        }
        if !errors.is_empty() {
            break 'prepared Err(invalid(&key.name, tracking, errors));
        }
        // Then seed 000's whole stacks-mode table, by the code the stack service runs too, for what the checks
        // above do not judge (their findings keep their own codes): a stack's deployment that did not pass through
        // the stack service (or a gap between the two) must not leave a stack unable to delete.
        if stack_initiated {
            let findings = crate::stacks_rules::stacks_mode_findings(
                &template_value,
                properties.parameters.as_ref(),
                properties.extension_configs.as_ref(),
                ("properties.template", "properties"),
            );
            if !findings.is_empty() {
                break 'prepared Err(invalid(&key.name, tracking, findings));
            }
        }
        let identities = expansion.resources();
        let secure_parameters = secure_parameter_names(&template, &template_value);
        let annotation = EngineAnnotation {
            dependencies: dependencies(&identities),
            template_hash: Some(template_hash(&template_value)),
            location: location.map(str::to_string),
            ..annotation
        };
        if for_run {
            PARSED_FOR_RUN.with(|slot| {
                *slot.borrow_mut() = Some((Arc::downgrade(properties), template.clone()));
            });
        }
        Ok((
            Prepared {
                annotation,
                secure_parameters,
            },
            identities,
        ))
    };
    then(outcome)
}

/// Everything a root run needs.
pub(crate) struct RootStart {
    pub record: DeploymentRecord,
    /// The request with its secrets (in memory only).
    pub properties: Arc<DeploymentProperties>,
    pub annotation: EngineAnnotation,
    pub events: Option<mpsc::UnboundedSender<DeploymentEvent>>,
    pub cancel: CancellationToken,
    /// The engine's hand-over signal.
    pub suspend: CancellationToken,
    /// The claims the tree holds, shared with the registry.
    pub claims: crate::registry::Claims,
    pub done: watch::Sender<bool>,
    pub registry: Arc<crate::registry::RunRegistry>,
    /// Recovery resumes this run after a crash.
    pub resumed: bool,
    /// A stack's deployment: what to do with extension resources that exist before their first write.
    pub existing_resources: Option<ExistingResourceCheck>,
}

/// Runs a root deployment tree to its end.
pub(crate) async fn run_root(env: Arc<EngineEnv>, start: RootStart) {
    let record = start.record;
    let tree = Rc::new(Tree {
        permits: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        previews: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        lookups: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        queued: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        calls: Arc::new(Semaphore::new(env.settings.parallelism.max(1))),
        env,
        cancel: start.cancel,
        suspend: start.suspend,
        handed_over: std::cell::Cell::new(false),
        events: RefCell::new(start.events),
        stack_initiated: record.stack_initiated,
        access: start.annotation.access.clone(),
        existing_resources: start.existing_resources,
        correlation_id: record.correlation_id.clone(),
        resumed: start.resumed,
        values: Rc::new(RuntimeValues::default()),
        active: start.claims,
    });
    let in_flight = tree.env.settings.metrics.deployment_running();
    if start.resumed {
        tracing::info!(deployment = %record.key, "resuming the deployment");
    }
    let heartbeat_stop = CancellationToken::new();
    let heartbeat = tokio::task::spawn_local(tree.clone().heartbeat(heartbeat_stop.clone()));
    let ending = Ending {
        heartbeat_stop,
        heartbeat,
        in_flight,
        registry: start.registry,
        done: start.done,
    };
    // A stack's deployment is followed at once by the stack's own work on the same cores (its records read back,
    // the managed set collected and diffed): it is told only once the run's state is freed, as freeing thousands
    // of small allocations beside that work (one allocator arena in `cairn stack`) slowed both.
    let (mut early, late) = if tree.stack_initiated {
        (None, Some(ending))
    } else {
        (Some(ending), None)
    };
    run_tree(
        &tree,
        &record,
        &start.properties,
        &start.annotation,
        &mut early,
    )
    .await;
    if let Some(ending) = early.or(late) {
        ending.end(&tree, &record).await;
    }
}

/// What ends a root run once its record is final: the heartbeat stops, a handed-over run's claims are released,
/// the progress events' stream ends and whoever waits on `done` is told. It runs before the run's template,
/// expansion and values are dropped (except for a stack's deployment): for a deployment of thousands of resources,
/// freeing them takes milliseconds that the caller need not wait for.
struct Ending {
    heartbeat_stop: CancellationToken,
    heartbeat: tokio::task::JoinHandle<()>,
    in_flight: cairn_metrics::DeploymentInFlight,
    registry: Arc<crate::registry::RunRegistry>,
    done: watch::Sender<bool>,
}

impl Ending {
    async fn end(self, tree: &Tree, record: &DeploymentRecord) {
        self.heartbeat_stop.cancel();
        let _ = self.heartbeat.await;
        if tree.handed_over.get() {
            // Released only now that the heartbeat has stopped, so it cannot renew a claim released under it.
            for id in tree.active.ids() {
                if let Err(e) = tree
                    .env
                    .store
                    .release_deployment(&id, &tree.env.settings.owner_id)
                    .await
                {
                    tracing::warn!(deployment = %id, error = %e, "could not hand the deployment claim over");
                }
            }
            tracing::info!(deployment = %record.key, "deployment handed over: stopped at a safe point, claim released for recovery");
        }
        // Out of the gauge before anyone waiting on `done` looks at it.
        drop(self.in_flight);
        self.registry.finish(&record.key);
        tree.end_events();
        let _ = self.done.send(true);
    }
}

/// Runs the tree; ends it (`ending`, taken) before its large state is dropped when it got that far.
async fn run_tree(
    tree: &Rc<Tree>,
    record: &DeploymentRecord,
    properties: &Arc<DeploymentProperties>,
    annotation: &EngineAnnotation,
    ending: &mut Option<Ending>,
) {
    let env = tree.env.clone();
    let (template, diags) = match parsed_for_run(properties) {
        // Parsed and checked by `prepare` a moment ago: it found no errors.
        Some(template) => (template, Vec::new()),
        None => {
            let template_value = match template_json(properties) {
                Ok(t) => t,
                Err(e) => {
                    let run = bare_run(tree, record);
                    run.fail_record(e.into_detail()).await;
                    return;
                }
            };
            let (template, diags) = Template::parse(Node::from_json(&template_value));
            (Rc::new(template), diags)
        }
    };
    let mut run = Run::new(
        tree.clone(),
        record.id.clone(),
        record.key.clone(),
        0,
        record.version,
        secure_config(Some(&template), request_config_secure_items(properties)),
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
    let hook = EngineHook::deploying(tree.values.clone());
    let expansion = run
        .with_runtime_values(&hook, || {
            Expansion::start(DeploymentInput::new(&template, &file, ctx.clone()), &hook)
                .and_then(Expansion::require_known)
        })
        .await;
    match expansion {
        Ok(expansion) => {
            let finished = run.execute(&expansion, &hook).await;
            // Whoever waits is told before the run's results and its expansion are freed (thousands of entries
            // each for a big deployment: milliseconds).
            if let Some(ending) = ending.take() {
                ending.end(tree, record).await;
            }
            drop(finished);
        }
        Err(error) => run.fail_record(error).await,
    }
    if let Some(ending) = ending.take() {
        ending.end(tree, record).await;
    }
}

/// The config items the request itself types as secure, by alias. Only its extension configs are read: the rest of
/// the properties (the template among them) is not turned into JSON again for it.
fn request_config_secure_items(
    properties: &DeploymentProperties,
) -> std::collections::HashMap<String, Vec<String>> {
    let configs = serde_json::to_value(&properties.extension_configs).unwrap_or(Json::Null);
    request_secure_items(&serde_json::json!({ "extensionConfigs": configs }))
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
        self.finish_record(DeploymentUpdate {
            status: Some(DeploymentStatus::Failed),
            started_at: Some(now),
            finished_at: Some(now),
            error: serde_json::to_value(&error).ok(),
            extensions: Some(json!([])),
            ..DeploymentUpdate::at(now)
        })
        .await;
        self.count_end(DeploymentStatus::Failed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_takes_the_template_prepared_for_its_own_request_once_and_no_other() {
        let request = |template: Json| {
            Arc::new(
                serde_json::from_value::<DeploymentProperties>(json!({
                    "mode": "Incremental",
                    "template": template
                }))
                .unwrap(),
            )
        };
        let parse = |properties: &Arc<DeploymentProperties>| {
            let value = template_json(properties).unwrap();
            Rc::new(Template::parse(Node::from_json(&value)).0)
        };
        let prepared = request(json!({ "resources": {}, "variables": { "v": 1 } }));
        let other = request(json!({ "resources": {} }));
        PARSED_FOR_RUN.with(|slot| {
            *slot.borrow_mut() = Some((Arc::downgrade(&prepared), parse(&prepared)));
        });
        // Another request (even an equal one) does not take it, and leaves it for its own run.
        assert!(parsed_for_run(&other).is_none());
        assert!(
            parsed_for_run(&request(
                json!({ "resources": {}, "variables": { "v": 1 } })
            ))
            .is_none()
        );
        let taken =
            parsed_for_run(&prepared).expect("the run of the prepared request takes its template");
        assert_eq!(taken.variables.len(), 1);
        // Once: a second run of the same request (a resume) parses again.
        assert!(parsed_for_run(&prepared).is_none());
    }

    #[test]
    fn a_request_config_item_typed_secure_is_read_from_the_extension_configs_alone() {
        let properties: DeploymentProperties = serde_json::from_value(serde_json::json!({
            "mode": "Incremental",
            "template": { "resources": {} },
            "extensionConfigs": { "K8s": {
                "token": { "type": "secureString", "value": "x" },
                "namespace": { "value": "default" }
            } }
        }))
        .expect("properties");
        let secure = request_config_secure_items(&properties);
        assert_eq!(secure.get("k8s"), Some(&vec!["token".to_owned()]));
        assert_eq!(secure.len(), 1);

        let none: DeploymentProperties =
            serde_json::from_value(serde_json::json!({ "mode": "Incremental" }))
                .expect("properties");
        assert!(request_config_secure_items(&none).is_empty());
    }
}

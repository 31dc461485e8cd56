//! Expansion: from a template, its inputs and a deployment context to a [`Plan`].
//!
//! Two phases, as ARM does it. Phase one gives every resource instance its identity (condition, type, name, ID)
//! and its dependencies (explicit `dependsOn`, implicit from `reference`/`list*`/`resourceInfo` arguments, serial
//! copy batches), then orders them. Phase two evaluates bodies in that order, so a runtime hook can answer
//! `reference()` for resources "deployed" earlier; nested deployments become child plans; outputs come last.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use cairn_eval::suggest::did_you_mean;
use cairn_eval::{
    Budget, CopyKind, DeploymentFacts, Environment, EvalError, Evaluator, Object, RuntimeCall,
    ScopeKind, Unevaluated, UserFunction, Value, copy_count, ids, render_path,
};
use cairn_expr::{Expr, ExprKind};
use cairn_json::{Member, Node, NodeKind};

use crate::config::{
    Config, ConfigValue, Evaluated, check_config, config_diagnostic, config_view, property_target,
    read_alias_input,
};
use crate::config_source::{Names, directives, list_sources, record_directives, trace_config};
use crate::context::{DeploymentContext, normalize_scope};
use crate::diagnostics::{Diagnostic, join_path};
use crate::model::{ExtensionDecl, ResourceDecl, Template, VariableValue};
use crate::params::{KeyVaultReference, ParameterValue, ParametersFile, deployment_parameters};
use crate::plan::{
    CopyInfo, Deferred, DeferredKind, Plan, PlannedExtension, PlannedExtensionRef, PlannedOutput,
    PlannedParameter, PlannedResource,
};
use crate::runtime::{ReferenceRequest, RuntimeHook};
use crate::types;

/// ARM's limit on resources in one deployment after copy expansion.
pub const MAX_RESOURCES: usize = 800;
/// How deeply deployments may nest.
pub const MAX_NESTING_DEPTH: usize = 50;

/// Members of a resource declaration that steer expansion rather than describe the resource.
const CONTROL_KEYS: [&str; 11] = [
    "copy",
    "dependsOn",
    "condition",
    "resources",
    "comments",
    "existing",
    "import",
    "extension",
    "provider",
    "scope",
    "apiVersion",
];

/// Inputs to one deployment's expansion.
pub struct DeploymentInput<'a> {
    pub template: &'a Template,
    pub parameters: Vec<(String, ParameterValue)>,
    /// Extension config input per alias, from the parameters file or a parent deployment.
    pub extension_configs: Vec<(String, Config)>,
    pub context: DeploymentContext,
}

impl<'a> DeploymentInput<'a> {
    /// Inputs from a parameters file.
    pub fn new(
        template: &'a Template,
        file: &ParametersFile,
        context: DeploymentContext,
    ) -> DeploymentInput<'a> {
        DeploymentInput {
            template,
            parameters: file
                .parameters
                .iter()
                .map(|p| (p.name.clone(), p.value.clone()))
                .collect(),
            extension_configs: file
                .extension_configs
                .iter()
                .map(|c| (c.alias.clone(), c.config.clone()))
                .collect(),
            context,
        }
    }
}

/// Expands a deployment. Returns the plan (when expansion got far enough to produce one) and diagnostics.
pub fn expand(
    input: DeploymentInput<'_>,
    hook: &dyn RuntimeHook,
) -> (Option<Plan>, Vec<Diagnostic>) {
    let env = TemplateEnv::new(input, hook, None, 0, None);
    let plan = env.run();
    let diags = env.diags.into_inner();
    (plan, diags)
}

/// The child deployment of a nested `Microsoft.Resources/deployments` resource, ready to expand or deploy.
#[derive(Clone, Debug)]
pub struct NestedTemplate {
    pub template: Template,
    /// Parameter values (inner scope; outer scope reads the parent's parameters).
    pub parameters: Vec<(String, ParameterValue)>,
    /// Extension config input per child alias, evaluated in the parent.
    pub extension_configs: Vec<(String, Config)>,
    /// The child's deployment facts: name, subscription, resource group, location, management group.
    pub context: DeploymentContext,
    /// The child evaluates its expressions in a scope of its own: `expressionEvaluationOptions.scope` is
    /// `inner`, or the parent computed the template (`"template": "[variables('t')]"`), which leaves the child the
    /// expressions its `[[` escapes kept from the parent. Otherwise it sees the parent's parameters and variables.
    pub inner: bool,
    /// JSON path of the nested template in the parent, for diagnostics.
    pub path: String,
    /// Lower-case names of the parameters the parent computed from a secure value: the child treats them as
    /// secure whatever type it declares, so its errors and records do not show the secret.
    pub secure_parameters: Vec<String>,
}

/// A nested deployment's child as far as expansion can tell: ready to expand, or waiting for a value known only
/// while the deployment runs.
#[derive(Clone, Debug)]
pub enum Child {
    Ready(Box<NestedTemplate>),
    Deferred(Deferred),
}

/// One resource instance's identity after phase one.
#[derive(Clone, Debug)]
pub struct ResourceIdentity {
    pub index: usize,
    pub key: String,
    pub symbolic_name: Option<String>,
    pub copy: Option<CopyInfo>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub resource_type: String,
    pub api_version: Option<String>,
    pub extension: Option<PlannedExtensionRef>,
    pub condition: Option<bool>,
    pub existing: bool,
    /// Indices of the instances this one waits for.
    pub depends_on: Vec<usize>,
    /// A nested deployment with an inline template.
    pub nested_deployment: bool,
    pub path: String,
}

/// A deployment's expansion, step by step, for an engine that deploys as it goes: [`Expansion::start`] settles
/// parameters, extension configs, identities, dependencies and order; the engine then calls
/// [`Expansion::evaluate`] for each instance once its dependencies are deployed (so the runtime hook can answer
/// `reference()`), runs nested deployments through [`Expansion::nested`] / [`Expansion::expand_nested`] and
/// [`Expansion::set_nested_plan`], and ends with [`Expansion::outputs`] and [`Expansion::finish`].
///
/// Not `Send`: drive it from one task (a `LocalSet`), and do provider I/O elsewhere.
pub struct Expansion<'a> {
    env: TemplateEnv<'a>,
    parameters: Vec<(String, PlannedParameter)>,
    order: Vec<usize>,
}

impl<'a> Expansion<'a> {
    /// Phase one. Errors come back as diagnostics.
    pub fn start(
        input: DeploymentInput<'a>,
        hook: &'a dyn RuntimeHook,
    ) -> Result<Expansion<'a>, Vec<Diagnostic>> {
        Expansion::start_in(TemplateEnv::new(input, hook, None, 0, None))
    }

    fn start_in(env: TemplateEnv<'a>) -> Result<Expansion<'a>, Vec<Diagnostic>> {
        match env.prepare() {
            Some((parameters, order)) => Ok(Expansion {
                env,
                parameters,
                order,
            }),
            None => Err(env.diags.into_inner()),
        }
    }

    /// Non-fatal diagnostics collected so far (warnings), leaving them in place.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.env.diags.borrow().clone()
    }

    pub fn parameters(&self) -> &[(String, PlannedParameter)] {
        &self.parameters
    }

    /// Effective extension configs of this deployment (typed values: directives, never resolved secrets).
    pub fn extensions(&self) -> Vec<PlannedExtension> {
        self.env.extensions.borrow().clone()
    }

    /// A dependency order of the instances (every instance after everything it depends on).
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    pub fn resources(&self) -> Vec<ResourceIdentity> {
        let count = self.env.state.borrow().instances.len();
        (0..count).map(|i| self.resource(i)).collect()
    }

    pub fn resource(&self, index: usize) -> ResourceIdentity {
        let nested_deployment = self.env.is_nested_deployment(index);
        let state = self.env.state.borrow();
        let inst = &state.instances[index];
        ResourceIdentity {
            index,
            key: inst.key.clone(),
            symbolic_name: inst.symbolic.clone(),
            copy: inst.copy.clone(),
            id: inst.id.clone(),
            name: inst.name.clone(),
            resource_type: inst.resource_type.clone(),
            api_version: inst.api_version.clone(),
            extension: inst.extension.clone(),
            condition: inst.condition,
            existing: inst.existing,
            depends_on: inst.depends_on.clone(),
            nested_deployment,
            path: self.env.template.resources[inst.decl].path.clone(),
        }
    }

    /// Phase two for one instance: its evaluated body (`location`, `properties`, ... plus name/type/apiVersion),
    /// also remembered for later `reference()` answers. `Ok(None)` when its condition is false.
    pub fn evaluate(&self, index: usize) -> Result<Option<Value>, Vec<Diagnostic>> {
        if self.env.state.borrow().instances[index].condition == Some(false) {
            return Ok(None);
        }
        let before = self.env.diags.borrow().len();
        match self.env.evaluate_body(index) {
            Some(body) => Ok(Some(body)),
            None => Err(self.env.diags.borrow()[before..].to_vec()),
        }
    }

    /// The child deployment of nested deployment `index` (call [`Expansion::evaluate`] first). A child that waits
    /// for a runtime value is an error here: call this once the deployment runs and the value is known, or
    /// [`Expansion::child`] to tell it apart.
    pub fn nested(&self, index: usize) -> Result<NestedTemplate, Vec<Diagnostic>> {
        match self.child(index)? {
            Child::Ready(nested) => Ok(*nested),
            Child::Deferred(deferred) => Err(vec![unknown_at_start(&deferred)]),
        }
    }

    /// The child deployment of nested deployment `index` (call [`Expansion::evaluate`] first), or why it can only
    /// be expanded while the deployment runs (validation and what-if leave it open then).
    pub fn child(&self, index: usize) -> Result<Child, Vec<Diagnostic>> {
        let before = self.env.diags.borrow().len();
        let nested = self.env.nested_template(index);
        let new: Vec<Diagnostic> = self.env.diags.borrow()[before..].to_vec();
        match nested {
            _ if new.iter().any(Diagnostic::is_error) => Err(new),
            NestedOutcome::Ready(n) => Ok(Child::Ready(n)),
            NestedOutcome::Deferred(d) => Ok(Child::Deferred(d)),
            NestedOutcome::Failed => Err(new),
        }
    }

    /// The resource copy loops left for the deployment's run: their count depends on a runtime value.
    pub fn deferred(&self) -> Vec<Deferred> {
        self.env.deferred.borrow().clone()
    }

    /// This expansion, for a deployment that runs now: a copy count still unknown when the run starts (it reads a
    /// resource of this very deployment) is an error, since the loop's instances must be known to deploy them.
    pub fn require_known(self) -> Result<Self, Vec<Diagnostic>> {
        let deferred = self.deferred();
        if deferred.is_empty() {
            Ok(self)
        } else {
            Err(deferred.iter().map(unknown_at_start).collect())
        }
    }

    /// Starts the child expansion of a nested deployment; an outer-scope child sees this deployment's
    /// parameters, variables and functions.
    pub fn expand_nested<'b>(
        &'b self,
        nested: &'b NestedTemplate,
        hook: &'b dyn RuntimeHook,
    ) -> Result<Expansion<'b>, Vec<Diagnostic>> {
        let input = DeploymentInput {
            template: &nested.template,
            parameters: nested.parameters.clone(),
            extension_configs: nested.extension_configs.clone(),
            context: nested.context.clone(),
        };
        let outer = if nested.inner { None } else { Some(&self.env) };
        let budget = Some(self.env.budget.clone());
        let mut env = TemplateEnv::new(input, hook, outer, self.env.depth + 1, budget);
        env.secure_inputs = nested.secure_parameters.iter().cloned().collect();
        Expansion::start_in(env).map_err(|diags| {
            diags
                .into_iter()
                .map(|d| prefix_diag(d, &nested.path))
                .collect()
        })
    }

    /// The lower-case names of the `properties.parameters` of nested deployment `index` that its body computed
    /// from a secure value (call [`Expansion::evaluate`] first). For an engine that builds a linked template's
    /// [`NestedTemplate`] itself.
    pub fn secure_parameters(&self, index: usize) -> Vec<String> {
        self.env.state.borrow().instances[index]
            .secure_parameters
            .clone()
    }

    /// Records a nested deployment's result so `reference('<deployment>').outputs` answers from it.
    pub fn set_nested_plan(&self, index: usize, plan: Plan) {
        self.env.state.borrow_mut().instances[index].child = Some(Box::new(plan));
    }

    /// Evaluates the outputs (after every resource).
    pub fn outputs(&self) -> Result<Vec<(String, PlannedOutput)>, Vec<Diagnostic>> {
        let before = self.env.diags.borrow().len();
        let outputs = self.env.evaluate_outputs();
        let new: Vec<Diagnostic> = self.env.diags.borrow()[before..].to_vec();
        if new.iter().any(Diagnostic::is_error) {
            Err(new)
        } else {
            Ok(outputs)
        }
    }

    /// The plan of what was evaluated.
    pub fn finish(self, outputs: Vec<(String, PlannedOutput)>) -> Plan {
        self.env.finish(self.parameters, outputs)
    }
}

#[derive(Clone, Debug)]
struct Instance {
    decl: usize,
    copy: Option<CopyInfo>,
    symbolic: Option<String>,
    name: Option<String>,
    resource_type: String,
    api_version: Option<String>,
    id: Option<String>,
    key: String,
    extension: Option<PlannedExtensionRef>,
    condition: Option<bool>,
    existing: bool,
    depends_on: Vec<usize>,
    body: Option<Value>,
    /// For a nested deployment: the lower-case names of the child parameters its body computed from a secure
    /// value.
    secure_parameters: Vec<String>,
    /// For a nested deployment whose `properties.template` is an expression: the template the parent computed.
    template: Option<Value>,
    child: Option<Box<Plan>>,
    /// The expression of a name or scope known only while the deployment runs (or of the parent's): the ID is
    /// unknown until then, and the key a placeholder.
    runtime_id: Option<String>,
}

/// What [`TemplateEnv::nested_template`] makes of a nested deployment.
enum NestedOutcome {
    Ready(Box<NestedTemplate>),
    Deferred(Deferred),
    /// Reported as diagnostics (or, with none, not an inline template).
    Failed,
}

/// The first value inside `value` known only at deployment, as its expression.
fn first_unevaluated(value: &Value) -> Option<String> {
    match value {
        Value::Unevaluated(u) => Some(u.expression.clone()),
        Value::Array(items) => items.iter().find_map(first_unevaluated),
        Value::Object(o) => o.values().find_map(first_unevaluated),
        _ => None,
    }
}

/// The error for a deferred value that a running deployment still does not know when it needs it.
fn unknown_at_start(deferred: &Deferred) -> Diagnostic {
    let what = match deferred.kind {
        DeferredKind::CopyCount => "The copy count",
        DeferredKind::ResourceId => "The resource's ID",
        DeferredKind::NestedTemplate => "The nested deployment's template",
        DeferredKind::NestedParameters => "The nested deployment's parameters",
    };
    Diagnostic::error(
        "InvalidTemplate",
        format!(
            "{what} is not known when the deployment needs it: it depends on '{}', which has no value yet \
             (a copy count may not read a resource of its own deployment).",
            deferred.expression
        ),
        deferred.target.clone(),
    )
}

#[derive(Default)]
struct State {
    instances: Vec<Instance>,
    /// Implicit dependencies seen while evaluating: instance indices.
    touched: Vec<usize>,
}

struct ParamSlot {
    value: Option<Value>,
    in_progress: bool,
    /// Declared secure, a Key Vault secret, or computed from a secure value.
    secure: bool,
}

/// The environment of one deployment: implements [`Environment`] for the evaluator.
struct TemplateEnv<'a> {
    template: &'a Template,
    ctx: DeploymentContext,
    facts: DeploymentFacts,
    inputs: Vec<(String, ParameterValue)>,
    config_inputs: Vec<(String, Config)>,
    hook: &'a dyn RuntimeHook,
    /// The parent environment, for outer-scope nested templates.
    outer: Option<&'a TemplateEnv<'a>>,
    depth: usize,
    params: RefCell<HashMap<String, ParamSlot>>,
    vars: RefCell<HashMap<String, Value>>,
    vars_in_progress: RefCell<Vec<String>>,
    /// Lower-case names of the variables computed from a secure value.
    secure_vars: RefCell<HashSet<String>>,
    /// Lower-case names of the parameters a parent deployment computed from a secure value.
    secure_inputs: HashSet<String>,
    extensions: RefCell<Vec<PlannedExtension>>,
    state: RefCell<State>,
    ref_index: RefCell<Option<RefIndex>>,
    /// `reference`-like call arguments per declaration, for implicit dependencies.
    implicit_args: RefCell<HashMap<usize, Rc<ImplicitArgs>>>,
    /// Resource bodies to evaluate, per declaration (the declaration without its control members).
    body_nodes: RefCell<HashMap<usize, Rc<Node>>>,
    allow_nondeterministic: Cell<bool>,
    guids: Cell<usize>,
    diags: RefCell<Vec<Diagnostic>>,
    /// Copy loops and nested children left for the deployment's run.
    deferred: RefCell<Vec<Deferred>>,
    /// The evaluation budgets, shared with nested deployments' environments.
    budget: Rc<Budget>,
}

fn diag_from_eval(e: &EvalError, base: &str) -> Diagnostic {
    let path = render_path(&e.path);
    let target = match (base.is_empty(), path.is_empty()) {
        (_, true) => base.to_string(),
        (true, false) => path,
        (false, false) if path.starts_with('[') => format!("{base}{path}"),
        (false, false) => format!("{base}.{path}"),
    };
    let mut d = Diagnostic::error(e.code(), e.to_string(), target);
    if let Some(span) = e.node_span {
        d = d.with_span(span);
        // The expression span indexes the string at `node_span` (both are the innermost the error met).
        if let Some(token) = e.span {
            d = d.with_token(cairn_json::Span::new(
                token.start as usize,
                token.end as usize,
            ));
        }
    }
    d
}

fn unevaluated(expression: String) -> Value {
    Value::Unevaluated(Rc::new(Unevaluated { expression }))
}

/// The declared type of a parameter or output, through `$ref`. A declaration without one (Bicep's
/// resource-derived types carry only `metadata`) takes any value, and is named after the value it has.
fn type_of(decl: &Node, template: &Template, value: &Value) -> String {
    if let Some(t) = declared_type_name(decl, template, 0) {
        return t;
    }
    match value {
        Value::String(_) => "String",
        Value::Int(_) | Value::Float(_) => "Int",
        Value::Bool(_) => "Bool",
        Value::Array(_) => "Array",
        _ => "Object",
    }
    .to_string()
}

fn declared_type_name(decl: &Node, template: &Template, depth: usize) -> Option<String> {
    if let Some(t) = decl.get_ci("type").and_then(Node::as_str) {
        return Some(t.to_string());
    }
    let reference = decl.get_ci("$ref").and_then(Node::as_str)?;
    let def = types::resolve_ref(reference, template.definitions.as_ref())?;
    // A `$ref` cycle is reported by the checks; stop following it here.
    if depth > 32 {
        return None;
    }
    declared_type_name(def, template, depth + 1).or_else(|| Some("object".to_string()))
}

impl<'a> TemplateEnv<'a> {
    fn new(
        input: DeploymentInput<'a>,
        hook: &'a dyn RuntimeHook,
        outer: Option<&'a TemplateEnv<'a>>,
        depth: usize,
        budget: Option<Rc<Budget>>,
    ) -> TemplateEnv<'a> {
        let template = input.template;
        let budget = budget.unwrap_or_else(|| {
            Rc::new(Budget::drawing_on(
                input.context.eval_limits,
                input.context.shared_budget.clone(),
            ))
        });
        let mut facts = input.context.facts(template.scope);
        let mut deployment = Object::new();
        deployment.insert("name", Value::from(input.context.deployment_name.as_str()));
        if template.scope != ScopeKind::ResourceGroup
            && let Some(l) = &input.context.location
        {
            deployment.insert("location", Value::from(l.as_str()));
        }
        let mut props = Object::new();
        let mut tmpl = Object::new();
        tmpl.insert(
            "contentVersion",
            Value::from(template.content_version.clone().unwrap_or_default()),
        );
        if let Some(m) = template.root.get_ci("metadata") {
            tmpl.insert("metadata", Value::from_node(m));
        }
        props.insert("template", Value::Object(tmpl));
        props.insert("templateHash", Value::from(template.text_hash()));
        props.insert("parameters", Value::Object(Object::new()));
        props.insert("mode", Value::from("Incremental"));
        props.insert("provisioningState", Value::from("Accepted"));
        deployment.insert("properties", Value::Object(props));
        facts.deployment = Value::Object(deployment);
        TemplateEnv {
            template,
            facts,
            ctx: input.context,
            inputs: input.parameters,
            config_inputs: input.extension_configs,
            hook,
            outer,
            depth,
            params: RefCell::new(HashMap::new()),
            vars: RefCell::new(HashMap::new()),
            vars_in_progress: RefCell::new(Vec::new()),
            secure_vars: RefCell::new(HashSet::new()),
            secure_inputs: HashSet::new(),
            extensions: RefCell::new(Vec::new()),
            state: RefCell::new(State::default()),
            ref_index: RefCell::new(None),
            implicit_args: RefCell::new(HashMap::new()),
            body_nodes: RefCell::new(HashMap::new()),
            allow_nondeterministic: Cell::new(false),
            guids: Cell::new(0),
            diags: RefCell::new(Vec::new()),
            deferred: RefCell::new(Vec::new()),
            budget,
        }
    }

    fn error(&self, d: Diagnostic) {
        self.diags.borrow_mut().push(d);
    }

    fn eval_node(&self, node: &Node, path: &str) -> Option<Value> {
        self.eval_node_secure(node, path).0
    }

    /// [`TemplateEnv::eval_node`], also telling whether the value was computed from a secure value.
    fn eval_node_secure(&self, node: &Node, path: &str) -> (Option<Value>, bool) {
        let mut ev = Evaluator::new(self);
        let value = match ev.eval_node(node) {
            Ok(v) => Some(v),
            Err(e) => {
                self.error(diag_from_eval(&e, path));
                None
            }
        };
        (value, ev.has_read_secure())
    }

    fn has_errors(&self) -> bool {
        self.diags.borrow().iter().any(Diagnostic::is_error)
    }

    /// Runs the whole expansion.
    fn run(&self) -> Option<Plan> {
        let (parameters, order) = self.prepare()?;
        for i in order {
            if self.evaluate_body(i).is_some() && self.is_nested_deployment(i) {
                let child = match self.nested_template(i) {
                    NestedOutcome::Ready(nested) => self.run_child(&nested),
                    // Expanded when the deployment runs; until then its outputs are unknown.
                    NestedOutcome::Deferred(deferred) => {
                        self.deferred.borrow_mut().push(deferred);
                        None
                    }
                    NestedOutcome::Failed => None,
                };
                self.state.borrow_mut().instances[i].child = child.map(Box::new);
            }
        }
        let outputs = self.evaluate_outputs();
        Some(self.finish(parameters, outputs))
    }

    /// Parameters, extension configs, identities, dependencies and order. `None` after reporting errors.
    fn prepare(&self) -> Option<(PlannedParameters, Vec<usize>)> {
        if self.depth > MAX_NESTING_DEPTH {
            self.error(Diagnostic::error(
                "DeploymentNestingLimitExceeded",
                format!("Deployments may nest at most {MAX_NESTING_DEPTH} levels deep."),
                "",
            ));
            return None;
        }
        let parameters = self.resolve_parameters();
        self.resolve_extensions();
        self.plan_instances();
        if self.has_errors() {
            return None;
        }
        let order = self.order()?;
        Some((parameters, order))
    }

    /// Moves the instances into the plan (expansion is over).
    fn finish(
        &self,
        parameters: Vec<(String, PlannedParameter)>,
        outputs: Vec<(String, PlannedOutput)>,
    ) -> Plan {
        let instances = std::mem::take(&mut self.state.borrow_mut().instances);
        let keys: Vec<String> = instances.iter().map(|i| i.key.clone()).collect();
        let resources = instances
            .into_iter()
            .map(|inst| PlannedResource {
                depends_on: inst.depends_on.iter().map(|&d| keys[d].clone()).collect(),
                path: self.template.resources[inst.decl].path.clone(),
                key: inst.key,
                symbolic_name: inst.symbolic,
                copy: inst.copy,
                id: inst.id,
                name: inst.name,
                resource_type: inst.resource_type,
                api_version: inst.api_version,
                extension: inst.extension,
                condition: inst.condition,
                existing: inst.existing,
                body: inst.body,
                deployment: inst.child,
            })
            .collect();
        Plan {
            scope: self.template.scope,
            scope_id: self.ctx.scope_id(self.template.scope),
            deployment_name: self.ctx.deployment_name.clone(),
            location: self.ctx.location.clone(),
            parameters,
            resources,
            extensions: self.extensions.borrow().clone(),
            outputs,
            deferred: self.deferred.borrow().clone(),
        }
    }

    // ----- parameters -----

    fn resolve_parameters(&self) -> Vec<(String, PlannedParameter)> {
        for (name, _) in &self.inputs {
            if self.template.parameter(name).is_none() {
                self.error(Diagnostic::error(
                    "InvalidTemplate",
                    format!(
                        "The template parameter '{name}' is provided but not declared in the template; it can therefore not be provided at deployment time.{}",
                        did_you_mean(name, self.template.parameters.iter().map(|p| p.name.as_str()))
                    ),
                    join_path("parameters", name),
                ));
            }
        }
        let mut out = Vec::new();
        for decl in &self.template.parameters {
            let value = self.parameter_value(&decl.name).unwrap_or(Value::Null);
            out.push((
                decl.name.clone(),
                PlannedParameter {
                    param_type: type_of(&decl.node, self.template, &value),
                    // A Key Vault secret or a value computed from a secure one is redacted like a declared one.
                    secure: self.parameter_secure(&decl.name),
                    value,
                },
            ));
        }
        out
    }

    /// Resolves one parameter (lazily: defaults may use other parameters). `None` after reporting an error.
    fn parameter_value(&self, name: &str) -> Option<Value> {
        let key = name.to_ascii_lowercase();
        {
            let params = self.params.borrow();
            if let Some(slot) = params.get(&key) {
                if slot.in_progress {
                    drop(params);
                    self.error(Diagnostic::error(
                        "InvalidTemplate",
                        format!("The template parameter '{name}' has a circular reference in its default value."),
                        join_path("parameters", name),
                    ));
                    return None;
                }
                return slot.value.clone();
            }
        }
        let decl = self.template.parameter(name)?;
        self.params.borrow_mut().insert(
            key.clone(),
            ParamSlot {
                value: None,
                in_progress: true,
                secure: false,
            },
        );
        let path = decl.path.clone();
        let has_default = decl.node.get_ci("defaultValue").is_some();
        let supplied = self
            .inputs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            // ARM takes a `null` given for a parameter with a default as not given: a module passes
            // `{"value": null}` for an optional input it was not given itself.
            .filter(|v| !(has_default && matches!(v, ParameterValue::Value(Value::Null))));
        // Secure by declaration, because Key Vault holds it, or because it was computed from a secure value.
        let mut secure = types::is_secure(&decl.node, self.template.definitions.as_ref());
        let value = match supplied {
            Some(ParameterValue::Value(v)) => {
                secure |= self.secure_inputs.contains(&key);
                Some(v)
            }
            Some(ParameterValue::KeyVault(r)) => {
                secure = true;
                Some(self.key_vault_value(&r))
            }
            Some(ParameterValue::Expression(e)) => {
                let (v, read_secure) =
                    self.eval_node_secure(&Node::synthetic(NodeKind::String(e)), &path);
                secure |= read_secure;
                v
            }
            None => match decl.node.get_ci("defaultValue") {
                Some(default) => {
                    self.allow_nondeterministic.set(true);
                    let (v, read_secure) =
                        self.eval_node_secure(default, &join_path(&path, "defaultValue"));
                    self.allow_nondeterministic.set(false);
                    secure |= read_secure;
                    v
                }
                // `nullable` may come through `$ref` (`{"$ref": "#/definitions/lockType"}`): optional too.
                None if types::is_nullable(&decl.node, self.template.definitions.as_ref()) => {
                    Some(Value::Null)
                }
                None => {
                    self.error(
                        Diagnostic::error(
                            "InvalidTemplate",
                            format!(
                                "The value for the template parameter '{}' is not provided. Please see https://aka.ms/arm-create-parameter-file for usage details.",
                                decl.name
                            ),
                            &path,
                        )
                        .with_span(decl.node.span),
                    );
                    None
                }
            },
        };
        if let Some(v) = &value {
            let found = types::check_value_as(
                v,
                &decl.node,
                self.template.definitions.as_ref(),
                &join_path(&path, "value"),
                secure,
            );
            for d in found {
                self.error(d.with_span(decl.node.span));
            }
        }
        self.params.borrow_mut().insert(
            key,
            ParamSlot {
                value: value.clone(),
                in_progress: false,
                secure,
            },
        );
        value
    }

    /// Whether parameter `name` of this template is secure (see [`ParamSlot::secure`]). Settles its value first
    /// when nothing asked for it yet; while it is being settled, only its declaration can tell.
    fn parameter_secure(&self, name: &str) -> bool {
        let key = name.to_ascii_lowercase();
        let slot = self
            .params
            .borrow()
            .get(&key)
            .map(|slot| (slot.in_progress, slot.secure));
        match slot {
            Some((false, secure)) => secure,
            Some((true, _)) => self
                .template
                .parameter(name)
                .is_some_and(|d| types::is_secure(&d.node, self.template.definitions.as_ref())),
            None => {
                let _ = self.parameter_value(name);
                self.params
                    .borrow()
                    .get(&key)
                    .is_some_and(|slot| slot.secure)
            }
        }
    }

    fn key_vault_value(&self, r: &KeyVaultReference) -> Value {
        self.hook.key_vault_secret(r).unwrap_or_else(|| {
            unevaluated(format!(
                "[keyVaultReference('{}', '{}')]",
                r.vault_id, r.secret_name
            ))
        })
    }

    // ----- variables -----

    fn variable_value(&self, name: &str) -> Result<Value, EvalError> {
        let key = name.to_ascii_lowercase();
        if let Some(v) = self.vars.borrow().get(&key) {
            return Ok(v.clone());
        }
        let Some(decl) = self.template.variable(name) else {
            if let Some(outer) = self.outer {
                return outer.variable_value(name);
            }
            return Err(EvalError::expression(format!(
                "The template variable '{name}' is not found.{}",
                did_you_mean(
                    name,
                    self.template.variables.iter().map(|v| v.name.as_str())
                )
            )));
        };
        if self.vars_in_progress.borrow().contains(&key) {
            return Err(EvalError::expression(format!(
                "The template variable '{name}' has a circular reference to itself."
            )));
        }
        self.vars_in_progress.borrow_mut().push(key.clone());
        let mut ev = Evaluator::new(self);
        let result = match &decl.value {
            VariableValue::Plain(node) => ev.eval_node(node),
            VariableValue::Copy { count, input } => (|| {
                let count = ev.eval_node(count)?;
                // A count known only at deployment: so is the whole variable, as with a property or output copy
                // loop; what reads it defers in turn (a resource copy loop over it is deferred, not an error).
                if let Value::Unevaluated(_) = count {
                    return Ok(count);
                }
                let count = copy_count(&decl.name, &count)?;
                let (items, _) = ev.copy_items(&decl.name, count, CopyKind::Named, input)?;
                Ok(Value::Array(items))
            })(),
        };
        self.vars_in_progress.borrow_mut().retain(|k| k != &key);
        let secure = ev.has_read_secure();
        if secure {
            self.secure_vars.borrow_mut().insert(key.clone());
        }
        let value = result.map_err(|e| {
            let d = diag_from_eval(&e, &decl.path);
            let mut wrapped = EvalError::coded(
                e.code(),
                format!("{} (in variable '{}' at {})", e, decl.name, d.target),
            );
            if let Some(span) = e.span {
                wrapped = wrapped.with_span(span);
            }
            // The copy count check runs outside the evaluator: mark here what it may have quoted.
            wrapped
                .with_node_span(e.node_span.unwrap_or_default())
                .secure_if(e.secure || secure)
        })?;
        if !value.contains_unevaluated() {
            self.vars.borrow_mut().insert(key, value.clone());
        }
        Ok(value)
    }

    // ----- extensions -----

    fn resolve_extensions(&self) {
        let mut resolved = Vec::new();
        for decl in &self.template.extensions {
            let mut defaults = Config::default();
            for (prop, node) in &decl.config_defaults {
                let path = join_path(&join_path(&decl.path, "config"), prop);
                let Some(v) = self.eval_node(node, &path) else {
                    continue;
                };
                if prop.eq_ignore_ascii_case(crate::config::AUTH) {
                    // A declared `auth` (seed 003's v1 `imports` form) holds directives, as an input's does.
                    match ConfigValue::parse_property(prop, Evaluated(&v)) {
                        Ok(item) => defaults.insert(prop.clone(), item),
                        Err(e) => {
                            self.error(config_diagnostic(&e, &join_path(&decl.path, "config")))
                        }
                    }
                    continue;
                }
                defaults.insert(prop.clone(), ConfigValue::literal(Evaluated(&v)));
            }
            let mut input = self
                .config_inputs
                .iter()
                .find(|(a, _)| a.eq_ignore_ascii_case(&decl.alias))
                .map(|(_, o)| o.clone())
                .unwrap_or_default();
            if self.depth == 0 {
                input = self.record_input_calls(&decl.alias, &input, "");
            }
            let given = self
                .config_inputs
                .iter()
                .any(|(a, _)| a.eq_ignore_ascii_case(&decl.alias));
            let mut config = defaults;
            config.overlay(&input);
            // A config given but empty is one known at deployment time only (a whole runtime value): not judged now.
            let known_input = (!given || !input.is_empty()).then_some(&input);
            for finding in check_config(decl, &config, known_input) {
                let target = property_target(
                    &join_path("extensionConfigs", &decl.alias),
                    &finding.property,
                );
                let diagnostic = if finding.error {
                    Diagnostic::error(finding.code, finding.message, target)
                } else {
                    Diagnostic::warning(finding.code, finding.message, target)
                };
                self.diags.borrow_mut().push(diagnostic);
            }
            resolved.push(PlannedExtension {
                alias: decl.alias.clone(),
                name: decl.name.clone(),
                version: decl.version.clone(),
                config,
            });
        }
        for (alias, _) in &self.config_inputs {
            if self.template.extension(alias).is_none() {
                self.error(Diagnostic::error(
                    "InvalidExtensionConfig",
                    format!("The extension alias '{alias}' in extensionConfigs is not declared by the template."),
                    join_path("extensionConfigs", alias),
                ));
            }
        }
        *self.extensions.borrow_mut() = resolved;
    }

    /// A root deployment's input holds a value known only when the deployment runs in one case: seed 002's
    /// `{"type": "armApiCall", "value": "[list...()]"}` (read through `cairn_config::InputJson`). The call is
    /// evaluated against this template — its parameters, its scope's `resourceId()` — and recorded as an
    /// `apiReference` directive, as a module's `list*()` config value is (`config_source`): the extension gets
    /// the call's answer, the records and a stack keep how to make the call again. Anything but a `list*()` call
    /// is refused, since only a call can be made again.
    fn record_input_calls(&self, alias: &str, config: &Config, path: &str) -> Config {
        config
            .iter()
            .map(|(name, value)| {
                let at = join_path(path, name);
                let value = match value {
                    ConfigValue::Group(group) => {
                        ConfigValue::Group(self.record_input_calls(alias, group, &at))
                    }
                    ConfigValue::Deferred(expression) => self
                        .input_call(expression)
                        .unwrap_or_else(|| {
                            self.error(Diagnostic::error(
                                "InvalidExtensionConfig",
                                format!(
                                    "The 'armApiCall' value of extension config property '{at}' is not a list*() call \
                                     followed by property accessors, so it cannot be made again when the config is \
                                     needed. Fix: give a call such as \
                                     \"[listClusterAdminCredential(resourceId(...), '2024-02-01').kubeconfigs[0].value]\", \
                                     or an 'apiReference'"
                                ),
                                property_target(&join_path("extensionConfigs", alias), &at),
                            ));
                            value.clone()
                        }),
                    other => other.clone(),
                };
                (name.clone(), value)
            })
            .collect()
    }

    /// The `apiReference` directive of a `list*()` call expression, evaluated here.
    fn input_call(&self, expression: &str) -> Option<ConfigValue> {
        let node = Node::from_json(&serde_json::Value::String(expression.to_owned()));
        let mut ev = Evaluator::new(self);
        // A parameters file has no variables to follow.
        let sources = list_sources(
            &mut ev,
            &node,
            &|target: &str| self.list_target_id(target),
            &|_: &str| None,
        );
        match sources.as_slice() {
            [source] if source.path.is_empty() => {
                ConfigValue::parse(Evaluated(&source.api_reference())).ok()
            }
            _ => None,
        }
    }

    fn extension_value(&self, alias: &str) -> Result<Value, EvalError> {
        let exts = self.extensions.borrow();
        let Some(e) = exts.iter().find(|e| e.alias.eq_ignore_ascii_case(alias)) else {
            return Err(EvalError::expression(format!(
                "The extension alias '{alias}' is not declared in this template."
            )));
        };
        let mut o = Object::new();
        o.insert("name", Value::from(e.name.as_str()));
        o.insert("version", Value::from(e.version.as_str()));
        let supplied = !e.config.is_empty()
            || self
                .config_inputs
                .iter()
                .any(|(a, _)| a.eq_ignore_ascii_case(alias));
        // With neither defaults nor input the config is given at deployment time (by the caller or a stack):
        // unknown now, rather than empty.
        let config = if supplied || self.depth > 0 {
            config_view(&e.config)
        } else {
            unevaluated(format!("[extensions('{alias}').config]"))
        };
        o.insert("config", config);
        Ok(Value::Object(o))
    }

    // ----- phase one: identities and dependencies -----

    fn plan_instances(&self) {
        let mut pending_deps: Vec<(usize, Vec<DepRef>)> = Vec::new();
        // Instances of each declaration, for child resources and copy-loop lookups.
        let mut by_decl: Vec<Vec<usize>> = vec![Vec::new(); self.template.resources.len()];
        // Copy loop names per declaration, kept for loops that deploy nothing.
        let mut loop_names: HashMap<usize, String> = HashMap::new();
        // Declarations that deploy nothing by design: a count-0 copy loop, or a child of one. (A declaration
        // whose identity failed has no instances either, but its error is reported.)
        let mut undeployed: HashSet<usize> = HashSet::new();
        for (d, decl) in self.template.resources.iter().enumerate() {
            let parents: Vec<Option<usize>> = match decl.parent {
                Some(p) => by_decl[p].iter().map(|&i| Some(i)).collect(),
                None => vec![None],
            };
            if decl.parent.is_some_and(|p| undeployed.contains(&p)) {
                undeployed.insert(d);
            }
            for parent in parents {
                let copy = decl.node.get_ci("copy").filter(|_| decl.parent.is_none());
                let copy_info = match copy {
                    Some(c) => self.copy_header(c, decl),
                    None => Some((None, 1)),
                };
                let Some((info, count)) = copy_info else {
                    continue;
                };
                if let Some(c) = &info {
                    loop_names.insert(d, c.name.clone());
                    if count == 0 {
                        undeployed.insert(d);
                    }
                }
                for i in 0..count {
                    let info = info.clone().map(|mut c: CopyInfo| {
                        c.index = i;
                        c
                    });
                    let mut ev = Evaluator::new(self);
                    let parent_inst = parent.map(|p| self.state.borrow().instances[p].clone());
                    let built = match &info {
                        Some(c) => ev.with_copy(&c.name, i, CopyKind::Unnamed, |ev| {
                            self.identify(ev, d, decl, Some(c.clone()), parent_inst.as_ref())
                        }),
                        None => self.identify(&mut ev, d, decl, None, parent_inst.as_ref()),
                    };
                    if let Some((inst, deps)) = built {
                        let mut state = self.state.borrow_mut();
                        state.instances.push(inst);
                        let idx = state.instances.len() - 1;
                        by_decl[d].push(idx);
                        pending_deps.push((idx, deps));
                    }
                }
            }
        }
        let count = self.state.borrow().instances.len();
        if count > MAX_RESOURCES {
            self.error(Diagnostic::error(
                "InvalidTemplate",
                format!(
                    "The number of resources in the deployment after copy expansion is {count}, which exceeds the limit of {MAX_RESOURCES}."
                ),
                "resources",
            ));
        }
        self.check_duplicate_ids();
        let identity_failed = self.has_errors();
        for (idx, deps) in pending_deps {
            let mut resolved = Vec::new();
            for dep in deps {
                let found = self
                    .resolve_ref(&dep.text)
                    .or_else(|| self.resolve_undeployed(&dep.text, &undeployed, &loop_names));
                match found {
                    Some(targets) => resolved.extend(targets.into_iter().filter(|&t| t != idx)),
                    // When an identity could not be evaluated, its error is already reported; an unresolved
                    // name is most likely that resource, so don't pile a second error on it. Likewise an
                    // instance of a loop left for the deployment's run, which has none yet.
                    None if dep.explicit && !self.has_deferred_loops() => {
                        let decl = self.state.borrow().instances[idx].decl;
                        let target = join_path(&self.template.resources[decl].path, "dependsOn");
                        if let Some(message) = self.symbol_index_error(&dep.text) {
                            // Like evaluating the 1.0 `dependsOn` array, stop at the first bad entry.
                            self.error(Diagnostic::error("InvalidTemplate", message, target));
                            break;
                        } else if !identity_failed {
                            self.error(Diagnostic::error(
                                "InvalidTemplate",
                                format!(
                                    "The resource '{}' is not defined in the template.{}",
                                    dep.text,
                                    self.resource_hint(&dep.text)
                                ),
                                target,
                            ));
                        }
                    }
                    None => {}
                }
            }
            resolved.sort_unstable();
            resolved.dedup();
            self.state.borrow_mut().instances[idx].depends_on = resolved;
        }
        self.add_serial_edges(&by_decl);
    }

    /// A resource copy loop's name, count and mode. `None` after reporting an error, or when the count is known
    /// only while the deployment runs: then the loop is [`Deferred`] and has no instances until then.
    fn copy_header(&self, copy: &Node, decl: &ResourceDecl) -> Option<(Option<CopyInfo>, i64)> {
        let copy_path = join_path(&decl.path, "copy");
        let name = match copy.get_ci("name").map(|n| self.eval_node(n, &copy_path)) {
            Some(Some(Value::String(s))) => s,
            _ => {
                self.error(
                    Diagnostic::error(
                        "InvalidTemplate",
                        "The copy loop must have a string 'name'.",
                        &copy_path,
                    )
                    .with_span(copy.span),
                );
                return None;
            }
        };
        let (count, secure) = match copy.get_ci("count") {
            Some(c) => self.eval_node_secure(c, &join_path(&copy_path, "count")),
            None => (None, false),
        };
        let count = count?;
        if let Value::Unevaluated(u) = &count {
            self.deferred.borrow_mut().push(Deferred {
                kind: DeferredKind::CopyCount,
                target: join_path(&copy_path, "count"),
                symbolic_name: decl.symbolic_name.clone(),
                resource_type: decl
                    .node
                    .get_ci("type")
                    .and_then(Node::as_str)
                    .filter(|t| !t.starts_with('['))
                    .map(str::to_string),
                key: None,
                expression: u.expression.clone(),
            });
            return None;
        }
        let count = match copy_count(&name, &count) {
            Ok(n) => n,
            Err(e) => {
                // The count check quotes the count, which may come from a secure value.
                self.error(
                    diag_from_eval(&e.secure_if(secure), &join_path(&copy_path, "count"))
                        .with_span(copy.span),
                );
                return None;
            }
        };
        let serial = copy
            .get_ci("mode")
            .and_then(Node::as_str)
            .is_some_and(|m| m.eq_ignore_ascii_case("serial"));
        let batch_size =
            copy.get_ci("batchSize")
                .and_then(|b| match self.eval_node(b, &copy_path) {
                    Some(Value::Int(n)) => Some(n),
                    _ => None,
                });
        Some((
            Some(CopyInfo {
                name,
                index: 0,
                serial,
                batch_size,
            }),
            count,
        ))
    }

    fn eval_string_member(
        &self,
        ev: &mut Evaluator<'_>,
        node: &Node,
        key: &str,
        path: &str,
    ) -> Option<Option<String>> {
        let member = self.eval_member(ev, node, key, path)?;
        Some(member.map(|m| match m {
            Part::Known(s) | Part::Runtime(s) => s,
        }))
    }

    /// A string member of a resource declaration, telling a value known only while the deployment runs apart.
    fn eval_member(
        &self,
        ev: &mut Evaluator<'_>,
        node: &Node,
        key: &str,
        path: &str,
    ) -> Option<Option<Part>> {
        let Some(n) = node.get_ci(key) else {
            return Some(None);
        };
        match ev.eval_node(n) {
            Ok(Value::String(s)) => Some(Some(Part::Known(s))),
            Ok(Value::Unevaluated(u)) => Some(Some(Part::Runtime(u.expression.clone()))),
            Ok(Value::Null) => Some(None),
            Ok(other) => {
                self.error(
                    Diagnostic::error(
                        "InvalidTemplate",
                        format!(
                            "The resource '{key}' must be a string, not {}.",
                            other.value_type()
                        ),
                        join_path(path, key),
                    )
                    .with_span(n.span),
                );
                None
            }
            Err(e) => {
                self.error(diag_from_eval(&e, &join_path(path, key)));
                None
            }
        }
    }

    /// Phase one for one instance (inside its copy frame).
    fn identify(
        &self,
        ev: &mut Evaluator<'_>,
        d: usize,
        decl: &ResourceDecl,
        copy: Option<CopyInfo>,
        parent: Option<&Instance>,
    ) -> Option<(Instance, Vec<DepRef>)> {
        let node = &decl.node;
        let path = &decl.path;
        let condition = match node.get_ci("condition") {
            None => Some(true),
            Some(c) => match ev.eval_node(c) {
                Ok(Value::Bool(b)) => Some(b),
                Ok(Value::Unevaluated(_)) => None,
                Ok(other) => {
                    self.error(
                        Diagnostic::error(
                            "InvalidTemplate",
                            format!(
                                "The resource condition must be a boolean, not {}.",
                                other.value_type()
                            ),
                            join_path(path, "condition"),
                        )
                        .with_span(c.span),
                    );
                    return None;
                }
                Err(e) => {
                    self.error(diag_from_eval(&e, &join_path(path, "condition")));
                    return None;
                }
            },
        };
        // A parent that is not deployed takes its children with it.
        let condition = match (condition, parent.and_then(|p| p.condition)) {
            (Some(true), Some(false)) => Some(false),
            (c, _) => c,
        };
        if condition != Some(false) {
            return self.identify_members(ev, d, decl, copy, parent, condition);
        }
        // ARM skips a resource whose condition is false without evaluating its name, scope properties or
        // dependencies (templates guard a name like `last(split(parameters('id'), '/'))` with the condition
        // alone). What can be worked out still lets `dependsOn` and `reference()` find the resource, so it is
        // tried, but nothing it meets is an error.
        let before = self.diags.borrow().len();
        let built = self.identify_members(ev, d, decl, copy.clone(), parent, condition);
        self.diags.borrow_mut().truncate(before);
        Some(built.unwrap_or_else(|| self.skipped_instance(ev, d, decl, copy, parent)))
    }

    /// A false-condition instance whose identity could not be evaluated: keyed by its symbolic name (or its
    /// declaration's path), `[index]` in a copy loop, with the type when that can be read.
    fn skipped_instance(
        &self,
        ev: &mut Evaluator<'_>,
        d: usize,
        decl: &ResourceDecl,
        copy: Option<CopyInfo>,
        parent: Option<&Instance>,
    ) -> (Instance, Vec<DepRef>) {
        let before = self.diags.borrow().len();
        let mut resource_type = self
            .eval_string_member(ev, &decl.node, "type", &decl.path)
            .flatten()
            .unwrap_or_default();
        let api_version = self
            .eval_string_member(ev, &decl.node, "apiVersion", &decl.path)
            .flatten();
        self.diags.borrow_mut().truncate(before);
        if let Some(p) = parent
            && !resource_type.contains('/')
        {
            resource_type = format!("{}/{}", p.resource_type, resource_type);
        }
        let base = decl
            .symbolic_name
            .clone()
            .unwrap_or_else(|| decl.path.clone());
        let key = match &copy {
            Some(c) => format!("{base}[{}]", c.index),
            None => base,
        };
        let inst = Instance {
            decl: d,
            copy,
            symbolic: decl.symbolic_name.clone(),
            name: None,
            resource_type,
            api_version,
            id: None,
            key,
            extension: None,
            condition: Some(false),
            existing: decl.existing,
            depends_on: Vec::new(),
            body: None,
            secure_parameters: Vec::new(),
            template: None,
            child: None,
            runtime_id: None,
        };
        (inst, Vec::new())
    }

    /// [`TemplateEnv::identify`] past the condition: type, name, scope, ID and dependencies.
    fn identify_members(
        &self,
        ev: &mut Evaluator<'_>,
        d: usize,
        decl: &ResourceDecl,
        copy: Option<CopyInfo>,
        parent: Option<&Instance>,
        condition: Option<bool>,
    ) -> Option<(Instance, Vec<DepRef>)> {
        let node = &decl.node;
        let path = &decl.path;
        let raw_type = self
            .eval_string_member(ev, node, "type", path)?
            .unwrap_or_default();
        let mut api_version = self.eval_string_member(ev, node, "apiVersion", path)?;
        let extension = match &decl.extension_alias {
            Some(alias) => match self.template.extension(alias) {
                Some(e) if e.is_azure() => None,
                Some(e) => Some(e),
                None => {
                    self.error(Diagnostic::error(
                        "InvalidTemplate",
                        format!("The resource refers to extension '{alias}', which the template does not declare."),
                        join_path(path, "extension"),
                    ));
                    return None;
                }
            },
            None => None,
        };
        let mut resource_type = raw_type;
        if extension.is_some()
            && api_version.is_none()
            && let Some((t, v)) = resource_type.rsplit_once('@')
        {
            api_version = Some(v.to_string());
            resource_type = t.to_string();
        }
        // A name known only while the deployment runs (in a nested deployment, from a parameter the parent
        // computes with `reference()`) leaves the ID unknown: ARM evaluates it when the deployment runs.
        let (mut name, mut runtime_id) = match self.eval_member(ev, node, "name", path)? {
            Some(Part::Known(n)) => (Some(n), None),
            Some(Part::Runtime(e)) => (None, Some(e)),
            None => (None, None),
        };
        if runtime_id.is_none() {
            runtime_id = parent.and_then(|p| p.runtime_id.clone());
        }
        if let (Some(p), false) = (parent, resource_type.contains('/')) {
            resource_type = format!("{}/{}", p.resource_type, resource_type);
        }
        if let (Some(p), Some(n)) = (parent, &name) {
            let wanted = resource_type.split('/').count().saturating_sub(1);
            if n.split('/').count() < wanted
                && let Some(pn) = &p.name
            {
                name = Some(format!("{pn}/{n}"));
            }
        }
        let symbolic = decl.symbolic_name.clone();
        let (id, key) = match extension {
            Some(e) => {
                let base = format!(
                    "{}:{}",
                    e.alias,
                    symbolic.clone().unwrap_or_else(|| decl.path.clone())
                );
                let key = match &copy {
                    Some(c) => format!("{base}[{}]", c.index),
                    None => base,
                };
                (None, key)
            }
            None if runtime_id.is_some() => (None, runtime_key(decl, &copy, parent)),
            None => {
                let Some(n) = &name else {
                    self.error(
                        Diagnostic::error(
                            "InvalidTemplate",
                            "The resource must have a 'name'.",
                            path.clone(),
                        )
                        .with_span(node.span),
                    );
                    return None;
                };
                match self.resource_scope(ev, node, path)? {
                    Part::Runtime(e) => {
                        runtime_id = Some(e);
                        (None, runtime_key(decl, &copy, parent))
                    }
                    Part::Known(scope) => {
                        let names: Vec<&str> = n.split('/').collect();
                        match ids::resource_id(&scope, &resource_type, &names) {
                            Ok(id) => (Some(id.clone()), id),
                            Err(e) => {
                                self.error(
                                    Diagnostic::error(
                                        "InvalidTemplate",
                                        format!("The template resource '{n}' is not valid: {e}."),
                                        path.clone(),
                                    )
                                    .with_span(node.span),
                                );
                                return None;
                            }
                        }
                    }
                }
            }
        };
        if let Some(expression) = &runtime_id {
            self.defer_runtime_id(decl, &key, expression);
        }
        let mut deps = Vec::new();
        if let Some(list) = node.get_ci("dependsOn") {
            match ev.eval_node(list) {
                Ok(Value::Array(items)) => {
                    for item in items {
                        match item {
                            Value::String(s) => deps.push(DepRef {
                                text: s,
                                explicit: true,
                            }),
                            Value::Unevaluated(_) | Value::Null => {}
                            other => self.error(Diagnostic::error(
                                "InvalidTemplate",
                                format!(
                                    "A dependsOn entry must be a string, not {}.",
                                    other.value_type()
                                ),
                                join_path(path, "dependsOn"),
                            )),
                        }
                    }
                }
                Ok(_) => self.error(
                    Diagnostic::error(
                        "InvalidTemplate",
                        "'dependsOn' must be an array.",
                        join_path(path, "dependsOn"),
                    )
                    .with_span(list.span),
                ),
                Err(e) => self.error(diag_from_eval(&e, &join_path(path, "dependsOn"))),
            }
        }
        self.implicit_refs(ev, d, node, &mut deps);
        let existing = decl.existing;
        let extension = extension.map(|e| PlannedExtensionRef {
            alias: e.alias.clone(),
            name: e.name.clone(),
            version: e.version.clone(),
        });
        let inst = Instance {
            decl: d,
            copy,
            symbolic,
            name,
            resource_type,
            api_version,
            id,
            key,
            extension,
            condition,
            existing,
            depends_on: Vec::new(),
            body: None,
            secure_parameters: Vec::new(),
            template: None,
            child: None,
            runtime_id,
        };
        Some((inst, deps))
    }

    /// The scope ID a resource lives under: `scope`, cross-scope `subscriptionId`/`resourceGroup`, or the
    /// deployment's own scope. [`Part::Runtime`] when a part of it is known only while the deployment runs.
    fn resource_scope(&self, ev: &mut Evaluator<'_>, node: &Node, path: &str) -> Option<Part> {
        let s = match self.eval_member(ev, node, "scope", path)? {
            Some(Part::Runtime(e)) => return Some(Part::Runtime(e)),
            Some(Part::Known(s)) => Some(s),
            None => None,
        };
        if let Some(s) = s {
            // 2.0 may name a symbolic resource as the scope.
            if let Some(targets) = self.resolve_ref(&s)
                && let Some(&t) = targets.first()
            {
                let state = self.state.borrow();
                let target = &state.instances[t];
                if let Some(id) = &target.id {
                    return Some(Part::Known(id.clone()));
                }
                if let Some(e) = &target.runtime_id {
                    return Some(Part::Runtime(e.clone()));
                }
            }
            return Some(Part::Known(normalize_scope(&s)));
        }
        let known = |part: Option<Part>| match part {
            Some(Part::Known(s)) => Ok(Some(s)),
            Some(Part::Runtime(e)) => Err(e),
            None => Ok(None),
        };
        let sub = match known(self.eval_member(ev, node, "subscriptionId", path)?) {
            Ok(s) => s,
            Err(e) => return Some(Part::Runtime(e)),
        };
        let rg = match known(self.eval_member(ev, node, "resourceGroup", path)?) {
            Ok(rg) => rg,
            Err(e) => return Some(Part::Runtime(e)),
        };
        Some(Part::Known(match (sub, rg) {
            (None, None) => self.ctx.scope_id(self.template.scope),
            (Some(s), None) => {
                if self.template.scope == ScopeKind::ResourceGroup
                    && s.eq_ignore_ascii_case(&self.ctx.subscription_id)
                {
                    ids::resource_group_scope(&s, &self.ctx.resource_group)
                } else {
                    ids::subscription_scope(&s)
                }
            }
            (s, Some(rg)) => ids::resource_group_scope(
                &s.unwrap_or_else(|| self.ctx.subscription_id.clone()),
                &rg,
            ),
        }))
    }

    /// Implicit dependencies: the first argument of `reference`/`references`/`resourceInfo`/`list*` calls in the
    /// resource body (not inside an inner-scope nested template).
    fn implicit_refs(
        &self,
        ev: &mut Evaluator<'_>,
        decl: usize,
        node: &Node,
        deps: &mut Vec<DepRef>,
    ) {
        let args = self
            .implicit_args
            .borrow_mut()
            .entry(decl)
            .or_insert_with(|| Rc::new(reference_arguments(node)))
            .clone();
        for (arg, source) in args.iter() {
            if let Ok(Value::String(target)) = ev.eval_expr(arg, source) {
                deps.push(DepRef {
                    text: target,
                    explicit: false,
                });
            }
        }
    }

    /// Records a resource whose ID waits for the deployment's run (once per declaration and expression: a copy
    /// loop's instances share it).
    fn defer_runtime_id(&self, decl: &ResourceDecl, key: &str, expression: &str) {
        let target = join_path(&decl.path, "name");
        let mut deferred = self.deferred.borrow_mut();
        if deferred.iter().any(|d| {
            d.kind == DeferredKind::ResourceId && d.target == target && d.expression == expression
        }) {
            return;
        }
        deferred.push(Deferred {
            kind: DeferredKind::ResourceId,
            target,
            symbolic_name: decl.symbolic_name.clone(),
            resource_type: decl
                .node
                .get_ci("type")
                .and_then(Node::as_str)
                .filter(|t| !t.starts_with('['))
                .map(str::to_string),
            key: Some(key.to_string()),
            expression: expression.to_string(),
        });
    }

    fn check_duplicate_ids(&self) {
        let state = self.state.borrow();
        let mut seen = std::collections::HashSet::new();
        for inst in &state.instances {
            // An ID known only while the deployment runs cannot be compared before then.
            if inst.condition == Some(false) || inst.existing || inst.runtime_id.is_some() {
                continue;
            }
            if !seen.insert(inst.key.to_ascii_lowercase()) {
                let path = &self.template.resources[inst.decl].path;
                self.error(Diagnostic::error(
                    "InvalidTemplate",
                    format!(
                        "The resource '{}' is defined multiple times in a template.",
                        inst.key
                    ),
                    path.clone(),
                ));
            }
        }
    }

    /// Whether a resource copy loop of this template waits for the deployment's run: a name that finds no instance
    /// may then be one of its instances (their names and IDs are not known yet either).
    fn has_deferred_loops(&self) -> bool {
        self.deferred
            .borrow()
            .iter()
            .any(|d| matches!(d.kind, DeferredKind::CopyCount | DeferredKind::ResourceId))
    }

    /// Instances a dependency or reference text names: a symbolic name (optionally `[i]`), a resource ID, a
    /// copy-loop name, or a resource name.
    /// ` Did you mean 'x'?` for the resource (symbolic name, else name or last name segment) closest to `text`.
    fn resource_hint(&self, text: &str) -> String {
        let state = self.state.borrow();
        let mut names: Vec<&str> = Vec::new();
        for inst in &state.instances {
            if let Some(symbolic) = &inst.symbolic {
                names.push(symbolic);
            }
            if let Some(name) = &inst.name {
                names.push(name);
                names.extend(name.rsplit('/').next().filter(|last| last != name));
            }
        }
        let wanted = text.split('[').next().unwrap_or(text);
        did_you_mean(wanted, names)
    }

    fn resolve_ref(&self, text: &str) -> Option<Vec<usize>> {
        let state = self.state.borrow();
        let insts = &state.instances;
        let mut index = self.ref_index.borrow_mut();
        if index.as_ref().is_none_or(|ix| ix.count != insts.len()) {
            *index = Some(RefIndex::build(insts));
        }
        let ix = index.as_ref().expect("built above");
        let lower = text.to_ascii_lowercase();
        if self.template.language_version.symbolic() {
            let (sym, wanted) = match lower.strip_suffix(']').and_then(|t| t.split_once('[')) {
                Some((s, i)) => (s, i.trim().parse::<i64>().ok()),
                None => (lower.as_str(), None),
            };
            if let Some(found) = ix.by_symbol.get(sym) {
                let found: Vec<usize> = found
                    .iter()
                    .copied()
                    .filter(|&n| {
                        wanted.is_none_or(|w| insts[n].copy.as_ref().is_some_and(|c| c.index == w))
                    })
                    .collect();
                if !found.is_empty() {
                    return Some(found);
                }
            }
        }
        for map in [&ix.by_id, &ix.by_copy, &ix.by_name] {
            if let Some(found) = map.get(&lower) {
                return Some(found.clone());
            }
        }
        let pick = |f: &dyn Fn(&Instance) -> bool| -> Option<Vec<usize>> {
            let found: Vec<usize> = insts
                .iter()
                .enumerate()
                .filter(|(_, i)| f(i))
                .map(|(n, _)| n)
                .collect();
            (!found.is_empty()).then_some(found)
        };
        // `Ns/type/name` without the scope prefix.
        if text.contains('/') && !text.starts_with('/') {
            let suffix = format!("/providers/{}", text.to_ascii_lowercase());
            return pick(&|i: &Instance| {
                i.id.as_deref().is_some_and(|id| {
                    let lower = id.to_ascii_lowercase();
                    lower.ends_with(&suffix) || type_name_matches(&lower, text)
                })
            });
        }
        None
    }

    /// A dependency on something the template declares but does not deploy, which ARM counts as satisfied: a
    /// copy loop (or its symbolic name) with no instances, or a resource of a declared type whose instances are
    /// all skipped before their identity was known (a false condition, see [`TemplateEnv::identify`]) or that
    /// no instance deploys (a count-0 loop). Returns the skipped instances it may name (possibly none).
    fn resolve_undeployed(
        &self,
        text: &str,
        undeployed: &HashSet<usize>,
        loop_names: &HashMap<usize, String>,
    ) -> Option<Vec<usize>> {
        let decls = &self.template.resources;
        let symbolic = self.template.language_version.symbolic();
        // The whole loop (`sym[i]` of an empty loop is out of bounds: `symbol_index_error` says so).
        if symbolic
            && undeployed.iter().any(|&d| {
                decls[d]
                    .symbolic_name
                    .as_deref()
                    .is_some_and(|s| s.eq_ignore_ascii_case(text))
            })
        {
            return Some(Vec::new());
        }
        if loop_names
            .iter()
            .any(|(d, name)| undeployed.contains(d) && name.eq_ignore_ascii_case(text))
        {
            return Some(Vec::new());
        }
        // In 2.0 a reference without a slash is a symbolic name, and those were looked up above.
        if symbolic && !text.contains('/') {
            return None;
        }
        let state = self.state.borrow();
        // Also an instance whose ID is known only while the deployment runs: it may be the one named.
        let unknown = |i: &usize| {
            let inst = &state.instances[*i];
            (inst.condition == Some(false) || inst.runtime_id.is_some())
                && inst.id.is_none()
                && inst.extension.is_none()
        };
        let wanted = reference_type(text);
        let same_type = |t: &str| wanted.as_deref().is_some_and(|w| w.eq_ignore_ascii_case(t));
        // A plain name (1.0) may be any of them; an ID or `Ns/type/name` only one of its type.
        let skipped: Vec<usize> = (0..state.instances.len())
            .filter(unknown)
            .filter(|&i| !text.contains('/') || same_type(&state.instances[i].resource_type))
            .collect();
        let undeployed_decl = undeployed.iter().any(|&d| {
            !text.contains('/')
                || decls[d]
                    .node
                    .get_ci("type")
                    .and_then(Node::as_str)
                    .is_some_and(same_type)
        });
        (!skipped.is_empty() || undeployed_decl).then_some(skipped)
    }

    /// For `sym[i]` naming a declared copy loop with fewer than `i + 1` instances: the out-of-bounds message
    /// indexing the loop's array would give in a 1.0 template.
    fn symbol_index_error(&self, text: &str) -> Option<String> {
        if !self.template.language_version.symbolic() {
            return None;
        }
        let (sym, index) = text.strip_suffix(']')?.split_once('[')?;
        let index: i64 = index.trim().parse().ok()?;
        let decl = self.template.resources.iter().position(|d| {
            d.symbolic_name
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case(sym))
        })?;
        let count = self
            .state
            .borrow()
            .instances
            .iter()
            .filter(|i| i.decl == decl)
            .count();
        Some(format!(
            "The language expression array index '{index}' is out of bounds. The array has {count} element(s)."
        ))
    }

    /// Serial copy loops: each batch waits for the previous one.
    fn add_serial_edges(&self, by_decl: &[Vec<usize>]) {
        let mut state = self.state.borrow_mut();
        for instances in by_decl {
            let Some(&first) = instances.first() else {
                continue;
            };
            let Some(copy) = state.instances[first].copy.clone() else {
                continue;
            };
            if !copy.serial {
                continue;
            }
            let batch = copy.batch_size.unwrap_or(1).max(1) as usize;
            for (pos, &idx) in instances.iter().enumerate() {
                if pos < batch {
                    continue;
                }
                let prev_batch_start = (pos / batch - 1) * batch;
                let prev: Vec<usize> =
                    instances[prev_batch_start..prev_batch_start + batch].to_vec();
                let deps = &mut state.instances[idx].depends_on;
                deps.extend(prev);
                deps.sort_unstable();
                deps.dedup();
            }
        }
    }

    /// Topological order (Kahn); reports a cycle as ARM does.
    fn order(&self) -> Option<Vec<usize>> {
        let state = self.state.borrow();
        let n = state.instances.len();
        let mut indegree = vec![0usize; n];
        let mut dependents = vec![Vec::new(); n];
        for (i, inst) in state.instances.iter().enumerate() {
            for &d in &inst.depends_on {
                indegree[i] += 1;
                dependents[d].push(i);
            }
        }
        let mut ready: std::collections::VecDeque<usize> =
            (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop_front() {
            order.push(i);
            for &j in &dependents[i] {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    ready.push_back(j);
                }
            }
        }
        if order.len() < n {
            let stuck: Vec<String> = (0..n)
                .filter(|&i| indegree[i] > 0)
                .map(|i| state.instances[i].key.clone())
                .collect();
            let path = self.template.resources
                [state.instances[(0..n).find(|&i| indegree[i] > 0)?].decl]
                .path
                .clone();
            drop(state);
            self.error(Diagnostic::error(
                "InvalidTemplate",
                format!(
                    "Circular dependency detected on resource: '{}'.",
                    stuck.join("', '")
                ),
                path,
            ));
            return None;
        }
        Some(order)
    }

    // ----- phase two: bodies -----

    /// Whether instance `idx` is a nested deployment with an inline template.
    fn is_nested_deployment(&self, idx: usize) -> bool {
        let state = self.state.borrow();
        let inst = &state.instances[idx];
        inst.extension.is_none()
            && inst
                .resource_type
                .eq_ignore_ascii_case("Microsoft.Resources/deployments")
            && self.template.resources[inst.decl]
                .node
                .get_ci("properties")
                .and_then(|p| p.get_ci("template"))
                .is_some()
    }

    /// Phase two for one instance: evaluates (and records) its body. `None` when it is not deployed or failed.
    fn evaluate_body(&self, idx: usize) -> Option<Value> {
        let inst = self.state.borrow().instances[idx].clone();
        if inst.condition == Some(false) {
            return None;
        }
        let decl = &self.template.resources[inst.decl];
        let is_deployment = self.is_nested_deployment(idx);
        let body_node = self
            .body_nodes
            .borrow_mut()
            .entry(inst.decl)
            .or_insert_with(|| Rc::new(body_node(&decl.node, is_deployment)))
            .clone();
        // Inline or linked.
        let any_deployment = inst.extension.is_none()
            && inst
                .resource_type
                .eq_ignore_ascii_case("Microsoft.Resources/deployments");
        // A nested deployment's `list*()` config values are recorded as directives (see `config_source`).
        let configs_node = any_deployment
            .then(|| {
                decl.node
                    .get_ci("properties")
                    .and_then(|p| p.get_ci("extensionConfigs"))
            })
            .flatten();
        let evaluate = |ev: &mut Evaluator<'_>| -> Result<Value, EvalError> {
            let mut body = ev.eval_node(&body_node)?;
            if let Some(node) = configs_node {
                let traced = trace_config(
                    ev,
                    node,
                    &Names {
                        variable: &|name: &str| self.variable_node(name),
                        resource_id: &|target: &str| self.list_target_id(target),
                        secure_parameter: &|name: &str| self.parameter_secure(name),
                    },
                );
                if let Some(configs) =
                    body_properties_mut(&mut body).and_then(|p| p.get_mut("extensionConfigs"))
                {
                    record_directives(configs, &directives(&traced));
                }
                // A list* output no directive can stand for: a stack would store nothing for it, so a
                // stack-initiated deployment refuses it (the engine's `REFUSED_FOR_STACKS`).
                let base = join_path(&join_path(&decl.path, "properties"), "extensionConfigs");
                for t in &traced {
                    if let Some(message) = t.refusal() {
                        let target = t.path.iter().fold(base.clone(), |p, s| join_path(&p, s));
                        self.warn_once(Diagnostic::warning(t.code(), message, target));
                    }
                }
            }
            Ok(body)
        };
        let mut ev = Evaluator::new(self);
        let body = match &inst.copy {
            Some(c) => ev.with_copy(&c.name, c.index, CopyKind::Unnamed, evaluate),
            None => evaluate(&mut ev),
        };
        let mut body = match body {
            Ok(b) => b,
            Err(e) => {
                self.error(diag_from_eval(&e, &decl.path));
                return None;
            }
        };
        // Only a body that read a secure value can pass one on: the common case costs nothing more.
        let secure_parameters = if any_deployment && ev.has_read_secure() {
            self.secure_parameters(&decl.node, inst.copy.as_ref(), &body)
        } else {
            Vec::new()
        };
        // A template the parent computed is the child's, kept apart like an inline one.
        let template = if is_deployment {
            body_properties_mut(&mut body).and_then(|p| p.remove("template"))
        } else {
            None
        };
        if let Value::Object(o) = &mut body {
            if let Some(n) = &inst.name {
                o.insert("name", Value::from(n.as_str()));
            }
            o.insert("type", Value::from(inst.resource_type.as_str()));
            if let Some(v) = &inst.api_version {
                o.insert("apiVersion", Value::from(v.as_str()));
            }
        }
        let mut state = self.state.borrow_mut();
        state.instances[idx].body = Some(body.clone());
        state.instances[idx].secure_parameters = secure_parameters;
        state.instances[idx].template = template;
        Some(body)
    }

    /// The lower-case names of the child parameters a nested deployment's body (which read a secure value)
    /// computed from one. The body's taint covers all of it, so each entry of `properties.parameters` is
    /// evaluated again on its own; when that cannot be told apart (the parameters come from one expression, a
    /// property copy loop, a failure), every parameter counts as secure.
    fn secure_parameters(&self, node: &Node, copy: Option<&CopyInfo>, body: &Value) -> Vec<String> {
        let given = body
            .as_object()
            .and_then(|b| b.get("properties"))
            .and_then(Value::as_object)
            .and_then(|p| p.get("parameters"))
            .and_then(Value::as_object);
        let all = || {
            given
                .map(|ps| ps.iter().map(|(k, _)| k.to_ascii_lowercase()).collect())
                .unwrap_or_default()
        };
        let members = match node
            .get_ci("properties")
            .and_then(|p| p.get_ci("parameters"))
            .map(|p| &p.kind)
        {
            Some(NodeKind::Object(members))
                if !members.iter().any(|m| m.key.eq_ignore_ascii_case("copy")) =>
            {
                members
            }
            None if given.is_none() => return Vec::new(),
            _ => return all(),
        };
        let mut secure = Vec::new();
        for member in members {
            let one = Node::synthetic(NodeKind::Object(vec![member.clone()]));
            let mut ev = Evaluator::new(self);
            let value = match copy {
                Some(c) => {
                    ev.with_copy(&c.name, c.index, CopyKind::Unnamed, |ev| ev.eval_node(&one))
                }
                None => ev.eval_node(&one),
            };
            match value {
                Ok(Value::Object(o)) if ev.has_read_secure() => {
                    secure.extend(o.iter().map(|(k, _)| k.to_ascii_lowercase()));
                }
                Ok(Value::Object(_)) => {}
                _ => return all(),
            }
        }
        secure
    }

    /// Expands a nested deployment's template as a child plan (outer scope sees this deployment's symbols).
    fn run_child(&self, nested: &NestedTemplate) -> Option<Plan> {
        let input = DeploymentInput {
            template: &nested.template,
            parameters: nested.parameters.clone(),
            extension_configs: nested.extension_configs.clone(),
            context: nested.context.clone(),
        };
        let outer = if nested.inner { None } else { Some(self) };
        let mut child = TemplateEnv::new(
            input,
            self.hook,
            outer,
            self.depth + 1,
            Some(self.budget.clone()),
        );
        child.secure_inputs = nested.secure_parameters.iter().cloned().collect();
        let plan = child.run();
        for d in child.diags.into_inner() {
            self.error(prefix_diag(d, &nested.path));
        }
        plan
    }

    /// The child deployment of nested deployment `idx` (after its body was evaluated): template, parameters
    /// (inner scope), extension configs evaluated here, and the child's deployment context. Deferred when the
    /// template or the parameters are only known while the deployment runs.
    fn nested_template(&self, idx: usize) -> NestedOutcome {
        let inst = self.state.borrow().instances[idx].clone();
        let decl = &self.template.resources[inst.decl];
        let (Some(body), Some(template_node)) = (
            inst.body.as_ref(),
            decl.node
                .get_ci("properties")
                .and_then(|p| p.get_ci("template")),
        ) else {
            return NestedOutcome::Failed;
        };
        let props_path = join_path(&decl.path, "properties");
        let path = join_path(&props_path, "template");
        let deferred = |kind: DeferredKind, target: String, expression: String| {
            NestedOutcome::Deferred(Deferred {
                kind,
                target,
                symbolic_name: inst.symbolic.clone(),
                resource_type: Some(inst.resource_type.clone()),
                key: Some(inst.key.clone()),
                expression,
            })
        };
        // An inline template is parsed as written; one given as an expression was computed with the body.
        let computed = template_node.as_object().is_none();
        let root = if computed {
            match &inst.template {
                Some(value @ Value::Object(_)) => {
                    if let Some(expression) = first_unevaluated(value) {
                        return deferred(DeferredKind::NestedTemplate, path, expression);
                    }
                    Node::from_json(&value.to_json())
                }
                Some(Value::Unevaluated(u)) => {
                    return deferred(DeferredKind::NestedTemplate, path, u.expression.clone());
                }
                other => {
                    let found = other
                        .as_ref()
                        .map_or("nothing".to_string(), |v| v.value_type().to_string());
                    self.error(
                        Diagnostic::error(
                            "InvalidTemplate",
                            format!("The template must be a JSON object, not {found}."),
                            &path,
                        )
                        .with_span(template_node.span),
                    );
                    return NestedOutcome::Failed;
                }
            }
        } else {
            template_node.clone()
        };
        let (child_template, template_diags) = Template::parse(root);
        for d in template_diags {
            self.error(prefix_diag(d, &path));
        }
        let props = body
            .as_object()
            .and_then(|b| b.get("properties"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let inner = props
            .get("expressionEvaluationOptions")
            .and_then(Value::as_object)
            .and_then(|o| o.get("scope"))
            .and_then(Value::as_str)
            .is_some_and(|s| s.eq_ignore_ascii_case("inner"));
        // A computed template holds what its `[[` escapes kept from the parent: expressions of the child's own,
        // evaluated in its own scope with the parameters the deployment gives it, whatever the scope option says
        // (an outer scope only means the parent evaluates the template, which it did).
        let own_scope = inner || computed;
        let mut parameters = Vec::new();
        if own_scope {
            let given = props.get("parameters").unwrap_or(&Value::Null);
            if let Value::Unevaluated(u) = given {
                return deferred(
                    DeferredKind::NestedParameters,
                    join_path(&props_path, "parameters"),
                    u.expression.clone(),
                );
            }
            match deployment_parameters(given) {
                Ok(read) => parameters = read,
                Err(e) => {
                    self.error(Diagnostic::error(
                        "InvalidTemplate",
                        e.to_string(),
                        join_path(&join_path(&props_path, "parameters"), e.parameter()),
                    ));
                    return NestedOutcome::Failed;
                }
            }
        }
        let mut extension_configs = Vec::new();
        if let Some(Value::Object(configs)) = props.get("extensionConfigs") {
            let parent_lookup = |alias: &str| {
                self.extensions
                    .borrow()
                    .iter()
                    .find(|e| e.alias.eq_ignore_ascii_case(alias))
                    .map(|e| e.config.clone())
            };
            for (alias, value) in configs {
                match read_alias_input(value, &parent_lookup) {
                    Ok(config) => extension_configs.push((alias.clone(), config)),
                    Err(e) => self.error(config_diagnostic(
                        &e,
                        &join_path(&join_path(&props_path, "extensionConfigs"), alias),
                    )),
                }
            }
        }
        let b = body.as_object();
        let ctx = self
            .ctx
            .for_nested(inst.name.clone().unwrap_or_default(), |k| {
                b.and_then(|o| o.get(k))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        NestedOutcome::Ready(Box::new(NestedTemplate {
            template: child_template,
            parameters,
            extension_configs,
            context: ctx,
            inner: own_scope,
            path,
            // An outer-scope child reads the parent's own parameters, which know whether they are secure.
            secure_parameters: if own_scope {
                inst.secure_parameters.clone()
            } else {
                Vec::new()
            },
        }))
    }

    // ----- outputs -----

    fn evaluate_outputs(&self) -> Vec<(String, PlannedOutput)> {
        let mut out = Vec::new();
        for decl in &self.template.outputs {
            let node = &decl.node;
            let mut ev = Evaluator::new(self);
            if let Some(c) = node.get_ci("condition") {
                match ev.eval_node(c) {
                    Ok(Value::Bool(false)) => continue,
                    Ok(_) => {}
                    Err(e) => {
                        self.error(diag_from_eval(&e, &join_path(&decl.path, "condition")));
                        continue;
                    }
                }
            }
            let value = if let Some(copy) = node.get_ci("copy") {
                let count = copy.get_ci("count").map(|c| ev.eval_node(c)).transpose();
                let input = copy.get_ci("input");
                (|| {
                    let count = count?.unwrap_or(Value::Int(0));
                    // A count known only at deployment: so is the whole output.
                    if let Value::Unevaluated(_) = count {
                        return Ok(count);
                    }
                    let count = copy_count(&decl.name, &count)?;
                    let Some(input) = input else {
                        return Err(EvalError::expression(
                            "An output copy loop needs an 'input'.",
                        ));
                    };
                    let mut items = Vec::with_capacity(count as usize);
                    for i in 0..count {
                        items.push(ev.with_copy(&decl.name, i, CopyKind::Unnamed, |ev| {
                            ev.eval_node(input)
                        })?);
                    }
                    Ok(Value::Array(items))
                })()
            } else {
                match node.get_ci("value") {
                    Some(v) => ev.eval_node(v),
                    None => Ok(Value::Null),
                }
            };
            let read_secure = ev.has_read_secure();
            let value = match value {
                Ok(v) => v,
                Err(e) => {
                    // The copy count check runs outside the evaluator and may quote a secure count.
                    self.error(diag_from_eval(&e.secure_if(read_secure), &decl.path));
                    continue;
                }
            };
            let output_type = type_of(node, self.template, &value);
            for d in types::check_value_as(
                &value,
                node,
                self.template.definitions.as_ref(),
                &decl.path,
                read_secure,
            ) {
                self.error(d.with_span(node.span));
            }
            let secure = types::is_secure(node, self.template.definitions.as_ref());
            out.push((
                decl.name.clone(),
                PlannedOutput {
                    output_type,
                    value,
                    secure,
                    from_secure: read_secure,
                },
            ));
        }
        out
    }

    // ----- runtime functions -----

    /// Whether `reference()` with `args` answers with a nested deployment's outputs that were computed from a
    /// secure value. The answer holds all its outputs, so one such output makes the whole answer secure.
    fn outputs_from_secure(&self, args: &[Value]) -> bool {
        let Some(target) = args.first().and_then(Value::as_str) else {
            return false;
        };
        let Some(found) = self.resolve_ref(target) else {
            return false;
        };
        let state = self.state.borrow();
        found.iter().any(|&i| {
            state.instances[i]
                .child
                .as_ref()
                .is_some_and(|plan| plan.outputs.iter().any(|(_, o)| o.from_secure))
        })
    }

    fn reference(&self, args: &[Value], kind: RefKind) -> Result<Value, EvalError> {
        let target = match args.first() {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(EvalError::expression(
                    "The first argument of reference() must be a string.",
                ));
            }
        };
        let api_version = args.get(1).and_then(Value::as_str).map(str::to_string);
        let full = args
            .iter()
            .skip(1)
            .any(|a| a.as_str().is_some_and(|s| s.eq_ignore_ascii_case("full")));
        let found = self.resolve_ref(&target);
        let Some(found) = found else {
            if target.starts_with('/') {
                let req = ReferenceRequest {
                    resource_id: &target,
                    api_version: api_version.as_deref(),
                    full,
                    declared: None,
                    existing: false,
                    extension: None,
                };
                return self
                    .hook
                    .reference(&req)
                    .ok_or_else(|| EvalError::unavailable(format!("reference('{target}')")));
            }
            if self.has_deferred_loops() {
                return Err(EvalError::unavailable(format!("reference('{target}')")));
            }
            return Err(EvalError::expression(format!(
                "The template reference '{target}' is not valid: could not find template resource or resource copy with this name.{}",
                self.resource_hint(&target)
            )));
        };
        self.state
            .borrow_mut()
            .touched
            .extend(found.iter().copied());
        let answer_one = |i: usize| -> Result<Value, EvalError> {
            let state = self.state.borrow();
            let inst = &state.instances[i];
            if inst.condition == Some(false) {
                // ARM fails the deployment when it meets this, but validates the template: before a run the
                // value stays open.
                if !self.hook.deploying() {
                    return Err(EvalError::unavailable(format!("reference('{}')", inst.key)));
                }
                return Err(EvalError::expression(format!(
                    "The template resource '{}' is not deployed because its condition is false.",
                    inst.key
                )));
            }
            if kind == RefKind::Info {
                let mut o = Object::new();
                if let Some(id) = &inst.id {
                    o.insert("id", Value::from(id.as_str()));
                }
                if let Some(n) = &inst.name {
                    o.insert("name", Value::from(n.as_str()));
                }
                o.insert("type", Value::from(inst.resource_type.as_str()));
                if let Some(v) = &inst.api_version {
                    o.insert("apiVersion", Value::from(v.as_str()));
                }
                return Ok(Value::Object(o));
            }
            if let Some(child) = &inst.child {
                let mut props = Object::new();
                // The child's output values as they are: one known only at deployment stays unknown here
                // (its JSON form would be its expression text, a string).
                props.insert("outputs", child.outputs_value());
                props.insert("provisioningState", Value::from("Succeeded"));
                if !full {
                    return Ok(Value::Object(props));
                }
                let mut o = inst
                    .body
                    .as_ref()
                    .and_then(|b| b.as_object().cloned())
                    .unwrap_or_default();
                o.insert("id", Value::from(inst.key.as_str()));
                o.insert("properties", Value::Object(props));
                return Ok(Value::Object(o));
            }
            // A resource whose ID waits for the run has no state to read before then.
            if inst.runtime_id.is_some() {
                return Err(EvalError::unavailable(format!("reference('{}')", inst.key)));
            }
            // A child left for the deployment's run: nothing can say what it outputs before then.
            if self
                .deferred
                .borrow()
                .iter()
                .any(|d| d.key.as_deref() == Some(inst.key.as_str()))
            {
                return Err(EvalError::unavailable(format!("reference('{}')", inst.key)));
            }
            let req = ReferenceRequest {
                resource_id: &inst.key,
                api_version: api_version.as_deref().or(inst.api_version.as_deref()),
                full,
                declared: inst.body.as_ref(),
                existing: inst.existing,
                extension: inst.extension.as_ref().map(|e| e.alias.as_str()),
            };
            self.hook
                .reference(&req)
                .ok_or_else(|| EvalError::unavailable(format!("reference('{}')", inst.key)))
        };
        match kind {
            RefKind::Many => Ok(Value::Array(
                found
                    .into_iter()
                    .map(answer_one)
                    .collect::<Result<_, _>>()?,
            )),
            _ => answer_one(found[0]),
        }
    }

    /// The ID a `list*()` call's first argument names: a resource of the template (by symbolic name, ID or
    /// name), or the argument itself.
    /// A variable's declared value as the walk of `config_source` reads it: this template's, else the outer
    /// scope's (the names expressions here see).
    fn variable_node(&self, name: &str) -> Option<Node> {
        match self.template.variable(name) {
            Some(decl) => match &decl.value {
                VariableValue::Plain(node) => Some(node.clone()),
                VariableValue::Copy { .. } => None,
            },
            None => self.outer.and_then(|o| o.variable_node(name)),
        }
    }

    /// Adds a warning unless the same one is there (a body may be evaluated more than once).
    fn warn_once(&self, diagnostic: Diagnostic) {
        let mut diags = self.diags.borrow_mut();
        if !diags
            .iter()
            .any(|d| d.code == diagnostic.code && d.target == diagnostic.target)
        {
            diags.push(diagnostic);
        }
    }

    fn list_target_id(&self, target: &str) -> String {
        match self.resolve_ref(target) {
            Some(found) => self.state.borrow().instances[found[0]].key.clone(),
            None => target.to_string(),
        }
    }

    fn list(&self, name: &str, args: &[Value]) -> Result<Value, EvalError> {
        let target = args.first().and_then(Value::as_str).unwrap_or_default();
        let api_version = args.get(1).and_then(Value::as_str).unwrap_or_default();
        if let Some(found) = self.resolve_ref(target) {
            self.state.borrow_mut().touched.extend(found);
        }
        let id = self.list_target_id(target);
        self.hook
            .list(&id, name, api_version, args.get(2))
            .ok_or_else(|| EvalError::unavailable(format!("{name}('{id}')")))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RefKind {
    One,
    Many,
    Info,
}

/// The first arguments of `reference`/`references`/`resourceInfo`/`list*` calls in a resource declaration (not
/// inside an inner-scope nested template), with the source string each belongs to.
fn reference_arguments(node: &Node) -> Vec<(Expr, Rc<str>)> {
    let mut strings = Vec::new();
    collect_expression_strings(node, true, &mut strings);
    let mut out = Vec::new();
    for s in strings {
        let Ok(Some(expr)) = cairn_expr::parse_template_string(s) else {
            continue;
        };
        let source: Rc<str> = Rc::from(s);
        expr.walk(&mut |e: &Expr| {
            if let ExprKind::Call {
                namespace: None,
                name,
                args,
            } = &e.kind
            {
                let n = name.name.to_ascii_lowercase();
                let is_ref = matches!(n.as_str(), "reference" | "references" | "resourceinfo")
                    || cairn_eval::functions::lookup(&n)
                        .is_some_and(cairn_eval::functions::is_list_function);
                if is_ref && let Some(first) = args.first() {
                    out.push((first.clone(), source.clone()));
                }
            }
        });
    }
    out
}

type ImplicitArgs = Vec<(Expr, Rc<str>)>;
type PlannedParameters = Vec<(String, PlannedParameter)>;

/// Lookup tables over the instances (lower-cased keys), rebuilt when instances are added.
struct RefIndex {
    count: usize,
    by_symbol: HashMap<String, Vec<usize>>,
    by_id: HashMap<String, Vec<usize>>,
    by_copy: HashMap<String, Vec<usize>>,
    by_name: HashMap<String, Vec<usize>>,
}

impl RefIndex {
    fn build(insts: &[Instance]) -> RefIndex {
        let mut ix = RefIndex {
            count: insts.len(),
            by_symbol: HashMap::new(),
            by_id: HashMap::new(),
            by_copy: HashMap::new(),
            by_name: HashMap::new(),
        };
        for (n, i) in insts.iter().enumerate() {
            let add = |map: &mut HashMap<String, Vec<usize>>, key: Option<&str>| {
                if let Some(k) = key {
                    map.entry(k.to_ascii_lowercase()).or_default().push(n);
                }
            };
            add(&mut ix.by_symbol, i.symbolic.as_deref());
            add(&mut ix.by_id, i.id.as_deref());
            add(&mut ix.by_copy, i.copy.as_ref().map(|c| c.name.as_str()));
            add(&mut ix.by_name, i.name.as_deref());
        }
        ix
    }
}

/// A part of a resource's identity (its name or scope): known now, or known only while the deployment runs (its
/// expression then).
enum Part {
    Known(String),
    Runtime(String),
}

/// The plan key of an instance whose ID is known only while the deployment runs: its symbolic name or its
/// declaration's path (never the name's expression text), `[index]` in a copy loop, under its parent's key.
fn runtime_key(decl: &ResourceDecl, copy: &Option<CopyInfo>, parent: Option<&Instance>) -> String {
    let base = decl
        .symbolic_name
        .clone()
        .unwrap_or_else(|| decl.path.clone());
    let key = match copy {
        Some(c) => format!("{base}[{}]", c.index),
        None => base,
    };
    match parent {
        Some(p) => format!("{}/{key}", p.key),
        None => key,
    }
}

/// A dependency named by `dependsOn` (explicit) or by a runtime function argument (implicit).
struct DepRef {
    text: String,
    explicit: bool,
}

/// The resource type a resource ID or an `Ns/type/name[/childType/childName]` reference names (for an extension
/// resource's ID, the extension's type).
fn reference_type(text: &str) -> Option<String> {
    let rest = if text.starts_with('/') {
        let lower = text.to_ascii_lowercase();
        let at = lower.rfind("/providers/")?;
        &text[at + "/providers/".len()..]
    } else {
        text
    };
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.len() < 3 || segments.len().is_multiple_of(2) {
        return None;
    }
    let mut ty = format!("{}/{}", segments[0], segments[1]);
    for child in segments[3..].iter().step_by(2) {
        ty.push('/');
        ty.push_str(child);
    }
    Some(ty)
}

fn type_name_matches(lower_id: &str, text: &str) -> bool {
    // `Microsoft.Network/virtualNetworks/vnet1/subnets/sn` style full-type-plus-names references.
    lower_id.contains(&format!("/providers/{}", text.to_ascii_lowercase()))
}

fn prefix_diag(mut d: Diagnostic, prefix: &str) -> Diagnostic {
    d.target = if d.target.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}.{}", d.target)
    };
    d
}

/// The `properties` object of an evaluated resource body.
fn body_properties_mut(body: &mut Value) -> Option<&mut Object> {
    match body {
        Value::Object(o) => match o.get_mut("properties")? {
            Value::Object(p) => Some(p),
            _ => None,
        },
        _ => None,
    }
}

/// The resource node without control members; for nested deployments, without an inline `properties.template`
/// (the child evaluates it). A template given as an expression is the parent's to evaluate, so it stays.
fn body_node(node: &Node, is_deployment: bool) -> Node {
    let Some(members) = node.as_object() else {
        return node.clone();
    };
    let mut kept: Vec<Member> = Vec::with_capacity(members.len());
    for m in members {
        if CONTROL_KEYS.iter().any(|k| m.key.eq_ignore_ascii_case(k))
            || m.key.eq_ignore_ascii_case("name")
            || m.key.eq_ignore_ascii_case("type")
        {
            continue;
        }
        if is_deployment
            && m.key.eq_ignore_ascii_case("properties")
            && let Some(props) = m.value.as_object()
        {
            let inner: Vec<Member> = props
                .iter()
                .filter(|p| !is_inline_template(p))
                .cloned()
                .collect();
            kept.push(Member {
                key: m.key.clone(),
                key_span: m.key_span,
                value: Node::new(NodeKind::Object(inner), m.value.span),
            });
            continue;
        }
        kept.push(m.clone());
    }
    Node::new(NodeKind::Object(kept), node.span)
}

/// Whether a member is a nested deployment's inline `template` (an object, evaluated by the child).
fn is_inline_template(member: &Member) -> bool {
    member.key.eq_ignore_ascii_case("template") && member.value.as_object().is_some()
}

/// Every string in `node` (values and keys) that is an expression, skipping inner nested templates.
fn collect_expression_strings<'n>(node: &'n Node, top: bool, out: &mut Vec<&'n str>) {
    match &node.kind {
        NodeKind::String(s) if s.starts_with('[') && !s.starts_with("[[") => out.push(s),
        NodeKind::Array(items) => items
            .iter()
            .for_each(|i| collect_expression_strings(i, false, out)),
        NodeKind::Object(members) => {
            for m in members {
                if top
                    && (m.key.eq_ignore_ascii_case("dependsOn")
                        || m.key.eq_ignore_ascii_case("resources"))
                {
                    continue;
                }
                if is_inline_template(m) && !top {
                    continue;
                }
                if m.key.starts_with('[') {
                    out.push(&m.key);
                }
                collect_expression_strings(&m.value, false, out);
            }
        }
        _ => {}
    }
}

impl Environment for TemplateEnv<'_> {
    fn parameter(&self, name: &str) -> Result<Value, EvalError> {
        if self.template.parameter(name).is_none() {
            if let Some(outer) = self.outer {
                return outer.parameter(name);
            }
            return Err(EvalError::expression(format!(
                "The template parameter '{name}' is not found.{}",
                did_you_mean(
                    name,
                    self.template.parameters.iter().map(|p| p.name.as_str())
                )
            )));
        }
        self.parameter_value(name).ok_or_else(|| {
            EvalError::coded(
                "InvalidTemplate",
                format!("The template parameter '{name}' has no valid value."),
            )
        })
    }

    fn variable(&self, name: &str) -> Result<Value, EvalError> {
        self.variable_value(name)
    }

    fn parameter_is_secure(&self, name: &str) -> bool {
        if self.template.parameter(name).is_none() {
            return self.outer.is_some_and(|o| o.parameter_is_secure(name));
        }
        self.parameter_secure(name)
    }

    /// `list*` answers hold keys; extension configs may hold credentials (secure literals, Key Vault
    /// directives) and external inputs may be secrets too: errors of an evaluation that read them quote nothing.
    fn runtime_is_secure(&self, call: &RuntimeCall<'_>) -> bool {
        let name = call.name.to_ascii_lowercase();
        name.starts_with("list")
            || name == "extensions"
            || name == "extensionconfigs"
            || name == "externalinputs"
            || ((name == "reference" || name == "references")
                && self.outputs_from_secure(call.args))
    }

    fn variable_is_secure(&self, name: &str) -> bool {
        if self.template.variable(name).is_none() {
            return self.outer.is_some_and(|o| o.variable_is_secure(name));
        }
        self.secure_vars
            .borrow()
            .contains(&name.to_ascii_lowercase())
    }

    fn user_function(&self, namespace: &str, name: &str) -> Option<Rc<UserFunction>> {
        self.template
            .functions
            .iter()
            .find(|f| {
                f.namespace.eq_ignore_ascii_case(namespace) && f.name.eq_ignore_ascii_case(name)
            })
            .cloned()
            .or_else(|| self.outer.and_then(|o| o.user_function(namespace, name)))
    }

    fn facts(&self) -> &DeploymentFacts {
        &self.facts
    }

    fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError> {
        let name = call.name.to_ascii_lowercase();
        match name.as_str() {
            "reference" => self.reference(call.args, RefKind::One),
            "references" => self.reference(call.args, RefKind::Many),
            "resourceinfo" => self.reference(call.args, RefKind::Info),
            "extensions" => self.extension_value(
                call.args
                    .first()
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            "extensionconfigs" => {
                let ext = self.extension_value(
                    call.args
                        .first()
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                )?;
                Ok(ext
                    .as_object()
                    .and_then(|o| o.get("config"))
                    .cloned()
                    .unwrap_or_default())
            }
            "externalinputs" => {
                let key = call
                    .args
                    .first()
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.ctx
                    .external_inputs
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .map(Value::from_json)
                    .ok_or_else(|| EvalError::unavailable(format!("externalInputs('{key}')")))
            }
            "providers" => Err(EvalError::expression(
                "The providers() function is deprecated and not supported.",
            )),
            _ if name.starts_with("list") => self.list(call.name, call.args),
            _ => Err(EvalError::expression(format!(
                "The function '{}' is not available here.",
                call.name
            ))),
        }
    }

    fn allows_nondeterministic(&self) -> bool {
        self.allow_nondeterministic.get()
    }

    fn budget(&self) -> &Budget {
        &self.budget
    }

    fn new_guid(&self) -> String {
        let n = self.guids.get();
        self.guids.set(n + 1);
        match self.ctx.new_guids.get(n) {
            Some(g) => g.clone(),
            None => pseudo_guid(&self.ctx.deployment_name, n),
        }
    }
}

/// A deterministic v4-shaped GUID, so expansion stays reproducible (the engine pins real ones per deployment).
fn pseudo_guid(seed: &str, n: usize) -> String {
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in seed.bytes().chain(n.to_le_bytes()) {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    let hex = format!("{h:032x}");
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// Finds the extension declaration of an alias in a template (helper for callers).
pub fn extension_decl<'t>(template: &'t Template, alias: &str) -> Option<&'t ExtensionDecl> {
    template.extension(alias)
}

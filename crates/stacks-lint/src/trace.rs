//! The source-tracing abstract interpretation: turns JSON values and expressions into [`AVal`]s that say where every
//! piece of a value comes from, following variables, parameters, `if` branches, `createObject`/`union`/`json`,
//! user-defined functions, lambdas, `extensions()`/`extensionConfigs()` and runtime functions.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use cairn_eval::{Value, functions};
use cairn_expr::{Expr, ExprKind};
use cairn_json::{Node, NodeKind, Span};
use cairn_template::model::VariableValue;
use cairn_template::{ParameterValue, Template};

use crate::origin::{
    AMember, AObject, AVal, ComputedKey, FileKind, IndexKey, Origin, OriginKind, ScopeId,
};
use crate::partial::{Partial, PartialEnv};

/// Deepest nesting of expressions, variables and function bodies the tracer follows.
const MAX_DEPTH: usize = 96;
/// Total tracing steps for one lint run; past it values become "unknown" instead of taking forever.
const MAX_STEPS: usize = 2_000_000;

/// One template in the deployment tree: the root, or a nested deployment's inline template.
pub struct Scope {
    pub template: Rc<Template>,
    /// The scope whose parameters, variables and functions this template's expressions use: itself, or its
    /// parent for `expressionEvaluationOptions.scope: outer`.
    pub names: ScopeId,
    /// JSON path of this template inside the template file (`""` for the main template).
    pub prefix: String,
    /// Module parameters: name → the value the parent passes, traced in the parent.
    pub bindings: Vec<(String, AVal)>,
    /// Parameters-file values (root only).
    pub parameter_values: Rc<Vec<(String, ParameterValue)>>,
    /// Shape evaluation with parameter values (names) and without (branch pruning).
    pub with_parameters: PartialEnv,
    pub without_parameters: PartialEnv,
    variable_cache: RefCell<HashMap<String, AVal>>,
    variables_active: RefCell<Vec<String>>,
    /// Top-level config property names each alias is known to receive (`None`: not known here).
    pub effective: RefCell<Vec<(String, Option<Vec<String>>)>>,
}

impl Scope {
    pub fn new(
        template: Rc<Template>,
        names: Option<ScopeId>,
        own_id: ScopeId,
        prefix: String,
        parameter_values: Rc<Vec<(String, ParameterValue)>>,
    ) -> Scope {
        Scope {
            with_parameters: PartialEnv::new(template.clone(), parameter_values.clone(), true),
            without_parameters: PartialEnv::new(template.clone(), parameter_values.clone(), false),
            template,
            names: names.unwrap_or(own_id),
            prefix,
            bindings: Vec::new(),
            parameter_values,
            variable_cache: RefCell::new(HashMap::new()),
            variables_active: RefCell::new(Vec::new()),
            effective: RefCell::new(Vec::new()),
        }
    }

    /// The full JSON path of a path relative to this template.
    pub fn path(&self, relative: &str) -> String {
        match (self.prefix.is_empty(), relative.is_empty()) {
            (true, _) => relative.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) if relative.starts_with('[') => format!("{}{relative}", self.prefix),
            (false, false) => format!("{}.{relative}", self.prefix),
        }
    }
}

/// Where the tracer is: which deployment (for `extensions()`), which file (for positions).
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub scope: ScopeId,
    pub file: FileKind,
}

/// Maps expression spans (relative to a JSON string's content) to file positions.
#[derive(Clone, Copy, Debug)]
struct Loc {
    file: FileKind,
    node: Span,
    /// The string is written without escapes, so expression offsets map one to one.
    precise: bool,
}

impl Loc {
    fn site(&self, span: cairn_expr::Span) -> Option<(FileKind, Span)> {
        if self.node == Span::default() {
            return None;
        }
        if self.precise {
            Some((
                self.file,
                Span {
                    start: self.node.start + 1 + span.start,
                    end: self.node.start + 1 + span.end,
                },
            ))
        } else {
            Some((self.file, self.node))
        }
    }
}

/// The analysis state shared by tracing and checking.
pub struct Tracer<'a> {
    pub scopes: Vec<Scope>,
    pub template_text: &'a str,
    pub parameters_text: Option<&'a str>,
    depth: Cell<usize>,
    steps: Cell<usize>,
    /// Arguments of the user-defined functions being traced, innermost last.
    udf_frames: RefCell<Vec<Vec<(String, AVal)>>>,
    /// Lambda variables in scope, innermost last.
    lambda_frames: RefCell<Vec<(String, AVal)>>,
    /// User-defined functions being traced (lower-case `namespace.name`).
    udf_active: RefCell<Vec<String>>,
}

/// Functions that take lambdas: their lambda variables hold elements of the other arguments.
const LAMBDA_FUNCTIONS: [&str; 7] = [
    "map",
    "filter",
    "reduce",
    "sort",
    "toObject",
    "mapValues",
    "groupBy",
];

/// Functions whose value is a deployment-time fact ("all other expression value types").
const RUNTIME_FACTS: [&str; 10] = [
    "subscription",
    "resourceGroup",
    "tenant",
    "managementGroup",
    "deployment",
    "environment",
    "deployer",
    "utcNow",
    "newGuid",
    "externalInputs",
];

impl<'a> Tracer<'a> {
    pub fn new(template_text: &'a str, parameters_text: Option<&'a str>) -> Tracer<'a> {
        Tracer {
            scopes: Vec::new(),
            template_text,
            parameters_text,
            depth: Cell::new(0),
            steps: Cell::new(0),
            udf_frames: RefCell::new(Vec::new()),
            lambda_frames: RefCell::new(Vec::new()),
            udf_active: RefCell::new(Vec::new()),
        }
    }

    fn text(&self, file: FileKind) -> &str {
        match file {
            FileKind::Template => self.template_text,
            FileKind::Parameters => self.parameters_text.unwrap_or_default(),
        }
    }

    fn names(&self, scope: ScopeId) -> &Scope {
        &self.scopes[self.scopes[scope].names]
    }

    /// Runs `f` one level deeper, or returns an unknown value past the depth or step budget.
    fn nested(&self, site: Option<(FileKind, Span)>, f: impl FnOnce() -> AVal) -> AVal {
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        if steps > MAX_STEPS {
            return AVal::beyond_limits("the analysis step budget ran out", site);
        }
        let depth = self.depth.get();
        if depth >= MAX_DEPTH {
            return AVal::beyond_limits("the value is nested too deeply to follow", site);
        }
        self.depth.set(depth + 1);
        let out = f();
        self.depth.set(depth);
        out
    }

    /// Traces a template's variables dependencies first, so that reading a long chain of variables finds each
    /// link already traced instead of recursing through the whole chain.
    pub fn warm_variables(&self, scope: ScopeId) {
        if self.scopes[scope].names != scope {
            return;
        }
        let template = self.scopes[scope].template.clone();
        let index_of = |name: &str| {
            template
                .variables
                .iter()
                .position(|v| v.name.eq_ignore_ascii_case(name))
        };
        let deps: Vec<Vec<usize>> = template
            .variables
            .iter()
            .map(|v| {
                let mut names = Vec::new();
                match &v.value {
                    VariableValue::Plain(node) => variable_reads(node, &mut names),
                    VariableValue::Copy { count, input } => {
                        variable_reads(count, &mut names);
                        variable_reads(input, &mut names);
                    }
                }
                names.iter().filter_map(|n| index_of(n)).collect()
            })
            .collect();
        // Iterative depth-first post-order: dependencies before the variables that read them.
        let mut state = vec![0u8; deps.len()];
        let mut order = Vec::with_capacity(deps.len());
        for start in 0..deps.len() {
            if state[start] != 0 {
                continue;
            }
            let mut stack = vec![(start, 0usize)];
            state[start] = 1;
            while let Some((node, next)) = stack.pop() {
                if let Some(&dep) = deps[node].get(next) {
                    stack.push((node, next + 1));
                    if state[dep] == 0 {
                        state[dep] = 1;
                        stack.push((dep, 0));
                    }
                } else {
                    state[node] = 2;
                    order.push(node);
                }
            }
        }
        let ctx = Ctx {
            scope,
            file: FileKind::Template,
        };
        for i in order {
            let _ = self.variable(&template.variables[i].name, ctx, None);
        }
    }

    // ----- JSON values -----

    /// Traces a template JSON value (strings may be expressions, keys may be expressions, `copy` loops).
    pub fn trace_node(&self, node: &Node, ctx: Ctx) -> AVal {
        let site = self.node_site(node, ctx.file);
        self.nested(site, || match &node.kind {
            NodeKind::Null | NodeKind::Bool(_) | NodeKind::Number(_) => AVal::literal(site),
            NodeKind::String(s) => self.trace_string(s, node.span, ctx),
            NodeKind::Array(items) => {
                AVal::Array(items.iter().map(|i| self.trace_node(i, ctx)).collect()).bounded()
            }
            NodeKind::Object(members) => {
                let mut obj = AObject::default();
                for m in members {
                    if m.key.eq_ignore_ascii_case("copy")
                        && let NodeKind::Array(loops) = &m.value.kind
                    {
                        for lp in loops {
                            let name = lp.get_ci("name").and_then(Node::as_str);
                            let input = lp.get_ci("input");
                            if let (Some(name), Some(input)) = (name, input) {
                                obj.set(AMember {
                                    key: name.to_string(),
                                    value: AVal::Array(vec![self.trace_node(input, ctx)]),
                                    site: self.node_site(lp, ctx.file),
                                });
                            }
                        }
                        continue;
                    }
                    let value = self.trace_node(&m.value, ctx);
                    let member_site = self.node_site(&m.value, ctx.file);
                    match cairn_expr::classify(&m.key) {
                        cairn_expr::TemplateString::Literal(key) => obj.set(AMember {
                            key: key.into_owned(),
                            value,
                            site: member_site,
                        }),
                        cairn_expr::TemplateString::Expression { .. } => {
                            let key_site = self.node_site_of(m.key_span, ctx.file);
                            // In a function body `parameters()` names the function's own parameters,
                            // which the shape evaluator does not know.
                            let key = if self.in_function_body() {
                                Partial::Unknown
                            } else {
                                self.names(ctx.scope).with_parameters.eval_string(&m.key)
                            };
                            match key {
                                Partial::Known(Value::String(key)) => obj.set(AMember {
                                    key,
                                    value,
                                    site: member_site,
                                }),
                                other => obj.computed.push(ComputedKey {
                                    text: m.key.clone(),
                                    runtime: other == Partial::Runtime,
                                    value,
                                    site: key_site,
                                }),
                            }
                        }
                    }
                }
                AVal::Object(obj).bounded()
            }
        })
    }

    /// A parameters-file value: JSON literals only (the file is never evaluated), except the expression in a seed
    /// 002 `{ "type": "armApiCall", "value": "[list...()]" }` item, which is traced in the root template.
    pub fn trace_parameters_node(&self, node: &Node) -> AVal {
        let site = self.node_site(node, FileKind::Parameters);
        self.nested(site, || match &node.kind {
            NodeKind::Null | NodeKind::Bool(_) | NodeKind::Number(_) => AVal::literal(site),
            NodeKind::String(s) => AVal::string_literal(s, site),
            NodeKind::Array(items) => AVal::Array(
                items
                    .iter()
                    .map(|i| self.trace_parameters_node(i))
                    .collect(),
            )
            .bounded(),
            NodeKind::Object(members) => {
                let api_call = node.get_ci("type").and_then(Node::as_str).is_some_and(|t| {
                    t.eq_ignore_ascii_case("armApiCall") || t.eq_ignore_ascii_case("apiCall")
                });
                let mut obj = AObject::default();
                for m in members {
                    let value = match (
                        &m.value.kind,
                        api_call && m.key.eq_ignore_ascii_case("value"),
                    ) {
                        (NodeKind::String(s), true) => self.trace_string(
                            s,
                            m.value.span,
                            Ctx {
                                scope: 0,
                                file: FileKind::Parameters,
                            },
                        ),
                        _ => self.trace_parameters_node(&m.value),
                    };
                    obj.set(AMember {
                        key: m.key.clone(),
                        value,
                        site: self.node_site(&m.value, FileKind::Parameters),
                    });
                }
                AVal::Object(obj).bounded()
            }
        })
    }

    pub fn node_site(&self, node: &Node, file: FileKind) -> Option<(FileKind, Span)> {
        self.node_site_of(node.span, file)
    }

    fn node_site_of(&self, span: Span, file: FileKind) -> Option<(FileKind, Span)> {
        (span != Span::default()).then_some((file, span))
    }

    fn trace_string(&self, s: &str, span: Span, ctx: Ctx) -> AVal {
        let text = self.text(ctx.file);
        let raw = text.get(span.range()).unwrap_or_default();
        let precise = raw.len() == s.len() + 2 && raw.get(1..raw.len() - 1) == Some(s);
        let loc = Loc {
            file: ctx.file,
            node: span,
            precise,
        };
        let site = self.node_site_of(span, ctx.file);
        match cairn_expr::parse_template_string(s) {
            Ok(None) => AVal::string_literal(
                &match cairn_expr::classify(s) {
                    cairn_expr::TemplateString::Literal(l) => l.into_owned(),
                    cairn_expr::TemplateString::Expression { .. } => s.to_string(),
                },
                site,
            ),
            Ok(Some(expr)) => {
                let source: Rc<str> = Rc::from(s);
                self.trace_expr(&expr, &source, &loc, ctx)
            }
            Err(e) => AVal::unknown(format!("the expression does not parse ({e})"), site),
        }
    }

    // ----- expressions -----

    fn trace_expr(&self, expr: &Expr, source: &Rc<str>, loc: &Loc, ctx: Ctx) -> AVal {
        let site = loc.site(expr.span);
        self.nested(site, || match &expr.kind {
            ExprKind::String(s) => AVal::string_literal(s, site),
            ExprKind::Int(_) => AVal::literal(site),
            ExprKind::Property { target, name } => self
                .trace_expr(target, source, loc, ctx)
                .property(&name.name),
            ExprKind::Index { target, index } => {
                let target = self.trace_expr(target, source, loc, ctx);
                let key = self.constant_index(index, source, ctx);
                target.index(key.as_ref())
            }
            ExprKind::Call {
                namespace: Some(ns),
                name,
                args,
            } => self.call_user_function(&ns.name, &name.name, args, source, loc, ctx, site),
            ExprKind::Call {
                namespace: None,
                name,
                args,
            } => self.call(&name.name, args, source, loc, ctx, site),
        })
    }

    fn constant_index(&self, index: &Expr, source: &Rc<str>, ctx: Ctx) -> Option<IndexKey> {
        match &index.kind {
            ExprKind::Int(i) => Some(IndexKey::Int(*i)),
            ExprKind::String(s) => Some(IndexKey::Str(s.clone())),
            _ if self.in_function_body() => None,
            // Like `if` conditions: an index a parameter decides may differ in another deployment.
            _ => match self.names(ctx.scope).without_parameters.eval(index, source) {
                Partial::Known(Value::Int(i)) => Some(IndexKey::Int(i)),
                Partial::Known(Value::String(s)) => Some(IndexKey::Str(s)),
                _ => None,
            },
        }
    }

    fn in_function_body(&self) -> bool {
        !self.udf_frames.borrow().is_empty() || !self.lambda_frames.borrow().is_empty()
    }

    /// A literal string argument.
    fn literal_arg(args: &[Expr], i: usize) -> Option<&str> {
        match args.get(i).map(|a| &a.kind) {
            Some(ExprKind::String(s)) => Some(s),
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        name: &str,
        args: &[Expr],
        source: &Rc<str>,
        loc: &Loc,
        ctx: Ctx,
        site: Option<(FileKind, Span)>,
    ) -> AVal {
        let trace = |i: usize| {
            args.get(i)
                .map(|a| self.trace_expr(a, source, loc, ctx))
                .unwrap_or_else(|| AVal::unknown("a missing argument", site))
        };
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "parameters" => match Self::literal_arg(args, 0) {
                Some(p) => self.parameter(p, ctx, site),
                None => AVal::unknown("a parameter chosen by an expression", site),
            },
            "variables" => match Self::literal_arg(args, 0) {
                Some(v) => self.variable(v, ctx, site),
                None => AVal::unknown("a variable chosen by an expression", site),
            },
            "if" if args.len() == 3 => {
                let decided = if self.in_function_body() {
                    Partial::Unknown
                } else {
                    self.names(ctx.scope)
                        .without_parameters
                        .eval(&args[0], source)
                };
                match decided {
                    Partial::Known(Value::Bool(true)) => trace(1),
                    Partial::Known(Value::Bool(false)) => trace(2),
                    _ => AVal::alternatives(vec![
                        ("the 'true' branch of if()".into(), trace(1)),
                        ("the 'false' branch of if()".into(), trace(2)),
                    ]),
                }
            }
            "coalesce" if !args.is_empty() => AVal::alternatives(
                (0..args.len())
                    .map(|i| (format!("argument {} of coalesce()", i + 1), trace(i)))
                    .collect(),
            ),
            "createobject" => self.create_object(args, source, loc, ctx, site),
            "createarray" => AVal::Array((0..args.len()).map(trace).collect()).bounded(),
            "union" | "shallowmerge" => {
                let values: Vec<AVal> = (0..args.len()).map(trace).collect();
                let values = if lower == "shallowmerge" {
                    match values.into_iter().next() {
                        Some(AVal::Array(items)) => items,
                        Some(other) => vec![other],
                        None => Vec::new(),
                    }
                } else {
                    values
                };
                union(values, name)
            }
            "concat" if !args.is_empty() => {
                let values: Vec<AVal> = (0..args.len()).map(trace).collect();
                if values.iter().all(|v| matches!(v, AVal::Array(_))) {
                    AVal::Array(
                        values
                            .into_iter()
                            .flat_map(|v| match v {
                                AVal::Array(items) => items,
                                _ => Vec::new(),
                            })
                            .collect(),
                    )
                    .bounded()
                } else {
                    computed(values, name)
                }
            }
            "json" if args.len() == 1 => match Self::literal_arg(args, 0) {
                Some(text) => match cairn_json::parse(text) {
                    // Parsed literals have no file position: they take the call's.
                    Ok(node) => literal_tree(&node, site),
                    Err(_) => AVal::unknown("json() of text that is not JSON", site),
                },
                None => computed(vec![trace(0)], name),
            },
            "first" | "last" if args.len() == 1 => match trace(0) {
                AVal::Array(items) => {
                    let item = if lower == "first" {
                        items.first()
                    } else {
                        items.last()
                    };
                    item.cloned().unwrap_or_else(|| AVal::literal(site))
                }
                other => computed(vec![other], name),
            },
            "tryget" if !args.is_empty() => {
                let mut value = trace(0);
                for key in &args[1..] {
                    let k = self.constant_index(key, source, ctx);
                    value = value.index(k.as_ref());
                }
                value
            }
            "reference" | "references" | "resourceinfo" => AVal::leaf(Origin::new(
                OriginKind::ReferenceOutput {
                    function: name.to_string(),
                },
                site,
            )),
            "extensions" => self.extensions_value(args, ctx, site, false),
            "extensionconfigs" => self.extensions_value(args, ctx, site, true),
            "lambdavariables" => match Self::literal_arg(args, 0) {
                Some(var) => self
                    .lambda_frames
                    .borrow()
                    .iter()
                    .rev()
                    .find(|(n, _)| n == var)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| {
                        AVal::unknown(format!("the lambda variable '{var}' is not in scope"), site)
                    }),
                None => AVal::unknown("a lambda variable chosen by an expression", site),
            },
            "copyindex" | "null" | "true" | "false" => AVal::literal(site),
            _ if RUNTIME_FACTS.iter().any(|f| f.eq_ignore_ascii_case(name)) => {
                AVal::leaf(Origin::new(
                    OriginKind::Runtime {
                        function: name.to_string(),
                    },
                    site,
                ))
            }
            _ if LAMBDA_FUNCTIONS
                .iter()
                .any(|f| f.eq_ignore_ascii_case(name)) =>
            {
                self.lambda_call(name, args, source, loc, ctx)
            }
            _ => match functions::lookup(name) {
                Some(def) if functions::is_list_function(def) => AVal::leaf(Origin::new(
                    OriginKind::ListOutput {
                        function: name.to_string(),
                    },
                    site,
                )),
                Some(_) if args.is_empty() => AVal::leaf(Origin::new(
                    OriginKind::Runtime {
                        function: name.to_string(),
                    },
                    site,
                )),
                Some(_) => computed((0..args.len()).map(trace).collect(), name),
                None => AVal::unknown(format!("the function '{name}' is not known"), site),
            },
        }
    }

    fn create_object(
        &self,
        args: &[Expr],
        source: &Rc<str>,
        loc: &Loc,
        ctx: Ctx,
        site: Option<(FileKind, Span)>,
    ) -> AVal {
        if !args.len().is_multiple_of(2) {
            return AVal::unknown("createObject() with an odd number of arguments", site);
        }
        let mut obj = AObject::default();
        for pair in args.chunks(2) {
            let value = self.trace_expr(&pair[1], source, loc, ctx);
            let member_site = loc.site(pair[1].span);
            let key = match &pair[0].kind {
                ExprKind::String(s) => Partial::Known(Value::String(s.clone())),
                _ if self.in_function_body() => Partial::Unknown,
                _ => self.names(ctx.scope).with_parameters.eval(&pair[0], source),
            };
            match key {
                Partial::Known(Value::String(key)) => obj.set(AMember {
                    key,
                    value,
                    site: member_site,
                }),
                other => obj.computed.push(ComputedKey {
                    text: source
                        .get(pair[0].span.range())
                        .unwrap_or_default()
                        .to_string(),
                    runtime: other == Partial::Runtime,
                    value,
                    site: loc.site(pair[0].span),
                }),
            }
        }
        AVal::Object(obj).bounded()
    }

    fn lambda_call(
        &self,
        name: &str,
        args: &[Expr],
        source: &Rc<str>,
        loc: &Loc,
        ctx: Ctx,
    ) -> AVal {
        let is_lambda = |a: &Expr| a.is_call_to("lambda");
        let data: Vec<AVal> = args
            .iter()
            .filter(|a| !is_lambda(a))
            .map(|a| self.trace_expr(a, source, loc, ctx))
            .collect();
        // Lambda variables stand for elements (or accumulators) of the data arguments.
        let element = AVal::Leaf(data.iter().flat_map(AVal::origins).collect::<Vec<_>>());
        let mut results = data;
        for lambda in args.iter().filter(|a| is_lambda(a)) {
            let ExprKind::Call { args: parts, .. } = &lambda.kind else {
                continue;
            };
            let Some((body, names)) = parts.split_last() else {
                continue;
            };
            let names: Vec<String> = names
                .iter()
                .filter_map(|n| match &n.kind {
                    ExprKind::String(s) => Some(s.clone()),
                    _ => None,
                })
                .collect();
            let pushed = names.len();
            {
                let mut frames = self.lambda_frames.borrow_mut();
                for n in names {
                    frames.push((n, element.clone()));
                }
            }
            results.push(self.trace_expr(body, source, loc, ctx));
            let mut frames = self.lambda_frames.borrow_mut();
            let keep = frames.len().saturating_sub(pushed);
            frames.truncate(keep);
        }
        computed(results, name)
    }

    #[allow(clippy::too_many_arguments)]
    fn call_user_function(
        &self,
        namespace: &str,
        name: &str,
        args: &[Expr],
        source: &Rc<str>,
        loc: &Loc,
        ctx: Ctx,
        site: Option<(FileKind, Span)>,
    ) -> AVal {
        let full = format!("{namespace}.{name}");
        let udf = self
            .names(ctx.scope)
            .template
            .functions
            .iter()
            .find(|f| {
                f.namespace.eq_ignore_ascii_case(namespace) && f.name.eq_ignore_ascii_case(name)
            })
            .cloned();
        let Some(udf) = udf else {
            return AVal::unknown(
                format!("the user-defined function '{full}' is not declared"),
                site,
            );
        };
        let key = full.to_ascii_lowercase();
        if self.udf_active.borrow().contains(&key) {
            // ARM refuses recursive functions; following one would only multiply work.
            return AVal::unknown(
                format!("the user-defined function '{full}' calls itself"),
                site,
            );
        }
        let frame: Vec<(String, AVal)> = udf
            .parameters
            .iter()
            .zip(args)
            .map(|(p, a)| (p.name.clone(), self.trace_expr(a, source, loc, ctx)))
            .collect();
        self.udf_frames.borrow_mut().push(frame);
        self.udf_active.borrow_mut().push(key);
        // The body runs with only its parameters in scope; lambda variables of the caller are not visible.
        let saved_lambdas = std::mem::take(&mut *self.lambda_frames.borrow_mut());
        let body = self.trace_node(
            &udf.output,
            Ctx {
                scope: ctx.scope,
                file: FileKind::Template,
            },
        );
        *self.lambda_frames.borrow_mut() = saved_lambdas;
        self.udf_frames.borrow_mut().pop();
        self.udf_active.borrow_mut().pop();
        body.transformed(&format!("the user-defined function '{full}'"))
    }

    // ----- names -----

    fn parameter(&self, name: &str, ctx: Ctx, site: Option<(FileKind, Span)>) -> AVal {
        if let Some(frame) = self.udf_frames.borrow().last() {
            return frame
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(n, v)| v.clone().with_via(&format!("function parameter '{n}'")))
                .unwrap_or_else(|| {
                    AVal::unknown(
                        format!("the function parameter '{name}' is not declared"),
                        site,
                    )
                });
        }
        let names_id = self.scopes[ctx.scope].names;
        let scope = &self.scopes[names_id];
        let Some(decl) = scope.template.parameter(name) else {
            return AVal::unknown(format!("the parameter '{name}' is not declared"), site);
        };
        let declared_secure =
            cairn_template::types::is_secure(&decl.node, scope.template.definitions.as_ref());
        let from_key_vault = scope
            .parameter_values
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(name) && matches!(v, ParameterValue::KeyVault(_)));
        if !declared_secure
            && !from_key_vault
            && let Some((bound, value)) = scope
                .bindings
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return value
                .clone()
                .with_via(&format!("module parameter '{bound}'"));
        }
        AVal::leaf(Origin::new(
            OriginKind::Parameter {
                name: decl.name.clone(),
                secure: declared_secure || from_key_vault,
                from_key_vault,
            },
            site,
        ))
    }

    fn variable(&self, name: &str, ctx: Ctx, site: Option<(FileKind, Span)>) -> AVal {
        if !self.udf_frames.borrow().is_empty() {
            return AVal::unknown("a variable read inside a user-defined function", site);
        }
        let names_id = self.scopes[ctx.scope].names;
        let scope = &self.scopes[names_id];
        let Some(decl) = scope.template.variable(name) else {
            return AVal::unknown(format!("the variable '{name}' is not declared"), site);
        };
        let key = decl.name.to_ascii_lowercase();
        let step = format!("variable '{}'", decl.name);
        if let Some(cached) = scope.variable_cache.borrow().get(&key) {
            return cached.clone().with_via(&step);
        }
        if scope.variables_active.borrow().contains(&key) {
            return AVal::unknown(
                format!("the variable '{}' refers to itself", decl.name),
                site,
            );
        }
        scope.variables_active.borrow_mut().push(key.clone());
        // Lambda variables of the reader are not visible in the variable's own expression.
        let saved_lambdas = std::mem::take(&mut *self.lambda_frames.borrow_mut());
        let var_ctx = Ctx {
            scope: names_id,
            file: FileKind::Template,
        };
        let value = match &decl.value {
            VariableValue::Plain(node) => self.trace_node(node, var_ctx),
            VariableValue::Copy { input, .. } => AVal::Array(vec![self.trace_node(input, var_ctx)]),
        };
        *self.lambda_frames.borrow_mut() = saved_lambdas;
        scope.variables_active.borrow_mut().pop();
        scope.variable_cache.borrow_mut().insert(key, value.clone());
        value.with_via(&step)
    }

    /// `extensions('alias')` (`{ name, version, config }`) or `extensionConfigs('alias')` (the config) of the
    /// deployment the expression runs in.
    fn extensions_value(
        &self,
        args: &[Expr],
        ctx: Ctx,
        site: Option<(FileKind, Span)>,
        config_only: bool,
    ) -> AVal {
        let Some(alias) = Self::literal_arg(args, 0) else {
            return AVal::unknown("an extension alias chosen by an expression", site);
        };
        let template = &self.scopes[ctx.scope].template;
        let Some(decl) = template.extension(alias) else {
            return AVal::unknown(
                format!("the extension alias '{alias}' is not declared in this template"),
                site,
            );
        };
        let config = AVal::leaf(Origin::new(
            OriginKind::Inherited {
                scope: ctx.scope,
                alias: decl.alias.clone(),
                path: Vec::new(),
            },
            site,
        ));
        if config_only {
            return config;
        }
        let mut obj = AObject::default();
        for (key, value) in [
            ("name", AVal::string_literal(&decl.name, site)),
            ("version", AVal::string_literal(&decl.version, site)),
            ("config", config),
        ] {
            obj.set(AMember {
                key: key.to_string(),
                value,
                site,
            });
        }
        AVal::Object(obj)
    }
}

/// Names of the variables a JSON value reads with `variables('name')`.
fn variable_reads(node: &Node, out: &mut Vec<String>) {
    match &node.kind {
        NodeKind::String(s) => {
            if let Ok(Some(expr)) = cairn_expr::parse_template_string(s) {
                expr.walk(&mut |e| {
                    if e.is_call_to("variables")
                        && let ExprKind::Call { args, .. } = &e.kind
                        && let Some(ExprKind::String(name)) = args.first().map(|a| &a.kind)
                    {
                        out.push(name.clone());
                    }
                });
            }
        }
        NodeKind::Array(items) => items.iter().for_each(|i| variable_reads(i, out)),
        NodeKind::Object(members) => members.iter().for_each(|m| {
            if let Ok(Some(expr)) = cairn_expr::parse_template_string(&m.key) {
                expr.walk(&mut |e| {
                    if e.is_call_to("variables")
                        && let ExprKind::Call { args, .. } = &e.kind
                        && let Some(ExprKind::String(name)) = args.first().map(|a| &a.kind)
                    {
                        out.push(name.clone());
                    }
                });
            }
            variable_reads(&m.value, out)
        }),
        NodeKind::Null | NodeKind::Bool(_) | NodeKind::Number(_) => {}
    }
}

/// A value computed by `function` from `inputs`; with no inputs, a deployment-time fact.
fn computed(inputs: Vec<AVal>, function: &str) -> AVal {
    let origins: Vec<Origin> = inputs.iter().flat_map(AVal::origins).collect();
    if origins.is_empty() {
        return AVal::leaf(Origin::new(
            OriginKind::Runtime {
                function: function.to_string(),
            },
            None,
        ));
    }
    AVal::Leaf(origins).transformed(&format!("{function}()"))
}

/// `union()` of objects (later keys win) or arrays (concatenated); anything else spreads in as unknown keys.
fn union(values: Vec<AVal>, function: &str) -> AVal {
    // Branches distribute: union(if(c, a, b), x) is if(c, union(a, x), union(b, x)), so each branch keeps its keys.
    let combinations = values.iter().try_fold(1usize, |n, v| match v {
        AVal::Alt(b) => n.checked_mul(b.len()),
        _ => Some(n),
    });
    if combinations.is_some_and(|n| n > 1 && n <= crate::origin::MAX_ALTERNATIVES)
        && let Some(at) = values.iter().position(|v| matches!(v, AVal::Alt(_)))
    {
        let AVal::Alt(branches) = &values[at] else {
            return AVal::unknown("union() of branches", None);
        };
        return AVal::alternatives(
            branches
                .iter()
                .map(|(label, branch)| {
                    let mut picked = values.clone();
                    picked[at] = branch.clone();
                    (label.clone(), union(picked, function))
                })
                .collect(),
        );
    }
    if !values.is_empty() && values.iter().all(|v| matches!(v, AVal::Array(_))) {
        return AVal::Array(
            values
                .into_iter()
                .flat_map(|v| match v {
                    AVal::Array(items) => items,
                    _ => Vec::new(),
                })
                .collect(),
        )
        .bounded();
    }
    let mut obj = AObject::default();
    for value in values {
        match value {
            AVal::Object(o) => {
                for m in o.members {
                    obj.set(m);
                }
                obj.computed.extend(o.computed);
                obj.tail.extend(o.tail);
            }
            AVal::Leaf(origins) => obj.tail.extend(origins),
            other @ (AVal::Alt(_) | AVal::Array(_)) => {
                // Branches or arrays merged into an object: their keys are not known here.
                let note = format!("{function}()");
                obj.tail.extend(other.origins().into_iter().map(|mut o| {
                    o.via.push(format!("an argument of {note}"));
                    o
                }));
            }
        }
    }
    obj.tail = crate::origin::dedup(obj.tail);
    AVal::Object(obj).bounded()
}

/// A literal JSON tree (from `json('...')`): every leaf a literal at `site`.
fn literal_tree(node: &Node, site: Option<(FileKind, Span)>) -> AVal {
    match &node.kind {
        NodeKind::String(s) => AVal::string_literal(s, site),
        NodeKind::Null | NodeKind::Bool(_) | NodeKind::Number(_) => AVal::literal(site),
        NodeKind::Array(items) => {
            AVal::Array(items.iter().map(|i| literal_tree(i, site)).collect()).bounded()
        }
        NodeKind::Object(members) => {
            let mut obj = AObject::default();
            for m in members {
                obj.set(AMember {
                    key: m.key.clone(),
                    value: literal_tree(&m.value, site),
                    site,
                });
            }
            AVal::Object(obj).bounded()
        }
    }
}
